/* memplan_greedy.c: the orders of the greedy planners. Requires the conflict graph
 * (memplan_graph.c); placement is first fit (tth__mp_place).
 *   greedy-by-size       largest first (ties: earlier start, then first use)
 *   greedy-by-conflicts  most conflicting bytes first (its size plus every neighbour's), then
 *                        largest: the buffers that constrain the most are placed while the
 *                        workspace is still empty
 *   greedy-by-start      earliest start first, longer lifetime, then larger, first: a linear scan
 *                        over time, which is optimal when lifetimes nest like a chain's */
#include <stdlib.h>

#include "memplan_internal.h"

typedef struct order_ctx {
    const tth_mem_item *items;
    const size_t *key;       /* greedy-by-conflicts: conflicting bytes */
    tth_memplan_algo algo;
} order_ctx;

static int cmp_u64_desc(size_t a, size_t b) { return a > b ? -1 : a < b; }
static int cmp_i64_asc(int64_t a, int64_t b) { return a < b ? -1 : a > b; }

static int cmp_order(const void *pa, const void *pb, void *vctx)
{
    const order_ctx *c = vctx;
    uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
    const tth_mem_item *x = &c->items[a], *y = &c->items[b];
    int r = 0;
    switch (c->algo) {
    case TTH_MEMPLAN_GREEDY_BY_CONFLICTS:
        r = cmp_u64_desc(c->key[a], c->key[b]);
        if (!r)
            r = cmp_u64_desc(x->size, y->size);
        break;
    case TTH_MEMPLAN_GREEDY_BY_START:
        r = cmp_i64_asc(x->start, y->start);
        if (!r)
            r = cmp_i64_asc(y->end, x->end);
        if (!r)
            r = cmp_u64_desc(x->size, y->size);
        break;
    default: /* greedy-by-size */
        r = cmp_u64_desc(x->size, y->size);
        if (!r)
            r = cmp_i64_asc(x->start, y->start);
        break;
    }
    return r ? r : (a < b ? -1 : a > b);
}

void tth__mp_order_greedy(const tth_mem_item *items, const tth__mp_graph *g, tth_memplan_algo algo,
                          uint32_t *order)
{
    size_t *key = NULL;
    if (algo == TTH_MEMPLAN_GREEDY_BY_CONFLICTS)
        key = malloc((g->n ? g->n : 1) * sizeof *key);
    if (algo == TTH_MEMPLAN_GREEDY_BY_CONFLICTS && !key)
        algo = TTH_MEMPLAN_GREEDY_BY_SIZE; /* out of memory: still a valid order */
    for (size_t i = 0; i < g->n; i++) {
        order[i] = (uint32_t)i;
        if (key) {
            key[i] = items[i].size;
            for (size_t e = g->first[i]; e < g->first[i + 1]; e++)
                key[i] += items[g->adj[e]].size;
        }
    }
    order_ctx c = {.items = items, .key = key, .algo = algo};
    qsort_r(order, g->n, sizeof *order, cmp_order, &c);
    free(key);
}
