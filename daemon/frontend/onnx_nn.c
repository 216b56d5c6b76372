/* onnx_nn.c: the neural-network operators: convolutions, pools, normalizations, matrix products, softmax, resize and sampling, recurrent layers.
 * One function per operator, and the family's rows of the operator table: each row names the
 * opset range it imports (docs/operators.md, "The operator table"). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_ops.h"

static int afloats(tth_onnx_ctx *c, const char *name, double *out, int max)
{
    const Onnx__AttributeProto *a = attr(c, name);
    if (!a || (!a->n_floats && !(a->has_type && a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS)))
        return -1;
    if (a->n_floats > (size_t)max) {
        tth__onnx_fail(c, TTH_EUNSUPPORTED, "attribute '%s' has %zu values (at most %d)", name, a->n_floats, max);
        return -2;
    }
    for (size_t i = 0; i < a->n_floats; i++)
        out[i] = a->floats[i];
    return (int)a->n_floats;
}

/* Det: the determinant of each matrix over the last two axes (relay det). */
static int op_det(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    CHECK(out[0] = call1(c, TTH_OP_DET, in[0], NULL));
    return 0;
}

/* Dropout (inference): identity; the mask output is all true. Training mode is unsupported. */
static int op_dropout(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    if (nin > 2 && in[2]) {
        double tm;
        if (vscalar(c, in[2], "training_mode", &tm))
            return c->diag->code;
        double ratio = 0.5;
        if (tm != 0 && nin > 1 && in[1] && vscalar(c, in[1], "ratio", &ratio))
            return c->diag->code;
        if (tm != 0 && ratio != 0) /* a ratio of 0 keeps everything in training too */
            return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: Dropout in training mode "
                                  "(ratio %g draws random numbers)", ratio);
    }
    out[0] = in[0];
    if (nout > 1) {
        tth_ttype ty = *tt(in[0]);
        ty.dtype = TTH_BOOL;
        if (tth_ttype_numel(&ty) > TTH_IMPORT_MAX_ELEMS)
            return tth__onnx_fail(c, TTH_ELIMIT, "Dropout mask too large");
        tth_tensor *t = tth_tensor_new(&ty, NULL);
        if (t)
            memset(t->data, 1, t->nbytes);
        CHECK(out[1] = k_tensor(c, t));
    }
    return 0;
}

/* ---- 3-D convolution and pooling, as 2-D operators over depth slices (docs/operators.md) ---- */

typedef struct depth3 {
    int64_t k, s, d, pb, pe; /* the depth axis: kernel, stride, dilation, pads */
    int64_t in, out;
} depth3;

/* The depth axis' attributes of a rank-5 op, and the node's attributes with the depth entry
 * dropped from kernel_shape, strides, dilations and pads, for the 2-D op over each slice. */
static int depth_attrs(tth_onnx_ctx *c, const int64_t *in_dhw, int64_t kd_default, depth3 *dp, int64_t *hw_k,
                       int64_t *hw_s, int64_t *hw_d, int64_t *hw_pads)
{
    int64_t v[8];
    int n;
    dp->k = kd_default;
    dp->s = dp->d = 1;
    dp->pb = dp->pe = 0;
    hw_s[0] = hw_s[1] = hw_d[0] = hw_d[1] = 1;
    hw_pads[0] = hw_pads[1] = hw_pads[2] = hw_pads[3] = 0;
    if ((n = aints(c, "kernel_shape", v, 8)) == 3) {
        dp->k = v[0];
        hw_k[0] = v[1];
        hw_k[1] = v[2];
    } else if (n >= 0) {
        return tth__onnx_fail(c, TTH_EMODEL, "kernel_shape has %d values for 3 spatial dims", n);
    }
    if ((n = aints(c, "strides", v, 8)) == 3) {
        dp->s = v[0];
        hw_s[0] = v[1];
        hw_s[1] = v[2];
    }
    if ((n = aints(c, "dilations", v, 8)) == 3) {
        dp->d = v[0];
        hw_d[0] = v[1];
        hw_d[1] = v[2];
    }
    if ((n = aints(c, "pads", v, 8)) == 6) {
        dp->pb = v[0];
        dp->pe = v[3];
        hw_pads[0] = v[1];
        hw_pads[1] = v[2];
        hw_pads[2] = v[4];
        hw_pads[3] = v[5];
    }
    const char *ap = as(c, "auto_pad", "NOTSET");
    if (strcmp(ap, "NOTSET") && strcmp(ap, "VALID"))
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: auto_pad '%s' in 3-D", ap);
    if (!strcmp(ap, "VALID"))
        dp->pb = dp->pe = hw_pads[0] = hw_pads[1] = hw_pads[2] = hw_pads[3] = 0;
    if (ai(c, "ceil_mode", 0))
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: ceil_mode in 3-D pooling");
    const int64_t W = TTH_IMPORT_MAX_WINDOW;
    int64_t all[] = {dp->k, dp->s, dp->d, hw_k[0], hw_k[1], hw_s[0], hw_s[1], hw_d[0], hw_d[1]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i] < 1 || all[i] > W)
            return tth__onnx_fail(c, TTH_EMODEL, "kernel, strides or dilations out of range (1 to %lld)", (long long)W);
    int64_t pads[] = {dp->pb, dp->pe, hw_pads[0], hw_pads[1], hw_pads[2], hw_pads[3]};
    for (size_t i = 0; i < sizeof pads / sizeof pads[0]; i++)
        if (pads[i] < 0 || pads[i] > W)
            return tth__onnx_fail(c, TTH_EMODEL, "pads out of range (0 to %lld)", (long long)W);
    dp->in = in_dhw[0];
    dp->out = (dp->in + dp->pb + dp->pe - dp->d * (dp->k - 1) - 1) / dp->s + 1;
    if (dp->out < 1 || dp->out * dp->k > 4096)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "3-D window over depth %lld (kernel %lld, stride %lld): more than "
                              "4096 slice operations or out of range", (long long)dp->in, (long long)dp->k,
                              (long long)dp->s);
    return 0;
}

/* x [N, C, D, H, W] at depth z as [N, C, H, W] */
static tth_rexpr *depth_slice(tth_onnx_ctx *c, tth_rexpr *x, int64_t z)
{
    const int64_t *sh = tt(x)->shape;
    int64_t s4[4] = {sh[0], sh[1], sh[3], sh[4]};
    return reshape(c, slice_axis(c, x, 2, z, z + 1), s4, 4);
}

/* the [N, C, H, W] results of each output depth stacked into [N, C, OD, H, W] */
static tth_rexpr *depth_stack(tth_onnx_ctx *c, tth_rexpr **ys, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const int64_t *sh = tt(ys[i])->shape;
        int64_t s5[5] = {sh[0], sh[1], 1, sh[2], sh[3]};
        if (!(ys[i] = reshape(c, ys[i], s5, 5)))
            return NULL;
    }
    return n == 1 ? ys[0] : call(c, TTH_OP_CONCATENATE, ys, (size_t)n, json_pack("{s:i}", "axis", 2));
}

/* A 3-D op as 2-D ones: for each output depth, the 2-D results of the kernel's depth taps that
 * land inside the input (tap), folded with `combine`, then `finish` (may be NULL). */
typedef struct depth_op {
    const char *what; /* for the error when an output depth reads only padding */
    tth_op combine;
    tth_rexpr *(*tap)(tth_onnx_ctx *c, const struct depth_op *op, int64_t id, int64_t z);
    tth_rexpr *(*finish)(tth_onnx_ctx *c, const struct depth_op *op, tth_rexpr *acc, int64_t taps);
    tth_rexpr **in;
    size_t nin;
    json_t *at;       /* the 2-D op's attributes */
    tth_op op2d;
    int64_t w4[4];    /* conv: a weight slice's 2-D shape */
    int64_t k;        /* pooling: the depth kernel, for count_include_pad */
    int incl;
} depth_op;

static int depth_fold(tth_onnx_ctx *c, const depth3 *dp, const depth_op *op, tth_rexpr **out)
{
    tth_rexpr **ys = calloc((size_t)dp->out, sizeof *ys);
    if (!ys)
        return tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
    int rc = 0;
    for (int64_t od = 0; od < dp->out && !rc; od++) {
        tth_rexpr *acc = NULL;
        int64_t taps = 0;
        for (int64_t z = 0; z < dp->k && !rc; z++) {
            int64_t id = od * dp->s + z * dp->d - dp->pb;
            if (id < 0 || id >= dp->in)
                continue;
            tth_rexpr *y = op->tap(c, op, id, z);
            acc = !y ? NULL : acc ? call2(c, op->combine, acc, y, NULL) : y;
            taps++;
            if (!acc)
                rc = c->diag->code ? c->diag->code : TTH_EINTERNAL;
        }
        if (!rc && !acc)
            rc = tth__onnx_fail(c, TTH_EUNSUPPORTED, "%s whose output depth %lld reads only padding", op->what,
                                (long long)od);
        if (!rc && op->finish && !(acc = op->finish(c, op, acc, taps)))
            rc = c->diag->code ? c->diag->code : TTH_EINTERNAL;
        ys[od] = acc;
    }
    if (!rc && !(out[0] = depth_stack(c, ys, dp->out)))
        rc = c->diag->code ? c->diag->code : TTH_EINTERNAL;
    free(ys);
    return rc;
}

/* conv: input slice id convolved with weight slice z */
static tth_rexpr *conv3d_tap(tth_onnx_ctx *c, const depth_op *op, int64_t id, int64_t z)
{
    tth_rexpr *args[2] = {depth_slice(c, op->in[0], id), reshape(c, slice_axis(c, op->in[1], 2, z, z + 1), op->w4, 4)};
    return args[0] && args[1] ? call(c, TTH_OP_CONV2D, args, 2, json_deep_copy(op->at)) : NULL;
}

/* conv: plus the bias, when there is one */
static tth_rexpr *conv3d_bias(tth_onnx_ctx *c, const depth_op *op, tth_rexpr *acc, int64_t taps)
{
    (void)taps;
    if (op->nin < 3 || !op->in[2])
        return acc;
    int64_t b4[4] = {1, op->w4[0], 1, 1};
    tth_rexpr *b = reshape(c, op->in[2], b4, 4);
    return b ? call2(c, TTH_OP_ADD, acc, b, NULL) : NULL;
}

/* pooling: the 2-D pooling of input slice id */
static tth_rexpr *pool3d_tap(tth_onnx_ctx *c, const depth_op *op, int64_t id, int64_t z)
{
    (void)z;
    tth_rexpr *sl = depth_slice(c, op->in[0], id);
    return sl ? call1(c, op->op2d, sl, json_deep_copy(op->at)) : NULL;
}

/* average pooling: the sum over depth divided by the taps counted (or the whole kernel) */
static tth_rexpr *pool3d_mean(tth_onnx_ctx *c, const depth_op *op, tth_rexpr *acc, int64_t taps)
{
    tth_rexpr *k = k_scalar(c, tt(acc)->dtype, (double)(op->incl ? op->k : taps));
    return k ? call2(c, TTH_OP_DIVIDE, acc, k, NULL) : NULL;
}

/* Conv over [N, C, D, H, W]: each output depth is the sum over the kernel's depth taps that land
 * inside the input of a 2-D convolution of that input slice with that weight slice. */
static int conv3d(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out)
{
    const int64_t *xs = tt(in[0])->shape, *ws = tt(in[1])->shape;
    depth3 dp;
    int64_t hk[2] = {ws[3], ws[4]}, hs[2], hd[2], hp[4];
    if (depth_attrs(c, xs + 2, ws[2], &dp, hk, hs, hd, hp))
        return c->diag->code;
    depth_op op = {.what = "3-D convolution", .combine = TTH_OP_ADD, .tap = conv3d_tap, .finish = conv3d_bias,
                   .in = in, .nin = nin, .w4 = {ws[0], ws[1], ws[3], ws[4]}};
    op.at = json_pack("{s:o,s:o,s:o,s:I}", "strides", tth__json_ints(hs, 2), "padding", tth__json_ints(hp, 4),
                      "dilation", tth__json_ints(hd, 2), "groups", (json_int_t)ai(c, "group", 1));
    if (!op.at)
        return tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
    int rc = depth_fold(c, &dp, &op, out);
    json_decref(op.at);
    return rc;
}

/* Max/average pooling over [N, C, D, H, W]: per output depth, the max (or the sum divided by the
 * taps counted) over the depth window of the 2-D pooling of each input slice. */
static int pool3d(tth_onnx_ctx *c, tth_rexpr **in, tth_rexpr **out, int is_max)
{
    const int64_t *xs = tt(in[0])->shape;
    depth3 dp;
    int64_t hk[2] = {1, 1}, hs[2], hd[2], hp[4];
    if (depth_attrs(c, xs + 2, 1, &dp, hk, hs, hd, hp))
        return c->diag->code;
    depth_op op = {.what = "3-D pooling", .combine = is_max ? TTH_OP_MAXIMUM : TTH_OP_ADD, .tap = pool3d_tap,
                   .finish = is_max ? NULL : pool3d_mean, .in = in,
                   .op2d = is_max ? TTH_OP_MAX_POOL2D : TTH_OP_AVG_POOL2D, .k = dp.k,
                   .incl = (int)ai(c, "count_include_pad", 0)};
    op.at = json_pack("{s:o,s:o,s:o,s:o,s:b}", "pool_size", tth__json_ints(hk, 2), "strides", tth__json_ints(hs, 2),
                      "padding", tth__json_ints(hp, 4), "dilation", tth__json_ints(hd, 2), "ceil_mode", 0);
    if (op.at && !is_max)
        json_object_set_new(op.at, "count_include_pad", json_boolean(op.incl));
    if (!op.at)
        return tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
    int rc = depth_fold(c, &dp, &op, out);
    json_decref(op.at);
    return rc;
}

/* Conv: 1-D (via 2-D) and 2-D; group, dilations, strides, pads, auto_pad; optional bias. */
static int op_conv(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    int r = rank(in[0]);
    if (rank(in[1]) != r)
        return tth__onnx_fail(c, TTH_EMODEL, "Conv weight rank %d differs from input rank %d", rank(in[1]), r);
    if (r == 5)
        return conv3d(c, in, nin, out);
    tth_rexpr *x = to4d(c, in[0], "Conv");
    CHECK(x);
    tth_rexpr *w = to4d(c, in[1], "Conv");
    CHECK(w);
    spatial sp;
    int nsp = r - 2;
    int rc = spatial_attrs(c, nsp, tt(in[0])->shape + 2, tt(in[1])->shape + 2, 0, &sp);
    if (rc)
        return rc;
    int64_t st[2] = {sp.s[0], sp.s[1]}, dl[2] = {sp.d[0], sp.d[1]};
    json_t *at = json_pack("{s:o,s:o,s:o,s:I}", "strides", tth__json_ints(st, 2), "padding", pads_json(&sp),
                           "dilation", tth__json_ints(dl, 2), "groups", (json_int_t)ai(c, "group", 1));
    tth_rexpr *args[3] = {x, w, nin > 2 ? in[2] : NULL};
    tth_rexpr *y = call(c, TTH_OP_CONV2D, args, args[2] ? 3 : 2, at);
    CHECK(y);
    CHECK(out[0] = from4d(c, y, r));
    return 0;
}

/* ConvTranspose over [N, C, D, H, W] (sp: the three axes resolved, depth first): output depth
 * od is the sum of the 2-D transposed convolutions of input slice id with weight slice kd over
 * the pairs with id * stride + kd * dilation = od + front padding; a depth no pair reaches is
 * zero; then the bias. */
static int convt3d(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, const spatial *sp, tth_rexpr **out)
{
    const int64_t *xs = tt(in[0])->shape, *ws = tt(in[1])->shape;
    int64_t g = ai(c, "group", 1), id_n = xs[2];
    if (g < 1 || ws[0] != xs[1] || xs[1] % g)
        return tth__onnx_fail(c, TTH_EMODEL, "ConvTranspose weight [%lld, ...] does not fit %lld channels in %lld "
                              "groups", (long long)ws[0], (long long)xs[1], (long long)g);
    int64_t od_n = sp->s[0] * (id_n - 1) + sp->outpad[0] + (ws[2] - 1) * sp->d[0] + 1 - sp->pb[0] - sp->pe[0];
    if (od_n < 1 || id_n * ws[2] > 4096)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "3-D ConvTranspose over depth %lld (kernel %lld): more than 4096 "
                              "slice operations or an empty output", (long long)id_n, (long long)ws[2]);
    int64_t st[2] = {sp->s[1], sp->s[2]}, dl[2] = {sp->d[1], sp->d[2]}, op2[2] = {sp->outpad[1], sp->outpad[2]};
    int64_t pd[4] = {sp->pb[1], sp->pb[2], sp->pe[1], sp->pe[2]}, w4[4] = {ws[0], ws[1], ws[3], ws[4]};
    int64_t y4[4] = {xs[0], ws[1] * g, st[0] * (xs[3] - 1) + op2[0] + (ws[3] - 1) * dl[0] + 1 - pd[0] - pd[2],
                     st[1] * (xs[4] - 1) + op2[1] + (ws[4] - 1) * dl[1] + 1 - pd[1] - pd[3]};
    tth_rexpr **ys = calloc((size_t)od_n, sizeof *ys);
    if (!ys)
        return tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
    int rc = 0;
    for (int64_t od = 0; od < od_n && !rc; od++) {
        tth_rexpr *acc = NULL;
        for (int64_t kd = 0; kd < ws[2] && !rc; kd++) {
            int64_t p = od + sp->pb[0] - kd * sp->d[0];
            if (p < 0 || p % sp->s[0] || p / sp->s[0] >= id_n)
                continue;
            json_t *at = json_pack("{s:o,s:o,s:o,s:I,s:o}", "strides", tth__json_ints(st, 2), "padding",
                                   tth__json_ints(pd, 4), "dilation", tth__json_ints(dl, 2), "groups", (json_int_t)g,
                                   "output_padding", tth__json_ints(op2, 2));
            tth_rexpr *args[2] = {depth_slice(c, in[0], p / sp->s[0]),
                                  reshape(c, slice_axis(c, in[1], 2, kd, kd + 1), w4, 4)};
            tth_rexpr *y = call(c, TTH_OP_CONV2D_TRANSPOSE, args, 2, at); /* NULL when an operand is */
            acc = !y ? NULL : acc ? call2(c, TTH_OP_ADD, acc, y, NULL) : y;
            if (!acc)
                rc = c->diag->code ? c->diag->code : TTH_EINTERNAL;
        }
        if (!rc && !acc) /* no tap reaches this depth */
            acc = call1(c, TTH_OP_BROADCAST_TO, k_scalar(c, tt(in[0])->dtype, 0),
                        json_pack("{s:o}", "shape", tth__json_ints(y4, 4)));
        if (!rc && acc && nin > 2 && in[2]) {
            int64_t b4[4] = {1, y4[1], 1, 1};
            acc = call2(c, TTH_OP_ADD, acc, reshape(c, in[2], b4, 4), NULL);
        }
        if (!rc && !acc)
            rc = c->diag->code ? c->diag->code : TTH_EINTERNAL;
        ys[od] = acc;
    }
    if (!rc && !(out[0] = depth_stack(c, ys, od_n)))
        rc = c->diag->code ? c->diag->code : TTH_EINTERNAL;
    free(ys);
    return rc;
}

/* ConvTranspose: 1-D to 3-D; output_shape resolves the padding (a negative end padding becomes
 * output padding); auto_pad as in ONNX. 3-D goes through convt3d. */
static int op_conv_transpose(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    int r = rank(in[0]);
    if (rank(in[1]) != r)
        return tth__onnx_fail(c, TTH_EMODEL, "ConvTranspose weight rank differs from input rank");
    if (r < 3 || r > 5)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: ConvTranspose of rank %d (only 1-D, "
                              "2-D and 3-D are supported)", r);
    spatial sp;
    int nsp = r - 2, off = nsp < 2 ? 2 - nsp : 0;
    int rc = spatial_attrs(c, nsp, tt(in[0])->shape + 2, tt(in[1])->shape + 2, 1, &sp);
    if (rc)
        return rc;
    int64_t os[8];
    int n = aints(c, "output_shape", os, 8);
    if (n == -2)
        return c->diag->code;
    if (n >= 0) {
        if (n != nsp && n != nsp + 2)
            return tth__onnx_fail(c, TTH_EMODEL, "output_shape has %d values", n);
        const char *ap = as(c, "auto_pad", "NOTSET");
        int upper = !strcmp(ap, "SAME_UPPER");
        for (int i = 0; i < nsp; i++) {
            int j = off + i;
            int64_t want = os[n == nsp ? i : i + 2];
            if (want < 1 || want > TTH_IMPORT_MAX_TENSOR)
                return tth__onnx_fail(c, TTH_EMODEL, "output_shape %lld out of range", (long long)want);
            int64_t total = sp.s[j] * (tt(in[0])->shape[2 + i] - 1) + sp.outpad[j] + (sp.k[j] - 1) * sp.d[j] + 1 - want;
            int64_t b = upper ? total / 2 : total - total / 2;
            /* floor division for negative totals, as the ONNX reference does */
            int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
            b = upper ? half : total - half;
            int64_t e = total - b;
            if (e < 0) {
                sp.outpad[j] += -e;
                e = 0;
            }
            if (b < 0)
                return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: output_shape larger than the "
                                                           "convolution can produce");
            sp.pb[j] = b;
            sp.pe[j] = e;
        }
    }
    if (r == 5)
        return convt3d(c, in, nin, &sp, out);
    tth_rexpr *x = to4d(c, in[0], "ConvTranspose");
    CHECK(x);
    tth_rexpr *w = to4d(c, in[1], "ConvTranspose");
    CHECK(w);
    int64_t st[2] = {sp.s[0], sp.s[1]}, dl[2] = {sp.d[0], sp.d[1]}, op2[2] = {sp.outpad[0], sp.outpad[1]};
    json_t *at = json_pack("{s:o,s:o,s:o,s:I,s:o}", "strides", tth__json_ints(st, 2), "padding", pads_json(&sp),
                           "dilation", tth__json_ints(dl, 2), "groups", (json_int_t)ai(c, "group", 1), "output_padding",
                           tth__json_ints(op2, 2));
    tth_rexpr *args[3] = {x, w, nin > 2 ? in[2] : NULL};
    tth_rexpr *y = call(c, TTH_OP_CONV2D_TRANSPOSE, args, args[2] ? 3 : 2, at);
    CHECK(y);
    CHECK(out[0] = from4d(c, y, r));
    return 0;
}

/* MaxPool's two outputs from one nn.max_pool2d_with_argmax (at: the 2-D pooling attributes; the
 * flat indices of a 1-D pool over (N, C, 1, L) are those over (N, C, L)). */
static int max_pool_indices(tth_onnx_ctx *c, tth_rexpr *x, json_t *at, int r, tth_rexpr **out)
{
    int64_t order = ai(c, "storage_order", 0);
    if (order != 0 && order != 1) {
        json_decref(at);
        return tth__onnx_fail(c, TTH_EMODEL, "MaxPool storage_order %lld is neither 0 nor 1", (long long)order);
    }
    json_object_set_new(at, "storage_order", json_integer(order));
    tth_rexpr *t = call1(c, TTH_OP_MAX_POOL2D_ARGMAX, x, at);
    CHECK(t);
    for (int32_t i = 0; i < 2; i++) {
        tth_rexpr *g = tth_relay_tuple_get(c->m, t, i, c->diag);
        CHECK(g);
        CHECK(out[i] = from4d(c, tth__fold_call(c->m, g, TTH_IMPORT_FOLD_ELEMS, c->diag), r));
    }
    return 0;
}

static int pool(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout, int is_max)
{
    NEED(1);
    int indices = is_max && nout > 1 && c->node->output[1] && c->node->output[1][0];
    int r = rank(in[0]);
    if (!attr(c, "kernel_shape"))
        return tth__onnx_fail(c, TTH_EMODEL, "pooling without kernel_shape");
    if (r == 5 && indices)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: MaxPool's Indices output in 3-D");
    if (r == 5)
        return pool3d(c, in, out, is_max);
    tth_rexpr *x = to4d(c, in[0], is_max ? "MaxPool" : "AveragePool");
    CHECK(x);
    spatial sp;
    int64_t kdummy[2] = {1, 1};
    int rc = spatial_attrs(c, r - 2, tt(in[0])->shape + 2, kdummy, 0, &sp);
    if (rc)
        return rc;
    int64_t ps[2] = {sp.k[0], sp.k[1]}, st[2] = {sp.s[0], sp.s[1]}, dl[2] = {sp.d[0], sp.d[1]};
    json_t *at = json_pack("{s:o,s:o,s:o,s:o,s:b}", "pool_size", tth__json_ints(ps, 2), "strides",
                           tth__json_ints(st, 2), "padding", pads_json(&sp), "dilation", tth__json_ints(dl, 2),
                           "ceil_mode", (int)ai(c, "ceil_mode", 0));
    if (!is_max)
        json_object_set_new(at, "count_include_pad", json_boolean(ai(c, "count_include_pad", 0)));
    if (indices)
        return max_pool_indices(c, x, at, r, out);
    tth_rexpr *y = call1(c, is_max ? TTH_OP_MAX_POOL2D : TTH_OP_AVG_POOL2D, x, at);
    CHECK(y);
    CHECK(out[0] = from4d(c, y, r));
    return 0;
}
/* MaxPool (arg 1) and AveragePool (arg 0). */
static int op_pool(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return pool(c, in, nin, out, nout, (int)c->arg);
}

/* GlobalAverage/MaxPool over all spatial dims of any rank >= 3 (reshaped to N, C, 1, S). */
static int global_pool(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, int is_max)
{
    NEED(1);
    int r = rank(in[0]);
    if (r < 3)
        return tth__onnx_fail(c, TTH_EMODEL, "global pooling needs rank >= 3");
    tth_rexpr *x = in[0];
    if (r != 4) {
        int64_t s[4] = {tt(x)->shape[0], tt(x)->shape[1], 1, 1};
        for (int i = 2; i < r; i++)
            s[3] *= tt(x)->shape[i];
        CHECK(x = reshape(c, x, s, 4));
    }
    tth_rexpr *y = call1(c, is_max ? TTH_OP_GLOBAL_MAX_POOL2D : TTH_OP_GLOBAL_AVG_POOL2D, x, NULL);
    CHECK(y);
    if (r != 4) {
        int64_t s[TTH_MAX_RANK] = {tt(in[0])->shape[0], tt(in[0])->shape[1]};
        for (int i = 2; i < r; i++)
            s[i] = 1;
        CHECK(y = reshape(c, y, s, r));
    }
    out[0] = y;
    return 0;
}
/* GlobalMaxPool (arg 1) and GlobalAveragePool (arg 0). */
static int op_global_pool(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return global_pool(c, in, nin, out, (int)c->arg);
}

static int batch_norm_training(tth_onnx_ctx *c, tth_rexpr **in, tth_rexpr **out, size_t nout);

/* BatchNormalization (inference form): y = (x - mean) / sqrt(var + epsilon) * scale + B; with
 * training_mode=1 (opset 14 on) batch_norm_training. */
static int op_batch_norm(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(5);
    if (ai(c, "training_mode", 0)) {
        if (c->version < 14)
            return tth__onnx_fail(c, TTH_EMODEL, "BatchNormalization of opset %lld has no training_mode (opset 14 on)",
                                  (long long)c->opset);
        return batch_norm_training(c, in, out, nout);
    }
    if (c->version < 9 && !ai(c, "spatial", 1))
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: BatchNormalization spatial=0");
    for (size_t i = 1; i < nout; i++)
        if (c->node->output[i] && c->node->output[i][0])
            return tth__onnx_fail(c, TTH_EUNSUPPORTED,
                                  "unsupported attribute value: BatchNormalization training outputs (running mean/var)");
    CHECK(out[0] = call(c, TTH_OP_BATCH_NORM, in, 5, json_pack("{s:f}", "epsilon", af(c, "epsilon", 1e-5))));
    return 0;
}

/* Softmax/LogSoftmax: before opset 13 the input is flattened to 2-D at `axis` (default 1);
 * from 13 on it is one axis (default -1). */
static int softmax(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, tth_op op)
{
    NEED(1);
    int r = rank(in[0]);
    int64_t axis;
    if (norm_axis(c, ai(c, "axis", c->version < 13 ? 1 : -1), r, &axis))
        return c->diag->code;
    if (c->version >= 13 || axis == r - 1) {
        CHECK(out[0] = call1(c, op, in[0], json_pack("{s:I}", "axis", (json_int_t)axis)));
        return 0;
    }
    int64_t s[2] = {1, 1};
    for (int i = 0; i < r; i++)
        s[i < axis ? 0 : 1] *= tt(in[0])->shape[i];
    tth_rexpr *x = reshape(c, in[0], s, 2);
    CHECK(x);
    CHECK(x = call1(c, op, x, json_pack("{s:I}", "axis", (json_int_t)1)));
    CHECK(out[0] = reshape(c, x, tt(in[0])->shape, r));
    return 0;
}
/* Softmax and LogSoftmax: the row's arg is the Relay op. */
static int op_softmax(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return softmax(c, in, nin, out, (tth_op)c->arg);
}

static int op_matmul(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    CHECK(out[0] = call2(c, TTH_OP_MATMUL, in[0], in[1], NULL));
    return 0;
}

/* Gemm: Y = alpha * A' B' + beta * C, A' = transA ? A^T : A, B' likewise; C broadcasts. */
static int op_gemm(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    tth_rexpr *a = in[0], *b = in[1];
    if (rank(a) != 2 || rank(b) != 2)
        return tth__onnx_fail(c, TTH_EMODEL, "Gemm needs 2-D A and B");
    int64_t perm[2] = {1, 0};
    if (ai(c, "transA", 0))
        CHECK(a = call1(c, TTH_OP_TRANSPOSE, a, json_pack("{s:o}", "axes", tth__json_ints(perm, 2))));
    if (ai(c, "transB", 0))
        CHECK(b = call1(c, TTH_OP_TRANSPOSE, b, json_pack("{s:o}", "axes", tth__json_ints(perm, 2))));
    tth_rexpr *y = call2(c, TTH_OP_MATMUL, a, b, NULL);
    CHECK(y);
    double alpha = af(c, "alpha", 1.0), beta = af(c, "beta", 1.0);
    if (alpha != 1.0) {
        tth_rexpr *k = k_scalar(c, tt(y)->dtype, alpha);
        CHECK(k);
        CHECK(y = call2(c, TTH_OP_MULTIPLY, y, k, NULL));
    }
    if (nin > 2 && in[2] && beta != 0.0) {
        tth_rexpr *cc = in[2];
        if (beta != 1.0) {
            tth_rexpr *k = k_scalar(c, tt(cc)->dtype, beta);
            CHECK(k);
            CHECK(cc = call2(c, TTH_OP_MULTIPLY, cc, k, NULL));
        }
        CHECK(y = call2(c, TTH_OP_ADD, y, cc, NULL));
    }
    out[0] = y;
    return 0;
}

/* MaxUnpool(x, indices[, output_shape]): zeros of the output's shape with x's values at the
 * (whole-tensor, flattened) indices MaxPool gave: a scatter. */
static int op_max_unpool(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    const tth_ttype *xt = tt(in[0]);
    int r = xt->rank, nsp = r - 2;
    int64_t ks[MAXV], st[MAXV], pads[2 * MAXV], os[TTH_MAX_RANK];
    if (r < 3 || aints(c, "kernel_shape", ks, MAXV) != nsp)
        return tth__onnx_fail(c, TTH_EMODEL, "MaxUnpool needs a kernel_shape of %d values", nsp);
    for (int i = 0; i < nsp; i++) {
        st[i] = 1;
        pads[i] = pads[i + nsp] = 0;
    }
    if (aints(c, "strides", st, MAXV) < -1 || aints(c, "pads", pads, 2 * MAXV) < -1)
        return c->diag->code;
    /* the indices address the unpooled shape MaxPool saw (the default); a larger output_shape
     * keeps each value at its coordinates, zeros after */
    int64_t ds[TTH_MAX_RANK];
    ds[0] = xt->shape[0];
    ds[1] = xt->shape[1];
    for (int i = 0; i < nsp; i++)
        ds[2 + i] = (xt->shape[2 + i] - 1) * st[i] + ks[i] - pads[i] - pads[i + nsp];
    memcpy(os, ds, sizeof(int64_t) * (size_t)r);
    if (nin > 2 && in[2]) {
        if (vints(c, in[2], "output_shape", os, TTH_MAX_RANK) != r)
            return c->diag->code ? c->diag->code : tth__onnx_fail(c, TTH_EMODEL, "MaxUnpool output_shape rank");
        for (int i = 0; i < r; i++)
            if (os[i] < ds[i] || (i < 2 && os[i] != ds[i]))
                return tth__onnx_fail(c, TTH_EMODEL, "MaxUnpool output_shape dimension %d (%lld) below %lld", i,
                                      (long long)os[i], (long long)ds[i]);
    }
    tth_ttype ot = {.dtype = xt->dtype, .rank = r};
    memcpy(ot.shape, os, sizeof(int64_t) * (size_t)r);
    int64_t N = tth_ttype_numel(&ot), K = tth_ttype_numel(xt), k1[2] = {K, 1};
    tth_rexpr *zeros, *pos, *u2, *o;
    CHECK(zeros = k_tensor(c, tth_tensor_new(&(tth_ttype){.dtype = xt->dtype, .rank = 2, .shape = {N, 1}}, NULL)));
    CHECK(pos = reshape(c, cast_to(c, in[1], TTH_I64), &K, 1));
    if (memcmp(os, ds, sizeof(int64_t) * (size_t)r)) { /* default flat index -> output flat index */
        tth_ttype mt = {.dtype = TTH_I64, .rank = 1};
        mt.shape[0] = 1;
        for (int i = 0; i < r; i++)
            mt.shape[0] *= ds[i];
        tth_tensor *map = tth_tensor_new(&mt, NULL);
        for (int64_t f = 0; map && f < mt.shape[0]; f++) {
            int64_t rest = f, o2 = 0, scale = 1;
            for (int i = r - 1; i >= 0; i--) {
                o2 += (rest % ds[i]) * scale;
                rest /= ds[i];
                scale *= os[i];
            }
            ((int64_t *)map->data)[f] = o2;
        }
        tth_rexpr *km;
        CHECK(km = k_tensor(c, map));
        CHECK(pos = call2(c, TTH_OP_TAKE, km, pos, json_pack("{s:i}", "axis", 0)));
    }
    CHECK(u2 = reshape(c, in[0], k1, 2));
    int rc = scatter_flat(c, zeros, pos, u2, "none", &o);
    if (rc)
        return rc;
    CHECK(out[0] = reshape(c, o, os, r));
    return 0;
}

/* Einsum with one or two operands: each operand's repeated labels become a diagonal (a product
 * with an identity mask summed over the repeat), both operands are laid out over one label
 * order (the output's labels, then the summed ones) with size-1 axes for labels they lack,
 * multiplied with broadcasting, and summed over the labels the output lacks. The product holds
 * every label's extent at once: bounded at 2^24 elements. "..." takes the unnamed dimensions. */
#define EINSUM_MAX_ELEMS ((int64_t)1 << 24)

static int op_einsum(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    const char *eq = as(c, "equation", "");
    char eqn[256], terms[3][64], outl[64];
    size_t k = 0;
    for (const char *p = eq; *p && k < sizeof eqn - 1; p++)
        if (*p != ' ')
            eqn[k++] = *p;
    eqn[k] = 0;
    char *arrow = strstr(eqn, "->");
    if (arrow)
        *arrow = 0;
    int nt = 0;
    for (char *t = eqn, *comma; t && nt < 3; t = comma ? comma + 1 : NULL, nt++) {
        comma = strchr(t, ',');
        if (comma)
            *comma = 0;
        size_t tl = strlen(t);
        if (tl >= sizeof terms[nt])
            return tth__onnx_fail(c, TTH_EMODEL, "Einsum term '%s' is too long", t);
        memcpy(terms[nt], t, tl + 1);
    }
    if (nt < 1 || nt > 2 || (size_t)nt != nin)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "Einsum '%s' with %d operands (one or two are supported)", eq, nt);
    /* "..." becomes the digits 0-9, one per unnamed dimension (not labels ONNX allows) */
    int nell = 0;
    char lab[2][TTH_MAX_RANK + 1];
    for (int i = 0; i < nt; i++) {
        char *dots = strstr(terms[i], "...");
        int named = (int)strlen(terms[i]) - (dots ? 3 : 0);
        int e = dots ? rank(in[i]) - named : 0;
        if (e < 0 || named + e != rank(in[i]) || rank(in[i]) > TTH_MAX_RANK)
            return tth__onnx_fail(c, TTH_EMODEL, "Einsum term '%s' does not fit an operand of rank %d", terms[i],
                                  rank(in[i]));
        if (e > nell)
            nell = e;
        int n = 0;
        for (const char *p = terms[i]; *p;) {
            if (!strncmp(p, "...", 3)) {
                for (int j = 0; j < e; j++)
                    lab[i][n++] = (char)('0' + (nell - e) + j);
                p += 3;
            } else {
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
                    return tth__onnx_fail(c, TTH_EMODEL, "Einsum label '%c' in '%s'", *p, eq);
                lab[i][n++] = *p++;
            }
        }
        lab[i][n] = 0;
    }
    int no = 0;
    if (arrow) {
        for (const char *p = arrow + 2; *p;) {
            if (no + nell > TTH_MAX_RANK)
                return tth__onnx_fail(c, TTH_EUNSUPPORTED, "Einsum '%s' has more than %d output labels", eq,
                                      TTH_MAX_RANK);
            if (!strncmp(p, "...", 3)) {
                for (int j = 0; j < nell; j++)
                    outl[no++] = (char)('0' + j);
                p += 3;
            } else {
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
                    return tth__onnx_fail(c, TTH_EMODEL, "Einsum output label '%c' in '%s'", *p, eq);
                outl[no++] = *p++;
            }
        }
    } else { /* the ellipsis, then the labels seen once, alphabetically */
        for (int j = 0; j < nell; j++)
            outl[no++] = (char)('0' + j);
        for (int ch = 'A'; ch <= 'z'; ch++) {
            int seen = 0;
            for (int i = 0; i < nt; i++)
                for (const char *p = lab[i]; *p; p++)
                    seen += *p == ch;
            if (seen == 1 && no < TTH_MAX_RANK)
                outl[no++] = (char)ch;
        }
    }
    outl[no] = 0;
    /* every label's extent */
    int64_t ext[256] = {0};
    for (int i = 0; i < nt; i++)
        for (int j = 0; lab[i][j]; j++) {
            int64_t d = tt(in[i])->shape[j];
            unsigned char ch = (unsigned char)lab[i][j];
            if (ext[ch] && ext[ch] != d && d != 1 && ext[ch] != 1)
                return tth__onnx_fail(c, TTH_EMODEL, "Einsum label '%c' has extents %lld and %lld", ch,
                                      (long long)ext[ch], (long long)d);
            if (d > ext[ch])
                ext[ch] = d;
        }
    /* the label order: the output's, then those summed */
    char uni[2 * TTH_MAX_RANK + 1];
    int nu = 0;
    for (int j = 0; j < no; j++) {
        if (!ext[(unsigned char)outl[j]])
            return tth__onnx_fail(c, TTH_EMODEL, "Einsum output label '%c' is in no operand", outl[j]);
        uni[nu++] = outl[j];
    }
    for (int i = 0; i < nt; i++)
        for (int j = 0; lab[i][j]; j++)
            if (!memchr(uni, lab[i][j], (size_t)nu))
                uni[nu++] = lab[i][j];
    if (nu > TTH_MAX_RANK)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "Einsum '%s' has %d labels (at most %d)", eq, nu, TTH_MAX_RANK);
    int64_t work = 1;
    for (int j = 0; j < nu; j++)
        work *= ext[(unsigned char)uni[j]];
    if (work > EINSUM_MAX_ELEMS)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "Einsum '%s' multiplies %lld elements at once (at most 2^24)", eq,
                              (long long)work);
    tth_rexpr *acc = NULL;
    for (int i = 0; i < nt; i++) {
        tth_rexpr *x = in[i];
        char l[TTH_MAX_RANK + 1];
        memcpy(l, lab[i], sizeof l);
        /* a repeated label: keep the diagonal */
        for (int a = 0; l[a]; a++)
            for (int b = a + 1; l[b];) {
                if (l[b] != l[a]) {
                    b++;
                    continue;
                }
                int r = rank(x);
                int64_t d = tt(x)->shape[a];
                tth_ttype mt = {.dtype = tt(x)->dtype, .rank = r};
                for (int q = 0; q < r; q++)
                    mt.shape[q] = q == a || q == b ? d : 1;
                tth_tensor *eye = tth_tensor_new(&mt, NULL);
                int64_t sb = 1;
                for (int q = r - 1; q > b; q--)
                    sb *= mt.shape[q];
                int64_t sa = sb * d;
                for (int q = b - 1; q > a; q--)
                    sa *= mt.shape[q];
                for (int64_t v = 0; eye && v < d; v++)
                    tth__st_f64(eye, v * sa + v * sb, 1);
                tth_rexpr *ke;
                int64_t bb = b;
                CHECK(ke = k_tensor(c, eye));
                CHECK(x = call2(c, TTH_OP_MULTIPLY, x, ke, NULL));
                CHECK(x = call1(c, TTH_OP_SUM, x, json_pack("{s:o,s:b}", "axis", tth__json_ints(&bb, 1), "keepdims",
                                                            0)));
                memmove(l + b, l + b + 1, strlen(l + b));
            }
        /* lay it out over the label order */
        int64_t perm[TTH_MAX_RANK], shape[TTH_MAX_RANK];
        int np = 0;
        for (int u = 0; u < nu; u++) {
            const char *at = strchr(l, uni[u]);
            shape[u] = at ? tt(x)->shape[at - l] : 1;
            if (at)
                perm[np++] = at - l;
        }
        int ident = 1;
        for (int q = 0; q < np; q++)
            ident &= perm[q] == q;
        if (!ident)
            CHECK(x = call1(c, TTH_OP_TRANSPOSE, x, json_pack("{s:o}", "axes", tth__json_ints(perm, np))));
        CHECK(x = reshape(c, x, shape, nu));
        acc = acc ? call2(c, TTH_OP_MULTIPLY, acc, x, NULL) : x;
        CHECK(acc);
    }
    if (nu > no) {
        int64_t ax[TTH_MAX_RANK];
        for (int u = no; u < nu; u++)
            ax[u - no] = u;
        CHECK(acc = call1(c, TTH_OP_SUM, acc, json_pack("{s:o,s:b}", "axis", tth__json_ints(ax, nu - no), "keepdims",
                                                        0)));
    }
    out[0] = acc;
    return 0;
}

/* ---------------------------------------------------------------- recurrent layers
 *
 * RNN, GRU and LSTM with a static sequence length, unrolled over time into matmuls and
 * elementwise operators (docs/operators.md, "Recurrent layers"): the input projection of all
 * steps is one matmul; each step multiplies the previous hidden state by R and applies the
 * gates. Directions forward, reverse and bidirectional; initial states; biases; LSTM peepholes;
 * clip; GRU linear_before_reset; layout 0 and 1; sequence_lens, when constant, masks the steps
 * past each batch entry's length (forward direction). */

static tth_rexpr *transpose2(tth_onnx_ctx *c, tth_rexpr *x)
{
    int64_t perm[2] = {1, 0};
    return x ? call1(c, TTH_OP_TRANSPOSE, x, json_pack("{s:o}", "axes", tth__json_ints(perm, 2))) : NULL;
}

typedef struct rnn_act {
    char name[24];
    double alpha, beta;
    int has_alpha, has_beta;
} rnn_act;

static tth_rexpr *rnn_activate(tth_onnx_ctx *c, const rnn_act *a, tth_rexpr *x, double clip)
{
    if (!x)
        return NULL;
    if (clip > 0 && !(x = call1(c, TTH_OP_CLIP, x, json_pack("{s:f,s:f}", "a_min", -clip, "a_max", clip))))
        return NULL;
    if (!strcmp(a->name, "Sigmoid"))
        return call1(c, TTH_OP_SIGMOID, x, NULL);
    if (!strcmp(a->name, "Tanh"))
        return call1(c, TTH_OP_TANH, x, NULL);
    if (!strcmp(a->name, "Relu"))
        return call1(c, TTH_OP_RELU, x, NULL);
    if (!strcmp(a->name, "LeakyRelu"))
        return call1(c, TTH_OP_LEAKY_RELU, x, json_pack("{s:f}", "alpha", a->has_alpha ? a->alpha : 0.01));
    if (!strcmp(a->name, "HardSigmoid"))
        return call1(c, TTH_OP_HARD_SIGMOID, x, json_pack("{s:f,s:f}", "alpha", a->has_alpha ? a->alpha : 0.2,
                                                            "beta", a->has_beta ? a->beta : 0.5));
    if (!strcmp(a->name, "Affine")) {
        tth_rexpr *k = k_scalar(c, tt(x)->dtype, a->has_alpha ? a->alpha : 1.0);
        tth_rexpr *m = k ? call2(c, TTH_OP_MULTIPLY, x, k, NULL) : NULL;
        tth_rexpr *b = m ? k_scalar(c, tt(x)->dtype, a->has_beta ? a->beta : 0.0) : NULL;
        return b ? call2(c, TTH_OP_ADD, m, b, NULL) : NULL;
    }
    tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: recurrent activation '%s' (Sigmoid, Tanh, "
                   "Relu, LeakyRelu, HardSigmoid and Affine are)", a->name);
    return NULL;
}

enum { RNN_SIMPLE, RNN_GRU, RNN_LSTM };

/* The activations of each direction: the attribute's, else the operator's defaults. */
static int rnn_activations(tth_onnx_ctx *c, int kind, int ndir, rnn_act *acts)
{
    static const char *const dflt[3][3] = {{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
    int per = kind + 1;
    const Onnx__AttributeProto *a = attr(c, "activations"), *al = attr(c, "activation_alpha"),
                               *be = attr(c, "activation_beta");
    if (a && a->n_strings && a->n_strings != (size_t)(per * ndir))
        return tth__onnx_fail(c, TTH_EMODEL, "%zu activations for %d per direction and %d directions", a->n_strings,
                              per, ndir);
    for (int i = 0; i < per * ndir; i++) {
        rnn_act *r = &acts[i];
        memset(r, 0, sizeof *r);
        if (a && a->n_strings)
            snprintf(r->name, sizeof r->name, "%.*s", (int)a->strings[i].len, (const char *)a->strings[i].data);
        else
            snprintf(r->name, sizeof r->name, "%s", dflt[kind][i % per]);
        if (al && (size_t)i < al->n_floats) {
            r->alpha = al->floats[i];
            r->has_alpha = 1;
        }
        if (be && (size_t)i < be->n_floats) {
            r->beta = be->floats[i];
            r->has_beta = 1;
        }
    }
    return 0;
}

#define RNN_MAX_STEPS 4096

static int recurrent(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout, int kind)
{
    NEED(3);
    static const int ngates[3] = {1, 3, 4};
    const char *opname = c->node->op_type;
    int G = ngates[kind];
    const char *dir = as(c, "direction", "forward");
    int ndir = !strcmp(dir, "bidirectional") ? 2 : 1, rev = !strcmp(dir, "reverse");
    if (ndir == 1 && !rev && strcmp(dir, "forward"))
        return tth__onnx_fail(c, TTH_EMODEL, "%s direction '%s'", opname, dir);
    int layout = (int)ai(c, "layout", 0);
    tth_rexpr *x = in[0];
    if (rank(x) != 3 || rank(in[1]) != 3 || rank(in[2]) != 3)
        return tth__onnx_fail(c, TTH_EMODEL, "%s takes 3-D X, W and R", opname);
    if (layout) {
        int64_t perm[3] = {1, 0, 2};
        CHECK(x = call1(c, TTH_OP_TRANSPOSE, x, json_pack("{s:o}", "axes", tth__json_ints(perm, 3))));
    }
    tth_dtype fdt = tt(x)->dtype;
    int64_t T = tt(x)->shape[0], B = tt(x)->shape[1], I = tt(x)->shape[2];
    int64_t H = ai(c, "hidden_size", tt(in[2])->shape[2]);
    const tth_ttype *wt = tt(in[1]), *rt = tt(in[2]);
    if (wt->shape[0] != ndir || wt->shape[1] != G * H || wt->shape[2] != I || rt->shape[0] != ndir ||
        rt->shape[1] != G * H || rt->shape[2] != H)
        return tth__onnx_fail(c, TTH_EMODEL, "%s's W or R do not match %d direction(s), hidden size %lld and input "
                              "size %lld", opname, ndir, (long long)H, (long long)I);
    if (T < 1 || T > RNN_MAX_STEPS)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "%s over %lld steps (1 to %d are unrolled)", opname, (long long)T,
                              RNN_MAX_STEPS);
    if (kind == RNN_LSTM && ai(c, "input_forget", 0))
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: LSTM input_forget=1");
    tth_rexpr *bias = nin > 3 ? in[3] : NULL, *hinit = nin > 5 ? in[5] : NULL;
    tth_rexpr *cinit = kind == RNN_LSTM && nin > 6 ? in[6] : NULL, *peep = kind == RNN_LSTM && nin > 7 ? in[7] : NULL;
    if (layout) { /* initial states [B, dirs, H] in layout 1 */
        int64_t perm[3] = {1, 0, 2};
        if (hinit)
            CHECK(hinit = call1(c, TTH_OP_TRANSPOSE, hinit, json_pack("{s:o}", "axes", tth__json_ints(perm, 3))));
        if (cinit)
            CHECK(cinit = call1(c, TTH_OP_TRANSPOSE, cinit, json_pack("{s:o}", "axes", tth__json_ints(perm, 3))));
    }
    const Onnx__AttributeProto *ca = attr(c, "clip");
    double clip = ca && ca->has_f ? ca->f : 0;
    int lbr = kind == RNN_GRU ? (int)ai(c, "linear_before_reset", 0) : 0;
    rnn_act acts[6];
    if (rnn_activations(c, kind, ndir, acts))
        return c->diag->code;
    /* sequence lengths: a constant; only lengths shorter than T need masks */
    int64_t lens[256];
    int masked = 0;
    if (nin > 4 && in[4]) {
        if (B > 256)
            return tth__onnx_fail(c, TTH_EUNSUPPORTED, "%s sequence_lens for a batch of %lld (at most 256)", opname,
                                  (long long)B);
        int n = vints(c, in[4], "sequence_lens", lens, 256);
        if (n < 0)
            return c->diag->code;
        if (n != B)
            return tth__onnx_fail(c, TTH_EMODEL, "%s sequence_lens holds %d values for a batch of %lld", opname, n,
                                  (long long)B);
        for (int i = 0; i < n; i++) {
            if (lens[i] < 0 || lens[i] > T)
                return tth__onnx_fail(c, TTH_EMODEL, "%s sequence length %lld outside [0, %lld]", opname,
                                      (long long)lens[i], (long long)T);
            masked |= lens[i] < T;
        }
        if (masked && (rev || ndir == 2))
            return tth__onnx_fail(c, TTH_EUNSUPPORTED, "%s with sequences shorter than %lld in the reverse direction",
                                  opname, (long long)T);
    }
    int64_t tb_i[2] = {T * B, I}, bh[2] = {B, H}, gh[1] = {G * H};
    tth_rexpr *x2;
    CHECK(x2 = reshape(c, x, tb_i, 2));
    tth_ttype zt = {.dtype = fdt, .rank = 2, .shape = {B, H}};
    tth_rexpr *ys_dir[2], *yh_dir[2], *yc_dir[2];
    tth_rexpr **ys = calloc((size_t)T, sizeof *ys);
    if (!ys)
        return tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
    int rc = 0;
#define RCHECK(e)                                                                        \
    do {                                                                                 \
        if (!(e)) {                                                                      \
            rc = c->diag && c->diag->code ? c->diag->code : TTH_EINTERNAL;               \
            goto done;                                                                   \
        }                                                                                \
    } while (0)
    for (int d = 0; d < ndir; d++) {
        int backwards = rev || d == 1;
        const rnn_act *act = &acts[d * (kind + 1)];
        int64_t wshape[2] = {G * H, I}, rshape[2] = {G * H, H};
        tth_rexpr *wd, *rd, *wdt, *rdt, *xw, *xw3, *rb = NULL, *hprev, *cprev = NULL, *pi = NULL, *po = NULL, *pf = NULL;
        tth_rexpr *rht = NULL, *rzr = NULL;
        RCHECK(wd = reshape(c, slice_axis(c, in[1], 0, d, d + 1), wshape, 2));
        RCHECK(rd = reshape(c, slice_axis(c, in[2], 0, d, d + 1), rshape, 2));
        RCHECK(wdt = transpose2(c, wd));
        RCHECK(rdt = transpose2(c, rd));
        RCHECK(xw = call2(c, TTH_OP_MATMUL, x2, wdt, NULL));
        if (bias) {
            tth_rexpr *brow;
            int64_t b2[1] = {2 * G * H};
            RCHECK(brow = reshape(c, slice_axis(c, bias, 0, d, d + 1), b2, 1));
            RCHECK(xw = call2(c, TTH_OP_ADD, xw, slice_axis(c, brow, 0, 0, G * H), NULL));
            RCHECK(rb = slice_axis(c, brow, 0, G * H, 2 * G * H));
            RCHECK(rb = reshape(c, rb, gh, 1));
        }
        int64_t tbg[3] = {T, B, G * H};
        RCHECK(xw3 = reshape(c, xw, tbg, 3));
        if (kind == RNN_GRU && !lbr) { /* the hidden gate multiplies (r * H) by Rh: R's z and r rows apart */
            RCHECK(rzr = slice_axis(c, rdt, 1, 0, 2 * H));
            RCHECK(rht = slice_axis(c, rdt, 1, 2 * H, 3 * H));
        }
        if (hinit)
            RCHECK(hprev = reshape(c, slice_axis(c, hinit, 0, d, d + 1), bh, 2));
        else
            RCHECK(hprev = k_tensor(c, tth_tensor_new(&zt, NULL)));
        if (kind == RNN_LSTM) {
            if (cinit)
                RCHECK(cprev = reshape(c, slice_axis(c, cinit, 0, d, d + 1), bh, 2));
            else
                RCHECK(cprev = k_tensor(c, tth_tensor_new(&zt, NULL)));
            if (peep) {
                int64_t p3[1] = {3 * H};
                tth_rexpr *prow;
                RCHECK(prow = reshape(c, slice_axis(c, peep, 0, d, d + 1), p3, 1));
                RCHECK(pi = slice_axis(c, prow, 0, 0, H));
                RCHECK(po = slice_axis(c, prow, 0, H, 2 * H));
                RCHECK(pf = slice_axis(c, prow, 0, 2 * H, 3 * H));
            }
        }
        for (int64_t step = 0; step < T; step++) {
            int64_t t = backwards ? T - 1 - step : step;
            int64_t bgh[2] = {B, G * H};
            tth_rexpr *xt, *hn = NULL, *cn = NULL;
            RCHECK(xt = reshape(c, slice_axis(c, xw3, 0, t, t + 1), bgh, 2));
#define GATE(e, k) slice_axis(c, (e), 1, (k) * H, ((k) + 1) * H)
            if (kind == RNN_SIMPLE || kind == RNN_LSTM) {
                tth_rexpr *hr, *sum;
                RCHECK(hr = call2(c, TTH_OP_MATMUL, hprev, rdt, NULL));
                RCHECK(sum = call2(c, TTH_OP_ADD, xt, hr, NULL));
                if (rb)
                    RCHECK(sum = call2(c, TTH_OP_ADD, sum, rb, NULL));
                if (kind == RNN_SIMPLE) {
                    RCHECK(hn = rnn_activate(c, &act[0], sum, clip));
                } else { /* gates i, o, f, c */
                    tth_rexpr *gi, *go, *gf, *gc, *ig, *fg, *cg, *og;
                    RCHECK(gi = GATE(sum, 0));
                    RCHECK(go = GATE(sum, 1));
                    RCHECK(gf = GATE(sum, 2));
                    RCHECK(gc = GATE(sum, 3));
                    if (pi) {
                        RCHECK(gi = call2(c, TTH_OP_ADD, gi, call2(c, TTH_OP_MULTIPLY, pi, cprev, NULL), NULL));
                        RCHECK(gf = call2(c, TTH_OP_ADD, gf, call2(c, TTH_OP_MULTIPLY, pf, cprev, NULL), NULL));
                    }
                    RCHECK(ig = rnn_activate(c, &act[0], gi, clip));
                    RCHECK(fg = rnn_activate(c, &act[0], gf, clip));
                    RCHECK(cg = rnn_activate(c, &act[1], gc, clip));
                    RCHECK(cn = call2(c, TTH_OP_ADD, call2(c, TTH_OP_MULTIPLY, fg, cprev, NULL),
                                      call2(c, TTH_OP_MULTIPLY, ig, cg, NULL), NULL));
                    if (po)
                        RCHECK(go = call2(c, TTH_OP_ADD, go, call2(c, TTH_OP_MULTIPLY, po, cn, NULL), NULL));
                    RCHECK(og = rnn_activate(c, &act[0], go, clip));
                    RCHECK(hn = call2(c, TTH_OP_MULTIPLY, og, rnn_activate(c, &act[2], cn, 0), NULL));
                }
            } else { /* GRU: gates z, r, h */
                tth_rexpr *hz, *hr, *hh, *z, *r, *h, *one;
                if (lbr) {
                    tth_rexpr *all;
                    RCHECK(all = call2(c, TTH_OP_MATMUL, hprev, rdt, NULL));
                    if (rb)
                        RCHECK(all = call2(c, TTH_OP_ADD, all, rb, NULL));
                    RCHECK(hz = GATE(all, 0));
                    RCHECK(hr = GATE(all, 1));
                    RCHECK(hh = GATE(all, 2));
                } else {
                    tth_rexpr *zr;
                    RCHECK(zr = call2(c, TTH_OP_MATMUL, hprev, rzr, NULL));
                    if (rb)
                        RCHECK(zr = call2(c, TTH_OP_ADD, zr, slice_axis(c, rb, 0, 0, 2 * H), NULL));
                    RCHECK(hz = GATE(zr, 0));
                    RCHECK(hr = GATE(zr, 1));
                    hh = NULL;
                }
                RCHECK(z = rnn_activate(c, &act[0], call2(c, TTH_OP_ADD, GATE(xt, 0), hz, NULL), clip));
                RCHECK(r = rnn_activate(c, &act[0], call2(c, TTH_OP_ADD, GATE(xt, 1), hr, NULL), clip));
                if (lbr) {
                    RCHECK(hh = call2(c, TTH_OP_MULTIPLY, r, hh, NULL));
                } else {
                    RCHECK(hh = call2(c, TTH_OP_MATMUL, call2(c, TTH_OP_MULTIPLY, r, hprev, NULL), rht, NULL));
                    if (rb)
                        RCHECK(hh = call2(c, TTH_OP_ADD, hh, slice_axis(c, rb, 0, 2 * H, 3 * H), NULL));
                }
                RCHECK(h = rnn_activate(c, &act[1], call2(c, TTH_OP_ADD, GATE(xt, 2), hh, NULL), clip));
                RCHECK(one = k_scalar(c, fdt, 1));
                RCHECK(hn = call2(c, TTH_OP_ADD, call2(c, TTH_OP_MULTIPLY, call2(c, TTH_OP_SUBTRACT, one, z, NULL), h,
                                                       NULL),
                                  call2(c, TTH_OP_MULTIPLY, z, hprev, NULL), NULL));
            }
#undef GATE
            tth_rexpr *y = hn;
            if (masked) { /* past its length a batch entry keeps its state and outputs zeros */
                tth_ttype mt = {.dtype = TTH_BOOL, .rank = 2, .shape = {B, 1}};
                tth_tensor *mk = tth_tensor_new(&mt, NULL);
                for (int64_t b = 0; mk && b < B; b++)
                    ((uint8_t *)mk->data)[b] = t < lens[b];
                tth_rexpr *m, *zero;
                RCHECK(m = k_tensor(c, mk));
                RCHECK(zero = k_scalar(c, fdt, 0));
                tth_rexpr *a1[3] = {m, hn, hprev}, *a2[3] = {m, hn, zero};
                RCHECK(y = call(c, TTH_OP_WHERE, a2, 3, NULL));
                RCHECK(hn = call(c, TTH_OP_WHERE, a1, 3, NULL));
                if (cn) {
                    tth_rexpr *a3[3] = {m, cn, cprev};
                    RCHECK(cn = call(c, TTH_OP_WHERE, a3, 3, NULL));
                }
            }
            int64_t s4[4] = {1, 1, B, H};
            RCHECK(ys[t] = reshape(c, y, s4, 4));
            hprev = hn;
            if (cn)
                cprev = cn;
        }
        RCHECK(ys_dir[d] = T == 1 ? ys[0] : call(c, TTH_OP_CONCATENATE, ys, (size_t)T, json_pack("{s:i}", "axis", 0)));
        int64_t s3[3] = {1, B, H};
        RCHECK(yh_dir[d] = reshape(c, hprev, s3, 3));
        if (kind == RNN_LSTM)
            RCHECK(yc_dir[d] = reshape(c, cprev, s3, 3));
    }
    tth_rexpr *y, *yh, *yc = NULL;
    RCHECK(y = ndir == 1 ? ys_dir[0] : call(c, TTH_OP_CONCATENATE, ys_dir, 2, json_pack("{s:i}", "axis", 1)));
    RCHECK(yh = ndir == 1 ? yh_dir[0] : call(c, TTH_OP_CONCATENATE, yh_dir, 2, json_pack("{s:i}", "axis", 0)));
    if (kind == RNN_LSTM)
        RCHECK(yc = ndir == 1 ? yc_dir[0] : call(c, TTH_OP_CONCATENATE, yc_dir, 2, json_pack("{s:i}", "axis", 0)));
    if (layout) { /* Y [B, T, dirs, H], Y_h and Y_c [B, dirs, H] */
        int64_t p4[4] = {2, 0, 1, 3}, p3[3] = {1, 0, 2};
        RCHECK(y = call1(c, TTH_OP_TRANSPOSE, y, json_pack("{s:o}", "axes", tth__json_ints(p4, 4))));
        RCHECK(yh = call1(c, TTH_OP_TRANSPOSE, yh, json_pack("{s:o}", "axes", tth__json_ints(p3, 3))));
        if (yc)
            RCHECK(yc = call1(c, TTH_OP_TRANSPOSE, yc, json_pack("{s:o}", "axes", tth__json_ints(p3, 3))));
    }
    out[0] = y;
    if (nout > 1)
        out[1] = yh;
    if (nout > 2)
        out[2] = yc;
#undef RCHECK
done:
    free(ys);
    return rc;
}

/* RNN, GRU and LSTM: the row's arg is the kind (RNN_SIMPLE, RNN_GRU, RNN_LSTM). */
static int op_recurrent(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return recurrent(c, in, nin, out, nout, (int)c->arg);
}

/* Resize's roi input (opset 11+) as resize2d's "roi" [h0, w0, h1, w1]: a constant of 8 values,
 * the starts then the ends of N, C, H, W, with N and C whole (0 to 1). 0 or negative with diag. */
static int resize_roi(tth_onnx_ctx *c, tth_rexpr *r, json_t *attrs)
{
    if (!r || tth_ttype_numel(tt(r)) == 0)
        return tth__onnx_fail(c, TTH_EMODEL, "coordinate_transformation_mode tf_crop_and_resize needs input 'roi'");
    if (r->kind != TTH_REXPR_CONST) {
        tth__onnx_fail(c, TTH_EUNSUPPORTED, "input 'roi' is not a constant (a dynamic value)");
        tth_diag_hint(c->diag, "when it is a graph input, fix it at compile time: tthctl compile --bind NAME=FILE");
        return c->diag->code;
    }
    if (tth_ttype_numel(tt(r)) != 8)
        return tth__onnx_fail(c, TTH_EMODEL, "input 'roi' must hold 8 values (the starts and ends of 4 axes)");
    double v[8];
    for (int i = 0; i < 8; i++)
        v[i] = tth__ld_f64(r->u.constant.value, i);
    if (v[0] != 0 || v[1] != 0 || v[4] != 1 || v[5] != 1)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: roi must keep N and C whole");
    json_object_set_new(attrs, "roi", json_pack("[f,f,f,f]", v[2], v[3], v[6], v[7]));
    json_object_set_new(attrs, "extrapolation_value", json_real(af(c, "extrapolation_value", 0.0)));
    return 0;
}

/* Resize's mode (nearest, linear or bilinear, cubic with cubic_coeff_a and exclude_outside) and,
 * from opset 11, coordinate_transformation_mode (tf_crop_and_resize with its roi and
 * extrapolation_value: only given sizes) and nearest_mode, into resize2d's attrs. Upsample and
 * Resize-10 are asymmetric with floor. exclude_outside is kept for cubic only: nearest and
 * linear read the same values with it (docs/operators.md "Resize"). 0 or negative with diag. */
static int resize_modes(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, int upsample, int by_sizes, json_t *attrs)
{
    static const char *const ctms[] = {"half_pixel",         "asymmetric",           "align_corners",
                                       "pytorch_half_pixel", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
    const char *mode = as(c, "mode", "nearest"), *ctm = "asymmetric", *nm = "floor";
    if (!strcmp(mode, "bilinear"))
        mode = "linear";
    if (strcmp(mode, "nearest") && strcmp(mode, "linear") && strcmp(mode, "cubic"))
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: resize mode '%s'", mode);
    if (!upsample && c->version >= 11) {
        ctm = as(c, "coordinate_transformation_mode", "half_pixel");
        nm = as(c, "nearest_mode", "round_prefer_floor");
        size_t i = 0;
        while (i < sizeof ctms / sizeof ctms[0] && strcmp(ctm, ctms[i]))
            i++;
        if (i == sizeof ctms / sizeof ctms[0])
            return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: coordinate_transformation_mode '%s'",
                                  ctm);
        if (strcmp(nm, "round_prefer_floor") && strcmp(nm, "round_prefer_ceil") && strcmp(nm, "floor") &&
            strcmp(nm, "ceil"))
            return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: nearest_mode '%s'", nm);
    }
    if (ai(c, "antialias", 0))
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: Resize antialias=1 (opset 18)");
    json_object_set_new(attrs, "method", json_string(mode));
    json_object_set_new(attrs, "coordinate_transformation_mode", json_string(ctm));
    json_object_set_new(attrs, "nearest_mode", json_string(nm));
    if (!strcmp(mode, "cubic")) {
        json_object_set_new(attrs, "cubic_coeff_a", json_real(af(c, "cubic_coeff_a", -0.75)));
        json_object_set_new(attrs, "exclude_outside", json_boolean(ai(c, "exclude_outside", 0) != 0));
    }
    if (strcmp(ctm, "tf_crop_and_resize"))
        return 0;
    if (!by_sizes)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED,
                              "unsupported attribute value: tf_crop_and_resize with scales (only with sizes)");
    return resize_roi(c, nin > 1 ? in[1] : NULL, attrs);
}

/* Resize's axes and keep_aspect_ratio_policy (18), on the scales (*nsc of them) or sizes (*nsz)
 * given for those axes: both spread over all 4 axes (1 and the input's size elsewhere); with sizes
 * and the policy not_larger (not_smaller), one scale for those axes, the smallest (largest) of
 * size / input, the sizes round(scale * input) and the coordinates computed with that scale
 * (then *keep_scale, and scales hold it). 0 or the diag's code. */
static int resize_axes(tth_onnx_ctx *c, const int64_t *in_shape, double *scales, int *nsc, int64_t *sizes, int *nsz,
                       int *keep_scale)
{
    int64_t ax[MAXV];
    int na = aints(c, "axes", ax, MAXV);
    if (na == -2)
        return c->diag->code;
    const char *policy = as(c, "keep_aspect_ratio_policy", "stretch");
    if (strcmp(policy, "stretch") && strcmp(policy, "not_larger") && strcmp(policy, "not_smaller"))
        return tth__onnx_fail(c, TTH_EMODEL, "Resize keep_aspect_ratio_policy '%s' is not stretch, not_larger or "
                              "not_smaller", policy);
    if (na < 0)
        for (na = 0; na < 4; na++)
            ax[na] = na;
    int given = *nsz >= 0 ? *nsz : *nsc;
    if (given >= 0 && given != na)
        return tth__onnx_fail(c, TTH_EMODEL, "Resize has %d %s for %d axes", given, *nsz >= 0 ? "sizes" : "scales", na);
    double sc[4] = {1, 1, 1, 1};
    int64_t sz[4] = {in_shape[0], in_shape[1], in_shape[2], in_shape[3]};
    for (int i = 0; i < na; i++) {
        if (norm_axis(c, ax[i], 4, &ax[i]))
            return c->diag->code;
        if (*nsz >= 0)
            sz[ax[i]] = sizes[i];
        else if (*nsc >= 0)
            sc[ax[i]] = scales[i];
    }
    if (*nsz >= 0 && strcmp(policy, "stretch")) {
        double s = strcmp(policy, "not_larger") ? 0 : INFINITY;
        for (int i = 0; i < na; i++) {
            double q = (double)sizes[i] / (double)in_shape[ax[i]];
            s = strcmp(policy, "not_larger") ? fmax(s, q) : fmin(s, q);
        }
        for (int i = 0; i < na; i++) {
            sz[ax[i]] = (int64_t)llround(s * (double)in_shape[ax[i]]);
            sc[ax[i]] = s;
        }
        *keep_scale = 1;
    }
    for (int i = 0; i < 4; i++) {
        scales[i] = sc[i];
        sizes[i] = sz[i];
    }
    if (*nsz >= 0)
        *nsz = 4;
    if (*nsc >= 0 || *keep_scale)
        *nsc = 4;
    return 0;
}

/* Resize (10: X, scales; 11+: X, roi, scales, sizes) and Upsample (7: scales attribute; 9:
 * scales input). 4-D NCHW only, N and C unscaled; nearest, linear and cubic. Given scales, the output
 * sizes are floor(input * scale) and the coordinates use the scales themselves (resize2d's
 * "scale" attribute), as ONNX says. */
static int resize(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, int upsample)
{
    NEED(1);
    tth_rexpr *x = in[0];
    if (rank(x) != 4)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: %s of a rank-%d tensor (4-D only)",
                              c->node->op_type, rank(x));
    double scales[MAXV];
    int64_t sizes[MAXV];
    int nsc = -1, nsz = -1;
    tth_rexpr *sc_in = NULL, *sz_in = NULL;
    if (upsample && c->version < 9) {
        nsc = afloats(c, "scales", scales, MAXV);
        if (nsc == -2)
            return c->diag->code;
    } else if (upsample || c->version < 11) {
        sc_in = nin > 1 ? in[1] : NULL;
    } else {
        sc_in = nin > 2 ? in[2] : NULL;
        sz_in = nin > 3 ? in[3] : NULL;
    }
    if (sc_in && tth_ttype_numel(tt(sc_in)) > 0) {
        if (sc_in->kind != TTH_REXPR_CONST)
            return tth__onnx_fail(c, TTH_EUNSUPPORTED, "input 'scales' is not a constant (a dynamic shape)");
        nsc = (int)tth_ttype_numel(tt(sc_in));
        if (nsc > MAXV)
            return tth__onnx_fail(c, TTH_EMODEL, "too many scales");
        for (int i = 0; i < nsc; i++)
            scales[i] = tth__ld_f64(sc_in->u.constant.value, i);
    }
    if (sz_in && tth_ttype_numel(tt(sz_in)) > 0) {
        nsz = vints(c, sz_in, "sizes", sizes, MAXV);
        if (nsz == -2)
            return c->diag->code;
    }
    int keep_scale = 0;
    if (!upsample && c->version >= 18) {
        int rc = resize_axes(c, tt(x)->shape, scales, &nsc, sizes, &nsz, &keep_scale);
        if (rc)
            return rc;
    }
    int64_t oh, ow;
    if (nsz >= 0) {
        if (nsz != 4 || sizes[0] != tt(x)->shape[0] || sizes[1] != tt(x)->shape[1])
            return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: sizes must keep N and C");
        oh = sizes[2];
        ow = sizes[3];
    } else if (nsc >= 0) {
        if (nsc != 4 || scales[0] != 1.0 || scales[1] != 1.0)
            return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: scales must keep N and C");
        double fh = (double)tt(x)->shape[2] * scales[2], fw = (double)tt(x)->shape[3] * scales[3];
        if (!(fh >= 0 && fw >= 0 && fh < 1e9 && fw < 1e9))
            return tth__onnx_fail(c, TTH_EMODEL, "bad resize scales");
        oh = (int64_t)floor(fh);
        ow = (int64_t)floor(fw);
    } else {
        return tth__onnx_fail(c, TTH_EMODEL, "%s needs scales or sizes", c->node->op_type);
    }
    if (oh <= 0 || ow <= 0)
        return tth__onnx_fail(c, TTH_EMODEL, "resize to an empty output");
    int64_t os4[4] = {tt(x)->shape[0], tt(x)->shape[1], oh, ow};
    if (oh > TTH_IMPORT_MAX_TENSOR || ow > TTH_IMPORT_MAX_TENSOR || !tth__onnx_shape_ok(os4, 4))
        return tth__onnx_fail(c, TTH_ELIMIT, "resize result too large");
    int64_t sz[2] = {oh, ow};
    json_t *attrs = json_pack("{s:o}", "size", tth__json_ints(sz, 2));
    if (!attrs)
        return tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
    int rc = resize_modes(c, in, nin, upsample, nsz >= 0, attrs);
    if (rc) {
        json_decref(attrs);
        return rc;
    }
    if ((nsz < 0 || keep_scale) && ((double)oh != (double)tt(x)->shape[2] * scales[2] ||
                                    (double)ow != (double)tt(x)->shape[3] * scales[3]))
        json_object_set_new(attrs, "scale", json_pack("[f,f]", scales[2], scales[3]));
    CHECK(out[0] = call1(c, TTH_OP_RESIZE2D, x, attrs));
    return 0;
}
/* Resize (arg 0) and Upsample (arg 1). */
static int op_resize(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return resize(c, in, nin, out, (int)c->arg);
}

/* RoiAlign (opset 10, 16): vision.roi_align of X, rois and batch_indices (run-time tensors). The
 * coordinate_transformation_mode of opset 16 (default half_pixel) is the relay op's `aligned`;
 * opset 10 has none and behaves as output_half_pixel. */
static int op_roi_align(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(3);
    const char *mode = as(c, "mode", "avg");
    const char *ctm = c->version >= 16 ? as(c, "coordinate_transformation_mode", "half_pixel") : "output_half_pixel";
    if (strcmp(mode, "avg") && strcmp(mode, "max"))
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: RoiAlign mode '%s'", mode);
    if (strcmp(ctm, "half_pixel") && strcmp(ctm, "output_half_pixel"))
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: RoiAlign coordinate_transformation_mode '%s'",
                              ctm);
    int64_t oh = ai(c, "output_height", 1), ow = ai(c, "output_width", 1), ratio = ai(c, "sampling_ratio", 0);
    if (oh < 1 || ow < 1 || ratio < 0)
        return tth__onnx_fail(c, TTH_EMODEL, "RoiAlign output_height %lld, output_width %lld, sampling_ratio %lld: "
                              "the sizes must be positive, the ratio not negative", (long long)oh, (long long)ow,
                              (long long)ratio);
    json_t *attrs = json_pack("{s:[I,I],s:f,s:I,s:s,s:b}", "pooled_size", (json_int_t)oh, (json_int_t)ow,
                              "spatial_scale", af(c, "spatial_scale", 1.0), "sampling_ratio", (json_int_t)ratio,
                              "mode", mode, "aligned", !strcmp(ctm, "half_pixel"));
    CHECK(out[0] = call(c, TTH_OP_ROI_ALIGN, in, 3, attrs));
    return 0;
}

/* GridSample (16: 4-D, modes bilinear, nearest, bicubic; 20: N-D, linear, nearest, cubic; either
 * spelling is taken at any opset): image.grid_sample. X and grid float32 or float64, 1 to 3
 * spatial axes; integer and 16-bit float X, and more axes, are refused by name. */
static int op_grid_sample(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    const char *mode = as(c, "mode", "linear"), *pad = as(c, "padding_mode", "zeros");
    if (!strcmp(mode, "bilinear") || !strcmp(mode, "bicubic"))
        mode = mode[2] == 'l' ? "linear" : "cubic";
    if (strcmp(mode, "nearest") && strcmp(mode, "linear") && strcmp(mode, "cubic"))
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: GridSample mode '%s'", mode);
    if (strcmp(pad, "zeros") && strcmp(pad, "border") && strcmp(pad, "reflection"))
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: GridSample padding_mode '%s'", pad);
    for (int i = 0; i < 2; i++)
        if (tt(in[i])->dtype != TTH_F32 && tt(in[i])->dtype != TTH_F64)
            return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: GridSample %s of element type %s "
                                  "(float32 and float64 only)", i ? "grid" : "X", tth_dtype_name(tt(in[i])->dtype));
    if (rank(in[0]) < 3 || rank(in[0]) > 5)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: GridSample of a rank-%d X (1 to 3 "
                              "spatial axes: ranks 3 to 5)", rank(in[0]));
    json_t *attrs = json_pack("{s:s,s:s,s:b}", "method", mode, "padding_mode", pad, "align_corners",
                              ai(c, "align_corners", 0) != 0);
    CHECK(out[0] = call2(c, TTH_OP_GRID_SAMPLE, in[0], in[1], attrs));
    return 0;
}

/* The mean of x over axes, d = x - mean and the (biased) variance mean(d * d) (keepdims). */
static int moments(tth_onnx_ctx *c, tth_rexpr *x, const int64_t *axes, int na, tth_rexpr **mean_out,
                   tth_rexpr **d_out, tth_rexpr **var_out)
{
    tth_rexpr *mean, *d, *sq;
    CHECK(mean = call1(c, TTH_OP_MEAN, x, json_pack("{s:o,s:b}", "axis", tth__json_ints(axes, na), "keepdims", 1)));
    CHECK(d = call2(c, TTH_OP_SUBTRACT, x, mean, NULL));
    CHECK(sq = call2(c, TTH_OP_MULTIPLY, d, d, NULL));
    CHECK(*var_out = call1(c, TTH_OP_MEAN, sq, json_pack("{s:o,s:b}", "axis", tth__json_ints(axes, na), "keepdims", 1)));
    *mean_out = mean;
    *d_out = d;
    return 0;
}

/* Normalize x over axes: returns d = x - mean and inv = 1 / sqrt(var + eps) (keepdims). */
static int normalize(tth_onnx_ctx *c, tth_rexpr *x, const int64_t *axes, int na, double eps, int sqrt_then_add,
                     tth_rexpr **mean_out, tth_rexpr **d_out, tth_rexpr **inv_out)
{
    tth_rexpr *var, *ke = kx(c, x, eps), *one = kx(c, x, 1.0), *den;
    CHECK(ke && one);
    int rc = moments(c, x, axes, na, mean_out, d_out, &var);
    if (rc)
        return rc;
    if (sqrt_then_add) {
        CHECK(den = call1(c, TTH_OP_SQRT, var, NULL));
        CHECK(den = call2(c, TTH_OP_ADD, den, ke, NULL));
    } else {
        CHECK(den = call2(c, TTH_OP_ADD, var, ke, NULL));
        CHECK(den = call1(c, TTH_OP_SQRT, den, NULL));
    }
    CHECK(*inv_out = call2(c, TTH_OP_DIVIDE, one, den, NULL));
    return 0;
}

/* running * momentum + batch * (1 - momentum): BatchNormalization's running statistic */
static tth_rexpr *running_stat(tth_onnx_ctx *c, tth_rexpr *running, tth_rexpr *batch, double momentum)
{
    tth_rexpr *km = kx(c, running, momentum), *k1 = kx(c, running, 1.0 - momentum);
    tth_rexpr *a = km ? call2(c, TTH_OP_MULTIPLY, running, km, NULL) : NULL;
    tth_rexpr *b = a && k1 ? call2(c, TTH_OP_MULTIPLY, cast_to(c, batch, tt(running)->dtype), k1, NULL) : NULL;
    return b ? call2(c, TTH_OP_ADD, a, b, NULL) : NULL;
}

/* BatchNormalization with training_mode=1: x normalized with the batch's own mean and biased
 * variance over every axis but 1 (nn.batch_norm with those statistics); the optional outputs 1
 * and 2 are input_mean * momentum + mean * (1 - momentum) and the same for the variance. */
static int batch_norm_training(tth_onnx_ctx *c, tth_rexpr **in, tth_rexpr **out, size_t nout)
{
    int r = rank(in[0]);
    if (r < 2)
        return tth__onnx_fail(c, TTH_EMODEL, "BatchNormalization needs rank >= 2");
    int64_t axes[TTH_MAX_RANK], C = tt(in[0])->shape[1];
    int na = 0;
    for (int i = 0; i < r; i++)
        if (i != 1)
            axes[na++] = i;
    tth_rexpr *mean, *d, *var;
    int rc = moments(c, in[0], axes, na, &mean, &d, &var);
    if (rc)
        return rc;
    CHECK((mean = reshape(c, mean, &C, 1)) && (var = reshape(c, var, &C, 1)));
    tth_rexpr *args[5] = {in[0], in[1], in[2], mean, var};
    CHECK(out[0] = call(c, TTH_OP_BATCH_NORM, args, 5, json_pack("{s:f}", "epsilon", af(c, "epsilon", 1e-5))));
    double momentum = af(c, "momentum", 0.9);
    if (nout > 1 && c->node->output[1] && c->node->output[1][0])
        CHECK(out[1] = running_stat(c, in[3], mean, momentum));
    if (nout > 2 && c->node->output[2] && c->node->output[2][0])
        CHECK(out[2] = running_stat(c, in[4], var, momentum));
    return 0;
}

/* LayerNormalization (17): normalize over axis..rank-1; Y, Mean, InvStdDev. */
static int op_layer_norm(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    int r = rank(in[0]);
    int64_t axis, axes[TTH_MAX_RANK];
    if (norm_axis(c, ai(c, "axis", -1), r, &axis))
        return c->diag->code;
    int na = 0;
    for (int64_t i = axis; i < r; i++)
        axes[na++] = i;
    if (axis == r - 1 && nout == 1 && tt(in[0])->dtype == TTH_F32) {
        /* over the last axis, only Y asked for: the one operator with a kernel of its own
         * (docs/lowering.md, "Layer normalization"); a missing B is zeros */
        tth_rexpr *b = nin > 2 && in[2] ? in[2] : k_scalar(c, TTH_F32, 0), *args[3] = {in[0], in[1], b};
        CHECK(b);
        CHECK(out[0] = call(c, TTH_OP_LAYER_NORM, args, 3, json_pack("{s:f}", "epsilon", af(c, "epsilon", 1e-5))));
        return 0;
    }
    tth_rexpr *mean, *d, *inv, *y;
    int rc = normalize(c, in[0], axes, na, af(c, "epsilon", 1e-5), 0, &mean, &d, &inv);
    if (rc)
        return rc;
    CHECK(y = call2(c, TTH_OP_MULTIPLY, d, inv, NULL));
    CHECK(y = call2(c, TTH_OP_MULTIPLY, y, in[1], NULL));
    if (nin > 2 && in[2])
        CHECK(y = call2(c, TTH_OP_ADD, y, in[2], NULL));
    out[0] = y;
    if (nout > 1)
        out[1] = mean;
    if (nout > 2)
        out[2] = inv;
    return 0;
}

/* Per-channel [C] vector as [C, 1, ...] for a rank-r activation. */
static tth_rexpr *per_channel(tth_onnx_ctx *c, tth_rexpr *v, int r)
{
    int64_t s[TTH_MAX_RANK];
    s[0] = tth_ttype_numel(tt(v));
    for (int i = 1; i < r - 1; i++)
        s[i] = 1;
    return reshape(c, v, s, r - 1 > 0 ? r - 1 : 1);
}

/* InstanceNormalization: normalize each (n, c) over the spatial dims; scale and B per channel. */
static int op_instance_norm(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(3);
    int r = rank(in[0]);
    if (r < 3)
        return tth__onnx_fail(c, TTH_EMODEL, "InstanceNormalization needs rank >= 3");
    int64_t axes[TTH_MAX_RANK];
    int na = 0;
    for (int i = 2; i < r; i++)
        axes[na++] = i;
    tth_rexpr *mean, *d, *inv, *y, *sc = per_channel(c, in[1], r), *b = per_channel(c, in[2], r);
    CHECK(sc && b);
    int rc = normalize(c, in[0], axes, na, af(c, "epsilon", 1e-5), 0, &mean, &d, &inv);
    if (rc)
        return rc;
    CHECK(y = call2(c, TTH_OP_MULTIPLY, d, inv, NULL));
    CHECK(y = call2(c, TTH_OP_MULTIPLY, y, sc, NULL));
    CHECK(out[0] = call2(c, TTH_OP_ADD, y, b, NULL));
    return 0;
}

/* GroupNormalization (18, 21): x of (N, C, ...) seen as (N, G, C/G * the rest), normalized over
 * its last axis, then scale and bias per channel: given per group at opset 18 (each repeated
 * for the group's channels), per channel from opset 21 (docs/operators.md, "Opsets 18 to 21") */
static int op_group_norm(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(3);
    const tth_ttype *xt = tt(in[0]);
    int r = xt->rank;
    int64_t G = ai(c, "num_groups", 0);
    if (r < 3)
        return tth__onnx_fail(c, TTH_EMODEL, "GroupNormalization needs rank >= 3");
    int64_t N = xt->shape[0], C = xt->shape[1], rest = 1;
    if (G < 1 || C % G)
        return tth__onnx_fail(c, TTH_EMODEL, "GroupNormalization num_groups %lld does not divide %lld channels",
                              (long long)G, (long long)C);
    for (int i = 2; i < r; i++)
        rest *= xt->shape[i];
    int64_t per = c->version >= 21 ? C : G;
    for (int k = 1; k < 3; k++)
        if (tth_ttype_numel(tt(in[k])) != per)
            return tth__onnx_fail(c, TTH_EMODEL, "GroupNormalization %s has %lld values; opset %lld wants one per %s "
                                  "(%lld)", k == 1 ? "scale" : "bias", (long long)tth_ttype_numel(tt(in[k])),
                                  (long long)c->opset, c->version >= 21 ? "channel" : "group", (long long)per);
    int64_t s3[3] = {N, G, C / G * rest}, axis = 2;
    tth_rexpr *x3, *mean, *d, *inv, *y, *sc = in[1], *b = in[2];
    CHECK(x3 = reshape(c, in[0], s3, 3));
    int rc = normalize(c, x3, &axis, 1, af(c, "epsilon", 1e-5), 0, &mean, &d, &inv);
    if (rc)
        return rc;
    CHECK(y = call2(c, TTH_OP_MULTIPLY, d, inv, NULL));
    CHECK(y = reshape(c, y, xt->shape, r));
    if (per == G && G != C) { /* one value per group: repeated for its C/G channels */
        int64_t g2[2] = {G, 1}, gc[2] = {G, C / G};
        for (int k = 0; k < 2; k++) {
            tth_rexpr **v = k ? &b : &sc;
            CHECK(*v = reshape(c, *v, g2, 2));
            CHECK(*v = call1(c, TTH_OP_BROADCAST_TO, *v, json_pack("{s:o}", "shape", tth__json_ints(gc, 2))));
            CHECK(*v = reshape(c, *v, &C, 1));
        }
    }
    CHECK(sc = per_channel(c, sc, r));
    CHECK(b = per_channel(c, b, r));
    CHECK(y = call2(c, TTH_OP_MULTIPLY, y, sc, NULL));
    CHECK(out[0] = call2(c, TTH_OP_ADD, y, b, NULL));
    return 0;
}

/* MeanVarianceNormalization: (x - mean) / (sqrt(var) + 1e-9) over axes (default 0, 2, 3). */
static int op_mvn(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int r = rank(in[0]);
    int64_t axes[MAXV] = {0, 2, 3};
    int na = aints(c, "axes", axes, MAXV);
    if (na == -2)
        return c->diag->code;
    if (na < 0)
        na = 3;
    for (int i = 0; i < na; i++)
        if (norm_axis(c, axes[i], r, &axes[i]))
            return c->diag->code;
    tth_rexpr *mean, *d, *inv;
    int rc = normalize(c, in[0], axes, na, 1e-9, 1, &mean, &d, &inv);
    if (rc)
        return rc;
    CHECK(out[0] = call2(c, TTH_OP_MULTIPLY, d, inv, NULL));
    return 0;
}

/* Hardmax: 1 at the first maximum along the axis (flattened to 2-D before opset 13). */
static int op_hardmax(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int r = rank(in[0]);
    int64_t axis;
    if (norm_axis(c, ai(c, "axis", c->version < 13 ? 1 : -1), r, &axis))
        return c->diag->code;
    tth_rexpr *x = in[0];
    if (c->version < 13) {
        int64_t s[2] = {1, 1};
        for (int i = 0; i < r; i++)
            s[i < axis ? 0 : 1] *= tt(x)->shape[i];
        CHECK(x = reshape(c, x, s, 2));
        axis = 1;
    }
    int xr = rank(x);
    int64_t d = tt(x)->shape[axis];
    if (d > TTH_IMPORT_MAX_ELEMS)
        return tth__onnx_fail(c, TTH_ELIMIT, "Hardmax axis too long");
    int64_t s[TTH_MAX_RANK];
    for (int i = 0; i < xr; i++)
        s[i] = i == axis ? d : 1;
    tth_rexpr *k, *am, *eq;
    CHECK(k = k_iota(c, s, xr));
    CHECK(am = call1(c, TTH_OP_ARGMAX, x,
                     json_pack("{s:I,s:b,s:b}", "axis", (json_int_t)axis, "keepdims", 1, "select_last_index", 0)));
    CHECK(eq = call2(c, TTH_OP_EQUAL, am, k, NULL));
    CHECK(eq = cast_to(c, eq, tt(x)->dtype));
    CHECK(out[0] = reshape(c, eq, tt(in[0])->shape, r));
    return 0;
}

/* LRN: x / (bias + alpha / size * sum of squares over a window of channels) ^ beta; the window
 * sum is an average pool (count_include_pad) over the channel axis, times size. */
static int op_lrn(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    if (rank(in[0]) != 4)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: LRN of rank %d (4-D only)", rank(in[0]));
    int64_t size = ai(c, "size", 0), N = tt(in[0])->shape[0], C = tt(in[0])->shape[1],
            HW = tt(in[0])->shape[2] * tt(in[0])->shape[3];
    if (size < 1 || size > 1 << 16)
        return tth__onnx_fail(c, TTH_EMODEL, "LRN size %lld out of range", (long long)size);
    double alpha = af(c, "alpha", 1e-4), beta = af(c, "beta", 0.75), bias = af(c, "bias", 1.0);
    int64_t s4[4] = {N, 1, C, HW}, lo = (size - 1) / 2, hi = size - 1 - lo;
    tth_rexpr *sq, *p, *t;
    CHECK(sq = call2(c, TTH_OP_MULTIPLY, in[0], in[0], NULL));
    CHECK(sq = reshape(c, sq, s4, 4));
    int64_t ps[2] = {size, 1}, one2[2] = {1, 1}, pad[4] = {lo, 0, hi, 0};
    CHECK(p = call1(c, TTH_OP_AVG_POOL2D, sq,
                    json_pack("{s:o,s:o,s:o,s:b}", "pool_size", tth__json_ints(ps, 2), "strides", tth__json_ints(one2, 2),
                              "padding", tth__json_ints(pad, 4), "count_include_pad", 1)));
    CHECK(p = reshape(c, p, tt(in[0])->shape, 4));
    tth_rexpr *ka = kx(c, in[0], alpha), *kb = kx(c, in[0], bias), *kbeta = kx(c, in[0], beta);
    CHECK(ka && kb && kbeta);
    CHECK(t = call2(c, TTH_OP_MULTIPLY, p, ka, NULL)); /* avg * size * alpha / size */
    CHECK(t = call2(c, TTH_OP_ADD, t, kb, NULL));
    CHECK(t = call2(c, TTH_OP_POWER, t, kbeta, NULL));
    CHECK(out[0] = call2(c, TTH_OP_DIVIDE, in[0], t, NULL));
    return 0;
}

/* ---------------------------------------------------------------- the rows */

const tth_onnx_op tth__onnx_nn_ops[] = {
    {"AveragePool", 1, op_pool, 0, NULL},
    {"BatchNormalization", 1, op_batch_norm, 0, NULL},
    {"BatchNormalization", 9, op_batch_norm, 0, NULL},
    {"BatchNormalization", 14, op_batch_norm, 0, NULL},
    {"Conv", 1, op_conv, 0, NULL},
    {"ConvTranspose", 1, op_conv_transpose, 0, NULL},
    {"Det", 11, op_det, 0, NULL},
    {"Dropout", 1, op_dropout, 0, NULL},
    {"Einsum", 12, op_einsum, 0, NULL},
    {"GRU", 1, op_recurrent, RNN_GRU, NULL},
    {"Gemm", 1, op_gemm, 0, NULL},
    {"GlobalAveragePool", 1, op_global_pool, 0, NULL},
    {"GlobalMaxPool", 1, op_global_pool, 1, NULL},
    {"GridSample", 16, op_grid_sample, 0, NULL},
    {"GroupNormalization", 18, op_group_norm, 0, NULL},
    {"GroupNormalization", 21, op_group_norm, 0, NULL},
    {"Hardmax", 1, op_hardmax, 0, NULL},
    {"Hardmax", 13, op_hardmax, 0, NULL},
    {"InstanceNormalization", 1, op_instance_norm, 0, NULL},
    {"LRN", 1, op_lrn, 0, NULL},
    {"LSTM", 1, op_recurrent, RNN_LSTM, NULL},
    {"LayerNormalization", 17, op_layer_norm, 0, NULL},
    {"LogSoftmax", 1, op_softmax, TTH_OP_LOG_SOFTMAX, NULL},
    {"LogSoftmax", 13, op_softmax, TTH_OP_LOG_SOFTMAX, NULL},
    {"MatMul", 1, op_matmul, 0, NULL},
    {"MaxPool", 1, op_pool, 1, NULL},
    {"MaxUnpool", 9, op_max_unpool, 0, NULL},
    {"MeanVarianceNormalization", 9, op_mvn, 0, NULL},
    {"RNN", 1, op_recurrent, RNN_SIMPLE, NULL},
    {"Resize", 10, op_resize, 0, NULL},
    {"Resize", 11, op_resize, 0, NULL},
    {"Resize", 18, op_resize, 0, NULL},
    {"RoiAlign", 10, op_roi_align, 0, NULL},
    {"RoiAlign", 16, op_roi_align, 0, NULL},
    {"Softmax", 1, op_softmax, TTH_OP_SOFTMAX, NULL},
    {"Softmax", 13, op_softmax, TTH_OP_SOFTMAX, NULL},
    {"Upsample", 1, NULL, 0, "Upsample-1 (experimental: height_scale, width_scale) is not supported; export with opset 7 to 9 or use Resize"},
    {"Upsample", 7, op_resize, 1, NULL},
    {"Upsample", 9, op_resize, 1, NULL},
    {"Upsample", 10, NULL, 0, "Upsample is deprecated from opset 10: Resize replaces it"},
    {NULL, 0, NULL, 0, NULL},
};
