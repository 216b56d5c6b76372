/* The TIR interpreter on hand-built TIR: C integer semantics (wrapping, truncating division,
 * floor division/modulo), float32 rounding, bounds checks, LOCAL allocation, CALL_FUNC with
 * workspace buffers, and refusals (call_extern, unbound variables). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "lt_util.h"

static tth_tir_module *m;
static tth_diag d;

static void setup(void)
{
    m = tth_tir_module_new();
    cr_assert_not_null(m);
    tth_diag_clear(&d);
}

static void teardown(void)
{
    tth_tir_module_free(m);
}

/* every test has a new module m and a cleared d */
TestSuite(tir_eval, .init = setup, .fini = teardown);

/* f(out: dtype[n]) { for i in 0..n: out[i] = value(i) } */
static tth_prim_func *one_loop(const char *name, tth_dtype dt, int64_t n, tth_texpr *(*value)(tth_texpr *i))
{
    tth_tbuffer *out = tth_tir_buffer(m, "out", dt, 1, &n, TTH_SCOPE_PARAM);
    tth_tvar *i = tth_tir_var(m, "i", TTH_I64);
    tth_tstmt *body = tth_tir_for(m, i, tth_tir_i64(m, 0), tth_tir_i64(m, n), TTH_LOOP_SERIAL,
                                  tth_tir_store(m, out, tth_tir_ref(m, i), value(tth_tir_ref(m, i))));
    tth_prim_func *f = tth_tir_func_add(m, name, &out, 1, body, "c", NULL, &d);
    cr_assert_not_null(f, "%s", d.message);
    return f;
}

/* one_loop "f" run by the interpreter into out */
static void run_one_loop(tth_dtype dt, int64_t n, tth_texpr *(*value)(tth_texpr *i), void *out)
{
    one_loop("f", dt, n, value);
    void *bufs[1] = {out};
    cr_assert_eq(tth_tir_eval(m, "f", bufs, 1, &d), 0, "%s", d.message);
}

static tth_texpr *i8_wrap(tth_texpr *i)
{
    /* (int8)(i) * 100: 0, 100, -56 (200 wraps), 44 (300 wraps) */
    return tth_tir_bin(m, TTH_TBIN_MUL, tth_tir_cast(m, TTH_I8, i), tth_tir_int(m, TTH_I8, 100));
}

Test(tir_eval, int8_arithmetic_wraps)
{
    int8_t out[4];
    run_one_loop(TTH_I8, 4, i8_wrap, out);
    cr_assert_eq(out[0], 0);
    cr_assert_eq(out[1], 100);
    cr_assert_eq(out[2], -56);
    cr_assert_eq(out[3], 44);
}

static tth_texpr *divs(tth_texpr *i)
{
    /* a = i - 3 in [-3, 3]; pack (a / 2, a % 2, floordiv(a, 2), floormod(a, 2)) as 1000s */
    tth_texpr *a = tth_tir_bin(m, TTH_TBIN_SUB, i, tth_tir_i64(m, 3));
    tth_texpr *two = tth_tir_i64(m, 2);
    tth_texpr *q = tth_tir_bin(m, TTH_TBIN_DIV, a, two), *r = tth_tir_bin(m, TTH_TBIN_MOD, a, two);
    tth_texpr *fq = tth_tir_bin(m, TTH_TBIN_FLOORDIV, a, two), *fr = tth_tir_bin(m, TTH_TBIN_FLOORMOD, a, two);
    tth_texpr *s = tth_tir_bin(m, TTH_TBIN_ADD, tth_tir_bin(m, TTH_TBIN_MUL, q, tth_tir_i64(m, 1000)),
                               tth_tir_bin(m, TTH_TBIN_MUL, r, tth_tir_i64(m, 100)));
    s = tth_tir_bin(m, TTH_TBIN_ADD, s, tth_tir_bin(m, TTH_TBIN_MUL, fq, tth_tir_i64(m, 10)));
    return tth_tir_bin(m, TTH_TBIN_ADD, s, fr);
}

Test(tir_eval, division_truncates_and_floors)
{
    int64_t out[7];
    run_one_loop(TTH_I64, 7, divs, out);
    /* a = -3: C: -1, -1; floor: -2, 1 */
    cr_assert_eq(out[0], -1000 - 100 - 20 + 1);
    /* a = -1: C: 0, -1; floor: -1, 1 */
    cr_assert_eq(out[2], 0 - 100 - 10 + 1);
    /* a = 3: 1, 1, 1, 1 */
    cr_assert_eq(out[6], 1000 + 100 + 10 + 1);
}

static tth_texpr *f32_third(tth_texpr *i)
{
    return tth_tir_bin(m, TTH_TBIN_DIV, tth_tir_cast(m, TTH_F32, i), tth_tir_float(m, TTH_F32, 3.0));
}

Test(tir_eval, float32_rounds_like_c)
{
    float out[5];
    run_one_loop(TTH_F32, 5, f32_third, out);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(out[i], (float)i / 3.0f);
}

static tth_texpr *nearby(tth_texpr *i)
{
    /* i - 2.5 rounded half to even: -2.5 → -2, -1.5 → -2, -0.5 → -0, 0.5 → 0, 1.5 → 2 */
    tth_texpr *x = tth_tir_bin(m, TTH_TBIN_SUB, tth_tir_cast(m, TTH_F32, i), tth_tir_float(m, TTH_F32, 2.5));
    return tth_tir_intrin(m, TTH_TINTRIN_ROUND_EVEN, x, NULL);
}

Test(tir_eval, round_half_to_even)
{
    float out[5];
    run_one_loop(TTH_F32, 5, nearby, out);
    const float want[5] = {-2, -2, 0, 0, 2};
    for (int i = 0; i < 5; i++)
        cr_assert_eq(out[i], want[i], "element %d: %g", i, out[i]);
}

static tth_texpr *past_end;
static tth_texpr *load_past(tth_texpr *i)
{
    (void)i;
    return past_end;
}

Test(tir_eval, out_of_bounds_load_is_an_error)
{
    int64_t n = 4;
    tth_tbuffer *in = tth_tir_buffer(m, "in", TTH_F32, 1, &n, TTH_SCOPE_PARAM);
    tth_tbuffer *out = tth_tir_buffer(m, "out", TTH_F32, 1, &n, TTH_SCOPE_PARAM);
    tth_tvar *i = tth_tir_var(m, "i", TTH_I64);
    /* out[i] = in[i + 1]: reads in[4] on the last iteration */
    tth_tstmt *body = tth_tir_for(m, i, tth_tir_i64(m, 0), tth_tir_i64(m, n), TTH_LOOP_SERIAL,
                                  tth_tir_store(m, out, tth_tir_ref(m, i),
                                                tth_tir_load(m, in, tth_tir_bin(m, TTH_TBIN_ADD, tth_tir_ref(m, i),
                                                                                 tth_tir_i64(m, 1)))));
    tth_tbuffer *ps[2] = {in, out};
    cr_assert_not_null(tth_tir_func_add(m, "f", ps, 2, body, "c", NULL, &d));
    float a[4] = {1, 2, 3, 4}, b[4];
    void *bufs[2] = {a, b};
    cr_assert_eq(tth_tir_eval(m, "f", bufs, 2, &d), TTH_EINTERNAL);
    cr_assert(strstr(d.message, "out of bounds") && strstr(d.message, "'in'") && strstr(d.message, "4"), "%s",
              d.message);
    (void)load_past;
    (void)past_end;
}

Test(tir_eval, call_extern_is_unsupported_with_its_name)
{
    int64_t n = 1;
    tth_tbuffer *out = tth_tir_buffer(m, "out", TTH_F32, 1, &n, TTH_SCOPE_PARAM);
    tth_texpr *arg = tth_tir_float(m, TTH_F32, 1.0);
    tth_tstmt *body = tth_tir_store(m, out, tth_tir_i64(m, 0), tth_tir_call_extern(m, TTH_F32, "arm_fancy_op", &arg, 1));
    cr_assert_not_null(tth_tir_func_add(m, "f", &out, 1, body, "c", NULL, &d));
    float o;
    void *bufs[1] = {&o};
    cr_assert_eq(tth_tir_eval(m, "f", bufs, 1, &d), TTH_EUNSUPPORTED);
    cr_assert(strstr(d.message, "arm_fancy_op"), "%s", d.message);
}

Test(tir_eval, integer_division_by_zero_is_an_error)
{
    int64_t n = 1;
    tth_tbuffer *in = tth_tir_buffer(m, "in", TTH_I32, 1, &n, TTH_SCOPE_PARAM);
    tth_tbuffer *out = tth_tir_buffer(m, "out", TTH_I32, 1, &n, TTH_SCOPE_PARAM);
    tth_texpr *z = tth_tir_load(m, in, tth_tir_i64(m, 0));
    tth_tstmt *body = tth_tir_store(m, out, tth_tir_i64(m, 0), tth_tir_bin(m, TTH_TBIN_DIV, tth_tir_int(m, TTH_I32, 7), z));
    tth_tbuffer *ps[2] = {in, out};
    cr_assert_not_null(tth_tir_func_add(m, "f", ps, 2, body, "c", NULL, &d));
    int32_t a = 0, b = 0;
    void *bufs[2] = {&a, &b};
    cr_assert_eq(tth_tir_eval(m, "f", bufs, 2, &d), TTH_EINVAL);
    cr_assert(strstr(d.message, "division by zero"), "%s", d.message);
}

/* callee(a, b) of n floats with a LOCAL scratch tmp (at tmp_offset when >= 0): tmp[i] = first(a[i]),
 * then b[j] = second(tmp[j], a[j]) */
static void add_callee(int64_t n, int64_t tmp_offset, tth_texpr *(*first)(tth_texpr *a),
                       tth_texpr *(*second)(tth_texpr *tmp, tth_texpr *a))
{
    tth_tbuffer *a = tth_tir_buffer(m, "a", TTH_F32, 1, &n, TTH_SCOPE_PARAM);
    tth_tbuffer *b = tth_tir_buffer(m, "b", TTH_F32, 1, &n, TTH_SCOPE_PARAM);
    tth_tbuffer *tmp = tth_tir_buffer(m, "tmp", TTH_F32, 1, &n, TTH_SCOPE_LOCAL);
    if (tmp_offset >= 0)
        tmp->offset = tmp_offset;
    tth_tvar *i = tth_tir_var(m, "i", TTH_I64), *j = tth_tir_var(m, "j", TTH_I64);
    tth_tstmt *s1 = tth_tir_for(m, i, tth_tir_i64(m, 0), tth_tir_i64(m, n), TTH_LOOP_SERIAL,
                                tth_tir_store(m, tmp, tth_tir_ref(m, i), first(tth_tir_load(m, a, tth_tir_ref(m, i)))));
    tth_texpr *v = second(tth_tir_load(m, tmp, tth_tir_ref(m, j)), tth_tir_load(m, a, tth_tir_ref(m, j)));
    tth_tstmt *s2 = tth_tir_for(m, j, tth_tir_i64(m, 0), tth_tir_i64(m, n), TTH_LOOP_SERIAL,
                                tth_tir_store(m, b, tth_tir_ref(m, j), v));
    tth_tstmt *ss[2] = {s1, s2};
    tth_tbuffer *ps[2] = {a, b};
    cr_assert_not_null(tth_tir_func_add(m, "callee", ps, 2, tth_tir_allocate(m, tmp, tth_tir_seq(m, ss, 2)), "c", NULL, &d));
}

/* entry(in, out) of n floats calling callee through the workspace buffers ws[k] (placed at
 * offsets[k] when offsets is not NULL): callee(in, ws[0]), callee(ws[0], ws[1]) ... callee(ws[last], out) */
static void add_entry(int64_t n, const char *const *ws, const int64_t *offsets, size_t nw)
{
    tth_tbuffer *chain[8];
    chain[0] = tth_tir_buffer(m, "in", TTH_F32, 1, &n, TTH_SCOPE_INPUT);
    tth_tbuffer *out = tth_tir_buffer(m, "out", TTH_F32, 1, &n, TTH_SCOPE_OUTPUT);
    for (size_t k = 0; k < nw; k++) {
        chain[k + 1] = tth_tir_buffer(m, ws[k], TTH_F32, 1, &n, TTH_SCOPE_WORKSPACE);
        if (offsets)
            chain[k + 1]->offset = offsets[k];
    }
    chain[nw + 1] = out;
    tth_tstmt *cs[8];
    for (size_t k = 0; k <= nw; k++)
        cs[k] = tth_tir_call_func(m, "callee", &chain[k], 2);
    tth_tbuffer *eps[2] = {chain[0], out};
    cr_assert_not_null(tth_tir_func_add(m, "entry", eps, 2, tth_tir_seq(m, cs, nw + 1), "c", NULL, &d));
}

static tth_texpr *times2(tth_texpr *a) { return tth_tir_bin(m, TTH_TBIN_MUL, a, tth_tir_float(m, TTH_F32, 2.0)); }
static tth_texpr *plus1(tth_texpr *a) { return tth_tir_bin(m, TTH_TBIN_ADD, a, tth_tir_float(m, TTH_F32, 1.0)); }
static tth_texpr *tmp_plus1(tth_texpr *tmp, tth_texpr *a) { (void)a; return plus1(tmp); }

/* entry(in, out) { workspace w; callee(in, w); callee(w, out) } with callee(a, b): b[i] = a[i]*2 + 1,
 * callee allocating a LOCAL scratch it writes then reads */
Test(tir_eval, call_func_with_workspace_and_local)
{
    add_callee(3, -1, times2, tmp_plus1);
    add_entry(3, (const char *const[]){"w"}, NULL, 1);
    float x[3] = {0, 1, -2}, y[3];
    void *bufs[2] = {x, y};
    cr_assert_eq(tth_tir_eval(m, "entry", bufs, 2, &d), 0, "%s", d.message);
    /* (x*2+1)*2+1 */
    cr_assert_eq(y[0], 3.0f);
    cr_assert_eq(y[1], 7.0f);
    cr_assert_eq(y[2], -5.0f);
}

Test(tir_eval, unknown_function_and_wrong_arity)
{
    one_loop("f", TTH_I8, 4, i8_wrap);
    int8_t out[4];
    void *bufs[2] = {out, out};
    cr_assert_eq(tth_tir_eval(m, "nope", bufs, 1, &d), TTH_ENOENT);
    cr_assert_eq(tth_tir_eval(m, "f", bufs, 2, &d), TTH_EINVAL);
}

/* Planned memory: entry(in, out) { callee(in, w1); callee(w1, w2); callee(w2, out) } where callee
 * has a LOCAL scratch. With a sound plan (w1 and w2 apart, the scratch apart from both) the
 * result is right; with w2 planned on top of w1 while both are live, the interpreter's single
 * workspace makes the damage visible. */
static tth_texpr *tmp2_plus_a(tth_texpr *tmp, tth_texpr *a) { return tth_tir_bin(m, TTH_TBIN_ADD, times2(tmp), a); }

static void planned_module(int64_t off_w1, int64_t off_w2, int64_t off_tmp)
{
    /* tmp = a + 1; b = tmp * 2 + a (reads a after tmp is written) */
    add_callee(4, off_tmp, plus1, tmp2_plus_a);
    add_entry(4, (const char *const[]){"w1", "w2"}, (const int64_t[]){off_w1, off_w2}, 2);
}

static float planned_ref(float x)
{
    for (int k = 0; k < 3; k++)
        x = (x + 1.0f) * 2.0f + x;
    return x;
}

Test(tir_eval, sound_memory_plan_gives_the_unplanned_result)
{
    planned_module(0, 16, 32);
    float x[4] = {0, 1, 2, -3}, y[4];
    void *bufs[2] = {x, y};
    cr_assert_eq(tth_tir_eval(m, "entry", bufs, 2, &d), 0, "%s", d.message);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(y[i], planned_ref(x[i]), "element %d: %g", i, y[i]);
}

Test(tir_eval, unsound_memory_plan_is_visible)
{
    /* the callee's scratch on top of w1, which the second call reads after writing the scratch */
    planned_module(0, 16, 0);
    float x[4] = {0, 1, 2, -3}, y[4];
    void *bufs[2] = {x, y};
    cr_assert_eq(tth_tir_eval(m, "entry", bufs, 2, &d), 0, "%s", d.message);
    int differs = 0;
    for (int i = 0; i < 4; i++)
        differs |= y[i] != planned_ref(x[i]);
    cr_assert(differs, "an overlapping plan must change the result");
}
