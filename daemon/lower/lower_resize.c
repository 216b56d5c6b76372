/* lower_resize.c: image.resize2d (NCHW), ONNX Resize semantics for nearest, linear and cubic.
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
    if (!xt || !ot || xt->rank != 4 || ot->rank != 4) {
        snprintf(why, len, "%s: only NCHW tensors are supported", op);
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
        tth_texpr *at[4] = {idx[0], idx[1], y, tth_tir_load(c->m, a->idx[1][k], idx[3])};
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
static int rz_axis_tables(lw_ctx *c, const tth_rexpr *call, const rz_p *p, int ax, rz_arg *a)
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
    free(ix);
    free(w);
    free(wf);
    return ok ? 0 : -1;
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
    a.ntaps = p.a.method == TTH_RESIZE_CUBIC ? 4 : p.a.method == TTH_RESIZE_LINEAR ? 2 : 1;
    a.extrapolation_value = p.a.extrapolation_value;
    a.x = lw_buf(c, lw_arg(call, 0));
    if (!a.x)
        return NULL;
    for (int ax = 0; ax < 2; ax++)
        if (rz_axis_tables(c, call, &p, ax, &a) != 0)
            return NULL;
    return lw_nest(c, ot->shape, ot->rank, LW_PARALLEL | LW_VECTOR, rz_body, &a);
}
