/* onnx_reduce.c: the reductions: Reduce*, ArgMax/ArgMin, CumSum, TopK.
 * One function per operator, and the family's rows of the operator table: each row names the
 * opset range it imports (docs/operators.md, "The operator table"). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_ops.h"

/* TopK(x, k): each element's rank along the axis is the count of elements before it in the
 * order (larger first, or smaller with largest=0; equal ones by index), and output position p
 * takes the element of rank p (values and int64 indices). O(L^2) per row: axes up to 4096. */
static int op_topk(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int64_t k;
    if (c->version < 10) {
        k = ai(c, "k", -1);
    } else {
        int64_t kv[1];
        if (nin < 2 || !in[1])
            return tth__onnx_fail(c, TTH_EMODEL, "TopK needs k");
        if (vints(c, in[1], "k", kv, 1) != 1)
            return c->diag->code ? c->diag->code : tth__onnx_fail(c, TTH_EMODEL, "TopK's k holds one value");
        k = kv[0];
    }
    int r = rank(in[0]);
    int64_t axis;
    if (norm_axis(c, ai(c, "axis", -1), r, &axis))
        return c->diag->code;
    const tth_ttype *xt = tt(in[0]);
    int64_t L = xt->shape[axis];
    if (k < 0 || k > L)
        return tth__onnx_fail(c, TTH_EMODEL, "TopK k = %lld for an axis of %lld", (long long)k, (long long)L);
    if (L > 4096 || r + 1 > TTH_MAX_RANK)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "TopK over an axis of %lld (at most 4096) or rank %d", (long long)L,
                              r);
    int largest = (int)ai(c, "largest", 1);
    int64_t si[TTH_MAX_RANK], sj[TTH_MAX_RANK];
    for (int q = 0; q <= r; q++) {
        si[q] = q < axis ? xt->shape[q] : q == axis ? L : q == axis + 1 ? 1 : xt->shape[q - 1];
        sj[q] = q < axis ? xt->shape[q] : q == axis ? 1 : xt->shape[q - 1];
    }
    /* before[i][j]: element j comes before element i */
    tth_ttype bt = {.dtype = TTH_BOOL, .rank = r + 1 - (int32_t)axis};
    for (int q = 0; q < bt.rank; q++)
        bt.shape[q] = q < 2 ? L : 1;
    tth_tensor *lower = tth_tensor_new(&bt, NULL);
    for (int64_t i = 0; lower && i < L; i++)
        for (int64_t j = 0; j < L; j++)
            ((uint8_t *)lower->data)[i * L + j] = j < i;
    tth_rexpr *xi, *xj, *beats, *ties, *kl, *before, *rankv;
    CHECK(xi = reshape(c, in[0], si, r + 1));
    CHECK(xj = reshape(c, in[0], sj, r + 1));
    CHECK(beats = call2(c, largest ? TTH_OP_GREATER : TTH_OP_LESS, xj, xi, NULL));
    CHECK(ties = call2(c, TTH_OP_EQUAL, xj, xi, NULL));
    CHECK(kl = k_tensor(c, lower));
    CHECK(ties = call2(c, TTH_OP_LOGICAL_AND, ties, kl, NULL));
    CHECK(before = call2(c, TTH_OP_LOGICAL_OR, beats, ties, NULL));
    int64_t aj = axis + 1;
    CHECK(rankv = call1(c, TTH_OP_SUM, cast_to(c, before, TTH_I64),
                        json_pack("{s:o,s:b}", "axis", tth__json_ints(&aj, 1), "keepdims", 1))); /* si */
    /* position p takes the element whose rank is p */
    tth_ttype pt = {.dtype = TTH_I64, .rank = r + 1 - (int32_t)axis}, it = pt;
    for (int q = 0; q < pt.rank; q++) {
        pt.shape[q] = q == 1 ? k : 1;
        it.shape[q] = q == 0 ? L : 1;
    }
    tth_tensor *pos = tth_tensor_new(&pt, NULL), *idx = tth_tensor_new(&it, NULL);
    for (int64_t p = 0; pos && p < k; p++)
        ((int64_t *)pos->data)[p] = p;
    for (int64_t i = 0; idx && i < L; i++)
        ((int64_t *)idx->data)[i] = i;
    tth_rexpr *kp, *ki, *sel, *zv, *zi, *vals, *inds;
    CHECK(kp = k_tensor(c, pos));
    CHECK(ki = k_tensor(c, idx));
    CHECK(sel = call2(c, TTH_OP_EQUAL, rankv, kp, NULL)); /* [.., L, k, ..] */
    CHECK(zv = k_scalar(c, xt->dtype, 0));
    CHECK(zi = k_scalar(c, TTH_I64, 0));
    tth_rexpr *wv[3] = {sel, xi, zv}, *wi[3] = {sel, ki, zi};
    CHECK(vals = call(c, TTH_OP_WHERE, wv, 3, NULL));
    CHECK(inds = call(c, TTH_OP_WHERE, wi, 3, NULL));
    int64_t ai_ = axis;
    CHECK(out[0] = call1(c, TTH_OP_SUM, vals, json_pack("{s:o,s:b}", "axis", tth__json_ints(&ai_, 1), "keepdims", 0)));
    if (nout > 1)
        CHECK(out[1] = call1(c, TTH_OP_SUM, inds, json_pack("{s:o,s:b}", "axis", tth__json_ints(&ai_, 1),
                                                            "keepdims", 0)));
    return 0;
}

/* CumSum(x, axis): sum of x over j <= i (j < i exclusive; j >= i, j > i reversed) along the
 * axis, as a product with a constant 0/1 mask [L, L] and a sum over the second L. O(L) work per
 * element: meant for the short axes models take running sums over. */
static int op_cumsum(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    double av;
    if (vscalar(c, in[1], "axis", &av))
        return c->diag->code;
    int r = rank(in[0]);
    int64_t axis;
    if (norm_axis(c, (int64_t)av, r, &axis))
        return c->diag->code;
    const tth_ttype *xt = tt(in[0]);
    int64_t L = xt->shape[axis];
    int excl = (int)ai(c, "exclusive", 0), rev = (int)ai(c, "reverse", 0);
    if (r + 1 > TTH_MAX_RANK || L > 4096)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "CumSum over an axis of %lld (at most 4096) or rank %d",
                              (long long)L, r);
    int64_t xs[TTH_MAX_RANK];
    tth_ttype mt = {.dtype = xt->dtype, .rank = r + 1 - (int32_t)axis};
    for (int k = 0; k <= r; k++)
        xs[k] = k < axis ? xt->shape[k] : k == axis ? 1 : xt->shape[k - 1];
    for (int k = 0; k < mt.rank; k++)
        mt.shape[k] = k == 0 ? L : k == 1 ? L : 1;
    tth_tensor *mask = tth_tensor_new(&mt, NULL);
    for (int64_t i = 0; mask && i < L; i++)
        for (int64_t j = 0; j < L; j++) {
            int on = rev ? (excl ? j > i : j >= i) : (excl ? j < i : j <= i);
            tth__st_f64(mask, i * L + j, on);
        }
    tth_rexpr *x1, *km, *prod;
    CHECK(x1 = reshape(c, in[0], xs, r + 1));
    CHECK(km = k_tensor(c, mask));
    CHECK(prod = call2(c, TTH_OP_MULTIPLY, x1, km, NULL));
    int64_t sa = axis + 1;
    CHECK(out[0] = call1(c, TTH_OP_SUM, prod, json_pack("{s:o,s:b}", "axis", tth__json_ints(&sa, 1), "keepdims", 0)));
    return 0;
}

static int reduce(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, tth_op op, tth_rexpr *x)
{
    NEED(1);
    int r = rank(in[0]);
    int64_t ax[MAXV];
    int na = (nin > 1 && in[1]) ? vints(c, in[1], "axes", ax, MAXV) : aints(c, "axes", ax, MAXV);
    if (na == -2)
        return c->diag->code;
    if (na <= 0 && ai(c, "noop_with_empty_axes", 0)) {
        out[0] = x;
        return 0;
    }
    for (int i = 0; i < na; i++)
        if (norm_axis(c, ax[i], r, &ax[i]))
            return c->diag->code;
    CHECK(out[0] = call1(c, op, x,
                         json_pack("{s:o,s:b}", "axis", tth__json_ints(ax, na > 0 ? na : 0), "keepdims",
                                   (int)ai(c, "keepdims", 1))));
    return 0;
}
#define REDUCE(fname, OP)                                                                     \
    static int fname(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout) \
    {                                                                                         \
        if (nin < 1 || !in[0])                                                                \
            return tth__onnx_fail(c, TTH_EMODEL, "reduction without input");                   \
        return reduce(c, in, nin, out, OP, in[0]);                                            \
    }
REDUCE(op_reduce_mean, TTH_OP_MEAN)
REDUCE(op_reduce_sum, TTH_OP_SUM)
REDUCE(op_reduce_max, TTH_OP_MAX)
REDUCE(op_reduce_min, TTH_OP_MIN)
REDUCE(op_reduce_prod, TTH_OP_PROD)

/* ReduceSumSquare, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp from elementwise ops + sum. */
static int reduce_composite(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, tth_op pre, int square,
                            tth_op post)
{
    NEED(1);
    tth_rexpr *x = in[0];
    if (square)
        CHECK(x = call2(c, TTH_OP_MULTIPLY, x, x, NULL));
    else if (pre != TTH_OP_INVALID)
        CHECK(x = call1(c, pre, x, NULL));
    int rc = reduce(c, in, nin, out, TTH_OP_SUM, x);
    if (rc)
        return rc;
    if (post != TTH_OP_INVALID)
        CHECK(out[0] = call1(c, post, out[0], NULL));
    return 0;
}
static int op_reduce_sum_square(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return reduce_composite(c, in, nin, out, TTH_OP_INVALID, 1, TTH_OP_INVALID);
}
static int op_reduce_l1(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return reduce_composite(c, in, nin, out, TTH_OP_ABS, 0, TTH_OP_INVALID);
}
static int op_reduce_l2(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return reduce_composite(c, in, nin, out, TTH_OP_INVALID, 1, TTH_OP_SQRT);
}
static int op_reduce_log_sum(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return reduce_composite(c, in, nin, out, TTH_OP_INVALID, 0, TTH_OP_LOG);
}
static int op_reduce_log_sum_exp(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return reduce_composite(c, in, nin, out, TTH_OP_EXP, 0, TTH_OP_LOG);
}

static int argx(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, tth_op op)
{
    NEED(1);
    int64_t axis;
    if (norm_axis(c, ai(c, "axis", 0), rank(in[0]), &axis))
        return c->diag->code;
    CHECK(out[0] = call1(c, op, in[0],
                         json_pack("{s:I,s:b,s:b}", "axis", (json_int_t)axis, "keepdims", (int)ai(c, "keepdims", 1),
                                   "select_last_index", (int)ai(c, "select_last_index", 0))));
    return 0;
}
/* ArgMax and ArgMin: the row's arg is the Relay op. */
static int op_argx(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return argx(c, in, nin, out, (tth_op)c->arg);
}

/* ---------------------------------------------------------------- the rows */

const tth_onnx_op tth__onnx_reduce_ops[] = {
    {"ArgMax", 1, op_argx, TTH_OP_ARGMAX, NULL},
    {"ArgMin", 1, op_argx, TTH_OP_ARGMIN, NULL},
    {"CumSum", 11, op_cumsum, 0, NULL},
    {"ReduceL1", 1, op_reduce_l1, 0, NULL},
    {"ReduceL2", 1, op_reduce_l2, 0, NULL},
    {"ReduceLogSum", 1, op_reduce_log_sum, 0, NULL},
    {"ReduceLogSumExp", 1, op_reduce_log_sum_exp, 0, NULL},
    {"ReduceMax", 1, op_reduce_max, 0, NULL},
    {"ReduceMean", 1, op_reduce_mean, 0, NULL},
    {"ReduceMin", 1, op_reduce_min, 0, NULL},
    {"ReduceProd", 1, op_reduce_prod, 0, NULL},
    {"ReduceSum", 1, op_reduce_sum, 0, NULL},
    {"ReduceSumSquare", 1, op_reduce_sum_square, 0, NULL},
    {"TopK", 1, op_topk, 0, NULL},
    {"TopK", 10, op_topk, 0, NULL},
    {NULL, 0, NULL, 0, NULL},
};
