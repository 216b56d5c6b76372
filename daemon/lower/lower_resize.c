/* lower_resize.c: image.resize2d (NCHW, or NCHW<b>c with each pixel's b channels one vector),
 * ONNX Resize semantics for nearest, linear and cubic.
 *
 * Shapes are static, so what every output row and column reads is computed here, in double
 * precision, by libtth's tth_resize_taps_at (the rule the constant folder uses too; coordinate
 * transformations and weights: docs/operators.md "Resize"), and stored as constant tables (CONST
 * buffers): per axis and tap, a clamped input index and, but for nearest, a weight. The loop nest
 * then only gathers and weighs, separably, n taps per axis (1 nearest, 2 linear, 4 cubic):
 *   out[n,c,y,x] = sum_ky wy[ky][y] * (sum_kx wx[kx][x] * in[n,c,iy[ky][y],ix[kx][x]])
 * (nearest: in[n,c,iy[0][y],ix[0][x]]). With tf_crop_and_resize, a per-axis table says whether
 * the source is inside the input; where it is not along either axis the output is the
 * extrapolation value. */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "lower_internal.h"

typedef struct rz_p {
    tth_resize2d_attrs a;       /* method, modes, scales: libtth's one reader */
} rz_p;

static int rz_params(const tth_rexpr *call, rz_p *p, char *why, size_t len)
{
    const char *op = tth_op_name(call->u.call.op);
    const tth_ttype *xt = lw_ty(lw_arg(call, 0)), *ot = lw_ty(call);
    memset(p, 0, sizeof *p);
    if (!xt || !ot || !(xt->rank == 4 || xt->rank == 5) || ot->rank != xt->rank) {
        snprintf(why, len, "%s: only NCHW and NCHW<b>c tensors are supported", op);
        return 0;
    }
    if (!tth_dtype_is_float(xt->dtype) && xt->dtype != TTH_I8 && xt->dtype != TTH_U8 && xt->dtype != TTH_I32) {
        snprintf(why, len, "%s: %s is not supported", op, tth_dtype_name(xt->dtype));
        return 0;
    }
    tth_diag d;
    tth_diag_clear(&d);
    if (tth_resize2d_attrs_of(call->u.call.attrs, &xt->shape[2], &p->a, &d) != 0) {
        snprintf(why, len, "%s: %s", op, d.message);
        return 0;
    }
    if (p->a.method != TTH_RESIZE_NEAREST && !tth_dtype_is_float(xt->dtype)) {
        snprintf(why, len, "%s: %s resize of %s is not supported", op,
                 p->a.method == TTH_RESIZE_LINEAR ? "linear" : "cubic", tth_dtype_name(xt->dtype));
        return 0;
    }
    return 1;
}

int lw_resize_check(const tth_rexpr *call, char *why, size_t len)
{
    rz_p p;
    return rz_params(call, &p, why, len);
}

/* a constant table as a CONST buffer */
static tth_tbuffer *rz_table(lw_ctx *c, tth_dtype t, int64_t n, const void *data)
{
    tth_tensor *ten = lw_table_new(c, t, n, data);
    return ten ? lw_packed_const(c, ten) : NULL;
}

typedef struct rz_arg {
    const lw_sink *s;
    tth_tbuffer *x;
    tth_dtype dt;
    int rank;                                       /* 4, or 5 for NCHW<b>c (the lanes innermost) */
    int ntaps;                                      /* per axis */
    tth_tbuffer *idx[2][TTH_RESIZE_MAX_TAPS];       /* [axis][tap]: input index per output index */
    tth_tbuffer *w[2][TTH_RESIZE_MAX_TAPS];         /* weights (not for nearest) */
    tth_tbuffer *inside[2];                         /* tf_crop_and_resize: 1 where the source is inside */
    double extrapolation_value;
} rz_arg;

/* sum_kx wx[kx][x] * in[n,c,y,ix[kx][x]] for one input row y */
static tth_texpr *rz_row(lw_ctx *c, const rz_arg *a, tth_texpr *const *idx, tth_texpr *y)
{
    tth_texpr *acc = NULL;
    for (int k = 0; k < a->ntaps; k++) {
        tth_texpr *at[5] = {idx[0], idx[1], y, tth_tir_load(c->m, a->idx[1][k], idx[3]), a->rank == 5 ? idx[4] : NULL};
        tth_texpr *v = lw_load_at(c, a->x, at);
        if (a->ntaps > 1)
            v = lw_mul(c, v, tth_tir_load(c->m, a->w[1][k], idx[3]));
        acc = acc ? lw_add(c, acc, v) : v;
    }
    return acc;
}

static tth_tstmt *rz_body(lw_ctx *c, tth_texpr *const *idx, void *arg)
{
    rz_arg *a = arg;
    tth_texpr *acc = NULL;
    for (int k = 0; k < a->ntaps; k++) {
        tth_texpr *v = rz_row(c, a, idx, tth_tir_load(c->m, a->idx[0][k], idx[2]));
        if (a->ntaps > 1)
            v = lw_mul(c, v, tth_tir_load(c->m, a->w[0][k], idx[2]));
        acc = acc ? lw_add(c, acc, v) : v;
    }
    if (a->inside[0]) {
        tth_texpr *in = lw_bin(c, TTH_TBIN_AND,
                               lw_bin(c, TTH_TBIN_NE, tth_tir_load(c->m, a->inside[0], idx[2]), lw_i(c, 0)),
                               lw_bin(c, TTH_TBIN_NE, tth_tir_load(c->m, a->inside[1], idx[3]), lw_i(c, 0)));
        acc = tth_tir_select(c->m, in, acc, lw_imm(c, a->dt, a->extrapolation_value));
    }
    return lw_sink_store(c, a->s, 0, idx, acc);
}

/* the tables of one axis: tth_resize_taps_at for each output index, as index, weight (in the
 * input's float dtype) and, with tf_crop_and_resize, inside tables. 0, or -1 (c failed). */
static int rz_axis_tables(lw_ctx *c, const tth_rexpr *call, const rz_p *p, int ax, rz_arg *a, int64_t **keep)
{
    int64_t in = lw_ty(lw_arg(call, 0))->shape[2 + ax], out = p->a.size[ax];
    int crop = !strcmp(p->a.coordinate_transformation_mode, "tf_crop_and_resize");
    int64_t *ix = calloc((size_t)(out * a->ntaps + out), sizeof *ix);
    double *w = calloc((size_t)(out * a->ntaps), sizeof *w);
    float *wf = calloc((size_t)(out * a->ntaps), sizeof *wf);
    int ok = ix && w && wf;
    for (int64_t o = 0; ok && o < out; o++) {
        tth_resize_taps t;
        tth_resize_taps_at(&p->a, ax, o, in, &t);
        for (int k = 0; k < a->ntaps; k++) {
            ix[k * out + o] = t.idx[k];
            w[k * out + o] = t.w[k];
            wf[k * out + o] = (float)t.w[k];
        }
        ix[a->ntaps * out + o] = t.inside;
    }
    for (int k = 0; ok && k < a->ntaps; k++) {
        ok = (a->idx[ax][k] = rz_table(c, TTH_I64, out, ix + k * out)) != NULL;
        if (ok && a->ntaps > 1)
            ok = (a->w[ax][k] = rz_table(c, a->dt, out, a->dt == TTH_F64 ? (void *)(w + k * out)
                                                                           : (void *)(wf + k * out))) != NULL;
    }
    if (ok && crop)
        ok = (a->inside[ax] = rz_table(c, TTH_I64, out, ix + a->ntaps * out)) != NULL;
    if (!ix || !w || !wf)
        lw_fail(c, TTH_ENOMEM, call, "out of memory");
    if (keep && ok) {
        *keep = ix; /* the caller's: its taps' input indices, ntaps * out */
        ix = NULL;
    }
    free(ix);
    free(w);
    free(wf);
    return ok ? 0 : -1;
}

/* ---- upscaling in two passes (docs/operators.md, "Resize") ----
 *
 * Enlarging, the one-pass nest computes every input row's horizontal sum once per output row
 * that reads it (DeepLabV3's last layer, 14x14 -> 224x224: 16 times), each of its taps a gather.
 * The two-pass form computes each input row's horizontal sums once into a buffer on the task's
 * stack, then every output row from the buffer's rows with contiguous loads. Output rows go in
 * bands whose input rows fit the buffer (LW_STACK_BUFFER_MAX); the parallel loop runs over
 * (image and channel, band) pairs. The bands are fixed here, from the tables: per band its first
 * output row, its row count, its first input row and its input row count. */

/* The bands of output rows, greedily as long as the input rows they read fit `fit` rows; 0 when
 * one output row alone needs more. Into the four arrays (out rows each at most). */
static int64_t rz_bands(const int64_t *iy, int ntaps, int64_t out, int64_t fit, int64_t *y0, int64_t *ny,
                        int64_t *lo, int64_t *nr)
{
    int64_t nb = 0;
    for (int64_t y = 0; y < out;) {
        int64_t l = INT64_MAX, h = -1, e = y;
        for (; e < out; e++) {
            int64_t l2 = l, h2 = h;
            for (int k = 0; k < ntaps; k++) {
                int64_t v = iy[k * out + e];
                l2 = v < l2 ? v : l2;
                h2 = v > h2 ? v : h2;
            }
            if (h2 - l2 + 1 > fit)
                break;
            l = l2;
            h = h2;
        }
        if (e == y)
            return 0;
        y0[nb] = y;
        ny[nb] = e - y;
        lo[nb] = l;
        nr[nb] = h - l + 1;
        nb++;
        y = e;
    }
    return nb;
}

static tth_tstmt *rz_two_pass(lw_ctx *c, const tth_rexpr *call, const rz_p *p, rz_arg *a, const int64_t *iy)
{
    const tth_ttype *xt = lw_ty(lw_arg(call, 0));
    int64_t N = xt->shape[0], C = xt->shape[1], OH = p->a.size[0], OW = p->a.size[1];
    int64_t esize = (int64_t)tth_dtype_size(a->dt), fit = LW_STACK_BUFFER_MAX / (OW * esize);
    int64_t *tab = calloc((size_t)(4 * OH), sizeof *tab);
    if (!tab)
        return lw_fail(c, TTH_ENOMEM, call, "out of memory"), NULL;
    int64_t nb = rz_bands(iy, a->ntaps, OH, fit, tab, tab + OH, tab + 2 * OH, tab + 3 * OH), maxr = 0;
    for (int64_t b = 0; b < nb; b++)
        maxr = tab[3 * OH + b] > maxr ? tab[3 * OH + b] : maxr;
    tth_tbuffer *bt[4] = {0};
    for (int i = 0; i < 4 && nb > 0; i++)
        if (!(bt[i] = rz_table(c, TTH_I64, nb, tab + i * OH))) {
            free(tab);
            return NULL;
        }
    free(tab);
    if (nb == 0)
        return NULL;
    lw_ax q, x, y;
    tth_tvar *vy = lw_var(c, "y", TTH_I64), *vlo = lw_var(c, "lo", TTH_I64), *vb = lw_var(c, "b", TTH_I64),
             *vnc = lw_var(c, "nc", TTH_I64), *vr = lw_var(c, "r", TTH_I64);
    int64_t nbuf = maxr * OW;
    tth_tbuffer *h = tth_tir_buffer(c->m, "hr", a->dt, 1, &nbuf, TTH_SCOPE_REGISTER);
    if (!vy || !vlo || !vb || !vnc || !vr || !h || lw_ax_make(c, &q, "q", N * C * nb) || lw_ax_make(c, &x, "x", OW) ||
        lw_ax_make(c, &y, "xo", OW))
        return NULL;
    tth_texpr *nc = lw_ref(c, vnc), *b = lw_ref(c, vb), *lo = lw_ref(c, vlo), *re = lw_ref(c, vr);
    tth_texpr *n = lw_bin(c, TTH_TBIN_DIV, nc, lw_i(c, C)), *ch = lw_bin(c, TTH_TBIN_MOD, nc, lw_i(c, C));
    /* pass 1: hr[r*OW + x] = sum_kx wx[kx][x] * in[n, ch, lo + r, ix[kx][x]], r < the band's input rows */
    tth_texpr *idx1[4] = {n, ch, NULL, x.e};
    tth_texpr *hsum = rz_row(c, a, idx1, lw_add(c, lo, re));
    tth_tstmt *p1 = tth_tir_store(c->m, h, lw_add(c, lw_mul(c, re, lw_i(c, OW)), x.e), hsum);
    p1 = lw_ax_loop(c, &x, TTH_LOOP_VECTORIZED, p1);
    p1 = lw_for(c, vr, lw_i(c, 0), tth_tir_load(c->m, bt[3], b), TTH_LOOP_SERIAL, p1);
    /* pass 2: out[n, ch, yy, x] = sum_ky wy[ky][yy] * hr[(iy[ky][yy] - lo)*OW + x] */
    tth_texpr *yy = lw_ref(c, vy), *acc = NULL;
    for (int k = 0; k < a->ntaps; k++) {
        tth_texpr *row = lw_sub(c, tth_tir_load(c->m, a->idx[0][k], yy), lo);
        tth_texpr *v = lw_mul(c, tth_tir_load(c->m, h, lw_add(c, lw_mul(c, row, lw_i(c, OW)), y.e)),
                              tth_tir_load(c->m, a->w[0][k], yy));
        acc = acc ? lw_add(c, acc, v) : v;
    }
    tth_texpr *idx2[4] = {n, ch, yy, y.e};
    tth_tstmt *p2 = lw_sink_store(c, a->s, 0, idx2, acc);
    p2 = lw_ax_loop(c, &y, TTH_LOOP_VECTORIZED, p2);
    p2 = lw_for(c, vy, tth_tir_load(c->m, bt[0], b), tth_tir_load(c->m, bt[1], b), TTH_LOOP_SERIAL, p2);
    tth_tstmt *both = NULL;
    if (!p1 || !p2 || lw_append(c, &both, p1) || lw_append(c, &both, p2))
        return NULL;
    both = tth_tir_allocate(c->m, h, both);
    both = lw_let(c, vlo, tth_tir_load(c->m, bt[2], b), both);
    both = lw_let(c, vnc, lw_bin(c, TTH_TBIN_DIV, q.e, lw_i(c, nb)),
                  lw_let(c, vb, lw_bin(c, TTH_TBIN_MOD, q.e, lw_i(c, nb)), both));
    return lw_ax_loop(c, &q, TTH_LOOP_PARALLEL, both);
}

tth_tstmt *lw_resize2d(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    rz_p p;
    char why[256];
    if (!rz_params(call, &p, why, sizeof why)) {
        lw_fail(c, TTH_EUNSUPPORTED, call, "%s", why);
        return NULL;
    }
    const tth_ttype *xt = lw_ty(lw_arg(call, 0)), *ot = lw_ty(call);
    rz_arg a;
    memset(&a, 0, sizeof a);
    a.s = s;
    a.dt = xt->dtype;
    a.rank = xt->rank;
    a.ntaps = p.a.method == TTH_RESIZE_CUBIC ? 4 : p.a.method == TTH_RESIZE_LINEAR ? 2 : 1;
    a.extrapolation_value = p.a.extrapolation_value;
    a.x = lw_buf(c, lw_arg(call, 0));
    if (!a.x)
        return NULL;
    int64_t *iy = NULL;
    for (int ax = 0; ax < 2; ax++)
        if (rz_axis_tables(c, call, &p, ax, &a, ax == 0 ? &iy : NULL) != 0) {
            free(iy);
            return NULL;
        }
    /* enlarging rows, a float linear or cubic resize without crop: in two passes when the bands
     * can be made (rz_bands: none when one output row's input rows do not fit the buffer) */
    if (a.rank == 4 && a.ntaps > 1 && !a.inside[0] && tth_dtype_is_float(a.dt) && p.a.size[0] > xt->shape[2] &&
        p.a.size[1] >= 2) {
        tth_tstmt *two = rz_two_pass(c, call, &p, &a, iy);
        if (two || c->diag->code != TTH_OK) {
            free(iy);
            return two;
        }
    }
    free(iy);
    return lw_nest(c, ot->shape, ot->rank, LW_PARALLEL | LW_VECTOR, rz_body, &a);
}
