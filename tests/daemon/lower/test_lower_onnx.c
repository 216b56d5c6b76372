/* Every operator of TTH_RELAY_OPS lowered alone and run by the TIR interpreter against the ONNX
 * node test data (/usr/share/libonnx-testdata/data/node/<test>): the reference outputs were
 * produced by ONNX's own reference implementation, not by us.
 *
 * Each case names the ONNX test, the Relay op, the Relay attributes equivalent to the node's
 * attributes (read from its model.onnx), and which ONNX inputs become the Relay arguments:
 *   "N"   input N as a function parameter,  "cN"  input N as a constant (CONST buffer),
 *   "zN"  a zero scalar constant of input N's dtype (an absent ONNX zero point).
 * Attribute text may use $OUT (output 0's shape), $OUTHW (its last two dims), $INk (the scalar
 * value of input k), $INk_ARR (input k's values as an array), $PADB/$PADA (the two halves of an
 * ONNX pads input 1).
 *
 * Tolerance: float32/float64 |got - want| <= 1e-6 + 1e-5 * |want|; integers and bools exact. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lt_util.h"

#define RTOL 1e-5
#define ATOL 1e-6

static void append(char *buf, size_t len, const char *s)
{
    size_t n = strlen(buf);
    snprintf(buf + n, len - n, "%s", s);
}

static void arr_text(char *buf, size_t len, const tth_tensor *t, int64_t from, int64_t to)
{
    append(buf, len, "[");
    for (int64_t i = from; i < to; i++) {
        char num[64];
        if (tth_dtype_is_float(t->type.dtype))
            snprintf(num, sizeof num, "%s%.9g", i > from ? "," : "", tth_tensor_get_f64(t, i));
        else
            snprintf(num, sizeof num, "%s%lld", i > from ? "," : "", (long long)tth_tensor_get_i64(t, i));
        append(buf, len, num);
    }
    append(buf, len, "]");
}

static void shape_text(char *buf, size_t len, const tth_ttype *t, int from)
{
    append(buf, len, "[");
    for (int i = from; i < t->rank; i++) {
        char num[32];
        snprintf(num, sizeof num, "%s%lld", i > from ? "," : "", (long long)t->shape[i]);
        append(buf, len, num);
    }
    append(buf, len, "]");
}

/* expand the $ placeholders of an attribute template */
static void expand(const char *tmpl, const char *test, tth_tensor *out0, char *buf, size_t len)
{
    buf[0] = 0;
    for (const char *p = tmpl; *p;) {
        if (*p != '$') {
            char ch[2] = {*p++, 0};
            append(buf, len, ch);
            continue;
        }
        if (!strncmp(p, "$OUTHW", 6)) {
            shape_text(buf, len, &out0->type, out0->type.rank - 2);
            p += 6;
        } else if (!strncmp(p, "$OUT", 4)) {
            shape_text(buf, len, &out0->type, 0);
            p += 4;
        } else if (!strncmp(p, "$PADB", 5) || !strncmp(p, "$PADA", 5)) {
            tth_tensor *pads = lt_onnx_input(test, 1);
            cr_assert_not_null(pads);
            int64_t n = tth_ttype_numel(&pads->type);
            if (p[4] == 'B')
                arr_text(buf, len, pads, 0, n / 2);
            else
                arr_text(buf, len, pads, n / 2, n);
            tth_tensor_unref(pads);
            p += 5;
        } else if (!strncmp(p, "$IN", 3)) {
            int k = p[3] - '0';
            tth_tensor *t = lt_onnx_input(test, k);
            cr_assert_not_null(t, "%s: no input %d", test, k);
            p += 4;
            if (!strncmp(p, "_ARR", 4)) {
                arr_text(buf, len, t, 0, tth_ttype_numel(&t->type));
                p += 4;
            } else {
                char num[64];
                if (tth_dtype_is_float(t->type.dtype))
                    snprintf(num, sizeof num, "%.9g", tth_tensor_get_f64(t, 0));
                else
                    snprintf(num, sizeof num, "%lld", (long long)tth_tensor_get_i64(t, 0));
                append(buf, len, num);
            }
            tth_tensor_unref(t);
        } else {
            cr_assert_fail("bad placeholder in %s", tmpl);
        }
    }
}

static void run_case(const char *test, tth_op op, const char *attrs, const char *inputs, int nouts)
{
    if (!lt_onnx_available(test))
        cr_skip_test("ONNX test data %s/%s is not installed (Debian package libonnx-testdata)", LT_ONNX_DIR, test);
    tth_tensor *want[8] = {0};
    for (int k = 0; k < nouts; k++) {
        want[k] = lt_onnx_output(test, k);
        cr_assert_not_null(want[k], "%s: output_%d.pb missing", test, k);
    }
    char attr_text[4096];
    if (attrs)
        expand(attrs, test, want[0], attr_text, sizeof attr_text);
    lt_fn t;
    lt_init(&t);
    tth_rexpr *args[8];
    tth_tensor *in[8];
    size_t nargs = 0, nin = 0;
    char spec[128];
    snprintf(spec, sizeof spec, "%s", inputs);
    for (char *tok = strtok(spec, " "); tok; tok = strtok(NULL, " ")) {
        char kind = (tok[0] == 'c' || tok[0] == 'z') ? tok[0] : 'p';
        int k = atoi(kind == 'p' ? tok : tok + 1);
        tth_tensor *v = lt_onnx_input(test, k);
        cr_assert_not_null(v, "%s: input_%d.pb missing", test, k);
        char name[16];
        snprintf(name, sizeof name, "in%d", k);
        if (kind == 'p') {
            args[nargs++] = lt_param(&t, name, &v->type);
            in[nin++] = v;
        } else if (kind == 'c') {
            args[nargs++] = tth_relay_const(t.rm, v, name);
        } else {
            tth_ttype zt;
            memset(&zt, 0, sizeof zt);
            zt.dtype = v->type.dtype;
            tth_tensor_unref(v);
            args[nargs++] = tth_relay_const(t.rm, tth_tensor_new(&zt, NULL), "zero");
        }
    }
    tth_rexpr *body = lt_call(&t, op, args, nargs, attrs ? attr_text : NULL);
    int rc = lt_lower(&t, body);
    cr_assert_eq(rc, 0, "%s: lowering %s failed: %s (%s)", test, tth_op_name(op), t.diag.message, t.diag.location);
    tth_tensor *got[8] = {0};
    rc = lt_run(&t, in, got, (size_t)nouts);
    if (rc) {
        char *txt = tth_tir_print_func(t.pf);
        cr_log_error("%s", txt ? txt : "");
        free(txt);
    }
    cr_assert_eq(rc, 0, "%s: tir_eval failed: %s", test, t.diag.message);
    for (int k = 0; k < nouts; k++) {
        char msg[512];
        int c = lt_compare(got[k], want[k], RTOL, ATOL, msg, sizeof msg);
        if (c) {
            char *txt = tth_tir_print_func(t.pf);
            cr_log_error("%s", txt ? txt : "");
            free(txt);
        }
        cr_expect_eq(c, 0, "%s (%s) output %d: %s", test, tth_op_name(op), k, msg);
        tth_tensor_unref(got[k]);
        tth_tensor_unref(want[k]);
    }
    for (size_t i = 0; i < nin; i++)
        tth_tensor_unref(in[i]);
    lt_free(&t);
}

#define OX(test, op, attrs, inputs) \
    Test(onnx, test) { run_case(#test, TTH_OP_##op, attrs, inputs, 1); }
#define OXN(test, op, attrs, inputs, n) \
    Test(onnx, test) { run_case(#test, TTH_OP_##op, attrs, inputs, n); }

/* elementwise, binary */
OX(test_add, ADD, NULL, "0 1")
OX(test_add_bcast, ADD, NULL, "0 1")
OX(test_add_uint8, ADD, NULL, "0 1")
OX(test_sub_bcast, SUBTRACT, NULL, "0 1")
OX(test_sub_uint8, SUBTRACT, NULL, "0 1")
OX(test_mul_bcast, MULTIPLY, NULL, "0 c1")
OX(test_mul_uint8, MULTIPLY, NULL, "0 1")
OX(test_div_bcast, DIVIDE, NULL, "0 1")
OX(test_div_uint8, DIVIDE, NULL, "0 1")
OX(test_pow_bcast_array, POWER, NULL, "0 1")
OX(test_pow_types_int64_int64, POWER, NULL, "0 1")
OX(test_max_two_inputs, MAXIMUM, NULL, "0 1")
OX(test_max_int32, MAXIMUM, NULL, "0 1")
OX(test_min_uint8, MINIMUM, NULL, "0 1")
OX(test_mod_mixed_sign_int32, MOD, NULL, "0 1")
OX(test_mod_mixed_sign_int8, MOD, NULL, "0 1")
OX(test_mod_mixed_sign_int64, MOD, NULL, "0 1")
OX(test_mod_mixed_sign_float32, MOD, "{\"fmod\": true}", "0 1")
OX(test_mod_mixed_sign_float64, MOD, "{\"fmod\": true}", "0 1")
OX(test_mod_int64_fmod, MOD, "{\"fmod\": true}", "0 1")
OX(test_mod_broadcast, MOD, NULL, "0 1")
OX(test_mod_uint8, MOD, NULL, "0 1")
OX(test_prelu_broadcast, PRELU, NULL, "0 c1")
OX(test_prelu_example, PRELU, NULL, "0 1")
OX(test_equal_bcast, EQUAL, NULL, "0 1")
OX(test_less_bcast, LESS, NULL, "0 1")
OX(test_less_equal_bcast, LESS_EQUAL, NULL, "0 1")
OX(test_greater_bcast, GREATER, NULL, "0 1")
OX(test_greater_equal_bcast, GREATER_EQUAL, NULL, "0 1")
OX(test_and_bcast4v3d, LOGICAL_AND, NULL, "0 1")
OX(test_or_bcast3v1d, LOGICAL_OR, NULL, "0 1")
OX(test_xor_bcast4v2d, LOGICAL_XOR, NULL, "0 1")
OX(test_where_example, WHERE, NULL, "0 1 2")
OX(test_where_long_example, WHERE, NULL, "0 1 2")
/* elementwise, unary */
OX(test_neg, NEGATIVE, NULL, "0")
OX(test_abs, ABS, NULL, "0")
OX(test_sqrt, SQRT, NULL, "0")
OX(test_reciprocal, RECIPROCAL, NULL, "0")
OX(test_exp, EXP, NULL, "0")
OX(test_log, LOG, NULL, "0")
OX(test_sin, SIN, NULL, "0")
OX(test_cos, COS, NULL, "0")
OX(test_tanh, TANH, NULL, "0")
OX(test_sigmoid, SIGMOID, NULL, "0")
OX(test_erf, ERF, NULL, "0")
OX(test_floor, FLOOR, NULL, "0")
OX(test_ceil, CEIL, NULL, "0")
OX(test_round, ROUND, NULL, "0")
OX(test_sign, SIGN, NULL, "0")
OX(test_not_3d, LOGICAL_NOT, NULL, "0")
OX(test_relu, RELU, NULL, "0")
OX(test_leakyrelu, LEAKY_RELU, "{\"alpha\": 0.100000001}", "0")
OX(test_elu, ELU, "{\"alpha\": 2.0}", "0")
OX(test_selu, SELU, "{\"alpha\": 2.0, \"gamma\": 3.0}", "0")
OX(test_thresholdedrelu, THRESHOLDED_RELU, "{\"alpha\": 2.0}", "0")
OX(test_softplus, SOFTPLUS, NULL, "0")
OX(test_softsign, SOFTSIGN, NULL, "0")
OX(test_hardsigmoid, HARD_SIGMOID, "{\"alpha\": 0.5, \"beta\": 0.600000024}", "0")
OX(test_hardswish, HARD_SWISH, NULL, "0")
OX(test_clip, CLIP, "{\"a_min\": $IN1, \"a_max\": $IN2}", "0")
OX(test_clip_default_int8_min, CLIP, "{\"a_min\": $IN1, \"a_max\": 1e30}", "0")
OX(test_cast_FLOAT_to_DOUBLE, CAST, "{\"dtype\": \"float64\"}", "0")
OX(test_cast_DOUBLE_to_FLOAT, CAST, "{\"dtype\": \"float32\"}", "0")
/* convolution */
OX(test_basic_conv_with_padding, CONV2D, "{\"padding\": [1, 1, 1, 1]}", "0 c1")
OX(test_basic_conv_without_padding, CONV2D, NULL, "0 1")
OX(test_conv_with_strides_padding, CONV2D, "{\"strides\": [2, 2], \"padding\": [1, 1, 1, 1]}", "0 1")
OX(test_conv_with_strides_no_padding, CONV2D, "{\"strides\": [2, 2]}", "0 1")
OX(test_conv_with_strides_and_asymmetric_padding, CONV2D, "{\"strides\": [2, 2], \"padding\": [1, 0, 1, 0]}", "0 1")
OX(test_conv_with_autopad_same, CONV2D, "{\"strides\": [2, 2], \"padding\": [1, 1, 1, 1]}", "0 1")
OX(test_convtranspose, CONV2D_TRANSPOSE, NULL, "0 1")
OX(test_convtranspose_pads, CONV2D_TRANSPOSE, "{\"strides\": [3, 2], \"padding\": [1, 2, 1, 2]}", "0 c1")
OX(test_convtranspose_dilations, CONV2D_TRANSPOSE, "{\"dilation\": [2, 2]}", "0 1")
OX(test_convtranspose_kernel_shape, CONV2D_TRANSPOSE, "{\"strides\": [3, 2], \"output_padding\": [1, 1]}", "0 1")
/* matmul */
OX(test_matmul_2d, MATMUL, NULL, "0 1")
OX(test_matmul_3d, MATMUL, NULL, "0 1")
OX(test_matmul_4d, MATMUL, NULL, "0 c1")
/* pooling */
OX(test_maxpool_2d_default, MAX_POOL2D, "{\"pool_size\": [2, 2]}", "0")
OX(test_maxpool_2d_pads, MAX_POOL2D, "{\"pool_size\": [3, 3], \"padding\": [2, 2, 2, 2]}", "0")
OX(test_maxpool_2d_strides, MAX_POOL2D, "{\"pool_size\": [5, 5], \"strides\": [3, 3]}", "0")
OX(test_maxpool_2d_ceil, MAX_POOL2D, "{\"pool_size\": [3, 3], \"strides\": [2, 2], \"ceil_mode\": true}", "0")
OX(test_maxpool_2d_dilations, MAX_POOL2D, "{\"pool_size\": [2, 2], \"dilation\": [2, 2]}", "0")
OX(test_maxpool_2d_precomputed_pads, MAX_POOL2D, "{\"pool_size\": [5, 5], \"padding\": [2, 2, 2, 2]}", "0")
OX(test_maxpool_2d_precomputed_same_upper, MAX_POOL2D,
   "{\"pool_size\": [3, 3], \"strides\": [2, 2], \"padding\": [1, 1, 1, 1]}", "0")
OX(test_maxpool_2d_uint8, MAX_POOL2D, "{\"pool_size\": [5, 5], \"padding\": [2, 2, 2, 2]}", "0")
OX(test_averagepool_2d_default, AVG_POOL2D, "{\"pool_size\": [2, 2]}", "0")
OX(test_averagepool_2d_pads, AVG_POOL2D, "{\"pool_size\": [3, 3], \"padding\": [2, 2, 2, 2]}", "0")
OX(test_averagepool_2d_pads_count_include_pad, AVG_POOL2D,
   "{\"pool_size\": [3, 3], \"padding\": [2, 2, 2, 2], \"count_include_pad\": true}", "0")
OX(test_averagepool_2d_precomputed_pads_count_include_pad, AVG_POOL2D,
   "{\"pool_size\": [5, 5], \"padding\": [2, 2, 2, 2], \"count_include_pad\": true}", "0")
OX(test_averagepool_2d_strides, AVG_POOL2D, "{\"pool_size\": [5, 5], \"strides\": [3, 3]}", "0")
OX(test_averagepool_2d_ceil, AVG_POOL2D, "{\"pool_size\": [3, 3], \"strides\": [2, 2], \"ceil_mode\": true}", "0")
OX(test_averagepool_2d_precomputed_same_upper, AVG_POOL2D,
   "{\"pool_size\": [3, 3], \"strides\": [2, 2], \"padding\": [1, 1, 1, 1]}", "0")
OX(test_averagepool_2d_same_lower, AVG_POOL2D, "{\"pool_size\": [2, 2], \"padding\": [1, 1, 0, 0]}", "0")
OX(test_globalaveragepool, GLOBAL_AVG_POOL2D, NULL, "0")
OX(test_globalmaxpool, GLOBAL_MAX_POOL2D, NULL, "0")
/* normalisation, softmax */
OX(test_batchnorm_example, BATCH_NORM, NULL, "0 c1 c2 c3 c4")
OX(test_batchnorm_epsilon, BATCH_NORM, "{\"epsilon\": 0.00999999978}", "0 1 2 3 4")
OX(test_softmax_axis_0, SOFTMAX, "{\"axis\": 0}", "0")
OX(test_softmax_axis_1, SOFTMAX, "{\"axis\": 1}", "0")
OX(test_softmax_axis_2, SOFTMAX, "{\"axis\": 2}", "0")
OX(test_softmax_negative_axis, SOFTMAX, "{\"axis\": -1}", "0")
OX(test_softmax_large_number, SOFTMAX, "{\"axis\": -1}", "0")
OX(test_logsoftmax_axis_0, LOG_SOFTMAX, "{\"axis\": 0}", "0")
OX(test_logsoftmax_axis_1, LOG_SOFTMAX, "{\"axis\": 1}", "0")
OX(test_logsoftmax_large_number, LOG_SOFTMAX, "{\"axis\": -1}", "0")
/* shape and data movement */
OX(test_constant_pad, PAD, "{\"pad_before\": $PADB, \"pad_after\": $PADA, \"pad_value\": $IN2}", "0")
OX(test_edge_pad, PAD, "{\"pad_before\": $PADB, \"pad_after\": $PADA, \"mode\": \"edge\"}", "0")
OX(test_reflect_pad, PAD, "{\"pad_before\": $PADB, \"pad_after\": $PADA, \"mode\": \"reflect\"}", "0")
OX(test_reshape_reordered_all_dims, RESHAPE, "{\"newshape\": $OUT}", "0")
OX(test_reshape_extended_dims, RESHAPE, "{\"newshape\": $OUT}", "0")
OX(test_reshape_reduced_dims, RESHAPE, "{\"newshape\": $OUT}", "c0")
OX(test_transpose_default, TRANSPOSE, NULL, "0")
OX(test_transpose_all_permutations_1, TRANSPOSE, "{\"axes\": [0, 2, 1]}", "0")
OX(test_transpose_all_permutations_3, TRANSPOSE, "{\"axes\": [1, 2, 0]}", "0")
OX(test_transpose_all_permutations_4, TRANSPOSE, "{\"axes\": [2, 0, 1]}", "0")
OX(test_expand_dim_changed, BROADCAST_TO, "{\"shape\": $OUT}", "0")
OX(test_expand_dim_unchanged, BROADCAST_TO, "{\"shape\": $OUT}", "0")
OX(test_concat_1d_axis_0, CONCATENATE, "{\"axis\": 0}", "0 1")
OX(test_concat_2d_axis_negative_1, CONCATENATE, "{\"axis\": -1}", "0 c1")
OX(test_concat_3d_axis_1, CONCATENATE, "{\"axis\": 1}", "0 1")
OX(test_concat_3d_axis_negative_3, CONCATENATE, "{\"axis\": -3}", "0 1")
OXN(test_split_equal_parts_1d, SPLIT, "{\"axis\": 0, \"sizes\": [2, 2, 2]}", "0", 3)
OXN(test_split_equal_parts_2d, SPLIT, "{\"axis\": 1, \"sizes\": [3, 3]}", "0", 2)
OXN(test_split_variable_parts_2d, SPLIT, "{\"axis\": 1, \"sizes\": $IN1_ARR}", "0", 2)
OX(test_slice, STRIDED_SLICE, "{\"begin\": [0, 0, 0], \"end\": [3, 10, 5], \"strides\": [1, 1, 1]}", "0")
OX(test_slice_neg_steps, STRIDED_SLICE, "{\"begin\": [19, 9, 4], \"end\": [0, 0, 1], \"strides\": [-1, -3, -2]}", "0")
OX(test_slice_default_steps, STRIDED_SLICE, "{\"begin\": [0, 0, 3], \"end\": [20, 10, 4], \"strides\": [1, 1, 1]}", "0")
OX(test_slice_end_out_of_bounds, STRIDED_SLICE, "{\"begin\": [0, 1, 0], \"end\": [20, 10, 5], \"strides\": [1, 1, 1]}", "0")
OX(test_gather_0, TAKE, "{\"axis\": 0}", "0 1")
OX(test_gather_1, TAKE, "{\"axis\": 1}", "0 1")
OX(test_gather_2d_indices, TAKE, "{\"axis\": 1}", "0 c1")
OX(test_gather_negative_indices, TAKE, "{\"axis\": 0}", "0 1")
/* reductions */
OX(test_reduce_sum_keepdims_random, SUM, "{\"axis\": $IN1_ARR, \"keepdims\": true}", "0")
OX(test_reduce_sum_do_not_keepdims_random, SUM, "{\"axis\": $IN1_ARR, \"keepdims\": false}", "0")
OX(test_reduce_sum_default_axes_keepdims_random, SUM, "{\"axis\": [], \"keepdims\": true}", "0")
OX(test_reduce_mean_keepdims_random, MEAN, "{\"axis\": [1], \"keepdims\": true}", "0")
OX(test_reduce_mean_do_not_keepdims_random, MEAN, "{\"axis\": [1], \"keepdims\": false}", "0")
OX(test_reduce_max_negative_axes_keepdims_random, MAX, "{\"axis\": [-2], \"keepdims\": true}", "0")
OX(test_reduce_min_do_not_keepdims_random, MIN, "{\"axis\": [1], \"keepdims\": false}", "0")
OX(test_reduce_prod_keepdims_random, PROD, "{\"axis\": [1], \"keepdims\": true}", "0")
OX(test_reduce_prod_default_axes_keepdims_random, PROD, "{\"keepdims\": true}", "0")
OX(test_argmax_keepdims_random, ARGMAX, "{\"axis\": 1, \"keepdims\": true}", "0")
OX(test_argmax_no_keepdims_example_select_last_index, ARGMAX,
   "{\"axis\": 1, \"keepdims\": false, \"select_last_index\": true}", "0")
OX(test_argmin_negative_axis_keepdims_random, ARGMIN, "{\"axis\": -1, \"keepdims\": true}", "0")
OX(test_argmin_default_axis_example_select_last_index, ARGMIN,
   "{\"axis\": 0, \"keepdims\": true, \"select_last_index\": true}", "0")
/* resize (the Relay size is the ONNX output's H and W) */
OX(test_resize_upsample_scales_nearest, RESIZE2D,
   "{\"size\": $OUTHW, \"method\": \"nearest\", \"coordinate_transformation_mode\": \"half_pixel\"}", "0")
OX(test_resize_upsample_sizes_nearest, RESIZE2D,
   "{\"size\": $OUTHW, \"method\": \"nearest\", \"coordinate_transformation_mode\": \"half_pixel\"}", "0")
OX(test_resize_downsample_sizes_nearest, RESIZE2D,
   "{\"size\": $OUTHW, \"method\": \"nearest\", \"coordinate_transformation_mode\": \"half_pixel\"}", "0")
OX(test_resize_upsample_sizes_nearest_ceil_half_pixel, RESIZE2D,
   "{\"size\": $OUTHW, \"method\": \"nearest\", \"coordinate_transformation_mode\": \"half_pixel\", "
   "\"nearest_mode\": \"ceil\"}", "0")
OX(test_resize_upsample_sizes_nearest_floor_align_corners, RESIZE2D,
   "{\"size\": $OUTHW, \"method\": \"nearest\", \"coordinate_transformation_mode\": \"align_corners\", "
   "\"nearest_mode\": \"floor\"}", "0")
OX(test_resize_upsample_sizes_nearest_round_prefer_ceil_asymmetric, RESIZE2D,
   "{\"size\": $OUTHW, \"method\": \"nearest\", \"coordinate_transformation_mode\": \"asymmetric\", "
   "\"nearest_mode\": \"round_prefer_ceil\"}", "0")
OX(test_resize_upsample_scales_linear, RESIZE2D,
   "{\"size\": $OUTHW, \"method\": \"linear\", \"coordinate_transformation_mode\": \"half_pixel\"}", "0")
OX(test_resize_upsample_scales_linear_align_corners, RESIZE2D,
   "{\"size\": $OUTHW, \"method\": \"linear\", \"coordinate_transformation_mode\": \"align_corners\"}", "0")
OX(test_resize_downsample_sizes_linear_pytorch_half_pixel, RESIZE2D,
   "{\"size\": $OUTHW, \"method\": \"linear\", \"coordinate_transformation_mode\": \"pytorch_half_pixel\"}", "0")
/* quantized */
OX(test_quantizelinear, QUANTIZE, NULL, "0 1 2")
OX(test_quantizelinear_axis, QUANTIZE, "{\"axis\": 1}", "0 c1 c2")
OX(test_dequantizelinear, DEQUANTIZE, NULL, "0 1 2")
OX(test_dequantizelinear_axis, DEQUANTIZE, "{\"axis\": 1}", "0 c1 c2")
OX(test_basic_convinteger, QNN_CONV2D, NULL, "0 1 2 z1")
OX(test_convinteger_with_padding, QNN_CONV2D, "{\"padding\": [1, 1, 1, 1]}", "0 c1 2 z1")
OX(test_convinteger_without_padding, QNN_CONV2D, NULL, "0 1 2 z1")
OX(test_matmulinteger, QNN_MATMUL, NULL, "0 1 2 3")
