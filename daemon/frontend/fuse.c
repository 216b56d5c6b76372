/* fuse.c: operator fusion. Requires: a well-typed module whose main calls only ops (run after
 * folding and DCE). Every op call of main moves into a function with attrs {"Primitive": 1}
 * that main calls. A group is at most one anchor (an op tth_op_is_elementwise says is not
 * elementwise), first, then elementwise ops; an elementwise call joins the group of one of its
 * operands when every node of that group is used only inside the group or by this call (so the
 * group keeps a single result and no cycle can form). Calls that produce or take tuples get a
 * function of their own. Constants stay inside the functions; everything else is a param. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend_internal.h"

typedef struct group {
    int64_t *members;   /* node indices in topological order */
    size_t n, cap;
    int64_t tip;        /* the node whose value leaves the group */
    int closed;         /* nothing may join */
    int escaped;        /* a member already has a user placed in another group */
} group;

typedef struct fuser {
    tth_relay_module *m;
    tth_rexpr **nodes;
    int64_t n;
    int64_t *index_of;  /* node id → index in nodes, -1 if absent */
    int64_t **users;    /* per node: user indices */
    size_t *nusers;
    int64_t *grp;       /* per node: group index or -1 */
    int64_t *pos;       /* per node: its position in its group's members */
    group *groups;
    size_t ngroups, capgroups;
} fuser;

static int is_op_call(const tth_rexpr *e) { return e->kind == TTH_REXPR_CALL && !e->u.call.fn; }

static int group_add(fuser *f, group *g, int64_t i)
{
    if (g->n == g->cap) {
        size_t nc = g->cap ? g->cap * 2 : 4;
        int64_t *p = realloc(g->members, nc * sizeof(int64_t));
        if (!p)
            return TTH_ENOMEM;
        g->members = p;
        g->cap = nc;
    }
    f->pos[i] = (int64_t)g->n;
    g->members[g->n++] = i;
    g->tip = i;
    return 0;
}

static int64_t group_new(fuser *f, int64_t i, int closed)
{
    if (f->ngroups == f->capgroups) {
        size_t nc = f->capgroups ? f->capgroups * 2 : 16;
        group *p = realloc(f->groups, nc * sizeof(group));
        if (!p)
            return -1;
        f->groups = p;
        f->capgroups = nc;
    }
    group *g = &f->groups[f->ngroups];
    memset(g, 0, sizeof *g);
    g->closed = closed;
    if (group_add(f, g, i))
        return -1;
    f->grp[i] = (int64_t)f->ngroups;
    return (int64_t)f->ngroups++;
}

/* May node i join group gi: no member has a user already placed in another group (users not
 * yet visited may still join; the cut below repairs groups whose later users went elsewhere). */
static int can_join(fuser *f, int64_t gi, int64_t i)
{
    (void)i;
    return !f->groups[gi].closed && !f->groups[gi].escaped;
}

/* Node i was placed in group gi: the groups of its other operands now have an outside user. */
static void mark_escapes(fuser *f, int64_t i, int64_t gi)
{
    tth_rexpr *const *args;
    size_t na = tth__node_args(f->nodes[i], &args);
    for (size_t a = 0; a < na; a++) {
        int64_t ai = f->index_of[args[a]->id];
        if (ai >= 0 && f->grp[ai] >= 0 && f->grp[ai] != gi)
            f->groups[f->grp[ai]].escaped = 1;
    }
}

/* After the greedy pass a member other than the tip may still be used outside its group (a
 * later user went elsewhere, or the function's caller uses it): keep the longest prefix of
 * members whose users all lie inside the prefix (its last member becomes the tip) and give every
 * member after it a group of its own. Members are in topological order, so the tip is the
 * group's last node and function calls cannot form a cycle. */
static int cut_groups(fuser *f)
{
    size_t ng = f->ngroups; /* groups made here are singletons: nothing to cut */
    for (size_t gi = 0; gi < ng; gi++) {
        size_t n = f->groups[gi].n, k = n - 1;
        int moved = 1;
        while (moved) { /* shrink k until every member before it has all its users in [0, k] */
            moved = 0;
            for (size_t j = 0; j < k; j++) {
                int64_t mbr = f->groups[gi].members[j];
                for (size_t u = 0; u < f->nusers[mbr]; u++) {
                    int64_t us = f->users[mbr][u];
                    if (f->grp[us] != (int64_t)gi || (size_t)f->pos[us] > k) {
                        k = j;
                        moved = 1;
                        break;
                    }
                }
            }
        }
        if (k == n - 1)
            continue;
        f->groups[gi].n = k + 1;
        f->groups[gi].tip = f->groups[gi].members[k];
        for (size_t r = k + 1; r < n; r++)
            if (group_new(f, f->groups[gi].members[r], 0) < 0) /* may move f->groups */
                return TTH_ENOMEM;
    }
    return 0;
}

static int partition(fuser *f)
{
    for (int64_t i = 0; i < f->n; i++) {
        tth_rexpr *e = f->nodes[i];
        if (!is_op_call(e))
            continue;
        int tuples = e->type.nfields >= 0;
        for (size_t a = 0; a < e->u.call.nargs; a++)
            tuples |= e->u.call.args[a]->type.nfields >= 0;
        if (tuples || !tth_op_is_elementwise(e->u.call.op)) {
            if (group_new(f, i, tuples) < 0)
                return TTH_ENOMEM;
            mark_escapes(f, i, f->grp[i]);
            continue;
        }
        int64_t joined = -1;
        for (size_t a = 0; a < e->u.call.nargs && joined < 0; a++) {
            int64_t ai = f->index_of[e->u.call.args[a]->id];
            if (ai < 0 || f->grp[ai] < 0)
                continue;
            if (can_join(f, f->grp[ai], i))
                joined = f->grp[ai];
        }
        if (joined >= 0) {
            if (group_add(f, &f->groups[joined], i))
                return TTH_ENOMEM;
            f->grp[i] = joined;
        } else if (group_new(f, i, 0) < 0) {
            return TTH_ENOMEM;
        }
        mark_escapes(f, i, f->grp[i]);
    }
    return cut_groups(f);
}

static void fn_name(fuser *f, group *g, size_t gi, char *buf, size_t len)
{
    size_t w = (size_t)snprintf(buf, len, "fused");
    for (size_t k = 0; k < g->n && w + 24 < len; k++) {
        const char *nm = tth_op_name(f->nodes[g->members[k]]->u.call.op);
        w += (size_t)snprintf(buf + w, len - w, "_%s", nm);
    }
    if (w + 16 >= len)
        w = len - 16;
    snprintf(buf + w, len - w, "_%zu", gi);
    for (char *p = buf; *p; p++)
        if (*p == '.')
            *p = '_';
}

/* Build group gi's function; fills the outside operands main must pass. */
static tth_relay_function *build_function(fuser *f, size_t gi, tth_rexpr ***ext, size_t *next, tth_diag *diag)
{
    group *g = &f->groups[gi];
    tth_relay_module *m = f->m;
    size_t cap = 8, np = 0;
    tth_rexpr **outside = malloc(cap * sizeof(*outside)), **params = malloc(cap * sizeof(*params));
    tth_rexpr **local = calloc(g->n, sizeof(*local));
    tth_relay_function *fn = NULL;
    tth_rexpr *args[256];
    if (!outside || !params || !local) {
        tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory fusing");
        goto fail;
    }
    for (size_t k = 0; k < g->n; k++) {
        tth_rexpr *e = f->nodes[g->members[k]];
        if (e->u.call.nargs > 256) {
            tth_diag_set(diag, TTH_EUNSUPPORTED, e->span, "call with more than 256 operands");
            goto fail;
        }
        for (size_t a = 0; a < e->u.call.nargs; a++) {
            tth_rexpr *x = e->u.call.args[a];
            int64_t xi = f->index_of[x->id];
            if (xi >= 0 && f->grp[xi] == (int64_t)gi) {
                args[a] = local[f->pos[xi]];
                continue;
            }
            if (x->kind == TTH_REXPR_CONST) {
                args[a] = tth_relay_const(m, tth_tensor_ref(x->u.constant.value), x->u.constant.name);
                if (!args[a]) {
                    tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory fusing");
                    goto fail;
                }
                continue;
            }
            size_t p = 0;
            while (p < np && outside[p] != x)
                p++;
            if (p == np) {
                if (np == cap) {
                    cap *= 2;
                    tth_rexpr **o2 = realloc(outside, cap * sizeof(*o2)), **p2;
                    if (o2)
                        outside = o2;
                    p2 = o2 ? realloc(params, cap * sizeof(*p2)) : NULL;
                    if (!o2 || !p2) {
                        tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory fusing");
                        goto fail;
                    }
                    params = p2;
                }
                char nm[32];
                snprintf(nm, sizeof nm, "p%zu", np);
                outside[np] = x;
                params[np] = tth_relay_var(m, tth_arena_strdup(m->arena, nm), &x->type.tensor);
                if (!params[np]) {
                    tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory fusing");
                    goto fail;
                }
                np++;
            }
            args[a] = params[p];
        }
        tth_relay_set_span(m, e->span);
        local[k] = tth_relay_call(m, e->u.call.op, args, e->u.call.nargs, json_incref(e->u.call.attrs), diag);
        tth_relay_set_span(m, NULL);
        if (!local[k])
            goto fail;
    }
    char name[160];
    fn_name(f, g, gi, name, sizeof name);
    fn = tth_relay_function_add(m, tth_arena_strdup(m->arena, name), params, np, local[g->n - 1],
                                json_pack("{s:i}", "Primitive", 1), diag);
    if (!fn)
        goto fail;
    free(params);
    free(local);
    *ext = outside;
    *next = np;
    return fn;
fail:
    free(outside);
    free(params);
    free(local);
    return NULL;
}

static int fuse_main(fuser *f, tth_relay_function *mainfn, tth_diag *diag)
{
    tth_relay_module *m = f->m;
    tth_rexpr **map = calloc((size_t)f->n, sizeof(*map));
    if (!map)
        return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory fusing");
    int rc = 0;
    for (int64_t i = 0; i < f->n && !rc; i++) {
        tth_rexpr *e = f->nodes[i];
        int64_t gi = f->grp[i];
        if (gi >= 0) {
            if (f->groups[gi].tip != i)
                continue; /* inside a function; nothing outside uses it */
            tth_rexpr **ext = NULL;
            size_t next = 0;
            tth_relay_function *fn = build_function(f, (size_t)gi, &ext, &next, diag);
            if (!fn) {
                rc = diag && diag->code ? diag->code : TTH_EINTERNAL;
                break;
            }
            for (size_t k = 0; k < next; k++)
                ext[k] = map[f->index_of[ext[k]->id]];
            tth_relay_set_span(m, e->span);
            map[i] = tth_relay_call_fn(m, fn, ext, next, diag);
            tth_relay_set_span(m, NULL);
            free(ext);
        } else if (e->kind == TTH_REXPR_VAR || e->kind == TTH_REXPR_CONST) {
            map[i] = e;
        } else {
            tth_rexpr *const *args;
            size_t na = tth__node_args(e, &args);
            tth_rexpr *nargs[256];
            if (na > 256) {
                rc = tth_diag_set(diag, TTH_EUNSUPPORTED, e->span, "node with more than 256 operands");
                break;
            }
            for (size_t k = 0; k < na; k++)
                nargs[k] = map[f->index_of[args[k]->id]];
            map[i] = tth__rebuild(m, e, nargs, na, diag);
        }
        if (!map[i] && !rc)
            rc = diag && diag->code ? diag->code : TTH_EINTERNAL;
    }
    if (!rc)
        mainfn->body = map[f->index_of[mainfn->body->id]];
    free(map);
    return rc;
}

int tth_relay_fuse(tth_relay_module *m, tth_diag *diag)
{
    tth_relay_function *mainfn = m ? tth_relay_module_main(m) : NULL;
    if (!mainfn)
        return tth_diag_set(diag, TTH_EINVAL, NULL, "the module has no main function");
    fuser f = {.m = m};
    int rc = 0;
    f.n = tth_relay_topo(m, mainfn, &f.nodes);
    if (f.n < 0)
        return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory fusing");
    uint32_t mx = 0;
    for (int64_t i = 0; i < f.n; i++)
        mx = f.nodes[i]->id > mx ? f.nodes[i]->id : mx;
    f.index_of = malloc(((size_t)mx + 1) * sizeof(int64_t));
    f.users = calloc((size_t)f.n + 1, sizeof(int64_t *));
    f.nusers = calloc((size_t)f.n + 1, sizeof(size_t));
    f.grp = malloc(((size_t)f.n + 1) * sizeof(int64_t));
    f.pos = calloc((size_t)f.n + 1, sizeof(int64_t));
    if (!f.index_of || !f.users || !f.nusers || !f.grp || !f.pos) {
        rc = tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory fusing");
        goto done;
    }
    for (uint32_t k = 0; k <= mx; k++)
        f.index_of[k] = -1;
    for (int64_t i = 0; i <= f.n; i++)
        f.grp[i] = -1; /* read for later nodes before partition reaches them: "not grouped" */
    for (int64_t i = 0; i < f.n; i++)
        f.index_of[f.nodes[i]->id] = i;
    /* users (a user listed once per operand use; duplicates are harmless) */
    size_t *cap = calloc((size_t)f.n + 1, sizeof(size_t));
    if (!cap) {
        rc = tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory fusing");
        goto done;
    }
    for (int64_t i = 0; i < f.n && !rc; i++) {
        tth_rexpr *const *args;
        size_t na = tth__node_args(f.nodes[i], &args);
        for (size_t k = 0; k < na; k++) {
            int64_t a = f.index_of[args[k]->id];
            if (f.nusers[a] == cap[a]) {
                size_t nc = cap[a] ? cap[a] * 2 : 2;
                int64_t *p = realloc(f.users[a], nc * sizeof(int64_t));
                if (!p) {
                    rc = tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory fusing");
                    break;
                }
                f.users[a] = p;
                cap[a] = nc;
            }
            f.users[a][f.nusers[a]++] = i;
        }
    }
    free(cap);
    if (rc)
        goto done;
    /* the function result counts as a user outside every group */
    int64_t bi = f.index_of[mainfn->body->id];
    {
        int64_t *p = realloc(f.users[bi], (f.nusers[bi] + 1) * sizeof(int64_t));
        if (!p) {
            rc = tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory fusing");
            goto done;
        }
        f.users[bi] = p;
        f.users[bi][f.nusers[bi]++] = f.n; /* index n: "the caller", never in a group */
    }
    if ((rc = partition(&f)))
        goto done;
    rc = fuse_main(&f, mainfn, diag);
done:
    if (f.users)
        for (int64_t i = 0; i <= f.n; i++)
            free(f.users[i]);
    free(f.users);
    free(f.nusers);
    free(f.index_of);
    free(f.grp);
    free(f.pos);
    for (size_t g = 0; g < f.ngroups; g++)
        free(f.groups[g].members);
    free(f.groups);
    return rc;
}
