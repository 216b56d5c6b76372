/* pattern.c: matching the cmsis-nn patterns of pattern.h; every refusal says why. */
#include "pattern.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int refuse(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int refuse(char *why, size_t len, const char *fmt, ...)
{
    if (why && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, len, fmt, ap);
        va_end(ap);
    }
    return 0;
}

const char *cn_kind_name(cn_kind k)
{
    switch (k) {
    case CN_CONV: return "conv2d";
    case CN_DWCONV: return "depthwise conv2d";
    case CN_FC: return "fully connected";
    case CN_SOFTMAX: return "softmax";
    case CN_ADD: return "add";
    case CN_MUL: return "mul";
    case CN_MAXPOOL: return "max pool";
    case CN_AVGPOOL: return "avg pool";
    }
    return "?";
}

static tth_dtype dt(const tth_rexpr *e)
{
    const tth_ttype *t = tth_rexpr_ttype(e);
    return t ? t->dtype : TTH_DTYPE_INVALID;
}

static int add_node(cn_match *m, const tth_rexpr *e)
{
    if (m->nnodes >= CN_MAX_NODES)
        return 0;
    m->nodes[m->nnodes++] = e;
    return 1;
}

/* A scalar constant zero point that fits int8. */
static int zp_i8(const tth_rexpr *e, int32_t *zp)
{
    double v;
    if (!tth_rexpr_const_scalar(e, &v) || v < -128 || v > 127 || v != floor(v))
        return 0;
    *zp = (int32_t)v;
    return 1;
}

/* requantize (or quantize) output scale/zero point: scalar constants, int8 out. */
static int out_quant(const tth_rexpr *q, int scale_arg, int zp_arg, cn_match *m, char *why, size_t len)
{
    const char *op = tth_op_name(q->u.call.op);
    if (dt(q) != TTH_I8)
        return refuse(why, len, "%s to %s: CMSIS-NN's kernels produce int8", op, tth_dtype_name(dt(q)));
    if (!tth_rexpr_const_scalar(q->u.call.args[scale_arg], &m->out_scale) || !(m->out_scale > 0))
        return refuse(why, len, "%s with a non-constant or per-channel output scale: CMSIS-NN needs one positive "
                      "constant", op);
    if (!zp_i8(q->u.call.args[zp_arg], &m->out_zp))
        return refuse(why, len, "%s with a non-constant output zero point: CMSIS-NN needs one int8 constant", op);
    return 1;
}

/* The tail after an int32 accumulator: [add(acc, bias)] -> requantize -> [clip]. oc: channels. */
static int match_tail(const tth_relay_users *u, const tth_rexpr *acc, int64_t oc, int per_channel_ok, cn_match *m,
                      char *why, size_t len)
{
    const char *anchor = tth_op_name(acc->u.call.op);
    if (tth_relay_nusers(u, acc) != 1)
        return refuse(why, len, "%s whose int32 result is used %zu times: CMSIS-NN fuses it with one requantize",
                      anchor, tth_relay_nusers(u, acc));
    const tth_rexpr *next = tth_relay_user(u, acc, 0);
    if (tth_rexpr_is_op(next, TTH_OP_ADD)) {
        const tth_rexpr *b = next->u.call.args[1] == acc ? next->u.call.args[0] : next->u.call.args[1];
        const tth_tensor *bt = tth_rexpr_const(b);
        if (!bt || bt->type.dtype != TTH_I32 || tth_ttype_numel(&bt->type) != oc)
            return refuse(why, len, "%s followed by add of something other than a constant int32 bias of %lld values",
                          anchor, (long long)oc);
        if (next->u.call.args[0] == next->u.call.args[1] || !tth_rexpr_ttype(next) ||
            !tth_ttype_equal(tth_rexpr_ttype(next), tth_rexpr_ttype(acc)))
            return refuse(why, len, "%s followed by an add that broadcasts beyond a per-channel bias", anchor);
        m->bias = bt;
        add_node(m, next);
        if (tth_relay_nusers(u, next) != 1)
            return refuse(why, len, "%s's bias add is used %zu times: CMSIS-NN fuses it with one requantize", anchor,
                          tth_relay_nusers(u, next));
        acc = next;
        next = tth_relay_user(u, next, 0);
    }
    if (!tth_rexpr_is_op(next, TTH_OP_REQUANTIZE))
        return refuse(why, len, "%s not followed by qnn.requantize: CMSIS-NN computes conv/fc only with its "
                      "requantization", anchor);
    const tth_rexpr *rq = next;
    const tth_tensor *s = tth_rexpr_const(rq->u.call.args[1]);
    int64_t ns = s ? tth_ttype_numel(&s->type) : 0;
    if (!s || !(ns == 1 || (per_channel_ok && ns == oc)))
        return refuse(why, len, "qnn.requantize with %s input scale: %s", s ? "a" : "a non-constant",
                      per_channel_ok ? "CMSIS-NN needs a constant, one value or one per output channel"
                                     : "arm_fully_connected_s8 takes one per-tensor multiplier");
    for (int64_t i = 0; i < ns; i++)
        if (!(tth_tensor_get_f64(s, i) > 0))
            return refuse(why, len, "qnn.requantize with a non-positive input scale");
    if (!tth_rexpr_const_all_zero(rq->u.call.args[2]))
        return refuse(why, len, "qnn.requantize with a non-zero input zero point: CMSIS-NN's accumulator has none");
    if (!out_quant(rq, 3, 4, m, why, len))
        return 0;
    m->req_scale = s;
    add_node(m, rq);
    m->out = rq;
    const tth_rexpr *cl = tth_relay_sole_user_op(u, rq, TTH_OP_CLIP);
    if (cl) {
        double lo, hi;
        if (tth_clip_attrs_of(cl->u.call.attrs, &lo, &hi, NULL))
            return refuse(why, len, "clip without a_min and a_max");
        m->act_min = (int32_t)fmax(-128, ceil(lo));
        m->act_max = (int32_t)fmin(127, floor(hi));
        if (m->act_min > m->act_max)
            return refuse(why, len, "clip [%g, %g] leaves no int8 value", lo, hi);
        add_node(m, cl);
        m->out = cl;
    }
    return 1;
}

/* the window of a conv or pool call (libtth's one reader of it) into the match */
static void window_to_match(const tth_window_attrs *wa, cn_match *m)
{
    memcpy(m->stride, wa->strides, sizeof m->stride);
    memcpy(m->pad, wa->padding, sizeof m->pad);
    memcpy(m->dilation, wa->dilation, sizeof m->dilation);
}

static int match_conv(const tth_relay_users *u, const tth_rexpr *c, cn_match *m, char *why, size_t len)
{
    char b1[96];
    const tth_rexpr *x = c->u.call.args[0];
    const tth_tensor *w = tth_rexpr_const(c->u.call.args[1]);
    if (dt(x) == TTH_I16)
        return refuse(why, len, "qnn.conv2d on int16: tth lowers CMSIS-NN's int8 convolutions only");
    if (dt(x) != TTH_I8)
        return refuse(why, len, "qnn.conv2d on %s: CMSIS-NN convolves int8", tth_rexpr_type_str(x, b1, sizeof b1));
    if (!w || w->type.dtype != TTH_I8)
        return refuse(why, len, "qnn.conv2d with %s weights: CMSIS-NN needs constant int8 weights",
                      w ? tth_dtype_name(w->type.dtype) : "non-constant");
    if (!zp_i8(c->u.call.args[2], &m->in_zp[0]))
        return refuse(why, len, "qnn.conv2d with a non-constant or per-channel input zero point");
    if (!tth_rexpr_const_all_zero(c->u.call.args[3]))
        return refuse(why, len, "qnn.conv2d with a non-zero weight zero point: CMSIS-NN needs symmetric weights "
                      "(zero point 0)");
    m->w = w;
    const tth_ttype *xt = tth_rexpr_ttype(x), *ot = tth_rexpr_ttype(c);
    if (xt->shape[0] != 1)
        return refuse(why, len, "qnn.conv2d with batch %lld: tth's NCHW->NHWC staging for CMSIS-NN takes batch 1",
                      (long long)xt->shape[0]);
    m->n = 1;
    m->c = xt->shape[1];
    m->h = xt->shape[2];
    m->w_ = xt->shape[3];
    m->oc = w->type.shape[0];
    m->kh = w->type.shape[2];
    m->kw = w->type.shape[3];
    m->oh = ot->shape[2];
    m->ow = ot->shape[3];
    tth_window_attrs wa;
    tth_diag d;
    if (tth_window_attrs_of(c->u.call.op, c->u.call.attrs, &wa, &d) != 0)
        return refuse(why, len, "%s", d.message);
    window_to_match(&wa, m);
    if (m->dilation[0] != 1 || m->dilation[1] != 1)
        return refuse(why, len, "qnn.conv2d with dilation [%lld, %lld]: tth sizes CMSIS-NN's buffers for dilation 1",
                      (long long)m->dilation[0], (long long)m->dilation[1]);
    int64_t groups = wa.groups;
    if (groups == 1) {
        m->kind = CN_CONV;
    } else if (groups == m->c && m->oc == m->c && w->type.shape[1] == 1) {
        m->kind = CN_DWCONV;
    } else if (groups == m->c) {
        return refuse(why, len, "depthwise qnn.conv2d with channel multiplier %lld: tth sizes CMSIS-NN's depthwise "
                      "buffer for multiplier 1", (long long)(m->oc / (m->c ? m->c : 1)));
    } else {
        return refuse(why, len, "qnn.conv2d with %lld groups of %lld channels: CMSIS-NN has plain and depthwise "
                      "convolutions only", (long long)groups, (long long)m->c);
    }
    m->in[0] = x;
    add_node(m, c);
    if (!match_tail(u, c, m->oc, 1, m, why, len))
        return 0;
    if (m->kind == CN_DWCONV && !m->bias)
        return refuse(why, len, "depthwise qnn.conv2d without a bias add: CMSIS-NN's depthwise pattern needs one");
    return 1;
}

static int match_fc(const tth_relay_users *u, const tth_rexpr *mm, cn_match *m, char *why, size_t len)
{
    char b1[96];
    const tth_rexpr *a = mm->u.call.args[0];
    const tth_tensor *w = tth_rexpr_const(mm->u.call.args[1]);
    const tth_ttype *at = tth_rexpr_ttype(a);
    if (dt(a) != TTH_I8 || at->rank != 2)
        return refuse(why, len, "qnn.matmul on %s: arm_fully_connected_s8 takes int8 [batch, K]",
                      tth_rexpr_type_str(a, b1, sizeof b1));
    if (!w || w->type.dtype != TTH_I8 || w->type.rank != 2)
        return refuse(why, len, "qnn.matmul with %s second operand: CMSIS-NN's fully connected needs constant int8 "
                      "[K, N] weights", w ? "a non-int8 or non-2-D" : "a non-constant");
    if (!zp_i8(mm->u.call.args[2], &m->in_zp[0]))
        return refuse(why, len, "qnn.matmul with a non-constant input zero point");
    if (!tth_rexpr_const_all_zero(mm->u.call.args[3]))
        return refuse(why, len, "qnn.matmul with a non-zero weight zero point: CMSIS-NN needs symmetric weights");
    m->kind = CN_FC;
    m->w = w;
    m->n = at->shape[0];
    m->c = at->shape[1];
    m->oc = w->type.shape[1];
    m->in[0] = a;
    add_node(m, mm);
    return match_tail(u, mm, m->oc, 0, m, why, len);
}

/* dequantize(int8, scalar scale, scalar zp) used only by `user`. */
static int dq_input(const tth_relay_users *u, const tth_rexpr *d, const tth_rexpr *user, int i, cn_match *m, char *why,
                    size_t len)
{
    const char *op = tth_op_name(user->u.call.op);
    if (!tth_rexpr_is_op(d, TTH_OP_DEQUANTIZE) || dt(d->u.call.args[0]) != TTH_I8)
        return refuse(why, len, "%s on float data not dequantized from int8: CMSIS-NN computes int8", op);
    if (!tth_rexpr_const_scalar(d->u.call.args[1], &m->in_scale[i]) || !(m->in_scale[i] > 0) ||
        !zp_i8(d->u.call.args[2], &m->in_zp[i]))
        return refuse(why, len, "%s input dequantized with a non-constant or per-channel scale/zero point", op);
    size_t n = tth_relay_nusers(u, d);
    if (n != 1 && !(n == 2 && tth_relay_user(u, d, 0) == user && tth_relay_user(u, d, 1) == user))
        return refuse(why, len, "qnn.dequantize feeding %s has other users: it would be computed twice", op);
    m->in[i] = d->u.call.args[0];
    return 1;
}

static int quant_output(const tth_relay_users *u, const tth_rexpr *e, cn_match *m, char *why, size_t len)
{
    const tth_rexpr *q = tth_relay_sole_user_op(u, e, TTH_OP_QUANTIZE);
    if (!q)
        return refuse(why, len, "%s not followed by one qnn.quantize to int8: CMSIS-NN produces int8",
                      tth_op_name(e->u.call.op));
    if (!out_quant(q, 1, 2, m, why, len))
        return 0;
    add_node(m, q);
    m->out = q;
    return 1;
}

static int match_softmax(const tth_relay_users *u, const tth_rexpr *s, cn_match *m, char *why, size_t len)
{
    const tth_ttype *t = tth_rexpr_ttype(s);
    int64_t axis = tth_call_attr_int(s, "axis", -1);
    if (axis < 0)
        axis += t->rank;
    if (axis != t->rank - 1)
        return refuse(why, len, "nn.softmax over axis %lld of %d: arm_softmax_s8 works on rows (the last axis)",
                      (long long)axis, t->rank);
    if (!dq_input(u, s->u.call.args[0], s, 0, m, why, len))
        return 0;
    m->kind = CN_SOFTMAX;
    add_node(m, s->u.call.args[0]);
    add_node(m, s);
    if (!quant_output(u, s, m, why, len))
        return 0;
    if (fabs(m->out_scale - 1.0 / 256) > 1e-9 || m->out_zp != -128)
        return refuse(why, len, "softmax quantized with scale %g and zero point %d: arm_softmax_s8 writes scale "
                      "1/256, zero point -128", m->out_scale, m->out_zp);
    m->c = t->shape[t->rank - 1];
    m->n = tth_ttype_numel(t) / (m->c ? m->c : 1);
    return 1;
}

static int match_binary(const tth_relay_users *u, const tth_rexpr *e, cn_match *m, char *why, size_t len)
{
    const char *op = tth_op_name(e->u.call.op);
    const tth_rexpr *a = e->u.call.args[0], *b = e->u.call.args[1];
    if (!dq_input(u, a, e, 0, m, why, len) || !dq_input(u, b, e, 1, m, why, len))
        return 0;
    if (!tth_rexpr_ttype(a) || !tth_rexpr_ttype(b) || !tth_ttype_equal(tth_rexpr_ttype(a), tth_rexpr_ttype(b)))
        return refuse(why, len, "%s with broadcasting: CMSIS-NN's elementwise kernels need equal shapes", op);
    m->kind = e->u.call.op == TTH_OP_ADD ? CN_ADD : CN_MUL;
    add_node(m, a);
    if (b != a)
        add_node(m, b);
    add_node(m, e);
    if (!quant_output(u, e, m, why, len))
        return 0;
    m->n = tth_ttype_numel(tth_rexpr_ttype(e));
    return 1;
}

static int match_pool(const tth_relay_users *u, const tth_rexpr *p, cn_match *m, char *why, size_t len)
{
    const char *op = tth_op_name(p->u.call.op);
    const tth_ttype *it = tth_rexpr_ttype(p->u.call.args[0]), *ot = tth_rexpr_ttype(p);
    if (it->shape[0] != 1)
        return refuse(why, len, "%s with batch %lld: CMSIS-NN pools batch 1", op, (long long)it->shape[0]);
    tth_window_attrs wa;
    tth_diag d;
    if (tth_window_attrs_of(p->u.call.op, p->u.call.attrs, &wa, &d) != 0)
        return refuse(why, len, "%s", d.message);
    window_to_match(&wa, m);
    const int64_t *ps = wa.pool_size;
    if (m->dilation[0] != 1 || m->dilation[1] != 1)
        return refuse(why, len, "%s with dilation: CMSIS-NN pools without dilation", op);
    if (wa.ceil_mode)
        return refuse(why, len, "%s with ceil_mode: CMSIS-NN's output size rounds down", op);
    if (p->u.call.op == TTH_OP_AVG_POOL2D && wa.count_include_pad &&
        (m->pad[0] || m->pad[1] || m->pad[2] || m->pad[3]))
        return refuse(why, len, "nn.avg_pool2d counting padding: arm_avgpool_s8 averages the valid elements only");
    m->kind = p->u.call.op == TTH_OP_MAX_POOL2D ? CN_MAXPOOL : CN_AVGPOOL;
    if (m->kind == CN_MAXPOOL && dt(p->u.call.args[0]) == TTH_I8) {
        /* a max pool on the integers (the QDQ pass's form of dequantize -> max pool -> quantize
         * with one quantization): the same kernel, nothing to requantize */
        m->in[0] = p->u.call.args[0];
        m->out = p;
        add_node(m, p);
    } else {
        if (!dq_input(u, p->u.call.args[0], p, 0, m, why, len))
            return 0;
        add_node(m, p->u.call.args[0]);
        add_node(m, p);
        if (!quant_output(u, p, m, why, len))
            return 0;
    }
    if (m->out_zp != m->in_zp[0] || fabs(m->out_scale - m->in_scale[0]) > 1e-6 * m->in_scale[0])
        return refuse(why, len, "%s requantizing (scale %g -> %g, zero point %d -> %d): CMSIS-NN pools keep the "
                      "input's quantization", op, m->in_scale[0], m->out_scale, m->in_zp[0], m->out_zp);
    m->n = 1;
    m->c = it->shape[1];
    m->h = it->shape[2];
    m->w_ = it->shape[3];
    m->kh = ps[0];
    m->kw = ps[1];
    m->oc = m->c;
    m->oh = ot->shape[2];
    m->ow = ot->shape[3];
    return 1;
}

int cn_match_at(const tth_relay_users *u, const tth_rexpr *anchor, cn_match *m, char *why, size_t len)
{
    memset(m, 0, sizeof *m);
    /* the int8 range unless a fused clip narrows it (conv, fc): every kernel clamps to it */
    m->act_min = -128;
    m->act_max = 127;
    if (!anchor || anchor->kind != TTH_REXPR_CALL)
        return refuse(why, len, "not an operator call");
    switch (anchor->u.call.op) {
    case TTH_OP_QNN_CONV2D: return match_conv(u, anchor, m, why, len);
    case TTH_OP_QNN_MATMUL: return match_fc(u, anchor, m, why, len);
    case TTH_OP_SOFTMAX: return match_softmax(u, anchor, m, why, len);
    case TTH_OP_ADD:
    case TTH_OP_MULTIPLY:
        if (dt(anchor) != TTH_F32)
            return refuse(why, len, "%s on %s outside a conv/fc bias: CMSIS-NN adds and multiplies dequantized int8",
                          tth_op_name(anchor->u.call.op), tth_dtype_name(dt(anchor)));
        return match_binary(u, anchor, m, why, len);
    case TTH_OP_MAX_POOL2D:
    case TTH_OP_AVG_POOL2D: return match_pool(u, anchor, m, why, len);
    default: return refuse(why, len, "%s has no CMSIS-NN kernel", tth_op_name(anchor->u.call.op));
    }
}

static int contains(const cn_match *m, const tth_rexpr *e)
{
    for (size_t i = 0; i < m->nnodes; i++)
        if (m->nodes[i] == e)
            return 1;
    return 0;
}

/* The conv/matmul under a requantize's input: the input itself, or the operand of its bias add
 * that is one (either order). */
static const tth_rexpr *accumulator(const tth_rexpr *x)
{
    if (tth_rexpr_is_op(x, TTH_OP_ADD))
        for (size_t i = 0; i < 2; i++)
            if (tth_rexpr_is_op(x->u.call.args[i], TTH_OP_QNN_CONV2D) || tth_rexpr_is_op(x->u.call.args[i], TTH_OP_QNN_MATMUL))
                return x->u.call.args[i];
    return x;
}

/* The anchors `call` could belong to. */
static size_t anchors_of(const tth_relay_users *u, const tth_rexpr *call, const tth_rexpr **out, size_t max)
{
    size_t n = 0;
    const tth_rexpr *a0 = call->u.call.nargs ? call->u.call.args[0] : NULL;
    switch (call->u.call.op) {
    case TTH_OP_QNN_CONV2D: case TTH_OP_QNN_MATMUL: case TTH_OP_SOFTMAX: case TTH_OP_MULTIPLY:
    case TTH_OP_MAX_POOL2D: case TTH_OP_AVG_POOL2D:
        out[n++] = call;
        break;
    case TTH_OP_ADD:
        if (dt(call) == TTH_I32) {
            for (size_t i = 0; i < 2; i++)
                if (tth_rexpr_is_op(call->u.call.args[i], TTH_OP_QNN_CONV2D) ||
                    tth_rexpr_is_op(call->u.call.args[i], TTH_OP_QNN_MATMUL))
                    out[n++] = call->u.call.args[i];
        } else {
            out[n++] = call;
        }
        break;
    case TTH_OP_CLIP:
        if (!tth_rexpr_is_op(a0, TTH_OP_REQUANTIZE))
            break;
        out[n++] = accumulator(a0->u.call.args[0]);
        break;
    case TTH_OP_REQUANTIZE: out[n++] = accumulator(a0); break;
    case TTH_OP_QUANTIZE:
        if (a0 && a0->kind == TTH_REXPR_CALL)
            out[n++] = a0;
        break;
    case TTH_OP_DEQUANTIZE:
        for (size_t i = 0; i < tth_relay_nusers(u, call) && n < max; i++)
            if (tth_relay_user(u, call, i) && tth_relay_user(u, call, i)->kind == TTH_REXPR_CALL)
                out[n++] = tth_relay_user(u, call, i);
        break;
    default: break;
    }
    return n;
}

int cn_match_containing(const tth_relay_users *u, const tth_rexpr *call, cn_match *m, char *why, size_t len)
{
    const tth_rexpr *anchors[8];
    size_t n = anchors_of(u, call, anchors, 8);
    if (n == 0) {
        const char *op = tth_op_name(call->u.call.op);
        switch (call->u.call.op) {
        case TTH_OP_ADD: case TTH_OP_REQUANTIZE: case TTH_OP_CLIP: case TTH_OP_QUANTIZE: case TTH_OP_DEQUANTIZE:
            return refuse(why, len, "%s outside a CMSIS-NN pattern (conv2d/fully connected with requantize, or "
                          "dequantize -> softmax/add/mul/pool -> quantize)", op);
        default: return refuse(why, len, "%s has no CMSIS-NN kernel", op);
        }
    }
    char first[256] = "";
    for (size_t i = 0; i < n; i++) {
        char r[256];
        if (cn_match_at(u, anchors[i], m, r, sizeof r)) {
            if (contains(m, call))
                return 1;
            snprintf(r, sizeof r, "%s is not part of the CMSIS-NN %s pattern around it",
                     tth_op_name(call->u.call.op), cn_kind_name(m->kind));
        }
        if (!first[0])
            snprintf(first, sizeof first, "%s", r);
    }
    memset(m, 0, sizeof *m);
    return refuse(why, len, "%s", first);
}
