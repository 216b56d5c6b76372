/* fuse.c: operator fusion. Requires: a well-typed module whose main calls only ops (run after
 * folding and DCE). Every op call of main moves into a function with attrs {"Primitive": 1}
 * that main calls. A group is at most one anchor (an op tth_op_is_elementwise says is not
 * elementwise), first, then elementwise ops; an elementwise call joins the group of one of its
 * operands when every node of that group is used only inside the group or by this call (so the
 * group keeps a single result and no cycle can form). An elementwise group whose value only one
 * elementwise call of another group uses then moves into that group (merge_side_groups). Calls
 * that produce or take tuples get a function of their own. Constants stay inside the functions;
 * everything else is a param.
 *
 * Branches that run only when needed (docs/operators.md, "Control flow"): a `where` whose
 * condition is one value (what an If decided at run time becomes) is a function of its own, and
 * a function whose value every user needs only when such conditions hold (it feeds only the
 * then side of a where, or only the else side, or functions that themselves run only then) gets
 * the conditions as extra params and attrs {"Guard": [[param, when], ...]}: its code runs only
 * when each such param's value is `when` (daemon/lower/lower.c). The where reads the skipped
 * side's buffer but selects the other. */
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
    struct guard *guards; /* per node: the conditions under which its value is needed */
} fuser;

/* A conjunction of conditions "node cond's single value is (when != 0)", at most GUARD_MAX of
 * them (dropping one only makes a function run more often, which is always right); `top` is
 * "not yet seen" (the identity of intersection). */
#define GUARD_MAX 4
typedef struct guard {
    int top;
    int n;
    int64_t cond[GUARD_MAX];
    int when[GUARD_MAX];
} guard;

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

/* where(c, a, b) with one condition value: picks a whole side, as an If decided at run time does */
static int is_branch_select(const tth_rexpr *e)
{
    return is_op_call(e) && e->u.call.op == TTH_OP_WHERE && e->u.call.nargs == 3 &&
           e->u.call.args[0]->type.nfields < 0 && tth_ttype_numel(&e->u.call.args[0]->type.tensor) == 1 &&
           e->u.call.args[0]->kind != TTH_REXPR_CONST;
}

/* Group gi is only elementwise calls whose single result (the tip) feeds one elementwise member
 * of another group and nothing else: the node that uses it, else -1. */
static int64_t side_user(fuser *f, size_t gi)
{
    group *g = &f->groups[gi];
    if (!g->n || g->closed)
        return -1;
    for (size_t k = 0; k < g->n; k++)
        if (!tth_op_is_elementwise(f->nodes[g->members[k]]->u.call.op))
            return -1;
    int64_t tip = g->tip, u = -1;
    for (size_t k = 0; k < f->nusers[tip]; k++) {
        int64_t us = f->users[tip][k];
        if (us >= f->n || (u >= 0 && us != u))
            return -1; /* the function's result, or two users */
        u = us;
    }
    /* u is never in gi: after cut_groups the tip is its group's last member */
    if (u < 0 || f->grp[u] < 0 || !is_op_call(f->nodes[u]) ||
        !tth_op_is_elementwise(f->nodes[u]->u.call.op) || is_branch_select(f->nodes[u]))
        return -1;
    return u;
}

/* Inputs computed for one use (docs/operators.md, "Fusion"): an elementwise group whose value
 * only one elementwise member of another group uses (a residual add's dequantized skip input, a
 * scaled bias) moves into that group, its members just before that user. The value is then
 * computed where it is used, in registers, and its input (often a quarter of the bytes, uint8
 * against float) is what is read. Runs after cut_groups, so every tip is its group's only value
 * used outside; what moves takes only values made outside both groups, so no cycle forms.
 * Groups are visited last to first, so a chain of such groups moves as a whole. */
static int merge_side_groups(fuser *f)
{
    for (size_t gi = f->ngroups; gi-- > 0;) {
        int64_t u = side_user(f, gi);
        if (u < 0)
            continue;
        group *s = &f->groups[gi];
        int64_t di = f->grp[u];
        group *d = &f->groups[di];
        size_t at = (size_t)f->pos[u];
        if (d->n + s->n > d->cap) {
            size_t nc = d->n + s->n;
            int64_t *p = realloc(d->members, nc * sizeof(int64_t));
            if (!p)
                return TTH_ENOMEM;
            d->members = p;
            d->cap = nc;
        }
        memmove(d->members + at + s->n, d->members + at, (d->n - at) * sizeof(int64_t));
        memcpy(d->members + at, s->members, s->n * sizeof(int64_t));
        d->n += s->n;
        for (size_t k = 0; k < d->n; k++) {
            f->pos[d->members[k]] = (int64_t)k;
            f->grp[d->members[k]] = di;
        }
        s->n = 0;
        s->tip = -1;
    }
    return 0;
}

/* g = g AND (cond is when) */
static void guard_add(guard *g, int64_t cond, int when)
{
    for (int k = 0; k < g->n; k++)
        if (g->cond[k] == cond)
            return; /* "c and not c" cannot be needed; keeping the first is still right */
    if (g->n < GUARD_MAX) {
        g->cond[g->n] = cond;
        g->when[g->n++] = when;
    }
}

/* g = g OR h, kept as a conjunction: the conditions both have */
static void guard_meet(guard *g, const guard *h)
{
    if (h->top)
        return;
    if (g->top) {
        *g = *h;
        return;
    }
    int n = 0;
    for (int k = 0; k < g->n; k++)
        for (int j = 0; j < h->n; j++)
            if (g->cond[k] == h->cond[j] && g->when[k] == h->when[j]) {
                g->cond[n] = g->cond[k];
                g->when[n++] = g->when[k];
                break;
            }
    g->n = n;
}

/* Each node's guard, users before operands: the function's result and calls that are not ours
 * (regions of other kinds) need their operands always; a branch select needs its condition
 * always and a side only when the condition says that side. */
static void compute_guards(fuser *f)
{
    for (int64_t i = f->n; i-- > 0;) {
        guard *g = &f->guards[i];
        g->top = 1;
        g->n = 0;
        tth_rexpr *e = f->nodes[i];
        if (e->kind == TTH_REXPR_CALL && e->u.call.fn) {
            g->top = 0; /* not ours: it always runs */
            continue;
        }
        for (size_t u = 0; u < f->nusers[i]; u++) {
            int64_t us = f->users[i][u];
            guard c = {0};
            if (us < f->n)
                c = f->guards[us];
            if (us < f->n && is_branch_select(f->nodes[us])) {
                tth_rexpr *const *a = f->nodes[us]->u.call.args;
                int as_cond = a[0] == e, as_then = a[1] == e, as_else = a[2] == e;
                int64_t ci = f->index_of[a[0]->id];
                if (as_cond || ci < 0)
                    c.n = 0, c.top = 0;
                else if (as_then != as_else && !c.top)
                    guard_add(&c, ci, as_then);
            }
            guard_meet(g, &c);
        }
        if (g->top) /* no users: as the result */
            g->top = 0;
    }
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
        if (tuples || !tth_op_is_elementwise(e->u.call.op) || is_branch_select(e)) {
            if (group_new(f, i, tuples || is_branch_select(e)) < 0)
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
    int rc = cut_groups(f);
    return rc ? rc : merge_side_groups(f);
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

/* The outside operands of a function being built and their params */
typedef struct outside_list {
    tth_rexpr **outside, **params;
    size_t n, cap;
} outside_list;

/* x's param, made on first use; NULL on OOM (diag set) */
static tth_rexpr *outside_param(tth_relay_module *m, outside_list *o, tth_rexpr *x, size_t *index, tth_diag *diag)
{
    size_t p = 0;
    while (p < o->n && o->outside[p] != x)
        p++;
    if (p == o->n) {
        if (o->n == o->cap) {
            size_t cap = o->cap ? 2 * o->cap : 8;
            tth_rexpr **o2 = realloc(o->outside, cap * sizeof(*o2));
            if (o2)
                o->outside = o2;
            tth_rexpr **p2 = o2 ? realloc(o->params, cap * sizeof(*p2)) : NULL;
            if (!o2 || !p2) {
                tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory fusing");
                return NULL;
            }
            o->params = p2;
            o->cap = cap;
        }
        char nm[32];
        snprintf(nm, sizeof nm, "p%zu", p);
        o->outside[p] = x;
        o->params[p] = tth_relay_var(m, tth_arena_strdup(m->arena, nm), &x->type.tensor);
        if (!o->params[p]) {
            tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory fusing");
            return NULL;
        }
        o->n++;
    }
    if (index)
        *index = p;
    return o->params[p];
}

/* The conditions under which every member of group gi is needed */
static void group_meet(fuser *f, size_t gi, guard *gg)
{
    group *g = &f->groups[gi];
    gg->top = 1;
    gg->n = 0;
    for (size_t k = 0; k < g->n; k++)
        guard_meet(gg, &f->guards[g->members[k]]);
}

/* Node ci is a value main has for group gi to take: not inside gi or inside another function */
static int is_main_value(fuser *f, int64_t gi, int64_t ci)
{
    int64_t cg = f->grp[ci];
    return cg != gi && (cg < 0 || f->groups[cg].tip == ci);
}

/* The guard of group gi (the conditions every member's value is needed under) as attrs "Guard":
 * each condition becomes a param of the function (a value of main: a graph input, or the result
 * of another function or call); NULL when it always runs. */
static json_t *group_guard(fuser *f, size_t gi, outside_list *o, tth_diag *diag, int *err)
{
    guard gg;
    group_meet(f, gi, &gg);
    json_t *list = NULL;
    for (int k = 0; !gg.top && k < gg.n; k++) {
        int64_t ci = gg.cond[k];
        if (!is_main_value(f, (int64_t)gi, ci))
            continue;
        size_t p;
        if (!outside_param(f->m, o, f->nodes[ci], &p, diag) || (!list && !(list = json_array()))) {
            *err = 1;
            break;
        }
        json_array_append_new(list, json_pack("[I, b]", (json_int_t)p, gg.when[k]));
    }
    return list;
}

/* Build group gi's function; fills the outside operands main must pass. */
static tth_relay_function *build_function(fuser *f, size_t gi, tth_rexpr ***ext, size_t *next, tth_diag *diag)
{
    group *g = &f->groups[gi];
    tth_relay_module *m = f->m;
    outside_list o = {0};
    tth_rexpr **local = calloc(g->n, sizeof(*local));
    tth_relay_function *fn = NULL;
    json_t *guard_attr = NULL;
    tth_rexpr *args[256];
    if (!local) {
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
            if (!(args[a] = outside_param(m, &o, x, NULL, diag)))
                goto fail;
        }
        tth_relay_set_span(m, e->span);
        local[k] = tth_relay_call(m, e->u.call.op, args, e->u.call.nargs, json_incref(e->u.call.attrs), diag);
        tth_relay_set_span(m, NULL);
        if (!local[k])
            goto fail;
    }
    int err = 0;
    guard_attr = group_guard(f, gi, &o, diag, &err);
    if (err)
        goto fail;
    char name[160];
    fn_name(f, g, gi, name, sizeof name);
    json_t *attrs = json_pack("{s:i}", "Primitive", 1);
    if (attrs && guard_attr)
        json_object_set(attrs, "Guard", guard_attr);
    fn = tth_relay_function_add(m, tth_arena_strdup(m->arena, name), o.params, o.n, local[g->n - 1], attrs, diag);
    if (!fn)
        goto fail;
    json_decref(guard_attr);
    free(o.params);
    free(local);
    *ext = o.outside;
    *next = o.n;
    return fn;
fail:
    json_decref(guard_attr);
    free(o.outside);
    free(o.params);
    free(local);
    return NULL;
}

/* 1 when every value of main that node i's call (or rebuilt node) takes is made: a function's
 * outside operands and its guard's conditions, which may come later in the old order (a guard
 * adds an operand the nodes did not have) */
static int ready(fuser *f, tth_rexpr **map, int64_t i)
{
    int64_t gi = f->grp[i];
    if (gi < 0) {
        tth_rexpr *const *args;
        size_t na = tth__node_args(f->nodes[i], &args);
        for (size_t k = 0; k < na; k++)
            if (!map[f->index_of[args[k]->id]])
                return 0;
        return 1;
    }
    group *g = &f->groups[gi];
    for (size_t k = 0; k < g->n; k++) {
        tth_rexpr *e = f->nodes[g->members[k]];
        for (size_t a = 0; a < e->u.call.nargs; a++) {
            int64_t xi = f->index_of[e->u.call.args[a]->id];
            if (f->grp[xi] != gi && e->u.call.args[a]->kind != TTH_REXPR_CONST && !map[xi])
                return 0;
        }
    }
    guard gg;
    group_meet(f, (size_t)gi, &gg);
    for (int c = 0; !gg.top && c < gg.n; c++)
        if (is_main_value(f, gi, gg.cond[c]) && !map[gg.cond[c]])
            return 0;
    return 1;
}

static int fuse_main(fuser *f, tth_relay_function *mainfn, tth_diag *diag)
{
    tth_relay_module *m = f->m;
    tth_rexpr **map = calloc((size_t)f->n, sizeof(*map));
    unsigned char *done = calloc((size_t)f->n + 1, 1);
    if (!map || !done) {
        free(map);
        free(done);
        return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory fusing");
    }
    int rc = 0;
    /* in the old order, a node waiting for a guard's condition made later skipped to a later
     * pass; each pass makes at least one node (the conditions are not guarded, so never wait) */
    for (int progress = 1, left = 1; left && progress && !rc;) {
        progress = left = 0;
        for (int64_t i = 0; i < f->n && !rc; i++) {
            tth_rexpr *e = f->nodes[i];
            int64_t gi = f->grp[i];
            if (done[i] || (gi >= 0 && f->groups[gi].tip != i))
                continue; /* made, or inside a function: nothing outside uses it */
            if (!ready(f, map, i)) {
                left = 1;
                continue;
            }
            if (gi >= 0) {
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
            done[i] = 1;
            progress = 1;
        }
    }
    int64_t bi = f->index_of[mainfn->body->id];
    if (!rc && !map[bi])
        rc = tth_diag_set(diag, TTH_EINTERNAL, NULL, "fusion: the guarded functions wait on each other");
    if (!rc)
        mainfn->body = map[bi];
    free(map);
    free(done);
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
    f.guards = calloc((size_t)f.n + 1, sizeof *f.guards);
    if (!f.index_of || !f.users || !f.nusers || !f.grp || !f.pos || !f.guards) {
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
    compute_guards(&f);
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
    free(f.guards);
    for (size_t g = 0; g < f.ngroups; g++)
        free(f.groups[g].members);
    free(f.groups);
    return rc;
}
