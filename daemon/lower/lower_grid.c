/* lower_grid.c: image.grid_sample (ONNX GridSample), x [N, C, L1..Lr] sampled at the points of
 * grid [N, D1..Dr, r], r = 1 to 3 spatial axes, float32 or float64 (docs/operators.md
 * "GridSample").
 *
 * The points are data, so everything is computed at run time. One loop nest runs over
 * [N, D1..Dr]; for each point, LETs compute per axis a (grid component r-1-a: the grid lists the
 * innermost axis first):
 *   the coordinate x: the grid value unnormalized by align_corners, rounded half to even for
 *   nearest, then moved inside the image by the padding mode (border: clamped; reflection:
 *   reflected at the image's borders until inside), then kept within a few pixels of the image
 *   so that the conversion to an integer is defined whatever the grid holds;
 *   its taps floor(x) + k (nearest: x itself; cubic: k from -1 to 2), each index padded on its
 *   own (zeros: clamped, and the value 0 outside; border: clamped; reflection: reflected), times
 *   the axis's stride in x;
 *   the weights: 1 - f and f (linear), Keys' cubic with A = -0.75 (cubic), f the fraction.
 * An inner loop over the channels then sums, axis by axis from the outermost, weight times the
 * inner axes' sum at each tap: the ONNX definition's separable order. */
#include <stdio.h>
#include <string.h>

#include "lower_internal.h"

#define GS_MAX_R 3
#define GS_MAX_TAPS 4
#define GS_MAX_LETS (GS_MAX_R * (7 + 2 * GS_MAX_TAPS)) /* per axis: 5 coordinate steps, i0, f, taps */

enum { GS_NEAREST, GS_LINEAR, GS_CUBIC };
enum { GS_ZEROS, GS_BORDER, GS_REFLECTION };

typedef struct gs_p {
    int r, method, pad, ac, ntaps, first; /* first: the first tap's offset from floor(x) */
} gs_p;

static int gs_pick(const char *v, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (v && !strcmp(v, names[i]))
            return i;
    return -1;
}

static int gs_params(const tth_rexpr *call, gs_p *p, char *why, size_t len)
{
    static const char *const methods[] = {"nearest", "linear", "cubic"};
    static const char *const pads[] = {"zeros", "border", "reflection"};
    const tth_ttype *xt = lw_ty(lw_arg(call, 0)), *gt = lw_ty(lw_arg(call, 1)), *ot = lw_ty(call);
    memset(p, 0, sizeof *p);
    if (!xt || !gt || !ot || xt->rank < 3 || xt->rank > 2 + GS_MAX_R) {
        snprintf(why, len, "image.grid_sample: only 1 to %d spatial axes are supported", GS_MAX_R);
        return 0;
    }
    if ((xt->dtype != TTH_F32 && xt->dtype != TTH_F64) || (gt->dtype != TTH_F32 && gt->dtype != TTH_F64)) {
        snprintf(why, len, "image.grid_sample: x %s and grid %s (only float32 and float64)", tth_dtype_name(xt->dtype),
                 tth_dtype_name(gt->dtype));
        return 0;
    }
    p->r = xt->rank - 2;
    p->method = gs_pick(lw_attr_str(call, "method", "linear"), methods, 3);
    p->pad = gs_pick(lw_attr_str(call, "padding_mode", "zeros"), pads, 3);
    p->ac = lw_attr_int(call, "align_corners", 0) != 0;
    if (p->method < 0 || p->pad < 0) {
        snprintf(why, len, "image.grid_sample: unknown method or padding_mode");
        return 0;
    }
    for (int a = 0; a < p->r; a++)
        if (xt->shape[2 + a] < 1 && lw_numel(ot->shape, ot->rank) > 0) {
            snprintf(why, len, "image.grid_sample: x has an empty spatial axis");
            return 0;
        }
    p->ntaps = p->method == GS_CUBIC ? 4 : p->method == GS_LINEAR ? 2 : 1;
    p->first = p->method == GS_CUBIC ? -1 : 0;
    return 1;
}

int lw_grid_sample_check(const tth_rexpr *call, char *why, size_t len)
{
    gs_p p;
    return gs_params(call, &p, why, len);
}

typedef struct gs_arg {
    gs_p p;
    const lw_sink *s;
    tth_tbuffer *x, *g;
    const tth_ttype *xt, *gt;
    tth_dtype G, T;                          /* the grid's dtype (coordinates), x's (weights, sums) */
    tth_tvar *i0[GS_MAX_R];                  /* floor of the coordinate */
    tth_tvar *off[GS_MAX_R][GS_MAX_TAPS];    /* padded tap index times the axis's stride */
    tth_tvar *w[GS_MAX_R][GS_MAX_TAPS];      /* tap weights (not for nearest) */
    tth_tvar *lv[GS_MAX_LETS];               /* the LETs of one point, in order */
    tth_texpr *le[GS_MAX_LETS];
    int nlet;
} gs_arg;

/* v bound to e for the rest of the point's body (v or e NULL on OOM: caught when the LETs are
 * built) */
static tth_tvar *gs_bind(lw_ctx *c, gs_arg *g, const char *name, tth_dtype t, tth_texpr *e)
{
    if (g->nlet == GS_MAX_LETS)
        return NULL;
    tth_tvar *v = lw_var(c, name, t);
    g->lv[g->nlet] = v;
    g->le[g->nlet++] = e;
    return v;
}

/* cond ? a : b */
static tth_texpr *gs_sel(lw_ctx *c, tth_texpr *cond, tth_texpr *a, tth_texpr *b)
{
    return tth_tir_select(c->m, cond, a, b);
}

/* x (bound) reflected at lo and hi until inside, in float64 (hi > lo): with
 * t = (x - lo) mod 2(hi - lo) in [0, 2(hi - lo)), lo + min(t, 2(hi - lo) - t) */
static tth_texpr *gs_reflect_coord(lw_ctx *c, gs_arg *g, tth_texpr *x, double lo, double hi)
{
    tth_dtype D = TTH_F64;
    double period = 2 * (hi - lo);
    tth_texpr *m = tth_tir_intrin(c->m, TTH_TINTRIN_FMOD, lw_sub(c, lw_cast(c, D, x), lw_imm(c, D, lo)),
                                  lw_imm(c, D, period));
    tth_texpr *t = lw_ref(c, gs_bind(c, g, "gm", D, m));
    t = lw_ref(c, gs_bind(c, g, "gm", D, gs_sel(c, lw_bin(c, TTH_TBIN_LT, t, lw_imm(c, D, 0)),
                                                   lw_add(c, t, lw_imm(c, D, period)), t)));
    return lw_add(c, lw_imm(c, D, lo), lw_bin(c, TTH_TBIN_MIN, t, lw_sub(c, lw_imm(c, D, period), t)));
}

/* the coordinate of axis a (length L) from the grid value v, unnormalized, rounded (nearest),
 * padded and kept within [-4, L + 3] (NaN becomes -4), each step bound */
static tth_texpr *gs_coord(lw_ctx *c, gs_arg *g, tth_texpr *v, int64_t L)
{
    tth_dtype G = g->G;
    double lo = g->p.ac ? 0 : -0.5, hi = g->p.ac ? (double)L - 1 : (double)L - 0.5;
    tth_texpr *one = lw_imm(c, G, 1), *two = lw_imm(c, G, 2), *x;
    if (g->p.ac)
        x = lw_mul(c, lw_bin(c, TTH_TBIN_DIV, lw_add(c, v, one), two), lw_imm(c, G, (double)(L - 1)));
    else
        x = lw_bin(c, TTH_TBIN_DIV, lw_sub(c, lw_mul(c, lw_add(c, v, one), lw_imm(c, G, (double)L)), one), two);
    if (g->p.method == GS_NEAREST)
        x = tth_tir_intrin(c->m, TTH_TINTRIN_ROUND_EVEN, x, NULL);
    x = lw_ref(c, gs_bind(c, g, "gx", G, x));
    tth_texpr *below = lw_bin(c, TTH_TBIN_LT, x, lw_imm(c, G, lo));
    tth_texpr *above = lw_bin(c, TTH_TBIN_GT, x, lw_imm(c, G, hi));
    if (g->p.pad == GS_BORDER)
        x = gs_sel(c, below, lw_imm(c, G, 0), gs_sel(c, above, lw_imm(c, G, (double)(L - 1)), x));
    else if (g->p.pad == GS_REFLECTION)
        x = gs_sel(c, lw_bin(c, TTH_TBIN_OR, below, above),
                   hi > lo ? lw_cast(c, G, gs_reflect_coord(c, g, x, lo, hi)) : lw_imm(c, G, lo), x);
    if (g->p.pad != GS_ZEROS)
        x = lw_ref(c, gs_bind(c, g, "gx", G, x));
    tth_texpr *smin = lw_imm(c, G, -4), *smax = lw_imm(c, G, (double)L + 3);
    return gs_sel(c, lw_bin(c, TTH_TBIN_GE, x, smin), gs_sel(c, lw_bin(c, TTH_TBIN_LE, x, smax), x, smax), smin);
}

/* tap index j (int64) of an axis of length L padded into [0, L): clamped (zeros, border) or
 * reflected (period 2L at the half-pixel borders, 2(L - 1) at the pixel centres with
 * align_corners; a single pixel is index 0) */
static tth_texpr *gs_pad_index(lw_ctx *c, const gs_arg *g, tth_texpr *j, int64_t L)
{
    if (g->p.pad != GS_REFLECTION)
        return lw_bin(c, TTH_TBIN_MIN, lw_bin(c, TTH_TBIN_MAX, j, lw_i(c, 0)), lw_i(c, L - 1));
    if (L == 1)
        return lw_i(c, 0);
    int64_t period = g->p.ac ? 2 * (L - 1) : 2 * L;
    tth_texpr *m = lw_bin(c, TTH_TBIN_FLOORMOD, j, lw_i(c, period));
    return gs_sel(c, lw_bin(c, TTH_TBIN_LT, m, lw_i(c, L)), m, lw_sub(c, lw_i(c, period - !g->p.ac), m));
}

/* the weight of tap k at fraction f: 1 - f, f (linear); Keys' cubic with A = -0.75, written as
 * ONNX's definition writes it (distances f + 1, f, 1 - f, 2 - f) */
static tth_texpr *gs_weight(lw_ctx *c, const gs_arg *g, tth_texpr *f, int k)
{
    tth_dtype T = g->T;
    const double A = -0.75;
    if (g->p.method == GS_LINEAR)
        return k == 0 ? lw_sub(c, lw_imm(c, T, 1), f) : f;
    if (k == 0 || k == 3) {
        tth_texpr *d = k == 0 ? lw_add(c, f, lw_imm(c, T, 1)) : lw_sub(c, lw_imm(c, T, 2), f);
        tth_texpr *e = lw_sub(c, lw_mul(c, lw_imm(c, T, A), d), lw_imm(c, T, 5 * A));
        e = lw_add(c, lw_mul(c, e, d), lw_imm(c, T, 8 * A));
        return lw_sub(c, lw_mul(c, e, d), lw_imm(c, T, 4 * A));
    }
    tth_texpr *d = k == 1 ? f : lw_sub(c, lw_imm(c, T, 1), f);
    tth_texpr *e = lw_sub(c, lw_mul(c, lw_imm(c, T, A + 2), d), lw_imm(c, T, A + 3));
    return lw_add(c, lw_mul(c, lw_mul(c, e, d), d), lw_imm(c, T, 1));
}

/* the LETs of axis a at grid point idx ([n, o1..or]) */
static void gs_axis(lw_ctx *c, gs_arg *g, tth_texpr *const *idx, int a, int64_t stride)
{
    int r = g->p.r;
    int64_t L = g->xt->shape[2 + a];
    tth_texpr *gi[GS_MAX_R + 2];
    memcpy(gi, idx, (size_t)(r + 1) * sizeof *gi);
    gi[r + 1] = lw_i(c, r - 1 - a);
    tth_tvar *xv = gs_bind(c, g, "gx", g->G, gs_coord(c, g, lw_load_at(c, g->g, gi), L));
    tth_texpr *x = lw_ref(c, xv), *fl = x;
    if (g->p.method != GS_NEAREST)
        fl = tth_tir_intrin(c->m, TTH_TINTRIN_FLOOR, x, NULL);
    g->i0[a] = gs_bind(c, g, "gi", TTH_I64, lw_cast(c, TTH_I64, fl));
    tth_texpr *f = NULL;
    if (g->p.method != GS_NEAREST)
        f = lw_ref(c, gs_bind(c, g, "gf", g->T, lw_cast(c, g->T, lw_sub(c, x, fl))));
    for (int k = 0; k < g->p.ntaps; k++) {
        tth_texpr *j = lw_add(c, lw_ref(c, g->i0[a]), lw_i(c, k + g->p.first));
        g->off[a][k] = gs_bind(c, g, "go", TTH_I64, lw_mul(c, gs_pad_index(c, g, j, L), lw_i(c, stride)));
        if (f)
            g->w[a][k] = gs_bind(c, g, "gw", g->T, gs_weight(c, g, f, k));
    }
}

/* sum over the taps of axis a (and the axes inside it) at x's flat offset base */
static tth_texpr *gs_sum(lw_ctx *c, const gs_arg *g, int a, tth_texpr *base)
{
    if (a == g->p.r)
        return tth_tir_load(c->m, g->x, base);
    tth_texpr *acc = NULL;
    for (int k = 0; k < g->p.ntaps; k++) {
        tth_texpr *v = gs_sum(c, g, a + 1, lw_add(c, base, lw_ref(c, g->off[a][k])));
        if (g->p.pad == GS_ZEROS) {
            tth_texpr *j = lw_add(c, lw_ref(c, g->i0[a]), lw_i(c, k + g->p.first));
            tth_texpr *in = lw_bin(c, TTH_TBIN_AND, lw_bin(c, TTH_TBIN_GE, j, lw_i(c, 0)),
                                   lw_bin(c, TTH_TBIN_LT, j, lw_i(c, g->xt->shape[2 + a])));
            v = gs_sel(c, in, v, lw_imm(c, g->T, 0));
        }
        if (g->p.method != GS_NEAREST)
            v = lw_mul(c, lw_ref(c, g->w[a][k]), v);
        acc = acc ? lw_add(c, acc, v) : v;
    }
    return acc;
}

/* one grid point idx = [n, o1..or]: its LETs around the loop over the channels */
static tth_tstmt *gs_point(lw_ctx *c, tth_texpr *const *idx, void *arg)
{
    gs_arg *g = arg;
    int r = g->p.r;
    int64_t stride = 1, C = g->xt->shape[1], S = lw_numel(&g->xt->shape[2], r);
    g->nlet = 0;
    for (int a = r - 1; a >= 0; a--) {
        gs_axis(c, g, idx, a, stride);
        stride *= g->xt->shape[2 + a];
    }
    lw_ax ch;
    if (lw_ax_make(c, &ch, "gc", C))
        return NULL;
    tth_texpr *oi[GS_MAX_R + 2] = {idx[0], ch.e};
    for (int a = 0; a < r; a++)
        oi[2 + a] = idx[1 + a];
    tth_texpr *base = lw_mul(c, lw_add(c, lw_mul(c, idx[0], lw_i(c, C)), ch.e), lw_i(c, S));
    tth_tstmt *body = lw_ax_loop(c, &ch, TTH_LOOP_SERIAL, lw_sink_store(c, g->s, 0, oi, gs_sum(c, g, 0, base)));
    for (int i = g->nlet - 1; i >= 0 && body; i--)
        body = g->lv[i] ? lw_let(c, g->lv[i], g->le[i], body) : NULL;
    if (!body && c->diag && c->diag->code == TTH_OK)
        lw_fail(c, TTH_ENOMEM, NULL, "out of memory");
    return body;
}

tth_tstmt *lw_grid_sample(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    gs_arg g;
    char why[128];
    memset(&g, 0, sizeof g);
    if (!gs_params(call, &g.p, why, sizeof why)) {
        lw_fail(c, TTH_EUNSUPPORTED, call, "%s", why);
        return NULL;
    }
    g.s = s;
    g.xt = lw_ty(lw_arg(call, 0));
    g.gt = lw_ty(lw_arg(call, 1));
    g.G = g.gt->dtype;
    g.T = g.xt->dtype;
    const tth_ttype *ot = lw_ty(call);
    if (lw_numel(ot->shape, ot->rank) == 0)
        return tth_tir_seq(c->m, NULL, 0); /* nothing to sample */
    if (!(g.x = lw_buf(c, lw_arg(call, 0))) || !(g.g = lw_buf(c, lw_arg(call, 1))))
        return NULL;
    return lw_nest(c, g.gt->shape, g.gt->rank - 1, LW_PARALLEL, gs_point, &g);
}
