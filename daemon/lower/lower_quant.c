/* lower_quant.c: qnn.quantize, qnn.dequantize, qnn.requantize as pointwise expressions (ONNX
 * QuantizeLinear / DequantizeLinear semantics; scale and zero point are scalars or per-axis):
 *   quantize:   saturate(round_half_even(x / scale) + zero_point)       (float32 arithmetic)
 *   dequantize: (float(x) - float(zero_point)) * scale
 *   requantize: saturate(round_half_even(float(x - in_zp) * (in_scale / out_scale)) + out_zp)
 * Requantize computes in float32 like the reference QLinearConv/QLinearMatMul kernels; with
 * constant scales the division is done at compile time (the same float32 quotient).
 * qnn.conv2d and qnn.matmul (int32 accumulation) live with their float versions. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lower_internal.h"

/* a requantize on blocked channels: the block (its layout attribute), else 0 */
static int64_t q_block(const tth_rexpr *call)
{
    int64_t b = call->u.call.op == TTH_OP_REQUANTIZE ? tth_layout_block(json_object_get(call->u.call.attrs, "layout")) : 0;
    return b > 0 ? b : 0;
}

/* index along the quantization axis (0 when the parameters are scalars) */
static tth_texpr *q_axis_idx(lw_ctx *c, const tth_rexpr *call, const tth_rexpr *x, tth_texpr *const *idx)
{
    const tth_ttype *xt = lw_ty(x);
    int64_t ax = lw_attr_int(call, "axis", 1), b = q_block(call);
    if (b > 0 && idx) /* NCHW<b>c: channel (c / b)*b + c % b (docs/int8.md, "Blocked channels") */
        return lw_add(c, lw_mul(c, idx[1], lw_i(c, b)), idx[4]);
    if (ax < 0)
        ax += xt->rank;
    if (ax < 0 || ax >= xt->rank || !idx)
        return lw_i(c, 0);
    return idx[ax];
}

/* clamp a float value to the integer range of `to`, then convert. 32-bit targets clamp in
 * float64, where their bounds are exact; otherwise the upper bound is the largest float not above
 * the integer maximum (clamping to a rounded-up bound would overflow the conversion). */
static tth_texpr *saturate(lw_ctx *c, tth_dtype to, tth_texpr *v)
{
    tth_dtype ft = v->dtype;
    if (ft == TTH_F32 && (to == TTH_I32 || to == TTH_U32)) {
        /* exact bounds: a float32 value converts exactly to float64 */
        v = lw_cast(c, TTH_F64, v);
        ft = TTH_F64;
    }
    double hi = lw_dtype_highest(to);
    if (ft == TTH_F32 && (double)(float)hi > hi)
        hi = (double)nextafterf((float)hi, 0.0f);
    else if (ft == TTH_F64 && hi >= 9223372036854775807.0)
        hi = nextafter(hi, 0.0);
    v = lw_bin(c, TTH_TBIN_MAX, v, lw_imm(c, ft, lw_dtype_lowest(to)));
    v = lw_bin(c, TTH_TBIN_MIN, v, lw_imm(c, ft, hi));
    return lw_cast(c, to, v);
}

/* The value of x (argument 0) at idx, and in p[] arguments 1 .. np of the call at x's position
 * along the axis (in *ai); NULL when any of them is */
static tth_texpr *q_operands(lw_ctx *c, const tth_rexpr *call, tth_texpr *const *idx, int np, tth_texpr **ai,
                             tth_texpr **p)
{
    const tth_rexpr *xe = lw_arg(call, 0);
    tth_texpr *x = lw_value_at(c, xe, idx);
    *ai = q_axis_idx(c, call, xe, idx);
    for (int i = 0; i < np; i++)
        if (!(p[i] = lw_axis_value(c, lw_arg(call, (size_t)i + 1), *ai)))
            x = NULL;
    return x;
}

tth_texpr *lw_quantize(lw_ctx *c, const tth_rexpr *call, tth_texpr *const *idx)
{
    tth_texpr *ai, *p[2];
    tth_texpr *x = q_operands(c, call, idx, 2, &ai, p), *sc = p[0], *zp = p[1];
    if (!x)
        return NULL;
    tth_dtype ft = x->dtype;
    tth_texpr *q = tth_tir_intrin(c->m, TTH_TINTRIN_ROUND_EVEN, lw_bin(c, TTH_TBIN_DIV, x, lw_cast(c, ft, sc)), NULL);
    q = lw_add(c, q, lw_cast(c, ft, zp));
    return saturate(c, lw_ty(call)->dtype, q);
}

tth_texpr *lw_dequantize(lw_ctx *c, const tth_rexpr *call, tth_texpr *const *idx)
{
    tth_texpr *ai, *p[2];
    tth_texpr *x = q_operands(c, call, idx, 2, &ai, p), *sc = p[0], *zp = p[1];
    if (!x)
        return NULL;
    tth_dtype ft = lw_ty(call)->dtype;
    return lw_mul(c, lw_sub(c, lw_cast(c, ft, x), lw_cast(c, ft, zp)), lw_cast(c, ft, sc));
}

/* the value of a constant integer scalar argument in *v (1), else 0 */
static int int_scalar(const tth_rexpr *e, int64_t *v)
{
    if (!lw_int_const(e) || tth_ttype_numel(&e->u.constant.value->type) != 1)
        return 0;
    *v = tth_tensor_get_i64(e->u.constant.value, 0);
    return 1;
}

/* float32 element i of a constant float tensor (0 when it is not float32) */
static float f32_at(const tth_tensor *t, int64_t i)
{
    return t->type.dtype == TTH_F32 ? ((const float *)t->data)[i] : 0.0f;
}

/* in_scale / out_scale of a requantize whose scales are float32 constants, divided at compile
 * time (IEEE division gives the bits the generated code would): a constant per element of the
 * axis, or one scalar (*scalar set, NULL returned); *finite: every quotient is finite. Else NULL
 * and *ok 0. */
static tth_tbuffer *rq_multiplier(lw_ctx *c, const tth_rexpr *call, float *scalar, int *ok, int *finite)
{
    const tth_rexpr *is = lw_arg(call, 1), *os = lw_arg(call, 3);
    lw_node *nd = lw_node_of(c, call);
    *ok = 0;
    if (!nd || is->kind != TTH_REXPR_CONST || os->kind != TTH_REXPR_CONST || lw_ty(is)->dtype != TTH_F32 ||
        lw_ty(os)->dtype != TTH_F32)
        return NULL;
    if (!nd->rq_made) { /* once per call, however many stores its expression is built for */
        const tth_tensor *it = is->u.constant.value, *ot = os->u.constant.value;
        int64_t ni = tth_ttype_numel(&it->type), no = tth_ttype_numel(&ot->type), n = ni > no ? ni : no;
        nd->rq_finite = 1;
        if (n == 1) {
            nd->rq_scalar = f32_at(it, 0) / f32_at(ot, 0);
            nd->rq_finite = isfinite(nd->rq_scalar);
        } else {
            tth_tensor *m = lw_table_new(c, TTH_F32, n, NULL);
            if (!m)
                return NULL;
            for (int64_t i = 0; i < n; i++)
                if (!isfinite(((float *)m->data)[i] = f32_at(it, ni == 1 ? 0 : i) / f32_at(ot, no == 1 ? 0 : i)))
                    nd->rq_finite = 0;
            if (!(nd->rq_table = lw_packed_const(c, m)))
                return NULL;
        }
        nd->rq_made = 1;
    }
    *scalar = nd->rq_scalar;
    *finite = nd->rq_finite;
    *ok = 1;
    return nd->rq_table;
}

tth_texpr *lw_requantize(lw_ctx *c, const tth_rexpr *call, tth_texpr *const *idx)
{
    tth_texpr *ai, *p[4];
    tth_texpr *x = q_operands(c, call, idx, 4, &ai, p), *isc = p[0], *izp = p[1], *osc = p[2], *ozp = p[3];
    if (!x)
        return NULL;
    /* a constant zero point is an immediate (the usual input zero point 0 then costs nothing) */
    int64_t iz = 0, oz = 0;
    tth_texpr *d = lw_cast(c, TTH_I32, x);
    if (!int_scalar(lw_arg(call, 2), &iz))
        d = lw_sub(c, d, lw_cast(c, TTH_I32, izp));
    else if (iz != 0)
        d = lw_sub(c, d, tth_tir_int(c->m, TTH_I32, iz));
    float ms = 0;
    int known, finite = 0;
    tth_tbuffer *mb = rq_multiplier(c, call, &ms, &known, &finite);
    tth_texpr *mult = !known ? lw_bin(c, TTH_TBIN_DIV, lw_cast(c, TTH_F32, isc), lw_cast(c, TTH_F32, osc))
                      : mb   ? tth_tir_load(c->m, mb, ai)
                             : tth_tir_float(c->m, TTH_F32, ms);
    tth_texpr *v = lw_mul(c, lw_cast(c, TTH_F32, d), mult);
    tth_dtype to = lw_ty(call)->dtype;
    if (known && finite && int_scalar(lw_arg(call, 4), &oz) && oz > -(1 << 20) && oz < (1 << 20) &&
        (to == TTH_I8 || to == TTH_U8 || to == TTH_I16 || to == TTH_U16)) {
        /* A finite multiplier and a constant output zero point z (docs/int8.md, "Requantize"):
         * v clamped to [lowest - z, highest - z] first (integers, so clamping before rounding
         * is clamping after), then rounded half to even by adding 1.5 * 2^23: |v| < 2^22, so
         * the sum lies where float32's step is 1, and its bits are 0x4B400000 + round(v) */
        v = lw_bin(c, TTH_TBIN_MAX, v, lw_imm(c, TTH_F32, lw_dtype_lowest(to) - (double)oz));
        v = lw_bin(c, TTH_TBIN_MIN, v, lw_imm(c, TTH_F32, lw_dtype_highest(to) - (double)oz));
        tth_texpr *t = tth_tir_reinterpret(c->m, TTH_I32, lw_add(c, v, lw_imm(c, TTH_F32, 12582912.0)));
        return lw_cast(c, to, lw_sub(c, t, tth_tir_int(c->m, TTH_I32, 0x4B400000 - oz)));
    }
    tth_texpr *q = tth_tir_intrin(c->m, TTH_TINTRIN_ROUND_EVEN, v, NULL);
    q = lw_add(c, q, lw_cast(c, TTH_F32, ozp));
    return saturate(c, to, q);
}

int lw_quant_check(const tth_rexpr *call, char *why, size_t len)
{
    tth_op op = call->u.call.op;
    const char *name = tth_op_name(op);
    const tth_ttype *xt = lw_ty(lw_arg(call, 0)), *ot = lw_ty(call);
    if (!ot) {
        snprintf(why, len, "%s: a tuple result", name);
        return 0;
    }
    int64_t ax = lw_attr_int(call, "axis", 1), b = q_block(call);
    if (ax < 0)
        ax += xt->rank;
    /* blocked: one value per channel, C = (C / b) * b */
    int64_t axn = b && ax == 1 && xt->rank == 5 ? xt->shape[1] * b : ax >= 0 && ax < xt->rank ? xt->shape[ax] : -1;
    for (size_t i = 1; i < call->u.call.nargs; i++) {
        const tth_ttype *pt = lw_ty(lw_arg(call, i));
        int64_t n = lw_numel(pt->shape, pt->rank);
        if (n != 1 && (pt->rank != 1 || axn < 0 || pt->shape[0] != axn)) {
            snprintf(why, len, "%s: argument %zu must be a scalar or have one value per element of axis %lld",
                     name, i, (long long)ax);
            return 0;
        }
    }
    if (op == TTH_OP_DEQUANTIZE) {
        if (tth_dtype_is_float(xt->dtype) || xt->dtype == TTH_BOOL || !tth_dtype_is_float(ot->dtype)) {
            snprintf(why, len, "%s: integer input and float output required", name);
            return 0;
        }
        return 1;
    }
    /* quantize (from float) and requantize (from int32): an integer result */
    int quant = op == TTH_OP_QUANTIZE;
    if (quant ? xt->dtype != TTH_F32 && xt->dtype != TTH_F64 : xt->dtype != TTH_I32) {
        snprintf(why, len, "%s: input must be %s", name, quant ? "float32 or float64" : "int32");
        return 0;
    }
    if (ot->dtype != TTH_I8 && ot->dtype != TTH_U8 && ot->dtype != TTH_I16 && ot->dtype != TTH_U16 &&
        ot->dtype != TTH_I32) {
        snprintf(why, len, "%s: out_dtype %s is not supported", name, tth_dtype_name(ot->dtype));
        return 0;
    }
    return 1;
}

/* ---- what the int8 kernels share (docs/int8.md) ---- */

int64_t lw_dot_koff(int dot, tth_dtype x)
{
    int us = dot == TTH_TINTRIN_DOT4_US, u8 = x == TTH_U8;
    return us == u8 ? 0 : us ? 128 : -128;
}

int lw_dot_zero_points(const tth_rexpr *xz, const tth_rexpr *wz, int64_t *xzp)
{
    if (!int_scalar(xz, xzp) || !lw_int_const(wz))
        return 0;
    const tth_tensor *w = wz->u.constant.value;
    for (int64_t i = 0; i < tth_ttype_numel(&w->type); i++)
        if (tth_tensor_get_i64(w, i) != 0)
            return 0;
    return 1;
}

int32_t lw_dot_comp(int64_t xzp, int64_t koff, int64_t wsum)
{
    return (int32_t)(uint32_t)(uint64_t)(-(xzp + koff) * wsum);
}

tth_texpr *lw_dot_word(lw_ctx *c, tth_texpr *const bytes[4], int64_t koff, int64_t padv, int lanes)
{
    tth_texpr *w = NULL;
    for (int b = 0; b < 4; b++) {
        tth_texpr *byte;
        if (bytes[b]) {
            byte = lw_cast(c, TTH_U32, bytes[b]);
            if (koff)
                byte = lw_add(c, byte, tth_tir_int(c->m, TTH_U32, (int64_t)(uint32_t)(int32_t)koff));
            byte = lw_bin(c, TTH_TBIN_BITAND, byte, tth_tir_int(c->m, TTH_U32, 255));
        } else {
            byte = tth_tir_int(c->m, TTH_U32, padv & 0xff);
        }
        if (b)
            byte = lw_bin(c, TTH_TBIN_SHL, byte, tth_tir_int(c->m, TTH_U32, 8 * b));
        w = w ? lw_bin(c, TTH_TBIN_BITOR, w, byte) : byte;
    }
    if (lanes > 1 && w && w->lanes == 1)
        w = tth_tir_broadcast(c->m, w, lanes);
    return w ? tth_tir_reinterpret(c->m, TTH_I32, w) : NULL;
}
