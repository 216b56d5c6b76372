/* rewrite.c: rebuild a function's body bottom-up (the one walk every pass uses). */
#include <stdlib.h>
#include <string.h>

#include "frontend_internal.h"

size_t tth__node_args(const tth_rexpr *e, tth_rexpr *const **args)
{
    static tth_rexpr *const none[1] = {NULL};
    switch (e->kind) {
    case TTH_REXPR_CALL: *args = e->u.call.args; return e->u.call.nargs;
    case TTH_REXPR_TUPLE: *args = e->u.tuple.fields; return e->u.tuple.nfields;
    case TTH_REXPR_TUPLE_GET: *args = (tth_rexpr *const *)&e->u.get.tuple; return 1;
    default: *args = none; return 0;
    }
}

tth_rexpr *tth__rebuild(tth_relay_module *m, const tth_rexpr *orig, tth_rexpr *const *args, size_t nargs,
                        tth_diag *diag)
{
    switch (orig->kind) {
    case TTH_REXPR_CALL:
        if (orig->u.call.fn)
            return tth_relay_call_fn(m, orig->u.call.fn, args, nargs, diag);
        return tth_relay_call(m, orig->u.call.op, args, nargs, json_incref(orig->u.call.attrs), diag);
    case TTH_REXPR_TUPLE: return tth_relay_tuple(m, args, nargs, diag);
    case TTH_REXPR_TUPLE_GET: return tth_relay_tuple_get(m, args[0], orig->u.get.index, diag);
    default: return (tth_rexpr *)orig;
    }
}

uint32_t *tth__count_users(tth_relay_module *m, const tth_relay_function *fn, uint32_t *max_id)
{
    tth_rexpr **nodes = NULL;
    int64_t n = tth_relay_topo(m, fn, &nodes);
    if (n < 0)
        return NULL;
    uint32_t mx = 0;
    for (int64_t i = 0; i < n; i++)
        if (nodes[i]->id > mx)
            mx = nodes[i]->id;
    uint32_t *users = calloc((size_t)mx + 1, sizeof(uint32_t));
    if (!users)
        return NULL;
    for (int64_t i = 0; i < n; i++) {
        tth_rexpr *const *args;
        size_t na = tth__node_args(nodes[i], &args);
        for (size_t k = 0; k < na; k++)
            users[args[k]->id]++;
    }
    users[fn->body->id]++; /* the result is used by the function's caller */
    *max_id = mx;
    return users;
}

int tth__rewrite_function(tth_relay_module *m, tth_relay_function *fn, tth__rewriter *rw, tth_diag *diag)
{
    tth_rexpr **nodes = NULL;
    int64_t n = tth_relay_topo(m, fn, &nodes);
    if (n < 0)
        return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory walking function '%s'", fn->name);
    uint32_t mx = 0;
    rw->nusers = tth__count_users(m, fn, &mx);
    rw->max_id = mx;
    tth_rexpr **map = calloc((size_t)mx + 1, sizeof(tth_rexpr *));
    tth_rexpr **tmp = NULL;
    size_t tmpcap = 0;
    int rc = 0;
    if (!rw->nusers || !map) {
        rc = tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory walking function '%s'", fn->name);
        goto done;
    }
    rw->map = map;
    for (size_t p = 0; p < fn->nparams; p++)
        if (fn->params[p]->id <= mx)
            map[fn->params[p]->id] = (rw->param_map && rw->param_map[p]) ? rw->param_map[p] : fn->params[p];
    for (int64_t i = 0; i < n; i++) {
        tth_rexpr *e = nodes[i];
        if (map[e->id])
            continue;
        if (e->kind == TTH_REXPR_VAR || e->kind == TTH_REXPR_CONST) {
            map[e->id] = e;
            continue;
        }
        tth_rexpr *const *args;
        size_t na = tth__node_args(e, &args);
        if (na > tmpcap) {
            tth_rexpr **t2 = realloc(tmp, na * sizeof(*tmp));
            if (!t2) {
                rc = tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
                goto done;
            }
            tmp = t2;
            tmpcap = na;
        }
        int changed = 0;
        for (size_t k = 0; k < na; k++) {
            tmp[k] = map[args[k]->id];
            changed |= tmp[k] != args[k];
        }
        tth_rexpr *r = rw->visit ? rw->visit(rw->ctx, m, e, tmp, na, diag) : TTH_REWRITE_KEEP;
        if (r == TTH_REWRITE_KEEP)
            r = changed ? tth__rebuild(m, e, tmp, na, diag) : e;
        if (!r) {
            rc = diag && diag->code ? diag->code : TTH_EINTERNAL;
            if (!diag || !diag->code)
                tth_diag_set(diag, rc, e->span, "rewriting function '%s' failed", fn->name);
            goto done;
        }
        map[e->id] = r;
    }
    fn->body = map[fn->body->id];
done:
    free(map);
    free(tmp);
    free(rw->nusers);
    rw->nusers = NULL;
    rw->map = NULL;
    return rc;
}

int tth_relay_bind_params(tth_relay_module *m, tth_tensor *const *values, size_t n, tth_diag *diag)
{
    tth_relay_function *fn = m ? tth_relay_module_main(m) : NULL;
    if (!fn)
        return tth_diag_set(diag, TTH_EINVAL, NULL, "the module has no main function");
    if (n != fn->nparams)
        return tth_diag_set(diag, TTH_EINVAL, "function 'main'", "%zu values for %zu params", n, fn->nparams);
    tth_rexpr **map = calloc(n + 1, sizeof(*map));
    if (!map)
        return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        const char *pname = fn->params[i]->u.var.name ? fn->params[i]->u.var.name : "?";
        if (!values[i] || !tth_ttype_equal(&values[i]->type, &fn->params[i]->type.tensor)) {
            char want[128] = "", got[128] = "";
            tth_ttype_format(&fn->params[i]->type.tensor, want, sizeof want);
            if (values[i])
                tth_ttype_format(&values[i]->type, got, sizeof got);
            rc = tth_diag_set(diag, TTH_ETYPE, "function 'main'", "param '%s' is %s, the value is %s", pname, want,
                              values[i] ? got : "missing");
            goto done;
        }
        map[i] = tth_relay_const(m, tth_tensor_ref(values[i]), pname);
        if (!map[i]) {
            rc = tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
            goto done;
        }
    }
    tth__rewriter rw = {.param_map = map};
    rc = tth__rewrite_function(m, fn, &rw, diag);
    if (!rc)
        fn->nparams = 0;
done:
    free(map);
    return rc;
}

int tth__rewrite_module(tth_relay_module *m, tth__rewrite_visit visit, tth_diag *diag)
{
    if (!m)
        return tth_diag_set(diag, TTH_EINVAL, NULL, "no module");
    for (size_t i = 0; i < m->nfuncs; i++) {
        tth__rewriter rw = {.visit = visit};
        rw.ctx = &rw;
        int rc = tth__rewrite_function(m, m->funcs[i], &rw, diag);
        if (rc)
            return rc;
    }
    return 0;
}
