/* memplan.c: memory planning, a TIR → TIR pass over the whole program: every WORKSPACE buffer of
 * the AOT entry and every constant-size LOCAL buffer (TTH_TSTMT_ALLOCATE) of every PrimFunc —
 * whoever made it, the default lowering or a plugin's relay_to_tir — gets an offset in one
 * workspace (tth_tbuffer.offset) and its effective alignment (tth_tbuffer.align).
 *
 * Requires: the module's AOT entry (aot.c), whose body is a sequence of statements (calls and
 * copies). Liveness: statement k of the entry uses the buffers it names; a WORKSPACE buffer lives
 * from its first to its last use. A call of a function whose body is a sequence spans one time
 * step per statement of that sequence: its arguments live through all of them and each LOCAL
 * buffer of the function from the first to the last of its statements naming it (a region
 * function keeping values between its kernels reuses their bytes); the LOCAL buffers of deeper
 * calls live during the statement calling them. Two buffers may share bytes only when their
 * lifetimes are disjoint (the conflict graph, memplan_graph.c). Every offset is a multiple of the buffer's
 * alignment and every size is rounded up to it.
 *
 * The lower bound is the most bytes live at one statement: no placement can use less. Each
 * algorithm is an order of placement (memplan_greedy.c, memplan_search.c); TTH_MEMPLAN_BEST runs
 * the three greedy orders, then the search from the best of them, and keeps the smallest
 * workspace (ties: the first algorithm listed in TTH_MEMPLAN_ALGOS).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memplan_internal.h"

/* The buffers found so far, with a hash index from buffer to item. */
typedef struct plan_builder {
    tth_mem_item *items;
    size_t n, cap;
    uint32_t *slot;          /* open addressing: item index + 1, 0 empty; nslot a power of two */
    size_t nslot;
    uint32_t target_align;
    int only_new;            /* functions the entry never calls: add new buffers only */
    const tth_mem_alias *aliases; /* slices: a use of a part is a use of its whole */
    size_t naliases;
    const tth_prim_func **byname; /* the module's functions sorted by name (callee lookup) */
    size_t nfuncs;
} plan_builder;

static int cmp_func_name(const void *a, const void *b)
{
    return strcmp((*(const tth_prim_func *const *)a)->name, (*(const tth_prim_func *const *)b)->name);
}

static const tth_prim_func *find_func(const plan_builder *pb, const char *name)
{
    size_t lo = 0, hi = pb->nfuncs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(pb->byname[mid]->name, name);
        if (c == 0)
            return pb->byname[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static size_t slot_of(const plan_builder *pb, const tth_tbuffer *b)
{
    uint64_t h = (uint64_t)(uintptr_t)b * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h >> 32) & (pb->nslot - 1);
    while (pb->slot[i] && pb->items[pb->slot[i] - 1].buf != b)
        i = (i + 1) & (pb->nslot - 1);
    return i;
}

static int grow(plan_builder *pb)
{
    size_t cap = pb->cap ? pb->cap * 2 : 64;
    tth_mem_item *ni = realloc(pb->items, cap * sizeof *ni);
    if (!ni)
        return TTH_ENOMEM;
    pb->items = ni;
    pb->cap = cap;
    uint32_t *ns = calloc(cap * 2, sizeof *ns);
    if (!ns)
        return TTH_ENOMEM;
    free(pb->slot);
    pb->slot = ns;
    pb->nslot = cap * 2;
    for (size_t i = 0; i < pb->n; i++)
        pb->slot[slot_of(pb, pb->items[i].buf)] = (uint32_t)i + 1;
    return 0;
}

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

uint32_t tth_memplan_align(const tth_tbuffer *b, uint32_t target)
{
    uint32_t a = b->align == 16 || b->align == 0 ? target : (b->align > target ? b->align : target);
    uint32_t e = (uint32_t)tth_dtype_size(b->dtype);
    if (a < e)
        a = e;
    uint32_t p = 1;
    while (p < a)
        p <<= 1;
    return p;
}

static int touch(plan_builder *pb, tth_tbuffer *b, int64_t k, const char *func)
{
    if (b->scope != TTH_SCOPE_WORKSPACE && b->scope != TTH_SCOPE_LOCAL)
        return 0;
    for (size_t i = 0; i < pb->naliases; i++)
        if (pb->aliases[i].part == b) {
            b = pb->aliases[i].whole;
            break;
        }
    if (pb->nslot) {
        size_t s = slot_of(pb, b);
        if (pb->slot[s]) {
            tth_mem_item *it = &pb->items[pb->slot[s] - 1];
            if (pb->only_new)
                return 0;
            if (k < it->start)
                it->start = k;
            if (k > it->end)
                it->end = k;
            return 0;
        }
    }
    if (pb->n == pb->cap && grow(pb))
        return TTH_ENOMEM;
    uint32_t a = tth_memplan_align(b, pb->target_align);
    size_t sz = round_up(tth_tbuffer_nbytes(b), a);
    pb->items[pb->n] = (tth_mem_item){.buf = b, .start = k, .end = k, .size = sz, .align = a,
                                      .func = b->scope == TTH_SCOPE_LOCAL ? func : NULL};
    pb->slot[slot_of(pb, b)] = (uint32_t)pb->n + 1;
    pb->n++;
    return 0;
}

/* Every buffer a statement names, at time k; calls pull in the callee's LOCAL buffers
 * (depth-limited against call cycles, which the verifier refuses anyway). */
typedef struct touch_ctx {
    plan_builder *pb;
    int64_t k;
    const char *func;
    int depth;
} touch_ctx;

static int touch_stmt(plan_builder *pb, const tth_tstmt *s, int64_t k, const char *func, int depth);

static int touch_in_expr(void *ctx, const tth_texpr *e)
{
    const touch_ctx *t = ctx;
    if (e->kind == TTH_TEXPR_LOAD || e->kind == TTH_TEXPR_ADDRESS_OF)
        return touch(t->pb, e->u.load.buf, t->k, t->func);
    return 0;
}

static int touch_in_stmt(void *ctx, const tth_tstmt *s)
{
    const touch_ctx *t = ctx;
    int rc = 0;
    switch (s->kind) {
    case TTH_TSTMT_STORE: return touch(t->pb, s->u.store.buf, t->k, t->func);
    case TTH_TSTMT_ALLOCATE: return touch(t->pb, s->u.alloc.buf, t->k, t->func);
    case TTH_TSTMT_CALL_FUNC: {
        for (size_t i = 0; i < s->u.call.nargs && !rc; i++)
            rc = touch(t->pb, s->u.call.args[i], t->k, t->func);
        const tth_prim_func *callee = find_func(t->pb, s->u.call.func);
        if (!rc && callee && t->depth < 16)
            rc = touch_stmt(t->pb, callee->body, t->k, callee->name, t->depth + 1);
        return rc;
    }
    default: return 0;
    }
}

static int touch_stmt(plan_builder *pb, const tth_tstmt *s, int64_t k, const char *func, int depth)
{
    touch_ctx t = {pb, k, func, depth};
    tth_tir_visitor v = {.stmt = touch_in_stmt, .expr = touch_in_expr, .ctx = &t};
    return tth_tir_walk(s, &v);
}

/* The lower bound: the most bytes live at one time step (a sweep over start/end events). */
static int lower_bound(const tth_mem_item *items, size_t n, int64_t last, size_t *out)
{
    int64_t *delta = calloc((size_t)last + 2, sizeof *delta);
    if (!delta)
        return TTH_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        delta[items[i].start] += (int64_t)items[i].size;
        delta[items[i].end + 1] -= (int64_t)items[i].size;
    }
    int64_t live = 0, most = 0;
    for (int64_t t = 0; t <= last; t++) {
        live += delta[t];
        if (live > most)
            most = live;
    }
    free(delta);
    *out = (size_t)most;
    return 0;
}

/* A function's body without the ALLOCATE statements wrapped around all of it. */
static const tth_tstmt *peel_allocs(const tth_tstmt *s)
{
    while (s && s->kind == TTH_TSTMT_ALLOCATE)
        s = s->u.alloc.body;
    return s;
}

static int known(const plan_builder *pb, const tth_tbuffer *b)
{
    return pb->nslot && pb->slot[slot_of(pb, b)] != 0;
}

/* The function an entry statement calls when its body (under the ALLOCATEs around it) is a
 * sequence of several statements: the statement then spans one time step per statement. */
static const tth_prim_func *sequence_callee(const plan_builder *pb, const tth_tstmt *s)
{
    if (s->kind != TTH_TSTMT_CALL_FUNC)
        return NULL;
    const tth_prim_func *callee = find_func(pb, s->u.call.func);
    const tth_tstmt *b = callee ? peel_allocs(callee->body) : NULL;
    return b && b->kind == TTH_TSTMT_SEQ && b->u.seq.n > 1 ? callee : NULL;
}

/* An entry statement at steps base .. base + width - 1 (width: its callee's statements, or 1). A
 * call's arguments live through all of them; the callee's top-level statements run one after the
 * other, statement j at base + j, so each LOCAL buffer of the callee lives from the first to the
 * last statement naming it (those a region function keeps between its calls share bytes once
 * dead). A LOCAL no statement names still gets a place, at base. Returns the width in *width. */
static int touch_entry_stmt(plan_builder *pb, const tth_tstmt *s, int64_t base, int64_t *width)
{
    const tth_prim_func *callee = sequence_callee(pb, s);
    *width = 1;
    if (!callee)
        return touch_stmt(pb, s, base, NULL, 0);
    const tth_tstmt *body = peel_allocs(callee->body);
    *width = (int64_t)body->u.seq.n;
    int rc = 0;
    for (size_t i = 0; i < s->u.call.nargs && !rc; i++) {
        rc = touch(pb, s->u.call.args[i], base, NULL);
        rc = rc ? rc : touch(pb, s->u.call.args[i], base + *width - 1, NULL);
    }
    for (size_t j = 0; j < body->u.seq.n && !rc; j++)
        rc = touch_stmt(pb, body->u.seq.stmts[j], base + (int64_t)j, callee->name, 1);
    for (const tth_tstmt *a = callee->body; a && a->kind == TTH_TSTMT_ALLOCATE && !rc; a = a->u.alloc.body)
        if (!known(pb, a->u.alloc.buf))
            rc = touch(pb, a->u.alloc.buf, base, callee->name);
    return rc;
}

/* Liveness: every WORKSPACE and LOCAL buffer with its lifetime, in order of first use. */
static int collect(tth_tir_module *mod, const tth_prim_func *entry, plan_builder *pb,
                   int64_t *steps)
{
    pb->byname = malloc((mod->nfuncs ? mod->nfuncs : 1) * sizeof *pb->byname);
    if (!pb->byname)
        return TTH_ENOMEM;
    memcpy(pb->byname, mod->funcs, mod->nfuncs * sizeof *pb->byname);
    pb->nfuncs = mod->nfuncs;
    qsort(pb->byname, pb->nfuncs, sizeof *pb->byname, cmp_func_name);
    int rc = 0;
    const tth_tstmt *body = entry->body;
    if (body && body->kind == TTH_TSTMT_SEQ) {
        int64_t t = 0;
        for (size_t k = 0; k < body->u.seq.n && !rc; k++) {
            int64_t w;
            rc = touch_entry_stmt(pb, body->u.seq.stmts[k], t, &w);
            t += w;
        }
        *steps = t;
    } else {
        rc = touch_stmt(pb, body, 0, NULL, 0);
        *steps = 1;
    }
    /* LOCAL buffers of functions the entry never calls still need a place: each such function
     * gets a time step of its own after the entry's */
    pb->only_new = 1;
    for (size_t i = 0; i < mod->nfuncs && !rc; i++)
        if (mod->funcs[i] != entry)
            rc = touch_stmt(pb, mod->funcs[i]->body, *steps + (int64_t)i, mod->funcs[i]->name, 0);
    return rc;
}

/* The three greedy orders; the best (ties: the first) into best_order/best_off, each one's size
 * into algo_bytes. Returns the best size. */
static size_t best_greedy(tth__mp_placer *pl, size_t n, uint32_t *order, int64_t *off,
                          uint32_t *best_order, int64_t *best_off, size_t *algo_bytes,
                          tth_memplan_algo *winner)
{
    static const tth_memplan_algo greedy[] = {TTH_MEMPLAN_GREEDY_BY_SIZE, TTH_MEMPLAN_GREEDY_BY_CONFLICTS,
                                              TTH_MEMPLAN_GREEDY_BY_START};
    size_t best = SIZE_MAX;
    for (size_t k = 0; k < sizeof greedy / sizeof greedy[0]; k++) {
        tth__mp_order_greedy(pl->items, pl->g, greedy[k], order);
        size_t got = tth__mp_place(pl, order, off, SIZE_MAX);
        algo_bytes[greedy[k]] = got;
        if (got < best) {
            best = got;
            *winner = greedy[k];
            memcpy(best_order, order, n * sizeof *order);
            memcpy(best_off, off, n * sizeof *off);
        }
    }
    return best;
}

/* Place the items with `algo` (or every one for TTH_MEMPLAN_BEST) and write the kept offsets.
 * The search starts from the best greedy order, so it is never worse than any greedy one. */
static int plan_place(tth_mem_plan *plan, tth_memplan_algo algo)
{
    size_t n = plan->nitems;
    tth__mp_graph g;
    tth__mp_placer pl = {0};
    uint32_t *order = malloc((n ? n : 1) * sizeof *order), *best_order = malloc((n ? n : 1) * sizeof *order);
    int64_t *off = malloc((n ? n : 1) * sizeof *off), *best_off = malloc((n ? n : 1) * sizeof *off);
    int rc = (!order || !best_order || !off || !best_off) ? TTH_ENOMEM : 0;
    if (!rc)
        rc = tth__mp_graph_build(plan->items, n, &g);
    if (rc) {
        free(order), free(best_order), free(off), free(best_off);
        return rc;
    }
    rc = tth__mp_placer_init(&pl, plan->items, &g);
    plan->conflicts = g.nedges;
    size_t best = SIZE_MAX, got;
    size_t bytes[TTH_MEMPLAN_NALGOS] = {0};
    tth_memplan_algo winner = algo == TTH_MEMPLAN_BEST ? TTH_MEMPLAN_GREEDY_BY_SIZE : algo;
    if (rc) {
        /* out of memory */
    } else if (algo == TTH_MEMPLAN_BEST || algo == TTH_MEMPLAN_SEARCH) {
        best = best_greedy(&pl, n, order, off, best_order, best_off, bytes, &winner);
        memcpy(order, best_order, n * sizeof *order);
        got = tth__mp_search(&pl, order, off, plan->lower_bound_bytes, &plan->search_iterations);
        if (got == SIZE_MAX)
            rc = TTH_ENOMEM;
        bytes[TTH_MEMPLAN_SEARCH] = got;
        if (algo == TTH_MEMPLAN_SEARCH) {
            winner = TTH_MEMPLAN_SEARCH;
            best = got;
            memcpy(best_off, off, n * sizeof *off);
        } else if (!rc && got < best) {
            best = got;
            winner = TTH_MEMPLAN_SEARCH;
            memcpy(best_off, off, n * sizeof *off);
        }
        if (algo == TTH_MEMPLAN_SEARCH) /* alone, report only its own result */
            memset(bytes, 0, TTH_MEMPLAN_SEARCH * sizeof *bytes);
    } else {
        tth__mp_order_greedy(plan->items, &g, algo, order);
        best = bytes[algo] = tth__mp_place(&pl, order, best_off, SIZE_MAX);
    }
    if (!rc) {
        for (size_t i = 0; i < n; i++)
            plan->items[i].buf->offset = best_off[i];
        plan->workspace_bytes = n ? best : 0;
        plan->algo = winner;
        memcpy(plan->algo_bytes, bytes, sizeof bytes);
    }
    tth__mp_placer_free(&pl);
    tth__mp_graph_free(&g);
    free(order), free(best_order), free(off), free(best_off);
    return rc;
}

int tth_memplan_run(tth_tir_module *mod, uint32_t alignment, tth_memplan_algo algo,
                    tth_mem_plan *plan, tth_diag *diag)
{
    return tth_memplan_run_aliased(mod, alignment, algo, NULL, 0, plan, diag);
}

int tth_memplan_run_aliased(tth_tir_module *mod, uint32_t alignment, tth_memplan_algo algo,
                            const tth_mem_alias *aliases, size_t naliases, tth_mem_plan *plan,
                            tth_diag *diag)
{
    memset(plan, 0, sizeof *plan);
    if (alignment == 0 || (alignment & (alignment - 1)) != 0)
        return tth_diag_set(diag, TTH_EINVAL, "memplan", "workspace alignment %u is not a power "
                            "of two", alignment);
    if ((int)algo < 0 || (int)algo >= TTH_MEMPLAN_NALGOS)
        return tth_diag_set(diag, TTH_EUNSUPPORTED, "memplan", "unknown planning algorithm %d",
                            (int)algo);
    const tth_prim_func *entry = mod->entry ? tth_tir_module_find(mod, mod->entry) : NULL;
    if (!entry)
        return tth_diag_set(diag, TTH_EINVAL, "memplan", "the module has no AOT entry; the aot "
                            "stage must run first");
    plan_builder pb = {.target_align = alignment, .aliases = aliases, .naliases = naliases};
    int64_t steps = 0;
    int rc = collect(mod, entry, &pb, &steps);
    free(pb.slot);
    free(pb.byname);
    plan->items = pb.items;
    plan->nitems = pb.n;
    plan->steps = steps;
    plan->alignment = alignment;
    if (!rc)
        rc = tth_memplan_place(plan, algo);
    if (rc) {
        tth_mem_plan_clear(plan);
        return tth_diag_set(diag, TTH_ENOMEM, "memplan", "out of memory");
    }
    for (size_t i = 0; i < plan->nitems; i++)
        plan->items[i].buf->align = plan->items[i].align;
    /* a part sits inside its whole; aot.c chose offsets that keep its alignment */
    for (size_t i = 0; i < naliases; i++) {
        aliases[i].part->offset = aliases[i].whole->offset + (int64_t)aliases[i].offset;
        aliases[i].part->align = tth_memplan_align(aliases[i].part, alignment);
    }
    return 0;
}

int tth_memplan_place(tth_mem_plan *plan, tth_memplan_algo algo)
{
    int64_t last = 0;
    plan->total_bytes = 0;
    memset(plan->algo_bytes, 0, sizeof plan->algo_bytes);
    plan->search_iterations = 0;
    for (size_t i = 0; i < plan->nitems; i++) {
        const tth_mem_item *it = &plan->items[i];
        plan->total_bytes += it->size;
        if (it->end > last)
            last = it->end;
        if (it->align > plan->alignment)
            plan->alignment = it->align;
    }
    int rc = lower_bound(plan->items, plan->nitems, last, &plan->lower_bound_bytes);
    return rc ? rc : plan_place(plan, algo);
}

void tth_mem_plan_clear(tth_mem_plan *plan)
{
    if (!plan)
        return;
    free(plan->items);
    memset(plan, 0, sizeof *plan);
}

const char *tth_memplan_algo_name(tth_memplan_algo a)
{
    switch (a) {
    case TTH_MEMPLAN_BEST: return "best";
#define TTH__MP_NAME(e, v, n) case TTH_MEMPLAN_##e: return n;
    TTH_MEMPLAN_ALGOS(TTH__MP_NAME)
#undef TTH__MP_NAME
    }
    return "unknown";
}

json_t *tth_mem_plan_summary(const tth_mem_plan *plan)
{
    json_t *algos = json_object();
    for (int a = 1; a < TTH_MEMPLAN_NALGOS; a++)
        if (plan->algo_bytes[a])
            json_object_set_new(algos, tth_memplan_algo_name((tth_memplan_algo)a),
                                json_integer((json_int_t)plan->algo_bytes[a]));
    return json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:I}",
                     "algorithm", tth_memplan_algo_name(plan->algo),
                     "alignment", (json_int_t)plan->alignment,
                     "workspace_bytes", (json_int_t)plan->workspace_bytes,
                     "total_bytes", (json_int_t)plan->total_bytes,
                     "lower_bound_bytes", (json_int_t)plan->lower_bound_bytes,
                     "buffers", (json_int_t)plan->nitems,
                     "conflicts", (json_int_t)plan->conflicts,
                     "algorithms", algos,
                     "search_iterations", (json_int_t)plan->search_iterations);
}

json_t *tth_mem_plan_to_json(const tth_mem_plan *plan)
{
    json_t *j = tth_mem_plan_summary(plan);
    json_t *items = json_array();
    for (size_t i = 0; i < plan->nitems; i++) {
        const tth_mem_item *it = &plan->items[i];
        json_array_append_new(items, json_pack("{s:s, s:s, s:o, s:I, s:I, s:[I, I]}",
            "buffer", it->buf->name,
            "scope", it->buf->scope == TTH_SCOPE_LOCAL ? "local" : "workspace",
            "function", it->func ? json_string(it->func) : json_null(),
            "offset", (json_int_t)it->buf->offset, "size", (json_int_t)it->size,
            "live", (json_int_t)it->start, (json_int_t)it->end));
        json_object_set_new(json_array_get(items, json_array_size(items) - 1), "align",
                            json_integer((json_int_t)it->align));
        if (it->node)
            json_object_set_new(json_array_get(items, json_array_size(items) - 1), "node", json_string(it->node));
        if (it->tensor)
            json_object_set_new(json_array_get(items, json_array_size(items) - 1), "tensor", json_string(it->tensor));
    }
    json_object_set_new(j, "items", items);
    return j;
}

json_t *tth_mem_plan_per_operator(const tth_tir_module *mod, const tth_mem_plan *plan)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < mod->nfuncs; i++) {
        const tth_prim_func *f = mod->funcs[i];
        if (mod->entry && strcmp(f->name, mod->entry) == 0)
            continue;
        size_t local = 0;
        for (size_t k = 0; k < plan->nitems; k++)
            if (plan->items[k].buf->scope == TTH_SCOPE_LOCAL && plan->items[k].func &&
                strcmp(plan->items[k].func, f->name) == 0)
                local += plan->items[k].size;
        const char *op = json_string_value(json_object_get(f->attrs, "op"));
        json_array_append_new(arr, json_pack("{s:s, s:s, s:I}", "function", f->name,
                                             "op", op ? op : "", "local_bytes", (json_int_t)local));
    }
    return arr;
}
