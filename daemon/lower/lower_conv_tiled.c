/* lower_conv_tiled.c: the register-tiled float32 convolution kernels (docs/lowering.md,
 * "Convolution kernels"). Both read the target's vector shape (c->vec) and write vector TIR; with
 * one lane they are the same kernels in scalar code.
 *
 * Channel-blocked kernel (every conv but depthwise). The weights are repacked so that vl
 * consecutive output channels of one group sit side by side:
 *     wp[((B*Cg + ic)*KH + kh)*KW + kw][l] = w[g*Og + bg*vl + l, ic, kh, kw]   (B = g*NB + bg)
 * (zeros past the group's Og channels), at compile time for a constant weight, else by a loop
 * before the convolution. A tile is RC blocks of vl output channels times RW output pixels of
 * one row; its RC*RW vector accumulators live in a REGISTER buffer:
 *     for ic, kh, kw:  w_j = wp[B0 + j, ic, kh, kw][0:vl]                    (RC vector loads)
 *                      for r: xb = x[ic, oh*sh + kh*dh, (ow0 + r)*sw + kw*dw]  (one scalar each)
 *                             for j: acc[j][r] = fma(broadcast(xb), w_j, acc[j][r])
 * then every accumulator goes through the epilogue (bias, then the fused pointwise chain) and is
 * stored as vl channels of one pixel. A 1x1 stride-1 convolution without padding reads the image
 * as one row of OH*OW pixels.
 *
 * Depthwise kernel (groups = C = O). Vectors run along the output row: OW / vl vectors of vl
 * pixels and one of OW % vl, four accumulators a tile (four vectors of a row, or the vectors of
 * two or four rows when a row is one vector and a tail)
 *     acc[a] = fma(x[ch, oh*sh + kh*dh, ramp(ow0 + a*vl)*sw + kw*dw], broadcast(w[ch, kh, kw]), acc[a])
 * with a contiguous load per tap: a strided convolution reads the phase-split copy (below).
 *
 * Padding is materialised once per image into a LOCAL copy of the input (zeros around it), so
 * no tap needs a bounds test. */
#include <stdio.h>
#include <string.h>

#include "lower_conv_tiled.h"


static tth_texpr *f32(lw_ctx *c, double v)
{
    return tth_tir_float(c->m, TTH_F32, v);
}

/* the padding's value in the input as read: 0, or an int8 input's zero point */
static tth_texpr *pad_value(tk *k)
{
    return k->xdt == TTH_F32 ? f32(k->c, 0) : tth_tir_int(k->c->m, k->xdt, k->xzp);
}

/* Do the channel-blocked and row kernels split this convolution among the cores? From its
 * multiply-adds (LW_PARALLEL_MIN_DOT for the int8 kernels' dot products) */
static int kernel_parallel(const tk *k)
{
    const lw_conv_p *p = k->p;
    return p->O * p->OH * p->OW * (p->C / p->groups) * p->KH * p->KW >= (k->dot ? LW_PARALLEL_MIN_DOT : LW_PARALLEL_MIN);
}

/* offset of pixel (row, col) of input channel ch in the input as read */
tth_texpr *tk_x_at(tk *k, tth_texpr *ch, tth_texpr *row, tth_texpr *col)
{
    lw_ctx *c = k->c;
    if (k->xblk) { /* NCHW<b>c: pixel (row, col) of block ch / b, lane ch % b, in the input as
                    * read or in a group's window of wH rows from wrow0 at xbase */
        int64_t b = k->xblk;
        tth_texpr *blk = lw_bin(c, TTH_TBIN_DIV, ch, lw_i(c, b)), *lane = lw_bin(c, TTH_TBIN_MOD, ch, lw_i(c, b));
        tth_texpr *r = k->wrow0 ? lw_sub(c, row, k->wrow0) : row;
        tth_texpr *px = lw_add(c, lw_mul(c, lw_add(c, lw_mul(c, blk, lw_i(c, k->wrow0 ? k->wH : k->Hp)), r), lw_i(c, k->Wrow)), col);
        return lw_add(c, k->xbase, lw_add(c, lw_mul(c, px, lw_i(c, b)), lane));
    }
    if (k->wrow0 && k->wH) /* a window of every channel, at xbase */
        return lw_add(c, k->xbase,
                      lw_add(c, lw_mul(c, lw_add(c, lw_mul(c, ch, lw_i(c, k->wH)), lw_sub(c, row, k->wrow0)),
                                       lw_i(c, k->Wrow)),
                             col));
    if (k->wrow0)
        return lw_add(c, lw_mul(c, lw_sub(c, row, k->wrow0), lw_i(c, k->Wrow)), col);
    return lw_add(c, k->xbase,
                  lw_add(c, lw_mul(c, lw_add(c, lw_mul(c, ch, lw_i(c, k->Hp)), row), lw_i(c, k->Wrow)), col));
}

/* One padded (and, with k->sp > 1, phase-split) row into xp at dst0 from the image row of src at
 * from0: phase ph holds the columns ph, ph + sp, ... (one phase when sp is 1); column col of the
 * padded row is image column col - pl, zero outside [0, W). The inside of each phase is vectors
 * of vl reading a ramp of stride sp (one load of its span and a shuffle, not a gather) and one
 * vector of the rest. */
static tth_tstmt *pad_row(tk *k, tth_tbuffer *src, tth_tbuffer *xp, tth_texpr *dst_row, tth_texpr *from0)
{
    lw_ctx *c = k->c;
    const lw_conv_p *p = k->p;
    tth_tstmt *in = NULL;
    for (int64_t ph = 0; ph < k->sp; ph++) {
        int64_t lo = 0, hi = k->Wq; /* j in [lo, hi): inside the image */
        while (lo < hi && lo * k->sp + ph < p->pl)
            lo++;
        while (hi > lo && (hi - 1) * k->sp + ph - p->pl >= p->W)
            hi--;
        tth_texpr *dst0 = lw_add(c, dst_row, lw_i(c, ph * k->Wq));
        for (int64_t j = 0; j < k->Wq; j++)
            if ((j < lo || j >= hi) && lw_append(c, &in, tth_tir_store(c->m, xp, lw_add(c, dst0, lw_i(c, j)), pad_value(k))))
                return NULL;
        int64_t vl = c->vec.f32_lanes > 1 ? c->vec.f32_lanes : 1, nj = hi - lo;
        for (int part = 0; part < 2; part++) {
            int64_t cnt = part == 0 ? nj / vl : (nj % vl ? 1 : 0);
            int lanes = (int)(part == 0 ? vl : nj % vl);
            if (cnt == 0)
                continue;
            lw_ax jj;
            if (lw_ax_make(c, &jj, "pj", cnt))
                return NULL;
            tth_texpr *j0 = lw_add(c, lw_mul(c, jj.e, lw_i(c, vl)), lw_i(c, lo + (part ? nj / vl * vl : 0)));
            /* an NCHW<b>c source has its channel's pixels b elements apart */
            int64_t xs = p->xb ? p->xb : 1;
            tth_texpr *src_at = lw_add(c, from0, lw_mul(c, lw_add(c, lw_mul(c, j0, lw_i(c, k->sp)), lw_i(c, ph - p->pl)), lw_i(c, xs)));
            tth_texpr *dst_at = lw_add(c, dst0, j0);
            tth_tstmt *st = tth_tir_vstore(c->m, xp, dst_at, tth_tir_load(c->m, src, tth_tir_ramp(c->m, src_at, k->sp * xs, lanes)), 0);
            st = lw_ax_loop(c, &jj, TTH_LOOP_SERIAL, st);
            if (!st || lw_append(c, &in, st))
                return NULL;
        }
    }
    return in;
}

/* Padded row ih (in [0, Hp)) of channel ch of image k->n into xp at dst_row: the image row
 * ih - pt, or zeros above and below the image. */
tth_tstmt *tk_pad_row_or_zeros(tk *k, tth_tbuffer *src, tth_tbuffer *xp, tth_texpr *dst_row, tth_texpr *ch,
                                   tth_texpr *ih)
{
    lw_ctx *c = k->c;
    const lw_conv_p *p = k->p;
    lw_ax z;
    if (lw_ax_make(c, &z, "pz", k->Wrow))
        return NULL;
    tth_texpr *from0;
    if (p->xb) /* NCHW<b>c source: lane ch % b of block ch / b */
        from0 = lw_add(c, lw_mul(c, lw_add(c, lw_mul(c, lw_add(c, lw_mul(c, k->n, lw_i(c, p->C / p->xb)),
                                                                 lw_bin(c, TTH_TBIN_DIV, ch, lw_i(c, p->xb))), lw_i(c, p->H)),
                                            lw_sub(c, ih, lw_i(c, p->pt))), lw_i(c, p->W * p->xb)),
                       lw_bin(c, TTH_TBIN_MOD, ch, lw_i(c, p->xb)));
    else
        from0 = lw_mul(c, lw_add(c, lw_mul(c, lw_add(c, lw_mul(c, k->n, lw_i(c, p->C)), ch), lw_i(c, p->H)),
                                 lw_sub(c, ih, lw_i(c, p->pt))),
                       lw_i(c, p->W));
    tth_tstmt *in = pad_row(k, src, xp, dst_row, from0);
    tth_tstmt *zero = lw_ax_loop(c, &z, TTH_LOOP_VECTORIZED, tth_tir_store(c->m, xp, lw_add(c, dst_row, z.e), pad_value(k)));
    tth_texpr *inside = lw_bin(c, TTH_TBIN_AND, lw_bin(c, TTH_TBIN_GE, ih, lw_i(c, p->pt)),
                               lw_bin(c, TTH_TBIN_LT, ih, lw_i(c, p->pt + p->H)));
    return in && zero ? tth_tir_if(c->m, inside, in, zero) : NULL;
}

static tth_tstmt *dw_plane_words(tk *k, tth_tbuffer *xp, tth_tbuffer *xd, tth_texpr *ci);

/* The padded copy of image n: per channel, the rows above and below the image are zeros, and
 * every image row is pl zeros, the row, pr zeros. Each element is written once; the channels
 * are a parallel loop when the copy is large. With xd (the int8 depthwise dot form), each plane's
 * words follow its copy, while its bytes are in L1 (dw_plane_words). */
static tth_tstmt *pad_copy_planes(tk *k, tth_tbuffer *src, tth_tbuffer *xp, tth_tbuffer *xd)
{
    lw_ctx *c = k->c;
    const lw_conv_p *p = k->p;
    lw_ax ci, ih;
    if (lw_ax_make(c, &ci, "pc", p->C) || lw_ax_make(c, &ih, "ph", k->Hp))
        return NULL;
    tth_tvar *vrow = lw_var(c, "pr", TTH_I64);
    if (!vrow)
        return NULL;
    tth_tstmt *body = tk_pad_row_or_zeros(k, src, xp, lw_ref(c, vrow), ci.e, ih.e);
    body = lw_let(c, vrow, lw_mul(c, lw_add(c, lw_mul(c, ci.e, lw_i(c, k->Hp)), ih.e), lw_i(c, k->Wrow)), body);
    body = lw_ax_loop(c, &ih, TTH_LOOP_SERIAL, body);
    if (body && xd) {
        tth_tstmt *words = dw_plane_words(k, xp, xd, ci.e);
        if (!words || lw_append(c, &body, words))
            return NULL;
    }
    /* the copy runs in parallel when the convolution it feeds does: each copied element is read
     * by KH*KW taps, so a copy too small to split alone still takes the same time from every
     * core as the work around it (serial copies were 5 % of MobileNet-v2 on two threads) */
    int64_t work = p->C * k->Hp * k->Wrow * p->KH * p->KW;
    return lw_ax_loop(c, &ci, work >= LW_PARALLEL_MIN && p->C > 1 ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL, body);
}

tth_tstmt *tk_pad_copy(tk *k, tth_tbuffer *src, tth_tbuffer *xp)
{
    return pad_copy_planes(k, src, xp, NULL);
}

/* Padded row row0 + ih of block cb of image n of an NCHW<b>c input into dst at row ih of block
 * dcb of a copy [blocks][nrows][Wp][b] from offset base: the image's pixels, zeros outside it, a
 * vector each */
static tth_tstmt *pad_row_blocked(tk *k, tth_tbuffer *src, tth_tbuffer *dst, tth_texpr *base, tth_texpr *row0,
                                  int64_t nrows, tth_texpr *cb, tth_texpr *dcb, tth_texpr *ih)
{
    lw_ctx *c = k->c;
    const lw_conv_p *p = k->p;
    int64_t b = p->xb, C1 = p->C / b;
    lw_ax iw;
    if (lw_ax_make(c, &iw, "pw", k->Wp))
        return NULL;
    tth_texpr *row = lw_sub(c, lw_add(c, row0, ih), lw_i(c, p->pt)), *col = lw_sub(c, iw.e, lw_i(c, p->pl));
    tth_texpr *inside = lw_bin(c, TTH_TBIN_AND,
                               lw_bin(c, TTH_TBIN_AND, lw_bin(c, TTH_TBIN_GE, row, lw_i(c, 0)),
                                      lw_bin(c, TTH_TBIN_LT, row, lw_i(c, p->H))),
                               lw_bin(c, TTH_TBIN_AND, lw_bin(c, TTH_TBIN_GE, col, lw_i(c, 0)),
                                      lw_bin(c, TTH_TBIN_LT, col, lw_i(c, p->W))));
    tth_texpr *from = lw_mul(c, lw_add(c, lw_mul(c, lw_add(c, lw_mul(c, lw_add(c, lw_mul(c, k->n, lw_i(c, C1)), cb),
                                                                        lw_i(c, p->H)), row), lw_i(c, p->W)), col),
                             lw_i(c, b));
    tth_texpr *to = lw_add(c, base, lw_mul(c, lw_add(c, lw_mul(c, lw_add(c, lw_mul(c, dcb, lw_i(c, nrows)), ih), lw_i(c, k->Wp)), iw.e),
                                           lw_i(c, b)));
    tth_tstmt *st = tth_tir_if(c->m, inside, tth_tir_vstore(c->m, dst, to, tth_tir_vload(c->m, src, from, (int)b, 0), 0),
                               tth_tir_vstore(c->m, dst, to, tth_tir_broadcast(c->m, f32(c, 0), (int)b), 0));
    return lw_ax_loop(c, &iw, TTH_LOOP_SERIAL, st);
}

/* Padded rows [row0, row0 + nrows) of image n of an NCHW<b>c input into dst from offset base,
 * blocked as the input: [C/b][nrows][Wp][b]; the blocks a parallel loop when par. */
tth_tstmt *tk_pad_rows_blocked(tk *k, tth_tbuffer *src, tth_tbuffer *dst, tth_texpr *base, tth_texpr *row0,
                               int64_t nrows, int par)
{
    lw_ctx *c = k->c;
    int64_t C1 = k->p->C / k->p->xb;
    lw_ax cb, ih;
    if (lw_ax_make(c, &cb, "pc", C1) || lw_ax_make(c, &ih, "ph", nrows))
        return NULL;
    tth_tstmt *st = pad_row_blocked(k, src, dst, base, row0, nrows, cb.e, cb.e, ih.e);
    st = lw_ax_loop(c, &ih, TTH_LOOP_SERIAL, st);
    return lw_ax_loop(c, &cb, par && C1 > 1 ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL, st);
}

/* The padded copy of image n of an NCHW<b>c input in C1 blocks, each padded row written by
 * row(k, ctx, cb, ih); in parallel when large, split the way the convolution reads it
 * (docs/threads.md, "Locality"): with rows outermost in the kernel, over (band, block) pairs,
 * bands outermost, band i holding the padded rows from where output band i (lw_bands) starts
 * reading to where band i + 1 starts, the last to the end; with the weights outermost, over
 * blocks. */
tth_tstmt *tk_pad_split_blocked(tk *k, int64_t C1, tk_prow_fn row, void *ctx)
{
    lw_ctx *c = k->c;
    const lw_conv_p *p = k->p;
    int64_t work = p->C * k->Hp * k->Wp * p->KH * p->KW, per = p->OH;
    /* the int8 kernels' words: in parallel exactly when the kernel is (blocked_kernel), so that
     * no core reads a copy the launching core made alone */
    int par = k->dot ? kernel_parallel(k) : work >= LW_PARALLEL_MIN;
    int64_t nb = k->wouter || !par ? 1 : lw_bands(c, p->OH, &per);
    tth_tvar *vih = lw_var(c, "ph", TTH_I64);
    lw_ax q;
    if (!vih || lw_ax_make(c, &q, "pq", nb * C1))
        return NULL;
    tth_texpr *band = lw_bin(c, TTH_TBIN_DIV, q.e, lw_i(c, C1)), *cb = nb > 1 ? lw_bin(c, TTH_TBIN_MOD, q.e, lw_i(c, C1)) : q.e;
    tth_tstmt *st = row(k, ctx, cb, lw_ref(c, vih));
    if (nb > 1) {
        /* band i: rows [i*step, (i+1)*step), the last to Hp: (i+1)*step + ((i+1)/nb)*(Hp - nb*step) */
        int64_t step = per * p->sh;
        tth_texpr *cnt = lw_add(c, lw_i(c, step), lw_mul(c, lw_bin(c, TTH_TBIN_DIV, lw_add(c, band, lw_i(c, 1)), lw_i(c, nb)),
                                                         lw_i(c, k->Hp - nb * step)));
        st = lw_for(c, vih, lw_mul(c, band, lw_i(c, step)), cnt, TTH_LOOP_SERIAL, st);
    } else {
        st = lw_for(c, vih, lw_i(c, 0), lw_i(c, k->Hp), TTH_LOOP_SERIAL, st);
    }
    return lw_ax_loop(c, &q, par && nb * C1 > 1 ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL, st);
}

typedef struct pad_bufs {
    tth_tbuffer *src, *dst;
} pad_bufs;

static tth_tstmt *pad_row_whole(tk *k, void *ctx, tth_texpr *cb, tth_texpr *ih)
{
    pad_bufs *b = ctx;
    return pad_row_blocked(k, b->src, b->dst, lw_i(k->c, 0), lw_i(k->c, 0), k->Hp, cb, cb, ih);
}

tth_tstmt *tk_pad_copy_blocked(tk *k, tth_tbuffer *src, tth_tbuffer *xp)
{
    pad_bufs b = {src, xp};
    return tk_pad_split_blocked(k, k->p->C / k->p->xb, pad_row_whole, &b);
}

static tth_tstmt *pad_row_plane(tk *k, void *ctx, tth_texpr *ci, tth_texpr *ih)
{
    pad_bufs *b = ctx;
    lw_ctx *c = k->c;
    tth_texpr *row = lw_mul(c, lw_add(c, lw_mul(c, ci, lw_i(c, k->Hp)), ih), lw_i(c, k->Wrow));
    return tk_pad_row_or_zeros(k, b->src, b->dst, row, ci, ih);
}

/* The padded copy of an NCHW input (a stem's image) for the channel-blocked kernel, its planes'
 * rows split among the cores as the kernel's tasks read them (tk_pad_split_blocked): split by
 * planes, one core copied two of an image's three planes and the other read half of them for
 * its rows (docs/threads.md, "Locality") */
static tth_tstmt *pad_copy_planes_split(tk *k, tth_tbuffer *src, tth_tbuffer *xp)
{
    pad_bufs b = {src, xp};
    return tk_pad_split_blocked(k, k->p->C, pad_row_plane, &b);
}

/* ------------------------------------------------------------- channel-blocked kernel ---- */

/* Word i of a byte input (k->xbytes): its four bytes combined little-endian, which LLVM reads as
 * one 32-bit load */
static tth_texpr *x_word(tk *k, tth_texpr *i)
{
    lw_ctx *c = k->c;
    tth_texpr *bytes[4], *at = lw_mul(c, i, lw_i(c, 4));
    for (int j = 0; j < 4; j++)
        bytes[j] = tth_tir_load(c->m, k->x, lw_add(c, at, lw_i(c, j)));
    return lw_dot_word(c, bytes, 0, 0, 1);
}

tth_dtype tk_acc_dtype(const tk *k)
{
    return k->xdt != TTH_F32 ? TTH_I32 : TTH_F32;
}

tth_texpr *tk_madd(tk *k, tth_texpr *x, tth_texpr *w, tth_texpr *acc)
{
    return k->xdt != TTH_F32 ? lw_add(k->c, lw_mul(k->c, x, w), acc) : lw_madd(k->c, x, w, acc);
}

void tk_block_lanes(tk *k)
{
    const lw_conv_p *p = k->p;
    int lanes = k->c->vec.f32_lanes;
    /* lanes: the target's (a narrower vector costs as much per instruction, so a partial last
     * block beats more blocks), but no more than the group's channels need */
    int vl = lanes > 1 ? lanes : 1;
    while (vl > 1 && vl / 2 >= k->Og)
        vl /= 2;
    k->obp = 1;
    if (p->ob) { /* an NCHW<b>c output: an accumulator is one block of it */
        vl = (int)p->ob;
        /* or, for blocks narrower than the target's vector (8 on 16 lanes: 1000, 24, 40
         * channels), lanes / b consecutive blocks side by side, so every multiply-add is full
         * width; the epilogue stores each block's part of the accumulator (docs/layouts.md,
         * "Narrow blocks"). The blocks of one accumulator stay in one group. */
        if (lanes > vl && lanes % vl == 0 && k->Og >= lanes && (p->groups == 1 || k->Og % lanes == 0)) {
            k->obp = lanes / vl;
            vl = lanes;
        }
    }
    k->vl = vl;
    k->NB = (k->Og + vl - 1) / vl;
}

int64_t tk_packed_at(int64_t RC, int64_t NBT, int64_t steps, int64_t vl, int64_t B, int64_t step, int64_t l)
{
    int64_t B0 = B / RC * RC, RCt = NBT - B0 < RC ? NBT - B0 : RC; /* B's tile: RCt blocks from B0 */
    return (B0 * steps + step * RCt + (B - B0)) * vl + l;
}

/* The packed weights of a constant weight tensor, as a CONST buffer: per tile of RC blocks
 * (k->RC, tk_choose_tile), for each input channel and tap, the RC blocks' vl weights side by side
 * (docs/lowering.md, "Channel-blocked kernel") */
static tth_tbuffer *pack_const(tk *k, const tth_tensor *wt)
{
    lw_ctx *c = k->c;
    const lw_conv_p *p = k->p;
    int64_t KK = p->KH * p->KW, vl = k->vl;
    tth_tensor *pk = lw_packed_new(c, p->groups * k->NB * k->Cg * KK * vl);
    if (!pk)
        return NULL;
    float *dst = pk->data;
    const float *src = wt->data;
    for (int64_t g = 0; g < p->groups; g++)
        for (int64_t bg = 0; bg < k->NB; bg++)
            for (int64_t l = 0; l < vl && bg * vl + l < k->Og; l++) {
                int64_t oc = g * k->Og + bg * vl + l;
                for (int64_t ic = 0; ic < k->Cg; ic++)
                    for (int64_t kk = 0; kk < KK; kk++)
                        dst[tk_packed_at(k->RC, p->groups * k->NB, k->Cg * KK, vl, g * k->NB + bg, ic * KK + kk, l)] =
                            src[(oc * k->Cg + ic) * KK + kk];
            }
    return lw_packed_const(c, pk);
}

/* The same packing as a loop, for a weight computed at run time: into LOCAL buffer wp */
static tth_tstmt *pack_loop(tk *k, tth_tbuffer *w, tth_tbuffer *wp)
{
    lw_ctx *c = k->c;
    const lw_conv_p *p = k->p;
    int64_t KK = p->KH * p->KW;
    lw_ax B, ic, kk, l;
    if (lw_ax_make(c, &B, "pb", p->groups * k->NB) || lw_ax_make(c, &ic, "pi", k->Cg) ||
        lw_ax_make(c, &kk, "pk", KK) || lw_ax_make(c, &l, "pl", k->vl))
        return NULL;
    /* oc in the group = (B % NB)*vl + l; past Og the lane is zero (the load is clamped) */
    tth_texpr *g = lw_bin(c, TTH_TBIN_DIV, B.e, lw_i(c, k->NB));
    tth_texpr *ocg = lw_add(c, lw_mul(c, lw_bin(c, TTH_TBIN_MOD, B.e, lw_i(c, k->NB)), lw_i(c, k->vl)), l.e);
    tth_texpr *oc = lw_add(c, lw_mul(c, g, lw_i(c, k->Og)), lw_bin(c, TTH_TBIN_MIN, ocg, lw_i(c, k->Og - 1)));
    tth_texpr *v = tth_tir_load(c->m, w, lw_add(c, lw_mul(c, lw_add(c, lw_mul(c, oc, lw_i(c, k->Cg)), ic.e), lw_i(c, KK)), kk.e));
    v = tth_tir_select(c->m, lw_bin(c, TTH_TBIN_LT, ocg, lw_i(c, k->Og)), v, f32(c, 0));
    /* block B of the tile of RCt blocks from B0 (pack_const) */
    int64_t NBT = k->p->groups * k->NB;
    tth_texpr *B0 = lw_mul(c, lw_bin(c, TTH_TBIN_DIV, B.e, lw_i(c, k->RC)), lw_i(c, k->RC));
    tth_texpr *RCt = lw_bin(c, TTH_TBIN_MIN, lw_sub(c, lw_i(c, NBT), B0), lw_i(c, k->RC));
    tth_texpr *run = lw_add(c, lw_mul(c, lw_add(c, lw_mul(c, ic.e, lw_i(c, KK)), kk.e), RCt), lw_sub(c, B.e, B0));
    tth_texpr *to = lw_add(c, lw_mul(c, lw_add(c, lw_mul(c, B0, lw_i(c, k->Cg * KK)), run), lw_i(c, k->vl)), l.e);
    tth_tstmt *st = tth_tir_store(c->m, wp, to, v);
    st = lw_ax_loop(c, &l, TTH_LOOP_SERIAL, st);
    st = lw_ax_loop(c, &kk, TTH_LOOP_SERIAL, st);
    st = lw_ax_loop(c, &ic, TTH_LOOP_SERIAL, st);
    return lw_ax_loop(c, &B, TTH_LOOP_SERIAL, st);
}

/* bias (if any) + acc, through the epilogue, stored at output channel(s) oc of pixel (oh, ow),
 * or (to) at element `at` of buffer `to` */
static tth_tstmt *epi_store(tk *k, tth_texpr *oc, tth_texpr *oh, tth_texpr *ow, tth_texpr *val, tth_tbuffer *to,
                            tth_texpr *at)
{
    lw_ctx *c = k->c;
    if (k->p->ob)
        return lw_fail(c, TTH_EINTERNAL, k->call, "a channel-vector store into an NCHW<b>c output"), NULL;
    if (k->bias) {
        tth_texpr *b = lw_axis_value(c, k->bias, oc);
        if (!b)
            return NULL;
        val = lw_add(c, val, lw_cast(c, TTH_F32, b));
    }
    tth_texpr *idx[4] = {k->n, oc, oh, ow};
    return to ? lw_sink_store_to(c, k->s, idx, val, to, at) : lw_sink_store(c, k->s, 0, idx, val);
}

tth_tstmt *tk_epi_store(tk *k, tth_texpr *oc, tth_texpr *oh, tth_texpr *ow, tth_texpr *val)
{
    return epi_store(k, oc, oh, ow, val, NULL, NULL);
}

/* The same for block blk of an NCHW<b>c output: val is its b channels of pixel (oh, ow), one
 * contiguous vector (docs/layouts.md) */
tth_tstmt *tk_epi_store_block(tk *k, tth_texpr *blk, tth_texpr *oh, tth_texpr *ow, tth_texpr *val)
{
    lw_ctx *c = k->c;
    int64_t b = k->p->ob;
    if (k->bias) {
        tth_texpr *bv = lw_axis_value(c, k->bias, tth_tir_ramp(c->m, lw_mul(c, blk, lw_i(c, b)), 1, (int)b));
        if (!bv)
            return NULL;
        val = lw_add(c, val, lw_cast(c, TTH_F32, bv));
    }
    if (k->comp) /* int8: the zero point's term of each channel (docs/int8.md) */
        val = lw_add(c, val, tth_tir_vload(c->m, k->comp, lw_mul(c, blk, lw_i(c, b)), (int)b, 0));
    tth_texpr *idx[5] = {k->n, blk, oh, ow, tth_tir_ramp(c->m, lw_i(c, 0), 1, (int)b)};
    return lw_sink_store(c, k->s, 0, idx, val);
}

/* The partial sums of accumulator (j, r) of a tile of block B0 at (oh, ow0): block B0 + j,
 * pixel oh*OW + ow0 + r (a flat image: ow0 + r) */
static tth_texpr *psum_at(tk *k, tth_texpr *B0, int j, tth_texpr *oh, tth_texpr *ow0, int r)
{
    lw_ctx *c = k->c;
    const lw_conv_p *p = k->p;
    tth_texpr *pix = lw_add(c, ow0, lw_i(c, r));
    if (!k->flat)
        pix = lw_add(c, lw_mul(c, oh, lw_i(c, p->OW)), pix);
    return lw_mul(c, lw_add(c, lw_mul(c, lw_add(c, B0, lw_i(c, j)), lw_i(c, p->OH * p->OW)), pix), lw_i(c, k->vl));
}

/* The tile's RC x RW accumulators from (load) or to (else) their partial sums; NULL on failure */
static tth_tstmt *psum_moves(tk *k, tth_tbuffer *acc, tth_texpr *B0, tth_texpr *oh, tth_texpr *ow0, int RC, int RW,
                             int load)
{
    lw_ctx *c = k->c;
    int vl = k->vl;
    tth_tstmt *seq = NULL;
    for (int j = 0; j < RC; j++)
        for (int r = 0; r < RW; r++) {
            tth_texpr *ai = lw_i(c, ((int64_t)j * RW + r) * vl), *pi = psum_at(k, B0, j, oh, ow0, r);
            tth_tstmt *st = load ? tth_tir_vstore(c->m, acc, ai, tth_tir_vload(c->m, k->psum, pi, vl, 0), 0)
                                 : tth_tir_vstore(c->m, k->psum, pi, tth_tir_vload(c->m, acc, ai, vl, 0), 0);
            if (!st || lw_append(c, &seq, st))
                return NULL;
        }
    return seq;
}

/* One tile: RC channel blocks from block B0 (group g, block bg0 of the group) times RW pixels
 * from (oh, ow0) of the row. */
static tth_tstmt *block_tile(tk *k, tth_texpr *B0, tth_texpr *g, tth_texpr *bg0, tth_texpr *oh, tth_texpr *ow0,
                             int RW, int RC)
{
    lw_ctx *c = k->c;
    const lw_conv_p *p = k->p;
    int vl = k->vl;
    int64_t KK = p->KH * p->KW;
    tth_dtype at = k->dot ? TTH_I32 : TTH_F32;
    tth_tstmt *seq = NULL, *zeros = NULL, *loads = NULL;
    /* with blocks of input channels (block k->kb), the first from zeros, the others from the
     * partial sums */
    tth_tbuffer *acc = lw_reg_tile_of(c, at, (int64_t)RC * RW, vl, k->psum ? &zeros : &seq);
    if (!acc || (k->psum && (!(loads = psum_moves(k, acc, B0, oh, ow0, RC, RW, 1)) ||
                             lw_append(c, &seq, tth_tir_if(c->m, lw_bin(c, TTH_TBIN_EQ, k->kb, lw_i(c, 0)), zeros, loads)))))
        return NULL;

    /* the reduction: ic, kh, kw (int8: ic counts words of four channels); with blocks of input
     * channels, over the block's */
    lw_ax ic, kh, kw;
    if (lw_ax_make(c, &ic, "ic", k->psum ? k->kcs : k->Cg) || lw_ax_make(c, &kh, "kh", p->KH) ||
        lw_ax_make(c, &kw, "kw", p->KW))
        return NULL;
    tth_texpr *icx = k->psum ? lw_add(c, lw_mul(c, k->kb, lw_i(c, k->kcs)), ic.e) : ic.e;
    tth_tvar *vxc = lw_var(c, "xc", TTH_I64), *vwc = lw_var(c, "wc", TTH_I64);
    if (!vxc || !vwc)
        return NULL;
    /* xc: input pixel (oh*sh + kh*dh, ow0*sw + kw*dw) of channel g*Cg + ic */
    tth_texpr *row = lw_add(c, lw_mul(c, oh, lw_i(c, p->sh)), lw_mul(c, kh.e, lw_i(c, p->dh)));
    tth_texpr *col = lw_add(c, lw_mul(c, ow0, lw_i(c, p->sw)), lw_mul(c, kw.e, lw_i(c, p->dw)));
    if (k->flat == 1) {
        row = lw_i(c, 0);
        col = ow0;
    } else if (k->flat == 2) {
        /* the tile's pixels may span rows: their offsets are the vo[r] below */
        row = lw_mul(c, kh.e, lw_i(c, p->dh));
        col = lw_mul(c, kw.e, lw_i(c, p->dw));
    }
    if (k->skip_taps) { /* the image itself: its pixel (row - pt, col - pl) */
        row = lw_sub(c, row, lw_i(c, p->pt));
        col = lw_sub(c, col, lw_i(c, p->pl));
    }
    /* a group's window (k->xwin) holds only the group's channels */
    tth_texpr *xc = tk_x_at(k, k->xwin ? icx : lw_add(c, lw_mul(c, g, lw_i(c, k->Cg)), icx), row, col);
    /* wc: packed weights of block B0 at (ic, kh, kw) */
    /* the tile's RC blocks side by side (tk_packed_at): B0's first weight, then (ic, tap) of RC
     * vectors */
    tth_texpr *tap = lw_add(c, lw_mul(c, kh.e, lw_i(c, p->KW)), kw.e);
    tth_texpr *wc = lw_add(c, lw_mul(c, B0, lw_i(c, k->Cg * KK * vl)),
                           lw_mul(c, lw_add(c, lw_mul(c, icx, lw_i(c, KK)), tap), lw_i(c, (int64_t)RC * vl)));
    tth_tvar *wv[4], *xv[16];
    tth_tstmt *upd = NULL;
    for (int j = 0; j < RC; j++) 
        if (!(wv[j] = lw_var_vec(c, "w", at, vl)))
            return NULL;
    for (int r = 0; r < RW; r++)
        if (!(xv[r] = lw_var(c, "xb", at)))
            return NULL;
    for (int r = 0; r < RW; r++)
        for (int j = 0; j < RC; j++) {
            tth_texpr *ai = lw_i(c, ((int64_t)j * RW + r) * vl);
            tth_texpr *av = tth_tir_vload(c->m, acc, ai, vl, 0);
            tth_texpr *f = !k->dot ? lw_madd(c, lw_ref(c, xv[r]), lw_ref(c, wv[j]), av)
                                   : tth_tir_intrin3(c->m, k->dot, av,
                                                     vl > 1 ? tth_tir_broadcast(c->m, lw_ref(c, xv[r]), vl) : lw_ref(c, xv[r]),
                                                     lw_ref(c, wv[j]));
            if (lw_append(c, &upd, tth_tir_vstore(c->m, acc, ai, f, 0)))
                return NULL;
        }
    tth_tstmt *inner = upd;
    int64_t xstep = (k->flat == 1 ? 1 : p->sw) * (k->xblk ? k->xblk : 1);
    tth_tvar *vo[16] = {0};
    for (int r = 0; r < RW && k->flat == 2; r++)
        if (!(vo[r] = lw_var(c, "xo", TTH_I64)))
            return NULL;
    for (int r = RW - 1; r >= 0; r--) {
        tth_texpr *xi = k->flat == 2 ? lw_add(c, lw_ref(c, vxc), lw_ref(c, vo[r])) : lw_add(c, lw_ref(c, vxc), lw_i(c, r * xstep));
        inner = lw_let(c, xv[r], k->xbytes ? x_word(k, xi) : tth_tir_load(c->m, k->x, xi), inner);
    }
    for (int j = RC - 1; j >= 0; j--)
        inner = lw_let(c, wv[j], tth_tir_vload(c->m, k->w, lw_add(c, lw_ref(c, vwc), lw_i(c, (int64_t)j * vl)), vl, 0),
                       inner);
    inner = lw_let(c, vxc, xc, lw_let(c, vwc, wc, inner));
    if (k->skip_taps) {
        /* the channels innermost: the taps' bounds vary from tile to tile, so the channel loop,
         * of a fixed count, is the one LLVM unrolls (and the bounds are computed once per tile,
         * not once per channel) */
        inner = lw_ax_loop(c, &ic, TTH_LOOP_SERIAL, inner);
        /* only the taps that read inside the image for this row (kh) and for some pixel of the
         * tile (kw): the others multiply padding zeros. Row oh*sh + kh*dh - pt in [0, H) for
         * kh in [ceil((pt - oh*sh) / dh), floor((H - 1 + pt - oh*sh) / dh)], clamped to the
         * kernel; columns likewise over the tile's first and last pixels. */
        tth_texpr *ohs = lw_mul(c, oh, lw_i(c, p->sh)), *c0 = lw_mul(c, ow0, lw_i(c, p->sw));
        tth_texpr *c1 = lw_mul(c, lw_add(c, ow0, lw_i(c, RW - 1)), lw_i(c, p->sw));
        tth_texpr *bounds[2][2] = {
            {lw_sub(c, lw_i(c, p->pt), ohs), lw_sub(c, lw_i(c, p->H - 1 + p->pt), ohs)},
            {lw_sub(c, lw_i(c, p->pl), c1), lw_sub(c, lw_i(c, p->W - 1 + p->pl), c0)}};
        int64_t K[2] = {p->KH, p->KW}, D[2] = {p->dh, p->dw};
        lw_ax *ax[2] = {&kh, &kw};
        for (int a = 1; a >= 0; a--) {
            if (!ax[a]->v)
                continue;
            /* ceil(x / d) = -floordiv(-x, d) */
            tth_texpr *lo = tth_tir_un(c->m, TTH_TUN_NEG, lw_floordiv(c, tth_tir_un(c->m, TTH_TUN_NEG, bounds[a][0]), D[a]));
            tth_texpr *hi = lw_add(c, lw_floordiv(c, bounds[a][1], D[a]), lw_i(c, 1));
            lo = lw_bin(c, TTH_TBIN_MAX, lo, lw_i(c, 0));
            hi = lw_bin(c, TTH_TBIN_MIN, hi, lw_i(c, K[a]));
            tth_tvar *vlo = lw_var(c, a ? "kwl" : "khl", TTH_I64);
            if (!vlo)
                return NULL;
            inner = lw_for(c, ax[a]->v, lw_ref(c, vlo), lw_bin(c, TTH_TBIN_MAX, lw_sub(c, hi, lw_ref(c, vlo)), lw_i(c, 0)),
                           TTH_LOOP_SERIAL, inner);
            inner = lw_let(c, vlo, lo, inner);
        }
    } else {
        inner = lw_ax_loop(c, &kw, TTH_LOOP_SERIAL, inner);
        inner = lw_ax_loop(c, &kh, TTH_LOOP_SERIAL, inner);
        inner = lw_ax_loop(c, &ic, TTH_LOOP_SERIAL, inner);
    }
    /* flat == 2: pixel p = ow0 + r sits at input offset (p / OW)*sh*Wp + (p % OW)*sw */
    for (int r = RW - 1; r >= 0 && k->flat == 2; r--) {
        tth_texpr *px = lw_add(c, ow0, lw_i(c, r));
        tth_texpr *off = lw_add(c, lw_mul(c, lw_bin(c, TTH_TBIN_DIV, px, lw_i(c, p->OW)), lw_i(c, p->sh * k->Wrow)),
                                lw_mul(c, lw_bin(c, TTH_TBIN_MOD, px, lw_i(c, p->OW)), lw_i(c, p->sw)));
        if (k->xblk)
            off = lw_mul(c, off, lw_i(c, k->xblk));
        inner = lw_let(c, vo[r], off, inner);
    }
    if (!inner || lw_append(c, &seq, inner))
        return NULL;
    /* a block before the last stores the partial sums, the last goes through the epilogue */
    tth_tstmt *stores = k->psum ? psum_moves(k, acc, B0, oh, ow0, RC, RW, 0) : NULL, *pre = seq;
    if (k->psum && !stores)
        return NULL;
    seq = NULL;

    /* the epilogue: per accumulator, vl channels of one pixel */
    int64_t tail = k->Og % vl;
    for (int j = 0; j < RC; j++) {
        tth_texpr *bg = lw_add(c, bg0, lw_i(c, j));
        tth_texpr *ocb = lw_add(c, lw_mul(c, g, lw_i(c, k->Og)), lw_mul(c, bg, lw_i(c, vl)));
        for (int r = 0; r < RW; r++) {
            tth_texpr *ow = lw_add(c, ow0, lw_i(c, r)), *eoh = oh;
            if (k->flat) {
                eoh = lw_bin(c, TTH_TBIN_DIV, ow, lw_i(c, p->OW));
                ow = lw_bin(c, TTH_TBIN_MOD, ow, lw_i(c, p->OW));
            }
            int64_t ai = ((int64_t)j * RW + r) * vl;
            if (p->ob) { /* NCHW<b>c out: the accumulator is blocks (B0 + j)*obp + q of the pixel, q < obp
                          * (vl = obp * b; a group's channels fill whole blocks, so B0 + j = g*NB + bg);
                          * past the last block (a partial last accumulator) nothing is stored */
                int64_t b = p->ob, nblocks = p->O / b;
                for (int q = 0; q < k->obp; q++) {
                    tth_texpr *blk = lw_add(c, lw_mul(c, lw_add(c, B0, lw_i(c, j)), lw_i(c, k->obp)), lw_i(c, q));
                    tth_tstmt *st = tk_epi_store_block(k, blk, eoh, ow,
                                                       tth_tir_vload(c->m, acc, lw_i(c, ai + q * b), (int)b, 0));
                    if (st && k->obp > 1 && k->Og % vl)
                        st = tth_tir_if(c->m, lw_bin(c, TTH_TBIN_LT, blk, lw_i(c, nblocks)), st, NULL);
                    if (!st || lw_append(c, &seq, st))
                        return NULL;
                }
                continue;
            }
            tth_texpr *val = tth_tir_vload(c->m, acc, lw_i(c, ai), vl, 0);
            if (k->comp)
                val = lw_add(c, val, vl > 1 ? tth_tir_vload(c->m, k->comp, ocb, vl, 0) : tth_tir_load(c->m, k->comp, ocb));
            tth_tstmt *full = tk_epi_store(k, vl > 1 ? tth_tir_ramp(c->m, ocb, 1, vl) : ocb, eoh, ow, val);
            if (!full)
                return NULL;
            if (tail) {
                /* the group's last block has only `tail` channels: lane by lane */
                tth_tvar *vl_ = lw_var(c, "ln", TTH_I64);
                if (!vl_)
                    return NULL;
                tth_texpr *ln = lw_ref(c, vl_);
                tth_texpr *v1 = tth_tir_load(c->m, acc, lw_add(c, lw_i(c, ai), ln));
                if (k->comp)
                    v1 = lw_add(c, v1, tth_tir_load(c->m, k->comp, lw_add(c, ocb, ln)));
                tth_tstmt *one = tk_epi_store(k, lw_add(c, ocb, ln), eoh, ow, v1);
                tth_tstmt *part = lw_for(c, vl_, lw_i(c, 0), lw_i(c, tail), TTH_LOOP_SERIAL, one);
                full = part ? tth_tir_if(c->m, lw_bin(c, TTH_TBIN_LT, bg, lw_i(c, k->NB - 1)), full, part) : NULL;
            }
            if (!full || lw_append(c, &seq, full))
                return NULL;
        }
    }
    if (k->psum)
        seq = tth_tir_if(c->m, lw_bin(c, TTH_TBIN_LT, k->kb, lw_i(c, k->nkc - 1)), stores, seq);
    if (!seq || lw_append(c, &pre, seq))
        return NULL;
    return tth_tir_allocate(c->m, acc, pre);
}

/* register tile: k->RC channel blocks (dividing NB) and k->RW pixels (at most rwmax), from the
 * registers */
void tk_choose_tile(tk *k)
{
    int64_t rowlen = k->flat ? k->p->OH * k->p->OW : k->p->OW;
    int regs = k->c->vec.registers > 0 ? k->c->vec.registers : 16;
    int RC = regs >= 32 ? 4 : 2;
    if (RC > k->NB)
        RC = (int)k->NB;
    /* with groups, a tile must not straddle two groups: RC divides NB; with one group the
     * last NB % RC blocks are a narrower tile, except for a blocked output (docs/layouts.md),
     * which takes the largest RC dividing NB when that is more than half the widest tile (6
     * blocks: 3, not a tile of 4 and one of 2): one range of tiles instead of two, half the code
     * for the same work */
    if (k->p->ob) {
        int d = RC;
        while (d > 1 && k->NB % d)
            d--;
        if (2 * d > RC)
            RC = d;
    }
    while (k->p->groups > 1 && RC > 1 && k->NB % RC)
        RC /= 2;
    k->RC = RC;
    int rwmax = (regs - RC - 1) / RC;
    if (rwmax > 12)
        rwmax = 12;
    if (rwmax < 1)
        rwmax = 1;
    /* a width dividing the row when one is at least half the widest: every tile the same, one
     * tile's code instead of two (56 pixels: tiles of 8, not five of 12 and 11) */
    for (int w = rwmax; w > 0 && 2 * w >= rwmax; w--)
        if (rowlen % w == 0) {
            k->RW = w;
            return;
        }
    /* balance the row: ceil(rowlen / tiles) pixels per tile */
    int64_t tiles = (rowlen + rwmax - 1) / rwmax;
    k->RW = (int)((rowlen + tiles - 1) / tiles);
}

/* A run of pixels a row of tiles covers: len pixels; or, with ntiles, ntiles tiles of RW pixels
 * (a count chosen at run time) and then, where rem_if holds, one tile of the rem pixels after
 * them (docs/lowering.md, "One code for a flat image's runs") */
typedef struct tk_run {
    int64_t len;
    tth_texpr *ntiles, *rem_if;
    int64_t rem;
} tk_run;

/* tiles along one row: the run's pixels from (oh, p0) for RC channel blocks from block B0; len
 * pixels in ceil(len / RW) tiles of balanced widths (49 pixels with RW 6: four of 6 and five of
 * 5, not eight of 6 and one of 1) */
static tth_tstmt *block_row_run(tk *k, tth_texpr *B0, tth_texpr *g, tth_texpr *bg0, int RC, int RW, tth_texpr *oh,
                                tth_texpr *p0, const tk_run *run);

/* The columns where some tap column starts or stops reading inside the image: tap column kw
 * reads column ow*sw + kw*dw - pl, inside for ow in [ceil((pl - kw*dw) / sw), floor((W - 1 + pl
 * - kw*dw) / sw)]. Into cut (0 and OW included, sorted, each once); how many. */
static int tap_column_cuts(const lw_conv_p *p, int64_t *cut, int max)
{
    int n = 0;
    cut[n++] = 0;
    cut[n++] = p->OW;
    for (int64_t kw = 0; kw < p->KW && n + 2 <= max; kw++) {
        int64_t a = p->pl - kw * p->dw, b = p->W + p->pl - kw * p->dw; /* ow*sw in [a, b) */
        int64_t lo = a <= 0 ? 0 : (a + p->sw - 1) / p->sw, hi = b <= 0 ? 0 : (b + p->sw - 1) / p->sw;
        cut[n++] = lo < p->OW ? lo : p->OW;
        cut[n++] = hi < p->OW ? hi : p->OW;
    }
    /* sort and drop repeats */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && cut[j - 1] > cut[j]; j--) {
            int64_t t = cut[j];
            cut[j] = cut[j - 1];
            cut[j - 1] = t;
        }
    int m = 0;
    for (int i = 0; i < n; i++)
        if (m == 0 || cut[i] != cut[m - 1])
            cut[m++] = cut[i];
    return m;
}

/* A row's tiles; with skip_taps, the tiles of each run of columns between two cuts
 * (tap_column_cuts), so that every tile's taps read the image for all its pixels */
static tth_tstmt *block_row(tk *k, tth_texpr *B0, tth_texpr *g, tth_texpr *bg0, int RC, int RW, tth_texpr *oh,
                            tth_texpr *p0, const tk_run *run)
{
    if (!k->skip_taps || run->ntiles)
        return block_row_run(k, B0, g, bg0, RC, RW, oh, p0, run);
    int64_t cut[2 + 2 * 64];
    int n = tap_column_cuts(k->p, cut, (int)(sizeof cut / sizeof cut[0]));
    tth_tstmt *seq = NULL;
    for (int i = 0; i + 1 < n; i++) {
        tk_run part = {.len = cut[i + 1] - cut[i]};
        tth_tstmt *ts = block_row_run(k, B0, g, bg0, RC, RW, oh, lw_add(k->c, p0, lw_i(k->c, cut[i])), &part);
        if (!ts || lw_append(k->c, &seq, ts))
            return NULL;
    }
    return seq;
}

static tth_tstmt *block_row_run(tk *k, tth_texpr *B0, tth_texpr *g, tth_texpr *bg0, int RC, int RW, tth_texpr *oh,
                                tth_texpr *p0, const tk_run *run)
{
    lw_ctx *c = k->c;
    tth_tstmt *seq = NULL;
    if (run->ntiles) {
        tth_tvar *vt = lw_var(c, "t", TTH_I64);
        tth_tstmt *tl = vt ? block_tile(k, B0, g, bg0, oh, lw_add(c, p0, lw_mul(c, lw_ref(c, vt), lw_i(c, RW))), RW, RC)
                           : NULL;
        if (!tl || lw_append(c, &seq, lw_for(c, vt, lw_i(c, 0), run->ntiles, TTH_LOOP_SERIAL, tl)))
            return NULL;
        if (run->rem) {
            tth_tstmt *last = block_tile(k, B0, g, bg0, oh, lw_add(c, p0, lw_mul(c, run->ntiles, lw_i(c, RW))),
                                         (int)run->rem, RC);
            if (!last || lw_append(c, &seq, tth_tir_if(c->m, run->rem_if, last, NULL)))
                return NULL;
        }
        return seq;
    }
    int64_t len = run->len;
    int64_t tiles = (len + RW - 1) / RW, base = tiles ? len / tiles : 0, wide = tiles ? len % tiles : 0;
    for (int part = 0; part < 2; part++) {
        int64_t n = part == 0 ? wide : tiles - wide, w = part == 0 ? base + 1 : base;
        if (n == 0 || w == 0)
            continue;
        lw_ax t;
        if (lw_ax_make(c, &t, "t", n))
            return NULL;
        tth_texpr *from = lw_add(c, p0, lw_i(c, part == 0 ? 0 : wide * (base + 1)));
        tth_tstmt *tl = block_tile(k, B0, g, bg0, oh, lw_add(c, from, lw_mul(c, t.e, lw_i(c, w))), (int)w, RC);
        if (!tl || lw_append(c, &seq, lw_ax_loop(c, &t, TTH_LOOP_SERIAL, tl)))
            return NULL;
    }
    return seq;
}

/* The tiles of block_row, through the blocks of input channels when there are (k->psum): a
 * loop over the blocks, each over all the tiles, so that the block's weights stay in L1 while
 * every tile reads them; the tile's code is written once, the first and the last block chosen
 * at run time (docs/lowering.md, "Blocks of input channels") */
static tth_tstmt *block_row_kc(tk *k, tth_texpr *B0, tth_texpr *g, tth_texpr *bg0, int RC, int RW, tth_texpr *oh,
                               tth_texpr *p0, const tk_run *run, int64_t band)
{
    lw_ctx *c = k->c;
    if (!k->psum)
        return block_row(k, B0, g, bg0, RC, RW, oh, p0, run);
    /* band > 1: oh is a band's index, the tiles are those of its rows (lw_band_loop), in every
     * block */
    tth_tvar *vrow = band > 1 ? lw_var(c, "oh", TTH_I64) : NULL;
    lw_ax kb;
    if ((band > 1 && !vrow) || lw_ax_make(c, &kb, "kb", k->nkc))
        return NULL;
    k->kb = kb.e;
    tth_tstmt *t = block_row(k, B0, g, bg0, RC, RW, vrow ? lw_ref(c, vrow) : oh, p0, run);
    if (vrow && t)
        t = lw_band_loop(c, vrow, oh, band, k->p->OH, t);
    return lw_ax_loop(c, &kb, TTH_LOOP_SERIAL, t);
}

/* The rows of a group's window (k->xwin, conv_tiled) for tasks of nrow rows, or of nrow runs of RL pixels
 * of a flat image: the padded rows from the task's first output row's first to its last output
 * row's last tap, the most any task reads */
static int64_t window_rows(const tk *k, int64_t nrow, int64_t RL)
{
    const lw_conv_p *p = k->p;
    int64_t span = 1, P = p->OH * p->OW; /* output rows a task covers */
    for (int64_t t = 0; k->flat && t < nrow; t++) {
        int64_t a = t * RL, e = (t + 1) * RL < P ? (t + 1) * RL : P;
        if (e > a && (e - 1) / p->OW - a / p->OW + 1 > span)
            span = (e - 1) / p->OW - a / p->OW + 1;
    }
    return (span - 1) * p->sh + (p->KH - 1) * p->dh + 1;
}

/* A task's window of its group g (docs/lowering.md, "Windows of a group"): the wH padded rows
 * from row0 (vw0) of the group's Cg/b input blocks of src into xw, [Cg/b][wH][Wp][b], zeros where
 * they lie outside the image, then body, which reads them */
static tth_tstmt *group_window(tk *k, tth_tbuffer *src, tth_tbuffer *xw, tth_texpr *g, tth_tvar *vw0, tth_texpr *row0,
                               tth_tstmt *body)
{
    lw_ctx *c = k->c;
    int64_t b = k->xblk, NR = k->wH;
    lw_ax j, ih;
    if (!body || lw_ax_make(c, &j, "wb", k->Cg / b) || lw_ax_make(c, &ih, "wh", NR))
        return NULL;
    tth_texpr *cb = lw_add(c, lw_mul(c, g, lw_i(c, k->Cg / b)), j.e);
    tth_tstmt *fill = pad_row_blocked(k, src, xw, lw_i(c, 0), lw_ref(c, vw0), NR, cb, j.e, ih.e);
    fill = lw_ax_loop(c, &j, TTH_LOOP_SERIAL, lw_ax_loop(c, &ih, TTH_LOOP_SERIAL, fill));
    tth_tstmt *seq = NULL;
    if (!fill || lw_append(c, &seq, fill) || lw_append(c, &seq, body))
        return NULL;
    return tth_tir_allocate(c->m, xw, lw_let(c, vw0, row0, seq));
}

/* How the tasks of nblk groups of channel blocks split the image: runs of RL pixels of a flat
 * image (`rows` of them and, when `last`, one shorter run of `last` pixels), else rows, or
 * bands of `band` rows with blocks of input channels */
typedef struct tk_split {
    int64_t RL, rows, last, band;
} tk_split;

static tk_split task_split(const tk *k, int64_t nblk, int RW)
{
    const lw_conv_p *p = k->p;
    int64_t P = p->OH * p->OW;
    tk_split sp = {p->OW, p->OH, 0, 1};
    /* with blocks of input channels, a task runs each block's weights over as many pixels as
     * the cores leave it (docs/lowering.md, "Blocks of input channels"): the whole image when
     * the weights are outermost and the groups are enough to share, else a band of rows (a
     * run of pixels) per core */
    int whole = k->wouter && nblk >= TK_OUTER_MIN_BLOCKS;
    if (k->flat && whole) {
        sp.RL = P;
        sp.rows = 1;
    } else if (k->flat) {
        int64_t tiles = (P + RW - 1) / RW, per = (tiles + 7) / 8;
        if (k->psum)
            lw_bands(k->c, tiles, &per);
        /* whole tiles in rows of equal length when a divisor of the tiles is near (a blocked
         * output's width divides the image, tk_choose_tile): no shorter last row to write out;
         * with blocks of input channels the runs stay one per core */
        for (int64_t d = per; !k->psum && P % RW == 0 && d <= 2 * per; d++)
            if (tiles % d == 0) {
                per = d;
                break;
            }
        sp.RL = (int64_t)RW * per;
        sp.rows = P / sp.RL;
        sp.last = P % sp.RL;
    } else if (k->psum) {
        sp.band = p->OH;
        if (!whole)
            lw_bands(k->c, p->OH, &sp.band);
        sp.rows = (p->OH + sp.band - 1) / sp.band;
    }
    return sp;
}

/* nblk groups of RC channel blocks from block Bstart over the whole image. The parallel loop
 * runs over (group, row) pairs, so even a layer with one group of blocks has OH tasks; a flat
 * image is cut into rows of RL pixels (a whole number of tiles), the last one shorter
 * (task_split). Rows are outermost (docs/threads.md, "Locality") unless the weights are the
 * larger side (k->wouter): then groups are, and a flat image is one row when there are enough
 * groups to share among the cores. */
static tth_tstmt *block_range(tk *k, int64_t nblk, int64_t Bstart, int RC, int RW, int par)
{
    lw_ctx *c = k->c;
    const lw_conv_p *p = k->p;
    tk_split sp = task_split(k, nblk, RW);
    int64_t RL = sp.RL, rows = sp.rows, last = sp.last, band = sp.band;
    /* the tasks: nblk groups times nrow rows; a flat image's shorter last run of pixels is one
     * more row of the same loop (its own code, chosen by the row index), so the cores share it
     * instead of the launching thread running it after the others */
    int64_t nrow = rows + (last ? 1 : 0);
    if (nblk * nrow == 0)
        return NULL;
    lw_ax q;
    if (lw_ax_make(c, &q, "q", nblk * nrow))
        return NULL;
    tth_tvar *vB = lw_var(c, "B", TTH_I64), *vr = lw_var(c, "r", TTH_I64);
    if (!vB || !vr)
        return NULL;
    tth_texpr *B0 = lw_ref(c, vB), *r = lw_ref(c, vr);
    tth_texpr *g = p->groups == 1 ? lw_i(c, 0) : lw_bin(c, TTH_TBIN_DIV, B0, lw_i(c, k->NB));
    /* B0 < NB with one group: it is its own block of the group */
    tth_texpr *bg0 = k->NB == 1 ? lw_i(c, 0) : p->groups == 1 ? B0 : lw_bin(c, TTH_TBIN_MOD, B0, lw_i(c, k->NB));
    tth_tbuffer *xw = NULL, *src = k->x;
    tth_texpr *xbase = k->xbase;
    tth_tvar *vw0 = NULL;
    if (k->xwin) { /* the task's tiles read its window (group_window), from its start */
        int64_t NR = k->xwin, n = k->Cg * NR * k->Wrow;
        char name[32];
        snprintf(name, sizeof name, "xw%u", c->nbufs++);
        if (!(vw0 = lw_var(c, "wr0", TTH_I64)))
            return NULL;
        if (!(xw = tth_tir_buffer(c->m, name, TTH_F32, 1, &n, TTH_SCOPE_REGISTER)))
            return lw_fail(c, TTH_ENOMEM, NULL, "out of memory"), NULL;
        k->x = xw;
        k->xbase = lw_i(c, 0);
        k->wrow0 = lw_ref(c, vw0);
        k->wH = NR;
    }
    tth_tstmt *row = NULL;
    /* a flat image's shorter last run after whole runs (of whole tiles, task_split) shares their
     * code: its whole tiles are the same loop, their count chosen by the run, and its last
     * last % RW pixels one more tile (docs/lowering.md, "One code for a flat image's runs") */
    int share = k->flat && last && rows > 0;
    if (!k->flat) { /* row r, or with a band of rows the band r */
        tk_run run = {.len = p->OW};
        row = block_row_kc(k, B0, g, bg0, RC, RW, r, lw_i(c, 0), &run, band);
    } else if (rows > 0) {
        tk_run run = {.len = RL};
        if (share) {
            run.ntiles = tth_tir_select(c->m, lw_bin(c, TTH_TBIN_LT, r, lw_i(c, rows)), lw_i(c, RL / RW), lw_i(c, last / RW));
            run.rem = last % RW;
            run.rem_if = lw_bin(c, TTH_TBIN_EQ, r, lw_i(c, rows));
        }
        row = block_row_kc(k, B0, g, bg0, RC, RW, lw_i(c, 0), lw_mul(c, r, lw_i(c, RL)), &run, 1);
    }
    if (last && !share) {
        tk_run run = {.len = last};
        tth_tstmt *lr = block_row_kc(k, B0, g, bg0, RC, RW, lw_i(c, 0), lw_i(c, rows * RL), &run, 1);
        if (!lr || (rows > 0 && !row))
            return NULL;
        row = rows > 0 ? tth_tir_if(c->m, lw_bin(c, TTH_TBIN_LT, r, lw_i(c, rows)), row, lr) : lr;
    }
    if (xw) {
        /* the window's first padded row: the task's first output row's (row r, or the row of
         * pixel r*RL of a flat image) */
        tth_texpr *oh0 = k->flat ? lw_bin(c, TTH_TBIN_DIV, lw_mul(c, r, lw_i(c, RL)), lw_i(c, p->OW)) : r;
        row = group_window(k, src, xw, g, vw0, lw_mul(c, oh0, lw_i(c, p->sh)), row);
        k->x = src;
        k->xbase = xbase;
        k->wrow0 = NULL;
        k->wH = 0;
        if (!row)
            return NULL;
    }
    /* rows outermost: r = q / nblk, group q % nblk; groups outermost: group q / nrow, r = q % nrow */
    tth_texpr *bq, *rq;
    if (k->wouter) {
        bq = nrow == 1 ? q.e : lw_bin(c, TTH_TBIN_DIV, q.e, lw_i(c, nrow));
        rq = nrow == 1 ? lw_i(c, 0) : lw_bin(c, TTH_TBIN_MOD, q.e, lw_i(c, nrow));
    } else {
        bq = nblk == 1 ? lw_i(c, 0) : lw_bin(c, TTH_TBIN_MOD, q.e, lw_i(c, nblk));
        rq = nrow == 1 ? lw_i(c, 0) : lw_bin(c, TTH_TBIN_DIV, q.e, lw_i(c, nblk));
    }
    row = lw_let(c, vB, lw_add(c, lw_i(c, Bstart), lw_mul(c, bq, lw_i(c, RC))), lw_let(c, vr, rq, row));
    return lw_ax_loop(c, &q, par && nblk * nrow > 1 ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL, row);
}

static tth_tstmt *blocked_kernel(tk *k)
{
    const lw_conv_p *p = k->p;
    int RC = k->RC, RW = k->RW; /* tk_choose_tile, before the weights were packed */
    int64_t NBT = p->groups * k->NB;
    int par = kernel_parallel(k);
    tth_tstmt *seq = NULL;
    /* blocks of input channels: float32, one group, a tile's weights more than twice
     * TK_KC_BYTES (docs/lowering.md, "Blocks of input channels") */
    int64_t step = (int64_t)RC * k->vl * p->KH * p->KW * 4;
    k->psum = NULL;
    if (k->skip_taps) /* the taps a tile reads, on average */
        step = (int64_t)((double)step * k->tap_share + 0.5) + 4;
    if (!k->dot && p->groups == 1 && k->Cg * step > 2 * TK_KC_BYTES) {
        int64_t per = TK_KC_BYTES / step > 0 ? TK_KC_BYTES / step : 1;
        /* blocks of one length (one copy of the tile's code, the block index chosen at run
         * time): the largest divisor of the channels within the budget, when at least half of it */
        int64_t kcs = per < k->Cg ? per : k->Cg;
        while (kcs > 1 && k->Cg % kcs)
            kcs--;
        k->kcs = kcs;
        k->nkc = k->Cg / kcs;
        int64_t n = NBT * k->vl * p->OH * p->OW;
        if (2 * kcs >= per && k->nkc > 1 && !(k->psum = lw_local(k->c, "ps", TTH_F32, 1, &n)))
            return NULL;
    }
    if (NBT / RC > 0) {
        tth_tstmt *main = block_range(k, NBT / RC, 0, RC, RW, par);
        if (!main || lw_append(k->c, &seq, main))
            return NULL;
    }
    if (NBT % RC) {
        /* one group (tk_choose_tile): the last NBT % RC blocks */
        tth_tstmt *rest = block_range(k, 1, NBT / RC * RC, (int)(NBT % RC), RW, par);
        if (!rest || lw_append(k->c, &seq, rest))
            return NULL;
    }
    return k->psum && seq ? tth_tir_allocate(k->c->m, k->psum, seq) : seq;
}

/* ------------------------------------------------------------------ pointwise kernel ---- */

/* 1 when every tensor the epilogue reads besides the anchor, and every node on the way, is
 * either constant along H and W or has the output's full H and W (right-aligned): then the
 * pixel index can be passed as (0, p) for (oh, ow), which gives every such tensor its right
 * flat offset. */
int tk_epi_hw_ok(const tth_rexpr *e, const tth_rexpr *anchor, int64_t OH, int64_t OW, int depth)
{
    if (e == anchor)
        return 1;
    if (depth > 64)
        return 0;
    const tth_ttype *t = lw_ty(e);
    if (!t)
        return 0;
    /* an op that is not pointwise (a convolution, a pool) is read from its buffer: its own shape
     * is all that matters */
    const lw_op_impl *impl = e->kind == TTH_REXPR_CALL && e->u.call.op ? lw_op_lookup(e->u.call.op) : NULL;
    int64_t h = t->rank >= 2 ? t->shape[t->rank - 2] : 1, w = t->rank >= 1 ? t->shape[t->rank - 1] : 1;
    /* OH < 0: only what is read from a buffer counts, and it must be constant along H and W */
    if ((OH >= 0 || !(impl && impl->value)) && !((h == 1 && w == 1) || (OH >= 0 && h == OH && w == OW)))
        return 0;
    /* an op with per-axis parameters (needs_idx) reads arguments 1 on along its axis: only an
     * axis of H or W depends on the pixel */
    int q = impl && impl->needs_idx;
    int64_t ax = q ? lw_attr_int(e, "axis", 1) : 0;
    if (q && ax < 0)
        ax += t->rank;
    int q_hw = q && t->rank >= 2 && ax >= t->rank - 2;
    if (impl && impl->value)
        for (size_t i = 0; i < e->u.call.nargs; i++)
            if (!(q && i > 0 && !q_hw) && !tk_epi_hw_ok(e->u.call.args[i], anchor, OH, OW, depth + 1))
                return 0;
    return 1;
}

/* One tile: RO output channels from oc0 times RP vectors of vl pixels from p0 (the last vector
 * `last` pixels, at most vl: the image's tail):
 *   for ic: x_k = x[ic, p0 + k*vl .. +vl] (contiguous); for r: acc[r][k] = fma(broadcast(w[oc0+r, ic]), x_k, acc[r][k])
 * then acc[r][k] + bias through the epilogue, stored as vl contiguous pixels of channel oc0+r. */
static tth_tstmt *pw_tile(tk *k, tth_texpr *ob, int64_t RObase, tth_texpr *p0, int RO, int RP, int last)
{
    lw_ctx *c = k->c;
    const lw_conv_p *p = k->p;
    int vl = k->vl;
    int64_t P = p->OH * p->OW;
    tth_tstmt *seq = NULL;
    tth_tbuffer *acc = lw_reg_tile(c, (int64_t)RO * RP, vl, &seq);
    if (!acc)
        return NULL;
    lw_ax ic;
    if (lw_ax_make(c, &ic, "ic", p->C))
        return NULL;
    tth_tvar *xv[8], *vw = lw_var(c, "wb", TTH_I64);
    if (!vw)
        return NULL;
    int lanes[8];
    for (int q = 0; q < RP; q++) {
        lanes[q] = q == RP - 1 ? last : vl;
        if (!(xv[q] = lw_var_vec(c, "x", TTH_F32, lanes[q])))
            return NULL;
    }
    /* packed weights: wp[(block*C + ic)*RObase + r], block = ob */
    tth_texpr *wb = lw_mul(c, lw_add(c, lw_mul(c, ob, lw_i(c, p->C)), ic.e), lw_i(c, RObase));
    tth_tstmt *upd = NULL;
    for (int r = 0; r < RO; r++) {
        tth_texpr *wv = tth_tir_load(c->m, k->w, lw_add(c, lw_ref(c, vw), lw_i(c, r)));
        for (int q = 0; q < RP; q++) {
            tth_texpr *ai = lw_i(c, ((int64_t)r * RP + q) * vl);
            tth_texpr *f = lw_madd(c, wv, lw_ref(c, xv[q]), tth_tir_vload(c->m, acc, ai, lanes[q], 0));
            if (lw_append(c, &upd, tth_tir_vstore(c->m, acc, ai, f, 0)))
                return NULL;
        }
    }
    tth_tstmt *inner = upd;
    tth_texpr *xrow = lw_add(c, k->xbase, lw_add(c, lw_mul(c, ic.e, lw_i(c, P)), p0));
    for (int q = RP - 1; q >= 0; q--)
        inner = lw_let(c, xv[q], tth_tir_vload(c->m, k->x, lw_add(c, xrow, lw_i(c, (int64_t)q * vl)), lanes[q], 0), inner);
    inner = lw_let(c, vw, wb, inner);
    inner = lw_ax_loop(c, &ic, TTH_LOOP_SERIAL, inner);
    if (!inner || lw_append(c, &seq, inner))
        return NULL;
    for (int r = 0; r < RO; r++) {
        tth_texpr *oc = lw_add(c, lw_mul(c, ob, lw_i(c, RObase)), lw_i(c, r));
        for (int q = 0; q < RP; q++) {
            tth_texpr *px = tth_tir_ramp(c->m, lw_add(c, p0, lw_i(c, (int64_t)q * vl)), 1, lanes[q]);
            tth_tstmt *st = tk_epi_store(k, oc, lw_i(c, 0), px, tth_tir_vload(c->m, acc, lw_i(c, ((int64_t)r * RP + q) * vl), lanes[q], 0));
            if (!st || lw_append(c, &seq, st))
                return NULL;
        }
    }
    return tth_tir_allocate(c->m, acc, seq);
}

/* The tile of block ob (of nblk whole blocks of RO channels and, when ro_last, one last block of
 * ro_last channels) at pixel p0: rp vectors, the last `last` pixels. */
static tth_tstmt *pw_block_tile(tk *k, tth_texpr *ob, int64_t nblk, int ro_last, int RO, tth_texpr *p0, int rp,
                                int last)
{
    lw_ctx *c = k->c;
    if (!ro_last)
        return pw_tile(k, ob, RO, p0, RO, rp, last);
    if (nblk == 0)
        return pw_tile(k, lw_i(c, 0), RO, p0, ro_last, rp, last);
    tth_tstmt *full = pw_tile(k, ob, RO, p0, RO, rp, last), *part_blk = pw_tile(k, lw_i(c, nblk), RO, p0, ro_last, rp, last);
    return full && part_blk ? tth_tir_if(c->m, lw_bin(c, TTH_TBIN_LT, ob, lw_i(c, nblk)), full, part_blk) : NULL;
}

/* The weights [O, C, 1, 1] as wp[(block*C + ic)*RO + r] = w[block*RO + r, ic] (zeros past O). */
static tth_tbuffer *pw_pack(tk *k, const tth_tensor *wt, int RO)
{
    lw_ctx *c = k->c;
    const lw_conv_p *p = k->p;
    int64_t nblk = (p->O + RO - 1) / RO;
    tth_tensor *pk = lw_packed_new(c, nblk * p->C * RO);
    if (!pk)
        return NULL;
    float *dst = pk->data;
    const float *src = wt->data;
    for (int64_t o = 0; o < p->O; o++)
        for (int64_t ic = 0; ic < p->C; ic++)
            dst[((o / RO) * p->C + ic) * RO + o % RO] = src[o * p->C + ic];
    return lw_packed_const(c, pk);
}

/* A 1x1 stride-1 convolution of one group without padding, on an image of at least 4 vectors
 * (a pixel count that is not a multiple of the lanes ends in one narrower vector), with a
 * constant weight and an epilogue that reads nothing broadcast along only one of H and W:
 * out = W[O, C] x X[C, P] with the pixels in vectors (contiguous loads and stores in NCHW).
 * lw_conv_pixel_applies says when. */
static tth_tstmt *pointwise_kernel(tk *k, const tth_rexpr *wa)
{
    lw_ctx *c = k->c;
    const lw_conv_p *p = k->p;
    int vl = c->vec.f32_lanes;
    int64_t P = p->OH * p->OW;
    k->vl = vl;
    int regs = c->vec.registers;
    int RO = regs >= 32 ? 6 : 4, RP = regs >= 32 ? 4 : 2;
    if (RO > p->O)
        RO = (int)p->O;
    if (P / vl < RP)
        RP = (int)(P / vl);
    k->w = pw_pack(k, wa->u.constant.value, RO);
    if (!k->w)
        return NULL;
    int64_t nblk = p->O / RO, ntile = P / ((int64_t)RP * vl), restv = (P / vl) % RP;
    int tail = (int)(P % vl); /* pixels past the last whole vector: one narrower vector */
    int ro_last = (int)(p->O % RO);  /* channels of a last, partial block (0: none) */
    int64_t nb = nblk + (ro_last ? 1 : 0);
    int par = p->O * P * p->C >= LW_PARALLEL_MIN;
    tth_tstmt *seq = NULL;
    if (tk_weights_outer(p, p->O * p->C, c->cores) && nb >= TK_OUTER_MIN_BLOCKS) {
        /* the weights are the larger side (docs/lowering.md, "Loop order"): a parallel loop over
         * channel blocks, each running every pixel tile, so each block's weights are read once */
        lw_ax q, t;
        if (lw_ax_make(c, &q, "q", nb) || lw_ax_make(c, &t, "t", ntile))
            return NULL;
        tth_tstmt *blk = NULL;
        for (int part = 0; part < 2; part++) {
            int64_t npx = part == 0 ? ntile : (restv || tail ? 1 : 0);
            if (npx == 0)
                continue;
            tth_texpr *p0 = part == 1 ? lw_i(c, ntile * RP * vl) : lw_mul(c, t.e, lw_i(c, (int64_t)RP * vl));
            tth_tstmt *tl = pw_block_tile(k, q.e, nblk, ro_last, RO, p0, part == 0 ? RP : (int)restv + (tail ? 1 : 0),
                                          part == 1 && tail ? tail : vl);
            if (part == 0)
                tl = lw_ax_loop(c, &t, TTH_LOOP_SERIAL, tl);
            if (!tl || lw_append(c, &blk, tl))
                return NULL;
        }
        return lw_ax_loop(c, &q, par ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL, blk);
    }
    /* (pixel tile, channel block) pairs, pixel tiles outermost (docs/threads.md, "Locality"),
     * the partial block with the others, so a tile's input is read from L1 by every block of
     * it; then one tile of the remaining vectors (and the tail) per block */
    for (int part = 0; part < 2; part++) {
        int64_t npx = part == 0 ? ntile : (restv || tail ? 1 : 0);
        int rp = part == 0 ? RP : (int)restv + (tail ? 1 : 0);
        int last = part == 1 && tail ? tail : vl;
        if (npx == 0)
            continue;
        lw_ax q;
        if (lw_ax_make(c, &q, "q", npx * nb))
            return NULL;
        tth_texpr *ob = nb > 1 ? lw_bin(c, TTH_TBIN_MOD, q.e, lw_i(c, nb)) : lw_i(c, 0);
        tth_texpr *p0 = part == 1 ? lw_i(c, ntile * RP * vl)
                                  : lw_mul(c, npx > 1 ? lw_bin(c, TTH_TBIN_DIV, q.e, lw_i(c, nb)) : lw_i(c, 0),
                                           lw_i(c, (int64_t)RP * vl));
        tth_tstmt *tl = pw_block_tile(k, ob, nblk, ro_last, RO, p0, rp, last);
        tl = lw_ax_loop(c, &q, par && npx * nb > 1 ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL, tl);
        if (!tl || lw_append(c, &seq, tl))
            return NULL;
    }
    return seq;
}

/* ------------------------------------------------------------------ depthwise kernel ---- */

/* Offset in the input as read of tap (kh, kw) for output pixel (oh, ow0) of input channel ch:
 * row oh*sh + kh*dh; column ow0*sw + kw*dw, or in a phase-split row (k->sp > 1, sp = sw) phase
 * (kw*dw) % sw at ow0 + (kw*dw) / sw, so consecutive output pixels are consecutive elements. */
tth_texpr *tk_tap_at(tk *k, tth_texpr *ch, tth_texpr *oh, tth_texpr *ow0, tth_texpr *kh, tth_texpr *kw)
{
    lw_ctx *c = k->c;
    const lw_conv_p *p = k->p;
    tth_texpr *row = lw_add(c, lw_mul(c, oh, lw_i(c, p->sh)), lw_mul(c, kh, lw_i(c, p->dh)));
    tth_texpr *col;
    if (k->sp > 1) {
        tth_texpr *kd = lw_mul(c, kw, lw_i(c, p->dw));
        col = lw_add(c, lw_mul(c, lw_bin(c, TTH_TBIN_MOD, kd, lw_i(c, k->sp)), lw_i(c, k->Wq)),
                     lw_add(c, ow0, lw_bin(c, TTH_TBIN_DIV, kd, lw_i(c, k->sp))));
    } else {
        col = lw_add(c, lw_mul(c, ow0, lw_i(c, p->sw)), lw_mul(c, kw, lw_i(c, p->dw)));
    }
    return tk_x_at(k, ch, row, col);
}


/* The dot form's words (docs/int8.md, "Depthwise in dot products") at n positions of the input
 * as read from `start`, `step` apart, from the bytes xb into the words xd (the same geometry,
 * nwk = ceil(KW/4) sets of it k->dwtot apart). The word of set wk where tap 0 of an output is read
 * holds the bytes of its taps 4*wk .. 4*wk+3 (those below KW), each plus koff; a byte past KW,
 * whose weight is 0, holds the padding's. */
static tth_tstmt *dw_words_run(tk *k, tth_tbuffer *xb, tth_tbuffer *xd, tth_texpr *start, int64_t n, int64_t step)
{
    lw_ctx *c = k->c;
    const lw_conv_p *p = k->p;
    int64_t vl = c->vec.f32_lanes, nwk = (p->KW + 3) / 4;
    tth_tstmt *seq = NULL;
    for (int part = 0; part < 2; part++) {
        int64_t cnt = part == 0 ? n / vl : (n % vl ? 1 : 0);
        int lanes = (int)(part == 0 ? vl : n % vl);
        if (cnt == 0)
            continue;
        lw_ax jj;
        if (lw_ax_make(c, &jj, "dj", cnt))
            return NULL;
        tth_texpr *j0 = part == 0 ? lw_mul(c, jj.e, lw_i(c, vl)) : lw_i(c, n / vl * vl);
        tth_texpr *at = lw_add(c, start, lw_mul(c, j0, lw_i(c, step)));
        tth_tstmt *st = NULL;
        for (int64_t wk = 0; wk < nwk; wk++) {
            tth_texpr *bytes[4] = {NULL, NULL, NULL, NULL};
            for (int64_t kw = 4 * wk; kw < p->KW && kw < 4 * wk + 4; kw++) {
                /* tap kw's column: in a phase-split row, phase (kw*dw) % sp at (kw*dw) / sp */
                int64_t kd = kw * p->dw, off = k->sp > 1 ? kd % k->sp * k->Wq + kd / k->sp : kd;
                bytes[kw - 4 * wk] = tth_tir_load(c->m, xb, tth_tir_ramp(c->m, lw_add(c, at, lw_i(c, off)), step, lanes));
            }
            tth_texpr *word = lw_dot_word(c, bytes, k->koff, k->xzp + k->koff, lanes);
            tth_texpr *to = lw_add(c, at, lw_i(c, wk * k->dwtot));
            if (!word || lw_append(c, &st, tth_tir_store(c->m, xd, tth_tir_ramp(c->m, to, step, lanes), word)))
                return NULL;
        }
        st = st ? lw_ax_loop(c, &jj, TTH_LOOP_SERIAL, st) : NULL;
        if (!st || lw_append(c, &seq, st))
            return NULL;
    }
    return seq;
}

/* The words of one row at offset rb: the OW positions where tap 0 of the row's outputs is read
 * (column j in a phase-split row, else j*sw). The flat form's columns of the padding, whose
 * outputs are dropped, read what the buffer holds. */
static tth_tstmt *dw_words_row(tk *k, tth_tbuffer *xb, tth_tbuffer *xd, tth_texpr *rb)
{
    return dw_words_run(k, xb, xd, rb, k->p->OW, k->sp > 1 ? 1 : k->p->sw);
}

/* The words of a whole plane at pb, stride 1: the plane as one run of Hp*Wrow positions in whole
 * vectors (a row's last positions read the next row and make words no output reads), reading up
 * to (KW-1)*dw bytes past the plane (the copy's slack after the last) */
static tth_tstmt *dw_words_plane(tk *k, tth_tbuffer *xb, tth_tbuffer *xd, tth_texpr *pb)
{
    return dw_words_run(k, xb, xd, pb, k->Hp * k->Wrow, 1);
}

/* The words of channel ci's plane of the padded copy (pad_copy_planes): the plane as one run
 * (stride 1) or row by row (phase-split rows, whose words sit at phase 0). Made right after the
 * plane is copied, while its bytes are in L1: two passes over the image, the copy's and the
 * words', took 10 us more than the int32 form on 960 planes of 7x7. */
static tth_tstmt *dw_plane_words(tk *k, tth_tbuffer *xp, tth_tbuffer *xd, tth_texpr *ci)
{
    lw_ctx *c = k->c;
    tth_texpr *plane = lw_mul(c, ci, lw_i(c, k->Hp * k->Wrow));
    if (k->sp == 1 && k->p->sw == 1)
        return dw_words_plane(k, xp, xd, plane);
    lw_ax r;
    if (lw_ax_make(c, &r, "dr", k->Hp))
        return NULL;
    tth_tstmt *wr = dw_words_row(k, xp, xd, lw_add(c, plane, lw_mul(c, r.e, lw_i(c, k->Wrow))));
    return wr ? lw_ax_loop(c, &r, TTH_LOOP_SERIAL, wr) : NULL;
}

/* int8: sum + comp[ch] (the int32 sums then hold sum (x - x_zp) * w), in `lanes` lanes */
static tth_texpr *dw_comp(tk *k, tth_texpr *ch, tth_texpr *val, int lanes)
{
    lw_ctx *c = k->c;
    return k->comp ? lw_add(c, val, tth_tir_broadcast(c->m, tth_tir_load(c->m, k->comp, ch), lanes)) : val;
}

/* The sums of a tile's n accumulators of channel ch (at most 8, each at most vmax lanes): per
 * tap, one contiguous vector load per accumulator (strided convolutions read the phase-split
 * copy) and a multiply-add by the tap's weight. The accumulators' buffer, its zeroing and the
 * loops over the taps appended to *seq. */
static tth_tbuffer *dw_sums(tk *k, tth_texpr *ch, tth_texpr *oh0, tth_texpr *ow0, const dseg *sg, int n, int vmax,
                            tth_tstmt **seq)
{
    lw_ctx *c = k->c;
    const lw_conv_p *p = k->p;
    tth_dtype at = tk_acc_dtype(k);
    tth_tbuffer *acc = lw_reg_tile_of(c, at, n, vmax, seq);
    if (!acc)
        return NULL;
    lw_ax kh, kw;
    /* the dot form: a kernel row's taps in nwk words, each read where tap 0 is */
    int64_t nwk = (p->KW + 3) / 4;
    if (lw_ax_make(c, &kh, "kh", p->KH) || lw_ax_make(c, &kw, "kw", k->dwdot ? nwk : p->KW))
        return NULL;
    tth_tvar *vw = lw_var(c, "wv", at), *vx = lw_var(c, "xo", TTH_I64);
    if (!vw || !vx)
        return NULL;
    tth_texpr *xo = k->dwdot ? lw_add(c, tk_tap_at(k, ch, oh0, ow0, kh.e, lw_i(c, 0)), lw_mul(c, kw.e, lw_i(c, k->dwtot)))
                             : tk_tap_at(k, ch, oh0, ow0, kh.e, kw.e);
    tth_texpr *wi = k->dwdot ? lw_add(c, lw_mul(c, lw_add(c, lw_mul(c, ch, lw_i(c, p->KH)), kh.e), lw_i(c, nwk)), kw.e)
                             : lw_add(c, lw_mul(c, ch, lw_i(c, p->KH * p->KW)), lw_add(c, lw_mul(c, kh.e, lw_i(c, p->KW)), kw.e));
    /* a step of one output column is sw input columns, or one in a phase-split row */
    int64_t cstep = k->sp > 1 ? 1 : p->sw;
    tth_tstmt *upd = NULL;
    for (int a = 0; a < n; a++) {
        tth_texpr *x0 = lw_add(c, lw_ref(c, vx), lw_i(c, sg[a].drow * p->sh * k->Wrow + sg[a].dcol * cstep));
        tth_texpr *xv = lw_cast(c, at, tth_tir_load(c->m, k->x, tth_tir_ramp(c->m, x0, cstep, sg[a].lanes)));
        tth_texpr *ai = lw_i(c, (int64_t)a * vmax);
        tth_texpr *av = tth_tir_vload(c->m, acc, ai, sg[a].lanes, 0);
        tth_texpr *wb = sg[a].lanes > 1 ? tth_tir_broadcast(c->m, lw_ref(c, vw), sg[a].lanes) : lw_ref(c, vw);
        tth_texpr *f = k->dwdot ? tth_tir_intrin3(c->m, k->dwdot, av, xv, wb) : tk_madd(k, xv, lw_ref(c, vw), av);
        if (lw_append(c, &upd, tth_tir_vstore(c->m, acc, ai, f, 0)))
            return NULL;
    }
    tth_tstmt *inner = lw_let(c, vx, xo, lw_let(c, vw, lw_cast(c, at, tth_tir_load(c->m, k->w, wi)), upd));
    inner = lw_ax_loop(c, &kw, TTH_LOOP_SERIAL, inner);
    inner = lw_ax_loop(c, &kh, TTH_LOOP_SERIAL, inner);
    if (!inner || lw_append(c, seq, inner))
        return NULL;
    return acc;
}

/* The tile's n accumulators of channel ch (dw_sums), then each through the epilogue */
static tth_tstmt *dw_tile(tk *k, tth_texpr *ch, tth_texpr *oh0, tth_texpr *ow0, const dseg *sg, int n, int vmax)
{
    lw_ctx *c = k->c;
    tth_tstmt *seq = NULL;
    tth_tbuffer *acc = dw_sums(k, ch, oh0, ow0, sg, n, vmax, &seq);
    if (!acc)
        return NULL;
    for (int a = 0; a < n; a++) {
        tth_texpr *ai = lw_i(c, (int64_t)a * vmax);
        tth_texpr *oh = lw_add(c, oh0, lw_i(c, sg[a].drow)), *ow = lw_add(c, ow0, lw_i(c, sg[a].dcol));
        tth_texpr *val = dw_comp(k, ch, tth_tir_vload(c->m, acc, ai, sg[a].lanes, 0), sg[a].lanes);
        tth_tstmt *st = tk_epi_store(k, ch, oh, tth_tir_ramp(c->m, ow, 1, sg[a].lanes), val);
        if (!st || lw_append(c, &seq, st))
            return NULL;
    }
    return tth_tir_allocate(c->m, acc, seq);
}


/* One output row in vectors: OW / vl vectors of vl pixels and one of OW % vl, as a loop of tiles
 * of RV vectors and one tile of what is left (the whole vectors and the tail). */
tth_tstmt *tk_row_in_vectors(tk *k, int RV, int vl, row_tile_fn tile, void *ctx)
{
    lw_ctx *c = k->c;
    int64_t nv = k->p->OW / vl;
    int tail = (int)(k->p->OW % vl), n = 0;
    dseg sg[8];
    tth_tstmt *seq = NULL;
    if (nv / RV > 0) {
        lw_ax t;
        if (lw_ax_make(c, &t, "t", nv / RV))
            return NULL;
        for (int v = 0; v < RV; v++)
            sg[v] = (dseg){0, (int64_t)v * vl, vl};
        tth_tstmt *tl = tile(k, ctx, lw_mul(c, t.e, lw_i(c, (int64_t)RV * vl)), sg, RV);
        if (!tl || lw_append(c, &seq, lw_ax_loop(c, &t, TTH_LOOP_SERIAL, tl)))
            return NULL;
    }
    for (int64_t v = 0; v < nv % RV; v++)
        sg[n++] = (dseg){0, v * vl, vl};
    if (tail)
        sg[n++] = (dseg){0, nv % RV * vl, tail};
    if (n) {
        tth_tstmt *tl = tile(k, ctx, lw_i(c, nv / RV * RV * vl), sg, n);
        if (!tl || lw_append(c, &seq, tl))
            return NULL;
    }
    return seq;
}

/* The flat form of R output rows of channel ch from oh0 (k->dwflat): in the padded copy, with
 * stride 1, output pixel (oh0 + r, ow) reads its taps at a fixed offset from input element
 * r * Wrow + ow of row oh0's run, so the R rows are one run of (R-1)*Wrow + OW outputs whose
 * every vector is whole: per tap, one contiguous load and a multiply-add per vector, where the
 * row form spends a vector (and, for a row narrower than it, several partial loads) on each
 * row. The outputs at the padding's columns (Wrow - OW per row) are computed and dropped: the
 * sums go to a buffer on the stack, and each row's OW outputs are read from it through the
 * epilogue. Each output's taps are added in the row form's order (the same float sums). */
static tth_tstmt *dw_rows_flat(tk *k, tth_texpr *ch, tth_texpr *oh0, int64_t R, int vl)
{
    lw_ctx *c = k->c;
    const lw_conv_p *p = k->p;
    tth_dtype at = tk_acc_dtype(k);
    int64_t nflat = (R - 1) * k->Wrow + p->OW, nvec = (nflat + vl - 1) / vl, nf = nvec * vl;
    /* vector a is the run's elements a*vl .. a*vl + vl - 1: a segment of row 0 from column a*vl
     * (stride 1, so consecutive elements of the padded copy), at most 8 (dw_flat_rows) */
    dseg sg[8];
    for (int64_t a = 0; a < nvec; a++)
        sg[a] = (dseg){0, a * vl, vl};
    tth_tstmt *seq = NULL;
    tth_tbuffer *acc = dw_sums(k, ch, oh0, lw_i(c, 0), sg, (int)nvec, vl, &seq);
    if (!acc)
        return NULL;
    /* dwflat 2: the epilogue reads nothing that varies along H and W, so it runs on the whole
     * vectors too and the buffer holds the outputs; 1: it holds the sums, and each row's go
     * through the epilogue */
    int whole = k->dwflat == 2;
    tth_tbuffer *dest = k->s->dest[0];
    char name[32];
    snprintf(name, sizeof name, "fl%u", c->nbufs++);
    tth_tbuffer *fl = tth_tir_buffer(c->m, name, whole ? dest->dtype : at, 1, &nf, TTH_SCOPE_REGISTER);
    if (!fl)
        return lw_fail(c, TTH_ENOMEM, NULL, "out of memory"), NULL;
    tth_tstmt *out = NULL;
    for (int64_t a = 0; a < nvec; a++) {
        tth_texpr *val = tth_tir_vload(c->m, acc, lw_i(c, a * vl), vl, 0);
        tth_tstmt *st = whole ? epi_store(k, ch, oh0, tth_tir_ramp(c->m, lw_i(c, 0), 1, vl), dw_comp(k, ch, val, vl), fl,
                                          lw_i(c, a * vl))
                              : tth_tir_vstore(c->m, fl, lw_i(c, a * vl), val, 0);
        if (!st || lw_append(c, &out, st))
            return NULL;
    }
    for (int64_t r = 0; r < R; r++)
        for (int64_t s0 = 0; s0 < p->OW; s0 += vl) {
            int lanes = (int)(p->OW - s0 < vl ? p->OW - s0 : vl);
            tth_texpr *val = tth_tir_vload(c->m, fl, lw_i(c, r * k->Wrow + s0), lanes, 0);
            tth_texpr *oh = lw_add(c, oh0, lw_i(c, r)), *ow = tth_tir_ramp(c->m, lw_i(c, s0), 1, lanes);
            tth_texpr *idx[4] = {k->n, ch, oh, ow};
            tth_tstmt *st = whole ? lw_store_at(c, dest, idx, val) : tk_epi_store(k, ch, oh, ow, dw_comp(k, ch, val, lanes));
            if (!st || lw_append(c, &out, st))
                return NULL;
        }
    if (lw_append(c, &seq, tth_tir_allocate(c->m, fl, out)))
        return NULL;
    return tth_tir_allocate(c->m, acc, seq);
}

/* Output rows per tile of the flat form: as many as keep the run within 8 vectors */
static int64_t dw_flat_rows(const tk *k, int vl)
{
    int64_t R = 1;
    while (R < k->p->OH && (R * k->Wrow + k->p->OW + vl - 1) / vl <= 8)
        R++;
    return R;
}

typedef struct dw_at {
    tth_texpr *ch, *oh0;
    int vl;
} dw_at;

static tth_tstmt *dw_row_tile(tk *k, void *ctx, tth_texpr *ow0, const dseg *sg, int n)
{
    dw_at *a = ctx;
    return dw_tile(k, a->ch, a->oh0, ow0, sg, n, a->vl);
}

/* Rows of R output rows from oh0 (R rows of a whole-row vector each when a row is at most one
 * vector and a tail, else one row in tiles of RV vectors): a row is OW / vl vectors of vl pixels
 * and one vector of OW % vl pixels (any width: no pixel is done alone). */
static tth_tstmt *dw_rows(tk *k, tth_texpr *ch, tth_texpr *oh0, int64_t R, int vl)
{
    lw_ctx *c = k->c;
    const lw_conv_p *p = k->p;
    enum { RV = 4 };
    int64_t nv = p->OW / vl;
    int tail = (int)(p->OW % vl);
    dseg sg[8];
    int n = 0;
    if (k->dwflat)
        return dw_rows_flat(k, ch, oh0, R, vl);
    if (R > 1) {
        /* every row: its (at most one) full vector and its tail */
        for (int64_t r = 0; r < R; r++) {
            for (int64_t v = 0; v < nv; v++)
                sg[n++] = (dseg){r, v * vl, vl};
            if (tail)
                sg[n++] = (dseg){r, nv * vl, tail};
        }
        return dw_tile(k, ch, oh0, lw_i(c, 0), sg, n, vl);
    }
    dw_at at = {ch, oh0, vl};
    return tk_row_in_vectors(k, RV, vl, dw_row_tile, &at);
}

/* Rows [oh0, oh0 + n) of channel ch in groups of R rows (dw_rows): a loop over the whole
 * groups, whose code is written once (a window's 16 rows written out one by one made the
 * function 16 times larger for LLVM to compile, for no gain in speed: docs/lowering.md,
 * "Depthwise kernel"), then the n % R rows left. */
static tth_tstmt *dw_row_range(tk *k, tth_texpr *ch, tth_texpr *oh0, int64_t n, int64_t R, int vl)
{
    lw_ctx *c = k->c;
    tth_tstmt *seq = NULL;
    int64_t groups = n / R;
    if (groups > 0) {
        lw_ax g;
        if (lw_ax_make(c, &g, "rg", groups))
            return NULL;
        tth_tstmt *st = dw_rows(k, ch, lw_add(c, oh0, lw_mul(c, g.e, lw_i(c, R))), R, vl);
        if (!st || lw_append(c, &seq, lw_ax_loop(c, &g, TTH_LOOP_SERIAL, st)))
            return NULL;
    }
    if (n % R) {
        tth_tstmt *st = dw_rows(k, ch, lw_add(c, oh0, lw_i(c, groups * R)), n % R, vl);
        if (!st || lw_append(c, &seq, st))
            return NULL;
    }
    return seq;
}

/* The window form (docs/lowering.md, "Depthwise kernel"): an iteration (G output rows of one
 * channel) first copies the padded rows those rows read, NR = (G-1)*sh + (KH-1)*dh + 1 of them,
 * into a window on the task's stack, then convolves from it; no padded copy of the whole image. */
static tth_tstmt *dw_window_rows(tk *k, tth_tbuffer *src, tth_texpr *ch, tth_texpr *oh0, int64_t G, int64_t R, int vl)
{
    lw_ctx *c = k->c;
    const lw_conv_p *p = k->p;
    int64_t NR = (G - 1) * p->sh + (p->KH - 1) * p->dh + 1, n = NR * k->Wrow;
    char name[32];
    snprintf(name, sizeof name, "xw%u", c->nbufs++);
    tth_tbuffer *xw = tth_tir_buffer(c->m, name, k->xdt, 1, &n, TTH_SCOPE_REGISTER);
    if (!xw)
        return lw_fail(c, TTH_ENOMEM, NULL, "out of memory"), NULL;
    tth_texpr *r0 = lw_mul(c, oh0, lw_i(c, p->sh));
    tth_tstmt *seq = NULL;
    lw_ax j;
    if (lw_ax_make(c, &j, "wr", NR))
        return NULL;
    tth_tstmt *fill = tk_pad_row_or_zeros(k, src, xw, lw_mul(c, j.e, lw_i(c, k->Wrow)), ch, lw_add(c, r0, j.e));
    if (!fill || lw_append(c, &seq, lw_ax_loop(c, &j, TTH_LOOP_SERIAL, fill)))
        return NULL;
    tth_tbuffer *xd = NULL;
    int64_t tot = k->dwtot;
    if (k->dwdot) { /* the window's words, which the kernel reads */
        int64_t nd = (p->KW + 3) / 4 * n;
        k->dwtot = n;
        snprintf(name, sizeof name, "xd%u", c->nbufs++);
        if (!(xd = tth_tir_buffer(c->m, name, TTH_I32, 1, &nd, TTH_SCOPE_REGISTER)))
            return lw_fail(c, TTH_ENOMEM, NULL, "out of memory"), NULL;
        lw_ax r;
        tth_tstmt *wr = lw_ax_make(c, &r, "dr", NR) ? NULL : dw_words_row(k, xw, xd, lw_mul(c, r.e, lw_i(c, k->Wrow)));
        if (!wr || lw_append(c, &seq, lw_ax_loop(c, &r, TTH_LOOP_SERIAL, wr)))
            return NULL;
    }
    tth_tbuffer *x = k->x;
    k->x = xd ? xd : xw;
    k->wrow0 = r0;
    tth_tstmt *rows = dw_row_range(k, ch, oh0, G, R, vl);
    k->x = x;
    k->wrow0 = NULL;
    k->dwtot = tot;
    if (!rows || lw_append(c, &seq, rows))
        return NULL;
    if (xd)
        seq = tth_tir_allocate(c->m, xd, seq);
    return seq ? tth_tir_allocate(c->m, xw, seq) : NULL;
}

/* src: the unpadded input when the kernel reads windows (window_rows > 0: output rows per
 * window), else NULL */
static tth_tstmt *depthwise_kernel(tk *k, tth_tbuffer *src, int64_t window_rows)
{
    lw_ctx *c = k->c;
    const lw_conv_p *p = k->p;
    int vl = c->vec.f32_lanes > 1 ? c->vec.f32_lanes : 1;
    /* a row of at most one vector and a tail: tiles of R rows, so a tile still has four
     * independent accumulators */
    int segs = (int)(p->OW / vl + (p->OW % vl ? 1 : 0));
    int64_t R = k->dwflat ? dw_flat_rows(k, vl) : segs >= 4 ? 1 : 4 / segs;
    if (R > p->OH)
        R = p->OH;
    /* rows per iteration: R, or a window's worth (a multiple of R) */
    int64_t G = window_rows > 0 ? (window_rows + R - 1) / R * R : R;
    if (G > p->OH)
        G = p->OH;
    int64_t work = p->C * p->OH * p->OW * p->KH * p->KW;
    tth_tstmt *seq = NULL;
    if (k->dwflat && p->C > 1) {
        /* the flat form reads the padded copy, which is written channel by channel in parallel
         * (tk_pad_copy): channels outermost, so each core reads the planes it copied, every row
         * of a plane in one task */
        lw_ax ch;
        if (lw_ax_make(c, &ch, "ch", p->C))
            return NULL;
        tth_tstmt *rows = dw_row_range(k, ch.e, lw_i(c, 0), p->OH, R, vl);
        return lw_ax_loop(c, &ch, work >= LW_PARALLEL_MIN_DW ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL, rows);
    }
    /* a loop over (row group, channel) pairs, rows outermost (docs/threads.md, "Locality"),
     * then the last OH % G rows of every channel */
    for (int part = 0; part < 2; part++) {
        int64_t ng = part == 0 ? p->OH / G : 1, rows = part == 0 ? G : p->OH % G;
        if (rows == 0 || ng == 0)
            continue;
        lw_ax rc;
        if (lw_ax_make(c, &rc, "rc", ng * p->C))
            return NULL;
        tth_tvar *vch = lw_var(c, "ch", TTH_I64), *voh = lw_var(c, "oh", TTH_I64);
        if (!vch || !voh)
            return NULL;
        tth_texpr *ch = p->C == 1 ? lw_i(c, 0) : lw_ref(c, vch);
        tth_texpr *oh0 = part == 1 ? lw_i(c, p->OH / G * G) : ng == 1 ? lw_i(c, 0) : lw_ref(c, voh);
        tth_tstmt *body = src ? dw_window_rows(k, src, ch, oh0, rows, R, vl) : dw_rows(k, ch, oh0, rows, vl);
        body = lw_let(c, voh, lw_mul(c, lw_bin(c, TTH_TBIN_DIV, rc.e, lw_i(c, p->C)), lw_i(c, G)),
                      lw_let(c, vch, lw_bin(c, TTH_TBIN_MOD, rc.e, lw_i(c, p->C)), body));
        body = lw_ax_loop(c, &rc, work >= LW_PARALLEL_MIN_DW && ng * p->C > 1 ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL, body);
        if (!body || lw_append(c, &seq, body))
            return NULL;
    }
    return seq;
}

/* ------------------------------------------------------------ row-vectorized kernel ---- */

/* The weights [O, C, KH, KW] as wp[((blk*C + ic)*KK + kk)*RO + r] = w[blk*RO + r, ic, kk] (zeros
 * past O): the RO weights one tap multiplies are side by side. */
static tth_tbuffer *rows_pack(tk *k, const tth_tensor *wt, int RO)
{
    const lw_conv_p *p = k->p;
    int64_t KK = p->KH * p->KW, nblk = (p->O + RO - 1) / RO;
    tth_tensor *pk = lw_packed_new(k->c, nblk * p->C * KK * RO);
    if (!pk)
        return NULL;
    float *dst = pk->data;
    const float *src = wt->data;
    for (int64_t o = 0; o < p->O; o++)
        for (int64_t ick = 0; ick < p->C * KK; ick++)
            dst[((o / RO) * p->C * KK + ick) * RO + o % RO] = src[o * p->C * KK + ick];
    return lw_packed_const(k->c, pk);
}

/* One tile: ro output channels from block ob (of RO) times the n vectors sg (lanes pixels from
 * column ow0 + dcol) of output row oh. Per input channel and tap: n contiguous vector loads of
 * the input row (the phase-split copy for a strided convolution), ro scalar weights, ro*n
 * multiply-adds; then each accumulator through the epilogue, stored as contiguous pixels of one
 * channel. */
static tth_tstmt *rows_tile(tk *k, tth_texpr *ob, int RO, int ro, tth_texpr *oh, tth_texpr *ow0, const dseg *sg, int n,
                            int vmax)
{
    lw_ctx *c = k->c;
    const lw_conv_p *p = k->p;
    int64_t KK = p->KH * p->KW;
    tth_dtype at = k->dot ? TTH_I32 : TTH_F32;
    tth_tstmt *seq = NULL;
    tth_tbuffer *acc = lw_reg_tile_of(c, at, (int64_t)ro * n, vmax, &seq);
    if (!acc)
        return NULL;
    lw_ax ic, kh, kw;
    if (lw_ax_make(c, &ic, "ic", k->Cg) || lw_ax_make(c, &kh, "kh", p->KH) || lw_ax_make(c, &kw, "kw", p->KW))
        return NULL;
    tth_tvar *vx = lw_var(c, "xo", TTH_I64), *vw = lw_var(c, "wb", TTH_I64), *xv[8];
    if (!vx || !vw)
        return NULL;
    for (int a = 0; a < n; a++) 
        if (!(xv[a] = lw_var_vec(c, "x", at, sg[a].lanes)))
            return NULL;
    tth_texpr *xo = tk_tap_at(k, ic.e, oh, ow0, kh.e, kw.e);
    tth_texpr *wb = lw_mul(c, lw_add(c, lw_mul(c, lw_add(c, lw_mul(c, ob, lw_i(c, k->Cg)), ic.e), lw_i(c, KK)),
                                     lw_add(c, lw_mul(c, kh.e, lw_i(c, p->KW)), kw.e)),
                           lw_i(c, RO));
    tth_tstmt *upd = NULL;
    for (int r = 0; r < ro; r++) {
        tth_texpr *wr = tth_tir_load(c->m, k->w, lw_add(c, lw_ref(c, vw), lw_i(c, r)));
        for (int a = 0; a < n; a++) {
            tth_texpr *ai = lw_i(c, ((int64_t)r * n + a) * vmax);
            int ln = sg[a].lanes;
            tth_texpr *av = tth_tir_vload(c->m, acc, ai, ln, 0);
            tth_texpr *f = !k->dot ? lw_madd(c, wr, lw_ref(c, xv[a]), av)
                                   : tth_tir_intrin3(c->m, k->dot, av, lw_ref(c, xv[a]),
                                                     ln > 1 ? tth_tir_broadcast(c->m, wr, ln) : wr);
            if (lw_append(c, &upd, tth_tir_vstore(c->m, acc, ai, f, 0)))
                return NULL;
        }
    }
    tth_tstmt *inner = upd;
    for (int a = n - 1; a >= 0; a--) {
        tth_texpr *x0 = lw_add(c, lw_ref(c, vx), lw_i(c, sg[a].dcol));
        inner = lw_let(c, xv[a], tth_tir_vload(c->m, k->x, x0, sg[a].lanes, 0), inner);
    }
    inner = lw_let(c, vx, xo, lw_let(c, vw, wb, inner));
    inner = lw_ax_loop(c, &kw, TTH_LOOP_SERIAL, inner);
    inner = lw_ax_loop(c, &kh, TTH_LOOP_SERIAL, inner);
    inner = lw_ax_loop(c, &ic, TTH_LOOP_SERIAL, inner);
    if (!inner || lw_append(c, &seq, inner))
        return NULL;
    for (int r = 0; r < ro; r++) {
        tth_texpr *oc = lw_add(c, lw_mul(c, ob, lw_i(c, RO)), lw_i(c, r));
        for (int a = 0; a < n; a++) {
            tth_texpr *ai = lw_i(c, ((int64_t)r * n + a) * vmax);
            tth_texpr *ow = lw_add(c, ow0, lw_i(c, sg[a].dcol));
            int ln = sg[a].lanes;
            tth_texpr *val = tth_tir_vload(c->m, acc, ai, ln, 0);
            if (k->comp)
                val = lw_add(c, val, ln > 1 ? tth_tir_broadcast(c->m, tth_tir_load(c->m, k->comp, oc), ln)
                                            : tth_tir_load(c->m, k->comp, oc));
            tth_tstmt *st = tk_epi_store(k, oc, oh, ln > 1 ? tth_tir_ramp(c->m, ow, 1, ln) : ow, val);
            if (!st || lw_append(c, &seq, st))
                return NULL;
        }
    }
    return tth_tir_allocate(c->m, acc, seq);
}

typedef struct rows_at {
    tth_texpr *ob, *oh;
    int RO, ro, vl;
} rows_at;

static tth_tstmt *rows_row_tile(tk *k, void *ctx, tth_texpr *ow0, const dseg *sg, int n)
{
    rows_at *a = ctx;
    return rows_tile(k, a->ob, a->RO, a->ro, a->oh, ow0, sg, n, a->vl);
}

/* One output row oh for ro channels of block ob, in tiles of RP vectors (row_in_vectors). */
static tth_tstmt *rows_row(tk *k, tth_texpr *ob, int RO, int ro, tth_texpr *oh, int RP, int vl)
{
    rows_at at = {ob, oh, RO, ro, vl};
    return tk_row_in_vectors(k, RP, vl, rows_row_tile, &at);
}

/* Output rows times blocks of RO channels, a parallel loop over (row, block) pairs with rows
 * outermost (docs/threads.md, "Locality"); the last O % RO channels are a narrower block. */
static tth_tstmt *rows_kernel(tk *k, int RO, int RP)
{
    lw_ctx *c = k->c;
    const lw_conv_p *p = k->p;
    int vl = c->vec.f32_lanes;
    int64_t nblk = p->O / RO;
    int par = kernel_parallel(k);
    tth_tstmt *seq = NULL;
    for (int part = 0; part < 2; part++) {
        int64_t nb = part == 0 ? nblk : (p->O % RO ? 1 : 0);
        int ro = part == 0 ? RO : (int)(p->O % RO);
        if (nb == 0)
            continue;
        lw_ax q;
        if (lw_ax_make(c, &q, "q", p->OH * nb))
            return NULL;
        tth_texpr *ob = part == 1 ? lw_i(c, nblk) : nb == 1 ? lw_i(c, 0) : lw_bin(c, TTH_TBIN_MOD, q.e, lw_i(c, nb));
        tth_texpr *oh = p->OH == 1 ? lw_i(c, 0) : nb == 1 ? q.e : lw_bin(c, TTH_TBIN_DIV, q.e, lw_i(c, nb));
        tth_tstmt *body = rows_row(k, ob, RO, ro, oh, RP, vl);
        body = lw_ax_loop(c, &q, par && p->OH * nb > 1 ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL, body);
        if (!body || lw_append(c, &seq, body))
            return NULL;
    }
    return seq;
}

int tk_weights_outer(const lw_conv_p *p, int64_t wfloats, int cores)
{
    /* docs/lowering.md, "Loop order": on one core (-num-cores=1) the larger side outermost;
     * split among cores (more than one, or as many as the machine has), only a much larger
     * weight (a task then reads its share of the weights but the whole image, and the next layer
     * reads the part of the image the other core wrote) */
    int64_t in = p->C * p->H * p->W;
    return cores == 1 ? wfloats > in : wfloats > TK_OUTER_PARALLEL_RATIO * in;
}

/* ------------------------------------------- entry: the strategies (lower_strategies.c) ---- */

/* a float32 nn.conv2d, its shapes and attributes in *p */
int tk_conv_f32(const tth_rexpr *call, lw_conv_p *p)
{
    if (!tk_conv_f32_any(call, p) || p->xb || p->ob)
        return 0;
    return 1;
}

int tk_conv_f32_any(const tth_rexpr *call, lw_conv_p *p)
{
    char why[256];
    if (call->u.call.op != TTH_OP_CONV2D || !lw_conv_params(call, p, why, sizeof why) || p->quant || p->transpose)
        return 0;
    return lw_ty(lw_arg(call, 0))->dtype == TTH_F32 && lw_ty(lw_arg(call, 1))->dtype == TTH_F32 &&
           lw_ty(call)->dtype == TTH_F32;
}

static int is_depthwise(const lw_conv_p *p)
{
    return p->C == p->groups && p->O == p->groups;
}

/* the channel-blocked kernel on blocked channels: one group, or groups (not depthwise) whose
 * channels fill whole blocks of each blocked side (docs/layouts.md) */
static int nchwc_groups_ok(const lw_conv_p *p)
{
    int64_t Cg = p->C / p->groups, Og = p->O / p->groups;
    return p->groups == 1 || (!is_depthwise(p) && (!p->ob || Og % p->ob == 0) && (!p->xb || Cg % p->xb == 0));
}

/* 1x1, stride 1, no padding: the image is one row of OH*OW pixels */
static int is_flat(const lw_conv_p *p)
{
    return !p->pt && !p->pl && !p->pb && !p->pr && p->KH == 1 && p->KW == 1 && p->sh == 1 && p->sw == 1 &&
           !is_depthwise(p);
}

void tk_init(tk *k, lw_ctx *c, const tth_rexpr *call, const lw_conv_p *p, const lw_sink *s)
{
    memset(k, 0, sizeof *k);
    k->c = c;
    k->call = call;
    k->p = p;
    k->s = s;
    k->Cg = p->C / p->groups;
    k->Og = p->O / p->groups;
    k->bias = call->u.call.nargs == 3 ? lw_arg(call, 2) : NULL;
    k->flat = is_flat(p);
    k->Hp = p->H + p->pt + p->pb;
    k->Wp = p->W + p->pl + p->pr;
    k->sp = 1;
    k->Wq = k->Wrow = k->Wp;
    k->xblk = p->xb;
    k->xdt = TTH_F32;
}

int lw_conv_pixel_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    lw_conv_p p;
    if (!tk_conv_f32(call, &p) || !is_flat(&p) || p.groups != 1 || lw_arg(call, 1)->kind != TTH_REXPR_CONST)
        return 0;
    int vl = c->vec.f32_lanes;
    int64_t P = p.OH * p.OW;
    return vl >= 4 && P >= 4 * vl && (!s->epi || tk_epi_hw_ok(s->epi, s->anchor, p.OH, p.OW, 0));
}

int lw_conv_depthwise_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    (void)c;
    (void)s;
    lw_conv_p p;
    return tk_conv_f32(call, &p) && is_depthwise(&p);
}

int lw_conv_blocked_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    (void)c;
    (void)s;
    lw_conv_p p;
    return tk_conv_f32(call, &p);
}

int lw_conv_nchwc_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    (void)c;
    (void)s;
    lw_conv_p p;
    return tk_conv_f32_any(call, &p) && (p.xb || p.ob) && nchwc_groups_ok(&p);
}

/* the row-vectorized kernel's reduction limit: input channels x taps */
#define ROWS_MAX_TAPS 192

int lw_conv_rows_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    (void)s;
    lw_conv_p p;
    if (!tk_conv_f32(call, &p) || p.groups != 1 || is_depthwise(&p) || lw_arg(call, 1)->kind != TTH_REXPR_CONST)
        return 0;
    int vl = c->vec.f32_lanes;
    return vl >= 4 && p.OW >= 2 * vl && p.C * p.KH * p.KW <= ROWS_MAX_TAPS;
}

tth_tstmt *lw_conv_pixel(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    lw_conv_p p;
    tk k;
    if (!tk_conv_f32(call, &p))
        return lw_fail(c, TTH_EINTERNAL, call, "conv2d/pixel-vectorized does not apply"), NULL;
    tk_init(&k, c, call, &p, s);
    lw_ax an;
    if (!(k.x = lw_buf(c, lw_arg(call, 0))) || lw_ax_make(c, &an, "n", p.N))
        return NULL;
    k.n = an.e;
    k.xbase = lw_mul(c, an.e, lw_i(c, p.C * p.H * p.W));
    tth_tstmt *kern = pointwise_kernel(&k, lw_arg(call, 1));
    return kern ? lw_ax_loop(c, &an, TTH_LOOP_SERIAL, kern) : NULL;
}

/* Output rows per window of a padded depthwise convolution, or 0 for the padded copy of the whole
 * image (docs/lowering.md, "Depthwise kernel"): windows of 8 rows when strided, of 16 when rows
 * are at least two vectors wide (narrower planes are cheaper to copy whole, as they stay in
 * cache), each of the window's buffers on the task's stack within the code generator's bound. */
static int64_t dw_window_rows_for(const lw_conv_p *p, int vl, int64_t esize)
{
    int64_t G = p->sw > 1 ? 8 : p->OW >= 2 * vl ? 16 : 0;
    /* the window's largest buffer (esize bytes per element: the input's, or the dot form's
     * words) within LW_STACK_BUFFER_MAX: fewer rows for very wide images, none when one row is
     * too much */
    int64_t Wp = p->W + p->pl + p->pr, Wrow = (Wp + p->sw - 1) / p->sw * p->sw;
    while (G > 0 && ((G - 1) * p->sh + (p->KH - 1) * p->dh + 1) * Wrow * esize > LW_STACK_BUFFER_MAX)
        G /= 2;
    return G;
}

/* Do the taps read padding for most outputs? The share of (output row, kh) pairs whose input row
 * is inside the image, times the same for columns: below half, the channel-blocked kernel skips
 * the taps outside (DeepLabV3's 3x3 at dilation 12 over 14x14: 2.6 of 9 taps on average). */
static double inside_share(int64_t out, int64_t K, int64_t s, int64_t d, int64_t pad, int64_t in)
{
    int64_t n = 0;
    for (int64_t o = 0; o < out; o++)
        for (int64_t kk = 0; kk < K; kk++) {
            int64_t r = o * s + kk * d - pad;
            n += r >= 0 && r < in;
        }
    return out * K != 0 ? (double)n / (double)(out * K) : 1.0;
}

/* The share of the taps that read inside the image, rows times columns (1 for a 1x1 kernel) */
static double tap_share(const lw_conv_p *p)
{
    return p->KH > 1 || p->KW > 1 ? inside_share(p->OH, p->KH, p->sh, p->dh, p->pt, p->H) *
                                        inside_share(p->OW, p->KW, p->sw, p->dw, p->pl, p->W)
                                  : 1.0;
}

/* the channel-blocked and depthwise kernels, with the padded copy and the weight packing */
enum { TILED_BLOCKED, TILED_DEPTHWISE, TILED_ROWS };

static tth_tstmt *conv_tiled(lw_ctx *c, const tth_rexpr *call, const lw_sink *s, int mode, const tk_int8 *q)
{
    lw_conv_p pp;
    tk k;
    if (q)
        pp = q->p;
    else if (mode == TILED_BLOCKED ? !tk_conv_f32_any(call, &pp) || ((pp.xb || pp.ob) && !nchwc_groups_ok(&pp))
                                   : !tk_conv_f32(call, &pp))
        return lw_fail(c, TTH_EINTERNAL, call, "a tiled conv2d kernel does not apply"), NULL;
    const lw_conv_p *p = &pp;
    tk_init(&k, c, call, p, s);
    if (q) {
        k.xdt = q->xdt;
        k.xzp = q->xzp;
        k.comp = q->comp;
        k.dwdot = q->dot;
        k.koff = q->koff;
    }
    const tth_rexpr *wa = lw_arg(call, 1);
    int padded = p->pt || p->pl || p->pb || p->pr;
    int depthwise = mode == TILED_DEPTHWISE;
    if (mode != TILED_BLOCKED && p->sw > 1) {
        /* strided depthwise or row-vectorized: the copy splits each row into sw phases, so
         * every tap reads contiguous vectors */
        padded = 1;
        k.sp = p->sw;
        k.Wq = (k.Wp + p->sw - 1) / p->sw;
        k.Wrow = k.sp * k.Wq;
    }
    tth_tbuffer *x = lw_buf(c, lw_arg(call, 0)), *w = lw_buf(c, wa);
    if (!x || !w)
        return NULL;
    tth_tbuffer *xp = NULL, *wp = NULL, *xd = NULL;
    tth_tstmt *pack = NULL;
    int RO = c->vec.registers >= 32 ? 6 : 4, RP = c->vec.registers >= 32 ? 4 : 2;
    if (mode == TILED_ROWS) {
        k.flat = 0;
        if (!(k.w = rows_pack(&k, wa->u.constant.value, RO)))
            return NULL;
    } else if (mode == TILED_BLOCKED && (k.tap_share = tap_share(p)) < 0.5 && p->KW <= 64) {
        /* row tiles, each looping over its taps inside the image, which it reads unpadded */
        k.skip_taps = 1;
        padded = 0;
        k.Hp = p->H;
        k.Wp = k.Wq = k.Wrow = p->W;
    } else if (!depthwise && !k.flat && p->OW <= 16)
        k.flat = 2; /* a narrow image (7x7, 14x14): tiles run across rows instead of 4 + 3 pixels */
    if (mode == TILED_BLOCKED) {
        tk_block_lanes(&k);
        /* the packing puts each tile's blocks side by side: the tile first */
        tk_choose_tile(&k);
        if (wa->kind == TTH_REXPR_CONST) {
            wp = pack_const(&k, wa->u.constant.value);
            if (!wp)
                return NULL;
        } else {
            int64_t n = p->groups * k.NB * k.Cg * p->KH * p->KW * k.vl;
            wp = lw_local(c, "wp", TTH_F32, 1, &n);
            if (!wp || !(pack = pack_loop(&k, w, wp)))
                return NULL;
        }
        k.w = wp;
        k.wouter = tk_weights_outer(p, p->groups * k.NB * k.Cg * p->KH * p->KW * k.vl, c->cores);
        /* grouped, split among cores: groups outermost where a pointwise layer of its width would
         * put its weights outermost (C x C weights larger than TK_OUTER_PARALLEL_RATIO images):
         * the 1x1 layers around it (ResNeXt, RegNet) then write and read channel halves, and each
         * task reads only its groups' channels, which its own core wrote (docs/lowering.md,
         * "Loop order") */
        if (!k.wouter && p->groups > 1 && c->cores != 1 && p->C > TK_OUTER_PARALLEL_RATIO * p->H * p->W)
            k.wouter = 1;
        /* grouped on a blocked input: each task copies the padded rows of its group that its
         * tiles read into a window on its stack instead of the whole padded image being copied
         * first, when the largest task's window fits there (docs/lowering.md, "Windows of a
         * group") */
        if (padded && p->groups > 1 && p->xb) {
            tk_split sp = task_split(&k, p->groups * k.NB / k.RC, k.RW);
            int64_t wrows = window_rows(&k, sp.rows + (sp.last ? 1 : 0), sp.RL);
            if (k.Cg * wrows * k.Wrow * 4 <= LW_STACK_BUFFER_MAX) {
                k.xwin = wrows;
                padded = 0;
            }
        }
    } else if (depthwise) {
        k.vl = 1;
        k.w = k.dwdot ? q->wd : w;
        padded |= k.dwdot; /* the words are built from a padded copy or window */
    }
    /* a padded depthwise convolution on a vector target reads windows of rows copied on the
     * task's stack instead of a padded copy of the whole image (docs/lowering.md) */
    int64_t window_rows = depthwise && padded && c->vec.f32_lanes > 1 ? dw_window_rows_for(p, c->vec.f32_lanes, k.dwdot ? 4 * ((p->KW + 3) / 4) : (int64_t)tth_dtype_size(k.xdt)) : 0;
    if (window_rows > 0)
        padded = 0;
    /* the flat form: rows of less than four vectors, which the row form computes in partial
     * vectors, several rows to a tile */
    int vlanes = c->vec.f32_lanes;
    k.dwflat = depthwise && padded && vlanes > 1 && k.sp == 1 && p->sh == 1 && !p->xb && !p->ob &&
               p->OW < 4 * vlanes && p->OH > 1;
    if (k.dwflat && s->nfields == 1 && (!s->epi || tk_epi_hw_ok(s->epi, s->anchor, -1, -1, 0)))
        k.dwflat = 2;
    /* the dot form's words of a plane read (KW-1)*dw bytes past it (dw_words_plane) */
    int64_t slack = (k.dwflat ? vlanes : 0) + (k.dwdot ? (p->KW - 1) * p->dw : 0);
    if (padded) {
        int64_t n = p->C * k.Hp * k.Wrow + slack;
        xp = lw_local(c, "xp", k.xdt, 1, &n); /* NCHW<b>c: the same count, [C/b][Hp][Wp][b] */
        if (!xp)
            return NULL;
    }
    k.x = padded ? xp : x;

    lw_ax an;
    if (lw_ax_make(c, &an, "n", p->N))
        return NULL;
    k.n = an.e;
    k.xbase = padded ? lw_i(c, 0) : lw_mul(c, an.e, lw_i(c, p->C * p->H * p->W));
    tth_tstmt *img = NULL;
    if (padded) {
        /* the slack first: the dot form's last plane reads it while making its words */
        if (slack && lw_append(c, &img, tth_tir_vstore(c->m, xp, lw_i(c, p->C * k.Hp * k.Wrow),
                                                       tth_tir_broadcast(c->m, pad_value(&k), (int)slack), 0)))
            return NULL;
        tth_tstmt *pc;
        if (k.dwdot) { /* the padded copy and its words; the kernel reads the words */
            k.dwtot = p->C * k.Hp * k.Wrow + (k.dwflat ? vlanes : 0);
            int64_t n = (p->KW + 3) / 4 * k.dwtot;
            if (!(xd = lw_local(c, "xd", TTH_I32, 1, &n)))
                return NULL;
            pc = pad_copy_planes(&k, x, xp, xd);
            k.x = xd;
        } else {
            pc = p->xb                    ? tk_pad_copy_blocked(&k, x, xp)
                 : mode == TILED_BLOCKED ? pad_copy_planes_split(&k, x, xp)
                                         : tk_pad_copy(&k, x, xp);
        }
        if (!pc || lw_append(c, &img, pc))
            return NULL;
    }
    tth_tstmt *kern = depthwise ? depthwise_kernel(&k, window_rows > 0 ? x : NULL, window_rows) : mode == TILED_ROWS ? rows_kernel(&k, RO, RP) : blocked_kernel(&k);
    if (!kern || lw_append(c, &img, kern))
        return NULL;
    tth_tstmt *body = lw_ax_loop(c, &an, TTH_LOOP_SERIAL, img);
    tth_tstmt *all = NULL;
    if (lw_append(c, &all, pack) || lw_append(c, &all, body))
        return NULL;
    if (all && xd)
        all = tth_tir_allocate(c->m, xd, all);
    if (all && xp)
        all = tth_tir_allocate(c->m, xp, all);
    if (all && pack)
        all = tth_tir_allocate(c->m, wp, all);
    return all;
}

tth_tstmt *lw_conv_depthwise(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    return conv_tiled(c, call, s, TILED_DEPTHWISE, NULL);
}

tth_tstmt *lw_conv_blocked(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    return conv_tiled(c, call, s, TILED_BLOCKED, NULL);
}

tth_tstmt *lw_conv_rows(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    return conv_tiled(c, call, s, TILED_ROWS, NULL);
}

tth_tstmt *tk_conv_depthwise_int8(lw_ctx *c, const tth_rexpr *call, const lw_sink *s, const tk_int8 *q)
{
    return conv_tiled(c, call, s, TILED_DEPTHWISE, q);
}

tth_tstmt *tk_blocked_kernel(tk *k)
{
    return blocked_kernel(k);
}

tth_tstmt *tk_rows_kernel(tk *k, int RO, int RP)
{
    return rows_kernel(k, RO, RP);
}
