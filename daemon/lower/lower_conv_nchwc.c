/* lower_conv_nchwc.c: the depthwise convolution on NCHW<b>c tensors, and grouped ones of small
 * groups (docs/layouts.md, "Kernels" and "Small groups").
 *
 * Input [N, C/b, H, W, b], weight [C, 1, KH, KW] packed at compile time as [C/b][KH][KW][b] (a
 * weight computed at run time is read in place, each tap's vector a strided load),
 * output [N, C/b, OH, OW, b]. A vector is the b channels of one pixel, so every tap of every
 * pixel is one contiguous load, whatever the stride; a tile is RW pixels of one output row:
 *     for kh (rows inside the image), kw:  w = wp[c1, kh, kw][0:b]
 *         for r:  acc[r] = fma(x[n, c1, oh*sh - pt + kh*dh, (ow0 + r)*sw - pl + kw*dw][0:b], w, acc[r])
 * In the tiles inside the image the taps of a row are unrolled and each input column is loaded
 * once for every tap that reads it (dwb_row). The columns whose taps all lie inside the image
 * row are whole tiles without a test; the few at each edge are single pixels whose taps test
 * their column. Nothing is copied: no padded image. */
#include <stdio.h>
#include <string.h>

#include "lower_conv_tiled.h"

/* the widest kernel row whose taps share the input columns of a tile (dwb_row): its weights
 * stay in registers beside the tile's accumulators */
#define DWB_ROW_KW_MAX 7

/* [C/b][KH][KW][Cg][b] from the constant OIHW weight [C, Cg, KH, KW] (Cg 1: depthwise):
 * float32, or for int8 weights int32 (the int8 kernel multiplies in int32) */
static tth_tbuffer *dwb_pack(tk *k, const tth_tensor *wt)
{
    const lw_conv_p *p = k->p;
    int64_t b = p->ob, KK = p->KH * p->KW, Cg = k->Cg;
    int q = wt->type.dtype == TTH_I8;
    tth_tensor *pk = q ? lw_table_new(k->c, TTH_I32, p->C * Cg * KK, NULL) : lw_packed_new(k->c, p->C * Cg * KK);
    if (!pk)
        return NULL;
    for (int64_t ch = 0; ch < p->C * Cg; ch++)
        for (int64_t kk = 0; kk < KK; kk++) {
            int64_t o = ch / Cg, i = ch % Cg;
            int64_t to = (((o / b) * KK + kk) * Cg + i) * b + o % b, from = ch * KK + kk;
            if (q)
                ((int32_t *)pk->data)[to] = ((const int8_t *)wt->data)[from];
            else
                ((float *)pk->data)[to] = ((const float *)wt->data)[from];
        }
    return lw_packed_const(k->c, pk);
}

/* the input of column iw of the row at vrow for step i (perm: the step's lanes, NULL for a
 * depthwise convolution): the pixel's vector, or lane l its channel (l / Cg)*Cg + i, a permuted
 * load (docs/layouts.md, "Small groups"); int8: widened to int32, less the zero point */
static tth_texpr *dwb_x(tk *k, tth_tvar *vrow, tth_texpr *iw, tth_texpr *perm)
{
    lw_ctx *c = k->c;
    int b = (int)k->p->ob;
    tth_texpr *at0 = lw_add(c, lw_ref(c, vrow), lw_mul(c, iw, lw_i(c, b)));
    tth_texpr *xv = perm ? tth_tir_load(c->m, k->x, lw_add(c, at0, perm)) : tth_tir_vload(c->m, k->x, at0, b, 0);
    if (k->xdt != TTH_F32) { /* int8: (x - x_zp) * w in int32; a tap outside the image is x_zp, so it adds 0 */
        xv = lw_cast(c, TTH_I32, xv);
        if (k->xzp)
            xv = lw_sub(c, xv, tth_tir_broadcast(c->m, tth_tir_int(c->m, TTH_I32, k->xzp), b));
    }
    return xv;
}

/* the lanes of step i of a grouped convolution; NULL for a depthwise one */
static tth_texpr *dwb_perm(tk *k, int64_t i)
{
    lw_ctx *c = k->c;
    int b = (int)k->p->ob;
    if (k->Cg == 1)
        return NULL;
    tth_texpr *group = lw_bin(c, TTH_TBIN_DIV, tth_tir_ramp(c->m, lw_i(c, 0), 1, b), lw_i(c, k->Cg)); /* l / Cg */
    return lw_add(c, lw_mul(c, group, lw_i(c, k->Cg)), lw_i(c, i));
}

/* the weights of step i of tap `tap` (kh * KW + kw) for block c1 */
static tth_texpr *dwb_w(tk *k, tth_texpr *c1, tth_texpr *tap, int64_t i)
{
    lw_ctx *c = k->c;
    const lw_conv_p *p = k->p;
    int b = (int)p->ob;
    int64_t KK = p->KH * p->KW;
    if (k->wpacked) { /* [C/b][KH][KW][Cg][b] */
        tth_texpr *tap_of_block = lw_add(c, lw_mul(c, c1, lw_i(c, KK)), tap);
        return tth_tir_vload(c->m, k->w, lw_mul(c, lw_add(c, lw_mul(c, tap_of_block, lw_i(c, k->Cg)), lw_i(c, i)), lw_i(c, b)), b, 0);
    }
    /* the weight as computed, [C, Cg, KH, KW]: the block's channels Cg*KH*KW apart */
    tth_texpr *first = lw_add(c, lw_mul(c, c1, lw_i(c, b * k->Cg)), lw_i(c, i)); /* row c1*b*Cg + i of [C*Cg][KK] */
    return tth_tir_load(c->m, k->w, tth_tir_ramp(c->m, lw_add(c, lw_mul(c, first, lw_i(c, KK)), tap), k->Cg * KK, b));
}

/* acc[r] += x * w */
static tth_tstmt *dwb_madd(tk *k, tth_tbuffer *acc, int r, tth_texpr *x, tth_texpr *w)
{
    lw_ctx *c = k->c;
    int b = (int)k->p->ob;
    tth_texpr *ai = lw_i(c, (int64_t)r * b);
    return tth_tir_vstore(c->m, acc, ai, tk_madd(k, x, w, tth_tir_vload(c->m, acc, ai, b, 0)), 0);
}

/* Step i of tap (kh, kw) for the RW pixels of a tile from column ow0 (row xr of the input at
 * vrow): acc[r] += x * w with w the tap's weights for step i. `edge`: the taps test their
 * column. */
static tth_tstmt *dwb_step(tk *k, tth_tbuffer *acc, tth_texpr *c1, tth_texpr *ow0, int RW, int edge, tth_texpr *tap,
                           tth_texpr *kw, tth_tvar *vrow, int64_t i)
{
    lw_ctx *c = k->c;
    const lw_conv_p *p = k->p;
    tth_tvar *vw = lw_var_vec(c, "w", tk_acc_dtype(k), (int)p->ob);
    if (!vw)
        return NULL;
    tth_texpr *perm = dwb_perm(k, i);
    tth_tstmt *upd = NULL;
    for (int r = 0; r < RW; r++) {
        /* input column of pixel ow0 + r at tap kw */
        tth_texpr *iw = lw_add(c, lw_sub(c, lw_mul(c, lw_add(c, ow0, lw_i(c, r)), lw_i(c, p->sw)), lw_i(c, p->pl)),
                               lw_mul(c, kw, lw_i(c, p->dw)));
        tth_tstmt *st = dwb_madd(k, acc, r, dwb_x(k, vrow, iw, perm), lw_ref(c, vw));
        if (edge)
            st = tth_tir_if(c->m, lw_bin(c, TTH_TBIN_AND, lw_bin(c, TTH_TBIN_GE, iw, lw_i(c, 0)),
                                         lw_bin(c, TTH_TBIN_LT, iw, lw_i(c, p->W))), st, NULL);
        if (lw_append(c, &upd, st))
            return NULL;
    }
    return lw_let(c, vw, dwb_w(k, c1, tap, i), upd);
}

/* the pixel r of a tile of RW whose tap kw reads the tile's input column o (r*sw + kw*dw = o),
 * or -1 */
static int dwb_pixel(int o, int kw, int RW, int sw, int dw)
{
    int col = o - kw * dw;
    return col >= 0 && col % sw == 0 && col / sw < RW ? col / sw : -1;
}

/* whether some tap of a row of KW reads the tile's input column o */
static int dwb_read(int o, int KW, int RW, int sw, int dw)
{
    for (int kw = 0; kw < KW; kw++)
        if (dwb_pixel(o, kw, RW, sw, dw) >= 0)
            return 1;
    return 0;
}

/* the input columns a tile of RW pixels reads in a row of KW taps, each counted once */
static int dwb_row_loads(int RW, int KW, int sw, int dw)
{
    int n = 0;
    for (int o = 0; o <= (RW - 1) * sw + (KW - 1) * dw; o++)
        n += dwb_read(o, KW, RW, sw, dw);
    return n;
}

/* Step i of every tap of row kh for an interior tile (docs/layouts.md, "Kernels"): the
 * KW weights first, then each input column the tile reads, ow0*sw - pl + o for o from 0 to
 * (RW - 1)*sw + (KW - 1)*dw, loaded (and permuted) once and multiplied into every pixel r with
 * r*sw + kw*dw = o: in a 3x3 layer of tiles of 8, 10 loads at stride 1 and 17 at stride 2 where
 * a loop over the taps made 24. */
static tth_tstmt *dwb_row(tk *k, tth_tbuffer *acc, tth_texpr *c1, tth_texpr *ow0, int RW, tth_texpr *kh, tth_tvar *vrow,
                          int64_t i)
{
    lw_ctx *c = k->c;
    const lw_conv_p *p = k->p;
    int KW = (int)p->KW, dw = (int)p->dw, sw = (int)p->sw;
    tth_dtype at = tk_acc_dtype(k);
    tth_tvar *vw[DWB_ROW_KW_MAX];
    tth_texpr *perm = dwb_perm(k, i);
    tth_tstmt *body = NULL;
    for (int kw = 0; kw < KW; kw++)
        if (!(vw[kw] = lw_var_vec(c, "w", at, (int)p->ob)))
            return NULL;
    for (int o = (RW - 1) * sw + (KW - 1) * dw; o >= 0; o--) {
        if (!dwb_read(o, KW, RW, sw, dw))
            continue;
        tth_tvar *vx = lw_var_vec(c, "x", at, (int)p->ob);
        if (!vx)
            return NULL;
        tth_tstmt *use = NULL;
        for (int kw = 0; kw < KW; kw++) {
            int r = dwb_pixel(o, kw, RW, sw, dw);
            if (r >= 0 && lw_append(c, &use, dwb_madd(k, acc, r, lw_ref(c, vx), lw_ref(c, vw[kw]))))
                return NULL;
        }
        if (body && lw_append(c, &use, body))
            return NULL;
        body = lw_let(c, vx, dwb_x(k, vrow, lw_add(c, lw_mul(c, ow0, lw_i(c, sw)), lw_i(c, o - p->pl)), perm), use);
    }
    for (int kw = KW - 1; kw >= 0; kw--)
        body = lw_let(c, vw[kw], dwb_w(k, c1, lw_add(c, lw_mul(c, kh, lw_i(c, KW)), lw_i(c, kw)), i), body);
    return body;
}

/* RW pixels of row oh of block c1 from column ow0; `edge`: the taps test their column */
static tth_tstmt *dwb_tile(tk *k, tth_texpr *c1, tth_texpr *oh, tth_texpr *ow0, int RW, int edge)
{
    lw_ctx *c = k->c;
    const lw_conv_p *p = k->p;
    int b = (int)p->ob;
    tth_tstmt *seq = NULL;
    tth_tbuffer *acc = lw_reg_tile_of(c, tk_acc_dtype(k), RW, b, &seq);
    lw_ax kh, kw;
    tth_tvar *vih = lw_var(c, "ih", TTH_I64), *vrow = lw_var(c, "xr", TTH_I64);
    if (!acc || !vih || !vrow || lw_ax_make(c, &kh, "kh", p->KH) || lw_ax_make(c, &kw, "kw", p->KW))
        return NULL;
    tth_texpr *tap = lw_add(c, lw_mul(c, kh.e, lw_i(c, p->KW)), kw.e);
    /* an interior tile shares each input column among its taps (dwb_row) when some column is
     * read by more than one (not a tile of one pixel, nor a dilation wider than the tile) */
    int shared = !edge && p->KW <= DWB_ROW_KW_MAX && dwb_row_loads(RW, (int)p->KW, (int)p->sw, (int)p->dw) < RW * p->KW;
    tth_tstmt *taps = NULL;
    for (int64_t i = 0; i < k->Cg; i++) {
        tth_tstmt *st = shared ? dwb_row(k, acc, c1, ow0, RW, kh.e, vrow, i)
                               : dwb_step(k, acc, c1, ow0, RW, edge, tap, kw.e, vrow, i);
        if (!st || lw_append(c, &taps, st))
            return NULL;
    }
    if (!shared)
        taps = lw_ax_loop(c, &kw, TTH_LOOP_SERIAL, taps);
    /* row ih of the image, when inside it: its first element */
    tth_texpr *ih = lw_ref(c, vih);
    tth_texpr *inside = lw_bin(c, TTH_TBIN_AND, lw_bin(c, TTH_TBIN_GE, ih, lw_i(c, 0)), lw_bin(c, TTH_TBIN_LT, ih, lw_i(c, p->H)));
    tth_texpr *row = lw_mul(c, lw_add(c, lw_mul(c, lw_add(c, lw_mul(c, k->n, lw_i(c, p->C / b)), c1), lw_i(c, p->H)), ih),
                            lw_i(c, p->W * b));
    taps = tth_tir_if(c->m, inside, lw_let(c, vrow, row, taps), NULL);
    taps = lw_let(c, vih, lw_add(c, lw_sub(c, lw_mul(c, oh, lw_i(c, p->sh)), lw_i(c, p->pt)), lw_mul(c, kh.e, lw_i(c, p->dh))), taps);
    taps = lw_ax_loop(c, &kh, TTH_LOOP_SERIAL, taps);
    if (!taps || lw_append(c, &seq, taps))
        return NULL;
    for (int r = 0; r < RW; r++)
        if (lw_append(c, &seq, tk_epi_store_block(k, c1, oh, lw_add(c, ow0, lw_i(c, r)),
                                                  tth_tir_vload(c->m, acc, lw_i(c, (int64_t)r * b), b, 0))))
            return NULL;
    return tth_tir_allocate(c->m, acc, seq);
}

/* The interior columns [from, from + n) of row oh in tiles: of a width dividing n when one is
 * at least half of RW (one tile's code), else n / RW tiles of RW pixels and one of the rest. */
static tth_tstmt *dwb_cols(tk *k, tth_texpr *c1, tth_texpr *oh, int64_t from, int64_t n, int RW)
{
    lw_ctx *c = k->c;
    for (int w = RW; w > 0 && 2 * w >= RW; w--)
        if (n % w == 0) {
            RW = w;
            break;
        }
    tth_tstmt *seq = NULL;
    for (int part = 0; part < 2; part++) {
        int64_t cnt = part == 0 ? n / RW : (n % RW ? 1 : 0);
        int w = part == 0 ? RW : (int)(n % RW);
        if (cnt == 0)
            continue;
        lw_ax t;
        if (lw_ax_make(c, &t, "t", cnt))
            return NULL;
        tth_texpr *ow0 = lw_add(c, lw_i(c, from + (part ? n / RW * RW : 0)), lw_mul(c, t.e, lw_i(c, RW)));
        tth_tstmt *tl = dwb_tile(k, c1, oh, ow0, w, 0);
        if (!tl || lw_append(c, &seq, lw_ax_loop(c, &t, TTH_LOOP_SERIAL, tl)))
            return NULL;
    }
    return seq;
}

/* The edge columns of row oh, [0, owl) and [owr, OW), as one loop of single pixels testing their
 * taps: one pixel's code for both edges */
static tth_tstmt *dwb_edges(tk *k, tth_texpr *c1, tth_texpr *oh, int64_t owl, int64_t owr)
{
    lw_ctx *c = k->c;
    int64_t n = owl + k->p->OW - owr;
    if (n == 0)
        return NULL;
    lw_ax e;
    if (lw_ax_make(c, &e, "e", n))
        return NULL;
    tth_texpr *ow = owl == 0 ? lw_add(c, e.e, lw_i(c, owr))
                  : owr == k->p->OW ? e.e
                  : tth_tir_select(c->m, lw_bin(c, TTH_TBIN_LT, e.e, lw_i(c, owl)), e.e, lw_add(c, e.e, lw_i(c, owr - owl)));
    tth_tstmt *tl = dwb_tile(k, c1, oh, ow, 1, 1);
    return tl ? lw_ax_loop(c, &e, TTH_LOOP_SERIAL, tl) : NULL;
}

int lw_conv_depthwise_nchwc_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    (void)c;
    (void)s;
    lw_conv_p p;
    return tk_conv_f32_any(call, &p) && p.ob && p.xb == p.ob && p.groups == p.C && p.O == p.C;
}

/* Small groups in blocked channels (docs/layouts.md, "Small groups"): float32, NCHW<b>c in and
 * out, groups of Cg input and Cg output channels with Cg < b dividing b, so that each block of
 * outputs reads the same block of inputs */
int lw_conv_groups_nchwc_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    (void)c;
    (void)s;
    lw_conv_p p;
    if (!tk_conv_f32_any(call, &p) || !p.ob || p.xb != p.ob || p.groups == 1 || p.groups == p.C)
        return 0;
    int64_t Cg = p.C / p.groups;
    return p.O == p.C && Cg < p.ob && p.ob % Cg == 0 && Cg <= TTH_LOWER_SMALL_GROUP_MAX;
}

/* the blocked depthwise kernel for call of shapes p; xdt/xzp: an int8 or uint8 input and its
 * zero point (the weight then int8), else float32 */
static tth_tstmt *dwb_conv(lw_ctx *c, const tth_rexpr *call, const lw_sink *s, const lw_conv_p *pp, tth_dtype xdt,
                           int64_t xzp)
{
    lw_conv_p p = *pp;
    tk k;
    tk_init(&k, c, call, &p, s);
    k.vl = (int)p.ob;
    k.xdt = xdt;
    k.xzp = xzp;
    const tth_rexpr *wa = lw_arg(call, 1);
    k.wpacked = wa->kind == TTH_REXPR_CONST;
    if (!(k.x = lw_buf(c, lw_arg(call, 0))) || !(k.w = k.wpacked ? dwb_pack(&k, wa->u.constant.value) : lw_buf(c, wa)))
        return NULL;
    /* the columns whose every tap is inside the row: [owl, owr) */
    int64_t owl = (p.pl + p.sw - 1) / p.sw, last = p.W - 1 + p.pl - (p.KW - 1) * p.dw;
    int64_t owr = last < 0 ? 0 : last / p.sw + 1;
    if (owl > p.OW)
        owl = p.OW;
    if (owr > p.OW)
        owr = p.OW;
    if (owr < owl)
        owr = owl;
    int RW = c->vec.registers >= 32 ? 8 : 4;
    lw_ax an, q;
    int64_t C1 = p.C / p.ob;
    if (lw_ax_make(c, &an, "n", p.N) || lw_ax_make(c, &q, "q", C1 * p.OH))
        return NULL;
    k.n = an.e;
    tth_tvar *vc1 = lw_var(c, "c1", TTH_I64), *voh = lw_var(c, "oh", TTH_I64);
    if (!vc1 || !voh)
        return NULL;
    tth_texpr *c1 = lw_ref(c, vc1), *oh = lw_ref(c, voh);
    tth_tstmt *row = NULL;
    if (lw_append(c, &row, dwb_edges(&k, c1, oh, owl, owr)) || lw_append(c, &row, dwb_cols(&k, c1, oh, owl, owr - owl, RW)))
        return NULL;
    int64_t work = p.C * p.OH * p.OW * p.KH * p.KW;
    int par = work >= (xdt == TTH_F32 ? LW_PARALLEL_MIN : LW_PARALLEL_MIN_DW) && C1 * p.OH > 1;
    if (xdt == TTH_F32) {
        row = lw_let(c, vc1, lw_bin(c, TTH_TBIN_DIV, q.e, lw_i(c, p.OH)), lw_let(c, voh, lw_bin(c, TTH_TBIN_MOD, q.e, lw_i(c, p.OH)), row));
    } else {
        /* rows outermost: each core a band of rows of every block, the pixels the layers before
         * and after it have on that core (docs/int8.md, "Blocked channels") */
        row = lw_let(c, voh, lw_bin(c, TTH_TBIN_DIV, q.e, lw_i(c, C1)), lw_let(c, vc1, lw_bin(c, TTH_TBIN_MOD, q.e, lw_i(c, C1)), row));
    }
    row = lw_ax_loop(c, &q, par ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL, row);
    return lw_ax_loop(c, &an, TTH_LOOP_SERIAL, row);
}

tth_tstmt *lw_conv_groups_nchwc(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    lw_conv_p p;
    if (!lw_conv_groups_nchwc_applies(c, call, s) || !tk_conv_f32_any(call, &p))
        return lw_fail(c, TTH_EINTERNAL, call, "conv2d/groups-nchwc does not apply"), NULL;
    return dwb_conv(c, call, s, &p, TTH_F32, 0);
}

tth_tstmt *lw_conv_depthwise_nchwc(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    lw_conv_p p;
    if (!lw_conv_depthwise_nchwc_applies(c, call, s) || !tk_conv_f32_any(call, &p))
        return lw_fail(c, TTH_EINTERNAL, call, "conv2d/depthwise-nchwc does not apply"), NULL;
    return dwb_conv(c, call, s, &p, TTH_F32, 0);
}

tth_tstmt *tk_conv_depthwise_nchwc_int8(lw_ctx *c, const tth_rexpr *call, const lw_sink *s, const lw_conv_p *p,
                                        int64_t xzp)
{
    return dwb_conv(c, call, s, p, lw_ty(lw_arg(call, 0))->dtype, xzp);
}
