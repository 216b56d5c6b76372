/* lower_pool.c: nn.max_pool2d, nn.max_pool2d_with_argmax, nn.avg_pool2d, nn.global_avg_pool2d,
 * nn.global_max_pool2d (NCHW, and NCHW<b>c: docs/layouts.md).
 *
 * For each output element the kernel taps that fall inside the image are a rectangle computed
 * from the output position, so the tap loops carry no bounds test:
 *   kh in [max(0, ceil((pt - oh*sh)/dh)), min(KH, floor((H-1 + pt - oh*sh)/dh) + 1))
 * max: the maximum of the taps inside the image (padding never wins, as in ONNX);
 * avg: the sum divided by the taps inside the image, or with count_include_pad by the taps
 * inside the padded image (a ceil_mode window's part beyond the end padding is not counted).
 * The output size (ceil_mode) comes from the call's type. */
#include <stdio.h>
#include <string.h>

#include "lower_internal.h"

typedef struct pool_p {
    int64_t N, C, H, W, OH, OW, KH, KW, sh, sw, dh, dw, pt, pl, pb, pr;
    int count_include_pad;
    int is_max;               /* max_pool2d, global_max_pool2d; else an average */
    int64_t b;                /* NCHW<b>c (docs/layouts.md): C counts blocks of b channels; 0: NCHW */
} pool_p;

static int pool_params(const tth_rexpr *call, pool_p *p, char *why, size_t len)
{
    const tth_ttype *xt = lw_ty(lw_arg(call, 0)), *ot = lw_ty(call);
    if (call->u.call.op == TTH_OP_MAX_POOL2D_ARGMAX && call->type.nfields == 2)
        ot = &call->type.fields[0]; /* the values; the indices have the same shape */
    const char *op = tth_op_name(call->u.call.op);
    memset(p, 0, sizeof *p);
    p->is_max = call->u.call.op == TTH_OP_MAX_POOL2D || call->u.call.op == TTH_OP_GLOBAL_MAX_POOL2D;
    p->b = call->u.call.op == TTH_OP_MAX_POOL2D_ARGMAX ? 0 : tth_layout_block(json_object_get(call->u.call.attrs, "layout"));
    if (!xt || !ot || p->b < 0 || xt->rank != (p->b ? 5 : 4) || ot->rank != xt->rank) {
        snprintf(why, len, "%s: only 2-D pooling on NCHW or NCHW<b>c tensors is supported", op);
        return 0;
    }
    if (p->b && xt->dtype != TTH_F32 &&
        !(call->u.call.op == TTH_OP_MAX_POOL2D && (xt->dtype == TTH_I8 || xt->dtype == TTH_U8))) {
        snprintf(why, len, "%s: layout NCHW%lldc is supported for float32 (and int8 max pools) only", op, (long long)p->b);
        return 0;
    }
    if (xt->dtype == TTH_BOOL) {
        snprintf(why, len, "%s: bool is not supported", op);
        return 0;
    }
    p->N = xt->shape[0];
    p->C = xt->shape[1];
    p->H = xt->shape[2];
    p->W = xt->shape[3];
    p->OH = ot->shape[2];
    p->OW = ot->shape[3];
    if (call->u.call.op == TTH_OP_GLOBAL_AVG_POOL2D || call->u.call.op == TTH_OP_GLOBAL_MAX_POOL2D)
        return 1;
    tth_window_attrs a;
    if (lw_window_attrs(call, &a, why, len))
        return 0;
    p->KH = a.pool_size[0];
    p->KW = a.pool_size[1];
    p->sh = a.strides[0], p->sw = a.strides[1], p->dh = a.dilation[0], p->dw = a.dilation[1];
    p->pt = a.padding[0], p->pl = a.padding[1], p->pb = a.padding[2], p->pr = a.padding[3];
    p->count_include_pad = a.count_include_pad;
    return call->u.call.op != TTH_OP_AVG_POOL2D || lw_float_only(op, xt->dtype, why, len);
}

int lw_pool_check(const tth_rexpr *call, char *why, size_t len)
{
    pool_p p;
    return pool_params(call, &p, why, len);
}

/* An average's divisor at output (oh, ow): the taps inside the image (ex_h x ex_w, the tap
 * ranges), or with count_include_pad those inside the padded image; at least 1. */
static tth_texpr *avg_divisor(lw_ctx *c, const pool_p *p, tth_texpr *oh, tth_texpr *ow, tth_texpr *ex_h, tth_texpr *ex_w)
{
    tth_texpr *cnt;
    if (p->count_include_pad) {
        /* taps inside the padded image: hs + kh*dh <= H + pb - 1 */
        tth_texpr *ch = lw_bin(c, TTH_TBIN_MIN, lw_i(c, p->KH),
                               lw_add(c, lw_floordiv(c, lw_sub(c, lw_i(c, p->H + p->pb - 1 + p->pt), lw_mul(c, oh, lw_i(c, p->sh))), p->dh), lw_i(c, 1)));
        tth_texpr *cw = lw_bin(c, TTH_TBIN_MIN, lw_i(c, p->KW),
                               lw_add(c, lw_floordiv(c, lw_sub(c, lw_i(c, p->W + p->pr - 1 + p->pl), lw_mul(c, ow, lw_i(c, p->sw))), p->dw), lw_i(c, 1)));
        cnt = lw_mul(c, ch, cw);
    } else {
        cnt = lw_mul(c, ex_h, ex_w);
    }
    return lw_bin(c, TTH_TBIN_MAX, cnt, lw_i(c, 1));
}

/* One output element (nc, oh, ow) of the generic kernel: its taps inside the image accumulated in
 * acc[ai] (the output itself when direct, else a LOCAL scalar), then finished through the sink. */
static tth_tstmt *pool_elem(lw_ctx *c, const pool_p *p, tth_tbuffer *x, tth_tbuffer *acc, int direct,
                            const lw_sink *s, tth_texpr *nc, tth_texpr *oh, tth_texpr *ow)
{
    tth_dtype t = x->dtype;
    tth_tvar *vkh = lw_var(c, "kh", TTH_I64), *vkw = lw_var(c, "kw", TTH_I64);
    tth_tvar *vlh = lw_var(c, "lo", TTH_I64), *veh = lw_var(c, "ex", TTH_I64);
    tth_tvar *vlw = lw_var(c, "lo", TTH_I64), *vew = lw_var(c, "ex", TTH_I64);
    tth_tvar *vai = lw_var(c, "a", TTH_I64), *vxr = lw_var(c, "xr", TTH_I64);
    if (!vkh || !vkw || !vlh || !veh || !vlw || !vew || !vai || !vxr)
        return NULL;
    tth_texpr *lo_h, *ex_h, *lo_w, *ex_w;
    lw_window_range(c, oh, p->sh, p->dh, p->pt, p->H, p->KH, p->OH, &lo_h, &ex_h);
    lw_window_range(c, ow, p->sw, p->dw, p->pl, p->W, p->KW, p->OW, &lo_w, &ex_w);
    tth_texpr *ai = lw_ref(c, vai);
    tth_texpr *aidx = direct ? lw_add(c, lw_mul(c, lw_add(c, lw_mul(c, nc, lw_i(c, p->OH)), oh), lw_i(c, p->OW)), ow)
                             : lw_i(c, 0);
    tth_tstmt *init = tth_tir_store(c->m, acc, ai, lw_imm(c, t, p->is_max ? lw_dtype_lowest(t) : 0));
    /* xr = (nc*H + oh*sh + kh*dh - pt) * W + ow*sw - pl */
    tth_texpr *ih = lw_sub(c, lw_add(c, lw_mul(c, oh, lw_i(c, p->sh)), lw_mul(c, lw_ref(c, vkh), lw_i(c, p->dh))), lw_i(c, p->pt));
    tth_texpr *xr = lw_add(c, lw_mul(c, lw_add(c, lw_mul(c, nc, lw_i(c, p->H)), ih), lw_i(c, p->W)),
                           lw_sub(c, lw_mul(c, ow, lw_i(c, p->sw)), lw_i(c, p->pl)));
    tth_texpr *xv = tth_tir_load(c->m, x, lw_add(c, lw_ref(c, vxr), lw_mul(c, lw_ref(c, vkw), lw_i(c, p->dw))));
    tth_texpr *cur = tth_tir_load(c->m, acc, ai);
    tth_tstmt *upd = tth_tir_store(c->m, acc, ai, p->is_max ? lw_bin(c, TTH_TBIN_MAX, cur, xv) : lw_add(c, cur, xv));
    tth_tstmt *taps = lw_for(c, vkw, lw_ref(c, vlw), lw_ref(c, vew), TTH_LOOP_SERIAL, upd);
    taps = lw_let(c, vxr, xr, taps);
    taps = lw_for(c, vkh, lw_ref(c, vlh), lw_ref(c, veh), TTH_LOOP_SERIAL, taps);
    /* finish */
    tth_tstmt *fin = NULL;
    tth_tvar *vn = lw_var(c, "n", TTH_I64), *vc = lw_var(c, "c", TTH_I64);
    if (!vn || !vc)
        return NULL;
    tth_texpr *oidx[4] = {lw_ref(c, vn), lw_ref(c, vc), oh, ow};
    if (!p->is_max) {
        tth_texpr *den = lw_cast(c, t, avg_divisor(c, p, oh, ow, lw_ref(c, veh), lw_ref(c, vew)));
        fin = lw_sink_store(c, s, 0, oidx, lw_bin(c, TTH_TBIN_DIV, tth_tir_load(c->m, acc, ai), den));
    } else if (!direct || s->epi) {
        fin = lw_sink_store(c, s, 0, oidx, tth_tir_load(c->m, acc, ai));
    }
    tth_tstmt *seq = NULL;
    if (!taps || lw_append(c, &seq, init) || lw_append(c, &seq, taps) || lw_append(c, &seq, fin))
        return NULL;
    tth_tstmt *el = lw_let(c, vlh, lo_h, lw_let(c, veh, ex_h, lw_let(c, vlw, lo_w, lw_let(c, vew, ex_w,
                    lw_let(c, vai, aidx, seq)))));
    return lw_let(c, vn, p->C == 1 ? nc : lw_bin(c, TTH_TBIN_DIV, nc, lw_i(c, p->C)),
                  lw_let(c, vc, p->C == 1 ? lw_i(c, 0) : lw_bin(c, TTH_TBIN_MOD, nc, lw_i(c, p->C)), el));
}

/* the accumulator of the generic kernel: the output itself when the sink allows, else a LOCAL
 * scalar (allocated around the kernel by the caller) */
static tth_tbuffer *pool_acc(lw_ctx *c, const lw_sink *s, tth_dtype t, int *direct)
{
    *direct = lw_sink_direct(s, 0, t);
    if (*direct)
        return s->dest[0];
    int64_t one = 1;
    return lw_local(c, "acc", t, 1, &one);
}

/* The register accumulator of an NCHW<b>c pooling's pixel, one vector of p->b lanes (its
 * allocation's statements begun in *seq), for a max set to the dtype's lowest value; a max pool of
 * int8 or uint8 stays in its dtype, an average sums in float32 */
static tth_tbuffer *blocked_acc(lw_ctx *c, const pool_p *p, tth_tbuffer *x, tth_tstmt **seq)
{
    int b = (int)p->b;
    tth_dtype at = p->is_max ? x->dtype : TTH_F32;
    tth_tbuffer *acc = lw_reg_tile_of(c, at, 1, b, seq);
    if (acc && p->is_max) {
        *seq = NULL;
        if (lw_append(c, seq, tth_tir_vstore(c->m, acc, lw_i(c, 0),
                                             tth_tir_broadcast(c->m, lw_imm(c, at, lw_dtype_lowest(at)), b), 0)))
            return NULL;
    }
    return acc;
}

/* The pixel (nc, oh, ow) from the accumulator through the sink, an average divided by den (an
 * integer count of taps; NULL for a max) */
static tth_tstmt *blocked_store(lw_ctx *c, const pool_p *p, const lw_sink *s, tth_tbuffer *acc, tth_texpr *nc,
                                tth_texpr *oh, tth_texpr *ow, tth_texpr *den)
{
    int b = (int)p->b;
    tth_texpr *oidx[5] = {lw_bin(c, TTH_TBIN_DIV, nc, lw_i(c, p->C)), lw_bin(c, TTH_TBIN_MOD, nc, lw_i(c, p->C)), oh, ow,
                          tth_tir_ramp(c->m, lw_i(c, 0), 1, b)};
    tth_texpr *v = tth_tir_vload(c->m, acc, lw_i(c, 0), b, 0);
    if (den)
        v = lw_bin(c, TTH_TBIN_DIV, v, tth_tir_broadcast(c->m, lw_cast(c, TTH_F32, den), b));
    return lw_sink_store(c, s, 0, oidx, v);
}

/* One output pixel (nc, oh, ow) of an NCHW<b>c pooling (p->b lanes; nc runs over images x blocks):
 * pool_elem's taps and divisor, each tap one vector of the block's b channels, accumulated in a
 * register. */
static tth_tstmt *pool_elem_blocked(lw_ctx *c, const pool_p *p, tth_tbuffer *x, const lw_sink *s,
                                    tth_texpr *nc, tth_texpr *oh, tth_texpr *ow)
{
    int b = (int)p->b;
    tth_tstmt *seq = NULL;
    tth_tbuffer *acc = blocked_acc(c, p, x, &seq);
    tth_tvar *vkh = lw_var(c, "kh", TTH_I64), *vkw = lw_var(c, "kw", TTH_I64);
    tth_tvar *vlh = lw_var(c, "lo", TTH_I64), *veh = lw_var(c, "ex", TTH_I64);
    tth_tvar *vlw = lw_var(c, "lo", TTH_I64), *vew = lw_var(c, "ex", TTH_I64), *vxr = lw_var(c, "xr", TTH_I64);
    if (!acc || !vkh || !vkw || !vlh || !veh || !vlw || !vew || !vxr)
        return NULL;
    tth_texpr *lo_h, *ex_h, *lo_w, *ex_w;
    lw_window_range(c, oh, p->sh, p->dh, p->pt, p->H, p->KH, p->OH, &lo_h, &ex_h);
    lw_window_range(c, ow, p->sw, p->dw, p->pl, p->W, p->KW, p->OW, &lo_w, &ex_w);
    tth_texpr *ih = lw_sub(c, lw_add(c, lw_mul(c, oh, lw_i(c, p->sh)), lw_mul(c, lw_ref(c, vkh), lw_i(c, p->dh))), lw_i(c, p->pt));
    tth_texpr *xr = lw_add(c, lw_mul(c, lw_add(c, lw_mul(c, nc, lw_i(c, p->H)), ih), lw_i(c, p->W)),
                           lw_sub(c, lw_mul(c, ow, lw_i(c, p->sw)), lw_i(c, p->pl)));
    tth_texpr *xv = tth_tir_vload(c->m, x, lw_mul(c, lw_add(c, lw_ref(c, vxr), lw_mul(c, lw_ref(c, vkw), lw_i(c, p->dw))), lw_i(c, b)), b, 0);
    tth_texpr *cur = tth_tir_vload(c->m, acc, lw_i(c, 0), b, 0);
    tth_tstmt *upd = tth_tir_vstore(c->m, acc, lw_i(c, 0), p->is_max ? lw_bin(c, TTH_TBIN_MAX, cur, xv) : lw_add(c, cur, xv), 0);
    tth_tstmt *taps = lw_for(c, vkw, lw_ref(c, vlw), lw_ref(c, vew), TTH_LOOP_SERIAL, upd);
    taps = lw_let(c, vxr, xr, taps);
    taps = lw_for(c, vkh, lw_ref(c, vlh), lw_ref(c, veh), TTH_LOOP_SERIAL, taps);
    tth_texpr *den = p->is_max ? NULL : avg_divisor(c, p, oh, ow, lw_ref(c, veh), lw_ref(c, vew));
    if (!taps || lw_append(c, &seq, taps) || lw_append(c, &seq, blocked_store(c, p, s, acc, nc, oh, ow, den)))
        return NULL;
    tth_tstmt *el = lw_let(c, vlh, lo_h, lw_let(c, veh, ex_h, lw_let(c, vlw, lo_w, lw_let(c, vew, ex_w, seq))));
    return el ? tth_tir_allocate(c->m, acc, el) : NULL;
}

/* taps along a row unrolled up to this many, a loop beyond */
#define POOL_UNROLL_TAPS 16

/* The outputs along one axis (n of them, stride st, padding before pad, k taps dilated by d, an
 * input of size in) whose every tap is inside the input: [*lo, *hi) */
static void inner_range(int64_t n, int64_t st, int64_t pad, int64_t k, int64_t d, int64_t in, int64_t *lo, int64_t *hi)
{
    int64_t l = 0, h = n;
    while (l < h && l * st - pad < 0)
        l++;
    while (h > l && (h - 1) * st - pad + (k - 1) * d > in - 1)
        h--;
    *lo = l;
    *hi = h;
}

/* The output columns whose every tap is inside the image row: [*lo, *hi) */
static void inner_cols(const pool_p *p, int64_t *lo, int64_t *hi)
{
    inner_range(p->OW, p->sw, p->pl, p->KW, p->dw, p->W, lo, hi);
}

/* One output pixel of an NCHW<b>c pooling whose taps all lie inside the image (an inner row and
 * column): the KH x KW taps at constant offsets from one address, unrolled up to
 * POOL_UNROLL_TAPS, and an average's divisor KH*KW. The taps in pool_elem_blocked's order, so
 * the result is the same bit for bit; that kernel computed each pixel's tap ranges and looped
 * over them, 19 ns a pixel for ResNet-50's 3x3 max pool (docs/lowering.md, "Pooling"). */
static tth_tstmt *pool_elem_blocked_inside(lw_ctx *c, const pool_p *p, tth_tbuffer *x, const lw_sink *s,
                                           tth_texpr *nc, tth_texpr *oh, tth_texpr *ow)
{
    int b = (int)p->b;
    tth_tstmt *seq = NULL;
    tth_tbuffer *acc = blocked_acc(c, p, x, &seq);
    tth_tvar *vx0 = lw_var(c, "x0", TTH_I64);
    if (!acc || !vx0)
        return NULL;
    /* x0: the first tap's pixel, (nc*H + oh*sh - pt)*W + ow*sw - pl */
    tth_texpr *x0 = lw_add(c, lw_mul(c, lw_add(c, lw_mul(c, nc, lw_i(c, p->H)), lw_sub(c, lw_mul(c, oh, lw_i(c, p->sh)), lw_i(c, p->pt))),
                                     lw_i(c, p->W)),
                           lw_sub(c, lw_mul(c, ow, lw_i(c, p->sw)), lw_i(c, p->pl)));
    tth_tvar *vkh = NULL, *vkw = NULL;
    int unroll = p->KH * p->KW <= POOL_UNROLL_TAPS;
    if (!unroll && (!(vkh = lw_var(c, "kh", TTH_I64)) || !(vkw = lw_var(c, "kw", TTH_I64))))
        return NULL;
    tth_tstmt *taps = NULL;
    for (int64_t kh = 0; kh < (unroll ? p->KH : 1); kh++)
        for (int64_t kw = 0; kw < (unroll ? p->KW : 1); kw++) {
            tth_texpr *off = unroll ? lw_i(c, kh * p->dh * p->W + kw * p->dw)
                                    : lw_add(c, lw_mul(c, lw_ref(c, vkh), lw_i(c, p->dh * p->W)), lw_mul(c, lw_ref(c, vkw), lw_i(c, p->dw)));
            tth_texpr *xv = tth_tir_vload(c->m, x, lw_mul(c, lw_add(c, lw_ref(c, vx0), off), lw_i(c, b)), b, 0);
            tth_texpr *cur = tth_tir_vload(c->m, acc, lw_i(c, 0), b, 0);
            if (lw_append(c, &taps, tth_tir_vstore(c->m, acc, lw_i(c, 0), p->is_max ? lw_bin(c, TTH_TBIN_MAX, cur, xv) : lw_add(c, cur, xv), 0)))
                return NULL;
        }
    if (!unroll) {
        taps = lw_for(c, vkw, lw_i(c, 0), lw_i(c, p->KW), TTH_LOOP_SERIAL, taps);
        taps = lw_for(c, vkh, lw_i(c, 0), lw_i(c, p->KH), TTH_LOOP_SERIAL, taps);
    }
    tth_texpr *den = p->is_max ? NULL : lw_i(c, p->KH * p->KW);
    if (!taps || lw_append(c, &seq, lw_let(c, vx0, x0, taps)) ||
        lw_append(c, &seq, blocked_store(c, p, s, acc, nc, oh, ow, den)))
        return NULL;
    return tth_tir_allocate(c->m, acc, seq);
}

/* Output row oh of block nc of an NCHW<b>c pooling: the pixels of an inner row's inner columns
 * through pool_elem_blocked_inside, the others through pool_elem_blocked */
static tth_tstmt *pool_row_blocked(lw_ctx *c, const pool_p *p, tth_tbuffer *x, const lw_sink *s, tth_texpr *nc, tth_texpr *oh)
{
    int64_t clo, chi, rlo, rhi;
    inner_cols(p, &clo, &chi);
    inner_range(p->OH, p->sh, p->pt, p->KH, p->dh, p->H, &rlo, &rhi);
    tth_tstmt *inner = NULL, *all;
    for (int part = 0; part < 3 && chi > clo && rhi > rlo; part++) {
        int64_t a = part == 0 ? 0 : part == 1 ? clo : chi, e = part == 0 ? clo : part == 1 ? chi : p->OW;
        if (e <= a)
            continue;
        tth_tvar *vow = lw_var(c, "ow", TTH_I64);
        if (!vow)
            return NULL;
        tth_tstmt *el = part == 1 ? pool_elem_blocked_inside(c, p, x, s, nc, oh, lw_ref(c, vow))
                                  : pool_elem_blocked(c, p, x, s, nc, oh, lw_ref(c, vow));
        if (!el || lw_append(c, &inner, lw_for(c, vow, lw_i(c, a), lw_i(c, e - a), TTH_LOOP_SERIAL, el)))
            return NULL;
    }
    /* every row inner (no padding above or below): the generic row would be dead code */
    if (inner && rlo == 0 && rhi == p->OH)
        return inner;
    lw_ax ow;
    if (lw_ax_make(c, &ow, "ow", p->OW))
        return NULL;
    all = lw_ax_loop(c, &ow, TTH_LOOP_SERIAL, pool_elem_blocked(c, p, x, s, nc, oh, ow.e));
    if (!inner || !all)
        return all;
    tth_texpr *in_rows = lw_bin(c, TTH_TBIN_AND, lw_bin(c, TTH_TBIN_GE, oh, lw_i(c, rlo)), lw_bin(c, TTH_TBIN_LT, oh, lw_i(c, rhi)));
    return tth_tir_if(c->m, in_rows, inner, all);
}

/* The parameters of a pooling (*p) and its input's buffer; NULL (diag set) when it is not
 * lowered */
static tth_tbuffer *pool_input(lw_ctx *c, const tth_rexpr *call, pool_p *p)
{
    char why[256];
    if (!pool_params(call, p, why, sizeof why))
        return lw_fail(c, TTH_EUNSUPPORTED, call, "%s", why), NULL;
    return lw_buf(c, lw_arg(call, 0));
}

tth_tstmt *lw_pool2d(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    pool_p p;
    tth_tbuffer *x = pool_input(c, call, &p);
    if (!x)
        return NULL;
    if (p.b) {
        /* bands of output rows outermost, as the convolutions split theirs (docs/threads.md,
         * "Locality"): a task reads the rows its core wrote, not half of every channel block */
        int64_t NC = p.N * p.C, R, nb = lw_bands(c, p.OH, &R);
        lw_ax q;
        tth_tvar *vnc = lw_var(c, "nc", TTH_I64), *vb = lw_var(c, "b", TTH_I64), *voh = lw_var(c, "oh", TTH_I64);
        if (!vnc || !vb || !voh || lw_ax_make(c, &q, "q", nb * NC))
            return NULL;
        tth_tstmt *el = pool_row_blocked(c, &p, x, s, lw_ref(c, vnc), lw_ref(c, voh));
        el = lw_band_loop(c, voh, lw_ref(c, vb), R, p.OH, el);
        el = lw_let(c, vb, lw_bin(c, TTH_TBIN_DIV, q.e, lw_i(c, NC)), lw_let(c, vnc, lw_bin(c, TTH_TBIN_MOD, q.e, lw_i(c, NC)), el));
        int64_t work = NC * p.b * p.OH * p.OW * p.KH * p.KW;
        return lw_ax_loop(c, &q, work >= LW_PARALLEL_MIN && nb * NC > 1 ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL, el);
    }
    int direct = 0;
    tth_tbuffer *acc = pool_acc(c, s, x->dtype, &direct);
    lw_ax nc, oh, ow;
    if (!acc || lw_ax_make(c, &nc, "nc", p.N * p.C) || lw_ax_make(c, &oh, "oh", p.OH) || lw_ax_make(c, &ow, "ow", p.OW))
        return NULL;
    tth_tstmt *el = pool_elem(c, &p, x, acc, direct, s, nc.e, oh.e, ow.e);
    el = lw_ax_loop(c, &ow, TTH_LOOP_SERIAL, el);
    el = lw_ax_loop(c, &oh, TTH_LOOP_SERIAL, el);
    int64_t work = p.N * p.C * p.OH * p.OW * p.KH * p.KW;
    el = lw_ax_loop(c, &nc, direct && work >= LW_PARALLEL_MIN ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL, el);
    if (el && !direct)
        el = tth_tir_allocate(c->m, acc, el);
    return el;
}

/* ------------------------------------------------------------- max with its index ---- */

/* One output element (nc, oh, ow) of nn.max_pool2d_with_argmax: over the taps inside the image in
 * row-major order, a tap replaces the best so far when it is larger (or is the first), so ties
 * keep the first; its flat index is (nc*H + h)*W + w, or nc*H*W + w*H + h for storage order 1. */
static tth_tstmt *argmax_elem(lw_ctx *c, const pool_p *p, int col_major, tth_tbuffer *x, tth_tbuffer *best,
                              tth_tbuffer *bi, const lw_sink *s, tth_texpr *nc, tth_texpr *oh, tth_texpr *ow)
{
    tth_tvar *vkh = lw_var(c, "kh", TTH_I64), *vkw = lw_var(c, "kw", TTH_I64), *vh = lw_var(c, "h", TTH_I64);
    tth_tvar *vlh = lw_var(c, "lo", TTH_I64), *veh = lw_var(c, "ex", TTH_I64);
    tth_tvar *vlw = lw_var(c, "lo", TTH_I64), *vew = lw_var(c, "ex", TTH_I64), *vw = lw_var(c, "w", TTH_I64);
    tth_tvar *vn = lw_var(c, "n", TTH_I64), *vc = lw_var(c, "c", TTH_I64);
    if (!vkh || !vkw || !vh || !vlh || !veh || !vlw || !vew || !vw || !vn || !vc)
        return NULL;
    tth_texpr *lo_h, *ex_h, *lo_w, *ex_w, *zero = lw_i(c, 0);
    lw_window_range(c, oh, p->sh, p->dh, p->pt, p->H, p->KH, p->OH, &lo_h, &ex_h);
    lw_window_range(c, ow, p->sw, p->dw, p->pl, p->W, p->KW, p->OW, &lo_w, &ex_w);
    tth_texpr *h = lw_ref(c, vh), *w = lw_ref(c, vw);
    tth_texpr *xi = lw_add(c, lw_mul(c, lw_add(c, lw_mul(c, nc, lw_i(c, p->H)), h), lw_i(c, p->W)), w);
    tth_texpr *flat = col_major ? lw_add(c, lw_mul(c, nc, lw_i(c, p->H * p->W)),
                                         lw_add(c, lw_mul(c, w, lw_i(c, p->H)), h))
                                : xi;
    tth_texpr *xv = tth_tir_load(c->m, x, xi);
    tth_texpr *better = lw_bin(c, TTH_TBIN_OR, lw_bin(c, TTH_TBIN_LT, tth_tir_load(c->m, bi, zero), zero),
                               lw_bin(c, TTH_TBIN_GT, xv, tth_tir_load(c->m, best, zero)));
    tth_tstmt *take = NULL;
    if (lw_append(c, &take, tth_tir_store(c->m, best, zero, xv)) ||
        lw_append(c, &take, tth_tir_store(c->m, bi, zero, flat)))
        return NULL;
    tth_tstmt *taps = tth_tir_if(c->m, better, take, NULL);
    taps = lw_let(c, vw, lw_sub(c, lw_add(c, lw_mul(c, ow, lw_i(c, p->sw)), lw_mul(c, lw_ref(c, vkw), lw_i(c, p->dw))),
                                lw_i(c, p->pl)), taps);
    taps = lw_for(c, vkw, lw_ref(c, vlw), lw_ref(c, vew), TTH_LOOP_SERIAL, taps);
    taps = lw_let(c, vh, lw_sub(c, lw_add(c, lw_mul(c, oh, lw_i(c, p->sh)), lw_mul(c, lw_ref(c, vkh), lw_i(c, p->dh))),
                                lw_i(c, p->pt)), taps);
    taps = lw_for(c, vkh, lw_ref(c, vlh), lw_ref(c, veh), TTH_LOOP_SERIAL, taps);
    tth_texpr *oidx[4] = {lw_ref(c, vn), lw_ref(c, vc), oh, ow};
    tth_tstmt *seq = NULL;
    if (!taps || lw_append(c, &seq, tth_tir_store(c->m, best, zero, lw_imm(c, x->dtype, lw_dtype_lowest(x->dtype)))) ||
        lw_append(c, &seq, tth_tir_store(c->m, bi, zero, lw_i(c, -1))) || lw_append(c, &seq, taps) ||
        lw_append(c, &seq, lw_sink_store(c, s, 0, oidx, tth_tir_load(c->m, best, zero))) ||
        lw_append(c, &seq, lw_sink_store(c, s, 1, oidx, tth_tir_load(c->m, bi, zero))))
        return NULL;
    tth_tstmt *el = lw_let(c, vlh, lo_h, lw_let(c, veh, ex_h, lw_let(c, vlw, lo_w, lw_let(c, vew, ex_w, seq))));
    return lw_let(c, vn, lw_bin(c, TTH_TBIN_DIV, nc, lw_i(c, p->C)),
                  lw_let(c, vc, lw_bin(c, TTH_TBIN_MOD, nc, lw_i(c, p->C)), el));
}

/* nn.max_pool2d_with_argmax: the max and its index in one pass over the taps, through two LOCAL
 * scalars, stored to the tuple's two fields */
tth_tstmt *lw_max_pool2d_argmax(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    pool_p p;
    tth_tbuffer *x = pool_input(c, call, &p);
    if (!x)
        return NULL;
    int64_t one = 1;
    tth_tbuffer *best = lw_local(c, "best", x->dtype, 1, &one);
    tth_tbuffer *bi = best ? lw_local(c, "bi", TTH_I64, 1, &one) : NULL;
    lw_ax nc, oh, ow;
    if (!bi || lw_ax_make(c, &nc, "nc", p.N * p.C) || lw_ax_make(c, &oh, "oh", p.OH) || lw_ax_make(c, &ow, "ow", p.OW))
        return NULL;
    int col_major = lw_attr_int(call, "storage_order", 0) == 1;
    tth_tstmt *el = argmax_elem(c, &p, col_major, x, best, bi, s, nc.e, oh.e, ow.e);
    el = lw_ax_loop(c, &ow, TTH_LOOP_SERIAL, el);
    el = lw_ax_loop(c, &oh, TTH_LOOP_SERIAL, el);
    el = lw_ax_loop(c, &nc, TTH_LOOP_SERIAL, el);
    el = el ? tth_tir_allocate(c->m, bi, el) : NULL;
    return el ? tth_tir_allocate(c->m, best, el) : NULL;
}

/* ------------------------------------------------------------ row-vectorized kernel ---- */

/* float32 max or average pooling on a vector target, without a fused epilogue, with at least one
 * vector of columns whose taps are all inside the image row */
int lw_pool_rows_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    pool_p p;
    char why[8];
    tth_dtype dt = lw_ty(lw_arg(call, 0))->dtype;
    /* float32; or a max of int8 / uint8 (a quantized model's pool on its integers, docs/int8.md) */
    if (s->epi || !pool_params(call, &p, why, sizeof why) || p.b ||
        !(dt == TTH_F32 || (call->u.call.op == TTH_OP_MAX_POOL2D && (dt == TTH_I8 || dt == TTH_U8))))
        return 0;
    int64_t lo, hi;
    inner_cols(&p, &lo, &hi);
    return c->vec.f32_lanes >= 4 && hi - lo >= c->vec.f32_lanes;
}

/* `lanes` outputs of row oh of plane nc from column ow0 (all taps inside the row): one vector
 * accumulator; per tap row in the image, KW loads of a ramp of stride sw */
static tth_tstmt *pool_vec(lw_ctx *c, const pool_p *p, tth_tbuffer *x, const lw_sink *s, tth_texpr *nc,
                           tth_texpr *oh, tth_texpr *lo_h, tth_texpr *ex_h, tth_texpr *ow0, int lanes)
{
    tth_tstmt *seq = NULL;
    tth_dtype t = x->dtype;
    tth_tbuffer *acc = lw_reg_tile_of(c, t, 1, lanes, &seq);
    tth_tvar *vkh = lw_var(c, "kh", TTH_I64), *vxr = lw_var(c, "xr", TTH_I64);
    if (!acc || !vkh || !vxr)
        return NULL;
    /* the tile starts at zero: a max starts from the dtype's lowest value instead */
    if (p->is_max) {
        seq = NULL;
        if (lw_append(c, &seq, tth_tir_vstore(c->m, acc, lw_i(c, 0), tth_tir_broadcast(c->m, lw_imm(c, t, lw_dtype_lowest(t)), lanes), 0)))
            return NULL;
    }
    tth_texpr *ih = lw_sub(c, lw_add(c, lw_mul(c, oh, lw_i(c, p->sh)), lw_mul(c, lw_ref(c, vkh), lw_i(c, p->dh))), lw_i(c, p->pt));
    tth_texpr *xr = lw_add(c, lw_mul(c, lw_add(c, lw_mul(c, nc, lw_i(c, p->H)), ih), lw_i(c, p->W)),
                           lw_sub(c, lw_mul(c, ow0, lw_i(c, p->sw)), lw_i(c, p->pl)));
    /* the taps of a row: unrolled when few, else a loop (a 1-D pooling may have hundreds) */
    lw_ax kw;
    int unroll = p->KW <= POOL_UNROLL_TAPS;
    if (!unroll && lw_ax_make(c, &kw, "kw", p->KW))
        return NULL;
    tth_tstmt *taps = NULL;
    for (int64_t k = 0; k < (unroll ? p->KW : 1); k++) {
        tth_texpr *off = unroll ? lw_i(c, k * p->dw) : lw_mul(c, kw.e, lw_i(c, p->dw));
        tth_texpr *xv = tth_tir_load(c->m, x, tth_tir_ramp(c->m, lw_add(c, lw_ref(c, vxr), off), p->sw, lanes));
        tth_texpr *cur = tth_tir_vload(c->m, acc, lw_i(c, 0), lanes, 0);
        if (lw_append(c, &taps, tth_tir_vstore(c->m, acc, lw_i(c, 0), p->is_max ? lw_bin(c, TTH_TBIN_MAX, cur, xv) : lw_add(c, cur, xv), 0)))
            return NULL;
    }
    if (!unroll)
        taps = lw_ax_loop(c, &kw, TTH_LOOP_SERIAL, taps);
    taps = lw_let(c, vxr, xr, taps);
    taps = lw_for(c, vkh, lo_h, ex_h, TTH_LOOP_SERIAL, taps);
    if (!taps || lw_append(c, &seq, taps))
        return NULL;
    tth_texpr *v = tth_tir_vload(c->m, acc, lw_i(c, 0), lanes, 0);
    if (!p->is_max) {
        /* every column here has its KW taps inside the row; rows: the taps inside the image, or
         * with count_include_pad those inside the padded image */
        tth_texpr *rows = ex_h;
        if (p->count_include_pad)
            rows = lw_bin(c, TTH_TBIN_MIN, lw_i(c, p->KH),
                          lw_add(c, lw_floordiv(c, lw_sub(c, lw_i(c, p->H + p->pb - 1 + p->pt), lw_mul(c, oh, lw_i(c, p->sh))), p->dh), lw_i(c, 1)));
        tth_texpr *den = lw_cast(c, TTH_F32, lw_bin(c, TTH_TBIN_MAX, lw_mul(c, rows, lw_i(c, p->KW)), lw_i(c, 1)));
        v = lw_bin(c, TTH_TBIN_DIV, v, tth_tir_broadcast(c->m, den, lanes));
    }
    tth_texpr *oidx[4] = {p->C == 1 ? nc : lw_bin(c, TTH_TBIN_DIV, nc, lw_i(c, p->C)),
                          p->C == 1 ? lw_i(c, 0) : lw_bin(c, TTH_TBIN_MOD, nc, lw_i(c, p->C)), oh,
                          tth_tir_ramp(c->m, ow0, 1, lanes)};
    if (lw_append(c, &seq, lw_sink_store(c, s, 0, oidx, v)))
        return NULL;
    return tth_tir_allocate(c->m, acc, seq);
}

/* Rows of output in vectors (docs/lowering.md, "Pooling"): a parallel loop over (band, plane)
 * pairs, bands outermost (docs/threads.md, "Locality"): the target's num-cores bands of output
 * rows (one band without it), each plane's rows of a band in order, so a core reads its share of
 * every plane as one stream. In a row, the columns whose taps are all inside the image are vectors
 * of the target's lanes (the last narrower), the few at the edges the generic element code. */
tth_tstmt *lw_pool_rows(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    pool_p p;
    tth_tbuffer *x = pool_input(c, call, &p);
    if (!x)
        return NULL;
    int direct = 0, vl = c->vec.f32_lanes;
    tth_tbuffer *acc = pool_acc(c, s, x->dtype, &direct);
    int64_t lo, hi, NC = p.N * p.C, R, nb = lw_bands(c, p.OH, &R);
    inner_cols(&p, &lo, &hi);
    lw_ax q, el, er;
    tth_tvar *vnc = lw_var(c, "nc", TTH_I64), *vb = lw_var(c, "b", TTH_I64), *voh = lw_var(c, "oh", TTH_I64),
             *vlh = lw_var(c, "lo", TTH_I64), *veh = lw_var(c, "ex", TTH_I64);
    if (!acc || !vnc || !vb || !voh || !vlh || !veh || lw_ax_make(c, &q, "q", nb * NC) || lw_ax_make(c, &el, "ow", lo) ||
        lw_ax_make(c, &er, "ow", p.OW - hi))
        return NULL;
    tth_texpr *nc = lw_ref(c, vnc), *oh = lw_ref(c, voh);
    tth_tstmt *row = NULL;
    if (lo > 0) {
        tth_tstmt *e = lw_ax_loop(c, &el, TTH_LOOP_SERIAL, pool_elem(c, &p, x, acc, direct, s, nc, oh, el.e));
        if (!e || lw_append(c, &row, e))
            return NULL;
    }
    /* the inner columns: a loop over whole vectors, then the rest (a last column alone is one
     * element) */
    int64_t nvec = (hi - lo) / vl, rest = (hi - lo) % vl;
    lw_ax jv;
    if (lw_ax_make(c, &jv, "ov", nvec))
        return NULL;
    tth_tstmt *v = pool_vec(c, &p, x, s, nc, oh, lw_ref(c, vlh), lw_ref(c, veh),
                            lw_add(c, lw_i(c, lo), lw_mul(c, jv.e, lw_i(c, vl))), vl);
    v = lw_ax_loop(c, &jv, TTH_LOOP_SERIAL, v);
    if (!v || lw_append(c, &row, v))
        return NULL;
    if (rest) {
        int64_t ow0 = lo + nvec * vl;
        v = rest > 1 ? pool_vec(c, &p, x, s, nc, oh, lw_ref(c, vlh), lw_ref(c, veh), lw_i(c, ow0), (int)rest)
                     : pool_elem(c, &p, x, acc, direct, s, nc, oh, lw_i(c, ow0));
        if (!v || lw_append(c, &row, v))
            return NULL;
    }
    if (hi < p.OW) {
        tth_tstmt *e = lw_ax_loop(c, &er, TTH_LOOP_SERIAL,
                                  pool_elem(c, &p, x, acc, direct, s, nc, oh, lw_add(c, er.e, lw_i(c, hi))));
        if (!e || lw_append(c, &row, e))
            return NULL;
    }
    tth_texpr *lo_h, *ex_h;
    lw_window_range(c, oh, p.sh, p.dh, p.pt, p.H, p.KH, p.OH, &lo_h, &ex_h);
    row = lw_let(c, vlh, lo_h, lw_let(c, veh, ex_h, row));
    row = lw_band_loop(c, voh, lw_ref(c, vb), R, p.OH, row);
    row = lw_let(c, vb, lw_bin(c, TTH_TBIN_DIV, q.e, lw_i(c, NC)), lw_let(c, vnc, lw_bin(c, TTH_TBIN_MOD, q.e, lw_i(c, NC)), row));
    int64_t work = NC * p.OH * p.OW * p.KH * p.KW;
    row = lw_ax_loop(c, &q, direct && work >= LW_PARALLEL_MIN ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL, row);
    if (row && !direct)
        row = tth_tir_allocate(c->m, acc, row);
    return row;
}

tth_tstmt *lw_global_pool2d(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    pool_p p;
    tth_tbuffer *x = pool_input(c, call, &p);
    if (!x)
        return NULL;
    int is_max = p.is_max;
    tth_dtype t = x->dtype;
    int64_t HW = p.H * p.W;
    if (!is_max && !tth_dtype_is_float(t)) {
        lw_fail(c, TTH_EUNSUPPORTED, call, "%s: %s is not supported (floating point only)",
                tth_op_name(call->u.call.op), tth_dtype_name(t));
        return NULL;
    }
    if (p.b) { /* NCHW<b>c: per (image, block), a vector of b channels summed over the plane */
        int b = (int)p.b;
        lw_ax nc, k;
        tth_tstmt *seq = NULL;
        tth_tbuffer *acc = lw_reg_tile(c, 1, b, &seq);
        if (!acc || lw_ax_make(c, &nc, "nc", p.N * p.C) || lw_ax_make(c, &k, "k", HW))
            return NULL;
        tth_texpr *row = lw_mul(c, nc.e, lw_i(c, HW * b));
        if (is_max) { /* from the plane's first pixel (exact for -inf and NaN) */
            seq = NULL;
            if (lw_append(c, &seq, tth_tir_vstore(c->m, acc, lw_i(c, 0), tth_tir_vload(c->m, x, row, b, 0), 0)))
                return NULL;
        }
        tth_texpr *xv = tth_tir_vload(c->m, x, lw_add(c, row, lw_mul(c, k.e, lw_i(c, b))), b, 0);
        tth_texpr *cur = tth_tir_vload(c->m, acc, lw_i(c, 0), b, 0);
        tth_tstmt *red = lw_ax_loop(c, &k, TTH_LOOP_SERIAL, tth_tir_vstore(c->m, acc, lw_i(c, 0),
                                    is_max ? lw_bin(c, TTH_TBIN_MAX, cur, xv) : lw_add(c, cur, xv), 0));
        tth_texpr *v = tth_tir_vload(c->m, acc, lw_i(c, 0), b, 0);
        if (!is_max)
            v = lw_bin(c, TTH_TBIN_DIV, v, tth_tir_broadcast(c->m, lw_imm(c, TTH_F32, (double)HW), b));
        tth_texpr *oidx[5] = {lw_bin(c, TTH_TBIN_DIV, nc.e, lw_i(c, p.C)), lw_bin(c, TTH_TBIN_MOD, nc.e, lw_i(c, p.C)),
                              lw_i(c, 0), lw_i(c, 0), tth_tir_ramp(c->m, lw_i(c, 0), 1, b)};
        if (!red || lw_append(c, &seq, red) || lw_append(c, &seq, lw_sink_store(c, s, 0, oidx, v)))
            return NULL;
        tth_tstmt *el = tth_tir_allocate(c->m, acc, seq);
        return lw_ax_loop(c, &nc, p.N * p.C * p.b * HW >= LW_PARALLEL_MIN && p.N * p.C > 1 ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL, el);
    }
    int vl = c->vec.f32_lanes;
    if (!is_max && t == TTH_F32 && vl > 1 && HW >= vl) {
        /* NCHW average on a vector target: per (image, channel), the plane's elements summed in
         * a vector of vl partial sums, then across its lanes and the last HW % vl elements' */
        int64_t nv = HW / vl, tail = HW % vl;
        lw_ax nc, k;
        tth_tstmt *seq = NULL;
        tth_tbuffer *acc = lw_reg_tile(c, 1, vl, &seq);
        if (!acc || lw_ax_make(c, &nc, "nc", p.N * p.C) || lw_ax_make(c, &k, "k", nv))
            return NULL;
        tth_texpr *row = lw_mul(c, nc.e, lw_i(c, HW));
        tth_texpr *xv = tth_tir_vload(c->m, x, lw_add(c, row, lw_mul(c, k.e, lw_i(c, vl))), vl, 0);
        tth_tstmt *red = lw_ax_loop(c, &k, TTH_LOOP_SERIAL,
                                    tth_tir_vstore(c->m, acc, lw_i(c, 0), lw_add(c, tth_tir_vload(c->m, acc, lw_i(c, 0), vl, 0), xv), 0));
        tth_texpr *v = tth_tir_intrin(c->m, TTH_TINTRIN_REDUCE_ADD, tth_tir_vload(c->m, acc, lw_i(c, 0), vl, 0), NULL);
        tth_texpr *rest = tail ? tth_tir_vload(c->m, x, lw_add(c, row, lw_i(c, nv * vl)), (int)tail, 0) : NULL;
        if (tail > 1)
            rest = tth_tir_intrin(c->m, TTH_TINTRIN_REDUCE_ADD, rest, NULL);
        if (rest)
            v = lw_add(c, v, rest);
        v = lw_bin(c, TTH_TBIN_DIV, v, lw_imm(c, t, (double)HW));
        tth_texpr *oidx[4] = {p.N == 1 ? lw_i(c, 0) : lw_bin(c, TTH_TBIN_DIV, nc.e, lw_i(c, p.C)),
                              p.C == 1 ? lw_i(c, 0) : lw_bin(c, TTH_TBIN_MOD, nc.e, lw_i(c, p.C)), lw_i(c, 0), lw_i(c, 0)};
        if (!red || lw_append(c, &seq, red) || lw_append(c, &seq, lw_sink_store(c, s, 0, oidx, v)))
            return NULL;
        return lw_ax_loop(c, &nc, p.N * p.C * HW >= LW_PARALLEL_MIN && p.N * p.C > 1 ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL,
                          tth_tir_allocate(c->m, acc, seq));
    }
    int direct = lw_sink_direct(s, 0, t);
    tth_tbuffer *acc = s->dest[0];
    if (!direct) {
        int64_t one = 1;
        acc = lw_local(c, "acc", t, 1, &one);
        if (!acc)
            return NULL;
    }
    lw_ax nc, k;
    if (lw_ax_make(c, &nc, "nc", p.N * p.C) || lw_ax_make(c, &k, "k", HW))
        return NULL;
    tth_texpr *ai = direct ? nc.e : lw_i(c, 0);
    /* max starts from the plane's first element (exact for -inf and NaN) */
    tth_texpr *first = tth_tir_load(c->m, x, lw_mul(c, nc.e, lw_i(c, HW)));
    tth_tstmt *init = tth_tir_store(c->m, acc, ai, is_max ? first : lw_imm(c, t, 0));
    tth_texpr *xv = tth_tir_load(c->m, x, lw_add(c, lw_mul(c, nc.e, lw_i(c, HW)), k.e));
    tth_texpr *cur = tth_tir_load(c->m, acc, ai);
    tth_tstmt *red = lw_ax_loop(c, &k, TTH_LOOP_SERIAL,
                                tth_tir_store(c->m, acc, ai, is_max ? lw_bin(c, TTH_TBIN_MAX, cur, xv) : lw_add(c, cur, xv)));
    tth_tvar *vn = lw_var(c, "n", TTH_I64), *vc = lw_var(c, "c", TTH_I64);
    if (!vn || !vc || !red)
        return NULL;
    tth_texpr *oidx[4] = {lw_ref(c, vn), lw_ref(c, vc), lw_i(c, 0), lw_i(c, 0)};
    tth_tstmt *fin = NULL;
    if (!is_max)
        fin = lw_sink_store(c, s, 0, oidx, lw_bin(c, TTH_TBIN_DIV, tth_tir_load(c->m, acc, ai), lw_imm(c, t, (double)HW)));
    else if (!direct || s->epi)
        fin = lw_sink_store(c, s, 0, oidx, tth_tir_load(c->m, acc, ai));
    tth_tstmt *seq = NULL;
    if (lw_append(c, &seq, init) || lw_append(c, &seq, red) || lw_append(c, &seq, fin))
        return NULL;
    tth_tstmt *el = lw_let(c, vn, p.C == 1 ? nc.e : lw_bin(c, TTH_TBIN_DIV, nc.e, lw_i(c, p.C)),
                           lw_let(c, vc, p.C == 1 ? lw_i(c, 0) : lw_bin(c, TTH_TBIN_MOD, nc.e, lw_i(c, p.C)), seq));
    el = lw_ax_loop(c, &nc, direct && p.N * p.C * HW >= LW_PARALLEL_MIN ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL, el);
    if (el && !direct)
        el = tth_tir_allocate(c->m, acc, el);
    return el;
}
