/* test_llvm_pipeline.c: whole compiles with target `llvm` (daemon/compile in-process): the
 * llvm-cpu plugin builds every operator and the AOT entry, the pipeline links its object into the
 * host shared object, the runtime runs it. ONNX node models from libonnx-testdata are compared
 * with their expected outputs (tests/support/onnx_case.c: the same harness and tolerances as the
 * `c` target's tests), and a sweep checks that every sampled case the `c` target passes, `llvm`
 * passes too. */
#include <criterion/criterion.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"
#include "model_fixture.h"
#include "onnx_case.h"
#include "standalone_build.h"
#include "compile.h"
#include "tth/target.h"

#define NODE "/usr/share/libonnx-testdata/data/node/"

/* The world of every test: the build tree's plugins and the result of its last compile_case. */
static tth_registry *reg;
static tth_compile_result res;

static void setup(void)
{
    reg = test_registry();
}

static void teardown(void)
{
    tth_compile_result_free(&res);
    tth_registry_free(reg);
}

TestSuite(llvm_pipeline, .init = setup, .fini = teardown);

/* Compile case_dir/model.onnx as model `name` for target into res (asserts it compiled);
 * build_shared: the option, or -1 for the pipeline's default. */
static void compile_case(const char *target, const char *case_dir, const char *name, int build_shared)
{
    tth_compile_result_free(&res);
    char path[1024];
    snprintf(path, sizeof path, "%s/model.onnx", case_dir);
    json_t *t = test_target(reg, target);
    json_t *opts = build_shared < 0 ? NULL : json_pack("{s:b}", "build_shared", build_shared);
    tth_diag d;
    int rc = test_compile_file(reg, t, path, name, opts, &res, &d);
    json_decref(opts);
    json_decref(t);
    cr_assert_eq(rc, 0, "%s for '%s': %s", case_dir, target, d.message);
}

/* The node case `test` passes for llvm (tests/support/onnx_case.c). */
static void expect_pass(const char *test)
{
    json_t *t = test_target(reg, "llvm");
    char dir[512];
    snprintf(dir, sizeof dir, NODE "%s", test);
    tth_case_result cres;
    tth_case_status st = tth_case_run(dir, reg, t, &cres);
    json_decref(t);
    cr_assert_eq(st, TTH_CASE_PASS, "%s: %s", test, cres.detail);
}

Test(llvm_pipeline, node_add) { expect_pass("test_add"); }
Test(llvm_pipeline, node_add_bcast) { expect_pass("test_add_bcast"); }
Test(llvm_pipeline, node_relu) { expect_pass("test_relu"); }
Test(llvm_pipeline, node_sigmoid) { expect_pass("test_sigmoid"); }
Test(llvm_pipeline, node_tanh) { expect_pass("test_tanh"); }
Test(llvm_pipeline, node_erf) { expect_pass("test_erf"); }
Test(llvm_pipeline, node_conv_with_strides_padding) { expect_pass("test_conv_with_strides_padding"); }
Test(llvm_pipeline, node_matmul_2d) { expect_pass("test_matmul_2d"); }
Test(llvm_pipeline, node_gemm_default_vector_bias) { expect_pass("test_gemm_default_vector_bias"); }
Test(llvm_pipeline, node_maxpool_2d_default) { expect_pass("test_maxpool_2d_default"); }
Test(llvm_pipeline, node_softmax_example) { expect_pass("test_softmax_example"); }
Test(llvm_pipeline, node_argmax_int64_exact) { expect_pass("test_argmax_default_axis_example"); }
Test(llvm_pipeline, node_split_tuple_outputs) { expect_pass("test_split_equal_parts_1d"); }
Test(llvm_pipeline, node_concat) { expect_pass("test_concat_2d_axis_1"); }

/* Every 16th node case (sorted by name; TTH_LLVM_PARITY_STRIDE=1 for all of them): whatever `c`
 * passes, `llvm` passes. Cases `c` does not pass (unsupported operators ...) are not counted. */
Test(llvm_pipeline, parity_with_c_on_sampled_node_cases, .timeout = 1200)
{
    struct dirent **names = NULL;
    int n = scandir(NODE, &names, NULL, alphasort);
    cr_assert(n > 100, "libonnx-testdata's node cases are not in " NODE);
    json_t *tc = test_target(reg, "c"), *tl = test_target(reg, "llvm");
    const char *env = getenv("TTH_LLVM_PARITY_STRIDE");
    int stride = env && atoi(env) > 0 ? atoi(env) : 16;
    int compared = 0, sampled = 0;
    char failures[8192] = "";
    for (int i = 0, k = 0; i < n; i++) {
        if (names[i]->d_name[0] == '.' || k++ % stride != 0)
            continue;
        char dir[1024];
        snprintf(dir, sizeof dir, NODE "%s", names[i]->d_name);
        tth_case_result rc, rl;
        sampled++;
        if (tth_case_run(dir, reg, tc, &rc) != TTH_CASE_PASS)
            continue;
        compared++;
        if (tth_case_run(dir, reg, tl, &rl) != TTH_CASE_PASS) {
            size_t used = strlen(failures);
            snprintf(failures + used, sizeof failures - used, "%s: %s\n", names[i]->d_name, rl.detail);
        }
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    json_decref(tc);
    json_decref(tl);
    cr_log_info("%d of %d sampled cases pass with c; compared with llvm", compared, sampled);
    cr_assert(compared * 3 >= sampled, "only %d of %d sampled cases pass with c", compared, sampled);
    cr_assert_str_empty(failures, "cases c passes but llvm does not:\n%s", failures);
}

/* Every case dir (base/name) passes for plain llvm, -mcpu=generic and, on x86-64, an AVX2 CPU. */
static void expect_pass_everywhere(const char *base, const char *const *cases, size_t n)
{
    const char *targets[3] = {"llvm", "llvm -mcpu=generic", NULL};
    if (strncmp(tth_host_triple(), "x86_64", 6) == 0)
        targets[2] = "llvm -mcpu=haswell";
    for (int k = 0; k < 3 && targets[k]; k++) {
        json_t *t = test_target(reg, targets[k]);
        for (size_t i = 0; i < n; i++) {
            char dir[768];
            snprintf(dir, sizeof dir, "%s/%s", base, cases[i]);
            tth_case_result cres;
            tth_case_status st = tth_case_run(dir, reg, t, &cres);
            cr_expect_eq(st, TTH_CASE_PASS, "%s with '%s': %s", cases[i], targets[k], cres.detail);
        }
        json_decref(t);
    }
}

/* The pathology issue 9 found (naming the CPU gave slower code) must never come back as wrong
 * code either: plain `llvm` (this machine: its CPU's widest vectors, FMA, the thread pool),
 * `-mcpu=generic` (4-lane SSE2 or NEON, multiply and add) and, on an x86-64 host, an AVX2 CPU
 * (8 lanes, 16 registers) all pass the same convolution cases: every vector shape of the tiled
 * kernels, compiled and run (tolerances of tests/support/onnx_case.c). Timings are the
 * benchmark's business (bench/vs_ort prints both). */
Test(llvm_pipeline, host_cpu_generic_and_avx2_agree_on_convolutions, .timeout = 600)
{
    static const char *const cases[] = {
        "pytorch-converted/test_Conv2d", "pytorch-converted/test_Conv2d_depthwise_padded",
        "pytorch-converted/test_Conv2d_depthwise_strided", "pytorch-converted/test_Conv2d_depthwise_with_multiplier",
        "pytorch-converted/test_Conv2d_dilated", "pytorch-converted/test_Conv2d_groups",
        "pytorch-converted/test_Conv2d_no_bias", "pytorch-converted/test_Conv2d_padding",
        "pytorch-converted/test_Conv2d_strided", "node/test_conv_with_strides_and_asymmetric_padding",
        "node/test_basic_conv_with_padding",
    };
    expect_pass_everywhere("/usr/share/libonnx-testdata/data", cases, sizeof cases / sizeof cases[0]);
}

/* make_conv_cases.py's ONNX cases (expected outputs computed by numpy) into a fresh directory
 * (test_mkdtemp); skips the test when python3 cannot import numpy and onnx */
static void make_conv_cases(char *dir, size_t len)
{
    test_mkdtemp(dir, len);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s '%s/make_conv_cases.py' '%s'",
             access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3", LLVM_TEST_SOURCE_DIR, dir);
    int rc = system(cmd), st = WIFEXITED(rc) ? WEXITSTATUS(rc) : 1;
    if (st == 77 || st == 127) {
        test_rmtree(dir);
        cr_skip_test("python3 with numpy and onnx is not available (apt-get install python3-numpy python3-onnx)");
    }
    cr_assert_eq(st, 0, "make_conv_cases.py failed with status %d", st);
}

/* pointwise_chain's 18 convolutions differ only in their weights and biases: each code
 * generator writes their body once (docs/tir.md, "Functions with the same code") and the 18
 * operator functions call it. llvm: one `__shared` symbol and 18 global operator functions in the
 * objects; c: one definition of a shared body in the C and 18 functions returning its call, and
 * the model still gives numpy's numbers (llvm's are checked with the other cases). Part of
 * conv_kernels_match_numpy. */
static void expect_shared_code(const char *cases, const char *target)
{
    char path[1024], cmd[2048];
    snprintf(path, sizeof path, "%s/pointwise_chain", cases);
    compile_case(target, path, "pc", 0);
    char dir[512];
    test_mkdtemp(dir, sizeof dir);
    test_put_file(dir, "a.tar", res.artifact, res.artifact_len);
    if (strcmp(target, "c") == 0)
        snprintf(cmd, sizeof cmd, "cd '%s' && tar xf a.tar && cat codegen/host/src/pc_lib*.c > all.c && "
                 "test $(grep -c '^int32_t pc_fused_nn_conv2d_[0-9]*__shared(.*)$' all.c) -eq 1 && "
                 "test $(grep -c 'return pc_fused_nn_conv2d_[0-9]*__shared(' all.c) -eq 18", dir);
    else
        snprintf(cmd, sizeof cmd, "cd '%s' && tar xf a.tar && nm codegen/host/lib/*.o > syms.txt && "
                 "test $(grep -c '__shared$' syms.txt) -eq 1 && test $(grep -c ' T pc_fused_nn_conv2d' syms.txt) -eq 18",
                 dir);
    cr_assert_eq(test_run(cmd), 0, "%s: not one shared body for 18 convolutions (%s)", target, dir);
    test_rmtree(dir);
    if (strcmp(target, "c") == 0) {
        json_t *t = test_target(reg, target);
        tth_case_result cres;
        tth_case_status st = tth_case_run(path, reg, t, &cres);
        json_decref(t);
        cr_expect_eq(st, TTH_CASE_PASS, "pointwise_chain with 'c': %s", cres.detail);
    }
}

/* Every target-aware convolution kernel (Winograd, in bands on this machine's cores, row-vectorized,
 * depthwise with the phase-split copy and row tiles, pixel-vectorized 1x1 with a pixel tail,
 * channel-blocked), the row-vectorized pooling, the pools of blocked channels and the matmul with K in blocks in a whole compile, run, against numpy: make_conv_cases.py
 * writes ONNX cases whose expected outputs numpy computed; each runs for the same three targets
 * as above. Skipped when python3 cannot import numpy and onnx. */
Test(llvm_pipeline, conv_kernels_match_numpy, .timeout = 600)
{
    char dir[512];
    make_conv_cases(dir, sizeof dir);
    static const char *const cases[] = {"winograd_residual", "stem_rows", "depthwise_chain", "depthwise_windows",
                                        "pointwise_tail", "pointwise_chain", "pools", "blocked_pools", "k_blocks",
                                        "input_blocks", "grouped", "grouped_windows"};
    expect_pass_everywhere(dir, cases, sizeof cases / sizeof cases[0]);
    expect_shared_code(dir, "llvm");
    expect_shared_code(dir, "c");
    test_rmtree(dir);
}

/* An llvm artifact for this machine keeps its weights in parameters/<model>.params only
 * (docs/artifact.md, "Constants bound at run time"): its object is smaller than the constants it
 * binds, a run before binding returns -200 and the status text says what to call, a truncated
 * or misaligned parameters file is refused with its status, and bound from its own file the
 * model runs (its numbers are checked by conv_kernels_match_numpy and the standalone builds).
 * Part of artifact_builds_without_tth. */
static void check_bound_weights(void)
{
    char cases[512], path[1024], cmd[4096];
    make_conv_cases(cases, sizeof cases);
    snprintf(path, sizeof path, "%s/winograd_residual", cases);
    compile_case("llvm", path, "cv", -1);
    const json_t *bc = NULL, *mod, *c;
    size_t i;
    json_array_foreach(json_object_get(res.metadata, "modules"), i, mod)
        if (!bc)
            bc = json_object_get(json_object_get(mod, "meta"), "bind_constants");
    cr_assert_not_null(bc, "the llvm module binds no constants");
    cr_assert_eq(json_integer_value(json_object_get(bc, "unbound_status")), -200);
    long long bound = 0;
    json_array_foreach(json_object_get(bc, "constants"), i, c)
        bound += json_integer_value(json_object_get(c, "bytes"));
    /* the Winograd layers' transformed weights (36/9 of their weights) are computed when the
     * model is bound, from the weights, which the file holds in their place (docs/artifact.md,
     * "Derived constants") */
    const json_t *derived = json_object_get(bc, "derived"), *dv;
    cr_assert_eq(json_array_size(derived), 2, "the two Winograd layers' weights are not derived at bind time: %zu "
                 "derived", json_array_size(derived));
    size_t j;
    json_array_foreach(derived, j, dv) {
        cr_assert_str_eq(json_string_value(json_object_get(dv, "transform")), "winograd_f4x4_3x3");
        const char *from = json_string_value(json_object_get(dv, "from"));
        long long from_bytes = 0;
        json_array_foreach(json_object_get(bc, "constants"), i, c)
            if (strcmp(json_string_value(json_object_get(c, "parameter")), from) == 0)
                from_bytes = json_integer_value(json_object_get(c, "bytes"));
        cr_assert_eq(json_integer_value(json_object_get(dv, "bytes")), 4 * from_bytes,
                     "derived '%s' is not 36/9 of its source '%s' bound from the file (%lld bytes)",
                     json_string_value(json_object_get(dv, "parameter")), from, from_bytes);
    }

    char dir[512];
    test_mkdtemp(dir, sizeof dir);
    test_put_file(dir, "a.tar", res.artifact, res.artifact_len);
    snprintf(cmd, sizeof cmd, "cd '%s' && tar xf a.tar && head -c 200 parameters/cv.params > short.params && "
             "test $(stat -c %%s codegen/host/lib/cv_llvm.o) -lt %lld && "
             "! tar tf a.tar | grep -q 'core[.]o$\\|_link[.]o$' && ! grep -q link_replaces metadata.json && "
             "test $(stat -c %%s parameters/cv.params) -lt %lld", dir, bound, bound + 4096);
    cr_assert_eq(test_run(cmd), 0, "the object file is not smaller than the %lld bytes of constants it binds, the "
                 "artifact holds the host library's link objects, or "
                 "the parameters file holds more than them (a derived constant?)", bound);
    static const char main_c[] =
        "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include \"tth_cv.h\"\n"
        "const char *tth_cv_llvm_status_text(int32_t status);\n"
        "static _Alignas(64) unsigned char ws[TTH_CV_WORKSPACE_SIZE + 1];\n"
        "static _Alignas(64) unsigned char params[1 << 22];\n"
        "static float x[1 << 16], y[1 << 16];\n"
        "static size_t load(const char *p) { FILE *f = fopen(p, \"rb\"); size_t n = f ? fread(params, 1, sizeof params, f) : 0;\n"
        "    if (f)\n        fclose(f);\n    return n;\n}\n"
        "int main(void) {\n"
        "    struct tth_cv_inputs in = {x}; struct tth_cv_outputs out = {y};\n"
        "    int32_t rc = tth_cv_run(&in, &out, ws);\n"
        "    const char *why = tth_cv_llvm_status_text(rc);\n"
        "    if (rc != -200 || !why || !strstr(why, \"tth_<model>_bind_parameters\")) return 10;\n"
        "    if (tth_cv_bind_parameters(params, load(\"short.params\")) != -204) return 11;\n"
        "    if (tth_cv_run(&in, &out, ws) != -200) return 12;\n"
        "    size_t n = load(\"parameters/cv.params\");\n"
        "    memmove(params + 4, params, n);\n"
        "    if (tth_cv_bind_parameters(params + 4, n) != -203) return 13;\n"
        "    memmove(params, params + 4, n);\n"
        "    if (tth_cv_bind_parameters(params, n) != 0) return 14;\n"
        "    return tth_cv_run(&in, &out, ws) == 0 ? 0 : 15;\n}\n";
    test_put_file(dir, "main.c", main_c, strlen(main_c));
    snprintf(cmd, sizeof cmd, "cd '%s' && cc -std=c11 -Wall -Werror -Iinclude main.c codegen/host/src/*.c "
             "codegen/host/lib/*.o -lm -pthread -o main > cc.log 2>&1 && ./main", dir);
    cr_assert_eq(test_run(cmd), 0, "build or checks failed in %s (cc.log; the exit status names the check)", dir);
    /* the same checks against the host library tth built, whose binding is the core linked with
     * the tables the plugin emitted in place of cv_bind.c (docs/artifact.md, "The host library") */
    snprintf(cmd, sizeof cmd, "cd '%s' && nm -D lib/cv.so | grep -q ' T tth_cv_llvm_bind_parameters$' && "
             "! nm lib/cv.so | grep -q ' T tth__bind' && "
             "cc -std=c11 -Wall -Werror -Iinclude main.c lib/cv.so -Wl,-rpath,\"$PWD/lib\" -o main_so > cc_so.log 2>&1 "
             "&& ./main_so", dir);
    cr_assert_eq(test_run(cmd), 0, "the host library's binding failed in %s (cc_so.log; the exit status names the "
                 "check)", dir);
    test_rmtree(dir);
    test_rmtree(cases);
}

/* An llvm artifact builds and runs without tth, as its README says and through its
 * CMakeLists.txt (tests/support/standalone_build.c): a node case whose code is one object, and a
 * numpy case with parallel loops, whose thread pool is a C source that needs -pthread; and the
 * binding of its weights (check_bound_weights). */
static void expect_standalone_build(const char *target, const char *case_dir, const char *name)
{
    compile_case(target, case_dir, name, 0);
    standalone_build_check(res.artifact, res.artifact_len, res.metadata, case_dir, name);
}

Test(llvm_pipeline, artifact_builds_without_tth, .timeout = 600)
{
    expect_standalone_build("llvm", NODE "test_gemm_default_vector_bias", "gemm");
    char dir[512], path[1024];
    make_conv_cases(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/winograd_residual", dir);
    expect_standalone_build("llvm -num-cores=2", path, "wino");
    test_rmtree(dir);
    check_bound_weights();
}
