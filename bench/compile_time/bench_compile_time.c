/* tth-bench-compile-time: compile time through tth's own stages (everything but the system C
 * compiler: build_shared=false), in-process, for target c. For each model of the manifest
 * (bench/models/make_models.py: the generated gen_10 .. gen_10000 and ResNet-18 by default)
 * prints the seconds of the whole compile, milliseconds per ONNX operator, and each stage's
 * share, so the growth of cost with model size shows; "w/o codegen" is the seconds of every
 * stage but the target plugin's tir_to_runtime (codegen). Each model is compiled RUNS times
 * (default 3) and the fastest run is shown.
 *
 * --target T compiles for another target than c; --build builds the host shared library as tthd
 * does (the system C compiler and linker: the "build" stage); --seconds prints each stage's
 * seconds instead of its share.
 *
 * Usage: tth-bench-compile-time MODEL_DIR [--runs N] [--target T] [--build] [--seconds] [name...].
 * Not part of the test run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_compile.h"

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL_DIR [--runs N] [--target T] [--build] [--seconds] [name...]\n", argv[0]);
        return 2;
    }
    int runs = 3, named = 0, build = 0, seconds = 0;
    const char *target_text = "c";
    for (int a = 2; a < argc; a++) {
        if (strcmp(argv[a], "--runs") == 0 && a + 1 < argc)
            runs = atoi(argv[++a]);
        else if (strcmp(argv[a], "--target") == 0 && a + 1 < argc)
            target_text = argv[++a];
        else if (strcmp(argv[a], "--build") == 0)
            build = 1;
        else if (strcmp(argv[a], "--seconds") == 0)
            seconds = 1;
        else
            named++;
    }
    if (runs < 1)
        runs = 1;
    size_t nm = 0;
    bench_model *models = bench_models(argv[1], &nm);
    tth_registry *reg = models ? bench_registry() : NULL;
    json_t *target = reg ? bench_target(reg, target_text) : NULL;
    if (!target) {
        free(models);
        tth_registry_free(reg);
        return 1;
    }
    int header = 0;
    for (size_t i = 0; i < nm; i++) {
        const bench_model *m = &models[i];
        int wanted = !named && (strncmp(m->name, "gen_", 4) == 0 || strcmp(m->name, "resnet18") == 0);
        for (int a = 2; a < argc; a++) {
            if (strcmp(argv[a], "--runs") == 0 || strcmp(argv[a], "--target") == 0) {
                a++;
                continue;
            }
            wanted |= strcmp(argv[a], m->name) == 0;
        }
        if (!wanted)
            continue;
        bench_timing best = {.total = 1e30};
        int failed = 0;
        for (int r = 0; r < runs && !failed; r++) {
            json_t *opts = json_object();
            if (build)
                json_object_set_new(opts, "build_shared", json_true());
            tth_compile_result res;
            bench_timing t;
            if (bench_compile(reg, target, m, opts, &res, &t) != 0) {
                failed = 1;
                break;
            }
            tth_compile_result_free(&res);
            if (t.total < best.total)
                best = t;
        }
        if (failed)
            continue;
        if (!header) {
            printf("%-14s %7s %10s %9s %12s   %s\n%-14s %7s %10s %9s %12s  ", "model", "ops", "seconds",
                   "ms/op", "w/o codegen", seconds ? "seconds of each stage" : "share of each stage (%)", "", "",
                   "", "", "");
            for (size_t s = 0; s < best.nstages; s++)
                printf(" %*s", (int)(strlen(best.stage[s]) > 5 ? strlen(best.stage[s]) : 5),
                       best.stage[s]);
            printf("\n");
            header = 1;
        }
        double codegen = 0;
        for (size_t s = 0; s < best.nstages; s++)
            if (strcmp(best.stage[s], "codegen") == 0)
                codegen = best.seconds[s];
        printf("%-14s %7ld %10.4f %9.4f %12.4f  ", m->name, m->nodes, best.total,
               best.total * 1e3 / (double)(m->nodes > 0 ? m->nodes : 1), best.total - codegen);
        for (size_t s = 0; s < best.nstages; s++)
            printf(seconds ? " %*.3f" : " %*.1f", (int)(strlen(best.stage[s]) > 5 ? strlen(best.stage[s]) : 5),
                   seconds ? best.seconds[s] : 100.0 * best.seconds[s] / best.total);
        printf("\n");
        fflush(stdout);
    }
    json_decref(target);
    tth_registry_free(reg);
    free(models);
    return 0;
}
