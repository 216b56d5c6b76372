/* partition.c: composite-target partitioning. Requires: main calls only ops (after constant and
 * batch-norm folding and DCE, before fusion).
 *
 * Every op call of main is offered to each member kind but the last, through its
 * partition_supports hook. For each kind in the listed order, the calls it takes that no earlier
 * kind took are grouped in topological order: a call joins the region of one of its operands
 * when that keeps the region convex (no operand outside the region depends on it), else it
 * starts a region. Each region is outlined into a function {"Compiler": kind, "global_symbol":
 * "<model>_<kind>_main_<n>"} that main calls; what no kind took stays in main for the last
 * (fallback) kind. Calls taking or producing tuples always stay with the fallback kind. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "partition.h"

int tth_partition_kinds(const json_t *target, const tth_registry *reg, tth_partition *p, tth_diag *diag)
{
    const char *kind = json_string_value(json_object_get(target, "kind"));
    if (!kind)
        return tth_diag_set(diag, TTH_EINVAL, "target", "the target has no \"kind\"");
    const json_t *members = json_object_get(target, "targets");
    int composite = strcmp(kind, "composite") == 0;
    size_t n = composite ? json_array_size(members) : 1;
    /* a kind that needs a host, given alone, is the composite of it and its host (the canonical
     * target always has one: docs/targets.md) */
    const json_t *host = json_object_get(target, "host");
    const tth_plugin *alone = composite ? NULL : tth_registry_find_kind(reg, kind);
    int with_host = alone && (alone->desc->flags & TTH_KIND_NEEDS_HOST) && json_is_object(host);
    if (with_host)
        n = 2;
    if (composite && n == 0)
        return tth_diag_set(diag, TTH_EINVAL, "target", "the composite target lists no targets");
    p->kinds = calloc(n, sizeof *p->kinds);
    if (!p->kinds)
        return tth_diag_set(diag, TTH_ENOMEM, "target", "out of memory");
    p->nkinds = n;
    for (size_t i = 0; i < n; i++) {
        tth_part_kind *k = &p->kinds[i];
        k->target = composite ? json_array_get(members, i) : with_host && i == 1 ? host : target;
        k->kind = json_string_value(json_object_get(k->target, "kind"));
        if (!k->kind)
            return tth_diag_set(diag, TTH_EINVAL, "target", "member %zu of the composite target "
                                "has no \"kind\"", i);
        k->plugin = tth_registry_find_kind(reg, k->kind);
        if (!k->plugin)
            return tth_diag_set(diag, TTH_ENOENT, "target", "no plugin provides target kind '%s'",
                                k->kind);
        if (i + 1 < n && !k->plugin->partition_supports && with_host) {
            tth_diag_set(diag, TTH_EUNSUPPORTED, "target", "target kind '%s' (plugin '%s') has no "
                         "partition_supports hook, so it cannot share the model with its host", k->kind,
                         k->plugin->desc->plugin_name);
            return TTH_EUNSUPPORTED;
        }
        if (i + 1 < n && !k->plugin->partition_supports) {
            tth_diag_set(diag, TTH_EUNSUPPORTED, "target", "target kind '%s' (plugin '%s') has no "
                         "partition_supports hook, so it can only be the last (fallback) kind of "
                         "a composite target", k->kind, k->plugin->desc->plugin_name);
            tth_diag_hint(diag, "list '%s' last, or drop it", k->kind);
            return TTH_EUNSUPPORTED;
        }
        /* Its TIR (relay_to_tir's or the default lowering's) is built by the host's
         * tir_to_runtime unless it has its own: the host only runs code on the CPU. */
        if (i + 1 < n && !k->plugin->relay_to_runtime && !k->plugin->tir_to_runtime &&
            k->plugin->desc->device_type != TTH_DEVICE_CPU) {
            tth_diag_set(diag, TTH_EUNSUPPORTED, "target", "target kind '%s' (plugin '%s') has "
                         "neither relay_to_runtime nor tir_to_runtime, and its device (type %d) is "
                         "not the host's CPU: nothing can build the regions it takes", k->kind,
                         k->plugin->desc->plugin_name, (int)k->plugin->desc->device_type);
            return TTH_EUNSUPPORTED;
        }
    }
    const tth_part_kind *last = &p->kinds[n - 1];
    if ((composite || with_host) && !(last->plugin->desc->flags & TTH_KIND_CAN_BE_HOST)) {
        tth_diag_set(diag, TTH_EUNSUPPORTED, "target", "the last kind of a composite target takes "
                     "what no other kind supports and hosts the rest; '%s' (plugin '%s') cannot "
                     "be a host", last->kind, last->plugin->desc->plugin_name);
        tth_diag_hint(diag, "end the composite target with a host kind, e.g. '%s,c'", last->kind);
        return TTH_EUNSUPPORTED;
    }
    return 0;
}

/* ---- regions ------------------------------------------------------------------------------------ */

typedef struct parter {
    tth_relay_module *m;
    tth_partition *p;
    const tth_host *host;
    tth_relay_function *mainfn;
    tth_rexpr **nodes;
    int64_t n;
    int64_t *index_of;     /* node id → index */
    int *kind_of;          /* per node: kind index (nkinds-1: fallback), -1 for non-calls */
    int64_t *region_of;    /* per node: region index or -1 */
    int64_t *users_out;    /* per node: 1 when used outside its region (or by main's result) */
    uint32_t *stamp;       /* DFS marks */
    uint32_t epoch;
    int64_t *stack;
    size_t nregions;
    int *region_kind;
    size_t capregions;
} parter;

static int is_op_call(const tth_rexpr *e) { return e->kind == TTH_REXPR_CALL && !e->u.call.fn; }

static size_t node_args(const tth_rexpr *e, tth_rexpr *const **args)
{
    switch (e->kind) {
    case TTH_REXPR_CALL: *args = e->u.call.args; return e->u.call.nargs;
    case TTH_REXPR_TUPLE: *args = e->u.tuple.fields; return e->u.tuple.nfields;
    case TTH_REXPR_TUPLE_GET: *args = &e->u.get.tuple; return 1;
    default: *args = NULL; return 0;
    }
}

/* Does node a depend (through any path) on a member of region r? */
static int depends_on(parter *P, int64_t a, int64_t r)
{
    size_t sp = 0;
    P->epoch++;
    P->stack[sp++] = a;
    P->stamp[a] = P->epoch;
    while (sp) {
        int64_t x = P->stack[--sp];
        if (P->region_of[x] == r)
            return 1;
        tth_rexpr *const *args;
        size_t na = node_args(P->nodes[x], &args);
        for (size_t k = 0; k < na; k++) {
            int64_t y = P->index_of[args[k]->id];
            if (y >= 0 && P->stamp[y] != P->epoch) {
                P->stamp[y] = P->epoch;
                P->stack[sp++] = y;
            }
        }
    }
    return 0;
}

static int64_t region_new(parter *P, int kind)
{
    if (P->nregions == P->capregions) {
        size_t nc = P->capregions ? P->capregions * 2 : 8;
        int *k = realloc(P->region_kind, nc * sizeof *k);
        if (!k)
            return -1;
        P->region_kind = k;
        P->capregions = nc;
    }
    P->region_kind[P->nregions] = kind;
    return (int64_t)P->nregions++;
}

/* Group the calls kind k took (kind_of == k) into convex regions, in topological order. */
static int group_kind(parter *P, int k)
{
    for (int64_t i = 0; i < P->n; i++) {
        if (P->kind_of[i] != k)
            continue;
        tth_rexpr *e = P->nodes[i];
        int64_t joined = -1;
        for (size_t a = 0; a < e->u.call.nargs && joined < 0; a++) {
            int64_t ai = P->index_of[e->u.call.args[a]->id];
            int64_t r = ai >= 0 ? P->region_of[ai] : -1;
            if (r < 0 || P->region_kind[r] != k)
                continue;
            int convex = 1;
            for (size_t b = 0; b < e->u.call.nargs && convex; b++) {
                int64_t bi = P->index_of[e->u.call.args[b]->id];
                if (bi >= 0 && P->region_of[bi] != r && depends_on(P, bi, r))
                    convex = 0;
            }
            if (convex)
                joined = r;
        }
        if (joined < 0 && (joined = region_new(P, k)) < 0)
            return TTH_ENOMEM;
        P->region_of[i] = joined;
    }
    return 0;
}

/* A node's name as a Graphviz string body: quotes, backslashes and controls become '_'. */
static const char *dot_safe(const char *s, char *buf, size_t len)
{
    size_t i = 0;
    for (; s[i] && i + 1 < len; i++)
        buf[i] = (s[i] == '"' || s[i] == '\\' || (unsigned char)s[i] < 0x20) ? '_' : s[i];
    buf[i] = 0;
    return buf;
}

static const char *node_label(const tth_rexpr *e, char *buf, size_t len)
{
    if (e->span && *e->span)
        return e->span;
    snprintf(buf, len, "%%%u", e->id);
    return buf;
}

/* Rebuild e with new operands (op calls, function calls, tuples, tuple_get). */
static tth_rexpr *rebuild(tth_relay_module *m, const tth_rexpr *e, tth_rexpr *const *args, tth_diag *diag)
{
    tth_relay_set_span(m, e->span);
    tth_rexpr *r = NULL;
    switch (e->kind) {
    case TTH_REXPR_CALL:
        r = e->u.call.fn ? tth_relay_call_fn(m, e->u.call.fn, args, e->u.call.nargs, diag)
                         : tth_relay_call(m, e->u.call.op, args, e->u.call.nargs,
                                          json_incref(e->u.call.attrs), diag);
        break;
    case TTH_REXPR_TUPLE: r = tth_relay_tuple(m, args, e->u.tuple.nfields, diag); break;
    case TTH_REXPR_TUPLE_GET: r = tth_relay_tuple_get(m, args[0], e->u.get.index, diag); break;
    default: r = (tth_rexpr *)e; break;
    }
    tth_relay_set_span(m, NULL);
    return r;
}

/* "<model>_<kind>_main_<n>" with the kind made a C identifier. */
static void region_symbol(const char *model, const char *kind, size_t n, char *buf, size_t len)
{
    snprintf(buf, len, "%s_%s_main_%zu", model, kind, n);
    for (char *c = buf; *c; c++)
        if (!isalnum((unsigned char)*c) && *c != '_')
            *c = '_';
}

tth_rexpr *tth_part_operand(tth_relay_module *m, tth_rexpr *x, tth_rexpr **outside, tth_rexpr **params, size_t *np)
{
    if (x->kind == TTH_REXPR_CONST)
        return tth_relay_const(m, tth_tensor_ref(x->u.constant.value), x->u.constant.name);
    size_t q = 0;
    while (q < *np && outside[q] != x)
        q++;
    if (q == *np) {
        char nm[32];
        snprintf(nm, sizeof nm, "p%zu", q);
        params[q] = tth_relay_var(m, tth_arena_strdup(m->arena, nm), &x->type.tensor);
        if (!params[q])
            return NULL;
        outside[q] = x;
        (*np)++;
    }
    return params[q];
}

/* Outline region r: its function, and in map[] the main-side value of every member used outside. */
static int outline(parter *P, int64_t r, size_t nth, tth_rexpr **map, tth_diag *diag)
{
    tth_relay_module *m = P->m;
    const tth_part_kind *K = &P->p->kinds[P->region_kind[r]];
    int rc = 0;
    size_t np = 0, nout = 0;
    tth_rexpr **outside = calloc((size_t)P->n + 1, sizeof *outside);
    tth_rexpr **params = calloc((size_t)P->n + 1, sizeof *params);
    tth_rexpr **local = calloc((size_t)P->n + 1, sizeof *local);
    tth_rexpr **results = calloc((size_t)P->n + 1, sizeof *results);
    int64_t *outs = calloc((size_t)P->n + 1, sizeof *outs);
    if (!outside || !params || !local || !results || !outs) {
        rc = tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory partitioning");
        goto done;
    }
    for (int64_t i = 0; i < P->n && !rc; i++) {
        if (P->region_of[i] != r)
            continue;
        tth_rexpr *e = P->nodes[i];
        tth_rexpr *args[256];
        if (e->u.call.nargs > 256) {
            rc = tth_diag_set(diag, TTH_EUNSUPPORTED, e->span, "call with more than 256 operands");
            break;
        }
        for (size_t a = 0; a < e->u.call.nargs; a++) {
            tth_rexpr *x = e->u.call.args[a];
            int64_t xi = P->index_of[x->id];
            if (xi >= 0 && P->region_of[xi] == r) {
                args[a] = local[xi];
                continue;
            }
            args[a] = tth_part_operand(m, x, outside, params, &np);
            if (!args[a]) {
                rc = tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory partitioning");
                break;
            }
        }
        if (rc)
            break;
        local[i] = rebuild(m, e, args, diag);
        if (!local[i]) {
            rc = diag && diag->code ? diag->code : TTH_EINTERNAL;
            break;
        }
        if (P->users_out[i]) {
            outs[nout] = i;
            results[nout++] = local[i];
        }
    }
    if (rc)
        goto done;
    tth_rexpr *body = nout == 1 ? results[0] : tth_relay_tuple(m, results, nout, diag);
    if (!body) {
        rc = diag && diag->code ? diag->code : TTH_EINTERNAL;
        goto done;
    }
    char sym[256];
    region_symbol(m->name ? m->name : "model", K->kind, nth, sym, sizeof sym);
    const char *gs = tth_arena_strdup(m->arena, sym);
    tth_relay_function *fn = tth_relay_function_add(m, gs, params, np, body,
        json_pack("{s:s, s:s}", "Compiler", K->kind, "global_symbol", gs), diag);
    if (!fn) {
        rc = diag && diag->code ? diag->code : TTH_EINTERNAL;
        goto done;
    }
    for (size_t q = 0; q < np; q++)
        outside[q] = map[P->index_of[outside[q]->id]];
    tth_rexpr *call = tth_relay_call_fn(m, fn, outside, np, diag);
    if (!call) {
        rc = diag && diag->code ? diag->code : TTH_EINTERNAL;
        goto done;
    }
    for (size_t o = 0; o < nout; o++) {
        map[outs[o]] = nout == 1 ? call : tth_relay_tuple_get(m, call, (int32_t)o, diag);
        if (!map[outs[o]]) {
            rc = diag && diag->code ? diag->code : TTH_EINTERNAL;
            goto done;
        }
    }
    tth_part_region *R = &P->p->regions[P->p->nregions++];
    R->fn = fn;
    R->kind = K;
    R->global_symbol = gs;
done:
    free(outside);
    free(params);
    free(local);
    free(results);
    free(outs);
    return rc;
}

/* Graphviz: one box per op call coloured by kind, a legend of the kinds, edges between calls,
 * and each region boxed and labelled with its global_symbol. */
static char *make_dot(parter *P, const int64_t *region_index)
{
    static const char *colors[] = {"#8dd3c7", "#fb8072", "#80b1d3", "#fdb462", "#b3de69",
                                   "#bebada", "#fccde5", "#ffffb3"};
    char *s = NULL, lb[32], safe[64], ksafe[64];
    size_t len = 0;
    FILE *f = open_memstream(&s, &len);
    if (!f)
        return NULL;
    fprintf(f, "digraph partition {\n  node [shape=box, style=filled];\n");
    for (size_t k = 0; k < P->p->nkinds; k++)
        fprintf(f, "  kind%zu [label=\"%s%s\", shape=note, fillcolor=\"%s\"];\n", k,
                dot_safe(P->p->kinds[k].kind, ksafe, sizeof ksafe),
                k + 1 == P->p->nkinds ? " (fallback)" : "", colors[k % 8]);
    for (size_t r = 0; r < P->p->nregions; r++) {
        fprintf(f, "  subgraph cluster_%zu {\n    label=\"%s\";\n", r,
                dot_safe(P->p->regions[r].global_symbol, safe, sizeof safe));
        for (int64_t i = 0; i < P->n; i++)
            if (P->region_of[i] >= 0 && region_index[P->region_of[i]] == (int64_t)r)
                fprintf(f, "    n%u;\n", P->nodes[i]->id);
        fprintf(f, "  }\n");
    }
    for (int64_t i = 0; i < P->n; i++) {
        if (P->kind_of[i] < 0)
            continue;
        const tth_rexpr *e = P->nodes[i];
        fprintf(f, "  n%u [label=\"%s\\n%s\", fillcolor=\"%s\"];\n", e->id,
                dot_safe(node_label(e, lb, sizeof lb), safe, sizeof safe), tth_op_name(e->u.call.op),
                colors[P->kind_of[i] % 8]);
    }
    for (int64_t i = 0; i < P->n; i++) {
        if (P->kind_of[i] < 0)
            continue;
        const tth_rexpr *e = P->nodes[i];
        for (size_t a = 0; a < e->u.call.nargs; a++) {
            int64_t ai = P->index_of[e->u.call.args[a]->id];
            /* through tuple_get to the call that made the tuple */
            while (ai >= 0 && P->kind_of[ai] < 0 && P->nodes[ai]->kind == TTH_REXPR_TUPLE_GET)
                ai = P->index_of[P->nodes[ai]->u.get.tuple->id];
            if (ai >= 0 && P->kind_of[ai] >= 0)
                fprintf(f, "  n%u -> n%u;\n", P->nodes[ai]->id, e->id);
        }
    }
    fprintf(f, "}\n");
    if (fclose(f) != 0) {
        free(s);
        return NULL;
    }
    return s;
}

int tth_partition_run(tth_relay_module *m, const tth_host *host, tth_partition *p, tth_diag *diag)
{
    parter P = {.m = m, .p = p, .host = host};
    P.mainfn = tth_relay_module_main(m);
    if (!P.mainfn)
        return tth_diag_set(diag, TTH_EINVAL, NULL, "the model has no main function");
    P.n = tth_relay_topo(m, P.mainfn, &P.nodes);
    if (P.n < 0)
        return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory partitioning");
    uint32_t mx = 0;
    for (int64_t i = 0; i < P.n; i++)
        mx = P.nodes[i]->id > mx ? P.nodes[i]->id : mx;
    int rc = 0;
    size_t nn = (size_t)P.n + 1;
    P.index_of = malloc(((size_t)mx + 1) * sizeof(int64_t));
    P.kind_of = malloc(nn * sizeof(int));
    P.region_of = malloc(nn * sizeof(int64_t));
    P.users_out = calloc(nn, sizeof(int64_t));
    P.stamp = calloc(nn, sizeof(uint32_t));
    P.stack = malloc(nn * sizeof(int64_t));
    tth_rexpr **map = calloc(nn, sizeof *map);
    json_t *ops = json_array(), *refusals = json_array(), *jregions = json_array(), *kinds = json_array();
    if (!P.index_of || !P.kind_of || !P.region_of || !P.users_out || !P.stamp || !P.stack || !map ||
        !ops || !refusals || !jregions || !kinds) {
        rc = tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory partitioning");
        goto done;
    }
    for (uint32_t k = 0; k <= mx; k++)
        P.index_of[k] = -1;
    for (int64_t i = 0; i < P.n; i++) {
        P.index_of[P.nodes[i]->id] = i;
        P.region_of[i] = -1;
        P.kind_of[i] = -1;
    }
    int fallback = (int)p->nkinds - 1;
    char lb[32];

    /* ask the kinds */
    for (int64_t i = 0; i < P.n && !rc; i++) {
        const tth_rexpr *e = P.nodes[i];
        if (!is_op_call(e))
            continue;
        P.kind_of[i] = fallback;
        int tuples = e->type.nfields >= 0;
        for (size_t a = 0; a < e->u.call.nargs; a++)
            tuples |= e->u.call.args[a]->type.nfields >= 0;
        for (int k = 0; k < fallback; k++) {
            const tth_part_kind *K = &p->kinds[k];
            char why[512] = "";
            int yes;
            if (tuples) {
                snprintf(why, sizeof why, "%s takes or makes a tuple, which stays with the fallback "
                         "kind", tth_op_name(e->u.call.op));
                yes = 0;
            } else {
                yes = K->plugin->partition_supports(host, K->target, P.mainfn, e, why, sizeof why);
                why[sizeof why - 1] = 0;
            }
            if (yes < 0) {
                rc = tth_diag_set(diag, yes, NULL, "plugin '%s' hook partition_supports failed on %s "
                                  "(node '%s')", K->plugin->desc->plugin_name,
                                  tth_op_name(e->u.call.op), node_label(e, lb, sizeof lb));
                break;
            }
            if (yes) {
                P.kind_of[i] = k;
                break;
            }
            char reason[640];
            snprintf(reason, sizeof reason, "%s: %s", K->kind,
                     why[0] ? why : "not supported (no reason given)");
            json_array_append_new(refusals, json_pack("{s:s, s:s, s:s, s:s}", "node",
                                  node_label(e, lb, sizeof lb), "op", tth_op_name(e->u.call.op),
                                  "kind", K->kind, "reason", reason));
        }
    }
    if (rc)
        goto done;
    for (int k = 0; k < fallback && !rc; k++)
        rc = group_kind(&P, k);
    if (rc) {
        tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory partitioning");
        goto done;
    }

    /* which members leave their region */
    for (int64_t i = 0; i < P.n; i++) {
        tth_rexpr *const *args;
        size_t na = node_args(P.nodes[i], &args);
        for (size_t k = 0; k < na; k++) {
            int64_t a = P.index_of[args[k]->id];
            if (a >= 0 && P.region_of[a] >= 0 && P.region_of[a] != P.region_of[i])
                P.users_out[a] = 1;
        }
    }
    int64_t bi = P.index_of[P.mainfn->body->id];
    if (bi >= 0)
        P.users_out[bi] = 1;

    /* outline regions in the order of their first member, rebuilding main around them */
    p->regions = calloc(P.nregions + 1, sizeof *p->regions);
    size_t *nth = calloc(p->nkinds, sizeof *nth);
    int64_t *region_index = malloc((P.nregions + 1) * sizeof *region_index);
    if (!p->regions || !nth || !region_index) {
        free(nth);
        free(region_index);
        rc = tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory partitioning");
        goto done;
    }
    for (size_t r = 0; r < P.nregions; r++)
        region_index[r] = -1;
    /* Sweep in topological order until every node is placed: a region is outlined once all its
     * outside operands are (convexity guarantees that happens before any of its users). Without
     * regions main stays as it is. */
    memset(P.stamp, 0, nn * sizeof *P.stamp);
    int progress = 1;
    size_t left = P.nregions ? (size_t)P.n : 0;
    while (!rc && left && progress) {
        progress = 0;
        for (int64_t i = 0; i < P.n && !rc; i++) {
            tth_rexpr *e = P.nodes[i];
            int64_t r = P.region_of[i];
            if (P.stamp[i] == UINT32_MAX)
                continue;
            tth_rexpr *const *args;
            size_t na;
            int ready = 1;
            if (r >= 0) {
                for (int64_t j = 0; j < P.n && ready; j++) {
                    if (P.region_of[j] != r)
                        continue;
                    na = node_args(P.nodes[j], &args);
                    for (size_t k = 0; k < na && ready; k++) {
                        int64_t x = P.index_of[args[k]->id];
                        ready = P.region_of[x] == r || P.stamp[x] == UINT32_MAX;
                    }
                }
                if (!ready)
                    continue;
                region_index[r] = (int64_t)p->nregions;
                rc = outline(&P, r, nth[P.region_kind[r]]++, map, diag);
                for (int64_t j = 0; j < P.n; j++)
                    if (P.region_of[j] == r) {
                        P.stamp[j] = UINT32_MAX;
                        left--;
                    }
                progress = 1;
                continue;
            }
            na = node_args(e, &args);
            for (size_t k = 0; k < na && ready; k++)
                ready = P.stamp[P.index_of[args[k]->id]] == UINT32_MAX;
            if (!ready)
                continue;
            if (e->kind == TTH_REXPR_VAR || e->kind == TTH_REXPR_CONST) {
                map[i] = e;
            } else {
                tth_rexpr **nargs = malloc((na + 1) * sizeof *nargs);
                if (!nargs) {
                    rc = tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory partitioning");
                    break;
                }
                for (size_t k = 0; k < na; k++)
                    nargs[k] = map[P.index_of[args[k]->id]];
                if (!(map[i] = rebuild(m, e, nargs, diag)))
                    rc = diag && diag->code ? diag->code : TTH_EINTERNAL;
                free(nargs);
            }
            P.stamp[i] = UINT32_MAX;
            left--;
            progress = 1;
        }
    }
    if (!rc && left)
        rc = tth_diag_set(diag, TTH_EINTERNAL, NULL, "partitioning left a cycle between regions");
    free(nth);
    if (!rc && P.nregions)
        P.mainfn->body = map[bi];

    /* the explanation */
    for (size_t k = 0; k < p->nkinds; k++)
        json_array_append_new(kinds, json_string(p->kinds[k].kind));
    for (int64_t i = 0; i < P.n && !rc; i++) {
        if (P.kind_of[i] < 0)
            continue;
        const tth_rexpr *e = P.nodes[i];
        int64_t r = P.region_of[i];
        json_array_append_new(ops, json_pack("{s:s, s:s, s:s, s:o}", "node",
                              node_label(e, lb, sizeof lb), "op", tth_op_name(e->u.call.op),
                              "kind", p->kinds[P.kind_of[i]].kind, "function",
                              r >= 0 ? json_string(p->regions[region_index[r]].global_symbol)
                                     : json_null()));
    }
    for (size_t r = 0; r < p->nregions && !rc; r++)
        json_array_append_new(jregions, json_pack("{s:s, s:s}", "function",
                              p->regions[r].global_symbol, "kind", p->regions[r].kind->kind));
    if (!rc) {
        p->dot = make_dot(&P, region_index);
        p->explain = json_pack("{s:O, s:s, s:O, s:O, s:O}", "kinds", kinds, "fallback",
                               p->kinds[fallback].kind, "ops", ops, "refusals", refusals,
                               "regions", jregions);
        if (!p->dot || !p->explain)
            rc = tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory partitioning");
    }
    free(region_index);
    if (!rc && P.nregions) {
        tth_relay_module_prune(m);
        rc = tth_relay_verify(m, diag);
    }
done:
    json_decref(ops);
    json_decref(refusals);
    json_decref(jregions);
    json_decref(kinds);
    free(map);
    free(P.index_of);
    free(P.kind_of);
    free(P.region_of);
    free(P.users_out);
    free(P.stamp);
    free(P.stack);
    free(P.region_kind);
    return rc;
}

const tth_part_region *tth_partition_region(const tth_partition *p, const tth_relay_function *fn)
{
    for (size_t r = 0; p && r < p->nregions; r++)
        if (p->regions[r].fn == fn)
            return &p->regions[r];
    return NULL;
}

void tth_partition_clear(tth_partition *p)
{
    if (!p)
        return;
    free(p->kinds);
    free(p->regions);
    json_decref(p->explain);
    free(p->dot);
    memset(p, 0, sizeof *p);
}
