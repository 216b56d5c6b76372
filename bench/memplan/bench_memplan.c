/* tth-bench-memplan: the memory plans of real CNNs (bench/models/make_models.py: ResNet-18,
 * ResNet-50, MobileNet-v2, SqueezeNet 1.1 at 224x224, batch 1) compiled in-process for target c
 * through tth_compile's stages (everything but the system C compiler), printing per model: the
 * number of planned buffers, their sum, the lower bound (most bytes live at once), the workspace
 * and its ratio to the lower bound, the winning algorithm and the memplan stage's time. Then the
 * same buffers (from the memplan dump) placed by each algorithm alone, with its time.
 * The goal is a workspace within 5% of the lower bound on every model.
 *
 * Usage: tth-bench-memplan MODEL_DIR [--svg OUT_DIR] [name...]   (default: every model of the
 * manifest whose name does not start with gen_). --svg also writes each artifact's
 * explain/memory.svg (the compile runs with options.explain) to OUT_DIR/<model>.memory.svg.
 * Not part of the test run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_compile.h"
#include "compile_internal.h"

static const tth_memplan_algo algos[] = {TTH_MEMPLAN_GREEDY_BY_SIZE, TTH_MEMPLAN_GREEDY_BY_CONFLICTS,
                                         TTH_MEMPLAN_GREEDY_BY_START, TTH_MEMPLAN_SEARCH,
                                         TTH_MEMPLAN_BEST};
#define NALGOS (sizeof algos / sizeof algos[0])

static double mib(size_t b) { return (double)b / (1024.0 * 1024.0); }

/* The dump's buffers re-placed by each algorithm alone: workspace and milliseconds. */
static void per_algorithm(const json_t *dump)
{
    const json_t *items = json_object_get(dump, "items");
    size_t n = json_array_size(items);
    tth_mem_item *it = calloc(n ? n : 1, sizeof *it);
    tth_tbuffer *bufs = calloc(n ? n : 1, sizeof *bufs);
    if (!it || !bufs) {
        free(it);
        free(bufs);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *j = json_array_get(items, i);
        bufs[i] = (tth_tbuffer){.id = (uint32_t)i, .name = json_string_value(json_object_get(j, "buffer")),
                                .dtype = TTH_U8, .rank = 1, .scope = TTH_SCOPE_WORKSPACE, .offset = -1};
        it[i] = (tth_mem_item){.buf = &bufs[i],
                               .start = json_integer_value(json_array_get(json_object_get(j, "live"), 0)),
                               .end = json_integer_value(json_array_get(json_object_get(j, "live"), 1)),
                               .size = (size_t)json_integer_value(json_object_get(j, "size")),
                               .align = (uint32_t)json_integer_value(json_object_get(j, "align"))};
        bufs[i].shape[0] = (int64_t)it[i].size;
    }
    for (size_t k = 0; k < NALGOS; k++) {
        tth_mem_plan p = {.items = it, .nitems = n, .alignment = 1};
        enum { RUNS = 5 };
        double best = 1e9;
        for (int r = 0; r < RUNS; r++) {
            double t0 = bench_now();
            if (tth_memplan_place(&p, algos[k]) != 0) {
                printf("    %-20s out of memory\n", tth_memplan_algo_name(algos[k]));
                break;
            }
            double dt = bench_now() - t0;
            if (dt < best)
                best = dt;
        }
        printf("    %-20s workspace %12zu  ratio %.4f  %8.3f ms%s", tth_memplan_algo_name(algos[k]),
               p.workspace_bytes, p.lower_bound_bytes ? (double)p.workspace_bytes / p.lower_bound_bytes : 1.0,
               best * 1e3, algos[k] == TTH_MEMPLAN_BEST ? "" : "\n");
        if (algos[k] == TTH_MEMPLAN_BEST)
            printf("  (kept: %s)\n", tth_memplan_algo_name(p.algo));
    }
    free(it);
    free(bufs);
}

/* The bytes of `name` in an uncompressed ustar archive (header: name at 0, octal size at 124). */
static const char *tar_entry(const uint8_t *tar, size_t len, const char *name, size_t *size)
{
    for (size_t at = 0; at + 512 <= len;) {
        const char *h = (const char *)tar + at;
        if (!h[0])
            break;
        size_t sz = (size_t)strtoull(h + 124, NULL, 8);
        if (strncmp(h, name, 100) == 0 && at + 512 + sz <= len) {
            *size = sz;
            return h + 512;
        }
        at += 512 + (sz + 511) / 512 * 512;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL_DIR [--svg OUT_DIR] [name...]\n", argv[0]);
        return 2;
    }
    const char *svg_dir = NULL;
    int named = 0;
    for (int a = 2; a < argc; a++) {
        if (strcmp(argv[a], "--svg") == 0 && a + 1 < argc)
            svg_dir = argv[++a];
        else
            named++;
    }
    size_t nm = 0;
    bench_model *models = bench_models(argv[1], &nm);
    tth_registry *reg = models ? bench_registry() : NULL;
    json_t *target = reg ? bench_target(reg, "c") : NULL;
    if (!target) {
        free(models);
        tth_registry_free(reg);
        return 1;
    }
    printf("%-14s %8s %11s %11s %11s %7s %-20s %9s %9s\n", "model", "buffers", "sum MiB",
           "bound MiB", "ws MiB", "ratio", "winner", "plan ms", "compile s");
    int missed = 0;
    json_t *dumps = json_array();
    for (size_t i = 0; i < nm; i++) {
        const bench_model *m = &models[i];
        int wanted = !named && strncmp(m->name, "gen_", 4) != 0;
        for (int a = 2; a < argc; a++) {
            if (strcmp(argv[a], "--svg") == 0) {
                a++;
                continue;
            }
            wanted |= strcmp(argv[a], m->name) == 0;
        }
        if (!wanted)
            continue;
        json_t *opts = json_pack("{s:s, s:b}", "dump_ir", "memplan", "explain", svg_dir != NULL);
        tth_compile_result res;
        bench_timing t;
        if (bench_compile(reg, target, m, opts, &res, &t) != 0) {
            missed++;
            continue;
        }
        double plan_s = 0;
        for (size_t s = 0; s < t.nstages; s++)
            if (strcmp(t.stage[s], "memplan") == 0)
                plan_s = t.seconds[s];
        const json_t *p = json_object_get(json_object_get(res.metadata, "memory"), "plan");
        size_t ws = (size_t)json_integer_value(json_object_get(p, "workspace_bytes"));
        size_t lb = (size_t)json_integer_value(json_object_get(p, "lower_bound_bytes"));
        size_t tot = (size_t)json_integer_value(json_object_get(p, "total_bytes"));
        double ratio = lb ? (double)ws / (double)lb : 1.0;
        if (ratio > 1.05)
            missed++;
        printf("%-14s %8lld %11.3f %11.3f %11.3f %7.4f %-20s %9.3f %9.3f%s\n", m->name,
               (long long)json_integer_value(json_object_get(p, "buffers")), mib(tot), mib(lb),
               mib(ws), ratio, json_string_value(json_object_get(p, "algorithm")), plan_s * 1e3,
               t.total, ratio > 1.05 ? "  (above the 5% goal)" : "");
        size_t svg_len = 0;
        const char *svg = svg_dir ? tar_entry(res.artifact, res.artifact_len, "explain/memory.svg",
                                              &svg_len) : NULL;
        if (svg) {
            char path[1200];
            snprintf(path, sizeof path, "%s/%s.memory.svg", svg_dir, m->name);
            FILE *f = fopen(path, "wb");
            if (!f || fwrite(svg, 1, svg_len, f) != svg_len)
                fprintf(stderr, "cannot write %s\n", path);
            if (f)
                fclose(f);
        }
        json_t *dump = json_loads(json_string_value(json_object_get(res.dumps, "memplan")), 0, NULL);
        if (dump)
            json_array_append_new(dumps, json_pack("{s:s, s:o, s:I, s:I}", "model", m->name,
                "dump", dump, "conflicts", json_integer_value(json_object_get(p, "conflicts")),
                "iterations", json_integer_value(json_object_get(p, "search_iterations"))));
        tth_compile_result_free(&res);
    }
    printf("\nEach algorithm alone on the same buffers (best of 5 runs):\n");
    for (size_t i = 0; i < json_array_size(dumps); i++) {
        const json_t *e = json_array_get(dumps, i);
        printf("  %s (%lld conflicts; the search ran %lld placements in the compile)\n",
               json_string_value(json_object_get(e, "model")),
               (long long)json_integer_value(json_object_get(e, "conflicts")),
               (long long)json_integer_value(json_object_get(e, "iterations")));
        per_algorithm(json_object_get(e, "dump"));
    }
    printf("\n%s\n", missed ? "goal (workspace within 5% of the lower bound) NOT met on every model"
                            : "goal met: every workspace is within 5% of its lower bound");
    json_decref(dumps);
    json_decref(target);
    tth_registry_free(reg);
    free(models);
    return 0;
}
