/* fold_batch_norm.c: remove every nn.batch_norm. Requires: a well-typed module; best after
 * constant folding (so that the statistics are constants).
 *  - conv2d (constant weight, constant or no bias) whose only user is the batch norm, with
 *    constant statistics: scale the weights per output channel and fold the shift into the bias;
 *  - otherwise: x * s + t with s = scale / sqrt(var + eps) and t = bias - mean * s, shaped
 *    [C, 1, ...] to broadcast over axis 1 (constants when the statistics are, else ops). */
#include <math.h>
#include <string.h>

#include "frontend_internal.h"

static int all_const(tth_rexpr *const *a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!a[i] || a[i]->kind != TTH_REXPR_CONST)
            return 0;
    return 1;
}

/* Channel scale s[c] and shift t[c] from constant statistics; C values each. */
static void bn_coeffs(tth_rexpr *const *args, double eps, int64_t c, double *s, double *t)
{
    const tth_tensor *g = args[1]->u.constant.value, *b = args[2]->u.constant.value, *mu = args[3]->u.constant.value,
                     *var = args[4]->u.constant.value;
    s[0] = tth__ld_f64(g, c) / sqrt(tth__ld_f64(var, c) + eps);
    t[0] = tth__ld_f64(b, c) - tth__ld_f64(mu, c) * s[0];
}

/* Two new tensors of types ta and tb; 0, or TTH_ENOMEM with neither kept and diag set at span. */
static int new_pair(const tth_ttype *ta, tth_tensor **a, const tth_ttype *tb, tth_tensor **b, const char *span,
                    tth_diag *diag)
{
    *a = tth_tensor_new(ta, NULL);
    *b = tth_tensor_new(tb, NULL);
    if (*a && *b)
        return 0;
    tth_tensor_unref(*a);
    tth_tensor_unref(*b);
    return tth_diag_set(diag, TTH_ENOMEM, span, "out of memory folding batch norm");
}

static tth_rexpr *fold_into_conv(tth_relay_module *m, tth_rexpr *conv, tth_rexpr *const *args, double eps,
                                 tth_diag *diag)
{
    const tth_tensor *w = conv->u.call.args[1]->u.constant.value;
    const tth_tensor *b0 = conv->u.call.nargs > 2 ? conv->u.call.args[2]->u.constant.value : NULL;
    int64_t O = w->type.shape[0], per = tth_ttype_numel(&w->type) / (O ? O : 1);
    tth_ttype bt = {.dtype = w->type.dtype, .rank = 1, .shape = {O}};
    tth_tensor *nw, *nb;
    if (new_pair(&w->type, &nw, &bt, &nb, conv->span, diag))
        return NULL;
    for (int64_t o = 0; o < O; o++) {
        double s, t;
        bn_coeffs(args, eps, o, &s, &t);
        if (w->type.dtype == TTH_F32) {
            /* the common case, without a dtype switch per element (ResNet-50: 25 M weights) */
            const float *src = (const float *)w->data + o * per;
            float *dst = (float *)nw->data + o * per;
            for (int64_t k = 0; k < per; k++)
                dst[k] = (float)((double)src[k] * s);
        } else {
            for (int64_t k = 0; k < per; k++)
                tth__st_f64(nw, o * per + k, tth__ld_f64(w, o * per + k) * s);
        }
        tth__st_f64(nb, o, (b0 ? tth__ld_f64(b0, o) : 0.0) * s + t);
    }
    tth_rexpr *cargs[3] = {conv->u.call.args[0], tth_relay_const(m, nw, NULL), tth_relay_const(m, nb, NULL)};
    if (!cargs[1] || !cargs[2]) {
        tth_diag_set(diag, TTH_ENOMEM, conv->span, "out of memory folding batch norm");
        return NULL;
    }
    return tth_relay_call(m, TTH_OP_CONV2D, cargs, 3, json_incref(conv->u.call.attrs), diag);
}

static tth_rexpr *bn_visit(void *ctx, tth_relay_module *m, tth_rexpr *orig, tth_rexpr *const *args, size_t nargs,
                           tth_diag *diag)
{
    tth__rewriter *rw = ctx;
    if (orig->kind != TTH_REXPR_CALL || orig->u.call.fn || orig->u.call.op != TTH_OP_BATCH_NORM || nargs != 5)
        return TTH_REWRITE_KEEP;
    double eps = tth__attr_num(orig->u.call.attrs, "epsilon", 1e-5);
    tth_rexpr *x = args[0];
    const tth_ttype *xt = &x->type.tensor;
    int64_t C = xt->rank > 1 ? xt->shape[1] : 1;
    tth_rexpr *ox = orig->u.call.args[0];
    tth_relay_set_span(m, orig->span);
    /* into the preceding convolution */
    if (all_const(args + 1, 4) && x->kind == TTH_REXPR_CALL && !x->u.call.fn && x->u.call.op == TTH_OP_CONV2D &&
        ox->id <= rw->max_id && rw->nusers[ox->id] == 1 && tth_dtype_is_float(xt->dtype) &&
        all_const(x->u.call.args + 1, x->u.call.nargs - 1)) {
        tth_rexpr *r = fold_into_conv(m, x, args, eps, diag);
        tth_relay_set_span(m, NULL);
        return r;
    }
    /* multiply + add */
    int64_t shape[TTH_MAX_RANK];
    int r = xt->rank > 1 ? xt->rank - 1 : 1;
    shape[0] = C;
    for (int i = 1; i < r; i++)
        shape[i] = 1;
    tth_rexpr *s, *t;
    if (all_const(args + 1, 4)) {
        tth_ttype ct = {.dtype = xt->dtype, .rank = r};
        memcpy(ct.shape, shape, sizeof(int64_t) * (size_t)r);
        tth_tensor *st, *tt;
        if (new_pair(&ct, &st, &ct, &tt, orig->span, diag))
            return NULL;
        for (int64_t c = 0; c < C; c++) {
            double sv, tv;
            bn_coeffs(args, eps, c, &sv, &tv);
            tth__st_f64(st, c, sv);
            tth__st_f64(tt, c, tv);
        }
        s = tth_relay_const(m, st, NULL);
        t = tth_relay_const(m, tt, NULL);
    } else {
        tth_ttype et = {.dtype = args[4]->type.tensor.dtype, .rank = 0};
        tth_tensor *ek = tth_tensor_new(&et, NULL);
        if (ek)
            tth__st_f64(ek, 0, eps);
        tth_rexpr *e = ek ? tth_relay_const(m, ek, NULL) : NULL;
        tth_rexpr *a2[2] = {args[4], e};
        tth_rexpr *ve = e ? tth_relay_call(m, TTH_OP_ADD, a2, 2, NULL, diag) : NULL;
        tth_rexpr *sq = ve ? tth_relay_call(m, TTH_OP_SQRT, &ve, 1, NULL, diag) : NULL;
        tth_rexpr *a3[2] = {args[1], sq};
        s = sq ? tth_relay_call(m, TTH_OP_DIVIDE, a3, 2, NULL, diag) : NULL;
        tth_rexpr *a4[2] = {args[3], s};
        tth_rexpr *ms = s ? tth_relay_call(m, TTH_OP_MULTIPLY, a4, 2, NULL, diag) : NULL;
        tth_rexpr *a5[2] = {args[2], ms};
        t = ms ? tth_relay_call(m, TTH_OP_SUBTRACT, a5, 2, NULL, diag) : NULL;
        if (s && t && r > 1) {
            s = tth_relay_call(m, TTH_OP_RESHAPE, &s, 1, json_pack("{s:o}", "newshape", tth__json_ints(shape, r)), diag);
            t = s ? tth_relay_call(m, TTH_OP_RESHAPE, &t, 1, json_pack("{s:o}", "newshape", tth__json_ints(shape, r)),
                                   diag)
                  : NULL;
        }
    }
    tth_rexpr *y = NULL;
    if (s && t) {
        tth_rexpr *a6[2] = {x, s};
        tth_rexpr *xs = tth_relay_call(m, TTH_OP_MULTIPLY, a6, 2, NULL, diag);
        tth_rexpr *a7[2] = {xs, t};
        y = xs ? tth_relay_call(m, TTH_OP_ADD, a7, 2, NULL, diag) : NULL;
    }
    tth_relay_set_span(m, NULL);
    if (!y && diag && !diag->code)
        tth_diag_set(diag, TTH_EINTERNAL, orig->span, "folding batch norm failed");
    return y;
}

int tth_relay_fold_batch_norm(tth_relay_module *m, tth_diag *diag)
{
    return tth__rewrite_module(m, bn_visit, diag);
}
