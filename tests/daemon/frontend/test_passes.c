/* Relay passes: batch-norm folding preserves numerics (folded vs unfolded evaluation), dead
 * code elimination, fusion's contract (every main call is to a Primitive function with at
 * most one anchor first), and the whole pipeline on the testdata models. */
#include <criterion/criterion.h>

#include "fe_test.h"
#include "onnx_build.h"
#include "tth_config.h"

static uint32_t lcg = 12345;
static float frand(void)
{
    lcg = lcg * 1103515245u + 12345u;
    return (float)((lcg >> 8) & 0xffff) / 65536.0f * 2.0f - 1.0f;
}

/* Bind x, fold, return the value of output k (new reference). */
static tth_tensor *evaluate(tth_relay_module *m, tth_tensor *x, size_t k)
{
    tth_diag d;
    tth_diag_clear(&d);
    cr_assert_eq(tth_relay_bind_params(m, &x, 1, &d), 0, "%s", d.message);
    cr_assert_eq(tth_relay_fold_constants(m, &d), 0, "%s", d.message);
    tth_rexpr *body = tth_relay_module_main(m)->body;
    if (body->kind == TTH_REXPR_TUPLE)
        body = body->u.tuple.fields[k];
    cr_assert_eq(body->kind, TTH_REXPR_CONST, "the folder evaluates the whole model");
    return tth_tensor_ref(body->u.constant.value);
}

/* A model before and after the layout pass: plain as built, m after the pass at blocks of 8
 * (verified), st the pass's counts, text m printed, nodes main's in topological order. */
typedef struct twin {
    tth_relay_module *plain, *m;
    tth_layout_stats st;
    char *text;
    tth_rexpr **nodes;
    int64_t n;
} twin;

/* The twin of the model make builds twice from seed (the same random weights). */
static twin blocked_twin(tth_relay_module *(*make)(void), uint32_t seed)
{
    twin t;
    lcg = seed;
    t.plain = make();
    lcg = seed;
    t.m = make();
    tth_diag d;
    tth_diag_clear(&d);
    cr_assert_eq(tth_relay_alter_layout(t.m, 8, &t.st, &d), 0, "%s", d.message);
    fe_verify(t.m);
    t.text = tth_relay_print(t.m);
    t.n = tth_relay_topo(t.m, tth_relay_module_main(t.m), &t.nodes);
    return t;
}

/* A pass kept the numbers: plain (before it) and m (after it) evaluated by the constant folder on
 * the same random input of type xt give the same output 0, each element within atol + rtol * |want|
 * (fatal: the first difference ends the test); case names the case; frees both. */
static void expect_twins(tth_relay_module *plain, tth_relay_module *m, tth_ttype xt, double atol, double rtol,
                         int fatal, const char *what)
{
    tth_tensor *x = tth_tensor_new(&xt, NULL), *x2 = tth_tensor_new(&xt, NULL);
    for (int64_t i = 0; i < tth_ttype_numel(&xt); i++)
        ((float *)x->data)[i] = ((float *)x2->data)[i] = frand();
    tth_tensor *want = evaluate(plain, x, 0), *got = evaluate(m, x2, 0);
    cr_assert(tth_ttype_equal(&want->type, &got->type), "%s: the output's shape changed", what);
    for (int64_t i = 0; i < tth_ttype_numel(&want->type); i++) {
        float w = ((float *)want->data)[i], g = ((float *)got->data)[i];
        int ok = fabsf(w - g) <= atol + rtol * fabsf(w);
        if (fatal)
            cr_assert(ok, "%s: y[%lld]: %g after the pass, %g before", what, (long long)i, g, w);
        else
            cr_expect(ok, "%s: y[%lld]: %g after the pass, %g before", what, (long long)i, g, w);
    }
    tth_tensor_unref(want);
    tth_tensor_unref(got);
    tth_tensor_unref(x);
    tth_tensor_unref(x2);
    tth_relay_module_free(plain);
    tth_relay_module_free(m);
}

/* The layout pass kept the numbers on an input of type xt (expect_twins within 1e-5 + 1e-5
 * |want|); frees the twin. */
static void expect_same_numbers(twin *t, tth_ttype xt)
{
    free(t->text);
    expect_twins(t->plain, t->m, xt, 1e-5, 1e-5, 0, "blocked vs NCHW");
}

/* A float32 weight [o, c, k, k] */
typedef struct wspec {
    const char *name;
    int64_t o, c, k;
} wspec;

/* b begun (opset 13) with the graph input x of shape xd, random weights for each row of ws, and
 * the first convolution, c1: x and w1 to a, padded by pad */
static void conv_net(ob *b, const int64_t *xd, const wspec *ws, size_t n, int64_t pad)
{
    ob_init(b, 13);
    ob_input(b, "x", xd, 4);
    for (size_t i = 0; i < n; i++) {
        int64_t d[4] = {ws[i].o, ws[i].c, ws[i].k, ws[i].k}, cnt = d[0] * d[1] * d[2] * d[3];
        float *w = malloc((size_t)cnt * sizeof *w);
        for (int64_t j = 0; j < cnt; j++)
            w[j] = frand();
        ob_init_f32(b, ws[i].name, d, 4, w);
        free(w);
    }
    ob_conv(b, "c1", "x,w1", "a", pad, 1, 1);
}

/* b imported, then tth_relay_simplify'd */
static tth_relay_module *simplified(ob *b)
{
    tth_relay_module *m = fe_import_ob(b);
    fe_pass(m, tth_relay_simplify);
    return m;
}

/* m fused (by pass: tth_relay_fuse or the whole tth_relay_optimize) keeps the fusion contract */
static void expect_fused(tth_relay_module *m, int (*pass)(tth_relay_module *, tth_diag *))
{
    fe_pass(m, pass);
    char why[256] = "";
    cr_assert_eq(fe_check_fusion_contract(m, why, sizeof why), 0, "%s", why);
}

/* b imported and fused by pass (expect_fused) */
static tth_relay_module *fused(ob *b, int (*pass)(tth_relay_module *, tth_diag *))
{
    tth_relay_module *m = fe_import_ob(b);
    expect_fused(m, pass);
    return m;
}

/* x[1,3,6,6] → Conv(W[4,3,3,3], B[4], pads 1) → BatchNormalization → y; when share_conv the
 * conv's output is also a graph output (so it has another user). */
static void bn_model(ob *b, int share_conv, int with_bias)
{
    ob_init(b, 13);
    int64_t xd[4] = {1, 3, 6, 6}, wd[4] = {4, 3, 3, 3}, cd[1] = {4};
    float w[108], bias[4], sc[4], sh[4], mu[4], var[4];
    for (int i = 0; i < 108; i++)
        w[i] = frand();
    for (int i = 0; i < 4; i++) {
        bias[i] = frand();
        sc[i] = 1.0f + frand();
        sh[i] = frand();
        mu[i] = frand();
        var[i] = 0.5f + frand() * 0.4f;
    }
    ob_input(b, "x", xd, 4);
    ob_init_f32(b, "W", wd, 4, w);
    ob_init_f32(b, "B", cd, 1, bias);
    ob_init_f32(b, "scale", cd, 1, sc);
    ob_init_f32(b, "shift", cd, 1, sh);
    ob_init_f32(b, "mean", cd, 1, mu);
    ob_init_f32(b, "var", cd, 1, var);
    Onnx__NodeProto *c = ob_node(b, "Conv", "conv", with_bias ? "x,W,B" : "x,W", "c");
    ob_attr_ints(b, c, "pads", (int64_t[]){1, 1, 1, 1}, 4);
    Onnx__NodeProto *n = ob_node(b, "BatchNormalization", "bn", "c,scale,shift,mean,var", "y");
    ob_attr_f(b, n, "epsilon", 1e-3f);
    ob_output(b, "y");
    if (share_conv)
        ob_output(b, "c");
}

static tth_tensor *rand_input(const tth_ttype *t)
{
    tth_tensor *x = tth_tensor_new(t, NULL);
    for (int64_t i = 0; i < tth_ttype_numel(t); i++)
        ((float *)x->data)[i] = frand();
    return x;
}

static void check_bn_fold(int share_conv, int with_bias)
{
    ob b;
    bn_model(&b, share_conv, with_bias);
    size_t len;
    uint8_t *bytes = ob_done(&b, &len);
    tth_relay_module *ref = fe_import_bytes(bytes, len), *opt = fe_import_bytes(bytes, len);
    free(bytes);
    cr_assert_eq(fe_count_op(opt, TTH_OP_BATCH_NORM), 1);
    fe_pass(opt, tth_relay_fold_batch_norm);
    cr_assert_eq(fe_count_op(opt, TTH_OP_BATCH_NORM), 0, "batch norm is gone");
    fe_verify(opt);
    if (share_conv) {
        cr_assert_eq(fe_count_op(opt, TTH_OP_MULTIPLY), 1, "conv has another user: multiply + add");
        cr_assert_eq(fe_count_op(opt, TTH_OP_ADD), 1);
    } else {
        cr_assert_eq(fe_count_op(opt, TTH_OP_MULTIPLY) + fe_count_op(opt, TTH_OP_ADD), 0, "folded into the conv");
        tth_rexpr *body = tth_relay_module_main(opt)->body;
        cr_assert_eq(body->u.call.op, TTH_OP_CONV2D);
        cr_assert_eq(body->u.call.nargs, 3, "the folded conv has a bias");
    }
    tth_ttype xt = {.dtype = TTH_F32, .rank = 4, .shape = {1, 3, 6, 6}};
    tth_tensor *x = rand_input(&xt);
    tth_tensor *want = evaluate(ref, x, 0), *got = evaluate(opt, x, 0);
    char why[256];
    cr_assert(fe_tensors_close(got, want, 1e-5, 1e-4, 0, why, sizeof why), "folded differs: %s", why);
    tth_tensor_unref(want);
    tth_tensor_unref(got);
    tth_tensor_unref(x);
    tth_relay_module_free(ref);
    tth_relay_module_free(opt);
}

Test(passes, batch_norm_folds_into_conv)
{
    check_bn_fold(0, 1);
}

Test(passes, batch_norm_folds_into_conv_without_bias)
{
    check_bn_fold(0, 0);
}

Test(passes, batch_norm_becomes_multiply_add_when_conv_is_shared)
{
    check_bn_fold(1, 1);
}

Test(passes, batch_norm_with_computed_statistics_becomes_ops)
{
    /* the scale is an input of the graph: not constant, so the rewrite is built from ops */
    ob b;
    ob_init(&b, 13);
    int64_t xd[2] = {2, 3}, cd[1] = {3};
    float sh[3] = {0.5f, -1, 2}, mu[3] = {0.1f, 0.2f, 0.3f}, var[3] = {1, 2, 3};
    ob_input(&b, "x", xd, 2);
    ob_input(&b, "scale", cd, 1);
    ob_init_f32(&b, "shift", cd, 1, sh);
    ob_init_f32(&b, "mean", cd, 1, mu);
    ob_init_f32(&b, "var", cd, 1, var);
    ob_node(&b, "BatchNormalization", "bn", "x,scale,shift,mean,var", "y");
    ob_output(&b, "y");
    tth_relay_module *m = fe_import_ob(&b);
    fe_pass(m, tth_relay_fold_batch_norm);
    cr_assert_eq(fe_count_op(m, TTH_OP_BATCH_NORM), 0);
    cr_assert_eq(fe_count_op(m, TTH_OP_SQRT), 1);
    fe_verify(m);
    tth_relay_module_free(m);
}

Test(passes, dead_code_elimination)
{
    tth_relay_module *m = tth_relay_module_new("dce");
    tth_diag d;
    tth_diag_clear(&d);
    tth_ttype t = {.dtype = TTH_F32, .rank = 2, .shape = {2, 3}};
    tth_rexpr *x = tth_relay_var(m, "x", &t);
    tth_rexpr *r = tth_relay_call(m, TTH_OP_RELU, &x, 1, NULL, &d);
    tth_rexpr *e = tth_relay_call(m, TTH_OP_EXP, &x, 1, NULL, &d);
    tth_rexpr *fields[2] = {r, e};
    tth_rexpr *tup = tth_relay_tuple(m, fields, 2, &d);
    tth_rexpr *g = tth_relay_tuple_get(m, tup, 0, &d);
    /* a reshape to the same shape and a cast to the same dtype are no-ops */
    tth_rexpr *rs = tth_relay_call(m, TTH_OP_RESHAPE, &g, 1, json_pack("{s:[i,i]}", "newshape", 2, 3), &d);
    tth_rexpr *cs = tth_relay_call(m, TTH_OP_CAST, &rs, 1, json_pack("{s:s}", "dtype", "float32"), &d);
    tth_rexpr *out = tth_relay_call(m, TTH_OP_SIGMOID, &cs, 1, NULL, &d);
    cr_assert(out, "%s", d.message);
    tth_relay_function *mainfn = tth_relay_function_add(m, "main", &x, 1, out, NULL, &d);
    /* a function nothing calls */
    tth_rexpr *y = tth_relay_var(m, "y", &t);
    tth_rexpr *ny = tth_relay_call(m, TTH_OP_NEGATIVE, &y, 1, NULL, &d);
    cr_assert(tth_relay_function_add(m, "unused", &y, 1, ny, NULL, &d));
    tth_rexpr **nodes;
    int64_t before = tth_relay_topo(m, mainfn, &nodes);
    cr_assert_eq(tth_relay_eliminate_dead_code(m, &d), 0, "%s", d.message);
    int64_t after = tth_relay_topo(m, mainfn, &nodes);
    cr_assert_eq(after, 3, "x, relu, sigmoid remain (was %lld nodes)", (long long)before);
    cr_assert_eq(mainfn->body->u.call.op, TTH_OP_SIGMOID);
    cr_assert_eq(mainfn->body->u.call.args[0]->u.call.op, TTH_OP_RELU, "the exp and the tuple are gone");
    cr_assert_null(tth_relay_module_find(m, "unused"), "unreachable functions are dropped");
    fe_verify(m);
    tth_relay_module_free(m);
}

/* x[1, 2, 6, 7] → Conv(W[3, 2, 3, 3], strides sh sw, pads, dilations dh dw) → y */
static tth_relay_module *dilated_model(const int64_t *pads, int64_t dh, int64_t dw, int64_t sh)
{
    ob b;
    ob_init(&b, 13);
    int64_t xd[4] = {1, 2, 6, 7}, wd[4] = {3, 2, 3, 3};
    float w[54];
    for (int i = 0; i < 54; i++)
        w[i] = frand();
    ob_input(&b, "x", xd, 4);
    ob_init_f32(&b, "W", wd, 4, w);
    Onnx__NodeProto *cv = ob_node(&b, "Conv", "c", "x,W", "y");
    ob_attr_ints(&b, cv, "pads", pads, 4);
    ob_attr_ints(&b, cv, "dilations", (int64_t[]){dh, dw}, 2);
    ob_attr_ints(&b, cv, "strides", (int64_t[]){sh, 1}, 2);
    ob_output(&b, "y");
    return fe_import_ob(&b);
}

/* the weight of main's only convolution */
static const tth_ttype *conv_weight(tth_relay_module *m)
{
    tth_rexpr **nodes;
    int64_t n = tth_relay_topo(m, tth_relay_module_main(m), &nodes);
    for (int64_t i = 0; i < n; i++)
        if (nodes[i]->kind == TTH_REXPR_CALL && nodes[i]->u.call.op == TTH_OP_CONV2D)
            return &nodes[i]->u.call.args[1]->type.tensor;
    cr_assert_fail("no convolution");
    return NULL;
}

/* Taps that read only padding are cut (conv_taps.c), and the result is the same: rows at
 * dilation 6 over 6 rows (only the middle row of taps reaches the image), columns at dilation
 * 2 (all reach it); then a strided case with uneven padding where the first column of taps
 * reads padding only; and a case where every tap reaches the image (nothing is cut). */
Test(passes, conv_taps_reading_only_padding_are_cut)
{
    static const struct {
        int64_t pads[4], dh, dw, sh, kh, kw;
    } cases[] = {
        {{6, 2, 6, 2}, 6, 2, 1, 1, 3},
        {{1, 5, 0, 1}, 1, 5, 2, 3, 2},
        {{2, 2, 2, 2}, 2, 2, 1, 3, 3},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        lcg = 12345;
        tth_relay_module *a = dilated_model(cases[k].pads, cases[k].dh, cases[k].dw, cases[k].sh);
        lcg = 12345; /* the same weights again */
        tth_relay_module *b = dilated_model(cases[k].pads, cases[k].dh, cases[k].dw, cases[k].sh);
        fe_pass(b, tth_relay_fold_constants);
        fe_pass(b, tth_relay_trim_conv_taps);
        fe_verify(b);
        const tth_ttype *w = conv_weight(b);
        cr_assert(w->shape[2] == cases[k].kh && w->shape[3] == cases[k].kw, "case %zu: kernel %lldx%lld, want %lldx%lld",
                  k, (long long)w->shape[2], (long long)w->shape[3], (long long)cases[k].kh, (long long)cases[k].kw);
        char what[32];
        snprintf(what, sizeof what, "case %zu", k);
        expect_twins(a, b, (tth_ttype){.dtype = TTH_F32, .rank = 4, .shape = {1, 2, 6, 7}}, 1e-5, 0, 1, what);
    }
}

/* x [1, 3, 6, 7] → Pad (rows 1 before, 2 after; columns 2 and 1; value pv) → op: a 3x3 Conv
 * (conv), else an AveragePool 3x3 with pads own[4] and count_include_pad incl; with `shared` the
 * pad is also a second output */
static tth_relay_module *pad_model(int conv, double pv, const int64_t *own, int incl, int shared)
{
    ob b;
    ob_init(&b, 13);
    int64_t xd[4] = {1, 3, 6, 7}, wd[4] = {4, 3, 3, 3}, pd[1] = {8};
    int64_t pads[8] = {0, 0, 1, 2, 0, 0, 2, 1};
    float w[108], v = (float)pv;
    for (int i = 0; i < 108; i++)
        w[i] = frand();
    ob_input(&b, "x", xd, 4);
    ob_init_i64(&b, "P", pd, 1, pads);
    ob_init_f32(&b, "V", NULL, 0, &v);
    ob_node(&b, "Pad", "p", "x,P,V", "xp");
    if (conv) {
        ob_init_f32(&b, "W", wd, 4, w);
        ob_attr_ints(&b, ob_node(&b, "Conv", "c", "xp,W", "y"), "pads", own, 4);
    } else {
        Onnx__NodeProto *n = ob_node(&b, "AveragePool", "a", "xp", "y");
        ob_attr_ints(&b, n, "kernel_shape", (int64_t[]){3, 3}, 2);
        ob_attr_ints(&b, n, "pads", own, 4);
        ob_attr_i(&b, n, "count_include_pad", incl);
    }
    ob_output(&b, "y");
    if (shared)
        ob_output(&b, "xp");
    return fe_import_ob(&b);
}

/* A zero pad of rows and columns before a convolution or an average pool becomes its padding
 * (fold_pad.c), with the same numbers; a pad of another value, one before a pool whose own
 * padding is not counted, and one that has another user stay. */
Test(passes, zero_pads_fold_into_convolutions_and_pools)
{
    static const int64_t none[4] = {0, 0, 0, 0}, one[4] = {1, 1, 1, 1};
    static const struct {
        int conv;
        double pv;
        const int64_t *own;
        int incl, shared, folds;
    } cases[] = {
        {1, 0.0, none, 0, 0, 1}, {1, 0.0, one, 0, 0, 1},  {0, 0.0, none, 0, 0, 1}, {0, 0.0, one, 1, 0, 1},
        {0, 0.0, one, 0, 0, 0},  {1, 0.5, none, 0, 0, 0}, {0, 0.0, none, 0, 1, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        lcg = 99;
        tth_relay_module *a = pad_model(cases[k].conv, cases[k].pv, cases[k].own, cases[k].incl, cases[k].shared);
        lcg = 99;
        tth_relay_module *b = pad_model(cases[k].conv, cases[k].pv, cases[k].own, cases[k].incl, cases[k].shared);
        fe_pass(b, tth_relay_fold_constants);
        fe_pass(b, tth_relay_fold_pad);
        fe_verify(b);
        cr_assert_eq(fe_count_op(b, TTH_OP_PAD), cases[k].folds ? 0 : 1, "case %zu: %d pads left", k, fe_count_op(b, TTH_OP_PAD));
        char what[32];
        snprintf(what, sizeof what, "case %zu", k);
        expect_twins(a, b, (tth_ttype){.dtype = TTH_F32, .rank = 4, .shape = {1, 3, 6, 7}}, 1e-5, 0, 1, what);
    }
}

/* x → conv → add(bias) → relu → maxpool → conv → sigmoid, multiply (swish) */
static tth_relay_module *swish_model(void)
{
    ob b;
    ob_begin(&b, (const int64_t[]){1, 2, 8, 8}, 4);
    float w[36], bias[2] = {0.5f, -0.5f};
    for (int i = 0; i < 36; i++)
        w[i] = frand();
    ob_init_f32(&b, "W", (const int64_t[]){2, 2, 3, 3}, 4, w);
    ob_init_f32(&b, "B", (const int64_t[]){2, 1, 1}, 3, bias);
    ob_conv(&b, "c1", "x,W", "a", 0, 1, 1);
    ob_node(&b, "Add", "add", "a,B", "a2");
    ob_node(&b, "Relu", "relu", "a2", "a3");
    ob_pool(&b, "MaxPool", "pool", "a3", "p", 2, 2);
    ob_conv(&b, "c2", "p,W", "q", 0, 1, 1);
    ob_node(&b, "Sigmoid", "sig", "q", "s");
    ob_node(&b, "Mul", "swish", "q,s", "y");
    ob_output(&b, "y");
    return fe_import_ob(&b);
}

Test(passes, fusion_groups_anchor_and_elementwise)
{
    tth_relay_module *m = swish_model();
    expect_fused(m, tth_relay_optimize);
    fe_verify(m);
    tth_relay_function *mainfn = tth_relay_module_main(m);
    tth_rexpr **nodes;
    int64_t n = tth_relay_topo(m, mainfn, &nodes);
    int calls = 0;
    const char *names[8];
    for (int64_t i = 0; i < n; i++)
        if (nodes[i]->kind == TTH_REXPR_CALL)
            names[calls++ & 7] = nodes[i]->u.call.fn->name;
    char *text = tth_relay_print(m);
    cr_assert_eq(calls, 3, "conv+add+relu, max_pool, conv+sigmoid+multiply, got:\n%s", text);
    free(text);
    cr_assert(strstr(names[0], "nn_conv2d") && strstr(names[0], "add") && strstr(names[0], "nn_relu"), "%s",
              names[0]);
    cr_assert(strstr(names[1], "nn_max_pool2d"), "%s", names[1]);
    cr_assert(strstr(names[2], "sigmoid") && strstr(names[2], "multiply"), "%s", names[2]);
    tth_relay_module_free(m);
}

Test(passes, fusion_keeps_a_shared_anchor_result_out)
{
    /* conv's result is used by relu and is a graph output: relu cannot join the conv */
    ob b;
    ob_begin(&b, (const int64_t[]){1, 1, 4, 4}, 4);
    ob_init_f32(&b, "W", (const int64_t[]){1, 1, 1, 1}, 4, (const float[]){2});
    ob_conv(&b, "c", "x,W", "a", 0, 1, 1);
    ob_node(&b, "Relu", "r", "a", "y");
    ob_output(&b, "a");
    ob_output(&b, "y");
    tth_relay_module *m = fused(&b, tth_relay_fuse);
    tth_rexpr *body = tth_relay_module_main(m)->body;
    cr_assert_eq(body->kind, TTH_REXPR_TUPLE);
    cr_assert_eq(body->u.tuple.fields[1]->u.call.args[0], body->u.tuple.fields[0], "relu's function takes the conv's");
    fe_verify(m);
    tth_relay_module_free(m);
}

/* y = conv(x) + relu(sigmoid(z)); with shared_side the sigmoid is also a graph output */
static tth_relay_module *side_input_model(int shared_side)
{
    ob b;
    ob_begin(&b, (const int64_t[]){1, 1, 4, 4}, 4);
    ob_input(&b, "z", (const int64_t[]){1, 1, 4, 4}, 4);
    ob_init_f32(&b, "W", (const int64_t[]){1, 1, 1, 1}, 4, (const float[]){2});
    ob_conv(&b, "c", "x,W", "a", 0, 1, 1);
    ob_node(&b, "Sigmoid", "s", "z", "s");
    ob_node(&b, "Relu", "r", "s", "t");
    ob_node(&b, "Add", "add", "a,t", "y");
    ob_output(&b, "y");
    if (shared_side)
        ob_output(&b, "s");
    return fused(&b, tth_relay_fuse);
}

/* the calls of main's body in order, their functions' names in names */
static int main_calls(tth_relay_module *m, const char **names, int cap)
{
    tth_rexpr **nodes;
    int64_t n = tth_relay_topo(m, tth_relay_module_main(m), &nodes);
    int calls = 0;
    for (int64_t i = 0; i < n; i++)
        if (nodes[i]->kind == TTH_REXPR_CALL && calls < cap)
            names[calls++] = nodes[i]->u.call.fn->name;
    return calls;
}

Test(passes, fusion_moves_an_input_computed_for_one_use_into_its_user)
{
    tth_relay_module *m = side_input_model(0);
    const char *names[4];
    char *text = tth_relay_print(m);
    cr_assert_eq(main_calls(m, names, 4), 1, "sigmoid and relu join the conv's function:\n%s", text);
    cr_assert(strstr(names[0], "nn_conv2d") && strstr(names[0], "sigmoid") && strstr(names[0], "nn_relu") &&
                  strstr(names[0], "add"), "%s", names[0]);
    free(text);
    fe_verify(m);
    tth_relay_module_free(m);
}

Test(passes, fusion_keeps_an_input_with_other_uses_out)
{
    tth_relay_module *m = side_input_model(1);
    const char *names[4];
    char *text = tth_relay_print(m);
    /* sigmoid is a graph output: it stays out; relu, used once, joins the conv's function */
    cr_assert_eq(main_calls(m, names, 4), 2, "%s", text);
    free(text);
    cr_assert(strstr(names[0], "sigmoid") && !strstr(names[0], "conv"), "%s", names[0]);
    cr_assert(strstr(names[1], "nn_conv2d") && strstr(names[1], "nn_relu"), "%s", names[1]);
    fe_verify(m);
    tth_relay_module_free(m);
}

Test(passes, split_gets_its_own_function)
{
    ob b;
    ob_begin(&b, (const int64_t[]){4, 2}, 2);
    ob_node(&b, "Split", "sp", "x", "a,b");
    ob_node(&b, "Relu", "r", "a", "y");
    ob_output(&b, "y");
    ob_output(&b, "b");
    tth_relay_module *m = fused(&b, tth_relay_optimize);
    tth_rexpr *body = tth_relay_module_main(m)->body;
    tth_rexpr *get = body->u.tuple.fields[1];
    cr_assert_eq(get->kind, TTH_REXPR_TUPLE_GET, "main takes the split's second part");
    cr_assert_eq(get->u.get.tuple->kind, TTH_REXPR_CALL);
    cr_assert(json_integer_value(json_object_get(get->u.get.tuple->u.call.fn->attrs, "Primitive")) == 1);
    cr_assert_eq(get->u.get.tuple->u.call.fn->body->u.call.op, TTH_OP_SPLIT);
    fe_verify(m);
    tth_relay_module_free(m);
}

/* The pipeline on every pytorch model (and the node models that import): the module verifies,
 * the contract holds, and before fusion the optimized module still computes the expected
 * outputs (batch-norm folding on real models). */
static void pipeline_dir(const char *sub, int *models, int *checked)
{
    char root[512];
    snprintf(root, sizeof root, "%s/%s", FE_TESTDATA, sub);
    size_t n;
    char **names = fe_list_dir(root, &n);
    for (size_t i = 0; i < n; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s/model.onnx", root, names[i]);
        tth_diag d;
        int rc;
        tth_relay_module *m = fe_import_path(path, names[i], &d, &rc);
        if (rc)
            continue;
        (*models)++;
        rc = tth_relay_optimize(m, &d);
        cr_expect_eq(rc, 0, "%s: %s at %s", names[i], d.message, d.location);
        if (!rc) {
            char why[256] = "";
            cr_expect_eq(tth_relay_verify(m, &d), 0, "%s: %s", names[i], d.message);
            cr_expect_eq(fe_check_fusion_contract(m, why, sizeof why), 0, "%s: %s", names[i], why);
            (*checked)++;
        }
        tth_relay_module_free(m);
    }
    fe_free_list(names, n);
}

Test(passes, pipeline_on_testdata, .timeout = 600)
{
    int models = 0, checked = 0;
    pipeline_dir("pytorch-converted", &models, &checked);
    pipeline_dir("pytorch-operator", &models, &checked);
    pipeline_dir("node", &models, &checked);
    printf("pipeline: %d models optimized, %d checked\n", models, checked);
    cr_assert_gt(models, 500);
    cr_assert_eq(checked, models);
}

/* Batch-norm models of the test data: fold batch norm, then evaluate against the outputs. */
Test(passes, batch_norm_folding_on_testdata)
{
    const char *dirs[] = {"pytorch-converted/test_BatchNorm2d_eval", "pytorch-converted/test_BatchNorm1d_3d_input_eval",
                          "pytorch-converted/test_BatchNorm2d_momentum_eval", "node/test_batchnorm_example",
                          "node/test_batchnorm_epsilon"};
    for (size_t k = 0; k < sizeof dirs / sizeof dirs[0]; k++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s/model.onnx", FE_TESTDATA, dirs[k]);
        tth_diag d;
        int rc;
        tth_relay_module *m = fe_import_path(path, "t", &d, &rc);
        cr_assert_eq(rc, 0, "%s: %s", dirs[k], d.message);
        tth_relay_function *mainfn = tth_relay_module_main(m);
        size_t np = mainfn->nparams;
        tth_tensor *in[8] = {0};
        for (size_t i = 0; i < np && i < 8; i++) {
            snprintf(path, sizeof path, "%s/%s/test_data_set_0/input_%zu.pb", FE_TESTDATA, dirs[k], i);
            in[i] = fe_read_tensor(path, NULL, 0);
            cr_assert(in[i]);
        }
        cr_assert_eq(tth_relay_fold_constants(m, &d), 0);
        cr_assert_eq(tth_relay_fold_batch_norm(m, &d), 0, "%s", d.message);
        cr_assert_eq(fe_count_op(m, TTH_OP_BATCH_NORM), 0);
        cr_assert_eq(tth_relay_bind_params(m, in, np, &d), 0, "%s", d.message);
        cr_assert_eq(tth_relay_fold_constants(m, &d), 0);
        snprintf(path, sizeof path, "%s/%s/test_data_set_0/output_0.pb", FE_TESTDATA, dirs[k]);
        tth_tensor *want = fe_read_tensor(path, NULL, 0);
        tth_rexpr *body = mainfn->body;
        cr_assert_eq(body->kind, TTH_REXPR_CONST);
        char why[256];
        cr_assert(fe_tensors_close(body->u.constant.value, want, 1e-5, 1e-3, 0, why, sizeof why), "%s: %s", dirs[k],
                  why);
        tth_tensor_unref(want);
        for (size_t i = 0; i < np && i < 8; i++)
            tth_tensor_unref(in[i]);
        tth_relay_module_free(m);
    }
}

/* A .npy file's float32 payload (format 1.0/2.0, little-endian '<f4'): new tensor or NULL. */
static tth_tensor *read_npy_f32(const char *path, const tth_ttype *type)
{
    size_t len;
    uint8_t *b = test_read_file(path, &len);
    if (!b || len < 12 || memcmp(b, "\x93NUMPY", 6)) {
        free(b);
        return NULL;
    }
    size_t hl = b[6] == 1 ? (size_t)(b[8] | b[9] << 8) : (size_t)(b[8] | b[9] << 8 | b[10] << 16 | (size_t)b[11] << 24);
    size_t off = (b[6] == 1 ? 10 : 12) + hl;
    tth_tensor *t = NULL;
    if (strstr((char *)b + 10, "<f4") && off + tth_ttype_nbytes(type) == len)
        t = tth_tensor_new(type, b + off);
    free(b);
    return t;
}

/* The example model the README's demo compiles: the passes keep its numerics (numpy's forward
 * pass is the reference) and fusion gives conv+relu groups. */
Test(passes, example_digits_model)
{
    tth_relay_module *m = fe_digits(), *f = fe_digits();
    char path[1024];
    /* everything but fusion, then evaluate */
    int (*const passes[])(tth_relay_module *, tth_diag *) = {tth_relay_fold_constants, tth_relay_fold_batch_norm,
                                                             tth_relay_fold_constants, tth_relay_eliminate_dead_code};
    for (size_t i = 0; i < sizeof passes / sizeof *passes; i++)
        fe_pass(m, passes[i]);
    tth_ttype it = {.dtype = TTH_F32, .rank = 4, .shape = {1, 1, 8, 8}}, ot = {.dtype = TTH_F32, .rank = 2, .shape = {1, 10}};
    snprintf(path, sizeof path, "%s/examples/digit_input.npy", TTH_SOURCE_ROOT);
    tth_tensor *x = read_npy_f32(path, &it);
    snprintf(path, sizeof path, "%s/examples/digit_expected.npy", TTH_SOURCE_ROOT);
    tth_tensor *want = read_npy_f32(path, &ot);
    cr_assert(x && want, "cannot read the example's .npy files");
    tth_tensor *got = evaluate(m, x, 0);
    char why[256];
    cr_assert(fe_tensors_close(got, want, 1e-5, 1e-3, 0, why, sizeof why), "%s", why);
    /* the whole pipeline */
    expect_fused(f, tth_relay_optimize);
    fe_verify(f);
    char *text = tth_relay_print(f);
    cr_assert(strstr(text, "fused_nn_conv2d") && strstr(text, "nn_relu"), "%s", text);
    free(text);
    tth_tensor_unref(x);
    tth_tensor_unref(want);
    tth_tensor_unref(got);
    tth_relay_module_free(m);
    tth_relay_module_free(f);
}

Test(passes, long_chains_fuse_in_linear_time, .timeout = 60)
{
    /* conv, then 20000 alternating relu / add-constant nodes: one function, quickly */
    ob b;
    ob_init(&b, 13);
    int64_t xd[4] = {1, 1, 4, 4}, wd[4] = {1, 1, 1, 1}, one[1] = {1};
    float w[1] = {2}, k[1] = {0.5f};
    ob_input(&b, "x", xd, 4);
    ob_init_f32(&b, "W", wd, 4, w);
    ob_init_f32(&b, "k", one, 1, k);
    ob_node(&b, "Conv", "c", "x,W", "v0");
    char in[32], out[32];
    const int n = 20000;
    for (int i = 0; i < n; i++) {
        snprintf(in, sizeof in, "v%d", i);
        snprintf(out, sizeof out, "v%d", i + 1);
        char ins[80];
        snprintf(ins, sizeof ins, "%s,k", in);
        ob_node(&b, i % 2 ? "Add" : "Relu", out, i % 2 ? ins : in, out);
    }
    ob_output(&b, out);
    tth_relay_module *m = fused(&b, tth_relay_optimize);
    tth_rexpr *body = tth_relay_module_main(m)->body;
    cr_assert_eq(body->kind, TTH_REXPR_CALL);
    cr_assert_eq(body->u.call.args[0]->kind, TTH_REXPR_VAR, "one function takes x");
    tth_relay_module_free(m);
}

/* x[1,3,12,12] -> Conv 3->16 3x3 -> Relu -> depthwise 3x3 -> Conv 1x1 16->12 -> Conv 1x1 12->16
 * -> Add(relu) -> MaxPool 2x2 -> GlobalAveragePool -> Flatten -> y; weights random */
static tth_relay_module *blocked_model(void)
{
    static const wspec ws[] = {{"w1", 16, 3, 3}, {"wd", 16, 1, 3}, {"w2", 12, 16, 1}, {"w3", 16, 12, 1}};
    ob b;
    conv_net(&b, (const int64_t[]){1, 3, 12, 12}, ws, sizeof ws / sizeof *ws, 1);
    ob_node(&b, "Relu", "r1", "a", "r");
    ob_conv(&b, "dw", "r,wd", "d", 1, 1, 16);
    ob_conv(&b, "c2", "d,w2", "e", 0, 1, 1);
    ob_conv(&b, "c3", "e,w3", "f", 0, 1, 1);
    ob_node(&b, "Add", "add", "f,r", "g");
    ob_pool(&b, "MaxPool", "mp", "g", "p", 2, 2);
    ob_node(&b, "GlobalAveragePool", "gap", "p", "q");
    ob_node(&b, "Flatten", "fl", "q", "y");
    ob_output(&b, "y");
    return simplified(&b);
}

/* the layout pass (docs/layouts.md): blocked from the first convolution to the global pool, in
 * blocks of 8, the 12-channel tensor in blocks of 4 (8 do not divide it); one layout change
 * (before the flatten: a reshape, the pool's blocks holding its one pixel's channels in order);
 * the same numbers as NCHW */
Test(passes, layout_blocks_the_convolutions_and_changes_layout_at_the_edges)
{
    twin t = blocked_twin(blocked_model, 777);
    const char *text = t.text;
    cr_assert(t.st.convs == 4 && t.st.blocked == 4 && t.st.to_blocked == 0 && t.st.to_plain == 1, "%d %d %d %d",
              t.st.convs, t.st.blocked, t.st.to_blocked, t.st.to_plain);
    cr_assert_eq(fe_count_op(t.m, TTH_OP_TRANSPOSE), 0,
                 "the one layout change, before the flatten, is a reshape of the pool's one pixel:\n%s", text);
    int convs = 0, blocked_out = 0, blocked_in = 0, pools = 0, by4 = 0;
    for (int64_t i = 0; i < t.n; i++) {
        const tth_rexpr *e = t.nodes[i];
        if (e->kind != TTH_REXPR_CALL)
            continue;
        const json_t *a = e->u.call.attrs;
        if (e->u.call.op == TTH_OP_CONV2D) {
            convs++;
            blocked_in += tth_layout_block(json_object_get(a, "data_layout")) == 8;
            blocked_out += tth_layout_block(json_object_get(a, "out_layout")) == 8;
            by4 += tth_layout_block(json_object_get(a, "out_layout")) == 4 && e->type.tensor.shape[1] == 3;
        }
        if (e->u.call.op == TTH_OP_MAX_POOL2D || e->u.call.op == TTH_OP_GLOBAL_AVG_POOL2D)
            pools += tth_layout_block(json_object_get(a, "layout")) == 8 && e->type.tensor.rank == 5;
    }
    cr_assert_eq(convs, 4, "%s", text);
    cr_assert_eq(blocked_out, 3, "every convolution but the 12-channel one writes blocks of 8:\n%s", text);
    cr_assert_eq(by4, 1, "the 12-channel convolution writes 3 blocks of 4:\n%s", text);
    cr_assert_eq(blocked_in, 2, "the depthwise and the 16->12 convolutions read blocks of 8:\n%s", text);
    cr_assert_eq(pools, 2, "%s", text);
    expect_same_numbers(&t, (tth_ttype){.dtype = TTH_F32, .rank = 4, .shape = {1, 3, 12, 12}});
}

/* x[1, 8, 6, 6] -> conv 16 -> squeeze-and-excitation (global pool, 1x1 to 4, relu, 1x1 to 16,
 * sigmoid, times the conv's output) -> conv 16 -> times a one-channel map (sigmoid of the
 * channels' mean) -> conv 8 -> y */
static tth_relay_module *se_model(void)
{
    static const wspec ws[] = {
        {"w1", 16, 8, 3}, {"ws", 4, 16, 1}, {"we", 16, 4, 1}, {"w2", 16, 16, 1}, {"w3", 8, 16, 3}};
    ob b;
    conv_net(&b, (const int64_t[]){1, 8, 6, 6}, ws, sizeof ws / sizeof *ws, 1);
    ob_node(&b, "GlobalAveragePool", "gap", "a", "g");
    ob_conv(&b, "sq", "g,ws", "s1", 0, 1, 1);
    ob_node(&b, "Relu", "r", "s1", "s2");
    ob_conv(&b, "ex", "s2,we", "s3", 0, 1, 1);
    ob_node(&b, "Sigmoid", "sg", "s3", "s4");
    ob_node(&b, "Mul", "scale", "a,s4", "m");
    ob_conv(&b, "c2", "m,w2", "c", 0, 1, 1);
    Onnx__NodeProto *rm = ob_node(&b, "ReduceMean", "mean", "c", "cm");
    ob_attr_ints(&b, rm, "axes", (int64_t[]){1}, 1);
    ob_node(&b, "Sigmoid", "sg2", "cm", "sm");
    ob_node(&b, "Mul", "spatial", "c,sm", "m2");
    ob_conv(&b, "c3", "m2,w3", "y", 1, 1, 1);
    ob_output(&b, "y");
    return simplified(&b);
}

/* calls of op in t's main whose result is blocked (rank 5) */
static int blocked_calls(const twin *t, tth_op op)
{
    int n = 0;
    for (int64_t i = 0; i < t->n; i++) {
        const tth_rexpr *e = t->nodes[i];
        n += e->kind == TTH_REXPR_CALL && !e->u.call.fn && e->u.call.op == op && e->type.nfields < 0 &&
             e->type.tensor.rank == 5;
    }
    return n;
}

/* Squeeze-and-excitation stays in blocked channels: the scale [1, 16, 1, 1] multiplies the
 * blocked image as [1, 2, 1, 1, 8]; the one-channel map [1, 1, 6, 6] as [1, 1, 6, 6, 1]. The
 * only layout changes are the ReduceMean's input (a reduction over the channels reads NCHW)
 * and main's result; the numbers are NCHW's. */
Test(passes, layout_keeps_squeeze_excitation_blocked)
{
    twin t = blocked_twin(se_model, 4242);
    cr_assert(t.st.convs == 5 && t.st.to_blocked == 0 && t.st.to_plain == 2, "convs %d, into blocks %d, back %d:\n%s",
              t.st.convs, t.st.to_blocked, t.st.to_plain, t.text);
    cr_assert_eq(blocked_calls(&t, TTH_OP_MULTIPLY), 2, "both scales multiply blocked images:\n%s", t.text);
    expect_same_numbers(&t, (tth_ttype){.dtype = TTH_F32, .rank = 4, .shape = {1, 8, 6, 6}});
}

/* An atrous pyramid's head (DeepLabV3): x[1, 8, 6, 6] -> conv 3x3 16 (a); a -> conv 1x1 8 (p);
 * a -> global pool -> conv 1x1 8 -> Relu -> Resize (linear) back to 6x6 (q); concat(p, q) ->
 * conv 1x1 16 -> 8 -> y; random weights */
static tth_relay_module *aspp_model(void)
{
    static const wspec ws[] = {{"w1", 16, 8, 3}, {"wp", 8, 16, 1}, {"wg", 8, 16, 1}, {"w2", 8, 16, 1}};
    ob b;
    conv_net(&b, (const int64_t[]){1, 8, 6, 6}, ws, sizeof ws / sizeof *ws, 1);
    ob_conv(&b, "cp", "a,wp", "p", 0, 1, 1);
    ob_node(&b, "GlobalAveragePool", "gap", "a", "g");
    ob_conv(&b, "cg", "g,wg", "g1", 0, 1, 1);
    ob_node(&b, "Relu", "rg", "g1", "g2");
    ob_init_i64(&b, "sizes", (const int64_t[]){4}, 1, (const int64_t[]){1, 8, 6, 6});
    Onnx__NodeProto *rz = ob_node(&b, "Resize", "up", "g2,,,sizes", "q");
    ob_attr_s(&b, rz, "mode", "linear");
    Onnx__NodeProto *cat = ob_node(&b, "Concat", "cat", "p,q", "c");
    ob_attr_i(&b, cat, "axis", 1);
    ob_conv(&b, "c2", "c,w2", "y", 0, 1, 1);
    ob_output(&b, "y");
    return simplified(&b);
}

/* The resize of a blocked value is blocked (docs/layouts.md), so the join of the pyramid's
 * branches and the convolution after it stay blocked: the only layout change is main's result,
 * and the numbers are NCHW's. */
Test(passes, layout_keeps_a_resized_branch_blocked)
{
    twin t = blocked_twin(aspp_model, 99);
    cr_assert_eq(blocked_calls(&t, TTH_OP_RESIZE2D), 1, "the resize reads and writes blocks:\n%s", t.text);
    cr_assert_eq(blocked_calls(&t, TTH_OP_CONCATENATE), 1, "the join is blocked:\n%s", t.text);
    cr_assert(t.st.to_blocked == 0 && t.st.to_plain == 1, "into blocks %d, back %d:\n%s", t.st.to_blocked,
              t.st.to_plain, t.text);
    expect_same_numbers(&t, (tth_ttype){.dtype = TTH_F32, .rank = 4, .shape = {1, 8, 6, 6}});
}

/* A ConvNeXt block: x[1, 8, 6, 6] -> conv 1x1 16 (a) -> depthwise 3x3 -> Transpose to NHWC ->
 * MatMul 16x32 -> Relu -> MatMul 32x16 -> Transpose to NCHW -> times a constant per channel
 * [16, 1, 1] -> + a -> conv 1x1 16 -> 8 -> y; random weights */
static tth_relay_module *nhwc_block_model(void)
{
    static const wspec ws[] = {{"w1", 16, 8, 1}, {"wd", 16, 1, 3}, {"w2", 8, 16, 1}};
    ob b;
    conv_net(&b, (const int64_t[]){1, 8, 6, 6}, ws, sizeof ws / sizeof *ws, 0);
    ob_conv(&b, "dw", "a,wd", "d", 1, 1, 16);
    Onnx__NodeProto *t1 = ob_node(&b, "Transpose", "to_nhwc", "d", "t");
    ob_attr_ints(&b, t1, "perm", (int64_t[]){0, 2, 3, 1}, 4);
    float m1[16 * 32], m2[32 * 16], ls[16];
    for (int i = 0; i < 16 * 32; i++)
        m1[i] = frand(), m2[i] = frand();
    for (int i = 0; i < 16; i++)
        ls[i] = frand();
    ob_init_f32(&b, "m1", (const int64_t[]){16, 32}, 2, m1);
    ob_init_f32(&b, "m2", (const int64_t[]){32, 16}, 2, m2);
    ob_init_f32(&b, "ls", (const int64_t[]){16, 1, 1}, 3, ls);
    ob_node(&b, "MatMul", "mm1", "t,m1", "h1");
    ob_node(&b, "Relu", "r", "h1", "h2");
    ob_node(&b, "MatMul", "mm2", "h2,m2", "h3");
    Onnx__NodeProto *t2 = ob_node(&b, "Transpose", "to_nchw", "h3", "u");
    ob_attr_ints(&b, t2, "perm", (int64_t[]){0, 3, 1, 2}, 4);
    ob_node(&b, "Mul", "scale", "u,ls", "v");
    ob_node(&b, "Add", "res", "v,a", "z");
    ob_conv(&b, "c2", "z,w2", "y", 0, 1, 1);
    ob_output(&b, "y");
    return simplified(&b);
}

/* The permutes around an NHWC section (docs/layouts.md, "Permutes to and from NHWC"): the one to
 * NHWC reads the depthwise convolution's blocks, the one back writes blocks, so the scale, the
 * residual add and the next convolution stay blocked; the only layout change is main's result,
 * and the numbers are NCHW's. */
Test(passes, layout_permutes_to_nhwc_read_and_write_blocks)
{
    twin t = blocked_twin(nhwc_block_model, 99);
    cr_assert(t.st.convs == 3 && t.st.blocked == 3 && t.st.to_blocked == 0 && t.st.to_plain == 1,
              "convs %d blocked %d, into blocks %d, back %d:\n%s", t.st.convs, t.st.blocked, t.st.to_blocked,
              t.st.to_plain, t.text);
    cr_assert_eq(fe_count_op(t.m, TTH_OP_TRANSPOSE), 3, "the two permutes and main's result:\n%s", t.text);
    cr_assert_eq(blocked_calls(&t, TTH_OP_TRANSPOSE), 3, "every transpose moves blocks:\n%s", t.text);
    cr_assert(blocked_calls(&t, TTH_OP_MULTIPLY) == 1 && blocked_calls(&t, TTH_OP_ADD) == 1,
              "the scale and the residual add are blocked:\n%s", t.text);
    expect_same_numbers(&t, (tth_ttype){.dtype = TTH_F32, .rank = 4, .shape = {1, 8, 6, 6}});
}

/* x[1, 8, 6, 6] -> conv 3x3 16 (a) -> ReduceMean over axes (-1, -2), kept -> conv 1x1 4 -> Relu
 * -> conv 1x1 16 -> Sigmoid -> times a -> conv 1x1 16 (c); y = ReduceMax(c) over axes (2, 3) +
 * ReduceMean(c) over axes (3, 2), neither kept: [1, 16]; random weights */
static tth_relay_module *pixel_reduce_model(void)
{
    static const wspec ws[] = {{"w1", 16, 8, 3}, {"ws", 4, 16, 1}, {"we", 16, 4, 1}, {"w2", 16, 16, 1}};
    ob b;
    conv_net(&b, (const int64_t[]){1, 8, 6, 6}, ws, sizeof ws / sizeof *ws, 1);
    Onnx__NodeProto *m1 = ob_node(&b, "ReduceMean", "squeeze", "a", "g");
    ob_attr_ints(&b, m1, "axes", (int64_t[]){-1, -2}, 2);
    ob_conv(&b, "sq", "g,ws", "s1", 0, 1, 1);
    ob_node(&b, "Relu", "r", "s1", "s2");
    ob_conv(&b, "ex", "s2,we", "s3", 0, 1, 1);
    ob_node(&b, "Sigmoid", "sg", "s3", "s4");
    ob_node(&b, "Mul", "scale", "a,s4", "m");
    ob_conv(&b, "c2", "m,w2", "c", 0, 1, 1);
    Onnx__NodeProto *mx = ob_node(&b, "ReduceMax", "max", "c", "cx");
    ob_attr_ints(&b, mx, "axes", (int64_t[]){2, 3}, 2);
    ob_attr_i(&b, mx, "keepdims", 0);
    Onnx__NodeProto *mn = ob_node(&b, "ReduceMean", "mean", "c", "cm");
    ob_attr_ints(&b, mn, "axes", (int64_t[]){3, 2}, 2);
    ob_attr_i(&b, mn, "keepdims", 0);
    ob_node(&b, "Add", "sum", "cx,cm", "y");
    ob_output(&b, "y");
    return simplified(&b);
}

/* A mean or max over a blocked image's pixels is its global pool (docs/layouts.md): the kept
 * mean is the blocked input of the squeeze-and-excitation, the two others are read as [1, 16]
 * from their blocks by a reshape. No reduction and no transpose is left: nothing changes layout,
 * and the numbers are NCHW's. */
Test(passes, layout_makes_pixel_reductions_global_pools)
{
    twin t = blocked_twin(pixel_reduce_model, 515);
    cr_assert_eq(blocked_calls(&t, TTH_OP_GLOBAL_AVG_POOL2D), 2, "both means are blocked global pools:\n%s", t.text);
    cr_assert_eq(blocked_calls(&t, TTH_OP_GLOBAL_MAX_POOL2D), 1, "the max is a blocked global pool:\n%s", t.text);
    cr_assert_eq(fe_count_op(t.m, TTH_OP_MEAN) + fe_count_op(t.m, TTH_OP_MAX), 0, "no reduction is left:\n%s", t.text);
    cr_assert_eq(fe_count_op(t.m, TTH_OP_TRANSPOSE), 0, "no layout change:\n%s", t.text);
    cr_assert(t.st.convs == 4 && t.st.to_blocked == 0 && t.st.to_plain == 0, "convs %d, into blocks %d, back %d:\n%s",
              t.st.convs, t.st.to_blocked, t.st.to_plain, t.text);
    cr_assert_eq(blocked_calls(&t, TTH_OP_MULTIPLY), 1, "the scale multiplies the blocked image:\n%s", t.text);
    expect_same_numbers(&t, (tth_ttype){.dtype = TTH_F32, .rank = 4, .shape = {1, 8, 6, 6}});
}

/* x[1, 8, 6, 6] -> conv 3x3 16 -> ReduceMean over axes (1, 3), not kept -> y [1, 6] */
static tth_relay_module *channel_column_mean_model(void)
{
    static const wspec ws[] = {{"w1", 16, 8, 3}};
    ob b;
    conv_net(&b, (const int64_t[]){1, 8, 6, 6}, ws, 1, 1);
    Onnx__NodeProto *mn = ob_node(&b, "ReduceMean", "mean", "a", "y");
    ob_attr_ints(&b, mn, "axes", (int64_t[]){1, 3}, 2);
    ob_attr_i(&b, mn, "keepdims", 0);
    ob_output(&b, "y");
    return simplified(&b);
}

/* A mean over two axes that are not the pixels' (channels and columns) stays a mean of the NCHW
 * form, with the same numbers */
Test(passes, layout_leaves_other_two_axis_reductions_alone)
{
    twin t = blocked_twin(channel_column_mean_model, 516);
    cr_assert_eq(fe_count_op(t.m, TTH_OP_MEAN), 1, "the mean stays:\n%s", t.text);
    cr_assert_eq(fe_count_op(t.m, TTH_OP_GLOBAL_AVG_POOL2D), 0, "no global pool:\n%s", t.text);
    cr_assert_eq(t.st.to_plain, 1, "the mean reads the NCHW form:\n%s", t.text);
    expect_same_numbers(&t, (tth_ttype){.dtype = TTH_F32, .rank = 4, .shape = {1, 8, 6, 6}});
}

/* x[1, 16, 7, 7] -> conv 1x1 16 -> relu -> grouped 3x3 of 8 groups of 2 channels -> relu ->
 * grouped 3x3 of 4 groups of 4 channels, stride 2 -> grouped 1x1 of 4 groups of 4 inputs and 2
 * outputs (16 -> 8) -> y; random weights */
static tth_relay_module *small_groups_model(void)
{
    ob b;
    static const wspec ws[] = {{"w1", 16, 16, 1}, {"wg8", 16, 2, 3}, {"wg4", 16, 4, 3}, {"w2", 8, 4, 1}};
    conv_net(&b, (const int64_t[]){1, 16, 7, 7}, ws, sizeof ws / sizeof *ws, 0);
    ob_node(&b, "Relu", "r1", "a", "r");
    ob_conv(&b, "g8", "r,wg8", "g", 1, 1, 8);
    ob_node(&b, "Relu", "r2", "g", "h");
    ob_conv(&b, "g4", "h,wg4", "k", 1, 2, 4);
    ob_conv(&b, "c2", "k,w2", "y", 0, 1, 4);
    ob_output(&b, "y");
    return simplified(&b);
}

/* groups smaller than a block (docs/layouts.md, "Small groups"): at blocks of 8, the 8 groups of 2
 * and the 4 groups of 4 (as many inputs as outputs) stay as they are, blocked in and out, for the
 * grouped kernel; the 4 groups of 4 inputs and 2 outputs merge four by four into one group of 16
 * inputs and 8 outputs (a block-diagonal weight). The whole chain stays blocked (one layout
 * change, at the end) and gives the same numbers. */
Test(passes, layout_keeps_small_groups_blocked)
{
    twin t = blocked_twin(small_groups_model, 99);
    const char *text = t.text;
    cr_assert(t.st.convs == 4 && t.st.blocked == 4 && t.st.to_blocked == 0 && t.st.to_plain == 1,
              "convs %d, blocked %d, into blocks %d, back %d:\n%s", t.st.convs, t.st.blocked, t.st.to_blocked,
              t.st.to_plain, text);
    int grouped = 0, merged = 0;
    for (int64_t i = 0; i < t.n; i++) {
        const tth_rexpr *e = t.nodes[i];
        if (e->kind != TTH_REXPR_CALL || e->u.call.op != TTH_OP_CONV2D)
            continue;
        int64_t g = json_integer_value(json_object_get(e->u.call.attrs, "groups")), cg = e->u.call.args[1]->type.tensor.shape[1];
        int last = e->type.tensor.shape[1] * e->type.tensor.shape[4] == 8; /* the 16 -> 8 layer */
        cr_assert_eq(tth_layout_block(json_object_get(e->u.call.attrs, "out_layout")), 8, "%s", text);
        if (g > 1 || last)
            cr_assert_eq(tth_layout_block(json_object_get(e->u.call.attrs, "data_layout")), 8, "%s", text);
        if (g > 1) {
            grouped++;
            cr_assert((g == 8 && cg == 2) || (g == 4 && cg == 4), "small groups kept: %lld of %lld:\n%s", (long long)g,
                      (long long)cg, text);
        } else if (last) {
            merged += cg == 16; /* one merged group reading all 16 channels */
        }
    }
    cr_assert(grouped == 2 && merged == 1, "grouped %d, merged %d:\n%s", grouped, merged, text);
    expect_same_numbers(&t, (tth_ttype){.dtype = TTH_F32, .rank = 4, .shape = {1, 16, 7, 7}});
}

/* y = softmax(q k^T / 4 + mask) v with q [2, 5, 8], k [2, 7, 8], v [2, 7, 6], mask [5, 7]: the keys
 * transposed by a Transpose of the last two axes (variant 0), or q scaled before the product and
 * the mask added first (variant 1), or the softmax's result also an output (variant 2: no fusion) */
static tth_relay_module *attention_model(int variant)
{
    ob b;
    ob_init(&b, 13);
    int64_t qd[3] = {2, 5, 8}, kd[3] = {2, 7, 8}, vd[3] = {2, 7, 6}, md[2] = {5, 7}, sd[1] = {1};
    float mask[35], four[1] = {4.0f}, quarter[1] = {0.25f};
    for (int i = 0; i < 35; i++)
        mask[i] = i % 3 == 0 ? -1e4f : 0.0f;
    ob_input(&b, "q", qd, 3);
    ob_input(&b, "k", kd, 3);
    ob_input(&b, "v", vd, 3);
    ob_init_f32(&b, "mask", md, 2, mask);
    ob_init_f32(&b, "four", sd, 0, four);
    ob_init_f32(&b, "quarter", sd, 0, quarter);
    ob_attr_ints(&b, ob_node(&b, "Transpose", "kt", "k", "kT"), "perm", (int64_t[]){0, 2, 1}, 3);
    if (variant == 1) {
        ob_node(&b, "Mul", "qs", "q,quarter", "q2");
        ob_node(&b, "MatMul", "qk", "q2,kT", "s");
        ob_node(&b, "Add", "masked", "mask,s", "s2");
    } else {
        ob_node(&b, "MatMul", "qk", "q,kT", "s0");
        ob_node(&b, "Div", "scaled", "s0,four", "s");
        ob_node(&b, "Add", "masked", "s,mask", "s2");
    }
    ob_attr_i(&b, ob_node(&b, "Softmax", "sm", "s2", "p"), "axis", -1);
    ob_node(&b, "MatMul", "pv", "p,v", "y");
    ob_output(&b, "y");
    if (variant == 2)
        ob_output(&b, "p");
    return fe_import_ob(&b);
}

/* fuse_attention (attention.c): both exported forms become one nn.attention of scale 0.25 reading
 * the keys before their transpose, with the same outputs as the operators it replaces; a softmax
 * that is also used elsewhere stays */
Test(passes, attention_becomes_one_operator)
{
    for (int variant = 0; variant < 3; variant++) {
        tth_relay_module *plain = attention_model(variant), *m = attention_model(variant);
        fe_pass(plain, tth_relay_fold_constants);
        fe_pass(m, tth_relay_simplify);
        fe_verify(m);
        int att = fe_count_op(m, TTH_OP_ATTENTION);
        if (variant == 2) {
            cr_assert_eq(att, 0, "a softmax read twice was fused");
            tth_relay_module_free(plain);
            tth_relay_module_free(m);
            continue;
        }
        char *text = tth_relay_print(m);
        cr_assert_eq(att, 1, "variant %d:\n%s", variant, text);
        cr_assert_eq(fe_count_op(m, TTH_OP_SOFTMAX) + fe_count_op(m, TTH_OP_MATMUL) + fe_count_op(m, TTH_OP_TRANSPOSE), 0,
                     "variant %d left operators of the pattern:\n%s", variant, text);
        cr_assert_not_null(strstr(text, "\"keys_transposed\": false"), "%s", text);
        cr_assert_not_null(strstr(text, "\"scale\": 0.25"), "%s", text);
        free(text);
        /* the numbers: both modules evaluated by the constant folder on the same inputs */
        tth_ttype qt = {.dtype = TTH_F32, .rank = 3, .shape = {2, 5, 8}}, kt = {.dtype = TTH_F32, .rank = 3, .shape = {2, 7, 8}},
                  vt = {.dtype = TTH_F32, .rank = 3, .shape = {2, 7, 6}};
        tth_tensor *in[3] = {tth_tensor_new(&qt, NULL), tth_tensor_new(&kt, NULL), tth_tensor_new(&vt, NULL)};
        for (int t = 0; t < 3; t++)
            for (int64_t i = 0; i < tth_ttype_numel(&in[t]->type); i++)
                ((float *)in[t]->data)[i] = 3 * frand();
        tth_diag d;
        tth_diag_clear(&d);
        cr_assert_eq(tth_relay_bind_params(plain, in, 3, &d), 0, "%s", d.message);
        cr_assert_eq(tth_relay_bind_params(m, in, 3, &d), 0, "%s", d.message);
        fe_pass(plain, tth_relay_fold_constants);
        fe_pass(m, tth_relay_fold_constants);
        const tth_rexpr *a = tth_relay_module_main(plain)->body, *b = tth_relay_module_main(m)->body;
        cr_assert(a->kind == TTH_REXPR_CONST && b->kind == TTH_REXPR_CONST, "the folder evaluates both");
        for (int64_t i = 0; i < 60; i++) {
            float w = ((float *)a->u.constant.value->data)[i], g = ((float *)b->u.constant.value->data)[i];
            cr_expect(fabsf(w - g) <= 1e-5f + 1e-5f * fabsf(w), "variant %d, y[%lld]: %g fused, %g not", variant,
                      (long long)i, g, w);
        }
        for (int t = 0; t < 3; t++)
            tth_tensor_unref(in[t]);
        tth_relay_module_free(plain);
        tth_relay_module_free(m);
    }
}

/* a block of 0 or 1 (scalar code) leaves the module as it was */
Test(passes, layout_leaves_scalar_targets_alone)
{
    lcg = 777;
    tth_relay_module *m = blocked_model();
    char *before = tth_relay_print(m);
    tth_diag d;
    tth_diag_clear(&d);
    cr_assert_eq(tth_relay_alter_layout(m, 1, NULL, &d), 0, "%s", d.message);
    char *after = tth_relay_print(m);
    cr_assert_str_eq(after, before);
    free(before);
    free(after);
    tth_relay_module_free(m);
}
