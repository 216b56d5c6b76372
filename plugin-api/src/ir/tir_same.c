/* tir_same.c: whether two PrimFuncs run the same code on different data (tth/tir.h,
 * tth_tir_func_same_code; docs/tir.md, "Functions with the same code"). One walk serves both the
 * hash and the comparison: with b NULL it only hashes a. Variables are matched where they are
 * bound, buffers where they are first used; a data buffer (a large constant, a LOCAL buffer with a
 * planned workspace offset) matches any buffer of its scope, dtype and shape, and the pairs are
 * what a caller passes to the shared code. */
#include "ir_private.h"

#include <stdlib.h>
#include <string.h>

/* An open-addressing map from a TIR id to a value (index or id). */
typedef struct idmap {
    uint32_t *key, *val;
    uint8_t *used;
    size_t cap, n;
} idmap;

static void idmap_free(idmap *m)
{
    free(m->key);
    free(m->val);
    free(m->used);
    memset(m, 0, sizeof *m);
}

static int idmap_put(idmap *m, uint32_t k, uint32_t v);

static int idmap_grow(idmap *m)
{
    idmap big = {0};
    big.cap = m->cap ? 2 * m->cap : 64;
    big.key = malloc(big.cap * sizeof *big.key);
    big.val = malloc(big.cap * sizeof *big.val);
    big.used = calloc(big.cap, 1);
    if (!big.key || !big.val || !big.used) {
        idmap_free(&big);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++)
        if (m->used[i] && idmap_put(&big, m->key[i], m->val[i]) < 0) {
            idmap_free(&big);
            return -1;
        }
    idmap_free(m);
    *m = big;
    return 0;
}

static size_t slot_of(const idmap *m, uint32_t k)
{
    size_t i = (size_t)(k * 2654435761u) & (m->cap - 1);
    while (m->used[i] && m->key[i] != k)
        i = (i + 1) & (m->cap - 1);
    return i;
}

/* 0 on success, -1 out of memory; replaces an existing value */
static int idmap_put(idmap *m, uint32_t k, uint32_t v)
{
    if ((m->n + 1) * 2 > m->cap && idmap_grow(m) < 0)
        return -1;
    size_t i = slot_of(m, k);
    if (!m->used[i]) {
        m->used[i] = 1;
        m->key[i] = k;
        m->n++;
    }
    m->val[i] = v;
    return 0;
}

/* 1 and *v when present */
static int idmap_get(const idmap *m, uint32_t k, uint32_t *v)
{
    if (!m->cap)
        return 0;
    size_t i = slot_of(m, k);
    if (!m->used[i])
        return 0;
    *v = m->val[i];
    return 1;
}

typedef struct walk {
    uint64_t h;
    size_t const_min;
    idmap vars;               /* a's var id -> b's var id (compare) or binding number (hash) */
    idmap bufs;               /* a's buffer id -> b's buffer id (compare) or first-use number */
    idmap rbufs;              /* b's buffer id -> a's buffer id (compare) */
    uint32_t nvars, nbufs;
    const tth_tbuffer **pairs;
    size_t max_pairs, npairs;
    int oom;                  /* out of memory */
    int overflow;             /* more pairs than max_pairs */
} walk;

static void mix(walk *w, uint64_t v)
{
    w->h ^= v + 0x9e3779b97f4a7c15ull + (w->h << 6) + (w->h >> 2);
}

static void mix_str(walk *w, const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; s && *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    mix(w, h);
}

static int is_data(const walk *w, const tth_tbuffer *b)
{
    if (b->scope == TTH_SCOPE_CONST)
        return tth_tbuffer_nbytes(b) >= w->const_min && b->name && *b->name;
    return b->scope == TTH_SCOPE_LOCAL && b->offset >= 0;
}

/* the buffer's type (and, for a buffer that is not data, what else tells it apart) */
static int buf_alike(const walk *w, const tth_tbuffer *a, const tth_tbuffer *b)
{
    if (a->scope != b->scope || a->dtype != b->dtype || a->rank != b->rank || a->align != b->align)
        return 0;
    for (int i = 0; i < a->rank; i++)
        if (a->shape[i] != b->shape[i])
            return 0;
    if (is_data(w, a) != is_data(w, b))
        return 0;
    if (is_data(w, a))
        return 1;
    if (a->scope == TTH_SCOPE_CONST) {
        size_t n = tth_tbuffer_nbytes(a);
        return a->data && b->data && a->data->data && b->data->data && a->data->nbytes >= n &&
               b->data->nbytes >= n && (a->data->data == b->data->data || memcmp(a->data->data, b->data->data, n) == 0);
    }
    if (a->scope == TTH_SCOPE_WORKSPACE)
        return a->offset == b->offset;
    return 1;
}

static void hash_buf_type(walk *w, const tth_tbuffer *a)
{
    mix(w, ((uint64_t)a->scope << 32) | ((uint64_t)a->dtype << 8) | (uint64_t)a->rank);
    mix(w, a->align);
    for (int i = 0; i < a->rank; i++)
        mix(w, (uint64_t)a->shape[i]);
    if (is_data(w, a)) {
        mix(w, 0xda7a);
    } else if (a->scope == TTH_SCOPE_CONST && a->data && a->data->data) {
        size_t n = tth_tbuffer_nbytes(a);
        uint64_t h = 1469598103934665603ull;
        const unsigned char *p = a->data->data;
        for (size_t i = 0; i < n && i < a->data->nbytes; i++)
            h = (h ^ p[i]) * 1099511628211ull;
        mix(w, h);
    } else if (a->scope == TTH_SCOPE_WORKSPACE) {
        mix(w, (uint64_t)a->offset);
    }
}

/* a buffer used in a (and b): 1 when they correspond */
static int buf_use(walk *w, const tth_tbuffer *a, const tth_tbuffer *b, int compare)
{
    if (!a || (compare && !b))
        return 0;
    uint32_t v;
    if (!compare) {
        if (idmap_get(&w->bufs, a->id, &v)) {
            mix(w, v);
            return 1;
        }
        if (idmap_put(&w->bufs, a->id, w->nbufs) < 0) {
            w->oom = 1;
            return 0;
        }
        mix(w, w->nbufs++);
        hash_buf_type(w, a);
        return 1;
    }
    if (idmap_get(&w->bufs, a->id, &v))
        return v == b->id;
    if (idmap_get(&w->rbufs, b->id, &v))
        return 0; /* b's buffer already stands for another of a's */
    if (!buf_alike(w, a, b))
        return 0;
    if (idmap_put(&w->bufs, a->id, b->id) < 0 || idmap_put(&w->rbufs, b->id, a->id) < 0) {
        w->oom = 1;
        return 0;
    }
    if (is_data(w, a)) {
        if (w->npairs >= w->max_pairs) {
            w->overflow = 1;
            return 0;
        }
        w->pairs[2 * w->npairs] = a;
        w->pairs[2 * w->npairs + 1] = b;
        w->npairs++;
    }
    return 1;
}

/* a variable bound here (loop, let) */
static int var_bind(walk *w, const tth_tvar *a, const tth_tvar *b, int compare)
{
    if (!a || (compare && !b))
        return 0;
    if (a->dtype != (compare ? b->dtype : a->dtype) || a->lanes != (compare ? b->lanes : a->lanes))
        return 0;
    if (!compare)
        mix(w, ((uint64_t)a->dtype << 32) | (uint32_t)a->lanes);
    if (idmap_put(&w->vars, a->id, compare ? b->id : w->nvars++) < 0) {
        w->oom = 1;
        return 0;
    }
    return 1;
}

static int var_use(walk *w, const tth_tvar *a, const tth_tvar *b, int compare)
{
    uint32_t v;
    if (!a || (compare && !b))
        return 0;
    if (!idmap_get(&w->vars, a->id, &v)) {
        /* free in this function (tth_tir_verify refuses it): only the same variable matches */
        if (!compare)
            mix(w, 0xf7ee0000ull ^ a->id);
        return !compare || a == b;
    }
    if (!compare)
        mix(w, v);
    return !compare || v == b->id;
}

static int expr(walk *w, const tth_texpr *a, const tth_texpr *b, int compare);

static int exprs(walk *w, const tth_texpr *const *a, const tth_texpr *const *b, size_t n, int compare)
{
    for (size_t i = 0; i < n; i++)
        if (!expr(w, a[i], compare ? b[i] : NULL, compare))
            return 0;
    return 1;
}

static int expr(walk *w, const tth_texpr *a, const tth_texpr *b, int compare)
{
    if (!a || (compare && !b))
        return !a && (!compare || !b);
    if (compare && (a->kind != b->kind || a->dtype != b->dtype || a->lanes != b->lanes))
        return 0;
    if (!compare)
        mix(w, ((uint64_t)a->kind << 40) | ((uint64_t)a->dtype << 20) | (uint32_t)a->lanes);
    switch (a->kind) {
    case TTH_TEXPR_INT:
        if (!compare)
            mix(w, (uint64_t)a->u.i);
        return !compare || a->u.i == b->u.i;
    case TTH_TEXPR_FLOAT: {
        uint64_t x, y = 0;
        memcpy(&x, &a->u.f, sizeof x);
        if (compare)
            memcpy(&y, &b->u.f, sizeof y);
        if (!compare)
            mix(w, x);
        return !compare || x == y;
    }
    case TTH_TEXPR_VAR:
        return var_use(w, a->u.var, compare ? b->u.var : NULL, compare);
    case TTH_TEXPR_LOAD:
    case TTH_TEXPR_ADDRESS_OF:
        if (!compare)
            mix(w, a->u.load.align);
        else if (a->u.load.align != b->u.load.align)
            return 0;
        return buf_use(w, a->u.load.buf, compare ? b->u.load.buf : NULL, compare) &&
               expr(w, a->u.load.index, compare ? b->u.load.index : NULL, compare);
    case TTH_TEXPR_BINARY:
        if (!compare)
            mix(w, (uint64_t)a->u.bin.op);
        else if (a->u.bin.op != b->u.bin.op)
            return 0;
        break;
    case TTH_TEXPR_UNARY:
        if (!compare)
            mix(w, (uint64_t)a->u.un.op);
        else if (a->u.un.op != b->u.un.op)
            return 0;
        break;
    case TTH_TEXPR_INTRIN:
        if (!compare)
            mix(w, (uint64_t)a->u.intrin.op);
        else if (a->u.intrin.op != b->u.intrin.op)
            return 0;
        for (int i = 0; compare && i < 3; i++)
            if (!a->u.intrin.args[i] != !b->u.intrin.args[i])
                return 0;
        break;
    case TTH_TEXPR_CALL_EXTERN:
        if (!compare)
            mix_str(w, a->u.call.name);
        else if (a->u.call.nargs != b->u.call.nargs || strcmp(a->u.call.name ? a->u.call.name : "",
                                                              b->u.call.name ? b->u.call.name : "") != 0)
            return 0;
        break;
    case TTH_TEXPR_RAMP:
        if (!compare)
            mix(w, (uint64_t)a->u.ramp.stride);
        else if (a->u.ramp.stride != b->u.ramp.stride)
            return 0;
        break;
    case TTH_TEXPR_SELECT:
    case TTH_TEXPR_CAST:
    case TTH_TEXPR_REINTERPRET:
    case TTH_TEXPR_BROADCAST:
        break;
    default:
        return 0;
    }
    tth_texpr *sa[3], *sb[3];
    tth_texpr *const *ka, *const *kb = NULL;
    size_t na = tth_tir_expr_children(a, sa, &ka);
    if (compare && tth_tir_expr_children(b, sb, &kb) != na)
        return 0;
    return exprs(w, (const tth_texpr *const *)ka, (const tth_texpr *const *)kb, na, compare);
}

static int stmt(walk *w, const tth_tstmt *a, const tth_tstmt *b, int compare)
{
    if (!a || (compare && !b))
        return !a && (!compare || !b);
    if (compare && a->kind != b->kind)
        return 0;
    if (!compare)
        mix(w, 0x5700 + (uint64_t)a->kind);
    switch (a->kind) {
    case TTH_TSTMT_SEQ:
        if (compare && a->u.seq.n != b->u.seq.n)
            return 0;
        if (!compare)
            mix(w, a->u.seq.n);
        for (size_t i = 0; i < a->u.seq.n; i++)
            if (!stmt(w, a->u.seq.stmts[i], compare ? b->u.seq.stmts[i] : NULL, compare))
                return 0;
        return 1;
    case TTH_TSTMT_FOR:
        if (!compare)
            mix(w, (uint64_t)a->u.loop.loop);
        else if (a->u.loop.loop != b->u.loop.loop)
            return 0;
        return expr(w, a->u.loop.min, compare ? b->u.loop.min : NULL, compare) &&
               expr(w, a->u.loop.extent, compare ? b->u.loop.extent : NULL, compare) &&
               var_bind(w, a->u.loop.var, compare ? b->u.loop.var : NULL, compare) &&
               stmt(w, a->u.loop.body, compare ? b->u.loop.body : NULL, compare);
    case TTH_TSTMT_STORE:
        if (!compare)
            mix(w, a->u.store.align);
        else if (a->u.store.align != b->u.store.align)
            return 0;
        return buf_use(w, a->u.store.buf, compare ? b->u.store.buf : NULL, compare) &&
               expr(w, a->u.store.index, compare ? b->u.store.index : NULL, compare) &&
               expr(w, a->u.store.value, compare ? b->u.store.value : NULL, compare);
    case TTH_TSTMT_ALLOCATE:
        return buf_use(w, a->u.alloc.buf, compare ? b->u.alloc.buf : NULL, compare) &&
               stmt(w, a->u.alloc.body, compare ? b->u.alloc.body : NULL, compare);
    case TTH_TSTMT_IF:
        return expr(w, a->u.cond.cond, compare ? b->u.cond.cond : NULL, compare) &&
               stmt(w, a->u.cond.then_s, compare ? b->u.cond.then_s : NULL, compare) &&
               stmt(w, a->u.cond.else_s, compare ? b->u.cond.else_s : NULL, compare);
    case TTH_TSTMT_LET:
        return expr(w, a->u.let.value, compare ? b->u.let.value : NULL, compare) &&
               var_bind(w, a->u.let.var, compare ? b->u.let.var : NULL, compare) &&
               stmt(w, a->u.let.body, compare ? b->u.let.body : NULL, compare);
    case TTH_TSTMT_EVALUATE:
        return expr(w, a->u.eval.value, compare ? b->u.eval.value : NULL, compare);
    case TTH_TSTMT_CALL_FUNC:
        if (!compare)
            mix_str(w, a->u.call.func);
        else if (a->u.call.nargs != b->u.call.nargs || strcmp(a->u.call.func, b->u.call.func) != 0)
            return 0;
        for (size_t i = 0; i < a->u.call.nargs; i++)
            if (!buf_use(w, a->u.call.args[i], compare ? b->u.call.args[i] : NULL, compare))
                return 0;
        return 1;
    }
    return 0;
}

/* both functions' signatures, then their bodies */
static int func(walk *w, const tth_prim_func *a, const tth_prim_func *b, int compare)
{
    if (compare && (a->nparams != b->nparams ||
                    strcmp(a->target_kind ? a->target_kind : "", b->target_kind ? b->target_kind : "") != 0))
        return 0;
    if (!compare) {
        mix_str(w, a->target_kind);
        mix(w, a->nparams);
    }
    for (size_t i = 0; i < a->nparams; i++)
        if (!buf_use(w, a->params[i], compare ? b->params[i] : NULL, compare))
            return 0;
    return stmt(w, a->body, compare ? b->body : NULL, compare);
}

uint64_t tth_tir_func_code_hash(const tth_prim_func *f, size_t const_min)
{
    if (!f)
        return 0;
    walk w;
    memset(&w, 0, sizeof w);
    w.h = 0x7468;
    w.const_min = const_min;
    func(&w, f, NULL, 0);
    uint64_t h = w.oom ? 0 : w.h;
    idmap_free(&w.vars);
    idmap_free(&w.bufs);
    return h;
}

int tth_tir_func_same_code(const tth_prim_func *a, const tth_prim_func *b, size_t const_min,
                           const tth_tbuffer **pairs, size_t max_pairs, size_t *npairs)
{
    if (npairs)
        *npairs = 0;
    if (!a || !b || (max_pairs && !pairs))
        return TTH_EINVAL;
    walk w;
    memset(&w, 0, sizeof w);
    w.const_min = const_min;
    w.pairs = pairs;
    w.max_pairs = max_pairs;
    int same = func(&w, a, b, 1);
    if (npairs)
        *npairs = w.npairs;
    idmap_free(&w.vars);
    idmap_free(&w.bufs);
    idmap_free(&w.rbufs);
    return w.oom ? TTH_ENOMEM : w.overflow ? TTH_ELIMIT : same;
}

/* ---- classes of a module (tth_tir_share_plan) ---- */

/* an item's sort key and index: sorted by key, then index (a deterministic order) */
typedef struct keyed {
    uint64_t key;
    size_t i;
} keyed;

static int keyed_cmp(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* one side of the pairs tth_tir_func_same_code gave, copied */
static int keep_side(tth_tir_share *s, const tth_tbuffer **pairs, size_t np, int side)
{
    s->data = np ? malloc(np * sizeof *s->data) : NULL;
    if (np && !s->data)
        return TTH_ENOMEM;
    for (size_t k = 0; k < np; k++)
        s->data[k] = pairs[2 * k + side];
    s->ndata = np;
    return 0;
}

void tth_tir_share_free(tth_tir_share *share, size_t n)
{
    for (size_t i = 0; share && i < n; i++)
        free(share[i].data);
    free(share);
}

int tth_tir_balance(const size_t *weight, size_t n, size_t nbins, size_t *load, unsigned *bin)
{
    if (nbins == 0)
        nbins = 1;
    keyed *order = malloc((n ? n : 1) * sizeof *order);
    size_t *own = load ? NULL : calloc(nbins, sizeof *own);
    if (!order || (!load && !own)) {
        free(order);
        free(own);
        return TTH_ENOMEM;
    }
    if (!load)
        load = own;
    for (size_t i = 0; i < n; i++) /* the heaviest first: the key falls as the weight grows */
        order[i] = (keyed){UINT64_MAX - (uint64_t)weight[i], i};
    qsort(order, n, sizeof *order, keyed_cmp);
    for (size_t k = 0; k < n; k++) {
        size_t least = 0;
        for (size_t p = 1; p < nbins; p++)
            if (load[p] < load[least])
                least = p;
        bin[order[k].i] = (unsigned)least;
        load[least] += weight[order[k].i];
    }
    free(order);
    free(own);
    return 0;
}

int tth_tir_share_plan(const tth_tir_module *mod, const tth_prim_func *skip, size_t const_min, size_t max_data,
                       tth_tir_share **share, size_t *bodies)
{
    *share = NULL;
    *bodies = 0;
    if (!mod)
        return TTH_EINVAL;
    size_t n = mod->nfuncs;
    tth_tir_share *f = calloc(n ? n : 1, sizeof *f);
    keyed *hs = calloc(n ? n : 1, sizeof *hs);
    const tth_tbuffer **pairs = malloc(2 * (max_data ? max_data : 1) * sizeof *pairs);
    size_t *reps = malloc((n ? n : 1) * sizeof *reps);
    int rc = f && hs && pairs && reps ? 0 : TTH_ENOMEM;
    size_t nh = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        const tth_prim_func *fn = mod->funcs[i];
        f[i].rep = i;
        f[i].members = 1;
        if (fn != skip && fn->body && !(fn->attrs && json_is_true(json_object_get(fn->attrs, "extern")))) {
            hs[nh].key = tth_tir_func_code_hash(fn, const_min);
            hs[nh++].i = i;
        }
    }
    if (!rc)
        qsort(hs, nh, sizeof *hs, keyed_cmp);
    for (size_t a = 0; !rc && a < nh;) {
        size_t b = a;
        while (b < nh && hs[b].key == hs[a].key)
            b++;
        size_t nr = 0;
        for (size_t j = a; !rc && j < b; j++) {
            size_t i = hs[j].i, np = 0;
            int same = 0;
            for (size_t r = 0; r < nr && !same; r++) {
                same = tth_tir_func_same_code(mod->funcs[reps[r]], mod->funcs[i], const_min, pairs, max_data, &np);
                if (same == 1) {
                    tth_tir_share *first = &f[reps[r]];
                    f[i].rep = reps[r];
                    /* the first function's data buffers are the pairs' other side, in the same
                     * order: taken at its first match (a function alone needs none) */
                    if (first->members++ == 1)
                        rc = keep_side(first, pairs, np, 0);
                    if (!rc)
                        rc = keep_side(&f[i], pairs, np, 1);
                } else if (same == TTH_ENOMEM) {
                    rc = TTH_ENOMEM;
                } else {
                    same = 0; /* different, or more data buffers than a shared body takes */
                }
            }
            if (!rc && !same)
                reps[nr++] = i;
        }
        a = b;
    }
    free(hs);
    free(pairs);
    free(reps);
    if (rc) {
        tth_tir_share_free(f, n);
        return rc;
    }
    for (size_t i = 0; i < n; i++)
        *bodies += f[i].rep == i;
    *share = f;
    return 0;
}
