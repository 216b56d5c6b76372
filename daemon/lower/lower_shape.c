/* lower_shape.c: data movement. Each output element is loaded from the input position it comes
 * from: reshape (same storage order), transpose (permuted index), broadcast_to (numpy),
 * concatenate/split (offset along the axis), strided_slice (begin + i*stride), take (ONNX
 * Gather: negative indices wrap; indices are clamped so no load can leave the buffer), pad
 * (constant / edge: clamp / reflect: mirror without repeating the edge). */
#include <stdio.h>
#include <string.h>

#include "lower_internal.h"

typedef struct sh_arg {
    const tth_rexpr *call;
    const lw_sink *s;
    tth_tbuffer *x;
    int field;
    int64_t off;              /* concatenate/split offset along axis */
    int axis;
    int64_t v1[TTH_MAX_RANK], v2[TTH_MAX_RANK], v3[TTH_MAX_RANK];
    tth_texpr *row;           /* concatenate by rows: the row of axis + 1 */
    const tth_pad_attrs *pad; /* pad: its attributes, read once by lw_pad */
} sh_arg;

static tth_tstmt *sh_nest(lw_ctx *c, const tth_ttype *t, lw_body_fn fn, sh_arg *a)
{
    return lw_nest(c, t->shape, t->rank, LW_PARALLEL | LW_VECTOR, fn, a);
}

/* the loops over the call's output; none (an empty statement) when it is empty */
static tth_tstmt *sh_nest_out(lw_ctx *c, const tth_rexpr *call, lw_body_fn fn, sh_arg *a)
{
    const tth_ttype *ot = lw_ty(call);
    if (lw_numel(ot->shape, ot->rank) == 0)
        return tth_tir_seq(c->m, NULL, 0);
    return sh_nest(c, ot, fn, a);
}

static tth_tbuffer *sh_in(lw_ctx *c, const tth_rexpr *call, size_t i)
{
    return lw_buf(c, lw_arg(call, i));
}

/* reshape */
static tth_tstmt *reshape_body(lw_ctx *c, tth_texpr *const *idx, void *arg)
{
    sh_arg *a = arg;
    const tth_ttype *ot = lw_ty(a->call);
    tth_texpr *v = tth_tir_load(c->m, a->x, lw_flat(c, ot->shape, ot->rank, idx));
    return lw_sink_store(c, a->s, 0, idx, v);
}

tth_tstmt *lw_reshape(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    sh_arg a = {call, s, sh_in(c, call, 0), 0, 0, 0, {0}, {0}, {0}, NULL, NULL};
    return a.x ? sh_nest(c, lw_ty(call), reshape_body, &a) : NULL;
}

/* transpose: out[idx] = x[in] with in[axes[d]] = idx[d] */
static int transpose_axes(const tth_rexpr *call, int64_t *axes)
{
    return tth_transpose_axes_of(call->u.call.attrs, lw_ty(lw_arg(call, 0))->rank, axes, NULL) == 0;
}

static tth_tstmt *transpose_body(lw_ctx *c, tth_texpr *const *idx, void *arg)
{
    sh_arg *a = arg;
    tth_texpr *in[TTH_MAX_RANK];
    for (int d = 0; d < a->x->rank; d++)
        in[a->v1[d]] = idx[d];
    return lw_sink_store(c, a->s, 0, idx, lw_load_at(c, a->x, in));
}

tth_tstmt *lw_transpose(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    sh_arg a = {call, s, sh_in(c, call, 0), 0, 0, 0, {0}, {0}, {0}, NULL, NULL};
    if (!a.x)
        return NULL;
    transpose_axes(call, a.v1);
    return sh_nest(c, lw_ty(call), transpose_body, &a);
}

/* broadcast_to */
static tth_tstmt *bcast_body(lw_ctx *c, tth_texpr *const *idx, void *arg)
{
    sh_arg *a = arg;
    tth_texpr *in[TTH_MAX_RANK];
    lw_bcast_idx(c, lw_ty(a->call), lw_ty(lw_arg(a->call, 0)), idx, in);
    return lw_sink_store(c, a->s, 0, idx, lw_load_at(c, a->x, in));
}

tth_tstmt *lw_broadcast_to(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    sh_arg a = {call, s, sh_in(c, call, 0), 0, 0, 0, {0}, {0}, {0}, NULL, NULL};
    return a.x ? sh_nest(c, lw_ty(call), bcast_body, &a) : NULL;
}

/* concatenate: each input copied to its slot along axis; a->row, when set, is the index of
 * axis a->axis + 1 (the nest runs over one row of it, lw_concatenate) */
static tth_tstmt *concat_body(lw_ctx *c, tth_texpr *const *idx, void *arg)
{
    sh_arg *a = arg;
    tth_texpr *o[TTH_MAX_RANK], *in[TTH_MAX_RANK];
    for (int d = 0; d < a->x->rank; d++) {
        in[d] = a->row && d == a->axis + 1 ? a->row : idx[d];
        o[d] = d == a->axis ? lw_add(c, in[d], lw_i(c, a->off)) : in[d];
    }
    return lw_sink_store(c, a->s, 0, o, lw_load_at(c, a->x, in));
}

/* A channel concatenation of one image (ones before the axis, rows after it: NCHW or NCHW<b>c)
 * large enough to split is one parallel loop over the output's rows, each task copying its
 * rows of every input; copied input by input, the inputs too small to split would all be
 * copied by the launching thread, which reads the rows the other cores wrote and writes the
 * rows they read next (docs/threads.md, "Locality"). A row is axis + 1 with the axes after it:
 * with none (a join of tokens [1, T, D] along T), each task would copy one column, every
 * element a stride of D apart (ViT's class token and position embedding: 738 us) */
static int concat_by_rows(const tth_ttype *ot, int64_t ax)
{
    if (ax + 2 >= ot->rank || ot->shape[ax + 1] < 2 || lw_numel(ot->shape, ot->rank) < LW_ROWS_PARALLEL_MIN)
        return 0;
    for (int64_t d = 0; d < ax; d++)
        if (ot->shape[d] != 1)
            return 0;
    return 1;
}

tth_tstmt *lw_concatenate(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    const tth_ttype *ot = lw_ty(call);
    int64_t ax = lw_attr_int(call, "axis", 0);
    if (ax < 0)
        ax += ot->rank;
    int rows = concat_by_rows(ot, ax);
    tth_tvar *rv = rows ? lw_var(c, "row", TTH_I64) : NULL;
    if (rows && !rv)
        return NULL;
    tth_tstmt *seq = NULL;
    int64_t off = 0;
    for (size_t i = 0; i < call->u.call.nargs; i++) {
        sh_arg a = {call, s, sh_in(c, call, i), 0, off, (int)ax, {0}, {0}, {0}, rv ? lw_ref(c, rv) : NULL, NULL};
        if (!a.x)
            return NULL;
        const tth_ttype *it = lw_ty(lw_arg(call, i));
        if (lw_numel(it->shape, it->rank) > 0) {
            tth_tstmt *st;
            if (rows) {
                int64_t one_row[TTH_MAX_RANK];
                memcpy(one_row, it->shape, sizeof(int64_t) * (size_t)it->rank);
                one_row[ax + 1] = 1;
                st = lw_nest(c, one_row, it->rank, LW_VECTOR, concat_body, &a);
            } else {
                st = sh_nest(c, it, concat_body, &a);
            }
            if (lw_append(c, &seq, st))
                return NULL;
        }
        off += it->shape[ax];
    }
    if (!seq)
        return tth_tir_seq(c->m, NULL, 0);
    return rows ? lw_for(c, rv, lw_i(c, 0), lw_i(c, ot->shape[ax + 1]), TTH_LOOP_PARALLEL, seq) : seq;
}

/* split: field f is x[.., off_f + i, ..] */
static tth_tstmt *split_body(lw_ctx *c, tth_texpr *const *idx, void *arg)
{
    sh_arg *a = arg;
    tth_texpr *in[TTH_MAX_RANK];
    for (int d = 0; d < a->x->rank; d++)
        in[d] = d == a->axis ? lw_add(c, idx[d], lw_i(c, a->off)) : idx[d];
    return lw_sink_store(c, a->s, a->field, idx, lw_load_at(c, a->x, in));
}

tth_tstmt *lw_split(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    tth_tbuffer *x = sh_in(c, call, 0);
    if (!x)
        return NULL;
    int64_t ax = lw_attr_int(call, "axis", 0);
    if (ax < 0)
        ax += x->rank;
    tth_tstmt *seq = NULL;
    int64_t off = 0;
    for (int f = 0; f < call->type.nfields && f < s->nfields; f++) {
        const tth_ttype *ft = &call->type.fields[f];
        sh_arg a = {call, s, x, f, off, (int)ax, {0}, {0}, {0}, NULL, NULL};
        if (lw_numel(ft->shape, ft->rank) > 0 && lw_append(c, &seq, sh_nest(c, ft, split_body, &a)))
            return NULL;
        off += ft->shape[ax];
    }
    return seq ? seq : tth_tir_seq(c->m, NULL, 0);
}

/* strided_slice: in[d] = begin[d] + idx[d] * strides[d] */
static tth_tstmt *slice_body(lw_ctx *c, tth_texpr *const *idx, void *arg)
{
    sh_arg *a = arg;
    tth_texpr *in[TTH_MAX_RANK];
    for (int d = 0; d < a->x->rank; d++)
        in[d] = lw_add(c, lw_i(c, a->v1[d]), lw_mul(c, idx[d], lw_i(c, a->v3[d])));
    return lw_sink_store(c, a->s, 0, idx, lw_load_at(c, a->x, in));
}

tth_tstmt *lw_strided_slice(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    sh_arg a = {call, s, sh_in(c, call, 0), 0, 0, 0, {0}, {0}, {0}, NULL, NULL};
    if (!a.x)
        return NULL;
    int r = a.x->rank;
    int nb = lw_attr_ints(call, "begin", a.v1, TTH_MAX_RANK);
    int ns = lw_attr_ints(call, "strides", a.v3, TTH_MAX_RANK);
    for (int d = 0; d < r; d++) {
        if (d >= nb)
            a.v1[d] = 0;
        if (d >= ns)
            a.v3[d] = 1;
    }
    return sh_nest_out(c, call, slice_body, &a);
}

/* take (Gather): out[pre, j, post] = data[pre, wrap(indices[j]), post] */
static tth_tstmt *take_body(lw_ctx *c, tth_texpr *const *idx, void *arg)
{
    sh_arg *a = arg;
    const tth_rexpr *ie = lw_arg(a->call, 1);
    const tth_ttype *it = lw_ty(ie);
    tth_tbuffer *ib = lw_buf(c, ie);
    if (!ib)
        return NULL;
    int ax = a->axis;
    int64_t D = a->x->shape[ax];
    tth_texpr *k = lw_cast(c, TTH_I64, lw_load_at(c, ib, idx + ax));
    tth_tvar *vk = lw_var(c, "k", TTH_I64);
    if (!vk)
        return NULL;
    tth_texpr *kr = lw_ref(c, vk);
    tth_texpr *wrapped = tth_tir_select(c->m, lw_bin(c, TTH_TBIN_LT, kr, lw_i(c, 0)), lw_add(c, kr, lw_i(c, D)), kr);
    tth_texpr *clamped = lw_bin(c, TTH_TBIN_MIN, lw_bin(c, TTH_TBIN_MAX, wrapped, lw_i(c, 0)), lw_i(c, D - 1));
    tth_tvar *vj = lw_var(c, "kk", TTH_I64);
    if (!vj)
        return NULL;
    tth_texpr *in[TTH_MAX_RANK];
    for (int d = 0; d < ax; d++)
        in[d] = idx[d];
    in[ax] = lw_ref(c, vj);
    for (int d = ax + 1; d < a->x->rank; d++)
        in[d] = idx[d - 1 + it->rank];
    tth_tstmt *st = lw_sink_store(c, a->s, 0, idx, lw_load_at(c, a->x, in));
    return lw_let(c, vk, k, lw_let(c, vj, clamped, st));
}

tth_tstmt *lw_take(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    sh_arg a = {call, s, sh_in(c, call, 0), 0, 0, 0, {0}, {0}, {0}, NULL, NULL};
    if (!a.x)
        return NULL;
    int64_t ax = lw_attr_int(call, "axis", 0);
    if (ax < 0)
        ax += a.x->rank;
    a.axis = (int)ax;
    return sh_nest_out(c, call, take_body, &a);
}

/* pad: its attributes as lw_pad read them (lw_shape_check has refused the ones it refuses) */
static tth_tstmt *pad_body(lw_ctx *c, tth_texpr *const *idx, void *arg)
{
    sh_arg *a = arg;
    tth_pad_mode mode = a->pad->mode;
    tth_texpr *in[TTH_MAX_RANK] = {0};
    tth_texpr *valid = NULL;
    for (int d = 0; d < a->x->rank; d++) {
        int64_t D = a->x->shape[d], before = a->v1[d], after = a->v2[d];
        if (before == 0 && after == 0) {
            in[d] = idx[d];
            continue;
        }
        tth_texpr *i = lw_sub(c, idx[d], lw_i(c, before));
        tth_texpr *cl = lw_bin(c, TTH_TBIN_MIN, lw_bin(c, TTH_TBIN_MAX, i, lw_i(c, 0)), lw_i(c, D - 1));
        if (mode == TTH_PAD_EDGE) {
            in[d] = cl;
        } else if (mode == TTH_PAD_REFLECT) {
            /* i < 0: -i; i >= D: 2(D-1) - i; then clamped (a pad larger than D-1 repeats the edge) */
            tth_texpr *r = tth_tir_select(c->m, lw_bin(c, TTH_TBIN_LT, i, lw_i(c, 0)), tth_tir_un(c->m, TTH_TUN_NEG, i),
                                          tth_tir_select(c->m, lw_bin(c, TTH_TBIN_GE, i, lw_i(c, D)),
                                                         lw_sub(c, lw_i(c, 2 * (D - 1)), i), i));
            in[d] = lw_bin(c, TTH_TBIN_MIN, lw_bin(c, TTH_TBIN_MAX, r, lw_i(c, 0)), lw_i(c, D - 1));
        } else {
            in[d] = cl;
            tth_texpr *ok = lw_bin(c, TTH_TBIN_AND, lw_bin(c, TTH_TBIN_GE, i, lw_i(c, 0)), lw_bin(c, TTH_TBIN_LT, i, lw_i(c, D)));
            valid = valid ? lw_bin(c, TTH_TBIN_AND, valid, ok) : ok;
        }
    }
    tth_texpr *v = lw_load_at(c, a->x, in);
    if (valid)
        v = tth_tir_select(c->m, valid, v, lw_imm(c, a->x->dtype, a->pad->value));
    return lw_sink_store(c, a->s, 0, idx, v);
}

tth_tstmt *lw_pad(lw_ctx *c, const tth_rexpr *call, const lw_sink *s)
{
    tth_pad_attrs p;
    sh_arg a = {call, s, sh_in(c, call, 0), 0, 0, 0, {0}, {0}, {0}, NULL, &p};
    if (!a.x || tth_pad_attrs_of(call->u.call.attrs, a.x->rank, &p, NULL))
        return NULL;
    memcpy(a.v1, p.before, sizeof a.v1);
    memcpy(a.v2, p.after, sizeof a.v2);
    return sh_nest(c, lw_ty(call), pad_body, &a);
}

int lw_shape_check(const tth_rexpr *call, char *why, size_t len)
{
    tth_op op = call->u.call.op;
    const char *name = tth_op_name(op);
    const tth_ttype *xt = lw_ty(lw_arg(call, 0));
    int64_t v[TTH_MAX_RANK];
    switch (op) {
    case TTH_OP_TRANSPOSE:
        if (!transpose_axes(call, v)) {
            snprintf(why, len, "%s: attribute 'axes' is not a permutation of the input's dimensions", name);
            return 0;
        }
        return 1;
    case TTH_OP_PAD: {
        tth_pad_attrs p;
        tth_diag d;
        if (tth_pad_attrs_of(call->u.call.attrs, xt->rank, &p, &d)) {
            snprintf(why, len, "%s: %s", name, d.message);
            return 0;
        }
        for (int k = 0; k < xt->rank; k++)
            if ((p.before[k] > 0 || p.after[k] > 0) && xt->shape[k] == 0) {
                snprintf(why, len, "%s: padding an empty dimension", name);
                return 0;
            }
        return 1;
    }
    case TTH_OP_TAKE: {
        const tth_ttype *it = lw_ty(lw_arg(call, 1));
        if (!it || (it->dtype != TTH_I32 && it->dtype != TTH_I64)) {
            snprintf(why, len, "%s: indices must be int32 or int64", name);
            return 0;
        }
        int64_t ax = lw_attr_int(call, "axis", 0);
        if (ax < 0)
            ax += xt->rank;
        if (ax < 0 || ax >= xt->rank || xt->shape[ax] == 0) {
            snprintf(why, len, "%s: axis out of range or empty", name);
            return 0;
        }
        return 1;
    }
    case TTH_OP_STRIDED_SLICE: {
        int ns = lw_attr_ints(call, "strides", v, TTH_MAX_RANK);
        for (int d = 0; d < ns && d < TTH_MAX_RANK; d++)
            if (v[d] == 0) {
                snprintf(why, len, "%s: a zero stride", name);
                return 0;
            }
        return 1;
    }
    case TTH_OP_SPLIT:
        if (call->type.nfields < 0) {
            snprintf(why, len, "%s: the result is not a tuple", name);
            return 0;
        }
        return 1;
    default:
        return 1;
    }
}
