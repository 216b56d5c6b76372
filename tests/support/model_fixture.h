/* model_fixture.h: what the in-process model tests share (tests/daemon/compile, frontend's QDQ
 * tests, the plugins' tests): a registry and a target as a Criterion fixture, a compile of a model's
 * bytes or file, its artifact opened, bound and run by the runtime, the partition's choices, and
 * the AOT entry of a TIR module built by hand. Every step fails the test when it fails. */
#ifndef TTH_TEST_MODEL_FIXTURE_H
#define TTH_TEST_MODEL_FIXTURE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "compile.h"
#include "tth/registry.h"
#include "tth/tir.h"
#include "tthrt.h"

/* The fixture of a suite that compiles for `c`: TestSuite(name, .init = test_fixture_c,
 * .fini = test_fixture_fini) gives each test test_reg (test_registry()) and test_tc (target "c"). */
extern tth_registry *test_reg;
extern json_t *test_tc;
void test_fixture_c(void);
void test_fixture_fini(void);

/* The target of text (canonical JSON, new reference). */
json_t *test_target(const tth_registry *r, const char *text);
/* The host a compile lends its hooks: this ABI, ctx and log (NULL: no log). */
tth_host test_host(void *ctx, void (*log)(void *ctx, int level, const char *msg));

/* Compile model bytes as name for target with opts and host (both may be NULL); d is cleared
 * first. Returns tth_compile's code (a failure is the caller's to check). */
int test_compile(const tth_registry *r, const json_t *target, const uint8_t *model, size_t len, const char *name,
                 const json_t *opts, const tth_host *host, tth_compile_result *res, tth_diag *d);
/* The same for the target's text (test_target). */
int test_compile_text(const tth_registry *r, const char *target, const uint8_t *model, size_t len, const char *name,
                      const json_t *opts, const tth_host *host, tth_compile_result *res, tth_diag *d);
/* The same for the model file at path (read, or the test fails). */
int test_compile_file(const tth_registry *r, const json_t *target, const char *path, const char *name,
                      const json_t *opts, tth_compile_result *res, tth_diag *d);
/* The file at path, whole (test_read_file); the test fails when it cannot be read. */
uint8_t *test_slurp(const char *path, size_t *len);

/* The artifact opened by the runtime. */
tthrt_model *test_open_artifact(const tth_compile_result *res);
/* Bind input name to a copy of a float32 array of shape [rank] holding values. */
void test_bind_f32(tthrt_model *m, const char *name, int rank, const int64_t *shape, const float *values);
/* Run once. */
void test_run_once(tthrt_model *m);
/* Output i as a view the model owns (until the next run or the close). */
tthrt_array test_output(const tthrt_model *m, size_t i);

/* The kind that took ONNX node `node` in a compile's metadata (its partition's op of that node),
 * or NULL; test_partition_kind (helpers.h) looks up a Relay op. */
const char *test_node_kind(const json_t *meta, const char *node);

/* The artifact written and extracted (tar xf) into a new temporary directory, dir. */
void test_extract(const tth_compile_result *res, char *dir, size_t len);

/* A rank-1 TIR buffer of a table: name, element type, length, scope. */
typedef struct test_tbuf {
    const char *name;
    tth_dtype dtype;
    int64_t n;
    tth_buffer_scope scope;
} test_tbuf;
/* out[i] = the buffer of spec[i], for n rows. */
void test_tir_buffers(tth_tir_module *m, const test_tbuf *spec, size_t n, tth_tbuffer **out);
/* Add the AOT entry name(params) with body to m and make it m's entry. */
void test_tir_entry(tth_tir_module *m, const char *name, tth_tbuffer **params, size_t n, tth_tstmt *body);

#endif
