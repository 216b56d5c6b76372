/* lower_conv_winograd.c: float32 3x3 stride-1 convolutions by Winograd's minimal filtering,
 * F(4x4, 3x3) (docs/lowering.md, "Winograd kernel"). Each 4x4 block of output pixels (a tile)
 * of channel o is
 *     Y = AT [ sum_c (G w[o,c] GT) . (BT d[c] B) ] A
 * with d[c] the 6x6 input patch of the tile, "." the element-wise product: 36 multiplications
 * per tile and channel pair instead of 144. Three passes per image:
 *   1. input transform: V[e][c][t] = (BT d[c,t] B)[e] (e = 6*xi + nu, t = tile), vectors along
 *      the tiles of a tile row, read from a padded copy split into 4 phases so that a tile's
 *      column j of every tile of the row is one contiguous vector;
 *   2. 36 independent products M[e][t][o] = sum_c V[e][c][t] U[e][c][o], register-tiled like
 *      the matmul kernel (RM tiles x RN vectors of output channels, V broadcast, U contiguous);
 *      U = G w GT is computed at compile time;
 *   3. output transform Y = AT M A, vectors along the output channels, then the bias and the
 *      fused epilogue, stored pixel by pixel (one vector of channels per pixel, as the
 *      channel-blocked kernel stores).
 * The transforms are exact in real arithmetic; in float32 F(4x4, 3x3) loses a few bits more than
 * the direct sum (tests/daemon/lower checks it against numpy). */
#include <string.h>

#include "lower_conv_tiled.h"

/* F(4x4, 3x3) with the points 0, 1, -1, 2, -2 and infinity (Lavin and Gray 2016) */
static const double BT[6][6] = {
    {4, 0, -5, 0, 1, 0}, {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
    {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1},
};
static const double G[6][3] = {
    {1.0 / 4, 0, 0},
    {-1.0 / 6, -1.0 / 6, -1.0 / 6},
    {-1.0 / 6, 1.0 / 6, -1.0 / 6},
    {1.0 / 24, 1.0 / 12, 1.0 / 6},
    {1.0 / 24, -1.0 / 12, 1.0 / 6},
    {0, 0, 1},
};
static const double AT[4][6] = {
    {1, 1, 1, 1, 1, 0},
    {0, 1, -1, 2, -2, 0},
    {0, 1, 1, 4, 4, 0},
    {0, 1, -1, 8, -8, 1},
};

enum { WM = 4, WA = 6, WE = 36 }; /* output tile, input tile, transformed elements */

typedef struct wg {
    tk k;
    int vl;                 /* lanes of the output-channel vectors */
    int64_t nTh, nTw, T;    /* tiles down, across, in all */
    tth_tbuffer *V, *M, *U; /* transformed input, products, transformed weights */
    /* the passes run over one region of tile rows: the whole image, or one band. V and M hold a
     * region as V[e][c][t] and M[e][t][o] (t counted from the region's first tile), from vbase
     * and mbase */
    int64_t Ts;             /* tiles of a region: T, or the band's R*nTw */
    int64_t rows;           /* tile rows of a region */
    tth_texpr *th0;         /* the region's first tile row */
    tth_texpr *vbase, *mbase;
    int past_image;         /* a region may hold tile rows past the image's (the last band,
                               made as tall as the others): they are computed, never stored */
    /* channel vectors (an NCHW<b>c input, docs/lowering.md "Winograd kernel"): cv = b, the
     * padded copy (or a band's window, k.wrow0 and k.wH) is blocked as the input,
     * [C/b][rows][Wp][b] from k.xbase, and V is V[e][t][c]. 0: channel rows, V[e][c][t]. */
    int64_t cv;
} wg;

/* sum_i coef[i] * x[i] over the nonzero coefficients (x[i] vectors or scalars); NULL if all zero */
static tth_texpr *lin(lw_ctx *c, const double *coef, tth_texpr *const *x, int n)
{
    tth_texpr *s = NULL;
    for (int i = 0; i < n; i++) {
        double a = coef[i];
        if (a == 0)
            continue;
        tth_texpr *t = a == 1 || a == -1 ? x[i] : lw_mul(c, x[i], tth_tir_float(c->m, TTH_F32, a < 0 ? -a : a));
        if (!s)
            s = a < 0 ? lw_sub(c, tth_tir_float(c->m, TTH_F32, 0), t) : t;
        else
            s = a < 0 ? lw_sub(c, s, t) : lw_add(c, s, t);
    }
    return s;
}

/* U[e][c][o] = (G w[o,c] GT)[e], computed in double at compile time. U is marked as derived from
 * the weights (docs/artifact.md, "Derived constants"): where constants are bound at run time the
 * artifact stores only the weights, and binding computes U with the same arithmetic as here
 * (runtime/bind/tth_bind.c). */
static tth_tbuffer *wino_pack(wg *g, const tth_rexpr *warg)
{
    const tth_tensor *wt = warg->u.constant.value;
    const lw_conv_p *p = g->k.p;
    tth_tensor *pk = lw_packed_new(g->k.c, WE * p->C * p->O);
    if (!pk)
        return NULL;
    float *dst = pk->data;
    const float *src = wt->data;
    for (int64_t o = 0; o < p->O; o++)
        for (int64_t ic = 0; ic < p->C; ic++) {
            const float *w = src + (o * p->C + ic) * 9;
            double gw[WA][3];
            for (int i = 0; i < WA; i++)
                for (int b = 0; b < 3; b++)
                    gw[i][b] = G[i][0] * w[b] + G[i][1] * w[3 + b] + G[i][2] * w[6 + b];
            for (int xi = 0; xi < WA; xi++)
                for (int nu = 0; nu < WA; nu++) {
                    double u = gw[xi][0] * G[nu][0] + gw[xi][1] * G[nu][1] + gw[xi][2] * G[nu][2];
                    dst[((int64_t)(xi * WA + nu) * p->C + ic) * p->O + o] = (float)u;
                }
        }
    tth_tbuffer *u = lw_packed_const(g->k.c, pk), *w = u ? lw_buf(g->k.c, warg) : NULL;
    if (w) /* refused only for weights not [O][C][3][3]: U then stays stored */
        (void)tth_tir_const_buffer_derived(u, TTH_DERIVE_WINOGRAD_F4X4_3X3, w);
    return w ? u : NULL;
}

/* The input transform of one 6x6 patch of `lanes`-wide vectors: d[i][j] = x[i][j] (loads),
 * t = BT d, and V at at[xi][nu] = (t B)[xi][nu] = sum_j t[xi][j] * BT[nu][j] */
static tth_tstmt *bt_patch(lw_ctx *c, tth_tbuffer *V, tth_texpr *const x[WA][WA], tth_texpr *const at[WA][WA], int lanes)
{
    tth_tvar *dv[WA][WA], *tv[WA][WA];
    tth_texpr *d[WA][WA], *t[WA][WA];
    for (int i = 0; i < WA; i++)
        for (int j = 0; j < WA; j++) {
            if (!(dv[i][j] = lw_var_vec(c, "wd", TTH_F32, lanes)) || !(tv[i][j] = lw_var_vec(c, "wt", TTH_F32, lanes)))
                return NULL;
            d[i][j] = lw_ref(c, dv[i][j]);
            t[i][j] = lw_ref(c, tv[i][j]);
        }
    tth_tstmt *st = NULL;
    for (int xi = 0; xi < WA; xi++)
        for (int nu = 0; nu < WA; nu++)
            if (lw_append(c, &st, tth_tir_vstore(c->m, V, at[xi][nu], lin(c, BT[nu], t[xi], WA), 0)))
                return NULL;
    for (int xi = WA - 1; xi >= 0; xi--)
        for (int j = WA - 1; j >= 0; j--) {
            tth_texpr *col[WA];
            for (int i = 0; i < WA; i++)
                col[i] = d[i][j];
            st = lw_let(c, tv[xi][j], lin(c, BT[xi], col, WA), st);
        }
    for (int i = WA - 1; i >= 0; i--)
        for (int j = WA - 1; j >= 0; j--)
            st = lw_let(c, dv[i][j], x[i][j], st);
    return st;
}

/* One chunk of `lanes` tiles of tile row th from tile tw0, channel ch: V[e][ch][th*nTw + tw0 ..]
 * for all 36 e */
static tth_tstmt *in_chunk(wg *g, tth_texpr *ch, tth_texpr *th, int64_t tw0, int lanes)
{
    tk *k = &g->k;
    lw_ctx *c = k->c;
    tth_texpr *x[WA][WA], *at[WA][WA];
    tth_texpr *tcol = lw_add(c, lw_mul(c, lw_sub(c, th, g->th0), lw_i(c, g->nTw)), lw_i(c, tw0));
    for (int i = 0; i < WA; i++)
        for (int j = 0; j < WA; j++) {
            at[i][j] = lw_add(c, g->vbase,
                              lw_add(c, lw_mul(c, lw_add(c, lw_i(c, (int64_t)(i * WA + j) * k->p->C), ch), lw_i(c, g->Ts)), tcol));
            /* padded row 4*th + i, column 4*tw + j = phase j % 4, position tw + j / 4 */
            tth_texpr *row = lw_add(c, lw_mul(c, th, lw_i(c, WM)), lw_i(c, i));
            x[i][j] = tth_tir_vload(c->m, k->x, tk_x_at(k, ch, row, lw_i(c, (j % WM) * k->Wq + tw0 + j / WM)), lanes, 0);
        }
    return bt_patch(c, g->V, x, at, lanes);
}

/* pass 1: the input transform of every (channel, tile row) of the region, chunks of vl tiles
 * along the row */
static tth_tstmt *in_transform(wg *g, int par)
{
    tk *k = &g->k;
    lw_ctx *c = k->c;
    const lw_conv_p *p = k->p;
    int vl = g->vl;
    lw_ax q;
    if (lw_ax_make(c, &q, "q", p->C * g->rows))
        return NULL;
    tth_tvar *vch = lw_var(c, "ch", TTH_I64), *vth = lw_var(c, "th", TTH_I64);
    if (!vch || !vth)
        return NULL;
    tth_texpr *ch = lw_ref(c, vch), *th = lw_ref(c, vth);
    tth_tstmt *row = NULL;
    /* chunks of vl tiles, the last one narrower */
    for (int64_t t0 = 0; t0 < g->nTw; t0 += vl) {
        int lanes = (int)(g->nTw - t0 < vl ? g->nTw - t0 : vl);
        tth_tstmt *ck = in_chunk(g, ch, th, t0, lanes);
        if (!ck || lw_append(c, &row, ck))
            return NULL;
    }
    row = lw_let(c, vth, lw_add(c, g->th0, lw_bin(c, TTH_TBIN_MOD, q.e, lw_i(c, g->rows))),
                 lw_let(c, vch, lw_bin(c, TTH_TBIN_DIV, q.e, lw_i(c, g->rows)), row));
    return lw_ax_loop(c, &q, par ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL, row);
}

/* pass 1 on channel vectors: one tile of b channels (block cb) per step, V for all 36 e as
 * vectors of b channels, V[e][t][cb*b ..]. Every vector is full whatever the image's width,
 * where vectors along a tile row are as wide as the row has tiles (4 of 16 lanes at 14x14). */
static tth_tstmt *in_transform_cv(wg *g, int par)
{
    tk *k = &g->k;
    lw_ctx *c = k->c;
    const lw_conv_p *p = k->p;
    int64_t b = g->cv, C1 = p->C / b;
    lw_ax q;
    if (lw_ax_make(c, &q, "q", g->rows * g->nTw * C1))
        return NULL;
    tth_tvar *vth = lw_var(c, "th", TTH_I64), *vtw = lw_var(c, "tw", TTH_I64), *vcb = lw_var(c, "cb", TTH_I64);
    if (!vth || !vtw || !vcb)
        return NULL;
    tth_texpr *th = lw_ref(c, vth), *tw = lw_ref(c, vtw), *cb = lw_ref(c, vcb);
    /* V[e][(th - th0)*nTw + tw][cb*b ..], from padded pixel (4*th + i, 4*tw + j) of block cb */
    tth_texpr *x[WA][WA], *at[WA][WA];
    tth_texpr *tl = lw_add(c, lw_mul(c, lw_sub(c, th, g->th0), lw_i(c, g->nTw)), tw);
    /* the copy's rows: the band's window (from padded row wrow0, wH rows), or the whole image */
    tth_texpr *row0 = k->wrow0 ? k->wrow0 : lw_i(c, 0);
    int64_t nrows = k->wrow0 ? k->wH : k->Hp;
    for (int i = 0; i < WA; i++)
        for (int j = 0; j < WA; j++) {
            at[i][j] = lw_add(c, g->vbase,
                              lw_add(c, lw_mul(c, lw_add(c, lw_i(c, (int64_t)(i * WA + j) * g->Ts), tl), lw_i(c, p->C)),
                                     lw_mul(c, cb, lw_i(c, b))));
            tth_texpr *row = lw_sub(c, lw_add(c, lw_mul(c, th, lw_i(c, WM)), lw_i(c, i)), row0);
            tth_texpr *px = lw_add(c, lw_mul(c, lw_add(c, lw_mul(c, cb, lw_i(c, nrows)), row), lw_i(c, k->Wp)),
                                   lw_add(c, lw_mul(c, tw, lw_i(c, WM)), lw_i(c, j)));
            x[i][j] = tth_tir_vload(c->m, k->x, lw_add(c, k->xbase, lw_mul(c, px, lw_i(c, b))), (int)b, 0);
        }
    tth_tstmt *st = bt_patch(c, g->V, x, at, (int)b);
    if (!st)
        return NULL;
    /* tile rows outermost, then tiles, then blocks (docs/threads.md, "Locality") */
    st = lw_let(c, vth, lw_add(c, g->th0, lw_bin(c, TTH_TBIN_DIV, q.e, lw_i(c, g->nTw * C1))),
                lw_let(c, vtw, lw_bin(c, TTH_TBIN_MOD, lw_bin(c, TTH_TBIN_DIV, q.e, lw_i(c, C1)), lw_i(c, g->nTw)),
                       lw_let(c, vcb, lw_bin(c, TTH_TBIN_MOD, q.e, lw_i(c, C1)), st)));
    return lw_ax_loop(c, &q, par ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL, st);
}

/* pass 2, one tile: rm tiles from t0 times RN vectors of output channels from o0, for element e */
static tth_tstmt *mm_tile(wg *g, tth_texpr *e, tth_texpr *t0, int rm, tth_texpr *o0, int RN)
{
    lw_ctx *c = g->k.c;
    int64_t C = g->k.p->C, O = g->k.p->O;
    int vl = g->vl;
    tth_tstmt *seq = NULL;
    tth_tbuffer *acc = lw_reg_tile(c, (int64_t)rm * RN, vl, &seq);
    if (!acc)
        return NULL;
    lw_ax ic;
    if (lw_ax_make(c, &ic, "ic", C))
        return NULL;
    tth_tvar *uv[8], *vu = lw_var(c, "ub", TTH_I64), *vv = lw_var(c, "vb", TTH_I64);
    if (!vu || !vv)
        return NULL;
    for (int q = 0; q < RN; q++)
        if (!(uv[q] = lw_var_vec(c, "wu", TTH_F32, vl)))
            return NULL;
    tth_tstmt *upd = NULL;
    for (int r = 0; r < rm; r++) {
        tth_texpr *v = tth_tir_load(c->m, g->V, lw_add(c, lw_ref(c, vv), lw_i(c, g->cv ? r * C : r)));
        for (int q = 0; q < RN; q++) {
            tth_texpr *ai = lw_i(c, ((int64_t)r * RN + q) * vl);
            tth_texpr *f = lw_madd(c, v, lw_ref(c, uv[q]), tth_tir_vload(c->m, acc, ai, vl, 0));
            if (lw_append(c, &upd, tth_tir_vstore(c->m, acc, ai, f, 0)))
                return NULL;
        }
    }
    tth_tstmt *inner = upd;
    for (int q = RN - 1; q >= 0; q--)
        inner = lw_let(c, uv[q], tth_tir_vload(c->m, g->U, lw_add(c, lw_ref(c, vu), lw_i(c, (int64_t)q * vl)), vl, 0), inner);
    tth_texpr *ec = lw_add(c, lw_mul(c, e, lw_i(c, C)), ic.e);
    inner = lw_let(c, vu, lw_add(c, lw_mul(c, ec, lw_i(c, O)), o0),
                   lw_let(c, vv, lw_add(c, g->vbase, g->cv ? lw_add(c, lw_mul(c, lw_add(c, lw_mul(c, e, lw_i(c, g->Ts)), t0), lw_i(c, C)), ic.e)
                                                         : lw_add(c, lw_mul(c, ec, lw_i(c, g->Ts)), t0)), inner));
    inner = lw_ax_loop(c, &ic, TTH_LOOP_SERIAL, inner);
    if (!inner || lw_append(c, &seq, inner))
        return NULL;
    for (int r = 0; r < rm; r++)
        for (int q = 0; q < RN; q++) {
            tth_texpr *at = lw_add(c, lw_mul(c, lw_add(c, lw_mul(c, e, lw_i(c, g->Ts)), lw_add(c, t0, lw_i(c, r))), lw_i(c, O)),
                                   lw_add(c, g->mbase, lw_add(c, o0, lw_i(c, (int64_t)q * vl))));
            if (lw_append(c, &seq, tth_tir_vstore(c->m, g->M, at, tth_tir_vload(c->m, acc, lw_i(c, ((int64_t)r * RN + q) * vl), vl, 0), 0)))
                return NULL;
        }
    return tth_tir_allocate(c->m, acc, seq);
}

/* pass 2: for every e, blocks of RM tiles of the region (then the last Ts % RM) times
 * output-channel tiles. The loop nest keeps the larger operand of e's product in the cache while
 * the smaller one passes over it (docs/lowering.md, "Winograd kernel"): tile blocks outermost
 * when V[e] (C x Ts) is the larger, so its block stays in L1 across U[e]'s columns; output-channel
 * tiles outermost when U[e] (C x O) is, so the tile's C x RN*vl columns of U (from memory: all of
 * U is 36 times the weights) stay in L2 while every tile block reads them. */
static tth_tstmt *products(wg *g, int par)
{
    lw_ctx *c = g->k.c;
    int regs = c->vec.registers;
    int RM = regs >= 32 ? 6 : 4, RN = regs >= 32 ? 4 : 2;
    int64_t nvo = g->k.p->O / g->vl;
    while (nvo % RN)
        RN--;
    int64_t nob = nvo / RN, nTB = g->Ts / RM, rem = g->Ts % RM;
    tth_tstmt *seq = NULL;
    if (g->k.p->O > g->Ts) {
        lw_ax q, tb;
        if (lw_ax_make(c, &q, "q", WE * nob) || lw_ax_make(c, &tb, "tb", nTB))
            return NULL;
        tth_texpr *e = nob == 1 ? q.e : lw_bin(c, TTH_TBIN_DIV, q.e, lw_i(c, nob));
        tth_texpr *o0 = lw_mul(c, nob == 1 ? lw_i(c, 0) : lw_bin(c, TTH_TBIN_MOD, q.e, lw_i(c, nob)),
                               lw_i(c, (int64_t)RN * g->vl));
        tth_tstmt *body = NULL, *full = NULL, *last = NULL;
        if (nTB > 0 && (!(full = lw_ax_loop(c, &tb, TTH_LOOP_SERIAL, mm_tile(g, e, lw_mul(c, tb.e, lw_i(c, RM)), RM, o0, RN))) ||
                        lw_append(c, &body, full)))
            return NULL;
        if (rem && (!(last = mm_tile(g, e, lw_i(c, nTB * RM), (int)rem, o0, RN)) || lw_append(c, &body, last)))
            return NULL;
        return lw_ax_loop(c, &q, par ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL, body);
    }
    for (int part = 0; part < 2; part++) {
        int64_t nt = part == 0 ? nTB : (rem ? 1 : 0);
        int rm = part == 0 ? RM : (int)rem;
        if (nt == 0)
            continue;
        lw_ax q, ob;
        if (lw_ax_make(c, &q, "q", WE * nt) || lw_ax_make(c, &ob, "ob", nob))
            return NULL;
        tth_texpr *e = nt == 1 ? q.e : lw_bin(c, TTH_TBIN_DIV, q.e, lw_i(c, nt));
        tth_texpr *t0 = part == 1 ? lw_i(c, nTB * RM) : lw_mul(c, lw_bin(c, TTH_TBIN_MOD, q.e, lw_i(c, nt)), lw_i(c, RM));
        tth_tstmt *tl = mm_tile(g, e, t0, rm, lw_mul(c, ob.e, lw_i(c, (int64_t)RN * g->vl)), RN);
        tl = lw_ax_loop(c, &ob, TTH_LOOP_SERIAL, tl);
        tl = lw_ax_loop(c, &q, par ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL, tl);
        if (!tl || lw_append(c, &seq, tl))
            return NULL;
    }
    return seq;
}

/* pass 3: Y = AT M A for tile t and vl output channels from ob*vl, through the epilogue; pixels
 * past the image (a last partial tile row or column) are not stored */
static tth_tstmt *out_transform(wg *g, int par)
{
    tk *k = &g->k;
    lw_ctx *c = k->c;
    const lw_conv_p *p = k->p;
    int vl = g->vl;
    int64_t nvo = p->O / vl;
    lw_ax q;
    if (lw_ax_make(c, &q, "q", g->Ts * nvo))
        return NULL;
    tth_tvar *vt = lw_var(c, "t", TTH_I64), *vo = lw_var(c, "ob", TTH_I64), *vth = lw_var(c, "th", TTH_I64),
             *vtw = lw_var(c, "tw", TTH_I64);
    if (!vt || !vo || !vth || !vtw)
        return NULL;
    tth_texpr *t = lw_ref(c, vt), *oc = tth_tir_ramp(c->m, lw_mul(c, lw_ref(c, vo), lw_i(c, vl)), 1, vl);
    tth_tvar *mv[WA][WA], *sv[WM][WA];
    tth_texpr *m[WA][WA], *s[WM][WA];
    for (int i = 0; i < WA; i++)
        for (int j = 0; j < WA; j++) {
            if (!(mv[i][j] = lw_var_vec(c, "wm", TTH_F32, vl)))
                return NULL;
            m[i][j] = lw_ref(c, mv[i][j]);
        }
    for (int a = 0; a < WM; a++)
        for (int j = 0; j < WA; j++) {
            if (!(sv[a][j] = lw_var_vec(c, "ws", TTH_F32, vl)))
                return NULL;
            s[a][j] = lw_ref(c, sv[a][j]);
        }
    tth_tstmt *st = NULL;
    for (int a = 0; a < WM; a++)
        for (int b = 0; b < WM; b++) {
            tth_texpr *oh = lw_add(c, lw_mul(c, lw_ref(c, vth), lw_i(c, WM)), lw_i(c, a));
            tth_texpr *ow = lw_add(c, lw_mul(c, lw_ref(c, vtw), lw_i(c, WM)), lw_i(c, b));
            tth_tstmt *one = p->ob ? tk_epi_store_block(k, lw_ref(c, vo), oh, ow, lin(c, AT[b], s[a], WA))
                                   : tk_epi_store(k, oc, oh, ow, lin(c, AT[b], s[a], WA));
            if (!one)
                return NULL;
            /* only the last tile row or column can reach past the image */
            tth_texpr *in = NULL;
            if (p->OH % WM && a >= p->OH % WM)
                in = lw_bin(c, TTH_TBIN_LT, oh, lw_i(c, p->OH));
            if (p->OW % WM && b >= p->OW % WM) {
                tth_texpr *cw = lw_bin(c, TTH_TBIN_LT, ow, lw_i(c, p->OW));
                in = in ? lw_bin(c, TTH_TBIN_AND, in, cw) : cw;
            }
            if (in)
                one = tth_tir_if(c->m, in, one, NULL);
            if (!one || lw_append(c, &st, one))
                return NULL;
        }
    /* s[a][j] = sum_i AT[a][i] * m[i][j] */
    for (int a = WM - 1; a >= 0; a--)
        for (int j = WA - 1; j >= 0; j--) {
            tth_texpr *col[WA];
            for (int i = 0; i < WA; i++)
                col[i] = m[i][j];
            st = lw_let(c, sv[a][j], lin(c, AT[a], col, WA), st);
        }
    for (int i = WA - 1; i >= 0; i--)
        for (int j = WA - 1; j >= 0; j--) {
            tth_texpr *at = lw_add(c, lw_mul(c, lw_add(c, lw_i(c, (int64_t)(i * WA + j) * g->Ts), t), lw_i(c, p->O)),
                                   lw_add(c, g->mbase, lw_mul(c, lw_ref(c, vo), lw_i(c, vl))));
            st = lw_let(c, mv[i][j], tth_tir_vload(c->m, g->M, at, vl, 0), st);
        }
    if (g->past_image)
        st = tth_tir_if(c->m, lw_bin(c, TTH_TBIN_LT, lw_ref(c, vth), lw_i(c, g->nTh)), st, NULL);
    /* tiles outermost (docs/threads.md, "Locality"): t = q / nvo, ob = q % nvo */
    st = lw_let(c, vth, lw_add(c, g->th0, lw_bin(c, TTH_TBIN_DIV, t, lw_i(c, g->nTw))),
                lw_let(c, vtw, lw_bin(c, TTH_TBIN_MOD, t, lw_i(c, g->nTw)), st));
    st = lw_let(c, vt, lw_bin(c, TTH_TBIN_DIV, q.e, lw_i(c, nvo)), lw_let(c, vo, lw_bin(c, TTH_TBIN_MOD, q.e, lw_i(c, nvo)), st));
    return lw_ax_loop(c, &q, par ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL, st);
}

/* 3x3, stride 1, no dilation, one group, constant weight, on a vector target, with at least 16
 * input and output channels (whole vectors of output channels) and at least 16 tiles: below
 * that the transformed weights (4x the direct ones) are read for too little work. */
int lw_conv_winograd_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    (void)s;
    lw_conv_p p;
    if (!tk_conv_f32_any(call, &p) || p.groups != 1 || p.KH != 3 || p.KW != 3 || p.sh != 1 || p.sw != 1 || p.dh != 1 ||
        p.dw != 1 || lw_arg(call, 1)->kind != TTH_REXPR_CONST)
        return 0;
    int vl = c->vec.f32_lanes;
    /* NCHW<b>c (docs/layouts.md): any input block (blocks of 4 up to the lanes keep their blocks
     * in the copy, others are gathered into channel rows); an output block must be the vector the
     * output transform stores */
    if (p.ob && p.ob != vl)
        return 0;
    int64_t tiles = ((p.OH + WM - 1) / WM) * ((p.OW + WM - 1) / WM);
    return vl >= 4 && p.C >= 16 && p.O % vl == 0 && tiles >= 16;
}

/* Tile rows per band, or 0 to run each pass over the whole image with every pass split over the
 * cores at run time (docs/lowering.md, "Winograd kernel"). A band is one core's share of the tile
 * rows (the target's num-cores bands), so V, M and the band's copy of the input stay in the
 * cache of the core that wrote them; each band reads all the transformed weights, so bands only
 * when those are at most the transformed activations. */
static int64_t band_rows(const wg *g)
{
    const lw_conv_p *p = g->k.p;
    int64_t u = (int64_t)WE * p->C * p->O, vm = (int64_t)WE * g->T * (p->C + p->O), R;
    if (g->k.c->cores < 2 || g->nTh < 2 || u > vm)
        return 0;
    lw_bands(g->k.c, g->nTh, &R);
    return R;
}

/* The copy (fill), then the three passes over the region: the input transform in the form the
 * copy has, the products, the output transform */
static tth_tstmt *passes(wg *g, tth_tstmt *fill, int par)
{
    lw_ctx *c = g->k.c;
    tth_tstmt *body = NULL, *pass[4] = {fill, g->cv ? in_transform_cv(g, par) : in_transform(g, par), products(g, par),
                                        out_transform(g, par)};
    for (int i = 0; i < 4; i++)
        if (!pass[i] || lw_append(c, &body, pass[i]))
            return NULL;
    return body;
}

/* One band: tile rows [th0, th0 + rows) of the R-row bands. Its window of the padded input (from
 * xbase) is filled first, then the three passes run over its tiles. */
static tth_tstmt *band(wg *g, tth_tbuffer *x, tth_tbuffer *xw, tth_texpr *b, int64_t R, int64_t rows)
{
    tk *k = &g->k;
    lw_ctx *c = k->c;
    const lw_conv_p *p = k->p;
    int64_t wH = R * WM + 2;
    lw_ax wc, wr;
    if (lw_ax_make(c, &wc, "wc", p->C) || lw_ax_make(c, &wr, "wr", rows * WM + 2))
        return NULL;
    g->Ts = rows * g->nTw;
    g->rows = rows;
    g->th0 = lw_mul(c, b, lw_i(c, R));
    g->vbase = lw_mul(c, b, lw_i(c, WE * p->C * R * g->nTw));
    g->mbase = lw_mul(c, b, lw_i(c, WE * R * g->nTw * p->O));
    tth_texpr *row0 = lw_mul(c, g->th0, lw_i(c, WM)); /* the window's first padded row */
    k->xbase = lw_mul(c, b, lw_i(c, p->C * wH * k->Wrow));
    tth_tstmt *fill;
    if (g->cv) {
        fill = tk_pad_rows_blocked(k, x, xw, k->xbase, row0, wH, 0);
    } else {
        fill = tk_pad_row_or_zeros(
            k, x, xw, lw_add(c, k->xbase, lw_mul(c, lw_add(c, lw_mul(c, wc.e, lw_i(c, wH)), wr.e), lw_i(c, k->Wrow))),
            wc.e, lw_add(c, row0, wr.e));
        fill = lw_ax_loop(c, &wr, TTH_LOOP_SERIAL, fill);
        fill = lw_ax_loop(c, &wc, TTH_LOOP_SERIAL, fill);
    }
    k->x = xw;
    k->wrow0 = row0;
    k->wH = wH;
    return passes(g, fill, 0);
}

/* The bands: a parallel loop over them, all of R tile rows. When R does not divide the tile
 * rows, the last band runs past the image: its window there is zeros and those tiles are not
 * stored. It costs no time while each band has a core of its own (the others take as long), and
 * the band is written once: a shorter last band of its own doubled the function's code.
 * V, M and the windows are indexed by band, so bands share nothing but the weights. */
static tth_tstmt *bands(wg *g, tth_tbuffer *x, int64_t R, int par, tth_tbuffer **xw_out)
{
    tk *k = &g->k;
    lw_ctx *c = k->c;
    const lw_conv_p *p = k->p;
    int64_t nb = (g->nTh + R - 1) / R;
    int64_t nw = nb * p->C * (R * WM + 2) * k->Wrow;
    tth_tbuffer *xw = lw_local(c, "xw", TTH_F32, 1, &nw);
    lw_ax b;
    if (!xw || lw_ax_make(c, &b, "band", nb))
        return NULL;
    *xw_out = xw;
    g->past_image = g->nTh % R != 0;
    tth_tstmt *body = band(g, x, xw, b.e, R, R);
    return body ? lw_ax_loop(c, &b, par && nb > 1 ? TTH_LOOP_PARALLEL : TTH_LOOP_SERIAL, body) : NULL;
}

tth_tstmt *lw_conv_winograd(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    lw_conv_p pp;
    if (!lw_conv_winograd_applies(c, call, s) || !tk_conv_f32_any(call, &pp))
        return lw_fail(c, TTH_EINTERNAL, call, "conv2d/winograd does not apply"), NULL;
    const lw_conv_p *p = &pp;
    wg g;
    memset(&g, 0, sizeof g);
    tk *k = &g.k;
    tk_init(k, c, call, p, s);
    g.vl = c->vec.f32_lanes;
    g.nTh = (p->OH + WM - 1) / WM;
    g.nTw = (p->OW + WM - 1) / WM;
    g.T = g.nTh * g.nTw;
    /* the padded copy covers every tile's 6x6 patch: blocked as an NCHW<b>c input (channel
     * vectors), else in 4 phases per row */
    if (k->Hp < g.nTh * WM + 2)
        k->Hp = g.nTh * WM + 2;
    if (k->Wp < g.nTw * WM + 2)
        k->Wp = g.nTw * WM + 2;
    g.cv = p->xb >= 4 && p->xb <= g.vl ? p->xb : 0;
    k->sp = g.cv ? 1 : WM;
    k->Wq = (k->Wp + k->sp - 1) / k->sp;
    k->Wrow = k->sp * k->Wq;
    k->xblk = 0; /* the transforms read the padded copy, never the input's blocks through tk_x_at */
    tth_tbuffer *x = lw_buf(c, lw_arg(call, 0));
    if (!x || !(g.U = wino_pack(&g, lw_arg(call, 1))))
        return NULL;
    /* V and M: the tiles of every band (the last band's region as large as the others) */
    int64_t R = band_rows(&g), tiles = R > 0 ? (g.nTh + R - 1) / R * R * g.nTw : g.T;
    int64_t nv = WE * p->C * tiles, nm = WE * tiles * p->O;
    if (!(g.V = lw_local(c, "wv", TTH_F32, 1, &nv)) || !(g.M = lw_local(c, "wm", TTH_F32, 1, &nm)))
        return NULL;
    lw_ax an;
    if (lw_ax_make(c, &an, "n", p->N))
        return NULL;
    k->n = an.e;
    int par = WE * g.T * p->C * p->O >= LW_PARALLEL_MIN;
    tth_tbuffer *xp = NULL;
    tth_tstmt *img = NULL;
    if (R > 0) {
        img = bands(&g, x, R, par, &xp);
    } else {
        int64_t nx = p->C * k->Hp * k->Wrow;
        if (!(xp = lw_local(c, "xp", TTH_F32, 1, &nx)))
            return NULL;
        k->x = xp;
        k->xbase = lw_i(c, 0);
        g.Ts = g.T;
        g.rows = g.nTh;
        g.th0 = g.vbase = g.mbase = lw_i(c, 0);
        if (!(img = passes(&g, g.cv ? tk_pad_rows_blocked(k, x, xp, lw_i(c, 0), lw_i(c, 0), k->Hp, par) : tk_pad_copy(k, x, xp),
                           par)))
            return NULL;
    }
    tth_tstmt *all = img ? lw_ax_loop(c, &an, TTH_LOOP_SERIAL, img) : NULL;
    all = all ? tth_tir_allocate(c->m, g.M, all) : NULL;
    all = all ? tth_tir_allocate(c->m, g.V, all) : NULL;
    return all ? tth_tir_allocate(c->m, xp, all) : NULL;
}
