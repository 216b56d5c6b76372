/* layout.c: blocked channels (docs/layouts.md). For a target whose vectors hold b float32 lanes,
 * the convolutions of main and what lies between them move to NCHW<b>c, [N, C/b, H, W, b]: a
 * convolution's accumulators are then a block of channels of one pixel, stored as one vector, and
 * its next convolution reads them where they are. Layout changes stay at the edges of the blocked
 * region: where an NCHW consumer (a reshape, a region of another kind, main's result) takes a
 * blocked value, one transpose brings it back, once for all such consumers.
 *
 * Each node of main may have two forms: its NCHW value (plain) and its blocked value (blk).
 * Walking main in order:
 *  - nn.conv2d, float32, constant weight, one group, depthwise, or grouped with every group's
 *    channels filling whole blocks of a blocked side, or with small groups (as many inputs as
 *    outputs: the grouped kernel; else, for up to four groups to a block of a blocked input,
 *    merged into groups that fill blocks): blocked output when its output
 *    channels fill blocks; blocked input when its input has a blocked form (for a depthwise
 *    convolution or small groups, always: its input is blocked here if need be). A convolution whose output
 *    channels do not fill blocks may still read a blocked input.
 *  - qnn.conv2d the int8 kernels compute (symmetric constant int8 weights, a constant scalar
 *    input zero point; groups of whole words of input channels): as nn.conv2d.
 *  - pools, global pools and resizes of a blocked input: blocked (integers: max pools only).
 *    A mean or max over the pixels of a blocked image is its global pool (kept dimensions: the
 *    blocked form; else [N, C] read from the blocks by a reshape).
 *  - element-wise operators whose operands are blocked values of the result's own shape,
 *    scalars, or constants per channel ([C, 1, 1], [1, C, 1, 1], blocked here at compile time),
 *    with at least one blocked: blocked. Quantize and dequantize only with one scale and zero
 *    point; a requantize with per-channel input parameters carries the layout (docs/int8.md).
 *  - concatenate along the channels of blocked values: blocked.
 *  - a transpose from NCHW to NHWC of a value with a blocked form reads the blocked form; one
 *    from NHWC to NCHW gets a blocked form made from its input, beside its plain form
 *    (docs/layouts.md, "Permutes to and from NHWC").
 *  - anything else reads the plain form of its arguments, made when first asked for.
 * Runs after partitioning (only main's own operators move; a region's call reads plain values)
 * and before fusion. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend_internal.h"
#include "lower.h"

typedef struct lay {
    tth_relay_module *m;
    int64_t b;
    tth_rexpr **plain, **blk; /* by original node id */
    tth_diag *diag;
    tth_layout_stats st;
} lay;

/* op(x) with one integer-array attribute (reshape's newshape, transpose's axes) */
static tth_rexpr *call_ints(lay *L, tth_op op, tth_rexpr *x, const char *key, const int64_t *v, int n)
{
    if (!x)
        return NULL;
    json_t *a = json_object();
    if (a)
        json_object_set_new(a, key, tth__json_ints(v, n));
    return tth_relay_call(L->m, op, &x, 1, a, L->diag);
}

/* The block of a C-channel tensor: the target's lanes when they divide C, else half of them (at
 * least 4: MobileNet-v2's 24 channels in blocks of 8 at 16 lanes), else 0 (it stays NCHW; a
 * quarter made ShuffleNet-v2's 116-channel stage blocked in 4s between its channel shuffles, and
 * 1.6 times slower). Every blocked form of a tensor has this block, so the blocked operands of
 * an element-wise operator or a join always agree. */
static int64_t block_for(const lay *L, int64_t C)
{
    for (int64_t b = L->b; b >= 4 && 2 * b >= L->b; b /= 2)
        if (C % b == 0)
            return b;
    return 0;
}

static int is_f32_nchw(const tth_rexpr *e)
{
    return e->type.nfields < 0 && e->type.tensor.rank == 4 && e->type.tensor.dtype == TTH_F32;
}

/* NCHW x -> [N, C/b, H, W, b]: reshape to [N, C/b, b, H, W], then move the block innermost */
static tth_rexpr *to_blocked(lay *L, tth_rexpr *x)
{
    const int64_t *s = x->type.tensor.shape;
    int64_t b = block_for(L, s[1]);
    int64_t shp[5] = {s[0], s[1] / b, b, s[2], s[3]}, axes[5] = {0, 1, 3, 4, 2};
    L->st.to_blocked++;
    return call_ints(L, TTH_OP_TRANSPOSE, call_ints(L, TTH_OP_RESHAPE, x, "newshape", shp, 5), "axes", axes, 5);
}

/* [N, C/b, H, W, b] -> NCHW; of one pixel (a global pool's [N, C/b, 1, 1, b]) a reshape alone:
 * its blocks hold the channels in order */
static tth_rexpr *to_plain(lay *L, tth_rexpr *y)
{
    const int64_t *s = y->type.tensor.shape;
    int64_t axes[5] = {0, 1, 4, 2, 3}, shp[4] = {s[0], s[1] * s[4], s[2], s[3]};
    L->st.to_plain++;
    if (s[2] == 1 && s[3] == 1)
        return call_ints(L, TTH_OP_RESHAPE, y, "newshape", shp, 4);
    return call_ints(L, TTH_OP_RESHAPE, call_ints(L, TTH_OP_TRANSPOSE, y, "axes", axes, 5), "newshape", shp, 4);
}

/* the plain form of original node e (made from its blocked form when first asked for) */
static tth_rexpr *plain_of(lay *L, const tth_rexpr *e)
{
    if (!L->plain[e->id] && L->blk[e->id])
        L->plain[e->id] = to_plain(L, L->blk[e->id]);
    return L->plain[e->id];
}

static char *layout_name(int64_t b, char *buf, size_t len)
{
    snprintf(buf, len, "NCHW%lldc", (long long)b);
    return buf;
}

static json_t *attrs_with(const json_t *attrs, const char *k1, const char *v1, const char *k2, const char *v2)
{
    json_t *a = attrs ? json_deep_copy(attrs) : json_object();
    if (a && k1)
        json_object_set_new(a, k1, json_string(v1));
    if (a && k2)
        json_object_set_new(a, k2, json_string(v2));
    return a;
}

/* Groups smaller than a block, merged: m neighbouring groups become one of m times the channels,
 * whose weight is block-diagonal (output channel o of sub-group j = (o / Og) % m reads input
 * channels j*Cg .. j*Cg+Cg-1 of the merged group; the others are zeros). The convolution then
 * computes m times the multiply-adds, all in blocked channels, instead of leaving the blocked
 * region twice (docs/layouts.md, "Small groups"). */
#define MERGE_GROUPS_MAX 4

static tth_rexpr *merged_weight(lay *L, const tth_rexpr *w, int64_t Og, int64_t m)
{
    const tth_ttype *t = &w->type.tensor;
    int64_t O = t->shape[0], Cg = t->shape[1], taps = t->shape[2] * t->shape[3];
    tth_ttype mt = {.dtype = TTH_F32, .rank = 4, .shape = {O, Cg * m, t->shape[2], t->shape[3]}};
    tth_tensor *v = tth_tensor_new(&mt, NULL);
    if (!v)
        return NULL;
    const float *src = w->u.constant.value->data;
    float *dst = v->data;
    for (int64_t o = 0; o < O; o++) {
        int64_t j = (o / Og) % m;
        memcpy(dst + (o * Cg * m + j * Cg) * taps, src + o * Cg * taps, (size_t)(Cg * taps) * sizeof(float));
    }
    return tth_relay_const(L->m, v, NULL);
}

/* the merge factor for a grouped convolution of C -> O channels whose groups are smaller than a
 * block, or 0: m groups fill one block of the output and whole blocks of the input */
static int64_t merge_factor(const lay *L, int64_t C, int64_t O, int64_t groups, int64_t xb)
{
    int64_t b = block_for(L, O), Og = O / groups, Cg = C / groups;
    if (!b || b % Og || b / Og > MERGE_GROUPS_MAX)
        return 0;
    int64_t m = b / Og;
    return groups % m == 0 && xb && (Cg * m) % xb == 0 ? m : 0;
}

/* Is k a constant integer scalar (zeros 0), or a constant integer tensor of zeros (zeros 1)? */
static int int_const(const tth_rexpr *k, int zeros)
{
    if (k->kind != TTH_REXPR_CONST || tth_dtype_is_float(k->type.tensor.dtype) || k->type.tensor.dtype == TTH_BOOL)
        return 0;
    const tth_tensor *v = k->u.constant.value;
    int64_t n = tth_ttype_numel(&v->type);
    if (!zeros)
        return n == 1;
    for (int64_t i = 0; i < n; i++)
        if (tth_tensor_get_i64(v, i) != 0)
            return 0;
    return 1;
}

/* a qnn.conv2d the int8 kernels compute in blocked channels (docs/int8.md, "Blocked channels"):
 * int8 or uint8 NCHW input with a constant scalar zero point, constant int8 weights of zero
 * points 0 (the symmetric weights ONNX Runtime's quantizer writes), int32 result */
static int is_qconv_nchw(const tth_rexpr *e)
{
    const tth_rexpr *x = e->u.call.args[0], *w = e->u.call.args[1];
    if (e->u.call.op != TTH_OP_QNN_CONV2D || e->u.call.nargs != 4 || e->type.nfields >= 0 ||
        e->type.tensor.rank != 4 || e->type.tensor.dtype != TTH_I32 || x->type.nfields >= 0 ||
        x->type.tensor.rank != 4 || (x->type.tensor.dtype != TTH_I8 && x->type.tensor.dtype != TTH_U8))
        return 0;
    return w->kind == TTH_REXPR_CONST && w->type.tensor.dtype == TTH_I8 && int_const(e->u.call.args[2], 0) &&
           int_const(e->u.call.args[3], 1);
}

/* a convolution reading or writing blocked channels, or NULL (no diag) when it stays NCHW */
static tth_rexpr *conv_blocked(lay *L, const tth_rexpr *e)
{
    size_t na = e->u.call.nargs;
    const tth_rexpr *x = e->u.call.args[0], *w = e->u.call.args[1];
    int q = e->u.call.op == TTH_OP_QNN_CONV2D;
    if (q ? !is_qconv_nchw(e) : !is_f32_nchw(e) || !is_f32_nchw(x))
        return NULL;
    if (json_object_get(e->u.call.attrs, "data_layout") || json_object_get(e->u.call.attrs, "out_layout"))
        return NULL;
    L->st.convs++;
    if (w->kind != TTH_REXPR_CONST)
        return NULL;
    tth_window_attrs wa;
    if (tth_window_attrs_of(TTH_OP_CONV2D, e->u.call.attrs, &wa, NULL) != 0)
        return NULL;
    int64_t C = x->type.tensor.shape[1], O = e->type.tensor.shape[1], b = block_for(L, O);
    int depthwise = wa.groups == C && O == C;
    int out_blk = b != 0, in_blk = L->blk[x->id] != NULL;
    int64_t merge = 0, Cg = C / wa.groups;
    /* small groups of as many inputs as outputs: the grouped kernel reads each block's inputs
     * from the same block (docs/layouts.md, "Small groups"), its input blocked if need be */
    int small = !q && wa.groups != 1 && !depthwise && b && C == O && Cg < b && b % Cg == 0 &&
                Cg <= TTH_LOWER_SMALL_GROUP_MAX && w->type.tensor.dtype == TTH_F32;
    if (small) {
        out_blk = 1;
    } else if (wa.groups != 1 && !depthwise) {
        /* grouped: a side is blocked when each group's channels fill whole blocks of it (RegNet's
         * groups of 16 at 16 lanes); smaller groups of a blocked input are merged (ResNeXt's
         * groups of 4 and 8) */
        int64_t xb = in_blk ? L->blk[x->id]->type.tensor.shape[4] : 0;
        if (out_blk && (O / wa.groups) % b == 0 && (!in_blk || (C / wa.groups) % xb == 0)) {
            /* whole blocks on both sides */
        } else if (w->type.tensor.dtype == TTH_F32 && (merge = merge_factor(L, C, O, wa.groups, xb)) != 0) {
            out_blk = in_blk = 1;
        } else {
            out_blk = out_blk && (O / wa.groups) % b == 0;
            in_blk = in_blk && (C / wa.groups) % xb == 0;
        }
        /* the int8 kernel reads whole words of a group's input channels */
        if (q && (C / wa.groups) % 4)
            return NULL;
    }
    if (depthwise && !out_blk)
        return NULL;
    if (!out_blk && !in_blk)
        return NULL;
    tth_rexpr *xin = in_blk ? L->blk[x->id] : plain_of(L, x);
    if (xin && (depthwise || small) && !in_blk) {
        xin = to_blocked(L, xin);
        in_blk = 1;
        if (!xin)
            return NULL;
    }
    char ln[32], ln2[32];
    json_t *a = attrs_with(e->u.call.attrs, in_blk ? "data_layout" : NULL,
                           layout_name(in_blk ? xin->type.tensor.shape[4] : 0, ln, sizeof ln),
                           out_blk ? "out_layout" : NULL, layout_name(b, ln2, sizeof ln2));
    if (merge && a)
        json_object_set_new(a, "groups", json_integer(wa.groups / merge));
    /* the bias, or qnn.conv2d's zero points */
    tth_rexpr *nargs[4] = {xin, merge ? merged_weight(L, w, O / wa.groups, merge) : plain_of(L, w),
                           na > 2 ? plain_of(L, e->u.call.args[2]) : NULL, na > 3 ? plain_of(L, e->u.call.args[3]) : NULL};
    for (size_t i = 0; i < na; i++)
        if (!nargs[i]) {
            json_decref(a);
            return NULL;
        }
    tth_rexpr *r = tth_relay_call(L->m, e->u.call.op, nargs, na, a, L->diag);
    L->st.blocked += r != NULL;
    return r;
}

/* a constant per channel ([C, 1, 1] or [1, C, 1, 1]) as [1, C/b, 1, 1, b], or NULL */
static tth_rexpr *channel_const_blocked(lay *L, const tth_rexpr *k, int64_t C)
{
    const tth_ttype *t = &k->type.tensor;
    int64_t b = block_for(L, C);
    if (k->kind != TTH_REXPR_CONST || tth_ttype_numel(t) != C || !b)
        return NULL;
    if (!(t->rank == 3 && t->shape[0] == C) && !(t->rank == 4 && t->shape[1] == C))
        return NULL;
    tth_ttype bt = {.dtype = t->dtype, .rank = 5, .shape = {1, C / b, 1, 1, b}};
    tth_tensor *v = tth_tensor_new(&bt, k->u.constant.value->data); /* the same order: c = blk*b + lane */
    return v ? tth_relay_const(L->m, v, NULL) : NULL;
}

/* Does an operand of shape a broadcast to out in blocked channels as it does in NCHW? Yes when
 * it has the same channels and its batch and spatial dimensions are out's or 1: a squeeze-and-
 * excitation scale [N, C, 1, 1], whose blocked form [N, C/b, 1, 1, b] broadcasts over the
 * pixels of [N, C/b, H, W, b] as it did over [N, C, H, W]. */
static int broadcasts_blocked(const tth_ttype *a, const tth_ttype *out)
{
    if (a->rank != 4 || a->shape[1] != out->shape[1])
        return 0;
    for (int d = 0; d < 4; d++)
        if (d != 1 && a->shape[d] != 1 && a->shape[d] != out->shape[d])
            return 0;
    return 1;
}

/* an NCHW operand of one channel, [N', 1, H', W'], as [N', 1, H', W', 1]: it broadcasts over the
 * blocks and the lanes of a blocked tensor as it did over the channels (a spatial attention map) */
static tth_rexpr *one_channel_blocked(lay *L, const tth_rexpr *a, const tth_ttype *out)
{
    const tth_ttype *t = &a->type.tensor;
    if (t->rank != 4 || t->shape[1] != 1)
        return NULL;
    for (int d = 0; d < 4; d++)
        if (d != 1 && t->shape[d] != 1 && t->shape[d] != out->shape[d])
            return NULL;
    tth_rexpr *p = plain_of(L, a);
    int64_t shp[5] = {t->shape[0], 1, t->shape[2], t->shape[3], 1};
    return p ? call_ints(L, TTH_OP_RESHAPE, p, "newshape", shp, 5) : NULL;
}

/* The quantization operators with parameters per tensor are element-wise like any other; a
 * requantize whose input parameters are per channel (axis 1: a convolution's per-channel weight
 * scales) reads the channel's values at (c / b)*b + c % b (its layout attribute). 1 when e is
 * such a quantization operator (*per_channel: the requantize per channel), 0 when it stays NCHW,
 * -1 for any other operator. */
static int quant_form(const tth_rexpr *e, int *per_channel)
{
    tth_op op = e->u.call.op;
    *per_channel = 0;
    if (op != TTH_OP_QUANTIZE && op != TTH_OP_DEQUANTIZE && op != TTH_OP_REQUANTIZE)
        return -1;
    for (size_t i = 1; i < e->u.call.nargs; i++) {
        const tth_ttype *t = &e->u.call.args[i]->type.tensor;
        if (tth_ttype_numel(t) == 1)
            continue;
        const json_t *ax = json_object_get(e->u.call.attrs, "axis");
        int64_t axis = json_is_integer(ax) ? json_integer_value(ax) : 1;
        if (op != TTH_OP_REQUANTIZE || i > 2 || t->rank != 1 || (axis != 1 && axis != -3))
            return 0;
        *per_channel = 1;
    }
    return 1;
}

/* the same shape (a quantization operator or a cast changes the dtype, not the layout) */
static int same_shape(const tth_ttype *a, const tth_ttype *b)
{
    if (a->rank != b->rank)
        return 0;
    for (int d = 0; d < a->rank; d++)
        if (a->shape[d] != b->shape[d])
            return 0;
    return 1;
}

/* an element-wise call with blocked operands, or NULL when it stays NCHW */
static tth_rexpr *pointwise_blocked(lay *L, const tth_rexpr *e)
{
    tth_op op = e->u.call.op;
    int per_channel = 0, qf = e->type.nfields < 0 ? quant_form(e, &per_channel) : 0;
    if (!tth_op_is_elementwise(op) || qf == 0 || e->type.nfields >= 0 || e->type.tensor.rank != 4 ||
        e->u.call.nargs > 5)
        return NULL;
    const tth_ttype *out = &e->type.tensor;
    int any = 0;
    for (size_t i = 0; i < e->u.call.nargs; i++)
        any |= L->blk[e->u.call.args[i]->id] && same_shape(&e->u.call.args[i]->type.tensor, out);
    if (!any || !block_for(L, out->shape[1]))
        return NULL;
    /* a quantization operator's input must be the blocked one (its parameters are not images) */
    if (qf == 1 && !(L->blk[e->u.call.args[0]->id] && same_shape(&e->u.call.args[0]->type.tensor, out)))
        return NULL;
    tth_rexpr *nargs[5];
    for (size_t i = 0; i < e->u.call.nargs; i++) {
        const tth_rexpr *a = e->u.call.args[i];
        const tth_ttype *at = &a->type.tensor;
        if (a->type.nfields >= 0)
            return NULL;
        if (per_channel && i > 0 && at->rank == 1) {
            if (!(nargs[i] = plain_of(L, a))) /* per channel: read through the layout attribute */
                return NULL;
        } else if (L->blk[a->id] && broadcasts_blocked(at, out) &&
            L->blk[a->id]->type.tensor.shape[4] == block_for(L, out->shape[1]))
            nargs[i] = L->blk[a->id];
        else if (tth_ttype_numel(at) == 1 && at->rank <= 4) {
            if (!(nargs[i] = plain_of(L, a))) /* a scalar broadcasts into any layout */
                return NULL;
        } else if (!(nargs[i] = channel_const_blocked(L, a, out->shape[1])) &&
                   !(nargs[i] = one_channel_blocked(L, a, out))) {
            return NULL;
        }
    }
    json_t *attrs = json_incref(e->u.call.attrs);
    if (per_channel) {
        char ln[32];
        json_decref(attrs);
        attrs = attrs_with(e->u.call.attrs, "layout", layout_name(nargs[0]->type.tensor.shape[4], ln, sizeof ln), NULL, NULL);
        if (attrs)
            json_object_set_new(attrs, "axis", json_integer(1));
    }
    return tth_relay_call(L->m, op, nargs, e->u.call.nargs, attrs, L->diag);
}

/* Is e a float32 rank-4 transpose with these axes? */
static int transpose_is(const tth_rexpr *e, const int64_t *want)
{
    int64_t axes[TTH_MAX_RANK];
    if (e->kind != TTH_REXPR_CALL || e->u.call.fn || e->u.call.op != TTH_OP_TRANSPOSE || !is_f32_nchw(e) ||
        !is_f32_nchw(e->u.call.args[0]) || tth_transpose_axes_of(e->u.call.attrs, 4, axes, NULL) != 0)
        return 0;
    for (int d = 0; d < 4; d++)
        if (axes[d] != want[d])
            return 0;
    return 1;
}

static const int64_t TO_NHWC[4] = {0, 2, 3, 1}, TO_NCHW[4] = {0, 3, 1, 2};

/* NCHW -> NHWC of a value with a blocked form, read from the blocked form: [N, C/b, H, W, b] ->
 * [N, H, W, C/b, b] is [N, H, W, C] (a reshape), one pass where the plain form and then the
 * transpose were two (ConvNeXt's and Swin's permutes after a convolution; docs/layouts.md) */
static tth_rexpr *nhwc_from_blocked(lay *L, const tth_rexpr *e)
{
    tth_rexpr *xb = L->blk[e->u.call.args[0]->id];
    if (!xb)
        return NULL;
    int64_t axes[5] = {0, 2, 3, 1, 4};
    const int64_t *s = e->type.tensor.shape;
    return call_ints(L, TTH_OP_RESHAPE, call_ints(L, TTH_OP_TRANSPOSE, xb, "axes", axes, 5), "newshape", s, 4);
}

/* NHWC -> NCHW, also made blocked straight from the NHWC value: [N, H, W, C] as
 * [N, H, W, C/b, b] -> [N, C/b, H, W, b], one pass where the NCHW transpose and then the blocking
 * were two; the plain form is made from y as well, and the consumers take whichever they read.
 * NULL when C has no block. */
static tth_rexpr *blocked_from_nhwc(lay *L, const tth_rexpr *e)
{
    const int64_t *s = e->type.tensor.shape; /* [N, C, H, W] */
    int64_t b = block_for(L, s[1]);
    tth_rexpr *y = b ? plain_of(L, e->u.call.args[0]) : NULL;
    if (!y)
        return NULL;
    int64_t shp[5] = {s[0], s[2], s[3], s[1] / b, b}, axes[5] = {0, 3, 1, 2, 4};
    return call_ints(L, TTH_OP_TRANSPOSE, call_ints(L, TTH_OP_RESHAPE, y, "newshape", shp, 5), "axes", axes, 5);
}

/* A mean or a max of a blocked float32 image over its pixels (axes 2 and 3 of NCHW, in either
 * order or counted from the end): the global pool of its blocks, [N, C/b, 1, 1, b], which is
 * its blocked form when the dimensions are kept (a squeeze-and-excitation's input stays
 * blocked), else read as [N, C] by a reshape (docs/layouts.md). NULL otherwise. */
static tth_rexpr *pixel_reduce_blocked(lay *L, const tth_rexpr *e)
{
    const tth_rexpr *x = e->u.call.args[0];
    const json_t *ax = json_object_get(e->u.call.attrs, "axis"), *kd = json_object_get(e->u.call.attrs, "keepdims");
    if (!L->blk[x->id] || !is_f32_nchw(x) || e->type.nfields >= 0 || !json_is_array(ax) || json_array_size(ax) != 2)
        return NULL;
    int seen[4] = {0};
    for (size_t i = 0; i < 2; i++) {
        const json_t *v = json_array_get(ax, i);
        int64_t a = json_is_integer(v) ? json_integer_value(v) : 99;
        if (a < 0)
            a += 4;
        if (a != 2 && a != 3)
            return NULL;
        seen[a] = 1;
    }
    if (!seen[2] || !seen[3])
        return NULL;
    char ln[32];
    tth_rexpr *xb = L->blk[x->id];
    tth_op pool = e->u.call.op == TTH_OP_MEAN ? TTH_OP_GLOBAL_AVG_POOL2D : TTH_OP_GLOBAL_MAX_POOL2D;
    tth_rexpr *g = tth_relay_call(L->m, pool, &xb, 1,
                                  attrs_with(NULL, "layout", layout_name(xb->type.tensor.shape[4], ln, sizeof ln), NULL, NULL),
                                  L->diag);
    if (!g || json_is_true(kd) || (json_is_integer(kd) && json_integer_value(kd)))
        return g;
    return call_ints(L, TTH_OP_RESHAPE, g, "newshape", e->type.tensor.shape, e->type.tensor.rank);
}

/* call e on blocked operands: its blocked form (rank 5), or its plain form made from a blocked
 * input (rank 4: a convolution whose output has no block); NULL when it stays NCHW (then it is
 * rebuilt on plain arguments) */
static tth_rexpr *visit_call(lay *L, const tth_rexpr *e)
{
    size_t na = e->u.call.nargs;
    char ln[32];
    const tth_rexpr *x = na ? e->u.call.args[0] : NULL;
    switch (e->u.call.op) {
    case TTH_OP_CONV2D:
    case TTH_OP_QNN_CONV2D:
        return conv_blocked(L, e);
    case TTH_OP_TRANSPOSE:
        return transpose_is(e, TO_NHWC) ? nhwc_from_blocked(L, e) : NULL;
    case TTH_OP_MAX_POOL2D:
    case TTH_OP_AVG_POOL2D:
    case TTH_OP_GLOBAL_AVG_POOL2D:
    case TTH_OP_GLOBAL_MAX_POOL2D:
    case TTH_OP_RESIZE2D:
        /* float32, or a max pool of int8 or uint8 (a quantized model's pool on its integers) */
        if (!L->blk[x->id] || json_object_get(e->u.call.attrs, "layout") ||
            !(is_f32_nchw(e) || (e->u.call.op == TTH_OP_MAX_POOL2D && e->type.nfields < 0 && e->type.tensor.rank == 4 &&
                                 (e->type.tensor.dtype == TTH_I8 || e->type.tensor.dtype == TTH_U8))))
            return NULL;
        return tth_relay_call(L->m, e->u.call.op, &L->blk[x->id], 1,
                              attrs_with(e->u.call.attrs, "layout", layout_name(L->blk[x->id]->type.tensor.shape[4], ln, sizeof ln),
                                         NULL, NULL), L->diag);
    case TTH_OP_MEAN:
    case TTH_OP_MAX:
        return pixel_reduce_blocked(L, e);
    case TTH_OP_CONCATENATE: {
        int64_t axis = 0;
        const json_t *ax = json_object_get(e->u.call.attrs, "axis");
        if (!is_f32_nchw(e) || !json_is_integer(ax))
            return NULL;
        axis = json_integer_value(ax);
        if (axis != 1 && axis != -3)
            return NULL;
        tth_rexpr **nargs = calloc(na ? na : 1, sizeof *nargs);
        if (!nargs)
            return NULL;
        /* every input blocked, with the joined tensor's block (block_for) */
        int64_t b = block_for(L, e->type.tensor.shape[1]);
        size_t i = 0;
        for (; i < na && L->blk[e->u.call.args[i]->id] && L->blk[e->u.call.args[i]->id]->type.tensor.shape[4] == b; i++)
            nargs[i] = L->blk[e->u.call.args[i]->id];
        tth_rexpr *r = NULL;
        if (i == na) {
            json_t *a = json_deep_copy(e->u.call.attrs);
            if (a)
                json_object_set_new(a, "axis", json_integer(1));
            r = tth_relay_call(L->m, TTH_OP_CONCATENATE, nargs, na, a, L->diag);
        }
        free(nargs);
        return r;
    }
    default:
        return pointwise_blocked(L, e);
    }
}

int tth_relay_alter_layout(tth_relay_module *m, int64_t block, tth_layout_stats *stats, tth_diag *diag)
{
    if (stats)
        memset(stats, 0, sizeof *stats);
    tth_relay_function *fn = m ? tth_relay_module_main(m) : NULL;
    if (!fn)
        return tth_diag_set(diag, TTH_EINVAL, NULL, "the module has no main function");
    if (block < 2 || block > TTH_LAYOUT_MAX_BLOCK)
        return 0;
    tth_rexpr **nodes = NULL;
    int64_t n = tth_relay_topo(m, fn, &nodes);
    if (n < 0)
        return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
    uint32_t mx = 0;
    for (int64_t i = 0; i < n; i++)
        if (nodes[i]->id > mx)
            mx = nodes[i]->id;
    lay L = {.m = m, .b = block, .diag = diag};
    L.plain = calloc((size_t)mx + 1, sizeof *L.plain);
    L.blk = calloc((size_t)mx + 1, sizeof *L.blk);
    tth_rexpr **tmp = NULL;
    size_t tmpcap = 0;
    int rc = 0;
    if (!L.plain || !L.blk) {
        rc = tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
        goto done;
    }
    for (int64_t i = 0; i < n && !rc; i++) {
        tth_rexpr *e = nodes[i];
        if (e->kind == TTH_REXPR_VAR || e->kind == TTH_REXPR_CONST) {
            L.plain[e->id] = e;
            continue;
        }
        tth_relay_set_span(m, e->span);
        if (e->kind == TTH_REXPR_CALL && !e->u.call.fn) {
            tth_rexpr *b = visit_call(&L, e);
            if (!b && diag && diag->code) {
                rc = diag->code;
                break;
            }
            if (b) {
                if (b->type.tensor.rank == 5)
                    L.blk[e->id] = b;
                else
                    L.plain[e->id] = b;
                continue;
            }
        }
        /* NCHW: the node on the plain forms of its arguments */
        tth_rexpr *const *args;
        size_t na = tth__node_args(e, &args);
        if (na > tmpcap) {
            tth_rexpr **t2 = realloc(tmp, na * sizeof *tmp);
            if (!t2) {
                rc = tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
                break;
            }
            tmp = t2;
            tmpcap = na;
        }
        int changed = 0;
        for (size_t k = 0; k < na; k++) {
            if (!(tmp[k] = plain_of(&L, args[k]))) {
                rc = diag && diag->code ? diag->code : tth_diag_set(diag, TTH_EINTERNAL, e->span, "layout: no value");
                break;
            }
            changed |= tmp[k] != args[k];
        }
        if (rc)
            break;
        tth_rexpr *r = changed ? tth__rebuild(m, e, tmp, na, diag) : e;
        if (!r) {
            rc = diag && diag->code ? diag->code : TTH_EINTERNAL;
            break;
        }
        L.plain[e->id] = r;
        if (transpose_is(e, TO_NCHW) && !(L.blk[e->id] = blocked_from_nhwc(&L, e)) && diag && diag->code)
            rc = diag->code;
    }
    if (!rc) {
        tth_rexpr *body = plain_of(&L, fn->body);
        if (!body)
            rc = diag && diag->code ? diag->code : tth_diag_set(diag, TTH_EINTERNAL, NULL, "layout: no result");
        else
            fn->body = body;
    }
    tth_relay_set_span(m, NULL);
    if (stats)
        *stats = L.st;
done:
    free(L.plain);
    free(L.blk);
    free(tmp);
    return rc;
}
