/* fold_constants.c: replace every op call whose arguments are all constants by its value.
 * Requires: a well-typed module. A call is evaluated the way compiled code computes it: the call
 * alone is lowered by the default lowering for the target being compiled for (tth_relay_fold_for;
 * kind c when none is set) and run by the TIR interpreter (docs/operators.md, "Constant folding"),
 * so a folded value and the same operator compiled agree bit for bit, fused multiply-adds
 * included. Calls whose inputs or result exceed TTH_FOLD_MAX_ELEMS elements, whose cost is
 * over FOLD_MAX_COST, or that the lowering does not take stay as they are. tuple_get of a
 * constant tuple is folded too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend_internal.h"
#include "lower.h"

static int64_t type_elems(const tth_rtype *t)
{
    if (t->nfields < 0)
        return tth_ttype_numel(&t->tensor);
    int64_t n = 0;
    for (int32_t i = 0; i < t->nfields; i++)
        n += tth_ttype_numel(&t->fields[i]);
    return n;
}

/* Rough number of inner-loop steps evaluating e takes: folding stays cheap. The TIR interpreter
 * takes about 40 to 60 ns per step on this project's machines, so the bound is 1 to 2 s. */
#define FOLD_MAX_COST ((double)(1 << 25))
static double fold_cost(const tth_rexpr *e, tth_tensor *const *args)
{
    double out = 0, in = 0;
    if (e->type.nfields < 0)
        out = (double)tth_ttype_numel(&e->type.tensor);
    for (int32_t i = 0; i < e->type.nfields; i++)
        out += (double)tth_ttype_numel(&e->type.fields[i]);
    for (size_t i = 0; i < e->u.call.nargs; i++)
        in += (double)tth_ttype_numel(&args[i]->type);
    const tth_ttype *w = e->u.call.nargs > 1 ? &args[1]->type : NULL;
    int64_t k[2] = {1, 1};
    switch (e->u.call.op) {
    case TTH_OP_CONV2D:
    case TTH_OP_QNN_CONV2D: /* each output: C/groups * kh * kw products */
        return out * (double)(w->shape[1] * w->shape[2] * w->shape[3]) + in;
    case TTH_OP_CONV2D_TRANSPOSE: /* each input: C_out/groups * kh * kw products */
        return (double)tth_ttype_numel(&args[0]->type) * (double)(w->shape[1] * w->shape[2] * w->shape[3]) + out;
    case TTH_OP_MATMUL:
    case TTH_OP_QNN_MATMUL:
        return out * (double)(args[0]->type.rank ? args[0]->type.shape[args[0]->type.rank - 1] : 1) + in;
    case TTH_OP_MAX_POOL2D:
    case TTH_OP_AVG_POOL2D:
        tth__attr_ints(e->u.call.attrs, "pool_size", k, 2);
        return out * (double)k[0] * (double)k[1] + in;
    default:
        return out + in;
    }
}

/* The call's arguments as params of a primitive function in a module of its own; the body is the
 * call (a tuple of its fields when it returns a tuple, the form the lowering takes). */
static tth_relay_function *alone(tth_relay_module *rm, const tth_rexpr *e, tth_tensor *const *args, tth_diag *diag)
{
    tth_rexpr *params[64];
    size_t n = e->u.call.nargs;
    for (size_t i = 0; i < n; i++) {
        char name[24];
        snprintf(name, sizeof name, "a%zu", i);
        if (!(params[i] = tth_relay_var(rm, name, &args[i]->type)))
            return NULL;
    }
    json_t *attrs = e->u.call.attrs ? json_deep_copy(e->u.call.attrs) : NULL;
    tth_rexpr *body = tth_relay_call(rm, e->u.call.op, params, n, attrs, diag);
    if (body && body->type.nfields >= 0) {
        tth_rexpr *fields[TTH_FOLD_MAX_OUTS];
        int32_t nf = body->type.nfields;
        if (nf > TTH_FOLD_MAX_OUTS)
            return NULL;
        for (int32_t f = 0; f < nf; f++)
            if (!(fields[f] = tth_relay_tuple_get(rm, body, f, diag)))
                return NULL;
        body = tth_relay_tuple(rm, fields, (size_t)nf, diag);
    }
    if (!body)
        return NULL;
    return tth_relay_function_add(rm, "fold", params, n, body, json_pack("{s:i}", "Primitive", 1), diag);
}

/* ---- calls folded natively ----
 * Operators that only move elements (reshape, transpose, strided_slice, broadcast_to,
 * concatenate, split) and exact widening casts (float16/bfloat16 -> float32, float32 -> float64)
 * are folded here, without the interpreter and without a size limit: their lowering loads each
 * element and stores it elsewhere (or converts it exactly), so moving the bytes gives the same
 * bits, at memcpy speed instead of the interpreter's 40-80 ns per element. This is what makes a
 * constant of any size (a 9216x4096 classifier weight behind Gemm's transB) a constant of the
 * artifact rather than code run on every call (docs/operators.md, "Constant folding"). */

/* Copy a strided view: for every index i of shape (rank r), dst[dbase + sum i[d]*dstep[d]] =
 * src[sbase + sum i[d]*sstep[d]], elements of es bytes. Strides in elements. */
static void strided_copy(unsigned char *dst, int64_t dbase, const int64_t *dstep, const unsigned char *src,
                         int64_t sbase, const int64_t *sstep, const int64_t *shape, int r, size_t es)
{
    int64_t n = 1, idx[TTH_MAX_RANK] = {0};
    for (int d = 0; d < r; d++)
        n *= shape[d];
    if (n == 0)
        return;
    /* the innermost dimension as one run when both sides are contiguous along it */
    int64_t inner = r ? shape[r - 1] : 1;
    int run = r && dstep[r - 1] == 1 && sstep[r - 1] == 1;
    int64_t at = sbase, to = dbase;
    for (int64_t i = 0; i < n;) {
        if (run) {
            memcpy(dst + (size_t)to * es, src + (size_t)at * es, (size_t)inner * es);
            i += inner;
            at += sstep[r - 1] * inner;
            to += dstep[r - 1] * inner;
            idx[r - 1] = inner;
        } else {
            memcpy(dst + (size_t)to * es, src + (size_t)at * es, es);
            i++;
            if (r) {
                at += sstep[r - 1];
                to += dstep[r - 1];
                idx[r - 1]++;
            }
        }
        for (int d = r - 1; d >= 0 && idx[d] == shape[d]; d--) {
            at -= sstep[d] * shape[d];
            to -= dstep[d] * shape[d];
            idx[d] = 0;
            if (d == 0)
                break;
            at += sstep[d - 1];
            to += dstep[d - 1];
            idx[d - 1]++;
        }
    }
}

/* row-major strides (in elements) of a shape */
static void strides_of(const tth_ttype *t, int64_t *st)
{
    int64_t k = 1;
    for (int d = t->rank - 1; d >= 0; d--) {
        st[d] = k;
        k *= t->shape[d];
    }
}

static tth_tensor *fold_transpose(const tth_rexpr *e, const tth_tensor *x)
{
    const tth_ttype *ot = &e->type.tensor, *xt = &x->type;
    int64_t axes[TTH_MAX_RANK], xs[TTH_MAX_RANK], step[TTH_MAX_RANK], os[TTH_MAX_RANK];
    int n = xt->rank;
    if (ot->rank != n || tth_transpose_axes_of(e->u.call.attrs, n, axes, NULL) != 0)
        return NULL;
    tth_tensor *out = tth_tensor_new(ot, NULL);
    if (!out)
        return NULL;
    strides_of(xt, xs);
    strides_of(ot, os);
    for (int d = 0; d < n; d++)
        step[d] = xs[axes[d]];
    strided_copy(out->data, 0, os, x->data, 0, step, ot->shape, n, tth_dtype_size(xt->dtype));
    return out;
}

static tth_tensor *fold_strided_slice(const tth_rexpr *e, const tth_tensor *x)
{
    const tth_ttype *ot = &e->type.tensor, *xt = &x->type;
    int64_t begin[TTH_MAX_RANK], strides[TTH_MAX_RANK], xs[TTH_MAX_RANK], os[TTH_MAX_RANK], step[TTH_MAX_RANK];
    int nb = tth__attr_ints(e->u.call.attrs, "begin", begin, TTH_MAX_RANK);
    int ns = tth__attr_ints(e->u.call.attrs, "strides", strides, TTH_MAX_RANK);
    if (ot->rank != xt->rank)
        return NULL;
    strides_of(xt, xs);
    strides_of(ot, os);
    int64_t base = 0;
    for (int d = 0; d < xt->rank; d++) {
        int64_t b = d < nb ? begin[d] : 0, s = d < ns ? strides[d] : 1;
        if (ot->shape[d] > 0 && (b < 0 || b >= xt->shape[d] || b + s * (ot->shape[d] - 1) < 0 ||
                                 b + s * (ot->shape[d] - 1) >= xt->shape[d]))
            return NULL; /* not the normalized form: left to the lowering */
        base += b * xs[d];
        step[d] = s * xs[d];
    }
    tth_tensor *out = tth_tensor_new(ot, NULL);
    if (out)
        strided_copy(out->data, 0, os, x->data, base, step, ot->shape, ot->rank, tth_dtype_size(xt->dtype));
    return out;
}

static tth_tensor *fold_broadcast_to(const tth_rexpr *e, const tth_tensor *x)
{
    const tth_ttype *ot = &e->type.tensor, *xt = &x->type;
    int64_t xs[TTH_MAX_RANK], os[TTH_MAX_RANK], step[TTH_MAX_RANK];
    if (xt->rank > ot->rank)
        return NULL;
    strides_of(xt, xs);
    strides_of(ot, os);
    for (int d = 0; d < ot->rank; d++) {
        int xd = d - (ot->rank - xt->rank);
        step[d] = xd < 0 || xt->shape[xd] == 1 ? 0 : xs[xd];
    }
    tth_tensor *out = tth_tensor_new(ot, NULL);
    if (out)
        strided_copy(out->data, 0, os, x->data, 0, step, ot->shape, ot->rank, tth_dtype_size(xt->dtype));
    return out;
}

static tth_tensor *fold_concatenate(const tth_rexpr *e, tth_tensor *const *args)
{
    const tth_ttype *ot = &e->type.tensor;
    int64_t axis = tth__attr_int(e->u.call.attrs, "axis", 0), os[TTH_MAX_RANK], xs[TTH_MAX_RANK];
    axis += axis < 0 ? ot->rank : 0;
    if (axis < 0 || axis >= ot->rank)
        return NULL;
    tth_tensor *out = tth_tensor_new(ot, NULL);
    if (!out)
        return NULL;
    strides_of(ot, os);
    int64_t at = 0;
    for (size_t i = 0; i < e->u.call.nargs; i++) {
        const tth_ttype *xt = &args[i]->type;
        strides_of(xt, xs);
        strided_copy(out->data, at * os[axis], os, args[i]->data, 0, xs, xt->shape, xt->rank,
                     tth_dtype_size(xt->dtype));
        at += xt->shape[axis];
    }
    return out;
}

/* split: one tensor per field of e's tuple type; 0, or -1 when not folded here */
static int fold_split(const tth_rexpr *e, const tth_tensor *x, tth_tensor **outs, size_t *nouts)
{
    const tth_ttype *xt = &x->type;
    int64_t axis = tth__attr_int(e->u.call.attrs, "axis", 0), xs[TTH_MAX_RANK], os[TTH_MAX_RANK];
    axis += axis < 0 ? xt->rank : 0;
    if (axis < 0 || axis >= xt->rank || e->type.nfields > TTH_FOLD_MAX_OUTS)
        return -1;
    strides_of(xt, xs);
    int64_t at = 0;
    for (int32_t f = 0; f < e->type.nfields; f++) {
        const tth_ttype *ft = &e->type.fields[f];
        if (!(outs[f] = tth_tensor_new(ft, NULL)))
            return -1;
        *nouts = (size_t)f + 1;
        strides_of(ft, os);
        strided_copy(outs[f]->data, 0, os, x->data, at * xs[axis], xs, ft->shape, ft->rank, tth_dtype_size(xt->dtype));
        at += ft->shape[axis];
    }
    return 0;
}

/* float16/bfloat16 -> float32 and float32 -> float64: every value is exact in the wider type */
static tth_tensor *fold_widen(const tth_rexpr *e, const tth_tensor *x)
{
    const tth_ttype *ot = &e->type.tensor;
    tth_dtype from = x->type.dtype, to = ot->dtype;
    if (!((to == TTH_F32 && (from == TTH_F16 || from == TTH_BF16)) || (to == TTH_F64 && from == TTH_F32)))
        return NULL;
    tth_tensor *out = tth_tensor_new(ot, NULL);
    if (!out)
        return NULL;
    int64_t n = tth_ttype_numel(ot);
    const uint16_t *h = x->data;
    for (int64_t i = 0; i < n; i++) {
        if (to == TTH_F64)
            ((double *)out->data)[i] = ((const float *)x->data)[i];
        else
            ((float *)out->data)[i] = from == TTH_F16 ? tth_f16_to_f32(h[i]) : tth_bf16_to_f32(h[i]);
    }
    return out;
}

/* Fold e natively when it is one of the operators above: 1 with outs filled, 0 when it is not
 * (the interpreter then tries), -1 out of memory. */
static int fold_native(const tth_rexpr *e, tth_tensor *const *args, tth_tensor **outs, size_t *nouts)
{
    tth_op op = e->u.call.op;
    tth_tensor *r = NULL;
    *nouts = 0;
    if (op == TTH_OP_SPLIT && e->type.nfields >= 0) {
        if (fold_split(e, args[0], outs, nouts) == 0)
            return 1;
        for (size_t k = 0; k < *nouts; k++)
            tth_tensor_unref(outs[k]);
        *nouts = 0;
        return 0;
    }
    if (e->type.nfields >= 0)
        return 0;
    switch (op) {
    case TTH_OP_RESHAPE:
        if (tth_ttype_numel(&e->type.tensor) != tth_ttype_numel(&args[0]->type))
            return 0;
        if ((r = tth_tensor_new(&e->type.tensor, NULL)) != NULL)
            memcpy(r->data, args[0]->data, r->nbytes);
        break;
    case TTH_OP_TRANSPOSE: r = fold_transpose(e, args[0]); break;
    case TTH_OP_STRIDED_SLICE: r = fold_strided_slice(e, args[0]); break;
    case TTH_OP_BROADCAST_TO: r = fold_broadcast_to(e, args[0]); break;
    case TTH_OP_CONCATENATE: r = fold_concatenate(e, args); break;
    case TTH_OP_CAST: r = fold_widen(e, args[0]); break;
    default: return 0;
    }
    if (!r)
        return 0;
    outs[0] = r;
    *nouts = 1;
    return 1;
}

/* The target folded values are computed for, on this thread (tth_relay_fold_for). */
static _Thread_local const json_t *fold_target;

void tth_relay_fold_for(const json_t *target)
{
    fold_target = target;
}

/* Evaluate call e on its constant arguments: outs[0..*nouts) are new tensors, one per result.
 * TTH_EUNSUPPORTED when the lowering does not take the call (it then stays unfolded). */
static int eval_lowered(const tth_rexpr *e, tth_tensor *const *args, tth_tensor **outs, size_t *nouts,
                        tth_diag *diag)
{
    *nouts = 0;
    tth_relay_module *rm = tth_relay_module_new("fold");
    tth_tir_module *tm = tth_tir_module_new();
    void *bufs[64 + TTH_FOLD_MAX_OUTS];
    int rc = TTH_ENOMEM;
    if (!rm || !tm)
        goto out;
    tth_relay_function *fn = alone(rm, e, args, diag);
    tth_prim_func *pf = fn ? tth_lower_primitive(tm, fn, "fold", fold_target, diag) : NULL;
    if (!pf) {
        rc = TTH_EUNSUPPORTED;
        goto out;
    }
    size_t nin = e->u.call.nargs, nout = pf->nparams - nin;
    if (pf->nparams < nin || nout > TTH_FOLD_MAX_OUTS) {
        rc = TTH_EUNSUPPORTED;
        goto out;
    }
    for (size_t i = 0; i < nin; i++)
        bufs[i] = args[i]->data;
    for (size_t k = 0; k < nout; k++) {
        const tth_tbuffer *b = pf->params[nin + k];
        tth_ttype ty = {.dtype = b->dtype, .rank = b->rank};
        for (int d = 0; d < b->rank; d++)
            ty.shape[d] = b->shape[d];
        if (!(outs[k] = tth_tensor_new(&ty, NULL)))
            goto out;
        *nouts = k + 1;
        bufs[nin + k] = outs[k]->data;
    }
    tth_diag_clear(diag);
    rc = tth_tir_eval(tm, "fold", bufs, pf->nparams, diag);
out:
    if (rc) {
        for (size_t k = 0; k < *nouts; k++)
            tth_tensor_unref(outs[k]);
        *nouts = 0;
    }
    tth_tir_module_free(tm);
    tth_relay_module_free(rm);
    return rc;
}

tth_rexpr *tth__fold_call(tth_relay_module *m, tth_rexpr *e, int64_t max_elems, tth_diag *diag)
{
    if (e->kind == TTH_REXPR_TUPLE_GET) {
        tth_rexpr *t = e->u.get.tuple;
        if (t->kind == TTH_REXPR_TUPLE && e->u.get.index >= 0 && (size_t)e->u.get.index < t->u.tuple.nfields &&
            t->u.tuple.fields[e->u.get.index]->kind == TTH_REXPR_CONST)
            return t->u.tuple.fields[e->u.get.index];
        return e;
    }
    if (e->kind != TTH_REXPR_CALL || e->u.call.fn || e->u.call.nargs > 64)
        return e;
    tth_tensor *args[64];
    int64_t in_elems = 0;
    for (size_t i = 0; i < e->u.call.nargs; i++) {
        tth_rexpr *a = e->u.call.args[i];
        if (a->kind != TTH_REXPR_CONST)
            return e;
        args[i] = a->u.constant.value;
        in_elems += tth_ttype_numel(&args[i]->type);
    }
    tth_tensor *outs[TTH_FOLD_MAX_OUTS] = {0};
    size_t nouts = 0;
    tth_diag local;
    tth_diag_clear(&local);
    int rc = fold_native(e, args, outs, &nouts);
    if (rc == 1)
        rc = 0;
    else if (in_elems > max_elems || type_elems(&e->type) > max_elems || fold_cost(e, args) > FOLD_MAX_COST)
        return e;
    else
        rc = eval_lowered(e, args, outs, &nouts, &local);
    if (rc == TTH_EUNSUPPORTED)
        return e;
    if (rc) {
        /* a real evaluation error (bad gather index, out of memory): report it at the node */
        tth_diag_set(diag, rc, e->span, "constant folding '%s': %s", tth_op_name(e->u.call.op),
                     local.message[0] ? local.message : tth_strerror(rc));
        return NULL;
    }
    if (e->type.nfields < 0)
        return tth_relay_const(m, outs[0], NULL);
    tth_rexpr *fields[TTH_FOLD_MAX_OUTS];
    for (size_t i = 0; i < nouts; i++)
        fields[i] = tth_relay_const(m, outs[i], NULL);
    for (size_t i = 0; i < nouts; i++)
        if (!fields[i]) {
            tth_diag_set(diag, TTH_ENOMEM, e->span, "out of memory while folding constants");
            return NULL;
        }
    return tth_relay_tuple(m, fields, nouts, diag);
}

/* Why the folder leaves op call e (arguments of these types) alone, or "" when it would fold it */
static void refusal(const tth_rexpr *e, tth_tensor *const *args, char *why, size_t len)
{
    int64_t in_elems = 0;
    for (size_t i = 0; i < e->u.call.nargs; i++)
        in_elems += tth_ttype_numel(&args[i]->type);
    int64_t out_elems = type_elems(&e->type);
    double cost = fold_cost(e, args);
    char lw[256] = "";
    why[0] = '\0';
    if (!tth_lower_op_supported(e, lw, sizeof lw))
        snprintf(why, len, "'%s' is not evaluated at compile time: %s", tth_op_name(e->u.call.op), lw);
    else if (in_elems > TTH_FOLD_MAX_ELEMS || out_elems > TTH_FOLD_MAX_ELEMS)
        snprintf(why, len, "'%s' reads %lld and writes %lld elements, more than the %lld the folder evaluates "
                 "(only reshapes, transposes, slices, joins, broadcasts and widening casts are folded at any size)",
                 tth_op_name(e->u.call.op), (long long)in_elems, (long long)out_elems, (long long)TTH_FOLD_MAX_ELEMS);
    else if (cost > FOLD_MAX_COST)
        snprintf(why, len, "'%s' would take about %.3g interpreter steps at compile time, over the folder's budget of "
                 "%.3g", tth_op_name(e->u.call.op), cost, FOLD_MAX_COST);
}

int tth_relay_constant_call_why(tth_relay_module *m, const tth_rexpr *call, char *why, size_t len)
{
    if (len)
        why[0] = '\0';
    if (call->kind != TTH_REXPR_CALL)
        return 0;
    for (size_t i = 0; i < call->u.call.nargs; i++)
        if (call->u.call.args[i]->kind != TTH_REXPR_CONST)
            return 0;
    const tth_relay_function *fn = call->u.call.fn;
    if (!fn) {
        tth_tensor *args[64];
        if (call->u.call.nargs > 64)
            return 1;
        for (size_t i = 0; i < call->u.call.nargs; i++)
            args[i] = call->u.call.args[i]->u.constant.value;
        refusal(call, args, why, len);
        return 1;
    }
    /* a primitive function: the first op call inside whose arguments are constants or params */
    tth_rexpr **nodes = NULL;
    int64_t n = tth_relay_topo(m, fn, &nodes); /* arena memory */
    for (int64_t k = 0; k < n; k++) {
        const tth_rexpr *e = nodes[k];
        if (e->kind != TTH_REXPR_CALL || e->u.call.fn || e->u.call.nargs > 64)
            continue;
        tth_tensor *args[64];
        size_t i = 0;
        for (; i < e->u.call.nargs; i++) {
            const tth_rexpr *a = e->u.call.args[i];
            if (a->kind == TTH_REXPR_CONST)
                args[i] = a->u.constant.value;
            else if (a->kind == TTH_REXPR_VAR) {
                size_t p = 0;
                while (p < fn->nparams && fn->params[p] != a)
                    p++;
                if (p == fn->nparams || p >= call->u.call.nargs)
                    break;
                args[i] = call->u.call.args[p]->u.constant.value;
            } else
                break;
        }
        if (i < e->u.call.nargs)
            continue;
        refusal(e, args, why, len);
        break;
    }
    if (len && !why[0])
        snprintf(why, len, "the folder ran before this function was made");
    return 1;
}

static tth_rexpr *fold_visit(void *ctx, tth_relay_module *m, tth_rexpr *orig, tth_rexpr *const *args, size_t nargs,
                             tth_diag *diag)
{
    (void)ctx;
    tth_rexpr *const *oargs;
    size_t na = tth__node_args(orig, &oargs);
    int changed = 0;
    for (size_t i = 0; i < na; i++)
        changed |= oargs[i] != args[i];
    tth_rexpr *e = changed ? tth__rebuild(m, orig, args, nargs, diag) : orig;
    if (!e)
        return NULL;
    return tth__fold_call(m, e, TTH_FOLD_MAX_ELEMS, diag);
}

int tth_relay_fold_constants(tth_relay_module *m, tth_diag *diag)
{
    if (!m)
        return tth_diag_set(diag, TTH_EINVAL, NULL, "no module");
    for (size_t i = 0; i < m->nfuncs; i++) {
        tth__rewriter rw = {.visit = fold_visit};
        int rc = tth__rewrite_function(m, m->funcs[i], &rw, diag);
        if (rc)
            return rc;
    }
    return 0;
}
