/* tir_text.c: the TIR verifier, the C-like printer and the JSON form. */
#include "ir_private.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const binop_names[] = {
#define TTH__BIN_NAME(e, s) s,
    TTH_TIR_BINOPS(TTH__BIN_NAME)
#undef TTH__BIN_NAME
};
#define NBINOPS (sizeof binop_names / sizeof binop_names[0])

static const struct {
    const char *name;
    int nargs;
} intrin_info[] = {
#define TTH__INTRIN_INFO(e, s, n) {s, n},
    TTH_TIR_INTRINS(TTH__INTRIN_INFO)
#undef TTH__INTRIN_INFO
};
#define NINTRINS (sizeof intrin_info / sizeof intrin_info[0])

static const char *scope_name(tth_buffer_scope s)
{
    switch (s) {
    case TTH_SCOPE_PARAM: return "param";
    case TTH_SCOPE_LOCAL: return "local";
    case TTH_SCOPE_WORKSPACE: return "workspace";
    case TTH_SCOPE_CONST: return "const";
    case TTH_SCOPE_INPUT: return "input";
    case TTH_SCOPE_OUTPUT: return "output";
    case TTH_SCOPE_REGISTER: return "register";
    }
    return "?";
}

static const char *loop_name(tth_loop_kind k)
{
    switch (k) {
    case TTH_LOOP_SERIAL: return "serial";
    case TTH_LOOP_PARALLEL: return "parallel";
    case TTH_LOOP_VECTORIZED: return "vectorized";
    case TTH_LOOP_UNROLLED: return "unrolled";
    }
    return "?";
}

static int binop_is_infix(tth_tir_binop op)
{
    return op != TTH_TBIN_FLOORDIV && op != TTH_TBIN_FLOORMOD && op != TTH_TBIN_MIN && op != TTH_TBIN_MAX;
}

/* ---- verifier ---- */

typedef struct vctx {
    const tth_tir_module *m;
    const tth_prim_func *f;
    const tth_tvar **vars;      /* bound now (loop/let), a stack */
    size_t nvars, capvars;
    const tth_tbuffer **bufs;   /* allocated now, a stack */
    size_t nbufs, capbufs;
    char loc[TTH_DIAG_LOCATION_MAX];
    tth_diag *diag;
} vctx;

__attribute__((format(printf, 3, 4))) static int vfail(vctx *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tth_diag_vset(c->diag, code, c->loc, fmt, ap);
    va_end(ap);
    return code;
}

static int push_ptr(const void ***arr, size_t *n, size_t *cap, const void *p)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        const void **na = realloc(*arr, nc * sizeof *na);
        if (!na)
            return TTH_ENOMEM;
        *arr = na;
        *cap = nc;
    }
    (*arr)[(*n)++] = p;
    return 0;
}

static int var_bound(const vctx *c, const tth_tvar *v)
{
    for (size_t i = c->nvars; i-- > 0;)
        if (c->vars[i] == v)
            return 1;
    return 0;
}

static int buffer_ok(vctx *c, const tth_tbuffer *b)
{
    if (!b)
        return vfail(c, TTH_EINVAL, "a NULL buffer");
    if (!tth__is_c_ident(b->name))
        return vfail(c, TTH_EINVAL, "buffer name '%s' is not a C identifier", b->name ? b->name : "(null)");
    switch (b->scope) {
    case TTH_SCOPE_CONST:
        if (!b->data)
            return vfail(c, TTH_EINVAL, "constant buffer %s has no data", b->name);
        return 0;
    case TTH_SCOPE_WORKSPACE:
        return 0;
    default:
        break;
    }
    for (size_t i = 0; i < c->f->nparams; i++)
        if (c->f->params[i] == b)
            return 0;
    for (size_t i = c->nbufs; i-- > 0;)
        if (c->bufs[i] == b)
            return 0;
    return vfail(c, TTH_EINVAL, "buffer %s (%s) is neither a parameter of %s nor allocated around its use", b->name,
                 scope_name(b->scope), c->f->name);
}

static int is_int_dtype(tth_dtype t)
{
    return tth_dtype_size(t) && !tth_dtype_is_float(t);
}

static int check_index(vctx *c, const tth_tbuffer *b, const tth_texpr *index);

static int verify_expr(vctx *c, const tth_texpr *e)
{
    if (!e)
        return vfail(c, TTH_EINVAL, "a NULL expression");
    int rc;
    switch (e->kind) {
    case TTH_TEXPR_INT:
        if (!is_int_dtype(e->dtype))
            return vfail(c, TTH_ETYPE, "integer immediate of dtype %s", tth_dtype_name(e->dtype));
        return 0;
    case TTH_TEXPR_FLOAT:
        if (!tth_dtype_is_float(e->dtype))
            return vfail(c, TTH_ETYPE, "float immediate of dtype %s", tth_dtype_name(e->dtype));
        return 0;
    case TTH_TEXPR_VAR:
        if (!e->u.var)
            return vfail(c, TTH_EINVAL, "a NULL variable");
        if (!var_bound(c, e->u.var))
            return vfail(c, TTH_EINVAL, "variable %s is used outside the loop or let that binds it", e->u.var->name);
        if (e->dtype != e->u.var->dtype || e->lanes != e->u.var->lanes)
            return vfail(c, TTH_ETYPE, "variable %s is %s x%d but used as %s x%d", e->u.var->name,
                         tth_dtype_name(e->u.var->dtype), (int)e->u.var->lanes, tth_dtype_name(e->dtype),
                         (int)e->lanes);
        return 0;
    case TTH_TEXPR_LOAD:
    case TTH_TEXPR_ADDRESS_OF:
        if ((rc = buffer_ok(c, e->u.load.buf)) || (rc = verify_expr(c, e->u.load.index)) ||
            (rc = check_index(c, e->u.load.buf, e->u.load.index)))
            return rc;
        if (e->dtype != e->u.load.buf->dtype)
            return vfail(c, TTH_ETYPE, "load from %s (%s) typed %s", e->u.load.buf->name,
                         tth_dtype_name(e->u.load.buf->dtype), tth_dtype_name(e->dtype));
        if (e->lanes != e->u.load.index->lanes || (e->kind == TTH_TEXPR_ADDRESS_OF && e->lanes != 1))
            return vfail(c, TTH_ETYPE, "%s %s: lanes %d with an index of %d lanes",
                         e->kind == TTH_TEXPR_LOAD ? "load from" : "address of", e->u.load.buf->name,
                         (int)e->lanes, (int)e->u.load.index->lanes);
        return 0;
    case TTH_TEXPR_BINARY: {
        if ((unsigned)e->u.bin.op >= NBINOPS)
            return vfail(c, TTH_EINVAL, "unknown binary operator %d", (int)e->u.bin.op);
        if ((rc = verify_expr(c, e->u.bin.a)) || (rc = verify_expr(c, e->u.bin.b)))
            return rc;
        tth_dtype a = e->u.bin.a->dtype, b = e->u.bin.b->dtype;
        if (a != b)
            return vfail(c, TTH_ETYPE, "operands of '%s' differ in dtype: %s and %s", binop_names[e->u.bin.op],
                         tth_dtype_name(a), tth_dtype_name(b));
        if (e->u.bin.a->lanes != e->lanes || e->u.bin.b->lanes != e->lanes)
            return vfail(c, TTH_ETYPE, "operands of '%s' have %d and %d lanes, the result %d", binop_names[e->u.bin.op],
                         (int)e->u.bin.a->lanes, (int)e->u.bin.b->lanes, (int)e->lanes);
        tth_tir_binop op = e->u.bin.op;
        if ((op == TTH_TBIN_MOD || op == TTH_TBIN_SHL || op == TTH_TBIN_SHR || op == TTH_TBIN_BITAND ||
             op == TTH_TBIN_BITOR) &&
            !is_int_dtype(a))
            return vfail(c, TTH_ETYPE, "'%s' needs integer operands, got %s", binop_names[op], tth_dtype_name(a));
        return 0;
    }
    case TTH_TEXPR_UNARY:
        if ((rc = verify_expr(c, e->u.un.a)))
            return rc;
        return e->u.un.a->lanes == e->lanes ? 0 : vfail(c, TTH_ETYPE, "unary operator changes the lanes");
    case TTH_TEXPR_SELECT:
        if ((rc = verify_expr(c, e->u.select.cond)) || (rc = verify_expr(c, e->u.select.a)) ||
            (rc = verify_expr(c, e->u.select.b)))
            return rc;
        if (e->u.select.a->dtype != e->u.select.b->dtype)
            return vfail(c, TTH_ETYPE, "select branches differ in dtype: %s and %s",
                         tth_dtype_name(e->u.select.a->dtype), tth_dtype_name(e->u.select.b->dtype));
        if (!is_int_dtype(e->u.select.cond->dtype))
            return vfail(c, TTH_ETYPE, "select condition is %s", tth_dtype_name(e->u.select.cond->dtype));
        if (e->u.select.a->lanes != e->lanes || e->u.select.b->lanes != e->lanes ||
            (e->u.select.cond->lanes != 1 && e->u.select.cond->lanes != e->lanes))
            return vfail(c, TTH_ETYPE, "select: condition, branches and result differ in lanes");
        return 0;
    case TTH_TEXPR_CAST:
        if (!tth_dtype_size(e->dtype))
            return vfail(c, TTH_ETYPE, "cast to an invalid dtype");
        if ((rc = verify_expr(c, e->u.cast.value)))
            return rc;
        return e->u.cast.value->lanes == e->lanes ? 0 : vfail(c, TTH_ETYPE, "a cast changes the lanes");
    case TTH_TEXPR_REINTERPRET:
        if ((rc = verify_expr(c, e->u.cast.value)))
            return rc;
        if (e->dtype == TTH_BOOL || e->u.cast.value->dtype == TTH_BOOL || e->dtype == TTH_F16 ||
            e->dtype == TTH_BF16 || e->u.cast.value->dtype == TTH_F16 || e->u.cast.value->dtype == TTH_BF16 ||
            !tth_dtype_size(e->dtype) ||
            tth_dtype_size(e->dtype) != tth_dtype_size(e->u.cast.value->dtype))
            return vfail(c, TTH_ETYPE, "reinterpret from %s to %s: not two integer or float32/float64 types of one size",
                         tth_dtype_name(e->u.cast.value->dtype), tth_dtype_name(e->dtype));
        return e->u.cast.value->lanes == e->lanes ? 0 : vfail(c, TTH_ETYPE, "a reinterpret changes the lanes");
    case TTH_TEXPR_INTRIN: {
        if ((unsigned)e->u.intrin.op >= NINTRINS)
            return vfail(c, TTH_EINVAL, "unknown intrinsic %d", (int)e->u.intrin.op);
        tth_tir_intrin_op op = e->u.intrin.op;
        int n = intrin_info[op].nargs;
        int reduce = op == TTH_TINTRIN_REDUCE_ADD || op == TTH_TINTRIN_REDUCE_MAX || op == TTH_TINTRIN_REDUCE_MIN;
        int dot = op == TTH_TINTRIN_DOT4_US || op == TTH_TINTRIN_DOT4_SS;
        for (int i = 0; i < 3; i++) {
            const tth_texpr *a = e->u.intrin.args[i];
            if (i >= n) {
                if (a)
                    return vfail(c, TTH_EINVAL, "%s takes %d argument", intrin_info[op].name, n);
                continue;
            }
            if ((rc = verify_expr(c, a)))
                return rc;
            if (dot && a->dtype != TTH_I32)
                return vfail(c, TTH_ETYPE, "%s needs int32 arguments (four bytes a lane), got %s",
                             intrin_info[op].name, tth_dtype_name(a->dtype));
            if (!reduce && !dot && op != TTH_TINTRIN_FMA && a->dtype != TTH_F32 && a->dtype != TTH_F64)
                return vfail(c, TTH_ETYPE, "%s needs float32 or float64 arguments, got %s", intrin_info[op].name,
                             tth_dtype_name(a->dtype));
            if (op == TTH_TINTRIN_FMA && !tth_dtype_is_float(a->dtype))
                return vfail(c, TTH_ETYPE, "fma needs float arguments, got %s", tth_dtype_name(a->dtype));
            if (a->dtype != e->dtype)
                return vfail(c, TTH_ETYPE, "%s argument dtype differs from its result", intrin_info[op].name);
            if (reduce ? e->lanes != 1 || a->lanes < 2 : a->lanes != e->lanes)
                return vfail(c, TTH_ETYPE, reduce ? "%s folds a vector into a scalar"
                                                  : "%s argument lanes differ from its result",
                             intrin_info[op].name);
        }
        return 0;
    }
    case TTH_TEXPR_RAMP:
        if ((rc = verify_expr(c, e->u.ramp.base)))
            return rc;
        if (e->dtype != TTH_I64 || e->u.ramp.base->dtype != TTH_I64 || e->u.ramp.base->lanes != 1 || e->lanes < 2)
            return vfail(c, TTH_ETYPE, "a ramp is an int64 vector of 2 or more lanes from a scalar int64 base");
        return 0;
    case TTH_TEXPR_BROADCAST:
        if ((rc = verify_expr(c, e->u.bcast.value)))
            return rc;
        if (e->u.bcast.value->lanes != 1 || e->lanes < 2 || e->dtype != e->u.bcast.value->dtype)
            return vfail(c, TTH_ETYPE, "a broadcast repeats one scalar of its dtype in 2 or more lanes");
        return 0;
    case TTH_TEXPR_CALL_EXTERN:
        if (!tth__is_c_ident(e->u.call.name))
            return vfail(c, TTH_EINVAL, "call_extern name '%s' is not a C identifier",
                         e->u.call.name ? e->u.call.name : "(null)");
        for (size_t i = 0; i < e->u.call.nargs; i++) {
            if ((rc = verify_expr(c, e->u.call.args[i])))
                return rc;
            if (e->u.call.args[i]->lanes != 1)
                return vfail(c, TTH_ETYPE, "call_extern %s: argument %zu is a vector", e->u.call.name, i);
        }
        return e->lanes == 1 ? 0 : vfail(c, TTH_ETYPE, "call_extern %s returns a vector", e->u.call.name);
    }
    return vfail(c, TTH_EINVAL, "unknown expression kind %d", (int)e->kind);
}

static int check_index(vctx *c, const tth_tbuffer *b, const tth_texpr *index)
{
    if (!is_int_dtype(index->dtype) || index->dtype == TTH_BOOL)
        return vfail(c, TTH_ETYPE, "index into %s is %s, not an integer", b->name, tth_dtype_name(index->dtype));
    const tth_texpr *k = index->kind == TTH_TEXPR_RAMP ? index->u.ramp.base : index;
    if (k->kind == TTH_TEXPR_INT) {
        int64_t n = tth_tbuffer_numel(b);
        int64_t last = k->u.i + (index->kind == TTH_TEXPR_RAMP ? index->u.ramp.stride * (index->lanes - 1) : 0);
        if (k->u.i < 0 || k->u.i >= n || last < 0 || last >= n)
            return vfail(c, TTH_EINVAL, "constant index %lld is out of bounds for %s (%lld elements)",
                         (long long)(k->u.i < 0 || k->u.i >= n ? k->u.i : last), b->name, (long long)n);
    }
    return 0;
}

static int verify_stmt(vctx *c, const tth_tstmt *s)
{
    if (!s)
        return vfail(c, TTH_EINVAL, "a NULL statement");
    int rc;
    switch (s->kind) {
    case TTH_TSTMT_SEQ:
        for (size_t i = 0; i < s->u.seq.n; i++)
            if ((rc = verify_stmt(c, s->u.seq.stmts[i])))
                return rc;
        return 0;
    case TTH_TSTMT_FOR: {
        const tth_tvar *v = s->u.loop.var;
        if (!v || !tth__is_c_ident(v->name))
            return vfail(c, TTH_EINVAL, "loop variable '%s' is not a C identifier", v && v->name ? v->name : "(null)");
        if (!is_int_dtype(v->dtype) || v->dtype == TTH_BOOL)
            return vfail(c, TTH_ETYPE, "loop variable %s is %s, not an integer", v->name, tth_dtype_name(v->dtype));
        if ((rc = verify_expr(c, s->u.loop.min)) || (rc = verify_expr(c, s->u.loop.extent)))
            return rc;
        if (s->u.loop.min->dtype != v->dtype || s->u.loop.extent->dtype != v->dtype || v->lanes != 1 ||
            s->u.loop.min->lanes != 1 || s->u.loop.extent->lanes != 1)
            return vfail(c, TTH_ETYPE, "loop %s: bounds must be scalar %s like the variable", v->name,
                         tth_dtype_name(v->dtype));
        if (var_bound(c, v))
            return vfail(c, TTH_EINVAL, "variable %s is bound again inside its own scope", v->name);
        if ((unsigned)s->u.loop.loop > TTH_LOOP_UNROLLED)
            return vfail(c, TTH_EINVAL, "loop %s has an unknown kind %d", v->name, (int)s->u.loop.loop);
        if (push_ptr((const void ***)&c->vars, &c->nvars, &c->capvars, v))
            return vfail(c, TTH_ENOMEM, "out of memory");
        rc = verify_stmt(c, s->u.loop.body);
        c->nvars--;
        return rc;
    }
    case TTH_TSTMT_STORE:
        if ((rc = buffer_ok(c, s->u.store.buf)) || (rc = verify_expr(c, s->u.store.index)) ||
            (rc = check_index(c, s->u.store.buf, s->u.store.index)) || (rc = verify_expr(c, s->u.store.value)))
            return rc;
        if (s->u.store.buf->scope == TTH_SCOPE_CONST)
            return vfail(c, TTH_EINVAL, "store into the constant buffer %s", s->u.store.buf->name);
        if (s->u.store.value->dtype != s->u.store.buf->dtype)
            return vfail(c, TTH_ETYPE, "store of a %s value into %s (%s)", tth_dtype_name(s->u.store.value->dtype),
                         s->u.store.buf->name, tth_dtype_name(s->u.store.buf->dtype));
        if (s->u.store.value->lanes != s->u.store.index->lanes)
            return vfail(c, TTH_ETYPE, "store into %s: a value of %d lanes at an index of %d", s->u.store.buf->name,
                         (int)s->u.store.value->lanes, (int)s->u.store.index->lanes);
        return 0;
    case TTH_TSTMT_ALLOCATE: {
        const tth_tbuffer *b = s->u.alloc.buf;
        if (!b || (b->scope != TTH_SCOPE_LOCAL && b->scope != TTH_SCOPE_REGISTER))
            return vfail(c, TTH_EINVAL, "allocate of %s, which is not a local or register buffer",
                         b ? b->name : "(null)");
        if (!tth__is_c_ident(b->name))
            return vfail(c, TTH_EINVAL, "buffer name '%s' is not a C identifier", b->name);
        if (push_ptr((const void ***)&c->bufs, &c->nbufs, &c->capbufs, b))
            return vfail(c, TTH_ENOMEM, "out of memory");
        rc = verify_stmt(c, s->u.alloc.body);
        c->nbufs--;
        return rc;
    }
    case TTH_TSTMT_IF:
        if ((rc = verify_expr(c, s->u.cond.cond)))
            return rc;
        if (!is_int_dtype(s->u.cond.cond->dtype) || s->u.cond.cond->lanes != 1)
            return vfail(c, TTH_ETYPE, "if condition is %s x%d, not a scalar", tth_dtype_name(s->u.cond.cond->dtype),
                         (int)s->u.cond.cond->lanes);
        if ((rc = verify_stmt(c, s->u.cond.then_s)))
            return rc;
        return s->u.cond.else_s ? verify_stmt(c, s->u.cond.else_s) : 0;
    case TTH_TSTMT_LET: {
        const tth_tvar *v = s->u.let.var;
        if (!v || !tth__is_c_ident(v->name))
            return vfail(c, TTH_EINVAL, "let variable '%s' is not a C identifier", v && v->name ? v->name : "(null)");
        if ((rc = verify_expr(c, s->u.let.value)))
            return rc;
        if (s->u.let.value->dtype != v->dtype || s->u.let.value->lanes != v->lanes)
            return vfail(c, TTH_ETYPE, "let %s: a %s x%d value bound to a %s x%d variable", v->name,
                         tth_dtype_name(s->u.let.value->dtype), (int)s->u.let.value->lanes, tth_dtype_name(v->dtype),
                         (int)v->lanes);
        if (var_bound(c, v))
            return vfail(c, TTH_EINVAL, "variable %s is bound again inside its own scope", v->name);
        if (push_ptr((const void ***)&c->vars, &c->nvars, &c->capvars, v))
            return vfail(c, TTH_ENOMEM, "out of memory");
        rc = verify_stmt(c, s->u.let.body);
        c->nvars--;
        return rc;
    }
    case TTH_TSTMT_EVALUATE:
        return verify_expr(c, s->u.eval.value);
    case TTH_TSTMT_CALL_FUNC: {
        const tth_prim_func *g = tth_tir_module_find(c->m, s->u.call.func);
        if (!g)
            return vfail(c, TTH_EUNKNOWN, "call of %s, which is not a PrimFunc of the module",
                         s->u.call.func ? s->u.call.func : "(null)");
        if (g->nparams != s->u.call.nargs)
            return vfail(c, TTH_ETYPE, "%s takes %zu buffers, the call passes %zu", g->name, g->nparams,
                         s->u.call.nargs);
        for (size_t i = 0; i < s->u.call.nargs; i++)
            if ((rc = buffer_ok(c, s->u.call.args[i])))
                return rc;
        return 0;
    }
    }
    return vfail(c, TTH_EINVAL, "unknown statement kind %d", (int)s->kind);
}

int tth_tir_verify(const tth_tir_module *m, tth_diag *diag)
{
    if (!m)
        return tth_diag_set(diag, TTH_EINVAL, NULL, "no module");
    vctx c = {.m = m, .diag = diag};
    int rc = 0;
    for (size_t i = 0; i < m->nfuncs && !rc; i++) {
        const tth_prim_func *f = m->funcs[i];
        c.f = f;
        snprintf(c.loc, sizeof c.loc, "prim_func %s", f->name ? f->name : "(null)");
        if (!tth__is_c_ident(f->name)) {
            rc = vfail(&c, TTH_EINVAL, "PrimFunc name '%s' is not a C identifier", f->name ? f->name : "(null)");
            break;
        }
        for (size_t k = 0; k < i && !rc; k++)
            if (strcmp(m->funcs[k]->name, f->name) == 0)
                rc = vfail(&c, TTH_EDUPLICATE, "two PrimFuncs are named %s", f->name);
        for (size_t k = 0; k < f->nparams && !rc; k++) {
            const tth_tbuffer *b = f->params[k];
            if (!b)
                rc = vfail(&c, TTH_EINVAL, "parameter %zu is NULL", k);
            else if (!tth__is_c_ident(b->name))
                rc = vfail(&c, TTH_EINVAL, "buffer name '%s' is not a C identifier", b->name);
            else if (b->scope != TTH_SCOPE_PARAM && b->scope != TTH_SCOPE_INPUT && b->scope != TTH_SCOPE_OUTPUT)
                rc = vfail(&c, TTH_EINVAL, "parameter %s has scope %s", b->name, scope_name(b->scope));
            for (size_t l = 0; l < k && !rc; l++)
                if (f->params[l] == b)
                    rc = vfail(&c, TTH_EDUPLICATE, "buffer %s is a parameter twice", b->name);
        }
        if (!rc)
            rc = verify_stmt(&c, f->body);
    }
    if (!rc && m->entry && !tth_tir_module_find(m, m->entry))
        rc = tth_diag_set(diag, TTH_EUNKNOWN, "tir module", "the entry %s is not a PrimFunc of the module", m->entry);
    free(c.vars);
    free(c.bufs);
    return rc;
}

/* ---- printer ---- */

static void print_float(tth_strbuf *b, tth_dtype dt, double v)
{
    if (isnan(v)) {
        tth_strbuf_puts(b, "NAN");
        return;
    }
    if (isinf(v)) {
        tth_strbuf_puts(b, v < 0 ? "-INFINITY" : "INFINITY");
        return;
    }
    char buf[48];
    snprintf(buf, sizeof buf, dt == TTH_F64 ? "%.17g" : "%.9g", v);
    tth_strbuf_puts(b, buf);
    if (!strpbrk(buf, ".eEn"))
        tth_strbuf_puts(b, ".0");
    if (dt == TTH_F32)
        tth_strbuf_puts(b, "f");
    else if (dt == TTH_F16)
        tth_strbuf_puts(b, "h");
    else if (dt == TTH_BF16)
        tth_strbuf_puts(b, "bf");
}

static void print_expr(tth_strbuf *b, const tth_texpr *e);

/* open, the n expressions with sep between them, close. */
static void print_list(tth_strbuf *b, const char *open, tth_texpr *const *es, size_t n, const char *sep,
                       const char *close)
{
    tth_strbuf_puts(b, open);
    for (size_t i = 0; i < n; i++) {
        if (i)
            tth_strbuf_puts(b, sep);
        print_expr(b, es[i]);
    }
    tth_strbuf_puts(b, close);
}

static void print_expr(tth_strbuf *b, const tth_texpr *e)
{
    if (!e) {
        tth_strbuf_puts(b, "<null>");
        return;
    }
    switch (e->kind) {
    case TTH_TEXPR_INT:
        if (e->dtype == TTH_BOOL)
            tth_strbuf_puts(b, e->u.i ? "true" : "false");
        else if (e->dtype == TTH_I64)
            tth_strbuf_printf(b, "%" PRId64, e->u.i);
        else if (e->dtype == TTH_U64)
            tth_strbuf_printf(b, "(uint64)%" PRIu64, (uint64_t)e->u.i);
        else
            tth_strbuf_printf(b, "(%s)%" PRId64, tth_dtype_name(e->dtype), e->u.i);
        return;
    case TTH_TEXPR_FLOAT:
        print_float(b, e->dtype, e->u.f);
        return;
    case TTH_TEXPR_VAR:
        tth_strbuf_puts(b, e->u.var ? e->u.var->name : "<null>");
        return;
    case TTH_TEXPR_LOAD:
    case TTH_TEXPR_ADDRESS_OF:
        tth_strbuf_printf(b, "%s%s", e->kind == TTH_TEXPR_ADDRESS_OF ? "&" : "", e->u.load.buf->name);
        print_list(b, "[", &e->u.load.index, 1, "", "]");
        return;
    case TTH_TEXPR_BINARY: {
        const char *name = (unsigned)e->u.bin.op < NBINOPS ? binop_names[e->u.bin.op] : "?";
        tth_texpr *const ab[] = {e->u.bin.a, e->u.bin.b};
        if (binop_is_infix(e->u.bin.op)) {
            char sep[16];
            snprintf(sep, sizeof sep, " %s ", name);
            print_list(b, "(", ab, 2, sep, ")");
        } else {
            tth_strbuf_puts(b, name);
            print_list(b, "(", ab, 2, ", ", ")");
        }
        return;
    }
    case TTH_TEXPR_UNARY:
        print_list(b, e->u.un.op == TTH_TUN_NEG ? "(-" : "(!", &e->u.un.a, 1, "", ")");
        return;
    case TTH_TEXPR_SELECT:
        print_list(b, "(", &e->u.select.cond, 1, "", " ? ");
        print_list(b, "", &e->u.select.a, 1, "", " : ");
        print_list(b, "", &e->u.select.b, 1, "", ")");
        return;
    case TTH_TEXPR_CAST:
    case TTH_TEXPR_REINTERPRET:
        tth_strbuf_printf(b, e->kind == TTH_TEXPR_CAST ? "(%s" : "reinterpret<%s", tth_dtype_name(e->dtype));
        if (e->lanes > 1)
            tth_strbuf_printf(b, "x%d", (int)e->lanes);
        print_list(b, e->kind == TTH_TEXPR_CAST ? ")(" : ">(", &e->u.cast.value, 1, "", ")");
        return;
    case TTH_TEXPR_INTRIN: {
        unsigned op = (unsigned)e->u.intrin.op;
        int nargs = op < NINTRINS ? intrin_info[op].nargs : 1;
        tth_strbuf_puts(b, op < NINTRINS ? intrin_info[op].name : "?");
        print_list(b, "(", e->u.intrin.args, (size_t)(nargs < 3 ? nargs : 3), ", ", ")");
        return;
    }
    case TTH_TEXPR_RAMP:
        print_list(b, "ramp(", &e->u.ramp.base, 1, "", "");
        tth_strbuf_printf(b, ", %" PRId64 ", %d)", e->u.ramp.stride, (int)e->lanes);
        return;
    case TTH_TEXPR_BROADCAST:
        print_list(b, "broadcast(", &e->u.bcast.value, 1, "", "");
        tth_strbuf_printf(b, ", %d)", (int)e->lanes);
        return;
    case TTH_TEXPR_CALL_EXTERN:
        tth_strbuf_puts(b, e->u.call.name);
        print_list(b, "(", e->u.call.args, e->u.call.nargs, ", ", ")");
        return;
    }
    tth_strbuf_puts(b, "<?>");
}

static void print_shape(tth_strbuf *b, const tth_tbuffer *buf)
{
    tth_strbuf_puts(b, "[");
    for (int32_t i = 0; i < buf->rank; i++)
        tth_strbuf_printf(b, "%s%" PRId64, i ? ", " : "", buf->shape[i]);
    tth_strbuf_puts(b, "]");
}

static void print_stmt(tth_strbuf *b, const tth_tstmt *s, int level)
{
    if (!s) {
        tth_strbuf_spaces(b, 2 * level);
        tth_strbuf_puts(b, "<null>;\n");
        return;
    }
    switch (s->kind) {
    case TTH_TSTMT_SEQ:
        for (size_t i = 0; i < s->u.seq.n; i++)
            print_stmt(b, s->u.seq.stmts[i], level);
        return;
    case TTH_TSTMT_FOR: {
        const char *v = s->u.loop.var->name;
        tth_strbuf_spaces(b, 2 * level);
        tth_strbuf_printf(b, "%s for (%s %s = ", loop_name(s->u.loop.loop), tth_dtype_name(s->u.loop.var->dtype), v);
        print_expr(b, s->u.loop.min);
        tth_strbuf_printf(b, "; %s < ", v);
        if (s->u.loop.min->kind == TTH_TEXPR_INT && s->u.loop.min->u.i == 0) {
            print_expr(b, s->u.loop.extent);
        } else {
            tth_strbuf_puts(b, "(");
            print_expr(b, s->u.loop.min);
            tth_strbuf_puts(b, " + ");
            print_expr(b, s->u.loop.extent);
            tth_strbuf_puts(b, ")");
        }
        tth_strbuf_printf(b, "; %s++) {\n", v);
        print_stmt(b, s->u.loop.body, level + 1);
        tth_strbuf_spaces(b, 2 * level);
        tth_strbuf_puts(b, "}\n");
        return;
    }
    case TTH_TSTMT_STORE:
        tth_strbuf_spaces(b, 2 * level);
        tth_strbuf_printf(b, "%s[", s->u.store.buf->name);
        print_expr(b, s->u.store.index);
        tth_strbuf_puts(b, "]");
        if (s->u.store.align)
            tth_strbuf_printf(b, " /* align %u */", s->u.store.align);
        tth_strbuf_puts(b, " = ");
        print_expr(b, s->u.store.value);
        tth_strbuf_puts(b, ";\n");
        return;
    case TTH_TSTMT_ALLOCATE: {
        const tth_tbuffer *buf = s->u.alloc.buf;
        tth_strbuf_spaces(b, 2 * level);
        tth_strbuf_printf(b, "allocate %s %s", tth_dtype_name(buf->dtype), buf->name);
        print_shape(b, buf);
        tth_strbuf_printf(b, " /* %zu bytes, %s, align %u */ {\n", tth_tbuffer_nbytes(buf), scope_name(buf->scope),
                       buf->align);
        print_stmt(b, s->u.alloc.body, level + 1);
        tth_strbuf_spaces(b, 2 * level);
        tth_strbuf_puts(b, "}\n");
        return;
    }
    case TTH_TSTMT_IF:
        tth_strbuf_spaces(b, 2 * level);
        tth_strbuf_puts(b, "if (");
        print_expr(b, s->u.cond.cond);
        tth_strbuf_puts(b, ") {\n");
        print_stmt(b, s->u.cond.then_s, level + 1);
        tth_strbuf_spaces(b, 2 * level);
        if (s->u.cond.else_s) {
            tth_strbuf_puts(b, "} else {\n");
            print_stmt(b, s->u.cond.else_s, level + 1);
            tth_strbuf_spaces(b, 2 * level);
        }
        tth_strbuf_puts(b, "}\n");
        return;
    case TTH_TSTMT_LET:
        tth_strbuf_spaces(b, 2 * level);
        if (s->u.let.var->lanes > 1)
            tth_strbuf_printf(b, "let %sx%d %s = ", tth_dtype_name(s->u.let.var->dtype), (int)s->u.let.var->lanes,
                           s->u.let.var->name);
        else
            tth_strbuf_printf(b, "let %s %s = ", tth_dtype_name(s->u.let.var->dtype), s->u.let.var->name);
        print_expr(b, s->u.let.value);
        tth_strbuf_puts(b, ";\n");
        print_stmt(b, s->u.let.body, level);
        return;
    case TTH_TSTMT_EVALUATE:
        tth_strbuf_spaces(b, 2 * level);
        print_expr(b, s->u.eval.value);
        tth_strbuf_puts(b, ";\n");
        return;
    case TTH_TSTMT_CALL_FUNC:
        tth_strbuf_spaces(b, 2 * level);
        tth_strbuf_printf(b, "%s(", s->u.call.func);
        for (size_t i = 0; i < s->u.call.nargs; i++)
            tth_strbuf_printf(b, "%s%s", i ? ", " : "", s->u.call.args[i]->name);
        tth_strbuf_puts(b, ");\n");
        return;
    }
    tth_strbuf_spaces(b, 2 * level);
    tth_strbuf_puts(b, "<?>;\n");
}

/* Buffers a function uses that are neither parameters nor allocated in it (constants,
 * workspace), each once, in order of first use. */
typedef struct bufset {
    const tth_tbuffer **items;
    size_t n, cap;
} bufset;

static void bufset_add(bufset *s, const tth_tbuffer *b)
{
    if (!b || b->scope == TTH_SCOPE_LOCAL || b->scope == TTH_SCOPE_PARAM)
        return;
    for (size_t i = 0; i < s->n; i++)
        if (s->items[i] == b)
            return;
    push_ptr((const void ***)&s->items, &s->n, &s->cap, b);
}

static void collect_expr(bufset *s, const tth_texpr *e)
{
    if (!e)
        return;
    if (e->kind == TTH_TEXPR_LOAD || e->kind == TTH_TEXPR_ADDRESS_OF)
        bufset_add(s, e->u.load.buf);
    tth_texpr *scratch[3], *const *kids;
    size_t n = tth_tir_expr_children(e, scratch, &kids);
    for (size_t i = 0; i < n; i++)
        collect_expr(s, kids[i]);
}

static void collect_stmt(bufset *s, const tth_tstmt *st)
{
    if (!st)
        return;
    switch (st->kind) {
    case TTH_TSTMT_SEQ:
        for (size_t i = 0; i < st->u.seq.n; i++)
            collect_stmt(s, st->u.seq.stmts[i]);
        return;
    case TTH_TSTMT_FOR:
        collect_expr(s, st->u.loop.min);
        collect_expr(s, st->u.loop.extent);
        collect_stmt(s, st->u.loop.body);
        return;
    case TTH_TSTMT_STORE:
        bufset_add(s, st->u.store.buf);
        collect_expr(s, st->u.store.index);
        collect_expr(s, st->u.store.value);
        return;
    case TTH_TSTMT_ALLOCATE: collect_stmt(s, st->u.alloc.body); return;
    case TTH_TSTMT_IF:
        collect_expr(s, st->u.cond.cond);
        collect_stmt(s, st->u.cond.then_s);
        collect_stmt(s, st->u.cond.else_s);
        return;
    case TTH_TSTMT_LET:
        collect_expr(s, st->u.let.value);
        collect_stmt(s, st->u.let.body);
        return;
    case TTH_TSTMT_EVALUATE: collect_expr(s, st->u.eval.value); return;
    case TTH_TSTMT_CALL_FUNC:
        for (size_t i = 0; i < st->u.call.nargs; i++)
            bufset_add(s, st->u.call.args[i]);
        return;
    }
}

static void print_func(tth_strbuf *b, const tth_prim_func *f, int is_entry)
{
    tth_strbuf_printf(b, "// prim_func %s%s, target \"%s\"", f->name, is_entry ? " (entry)" : "",
                   f->target_kind ? f->target_kind : "");
    if (f->attrs && json_object_size(f->attrs)) {
        char *s = json_dumps(f->attrs, JSON_SORT_KEYS | JSON_REAL_PRECISION(9));
        if (s) {
            tth_strbuf_printf(b, ", attrs %s", s);
            free(s);
        }
    }
    tth_strbuf_puts(b, "\n");
    bufset used = {0};
    collect_stmt(&used, f->body);
    for (size_t i = 0; i < used.n; i++) {
        const tth_tbuffer *buf = used.items[i];
        size_t k = 0;
        while (k < f->nparams && f->params[k] != buf)
            k++;
        if (k < f->nparams)
            continue; /* an INPUT/OUTPUT parameter: shown in the signature */
        tth_strbuf_printf(b, "// %s %s %s", scope_name(buf->scope), tth_dtype_name(buf->dtype), buf->name);
        print_shape(b, buf);
        if (buf->scope == TTH_SCOPE_CONST && buf->data)
            tth_strbuf_printf(b, " #%016" PRIx64, tth_tensor_hash(buf->data));
        if (buf->offset >= 0)
            tth_strbuf_printf(b, " @%" PRId64, buf->offset);
        tth_strbuf_puts(b, "\n");
    }
    free(used.items);
    tth_strbuf_printf(b, "void %s(", f->name);
    for (size_t i = 0; i < f->nparams; i++) {
        const tth_tbuffer *p = f->params[i];
        if (i)
            tth_strbuf_puts(b, ", ");
        if (p->scope != TTH_SCOPE_PARAM)
            tth_strbuf_printf(b, "%s ", scope_name(p->scope));
        tth_strbuf_printf(b, "%s %s", tth_dtype_name(p->dtype), p->name);
        print_shape(b, p);
    }
    tth_strbuf_puts(b, ") {\n");
    print_stmt(b, f->body, 1);
    tth_strbuf_puts(b, "}\n");
}

char *tth_tir_print_func(const tth_prim_func *f)
{
    if (!f)
        return NULL;
    tth_strbuf b = {0};
    print_func(&b, f, 0);
    return tth_strbuf_finish(&b);
}

char *tth_tir_print(const tth_tir_module *m)
{
    if (!m)
        return NULL;
    tth_strbuf b = {0};
    for (size_t i = 0; i < m->nfuncs; i++) {
        if (i)
            tth_strbuf_puts(&b, "\n");
        print_func(&b, m->funcs[i], m->entry && strcmp(m->entry, m->funcs[i]->name) == 0);
    }
    return tth_strbuf_finish(&b);
}

/* ---- JSON ---- */

typedef struct jctx {
    bufset bufs;               /* every buffer met, in order of first use */
    const tth_tvar **vars;
    size_t nvars, capvars;
} jctx;

static void jbuf(jctx *c, const tth_tbuffer *b)
{
    for (size_t i = 0; i < c->bufs.n; i++)
        if (c->bufs.items[i] == b)
            return;
    push_ptr((const void ***)&c->bufs.items, &c->bufs.n, &c->bufs.cap, b);
}

static void jvar(jctx *c, const tth_tvar *v)
{
    for (size_t i = 0; i < c->nvars; i++)
        if (c->vars[i] == v)
            return;
    push_ptr((const void ***)&c->vars, &c->nvars, &c->capvars, v);
}

static json_t *expr_json(jctx *c, const tth_texpr *e)
{
    if (!e)
        return json_null();
    json_t *j = json_pack("{s:s}", "dtype", tth_dtype_name(e->dtype));
    if (e->lanes != 1)
        json_object_set_new(j, "lanes", json_integer(e->lanes));
    switch (e->kind) {
    case TTH_TEXPR_RAMP:
        json_object_set_new(j, "k", json_string("ramp"));
        json_object_set_new(j, "base", expr_json(c, e->u.ramp.base));
        json_object_set_new(j, "stride", json_integer(e->u.ramp.stride));
        break;
    case TTH_TEXPR_BROADCAST:
        json_object_set_new(j, "k", json_string("broadcast"));
        json_object_set_new(j, "value", expr_json(c, e->u.bcast.value));
        break;
    case TTH_TEXPR_INT:
        json_object_set_new(j, "k", json_string("int"));
        json_object_set_new(j, "v", json_integer(e->u.i));
        break;
    case TTH_TEXPR_FLOAT:
        json_object_set_new(j, "k", json_string("float"));
        if (isfinite(e->u.f))
            json_object_set_new(j, "v", json_real(e->u.f));
        else
            json_object_set_new(j, "v", json_string(isnan(e->u.f) ? "nan" : e->u.f > 0 ? "inf" : "-inf"));
        break;
    case TTH_TEXPR_VAR:
        jvar(c, e->u.var);
        json_object_set_new(j, "k", json_string("var"));
        json_object_set_new(j, "var", json_integer(e->u.var->id));
        break;
    case TTH_TEXPR_LOAD:
    case TTH_TEXPR_ADDRESS_OF:
        jbuf(c, e->u.load.buf);
        json_object_set_new(j, "k", json_string(e->kind == TTH_TEXPR_LOAD ? "load" : "address_of"));
        json_object_set_new(j, "buf", json_integer(e->u.load.buf->id));
        json_object_set_new(j, "index", expr_json(c, e->u.load.index));
        if (e->u.load.align)
            json_object_set_new(j, "align", json_integer(e->u.load.align));
        break;
    case TTH_TEXPR_BINARY:
        json_object_set_new(j, "k", json_string("bin"));
        json_object_set_new(j, "op", json_string((unsigned)e->u.bin.op < NBINOPS ? binop_names[e->u.bin.op] : "?"));
        json_object_set_new(j, "a", expr_json(c, e->u.bin.a));
        json_object_set_new(j, "b", expr_json(c, e->u.bin.b));
        break;
    case TTH_TEXPR_UNARY:
        json_object_set_new(j, "k", json_string("un"));
        json_object_set_new(j, "op", json_string(e->u.un.op == TTH_TUN_NEG ? "-" : "!"));
        json_object_set_new(j, "a", expr_json(c, e->u.un.a));
        break;
    case TTH_TEXPR_SELECT:
        json_object_set_new(j, "k", json_string("select"));
        json_object_set_new(j, "cond", expr_json(c, e->u.select.cond));
        json_object_set_new(j, "a", expr_json(c, e->u.select.a));
        json_object_set_new(j, "b", expr_json(c, e->u.select.b));
        break;
    case TTH_TEXPR_CAST:
        json_object_set_new(j, "k", json_string("cast"));
        json_object_set_new(j, "value", expr_json(c, e->u.cast.value));
        break;
    case TTH_TEXPR_REINTERPRET:
        json_object_set_new(j, "k", json_string("reinterpret"));
        json_object_set_new(j, "value", expr_json(c, e->u.cast.value));
        break;
    case TTH_TEXPR_INTRIN: {
        unsigned op = (unsigned)e->u.intrin.op;
        json_object_set_new(j, "k", json_string("intrin"));
        json_object_set_new(j, "op", json_string(op < NINTRINS ? intrin_info[op].name : "?"));
        json_t *args = json_array();
        for (int i = 0; i < 3 && e->u.intrin.args[i]; i++)
            json_array_append_new(args, expr_json(c, e->u.intrin.args[i]));
        json_object_set_new(j, "args", args);
        break;
    }
    case TTH_TEXPR_CALL_EXTERN: {
        json_object_set_new(j, "k", json_string("call_extern"));
        json_object_set_new(j, "name", json_string(e->u.call.name));
        json_t *args = json_array();
        for (size_t i = 0; i < e->u.call.nargs; i++)
            json_array_append_new(args, expr_json(c, e->u.call.args[i]));
        json_object_set_new(j, "args", args);
        break;
    }
    }
    return j;
}

static json_t *stmt_json(jctx *c, const tth_tstmt *s)
{
    if (!s)
        return json_null();
    json_t *j = json_object();
    switch (s->kind) {
    case TTH_TSTMT_SEQ: {
        json_object_set_new(j, "k", json_string("seq"));
        json_t *a = json_array();
        for (size_t i = 0; i < s->u.seq.n; i++)
            json_array_append_new(a, stmt_json(c, s->u.seq.stmts[i]));
        json_object_set_new(j, "stmts", a);
        break;
    }
    case TTH_TSTMT_FOR:
        jvar(c, s->u.loop.var);
        json_object_set_new(j, "k", json_string("for"));
        json_object_set_new(j, "var", json_integer(s->u.loop.var->id));
        json_object_set_new(j, "min", expr_json(c, s->u.loop.min));
        json_object_set_new(j, "extent", expr_json(c, s->u.loop.extent));
        json_object_set_new(j, "loop", json_string(loop_name(s->u.loop.loop)));
        json_object_set_new(j, "body", stmt_json(c, s->u.loop.body));
        break;
    case TTH_TSTMT_STORE:
        jbuf(c, s->u.store.buf);
        json_object_set_new(j, "k", json_string("store"));
        json_object_set_new(j, "buf", json_integer(s->u.store.buf->id));
        json_object_set_new(j, "index", expr_json(c, s->u.store.index));
        json_object_set_new(j, "value", expr_json(c, s->u.store.value));
        if (s->u.store.align)
            json_object_set_new(j, "align", json_integer(s->u.store.align));
        break;
    case TTH_TSTMT_ALLOCATE:
        jbuf(c, s->u.alloc.buf);
        json_object_set_new(j, "k", json_string("allocate"));
        json_object_set_new(j, "buf", json_integer(s->u.alloc.buf->id));
        json_object_set_new(j, "body", stmt_json(c, s->u.alloc.body));
        break;
    case TTH_TSTMT_IF:
        json_object_set_new(j, "k", json_string("if"));
        json_object_set_new(j, "cond", expr_json(c, s->u.cond.cond));
        json_object_set_new(j, "then", stmt_json(c, s->u.cond.then_s));
        if (s->u.cond.else_s)
            json_object_set_new(j, "else", stmt_json(c, s->u.cond.else_s));
        break;
    case TTH_TSTMT_LET:
        jvar(c, s->u.let.var);
        json_object_set_new(j, "k", json_string("let"));
        json_object_set_new(j, "var", json_integer(s->u.let.var->id));
        json_object_set_new(j, "value", expr_json(c, s->u.let.value));
        json_object_set_new(j, "body", stmt_json(c, s->u.let.body));
        break;
    case TTH_TSTMT_EVALUATE:
        json_object_set_new(j, "k", json_string("evaluate"));
        json_object_set_new(j, "value", expr_json(c, s->u.eval.value));
        break;
    case TTH_TSTMT_CALL_FUNC: {
        json_object_set_new(j, "k", json_string("call_func"));
        json_object_set_new(j, "func", json_string(s->u.call.func));
        json_t *a = json_array();
        for (size_t i = 0; i < s->u.call.nargs; i++) {
            jbuf(c, s->u.call.args[i]);
            json_array_append_new(a, json_integer(s->u.call.args[i]->id));
        }
        json_object_set_new(j, "args", a);
        break;
    }
    }
    return j;
}

json_t *tth_tir_to_json(const tth_tir_module *m)
{
    if (!m)
        return NULL;
    jctx c = {0};
    json_t *funcs = json_array();
    for (size_t i = 0; i < m->nfuncs; i++) {
        const tth_prim_func *f = m->funcs[i];
        json_t *params = json_array();
        for (size_t k = 0; k < f->nparams; k++) {
            jbuf(&c, f->params[k]);
            json_array_append_new(params, json_integer(f->params[k]->id));
        }
        json_t *jf = json_pack("{s:s, s:o, s:o}", "name", f->name, "params", params, "body", stmt_json(&c, f->body));
        if (jf) {
            json_object_set_new(jf, "target_kind", f->target_kind ? json_string(f->target_kind) : json_null());
            json_object_set_new(jf, "attrs", f->attrs ? json_deep_copy(f->attrs) : json_object());
        }
        json_array_append_new(funcs, jf);
    }
    json_t *bufs = json_array();
    for (size_t i = 0; i < c.bufs.n; i++) {
        const tth_tbuffer *b = c.bufs.items[i];
        json_t *shape = json_array();
        for (int32_t k = 0; k < b->rank; k++)
            json_array_append_new(shape, json_integer(b->shape[k]));
        json_t *jb = json_pack("{s:I, s:s, s:s, s:o, s:s, s:I, s:I}", "id", (json_int_t)b->id, "name", b->name,
                               "dtype", tth_dtype_name(b->dtype), "shape", shape, "scope", scope_name(b->scope),
                               "align", (json_int_t)b->align, "offset", (json_int_t)b->offset);
        if (jb && b->scope == TTH_SCOPE_CONST && b->data) {
            char hash[17];
            snprintf(hash, sizeof hash, "%016" PRIx64, tth_tensor_hash(b->data));
            json_object_set_new(jb, "hash", json_string(hash));
        }
        json_array_append_new(bufs, jb);
    }
    json_t *vars = json_array();
    for (size_t i = 0; i < c.nvars; i++)
        json_array_append_new(vars, json_pack("{s:I, s:s, s:s, s:i}", "id", (json_int_t)c.vars[i]->id, "name",
                                              c.vars[i]->name, "dtype", tth_dtype_name(c.vars[i]->dtype), "lanes",
                                              (int)c.vars[i]->lanes));
    free(c.bufs.items);
    free(c.vars);
    return json_pack("{s:o, s:o, s:o, s:o}", "entry", m->entry ? json_string(m->entry) : json_null(), "functions",
                     funcs, "buffers", bufs, "vars", vars);
}
