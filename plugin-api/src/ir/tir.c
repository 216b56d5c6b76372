/* tir.c: TIR modules, buffers, variables, expression builders (with constant folding and the
 * integer identities x+0, x-0, x*1, x*0, x/1), statements and PrimFuncs. */
#include "ir_private.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- modules ---- */

tth_tir_module *tth_tir_module_new(void)
{
    tth__tir_module *pm = calloc(1, sizeof *pm);
    if (pm && (pm->pub.arena = tth_arena_new()))
        return &pm->pub;
    free(pm);
    return NULL;
}

void tth_tir_module_free(tth_tir_module *m)
{
    if (m)
        tth__module_free(m, &tth__tmod(m)->own, m->funcs, m->arena);
}

TTH__MODULE_FUNCS(tth_tir_module, tth_prim_func, tth_tir_module_find, funcs_push, &tth__tmod(m)->own)

tth_tir_module *tth_tir_module_subset(tth_tir_module *m, const char *target_kind)
{
    if (!m || !target_kind)
        return NULL;
    tth_tir_module *v = tth_tir_module_new();
    if (!v)
        return NULL;
    tth__tir_module *pv = tth__tmod(v), *pm = tth__tmod(m);
    pv->is_view = 1;
    /* Ids handed out in the view must not collide with the parent's. */
    pv->next_buf_id = pm->next_buf_id + (1u << 30);
    pv->next_var_id = pm->next_var_id + (1u << 30);
    for (size_t i = 0; i < m->nfuncs; i++) {
        tth_prim_func *f = m->funcs[i];
        if (!f->target_kind || strcmp(f->target_kind, target_kind) != 0)
            continue;
        if (funcs_push(v, f) != 0) {
            tth_tir_module_free(v);
            return NULL;
        }
        if (m->entry && strcmp(m->entry, f->name) == 0)
            v->entry = f->name;
    }
    return v;
}

/* ---- buffers and variables ---- */

int64_t tth_tbuffer_numel(const tth_tbuffer *b)
{
    return tth__shape_numel(b->rank, b->shape);
}

size_t tth_tbuffer_nbytes(const tth_tbuffer *b)
{
    return (size_t)tth_tbuffer_numel(b) * tth_dtype_size(b->dtype);
}

tth_tbuffer *tth_tir_buffer(tth_tir_module *m, const char *name, tth_dtype dtype, int32_t rank,
                            const int64_t *shape, tth_buffer_scope scope)
{
    if (!m || !name || !tth_dtype_size(dtype) || rank < 0 || rank > TTH_MAX_RANK || (rank && !shape) ||
        scope < TTH_SCOPE_PARAM || scope > TTH_SCOPE_REGISTER)
        return NULL;
    for (int32_t i = 0; i < rank; i++)
        if (shape[i] < 0)
            return NULL;
    tth_tbuffer *b = tth_arena_alloc(m->arena, sizeof *b);
    if (!b || !(b->name = tth_arena_strdup(m->arena, name)))
        return NULL;
    b->id = tth__tmod(m)->next_buf_id++;
    b->dtype = dtype;
    b->rank = rank;
    for (int32_t i = 0; i < rank; i++)
        b->shape[i] = shape[i];
    b->scope = scope;
    b->align = 16;
    b->offset = -1;
    b->derive = NULL;
    b->derive_from = NULL;
    return b;
}

tth_tbuffer *tth_tir_const_buffer(tth_tir_module *m, const char *name, tth_tensor *data)
{
    if (!m || !data)
        return NULL;
    tth_tbuffer *b = tth_tir_buffer(m, name, data->type.dtype, data->type.rank, data->type.shape, TTH_SCOPE_CONST);
    if (!b || tth__ptrvec_push(&tth__tmod(m)->own.tensors, data) != 0)
        return NULL;
    b->data = tth_tensor_ref(data);
    return b;
}

int tth_tir_const_buffer_derived(tth_tbuffer *b, const char *transform, tth_tbuffer *from)
{
    if (!b || !from || !transform || b->scope != TTH_SCOPE_CONST || from->scope != TTH_SCOPE_CONST || b == from)
        return TTH_EINVAL;
    if (strcmp(transform, TTH_DERIVE_WINOGRAD_F4X4_3X3) != 0)
        return TTH_EINVAL;
    /* [O][C][3][3] -> [36][C][O], float32 both */
    if (b->dtype != TTH_F32 || from->dtype != TTH_F32 || from->rank != 4 || from->shape[2] != 3 ||
        from->shape[3] != 3 || tth_tbuffer_numel(b) != 36 * from->shape[0] * from->shape[1])
        return TTH_EINVAL;
    b->derive = TTH_DERIVE_WINOGRAD_F4X4_3X3;
    b->derive_from = from;
    return 0;
}

void tth_tir_const_buffer_release(tth_tir_module *m, tth_tbuffer *b)
{
    if (!m || !b || b->scope != TTH_SCOPE_CONST || !b->data)
        return;
    tth__ptrvec *v = &tth__tmod(m)->own.tensors;
    for (size_t i = v->n; i-- > 0;)
        if (v->items[i] == b->data) { /* the module's reference, released at its free otherwise */
            v->items[i] = v->items[--v->n];
            tth_tensor_unref(b->data);
            break;
        }
    b->data = NULL;
}

tth_tvar *tth_tir_var_vec(tth_tir_module *m, const char *name, tth_dtype dtype, int32_t lanes)
{
    if (!m || !name || !tth_dtype_size(dtype) || lanes < 1)
        return NULL;
    tth_tvar *v = tth_arena_alloc(m->arena, sizeof *v);
    if (!v || !(v->name = tth_arena_strdup(m->arena, name)))
        return NULL;
    v->id = tth__tmod(m)->next_var_id++;
    v->dtype = dtype;
    v->lanes = lanes;
    return v;
}

tth_tvar *tth_tir_var(tth_tir_module *m, const char *name, tth_dtype dtype)
{
    return tth_tir_var_vec(m, name, dtype, 1);
}

/* ---- expressions ---- */

/* A copy of the expression v in m's arena (lanes 0 taken as 1: a scalar); NULL when out of
 * memory. */
static tth_texpr *expr_new(tth_tir_module *m, tth_texpr v)
{
    if (!m)
        return NULL;
    tth_texpr *e = tth_arena_alloc(m->arena, sizeof *e);
    if (e) {
        *e = v;
        e->lanes = v.lanes ? v.lanes : 1;
    }
    return e;
}

/* The lanes of an operation over a and b: equal, or one of them scalar; -1 otherwise. */
static int32_t lanes_of(const tth_texpr *a, const tth_texpr *b)
{
    int32_t la = a ? a->lanes : 1, lb = b ? b->lanes : 1;
    if (la == lb || lb == 1)
        return la;
    return la == 1 ? lb : -1;
}

/* e widened to `lanes` lanes (a scalar is broadcast). */
static tth_texpr *widen(tth_tir_module *m, tth_texpr *e, int32_t lanes)
{
    if (!e || e->lanes == lanes)
        return e;
    return e->lanes == 1 ? tth_tir_broadcast(m, e, lanes) : NULL;
}

/* An integer wrapped to the width and signedness of dtype (stored in an int64). */
static int64_t wrap_int(tth_dtype dt, int64_t v)
{
    switch (dt) {
    case TTH_I8: return (int8_t)v;
    case TTH_I16: return (int16_t)v;
    case TTH_I32: return (int32_t)v;
    case TTH_U8: return (uint8_t)v;
    case TTH_U16: return (uint16_t)v;
    case TTH_U32: return (uint32_t)v;
    case TTH_BOOL: return v != 0;
    default: return v; /* int64, uint64 (bits) */
    }
}

static double round_float(tth_dtype dt, double v)
{
    return dt == TTH_F64 ? v : (double)(float)v;
}

static int is_intlike(tth_dtype dt)
{
    return tth_dtype_size(dt) && !tth_dtype_is_float(dt);
}

tth_texpr *tth_tir_int(tth_tir_module *m, tth_dtype dtype, int64_t v)
{
    if (!is_intlike(dtype))
        return NULL;
    return expr_new(m, (tth_texpr){.kind = TTH_TEXPR_INT, .dtype = dtype, .u.i = wrap_int(dtype, v)});
}

tth_texpr *tth_tir_i64(tth_tir_module *m, int64_t v)
{
    return tth_tir_int(m, TTH_I64, v);
}

tth_texpr *tth_tir_float(tth_tir_module *m, tth_dtype dtype, double v)
{
    if (!tth_dtype_is_float(dtype))
        return NULL;
    return expr_new(m, (tth_texpr){.kind = TTH_TEXPR_FLOAT, .dtype = dtype, .u.f = round_float(dtype, v)});
}

tth_texpr *tth_tir_ref(tth_tir_module *m, tth_tvar *v)
{
    if (!v)
        return NULL;
    return expr_new(m, (tth_texpr){.kind = TTH_TEXPR_VAR, .dtype = v->dtype, .u.var = v, .lanes = v->lanes});
}

tth_texpr *tth_tir_load(tth_tir_module *m, tth_tbuffer *buf, tth_texpr *index)
{
    if (!buf || !index)
        return NULL;
    return expr_new(m, (tth_texpr){.kind = TTH_TEXPR_LOAD, .dtype = buf->dtype,
                                   .u.load = {.buf = buf, .index = index}, .lanes = index->lanes});
}

tth_texpr *tth_tir_address_of(tth_tir_module *m, tth_tbuffer *buf, tth_texpr *index)
{
    if (!buf || !index)
        return NULL;
    if (index->lanes != 1)
        return NULL;
    return expr_new(m, (tth_texpr){.kind = TTH_TEXPR_ADDRESS_OF, .dtype = buf->dtype,
                                   .u.load = {.buf = buf, .index = index}});
}

static int is_cmp(tth_tir_binop op)
{
    return op == TTH_TBIN_EQ || op == TTH_TBIN_NE || op == TTH_TBIN_LT || op == TTH_TBIN_LE || op == TTH_TBIN_GT ||
           op == TTH_TBIN_GE || op == TTH_TBIN_AND || op == TTH_TBIN_OR;
}

static int is_int_imm(const tth_texpr *e, int64_t v)
{
    return e->kind == TTH_TEXPR_INT && e->u.i == v;
}

/* Fold two integer immediates; 0 when folded into *out, -1 when it must not be (division by
 * zero, overflow, bad shift). Arithmetic wraps like the dtype (done in uint64, then wrapped). */
static int fold_int(tth_tir_binop op, tth_dtype dt, int64_t a, int64_t b, int64_t *out)
{
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    int is_unsigned = !tth_dtype_is_signed(dt);
    switch (op) {
    case TTH_TBIN_ADD: *out = (int64_t)(ua + ub); break;
    case TTH_TBIN_SUB: *out = (int64_t)(ua - ub); break;
    case TTH_TBIN_MUL: *out = (int64_t)(ua * ub); break;
    case TTH_TBIN_DIV:
    case TTH_TBIN_MOD:
    case TTH_TBIN_FLOORDIV:
    case TTH_TBIN_FLOORMOD: {
        if (b == 0 || (!is_unsigned && a == INT64_MIN && b == -1))
            return -1;
        if (is_unsigned) {
            *out = (int64_t)(op == TTH_TBIN_DIV || op == TTH_TBIN_FLOORDIV ? ua / ub : ua % ub);
            break;
        }
        int64_t q = a / b, r = a % b;
        if (op == TTH_TBIN_DIV)
            *out = q;
        else if (op == TTH_TBIN_MOD)
            *out = r;
        else {
            if (r != 0 && ((r < 0) != (b < 0))) {
                q -= 1;
                r += b;
            }
            *out = op == TTH_TBIN_FLOORDIV ? q : r;
        }
        break;
    }
    case TTH_TBIN_MIN: *out = is_unsigned ? (int64_t)(ua < ub ? ua : ub) : (a < b ? a : b); break;
    case TTH_TBIN_MAX: *out = is_unsigned ? (int64_t)(ua > ub ? ua : ub) : (a > b ? a : b); break;
    case TTH_TBIN_EQ: *out = a == b; break;
    case TTH_TBIN_NE: *out = a != b; break;
    case TTH_TBIN_LT: *out = is_unsigned ? ua < ub : a < b; break;
    case TTH_TBIN_LE: *out = is_unsigned ? ua <= ub : a <= b; break;
    case TTH_TBIN_GT: *out = is_unsigned ? ua > ub : a > b; break;
    case TTH_TBIN_GE: *out = is_unsigned ? ua >= ub : a >= b; break;
    case TTH_TBIN_AND: *out = a && b; break;
    case TTH_TBIN_OR: *out = a || b; break;
    case TTH_TBIN_SHL:
        if (b < 0 || b >= 64)
            return -1;
        *out = (int64_t)(ua << b);
        break;
    case TTH_TBIN_SHR:
        if (b < 0 || b >= 64)
            return -1;
        *out = is_unsigned ? (int64_t)(ua >> b) : (a >> b);
        break;
    case TTH_TBIN_BITAND: *out = a & b; break;
    case TTH_TBIN_BITOR: *out = a | b; break;
    default: return -1;
    }
    return 0;
}

/* Fold two float immediates; comparisons set *is_bool. */
static int fold_float(tth_tir_binop op, double a, double b, double *out, int *is_bool)
{
    *is_bool = 0;
    switch (op) {
    case TTH_TBIN_ADD: *out = a + b; return 0;
    case TTH_TBIN_SUB: *out = a - b; return 0;
    case TTH_TBIN_MUL: *out = a * b; return 0;
    case TTH_TBIN_DIV: *out = a / b; return 0;
    case TTH_TBIN_FLOORDIV: *out = floor(a / b); return 0;
    case TTH_TBIN_FLOORMOD: *out = a - floor(a / b) * b; return 0;
    case TTH_TBIN_MIN: *out = a < b ? a : b; return 0;
    case TTH_TBIN_MAX: *out = a > b ? a : b; return 0;
    default: break;
    }
    *is_bool = 1;
    switch (op) {
    case TTH_TBIN_EQ: *out = a == b; return 0;
    case TTH_TBIN_NE: *out = a != b; return 0;
    case TTH_TBIN_LT: *out = a < b; return 0;
    case TTH_TBIN_LE: *out = a <= b; return 0;
    case TTH_TBIN_GT: *out = a > b; return 0;
    case TTH_TBIN_GE: *out = a >= b; return 0;
    default: return -1;
    }
}

/* The scalar a vector index expression repeats, when it is a scalar or a broadcast; else NULL. */
static tth_texpr *scalar_part(tth_texpr *e)
{
    if (e->lanes == 1)
        return e;
    return e->kind == TTH_TEXPR_BROADCAST ? e->u.bcast.value : NULL;
}

/* Ramps stay ramps under the index arithmetic that keeps them affine (docs/tir.md, "Vectors"):
 * ramp +- scalar, scalar + ramp, ramp + ramp, ramp * constant, constant * ramp; so an index
 * built from a ramp by the usual flat-index arithmetic is still a ramp, which the code
 * generators turn into one contiguous (or strided) access. NULL when no rule applies. */
static tth_texpr *fold_ramp(tth_tir_module *m, tth_tir_binop op, tth_texpr *a, tth_texpr *b, int32_t lanes)
{
    tth_texpr *sa = scalar_part(a), *sb = scalar_part(b);
    if (sa && sb) /* scalar or broadcast on both sides: one scalar op, broadcast */
        return tth_tir_broadcast(m, tth_tir_bin(m, op, sa, sb), lanes);
    if (a->dtype != TTH_I64 || b->dtype != TTH_I64)
        return NULL;
    int ra = a->kind == TTH_TEXPR_RAMP, rb = b->kind == TTH_TEXPR_RAMP;
    switch (op) {
    case TTH_TBIN_ADD:
        if (ra && rb)
            return tth_tir_ramp(m, tth_tir_bin(m, op, a->u.ramp.base, b->u.ramp.base),
                                a->u.ramp.stride + b->u.ramp.stride, lanes);
        if (ra && sb)
            return tth_tir_ramp(m, tth_tir_bin(m, op, a->u.ramp.base, sb), a->u.ramp.stride, lanes);
        if (sa && rb)
            return tth_tir_ramp(m, tth_tir_bin(m, op, sa, b->u.ramp.base), b->u.ramp.stride, lanes);
        break;
    case TTH_TBIN_SUB:
        if (ra && sb)
            return tth_tir_ramp(m, tth_tir_bin(m, op, a->u.ramp.base, sb), a->u.ramp.stride, lanes);
        break;
    case TTH_TBIN_MUL:
        if (ra && sb && sb->kind == TTH_TEXPR_INT)
            return tth_tir_ramp(m, tth_tir_bin(m, op, a->u.ramp.base, sb), a->u.ramp.stride * sb->u.i, lanes);
        if (sa && rb && sa->kind == TTH_TEXPR_INT)
            return tth_tir_ramp(m, tth_tir_bin(m, op, sa, b->u.ramp.base), b->u.ramp.stride * sa->u.i, lanes);
        break;
    default:
        break;
    }
    return NULL;
}

tth_texpr *tth_tir_bin(tth_tir_module *m, tth_tir_binop op, tth_texpr *a, tth_texpr *b)
{
    if (!a || !b)
        return NULL;
    int32_t lanes = lanes_of(a, b);
    if (lanes < 0)
        return NULL;
    if (lanes > 1) {
        tth_texpr *f = fold_ramp(m, op, a, b, lanes);
        if (f)
            return f;
    }
    if (lanes > 1) {
        a = widen(m, a, lanes);
        b = widen(m, b, lanes);
        if (!a || !b)
            return NULL;
    }
    tth_dtype dt = is_cmp(op) ? TTH_BOOL : a->dtype;
    if (a->dtype == b->dtype) {
        if (a->kind == TTH_TEXPR_INT && b->kind == TTH_TEXPR_INT) {
            int64_t v;
            if (fold_int(op, a->dtype, a->u.i, b->u.i, &v) == 0)
                return tth_tir_int(m, dt, dt == TTH_BOOL ? v : wrap_int(dt, v));
        }
        if (a->kind == TTH_TEXPR_FLOAT && b->kind == TTH_TEXPR_FLOAT) {
            double v;
            int is_bool;
            if (fold_float(op, a->u.f, b->u.f, &v, &is_bool) == 0)
                return is_bool ? tth_tir_int(m, TTH_BOOL, (int64_t)v) : tth_tir_float(m, a->dtype, v);
        }
        if (is_intlike(a->dtype) && a->dtype != TTH_BOOL) {
            switch (op) {
            case TTH_TBIN_ADD:
                if (is_int_imm(b, 0))
                    return a;
                if (is_int_imm(a, 0))
                    return b;
                break;
            case TTH_TBIN_SUB:
                if (is_int_imm(b, 0))
                    return a;
                break;
            case TTH_TBIN_MUL:
                if (is_int_imm(b, 1))
                    return a;
                if (is_int_imm(a, 1))
                    return b;
                if (is_int_imm(a, 0) || is_int_imm(b, 0))
                    return tth_tir_int(m, dt, 0);
                break;
            case TTH_TBIN_DIV:
            case TTH_TBIN_FLOORDIV:
                if (is_int_imm(b, 1))
                    return a;
                break;
            case TTH_TBIN_MOD:
            case TTH_TBIN_FLOORMOD:
                if (is_int_imm(b, 1))
                    return tth_tir_int(m, dt, 0);
                break;
            default:
                break;
            }
        }
    }
    return expr_new(m, (tth_texpr){.kind = TTH_TEXPR_BINARY, .dtype = dt, .u.bin = {.op = op, .a = a, .b = b},
                                   .lanes = lanes});
}

tth_texpr *tth_tir_un(tth_tir_module *m, tth_tir_unop op, tth_texpr *a)
{
    if (!a)
        return NULL;
    if (op == TTH_TUN_NEG) {
        if (a->kind == TTH_TEXPR_INT && a->dtype != TTH_BOOL)
            return tth_tir_int(m, a->dtype, (int64_t)(0u - (uint64_t)a->u.i));
        if (a->kind == TTH_TEXPR_FLOAT)
            return tth_tir_float(m, a->dtype, -a->u.f);
    } else if (op == TTH_TUN_NOT && a->kind == TTH_TEXPR_INT) {
        return tth_tir_int(m, TTH_BOOL, a->u.i == 0);
    }
    return expr_new(m, (tth_texpr){.kind = TTH_TEXPR_UNARY, .dtype = op == TTH_TUN_NOT ? TTH_BOOL : a->dtype,
                                   .u.un = {.op = op, .a = a}, .lanes = a->lanes});
}

tth_texpr *tth_tir_select(tth_tir_module *m, tth_texpr *cond, tth_texpr *a, tth_texpr *b)
{
    if (!cond || !a || !b)
        return NULL;
    int32_t lanes = lanes_of(a, b);
    if (lanes < 0 || (cond->lanes != 1 && cond->lanes != lanes && lanes != 1))
        return NULL;
    if (cond->lanes > lanes)
        lanes = cond->lanes;
    if (cond->kind == TTH_TEXPR_INT && a->dtype == b->dtype && a->lanes == b->lanes)
        return cond->u.i ? a : b;
    a = widen(m, a, lanes);
    b = widen(m, b, lanes);
    if (!a || !b)
        return NULL;
    return expr_new(m, (tth_texpr){.kind = TTH_TEXPR_SELECT, .dtype = a->dtype,
                                   .u.select = {.cond = cond, .a = a, .b = b}, .lanes = lanes});
}

tth_texpr *tth_tir_cast(tth_tir_module *m, tth_dtype dtype, tth_texpr *v)
{
    if (!v || !tth_dtype_size(dtype))
        return NULL;
    if (v->dtype == dtype)
        return v;
    int to_float = tth_dtype_is_float(dtype);
    if (v->kind == TTH_TEXPR_INT) {
        double f = tth_dtype_is_signed(v->dtype) ? (double)v->u.i : (double)(uint64_t)v->u.i;
        return to_float ? tth_tir_float(m, dtype, f) : tth_tir_int(m, dtype, v->u.i);
    }
    if (v->kind == TTH_TEXPR_FLOAT) {
        if (to_float)
            return tth_tir_float(m, dtype, v->u.f);
        if (dtype == TTH_BOOL)
            return tth_tir_int(m, dtype, v->u.f != 0);
        double t = trunc(v->u.f);
        /* Only values the target type holds fold; C leaves the rest undefined. */
        size_t bits = tth_dtype_size(dtype) * 8;
        double lo = tth_dtype_is_signed(dtype) ? -ldexp(1, (int)bits - 1) : 0;
        double hi = tth_dtype_is_signed(dtype) ? ldexp(1, (int)bits - 1) : ldexp(1, (int)bits);
        if (t >= lo && t < hi && t < 9223372036854775808.0)
            return tth_tir_int(m, dtype, (int64_t)t);
    }
    return expr_new(m, (tth_texpr){.kind = TTH_TEXPR_CAST, .dtype = dtype, .u.cast = {.value = v}, .lanes = v->lanes});
}

tth_texpr *tth_tir_reinterpret(tth_tir_module *m, tth_dtype dtype, tth_texpr *v)
{
    if (!v)
        return NULL;
    if (v->dtype == dtype)
        return v;
    size_t n = tth_dtype_size(dtype);
    if (v->lanes == 1 && n == tth_dtype_size(v->dtype) && (n == 4 || n == 8) &&
        (v->kind == TTH_TEXPR_INT || v->kind == TTH_TEXPR_FLOAT)) {
        unsigned char bits[8];
        if (v->kind == TTH_TEXPR_FLOAT && n == 4) {
            float f = (float)v->u.f;
            memcpy(bits, &f, 4);
        } else if (v->kind == TTH_TEXPR_FLOAT) {
            memcpy(bits, &v->u.f, 8);
        } else if (n == 4) {
            uint32_t u = (uint32_t)v->u.i;
            memcpy(bits, &u, 4);
        } else {
            memcpy(bits, &v->u.i, 8);
        }
        if (tth_dtype_is_float(dtype) && n == 4) {
            float f;
            memcpy(&f, bits, 4);
            return tth_tir_float(m, dtype, f);
        }
        if (tth_dtype_is_float(dtype)) {
            double d;
            memcpy(&d, bits, 8);
            return tth_tir_float(m, dtype, d);
        }
        if (n == 4) {
            uint32_t u;
            memcpy(&u, bits, 4);
            return tth_tir_int(m, dtype, tth_dtype_is_signed(dtype) ? (int64_t)(int32_t)u : (int64_t)u);
        }
        int64_t i;
        memcpy(&i, bits, 8);
        return tth_tir_int(m, dtype, i);
    }
    return expr_new(m, (tth_texpr){.kind = TTH_TEXPR_REINTERPRET, .dtype = dtype, .u.cast = {.value = v},
                                   .lanes = v->lanes});
}

tth_texpr *tth_tir_intrin3(tth_tir_module *m, tth_tir_intrin_op op, tth_texpr *a, tth_texpr *b,
                           tth_texpr *c)
{
    if (!a)
        return NULL;
    int reduce = op == TTH_TINTRIN_REDUCE_ADD || op == TTH_TINTRIN_REDUCE_MAX || op == TTH_TINTRIN_REDUCE_MIN;
    int32_t lanes = lanes_of(a, b);
    if (lanes >= 0 && c)
        lanes = lanes_of(lanes == a->lanes ? a : b, c);
    if (lanes < 0 || (reduce && (b || c)))
        return NULL;
    if (!reduce && lanes > 1) {
        a = widen(m, a, lanes);
        b = widen(m, b, lanes);
        c = widen(m, c, lanes);
        if (!a)
            return NULL;
    }
    return expr_new(m, (tth_texpr){.kind = TTH_TEXPR_INTRIN, .dtype = a->dtype,
                                   .u.intrin = {.op = op, .args = {a, b, c}}, .lanes = reduce ? 1 : lanes});
}

tth_texpr *tth_tir_intrin(tth_tir_module *m, tth_tir_intrin_op op, tth_texpr *a, tth_texpr *b)
{
    return tth_tir_intrin3(m, op, a, b, NULL);
}

tth_texpr *tth_tir_fma(tth_tir_module *m, tth_texpr *a, tth_texpr *b, tth_texpr *c)
{
    if (!a || !b || !c)
        return NULL;
    return tth_tir_intrin3(m, TTH_TINTRIN_FMA, a, b, c);
}

tth_texpr *tth_tir_ramp(tth_tir_module *m, tth_texpr *base, int64_t stride, int32_t lanes)
{
    if (!base || base->lanes != 1 || lanes < 1 || tth_dtype_is_float(base->dtype))
        return NULL;
    if (lanes == 1)
        return base;
    if (base->dtype != TTH_I64)
        base = tth_tir_cast(m, TTH_I64, base);
    if (!base)
        return NULL;
    return expr_new(m, (tth_texpr){.kind = TTH_TEXPR_RAMP, .dtype = TTH_I64,
                                   .u.ramp = {.base = base, .stride = stride}, .lanes = lanes});
}

tth_texpr *tth_tir_broadcast(tth_tir_module *m, tth_texpr *value, int32_t lanes)
{
    if (!value || value->lanes != 1 || lanes < 1)
        return NULL;
    if (lanes == 1)
        return value;
    return expr_new(m, (tth_texpr){.kind = TTH_TEXPR_BROADCAST, .dtype = value->dtype,
                                   .u.bcast = {.value = value}, .lanes = lanes});
}

tth_texpr *tth_tir_vload(tth_tir_module *m, tth_tbuffer *buf, tth_texpr *base, int32_t lanes, uint32_t align)
{
    tth_texpr *e = tth_tir_load(m, buf, tth_tir_ramp(m, base, 1, lanes));
    if (e)
        e->u.load.align = align;
    return e;
}

tth_tstmt *tth_tir_vstore(tth_tir_module *m, tth_tbuffer *buf, tth_texpr *base, tth_texpr *value, uint32_t align)
{
    if (!value)
        return NULL;
    tth_tstmt *s = tth_tir_store(m, buf, tth_tir_ramp(m, base, 1, value->lanes), value);
    if (s)
        s->u.store.align = align;
    return s;
}

tth_texpr *tth_tir_call_extern(tth_tir_module *m, tth_dtype ret, const char *name, tth_texpr *const *args,
                               size_t nargs)
{
    if (!m || !name || (nargs && !args))
        return NULL;
    for (size_t i = 0; i < nargs; i++)
        if (!args[i])
            return NULL;
    tth_texpr *e = expr_new(m, (tth_texpr){.kind = TTH_TEXPR_CALL_EXTERN, .dtype = ret});
    if (!e || !(e->u.call.name = tth_arena_strdup(m->arena, name)))
        return NULL;
    e->u.call.args = tth_arena_alloc(m->arena, (nargs ? nargs : 1) * sizeof *e->u.call.args);
    if (!e->u.call.args)
        return NULL;
    if (nargs)
        memcpy(e->u.call.args, args, nargs * sizeof *args);
    e->u.call.nargs = nargs;
    return e;
}

size_t tth_tir_expr_children(const tth_texpr *e, tth_texpr *scratch[3], tth_texpr *const **out)
{
    size_t n = 0;
    *out = scratch;
    if (!e)
        return 0;
    switch (e->kind) {
    case TTH_TEXPR_INT:
    case TTH_TEXPR_FLOAT:
    case TTH_TEXPR_VAR:
        return 0;
    case TTH_TEXPR_LOAD:
    case TTH_TEXPR_ADDRESS_OF: scratch[n++] = e->u.load.index; break;
    case TTH_TEXPR_BINARY:
        scratch[n++] = e->u.bin.a;
        scratch[n++] = e->u.bin.b;
        break;
    case TTH_TEXPR_UNARY: scratch[n++] = e->u.un.a; break;
    case TTH_TEXPR_SELECT:
        scratch[n++] = e->u.select.cond;
        scratch[n++] = e->u.select.a;
        scratch[n++] = e->u.select.b;
        break;
    case TTH_TEXPR_CAST:
    case TTH_TEXPR_REINTERPRET: scratch[n++] = e->u.cast.value; break;
    case TTH_TEXPR_INTRIN:
        for (int i = 0; i < 3; i++)
            if (e->u.intrin.args[i])
                scratch[n++] = e->u.intrin.args[i];
        break;
    case TTH_TEXPR_CALL_EXTERN:
        *out = e->u.call.args;
        return e->u.call.nargs;
    case TTH_TEXPR_RAMP: scratch[n++] = e->u.ramp.base; break;
    case TTH_TEXPR_BROADCAST: scratch[n++] = e->u.bcast.value; break;
    }
    return n;
}

size_t tth_tir_stmt_children(const tth_tstmt *s, tth_tstmt *sscratch[2], tth_tstmt *const **stmts,
                             size_t *nstmts, tth_texpr *escratch[2], tth_texpr *const **exprs)
{
    size_t ns = 0, ne = 0;
    *stmts = sscratch;
    *exprs = escratch;
    switch (s ? (int)s->kind : 0) {
    case TTH_TSTMT_SEQ:
        *stmts = s->u.seq.stmts;
        ns = s->u.seq.n;
        break;
    case TTH_TSTMT_FOR:
        escratch[ne++] = s->u.loop.min;
        escratch[ne++] = s->u.loop.extent;
        sscratch[ns++] = s->u.loop.body;
        break;
    case TTH_TSTMT_STORE:
        escratch[ne++] = s->u.store.index;
        escratch[ne++] = s->u.store.value;
        break;
    case TTH_TSTMT_ALLOCATE: sscratch[ns++] = s->u.alloc.body; break;
    case TTH_TSTMT_IF:
        escratch[ne++] = s->u.cond.cond;
        sscratch[ns++] = s->u.cond.then_s;
        if (s->u.cond.else_s)
            sscratch[ns++] = s->u.cond.else_s;
        break;
    case TTH_TSTMT_LET:
        escratch[ne++] = s->u.let.value;
        sscratch[ns++] = s->u.let.body;
        break;
    case TTH_TSTMT_EVALUATE: escratch[ne++] = s->u.eval.value; break;
    default: break; /* CALL_FUNC: buffers only */
    }
    *nstmts = ns;
    return ne;
}

int tth_tir_walk_expr(const tth_texpr *e, const tth_tir_visitor *v)
{
    if (!e)
        return 0;
    int rc = v->expr ? v->expr(v->ctx, e) : 0;
    if (rc)
        return rc;
    tth_texpr *scratch[3], *const *kids;
    size_t n = tth_tir_expr_children(e, scratch, &kids);
    for (size_t i = 0; i < n; i++)
        if ((rc = tth_tir_walk_expr(kids[i], v)) != 0)
            return rc;
    return 0;
}

int tth_tir_walk(const tth_tstmt *s, const tth_tir_visitor *v)
{
    if (!s)
        return 0;
    int rc = v->stmt ? v->stmt(v->ctx, s) : 0;
    if (rc == TTH_TIR_WALK_SKIP)
        return 0;
    if (rc)
        return rc;
    tth_tstmt *ss[2], *const *subs;
    tth_texpr *es[2], *const *ops;
    size_t nsubs;
    size_t nops = tth_tir_stmt_children(s, ss, &subs, &nsubs, es, &ops);
    for (size_t i = 0; i < nops; i++)
        if ((rc = tth_tir_walk_expr(ops[i], v)) != 0)
            return rc;
    for (size_t i = 0; i < nsubs; i++)
        if ((rc = tth_tir_walk(subs[i], v)) != 0)
            return rc;
    return 0;
}

static int reads_var(void *ctx, const tth_texpr *e)
{
    return e->kind == TTH_TEXPR_VAR && e->u.var == ctx;
}

int tth_tir_stmt_uses_var(const tth_tstmt *s, const tth_tvar *v)
{
    tth_tir_visitor vis = {.expr = reads_var, .ctx = (void *)v};
    return tth_tir_walk(s, &vis);
}

int tth_tir_expr_uses_var(const tth_texpr *e, const tth_tvar *v)
{
    tth_tir_visitor vis = {.expr = reads_var, .ctx = (void *)v};
    return tth_tir_walk_expr(e, &vis);
}

tth_texpr *tth_tir_expr_rebuild(tth_tir_module *m, const tth_texpr *e, tth_texpr *const *kids)
{
    if (!e)
        return NULL;
    tth_texpr *scratch[3], *const *old;
    size_t n = tth_tir_expr_children(e, scratch, &old);
    int same = 1;
    for (size_t i = 0; i < n; i++) {
        if (!kids[i])
            return NULL;
        same &= kids[i] == old[i];
    }
    if (same)
        return (tth_texpr *)e;
    tth_texpr *r = NULL;
    switch (e->kind) {
    case TTH_TEXPR_INT:
    case TTH_TEXPR_FLOAT:
    case TTH_TEXPR_VAR:
        return (tth_texpr *)e;
    case TTH_TEXPR_LOAD:
        r = tth_tir_load(m, e->u.load.buf, kids[0]);
        if (r)
            r->u.load.align = e->u.load.align;
        return r;
    case TTH_TEXPR_ADDRESS_OF: return tth_tir_address_of(m, e->u.load.buf, kids[0]);
    case TTH_TEXPR_BINARY: return tth_tir_bin(m, e->u.bin.op, kids[0], kids[1]);
    case TTH_TEXPR_UNARY: return tth_tir_un(m, e->u.un.op, kids[0]);
    case TTH_TEXPR_SELECT: return tth_tir_select(m, kids[0], kids[1], kids[2]);
    case TTH_TEXPR_CAST: return tth_tir_cast(m, e->dtype, kids[0]);
    case TTH_TEXPR_REINTERPRET: return tth_tir_reinterpret(m, e->dtype, kids[0]);
    case TTH_TEXPR_INTRIN:
        return tth_tir_intrin3(m, e->u.intrin.op, kids[0], n > 1 ? kids[1] : NULL, n > 2 ? kids[2] : NULL);
    case TTH_TEXPR_CALL_EXTERN: return tth_tir_call_extern(m, e->dtype, e->u.call.name, kids, n);
    case TTH_TEXPR_RAMP: return tth_tir_ramp(m, kids[0], e->u.ramp.stride, e->lanes);
    case TTH_TEXPR_BROADCAST: return tth_tir_broadcast(m, kids[0], e->lanes);
    }
    return NULL;
}

/* ---- statements ---- */

/* A copy of the statement v in m's arena; NULL when out of memory. */
static tth_tstmt *stmt_new(tth_tir_module *m, tth_tstmt v)
{
    if (!m)
        return NULL;
    tth_tstmt *s = tth_arena_alloc(m->arena, sizeof *s);
    if (s)
        *s = v;
    return s;
}

/* A SEQ's array holds seq_cap(n) entries: the next power of two, so seq_append knows when it
 * is full without storing a capacity (removing statements in place keeps that safe). */
static size_t seq_cap(size_t n)
{
    size_t c = 1;
    while (c < n)
        c *= 2;
    return c;
}

tth_tstmt *tth_tir_seq(tth_tir_module *m, tth_tstmt *const *stmts, size_t n)
{
    if (n && !stmts)
        return NULL;
    for (size_t i = 0; i < n; i++)
        if (!stmts[i])
            return NULL;
    tth_tstmt *s = stmt_new(m, (tth_tstmt){.kind = TTH_TSTMT_SEQ});
    if (!s)
        return NULL;
    s->u.seq.stmts = tth_arena_alloc(m->arena, seq_cap(n) * sizeof *s->u.seq.stmts);
    if (!s->u.seq.stmts)
        return NULL;
    if (n)
        memcpy(s->u.seq.stmts, stmts, n * sizeof *stmts);
    s->u.seq.n = n;
    return s;
}

int tth_tir_seq_append(tth_tir_module *m, tth_tstmt **seq, tth_tstmt *s)
{
    if (!m || !seq || !s)
        return TTH_EINVAL;
    if (!*seq || (*seq)->kind != TTH_TSTMT_SEQ) {
        tth_tstmt *first[2] = {*seq, s};
        tth_tstmt *n = *seq ? tth_tir_seq(m, first, 2) : tth_tir_seq(m, &s, 1);
        if (!n)
            return TTH_ENOMEM;
        *seq = n;
        return 0;
    }
    tth_tstmt *q = *seq;
    size_t n = q->u.seq.n;
    if (!q->u.seq.stmts || (n && n == seq_cap(n))) { /* full: n is a power of two */
        tth_tstmt **ns = tth_arena_alloc(m->arena, seq_cap(n + 1) * sizeof *ns);
        if (!ns)
            return TTH_ENOMEM;
        if (n)
            memcpy(ns, q->u.seq.stmts, n * sizeof *ns);
        q->u.seq.stmts = ns;
    }
    q->u.seq.stmts[q->u.seq.n++] = s;
    return 0;
}

tth_tstmt *tth_tir_for(tth_tir_module *m, tth_tvar *var, tth_texpr *min, tth_texpr *extent, tth_loop_kind kind,
                       tth_tstmt *body)
{
    if (!var || !min || !extent || !body)
        return NULL;
    return stmt_new(m, (tth_tstmt){.kind = TTH_TSTMT_FOR,
                                   .u.loop = {.var = var, .min = min, .extent = extent, .loop = kind, .body = body}});
}

tth_tstmt *tth_tir_store(tth_tir_module *m, tth_tbuffer *buf, tth_texpr *index, tth_texpr *value)
{
    if (!buf || !index || !value)
        return NULL;
    if (value->lanes != index->lanes) {
        value = widen(m, value, index->lanes);
        if (!value)
            return NULL;
    }
    return stmt_new(m, (tth_tstmt){.kind = TTH_TSTMT_STORE, .u.store = {.buf = buf, .index = index, .value = value}});
}

tth_tstmt *tth_tir_allocate(tth_tir_module *m, tth_tbuffer *buf, tth_tstmt *body)
{
    if (!buf || !body)
        return NULL;
    return stmt_new(m, (tth_tstmt){.kind = TTH_TSTMT_ALLOCATE, .u.alloc = {.buf = buf, .body = body}});
}

tth_tstmt *tth_tir_if(tth_tir_module *m, tth_texpr *cond, tth_tstmt *then_s, tth_tstmt *else_s)
{
    if (!cond || !then_s)
        return NULL;
    return stmt_new(m, (tth_tstmt){.kind = TTH_TSTMT_IF,
                                   .u.cond = {.cond = cond, .then_s = then_s, .else_s = else_s}});
}

tth_tstmt *tth_tir_let(tth_tir_module *m, tth_tvar *var, tth_texpr *value, tth_tstmt *body)
{
    if (!var || !value || !body)
        return NULL;
    return stmt_new(m, (tth_tstmt){.kind = TTH_TSTMT_LET, .u.let = {.var = var, .value = value, .body = body}});
}

tth_tstmt *tth_tir_evaluate(tth_tir_module *m, tth_texpr *value)
{
    if (!value)
        return NULL;
    return stmt_new(m, (tth_tstmt){.kind = TTH_TSTMT_EVALUATE, .u.eval = {.value = value}});
}

tth_tstmt *tth_tir_call_func(tth_tir_module *m, const char *func, tth_tbuffer *const *args, size_t nargs)
{
    if (!m || !func || (nargs && !args))
        return NULL;
    for (size_t i = 0; i < nargs; i++)
        if (!args[i])
            return NULL;
    tth_tstmt *s = stmt_new(m, (tth_tstmt){.kind = TTH_TSTMT_CALL_FUNC});
    if (!s || !(s->u.call.func = tth_arena_strdup(m->arena, func)))
        return NULL;
    s->u.call.args = tth_arena_alloc(m->arena, (nargs ? nargs : 1) * sizeof *s->u.call.args);
    if (!s->u.call.args)
        return NULL;
    if (nargs)
        memcpy(s->u.call.args, args, nargs * sizeof *args);
    s->u.call.nargs = nargs;
    return s;
}

tth_prim_func *tth_tir_func_add(tth_tir_module *m, const char *name, tth_tbuffer *const *params, size_t nparams,
                                tth_tstmt *body, const char *target_kind, json_t *attrs, tth_diag *diag)
{
    char loc[TTH_DIAG_LOCATION_MAX];
    snprintf(loc, sizeof loc, "prim_func %s", name ? name : "(null)");
    if (!m || !body || (nparams && !params))
        return tth__refuse_func(attrs, diag, TTH_EINVAL, loc, "a PrimFunc needs a module, a body and its parameters");
    if (!tth__is_c_ident(name))
        return tth__refuse_func(attrs, diag, TTH_EINVAL, loc, "PrimFunc name '%s' is not a C identifier",
                                name ? name : "(null)");
    if (tth_tir_module_find(m, name))
        return tth__refuse_func(attrs, diag, TTH_EDUPLICATE, loc, "PrimFunc %s already exists", name);
    for (size_t i = 0; i < nparams; i++)
        if (!params[i])
            return tth__refuse_func(attrs, diag, TTH_EINVAL, loc, "parameter %zu is NULL", i);
    if (!(attrs = tth__keep_attrs(&tth__tmod(m)->own, attrs, "PrimFunc", loc, diag)))
        return NULL;
    tth_prim_func *f = tth_arena_alloc(m->arena, sizeof *f);
    if (!f || !(f->name = tth_arena_strdup(m->arena, name)) ||
        !(f->params = tth_arena_alloc(m->arena, (nparams ? nparams : 1) * sizeof *f->params)) ||
        (target_kind && !(f->target_kind = tth_arena_strdup(m->arena, target_kind)))) {
        tth_diag_set(diag, TTH_ENOMEM, loc, "out of memory");
        return NULL;
    }
    if (nparams)
        memcpy(f->params, params, nparams * sizeof *params);
    f->nparams = nparams;
    f->body = body;
    f->attrs = attrs;
    if (funcs_push(m, f) != 0) {
        tth_diag_set(diag, TTH_ENOMEM, loc, "out of memory");
        return NULL;
    }
    return f;
}
