/* tth-bench-time: time a built tth artifact on this machine through the runtime (runtime/tthrt.h)
 * and print the figures as one line of JSON. bench/vs_ort/run.py and bench/gemm/run.py use it.
 *
 *     build-rel/bench/vs_ort/tth-bench-time ARTIFACT.tar [--input NAME=FILE ...] [--warmup W]
 *         [--runs R] [--seed S] [--output-dir DIR]
 *
 * Inputs not given with --input are filled with uniform random numbers in [-1, 1) from seed S
 * (float32 inputs only). W warm-up runs (default 5), then R timed runs (default 20, at least 20),
 * each timed on its own by the runtime. Prints
 *
 *     {"model": ..., "warmup": W, "runs": R, "median_ms": ..., "min_ms": ..., "mean_ms": ...,
 *      "outputs": [...paths...]}
 *
 * and with --output-dir writes each output of the last run as DIR/<name>.npy.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "tthrt.h"

#define MAX_INPUTS 64

static void usage(const char *msg)
{
    if (msg)
        fprintf(stderr, "tth-bench-time: %s\n", msg);
    fprintf(stderr, "usage: tth-bench-time ARTIFACT.tar [--input NAME=FILE ...] [--warmup W] [--runs R]\n"
                    "                      [--seed S] [--output-dir DIR]\n");
    exit(2);
}

static int count_arg(const char *opt, const char *s, int min)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < min || v > 1000000) {
        fprintf(stderr, "tth-bench-time: %s '%s' is not a count from %d to 1000000\n", opt, s, min);
        exit(2);
    }
    return (int)v;
}

static int fail(const char *what, const tth_diag *d)
{
    fprintf(stderr, "tth-bench-time: %s: %s", what, d->message);
    if (d->location[0])
        fprintf(stderr, " (at %s)", d->location);
    if (d->hint[0])
        fprintf(stderr, "; hint: %s", d->hint);
    fputc('\n', stderr);
    return 1;
}

/* splitmix64: a small seeded generator, the same numbers on every machine */
static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Bind every input not given on the command line to fixed-seed random float32 data. */
static int bind_random(tthrt_model *m, const char **given, int n_given, uint64_t seed, tth_diag *d)
{
    uint64_t state = seed;
    for (size_t i = 0; i < tthrt_model_input_count(m); i++) {
        const tthrt_tensor_info *info = tthrt_model_input(m, i);
        int bound = 0;
        for (int k = 0; k < n_given; k++) {
            size_t len = strcspn(given[k], "=");
            if (strlen(info->name) == len && strncmp(given[k], info->name, len) == 0)
                bound = 1;
        }
        if (bound)
            continue;
        if (info->dtype != TTH_F32)
            return tth_diag_set(d, TTH_EINVAL, info->name, "input '%s' is not float32: give it with --input",
                                info->name);
        tthrt_array a;
        if (tthrt_array_init(&a, info->dtype, info->rank, info->shape, d) < 0)
            return d->code;
        float *x = a.data;
        for (size_t e = 0; e < a.nbytes / sizeof *x; e++)
            x[e] = (float)((next_random(&state) >> 40) * (1.0 / 16777216.0) * 2.0 - 1.0);
        int rc = tthrt_model_bind(m, info->name, &a, d);
        tthrt_array_clear(&a);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    const char *artifact = NULL, *output_dir = NULL;
    const char *inputs[MAX_INPUTS];
    int n_inputs = 0, warmup = 5, runs = 20;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_value = i + 1 < argc;
        if (strcmp(a, "--input") == 0 && has_value) {
            if (n_inputs == MAX_INPUTS)
                usage("too many --input");
            inputs[n_inputs] = argv[++i];
            if (!strchr(inputs[n_inputs], '=') || inputs[n_inputs][0] == '=')
                usage("--input wants NAME=FILE");
            n_inputs++;
        } else if (strcmp(a, "--warmup") == 0 && has_value) {
            warmup = count_arg(a, argv[++i], 0);
        } else if (strcmp(a, "--runs") == 0 && has_value) {
            runs = count_arg(a, argv[++i], 20);
        } else if (strcmp(a, "--seed") == 0 && has_value) {
            seed = (uint64_t)count_arg(a, argv[++i], 0);
        } else if (strcmp(a, "--output-dir") == 0 && has_value) {
            output_dir = argv[++i];
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(NULL);
        } else if (a[0] == '-') {
            fprintf(stderr, "tth-bench-time: unknown option or missing value '%s'\n", a);
            usage(NULL);
        } else if (!artifact) {
            artifact = a;
        } else {
            usage("one artifact expected");
        }
    }
    if (!artifact)
        usage("one artifact expected");

    tth_diag d;
    tth_diag_clear(&d);
    tthrt_model *m = NULL;
    /* time to ready: open the artifact (read the tar, load the library, bind the constants),
     * then the first run apart from the warm-up */
    double t0 = now_ms();
    if (tthrt_model_open(artifact, &m, &d) < 0)
        return fail(artifact, &d);
    double ready_ms = now_ms() - t0, first_run_ms = 0;
    int status = 1;
    for (int k = 0; k < n_inputs; k++) {
        char name[256];
        const char *eq = strchr(inputs[k], '=');
        snprintf(name, sizeof name, "%.*s", (int)(eq - inputs[k]), inputs[k]);
        if (tthrt_model_bind_file(m, name, eq + 1, &d) < 0) {
            fail(inputs[k], &d);
            goto done;
        }
    }
    if (bind_random(m, inputs, n_inputs, seed, &d) < 0) {
        fail("inputs", &d);
        goto done;
    }
    tthrt_timing timing = {0};
    t0 = now_ms();
    if (tthrt_model_run(m, 1, NULL, &d) < 0) {
        fail("run", &d);
        goto done;
    }
    first_run_ms = now_ms() - t0;
    if ((warmup > 0 && tthrt_model_run(m, warmup, NULL, &d) < 0) ||
        tthrt_model_run(m, runs, &timing, &d) < 0) {
        fail("run", &d);
        goto done;
    }
    json_t *paths = NULL;
    if (output_dir && tthrt_model_write_outputs(m, output_dir, &paths, &d) < 0) {
        fail(output_dir, &d);
        goto done;
    }
    json_t *out = json_pack("{s:s, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:o}", "model", tthrt_model_name(m),
                            "warmup", warmup, "runs", timing.runs, "median_ms", timing.median_ms,
                            "min_ms", timing.min_ms, "mean_ms", timing.mean_ms, "ready_ms", ready_ms,
                            "first_run_ms", first_run_ms, "outputs", paths ? paths : json_array());
    char *text = json_dumps(out, JSON_COMPACT | JSON_REAL_PRECISION(6));
    puts(text);
    free(text);
    json_decref(out);
    status = 0;
done:
    tthrt_model_close(m);
    return status;
}
