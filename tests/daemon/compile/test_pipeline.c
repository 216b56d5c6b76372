/* The whole compile flow (daemon/compile) in-process: ONNX node models from libonnx-testdata
 * compiled for target `c`, run through the runtime and compared with the expected outputs
 * (float32: |got - want| <= 1e-4 + 1e-4 * |want|; integers and bool exactly); determinism;
 * the artifact built with only a C compiler; IR dumps; errors that name their stage. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "code_store.h"
#include "compile.h"
#include "compile_internal.h"
#include "helpers.h"
#include "model_fixture.h"
#include "onnx_case.h"
#include "standalone_build.h"
#include "tth/target.h"
#include "tthrt.h"
#include "tth_config.h"
#include "../frontend/onnx_build.h"

#define NODE "/usr/share/libonnx-testdata/data/node/"

/* every test has test_reg and test_tc (target `c`) */
TestSuite(pipeline, .init = test_fixture_c, .fini = test_fixture_fini);

static void expect_pass(const char *test)
{
    tth_case_result res;
    cr_assert_eq(tth_case_run_node(test, test_reg, test_tc, TTH_CASE_CHECK_C_WARNINGS, &res), TTH_CASE_PASS, "%s: %s",
                 test, res.detail);
}

Test(pipeline, node_add) { expect_pass("test_add"); }
Test(pipeline, node_add_bcast) { expect_pass("test_add_bcast"); }
Test(pipeline, node_relu) { expect_pass("test_relu"); }
Test(pipeline, node_sigmoid) { expect_pass("test_sigmoid"); }
Test(pipeline, node_conv_with_strides_padding) { expect_pass("test_conv_with_strides_padding"); }
Test(pipeline, node_matmul_2d) { expect_pass("test_matmul_2d"); }
Test(pipeline, node_gemm_default_vector_bias) { expect_pass("test_gemm_default_vector_bias"); }
Test(pipeline, node_maxpool_2d_default) { expect_pass("test_maxpool_2d_default"); }
Test(pipeline, node_softmax_example) { expect_pass("test_softmax_example"); }
Test(pipeline, node_argmax_int64_exact) { expect_pass("test_argmax_default_axis_example"); }
Test(pipeline, node_split_tuple_outputs) { expect_pass("test_split_equal_parts_1d"); }
Test(pipeline, node_concat) { expect_pass("test_concat_2d_axis_1"); }

/* Compile the model file at path as name for `c` with opts. */
static int compile_file(const char *path, const char *name, json_t *opts, tth_compile_result *res, tth_diag *d)
{
    return test_compile_file(test_reg, test_tc, path, name, opts, res, d);
}

Test(pipeline, deterministic_bytes)
{
    tth_compile_result a, b;
    tth_diag d;
    const char *m = NODE "test_conv_with_strides_padding/model.onnx";
    cr_assert_eq(compile_file(m, "conv", NULL, &a, &d), 0, "%s", d.message);
    cr_assert_eq(compile_file(m, "conv", NULL, &b, &d), 0, "%s", d.message);
    cr_assert_eq(a.artifact_len, b.artifact_len);
    cr_assert_eq(memcmp(a.artifact, b.artifact, a.artifact_len), 0, "two compiles differ");
    /* and the metadata says what a runtime needs */
    const json_t *md = a.metadata;
    cr_assert_str_eq(json_string_value(json_object_get(md, "model")), "conv");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(md, "executor"), "entry")),
                     "tth_conv_run");
    cr_assert_eq(json_array_size(json_object_get(md, "inputs")), 2); /* x and W */
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(md, "inputs"), 0),
                                                       "dtype")), "float32");
    const json_t *mem = json_object_get(md, "memory");
    cr_assert(json_is_integer(json_object_get(mem, "workspace_bytes")));
    const json_t *plan = json_object_get(mem, "plan");
    cr_assert_geq(json_integer_value(json_object_get(plan, "workspace_bytes")),
                  json_integer_value(json_object_get(plan, "lower_bound_bytes")));
    cr_assert_leq(json_integer_value(json_object_get(plan, "workspace_bytes")),
                  json_integer_value(json_object_get(plan, "total_bytes")));
    tth_compile_result_free(&a);
    tth_compile_result_free(&b);
}

/* The artifact built and run with a C compiler only, as its README says and through its
 * CMakeLists.txt (standalone_build.c); its layout; no .so when build_shared is false. */
Test(pipeline, c_build_without_tth)
{
    tth_compile_result res;
    tth_diag d;
    json_t *opts = json_pack("{s:b}", "build_shared", 0);
    cr_assert_eq(compile_file(NODE "test_gemm_default_vector_bias/model.onnx", "gemm", opts,
                              &res, &d), 0, "%s", d.message);
    cr_assert(json_is_null(json_object_get(json_object_get(res.metadata, "files"), "shared_library")),
              "build_shared=false must not build a .so");
    char dir[512], path[1024], cmd[4096];
    test_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/gemm.tar", dir);
    cr_assert_eq(test_write_file(path, res.artifact, res.artifact_len), 0);
    snprintf(cmd, sizeof cmd, "cd '%s' && tar xf gemm.tar && test -f include/tth_gemm.h && "
             "test -f README.txt && test -f CMakeLists.txt && test -f parameters/gemm.params && "
             "test -f src/gemm.relay && test -f metadata.json && test ! -e lib", dir);
    cr_assert_eq(test_run(cmd), 0, "artifact layout");
    test_rmtree(dir);
    standalone_build_check(res.artifact, res.artifact_len, res.metadata, NODE "test_gemm_default_vector_bias",
                           "gemm");
    json_decref(opts);
    tth_compile_result_free(&res);
}

Test(pipeline, dumps_every_stage)
{
    tth_compile_result res;
    tth_diag d;
    json_t *opts = json_pack("{s:s, s:b}", "dump_ir", "all", "build_shared", 0);
    cr_assert_eq(compile_file(NODE "test_relu/model.onnx", "relu", opts, &res, &d), 0,
                 "%s", d.message);
    static const char *stages[] = {"import", "optimize", "lower", "aot", "memplan", "codegen"};
    for (size_t i = 0; i < 6; i++) {
        const char *s = json_string_value(json_object_get(res.dumps, stages[i]));
        cr_assert_not_null(s, "no dump for stage %s", stages[i]);
        cr_assert_gt(strlen(s), 10, "dump for %s is empty", stages[i]);
    }
    cr_assert(strstr(json_string_value(json_object_get(res.dumps, "codegen")), "tth_relu_run"));
    tth_compile_result_free(&res);
    json_decref(opts);
    /* one stage only */
    opts = json_pack("{s:s, s:b}", "dump_ir", "aot", "build_shared", 0);
    cr_assert_eq(compile_file(NODE "test_relu/model.onnx", "relu", opts, &res, &d), 0);
    cr_assert_eq(json_object_size(res.dumps), 1);
    cr_assert_not_null(json_object_get(res.dumps, "aot"));
    tth_compile_result_free(&res);
    json_decref(opts);
}

Test(pipeline, an_unknown_dump_stage_is_refused_with_the_nearest_name)
{
    tth_compile_result res;
    tth_diag d;
    json_t *opts = json_pack("{s:s, s:b}", "dump_ir", "lowr", "build_shared", 0);
    cr_assert_lt(compile_file(NODE "test_relu/model.onnx", "relu", opts, &res, &d), 0,
                 "a misspelled stage compiled silently");
    cr_assert_eq(d.code, TTH_EINVAL);
    cr_assert(strstr(d.message, "'lowr'"), "the message quotes the value: %s", d.message);
    cr_assert(strstr(d.hint, "did you mean 'lower'"), "the hint names the nearest stage: %s", d.hint);
    cr_assert(strstr(d.hint, "memplan"), "the hint lists the stages: %s", d.hint);
    cr_assert_null(res.dumps);
    tth_compile_result_free(&res);
    json_decref(opts);
    /* not a string, and nothing near: every stage is listed */
    opts = json_pack("{s:i, s:b}", "dump_ir", 3, "build_shared", 0);
    cr_assert_lt(compile_file(NODE "test_relu/model.onnx", "relu", opts, &res, &d), 0);
    cr_assert(strstr(d.hint, "give one of: import,"), "%s", d.hint);
    tth_compile_result_free(&res);
    json_decref(opts);
    opts = json_pack("{s:s, s:b}", "dump_ir", "partition", "build_shared", 0);
    cr_assert_eq(compile_file(NODE "test_relu/model.onnx", "relu", opts, &res, &d), 0, "%s", d.message);
    tth_compile_result_free(&res);
    json_decref(opts);
}

Test(pipeline, errors_name_their_stage)
{
    tth_compile_result res;
    tth_diag d;
    /* a composite target whose last kind cannot host (tests/daemon/compile covers composites) */
    json_t *comp = json_pack("{s:s, s:[{s:s}, {s:s}]}", "kind", "composite", "targets", "kind",
                             "c", "kind", "cmsis-nn");
    cr_assert_lt(test_compile_file(test_reg, comp, NODE "test_relu/model.onnx", "relu", NULL, &res, &d), 0);
    cr_assert(strncmp(d.message, "target", 6) == 0, "the message names the stage: %s", d.message);
    json_decref(comp);
    /* a model name that is not a C identifier */
    cr_assert_eq(compile_file(NODE "test_relu/model.onnx", "9 lives", NULL, &res, &d), TTH_EINVAL);
    cr_assert(strstr(d.message, "C identifier"), "%s", d.message);
    /* not a model */
    cr_assert_lt(test_compile(test_reg, test_tc, (const uint8_t *)"hello", 5, "x", NULL, NULL, &res, &d), 0);
    cr_assert(strncmp(d.message, "import", 6) == 0, "the message names the stage: %s", d.message);
}

Test(pipeline, runtime_binding_errors_are_clear)
{
    tth_compile_result res;
    tth_diag d;
    cr_assert_eq(compile_file(NODE "test_add/model.onnx", "add", NULL, &res, &d), 0, "%s",
                 d.message);
    tthrt_model *m;
    cr_assert_eq(tthrt_model_open_memory(res.artifact, res.artifact_len, &m, &d), 0, "%s", d.message);
    cr_assert_eq(tthrt_model_input_count(m), 2);
    tthrt_array a;
    int64_t shape[2] = {3, 4};
    cr_assert_eq(tthrt_array_init(&a, TTH_F32, 2, shape, &d), 0);
    cr_assert_eq(tthrt_model_bind(m, "nope", &a, &d), TTH_EUNKNOWN);
    cr_assert(strstr(d.message, "'nope'") && strstr(d.hint, "'x'"), "%s / %s", d.message, d.hint);
    cr_assert_eq(tthrt_model_bind(m, "x", &a, &d), TTH_ETYPE);
    cr_assert(strstr(d.message, "float32[3, 4, 5]") && strstr(d.message, "float32[3, 4]"), "%s",
              d.message);
    cr_assert_eq(tthrt_model_run(m, 1, NULL, &d), TTH_EINVAL, "running with unbound inputs");
    cr_assert(strstr(d.message, "not bound"), "%s", d.message);
    tthrt_array_clear(&a);
    /* bind both, run with repeat, write outputs */
    cr_assert_eq(tthrt_model_bind_file(m, "x", NODE "test_add/test_data_set_0/input_0.pb", &d), 0,
                 "%s", d.message);
    cr_assert_eq(tthrt_model_bind_file(m, "y", NODE "test_add/test_data_set_0/input_1.pb", &d), 0);
    tthrt_timing tm;
    cr_assert_eq(tthrt_model_run(m, 5, &tm, &d), 0, "%s", d.message);
    cr_assert_eq(tm.runs, 5);
    cr_assert_leq(tm.min_ms, tm.median_ms);
    char dir[512], path[1024];
    test_mkdtemp(dir, sizeof dir);
    json_t *paths;
    cr_assert_eq(tthrt_model_write_outputs(m, dir, &paths, &d), 0, "%s", d.message);
    cr_assert_eq(json_array_size(paths), 1);
    snprintf(path, sizeof path, "%s/sum.npy", dir);
    tthrt_array out, want;
    cr_assert_eq(tthrt_npy_read(path, &out, &d), 0, "%s", d.message);
    cr_assert_eq(tthrt_pb_read(NODE "test_add/test_data_set_0/output_0.pb", &want, &d), 0);
    cr_assert_eq(tthrt_array_compare(&out, &want, 1e-4, 1e-4, NULL, 0), 1);
    tthrt_array_clear(&out);
    tthrt_array_clear(&want);
    json_decref(paths);
    test_rmtree(dir);
    tthrt_model_close(m);
    tth_compile_result_free(&res);
}

static uint32_t rd32(const unsigned char *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const unsigned char *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* parameters/<model>.params: the documented format, every constant, sizes that add up */
Test(pipeline, parameters_file)
{
    tth_compile_result res;
    tth_diag d;
    json_t *opts = json_pack("{s:b}", "build_shared", 0);
    cr_assert_eq(compile_file("/usr/share/libonnx-testdata/data/pytorch-converted/test_Conv2d/model.onnx",
                              "conv2d", opts, &res, &d), 0, "%s", d.message);
    char dir[512], path[1024], cmd[1200];
    test_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/a.tar", dir);
    cr_assert_eq(test_write_file(path, res.artifact, res.artifact_len), 0);
    snprintf(cmd, sizeof cmd, "cd '%s' && tar xf a.tar", dir);
    cr_assert_eq(test_run(cmd), 0);
    snprintf(path, sizeof path, "%s/parameters/conv2d.params", dir);
    size_t len;
    unsigned char *p = test_slurp(path, &len);
    cr_assert_geq(len, 16);
    cr_assert_eq(memcmp(p, "TTHPARAM", 8), 0);
    cr_assert_eq(rd32(p + 8), 1);
    uint32_t count = rd32(p + 12);
    cr_assert_geq(count, 1, "test_Conv2d has a weight initializer");
    size_t off = 16, sum = 0;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t nl = rd32(p + off);
        off += 4 + nl;
        uint32_t dtype = rd32(p + off), rank = rd32(p + off + 4);
        off += 8;
        cr_assert(dtype >= 1 && dtype <= 12);
        cr_assert_leq(rank, 8);
        uint64_t numel = 1;
        for (uint32_t k = 0; k < rank; k++, off += 8)
            numel *= rd64(p + off);
        uint64_t nb = rd64(p + off);
        off += 8;
        off = (off + 63) / 64 * 64;
        cr_assert_eq(nb, numel * tth_dtype_size((tth_dtype)dtype));
        off += nb;
        sum += nb;
        cr_assert_leq(off, len);
    }
    cr_assert_eq(off, len, "trailing bytes in the parameters file");
    cr_assert_eq((json_int_t)sum, json_integer_value(json_object_get(json_object_get(res.metadata, "memory"),
                                                                     "constants_bytes")));
    free(p);
    test_rmtree(dir);
    json_decref(opts);
    tth_compile_result_free(&res);
}

/* tthd writes the tar itself (package.c): GNU tar extracts it, a path longer than ustar's name
 * field (a long model name) lands under its full name through the prefix field, the executable
 * bit of the library survives, and the files hold what the compile produced. */
Test(pipeline, tar_read_by_gnu_tar_with_long_paths)
{
    tth_compile_result res;
    tth_diag d;
    char name[96];
    memset(name, 'm', 90);
    name[90] = 0;
    cr_assert_eq(compile_file(NODE "test_relu/model.onnx", name, NULL, &res, &d), 0, "%s", d.message);
    char dir[512], path[1024], cmd[1200];
    test_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/a.tar", dir);
    cr_assert_eq(test_write_file(path, res.artifact, res.artifact_len), 0);
    cr_assert_eq(res.artifact_len % 512, 0, "a tar is whole 512-byte blocks");
    snprintf(cmd, sizeof cmd, "cd '%s' && tar xf a.tar", dir);
    cr_assert_eq(test_run(cmd), 0, "GNU tar refused the artifact");
    const json_t *sources = json_object_get(json_object_get(res.metadata, "files"), "sources");
    cr_assert_gt(json_array_size(sources), 0);
    for (size_t i = 0; i < json_array_size(sources); i++) {
        const char *src = json_string_value(json_array_get(sources, i));
        snprintf(path, sizeof path, "%s/%s", dir, src);
        cr_assert_gt(strlen(src), 100, "'%s' is short enough for the name field alone", src);
        size_t len;
        unsigned char *p = test_slurp(path, &len);
        cr_assert_not_null(p, "%s is not in the extracted tree", src);
        cr_assert_gt(len, 0);
        free(p);
    }
    snprintf(cmd, sizeof cmd, "test -x '%s/lib/%s.so' && test ! -x '%s/metadata.json'", dir, name, dir);
    cr_assert_eq(test_run(cmd), 0, "modes: the library is executable, the rest not");
    snprintf(path, sizeof path, "%s/metadata.json", dir);
    size_t len;
    unsigned char *p = test_slurp(path, &len);
    json_t *md = json_loadb((const char *)p, len, 0, NULL);
    cr_assert(json_equal(md, res.metadata), "metadata.json differs from the compile's metadata");
    json_decref(md);
    free(p);
    test_rmtree(dir);
    tth_compile_result_free(&res);
}

/* an artifact built without the host library cannot run, and opening it says so */
Test(pipeline, runtime_refuses_artifact_without_library)
{
    tth_compile_result res;
    tth_diag d;
    json_t *opts = json_pack("{s:b}", "build_shared", 0);
    cr_assert_eq(compile_file(NODE "test_relu/model.onnx", "relu", opts, &res, &d), 0, "%s",
                 d.message);
    tthrt_model *m = NULL;
    cr_assert_eq(tthrt_model_open_memory(res.artifact, res.artifact_len, &m, &d), TTH_EUNSUPPORTED);
    cr_assert_null(m);
    cr_assert(strstr(d.message, "no host shared library"), "%s", d.message);
    cr_assert(strstr(d.hint, "build_shared"), "%s", d.hint);
    /* a corrupt tar */
    cr_assert_lt(tthrt_model_open_memory("not a tar at all", 16, &m, &d), 0);
    json_decref(opts);
    tth_compile_result_free(&res);
}

/* A Cortex-M target without an mtriple is not this machine: no host library is built by
 * default (it would not load here, and a cross build of its C needs the board's toolchain). */
Test(pipeline, cortex_m_target_builds_no_host_library)
{
    json_t *t = test_target(test_reg, "c -mcpu=cortex-m55");
    tth_compile_result res;
    tth_diag d;
    cr_assert_eq(test_compile_file(test_reg, t, NODE "test_relu/model.onnx", "relu", NULL, &res, &d), 0, "%s",
                 d.message);
    tthrt_model *m = NULL;
    cr_assert_eq(tthrt_model_open_memory(res.artifact, res.artifact_len, &m, &d), TTH_EUNSUPPORTED);
    cr_assert(strstr(d.message, "no host shared library"), "%s", d.message);
    tth_compile_result_free(&res);
    json_decref(t);
}

/* A `c` artifact for a Cortex-M links through its own CMakeLists.txt with arm-none-eabi and a
 * bare-metal toolchain file: libm comes from the toolchain's own libraries (sin calls sinf; exp,
 * tanh, erf and sigmoid are arithmetic, docs/lowering.md),
 * not from a search of the host's. Skipped without arm-none-eabi-gcc or cmake. */
Test(pipeline, cortex_m_artifact_links_through_its_cmake, .timeout = 300)
{
    if (!test_have("arm-none-eabi-gcc") || !test_have("cmake"))
        cr_skip_test("arm-none-eabi-gcc or cmake is not installed (scripts/setup installs both)");
    json_t *t = test_target(test_reg, "c -mtriple=thumbv7em-none-eabi -mcpu=cortex-m4");
    tth_compile_result res;
    tth_diag d;
    cr_assert_eq(test_compile_file(test_reg, t, NODE "test_sin/model.onnx", "sig", NULL, &res, &d), 0, "%s",
                 d.message);
    char dir[512], path[1024], cmd[4096];
    test_mkdtemp(dir, sizeof dir);
    snprintf(cmd, sizeof cmd, "mkdir '%s/art'", dir);
    cr_assert_eq(test_run(cmd), 0);
    snprintf(path, sizeof path, "%s/art/sig.tar", dir);
    cr_assert_eq(test_write_file(path, res.artifact, res.artifact_len), 0);
    snprintf(cmd, sizeof cmd, "cd '%s/art' && tar xf sig.tar && grep -q sinf codegen/host/src/*.c", dir);
    cr_assert_eq(test_run(cmd), 0, "the generated code no longer calls expf: pick a model that needs libm");
    static const char *const files[][2] = {
        {"cortex-m4.cmake", "set(CMAKE_SYSTEM_NAME Generic)\nset(CMAKE_SYSTEM_PROCESSOR arm)\n"
                            "set(CMAKE_C_COMPILER arm-none-eabi-gcc)\nset(CMAKE_C_FLAGS_INIT \"-mthumb -mcpu=cortex-m4\")\n"
                            "set(CMAKE_EXE_LINKER_FLAGS_INIT \"--specs=nosys.specs\")\n"},
        {"CMakeLists.txt", "cmake_minimum_required(VERSION 3.13)\nproject(fw C)\nadd_subdirectory(art)\n"
                           "add_executable(fw main.c)\ntarget_link_libraries(fw tth_sig)\n"},
        {"main.c", "#include \"tth_sig.h\"\n"
                   "static float x[TTH_SIG_X_SIZE / 4], y[TTH_SIG_Y_SIZE / 4];\n"
                   "static unsigned char ws[TTH_SIG_WORKSPACE_SIZE + 1]"
                   " __attribute__((aligned(TTH_SIG_WORKSPACE_ALIGNMENT)));\n"
                   "int main(void) {\n    struct tth_sig_inputs in = {x};\n    struct tth_sig_outputs out = {y};\n"
                   "    return (int)tth_sig_run(&in, &out, ws);\n}\n"},
    };
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i][0]);
        cr_assert_eq(test_write_file(path, files[i][1], strlen(files[i][1])), 0);
    }
    snprintf(cmd, sizeof cmd, "cd '%s' && cmake -S . -B cm -DCMAKE_TOOLCHAIN_FILE=cortex-m4.cmake > cmake.log 2>&1 && "
             "cmake --build cm >> cmake.log 2>&1 && arm-none-eabi-nm cm/fw | grep -q ' T tth_sig_run'", dir);
    cr_assert_eq(test_run(cmd), 0, "the Cortex-M CMake build failed (see %s/cmake.log)", dir);
    test_rmtree(dir);
    tth_compile_result_free(&res);
    json_decref(t);
}

/* The host library from several C sources (build.c compiles them at once, then links): every
 * source's function is in it and computes; a source that does not compile fails the build with
 * the compiler's words about that file. */
static tth_runtime_module *two_sources(const char *second)
{
    tth_runtime_module *m = tth_runtime_module_new("c");
    tth_diag d;
    tth_diag_clear(&d);
    static const char first[] = "int tth_twice(int x) { return 2 * x; }\n";
    cr_assert_eq(tth_runtime_module_add_file(m, "first.c", TTH_FILE_C_SOURCE, first, sizeof first - 1, &d), 0);
    cr_assert_eq(tth_runtime_module_add_file(m, "second.c", TTH_FILE_C_SOURCE, second, strlen(second), &d), 0);
    return m;
}

/* m builds into a host library that has tth_twice (from first.c) and tth_plus3, and both compute. */
static void expect_twice_and_plus3(tth_runtime_module *m)
{
    uint8_t *so = NULL;
    size_t len = 0;
    tth_diag d;
    tth_diag_clear(&d);
    cr_assert_eq(tth_build_shared(&m, 1, NULL, NULL, &so, &len, &d), 0, "%s", d.message);
    char dir[512], path[1024];
    test_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/lib.so", dir);
    cr_assert_eq(test_write_file(path, so, len), 0);
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(dl, "%s", dlerror());
    int (*twice)(int) = (int (*)(int))dlsym(dl, "tth_twice");
    int (*plus3)(int) = (int (*)(int))dlsym(dl, "tth_plus3");
    cr_assert(twice && plus3, "a source's or a link object's function is missing from the library");
    cr_assert_eq(twice(21), 42);
    cr_assert_eq(plus3(4), 7);
    dlclose(dl);
    test_rmtree(dir);
    free(so);
}

Test(pipeline, host_library_from_several_sources)
{
    tth_runtime_module *m = two_sources("#include <math.h>\nint tth_plus3(int x) { return x + (int)sqrt(9.0); }\n");
    expect_twice_and_plus3(m);
    tth_runtime_module_free(m);

    m = two_sources("int tth_broken(int x) { return x +; }\n");
    uint8_t *so = NULL;
    size_t len = 0;
    tth_diag d;
    tth_diag_clear(&d);
    cr_assert_neq(tth_build_shared(&m, 1, NULL, NULL, &so, &len, &d), 0, "a source with a syntax error built");
    cr_assert_null(so);
    cr_assert(strstr(d.message, "failed on the generated code") && strstr(d.message, "second.c"),
              "the diagnostic does not show the compiler's words on second.c: %s", d.message);
    tth_runtime_module_free(m);
}

/* A module's link objects take the place of the sources its meta's "link_replaces" names
 * (docs/plugin-guide.md, "Objects in place of sources"): the replaced source, which would not
 * compile, is not compiled; the link object's function is in the library, beside the other
 * source's. */
Test(pipeline, host_library_links_objects_in_place_of_sources)
{
    char dir[512], cmd[1400], path[1024];
    test_mkdtemp(dir, sizeof dir);
    snprintf(cmd, sizeof cmd, "cd '%s' && printf 'int tth_plus3(int x) { return x + 3; }\\n' > p.c && "
             "%s -fPIC -c p.c -o p.o", dir, TTH_CC);
    cr_assert_eq(test_run(cmd), 0, "cannot compile the test's object");
    snprintf(path, sizeof path, "%s/p.o", dir);
    size_t olen = 0;
    uint8_t *obj = test_read_file(path, &olen);
    cr_assert_not_null(obj);
    tth_runtime_module *m = two_sources("int tth_broken(int x) { return x +; }\n");
    tth_diag d;
    tth_diag_clear(&d);
    cr_assert_eq(tth_runtime_module_add_file(m, "p.o", TTH_FILE_LINK_OBJECT, obj, olen, &d), 0, "%s", d.message);
    free(obj);
    json_t *meta = json_pack("{s:[s]}", "link_replaces", "second.c");
    cr_assert_eq(tth_runtime_module_set_meta(m, meta, &d), 0);
    json_decref(meta);
    expect_twice_and_plus3(m); /* the replaced source would not compile */
    tth_runtime_module_free(m);
    test_rmtree(dir);
}

/* A PyTorch export of tests/daemon/frontend/torch_models compiled for the c kind of this machine,
 * which binds its large constants at run time (docs/artifact.md): its C sources are smaller than
 * its weights, its module says what it binds, a module this large comes in at least min_parts
 * sources (compiled in parallel; every bound constant is #defined as its slot in each), and it
 * gives PyTorch's outputs run by the runtime, built with cc as the README says (binding the
 * parameters file) and through its CMakeLists.txt (the file linked in). */
static void check_c_binding(const char *torch_case, const char *name, size_t min_parts)
{
    char case_dir[1024], model[1100];
    snprintf(case_dir, sizeof case_dir, "%s/tests/daemon/frontend/torch_models/%s", getenv("TTH_SOURCE_ROOT"), torch_case);
    snprintf(model, sizeof model, "%s/model.onnx", case_dir);
    tth_compile_result res;
    tth_diag d;
    json_t *opts = json_pack("{s:b}", "build_shared", 0);
    cr_assert_eq(compile_file(model, name, opts, &res, &d), 0, "%s", d.message);
    const json_t *mod = json_array_get(json_object_get(res.metadata, "modules"), 0);
    const json_t *bc = json_object_get(json_object_get(mod, "meta"), "bind_constants");
    cr_assert_not_null(bc, "the c module binds no constants");
    cr_assert_gt(json_integer_value(json_object_get(bc, "count")), 0);
    char sym[64];
    snprintf(sym, sizeof sym, "tth_%s_parameters", name);
    cr_assert_str_eq(json_string_value(json_object_get(bc, "blob_symbol")), sym);
    size_t nparts = json_array_size(json_object_get(json_object_get(mod, "meta"), "sources"));
    cr_assert_geq(nparts, min_parts, "%zu C sources for %s, expected at least %zu", nparts, torch_case, min_parts);
    json_int_t bound = 0;
    const json_t *c;
    size_t i;
    json_array_foreach(json_object_get(bc, "constants"), i, c)
        bound += json_integer_value(json_object_get(c, "bytes"));
    char dir[512], cmd[1400];
    test_mkdtemp(dir, sizeof dir);
    snprintf(cmd, sizeof cmd, "%s/a.tar", dir);
    cr_assert_eq(test_write_file(cmd, res.artifact, res.artifact_len), 0);
    snprintf(cmd, sizeof cmd, "cd '%s' && tar xf a.tar && test -f codegen/host/src/%s_bind.c && "
             "test $(ls codegen/host/src/%s_lib*.c | wc -l) -eq %zu", dir, name, name, nparts);
    cr_assert_eq(test_run(cmd), 0, "the artifact does not hold the %zu C sources its module lists", nparts);
    /* in each part, every bound constant is its slot's pointer, and no array of 1 KiB or more is left */
    for (size_t p = 0; p < nparts; p++) {
        snprintf(cmd, sizeof cmd, "cd '%s/codegen/host/src' && "
                 "test $(grep -c '^#define .* ((const [a-z0-9_]* \\*)tth_%s_c_const_slots\\[' %s_lib%zu.c) -eq %lld && "
                 "! grep -Eq 'static const [a-z0-9_]+ [A-Za-z0-9_]+\\[[0-9]{4,}\\]' %s_lib%zu.c",
                 dir, name, name, p, (long long)json_integer_value(json_object_get(bc, "count")), name, p);
        cr_assert_eq(test_run(cmd), 0, "%s_lib%zu.c holds constants (%lld bytes) it should bind", name, p,
                     (long long)bound);
    }
    test_rmtree(dir);
    standalone_build_check(res.artifact, res.artifact_len, res.metadata, case_dir, name);
    tth_compile_result_free(&res);
    json_decref(opts);

    tth_case_result cr;
    cr_assert_eq(tth_case_run_flags(case_dir, test_reg, test_tc, TTH_CASE_CHECK_C_WARNINGS, &cr), TTH_CASE_PASS, "%s", cr.detail);
}

Test(pipeline, c_binds_large_constants_at_run_time, .timeout = 300)
{
    check_c_binding("test_torch_gru", "gru", 1);
}

/* an LSTM, whose unrolled steps share their code in C (docs/tir.md: workspace slices and weights
 * passed to one body per kind of step), binds its weights and gives PyTorch's outputs. Its C came
 * in two parts before the sharing and in one now; a module in parts is checked by
 * tests/plugins/c-host/test_codegen.c, large_module_in_parts_with_shared_bodies. */
Test(pipeline, c_lstm_binds_its_weights_and_gives_pytorchs_outputs, .timeout = 300)
{
    check_c_binding("test_torch_lstm", "lstm", 1);
}

/* y = maxpool2x2(concat(relu(x), sigmoid(x))) along channels of an image of batch n (a pooling
 * after the join: an element-wise op would be fused into the concatenation's function). */
static uint8_t *concat_model(int64_t n, size_t *len)
{
    ob b;
    ob_init(&b, 13);
    const int64_t dims[4] = {n, 4, 6, 6};
    ob_input(&b, "x", dims, 4);
    ob_node(&b, "Relu", "relu0", "x", "a");
    ob_node(&b, "Sigmoid", "sig0", "x", "s");
    ob_attr_i(&b, ob_node(&b, "Concat", "cat0", "a,s", "c"), "axis", 1);
    ob_pool(&b, "MaxPool", "pool0", "c", "y", 2, 2);
    ob_output(&b, "y");
    return ob_done(&b, len);
}

/* Compile model as name for `c` with opts and a host (log NULL: none), free the model; the test
 * fails when the compile does. */
static void compile_hosted(uint8_t *model, size_t len, const char *name, json_t *opts, void *ctx,
                           void (*log)(void *, int, const char *), tth_compile_result *res)
{
    tth_host host = test_host(ctx, log);
    tth_diag d;
    cr_assert_eq(test_compile(test_reg, test_tc, model, len, name, opts, &host, res, &d), 0, "%s", d.message);
    free(model);
}

/* The artifact run once with x (float32 of shape dims[rank]) bound to input "x"; close it. */
static tthrt_model *run_x(const tth_compile_result *res, const float *x, int rank, const int64_t *dims)
{
    tthrt_model *m = test_open_artifact(res);
    test_bind_f32(m, "x", rank, dims, x);
    test_run_once(m);
    return m;
}

/* The concatenation in place (docs/lowering.md): with batch 1 the AOT entry calls no
 * concatenation (the two producers write into its output) and the result is right; with batch 2
 * the inputs are not contiguous runs of the output, so the concatenation runs. */
Test(pipeline, concatenation_in_place)
{
    for (int64_t n = 1; n <= 2; n++) {
        size_t len;
        uint8_t *model = concat_model(n, &len);
        json_t *opts = json_pack("{s:b, s:s}", "build_shared", 1, "dump_ir", "aot");
        tth_compile_result cr;
        compile_hosted(model, len, "cat", opts, NULL, NULL, &cr);
        const char *aot = json_string_value(json_object_get(cr.dumps, "aot"));
        cr_assert_not_null(aot);
        if (n == 1)
            cr_assert_null(strstr(aot, "concatenate"), "batch 1 still concatenates:\n%s", aot);
        else
            cr_assert_not_null(strstr(aot, "concatenate"), "batch 2 lost its concatenation:\n%s", aot);
        float xv[2 * 144];
        for (int64_t i = 0; i < n * 144; i++)
            xv[i] = (float)((i * 37) % 23 - 11) / 4.0f;
        tthrt_model *m = run_x(&cr, xv, 4, (const int64_t[]){n, 4, 6, 6});
        tthrt_array y = test_output(m, 0);
        const float *yv = y.data;
        for (int64_t k = 0; k < n; k++)
            for (int64_t c = 0; c < 8; c++)
                for (int64_t p = 0; p < 9; p++) {
                    float want = -INFINITY;
                    for (int64_t q = 0; q < 4; q++) {
                        float v = xv[(k * 4 + c % 4) * 36 + (p / 3 * 2 + q / 2) * 6 + p % 3 * 2 + q % 2];
                        float z = c < 4 ? (v > 0 ? v : 0) : 1.0f / (1.0f + expf(-v));
                        want = z > want ? z : want;
                    }
                    float got = yv[(k * 8 + c) * 9 + p];
                    cr_assert_float_eq(got, want, 1e-6, "batch %d: y[%lld, %lld, %lld] = %g, want %g", (int)n,
                                       (long long)k, (long long)c, (long long)p, got, want);
                }
        tthrt_model_close(m);
        tth_compile_result_free(&cr);
        json_decref(opts);
    }
}

/* Views (docs/lowering.md): a = relu(x) [1, 4, 8, 8]; v = reshape(a, [1, 4, 64]), t =
 * transpose(v, [1, 0, 2]) (a size-1 axis moved) and s = a[:, 1:3] (two whole channels, 64
 * floats in) keep their elements where they are; u = transpose(v, [0, 2, 1]) and w =
 * a[:, :, 2:5] (three rows of each channel) move them. Outputs: y0 = softmax(t), y1 =
 * softmax(u), y2 = softmax(reshape(x, [4, 64])) (a view of the model's input, which stays a
 * copy), y3 = reshape(a, [4, 64]) (a view returned as the model's output, computed into it),
 * y4 = softmax(s), y5 = softmax(w), y6 = softmax(concat(v, reshape(-x, [1, 4, 64]), axis 1))
 * (a join of two views: the buffers they view move into the join, a with its three views),
 * every softmax over the last axis. */
static uint8_t *view_model(size_t *len)
{
    ob b;
    ob_init(&b, 13);
    ob_input(&b, "x", (const int64_t[]){1, 4, 8, 8}, 4);
    ob_init_i64(&b, "s3", (const int64_t[]){3}, 1, (const int64_t[]){1, 4, 64});
    ob_init_i64(&b, "s2", (const int64_t[]){2}, 1, (const int64_t[]){4, 64});
    for (int k = 0; k < 4; k++)
        ob_init_i64(&b, (const char *[]){"one", "two", "three", "five"}[k], (const int64_t[]){1}, 1,
                    (const int64_t[]){(const int64_t[]){1, 2, 3, 5}[k]});
    ob_node(&b, "Relu", "relu0", "x", "a");
    ob_node(&b, "Reshape", "view0", "a,s3", "v");
    ob_attr_ints(&b, ob_node(&b, "Transpose", "view1", "v", "t"), "perm", (const int64_t[]){1, 0, 2}, 3);
    ob_attr_i(&b, ob_node(&b, "Softmax", "soft0", "t", "y0"), "axis", -1);
    ob_attr_ints(&b, ob_node(&b, "Transpose", "move0", "v", "u"), "perm", (const int64_t[]){0, 2, 1}, 3);
    ob_attr_i(&b, ob_node(&b, "Softmax", "soft1", "u", "y1"), "axis", -1);
    ob_node(&b, "Reshape", "copy0", "x,s2", "r");
    ob_attr_i(&b, ob_node(&b, "Softmax", "soft2", "r", "y2"), "axis", -1);
    ob_node(&b, "Reshape", "copy1", "a,s2", "y3");
    ob_node(&b, "Slice", "view2", "a,one,three,one", "s");
    ob_attr_i(&b, ob_node(&b, "Softmax", "soft4", "s", "y4"), "axis", -1);
    ob_node(&b, "Slice", "move1", "a,two,five,two", "w");
    ob_attr_i(&b, ob_node(&b, "Softmax", "soft5", "w", "y5"), "axis", -1);
    ob_node(&b, "Neg", "neg0", "x", "n");
    ob_node(&b, "Reshape", "view3", "n,s3", "nv");
    ob_attr_i(&b, ob_node(&b, "Concat", "join0", "v,nv", "j"), "axis", 1);
    ob_attr_i(&b, ob_node(&b, "Softmax", "soft6", "j", "y6"), "axis", -1);
    for (int o = 0; o < 7; o++)
        ob_output(&b, (const char *[]){"y0", "y1", "y2", "y3", "y4", "y5", "y6"}[o]);
    return ob_done(&b, len);
}

/* softmax over rows of n floats: y[r * n + k] from x[r * n + k] (rows rows) */
static void softmax_rows(const float *x, int64_t rows, int64_t n, float *y)
{
    for (int64_t r = 0; r < rows; r++) {
        float m = -INFINITY, sum = 0;
        for (int64_t k = 0; k < n; k++)
            m = x[r * n + k] > m ? x[r * n + k] : m;
        for (int64_t k = 0; k < n; k++)
            sum += expf(x[r * n + k] - m);
        for (int64_t k = 0; k < n; k++)
            y[r * n + k] = expf(x[r * n + k] - m) / sum;
    }
}

static size_t count_of(const char *s, const char *what)
{
    size_t n = 0;
    for (const char *p = s; (p = strstr(p, what)); p++)
        n++;
    return n;
}

/* the explain notes a compile logs, joined by newlines */
static void collect_notes(void *ctx, int level, const char *msg)
{
    (void)level;
    char *buf = ctx;
    size_t n = strlen(buf);
    snprintf(buf + n, 1 << 16 > n ? (1 << 16) - n : 0, "%s\n", msg);
}

/* The AOT entry calls no code for the four views of workspace tensors and the join of two of
 * them (their PrimFuncs are gone from the module), still copies the view of the input, computes
 * the one returned, moves the elements of the transpose and the slice that need it, and every
 * output is right: for the c and llvm targets. */
Test(pipeline, views)
{
    for (int k = 0; k < 2; k++) {
        size_t len;
        uint8_t *model = view_model(&len);
        json_t *opts = json_pack("{s:b, s:s, s:b}", "build_shared", 1, "dump_ir", "aot", "explain", 1);
        tth_compile_result cr;
        char *notes = calloc(1, 1 << 16);
        cr_assert_not_null(notes);
        tth_host host = test_host(notes, collect_notes);
        tth_diag d;
        cr_assert_eq(test_compile_text(test_reg, k ? "llvm" : "c", model, len, "views", opts, &host, &cr, &d), 0,
                     "%s", d.message);
        free(model);
        cr_assert_not_null(strstr(notes, "no code for 4 views (reshapes, transposes and slices that move nothing) "
                                         "and 1 concatenation"),
                           "--explain does not count the views and the join; notes:\n%s", notes);
        free(notes);
        const char *aot = json_string_value(json_object_get(cr.dumps, "aot"));
        cr_assert_not_null(aot);
        cr_assert_eq(count_of(aot, "reshape"), 2, "want the two reshapes that copy, no view:\n%s", aot);
        cr_assert_eq(count_of(aot, "transpose"), 1, "want the transpose that moves data, no view:\n%s", aot);
        cr_assert_eq(count_of(aot, "strided_slice"), 1, "want the slice that moves data, no view:\n%s", aot);
        cr_assert_null(strstr(aot, "concatenate"), "the join of two views copies:\n%s", aot);
        static float xv[256], a[256], at[256], w[96], j[512], want[7][512];
        for (int i = 0; i < 256; i++) {
            xv[i] = (float)((i * 37) % 23 - 11) / 4.0f;
            a[i] = xv[i] > 0 ? xv[i] : 0;
        }
        for (int c = 0; c < 4; c++)
            for (int p = 0; p < 64; p++)
                at[p * 4 + c] = a[c * 64 + p];
        for (int c = 0; c < 4; c++)
            memcpy(w + c * 24, a + c * 64 + 16, 24 * sizeof *w);
        softmax_rows(a, 4, 64, want[0]);
        softmax_rows(at, 64, 4, want[1]);
        softmax_rows(xv, 4, 64, want[2]);
        memcpy(want[3], a, sizeof a);
        softmax_rows(a + 64, 16, 8, want[4]);
        softmax_rows(w, 12, 8, want[5]);
        for (int i = 0; i < 256; i++) {
            j[i] = a[i];
            j[256 + i] = -xv[i];
        }
        softmax_rows(j, 8, 64, want[6]);
        const int n[7] = {256, 256, 256, 256, 128, 96, 512};
        tthrt_model *m = run_x(&cr, xv, 4, (const int64_t[]){1, 4, 8, 8});
        for (int o = 0; o < 7; o++) {
            tthrt_array y = test_output(m, o);
            const float *yv = y.data;
            for (int i = 0; i < n[o]; i++)
                cr_assert_float_eq(yv[i], want[o][i], 1e-6, "%s: y%d[%d] = %g, want %g", k ? "llvm" : "c", o, i,
                                   yv[i], want[o][i]);
        }
        tthrt_model_close(m);
        tth_compile_result_free(&cr);
        json_decref(opts);
    }
}

/* y = relu(conv3x3(x, W, B)) + x for x [1, 16, 12, 12], W and B made from seed */
static uint8_t *conv_model(unsigned seed, size_t *len)
{
    ob b;
    ob_init(&b, 13);
    const int64_t xd[4] = {1, 16, 12, 12}, wd[4] = {16, 16, 3, 3}, bd[1] = {16};
    static float w[16 * 16 * 9], bias[16];
    for (size_t i = 0; i < sizeof w / sizeof *w; i++)
        w[i] = (float)((i * 7919u + seed * 104729u) % 97) / 97.0f - 0.5f;
    for (size_t i = 0; i < 16; i++)
        bias[i] = (float)((i + seed) % 5) / 10.0f;
    ob_input(&b, "x", xd, 4);
    ob_init_f32(&b, "W", wd, 4, w);
    ob_init_f32(&b, "B", bd, 1, bias);
    ob_conv(&b, "conv0", "x,W,B", "c", 1, 1, 1);
    ob_node(&b, "Relu", "relu0", "c", "r");
    ob_node(&b, "Add", "add0", "r,x", "y");
    ob_output(&b, "y");
    return ob_done(&b, len);
}

static int store_get_cb(void *ctx, const uint8_t key[16], void **data, size_t *len)
{
    return tth_code_store_get(ctx, key, data, len);
}

static void store_put_cb(void *ctx, const uint8_t key[16], const void *data, size_t len)
{
    tth_code_store_put(ctx, key, data, len);
}

/* Compile conv_model(seed) for target text with the store (or without: store NULL). */
static void compile_conv(const char *target, unsigned seed, tth_code_store *store, tth_compile_result *res)
{
    size_t len;
    uint8_t *model = conv_model(seed, &len);
    json_t *opts = json_pack("{s:b}", "build_shared", 1);
    tth_host host = test_host(store, NULL);
    if (store) {
        host.store_get = store_get_cb;
        host.store_put = store_put_cb;
    }
    tth_diag d;
    cr_assert_eq(test_compile_text(test_reg, target, model, len, "conv", opts, &host, res, &d), 0, "%s", d.message);
    json_decref(opts);
    free(model);
}

static void assert_same_artifact(const tth_compile_result *a, const tth_compile_result *b, const char *what)
{
    cr_assert(a->artifact_len == b->artifact_len && memcmp(a->artifact, b->artifact, a->artifact_len) == 0,
              "%s: the artifact differs from the one compiled without the store", what);
}

/* The host's store of compiled code (docs/cache.md, "Compiled code"): a model retrained with the
 * same shapes (other weights and biases) compiles with every piece of code from the store, into
 * the artifact a compile without the store gives; another code generator setting compiles the
 * llvm code again; a damaged entry is compiled again and replaced. */
Test(pipeline, code_store_reuses_the_code_of_the_same_shapes, .timeout = 300)
{
    char dir[512];
    test_mkdtemp(dir, sizeof dir);
    tth_code_store *store = tth_code_store_open(dir, 64u << 20);
    cr_assert_not_null(store);
    tth_compile_result first, again, cold, other, other_cold, mended;
    compile_conv("llvm", 1, store, &first);
    cr_assert_eq(first.code_reused, 0);
    /* the llvm object and the host library's C sources (binding, thread pool) */
    cr_assert_geq(first.code_compiled, 2, "%u pieces compiled", first.code_compiled);
    compile_conv("llvm", 2, store, &again);
    cr_assert_eq(again.code_reused, first.code_compiled, "other weights: %u of %u pieces reused", again.code_reused,
                 first.code_compiled);
    cr_assert_eq(again.code_compiled, 0);
    compile_conv("llvm", 2, NULL, &cold);
    cr_assert_eq(cold.code_reused + cold.code_compiled, 0, "no store, no lookups");
    assert_same_artifact(&again, &cold, "weights of seed 2");
    cr_assert(first.artifact_len != cold.artifact_len || memcmp(first.artifact, cold.artifact, cold.artifact_len) != 0,
              "the two weight sets gave one artifact");

    compile_conv("llvm -opt-level=2", 2, store, &other);
    cr_assert_geq(other.code_compiled, 1, "another opt-level took its object from the store");
    compile_conv("llvm -opt-level=2", 2, NULL, &other_cold);
    assert_same_artifact(&other, &other_cold, "opt-level 2");

    /* damage every entry: each is found bad, compiled again, and the artifact is still right */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "for f in %s/*; do printf '\\377\\376\\375\\374' | dd of=$f bs=1 seek=40 conv=notrunc 2>/dev/null; done",
             dir);
    cr_assert_eq(test_run(cmd), 0);
    compile_conv("llvm", 2, store, &mended);
    cr_assert_eq(mended.code_reused, 0, "a damaged entry was used");
    assert_same_artifact(&mended, &cold, "after damage");
    tth_compile_result *all[] = {&first, &again, &cold, &other, &other_cold, &mended};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tth_compile_result_free(all[i]);
    tth_code_store_close(store);
    test_rmtree(dir);
}

/* The store's bound: past it, the least recently used entries go (never the one just stored);
 * what is left reads back as it was stored. */
Test(pipeline, code_store_keeps_to_its_bound)
{
    char dir[512];
    test_mkdtemp(dir, sizeof dir);
    tth_code_store *s = tth_code_store_open(dir, 100000);
    cr_assert_not_null(s);
    static uint8_t blob[10000];
    uint8_t key[16];
    for (int k = 0; k < 30; k++) {
        memset(key, k, sizeof key);
        memset(blob, k, sizeof blob);
        tth_code_store_put(s, key, blob, sizeof blob);
    }
    uint64_t total = 0;
    int present = 0;
    for (int k = 0; k < 30; k++) {
        void *data;
        size_t len;
        memset(key, k, sizeof key);
        if (tth_code_store_get(s, key, &data, &len)) {
            present++;
            cr_assert_eq(len, sizeof blob);
            for (size_t i = 0; i < len; i++)
                cr_assert_eq(((uint8_t *)data)[i], (uint8_t)k, "entry %d holds other bytes", k);
            total += len;
            free(data);
        }
    }
    cr_assert(present > 0 && present < 30 && total <= 100000, "%d entries, %llu bytes kept", present,
              (unsigned long long)total);
    memset(key, 29, sizeof key);
    void *data;
    size_t len;
    cr_assert(tth_code_store_get(s, key, &data, &len), "the newest entry is gone");
    free(data);
    tth_code_store_close(s);
    test_rmtree(dir);
}

/* y = Gemm(x, W, transB=1) of a 64 x 4100 input and a 4100 x 4100 weight (16.8 M elements, over
 * the interpreter's 2^24), then the LSTM way of preparing weights (a slice of a transposed
 * constant), and z = MatMul(A, B) of two constant 512 x 512 matrices (134 M multiply-adds, over
 * the folder's budget). */
static uint8_t *constants_model(size_t *len)
{
    enum { K = 4100 };
    ob b;
    ob_init(&b, 13);
    const int64_t xd[2] = {2, K}, wd[2] = {K, K}, sd[2] = {512, 512};
    float *w = malloc(sizeof(float) * K * K), *a = malloc(sizeof(float) * 512 * 512);
    cr_assert(w && a);
    for (size_t i = 0; i < (size_t)K * K; i++)
        w[i] = (float)((i * 7919u) % 101) / 101.0f - 0.5f;
    for (size_t i = 0; i < 512 * 512; i++)
        a[i] = (float)((i * 104729u) % 89) / 89.0f - 0.5f;
    ob_input(&b, "x", xd, 2);
    ob_init_f32(&b, "W", wd, 2, w);
    ob_init_f32(&b, "A", sd, 2, a);
    ob_init_f32(&b, "B", sd, 2, a);
    ob_attr_i(&b, ob_node(&b, "Gemm", "fc0", "x,W", "y"), "transB", 1);
    ob_node(&b, "MatMul", "mm0", "A,B", "z");
    ob_output(&b, "y");
    ob_output(&b, "z");
    uint8_t *bytes = ob_pack(&b, len);
    ob_free(&b);
    free(w);
    free(a);
    return bytes;
}

/* No function of constants only is left in generated code (docs/operators.md, "Constant
 * folding"): the transposed 4100 x 4100 weight of a Gemm is folded whatever its size, and the one
 * function the folder leaves (a matmul of two constants over its budget) is named by --explain
 * with the reason; the output of the Gemm is right. */
Test(pipeline, no_function_of_constants_only, .timeout = 300)
{
    size_t len;
    uint8_t *model = constants_model(&len);
    json_t *opts = json_pack("{s:b, s:b, s:s}", "build_shared", 1, "explain", 1, "dump_ir", "optimize");
    char *notes = calloc(1, 1 << 16);
    tth_compile_result cr;
    compile_hosted(model, len, "k", opts, notes, collect_notes, &cr);
    const char *relay = json_string_value(json_object_get(cr.dumps, "optimize"));
    cr_assert_not_null(relay);
    cr_assert_null(strstr(relay, "transpose"), "the weight's transpose is left in the code:\n%.2000s", relay);
    /* exactly one note, naming the matmul of constants and the budget */
    const char *note = strstr(notes, "constants: ");
    cr_assert_not_null(note, "no note names the matmul of constants; notes:\n%s", notes);
    cr_assert_null(strstr(note + 1, "constants: "), "more than one function of constants; notes:\n%s", notes);
    cr_assert_not_null(strstr(note, "'k_fused_matmul_"), "%s", note);
    cr_assert_not_null(strstr(note, "'matmul' would take about"), "%s", note);
    cr_assert_not_null(strstr(note, "budget"), "%s", note);
    /* y = x W^T for x of rows of ones and twos: row r is (r + 1) * the column sums of W^T */
    static float x[2 * 4100];
    for (int64_t i = 0; i < 2 * 4100; i++)
        x[i] = i < 4100 ? 1.0f : 2.0f;
    tthrt_model *m = run_x(&cr, x, 2, (const int64_t[]){2, 4100});
    tthrt_array y = test_output(m, 0);
    for (int64_t n = 0; n < 4100; n += 97) {
        double want = 0;
        for (int64_t k = 0; k < 4100; k++)
            want += (float)((size_t)(n * 4100 + k) * 7919u % 101) / 101.0f - 0.5f;
        for (int row = 0; row < 2; row++) {
            float got = ((const float *)y.data)[row * 4100 + n];
            cr_assert(fabs(got - (row + 1) * want) <= 1e-3 * (1 + fabs(want)), "y[%d, %lld] = %g, want %g", row,
                      (long long)n, got, (row + 1) * want);
        }
    }
    tthrt_model_close(m);
    tth_compile_result_free(&cr);
    json_decref(opts);
    free(notes);
}

/* y = relu(x W) W + relu(x W2) W2' with W2 = W (another initializer of the same bytes) and W2'
 * the same again: one 64 x 64 weight read by four matmuls of four functions */
static uint8_t *shared_weight_model(size_t *len, float *w)
{
    ob b;
    ob_init(&b, 13);
    const int64_t xd[2] = {3, 64}, wd[2] = {64, 64};
    for (int i = 0; i < 64 * 64; i++)
        w[i] = (float)((i * 7919) % 61) / 61.0f - 0.5f;
    ob_input(&b, "x", xd, 2);
    ob_init_f32(&b, "W", wd, 2, w);
    ob_init_f32(&b, "W2", wd, 2, w);
    ob_init_f32(&b, "W3", wd, 2, w);
    ob_node(&b, "MatMul", "m1", "x,W", "a");
    ob_node(&b, "Relu", "r1", "a", "ra");
    ob_node(&b, "MatMul", "m2", "ra,W", "b");
    ob_node(&b, "MatMul", "m3", "x,W2", "c");
    ob_node(&b, "Relu", "r3", "c", "rc");
    ob_node(&b, "MatMul", "m4", "rc,W3", "d");
    ob_node(&b, "Add", "add", "b,d", "y");
    ob_output(&b, "y");
    return ob_done(&b, len);
}

/* Equal constants become one (daemon/compile/consts.c): the four matmuls' weights, packed the
 * same way, are one constant of the llvm module (its bind list holds one 16 KiB constant, not
 * four), and the output is right. */
Test(pipeline, equal_constants_are_stored_once, .timeout = 300)
{
    static float w[64 * 64];
    size_t len;
    uint8_t *model = shared_weight_model(&len, w);
    json_t *opts = json_pack("{s:b}", "build_shared", 1);
    tth_host host = test_host(NULL, NULL);
    tth_compile_result cr;
    tth_diag d;
    cr_assert_eq(test_compile_text(test_reg, "llvm", model, len, "sw", opts, &host, &cr, &d), 0, "%s", d.message);
    /* every constant the llvm module binds, by size: one of 64 x 64 floats */
    size_t big = 0, i;
    json_t *mod;
    json_array_foreach(json_object_get(cr.metadata, "modules"), i, mod) {
        size_t k;
        json_t *c;
        json_array_foreach(json_object_get(json_object_get(json_object_get(mod, "meta"), "bind_constants"), "constants"),
                           k, c)
            big += json_integer_value(json_object_get(c, "bytes")) >= 64 * 64 * 4;
    }
    cr_assert_eq(big, 1, "%zu constants of the weight's size are bound, want 1", big);
    float xv[3 * 64];
    for (int i2 = 0; i2 < 3 * 64; i2++)
        xv[i2] = (float)((i2 * 31) % 17) / 8.0f - 1.0f;
    tthrt_model *m = run_x(&cr, xv, 2, (const int64_t[]){3, 64});
    tthrt_array y = test_output(m, 0);
    for (int row = 0; row < 3; row++)
        for (int col = 0; col < 64; col++) {
            double want = 0;
            for (int k = 0; k < 64; k++) {
                double a = 0;
                for (int j = 0; j < 64; j++)
                    a += (double)xv[row * 64 + j] * w[j * 64 + k];
                want += 2 * (a > 0 ? a : 0) * w[k * 64 + col];
            }
            float got = ((const float *)y.data)[row * 64 + col];
            cr_assert(fabs(got - want) <= 1e-4 * (1 + fabs(want)), "y[%d, %d] = %g, want %g", row, col, got, want);
        }
    tthrt_model_close(m);
    tth_compile_result_free(&cr);
    json_decref(opts);
    free(model);
}
