/* Every operator's type relation, as a table: {op, argument types, attrs, expected type or the
 * exact diagnostic}. Argument types are written "float32[1,3,8,8]; int64[]"; an expected tuple
 * "(float32[2, 3], float32[2, 7])"; an error "!message". */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tth/relay.h>

typedef struct op_case {
    tth_op op;
    const char *args;
    const char *attrs; /* JSON text, or NULL */
    const char *expect;
} op_case;

#define F "float32"
static const op_case cases[] = {
    /* broadcasting binary */
    {TTH_OP_ADD, F "[2,3]; " F "[3]", NULL, F "[2, 3]"},
    {TTH_OP_ADD, F "[4,1,5]; " F "[3,1]", NULL, F "[4, 3, 5]"},
    {TTH_OP_ADD, F "[]; " F "[2]", NULL, F "[2]"},
    {TTH_OP_ADD, F "[2,0]; " F "[1]", NULL, F "[2, 0]"},
    {TTH_OP_ADD, F "[2,3]; " F "[4]", NULL,
     "!add: shapes of arguments 0 and 1 do not broadcast (arguments: float32[2, 3], float32[4])"},
    {TTH_OP_ADD, F "[2]; int32[2]", NULL, "!add: argument 1 is int32 but argument 0 is float32 (arguments: float32[2], int32[2])"},
    {TTH_OP_ADD, "bool[2]; bool[2]", NULL, "!add: argument 0 must be numeric, got bool (arguments: bool[2], bool[2])"},
    {TTH_OP_ADD, F "[2]", NULL, "!add: expected 2 arguments, got 1"},
    {TTH_OP_SUBTRACT, "int32[5,1]; int32[1,6]", NULL, "int32[5, 6]"},
    {TTH_OP_MULTIPLY, F "[1,64,1,1]; " F "[1,64,56,56]", NULL, F "[1, 64, 56, 56]"},
    {TTH_OP_DIVIDE, "int64[3]; int64[]", NULL, "int64[3]"},
    {TTH_OP_POWER, F "[3]; " F "[]", NULL, F "[3]"},
    {TTH_OP_MAXIMUM, "uint8[2,2]; uint8[2]", NULL, "uint8[2, 2]"},
    {TTH_OP_MINIMUM, F "[1]; " F "[7]", NULL, F "[7]"},
    {TTH_OP_MOD, "int32[4]; int32[4]", "{\"fmod\": true}", "int32[4]"},
    {TTH_OP_MOD, "int32[4]; int32[4]", "{\"fmod\": \"x\"}", "!mod: attribute 'fmod' must be a bool"},
    {TTH_OP_PRELU, F "[1,3,4,4]; " F "[3,1,1]", NULL, F "[1, 3, 4, 4]"},
    {TTH_OP_PRELU, F "[1,3,4,4]; " F "[2,1,1]", NULL,
     "!nn.prelu: slope does not broadcast to the shape of x (arguments: float32[1, 3, 4, 4], float32[2, 1, 1])"},
    {TTH_OP_PRELU, F "[3]; " F "[2,3]", NULL,
     "!nn.prelu: slope does not broadcast to the shape of x (arguments: float32[3], float32[2, 3])"},
    /* comparisons and logic */
    {TTH_OP_EQUAL, "int64[2,1]; int64[1,3]", NULL, "bool[2, 3]"},
    {TTH_OP_LESS, F "[2,1]; " F "[1,3]", NULL, "bool[2, 3]"},
    {TTH_OP_LESS_EQUAL, F "[2]; " F "[2]", NULL, "bool[2]"},
    {TTH_OP_GREATER, "int8[4]; int8[]", NULL, "bool[4]"},
    {TTH_OP_GREATER_EQUAL, F "[4]; " F "[4]", NULL, "bool[4]"},
    {TTH_OP_GREATER, F "[4]; int8[4]", NULL,
     "!greater: argument 1 is int8 but argument 0 is float32 (arguments: float32[4], int8[4])"},
    {TTH_OP_LOGICAL_AND, "bool[2]; bool[2]", NULL, "bool[2]"},
    {TTH_OP_LOGICAL_OR, "bool[2,1]; bool[3]", NULL, "bool[2, 3]"},
    {TTH_OP_LOGICAL_XOR, "bool[]; bool[]", NULL, "bool[]"},
    {TTH_OP_LOGICAL_AND, F "[2]; bool[2]", NULL,
     "!logical_and: argument 0 must be bool, got float32 (arguments: float32[2], bool[2])"},
    {TTH_OP_WHERE, "bool[2,1]; " F "[3]; " F "[1]", NULL, F "[2, 3]"},
    {TTH_OP_WHERE, F "[2]; " F "[2]; " F "[2]", NULL,
     "!where: argument 0 must be bool, got float32 (arguments: float32[2], float32[2], float32[2])"},
    {TTH_OP_WHERE, "bool[4]; " F "[3]; " F "[3]", NULL,
     "!where: shapes of cond, x and y do not broadcast (arguments: bool[4], float32[3], float32[3])"},
    /* unary */
    {TTH_OP_NEGATIVE, "int32[3]", NULL, "int32[3]"},
    {TTH_OP_ABS, "int8[3]", NULL, "int8[3]"},
    {TTH_OP_SQRT, F "[3]", NULL, F "[3]"},
    {TTH_OP_SQRT, "int32[3]", NULL, "!sqrt: argument 0 must be a float tensor, got int32 (arguments: int32[3])"},
    {TTH_OP_RECIPROCAL, "float16[2]", NULL, "float16[2]"},
    {TTH_OP_EXP, F "[2]", NULL, F "[2]"},
    {TTH_OP_LOG, "float64[2]", NULL, "float64[2]"},
    {TTH_OP_SIN, F "[2]", NULL, F "[2]"},
    {TTH_OP_COS, F "[2]", NULL, F "[2]"},
    {TTH_OP_TANH, F "[2]", NULL, F "[2]"},
    {TTH_OP_ASIN, F "[2]", NULL, F "[2]"},
    {TTH_OP_ACOS, "float64[2,1]", NULL, "float64[2, 1]"},
    {TTH_OP_ATAN, F "[]", NULL, F "[]"},
    {TTH_OP_ASINH, "float16[3]", NULL, "float16[3]"},
    {TTH_OP_ACOSH, F "[2]", NULL, F "[2]"},
    {TTH_OP_ATANH, F "[2]", NULL, F "[2]"},
    {TTH_OP_ATANH, "int32[3]", NULL, "!atanh: argument 0 must be a float tensor, got int32 (arguments: int32[3])"},
    {TTH_OP_SIGMOID, F "[1,8]", NULL, F "[1, 8]"},
    {TTH_OP_ERF, F "[2]", NULL, F "[2]"},
    {TTH_OP_FLOOR, F "[2]", NULL, F "[2]"},
    {TTH_OP_CEIL, F "[2]", NULL, F "[2]"},
    {TTH_OP_ROUND, F "[2]", NULL, F "[2]"},
    {TTH_OP_SIGN, "int64[2]", NULL, "int64[2]"},
    {TTH_OP_LOGICAL_NOT, "bool[2]", NULL, "bool[2]"},
    {TTH_OP_LOGICAL_NOT, "int32[2]", NULL, "!logical_not: argument 0 must be bool, got int32 (arguments: int32[2])"},
    {TTH_OP_RELU, "int8[1,4]", NULL, "int8[1, 4]"},
    {TTH_OP_RELU, F "[2]", "{\"foo\": 1}", "!nn.relu: unknown attribute 'foo'"},
    {TTH_OP_LEAKY_RELU, F "[2]", NULL, F "[2]"},
    {TTH_OP_LEAKY_RELU, F "[2]", "{\"alpha\": \"a\"}", "!nn.leaky_relu: attribute 'alpha' must be a number"},
    {TTH_OP_ELU, F "[2]", "{\"alpha\": 0.5}", F "[2]"},
    {TTH_OP_SELU, F "[2]", "{\"alpha\": 1.5, \"gamma\": 1}", F "[2]"},
    {TTH_OP_THRESHOLDED_RELU, F "[2]", NULL, F "[2]"},
    {TTH_OP_SOFTPLUS, F "[2]", NULL, F "[2]"},
    {TTH_OP_SOFTSIGN, F "[2]", NULL, F "[2]"},
    {TTH_OP_HARD_SIGMOID, F "[2]", "{\"alpha\": 0.25, \"beta\": 0.5}", F "[2]"},
    {TTH_OP_HARD_SWISH, F "[2]", NULL, F "[2]"},
    {TTH_OP_CLIP, F "[2]", "{\"a_min\": 0, \"a_max\": 6}", F "[2]"},
    {TTH_OP_CLIP, "int8[2]", "{\"a_min\": -128, \"a_max\": 127.0}", "int8[2]"},
    {TTH_OP_CLIP, F "[2]", "{\"a_min\": 0}", "!clip: missing required attribute 'a_max'"},
    {TTH_OP_CLIP, F "[2]", "{\"a_min\": 6, \"a_max\": 0}", "!clip: a_min 6 is greater than a_max 0"},
    {TTH_OP_CAST, F "[2,2]", "{\"dtype\": \"int8\"}", "int8[2, 2]"},
    {TTH_OP_CAST, F "[2,2]", "{\"dtype\": \"float\"}", "!cast: attribute 'dtype' must be a dtype name such as \"float32\""},
    {TTH_OP_CAST, F "[2,2]", NULL, "!cast: missing required attribute 'dtype'"},
    /* convolution */
    {TTH_OP_CONV2D, F "[1,3,224,224]; " F "[64,3,7,7]", "{\"strides\": [2,2], \"padding\": [3,3,3,3]}",
     F "[1, 64, 112, 112]"},
    {TTH_OP_CONV2D, F "[1,4,8,8]; " F "[6,2,3,3]", "{\"groups\": 2}", F "[1, 6, 6, 6]"},
    {TTH_OP_CONV2D, F "[1,8,10,10]; " F "[8,1,3,3]", "{\"groups\": 8, \"dilation\": [2,2], \"padding\": [2,2,2,2]}",
     F "[1, 8, 10, 10]"},
    {TTH_OP_CONV2D, F "[1,1,5,5]; " F "[2,1,3,3]", "{\"strides\": [2,2], \"padding\": [0,1,1,0]}", F "[1, 2, 2, 2]"},
    {TTH_OP_CONV2D, F "[1,1,7,5]; " F "[2,1,3,1]", "{\"strides\": [3,1]}", F "[1, 2, 2, 5]"},
    {TTH_OP_CONV2D, F "[1,3,224,224]; " F "[64,3,7,7]; " F "[64]", "{\"strides\": [2,2], \"padding\": [3,3,3,3]}",
     F "[1, 64, 112, 112]"},
    {TTH_OP_CONV2D, F "[1,3,8,8]; " F "[64,3,3,3]; " F "[3]", NULL,
     "!nn.conv2d: bias must have shape [64] (arguments: float32[1, 3, 8, 8], float32[64, 3, 3, 3], float32[3])"},
    {TTH_OP_CONV2D, F "[1,3,8,8]; " F "[4,4,3,3]", NULL,
     "!nn.conv2d: input has 3 channels but the weight expects 4 (4 per group x 1 groups) (arguments: "
     "float32[1, 3, 8, 8], float32[4, 4, 3, 3])"},
    {TTH_OP_CONV2D, F "[1,4,8,8]; " F "[5,2,3,3]", "{\"groups\": 2}",
     "!nn.conv2d: 5 output channels are not divisible by 2 groups (arguments: float32[1, 4, 8, 8], "
     "float32[5, 2, 3, 3])"},
    {TTH_OP_CONV2D, F "[1,3,2,2]; " F "[4,3,3,3]", NULL,
     "!nn.conv2d: the 3x3 kernel (dilation [1, 1]) is larger than the padded input (arguments: float32[1, 3, 2, 2], "
     "float32[4, 3, 3, 3])"},
    {TTH_OP_CONV2D, F "[1,3,8,8]; " F "[4,3,3,3]", "{\"strides\": [0,1]}", "!nn.conv2d: strides must be >= 1, got [0, 1]"},
    {TTH_OP_CONV2D, F "[1,3,8,8]; " F "[4,3,3,3]", "{\"strides\": [1]}",
     "!nn.conv2d: attribute 'strides' must be an array of 2 integers, got 1"},
    {TTH_OP_CONV2D, F "[1,3,8,8]; " F "[4,3,3,3]", "{\"padding\": [1,1]}",
     "!nn.conv2d: attribute 'padding' must be an array of 4 integers, got 2"},
    {TTH_OP_CONV2D, F "[1,3,8,8]; " F "[4,3,3,3]", "{\"groups\": 0}", "!nn.conv2d: groups must be >= 1, got 0"},
    {TTH_OP_CONV2D, F "[3,8,8]; " F "[4,3,3,3]", NULL,
     "!nn.conv2d: argument 0 must have rank 4 (NCHW), got rank 3 (arguments: float32[3, 8, 8], float32[4, 3, 3, 3])"},
    {TTH_OP_CONV2D, F "[1,3,8,8]", NULL, "!nn.conv2d: expected 2 to 3 arguments, got 1"},
    /* blocked channels (docs/layouts.md) */
    {TTH_OP_CONV2D, F "[1,2,8,8,16]; " F "[48,32,3,3]; " F "[48]", "{\"data_layout\": \"NCHW16c\", \"out_layout\": \"NCHW16c\"}",
     F "[1, 3, 6, 6, 16]"},
    {TTH_OP_CONV2D, F "[1,3,9,9]; " F "[32,3,3,3]", "{\"strides\": [2,2], \"out_layout\": \"NCHW8c\"}", F "[1, 4, 4, 4, 8]"},
    {TTH_OP_CONV2D, F "[1,4,5,5,4]; " F "[12,16,1,1]", "{\"data_layout\": \"NCHW4c\", \"out_layout\": \"NCHW\"}",
     F "[1, 12, 5, 5]"},
    {TTH_OP_CONV2D, F "[1,3,8,8]; " F "[24,3,3,3]", "{\"out_layout\": \"NCHW16c\"}",
     "!nn.conv2d: 24 output channels do not fill blocks of 16 (out_layout NCHW16c) (arguments: float32[1, 3, 8, 8], "
     "float32[24, 3, 3, 3])"},
    {TTH_OP_CONV2D, F "[1,2,8,8,8]; " F "[16,16,3,3]", "{\"data_layout\": \"NCHW16c\"}",
     "!nn.conv2d: argument 0 must have rank 5 with 16 channels innermost (data_layout NCHW16c) (arguments: "
     "float32[1, 2, 8, 8, 8], float32[16, 16, 3, 3])"},
    {TTH_OP_CONV2D, F "[1,3,8,8]; " F "[16,3,3,3]", "{\"out_layout\": \"NHWC\"}",
     "!nn.conv2d: attribute 'out_layout' must be \"NCHW\" or \"NCHW<b>c\" with b from 2 to 64, got NHWC"},
    {TTH_OP_CONV2D, F "[1,3,8,8]; " F "[16,3,3,3]", "{\"out_layout\": \"NCHW1c\"}",
     "!nn.conv2d: attribute 'out_layout' must be \"NCHW\" or \"NCHW<b>c\" with b from 2 to 64, got NCHW1c"},
    {TTH_OP_CONV2D_TRANSPOSE, F "[1,4,5,5]; " F "[4,2,3,3]",
     "{\"strides\": [2,2], \"padding\": [1,1,1,1], \"output_padding\": [1,1]}", F "[1, 2, 10, 10]"},
    {TTH_OP_CONV2D_TRANSPOSE, F "[1,4,5,5]; " F "[4,3,3,3]; " F "[6]", "{\"groups\": 2}", F "[1, 6, 7, 7]"},
    {TTH_OP_CONV2D_TRANSPOSE, F "[1,4,5,5]; " F "[4,2,3,3]", "{\"strides\": [2,2], \"output_padding\": [2,2]}",
     "!nn.conv2d_transpose: output_padding [2, 2] must be >= 0 and smaller than the stride or the dilation"},
    {TTH_OP_CONV2D_TRANSPOSE, F "[1,3,5,5]; " F "[4,2,3,3]", NULL,
     "!nn.conv2d_transpose: input has 3 channels but the weight expects 4 (arguments: float32[1, 3, 5, 5], "
     "float32[4, 2, 3, 3])"},
    /* matmul per numpy */
    {TTH_OP_MATMUL, F "[2,3,4]; " F "[4,5]", NULL, F "[2, 3, 5]"},
    {TTH_OP_MATMUL, F "[4]; " F "[4,5]", NULL, F "[5]"},
    {TTH_OP_MATMUL, F "[2,3,4]; " F "[4]", NULL, F "[2, 3]"},
    {TTH_OP_MATMUL, F "[4]; " F "[4]", NULL, F "[]"},
    {TTH_OP_MATMUL, F "[2,1,3,4]; " F "[5,4,6]", NULL, F "[2, 5, 3, 6]"},
    {TTH_OP_MATMUL, F "[3,4]; " F "[5,6]", NULL,
     "!matmul: inner dimensions differ: 4 vs 5 (arguments: float32[3, 4], float32[5, 6])"},
    {TTH_OP_MATMUL, F "[2,3,4]; " F "[3,4,5]", NULL,
     "!matmul: batch dimensions do not broadcast (arguments: float32[2, 3, 4], float32[3, 4, 5])"},
    {TTH_OP_MATMUL, F "[]; " F "[3]", NULL, "!matmul: operands must have rank >= 1 (arguments: float32[], float32[3])"},
    /* pooling */
    {TTH_OP_MAX_POOL2D, F "[1,64,112,112]", "{\"pool_size\": [3,3], \"strides\": [2,2], \"padding\": [1,1,1,1]}",
     F "[1, 64, 56, 56]"},
    {TTH_OP_MAX_POOL2D, F "[1,1,6,6]", "{\"pool_size\": [3,3], \"strides\": [2,2]}", F "[1, 1, 2, 2]"},
    {TTH_OP_MAX_POOL2D, F "[1,2,7,7,16]", "{\"pool_size\": [3,3], \"strides\": [2,2], \"layout\": \"NCHW16c\"}",
     F "[1, 2, 3, 3, 16]"},
    {TTH_OP_AVG_POOL2D, F "[1,2,7,7]", "{\"pool_size\": [3,3], \"layout\": \"NCHW16c\"}",
     "!nn.avg_pool2d: argument 0 must have rank 5 with 16 channels innermost (layout NCHW16c) (arguments: "
     "float32[1, 2, 7, 7])"},
    {TTH_OP_GLOBAL_AVG_POOL2D, F "[2,3,7,5,8]", "{\"layout\": \"NCHW8c\"}", F "[2, 3, 1, 1, 8]"},
    {TTH_OP_MAX_POOL2D, F "[1,1,6,6]", "{\"pool_size\": [3,3], \"strides\": [2,2], \"ceil_mode\": true}",
     F "[1, 1, 3, 3]"},
    /* ceil_mode: a last window starting in the right padding is dropped (ONNX) */
    {TTH_OP_MAX_POOL2D, F "[1,1,4,4]", "{\"pool_size\": [2,2], \"strides\": [2,2], \"padding\": [0,0,1,1], \"ceil_mode\": 1}",
     F "[1, 1, 2, 2]"},
    {TTH_OP_MAX_POOL2D, F "[1,1,5,5]", "{\"pool_size\": [2,2], \"strides\": [2,2], \"dilation\": [2,2]}", F "[1, 1, 2, 2]"},
    {TTH_OP_MAX_POOL2D, "int8[1,1,4,4]", "{\"pool_size\": [2,2]}", "int8[1, 1, 3, 3]"},
    {TTH_OP_MAX_POOL2D, F "[1,1,4,4]", NULL, "!nn.max_pool2d: missing required attribute 'pool_size'"},
    {TTH_OP_MAX_POOL2D, F "[1,1,2,2]", "{\"pool_size\": [3,3]}",
     "!nn.max_pool2d: the 3x3 window is larger than the padded input (arguments: float32[1, 1, 2, 2])"},
    {TTH_OP_MAX_POOL2D_ARGMAX, F "[2,3,5,5]", "{\"pool_size\": [2,2], \"strides\": [2,2], \"storage_order\": 1}",
     "(float32[2, 3, 2, 2], int64[2, 3, 2, 2])"},
    {TTH_OP_MAX_POOL2D_ARGMAX, F "[1,1,5,5]", "{\"pool_size\": [2,2], \"storage_order\": 2}",
     "!nn.max_pool2d_with_argmax: storage_order must be 0 or 1, got 2"},
    {TTH_OP_MAX_POOL2D_ARGMAX, F "[1,1,2,2]", "{\"pool_size\": [3,3]}",
     "!nn.max_pool2d_with_argmax: the 3x3 window is larger than the padded input (arguments: float32[1, 1, 2, 2])"},
    {TTH_OP_DET, F "[3,4,4]", NULL, F "[3]"},
    {TTH_OP_DET, F "[2,2]", NULL, F "[]"},
    {TTH_OP_DET, F "[2,3]", NULL, "!det: needs square matrices in the last two axes (arguments: float32[2, 3])"},
    {TTH_OP_ROI_ALIGN, F "[2,3,8,8]; " F "[5,4]; int64[5]", "{\"pooled_size\": [2,3], \"mode\": \"max\"}",
     F "[5, 3, 2, 3]"},
    {TTH_OP_ROI_ALIGN, F "[1,1,4,4]; " F "[2,4]; int32[2]", "{\"pooled_size\": [1,1], \"aligned\": true}",
     F "[2, 1, 1, 1]"},
    {TTH_OP_ROI_ALIGN, F "[1,1,4,4]; " F "[2,5]; int64[2]", "{\"pooled_size\": [1,1]}",
     "!vision.roi_align: rois must be [num_rois, 4] (arguments: float32[1, 1, 4, 4], float32[2, 5], int64[2])"},
    {TTH_OP_ROI_ALIGN, F "[1,1,4,4]; " F "[2,4]; int64[3]", "{\"pooled_size\": [1,1]}",
     "!vision.roi_align: batch_indices has 3 entries for 2 rois (arguments: float32[1, 1, 4, 4], float32[2, 4], "
     "int64[3])"},
    {TTH_OP_ROI_ALIGN, F "[1,1,4,4]; " F "[2,4]; int64[2]", "{\"pooled_size\": [1,1], \"sampling_ratio\": -1}",
     "!vision.roi_align: sampling_ratio must be >= 0, got -1"},
    {TTH_OP_ROI_ALIGN, F "[1,1,4,4]; " F "[2,4]; int64[2]", "{\"pooled_size\": [1,1], \"mode\": \"sum\"}",
     "!vision.roi_align: attribute 'mode' must be one of: avg, max"},
    {TTH_OP_GRID_SAMPLE, F "[2,3,4,5]; " F "[2,6,7,2]", NULL, F "[2, 3, 6, 7]"},
    {TTH_OP_LAYER_NORM, F "[2,5,8]; " F "[8]; " F "[8]", "{\"epsilon\": 1e-6}", F "[2, 5, 8]"},
    {TTH_OP_ATTENTION, F "[2,4,7,16]; " F "[2,4,9,16]; " F "[2,4,9,8]; " F "[7,9]", "{\"scale\": 0.25}", F "[2, 4, 7, 8]"},
    {TTH_OP_ATTENTION, F "[4,7,16]; " F "[1,16,9]; " F "[4,9,8]", "{\"keys_transposed\": true}", F "[4, 7, 8]"},
    {TTH_OP_ATTENTION, F "[4,7,16]; " F "[4,9,16]; " F "[4,8,8]", NULL,
     "!nn.attention: v has 8 rows for 9 keys (arguments: float32[4, 7, 16], float32[4, 9, 16], float32[4, 8, 8])"},
    {TTH_OP_LAYER_NORM, F "[3,8]; " F "[1,8]; " F "[]", NULL, F "[3, 8]"},
    {TTH_OP_LAYER_NORM, F "[3,8]; " F "[7]; " F "[8]", NULL,
     "!nn.layer_norm: scale must be x's dtype with 8 values along the last axis, or one value (arguments: "
     "float32[3, 8], float32[7], float32[8])"},
    {TTH_OP_GRID_SAMPLE, "float64[1,2,3,4,5]; " F "[1,2,1,6,3]", "{\"method\": \"cubic\", \"padding_mode\": \"reflection\", "
     "\"align_corners\": 1}", "float64[1, 2, 2, 1, 6]"},
    {TTH_OP_GRID_SAMPLE, F "[1,1,4]; " F "[1,3,1]", "{\"method\": \"nearest\"}", F "[1, 1, 3]"},
    {TTH_OP_GRID_SAMPLE, F "[1,1,4,4]; " F "[1,2,2,3]", NULL,
     "!image.grid_sample: grid must be [N, D1..Dr, r] with x's N and r = 2 (arguments: float32[1, 1, 4, 4], "
     "float32[1, 2, 2, 3])"},
    {TTH_OP_GRID_SAMPLE, F "[2,1,4,4]; " F "[1,2,2,2]", NULL,
     "!image.grid_sample: grid must be [N, D1..Dr, r] with x's N and r = 2 (arguments: float32[2, 1, 4, 4], "
     "float32[1, 2, 2, 2])"},
    {TTH_OP_GRID_SAMPLE, "int32[1,1,4,4]; " F "[1,2,2,2]", NULL,
     "!image.grid_sample: argument 0 must be a float tensor, got int32 (arguments: int32[1, 1, 4, 4], float32[1, 2, 2, 2])"},
    {TTH_OP_GRID_SAMPLE, F "[1,1,4,4]; " F "[1,2,2,2]", "{\"method\": \"bicubic\"}",
     "!image.grid_sample: attribute 'method' must be one of: nearest, linear, cubic"},
    {TTH_OP_GRID_SAMPLE, F "[1,1,4,4]; " F "[1,2,2,2]", "{\"padding_mode\": \"edge\"}",
     "!image.grid_sample: attribute 'padding_mode' must be one of: zeros, border, reflection"},
    {TTH_OP_AVG_POOL2D, F "[1,8,7,7]", "{\"pool_size\": [3,3], \"padding\": [1,1,1,1], \"count_include_pad\": false}",
     F "[1, 8, 7, 7]"},
    {TTH_OP_AVG_POOL2D, "int32[1,1,4,4]", "{\"pool_size\": [2,2], \"strides\": [2,2]}", "int32[1, 1, 2, 2]"},
    {TTH_OP_AVG_POOL2D, "bool[1,1,4,4]", "{\"pool_size\": [2,2]}",
     "!nn.avg_pool2d: argument 0 must be numeric, got bool (arguments: bool[1, 1, 4, 4])"},
    {TTH_OP_GLOBAL_AVG_POOL2D, F "[2,8,7,7]", NULL, F "[2, 8, 1, 1]"},
    {TTH_OP_GLOBAL_MAX_POOL2D, "int8[1,16,3,3]", NULL, "int8[1, 16, 1, 1]"},
    {TTH_OP_GLOBAL_AVG_POOL2D, F "[2,8]", NULL,
     "!nn.global_avg_pool2d: argument 0 must have rank 4 (NCHW), got rank 2 (arguments: float32[2, 8])"},
    /* normalization */
    {TTH_OP_BATCH_NORM, F "[1,3,4,4]; " F "[3]; " F "[3]; " F "[3]; " F "[3]", "{\"epsilon\": 0.001}", F "[1, 3, 4, 4]"},
    {TTH_OP_BATCH_NORM, F "[1,3,4,4]; " F "[3]; " F "[3]; " F "[3]; " F "[4]", NULL,
     "!nn.batch_norm: var must have shape [3] (the channels of x) (arguments: float32[1, 3, 4, 4], float32[3], "
     "float32[3], float32[3], float32[4])"},
    {TTH_OP_SOFTMAX, F "[2,5]", "{\"axis\": -1}", F "[2, 5]"},
    {TTH_OP_SOFTMAX, F "[2,5]", "{\"axis\": 2}",
     "!nn.softmax: attribute 'axis' = 2 is out of range for rank 2 (arguments: float32[2, 5])"},
    {TTH_OP_SOFTMAX, F "[2,5]", NULL, "!nn.softmax: missing required attribute 'axis'"},
    {TTH_OP_LOG_SOFTMAX, F "[2,5]", "{\"axis\": 1}", F "[2, 5]"},
    /* padding */
    {TTH_OP_PAD, F "[1,3,4,4]", "{\"pad_before\": [0,0,1,2], \"pad_after\": [0,0,1,0]}", F "[1, 3, 6, 6]"},
    {TTH_OP_PAD, F "[1,3,4,4]", "{\"pad_before\": [0,0,1,1], \"pad_after\": [0,0,3,3], \"mode\": \"edge\", \"pad_value\": 0}",
     F "[1, 3, 8, 8]"},
    {TTH_OP_PAD, F "[1,3,4,4]", "{\"pad_before\": [0,0,4,0], \"pad_after\": [0,0,0,0], \"mode\": \"reflect\"}",
     "!nn.pad: reflect padding of dimension 2 must be smaller than its size 4 (arguments: float32[1, 3, 4, 4])"},
    {TTH_OP_PAD, F "[4,4]", "{\"pad_before\": [1], \"pad_after\": [1]}",
     "!nn.pad: pad_before and pad_after need one entry per dimension (2), got 1 and 1 (arguments: float32[4, 4])"},
    {TTH_OP_PAD, F "[4,4]", "{\"pad_before\": [0,0], \"pad_after\": [0,0], \"mode\": \"wrap\"}",
     "!nn.pad: attribute 'mode' must be one of: constant, reflect, edge"},
    /* shapes */
    {TTH_OP_RESHAPE, F "[2,3,4]", "{\"newshape\": [6,4]}", F "[6, 4]"},
    {TTH_OP_RESHAPE, F "[2,3,4]", "{\"newshape\": [5,5]}",
     "!reshape: cannot reshape 24 elements into float32[5, 5] (arguments: float32[2, 3, 4])"},
    {TTH_OP_RESHAPE, F "[2,3,4]", "{\"newshape\": [-1,4]}",
     "!reshape: newshape must be fully resolved (every entry >= 0), got -1 at 0"},
    {TTH_OP_TRANSPOSE, F "[2,3,4]", "{\"axes\": [2,0,1]}", F "[4, 2, 3]"},
    {TTH_OP_TRANSPOSE, F "[2,3,4]", NULL, F "[4, 3, 2]"},
    {TTH_OP_TRANSPOSE, F "[2,3,4]", "{\"axes\": [0,0,1]}",
     "!transpose: axes is not a permutation of 0..2 (arguments: float32[2, 3, 4])"},
    {TTH_OP_BROADCAST_TO, F "[3,1]", "{\"shape\": [2,3,4]}", F "[2, 3, 4]"},
    {TTH_OP_BROADCAST_TO, F "[3,1]", "{\"shape\": [2,4]}",
     "!broadcast_to: cannot broadcast to float32[2, 4] (arguments: float32[3, 1])"},
    {TTH_OP_CONCATENATE, F "[2,3]; " F "[2,5]; " F "[2,1]", "{\"axis\": 1}", F "[2, 9]"},
    {TTH_OP_CONCATENATE, F "[2,3]; " F "[1,3]", "{\"axis\": -2}", F "[3, 3]"},
    {TTH_OP_CONCATENATE, F "[2,3]; " F "[3,3]", "{\"axis\": 1}",
     "!concatenate: argument 1 differs from argument 0 in dimension 0 (not the axis 1) (arguments: float32[2, 3], "
     "float32[3, 3])"},
    {TTH_OP_CONCATENATE, F "[2,3]", NULL, "!concatenate: missing required attribute 'axis'"},
    {TTH_OP_SPLIT, F "[2,10]", "{\"axis\": 1, \"sizes\": [3,7]}", "(float32[2, 3], float32[2, 7])"},
    {TTH_OP_SPLIT, F "[2,10]", "{\"axis\": 1, \"sizes\": [3,3]}",
     "!split: sizes add up to 6 but axis 1 has 10 (arguments: float32[2, 10])"},
    {TTH_OP_SPLIT, F "[2,10]", "{\"axis\": 1}", "!split: missing required attribute 'sizes'"},
    {TTH_OP_STRIDED_SLICE, F "[10]", "{\"begin\": [9], \"end\": [-1], \"strides\": [-2]}", F "[5]"},
    {TTH_OP_STRIDED_SLICE, F "[10]", "{\"begin\": [1], \"end\": [8], \"strides\": [3]}", F "[3]"},
    {TTH_OP_STRIDED_SLICE, F "[4,6]", "{\"begin\": [0,5], \"end\": [4,0], \"strides\": [1,-1]}", F "[4, 5]"},
    {TTH_OP_STRIDED_SLICE, F "[4,6]", "{\"begin\": [1,2], \"end\": [3,6]}", F "[2, 4]"},
    {TTH_OP_STRIDED_SLICE, F "[4]", "{\"begin\": [3], \"end\": [1]}", F "[0]"},
    {TTH_OP_STRIDED_SLICE, F "[10]", "{\"begin\": [11], \"end\": [10]}",
     "!strided_slice: dimension 0: begin 11 and end 10 must lie in [0, 10] for a positive stride (arguments: "
     "float32[10])"},
    {TTH_OP_STRIDED_SLICE, F "[10]", "{\"begin\": [0], \"end\": [10], \"strides\": [0]}",
     "!strided_slice: strides must not be 0 (dimension 0)"},
    {TTH_OP_TAKE, F "[5,4]; int64[2,3]", "{\"axis\": 0}", F "[2, 3, 4]"},
    {TTH_OP_TAKE, F "[5,4]; int32[2,3]", "{\"axis\": 1}", F "[5, 2, 3]"},
    {TTH_OP_TAKE, F "[5,4]; int64[]", NULL, F "[4]"},
    {TTH_OP_TAKE, F "[5,4]; " F "[2]", NULL,
     "!take: indices must be int32 or int64, got float32 (arguments: float32[5, 4], float32[2])"},
    /* reductions */
    {TTH_OP_SUM, F "[2,3,4]", "{\"axis\": [1], \"keepdims\": false}", F "[2, 4]"},
    {TTH_OP_SUM, F "[2,3,4]", "{\"axis\": [1], \"keepdims\": true}", F "[2, 1, 4]"},
    {TTH_OP_SUM, F "[2,3,4]", "{\"axis\": [], \"keepdims\": false}", F "[]"},
    {TTH_OP_SUM, F "[2,3,4]", "{\"keepdims\": 1}", F "[1, 1, 1]"},
    {TTH_OP_MEAN, F "[2,3,4]", "{\"axis\": [-1, 0], \"keepdims\": 1}", F "[1, 3, 1]"},
    {TTH_OP_MAX, "int8[2,3]", "{\"axis\": [0], \"keepdims\": 0}", "int8[3]"},
    {TTH_OP_MIN, F "[2,3]", "{\"axis\": [1], \"keepdims\": 0}", F "[2]"},
    {TTH_OP_PROD, F "[2,3]", "{\"axis\": [0, 1], \"keepdims\": 0}", F "[]"},
    {TTH_OP_SUM, F "[2,3]", "{\"axis\": [1]}", "!sum: missing required attribute 'keepdims'"},
    {TTH_OP_SUM, F "[2,3]", "{\"axis\": [1, 1], \"keepdims\": 0}", "!sum: axis 1 is listed twice"},
    {TTH_OP_MEAN, F "[2,3]", "{\"axis\": [2], \"keepdims\": 0}",
     "!mean: attribute 'axis' = 2 is out of range for rank 2 (arguments: float32[2, 3])"},
    {TTH_OP_MAX, F "[2,0]", "{\"axis\": [1], \"keepdims\": 1}",
     "!max: cannot reduce the empty dimension 1 (arguments: float32[2, 0])"},
    {TTH_OP_SUM, F "[2,0]", "{\"axis\": [1], \"keepdims\": 1}", F "[2, 1]"},
    {TTH_OP_ARGMAX, F "[2,3,4]", "{\"axis\": 1, \"keepdims\": false}", "int64[2, 4]"},
    {TTH_OP_ARGMIN, "int32[2,3,4]", "{\"axis\": -1, \"keepdims\": true, \"select_last_index\": 1}", "int64[2, 3, 1]"},
    {TTH_OP_ARGMAX, F "[2,3]", "{\"axis\": 0}", "!argmax: missing required attribute 'keepdims'"},
    /* resize */
    {TTH_OP_RESIZE2D, F "[1,3,4,4]", "{\"size\": [8,8]}", F "[1, 3, 8, 8]"},
    {TTH_OP_RESIZE2D, F "[1,3,4,4]", "{\"size\": [2,6], \"method\": \"linear\", \"coordinate_transformation_mode\": \"align_corners\"}",
     F "[1, 3, 2, 6]"},
    {TTH_OP_RESIZE2D, F "[1,3,4,4]", "{\"size\": [8,8], \"method\": \"bicubic\"}",
     "!image.resize2d: attribute 'method' must be one of: nearest, linear, cubic"},
    {TTH_OP_RESIZE2D, F "[2,3,4,5]", "{\"size\": [3,7], \"method\": \"cubic\", \"cubic_coeff_a\": -0.5, \"exclude_outside\": true}",
     F "[2, 3, 3, 7]"},
    {TTH_OP_RESIZE2D, F "[1,3,4,4]", "{\"size\": [8,8], \"cubic_coeff_a\": -0.5}",
     "!image.resize2d: unknown attribute 'cubic_coeff_a'"},
    {TTH_OP_RESIZE2D, F "[1,1,4,4]", "{\"size\": [3,3], \"method\": \"linear\", \"coordinate_transformation_mode\": "
     "\"tf_crop_and_resize\", \"roi\": [0.4, 0.6, 1.2, 1.7], \"extrapolation_value\": 10}", F "[1, 1, 3, 3]"},
    {TTH_OP_RESIZE2D, F "[1,1,4,4]", "{\"size\": [3,3], \"coordinate_transformation_mode\": \"tf_crop_and_resize\"}",
     "!image.resize2d: missing required attribute 'roi'"},
    {TTH_OP_RESIZE2D, F "[1,1,4,4]", "{\"size\": [3,3], \"coordinate_transformation_mode\": \"tf_crop_and_resize\", "
     "\"roi\": [0, 1]}", "!image.resize2d: roi must be four numbers [h0, w0, h1, w1]"},
    {TTH_OP_RESIZE2D, F "[1,3,4,4]", "{\"size\": [0,8]}", "!image.resize2d: size must be >= 1, got [0, 8]"},
    /* quantized */
    {TTH_OP_QUANTIZE, F "[1,4,2,2]; " F "[]; int8[]", NULL, "int8[1, 4, 2, 2]"},
    {TTH_OP_QUANTIZE, F "[1,4,2,2]; " F "[4]; int8[4]", "{\"axis\": 1}", "int8[1, 4, 2, 2]"},
    {TTH_OP_QUANTIZE, F "[1,4,2,2]; " F "[1]; uint8[1]", "{\"out_dtype\": \"uint8\"}", "uint8[1, 4, 2, 2]"},
    {TTH_OP_QUANTIZE, F "[1,4,2,2]; " F "[5]; int8[5]", NULL,
     "!qnn.quantize: per-axis argument 1 has 5 elements but axis 1 of the input has 4 (arguments: "
     "float32[1, 4, 2, 2], float32[5], int8[5])"},
    {TTH_OP_QUANTIZE, F "[1,4,2,2]; " F "[]; int8[]", "{\"out_dtype\": \"uint8\"}",
     "!qnn.quantize: zero point (argument 2) must be uint8, got int8 (arguments: float32[1, 4, 2, 2], float32[], "
     "int8[])"},
    {TTH_OP_QUANTIZE, F "[4]; " F "[]; int8[]", "{\"out_dtype\": \"float32\"}",
     "!qnn.quantize: out_dtype must be int8, uint8, int16, uint16 or int32, got float32"},
    {TTH_OP_DEQUANTIZE, "uint8[2,3]; " F "[]; uint8[]", NULL, F "[2, 3]"},
    {TTH_OP_DEQUANTIZE, "int8[2,3]; " F "[3]; int8[3]", "{\"axis\": -1}", F "[2, 3]"},
    {TTH_OP_DEQUANTIZE, F "[2,3]; " F "[]; uint8[]", NULL,
     "!qnn.dequantize: x must be a quantized integer tensor, got float32 (arguments: float32[2, 3], float32[], uint8[])"},
    {TTH_OP_QNN_CONV2D, "int8[1,3,8,8]; int8[4,3,3,3]; int8[]; int8[4]", NULL, "int32[1, 4, 6, 6]"},
    {TTH_OP_QNN_CONV2D, "uint8[1,3,8,8]; int8[4,3,3,3]; uint8[]; int8[]", "{\"padding\": [1,1,1,1], \"strides\": [2,2]}",
     "int32[1, 4, 4, 4]"},
    {TTH_OP_QNN_CONV2D, "int8[1,3,8,8]; int8[4,3,3,3]; int8[]; int8[3]", NULL,
     "!qnn.conv2d: w_zero_point must be a scalar or have 4 elements (one per output channel) (arguments: "
     "int8[1, 3, 8, 8], int8[4, 3, 3, 3], int8[], int8[3])"},
    {TTH_OP_QNN_CONV2D, F "[1,3,8,8]; int8[4,3,3,3]; int8[]; int8[]", NULL,
     "!qnn.conv2d: argument 0 must be int8, uint8 or int16, got float32 (arguments: float32[1, 3, 8, 8], "
     "int8[4, 3, 3, 3], int8[], int8[])"},
    {TTH_OP_QNN_MATMUL, "uint8[2,3]; int8[3,4]; uint8[]; int8[]", NULL, "int32[2, 4]"},
    {TTH_OP_QNN_MATMUL, "int8[2,3]; int8[3,4]; int8[2]; int8[4]", NULL, "int32[2, 4]"},
    {TTH_OP_REQUANTIZE, "int32[1,4]; " F "[4]; int32[]; " F "[]; int8[]", "{\"out_dtype\": \"int8\"}", "int8[1, 4]"},
    {TTH_OP_REQUANTIZE, "int32[1,4]; " F "[]; int32[]; " F "[]; int8[]", NULL,
     "!qnn.requantize: missing required attribute 'out_dtype'"},
    {TTH_OP_REQUANTIZE, F "[1,4]; " F "[]; int32[]; " F "[]; int8[]", "{\"out_dtype\": \"int8\"}",
     "!qnn.requantize: x must be int32, got float32 (arguments: float32[1, 4], float32[], int32[], float32[], int8[])"},
};

/* "float32[1,3]" -> a tensor rtype. */
static void parse_type(const char *s, tth_rtype *t)
{
    char dt[32];
    size_t n = strcspn(s, "[");
    cr_assert(n < sizeof dt, "bad type text %s", s);
    memcpy(dt, s, n);
    dt[n] = '\0';
    memset(t, 0, sizeof *t);
    t->nfields = -1;
    t->tensor.dtype = tth_dtype_from_name(dt);
    cr_assert_neq(t->tensor.dtype, TTH_DTYPE_INVALID, "bad dtype in %s", s);
    const char *p = s + n + 1;
    while (*p && *p != ']') {
        char *end;
        t->tensor.shape[t->tensor.rank++] = strtoll(p, &end, 10);
        p = end;
        if (*p == ',')
            p++;
    }
}

static size_t parse_args(const char *text, tth_rtype *types)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", text);
    size_t n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
        while (*tok == ' ')
            tok++;
        parse_type(tok, &types[n++]);
    }
    return n;
}

static void format_rtype(const tth_rtype *t, char *buf, size_t len)
{
    if (t->nfields < 0) {
        tth_ttype_format(&t->tensor, buf, len);
        return;
    }
    size_t n = (size_t)snprintf(buf, len, "(");
    for (int32_t i = 0; i < t->nfields; i++) {
        if (i)
            n += (size_t)snprintf(buf + n, len - n, ", ");
        n += tth_ttype_format(&t->fields[i], buf + n, len - n);
    }
    snprintf(buf + n, len - n, ")");
}

Test(relay_ops, every_case_of_the_table)
{
    tth_arena *arena = tth_arena_new();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const op_case *c = &cases[i];
        tth_rtype types[8];
        const tth_rtype *ptrs[8];
        size_t n = parse_args(c->args, types);
        for (size_t k = 0; k < n; k++)
            ptrs[k] = &types[k];
        json_error_t jerr;
        json_t *attrs = c->attrs ? json_loads(c->attrs, 0, &jerr) : NULL;
        cr_assert(!c->attrs || attrs, "case %zu: bad attrs JSON", i);
        tth_rtype out;
        tth_diag d;
        tth_diag_clear(&d);
        int rc = tth_relay_infer(c->op, ptrs, n, attrs, &out, arena, &d);
        json_decref(attrs);
        if (c->expect[0] == '!') {
            cr_expect_neq(rc, 0, "case %zu (%s %s): expected an error", i, tth_op_name(c->op), c->args);
            cr_expect_str_eq(d.message, c->expect + 1, "case %zu (%s %s)", i, tth_op_name(c->op), c->args);
            cr_expect_str_eq(d.location, tth_op_name(c->op), "case %zu", i);
            cr_expect(d.code == TTH_ETYPE || d.code == TTH_EINVAL, "case %zu: code %d", i, d.code);
        } else {
            cr_expect_eq(rc, 0, "case %zu (%s %s): %s", i, tth_op_name(c->op), c->args, d.message);
            if (rc == 0) {
                char got[256];
                format_rtype(&out, got, sizeof got);
                cr_expect_str_eq(got, c->expect, "case %zu (%s %s)", i, tth_op_name(c->op), c->args);
            }
        }
    }
    tth_arena_free(arena);
}

Test(relay_ops, every_op_has_a_passing_case)
{
    int seen[TTH_OP_COUNT_] = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (cases[i].expect[0] != '!')
            seen[cases[i].op] = 1;
    for (int op = 1; op < TTH_OP_COUNT_; op++)
        cr_expect(seen[op], "no passing case for %s", tth_op_name((tth_op)op));
}

Test(relay_ops, table_functions)
{
    cr_assert_str_eq(tth_op_name(TTH_OP_CONV2D), "nn.conv2d");
    cr_assert_eq(tth_op_from_name("nn.conv2d"), TTH_OP_CONV2D);
    cr_assert_eq(tth_op_from_name("qnn.requantize"), TTH_OP_REQUANTIZE);
    cr_assert_eq(tth_op_from_name("conv2d"), TTH_OP_INVALID);
    cr_assert_str_eq(tth_op_name(TTH_OP_INVALID), "invalid");
    cr_assert_str_eq(tth_op_name(TTH_OP_COUNT_), "invalid");
    cr_assert(strstr(tth_op_doc(TTH_OP_CONV2D), "padding") != NULL);
    for (int op = 1; op < TTH_OP_COUNT_; op++)
        cr_assert_eq(tth_op_from_name(tth_op_name((tth_op)op)), op);
    cr_assert(tth_op_is_elementwise(TTH_OP_ADD));
    cr_assert(tth_op_is_elementwise(TTH_OP_CLIP));
    cr_assert(tth_op_is_elementwise(TTH_OP_REQUANTIZE));
    cr_assert_not(tth_op_is_elementwise(TTH_OP_CONV2D));
    cr_assert_not(tth_op_is_elementwise(TTH_OP_SPLIT));
    cr_assert_not(tth_op_is_elementwise(TTH_OP_SOFTMAX));
    cr_assert_not(tth_op_is_elementwise(TTH_OP_INVALID));
}

Test(relay_ops, unknown_attribute_hint_lists_known_ones)
{
    tth_rtype x = {.nfields = -1, .tensor = {TTH_F32, 2, {2, 3}}};
    const tth_rtype *a[1] = {&x};
    json_t *attrs = json_pack("{s:i, s:b}", "axes", 1, "keepdims", 1);
    tth_rtype out;
    tth_diag d;
    cr_assert_eq(tth_relay_infer(TTH_OP_SUM, a, 1, attrs, &out, NULL, &d), TTH_EINVAL);
    cr_assert_str_eq(d.message, "sum: unknown attribute 'axes'");
    cr_assert_str_eq(d.hint, "known attributes: axis, keepdims");
    json_decref(attrs);
    attrs = json_pack("{s:i}", "x", 1);
    cr_assert_eq(tth_relay_infer(TTH_OP_EXP, a, 1, attrs, &out, NULL, &d), TTH_EINVAL);
    cr_assert_str_eq(d.hint, "exp takes no attributes");
    json_decref(attrs);
}

Test(relay_ops, tuple_argument_is_refused)
{
    tth_ttype f[2] = {{TTH_F32, 1, {2}}, {TTH_F32, 1, {2}}};
    tth_rtype tup = {.nfields = 2, .fields = f};
    tth_rtype x = {.nfields = -1, .tensor = {TTH_F32, 1, {2}}};
    const tth_rtype *a[2] = {&x, &tup};
    tth_rtype out;
    tth_diag d;
    cr_assert_eq(tth_relay_infer(TTH_OP_ADD, a, 2, NULL, &out, NULL, &d), TTH_ETYPE);
    cr_assert_str_eq(d.message, "add: argument 1 is a tuple, expected a tensor (arguments: float32[2], (float32[2], float32[2]))");
}

/* Builders write every optional attribute's default into the node, so consumers never guess. */
static const struct {
    tth_op op;
    const char *args;
    const char *attrs;
    const char *filled;
} defaults[] = {
    {TTH_OP_CONV2D, F "[1,3,8,8]; " F "[4,3,3,3]", NULL,
     "{\"dilation\": [1, 1], \"groups\": 1, \"padding\": [0, 0, 0, 0], \"strides\": [1, 1]}"},
    {TTH_OP_CONV2D_TRANSPOSE, F "[1,4,5,5]; " F "[4,2,3,3]", "{\"strides\": [2, 2]}",
     "{\"dilation\": [1, 1], \"groups\": 1, \"output_padding\": [0, 0], \"padding\": [0, 0, 0, 0], \"strides\": [2, 2]}"},
    {TTH_OP_MAX_POOL2D, F "[1,1,4,4]", "{\"pool_size\": [2, 2]}",
     "{\"ceil_mode\": false, \"dilation\": [1, 1], \"padding\": [0, 0, 0, 0], \"pool_size\": [2, 2], \"strides\": [1, 1]}"},
    {TTH_OP_AVG_POOL2D, F "[1,1,4,4]", "{\"pool_size\": [2, 2]}",
     "{\"ceil_mode\": false, \"count_include_pad\": false, \"dilation\": [1, 1], \"padding\": [0, 0, 0, 0], "
     "\"pool_size\": [2, 2], \"strides\": [1, 1]}"},
    {TTH_OP_LEAKY_RELU, F "[2]", NULL, "{\"alpha\": 0.01}"},
    {TTH_OP_ELU, F "[2]", NULL, "{\"alpha\": 1.0}"},
    {TTH_OP_HARD_SIGMOID, F "[2]", NULL, "{\"alpha\": 0.20000000000000001, \"beta\": 0.5}"},
    {TTH_OP_THRESHOLDED_RELU, F "[2]", NULL, "{\"alpha\": 1.0}"},
    {TTH_OP_MOD, "int32[2]; int32[2]", NULL, "{\"fmod\": false}"},
    {TTH_OP_BATCH_NORM, F "[1,2]; " F "[2]; " F "[2]; " F "[2]; " F "[2]", NULL, "{\"epsilon\": 1.0000000000000001e-5}"},
    {TTH_OP_PAD, F "[2]", "{\"pad_before\": [1], \"pad_after\": [0]}",
     "{\"mode\": \"constant\", \"pad_after\": [0], \"pad_before\": [1], \"pad_value\": 0.0}"},
    {TTH_OP_TRANSPOSE, F "[2,3,4]", NULL, "{\"axes\": [2, 1, 0]}"},
    {TTH_OP_STRIDED_SLICE, F "[4,4]", "{\"begin\": [0, 1], \"end\": [4, 3]}",
     "{\"begin\": [0, 1], \"end\": [4, 3], \"strides\": [1, 1]}"},
    {TTH_OP_TAKE, F "[4]; int64[2]", NULL, "{\"axis\": 0}"},
    {TTH_OP_SUM, F "[2,3]", "{\"keepdims\": true}", "{\"axis\": [], \"keepdims\": true}"},
    {TTH_OP_ARGMAX, F "[2,3]", "{\"keepdims\": false}", "{\"axis\": 0, \"keepdims\": false, \"select_last_index\": false}"},
    {TTH_OP_RESIZE2D, F "[1,1,2,2]", "{\"size\": [4, 4]}",
     "{\"coordinate_transformation_mode\": \"half_pixel\", \"method\": \"nearest\", \"nearest_mode\": "
     "\"round_prefer_floor\", \"size\": [4, 4]}"},
    {TTH_OP_GRID_SAMPLE, F "[1,1,2,2]; " F "[1,3,3,2]", NULL,
     "{\"align_corners\": false, \"method\": \"linear\", \"padding_mode\": \"zeros\"}"},
    {TTH_OP_QUANTIZE, F "[2]; " F "[]; uint8[]", NULL, "{\"axis\": 1, \"out_dtype\": \"uint8\"}"},
    {TTH_OP_DEQUANTIZE, "int8[2]; " F "[]; int8[]", NULL, "{\"axis\": 1}"},
    {TTH_OP_REQUANTIZE, "int32[2]; " F "[]; int32[]; " F "[]; int8[]", "{\"out_dtype\": \"int8\"}",
     "{\"axis\": 1, \"out_dtype\": \"int8\"}"},
    {TTH_OP_ADD, F "[2]; " F "[2]", NULL, "{}"},
};

Test(relay_ops, builders_fill_defaults)
{
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++) {
        tth_relay_module *m = tth_relay_module_new("d");
        tth_rtype types[8];
        size_t n = parse_args(defaults[i].args, types);
        tth_rexpr *args[8];
        for (size_t k = 0; k < n; k++)
            args[k] = tth_relay_var(m, NULL, &types[k].tensor);
        tth_diag d;
        json_t *attrs = defaults[i].attrs ? json_loads(defaults[i].attrs, 0, NULL) : NULL;
        tth_rexpr *e = tth_relay_call(m, defaults[i].op, args, n, attrs, &d);
        cr_expect_not_null(e, "case %zu (%s): %s", i, tth_op_name(defaults[i].op), d.message);
        if (e) {
            char *got = json_dumps(e->u.call.attrs, JSON_SORT_KEYS);
            cr_expect_str_eq(got, defaults[i].filled, "case %zu (%s)", i, tth_op_name(defaults[i].op));
            free(got);
            /* The filled attrs pass the relation again unchanged. */
            const tth_rtype *pt[8];
            for (size_t k = 0; k < n; k++)
                pt[k] = &args[k]->type;
            tth_rtype out;
            cr_expect_eq(tth_relay_infer(defaults[i].op, pt, n, e->u.call.attrs, &out, m->arena, &d), 0, "%s", d.message);
        }
        tth_relay_module_free(m);
    }
}

/* tth_window_attrs_of: the one reader of conv and pool windows (lowering, folding and the NPU
 * plugins all use it) fills the relation's defaults and refuses what the relation refuses. */
static int window_of(tth_op op, const char *attrs_json, tth_window_attrs *a, tth_diag *d)
{
    json_t *at = json_loads(attrs_json, 0, NULL);
    cr_assert_not_null(at, "bad JSON in the test: %s", attrs_json);
    int rc = tth_window_attrs_of(op, at, a, d);
    json_decref(at);
    return rc;
}

Test(relay_ops, window_attrs_defaults_and_values)
{
    tth_window_attrs a;
    tth_diag d;
    cr_assert_eq(window_of(TTH_OP_CONV2D, "{}", &a, &d), 0, "%s", d.message);
    cr_assert(a.strides[0] == 1 && a.strides[1] == 1 && a.dilation[0] == 1 && a.dilation[1] == 1 && a.groups == 1);
    cr_assert(a.padding[0] == 0 && a.padding[1] == 0 && a.padding[2] == 0 && a.padding[3] == 0);
    cr_assert_eq(window_of(TTH_OP_CONV2D_TRANSPOSE,
                           "{\"strides\": [2, 3], \"padding\": [1, 2, 3, 4], \"dilation\": [1, 2], \"groups\": 2, "
                           "\"output_padding\": [1, 0]}", &a, &d), 0, "%s", d.message);
    cr_assert(a.strides[0] == 2 && a.strides[1] == 3 && a.dilation[1] == 2 && a.groups == 2);
    cr_assert(a.padding[0] == 1 && a.padding[1] == 2 && a.padding[2] == 3 && a.padding[3] == 4);
    cr_assert(a.output_padding[0] == 1 && a.output_padding[1] == 0);
    cr_assert_eq(window_of(TTH_OP_AVG_POOL2D, "{\"pool_size\": [3, 2], \"ceil_mode\": true, \"count_include_pad\": true}",
                           &a, &d), 0, "%s", d.message);
    cr_assert(a.pool_size[0] == 3 && a.pool_size[1] == 2 && a.ceil_mode && a.count_include_pad && a.groups == 1);
    cr_assert(a.strides[0] == 1 && a.padding[3] == 0);
}

Test(relay_ops, window_attrs_refuse_what_the_relation_refuses)
{
    static const struct {
        tth_op op;
        const char *attrs, *says;
    } bad[] = {
        {TTH_OP_CONV2D, "{\"padding\": [1, 1]}", "padding"},           /* [h, w] is not a window */
        {TTH_OP_CONV2D, "{\"strides\": [0, 1]}", "strides"},
        {TTH_OP_QNN_CONV2D, "{\"dilation\": [1, -1]}", "dilation"},
        {TTH_OP_CONV2D, "{\"groups\": 0}", "groups"},
        {TTH_OP_CONV2D, "{\"padding\": [0, 0, -1, 0]}", "padding"},
        {TTH_OP_CONV2D_TRANSPOSE, "{\"strides\": [2, 2], \"output_padding\": [2, 0]}", "output_padding"},
        {TTH_OP_MAX_POOL2D, "{}", "pool_size"},
        {TTH_OP_MAX_POOL2D, "{\"pool_size\": [0, 2]}", "pool_size"},
        {TTH_OP_ADD, "{}", "no window"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tth_window_attrs a;
        tth_diag d;
        cr_assert_eq(window_of(bad[i].op, bad[i].attrs, &a, &d), TTH_EINVAL, "%s %s was accepted", tth_op_name(bad[i].op),
                     bad[i].attrs);
        cr_assert(strstr(d.message, bad[i].says), "%s %s: '%s' does not name %s", tth_op_name(bad[i].op), bad[i].attrs,
                  d.message, bad[i].says);
        /* the type relation refuses the same attributes */
        if (bad[i].op != TTH_OP_ADD) {
            json_t *at = json_loads(bad[i].attrs, 0, NULL);
            tth_rtype x = {.nfields = -1, .tensor = {.dtype = TTH_F32, .rank = 4, .shape = {1, 4, 8, 8}}};
            tth_rtype w = {.nfields = -1, .tensor = {.dtype = TTH_F32, .rank = 4, .shape = {4, 4, 3, 3}}};
            if (bad[i].op == TTH_OP_QNN_CONV2D)
                x.tensor.dtype = w.tensor.dtype = TTH_I8;
            const tth_rtype *args[4] = {&x, &w, &x, &x};
            tth_rtype out;
            tth_arena *arena = tth_arena_new();
            size_t nargs = bad[i].op == TTH_OP_MAX_POOL2D ? 1 : bad[i].op == TTH_OP_QNN_CONV2D ? 4 : 2;
            cr_assert_neq(tth_relay_infer(bad[i].op, args, nargs, at, &out, arena, &d), 0, "the relation accepted %s %s",
                          tth_op_name(bad[i].op), bad[i].attrs);
            tth_arena_free(arena);
            json_decref(at);
        }
    }
}

/* tth_resize2d_attrs_of and tth_resize_nearest: the one reader of image.resize2d's attributes and
 * the one nearest-index rule (the type relation, the lowering and the constant folder). */
/* tth_transpose_axes_of: the one reader of transpose's permutation (type relation, lowering,
 * constant folder): the reverse order when absent, negative entries from the end, and the same
 * refusals as the relation. */
Test(relay_ops, transpose_axes_one_reader)
{
    static const struct {
        const char *attrs;
        int32_t rank;
        int64_t want[4];
        const char *says; /* NULL: accepted */
    } tcases[] = {
        {"{}", 3, {2, 1, 0}, NULL},
        {"{\"axes\": [0, -1, 1]}", 3, {0, 2, 1}, NULL},
        {"{\"axes\": [3, 1, 0, 2]}", 4, {3, 1, 0, 2}, NULL},
        {"{\"axes\": [0, 0, 1]}", 3, {0}, "not a permutation"},
        {"{\"axes\": [0, 3, 1]}", 3, {0}, "not a permutation"},
        {"{\"axes\": [1, 0]}", 3, {0}, "2 entries"},
        {"{\"axes\": \"x\"}", 2, {0}, "axes"},
    };
    for (size_t i = 0; i < sizeof tcases / sizeof tcases[0]; i++) {
        json_t *at = json_loads(tcases[i].attrs, 0, NULL);
        cr_assert_not_null(at);
        int64_t axes[TTH_MAX_RANK];
        tth_diag d;
        tth_diag_clear(&d);
        int rc = tth_transpose_axes_of(at, tcases[i].rank, axes, &d);
        json_decref(at);
        if (!tcases[i].says) {
            cr_assert_eq(rc, 0, "%s: %s", tcases[i].attrs, d.message);
            for (int32_t k = 0; k < tcases[i].rank; k++)
                cr_assert_eq(axes[k], tcases[i].want[k], "%s: axes[%d] = %lld", tcases[i].attrs, (int)k, (long long)axes[k]);
        } else {
            cr_assert_eq(rc, TTH_EINVAL, "%s (rank %d) was accepted", tcases[i].attrs, (int)tcases[i].rank);
            cr_assert(strstr(d.message, tcases[i].says), "%s: '%s' does not say %s", tcases[i].attrs, d.message, tcases[i].says);
        }
    }
}

Test(relay_ops, resize2d_attrs_and_nearest_rule)
{
    static const int64_t in_hw[2] = {4, 5};
    tth_resize2d_attrs a;
    tth_diag d;
    json_t *at = json_loads("{\"size\": [8, 3]}", 0, NULL);
    cr_assert_eq(tth_resize2d_attrs_of(at, in_hw, &a, &d), 0, "%s", d.message);
    cr_assert(a.size[0] == 8 && a.size[1] == 3 && a.method == TTH_RESIZE_NEAREST &&
              a.nearest_mode == TTH_RESIZE_ROUND_PREFER_FLOOR);
    cr_assert_str_eq(a.coordinate_transformation_mode, "half_pixel");
    cr_assert_float_eq(a.scale[0], 2.0, 1e-12);  /* size / input without a scale attribute */
    cr_assert_float_eq(a.scale[1], 0.6, 1e-12);
    json_decref(at);
    at = json_loads("{\"size\": [2, 3], \"method\": \"linear\", \"coordinate_transformation_mode\": "
                    "\"align_corners\", \"nearest_mode\": \"ceil\", \"scale\": [0.6, 0.7]}", 0, NULL);
    cr_assert_eq(tth_resize2d_attrs_of(at, in_hw, &a, &d), 0, "%s", d.message);
    cr_assert(a.method == TTH_RESIZE_LINEAR && a.nearest_mode == TTH_RESIZE_CEIL);
    cr_assert_str_eq(a.coordinate_transformation_mode, "align_corners");
    cr_assert_float_eq(a.scale[0], 0.6, 1e-12);  /* the model's scale, not 2 / 4 */
    cr_assert_float_eq(a.scale[1], 0.7, 1e-12);
    json_decref(at);
    static const char *const bad[] = {"{\"size\": [0, 3]}", "{\"size\": [2, 3], \"method\": \"bicubic\"}",
                                      "{\"size\": [2, 3], \"scale\": [0, 1]}", "{}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        at = json_loads(bad[i], 0, NULL);
        cr_assert_eq(tth_resize2d_attrs_of(at, in_hw, &a, &d), TTH_EINVAL, "%s was accepted", bad[i]);
        json_decref(at);
    }
    /* ties: round_prefer_floor goes down, round_prefer_ceil up; whole coordinates stay; clamped */
    cr_assert_eq(tth_resize_nearest(TTH_RESIZE_ROUND_PREFER_FLOOR, 1.5, 4), 1);
    cr_assert_eq(tth_resize_nearest(TTH_RESIZE_ROUND_PREFER_CEIL, 1.5, 4), 2);
    cr_assert_eq(tth_resize_nearest(TTH_RESIZE_ROUND_PREFER_FLOOR, 1.6, 4), 2);
    cr_assert_eq(tth_resize_nearest(TTH_RESIZE_FLOOR, 1.9, 4), 1);
    cr_assert_eq(tth_resize_nearest(TTH_RESIZE_CEIL, 1.1, 4), 2);
    cr_assert_eq(tth_resize_nearest(TTH_RESIZE_CEIL, 2.0, 4), 2);
    cr_assert_eq(tth_resize_nearest(TTH_RESIZE_ROUND_PREFER_CEIL, -0.75, 4), 0);
    cr_assert_eq(tth_resize_nearest(TTH_RESIZE_CEIL, 3.2, 4), 3);
}

/* the taps of one output index (tth_resize_taps_at), the rule the constant folder and the
 * lowering share: cubic weights, exclude_outside, tf_crop_and_resize, tf_half_pixel_for_nn */
Test(relay_ops, resize_taps_rule)
{
    static const int64_t in_hw[2] = {4, 4};
    tth_resize2d_attrs a;
    tth_resize_taps t;
    tth_diag d;
    /* cubic, A = -0.75, source 1.25 (asymmetric, scale 0.8): inputs 0..3 at distances 1.25,
     * 0.25, 0.75, 1.75 */
    json_t *at = json_loads("{\"size\": [3, 3], \"method\": \"cubic\", \"coordinate_transformation_mode\": "
                            "\"asymmetric\", \"scale\": [0.8, 0.8]}", 0, NULL);
    cr_assert_eq(tth_resize2d_attrs_of(at, in_hw, &a, &d), 0, "%s", d.message);
    cr_assert(a.method == TTH_RESIZE_CUBIC && a.cubic_coeff_a == -0.75 && !a.exclude_outside);
    tth_resize_taps_at(&a, 1, 1, 4, &t);
    static const double w125[4] = {-0.10546875, 0.87890625, 0.26171875, -0.03515625};
    cr_assert(t.n == 4 && t.inside);
    for (int k = 0; k < 4; k++) {
        cr_assert_eq(t.idx[k], k);
        cr_assert_float_eq(t.w[k], w125[k], 1e-12, "tap %d: %g", k, t.w[k]);
    }
    json_decref(at);
    /* half_pixel 4 -> 8, output 1: source 0.25, taps -1..2; the edge tap clamps to 0, or with
     * exclude_outside weighs 0 and the others are scaled to sum 1 */
    at = json_loads("{\"size\": [8, 8], \"method\": \"cubic\"}", 0, NULL);
    cr_assert_eq(tth_resize2d_attrs_of(at, in_hw, &a, &d), 0, "%s", d.message);
    tth_resize_taps_at(&a, 0, 1, 4, &t);
    cr_assert(t.idx[0] == 0 && t.idx[1] == 0 && t.idx[3] == 2);
    cr_assert_float_eq(t.w[0], w125[0], 1e-12);
    json_decref(at);
    at = json_loads("{\"size\": [8, 8], \"method\": \"cubic\", \"exclude_outside\": 1, \"cubic_coeff_a\": -0.5}", 0, NULL);
    cr_assert_eq(tth_resize2d_attrs_of(at, in_hw, &a, &d), 0, "%s", d.message);
    cr_assert(a.exclude_outside && a.cubic_coeff_a == -0.5);
    tth_resize_taps_at(&a, 0, 1, 4, &t);
    /* A = -0.5 at distances 0.25, 0.75, 1.75 */
    double w1 = 1.5 * 0.015625 - 2.5 * 0.0625 + 1, w2 = 1.5 * 0.421875 - 2.5 * 0.5625 + 1;
    double w3 = -0.5 * (5.359375 - 15.3125 + 14 - 4), sum = w1 + w2 + w3;
    cr_assert_float_eq(t.w[0], 0.0, 1e-15);
    cr_assert_float_eq(t.w[1], w1 / sum, 1e-12);
    cr_assert_float_eq(t.w[2], w2 / sum, 1e-12);
    cr_assert_float_eq(t.w[3], w3 / sum, 1e-12);
    json_decref(at);
    /* tf_crop_and_resize, roi h 0.4..1.2, w 0.6..1.7 of 3 (in - 1): rows at 1.2, 2.4, 3.6 (outside),
     * columns at 1.8, 3.45 (outside), 5.1 (outside) */
    at = json_loads("{\"size\": [3, 3], \"method\": \"linear\", \"coordinate_transformation_mode\": "
                    "\"tf_crop_and_resize\", \"roi\": [0.4, 0.6, 1.2, 1.7], \"extrapolation_value\": 10}", 0, NULL);
    cr_assert_eq(tth_resize2d_attrs_of(at, in_hw, &a, &d), 0, "%s", d.message);
    cr_assert_float_eq(a.extrapolation_value, 10.0, 1e-12);
    tth_resize_taps_at(&a, 0, 1, 4, &t);
    cr_assert(t.n == 2 && t.inside && t.idx[0] == 2 && t.idx[1] == 3);
    cr_assert_float_eq(t.w[1], 0.4, 1e-9);
    tth_resize_taps_at(&a, 0, 2, 4, &t);
    cr_assert(!t.inside && t.w[0] == 0 && t.w[1] == 0);
    tth_resize_taps_at(&a, 1, 0, 4, &t);
    cr_assert(t.inside && t.idx[0] == 1);
    cr_assert_float_eq(t.w[1], 0.8, 1e-9);
    tth_resize_taps_at(&a, 1, 1, 4, &t);
    cr_assert(!t.inside);
    json_decref(at);
    /* tf_half_pixel_for_nn 4 -> 3: source (0 + 0.5) / 0.75 = 0.67 reads 1 (half_pixel: 0.17, 0) */
    at = json_loads("{\"size\": [3, 3], \"coordinate_transformation_mode\": \"tf_half_pixel_for_nn\"}", 0, NULL);
    cr_assert_eq(tth_resize2d_attrs_of(at, in_hw, &a, &d), 0, "%s", d.message);
    tth_resize_taps_at(&a, 0, 0, 4, &t);
    cr_assert(t.n == 1 && t.idx[0] == 1 && t.w[0] == 1);
    json_decref(at);
}

/* tth_clip_attrs_of and tth_pad_attrs_of: the one reader of clip's bounds and of nn.pad's
 * attributes (type relation, lowering, QDQ pass, pad folder, the NPU plugins' rules). */
Test(relay_ops, clip_and_pad_attrs_one_reader)
{
    static const struct {
        const char *attrs;
        double lo, hi;
        const char *says; /* NULL: accepted */
    } clips[] = {
        {"{\"a_min\": -1.5, \"a_max\": 6}", -1.5, 6, NULL},
        {"{\"a_min\": 0, \"a_max\": 0}", 0, 0, NULL},
        {"{\"a_min\": 2, \"a_max\": 1}", 0, 0, "greater than a_max"},
        {"{\"a_max\": 1}", 0, 0, "a_min"},
    };
    for (size_t i = 0; i < sizeof clips / sizeof clips[0]; i++) {
        json_t *at = json_loads(clips[i].attrs, 0, NULL);
        double lo = 0, hi = 0;
        tth_diag d;
        tth_diag_clear(&d);
        int rc = tth_clip_attrs_of(at, &lo, &hi, &d);
        json_decref(at);
        if (!clips[i].says) {
            cr_assert_eq(rc, 0, "%s: %s", clips[i].attrs, d.message);
            cr_assert(lo == clips[i].lo && hi == clips[i].hi, "%s: [%g, %g]", clips[i].attrs, lo, hi);
        } else {
            cr_assert_eq(rc, TTH_EINVAL, "%s was accepted", clips[i].attrs);
            cr_assert(strstr(d.message, clips[i].says), "%s: '%s' does not say %s", clips[i].attrs, d.message,
                      clips[i].says);
        }
    }
    static const struct {
        const char *attrs;
        int32_t rank;
        tth_pad_mode mode;
        double value;
        const char *says;
    } pads[] = {
        {"{\"pad_before\": [0, 1], \"pad_after\": [2, 0]}", 2, TTH_PAD_CONSTANT, 0, NULL},
        {"{\"pad_before\": [1], \"pad_after\": [1], \"mode\": \"reflect\", \"pad_value\": 3}", 1, TTH_PAD_REFLECT, 3,
         NULL},
        {"{\"pad_before\": [0], \"pad_after\": [0], \"mode\": \"edge\"}", 1, TTH_PAD_EDGE, 0, NULL},
        {"{\"pad_before\": [0, 1], \"pad_after\": [2, 0]}", 3, TTH_PAD_CONSTANT, 0, "one entry per dimension"},
        {"{\"pad_before\": [-1], \"pad_after\": [0]}", 1, TTH_PAD_CONSTANT, 0, ">= 0"},
        {"{\"pad_before\": [1], \"pad_after\": [1], \"mode\": \"wrap\"}", 1, TTH_PAD_CONSTANT, 0, "mode"},
    };
    for (size_t i = 0; i < sizeof pads / sizeof pads[0]; i++) {
        json_t *at = json_loads(pads[i].attrs, 0, NULL);
        tth_pad_attrs p;
        tth_diag d;
        tth_diag_clear(&d);
        int rc = tth_pad_attrs_of(at, pads[i].rank, &p, &d);
        json_decref(at);
        if (!pads[i].says) {
            cr_assert_eq(rc, 0, "%s: %s", pads[i].attrs, d.message);
            cr_assert(p.mode == pads[i].mode && p.value == pads[i].value, "%s: mode %d value %g", pads[i].attrs,
                      (int)p.mode, p.value);
        } else {
            cr_assert_eq(rc, TTH_EINVAL, "%s was accepted", pads[i].attrs);
            cr_assert(strstr(d.message, pads[i].says), "%s: '%s' does not say %s", pads[i].attrs, d.message,
                      pads[i].says);
        }
    }
    json_t *at = json_loads("{\"pad_before\": [0, 1], \"pad_after\": [2, 0]}", 0, NULL);
    tth_pad_attrs p;
    cr_assert_eq(tth_pad_attrs_of(at, 2, &p, NULL), 0);
    cr_assert(p.before[0] == 0 && p.before[1] == 1 && p.after[0] == 2 && p.after[1] == 0);
    json_decref(at);
}
