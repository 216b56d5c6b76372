/* lower.c: the driver of the default lowering (one primitive Relay function → one PrimFunc),
 * the op table, and the helpers every operator family uses.
 *
 * tth_lower_primitive, in order:
 *   1. topo-sort the body; count each node's uses;
 *   2. params → PARAM buffers, constants → CONST buffers, results → PARAM buffers (after params);
 *   3. choose what gets a buffer: every stage op (non-pointwise), every result, every pointwise
 *      node used by a stage op, or used several times when recomputing it per use is not cheap;
 *      the other pointwise nodes are inlined;
 *   4. epilogue fusion: an anchor whose only users form the inline tree of one materialised
 *      pointwise node P, along paths that keep the anchor's shape, stores through P's expression
 *      straight into P's buffer (and runs at P's place in the order);
 *   5. emit the stages in topo order, fold LETs of constants (lower_simplify.c), wrap the LOCAL
 *      buffers in ALLOCATEs, add the PrimFunc. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <float.h>

#include "lower_internal.h"

/* ---------------------------------------------------------------- op table (as data) ---- */

static const lw_op_impl lw_ops[TTH_OP_COUNT_] = {
    [TTH_OP_ADD] = {lw_ew_binary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_SUBTRACT] = {lw_ew_binary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_MULTIPLY] = {lw_ew_binary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_DIVIDE] = {lw_ew_binary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_POWER] = {lw_ew_binary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_MAXIMUM] = {lw_ew_binary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_MINIMUM] = {lw_ew_binary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_MOD] = {lw_ew_binary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_PRELU] = {lw_ew_binary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_EQUAL] = {lw_ew_binary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_LESS] = {lw_ew_binary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_LESS_EQUAL] = {lw_ew_binary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_GREATER] = {lw_ew_binary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_GREATER_EQUAL] = {lw_ew_binary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_LOGICAL_AND] = {lw_ew_binary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_LOGICAL_OR] = {lw_ew_binary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_LOGICAL_XOR] = {lw_ew_binary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_WHERE] = {lw_ew_where, NULL, lw_ew_check, 0, 1},
    [TTH_OP_NEGATIVE] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_ABS] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_SQRT] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_RECIPROCAL] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_EXP] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_LOG] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_SIN] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_COS] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_TANH] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_ASIN] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_ACOS] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_ATAN] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_ASINH] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_ACOSH] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_ATANH] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_SIGMOID] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_ERF] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_FLOOR] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_CEIL] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_ROUND] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_SIGN] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_LOGICAL_NOT] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_RELU] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_LEAKY_RELU] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_ELU] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_SELU] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_THRESHOLDED_RELU] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_SOFTPLUS] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_SOFTSIGN] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_HARD_SIGMOID] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_HARD_SWISH] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_CLIP] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_CAST] = {lw_ew_unary, NULL, lw_ew_check, 0, 1},
    [TTH_OP_CONV2D] = {NULL, lw_conv2d, lw_conv_check, 0, 0},
    [TTH_OP_CONV2D_TRANSPOSE] = {NULL, lw_conv2d_transpose, lw_conv_check, 0, 0},
    [TTH_OP_MATMUL] = {NULL, lw_matmul, lw_matmul_check, 0, 0},
    [TTH_OP_MAX_POOL2D] = {NULL, lw_pool2d, lw_pool_check, 0, 0},
    [TTH_OP_AVG_POOL2D] = {NULL, lw_pool2d, lw_pool_check, 0, 0},
    [TTH_OP_MAX_POOL2D_ARGMAX] = {NULL, lw_max_pool2d_argmax, lw_pool_check, 0, 0},
    [TTH_OP_GLOBAL_AVG_POOL2D] = {NULL, lw_global_pool2d, lw_pool_check, 0, 0},
    [TTH_OP_GLOBAL_MAX_POOL2D] = {NULL, lw_global_pool2d, lw_pool_check, 0, 0},
    [TTH_OP_BATCH_NORM] = {lw_ew_batch_norm, NULL, lw_ew_check, 1, 1},
    [TTH_OP_SOFTMAX] = {NULL, lw_softmax, lw_softmax_check, 0, 0},
    [TTH_OP_LOG_SOFTMAX] = {NULL, lw_softmax, lw_softmax_check, 0, 0},
    [TTH_OP_PAD] = {NULL, lw_pad, lw_shape_check, 0, 1},
    [TTH_OP_RESHAPE] = {NULL, lw_reshape, lw_shape_check, 0, 1},
    [TTH_OP_TRANSPOSE] = {NULL, lw_transpose, lw_shape_check, 0, 1},
    [TTH_OP_BROADCAST_TO] = {NULL, lw_broadcast_to, lw_shape_check, 0, 1},
    [TTH_OP_CONCATENATE] = {NULL, lw_concatenate, lw_shape_check, 0, 1},
    [TTH_OP_SPLIT] = {NULL, lw_split, lw_shape_check, 0, 1},
    [TTH_OP_STRIDED_SLICE] = {NULL, lw_strided_slice, lw_shape_check, 0, 1},
    [TTH_OP_TAKE] = {NULL, lw_take, lw_shape_check, 0, 1},
    [TTH_OP_SUM] = {NULL, lw_reduce, lw_reduce_check, 0, 0},
    [TTH_OP_MEAN] = {NULL, lw_reduce, lw_reduce_check, 0, 0},
    [TTH_OP_MAX] = {NULL, lw_reduce, lw_reduce_check, 0, 0},
    [TTH_OP_MIN] = {NULL, lw_reduce, lw_reduce_check, 0, 0},
    [TTH_OP_PROD] = {NULL, lw_reduce, lw_reduce_check, 0, 0},
    [TTH_OP_ARGMAX] = {NULL, lw_argreduce, lw_reduce_check, 0, 0},
    [TTH_OP_ARGMIN] = {NULL, lw_argreduce, lw_reduce_check, 0, 0},
    [TTH_OP_RESIZE2D] = {NULL, lw_resize2d, lw_resize_check, 0, 0},
    [TTH_OP_QUANTIZE] = {lw_quantize, NULL, lw_quant_check, 1, 0},
    [TTH_OP_DEQUANTIZE] = {lw_dequantize, NULL, lw_quant_check, 1, 0},
    [TTH_OP_QNN_CONV2D] = {NULL, lw_conv2d, lw_conv_check, 0, 0},
    [TTH_OP_QNN_MATMUL] = {NULL, lw_matmul, lw_matmul_check, 0, 0},
    [TTH_OP_DET] = {NULL, lw_det, lw_det_check, 0, 0},
    [TTH_OP_ROI_ALIGN] = {NULL, lw_roi_align, lw_roi_align_check, 0, 0},
    [TTH_OP_GRID_SAMPLE] = {NULL, lw_grid_sample, lw_grid_sample_check, 0, 0},
    [TTH_OP_REQUANTIZE] = {lw_requantize, NULL, lw_quant_check, 1, 0},
    [TTH_OP_LAYER_NORM] = {NULL, lw_layer_norm, lw_layer_norm_check, 0, 0},
    [TTH_OP_ATTENTION] = {NULL, lw_attention, lw_attention_check, 0, 0},
};

const lw_op_impl *lw_op_lookup(tth_op op)
{
    if ((int)op <= 0 || op >= TTH_OP_COUNT_)
        return NULL;
    if (!lw_ops[op].value && !lw_ops[op].stage)
        return NULL;
    return &lw_ops[op];
}

/* ------------------------------------------------------------------------ small helpers ---- */

const tth_ttype *lw_ty(const tth_rexpr *e)
{
    return e->type.nfields < 0 ? &e->type.tensor : NULL;
}

const tth_rexpr *lw_arg(const tth_rexpr *call, size_t i)
{
    return call->u.call.args[i];
}

int64_t lw_numel(const int64_t *shape, int rank)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    return n;
}

int lw_window_attrs(const tth_rexpr *call, tth_window_attrs *a, char *why, size_t len)
{
    tth_diag d;
    if (tth_window_attrs_of(call->u.call.op, call->u.call.attrs, a, &d) == 0)
        return 0;
    snprintf(why, len, "%s", d.message);
    return -1;
}

int lw_check_call(lw_ctx *c, const tth_rexpr *call, lw_check_fn check)
{
    char why[256];
    if (check(call, why, sizeof why))
        return 0;
    return lw_fail(c, TTH_EUNSUPPORTED, call, "%s", why), -1;
}

int lw_float_only(const char *op, tth_dtype t, char *why, size_t len)
{
    if (tth_dtype_is_float(t))
        return 1;
    snprintf(why, len, "%s: %s is not supported (floating point only)", op, tth_dtype_name(t));
    return 0;
}

int lw_fail(lw_ctx *c, int code, const tth_rexpr *call, const char *fmt, ...)
{
    char loc[TTH_DIAG_LOCATION_MAX];
    const char *where = NULL;
    if (call) {
        const char *op = call->kind == TTH_REXPR_CALL && call->u.call.op ? tth_op_name(call->u.call.op) : "expr";
        if (call->span)
            snprintf(loc, sizeof loc, "node '%s' (%s) in '%s'", call->span, op, c->fname);
        else
            snprintf(loc, sizeof loc, "%s in '%s'", op, c->fname);
        where = loc;
    }
    va_list ap;
    va_start(ap, fmt);
    tth_diag_vset(c->diag, code, where, fmt, ap);
    va_end(ap);
    return code;
}

static const json_t *lw_attr(const tth_rexpr *call, const char *key)
{
    if (call->kind != TTH_REXPR_CALL || !call->u.call.attrs)
        return NULL;
    const json_t *v = json_object_get(call->u.call.attrs, key);
    return json_is_null(v) ? NULL : v;
}

int lw_attr_has(const tth_rexpr *call, const char *key)
{
    return lw_attr(call, key) != NULL;
}

int64_t lw_attr_int(const tth_rexpr *call, const char *key, int64_t def)
{
    const json_t *v = lw_attr(call, key);
    if (json_is_integer(v))
        return (int64_t)json_integer_value(v);
    if (json_is_boolean(v))
        return json_is_true(v);
    return def; /* a real is not an integer: the relations never let one through */
}

double lw_attr_float(const tth_rexpr *call, const char *key, double def)
{
    const json_t *v = lw_attr(call, key);
    if (json_is_number(v))
        return json_number_value(v);
    return def;
}

const char *lw_attr_str(const tth_rexpr *call, const char *key, const char *def)
{
    const json_t *v = lw_attr(call, key);
    return json_is_string(v) ? json_string_value(v) : def;
}

int lw_attr_ints(const tth_rexpr *call, const char *key, int64_t *out, int max)
{
    const json_t *v = lw_attr(call, key);
    if (!json_is_array(v))
        return -1;
    size_t n = json_array_size(v);
    if (n > (size_t)max)
        return -1; /* more than the caller holds: as unusable as no array */
    for (size_t i = 0; i < n; i++) {
        const json_t *x = json_array_get(v, i);
        if (!json_is_integer(x))
            return -1;
        out[i] = (int64_t)json_integer_value(x);
    }
    return (int)n;
}

tth_texpr *lw_i(lw_ctx *c, int64_t v)
{
    return tth_tir_i64(c->m, v);
}

tth_texpr *lw_imm(lw_ctx *c, tth_dtype t, double v)
{
    if (tth_dtype_is_float(t))
        return tth_tir_float(c->m, t, v);
    return tth_tir_int(c->m, t, (int64_t)v);
}

tth_texpr *lw_bin(lw_ctx *c, tth_tir_binop op, tth_texpr *a, tth_texpr *b)
{
    return tth_tir_bin(c->m, op, a, b);
}

tth_texpr *lw_add(lw_ctx *c, tth_texpr *a, tth_texpr *b) { return tth_tir_bin(c->m, TTH_TBIN_ADD, a, b); }
tth_texpr *lw_sub(lw_ctx *c, tth_texpr *a, tth_texpr *b) { return tth_tir_bin(c->m, TTH_TBIN_SUB, a, b); }
tth_texpr *lw_mul(lw_ctx *c, tth_texpr *a, tth_texpr *b) { return tth_tir_bin(c->m, TTH_TBIN_MUL, a, b); }

tth_texpr *lw_cast(lw_ctx *c, tth_dtype t, tth_texpr *v)
{
    if (v->dtype == t)
        return v;
    if (v->kind == TTH_TEXPR_INT && !tth_dtype_is_float(t))
        return tth_tir_int(c->m, t, v->u.i);
    if (v->kind == TTH_TEXPR_INT && tth_dtype_is_float(t))
        return tth_tir_float(c->m, t, (double)v->u.i);
    if (v->kind == TTH_TEXPR_FLOAT && tth_dtype_is_float(t))
        return tth_tir_float(c->m, t, v->u.f);
    return tth_tir_cast(c->m, t, v);
}

tth_tvar *lw_var(lw_ctx *c, const char *prefix, tth_dtype t)
{
    char name[64];
    snprintf(name, sizeof name, "%s%u", prefix, c->nvars++);
    return tth_tir_var(c->m, name, t);
}

tth_tvar *lw_var_vec(lw_ctx *c, const char *prefix, tth_dtype t, int lanes)
{
    char name[64];
    snprintf(name, sizeof name, "%s%u", prefix, c->nvars++);
    tth_tvar *v = lanes > 1 ? tth_tir_var_vec(c->m, name, t, lanes) : tth_tir_var(c->m, name, t);
    if (!v)
        lw_fail(c, TTH_ENOMEM, NULL, "out of memory");
    return v;
}

tth_texpr *lw_ref(lw_ctx *c, tth_tvar *v)
{
    return tth_tir_ref(c->m, v);
}

double lw_dtype_lowest(tth_dtype t)
{
    switch (t) {
    case TTH_F32: return -FLT_MAX;
    case TTH_F64: return -DBL_MAX;
    case TTH_F16: return -65504.0;
    case TTH_BF16: return -3.3895313892515355e38; /* 0xff7f */
    case TTH_I8: return -128;
    case TTH_I16: return -32768;
    case TTH_I32: return -2147483648.0;
    case TTH_I64: return -9223372036854775807.0 - 1.0;
    default: return 0;
    }
}

double lw_dtype_highest(tth_dtype t)
{
    switch (t) {
    case TTH_F32: return FLT_MAX;
    case TTH_F64: return DBL_MAX;
    case TTH_F16: return 65504.0;
    case TTH_BF16: return 3.3895313892515355e38; /* 0x7f7f */
    case TTH_I8: return 127;
    case TTH_U8: return 255;
    case TTH_I16: return 32767;
    case TTH_U16: return 65535;
    case TTH_I32: return 2147483647.0;
    case TTH_U32: return 4294967295.0;
    case TTH_I64: return 9223372036854775807.0;
    case TTH_U64: return 18446744073709551615.0;
    case TTH_BOOL: return 1;
    default: return 0;
    }
}

int lw_append(lw_ctx *c, tth_tstmt **seq, tth_tstmt *s)
{
    if (!s)
        return 0;
    return tth_tir_seq_append(c->m, seq, s);
}

/* ------------------------------------------------------------ index arithmetic, hoisting ---- */

static int lw_expr_uses(const tth_texpr *e, const tth_tvar *const *vars, int nvars, int *other)
{
    /* 1 when e uses one of vars; *other set when it uses a variable not among them (a load or
     * an extern call counts as "other": its value is not loop-invariant index arithmetic) */
    if (!e)
        return 0;
    if (e->kind == TTH_TEXPR_VAR) {
        for (int i = 0; i < nvars; i++)
            if (vars[i] == e->u.var)
                return 1;
        *other = 1;
        return 0;
    }
    if (e->kind == TTH_TEXPR_LOAD || e->kind == TTH_TEXPR_ADDRESS_OF || e->kind == TTH_TEXPR_CALL_EXTERN)
        *other = 1;
    int uses = 0;
    tth_texpr *scratch[3], *const *kids;
    size_t n = tth_tir_expr_children(e, scratch, &kids);
    for (size_t i = 0; i < n; i++)
        uses |= lw_expr_uses(kids[i], vars, nvars, other);
    return uses;
}

static int lw_expr_equal(const tth_texpr *a, const tth_texpr *b)
{
    if (a == b)
        return 1;
    if (!a || !b || a->kind != b->kind || a->dtype != b->dtype)
        return 0;
    switch (a->kind) {
    case TTH_TEXPR_INT: return a->u.i == b->u.i;
    case TTH_TEXPR_FLOAT: return a->u.f == b->u.f;
    case TTH_TEXPR_VAR: return a->u.var == b->u.var;
    case TTH_TEXPR_BINARY:
        return a->u.bin.op == b->u.bin.op && lw_expr_equal(a->u.bin.a, b->u.bin.a) &&
               lw_expr_equal(a->u.bin.b, b->u.bin.b);
    case TTH_TEXPR_UNARY: return a->u.un.op == b->u.un.op && lw_expr_equal(a->u.un.a, b->u.un.a);
    default: return 0;
    }
}

/* The part of a flat index that does not depend on the innermost loop, as a LET variable. */
static tth_texpr *lw_hoist(lw_ctx *c, tth_texpr *e)
{
    if (!c->hoist_on || e->kind == TTH_TEXPR_INT || e->kind == TTH_TEXPR_VAR)
        return e;
    int other = 0;
    lw_expr_uses(e, (const tth_tvar *const *)c->hoist_allowed, c->nhoist_allowed, &other);
    if (other)
        return e;
    for (int i = 0; i < c->nhoist; i++)
        if (lw_expr_equal(c->hoist_expr[i], e))
            return lw_ref(c, c->hoist_var[i]);
    if (c->nhoist >= LW_MAX_HOIST)
        return e;
    tth_tvar *v = lw_var(c, "rb", TTH_I64);
    if (!v)
        return e;
    c->hoist_expr[c->nhoist] = e;
    c->hoist_var[c->nhoist] = v;
    c->nhoist++;
    return lw_ref(c, v);
}

/* x when hi is x / n and lo is x % n (truncating or floor, the same kind both) with n the size
 * of lo's axis: then hi * (n * s) + lo * s = x * s, whatever x's sign. */
static tth_texpr *lw_split_of(const tth_texpr *hi, const tth_texpr *lo, int64_t n)
{
    if (!hi || !lo || hi->kind != TTH_TEXPR_BINARY || lo->kind != TTH_TEXPR_BINARY || hi->lanes > 1 || lo->lanes > 1)
        return NULL;
    int pair = (hi->u.bin.op == TTH_TBIN_DIV && lo->u.bin.op == TTH_TBIN_MOD) ||
               (hi->u.bin.op == TTH_TBIN_FLOORDIV && lo->u.bin.op == TTH_TBIN_FLOORMOD);
    const tth_texpr *hn = hi->u.bin.b, *ln = lo->u.bin.b;
    if (!pair || hn->kind != TTH_TEXPR_INT || ln->kind != TTH_TEXPR_INT || hn->u.i != n || ln->u.i != n ||
        !lw_expr_equal(hi->u.bin.a, lo->u.bin.a))
        return NULL;
    return lo->u.bin.a;
}

/* The flat index of idx in a row-major buffer of shape: sum idx[d] * stride[d], the part that
 * does not use the innermost loop hoisted (lw_hoist). An axis pair indexed (x / n, x % n), n the
 * inner axis's size (a flat run of pixels as row and column), is the one term x * stride. */
tth_texpr *lw_flat(lw_ctx *c, const int64_t *shape, int rank, tth_texpr *const *idx)
{
    tth_texpr *outer = lw_i(c, 0), *inner = lw_i(c, 0);
    int64_t stride = 1;
    for (int d = rank - 1; d >= 0; d--) {
        tth_texpr *x = d > 0 ? lw_split_of(idx[d - 1], idx[d], shape[d]) : NULL;
        if (shape[d] != 1 || x) {
            tth_texpr *term = lw_mul(c, x ? x : idx[d], lw_i(c, stride));
            int other = 0;
            const tth_tvar *in = c->hoist_inner;
            int uses = c->hoist_on && in ? lw_expr_uses(term, &in, 1, &other) : 1;
            if (uses)
                inner = lw_add(c, inner, term);
            else
                outer = lw_add(c, outer, term);
        }
        stride *= shape[d];
        if (x)
            stride *= shape[--d];
    }
    return lw_add(c, lw_hoist(c, outer), inner);
}

tth_texpr *lw_load_at(lw_ctx *c, tth_tbuffer *b, tth_texpr *const *idx)
{
    return tth_tir_load(c->m, b, lw_flat(c, b->shape, b->rank, idx));
}

tth_tstmt *lw_store_at(lw_ctx *c, tth_tbuffer *b, tth_texpr *const *idx, tth_texpr *v)
{
    return tth_tir_store(c->m, b, lw_flat(c, b->shape, b->rank, idx), lw_cast(c, b->dtype, v));
}

void lw_bcast_idx(lw_ctx *c, const tth_ttype *out, const tth_ttype *in, tth_texpr *const *idx,
                  tth_texpr **in_idx)
{
    int off = out->rank - in->rank;
    for (int d = 0; d < in->rank; d++) {
        int od = d + off;
        if (od < 0 || in->shape[d] == 1 || !idx)
            in_idx[d] = lw_i(c, 0);
        else
            in_idx[d] = idx[od];
    }
}

/* ------------------------------------------------------------------------ node lookup ---- */

lw_node *lw_node_of(lw_ctx *c, const tth_rexpr *e)
{
    size_t mask = c->hcap - 1;
    size_t h = (e->id * 2654435761u) & mask;
    while (c->hvals[h]) {
        if (c->hkeys[h] == e->id)
            return &c->nodes[c->hvals[h] - 1];
        h = (h + 1) & mask;
    }
    return NULL;
}

static void lw_node_put(lw_ctx *c, const tth_rexpr *e, size_t i)
{
    size_t mask = c->hcap - 1;
    size_t h = (e->id * 2654435761u) & mask;
    while (c->hvals[h])
        h = (h + 1) & mask;
    c->hkeys[h] = e->id;
    c->hvals[h] = (uint32_t)i + 1;
}

tth_tbuffer *lw_buf(lw_ctx *c, const tth_rexpr *e)
{
    if (e->kind == TTH_REXPR_TUPLE_GET) {
        const tth_rexpr *t = e->u.get.tuple;
        if (t->kind == TTH_REXPR_TUPLE)
            return lw_buf(c, t->u.tuple.fields[e->u.get.index]);
        lw_node *tn = lw_node_of(c, t);
        if (tn && tn->fields)
            return tn->fields[e->u.get.index];
    }
    lw_node *n = lw_node_of(c, e);
    if (n && n->buf)
        return n->buf;
    lw_fail(c, TTH_EINTERNAL, e, "lowering: node %u has no buffer", e->id);
    return NULL;
}

tth_tbuffer *lw_local(lw_ctx *c, const char *prefix, tth_dtype t, int rank, const int64_t *shape)
{
    char name[64];
    snprintf(name, sizeof name, "%s%u", prefix, c->nbufs++);
    tth_tbuffer *b = tth_tir_buffer(c->m, name, t, rank, shape, TTH_SCOPE_LOCAL);
    if (!b)
        lw_fail(c, TTH_ENOMEM, NULL, "out of memory");
    return b;
}

tth_texpr *lw_madd(lw_ctx *c, tth_texpr *a, tth_texpr *b, tth_texpr *acc)
{
    return c->vec.fma ? tth_tir_fma(c->m, a, b, acc) : lw_add(c, lw_mul(c, a, b), acc);
}

tth_tbuffer *lw_reg_tile_of(lw_ctx *c, tth_dtype t, int64_t nvec, int vl, tth_tstmt **init)
{
    char name[32];
    int64_t n = nvec * vl;
    snprintf(name, sizeof name, "acc%u", c->nbufs++);
    tth_tbuffer *b = tth_tir_buffer(c->m, name, t, 1, &n, TTH_SCOPE_REGISTER);
    if (!b) {
        lw_fail(c, TTH_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    tth_texpr *zero = tth_tir_broadcast(c->m, lw_imm(c, t, 0), vl);
    for (int64_t a = 0; a < nvec; a++)
        if (lw_append(c, init, tth_tir_vstore(c->m, b, lw_i(c, a * vl), zero, 0)))
            return NULL;
    return b;
}

tth_tbuffer *lw_reg_tile(lw_ctx *c, int64_t nvec, int vl, tth_tstmt **init)
{
    return lw_reg_tile_of(c, TTH_F32, nvec, vl, init);
}

/* ----------------------------------------------------------------------------- values ---- */

/* float16 and bfloat16 values are computed with in float32 */
static tth_texpr *lw_widen(lw_ctx *c, tth_texpr *v)
{
    return v && (v->dtype == TTH_F16 || v->dtype == TTH_BF16) ? lw_cast(c, TTH_F32, v) : v;
}

static tth_texpr *lw_value_raw(lw_ctx *c, const tth_rexpr *e, tth_texpr *const *idx);

tth_texpr *lw_value_at(lw_ctx *c, const tth_rexpr *e, tth_texpr *const *idx)
{
    return lw_widen(c, lw_value_raw(c, e, idx));
}

static tth_texpr *lw_value_raw(lw_ctx *c, const tth_rexpr *e, tth_texpr *const *idx)
{
    if (e == c->slot_node)
        return c->slot_value;
    lw_node *n = lw_node_of(c, e);
    tth_tbuffer *b = n ? n->buf : NULL;
    if (!b && e->kind == TTH_REXPR_TUPLE_GET)
        b = lw_buf(c, e);
    if (b) {
        if (c->flat) {
            int64_t ne = tth_tbuffer_numel(b);
            return tth_tir_load(c->m, b, ne == 1 ? lw_i(c, 0) : c->flat);
        }
        return lw_load_at(c, b, idx);
    }
    if (e->kind == TTH_REXPR_CALL && e->u.call.op) {
        const lw_op_impl *impl = lw_op_lookup(e->u.call.op);
        if (impl && impl->value)
            return impl->value(c, e, idx);
    }
    lw_fail(c, TTH_EINTERNAL, e, "lowering: no value for node %u", e->id);
    return NULL;
}

tth_texpr *lw_arg_at(lw_ctx *c, const tth_rexpr *call, size_t i, tth_texpr *const *idx)
{
    const tth_rexpr *a = lw_arg(call, i);
    if (c->flat)
        return lw_value_at(c, a, NULL);
    tth_texpr *in_idx[TTH_MAX_RANK];
    const tth_ttype *at = lw_ty(a);
    if (!at) {
        lw_fail(c, TTH_EINVAL, call, "argument %zu is a tuple", i);
        return NULL;
    }
    lw_bcast_idx(c, lw_ty(call), at, idx, in_idx);
    return lw_value_at(c, a, in_idx);
}

int lw_int_const(const tth_rexpr *e)
{
    if (!e || e->kind != TTH_REXPR_CONST || !e->u.constant.value)
        return 0;
    tth_dtype d = e->u.constant.value->type.dtype;
    return d == TTH_I8 || d == TTH_U8 || d == TTH_I16 || d == TTH_I32 || d == TTH_I64;
}

tth_texpr *lw_axis_value(lw_ctx *c, const tth_rexpr *a, tth_texpr *axis_idx)
{
    const tth_ttype *t = lw_ty(a);
    tth_texpr *pi[TTH_MAX_RANK];
    if (!t) {
        lw_fail(c, TTH_EINVAL, a, "a per-axis parameter is a tuple");
        return NULL;
    }
    for (int d = 0; d < t->rank; d++)
        pi[d] = lw_i(c, 0);
    if (t->rank > 0 && t->shape[t->rank - 1] != 1)
        pi[t->rank - 1] = axis_idx;
    tth_texpr *save = c->flat;
    c->flat = NULL;
    tth_texpr *v = lw_value_at(c, a, pi);
    c->flat = save;
    return v;
}

/* ------------------------------------------------------------------------------ sinks ---- */

int lw_sink_direct(const lw_sink *s, int field, tth_dtype acc)
{
    return s->dest[field]->dtype == acc;
}

static int lw_is_trivial(const tth_texpr *e)
{
    return e->kind == TTH_TEXPR_INT || e->kind == TTH_TEXPR_FLOAT || e->kind == TTH_TEXPR_VAR;
}

void lw_row_idx(lw_ctx *c, const tth_ttype *xt, tth_texpr *row, tth_texpr *at, int lanes, tth_texpr **idx)
{
    tth_texpr *r = row;
    for (int d = xt->rank - 2; d >= 0; d--) {
        idx[d] = xt->shape[d] == 1 ? lw_i(c, 0) : lw_bin(c, TTH_TBIN_MOD, r, lw_i(c, xt->shape[d]));
        r = lw_bin(c, TTH_TBIN_DIV, r, lw_i(c, xt->shape[d]));
    }
    idx[xt->rank - 1] = lanes == 1 ? at : tth_tir_ramp(c->m, at, 1, lanes);
}

/* value through the epilogue at idx, stored at idx of the field's buffer, or (to) at flat
 * element `at` of buffer `to` */
static tth_tstmt *sink_store(lw_ctx *c, const lw_sink *s, int field, tth_texpr *const *idx, tth_texpr *value,
                             tth_tbuffer *to, tth_texpr *at)
{
    if (!value)
        return NULL;
    tth_tbuffer *dest = s->dest[field];
    if (!s->epi)
        return to ? tth_tir_vstore(c->m, to, at, lw_cast(c, to->dtype, value), 0) : lw_store_at(c, dest, idx, value);
    tth_tvar *v = NULL;
    tth_texpr *slot = value;
    if (!lw_is_trivial(value)) {
        char name[32];
        snprintf(name, sizeof name, "v%u", c->nvars++);
        v = tth_tir_var_vec(c->m, name, value->dtype, value->lanes);
        if (!v)
            return NULL;
        slot = lw_ref(c, v);
    }
    const tth_rexpr *save_node = c->slot_node;
    tth_texpr *save_value = c->slot_value;
    c->slot_node = s->anchor;
    c->slot_value = slot;
    /* the epilogue node's own expression (its buffer is where the result goes, not a source) */
    const lw_op_impl *impl = lw_op_lookup(s->epi->u.call.op);
    int mark = lw_lets_open(c);
    tth_texpr *ev = impl && impl->value ? impl->value(c, s->epi, idx) : NULL;
    if (!ev && c->diag && c->diag->code == TTH_OK)
        lw_fail(c, TTH_EINTERNAL, s->epi, "lowering: the epilogue node is not pointwise");
    c->slot_node = save_node;
    c->slot_value = save_value;
    tth_tstmt *sv = !ev ? NULL : to ? tth_tir_vstore(c->m, to, at, lw_cast(c, to->dtype, ev), 0) : lw_store_at(c, dest, idx, ev);
    tth_tstmt *st = lw_lets_close(c, mark, sv);
    if (!st)
        return NULL;
    return v ? tth_tir_let(c->m, v, value, st) : st;
}

tth_tstmt *lw_sink_store(lw_ctx *c, const lw_sink *s, int field, tth_texpr *const *idx, tth_texpr *value)
{
    return sink_store(c, s, field, idx, value, NULL, NULL);
}

tth_tstmt *lw_sink_store_to(lw_ctx *c, const lw_sink *s, tth_texpr *const *idx, tth_texpr *value, tth_tbuffer *to,
                            tth_texpr *at)
{
    return sink_store(c, s, 0, idx, value, to, at);
}

/* ------------------------------------------------------------------------------ loops ---- */

tth_tstmt *lw_for(lw_ctx *c, tth_tvar *v, tth_texpr *min, tth_texpr *extent, tth_loop_kind k, tth_tstmt *body)
{
    if (!body)
        return NULL;
    return tth_tir_for(c->m, v, min, extent, k, body);
}

tth_tstmt *lw_nest(lw_ctx *c, const int64_t *shape, int rank, int flags, lw_body_fn body, void *arg)
{
    tth_texpr *idx[TTH_MAX_RANK];
    tth_tvar *vars[TTH_MAX_RANK];
    int64_t total = lw_numel(shape, rank);
    int loops[TTH_MAX_RANK], nloops = 0;
    static const char *const names[TTH_MAX_RANK] = {"i0", "i1", "i2", "i3", "i4", "i5", "i6", "i7"};
    for (int d = 0; d < rank; d++) {
        if (shape[d] == 1) {
            idx[d] = lw_i(c, 0);
            vars[d] = NULL;
            continue;
        }
        vars[d] = lw_var(c, names[d], TTH_I64);
        if (!vars[d])
            return NULL;
        idx[d] = lw_ref(c, vars[d]);
        loops[nloops++] = d;
    }
    /* an image's rows outermost (docs/threads.md, "Locality"): a batch-1 tensor of rank 4 or 5
     * (NCHW, NCHW<b>c) is split among the cores by rows, as its producers and consumers split it,
     * not by channels (which would pull half of every row from the other core's cache) */
    if ((flags & LW_ROWS) && total >= LW_PARALLEL_MIN && rank >= 4 && shape[0] == 1 && shape[1] > 1 &&
        shape[2] >= 4 && nloops >= 3 && loops[0] == 1 && loops[1] == 2) {
        loops[0] = 2;
        loops[1] = 1;
    }
    /* hoisting state is saved: nests may be built inside other nests' bodies */
    int save_on = c->hoist_on, save_nallowed = c->nhoist_allowed, save_n = c->nhoist;
    tth_tvar *save_inner = c->hoist_inner;
    tth_tvar *save_allowed[TTH_MAX_RANK + 4];
    tth_texpr *save_expr[LW_MAX_HOIST];
    tth_tvar *save_var[LW_MAX_HOIST];
    memcpy(save_allowed, c->hoist_allowed, sizeof save_allowed);
    memcpy(save_expr, c->hoist_expr, sizeof save_expr);
    memcpy(save_var, c->hoist_var, sizeof save_var);
    if (nloops >= 2) {
        c->hoist_on = 1;
        c->hoist_inner = vars[loops[nloops - 1]];
        c->nhoist_allowed = 0;
        for (int i = 0; i < nloops - 1; i++)
            c->hoist_allowed[c->nhoist_allowed++] = vars[loops[i]];
        c->nhoist = 0;
    } else {
        c->hoist_on = 0;
        c->hoist_inner = NULL;
    }
    tth_tstmt *s = body(c, idx, arg);
    int nh = c->nhoist;
    tth_texpr *hexpr[LW_MAX_HOIST];
    tth_tvar *hvar[LW_MAX_HOIST];
    memcpy(hexpr, c->hoist_expr, sizeof hexpr);
    memcpy(hvar, c->hoist_var, sizeof hvar);
    if (!c->hoist_on)
        nh = 0;
    c->hoist_on = save_on;
    c->hoist_inner = save_inner;
    c->nhoist_allowed = save_nallowed;
    c->nhoist = save_n;
    memcpy(c->hoist_allowed, save_allowed, sizeof save_allowed);
    memcpy(c->hoist_expr, save_expr, sizeof save_expr);
    memcpy(c->hoist_var, save_var, sizeof save_var);
    if (!s)
        return NULL;
    for (int i = nloops - 1; i >= 0; i--) {
        int d = loops[i];
        tth_loop_kind k = TTH_LOOP_SERIAL;
        if (i == nloops - 1 && (flags & LW_VECTOR) && d == rank - 1)
            k = TTH_LOOP_VECTORIZED;
        if (i == 0 && (flags & LW_PARALLEL) && total >= LW_PARALLEL_MIN && nloops > 1)
            k = TTH_LOOP_PARALLEL;
        s = tth_tir_for(c->m, vars[d], lw_i(c, 0), lw_i(c, shape[d]), k, s);
        if (!s)
            return NULL;
        if (i == nloops - 1)
            for (int h = nh - 1; h >= 0; h--) {
                s = tth_tir_let(c->m, hvar[h], hexpr[h], s);
                if (!s)
                    return NULL;
            }
    }
    return s;
}

tth_tstmt *lw_band_loop(lw_ctx *c, tth_tvar *v, tth_texpr *b, int64_t per, int64_t rows, tth_tstmt *body)
{
    tth_texpr *r0 = lw_mul(c, b, lw_i(c, per));
    tth_texpr *n = rows % per ? lw_bin(c, TTH_TBIN_MIN, lw_i(c, per), lw_sub(c, lw_i(c, rows), r0)) : lw_i(c, per);
    return lw_for(c, v, r0, n, TTH_LOOP_SERIAL, body);
}

int64_t lw_bands(const lw_ctx *c, int64_t rows, int64_t *per)
{
    if (rows < 1) {
        *per = 1;
        return 0;
    }
    int64_t nb = c->cores > 1 ? (c->cores < rows ? c->cores : rows) : 1;
    *per = (rows + nb - 1) / nb;
    return (rows + *per - 1) / *per;
}

int lw_ax_make(lw_ctx *c, lw_ax *a, const char *prefix, int64_t n)
{
    a->n = n;
    if (n == 1) {
        a->v = NULL;
        a->e = lw_i(c, 0);
        return 0;
    }
    a->v = lw_var(c, prefix, TTH_I64);
    if (!a->v)
        return lw_fail(c, TTH_ENOMEM, NULL, "out of memory");
    a->e = lw_ref(c, a->v);
    return 0;
}

tth_tstmt *lw_ax_loop(lw_ctx *c, const lw_ax *a, tth_loop_kind k, tth_tstmt *body)
{
    if (!body)
        return NULL;
    if (!a->v)
        return body;
    return tth_tir_for(c->m, a->v, lw_i(c, 0), lw_i(c, a->n), k, body);
}

tth_tstmt *lw_let(lw_ctx *c, tth_tvar *v, tth_texpr *value, tth_tstmt *body)
{
    if (!body || !value)
        return NULL;
    return tth_tir_let(c->m, v, value, body);
}

tth_texpr *lw_floordiv(lw_ctx *c, tth_texpr *a, int64_t b)
{
    if (b == 1)
        return a;
    return lw_bin(c, TTH_TBIN_FLOORDIV, a, lw_i(c, b));
}

tth_texpr *lw_ceildiv(lw_ctx *c, tth_texpr *a, int64_t b)
{
    if (b == 1)
        return a;
    return lw_bin(c, TTH_TBIN_FLOORDIV, lw_add(c, a, lw_i(c, b - 1)), lw_i(c, b));
}

void lw_window_range(lw_ctx *c, tth_texpr *f, int64_t fs, int64_t vs, int64_t pad, int64_t span, int64_t n,
                     int64_t fn, tth_texpr **lo, tth_texpr **ext)
{
    if (pad == 0 && (n - 1) * vs + (fn - 1) * fs <= span - 1) {
        /* never outside: the whole range, constant bounds */
        *lo = lw_i(c, 0);
        *ext = lw_i(c, n);
        return;
    }
    tth_texpr *ff = lw_mul(c, f, lw_i(c, fs));
    tth_texpr *l = lw_bin(c, TTH_TBIN_MAX, lw_i(c, 0), lw_ceildiv(c, lw_sub(c, lw_i(c, pad), ff), vs));
    tth_texpr *h = lw_bin(c, TTH_TBIN_MIN, lw_i(c, n),
                          lw_add(c, lw_floordiv(c, lw_sub(c, lw_i(c, span - 1 + pad), ff), vs), lw_i(c, 1)));
    *lo = l;
    *ext = lw_bin(c, TTH_TBIN_MAX, lw_i(c, 0), lw_sub(c, h, l));
}

/* ------------------------------------------------------------ pointwise stages, copies ---- */

/* A pointwise call stored element by element: through a sink, or (sink NULL) into dest */
typedef struct lw_pw_arg {
    const tth_rexpr *call;
    const lw_sink *sink;
    tth_tbuffer *dest;
} lw_pw_arg;

/* the call's value at idx, its LETs around the store */
static tth_tstmt *lw_pointwise_body(lw_ctx *c, tth_texpr *const *idx, void *arg)
{
    lw_pw_arg *a = arg;
    const lw_op_impl *impl = lw_op_lookup(a->call->u.call.op);
    int mark = lw_lets_open(c);
    tth_texpr *v = impl->value(c, a->call, idx);
    tth_tstmt *st = a->sink ? lw_sink_store(c, a->sink, 0, idx, v) : v ? lw_store_at(c, a->dest, idx, v) : NULL;
    return lw_lets_close(c, mark, st);
}

tth_tstmt *lw_pointwise_stage(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    lw_pw_arg a = {call, s, NULL};
    const tth_ttype *t = lw_ty(call);
    return lw_nest(c, t->shape, t->rank, LW_PARALLEL | LW_VECTOR | LW_ROWS, lw_pointwise_body, &a);
}

/* Can the inline tree rooted at e be evaluated with one flat index? */
static int lw_flat_ok(lw_ctx *c, const tth_rexpr *e, int64_t n, int root)
{
    lw_node *nd = lw_node_of(c, e);
    const tth_ttype *t = lw_ty(e);
    if (!t)
        return 0;
    if (!root && ((nd && nd->buf) || e->kind != TTH_REXPR_CALL)) {
        int64_t k = lw_numel(t->shape, t->rank);
        return k == 1 || k == n;
    }
    if (e->kind != TTH_REXPR_CALL)
        return 0;
    const lw_op_impl *impl = lw_op_lookup(e->u.call.op);
    if (!impl || !impl->value || impl->needs_idx)
        return 0;
    for (size_t i = 0; i < e->u.call.nargs; i++)
        if (!lw_flat_ok(c, lw_arg(e, i), n, 0))
            return 0;
    return 1;
}

/* A materialised pointwise node without an anchor: one loop nest storing its expression. */
static tth_tstmt *lw_ew_stage(lw_ctx *c, const tth_rexpr *e, tth_tbuffer *dest)
{
    const tth_ttype *t = lw_ty(e);
    int64_t n = lw_numel(t->shape, t->rank);
    const lw_op_impl *impl = lw_op_lookup(e->u.call.op);
    if (n > 1 && lw_flat_ok(c, e, n, 1)) {
        tth_tvar *v = lw_var(c, "i", TTH_I64);
        if (!v)
            return NULL;
        c->flat = lw_ref(c, v);
        c->flat_n = n;
        int mark = lw_lets_open(c);
        tth_texpr *val = impl->value(c, e, NULL);
        c->flat = NULL;
        tth_tstmt *st = lw_lets_close(c, mark, val ? tth_tir_store(c->m, dest, lw_ref(c, v), lw_cast(c, dest->dtype, val))
                                                   : NULL);
        if (!st)
            return NULL;
        return lw_for(c, v, lw_i(c, 0), lw_i(c, n), TTH_LOOP_VECTORIZED, st);
    }
    lw_pw_arg a = {e, NULL, dest};
    return lw_nest(c, t->shape, t->rank, LW_PARALLEL | LW_VECTOR | LW_ROWS, lw_pointwise_body, &a);
}

typedef struct lw_copy_arg {
    tth_tbuffer *src, *dest;
} lw_copy_arg;

static tth_tstmt *lw_copy_body(lw_ctx *c, tth_texpr *const *idx, void *arg)
{
    lw_copy_arg *a = arg;
    return lw_store_at(c, a->dest, idx, lw_load_at(c, a->src, idx));
}

static tth_tstmt *lw_copy(lw_ctx *c, tth_tbuffer *src, tth_tbuffer *dest)
{
    lw_copy_arg a = {src, dest};
    return lw_nest(c, dest->shape, dest->rank, LW_PARALLEL | LW_VECTOR, lw_copy_body, &a);
}

/* ---------------------------------------------------------------------- support checks ---- */

/* `seen` if it is already a half-width float, else dt if dt is one (float16, bfloat16) */
static tth_dtype half_seen(tth_dtype seen, tth_dtype dt)
{
    return seen ? seen : dt == TTH_F16 || dt == TTH_BF16 ? dt : TTH_DTYPE_INVALID;
}

int tth_lower_op_supported(const tth_rexpr *call, char *why, size_t len)
{
    char dummy[8];
    if (!why) {
        why = dummy;
        len = sizeof dummy;
    }
    if (len)
        why[0] = 0;
    if (!call || call->kind != TTH_REXPR_CALL || call->u.call.op == TTH_OP_INVALID) {
        snprintf(why, len, "not an operator call");
        return 0;
    }
    tth_op op = call->u.call.op;
    const lw_op_impl *impl = lw_op_lookup(op);
    if (!impl) {
        snprintf(why, len, "%s: no default lowering", tth_op_name(op));
        return 0;
    }
    /* float16 and bfloat16: pointwise ops compute in float32 (values are widened when read and
     * rounded once when stored), data movement copies; arithmetic stages (accumulators) are not
     * lowered. `half` is the first such dtype seen, for the message. */
    tth_dtype half = TTH_DTYPE_INVALID;
    if (call->type.nfields < 0)
        half = half_seen(half, call->type.tensor.dtype);
    for (int f = 0; f < call->type.nfields; f++)
        half = half_seen(half, call->type.fields[f].dtype);
    for (size_t i = 0; i < call->u.call.nargs; i++) {
        const tth_ttype *t = lw_ty(call->u.call.args[i]);
        if (!t) {
            snprintf(why, len, "%s: argument %zu is a tuple", tth_op_name(op), i);
            return 0;
        }
        half = half_seen(half, t->dtype);
    }
    if (half && !impl->half) {
        snprintf(why, len, "%s: %s is not supported", tth_op_name(op), tth_dtype_name(half));
        return 0;
    }
    if (impl->check && !impl->check(call, why, len))
        return 0;
    return 1;
}

/* --------------------------------------------------------------------------- driver ---- */

static void lw_ctx_free(lw_ctx *c)
{
    free(c->nodes);
    free(c->hkeys);
    free(c->hvals);
    free(c->lets);
}

static int lw_is_pointwise(const tth_rexpr *e)
{
    if (e->kind != TTH_REXPR_CALL || !e->u.call.op)
        return 0;
    const lw_op_impl *impl = lw_op_lookup(e->u.call.op);
    return impl && impl->value;
}

/* Does the inline tree of P reach anchor A only through nodes of A's shape? Returns 1 when e
 * depends on A; sets *bad when a node on such a path has another shape. */
static int lw_dep_shape(lw_ctx *c, const tth_rexpr *e, const tth_rexpr *a, int root, int *bad)
{
    if (e == a)
        return 1;
    lw_node *n = lw_node_of(c, e);
    if (!root && (!n || n->materialize || !lw_is_pointwise(e)))
        return 0;
    if (e->kind != TTH_REXPR_CALL)
        return 0;
    int dep = 0;
    for (size_t i = 0; i < e->u.call.nargs; i++)
        dep |= lw_dep_shape(c, lw_arg(e, i), a, 0, bad);
    if (dep && !tth_ttype_equal(lw_ty(e), lw_ty(a))) {
        /* dtype may change along the chain; the shape may not */
        const tth_ttype *x = lw_ty(e), *y = lw_ty(a);
        if (x->rank != y->rank || memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)x->rank))
            *bad = 1;
    }
    return dep;
}

/* Collect the stage leaves (materialised non-pointwise calls) of P's inline tree. */
static void lw_tree_leaves(lw_ctx *c, const tth_rexpr *e, int root, lw_node *p, int *counts)
{
    lw_node *n = lw_node_of(c, e);
    if (!n)
        return;
    if (!root && n->materialize) {
        if (e->kind == TTH_REXPR_CALL && !lw_is_pointwise(e)) {
            size_t k = (size_t)(n - c->nodes);
            counts[k]++;
            if (counts[k] == 1 && !n->fused_into)
                n->fused_into = p; /* provisional: checked by the caller */
            else if (n->fused_into != p)
                n->stage_use = 1; /* reached from two trees: keep its own buffer */
        }
        return;
    }
    if (e->kind != TTH_REXPR_CALL || !lw_is_pointwise(e))
        return;
    for (size_t i = 0; i < e->u.call.nargs; i++)
        lw_tree_leaves(c, lw_arg(e, i), 0, p, counts);
}

static const char *lw_sanitize(tth_arena *a, const char *s, const char *fallback)
{
    if (!s || !*s)
        return fallback;
    size_t n = strlen(s);
    char *o = tth_arena_alloc(a, n + 2);
    if (!o)
        return fallback;
    size_t j = 0;
    if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_'))
        o[j++] = '_';
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
        o[j++] = ok ? ch : '_';
    }
    o[j] = 0;
    return o;
}

static int lw_check_all(lw_ctx *c, tth_rexpr **topo, int64_t n)
{
    char why[256];
    for (int64_t i = 0; i < n; i++) {
        const tth_rexpr *e = topo[i];
        if (e->kind == TTH_REXPR_CALL) {
            if (e->u.call.op == TTH_OP_INVALID)
                return lw_fail(c, TTH_EUNSUPPORTED, e, "a call of function '%s' inside a primitive function",
                               e->u.call.fn ? e->u.call.fn->name : "?");
            if (!tth_lower_op_supported(e, why, sizeof why))
                return lw_fail(c, TTH_EUNSUPPORTED, e, "%s", why);
        } else if (e->kind == TTH_REXPR_TUPLE && e != c->fn->body) {
            return lw_fail(c, TTH_EUNSUPPORTED, e, "a tuple that is not the function's result");
        }
    }
    return 0;
}

/* The function's results and where they go. */
typedef struct lw_results {
    const tth_rexpr *e[LW_MAX_RESULTS];  /* the expression of each result */
    int field[LW_MAX_RESULTS];           /* >= 0: field of a tuple-producing e */
    int copy[LW_MAX_RESULTS];            /* a param, constant or repeated result: copied at the end */
    tth_tbuffer **bufs;                  /* the output params */
    int n;
} lw_results;

/* 1. uses: how often each node is used, and whether a user needs it in a buffer */
static void lw_count_uses(lw_ctx *c)
{
    for (size_t i = 0; i < c->nnodes; i++) {
        const tth_rexpr *e = c->nodes[i].e;
        tth_rexpr *const *args = NULL;
        size_t nargs = 0;
        int pw = 0;
        if (e->kind == TTH_REXPR_CALL) {
            args = e->u.call.args;
            nargs = e->u.call.nargs;
            pw = lw_is_pointwise(e);
        } else if (e->kind == TTH_REXPR_TUPLE) {
            args = e->u.tuple.fields;
            nargs = e->u.tuple.nfields;
        } else if (e->kind == TTH_REXPR_TUPLE_GET) {
            args = (tth_rexpr *const *)&e->u.get.tuple;
            nargs = 1;
        }
        for (size_t k = 0; k < nargs; k++) {
            lw_node *a = lw_node_of(c, args[k]);
            if (!a)
                continue;
            a->consumers++;
            if (!pw)
                a->stage_use = 1;
            else if (a->e->type.nfields < 0 && e->type.nfields < 0 &&
                     tth_ttype_numel(&e->type.tensor) >= LW_BROADCAST_REUSE * tth_ttype_numel(&a->e->type.tensor))
                a->broadcast_use = 1;
        }
    }
    lw_node *bn = lw_node_of(c, c->fn->body);
    if (bn)
        bn->stage_use = 1;
}

/* 2. results and params: PARAM buffers for the function's params, then one per result */
static int lw_bind_params(lw_ctx *c, lw_results *r, tth_tbuffer ***params_out, size_t *np_out)
{
    const tth_relay_function *fn = c->fn;
    const tth_rexpr *body = fn->body;
    size_t nres = body->kind == TTH_REXPR_TUPLE ? body->u.tuple.nfields
                  : body->type.nfields >= 0     ? (size_t)body->type.nfields
                                                : 1;
    if (nres > LW_MAX_RESULTS)
        return lw_fail(c, TTH_ELIMIT, body, "%zu results; at most %d are lowered in one function", nres,
                       LW_MAX_RESULTS);
    r->n = 0;
    for (size_t k = 0; k < nres; k++) {
        const tth_rexpr *f = body->kind == TTH_REXPR_TUPLE ? body->u.tuple.fields[k] : body;
        if (body->kind == TTH_REXPR_TUPLE && !lw_ty(f))
            return lw_fail(c, TTH_EUNSUPPORTED, f, "a nested tuple in the function's result");
        r->e[r->n] = f;
        r->field[r->n] = body->kind != TTH_REXPR_TUPLE && body->type.nfields >= 0 ? (int)k : -1;
        r->copy[r->n++] = 0;
    }
    size_t np = fn->nparams + (size_t)r->n;
    tth_tbuffer **params = calloc(np + 1, sizeof *params);
    *params_out = params;
    *np_out = np;
    if (!params)
        return lw_fail(c, TTH_ENOMEM, NULL, "out of memory");
    for (size_t k = 0; k < fn->nparams; k++) {
        const tth_rexpr *p = fn->params[k];
        const tth_ttype *t = lw_ty(p);
        if (!t)
            return lw_fail(c, TTH_EUNSUPPORTED, p, "a tuple-typed parameter");
        char fb[32];
        snprintf(fb, sizeof fb, "p%zu", k);
        const char *pn = lw_sanitize(c->m->arena, p->u.var.name, fb);
        /* keep param names distinct and away from out<k> */
        pn = tth_arena_printf(c->m->arena, "p%zu_%s", k, pn[0] == '_' ? pn + 1 : pn);
        params[k] = tth_tir_buffer(c->m, pn ? pn : fb, t->dtype, t->rank, t->shape, TTH_SCOPE_PARAM);
        if (!params[k])
            return lw_fail(c, TTH_ENOMEM, NULL, "out of memory");
        lw_node *n = lw_node_of(c, p);
        if (n)
            n->buf = params[k];
    }
    r->bufs = params + fn->nparams;
    for (int k = 0; k < r->n; k++) {
        const tth_ttype *t = r->field[k] >= 0 ? &r->e[k]->type.fields[r->field[k]] : lw_ty(r->e[k]);
        char on[32];
        snprintf(on, sizeof on, "out%d", k);
        r->bufs[k] = tth_tir_buffer(c->m, on, t->dtype, t->rank, t->shape, TTH_SCOPE_PARAM);
        if (!r->bufs[k])
            return lw_fail(c, TTH_ENOMEM, NULL, "out of memory");
    }
    return 0;
}

static tth_tbuffer **lw_fields(lw_ctx *c, lw_node *n, const tth_rexpr *e)
{
    if (!n->fields) {
        n->fields = tth_arena_alloc(c->m->arena, sizeof(tth_tbuffer *) * ((size_t)e->type.nfields + 1));
        if (!n->fields)
            lw_fail(c, TTH_ENOMEM, e, "out of memory");
    }
    return n->fields;
}

/* the CONST buffers of the function's constants that body does not read */
typedef struct const_reads {
    const tth_tbuffer **bufs;
    int *read;
    size_t n;
} const_reads;

/* b and, for a derived constant, its source (which the code may be given instead of b) */
static void mark_read(const_reads *r, const tth_tbuffer *b)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->bufs[i] == b || r->bufs[i] == b->derive_from)
            r->read[i] = 1;
}

static int read_by_expr(void *ctx, const tth_texpr *e)
{
    if (e->kind == TTH_TEXPR_LOAD || e->kind == TTH_TEXPR_ADDRESS_OF)
        mark_read(ctx, e->u.load.buf);
    return 0;
}

static int read_by_stmt(void *ctx, const tth_tstmt *s)
{
    for (size_t i = 0; s->kind == TTH_TSTMT_CALL_FUNC && i < s->u.call.nargs; i++)
        mark_read(ctx, s->u.call.args[i]);
    return 0;
}

static void release_unread_constants(lw_ctx *c, const tth_tstmt *body)
{
    const_reads r = {.bufs = calloc(c->nnodes + 1, sizeof *r.bufs), .read = calloc(c->nnodes + 1, sizeof *r.read)};
    for (size_t i = 0; r.bufs && r.read && i < c->nnodes; i++)
        if (c->nodes[i].e->kind == TTH_REXPR_CONST && c->nodes[i].buf)
            r.bufs[r.n++] = c->nodes[i].buf;
    if (r.n) {
        tth_tir_visitor v = {.expr = read_by_expr, .stmt = read_by_stmt, .ctx = &r};
        tth_tir_walk(body, &v);
        for (size_t i = 0; i < r.n; i++)
            if (!r.read[i])
                tth_tir_const_buffer_release(c->m, (tth_tbuffer *)r.bufs[i]);
    }
    free(r.bufs);
    free(r.read);
}

/* 3. constants become CONST buffers; decide what is materialised; results take the output
 * buffers (a result that is a param, a constant or repeated is copied at the end) */
static int lw_plan_buffers(lw_ctx *c, lw_results *r)
{
    for (size_t i = 0; i < c->nnodes; i++) {
        lw_node *n = &c->nodes[i];
        const tth_rexpr *e = n->e;
        if (e->kind == TTH_REXPR_CONST) {
            char *cn = tth_arena_printf(c->m->arena, "%s_c%u", c->fname, c->nconsts++);
            n->buf = cn ? tth_tir_const_buffer(c->m, cn, e->u.constant.value) : NULL;
            if (!n->buf)
                return lw_fail(c, TTH_ENOMEM, e, "out of memory");
        } else if (e->kind == TTH_REXPR_CALL) {
            if (!lw_is_pointwise(e) || n->stage_use || n->broadcast_use) {
                n->materialize = 1;
                continue;
            }
            /* inline cost: this op and the inline ops under it, paid once per use. A node used
             * several times stays inline while that is cheap (x * sigmoid(x) after a conv keeps
             * the whole chain in the conv's epilogue), else it gets a buffer. */
            n->cost = 1;
            for (size_t k = 0; k < e->u.call.nargs; k++) {
                lw_node *a = lw_node_of(c, e->u.call.args[k]);
                if (a && a->e->kind == TTH_REXPR_CALL && !a->materialize)
                    n->cost += a->cost;
            }
            if (n->consumers >= 2 && (n->cost > LW_INLINE_MAX_COST || n->consumers > LW_INLINE_MAX_USES))
                n->materialize = 1;
        }
    }
    for (int k = 0; k < r->n; k++) {
        const tth_rexpr *o = r->e[k];
        lw_node *n = lw_node_of(c, o);
        if (r->field[k] >= 0) {
            if (!lw_fields(c, n, o))
                return TTH_ENOMEM;
            n->fields[r->field[k]] = r->bufs[k];
        } else if (o->kind == TTH_REXPR_TUPLE_GET && o->u.get.tuple->kind == TTH_REXPR_CALL) {
            lw_node *tn = lw_node_of(c, o->u.get.tuple);
            if (!lw_fields(c, tn, o->u.get.tuple))
                return TTH_ENOMEM;
            if (!tn->fields[o->u.get.index])
                tn->fields[o->u.get.index] = r->bufs[k];
            else
                r->copy[k] = 1;
        } else if (o->kind == TTH_REXPR_CALL && !n->buf) {
            n->buf = r->bufs[k];
            n->materialize = 1;
        } else {
            r->copy[k] = 1;
        }
    }
    for (size_t i = 0; i < c->nnodes; i++) {
        lw_node *n = &c->nodes[i];
        if (n->e->kind == TTH_REXPR_CALL && n->materialize && n->e->type.nfields >= 0 && !lw_fields(c, n, n->e))
            return TTH_ENOMEM;
    }
    return 0;
}

/* 4. epilogue fusion (see the top of this file) */
static int lw_fuse_epilogues(lw_ctx *c)
{
    int *counts = calloc(c->nnodes + 1, sizeof *counts);
    if (!counts)
        return lw_fail(c, TTH_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < c->nnodes; i++) {
        lw_node *p = &c->nodes[i];
        if (p->materialize && lw_is_pointwise(p->e))
            lw_tree_leaves(c, p->e, 1, p, counts);
    }
    free(counts);
    for (size_t i = 0; i < c->nnodes; i++) {
        lw_node *a = &c->nodes[i];
        lw_node *p = a->fused_into;
        if (!p)
            continue;
        int ok = !a->stage_use && !a->buf && a->e->type.nfields < 0 && !p->anchor;
        if (ok) {
            int bad = 0;
            lw_dep_shape(c, p->e, a->e, 1, &bad);
            ok = !bad;
        }
        if (ok)
            p->anchor = a;
        else
            a->fused_into = NULL;
    }
    return 0;
}

/* LOCAL buffers for the materialised nodes that have none yet */
static int lw_alloc_locals(lw_ctx *c, tth_tbuffer **locals, int *nlocals)
{
    for (size_t i = 0; i < c->nnodes; i++) {
        lw_node *n = &c->nodes[i];
        const tth_rexpr *e = n->e;
        if (e->kind != TTH_REXPR_CALL || !n->materialize || n->fused_into)
            continue;
        int nf = e->type.nfields >= 0 ? e->type.nfields : 1;
        for (int f = 0; f < nf; f++) {
            tth_tbuffer **slot = e->type.nfields >= 0 ? &n->fields[f] : &n->buf;
            if (*slot)
                continue;
            const tth_ttype *t = e->type.nfields >= 0 ? &e->type.fields[f] : lw_ty(e);
            if (*nlocals >= LW_MAX_LOCALS)
                return lw_fail(c, TTH_ELIMIT, e, "more than %d intermediate buffers in one function", LW_MAX_LOCALS);
            *slot = locals[(*nlocals)++] = lw_local(c, "t", t->dtype, t->rank, t->shape);
            if (!*slot)
                return TTH_ENOMEM;
        }
    }
    return 0;
}

/* 5. the stages in topo order, then the copies of copied results */
static tth_tstmt *lw_emit(lw_ctx *c, const lw_results *r, json_t *ops, const char **anchor_op)
{
    tth_tstmt *seq = NULL;
    for (size_t i = 0; i < c->nnodes; i++) {
        lw_node *n = &c->nodes[i];
        const tth_rexpr *e = n->e;
        if (e->kind != TTH_REXPR_CALL)
            continue;
        json_array_append_new(ops, json_string(tth_op_name(e->u.call.op)));
        if (!lw_is_pointwise(e) && !*anchor_op)
            *anchor_op = tth_op_name(e->u.call.op);
        if (!n->materialize || n->fused_into)
            continue;
        tth_tstmt *st = NULL;
        const lw_op_impl *impl = lw_op_lookup(e->u.call.op);
        if (n->anchor || impl->stage) {
            /* a stage op, or the pointwise node an anchor writes through */
            const tth_rexpr *run = n->anchor ? n->anchor->e : e;
            const lw_op_impl *ri = lw_op_lookup(run->u.call.op);
            lw_sink s;
            tth_tbuffer *one[1];
            s.anchor = run;
            s.epi = n->anchor ? e : NULL;
            if (run->type.nfields >= 0) {
                s.dest = lw_node_of(c, run)->fields;
                s.nfields = run->type.nfields;
            } else {
                one[0] = n->buf;
                s.dest = one;
                s.nfields = 1;
            }
            char skipped[512], why[700];
            const lw_strategy *sg = lw_strategy_for(c, run, &s, skipped, sizeof skipped);
            if (sg) {
                json_array_append_new(c->strategies, json_string(sg->name));
                if (skipped[0])
                    snprintf(why, sizeof why, "%s: first row for %s that applies (not: %s)", sg->name,
                             tth_op_name(run->u.call.op), skipped);
                else
                    snprintf(why, sizeof why, "%s: first row for %s, and it applies", sg->name,
                             tth_op_name(run->u.call.op));
                json_array_append_new(c->strategy_why, json_string(why));
            }
            st = sg ? sg->lower(c, run, &s) : ri->stage ? ri->stage(c, run, &s) : lw_pointwise_stage(c, run, &s);
        } else {
            st = lw_ew_stage(c, e, n->buf);
        }
        if (!st || lw_append(c, &seq, st)) {
            if (!c->diag || c->diag->code == TTH_OK)
                lw_fail(c, st ? TTH_ENOMEM : TTH_EINTERNAL, e, "lowering failed");
            return NULL;
        }
    }
    for (int k = 0; k < r->n; k++) {
        if (!r->copy[k])
            continue;
        tth_tbuffer *src = lw_buf(c, r->e[k]);
        tth_tstmt *cp = src ? lw_copy(c, src, r->bufs[k]) : NULL;
        if (!cp || lw_append(c, &seq, cp)) {
            if (!c->diag || c->diag->code == TTH_OK)
                lw_fail(c, TTH_ENOMEM, r->e[k], "out of memory");
            return NULL;
        }
    }
    return seq ? lw_simplify(c, seq) : tth_tir_seq(c->m, NULL, 0);
}

/* if (param p0's value is when0 && ...) body, for a guard [[p0, when0], ...] of one-value params */
static tth_tstmt *guarded(lw_ctx *c, const json_t *guard, tth_tbuffer *const *params, tth_tstmt *body)
{
    tth_texpr *cond = NULL;
    size_t i;
    const json_t *lit;
    json_array_foreach(guard, i, lit) {
        json_int_t p = json_integer_value(json_array_get(lit, 0));
        int when = json_is_true(json_array_get(lit, 1));
        if (p < 0 || (size_t)p >= c->fn->nparams || tth_tbuffer_numel(params[p]) != 1 ||
            !json_is_boolean(json_array_get(lit, 1))) {
            lw_fail(c, TTH_EINVAL, NULL, "the function's Guard names param %lld, not one value", (long long)p);
            return NULL;
        }
        tth_texpr *v = tth_tir_load(c->m, params[p], lw_i(c, 0));
        tth_texpr *t = v ? lw_bin(c, when ? TTH_TBIN_NE : TTH_TBIN_EQ, v, lw_imm(c, v->dtype, 0)) : NULL;
        cond = cond && t ? lw_bin(c, TTH_TBIN_AND, cond, t) : t;
        if (!cond) {
            lw_fail(c, TTH_ENOMEM, NULL, "out of memory");
            return NULL;
        }
    }
    tth_tstmt *s = tth_tir_if(c->m, cond, body, NULL);
    if (!s)
        lw_fail(c, TTH_ENOMEM, NULL, "out of memory");
    return s;
}

tth_prim_func *tth_lower_primitive(tth_tir_module *mod, const tth_relay_function *fn, const char *name,
                                   const json_t *target, tth_diag *diag)
{
    lw_ctx cx, *c = &cx;
    memset(c, 0, sizeof cx);
    const char *target_kind = target ? json_string_value(json_object_get(target, "kind")) : NULL;
    c->vec = tth_target_vector_shape(target);
    c->cores = tth_target_num_cores(target);
    if (c->vec.f32_lanes >= 4)
        c->dot = tth_target_has_feature(target, "is_aarch64") || tth_target_has_feature(target, "has_asimd")
                     ? (tth_target_has_feature(target, "has_matmul_i8") ? TTH_TINTRIN_DOT4_US : TTH_TINTRIN_DOT4_SS)
                     : TTH_TINTRIN_DOT4_US;
    c->dot_native = c->dot == TTH_TINTRIN_DOT4_SS ? tth_target_has_feature(target, "has_dotprod")
                    : c->dot ? tth_target_has_feature(target, "has_matmul_i8") ||
                                   tth_target_has_feature(target, "has_avx512vnni") ||
                                   tth_target_has_feature(target, "has_avxvnni")
                             : 0;
    c->generic = fn && json_is_true(json_object_get(fn->attrs, "Generic"));
    c->m = mod;
    c->diag = diag;
    c->fn = fn;
    c->fname = name ? name : "?";
    if (!mod || !fn || !name || !fn->body || !fn->module) {
        tth_diag_set(diag, TTH_EINVAL, NULL, "tth_lower_primitive: missing module, function or name");
        return NULL;
    }
    tth_rexpr **topo = NULL;
    int64_t nt = tth_relay_topo(fn->module, fn, &topo);
    if (nt < 0) {
        tth_diag_set(diag, TTH_ENOMEM, name, "out of memory sorting the function");
        return NULL;
    }
    tth_prim_func *result = NULL;
    tth_tbuffer **params = NULL;
    size_t np = 0;
    lw_results *res = calloc(1, sizeof *res);
    tth_tbuffer **locals = calloc(LW_MAX_LOCALS, sizeof *locals);
    int nlocals = 0;
    json_t *ops = json_array();
    c->strategies = json_array();
    c->strategy_why = json_array();
    const char *anchor_op = NULL;
    if (!res || !locals || !ops || !c->strategies || !c->strategy_why) {
        lw_fail(c, TTH_ENOMEM, NULL, "out of memory");
        goto out;
    }
    if (lw_check_all(c, topo, nt))
        goto out;
    c->nnodes = (size_t)nt;
    c->nodes = calloc((size_t)nt + 1, sizeof *c->nodes);
    c->hcap = 16;
    while (c->hcap < 2 * (size_t)nt + 2)
        c->hcap <<= 1;
    c->hkeys = calloc(c->hcap, sizeof *c->hkeys);
    c->hvals = calloc(c->hcap, sizeof *c->hvals);
    if (!c->nodes || !c->hkeys || !c->hvals) {
        lw_fail(c, TTH_ENOMEM, NULL, "out of memory");
        goto out;
    }
    for (int64_t i = 0; i < nt; i++) {
        c->nodes[i].e = topo[i];
        lw_node_put(c, topo[i], (size_t)i);
    }
    lw_count_uses(c);
    if (lw_bind_params(c, res, &params, &np) || lw_plan_buffers(c, res) || lw_fuse_epilogues(c) ||
        lw_alloc_locals(c, locals, &nlocals))
        goto out;
    tth_tstmt *body = lw_emit(c, res, ops, &anchor_op);
    for (int k = nlocals - 1; k >= 0 && body; k--)
        body = tth_tir_allocate(mod, locals[k], body);
    if (!body) {
        if (!diag || diag->code == TTH_OK)
            lw_fail(c, TTH_ENOMEM, NULL, "out of memory");
        goto out;
    }
    /* a function fusion found needed only when some conditions hold (daemon/frontend/fuse.c,
     * "Guard": [[param, when], ...]) runs its code only then */
    const json_t *guard = json_object_get(fn->attrs, "Guard");
    if (json_array_size(guard) > 0 && !(body = guarded(c, guard, params, body)))
        goto out;
    /* a constant a kernel took in another layout (packed panels, transformed filters) is read
     * by no statement: the module lets go of it, so it need not stay in memory */
    release_unread_constants(c, body);
    json_t *attrs = json_object();
    if (!anchor_op && json_array_size(ops) > 0)
        anchor_op = json_string_value(json_array_get(ops, 0));
    json_object_set_new(attrs, "op", json_string(anchor_op ? anchor_op : "copy"));
    json_object_set_new(attrs, "ops", ops);
    ops = NULL;
    json_object_set_new(attrs, "origin", json_string("default"));
    if (json_array_size(c->strategies) > 0) {
        json_object_set(attrs, "strategies", c->strategies);
        json_object_set(attrs, "strategy_why", c->strategy_why);
    }
    result = tth_tir_func_add(mod, name, params, np, body, target_kind ? target_kind : "c", attrs, diag);
out:
    json_decref(ops);
    json_decref(c->strategies);
    json_decref(c->strategy_why);
    free(params);
    free(res);
    free(locals);
    lw_ctx_free(c);
    return result;
}

/* A 1-D tensor of n elements of dtype t, a copy of data or zeroed; NULL on OOM (diag set). */
tth_tensor *lw_table_new(lw_ctx *c, tth_dtype t, int64_t n, const void *data)
{
    tth_ttype tt;
    memset(&tt, 0, sizeof tt);
    tt.dtype = t;
    tt.rank = 1;
    tt.shape[0] = n;
    tth_tensor *pk = tth_tensor_new(&tt, data); /* zeroed without data */
    if (!pk)
        lw_fail(c, TTH_ENOMEM, NULL, "out of memory");
    return pk;
}

tth_tensor *lw_packed_new(lw_ctx *c, int64_t n)
{
    return lw_table_new(c, TTH_F32, n, NULL);
}

/* The packed weights as a CONST buffer of the function (takes pk's reference). */
tth_tbuffer *lw_packed_const(lw_ctx *c, tth_tensor *pk)
{
    char *name = tth_arena_printf(c->m->arena, "%s_c%u", c->fname, c->nconsts++);
    tth_tbuffer *b = name ? tth_tir_const_buffer(c->m, name, pk) : NULL;
    tth_tensor_unref(pk);
    if (!b)
        lw_fail(c, TTH_ENOMEM, NULL, "out of memory");
    return b;
}
