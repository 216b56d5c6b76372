/* pipeline.c: tth_compile, the compile flow as one list of stages (see tth_compile below).
 *
 * Each stage is a function `stage_<name>(compile_state *)` that reads what earlier stages left in
 * the state and adds its own product; a failing stage returns a negative code with the diag
 * filled, and the driver prefixes the message with the stage's name. After a stage runs, its IR
 * is dumped into result->dumps when options.dump_ir names it (or "all").
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compile.h"
#include "compile_internal.h"
#include "frontend.h"
#include "lower.h"
#include "partition.h"
#include "tth/artifact.h"
#include "tth/relay.h"
#include "tth/target.h"
#include "tth/tir.h"

typedef struct compile_state {
    const tth_compile_request *req;
    tth_diag *diag;
    tth_host host;               /* req->host, or a default one */
    tth_host lent;               /* what hooks get: host's callbacks through ours, and progress */
    const char *stage;           /* the stage running, and its share of the request's progress */
    int stage_lo, stage_hi, stage_pct;
    const char *kind;            /* the host kind: the target's, or a composite's last */
    const tth_plugin *plugin;    /* the plugin whose tir_to_runtime builds it */
    tth_partition part;          /* target's members; partition's regions and explanation */
    const char *dump_ir;         /* options.dump_ir or NULL */
    int build_shared;
    uint32_t ws_align;
    json_t *dumps;
    json_t *timings;             /* [{"stage", "seconds"}] of the stages run so far */
    json_t *external;            /* the external data files the import read */
    json_t *node_outputs;        /* import: each ONNX node's output tensor names */
    unsigned store_hits, store_misses; /* the host's store of compiled code, as hooks and the
                                          build asked it (atomic: shards ask from threads) */
    /* products, in stage order */
    tth_relay_module *rmod;      /* import, optimize */
    char *relay_text;            /* optimize */
    tth_tir_module *tmod;        /* lower */
    tth_lowered *lowered;        /* lower */
    size_t nlowered;
    tth_aot_result aot;          /* aot */
    int profile;                 /* options.profile: timing hooks around the entry's calls */
    tth_profile_clock clock;     /* the hooks' clock: CLOCK_MONOTONIC, or a bare-metal counter */
    const char *mcpu;            /* the host kind's mcpu, or NULL (in the partition's target) */
    int reference;               /* options.reference: no strategy, no blocked layout */
    int64_t profile_calls;       /* aot: the calls timed */
    json_t *profile_meta;        /* aot: metadata "profile" */
    json_t *report_calls;        /* aot, options.explain: the entry's calls for the report page */
    tth_mem_plan plan;           /* memplan */
    tth_const_map *ext_consts;   /* relay_to_runtime: constants of external modules */
    tth_runtime_module **rts;    /* relay_to_runtime, codegen: the host kind's module first */
    size_t nrts;
    uint8_t *so;                 /* build */
    size_t so_len;
    uint8_t *tar;                /* package */
    size_t tar_len;
    json_t *metadata;
} compile_state;

typedef int (*stage_fn)(compile_state *s);
static void stage_progress(compile_state *s, int64_t done, int64_t total);

/* ---- helpers ------------------------------------------------------------------------------------ */

static int is_c_identifier(const char *s)
{
    if (!s || !*s || !(isalpha((unsigned char)*s) || *s == '_'))
        return 0;
    for (; *s; s++)
        if (!(isalnum((unsigned char)*s) || *s == '_'))
            return 0;
    return 1;
}

static void dump(compile_state *s, const char *stage, char *text /* freed */)
{
    if (text && s->dumps)
        json_object_set_new(s->dumps, stage, json_string(text));
    free(text);
}

/* the stages that leave IR to dump (options.dump_ir), in flow order, then "all" */
static const char *const dump_stages[] = {"import", "partition", "layout", "optimize", "lower", "aot",
                                          "memplan", "codegen", "all"};
#define NDUMP_STAGES (sizeof dump_stages / sizeof dump_stages[0])

/* options.dump_ir, when given, is one of dump_stages: a misspelled stage would otherwise compile
 * without dumping anything and without saying why */
static int check_dump_ir(const json_t *v, const char **out, tth_diag *diag)
{
    *out = NULL;
    if (!v)
        return 0;
    const char *name = json_string_value(v);
    if (name)
        for (size_t i = 0; i < NDUMP_STAGES; i++)
            if (strcmp(name, dump_stages[i]) == 0) {
                *out = dump_stages[i];
                return 0;
            }
    char list[160] = "", near[128];
    for (size_t i = 0; i < NDUMP_STAGES; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", dump_stages[i]);
    int rc = tth_diag_set(diag, TTH_EINVAL, "options.dump_ir", "%s%s%s is not a stage with IR to dump",
                          name ? "'" : "", name ? name : "the value", name ? "'" : "");
    if (name && tth_nearest_names(name, dump_stages, NDUMP_STAGES, 1, near, sizeof near) > 0)
        tth_diag_hint(diag, "did you mean %s? (the stages: %s)", near, list);
    else
        tth_diag_hint(diag, "give one of: %s", list);
    return rc;
}

static int wants_dump(const compile_state *s, const char *stage)
{
    return s->dump_ir && (strcmp(s->dump_ir, "all") == 0 || strcmp(s->dump_ir, stage) == 0);
}

/* Same architecture and OS as this machine: the host can run what is built. */
static int triple_is_host(const char *triple)
{
    const char *h = tth_host_triple();
    if (!triple || !*triple)
        return 1;
    if (!h)
        return 0;
    size_t a = strcspn(triple, "-"), b = strcspn(h, "-");
    if (a != b || strncmp(triple, h, a) != 0)
        return 0;
    return strstr(triple, "linux") != NULL && strstr(h, "linux") != NULL;
}

/* A target without an mtriple can still name a CPU of another architecture (keys arm_cpu or
 * x86_64 from its parser, or an M-profile mcpu, which never runs this OS): code for it cannot
 * be loaded here, so no host library is built by default. */
static int cpu_is_host(const json_t *t)
{
    const char *h = tth_host_triple();
    if (!h)
        return 0;
    int host_arm = strncmp(h, "aarch64", 7) == 0 || strncmp(h, "arm", 3) == 0;
    int host_x86 = strncmp(h, "x86_64", 6) == 0;
    size_t i;
    json_t *k;
    json_array_foreach(json_object_get(t, "keys"), i, k) {
        const char *key = json_string_value(k);
        if (key && strcmp(key, "arm_cpu") == 0 && !host_arm)
            return 0;
        if (key && strcmp(key, "x86_64") == 0 && !host_x86)
            return 0;
    }
    const char *mcpu = json_string_value(json_object_get(t, "mcpu"));
    return !(mcpu && strncmp(mcpu, "cortex-m", 8) == 0);
}

/* ---- stages ------------------------------------------------------------------------------------- */

/* target: resolve every kind to its plugin (a composite's last kind is the host, the fallback of
 * partitioning); requires a canonical target. */
static int stage_target(compile_state *s)
{
    int rc = tth_partition_kinds(s->req->target, s->req->registry, &s->part, s->diag);
    if (rc)
        return rc;
    const json_t *t = s->part.kinds[s->part.nkinds - 1].target;
    tth_relay_fold_for(t); /* folded constants get the host kind's bits (until the compile ends) */
    s->kind = s->part.kinds[s->part.nkinds - 1].kind;
    s->plugin = s->part.kinds[s->part.nkinds - 1].plugin;
    if (!s->plugin->tir_to_runtime) {
        tth_diag_set(s->diag, TTH_EUNSUPPORTED, "target", "target kind '%s' (plugin '%s') has no "
                     "tir_to_runtime hook and cannot be compiled on its own", s->kind,
                     s->plugin->desc->plugin_name);
        tth_diag_hint(s->diag, "use it in a composite target with a host kind, e.g. '%s,c'", s->kind);
        return TTH_EUNSUPPORTED;
    }
    json_t *wa = json_object_get(t, "workspace-byte-alignment");
    s->ws_align = json_is_integer(wa) ? (uint32_t)json_integer_value(wa) : 16;
    if (s->ws_align == 0 || (s->ws_align & (s->ws_align - 1)) != 0)
        return tth_diag_set(s->diag, TTH_EINVAL, "target", "workspace-byte-alignment %u is not a "
                            "power of two", s->ws_align);
    s->profile = json_is_true(json_object_get(s->req->options, "profile"));
    const json_t *ref = json_object_get(s->req->options, "reference");
    if (ref && !json_is_boolean(ref))
        return tth_diag_set(s->diag, TTH_EINVAL, "options.reference", "reference must be true or false");
    s->reference = json_is_true(ref);
    const char *mtriple = json_string_value(json_object_get(t, "mtriple"));
    const char *mcpu = json_string_value(json_object_get(t, "mcpu"));
    /* bare metal (a Cortex-M mcpu, a triple without an OS): the hooks count cycles instead of
     * reading CLOCK_MONOTONIC (docs/profiling.md, "Bare metal") */
    s->clock = TTH_CLOCK_MONOTONIC;
    s->mcpu = mcpu;
    if ((mtriple && !strstr(mtriple, "linux")) || (mcpu && strncmp(mcpu, "cortex-m", 8) == 0))
        s->clock = mcpu && tth_cpu_has_cycle_counter(mcpu) ? TTH_CLOCK_DWT : TTH_CLOCK_APPLICATION;
    const json_t *bs = json_object_get(s->req->options, "build_shared");
    int host_kind = (s->plugin->desc->flags & TTH_KIND_CAN_BE_HOST) != 0;
    s->build_shared = json_is_boolean(bs) ? json_is_true(bs)
                      : host_kind && triple_is_host(json_string_value(json_object_get(t, "mtriple")))
                            && cpu_is_host(t);
    return 0;
}

/* import: ONNX bytes → Relay ("main" takes the graph inputs but those options.bind fixes, with
 * the shapes options.input_shapes gives; with options.explain a note names each bound input). */
static int stage_import(compile_state *s)
{
    const json_t *bind = json_object_get(s->req->options, "bind");
    /* the ONNX tensor names are for the explanations and profiles only (docs/profiling.md) */
    int names = s->profile || json_is_true(json_object_get(s->req->options, "explain")) || wants_dump(s, "memplan");
    tth_onnx_external ext = {.dir = s->req->model_dir, .used = s->external, .node_outputs = names ? s->node_outputs : NULL,
                             .bytes_mapped = s->req->model_mapped};
    int rc = tth_onnx_import_ext(s->req->model, s->req->model_len, s->req->model_name, bind,
                                 json_object_get(s->req->options, "input_shapes"), &ext, &s->rmod, s->diag);
    if (rc == 0 && bind && json_is_true(json_object_get(s->req->options, "explain")) && s->host.log) {
        const char *name;
        const json_t *v;
        json_object_foreach((json_t *)bind, name, v) {
            char msg[TTH_DIAG_MESSAGE_MAX];
            snprintf(msg, sizeof msg, "bind: input '%s' is a constant (%s, %zu elements) given at compile time", name,
                     json_string_value(json_object_get(v, "dtype")), json_array_size(json_object_get(v, "data")));
            s->host.log(s->host.ctx, TTH_SEV_INFO, msg);
        }
    }
    if (rc == 0 && wants_dump(s, "import"))
        dump(s, "import", tth_relay_print(s->rmod));
    return rc;
}

/* The QDQ pass (daemon/frontend/qdq.c) leaves the quantized-looking convolutions and dense
 * layers it kept float, each with its reason, in main's attrs "qdq_refused": with options.explain
 * each becomes a note (tthctl prints them); the list leaves the module either way. */
static void note_qdq_refusals(compile_state *s)
{
    tth_relay_function *fn = tth_relay_module_main(s->rmod);
    json_t *list = fn && json_is_object(fn->attrs) ? json_object_get(fn->attrs, "qdq_refused") : NULL;
    if (!list)
        return;
    if (json_is_true(json_object_get(s->req->options, "explain")) && s->host.log) {
        size_t i;
        json_t *r;
        json_array_foreach(list, i, r) {
            char msg[TTH_DIAG_MESSAGE_MAX];
            snprintf(msg, sizeof msg, "qdq: %s '%s' stays float: %s", json_string_value(json_object_get(r, "op")),
                     json_string_value(json_object_get(r, "node")), json_string_value(json_object_get(r, "reason")));
            s->host.log(s->host.ctx, TTH_SEV_INFO, msg);
        }
    }
    json_object_del(fn->attrs, "qdq_refused");
}

/* simplify: QDQ to quantized operators, fold constants and batch norm, DCE (tth_relay_simplify:
 * the pass list the tests run too); requires a typed module. */
/* ---- constants dropped early (docs/tthctl.md, "Large models") ----
 * A sorted list of constant tensors, each with a count: the functions still to lower that read
 * it, or 1 for "some function reads it". */
typedef struct tensor_count {
    const tth_tensor *t;
    int n;
} tensor_count;

typedef struct tensor_counts {
    tensor_count *v;
    size_t n, cap;
} tensor_counts;

static int by_tensor(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const tensor_count *)a)->t, y = (uintptr_t)((const tensor_count *)b)->t;
    return (x > y) - (x < y);
}

static tensor_count *tensor_find(const tensor_counts *c, const tth_tensor *t)
{
    tensor_count key = {t, 0};
    return c->n ? bsearch(&key, c->v, c->n, sizeof *c->v, by_tensor) : NULL;
}

/* The constants fn reads, once per function (a tensor read twice in fn counts once) */
static int add_function_constants(tth_relay_module *m, const tth_relay_function *fn, tensor_counts *c)
{
    tth_rexpr **nodes = NULL;
    int64_t n = tth_relay_topo(m, fn, &nodes);
    if (n < 0)
        return TTH_ENOMEM;
    size_t first = c->n;
    for (int64_t i = 0; i < n; i++) {
        const tth_tensor *t = nodes[i]->kind == TTH_REXPR_CONST ? nodes[i]->u.constant.value : NULL;
        int dup = 0;
        for (size_t k = first; t && k < c->n && !dup; k++)
            dup = c->v[k].t == t;
        if (!t || dup)
            continue;
        if (c->n == c->cap) {
            size_t cap = c->cap ? 2 * c->cap : 64;
            tensor_count *v = realloc(c->v, cap * sizeof *v);
            if (!v)
                return TTH_ENOMEM;
            c->v = v;
            c->cap = cap;
        }
        c->v[c->n].t = t;
        c->v[c->n++].n = 1;
    }
    return 0;
}

/* Sorted, one entry per tensor with the number of functions that read it */
static void tensor_counts_merge(tensor_counts *c)
{
    if (!c->n)
        return;
    qsort(c->v, c->n, sizeof *c->v, by_tensor);
    size_t k = 0;
    for (size_t i = 1; i < c->n; i++) {
        if (c->v[i].t == c->v[k].t)
            c->v[k].n += c->v[i].n;
        else
            c->v[++k] = c->v[i];
    }
    c->n = k + 1;
}

static int keep_counted(void *ctx, const tth_tensor *t)
{
    const tensor_count *e = tensor_find(ctx, t);
    return !e || e->n > 0; /* unknown (not a lowered function's): kept */
}

static int keep_read(void *ctx, const tth_tensor *t)
{
    return tensor_find(ctx, t) != NULL;
}

/* Folding replaced constants by others (a transposed weight for Gemm's transB, a folded
 * batch norm): the ones no function reads any more are freed now, not when the module is. */
static void drop_dead_constants(compile_state *s)
{
    tensor_counts c = {0};
    int rc = 0;
    for (size_t i = 0; i < s->rmod->nfuncs && !rc; i++)
        rc = add_function_constants(s->rmod, s->rmod->funcs[i], &c);
    if (!rc) {
        tensor_counts_merge(&c);
        tth_relay_module_drop_constants_if(s->rmod, keep_read, &c);
    }
    free(c.v);
}

static int stage_simplify(compile_state *s)
{
    int rc = tth_relay_simplify(s->rmod, s->diag);
    if (rc == 0) {
        note_qdq_refusals(s);
        drop_dead_constants(s);
    }
    return rc;
}

/* A member of a composite target that took no operator is most often a mistake (a float model
 * for an int8 library, a kind that wants other layouts): say so as a warning, with the reasons
 * it gave most often, instead of compiling everything for the fallback kind in silence. */
static void warn_idle_kinds(compile_state *s)
{
    const json_t *ex = s->part.explain;
    if (!ex || s->part.nkinds < 2 || !s->host.log)
        return;
    const json_t *ops = json_object_get(ex, "ops"), *refusals = json_object_get(ex, "refusals");
    for (size_t k = 0; k + 1 < s->part.nkinds; k++) {
        const char *kind = s->part.kinds[k].kind;
        size_t taken = 0, i;
        json_t *o;
        json_array_foreach(ops, i, o)
            taken += strcmp(json_string_value(json_object_get(o, "kind")), kind) == 0;
        if (taken)
            continue;
        /* how many operators gave each reason (a JSON object as the counter), then the three
         * most frequent */
        json_t *counts = json_object();
        size_t nref = 0;
        json_array_foreach(refusals, i, o) {
            const char *r = json_string_value(json_object_get(o, "reason"));
            if (!counts || !r || strcmp(json_string_value(json_object_get(o, "kind")), kind) != 0)
                continue;
            nref++;
            json_object_set_new(counts, r, json_integer(json_integer_value(json_object_get(counts, r)) + 1));
        }
        const char *why[3] = {0};
        size_t count[3] = {0};
        const char *r;
        json_t *c;
        json_object_foreach(counts, r, c) {
            size_t n = (size_t)json_integer_value(c);
            for (int t = 0; t < 3; t++)
                if (!why[t] || n > count[t]) {
                    for (int u = 2; u > t; u--) {
                        why[u] = why[u - 1];
                        count[u] = count[u - 1];
                    }
                    why[t] = r;
                    count[t] = n;
                    break;
                }
        }
        char msg[1536];
        int n = snprintf(msg, sizeof msg, "target kind '%s' took none of the model's operators: everything runs "
                         "on '%s'", kind, s->part.kinds[s->part.nkinds - 1].kind);
        for (int t = 0; t < 3 && why[t] && n > 0 && (size_t)n < sizeof msg; t++)
            n += snprintf(msg + n, sizeof msg - (size_t)n, "%s%s (%zu operator%s)", t ? "; " : "; it said: ",
                          why[t], count[t], count[t] == 1 ? "" : "s");
        if (!nref && n > 0 && (size_t)n < sizeof msg)
            snprintf(msg + n, sizeof msg - (size_t)n, " (it was asked about no operator)");
        s->host.log(s->host.ctx, TTH_SEV_WARNING, msg);
        json_decref(counts);
    }
}

/* partition: op calls → regions of the composite target's kinds; requires simplify, not fused. */
static int stage_partition(compile_state *s)
{
    int rc = tth_partition_run(s->rmod, &s->lent, &s->part, s->diag);
    if (rc == 0)
        warn_idle_kinds(s);
    if (rc == 0 && wants_dump(s, "partition"))
        dump(s, "partition", tth_relay_print(s->rmod));
    return rc;
}

/* layout: main's convolutions and what lies between them in blocked channels, NCHW<b>c with b
 * the lanes of the fallback target's vectors (docs/layouts.md); targets with scalar code keep
 * NCHW. Requires partition (only main's own operators move), before fusion. */
static int stage_layout(compile_state *s)
{
    tth_vector_shape vs = tth_target_vector_shape(s->part.kinds[s->part.nkinds - 1].target);
    tth_layout_stats st;
    int rc = vs.f32_lanes >= 4 && !s->reference ? tth_relay_alter_layout(s->rmod, vs.f32_lanes, &st, s->diag) : 0;
    if (rc == 0 && vs.f32_lanes >= 4 && st.convs && json_is_true(json_object_get(s->req->options, "explain")) &&
        s->host.log) {
        char msg[256];
        snprintf(msg, sizeof msg, "layout: %d of %d convolutions in blocked channels NCHW%dc, %d layout change%s "
                 "into blocks and %d back to NCHW (docs/layouts.md)", st.blocked, st.convs, (int)vs.f32_lanes,
                 st.to_blocked, st.to_blocked == 1 ? "" : "s", st.to_plain);
        s->host.log(s->host.ctx, TTH_SEV_INFO, msg);
    }
    if (rc == 0 && wants_dump(s, "layout"))
        dump(s, "layout", tth_relay_print(s->rmod));
    return rc;
}

/* optimize: fuse main's remaining op calls into primitive functions; requires partition. */
static int stage_optimize(compile_state *s)
{
    int rc = tth_relay_fuse(s->rmod, s->diag);
    if (rc)
        return rc;
    /* the functions that run only when a condition decided at run time picks their branch */
    size_t guarded = 0, fns = 0;
    for (size_t i = 0; i < s->rmod->nfuncs; i++)
        if (s->rmod->funcs[i]->attrs && json_object_get(s->rmod->funcs[i]->attrs, "Primitive")) {
            fns++;
            guarded += json_object_get(s->rmod->funcs[i]->attrs, "Guard") != NULL;
        }
    if (guarded && json_is_true(json_object_get(s->req->options, "explain")) && s->host.log) {
        char msg[200];
        snprintf(msg, sizeof msg, "control flow: %zu of %zu functions run only when a condition known at run time "
                 "picks their branch (docs/operators.md, \"Control flow\")", guarded, fns);
        s->host.log(s->host.ctx, TTH_SEV_INFO, msg);
    }
    s->relay_text = tth_relay_print(s->rmod);
    if (!s->relay_text)
        return tth_diag_set(s->diag, TTH_ENOMEM, NULL, "out of memory printing Relay");
    if (wants_dump(s, "optimize"))
        dump(s, "optimize", strdup(s->relay_text));
    return 0;
}

/* The op a primitive function is named after: its anchor (first non-elementwise op), else its
 * first op. */
static const char *function_op(tth_relay_module *m, const tth_relay_function *fn)
{
    tth_rexpr **nodes = NULL;
    int64_t n = tth_relay_topo(m, fn, &nodes);
    const char *first = NULL;
    for (int64_t i = 0; i < n; i++) {
        const tth_rexpr *e = nodes[i];
        if (e->kind != TTH_REXPR_CALL || e->u.call.op == TTH_OP_INVALID)
            continue;
        if (!first)
            first = tth_op_name(e->u.call.op);
        if (!tth_op_is_elementwise(e->u.call.op))
            return tth_op_name(e->u.call.op);
    }
    return first ? first : "copy";
}

/* relay_to_runtime: external modules (+ constant_updater) for regions of kinds exporting it;
 * requires partition. */
static int stage_relay_to_runtime(compile_state *s)
{
    tth_relay_function *main_fn = tth_relay_module_main(s->rmod);
    tth_rexpr **nodes = NULL;
    int64_t n = main_fn ? tth_relay_topo(s->rmod, main_fn, &nodes) : -1;
    s->tmod = tth_tir_module_new();
    s->ext_consts = tth_const_map_new();
    s->lowered = n >= 0 ? calloc((size_t)n + 1, sizeof *s->lowered) : NULL;
    if (!s->tmod || !s->ext_consts || !s->lowered)
        return tth_diag_set(s->diag, TTH_ENOMEM, NULL, "out of memory");
    int rc = tth_hooks_relay_to_runtime(&s->part, &s->lent, &s->rts, &s->nrts, s->ext_consts, s->diag);
    if (rc == 0)
        rc = tth_hooks_declare_external(&s->part, s->tmod, s->kind, s->lowered, &s->nlowered, s->diag);
    /* a module's meta "explain" (docs/plugin-guide.md): its notes for --explain */
    if (rc == 0 && json_is_true(json_object_get(s->req->options, "explain")) && s->host.log)
        for (size_t m = 0; m < s->nrts; m++) {
            size_t i;
            const json_t *note;
            json_array_foreach(json_object_get(tth_runtime_module_meta(s->rts[m]), "explain"), i, note)
                if (json_is_string(note))
                    s->host.log(s->host.ctx, TTH_SEV_INFO, json_string_value(note));
        }
    return rc;
}

/* relay_to_tir: PrimFuncs for regions of kinds exporting it join the module; requires partition. */
static int stage_relay_to_tir(compile_state *s)
{
    return tth_hooks_relay_to_tir(&s->part, &s->lent, s->tmod, s->lowered, &s->nlowered, s->diag);
}

/* A function of constants only computes the same value on every call: the folder evaluates
 * such code at compile time (docs/operators.md, "Constant folding"). With options.explain, one
 * that is left in the code is named, with the reason the folder gave. */
static void note_constant_function(compile_state *s, const tth_rexpr *call, const char *name)
{
    char why[384];
    if (!json_is_true(json_object_get(s->req->options, "explain")) || !s->host.log ||
        !tth_relay_constant_call_why(s->rmod, call, why, sizeof why))
        return;
    char msg[TTH_DIAG_MESSAGE_MAX];
    snprintf(msg, sizeof msg, "constants: '%s' computes a function of constants only on every call: %s", name, why);
    s->host.log(s->host.ctx, TTH_SEV_INFO, msg);
}

/* Lower each function main calls once (regions of kinds with no relay hook through the default
 * lowering too), dropping constants as their last reader is lowered (stage_lower). */
typedef struct lower_order {
    int64_t node;
    size_t bytes; /* the constants its function reads */
} lower_order;

static int lower_in_order(compile_state *s, tth_rexpr **nodes, int64_t n, const lower_order *order,
                          tensor_counts *readers, size_t *lowered_bytes);

static int by_bytes_desc(const void *a, const void *b)
{
    const lower_order *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? 1 : -1;
    return (x->node > y->node) - (x->node < y->node);
}

static int lower_functions(compile_state *s, tth_rexpr **nodes, int64_t n, tensor_counts *readers,
                           size_t *lowered_bytes)
{
    /* the functions with the most constant bytes first: a large weight and its packed copy are
     * both in memory only while few other packed copies are (VGG-11's 392 MiB classifier weight
     * was packed after the convolutions' Winograd filters, on top of them) */
    lower_order *order = calloc((size_t)n + 1, sizeof *order);
    if (!order)
        return tth_diag_set(s->diag, TTH_ENOMEM, NULL, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        order[i].node = i;
        const tth_rexpr *e = nodes[i];
        tensor_counts mine = {0};
        if (e->kind == TTH_REXPR_CALL && e->u.call.fn && !add_function_constants(s->rmod, e->u.call.fn, &mine))
            for (size_t k = 0; k < mine.n; k++)
                order[i].bytes += mine.v[k].t->nbytes;
        free(mine.v);
    }
    qsort(order, (size_t)n, sizeof *order, by_bytes_desc);
    int rc = lower_in_order(s, nodes, n, order, readers, lowered_bytes);
    free(order);
    return rc;
}

static int lower_in_order(compile_state *s, tth_rexpr **nodes, int64_t n, const lower_order *order,
                          tensor_counts *readers, size_t *lowered_bytes)
{
    for (int64_t j = 0; j < n; j++) {
        int64_t i = order[j].node;
        const tth_rexpr *e = nodes[i];
        stage_progress(s, j, n);
        if (e->kind != TTH_REXPR_CALL || !e->u.call.fn)
            continue;
        const tth_relay_function *fn = e->u.call.fn;
        int seen = 0;
        for (size_t k = 0; k < s->nlowered && !seen; k++)
            seen = s->lowered[k].fn == fn;
        if (seen)
            continue;
        const tth_part_region *region = tth_partition_region(&s->part, fn);
        if (region) { /* a region of a kind with neither relay hook: the default lowering */
            int rc = tth_hooks_lower_region(s->rmod, region, s->tmod, s->diag);
            if (rc)
                return rc;
            s->lowered[s->nlowered].fn = fn;
            s->lowered[s->nlowered++].prim_name = region->global_symbol;
            continue;
        }
        char name[256];
        snprintf(name, sizeof name, "%s_fused_%s_%zu", s->req->model_name, function_op(s->rmod, fn),
                 s->nlowered);
        for (char *p = name; *p; p++)
            if (!isalnum((unsigned char)*p) && *p != '_')
                *p = '_';
        /* options.reference: the generic lowering of every op, no strategy (tthctl validate) */
        if (s->reference && fn->attrs && json_object_set_new(fn->attrs, "Generic", json_true()) != 0)
            return TTH_ENOMEM;
        tth_prim_func *pf = tth_lower_primitive(s->tmod, fn, name, s->part.kinds[s->part.nkinds - 1].target, s->diag);
        if (!pf) {
            if (s->diag && !s->diag->location[0] && e->span)
                snprintf(s->diag->location, sizeof s->diag->location, "node '%s'", e->span);
            return s->diag && s->diag->code ? s->diag->code : TTH_EINTERNAL;
        }
        s->lowered[s->nlowered].fn = fn;
        s->lowered[s->nlowered].prim_name = pf->name;
        s->nlowered++;
        note_constant_function(s, e, pf->name);
        /* this function's constants have one reader fewer */
        tensor_counts mine = {0};
        if (add_function_constants(s->rmod, fn, &mine)) {
            free(mine.v);
            return tth_diag_set(s->diag, TTH_ENOMEM, NULL, "out of memory");
        }
        for (size_t k = 0; k < mine.n; k++) {
            tensor_count *r = tensor_find(readers, mine.v[k].t);
            if (r && --r->n == 0)
                *lowered_bytes += mine.v[k].t->nbytes;
        }
        free(mine.v);
        if (*lowered_bytes >= (64u << 20)) {
            tth_relay_module_drop_constants_if(s->rmod, keep_counted, readers);
            *lowered_bytes = 0;
        }
    }
    return 0;
}

/* lower: every primitive function main calls → a PrimFunc `<model>_fused_<op>_<n>`, in call
 * order; requires fusion (optimize). */
static int stage_lower(compile_state *s)
{
    tth_relay_function *main_fn = tth_relay_module_main(s->rmod);
    if (!s->tmod || !main_fn)
        return tth_diag_set(s->diag, s->tmod ? TTH_EINVAL : TTH_ENOMEM, NULL,
                            s->tmod ? "the model has no main function" : "out of memory");
    tth_rexpr **nodes = NULL;
    int64_t n = tth_relay_topo(s->rmod, main_fn, &nodes);
    if (n < 0)
        return tth_diag_set(s->diag, TTH_ENOMEM, NULL, "out of memory");
    /* each constant's data is freed once every function that reads it is lowered and the TIR
     * took what it needs (a packed copy, or a reference), checked every 64 MiB of constants
     * lowered: the imported weights and their packed copies are not all in memory at once */
    tensor_counts readers = {0};
    for (int64_t i = 0; i < n; i++)
        if (nodes[i]->kind == TTH_REXPR_CALL && nodes[i]->u.call.fn &&
            !tth_partition_region(&s->part, nodes[i]->u.call.fn) &&
            add_function_constants(s->rmod, nodes[i]->u.call.fn, &readers)) {
            free(readers.v);
            return tth_diag_set(s->diag, TTH_ENOMEM, NULL, "out of memory");
        }
    tensor_counts_merge(&readers);
    size_t lowered_bytes = 0;
    int rc = lower_functions(s, nodes, n, &readers, &lowered_bytes);
    tth_relay_module_drop_constants_if(s->rmod, keep_counted, &readers);
    free(readers.v);
    if (rc)
        return rc;
    size_t merged = 0;
    rc = tth_dedup_constants(s->tmod, &merged, s->diag);
    if (rc)
        return rc;
    if (merged && json_is_true(json_object_get(s->req->options, "explain")) && s->host.log) {
        char msg[160];
        snprintf(msg, sizeof msg, "constants stored once: %zu %s equal to another (docs/artifact.md)", merged,
                 merged == 1 ? "was" : "were");
        s->host.log(s->host.ctx, TTH_SEV_INFO, msg);
    }
    if (wants_dump(s, "lower"))
        dump(s, "lower", tth_tir_print(s->tmod));
    return 0;
}

/* aot: the entry tth_<model>_run calling every PrimFunc in main's order; requires lower. */
static int stage_aot(compile_state *s)
{
    int rc = tth_aot_build(s->rmod, s->tmod, s->lowered, s->nlowered, s->req->model_name, s->kind,
                           s->ws_align, &s->aot, s->diag);
    if (rc)
        return rc;
    if ((s->aot.views || s->aot.joins) && json_is_true(json_object_get(s->req->options, "explain")) && s->host.log) {
        char msg[300];
        snprintf(msg, sizeof msg,
                 "no code for %zu %s and %zu %s: their results are slices of other tensors' memory "
                 "(docs/lowering.md, \"Views\" and \"Concatenation in place\")",
                 s->aot.views, s->aot.views == 1 ? "view (a reshape, transpose or slice that moves nothing)"
                                                 : "views (reshapes, transposes and slices that move nothing)",
                 s->aot.joins, s->aot.joins == 1 ? "concatenation" : "concatenations");
        s->host.log(s->host.ctx, TTH_SEV_INFO, msg);
    }
    /* the entry's calls (before any timing hooks), once, for the report page and the profile */
    if ((json_is_true(json_object_get(s->req->options, "explain")) || s->profile) &&
        !(s->report_calls = tth_profile_calls(s->rmod, s->tmod, s->aot.entry, s->lowered, s->nlowered,
                                                         s->node_outputs)))
        return tth_diag_set(s->diag, TTH_ENOMEM, "aot", "out of memory");
    if (s->profile) {
        char model[300];
        snprintf(model, sizeof model, "%s", s->req->model_name);
        int bare = s->clock != TTH_CLOCK_MONOTONIC;
        s->profile_meta = json_pack("{s:O, s:s}", "calls", s->report_calls, "clock",
                                    s->clock == TTH_CLOCK_DWT ? "DWT_CYCCNT" : bare ? "application" : "CLOCK_MONOTONIC");
        if (!s->profile_meta || !json_object_get(s->profile_meta, "calls"))
            return tth_diag_set(s->diag, TTH_ENOMEM, "aot", "out of memory");
        char sym[400], M[300];
        snprintf(sym, sizeof sym, "tth_%s_profile_%s", model, bare ? "cycles" : "ns");
        json_object_set_new(s->profile_meta, bare ? "cycles_symbol" : "ns_symbol", json_string(sym));
        snprintf(sym, sizeof sym, "tth_%s_profile_calls", model);
        json_object_set_new(s->profile_meta, "calls_symbol", json_string(sym));
        if (bare) {
            tth_upper_name(M, model, sizeof M);
            snprintf(sym, sizeof sym, "TTH_%s_PROFILE_CLOCK", M);
            json_object_set_new(s->profile_meta, "clock_macro", json_string(sym));
        }
        s->profile_calls = tth_aot_add_timing(s->tmod, s->aot.entry, s->req->model_name, s->diag);
        if (s->profile_calls < 0)
            return (int)s->profile_calls;
    }
    rc = tth_tir_verify(s->tmod, s->diag);
    if (rc)
        return rc;
    if (wants_dump(s, "aot"))
        dump(s, "aot", tth_tir_print_func(s->aot.entry));
    return 0;
}

/* memplan: offsets for every WORKSPACE and LOCAL buffer; requires aot. */
static int stage_memplan(compile_state *s)
{
    int rc = tth_memplan_run_aliased(s->tmod, s->ws_align, TTH_MEMPLAN_BEST, s->aot.aliases, s->aot.naliases,
                                     &s->plan, s->diag);
    /* each tensor's ONNX node, for the plan's labels (explain/memory.svg, the dump) */
    for (size_t i = 0; rc == 0 && i < s->plan.nitems; i++)
        for (size_t k = 0; k < s->aot.nnodes; k++)
            if (s->aot.nodes[k].buf == s->plan.items[i].buf) {
                s->plan.items[i].node = s->aot.nodes[k].node;
                s->plan.items[i].func = s->aot.nodes[k].func;
                /* its tensor: the node's output (the first, for a node of several) */
                s->plan.items[i].tensor = s->aot.nodes[k].node ? json_string_value(json_array_get(
                                              json_object_get(s->node_outputs, s->aot.nodes[k].node), 0)) : NULL;
                break;
            }
    if (rc == 0 && wants_dump(s, "memplan")) {
        json_t *j = tth_mem_plan_to_json(&s->plan);
        dump(s, "memplan", j ? json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL);
        json_decref(j);
    }
    return rc;
}

/* codegen: each kind's TIR → its tir_to_runtime (the host builds kinds without one); requires
 * memplan. */
static int stage_codegen(compile_state *s)
{
    int rc = tth_hooks_tir_to_runtime(&s->part, &s->lent, s->tmod, &s->rts, &s->nrts, s->diag);
    if (rc)
        return rc;
    if (s->profile && s->nrts) { /* the timing hooks, beside the host kind's code */
        char *src = tth_profile_source(s->req->model_name, s->profile_calls, s->clock, s->mcpu);
        char name[300];
        snprintf(name, sizeof name, "%s_profile.c", s->req->model_name);
        rc = src ? tth_runtime_module_add_file(s->rts[0], name, TTH_FILE_C_SOURCE, src, strlen(src), s->diag)
                 : tth_diag_set(s->diag, TTH_ENOMEM, "codegen", "out of memory");
        free(src);
        if (rc)
            return rc;
    }
    if (wants_dump(s, "codegen")) {
        size_t total = 1;
        for (size_t m = 0; m < s->nrts; m++)
            for (size_t i = 0; i < tth_runtime_module_count(s->rts[m]); i++)
                total += tth_runtime_module_file(s->rts[m], i)->len + 256;
        char *text = malloc(total), *p = text;
        for (size_t m = 0; m < s->nrts; m++)
        for (size_t i = 0; text && i < tth_runtime_module_count(s->rts[m]); i++) {
            const tth_module_file *f = tth_runtime_module_file(s->rts[m], i);
            if (f->kind != TTH_FILE_C_SOURCE && f->kind != TTH_FILE_C_HEADER)
                continue;
            p += sprintf(p, "// ---- %s\n", f->name);
            memcpy(p, f->data, f->len);
            p += f->len;
        }
        if (text)
            *p = 0;
        dump(s, "codegen", text);
    }
    return 0;
}

/* build: the host .so from the generated sources with the system C compiler, when asked. */
static int stage_build(compile_state *s)
{
    if (!s->build_shared)
        return 0;
    return tth_build_shared(s->rts, s->nrts, s->host.scratch_dir, &s->lent, &s->so, &s->so_len, s->diag);
}

/* package: the artifact tar and its metadata; requires everything above. */
static int stage_package(compile_state *s)
{
    /* nothing reads the Relay constants from here: the imported weights the TIR does not hold
     * (transformed or packed into other tensors) go before the artifact takes their size */
    tth_relay_module_drop_constants(s->rmod);
    tth_package_input in = {
        .model = s->req->model_name,
        .target = s->req->target,
        .aot = &s->aot,
        .tir = s->tmod,
        .plan = &s->plan,
        .mods = s->rts,
        .nmods = s->nrts,
        .so = s->so,
        .so_len = s->so_len,
        .relay_text = s->relay_text,
        .partition = s->part.explain,
        .partition_dot = json_is_true(json_object_get(s->req->options, "explain")) ? s->part.dot : NULL,
        .ext_consts = s->ext_consts,
        .explain_memory = json_is_true(json_object_get(s->req->options, "explain")),
        .external = s->external,
        .profile = s->profile_meta,
        .report_calls = json_is_true(json_object_get(s->req->options, "explain")) ? s->report_calls : NULL,
    };
    return tth_package_write(&in, &s->tar, &s->tar_len, &s->metadata, s->diag);
}

/* ---- the driver --------------------------------------------------------------------------------- */

/* Progress within the running stage: done of total steps, as a percentage of the request
 * between the stage's start and the next stage's, passed on when it changes. */
static void stage_progress(compile_state *s, int64_t done, int64_t total)
{
    if (!s->req->progress || total <= 0 || done < 0)
        return;
    int pct = s->stage_lo + (int)((int64_t)(s->stage_hi - s->stage_lo) * (done < total ? done : total) / total);
    if (pct != s->stage_pct) {
        s->stage_pct = pct;
        s->req->progress(s->req->progress_ctx, s->stage, pct);
    }
}

/* The host lent to hooks: the worker's callbacks, and the progress of the stage (plugin.h) */
static void lent_log(void *ctx, int level, const char *msg)
{
    compile_state *s = ctx;
    if (s->host.log)
        s->host.log(s->host.ctx, level, msg);
}

static int lent_cancelled(void *ctx)
{
    compile_state *s = ctx;
    return s->host.cancelled ? s->host.cancelled(s->host.ctx) : 0;
}

static void lent_progress(void *ctx, int done, int total)
{
    stage_progress(ctx, done, total);
}

static int lent_store_get(void *ctx, const uint8_t key[16], void **data, size_t *len)
{
    compile_state *s = ctx;
    int hit = s->host.store_get(s->host.ctx, key, data, len);
    __atomic_add_fetch(hit ? &s->store_hits : &s->store_misses, 1, __ATOMIC_RELAXED);
    return hit;
}

static void lent_store_put(void *ctx, const uint8_t key[16], const void *data, size_t len)
{
    compile_state *s = ctx;
    s->host.store_put(s->host.ctx, key, data, len);
}

typedef struct stage_def {
    const char *name;
    int percent;                 /* of the request, when it starts */
    stage_fn fn;
} stage_def;

static int run_stage(compile_state *s, const stage_def *st, int next_percent)
{
    const char *name = st->name;
    if (s->host.cancelled && s->host.cancelled(s->host.ctx))
        return tth_diag_set(s->diag, TTH_ECANCELLED, name, "the compile was cancelled");
    s->stage = name;
    s->stage_lo = s->stage_pct = st->percent;
    s->stage_hi = next_percent;
    if (s->req->progress)
        s->req->progress(s->req->progress_ctx, name, st->percent);
    stage_fn fn = st->fn;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = fn(s);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (s->timings)
        json_array_append_new(s->timings, json_pack("{s:s, s:f}", "stage", name, "seconds",
                                                    (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9));
    if (rc) {
        if (s->diag && s->diag->code == TTH_OK)
            tth_diag_set(s->diag, rc, NULL, "failed");
        tth_diag_prefix(s->diag, "%s", name);
    }
    return rc;
}

static void state_free(compile_state *s)
{
    free(s->tar);
    free(s->so);
    json_decref(s->metadata);
    json_decref(s->profile_meta);
    json_decref(s->report_calls);
    json_decref(s->dumps);
    json_decref(s->timings);
    json_decref(s->external);
    json_decref(s->node_outputs);
    for (size_t i = 0; i < s->nrts; i++)
        tth_runtime_module_free(s->rts[i]);
    free(s->rts);
    tth_const_map_free(s->ext_consts);
    tth_partition_clear(&s->part);
    tth_mem_plan_clear(&s->plan);
    tth_aot_result_clear(&s->aot);
    free(s->lowered);
    tth_tir_module_free(s->tmod);
    free(s->relay_text);
    tth_relay_module_free(s->rmod);
}

int tth_compile(const tth_compile_request *req, tth_compile_result *res, tth_diag *diag)
{
    memset(res, 0, sizeof *res);
    if (!req || !req->model || !req->target || !req->registry)
        return tth_diag_set(diag, TTH_EINVAL, "compile", "the request needs a model, a target and "
                            "a plugin registry");
    if (!is_c_identifier(req->model_name))
        return tth_diag_set(diag, TTH_EINVAL, "compile", "model name '%s' is not a C identifier",
                            req->model_name ? req->model_name : "");
    compile_state s = {.req = req, .diag = diag};
    if (req->host)
        s.host = *req->host;
    else
        s.host = (tth_host){.size = sizeof(tth_host), .abi_major = TTH_ABI_MAJOR,
                            .abi_minor = TTH_ABI_MINOR};
    int drc = check_dump_ir(json_object_get(req->options, "dump_ir"), &s.dump_ir, diag);
    if (drc < 0)
        return drc;
    s.timings = json_array();
    s.external = json_array();
    s.node_outputs = json_object();
    if (s.dump_ir && !(s.dumps = json_object()))
        return tth_diag_set(diag, TTH_ENOMEM, "compile", "out of memory");

    s.lent = s.host;
    s.lent.size = sizeof s.lent;
    s.lent.abi_minor = TTH_ABI_MINOR;
    s.lent.ctx = &s;
    s.lent.log = lent_log;
    s.lent.cancelled = lent_cancelled;
    s.lent.progress = lent_progress;
    s.lent.store_get = TTH_HOST_HAS_STORE(&s.host) ? lent_store_get : NULL;
    s.lent.store_put = TTH_HOST_HAS_STORE(&s.host) ? lent_store_put : NULL;

    /* the flow, with each stage's start as a share of the request (the stages that take long on
     * big models, lowering and code generation, get most of it and report within) */
    static const stage_def stages[] = {
        {"target", 2, stage_target},
        {"import", 5, stage_import},
        {"simplify", 10, stage_simplify},
        {"partition", 13, stage_partition},
        {"layout", 14, stage_layout},
        {"optimize", 15, stage_optimize},
        {"relay_to_runtime", 20, stage_relay_to_runtime},
        {"relay_to_tir", 22, stage_relay_to_tir},
        {"lower", 24, stage_lower},
        {"aot", 40, stage_aot},
        {"memplan", 42, stage_memplan},
        {"codegen", 45, stage_codegen},
        {"build", 85, stage_build},
        {"package", 95, stage_package},
    };
    int rc = 0;
    size_t nstages = sizeof stages / sizeof *stages;
    for (size_t i = 0; i < nstages && !rc; i++) {
        rc = run_stage(&s, &stages[i], i + 1 < nstages ? stages[i + 1].percent : 99);
    }
    tth_relay_fold_for(NULL);

    if (rc == 0) {
        res->artifact = s.tar;
        res->artifact_len = s.tar_len;
        res->metadata = s.metadata;
        res->dumps = s.dumps;
        res->timings = s.timings;
        res->external = s.external;
        res->code_reused = s.store_hits;
        res->code_compiled = s.store_misses;
        s.external = NULL;
        s.tar = NULL;
        s.metadata = NULL;
        s.dumps = NULL;
        s.timings = NULL;
        if (req->progress)
            req->progress(req->progress_ctx, "done", 100);
    }
    state_free(&s);
    return rc;
}

void tth_compile_result_free(tth_compile_result *res)
{
    if (!res)
        return;
    free(res->artifact);
    json_decref(res->metadata);
    json_decref(res->dumps);
    json_decref(res->timings);
    json_decref(res->external);
    memset(res, 0, sizeof *res);
}
