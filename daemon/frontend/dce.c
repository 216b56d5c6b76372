/* dce.c: dead-code elimination. Requires: a well-typed module.
 * Rebuilds every function from its result, so nodes nothing uses are dropped; removes no-op
 * calls (reshape/transpose/cast/broadcast_to/strided_slice/pad/concatenate that return their
 * input unchanged) and tuple_get of a literal tuple; then drops functions main no longer
 * reaches. */
#include <string.h>

#include "frontend_internal.h"

/* Does this op call return its (first) argument unchanged? */
static int is_noop(const tth_rexpr *e, tth_rexpr *const *args, size_t nargs)
{
    if (e->kind != TTH_REXPR_CALL || e->u.call.fn || nargs < 1)
        return 0;
    const tth_rexpr *x = args[0];
    if (x->type.nfields >= 0 || e->type.nfields >= 0 || !tth_ttype_equal(&x->type.tensor, &e->type.tensor))
        return 0;
    int64_t v[TTH_MAX_RANK];
    int n, r = x->type.tensor.rank;
    switch (e->u.call.op) {
    case TTH_OP_RESHAPE:
    case TTH_OP_CAST:
    case TTH_OP_BROADCAST_TO:
        return 1;
    case TTH_OP_CONCATENATE:
        return nargs == 1;
    case TTH_OP_TRANSPOSE:
        n = tth__attr_ints(e->u.call.attrs, "axes", v, TTH_MAX_RANK);
        if (n != r)
            return 0;
        for (int i = 0; i < n; i++)
            if (v[i] != i)
                return 0;
        return 1;
    case TTH_OP_STRIDED_SLICE:
        /* same type: only a full slice with positive unit strides keeps every element in place */
        n = tth__attr_ints(e->u.call.attrs, "strides", v, TTH_MAX_RANK);
        for (int i = 0; i < n; i++)
            if (v[i] != 1)
                return 0;
        return 1;
    case TTH_OP_PAD:
        return 1; /* same type means every pad amount is 0 */
    default:
        return 0;
    }
}

static tth_rexpr *dce_visit(void *ctx, tth_relay_module *m, tth_rexpr *orig, tth_rexpr *const *args, size_t nargs,
                            tth_diag *diag)
{
    (void)ctx;
    (void)m;
    (void)diag;
    if (orig->kind == TTH_REXPR_TUPLE_GET) {
        const tth_rexpr *t = args[0];
        if (t->kind == TTH_REXPR_TUPLE && orig->u.get.index >= 0 && (size_t)orig->u.get.index < t->u.tuple.nfields)
            return t->u.tuple.fields[orig->u.get.index];
        return TTH_REWRITE_KEEP;
    }
    if (is_noop(orig, args, nargs))
        return args[0];
    return TTH_REWRITE_KEEP;
}

int tth_relay_eliminate_dead_code(tth_relay_module *m, tth_diag *diag)
{
    int rc = tth__rewrite_module(m, dce_visit, diag);
    if (rc)
        return rc;
    if (tth_relay_module_main(m))
        tth_relay_module_prune(m);
    return 0;
}
