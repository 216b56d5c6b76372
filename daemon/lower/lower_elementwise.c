/* lower_elementwise.c: pointwise operators as TIR expressions of their arguments' values.
 * Each function returns the value of the call at index idx of its output; arguments are read
 * through lw_arg_at (numpy broadcasting). ONNX semantics: integer division truncates (C), Mod
 * takes the divisor's sign unless fmod=1, Round is half to even (nearbyint). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lower_internal.h"

static tth_texpr *fimm(lw_ctx *c, tth_dtype t, double v)
{
    return lw_imm(c, t, v);
}

static tth_texpr *intrin1(lw_ctx *c, tth_tir_intrin_op op, tth_texpr *a)
{
    return tth_tir_intrin(c->m, op, a, NULL);
}

tth_texpr *lw_ew_binary(lw_ctx *c, const tth_rexpr *call, tth_texpr *const *idx)
{
    tth_texpr *a = lw_arg_at(c, call, 0, idx);
    tth_texpr *b = lw_arg_at(c, call, 1, idx);
    if (!a || !b)
        return NULL;
    tth_dtype ot = lw_ty(call)->dtype;
    tth_dtype at = a->dtype;
    tth_op op = call->u.call.op;
    if (op != TTH_OP_POWER && b->dtype != at)
        b = lw_cast(c, at, b);
    int fl = tth_dtype_is_float(at);
    switch (op) {
    case TTH_OP_ADD: return lw_bin(c, TTH_TBIN_ADD, a, b);
    case TTH_OP_SUBTRACT: return lw_bin(c, TTH_TBIN_SUB, a, b);
    case TTH_OP_MULTIPLY: return lw_bin(c, TTH_TBIN_MUL, a, b);
    case TTH_OP_DIVIDE: return lw_bin(c, TTH_TBIN_DIV, a, b);
    case TTH_OP_MAXIMUM: return lw_bin(c, TTH_TBIN_MAX, a, b);
    case TTH_OP_MINIMUM: return lw_bin(c, TTH_TBIN_MIN, a, b);
    case TTH_OP_POWER:
        if (ot == TTH_F16 || ot == TTH_BF16)
            ot = TTH_F32;
        if (tth_dtype_is_float(ot))
            return tth_tir_intrin(c->m, TTH_TINTRIN_POW, lw_cast(c, ot, a), lw_cast(c, ot, b));
        return lw_cast(c, ot, tth_tir_intrin(c->m, TTH_TINTRIN_POW, lw_cast(c, TTH_F64, a), lw_cast(c, TTH_F64, b)));
    case TTH_OP_MOD: {
        int fmod_mode = (int)lw_attr_int(call, "fmod", 0);
        if (!fl)
            return lw_bin(c, fmod_mode ? TTH_TBIN_MOD : TTH_TBIN_FLOORMOD, a, b);
        tth_texpr *r = tth_tir_intrin(c->m, TTH_TINTRIN_FMOD, a, b);
        if (fmod_mode)
            return r;
        /* the divisor's sign: r + b when r is non-zero and its sign differs from b's. r and b
         * are used twice: both are cheap to recompute (loads or immediates) */
        tth_texpr *zero = fimm(c, at, 0);
        tth_texpr *fix = lw_bin(c, TTH_TBIN_AND, lw_bin(c, TTH_TBIN_NE, r, zero),
                                lw_bin(c, TTH_TBIN_NE, lw_bin(c, TTH_TBIN_LT, r, zero),
                                       lw_bin(c, TTH_TBIN_LT, b, zero)));
        return tth_tir_select(c->m, fix, lw_add(c, r, b), r);
    }
    case TTH_OP_PRELU:
        return tth_tir_select(c->m, lw_bin(c, TTH_TBIN_LT, a, fimm(c, at, 0)), lw_mul(c, a, b), a);
    case TTH_OP_EQUAL: return lw_bin(c, TTH_TBIN_EQ, a, b);
    case TTH_OP_LESS: return lw_bin(c, TTH_TBIN_LT, a, b);
    case TTH_OP_LESS_EQUAL: return lw_bin(c, TTH_TBIN_LE, a, b);
    case TTH_OP_GREATER: return lw_bin(c, TTH_TBIN_GT, a, b);
    case TTH_OP_GREATER_EQUAL: return lw_bin(c, TTH_TBIN_GE, a, b);
    case TTH_OP_LOGICAL_AND: return lw_bin(c, TTH_TBIN_AND, a, b);
    case TTH_OP_LOGICAL_OR: return lw_bin(c, TTH_TBIN_OR, a, b);
    case TTH_OP_LOGICAL_XOR: return lw_bin(c, TTH_TBIN_NE, a, b);
    default:
        lw_fail(c, TTH_EINTERNAL, call, "not a binary elementwise op");
        return NULL;
    }
}

tth_texpr *lw_ew_where(lw_ctx *c, const tth_rexpr *call, tth_texpr *const *idx)
{
    tth_texpr *cond = lw_arg_at(c, call, 0, idx);
    tth_texpr *a = lw_arg_at(c, call, 1, idx);
    tth_texpr *b = lw_arg_at(c, call, 2, idx);
    if (!cond || !a || !b)
        return NULL;
    if (cond->dtype != TTH_BOOL)
        cond = lw_bin(c, TTH_TBIN_NE, cond, lw_imm(c, cond->dtype, 0));
    return tth_tir_select(c->m, cond, a, lw_cast(c, a->dtype, b));
}

tth_texpr *lw_ew_unary(lw_ctx *c, const tth_rexpr *call, tth_texpr *const *idx)
{
    tth_texpr *x = lw_arg_at(c, call, 0, idx);
    if (!x)
        return NULL;
    tth_dtype t = x->dtype;
    int fl = tth_dtype_is_float(t);
    tth_texpr *zero = fimm(c, t, 0), *one = fimm(c, t, 1);
    switch (call->u.call.op) {
    case TTH_OP_NEGATIVE: return tth_tir_un(c->m, TTH_TUN_NEG, x);
    case TTH_OP_ABS:
        if (fl)
            return intrin1(c, TTH_TINTRIN_FABS, x);
        if (!tth_dtype_is_signed(t))
            return x;
        return tth_tir_select(c->m, lw_bin(c, TTH_TBIN_LT, x, zero), tth_tir_un(c->m, TTH_TUN_NEG, x), x);
    case TTH_OP_SQRT: return intrin1(c, TTH_TINTRIN_SQRT, x);
    case TTH_OP_RECIPROCAL: return lw_bin(c, TTH_TBIN_DIV, one, x);
    case TTH_OP_EXP: return lw_math(c, LW_MATH_EXP, x);
    case TTH_OP_LOG: return intrin1(c, TTH_TINTRIN_LOG, x);
    case TTH_OP_SIN: return intrin1(c, TTH_TINTRIN_SIN, x);
    case TTH_OP_COS: return intrin1(c, TTH_TINTRIN_COS, x);
    case TTH_OP_TANH: return lw_math(c, LW_MATH_TANH, x);
    case TTH_OP_ASIN: return intrin1(c, TTH_TINTRIN_ASIN, x);
    case TTH_OP_ACOS: return intrin1(c, TTH_TINTRIN_ACOS, x);
    case TTH_OP_ATAN: return intrin1(c, TTH_TINTRIN_ATAN, x);
    case TTH_OP_ASINH: return intrin1(c, TTH_TINTRIN_ASINH, x);
    case TTH_OP_ACOSH: return intrin1(c, TTH_TINTRIN_ACOSH, x);
    case TTH_OP_ATANH: return intrin1(c, TTH_TINTRIN_ATANH, x);
    case TTH_OP_ERF: return lw_math(c, LW_MATH_ERF, x);
    case TTH_OP_SIGMOID: return lw_math(c, LW_MATH_SIGMOID, x);
    case TTH_OP_FLOOR: return fl ? intrin1(c, TTH_TINTRIN_FLOOR, x) : x;
    case TTH_OP_CEIL: return fl ? intrin1(c, TTH_TINTRIN_CEIL, x) : x;
    case TTH_OP_ROUND: return fl ? intrin1(c, TTH_TINTRIN_ROUND_EVEN, x) : x;
    case TTH_OP_SIGN:
        return tth_tir_select(c->m, lw_bin(c, TTH_TBIN_GT, x, zero), one,
                              tth_tir_select(c->m, lw_bin(c, TTH_TBIN_LT, x, zero), fimm(c, t, -1), zero));
    case TTH_OP_LOGICAL_NOT: return tth_tir_un(c->m, TTH_TUN_NOT, x);
    case TTH_OP_RELU: return lw_bin(c, TTH_TBIN_MAX, x, zero);
    case TTH_OP_LEAKY_RELU: {
        double alpha = lw_attr_float(call, "alpha", 0.01);
        return tth_tir_select(c->m, lw_bin(c, TTH_TBIN_LT, x, zero), lw_mul(c, x, fimm(c, t, alpha)), x);
    }
    case TTH_OP_ELU: {
        double alpha = lw_attr_float(call, "alpha", 1.0);
        return tth_tir_select(c->m, lw_bin(c, TTH_TBIN_LT, x, zero),
                              lw_mul(c, fimm(c, t, alpha), lw_sub(c, lw_math(c, LW_MATH_EXP, x), one)), x);
    }
    case TTH_OP_SELU: {
        double alpha = lw_attr_float(call, "alpha", 1.67326319217681884765625);
        double gamma = lw_attr_float(call, "gamma", 1.05070102214813232421875);
        tth_texpr *neg = lw_mul(c, fimm(c, t, gamma),
                                lw_sub(c, lw_mul(c, fimm(c, t, alpha), lw_math(c, LW_MATH_EXP, x)),
                                       fimm(c, t, alpha)));
        return tth_tir_select(c->m, lw_bin(c, TTH_TBIN_LE, x, zero), neg, lw_mul(c, fimm(c, t, gamma), x));
    }
    case TTH_OP_THRESHOLDED_RELU: {
        double alpha = lw_attr_float(call, "alpha", 1.0);
        return tth_tir_select(c->m, lw_bin(c, TTH_TBIN_GT, x, fimm(c, t, alpha)), x, zero);
    }
    case TTH_OP_SOFTPLUS:
        /* log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)): no overflow for large x */
        return lw_add(c, lw_bin(c, TTH_TBIN_MAX, x, zero),
                      intrin1(c, TTH_TINTRIN_LOG1P,
                              intrin1(c, TTH_TINTRIN_EXP, tth_tir_un(c->m, TTH_TUN_NEG, intrin1(c, TTH_TINTRIN_FABS, x)))));
    case TTH_OP_SOFTSIGN:
        return lw_bin(c, TTH_TBIN_DIV, x, lw_add(c, one, intrin1(c, TTH_TINTRIN_FABS, x)));
    case TTH_OP_HARD_SIGMOID: {
        double alpha = lw_attr_float(call, "alpha", 0.2), beta = lw_attr_float(call, "beta", 0.5);
        tth_texpr *v = lw_add(c, lw_mul(c, x, fimm(c, t, alpha)), fimm(c, t, beta));
        return lw_bin(c, TTH_TBIN_MAX, zero, lw_bin(c, TTH_TBIN_MIN, one, v));
    }
    case TTH_OP_HARD_SWISH: {
        tth_texpr *v = lw_add(c, lw_mul(c, x, fimm(c, t, 1.0 / 6.0)), fimm(c, t, 0.5));
        return lw_mul(c, x, lw_bin(c, TTH_TBIN_MAX, zero, lw_bin(c, TTH_TBIN_MIN, one, v)));
    }
    case TTH_OP_CLIP: {
        tth_texpr *v = x;
        double lo = lw_dtype_lowest(t), hi = lw_dtype_highest(t), a_min, a_max;
        if (tth_clip_attrs_of(call->u.call.attrs, &a_min, &a_max, NULL))
            return NULL; /* the type relation refuses such a clip */
        if (a_min > lo || fl)
            v = lw_bin(c, TTH_TBIN_MAX, v, fimm(c, t, fl ? a_min : (a_min > hi ? hi : ceil(a_min))));
        if (a_max < hi || fl)
            v = lw_bin(c, TTH_TBIN_MIN, v, fimm(c, t, fl ? a_max : (a_max < lo ? lo : floor(a_max))));
        return v;
    }
    case TTH_OP_CAST: {
        tth_dtype to = lw_ty(call)->dtype;
        if (to == TTH_BOOL && t != TTH_BOOL)
            return lw_bin(c, TTH_TBIN_NE, x, zero);
        return lw_cast(c, to, x);
    }
    default:
        lw_fail(c, TTH_EINTERNAL, call, "not a unary elementwise op");
        return NULL;
    }
}

/* (x - mean[c]) / sqrt(var[c] + epsilon) * scale[c] + bias[c], channels on axis 1 (ONNX order) */
tth_texpr *lw_ew_batch_norm(lw_ctx *c, const tth_rexpr *call, tth_texpr *const *idx)
{
    const tth_ttype *xt = lw_ty(lw_arg(call, 0));
    tth_texpr *x = lw_value_at(c, lw_arg(call, 0), idx);
    tth_texpr *ch = xt->rank >= 2 && xt->shape[1] != 1 ? idx[1] : lw_i(c, 0);
    tth_texpr *p[4];
    for (int k = 0; k < 4; k++) {
        p[k] = lw_axis_value(c, lw_arg(call, (size_t)k + 1), ch);
        if (!p[k])
            return NULL;
        p[k] = lw_cast(c, xt->dtype, p[k]);
    }
    if (!x)
        return NULL;
    tth_dtype t = xt->dtype;
    double eps = lw_attr_float(call, "epsilon", 1e-5);
    tth_texpr *den = intrin1(c, TTH_TINTRIN_SQRT, lw_add(c, p[3], fimm(c, t, eps)));
    return lw_add(c, lw_mul(c, lw_bin(c, TTH_TBIN_DIV, lw_sub(c, x, p[2]), den), p[0]), p[1]);
}

static int is_float_only(tth_op op)
{
    switch (op) {
    case TTH_OP_SQRT: case TTH_OP_EXP: case TTH_OP_LOG: case TTH_OP_SIN: case TTH_OP_COS:
    case TTH_OP_TANH: case TTH_OP_SIGMOID: case TTH_OP_ERF: case TTH_OP_ELU: case TTH_OP_SELU:
    case TTH_OP_SOFTPLUS: case TTH_OP_SOFTSIGN: case TTH_OP_HARD_SIGMOID: case TTH_OP_HARD_SWISH:
    case TTH_OP_BATCH_NORM: case TTH_OP_LEAKY_RELU: case TTH_OP_THRESHOLDED_RELU: case TTH_OP_RECIPROCAL:
    case TTH_OP_ASIN: case TTH_OP_ACOS: case TTH_OP_ATAN: case TTH_OP_ASINH: case TTH_OP_ACOSH: case TTH_OP_ATANH:
        return 1;
    default:
        return 0;
    }
}

int lw_ew_check(const tth_rexpr *call, char *why, size_t len)
{
    tth_op op = call->u.call.op;
    const tth_ttype *xt = lw_ty(lw_arg(call, 0));
    if (op == TTH_OP_WHERE)
        xt = lw_ty(lw_arg(call, 1));
    if (is_float_only(op) && !tth_dtype_is_float(xt->dtype)) {
        snprintf(why, len, "%s: %s input is not supported (floating point only)", tth_op_name(op),
                 tth_dtype_name(xt->dtype));
        return 0;
    }
    if (op == TTH_OP_BATCH_NORM && call->type.nfields >= 0) {
        snprintf(why, len, "nn.batch_norm: the tuple-valued (training) form is not supported");
        return 0;
    }
    if (call->type.nfields >= 0) {
        snprintf(why, len, "%s: a tuple result is not supported", tth_op_name(op));
        return 0;
    }
    return 1;
}
