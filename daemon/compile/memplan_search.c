/* memplan_search.c: an improving search over the placement order (simulated annealing with
 * restarts). Requires the conflict graph and a starting order (memplan_greedy.c).
 *
 * A move swaps two buffers of the order, or moves one earlier; the new order is placed first fit
 * and kept when its workspace is at most the current one plus an annealing allowance that falls
 * to zero over the run; after a stretch without a new best the search restarts from the best.
 * The random numbers come from a fixed seed (xorshift64*), so the result is deterministic. The
 * number of iterations is bounded by a work budget divided by the graph's size (a placement
 * costs about n + edges), so planning time stays small for large models; it stops at once when
 * the lower bound is reached (no plan can do better). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "memplan_internal.h"

enum {
    SEARCH_WORK = 3000000,   /* neighbour visits in all (about 10 ms) */
    SEARCH_MAX_ITERS = 3000,
    SEARCH_RESTART = 200,    /* iterations without a new best before returning to it */
};
#define SEARCH_SEED 0x7474685f6d656d70ull /* "tth_memp" */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

static size_t rng_below(uint64_t *s, size_t n) { return (size_t)(rng_next(s) % n); }

size_t tth__mp_search(tth__mp_placer *p, uint32_t *order, int64_t *off, size_t lower_bound,
                      uint32_t *iterations)
{
    size_t n = p->g->n;
    *iterations = 0;
    size_t best = tth__mp_place(p, order, off, SIZE_MAX);
    if (n < 2 || best <= lower_bound)
        return best;
    uint32_t *cur = malloc(n * sizeof *cur);
    int64_t *tmp = malloc(n * sizeof *tmp);
    if (!cur || !tmp) {
        free(cur);
        free(tmp);
        return SIZE_MAX;
    }
    memcpy(cur, order, n * sizeof *cur);
    size_t work = n + 2 * p->g->nedges + 1;
    uint32_t iters = (uint32_t)(SEARCH_WORK / work);
    if (iters > SEARCH_MAX_ITERS)
        iters = SEARCH_MAX_ITERS;
    uint64_t seed = SEARCH_SEED;
    size_t now = best;
    double t0 = 0.02 * (double)best; /* a 2 % worse placement is kept with probability 1/e at first */
    uint32_t since_best = 0;
    uint32_t it = 0;
    for (; it < iters && best > lower_bound; it++) {
        size_t a = rng_below(&seed, n), b = rng_below(&seed, n);
        if (a == b)
            continue;
        int insert = rng_next(&seed) & 1;
        if (a > b) {
            size_t t = a;
            a = b;
            b = t;
        }
        /* apply the move: swap a and b, or move b to position a */
        uint32_t moved = cur[b];
        if (insert) {
            memmove(&cur[a + 1], &cur[a], (b - a) * sizeof *cur);
            cur[a] = moved;
        } else {
            cur[b] = cur[a];
            cur[a] = moved;
        }
        double temp = t0 * (1.0 - (double)it / iters);
        double u = ((double)(rng_next(&seed) >> 11) + 0.5) / 9007199254740992.0;
        double allow = temp > 0 ? -temp * log(u) : 0;
        size_t limit = now + (size_t)allow;
        size_t got = tth__mp_place(p, cur, tmp, limit);
        if (got != SIZE_MAX && got <= limit) {
            now = got;
            if (got < best) {
                best = got;
                memcpy(order, cur, n * sizeof *order);
                memcpy(off, tmp, n * sizeof *off);
                since_best = 0;
                continue;
            }
        } else { /* undo */
            if (insert) {
                memmove(&cur[a], &cur[a + 1], (b - a) * sizeof *cur);
                cur[b] = moved;
            } else {
                cur[a] = cur[b];
                cur[b] = moved;
            }
        }
        if (++since_best >= SEARCH_RESTART) {
            memcpy(cur, order, n * sizeof *cur);
            now = best;
            since_best = 0;
        }
    }
    *iterations = it;
    free(cur);
    free(tmp);
    return best;
}
