/* memplan.c: memory planning — every WORKSPACE and LOCAL buffer gets an offset in one workspace.
 *
 * Requires: the module's AOT entry (aot.c), whose body is a sequence of statements (calls and
 * copies). Liveness: statement k of the entry uses the buffers it names; a WORKSPACE buffer lives
 * from its first to its last use; the LOCAL buffers of a PrimFunc (and of every PrimFunc it calls)
 * live during each statement calling it. Two buffers may share bytes only when their lifetimes
 * are disjoint. Every offset and size is a multiple of the alignment (the larger of the target's
 * workspace-byte-alignment and the buffer's own).
 *
 * Algorithm (TTH_MEMPLAN_GREEDY_BY_SIZE): buffers by decreasing size (ties: earlier start, then
 * id), each placed at the lowest offset where it overlaps no already placed buffer that is live
 * at the same time (first fit over the gaps between those).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile_internal.h"

typedef struct plan_builder {
    tth_mem_item *items;
    size_t n, cap;
} plan_builder;

static int item_index(const plan_builder *pb, const tth_tbuffer *b)
{
    for (size_t i = 0; i < pb->n; i++)
        if (pb->items[i].buf == b)
            return (int)i;
    return -1;
}

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

static int touch(plan_builder *pb, tth_tbuffer *b, int64_t k, const char *func, uint32_t align)
{
    if (b->scope != TTH_SCOPE_WORKSPACE && b->scope != TTH_SCOPE_LOCAL)
        return 0;
    int i = item_index(pb, b);
    if (i >= 0) {
        if (k < pb->items[i].start)
            pb->items[i].start = k;
        if (k > pb->items[i].end)
            pb->items[i].end = k;
        return 0;
    }
    if (pb->n == pb->cap) {
        size_t cap = pb->cap ? pb->cap * 2 : 64;
        tth_mem_item *ni = realloc(pb->items, cap * sizeof *ni);
        if (!ni)
            return TTH_ENOMEM;
        pb->items = ni;
        pb->cap = cap;
    }
    uint32_t a = b->align > align ? b->align : align;
    size_t sz = round_up(tth_tbuffer_nbytes(b), a);
    pb->items[pb->n++] = (tth_mem_item){.buf = b, .start = k, .end = k, .size = sz, .func = func};
    return 0;
}

/* Buffers named by an expression. */
static int touch_expr(plan_builder *pb, const tth_texpr *e, int64_t k, const char *func, uint32_t al)
{
    if (!e)
        return 0;
    int rc = 0;
    switch (e->kind) {
    case TTH_TEXPR_LOAD:
    case TTH_TEXPR_ADDRESS_OF:
        rc = touch(pb, e->u.load.buf, k, func, al);
        return rc ? rc : touch_expr(pb, e->u.load.index, k, func, al);
    case TTH_TEXPR_BINARY:
        rc = touch_expr(pb, e->u.bin.a, k, func, al);
        return rc ? rc : touch_expr(pb, e->u.bin.b, k, func, al);
    case TTH_TEXPR_UNARY: return touch_expr(pb, e->u.un.a, k, func, al);
    case TTH_TEXPR_SELECT:
        rc = touch_expr(pb, e->u.select.cond, k, func, al);
        rc = rc ? rc : touch_expr(pb, e->u.select.a, k, func, al);
        return rc ? rc : touch_expr(pb, e->u.select.b, k, func, al);
    case TTH_TEXPR_CAST: return touch_expr(pb, e->u.cast.value, k, func, al);
    case TTH_TEXPR_INTRIN:
        rc = touch_expr(pb, e->u.intrin.args[0], k, func, al);
        return rc ? rc : touch_expr(pb, e->u.intrin.args[1], k, func, al);
    case TTH_TEXPR_CALL_EXTERN:
        for (size_t i = 0; i < e->u.call.nargs && !rc; i++)
            rc = touch_expr(pb, e->u.call.args[i], k, func, al);
        return rc;
    default: return 0;
    }
}

/* Every buffer a statement names, at time k; calls pull in the callee's LOCAL buffers
 * (depth-limited against call cycles, which the verifier refuses anyway). */
static int touch_stmt(plan_builder *pb, const tth_tir_module *m, const tth_tstmt *s, int64_t k,
                      const char *func, uint32_t al, int depth)
{
    if (!s)
        return 0;
    int rc = 0;
    switch (s->kind) {
    case TTH_TSTMT_SEQ:
        for (size_t i = 0; i < s->u.seq.n && !rc; i++)
            rc = touch_stmt(pb, m, s->u.seq.stmts[i], k, func, al, depth);
        return rc;
    case TTH_TSTMT_FOR:
        rc = touch_expr(pb, s->u.loop.min, k, func, al);
        rc = rc ? rc : touch_expr(pb, s->u.loop.extent, k, func, al);
        return rc ? rc : touch_stmt(pb, m, s->u.loop.body, k, func, al, depth);
    case TTH_TSTMT_STORE:
        rc = touch(pb, s->u.store.buf, k, func, al);
        rc = rc ? rc : touch_expr(pb, s->u.store.index, k, func, al);
        return rc ? rc : touch_expr(pb, s->u.store.value, k, func, al);
    case TTH_TSTMT_ALLOCATE:
        rc = touch(pb, s->u.alloc.buf, k, func, al);
        return rc ? rc : touch_stmt(pb, m, s->u.alloc.body, k, func, al, depth);
    case TTH_TSTMT_IF:
        rc = touch_expr(pb, s->u.cond.cond, k, func, al);
        rc = rc ? rc : touch_stmt(pb, m, s->u.cond.then_s, k, func, al, depth);
        return rc ? rc : touch_stmt(pb, m, s->u.cond.else_s, k, func, al, depth);
    case TTH_TSTMT_LET:
        rc = touch_expr(pb, s->u.let.value, k, func, al);
        return rc ? rc : touch_stmt(pb, m, s->u.let.body, k, func, al, depth);
    case TTH_TSTMT_EVALUATE: return touch_expr(pb, s->u.eval.value, k, func, al);
    case TTH_TSTMT_CALL_FUNC: {
        for (size_t i = 0; i < s->u.call.nargs && !rc; i++)
            rc = touch(pb, s->u.call.args[i], k, func, al);
        const tth_prim_func *callee = tth_tir_module_find(m, s->u.call.func);
        if (!rc && callee && depth < 16)
            rc = touch_stmt(pb, m, callee->body, k, callee->name, al, depth + 1);
        return rc;
    }
    }
    return 0;
}

static int overlaps_in_time(const tth_mem_item *a, const tth_mem_item *b)
{
    return a->start <= b->end && b->start <= a->end;
}

static int by_size_desc(const void *pa, const void *pb)
{
    const tth_mem_item *a = pa, *b = pb;
    if (a->size != b->size)
        return a->size > b->size ? -1 : 1;
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    return a->buf->id < b->buf->id ? -1 : a->buf->id > b->buf->id;
}

static int by_offset(const void *pa, const void *pb)
{
    const tth_mem_item *a = *(const tth_mem_item *const *)pa, *b = *(const tth_mem_item *const *)pb;
    return a->buf->offset < b->buf->offset ? -1 : a->buf->offset > b->buf->offset;
}

static int plan_greedy_by_size(tth_mem_plan *plan)
{
    if (plan->nitems > 1)
        qsort(plan->items, plan->nitems, sizeof *plan->items, by_size_desc);
    const tth_mem_item **live = malloc((plan->nitems ? plan->nitems : 1) * sizeof *live);
    if (!live)
        return TTH_ENOMEM;
    size_t top = 0;
    for (size_t i = 0; i < plan->nitems; i++) {
        tth_mem_item *it = &plan->items[i];
        size_t nl = 0;
        for (size_t j = 0; j < i; j++)
            if (overlaps_in_time(&plan->items[j], it))
                live[nl++] = &plan->items[j];
        qsort(live, nl, sizeof *live, by_offset);
        size_t off = 0;
        for (size_t j = 0; j < nl; j++) {
            size_t lo = (size_t)live[j]->buf->offset, hi = lo + live[j]->size;
            if (off + it->size <= lo)
                break; /* fits in the gap before this one */
            if (hi > off)
                off = hi;
        }
        it->buf->offset = (int64_t)off;
        if (off + it->size > top)
            top = off + it->size;
    }
    free(live);
    plan->workspace_bytes = top;
    return 0;
}

int tth_memplan_run(tth_tir_module *mod, uint32_t alignment, tth_memplan_algo algo,
                    tth_mem_plan *plan, tth_diag *diag)
{
    memset(plan, 0, sizeof *plan);
    if (alignment == 0 || (alignment & (alignment - 1)) != 0)
        return tth_diag_set(diag, TTH_EINVAL, "memplan", "workspace alignment %u is not a power "
                            "of two", alignment);
    const tth_prim_func *entry = mod->entry ? tth_tir_module_find(mod, mod->entry) : NULL;
    if (!entry)
        return tth_diag_set(diag, TTH_EINVAL, "memplan", "the module has no AOT entry; the aot "
                            "stage must run first");
    plan_builder pb = {0};
    int rc = 0;
    const tth_tstmt *body = entry->body;
    if (body && body->kind == TTH_TSTMT_SEQ) {
        for (size_t k = 0; k < body->u.seq.n && !rc; k++)
            rc = touch_stmt(&pb, mod, body->u.seq.stmts[k], (int64_t)k, NULL, alignment, 0);
    } else {
        rc = touch_stmt(&pb, mod, body, 0, NULL, alignment, 0);
    }
    /* LOCAL buffers of functions the entry never calls still need a place (they are planned
     * as if alone, after everything else) */
    int64_t after = body && body->kind == TTH_TSTMT_SEQ ? (int64_t)body->u.seq.n : 1;
    for (size_t i = 0; i < mod->nfuncs && !rc; i++) {
        const tth_prim_func *f = mod->funcs[i];
        if (f == entry)
            continue;
        plan_builder probe = {0};
        rc = touch_stmt(&probe, mod, f->body, after, f->name, alignment, 0);
        for (size_t j = 0; j < probe.n && !rc; j++)
            if (item_index(&pb, probe.items[j].buf) < 0)
                rc = touch(&pb, probe.items[j].buf, after + (int64_t)i, f->name, alignment);
        free(probe.items);
    }
    if (rc) {
        free(pb.items);
        return tth_diag_set(diag, TTH_ENOMEM, "memplan", "out of memory");
    }
    plan->algo = algo;
    plan->alignment = alignment;
    plan->items = pb.items;
    plan->nitems = pb.n;
    for (size_t i = 0; i < plan->nitems; i++)
        plan->total_bytes += plan->items[i].size;
    /* lower bound: the most bytes live at one statement */
    int64_t last = 0;
    for (size_t i = 0; i < plan->nitems; i++)
        if (plan->items[i].end > last)
            last = plan->items[i].end;
    for (int64_t k = 0; k <= last; k++) {
        size_t sum = 0;
        for (size_t i = 0; i < plan->nitems; i++)
            if (plan->items[i].start <= k && k <= plan->items[i].end)
                sum += plan->items[i].size;
        if (sum > plan->lower_bound_bytes)
            plan->lower_bound_bytes = sum;
    }
    switch (algo) {
    case TTH_MEMPLAN_GREEDY_BY_SIZE: rc = plan_greedy_by_size(plan); break;
    default:
        tth_mem_plan_clear(plan);
        return tth_diag_set(diag, TTH_EUNSUPPORTED, "memplan", "unknown planning algorithm %d",
                            (int)algo);
    }
    if (rc) {
        tth_mem_plan_clear(plan);
        return tth_diag_set(diag, TTH_ENOMEM, "memplan", "out of memory");
    }
    return 0;
}

void tth_mem_plan_clear(tth_mem_plan *plan)
{
    if (!plan)
        return;
    free(plan->items);
    memset(plan, 0, sizeof *plan);
}

static const char *algo_name(tth_memplan_algo a)
{
    return a == TTH_MEMPLAN_GREEDY_BY_SIZE ? "greedy-by-size" : "unknown";
}

json_t *tth_mem_plan_summary(const tth_mem_plan *plan)
{
    return json_pack("{s:s, s:I, s:I, s:I, s:I, s:I}", "algorithm", algo_name(plan->algo),
                     "alignment", (json_int_t)plan->alignment,
                     "workspace_bytes", (json_int_t)plan->workspace_bytes,
                     "total_bytes", (json_int_t)plan->total_bytes,
                     "lower_bound_bytes", (json_int_t)plan->lower_bound_bytes,
                     "buffers", (json_int_t)plan->nitems);
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
