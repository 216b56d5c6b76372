/* onnx_case.h: compile one ONNX test case (a libonnx-testdata directory: model.onnx and
 * test_data_set_N/{input,output}_M.pb) in-process with tth_compile, run every data set through
 * the runtime and compare with the expected outputs (tthrt_default_tolerance). Shared by the
 * compile tests and the conformance runner. */
#ifndef TTH_TEST_ONNX_CASE_H
#define TTH_TEST_ONNX_CASE_H

#include <jansson.h>

#include "tth/registry.h"

typedef enum tth_case_status {
    TTH_CASE_PASS = 0,
    TTH_CASE_FAIL = 1,        /* wrong result, a compile or run error that is not "unsupported" */
    TTH_CASE_UNSUPPORTED = 2, /* TTH_EUNSUPPORTED from the compile (import, lower ...) */
} tth_case_status;

typedef struct tth_case_result {
    tth_case_status status;
    char detail[1024];        /* what failed, or why it is unsupported */
    double compile_ms, run_ms;
    char bound[512];          /* inputs fixed at compile time (TTH_CASE_BIND_INPUTS), comma-separated */
} tth_case_result;

enum {
    /* also compile the generated C with `cc -std=c99 -O2 -Wall -Wextra -Werror
     * -Wno-unused-parameter` (and clang when installed): a warning fails the case */
    TTH_CASE_CHECK_C_WARNINGS = 1,
    /* when the compile refuses a graph input that must be a constant, compile again with it
     * bound to test_data_set_0's value (options.bind; res->bound names them) and run that data
     * set only (the others may hold other values of the bound inputs) */
    TTH_CASE_BIND_INPUTS = 2,
};

/* Run the case in `dir` for `target` (canonical JSON). Returns the status (also in res). */
tth_case_status tth_case_run(const char *dir, const tth_registry *reg, const json_t *target,
                             tth_case_result *res);
/* The same with flags (TTH_CASE_*). */
tth_case_status tth_case_run_flags(const char *dir, const tth_registry *reg, const json_t *target,
                                   int flags, tth_case_result *res);

/* The ONNX node test `test` (a directory of TTH_CASE_NODE_DIR) run with flags. */
#define TTH_CASE_NODE_DIR "/usr/share/libonnx-testdata/data/node"
tth_case_status tth_case_run_node(const char *test, const tth_registry *reg, const json_t *target, int flags,
                                  tth_case_result *res);

#endif
