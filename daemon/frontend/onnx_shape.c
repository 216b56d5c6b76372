/* onnx_shape.c: the shape and indexing operators: reshapes, slices, gathers and scatters, padding, constants.
 * One function per operator, and the family's rows of the operator table: each row names the
 * opset range it imports (docs/operators.md, "The operator table"). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_ops.h"

static tth_rexpr *k_i64(tth_onnx_ctx *c, const int64_t *v, int64_t n)
{
    tth_ttype ty = {.dtype = TTH_I64, .rank = 1, .shape = {n}};
    return k_tensor(c, tth_tensor_new(&ty, v));
}

static int op_identity(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    out[0] = in[0];
    return 0;
}

/* Reshape: shape from the input (opset >= 5) or attribute; 0 copies the input dim unless
 * allowzero, -1 is inferred. */
static int op_reshape(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int64_t s[MAXV];
    int n;
    if (nin > 1 && in[1])
        n = vints(c, in[1], "shape", s, MAXV);
    else
        n = aints(c, "shape", s, MAXV);
    if (n == -2)
        return c->diag->code;
    if (n < 0)
        return tth__onnx_fail(c, TTH_EMODEL, "Reshape without a shape");
    if (n > TTH_MAX_RANK)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "Reshape to rank %d (at most %d)", n, TTH_MAX_RANK);
    int allowzero = (int)ai(c, "allowzero", 0), infer = -1;
    int64_t known = 1, total = tth_ttype_numel(tt(in[0]));
    for (int i = 0; i < n; i++) {
        if (s[i] == 0 && !allowzero) {
            if (i >= rank(in[0]))
                return tth__onnx_fail(c, TTH_EMODEL, "Reshape copies dim %d the input does not have", i);
            s[i] = tt(in[0])->shape[i];
        }
        if (s[i] == -1) {
            if (infer >= 0)
                return tth__onnx_fail(c, TTH_EMODEL, "Reshape shape has more than one -1");
            infer = i;
        } else if (s[i] < 0) {
            return tth__onnx_fail(c, TTH_EMODEL, "Reshape shape has a negative dim %lld", (long long)s[i]);
        } else {
            if (s[i] > TTH_IMPORT_MAX_TENSOR || (s[i] && known > TTH_IMPORT_MAX_TENSOR / s[i]))
                return tth__onnx_fail(c, TTH_EMODEL, "Reshape shape too large");
            known *= s[i];
        }
    }
    if (infer >= 0) {
        if (known == 0 || total % known)
            return tth__onnx_fail(c, TTH_EMODEL, "Reshape cannot infer -1 (%lld elements into %lld)", (long long)total,
                                  (long long)known);
        s[infer] = total / known;
    } else if (known != total) {
        return tth__onnx_fail(c, TTH_EMODEL, "Reshape changes the element count (%lld to %lld)", (long long)total,
                              (long long)known);
    }
    CHECK(out[0] = reshape(c, in[0], s, n));
    return 0;
}

static int op_flatten(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int r = rank(in[0]);
    int64_t axis = ai(c, "axis", 1);
    if (axis < -r || axis > r)
        return tth__onnx_fail(c, TTH_EMODEL, "Flatten axis %lld out of range", (long long)axis);
    if (axis < 0)
        axis += r;
    int64_t s[2] = {1, 1};
    for (int i = 0; i < r; i++)
        s[i < axis ? 0 : 1] *= tt(in[0])->shape[i];
    CHECK(out[0] = reshape(c, in[0], s, 2));
    return 0;
}

static int op_transpose(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int r = rank(in[0]);
    int64_t p[TTH_MAX_RANK];
    int n = aints(c, "perm", p, TTH_MAX_RANK);
    if (n == -2)
        return c->diag->code;
    if (n < 0) {
        n = r;
        for (int i = 0; i < r; i++)
            p[i] = r - 1 - i;
    }
    if (n != r)
        return tth__onnx_fail(c, TTH_EMODEL, "Transpose perm has %d values for rank %d", n, r);
    CHECK(out[0] = call1(c, TTH_OP_TRANSPOSE, in[0], json_pack("{s:o}", "axes", tth__json_ints(p, n))));
    return 0;
}

/* Axes from the attribute (before opset 13 / 18) or the optional second input. */
static int axes_of(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, int64_t *ax, int max)
{
    if (nin > 1 && in[1])
        return vints(c, in[1], "axes", ax, max);
    return aints(c, "axes", ax, max);
}

static int op_squeeze(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int r = rank(in[0]);
    int64_t ax[MAXV], s[TTH_MAX_RANK];
    int na = axes_of(c, in, nin, ax, MAXV), drop[TTH_MAX_RANK] = {0}, n = 0;
    if (na == -2)
        return c->diag->code;
    for (int i = 0; i < na; i++) {
        int64_t a;
        if (norm_axis(c, ax[i], r, &a))
            return c->diag->code;
        if (tt(in[0])->shape[a] != 1)
            return tth__onnx_fail(c, TTH_EMODEL, "Squeeze axis %lld has size %lld", (long long)a,
                                  (long long)tt(in[0])->shape[a]);
        drop[a] = 1;
    }
    for (int i = 0; i < r; i++)
        if (!(na > 0 ? drop[i] : tt(in[0])->shape[i] == 1))
            s[n++] = tt(in[0])->shape[i];
    CHECK(out[0] = reshape(c, in[0], s, n));
    return 0;
}

static int op_unsqueeze(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int r = rank(in[0]);
    int64_t ax[MAXV], s[TTH_MAX_RANK];
    int na = axes_of(c, in, nin, ax, MAXV), ins[TTH_MAX_RANK] = {0};
    if (na == -2)
        return c->diag->code;
    if (na < 0)
        return tth__onnx_fail(c, TTH_EMODEL, "Unsqueeze without axes");
    int orank = r + na;
    if (orank > TTH_MAX_RANK)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "Unsqueeze to rank %d (at most %d)", orank, TTH_MAX_RANK);
    for (int i = 0; i < na; i++) {
        int64_t a;
        if (norm_axis(c, ax[i], orank, &a))
            return c->diag->code;
        if (ins[a])
            return tth__onnx_fail(c, TTH_EMODEL, "Unsqueeze repeats axis %lld", (long long)a);
        ins[a] = 1;
    }
    for (int i = 0, j = 0; i < orank; i++)
        s[i] = ins[i] ? 1 : tt(in[0])->shape[j++];
    CHECK(out[0] = reshape(c, in[0], s, orank));
    return 0;
}

static int op_concat(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    tth_rexpr *args[64];
    size_t n = 0;
    for (size_t i = 0; i < nin; i++)
        if (in[i])
            args[n++] = in[i];
    int64_t axis;
    if (!attr(c, "axis") && c->version >= 4)
        return tth__onnx_fail(c, TTH_EMODEL, "Concat without axis");
    if (norm_axis(c, ai(c, "axis", 1), rank(args[0]), &axis))
        return c->diag->code;
    if (n == 1) {
        out[0] = args[0];
        return 0;
    }
    CHECK(out[0] = call(c, TTH_OP_CONCATENATE, args, n, json_pack("{s:I}", "axis", (json_int_t)axis)));
    return 0;
}

/* Split: sizes from the attribute (< 13) or input (>= 13), else equal parts (num_outputs or
 * the number of outputs; a smaller last part when uneven). */
static int op_split(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int64_t axis, sz[MAXV];
    if (norm_axis(c, ai(c, "axis", 0), rank(in[0]), &axis))
        return c->diag->code;
    int64_t d = tt(in[0])->shape[axis];
    int n = (nin > 1 && in[1]) ? vints(c, in[1], "split", sz, MAXV) : aints(c, "split", sz, MAXV);
    if (n == -2)
        return c->diag->code;
    if (nout == 0 || nout > MAXV)
        return tth__onnx_fail(c, TTH_EMODEL, "Split with %zu outputs", nout);
    if (n < 0) {
        int64_t parts = ai(c, "num_outputs", (int64_t)nout);
        if (parts != (int64_t)nout)
            return tth__onnx_fail(c, TTH_EMODEL, "Split num_outputs differs from its outputs");
        int64_t each = (d + parts - 1) / parts;
        for (int64_t i = 0; i < parts; i++) {
            int64_t rest = d - i * each;
            sz[i] = rest < 0 ? 0 : rest < each ? rest : each;
        }
        if (d % parts && attr(c, "num_outputs") == NULL)
            return tth__onnx_fail(c, TTH_EMODEL, "Split of %lld into %lld equal parts", (long long)d, (long long)parts);
        n = (int)parts;
    }
    int64_t sum = 0;
    for (int i = 0; i < n; i++) {
        if (sz[i] < 0 || sz[i] > d)
            return tth__onnx_fail(c, TTH_EMODEL, "Split size %lld is out of range", (long long)sz[i]);
        sum += sz[i];
    }
    if ((size_t)n != nout || sum != d)
        return tth__onnx_fail(c, TTH_EMODEL, "Split sizes do not match the outputs or the dimension");
    tth_rexpr *t = call1(c, TTH_OP_SPLIT, in[0],
                         json_pack("{s:I,s:o}", "axis", (json_int_t)axis, "sizes", tth__json_ints(sz, n)));
    CHECK(t);
    for (size_t i = 0; i < nout; i++) {
        tth_rexpr *g = tth_relay_tuple_get(c->m, t, (int32_t)i, c->diag);
        CHECK(g);
        CHECK(out[i] = tth__fold_call(c->m, g, TTH_IMPORT_FOLD_ELEMS, c->diag));
    }
    return 0;
}

/* Slice: starts/ends/axes/steps (attributes before opset 10, inputs after), clamped per ONNX. */
static int op_slice(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int r = rank(in[0]);
    int64_t st[MAXV], en[MAXV], ax[MAXV], sp[MAXV];
    int ns, ne, na, nsp = -1;
    if (c->version < 10) {
        ns = aints(c, "starts", st, MAXV);
        ne = aints(c, "ends", en, MAXV);
        na = aints(c, "axes", ax, MAXV);
    } else {
        if (nin < 3 || !in[1] || !in[2])
            return tth__onnx_fail(c, TTH_EMODEL, "Slice needs starts and ends");
        ns = vints(c, in[1], "starts", st, MAXV);
        ne = ns < -1 ? -2 : vints(c, in[2], "ends", en, MAXV);
        na = ne < -1 ? -2 : (nin > 3 && in[3]) ? vints(c, in[3], "axes", ax, MAXV) : -1;
        nsp = na < -1 ? -2 : (nin > 4 && in[4]) ? vints(c, in[4], "steps", sp, MAXV) : -1;
    }
    if (ns == -2 || ne == -2 || na == -2 || nsp == -2)
        return c->diag->code;
    if (ns < 0 || ne != ns || (na >= 0 && na != ns) || (nsp >= 0 && nsp != ns))
        return tth__onnx_fail(c, TTH_EMODEL, "Slice starts/ends/axes/steps lengths differ");
    int64_t b[TTH_MAX_RANK], e[TTH_MAX_RANK], s[TTH_MAX_RANK];
    int seen[TTH_MAX_RANK] = {0};
    for (int i = 0; i < r; i++) {
        b[i] = 0;
        e[i] = tt(in[0])->shape[i];
        s[i] = 1;
    }
    for (int i = 0; i < ns; i++) {
        int64_t a;
        if (norm_axis(c, na >= 0 ? ax[i] : i, r, &a))
            return c->diag->code;
        if (seen[a])
            return tth__onnx_fail(c, TTH_EMODEL, "Slice repeats axis %lld", (long long)a);
        seen[a] = 1;
        int64_t dim = tt(in[0])->shape[a], step = nsp >= 0 ? sp[i] : 1, lo = st[i], hi = en[i];
        if (step == 0)
            return tth__onnx_fail(c, TTH_EMODEL, "Slice step is 0");
        if (lo < 0)
            lo = lo < -dim ? 0 : lo + dim;
        if (hi < 0)
            hi = hi < -dim ? -1 : hi + dim;
        if (step > 0) {
            lo = lo > dim ? dim : lo;
            hi = hi < 0 ? 0 : hi > dim ? dim : hi;
        } else {
            lo = lo > dim - 1 ? dim - 1 : lo;
            hi = hi > dim - 1 ? dim - 1 : hi;
            if (st[i] < -dim)
                lo = -1;
        }
        b[a] = lo;
        e[a] = hi;
        s[a] = step;
        /* an empty range keeps begin in bounds for the normalized form */
        if ((step > 0 && hi <= lo) || (step < 0 && hi >= lo)) {
            b[a] = 0;
            e[a] = 0;
            s[a] = 1;
        }
    }
    CHECK(out[0] = call1(c, TTH_OP_STRIDED_SLICE, in[0],
                         json_pack("{s:o,s:o,s:o}", "begin", tth__json_ints(b, r), "end", tth__json_ints(e, r),
                                   "strides", tth__json_ints(s, r))));
    return 0;
}

static int op_gather(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    int64_t axis;
    if (norm_axis(c, ai(c, "axis", 0), rank(in[0]), &axis))
        return c->diag->code;
    CHECK(out[0] = call2(c, TTH_OP_TAKE, in[0], in[1], json_pack("{s:I}", "axis", (json_int_t)axis)));
    return 0;
}

static int op_gather_elements(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    int64_t axis;
    if (norm_axis(c, ai(c, "axis", 0), rank(in[0]), &axis))
        return c->diag->code;
    CHECK(out[0] = gather_elements(c, in[0], in[1], axis));
    return 0;
}

/* Compress(x, condition[, axis]) with a constant condition: a take of the positions where it is
 * true (of the flattened input without an axis). */
static int op_compress(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    if (in[1]->kind != TTH_REXPR_CONST)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "input 'condition' is not a constant (the result's shape would "
                              "depend on it)");
    const tth_tensor *cond = in[1]->u.constant.value;
    tth_rexpr *x = in[0];
    int64_t axis = 0;
    if (attr(c, "axis")) {
        if (norm_axis(c, ai(c, "axis", 0), rank(x), &axis))
            return c->diag->code;
    } else {
        int64_t n = tth_ttype_numel(tt(x));
        CHECK(x = reshape(c, x, &n, 1));
    }
    int64_t len = tt(x)->shape[axis], nc = tth_ttype_numel(&cond->type), k = 0;
    int64_t *pos = malloc((size_t)(len + 1) * sizeof *pos);
    if (!pos)
        return tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
    for (int64_t i = 0; i < nc && i < len; i++)
        if (tth_tensor_get_f64(cond, i) != 0)
            pos[k++] = i;
    tth_rexpr *kp = k_i64(c, pos, k);
    free(pos);
    CHECK(kp);
    CHECK(out[0] = call2(c, TTH_OP_TAKE, x, kp, json_pack("{s:I}", "axis", (json_int_t)axis)));
    return 0;
}

/* ReverseSequence(x, sequence_lens) with constant lengths: a take from the flattened input at a
 * constant index grid (the first len steps of each batch entry reversed, the rest kept). */
static int op_reverse_sequence(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    int64_t ba = ai(c, "batch_axis", 1), ta = ai(c, "time_axis", 0);
    const tth_ttype *xt = tt(in[0]);
    int r = xt->rank;
    if (r < 2 || ba < 0 || ta < 0 || ba >= r || ta >= r || ba == ta || (ba > 1 || ta > 1))
        return tth__onnx_fail(c, TTH_EMODEL, "ReverseSequence batch_axis %lld and time_axis %lld (0 and 1)",
                              (long long)ba, (long long)ta);
    int64_t B = xt->shape[ba], T = xt->shape[ta], lens[4096];
    if (B > 4096)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "ReverseSequence over a batch of %lld (at most 4096)", (long long)B);
    int n = vints(c, in[1], "sequence_lens", lens, 4096);
    if (n < 0)
        return c->diag->code;
    if (n != B)
        return tth__onnx_fail(c, TTH_EMODEL, "ReverseSequence has %d lengths for a batch of %lld", n, (long long)B);
    int64_t inner = 1, N = tth_ttype_numel(xt);
    for (int k = 2; k < r; k++)
        inner *= xt->shape[k];
    tth_ttype gt = *xt;
    gt.dtype = TTH_I64;
    tth_tensor *grid = tth_tensor_new(&gt, NULL);
    for (int64_t i = 0; grid && i < N; i++) {
        int64_t rest = i % inner, outer = i / inner;
        int64_t a0 = outer / xt->shape[1], a1 = outer % xt->shape[1];
        int64_t b = ba == 0 ? a0 : a1, t = ba == 0 ? a1 : a0;
        int64_t len = lens[b] < 0 ? 0 : lens[b] > T ? T : lens[b];
        int64_t src = t < len ? len - 1 - t : t;
        int64_t s0 = ba == 0 ? b : src, s1 = ba == 0 ? src : b;
        ((int64_t *)grid->data)[i] = (s0 * xt->shape[1] + s1) * inner + rest;
    }
    tth_rexpr *kg, *flat;
    CHECK(kg = k_tensor(c, grid));
    CHECK(flat = reshape(c, in[0], &N, 1));
    CHECK(out[0] = call2(c, TTH_OP_TAKE, flat, kg, json_pack("{s:i}", "axis", 0)));
    return 0;
}

/* ScatterElements (and the older Scatter): positions as GatherElements computes them. */
static int op_scatter_elements(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(3);
    int r = rank(in[0]);
    int64_t axis;
    if (norm_axis(c, ai(c, "axis", 0), r, &axis))
        return c->diag->code;
    if (rank(in[1]) != r || rank(in[2]) != r)
        return tth__onnx_fail(c, TTH_EMODEL, "%s: data, indices and updates must have one rank", c->node->op_type);
    for (int k = 0; k < r; k++)
        if (tt(in[1])->shape[k] != tt(in[2])->shape[k] || (k != axis && tt(in[1])->shape[k] > tt(in[0])->shape[k]))
            return tth__onnx_fail(c, TTH_EMODEL, "%s: the indices' and updates' shapes differ or exceed the data's",
                                  c->node->op_type);
    /* positions: gather_elements' flat offsets, computed on an iota of the data's size */
    const tth_ttype *dt = tt(in[0]);
    int64_t N = tth_ttype_numel(dt), K = tth_ttype_numel(tt(in[1]));
    tth_rexpr *ki, *pos, *d2, *u2;
    CHECK(ki = k_iota(c, dt->shape, dt->rank));
    CHECK(pos = gather_elements(c, ki, in[1], axis));
    CHECK(pos = reshape(c, pos, &K, 1));
    int64_t n1[2] = {N, 1}, k1[2] = {K, 1};
    CHECK(d2 = reshape(c, in[0], n1, 2));
    CHECK(u2 = reshape(c, in[2], k1, 2));
    tth_rexpr *o;
    int rc = scatter_flat(c, d2, pos, u2, as(c, "reduction", "none"), &o);
    if (rc)
        return rc;
    CHECK(out[0] = reshape(c, o, dt->shape, dt->rank));
    return 0;
}

/* ScatterND(data, indices[..., q], updates): updates replace (add to, multiply) the blocks of the
 * data the index tuples name. */
static int op_scatter_nd(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(3);
    const tth_ttype *dt = tt(in[0]), *it = tt(in[1]);
    int r = dt->rank, ir = it->rank;
    int64_t q = ir ? it->shape[ir - 1] : 0;
    if (ir < 1 || q < 1 || q > r)
        return tth__onnx_fail(c, TTH_EMODEL, "ScatterND with data rank %d and indices rank %d (last dimension %lld)", r,
                              ir, (long long)q);
    int64_t P = 1, R = 1, K = 1, stride[TTH_MAX_RANK], dims[TTH_MAX_RANK];
    for (int64_t j = q - 1; j >= 0; j--) {
        stride[j] = P;
        dims[j] = dt->shape[j];
        P *= dt->shape[j];
    }
    for (int k = (int)q; k < r; k++)
        R *= dt->shape[k];
    for (int k = 0; k < ir - 1; k++)
        K *= it->shape[k];
    if (tth_ttype_numel(tt(in[2])) != K * R)
        return tth__onnx_fail(c, TTH_EMODEL, "ScatterND's updates hold %lld elements, not %lld",
                              (long long)tth_ttype_numel(tt(in[2])), (long long)(K * R));
    tth_rexpr *idx = cast_to(c, in[1], TTH_I64), *kd = k_i64(c, dims, q), *ks = k_i64(c, stride, q);
    CHECK(idx && kd && ks);
    tth_rexpr *wrapped, *scaled, *pos, *d2, *u2, *o;
    CHECK(wrapped = wrap_negative(c, idx, kd));
    CHECK(scaled = call2(c, TTH_OP_MULTIPLY, wrapped, ks, NULL));
    int64_t last = ir - 1, pr[2] = {P, R}, kr[2] = {K, R};
    CHECK(pos = call1(c, TTH_OP_SUM, scaled, json_pack("{s:o,s:b}", "axis", tth__json_ints(&last, 1), "keepdims", 0)));
    CHECK(pos = reshape(c, pos, &K, 1));
    CHECK(d2 = reshape(c, in[0], pr, 2));
    CHECK(u2 = reshape(c, in[2], kr, 2));
    int rc = scatter_flat(c, d2, pos, u2, as(c, "reduction", "none"), &o);
    if (rc)
        return rc;
    CHECK(out[0] = reshape(c, o, dt->shape, r));
    return 0;
}

/* GatherND(data, indices[..., q], batch_dims b): a take from data seen as [B * P, R] (B the
 * batch dims, P the q indexed dims, R the rest) at b_index * P + sum_j wrap(index_j) * stride_j,
 * the batch part a constant grid. */
static int op_gather_nd(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    const tth_ttype *dt = tt(in[0]), *it = tt(in[1]);
    int r = dt->rank, ir = it->rank;
    int64_t b = ai(c, "batch_dims", 0);
    int64_t q = ir ? it->shape[ir - 1] : 0;
    if (ir < 1 || b < 0 || b >= ir || q < 1 || b + q > r)
        return tth__onnx_fail(c, TTH_EMODEL, "GatherND with data rank %d, indices rank %d (last dimension %lld) and "
                              "batch_dims %lld", r, ir, (long long)q, (long long)b);
    int64_t B = 1, P = 1, R = 1, stride[TTH_MAX_RANK], dims[TTH_MAX_RANK];
    for (int64_t k = 0; k < b; k++) {
        if (it->shape[k] != dt->shape[k])
            return tth__onnx_fail(c, TTH_EMODEL, "GatherND batch dimension %lld differs", (long long)k);
        B *= dt->shape[k];
    }
    for (int64_t j = q - 1; j >= 0; j--) {
        stride[j] = P;
        dims[j] = dt->shape[b + j];
        P *= dt->shape[b + j];
    }
    for (int k = (int)(b + q); k < r; k++)
        R *= dt->shape[k];
    tth_rexpr *idx = cast_to(c, in[1], TTH_I64), *kd = k_i64(c, dims, q), *ks = k_i64(c, stride, q);
    CHECK(idx && kd && ks);
    tth_rexpr *wrapped, *scaled, *flat;
    CHECK(wrapped = wrap_negative(c, idx, kd));
    CHECK(scaled = call2(c, TTH_OP_MULTIPLY, wrapped, ks, NULL));
    int64_t last = ir - 1;
    CHECK(flat = call1(c, TTH_OP_SUM, scaled, json_pack("{s:o,s:b}", "axis", tth__json_ints(&last, 1), "keepdims", 0)));
    if (b > 0) {
        tth_ttype gt = {.dtype = TTH_I64, .rank = ir - 1};
        memcpy(gt.shape, it->shape, sizeof(int64_t) * (size_t)(ir - 1));
        tth_tensor *grid = tth_tensor_new(&gt, NULL);
        int64_t n = tth_ttype_numel(&gt), per = n / B;
        for (int64_t i = 0; grid && i < n; i++)
            ((int64_t *)grid->data)[i] = i / per * P;
        tth_rexpr *base;
        CHECK(base = k_tensor(c, grid));
        CHECK(flat = call2(c, TTH_OP_ADD, flat, base, NULL));
    }
    int64_t s2[2] = {B * P, R};
    tth_rexpr *d2, *g;
    CHECK(d2 = reshape(c, in[0], s2, 2));
    CHECK(g = call2(c, TTH_OP_TAKE, d2, flat, json_pack("{s:i}", "axis", 0)));
    int64_t os[TTH_MAX_RANK];
    int orank = 0;
    for (int k = 0; k < ir - 1; k++)
        os[orank++] = it->shape[k];
    for (int k = (int)(b + q); k < r; k++)
        os[orank++] = dt->shape[k];
    if (orank > TTH_MAX_RANK)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "GatherND's result has more than %d dimensions", TTH_MAX_RANK);
    CHECK(out[0] = reshape(c, g, os, orank));
    return 0;
}

/* EyeLike(x): a constant of x's shape (2-D) with ones on diagonal k, in `dtype` (default x's). */
static int op_eyelike(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    if (rank(in[0]) != 2)
        return tth__onnx_fail(c, TTH_EMODEL, "EyeLike takes a 2-D input, not rank %d", rank(in[0]));
    const Onnx__AttributeProto *da = attr(c, "dtype");
    tth_ttype ty = *tt(in[0]);
    if (da && da->has_i && (ty.dtype = tth__onnx_dtype(da->i)) == TTH_DTYPE_INVALID)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: EyeLike dtype %lld", (long long)da->i);
    int64_t k = ai(c, "k", 0);
    tth_tensor *t = tth_tensor_new(&ty, NULL);
    for (int64_t i = 0; t && i < ty.shape[0]; i++)
        if (i + k >= 0 && i + k < ty.shape[1])
            tth__st_f64(t, i * ty.shape[1] + i + k, 1);
    CHECK(out[0] = k_tensor(c, t));
    return 0;
}

/* Pad: pads as [x1_begin, x2_begin, ..., x1_end, ...] (attribute < 11, input >= 11); negative
 * pads crop first; modes constant, reflect, edge. */
/* Pad's axes input (18): the n pads p (begins, then ends, of those axes) spread over all r axes,
 * the others unpadded. The new count (2 r), or -2 with diag. */
static int pads_of_axes(tth_onnx_ctx *c, tth_rexpr *axes_in, int r, int64_t *p, int n)
{
    int64_t ax[MAXV], full[2 * MAXV] = {0};
    int na = vints(c, axes_in, "axes", ax, MAXV);
    if (na == -2)
        return -2;
    if (na < 0 || 2 * na != n) {
        tth__onnx_fail(c, TTH_EMODEL, "Pad has %d pads for %d axes", n, na < 0 ? 0 : na);
        return -2;
    }
    for (int i = 0; i < na; i++) {
        if (norm_axis(c, ax[i], r, &ax[i]))
            return -2;
        full[ax[i]] = p[i];
        full[r + ax[i]] = p[na + i];
    }
    memcpy(p, full, sizeof(int64_t) * 2 * (size_t)r);
    return 2 * r;
}

static int op_pad(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int r = rank(in[0]);
    int64_t p[2 * MAXV];
    int n;
    double value = 0;
    if (c->version < 11) {
        n = aints(c, "pads", p, 2 * MAXV);
        if (n == -1)
            n = aints(c, "paddings", p, 2 * MAXV);
        value = af(c, "value", 0.0);
    } else {
        if (nin < 2 || !in[1])
            return tth__onnx_fail(c, TTH_EMODEL, "Pad needs pads");
        n = vints(c, in[1], "pads", p, 2 * MAXV);
        if (n >= 0 && nin > 2 && in[2] && vscalar(c, in[2], "constant_value", &value))
            return c->diag->code;
        if (n >= 0 && nin > 3 && in[3] && (n = pads_of_axes(c, in[3], r, p, n)) < 0)
            return c->diag->code;
    }
    if (n == -2)
        return c->diag->code;
    if (n != 2 * r)
        return tth__onnx_fail(c, TTH_EMODEL, "Pad has %d pads for rank %d", n, r);
    const char *mode = as(c, "mode", "constant");
    if (strcmp(mode, "constant") && strcmp(mode, "reflect") && strcmp(mode, "edge"))
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: Pad mode '%s'", mode);
    tth_rexpr *x = in[0];
    int64_t pb[TTH_MAX_RANK], pe[TTH_MAX_RANK], b[TTH_MAX_RANK], e[TTH_MAX_RANK], s[TTH_MAX_RANK];
    int crop = 0, pad = 0;
    for (int i = 0; i < r; i++) {
        int64_t d = tt(x)->shape[i];
        pb[i] = p[i] > 0 ? p[i] : 0;
        pe[i] = p[r + i] > 0 ? p[r + i] : 0;
        b[i] = p[i] < 0 ? -p[i] : 0;
        e[i] = p[r + i] < 0 ? d + p[r + i] : d;
        s[i] = 1;
        if (b[i] > d || e[i] < b[i] || pb[i] > (1 << 24) || pe[i] > (1 << 24))
            return tth__onnx_fail(c, TTH_EMODEL, "Pad amounts out of range");
        if (strcmp(mode, "constant") && (pb[i] || pe[i]) && (pb[i] >= d || pe[i] >= d) && strcmp(mode, "edge"))
            return tth__onnx_fail(c, TTH_EMODEL, "reflect padding larger than the dimension");
        crop |= b[i] || e[i] != d;
        pad |= pb[i] || pe[i];
    }
    int64_t padded[TTH_MAX_RANK];
    for (int i = 0; i < r; i++)
        padded[i] = e[i] - b[i] + pb[i] + pe[i];
    if (!tth__onnx_shape_ok(padded, r))
        return tth__onnx_fail(c, TTH_ELIMIT, "Pad result too large");
    if (crop)
        CHECK(x = call1(c, TTH_OP_STRIDED_SLICE, x,
                        json_pack("{s:o,s:o,s:o}", "begin", tth__json_ints(b, r), "end", tth__json_ints(e, r), "strides",
                                  tth__json_ints(s, r))));
    if (pad || !crop)
        CHECK(x = call1(c, TTH_OP_PAD, x,
                        json_pack("{s:o,s:o,s:f,s:s}", "pad_before", tth__json_ints(pb, r), "pad_after",
                                  tth__json_ints(pe, r), "pad_value", value, "mode", mode)));
    out[0] = x;
    return 0;
}

/* CenterCropPad (18): each of `axes` (default all) cropped, or padded with zeros, to the size the
 * shape input gives, centred; of an odd difference the larger half is at the end. */
static int op_center_crop_pad(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    int r = rank(in[0]);
    int64_t sh[MAXV], axes[MAXV];
    int ns = vints(c, in[1], "shape", sh, MAXV);
    if (ns == -2)
        return c->diag->code;
    int na = aints(c, "axes", axes, MAXV);
    if (na == -2)
        return c->diag->code;
    if (na < 0)
        for (na = 0; na < r; na++)
            axes[na] = na;
    if (ns != na)
        return tth__onnx_fail(c, TTH_EMODEL, "CenterCropPad shape has %d values for %d axes", ns, na);
    int64_t b[TTH_MAX_RANK], e[TTH_MAX_RANK], st[TTH_MAX_RANK], pb[TTH_MAX_RANK] = {0}, pe[TTH_MAX_RANK] = {0};
    int crop = 0, pad = 0;
    for (int i = 0; i < r; i++) {
        b[i] = 0;
        e[i] = tt(in[0])->shape[i];
        st[i] = 1;
    }
    for (int k = 0; k < na; k++) {
        int64_t ax;
        if (norm_axis(c, axes[k], r, &ax))
            return c->diag->code;
        int64_t d = tt(in[0])->shape[ax], t = sh[k];
        if (t < 0 || t > (1 << 24))
            return tth__onnx_fail(c, TTH_EMODEL, "CenterCropPad size %lld out of range", (long long)t);
        if (t < d) {
            b[ax] = (d - t) / 2;
            e[ax] = b[ax] + t;
            crop = 1;
        } else if (t > d) {
            pb[ax] = (t - d) / 2;
            pe[ax] = t - d - pb[ax];
            pad = 1;
        }
    }
    tth_rexpr *x = in[0];
    if (crop)
        CHECK(x = call1(c, TTH_OP_STRIDED_SLICE, x,
                        json_pack("{s:o,s:o,s:o}", "begin", tth__json_ints(b, r), "end", tth__json_ints(e, r), "strides",
                                  tth__json_ints(st, r))));
    if (pad)
        CHECK(x = call1(c, TTH_OP_PAD, x,
                        json_pack("{s:o,s:o,s:f,s:s}", "pad_before", tth__json_ints(pb, r), "pad_after",
                                  tth__json_ints(pe, r), "pad_value", 0.0, "mode", "constant")));
    out[0] = x;
    return 0;
}

/* Expand: bidirectional broadcast of the input with the given shape. */
static int op_expand(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    int64_t s[MAXV], o[TTH_MAX_RANK];
    int n = vints(c, in[1], "shape", s, MAXV);
    if (n == -2)
        return c->diag->code;
    int r = rank(in[0]), orank = n > r ? n : r;
    if (orank > TTH_MAX_RANK)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "Expand to rank %d", orank);
    for (int i = 0; i < orank; i++) {
        int ia = i - (orank - r), ib = i - (orank - n);
        int64_t da = ia >= 0 ? tt(in[0])->shape[ia] : 1, db = ib >= 0 ? s[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return tth__onnx_fail(c, TTH_EMODEL, "Expand shape does not broadcast with the input");
        if (db < 0)
            return tth__onnx_fail(c, TTH_EMODEL, "Expand shape has a negative dim");
        o[i] = da == 1 ? db : da;
    }
    tth_ttype ot = {.dtype = tt(in[0])->dtype, .rank = orank};
    memcpy(ot.shape, o, sizeof(int64_t) * (size_t)orank);
    if (!tth__onnx_shape_ok(o, orank))
        return tth__onnx_fail(c, TTH_ELIMIT, "Expand result too large");
    if (tth_ttype_equal(&ot, tt(in[0]))) {
        out[0] = in[0];
        return 0;
    }
    CHECK(out[0] = call1(c, TTH_OP_BROADCAST_TO, in[0], json_pack("{s:o}", "shape", tth__json_ints(o, orank))));
    return 0;
}

/* Shape: the static shape as an int64 constant (start/end of opset 15). */
static int op_shape(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int r = rank(in[0]);
    int64_t st = ai(c, "start", 0), en = ai(c, "end", r);
    if (st < 0)
        st += r;
    if (en < 0)
        en += r;
    st = st < 0 ? 0 : st > r ? r : st;
    en = en < 0 ? 0 : en > r ? r : en;
    if (en < st)
        en = st;
    CHECK(out[0] = k_i64(c, tt(in[0])->shape + st, en - st));
    return 0;
}

static int op_size(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    CHECK(out[0] = k_scalar(c, TTH_I64, (double)tth_ttype_numel(tt(in[0]))));
    return 0;
}

/* Constant: value (tensor) or value_float(s) / value_int(s); strings and sparse unsupported. */
static int op_constant(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    const Onnx__AttributeProto *a;
    tth_tensor *t = NULL;
    if ((a = attr(c, "value"))) {
        int rc = tth__onnx_tensor_from_proto(a->t, c->where, c->ext, &t, c->diag);
        if (rc)
            return rc;
    } else if ((a = attr(c, "value_float")) || (a = attr(c, "value_int"))) {
        int isf = !strcmp(a->name, "value_float");
        tth_ttype ty = {.dtype = isf ? TTH_F32 : TTH_I64, .rank = 0};
        t = tth_tensor_new(&ty, NULL);
        if (t && isf)
            ((float *)t->data)[0] = a->f;
        else if (t)
            ((int64_t *)t->data)[0] = a->i;
    } else if ((a = attr(c, "value_floats")) || (a = attr(c, "value_ints"))) {
        int isf = !strcmp(a->name, "value_floats");
        tth_ttype ty = {.dtype = isf ? TTH_F32 : TTH_I64, .rank = 1, .shape = {isf ? (int64_t)a->n_floats : (int64_t)a->n_ints}};
        t = tth_tensor_new(&ty, isf ? (const void *)a->floats : (const void *)a->ints);
    } else if (attr(c, "sparse_value") || attr(c, "value_string") || attr(c, "value_strings")) {
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: Constant of strings or sparse tensors");
    } else {
        return tth__onnx_fail(c, TTH_EMODEL, "Constant without a value");
    }
    CHECK(out[0] = k_tensor(c, t));
    return 0;
}

/* ConstantOfShape: shape from the input; value a one-element tensor (default float32 0). */
static int op_constant_of_shape(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int64_t s[MAXV];
    int n = vints(c, in[0], "input", s, MAXV);
    if (n == -2)
        return c->diag->code;
    if (n > TTH_MAX_RANK)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "ConstantOfShape of rank %d", n);
    tth_ttype ty = {.dtype = TTH_F32, .rank = n};
    int64_t total = 1;
    for (int i = 0; i < n; i++) {
        if (s[i] < 0)
            return tth__onnx_fail(c, TTH_EMODEL, "ConstantOfShape has a negative dim");
        ty.shape[i] = s[i];
        total = (s[i] && total > TTH_IMPORT_MAX_ELEMS / s[i]) ? TTH_IMPORT_MAX_ELEMS + 1 : total * s[i];
    }
    if (total > TTH_IMPORT_MAX_ELEMS)
        return tth__onnx_fail(c, TTH_ELIMIT, "ConstantOfShape result too large");
    tth_tensor *v = NULL;
    const Onnx__AttributeProto *a = attr(c, "value");
    if (a) {
        int rc = tth__onnx_tensor_from_proto(a->t, c->where, c->ext, &v, c->diag);
        if (rc)
            return rc;
        if (tth_ttype_numel(&v->type) != 1) {
            tth_tensor_unref(v);
            return tth__onnx_fail(c, TTH_EMODEL, "ConstantOfShape value must hold one element");
        }
        ty.dtype = v->type.dtype;
    }
    tth_tensor *t = tth_tensor_new(&ty, NULL);
    if (t && v) {
        size_t es = tth_dtype_size(ty.dtype);
        for (int64_t i = 0; i < total; i++)
            memcpy((char *)t->data + (size_t)i * es, v->data, es);
    }
    if (v)
        tth_tensor_unref(v);
    CHECK(out[0] = k_tensor(c, t));
    return 0;
}

/* Range: start, limit, delta constants → a constant. */
static int op_range(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(3);
    double st, li, de;
    if (vscalar(c, in[0], "start", &st) || vscalar(c, in[1], "limit", &li) || vscalar(c, in[2], "delta", &de))
        return c->diag->code;
    if (de == 0)
        return tth__onnx_fail(c, TTH_EMODEL, "Range delta is 0");
    double nd = ceil((li - st) / de);
    if (!(nd <= (double)TTH_IMPORT_MAX_ELEMS))
        return tth__onnx_fail(c, TTH_ELIMIT, "Range result too large");
    int64_t n = nd > 0 ? (int64_t)nd : 0;
    tth_ttype ty = {.dtype = tt(in[0])->dtype, .rank = 1, .shape = {n}};
    tth_tensor *t = tth_tensor_new(&ty, NULL);
    int isf = tth_dtype_is_float(ty.dtype);
    int64_t ist = tth__ld_i64(in[0]->u.constant.value, 0), ide = tth__ld_i64(in[2]->u.constant.value, 0);
    for (int64_t i = 0; t && i < n; i++) {
        int64_t step, v;
        if (isf) {
            tth__st_f64(t, i, st + (double)i * de);
        } else if (__builtin_mul_overflow(i, ide, &step) || __builtin_add_overflow(ist, step, &v)) {
            tth_tensor_unref(t);
            return tth__onnx_fail(c, TTH_EMODEL, "Range overflows its integer type");
        } else {
            tth__st_i64(t, i, v);
        }
    }
    CHECK(out[0] = k_tensor(c, t));
    return 0;
}

/* Tile: reshape to interleave a size-1 axis before each dim, broadcast, reshape back. */
static int op_tile(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    int r = rank(in[0]);
    int64_t rep[MAXV];
    int n = vints(c, in[1], "repeats", rep, MAXV);
    if (n == -2)
        return c->diag->code;
    if (n != r)
        return tth__onnx_fail(c, TTH_EMODEL, "Tile repeats has %d values for rank %d", n, r);
    if (2 * r > TTH_MAX_RANK)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: Tile of rank %d", r);
    int64_t s1[TTH_MAX_RANK], s2[TTH_MAX_RANK], s3[TTH_MAX_RANK];
    for (int i = 0; i < r; i++) {
        if (rep[i] < 0)
            return tth__onnx_fail(c, TTH_EMODEL, "Tile repeat is negative");
        s1[2 * i] = 1;
        s1[2 * i + 1] = tt(in[0])->shape[i];
        s2[2 * i] = rep[i];
        s2[2 * i + 1] = tt(in[0])->shape[i];
        s3[i] = rep[i] > TTH_IMPORT_MAX_TENSOR ? -1 : rep[i] * tt(in[0])->shape[i];
    }
    if (!tth__onnx_shape_ok(s2, 2 * r) || !tth__onnx_shape_ok(s3, r))
        return tth__onnx_fail(c, TTH_ELIMIT, "Tile result too large");
    tth_rexpr *x = reshape(c, in[0], s1, 2 * r);
    CHECK(x);
    CHECK(x = call1(c, TTH_OP_BROADCAST_TO, x, json_pack("{s:o}", "shape", tth__json_ints(s2, 2 * r))));
    CHECK(out[0] = reshape(c, x, s3, r));
    return 0;
}

/* DepthToSpace (DCR/CRD) and SpaceToDepth as reshape-transpose-reshape. */
static int d2s(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, int to_space)
{
    NEED(1);
    if (rank(in[0]) != 4)
        return tth__onnx_fail(c, TTH_EMODEL, "needs a 4-D input");
    int64_t b = ai(c, "blocksize", 0), N = tt(in[0])->shape[0], C = tt(in[0])->shape[1], H = tt(in[0])->shape[2],
            W = tt(in[0])->shape[3];
    if (b <= 0 || b > 1 << 16)
        return tth__onnx_fail(c, TTH_EMODEL, "bad blocksize");
    int64_t s6[6], perm[6], s4[4];
    if (to_space) {
        if (C % (b * b))
            return tth__onnx_fail(c, TTH_EMODEL, "channels not divisible by blocksize^2");
        int crd = !strcmp(as(c, "mode", "DCR"), "CRD");
        int64_t cc = C / (b * b);
        int64_t a[6] = {N, b, b, cc, H, W}, pa[6] = {0, 3, 4, 1, 5, 2};
        int64_t bcrd[6] = {N, cc, b, b, H, W}, pcrd[6] = {0, 1, 4, 2, 5, 3};
        memcpy(s6, crd ? bcrd : a, sizeof s6);
        memcpy(perm, crd ? pcrd : pa, sizeof perm);
        int64_t o[4] = {N, cc, H * b, W * b};
        memcpy(s4, o, sizeof s4);
    } else {
        if (H % b || W % b)
            return tth__onnx_fail(c, TTH_EMODEL, "spatial dims not divisible by blocksize");
        int64_t a[6] = {N, C, H / b, b, W / b, b}, pa[6] = {0, 3, 5, 1, 2, 4};
        memcpy(s6, a, sizeof s6);
        memcpy(perm, pa, sizeof perm);
        int64_t o[4] = {N, C * b * b, H / b, W / b};
        memcpy(s4, o, sizeof s4);
    }
    tth_rexpr *x = reshape(c, in[0], s6, 6);
    CHECK(x);
    CHECK(x = call1(c, TTH_OP_TRANSPOSE, x, json_pack("{s:o}", "axes", tth__json_ints(perm, 6))));
    CHECK(out[0] = reshape(c, x, s4, 4));
    return 0;
}
/* DepthToSpace (arg 1) and SpaceToDepth (arg 0). */
static int op_d2s(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return d2s(c, in, nin, out, (int)c->arg);
}

/* OneHot(indices, depth, values[off, on]; axis): values[1] where the (wrapped) index equals the
 * position along the new axis, else values[0]. depth must be a constant. */
static int op_one_hot(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(3);
    double depth_d;
    if (vscalar(c, in[1], "depth", &depth_d))
        return c->diag->code;
    if (!(depth_d >= 1 && depth_d <= (double)TTH_IMPORT_MAX_ELEMS))
        return tth__onnx_fail(c, TTH_EMODEL, "OneHot depth %g out of range", depth_d);
    int64_t depth = (int64_t)depth_d;
    int r = rank(in[0]), orank = r + 1;
    if (depth < 1 || depth > TTH_IMPORT_MAX_ELEMS || orank > TTH_MAX_RANK)
        return tth__onnx_fail(c, TTH_EMODEL, "OneHot depth %lld or rank out of range", (long long)depth);
    if (tth_ttype_numel(tt(in[2])) != 2)
        return tth__onnx_fail(c, TTH_EMODEL, "OneHot values must hold 2 elements");
    int64_t axis;
    if (norm_axis(c, ai(c, "axis", -1), orank, &axis))
        return c->diag->code;
    tth_rexpr *idx = cast_to(c, in[0], TTH_I64), *kd = k_scalar(c, TTH_I64, (double)depth), *z = k_scalar(c, TTH_I64, 0);
    CHECK(idx && kd && z);
    tth_rexpr *neg, *wrapped, *sum;
    CHECK(neg = call2(c, TTH_OP_LESS, idx, z, NULL));
    CHECK(sum = call2(c, TTH_OP_ADD, idx, kd, NULL));
    tth_rexpr *wa[3] = {neg, sum, idx};
    CHECK(wrapped = call(c, TTH_OP_WHERE, wa, 3, NULL));
    int64_t s[TTH_MAX_RANK];
    for (int i = 0, j = 0; i < orank; i++)
        s[i] = i == axis ? 1 : tt(in[0])->shape[j++];
    CHECK(wrapped = reshape(c, wrapped, s, orank));
    for (int i = 0; i < orank; i++)
        s[i] = i == axis ? depth : 1;
    tth_rexpr *k, *eq, *vals, *off, *on, *i0 = k_scalar(c, TTH_I64, 0), *i1 = k_scalar(c, TTH_I64, 1);
    CHECK(i0 && i1);
    CHECK(k = k_iota(c, s, orank));
    CHECK(eq = call2(c, TTH_OP_EQUAL, wrapped, k, NULL));
    int64_t two[1] = {2};
    CHECK(vals = reshape(c, in[2], two, 1));
    CHECK(off = call2(c, TTH_OP_TAKE, vals, i0, json_pack("{s:i}", "axis", 0)));
    CHECK(on = call2(c, TTH_OP_TAKE, vals, i1, json_pack("{s:i}", "axis", 0)));
    tth_rexpr *args[3] = {eq, on, off};
    CHECK(out[0] = call(c, TTH_OP_WHERE, args, 3, NULL));
    return 0;
}

/* Trilu: keep the upper (j - i >= k) or lower (j - i <= k) triangle of the last two dims. */
static int op_trilu(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int r = rank(in[0]);
    if (r < 2)
        return tth__onnx_fail(c, TTH_EMODEL, "Trilu needs rank >= 2");
    double k = 0;
    if (nin > 1 && in[1] && vscalar(c, in[1], "k", &k))
        return c->diag->code;
    int upper = (int)ai(c, "upper", 1);
    int64_t M = tt(in[0])->shape[r - 2], N = tt(in[0])->shape[r - 1];
    if (M * N > TTH_IMPORT_MAX_ELEMS)
        return tth__onnx_fail(c, TTH_ELIMIT, "Trilu matrix too large");
    tth_ttype mt = {.dtype = TTH_BOOL, .rank = 2, .shape = {M, N}};
    tth_tensor *mask = tth_tensor_new(&mt, NULL);
    for (int64_t i = 0; mask && i < M; i++)
        for (int64_t j = 0; j < N; j++)
            ((uint8_t *)mask->data)[i * N + j] = upper ? (double)(j - i) >= k : (double)(j - i) <= k;
    tth_rexpr *mk, *z = kx(c, in[0], 0);
    CHECK(z);
    CHECK(mk = k_tensor(c, mask));
    tth_rexpr *args[3] = {mk, in[0], z};
    CHECK(out[0] = call(c, TTH_OP_WHERE, args, 3, NULL));
    return 0;
}

#define TFIDF_MAX_POOL ((size_t)1 << 20)   /* pool and index lengths */
#define TFIDF_MAX_GRAM 64                  /* n-gram length */
#define TFIDF_MAX_WORK ((int64_t)1 << 24)  /* element comparisons */

/* The pool of a TfIdfVectorizer: n-grams of length n (1..ngroups) are pool[start[n-1] ..
 * start[n]) (the last up to the pool's end), each mapped to output column index[k] (k counting
 * the pool's n-grams in order); out_size is the largest column + 1. */
typedef struct tfidf_pool {
    const int64_t *pool, *start, *index;
    int64_t npool, ngroups, nindex, out_size;
    int64_t min_n, max_n, max_skip;
} tfidf_pool;

/* The end of group n's n-grams in the pool. */
static int64_t tfidf_group_end(const tfidf_pool *p, int64_t n)
{
    return n < p->ngroups ? p->start[n] : p->npool;
}

/* Reads and checks the gram lengths, the pool, ngram_counts and ngram_indexes. */
static int tfidf_read_pool(tth_onnx_ctx *c, tfidf_pool *p)
{
    if (attr(c, "pool_strings"))
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "TfIdfVectorizer over strings (pool_strings) is not supported");
    p->min_n = ai(c, "min_gram_length", 0);
    p->max_n = ai(c, "max_gram_length", 0);
    p->max_skip = ai(c, "max_skip_count", -1);
    if (p->min_n < 1 || p->max_n < p->min_n || p->max_n > TFIDF_MAX_GRAM || p->max_skip < 0 ||
        p->max_skip > TTH_IMPORT_MAX_WINDOW)
        return tth__onnx_fail(c, TTH_EMODEL, "TfIdfVectorizer needs 1 <= min_gram_length <= max_gram_length <= %d and "
                              "0 <= max_skip_count <= %d (has %lld, %lld, %lld)", TFIDF_MAX_GRAM, TTH_IMPORT_MAX_WINDOW,
                              (long long)p->min_n, (long long)p->max_n, (long long)p->max_skip);
    p->npool = aints_view(c, "pool_int64s", TFIDF_MAX_POOL, TTH_ELIMIT, &p->pool);
    p->ngroups = aints_view(c, "ngram_counts", TFIDF_MAX_POOL, TTH_ELIMIT, &p->start);
    p->nindex = aints_view(c, "ngram_indexes", TFIDF_MAX_POOL, TTH_ELIMIT, &p->index);
    if (p->npool == -2 || p->ngroups == -2 || p->nindex == -2)
        return c->diag->code;
    if (p->npool < 0 || p->ngroups < 1 || p->nindex < 0 || p->ngroups > TFIDF_MAX_GRAM || p->start[0] != 0)
        return tth__onnx_fail(c, TTH_EMODEL, "TfIdfVectorizer needs pool_int64s, ngram_counts (1 to %d starts, the "
                              "first 0) and ngram_indexes", TFIDF_MAX_GRAM);
    int64_t grams = 0;
    for (int64_t n = 1; n <= p->ngroups; n++) {
        int64_t lo = p->start[n - 1], hi = tfidf_group_end(p, n);
        if (hi < lo || hi > p->npool || (hi - lo) % n)
            return tth__onnx_fail(c, TTH_EMODEL, "ngram_counts[%lld] = %lld: the %lld-grams do not span whole n-grams "
                                  "of the pool (%lld values)", (long long)n - 1, (long long)lo, (long long)n,
                                  (long long)p->npool);
        grams += (hi - lo) / n;
    }
    if (grams != p->nindex || !grams)
        return tth__onnx_fail(c, TTH_EMODEL, "the pool holds %lld n-grams; ngram_indexes has %lld values", (long long)grams,
                              (long long)p->nindex);
    p->out_size = 0;
    for (int64_t k = 0; k < p->nindex; k++) {
        if (p->index[k] < 0 || p->index[k] >= (int64_t)TFIDF_MAX_POOL)
            return tth__onnx_fail(c, TTH_EMODEL, "ngram_indexes[%lld] = %lld is out of range", (long long)k,
                                  (long long)p->index[k]);
        p->out_size = p->index[k] + 1 > p->out_size ? p->index[k] + 1 : p->out_size;
    }
    return 0;
}

/* Element k of each of the g n-grams starting at pool[lo] as a constant [1, 1, g]. */
static tth_rexpr *tfidf_column(tth_onnx_ctx *c, const tfidf_pool *p, int64_t lo, int64_t n, int64_t g, int64_t k)
{
    tth_ttype ty = {.dtype = TTH_I64, .rank = 3, .shape = {1, 1, g}};
    tth_tensor *t = tth_tensor_new(&ty, NULL);
    for (int64_t j = 0; t && j < g; j++)
        ((int64_t *)t->data)[j] = p->pool[lo + j * n + k];
    return k_tensor(c, t);
}

/* How often each of the g n-grams of length n at pool[lo] occurs in each row of x ([B, C],
 * int64) with its elements d apart: [B, g] float32, summed over d = 1 .. max_skip + 1 (only d = 1
 * for unigrams). Adds the comparisons made to *work. */
static tth_rexpr *tfidf_count(tth_onnx_ctx *c, const tfidf_pool *p, tth_rexpr *x, int64_t lo, int64_t n, int64_t g,
                              int64_t *work)
{
    int64_t B = tt(x)->shape[0], C = tt(x)->shape[1], dmax = n == 1 ? 1 : p->max_skip + 1;
    tth_rexpr *acc = NULL;
    for (int64_t d = 1; d <= dmax && (n - 1) * d < C; d++) {
        int64_t S = C - (n - 1) * d, shp[3] = {B, S, 1};
        tth_rexpr *hit = NULL;
        *work += B * S * g * n;
        if (*work > TFIDF_MAX_WORK) {
            tth__onnx_fail(c, TTH_ELIMIT, "TfIdfVectorizer would compare more than %lld elements",
                           (long long)TFIDF_MAX_WORK);
            return NULL;
        }
        for (int64_t k = 0; k < n; k++) {
            tth_rexpr *col = reshape(c, slice_axis(c, x, 1, k * d, k * d + S), shp, 3);
            tth_rexpr *eq = col ? call2(c, TTH_OP_EQUAL, col, tfidf_column(c, p, lo, n, g, k), NULL) : NULL;
            if (!eq || !(hit = hit ? call2(c, TTH_OP_LOGICAL_AND, hit, eq, NULL) : eq))
                return NULL;
        }
        tth_rexpr *cnt = call1(c, TTH_OP_SUM, cast_to(c, hit, TTH_F32), json_pack("{s:[i],s:b}", "axis", 1, "keepdims", 0));
        if (!cnt || !(acc = acc ? call2(c, TTH_OP_ADD, acc, cnt, NULL) : cnt))
            return NULL;
    }
    if (!acc) { /* the row is too short for any such n-gram */
        tth_ttype ty = {.dtype = TTH_F32, .rank = 2, .shape = {B, g}};
        acc = k_tensor(c, tth_tensor_new(&ty, NULL));
    }
    return acc;
}

/* The constant 0/1 matrix [rows, out_size] mapping the counted n-grams (lengths min_n ..
 * max_n, in pool order) to their output columns. */
static tth_rexpr *tfidf_columns(tth_onnx_ctx *c, const tfidf_pool *p, int64_t rows)
{
    if (rows * p->out_size > TTH_IMPORT_MAX_ELEMS) {
        tth__onnx_fail(c, TTH_ELIMIT, "TfIdfVectorizer maps %lld n-grams to %lld columns (at most %lld pairs)",
                       (long long)rows, (long long)p->out_size, (long long)TTH_IMPORT_MAX_ELEMS);
        return NULL;
    }
    tth_ttype ty = {.dtype = TTH_F32, .rank = 2, .shape = {rows, p->out_size}};
    tth_tensor *m = tth_tensor_new(&ty, NULL);
    for (int64_t n = 1, r = 0, k = 0; m && n <= p->ngroups; n++) {
        int64_t g = (tfidf_group_end(p, n) - p->start[n - 1]) / n;
        for (int64_t j = 0; j < g; j++, k++)
            if (n >= p->min_n && n <= p->max_n)
                ((float *)m->data)[r++ * p->out_size + p->index[k]] = 1;
    }
    return k_tensor(c, m);
}

/* The counts of the pool's n-grams of lengths min_n .. max_n in x ([B, C]) per output column:
 * [B, out_size] float32 (the n-grams' counts, concatenated, times tfidf_columns). */
static tth_rexpr *tfidf_frequencies(tth_onnx_ctx *c, const tfidf_pool *p, tth_rexpr *x)
{
    tth_rexpr *parts[TFIDF_MAX_GRAM];
    int np = 0;
    int64_t work = 0, rows = 0;
    for (int64_t n = p->min_n; n <= p->max_n && n <= p->ngroups; n++) {
        int64_t lo = p->start[n - 1], g = (tfidf_group_end(p, n) - lo) / n;
        if (g && !(parts[np++] = tfidf_count(c, p, x, lo, n, g, &work)))
            return NULL;
        rows += g;
    }
    if (!np) {
        tth_ttype zty = {.dtype = TTH_F32, .rank = 2, .shape = {tt(x)->shape[0], p->out_size}};
        return k_tensor(c, tth_tensor_new(&zty, NULL));
    }
    tth_rexpr *f = np > 1 ? call(c, TTH_OP_CONCATENATE, parts, (size_t)np, json_pack("{s:i}", "axis", 1)) : parts[0];
    tth_rexpr *m = f ? tfidf_columns(c, p, rows) : NULL;
    return m ? call2(c, TTH_OP_MATMUL, f, m, NULL) : NULL;
}

/* The weights attribute as a constant [out_size] (the weight of each output column), NULL
 * without weights; *rc set on a malformed list. */
static tth_rexpr *tfidf_weights(tth_onnx_ctx *c, const tfidf_pool *p, int *rc)
{
    const Onnx__AttributeProto *a = attr(c, "weights");
    *rc = 0;
    if (!a || !a->n_floats)
        return NULL;
    if ((int64_t)a->n_floats != p->nindex || p->out_size > p->nindex) {
        *rc = tth__onnx_fail(c, TTH_EMODEL, "TfIdfVectorizer has %zu weights for %lld n-grams and %lld output columns",
                             a->n_floats, (long long)p->nindex, (long long)p->out_size);
        return NULL;
    }
    tth_ttype ty = {.dtype = TTH_F32, .rank = 1, .shape = {p->out_size}};
    tth_rexpr *w = k_tensor(c, tth_tensor_new(&ty, a->floats));
    *rc = w ? 0 : c->diag->code;
    return w;
}

/* TfIdfVectorizer over integers: x [C] or [B, C] (int32, int64) -> [out_size] or [B, out_size]
 * float32, the count of each pool n-gram in each row (lengths min_gram_length ..
 * max_gram_length, elements up to max_skip_count apart; a unigram counted once), put in the
 * column ngram_indexes gives it; mode TF: the counts; IDF: the weight (or 1) of each column
 * counted at least once; TFIDF: the counts times the weights. docs/operators.md. */
static int op_tfidf_vectorizer(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    tfidf_pool p;
    int rc = tfidf_read_pool(c, &p);
    if (rc)
        return rc;
    tth_rexpr *x = in[0], *f, *w;
    int r = rank(x);
    if ((tt(x)->dtype != TTH_I32 && tt(x)->dtype != TTH_I64) || r < 1 || r > 2)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "TfIdfVectorizer takes int32 or int64 [C] or [B, C]");
    const char *mode = as(c, "mode", "");
    int tf = !strcmp(mode, "TF"), idf = !strcmp(mode, "IDF");
    if (!tf && !idf && strcmp(mode, "TFIDF"))
        return tth__onnx_fail(c, TTH_EMODEL, "TfIdfVectorizer's mode '%s' is not TF, IDF or TFIDF", mode);
    int64_t s2[2] = {r == 2 ? tt(x)->shape[0] : 1, tt(x)->shape[r - 1]};
    CHECK(f = tfidf_frequencies(c, &p, reshape(c, cast_to(c, x, TTH_I64), s2, 2)));
    w = tf ? NULL : tfidf_weights(c, &p, &rc);
    if (rc)
        return rc;
    if (idf) {
        tth_rexpr *z = kx(c, f, 0), *pos = call2(c, TTH_OP_GREATER, f, z, NULL);
        tth_rexpr *wa[3] = {pos, w ? w : kx(c, f, 1), z};
        CHECK(pos && (f = call(c, TTH_OP_WHERE, wa, 3, NULL)));
    } else if (w) {
        CHECK(f = call2(c, TTH_OP_MULTIPLY, f, w, NULL));
    }
    int64_t s1[1] = {p.out_size};
    CHECK(out[0] = r == 1 ? reshape(c, f, s1, 1) : f);
    return 0;
}

/* ---------------------------------------------------------------- the rows */

const tth_onnx_op tth__onnx_shape_ops[] = {
    {"CenterCropPad", 18, op_center_crop_pad, 0, NULL},
    {"Compress", 9, op_compress, 0, NULL},
    {"Concat", 1, op_concat, 0, NULL},
    {"Concat", 4, op_concat, 0, NULL},
    {"Constant", 1, op_constant, 0, NULL},
    {"ConstantOfShape", 9, op_constant_of_shape, 0, NULL},
    {"DepthToSpace", 1, op_d2s, 1, NULL},
    {"Expand", 8, op_expand, 0, NULL},
    {"EyeLike", 9, op_eyelike, 0, NULL},
    {"Flatten", 1, op_flatten, 0, NULL},
    {"Gather", 1, op_gather, 0, NULL},
    {"GatherElements", 11, op_gather_elements, 0, NULL},
    {"GatherND", 11, op_gather_nd, 0, NULL},
    {"Identity", 1, op_identity, 0, NULL},
    {"OneHot", 9, op_one_hot, 0, NULL},
    {"Pad", 1, op_pad, 0, NULL},
    {"Pad", 11, op_pad, 0, NULL},
    {"Range", 11, op_range, 0, NULL},
    {"Reshape", 1, op_reshape, 0, NULL},
    {"ReverseSequence", 10, op_reverse_sequence, 0, NULL},
    {"Scatter", 9, op_scatter_elements, 0, NULL},
    {"Scatter", 11, NULL, 0, "Scatter is deprecated from opset 11: ScatterElements replaces it (the same meaning)"},
    {"ScatterElements", 11, op_scatter_elements, 0, NULL},
    {"ScatterND", 11, op_scatter_nd, 0, NULL},
    {"Shape", 1, op_shape, 0, NULL},
    {"Size", 1, op_size, 0, NULL},
    {"Slice", 1, op_slice, 0, NULL},
    {"Slice", 10, op_slice, 0, NULL},
    {"SpaceToDepth", 1, op_d2s, 0, NULL},
    {"Split", 1, op_split, 0, NULL},
    {"Squeeze", 1, op_squeeze, 0, NULL},
    {"TfIdfVectorizer", 9, op_tfidf_vectorizer, 0, NULL},
    {"Tile", 1, op_tile, 0, NULL},
    {"Transpose", 1, op_transpose, 0, NULL},
    {"Trilu", 14, op_trilu, 0, NULL},
    {"Unsqueeze", 1, op_unsqueeze, 0, NULL},
    {NULL, 0, NULL, 0, NULL},
};
