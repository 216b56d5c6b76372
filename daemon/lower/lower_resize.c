/* lower_resize.c: image.resize2d (NCHW), ONNX Resize semantics for nearest and linear.
 *
 * Shapes are static, so the source coordinate of every output row and column is computed here,
 * in double precision, and stored as constant tables (CONST buffers): for nearest one index per
 * row/column, for linear two clamped indices and two weights. The loop nest then only gathers:
 *   nearest: out[n,c,y,x] = in[n,c,ny[y],nx[x]]
 *   linear:  out = (in[y0,x0]*wx0 + in[y0,x1]*wx1)*wy0 + (in[y1,x0]*wx0 + in[y1,x1]*wx1)*wy1
 * Coordinate transformation (x_out → x_in): tth_resize_source (libtth, shared with the constant
 * folder), with the op's "scale" attribute (a model's scale, e.g. 0.6 for 5 → 3) or out/in:
 *   half_pixel: (x+0.5)/scale - 0.5        asymmetric: x/scale
 *   pytorch_half_pixel: as half_pixel, or -0.5 when the output length is 1
 *   align_corners: x*(in-1)/(out-1), or 0 when the output length is 1
 * Nearest rounding: round_prefer_floor (ties down), round_prefer_ceil (ties up), floor, ceil;
 * linear: floor and floor+1 weighted by the fraction. Indices outside the input are clamped to
 * the edge (ONNX pads with the edge value). */
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
    if (p->a.linear && !tth_dtype_is_float(xt->dtype)) {
        snprintf(why, len, "%s: linear resize of %s is not supported", op, tth_dtype_name(xt->dtype));
        return 0;
    }
    return 1;
}

int lw_resize_check(const tth_rexpr *call, char *why, size_t len)
{
    rz_p p;
    return rz_params(call, &p, why, len);
}

static double rz_coord(const rz_p *p, int ax, double x, int64_t in, int64_t out)
{
    return tth_resize_source(p->a.coordinate_transformation_mode, x, in, out, p->a.scale[ax]);
}

static int64_t rz_clamp(int64_t i, int64_t n)
{
    return i < 0 ? 0 : i >= n ? n - 1 : i;
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
    int linear;
    tth_tbuffer *i0[2], *i1[2], *w0[2], *w1[2];
} rz_arg;

static tth_tstmt *rz_body(lw_ctx *c, tth_texpr *const *idx, void *arg)
{
    rz_arg *a = arg;
    tth_texpr *y0 = tth_tir_load(c->m, a->i0[0], idx[2]), *x0 = tth_tir_load(c->m, a->i0[1], idx[3]);
    if (!a->linear) {
        tth_texpr *in[4] = {idx[0], idx[1], y0, x0};
        return lw_sink_store(c, a->s, 0, idx, lw_load_at(c, a->x, in));
    }
    tth_texpr *y1 = tth_tir_load(c->m, a->i1[0], idx[2]), *x1 = tth_tir_load(c->m, a->i1[1], idx[3]);
    tth_texpr *wy0 = tth_tir_load(c->m, a->w0[0], idx[2]), *wy1 = tth_tir_load(c->m, a->w1[0], idx[2]);
    tth_texpr *wx0 = tth_tir_load(c->m, a->w0[1], idx[3]), *wx1 = tth_tir_load(c->m, a->w1[1], idx[3]);
    tth_texpr *i00[4] = {idx[0], idx[1], y0, x0}, *i01[4] = {idx[0], idx[1], y0, x1};
    tth_texpr *i10[4] = {idx[0], idx[1], y1, x0}, *i11[4] = {idx[0], idx[1], y1, x1};
    tth_texpr *top = lw_add(c, lw_mul(c, lw_load_at(c, a->x, i00), wx0), lw_mul(c, lw_load_at(c, a->x, i01), wx1));
    tth_texpr *bot = lw_add(c, lw_mul(c, lw_load_at(c, a->x, i10), wx0), lw_mul(c, lw_load_at(c, a->x, i11), wx1));
    return lw_sink_store(c, a->s, 0, idx, lw_add(c, lw_mul(c, top, wy0), lw_mul(c, bot, wy1)));
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
    a.linear = p.a.linear;
    a.x = lw_buf(c, lw_arg(call, 0));
    if (!a.x)
        return NULL;
    for (int ax = 0; ax < 2; ax++) {
        int64_t in = xt->shape[2 + ax], out = ot->shape[2 + ax];
        int64_t *i0 = calloc((size_t)out + 1, sizeof *i0), *i1 = calloc((size_t)out + 1, sizeof *i1);
        double *w0 = calloc((size_t)out + 1, sizeof *w0), *w1 = calloc((size_t)out + 1, sizeof *w1);
        float *f0 = calloc((size_t)out + 1, sizeof *f0), *f1 = calloc((size_t)out + 1, sizeof *f1);
        int ok = i0 && i1 && w0 && w1 && f0 && f1;
        for (int64_t o = 0; ok && o < out; o++) {
            double x = rz_coord(&p, ax, (double)o, in, out);
            if (!p.a.linear) {
                i0[o] = tth_resize_nearest(p.a.nearest_mode, x, in);
            } else {
                double f = floor(x);
                double r = x - f;
                i0[o] = rz_clamp((int64_t)f, in);
                i1[o] = rz_clamp((int64_t)f + 1, in);
                w0[o] = 1.0 - r;
                w1[o] = r;
                f0[o] = (float)w0[o];
                f1[o] = (float)w1[o];
            }
        }
        if (ok) {
            a.i0[ax] = rz_table(c, TTH_I64, out, i0);
            if (p.a.linear) {
                a.i1[ax] = rz_table(c, TTH_I64, out, i1);
                int dbl = xt->dtype == TTH_F64;
                a.w0[ax] = rz_table(c, xt->dtype, out, dbl ? (void *)w0 : (void *)f0);
                a.w1[ax] = rz_table(c, xt->dtype, out, dbl ? (void *)w1 : (void *)f1);
            }
        } else {
            lw_fail(c, TTH_ENOMEM, call, "out of memory");
        }
        free(i0);
        free(i1);
        free(w0);
        free(w1);
        free(f0);
        free(f1);
        if (!ok || !a.i0[ax] || (p.a.linear && (!a.i1[ax] || !a.w0[ax] || !a.w1[ax])))
            return NULL;
    }
    return lw_nest(c, ot->shape, ot->rank, LW_PARALLEL | LW_VECTOR, rz_body, &a);
}
