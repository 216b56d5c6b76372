/* arm_nn_reference.c: a plain-C implementation of the CMSIS-NN functions tth's cmsis-nn kind
 * calls, written from the library's published semantics (docs/cmsisnn.md, "The reference
 * implementation"): same names, signatures, structs and status codes as CMSIS-NN, so an artifact
 * links against it unchanged. It exists to run cmsis-nn artifacts where the real library is not
 * at hand (this machine's tests, a Cortex-M under QEMU); on a device, link CMSIS-NN itself.
 *
 * It models the contracts of one build of the real library, chosen like the library chooses its
 * code paths: MVE (Cortex-M55/M85: __ARM_FEATURE_MVE, or -DTTH_NNREF_MVE on any machine), DSP
 * without MVE (__ARM_FEATURE_DSP, or -DTTH_NNREF_DSP), or neither. For that build it
 *   - refuses (ARM_CMSIS_NN_ARG_ERROR) a context smaller than the build's *_get_buffer_size;
 *   - on MVE, takes a fully connected layer's per-output kernel sums from ctx->buf and ignores
 *     the bias argument, as the MVE kernels do;
 *   - overwrites scratch contexts after each call, so code that expects a context to keep
 *     something between calls computes garbage here as it would on a device.
 * The arithmetic is the library's integer arithmetic (TFLite's): requantization by a Q31
 * multiplier with double rounding, fixed-point softmax; results are bit-exact with CMSIS-NN. */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "arm_nnfunctions.h"

#if defined(TTH_NNREF_MVE) || (defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1))
#define NNREF_MVE 1
#define NNREF_DSP 0
#elif defined(TTH_NNREF_DSP) || defined(__ARM_FEATURE_DSP)
#define NNREF_MVE 0
#define NNREF_DSP 1
#else
#define NNREF_MVE 0
#define NNREF_DSP 0
#endif

/* ---- fixed-point helpers ---------------------------------------------------------------------- */

/* round(a * b / 2^31), halves away from zero, saturating the one overflowing case */
static int32_t mul_sat(int32_t a, int32_t b)
{
    if (a == INT32_MIN && b == INT32_MIN)
        return INT32_MAX;
    int64_t p = (int64_t)a * b;
    int64_t nudge = p >= 0 ? (1 << 30) : 1 - (1 << 30);
    return (int32_t)((p + nudge) / ((int64_t)1 << 31));
}

/* the same without saturation and with the nudge of a non-negative product (requantization) */
static int32_t mul_no_sat(int32_t a, int32_t b)
{
    int64_t p = (int64_t)a * b + (1 << 30);
    return (int32_t)(p >> 31);
}

/* x / 2^e rounded to nearest, halves away from zero */
static int32_t div_pow2(int32_t x, int32_t e)
{
    int32_t mask = (int32_t)((1u << e) - 1u);
    int32_t rem = x & mask;
    int32_t res = x >> e;
    int32_t threshold = (mask >> 1) + (res < 0 ? 1 : 0);
    return res + (rem > threshold ? 1 : 0);
}

/* x * 2^e saturated to int32 */
static int32_t mul_pow2(int32_t x, int32_t e)
{
    int32_t limit = (int32_t)((1u << (31 - e)) - 1u);
    if (x > limit)
        return INT32_MAX;
    if (x < -limit)
        return INT32_MIN;
    return (int32_t)((uint32_t)x << e);
}

/* val * multiplier * 2^shift, multiplier a Q31 value: the library's default double rounding */
static int32_t requantize(int32_t val, int32_t multiplier, int32_t shift)
{
    int32_t left = shift > 0 ? shift : 0, right = shift > 0 ? 0 : -shift;
    return div_pow2(mul_no_sat((int32_t)((uint32_t)val << left), multiplier), right);
}

static int32_t clamp(int32_t v, int32_t lo, int32_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* exp(x) for x <= 0 in Q5.26, result in Q0.31 (gemmlowp's exp_on_negative_values) */
static int32_t exp_on_negative(int32_t val)
{
    const int32_t quarter_bits = 24; /* 1/4 in Q5.26 */
    int32_t mod_minus_quarter = (val & ((1 << quarter_bits) - 1)) - (1 << quarter_bits);
    int32_t remainder = mod_minus_quarter - val;
    /* exp on [-1/4, 0) by a Taylor expansion around -1/8 */
    int32_t x = (int32_t)((uint32_t)mod_minus_quarter << 5) + (1 << 28);
    int32_t x2 = mul_sat(x, x);
    int32_t x3 = mul_sat(x2, x);
    int32_t x4 = mul_sat(x2, x2);
    int32_t x4_over_4 = div_pow2(x4, 2);
    const int32_t exp_minus_one_eighth = 1895147668, one_third = 715827883;
    int32_t poly = x + div_pow2(mul_sat(x4_over_4 + x3, one_third) + x2, 1);
    int32_t result = exp_minus_one_eighth + mul_sat(exp_minus_one_eighth, poly);
    /* exp(-1/4), exp(-1/2), ..., exp(-16) for each set bit of the remainder */
    static const int32_t factors[7] = {1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242};
    for (int b = 0; b < 7; b++)
        if (remainder & (1 << (quarter_bits + b)))
            result = mul_sat(result, factors[b]);
    return val == 0 ? INT32_MAX : result;
}

/* 1 / (1 + x) for x in [0, 1) in Q0.31, by three Newton-Raphson steps (gemmlowp) */
static int32_t one_over_one_plus_x(int32_t val)
{
    int64_t sum = (int64_t)val + INT32_MAX;
    int32_t half_denominator = (int32_t)((sum + (sum >= 0 ? 1 : -1)) / 2);
    int32_t x = 1515870810 + mul_sat(half_denominator, -1010580540); /* 48/17 - 32/17 * d */
    const int32_t one_quarter = 1 << 29;
    for (int i = 0; i < 3; i++)
        x += mul_pow2(mul_sat(x, one_quarter - mul_sat(half_denominator, x)), 2);
    return mul_pow2(x, 1);
}

static int32_t count_leading_zeros(uint32_t v)
{
    int32_t n = 0;
    if (v == 0)
        return 32;
    while (!(v & 0x80000000u)) {
        v <<= 1;
        n++;
    }
    return n;
}

/* ---- contexts --------------------------------------------------------------------------------- */

static int ctx_holds(const cmsis_nn_context *ctx, int32_t need)
{
    return need <= 0 || (ctx && ctx->buf && ctx->size >= need);
}

/* What a scratch context holds after a call is unspecified: make it so. */
static void ctx_clobber(const cmsis_nn_context *ctx, int32_t used)
{
    if (ctx && ctx->buf && used > 0)
        memset(ctx->buf, 0xA5, (size_t)used);
}

static int32_t max32(int32_t a, int32_t b)
{
    return a > b ? a : b;
}

static int32_t conv_im2col_bytes(int32_t col)
{
    return NNREF_MVE ? 4 * ((col + 15) / 16 * 16) : 2 * ((col + 3) / 4 * 4) * 2;
}

/* arm_convolve_wrapper_s8_get_buffer_size for this build */
static int32_t conv_buffer_bytes(const cmsis_nn_conv_params *p, const cmsis_nn_dims *in, const cmsis_nn_dims *f,
                                 const cmsis_nn_dims *out)
{
    int undilated = p->dilation.w == 1 && p->dilation.h == 1;
    if (p->padding.w == 0 && p->padding.h == 0 && f->w == 1 && f->h == 1 && undilated && in->c == f->c)
        return 0;
    int32_t col = f->h * f->w * f->c;
    if (in->h == 1 && f->h == 1 && p->dilation.w == 1 && (p->stride.w * in->c) % 4 == 0 && in->c == f->c) {
        if (!NNREF_MVE)
            return conv_im2col_bytes(col);
        int32_t stride = p->stride.w, pad = p->padding.w;
        int32_t asym = ((out->w - 1) * stride + f->w - in->w) % 2;
        int32_t right = pad + asym != 0 ? max32(1, (pad + asym + stride - 1) / stride) : 0;
        int32_t left = pad != 0 ? max32(1, (pad + stride - 1) / stride) : 0;
        int32_t mid = max32(out->w - (right + left), 0);
        if (right + mid + left != out->w)
            return conv_im2col_bytes(col);
        int32_t pad_left = pad * in->c, pad_right = asym ? right * in->c : pad_left;
        return max32(f->w * in->c + pad_left, (f->w - 1) * in->c + pad_right);
    }
    return conv_im2col_bytes(col);
}

/* ---- convolutions ----------------------------------------------------------------------------- */

arm_cmsis_nn_status arm_convolve_wrapper_s8(const cmsis_nn_context *ctx, const cmsis_nn_conv_params *p,
                                            const cmsis_nn_per_channel_quant_params *q,
                                            const cmsis_nn_dims *in_dims, const int8_t *in,
                                            const cmsis_nn_dims *f_dims, const int8_t *w,
                                            const cmsis_nn_dims *bias_dims, const int32_t *bias,
                                            const cmsis_nn_dims *out_dims, int8_t *out)
{
    (void)bias_dims;
    int32_t need = conv_buffer_bytes(p, in_dims, f_dims, out_dims);
    if (!ctx_holds(ctx, need) || f_dims->c <= 0 || in_dims->c % f_dims->c != 0)
        return ARM_CMSIS_NN_ARG_ERROR;
    int32_t groups = in_dims->c / f_dims->c;
    if (out_dims->c % groups != 0)
        return ARM_CMSIS_NN_ARG_ERROR;
    int32_t oc_per_group = out_dims->c / groups;
    for (int32_t n = 0; n < in_dims->n; n++)
        for (int32_t oy = 0; oy < out_dims->h; oy++)
            for (int32_t ox = 0; ox < out_dims->w; ox++)
                for (int32_t oc = 0; oc < out_dims->c; oc++) {
                    int32_t g = oc / oc_per_group;
                    int32_t acc = bias ? bias[oc] : 0;
                    for (int32_t ky = 0; ky < f_dims->h; ky++) {
                        int32_t iy = oy * p->stride.h - p->padding.h + ky * p->dilation.h;
                        if (iy < 0 || iy >= in_dims->h)
                            continue;
                        for (int32_t kx = 0; kx < f_dims->w; kx++) {
                            int32_t ix = ox * p->stride.w - p->padding.w + kx * p->dilation.w;
                            if (ix < 0 || ix >= in_dims->w)
                                continue;
                            const int8_t *x = in + ((n * in_dims->h + iy) * in_dims->w + ix) * in_dims->c + g * f_dims->c;
                            const int8_t *k = w + ((oc * f_dims->h + ky) * f_dims->w + kx) * f_dims->c;
                            for (int32_t ic = 0; ic < f_dims->c; ic++)
                                acc += (x[ic] + p->input_offset) * k[ic];
                        }
                    }
                    int32_t v = requantize(acc, q->multiplier[oc], q->shift[oc]) + p->output_offset;
                    out[((n * out_dims->h + oy) * out_dims->w + ox) * out_dims->c + oc] =
                        (int8_t)clamp(v, p->activation.min, p->activation.max);
                }
    ctx_clobber(ctx, need);
    return ARM_CMSIS_NN_SUCCESS;
}

/* arm_depthwise_conv_wrapper_s8_get_buffer_size for this build */
static int32_t depthwise_buffer_bytes(const cmsis_nn_dw_conv_params *p, const cmsis_nn_dims *in,
                                      const cmsis_nn_dims *f, const cmsis_nn_dims *out)
{
    if (in->c != out->c || in->n != 1 || p->dilation.w != 1 || p->dilation.h != 1)
        return 0;
    if (NNREF_MVE)
        return 4 * 124 * f->w * f->h;
    if (f->w == 3 && f->h == 3 && p->padding.h <= 1 && p->padding.w <= 1)
        return 0;
    return NNREF_DSP ? in->c * f->w * f->h * 2 : 0;
}

arm_cmsis_nn_status arm_depthwise_conv_wrapper_s8(const cmsis_nn_context *ctx, const cmsis_nn_dw_conv_params *p,
                                                  const cmsis_nn_per_channel_quant_params *q,
                                                  const cmsis_nn_dims *in_dims, const int8_t *in,
                                                  const cmsis_nn_dims *f_dims, const int8_t *w,
                                                  const cmsis_nn_dims *bias_dims, const int32_t *bias,
                                                  const cmsis_nn_dims *out_dims, int8_t *out)
{
    (void)bias_dims;
    if (NNREF_MVE && in_dims->c == 1 && out_dims->c > 1)
        return ARM_CMSIS_NN_NO_IMPL_ERROR; /* the MVE build converts this case to a convolution
                                              with a larger context: not modelled */
    int32_t need = depthwise_buffer_bytes(p, in_dims, f_dims, out_dims);
    if (!ctx_holds(ctx, need) || p->ch_mult < 1 || out_dims->c != in_dims->c * p->ch_mult)
        return ARM_CMSIS_NN_ARG_ERROR;
    for (int32_t n = 0; n < in_dims->n; n++)
        for (int32_t oy = 0; oy < out_dims->h; oy++)
            for (int32_t ox = 0; ox < out_dims->w; ox++)
                for (int32_t oc = 0; oc < out_dims->c; oc++) {
                    int32_t ic = oc / p->ch_mult;
                    int32_t acc = bias ? bias[oc] : 0;
                    for (int32_t ky = 0; ky < f_dims->h; ky++) {
                        int32_t iy = oy * p->stride.h - p->padding.h + ky * p->dilation.h;
                        if (iy < 0 || iy >= in_dims->h)
                            continue;
                        for (int32_t kx = 0; kx < f_dims->w; kx++) {
                            int32_t ix = ox * p->stride.w - p->padding.w + kx * p->dilation.w;
                            if (ix < 0 || ix >= in_dims->w)
                                continue;
                            int32_t x = in[((n * in_dims->h + iy) * in_dims->w + ix) * in_dims->c + ic];
                            acc += (x + p->input_offset) * w[(ky * f_dims->w + kx) * out_dims->c + oc];
                        }
                    }
                    int32_t v = requantize(acc, q->multiplier[oc], q->shift[oc]) + p->output_offset;
                    out[((n * out_dims->h + oy) * out_dims->w + ox) * out_dims->c + oc] =
                        (int8_t)clamp(v, p->activation.min, p->activation.max);
                }
    ctx_clobber(ctx, need);
    return ARM_CMSIS_NN_SUCCESS;
}

/* ---- fully connected -------------------------------------------------------------------------- */

arm_cmsis_nn_status arm_fully_connected_s8(const cmsis_nn_context *ctx, const cmsis_nn_fc_params *p,
                                           const cmsis_nn_per_tensor_quant_params *q,
                                           const cmsis_nn_dims *in_dims, const int8_t *in,
                                           const cmsis_nn_dims *f_dims, const int8_t *w,
                                           const cmsis_nn_dims *bias_dims, const int32_t *bias,
                                           const cmsis_nn_dims *out_dims, int8_t *out)
{
    (void)bias_dims;
    int32_t depth = f_dims->n, outs = out_dims->c;
    /* MVE: ctx->buf holds, per output o, bias[o] + input_offset * (sum_k w[o][k] + depth *
     * filter_offset) (what arm_vector_sum_s8 computes); the kernel adds only the products */
    const int32_t *kernel_sum = NNREF_MVE && ctx ? (const int32_t *)ctx->buf : NULL;
    if (NNREF_MVE && (!kernel_sum || ctx->size < outs * 4))
        return ARM_CMSIS_NN_ARG_ERROR;
    for (int32_t n = 0; n < in_dims->n; n++, in += depth, out += outs)
        for (int32_t o = 0; o < outs; o++) {
            const int8_t *row = w + o * depth;
            int32_t acc;
            if (NNREF_MVE) {
                int32_t in_sum = 0;
                acc = kernel_sum[o];
                for (int32_t k = 0; k < depth; k++) {
                    acc += in[k] * row[k];
                    in_sum += in[k];
                }
                acc += in_sum * p->filter_offset;
            } else {
                acc = bias ? bias[o] : 0;
                for (int32_t k = 0; k < depth; k++)
                    acc += (in[k] + p->input_offset) * (row[k] + p->filter_offset);
            }
            int32_t v = requantize(acc, q->multiplier, q->shift) + p->output_offset;
            out[o] = (int8_t)clamp(v, p->activation.min, p->activation.max);
        }
    return ARM_CMSIS_NN_SUCCESS;
}

/* ---- pooling ---------------------------------------------------------------------------------- */

typedef struct window {
    int32_t y0, y1, x0, x1; /* the input rows and columns the window covers, clipped */
} window;

static window window_at(const cmsis_nn_pool_params *p, const cmsis_nn_dims *in, const cmsis_nn_dims *f, int32_t oy,
                        int32_t ox)
{
    int32_t by = oy * p->stride.h - p->padding.h, bx = ox * p->stride.w - p->padding.w;
    window wd = {by < 0 ? 0 : by, by + f->h > in->h ? in->h : by + f->h,
                 bx < 0 ? 0 : bx, bx + f->w > in->w ? in->w : bx + f->w};
    return wd;
}

arm_cmsis_nn_status arm_avgpool_s8(const cmsis_nn_context *ctx, const cmsis_nn_pool_params *p,
                                   const cmsis_nn_dims *in_dims, const int8_t *in, const cmsis_nn_dims *f_dims,
                                   const cmsis_nn_dims *out_dims, int8_t *out)
{
    int32_t need = NNREF_DSP ? in_dims->c * 4 : 0;
    if (in_dims->n < 1 || !ctx_holds(ctx, need))
        return ARM_CMSIS_NN_ARG_ERROR;
    for (int32_t n = 0; n < in_dims->n; n++)
        for (int32_t oy = 0; oy < out_dims->h; oy++)
            for (int32_t ox = 0; ox < out_dims->w; ox++) {
                window wd = window_at(p, in_dims, f_dims, oy, ox);
                int32_t count = (wd.y1 - wd.y0) * (wd.x1 - wd.x0);
                if (count <= 0)
                    return ARM_CMSIS_NN_ARG_ERROR;
                for (int32_t c = 0; c < in_dims->c; c++) {
                    int32_t sum = 0;
                    for (int32_t y = wd.y0; y < wd.y1; y++)
                        for (int32_t x = wd.x0; x < wd.x1; x++)
                            sum += in[((n * in_dims->h + y) * in_dims->w + x) * in_dims->c + c];
                    /* divide rounding halves away from zero */
                    int32_t avg = sum > 0 ? (sum + count / 2) / count : (sum - count / 2) / count;
                    out[((n * out_dims->h + oy) * out_dims->w + ox) * out_dims->c + c] =
                        (int8_t)clamp(avg, p->activation.min, p->activation.max);
                }
            }
    ctx_clobber(ctx, need);
    return ARM_CMSIS_NN_SUCCESS;
}

arm_cmsis_nn_status arm_max_pool_s8(const cmsis_nn_context *ctx, const cmsis_nn_pool_params *p,
                                    const cmsis_nn_dims *in_dims, const int8_t *in, const cmsis_nn_dims *f_dims,
                                    const cmsis_nn_dims *out_dims, int8_t *out)
{
    (void)ctx;
    for (int32_t n = 0; n < in_dims->n; n++)
        for (int32_t oy = 0; oy < out_dims->h; oy++)
            for (int32_t ox = 0; ox < out_dims->w; ox++) {
                window wd = window_at(p, in_dims, f_dims, oy, ox);
                for (int32_t c = 0; c < in_dims->c; c++) {
                    int32_t m = INT8_MIN;
                    for (int32_t y = wd.y0; y < wd.y1; y++)
                        for (int32_t x = wd.x0; x < wd.x1; x++) {
                            int32_t v = in[((n * in_dims->h + y) * in_dims->w + x) * in_dims->c + c];
                            m = v > m ? v : m;
                        }
                    out[((n * out_dims->h + oy) * out_dims->w + ox) * out_dims->c + c] =
                        (int8_t)clamp(m, p->activation.min, p->activation.max);
                }
            }
    return ARM_CMSIS_NN_SUCCESS;
}

/* ---- softmax ---------------------------------------------------------------------------------- */

#define NNREF_ACCUM_BITS 12

void arm_softmax_s8(const int8_t *input, int32_t num_rows, int32_t row_size, int32_t mult, int32_t shift,
                    int32_t diff_min, int8_t *output)
{
    const int32_t scale = 1 << shift;
    for (int32_t r = 0; r < num_rows; r++, input += row_size, output += row_size) {
        int32_t max = input[0];
        for (int32_t i = 1; i < row_size; i++)
            max = input[i] > max ? input[i] : max;
        int32_t sum = 0;
        for (int32_t i = 0; i < row_size; i++) {
            int32_t diff = input[i] - max;
            if (diff >= diff_min)
                sum += div_pow2(exp_on_negative(mul_sat(diff * scale, mult)), NNREF_ACCUM_BITS);
        }
        int32_t headroom = count_leading_zeros((uint32_t)sum);
        int32_t shifted = sum > 0 ? (int32_t)((uint32_t)sum << headroom) : 0;
        int32_t shifted_scale = one_over_one_plus_x((int32_t)((uint32_t)shifted - 0x80000000u));
        int32_t bits_over_unit = NNREF_ACCUM_BITS - headroom + 23;
        for (int32_t i = 0; i < row_size; i++) {
            int32_t diff = input[i] - max;
            if (diff >= diff_min) {
                int32_t e = exp_on_negative(mul_sat(diff * scale, mult));
                int32_t v = div_pow2(mul_sat(shifted_scale, e), bits_over_unit) + INT8_MIN;
                output[i] = (int8_t)clamp(v, INT8_MIN, INT8_MAX);
            } else {
                output[i] = INT8_MIN;
            }
        }
    }
}

/* ---- elementwise ------------------------------------------------------------------------------ */

arm_cmsis_nn_status arm_elementwise_add_s8(const int8_t *a, const int8_t *b, int32_t a_offset, int32_t a_mult,
                                           int32_t a_shift, int32_t b_offset, int32_t b_mult, int32_t b_shift,
                                           int32_t left_shift, int8_t *output, int32_t out_offset, int32_t out_mult,
                                           int32_t out_shift, int32_t act_min, int32_t act_max, int32_t block_size)
{
    for (int32_t i = 0; i < block_size; i++) {
        int32_t x = requantize((int32_t)((uint32_t)(a[i] + a_offset) << left_shift), a_mult, a_shift);
        int32_t y = requantize((int32_t)((uint32_t)(b[i] + b_offset) << left_shift), b_mult, b_shift);
        int32_t v = requantize(x + y, out_mult, out_shift) + out_offset;
        output[i] = (int8_t)clamp(v, act_min, act_max);
    }
    return ARM_CMSIS_NN_SUCCESS;
}

arm_cmsis_nn_status arm_elementwise_mul_s8(const int8_t *a, const int8_t *b, int32_t a_offset, int32_t b_offset,
                                           int8_t *output, int32_t out_offset, int32_t out_mult, int32_t out_shift,
                                           int32_t act_min, int32_t act_max, int32_t block_size)
{
    for (int32_t i = 0; i < block_size; i++) {
        int32_t v = requantize((a[i] + a_offset) * (b[i] + b_offset), out_mult, out_shift) + out_offset;
        output[i] = (int8_t)clamp(v, act_min, act_max);
    }
    return ARM_CMSIS_NN_SUCCESS;
}
