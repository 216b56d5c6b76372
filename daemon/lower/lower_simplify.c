/* lower_simplify.c: the last step of lowering a function. Operator lowerings bind index values
 * with LETs before they know whether the value is a constant (n = 0 when the batch is 1, the
 * whole-kernel tap range when no window leaves the input, ...). This pass substitutes every LET
 * bound to an integer immediate and every loop of one iteration, rebuilding the expressions
 * through the folding builders, drops LETs nobody reads, loops of no iteration and IFs with a
 * constant condition.
 * Subtrees that do not change are shared, not copied.
 *   requires: a PrimFunc body built by this lowering (no CALL_FUNC) */
#include <stdlib.h>
#include <string.h>

#include "lower_internal.h"

typedef struct sp_ctx {
    lw_ctx *c;
    const tth_tvar **vars;    /* substitution stack: var -> immediate */
    tth_texpr **vals;
    size_t n, cap;
    int oom;
} sp_ctx;

static int sp_push(sp_ctx *s, const tth_tvar *v, tth_texpr *val)
{
    if (s->n == s->cap) {
        size_t nc = s->cap ? 2 * s->cap : 32;
        const tth_tvar **nv = realloc(s->vars, nc * sizeof *nv);
        if (!nv)
            return -1;
        s->vars = nv;
        tth_texpr **nx = realloc(s->vals, nc * sizeof *nx);
        if (!nx)
            return -1;
        s->vals = nx;
        s->cap = nc;
    }
    s->vars[s->n] = v;
    s->vals[s->n] = val;
    s->n++;
    return 0;
}

static tth_texpr *sp_lookup(const sp_ctx *s, const tth_tvar *v)
{
    for (size_t i = s->n; i-- > 0;)
        if (s->vars[i] == v)
            return s->vals[i];
    return NULL;
}

static tth_texpr *sp_expr(sp_ctx *s, tth_texpr *e)
{
    if (!e || s->n == 0)
        return e;
    if (e->kind == TTH_TEXPR_VAR) {
        tth_texpr *v = sp_lookup(s, e->u.var);
        return v ? v : e;
    }
    tth_texpr *scratch[3], *const *kids, *small[3], **nk = small;
    size_t n = tth_tir_expr_children(e, scratch, &kids);
    if (n > 3 && !(nk = tth_arena_alloc(s->c->m->arena, n * sizeof *nk))) {
        s->oom = 1;
        return e;
    }
    for (size_t i = 0; i < n; i++)
        nk[i] = sp_expr(s, kids[i]);
    tth_texpr *r = tth_tir_expr_rebuild(s->c->m, e, nk);
    if (!r) {
        s->oom = 1;
        return e;
    }
    return r;
}

static int sp_is_int(const tth_texpr *e)
{
    return e && e->kind == TTH_TEXPR_INT;
}

static tth_tstmt *sp_stmt(sp_ctx *s, tth_tstmt *st);

/* a statement that does nothing */
static tth_tstmt *sp_empty(sp_ctx *s)
{
    return tth_tir_seq(s->c->m, NULL, 0);
}

static int sp_is_empty(const tth_tstmt *st)
{
    return st && st->kind == TTH_TSTMT_SEQ && st->u.seq.n == 0;
}

/* body (of st) simplified with var replaced by val; st itself when out of memory */
static tth_tstmt *sp_bound(sp_ctx *s, tth_tstmt *st, const tth_tvar *var, tth_texpr *val, tth_tstmt *body)
{
    if (sp_push(s, var, val)) {
        s->oom = 1;
        return st;
    }
    tth_tstmt *b = sp_stmt(s, body);
    s->n--;
    return b;
}

static tth_tstmt *sp_stmt(sp_ctx *s, tth_tstmt *st)
{
    tth_tir_module *m = s->c->m;
    if (!st || s->oom)
        return st;
    switch (st->kind) {
    case TTH_TSTMT_SEQ: {
        tth_tstmt **items = tth_arena_alloc(m->arena, sizeof *items * (st->u.seq.n + 1));
        if (!items) {
            s->oom = 1;
            return st;
        }
        size_t n = 0;
        int changed = 0;
        for (size_t i = 0; i < st->u.seq.n; i++) {
            tth_tstmt *x = sp_stmt(s, st->u.seq.stmts[i]);
            changed |= x != st->u.seq.stmts[i];
            if (sp_is_empty(x)) {
                changed = 1;
                continue;
            }
            items[n++] = x;
        }
        if (!changed)
            return st;
        return n == 1 ? items[0] : tth_tir_seq(m, items, n);
    }
    case TTH_TSTMT_FOR: {
        tth_texpr *mn = sp_expr(s, st->u.loop.min), *ex = sp_expr(s, st->u.loop.extent);
        if (sp_is_int(ex) && ex->u.i <= 0)
            return sp_empty(s);
        if (sp_is_int(ex) && ex->u.i == 1 && sp_is_int(mn)) {
            return sp_bound(s, st, st->u.loop.var, mn, st->u.loop.body);
        }
        tth_tstmt *b = sp_stmt(s, st->u.loop.body);
        if (mn == st->u.loop.min && ex == st->u.loop.extent && b == st->u.loop.body)
            return st;
        return tth_tir_for(m, st->u.loop.var, mn, ex, st->u.loop.loop, b);
    }
    case TTH_TSTMT_STORE: {
        tth_texpr *i = sp_expr(s, st->u.store.index), *v = sp_expr(s, st->u.store.value);
        if (i == st->u.store.index && v == st->u.store.value)
            return st;
        tth_tstmt *ns = tth_tir_store(m, st->u.store.buf, i, v);
        if (ns)
            ns->u.store.align = st->u.store.align;
        return ns;
    }
    case TTH_TSTMT_ALLOCATE: {
        tth_tstmt *b = sp_stmt(s, st->u.alloc.body);
        return b == st->u.alloc.body ? st : tth_tir_allocate(m, st->u.alloc.buf, b);
    }
    case TTH_TSTMT_IF: {
        tth_texpr *c = sp_expr(s, st->u.cond.cond);
        if (sp_is_int(c)) {
            tth_tstmt *taken = c->u.i ? st->u.cond.then_s : st->u.cond.else_s;
            return taken ? sp_stmt(s, taken) : sp_empty(s);
        }
        tth_tstmt *t = sp_stmt(s, st->u.cond.then_s), *e = sp_stmt(s, st->u.cond.else_s);
        if (c == st->u.cond.cond && t == st->u.cond.then_s && e == st->u.cond.else_s)
            return st;
        return tth_tir_if(m, c, t, e);
    }
    case TTH_TSTMT_LET: {
        tth_texpr *v = sp_expr(s, st->u.let.value);
        /* an immediate, or another variable (loop variables are never rebound inside their loop) */
        if ((sp_is_int(v) || (v && v->kind == TTH_TEXPR_VAR)) && v->dtype == st->u.let.var->dtype) {
            return sp_bound(s, st, st->u.let.var, v, st->u.let.body);
        }
        tth_tstmt *b = sp_stmt(s, st->u.let.body);
        /* a binding nobody reads goes (values are pure: loads and arithmetic) */
        if (!tth_tir_stmt_uses_var(b, st->u.let.var))
            return b;
        if (v == st->u.let.value && b == st->u.let.body)
            return st;
        return tth_tir_let(m, st->u.let.var, v, b);
    }
    case TTH_TSTMT_EVALUATE: {
        tth_texpr *v = sp_expr(s, st->u.eval.value);
        return v == st->u.eval.value ? st : tth_tir_evaluate(m, v);
    }
    default:
        return st;
    }
}

tth_tstmt *lw_simplify(lw_ctx *c, tth_tstmt *body)
{
    sp_ctx s;
    memset(&s, 0, sizeof s);
    s.c = c;
    tth_tstmt *r = sp_stmt(&s, body);
    free(s.vars);
    free(s.vals);
    if (s.oom || !r) {
        lw_fail(c, TTH_ENOMEM, NULL, "out of memory simplifying the lowered function");
        return NULL;
    }
    return r;
}
