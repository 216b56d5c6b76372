/* onnx_ops.c: the operator importers' shared helpers (declared in onnx_ops.h) and the lookup of
 * an operator's row in the families' tables by the model's opset. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_ops.h"

tth_rexpr *call_unfolded(tth_onnx_ctx *c, tth_op op, tth_rexpr *const *args, size_t n, json_t *attrs)
{
    for (size_t i = 0; i < n; i++)
        if (!args[i]) {
            json_decref(attrs);
            if (!c->diag || !c->diag->code)
                tth__onnx_fail(c, TTH_EINTERNAL, "missing operand for '%s'", tth_op_name(op));
            return NULL;
        }
    tth_rexpr *e = tth_relay_call(c->m, op, args, n, attrs, c->diag);
    if (!e) {
        if (c->diag && !c->diag->code)
            tth__onnx_fail(c, TTH_ETYPE, "type error in '%s'", tth_op_name(op));
        return NULL;
    }
    int big = e->type.nfields < 0 ? !tth__onnx_shape_ok(e->type.tensor.shape, e->type.tensor.rank) : 0;
    for (int32_t i = 0; i < e->type.nfields; i++)
        big |= !tth__onnx_shape_ok(e->type.fields[i].shape, e->type.fields[i].rank);
    if (big) {
        tth__onnx_fail(c, TTH_ELIMIT, "the result of '%s' has more than %lld elements", tth_op_name(op),
                       (long long)TTH_IMPORT_MAX_TENSOR);
        return NULL;
    }
    return e;
}

tth_rexpr *call(tth_onnx_ctx *c, tth_op op, tth_rexpr *const *args, size_t n, json_t *attrs)
{
    tth_rexpr *e = call_unfolded(c, op, args, n, attrs);
    return e ? tth__fold_call(c->m, e, TTH_IMPORT_FOLD_ELEMS, c->diag) : NULL;
}

tth_rexpr *call1(tth_onnx_ctx *c, tth_op op, tth_rexpr *a, json_t *attrs) { return call(c, op, &a, 1, attrs); }

tth_rexpr *call2(tth_onnx_ctx *c, tth_op op, tth_rexpr *a, tth_rexpr *b, json_t *attrs)
{
    tth_rexpr *args[2] = {a, b};
    return call(c, op, args, 2, attrs);
}

const Onnx__AttributeProto *attr(tth_onnx_ctx *c, const char *name)
{
    for (size_t i = 0; i < c->node->n_attribute; i++) {
        const Onnx__AttributeProto *a = c->node->attribute[i];
        if (a && a->name && !strcmp(a->name, name))
            return a;
    }
    return NULL;
}

int64_t ai(tth_onnx_ctx *c, const char *name, int64_t dflt)
{
    const Onnx__AttributeProto *a = attr(c, name);
    return a && a->has_i ? a->i : dflt;
}

double af(tth_onnx_ctx *c, const char *name, double dflt)
{
    const Onnx__AttributeProto *a = attr(c, name);
    return a && a->has_f ? a->f : dflt;
}

const char *as(tth_onnx_ctx *c, const char *name, const char *dflt)
{
    const Onnx__AttributeProto *a = attr(c, name);
    if (!a || !a->has_s)
        return dflt;
    char *s = tth_arena_alloc(c->m->arena, a->s.len + 1);
    if (!s)
        return dflt;
    if (a->s.len)
        memcpy(s, a->s.data, a->s.len);
    for (size_t i = 0; i < a->s.len; i++)
        if (!s[i])
            s[i] = '?';
    return s;
}

int64_t aints_view(tth_onnx_ctx *c, const char *name, size_t max, int code, const int64_t **v)
{
    const Onnx__AttributeProto *a = attr(c, name);
    if (!a || (!a->n_ints && !(a->has_type && a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS)))
        return -1;
    if (a->n_ints > max) {
        tth__onnx_fail(c, code, "attribute '%s' has %zu values (at most %zu)", name, a->n_ints, max);
        return -2;
    }
    *v = a->ints;
    return (int64_t)a->n_ints;
}

int aints(tth_onnx_ctx *c, const char *name, int64_t *out, int max)
{
    const int64_t *v = NULL;
    int64_t n = aints_view(c, name, (size_t)max, TTH_EUNSUPPORTED, &v);
    for (int64_t i = 0; i < n; i++)
        out[i] = v[i];
    return (int)n;
}

int vints(tth_onnx_ctx *c, tth_rexpr *e, const char *what, int64_t *out, int max)
{
    if (!e || e->kind != TTH_REXPR_CONST) {
        tth__onnx_fail(c, TTH_EUNSUPPORTED, "input '%s' is not a constant (a dynamic shape or value)", what);
        tth_diag_hint(c->diag, "tth needs static shapes: compute this input from constants only, or, when it is "
                               "a graph input, fix it at compile time: tthctl compile --bind NAME=FILE");
        return -2;
    }
    const tth_tensor *t = e->u.constant.value;
    if (tth_dtype_is_float(t->type.dtype) || t->type.rank > 1) {
        tth__onnx_fail(c, TTH_EMODEL, "input '%s' must be a 1-D integer tensor", what);
        return -2;
    }
    int64_t n = tth_ttype_numel(&t->type);
    if (n > max) {
        tth__onnx_fail(c, TTH_EUNSUPPORTED, "input '%s' has %lld values (at most %d)", what, (long long)n, max);
        return -2;
    }
    for (int64_t i = 0; i < n; i++)
        out[i] = tth__ld_i64(t, i);
    return (int)n;
}

int vscalar(tth_onnx_ctx *c, tth_rexpr *e, const char *what, double *out)
{
    if (!e || e->kind != TTH_REXPR_CONST) {
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "input '%s' is not a constant", what);
    }
    const tth_tensor *t = e->u.constant.value;
    if (tth_ttype_numel(&t->type) != 1)
        return tth__onnx_fail(c, TTH_EMODEL, "input '%s' must hold one value", what);
    *out = tth__ld_f64(t, 0);
    return 0;
}

tth_rexpr *k_tensor(tth_onnx_ctx *c, tth_tensor *t)
{
    if (!t) {
        tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
        return NULL;
    }
    tth_rexpr *e = tth_relay_const(c->m, t, NULL);
    if (!e)
        tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
    return e;
}

tth_rexpr *k_iota(tth_onnx_ctx *c, const int64_t *shape, int r)
{
    tth_ttype t = {.dtype = TTH_I64, .rank = r};
    memcpy(t.shape, shape, (size_t)r * sizeof *shape);
    tth_tensor *k = tth_tensor_new(&t, NULL);
    for (int64_t i = 0, n = tth_ttype_numel(&t); k && i < n; i++)
        ((int64_t *)k->data)[i] = i;
    return k_tensor(c, k);
}

tth_rexpr *k_scalar(tth_onnx_ctx *c, tth_dtype dt, double v)
{
    tth_ttype ty = {.dtype = dt, .rank = 0};
    tth_tensor *t = tth_tensor_new(&ty, NULL);
    if (t)
        tth__st_f64(t, 0, v);
    return k_tensor(c, t);
}

const tth_ttype *tt(const tth_rexpr *e) { return &e->type.tensor; }
int rank(const tth_rexpr *e) { return e->type.tensor.rank; }

int norm_axis(tth_onnx_ctx *c, int64_t axis, int r, int64_t *out)
{
    *out = 0; /* defined on failure too (callers return at once; the compiler cannot tell) */
    if (axis < -r || axis >= (r ? r : 1)) {
        return tth__onnx_fail(c, TTH_EMODEL, "axis %lld is out of range for rank %d", (long long)axis, r);
    }
    *out = axis < 0 ? axis + r : axis;
    return 0;
}

tth_rexpr *reshape(tth_onnx_ctx *c, tth_rexpr *x, const int64_t *shape, int r)
{
    if (!x)
        return NULL;
    if (rank(x) == r && !memcmp(tt(x)->shape, shape, sizeof(int64_t) * (size_t)r))
        return x;
    return call1(c, TTH_OP_RESHAPE, x, json_pack("{s:o}", "newshape", tth__json_ints(shape, r)));
}

tth_rexpr *cast_to(tth_onnx_ctx *c, tth_rexpr *x, tth_dtype dt)
{
    if (!x || tt(x)->dtype == dt)
        return x;
    return call1(c, TTH_OP_CAST, x, json_pack("{s:s}", "dtype", tth_dtype_name(dt)));
}

int need(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, size_t k)
{
    for (size_t i = 0; i < k; i++)
        if (i >= nin || !in[i])
            return tth__onnx_fail(c, TTH_EMODEL, "'%s' needs at least %zu inputs", c->node->op_type, k);
    return 0;
}

int tensor_input(tth_onnx_ctx *c, tth_rexpr **in, size_t nin)
{
    for (size_t i = 0; i < nin; i++)
        if (in[i] && in[i]->type.nfields >= 0)
            return tth__onnx_fail(c, TTH_EUNSUPPORTED, "input %zu is a sequence or tuple", i);
    return 0;
}

/* Opset < 7 legacy broadcasting: broadcast=1 with axis aligns B's dims at A's axis. */
static tth_rexpr *legacy_bcast(tth_onnx_ctx *c, tth_rexpr *a, tth_rexpr *b)
{
    if (c->version >= 7 || !ai(c, "broadcast", 0) || !attr(c, "axis"))
        return b;
    int64_t axis;
    if (norm_axis(c, ai(c, "axis", 0), rank(a), &axis))
        return NULL;
    int64_t shape[TTH_MAX_RANK];
    int r = rank(a) - (int)axis;
    if (r < rank(b) || r > TTH_MAX_RANK) {
        tth__onnx_fail(c, TTH_EMODEL, "legacy broadcast axis does not fit B's rank");
        return NULL;
    }
    for (int i = 0; i < r; i++)
        shape[i] = i < rank(b) ? tt(b)->shape[i] : 1;
    return reshape(c, b, shape, r);
}

int bin(tth_onnx_ctx *c, tth_op op, tth_rexpr **in, size_t nin, tth_rexpr **out, json_t *attrs)
{
    if (nin < 2 || !in[0] || !in[1]) {
        json_decref(attrs);
        return tth__onnx_fail(c, TTH_EMODEL, "'%s' needs 2 inputs", c->node->op_type);
    }
    tth_rexpr *b = legacy_bcast(c, in[0], in[1]);
    if (!b) {
        json_decref(attrs);
        return c->diag->code;
    }
    CHECK(out[0] = call2(c, op, in[0], b, attrs));
    return 0;
}

int spatial_attrs(tth_onnx_ctx *c, int nsp, const int64_t *in_hw, const int64_t *kernel, int transpose,
                         spatial *sp)
{
    int64_t v[8];
    int n;
    for (int i = 0; i < 3; i++) {
        sp->k[i] = 1;
        sp->s[i] = sp->d[i] = 1;
        sp->pb[i] = sp->pe[i] = sp->outpad[i] = 0;
    }
    int off = nsp < 2 ? 2 - nsp : 0;
    for (int i = 0; i < nsp; i++)
        sp->k[off + i] = kernel[i];
    if ((n = aints(c, "kernel_shape", v, 8)) == -2)
        return c->diag->code;
    if (n >= 0) {
        if (n != nsp)
            return tth__onnx_fail(c, TTH_EMODEL, "kernel_shape has %d values for %d spatial dims", n, nsp);
        for (int i = 0; i < nsp; i++)
            sp->k[off + i] = v[i];
    }
    const char *names[3] = {"strides", "dilations", "output_padding"};
    int64_t *dst[3] = {sp->s, sp->d, sp->outpad};
    for (int a = 0; a < 3; a++) {
        if ((n = aints(c, names[a], v, 8)) == -2)
            return c->diag->code;
        if (n >= 0 && n != nsp)
            return tth__onnx_fail(c, TTH_EMODEL, "%s has %d values for %d spatial dims", names[a], n, nsp);
        for (int i = 0; i < n; i++)
            dst[a][off + i] = v[i];
    }
    if ((n = aints(c, "pads", v, 8)) == -2)
        return c->diag->code;
    if (n >= 0) {
        if (n != 2 * nsp)
            return tth__onnx_fail(c, TTH_EMODEL, "pads has %d values for %d spatial dims", n, nsp);
        for (int i = 0; i < nsp; i++) {
            sp->pb[off + i] = v[i];
            sp->pe[off + i] = v[nsp + i];
        }
    }
    for (int i = 0; i < 3; i++) {
        const int64_t W = TTH_IMPORT_MAX_WINDOW;
        if (sp->k[i] < 1 || sp->k[i] > W || sp->s[i] < 1 || sp->s[i] > W || sp->d[i] < 1 || sp->d[i] > W ||
            sp->pb[i] < 0 || sp->pe[i] < 0 || sp->pb[i] > W || sp->pe[i] > W ||
            sp->outpad[i] < 0 || sp->outpad[i] >= (sp->s[i] > sp->d[i] ? sp->s[i] : sp->d[i]) + 1)
            return tth__onnx_fail(c, TTH_EMODEL, "kernel, strides, dilations or pads out of range");
    }
    const char *ap = as(c, "auto_pad", "NOTSET");
    if (!strcmp(ap, "NOTSET"))
        return 0;
    if (!strcmp(ap, "VALID")) {
        for (int i = 0; i < 3; i++)
            sp->pb[i] = sp->pe[i] = 0;
        return 0;
    }
    int upper = !strcmp(ap, "SAME_UPPER");
    if (!upper && strcmp(ap, "SAME_LOWER"))
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: auto_pad '%s'", ap);
    for (int i = 0; i < nsp; i++) {
        int j = off + i;
        int64_t in = in_hw[i], ext = (sp->k[j] - 1) * sp->d[j] + 1, total;
        if (!transpose) {
            int64_t o = (in + sp->s[j] - 1) / sp->s[j];
            total = (o - 1) * sp->s[j] + ext - in;
        } else {
            int64_t o = in * sp->s[j];
            total = sp->s[j] * (in - 1) + sp->outpad[j] + ext - o;
        }
        if (total < 0)
            total = 0;
        if (!transpose) {
            sp->pb[j] = upper ? total / 2 : total - total / 2;
        } else {
            /* ConvTranspose: SAME_UPPER puts the smaller half first (ONNX reference) */
            sp->pb[j] = upper ? total / 2 : total - total / 2;
        }
        sp->pe[j] = total - sp->pb[j];
    }
    return 0;
}

json_t *pads_json(const spatial *sp)
{
    int64_t p[4] = {sp->pb[0], sp->pb[1], sp->pe[0], sp->pe[1]};
    return tth__json_ints(p, 4);
}

tth_rexpr *to4d(tth_onnx_ctx *c, tth_rexpr *x, const char *what)
{
    if (rank(x) == 4)
        return x;
    if (rank(x) == 3) {
        int64_t s[4] = {tt(x)->shape[0], tt(x)->shape[1], 1, tt(x)->shape[2]};
        return reshape(c, x, s, 4);
    }
    tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: %s of rank %d (only 1-D and 2-D are supported)",
                   what, rank(x));
    return NULL;
}

tth_rexpr *from4d(tth_onnx_ctx *c, tth_rexpr *y, int orig_rank)
{
    if (!y || orig_rank == 4)
        return y;
    int64_t s[3] = {tt(y)->shape[0], tt(y)->shape[1], tt(y)->shape[3]};
    return reshape(c, y, s, 3);
}

tth_rexpr *wrap_negative(tth_onnx_ctx *c, tth_rexpr *idx, tth_rexpr *dims)
{
    tth_rexpr *z = k_scalar(c, TTH_I64, 0);
    tth_rexpr *neg = z && dims ? call2(c, TTH_OP_LESS, idx, z, NULL) : NULL;
    tth_rexpr *plus = neg ? call2(c, TTH_OP_ADD, idx, dims, NULL) : NULL;
    if (!plus)
        return NULL;
    tth_rexpr *wa[3] = {neg, plus, idx};
    return call(c, TTH_OP_WHERE, wa, 3, NULL);
}

tth_rexpr *gather_elements(tth_onnx_ctx *c, tth_rexpr *data, tth_rexpr *index, int64_t axis)
{
    int r = rank(data);
    const tth_ttype *dt = tt(data), *it = tt(index);
    if (rank(index) != r || r < 1) {
        tth__onnx_fail(c, TTH_EMODEL, "GatherElements' indices have rank %d; the data %d", rank(index), r);
        return NULL;
    }
    int64_t st[TTH_MAX_RANK];
    for (int k = r - 1, acc = 1; k >= 0; k--) {
        st[k] = acc;
        acc *= dt->shape[k];
        if (k != axis && it->shape[k] > dt->shape[k]) {
            tth__onnx_fail(c, TTH_EMODEL, "GatherElements' indices are %lld long in axis %d; the data %lld",
                           (long long)it->shape[k], k, (long long)dt->shape[k]);
            return NULL;
        }
    }
    tth_ttype gt = {.dtype = TTH_I64, .rank = r};
    memcpy(gt.shape, it->shape, sizeof gt.shape);
    tth_tensor *grid = tth_tensor_new(&gt, NULL);
    int64_t n = tth_ttype_numel(&gt);
    for (int64_t i = 0; grid && i < n; i++) {
        int64_t rest = i, off = 0;
        for (int k = r - 1; k >= 0; k--) {
            int64_t ik = rest % it->shape[k];
            rest /= it->shape[k];
            if (k != axis)
                off += ik * st[k];
        }
        ((int64_t *)grid->data)[i] = off;
    }
    tth_rexpr *base = k_tensor(c, grid), *idx = cast_to(c, index, TTH_I64);
    tth_rexpr *dim = k_scalar(c, TTH_I64, (double)dt->shape[axis]), *stride = k_scalar(c, TTH_I64, (double)st[axis]);
    if (!base || !idx || !dim || !stride)
        return NULL;
    tth_rexpr *wrapped = wrap_negative(c, idx, dim);
    tth_rexpr *scaled = wrapped ? call2(c, TTH_OP_MULTIPLY, wrapped, stride, NULL) : NULL;
    tth_rexpr *flat = scaled ? call2(c, TTH_OP_ADD, base, scaled, NULL) : NULL;
    int64_t all = tth_ttype_numel(dt);
    tth_rexpr *d1 = flat ? reshape(c, data, &all, 1) : NULL;
    return d1 ? call2(c, TTH_OP_TAKE, d1, flat, json_pack("{s:i}", "axis", 0)) : NULL;
}

/* Scatters as selections: for K updates into N positions (of R elements each), a [K, N] match
 * of every update's position against every position, then per position the update that hits it
 * (reduction none), their sum (add) or product (mul), or (opset 18) the larger (max) or smaller
 * (min) of their maximum (minimum) and the data, else the data. O(K * N * R): bounded. */
#define SCATTER_MAX_WORK ((int64_t)1 << 24)

int scatter_flat(tth_onnx_ctx *c, tth_rexpr *data2, tth_rexpr *pos, tth_rexpr *upd2, const char *red,
                        tth_rexpr **out)
{
    /* data2 [N, R], pos int64 [K], upd2 [K, R] */
    int64_t N = tt(data2)->shape[0], R = tt(data2)->shape[1], K = tt(pos)->shape[0];
    if (K * N * R > SCATTER_MAX_WORK)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "%s of %lld updates into %lld positions: more than 2^24 "
                              "comparisons", c->node->op_type, (long long)K, (long long)N);
    int none = !strcmp(red, "none"), add = !strcmp(red, "add"), mul = !strcmp(red, "mul");
    int mx = !strcmp(red, "max"), mn = !strcmp(red, "min"); /* opset 18 */
    if (!none && !add && !mul && !mx && !mn)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: %s reduction '%s'", c->node->op_type,
                              red);
    if ((mx || mn) && !tth_dtype_is_float(tt(data2)->dtype))
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: %s reduction '%s' of %s data "
                              "(floating-point data only)", c->node->op_type, red, tth_dtype_name(tt(data2)->dtype));
    int64_t k1[2] = {K, 1}, kn1[3] = {K, N, 1}, k1r[3] = {K, 1, R}, row[2] = {1, N};
    tth_rexpr *ki, *p2, *m, *m3, *u3, *fill, *sel, *acc;
    CHECK(ki = k_iota(c, row, 2));
    CHECK(p2 = reshape(c, pos, k1, 2));
    CHECK(m = call2(c, TTH_OP_EQUAL, p2, ki, NULL));
    CHECK(m3 = reshape(c, m, kn1, 3));
    CHECK(u3 = reshape(c, upd2, k1r, 3));
    CHECK(fill = k_scalar(c, tt(data2)->dtype, mul ? 1 : mx ? -INFINITY : mn ? INFINITY : 0));
    tth_rexpr *wa[3] = {m3, u3, fill};
    CHECK(sel = call(c, TTH_OP_WHERE, wa, 3, NULL)); /* [K, N, R] */
    int64_t ax0 = 0;
    CHECK(acc = call1(c, mul ? TTH_OP_PROD : mx ? TTH_OP_MAX : mn ? TTH_OP_MIN : TTH_OP_SUM, sel,
                      json_pack("{s:o,s:b}", "axis", tth__json_ints(&ax0, 1), "keepdims", 0)));
    if (mx || mn) { /* positions no update hits hold -inf (+inf): the data wins there */
        tth_rexpr *better, *wm[3];
        CHECK(better = call2(c, mx ? TTH_OP_GREATER : TTH_OP_LESS, acc, data2, NULL));
        wm[0] = better;
        wm[1] = acc;
        wm[2] = data2;
        CHECK(*out = call(c, TTH_OP_WHERE, wm, 3, NULL));
        return 0;
    }
    if (add) {
        CHECK(*out = call2(c, TTH_OP_ADD, data2, acc, NULL));
        return 0;
    }
    if (mul) {
        CHECK(*out = call2(c, TTH_OP_MULTIPLY, data2, acc, NULL));
        return 0;
    }
    tth_rexpr *hits, *z, *hit, *hit2;
    int64_t n1[2] = {N, 1};
    CHECK(hits = call1(c, TTH_OP_SUM, cast_to(c, m, TTH_I32),
                       json_pack("{s:o,s:b}", "axis", tth__json_ints(&ax0, 1), "keepdims", 0)));
    CHECK(z = k_scalar(c, TTH_I32, 0));
    CHECK(hit = call2(c, TTH_OP_GREATER, hits, z, NULL));
    CHECK(hit2 = reshape(c, hit, n1, 2));
    tth_rexpr *wb[3] = {hit2, acc, data2};
    CHECK(*out = call(c, TTH_OP_WHERE, wb, 3, NULL));
    return 0;
}

tth_rexpr *slice_axis(tth_onnx_ctx *c, tth_rexpr *x, int axis, int64_t lo, int64_t hi)
{
    int r = rank(x);
    int64_t b[TTH_MAX_RANK], e[TTH_MAX_RANK], st[TTH_MAX_RANK];
    for (int i = 0; i < r; i++) {
        b[i] = 0;
        e[i] = tt(x)->shape[i];
        st[i] = 1;
    }
    b[axis] = lo;
    e[axis] = hi;
    return call1(c, TTH_OP_STRIDED_SLICE, x, json_pack("{s:o,s:o,s:o}", "begin", tth__json_ints(b, r), "end",
                                                       tth__json_ints(e, r), "strides", tth__json_ints(st, r)));
}

tth_rexpr *kx(tth_onnx_ctx *c, tth_rexpr *like, double v) { return k_scalar(c, tt(like)->dtype, v); }
/* ---------------------------------------------------------------- the operator table */

/* The families' rows of the default domain (docs/operators.md, "The operator table"). */
static const tth_onnx_op *const default_domain[] = {
    tth__onnx_elementwise_ops, tth__onnx_nn_ops,      tth__onnx_reduce_ops, tth__onnx_shape_ops,
    tth__onnx_control_ops,     tth__onnx_quant_ops,   tth__onnx_signal_ops, tth__onnx_training_ops,
};
static const tth_onnx_op *const training_domain[] = {tth__onnx_training_domain_ops};

/* The first row named `name` in the tables and the number of its rows (an operator's rows are
 * consecutive, by since-version), or NULL. */
static const tth_onnx_op *rows_named(const tth_onnx_op *const *tables, size_t ntables, const char *name, size_t *n)
{
    for (size_t t = 0; t < ntables; t++)
        for (const tth_onnx_op *r = tables[t]; r->name; r++)
            if (!strcmp(r->name, name)) {
                size_t k = 0;
                while (r[k].name && !strcmp(r[k].name, name))
                    k++;
                *n = k;
                return r;
            }
    return NULL;
}

/* "7 to 8, 9" for the rows that import (a refusal row is not one). */
static void imported_ranges(const tth_onnx_op *r, size_t n, int newest, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = 0;
    for (size_t i = 0; i < n && at < len; i++) {
        if (!r[i].fn)
            continue;
        int last = tth__onnx_row_last(r, n, i, newest);
        int w = r[i].since == last ? snprintf(buf + at, len - at, "%s%d", at ? ", " : "", r[i].since)
                                   : snprintf(buf + at, len - at, "%s%d to %d", at ? ", " : "", r[i].since, last);
        at += w > 0 ? (size_t)w : 0;
    }
}

int tth__onnx_op_row(tth_onnx_ctx *c, int training, const char *name, const tth_onnx_op **row)
{
    int64_t v = training ? c->training : c->opset;
    int newest = training ? 1 : TTH_ONNX_MAX_OPSET;
    size_t n = 0;
    const tth_onnx_op *r = training ? rows_named(training_domain, 1, name, &n)
                                    : rows_named(default_domain, sizeof default_domain / sizeof default_domain[0],
                                                 name, &n);
    if (!r)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported operator '%s'%s", name,
                              training ? " (domain '" TTH_ONNX_TRAINING_DOMAIN "')" : "");
    for (size_t i = 0; i < n; i++) {
        if (v < r[i].since || v > tth__onnx_row_last(r, n, i, newest))
            continue;
        if (!r[i].fn)
            return tth__onnx_fail(c, TTH_EUNSUPPORTED, "%s (the model imports opset %lld)", r[i].refusal,
                                  (long long)v);
        *row = &r[i];
        return 0;
    }
    if (v < r[0].since) {
        int rc = tth__onnx_fail(c, TTH_EMODEL, "operator '%s' is not in opset %lld: ONNX defines it from opset %d",
                                name, (long long)v, r[0].since);
        tth_diag_hint(c->diag, "export the model with opset %d or later", r[0].since);
        return rc;
    }
    char ranges[128];
    imported_ranges(r, n, newest, ranges, sizeof ranges);
    return tth__onnx_fail(c, TTH_EUNSUPPORTED, "'%s' of opset %lld is not supported: tth imports it at opsets %s", name,
                          (long long)v, ranges);
}

const tth_onnx_op *tth__onnx_table(int training, size_t i)
{
    const tth_onnx_op *const *tables = training ? training_domain : default_domain;
    size_t nt = training ? 1 : sizeof default_domain / sizeof default_domain[0];
    return i < nt ? tables[i] : NULL;
}
