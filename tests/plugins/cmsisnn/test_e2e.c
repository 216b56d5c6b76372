/* End to end, in-process (tth_compile): a small int8 QDQ model (qdq_model.py, built with
 * python3-onnx) and the ONNX node test test_qlinearconv (uint8), compiled for
 * `cmsis-nn,c -mcpu=cortex-m55` and `ethos-n,cmsis-nn,c -mcpu=cortex-m55`; the metadata's
 * partition says which kind took each operator, and the artifact holds each kind's output. The
 * generated C is compiled for Cortex-M55 against the test-only CMSIS-NN declarations; an
 * `ethos-n,c` artifact runs on this host (its NPU region on tth's functional model of the
 * Ethos-N78) and gives the outputs of the same model compiled for `c`. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"
#include "model_fixture.h"
#include "compile.h"
#include "tth/target.h"
#include "tthrt.h"

static uint8_t *qdq_model(size_t *len)
{
    char dir[256], cmd[1024], path[300];
    test_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/qdq.onnx", dir);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/plugins/cmsisnn/qdq_model.py %s", getenv("TTH_SOURCE_ROOT"), path);
    cr_assert_eq(test_run(cmd), 0, "%s", cmd);
    uint8_t *b = test_read_file(path, len);
    cr_assert(b);
    test_rmtree(dir);
    return b;
}

/* The world of every test: the build tree's plugins, a model, the result of its last compile. */
static tth_registry *reg;
static uint8_t *model;
static size_t model_len;
static tth_compile_result res;

/* Fixture: the plugins and the QDQ model of qdq_model.py. */
static void with_qdq_model(void)
{
    reg = test_registry();
    model = qdq_model(&model_len);
}

/* Fixture of one test, after the suite's: the ONNX node test test_qlinearconv instead. */
static void with_qlinearconv(void)
{
    static const char path[] = "/usr/share/libonnx-testdata/data/node/test_qlinearconv/model.onnx";
    free(model);
    model = test_read_file(path, &model_len);
    cr_assert(model, "%s", path);
}

static void teardown(void)
{
    tth_compile_result_free(&res);
    free(model);
    tth_registry_free(reg);
}

TestSuite(npu_e2e, .timeout = 300, .init = with_qdq_model, .fini = teardown);

/* Compile the model for `tgt` into res (asserts it compiled). build_shared: the option, or -1 for
 * the pipeline's default (a host .so only when the host kind runs here; a Cortex-M does not). */
static void compile_for(const char *tgt, int build_shared)
{
    tth_compile_result_free(&res);
    json_t *opts = build_shared < 0 ? NULL : json_pack("{s:b}", "build_shared", build_shared);
    tth_diag d;
    int rc = test_compile_text(reg, tgt, model, model_len, "m", opts, NULL, &res, &d);
    json_decref(opts);
    cr_assert_eq(rc, 0, "%s: %s (%s)", tgt, d.message, d.location);
}

/* The kind that took op `op` (the first such op of the partition) in the last compile. */
static const char *kind_of(const char *op)
{
    return test_partition_kind(res.metadata, op);
}

/* The partition's fallback kind in the last compile. */
static const char *fallback(void)
{
    return json_string_value(json_object_get(json_object_get(res.metadata, "partition"), "fallback"));
}

/* The bytes of the last artifact's tar member whose name ends with `suffix` (ustar: name at 0,
 * size at 124), NUL-terminated, its size in *len (when not NULL); or NULL. */
static char *tar_member(const char *suffix, size_t *len)
{
    size_t n = strlen(suffix);
    for (size_t at = 0; at + 512 <= res.artifact_len;) {
        const char *h = (const char *)res.artifact + at;
        if (!h[0])
            break;
        size_t size = strtoul(h + 124, NULL, 8);
        char name[101];
        memcpy(name, h, 100);
        name[100] = 0;
        size_t nl = strlen(name);
        if (nl >= n && strcmp(name + nl - n, suffix) == 0) {
            char *b = malloc(size + 1);
            memcpy(b, h + 512, size);
            b[size] = 0;
            if (len)
                *len = size;
            return b;
        }
        at += 512 + (size + 511) / 512 * 512;
    }
    return NULL;
}

/* Compile every C source of the last artifact (the host's and the cmsis-nn kind's) for Cortex-M55. */
static void compile_c_for_m55(void)
{
    static const char *const files[] = {"m_lib0.c", "cmsisnn_lib0.c"};
    char dir[256], cmd[2048];
    test_mkdtemp(dir, sizeof dir);
    for (size_t i = 0; i < 2; i++) {
        size_t n;
        char *src = tar_member(files[i], &n);
        cr_assert(src, "no %s in the artifact", files[i]);
        test_put_file(dir, files[i], src, n);
        free(src);
        snprintf(cmd, sizeof cmd, "arm-none-eabi-gcc -std=c99 -mthumb -mcpu=cortex-m55 -O2 -Wall -Wextra -Werror "
                 "-I%s/plugins/cmsisnn/reference -c %s/%s -o %s/%s.o", getenv("TTH_SOURCE_ROOT"), dir, files[i], dir,
                 files[i]);
        cr_assert_eq(test_run(cmd), 0, "%s", cmd);
    }
    if (getenv("TTH_KEEP_NPU_E2E"))
        fprintf(stderr, "kept %s\n", dir);
    else
        test_rmtree(dir);
}

Test(npu_e2e, qdq_model_on_cmsis_nn)
{
    /* with the Cortex-M triple the pipeline knows not to build a host .so */
    compile_for("cmsis-nn,c -mtriple=thumbv8.1m.main-none-eabi -mcpu=cortex-m55", -1);
    cr_assert_str_eq(kind_of("qnn.conv2d"), "cmsis-nn");
    cr_assert_str_eq(kind_of("qnn.requantize"), "cmsis-nn");
    cr_assert_str_eq(kind_of("nn.softmax"), "cmsis-nn");
    char *c = tar_member("cmsisnn_lib0.c", NULL);
    cr_assert(c, "no cmsisnn_lib0.c in the artifact");
    cr_assert(strstr(c, "arm_convolve_wrapper_s8("));
    cr_assert(strstr(c, "arm_softmax_s8("));
    free(c);
    compile_c_for_m55();
}

/* A kind that needs a host, given alone, is compiled as the composite of it and its host
 * (docs/targets.md): cmsis-nn on a Cortex-M55 with c for it, ethos-n with llvm. */
Test(npu_e2e, a_kind_alone_shares_the_model_with_its_host)
{
    compile_for("cmsis-nn -mcpu=cortex-m55", -1);
    cr_assert_str_eq(kind_of("qnn.conv2d"), "cmsis-nn");
    cr_assert_str_eq(fallback(), "c");
    compile_c_for_m55();
    compile_for("ethos-n", -1);
    cr_assert_str_eq(kind_of("qnn.conv2d"), "ethos-n");
    cr_assert_str_eq(fallback(), "llvm");
}

Test(npu_e2e, qdq_model_on_ethos_n_then_cmsis_nn)
{
    compile_for("ethos-n,cmsis-nn,c -mcpu=cortex-m55", 0);
    /* the NPU takes the convolution; it has no softmax, which CMSIS-NN takes */
    cr_assert_str_eq(kind_of("qnn.conv2d"), "ethos-n");
    cr_assert_str_eq(kind_of("nn.softmax"), "cmsis-nn");
    char *blob = tar_member(".ethosn", NULL);
    cr_assert(blob, "no Ethos-N network in the artifact");
    cr_assert_eq(memcmp(blob, "TTHEN78", 8), 0);
    free(blob);
    compile_c_for_m55();
}

/* Refused by `kind` with a reason containing `text`, in the last compile. */
static int refused(const char *kind, const char *text)
{
    const json_t *refs = json_object_get(json_object_get(res.metadata, "partition"), "refusals");
    size_t i;
    const json_t *o;
    json_array_foreach(refs, i, o)
        if (!strcmp(json_string_value(json_object_get(o, "kind")), kind) &&
            strstr(json_string_value(json_object_get(o, "reason")), text))
            return 1;
    return 0;
}

Test(npu_e2e, onnx_qlinearconv_refused_with_reasons, .init = with_qlinearconv)
{
    /* the node test's weights are graph inputs and its data uint8: both kinds refuse, saying why */
    compile_for("ethos-n,cmsis-nn,c -mcpu=cortex-m55", 0);
    cr_assert_str_eq(kind_of("qnn.conv2d"), "c");
    cr_assert(refused("cmsis-nn", "qnn.conv2d on uint8[1, 1, 7, 7]: CMSIS-NN convolves int8"));
    cr_assert(refused("ethos-n", "qnn.conv2d with non-constant quantization parameters: the Ethos-N78 "
                                 "needs them at compile time"));
}

/* Run the last artifact on this host with input x (float32 [1, 8, 6, 6], values from a formula);
 * the output y's values into out (144 floats). */
static void run_qdq(float *out)
{
    tthrt_model *m = NULL;
    tth_diag d;
    tth_diag_clear(&d);
    cr_assert_eq(tthrt_model_open_memory(res.artifact, res.artifact_len, &m, &d), 0, "%s", d.message);
    tthrt_array a = {0};
    const int64_t shape[4] = {1, 8, 6, 6};
    cr_assert_eq(tthrt_array_init(&a, TTH_F32, 4, shape, &d), 0);
    for (int i = 0; i < 288; i++)
        ((float *)a.data)[i] = (float)((i * 37) % 113) / 113.0f * 12.0f - 6.0f;
    cr_assert_eq(tthrt_model_bind(m, "x", &a, &d), 0, "%s", d.message);
    tthrt_array_clear(&a);
    tth_diag_clear(&d);
    cr_assert_eq(tthrt_model_run(m, 1, NULL, &d), 0, "%s", d.message);
    tthrt_array y;
    cr_assert_eq(tthrt_model_output_array(m, 0, &y, &d), 0);
    cr_assert_eq(y.nbytes, 144 * sizeof(float));
    memcpy(out, y.data, y.nbytes);
    tthrt_model_close(m);
}

Test(npu_e2e, ethos_n_region_runs_on_the_functional_model)
{
    /* ethos-n,c on this machine: the host .so builds with the Ethos-N entry and tth's functional
     * model of the NPU; the runtime binds the region's constants from the parameters file and the
     * outputs are those of the same model compiled for c alone, within one quantization step of
     * the softmax (1/256) */
    compile_for("ethos-n,c", 1);
    cr_assert_str_eq(kind_of("qnn.conv2d"), "ethos-n");
    cr_assert_str_eq(kind_of("qnn.requantize"), "ethos-n");
    const json_t *bc = NULL;
    size_t i;
    const json_t *mod;
    json_array_foreach(json_object_get(res.metadata, "modules"), i, mod)
        if (!strcmp(json_string_value(json_object_get(mod, "kind")), "ethos-n"))
            bc = json_object_get(json_object_get(mod, "meta"), "bind_constants");
    cr_assert(bc, "the ethos-n module does not say which constants it binds");
    cr_assert_eq(json_array_size(json_object_get(bc, "constants")), 2, "weights and bias");
    float npu[144], ref[144];
    run_qdq(npu);
    compile_for("c", 1);
    run_qdq(ref);
    int differ = 0;
    for (int k = 0; k < 144; k++) {
        cr_assert_leq(fabsf(npu[k] - ref[k]), 1.0f / 256 + 1e-6f, "y[%d]: ethos-n,c %g, c %g", k, npu[k], ref[k]);
        differ += npu[k] != ref[k];
    }
    cr_assert_leq(differ, 3, "%d of 144 outputs differ by a step", differ);
}

/* A cmsis-nn artifact says it needs CMSIS-NN (metadata, README) and its CMakeLists.txt finds the
 * header under CMSIS_NN_ROOT: without it, configuring fails with a message naming the header and
 * the variable; with a tree holding Include/arm_nnfunctions.h (here the test header), the
 * library builds for Cortex-M55 with arm-none-eabi. Skipped without cmake or arm-none-eabi-gcc. */
Test(npu_e2e, cmsis_nn_artifact_needs_cmsis_nn_root)
{
    compile_for("cmsis-nn,c -mtriple=thumbv8.1m.main-none-eabi -mcpu=cortex-m55", -1);
    const json_t *req = json_array_get(json_object_get(res.metadata, "requires"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(req, "library")), "CMSIS-NN");
    cr_assert_str_eq(json_string_value(json_object_get(req, "root_variable")), "CMSIS_NN_ROOT");
    char *readme = tar_member("README.txt", NULL);
    cr_assert(readme && strstr(readme, "Needs CMSIS-NN") && strstr(readme, "-I$CMSIS_NN_ROOT/Include"),
              "README.txt does not say how to point the build at CMSIS-NN:\n%s", readme ? readme : "");
    free(readme);
    if (!test_have("cmake") || !test_have("arm-none-eabi-gcc"))
        cr_skip_test("cmake or arm-none-eabi-gcc is not installed (scripts/setup installs both)");
    char dir[256], cmd[2048];
    test_mkdtemp(dir, sizeof dir);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/art' '%s/cmsis/Include' && cp '%s/plugins/cmsisnn/reference/arm_nnfunctions.h' "
             "'%s/cmsis/Include/'", dir, dir, getenv("TTH_SOURCE_ROOT"), dir);
    cr_assert_eq(test_run(cmd), 0);
    test_put_file(dir, "art/m.tar", res.artifact, res.artifact_len);
    static const char toolchain[] = "set(CMAKE_SYSTEM_NAME Generic)\nset(CMAKE_SYSTEM_PROCESSOR arm)\n"
                                    "set(CMAKE_C_COMPILER arm-none-eabi-gcc)\n"
                                    "set(CMAKE_C_FLAGS_INIT \"-mthumb -mcpu=cortex-m55\")\n"
                                    "set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)\n";
    test_put_file(dir, "m55.cmake", toolchain, strlen(toolchain));
    snprintf(cmd, sizeof cmd, "cd '%s/art' && tar xf m.tar && cmake -S . -B ../b1 -DCMAKE_TOOLCHAIN_FILE=../m55.cmake "
             "> ../b1.log 2>&1", dir);
    cr_assert_neq(test_run(cmd), 0, "configuring without CMSIS_NN_ROOT succeeded");
    /* cmake wraps the message over lines */
    snprintf(cmd, sizeof cmd, "tr -s ' \\n' ' ' < '%s/b1.log' > '%s/b1.txt' && "
             "grep -q 'arm_nnfunctions.h was not found under CMSIS_NN_ROOT' '%s/b1.txt' && "
             "grep -q 'Set CMSIS_NN_ROOT to CMSIS-NN' '%s/b1.txt'", dir, dir, dir, dir);
    cr_assert_eq(test_run(cmd), 0, "the configure error does not name the header and the variable (%s/b1.log)", dir);
    snprintf(cmd, sizeof cmd, "cd '%s/art' && cmake -S . -B ../b2 -DCMAKE_TOOLCHAIN_FILE=../m55.cmake "
             "-DCMSIS_NN_ROOT='%s/cmsis' > ../b2.log 2>&1 && cmake --build ../b2 >> ../b2.log 2>&1 && "
             "test -f ../b2/libtth_m.a", dir, dir);
    cr_assert_eq(test_run(cmd), 0, "the CMake build with CMSIS_NN_ROOT failed (%s/b2.log)", dir);
    test_rmtree(dir);
}
