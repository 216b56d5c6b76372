/* onnx_quant.c: quantization: QuantizeLinear, DequantizeLinear and the integer operators.
 * One function per operator, and the family's rows of the operator table: each row names the
 * opset range it imports (docs/operators.md, "The operator table"). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_ops.h"

static tth_rexpr *zero_like(tth_onnx_ctx *c, tth_rexpr *shape_of, tth_dtype dt)
{
    tth_ttype ty = *tt(shape_of);
    ty.dtype = dt;
    return k_tensor(c, tth_tensor_new(&ty, NULL));
}

/* QuantizeLinear: y = saturate(round_half_even(x / scale) + zero_point); uint8 by default. */
/* Blocked quantization (opset 21's block_size): refused by name */
static int no_blocks(tth_onnx_ctx *c)
{
    if (ai(c, "block_size", 0) != 0)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: %s block_size %lld (blocked "
                              "quantization, opset 21)", c->node->op_type, (long long)ai(c, "block_size", 0));
    return 0;
}

static int op_quantize(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    if (no_blocks(c))
        return c->diag->code;
    tth_rexpr *zp = nin > 2 ? in[2] : NULL;
    int64_t odt = ai(c, "output_dtype", 0); /* opset 21: the type when there is no zero point */
    tth_dtype want = odt ? tth__onnx_dtype((int32_t)odt) : TTH_U8;
    if (odt && want != TTH_U8 && want != TTH_I8 && want != TTH_U16 && want != TTH_I16) {
        char type[64];
        tth__onnx_type_text((int32_t)odt, type, sizeof type);
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: QuantizeLinear output_dtype %s",
                              want == TTH_DTYPE_INVALID ? type : tth_dtype_name(want));
    }
    if (zp && odt && tt(zp)->dtype != want)
        return tth__onnx_fail(c, TTH_EMODEL, "QuantizeLinear output_dtype %s differs from its zero point's %s",
                              tth_dtype_name(want), tth_dtype_name(tt(zp)->dtype));
    if (!zp)
        CHECK(zp = zero_like(c, in[1], want));
    int64_t axis = 0;
    if (rank(in[1]) > 0 && norm_axis(c, ai(c, "axis", 1), rank(in[0]), &axis))
        return c->diag->code;
    tth_rexpr *args[3] = {in[0], in[1], zp};
    CHECK(out[0] = call(c, TTH_OP_QUANTIZE, args, 3,
                        json_pack("{s:I,s:s}", "axis", (json_int_t)axis, "out_dtype", tth_dtype_name(tt(zp)->dtype))));
    return 0;
}

/* DequantizeLinear: y = (x - zero_point) * scale, float32. */
static int op_dequantize(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    if (no_blocks(c))
        return c->diag->code;
    tth_rexpr *zp = nin > 2 ? in[2] : NULL;
    if (!zp)
        CHECK(zp = zero_like(c, in[1], tt(in[0])->dtype));
    int64_t axis = 0;
    if (rank(in[1]) > 0 && norm_axis(c, ai(c, "axis", 1), rank(in[0]), &axis))
        return c->diag->code;
    tth_rexpr *args[3] = {in[0], in[1], zp};
    json_t *at = json_pack("{s:I}", "axis", (json_int_t)axis);
    /* A dequantized constant tensor (QDQ weights, biases) stays a call: the QDQ pass
     * (qdq.c) computes the layer in integers from it; constant folding after that pass folds what
     * it leaves. Scalars still fold here (they can be operands that must be constant). */
    if (in[0]->kind == TTH_REXPR_CONST && rank(in[0]) >= 1)
        CHECK(out[0] = call_unfolded(c, TTH_OP_DEQUANTIZE, args, 3, at));
    else
        CHECK(out[0] = call(c, TTH_OP_DEQUANTIZE, args, 3, at));
    return 0;
}

/* acc (int32) requantized with in_scale = a_scale * b_scale, zero point 0, to y_scale/y_zp. */
static tth_rexpr *requant(tth_onnx_ctx *c, tth_rexpr *acc, tth_rexpr *as_, tth_rexpr *bs, tth_rexpr *ys, tth_rexpr *yz,
                          int axis)
{
    tth_rexpr *insc = call2(c, TTH_OP_MULTIPLY, as_, bs, NULL);
    if (!insc)
        return NULL;
    tth_rexpr *zero = k_scalar(c, TTH_I32, 0);
    if (!zero)
        return NULL;
    tth_rexpr *args[5] = {acc, insc, zero, ys, yz};
    return call(c, TTH_OP_REQUANTIZE, args, 5,
                json_pack("{s:I,s:s}", "axis", (json_int_t)axis, "out_dtype", tth_dtype_name(tt(yz)->dtype)));
}

/* QLinearConv: x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, [B int32]. */
static int op_qlinear_conv(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(8);
    int r = rank(in[0]);
    tth_rexpr *x = to4d(c, in[0], "QLinearConv");
    CHECK(x);
    tth_rexpr *w = to4d(c, in[3], "QLinearConv");
    CHECK(w);
    spatial sp;
    int rc = spatial_attrs(c, r - 2, tt(in[0])->shape + 2, tt(in[3])->shape + 2, 0, &sp);
    if (rc)
        return rc;
    int64_t st[2] = {sp.s[0], sp.s[1]}, dl[2] = {sp.d[0], sp.d[1]};
    json_t *at = json_pack("{s:o,s:o,s:o,s:I}", "strides", tth__json_ints(st, 2), "padding", pads_json(&sp),
                           "dilation", tth__json_ints(dl, 2), "groups", (json_int_t)ai(c, "group", 1));
    tth_rexpr *args[4] = {x, w, in[2], in[5]};
    tth_rexpr *acc = call(c, TTH_OP_QNN_CONV2D, args, 4, at);
    CHECK(acc);
    if (nin > 8 && in[8]) {
        int64_t bs[3] = {tt(in[8])->shape[0], 1, 1};
        tth_rexpr *b = rank(in[8]) == 1 ? reshape(c, in[8], bs, 3) : in[8];
        CHECK(b);
        CHECK(acc = call2(c, TTH_OP_ADD, acc, b, NULL));
    }
    tth_rexpr *y = requant(c, acc, in[1], in[4], in[6], in[7], 1);
    CHECK(y);
    CHECK(out[0] = from4d(c, y, r));
    return 0;
}

/* QLinearMatMul: a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp. */
static int op_qlinear_matmul(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(8);
    tth_rexpr *args[4] = {in[0], in[3], in[2], in[5]};
    tth_rexpr *acc = call(c, TTH_OP_QNN_MATMUL, args, 4, NULL);
    CHECK(acc);
    CHECK(out[0] = requant(c, acc, in[1], in[4], in[6], in[7], rank(acc) - 1));
    return 0;
}

/* ConvInteger: qnn.conv2d of x and w with their zero points (default 0) → int32. */
static int op_conv_integer(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    int r = rank(in[0]);
    tth_rexpr *x = to4d(c, in[0], "ConvInteger");
    CHECK(x);
    tth_rexpr *w = to4d(c, in[1], "ConvInteger");
    CHECK(w);
    tth_rexpr *xz = nin > 2 && in[2] ? in[2] : k_scalar(c, tt(in[0])->dtype, 0);
    tth_rexpr *wz = nin > 3 && in[3] ? in[3] : k_scalar(c, tt(in[1])->dtype, 0);
    CHECK(xz && wz);
    spatial sp;
    int rc = spatial_attrs(c, r - 2, tt(in[0])->shape + 2, tt(in[1])->shape + 2, 0, &sp);
    if (rc)
        return rc;
    int64_t st[2] = {sp.s[0], sp.s[1]}, dl[2] = {sp.d[0], sp.d[1]};
    json_t *at = json_pack("{s:o,s:o,s:o,s:I}", "strides", tth__json_ints(st, 2), "padding", pads_json(&sp),
                           "dilation", tth__json_ints(dl, 2), "groups", (json_int_t)ai(c, "group", 1));
    tth_rexpr *args[4] = {x, w, xz, wz};
    tth_rexpr *y = call(c, TTH_OP_QNN_CONV2D, args, 4, at);
    CHECK(y);
    CHECK(out[0] = from4d(c, y, r));
    return 0;
}

/* MatMulInteger: qnn.matmul with zero points (default 0) → int32. */
static int op_matmul_integer(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    tth_rexpr *az = nin > 2 && in[2] ? in[2] : k_scalar(c, tt(in[0])->dtype, 0);
    tth_rexpr *bz = nin > 3 && in[3] ? in[3] : k_scalar(c, tt(in[1])->dtype, 0);
    CHECK(az && bz);
    tth_rexpr *args[4] = {in[0], in[1], az, bz};
    CHECK(out[0] = call(c, TTH_OP_QNN_MATMUL, args, 4, NULL));
    return 0;
}

/* DynamicQuantizeLinear: scale = (max(x, 0) - min(x, 0)) / 255, zero point =
 * saturate(round(-min / scale)) as uint8, y = QuantizeLinear(x, scale, zero point). */
static int op_dynamic_quantize(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    tth_rexpr *x = in[0], *mn, *mx, *z = kx(c, x, 0), *k255 = kx(c, x, 255), *sc, *zp, *y;
    CHECK(z && k255);
    CHECK(mn = call1(c, TTH_OP_MIN, x, json_pack("{s:[],s:b}", "axis", "keepdims", 0)));
    CHECK(mx = call1(c, TTH_OP_MAX, x, json_pack("{s:[],s:b}", "axis", "keepdims", 0)));
    CHECK(mn = call2(c, TTH_OP_MINIMUM, mn, z, NULL));
    CHECK(mx = call2(c, TTH_OP_MAXIMUM, mx, z, NULL));
    CHECK(sc = call2(c, TTH_OP_SUBTRACT, mx, mn, NULL));
    CHECK(sc = call2(c, TTH_OP_DIVIDE, sc, k255, NULL));
    CHECK(zp = call1(c, TTH_OP_NEGATIVE, mn, NULL));
    CHECK(zp = call2(c, TTH_OP_DIVIDE, zp, sc, NULL));
    CHECK(zp = call1(c, TTH_OP_ROUND, zp, NULL));
    CHECK(zp = call1(c, TTH_OP_CLIP, zp, json_pack("{s:f,s:f}", "a_min", 0.0, "a_max", 255.0)));
    CHECK(zp = cast_to(c, zp, TTH_U8));
    tth_rexpr *args[3] = {x, sc, zp};
    CHECK(y = call(c, TTH_OP_QUANTIZE, args, 3, json_pack("{s:I,s:s}", "axis", (json_int_t)0, "out_dtype", "uint8")));
    out[0] = y;
    if (nout > 1)
        out[1] = sc;
    if (nout > 2)
        out[2] = zp;
    return 0;
}

/* ---------------------------------------------------------------- the rows */

const tth_onnx_op tth__onnx_quant_ops[] = {
    {"ConvInteger", 10, op_conv_integer, 0, NULL},
    {"DequantizeLinear", 10, op_dequantize, 0, NULL},
    {"DynamicQuantizeLinear", 11, op_dynamic_quantize, 0, NULL},
    {"MatMulInteger", 10, op_matmul_integer, 0, NULL},
    {"QLinearConv", 10, op_qlinear_conv, 0, NULL},
    {"QLinearMatMul", 10, op_qlinear_matmul, 0, NULL},
    {"QuantizeLinear", 10, op_quantize, 0, NULL},
    {NULL, 0, NULL, 0, NULL},
};
