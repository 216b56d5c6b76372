/* fold_constants.c: replace every op call whose arguments are all constants by its value.
 * Requires: a well-typed module. A call is evaluated the way compiled code computes it: the call
 * alone is lowered by the default lowering for kind c and run by the TIR interpreter
 * (docs/operators.md, "Constant folding"), so a folded value and the same operator compiled agree
 * bit for bit. Calls whose inputs or result exceed TTH_FOLD_MAX_ELEMS elements, whose cost is
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
        char name[16];
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

/* reshape and transpose move elements without arithmetic: their lowering loads each element and
 * stores it elsewhere, so moving the bytes here gives the same bits, without the interpreter's
 * 40-80 ns per element (a classifier's transposed weight, 1.3 M elements, took 0.1 s). out is
 * the result (NULL: not one of these, or a malformed permutation, left to the lowering). */
static tth_tensor *move_elements(const tth_rexpr *e, const tth_tensor *x)
{
    tth_op op = e->u.call.op;
    if ((op != TTH_OP_RESHAPE && op != TTH_OP_TRANSPOSE) || e->type.nfields >= 0)
        return NULL;
    const tth_ttype *ot = &e->type.tensor, *xt = &x->type;
    int64_t axes[TTH_MAX_RANK];
    if (op == TTH_OP_TRANSPOSE) {
        int n = tth__attr_ints(e->u.call.attrs, "axes", axes, TTH_MAX_RANK);
        int seen[TTH_MAX_RANK] = {0};
        for (int d = 0; n <= 0 && d < xt->rank; d++)
            axes[d] = xt->rank - 1 - d;
        n = n <= 0 ? xt->rank : n;
        if (n != xt->rank || ot->rank != n)
            return NULL;
        for (int d = 0; d < n; d++) {
            axes[d] += axes[d] < 0 ? n : 0;
            if (axes[d] < 0 || axes[d] >= n || seen[axes[d]]++)
                return NULL;
        }
    }
    tth_tensor *out = tth_tensor_new(ot, NULL);
    if (!out || op == TTH_OP_RESHAPE) {
        if (out)
            memcpy(out->data, x->data, out->nbytes < x->nbytes ? out->nbytes : x->nbytes);
        return out;
    }
    /* out[i0..in-1] = x[j] with j[axes[d]] = i[d]: walk the output in order, stepping the input
     * by its stride along axes[d] for each output axis d */
    size_t es = tth_dtype_size(xt->dtype);
    int64_t xs[TTH_MAX_RANK], step[TTH_MAX_RANK], idx[TTH_MAX_RANK] = {0}, at = 0, k = 1;
    int r = ot->rank;
    for (int d = r - 1; d >= 0; d--) {
        xs[d] = k;
        k *= xt->shape[d];
    }
    for (int d = 0; d < r; d++)
        step[d] = xs[axes[d]];
    int64_t n = tth_ttype_numel(ot);
    const unsigned char *src = x->data;
    unsigned char *dst = out->data;
    for (int64_t i = 0; i < n; i++) {
        memcpy(dst + (size_t)i * es, src + (size_t)at * es, es);
        for (int d = r - 1; d >= 0; d--) {
            at += step[d];
            if (++idx[d] < ot->shape[d])
                break;
            at -= step[d] * ot->shape[d];
            idx[d] = 0;
        }
    }
    return out;
}

/* Evaluate call e on its constant arguments: outs[0..*nouts) are new tensors, one per result.
 * TTH_EUNSUPPORTED when the lowering does not take the call (it then stays unfolded). */
static int eval_lowered(const tth_rexpr *e, tth_tensor *const *args, tth_tensor **outs, size_t *nouts,
                        tth_diag *diag)
{
    *nouts = 0;
    if (e->u.call.nargs == 1 && (outs[0] = move_elements(e, args[0])) != NULL) {
        *nouts = 1;
        return 0;
    }
    tth_relay_module *rm = tth_relay_module_new("fold");
    tth_tir_module *tm = tth_tir_module_new();
    void *bufs[64 + TTH_FOLD_MAX_OUTS];
    int rc = TTH_ENOMEM;
    if (!rm || !tm)
        goto out;
    tth_relay_function *fn = alone(rm, e, args, diag);
    tth_prim_func *pf = fn ? tth_lower_primitive(tm, fn, "fold", NULL, diag) : NULL;
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
    if (in_elems > max_elems || type_elems(&e->type) > max_elems || fold_cost(e, args) > FOLD_MAX_COST)
        return e;
    tth_tensor *outs[TTH_FOLD_MAX_OUTS];
    size_t nouts = 0;
    tth_diag local;
    tth_diag_clear(&local);
    int rc = eval_lowered(e, args, outs, &nouts, &local);
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
