/* qdq.c: QDQ models to quantized operators (the idea of TVM's FakeQuantizationToInteger, written
 * for tth's patterns). Requires: a well-typed module, run before constant folding (folding turns
 * dequantize(constant weights) into float weights and the pattern is gone).
 *
 * Exporters (ONNX Runtime's quantizer, PyTorch, TFLite converters) write int8 models as
 * DequantizeLinear -> float op -> QuantizeLinear. tth imports that as
 *
 *   qnn.dequantize(x) ─┐
 *   qnn.dequantize(W) ─┼─ nn.conv2d ─ [nn.relu | clip] ─ qnn.quantize
 *   [qnn.dequantize(B int32) | B float] ┘
 *
 * and this pass rewrites it to the graph the QLinearConv importer builds (onnx_quant.c):
 *
 *   qnn.conv2d(x, W, x_zp, w_zp) [-> add(., B int32 [O,1,1])]
 *     -> qnn.requantize(., x_scale * w_scale, 0, y_scale, y_zp) [-> clip in the integer domain]
 *
 * and the same for dense layers (matmul with a constant 2-D weight, possibly transposed as Gemm's
 * transB imports, [-> add(bias)]) to qnn.matmul -> [add int32 bias] -> qnn.requantize over the
 * last axis (the QLinearMatMul importer's graph plus the bias). Also qnn.dequantize -> reshape or
 * max_pool2d -> qnn.quantize with the same scale, zero point and dtype becomes the same op on the
 * integers, and qnn.dequantize -> relu / clip(lo, hi) -> qnn.quantize the integer clip to
 * [Q(lo), Q(hi)] (a QLinearConv's activation as exporters write it).
 *
 * Conditions (each refusal is recorded with its reason, see below):
 *  - activations int8/uint8, scale and zero point constant scalars (one per tensor);
 *  - weights a constant int8/uint8 tensor behind a dequantize whose scale/zero point are constant,
 *    one per tensor or one per output channel (conv: axis 0; dense: the axis that becomes N);
 *  - bias a constant int32 behind a dequantize with zero point 0 and scale x_scale * w_scale
 *    (relative difference <= 1e-5, float rounding), or a float constant (quantized to int32 with
 *    that scale, round half to even);
 *  - every float value inside the pattern has one user, the next node of the pattern;
 *  - relu / clip(lo, hi) before the quantize become clip(Q(lo), Q(hi)) on the quantized output
 *    (Q is monotone, so Q(clip(v)) = clip(Q(v))); no clip when that spans the whole dtype;
 *  - the output quantize has a constant scalar scale and zero point, int8 or uint8.
 * DQ -> add/multiply/pools/softmax -> Q chains are left as they are: the cmsis-nn partitioner
 * matches them in that form (plugins/cmsisnn/pattern.h).
 *
 * Refusals: a conv2d or matmul whose data input is a dequantize (a candidate) that stays float,
 * and a reshape or max pool between a dequantize and a quantize that stays float, each add
 * {"node", "op", "reason"} to the function's attrs "qdq_refused" (created when needed). The
 * compile pipeline takes that list out of main after the simplify stage and, with
 * options.explain, reports each as a note (tthctl compile --explain prints them). */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend_internal.h"

typedef enum { PLAN_CONV = 1, PLAN_DENSE, PLAN_SAME } plan_kind;

typedef struct qplan {
    plan_kind kind;
    const tth_rexpr *q;        /* the qnn.quantize the pattern ends in (the rewritten node) */
    const tth_rexpr *anchor;   /* nn.conv2d / matmul / reshape */
    const tth_rexpr *dq_x;     /* dequantize of the data input */
    const tth_rexpr *dq_w;     /* dequantize of the constant weights */
    int w_transposed;          /* dense: the weight is transpose(dq_w) */
    const tth_rexpr *bias;     /* NULL, a float constant, or dequantize(int32 constant) */
    int clip;                  /* clip the integer output to [lo, hi] */
    int64_t clip_lo, clip_hi;
} qplan;

typedef struct qdq_ctx {
    tth_relay_function *fn;
    uint32_t max_id;
    uint32_t *nusers;          /* by original node id */
    const tth_rexpr **user;    /* the sole user of a node with one user */
    qplan **plan;              /* by the id of the quantize a plan rewrites */
    tth_rexpr **dq_in;         /* the rewritten input of each dequantize, by id */
    uint8_t *in_plan;          /* by id: a dequantize of constants a plan reads (not folded here) */
    json_t *refused;
} qdq_ctx;

/* ---------------------------------------------------------------- small helpers */

static int is_op(const tth_rexpr *e, tth_op op)
{
    return e && e->kind == TTH_REXPR_CALL && !e->u.call.fn && e->u.call.op == op;
}

static const tth_tensor *const_of(const tth_rexpr *e)
{
    return e && e->kind == TTH_REXPR_CONST ? e->u.constant.value : NULL;
}

static const tth_ttype *ty(const tth_rexpr *e) { return e->type.nfields < 0 ? &e->type.tensor : NULL; }

static int is_q8(tth_dtype t) { return t == TTH_I8 || t == TTH_U8; }

static int64_t qmin(tth_dtype t) { return t == TTH_I8 ? -128 : 0; }
static int64_t qmax(tth_dtype t) { return t == TTH_I8 ? 127 : 255; }

static const char *node_name(const tth_rexpr *e) { return e->span ? e->span : "?"; }

static int refuse(qdq_ctx *c, const tth_rexpr *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int refuse(qdq_ctx *c, const tth_rexpr *at, const char *fmt, ...)
{
    char why[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (c->refused)
        json_array_append_new(c->refused, json_pack("{s:s, s:s, s:s}", "node", node_name(at), "op",
                                                    tth_op_name(at->u.call.op), "reason", why));
    return 0;
}

/* The sole user of e (NULL when it has none or several). */
static const tth_rexpr *sole_user(const qdq_ctx *c, const tth_rexpr *e)
{
    return e->id <= c->max_id && c->nusers[e->id] == 1 ? c->user[e->id] : NULL;
}

static uint32_t users_of(const qdq_ctx *c, const tth_rexpr *e) { return e->id <= c->max_id ? c->nusers[e->id] : 0; }

/* Quantization parameters of a qnn.quantize / qnn.dequantize: constant scale and zero point, n
 * values each (1 or one per element of the normalized axis). */
typedef struct qparams {
    const tth_tensor *scale, *zp;
    int64_t n;    /* values of the scale (1: per tensor) */
    int64_t axis; /* normalized axis (meaningful when n > 1) */
} qparams;

/* 1 and *p filled when scale and zero point are constants with positive scales; else 0 and
 * *what names the problem. */
static int read_qparams(const tth_rexpr *q, qparams *p, const char **what)
{
    p->scale = const_of(q->u.call.args[1]);
    p->zp = const_of(q->u.call.args[2]);
    if (!p->scale || !p->zp) {
        *what = "a non-constant scale or zero point";
        return 0;
    }
    p->n = tth_ttype_numel(&p->scale->type);
    int64_t nz = tth_ttype_numel(&p->zp->type);
    if (nz != 1 && nz != p->n) {
        *what = "scale and zero point of different sizes";
        return 0;
    }
    if (nz > p->n)
        p->n = nz;
    int r = ty(q->u.call.args[0])->rank;
    p->axis = tth__attr_int(q->u.call.attrs, "axis", 1);
    if (p->axis < 0)
        p->axis += r;
    for (int64_t i = 0; i < tth_ttype_numel(&p->scale->type); i++) {
        double s = tth_tensor_get_f64(p->scale, i);
        if (!(s > 0) || !isfinite(s)) {
            *what = "a scale that is not positive and finite";
            return 0;
        }
    }
    return 1;
}

static double at_or_only(const tth_tensor *t, int64_t i)
{
    return tth_ttype_numel(&t->type) == 1 ? tth_tensor_get_f64(t, 0) : tth_tensor_get_f64(t, i);
}

/* Q(v) of a quantize with scale s and zero point zp into dtype dt, as ONNX defines it: v / s in
 * float32, rounded half to even, plus zp, saturated. */
static int64_t quantize_value(double v, double s, int64_t zp, tth_dtype dt)
{
    double r = (double)((float)v / (float)s);
    double q;
    if (isnan(r))
        q = 0;
    else if (r > 1e12)
        q = 1e12;
    else if (r < -1e12)
        q = -1e12;
    else
        q = nearbyint(r) + (double)zp;
    if (q < (double)qmin(dt))
        return qmin(dt);
    if (q > (double)qmax(dt))
        return qmax(dt);
    return (int64_t)q;
}

/* Is b's type a vector of n values along `axis` of a value of type out (broadcasting)? */
static int per_axis_vector(const tth_ttype *b, const tth_ttype *out, int axis, int64_t n)
{
    if (tth_ttype_numel(b) != n || b->rank > out->rank)
        return 0;
    for (int i = 0; i < b->rank; i++) {
        int o = out->rank - b->rank + i; /* the dimension of out this one aligns with */
        int64_t want = o == axis ? n : 1;
        if (b->shape[i] != want && !(n == 1 && b->shape[i] == 1))
            return 0;
    }
    return 1;
}

/* The add that is a layer's sole user (*add, else NULL), and the bias it adds: the add's other
 * operand when it is a vector of n values along `axis` and the sum keeps the layer's type; else
 * NULL. */
static const tth_rexpr *bias_after(const qdq_ctx *c, const tth_rexpr *layer, int axis, int64_t n,
                                   const tth_rexpr **add)
{
    const tth_rexpr *a = sole_user(c, layer);
    *add = is_op(a, TTH_OP_ADD) ? a : NULL;
    if (!*add)
        return NULL;
    const tth_rexpr *b = a->u.call.args[0] == layer ? a->u.call.args[1] : a->u.call.args[0];
    const tth_ttype *bt = ty(b), *ot = ty(layer);
    return b != layer && bt && per_axis_vector(bt, ot, axis, n) && tth_ttype_equal(ty(a), ot) ? b : NULL;
}

/* ---------------------------------------------------------------- matching (original graph) */

/* The bias operand `b` of a conv or dense layer with n output channels: a float constant, or a
 * dequantize of an int32 constant with zero point 0 and scale x_scale * w_scale. */
static int check_bias(qdq_ctx *c, const tth_rexpr *anchor, const tth_rexpr *b, const qparams *xq, const qparams *wq,
                      int64_t n)
{
    const char *an = tth_op_name(anchor->u.call.op);
    const tth_tensor *bf = const_of(b);
    if (bf) {
        if (!tth_dtype_is_float(bf->type.dtype))
            return refuse(c, anchor, "%s with a %s bias: only float32 or dequantized int32 biases are rewritten", an,
                          tth_dtype_name(bf->type.dtype));
        for (int64_t i = 0; i < n; i++)
            if (!isfinite(tth_tensor_get_f64(bf, i)))
                return refuse(c, anchor, "%s with a bias that is not finite", an);
        return 1;
    }
    if (!is_op(b, TTH_OP_DEQUANTIZE))
        return refuse(c, anchor, "%s with a bias that is neither a constant nor a dequantized int32 constant", an);
    const tth_tensor *bv = const_of(b->u.call.args[0]);
    if (!bv || bv->type.dtype != TTH_I32)
        return refuse(c, anchor, "%s with a bias dequantized from %s: the integer form adds a constant int32 bias", an,
                      bv ? tth_dtype_name(bv->type.dtype) : "a non-constant");
    qparams bq;
    const char *what;
    if (!read_qparams(b, &bq, &what))
        return refuse(c, anchor, "%s's bias is dequantized with %s", an, what);
    for (int64_t i = 0; i < tth_ttype_numel(&bq.zp->type); i++)
        if (tth_tensor_get_i64(bq.zp, i) != 0)
            return refuse(c, anchor, "%s's bias has zero point %lld, not 0: it is not the accumulator's quantization",
                          an, (long long)tth_tensor_get_i64(bq.zp, i));
    if (bq.n != 1 && bq.n != n)
        return refuse(c, anchor, "%s's bias scale has %lld values for %lld channels", an, (long long)bq.n,
                      (long long)n);
    for (int64_t i = 0; i < n; i++) {
        double want = (double)((float)at_or_only(xq->scale, 0) * (float)at_or_only(wq->scale, i));
        double got = at_or_only(bq.scale, i);
        if (fabs(got - want) > 1e-5 * want)
            return refuse(c, anchor, "%s's bias scale %.9g (channel %lld) is not x_scale * w_scale = %.9g: the int32 "
                          "bias is not in the accumulator's scale", an, got, (long long)i, want);
    }
    return 1;
}

/* The data input: dequantize of int8/uint8 with a constant per-tensor scale and zero point. */
static int check_data_input(qdq_ctx *c, const tth_rexpr *anchor, const tth_rexpr *dq, qparams *xq)
{
    const char *an = tth_op_name(anchor->u.call.op), *what;
    tth_dtype xt = ty(dq->u.call.args[0])->dtype;
    if (!is_q8(xt))
        return refuse(c, anchor, "%s on %s dequantized data: the rewrite takes int8 and uint8", an,
                      tth_dtype_name(xt));
    if (!read_qparams(dq, xq, &what))
        return refuse(c, anchor, "%s's input is dequantized with %s", an, what);
    if (xq->n != 1)
        return refuse(c, anchor, "%s's input is dequantized per channel: qnn.%s takes one input scale and zero point",
                      an, anchor->u.call.op == TTH_OP_CONV2D ? "conv2d" : "matmul");
    return 1;
}

/* The weights: dequantize of a constant int8/uint8 tensor, per tensor or per `axis` (n values). */
static int check_weights(qdq_ctx *c, const tth_rexpr *anchor, const tth_rexpr *dq, int axis, int64_t n,
                         qparams *wq)
{
    const char *an = tth_op_name(anchor->u.call.op), *what;
    if (!is_op(dq, TTH_OP_DEQUANTIZE))
        return refuse(c, anchor, "%s whose weights are not dequantized: nothing to compute in integers", an);
    const tth_tensor *w = const_of(dq->u.call.args[0]);
    if (!w || !is_q8(w->type.dtype))
        return refuse(c, anchor, "%s with weights dequantized from %s: the rewrite takes constant int8/uint8 weights",
                      an, w ? tth_dtype_name(w->type.dtype) : "a non-constant");
    if (!read_qparams(dq, wq, &what))
        return refuse(c, anchor, "%s's weights are dequantized with %s", an, what);
    if (wq->n != 1 && (wq->n != n || wq->axis != axis))
        return refuse(c, anchor, "%s's weights are quantized per axis %lld (%lld values): the integer form takes one "
                      "scale per tensor or per output channel (axis %d)", an, (long long)wq->axis, (long long)wq->n,
                      axis);
    return 1;
}

/* relu or clip(lo, hi) `act` before a quantize of scale ys, zero point zp, dtype yt: the clip of
 * the integers to [Q(lo), Q(hi)] in p (Q is monotone, so Q(clip(v)) = clip(Q(v))); returns 1 when
 * that leaves out part of yt's range */
static int act_clip(const tth_rexpr *act, double ys, int64_t zp, tth_dtype yt, qplan *p)
{
    double lo = 0, hi = INFINITY;
    if (is_op(act, TTH_OP_CLIP) && tth_clip_attrs_of(act->u.call.attrs, &lo, &hi, NULL)) {
        lo = -INFINITY; /* bounds the type relation would refuse: no clip */
        hi = INFINITY;
    }
    p->clip_lo = lo == -INFINITY || lo <= -DBL_MAX ? qmin(yt) : quantize_value(lo, ys, zp, yt);
    p->clip_hi = hi == INFINITY || hi >= DBL_MAX ? qmax(yt) : quantize_value(hi, ys, zp, yt);
    return p->clip_lo > qmin(yt) || p->clip_hi < qmax(yt);
}

/* Follow the float result of `from` (the anchor, or its bias add) down through an optional relu
 * or clip to the qnn.quantize; fill p->q and the clip. */
static int match_tail(qdq_ctx *c, const tth_rexpr *anchor, const tth_rexpr *from, qplan *p)
{
    const char *an = tth_op_name(anchor->u.call.op);
    const tth_rexpr *next = sole_user(c, from);
    if (!next && users_of(c, from) == 1)
        return refuse(c, anchor, "%s's float result is the model's output: there is no qnn.quantize to end in", an);
    if (!next)
        return refuse(c, anchor, "%s's float result has %u users: the integer form needs it to feed one qnn.quantize",
                      an, users_of(c, from));
    const tth_rexpr *act = NULL;
    if (is_op(next, TTH_OP_RELU) || is_op(next, TTH_OP_CLIP)) {
        act = next;
        const tth_rexpr *after = sole_user(c, next);
        if (!after && users_of(c, next) == 1)
            return refuse(c, anchor, "%s's %s is the model's output: there is no qnn.quantize to end in", an,
                          tth_op_name(next->u.call.op));
        if (!after)
            return refuse(c, anchor, "%s's %s has %u users: the integer form needs it to feed one qnn.quantize", an,
                          tth_op_name(next->u.call.op), users_of(c, next));
        next = after;
    }
    if (!is_op(next, TTH_OP_QUANTIZE))
        return refuse(c, anchor, "%s%s%s is followed by %s, not qnn.quantize: the result stays float", an,
                      act ? " with " : "", act ? "its activation" : "",
                      next->kind == TTH_REXPR_CALL && !next->u.call.fn ? tth_op_name(next->u.call.op) : "a function");
    qparams yq;
    const char *what;
    tth_dtype yt = ty(next)->dtype;
    if (!is_q8(yt))
        return refuse(c, anchor, "%s is quantized to %s: the rewrite produces int8 and uint8", an, tth_dtype_name(yt));
    if (!read_qparams(next, &yq, &what))
        return refuse(c, anchor, "%s's output is quantized with %s", an, what);
    if (yq.n != 1)
        return refuse(c, anchor, "%s's output is quantized per channel: qnn.requantize takes one output scale", an);
    p->q = next;
    if (act)
        p->clip = act_clip(act, tth_tensor_get_f64(yq.scale, 0), tth_tensor_get_i64(yq.zp, 0), yt, p);
    return 1;
}

/* A conv or dense layer matched up to `from`: its tail (match_tail) and the plan; 1 when planned. */
static int planned(qdq_ctx *c, const tth_rexpr *from, qplan *p, plan_kind kind, const tth_rexpr *anchor,
                   const tth_rexpr *x, const tth_rexpr *w, const tth_rexpr *bias)
{
    if (!match_tail(c, anchor, from, p))
        return 0;
    p->kind = kind;
    p->anchor = anchor;
    p->dq_x = x;
    p->dq_w = w;
    p->bias = bias;
    return 1;
}

static int match_conv(qdq_ctx *c, const tth_rexpr *conv, qplan *p)
{
    const tth_rexpr *x = conv->u.call.args[0], *w = conv->u.call.args[1];
    const tth_ttype *ot = ty(conv);
    int64_t O = ot->shape[1];
    qparams xq, wq;
    if (!check_data_input(c, conv, x, &xq) || !check_weights(c, conv, w, 0, O, &wq))
        return 0;
    if (ty(w)->rank != 4)
        return refuse(c, conv, "nn.conv2d with rank-%d weights", ty(w)->rank);
    const tth_rexpr *from = conv, *bias = conv->u.call.nargs > 2 ? conv->u.call.args[2] : NULL;
    if (bias && !check_bias(c, conv, bias, &xq, &wq, O))
        return 0;
    /* a bias added after the convolution (Conv then Add) */
    const tth_rexpr *add, *b = bias ? NULL : bias_after(c, conv, 1, O, &add);
    if (b && (const_of(b) || is_op(b, TTH_OP_DEQUANTIZE))) {
        if (!check_bias(c, conv, b, &xq, &wq, O))
            return 0;
        bias = b;
        from = add;
    }
    return planned(c, from, p, PLAN_CONV, conv, x, w, bias);
}

static int match_dense(qdq_ctx *c, const tth_rexpr *mm, qplan *p)
{
    const tth_rexpr *a = mm->u.call.args[0], *w = mm->u.call.args[1];
    const tth_ttype *ot = ty(mm);
    int transposed = 0;
    if (is_op(w, TTH_OP_TRANSPOSE)) {
        int64_t axes[2];
        if (ty(w)->rank != 2 || tth__attr_ints(w->u.call.attrs, "axes", axes, 2) != 2 || axes[0] != 1 || axes[1] != 0)
            return refuse(c, mm, "matmul whose weights are transposed other than [1, 0]");
        transposed = 1;
        w = w->u.call.args[0];
    }
    if (ty(w)->rank != 2)
        return refuse(c, mm, "matmul with rank-%d weights: the dense rewrite takes 2-D [K, N] weights", ty(w)->rank);
    if (ty(a)->rank < 2)
        return refuse(c, mm, "matmul of a rank-%d input: the dense rewrite takes [.., M, K]", ty(a)->rank);
    int64_t N = ot->shape[ot->rank - 1];
    qparams xq, wq;
    if (!check_data_input(c, mm, a, &xq) || !check_weights(c, mm, w, transposed ? 0 : 1, N, &wq))
        return 0;
    const tth_rexpr *from = mm, *bias = NULL;
    const tth_rexpr *add, *b = bias_after(c, mm, ot->rank - 1, N, &add);
    if (add) {
        if (!b)
            return refuse(c, mm, "matmul followed by an add that is not a bias of %lld values along the last axis",
                          (long long)N);
        if (!check_bias(c, mm, b, &xq, &wq, N))
            return 0;
        bias = b;
        from = add;
    }
    p->w_transposed = transposed;
    return planned(c, from, p, PLAN_DENSE, mm, a, w, bias);
}

/* quantize(op(dequantize(x))) with the same scale, zero point and dtype on both sides, for an op
 * that only moves values (reshape) or picks one of them (max_pool2d: quantization is monotone,
 * and the padding is never picked): the same op on the integers. */
static int match_same(qdq_ctx *c, const tth_rexpr *rs, qplan *p)
{
    const char *op = tth_op_name(rs->u.call.op);
    const tth_rexpr *dq = rs->u.call.args[0], *q = sole_user(c, rs);
    if (!is_op(q, TTH_OP_QUANTIZE))
        return 0; /* a dequantized value reshaped for float use: not a candidate */
    qparams a, b;
    const char *what;
    if (!read_qparams(dq, &a, &what) || !read_qparams(q, &b, &what))
        return refuse(c, rs, "%s between a dequantize and a quantize with %s", op, what);
    if (a.n != 1 || b.n != 1)
        return refuse(c, rs, "%s between per-channel quantizations", op);
    if (ty(dq->u.call.args[0])->dtype != ty(q)->dtype ||
        (float)tth_tensor_get_f64(a.scale, 0) != (float)tth_tensor_get_f64(b.scale, 0) ||
        tth_tensor_get_i64(a.zp, 0) != tth_tensor_get_i64(b.zp, 0))
        return refuse(c, rs, "%s between different quantizations (%s scale %g zero point %lld -> %s scale %g zero "
                      "point %lld): it stays a float %s", op, tth_dtype_name(ty(dq->u.call.args[0])->dtype),
                      tth_tensor_get_f64(a.scale, 0), (long long)tth_tensor_get_i64(a.zp, 0),
                      tth_dtype_name(ty(q)->dtype), tth_tensor_get_f64(b.scale, 0),
                      (long long)tth_tensor_get_i64(b.zp, 0), op);
    if (is_op(rs, TTH_OP_RELU) || is_op(rs, TTH_OP_CLIP)) {
        /* Q(clip(DQ(x), lo, hi)) = clip(x, Q(lo), Q(hi)): Q(DQ(x)) = x, and Q is monotone */
        act_clip(rs, tth_tensor_get_f64(b.scale, 0), tth_tensor_get_i64(b.zp, 0), ty(q)->dtype, p);
        p->clip = 1;
    }
    p->kind = PLAN_SAME;
    p->anchor = rs;
    p->dq_x = dq;
    p->q = q;
    return 1;
}

/* ---------------------------------------------------------------- building (rewritten graph) */

static tth_rexpr *k_tensor(tth_relay_module *m, tth_tensor *t, tth_diag *diag)
{
    tth_rexpr *e = t ? tth_relay_const(m, t, NULL) : NULL;
    if (!e)
        tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory rewriting QDQ");
    return e;
}

/* e (a call on constants) as the constant it computes, the way the importer folds as it builds:
 * the calls built after it then keep their span. */
static tth_rexpr *folded(tth_relay_module *m, tth_rexpr *e, tth_diag *diag)
{
    return e ? tth__fold_call(m, e, TTH_FOLD_MAX_ELEMS, diag) : NULL;
}

/* The int32 bias of n values in the shape `shape`/`rank`: the dequantized constant as it is, or
 * the float constant quantized with x_scale * w_scale. */
static tth_rexpr *int_bias(tth_relay_module *m, const qplan *p, int64_t n, const int64_t *shape, int rank,
                           tth_diag *diag)
{
    tth_ttype bt = {.dtype = TTH_I32, .rank = rank};
    memcpy(bt.shape, shape, sizeof(int64_t) * (size_t)rank);
    tth_tensor *t = tth_tensor_new(&bt, NULL);
    if (!t)
        return k_tensor(m, NULL, diag);
    const tth_tensor *bf = const_of(p->bias);
    const tth_tensor *xs = const_of(p->dq_x->u.call.args[1]), *ws = const_of(p->dq_w->u.call.args[1]);
    int32_t *d = t->data;
    for (int64_t i = 0; i < n; i++) {
        if (!bf) {
            d[i] = (int32_t)tth_tensor_get_i64(const_of(p->bias->u.call.args[0]), i);
            continue;
        }
        double s = (double)((float)at_or_only(xs, 0) * (float)at_or_only(ws, i));
        double v = nearbyint(tth_tensor_get_f64(bf, i) / s);
        d[i] = v >= 2147483647.0 ? INT32_MAX : v <= -2147483648.0 ? INT32_MIN : (int32_t)v;
    }
    return k_tensor(m, t, diag);
}

static tth_rexpr *build(qdq_ctx *c, tth_relay_module *m, const qplan *p, tth_diag *diag)
{
    tth_rexpr *x = c->dq_in[p->dq_x->id];
    tth_rexpr *const *qa = p->q->u.call.args;
    if (!x)
        return NULL;
    if (p->kind == PLAN_SAME && p->clip) /* relu or clip: the integer clip */
        return tth_relay_call(m, TTH_OP_CLIP, &x, 1,
                              json_pack("{s:f, s:f}", "a_min", (double)p->clip_lo, "a_max", (double)p->clip_hi), diag);
    if (p->kind == PLAN_SAME)
        return tth_relay_call(m, p->anchor->u.call.op, &x, 1, json_deep_copy(p->anchor->u.call.attrs), diag);
    tth_rexpr *const *wa = p->dq_w->u.call.args;
    const tth_ttype *ot = ty(p->anchor);
    tth_rexpr *acc, *w = wa[0];
    int axis;
    int64_t n;
    if (p->kind == PLAN_CONV) {
        tth_rexpr *args[4] = {x, w, p->dq_x->u.call.args[2], wa[2]};
        acc = tth_relay_call(m, TTH_OP_QNN_CONV2D, args, 4, json_deep_copy(p->anchor->u.call.attrs), diag);
        axis = 1;
        n = ot->shape[1];
    } else {
        if (p->w_transposed) {
            int64_t perm[2] = {1, 0};
            w = folded(m, tth_relay_call(m, TTH_OP_TRANSPOSE, &w, 1,
                                         json_pack("{s:o}", "axes", tth__json_ints(perm, 2)), diag), diag);
            if (!w)
                return NULL;
        }
        tth_rexpr *args[4] = {x, w, p->dq_x->u.call.args[2], wa[2]};
        acc = tth_relay_call(m, TTH_OP_QNN_MATMUL, args, 4, NULL, diag);
        axis = ot->rank - 1;
        n = ot->shape[ot->rank - 1];
    }
    if (!acc)
        return NULL;
    if (p->bias) {
        int64_t conv_shape[3] = {n, 1, 1};
        tth_rexpr *b = int_bias(m, p, n, p->kind == PLAN_CONV ? conv_shape : &n, p->kind == PLAN_CONV ? 3 : 1, diag);
        tth_rexpr *args[2] = {acc, b};
        if (!b || !(acc = tth_relay_call(m, TTH_OP_ADD, args, 2, NULL, diag)))
            return NULL;
    }
    /* requantize with in_scale = x_scale * w_scale (the multiply the QLinearConv importer
     * writes, folded as it folds it), in_zero_point 0 */
    tth_rexpr *sargs[2] = {p->dq_x->u.call.args[1], wa[1]};
    tth_rexpr *insc = folded(m, tth_relay_call(m, TTH_OP_MULTIPLY, sargs, 2, NULL, diag), diag);
    tth_ttype zt = {.dtype = TTH_I32, .rank = 0};
    tth_rexpr *zero = insc ? k_tensor(m, tth_tensor_new(&zt, NULL), diag) : NULL;
    if (!zero)
        return NULL;
    tth_dtype yt = ty(p->q)->dtype;
    tth_rexpr *rargs[5] = {acc, insc, zero, qa[1], qa[2]};
    tth_rexpr *y = tth_relay_call(m, TTH_OP_REQUANTIZE, rargs, 5,
                                  json_pack("{s:I, s:s}", "axis", (json_int_t)axis, "out_dtype", tth_dtype_name(yt)),
                                  diag);
    if (y && p->clip)
        y = tth_relay_call(m, TTH_OP_CLIP, &y, 1,
                           json_pack("{s:f, s:f}", "a_min", (double)p->clip_lo, "a_max", (double)p->clip_hi), diag);
    return y;
}

/* A dequantize of constant tensors (the importer leaves them for this pass). */
static int is_const_dq(const tth_rexpr *e)
{
    return is_op(e, TTH_OP_DEQUANTIZE) && const_of(e->u.call.args[0]) && const_of(e->u.call.args[1]) &&
           const_of(e->u.call.args[2]);
}

static tth_rexpr *qdq_visit(void *ctx, tth_relay_module *m, tth_rexpr *orig, tth_rexpr *const *args, size_t nargs,
                            tth_diag *diag)
{
    (void)nargs;
    qdq_ctx *c = ctx;
    /* a node the walk rebuilds (an argument changed) keeps its span */
    tth_relay_set_span(m, orig->span);
    if (is_op(orig, TTH_OP_DEQUANTIZE) && orig->id <= c->max_id) {
        c->dq_in[orig->id] = args[0];
        /* weights no plan reads become float constants here, as the importer used to fold them,
         * and their users keep their spans */
        if (is_const_dq(orig) && !c->in_plan[orig->id])
            return tth__fold_call(m, orig, TTH_FOLD_MAX_ELEMS, diag);
    }
    if (!is_op(orig, TTH_OP_QUANTIZE) || orig->id > c->max_id || !c->plan[orig->id])
        return TTH_REWRITE_KEEP;
    const qplan *p = c->plan[orig->id];
    tth_relay_set_span(m, p->anchor->span);
    tth_rexpr *r = build(c, m, p, diag);
    if (!r && diag && !diag->code)
        tth_diag_set(diag, TTH_EINTERNAL, orig->span, "rewriting the QDQ pattern of %s failed",
                     tth_op_name(p->anchor->u.call.op));
    return r;
}

/* ---------------------------------------------------------------- the pass */

static int qdq_function(tth_relay_module *m, tth_relay_function *fn, tth_diag *diag)
{
    qdq_ctx c = {.fn = fn};
    tth_rexpr **nodes = NULL;
    int64_t n = tth_relay_topo(m, fn, &nodes);
    if (n < 0)
        return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory walking function '%s'", fn->name);
    c.nusers = tth__count_users(m, fn, &c.max_id);
    size_t ids = (size_t)c.max_id + 1;
    c.user = calloc(ids, sizeof *c.user);
    c.plan = calloc(ids, sizeof *c.plan);
    c.dq_in = calloc(ids, sizeof *c.dq_in);
    c.in_plan = calloc(ids, 1);
    c.refused = json_array();
    qplan *plans = calloc((size_t)n + 1, sizeof *plans);
    size_t nplans = 0;
    int rc = 0;
    if (!c.nusers || !c.user || !c.plan || !c.dq_in || !c.in_plan || !c.refused || !plans) {
        rc = tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory rewriting QDQ");
        goto done;
    }
    for (int64_t i = 0; i < n; i++) {
        tth_rexpr *const *args;
        size_t na = tth__node_args(nodes[i], &args);
        for (size_t k = 0; k < na; k++)
            if (c.nusers[args[k]->id] == 1)
                c.user[args[k]->id] = nodes[i];
    }
    /* match: each candidate is a conv2d / matmul / reshape / max_pool2d / relu / clip over a
     * dequantize */
    size_t nconst_dq = 0;
    for (int64_t i = 0; i < n; i++) {
        const tth_rexpr *e = nodes[i];
        nconst_dq += is_const_dq(e);
        if (!(is_op(e, TTH_OP_CONV2D) || is_op(e, TTH_OP_MATMUL) || is_op(e, TTH_OP_RESHAPE) ||
              is_op(e, TTH_OP_MAX_POOL2D) || is_op(e, TTH_OP_RELU) || is_op(e, TTH_OP_CLIP)) ||
            !is_op(e->u.call.args[0], TTH_OP_DEQUANTIZE) || !ty(e))
            continue;
        qplan *p = &plans[nplans];
        memset(p, 0, sizeof *p);
        int ok = e->u.call.op == TTH_OP_CONV2D ? match_conv(&c, e, p)
                 : e->u.call.op == TTH_OP_MATMUL ? match_dense(&c, e, p)
                                                  : match_same(&c, e, p);
        if (ok) {
            c.plan[p->q->id] = p;
            if (p->dq_w)
                c.in_plan[p->dq_w->id] = 1;
            if (p->bias && is_op(p->bias, TTH_OP_DEQUANTIZE))
                c.in_plan[p->bias->id] = 1;
            nplans++;
        }
    }
    if (nplans || nconst_dq) {
        tth__rewriter rw = {.visit = qdq_visit, .ctx = &c};
        rc = tth__rewrite_function(m, fn, &rw, diag);
        tth_relay_set_span(m, NULL);
    }
    if (!rc && json_array_size(c.refused) && json_is_object(fn->attrs)) { /* the module keeps fn->attrs */
        json_t *old = json_object_get(fn->attrs, "qdq_refused");
        if (json_is_array(old))
            json_array_extend(old, c.refused);
        else
            json_object_set(fn->attrs, "qdq_refused", c.refused);
    }
done:
    free(c.nusers);
    free(c.user);
    free(c.plan);
    free(c.dq_in);
    free(c.in_plan);
    free(plans);
    json_decref(c.refused);
    return rc;
}

int tth_relay_qdq_to_integer(tth_relay_module *m, tth_diag *diag)
{
    if (!m)
        return tth_diag_set(diag, TTH_EINVAL, NULL, "no module");
    for (size_t i = 0; i < m->nfuncs; i++) {
        int rc = qdq_function(m, m->funcs[i], diag);
        if (rc)
            return rc;
    }
    return 0;
}
