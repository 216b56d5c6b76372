/* consts.c: equal constants become one (docs/artifact.md, "Constants bound at run time"). The
 * default lowering makes a constant buffer per function: a weight that several functions read
 * (a recurrent layer's R, read by every time step), or that each packs the same way, is then one
 * buffer per function, each stored in the artifact and read from its own memory at run time. A
 * 2-layer LSTM of 100 steps carried 200 copies of its 1 MB packed weights (a 210 MB parameters
 * file for a 3.7 MB model), and every step read its copy from DRAM. Here every load of a
 * constant of the default lowering's functions that has the same dtype, shape and bytes as an
 * earlier one (by buffer id, so the choice is deterministic) reads that earlier buffer instead.
 * Functions that plugins made are left alone: their constants may be named for their runtime. */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "compile_internal.h"

typedef struct cent {
    tth_tbuffer *buf;
    uint64_t hash;
    tth_tbuffer *canon;
} cent;

typedef struct dedup {
    cent *v;
    size_t n, cap;
    int oom;
    int rewrite;
} dedup;

static cent *find(dedup *d, const tth_tbuffer *b)
{
    for (size_t lo = 0, hi = d->n; lo < hi;) { /* v is sorted by buffer id once collected */
        size_t mid = (lo + hi) / 2;
        if (d->v[mid].buf->id == b->id)
            return &d->v[mid];
        if (d->v[mid].buf->id < b->id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static int visit(void *ctx, const tth_texpr *e)
{
    dedup *d = ctx;
    if ((e->kind != TTH_TEXPR_LOAD && e->kind != TTH_TEXPR_ADDRESS_OF) || e->u.load.buf->scope != TTH_SCOPE_CONST ||
        !e->u.load.buf->data)
        return 0;
    if (d->rewrite) {
        cent *c = find(d, e->u.load.buf);
        if (c && c->canon != c->buf)
            ((tth_texpr *)e)->u.load.buf = c->canon; /* nodes of our own module */
        return 0;
    }
    if (d->n && d->v[d->n - 1].buf == e->u.load.buf)
        return 0; /* the same buffer again: repeats are dropped after sorting */
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 64;
        cent *nv = realloc(d->v, cap * sizeof *nv);
        if (!nv) {
            d->oom = 1;
            return 1;
        }
        d->v = nv;
        d->cap = cap;
    }
    d->v[d->n++] = (cent){e->u.load.buf, 0, NULL};
    return 0;
}

static int by_id(const void *a, const void *b)
{
    uint32_t x = ((const cent *)a)->buf->id, y = ((const cent *)b)->buf->id;
    return x < y ? -1 : x > y;
}

/* by hash, then id: equal constants are neighbours, the earliest first */
static int by_hash(const void *a, const void *b)
{
    const cent *x = a, *y = b;
    if (x->hash != y->hash)
        return x->hash < y->hash ? -1 : 1;
    return x->buf->id < y->buf->id ? -1 : x->buf->id > y->buf->id;
}

static int same(const tth_tbuffer *a, const tth_tbuffer *b)
{
    if (a->dtype != b->dtype || a->rank != b->rank || a->data->nbytes != b->data->nbytes)
        return 0;
    for (int i = 0; i < a->rank; i++)
        if (a->shape[i] != b->shape[i])
            return 0;
    return a->data == b->data || memcmp(a->data->data, b->data->data, a->data->nbytes) == 0;
}

static int is_default(const tth_prim_func *f)
{
    const char *o = json_string_value(json_object_get(f->attrs, "origin"));
    return f->body && o && strcmp(o, "default") == 0;
}

int tth_dedup_constants(tth_tir_module *m, size_t *merged, tth_diag *diag)
{
    dedup d = {0};
    tth_tir_visitor v = {.expr = visit, .ctx = &d};
    *merged = 0;
    for (size_t i = 0; i < m->nfuncs && !d.oom; i++)
        if (is_default(m->funcs[i]))
            tth_tir_walk(m->funcs[i]->body, &v);
    if (d.oom) {
        free(d.v);
        return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
    }
    if (d.n)
        qsort(d.v, d.n, sizeof *d.v, by_id);
    size_t u = 0;
    for (size_t i = 0; i < d.n; i++)
        if (!u || d.v[u - 1].buf != d.v[i].buf)
            d.v[u++] = d.v[i];
    d.n = u;
    for (size_t i = 0; i < d.n; i++)
        d.v[i].hash = XXH3_64bits(d.v[i].buf->data->data, d.v[i].buf->data->nbytes);
    if (d.n)
        qsort(d.v, d.n, sizeof *d.v, by_hash);
    for (size_t i = 0; i < d.n; i++) {
        d.v[i].canon = d.v[i].buf;
        for (size_t j = i; j-- > 0 && d.v[j].hash == d.v[i].hash;)
            if (d.v[j].canon == d.v[j].buf && same(d.v[j].buf, d.v[i].buf)) {
                d.v[i].canon = d.v[j].buf;
                ++*merged;
                break;
            }
    }
    if (d.n)
        qsort(d.v, d.n, sizeof *d.v, by_id);
    d.rewrite = 1;
    for (size_t i = 0; i < m->nfuncs && *merged; i++)
        if (is_default(m->funcs[i]))
            tth_tir_walk(m->funcs[i]->body, &v);
    free(d.v);
    return 0;
}
