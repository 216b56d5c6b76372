/* arm_nnfunctions.h of tth's reference CMSIS-NN (docs/cmsisnn.md, "The reference
 * implementation"): the types and prototypes of the CMSIS-NN functions tth's generated C calls,
 * with CMSIS-NN's names, fields and argument order, so an artifact compiles unchanged against
 * this header and arm_nn_reference.c, or against CMSIS-NN's own header and library on a device.
 * Not CMSIS-NN's header: it declares only what tth calls. */
#ifndef TTH_TEST_ARM_NNFUNCTIONS_H
#define TTH_TEST_ARM_NNFUNCTIONS_H

#include <stdint.h>

typedef enum {
    ARM_CMSIS_NN_SUCCESS = 0,
    ARM_CMSIS_NN_ARG_ERROR = -1,
    ARM_CMSIS_NN_NO_IMPL_ERROR = -2,
    ARM_CMSIS_NN_FAILURE = -3,
} arm_cmsis_nn_status;

typedef struct { void *buf; int32_t size; } cmsis_nn_context;
typedef struct { int32_t w; int32_t h; } cmsis_nn_tile;
typedef struct { int32_t n; int32_t h; int32_t w; int32_t c; } cmsis_nn_dims;
typedef struct { int32_t min; int32_t max; } cmsis_nn_activation;
typedef struct { int32_t *multiplier; int32_t *shift; } cmsis_nn_per_channel_quant_params;
typedef struct { int32_t multiplier; int32_t shift; } cmsis_nn_per_tensor_quant_params;
typedef struct {
    int32_t input_offset;
    int32_t output_offset;
    cmsis_nn_tile stride;
    cmsis_nn_tile padding;
    cmsis_nn_tile dilation;
    cmsis_nn_activation activation;
} cmsis_nn_conv_params;
typedef struct {
    int32_t input_offset;
    int32_t output_offset;
    int32_t ch_mult;
    cmsis_nn_tile stride;
    cmsis_nn_tile padding;
    cmsis_nn_tile dilation;
    cmsis_nn_activation activation;
} cmsis_nn_dw_conv_params;
typedef struct { cmsis_nn_tile stride; cmsis_nn_tile padding; cmsis_nn_activation activation; } cmsis_nn_pool_params;
typedef struct {
    int32_t input_offset;
    int32_t filter_offset;
    int32_t output_offset;
    cmsis_nn_activation activation;
} cmsis_nn_fc_params;

arm_cmsis_nn_status arm_convolve_wrapper_s8(const cmsis_nn_context *ctx, const cmsis_nn_conv_params *conv_params,
                                            const cmsis_nn_per_channel_quant_params *quant_params,
                                            const cmsis_nn_dims *input_dims, const int8_t *input_data,
                                            const cmsis_nn_dims *filter_dims, const int8_t *filter_data,
                                            const cmsis_nn_dims *bias_dims, const int32_t *bias_data,
                                            const cmsis_nn_dims *output_dims, int8_t *output_data);
arm_cmsis_nn_status arm_depthwise_conv_wrapper_s8(const cmsis_nn_context *ctx,
                                                  const cmsis_nn_dw_conv_params *dw_conv_params,
                                                  const cmsis_nn_per_channel_quant_params *quant_params,
                                                  const cmsis_nn_dims *input_dims, const int8_t *input_data,
                                                  const cmsis_nn_dims *filter_dims, const int8_t *filter_data,
                                                  const cmsis_nn_dims *bias_dims, const int32_t *bias_data,
                                                  const cmsis_nn_dims *output_dims, int8_t *output_data);
arm_cmsis_nn_status arm_fully_connected_s8(const cmsis_nn_context *ctx, const cmsis_nn_fc_params *fc_params,
                                           const cmsis_nn_per_tensor_quant_params *quant_params,
                                           const cmsis_nn_dims *input_dims, const int8_t *input_data,
                                           const cmsis_nn_dims *filter_dims, const int8_t *filter_data,
                                           const cmsis_nn_dims *bias_dims, const int32_t *bias_data,
                                           const cmsis_nn_dims *output_dims, int8_t *output_data);
arm_cmsis_nn_status arm_avgpool_s8(const cmsis_nn_context *ctx, const cmsis_nn_pool_params *pool_params,
                                   const cmsis_nn_dims *input_dims, const int8_t *input_data,
                                   const cmsis_nn_dims *filter_dims, const cmsis_nn_dims *output_dims,
                                   int8_t *output_data);
arm_cmsis_nn_status arm_max_pool_s8(const cmsis_nn_context *ctx, const cmsis_nn_pool_params *pool_params,
                                    const cmsis_nn_dims *input_dims, const int8_t *input_data,
                                    const cmsis_nn_dims *filter_dims, const cmsis_nn_dims *output_dims,
                                    int8_t *output_data);
void arm_softmax_s8(const int8_t *input, int32_t num_rows, int32_t row_size, int32_t mult, int32_t shift,
                    int32_t diff_min, int8_t *output);
arm_cmsis_nn_status arm_elementwise_add_s8(const int8_t *input_1_vect, const int8_t *input_2_vect,
                                           int32_t input_1_offset, int32_t input_1_mult, int32_t input_1_shift,
                                           int32_t input_2_offset, int32_t input_2_mult, int32_t input_2_shift,
                                           int32_t left_shift, int8_t *output, int32_t out_offset, int32_t out_mult,
                                           int32_t out_shift, int32_t out_activation_min, int32_t out_activation_max,
                                           int32_t block_size);
arm_cmsis_nn_status arm_elementwise_mul_s8(const int8_t *input_1_vect, const int8_t *input_2_vect,
                                           int32_t input_1_offset, int32_t input_2_offset, int8_t *output,
                                           int32_t out_offset, int32_t out_mult, int32_t out_shift,
                                           int32_t out_activation_min, int32_t out_activation_max,
                                           int32_t block_size);

#endif
