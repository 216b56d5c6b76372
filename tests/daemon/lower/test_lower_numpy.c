/* Lowering cases no ONNX node test covers (grouped, depthwise and dilated convolutions, grouped
 * conv_transpose with output_padding, broadcasting and 1-D matmul, per-axis quantization with
 * saturation, more resize modes, negative strides, ties in argmax/argmin, epilogues after
 * softmax and matmul, broadcasting chains), checked against numpy: numpy_ref.py computes each
 * reference from the operator's definition and writes it with its inputs and the Relay chain.
 * Cases marked "fold" (the resize ones) also go through the constant folder, which must give the
 * same output. The test is skipped when /usr/bin/python3 (or python3) cannot import numpy.
 * Tolerance: float32 |got - want| <= 1e-5 + 1e-5 * |want| (references are computed in float64,
 * the lowering accumulates in float32); integers exact. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "frontend.h"
#include "lt_util.h"

#define RTOL 1e-5
#define ATOL 1e-5

static char tmpdir[256];

static void cleanup(void)
{
    if (tmpdir[0]) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", tmpdir);
    }
}

/* run numpy_ref.py; returns its exit status (77: numpy missing) */
static int generate(const char *name)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tth-lower-np-XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
    const char *pys[2] = {"/usr/bin/python3", "python3"};
    int st = 77;
    for (int i = 0; i < 2; i++) {
        if (i == 0 && access(pys[0], X_OK) != 0)
            continue;
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "%s '%s/numpy_ref.py' '%s' '%s'", pys[i], LT_SOURCE_DIR, tmpdir, name);
        int rc = system(cmd);
        st = WIFEXITED(rc) ? WEXITSTATUS(rc) : 1;
        if (st != 77 && st != 127)
            break;
    }
    return st;
}

static tth_tensor *read_bin(const char *path, tth_dtype dt, const json_t *shape)
{
    tth_ttype t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.rank = (int32_t)json_array_size(shape);
    for (int i = 0; i < t.rank; i++)
        t.shape[i] = json_integer_value(json_array_get(shape, (size_t)i));
    tth_tensor *x = tth_tensor_new(&t, NULL);
    cr_assert_not_null(x);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    size_t n = fread(x->data, 1, x->nbytes, f);
    fclose(f);
    cr_assert_eq(n, x->nbytes, "%s: %zu bytes, expected %zu", path, n, x->nbytes);
    return x;
}

static tth_dtype np_dtype(const char *s)
{
    if (!strcmp(s, "bool"))
        return TTH_BOOL;
    tth_dtype d = tth_dtype_from_name(s);
    cr_assert_neq(d, TTH_DTYPE_INVALID, "dtype %s", s);
    return d;
}

/* got (float32) against a float64 reference: NaN where it is NaN, the same infinity where it
 * rounds to one, within one subnormal step (2^-149) where it is below the smallest normal float32,
 * else within `bound` float32 steps of it. The largest error seen is in the message. */
static int compare_ulp(const tth_tensor *got, const tth_tensor *want, double bound, char *msg, size_t len)
{
    int64_t n = tth_ttype_numel(&got->type);
    if (got->type.dtype != TTH_F32 || want->type.dtype != TTH_F64 || n != tth_ttype_numel(&want->type)) {
        snprintf(msg, len, "a float32 result and a float64 reference of one size are compared in ulps");
        return -1;
    }
    const float *g = got->data;
    const double *w = want->data;
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        float wf = (float)w[i];
        double err;
        if (isnan(w[i]) || isinf(wf)) {
            err = (isnan(w[i]) ? isnan(g[i]) : g[i] == wf) ? 0 : INFINITY;
        } else if (fabs(w[i]) < FLT_MIN) {
            err = fabs(g[i] - w[i]) / 0x1p-149 > 1.0 ? INFINITY : 0;
        } else {
            float a = fabsf(wf);
            err = fabs(g[i] - w[i]) / (double)(nextafterf(a, INFINITY) - a);
        }
        if (!(err <= bound)) {
            snprintf(msg, len, "element %lld: got %.9g, expected %.17g (%.3g ulp, bound %g)", (long long)i, g[i],
                     w[i], err, bound);
            return -1;
        }
        worst = err > worst ? err : worst;
    }
    snprintf(msg, len, "largest error %.3g ulp", worst);
    return 0;
}

/* build the chain of meta, lower it for target (label names it), run it in the interpreter and
 * compare with numpy's output */
static void check_with(const json_t *meta, const char *name, const json_t *target, const char *label)
{
    char path[1024];
    lt_fn t;
    lt_init(&t);
    t.target = target;
    const json_t *ins = json_object_get(meta, "inputs");
    tth_rexpr *nodes[16];
    tth_tensor *params[16];
    size_t np = 0;
    for (size_t k = 0; k < json_array_size(ins); k++) {
        const json_t *in = json_array_get(ins, k);
        snprintf(path, sizeof path, "%s/%s/in%zu.bin", tmpdir, name, k);
        tth_tensor *x = read_bin(path, np_dtype(json_string_value(json_object_get(in, "dtype"))),
                                 json_object_get(in, "shape"));
        char pname[16];
        snprintf(pname, sizeof pname, "in%u", (unsigned)k);
        if (json_is_true(json_object_get(in, "const"))) {
            nodes[k] = tth_relay_const(t.rm, x, pname);
        } else {
            nodes[k] = lt_param(&t, pname, &x->type);
            params[np++] = x;
        }
    }
    tth_rexpr *prev = NULL;
    const json_t *chain = json_object_get(meta, "chain");
    for (size_t i = 0; i < json_array_size(chain); i++) {
        const json_t *step = json_array_get(chain, i);
        const char *opname = json_string_value(json_object_get(step, "op"));
        tth_op op = tth_op_from_name(opname);
        cr_assert_neq(op, TTH_OP_INVALID, "unknown op %s", opname);
        const json_t *args = json_object_get(step, "args");
        tth_rexpr *a[8];
        for (size_t j = 0; j < json_array_size(args); j++) {
            const char *ref = json_string_value(json_array_get(args, j));
            a[j] = !strcmp(ref, "prev") ? prev : nodes[atoi(ref + 1)];
            cr_assert_not_null(a[j]);
        }
        char *attrs = json_dumps(json_object_get(step, "attrs"), JSON_COMPACT);
        prev = lt_call(&t, op, a, json_array_size(args), attrs);
        free(attrs);
    }
    int rc = lt_lower(&t, prev);
    cr_assert_eq(rc, 0, "%s [%s]: lowering failed: %s (%s)", name, label, t.diag.message, t.diag.location);
    tth_tensor *got;
    rc = lt_run(&t, params, &got, 1);
    cr_assert_eq(rc, 0, "%s [%s]: tir_eval failed: %s", name, label, t.diag.message);
    const json_t *out = json_array_get(json_object_get(meta, "outputs"), 0);
    snprintf(path, sizeof path, "%s/%s/out0.bin", tmpdir, name);
    tth_tensor *want = read_bin(path, np_dtype(json_string_value(json_object_get(out, "dtype"))),
                                json_object_get(out, "shape"));
    char msg[512];
    /* a case may allow a larger absolute error (Winograd: numpy_ref.py says how much), or give
     * a float64 reference and a bound in float32 steps (the math functions) */
    const json_t *atol = json_object_get(meta, "atol"), *ulp = json_object_get(meta, "ulp");
    int c = ulp ? compare_ulp(got, want, json_number_value(ulp), msg, sizeof msg)
                : lt_compare(got, want, RTOL, atol ? json_number_value(atol) : ATOL, msg, sizeof msg);
    if (!c && ulp)
        cr_log_info("%s [%s]: %s", name, label, msg);
    if (c) {
        char *txt = tth_tir_print_func(t.pf);
        cr_log_error("%s", txt ? txt : "");
        free(txt);
    }
    cr_expect_eq(c, 0, "%s [%s]: %s", name, label, msg);
    tth_tensor_unref(got);
    tth_tensor_unref(want);
    for (size_t i = 0; i < np; i++)
        tth_tensor_unref(params[i]);
    lt_free(&t);
}

/* the same chain with its inputs as constants through the constant folder (cases whose meta says
 * "fold"): the folded result must be a constant equal to numpy's output */
static void check_folded(const json_t *meta, const char *name)
{
    char path[1024];
    lt_fn t;
    lt_init(&t);
    const json_t *ins = json_object_get(meta, "inputs");
    tth_rexpr *nodes[16], *prev = NULL;
    for (size_t k = 0; k < json_array_size(ins) && k < 16; k++) {
        const json_t *in = json_array_get(ins, k);
        snprintf(path, sizeof path, "%s/%s/in%zu.bin", tmpdir, name, k);
        tth_tensor *x = read_bin(path, np_dtype(json_string_value(json_object_get(in, "dtype"))),
                                 json_object_get(in, "shape"));
        nodes[k] = tth_relay_const(t.rm, x, NULL);
    }
    const json_t *chain = json_object_get(meta, "chain");
    for (size_t i = 0; i < json_array_size(chain); i++) {
        const json_t *step = json_array_get(chain, i), *args = json_object_get(step, "args");
        tth_rexpr *a[8];
        for (size_t j = 0; j < json_array_size(args) && j < 8; j++) {
            const char *ref = json_string_value(json_array_get(args, j));
            a[j] = !strcmp(ref, "prev") ? prev : nodes[atoi(ref + 1)];
        }
        char *attrs = json_dumps(json_object_get(step, "attrs"), JSON_COMPACT);
        prev = lt_call(&t, tth_op_from_name(json_string_value(json_object_get(step, "op"))), a,
                       json_array_size(args), attrs);
        free(attrs);
    }
    tth_relay_function *fn = tth_relay_function_add(t.rm, "g", NULL, 0, prev, NULL, &t.diag);
    cr_assert_not_null(fn, "%s: %s", name, t.diag.message);
    cr_assert_eq(tth_relay_fold_constants(t.rm, &t.diag), 0, "%s: folding failed: %s", name, t.diag.message);
    cr_assert_eq(fn->body->kind, TTH_REXPR_CONST, "%s: the folder left the chain", name);
    const json_t *out = json_array_get(json_object_get(meta, "outputs"), 0);
    snprintf(path, sizeof path, "%s/%s/out0.bin", tmpdir, name);
    tth_tensor *want = read_bin(path, np_dtype(json_string_value(json_object_get(out, "dtype"))),
                                json_object_get(out, "shape"));
    char msg[512];
    cr_expect_eq(lt_compare(fn->body->u.constant.value, want, RTOL, ATOL, msg, sizeof msg), 0, "%s [folded]: %s",
                 name, msg);
    tth_tensor_unref(want);
    lt_free(&t);
}

static void run_np(const char *name)
{
    int st = generate(name);
    if (st == 77 || st == 127) {
        cleanup();
        cr_skip_test("numpy is not available (apt-get install python3-numpy)");
    }
    cr_assert_eq(st, 0, "numpy_ref.py %s failed with status %d", name, st);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/meta.json", tmpdir, name);
    json_error_t err;
    json_t *meta = json_load_file(path, 0, &err);
    cr_assert_not_null(meta, "%s: %s", path, err.text);
    check_with(meta, name, NULL, "c");
    if (json_is_true(json_object_get(meta, "fold")))
        check_folded(meta, name);
    /* convolutions, matmuls and pooling also at each vector shape of the tiled kernels
     * (docs/targets.md), and with several cores; the math functions also with fused
     * multiply-adds (AVX2, AVX-512, AArch64 have them; the default target and SSE2 do not) */
    int conv = !strncmp(name, "math_", 5);
    const json_t *steps = json_object_get(meta, "chain");
    for (size_t i = 0; i < json_array_size(steps); i++) {
        const char *op = json_string_value(json_object_get(json_array_get(steps, i), "op"));
        conv |= !strcmp(op, "nn.conv2d") || !strcmp(op, "qnn.conv2d") || !strcmp(op, "qnn.matmul") || !strcmp(op, "matmul") || !strcmp(op, "nn.max_pool2d") ||
                !strcmp(op, "nn.avg_pool2d") || !strcmp(op, "nn.global_avg_pool2d") || !strcmp(op, "nn.softmax") || !strcmp(op, "nn.log_softmax") ||
                !strcmp(op, "nn.layer_norm") || !strcmp(op, "nn.attention") || !strncmp(name, "concat_rows", 11) ||
                !strncmp(name, "pointwise_rows", 14);
    }
    static const char *const targets[][2] = {
        {"sse2", "{\"kind\":\"llvm\",\"keys\":[\"x86_64\",\"cpu\"],\"features\":{}}"},
        {"avx2", "{\"kind\":\"llvm\",\"keys\":[\"x86_64\",\"cpu\"],\"features\":{\"has_avx2\":true}}"},
        {"avx512", "{\"kind\":\"llvm\",\"keys\":[\"x86_64\",\"cpu\"],\"features\":{\"has_avx512\":true}}"},
        /* three cores: Winograd in bands (docs/lowering.md) */
        {"avx512x3", "{\"kind\":\"llvm\",\"keys\":[\"x86_64\",\"cpu\"],\"features\":{\"has_avx512\":true},"
                     "\"num-cores\":3}"},
        {"aarch64", "{\"kind\":\"llvm\",\"keys\":[\"arm_cpu\",\"cpu\"],\"features\":{\"has_asimd\":true,"
                    "\"is_aarch64\":true}}"},
        /* int8: usdot's operand order (docs/int8.md) */
        {"aarch64-i8mm", "{\"kind\":\"llvm\",\"keys\":[\"arm_cpu\",\"cpu\"],\"features\":{\"has_asimd\":true,"
                         "\"is_aarch64\":true,\"has_dotprod\":true,\"has_matmul_i8\":true}}"},
        /* int8 on targets with the dot-product instruction: the depthwise kernel's dot form
         * (docs/int8.md, "Depthwise in dot products") at 16, 8 and 4 lanes, sdot's signed bytes */
        {"avx512-vnni", "{\"kind\":\"llvm\",\"keys\":[\"x86_64\",\"cpu\"],\"features\":{\"has_avx512\":true,"
                        "\"has_avx512vnni\":true}}"},
        {"avx2-vnni", "{\"kind\":\"llvm\",\"keys\":[\"x86_64\",\"cpu\"],\"features\":{\"has_avx2\":true,"
                      "\"has_avxvnni\":true}}"},
        {"aarch64-dotprod", "{\"kind\":\"llvm\",\"keys\":[\"arm_cpu\",\"cpu\"],\"features\":{\"has_asimd\":true,"
                            "\"is_aarch64\":true,\"has_dotprod\":true}}"},
    };
    /* the last four targets differ only in their int8 kernels */
    size_t ntargets = sizeof targets / sizeof targets[0] - (strncmp(name, "qnn_", 4) ? 4 : 0);
    for (size_t i = 0; conv && i < ntargets; i++) {
        json_t *tg = json_loads(targets[i][1], 0, NULL);
        cr_assert_not_null(tg);
        check_with(meta, name, tg, targets[i][0]);
        json_decref(tg);
    }
    json_decref(meta);
    cleanup();
}

#define NP(name) \
    Test(numpy, name) { run_np(#name); }

NP(qnn_conv_dot_requant_clip)
NP(max_pool_rows_int8)
NP(max_pool_rows_uint8)
NP(qnn_conv_dot_requant_uint8)
NP(qnn_conv_dot_flat_uint8)
NP(qnn_conv_dot_flat_requant)
NP(qnn_conv_dot_grouped)
NP(qnn_conv_dot_grouped_1x1)
NP(qnn_conv_dot_dilated_rows)
NP(qnn_conv_dot_stride3_asym)
NP(qnn_conv_depthwise_int8)
NP(qnn_conv_depthwise_s2_uint8)
NP(qnn_conv_depthwise_5x5_dilated)
NP(qnn_conv_depthwise_dilated)
NP(qnn_conv_depthwise_flat_uint8)
NP(qnn_conv_depthwise_valid_int8)
NP(qnn_conv_depthwise_4x4_s2)
NP(qnn_matmul_dot_requant)
NP(qnn_matmul_dot_row_uint8)
NP(qnn_matmul_dot_kblocks)
NP(conv_groups_dilation)
NP(conv_tiles_channel_tail)
NP(conv_tiles_runtime_weights_groups)
NP(conv_tiles_pointwise_residual)
NP(conv_tiles_pixel_vectors)
NP(conv_tiles_pixel_tail)
NP(conv_tiles_weights_outer_flat)
NP(conv_tiles_weights_outer_rows)
NP(conv_tiles_groups_outer_small_image)
NP(conv_tiles_input_channel_blocks)
NP(conv_tiles_input_channel_blocks_flat)
NP(conv_tiles_input_channel_blocks_rows)
NP(conv_tiles_input_channel_blocks_sparse)
NP(matmul_tiles_bias_relu)
NP(conv_tiles_pixel_vectors_row_broadcast)
NP(conv_tiles_depthwise_rows)
NP(conv_tiles_depthwise_stride2)
NP(conv_depthwise_relu6)
NP(conv_tiles_depthwise_narrow)
NP(conv_tiles_depthwise_strided_phases)
NP(conv_tiles_depthwise_stride2_wide)
NP(conv_tiles_depthwise_window_groups)
NP(conv_tiles_rows_stem)
NP(conv_tiles_rows_dilated_batch)
NP(conv_tiles_rows_unpadded_stride3)
NP(conv_winograd_bias_relu)
NP(conv_winograd_channels_outer)
NP(conv_winograd_uneven_batch_residual)
NP(conv_winograd_unpadded_wide)
NP(conv_winograd_bands_batch_residual)
NP(conv_transpose_groups)
NP(max_pool_rows_pads_batch)
NP(max_pool_rows_dilated)
NP(max_pool_rows_many_taps)
NP(avg_pool_rows_count_pad_ceil)
NP(avg_pool_rows_inside)
NP(avg_pool_relu)
NP(matmul_batch_broadcast)
NP(matmul_vector_left)
NP(matmul_packed_panels)
NP(matmul_tiles_b_input)
NP(matmul_packed_at_run_time)
NP(matmul_vector_right_tanh)
NP(max_pool_ceil_dilation_pads)
NP(qnn_conv_per_channel)
NP(requantize_per_axis_saturating)
NP(quantize_int8_per_axis)
NP(dequantize_int8_per_axis)
NP(quantize_int32_saturating)
NP(requantize_int16)
NP(qnn_matmul_int16)
NP(resize_linear_asymmetric_down)
NP(resize_linear_align_corners_up)
NP(resize_linear_half_pixel_mixed)
NP(resize_nearest_half_pixel_down)
NP(resize_nearest_pytorch_to_one)
NP(resize_nearest_ceil_asymmetric)
NP(resize2_cubic_half_pixel_batch)
NP(resize2_cubic_exclude_align_corners)
NP(resize2_cubic_asymmetric_down)
NP(resize2_crop_nearest_extrapolate)
NP(resize2_crop_cubic_one_row)
NP(resize2_tf_half_pixel_for_nn_up)
NP(resize2_linear_up_bands)
NP(resize2_cubic_up_bands)
NP(resize2_cubic_up_too_wide)
NP(resize2_nchwc_linear_up)
NP(resize2_nchwc_cubic_down)
NP(resize2_nchwc_nearest_up)
NP(resize2_nchwc_crop_linear)
NP(concat_rows_image)
NP(concat_tokens)
NP(pointwise_rows_image)
NP(strided_slice_negative)
NP(take_negative_int32)
NP(math_exp_sweep)
NP(math_tanh_sweep)
NP(math_erf_sweep)
NP(math_sigmoid_sweep)
NP(math_exp_epilogue)
NP(math_tanh_epilogue)
NP(math_erf_epilogue)
NP(math_sigmoid_epilogue)
NP(fold_strided_slice_negative)
NP(fold_broadcast_to)
NP(fold_concat_axis1)
NP(fold_transpose_4d)
NP(fold_cast_float16)
NP(pad_reflect_3d)
NP(pad_edge_int32)
NP(pad_constant_value)
NP(sum_two_axes_int32)
NP(max_two_axes_keepdims)
NP(mean_last_axis_then_sqrt)
NP(argmax_ties_first)
NP(argmin_ties_last)
NP(softmax_axis1_epilogue)
NP(log_softmax_axis0)
NP(softmax_rows_tail_epilogue)
NP(softmax_rows_tail_max)
NP(softmax_rows_short)
NP(softmax_rows_long)
NP(log_softmax_rows)
NP(layer_norm_rows_gelu)
NP(layer_norm_rows_short)
NP(attention_keys_rows_mask)
NP(attention_keys_transposed)
NP(matmul_batched_broadcast_tiles)
NP(matmul_batched_attention)
NP(matmul_row_ksplit)
NP(matmul_k_blocks)
NP(global_pools)
NP(global_pool_vectors_epilogue)
NP(global_pool_vectors_whole)
NP(broadcast_chain_three_inputs)
NP(cast_truncates)
NP(mod_float_divisor_sign)
NP(where_broadcast)
NP(conv_nchwc_stem)
NP(conv_nchwc_small_groups)
NP(conv_nchwc_small_groups_s2)
NP(conv_nchwc_small_groups_8c)
NP(qnn_conv_nchwc_requant_uint8)
NP(qnn_conv_nchwc_narrow_int8)
NP(qnn_conv_nchwc_depthwise_uint8)
NP(qnn_conv_nchwc_stem_uint8)
NP(qnn_conv_nchwc_grouped_int8)
NP(qnn_conv_nchwc_in_only)
NP(qnn_conv_nchwc_depthwise_5x5)
NP(qnn_conv_nchwc_copy_bands)
NP(qnn_conv_nchwc_1x1_uint8)
NP(qnn_requantize_nchwc)
NP(max_pool_nchwc_uint8)
NP(conv_nchwc_residual_batch)
NP(conv_nchwc_pointwise)
NP(conv_nchwc_mixed_blocks)
NP(conv_winograd_nchwc_residual)
NP(conv_winograd_nchw_in_nchwc_out)
NP(conv_winograd_nchw4c_bands)
NP(conv_nchwc_grouped_copy_bands)
NP(conv_winograd_nchw8c_small)
NP(conv_nchwc_blocked_in_only)
NP(conv_nchwc_strided_dilated)
NP(conv_nchwc_depthwise_relu6)
NP(conv_nchwc_dilated_sparse)
NP(conv_dilated_sparse_uneven)
NP(conv_nchwc_dilated_sparse_kblocks)
NP(conv_nchwc_grouped)
NP(conv_nchwc_grouped_wide)
NP(conv_nchwc_grouped_row_windows)
NP(conv_nchwc_depthwise_strided)
NP(conv_nchwc_depthwise_runtime_weight)
NP(max_pool_nchwc)
NP(avg_pool_nchwc_count_pad)
NP(avg_pool_nchwc_inside)
NP(max_pool_nchwc_dilated_large)
NP(avg_pool_nchwc_large)
NP(global_pools_nchwc)
NP(global_max_pool_nchwc)
