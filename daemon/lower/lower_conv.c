/* lower_conv.c: nn.conv2d, qnn.conv2d and nn.conv2d_transpose (NCHW, OIHW weights).
 *
 * One output plane (n, oc) at a time, so planes are independent (the outer loop is parallel when
 * the plane accumulates in the destination itself):
 *   acc[oh, ow] = bias[oc] (or 0)
 *   for each input channel of the group, kh, kw:
 *     for oh in the rows whose input row is inside the image:
 *       for ow in the columns whose input column is inside the image:   (contiguous, vectorized)
 *         acc[oh, ow] += x[n, ic, oh*sh + kh*dh - pt, ow*sw + kw*dw - pl] * w[oc, ic, kh, kw]
 *   out[n, oc, oh, ow] = epilogue(acc[oh, ow])
 * Padding is never materialised: the valid row/column ranges are computed (padding contributes
 * zero; for qnn.conv2d the padded input equals x_zero_point, which also contributes zero).
 * conv2d_transpose scatters: each input pixel adds w * x to out[ih*sh + kh*dh - pt, ...]. */
#include <stdio.h>
#include <string.h>

#include "lower_internal.h"

typedef lw_conv_p conv_p;

int lw_conv_params(const tth_rexpr *call, conv_p *p, char *why, size_t len)
{
    const tth_ttype *xt = lw_ty(lw_arg(call, 0)), *wt = lw_ty(lw_arg(call, 1)), *ot = lw_ty(call);
    const char *op = tth_op_name(call->u.call.op);
    memset(p, 0, sizeof *p);
    int lay = call->u.call.op == TTH_OP_CONV2D || call->u.call.op == TTH_OP_QNN_CONV2D;
    int64_t xb = lay ? tth_layout_block(json_object_get(call->u.call.attrs, "data_layout")) : 0;
    int64_t ob = lay ? tth_layout_block(json_object_get(call->u.call.attrs, "out_layout")) : 0;
    if (!xt || !wt || !ot || xb < 0 || ob < 0 || xt->rank != (xb ? 5 : 4) || wt->rank != 4 || ot->rank != (ob ? 5 : 4)) {
        snprintf(why, len, "%s: only 2-D convolution on NCHW or NCHW<b>c tensors is supported", op);
        return 0;
    }
    tth_window_attrs wa;
    if (lw_window_attrs(call, &wa, why, len))
        return 0;
    p->sh = wa.strides[0], p->sw = wa.strides[1], p->dh = wa.dilation[0], p->dw = wa.dilation[1];
    p->pt = wa.padding[0], p->pl = wa.padding[1], p->pb = wa.padding[2], p->pr = wa.padding[3];
    p->groups = wa.groups;
    p->N = xt->shape[0];
    p->C = xt->shape[1] * (xb ? xb : 1);
    p->H = xt->shape[2];
    p->W = xt->shape[3];
    p->O = ot->shape[1] * (ob ? ob : 1);
    p->xb = xb;
    p->ob = ob;
    p->OH = ot->shape[2];
    p->OW = ot->shape[3];
    p->KH = wt->shape[2];
    p->KW = wt->shape[3];
    p->transpose = call->u.call.op == TTH_OP_CONV2D_TRANSPOSE;
    p->quant = call->u.call.op == TTH_OP_QNN_CONV2D;
    p->acc = p->quant ? TTH_I32 : ot->dtype;
    if (p->C % p->groups || p->O % p->groups) {
        snprintf(why, len, "%s: groups=%lld does not divide the channels", op, (long long)p->groups);
        return 0;
    }
    if (!p->transpose && (wt->shape[0] != p->O || wt->shape[1] * p->groups != p->C)) {
        snprintf(why, len, "%s: weight shape does not match the input channels and groups", op);
        return 0;
    }
    if (p->transpose && (wt->shape[0] != p->C || wt->shape[1] * p->groups != p->O)) {
        snprintf(why, len, "%s: weight shape does not match the channels and groups", op);
        return 0;
    }
    if (p->quant) {
        tth_dtype a = xt->dtype, b = wt->dtype;
        if ((a != TTH_I8 && a != TTH_U8 && a != TTH_I16) || (b != TTH_I8 && b != TTH_U8 && b != TTH_I16)) {
            snprintf(why, len, "%s: inputs must be int8, uint8 or int16", op);
            return 0;
        }
    } else if (!lw_float_only(op, ot->dtype, why, len)) {
        return 0;
    }
    return 1;
}

int lw_conv_check(const tth_rexpr *call, char *why, size_t len)
{
    conv_p p;
    return lw_conv_params(call, &p, why, len);
}

/* init/finish passes over one output plane */
typedef struct plane_arg {
    const lw_sink *s;
    tth_tbuffer *acc;
    int direct;
    tth_texpr *n, *oc, *no;
    tth_texpr *init;          /* value stored by the init pass */
    const conv_p *p;
} plane_arg;

static tth_texpr *acc_index(lw_ctx *c, const plane_arg *a, tth_texpr *oh, tth_texpr *ow)
{
    tth_texpr *r = lw_add(c, lw_mul(c, oh, lw_i(c, a->p->OW)), ow);
    if (a->direct)
        r = lw_add(c, lw_mul(c, a->no, lw_i(c, a->p->OH * a->p->OW)), r);
    return r;
}

static tth_tstmt *plane_init(lw_ctx *c, tth_texpr *const *idx, void *arg)
{
    plane_arg *a = arg;
    return tth_tir_store(c->m, a->acc, acc_index(c, a, idx[0], idx[1]), a->init);
}

static tth_tstmt *plane_finish(lw_ctx *c, tth_texpr *const *idx, void *arg)
{
    plane_arg *a = arg;
    tth_texpr *oidx[4] = {a->n, a->oc, idx[0], idx[1]};
    return lw_sink_store(c, a->s, 0, oidx, tth_tir_load(c->m, a->acc, acc_index(c, a, idx[0], idx[1])));
}

static tth_tstmt *conv_common(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    conv_p p;
    char why[256];
    if (!lw_conv_params(call, &p, why, sizeof why)) {
        lw_fail(c, TTH_EUNSUPPORTED, call, "%s", why);
        return NULL;
    }
    if (p.xb || p.ob) {
        lw_fail(c, TTH_EUNSUPPORTED, call, "%s in blocked channels (NCHW<b>c) is lowered for float32, or int8 with "
                "constant symmetric weights and a constant input zero point, with one group, groups whose channels "
                "fill whole blocks, or depthwise only (docs/layouts.md, docs/int8.md)", tth_op_name(call->u.call.op));
        return NULL;
    }

    tth_tbuffer *x = lw_buf(c, lw_arg(call, 0)), *w = lw_buf(c, lw_arg(call, 1));
    if (!x || !w)
        return NULL;
    int direct = lw_sink_direct(s, 0, p.acc);
    tth_tbuffer *acc = s->dest[0];
    if (!direct) {
        int64_t shp[2] = {p.OH, p.OW};
        acc = lw_local(c, "acc", p.acc, 2, shp);
        if (!acc)
            return NULL;
    }
    int64_t Cg = p.C / p.groups, Og = p.O / p.groups;
    /* for conv: inner channel count Cg, weight [O, Cg, KH, KW];
     * for transpose: Cg input channels per group, weight [C, Og, KH, KW] */
    lw_ax no, ic, kh, kw;
    if (lw_ax_make(c, &no, "no", p.N * p.O) || lw_ax_make(c, &ic, "ic", Cg) || lw_ax_make(c, &kh, "kh", p.KH) ||
        lw_ax_make(c, &kw, "kw", p.KW))
        return NULL;
    tth_tvar *vn = lw_var(c, "n", TTH_I64), *voc = lw_var(c, "oc", TTH_I64), *vg = lw_var(c, "g", TTH_I64);
    tth_tvar *vcx = lw_var(c, "cx", TTH_I64), *vwv = lw_var(c, "wv", p.acc);
    tth_tvar *vlo1 = lw_var(c, "lo", TTH_I64), *vex1 = lw_var(c, "ex", TTH_I64);
    tth_tvar *vlo2 = lw_var(c, "lo", TTH_I64), *vex2 = lw_var(c, "ex", TTH_I64);
    tth_tvar *vr = lw_var(c, "r", TTH_I64), *vxrow = lw_var(c, "xr", TTH_I64), *varow = lw_var(c, "ar", TTH_I64);
    tth_tvar *vq = lw_var(c, "q", TTH_I64);
    if (!vn || !voc || !vg || !vcx || !vwv || !vlo1 || !vex1 || !vlo2 || !vex2 || !vr || !vxrow || !varow || !vq)
        return NULL;
    tth_texpr *n = lw_ref(c, vn), *oc = lw_ref(c, voc), *g = lw_ref(c, vg), *cx = lw_ref(c, vcx);
    tth_texpr *r = lw_ref(c, vr), *q = lw_ref(c, vq);

    plane_arg pa = {s, acc, direct, n, oc, no.e, NULL, &p};
    /* init value: bias[oc] or 0 */
    if (!p.quant && call->u.call.nargs == 3) {
        tth_texpr *b = lw_axis_value(c, lw_arg(call, 2), oc);
        if (!b)
            return NULL;
        pa.init = lw_cast(c, p.acc, b);
    } else {
        pa.init = lw_imm(c, p.acc, 0);
    }
    int64_t plane[2] = {p.OH, p.OW};
    tth_tstmt *init = lw_nest(c, plane, 2, LW_VECTOR, plane_init, &pa);
    tth_tstmt *finish = NULL;
    if (!direct || s->epi)
        finish = lw_nest(c, plane, 2, LW_VECTOR, plane_finish, &pa);
    if (!init || (!finish && (!direct || s->epi)))
        return NULL;

    /* weight value and x value (int32 with zero points for qnn) */
    tth_texpr *wv;
    tth_texpr *xzp = NULL;
    tth_texpr *widx[4];
    if (!p.transpose) {
        widx[0] = oc;
        widx[1] = ic.e;
    } else {
        widx[0] = cx;
        widx[1] = lw_bin(c, TTH_TBIN_MOD, oc, lw_i(c, Og));
        if (Og == 1)
            widx[1] = lw_i(c, 0);
    }
    widx[2] = kh.e;
    widx[3] = kw.e;
    wv = lw_load_at(c, w, widx);
    if (p.quant) {
        tth_texpr *wzp = lw_axis_value(c, lw_arg(call, 3), oc);
        xzp = lw_axis_value(c, lw_arg(call, 2), lw_i(c, 0));
        if (!wzp || !xzp)
            return NULL;
        wv = lw_sub(c, lw_cast(c, TTH_I32, wv), lw_cast(c, TTH_I32, wzp));
        xzp = lw_cast(c, TTH_I32, xzp);
    }
    /* inner loops */
    tth_tstmt *inner;
    tth_texpr *xv, *aidx, *lo1, *ex1, *lo2, *ex2, *xrow, *arow;
    tth_loop_kind qk = TTH_LOOP_VECTORIZED;
    if (!p.transpose) {
        /* rows oh in [lo1, lo1+ex1), cols ow in [lo2, lo2+ex2) */
        lw_window_range(c, kh.e, p.dh, p.sh, p.pt, p.H, p.OH, p.KH, &lo1, &ex1);
        lw_window_range(c, kw.e, p.dw, p.sw, p.pl, p.W, p.OW, p.KW, &lo2, &ex2);
        /* xr = ((n*C + cx)*H + r*sh + kh*dh - pt)*W + kw*dw - pl;  ar = acc row base */
        tth_texpr *ih = lw_sub(c, lw_add(c, lw_mul(c, r, lw_i(c, p.sh)), lw_mul(c, kh.e, lw_i(c, p.dh))), lw_i(c, p.pt));
        xrow = lw_add(c, lw_mul(c, lw_add(c, lw_mul(c, lw_add(c, lw_mul(c, n, lw_i(c, p.C)), cx), lw_i(c, p.H)), ih),
                                lw_i(c, p.W)),
                      lw_sub(c, lw_mul(c, kw.e, lw_i(c, p.dw)), lw_i(c, p.pl)));
        arow = lw_mul(c, r, lw_i(c, p.OW));
        xv = tth_tir_load(c->m, x, lw_add(c, lw_ref(c, vxrow), lw_mul(c, q, lw_i(c, p.sw))));
        if (p.quant)
            xv = lw_sub(c, lw_cast(c, TTH_I32, xv), xzp);
        aidx = lw_add(c, lw_ref(c, varow), q);
    } else {
        /* input rows r in [lo1, lo1+ex1) with oh = r*sh + kh*dh - pt inside [0, OH) */
        lw_window_range(c, kh.e, p.dh, p.sh, p.pt, p.OH, p.H, p.KH, &lo1, &ex1);
        lw_window_range(c, kw.e, p.dw, p.sw, p.pl, p.OW, p.W, p.KW, &lo2, &ex2);
        tth_texpr *oh = lw_sub(c, lw_add(c, lw_mul(c, r, lw_i(c, p.sh)), lw_mul(c, kh.e, lw_i(c, p.dh))), lw_i(c, p.pt));
        xrow = lw_mul(c, lw_add(c, lw_mul(c, lw_add(c, lw_mul(c, n, lw_i(c, p.C)), cx), lw_i(c, p.H)), r), lw_i(c, p.W));
        arow = lw_add(c, lw_mul(c, oh, lw_i(c, p.OW)), lw_sub(c, lw_mul(c, kw.e, lw_i(c, p.dw)), lw_i(c, p.pl)));
        xv = tth_tir_load(c->m, x, lw_add(c, lw_ref(c, vxrow), q));
        aidx = lw_add(c, lw_ref(c, varow), lw_mul(c, q, lw_i(c, p.sw)));
        if (p.sw != 1)
            qk = TTH_LOOP_SERIAL;
    }
    if (direct)
        arow = lw_add(c, lw_mul(c, no.e, lw_i(c, p.OH * p.OW)), arow);
    tth_tstmt *st = tth_tir_store(c->m, acc, aidx, lw_add(c, tth_tir_load(c->m, acc, aidx), lw_mul(c, xv, lw_ref(c, vwv))));
    inner = lw_for(c, vq, lw_ref(c, vlo2), lw_ref(c, vex2), qk, st);
    inner = lw_let(c, varow, arow, lw_let(c, vxrow, xrow, inner));
    inner = lw_for(c, vr, lw_ref(c, vlo1), lw_ref(c, vex1), TTH_LOOP_SERIAL, inner);
    inner = lw_let(c, vwv, wv, inner);
    inner = lw_let(c, vlo2, lo2, lw_let(c, vex2, ex2, inner));
    inner = lw_ax_loop(c, &kw, TTH_LOOP_SERIAL, inner);
    inner = lw_let(c, vlo1, lo1, lw_let(c, vex1, ex1, inner));
    inner = lw_ax_loop(c, &kh, TTH_LOOP_SERIAL, inner);
    /* cx = g*Cg + ic */
    inner = lw_let(c, vcx, lw_add(c, lw_mul(c, g, lw_i(c, Cg)), ic.e), inner);
    inner = lw_ax_loop(c, &ic, TTH_LOOP_SERIAL, inner);
    if (!inner)
        return NULL;
    tth_tstmt *seq = NULL;
    if (lw_append(c, &seq, init) || lw_append(c, &seq, inner) || lw_append(c, &seq, finish))
        return NULL;
    /* n = no / O, oc = no % O, g = oc / Og */
    tth_tstmt *body = lw_let(c, vg, p.groups == 1 ? lw_i(c, 0) : lw_bin(c, TTH_TBIN_DIV, oc, lw_i(c, Og)), seq);
    body = lw_let(c, voc, p.O == 1 ? lw_i(c, 0) : lw_bin(c, TTH_TBIN_MOD, no.e, lw_i(c, p.O)), body);
    body = lw_let(c, vn, p.N == 1 ? lw_i(c, 0) : lw_bin(c, TTH_TBIN_DIV, no.e, lw_i(c, p.O)), body);
    int64_t work = p.N * p.O * p.OH * p.OW * Cg * p.KH * p.KW;
    body = lw_ax_loop(c, &no, direct && work >= LW_PARALLEL_MIN ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL, body);
    if (body && !direct)
        body = tth_tir_allocate(c->m, acc, body);
    return body;
}

tth_tstmt *lw_conv2d(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    return conv_common(c, call, s);
}

tth_tstmt *lw_conv2d_transpose(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    return conv_common(c, call, s);
}
