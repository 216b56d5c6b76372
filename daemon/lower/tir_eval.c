/* tir_eval.c: a TIR interpreter. The independent check of the lowering (it shares no code with
 * the C back-end) and the evaluator behind constant folding.
 *
 * Values: integers are held in int64 normalised to their dtype (sign- or zero-extended, so
 * arithmetic wraps like C's unsigned/two's-complement), floats in double, rounded to float after
 * every float32 operation (C on x86-64/aarch64 evaluates float in float). Both arms of a SELECT
 * are evaluated (the C back-end may do the same), and every load and store is bounds-checked, so
 * a lowering that reads outside a buffer fails here.
 *
 * Vectors are evaluated lane by lane: the frame's `lane` is the lane being computed, a RAMP
 * gives base + stride * lane, a BROADCAST its one value, a vector variable the lane's value
 * (held in `vvals`), a REDUCE loops over the lanes of its argument; a vector STORE or LET runs
 * once per lane. FMA rounds once (fma/fmaf). */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lower.h"

typedef union ev_val {
    int64_t i;
    double f;
} ev_val;

typedef struct ev_frame {
    const tth_tir_module *mod;
    const tth_prim_func *fn;
    tth_diag *diag;
    ev_val *vars;              /* by var id */
    unsigned char *bound;
    size_t nvars;
    void **mem;                /* by buffer id */
    unsigned char *owned;      /* workspace memory allocated by this frame */
    size_t nmem;
    int depth;
    uint8_t *ws;               /* the planned workspace (buffers with offset >= 0), or NULL */
    size_t ws_size;
    int32_t lane;              /* the lane a vector expression is evaluated at */
    ev_val **vvals;            /* by var id: the lanes of a vector variable */
    size_t nvvals;
} ev_frame;

#define EV_MAX_DEPTH 64

static int ev_fail(ev_frame *f, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int ev_fail(ev_frame *f, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tth_diag_vset(f->diag, code, f->fn ? f->fn->name : NULL, fmt, ap);
    va_end(ap);
    return code;
}

/* ------------------------------------------------------------------ dtype handling ---- */

static int64_t ev_norm(tth_dtype t, int64_t v)
{
    switch (t) {
    case TTH_I8: return (int8_t)v;
    case TTH_U8: return (uint8_t)v;
    case TTH_I16: return (int16_t)v;
    case TTH_U16: return (uint16_t)v;
    case TTH_I32: return (int32_t)v;
    case TTH_U32: return (uint32_t)v;
    case TTH_BOOL: return v != 0;
    default: return v;
    }
}

static double ev_fround(tth_dtype t, double v)
{
    if (t == TTH_F32)
        return (double)(float)v;
    if (t == TTH_F16)
        return (double)tth_f16_to_f32(tth_f32_to_f16((float)v));
    if (t == TTH_BF16)
        return (double)tth_bf16_to_f32(tth_f32_to_bf16((float)v));
    return v;
}

static int ev_isfloat(tth_dtype t)
{
    return t == TTH_F32 || t == TTH_F64 || t == TTH_F16 || t == TTH_BF16;
}

static int ev_isunsigned(tth_dtype t)
{
    return t == TTH_U8 || t == TTH_U16 || t == TTH_U32 || t == TTH_U64 || t == TTH_BOOL;
}

static double ev_as_double(tth_dtype t, ev_val v)
{
    if (ev_isfloat(t))
        return v.f;
    if (t == TTH_U64)
        return (double)(uint64_t)v.i;
    return (double)v.i;
}

static ev_val ev_convert(tth_dtype from, tth_dtype to, ev_val v)
{
    ev_val r;
    if (ev_isfloat(to)) {
        r.f = ev_fround(to, ev_as_double(from, v));
        return r;
    }
    if (to == TTH_BOOL) {
        r.i = ev_isfloat(from) ? v.f != 0 : v.i != 0;
        return r;
    }
    if (ev_isfloat(from)) {
        double d = trunc(v.f);
        if (isnan(d))
            d = 0;
        if (to == TTH_U64) {
            uint64_t u = d <= 0 ? 0 : d >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)d;
            r.i = (int64_t)u;
            return r;
        }
        if (d >= 9223372036854775807.0)
            r.i = INT64_MAX;
        else if (d <= -9223372036854775808.0)
            r.i = INT64_MIN;
        else
            r.i = (int64_t)d;
        r.i = ev_norm(to, r.i);
        return r;
    }
    r.i = ev_norm(to, v.i);
    return r;
}

static ev_val ev_read(tth_dtype t, const void *p, int64_t i)
{
    ev_val v;
    switch (t) {
    case TTH_F32: v.f = ((const float *)p)[i]; break;
    case TTH_F64: v.f = ((const double *)p)[i]; break;
    case TTH_F16: v.f = tth_f16_to_f32(((const uint16_t *)p)[i]); break;
    case TTH_BF16: v.f = tth_bf16_to_f32(((const uint16_t *)p)[i]); break;
    case TTH_I8: v.i = ((const int8_t *)p)[i]; break;
    case TTH_U8: v.i = ((const uint8_t *)p)[i]; break;
    case TTH_BOOL: v.i = ((const uint8_t *)p)[i] != 0; break;
    case TTH_I16: v.i = ((const int16_t *)p)[i]; break;
    case TTH_U16: v.i = ((const uint16_t *)p)[i]; break;
    case TTH_I32: v.i = ((const int32_t *)p)[i]; break;
    case TTH_U32: v.i = ((const uint32_t *)p)[i]; break;
    case TTH_I64: v.i = ((const int64_t *)p)[i]; break;
    case TTH_U64: v.i = (int64_t)((const uint64_t *)p)[i]; break;
    default: v.i = 0; break;
    }
    return v;
}

static void ev_write(tth_dtype t, void *p, int64_t i, ev_val v)
{
    switch (t) {
    case TTH_F32: ((float *)p)[i] = (float)v.f; break;
    case TTH_F64: ((double *)p)[i] = v.f; break;
    case TTH_F16: ((uint16_t *)p)[i] = tth_f32_to_f16((float)v.f); break;
    case TTH_BF16: ((uint16_t *)p)[i] = tth_f32_to_bf16((float)v.f); break;
    case TTH_I8: ((int8_t *)p)[i] = (int8_t)v.i; break;
    case TTH_U8: ((uint8_t *)p)[i] = (uint8_t)v.i; break;
    case TTH_BOOL: ((uint8_t *)p)[i] = v.i != 0; break;
    case TTH_I16: ((int16_t *)p)[i] = (int16_t)v.i; break;
    case TTH_U16: ((uint16_t *)p)[i] = (uint16_t)v.i; break;
    case TTH_I32: ((int32_t *)p)[i] = (int32_t)v.i; break;
    case TTH_U32: ((uint32_t *)p)[i] = (uint32_t)v.i; break;
    case TTH_I64: ((int64_t *)p)[i] = v.i; break;
    case TTH_U64: ((uint64_t *)p)[i] = (uint64_t)v.i; break;
    default: break;
    }
}

/* ------------------------------------------------------------------ frame storage ---- */

static int ev_grow(void **arr, size_t *n, size_t need, size_t elem, void **arr2, size_t elem2)
{
    if (need < *n)
        return 0;
    size_t nn = *n ? *n : 64;
    while (nn <= need)
        nn *= 2;
    void *a = realloc(*arr, nn * elem);
    if (!a)
        return TTH_ENOMEM;
    memset((char *)a + *n * elem, 0, (nn - *n) * elem);
    *arr = a;
    void *b = realloc(*arr2, nn * elem2);
    if (!b)
        return TTH_ENOMEM;
    memset((char *)b + *n * elem2, 0, (nn - *n) * elem2);
    *arr2 = b;
    *n = nn;
    return 0;
}

static int ev_var_slot(ev_frame *f, uint32_t id)
{
    if (ev_grow((void **)&f->vars, &f->nvars, id, sizeof *f->vars, (void **)&f->bound, 1)) {
        /* ev_grow updates *n only when both succeed */
        return ev_fail(f, TTH_ENOMEM, "out of memory");
    }
    return 0;
}

static int ev_mem_slot(ev_frame *f, uint32_t id)
{
    if (ev_grow((void **)&f->mem, &f->nmem, id, sizeof *f->mem, (void **)&f->owned, 1))
        return ev_fail(f, TTH_ENOMEM, "out of memory");
    return 0;
}

static void *ev_mem(ev_frame *f, const tth_tbuffer *b, int *err)
{
    if (b->scope == TTH_SCOPE_CONST) {
        if (!b->data || !b->data->data) {
            *err = ev_fail(f, TTH_EINVAL, "constant buffer '%s' has no data", b->name);
            return NULL;
        }
        if (b->data->nbytes < tth_tbuffer_nbytes(b)) {
            *err = ev_fail(f, TTH_EINVAL, "constant buffer '%s' is smaller than its shape", b->name);
            return NULL;
        }
        return b->data->data;
    }
    if (b->id < f->nmem && f->mem[b->id])
        return f->mem[b->id];
    if (b->scope == TTH_SCOPE_WORKSPACE && b->offset >= 0 && f->ws) {
        if ((size_t)b->offset + tth_tbuffer_nbytes(b) > f->ws_size) {
            *err = ev_fail(f, TTH_EINVAL, "workspace buffer '%s' lies outside the planned workspace", b->name);
            return NULL;
        }
        return f->ws + b->offset;
    }
    if (b->scope == TTH_SCOPE_WORKSPACE) {
        if ((*err = ev_mem_slot(f, b->id)))
            return NULL;
        size_t nb = tth_tbuffer_nbytes(b);
        void *p = calloc(nb ? nb : 1, 1);
        if (!p) {
            *err = ev_fail(f, TTH_ENOMEM, "out of memory allocating workspace buffer '%s'", b->name);
            return NULL;
        }
        f->mem[b->id] = p;
        f->owned[b->id] = 1;
        return p;
    }
    *err = ev_fail(f, TTH_EINVAL, "buffer '%s' is used where it is not bound (scope %d)", b->name, (int)b->scope);
    return NULL;
}

/* ------------------------------------------------------------------ expressions ---- */

static int ev_expr(ev_frame *f, const tth_texpr *e, ev_val *out);

static int ev_index(ev_frame *f, const tth_tbuffer *b, const tth_texpr *ie, int64_t *idx, const char *what)
{
    ev_val v;
    int rc = ev_expr(f, ie, &v);
    if (rc)
        return rc;
    int64_t n = tth_tbuffer_numel(b);
    if (v.i < 0 || v.i >= n)
        return ev_fail(f, TTH_EINTERNAL, "%s out of bounds: buffer '%s' index %lld (%lld elements)", what, b->name,
                       (long long)v.i, (long long)n);
    *idx = v.i;
    return 0;
}

static int ev_binop_values(ev_frame *f, tth_tir_binop op, tth_dtype t, ev_val a, ev_val b, ev_val *out);

static int ev_binary(ev_frame *f, const tth_texpr *e, ev_val *out)
{
    ev_val a, b;
    int rc = ev_expr(f, e->u.bin.a, &a);
    if (!rc)
        rc = ev_expr(f, e->u.bin.b, &b);
    if (rc)
        return rc;
    tth_dtype t = e->u.bin.a->dtype;
    tth_dtype bt = e->u.bin.b->dtype;
    if (bt != t) /* the verifier rejects this; convert rather than misread */
        b = ev_convert(bt, t, b);
    return ev_binop_values(f, e->u.bin.op, t, a, b, out);
}

/* a op b on values of dtype t */
static int ev_binop_values(ev_frame *f, tth_tir_binop op, tth_dtype t, ev_val a, ev_val b, ev_val *out)
{
    if (ev_isfloat(t)) {
        double x = a.f, y = b.f, r = 0;
        int cmp = -1;
        switch (op) {
        case TTH_TBIN_ADD: r = x + y; break;
        case TTH_TBIN_SUB: r = x - y; break;
        case TTH_TBIN_MUL: r = x * y; break;
        case TTH_TBIN_DIV: r = x / y; break;
        case TTH_TBIN_MOD: r = fmod(x, y); break;
        case TTH_TBIN_FLOORDIV: r = floor(x / y); break;
        case TTH_TBIN_FLOORMOD: r = x - floor(x / y) * y; break;
        case TTH_TBIN_MIN: r = x < y ? x : y; break;
        case TTH_TBIN_MAX: r = x > y ? x : y; break;
        case TTH_TBIN_EQ: cmp = x == y; break;
        case TTH_TBIN_NE: cmp = x != y; break;
        case TTH_TBIN_LT: cmp = x < y; break;
        case TTH_TBIN_LE: cmp = x <= y; break;
        case TTH_TBIN_GT: cmp = x > y; break;
        case TTH_TBIN_GE: cmp = x >= y; break;
        case TTH_TBIN_AND: cmp = x != 0 && y != 0; break;
        case TTH_TBIN_OR: cmp = x != 0 || y != 0; break;
        default: return ev_fail(f, TTH_EINVAL, "bit operation on a float");
        }
        if (cmp >= 0)
            out->i = cmp;
        else if (t == TTH_F32)
            out->f = (double)(float)r; /* float ops in float: x+y of floats is exact in double, then rounded */
        else
            out->f = ev_fround(t, r);
        if (t == TTH_F32 && cmp < 0) {
            /* recompute in float for ops whose double result may round differently */
            float fx = (float)x, fy = (float)y;
            switch (op) {
            case TTH_TBIN_DIV: out->f = fx / fy; break;
            case TTH_TBIN_MOD: out->f = fmodf(fx, fy); break;
            case TTH_TBIN_FLOORDIV: out->f = floorf(fx / fy); break;
            case TTH_TBIN_FLOORMOD: out->f = fx - floorf(fx / fy) * fy; break;
            default: break;
            }
        }
        return 0;
    }
    int uns = ev_isunsigned(t);
    int64_t x = a.i, y = b.i, r = 0;
    uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
    int cmp = -1;
    switch (op) {
    case TTH_TBIN_ADD: r = (int64_t)(ux + uy); break;
    case TTH_TBIN_SUB: r = (int64_t)(ux - uy); break;
    case TTH_TBIN_MUL: r = (int64_t)(ux * uy); break;
    case TTH_TBIN_DIV:
    case TTH_TBIN_MOD:
    case TTH_TBIN_FLOORDIV:
    case TTH_TBIN_FLOORMOD:
        if (y == 0)
            return ev_fail(f, TTH_EINVAL, "integer division by zero");
        if (uns) {
            r = (int64_t)((op == TTH_TBIN_DIV || op == TTH_TBIN_FLOORDIV) ? ux / uy : ux % uy);
        } else if (x == INT64_MIN && y == -1) {
            r = (op == TTH_TBIN_DIV || op == TTH_TBIN_FLOORDIV) ? INT64_MIN : 0;
        } else {
            int64_t q = x / y, m = x % y;
            if (op == TTH_TBIN_DIV)
                r = q;
            else if (op == TTH_TBIN_MOD)
                r = m;
            else if (op == TTH_TBIN_FLOORDIV)
                r = (m != 0 && ((m < 0) != (y < 0))) ? q - 1 : q;
            else
                r = (m != 0 && ((m < 0) != (y < 0))) ? m + y : m;
        }
        break;
    case TTH_TBIN_MIN: r = uns ? (ux < uy ? x : y) : (x < y ? x : y); break;
    case TTH_TBIN_MAX: r = uns ? (ux > uy ? x : y) : (x > y ? x : y); break;
    case TTH_TBIN_EQ: cmp = x == y; break;
    case TTH_TBIN_NE: cmp = x != y; break;
    case TTH_TBIN_LT: cmp = uns ? ux < uy : x < y; break;
    case TTH_TBIN_LE: cmp = uns ? ux <= uy : x <= y; break;
    case TTH_TBIN_GT: cmp = uns ? ux > uy : x > y; break;
    case TTH_TBIN_GE: cmp = uns ? ux >= uy : x >= y; break;
    case TTH_TBIN_AND: cmp = x != 0 && y != 0; break;
    case TTH_TBIN_OR: cmp = x != 0 || y != 0; break;
    case TTH_TBIN_SHL: r = (y < 0 || y >= 64) ? 0 : (int64_t)(ux << y); break;
    case TTH_TBIN_SHR:
        if (y < 0 || y >= 64)
            r = (uns || x >= 0) ? 0 : -1;
        else
            r = uns ? (int64_t)(ux >> y) : (x >> y);
        break;
    case TTH_TBIN_BITAND: r = x & y; break;
    case TTH_TBIN_BITOR: r = x | y; break;
    }
    out->i = cmp >= 0 ? cmp : ev_norm(t, r);
    return 0;
}

static int ev_reduce(ev_frame *f, const tth_texpr *e, ev_val *out)
{
    const tth_texpr *a = e->u.intrin.args[0];
    tth_tir_binop op = e->u.intrin.op == TTH_TINTRIN_REDUCE_ADD   ? TTH_TBIN_ADD
                       : e->u.intrin.op == TTH_TINTRIN_REDUCE_MAX ? TTH_TBIN_MAX
                                                                  : TTH_TBIN_MIN;
    int32_t save = f->lane;
    int rc = 0;
    for (int32_t l = 0; l < a->lanes && !rc; l++) {
        ev_val v;
        f->lane = l;
        rc = ev_expr(f, a, &v);
        if (!rc && l == 0)
            *out = v;
        else if (!rc)
            rc = ev_binop_values(f, op, e->dtype, *out, v, out);
    }
    f->lane = save;
    return rc;
}

/* The C library's function of each math intrinsic (tth/tir.h), in float and in double: of one
 * argument (f1, d1) or of two (f2, d2) */
typedef struct ev_math_fn {
    float (*f1)(float);
    double (*d1)(double);
    float (*f2)(float, float);
    double (*d2)(double, double);
} ev_math_fn;
static const ev_math_fn ev_math[] = {
    [TTH_TINTRIN_EXP] = {expf, exp},           [TTH_TINTRIN_LOG] = {logf, log},
    [TTH_TINTRIN_SQRT] = {sqrtf, sqrt},        [TTH_TINTRIN_TANH] = {tanhf, tanh},
    [TTH_TINTRIN_ERF] = {erff, erf},           [TTH_TINTRIN_POW] = {.f2 = powf, .d2 = pow},
    [TTH_TINTRIN_FABS] = {fabsf, fabs},        [TTH_TINTRIN_FLOOR] = {floorf, floor},
    [TTH_TINTRIN_CEIL] = {ceilf, ceil},        [TTH_TINTRIN_ROUND_EVEN] = {nearbyintf, nearbyint},
    [TTH_TINTRIN_SIN] = {sinf, sin},           [TTH_TINTRIN_COS] = {cosf, cos},
    [TTH_TINTRIN_FMOD] = {.f2 = fmodf, .d2 = fmod}, [TTH_TINTRIN_LOG1P] = {log1pf, log1p},
    [TTH_TINTRIN_EXPM1] = {expm1f, expm1},     [TTH_TINTRIN_ASIN] = {asinf, asin},
    [TTH_TINTRIN_ACOS] = {acosf, acos},        [TTH_TINTRIN_ATAN] = {atanf, atan},
    [TTH_TINTRIN_ASINH] = {asinhf, asinh},     [TTH_TINTRIN_ACOSH] = {acoshf, acosh},
    [TTH_TINTRIN_ATANH] = {atanhf, atanh},
};

static int ev_intrin(ev_frame *f, const tth_texpr *e, ev_val *out)
{
    if (e->u.intrin.op == TTH_TINTRIN_REDUCE_ADD || e->u.intrin.op == TTH_TINTRIN_REDUCE_MAX ||
        e->u.intrin.op == TTH_TINTRIN_REDUCE_MIN)
        return ev_reduce(f, e, out);
    if (e->u.intrin.op == TTH_TINTRIN_FMA) {
        ev_val x[3];
        for (int i = 0; i < 3; i++) {
            int rc = ev_expr(f, e->u.intrin.args[i], &x[i]);
            if (rc)
                return rc;
            if (e->u.intrin.args[i]->dtype != e->dtype)
                x[i] = ev_convert(e->u.intrin.args[i]->dtype, e->dtype, x[i]);
        }
        if (!ev_isfloat(e->dtype))
            return ev_fail(f, TTH_EINVAL, "fma on %s", tth_dtype_name(e->dtype));
        out->f = e->dtype == TTH_F64 ? fma(x[0].f, x[1].f, x[2].f)
                                     : ev_fround(e->dtype, fmaf((float)x[0].f, (float)x[1].f, (float)x[2].f));
        return 0;
    }
    if (e->u.intrin.op == TTH_TINTRIN_DOT4_US || e->u.intrin.op == TTH_TINTRIN_DOT4_SS) {
        ev_val x[3];
        for (int i = 0; i < 3; i++) {
            int rc = ev_expr(f, e->u.intrin.args[i], &x[i]);
            if (rc)
                return rc;
        }
        /* int32 lanes of four bytes (tth/tir.h): a's bytes unsigned for DOT4_US */
        int64_t s = (int32_t)x[0].i;
        for (int j = 0; j < 4; j++) {
            uint32_t ab = ((uint32_t)x[1].i >> (8 * j)) & 0xffu, bb = ((uint32_t)x[2].i >> (8 * j)) & 0xffu;
            int64_t av = e->u.intrin.op == TTH_TINTRIN_DOT4_US ? (int64_t)ab : (int64_t)(int8_t)ab;
            s += av * (int64_t)(int8_t)bb;
        }
        out->i = (int32_t)(uint32_t)(uint64_t)s;
        return 0;
    }
    ev_val a = {0}, b = {0};
    int rc = ev_expr(f, e->u.intrin.args[0], &a);
    if (!rc && e->u.intrin.args[1])
        rc = ev_expr(f, e->u.intrin.args[1], &b);
    if (rc)
        return rc;
    tth_dtype t = e->dtype;
    if (!ev_isfloat(t))
        return ev_fail(f, TTH_EINVAL, "math intrinsic on %s", tth_dtype_name(t));
    if (e->u.intrin.args[0]->dtype != t)
        a = ev_convert(e->u.intrin.args[0]->dtype, t, a);
    if (e->u.intrin.args[1] && e->u.intrin.args[1]->dtype != t)
        b = ev_convert(e->u.intrin.args[1]->dtype, t, b);
    const ev_math_fn *m = (unsigned)e->u.intrin.op < sizeof ev_math / sizeof *ev_math ? &ev_math[e->u.intrin.op] : NULL;
    if (!m || !(m->d1 || m->d2))
        return ev_fail(f, TTH_EINVAL, "unknown intrinsic %d", (int)e->u.intrin.op);
    if (t == TTH_F32 || t == TTH_F16 || t == TTH_BF16) {
        float x = (float)a.f, y = (float)b.f;
        out->f = ev_fround(t, m->f1 ? m->f1(x) : m->f2(x, y));
        return 0;
    }
    out->f = m->d1 ? m->d1(a.f) : m->d2(a.f, b.f);
    return 0;
}

static int ev_expr(ev_frame *f, const tth_texpr *e, ev_val *out)
{
    int rc;
    switch (e->kind) {
    case TTH_TEXPR_INT:
        if (ev_isfloat(e->dtype))
            out->f = (double)e->u.i;
        else
            out->i = ev_norm(e->dtype, e->u.i);
        return 0;
    case TTH_TEXPR_FLOAT:
        if (ev_isfloat(e->dtype))
            out->f = ev_fround(e->dtype, e->u.f);
        else
            out->i = ev_norm(e->dtype, (int64_t)e->u.f);
        return 0;
    case TTH_TEXPR_VAR: {
        const tth_tvar *v = e->u.var;
        if (v->id >= f->nvars || !f->bound[v->id])
            return ev_fail(f, TTH_EINVAL, "variable '%s' is used outside its scope", v->name);
        if (v->lanes > 1) {
            if (f->lane < 0 || f->lane >= v->lanes || v->id >= f->nvvals || !f->vvals[v->id])
                return ev_fail(f, TTH_EINVAL, "vector variable '%s' read at lane %d", v->name, (int)f->lane);
            *out = f->vvals[v->id][f->lane];
            return 0;
        }
        *out = f->vars[v->id];
        return 0;
    }
    case TTH_TEXPR_RAMP: {
        if ((rc = ev_expr(f, e->u.ramp.base, out)))
            return rc;
        out->i += e->u.ramp.stride * f->lane;
        return 0;
    }
    case TTH_TEXPR_BROADCAST:
        return ev_expr(f, e->u.bcast.value, out);
    case TTH_TEXPR_LOAD: {
        int err = 0;
        void *p = ev_mem(f, e->u.load.buf, &err);
        if (!p)
            return err;
        int64_t i;
        if ((rc = ev_index(f, e->u.load.buf, e->u.load.index, &i, "load")))
            return rc;
        ev_val v = ev_read(e->u.load.buf->dtype, p, i);
        *out = e->u.load.buf->dtype == e->dtype ? v : ev_convert(e->u.load.buf->dtype, e->dtype, v);
        return 0;
    }
    case TTH_TEXPR_BINARY:
        return ev_binary(f, e, out);
    case TTH_TEXPR_UNARY: {
        ev_val a;
        if ((rc = ev_expr(f, e->u.un.a, &a)))
            return rc;
        tth_dtype t = e->u.un.a->dtype;
        if (e->u.un.op == TTH_TUN_NOT) {
            out->i = ev_isfloat(t) ? a.f == 0 : a.i == 0;
        } else if (ev_isfloat(t)) {
            out->f = -a.f;
        } else {
            out->i = ev_norm(t, (int64_t)(0 - (uint64_t)a.i));
        }
        return 0;
    }
    case TTH_TEXPR_SELECT: {
        ev_val c, a, b;
        if ((rc = ev_expr(f, e->u.select.cond, &c)) || (rc = ev_expr(f, e->u.select.a, &a)) ||
            (rc = ev_expr(f, e->u.select.b, &b)))
            return rc;
        int truth = ev_isfloat(e->u.select.cond->dtype) ? c.f != 0 : c.i != 0;
        *out = truth ? a : b;
        return 0;
    }
    case TTH_TEXPR_CAST: {
        ev_val a;
        if ((rc = ev_expr(f, e->u.cast.value, &a)))
            return rc;
        *out = ev_convert(e->u.cast.value->dtype, e->dtype, a);
        return 0;
    }
    case TTH_TEXPR_REINTERPRET: {
        ev_val a;
        unsigned char bits[8] = {0};
        if ((rc = ev_expr(f, e->u.cast.value, &a)))
            return rc;
        ev_write(e->u.cast.value->dtype, bits, 0, a);
        *out = ev_read(e->dtype, bits, 0);
        return 0;
    }
    case TTH_TEXPR_INTRIN:
        return ev_intrin(f, e, out);
    case TTH_TEXPR_CALL_EXTERN:
        return ev_fail(f, TTH_EUNSUPPORTED, "call_extern '%s' cannot be interpreted", e->u.call.name);
    case TTH_TEXPR_ADDRESS_OF:
        return ev_fail(f, TTH_EUNSUPPORTED, "address_of '%s' cannot be interpreted outside call_extern",
                       e->u.load.buf->name);
    }
    return ev_fail(f, TTH_EINVAL, "unknown expression kind %d", (int)e->kind);
}

/* ------------------------------------------------------------------ statements ---- */

static int ev_func(const tth_tir_module *mod, const tth_prim_func *fn, void *const *buffers, size_t n, int depth,
                   uint8_t *ws, size_t ws_size, tth_diag *diag);

static int ev_stmt(ev_frame *f, const tth_tstmt *s);

/* let v = <vector value> in body: the lanes are computed first, then the body runs with them */
static int ev_let_vector(ev_frame *f, const tth_tstmt *s)
{
    const tth_tvar *var = s->u.let.var;
    int rc = ev_var_slot(f, var->id);
    if (rc)
        return rc;
    if (var->id >= f->nvvals) {
        size_t n = (size_t)var->id + 16;
        ev_val **nv = realloc(f->vvals, n * sizeof *nv);
        if (!nv)
            return ev_fail(f, TTH_ENOMEM, "out of memory");
        memset(nv + f->nvvals, 0, (n - f->nvvals) * sizeof *nv);
        f->vvals = nv;
        f->nvvals = n;
    }
    ev_val *lanes = calloc((size_t)var->lanes, sizeof *lanes);
    if (!lanes)
        return ev_fail(f, TTH_ENOMEM, "out of memory");
    int32_t save_lane = f->lane;
    for (int32_t l = 0; l < var->lanes && !rc; l++) {
        f->lane = l;
        rc = ev_expr(f, s->u.let.value, &lanes[l]);
        if (!rc && s->u.let.value->dtype != var->dtype)
            lanes[l] = ev_convert(s->u.let.value->dtype, var->dtype, lanes[l]);
    }
    f->lane = save_lane;
    if (!rc) {
        ev_val *save = f->vvals[var->id];
        unsigned char was = f->bound[var->id];
        f->vvals[var->id] = lanes;
        f->bound[var->id] = 1;
        rc = ev_stmt(f, s->u.let.body);
        f->vvals[var->id] = save;
        f->bound[var->id] = was;
    }
    free(lanes);
    return rc;
}

static int ev_stmt(ev_frame *f, const tth_tstmt *s)
{
    int rc;
    switch (s->kind) {
    case TTH_TSTMT_SEQ:
        for (size_t i = 0; i < s->u.seq.n; i++)
            if ((rc = ev_stmt(f, s->u.seq.stmts[i])))
                return rc;
        return 0;
    case TTH_TSTMT_FOR: {
        ev_val mn, ex;
        if ((rc = ev_expr(f, s->u.loop.min, &mn)) || (rc = ev_expr(f, s->u.loop.extent, &ex)))
            return rc;
        const tth_tvar *v = s->u.loop.var;
        if ((rc = ev_var_slot(f, v->id)))
            return rc;
        ev_val save = f->vars[v->id];
        unsigned char was = f->bound[v->id];
        for (int64_t i = 0; i < ex.i; i++) {
            f->vars[v->id].i = ev_norm(v->dtype, mn.i + i);
            f->bound[v->id] = 1;
            if ((rc = ev_stmt(f, s->u.loop.body)))
                return rc;
        }
        f->vars[v->id] = save;
        f->bound[v->id] = was;
        return 0;
    }
    case TTH_TSTMT_STORE: {
        int err = 0;
        void *p = ev_mem(f, s->u.store.buf, &err);
        if (!p)
            return err;
        int32_t save = f->lane;
        for (int32_t l = 0; l < s->u.store.index->lanes; l++) {
            int64_t i = 0;
            ev_val v;
            f->lane = l;
            if ((rc = ev_index(f, s->u.store.buf, s->u.store.index, &i, "store")) ||
                (rc = ev_expr(f, s->u.store.value, &v)))
                break;
            if (s->u.store.value->dtype != s->u.store.buf->dtype)
                v = ev_convert(s->u.store.value->dtype, s->u.store.buf->dtype, v);
            ev_write(s->u.store.buf->dtype, p, i, v);
        }
        f->lane = save;
        return rc;
    }
    case TTH_TSTMT_ALLOCATE: {
        const tth_tbuffer *b = s->u.alloc.buf;
        if ((rc = ev_mem_slot(f, b->id)))
            return rc;
        size_t nb = tth_tbuffer_nbytes(b);
        int planned = b->offset >= 0 && f->ws;
        if (planned && (size_t)b->offset + nb > f->ws_size)
            return ev_fail(f, TTH_EINVAL, "local buffer '%s' lies outside the planned workspace", b->name);
        void *p = planned ? (void *)(f->ws + b->offset) : malloc(nb ? nb : 1);
        if (!p)
            return ev_fail(f, TTH_ENOMEM, "out of memory allocating '%s'", b->name);
        /* not zeroed on purpose: generated code must not read before writing (and in a planned
         * workspace, bytes another live buffer still needs would be visibly destroyed) */
        memset(p, 0xA5, nb);
        void *save = f->mem[b->id];
        f->mem[b->id] = p;
        rc = ev_stmt(f, s->u.alloc.body);
        f->mem[b->id] = save;
        if (!planned)
            free(p);
        return rc;
    }
    case TTH_TSTMT_IF: {
        ev_val c;
        if ((rc = ev_expr(f, s->u.cond.cond, &c)))
            return rc;
        int truth = ev_isfloat(s->u.cond.cond->dtype) ? c.f != 0 : c.i != 0;
        if (truth)
            return ev_stmt(f, s->u.cond.then_s);
        return s->u.cond.else_s ? ev_stmt(f, s->u.cond.else_s) : 0;
    }
    case TTH_TSTMT_LET: {
        const tth_tvar *var = s->u.let.var;
        if (var->lanes > 1)
            return ev_let_vector(f, s);
        ev_val v;
        if ((rc = ev_expr(f, s->u.let.value, &v)))
            return rc;
        if ((rc = ev_var_slot(f, var->id)))
            return rc;
        if (s->u.let.value->dtype != var->dtype)
            v = ev_convert(s->u.let.value->dtype, var->dtype, v);
        ev_val save = f->vars[var->id];
        unsigned char was = f->bound[var->id];
        f->vars[var->id] = v;
        f->bound[var->id] = 1;
        rc = ev_stmt(f, s->u.let.body);
        f->vars[var->id] = save;
        f->bound[var->id] = was;
        return rc;
    }
    case TTH_TSTMT_EVALUATE: {
        ev_val v;
        return ev_expr(f, s->u.eval.value, &v);
    }
    case TTH_TSTMT_CALL_FUNC: {
        const tth_prim_func *callee = tth_tir_module_find(f->mod, s->u.call.func);
        if (!callee)
            return ev_fail(f, TTH_ENOENT, "call of unknown function '%s'", s->u.call.func);
        if (callee->nparams != s->u.call.nargs)
            return ev_fail(f, TTH_EINVAL, "call of '%s' with %zu buffers (it takes %zu)", s->u.call.func,
                           s->u.call.nargs, callee->nparams);
        void **args = calloc(s->u.call.nargs + 1, sizeof *args);
        if (!args)
            return ev_fail(f, TTH_ENOMEM, "out of memory");
        int err = 0;
        for (size_t i = 0; i < s->u.call.nargs && !err; i++) {
            const tth_tbuffer *a = s->u.call.args[i], *p = callee->params[i];
            args[i] = ev_mem(f, a, &err);
            if (!err && tth_tbuffer_nbytes(a) < tth_tbuffer_nbytes(p))
                err = ev_fail(f, TTH_EINVAL, "call of '%s': buffer '%s' is smaller than parameter '%s'",
                              s->u.call.func, a->name, p->name);
        }
        if (!err)
            err = ev_func(f->mod, callee, args, s->u.call.nargs, f->depth + 1, f->ws, f->ws_size, f->diag);
        free(args);
        return err;
    }
    }
    return ev_fail(f, TTH_EINVAL, "unknown statement kind %d", (int)s->kind);
}

static int ev_func(const tth_tir_module *mod, const tth_prim_func *fn, void *const *buffers, size_t n, int depth,
                   uint8_t *ws, size_t ws_size, tth_diag *diag)
{
    ev_frame f;
    memset(&f, 0, sizeof f);
    f.mod = mod;
    f.fn = fn;
    f.diag = diag;
    f.depth = depth;
    f.ws = ws;
    f.ws_size = ws_size;
    if (depth > EV_MAX_DEPTH)
        return ev_fail(&f, TTH_ELIMIT, "calls nested deeper than %d", EV_MAX_DEPTH);
    if (n != fn->nparams)
        return ev_fail(&f, TTH_EINVAL, "'%s' takes %zu buffers, %zu given", fn->name, fn->nparams, n);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        const tth_tbuffer *p = fn->params[i];
        if (!buffers[i] && tth_tbuffer_numel(p) > 0) {
            rc = ev_fail(&f, TTH_EINVAL, "buffer %zu ('%s') is NULL", i, p->name);
            break;
        }
        if (!(rc = ev_mem_slot(&f, p->id)))
            f.mem[p->id] = buffers[i];
    }
    if (!rc && fn->body)
        rc = ev_stmt(&f, fn->body);
    for (size_t i = 0; i < f.nmem; i++)
        if (f.owned[i])
            free(f.mem[i]);
    free(f.mem);
    free(f.owned);
    free(f.vars);
    free(f.bound);
    free(f.vvals);
    return rc;
}

/* ------------------------------------------------------------------ planned workspace ---- */

static void ws_note(const tth_tbuffer *b, size_t *end)
{
    if ((b->scope == TTH_SCOPE_WORKSPACE || b->scope == TTH_SCOPE_LOCAL) && b->offset >= 0) {
        size_t e = (size_t)b->offset + tth_tbuffer_nbytes(b);
        if (e > *end)
            *end = e;
    }
}

static void ws_expr(const tth_texpr *e, size_t *end)
{
    if (!e)
        return;
    if (e->kind == TTH_TEXPR_LOAD || e->kind == TTH_TEXPR_ADDRESS_OF)
        ws_note(e->u.load.buf, end);
    tth_texpr *scratch[3], *const *kids;
    size_t n = tth_tir_expr_children(e, scratch, &kids);
    for (size_t i = 0; i < n; i++)
        ws_expr(kids[i], end);
}

/* the end of the last planned byte used by st and the functions it calls */
static void ws_stmt(const tth_tir_module *mod, const tth_tstmt *st, size_t *end, int depth)
{
    if (!st || depth > EV_MAX_DEPTH)
        return;
    switch (st->kind) {
    case TTH_TSTMT_SEQ:
        for (size_t i = 0; i < st->u.seq.n; i++)
            ws_stmt(mod, st->u.seq.stmts[i], end, depth);
        break;
    case TTH_TSTMT_FOR:
        ws_expr(st->u.loop.min, end);
        ws_expr(st->u.loop.extent, end);
        ws_stmt(mod, st->u.loop.body, end, depth);
        break;
    case TTH_TSTMT_STORE:
        ws_note(st->u.store.buf, end);
        ws_expr(st->u.store.index, end);
        ws_expr(st->u.store.value, end);
        break;
    case TTH_TSTMT_ALLOCATE: ws_note(st->u.alloc.buf, end); ws_stmt(mod, st->u.alloc.body, end, depth); break;
    case TTH_TSTMT_IF:
        ws_expr(st->u.cond.cond, end);
        ws_stmt(mod, st->u.cond.then_s, end, depth);
        ws_stmt(mod, st->u.cond.else_s, end, depth);
        break;
    case TTH_TSTMT_LET: ws_expr(st->u.let.value, end); ws_stmt(mod, st->u.let.body, end, depth); break;
    case TTH_TSTMT_EVALUATE: ws_expr(st->u.eval.value, end); break;
    case TTH_TSTMT_CALL_FUNC: {
        for (size_t i = 0; i < st->u.call.nargs; i++)
            ws_note(st->u.call.args[i], end);
        const tth_prim_func *callee = tth_tir_module_find(mod, st->u.call.func);
        if (callee)
            ws_stmt(mod, callee->body, end, depth + 1);
        break;
    }
    }
}

int tth_tir_eval(const tth_tir_module *mod, const char *func, void *const *buffers, size_t nbuffers, tth_diag *diag)
{
    if (!mod || !func || (nbuffers && !buffers))
        return tth_diag_set(diag, TTH_EINVAL, NULL, "tth_tir_eval: missing module, function or buffers");
    const tth_prim_func *fn = tth_tir_module_find(mod, func);
    if (!fn)
        return tth_diag_set(diag, TTH_ENOENT, func, "no PrimFunc named '%s' in the module", func);
    /* once memory is planned, WORKSPACE and LOCAL buffers live at their offsets in one block, so
     * an unsound plan shows as wrong results or poisoned reads */
    size_t end = 0;
    ws_stmt(mod, fn->body, &end, 0);
    uint8_t *ws = NULL;
    if (end) {
        ws = calloc(end, 1);
        if (!ws)
            return tth_diag_set(diag, TTH_ENOMEM, func, "out of memory allocating a %zu-byte workspace", end);
    }
    int rc = ev_func(mod, fn, buffers, nbuffers, 0, ws, end, diag);
    free(ws);
    return rc;
}
