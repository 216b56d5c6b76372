/* Fusion and whole-function lowering: the epilogue of an anchor (conv + bias add + relu as one
 * PrimFunc with no intermediate buffer), quantized anchors with a requantize epilogue (ONNX
 * QLinearConv / QLinearMatMul data), DAGs with several anchors (LOCAL intermediates) checked
 * against the same ops lowered one by one, tuple results, refusals, loop annotations, and the
 * time to lower a ResNet-18-sized set of convolutions.
 * Tolerance: float32 |got - want| <= 1e-6 + 1e-5 * |want|; integers exact. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lt_util.h"
#include "lower_internal.h"

#define RTOL 1e-5
#define ATOL 1e-6

static tth_ttype tt(tth_dtype dt, int rank, int64_t a, int64_t b, int64_t c, int64_t d)
{
    tth_ttype t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.rank = rank;
    int64_t s[4] = {a, b, c, d};
    for (int i = 0; i < rank; i++)
        t.shape[i] = s[i];
    return t;
}

static void need(const char *test)
{
    if (!lt_onnx_available(test))
        cr_skip_test("ONNX test data %s is not installed (libonnx-testdata)", test);
}

static int count_allocs(const lt_fn *t)
{
    return lt_count_stmts(t->pf->body, TTH_TSTMT_ALLOCATE);
}

/* The lowered PrimFunc on stderr when LT_DUMP is set */
static void dump(const lt_fn *t)
{
    if (getenv("LT_DUMP")) {
        char *txt = tth_tir_print_func(t->pf);
        fprintf(stderr, "%s\n", txt);
        free(txt);
    }
}

/* The inputs of the QLinear* node test T (a, a_scale, a_zero_point, b, b_scale, b_zero_point,
 * y_scale, y_zero_point), its output, and t begun */
static void qlinear_begin(const char *T, tth_tensor **in, tth_tensor **y, lt_fn *t)
{
    need(T);
    for (int i = 0; i < 8; i++)
        in[i] = lt_onnx_input(T, i);
    *y = lt_onnx_output(T, 0);
    lt_init(t);
}

/* acc requantized to uint8 as QLinear* does: from a_scale * b_scale (zero point 0) to y_scale and
 * y_zero_point */
static tth_rexpr *qlinear_requantize(lt_fn *t, tth_rexpr *acc, tth_tensor *const *in)
{
    double iscale = (double)(*(float *)in[1]->data * *(float *)in[4]->data), zero = 0;
    int64_t one = 1;
    tth_rexpr *rq[5] = {acc, tth_relay_const(t->rm, lt_tensor(TTH_F32, 1, &one, &iscale), "iscale"),
                        tth_relay_const(t->rm, lt_tensor(TTH_I32, 1, &one, &zero), "izp"),
                        tth_relay_const(t->rm, tth_tensor_ref(in[6]), "yscale"),
                        tth_relay_const(t->rm, tth_tensor_ref(in[7]), "yzp")};
    return lt_call(t, TTH_OP_REQUANTIZE, rq, 5, "{\"out_dtype\": \"uint8\"}");
}

/* The lowered t run on ins gives y exactly; frees t, y and the eight inputs in */
static void expect_qlinear(lt_fn *t, tth_tensor **ins, tth_tensor *y, tth_tensor **in)
{
    tth_tensor *got;
    cr_assert_eq(lt_run(t, ins, &got, 1), 0, "%s", t->diag.message);
    char msg[256];
    cr_assert_eq(lt_compare(got, y, 0, 0, msg, sizeof msg), 0, "%s", msg);
    tth_tensor_unref(got);
    tth_tensor_unref(y);
    for (int i = 0; i < 8; i++)
        tth_tensor_unref(in[i]);
    lt_free(t);
}

/* conv (ONNX test_basic_conv_with_padding) + bias -20 + relu in one PrimFunc */
Test(fusion, conv_bias_relu_is_one_primfunc_without_intermediates)
{
    need("test_basic_conv_with_padding");
    tth_tensor *x = lt_onnx_input("test_basic_conv_with_padding", 0);
    tth_tensor *w = lt_onnx_input("test_basic_conv_with_padding", 1);
    tth_tensor *y = lt_onnx_output("test_basic_conv_with_padding", 0);
    lt_fn t;
    lt_init(&t);
    tth_rexpr *px = lt_param(&t, "x", &x->type);
    tth_rexpr *cw = tth_relay_const(t.rm, w, "w");
    tth_ttype bt = tt(TTH_F32, 3, 1, 1, 1, 0);
    double bv = -20.0;
    tth_rexpr *cb = tth_relay_const(t.rm, lt_tensor(TTH_F32, 3, bt.shape, &bv), "b");
    tth_rexpr *a2[2] = {px, cw};
    tth_rexpr *conv = lt_call(&t, TTH_OP_CONV2D, a2, 2, "{\"padding\": [1, 1, 1, 1]}");
    tth_rexpr *a3[2] = {conv, cb};
    tth_rexpr *add = lt_call(&t, TTH_OP_ADD, a3, 2, NULL);
    tth_rexpr *relu = lt_call(&t, TTH_OP_RELU, &add, 1, NULL);
    cr_assert_eq(lt_lower(&t, relu), 0, "%s", t.diag.message);
    cr_assert_eq(t.tm->nfuncs, 1);
    cr_assert_eq(lt_count_allocs_shaped(t.pf->body, &conv->type.tensor), 0,
                 "the conv's result goes through the epilogue: no buffer of its shape");
    cr_assert_str_eq(json_string_value(json_object_get(t.pf->attrs, "op")), "nn.conv2d");
    tth_tensor *got;
    dump(&t);
    cr_assert_eq(lt_run(&t, &x, &got, 1), 0, "%s", t.diag.message);
    /* reference: ONNX's conv output, plus the bias, through relu */
    int64_t n = tth_ttype_numel(&y->type);
    int clipped = 0;
    for (int64_t i = 0; i < n; i++) {
        double want = fmax(0.0, tth_tensor_get_f64(y, i) - 20.0);
        clipped += want == 0.0;
        cr_assert_float_eq(tth_tensor_get_f64(got, i), want, ATOL + RTOL * fabs(want), "element %lld", (long long)i);
    }
    cr_assert(clipped > 0 && clipped < n, "the test must exercise both sides of relu");
    tth_tensor_unref(got);
    tth_tensor_unref(x);
    tth_tensor_unref(y);
    lt_free(&t);
}

/* QLinearConv = qnn.conv2d then requantize (x_scale*w_scale → y_scale), fused */
Test(fusion, qlinearconv_as_qnn_conv2d_with_requantize_epilogue)
{
    tth_tensor *in[8], *y;
    lt_fn t;
    qlinear_begin("test_qlinearconv", in, &y, &t);
    tth_rexpr *px = lt_param(&t, "x", &in[0]->type);
    tth_rexpr *args[4] = {px, tth_relay_const(t.rm, tth_tensor_ref(in[3]), "w"),
                          tth_relay_const(t.rm, tth_tensor_ref(in[2]), "xzp"),
                          tth_relay_const(t.rm, tth_tensor_ref(in[5]), "wzp")};
    tth_rexpr *out = qlinear_requantize(&t, lt_call(&t, TTH_OP_QNN_CONV2D, args, 4, NULL), in);
    cr_assert_eq(lt_lower(&t, out), 0, "%s", t.diag.message);
    cr_assert_eq(t.tm->nfuncs, 1);
    /* int32 accumulation cannot live in the uint8 output: one LOCAL plane */
    cr_assert_eq(count_allocs(&t), 1);
    dump(&t);
    expect_qlinear(&t, &in[0], y, in);
}

/* QLinearMatMul = qnn.matmul then requantize */
Test(fusion, qlinearmatmul_as_qnn_matmul_with_requantize_epilogue)
{
    tth_tensor *in[8], *y;
    lt_fn t;
    qlinear_begin("test_qlinearmatmul_2D", in, &y, &t);
    tth_rexpr *pa = lt_param(&t, "a", &in[0]->type);
    tth_rexpr *pb = lt_param(&t, "b", &in[3]->type);
    tth_rexpr *args[4] = {pa, pb, tth_relay_const(t.rm, tth_tensor_ref(in[2]), "azp"),
                          tth_relay_const(t.rm, tth_tensor_ref(in[5]), "bzp")};
    tth_rexpr *out = qlinear_requantize(&t, lt_call(&t, TTH_OP_QNN_MATMUL, args, 4, NULL), in);
    cr_assert_eq(lt_lower(&t, out), 0, "%s", t.diag.message);
    tth_tensor *ins[2] = {in[0], in[3]};
    expect_qlinear(&t, ins, y, in);
}

/* ---- DAGs: the whole function against the same ops lowered one at a time ---- */

static uint32_t lcg = 12345;
static double rnd(void)
{
    lcg = lcg * 1103515245u + 12345u;
    return ((lcg >> 8) & 0xffff) / 32768.0 - 1.0;
}

static tth_tensor *rand_tensor(const tth_ttype *t)
{
    int64_t n = tth_ttype_numel(t);
    double *v = malloc(sizeof(double) * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = rnd();
    tth_tensor *r = lt_tensor(t->dtype, t->rank, t->shape, v);
    free(v);
    return r;
}

/* run one op alone on tensors: a helper giving the step-by-step reference */
static tth_tensor *run_single(tth_op op, tth_tensor *const *args, size_t nargs, const char *attrs)
{
    lt_fn t;
    lt_init(&t);
    tth_rexpr *ps[8];
    for (size_t i = 0; i < nargs; i++) {
        char name[8];
        snprintf(name, sizeof name, "a%zu", i);
        ps[i] = lt_param(&t, name, &args[i]->type);
    }
    tth_rexpr *b = lt_call(&t, op, ps, nargs, attrs);
    cr_assert_eq(lt_lower(&t, b), 0, "%s", t.diag.message);
    tth_tensor *out;
    cr_assert_eq(lt_run(&t, args, &out, 1), 0, "%s", t.diag.message);
    lt_free(&t);
    return out;
}

Test(fusion, dag_with_two_anchors_uses_local_buffers)
{
    /* softmax(reshape(max_pool(relu(conv(x, w) + b)))) */
    tth_ttype xt = tt(TTH_F32, 4, 1, 3, 8, 8), wt = tt(TTH_F32, 4, 4, 3, 3, 3), bt = tt(TTH_F32, 4, 1, 4, 1, 1);
    tth_tensor *x = rand_tensor(&xt), *w = rand_tensor(&wt), *b = rand_tensor(&bt);
    const char *conv_attrs = "{\"padding\": [1, 1, 1, 1]}";
    const char *pool_attrs = "{\"pool_size\": [2, 2], \"strides\": [2, 2]}";
    lt_fn t;
    lt_init(&t);
    tth_rexpr *px = lt_param(&t, "x", &xt);
    tth_rexpr *pw = lt_param(&t, "w", &wt);
    tth_rexpr *pb = lt_param(&t, "b", &bt);
    tth_rexpr *a[2] = {px, pw};
    tth_rexpr *conv = lt_call(&t, TTH_OP_CONV2D, a, 2, conv_attrs);
    tth_rexpr *a2[2] = {conv, pb};
    tth_rexpr *add = lt_call(&t, TTH_OP_ADD, a2, 2, NULL);
    tth_rexpr *relu = lt_call(&t, TTH_OP_RELU, &add, 1, NULL);
    tth_rexpr *pool = lt_call(&t, TTH_OP_MAX_POOL2D, &relu, 1, pool_attrs);
    tth_rexpr *rs = lt_call(&t, TTH_OP_RESHAPE, &pool, 1, "{\"newshape\": [1, 64]}");
    tth_rexpr *sm = lt_call(&t, TTH_OP_SOFTMAX, &rs, 1, "{\"axis\": 1}");
    cr_assert_eq(lt_lower(&t, sm), 0, "%s", t.diag.message);
    /* conv+add+relu fused into one LOCAL buffer, pool and reshape each one more */
    cr_assert_geq(count_allocs(&t), 3);
    tth_tensor *ins[3] = {x, w, b}, *got;
    cr_assert_eq(lt_run(&t, ins, &got, 1), 0, "%s", t.diag.message);
    /* step by step */
    tth_tensor *s1a[2] = {x, w};
    tth_tensor *s1 = run_single(TTH_OP_CONV2D, s1a, 2, conv_attrs);
    tth_tensor *s2a[2] = {s1, b};
    tth_tensor *s2 = run_single(TTH_OP_ADD, s2a, 2, NULL);
    tth_tensor *s3 = run_single(TTH_OP_RELU, &s2, 1, NULL);
    tth_tensor *s4 = run_single(TTH_OP_MAX_POOL2D, &s3, 1, pool_attrs);
    tth_tensor *s5 = run_single(TTH_OP_RESHAPE, &s4, 1, "{\"newshape\": [1, 64]}");
    tth_tensor *s6 = run_single(TTH_OP_SOFTMAX, &s5, 1, "{\"axis\": 1}");
    char msg[256];
    cr_assert_eq(lt_compare(got, s6, RTOL, ATOL, msg, sizeof msg), 0, "%s", msg);
    tth_tensor *all[] = {got, s1, s2, s3, s4, s5, s6, x, w, b};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tth_tensor_unref(all[i]);
    lt_free(&t);
}

Test(fusion, anchor_broadcast_by_a_later_op_is_not_fused)
{
    /* matmul [2,3]x[3,4] -> [2,4], then add with [5,2,4]: the add's result is bigger than the
     * anchor, so the matmul goes to a LOCAL buffer and the add runs as its own loop nest */
    tth_ttype at = tt(TTH_F32, 2, 2, 3, 0, 0), bt = tt(TTH_F32, 2, 3, 4, 0, 0), ct = tt(TTH_F32, 3, 5, 2, 4, 0);
    tth_tensor *A = rand_tensor(&at), *B = rand_tensor(&bt), *C = rand_tensor(&ct);
    lt_fn t;
    lt_init(&t);
    tth_rexpr *pa = lt_param(&t, "a", &at), *pb = lt_param(&t, "b", &bt), *pc = lt_param(&t, "c", &ct);
    tth_rexpr *a[2] = {pa, pb};
    tth_rexpr *mm = lt_call(&t, TTH_OP_MATMUL, a, 2, NULL);
    tth_rexpr *a2[2] = {mm, pc};
    tth_rexpr *add = lt_call(&t, TTH_OP_ADD, a2, 2, NULL);
    cr_assert_eq(lt_lower(&t, add), 0, "%s", t.diag.message);
    cr_assert_eq(count_allocs(&t), 1);
    tth_tensor *ins[3] = {A, B, C}, *got;
    cr_assert_eq(lt_run(&t, ins, &got, 1), 0, "%s", t.diag.message);
    tth_tensor *m = run_single(TTH_OP_MATMUL, ins, 2, NULL);
    tth_tensor *s2[2] = {m, C};
    tth_tensor *want = run_single(TTH_OP_ADD, s2, 2, NULL);
    char msg[256];
    cr_assert_eq(lt_compare(got, want, RTOL, ATOL, msg, sizeof msg), 0, "%s", msg);
    tth_tensor *all[] = {got, m, want, A, B, C};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tth_tensor_unref(all[i]);
    lt_free(&t);
}

Test(fusion, tuple_results_split_and_param_copy)
{
    /* f(x) = (split(x)[0] * 2, split(x)[1], x) */
    tth_ttype xt = tt(TTH_F32, 2, 2, 6, 0, 0);
    tth_tensor *x = rand_tensor(&xt);
    lt_fn t;
    lt_init(&t);
    tth_rexpr *px = lt_param(&t, "x", &xt);
    tth_rexpr *sp = lt_call(&t, TTH_OP_SPLIT, &px, 1, "{\"axis\": 1, \"sizes\": [2, 4]}");
    tth_diag d;
    tth_rexpr *g0 = tth_relay_tuple_get(t.rm, sp, 0, &d), *g1 = tth_relay_tuple_get(t.rm, sp, 1, &d);
    cr_assert(g0 && g1);
    double two = 2.0;
    tth_rexpr *k = tth_relay_const(t.rm, lt_tensor(TTH_F32, 0, NULL, &two), "two");
    tth_rexpr *a[2] = {g0, k};
    tth_rexpr *mul = lt_call(&t, TTH_OP_MULTIPLY, a, 2, NULL);
    tth_rexpr *fields[3] = {mul, g1, px};
    tth_rexpr *tup = tth_relay_tuple(t.rm, fields, 3, &d);
    cr_assert_not_null(tup, "%s", d.message);
    cr_assert_eq(lt_lower(&t, tup), 0, "%s", t.diag.message);
    cr_assert_eq(t.pf->nparams, 4, "x, then one output per tuple field");
    tth_tensor *got[3];
    cr_assert_eq(lt_run(&t, &x, got, 3), 0, "%s", t.diag.message);
    const float *xv = x->data, *o0 = got[0]->data, *o1 = got[1]->data, *o2 = got[2]->data;
    for (int r = 0; r < 2; r++) {
        for (int c = 0; c < 2; c++)
            cr_assert_eq(o0[r * 2 + c], xv[r * 6 + c] * 2.0f);
        for (int c = 0; c < 4; c++)
            cr_assert_eq(o1[r * 4 + c], xv[r * 6 + 2 + c]);
    }
    cr_assert_eq(memcmp(o2, xv, x->nbytes), 0);
    for (int i = 0; i < 3; i++)
        tth_tensor_unref(got[i]);
    tth_tensor_unref(x);
    lt_free(&t);
}

/* A matmul of dt (named dtname) into t: the lowering refuses it, naming the op and the dtype. */
static void expect_matmul_refused(lt_fn *t, tth_dtype dt, const char *dtname)
{
    tth_ttype xt = tt(dt, 2, 2, 3, 0, 0), wt = tt(dt, 2, 3, 2, 0, 0);
    tth_rexpr *a[2] = {lt_param(t, "a", &xt), lt_param(t, "b", &wt)};
    tth_rexpr *r = lt_call(t, TTH_OP_MATMUL, a, 2, NULL);
    char why[256];
    cr_assert_eq(tth_lower_op_supported(r, why, sizeof why), 0);
    cr_assert(strstr(why, "matmul") && strstr(why, dtname), "%s", why);
    cr_assert_eq(lt_lower(t, r), TTH_EUNSUPPORTED);
    cr_assert(strstr(t->diag.message, dtname), "%s", t->diag.message);
}

/* x * 3 + 1 in dt (named dtname: the casts' dtype), through the TIR interpreter, on the two
 * values in: the results' bits are want */
static void expect_pointwise(tth_dtype dt, const char *dtname, const uint16_t in[2], const uint16_t want[2])
{
    tth_ttype xt = tt(dt, 1, 2, 0, 0, 0), st = tt(TTH_F32, 0, 0, 0, 0, 0);
    lt_fn t;
    lt_init(&t);
    tth_rexpr *x = lt_param(&t, "x", &xt);
    double three = 3, one = 1;
    char cast[64];
    snprintf(cast, sizeof cast, "{\"dtype\": \"%s\"}", dtname);
    tth_rexpr *k3 = lt_call(&t, TTH_OP_CAST, (tth_rexpr *[]){tth_relay_const(t.rm, lt_tensor(TTH_F32, 0, st.shape, &three), "three")},
                            1, cast);
    tth_rexpr *k1 = lt_call(&t, TTH_OP_CAST, (tth_rexpr *[]){tth_relay_const(t.rm, lt_tensor(TTH_F32, 0, st.shape, &one), "one")},
                            1, cast);
    tth_rexpr *m = lt_call(&t, TTH_OP_MULTIPLY, (tth_rexpr *[]){x, k3}, 2, NULL);
    tth_rexpr *y = lt_call(&t, TTH_OP_ADD, (tth_rexpr *[]){m, k1}, 2, NULL);
    cr_assert_eq(lt_lower(&t, y), 0, "%s", t.diag.message);
    tth_tensor *xin = tth_tensor_new(&xt, NULL), *out;
    memcpy(xin->data, in, 2 * sizeof *in);
    cr_assert_eq(lt_run(&t, &xin, &out, 1), 0, "%s", t.diag.message);
    const uint16_t *o = out->data;
    cr_assert_eq(out->type.dtype, dt);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(o[i], want[i], "%s: x[%d] = 0x%04x gave 0x%04x, want 0x%04x", dtname, i, in[i], o[i], want[i]);
    tth_tensor_unref(xin);
    tth_tensor_unref(out);
    lt_free(&t);
}

Test(fusion, float16_arithmetic_stage_is_refused_naming_the_op)
{
    lt_fn t;
    lt_init(&t);
    expect_matmul_refused(&t, TTH_F16, "float16");
    cr_assert(strstr(t.diag.location, "matmul"), "%s", t.diag.location);
    cr_assert_eq(t.tm->nfuncs, 0, "nothing is added on failure");
    lt_free(&t);
}

/* 0x2E66 is 0.0999755859375: times 3 plus 1 is 1.2999267578125, which rounds (once) to the half
 * 0x3D33 (1.2998046875); -2 * 3 + 1 = -5 is 0xC500 */
Test(fusion, float16_pointwise_computes_in_float32_and_rounds_once)
{
    expect_pointwise(TTH_F16, "float16", (const uint16_t[]){0x2E66, 0xC000}, (const uint16_t[]){0x3D33, 0xC500});
}

Test(fusion, bfloat16_arithmetic_stage_is_refused_naming_the_dtype)
{
    lt_fn t;
    lt_init(&t);
    expect_matmul_refused(&t, TTH_BF16, "bfloat16");
    lt_free(&t);
}

/* 0x3d83 is 0.06396484375: times 3 plus 1 is 1.19189453125, which rounds once to 0x3f99
 * (1.1953125); rounding the product first would give 0x3f98. -2 * 3 + 1 = -5 is 0xc0a0. (Worked
 * out apart from tth: exact rational nearest, ties to even.) */
Test(fusion, bfloat16_pointwise_computes_in_float32_and_rounds_once)
{
    expect_pointwise(TTH_BF16, "bfloat16", (const uint16_t[]){0x3d83, 0xc000}, (const uint16_t[]){0x3f99, 0xc0a0});
}

Test(fusion, every_op_has_a_lowering)
{
    /* the one table covers TTH_RELAY_OPS, and nothing past its end */
    for (int op = 1; op < TTH_OP_COUNT_; op++)
        cr_assert_not_null(lw_op_lookup((tth_op)op), "%s has no lowering", tth_op_name((tth_op)op));
    cr_assert_null(lw_op_lookup(TTH_OP_COUNT_));
    cr_assert_null(lw_op_lookup(TTH_OP_INVALID));
}

Test(fusion, loops_are_annotated)
{
    tth_ttype xt = tt(TTH_F32, 4, 1, 16, 32, 32), wt = tt(TTH_F32, 4, 16, 16, 3, 3);
    lt_fn t;
    lt_init(&t);
    tth_rexpr *px = lt_param(&t, "x", &xt), *pw = lt_param(&t, "w", &wt);
    tth_rexpr *a[2] = {px, pw};
    tth_rexpr *conv = lt_call(&t, TTH_OP_CONV2D, a, 2, "{\"padding\": [1, 1, 1, 1]}");
    tth_rexpr *relu = lt_call(&t, TTH_OP_RELU, &conv, 1, NULL);
    cr_assert_eq(lt_lower(&t, relu), 0, "%s", t.diag.message);
    /* the convolution's (row, block) pairs (2.4 M multiply-adds); the padded copy (18 K elements)
     * is below LW_PARALLEL_MIN */
    cr_assert_eq(lt_count_loops(t.pf->body, TTH_LOOP_PARALLEL), 1);
    cr_assert_geq(lt_count_loops(t.pf->body, TTH_LOOP_VECTORIZED), 1);
    lt_free(&t);
}

/* A join of tokens ([1, 1, 768] and [1, 196, 768] along axis 1: ViT's class token) copies whole
 * rows of 768, in vector loops; split by "rows" of the axis after the join, which is the last,
 * each task copied one column, element by element a row apart (docs/threads.md, "Locality") */
Test(fusion, a_join_of_tokens_copies_whole_rows)
{
    tth_ttype ct = tt(TTH_F32, 3, 1, 1, 768, 0), xt = tt(TTH_F32, 3, 1, 196, 768, 0);
    lt_fn t;
    lt_init(&t);
    tth_rexpr *a[2] = {lt_param(&t, "cls", &ct), lt_param(&t, "x", &xt)};
    tth_rexpr *join = lt_call(&t, TTH_OP_CONCATENATE, a, 2, "{\"axis\": 1}");
    cr_assert_eq(lt_lower(&t, join), 0, "%s", t.diag.message);
    cr_assert_geq(lt_count_loops(t.pf->body, TTH_LOOP_VECTORIZED), 2, "a vector loop over each input's rows");
    lt_free(&t);
}

/* A softmax's rows are split among the cores by the work of their exps, not by their count of
 * elements: Swin-T's [4, 12, 49, 49] scores (115,248 elements, under LW_PARALLEL_MIN) took 190
 * us on one core (lower_internal.h, LW_SOFTMAX_WORK); a layer normalization's by its passes */
Test(fusion, softmax_and_layer_norm_are_split_by_their_work)
{
    tth_ttype st = tt(TTH_F32, 4, 4, 12, 49, 49);
    json_t *avx512 = json_loads("{\"kind\":\"llvm\",\"keys\":[\"x86_64\",\"cpu\"],\"features\":{\"has_avx512\":true}}",
                                0, NULL);
    lt_fn t;
    lt_init(&t);
    t.target = avx512;
    tth_rexpr *x = lt_param(&t, "scores", &st);
    tth_rexpr *sm = lt_call(&t, TTH_OP_SOFTMAX, &x, 1, "{\"axis\": -1}");
    cr_assert_eq(lt_lower(&t, sm), 0, "%s", t.diag.message);
    cr_assert_eq(lt_count_loops(t.pf->body, TTH_LOOP_PARALLEL), 1, "the rows are a parallel loop");
    lt_free(&t);
    /* a layer normalization's rows likewise, by its three passes (LW_NORM_WORK): ViT-B/16's
     * [1, 197, 768] (151,296 elements) */
    tth_ttype xt = tt(TTH_F32, 3, 1, 197, 768, 0), gt = tt(TTH_F32, 1, 768, 0, 0, 0);
    lt_init(&t);
    t.target = avx512;
    tth_rexpr *ln_args[3] = {lt_param(&t, "x", &xt), lt_param(&t, "gamma", &gt), lt_param(&t, "beta", &gt)};
    tth_rexpr *ln = lt_call(&t, TTH_OP_LAYER_NORM, ln_args, 3, NULL);
    cr_assert_eq(lt_lower(&t, ln), 0, "%s", t.diag.message);
    cr_assert_eq(lt_count_loops(t.pf->body, TTH_LOOP_PARALLEL), 1, "the layer norm's rows are a parallel loop");
    lt_free(&t);
    json_decref(avx512);
}

/* ResNet-18's convolutions (with bias add + relu epilogues) all lower to verified TIR. How long
 * lowering takes is a benchmark figure (bench/compile_time, the "lower" stage), not asserted here:
 * a timed test fails on a slow or busy machine, not on slow code. */
Test(fusion, resnet18_sized_convolutions_lower_and_verify)
{
    struct { int64_t c, o, h, k, s; } L[] = {
        {3, 64, 224, 7, 2},   {64, 64, 56, 3, 1},  {64, 64, 56, 3, 1},  {64, 64, 56, 3, 1},  {64, 64, 56, 3, 1},
        {64, 128, 56, 3, 2},  {128, 128, 28, 3, 1}, {64, 128, 56, 1, 2}, {128, 128, 28, 3, 1}, {128, 128, 28, 3, 1},
        {128, 256, 28, 3, 2}, {256, 256, 14, 3, 1}, {128, 256, 28, 1, 2}, {256, 256, 14, 3, 1}, {256, 256, 14, 3, 1},
        {256, 512, 14, 3, 2}, {512, 512, 7, 3, 1},  {256, 512, 14, 1, 2}, {512, 512, 7, 3, 1},  {512, 512, 7, 3, 1},
    };
    size_t nl = sizeof L / sizeof L[0];
    tth_relay_module *rm = tth_relay_module_new("r18");
    tth_tir_module *tm = tth_tir_module_new();
    tth_relay_function *fns[32];
    tth_diag d;
    for (size_t i = 0; i < nl; i++) {
        tth_ttype xt = tt(TTH_F32, 4, 1, L[i].c, L[i].h, L[i].h), wt = tt(TTH_F32, 4, L[i].o, L[i].c, L[i].k, L[i].k);
        tth_ttype bt = tt(TTH_F32, 3, L[i].o, 1, 1, 0);
        tth_rexpr *x = tth_relay_var(rm, "x", &xt);
        tth_rexpr *w = tth_relay_const(rm, tth_tensor_new(&wt, NULL), "w");
        tth_rexpr *b = tth_relay_const(rm, tth_tensor_new(&bt, NULL), "b");
        int64_t p = L[i].k / 2;
        json_t *at = json_pack("{s:[I,I],s:[I,I,I,I]}", "strides", (json_int_t)L[i].s, (json_int_t)L[i].s, "padding",
                               (json_int_t)p, (json_int_t)p, (json_int_t)p, (json_int_t)p);
        tth_rexpr *a[2] = {x, w};
        tth_rexpr *conv = tth_relay_call(rm, TTH_OP_CONV2D, a, 2, at, &d);
        cr_assert_not_null(conv, "%s", d.message);
        tth_rexpr *a2[2] = {conv, b};
        tth_rexpr *add = tth_relay_call(rm, TTH_OP_ADD, a2, 2, NULL, &d);
        tth_rexpr *relu = tth_relay_call(rm, TTH_OP_RELU, &add, 1, NULL, &d);
        char name[32];
        snprintf(name, sizeof name, "fused_conv%zu", i);
        fns[i] = tth_relay_function_add(rm, name, &x, 1, relu, json_pack("{s:i}", "Primitive", 1), &d);
        cr_assert_not_null(fns[i], "%s", d.message);
    }
    for (size_t i = 0; i < nl; i++)
        cr_assert_not_null(tth_lower_primitive(tm, fns[i], fns[i]->name, NULL, &d), "%s", d.message);
    cr_assert_eq(tth_tir_verify(tm, &d), 0, "%s", d.message);
    for (size_t i = 0; i < nl; i++)
        cr_assert_not_null(tth_tir_module_find(tm, fns[i]->name), "%s was not lowered", fns[i]->name);
    tth_relay_module_free(rm);
    tth_tir_module_free(tm);
}

/* The same function lowered twice (in two modules) gives the same TIR text: artifacts and caches
 * rely on the compile being deterministic. */
static char *lower_text_once(void)
{
    tth_ttype xt = tt(TTH_F32, 4, 1, 4, 9, 9), wt = tt(TTH_F32, 4, 6, 2, 3, 3), bt = tt(TTH_F32, 3, 6, 1, 1, 0);
    lt_fn t;
    lt_init(&t);
    tth_rexpr *x = lt_param(&t, "x", &xt);
    tth_rexpr *w = tth_relay_const(t.rm, tth_tensor_new(&wt, NULL), "w");
    tth_rexpr *b = tth_relay_const(t.rm, tth_tensor_new(&bt, NULL), "b");
    tth_rexpr *conv = lt_call(&t, TTH_OP_CONV2D, (tth_rexpr *[]){x, w}, 2,
                              "{\"groups\": 2, \"strides\": [2, 2], \"padding\": [1, 1, 1, 1]}");
    tth_rexpr *add = lt_call(&t, TTH_OP_ADD, (tth_rexpr *[]){conv, b}, 2, NULL);
    tth_rexpr *sig = lt_call(&t, TTH_OP_SIGMOID, &add, 1, NULL);
    tth_rexpr *mul = lt_call(&t, TTH_OP_MULTIPLY, (tth_rexpr *[]){add, sig}, 2, NULL);
    tth_rexpr *pool = lt_call(&t, TTH_OP_AVG_POOL2D, &mul, 1, "{\"pool_size\": [2, 2], \"padding\": [0, 0, 1, 1]}");
    cr_assert_eq(lt_lower(&t, pool), 0, "%s", t.diag.message);
    char *txt = tth_tir_print(t.tm);
    cr_assert_not_null(txt);
    lt_free(&t);
    return txt;
}

Test(fusion, lowering_is_deterministic)
{
    char *a = lower_text_once(), *b = lower_text_once();
    cr_assert_str_eq(a, b);
    free(a);
    free(b);
}

/* conv + bias + swish (y * sigmoid(y), y used twice) stays one epilogue: no intermediate buffer */
Test(fusion, conv_bias_swish_epilogue_recomputes_the_shared_add)
{
    tth_ttype xt = tt(TTH_F32, 4, 1, 3, 6, 6), wt = tt(TTH_F32, 4, 5, 3, 3, 3), bt = tt(TTH_F32, 3, 5, 1, 1, 0);
    tth_tensor *x = rand_tensor(&xt), *w = rand_tensor(&wt), *b = rand_tensor(&bt);
    const char *ca = "{\"padding\": [1, 1, 1, 1]}";
    lt_fn t;
    lt_init(&t);
    tth_rexpr *px = lt_param(&t, "x", &xt), *pw = lt_param(&t, "w", &wt), *pb = lt_param(&t, "b", &bt);
    tth_rexpr *conv = lt_call(&t, TTH_OP_CONV2D, (tth_rexpr *[]){px, pw}, 2, ca);
    tth_rexpr *add = lt_call(&t, TTH_OP_ADD, (tth_rexpr *[]){conv, pb}, 2, NULL);
    tth_rexpr *sig = lt_call(&t, TTH_OP_SIGMOID, &add, 1, NULL);
    tth_rexpr *mul = lt_call(&t, TTH_OP_MULTIPLY, (tth_rexpr *[]){add, sig}, 2, NULL);
    cr_assert_eq(lt_lower(&t, mul), 0, "%s", t.diag.message);
    cr_assert_eq(lt_count_allocs_shaped(t.pf->body, &conv->type.tensor), 0);
    tth_tensor *ins[3] = {x, w, b}, *got;
    cr_assert_eq(lt_run(&t, ins, &got, 1), 0, "%s", t.diag.message);
    tth_tensor *s1 = run_single(TTH_OP_CONV2D, ins, 2, ca);
    tth_tensor *s2 = run_single(TTH_OP_ADD, (tth_tensor *[]){s1, b}, 2, NULL);
    tth_tensor *s3 = run_single(TTH_OP_SIGMOID, &s2, 1, NULL);
    tth_tensor *s4 = run_single(TTH_OP_MULTIPLY, (tth_tensor *[]){s2, s3}, 2, NULL);
    char msg[256];
    cr_assert_eq(lt_compare(got, s4, RTOL, ATOL, msg, sizeof msg), 0, "%s", msg);
    tth_tensor *all[] = {got, s1, s2, s3, s4, x, w, b};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tth_tensor_unref(all[i]);
    lt_free(&t);
}

/* The divisions in a statement (the sigmoid's 1 / (1 + e) is one), and the buffers it stores to */
typedef struct nest_info {
    int divs;
    const tth_tbuffer *out;
    int to_out, to_other;
} nest_info;

static int note_div(void *ctx, const tth_texpr *e)
{
    ((nest_info *)ctx)->divs += e->kind == TTH_TEXPR_BINARY && e->u.bin.op == TTH_TBIN_DIV;
    return 0;
}

static int note_store(void *ctx, const tth_tstmt *s)
{
    nest_info *n = ctx;
    if (s->kind == TTH_TSTMT_STORE && s->u.store.buf->scope != TTH_SCOPE_REGISTER) {
        n->to_out += s->u.store.buf == n->out;
        n->to_other += s->u.store.buf != n->out;
    }
    return 0;
}

/* The divisions in the loop nest that stores only to `out`, found through the function's
 * allocations and sequences; -1 when there is none */
static int divs_of_nest_storing(const tth_tstmt *s, const tth_tbuffer *out)
{
    if (!s)
        return -1;
    if (s->kind == TTH_TSTMT_ALLOCATE)
        return divs_of_nest_storing(s->u.alloc.body, out);
    nest_info n = {.out = out};
    tth_tir_visitor v = {.stmt = note_store, .expr = note_div, .ctx = &n};
    tth_tir_walk(s, &v);
    if (n.to_out && !n.to_other)
        return n.divs;
    for (size_t i = 0; s->kind == TTH_TSTMT_SEQ && i < s->u.seq.n; i++) {
        int d = divs_of_nest_storing(s->u.seq.stmts[i], out);
        if (d >= 0)
            return d;
    }
    return -1;
}

/* A squeeze-and-excitation scale: x * sigmoid(conv(pool) + b) where the conv's [1,C,1,1] result is
 * broadcast over x's [1,C,H,W]. The sigmoid gets a buffer of C values (computed once per channel
 * in the conv's epilogue) instead of being recomputed for each of x's elements
 * (LW_BROADCAST_REUSE); the result is the ops' one by one. */
Test(fusion, broadcast_sigmoid_gets_a_buffer)
{
    tth_ttype xt = tt(TTH_F32, 4, 1, 6, 9, 9), st = tt(TTH_F32, 4, 1, 4, 1, 1), wt = tt(TTH_F32, 4, 6, 4, 1, 1),
              bt = tt(TTH_F32, 4, 1, 6, 1, 1);
    tth_tensor *x = rand_tensor(&xt), *s0 = rand_tensor(&st), *w = rand_tensor(&wt), *b = rand_tensor(&bt);
    json_t *avx512 = json_loads("{\"kind\":\"llvm\",\"keys\":[\"x86_64\",\"cpu\"],\"features\":{\"has_avx512\":true}}",
                                0, NULL);
    lt_fn t;
    lt_init(&t);
    t.target = avx512;
    tth_rexpr *px = lt_param(&t, "x", &xt), *ps = lt_param(&t, "s", &st), *pw = lt_param(&t, "w", &wt);
    tth_rexpr *conv = lt_call(&t, TTH_OP_CONV2D, (tth_rexpr *[]){ps, pw}, 2, NULL);
    tth_rexpr *add = lt_call(&t, TTH_OP_ADD, (tth_rexpr *[]){conv, tth_relay_const(t.rm, tth_tensor_ref(b), "b")}, 2,
                             NULL);
    tth_rexpr *sig = lt_call(&t, TTH_OP_SIGMOID, &add, 1, NULL);
    tth_rexpr *mul = lt_call(&t, TTH_OP_MULTIPLY, (tth_rexpr *[]){px, sig}, 2, NULL);
    cr_assert_eq(lt_lower(&t, mul), 0, "%s", t.diag.message);
    dump(&t);
    int divs = divs_of_nest_storing(t.pf->body, t.pf->params[t.pf->nparams - 1]);
    cr_assert_eq(divs, 0, "the sigmoid is recomputed for each of x's elements (%d divisions in the loops that "
                 "store the result)", divs);
    tth_tensor *ins[3] = {x, s0, w}, *got;
    cr_assert_eq(lt_run(&t, ins, &got, 1), 0, "%s", t.diag.message);
    tth_tensor *s1 = run_single(TTH_OP_CONV2D, (tth_tensor *[]){s0, w}, 2, NULL);
    tth_tensor *s1b = run_single(TTH_OP_ADD, (tth_tensor *[]){s1, b}, 2, NULL);
    tth_tensor *s2 = run_single(TTH_OP_SIGMOID, &s1b, 1, NULL);
    tth_tensor *s3 = run_single(TTH_OP_MULTIPLY, (tth_tensor *[]){x, s2}, 2, NULL);
    char msg[256];
    cr_assert_eq(lt_compare(got, s3, RTOL, ATOL, msg, sizeof msg), 0, "%s", msg);
    tth_tensor *all[] = {got, s1, s1b, s2, s3, x, s0, w, b};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tth_tensor_unref(all[i]);
    lt_free(&t);
    json_decref(avx512);
}

/* One row against a constant B of 256 x 768 floats (a recurrent step against its R: 196,608
 * multiply-adds, under the work bound) is split among the cores, so that each keeps its columns of
 * B in its cache from one step to the next (LW_PARALLEL_WEIGHT_BYTES); against an input B of the
 * same size it is not; the results are the matmul's either way. */
Test(fusion, one_row_against_a_large_constant_is_split)
{
    json_t *avx512 = json_loads("{\"kind\":\"llvm\",\"keys\":[\"x86_64\",\"cpu\"],\"features\":{\"has_avx512\":true}}",
                                0, NULL);
    tth_ttype at = tt(TTH_F32, 2, 1, 256, 0, 0), bt = tt(TTH_F32, 2, 256, 768, 0, 0);
    for (int constant = 0; constant < 2; constant++) {
        tth_tensor *A = rand_tensor(&at), *B = rand_tensor(&bt);
        lt_fn t;
        lt_init(&t);
        t.target = avx512;
        tth_rexpr *pa = lt_param(&t, "a", &at);
        tth_rexpr *pb = constant ? tth_relay_const(t.rm, tth_tensor_ref(B), "b") : lt_param(&t, "b", &bt);
        tth_rexpr *mm = lt_call(&t, TTH_OP_MATMUL, (tth_rexpr *[]){pa, pb}, 2, NULL);
        cr_assert_eq(lt_lower(&t, mm), 0, "%s", t.diag.message);
        cr_assert_eq(lt_count_loops(t.pf->body, TTH_LOOP_PARALLEL) > 0, constant,
                     "constant B %d: %d parallel loops", constant, lt_count_loops(t.pf->body, TTH_LOOP_PARALLEL));
        tth_tensor *ins[2] = {A, B}, *got;
        cr_assert_eq(lt_run(&t, ins, &got, 1), 0, "%s", t.diag.message);
        tth_tensor *want = run_single(TTH_OP_MATMUL, ins, 2, NULL);
        char msg[256];
        /* sums of 256 products, in another order than the reference's */
        cr_assert_eq(lt_compare(got, want, 1e-4, 1e-5, msg, sizeof msg), 0, "%s", msg);
        tth_tensor_unref(want);
        tth_tensor_unref(got);
        tth_tensor_unref(A);
        tth_tensor_unref(B);
        lt_free(&t);
    }
    json_decref(avx512);
}

/* The strategy table (lower_strategies.c) picks each kernel where it should, at the AVX-512
 * vector shape, and records it in the PrimFunc's attrs; the c kind (scalar shape) still takes the
 * tiled convolution kernels but not the pixel-vectorized or matmul ones (they need vectors). */
static const char *strategy_of(const char *target, tth_op op, const tth_ttype *xt, const tth_ttype *wt,
                               const char *attrs)
{
    static char name[64];
    json_t *tg = target ? json_loads(target, 0, NULL) : NULL;
    lt_fn t;
    lt_init(&t);
    t.target = tg;
    tth_rexpr *px = lt_param(&t, "x", xt);
    tth_tensor *w = rand_tensor(wt);
    tth_rexpr *a[4] = {px, tth_relay_const(t.rm, w, "w"), NULL, NULL};
    size_t na = 2;
    if (op == TTH_OP_QNN_CONV2D || op == TTH_OP_QNN_MATMUL) { /* zero points 0 */
        double zero = 0;
        a[2] = tth_relay_const(t.rm, lt_tensor(xt->dtype, 0, NULL, &zero), "xz");
        a[3] = tth_relay_const(t.rm, lt_tensor(wt->dtype, 0, NULL, &zero), "wz");
        na = 4;
    }
    tth_rexpr *call = lt_call(&t, op, a, na, attrs);
    cr_assert_eq(lt_lower(&t, call), 0, "%s", t.diag.message);
    const json_t *s = json_array_get(json_object_get(t.pf->attrs, "strategies"), 0);
    snprintf(name, sizeof name, "%s", s ? json_string_value(s) : "generic");
    lt_free(&t);
    json_decref(tg);
    return name;
}

Test(fusion, strategy_table_picks_each_kernel)
{
    const char *avx512 = "{\"kind\":\"llvm\",\"keys\":[\"x86_64\",\"cpu\"],\"features\":{\"has_avx512\":true}}";
    tth_ttype x = tt(TTH_F32, 4, 1, 8, 16, 16), w1 = tt(TTH_F32, 4, 32, 8, 1, 1), w3 = tt(TTH_F32, 4, 32, 8, 3, 3);
    tth_ttype wd = tt(TTH_F32, 4, 8, 1, 3, 3), a = tt(TTH_F32, 2, 20, 64, 0, 0), b = tt(TTH_F32, 2, 64, 48, 0, 0);
    cr_assert_str_eq(strategy_of(avx512, TTH_OP_CONV2D, &x, &w1, NULL), "conv2d/pixel-vectorized");
    cr_assert_str_eq(strategy_of(avx512, TTH_OP_CONV2D, &x, &w3, "{\"padding\": [1, 1, 1, 1]}"), "conv2d/channel-blocked");
    /* 1x1 on 14x14 = 196 pixels (12 vectors and a tail of 4) is pixel-vectorized; on 7x7 = 49 (fewer
     * than 4 vectors) it stays channel-blocked (docs/lowering.md, "Pixel-vectorized kernel") */
    tth_ttype x14 = tt(TTH_F32, 4, 1, 8, 14, 14), x7 = tt(TTH_F32, 4, 1, 8, 7, 7);
    cr_assert_str_eq(strategy_of(avx512, TTH_OP_CONV2D, &x14, &w1, NULL), "conv2d/pixel-vectorized");
    cr_assert_str_eq(strategy_of(avx512, TTH_OP_CONV2D, &x7, &w1, NULL), "conv2d/channel-blocked");
    cr_assert_str_eq(strategy_of(avx512, TTH_OP_CONV2D, &x, &wd, "{\"padding\": [1, 1, 1, 1], \"groups\": 8}"),
                     "conv2d/depthwise-rows");
    tth_ttype xs = tt(TTH_F32, 4, 1, 3, 70, 70), ws = tt(TTH_F32, 4, 16, 3, 3, 3);
    cr_assert_str_eq(strategy_of(avx512, TTH_OP_CONV2D, &xs, &ws, "{\"padding\": [1, 1, 1, 1], \"strides\": [2, 2]}"),
                     "conv2d/row-vectorized");
    cr_assert_str_eq(strategy_of(NULL, TTH_OP_CONV2D, &xs, &ws, "{\"padding\": [1, 1, 1, 1], \"strides\": [2, 2]}"),
                     "conv2d/channel-blocked");
    tth_ttype xw = tt(TTH_F32, 4, 1, 16, 16, 16), ww = tt(TTH_F32, 4, 32, 16, 3, 3);
    cr_assert_str_eq(strategy_of(avx512, TTH_OP_CONV2D, &xw, &ww, "{\"padding\": [1, 1, 1, 1]}"), "conv2d/winograd");
    cr_assert_str_eq(strategy_of(avx512, TTH_OP_CONV2D, &xw, &ww, "{\"padding\": [1, 1, 1, 1], \"strides\": [2, 2]}"),
                     "conv2d/channel-blocked");
    cr_assert_str_eq(strategy_of(NULL, TTH_OP_CONV2D, &xw, &ww, "{\"padding\": [1, 1, 1, 1]}"), "conv2d/channel-blocked");
    cr_assert_str_eq(strategy_of(avx512, TTH_OP_MATMUL, &a, &b, NULL), "matmul/register-tiled");
    cr_assert_str_eq(strategy_of(NULL, TTH_OP_CONV2D, &x, &w1, NULL), "conv2d/channel-blocked");
    cr_assert_str_eq(strategy_of(NULL, TTH_OP_MATMUL, &a, &b, NULL), "generic");
    /* int8 (docs/int8.md): channel-blocked 3x3 of 64 channels, pixels on the lanes for a 1x1 of
     * 256 pixels and for the stem, the depthwise kernel, the matmul; scalar targets keep the
     * generic code */
    tth_ttype qx = tt(TTH_I8, 4, 1, 64, 16, 16), qw3 = tt(TTH_I8, 4, 32, 64, 3, 3), qw1 = tt(TTH_I8, 4, 32, 64, 1, 1);
    tth_ttype qwd = tt(TTH_I8, 4, 64, 1, 3, 3), qxs = tt(TTH_U8, 4, 1, 3, 70, 70), qws = tt(TTH_I8, 4, 16, 3, 3, 3);
    tth_ttype qa = tt(TTH_U8, 2, 20, 64, 0, 0), qb = tt(TTH_I8, 2, 64, 48, 0, 0);
    cr_assert_str_eq(strategy_of(avx512, TTH_OP_QNN_CONV2D, &qx, &qw3, "{\"padding\": [1, 1, 1, 1]}"),
                     "qnn.conv2d/int8-dot-blocked");
    cr_assert_str_eq(strategy_of(avx512, TTH_OP_QNN_CONV2D, &qx, &qw1, NULL), "qnn.conv2d/int8-dot-rows");
    cr_assert_str_eq(strategy_of(avx512, TTH_OP_QNN_CONV2D, &qxs, &qws, "{\"padding\": [1, 1, 1, 1], \"strides\": [2, 2]}"),
                     "qnn.conv2d/int8-dot-rows");
    cr_assert_str_eq(strategy_of(avx512, TTH_OP_QNN_CONV2D, &qx, &qwd, "{\"padding\": [1, 1, 1, 1], \"groups\": 64}"),
                     "qnn.conv2d/int8-depthwise-rows");
    cr_assert_str_eq(strategy_of(avx512, TTH_OP_QNN_MATMUL, &qa, &qb, NULL), "qnn.matmul/int8-dot");
    cr_assert_str_eq(strategy_of(NULL, TTH_OP_QNN_CONV2D, &qx, &qw3, "{\"padding\": [1, 1, 1, 1]}"), "generic");
    /* every row of the table is named "<op>/<kernel>" (the op's name without its "nn." prefix)
     * and has both functions */
    size_t n;
    const lw_strategy *tab = lw_strategy_table(&n);
    cr_assert_geq(n, 4);
    for (size_t i = 0; i < n; i++) {
        cr_assert(tab[i].applies && tab[i].lower, "%s", tab[i].name);
        const char *op = tth_op_name(tab[i].op), *dot = strchr(op, '.');
        const char *base = dot && !strncmp(op, "nn.", 3) ? dot + 1 : op; /* "nn.conv2d" -> "conv2d" */
        cr_assert(!strncmp(tab[i].name, base, strlen(base)) && tab[i].name[strlen(base)] == '/', "%s", tab[i].name);
    }
}

/* ---------------------------------------------------------------- flat indices */

/* The value of an index expression of integer immediates, p and q (C's truncating / and %,
 * floor division and modulo) */
static int64_t ix_eval(const tth_texpr *e, const tth_tvar *p, int64_t pv, const tth_tvar *q, int64_t qv)
{
    if (e->kind == TTH_TEXPR_INT)
        return e->u.i;
    if (e->kind == TTH_TEXPR_VAR) {
        cr_assert(e->u.var == p || e->u.var == q, "unknown variable in the index");
        return e->u.var == p ? pv : qv;
    }
    cr_assert_eq(e->kind, TTH_TEXPR_BINARY);
    int64_t a = ix_eval(e->u.bin.a, p, pv, q, qv), b = ix_eval(e->u.bin.b, p, pv, q, qv);
    switch (e->u.bin.op) {
    case TTH_TBIN_ADD: return a + b;
    case TTH_TBIN_MUL: return a * b;
    case TTH_TBIN_DIV: return a / b;
    case TTH_TBIN_MOD: return a % b;
    case TTH_TBIN_FLOORDIV: return a / b - (a % b != 0 && (a < 0) != (b < 0));
    case TTH_TBIN_FLOORMOD: return a % b + (a % b != 0 && (a < 0) != (b < 0) ? b : 0);
    default: cr_assert_fail("operator %d in the index", (int)e->u.bin.op); return 0;
    }
}

static int ix_divmods(const tth_texpr *e)
{
    if (e->kind != TTH_TEXPR_BINARY)
        return 0;
    tth_tir_binop op = e->u.bin.op;
    int own = op == TTH_TBIN_DIV || op == TTH_TBIN_MOD || op == TTH_TBIN_FLOORDIV || op == TTH_TBIN_FLOORMOD;
    return own + ix_divmods(e->u.bin.a) + ix_divmods(e->u.bin.b);
}

/* A pixel p of a flat run indexed as (p / W, p % W) in a [N, C/b, H, W, b] buffer is the one term
 * p * b when the divisor is W, for truncating and floor division alike and for negative p too;
 * another divisor keeps the division. Each index equals the plain row-major sum. */
Test(flat_index, row_and_column_of_a_flat_pixel_are_one_term)
{
    tth_tir_module *m = tth_tir_module_new();
    lw_ctx c;
    memset(&c, 0, sizeof c);
    c.m = m;
    tth_tvar *p = tth_tir_var(m, "p", TTH_I64), *q = tth_tir_var(m, "q", TTH_I64);
    const int64_t shape[5] = {1, 3, 7, 7, 16};
    static const struct {
        tth_tir_binop div, mod;
        int64_t n;
        int folds;
    } cases[] = {{TTH_TBIN_DIV, TTH_TBIN_MOD, 7, 1}, {TTH_TBIN_FLOORDIV, TTH_TBIN_FLOORMOD, 7, 1},
                 {TTH_TBIN_DIV, TTH_TBIN_MOD, 5, 0}, {TTH_TBIN_DIV, TTH_TBIN_FLOORMOD, 7, 0}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tth_texpr *pe = tth_tir_ref(m, p), *n = tth_tir_i64(m, cases[k].n);
        tth_texpr *idx[5] = {tth_tir_i64(m, 0), tth_tir_ref(m, q), tth_tir_bin(m, cases[k].div, pe, n),
                             tth_tir_bin(m, cases[k].mod, pe, n), tth_tir_i64(m, 3)};
        tth_texpr *flat = lw_flat(&c, shape, 5, idx);
        cr_assert_not_null(flat);
        cr_assert_eq(ix_divmods(flat), cases[k].folds ? 0 : 2, "case %zu: %d divisions left", k, ix_divmods(flat));
        for (int64_t pv = -20; pv <= 60; pv++)
            for (int64_t qv = 0; qv < 3; qv++) {
                int64_t row = ix_eval(idx[2], p, pv, q, qv), col = ix_eval(idx[3], p, pv, q, qv);
                int64_t want = ((qv * 7 + row) * 7 + col) * 16 + 3;
                cr_assert_eq(ix_eval(flat, p, pv, q, qv), want, "case %zu, p %lld, q %lld", k, (long long)pv,
                             (long long)qv);
            }
    }
    tth_tir_module_free(m);
}
