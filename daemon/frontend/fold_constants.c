/* fold_constants.c: replace every op call whose arguments are all constants by its value.
 * Requires: a well-typed module. Evaluates with the reference evaluator (eval.c); calls whose
 * inputs or result exceed TTH_FOLD_MAX_ELEMS elements, or that the evaluator does not know,
 * stay as they are. tuple_get of a constant tuple is folded too. */
#include <stdlib.h>

#include "frontend_internal.h"

static int64_t type_elems(const tth_rtype *t)
{
    if (t->nfields < 0)
        return tth_ttype_numel(&t->tensor);
    int64_t n = 0;
    for (int32_t i = 0; i < t->nfields; i++)
        n += tth_ttype_numel(&t->fields[i]);
    return n;
}

/* Rough number of inner-loop steps evaluating e takes (saturating): folding stays cheap. */
#define FOLD_MAX_COST ((double)(1 << 30))
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
        return out * 4 + in;
    }
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
    tth_tensor *outs[TTH_EVAL_MAX_OUTS];
    size_t nouts = 0;
    tth_diag local;
    tth_diag_clear(&local);
    int rc = tth__eval_op(e->u.call.op, args, e->u.call.nargs, e->u.call.attrs, &e->type, outs, &nouts, &local);
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
    tth_rexpr *fields[TTH_EVAL_MAX_OUTS];
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
