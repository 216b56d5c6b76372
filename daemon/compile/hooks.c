/* hooks.c: the target hooks on the partitioned module, in the order of docs/plugin-guide.md
 * ("Composite targets"). Requires partitioning (partition.c): relay_to_runtime
 * (+ constant_updater), then relay_to_tir, then the default lowering of the other regions; after
 * memory planning, tir_to_runtime per kind.
 *
 * A PrimFunc whose attrs hold {"extern": true} is a declaration: its body is empty and another
 * runtime module defines it (a relay_to_runtime region, or a region built by its own kind's
 * tir_to_runtime); code generators emit only its prototype. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lower.h"
#include "partition.h"

/* "plugin 'p' hook h, region 'gs'" in front of a failing hook's message. */
static int hook_failed(const tth_part_region *r, const char *hook, int rc, tth_diag *diag)
{
    if (diag && diag->code == TTH_OK)
        tth_diag_set(diag, rc, NULL, "failed without a diagnostic");
    tth_diag_prefix(diag, "plugin '%s' hook %s, region '%s'", r->kind->plugin->desc->plugin_name, hook,
                    r->global_symbol);
    return rc;
}

/* The buffers a region's PrimFunc takes: one per Relay param, then one per result tensor. */
static int region_params(tth_tir_module *tmod, const tth_relay_function *fn, tth_tbuffer ***out,
                         size_t *nout, tth_diag *diag)
{
    size_t nres = fn->body->type.nfields >= 0 ? (size_t)fn->body->type.nfields : 1;
    tth_tbuffer **b = calloc(fn->nparams + nres + 1, sizeof *b);
    if (!b)
        return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < fn->nparams + nres; i++) {
        const tth_ttype *t = i < fn->nparams ? &fn->params[i]->type.tensor
                             : fn->body->type.nfields >= 0 ? &fn->body->type.fields[i - fn->nparams]
                                                           : &fn->body->type.tensor;
        char nm[32];
        snprintf(nm, sizeof nm, i < fn->nparams ? "p%zu" : "out%zu",
                 i < fn->nparams ? i : i - fn->nparams);
        b[i] = tth_tir_buffer(tmod, nm, t->dtype, t->rank, t->shape, TTH_SCOPE_PARAM);
        if (!b[i]) {
            free(b);
            return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
        }
    }
    *out = b;
    *nout = fn->nparams + nres;
    return 0;
}

/* An extern declaration of `name` in `tmod` (see the top of this file). Its first `ninputs`
 * parameters are the region's inputs, which the definition only reads (attrs "inputs"). */
static tth_prim_func *declare_extern(tth_tir_module *tmod, const char *name, tth_tbuffer *const *params,
                                     size_t nparams, size_t ninputs, const char *kind, const char *defined_by,
                                     tth_diag *diag)
{
    /* fresh parameters p0, p1, ... of the same types: the declaration owns its own names */
    tth_tbuffer **own = calloc(nparams + 1, sizeof *own);
    tth_tstmt *body = tth_tir_seq(tmod, NULL, 0);
    for (size_t i = 0; own && i < nparams; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "p%zu", i);
        if (!(own[i] = tth_tir_buffer(tmod, nm, params[i]->dtype, params[i]->rank, params[i]->shape,
                                      TTH_SCOPE_PARAM)))
            body = NULL;
    }
    if (!own || !body) {
        free(own);
        tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    tth_prim_func *f = tth_tir_func_add(tmod, name, own, nparams, body, kind,
                                        json_pack("{s:b, s:s, s:s, s:I}", "extern", 1, "defined_by",
                                                  defined_by, "origin", "extern", "inputs",
                                                  (json_int_t)ninputs), diag);
    free(own);
    return f;
}

static int mods_push(tth_runtime_module ***mods, size_t *nmods, tth_runtime_module *rt, tth_diag *diag)
{
    tth_runtime_module **nm = realloc(*mods, (*nmods + 1) * sizeof *nm);
    if (!nm) {
        tth_runtime_module_free(rt);
        return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
    }
    nm[(*nmods)++] = rt;
    *mods = nm;
    return 0;
}

int tth_hooks_relay_to_runtime(tth_partition *p, const tth_host *host, tth_runtime_module ***mods,
                               size_t *nmods, tth_const_map *consts, tth_diag *diag)
{
    for (size_t i = 0; i < p->nregions; i++) {
        const tth_part_region *r = &p->regions[i];
        const tth_plugin *pl = r->kind->plugin;
        int rc = 0;
        if (pl->relay_to_runtime) {
            tth_runtime_module *rt = tth_runtime_module_new(r->kind->kind);
            if (!rt)
                return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
            rc = pl->relay_to_runtime(host, r->kind->target, r->fn, r->global_symbol, rt, diag);
            if (rc) {
                tth_runtime_module_free(rt);
                return hook_failed(r, "relay_to_runtime", rc, diag);
            }
            if ((rc = mods_push(mods, nmods, rt, diag)))
                return rc;
        }
        /* constant_updater runs on every region of a kind exporting it (as TVM's runs on every
         * function with a Compiler attribute) */
        if (!pl->constant_updater)
            continue;
        tth_const_map *cm = tth_const_map_new();
        if (!cm)
            return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
        rc = pl->constant_updater(host, r->kind->target, r->fn, r->global_symbol, cm, diag);
        if (rc) {
            tth_const_map_free(cm);
            return hook_failed(r, "constant_updater", rc, diag);
        }
        for (size_t k = 0; k < tth_const_map_count(cm) && !rc; k++) {
            char name[512];
            snprintf(name, sizeof name, "%s.%s", r->kind->kind, tth_const_map_name(cm, k));
            rc = tth_const_map_add(consts, name, tth_const_map_tensor(cm, k), diag);
        }
        tth_const_map_free(cm);
        if (rc)
            return hook_failed(r, "constant_updater", rc, diag);
    }
    return 0;
}

int tth_hooks_relay_to_tir(tth_partition *p, const tth_host *host, tth_tir_module *tmod,
                           tth_lowered *lowered, size_t *nlowered, tth_diag *diag)
{
    for (size_t i = 0; i < p->nregions; i++) {
        const tth_part_region *r = &p->regions[i];
        const tth_plugin *pl = r->kind->plugin;
        if (pl->relay_to_runtime || !pl->relay_to_tir)
            continue;
        size_t n0 = tmod->nfuncs;
        int rc = pl->relay_to_tir(host, r->kind->target, r->fn, r->global_symbol, tmod, diag);
        if (rc)
            return hook_failed(r, "relay_to_tir", rc, diag);
        tth_prim_func *rf = tth_tir_module_find(tmod, r->global_symbol);
        if (!rf) {
            tth_diag_set(diag, TTH_EINVAL, NULL, "added no PrimFunc named '%s'", r->global_symbol);
            return hook_failed(r, "relay_to_tir", TTH_EINVAL, diag);
        }
        for (size_t k = n0; k < tmod->nfuncs; k++) {
            tth_prim_func *f = tmod->funcs[k];
            f->target_kind = r->kind->kind;
            if (f->attrs && !json_object_get(f->attrs, "origin"))
                json_object_set_new(f->attrs, "origin", json_string("relay_to_tir"));
        }
        /* the region function's first parameters are its inputs, which it only reads: said in
         * its attrs as on extern declarations, for every kind's tir_to_runtime */
        if (!rf->attrs)
            rf->attrs = json_object();
        if (!rf->attrs || json_object_set_new(rf->attrs, "inputs", json_integer((json_int_t)r->fn->nparams)))
            return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
        lowered[*nlowered].fn = r->fn;
        lowered[*nlowered].prim_name = rf->name;
        (*nlowered)++;
    }
    return 0;
}

/* One op call of a region as a primitive function of its own: non-constant operands become
 * params (in `ext`, the region-side values), constants stay inside. */
static tth_relay_function *single_op(tth_relay_module *m, const tth_rexpr *e, const char *name,
                                     tth_rexpr **ext, size_t *next, tth_diag *diag)
{
    tth_rexpr *args[256], *params[256];
    size_t np = 0;
    if (e->u.call.nargs > 256) {
        tth_diag_set(diag, TTH_EUNSUPPORTED, e->span, "call with more than 256 operands");
        return NULL;
    }
    for (size_t a = 0; a < e->u.call.nargs; a++) {
        args[a] = tth_part_operand(m, e->u.call.args[a], ext, params, &np);
        if (!args[a]) {
            tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
            return NULL;
        }
    }
    tth_relay_set_span(m, e->span);
    tth_rexpr *body = tth_relay_call(m, e->u.call.op, args, e->u.call.nargs, json_incref(e->u.call.attrs),
                                     diag);
    tth_relay_set_span(m, NULL);
    if (!body)
        return NULL;
    *next = np;
    return tth_relay_function_add(m, tth_arena_strdup(m->arena, name), params, np, body,
                                  json_pack("{s:i}", "Primitive", 1), diag);
}

int tth_hooks_lower_region(tth_relay_module *m, const tth_part_region *r, tth_tir_module *tmod,
                           tth_diag *diag)
{
    const tth_relay_function *fn = r->fn;
    tth_rexpr **nodes = NULL;
    int64_t n = tth_relay_topo(m, fn, &nodes);
    if (n < 0)
        return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
    tth_tbuffer **params = NULL, **bufs = calloc((size_t)n + 1, sizeof *bufs);
    tth_tstmt **calls = calloc((size_t)n + 1, sizeof *calls);
    tth_tbuffer **locals = calloc((size_t)n + 1, sizeof *locals);
    size_t np = 0, ncalls = 0, nlocals = 0;
    int rc = 0;
    if (!bufs || !calls || !locals) {
        rc = tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
        goto done;
    }
    if ((rc = region_params(tmod, fn, &params, &np, diag)))
        goto done;
    /* which buffer holds each node: params, results, else a LOCAL of the region */
    for (int64_t i = 0; i < n; i++)
        for (size_t k = 0; k < fn->nparams; k++)
            if (nodes[i] == fn->params[k])
                bufs[i] = params[k];
    for (int64_t i = 0; i < n; i++) {
        if (fn->body->kind == TTH_REXPR_TUPLE) {
            for (size_t k = 0; k < fn->body->u.tuple.nfields; k++)
                if (fn->body->u.tuple.fields[k] == nodes[i])
                    bufs[i] = params[fn->nparams + k];
        } else if (fn->body == nodes[i]) {
            bufs[i] = params[fn->nparams];
        }
    }
    for (int64_t i = 0; i < n && !rc; i++) {
        const tth_rexpr *e = nodes[i];
        if (e->kind != TTH_REXPR_CALL || e->u.call.fn)
            continue;
        if (!bufs[i]) {
            char nm[32];
            snprintf(nm, sizeof nm, "t%zu", nlocals);
            bufs[i] = tth_tir_buffer(tmod, nm, e->type.tensor.dtype, e->type.tensor.rank,
                                     e->type.tensor.shape, TTH_SCOPE_LOCAL);
            if (!bufs[i]) {
                rc = tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
                break;
            }
            locals[nlocals++] = bufs[i];
        }
        char name[300];
        snprintf(name, sizeof name, "%s_%zu", r->global_symbol, ncalls);
        tth_rexpr *ext[256];
        size_t next = 0;
        tth_relay_function *opfn = single_op(m, e, name, ext, &next, diag);
        if (!opfn) {
            rc = diag && diag->code ? diag->code : TTH_EINTERNAL;
            break;
        }
        tth_prim_func *pf = tth_lower_primitive(tmod, opfn, name, r->kind->target, diag);
        if (!pf) {
            rc = diag && diag->code ? diag->code : TTH_EINTERNAL;
            if (diag && !diag->location[0] && e->span)
                snprintf(diag->location, sizeof diag->location, "node '%s'", e->span);
            break;
        }
        tth_tbuffer *args[257];
        for (size_t k = 0; k < next; k++) {
            int64_t j = 0;
            while (j < n && nodes[j] != ext[k])
                j++;
            args[k] = j < n ? bufs[j] : NULL;
            if (!args[k]) {
                rc = tth_diag_set(diag, TTH_EINTERNAL, NULL, "region '%s': operand %zu of '%s' has "
                                  "no buffer", r->global_symbol, k, name);
                break;
            }
        }
        args[next] = bufs[i];
        if (!rc && !(calls[ncalls++] = tth_tir_call_func(tmod, pf->name, args, next + 1)))
            rc = tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
    }
    if (rc)
        goto done;
    tth_tstmt *body = tth_tir_seq(tmod, calls, ncalls);
    for (size_t k = nlocals; body && k > 0; k--)
        body = tth_tir_allocate(tmod, locals[k - 1], body);
    if (!body) {
        rc = tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
        goto done;
    }
    if (!tth_tir_func_add(tmod, r->global_symbol, params, np, body, r->kind->kind,
                          json_pack("{s:s, s:s, s:s}", "op", "region", "origin", "default",
                                    "Compiler", r->kind->kind), diag))
        rc = diag && diag->code ? diag->code : TTH_EINTERNAL;
done:
    free(params);
    free(bufs);
    free(calls);
    free(locals);
    return rc;
}

/* Declare every relay_to_runtime region's symbol in tmod (the host kind's TIR calls it). */
int tth_hooks_declare_external(tth_partition *p, tth_tir_module *tmod, const char *host_kind,
                               tth_lowered *lowered, size_t *nlowered, tth_diag *diag)
{
    for (size_t i = 0; i < p->nregions; i++) {
        const tth_part_region *r = &p->regions[i];
        if (!r->kind->plugin->relay_to_runtime)
            continue;
        tth_tbuffer **params = NULL;
        size_t np = 0;
        int rc = region_params(tmod, r->fn, &params, &np, diag);
        if (rc)
            return rc;
        tth_prim_func *f = declare_extern(tmod, r->global_symbol, params, np, r->fn->nparams, host_kind, r->kind->kind,
                                          diag);
        free(params);
        if (!f)
            return diag && diag->code ? diag->code : TTH_EINTERNAL;
        lowered[*nlowered].fn = r->fn;
        lowered[*nlowered].prim_name = f->name;
        (*nlowered)++;
    }
    return 0;
}

static int kind_has_tir_to_runtime(const tth_partition *p, const char *kind, const tth_plugin **pl)
{
    for (size_t k = 0; k < p->nkinds; k++)
        if (strcmp(p->kinds[k].kind, kind) == 0) {
            *pl = p->kinds[k].plugin;
            return p->kinds[k].plugin->tir_to_runtime != NULL;
        }
    *pl = NULL;
    return 0;
}

int tth_hooks_tir_to_runtime(tth_partition *p, const tth_host *host, tth_tir_module *tmod,
                             tth_runtime_module ***mods, size_t *nmods, tth_diag *diag)
{
    const tth_part_kind *H = &p->kinds[p->nkinds - 1];
    /* PrimFuncs of kinds without tir_to_runtime are built by the host (the flat
     * call_extern case): they take the host's kind, keeping theirs in attrs "Compiler". */
    for (size_t i = 0; i < tmod->nfuncs; i++) {
        tth_prim_func *f = tmod->funcs[i];
        const tth_plugin *pl;
        if (!f->target_kind || strcmp(f->target_kind, H->kind) == 0)
            continue;
        if (!kind_has_tir_to_runtime(p, f->target_kind, &pl)) {
            if (f->attrs && !json_object_get(f->attrs, "Compiler"))
                json_object_set_new(f->attrs, "Compiler", json_string(f->target_kind));
            f->target_kind = H->kind;
        }
    }
    /* the host first: the other kinds' functions it calls are declared extern in its view */
    tth_tir_module *hv = tth_tir_module_subset(tmod, H->kind);
    tth_runtime_module *rt = tth_runtime_module_new(H->kind);
    int rc = 0;
    if (!hv || !rt) {
        rc = tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
        goto host_done;
    }
    for (size_t i = 0; i < p->nregions && !rc; i++) {
        const tth_part_region *r = &p->regions[i];
        tth_prim_func *f = tth_tir_module_find(tmod, r->global_symbol);
        if (!f || !f->target_kind || strcmp(f->target_kind, H->kind) == 0)
            continue;
        if (!declare_extern(hv, f->name, f->params, f->nparams, r->fn->nparams, H->kind, f->target_kind, diag))
            rc = diag && diag->code ? diag->code : TTH_EINTERNAL;
    }
    if (!rc && (rc = H->plugin->tir_to_runtime(host, H->target, hv, rt, diag))) {
        if (diag && diag->code == TTH_OK)
            tth_diag_set(diag, rc, NULL, "failed without a diagnostic");
        tth_diag_prefix(diag, "plugin '%s' hook tir_to_runtime", H->plugin->desc->plugin_name);
    }
host_done:
    tth_tir_module_free(hv);
    if (rc) {
        tth_runtime_module_free(rt);
        return rc;
    }
    if ((rc = mods_push(mods, nmods, rt, diag)))
        return rc;
    /* the host's module goes first (relay_to_runtime's modules are already there) */
    memmove(*mods + 1, *mods, (*nmods - 1) * sizeof **mods);
    (*mods)[0] = rt;
    /* then every other kind with PrimFuncs, in the listed order */
    for (size_t k = 0; k + 1 < p->nkinds; k++) {
        const tth_part_kind *K = &p->kinds[k];
        int seen = 0;
        for (size_t j = 0; j < k; j++)
            seen |= strcmp(p->kinds[j].kind, K->kind) == 0;
        if (seen || !K->plugin->tir_to_runtime || strcmp(K->kind, H->kind) == 0)
            continue;
        tth_tir_module *v = tth_tir_module_subset(tmod, K->kind);
        if (!v)
            return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
        if (v->nfuncs == 0) {
            tth_tir_module_free(v);
            continue;
        }
        const char *first = NULL;
        for (size_t i = 0; i < p->nregions && !first; i++)
            if (p->regions[i].kind == K && tth_tir_module_find(v, p->regions[i].global_symbol))
                first = p->regions[i].global_symbol;
        rt = tth_runtime_module_new(K->kind);
        rc = rt ? K->plugin->tir_to_runtime(host, K->target, v, rt, diag)
                : tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
        tth_tir_module_free(v);
        if (rc) {
            tth_runtime_module_free(rt);
            if (diag && diag->code == TTH_OK)
                tth_diag_set(diag, rc, NULL, "failed without a diagnostic");
            tth_diag_prefix(diag, "plugin '%s' hook tir_to_runtime, region '%s'",
                            K->plugin->desc->plugin_name, first ? first : "(none)");
            return rc;
        }
        if ((rc = mods_push(mods, nmods, rt, diag)))
            return rc;
    }
    return 0;
}
