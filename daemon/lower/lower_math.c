/* lower_math.c: exp, tanh, erf and sigmoid of float32 written as TIR arithmetic (docs/lowering.md,
 * "Math functions"), so that an element-wise chain with them is vector code on every target
 * instead of one C library call per lane, and computes the same bits in the interpreter (the
 * constant folder), in C and in LLVM's code: the polynomials are evaluated in the order written
 * here, each step a fused multiply-add (an explicit TIR fma, which the interpreter computes as
 * C's fmaf) on targets whose CPU has the instruction and a multiply and an add on the others;
 * the bounds below hold for both forms.
 *
 * The coefficients are float32 values fitted by scripts/fit-math (weighted least squares that
 * converge to the minimax polynomial of the relative error); its output is pasted below.
 * Accuracy over the whole float32 range, checked against numpy by tests/daemon/lower/test_lower_math.c:
 * exp 1.4 ulp, tanh 1.3 ulp, erf 2.5 ulp, sigmoid 3 ulp, for results that are normal numbers;
 * results in the subnormal range are within 2^-149 (one subnormal step) of the exact value. NaN
 * gives NaN, +-inf gives the limits. */
#include "lower_internal.h"

/* ---- values bound once (LET) inside a scope ---- */

int lw_lets_open(lw_ctx *c)
{
    c->let_scopes++;
    return (int)c->nlets;
}

tth_tstmt *lw_lets_close(lw_ctx *c, int mark, tth_tstmt *st)
{
    c->let_scopes--;
    for (size_t i = c->nlets; i > (size_t)mark; i--)
        if (st)
            st = tth_tir_let(c->m, c->lets[i - 1].var, c->lets[i - 1].value, st);
    c->nlets = (size_t)mark;
    return st;
}

tth_texpr *lw_bind(lw_ctx *c, tth_texpr *e)
{
    if (!e || !c->let_scopes || e->kind == TTH_TEXPR_VAR || e->kind == TTH_TEXPR_INT || e->kind == TTH_TEXPR_FLOAT)
        return e;
    if (c->nlets == c->caplets) {
        size_t n = c->caplets ? 2 * c->caplets : 32;
        lw_let_rec *nl = realloc(c->lets, n * sizeof *nl);
        if (!nl) {
            lw_fail(c, TTH_ENOMEM, NULL, "out of memory");
            return NULL;
        }
        c->lets = nl;
        c->caplets = n;
    }
    tth_tvar *v = lw_var_vec(c, "m", e->dtype, e->lanes);
    if (!v)
        return NULL;
    c->lets[c->nlets].var = v;
    c->lets[c->nlets++].value = e;
    return lw_ref(c, v);
}

/* ---- the functions ---- */

static tth_texpr *k32(lw_ctx *c, double v)
{
    return lw_imm(c, TTH_F32, v);
}

/* c[0] + x*(c[1] + x*(... + x*c[n-1])), each step one fused multiply-add where the target has
 * the instruction (lw_madd), else a multiply and an add */
static tth_texpr *horner(lw_ctx *c, const double *k, int n, tth_texpr *x)
{
    tth_texpr *acc = k32(c, k[n - 1]);
    for (int i = n - 2; i >= 0; i--)
        acc = lw_madd(c, acc, x, k32(c, k[i]));
    return acc;
}


static const double EXP_P[] = {0.5, 0.166665778, 0.0416668542, 0.00836314075, 0.0013901284};

static tth_texpr *i32(lw_ctx *c, int64_t v)
{
    return lw_imm(c, TTH_I32, (double)v);
}

/* The reduction both exponentials share: for x in range, *t = x / ln 2 + 1.5 * 2^23, whose bits
 * are 0x4B400000 + n with n = round(x / ln 2) (no rounding or conversion instruction needed);
 * r = x - n ln 2 with ln 2 in two parts; returns e^r = 1 + r + r^2 P(r), r in [-ln2/2, ln2/2]. */
static tth_texpr *exp_reduced(lw_ctx *c, tth_texpr *x, tth_texpr **t)
{
    *t = lw_bind(c, lw_madd(c, x, k32(c, 1.44269504088896341), k32(c, 12582912.0)));
    tth_texpr *nf = lw_bind(c, lw_sub(c, *t, k32(c, 12582912.0)));
    tth_texpr *r = lw_madd(c, nf, k32(c, -0.693145751953125), x);
    r = lw_bind(c, lw_madd(c, nf, k32(c, -1.428606765330187e-06), r));
    return lw_madd(c, lw_mul(c, r, r), horner(c, EXP_P, 5, r), lw_add(c, k32(c, 1.0), r));
}

/* exp(x) = 2^n * e^r (exp_reduced). 2^n is built from its exponent bits as two factors
 * 2^n1 * 2^n2, so results down to the subnormals and up to infinity come out right for x in
 * [-104, 89], the range the clamp keeps: n1 = n / 2 in general; for an argument known not to be
 * positive (sigmoid's -|x|, `nonpos`), n in [-150, 0], n1 = max(n, -126) and n2 = n - n1 in
 * [-24, 0] (no upper clamp, two instructions fewer), multiplied as (e^r 2^n2) 2^n1 so that a
 * subnormal result is rounded once. The clamps are selects on a comparison, which NaN fails: it
 * stays NaN through the arithmetic to the result. */
static tth_texpr *exp_f32_core(lw_ctx *c, tth_texpr *x0, int nonpos)
{
    tth_texpr *x = lw_bind(c, x0);
    tth_texpr *xc = x, *t;
    if (!nonpos)
        xc = lw_bind(c, tth_tir_select(c->m, lw_bin(c, TTH_TBIN_GT, x, k32(c, 89.0)), k32(c, 89.0), x));
    xc = lw_bind(c, tth_tir_select(c->m, lw_bin(c, TTH_TBIN_LT, xc, k32(c, -104.0)), k32(c, -104.0), xc));
    tth_texpr *e = exp_reduced(c, xc, &t);
    tth_texpr *n = lw_bind(c, lw_sub(c, tth_tir_reinterpret(c->m, TTH_I32, t), i32(c, 0x4B400000)));
    tth_texpr *n1 = lw_bind(c, nonpos ? lw_bin(c, TTH_TBIN_MAX, n, i32(c, -126)) : lw_bin(c, TTH_TBIN_DIV, n, i32(c, 2)));
    tth_texpr *n2 = lw_sub(c, n, n1);
    tth_texpr *s1 = tth_tir_reinterpret(c->m, TTH_F32, lw_bin(c, TTH_TBIN_SHL, lw_add(c, n1, i32(c, 127)), i32(c, 23)));
    tth_texpr *s2 = tth_tir_reinterpret(c->m, TTH_F32, lw_bin(c, TTH_TBIN_SHL, lw_add(c, n2, i32(c, 127)), i32(c, 23)));
    return nonpos ? lw_mul(c, lw_mul(c, e, s2), s1) : lw_mul(c, lw_mul(c, e, s1), s2);
}

static tth_texpr *exp_f32(lw_ctx *c, tth_texpr *x0)
{
    return exp_f32_core(c, x0, 0);
}

/* tanh(x): x + x^3 Q(x^2) for |x| < 0.625; else sign(x) (1 - 2 / (exp(2|x|) + 1)) */
static tth_texpr *tanh_f32(lw_ctx *c, tth_texpr *x0)
{
    static const double Q[] = {-0.333333284, 0.133327708, -0.0538509525, 0.020997351, -0.00609693397};
    tth_texpr *x = lw_bind(c, x0);
    tth_texpr *a = lw_bind(c, tth_tir_intrin(c->m, TTH_TINTRIN_FABS, x, NULL));
    tth_texpr *s = lw_bind(c, lw_mul(c, x, x));
    tth_texpr *small = lw_add(c, x, lw_mul(c, lw_mul(c, x, s), horner(c, Q, 5, s)));
    tth_texpr *e = exp_f32(c, lw_add(c, a, a));
    tth_texpr *big = lw_bind(c, lw_sub(c, k32(c, 1.0), lw_bin(c, TTH_TBIN_DIV, k32(c, 2.0), lw_add(c, e, k32(c, 1.0)))));
    big = tth_tir_select(c->m, lw_bin(c, TTH_TBIN_LT, x, k32(c, 0.0)), tth_tir_un(c->m, TTH_TUN_NEG, big), big);
    return tth_tir_select(c->m, lw_bin(c, TTH_TBIN_LT, a, k32(c, 0.625)), small, big);
}

/* e^q for q known to lie in [-19, -1] (erf's tail): exp_reduced without exp_f32's clamps and
 * two-factor scale. n = round(q / ln 2) is in [-28, -1], so 2^n is one normal factor whose bits
 * are (n + 127) << 23, n + 127 = bits(t) - (0x4B400000 - 127). */
static tth_texpr *exp_f32_tail(lw_ctx *c, tth_texpr *q)
{
    tth_texpr *t;
    tth_texpr *e = exp_reduced(c, q, &t);
    tth_texpr *biased = lw_sub(c, tth_tir_reinterpret(c->m, TTH_I32, t), i32(c, 0x4B400000 - 127));
    return lw_mul(c, e, tth_tir_reinterpret(c->m, TTH_F32, lw_bin(c, TTH_TBIN_SHL, biased, i32(c, 23))));
}

/* erf(x): x P(x^2) for |x| < 0.875; else sign(x) (1 - e^Q(a - 0.875)), a = min(|x|, 3.925), Q
 * fitted to log(erfc) on [0.875, 3.925] (from 3.925 on erf rounds to 1 in float32, and so does
 * 1 - erfc(3.925)). No division and one exponential without its range checks: GELU's erf, in a
 * transformer's widest matmul epilogue, cost as much as its multiply-adds. NaN takes the first
 * branch (the comparison is false) and stays NaN. */
static tth_texpr *erf_f32(lw_ctx *c, tth_texpr *x0)
{
    static const double P[] = {1.12837911, -0.376125515, 0.112824552, -0.0267914627, 0.00503218127, -0.000620325445};
    static const double Q[] = {-1.5328244, -2.43021894, -0.826552689, -0.0468390696, 0.0111997565, -0.00203706278,
                               0.000200996466};
    tth_texpr *x = lw_bind(c, x0);
    tth_texpr *a = lw_bind(c, tth_tir_intrin(c->m, TTH_TINTRIN_FABS, x, NULL));
    tth_texpr *s = lw_bind(c, lw_mul(c, x, x));
    tth_texpr *small = lw_mul(c, x, horner(c, P, 6, s));
    tth_texpr *u = lw_sub(c, lw_bin(c, TTH_TBIN_MIN, a, k32(c, 3.925)), k32(c, 0.875));
    tth_texpr *e = exp_f32_tail(c, lw_bind(c, horner(c, Q, 7, lw_bind(c, u))));
    tth_texpr *big = tth_tir_reinterpret(c->m, TTH_I32, lw_sub(c, k32(c, 1.0), e));
    tth_texpr *sign = lw_bin(c, TTH_TBIN_BITAND, tth_tir_reinterpret(c->m, TTH_I32, x), i32(c, INT32_MIN));
    big = tth_tir_reinterpret(c->m, TTH_F32, lw_bin(c, TTH_TBIN_BITOR, big, sign));
    return tth_tir_select(c->m, lw_bin(c, TTH_TBIN_GE, a, k32(c, 0.875)), big, small);
}

/* sigmoid(x) = 1 / (1 + e) for x >= 0, e / (1 + e) below, e = exp(-|x|): no overflow, and the
 * small values of large negative x keep their precision */
static tth_texpr *sigmoid_f32(lw_ctx *c, tth_texpr *x0)
{
    tth_texpr *x = lw_bind(c, x0);
    tth_texpr *e = lw_bind(c, exp_f32_core(c, tth_tir_un(c->m, TTH_TUN_NEG, tth_tir_intrin(c->m, TTH_TINTRIN_FABS, x, NULL)), 1));
    tth_texpr *r = lw_bind(c, lw_bin(c, TTH_TBIN_DIV, k32(c, 1.0), lw_add(c, k32(c, 1.0), e)));
    return tth_tir_select(c->m, lw_bin(c, TTH_TBIN_GE, x, k32(c, 0.0)), r, lw_mul(c, e, r));
}

tth_texpr *lw_math(lw_ctx *c, lw_math_fn fn, tth_texpr *x)
{
    if (!x)
        return NULL;
    tth_dtype t = x->dtype;
    if (t != TTH_F32 && t != TTH_F16 && t != TTH_BF16) {
        /* float64 keeps the C library's functions */
        switch (fn) {
        case LW_MATH_EXP: return tth_tir_intrin(c->m, TTH_TINTRIN_EXP, x, NULL);
        case LW_MATH_TANH: return tth_tir_intrin(c->m, TTH_TINTRIN_TANH, x, NULL);
        case LW_MATH_ERF: return tth_tir_intrin(c->m, TTH_TINTRIN_ERF, x, NULL);
        case LW_MATH_SIGMOID: {
            tth_texpr *one = lw_imm(c, t, 1.0);
            return lw_bin(c, TTH_TBIN_DIV, one,
                          lw_add(c, one, tth_tir_intrin(c->m, TTH_TINTRIN_EXP, tth_tir_un(c->m, TTH_TUN_NEG, x), NULL)));
        }
        }
        return NULL;
    }
    /* float16 and bfloat16 compute in float32 (as their intrinsics do) */
    tth_texpr *x32 = lw_cast(c, TTH_F32, x), *r = NULL;
    switch (fn) {
    case LW_MATH_EXP: r = exp_f32(c, x32); break;
    case LW_MATH_TANH: r = tanh_f32(c, x32); break;
    case LW_MATH_ERF: r = erf_f32(c, x32); break;
    case LW_MATH_SIGMOID: r = sigmoid_f32(c, x32); break;
    }
    return lw_cast(c, t, r);
}
