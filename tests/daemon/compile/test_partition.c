/* Composite targets: partitioning and the target hooks in docs/plugin-guide.md's order, in-process.
 * The test kinds (tests/fixtures/tp_part.c) take float32 add and multiply without broadcasting;
 * each exports a different set of hooks. Every compile runs through the runtime and is compared
 * with the ONNX expected outputs (node test data) or values computed here. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "model_fixture.h"
#include "onnx_case.h"
#include "../frontend/onnx_build.h"
#include "compile.h"
#include "tth/target.h"
#include "tthrt.h"

#define NODE_DATA "/usr/share/libonnx-testdata/data/node"

static const char *const test_plugins[] = {
    "tp_part_ps", "tp_part_r2t", "tp_part_t2r", "tp_part_r2r", "tp_part_all", "tp_part_none",
    "tp_part_fail_r2t", "tp_part_fail_t2r", "tp_part_fail_r2r", "tp_part_fail_cu", "tp_part_r2r_mul", "tp_part_npu",
};

/* The fixture: test_reg with the product's plugins and the test kinds, test_tc (target `c`). */
static void registry(void)
{
    test_fixture_c();
    const char *root = getenv("TTH_BUILD_ROOT");
    for (size_t i = 0; i < sizeof test_plugins / sizeof test_plugins[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/tests/fixtures/%s.so", root, test_plugins[i]);
        tth_diag d;
        tth_diag_clear(&d);
        cr_assert_geq(tth_registry_load_file(test_reg, path, &d), 0, "%s: %s", path, d.message);
    }
}

TestSuite(partition, .init = registry, .fini = test_fixture_fini);

/* Inputs a, b, c [2, 3]; s = a + b; d = s * c. Then, with two_results, outputs d and relu(s): the
 * region {add, multiply} has two results; else y = d * relu(d): add and multiply go to the test
 * kind, relu to the fallback; the second multiply cannot join the first region (relu, outside,
 * sits between: the region would not be convex), so it makes a second region. */
static uint8_t *abc_model(int two_results, size_t *len)
{
    ob b;
    ob_init(&b, 13);
    const int64_t dims[2] = {2, 3};
    for (const char *in = "abc"; *in; in++)
        ob_input(&b, (const char[]){*in, 0}, dims, 2);
    ob_node(&b, "Add", "add0", "a,b", "s");
    ob_node(&b, "Mul", "mul0", "s,c", "d");
    if (two_results) {
        ob_node(&b, "Relu", "relu0", "s", "r");
        ob_output(&b, "d");
        ob_output(&b, "r");
    } else {
        ob_node(&b, "Relu", "relu0", "d", "r");
        ob_node(&b, "Mul", "mul1", "d,r", "y");
        ob_output(&b, "y");
    }
    return ob_done(&b, len);
}

/* y = x * k (k a constant): for the constant_updater. */
static uint8_t *const_model(size_t *len)
{
    ob b;
    const int64_t dims[2] = {2, 3};
    ob_begin(&b, dims, 2);
    ob_init_f32(&b, "k", dims, 2, (const float[]){1, 2, 3, 4, 5, 6});
    ob_node(&b, "Mul", "mul0", "x,k", "y");
    ob_output(&b, "y");
    return ob_done(&b, len);
}

static int compile(const uint8_t *model, size_t len, const char *tgt, json_t *options, tth_compile_result *res,
                   tth_diag *d)
{
    return test_compile_text(test_reg, tgt, model, len, "m", options, NULL, res, d);
}

/* abc_model(two_results) compiled for tgt with opts (NULL: build_shared only); the test fails
 * when the compile does. */
static void compile_abc(int two_results, const char *tgt, json_t *opts, tth_compile_result *res)
{
    size_t len;
    uint8_t *model = abc_model(two_results, &len);
    json_t *o = opts ? json_incref(opts) : json_pack("{s:b}", "build_shared", 1);
    tth_diag d;
    cr_assert_eq(compile(model, len, tgt, o, res, &d), 0, "%s: %s (%s)", tgt, d.message, d.location);
    json_decref(o);
    free(model);
}

/* The artifact opened, in[k][i] = value(i, k) bound to a, b, c [2, 3], run once. */
static tthrt_model *run_abc(const tth_compile_result *res, float in[3][6], float (*value)(int i, int k))
{
    tthrt_model *m = test_open_artifact(res);
    const char *names[3] = {"a", "b", "c"};
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < 6; i++)
            in[k][i] = value(i, k);
        test_bind_f32(m, names[k], 2, (const int64_t[]){2, 3}, in[k]);
    }
    test_run_once(m);
    return m;
}

static float two_op_value(int i, int k) { return (float)((i * 7 + k * 3) % 11) - 5.0f; }
static float two_result_value(int i, int k) { return (float)((i * 5 + k * 7) % 13) - 6.0f; }

/* Run the two-op model's artifact and compare with values computed here. */
static void run_two_op(const tth_compile_result *res)
{
    float in[3][6];
    tthrt_model *m = run_abc(res, in, two_op_value);
    tthrt_array out = test_output(m, 0);
    for (int i = 0; i < 6; i++) {
        float dd = (in[0][i] + in[1][i]) * in[2][i];
        float want = dd * (dd > 0 ? dd : 0);
        cr_expect_float_eq(((float *)out.data)[i], want, 1e-6, "y[%d]", i);
    }
    tthrt_model_close(m);
}

static int has_refusal(const json_t *meta, const char *reason)
{
    const json_t *rs = json_object_get(json_object_get(meta, "partition"), "refusals");
    size_t i;
    const json_t *o;
    json_array_foreach(rs, i, o)
        if (strstr(json_string_value(json_object_get(o, "reason")), reason))
            return 1;
    return 0;
}

static int tar_has(const tth_compile_result *res, const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i + n <= res->artifact_len; i++)
        if (memcmp(res->artifact + i, s, n) == 0)
            return 1;
    return 0;
}

/* ---- every combination on the ONNX node tests ------------------------------------------------ */

static void node_case_host(const char *kind, const char *host, const char *test)
{
    char t[128];
    snprintf(t, sizeof t, "%s,%s", kind, host);
    json_t *tj = test_target(test_reg, t);
    tth_case_result res;
    tth_case_status st = tth_case_run_node(test, test_reg, tj, 0, &res);
    cr_expect_eq(st, TTH_CASE_PASS, "%s on %s: %s", test, t, res.detail);
    json_decref(tj);
}

static void node_case(const char *kind, const char *test) { node_case_host(kind, "c", test); }

Test(partition, node_add_every_kind)
{
    static const char *const kinds[] = {"test-ps", "test-r2t", "test-t2r", "test-r2r", "test-all"};
    for (size_t k = 0; k < 5; k++) {
        node_case(kinds[k], "test_add");
        node_case(kinds[k], "test_mul");
    }
}

/* The llvm host: its object code calls the other kinds' region functions as externs. */
Test(partition, node_add_llvm_host)
{
    static const char *const kinds[] = {"test-ps", "test-r2t", "test-t2r", "test-r2r"};
    for (size_t k = 0; k < 4; k++)
        node_case_host(kinds[k], "llvm", "test_add");
}

/* ---- the two-op model: regions, explanation, attrs, results ---------------------------------- */

static void two_op_kind(const char *kind)
{
    char t[128], sym[128], sym1[128];
    snprintf(t, sizeof t, "%s,c", kind);
    snprintf(sym, sizeof sym, "m_%s_main_0", kind);
    for (char *p = sym; *p; p++)
        if (*p == '-')
            *p = '_';
    snprintf(sym1, sizeof sym1, "%.*s1", (int)strlen(sym) - 1, sym);
    json_t *opts = json_pack("{s:s, s:b, s:b}", "dump_ir", "partition", "explain", 1, "build_shared", 1);
    tth_compile_result res;
    compile_abc(0, t, opts, &res);
    json_decref(opts);
    const json_t *meta = res.metadata;
    cr_expect_str_eq(test_node_kind(meta, "add0"), kind);
    cr_expect_str_eq(test_node_kind(meta, "mul0"), kind);
    cr_expect_str_eq(test_node_kind(meta, "relu0"), "c");
    cr_expect_str_eq(test_node_kind(meta, "mul1"), kind);
    char want[128];
    snprintf(want, sizeof want, "%s: nn.relu is not add or multiply", kind);
    cr_expect(has_refusal(meta, want), "no refusal '%s'", want);
    const json_t *regions = json_object_get(json_object_get(meta, "partition"), "regions");
    cr_expect_eq(json_array_size(regions), 2, "mul1 would make the first region non-convex");
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(regions, 0), "function")), sym);
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(regions, 1), "function")), sym1);
    const char *relay = json_string_value(json_object_get(res.dumps, "partition"));
    cr_assert_not_null(relay);
    cr_expect(strstr(relay, "\"Compiler\": \"") && strstr(relay, kind), "no Compiler attr:\n%s", relay);
    cr_expect(strstr(relay, sym) != NULL, "no global_symbol %s:\n%s", sym, relay);
    cr_expect(tar_has(&res, "explain/partition.dot"));
    cr_expect(tar_has(&res, "digraph partition"));
    char cluster[200];
    snprintf(cluster, sizeof cluster, "label=\"%s\"", sym1);
    cr_expect(tar_has(&res, cluster), "the dot file boxes region %s", sym1);
    run_two_op(&res);
    tth_compile_result_free(&res);
}

Test(partition, plain_target_still_explains)
{
    tth_compile_result res;
    compile_abc(0, "c", NULL, &res);
    cr_expect_str_eq(test_node_kind(res.metadata, "mul0"), "c");
    cr_expect(!tar_has(&res, "explain/partition.dot"), "the dot file only with explain");
    run_two_op(&res);
    tth_compile_result_free(&res);
}

Test(partition, two_op_partition_only) { two_op_kind("test-ps"); }
Test(partition, two_op_relay_to_tir) { two_op_kind("test-r2t"); }
Test(partition, two_op_tir_to_runtime) { two_op_kind("test-t2r"); }
Test(partition, two_op_relay_to_runtime) { two_op_kind("test-r2r"); }
Test(partition, two_op_all_hooks) { two_op_kind("test-all"); }

/* A region with two results: its function returns a tuple, main takes its fields apart. */
static void two_result_kind(const char *kind)
{
    char t[128];
    snprintf(t, sizeof t, "%s,c", kind);
    tth_compile_result res;
    compile_abc(1, t, NULL, &res);
    cr_expect_str_eq(test_node_kind(res.metadata, "add0"), kind);
    cr_expect_str_eq(test_node_kind(res.metadata, "mul0"), kind);
    float in[3][6];
    tthrt_model *m = run_abc(&res, in, two_result_value);
    tthrt_array od = test_output(m, 0), orl = test_output(m, 1);
    for (int i = 0; i < 6; i++) {
        float sum = in[0][i] + in[1][i];
        cr_expect_float_eq(((float *)od.data)[i], sum * in[2][i], 1e-6, "d[%d]", i);
        cr_expect_float_eq(((float *)orl.data)[i], sum > 0 ? sum : 0, 1e-6, "r[%d]", i);
    }
    tthrt_model_close(m);
    tth_compile_result_free(&res);
}

Test(partition, two_results_default_lowering) { two_result_kind("test-ps"); }
Test(partition, two_results_tir_to_runtime) { two_result_kind("test-t2r"); }
Test(partition, two_results_relay_to_tir) { two_result_kind("test-r2t"); }
Test(partition, two_results_relay_to_runtime) { two_result_kind("test-r2r"); }

/* ---- hook order ------------------------------------------------------------------------------ */

Test(partition, hooks_run_in_rfc_order)
{
    char dir[256], log[300];
    test_mkdtemp(dir, sizeof dir);
    snprintf(log, sizeof log, "%s/hooks.log", dir);
    setenv("TTH_TEST_HOOK_LOG", log, 1);
    tth_compile_result res;
    /* multiply goes to test-r2r-mul (relay_to_runtime), add to test-r2t (relay_to_tir) */
    compile_abc(0, "test-r2r-mul,test-r2t,c", NULL, &res);
    cr_expect_str_eq(test_node_kind(res.metadata, "mul0"), "test-r2r-mul");
    cr_expect_str_eq(test_node_kind(res.metadata, "add0"), "test-r2t");
    run_two_op(&res);
    size_t n;
    char *text = (char *)test_read_file(log, &n);
    cr_assert_not_null(text);
    const char *rr = strstr(text, "test-r2r-mul relay_to_runtime m_test_r2r_mul_main_0");
    const char *cu = strstr(text, "test-r2r-mul constant_updater m_test_r2r_mul_main_0");
    const char *rt = strstr(text, "test-r2t relay_to_tir m_test_r2t_main_0");
    cr_expect(rr && cu && rt && rr < cu && cu < rt, "hook order:\n%s", text);
    free(text);
    tth_compile_result_free(&res);
    /* tir_to_runtime comes last, after memory planning */
    unlink(log);
    compile_abc(0, "test-r2r-mul,test-t2r,c", NULL, &res);
    run_two_op(&res);
    text = (char *)test_read_file(log, &n);
    cr_assert_not_null(text);
    rr = strstr(text, "test-r2r-mul relay_to_runtime m_test_r2r_mul_main_0");
    const char *tr = strstr(text, "test-t2r tir_to_runtime");
    cr_expect(rr && tr && rr < tr, "hook order:\n%s", text);
    free(text);
    unsetenv("TTH_TEST_HOOK_LOG");
    tth_compile_result_free(&res);
    test_rmtree(dir);
}

/* ---- constants of an external module --------------------------------------------------------- */

Test(partition, constant_updater_constants_join_the_parameters)
{
    size_t len;
    uint8_t *model = const_model(&len);
    tth_compile_result res;
    tth_diag d;
    json_t *opts = json_pack("{s:b}", "build_shared", 1);
    cr_assert_eq(compile(model, len, "test-r2r,c", opts, &res, &d), 0, "%s", d.message);
    cr_expect(tar_has(&res, "test-r2r.m_test_r2r_main_0_c"), "no prefixed constant in parameters/");
    cr_expect(tar_has(&res, "codegen/test-r2r/src/m_test_r2r_main_0.c"),
              "the external module's source is packaged under codegen/<kind>/");
    tthrt_model *m = test_open_artifact(&res);
    float x[6];
    for (int i = 0; i < 6; i++)
        x[i] = (float)i - 2.5f;
    test_bind_f32(m, "x", 2, (const int64_t[]){2, 3}, x);
    test_run_once(m);
    tthrt_array out = test_output(m, 0);
    for (int i = 0; i < 6; i++)
        cr_expect_float_eq(((float *)out.data)[i], ((float)i - 2.5f) * (float)(i + 1), 1e-6);
    tthrt_model_close(m);
    tth_compile_result_free(&res);
    json_decref(opts);
    free(model);
}

/* ---- errors ---------------------------------------------------------------------------------- */

static void expect_failure(const char *tgt, int code, const char *const *parts)
{
    size_t len;
    uint8_t *model = abc_model(0, &len);
    tth_compile_result res;
    tth_diag d;
    int rc = compile(model, len, tgt, NULL, &res, &d);
    cr_expect_eq(rc, code, "%s: rc %d: %s", tgt, rc, d.message);
    char all[2048];
    snprintf(all, sizeof all, "%s | %s | %s", d.message, d.location, d.hint);
    for (size_t i = 0; parts[i]; i++)
        cr_expect(strstr(all, parts[i]) != NULL, "%s: '%s' not in: %s", tgt, parts[i], all);
    free(model);
}

Test(partition, kind_without_partition_supports_only_last)
{
    expect_failure("test-none,c", TTH_EUNSUPPORTED,
                   (const char *const[]){"test-none", "partition_supports", "fallback", NULL});
}

Test(partition, kind_nothing_can_build)
{
    expect_failure("test-npu,c", TTH_EUNSUPPORTED,
                   (const char *const[]){"test-npu", "not the host's CPU", NULL});
}

Test(partition, last_kind_must_host)
{
    expect_failure("test-ps,test-none", TTH_EUNSUPPORTED,
                   (const char *const[]){"test-none", "cannot be a host", NULL});
}

Test(partition, failing_hooks_name_plugin_hook_and_region)
{
    expect_failure("test-fail-r2t,c", TTH_EINTERNAL,
                   (const char *const[]){"tp-test-fail-r2t", "relay_to_tir", "m_test_fail_r2t_main_0", NULL});
    expect_failure("test-fail-t2r,c", TTH_EINTERNAL,
                   (const char *const[]){"tp-test-fail-t2r", "tir_to_runtime", "m_test_fail_t2r_main_0", NULL});
    expect_failure("test-fail-r2r,c", TTH_EINTERNAL,
                   (const char *const[]){"tp-test-fail-r2r", "relay_to_runtime", "m_test_fail_r2r_main_0", NULL});
    expect_failure("test-fail-cu,c", TTH_EINTERNAL,
                   (const char *const[]){"tp-test-fail-cu", "constant_updater", "m_test_fail_cu_main_0", NULL});
}

/* ---- a kind that took nothing ------------------------------------------------------------------ */

static char warned[4096];

static void keep_warnings(void *ctx, int level, const char *msg)
{
    (void)ctx;
    if (level == TTH_SEV_WARNING)
        snprintf(warned + strlen(warned), sizeof warned - strlen(warned), "%s\n", msg);
}

static void compile_logged(const char *model_path, const char *tgt, tth_compile_result *res)
{
    size_t len;
    uint8_t *model = test_slurp(model_path, &len);
    tth_host host = test_host(NULL, keep_warnings);
    json_t *opts = json_pack("{s:b}", "build_shared", 0);
    tth_diag d;
    warned[0] = 0;
    cr_assert_eq(test_compile_text(test_reg, tgt, model, len, "m", opts, &host, res, &d), 0, "%s: %s", tgt,
                 d.message);
    json_decref(opts);
    free(model);
}

/* A composite whose first kind takes no operator compiles (everything on the last kind) and
 * says so as a warning that gives the kind's most frequent refusal; a kind that took something
 * is not warned about. */
Test(partition, a_kind_that_took_nothing_is_a_warning)
{
    tth_compile_result res;
    compile_logged(NODE_DATA "/test_relu/model.onnx", "test-ps,c", &res);
    cr_assert(strstr(warned, "target kind 'test-ps' took none of the model's operators: everything runs on 'c'"),
              "no warning: '%s'", warned);
    cr_assert(strstr(warned, "test-ps: nn.relu is not add or multiply (1 operator)"),
              "the warning gives the kind's reason: '%s'", warned);
    tth_compile_result_free(&res);
    compile_logged(NODE_DATA "/test_add/model.onnx", "test-ps,c", &res);
    cr_assert_eq(warned[0], 0, "a kind that took the add was warned about: '%s'", warned);
    tth_compile_result_free(&res);
}
