/* tth_bind.c: the constants of a module compiled by the llvm kind for a hosted OS, bound at run
 * time from the artifact's parameters file instead of being copied into the code
 * (docs/artifact.md, "Constants bound at run time"). The llvm-cpu plugin adds this file to the
 * artifact with these definitions in front of it:
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
 *                        store of TTH_BIND_DERIVED_BYTES (the table exists when there are any;
 *                        TTH_DERIVE_<TRANSFORM> numbers its transforms)
 * The artifact's copy has tth_params.h, the one reader of that file, inlined where it is included
 * below (docs/artifact.md, "The parameters file and its reader"). */
#if TTH_BIND_NDERIVED > 0 && defined(__linux__)
#define _DEFAULT_SOURCE /* madvise and MADV_HUGEPAGE under -std=c99 */
#include <sys/mman.h>
#endif
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tth_params.h"

#define TTH_BIND_E_COUNT (-201)   /* n is not TTH_BIND_COUNT */
#define TTH_BIND_E_SIZE (-202)    /* a constant's byte length differs */
#define TTH_BIND_E_ALIGN (-203)   /* a constant is not aligned as the code loads it */
#define TTH_BIND_E_FORMAT (-204)  /* not a parameters file of version 1, or truncated */
#define TTH_BIND_E_MISSING (-205) /* a constant is not in the parameters file */

const void *TTH_BIND_SLOTS[TTH_BIND_COUNT];
extern int32_t TTH_BIND_FLAG;

#if TTH_BIND_NDERIVED > 0
static unsigned char tth_bind_store[TTH_BIND_DERIVED_BYTES] __attribute__((aligned(64)));

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
static void tth_bind_derive(void)
{
#ifdef MADV_HUGEPAGE
    uintptr_t huge = (uintptr_t)2 << 20, lo = ((uintptr_t)tth_bind_store + huge - 1) & ~(huge - 1),
              hi = ((uintptr_t)tth_bind_store + TTH_BIND_DERIVED_BYTES) & ~(huge - 1);
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_HUGEPAGE); /* advice: without it, small pages */
#endif
    for (size_t d = 0; d < TTH_BIND_NDERIVED; d++) {
        void *dst = tth_bind_store + tth_bind_derived[d].offset;
        const void *src = TTH_BIND_SLOTS[tth_bind_derived[d].from];
        if (tth_bind_derived[d].transform == TTH_DERIVE_WINOGRAD_F4X4_3X3)
            tth_bind_winograd((const float *)src, (float *)dst, tth_bind_derived[d].dims[0],
                              tth_bind_derived[d].dims[1]);
        TTH_BIND_SLOTS[tth_bind_derived[d].slot] = dst;
    }
}
#endif

int32_t TTH_BIND_CONSTANTS(const void *const *data, const size_t *bytes, size_t n);
int32_t TTH_BIND_PARAMETERS(const void *params, size_t len);
const char *TTH_BIND_STATUS_TEXT(int32_t status);
int32_t TTH_BIND_ENSURE(void);

const char *TTH_BIND_STATUS_TEXT(int32_t status)
{
    switch (status) {
    case TTH_BIND_UNBOUND:
        return "the model's constants are not bound: call tth_<model>_bind_parameters with the bytes of "
               "parameters/<model>.params first (README.txt)";
    case TTH_BIND_E_COUNT: return "binding: the number of constants differs from the model's";
    case TTH_BIND_E_SIZE: return "binding: a constant's byte length differs from the model's";
    case TTH_BIND_E_ALIGN: return "binding: a constant is not aligned as the code reads it (load the parameters file to a 64-byte aligned address)";
    case TTH_BIND_E_FORMAT: return "binding: not a tth parameters file (version 1), or truncated";
    case TTH_BIND_E_MISSING: return "binding: a constant of the model is not in the parameters file (a file of another model?)";
    default: return NULL;
    }
}

/* data[i], bytes[i]: constant i (tth_bind_names[i]); the memory must stay valid and unchanged
 * while the model runs. Nothing is bound unless every constant checks. */
int32_t TTH_BIND_CONSTANTS(const void *const *data, const size_t *bytes, size_t n)
{
    if (n != TTH_BIND_COUNT || !data || !bytes)
        return TTH_BIND_E_COUNT;
    for (size_t i = 0; i < n; i++) {
        if (!tth_bind_names[i])
            continue; /* derived: data[i] is not read */
        if (bytes[i] != tth_bind_bytes[i])
            return TTH_BIND_E_SIZE;
        if (!data[i] || (uintptr_t)data[i] % tth_bind_align[i] != 0)
            return TTH_BIND_E_ALIGN;
    }
    for (size_t i = 0; i < n; i++)
        if (tth_bind_names[i])
            TTH_BIND_SLOTS[i] = data[i];
#if TTH_BIND_NDERIVED > 0
    tth_bind_derive();
#endif
    /* the entry reads the flag with acquire: a run that sees it set sees the slots */
    __atomic_store_n(&TTH_BIND_FLAG, 1, __ATOMIC_RELEASE);
    return 0;
}

/* params: the bytes of the artifact's parameters/<model>.params (format in its README.txt), at
 * an address aligned to 64 bytes; the constants are used in place. */
int32_t TTH_BIND_PARAMETERS(const void *params, size_t len)
{
    const void *data[TTH_BIND_COUNT];
    size_t bytes[TTH_BIND_COUNT];
    for (size_t i = 0; i < TTH_BIND_COUNT; i++) {
        data[i] = NULL;
        bytes[i] = 0;
    }
    tth_params_reader r;
    tth_params_entry e;
    if (tth_params_open(&r, params, len))
        return TTH_BIND_E_FORMAT;
    int st;
    while ((st = tth_params_next(&r, &e)) > 0)
        for (size_t i = 0; i < TTH_BIND_COUNT; i++)
            if (!data[i] && tth_bind_names[i] &&
                tth_params_name_is(&e, NULL, tth_bind_names[i], strlen(tth_bind_names[i]))) {
                data[i] = e.data;
                bytes[i] = e.bytes;
            }
    if (st < 0)
        return TTH_BIND_E_FORMAT;
    for (size_t i = 0; i < TTH_BIND_COUNT; i++)
        if (!data[i] && tth_bind_names[i])
            return TTH_BIND_E_MISSING;
    return TTH_BIND_CONSTANTS(data, bytes, TTH_BIND_COUNT);
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
    return __atomic_load_n(&TTH_BIND_FLAG, __ATOMIC_ACQUIRE) ? 0 : TTH_BIND_UNBOUND;
}
