/* bench_compile.h: what the compile benchmarks share (bench/memplan, bench/compile_time): the
 * plugin registry of the build tree, the models of bench/models/make_models.py (manifest.tsv),
 * and one in-process tth_compile timed stage by stage through its progress callback. */
#ifndef TTH_BENCH_COMPILE_H
#define TTH_BENCH_COMPILE_H

#include <stddef.h>
#include <jansson.h>

#include "bench_time.h"
#include "compile.h"
#include "tth/registry.h"

#define BENCH_MAX_STAGES 32

/* One compile: wall seconds in all and per stage, in the order the pipeline ran them. */
typedef struct bench_timing {
    double total;
    size_t nstages;
    const char *stage[BENCH_MAX_STAGES];   /* static strings from the pipeline */
    double seconds[BENCH_MAX_STAGES];
} bench_timing;

/* A model of the manifest. */
typedef struct bench_model {
    char name[64];
    char path[1024];
    long nodes;              /* ONNX nodes */
    long params;             /* parameters */
} bench_model;

/* Every plugin of the build tree (TTH_PLUGINS_BUILD_DIR); NULL with a message on stderr. */
tth_registry *bench_registry(void);
/* The canonical target from its string form; NULL with a message. */
json_t *bench_target(const tth_registry *r, const char *text);
/* The models listed in DIR/manifest.tsv (malloc'd array); NULL with a message. */
bench_model *bench_models(const char *dir, size_t *n);
/* Compile the model in-process with `options` (stolen; build_shared=false unless they say),
 * timing each stage. Returns tth_compile's code; *res is filled on success (free with
 * tth_compile_result_free); a failure is said on stdout: "<model> compile failed: <message>". */
int bench_compile(const tth_registry *r, const json_t *target, const bench_model *m,
                  json_t *options, tth_compile_result *res, bench_timing *t);

#endif
