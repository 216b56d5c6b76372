/* partition.h: composite-target partitioning (partition.c) and the hooks that run on its
 * regions (hooks.c). Internal to the compile pipeline. */
#ifndef TTH_PARTITION_H
#define TTH_PARTITION_H

#include <stddef.h>
#include <jansson.h>

#include "compile_internal.h"
#include "tth/artifact.h"
#include "tth/diag.h"
#include "tth/plugin.h"
#include "tth/registry.h"
#include "tth/relay.h"
#include "tth/tir.h"

/* One member of the target: its canonical JSON (borrowed from the request) and its plugin. */
typedef struct tth_part_kind {
    const char *kind;
    const json_t *target;
    const tth_plugin *plugin;
} tth_part_kind;

/* A region: a Relay function of main with attrs {"Compiler": kind, "global_symbol": ...}. */
typedef struct tth_part_region {
    tth_relay_function *fn;
    const tth_part_kind *kind;
    const char *global_symbol;   /* = fn->name */
} tth_part_region;

typedef struct tth_partition {
    tth_part_kind *kinds;        /* malloc'd; the last one is the fallback (host) kind */
    size_t nkinds;
    tth_part_region *regions;    /* malloc'd, in main's call order */
    size_t nregions;
    json_t *explain;             /* {"kinds", "fallback", "ops", "refusals", "regions"} */
    char *dot;                   /* Graphviz of main's ops coloured by kind (malloc'd) */
} tth_partition;

/* The members of `target` (a composite; a kind that needs a host, alone: it and its host; or one
 * plain target standing for itself), each resolved to its plugin. Every member but the last
 * needs partition_supports; the last must be able to host code (TTH_KIND_CAN_BE_HOST) and have
 * tir_to_runtime. */
int tth_partition_kinds(const json_t *target, const tth_registry *reg, tth_partition *p, tth_diag *diag);

/* Requires: main calls only ops (folded, DCE'd, before fusion). Asks every member but the last
 * which op calls it takes, outlines regions (connected, convex) into functions main calls, and
 * fills p->regions, p->explain and p->dot. */
int tth_partition_run(tth_relay_module *m, const tth_host *host, tth_partition *p, tth_diag *diag);

void tth_partition_clear(tth_partition *p);

/* The region `fn` is, or NULL. */
const tth_part_region *tth_partition_region(const tth_partition *p, const tth_relay_function *fn);

/* The value operand x of a call has inside an outlined function: a copy of a constant, else the
 * param standing for x (params[0 .. *np) stand for outside[0 .. *np); one is added, named p<n>,
 * the first time x is seen). NULL on out of memory. */
tth_rexpr *tth_part_operand(tth_relay_module *m, tth_rexpr *x, tth_rexpr **outside, tth_rexpr **params, size_t *np);

/* ---- hooks.c: the target hooks on regions, in docs/plugin-guide.md's order ---- */

/* Requires partitioning. relay_to_runtime for every region of a kind that exports it: one
 * runtime module per region in *mods (grown); then constant_updater for every region of a kind
 * that exports it: its constants in `consts` named "<kind>.<name>". */
int tth_hooks_relay_to_runtime(tth_partition *p, const tth_host *host, tth_runtime_module ***mods,
                               size_t *nmods, tth_const_map *consts, tth_diag *diag);

/* Requires partitioning. relay_to_tir for every region of a kind that exports it (and no
 * relay_to_runtime): its PrimFuncs join `tmod` with target_kind = the kind. Each region done
 * is appended to lowered[] (room for one per region). */
int tth_hooks_relay_to_tir(tth_partition *p, const tth_host *host, tth_tir_module *tmod,
                           tth_lowered *lowered, size_t *nlowered, tth_diag *diag);

/* Default lowering of a region of a kind with neither relay hook: one PrimFunc per op call
 * (target_kind = the kind) and the region's PrimFunc `global_symbol` calling them, with its
 * intermediates as LOCAL buffers. */
int tth_hooks_lower_region(tth_relay_module *m, const tth_part_region *r, tth_tir_module *tmod,
                           tth_diag *diag);

/* After the default lowering: an extern declaration (attrs {"extern": true}, empty body, kind
 * host_kind) of every relay_to_runtime region's symbol in tmod, appended to lowered[]. */
int tth_hooks_declare_external(tth_partition *p, tth_tir_module *tmod, const char *host_kind,
                               tth_lowered *lowered, size_t *nlowered, tth_diag *diag);

/* Requires memory planning. tir_to_runtime of every kind with PrimFuncs; the host builds the
 * PrimFuncs of kinds without tir_to_runtime. Appends one runtime module per kind to *mods; the
 * host's module comes first. */
int tth_hooks_tir_to_runtime(tth_partition *p, const tth_host *host, tth_tir_module *tmod,
                             tth_runtime_module ***mods, size_t *nmods, tth_diag *diag);

#endif
