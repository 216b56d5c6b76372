/* conv_taps.c: a convolution's taps that read only padding, for every output, are dropped
 * (docs/operators.md, "Passes"). A tap (kh, kw) of a convolution with a constant weight reads input
 * row oh*sh + kh*dh - pt for the output rows oh in [0, OH): when none of those rows is inside
 * [0, H), that tap multiplies zeros only, and the same holds for columns. The taps that do read
 * the image form one contiguous range along each axis, so the convolution becomes one with the
 * kernel cut to that range and its padding moved by the taps cut before it, which computes the
 * same sums without the products of zeros. DeepLabV3's atrous pyramid on a 14x14 map (3x3 at
 * dilations 24 and 36) becomes two 1x1 convolutions; a 3x3 convolution of a 1x1 image, its center.
 * Requires: constant weights folded; runs before the layout pass. */
#include <string.h>

#include "frontend_internal.h"

/* The taps [*k0, *k1] of an axis of K taps (dilation d, stride s, padding before pb) that read
 * inside [0, n) for some output in [0, out); 0 when every tap does (nothing to cut) or none does. */
static int inside_taps(int64_t K, int64_t d, int64_t s, int64_t pb, int64_t n, int64_t out, int64_t *k0, int64_t *k1)
{
    *k0 = -1;
    *k1 = -1;
    for (int64_t k = 0; k < K; k++) {
        int64_t first = k * d - pb, last = first + (out - 1) * s;
        /* rows first, first + s, ..., last: one inside [0, n)? */
        int64_t lo = first < 0 ? (-first + s - 1) / s : 0; /* the first output index whose row is >= 0 */
        int64_t row = first + lo * s;
        if (lo < out && row <= last && row < n) {
            if (*k0 < 0)
                *k0 = k;
            *k1 = k;
        }
    }
    return *k0 >= 0 && (*k0 > 0 || *k1 < K - 1);
}

static tth_rexpr *trim_visit(void *ctx, tth_relay_module *m, tth_rexpr *orig, tth_rexpr *const *args, size_t nargs,
                             tth_diag *diag)
{
    (void)ctx;
    if (orig->kind != TTH_REXPR_CALL || orig->u.call.fn || orig->u.call.op != TTH_OP_CONV2D || nargs < 2 ||
        args[1]->kind != TTH_REXPR_CONST || orig->type.nfields >= 0 || json_object_get(orig->u.call.attrs, "data_layout"))
        return TTH_REWRITE_KEEP;
    const tth_ttype *xt = &args[0]->type.tensor, *yt = &orig->type.tensor;
    tth_tensor *w = args[1]->u.constant.value;
    const tth_ttype *wt = &w->type;
    tth_window_attrs wa;
    if (xt->rank != 4 || yt->rank != 4 || wt->rank != 4 || tth_window_attrs_of(TTH_OP_CONV2D, orig->u.call.attrs, &wa, NULL))
        return TTH_REWRITE_KEEP;
    int64_t h0, h1, w0, w1;
    int cut_h = inside_taps(wt->shape[2], wa.dilation[0], wa.strides[0], wa.padding[0], xt->shape[2], yt->shape[2], &h0, &h1);
    int cut_w = inside_taps(wt->shape[3], wa.dilation[1], wa.strides[1], wa.padding[1], xt->shape[3], yt->shape[3], &w0, &w1);
    if (h0 < 0 || w0 < 0 || (!cut_h && !cut_w))
        return TTH_REWRITE_KEEP;
    if (!cut_h) {
        h0 = 0;
        h1 = wt->shape[2] - 1;
    }
    if (!cut_w) {
        w0 = 0;
        w1 = wt->shape[3] - 1;
    }
    /* the new padding: before, less the taps cut before; after, what keeps the output's size */
    int64_t KH = h1 - h0 + 1, KW = w1 - w0 + 1;
    int64_t pt = wa.padding[0] - h0 * wa.dilation[0], pl = wa.padding[1] - w0 * wa.dilation[1];
    int64_t pb = (yt->shape[2] - 1) * wa.strides[0] + (KH - 1) * wa.dilation[0] + 1 - xt->shape[2] - pt;
    int64_t pr = (yt->shape[3] - 1) * wa.strides[1] + (KW - 1) * wa.dilation[1] + 1 - xt->shape[3] - pl;
    if (pt < 0 || pl < 0)
        return TTH_REWRITE_KEEP;
    pb = pb < 0 ? 0 : pb; /* rows past the last output's reach are not read: no padding needed */
    pr = pr < 0 ? 0 : pr;
    tth_ttype nt = *wt;
    nt.shape[2] = KH;
    nt.shape[3] = KW;
    tth_tensor *nw = tth_tensor_new(&nt, NULL);
    if (!nw) {
        tth_diag_set(diag, TTH_ENOMEM, orig->span, "out of memory");
        return NULL;
    }
    size_t es = tth_dtype_size(wt->dtype);
    for (int64_t oc = 0; oc < wt->shape[0] * wt->shape[1]; oc++)
        for (int64_t kh = 0; kh < KH; kh++)
            memcpy((unsigned char *)nw->data + (size_t)((oc * KH + kh) * KW) * es,
                   (const unsigned char *)w->data + (size_t)((oc * wt->shape[2] + h0 + kh) * wt->shape[3] + w0) * es,
                   (size_t)KW * es);
    json_t *a = json_deep_copy(orig->u.call.attrs);
    int64_t pad[4] = {pt, pl, pb, pr};
    if (!a || json_object_set_new(a, "padding", tth__json_ints(pad, 4))) {
        json_decref(a);
        tth_tensor_unref(nw);
        tth_diag_set(diag, TTH_ENOMEM, orig->span, "out of memory");
        return NULL;
    }
    tth_rexpr *cargs[3] = {args[0], tth_relay_const(m, nw, NULL), nargs > 2 ? args[2] : NULL}; /* takes nw */
    if (!cargs[1]) {
        json_decref(a);
        return NULL;
    }
    tth_relay_set_span(m, orig->span);
    tth_rexpr *r = tth_relay_call(m, TTH_OP_CONV2D, cargs, cargs[2] ? 3 : 2, a, diag);
    tth_relay_set_span(m, NULL);
    if (r && !tth_ttype_equal(&r->type.tensor, yt))
        return TTH_REWRITE_KEEP; /* never: the padding keeps the output's size */
    return r;
}

int tth_relay_trim_conv_taps(tth_relay_module *m, tth_diag *diag)
{
    return tth__rewrite_module(m, trim_visit, diag);
}
