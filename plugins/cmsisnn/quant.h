/* quant.h: CMSIS-NN's fixed-point view of real scales (the TFLite conventions CMSIS-NN follows). */
#ifndef TTH_CMSISNN_QUANT_H
#define TTH_CMSISNN_QUANT_H

#include <stdint.h>

/* real = multiplier * 2^(shift - 31), multiplier a Q31 in [2^30, 2^31) (0 for real 0); shift > 0
 * is a left shift. real must be >= 0. */
void cn_quantize_multiplier(double real, int32_t *multiplier, int32_t *shift);

/* arm_softmax_s8's arguments for input scale s (beta 1, 5 integer bits of the scaled difference):
 * mult/shift of min(s * 2^26, 2^31 - 1), and diff_min = -floor(31 * 2^26 / 2^shift). */
void cn_softmax_params(double in_scale, int32_t *mult, int32_t *shift, int32_t *diff_min);

/* arm_elementwise_add_s8's multipliers: both inputs rescaled by s_i / (2 max(s1, s2)) after a left
 * shift of 20, the sum by 2 max(s1, s2) / (2^20 s_out). */
#define CN_ADD_LEFT_SHIFT 20
void cn_add_params(double s1, double s2, double s_out, int32_t mult[3], int32_t shift[3]);

#endif
