/* bf16_cases.h: bfloat16 inputs and the results a code generator must give for them, shared by
 * the c (tests/plugins/c-host/test_codegen.c) and llvm (tests/plugins/llvm-cpu/test_llvm_codegen.c)
 * tests so both are held to the same numbers. The expected bits were computed apart from tth: for each
 * float32, the bfloat16 nearest by exact rational distance (ties to the even mantissa, overflow
 * to infinity from the largest finite + half an ulp), found by searching the bfloat16 values. */
#ifndef TTH_TEST_BF16_CASES_H
#define TTH_TEST_BF16_CASES_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define BF16_NCASES 8

/* o = a + b in bfloat16 (the float32 sums are exact, so only the rounding to bfloat16 counts) */
static const uint16_t bf16_add_a[BF16_NCASES] = {0x3f80, 0x3f81, 0x7f7f, 0x7fc0, 0x7f80, 0x0001, 0xbfc0, 0x4049};
static const uint16_t bf16_add_b[BF16_NCASES] = {0x3b80, 0x3b80, 0x7f7f, 0x3f80, 0xff80, 0x0001, 0x3e80, 0x3dcd};
static const uint16_t bf16_add_sum[BF16_NCASES] = {
    0x3f80, /* 1 + 2^-8: a tie, even is down */
    0x3f82, /* 1 + 3 * 2^-8: a tie, even is up */
    0x7f80, /* largest + largest: infinity */
    0x7fc0, /* NaN + 1: NaN */
    0x7fc0, /* inf - inf: NaN */
    0x0002, /* subnormals add */
    0xbfa0, /* -1.5 + 0.25 */
    0x404f, /* 3.140625 + 0.10009765625 = 3.24072265625 rounds to 3.234375 */
};

/* float32 (bits) -> bfloat16 */
static const uint32_t bf16_narrow_in[BF16_NCASES] = {0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0x7f7f7fffu,
                                                     0x00018000u, 0x007f8000u, 0xff800001u, 0x40490fdbu};
static const uint16_t bf16_narrow_out[BF16_NCASES] = {
    0x3f80, /* tie, down to even */
    0x3f82, /* tie, up to even */
    0x7f80, /* the largest float32 is past the overflow tie */
    0x7f7f, /* just below it */
    0x0002, /* 1.5 smallest subnormals: a tie, even is 2 */
    0x0080, /* the largest subnormal + half an ulp rounds into the normal range */
    0xffc0, /* a NaN with only its lowest payload bit set stays a NaN (compared as "a NaN") */
    0x4049, /* pi */
};

/* got matches want: the same bits, or both NaN */
static inline int bf16_matches(uint16_t got, uint16_t want)
{
    int got_nan = (got & 0x7f80) == 0x7f80 && (got & 0x7f), want_nan = (want & 0x7f80) == 0x7f80 && (want & 0x7f);
    return want_nan ? got_nan : got == want;
}

/* the float32 a bfloat16 widens to (exact) */
static inline uint32_t bf16_widened_bits(uint16_t b) { return (uint32_t)b << 16; }

/* Asserts a generator's results for these cases: o = a + b, y = bfloat16(x) and z = float32(y)
 * for x = bf16_narrow_in. */
static inline void bf16_check(const uint16_t *o, const uint16_t *y, const float *z)
{
    for (int k = 0; k < BF16_NCASES; k++) {
        cr_assert(bf16_matches(o[k], bf16_add_sum[k]), "o[%d] = 0x%04x + 0x%04x = 0x%04x, want 0x%04x", k,
                  bf16_add_a[k], bf16_add_b[k], o[k], bf16_add_sum[k]);
        cr_assert(bf16_matches(y[k], bf16_narrow_out[k]), "y[%d] = bfloat16(0x%08x) = 0x%04x, want 0x%04x", k,
                  bf16_narrow_in[k], y[k], bf16_narrow_out[k]);
        uint32_t zb;
        memcpy(&zb, &z[k], 4);
        cr_assert(isnan(z[k]) ? bf16_matches((uint16_t)(zb >> 16), bf16_narrow_out[k])
                              : zb == bf16_widened_bits(bf16_narrow_out[k]),
                  "z[%d] = 0x%08x, want 0x%08x", k, zb, bf16_widened_bits(bf16_narrow_out[k]));
    }
}

#endif
