/* rules.c: the ethos-n kind's partition_supports: the Ethos-N78 support rules of the driver
 * stack's support library (docs/ethosn.md), one row per operator, each refusal with its
 * reason.
 *
 * tth's quantized graphs come in two shapes, and both are read:
 *   - quantized operators: qnn.conv2d / qnn.matmul (+ int32 bias add) + qnn.requantize, and data
 *     movement (reshape, concatenate, max pool, clip, ...) directly on int8/uint8 tensors;
 *   - QDQ: qnn.dequantize(int8/uint8) -> float operator -> qnn.quantize(int8/uint8), which the NPU
 *     runs as one quantized operator. The dequantize and quantize are taken with it.
 * General rules on every tensor the call touches: int8 or uint8 (float only between a dequantize
 * and a quantize), at most 4 dimensions, batch (first dimension) 1. Layout: tth's IR is NCHW, so
 * "channels" is axis 1 of a 4-D tensor.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>
#include <tth/relay.h>

#include "ethosn.h"

static int refuse(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int refuse(char *why, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (why && len)
        vsnprintf(why, len, fmt, ap);
    va_end(ap);
    return 0;
}

static int is_q(tth_dtype d)
{
    return d == TTH_I8 || d == TTH_U8;
}

static tth_dtype dt(const tth_rexpr *e)
{
    const tth_ttype *t = tth_rexpr_ttype(e);
    return t ? t->dtype : TTH_DTYPE_INVALID;
}

/* At most 4 dimensions, batch 1. */
static int shape_ok(const tth_rexpr *e, const char *op, const char *what, char *why, size_t len)
{
    char b[96];
    const tth_ttype *t = tth_rexpr_ttype(e);
    if (!t)
        return 1; /* tuples: their fields are checked where they are made */
    if (t->rank > 4)
        return refuse(why, len, "%s %s %s has %d dimensions: the Ethos-N78 takes at most 4", op, what,
                      tth_rexpr_type_str(e, b, sizeof b), t->rank);
    if (t->rank >= 2 && t->shape[0] != 1)
        return refuse(why, len, "%s %s %s has batch %lld: the Ethos-N78 takes batch 1", op, what,
                      tth_rexpr_type_str(e, b, sizeof b), (long long)t->shape[0]);
    return 1;
}

typedef struct ectx {
    const tth_relay_users *u;
    const tth_rexpr *q; /* QDQ mode: the quantize after the float op; NULL for quantized operators */
    char *why;
    size_t len;
} ectx;

#define REFUSE(...) refuse(c->why, c->len, __VA_ARGS__)

static const int kernel_sizes[] = {1, 2, 3, 5, 7, 9};

static int in_list(int64_t v, const int *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (list[i] == v)
            return 1;
    return 0;
}

/* SAME (either split of the total) or VALID padding of one spatial dimension. */
static int same_or_valid(int64_t in, int64_t k, int64_t s, int64_t before, int64_t after, int *same)
{
    *same = 0;
    if (before == 0 && after == 0)
        return 1;
    int64_t out = (in + s - 1) / s, total = (out - 1) * s + k - in;
    if (total < 0)
        total = 0;
    *same = 1;
    return before + after == total && (before == total / 2 || before == total - total / 2);
}

/* The requantize after a qnn.conv2d / qnn.matmul (through its bias add), or NULL. */
static const tth_rexpr *requant_after(const tth_relay_users *u, const tth_rexpr *acc)
{
    const tth_rexpr *n = tth_relay_sole_user_op(u, acc, TTH_OP_ADD);
    if (n)
        acc = n;
    return tth_relay_sole_user_op(u, acc, TTH_OP_REQUANTIZE);
}

/* input * weight / output scale in (0, 65536) for every channel. */
static int scale_ratio_ok(ectx *c, const tth_rexpr *acc, const char *op)
{
    const tth_rexpr *rq = requant_after(c->u, acc);
    if (!rq)
        return REFUSE("%s without one qnn.requantize after it: the Ethos-N78 produces quantized outputs", op);
    const tth_tensor *s = tth_rexpr_const(rq->u.call.args[1]);
    double out_s;
    if (!s || !tth_rexpr_const_scalar(rq->u.call.args[3], &out_s) || !(out_s > 0))
        return REFUSE("%s requantized with non-constant scales", op);
    for (int64_t i = 0; i < tth_ttype_numel(&s->type); i++) {
        double r = tth_tensor_get_f64(s, i) / out_s;
        if (!(r > 0 && r < 65536))
            return REFUSE("%s with input*weight/output scale %g: the Ethos-N78 needs it in (0, 65536)", op, r);
    }
    return 1;
}

static int check_conv(ectx *c, const tth_rexpr *e)
{
    const tth_rexpr *x = e->u.call.args[0];
    const tth_tensor *w = tth_rexpr_const(e->u.call.args[1]);
    const tth_ttype *xt = tth_rexpr_ttype(x);
    if (!is_q(dt(x)))
        return REFUSE("qnn.conv2d on %s: the Ethos-N78 convolves int8 or uint8", tth_dtype_name(dt(x)));
    if (!w)
        return REFUSE("qnn.conv2d with non-constant weights: the Ethos-N78 needs them at compile time");
    tth_window_attrs wa;
    tth_diag d;
    if (tth_window_attrs_of(e->u.call.op, e->u.call.attrs, &wa, &d) != 0)
        return REFUSE("%s", d.message);
    const int64_t *st = wa.strides, *pad = wa.padding, *dil = wa.dilation;
    int64_t kh = w->type.shape[2], kw = w->type.shape[3], groups = wa.groups;
    if (!in_list(kh, kernel_sizes, 6) || !in_list(kw, kernel_sizes, 6))
        return REFUSE("qnn.conv2d with a %lldx%lld kernel: the Ethos-N78 takes kernel sizes 1, 2, 3, 5, 7, 9",
                      (long long)kh, (long long)kw);
    if ((st[0] != 1 && st[0] != 2) || (st[1] != 1 && st[1] != 2))
        return REFUSE("qnn.conv2d with strides [%lld, %lld]: the Ethos-N78 takes stride 1 or 2",
                      (long long)st[0], (long long)st[1]);
    if ((kh > 7 || kw > 7) && (st[0] != 1 || st[1] != 1))
        return REFUSE("qnn.conv2d with a %lldx%lld kernel at stride [%lld, %lld]: kernels above 7 only at stride 1",
                      (long long)kh, (long long)kw, (long long)st[0], (long long)st[1]);
    if (dil[0] != 1 || dil[1] != 1)
        return REFUSE("qnn.conv2d with dilation [%lld, %lld]: the Ethos-N78 takes dilation 1", (long long)dil[0],
                      (long long)dil[1]);
    int sh, sw;
    if (!same_or_valid(xt->shape[2], kh, st[0], pad[0], pad[2], &sh) ||
        !same_or_valid(xt->shape[3], kw, st[1], pad[1], pad[3], &sw))
        return REFUSE("qnn.conv2d with padding [%lld, %lld, %lld, %lld]: the Ethos-N78 takes SAME or VALID padding",
                      (long long)pad[0], (long long)pad[1], (long long)pad[2], (long long)pad[3]);
    int64_t cin = xt->shape[1], cout = w->type.shape[0];
    if (groups != 1) {
        if (groups != cin)
            return REFUSE("qnn.conv2d with %lld groups of %lld channels: the Ethos-N78 has plain and depthwise "
                          "convolutions only", (long long)groups, (long long)cin);
        if (cout != cin)
            return REFUSE("depthwise qnn.conv2d with channel multiplier %lld: the Ethos-N78 takes multiplier 1",
                          (long long)(cout / (cin ? cin : 1)));
    }
    return scale_ratio_ok(c, e, "qnn.conv2d");
}

static int check_matmul(ectx *c, const tth_rexpr *e)
{
    const tth_rexpr *a = e->u.call.args[0];
    const tth_tensor *w = tth_rexpr_const(e->u.call.args[1]);
    if (!is_q(dt(a)) || tth_rexpr_ttype(a)->rank != 2)
        return REFUSE("qnn.matmul on %s of rank %d: the Ethos-N78's fully connected takes int8/uint8 [1, K]",
                      tth_dtype_name(dt(a)), tth_rexpr_ttype(a)->rank);
    if (!w || w->type.rank != 2)
        return REFUSE("qnn.matmul with non-constant or non-2-D weights: a fully connected layer needs constant [K, N]");
    return scale_ratio_ok(c, e, "qnn.matmul (fully connected)");
}

static int check_add(ectx *c, const tth_rexpr *e)
{
    if (dt(e) == TTH_I32) { /* a bias add: part of its convolution / fully connected */
        const tth_rexpr *a = e->u.call.args[0];
        const tth_tensor *b = tth_rexpr_const(e->u.call.args[1]);
        if (!(tth_rexpr_is_op(a, TTH_OP_QNN_CONV2D) || tth_rexpr_is_op(a, TTH_OP_QNN_MATMUL)) || !b || b->type.dtype != TTH_I32)
            return REFUSE("int32 add other than a constant bias after qnn.conv2d/qnn.matmul");
        ectx sub = *c;
        return tth_rexpr_is_op(a, TTH_OP_QNN_CONV2D) ? check_conv(&sub, a) : check_matmul(&sub, a);
    }
    return 1; /* QDQ add of two quantized tensors */
}

static int check_requantize(ectx *c, const tth_rexpr *e)
{
    const tth_rexpr *x = e->u.call.args[0];
    if (!is_q(dt(e)))
        return REFUSE("qnn.requantize to %s: the Ethos-N78 produces int8 or uint8", tth_dtype_name(dt(e)));
    double v;
    if (!tth_rexpr_const_scalar(e->u.call.args[3], &v) || !tth_rexpr_const_scalar(e->u.call.args[4], &v))
        return REFUSE("qnn.requantize with a non-constant or per-channel output quantization");
    if (dt(x) == TTH_I32) {
        const tth_rexpr *acc = tth_rexpr_is_op(x, TTH_OP_ADD) ? x->u.call.args[0] : x;
        if (tth_rexpr_is_op(acc, TTH_OP_QNN_CONV2D))
            return check_conv(c, acc);
        if (tth_rexpr_is_op(acc, TTH_OP_QNN_MATMUL))
            return check_matmul(c, acc);
        return REFUSE("qnn.requantize of an int32 value not computed by qnn.conv2d/qnn.matmul");
    }
    if (!is_q(dt(x)))
        return REFUSE("qnn.requantize from %s: the Ethos-N78 requantizes int8/uint8", tth_dtype_name(dt(x)));
    return 1;
}

static int check_clip(ectx *c, const tth_rexpr *e)
{
    (void)c;
    (void)e;
    return 1; /* relu / relu6 as a clip: any bounds */
}

static int pool_geometry(ectx *c, const tth_rexpr *e, int64_t *ps, int64_t *st, int64_t *pad, int *same)
{
    const char *op = tth_op_name(e->u.call.op);
    tth_window_attrs wa;
    tth_diag d;
    if (tth_window_attrs_of(e->u.call.op, e->u.call.attrs, &wa, &d) != 0)
        return REFUSE("%s", d.message);
    memcpy(ps, wa.pool_size, 2 * sizeof *ps);
    memcpy(st, wa.strides, 2 * sizeof *st);
    memcpy(pad, wa.padding, 4 * sizeof *pad);
    if (wa.ceil_mode)
        return REFUSE("%s with ceil_mode: the Ethos-N78 rounds output sizes down", op);
    const tth_ttype *t = tth_rexpr_ttype(e->u.call.args[0]);
    int sh, sw;
    if (!same_or_valid(t->shape[2], ps[0], st[0], pad[0], pad[2], &sh) ||
        !same_or_valid(t->shape[3], ps[1], st[1], pad[1], pad[3], &sw))
        return REFUSE("%s with padding [%lld, %lld, %lld, %lld]: the Ethos-N78 takes SAME or VALID padding", op,
                      (long long)pad[0], (long long)pad[1], (long long)pad[2], (long long)pad[3]);
    *same = sh || sw;
    return 1;
}

static int check_max_pool(ectx *c, const tth_rexpr *e)
{
    int64_t ps[2], st[2], pad[4];
    int same;
    if (!pool_geometry(c, e, ps, st, pad, &same))
        return 0;
    int64_t width = tth_rexpr_ttype(e->u.call.args[0])->shape[3];
    if (st[0] == 2 && st[1] == 2 && ps[0] == ps[1] && ps[0] >= 1 && ps[0] <= 3) {
        if (ps[0] == 3 && width > 417)
            return REFUSE("nn.max_pool2d 3x3 stride 2 on width %lld: the Ethos-N78 takes width <= 417",
                          (long long)width);
        return 1;
    }
    if (st[0] == 1 && st[1] == 1) {
        int64_t lim = same ? 17 : 9;
        if (ps[0] <= lim && ps[1] <= lim)
            return 1;
        return REFUSE("nn.max_pool2d %lldx%lld stride 1 with %s padding: the Ethos-N78 pools at stride 1 up to "
                      "%lldx%lld", (long long)ps[0], (long long)ps[1], same ? "SAME" : "VALID", (long long)lim,
                      (long long)lim);
    }
    return REFUSE("nn.max_pool2d %lldx%lld stride [%lld, %lld]: the Ethos-N78 takes 1x1, 2x2, 3x3 at stride 2, or "
                  "stride 1", (long long)ps[0], (long long)ps[1], (long long)st[0], (long long)st[1]);
}

/* A mean over the whole of a 7x7 or 8x8 plane. */
static int mean_plane_ok(ectx *c, const char *op, int64_t h, int64_t w)
{
    if ((h == 7 && w == 7) || (h == 8 && w == 8))
        return 1;
    return REFUSE("%s over a %lldx%lld plane: the Ethos-N78 averages whole planes of 7x7 or 8x8 only", op,
                  (long long)h, (long long)w);
}

static int check_avg_pool(ectx *c, const tth_rexpr *e)
{
    int64_t ps[2], st[2], pad[4];
    int same;
    if (!pool_geometry(c, e, ps, st, pad, &same))
        return 0;
    const tth_ttype *t = tth_rexpr_ttype(e->u.call.args[0]);
    if (ps[0] == 3 && ps[1] == 3 && st[0] == 1 && st[1] == 1 && same)
        return 1;
    if (ps[0] == t->shape[2] && ps[1] == t->shape[3] && !same)
        return mean_plane_ok(c, "nn.avg_pool2d", ps[0], ps[1]);
    return REFUSE("nn.avg_pool2d %lldx%lld stride [%lld, %lld]: the Ethos-N78 takes 3x3 stride 1 SAME, or a mean "
                  "over 7x7 or 8x8", (long long)ps[0], (long long)ps[1], (long long)st[0], (long long)st[1]);
}

static int check_global_avg(ectx *c, const tth_rexpr *e)
{
    const tth_ttype *t = tth_rexpr_ttype(e->u.call.args[0]);
    return mean_plane_ok(c, "nn.global_avg_pool2d", t->shape[2], t->shape[3]);
}

static int check_mean(ectx *c, const tth_rexpr *e)
{
    const tth_ttype *t = tth_rexpr_ttype(e->u.call.args[0]);
    int64_t ax[8];
    int n = tth_call_attr_ints(e, "axis", ax, 8);
    if (t->rank != 4 || n != 2 || !((ax[0] == 2 && ax[1] == 3) || (ax[0] == -2 && ax[1] == -1)) ||
        !tth_call_attr_int(e, "keepdims", 0))
        return REFUSE("mean other than over the spatial axes [2, 3] of a 4-D tensor with keepdims: the Ethos-N78 "
                      "averages whole planes");
    return mean_plane_ok(c, "mean", t->shape[2], t->shape[3]);
}

static int check_concat(ectx *c, const tth_rexpr *e)
{
    const tth_ttype *t = tth_rexpr_ttype(e);
    int64_t axis = tth_call_attr_int(e, "axis", 0);
    if (axis < 0)
        axis += t->rank;
    if (t->rank != 4 || axis != 1)
        return REFUSE("concatenate along axis %lld of a %d-D tensor: the Ethos-N78 concatenates along channels "
                      "(axis 1 of NCHW)", (long long)axis, t->rank);
    for (size_t i = 0; i < e->u.call.nargs; i++) {
        int64_t ch = tth_rexpr_ttype(e->u.call.args[i])->shape[1];
        if (ch % 16)
            return REFUSE("concatenate input %zu has %lld channels: the Ethos-N78 needs multiples of 16", i,
                          (long long)ch);
    }
    return 1;
}

static int check_split(ectx *c, const tth_rexpr *e)
{
    const tth_ttype *t = tth_rexpr_ttype(e->u.call.args[0]);
    int64_t axis = tth_call_attr_int(e, "axis", 0), sz[64];
    if (axis < 0)
        axis += t->rank;
    if (t->rank != 4 || axis != 1)
        return REFUSE("split along axis %lld of a %d-D tensor: the Ethos-N78 splits along channels (axis 1 of NCHW)",
                      (long long)axis, t->rank);
    int n = tth_call_attr_ints(e, "sizes", sz, 64);
    for (int i = 0; i < n; i++)
        if (sz[i] % 16)
            return REFUSE("split part %d has %lld channels: the Ethos-N78 needs multiples of 16", i, (long long)sz[i]);
    return 1;
}

/* sigmoid: output scale 1/256, zero point the type's minimum; tanh: scale 1/128, zero point the middle. */
static int check_activation_out(ectx *c, const tth_rexpr *e, double want_scale, int at_min)
{
    const char *op = tth_op_name(e->u.call.op);
    double s, zp;
    if (!c->q || !tth_rexpr_const_scalar(c->q->u.call.args[1], &s) || !tth_rexpr_const_scalar(c->q->u.call.args[2], &zp))
        return REFUSE("%s outside dequantize -> %s -> quantize with constant quantization", op, op);
    int u8 = dt(c->q) == TTH_U8;
    double want_zp = at_min ? (u8 ? 0 : -128) : (u8 ? 128 : 0);
    if (fabs(s - want_scale) > 1e-9 || zp != want_zp)
        return REFUSE("%s quantized with scale %g and zero point %g: the Ethos-N78 writes scale 1/%d, zero point %g",
                      op, s, zp, (int)(1.0 / want_scale + 0.5), want_zp);
    return 1;
}

static int check_sigmoid(ectx *c, const tth_rexpr *e)
{
    return check_activation_out(c, e, 1.0 / 256, 1);
}

static int check_tanh(ectx *c, const tth_rexpr *e)
{
    return check_activation_out(c, e, 1.0 / 128, 0);
}

static int check_pad(ectx *c, const tth_rexpr *e)
{
    static const char *const modes[] = {"constant", "reflect", "edge"};
    tth_pad_attrs p;
    tth_diag d;
    int rank = tth_rexpr_ttype(e->u.call.args[0])->rank;
    if (tth_pad_attrs_of(e->u.call.attrs, rank, &p, &d))
        return REFUSE("nn.pad: %s", d.message);
    if (p.mode != TTH_PAD_CONSTANT)
        return REFUSE("nn.pad in %s mode: the Ethos-N78 pads with zeros", modes[p.mode]);
    if (p.value != 0)
        return REFUSE("nn.pad with value %g: the Ethos-N78 pads with zeros", p.value);
    for (int i = 0; i < rank; i++)
        if (p.before[i] > 7 || p.after[i] > 7)
            return REFUSE("nn.pad of %lld before and %lld after on axis %d: the Ethos-N78 pads at most 7 a side",
                          (long long)p.before[i], (long long)p.after[i], i);
    return 1;
}

static int check_any(ectx *c, const tth_rexpr *e)
{
    (void)c;
    (void)e;
    return 1;
}

/* resize: nearest or linear under the four coordinate transformations the Ethos-N model computes
 * (docs/ethosn.md); cubic, tf_half_pixel_for_nn and tf_crop_and_resize stay on the host */
static int check_resize(ectx *c, const tth_rexpr *e)
{
    static const char *const cts[] = {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"};
    const json_t *m = json_object_get(e->u.call.attrs, "method");
    const json_t *ct = json_object_get(e->u.call.attrs, "coordinate_transformation_mode");
    const char *method = m ? json_string_value(m) : "nearest", *ctm = ct ? json_string_value(ct) : "half_pixel";
    if (!method || (strcmp(method, "nearest") && strcmp(method, "linear")))
        return REFUSE("image.resize2d %s: the Ethos-N78 resizes nearest or linear", method ? method : "?");
    for (size_t i = 0; ctm && i < sizeof cts / sizeof cts[0]; i++)
        if (!strcmp(ctm, cts[i]))
            return 1;
    return REFUSE("image.resize2d with coordinate transformation %s", ctm ? ctm : "?");
}

/* How an operator may appear: QDQ (float between dequantize and quantize), DIRECT (on int8/uint8). */
enum { QDQ = 1, DIRECT = 2 };

static const struct rule {
    tth_op op;
    int where;
    int (*check)(ectx *, const tth_rexpr *);
} rules[] = {
    {TTH_OP_QNN_CONV2D, DIRECT, check_conv},
    {TTH_OP_QNN_MATMUL, DIRECT, check_matmul},
    {TTH_OP_REQUANTIZE, DIRECT, check_requantize},
    {TTH_OP_ADD, DIRECT | QDQ, check_add},
    {TTH_OP_MULTIPLY, QDQ, check_any},
    {TTH_OP_CLIP, DIRECT | QDQ, check_clip},
    {TTH_OP_RELU, DIRECT | QDQ, check_any},
    {TTH_OP_LEAKY_RELU, QDQ, check_any},
    {TTH_OP_SIGMOID, QDQ, check_sigmoid},
    {TTH_OP_TANH, QDQ, check_tanh},
    {TTH_OP_MAX_POOL2D, DIRECT | QDQ, check_max_pool},
    {TTH_OP_AVG_POOL2D, QDQ, check_avg_pool},
    {TTH_OP_GLOBAL_AVG_POOL2D, QDQ, check_global_avg},
    {TTH_OP_MEAN, QDQ, check_mean},
    {TTH_OP_CONCATENATE, DIRECT | QDQ, check_concat},
    {TTH_OP_SPLIT, DIRECT, check_split},
    {TTH_OP_PAD, DIRECT | QDQ, check_pad},
    {TTH_OP_RESHAPE, DIRECT | QDQ, check_any},
    {TTH_OP_TRANSPOSE, DIRECT | QDQ, check_any},
    {TTH_OP_RESIZE2D, DIRECT | QDQ, check_resize},
};

static const struct rule *rule_of(tth_op op)
{
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (rules[i].op == op)
            return &rules[i];
    return NULL;
}

/* dequantize/quantize of int8/uint8 with scalar constant quantization. */
static int qdq_node_ok(ectx *c, const tth_rexpr *e)
{
    const char *op = tth_op_name(e->u.call.op);
    tth_dtype q = e->u.call.op == TTH_OP_DEQUANTIZE ? dt(e->u.call.args[0]) : dt(e);
    double v;
    if (!is_q(q))
        return REFUSE("%s of %s: the Ethos-N78 takes int8 or uint8", op, tth_dtype_name(q));
    if (!tth_rexpr_const_scalar(e->u.call.args[1], &v) || !tth_rexpr_const_scalar(e->u.call.args[2], &v))
        return REFUSE("%s with non-constant or per-channel quantization: the Ethos-N78 takes per-tensor", op);
    return 1;
}

/* A float op between dequantizes and one quantize, by its rule. */
static int qdq_op_ok(ectx *c, const tth_rexpr *e)
{
    const char *op = tth_op_name(e->u.call.op);
    const struct rule *r = rule_of(e->u.call.op);
    if (!r || !(r->where & QDQ))
        return REFUSE("%s on dequantized data is not an Ethos-N78 operator", op);
    for (size_t i = 0; i < e->u.call.nargs; i++) {
        const tth_rexpr *a = e->u.call.args[i];
        if (a->kind == TTH_REXPR_CONST)
            continue;
        if (!tth_rexpr_is_op(a, TTH_OP_DEQUANTIZE))
            return REFUSE("%s input %zu is float not dequantized from int8/uint8: the Ethos-N78 computes quantized "
                          "data", op, i);
        if (!qdq_node_ok(c, a) || !shape_ok(a, op, "input", c->why, c->len))
            return 0;
    }
    const tth_rexpr *q = tth_relay_sole_user_op(c->u, e, TTH_OP_QUANTIZE);
    if (!q)
        return REFUSE("%s not followed by one qnn.quantize: the Ethos-N78 produces quantized data", op);
    if (!qdq_node_ok(c, q) || !shape_ok(e, op, "output", c->why, c->len))
        return 0;
    ectx sub = *c;
    sub.q = q;
    return r->check(&sub, e);
}

/* The users index of the function the last question was about (tth_relay_users_of keeps it while
 * the function is unchanged); freed when the plugin is unloaded. */
static tth_relay_users *users;

__attribute__((destructor)) static void users_unload(void)
{
    tth_relay_users_free(users);
}

int ethosn_supports(const tth_relay_function *fn, const tth_rexpr *call, char *why, size_t len)
{
    if (!fn || !call || call->kind != TTH_REXPR_CALL)
        return TTH_EINVAL;
    const tth_relay_users *u = tth_relay_users_of(&users, fn);
    if (!u)
        return TTH_ENOMEM;
    ectx c = {.u = u, .why = why, .len = len};
    tth_op op = call->u.call.op;
    const char *name = tth_op_name(op);
    if (op == TTH_OP_INVALID)
        return refuse(why, len, "a call of function '%s': the Ethos-N78 takes operators", call->u.call.fn->name);
    if (op == TTH_OP_DEQUANTIZE) {
        if (!qdq_node_ok(&c, call))
            return 0;
        size_t n = tth_relay_nusers(u, call);
        for (size_t i = 0; i < n; i++) {
            const tth_rexpr *user = tth_relay_user(u, call, i);
            if (!user || user->kind != TTH_REXPR_CALL)
                return refuse(why, len, "qnn.dequantize whose float result leaves the function: the Ethos-N78 "
                              "returns quantized data");
            if (!qdq_op_ok(&c, user))
                return 0;
        }
        return 1;
    }
    if (op == TTH_OP_QUANTIZE) {
        const tth_rexpr *a = call->u.call.args[0];
        if (!qdq_node_ok(&c, call))
            return 0;
        if (a->kind != TTH_REXPR_CALL || tth_rexpr_is_op(a, TTH_OP_DEQUANTIZE))
            return refuse(why, len, "qnn.quantize of float data not computed on the NPU");
        return qdq_op_ok(&c, a);
    }
    const struct rule *r = rule_of(op);
    if (!r)
        return refuse(why, len, "%s is not supported by the Ethos-N78", name);
    if (tth_dtype_is_float(dt(call)) || (dt(call) == TTH_DTYPE_INVALID && call->type.nfields < 0))
        return qdq_op_ok(&c, call);
    if (!(r->where & DIRECT))
        return refuse(why, len, "%s on %s: the Ethos-N78 runs it between dequantize and quantize only", name,
                      tth_dtype_name(dt(call)));
    /* the data operands; qnn operators' other operands are their weights and quantization */
    size_t ndata = op == TTH_OP_QNN_CONV2D || op == TTH_OP_QNN_MATMUL ? 1
                   : op == TTH_OP_REQUANTIZE                         ? 1
                                                                     : call->u.call.nargs;
    for (size_t i = ndata; i < call->u.call.nargs; i++)
        if (call->u.call.args[i]->kind != TTH_REXPR_CONST && !(i == 1 && op != TTH_OP_REQUANTIZE))
            return refuse(why, len, "%s with non-constant quantization parameters: the Ethos-N78 needs them at "
                          "compile time", name);
    for (size_t i = 0; i < ndata; i++) {
        const tth_rexpr *a = call->u.call.args[i];
        if (a->kind == TTH_REXPR_CONST)
            continue;
        tth_dtype d = dt(a);
        if (!is_q(d) && !(d == TTH_I32 && (op == TTH_OP_REQUANTIZE || op == TTH_OP_ADD)))
            return refuse(why, len, "%s input %zu is %s: the Ethos-N78 takes int8 or uint8", name, i,
                          tth_dtype_name(d));
        if (!shape_ok(a, name, "input", why, len))
            return 0;
    }
    if (!is_q(dt(call)) && !(dt(call) == TTH_I32 && (op == TTH_OP_QNN_CONV2D || op == TTH_OP_QNN_MATMUL ||
                                                    op == TTH_OP_ADD)) && call->type.nfields < 0)
        return refuse(why, len, "%s produces %s: the Ethos-N78 produces int8 or uint8", name,
                      tth_dtype_name(dt(call)));
    if (!shape_ok(call, name, "output", why, len))
        return 0;
    return r->check(&c, call);
}
