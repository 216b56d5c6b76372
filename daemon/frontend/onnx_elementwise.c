/* onnx_elementwise.c: the element-wise operators: arithmetic, comparisons, logic, math functions, activations, casts.
 * One function per operator, and the family's rows of the operator table: each row names the
 * opset range it imports (docs/operators.md, "The operator table"). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_ops.h"

/* The binary operators: the row's arg is the Relay op. */
static int op_binary(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return bin(c, (tth_op)c->arg, in, nin, out, NULL);
}

/* Pow: the exponent may have another dtype than the base; it is cast to the base's. */
static int op_pow(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    tth_rexpr *e = cast_to(c, in[1], tt(in[0])->dtype);
    CHECK(e);
    tth_rexpr *args[2] = {in[0], e};
    return bin(c, TTH_OP_POWER, args, 2, out, NULL);
}

/* Mod: fmod attribute (0: sign of the divisor, 1: C fmod). */
static int op_mod(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return bin(c, TTH_OP_MOD, in, nin, out, json_pack("{s:b}", "fmod", (int)ai(c, "fmod", 0)));
}

/* PRelu: slope broadcast to x; a 1-D slope of x's channel count on a rank>2 x is per channel. */
static int op_prelu(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    tth_rexpr *s = in[1];
    if (rank(s) == 1 && rank(in[0]) > 2 && tt(s)->shape[0] == tt(in[0])->shape[1] && tt(s)->shape[0] != 1 &&
        tt(s)->shape[0] != tt(in[0])->shape[rank(in[0]) - 1]) {
        int64_t shape[TTH_MAX_RANK];
        shape[0] = tt(s)->shape[0];
        for (int i = 1; i < rank(in[0]) - 1; i++)
            shape[i] = 1;
        CHECK(s = reshape(c, s, shape, rank(in[0]) - 1));
    }
    CHECK(out[0] = call2(c, TTH_OP_PRELU, in[0], s, NULL));
    return 0;
}

/* Max, Min, Sum, Mean: variadic with broadcasting, folded left to right. */
static int variadic(tth_onnx_ctx *c, tth_op op, tth_rexpr **in, size_t nin, tth_rexpr **out, int mean)
{
    NEED(1);
    tth_rexpr *acc = in[0];
    for (size_t i = 1; i < nin; i++) {
        if (!in[i])
            continue;
        CHECK(acc = call2(c, op, acc, in[i], NULL));
    }
    if (mean && nin > 1) {
        tth_rexpr *k = k_scalar(c, tt(acc)->dtype, (double)nin);
        CHECK(k);
        CHECK(acc = call2(c, TTH_OP_DIVIDE, acc, k, NULL));
    }
    out[0] = acc;
    return 0;
}
/* Max, Min, Sum: the row's arg is the Relay op. */
static int op_variadic(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return variadic(c, (tth_op)c->arg, in, nin, out, 0);
}
static int op_mean(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return variadic(c, TTH_OP_ADD, in, nin, out, 1);
}

static int op_where(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(3);
    CHECK(out[0] = call(c, TTH_OP_WHERE, in, 3, NULL));
    return 0;
}

static int unary(tth_onnx_ctx *c, tth_op op, tth_rexpr **in, size_t nin, tth_rexpr **out, json_t *attrs)
{
    if (nin < 1 || !in[0]) {
        json_decref(attrs);
        return tth__onnx_fail(c, TTH_EMODEL, "'%s' needs an input", c->node->op_type);
    }
    CHECK(out[0] = call1(c, op, in[0], attrs));
    return 0;
}

/* The unary operators without attributes: the row's arg is the Relay op. */
static int op_unary(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return unary(c, (tth_op)c->arg, in, nin, out, NULL);
}

static int op_leaky_relu(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return unary(c, TTH_OP_LEAKY_RELU, in, nin, out, json_pack("{s:f}", "alpha", af(c, "alpha", 0.01)));
}
static int op_elu(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return unary(c, TTH_OP_ELU, in, nin, out, json_pack("{s:f}", "alpha", af(c, "alpha", 1.0)));
}
static int op_selu(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return unary(c, TTH_OP_SELU, in, nin, out,
                 json_pack("{s:f,s:f}", "alpha", af(c, "alpha", 1.67326319217681884765625), "gamma",
                           af(c, "gamma", 1.05070102214813232421875)));
}
static int op_thresholded_relu(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return unary(c, TTH_OP_THRESHOLDED_RELU, in, nin, out, json_pack("{s:f}", "alpha", af(c, "alpha", 1.0)));
}
static int op_hard_sigmoid(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return unary(c, TTH_OP_HARD_SIGMOID, in, nin, out,
                 json_pack("{s:f,s:f}", "alpha", af(c, "alpha", 0.2), "beta", af(c, "beta", 0.5)));
}

/* Mish (18): x * tanh(softplus(x)) */
static int op_mish(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    tth_rexpr *t;
    CHECK(t = call1(c, TTH_OP_SOFTPLUS, in[0], NULL));
    CHECK(t = call1(c, TTH_OP_TANH, t, NULL));
    CHECK(out[0] = call2(c, TTH_OP_MULTIPLY, in[0], t, NULL));
    return 0;
}

/* Gelu (20): 0.5 x (1 + erf(x / sqrt 2)), or with approximate="tanh"
 * 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) */
static int op_gelu(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    tth_rexpr *x = in[0], *t;
    tth_dtype dt = tt(x)->dtype;
    const char *approx = as(c, "approximate", "none");
    if (!strcmp(approx, "none")) {
        CHECK(t = call2(c, TTH_OP_MULTIPLY, x, k_scalar(c, dt, 0.70710678118654752440), NULL));
        CHECK(t = call1(c, TTH_OP_ERF, t, NULL));
    } else if (!strcmp(approx, "tanh")) {
        tth_rexpr *x3;
        CHECK(x3 = call2(c, TTH_OP_MULTIPLY, x, x, NULL));
        CHECK(x3 = call2(c, TTH_OP_MULTIPLY, x3, x, NULL));
        CHECK(t = call2(c, TTH_OP_MULTIPLY, x3, k_scalar(c, dt, 0.044715), NULL));
        CHECK(t = call2(c, TTH_OP_ADD, x, t, NULL));
        CHECK(t = call2(c, TTH_OP_MULTIPLY, t, k_scalar(c, dt, 0.79788456080286535588), NULL));
        CHECK(t = call1(c, TTH_OP_TANH, t, NULL));
    } else {
        return tth__onnx_fail(c, TTH_EMODEL, "Gelu approximate '%s' is neither 'none' nor 'tanh'", approx);
    }
    CHECK(t = call2(c, TTH_OP_ADD, t, k_scalar(c, dt, 1.0), NULL));
    CHECK(t = call2(c, TTH_OP_MULTIPLY, t, x, NULL));
    CHECK(out[0] = call2(c, TTH_OP_MULTIPLY, t, k_scalar(c, dt, 0.5), NULL));
    return 0;
}

/* Clip: min/max attributes before opset 11, optional constant inputs from 11 on. An absent
 * bound is ±DBL_MAX (JSON has no infinity; converting DBL_MAX to float gives infinity). */
static int op_clip(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    double lo = -DBL_MAX, hi = DBL_MAX;
    if (c->version < 11) {
        lo = af(c, "min", -DBL_MAX);
        hi = af(c, "max", DBL_MAX);
    } else {
        if (nin > 1 && in[1] && vscalar(c, in[1], "min", &lo))
            return c->diag->code;
        if (nin > 2 && in[2] && vscalar(c, in[2], "max", &hi))
            return c->diag->code;
    }
    CHECK(out[0] = call1(c, TTH_OP_CLIP, in[0], json_pack("{s:f,s:f}", "a_min", lo, "a_max", hi)));
    return 0;
}

/* Cast: `to` is an ONNX dtype number. */
static int op_cast(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    const Onnx__AttributeProto *a = attr(c, "to");
    if (!a)
        return tth__onnx_fail(c, TTH_EMODEL, "Cast without the 'to' attribute");
    tth_dtype dt = a->has_i ? tth__onnx_dtype((int32_t)a->i) : TTH_DTYPE_INVALID;
    if (dt == TTH_DTYPE_INVALID) {
        char type[64];
        tth__onnx_type_text(a->has_i ? (int32_t)a->i : -1, type, sizeof type);
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: Cast to %s", type);
    }
    CHECK(out[0] = call1(c, TTH_OP_CAST, in[0], json_pack("{s:s}", "dtype", tth_dtype_name(dt))));
    return 0;
}

/* BitShift(x, y) on unsigned integers: x * 2^y or x / 2^y, 2^y exact in float64 for y < 64
 * (the product wraps as unsigned arithmetic does). */
static int op_bitshift(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    tth_dtype d = tt(in[0])->dtype;
    if (d != TTH_U8 && d != TTH_U16 && d != TTH_U32 && d != TTH_U64)
        return tth__onnx_fail(c, TTH_EMODEL, "BitShift takes unsigned integers, not %s", tth_dtype_name(d));
    const char *dir = as(c, "direction", "");
    int left = !strcmp(dir, "LEFT");
    if (!left && strcmp(dir, "RIGHT"))
        return tth__onnx_fail(c, TTH_EMODEL, "BitShift direction '%s' is not LEFT or RIGHT", dir);
    tth_rexpr *two = k_scalar(c, TTH_F64, 2), *yf = cast_to(c, in[1], TTH_F64), *p, *pi;
    CHECK(two && yf);
    CHECK(p = call2(c, TTH_OP_POWER, two, yf, NULL));
    CHECK(pi = cast_to(c, p, d));
    CHECK(out[0] = call2(c, left ? TTH_OP_MULTIPLY : TTH_OP_DIVIDE, in[0], pi, NULL));
    return 0;
}

/* CastLike: cast to the dtype of the second input. */
static int op_cast_like(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    CHECK(out[0] = call1(c, TTH_OP_CAST, in[0], json_pack("{s:s}", "dtype", tth_dtype_name(tt(in[1])->dtype))));
    return 0;
}

/* Celu: alpha * elu(x / alpha) (alpha 1 in the elu), which is x for x >= 0. */
static int op_celu(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    double alpha = af(c, "alpha", 1.0);
    if (alpha == 0)
        return tth__onnx_fail(c, TTH_EMODEL, "Celu alpha is 0");
    tth_rexpr *a = kx(c, in[0], alpha), *y;
    CHECK(a);
    CHECK(y = call2(c, TTH_OP_DIVIDE, in[0], a, NULL));
    CHECK(y = call1(c, TTH_OP_ELU, y, json_pack("{s:f}", "alpha", 1.0)));
    CHECK(out[0] = call2(c, TTH_OP_MULTIPLY, y, a, NULL));
    return 0;
}

/* Shrink: x < -lambd ? x + bias : x > lambd ? x - bias : 0. */
static int op_shrink(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    double l = af(c, "lambd", 0.5), b = af(c, "bias", 0.0);
    tth_rexpr *x = in[0], *nl = kx(c, x, -l), *pl = kx(c, x, l), *kb = kx(c, x, b), *z = kx(c, x, 0);
    CHECK(nl && pl && kb && z);
    tth_rexpr *lo, *hi, *xp, *xm, *inner;
    CHECK(lo = call2(c, TTH_OP_LESS, x, nl, NULL));
    CHECK(hi = call2(c, TTH_OP_GREATER, x, pl, NULL));
    CHECK(xp = call2(c, TTH_OP_ADD, x, kb, NULL));
    CHECK(xm = call2(c, TTH_OP_SUBTRACT, x, kb, NULL));
    tth_rexpr *a1[3] = {hi, xm, z};
    CHECK(inner = call(c, TTH_OP_WHERE, a1, 3, NULL));
    tth_rexpr *a2[3] = {lo, xp, inner};
    CHECK(out[0] = call(c, TTH_OP_WHERE, a2, 3, NULL));
    return 0;
}

/* IsNaN: not (x == x). */
static int op_isnan(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    tth_rexpr *e;
    CHECK(e = call2(c, TTH_OP_EQUAL, in[0], in[0], NULL));
    CHECK(out[0] = call1(c, TTH_OP_LOGICAL_NOT, e, NULL));
    return 0;
}

/* IsInf: x == +inf (detect_positive) or x == -inf (detect_negative). */
static int op_isinf(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int pos = (int)ai(c, "detect_positive", 1), neg = (int)ai(c, "detect_negative", 1);
    tth_rexpr *r = NULL, *e;
    if (pos) {
        tth_rexpr *k = kx(c, in[0], INFINITY);
        CHECK(k);
        CHECK(r = call2(c, TTH_OP_EQUAL, in[0], k, NULL));
    }
    if (neg) {
        tth_rexpr *k = kx(c, in[0], -INFINITY);
        CHECK(k);
        CHECK(e = call2(c, TTH_OP_EQUAL, in[0], k, NULL));
        if (r)
            CHECK(e = call2(c, TTH_OP_LOGICAL_OR, r, e, NULL));
        r = e;
    }
    if (!r) {
        tth_ttype ty = *tt(in[0]);
        ty.dtype = TTH_BOOL;
        CHECK(r = k_tensor(c, tth_tensor_new(&ty, NULL)));
    }
    out[0] = r;
    return 0;
}

static int op_tan(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    tth_rexpr *s, *co;
    CHECK(s = call1(c, TTH_OP_SIN, in[0], NULL));
    CHECK(co = call1(c, TTH_OP_COS, in[0], NULL));
    CHECK(out[0] = call2(c, TTH_OP_DIVIDE, s, co, NULL));
    return 0;
}

/* Sinh / Cosh: (exp(x) -/+ exp(-x)) / 2. */
static int hyp(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, tth_op combine)
{
    NEED(1);
    tth_rexpr *e1, *e2, *nx, *sum, *two = kx(c, in[0], 2.0);
    CHECK(two);
    CHECK(e1 = call1(c, TTH_OP_EXP, in[0], NULL));
    CHECK(nx = call1(c, TTH_OP_NEGATIVE, in[0], NULL));
    CHECK(e2 = call1(c, TTH_OP_EXP, nx, NULL));
    CHECK(sum = call2(c, combine, e1, e2, NULL));
    CHECK(out[0] = call2(c, TTH_OP_DIVIDE, sum, two, NULL));
    return 0;
}
/* Sinh (arg: subtract) and Cosh (arg: add). */
static int op_hyp(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return hyp(c, in, nin, out, (tth_op)c->arg);
}

/* ---------------------------------------------------------------- the rows */

const tth_onnx_op tth__onnx_elementwise_ops[] = {
    {"Abs", 1, op_unary, TTH_OP_ABS, NULL},
    {"Acos", 7, op_unary, TTH_OP_ACOS, NULL},
    {"Acosh", 9, op_unary, TTH_OP_ACOSH, NULL},
    {"Add", 1, op_binary, TTH_OP_ADD, NULL},
    {"Add", 7, op_binary, TTH_OP_ADD, NULL},
    {"And", 1, op_binary, TTH_OP_LOGICAL_AND, NULL},
    {"And", 7, op_binary, TTH_OP_LOGICAL_AND, NULL},
    {"Asin", 7, op_unary, TTH_OP_ASIN, NULL},
    {"Asinh", 9, op_unary, TTH_OP_ASINH, NULL},
    {"Atan", 7, op_unary, TTH_OP_ATAN, NULL},
    {"Atanh", 9, op_unary, TTH_OP_ATANH, NULL},
    {"BitShift", 11, op_bitshift, 0, NULL},
    {"Cast", 1, op_cast, 0, NULL},
    {"CastLike", 15, op_cast_like, 0, NULL},
    {"Ceil", 1, op_unary, TTH_OP_CEIL, NULL},
    {"Celu", 12, op_celu, 0, NULL},
    {"Clip", 1, op_clip, 0, NULL},
    {"Clip", 11, op_clip, 0, NULL},
    {"Cos", 7, op_unary, TTH_OP_COS, NULL},
    {"Cosh", 9, op_hyp, TTH_OP_ADD, NULL},
    {"Div", 1, op_binary, TTH_OP_DIVIDE, NULL},
    {"Div", 7, op_binary, TTH_OP_DIVIDE, NULL},
    {"Elu", 1, op_elu, 0, NULL},
    {"Equal", 1, op_binary, TTH_OP_EQUAL, NULL},
    {"Equal", 7, op_binary, TTH_OP_EQUAL, NULL},
    {"Erf", 9, op_unary, TTH_OP_ERF, NULL},
    {"Exp", 1, op_unary, TTH_OP_EXP, NULL},
    {"Floor", 1, op_unary, TTH_OP_FLOOR, NULL},
    {"Gelu", 20, op_gelu, 0, NULL},
    {"Greater", 1, op_binary, TTH_OP_GREATER, NULL},
    {"Greater", 7, op_binary, TTH_OP_GREATER, NULL},
    {"GreaterOrEqual", 12, op_binary, TTH_OP_GREATER_EQUAL, NULL},
    {"HardSigmoid", 1, op_hard_sigmoid, 0, NULL},
    {"HardSwish", 14, op_unary, TTH_OP_HARD_SWISH, NULL},
    {"IsInf", 10, op_isinf, 0, NULL},
    {"IsNaN", 9, op_isnan, 0, NULL},
    {"LeakyRelu", 1, op_leaky_relu, 0, NULL},
    {"Less", 1, op_binary, TTH_OP_LESS, NULL},
    {"Less", 7, op_binary, TTH_OP_LESS, NULL},
    {"LessOrEqual", 12, op_binary, TTH_OP_LESS_EQUAL, NULL},
    {"Log", 1, op_unary, TTH_OP_LOG, NULL},
    {"Max", 1, op_variadic, TTH_OP_MAXIMUM, NULL},
    {"Mean", 1, op_mean, 0, NULL},
    {"Min", 1, op_variadic, TTH_OP_MINIMUM, NULL},
    {"Mish", 18, op_mish, 0, NULL},
    {"Mod", 10, op_mod, 0, NULL},
    {"Mul", 1, op_binary, TTH_OP_MULTIPLY, NULL},
    {"Mul", 7, op_binary, TTH_OP_MULTIPLY, NULL},
    {"Neg", 1, op_unary, TTH_OP_NEGATIVE, NULL},
    {"Not", 1, op_unary, TTH_OP_LOGICAL_NOT, NULL},
    {"Or", 1, op_binary, TTH_OP_LOGICAL_OR, NULL},
    {"Or", 7, op_binary, TTH_OP_LOGICAL_OR, NULL},
    {"PRelu", 1, op_prelu, 0, NULL},
    {"Pow", 1, op_pow, 0, NULL},
    {"Pow", 7, op_pow, 0, NULL},
    {"Reciprocal", 1, op_unary, TTH_OP_RECIPROCAL, NULL},
    {"Relu", 1, op_unary, TTH_OP_RELU, NULL},
    {"Round", 11, op_unary, TTH_OP_ROUND, NULL},
    {"Selu", 1, op_selu, 0, NULL},
    {"Shrink", 9, op_shrink, 0, NULL},
    {"Sigmoid", 1, op_unary, TTH_OP_SIGMOID, NULL},
    {"Sign", 9, op_unary, TTH_OP_SIGN, NULL},
    {"Sin", 7, op_unary, TTH_OP_SIN, NULL},
    {"Sinh", 9, op_hyp, TTH_OP_SUBTRACT, NULL},
    {"Softplus", 1, op_unary, TTH_OP_SOFTPLUS, NULL},
    {"Softsign", 1, op_unary, TTH_OP_SOFTSIGN, NULL},
    {"Sqrt", 1, op_unary, TTH_OP_SQRT, NULL},
    {"Sub", 1, op_binary, TTH_OP_SUBTRACT, NULL},
    {"Sub", 7, op_binary, TTH_OP_SUBTRACT, NULL},
    {"Sum", 1, op_variadic, TTH_OP_ADD, NULL},
    {"Tan", 7, op_tan, 0, NULL},
    {"Tanh", 1, op_unary, TTH_OP_TANH, NULL},
    {"ThresholdedRelu", 10, op_thresholded_relu, 0, NULL},
    {"Where", 9, op_where, 0, NULL},
    {"Xor", 1, op_binary, TTH_OP_LOGICAL_XOR, NULL},
    {"Xor", 7, op_binary, TTH_OP_LOGICAL_XOR, NULL},
    {NULL, 0, NULL, 0, NULL},
};
