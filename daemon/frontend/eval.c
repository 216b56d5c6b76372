/* eval.c: a small reference evaluator for every Relay op, used by constant folding (and so by
 * the importer's shape arithmetic). Semantics are ONNX's; arithmetic runs in double (float
 * dtypes) or int64 (integer dtypes) and is converted to the result dtype once. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontend_internal.h"

/* ---- element access ---- */

double tth__ld_f64(const tth_tensor *t, int64_t i)
{
    const void *d = t->data;
    switch (t->type.dtype) {
    case TTH_F32: return ((const float *)d)[i];
    case TTH_F16: return tth_f16_to_f32(((const uint16_t *)d)[i]);
    case TTH_BF16: return tth_bf16_to_f32(((const uint16_t *)d)[i]);
    case TTH_F64: return ((const double *)d)[i];
    case TTH_I8: return ((const int8_t *)d)[i];
    case TTH_I16: return ((const int16_t *)d)[i];
    case TTH_I32: return ((const int32_t *)d)[i];
    case TTH_I64: return (double)((const int64_t *)d)[i];
    case TTH_U8: return ((const uint8_t *)d)[i];
    case TTH_U16: return ((const uint16_t *)d)[i];
    case TTH_U32: return ((const uint32_t *)d)[i];
    case TTH_U64: return (double)((const uint64_t *)d)[i];
    case TTH_BOOL: return ((const uint8_t *)d)[i] != 0;
    default: return 0;
    }
}

static int64_t f64_to_i64(double v)
{
    if (isnan(v))
        return 0;
    if (v >= 9.2233720368547758e18)
        return INT64_MAX;
    if (v <= -9.2233720368547758e18)
        return INT64_MIN;
    return (int64_t)v;
}

int64_t tth__ld_i64(const tth_tensor *t, int64_t i)
{
    const void *d = t->data;
    switch (t->type.dtype) {
    case TTH_I8: return ((const int8_t *)d)[i];
    case TTH_I16: return ((const int16_t *)d)[i];
    case TTH_I32: return ((const int32_t *)d)[i];
    case TTH_I64: return ((const int64_t *)d)[i];
    case TTH_U8: return ((const uint8_t *)d)[i];
    case TTH_U16: return ((const uint16_t *)d)[i];
    case TTH_U32: return ((const uint32_t *)d)[i];
    case TTH_U64: return (int64_t)((const uint64_t *)d)[i];
    case TTH_BOOL: return ((const uint8_t *)d)[i] != 0;
    default: return f64_to_i64(tth__ld_f64(t, i));
    }
}

void tth__st_i64(tth_tensor *t, int64_t i, int64_t v)
{
    void *d = t->data;
    switch (t->type.dtype) {
    case TTH_F32: ((float *)d)[i] = (float)v; break;
    case TTH_F16: ((uint16_t *)d)[i] = tth_f32_to_f16((float)v); break;
    case TTH_BF16: ((uint16_t *)d)[i] = tth_f32_to_bf16((float)v); break;
    case TTH_F64: ((double *)d)[i] = (double)v; break;
    case TTH_I8: ((int8_t *)d)[i] = (int8_t)(uint8_t)(uint64_t)v; break;
    case TTH_I16: ((int16_t *)d)[i] = (int16_t)(uint16_t)(uint64_t)v; break;
    case TTH_I32: ((int32_t *)d)[i] = (int32_t)(uint32_t)(uint64_t)v; break;
    case TTH_I64: ((int64_t *)d)[i] = v; break;
    case TTH_U8: ((uint8_t *)d)[i] = (uint8_t)(uint64_t)v; break;
    case TTH_U16: ((uint16_t *)d)[i] = (uint16_t)(uint64_t)v; break;
    case TTH_U32: ((uint32_t *)d)[i] = (uint32_t)(uint64_t)v; break;
    case TTH_U64: ((uint64_t *)d)[i] = (uint64_t)v; break;
    case TTH_BOOL: ((uint8_t *)d)[i] = v != 0; break;
    default: break;
    }
}

void tth__st_f64(tth_tensor *t, int64_t i, double v)
{
    switch (t->type.dtype) {
    case TTH_F32: ((float *)t->data)[i] = (float)v; break;
    case TTH_F16: ((uint16_t *)t->data)[i] = tth_f32_to_f16((float)v); break;
    case TTH_BF16: ((uint16_t *)t->data)[i] = tth_f32_to_bf16((float)v); break;
    case TTH_F64: ((double *)t->data)[i] = v; break;
    case TTH_BOOL: ((uint8_t *)t->data)[i] = v != 0; break;
    case TTH_U64: /* saturating like f64_to_i64: 2^64 and above is UINT64_MAX */
        ((uint64_t *)t->data)[i] = v >= 18446744073709551616.0 ? UINT64_MAX
                                   : v >= 9.2233720368547758e18 ? (uint64_t)(v - 9.2233720368547758e18) + (UINT64_C(1) << 63)
                                                                : (uint64_t)f64_to_i64(v);
        break;
    default: tth__st_i64(t, i, f64_to_i64(v)); break;
    }
}

/* ---- attributes ---- */

int64_t tth__attr_int(const json_t *attrs, const char *key, int64_t dflt)
{
    json_t *v = attrs ? json_object_get(attrs, key) : NULL;
    if (json_is_integer(v))
        return json_integer_value(v);
    if (json_is_real(v))
        return f64_to_i64(json_real_value(v));
    if (json_is_boolean(v))
        return json_is_true(v);
    return dflt;
}

double tth__attr_num(const json_t *attrs, const char *key, double dflt)
{
    json_t *v = attrs ? json_object_get(attrs, key) : NULL;
    return json_is_number(v) ? json_number_value(v) : dflt;
}

const char *tth__attr_str(const json_t *attrs, const char *key, const char *dflt)
{
    json_t *v = attrs ? json_object_get(attrs, key) : NULL;
    return json_is_string(v) ? json_string_value(v) : dflt;
}

int tth__attr_ints(const json_t *attrs, const char *key, int64_t *out, int max)
{
    json_t *v = attrs ? json_object_get(attrs, key) : NULL;
    if (!json_is_array(v))
        return -1;
    int n = (int)json_array_size(v);
    for (int i = 0; i < n && i < max; i++)
        out[i] = json_integer_value(json_array_get(v, (size_t)i));
    return n < max ? n : max;
}

json_t *tth__json_ints(const int64_t *v, int n)
{
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

/* ---- helpers ---- */

typedef struct ev {
    tth_tensor *const *a;
    size_t n;
    tth_op op;
    const json_t *attrs;
    const tth_rtype *ot;
    tth_tensor **outs;
    size_t *nouts;
    tth_diag *diag;
} ev;

static int64_t numel(const tth_ttype *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= t->shape[i];
    return n;
}

static void strides_of(const tth_ttype *t, int64_t *s)
{
    int64_t acc = 1;
    for (int i = t->rank - 1; i >= 0; i--) {
        s[i] = acc;
        acc *= t->shape[i];
    }
}

/* Strides of `in` broadcast to out's rank (0 where broadcast). */
static void bcast_strides(const tth_ttype *in, const tth_ttype *out, int64_t *s)
{
    int64_t st[TTH_MAX_RANK];
    strides_of(in, st);
    int off = out->rank - in->rank;
    for (int i = 0; i < out->rank; i++) {
        int j = i - off;
        s[i] = (j < 0 || in->shape[j] == 1) ? 0 : st[j];
    }
}

static int64_t offset_of(int64_t lin, const tth_ttype *out, const int64_t *bs)
{
    int64_t off = 0;
    for (int i = out->rank - 1; i >= 0; i--) {
        int64_t c = out->shape[i] ? lin % out->shape[i] : 0;
        lin = out->shape[i] ? lin / out->shape[i] : 0;
        off += c * bs[i];
    }
    return off;
}

static tth_tensor *new_out(ev *e, const tth_ttype *t)
{
    tth_tensor *o = tth_tensor_new(t, NULL);
    if (!o) {
        tth_diag_set(e->diag, TTH_ENOMEM, NULL, "out of memory while folding constants");
        return NULL;
    }
    e->outs[(*e->nouts)++] = o;
    return o;
}

static double *to_f64(const tth_tensor *t)
{
    int64_t n = numel(&t->type);
    double *d = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (d)
        for (int64_t i = 0; i < n; i++)
            d[i] = tth__ld_f64(t, i);
    return d;
}

static int oom(ev *e) { return tth_diag_set(e->diag, TTH_ENOMEM, NULL, "out of memory while folding constants"); }

static double round_half_even(double v) { return v - floor(v) == 0.5 ? 2.0 * floor(v / 2.0 + 0.5) : round(v); }

static double dtype_lo(tth_dtype d)
{
    switch (d) {
    case TTH_I8: return -128;
    case TTH_U8: return 0;
    case TTH_I16: return -32768;
    case TTH_U16: return 0;
    case TTH_I32: return -2147483648.0;
    default: return -INFINITY;
    }
}

static double dtype_hi(tth_dtype d)
{
    switch (d) {
    case TTH_I8: return 127;
    case TTH_U8: return 255;
    case TTH_I16: return 32767;
    case TTH_U16: return 65535;
    case TTH_I32: return 2147483647.0;
    default: return INFINITY;
    }
}

static double saturate(double v, tth_dtype d) { return fmin(fmax(v, dtype_lo(d)), dtype_hi(d)); }

/* ---- elementwise ---- */

static double unary_f(tth_op op, double x, const json_t *at)
{
    switch (op) {
    case TTH_OP_NEGATIVE: return -x;
    case TTH_OP_ABS: return fabs(x);
    case TTH_OP_SQRT: return sqrt(x);
    case TTH_OP_RECIPROCAL: return 1.0 / x;
    case TTH_OP_EXP: return exp(x);
    case TTH_OP_LOG: return log(x);
    case TTH_OP_SIN: return sin(x);
    case TTH_OP_COS: return cos(x);
    case TTH_OP_TANH: return tanh(x);
    case TTH_OP_ASIN: return asin(x);
    case TTH_OP_ACOS: return acos(x);
    case TTH_OP_ATAN: return atan(x);
    case TTH_OP_ASINH: return asinh(x);
    case TTH_OP_ACOSH: return acosh(x);
    case TTH_OP_ATANH: return atanh(x);
    case TTH_OP_SIGMOID: return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
    case TTH_OP_ERF: return erf(x);
    case TTH_OP_FLOOR: return floor(x);
    case TTH_OP_CEIL: return ceil(x);
    case TTH_OP_ROUND: return isfinite(x) ? round_half_even(x) : x;
    case TTH_OP_SIGN: return x > 0 ? 1 : x < 0 ? -1 : 0;
    case TTH_OP_LOGICAL_NOT: return x == 0;
    case TTH_OP_RELU: return x > 0 ? x : 0;
    case TTH_OP_LEAKY_RELU: return x >= 0 ? x : x * tth__attr_num(at, "alpha", 0.01);
    case TTH_OP_ELU: return x >= 0 ? x : tth__attr_num(at, "alpha", 1.0) * (exp(x) - 1.0);
    case TTH_OP_SELU: {
        double a = tth__attr_num(at, "alpha", 1.67326319217681884765625),
               g = tth__attr_num(at, "gamma", 1.05070102214813232421875);
        return x > 0 ? g * x : g * (a * exp(x) - a);
    }
    case TTH_OP_THRESHOLDED_RELU: return x > tth__attr_num(at, "alpha", 1.0) ? x : 0;
    case TTH_OP_SOFTPLUS: return x > 30 ? x : log1p(exp(x));
    case TTH_OP_SOFTSIGN: return x / (1.0 + fabs(x));
    case TTH_OP_HARD_SIGMOID:
        return fmax(0.0, fmin(1.0, tth__attr_num(at, "alpha", 0.2) * x + tth__attr_num(at, "beta", 0.5)));
    case TTH_OP_HARD_SWISH: return x * fmax(0.0, fmin(1.0, x / 6.0 + 0.5));
    case TTH_OP_CLIP: {
        double lo = tth__attr_num(at, "a_min", -INFINITY), hi = tth__attr_num(at, "a_max", INFINITY);
        return x < lo ? lo : x > hi ? hi : x;
    }
    case TTH_OP_CAST: return x;
    default: return NAN;
    }
}

/* Integer unary ops that stay exact in int64; others go through double. */
static int unary_i(tth_op op, int64_t x, const json_t *at, int64_t *r)
{
    switch (op) {
    case TTH_OP_NEGATIVE: *r = (int64_t)(0 - (uint64_t)x); return 1;
    case TTH_OP_ABS: *r = x < 0 ? (int64_t)(0 - (uint64_t)x) : x; return 1;
    case TTH_OP_SIGN: *r = x > 0 ? 1 : x < 0 ? -1 : 0; return 1;
    case TTH_OP_RELU: *r = x > 0 ? x : 0; return 1;
    case TTH_OP_FLOOR:
    case TTH_OP_CEIL:
    case TTH_OP_ROUND:
    case TTH_OP_CAST: *r = x; return 1;
    case TTH_OP_LOGICAL_NOT: *r = x == 0; return 1;
    case TTH_OP_CLIP: {
        double lo = tth__attr_num(at, "a_min", -INFINITY), hi = tth__attr_num(at, "a_max", INFINITY);
        *r = (double)x < lo ? f64_to_i64(ceil(lo)) : (double)x > hi ? f64_to_i64(floor(hi)) : x;
        return 1;
    }
    default: return 0;
    }
}

static int eval_unary(ev *e, tth_op op)
{
    const tth_tensor *x = e->a[0];
    tth_tensor *o = new_out(e, &e->ot->tensor);
    if (!o)
        return TTH_ENOMEM;
    int64_t n = numel(&o->type);
    int in_int = !tth_dtype_is_float(x->type.dtype);
    int out_int = !tth_dtype_is_float(o->type.dtype);
    for (int64_t i = 0; i < n; i++) {
        int64_t r;
        if (in_int && unary_i(op, tth__ld_i64(x, i), e->attrs, &r)) {
            tth__st_i64(o, i, r);
            continue;
        }
        double v = unary_f(op, tth__ld_f64(x, i), e->attrs);
        if (op == TTH_OP_CAST && out_int && o->type.dtype != TTH_BOOL)
            v = isfinite(v) ? trunc(v) : 0;
        tth__st_f64(o, i, v);
    }
    return 0;
}

static int is_compare(tth_op op)
{
    return op == TTH_OP_EQUAL || op == TTH_OP_LESS || op == TTH_OP_LESS_EQUAL || op == TTH_OP_GREATER ||
           op == TTH_OP_GREATER_EQUAL;
}

static double binary_f(tth_op op, double a, double b, const json_t *at)
{
    switch (op) {
    case TTH_OP_ADD: return a + b;
    case TTH_OP_SUBTRACT: return a - b;
    case TTH_OP_MULTIPLY: return a * b;
    case TTH_OP_DIVIDE: return a / b;
    case TTH_OP_POWER: return pow(a, b);
    case TTH_OP_MAXIMUM: return isnan(a) || isnan(b) ? NAN : fmax(a, b);
    case TTH_OP_MINIMUM: return isnan(a) || isnan(b) ? NAN : fmin(a, b);
    case TTH_OP_MOD:
        if (tth__attr_int(at, "fmod", 0))
            return fmod(a, b);
        else {
            double r = fmod(a, b);
            return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
        }
    case TTH_OP_PRELU: return a < 0 ? a * b : a;
    case TTH_OP_EQUAL: return a == b;
    case TTH_OP_LESS: return a < b;
    case TTH_OP_LESS_EQUAL: return a <= b;
    case TTH_OP_GREATER: return a > b;
    case TTH_OP_GREATER_EQUAL: return a >= b;
    case TTH_OP_LOGICAL_AND: return (a != 0) && (b != 0);
    case TTH_OP_LOGICAL_OR: return (a != 0) || (b != 0);
    case TTH_OP_LOGICAL_XOR: return (a != 0) != (b != 0);
    default: return NAN;
    }
}

static int64_t ipow(int64_t a, int64_t b)
{
    if (b < 0)
        return a == 1 ? 1 : a == -1 ? (b & 1 ? -1 : 1) : 0;
    uint64_t r = 1, base = (uint64_t)a;
    while (b) {
        if (b & 1)
            r *= base;
        base *= base;
        b >>= 1;
    }
    return (int64_t)r;
}

static int64_t binary_i(tth_op op, int64_t a, int64_t b, const json_t *at)
{
    switch (op) {
    case TTH_OP_ADD: return (int64_t)((uint64_t)a + (uint64_t)b);
    case TTH_OP_SUBTRACT: return (int64_t)((uint64_t)a - (uint64_t)b);
    case TTH_OP_MULTIPLY: return (int64_t)((uint64_t)a * (uint64_t)b);
    case TTH_OP_DIVIDE: return b == 0 || (a == INT64_MIN && b == -1) ? 0 : a / b;
    case TTH_OP_POWER: return ipow(a, b);
    case TTH_OP_MAXIMUM: return a > b ? a : b;
    case TTH_OP_MINIMUM: return a < b ? a : b;
    case TTH_OP_MOD: {
        if (b == 0 || (a == INT64_MIN && b == -1))
            return 0;
        int64_t r = a % b;
        if (!tth__attr_int(at, "fmod", 0) && r != 0 && ((r < 0) != (b < 0)))
            r += b;
        return r;
    }
    case TTH_OP_PRELU: return a < 0 ? (int64_t)((uint64_t)a * (uint64_t)b) : a;
    case TTH_OP_EQUAL: return a == b;
    case TTH_OP_LESS: return a < b;
    case TTH_OP_LESS_EQUAL: return a <= b;
    case TTH_OP_GREATER: return a > b;
    case TTH_OP_GREATER_EQUAL: return a >= b;
    case TTH_OP_LOGICAL_AND: return a && b;
    case TTH_OP_LOGICAL_OR: return a || b;
    case TTH_OP_LOGICAL_XOR: return (a != 0) != (b != 0);
    default: return 0;
    }
}

static int eval_binary(ev *e, tth_op op)
{
    const tth_tensor *x = e->a[0], *y = e->a[1];
    tth_tensor *o = new_out(e, &e->ot->tensor);
    if (!o)
        return TTH_ENOMEM;
    int64_t sx[TTH_MAX_RANK], sy[TTH_MAX_RANK], n = numel(&o->type);
    bcast_strides(&x->type, &o->type, sx);
    bcast_strides(&y->type, &o->type, sy);
    int as_int = !tth_dtype_is_float(x->type.dtype) && !tth_dtype_is_float(y->type.dtype);
    /* unsigned 64-bit comparisons must not go through int64 */
    if (x->type.dtype == TTH_U64 && is_compare(op))
        as_int = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t ox = offset_of(i, &o->type, sx), oy = offset_of(i, &o->type, sy);
        if (as_int)
            tth__st_i64(o, i, binary_i(op, tth__ld_i64(x, ox), tth__ld_i64(y, oy), e->attrs));
        else
            tth__st_f64(o, i, binary_f(op, tth__ld_f64(x, ox), tth__ld_f64(y, oy), e->attrs));
    }
    return 0;
}

static int eval_where(ev *e)
{
    tth_tensor *o = new_out(e, &e->ot->tensor);
    if (!o)
        return TTH_ENOMEM;
    int64_t s[3][TTH_MAX_RANK], n = numel(&o->type);
    size_t esz = tth_dtype_size(o->type.dtype);
    for (int k = 0; k < 3; k++)
        bcast_strides(&e->a[k]->type, &o->type, s[k]);
    for (int64_t i = 0; i < n; i++) {
        int c = tth__ld_i64(e->a[0], offset_of(i, &o->type, s[0])) != 0;
        const tth_tensor *src = e->a[c ? 1 : 2];
        int64_t off = offset_of(i, &o->type, s[c ? 1 : 2]);
        memcpy((char *)o->data + (size_t)i * esz, (const char *)src->data + (size_t)off * esz, esz);
    }
    return 0;
}

/* ---- data movement ---- */

static int eval_copy(ev *e) /* reshape: same bytes */
{
    tth_tensor *o = new_out(e, &e->ot->tensor);
    if (!o)
        return TTH_ENOMEM;
    if (o->nbytes != e->a[0]->nbytes)
        return tth_diag_set(e->diag, TTH_EINTERNAL, NULL, "reshape changes the byte size");
    if (o->nbytes)
        memcpy(o->data, e->a[0]->data, o->nbytes);
    return 0;
}

static int eval_broadcast(ev *e)
{
    tth_tensor *o = new_out(e, &e->ot->tensor);
    if (!o)
        return TTH_ENOMEM;
    int64_t s[TTH_MAX_RANK], n = numel(&o->type);
    size_t esz = tth_dtype_size(o->type.dtype);
    bcast_strides(&e->a[0]->type, &o->type, s);
    for (int64_t i = 0; i < n; i++)
        memcpy((char *)o->data + (size_t)i * esz, (const char *)e->a[0]->data + (size_t)offset_of(i, &o->type, s) * esz,
               esz);
    return 0;
}

static int eval_transpose(ev *e)
{
    const tth_tensor *x = e->a[0];
    tth_tensor *o = new_out(e, &e->ot->tensor);
    if (!o)
        return TTH_ENOMEM;
    int r = x->type.rank;
    int64_t axes[TTH_MAX_RANK], sin[TTH_MAX_RANK], s[TTH_MAX_RANK];
    int na = tth__attr_ints(e->attrs, "axes", axes, TTH_MAX_RANK);
    if (na <= 0)
        for (int i = 0; i < r; i++)
            axes[i] = r - 1 - i;
    strides_of(&x->type, sin);
    for (int i = 0; i < r; i++)
        s[i] = sin[axes[i]];
    int64_t n = numel(&o->type);
    size_t esz = tth_dtype_size(o->type.dtype);
    for (int64_t i = 0; i < n; i++)
        memcpy((char *)o->data + (size_t)i * esz, (const char *)x->data + (size_t)offset_of(i, &o->type, s) * esz, esz);
    return 0;
}

static int norm_axis(int64_t axis, int rank) { return (int)(axis < 0 ? axis + rank : axis); }

static int eval_concat(ev *e)
{
    tth_tensor *o = new_out(e, &e->ot->tensor);
    if (!o)
        return TTH_ENOMEM;
    int r = o->type.rank, ax = norm_axis(tth__attr_int(e->attrs, "axis", 0), r);
    size_t esz = tth_dtype_size(o->type.dtype);
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < ax; i++)
        outer *= o->type.shape[i];
    for (int i = ax + 1; i < r; i++)
        inner *= o->type.shape[i];
    int64_t pos = 0;
    for (size_t k = 0; k < e->n; k++) {
        int64_t d = e->a[k]->type.shape[ax];
        for (int64_t ou = 0; ou < outer; ou++)
            memcpy((char *)o->data + (size_t)((ou * o->type.shape[ax] + pos) * inner) * esz,
                   (const char *)e->a[k]->data + (size_t)(ou * d * inner) * esz, (size_t)(d * inner) * esz);
        pos += d;
    }
    return 0;
}

static int eval_split(ev *e)
{
    const tth_tensor *x = e->a[0];
    if (e->ot->nfields < 0 || e->ot->nfields > TTH_EVAL_MAX_OUTS)
        return TTH_EUNSUPPORTED;
    int r = x->type.rank, ax = norm_axis(tth__attr_int(e->attrs, "axis", 0), r);
    size_t esz = tth_dtype_size(x->type.dtype);
    int64_t outer = 1, inner = 1, pos = 0;
    for (int i = 0; i < ax; i++)
        outer *= x->type.shape[i];
    for (int i = ax + 1; i < r; i++)
        inner *= x->type.shape[i];
    for (int32_t k = 0; k < e->ot->nfields; k++) {
        tth_tensor *o = new_out(e, &e->ot->fields[k]);
        if (!o)
            return TTH_ENOMEM;
        int64_t d = o->type.shape[ax];
        for (int64_t ou = 0; ou < outer; ou++)
            memcpy((char *)o->data + (size_t)(ou * d * inner) * esz,
                   (const char *)x->data + (size_t)((ou * x->type.shape[ax] + pos) * inner) * esz,
                   (size_t)(d * inner) * esz);
        pos += d;
    }
    return 0;
}

static int eval_strided_slice(ev *e)
{
    const tth_tensor *x = e->a[0];
    tth_tensor *o = new_out(e, &e->ot->tensor);
    if (!o)
        return TTH_ENOMEM;
    int r = x->type.rank;
    int64_t b[TTH_MAX_RANK], st[TTH_MAX_RANK], sin[TTH_MAX_RANK];
    int nb = tth__attr_ints(e->attrs, "begin", b, TTH_MAX_RANK), ns = tth__attr_ints(e->attrs, "strides", st, TTH_MAX_RANK);
    for (int i = 0; i < r; i++) {
        if (i >= nb)
            b[i] = 0;
        if (i >= ns)
            st[i] = 1;
    }
    strides_of(&x->type, sin);
    int64_t n = numel(&o->type);
    size_t esz = tth_dtype_size(o->type.dtype);
    for (int64_t i = 0; i < n; i++) {
        int64_t lin = i, off = 0;
        for (int d = r - 1; d >= 0; d--) {
            int64_t c = lin % o->type.shape[d];
            lin /= o->type.shape[d];
            int64_t src = b[d] + c * st[d];
            if (src < 0 || src >= x->type.shape[d])
                return tth_diag_set(e->diag, TTH_EINTERNAL, NULL, "strided_slice reads outside its input");
            off += src * sin[d];
        }
        memcpy((char *)o->data + (size_t)i * esz, (const char *)x->data + (size_t)off * esz, esz);
    }
    return 0;
}

static int eval_take(ev *e)
{
    const tth_tensor *x = e->a[0], *idx = e->a[1];
    tth_tensor *o = new_out(e, &e->ot->tensor);
    if (!o)
        return TTH_ENOMEM;
    int r = x->type.rank, ax = norm_axis(tth__attr_int(e->attrs, "axis", 0), r);
    size_t esz = tth_dtype_size(x->type.dtype);
    int64_t outer = 1, inner = 1, d = x->type.shape[ax], ni = numel(&idx->type);
    for (int i = 0; i < ax; i++)
        outer *= x->type.shape[i];
    for (int i = ax + 1; i < r; i++)
        inner *= x->type.shape[i];
    for (int64_t ou = 0; ou < outer; ou++)
        for (int64_t k = 0; k < ni; k++) {
            int64_t j = tth__ld_i64(idx, k);
            if (j < 0)
                j += d;
            if (j < 0 || j >= d)
                return tth_diag_set(e->diag, TTH_EMODEL, NULL, "gather index %lld is out of range for a dimension of %lld",
                                    (long long)tth__ld_i64(idx, k), (long long)d);
            memcpy((char *)o->data + (size_t)((ou * ni + k) * inner) * esz,
                   (const char *)x->data + (size_t)((ou * d + j) * inner) * esz, (size_t)inner * esz);
        }
    return 0;
}

static int64_t reflect_index(int64_t i, int64_t n, int edge)
{
    if (edge || n == 1)
        return i < 0 ? 0 : i >= n ? n - 1 : i;
    while (i < 0 || i >= n) {
        if (i < 0)
            i = -i;
        if (i >= n)
            i = 2 * (n - 1) - i;
    }
    return i;
}

static int eval_pad(ev *e)
{
    const tth_tensor *x = e->a[0];
    tth_tensor *o = new_out(e, &e->ot->tensor);
    if (!o)
        return TTH_ENOMEM;
    int r = x->type.rank;
    int64_t pb[TTH_MAX_RANK] = {0}, sin[TTH_MAX_RANK];
    tth__attr_ints(e->attrs, "pad_before", pb, TTH_MAX_RANK);
    const char *mode = tth__attr_str(e->attrs, "mode", "constant");
    int cmode = !strcmp(mode, "constant"), edge = !strcmp(mode, "edge");
    double pv = tth__attr_num(e->attrs, "pad_value", 0.0);
    strides_of(&x->type, sin);
    int64_t n = numel(&o->type);
    size_t esz = tth_dtype_size(o->type.dtype);
    for (int64_t i = 0; i < n; i++) {
        int64_t lin = i, off = 0;
        int inside = 1;
        for (int d = r - 1; d >= 0; d--) {
            int64_t c = lin % o->type.shape[d] - pb[d];
            lin /= o->type.shape[d];
            if (c < 0 || c >= x->type.shape[d]) {
                if (cmode || x->type.shape[d] == 0) {
                    inside = 0;
                    break;
                }
                c = reflect_index(c, x->type.shape[d], edge);
            }
            off += c * sin[d];
        }
        if (inside)
            memcpy((char *)o->data + (size_t)i * esz, (const char *)x->data + (size_t)off * esz, esz);
        else
            tth__st_f64(o, i, pv);
    }
    return 0;
}

/* ---- reductions ---- */

static int reduce_axes(ev *e, int rank, int *red)
{
    int64_t ax[TTH_MAX_RANK];
    int na = tth__attr_ints(e->attrs, "axis", ax, TTH_MAX_RANK);
    for (int i = 0; i < rank; i++)
        red[i] = na <= 0;
    for (int i = 0; i < na; i++) {
        int a = norm_axis(ax[i], rank);
        if (a < 0 || a >= rank)
            return TTH_EINVAL;
        red[a] = 1;
    }
    return 0;
}

static int eval_reduce(ev *e, tth_op op)
{
    const tth_tensor *x = e->a[0];
    tth_tensor *o = new_out(e, &e->ot->tensor);
    if (!o)
        return TTH_ENOMEM;
    int r = x->type.rank, red[TTH_MAX_RANK];
    if (reduce_axes(e, r, red))
        return TTH_EUNSUPPORTED;
    int64_t no = numel(&o->type), ni = numel(&x->type), os[TTH_MAX_RANK], acc_s = 1;
    /* strides of the output laid over the input's dims (0 on reduced dims) */
    for (int d = r - 1; d >= 0; d--) {
        os[d] = red[d] ? 0 : acc_s;
        acc_s *= red[d] ? 1 : x->type.shape[d];
    }
    double *acc = malloc(sizeof(double) * (size_t)(no ? no : 1));
    int64_t *cnt = calloc((size_t)(no ? no : 1), sizeof(int64_t));
    if (!acc || !cnt) {
        free(acc);
        free(cnt);
        return oom(e);
    }
    double init = op == TTH_OP_MAX ? -INFINITY : op == TTH_OP_MIN ? INFINITY : op == TTH_OP_PROD ? 1.0 : 0.0;
    for (int64_t i = 0; i < no; i++)
        acc[i] = init;
    for (int64_t i = 0; i < ni; i++) {
        int64_t oi = offset_of(i, &x->type, os);
        double v = tth__ld_f64(x, i);
        switch (op) {
        case TTH_OP_MAX: acc[oi] = (v > acc[oi] || isnan(v)) ? v : acc[oi]; break;
        case TTH_OP_MIN: acc[oi] = (v < acc[oi] || isnan(v)) ? v : acc[oi]; break;
        case TTH_OP_PROD: acc[oi] *= v; break;
        default: acc[oi] += v; break;
        }
        cnt[oi]++;
    }
    for (int64_t i = 0; i < no; i++) {
        double v = acc[i];
        if (op == TTH_OP_MEAN)
            v = cnt[i] ? v / (double)cnt[i] : NAN;
        if (!tth_dtype_is_float(o->type.dtype) && op == TTH_OP_MEAN)
            v = trunc(v);
        tth__st_f64(o, i, v);
    }
    free(acc);
    free(cnt);
    return 0;
}

static int eval_arg(ev *e, tth_op op)
{
    const tth_tensor *x = e->a[0];
    tth_tensor *o = new_out(e, &e->ot->tensor);
    if (!o)
        return TTH_ENOMEM;
    int r = x->type.rank, ax = norm_axis(tth__attr_int(e->attrs, "axis", 0), r);
    int last = (int)tth__attr_int(e->attrs, "select_last_index", 0);
    int64_t outer = 1, inner = 1, d = x->type.shape[ax];
    for (int i = 0; i < ax; i++)
        outer *= x->type.shape[i];
    for (int i = ax + 1; i < r; i++)
        inner *= x->type.shape[i];
    for (int64_t ou = 0; ou < outer; ou++)
        for (int64_t in = 0; in < inner; in++) {
            int64_t best = 0;
            double bv = 0;
            for (int64_t k = 0; k < d; k++) {
                double v = tth__ld_f64(x, (ou * d + k) * inner + in);
                int better = k == 0 || (op == TTH_OP_ARGMAX ? (last ? v >= bv : v > bv) : (last ? v <= bv : v < bv));
                if (better) {
                    best = k;
                    bv = v;
                }
            }
            tth__st_i64(o, ou * inner + in, best);
        }
    return 0;
}

/* ---- softmax, batch norm ---- */

static int eval_softmax(ev *e, int logsm)
{
    const tth_tensor *x = e->a[0];
    tth_tensor *o = new_out(e, &e->ot->tensor);
    if (!o)
        return TTH_ENOMEM;
    int r = x->type.rank, ax = norm_axis(tth__attr_int(e->attrs, "axis", -1), r);
    int64_t outer = 1, inner = 1, d = x->type.shape[ax];
    for (int i = 0; i < ax; i++)
        outer *= x->type.shape[i];
    for (int i = ax + 1; i < r; i++)
        inner *= x->type.shape[i];
    for (int64_t ou = 0; ou < outer; ou++)
        for (int64_t in = 0; in < inner; in++) {
            double mx = -INFINITY, sum = 0;
            for (int64_t k = 0; k < d; k++)
                mx = fmax(mx, tth__ld_f64(x, (ou * d + k) * inner + in));
            for (int64_t k = 0; k < d; k++)
                sum += exp(tth__ld_f64(x, (ou * d + k) * inner + in) - mx);
            for (int64_t k = 0; k < d; k++) {
                int64_t i = (ou * d + k) * inner + in;
                double v = tth__ld_f64(x, i) - mx;
                tth__st_f64(o, i, logsm ? v - log(sum) : exp(v) / sum);
            }
        }
    return 0;
}

static int eval_batch_norm(ev *e)
{
    const tth_tensor *x = e->a[0];
    tth_tensor *o = new_out(e, &e->ot->tensor);
    if (!o)
        return TTH_ENOMEM;
    double eps = tth__attr_num(e->attrs, "epsilon", 1e-5);
    int64_t c = x->type.rank > 1 ? x->type.shape[1] : 1, inner = 1, n = numel(&x->type);
    for (int i = 2; i < x->type.rank; i++)
        inner *= x->type.shape[i];
    for (int64_t i = 0; i < n; i++) {
        int64_t ch = c ? (i / inner) % c : 0;
        double s = tth__ld_f64(e->a[1], ch), b = tth__ld_f64(e->a[2], ch), m = tth__ld_f64(e->a[3], ch),
               v = tth__ld_f64(e->a[4], ch);
        tth__st_f64(o, i, (tth__ld_f64(x, i) - m) / sqrt(v + eps) * s + b);
    }
    return 0;
}

/* ---- matmul ---- */

static int eval_matmul_core(ev *e, const tth_tensor *a, const tth_tensor *b, const tth_tensor *azp,
                            const tth_tensor *bzp)
{
    tth_tensor *o = new_out(e, &e->ot->tensor);
    if (!o)
        return TTH_ENOMEM;
    tth_ttype A = a->type, B = b->type;
    if (A.rank == 1) {
        A.rank = 2;
        A.shape[1] = A.shape[0];
        A.shape[0] = 1;
    }
    if (B.rank == 1) {
        B.rank = 2;
        B.shape[1] = 1;
    }
    int64_t M = A.shape[A.rank - 2], K = A.shape[A.rank - 1], N = B.shape[B.rank - 1];
    if (B.shape[B.rank - 2] != K)
        return tth_diag_set(e->diag, TTH_EINTERNAL, NULL, "matmul inner dimensions differ");
    /* batch shapes broadcast */
    tth_ttype ab = {.dtype = A.dtype, .rank = A.rank - 2}, bb = {.dtype = B.dtype, .rank = B.rank - 2}, ob;
    memcpy(ab.shape, A.shape, sizeof(int64_t) * (size_t)ab.rank);
    memcpy(bb.shape, B.shape, sizeof(int64_t) * (size_t)bb.rank);
    ob.rank = ab.rank > bb.rank ? ab.rank : bb.rank;
    for (int i = 0; i < ob.rank; i++) {
        int ia = i - (ob.rank - ab.rank), ib = i - (ob.rank - bb.rank);
        int64_t da = ia >= 0 ? ab.shape[ia] : 1, db = ib >= 0 ? bb.shape[ib] : 1;
        ob.shape[i] = da == 1 ? db : da;
    }
    int64_t sa[TTH_MAX_RANK], sb[TTH_MAX_RANK], nb = numel(&ob);
    bcast_strides(&ab, &ob, sa);
    bcast_strides(&bb, &ob, sb);
    if (nb * M * N != numel(&o->type))
        return tth_diag_set(e->diag, TTH_EINTERNAL, NULL, "matmul result size differs from its type");
    double *ad = to_f64(a), *bd = to_f64(b);
    if (!ad || !bd) {
        free(ad);
        free(bd);
        return oom(e);
    }
    if (azp) { /* scalar or one per row of a */
        int64_t na = numel(&a->type), naz = numel(&azp->type);
        for (int64_t i = 0; i < na; i++)
            ad[i] -= tth__ld_f64(azp, naz == 1 ? 0 : (i / K) % M);
    }
    if (bzp) {
        int64_t nbz = numel(&bzp->type), nbb = numel(&b->type);
        for (int64_t i = 0; i < nbb; i++)
            bd[i] -= tth__ld_f64(bzp, nbz == 1 ? 0 : i % N);
    }
    for (int64_t bi = 0; bi < nb; bi++) {
        int64_t oa = offset_of(bi, &ob, sa) * M * K, obb = offset_of(bi, &ob, sb) * K * N;
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++)
                    s += ad[oa + m * K + k] * bd[obb + k * N + n];
                tth__st_f64(o, (bi * M + m) * N + n, s);
            }
    }
    free(ad);
    free(bd);
    return 0;
}

/* ---- convolution and pooling ---- */

typedef struct win {
    int64_t sh, sw, pt, pl, pb, pr, dh, dw, kh, kw, groups;
    int count_include_pad;
} win;

/* the call's window through libtth's one reader of it (tth_window_attrs_of) */
static int win_attrs(ev *e, win *w)
{
    tth_window_attrs a;
    int rc = tth_window_attrs_of(e->op, e->attrs, &a, e->diag);
    if (rc)
        return rc;
    *w = (win){a.strides[0], a.strides[1], a.padding[0], a.padding[1], a.padding[2], a.padding[3],
               a.dilation[0], a.dilation[1], a.pool_size[0], a.pool_size[1], a.groups, a.count_include_pad};
    return 0;
}

static int eval_conv(ev *e, int quant)
{
    const tth_tensor *x = e->a[0], *w = e->a[1];
    const tth_tensor *bias = (!quant && e->n > 2) ? e->a[2] : NULL;
    tth_tensor *o = new_out(e, &e->ot->tensor);
    if (!o)
        return TTH_ENOMEM;
    win p;
    int rc = win_attrs(e, &p);
    if (rc)
        return rc;
    int64_t g = p.groups;
    int64_t N = x->type.shape[0], C = x->type.shape[1], H = x->type.shape[2], W = x->type.shape[3];
    int64_t O = w->type.shape[0], Cg = w->type.shape[1], KH = w->type.shape[2], KW = w->type.shape[3];
    int64_t OH = o->type.shape[2], OW = o->type.shape[3];
    if (g <= 0 || C != Cg * g || O % g)
        return tth_diag_set(e->diag, TTH_EINTERNAL, NULL, "conv2d channels do not match its groups");
    double *xd = to_f64(x), *wd = to_f64(w);
    if (!xd || !wd) {
        free(xd);
        free(wd);
        return oom(e);
    }
    if (quant) {
        int64_t nx = numel(&x->type), nw = numel(&w->type), nwz = numel(&e->a[3]->type);
        double xz = tth__ld_f64(e->a[2], 0);
        for (int64_t i = 0; i < nx; i++)
            xd[i] -= xz;
        for (int64_t i = 0; i < nw; i++)
            wd[i] -= tth__ld_f64(e->a[3], nwz == 1 ? 0 : i / (Cg * KH * KW));
    }
    int64_t og = O / g;
    for (int64_t n = 0; n < N; n++)
        for (int64_t oc = 0; oc < O; oc++) {
            int64_t gi = oc / og;
            double b0 = bias ? tth__ld_f64(bias, oc) : 0;
            for (int64_t oy = 0; oy < OH; oy++)
                for (int64_t ox = 0; ox < OW; ox++) {
                    double s = b0;
                    for (int64_t c = 0; c < Cg; c++)
                        for (int64_t ky = 0; ky < KH; ky++) {
                            int64_t iy = oy * p.sh - p.pt + ky * p.dh;
                            if (iy < 0 || iy >= H)
                                continue;
                            for (int64_t kx = 0; kx < KW; kx++) {
                                int64_t ix = ox * p.sw - p.pl + kx * p.dw;
                                if (ix < 0 || ix >= W)
                                    continue;
                                s += xd[((n * C + gi * Cg + c) * H + iy) * W + ix] * wd[((oc * Cg + c) * KH + ky) * KW + kx];
                            }
                        }
                    tth__st_f64(o, ((n * O + oc) * OH + oy) * OW + ox, s);
                }
        }
    free(xd);
    free(wd);
    return 0;
}

static int eval_conv_transpose(ev *e)
{
    const tth_tensor *x = e->a[0], *w = e->a[1], *bias = e->n > 2 ? e->a[2] : NULL;
    tth_tensor *o = new_out(e, &e->ot->tensor);
    if (!o)
        return TTH_ENOMEM;
    win p;
    int rc = win_attrs(e, &p);
    if (rc)
        return rc;
    int64_t g = p.groups;
    int64_t N = x->type.shape[0], C = x->type.shape[1], H = x->type.shape[2], W = x->type.shape[3];
    int64_t Og = w->type.shape[1], KH = w->type.shape[2], KW = w->type.shape[3];
    int64_t O = o->type.shape[1], OH = o->type.shape[2], OW = o->type.shape[3];
    if (g <= 0 || C % g || Og * g != O || w->type.shape[0] != C)
        return tth_diag_set(e->diag, TTH_EINTERNAL, NULL, "conv2d_transpose channels do not match its groups");
    double *acc = calloc((size_t)(numel(&o->type) ? numel(&o->type) : 1), sizeof(double));
    double *xd = to_f64(x), *wd = to_f64(w);
    if (!acc || !xd || !wd) {
        free(acc);
        free(xd);
        free(wd);
        return oom(e);
    }
    int64_t cg = C / g;
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++) {
            int64_t gi = c / cg;
            for (int64_t iy = 0; iy < H; iy++)
                for (int64_t ix = 0; ix < W; ix++) {
                    double xv = xd[((n * C + c) * H + iy) * W + ix];
                    for (int64_t oc = 0; oc < Og; oc++)
                        for (int64_t ky = 0; ky < KH; ky++) {
                            int64_t oy = iy * p.sh + ky * p.dh - p.pt;
                            if (oy < 0 || oy >= OH)
                                continue;
                            for (int64_t kx = 0; kx < KW; kx++) {
                                int64_t ox = ix * p.sw + kx * p.dw - p.pl;
                                if (ox < 0 || ox >= OW)
                                    continue;
                                acc[((n * O + gi * Og + oc) * OH + oy) * OW + ox] +=
                                    xv * wd[((c * Og + oc) * KH + ky) * KW + kx];
                            }
                        }
                }
        }
    int64_t no = numel(&o->type);
    for (int64_t i = 0; i < no; i++)
        tth__st_f64(o, i, acc[i] + (bias ? tth__ld_f64(bias, (i / (OH * OW)) % O) : 0));
    free(acc);
    free(xd);
    free(wd);
    return 0;
}

static int eval_pool(ev *e, int is_max)
{
    const tth_tensor *x = e->a[0];
    tth_tensor *o = new_out(e, &e->ot->tensor);
    if (!o)
        return TTH_ENOMEM;
    win p;
    int rc = win_attrs(e, &p);
    if (rc)
        return rc;
    int incl = p.count_include_pad;
    int64_t NC = x->type.shape[0] * x->type.shape[1], H = x->type.shape[2], W = x->type.shape[3];
    int64_t OH = o->type.shape[2], OW = o->type.shape[3];
    for (int64_t nc = 0; nc < NC; nc++)
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++) {
                double s = is_max ? -INFINITY : 0;
                int64_t cnt = 0;
                for (int64_t ky = 0; ky < p.kh; ky++) {
                    int64_t iy = oy * p.sh - p.pt + ky * p.dh;
                    for (int64_t kx = 0; kx < p.kw; kx++) {
                        int64_t ix = ox * p.sw - p.pl + kx * p.dw;
                        int in = iy >= 0 && iy < H && ix >= 0 && ix < W;
                        int inpad = iy >= -p.pt && iy < H + p.pb && ix >= -p.pl && ix < W + p.pr;
                        if (in) {
                            double v = tth__ld_f64(x, (nc * H + iy) * W + ix);
                            s = is_max ? (v > s || isnan(v) ? v : s) : s + v;
                        }
                        if (incl ? inpad : in)
                            cnt++;
                    }
                }
                tth__st_f64(o, (nc * OH + oy) * OW + ox, is_max ? s : (cnt ? s / (double)cnt : 0));
            }
    return 0;
}

static int eval_global_pool(ev *e, int is_max)
{
    const tth_tensor *x = e->a[0];
    tth_tensor *o = new_out(e, &e->ot->tensor);
    if (!o)
        return TTH_ENOMEM;
    int64_t NC = x->type.shape[0] * x->type.shape[1], HW = 1;
    for (int i = 2; i < x->type.rank; i++)
        HW *= x->type.shape[i];
    for (int64_t nc = 0; nc < NC; nc++) {
        double s = is_max ? -INFINITY : 0;
        for (int64_t k = 0; k < HW; k++) {
            double v = tth__ld_f64(x, nc * HW + k);
            s = is_max ? fmax(s, v) : s + v;
        }
        tth__st_f64(o, nc, is_max ? s : s / (double)(HW ? HW : 1));
    }
    return 0;
}

/* ---- resize ---- */

/* image.resize2d with libtth's taps (tth_resize_taps_at, the lowering's rule): each output element
 * sums its rows' taps of its columns' taps, in double, or is the extrapolation value */
static int eval_resize(ev *e)
{
    const tth_tensor *x = e->a[0];
    tth_tensor *o = new_out(e, &e->ot->tensor);
    if (!o)
        return TTH_ENOMEM;
    int64_t NC = x->type.shape[0] * x->type.shape[1], H = x->type.shape[2], W = x->type.shape[3];
    int64_t OH = o->type.shape[2], OW = o->type.shape[3];
    tth_resize2d_attrs ra;
    if (tth_resize2d_attrs_of(e->attrs, &x->type.shape[2], &ra, NULL) != 0)
        return TTH_EINVAL;
    tth_resize_taps *ty = malloc((size_t)OH * sizeof *ty), *tx = malloc((size_t)OW * sizeof *tx);
    if (!ty || !tx) {
        free(ty);
        free(tx);
        return TTH_ENOMEM;
    }
    for (int64_t oy = 0; oy < OH; oy++)
        tth_resize_taps_at(&ra, 0, oy, H, &ty[oy]);
    for (int64_t ox = 0; ox < OW; ox++)
        tth_resize_taps_at(&ra, 1, ox, W, &tx[ox]);
    for (int64_t nc = 0; nc < NC; nc++)
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++) {
                const tth_resize_taps *a = &ty[oy], *b = &tx[ox];
                double v = 0; /* each sum starts from its first term: nearest keeps -0 */
                for (int ky = 0; ky < a->n; ky++) {
                    double row = 0;
                    for (int kx = 0; kx < b->n; kx++) {
                        double t = b->w[kx] * tth__ld_f64(x, (nc * H + a->idx[ky]) * W + b->idx[kx]);
                        row = kx ? row + t : t;
                    }
                    v = ky ? v + a->w[ky] * row : a->w[ky] * row;
                }
                if (!a->inside || !b->inside)
                    v = ra.extrapolation_value;
                tth__st_f64(o, (nc * OH + oy) * OW + ox, v);
            }
    free(ty);
    free(tx);
    return 0;
}

/* ---- quantization ---- */

/* Per-axis parameter p (scalar or 1-D along `axis` of x) for element i of x. */
static double per_axis(const tth_tensor *p, const tth_ttype *x, int axis, int64_t i)
{
    int64_t n = numel(&p->type);
    if (n <= 1)
        return n ? tth__ld_f64(p, 0) : 0;
    int64_t inner = 1;
    for (int d = axis + 1; d < x->rank; d++)
        inner *= x->shape[d];
    return tth__ld_f64(p, (i / inner) % x->shape[axis]);
}

static int eval_quant(ev *e, tth_op op)
{
    const tth_tensor *x = e->a[0];
    tth_tensor *o = new_out(e, &e->ot->tensor);
    if (!o)
        return TTH_ENOMEM;
    int axis = norm_axis(tth__attr_int(e->attrs, "axis", 1), x->type.rank);
    if (x->type.rank == 0)
        axis = 0;
    int64_t n = numel(&x->type);
    for (int64_t i = 0; i < n; i++) {
        double v = tth__ld_f64(x, i);
        if (op == TTH_OP_QUANTIZE) {
            double q = round_half_even(v / per_axis(e->a[1], &x->type, axis, i)) + per_axis(e->a[2], &x->type, axis, i);
            tth__st_f64(o, i, saturate(q, o->type.dtype));
        } else if (op == TTH_OP_DEQUANTIZE) {
            tth__st_f64(o, i, (v - per_axis(e->a[2], &x->type, axis, i)) * per_axis(e->a[1], &x->type, axis, i));
        } else { /* requantize */
            double real = (v - per_axis(e->a[2], &x->type, axis, i)) * per_axis(e->a[1], &x->type, axis, i);
            double q = round_half_even(real / per_axis(e->a[3], &x->type, axis, i)) +
                       per_axis(e->a[4], &x->type, axis, i);
            tth__st_f64(o, i, saturate(q, o->type.dtype));
        }
    }
    return 0;
}

/* ---- dispatch ---- */

int tth__eval_op(tth_op op, tth_tensor *const *args, size_t nargs, const json_t *attrs, const tth_rtype *out_type,
                 tth_tensor **outs, size_t *nouts, tth_diag *diag)
{
    ev e = {.a = args, .n = nargs, .op = op, .attrs = attrs, .ot = out_type, .outs = outs, .nouts = nouts, .diag = diag};
    *nouts = 0;
    if (op != TTH_OP_SPLIT && out_type->nfields >= 0)
        return TTH_EUNSUPPORTED;
    if (op != TTH_OP_SPLIT && numel(&out_type->tensor) > TTH_FOLD_MAX_ELEMS)
        return TTH_EUNSUPPORTED;
    int rc;
    switch (op) {
    case TTH_OP_ADD: case TTH_OP_SUBTRACT: case TTH_OP_MULTIPLY: case TTH_OP_DIVIDE: case TTH_OP_POWER:
    case TTH_OP_MAXIMUM: case TTH_OP_MINIMUM: case TTH_OP_MOD: case TTH_OP_PRELU: case TTH_OP_EQUAL:
    case TTH_OP_LESS: case TTH_OP_LESS_EQUAL: case TTH_OP_GREATER: case TTH_OP_GREATER_EQUAL:
    case TTH_OP_LOGICAL_AND: case TTH_OP_LOGICAL_OR: case TTH_OP_LOGICAL_XOR:
        rc = eval_binary(&e, op);
        break;
    case TTH_OP_WHERE: rc = eval_where(&e); break;
    case TTH_OP_NEGATIVE: case TTH_OP_ABS: case TTH_OP_SQRT: case TTH_OP_RECIPROCAL: case TTH_OP_EXP:
    case TTH_OP_LOG: case TTH_OP_SIN: case TTH_OP_COS: case TTH_OP_TANH: case TTH_OP_SIGMOID: case TTH_OP_ERF:
    case TTH_OP_FLOOR: case TTH_OP_CEIL: case TTH_OP_ROUND: case TTH_OP_SIGN: case TTH_OP_LOGICAL_NOT:
    case TTH_OP_RELU: case TTH_OP_LEAKY_RELU: case TTH_OP_ELU: case TTH_OP_SELU: case TTH_OP_THRESHOLDED_RELU:
    case TTH_OP_SOFTPLUS: case TTH_OP_SOFTSIGN: case TTH_OP_HARD_SIGMOID: case TTH_OP_HARD_SWISH:
    case TTH_OP_CLIP: case TTH_OP_CAST: case TTH_OP_ASIN: case TTH_OP_ACOS: case TTH_OP_ATAN:
    case TTH_OP_ASINH: case TTH_OP_ACOSH: case TTH_OP_ATANH:
        rc = eval_unary(&e, op);
        break;
    case TTH_OP_CONV2D: rc = eval_conv(&e, 0); break;
    case TTH_OP_QNN_CONV2D: rc = eval_conv(&e, 1); break;
    case TTH_OP_CONV2D_TRANSPOSE: rc = eval_conv_transpose(&e); break;
    case TTH_OP_MATMUL: rc = eval_matmul_core(&e, args[0], args[1], NULL, NULL); break;
    case TTH_OP_QNN_MATMUL: rc = eval_matmul_core(&e, args[0], args[1], args[2], args[3]); break;
    case TTH_OP_MAX_POOL2D: rc = eval_pool(&e, 1); break;
    case TTH_OP_AVG_POOL2D: rc = eval_pool(&e, 0); break;
    case TTH_OP_GLOBAL_AVG_POOL2D: rc = eval_global_pool(&e, 0); break;
    case TTH_OP_GLOBAL_MAX_POOL2D: rc = eval_global_pool(&e, 1); break;
    case TTH_OP_BATCH_NORM: rc = eval_batch_norm(&e); break;
    case TTH_OP_SOFTMAX: rc = eval_softmax(&e, 0); break;
    case TTH_OP_LOG_SOFTMAX: rc = eval_softmax(&e, 1); break;
    case TTH_OP_PAD: rc = eval_pad(&e); break;
    case TTH_OP_RESHAPE: rc = eval_copy(&e); break;
    case TTH_OP_TRANSPOSE: rc = eval_transpose(&e); break;
    case TTH_OP_BROADCAST_TO: rc = eval_broadcast(&e); break;
    case TTH_OP_CONCATENATE: rc = eval_concat(&e); break;
    case TTH_OP_SPLIT: rc = eval_split(&e); break;
    case TTH_OP_STRIDED_SLICE: rc = eval_strided_slice(&e); break;
    case TTH_OP_TAKE: rc = eval_take(&e); break;
    case TTH_OP_SUM: case TTH_OP_MEAN: case TTH_OP_MAX: case TTH_OP_MIN: case TTH_OP_PROD:
        rc = eval_reduce(&e, op);
        break;
    case TTH_OP_ARGMAX: case TTH_OP_ARGMIN: rc = eval_arg(&e, op); break;
    case TTH_OP_RESIZE2D: rc = eval_resize(&e); break;
    case TTH_OP_QUANTIZE: case TTH_OP_DEQUANTIZE: case TTH_OP_REQUANTIZE: rc = eval_quant(&e, op); break;
    default: rc = TTH_EUNSUPPORTED; break;
    }
    if (rc) {
        for (size_t i = 0; i < *nouts; i++)
            tth_tensor_unref(outs[i]);
        *nouts = 0;
    }
    return rc;
}
