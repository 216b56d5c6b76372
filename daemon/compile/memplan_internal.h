/* memplan_internal.h: what the memory planner's files share (memplan.c drives; the conflict graph
 * and first-fit placement in memplan_graph.c; the greedy orders in memplan_greedy.c; the search
 * in memplan_search.c). Every algorithm is an order of the buffers: placing them one by one in
 * that order, each at the lowest aligned offset free of the buffers it conflicts with, gives the
 * plan, so algorithms differ only in the order they choose. */
#ifndef TTH_MEMPLAN_INTERNAL_H
#define TTH_MEMPLAN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "compile_internal.h"

/* The conflict graph in compressed rows: the neighbours of item i are
 * adj[first[i] .. first[i + 1] - 1], every item live at some statement where i is. */
typedef struct tth__mp_graph {
    size_t n;
    size_t *first;           /* n + 1 */
    uint32_t *adj;
    size_t nedges;           /* undirected edges (adj holds each twice) */
} tth__mp_graph;

/* Requires lifetimes (start <= end) on every item. Returns 0 or TTH_ENOMEM. */
int tth__mp_graph_build(const tth_mem_item *items, size_t n, tth__mp_graph *g);
void tth__mp_graph_free(tth__mp_graph *g);

/* Scratch space for tth__mp_place (one per planning run). */
typedef struct tth__mp_placer {
    const tth_mem_item *items;
    const tth__mp_graph *g;
    int64_t *span;           /* 2 * max degree: (lo, hi) pairs of placed neighbours */
} tth__mp_placer;

int tth__mp_placer_init(tth__mp_placer *p, const tth_mem_item *items, const tth__mp_graph *g);
void tth__mp_placer_free(tth__mp_placer *p);

/* Place the items in `order` (a permutation of 0..n-1), each at the lowest offset that is a
 * multiple of its alignment and overlaps no conflicting item already placed (first fit over the
 * gaps). Writes off[i] for every item; returns the workspace size (the highest end). Stops early
 * and returns SIZE_MAX once the size would exceed `cutoff` (offsets then incomplete). */
size_t tth__mp_place(tth__mp_placer *p, const uint32_t *order, int64_t *off, size_t cutoff);

/* The order of a greedy algorithm (GREEDY_BY_SIZE, GREEDY_BY_CONFLICTS, GREEDY_BY_START). */
void tth__mp_order_greedy(const tth_mem_item *items, const tth__mp_graph *g, tth_memplan_algo algo,
                          uint32_t *order);

/* Improve `order` (in: a starting order, out: the best found) by a seeded local search; off gets
 * that order's placement; *iterations the placements tried. Bounded by a number of iterations
 * scaled to the graph's size; stops at `lower_bound`. Returns the best size or SIZE_MAX on OOM. */
size_t tth__mp_search(tth__mp_placer *p, uint32_t *order, int64_t *off, size_t lower_bound,
                      uint32_t *iterations);

#endif
