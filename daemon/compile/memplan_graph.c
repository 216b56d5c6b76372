/* memplan_graph.c: the conflict graph of the planned buffers and first-fit placement in a given
 * order. Requires: items with lifetimes (memplan.c). Two items conflict when their lifetimes
 * [start, end] intersect; the graph is built by one sweep over the items by start, in time
 * O(n log n + edges). */
#include <stdlib.h>
#include <string.h>

#include "memplan_internal.h"

static int cmp_by_start(const void *pa, const void *pb, void *ctx)
{
    const tth_mem_item *sort_items = ctx;
    uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
    int64_t sa = sort_items[a].start, sb = sort_items[b].start;
    if (sa != sb)
        return sa < sb ? -1 : 1;
    return a < b ? -1 : a > b;
}

/* One sweep: for each item by start, the items still live conflict with it. fill = 0 counts
 * degrees into deg; fill = 1 writes neighbours at pos. */
static void sweep(const tth_mem_item *items, const uint32_t *byst, size_t n, size_t *deg,
                 uint32_t *adj, size_t *pos, uint32_t *active)
{
    size_t na = 0;
    for (size_t k = 0; k < n; k++) {
        uint32_t i = byst[k];
        size_t w = 0;
        for (size_t a = 0; a < na; a++)
            if (items[active[a]].end >= items[i].start)
                active[w++] = active[a];
        na = w;
        for (size_t a = 0; a < na; a++) {
            uint32_t j = active[a];
            if (adj) {
                adj[pos[i]++] = j;
                adj[pos[j]++] = i;
            } else {
                deg[i]++;
                deg[j]++;
            }
        }
        active[na++] = i;
    }
}

int tth__mp_graph_build(const tth_mem_item *items, size_t n, tth__mp_graph *g)
{
    memset(g, 0, sizeof *g);
    g->n = n;
    g->first = calloc(n + 1, sizeof *g->first);
    uint32_t *byst = malloc((n ? n : 1) * sizeof *byst);
    uint32_t *active = malloc((n ? n : 1) * sizeof *active);
    size_t *deg = calloc(n ? n : 1, sizeof *deg);
    size_t *pos = calloc(n ? n : 1, sizeof *pos);
    int rc = 0;
    if (!g->first || !byst || !active || !deg || !pos) {
        rc = TTH_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        byst[i] = (uint32_t)i;
    qsort_r(byst, n, sizeof *byst, cmp_by_start, (void *)items);
    sweep(items, byst, n, deg, NULL, NULL, active);
    for (size_t i = 0; i < n; i++)
        g->first[i + 1] = g->first[i] + deg[i];
    g->nedges = g->first[n] / 2;
    g->adj = malloc((g->first[n] ? g->first[n] : 1) * sizeof *g->adj);
    if (!g->adj) {
        rc = TTH_ENOMEM;
        goto done;
    }
    memcpy(pos, g->first, n * sizeof *pos);
    sweep(items, byst, n, NULL, g->adj, pos, active);
done:
    free(byst);
    free(active);
    free(deg);
    free(pos);
    if (rc)
        tth__mp_graph_free(g);
    return rc;
}

void tth__mp_graph_free(tth__mp_graph *g)
{
    free(g->first);
    free(g->adj);
    memset(g, 0, sizeof *g);
}

int tth__mp_placer_init(tth__mp_placer *p, const tth_mem_item *items, const tth__mp_graph *g)
{
    size_t maxdeg = 0;
    for (size_t i = 0; i < g->n; i++)
        if (g->first[i + 1] - g->first[i] > maxdeg)
            maxdeg = g->first[i + 1] - g->first[i];
    p->items = items;
    p->g = g;
    p->span = malloc((2 * maxdeg + 2) * sizeof *p->span);
    return p->span ? 0 : TTH_ENOMEM;
}

void tth__mp_placer_free(tth__mp_placer *p)
{
    free(p->span);
    p->span = NULL;
}

static int cmp_span(const void *pa, const void *pb)
{
    const int64_t *a = pa, *b = pb;
    if (a[0] != b[0])
        return a[0] < b[0] ? -1 : 1;
    return a[1] < b[1] ? -1 : a[1] > b[1];
}

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

size_t tth__mp_place(tth__mp_placer *p, const uint32_t *order, int64_t *off, size_t cutoff)
{
    const tth__mp_graph *g = p->g;
    const tth_mem_item *items = p->items;
    for (size_t i = 0; i < g->n; i++)
        off[i] = -1;
    size_t top = 0;
    for (size_t k = 0; k < g->n; k++) {
        uint32_t i = order[k];
        size_t ns = 0;
        for (size_t e = g->first[i]; e < g->first[i + 1]; e++) {
            uint32_t j = g->adj[e];
            if (off[j] < 0)
                continue;
            p->span[2 * ns] = off[j];
            p->span[2 * ns + 1] = off[j] + (int64_t)items[j].size;
            ns++;
        }
        if (ns < 16) { /* insertion sort: neighbours are few in most graphs */
            for (size_t a = 1; a < ns; a++)
                for (size_t b = a; b > 0 && cmp_span(&p->span[2 * (b - 1)], &p->span[2 * b]) > 0; b--) {
                    int64_t lo = p->span[2 * b], hi = p->span[2 * b + 1];
                    p->span[2 * b] = p->span[2 * (b - 1)];
                    p->span[2 * b + 1] = p->span[2 * (b - 1) + 1];
                    p->span[2 * (b - 1)] = lo;
                    p->span[2 * (b - 1) + 1] = hi;
                }
        } else {
            qsort(p->span, ns, 2 * sizeof *p->span, cmp_span);
        }
        size_t cand = 0, size = items[i].size, al = items[i].align;
        for (size_t s = 0; s < ns; s++) {
            size_t lo = (size_t)p->span[2 * s], hi = (size_t)p->span[2 * s + 1];
            if (cand + size <= lo)
                break; /* fits in the gap before this one */
            if (hi > cand)
                cand = round_up(hi, al);
        }
        off[i] = (int64_t)cand;
        if (cand + size > top) {
            top = cand + size;
            if (top > cutoff)
                return SIZE_MAX;
        }
    }
    return top;
}
