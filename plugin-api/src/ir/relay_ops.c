/* relay_ops.c: the op table's functions and one type relation per operator of TTH_RELAY_OPS.
 *
 * A relation checks its arguments' types and its attributes and computes the result type. Every
 * attribute it reads goes through the attr_* readers below, which check the JSON type and, when
 * an optional attribute is missing, use its default (and, from a builder, write the default into
 * the node's attrs, so every consumer of a built node sees every attribute). After a relation
 * succeeds, a key it did not read is an "unknown attribute" error.
 *
 * Required attributes (no default): cast.dtype, clip.a_min/a_max, reshape.newshape,
 * broadcast_to.shape, concatenate.axis, split.axis/sizes, strided_slice.begin/end,
 * softmax/log_softmax.axis, reductions' keepdims, argmax/argmin.keepdims, pool_size of the 2-D
 * pools, image.resize2d.size, nn.pad.pad_before/pad_after, qnn.requantize.out_dtype,
 * vision.roi_align.pooled_size.
 * Defaults of the others are next to the reads (strides [1,1], padding [0,0,0,0], dilation
 * [1,1], groups 1, output_padding [0,0], ceil_mode false, count_include_pad false, ...).
 */
#include "ir_private.h"

#include <stdio.h>
#include <math.h>
#include <string.h>

/* ---- the op table ---- */

typedef struct op_info {
    const char *name;
    int min_args, max_args;
    const char *doc;
} op_info;

static const op_info op_table[TTH_OP_COUNT_] = {
#define TTH__OP_INFO(e, n, mn, mx, d) [TTH_OP_##e] = {n, mn, mx, d},
    TTH_RELAY_OPS(TTH__OP_INFO)
#undef TTH__OP_INFO
};

static int op_valid(tth_op op)
{
    return op > TTH_OP_INVALID && op < TTH_OP_COUNT_;
}

const char *tth_op_name(tth_op op)
{
    return op_valid(op) ? op_table[op].name : "invalid";
}

tth_op tth_op_from_name(const char *name)
{
    if (!name)
        return TTH_OP_INVALID;
    for (int i = 1; i < TTH_OP_COUNT_; i++)
        if (strcmp(op_table[i].name, name) == 0)
            return (tth_op)i;
    return TTH_OP_INVALID;
}

const char *tth_op_doc(tth_op op)
{
    return op_valid(op) ? op_table[op].doc : "";
}

/* Elementwise ops: one output element from the same-position elements of the (broadcast)
 * inputs; the quantize family counts too (a per-axis parameter is indexed by one coordinate). */
int tth_op_is_elementwise(tth_op op)
{
    switch (op) {
    case TTH_OP_ADD: case TTH_OP_SUBTRACT: case TTH_OP_MULTIPLY: case TTH_OP_DIVIDE:
    case TTH_OP_POWER: case TTH_OP_MAXIMUM: case TTH_OP_MINIMUM: case TTH_OP_MOD:
    case TTH_OP_PRELU: case TTH_OP_EQUAL: case TTH_OP_LESS: case TTH_OP_LESS_EQUAL:
    case TTH_OP_GREATER: case TTH_OP_GREATER_EQUAL: case TTH_OP_LOGICAL_AND:
    case TTH_OP_LOGICAL_OR: case TTH_OP_LOGICAL_XOR: case TTH_OP_WHERE:
    case TTH_OP_NEGATIVE: case TTH_OP_ABS: case TTH_OP_SQRT: case TTH_OP_RECIPROCAL:
    case TTH_OP_EXP: case TTH_OP_LOG: case TTH_OP_SIN: case TTH_OP_COS: case TTH_OP_TANH:
    case TTH_OP_SIGMOID: case TTH_OP_ERF: case TTH_OP_FLOOR: case TTH_OP_CEIL:
    case TTH_OP_ROUND: case TTH_OP_SIGN: case TTH_OP_LOGICAL_NOT: case TTH_OP_RELU:
    case TTH_OP_LEAKY_RELU: case TTH_OP_ELU: case TTH_OP_SELU: case TTH_OP_THRESHOLDED_RELU:
    case TTH_OP_SOFTPLUS: case TTH_OP_SOFTSIGN: case TTH_OP_HARD_SIGMOID:
    case TTH_OP_HARD_SWISH: case TTH_OP_CLIP: case TTH_OP_CAST:
    case TTH_OP_QUANTIZE: case TTH_OP_DEQUANTIZE: case TTH_OP_REQUANTIZE:
    case TTH_OP_ASIN: case TTH_OP_ACOS: case TTH_OP_ATAN: case TTH_OP_ASINH: case TTH_OP_ACOSH: case TTH_OP_ATANH:
        return 1;
    default:
        return 0;
    }
}

/* ---- relation context and diagnostics ---- */

#define MAX_READ 16

typedef struct relctx {
    tth_op op;
    const tth_rtype *const *args;
    size_t nargs;
    const json_t *attrs;      /* may be NULL: no attributes */
    json_t *fill;             /* builder: where defaults are written; else NULL */
    tth_rtype *out;
    tth_arena *arena;
    tth_diag *diag;
    const char *location;
    const char *read[MAX_READ]; /* attribute keys read */
    size_t nread;
} relctx;

/* Argument i's tensor type (relations run after the generic check that all are tensors). */
#define ARG(c, i) (&(c)->args[i]->tensor)

static void set_out(relctx *c, const tth_ttype *t)
{
    c->out->nfields = -1;
    c->out->tensor = *t;
    c->out->fields = NULL;
}

/* A type error: "op: text (arguments: t0, t1)". */
__attribute__((format(printf, 2, 3))) static int rel_fail(relctx *c, const char *fmt, ...)
{
    char text[TTH_DIAG_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    char args[TTH_DIAG_MESSAGE_MAX];
    size_t n = 0;
    args[0] = '\0';
    for (size_t i = 0; i < c->nargs && n + 2 < sizeof args; i++) {
        if (i) {
            memcpy(args + n, ", ", 3);
            n += 2;
        }
        n += tth__rtype_format(c->args[i], args + n, sizeof args - n);
    }
    return tth_diag_set(c->diag, TTH_ETYPE, c->location, "%s: %s (arguments: %s)", tth_op_name(c->op),
                        text, args);
}

/* An attribute error: "op: text". */
__attribute__((format(printf, 2, 3))) static int attr_fail(relctx *c, const char *fmt, ...)
{
    char text[TTH_DIAG_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return tth_diag_set(c->diag, TTH_EINVAL, c->location, "%s: %s", tth_op_name(c->op), text);
}

static void fmt_ttype(const tth_ttype *t, char *buf, size_t len)
{
    tth_ttype_format(t, buf, len);
}

/* ---- attribute readers ---- */

/* Look a key up, remembering that it was read. */
static const json_t *attr_get(relctx *c, const char *key)
{
    if (c->nread < MAX_READ)
        c->read[c->nread++] = key;
    return c->attrs ? json_object_get(c->attrs, key) : NULL;
}

static int attr_missing(relctx *c, const char *key)
{
    return attr_fail(c, "missing required attribute '%s'", key);
}

static void attr_fill(relctx *c, const char *key, json_t *v)
{
    if (c->fill && v)
        json_object_set_new(c->fill, key, v);
    else
        json_decref(v);
}

static int attr_int(relctx *c, const char *key, int required, int64_t def, int64_t *out)
{
    const json_t *v = attr_get(c, key);
    if (!v) {
        if (required)
            return attr_missing(c, key);
        *out = def;
        attr_fill(c, key, json_integer(def));
        return 0;
    }
    if (!json_is_integer(v))
        return attr_fail(c, "attribute '%s' must be an integer", key);
    *out = json_integer_value(v);
    return 0;
}

static int attr_float(relctx *c, const char *key, int required, double def, double *out)
{
    const json_t *v = attr_get(c, key);
    if (!v) {
        if (required)
            return attr_missing(c, key);
        *out = def;
        attr_fill(c, key, json_real(def));
        return 0;
    }
    if (!json_is_number(v))
        return attr_fail(c, "attribute '%s' must be a number", key);
    *out = json_number_value(v);
    return 0;
}

/* A bool: true/false, or the integers 0 and 1 (as ONNX writes them). */
static int attr_bool(relctx *c, const char *key, int required, int def, int *out)
{
    const json_t *v = attr_get(c, key);
    if (!v) {
        if (required)
            return attr_missing(c, key);
        *out = def;
        attr_fill(c, key, json_boolean(def));
        return 0;
    }
    if (json_is_boolean(v)) {
        *out = json_is_true(v);
        return 0;
    }
    if (json_is_integer(v) && (json_integer_value(v) == 0 || json_integer_value(v) == 1)) {
        *out = (int)json_integer_value(v);
        return 0;
    }
    return attr_fail(c, "attribute '%s' must be a bool", key);
}

/* A string out of a fixed set (choices NULL-terminated). */
static int attr_choice(relctx *c, const char *key, const char *def, const char *const *choices,
                       const char **out)
{
    const json_t *v = attr_get(c, key);
    if (!v) {
        *out = def;
        attr_fill(c, key, json_string(def));
        return 0;
    }
    if (json_is_string(v)) {
        for (size_t i = 0; choices[i]; i++)
            if (strcmp(choices[i], json_string_value(v)) == 0) {
                *out = choices[i];
                return 0;
            }
    }
    char list[256];
    size_t n = 0;
    list[0] = '\0';
    for (size_t i = 0; choices[i] && n < sizeof list; i++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", choices[i]);
    return attr_fail(c, "attribute '%s' must be one of: %s", key, list);
}

/* A channel layout (docs/layouts.md): "NCHW", or "NCHW<b>c" (blocks of b channels, the block
 * innermost). Missing means NCHW and is not filled in, so a call without it prints as before. */
static int attr_layout(relctx *c, const char *key, int64_t *block)
{
    const json_t *v = attr_get(c, key);
    *block = v ? tth_layout_block(v) : 0;
    if (*block < 0)
        return attr_fail(c, "attribute '%s' must be \"NCHW\" or \"NCHW<b>c\" with b from 2 to %d, got %s", key,
                         TTH_LAYOUT_MAX_BLOCK, json_is_string(v) ? json_string_value(v) : "a non-string");
    return 0;
}

static int attr_dtype(relctx *c, const char *key, int required, tth_dtype def, tth_dtype *out)
{
    const json_t *v = attr_get(c, key);
    if (!v) {
        if (required)
            return attr_missing(c, key);
        *out = def;
        attr_fill(c, key, json_string(tth_dtype_name(def)));
        return 0;
    }
    if (!json_is_string(v) || tth_dtype_from_name(json_string_value(v)) == TTH_DTYPE_INVALID)
        return attr_fail(c, "attribute '%s' must be a dtype name such as \"float32\"", key);
    *out = tth_dtype_from_name(json_string_value(v));
    return 0;
}

/* An integer array. want: exact length, or -1 for any length up to max. def (ndef entries) is
 * used when the attribute is missing and def is not NULL; otherwise missing is an error. */
static int attr_ints(relctx *c, const char *key, const int64_t *def, size_t ndef, long want, int64_t *out,
                     size_t max, size_t *n)
{
    const json_t *v = attr_get(c, key);
    if (!v) {
        if (!def)
            return attr_missing(c, key);
        json_t *arr = c->fill ? json_array() : NULL;
        for (size_t i = 0; i < ndef; i++) {
            out[i] = def[i];
            if (arr)
                json_array_append_new(arr, json_integer(def[i]));
        }
        *n = ndef;
        attr_fill(c, key, arr);
        return 0;
    }
    if (!json_is_array(v)) {
        if (want >= 0)
            return attr_fail(c, "attribute '%s' must be an array of %ld integers", key, want);
        return attr_fail(c, "attribute '%s' must be an array of integers", key);
    }
    size_t len = json_array_size(v);
    if ((want >= 0 && len != (size_t)want) || len > max) {
        if (want >= 0)
            return attr_fail(c, "attribute '%s' must be an array of %ld integers, got %zu", key, want, len);
        return attr_fail(c, "attribute '%s' has %zu entries, at most %zu allowed", key, len, max);
    }
    for (size_t i = 0; i < len; i++) {
        const json_t *e = json_array_get(v, i);
        if (!json_is_integer(e))
            return attr_fail(c, "attribute '%s' must be an array of integers", key);
        out[i] = json_integer_value(e);
    }
    *n = len;
    return 0;
}

/* Normalize an axis in [-rank, rank-1]; *out is 0 on failure (callers return at once). */
static int norm_axis(relctx *c, const char *key, int64_t axis, int32_t rank, int64_t *out)
{
    *out = 0;
    if (axis < -(int64_t)rank || axis >= rank)
        return rel_fail(c, "attribute '%s' = %lld is out of range for rank %d", key, (long long)axis, rank);
    *out = axis < 0 ? axis + rank : axis;
    return 0;
}

/* ---- shared checks ---- */

static int broadcast2(const tth_ttype *a, const tth_ttype *b, tth_ttype *out)
{
    int32_t r = a->rank > b->rank ? a->rank : b->rank;
    tth_ttype t = {.dtype = a->dtype, .rank = r};
    for (int32_t i = 0; i < r; i++) {
        int32_t ia = a->rank - r + i, ib = b->rank - r + i;
        int64_t da = ia >= 0 ? a->shape[ia] : 1;
        int64_t db = ib >= 0 ? b->shape[ib] : 1;
        if (da == db || db == 1)
            t.shape[i] = da;
        else if (da == 1)
            t.shape[i] = db;
        else
            return -1;
    }
    *out = t;
    return 0;
}

static int need_same_dtype(relctx *c, size_t i, size_t j)
{
    if (ARG(c, i)->dtype != ARG(c, j)->dtype)
        return rel_fail(c, "argument %zu is %s but argument %zu is %s", j, tth_dtype_name(ARG(c, j)->dtype), i,
                        tth_dtype_name(ARG(c, i)->dtype));
    return 0;
}

static int need_float(relctx *c, size_t i)
{
    if (!tth_dtype_is_float(ARG(c, i)->dtype))
        return rel_fail(c, "argument %zu must be a float tensor, got %s", i, tth_dtype_name(ARG(c, i)->dtype));
    return 0;
}

static int need_numeric(relctx *c, size_t i)
{
    if (ARG(c, i)->dtype == TTH_BOOL)
        return rel_fail(c, "argument %zu must be numeric, got bool", i);
    return 0;
}

static int need_bool(relctx *c, size_t i)
{
    if (ARG(c, i)->dtype != TTH_BOOL)
        return rel_fail(c, "argument %zu must be bool, got %s", i, tth_dtype_name(ARG(c, i)->dtype));
    return 0;
}

static int need_rank(relctx *c, size_t i, int32_t rank, const char *layout)
{
    if (ARG(c, i)->rank != rank)
        return rel_fail(c, "argument %zu must have rank %d (%s), got rank %d", i, rank, layout, ARG(c, i)->rank);
    return 0;
}

/* argument i in layout NCHW (b = 0) or NCHW<b>c: rank 4, or rank 5 with b channels innermost */
static int need_layout_rank(relctx *c, size_t i, int64_t b)
{
    if (!b)
        return need_rank(c, i, 4, "NCHW");
    if (ARG(c, i)->rank != 5 || ARG(c, i)->shape[4] != b)
        return rel_fail(c, "argument %zu must have rank 5 with %lld channels innermost (layout NCHW%lldc)", i,
                        (long long)b, (long long)b);
    return 0;
}

static int bcast_args(relctx *c, size_t i, size_t j, tth_ttype *out)
{
    if (broadcast2(ARG(c, i), ARG(c, j), out) != 0)
        return rel_fail(c, "shapes of arguments %zu and %zu do not broadcast", i, j);
    return 0;
}

/* ---- elementwise ---- */

/* add, subtract, multiply, divide, power, maximum, minimum: same numeric dtype, broadcast. */
static int rel_binary_arith(relctx *c)
{
    tth_ttype t;
    int rc;
    if ((rc = need_same_dtype(c, 0, 1)) || (rc = need_numeric(c, 0)) || (rc = bcast_args(c, 0, 1, &t)))
        return rc;
    set_out(c, &t);
    return 0;
}

/* mod: like the arithmetic ops; {fmod: bool} (default false). */
static int rel_mod(relctx *c)
{
    int fmod, rc;
    if ((rc = attr_bool(c, "fmod", 0, 0, &fmod)))
        return rc;
    return rel_binary_arith(c);
}

/* nn.prelu: slope broadcasts to x's shape; result is x's type. */
static int rel_prelu(relctx *c)
{
    tth_ttype t;
    int rc;
    if ((rc = need_same_dtype(c, 0, 1)) || (rc = need_float(c, 0)))
        return rc;
    if (broadcast2(ARG(c, 0), ARG(c, 1), &t) != 0 || !tth_ttype_equal(&t, ARG(c, 0)))
        return rel_fail(c, "slope does not broadcast to the shape of x");
    set_out(c, ARG(c, 0));
    return 0;
}

/* equal, less, ...: same dtype, broadcast, bool result. */
static int rel_compare(relctx *c)
{
    tth_ttype t;
    int rc;
    if ((rc = need_same_dtype(c, 0, 1)) || (rc = bcast_args(c, 0, 1, &t)))
        return rc;
    t.dtype = TTH_BOOL;
    set_out(c, &t);
    return 0;
}

/* logical_and/or/xor: bool operands, broadcast. */
static int rel_logical(relctx *c)
{
    tth_ttype t;
    int rc;
    if ((rc = need_bool(c, 0)) || (rc = need_bool(c, 1)) || (rc = bcast_args(c, 0, 1, &t)))
        return rc;
    set_out(c, &t);
    return 0;
}

/* where(cond, x, y): cond bool, x and y the same dtype; all three broadcast. */
static int rel_where(relctx *c)
{
    tth_ttype t, u;
    int rc;
    if ((rc = need_bool(c, 0)) || (rc = need_same_dtype(c, 1, 2)))
        return rc;
    if (broadcast2(ARG(c, 1), ARG(c, 2), &t) != 0 || broadcast2(ARG(c, 0), &t, &u) != 0)
        return rel_fail(c, "shapes of cond, x and y do not broadcast");
    u.dtype = ARG(c, 1)->dtype;
    set_out(c, &u);
    return 0;
}

/* Unary: float-only math. */
static int rel_unary_float(relctx *c)
{
    int rc = need_float(c, 0);
    if (rc)
        return rc;
    set_out(c, ARG(c, 0));
    return 0;
}

/* Unary on any numeric dtype: negative, abs, sign, relu. */
static int rel_unary_numeric(relctx *c)
{
    int rc = need_numeric(c, 0);
    if (rc)
        return rc;
    set_out(c, ARG(c, 0));
    return 0;
}

static int rel_logical_not(relctx *c)
{
    int rc = need_bool(c, 0);
    if (rc)
        return rc;
    set_out(c, ARG(c, 0));
    return 0;
}

/* Activations with float attributes. */
static int rel_leaky_relu(relctx *c)
{
    double alpha;
    int rc = attr_float(c, "alpha", 0, 0.01, &alpha);
    return rc ? rc : rel_unary_float(c);
}

static int rel_elu(relctx *c)
{
    double alpha;
    int rc = attr_float(c, "alpha", 0, 1.0, &alpha);
    return rc ? rc : rel_unary_float(c);
}

static int rel_selu(relctx *c)
{
    double alpha, gamma;
    int rc;
    if ((rc = attr_float(c, "alpha", 0, 1.67326319217681884765625, &alpha)) ||
        (rc = attr_float(c, "gamma", 0, 1.05070102214813232421875, &gamma)))
        return rc;
    return rel_unary_float(c);
}

static int rel_thresholded_relu(relctx *c)
{
    double alpha;
    int rc = attr_float(c, "alpha", 0, 1.0, &alpha);
    return rc ? rc : rel_unary_float(c);
}

static int rel_hard_sigmoid(relctx *c)
{
    double alpha, beta;
    int rc;
    if ((rc = attr_float(c, "alpha", 0, 0.2, &alpha)) || (rc = attr_float(c, "beta", 0, 0.5, &beta)))
        return rc;
    return rel_unary_float(c);
}

/* clip: {a_min, a_max} required, a_min <= a_max (tth_clip_attrs_of). */
static int read_clip(relctx *c, double *lo, double *hi)
{
    int rc;
    if ((rc = attr_float(c, "a_min", 1, 0, lo)) || (rc = attr_float(c, "a_max", 1, 0, hi)))
        return rc;
    if (*lo > *hi)
        return attr_fail(c, "a_min %g is greater than a_max %g", *lo, *hi);
    return 0;
}

static int rel_clip(relctx *c)
{
    double lo, hi;
    int rc = read_clip(c, &lo, &hi);
    return rc ? rc : rel_unary_numeric(c);
}

/* cast: {dtype} required. */
static int rel_cast(relctx *c)
{
    tth_dtype dt;
    int rc = attr_dtype(c, "dtype", 1, TTH_DTYPE_INVALID, &dt);
    if (rc)
        return rc;
    tth_ttype t = *ARG(c, 0);
    t.dtype = dt;
    set_out(c, &t);
    return 0;
}

/* ---- convolution and pooling ---- */

static const int64_t ones2[2] = {1, 1};
static const int64_t zeros4[4] = {0, 0, 0, 0};

/* strides, padding [t,l,b,r], dilation, each checked. */
static int read_window_attrs(relctx *c, int64_t *strides, int64_t *padding, int64_t *dilation)
{
    size_t n;
    int rc;
    if ((rc = attr_ints(c, "strides", ones2, 2, 2, strides, 2, &n)) ||
        (rc = attr_ints(c, "padding", zeros4, 4, 4, padding, 4, &n)) ||
        (rc = attr_ints(c, "dilation", ones2, 2, 2, dilation, 2, &n)))
        return rc;
    for (int i = 0; i < 2; i++) {
        if (strides[i] < 1)
            return attr_fail(c, "strides must be >= 1, got [%lld, %lld]", (long long)strides[0],
                             (long long)strides[1]);
        if (dilation[i] < 1)
            return attr_fail(c, "dilation must be >= 1, got [%lld, %lld]", (long long)dilation[0],
                             (long long)dilation[1]);
    }
    for (int i = 0; i < 4; i++)
        if (padding[i] < 0)
            return attr_fail(c, "padding must be >= 0, got [%lld, %lld, %lld, %lld]", (long long)padding[0],
                             (long long)padding[1], (long long)padding[2], (long long)padding[3]);
    return 0;
}

static int read_conv_attrs(relctx *c, tth_window_attrs *a, int transpose)
{
    memset(a, 0, sizeof *a);
    int rc = read_window_attrs(c, a->strides, a->padding, a->dilation);
    if (rc)
        return rc;
    if ((rc = attr_int(c, "groups", 0, 1, &a->groups)))
        return rc;
    if (a->groups < 1)
        return attr_fail(c, "groups must be >= 1, got %lld", (long long)a->groups);
    a->output_padding[0] = a->output_padding[1] = 0;
    if (transpose) {
        static const int64_t zeros2[2] = {0, 0};
        size_t n;
        if ((rc = attr_ints(c, "output_padding", zeros2, 2, 2, a->output_padding, 2, &n)))
            return rc;
        for (int i = 0; i < 2; i++)
            if (a->output_padding[i] < 0 ||
                (a->output_padding[i] >= a->strides[i] && a->output_padding[i] >= a->dilation[i]))
                return attr_fail(c, "output_padding [%lld, %lld] must be >= 0 and smaller than the stride or "
                                    "the dilation",
                                 (long long)a->output_padding[0], (long long)a->output_padding[1]);
    }
    return 0;
}

/* Output extent of a convolution along one axis, or -1 when the window does not fit. */
static int64_t conv_out(int64_t in, int64_t k, int64_t pad0, int64_t pad1, int64_t s, int64_t d)
{
    int64_t span = d * (k - 1) + 1;
    int64_t room = in + pad0 + pad1 - span;
    if (room < 0)
        return -1;
    return room / s + 1;
}

/* Shape of a (q)conv2d given x and w (checked here), with conv attrs already read. */
static int conv2d_shape_of(relctx *c, const tth_ttype *x, const tth_window_attrs *a, tth_ttype *out)
{
    const tth_ttype *w = ARG(c, 1);
    int rc;
    if ((rc = need_rank(c, 1, 4, "OIHW")))
        return rc;
    if (x->shape[1] != w->shape[1] * a->groups)
        return rel_fail(c, "input has %lld channels but the weight expects %lld (%lld per group x %lld groups)",
                        (long long)x->shape[1], (long long)(w->shape[1] * a->groups), (long long)w->shape[1],
                        (long long)a->groups);
    if (w->shape[0] % a->groups != 0)
        return rel_fail(c, "%lld output channels are not divisible by %lld groups", (long long)w->shape[0],
                        (long long)a->groups);
    int64_t oh = conv_out(x->shape[2], w->shape[2], a->padding[0], a->padding[2], a->strides[0], a->dilation[0]);
    int64_t ow = conv_out(x->shape[3], w->shape[3], a->padding[1], a->padding[3], a->strides[1], a->dilation[1]);
    if (oh < 1 || ow < 1)
        return rel_fail(c, "the %lldx%lld kernel (dilation [%lld, %lld]) is larger than the padded input",
                        (long long)w->shape[2], (long long)w->shape[3], (long long)a->dilation[0],
                        (long long)a->dilation[1]);
    tth_ttype t = {.dtype = x->dtype, .rank = 4, .shape = {x->shape[0], w->shape[0], oh, ow}};
    *out = t;
    return 0;
}

/* the same for x = argument 0 in NCHW */
static int conv2d_shape(relctx *c, const tth_window_attrs *a, tth_ttype *out)
{
    int rc = need_rank(c, 0, 4, "NCHW");
    return rc ? rc : conv2d_shape_of(c, ARG(c, 0), a, out);
}

static int check_bias(relctx *c, size_t i, int64_t channels)
{
    const tth_ttype *b = ARG(c, i);
    if (b->rank != 1 || b->shape[0] != channels)
        return rel_fail(c, "bias must have shape [%lld]", (long long)channels);
    return need_same_dtype(c, 0, i);
}

/* The output shape of a convolution whose input and output may be in blocked channels
 * (data_layout, out_layout: docs/layouts.md); *t gets the output type (x's dtype) */
static int conv2d_layout_shape(relctx *c, const tth_window_attrs *a, tth_ttype *t)
{
    int64_t bi, bo;
    int rc;
    if ((rc = attr_layout(c, "data_layout", &bi)) || (rc = attr_layout(c, "out_layout", &bo)))
        return rc;
    if (!bi) {
        if ((rc = conv2d_shape(c, a, t)))
            return rc;
    } else {
        /* blocked input [N, C/b, H, W, b]: the shape rule of its NCHW view */
        const tth_ttype *x = ARG(c, 0);
        if (x->rank != 5 || x->shape[4] != bi)
            return rel_fail(c, "argument 0 must have rank 5 with %lld channels innermost (data_layout NCHW%lldc)",
                            (long long)bi, (long long)bi);
        tth_ttype view = {.dtype = x->dtype, .rank = 4, .shape = {x->shape[0], x->shape[1] * bi, x->shape[2], x->shape[3]}};
        if ((rc = conv2d_shape_of(c, &view, a, t)))
            return rc;
    }
    if (bo) {
        if (t->shape[1] % bo)
            return rel_fail(c, "%lld output channels do not fill blocks of %lld (out_layout NCHW%lldc)",
                            (long long)t->shape[1], (long long)bo, (long long)bo);
        t->rank = 5;
        t->shape[4] = bo;
        t->shape[1] /= bo;
    }
    return 0;
}

/* nn.conv2d(x NCHW, w OIHW, [bias O]). */
static int rel_conv2d(relctx *c)
{
    tth_window_attrs a;
    tth_ttype t;
    int rc;
    if ((rc = read_conv_attrs(c, &a, 0)) || (rc = need_numeric(c, 0)) || (rc = need_same_dtype(c, 0, 1)) ||
        (rc = conv2d_layout_shape(c, &a, &t)))
        return rc;
    /* the bias has one value per output channel, in every layout */
    if (c->nargs == 3 && (rc = check_bias(c, 2, t.rank == 5 ? t.shape[1] * t.shape[4] : t.shape[1])))
        return rc;
    set_out(c, &t);
    return 0;
}

/* nn.conv2d_transpose(x NCHW, w [C_in, C_out/groups, kh, kw], [bias C_out]). */
static int rel_conv2d_transpose(relctx *c)
{
    tth_window_attrs a;
    int rc;
    if ((rc = read_conv_attrs(c, &a, 1)) || (rc = need_numeric(c, 0)) || (rc = need_same_dtype(c, 0, 1)) ||
        (rc = need_rank(c, 0, 4, "NCHW")) || (rc = need_rank(c, 1, 4, "[C_in, C_out/groups, kh, kw]")))
        return rc;
    const tth_ttype *x = ARG(c, 0), *w = ARG(c, 1);
    if (x->shape[1] != w->shape[0])
        return rel_fail(c, "input has %lld channels but the weight expects %lld", (long long)x->shape[1],
                        (long long)w->shape[0]);
    if (w->shape[0] % a.groups != 0)
        return rel_fail(c, "%lld input channels are not divisible by %lld groups", (long long)w->shape[0],
                        (long long)a.groups);
    int64_t o[2];
    for (int i = 0; i < 2; i++) {
        o[i] = a.strides[i] * (x->shape[2 + i] - 1) + a.output_padding[i] + a.dilation[i] * (w->shape[2 + i] - 1) +
               1 - a.padding[i] - a.padding[i + 2];
        if (o[i] < 1)
            return rel_fail(c, "padding [%lld, %lld, %lld, %lld] leaves an empty output",
                            (long long)a.padding[0], (long long)a.padding[1], (long long)a.padding[2],
                            (long long)a.padding[3]);
    }
    tth_ttype t = {.dtype = x->dtype, .rank = 4, .shape = {x->shape[0], w->shape[1] * a.groups, o[0], o[1]}};
    if (c->nargs == 3 && (rc = check_bias(c, 2, t.shape[1])))
        return rc;
    set_out(c, &t);
    return 0;
}

/* Shared shape rule of numpy matmul; a and b are the operand types. */
static int matmul_shape(relctx *c, const tth_ttype *a, const tth_ttype *b, tth_dtype dt, tth_ttype *out)
{
    if (a->rank < 1 || b->rank < 1)
        return rel_fail(c, "operands must have rank >= 1");
    tth_ttype A = *a, B = *b;
    int a_vec = a->rank == 1, b_vec = b->rank == 1;
    if (a_vec) { /* [K] -> [1, K] */
        A.rank = 2;
        A.shape[0] = 1;
        A.shape[1] = a->shape[0];
    }
    if (b_vec) { /* [K] -> [K, 1] */
        B.rank = 2;
        B.shape[0] = b->shape[0];
        B.shape[1] = 1;
    }
    int64_t m = A.shape[A.rank - 2], k = A.shape[A.rank - 1];
    int64_t k2 = B.shape[B.rank - 2], n = B.shape[B.rank - 1];
    if (k != k2)
        return rel_fail(c, "inner dimensions differ: %lld vs %lld", (long long)k, (long long)k2);
    tth_ttype ba = A, bb = B, batch;
    ba.rank -= 2;
    bb.rank -= 2;
    if (broadcast2(&ba, &bb, &batch) != 0)
        return rel_fail(c, "batch dimensions do not broadcast");
    tth_ttype t = batch;
    t.dtype = dt;
    if (!a_vec)
        t.shape[t.rank++] = m;
    if (!b_vec)
        t.shape[t.rank++] = n;
    *out = t;
    return 0;
}

static int rel_matmul(relctx *c)
{
    tth_ttype t;
    int rc;
    if ((rc = need_same_dtype(c, 0, 1)) || (rc = need_numeric(c, 0)) ||
        (rc = matmul_shape(c, ARG(c, 0), ARG(c, 1), ARG(c, 0)->dtype, &t)))
        return rc;
    set_out(c, &t);
    return 0;
}

/* Pool output extent along one axis; ONNX's rule for ceil_mode: the last window must start
 * inside the input or the left padding. -1 when the window does not fit. */
static int64_t pool_out(int64_t in, int64_t k, int64_t pad0, int64_t pad1, int64_t s, int64_t d, int ceil_mode)
{
    int64_t span = d * (k - 1) + 1;
    int64_t room = in + pad0 + pad1 - span;
    if (room < 0)
        return -1;
    int64_t o = (ceil_mode ? (room + s - 1) / s : room / s) + 1;
    if (ceil_mode && (o - 1) * s >= in + pad0)
        o--;
    return o;
}

static int read_pool_attrs(relctx *c, tth_window_attrs *a)
{
    size_t n;
    int rc;
    memset(a, 0, sizeof *a);
    a->groups = 1;
    if ((rc = attr_ints(c, "pool_size", NULL, 0, 2, a->pool_size, 2, &n)) ||
        (rc = read_window_attrs(c, a->strides, a->padding, a->dilation)) ||
        (rc = attr_bool(c, "ceil_mode", 0, 0, &a->ceil_mode)))
        return rc;
    if (c->op == TTH_OP_AVG_POOL2D && (rc = attr_bool(c, "count_include_pad", 0, 0, &a->count_include_pad)))
        return rc;
    if (a->pool_size[0] < 1 || a->pool_size[1] < 1)
        return attr_fail(c, "pool_size must be >= 1, got [%lld, %lld]", (long long)a->pool_size[0],
                         (long long)a->pool_size[1]);
    return 0;
}

static int rel_pool2d(relctx *c)
{
    tth_window_attrs a;
    int rc;
    if ((rc = read_pool_attrs(c, &a)))
        return rc;
    const int64_t *ps = a.pool_size, *strides = a.strides, *padding = a.padding, *dilation = a.dilation;
    int ceil_mode = a.ceil_mode;
    /* Integer inputs are allowed (average pools of int32 accumulators, as CMSIS-NN patterns use). */
    int64_t b = 0;
    if (c->op != TTH_OP_MAX_POOL2D_ARGMAX && (rc = attr_layout(c, "layout", &b)))
        return rc;
    if ((rc = need_layout_rank(c, 0, b)) || (rc = need_numeric(c, 0)))
        return rc;
    const tth_ttype *x = ARG(c, 0);
    int64_t oh = pool_out(x->shape[2], ps[0], padding[0], padding[2], strides[0], dilation[0], ceil_mode);
    int64_t ow = pool_out(x->shape[3], ps[1], padding[1], padding[3], strides[1], dilation[1], ceil_mode);
    if (oh < 1 || ow < 1)
        return rel_fail(c, "the %lldx%lld window is larger than the padded input", (long long)ps[0],
                        (long long)ps[1]);
    tth_ttype t = *x;
    t.shape[2] = oh;
    t.shape[3] = ow;
    set_out(c, &t);
    return 0;
}

/* nn.max_pool2d_with_argmax: nn.max_pool2d's type, and the same shape in int64 for the indices */
static int rel_max_pool2d_argmax(relctx *c)
{
    int64_t order;
    int rc;
    if ((rc = rel_pool2d(c)) || (rc = attr_int(c, "storage_order", 0, 0, &order)))
        return rc;
    if (order != 0 && order != 1)
        return attr_fail(c, "storage_order must be 0 or 1, got %lld", (long long)order);
    tth_ttype *fields = tth_arena_alloc(c->arena, 2 * sizeof *fields);
    if (!fields)
        return tth_diag_set(c->diag, TTH_ENOMEM, c->location, "%s: out of memory", tth_op_name(c->op));
    fields[0] = fields[1] = c->out->tensor;
    fields[1].dtype = TTH_I64;
    c->out->nfields = 2;
    memset(&c->out->tensor, 0, sizeof c->out->tensor);
    c->out->fields = fields;
    return 0;
}

/* det: a float [..., n, n] -> [...] */
static int rel_det(relctx *c)
{
    int rc;
    if ((rc = need_float(c, 0)))
        return rc;
    const tth_ttype *x = ARG(c, 0);
    if (x->rank < 2 || x->shape[x->rank - 1] != x->shape[x->rank - 2])
        return rel_fail(c, "needs square matrices in the last two axes");
    tth_ttype t = *x;
    t.rank -= 2;
    for (int i = t.rank; i < TTH_MAX_RANK; i++)
        t.shape[i] = 0;
    set_out(c, &t);
    return 0;
}

/* vision.roi_align: x NCHW float, rois [R, 4] of x's dtype, batch_indices [R] int32 or int64;
 * pooled_size [h, w] (> 0, required), spatial_scale (default 1), sampling_ratio (>= 0, default 0),
 * mode avg|max (default avg), aligned (default false) -> [R, C, h, w] */
static int rel_roi_align(relctx *c)
{
    static const char *const modes[] = {"avg", "max", NULL};
    int64_t ps[2], ratio;
    size_t nps;
    double scale;
    const char *mode;
    int aligned, rc;
    if ((rc = attr_ints(c, "pooled_size", NULL, 0, 2, ps, 2, &nps)) ||
        (rc = attr_float(c, "spatial_scale", 0, 1.0, &scale)) || (rc = attr_int(c, "sampling_ratio", 0, 0, &ratio)) ||
        (rc = attr_choice(c, "mode", "avg", modes, &mode)) || (rc = attr_bool(c, "aligned", 0, 0, &aligned)))
        return rc;
    if (ps[0] < 1 || ps[1] < 1)
        return attr_fail(c, "pooled_size must be positive, got [%lld, %lld]", (long long)ps[0], (long long)ps[1]);
    if (ratio < 0)
        return attr_fail(c, "sampling_ratio must be >= 0, got %lld", (long long)ratio);
    if ((rc = need_rank(c, 0, 4, "NCHW")) || (rc = need_float(c, 0)) || (rc = need_same_dtype(c, 0, 1)) ||
        (rc = need_rank(c, 1, 2, "[num_rois, 4]")) || (rc = need_rank(c, 2, 1, "[num_rois]")))
        return rc;
    const tth_ttype *x = ARG(c, 0), *rois = ARG(c, 1), *bi = ARG(c, 2);
    if (rois->shape[1] != 4)
        return rel_fail(c, "rois must be [num_rois, 4]");
    if (bi->dtype != TTH_I64 && bi->dtype != TTH_I32)
        return rel_fail(c, "batch_indices must be int32 or int64, got %s", tth_dtype_name(bi->dtype));
    if (bi->shape[0] != rois->shape[0])
        return rel_fail(c, "batch_indices has %lld entries for %lld rois", (long long)bi->shape[0],
                        (long long)rois->shape[0]);
    tth_ttype t = {.dtype = x->dtype, .rank = 4, .shape = {rois->shape[0], x->shape[1], ps[0], ps[1]}};
    set_out(c, &t);
    return 0;
}

static int rel_global_pool2d(relctx *c)
{
    int64_t b;
    int rc;
    if ((rc = attr_layout(c, "layout", &b)) || (rc = need_layout_rank(c, 0, b)) || (rc = need_numeric(c, 0)))
        return rc;
    tth_ttype t = *ARG(c, 0);
    t.shape[2] = t.shape[3] = 1;
    set_out(c, &t);
    return 0;
}

/* nn.batch_norm(x, scale, bias, mean, var): channels on axis 1; result has x's type. */
static int rel_batch_norm(relctx *c)
{
    double eps;
    int rc;
    if ((rc = attr_float(c, "epsilon", 0, 1e-5, &eps)))
        return rc;
    if (eps < 0)
        return attr_fail(c, "epsilon must be >= 0");
    if ((rc = need_float(c, 0)))
        return rc;
    const tth_ttype *x = ARG(c, 0);
    if (x->rank < 2)
        return rel_fail(c, "x must have rank >= 2 (channels on axis 1)");
    static const char *names[] = {"x", "scale", "bias", "mean", "var"};
    for (size_t i = 1; i < 5; i++) {
        if ((rc = need_same_dtype(c, 0, i)))
            return rc;
        if (ARG(c, i)->rank != 1 || ARG(c, i)->shape[0] != x->shape[1])
            return rel_fail(c, "%s must have shape [%lld] (the channels of x)", names[i], (long long)x->shape[1]);
    }
    set_out(c, x);
    return 0;
}

static int rel_softmax(relctx *c)
{
    int64_t axis, ax;
    int rc;
    if ((rc = attr_int(c, "axis", 1, 0, &axis)) || (rc = need_float(c, 0)))
        return rc;
    if (ARG(c, 0)->rank < 1)
        return rel_fail(c, "x must have rank >= 1");
    if ((rc = norm_axis(c, "axis", axis, ARG(c, 0)->rank, &ax)))
        return rc;
    set_out(c, ARG(c, 0));
    return 0;
}

/* nn.layer_norm: x of rank >= 1 over its last axis; scale and bias of x's dtype, [D] (any rank
 * whose dimensions are 1 but the last) or a single value */
static int rel_layer_norm(relctx *c)
{
    double eps;
    int rc;
    if ((rc = attr_float(c, "epsilon", 0, 1e-5, &eps)) || (rc = need_float(c, 0)))
        return rc;
    const tth_ttype *x = ARG(c, 0);
    if (x->rank < 1)
        return rel_fail(c, "x must have rank >= 1");
    if (!(eps >= 0))
        return rel_fail(c, "epsilon must be >= 0");
    int64_t D = x->shape[x->rank - 1];
    for (size_t i = 1; i < 3; i++) {
        const tth_ttype *p = ARG(c, i);
        int64_t n = tth_ttype_numel(p);
        int ok = p->dtype == x->dtype && (n == 1 || (n == D && p->rank >= 1 && p->shape[p->rank - 1] == D));
        if (!ok)
            return rel_fail(c, "%s must be x's dtype with %lld values along the last axis, or one value",
                            i == 1 ? "scale" : "bias", (long long)D);
    }
    set_out(c, x);
    return 0;
}

/* nn.attention: softmax(scale * q k^T + mask) v over the last axis; batch dimensions of q, k, v
 * (and the mask's leading ones) broadcast */
static int rel_attention(relctx *c)
{
    double scale;
    int kt, rc;
    if ((rc = attr_float(c, "scale", 0, 1.0, &scale)) || (rc = attr_bool(c, "keys_transposed", 0, 0, &kt)))
        return rc;
    const tth_ttype *q = ARG(c, 0), *k = ARG(c, 1), *v = ARG(c, 2);
    for (size_t i = 0; i < c->nargs; i++)
        if (ARG(c, i)->dtype != TTH_F32)
            return rel_fail(c, "argument %zu must be float32", i);
    if (q->rank < 2 || k->rank < 2 || v->rank < 2)
        return rel_fail(c, "q, k and v must have rank >= 2");
    int64_t Lq = q->shape[q->rank - 2], D = q->shape[q->rank - 1];
    int64_t kD = k->shape[k->rank - (kt ? 2 : 1)], Lk = k->shape[k->rank - (kt ? 1 : 2)];
    if (kD != D)
        return rel_fail(c, "k has %lld features, q %lld", (long long)kD, (long long)D);
    if (v->shape[v->rank - 2] != Lk)
        return rel_fail(c, "v has %lld rows for %lld keys", (long long)v->shape[v->rank - 2], (long long)Lk);
    /* the batch: q's, k's and v's leading dimensions broadcast */
    tth_ttype bq = {.dtype = TTH_F32, .rank = q->rank - 2}, bk = {.dtype = TTH_F32, .rank = k->rank - 2},
              bv = {.dtype = TTH_F32, .rank = v->rank - 2}, b1, b;
    memcpy(bq.shape, q->shape, sizeof(int64_t) * (size_t)bq.rank);
    memcpy(bk.shape, k->shape, sizeof(int64_t) * (size_t)bk.rank);
    memcpy(bv.shape, v->shape, sizeof(int64_t) * (size_t)bv.rank);
    if (broadcast2(&bq, &bk, &b1) != 0 || broadcast2(&b1, &bv, &b) != 0)
        return rel_fail(c, "the batch dimensions of q, k and v do not broadcast");
    if (b.rank + 2 > TTH_MAX_RANK)
        return rel_fail(c, "too many dimensions");
    tth_ttype s = b, out = b;
    s.shape[s.rank++] = Lq;
    s.shape[s.rank++] = Lk;
    if (c->nargs > 3) {
        tth_ttype sm;
        if (broadcast2(&s, ARG(c, 3), &sm) != 0 || !tth_ttype_equal(&sm, &s))
            return rel_fail(c, "the mask does not broadcast to the scores");
    }
    out.shape[out.rank++] = Lq;
    out.shape[out.rank++] = v->shape[v->rank - 1];
    set_out(c, &out);
    return 0;
}

/* nn.pad's attributes for rank `rank` (tth_pad_attrs_of); a wrong count is `fail`'s error. */
static int read_pad(relctx *c, int32_t rank, tth_pad_attrs *p, int (*fail)(relctx *, const char *, ...))
{
    size_t nb, na;
    const char *mode;
    static const char *const modes[] = {"constant", "reflect", "edge", NULL};
    int rc;
    if ((rc = attr_ints(c, "pad_before", NULL, 0, -1, p->before, TTH_MAX_RANK, &nb)) ||
        (rc = attr_ints(c, "pad_after", NULL, 0, -1, p->after, TTH_MAX_RANK, &na)) ||
        (rc = attr_float(c, "pad_value", 0, 0.0, &p->value)) || (rc = attr_choice(c, "mode", "constant", modes, &mode)))
        return rc;
    if (nb != (size_t)rank || na != (size_t)rank)
        return fail(c, "pad_before and pad_after need one entry per dimension (%d), got %zu and %zu", rank, nb, na);
    for (int32_t i = 0; i < rank; i++)
        if (p->before[i] < 0 || p->after[i] < 0)
            return attr_fail(c, "pad_before and pad_after must be >= 0");
    p->mode = !strcmp(mode, "reflect") ? TTH_PAD_REFLECT : !strcmp(mode, "edge") ? TTH_PAD_EDGE : TTH_PAD_CONSTANT;
    return 0;
}

static int rel_pad(relctx *c)
{
    const tth_ttype *x = ARG(c, 0);
    tth_pad_attrs p;
    int rc = read_pad(c, x->rank, &p, rel_fail);
    if (rc)
        return rc;
    tth_ttype t = *x;
    for (int32_t i = 0; i < x->rank; i++) {
        if (p.mode == TTH_PAD_REFLECT && (p.before[i] >= x->shape[i] || p.after[i] >= x->shape[i]))
            return rel_fail(c, "reflect padding of dimension %d must be smaller than its size %lld", i,
                            (long long)x->shape[i]);
        if (p.mode == TTH_PAD_EDGE && x->shape[i] == 0 && (p.before[i] || p.after[i]))
            return rel_fail(c, "edge padding of the empty dimension %d", i);
        t.shape[i] = x->shape[i] + p.before[i] + p.after[i];
    }
    set_out(c, &t);
    return 0;
}

/* ---- shape and data movement ---- */

static int rel_reshape(relctx *c)
{
    int64_t ns[TTH_MAX_RANK];
    size_t n;
    int rc = attr_ints(c, "newshape", NULL, 0, -1, ns, TTH_MAX_RANK, &n);
    if (rc)
        return rc;
    tth_ttype t = {.dtype = ARG(c, 0)->dtype, .rank = (int32_t)n};
    for (size_t i = 0; i < n; i++) {
        if (ns[i] < 0)
            return attr_fail(c, "newshape must be fully resolved (every entry >= 0), got %lld at %zu",
                             (long long)ns[i], i);
        t.shape[i] = ns[i];
    }
    if (tth_ttype_numel(&t) != tth_ttype_numel(ARG(c, 0))) {
        char buf[160];
        fmt_ttype(&t, buf, sizeof buf);
        return rel_fail(c, "cannot reshape %lld elements into %s", (long long)tth_ttype_numel(ARG(c, 0)), buf);
    }
    set_out(c, &t);
    return 0;
}

/* transpose's "axes" for an input of rank `rank`: the reverse order when absent, negative entries
 * counted from the end; a permutation of 0..rank-1 (tth_transpose_axes_of) */
static int read_transpose_axes(relctx *c, int32_t rank, int64_t *axes)
{
    int64_t rev[TTH_MAX_RANK];
    for (int32_t i = 0; i < rank; i++)
        rev[i] = rank - 1 - i;
    size_t n;
    int rc = attr_ints(c, "axes", rev, (size_t)rank, -1, axes, TTH_MAX_RANK, &n);
    if (rc)
        return rc;
    if (n != (size_t)rank)
        return rel_fail(c, "axes has %zu entries but x has rank %d", n, rank);
    int seen[TTH_MAX_RANK] = {0};
    for (size_t i = 0; i < n; i++) {
        if (axes[i] < 0)
            axes[i] += rank;
        if (axes[i] < 0 || axes[i] >= rank || seen[axes[i]])
            return rel_fail(c, "axes is not a permutation of 0..%d", rank - 1);
        seen[axes[i]] = 1;
    }
    return 0;
}

static int rel_transpose(relctx *c)
{
    const tth_ttype *x = ARG(c, 0);
    int64_t axes[TTH_MAX_RANK];
    int rc = read_transpose_axes(c, x->rank, axes);
    if (rc)
        return rc;
    tth_ttype t = *x;
    for (int32_t i = 0; i < x->rank; i++)
        t.shape[i] = x->shape[axes[i]];
    set_out(c, &t);
    return 0;
}

static int rel_broadcast_to(relctx *c)
{
    int64_t shape[TTH_MAX_RANK];
    size_t n;
    int rc = attr_ints(c, "shape", NULL, 0, -1, shape, TTH_MAX_RANK, &n);
    if (rc)
        return rc;
    tth_ttype want = {.dtype = ARG(c, 0)->dtype, .rank = (int32_t)n}, got;
    for (size_t i = 0; i < n; i++) {
        if (shape[i] < 0)
            return attr_fail(c, "shape entries must be >= 0");
        want.shape[i] = shape[i];
    }
    if (broadcast2(ARG(c, 0), &want, &got) != 0 || !tth_ttype_equal(&got, &want)) {
        char buf[160];
        fmt_ttype(&want, buf, sizeof buf);
        return rel_fail(c, "cannot broadcast to %s", buf);
    }
    set_out(c, &want);
    return 0;
}

static int rel_concatenate(relctx *c)
{
    int64_t axis, ax;
    int rc = attr_int(c, "axis", 1, 0, &axis);
    if (rc)
        return rc;
    const tth_ttype *x = ARG(c, 0);
    if (x->rank < 1)
        return rel_fail(c, "cannot concatenate scalars");
    if ((rc = norm_axis(c, "axis", axis, x->rank, &ax)))
        return rc;
    tth_ttype t = *x;
    for (size_t i = 1; i < c->nargs; i++) {
        const tth_ttype *y = ARG(c, i);
        if ((rc = need_same_dtype(c, 0, i)))
            return rc;
        if (y->rank != x->rank)
            return rel_fail(c, "argument %zu has rank %d, argument 0 has rank %d", i, y->rank, x->rank);
        for (int32_t d = 0; d < x->rank; d++)
            if (d != ax && y->shape[d] != x->shape[d])
                return rel_fail(c, "argument %zu differs from argument 0 in dimension %d (not the axis %lld)", i, d,
                                (long long)ax);
        t.shape[ax] += y->shape[ax];
    }
    set_out(c, &t);
    return 0;
}

#define MAX_SPLIT 4096

static int rel_split(relctx *c)
{
    int64_t axis, ax;
    int rc = attr_int(c, "axis", 1, 0, &axis);
    if (rc)
        return rc;
    const json_t *sizes = attr_get(c, "sizes");
    if (!sizes)
        return attr_missing(c, "sizes");
    if (!json_is_array(sizes) || json_array_size(sizes) == 0 || json_array_size(sizes) > MAX_SPLIT)
        return attr_fail(c, "attribute 'sizes' must be a non-empty array of integers");
    const tth_ttype *x = ARG(c, 0);
    if (x->rank < 1)
        return rel_fail(c, "cannot split a scalar");
    if ((rc = norm_axis(c, "axis", axis, x->rank, &ax)))
        return rc;
    size_t n = json_array_size(sizes);
    int64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(sizes, i);
        if (!json_is_integer(e) || json_integer_value(e) < 0)
            return attr_fail(c, "attribute 'sizes' must be an array of integers >= 0");
        total += json_integer_value(e);
    }
    if (total != x->shape[ax])
        return rel_fail(c, "sizes add up to %lld but axis %lld has %lld", (long long)total, (long long)ax,
                        (long long)x->shape[ax]);
    tth_ttype *fields = tth_arena_alloc(c->arena, n * sizeof *fields);
    if (!fields)
        return tth_diag_set(c->diag, TTH_ENOMEM, c->location, "%s: out of memory", tth_op_name(c->op));
    for (size_t i = 0; i < n; i++) {
        fields[i] = *x;
        fields[i].shape[ax] = json_integer_value(json_array_get(sizes, i));
    }
    c->out->nfields = (int32_t)n;
    memset(&c->out->tensor, 0, sizeof c->out->tensor);
    c->out->fields = fields;
    return 0;
}

/* strided_slice: begin/end/strides normalized as the op table says. */
static int rel_strided_slice(relctx *c)
{
    const tth_ttype *x = ARG(c, 0);
    int64_t begin[TTH_MAX_RANK], end[TTH_MAX_RANK], strides[TTH_MAX_RANK], ones[TTH_MAX_RANK];
    for (int i = 0; i < TTH_MAX_RANK; i++)
        ones[i] = 1;
    size_t nb, ne, ns;
    int rc;
    if ((rc = attr_ints(c, "begin", NULL, 0, -1, begin, TTH_MAX_RANK, &nb)) ||
        (rc = attr_ints(c, "end", NULL, 0, -1, end, TTH_MAX_RANK, &ne)) ||
        (rc = attr_ints(c, "strides", ones, (size_t)x->rank, -1, strides, TTH_MAX_RANK, &ns)))
        return rc;
    if (nb != (size_t)x->rank || ne != (size_t)x->rank || ns != (size_t)x->rank)
        return rel_fail(c, "begin, end and strides need one entry per dimension (%d), got %zu, %zu and %zu",
                        x->rank, nb, ne, ns);
    tth_ttype t = *x;
    for (int32_t i = 0; i < x->rank; i++) {
        int64_t d = x->shape[i], b = begin[i], e = end[i], s = strides[i];
        if (s == 0)
            return attr_fail(c, "strides must not be 0 (dimension %d)", i);
        if (s > 0) {
            if (b < 0 || b > d || e < 0 || e > d)
                return rel_fail(c, "dimension %d: begin %lld and end %lld must lie in [0, %lld] for a positive stride",
                                i, (long long)b, (long long)e, (long long)d);
            t.shape[i] = e > b ? (e - b + s - 1) / s : 0;
        } else {
            if (b < 0 || b > (d > 0 ? d - 1 : 0) || e < -1 || e > (d > 0 ? d - 1 : 0))
                return rel_fail(c, "dimension %d: begin %lld must lie in [0, %lld] and end %lld in [-1, %lld] for a "
                                   "negative stride",
                                i, (long long)b, (long long)(d - 1), (long long)e, (long long)(d - 1));
            t.shape[i] = (d > 0 && b > e) ? (b - e + (-s) - 1) / (-s) : 0;
        }
    }
    set_out(c, &t);
    return 0;
}

/* take(data, indices): data[:axis] + indices.shape + data[axis+1:]. */
static int rel_take(relctx *c)
{
    int64_t axis, ax;
    int rc = attr_int(c, "axis", 0, 0, &axis);
    if (rc)
        return rc;
    const tth_ttype *x = ARG(c, 0), *idx = ARG(c, 1);
    if (idx->dtype != TTH_I32 && idx->dtype != TTH_I64)
        return rel_fail(c, "indices must be int32 or int64, got %s", tth_dtype_name(idx->dtype));
    if (x->rank < 1)
        return rel_fail(c, "data must have rank >= 1");
    if ((rc = norm_axis(c, "axis", axis, x->rank, &ax)))
        return rc;
    if (x->rank - 1 + idx->rank > TTH_MAX_RANK)
        return rel_fail(c, "result would have rank %d, more than %d", x->rank - 1 + idx->rank, TTH_MAX_RANK);
    tth_ttype t = {.dtype = x->dtype, .rank = 0};
    for (int32_t i = 0; i < ax; i++)
        t.shape[t.rank++] = x->shape[i];
    for (int32_t i = 0; i < idx->rank; i++)
        t.shape[t.rank++] = idx->shape[i];
    for (int32_t i = (int32_t)ax + 1; i < x->rank; i++)
        t.shape[t.rank++] = x->shape[i];
    set_out(c, &t);
    return 0;
}

/* sum/mean/max/min/prod: {axis: [..] (empty: all), keepdims} */
static int rel_reduce(relctx *c)
{
    static const int64_t none[1] = {0};
    int64_t axes[TTH_MAX_RANK];
    size_t n;
    int keepdims, rc;
    if ((rc = attr_ints(c, "axis", none, 0, -1, axes, TTH_MAX_RANK, &n)) ||
        (rc = attr_bool(c, "keepdims", 1, 0, &keepdims)) || (rc = need_numeric(c, 0)))
        return rc;
    const tth_ttype *x = ARG(c, 0);
    int red[TTH_MAX_RANK] = {0};
    for (size_t i = 0; i < n; i++) {
        int64_t a;
        if ((rc = norm_axis(c, "axis", axes[i], x->rank, &a)))
            return rc;
        if (red[a])
            return attr_fail(c, "axis %lld is listed twice", (long long)a);
        red[a] = 1;
    }
    tth_ttype t = {.dtype = x->dtype, .rank = 0};
    for (int32_t i = 0; i < x->rank; i++) {
        int r = n == 0 || red[i];
        if (r && x->shape[i] == 0 && (c->op == TTH_OP_MAX || c->op == TTH_OP_MIN))
            return rel_fail(c, "cannot reduce the empty dimension %d", i);
        if (!r)
            t.shape[t.rank++] = x->shape[i];
        else if (keepdims)
            t.shape[t.rank++] = 1;
    }
    set_out(c, &t);
    return 0;
}

static int rel_argreduce(relctx *c)
{
    int64_t axis, ax;
    int keepdims, last, rc;
    if ((rc = attr_int(c, "axis", 0, 0, &axis)) || (rc = attr_bool(c, "keepdims", 1, 0, &keepdims)) ||
        (rc = attr_bool(c, "select_last_index", 0, 0, &last)) || (rc = need_numeric(c, 0)))
        return rc;
    const tth_ttype *x = ARG(c, 0);
    if (x->rank < 1)
        return rel_fail(c, "x must have rank >= 1");
    if ((rc = norm_axis(c, "axis", axis, x->rank, &ax)))
        return rc;
    if (x->shape[ax] == 0)
        return rel_fail(c, "cannot reduce the empty dimension %lld", (long long)ax);
    tth_ttype t = {.dtype = TTH_I64, .rank = 0};
    for (int32_t i = 0; i < x->rank; i++) {
        if (i != ax)
            t.shape[t.rank++] = x->shape[i];
        else if (keepdims)
            t.shape[t.rank++] = 1;
    }
    set_out(c, &t);
    return 0;
}

/* tf_crop_and_resize's source coordinate: the region [start, end] (fractions of in - 1) sampled
 * at out points from its start to its end, or at its middle when out is 1 */
static double crop_source(double start, double end, double x, int64_t in, int64_t out)
{
    double span = (double)(in - 1);
    if (out == 1)
        return 0.5 * (start + end) * span;
    return start * span + x * (end - start) * span / (double)(out - 1);
}

double tth_resize_source(const char *mode, double x, int64_t in, int64_t out, double scale)
{
    /* the resized length as ONNX counts it: in * scale, not rounded (5 * 0.6 is 3, 4 * 0.6 is 2.4) */
    double len = scale * (double)in;
    mode = mode ? mode : "half_pixel";
    if (!strcmp(mode, "align_corners"))
        return len == 1 || out == 1 ? 0.0 : x * (double)(in - 1) / (len - 1);
    if (!strcmp(mode, "asymmetric"))
        return x / scale;
    if (!strcmp(mode, "tf_half_pixel_for_nn"))
        return (x + 0.5) / scale;
    if (!strcmp(mode, "tf_crop_and_resize"))
        return crop_source(0, 1, x, in, out);
    if (!strcmp(mode, "pytorch_half_pixel") && (len == 1 || out == 1))
        return -0.5;
    return (x + 0.5) / scale - 0.5;
}

/* tf_crop_and_resize's "roi" [h0, w0, h1, w1] (required) and "extrapolation_value" (default 0) */
static int read_resize_crop(relctx *c, tth_resize2d_attrs *a)
{
    const json_t *roi = attr_get(c, "roi");
    if (!roi)
        return attr_missing(c, "roi");
    if (json_array_size(roi) != 4)
        return attr_fail(c, "roi must be four numbers [h0, w0, h1, w1]");
    for (size_t i = 0; i < 4; i++) {
        const json_t *v = json_array_get(roi, i);
        if (!json_is_number(v) || !isfinite(json_number_value(v)))
            return attr_fail(c, "roi must be four numbers [h0, w0, h1, w1]");
        a->roi[i] = json_number_value(v);
    }
    return attr_float(c, "extrapolation_value", 0, 0.0, &a->extrapolation_value);
}

/* image.resize2d's attributes, read and checked once for the relation and tth_resize2d_attrs_of;
 * scale[] is the "scale" attribute or zeros (the caller knows the input's size). The cubic and
 * tf_crop_and_resize attributes are read (so allowed) with that method or mode only. */
static int read_resize_attrs(relctx *c, tth_resize2d_attrs *a)
{
    static const char *const methods[] = {"nearest", "linear", "cubic", NULL};
    static const char *const ctms[] = {"half_pixel",           "asymmetric",         "align_corners",
                                       "pytorch_half_pixel",   "tf_half_pixel_for_nn", "tf_crop_and_resize",
                                       NULL};
    static const char *const nms[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil", NULL};
    size_t n;
    const char *method, *nm;
    int rc;
    memset(a, 0, sizeof *a);
    if ((rc = attr_ints(c, "size", NULL, 0, 2, a->size, 2, &n)) ||
        (rc = attr_choice(c, "method", "nearest", methods, &method)) ||
        (rc = attr_choice(c, "coordinate_transformation_mode", "half_pixel", ctms,
                          &a->coordinate_transformation_mode)) ||
        (rc = attr_choice(c, "nearest_mode", "round_prefer_floor", nms, &nm)))
        return rc;
    if (a->size[0] < 1 || a->size[1] < 1)
        return attr_fail(c, "size must be >= 1, got [%lld, %lld]", (long long)a->size[0], (long long)a->size[1]);
    for (int i = 0; methods[i]; i++)
        if (strcmp(method, methods[i]) == 0)
            a->method = (tth_resize_method)i;
    for (int i = 0; nms[i]; i++)
        if (strcmp(nm, nms[i]) == 0)
            a->nearest_mode = (tth_resize_nearest_mode)i;
    if (a->method == TTH_RESIZE_CUBIC &&
        ((rc = attr_float(c, "cubic_coeff_a", 0, -0.75, &a->cubic_coeff_a)) ||
         (rc = attr_bool(c, "exclude_outside", 0, 0, &a->exclude_outside))))
        return rc;
    a->roi[2] = a->roi[3] = 1;
    if (!strcmp(a->coordinate_transformation_mode, "tf_crop_and_resize") && (rc = read_resize_crop(c, a)))
        return rc;
    const json_t *scale = attr_get(c, "scale");
    if (scale && (json_array_size(scale) != 2 || !(json_number_value(json_array_get(scale, 0)) > 0) ||
                  !(json_number_value(json_array_get(scale, 1)) > 0)))
        return attr_fail(c, "scale must be two positive numbers [h, w]");
    for (size_t i = 0; scale && i < 2; i++)
        a->scale[i] = json_number_value(json_array_get(scale, i));
    return 0;
}

/* A context for reading one call's attributes outside a relation (the *_attrs_of accessors) */
static void attrs_ctx(relctx *c, tth_op op, const json_t *attrs, tth_diag *diag, tth_diag *local)
{
    memset(c, 0, sizeof *c);
    c->op = op;
    c->attrs = attrs;
    c->diag = diag ? diag : local;
    c->location = "attributes";
}

int tth_transpose_axes_of(const json_t *attrs, int32_t rank, int64_t axes[TTH_MAX_RANK], tth_diag *diag)
{
    tth_diag local;
    relctx c;
    attrs_ctx(&c, TTH_OP_TRANSPOSE, attrs, diag, &local);
    if (rank < 0 || rank > TTH_MAX_RANK)
        return tth_diag_set(c.diag, TTH_EINVAL, c.location, "transpose of rank %d", (int)rank);
    /* the relation's refusals are type errors of the call; here, of the attributes */
    if (read_transpose_axes(&c, rank, axes) != 0) {
        c.diag->code = TTH_EINVAL;
        return TTH_EINVAL;
    }
    return 0;
}

int tth_clip_attrs_of(const json_t *attrs, double *lo, double *hi, tth_diag *diag)
{
    tth_diag local;
    relctx c;
    attrs_ctx(&c, TTH_OP_CLIP, attrs, diag, &local);
    if (read_clip(&c, lo, hi) != 0) {
        c.diag->code = TTH_EINVAL;
        return TTH_EINVAL;
    }
    return 0;
}

int tth_pad_attrs_of(const json_t *attrs, int32_t rank, tth_pad_attrs *p, tth_diag *diag)
{
    tth_diag local;
    relctx c;
    attrs_ctx(&c, TTH_OP_PAD, attrs, diag, &local);
    if (rank < 0 || rank > TTH_MAX_RANK)
        return tth_diag_set(c.diag, TTH_EINVAL, c.location, "nn.pad of rank %d", (int)rank);
    if (read_pad(&c, rank, p, attr_fail) != 0) {
        c.diag->code = TTH_EINVAL;
        return TTH_EINVAL;
    }
    return 0;
}

int tth_resize2d_attrs_of(const json_t *attrs, const int64_t in_hw[2], tth_resize2d_attrs *a, tth_diag *diag)
{
    tth_diag local;
    relctx c;
    attrs_ctx(&c, TTH_OP_RESIZE2D, attrs, diag, &local);
    int rc = read_resize_attrs(&c, a);
    if (rc)
        return rc;
    for (int i = 0; i < 2; i++) {
        if (in_hw[i] < 1)
            return tth_diag_set(c.diag, TTH_EINVAL, c.location, "the input's spatial size must be >= 1");
        if (!(a->scale[i] > 0))
            a->scale[i] = (double)a->size[i] / (double)in_hw[i];
    }
    return 0;
}

int64_t tth_resize_nearest(tth_resize_nearest_mode mode, double x, int64_t in)
{
    double f = floor(x), r = x - f;
    int64_t i;
    if (r == 0)
        i = (int64_t)f;
    else if (mode == TTH_RESIZE_FLOOR)
        i = (int64_t)f;
    else if (mode == TTH_RESIZE_CEIL)
        i = (int64_t)f + 1;
    else if (mode == TTH_RESIZE_ROUND_PREFER_CEIL)
        i = (int64_t)(r < 0.5 ? f : f + 1);
    else /* round_prefer_floor: ties down */
        i = (int64_t)(r <= 0.5 ? f : f + 1);
    return i < 0 ? 0 : i >= in ? in - 1 : i;
}

/* The cubic convolution kernel with coefficient A at distance d from the source coordinate */
static double cubic_weight(double A, double d)
{
    d = fabs(d);
    if (d <= 1)
        return ((A + 2) * d - (A + 3)) * d * d + 1;
    if (d < 2)
        return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A;
    return 0;
}

/* linear and cubic taps around source coordinate x: floor(x) and floor(x)+1, or floor(x)-1 to
 * floor(x)+2, weighted by the distance; with exclude_outside the taps outside [0, in) weigh 0 and
 * the rest are scaled to sum 1; then each index is clamped to the edge */
static void resize_filter_taps(const tth_resize2d_attrs *a, double x, int64_t in, tth_resize_taps *t)
{
    double f = floor(x), r = x - f, sum = 0;
    int64_t first = (int64_t)f - (t->n == 4);
    for (int k = 0; k < t->n; k++) {
        int64_t i = first + k;
        t->w[k] = t->n == 2 ? (k ? r : 1.0 - r) : cubic_weight(a->cubic_coeff_a, x - (double)i);
        if (a->exclude_outside && (i < 0 || i >= in))
            t->w[k] = 0;
        sum += t->w[k];
        t->idx[k] = i < 0 ? 0 : i >= in ? in - 1 : i;
    }
    for (int k = 0; a->exclude_outside && sum != 0 && k < t->n; k++)
        t->w[k] /= sum;
}

void tth_resize_taps_at(const tth_resize2d_attrs *a, int axis, int64_t o, int64_t in, tth_resize_taps *t)
{
    const char *mode = a->coordinate_transformation_mode;
    int64_t out = a->size[axis];
    double x;
    memset(t, 0, sizeof *t);
    t->n = a->method == TTH_RESIZE_CUBIC ? 4 : a->method == TTH_RESIZE_LINEAR ? 2 : 1;
    t->inside = 1;
    if (mode && !strcmp(mode, "tf_crop_and_resize")) {
        x = crop_source(a->roi[axis], a->roi[2 + axis], (double)o, in, out);
        if (!(x >= 0 && x <= (double)(in - 1))) {
            t->inside = 0; /* indices 0, weights 0 */
            return;
        }
    } else {
        x = tth_resize_source(mode, (double)o, in, out, a->scale[axis]);
    }
    if (t->n == 1) {
        t->idx[0] = tth_resize_nearest(a->nearest_mode, x, in);
        t->w[0] = 1;
        return;
    }
    resize_filter_taps(a, x, in, t);
}

static int rel_resize2d(relctx *c)
{
    tth_resize2d_attrs a;
    int rc;
    int64_t b = 0;
    if ((rc = read_resize_attrs(c, &a)) || (rc = attr_layout(c, "layout", &b)))
        return rc;
    if ((rc = need_layout_rank(c, 0, b)) || (rc = need_numeric(c, 0)))
        return rc;
    /* NCHW<b>c: [N, C/b, H, W, b] -> [N, C/b, OH, OW, b] (docs/layouts.md) */
    tth_ttype t = *ARG(c, 0);
    t.shape[2] = a.size[0];
    t.shape[3] = a.size[1];
    set_out(c, &t);
    return 0;
}

/* image.grid_sample: x float [N, C, d1..dr], grid float [N, D1..Dr, r] -> x's dtype [N, C, D1..Dr] */
static int rel_grid_sample(relctx *c)
{
    static const char *const methods[] = {"nearest", "linear", "cubic", NULL};
    static const char *const pads[] = {"zeros", "border", "reflection", NULL};
    const char *method, *pad;
    int ac, rc;
    if ((rc = attr_choice(c, "method", "linear", methods, &method)) ||
        (rc = attr_choice(c, "padding_mode", "zeros", pads, &pad)) ||
        (rc = attr_bool(c, "align_corners", 0, 0, &ac)) || (rc = need_float(c, 0)) || (rc = need_float(c, 1)))
        return rc;
    const tth_ttype *x = ARG(c, 0), *g = ARG(c, 1);
    if (x->rank < 3)
        return rel_fail(c, "x needs a batch, a channel and at least one spatial axis");
    if (g->rank != x->rank || g->shape[0] != x->shape[0] || g->shape[g->rank - 1] != x->rank - 2)
        return rel_fail(c, "grid must be [N, D1..Dr, r] with x's N and r = %d", x->rank - 2);
    tth_ttype t = *x;
    for (int32_t i = 1; i + 1 < g->rank; i++)
        t.shape[i + 1] = g->shape[i];
    set_out(c, &t);
    return 0;
}

/* ---- quantized ---- */

static int is_quant_dtype(tth_dtype t)
{
    return t == TTH_I8 || t == TTH_U8 || t == TTH_I16 || t == TTH_U16 || t == TTH_I32;
}

/* A scale (float) and zero point (integer of zp_dtype, or any integer if INVALID) that are
 * either scalars or per-axis vectors along `axis` of x. */
static int check_qparams(relctx *c, size_t si, size_t zi, const tth_ttype *x, int64_t axis, tth_dtype zp_dtype)
{
    const tth_ttype *s = ARG(c, si), *z = ARG(c, zi);
    int rc;
    if ((rc = need_float(c, si)))
        return rc;
    if (tth_dtype_is_float(z->dtype) || z->dtype == TTH_BOOL)
        return rel_fail(c, "zero point (argument %zu) must be an integer tensor, got %s", zi,
                        tth_dtype_name(z->dtype));
    if (zp_dtype != TTH_DTYPE_INVALID && z->dtype != zp_dtype)
        return rel_fail(c, "zero point (argument %zu) must be %s, got %s", zi, tth_dtype_name(zp_dtype),
                        tth_dtype_name(z->dtype));
    for (size_t k = 0; k < 2; k++) {
        size_t i = k ? zi : si;
        const tth_ttype *p = k ? z : s;
        if (p->rank == 0 || (p->rank == 1 && p->shape[0] == 1))
            continue;
        if (p->rank != 1)
            return rel_fail(c, "argument %zu must be a scalar or a vector (per-axis), got rank %d", i, p->rank);
        int64_t ax;
        if ((rc = norm_axis(c, "axis", axis, x->rank, &ax)))
            return rc;
        if (p->shape[0] != x->shape[ax])
            return rel_fail(c, "per-axis argument %zu has %lld elements but axis %lld of the input has %lld", i,
                            (long long)p->shape[0], (long long)ax, (long long)x->shape[ax]);
    }
    if (tth_ttype_numel(z) != 1 && tth_ttype_numel(s) != tth_ttype_numel(z))
        return rel_fail(c, "scale (argument %zu) and zero point (argument %zu) differ in size", si, zi);
    return 0;
}

static int rel_quantize(relctx *c)
{
    int64_t axis;
    tth_dtype dt;
    int rc;
    if ((rc = attr_int(c, "axis", 0, 1, &axis)) ||
        (rc = attr_dtype(c, "out_dtype", 0, ARG(c, 2)->dtype, &dt)))
        return rc;
    if (!is_quant_dtype(dt))
        return attr_fail(c, "out_dtype must be int8, uint8, int16, uint16 or int32, got %s", tth_dtype_name(dt));
    if ((rc = need_float(c, 0)) || (rc = check_qparams(c, 1, 2, ARG(c, 0), axis, dt)))
        return rc;
    tth_ttype t = *ARG(c, 0);
    t.dtype = dt;
    set_out(c, &t);
    return 0;
}

static int rel_dequantize(relctx *c)
{
    int64_t axis;
    int rc;
    if ((rc = attr_int(c, "axis", 0, 1, &axis)))
        return rc;
    if (!is_quant_dtype(ARG(c, 0)->dtype))
        return rel_fail(c, "x must be a quantized integer tensor, got %s", tth_dtype_name(ARG(c, 0)->dtype));
    if ((rc = check_qparams(c, 1, 2, ARG(c, 0), axis, ARG(c, 0)->dtype)))
        return rc;
    tth_ttype t = *ARG(c, 0);
    t.dtype = TTH_F32;
    set_out(c, &t);
    return 0;
}

static int need_scalar(relctx *c, size_t i, const char *what)
{
    const tth_ttype *t = ARG(c, i);
    if (!(t->rank == 0 || (t->rank == 1 && t->shape[0] == 1)))
        return rel_fail(c, "%s (argument %zu) must be a scalar", what, i);
    return 0;
}

static int need_q8(relctx *c, size_t i)
{
    tth_dtype t = ARG(c, i)->dtype;
    if (t != TTH_I8 && t != TTH_U8 && t != TTH_I16)
        return rel_fail(c, "argument %zu must be int8, uint8 or int16, got %s", i, tth_dtype_name(t));
    return 0;
}

/* qnn.conv2d(x, w, x_zp scalar, w_zp scalar or per output channel) -> int32; x and the result
 * NCHW or blocked (data_layout, out_layout) as nn.conv2d's */
static int rel_qnn_conv2d(relctx *c)
{
    tth_window_attrs a;
    tth_ttype t;
    int rc;
    if ((rc = read_conv_attrs(c, &a, 0)) || (rc = need_q8(c, 0)) || (rc = need_q8(c, 1)) ||
        (rc = conv2d_layout_shape(c, &a, &t)) || (rc = need_same_dtype(c, 0, 2)) || (rc = need_same_dtype(c, 1, 3)) ||
        (rc = need_scalar(c, 2, "x_zero_point")))
        return rc;
    int64_t O = t.rank == 5 ? t.shape[1] * t.shape[4] : t.shape[1];
    const tth_ttype *wz = ARG(c, 3);
    if (!(wz->rank == 0 || (wz->rank == 1 && (wz->shape[0] == 1 || wz->shape[0] == O))))
        return rel_fail(c, "w_zero_point must be a scalar or have %lld elements (one per output channel)",
                        (long long)O);
    t.dtype = TTH_I32;
    set_out(c, &t);
    return 0;
}

/* qnn.matmul(a, b, a_zp, b_zp) -> int32; a_zp scalar or per row of a, b_zp scalar or per column. */
static int rel_qnn_matmul(relctx *c)
{
    tth_ttype t;
    int rc;
    if ((rc = need_q8(c, 0)) || (rc = need_q8(c, 1)) || (rc = need_same_dtype(c, 0, 2)) ||
        (rc = need_same_dtype(c, 1, 3)) || (rc = matmul_shape(c, ARG(c, 0), ARG(c, 1), TTH_I32, &t)))
        return rc;
    const tth_ttype *a = ARG(c, 0), *b = ARG(c, 1), *az = ARG(c, 2), *bz = ARG(c, 3);
    int64_t rows = a->rank >= 2 ? a->shape[a->rank - 2] : 1, cols = b->rank >= 2 ? b->shape[b->rank - 1] : 1;
    if (!(az->rank == 0 || (az->rank == 1 && (az->shape[0] == 1 || az->shape[0] == rows))))
        return rel_fail(c, "a_zero_point must be a scalar or have %lld elements (one per row of a)", (long long)rows);
    if (!(bz->rank == 0 || (bz->rank == 1 && (bz->shape[0] == 1 || bz->shape[0] == cols))))
        return rel_fail(c, "b_zero_point must be a scalar or have %lld elements (one per column of b)",
                        (long long)cols);
    set_out(c, &t);
    return 0;
}

/* qnn.requantize(x int32, in_scale, in_zp, out_scale, out_zp) {axis, out_dtype}. */
static int rel_requantize(relctx *c)
{
    int64_t axis;
    tth_dtype dt;
    int rc;
    if ((rc = attr_int(c, "axis", 0, 1, &axis)) || (rc = attr_dtype(c, "out_dtype", 1, TTH_DTYPE_INVALID, &dt)))
        return rc;
    if (!is_quant_dtype(dt))
        return attr_fail(c, "out_dtype must be int8, uint8, int16, uint16 or int32, got %s", tth_dtype_name(dt));
    if (ARG(c, 0)->dtype != TTH_I32)
        return rel_fail(c, "x must be int32, got %s", tth_dtype_name(ARG(c, 0)->dtype));
    /* layout NCHW<b>c: x is [N, C/b, H, W, b] and the per-axis parameters (axis 1) are per
     * channel, channel c at [n, c / b, h, w, c % b] (docs/int8.md, "Blocked channels") */
    int64_t b;
    if ((rc = attr_layout(c, "layout", &b)))
        return rc;
    const tth_ttype *x = ARG(c, 0);
    tth_ttype view;
    if (b) {
        if (x->rank != 5 || x->shape[4] != b)
            return rel_fail(c, "x must have rank 5 with %lld channels innermost (layout NCHW%lldc)", (long long)b,
                            (long long)b);
        if (axis != 1)
            return attr_fail(c, "axis must be 1 (the channels) with layout NCHW%lldc, got %lld", (long long)b,
                             (long long)axis);
        view = (tth_ttype){.dtype = x->dtype, .rank = 4, .shape = {x->shape[0], x->shape[1] * b, x->shape[2], x->shape[3]}};
        x = &view;
        axis = 1;
    }
    if ((rc = check_qparams(c, 1, 2, x, axis, TTH_DTYPE_INVALID)) || (rc = need_float(c, 3)) ||
        (rc = need_scalar(c, 3, "out_scale")) || (rc = need_scalar(c, 4, "out_zero_point")))
        return rc;
    if (tth_dtype_is_float(ARG(c, 4)->dtype) || ARG(c, 4)->dtype == TTH_BOOL)
        return rel_fail(c, "out_zero_point must be an integer tensor, got %s", tth_dtype_name(ARG(c, 4)->dtype));
    tth_ttype t = *ARG(c, 0);
    t.dtype = dt;
    set_out(c, &t);
    return 0;
}

/* ---- the relation of each op (a missing one is a compile error) ---- */

#define rel_ADD rel_binary_arith
#define rel_SUBTRACT rel_binary_arith
#define rel_MULTIPLY rel_binary_arith
#define rel_DIVIDE rel_binary_arith
#define rel_POWER rel_binary_arith
#define rel_MAXIMUM rel_binary_arith
#define rel_MINIMUM rel_binary_arith
#define rel_MOD rel_mod
#define rel_PRELU rel_prelu
#define rel_EQUAL rel_compare
#define rel_LESS rel_compare
#define rel_LESS_EQUAL rel_compare
#define rel_GREATER rel_compare
#define rel_GREATER_EQUAL rel_compare
#define rel_LOGICAL_AND rel_logical
#define rel_LOGICAL_OR rel_logical
#define rel_LOGICAL_XOR rel_logical
#define rel_WHERE rel_where
#define rel_NEGATIVE rel_unary_numeric
#define rel_ABS rel_unary_numeric
#define rel_SQRT rel_unary_float
#define rel_RECIPROCAL rel_unary_float
#define rel_EXP rel_unary_float
#define rel_LOG rel_unary_float
#define rel_SIN rel_unary_float
#define rel_COS rel_unary_float
#define rel_TANH rel_unary_float
#define rel_SIGMOID rel_unary_float
#define rel_ERF rel_unary_float
#define rel_FLOOR rel_unary_float
#define rel_CEIL rel_unary_float
#define rel_ROUND rel_unary_float
#define rel_SIGN rel_unary_numeric
#define rel_LOGICAL_NOT rel_logical_not
#define rel_RELU rel_unary_numeric
#define rel_LEAKY_RELU rel_leaky_relu
#define rel_ELU rel_elu
#define rel_SELU rel_selu
#define rel_THRESHOLDED_RELU rel_thresholded_relu
#define rel_SOFTPLUS rel_unary_float
#define rel_SOFTSIGN rel_unary_float
#define rel_HARD_SIGMOID rel_hard_sigmoid
#define rel_HARD_SWISH rel_unary_float
#define rel_CLIP rel_clip
#define rel_CAST rel_cast
#define rel_CONV2D rel_conv2d
#define rel_CONV2D_TRANSPOSE rel_conv2d_transpose
#define rel_MATMUL rel_matmul
#define rel_MAX_POOL2D rel_pool2d
#define rel_AVG_POOL2D rel_pool2d
#define rel_GLOBAL_AVG_POOL2D rel_global_pool2d
#define rel_GLOBAL_MAX_POOL2D rel_global_pool2d
#define rel_BATCH_NORM rel_batch_norm
#define rel_SOFTMAX rel_softmax
#define rel_LOG_SOFTMAX rel_softmax
#define rel_PAD rel_pad
#define rel_RESHAPE rel_reshape
#define rel_TRANSPOSE rel_transpose
#define rel_BROADCAST_TO rel_broadcast_to
#define rel_CONCATENATE rel_concatenate
#define rel_SPLIT rel_split
#define rel_STRIDED_SLICE rel_strided_slice
#define rel_TAKE rel_take
#define rel_SUM rel_reduce
#define rel_MEAN rel_reduce
#define rel_MAX rel_reduce
#define rel_MIN rel_reduce
#define rel_PROD rel_reduce
#define rel_ARGMAX rel_argreduce
#define rel_ARGMIN rel_argreduce
#define rel_RESIZE2D rel_resize2d
#define rel_QUANTIZE rel_quantize
#define rel_DEQUANTIZE rel_dequantize
#define rel_QNN_CONV2D rel_qnn_conv2d
#define rel_QNN_MATMUL rel_qnn_matmul
#define rel_REQUANTIZE rel_requantize
#define rel_ASIN rel_unary_float
#define rel_ACOS rel_unary_float
#define rel_ATAN rel_unary_float
#define rel_ASINH rel_unary_float
#define rel_ACOSH rel_unary_float
#define rel_ATANH rel_unary_float
#define rel_MAX_POOL2D_ARGMAX rel_max_pool2d_argmax
#define rel_DET rel_det
#define rel_ROI_ALIGN rel_roi_align
#define rel_GRID_SAMPLE rel_grid_sample
#define rel_LAYER_NORM rel_layer_norm
#define rel_ATTENTION rel_attention

typedef int (*rel_fn)(relctx *c);

static const rel_fn rel_table[TTH_OP_COUNT_] = {
#define TTH__OP_REL(e, n, mn, mx, d) [TTH_OP_##e] = rel_##e,
    TTH_RELAY_OPS(TTH__OP_REL)
#undef TTH__OP_REL
};

/* ---- entry points ---- */

int tth__relay_infer_fill(tth_op op, const tth_rtype *const *arg_types, size_t nargs, json_t *fill,
                          const json_t *attrs, tth_rtype *out, tth_arena *arena, const char *location,
                          tth_diag *diag)
{
    if (!op_valid(op))
        return tth_diag_set(diag, TTH_EUNKNOWN, location, "unknown operator number %d", (int)op);
    relctx c = {.op = op, .args = arg_types, .nargs = nargs, .attrs = attrs, .fill = fill, .out = out,
                .arena = arena, .diag = diag, .location = location ? location : tth_op_name(op)};
    const op_info *oi = &op_table[op];
    if ((int)nargs < oi->min_args || (oi->max_args >= 0 && (int)nargs > oi->max_args)) {
        if (oi->min_args == oi->max_args)
            return tth_diag_set(diag, TTH_ETYPE, c.location, "%s: expected %d argument%s, got %zu", oi->name,
                                oi->min_args, oi->min_args == 1 ? "" : "s", nargs);
        if (oi->max_args < 0)
            return tth_diag_set(diag, TTH_ETYPE, c.location, "%s: expected at least %d argument%s, got %zu",
                                oi->name, oi->min_args, oi->min_args == 1 ? "" : "s", nargs);
        return tth_diag_set(diag, TTH_ETYPE, c.location, "%s: expected %d to %d arguments, got %zu", oi->name,
                            oi->min_args, oi->max_args, nargs);
    }
    for (size_t i = 0; i < nargs; i++) {
        if (!arg_types[i])
            return tth_diag_set(diag, TTH_EINVAL, c.location, "%s: argument %zu is missing", oi->name, i);
        if (arg_types[i]->nfields >= 0)
            return rel_fail(&c, "argument %zu is a tuple, expected a tensor", i);
    }
    if (attrs && !json_is_object(attrs))
        return tth_diag_set(diag, TTH_EINVAL, c.location, "%s: attributes must be a JSON object", oi->name);
    int rc = rel_table[op](&c);
    if (rc)
        return rc;
    /* Every key must be one the relation knows. */
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)attrs, key, val) {
        size_t i = 0;
        while (i < c.nread && strcmp(c.read[i], key) != 0)
            i++;
        if (i < c.nread)
            continue;
        tth_diag_set(diag, TTH_EINVAL, c.location, "%s: unknown attribute '%s'", oi->name, key);
        if (c.nread == 0) {
            tth_diag_hint(diag, "%s takes no attributes", oi->name);
        } else {
            char list[200];
            size_t n = 0;
            list[0] = '\0';
            for (size_t k = 0; k < c.nread && n < sizeof list; k++)
                n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", k ? ", " : "", c.read[k]);
            tth_diag_hint(diag, "known attributes: %s", list);
        }
        return TTH_EINVAL;
    }
    return 0;
}

int64_t tth_layout_block(const json_t *v)
{
    if (!v)
        return 0;
    const char *s = json_string_value(v);
    if (!s || strncmp(s, "NCHW", 4) != 0)
        return -1;
    if (!s[4])
        return 0;
    char *end;
    if (s[4] < '1' || s[4] > '9')
        return -1;
    long b = strtol(s + 4, &end, 10);
    return strcmp(end, "c") == 0 && b >= 2 && b <= TTH_LAYOUT_MAX_BLOCK ? b : -1;
}

int tth_window_attrs_of(tth_op op, const json_t *attrs, tth_window_attrs *a, tth_diag *diag)
{
    tth_diag local;
    relctx c;
    attrs_ctx(&c, op, attrs, diag, &local);
    switch (op) {
    case TTH_OP_CONV2D:
    case TTH_OP_QNN_CONV2D:
    case TTH_OP_CONV2D_TRANSPOSE:
        return read_conv_attrs(&c, a, op == TTH_OP_CONV2D_TRANSPOSE);
    case TTH_OP_MAX_POOL2D:
    case TTH_OP_MAX_POOL2D_ARGMAX:
    case TTH_OP_AVG_POOL2D:
        return read_pool_attrs(&c, a);
    default:
        memset(a, 0, sizeof *a);
        return tth_diag_set(c.diag, TTH_EINVAL, c.location, "%s has no window attributes", tth_op_name(op));
    }
}

int tth_relay_infer(tth_op op, const tth_rtype *const *arg_types, size_t nargs, const json_t *attrs,
                    tth_rtype *out, tth_arena *arena, tth_diag *diag)
{
    return tth__relay_infer_fill(op, arg_types, nargs, NULL, attrs, out, arena, NULL, diag);
}
