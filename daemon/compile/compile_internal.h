/* compile_internal.h: the stages of the compile pipeline (pipeline.c) and the data they pass.
 * Each stage is one file: aot.c, memplan.c, package.c, build.c. */
#ifndef TTH_COMPILE_INTERNAL_H
#define TTH_COMPILE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "tth/artifact.h"
#include "tth/diag.h"
#include "tth/relay.h"
#include "tth/tir.h"

/* ---- aot.c ------------------------------------------------------------------------------------ */

/* One model input or output. */
typedef struct tth_io_info {
    const char *onnx_name;   /* the name in the model */
    const char *c_name;      /* the interface struct field (a C identifier, unique) */
    tth_tbuffer *buf;        /* the entry's INPUT/OUTPUT buffer */
} tth_io_info;

/* A WORKSPACE buffer that is a slice of another: `part` takes bytes [offset, offset + its size)
 * of `whole`. Made by the AOT entry for a concatenation in place (docs/lowering.md,
 * "Concatenation in place"); memory planning places `whole` over the lifetimes of both and sets
 * part's offset from whole's. */
typedef struct tth_mem_alias {
    tth_tbuffer *part, *whole;
    uint64_t offset;
} tth_mem_alias;

/* A workspace tensor of the AOT entry and where it comes from in the model: the ONNX node whose
 * output it is (a span of the Relay module, which outlives the compile's packaging) and the
 * function computing it. */
typedef struct tth_buffer_node {
    const tth_tbuffer *buf;
    const char *node;
    const char *func;
} tth_buffer_node;

typedef struct tth_aot_result {
    tth_prim_func *entry;    /* tth_<model>_run, added to the module and set as its entry */
    tth_io_info *inputs;     /* malloc'd */
    size_t ninputs;
    tth_io_info *outputs;    /* malloc'd */
    size_t noutputs;
    tth_mem_alias *aliases;  /* malloc'd: the slices of concatenations and views done in place */
    size_t naliases;
    size_t views, joins;     /* the calls of views and of concatenations done in place (no code) */
    tth_buffer_node *nodes;  /* malloc'd: the ONNX node each workspace tensor is the output of */
    size_t nnodes;
} tth_aot_result;

/* One PrimFunc per Relay function: which lowered PrimFunc implements which Relay function. */
typedef struct tth_lowered {
    const tth_relay_function *fn;
    const char *prim_name;
} tth_lowered;

/* Build the AOT entry of `main`: requires every call in main to call a function listed in
 * `lowered` (fusion and lowering ran). Inputs are main's params in order, outputs main's result
 * fields in order; intermediates become WORKSPACE buffers. */
int tth_aot_build(const tth_relay_module *rmod, tth_tir_module *tmod, const tth_lowered *lowered,
                  size_t nlowered, const char *model, const char *target_kind, uint32_t ws_align,
                  tth_aot_result *out, tth_diag *diag);
/* A profiling entry (docs/profiling.md): each call k of the entry's body between calls of
 * tth_<model>_profile_begin(k) and tth_<model>_profile_end(k), the C functions of
 * tth_profile_source. Returns the number of calls timed, or a negative code. */
int64_t tth_aot_add_timing(tth_tir_module *tmod, tth_prim_func *entry, const char *model, tth_diag *diag);
/* The clock of a profiling artifact's timing hooks (docs/profiling.md) */
typedef enum tth_profile_clock {
    TTH_CLOCK_MONOTONIC,   /* an OS: nanoseconds of CLOCK_MONOTONIC */
    TTH_CLOCK_DWT,         /* bare metal, a Cortex-M with a DWT cycle counter: cycles, or the
                              application's counter when it defines TTH_<MODEL>_PROFILE_CLOCK */
    TTH_CLOCK_APPLICATION, /* bare metal without a known counter: the application's */
} tth_profile_clock;
/* Whether a Cortex-M mcpu has the DWT cycle counter (Armv7-M and Armv8-M Mainline cores) */
int tth_cpu_has_cycle_counter(const char *mcpu);
/* The C source of the timing hooks of a profiling artifact with ncalls calls (malloc'd); mcpu
 * names the core in the message of a bare-metal build that has no counter. */
char *tth_profile_source(const char *model, int64_t ncalls, tth_profile_clock clock, const char *mcpu);
/* An upper-case copy of a model's name, for its macros (TTH_<MODEL>_...) */
void tth_upper_name(char *dst, const char *src, size_t len);
/* metadata.json's "profile"."calls" (profile.c): one row per call of entry (before its timing
 * hooks), with the Relay function each PrimFunc came from and its nodes' ONNX output tensors
 * (node_outputs, from the import) (docs/profiling.md) */
json_t *tth_profile_calls(tth_relay_module *rm, const tth_tir_module *tmod, const tth_prim_func *entry,
                          const tth_lowered *lowered, size_t nlowered, const json_t *node_outputs);
void tth_aot_result_clear(tth_aot_result *r);

/* ---- memplan.c (memplan_graph.c, memplan_greedy.c, memplan_search.c) ----------------------- */

/* The placement algorithms; frozen numbers (they index tth_mem_plan.algo_bytes).
 * X(ENUM, value, name) */
#define TTH_MEMPLAN_ALGOS(X)                                                                    \
    X(GREEDY_BY_SIZE, 1, "greedy-by-size")           /* largest first, first fit */             \
    X(GREEDY_BY_CONFLICTS, 2, "greedy-by-conflicts") /* most conflicting bytes first, first fit */ \
    X(GREEDY_BY_START, 3, "greedy-by-start")         /* earliest start first (linear scan) */    \
    X(SEARCH, 4, "search")                           /* seeded local search over the order */

typedef enum tth_memplan_algo {
    TTH_MEMPLAN_BEST = 0,    /* run every algorithm, keep the smallest workspace */
#define TTH__MP_ENUM(e, v, n) TTH_MEMPLAN_##e = v,
    TTH_MEMPLAN_ALGOS(TTH__MP_ENUM)
#undef TTH__MP_ENUM
} tth_memplan_algo;
#define TTH_MEMPLAN_NALGOS 5 /* one past the largest value */

const char *tth_memplan_algo_name(tth_memplan_algo a); /* "greedy-by-size"; "best"; "unknown" */

/* One planned buffer: live from statement `start` to `end` (inclusive) of the entry. */
typedef struct tth_mem_item {
    tth_tbuffer *buf;
    int64_t start, end;
    size_t size;             /* bytes, rounded up to the alignment */
    uint32_t align;          /* its offset is a multiple of this */
    const char *func;        /* LOCAL: the PrimFunc it belongs to; WORKSPACE: the one computing it, or NULL */
    const char *node;        /* WORKSPACE: the ONNX node it is the output of, or NULL (tth_memplan_name) */
    const char *tensor;      /* WORKSPACE: that node's ONNX output tensor, or NULL */
} tth_mem_item;

typedef struct tth_mem_plan {
    tth_memplan_algo algo;   /* the algorithm whose placement was kept */
    uint32_t alignment;      /* of the workspace's base: the largest buffer alignment */
    size_t workspace_bytes;  /* the workspace the caller provides */
    size_t total_bytes;      /* sum of every planned buffer (no reuse) */
    size_t lower_bound_bytes;/* most bytes live at one time: no plan can do better */
    size_t algo_bytes[TTH_MEMPLAN_NALGOS]; /* workspace each algorithm reached; 0: not run */
    uint32_t search_iterations; /* placements the search tried */
    size_t conflicts;        /* edges of the conflict graph */
    int64_t steps;           /* statements of the entry (time runs 0 .. steps - 1, then
                                functions the entry never calls) */
    tth_mem_item *items;     /* malloc'd, in the entry's order of first use */
    size_t nitems;
} tth_mem_plan;

/* Give every WORKSPACE and LOCAL buffer of the module an offset (tth_tbuffer.offset) and write
 * its effective alignment into tth_tbuffer.align. Requires the module's entry (tth_aot_build).
 * Liveness comes from the entry's statement order, refined inside a called function whose body
 * is a sequence: one step per statement, a LOCAL buffer live from the first to the last statement
 * naming it (memplan.c); deeper LOCALs live during every call of their function. `alignment` (a power of two; the target's
 * workspace-byte-alignment) replaces the default 16 of buffers that kept it; a buffer asking for
 * more keeps its own; never below its element size. `algo`: one algorithm, or TTH_MEMPLAN_BEST. */
int tth_memplan_run(tth_tir_module *mod, uint32_t alignment, tth_memplan_algo algo,
                    tth_mem_plan *plan, tth_diag *diag);
/* The alignment planning gives buffer b under the workspace alignment `target`: the target's
 * replaces the default 16, a buffer asking for another keeps the larger; never below the element
 * size; a power of two. */
uint32_t tth_memplan_align(const tth_tbuffer *b, uint32_t target);
/* The same with slices (tth_aot_result.aliases): a part's uses count as its whole's, and the
 * part's offset is its whole's plus its own. */
int tth_memplan_run_aliased(tth_tir_module *mod, uint32_t alignment, tth_memplan_algo algo,
                            const tth_mem_alias *aliases, size_t naliases, tth_mem_plan *plan,
                            tth_diag *diag);
/* Place plan->items (lifetimes, sizes and alignments set; buf->offset is written) with `algo`:
 * fills total_bytes, lower_bound_bytes, algo_bytes, alignment (at least its value on entry),
 * workspace_bytes and algo. Returns 0 or TTH_ENOMEM. tth_memplan_run ends with it; tests and
 * bench/ call it to compare algorithms on the same buffers. */
int tth_memplan_place(tth_mem_plan *plan, tth_memplan_algo algo);
void tth_mem_plan_clear(tth_mem_plan *plan);
/* {"algorithm", "alignment", "workspace_bytes", "total_bytes", "lower_bound_bytes", "buffers": n,
 *  "conflicts", "algorithms": {name: workspace_bytes}, "search_iterations"} */
json_t *tth_mem_plan_summary(const tth_mem_plan *plan);
/* The summary plus every item: {"buffer", "scope", "function", "offset", "size", "align",
 * "live": [a, b]} */
json_t *tth_mem_plan_to_json(const tth_mem_plan *plan);
/* LOCAL bytes per PrimFunc: [{"function", "op", "local_bytes"}] in module order. */
json_t *tth_mem_plan_per_operator(const tth_tir_module *mod, const tth_mem_plan *plan);

/* ---- explain_svg.c ------------------------------------------------------------------------------ */

/* The plan as an SVG picture for people (malloc'd text; NULL on OOM): each buffer a rectangle,
 * time (statement of the entry) across, offset up, the lower bound as a dashed line, labels with
 * buffer names and sizes. Deterministic. */
char *tth_explain_memory_svg(const tth_mem_plan *plan, const char *model);

/* ---- build.c ---------------------------------------------------------------------------------- */

/* Compile and link the C sources and objects of the runtime modules into one host shared
 * object with the system C compiler (TTH_CC), in `scratch_dir` (or a private temporary
 * directory removed afterwards). *so is malloc'd. With a host that has a store of compiled code
 * (TTH_HOST_HAS_STORE), each source's object is taken from it when the same source, headers,
 * flags and compiler built it before, and kept there when compiled. */
int tth_build_shared(tth_runtime_module *const *mods, size_t nmods, const char *scratch_dir, const tth_host *host,
                     uint8_t **so, size_t *so_len, tth_diag *diag);

/* ---- package.c -------------------------------------------------------------------------------- */

typedef struct tth_package_input {
    const char *model;
    const json_t *target;           /* canonical */
    const tth_aot_result *aot;
    const tth_tir_module *tir;
    const tth_mem_plan *plan;
    tth_runtime_module *const *mods;
    size_t nmods;
    const uint8_t *so;              /* NULL when not built */
    size_t so_len;
    const char *relay_text;         /* the optimized Relay */
    const json_t *partition;        /* metadata "partition": which op went to which kind, why */
    const char *partition_dot;      /* explain/partition.dot when options.explain, else NULL */
    const tth_const_map *ext_consts;/* external modules' constants, stored with the parameters */
    int explain_memory;             /* options.explain: also explain/memory.svg (explain_svg.c) */
    const json_t *external;         /* the ONNX external data files read: metadata "external_data" */
    const json_t *profile;          /* a profiling artifact's metadata "profile" (docs/profiling.md), or NULL */
    const json_t *report_calls;     /* options.explain: the entry's calls (tth_profile_calls) for
                                       explain/report.json and report.html, else NULL */
} tth_package_input;

/* Write the artifact tar (deterministic: fixed order, times, owners) and its metadata. */
int tth_package_write(const tth_package_input *in, uint8_t **tar, size_t *tar_len, json_t **metadata,
                      tth_diag *diag);

/* Equal constants become one (consts.c): in the default lowering's functions, every load of a
 * constant buffer with the dtype, shape and bytes of an earlier one reads the earlier one.
 * *merged: how many buffers are no longer read. */
int tth_dedup_constants(tth_tir_module *m, size_t *merged, tth_diag *diag);

/* The C header of the AOT interface (malloc'd text). */
char *tth_package_header(const tth_package_input *in);

#endif
