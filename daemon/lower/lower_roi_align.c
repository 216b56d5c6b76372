/* lower_roi_align.c: vision.roi_align (ONNX RoiAlign; docs/operators.md, "RoiAlign").
 *
 * The rois and batch indices are run-time values, so everything about a roi is computed in the
 * loop over the rois, in x's float dtype: its box (scaled, shifted by half a pixel when aligned),
 * its size (at least 1 when not aligned), the bin size and the sampling grid of each bin
 * (sampling_ratio, or ceil(bin size) per axis). For each output bin the samples of its grid are
 * visited once: a sample's four bilinear taps and weights are shared by all channels, and each
 * channel's accumulator (a LOCAL row of C values) takes the weighted sum of the taps (avg, divided
 * by the sample count at the end) or the largest weighted tap (max, the rule of ONNX's reference
 * and ONNX Runtime). A sample more than one pixel outside the image counts as a 0. */
#include <stdio.h>
#include <string.h>

#include "lower_internal.h"

/* samples per bin and axis at most (a bin wider than a million pixels has this many) */
#define RA_MAX_GRID (1 << 20)

int lw_roi_align_check(const tth_rexpr *call, char *why, size_t len)
{
    const tth_ttype *xt = lw_ty(lw_arg(call, 0));
    if (!xt || (xt->dtype != TTH_F32 && xt->dtype != TTH_F64)) {
        snprintf(why, len, "vision.roi_align: only float32 and float64 are supported");
        return 0;
    }
    if (xt->shape[0] < 1 || xt->shape[2] < 1 || xt->shape[3] < 1) {
        snprintf(why, len, "vision.roi_align: an empty image (N, H or W of 0) is not supported");
        return 0;
    }
    return 1;
}

typedef struct ra_arg {
    tth_tbuffer *x, *rois, *bi, *acc; /* acc: LOCAL [C], one bin's accumulators */
    const lw_sink *s;
    tth_dtype ft;
    int64_t N, C, H, W, PH, PW, ratio;
    double scale;
    int is_max, aligned;
    /* the roi's values (variables bound by ra_roi) and the bin's indices */
    tth_texpr *r, *boff, *y0, *x0, *bh, *bw, *gh, *gw, *cnt, *ph, *pw;
} ra_arg;

static tth_texpr *ra_f(lw_ctx *c, const ra_arg *g, double v)
{
    return lw_imm(c, g->ft, v);
}

/* for (ch = 0; ch < C; ch++) body, the variable made by ra_chan */
static tth_tvar *ra_chan(lw_ctx *c, tth_texpr **ch)
{
    tth_tvar *v = lw_var(c, "ch", TTH_I64);
    *ch = v ? lw_ref(c, v) : NULL;
    return v;
}

static tth_tstmt *ra_chan_loop(lw_ctx *c, const ra_arg *g, tth_tvar *v, tth_tstmt *body)
{
    return lw_for(c, v, lw_i(c, 0), lw_i(c, g->C), TTH_LOOP_SERIAL, body);
}

/* acc[ch] = v(acc[ch]) for every channel: the weighted taps of one sample at the flat positions
 * pos[4] of the image (NULL: a sample outside, worth 0) with the weights w[4] */
static tth_tstmt *ra_accumulate(lw_ctx *c, const ra_arg *g, tth_texpr *const *pos, tth_texpr *const *w)
{
    tth_texpr *ch;
    tth_tvar *vch = ra_chan(c, &ch);
    if (!vch)
        return NULL;
    tth_texpr *cur = tth_tir_load(c->m, g->acc, ch), *v = NULL;
    tth_texpr *base = lw_add(c, g->boff, lw_mul(c, ch, lw_i(c, g->H * g->W)));
    for (int k = 0; pos && k < 4; k++) {
        tth_texpr *t = lw_mul(c, w[k], tth_tir_load(c->m, g->x, lw_add(c, base, pos[k])));
        v = !v ? t : g->is_max ? lw_bin(c, TTH_TBIN_MAX, v, t) : lw_add(c, v, t);
    }
    if (!v)
        v = ra_f(c, g, 0);
    v = g->is_max ? lw_bin(c, TTH_TBIN_MAX, cur, v) : lw_add(c, cur, v);
    return ra_chan_loop(c, g, vch, tth_tir_store(c->m, g->acc, ch, v));
}

/* One axis of a sample inside the image (v in [-1, size]): below 0 it is 0; its low tap is
 * floor(v) and the high one the next, but from size - 1 on both are the last pixel, weight 0.
 * Binds lo, hi and l (the high tap's weight) around body. */
static tth_tstmt *ra_axis(lw_ctx *c, const ra_arg *g, tth_texpr *v, int64_t size, tth_tvar *const *lo_hi_l,
                          tth_tstmt *body)
{
    tth_tvar *vc = lw_var(c, "v", g->ft), *vi = lw_var(c, "i", TTH_I64);
    if (!vc || !vi)
        return NULL;
    tth_texpr *i = lw_ref(c, vi), *last = lw_i(c, size - 1);
    tth_texpr *edge = lw_bin(c, TTH_TBIN_GE, i, last);
    tth_texpr *frac = lw_sub(c, lw_ref(c, vc), tth_tir_cast(c->m, g->ft, i));
    body = lw_let(c, lo_hi_l[2], tth_tir_select(c->m, edge, ra_f(c, g, 0), frac), body);
    body = lw_let(c, lo_hi_l[1], tth_tir_select(c->m, edge, last, lw_add(c, i, lw_i(c, 1))), body);
    body = lw_let(c, lo_hi_l[0], tth_tir_select(c->m, edge, last, i), body);
    body = lw_let(c, vi, tth_tir_cast(c->m, TTH_I64, lw_ref(c, vc)), body);
    return lw_let(c, vc, lw_bin(c, TTH_TBIN_MAX, v, ra_f(c, g, 0)), body);
}

/* A sample at (sy, sx) inside the image: its taps (y: t[0..2], x: t[3..5]), their weights and
 * positions bound once, then every channel's accumulator */
static tth_tstmt *ra_sample(lw_ctx *c, const ra_arg *g, tth_texpr *sy, tth_texpr *sx)
{
    tth_tvar *t[6], *vw[4], *vp[4];
    for (int k = 0; k < 6; k++)
        if (!(t[k] = lw_var(c, k % 3 == 2 ? "l" : "p", k % 3 == 2 ? g->ft : TTH_I64)))
            return NULL;
    tth_texpr *W = lw_i(c, g->W), *ly = lw_ref(c, t[2]), *lx = lw_ref(c, t[5]);
    tth_texpr *hy = lw_sub(c, ra_f(c, g, 1), ly), *hx = lw_sub(c, ra_f(c, g, 1), lx);
    tth_texpr *wv[4] = {lw_mul(c, hy, hx), lw_mul(c, hy, lx), lw_mul(c, ly, hx), lw_mul(c, ly, lx)};
    tth_texpr *pv[4];
    for (int k = 0; k < 4; k++) {
        pv[k] = lw_add(c, lw_mul(c, lw_ref(c, t[k < 2 ? 0 : 1]), W), lw_ref(c, t[3 + k % 2]));
        if (!(vw[k] = lw_var(c, "w", g->ft)) || !(vp[k] = lw_var(c, "q", TTH_I64)))
            return NULL;
    }
    tth_texpr *w[4], *pos[4];
    for (int k = 0; k < 4; k++) {
        w[k] = lw_ref(c, vw[k]);
        pos[k] = lw_ref(c, vp[k]);
    }
    tth_tstmt *body = ra_accumulate(c, g, pos, w);
    for (int k = 3; k >= 0; k--)
        body = lw_let(c, vw[k], wv[k], lw_let(c, vp[k], pv[k], body));
    body = ra_axis(c, g, sx, g->W, t + 3, body);
    return ra_axis(c, g, sy, g->H, t, body);
}

/* start + p * bin + (i + 0.5) * bin / grid: the coordinate of sample i of bin p along one axis */
static tth_texpr *ra_coord(lw_ctx *c, const ra_arg *g, tth_texpr *start, tth_texpr *p, tth_texpr *bin,
                           tth_texpr *i, tth_texpr *grid)
{
    tth_texpr *off = lw_mul(c, lw_add(c, tth_tir_cast(c->m, g->ft, i), ra_f(c, g, 0.5)), bin);
    off = lw_bin(c, TTH_TBIN_DIV, off, tth_tir_cast(c->m, g->ft, grid));
    return lw_add(c, lw_add(c, start, lw_mul(c, tth_tir_cast(c->m, g->ft, p), bin)), off);
}

/* The samples of the current bin: each inside the image (NaN is not) interpolated, each outside
 * a 0 for max (nothing to add for avg) */
static tth_tstmt *ra_grid(lw_ctx *c, const ra_arg *g)
{
    tth_tvar *viy = lw_var(c, "iy", TTH_I64), *vix = lw_var(c, "ix", TTH_I64);
    tth_tvar *vsy = lw_var(c, "sy", g->ft), *vsx = lw_var(c, "sx", g->ft);
    if (!viy || !vix || !vsy || !vsx)
        return NULL;
    tth_texpr *sy = lw_ref(c, vsy), *sx = lw_ref(c, vsx), *m1 = ra_f(c, g, -1);
    tth_texpr *in_y = lw_bin(c, TTH_TBIN_AND, lw_bin(c, TTH_TBIN_GE, sy, m1),
                             lw_bin(c, TTH_TBIN_LE, sy, ra_f(c, g, (double)g->H)));
    tth_texpr *in_x = lw_bin(c, TTH_TBIN_AND, lw_bin(c, TTH_TBIN_GE, sx, m1),
                             lw_bin(c, TTH_TBIN_LE, sx, ra_f(c, g, (double)g->W)));
    tth_tstmt *outside = g->is_max ? ra_accumulate(c, g, NULL, NULL) : NULL;
    tth_tstmt *body = tth_tir_if(c->m, lw_bin(c, TTH_TBIN_AND, in_y, in_x), ra_sample(c, g, sy, sx), outside);
    body = lw_let(c, vsx, ra_coord(c, g, g->x0, g->pw, g->bw, lw_ref(c, vix), g->gw), body);
    body = lw_for(c, vix, lw_i(c, 0), g->gw, TTH_LOOP_SERIAL, body);
    body = lw_let(c, vsy, ra_coord(c, g, g->y0, g->ph, g->bh, lw_ref(c, viy), g->gh), body);
    return lw_for(c, viy, lw_i(c, 0), g->gh, TTH_LOOP_SERIAL, body);
}

/* One output bin (ph, pw) of every channel: the accumulators set, the samples, the results
 * stored (avg: the sum over the sample count; max: the largest, 0 without samples) */
static tth_tstmt *ra_bin(lw_ctx *c, const ra_arg *g)
{
    tth_texpr *ch0, *ch1;
    tth_tvar *v0 = ra_chan(c, &ch0), *v1 = ra_chan(c, &ch1);
    if (!v0 || !v1)
        return NULL;
    double init = g->is_max ? lw_dtype_lowest(g->ft) : 0;
    tth_texpr *acc = tth_tir_load(c->m, g->acc, ch1), *zero = lw_i(c, 0), *val;
    if (g->is_max)
        val = tth_tir_select(c->m, lw_bin(c, TTH_TBIN_AND, lw_bin(c, TTH_TBIN_GT, g->gh, zero),
                                          lw_bin(c, TTH_TBIN_GT, g->gw, zero)),
                             acc, ra_f(c, g, 0));
    else
        val = lw_bin(c, TTH_TBIN_DIV, acc, g->cnt);
    tth_texpr *idx[4] = {g->r, ch1, g->ph, g->pw};
    tth_tstmt *seq = NULL;
    if (lw_append(c, &seq, ra_chan_loop(c, g, v0, tth_tir_store(c->m, g->acc, ch0, ra_f(c, g, init)))) ||
        lw_append(c, &seq, ra_grid(c, g)) ||
        lw_append(c, &seq, ra_chan_loop(c, g, v1, lw_sink_store(c, g->s, 0, idx, val))))
        return NULL;
    return seq;
}

/* The sampling grid along one axis: sampling_ratio, or ceil(bin) samples (none for an empty or
 * NaN bin, at most RA_MAX_GRID) */
static tth_texpr *ra_grid_n(lw_ctx *c, const ra_arg *g, tth_texpr *bin)
{
    if (g->ratio > 0)
        return lw_i(c, g->ratio);
    tth_texpr *n = tth_tir_intrin(c->m, TTH_TINTRIN_CEIL, lw_bin(c, TTH_TBIN_MIN, bin, ra_f(c, g, RA_MAX_GRID)), NULL);
    tth_texpr *pos = lw_bin(c, TTH_TBIN_GT, bin, ra_f(c, g, 0));
    return tth_tir_cast(c->m, TTH_I64, tth_tir_select(c->m, pos, n, ra_f(c, g, 0)));
}

/* corner k of roi r, scaled and shifted: rois[r, k] * spatial_scale - (aligned ? 0.5 : 0) */
static tth_texpr *ra_corner(lw_ctx *c, const ra_arg *g, int k)
{
    tth_texpr *v = tth_tir_load(c->m, g->rois, lw_add(c, lw_mul(c, g->r, lw_i(c, 4)), lw_i(c, k)));
    return lw_sub(c, lw_mul(c, v, ra_f(c, g, g->scale)), ra_f(c, g, g->aligned ? 0.5 : 0));
}

/* the size of roi r along an axis from its corners k and k + 2 (at least 1 when not aligned) */
static tth_texpr *ra_size(lw_ctx *c, const ra_arg *g, int k, tth_texpr *start)
{
    tth_texpr *d = lw_sub(c, ra_corner(c, g, k + 2), start);
    return g->aligned ? d : lw_bin(c, TTH_TBIN_MAX, d, ra_f(c, g, 1));
}

/* The roi r: its values bound (the batch index clamped into [0, N)) around the bins' loops */
static tth_tstmt *ra_roi(lw_ctx *c, ra_arg *g, const lw_ax *ph, const lw_ax *pw)
{
    enum { B, Y0, X0, BH, BW, GH, GW, CNT, NV };
    static const char *const names[NV] = {"boff", "y0", "x0", "bh", "bw", "gh", "gw", "cnt"};
    tth_tvar *v[NV];
    for (int k = 0; k < NV; k++) {
        int is_int = k == B || k == GH || k == GW;
        if (!(v[k] = lw_var(c, names[k], is_int ? TTH_I64 : g->ft)))
            return NULL;
    }
    tth_texpr *ref[NV];
    for (int k = 0; k < NV; k++)
        ref[k] = lw_ref(c, v[k]);
    g->boff = ref[B], g->y0 = ref[Y0], g->x0 = ref[X0], g->bh = ref[BH], g->bw = ref[BW];
    g->gh = ref[GH], g->gw = ref[GW], g->cnt = ref[CNT], g->ph = ph->e, g->pw = pw->e;
    tth_texpr *b = tth_tir_cast(c->m, TTH_I64, tth_tir_load(c->m, g->bi, g->r));
    b = lw_bin(c, TTH_TBIN_MIN, lw_bin(c, TTH_TBIN_MAX, b, lw_i(c, 0)), lw_i(c, g->N - 1));
    tth_texpr *val[NV] = {
        lw_mul(c, b, lw_i(c, g->C * g->H * g->W)),
        ra_corner(c, g, 1),
        ra_corner(c, g, 0),
        lw_bin(c, TTH_TBIN_DIV, ra_size(c, g, 1, ref[Y0]), ra_f(c, g, (double)g->PH)),
        lw_bin(c, TTH_TBIN_DIV, ra_size(c, g, 0, ref[X0]), ra_f(c, g, (double)g->PW)),
        ra_grid_n(c, g, ref[BH]),
        ra_grid_n(c, g, ref[BW]),
        tth_tir_cast(c->m, g->ft, lw_bin(c, TTH_TBIN_MAX, lw_mul(c, ref[GH], ref[GW]), lw_i(c, 1))),
    };
    tth_tstmt *body = lw_ax_loop(c, ph, TTH_LOOP_SERIAL, lw_ax_loop(c, pw, TTH_LOOP_SERIAL, ra_bin(c, g)));
    for (int k = NV - 1; k >= 0; k--)
        body = lw_let(c, v[k], val[k], body);
    return body;
}

/* vision.roi_align: rois one after the other, bins row by row, all channels of a bin at once */
tth_tstmt *lw_roi_align(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    if (lw_check_call(c, call, lw_roi_align_check))
        return NULL;
    const tth_ttype *xt = lw_ty(lw_arg(call, 0)), *ot = lw_ty(call);
    ra_arg g = {.s = s, .ft = xt->dtype,
                .N = xt->shape[0], .C = xt->shape[1], .H = xt->shape[2], .W = xt->shape[3],
                .PH = ot->shape[2], .PW = ot->shape[3],
                .ratio = lw_attr_int(call, "sampling_ratio", 0),
                .scale = lw_attr_float(call, "spatial_scale", 1.0),
                .is_max = !strcmp(lw_attr_str(call, "mode", "avg"), "max"),
                .aligned = lw_attr_int(call, "aligned", 0) != 0};
    if (lw_numel(ot->shape, ot->rank) == 0)
        return tth_tir_seq(c->m, NULL, 0); /* no rois or no channels */
    if (!(g.x = lw_buf(c, lw_arg(call, 0))) || !(g.rois = lw_buf(c, lw_arg(call, 1))) ||
        !(g.bi = lw_buf(c, lw_arg(call, 2))) || !(g.acc = lw_local(c, "acc", g.ft, 1, &g.C)))
        return NULL;
    lw_ax r, ph, pw;
    if (lw_ax_make(c, &r, "r", ot->shape[0]) || lw_ax_make(c, &ph, "ph", g.PH) || lw_ax_make(c, &pw, "pw", g.PW))
        return NULL;
    g.r = r.e;
    tth_tstmt *body = lw_ax_loop(c, &r, TTH_LOOP_SERIAL, ra_roi(c, &g, &ph, &pw));
    return body ? tth_tir_allocate(c->m, g.acc, body) : NULL;
}
