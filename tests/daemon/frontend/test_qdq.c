/* The QDQ pass (daemon/frontend/qdq.c) on the models of qdq_models.py: for each case
 *  - after tth_relay_simplify the Relay text holds the integer form (qnn.conv2d / qnn.matmul,
 *    qnn.requantize, the integer clip of an activation, an integer reshape) and no float
 *    conv/dense, or, for a refused case, the float form and the reason in main's "qdq_refused";
 *  - compiled for `c` in process (tth_compile) and run with the runtime, every output integer is
 *    within one quantization step of the numpy QDQ reference (qdq_models.py);
 *  - compiled for `cmsis-nn,c -mcpu=cortex-m55`, the metadata's partition puts the conv / dense
 *    on the kind expected (cmsis-nn for int8 per-tensor-output patterns; nothing is run);
 *  - with options.explain the refused candidate comes back as a note;
 *  - when bench/ort/setup installed onnxruntime-node, ONNX Runtime's outputs for the same inputs
 *    are within one step of tth's (skipped otherwise). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "helpers.h"
#include "model_fixture.h"
#include "compile.h"
#include "frontend.h"
#include "tth/target.h"
#include "tthrt.h"

/* every test has test_reg (test_fixture_c) */
TestSuite(qdq, .timeout = 300, .init = test_fixture_c, .fini = test_fixture_fini);

typedef struct qcase {
    const char *name;
    int integer;              /* the pass rewrites it */
    const char *anchor;       /* the op whose partition kind is checked */
    int convs, matmuls;       /* qnn.conv2d / qnn.matmul (integer) or nn.conv2d / matmul (float) */
    int clips;                /* integer clips */
    int reshapes;             /* integer (int8) reshapes */
    int dequantizes;          /* dequantize calls left */
    const char *cmsis_kind;   /* the kind `anchor` goes to for cmsis-nn,c */
    const char *refusal;      /* part of the reason the pass gives, for a refused case */
} qcase;

static const qcase CASES[] = {
    {"conv_i8", 1, "qnn.conv2d", 1, 0, 0, 0, 0, "cmsis-nn", NULL},
    {"conv_pc_relu", 1, "qnn.conv2d", 1, 0, 1, 0, 0, "cmsis-nn", NULL},
    {"dwconv_clip", 1, "qnn.conv2d", 1, 0, 1, 0, 0, "cmsis-nn", NULL},
    {"conv_u8", 1, "qnn.conv2d", 1, 0, 0, 0, 0, "c", NULL},          /* CMSIS-NN convolves int8 */
    {"gemm_i8", 1, "qnn.matmul", 0, 1, 0, 0, 0, "cmsis-nn", NULL},
    {"matmul_pc_bias", 1, "qnn.matmul", 0, 1, 0, 0, 0, "c", NULL},    /* per-channel FC: per tensor only */
    {"conv_bad_bias", 0, "nn.conv2d", 1, 0, 0, 0, 1, "c", "is not x_scale * w_scale"},
    /* conv+relu, DQ->maxpool->Q as a max pool of the integers (cmsis-nn takes it too), flatten as
     * an int8 reshape, gemm: no dequantize left */
    {"cnn", 1, "qnn.conv2d", 1, 1, 0, 1, 0, "cmsis-nn", NULL},
    /* an activation between a dequantize and a quantize of one quantization: an integer clip */
    {"relu_after_q", 1, "qnn.conv2d", 1, 0, 1, 0, 0, "cmsis-nn", NULL},
    {"clip_after_q", 1, "qnn.conv2d", 1, 0, 1, 0, 0, "cmsis-nn", NULL},
};

static const qcase *find_case(const char *name)
{
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
        if (strcmp(CASES[i].name, name) == 0)
            return &CASES[i];
    cr_assert_fail("no case %s", name);
    return NULL;
}

/* Generate the case into a new temporary directory; dir gets DIR/<case>. */
static void generate(const char *name, char *tmp, size_t tlen, char *dir, size_t dlen)
{
    char cmd[1024];
    test_mkdtemp(tmp, tlen);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/daemon/frontend/qdq_models.py %s %s", getenv("TTH_SOURCE_ROOT"),
             tmp, name);
    cr_assert_eq(test_run(cmd), 0, "%s", cmd);
    snprintf(dir, dlen, "%s/%s", tmp, name);
}

/* DIR/model.onnx, whole */
static uint8_t *read_model(const char *dir, size_t *len)
{
    char path[600];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    return test_slurp(path, len);
}

/* ---------------------------------------------------------------- the Relay form */

static int count_op(tth_relay_module *m, const char *op, tth_dtype only)
{
    tth_rexpr **nodes;
    int64_t n = tth_relay_topo(m, tth_relay_module_main(m), &nodes);
    int c = 0;
    for (int64_t i = 0; i < n; i++) {
        const tth_rexpr *e = nodes[i];
        if (e->kind == TTH_REXPR_CALL && !e->u.call.fn && strcmp(tth_op_name(e->u.call.op), op) == 0 &&
            (only == TTH_DTYPE_INVALID || (e->type.nfields < 0 && e->type.tensor.dtype == only)))
            c++;
    }
    return c;
}

static int count_int8ish(tth_relay_module *m, const char *op)
{
    return count_op(m, op, TTH_I8) + count_op(m, op, TTH_U8);
}

static void check_relay(const qcase *qc, const char *dir)
{
    size_t len;
    uint8_t *model = read_model(dir, &len);
    tth_relay_module *m = NULL;
    tth_diag d;
    tth_diag_clear(&d);
    cr_assert_eq(tth_onnx_import(model, len, "m", &m, &d), 0, "%s: %s", qc->name, d.message);
    free(model);
    cr_assert_eq(tth_relay_simplify(m, &d), 0, "%s: %s (%s)", qc->name, d.message, d.location);
    char *text = tth_relay_print(m);
    cr_assert(text);
    if (qc->integer) {
        cr_expect_eq(count_op(m, "qnn.conv2d", TTH_DTYPE_INVALID), qc->convs, "%s: qnn.conv2d\n%s", qc->name, text);
        cr_expect_eq(count_op(m, "qnn.matmul", TTH_DTYPE_INVALID), qc->matmuls, "%s: qnn.matmul\n%s", qc->name, text);
        cr_expect_eq(count_op(m, "qnn.requantize", TTH_DTYPE_INVALID), qc->convs + qc->matmuls,
                     "%s: qnn.requantize\n%s", qc->name, text);
        cr_expect_eq(count_op(m, "nn.conv2d", TTH_DTYPE_INVALID) + count_op(m, "matmul", TTH_DTYPE_INVALID), 0,
                     "%s: a float conv/matmul is left\n%s", qc->name, text);
        cr_expect_eq(count_op(m, "nn.relu", TTH_DTYPE_INVALID), 0, "%s: nn.relu\n%s", qc->name, text);
        cr_expect_eq(count_int8ish(m, "clip"), qc->clips, "%s: integer clips\n%s", qc->name, text);
        cr_expect_eq(count_op(m, "clip", TTH_F32), 0, "%s: a float clip is left\n%s", qc->name, text);
        cr_expect_eq(count_op(m, "nn.max_pool2d", TTH_F32), 0, "%s: a float max pool is left\n%s", qc->name, text);
        cr_expect_eq(count_int8ish(m, "reshape"), qc->reshapes, "%s: integer reshapes\n%s", qc->name, text);
        cr_expect_eq(count_op(m, "reshape", TTH_F32), 0, "%s: a float reshape is left\n%s", qc->name, text);
        /* the bias is added to the int32 accumulator */
        cr_expect_eq(count_op(m, "add", TTH_I32), qc->convs + qc->matmuls, "%s: int32 bias adds\n%s", qc->name, text);
        cr_expect(strstr(text, qc->convs ? "qnn.conv2d(" : "qnn.matmul("), "%s: Relay text\n%s", qc->name, text);
        cr_expect(!strstr(text, "qdq_refused"), "%s: a refusal\n%s", qc->name, text);
    } else {
        cr_expect_eq(count_op(m, "qnn.conv2d", TTH_DTYPE_INVALID) + count_op(m, "qnn.matmul", TTH_DTYPE_INVALID), 0,
                     "%s: rewritten although refused\n%s", qc->name, text);
        cr_expect_eq(count_op(m, "nn.conv2d", TTH_F32), qc->convs, "%s: nn.conv2d\n%s", qc->name, text);
        const json_t *ref = json_object_get(tth_relay_module_main(m)->attrs, "qdq_refused");
        cr_assert_eq(json_array_size(ref), 1, "%s: refusals\n%s", qc->name, text);
        const char *why = json_string_value(json_object_get(json_array_get(ref, 0), "reason"));
        cr_expect(why && strstr(why, qc->refusal), "%s: reason '%s'", qc->name, why ? why : "");
        cr_expect_str_eq(json_string_value(json_object_get(json_array_get(ref, 0), "op")), "nn.conv2d");
    }
    cr_expect_eq(count_op(m, "qnn.dequantize", TTH_DTYPE_INVALID), qc->dequantizes, "%s: dequantizes\n%s", qc->name,
                 text);
    free(text);
    tth_relay_module_free(m);
}

/* ---------------------------------------------------------------- compiling and running */

typedef struct logs {
    char text[8192];
} logs;

static void host_log(void *ctx, int level, const char *msg)
{
    logs *l = ctx;
    size_t n = strlen(l->text);
    snprintf(l->text + n, sizeof l->text - n, "[%d] %s\n", level, msg);
}

/* The case in dir compiled for tgt with opts, its notes logged into lg (NULL: not kept). */
static int compile(const tth_registry *r, const char *dir, const char *tgt, json_t *opts, logs *lg,
                   tth_compile_result *res, tth_diag *d)
{
    size_t len;
    uint8_t *model = read_model(dir, &len);
    tth_host host = test_host(lg, lg ? host_log : NULL);
    int rc = test_compile_text(r, tgt, model, len, "m", opts, &host, res, d);
    free(model);
    return rc;
}

/* The same with only build_shared in the options; the test fails when the compile does. */
static void compile_ok(const tth_registry *r, const char *dir, const char *tgt, int build_shared,
                       tth_compile_result *res)
{
    json_t *opts = json_pack("{s:b}", "build_shared", build_shared);
    tth_diag d;
    int rc = compile(r, dir, tgt, opts, NULL, res, &d);
    json_decref(opts);
    cr_assert_eq(rc, 0, "%s: %s (%s)", dir, d.message, d.location);
}

static int64_t elem(const tthrt_array *a, size_t i)
{
    switch (a->dtype) {
    case TTH_I8: return ((const int8_t *)a->data)[i];
    case TTH_U8: return ((const uint8_t *)a->data)[i];
    case TTH_F32: return (int64_t)((const float *)a->data)[i];
    default: cr_assert_fail("unexpected dtype %s", tth_dtype_name(a->dtype)); return 0;
    }
}

static size_t numel(const tthrt_array *a)
{
    size_t n = 1;
    for (int i = 0; i < a->rank; i++)
        n *= (size_t)a->shape[i];
    return n;
}

/* Largest |got - want| over all elements; *nbad counts those above 1. */
static int64_t max_diff(const tthrt_array *got, const tthrt_array *want, size_t *nbad, const char *what)
{
    cr_assert_eq(numel(got), numel(want), "%s: %zu elements, want %zu", what, numel(got), numel(want));
    int64_t mx = 0;
    *nbad = 0;
    for (size_t i = 0; i < numel(got); i++) {
        int64_t dd = llabs(elem(got, i) - elem(want, i));
        if (dd > mx)
            mx = dd;
        *nbad += dd > 1;
    }
    return mx;
}

/* Compile for c, run on the case's input; *out gets a copy of the output. */
static void run_on_c(const tth_registry *r, const char *dir, tthrt_array *out)
{
    tth_compile_result res;
    compile_ok(r, dir, "c", 1, &res);
    tthrt_model *m = test_open_artifact(&res);
    tth_compile_result_free(&res);
    char path[700];
    snprintf(path, sizeof path, "%s/test_data_set_0/input_0.pb", dir);
    tth_diag d;
    cr_assert_eq(tthrt_model_bind_file(m, tthrt_model_input(m, 0)->name, path, &d), 0, "%s", d.message);
    test_run_once(m);
    tthrt_array view = test_output(m, 0);
    cr_assert_eq(tthrt_array_init(out, view.dtype, view.rank, view.shape, &d), 0);
    memcpy(out->data, view.data, view.nbytes);
    tthrt_model_close(m);
}

static void check_numerics(const qcase *qc, const tth_registry *r, const char *dir)
{
    tthrt_array got, want;
    tth_diag d;
    run_on_c(r, dir, &got);
    char path[700];
    snprintf(path, sizeof path, "%s/test_data_set_0/output_0.pb", dir);
    cr_assert_eq(tthrt_pb_read(path, &want, &d), 0, "%s", d.message);
    cr_assert_eq(got.dtype, want.dtype, "%s: output %s, want %s", qc->name, tth_dtype_name(got.dtype),
                 tth_dtype_name(want.dtype));
    size_t nbad;
    int64_t mx = max_diff(&got, &want, &nbad, qc->name);
    cr_expect_leq(mx, 1, "%s: %zu of %zu outputs differ from the numpy QDQ reference by more than one step (max %lld)",
                  qc->name, nbad, numel(&got), (long long)mx);
    tthrt_array_clear(&got);
    tthrt_array_clear(&want);
}

static void check_cmsis_partition(const qcase *qc, const tth_registry *r, const char *dir)
{
    tth_compile_result res;
    compile_ok(r, dir, "cmsis-nn,c -mcpu=cortex-m55", 0, &res);
    char *meta = json_dumps(json_object_get(res.metadata, "partition"), JSON_INDENT(1));
    const char *k = test_partition_kind(res.metadata, qc->anchor);
    cr_expect(k && strcmp(k, qc->cmsis_kind) == 0, "%s: %s went to %s, want %s\n%s", qc->name, qc->anchor,
              k ? k : "(nothing)", qc->cmsis_kind, meta);
    if (strcmp(qc->cmsis_kind, "cmsis-nn") == 0) {
        cr_expect_str_eq(test_partition_kind(res.metadata, "qnn.requantize"), "cmsis-nn", "%s\n%s", qc->name, meta);
        if (qc->clips)
            cr_expect_str_eq(test_partition_kind(res.metadata, "clip"), "cmsis-nn", "%s\n%s", qc->name, meta);
    }
    if (strcmp(qc->name, "cnn") == 0) /* the second dense layer and the pool too */
        cr_expect_str_eq(test_partition_kind(res.metadata, "nn.max_pool2d"), "cmsis-nn", "%s\n%s", qc->name, meta);
    free(meta);
    tth_compile_result_free(&res);
}

static void run_case(const char *name)
{
    const qcase *qc = find_case(name);
    char tmp[256], dir[512];
    generate(name, tmp, sizeof tmp, dir, sizeof dir);
    check_relay(qc, dir);
    check_numerics(qc, test_reg, dir);
    check_cmsis_partition(qc, test_reg, dir);
    test_rmtree(tmp);
}

Test(qdq, conv_i8) { run_case("conv_i8"); }
Test(qdq, conv_per_channel_relu) { run_case("conv_pc_relu"); }
Test(qdq, depthwise_conv_clip) { run_case("dwconv_clip"); }
Test(qdq, conv_uint8) { run_case("conv_u8"); }
Test(qdq, gemm_int8_bias) { run_case("gemm_i8"); }
Test(qdq, matmul_per_channel_float_bias) { run_case("matmul_pc_bias"); }
Test(qdq, conv_wrong_bias_scale_stays_float) { run_case("conv_bad_bias"); }
Test(qdq, cnn_pool_flatten_gemm) { run_case("cnn"); }
Test(qdq, relu_after_quantize_is_an_integer_clip) { run_case("relu_after_q"); }
Test(qdq, clip_after_quantize_is_an_integer_clip) { run_case("clip_after_q"); }

/* Every case of the generator has a row here (a new case is tested, not forgotten). */
Test(qdq, every_generated_case_is_tested)
{
    char cmd[600], tmp[256], path[400];
    test_mkdtemp(tmp, sizeof tmp);
    snprintf(path, sizeof path, "%s/list", tmp);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/daemon/frontend/qdq_models.py --list > %s",
             getenv("TTH_SOURCE_ROOT"), path);
    cr_assert_eq(test_run(cmd), 0, "%s", cmd);
    size_t len;
    char *list = (char *)test_read_file(path, &len);
    cr_assert(list);
    size_t n = 0;
    for (char *save = NULL, *tok = strtok_r(list, "\n", &save); tok; tok = strtok_r(NULL, "\n", &save), n++)
        find_case(tok);
    cr_expect_eq(n, sizeof CASES / sizeof CASES[0]);
    free(list);
    test_rmtree(tmp);
}

/* --explain: the refused candidate is a note naming the node and the reason. */
Test(qdq, explain_notes_the_refusal)
{
    char tmp[256], dir[512];
    generate("conv_bad_bias", tmp, sizeof tmp, dir, sizeof dir);
    const tth_registry *r = test_reg;
    tth_compile_result res;
    tth_diag d;
    logs lg = {{0}};
    json_t *opts = json_pack("{s:b, s:b}", "explain", 1, "build_shared", 0);
    cr_assert_eq(compile(r, dir, "c", opts, &lg, &res, &d), 0, "%s", d.message);
    cr_expect(strstr(lg.text, "[3] qdq: nn.conv2d 'conv"), "notes:\n%s", lg.text);
    cr_expect(strstr(lg.text, "is not x_scale * w_scale"), "notes:\n%s", lg.text);
    tth_compile_result_free(&res);
    /* without explain: no note, and the list never reaches the artifact's Relay */
    lg.text[0] = 0;
    json_object_set_new(opts, "explain", json_false());
    json_object_set_new(opts, "dump_ir", json_string("optimize"));
    cr_assert_eq(compile(r, dir, "c", opts, &lg, &res, &d), 0, "%s", d.message);
    cr_expect(!strstr(lg.text, "qdq:"), "notes:\n%s", lg.text);
    const char *relay = json_string_value(json_object_get(res.dumps, "optimize"));
    cr_assert(relay);
    cr_expect(!strstr(relay, "qdq_refused"), "%s", relay);
    tth_compile_result_free(&res);
    json_decref(opts);
    test_rmtree(tmp);
}

/* ONNX Runtime, when bench/ort/setup installed onnxruntime-node: its outputs against tth's. */
Test(qdq, onnxruntime_agrees)
{
    const char *src = getenv("TTH_SOURCE_ROOT");
    char ortdir[600], probe[700];
    const char *env = getenv("TTH_ORT_DIR");
    snprintf(ortdir, sizeof ortdir, "%s", env && *env ? env : "");
    if (!ortdir[0])
        snprintf(ortdir, sizeof ortdir, "%s/build-bench/ort", src);
    snprintf(probe, sizeof probe, "%s/node_modules/onnxruntime-node", ortdir);
    struct stat st;
    if (stat(probe, &st) != 0 || !test_have("node"))
        cr_skip_test("onnxruntime-node is not installed (bench/ort/setup) or node is missing");
    const tth_registry *r = test_reg;
    char tmp[256], dir[512];
    test_mkdtemp(tmp, sizeof tmp);
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        const qcase *qc = &CASES[i];
        char cmd[3000], gen_tmp[256];
        generate(qc->name, gen_tmp, sizeof gen_tmp, dir, sizeof dir);
        snprintf(cmd, sizeof cmd, "node %s/bench/ort/ort_time.js %s/model.onnx --warmup 0 --runs 20 --input x=%s/input_0.npy "
                 "--output-dir %s/ort --ort-dir %s > %s/ort.json", src, dir, dir, dir, ortdir, dir);
        cr_assert_eq(test_run(cmd), 0, "%s", cmd);
        tthrt_array got, ort, want;
        tth_diag d;
        char path[700];
        snprintf(path, sizeof path, "%s/ort/y.npy", dir);
        cr_assert_eq(tthrt_npy_read(path, &ort, &d), 0, "%s: %s", path, d.message);
        snprintf(path, sizeof path, "%s/test_data_set_0/output_0.pb", dir);
        cr_assert_eq(tthrt_pb_read(path, &want, &d), 0, "%s", d.message);
        run_on_c(r, dir, &got);
        size_t nbad;
        int64_t vs_tth = max_diff(&got, &ort, &nbad, qc->name);
        cr_expect_leq(vs_tth, 1, "%s: %zu outputs differ from ONNX Runtime's by more than one step (max %lld)",
                      qc->name, nbad, (long long)vs_tth);
        int64_t vs_ref = max_diff(&ort, &want, &nbad, qc->name);
        cr_expect_leq(vs_ref, 1, "%s: ONNX Runtime is %lld steps from the numpy reference", qc->name,
                      (long long)vs_ref);
        tthrt_array_clear(&got);
        tthrt_array_clear(&ort);
        tthrt_array_clear(&want);
        test_rmtree(gen_tmp);
    }
    test_rmtree(tmp);
}
