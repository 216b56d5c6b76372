/* tth_bind.c: the constants of a module compiled by the llvm or c kind for a hosted OS, bound at
 * run time from the artifact's parameters file instead of being copied into the code
 * (docs/artifact.md, "Constants bound at run time"). Built two ways:
 *
 * The artifact's copy, <model>_bind.c: the plugin puts the model's definitions in front of this
 * file (plugin-api/src/ir/binding.c), and every function here is static but the entry points:
 *   TTH_BIND_SLOTS       the slot table the generated code loads each constant's address from
 *   TTH_BIND_FLAG        non-zero once bound (defined by the generated code); the entry returns
 *                        TTH_BIND_UNBOUND until then
 *   TTH_BIND_STATUS_TEXT const char *(int32_t status): what the statuses below mean
 *   TTH_BIND_ENSURE      int32_t (void): what the entry calls while not bound; built with
 *                        TTH_BIND_EMBEDDED (the artifact's CMakeLists.txt links the parameters
 *                        file into the library as TTH_BIND_BLOB .. TTH_BIND_BLOB_END), it binds
 *                        them, else it returns TTH_BIND_UNBOUND
 *   TTH_BIND_CONSTANTS   int32_t (const void *const *data, const size_t *bytes, size_t n)
 *   TTH_BIND_PARAMETERS  int32_t (const void *params, size_t len)
 *   TTH_BIND_COUNT       how many constants (at least 1)
 *   TTH_BIND_UNBOUND     the entry's status while unbound
 *   tth_bind_names[], tth_bind_bytes[], tth_bind_align[]  each constant's parameter name, byte
 *                        length and the alignment the code loads it with (at most 64: the
 *                        parameters file places every tensor's data at a multiple of 64 bytes
 *                        from its start, so a file read to a 64-byte aligned address fits all);
 *                        the name is 0 for a derived constant
 *   TTH_BIND_NDERIVED, TTH_BIND_DERIVED_BYTES, tth_bind_derived[]  the derived constants
 *                        (docs/artifact.md, "Derived constants"): slots this source fills, when
 *                        the others are bound, with a transform of another slot, in a static
 *                        store of TTH_BIND_DERIVED_BYTES; the table (when there are any) holds
 *                        TTH_BIND_DERIVED_FIELDS numbers a slot: the slot, its source's slot, the
 *                        transform (TTH_BIND_DERIVE_*), the source's first two dimensions, the
 *                        byte offset in the store (a multiple of 64)
 * The artifact's copy has tth_params.h, the one reader of that file, inlined where it is included
 * below (docs/artifact.md, "The parameters file and its reader").
 *
 * The core, without a model's definitions (TTH_BIND_COUNT not defined): tth's build compiles it
 * once, and the llvm kind links it into the host libraries tthd builds for this machine, with the
 * model's tables and entry points emitted by the plugin (docs/artifact.md, "The host library").
 * Its functions tth__bind_* are hidden: each library has its own copy. */
#if defined(__linux__)
#define _DEFAULT_SOURCE /* madvise and MADV_HUGEPAGE under -std=c99 */
#include <sys/mman.h>
#endif
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tth_params.h"

#define TTH_BIND_E_COUNT (-201)   /* n is not the model's count of constants */
#define TTH_BIND_E_SIZE (-202)    /* a constant's byte length differs */
#define TTH_BIND_E_ALIGN (-203)   /* a constant is not aligned as the code loads it */
#define TTH_BIND_E_FORMAT (-204)  /* not a parameters file of version 1, or truncated */
#define TTH_BIND_E_MISSING (-205) /* a constant is not in the parameters file */

/* The transforms of derived constants, numbered as the plugins number them
 * (TTH_BIND_DERIVE_WINOGRAD_F4X4_3X3 in plugin-api's tth/artifact.h). */
#define TTH_BIND_DERIVE_WINOGRAD_F4X4_3X3 1
#define TTH_BIND_DERIVED_FIELDS 6

/* A model's binding: what the core's functions work on. */
typedef struct tth_bind_model {
    size_t count;                /* constants, derived ones included */
    const char *const *names;    /* [count]: each one's parameter name, 0 for a derived one */
    const size_t *bytes;         /* [count] */
    const size_t *align;         /* [count] */
    size_t nderived;
    const size_t *derived;       /* [nderived * TTH_BIND_DERIVED_FIELDS] */
    unsigned char *store;        /* the derived constants' store, 64-byte aligned */
    size_t store_bytes;
    const void **slots;          /* [count]: what the generated code reads */
    int32_t *flag;               /* set once bound */
    int32_t unbound;             /* the entry's status while unbound */
} tth_bind_model;

#ifdef TTH_BIND_COUNT
#define TTH_BIND_FN static
#define TTH_BIND_WITH_DERIVED (TTH_BIND_NDERIVED > 0)
#else
#define TTH_BIND_FN __attribute__((visibility("hidden")))
#define TTH_BIND_WITH_DERIVED 1
TTH_BIND_FN int32_t tth__bind_constants(const tth_bind_model *m, const void *const *data, const size_t *bytes,
                                         size_t n);
TTH_BIND_FN int32_t tth__bind_parameters(const tth_bind_model *m, const void *params, size_t len);
TTH_BIND_FN const char *tth__bind_status_text(const tth_bind_model *m, int32_t status);
TTH_BIND_FN int32_t tth__bind_ensure(const tth_bind_model *m);
#endif

#if TTH_BIND_WITH_DERIVED
/* Winograd's F(4x4, 3x3) weight transform (docs/artifact.md, "Derived constants"): u[e][c][o] =
 * (G w[o][c] G^T)[e] for the 3x3 kernel w[o][c] of a float32 [O][C][3][3] weight, e = 6 * i + j,
 * computed in double and rounded once, as the compiler computes it when it stores the result.
 * Input channels outside, output channels inside: each of the 36 rows u[e][c][.] is written in
 * order (the other way round every write was a new cache line, and FCN-ResNet50, whose head has a
 * 2048 -> 512 layer of 150 MB transformed, opened in 552 ms instead of 248). */
static void tth_bind_winograd(const float *w, float *u, size_t O, size_t C)
{
    static const double G[6][3] = {
        {1.0 / 4, 0, 0},
        {-1.0 / 6, -1.0 / 6, -1.0 / 6},
        {-1.0 / 6, 1.0 / 6, -1.0 / 6},
        {1.0 / 24, 1.0 / 12, 1.0 / 6},
        {1.0 / 24, -1.0 / 12, 1.0 / 6},
        {0, 0, 1},
    };
    for (size_t c = 0; c < C; c++)
        for (size_t o = 0; o < O; o++) {
            const float *k = w + (o * C + c) * 9;
            double gw[6][3];
            for (int i = 0; i < 6; i++)
                for (int b = 0; b < 3; b++)
                    gw[i][b] = G[i][0] * k[b] + G[i][1] * k[3 + b] + G[i][2] * k[6 + b];
            for (int i = 0; i < 6; i++)
                for (int j = 0; j < 6; j++) {
                    double v = gw[i][0] * G[j][0] + gw[i][1] * G[j][1] + gw[i][2] * G[j][2];
                    u[((size_t)(i * 6 + j) * C + c) * O + o] = (float)v;
                }
        }
}

/* Each derived slot from its (bound) source. The store is zero-filled memory the first binding
 * writes all of: on Linux its whole 2 MiB pieces are advised as huge pages first, a fault each
 * instead of one per 4 KiB (docs/artifact.md, "Derived constants"). */
static void tth_bind_derive(const tth_bind_model *m)
{
#ifdef MADV_HUGEPAGE
    uintptr_t huge = (uintptr_t)2 << 20, lo = ((uintptr_t)m->store + huge - 1) & ~(huge - 1),
              hi = ((uintptr_t)m->store + m->store_bytes) & ~(huge - 1);
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_HUGEPAGE); /* advice: without it, small pages */
#endif
    for (size_t d = 0; d < m->nderived; d++) {
        const size_t *f = m->derived + d * TTH_BIND_DERIVED_FIELDS;
        void *dst = m->store + f[5];
        const void *src = m->slots[f[1]];
        if (f[2] == TTH_BIND_DERIVE_WINOGRAD_F4X4_3X3)
            tth_bind_winograd((const float *)src, (float *)dst, f[3], f[4]);
        m->slots[f[0]] = dst;
    }
}
#endif

TTH_BIND_FN const char *tth__bind_status_text(const tth_bind_model *m, int32_t status)
{
    if (status == m->unbound)
        return "the model's constants are not bound: call tth_<model>_bind_parameters with the bytes of "
               "parameters/<model>.params first (README.txt)";
    switch (status) {
    case TTH_BIND_E_COUNT: return "binding: the number of constants differs from the model's";
    case TTH_BIND_E_SIZE: return "binding: a constant's byte length differs from the model's";
    case TTH_BIND_E_ALIGN: return "binding: a constant is not aligned as the code reads it (load the parameters file to a 64-byte aligned address)";
    case TTH_BIND_E_FORMAT: return "binding: not a tth parameters file (version 1), or truncated";
    case TTH_BIND_E_MISSING: return "binding: a constant of the model is not in the parameters file (a file of another model?)";
    default: return NULL;
    }
}

/* Constant i given as data, bytes: 0, or why it cannot be bound. */
static int32_t tth_bind_check(const tth_bind_model *m, size_t i, const void *data, size_t bytes)
{
    if (bytes != m->bytes[i])
        return TTH_BIND_E_SIZE;
    if (!data || (uintptr_t)data % m->align[i] != 0)
        return TTH_BIND_E_ALIGN;
    return 0;
}

/* The slots checked are bound: the derived ones computed, then the flag set. */
static void tth_bind_done(const tth_bind_model *m)
{
#if TTH_BIND_WITH_DERIVED
    if (m->nderived)
        tth_bind_derive(m);
#endif
    /* the entry reads the flag with acquire: a run that sees it set sees the slots */
    __atomic_store_n(m->flag, 1, __ATOMIC_RELEASE);
}

/* data[i], bytes[i]: constant i (names[i]); the memory must stay valid and unchanged while the
 * model runs. Nothing is bound unless every constant checks. */
TTH_BIND_FN int32_t tth__bind_constants(const tth_bind_model *m, const void *const *data, const size_t *bytes,
                                         size_t n)
{
    if (n != m->count || !data || !bytes)
        return TTH_BIND_E_COUNT;
    for (size_t i = 0; i < n; i++) {
        int32_t st = m->names[i] ? tth_bind_check(m, i, data[i], bytes[i]) : 0; /* derived: not read */
        if (st)
            return st;
    }
    for (size_t i = 0; i < n; i++)
        if (m->names[i])
            m->slots[i] = data[i];
    tth_bind_done(m);
    return 0;
}

/* The entry of the parameters file read by *at named as constant i, into *e: 1, or 0 when the
 * file has none. *at is left past it, and the search starts there and wraps around, so a file
 * that lists the constants in slot order is read once in all (the daemon writes it so). */
static int tth_bind_find(const tth_bind_model *m, size_t i, const tth_params_reader *start,
                         tth_params_reader *at, tth_params_entry *e)
{
    size_t nl = strlen(m->names[i]);
    for (int pass = 0; pass < 2; pass++) {
        tth_params_reader r = *at;
        while (tth_params_next(&r, e) > 0)
            if (tth_params_name_is(e, NULL, m->names[i], nl)) {
                *at = r;
                return 1;
            }
        *at = *start; /* from the first entry again */
    }
    return 0;
}

/* params: the bytes of the artifact's parameters/<model>.params (format in its README.txt), at
 * an address aligned to 64 bytes; the constants are used in place. Nothing is bound unless the
 * whole file reads, every constant is in it, and each checks. */
TTH_BIND_FN int32_t tth__bind_parameters(const tth_bind_model *m, const void *params, size_t len)
{
    tth_params_reader start, r;
    tth_params_entry e;
    if (tth_params_open(&start, params, len))
        return TTH_BIND_E_FORMAT;
    r = start;
    int st;
    while ((st = tth_params_next(&r, &e)) > 0)
        ;
    if (st < 0)
        return TTH_BIND_E_FORMAT;
    r = start;
    for (size_t i = 0; i < m->count; i++)
        if (m->names[i] && !tth_bind_find(m, i, &start, &r, &e))
            return TTH_BIND_E_MISSING;
    r = start;
    for (size_t i = 0; i < m->count; i++) {
        int32_t bad = m->names[i] && tth_bind_find(m, i, &start, &r, &e) ? tth_bind_check(m, i, e.data, e.bytes) : 0;
        if (bad)
            return bad;
    }
    r = start;
    for (size_t i = 0; i < m->count; i++)
        if (m->names[i] && tth_bind_find(m, i, &start, &r, &e))
            m->slots[i] = e.data;
    tth_bind_done(m);
    return 0;
}

/* Called by the entry while the flag is clear (without the parameters linked in). */
TTH_BIND_FN int32_t tth__bind_ensure(const tth_bind_model *m)
{
    return __atomic_load_n(m->flag, __ATOMIC_ACQUIRE) ? 0 : m->unbound;
}

#ifdef TTH_BIND_COUNT
/* ---- the artifact's copy: the model's binding and its entry points */

const void *TTH_BIND_SLOTS[TTH_BIND_COUNT];
extern int32_t TTH_BIND_FLAG;
#if TTH_BIND_NDERIVED > 0
static unsigned char tth_bind_store[TTH_BIND_DERIVED_BYTES] __attribute__((aligned(64)));
#define TTH_BIND_DERIVED_TABLE tth_bind_derived
#define TTH_BIND_STORE tth_bind_store
#else
#define TTH_BIND_DERIVED_TABLE NULL
#define TTH_BIND_STORE NULL
#endif

static const tth_bind_model tth_bind_model_of_module = {
    TTH_BIND_COUNT, tth_bind_names, tth_bind_bytes, tth_bind_align, TTH_BIND_NDERIVED, TTH_BIND_DERIVED_TABLE,
    TTH_BIND_STORE, TTH_BIND_DERIVED_BYTES, TTH_BIND_SLOTS, &TTH_BIND_FLAG, TTH_BIND_UNBOUND};

int32_t TTH_BIND_CONSTANTS(const void *const *data, const size_t *bytes, size_t n);
int32_t TTH_BIND_PARAMETERS(const void *params, size_t len);
const char *TTH_BIND_STATUS_TEXT(int32_t status);
int32_t TTH_BIND_ENSURE(void);

const char *TTH_BIND_STATUS_TEXT(int32_t status)
{
    return tth__bind_status_text(&tth_bind_model_of_module, status);
}

int32_t TTH_BIND_CONSTANTS(const void *const *data, const size_t *bytes, size_t n)
{
    return tth__bind_constants(&tth_bind_model_of_module, data, bytes, n);
}

int32_t TTH_BIND_PARAMETERS(const void *params, size_t len)
{
    return tth__bind_parameters(&tth_bind_model_of_module, params, len);
}

#ifdef TTH_BIND_EMBEDDED
extern const unsigned char TTH_BIND_BLOB[], TTH_BIND_BLOB_END[];
#endif

/* Called by the entry while the flag is clear. With the parameters linked in, the first caller
 * binds them while any other waits for it (runs may start from several threads at once). */
int32_t TTH_BIND_ENSURE(void)
{
#ifdef TTH_BIND_EMBEDDED
    static int32_t state; /* 0 unbound, 1 binding, 2 bound */
    int32_t expected = 0;
    if (__atomic_compare_exchange_n(&state, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        int32_t rc = TTH_BIND_PARAMETERS(TTH_BIND_BLOB, (size_t)(TTH_BIND_BLOB_END - TTH_BIND_BLOB));
        __atomic_store_n(&state, rc ? 0 : 2, __ATOMIC_RELEASE);
        return rc;
    }
    while (__atomic_load_n(&state, __ATOMIC_ACQUIRE) == 1)
        ;
#endif
    return tth__bind_ensure(&tth_bind_model_of_module);
}
#endif
