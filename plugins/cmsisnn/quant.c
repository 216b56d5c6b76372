/* quant.c: scales to Q31 multipliers and shifts, as CMSIS-NN expects them. */
#include "quant.h"

#include <math.h>

void cn_quantize_multiplier(double real, int32_t *multiplier, int32_t *shift)
{
    if (!(real > 0)) {
        *multiplier = 0;
        *shift = 0;
        return;
    }
    int e = 0;
    double q = frexp(real, &e); /* real = q * 2^e, q in [0.5, 1) */
    long long fixed = llround(q * 2147483648.0);
    if (fixed == 2147483648LL) {
        fixed /= 2;
        e++;
    }
    if (e < -31) { /* too small to represent: zero */
        fixed = 0;
        e = 0;
    }
    *multiplier = (int32_t)fixed;
    *shift = e;
}

void cn_softmax_params(double in_scale, int32_t *mult, int32_t *shift, int32_t *diff_min)
{
    const int integer_bits = 5;
    double real = fmin(in_scale * (double)(1LL << (31 - integer_bits)), 2147483647.0);
    cn_quantize_multiplier(real, mult, shift);
    double radius = (double)((1 << integer_bits) - 1) * (double)(1LL << (31 - integer_bits)) /
                    ldexp(1.0, *shift);
    *diff_min = -(int32_t)floor(radius);
}

void cn_add_params(double s1, double s2, double s_out, int32_t mult[3], int32_t shift[3])
{
    double twice_max = 2.0 * fmax(s1, s2);
    cn_quantize_multiplier(s1 / twice_max, &mult[0], &shift[0]);
    cn_quantize_multiplier(s2 / twice_max, &mult[1], &shift[1]);
    cn_quantize_multiplier(twice_max / ((double)(1 << CN_ADD_LEFT_SHIFT) * s_out), &mult[2], &shift[2]);
}
