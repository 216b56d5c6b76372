/* compile.h: the compile flow's entry point. Runs inside a tthd worker process (plugin code is
 * called from here), never in the daemon process. Implemented in daemon/compile/pipeline.c. */
#ifndef TTH_COMPILE_H
#define TTH_COMPILE_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "tth/diag.h"
#include "tth/plugin.h"
#include "tth/registry.h"

typedef struct tth_compile_request {
    const uint8_t *model;        /* the model file's bytes (ONNX protobuf) */
    size_t model_len;
    const char *model_name;      /* C identifier used in symbols and file names: "mnist" */
    const json_t *target;        /* canonical target JSON, already parsed and validated */
    const json_t *options;       /* may be NULL; {"dump_ir": "STAGE"|"all", "explain": bool,
                                    "build_shared": bool (also build a host .so with cc)} */
    const tth_registry *registry;
    const tth_host *host;        /* handed to every hook */
    /* progress: stage name and percent of the whole compile (0..100); may be NULL */
    void (*progress)(void *ctx, const char *stage, int percent);
    void *progress_ctx;
    const char *model_dir;       /* the model file's directory, where its ONNX external data is read
                                    (docs/tthctl.md, "ONNX external data"); NULL: the bytes came alone */
    int model_mapped;            /* model is a read-only mapping of the file: its pages are given
                                    back once imported (they come again from the file if read) */
} tth_compile_request;

typedef struct tth_compile_result {
    uint8_t *artifact;           /* the artifact tar (malloc'd) */
    size_t artifact_len;
    json_t *metadata;            /* metadata.json as stored in the tar (new reference) */
    json_t *dumps;               /* {"stage": "IR text"} when options.dump_ir asked; else NULL */
    json_t *timings;             /* [{"stage", "seconds"}] in flow order (wall clock) */
    json_t *external;            /* [{"location", "bytes", "xxh64"}]: the external data files read */
    unsigned code_reused;        /* pieces of code found in the host's store (tth_host.store_get) */
    unsigned code_compiled;      /* pieces looked for there and not found, so compiled */
} tth_compile_result;

/* Run the whole flow. On failure returns a negative TTH_E* code and fills diag (naming the
 * node/operator, or the plugin and hook, that failed); res is then empty. */
int tth_compile(const tth_compile_request *req, tth_compile_result *res, tth_diag *diag);

void tth_compile_result_free(tth_compile_result *res);

#endif
