/* tth-bench-sgemm: fp32 square GEMM C = A x B with OpenBLAS's cblas_sgemm (Debian's
 * libopenblas-dev), the reference tth's generated MatMul is compared with in bench/gemm/run.py.
 *
 *     build-rel/bench/gemm/tth-bench-sgemm [--threads T] [--runs R] [--warmup W] N...
 *
 * For each size N: A and B filled with fixed-seed random numbers in [-1, 1), W warm-up calls
 * (default 2), then R timed calls (default 20); prints one JSON line per size:
 * {"n": N, "threads": T, "median_ms", "min_ms", "gflops" (2 N^3 / median), "gflops_best" (/ min)}.
 * Threads: openblas_set_num_threads(T) (default 1; OPENBLAS_NUM_THREADS is ignored).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "bench_time.h"

/* OpenBLAS's own call (declared by its cblas.h; repeated so another cblas.h also works) */
void openblas_set_num_threads(int num_threads);

static void fill(float *x, size_t n, uint64_t *state)
{
    for (size_t i = 0; i < n; i++) {
        *state = *state * 6364136223846793005ull + 1442695040888963407ull;  /* an LCG is enough */
        x[i] = (float)((*state >> 40) * (1.0 / 16777216.0) * 2.0 - 1.0);
    }
}

int main(int argc, char **argv)
{
    int threads = 1, runs = 20, warmup = 2, first_size = argc;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--warmup") == 0 && i + 1 < argc)
            warmup = atoi(argv[++i]);
        else if (argv[i][0] != '-') {
            first_size = i;
            break;
        } else {
            first_size = argc;
            break;
        }
    }
    if (first_size == argc || threads < 1 || runs < 1 || warmup < 0) {
        fprintf(stderr, "usage: tth-bench-sgemm [--threads T] [--runs R] [--warmup W] N...\n");
        return 2;
    }
    openblas_set_num_threads(threads);
    double *t = malloc((size_t)runs * sizeof *t);
    if (!t)
        return 1;
    for (int s = first_size; s < argc; s++) {
        int n = atoi(argv[s]);
        if (n < 1 || n > 16384) {
            fprintf(stderr, "tth-bench-sgemm: bad size '%s'\n", argv[s]);
            return 2;
        }
        size_t elems = (size_t)n * (size_t)n;
        float *a = aligned_alloc(64, elems * sizeof(float));
        float *b = aligned_alloc(64, elems * sizeof(float));
        float *c = aligned_alloc(64, elems * sizeof(float));
        if (!a || !b || !c) {
            fprintf(stderr, "tth-bench-sgemm: out of memory at N=%d\n", n);
            return 1;
        }
        uint64_t state = 1;
        fill(a, elems, &state);
        fill(b, elems, &state);
        for (int r = -warmup; r < runs; r++) {
            double t0 = bench_now();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f,
                        c, n);
            if (r >= 0)
                t[r] = (bench_now() - t0) * 1e3;
        }
        qsort(t, (size_t)runs, sizeof *t, bench_cmp_double);
        double median = runs % 2 ? t[runs / 2] : (t[runs / 2 - 1] + t[runs / 2]) / 2;
        double flop = 2.0 * n * n * (double)n;
        printf("{\"n\": %d, \"threads\": %d, \"runs\": %d, \"median_ms\": %.4f, \"min_ms\": %.4f, "
               "\"gflops\": %.2f, \"gflops_best\": %.2f, \"c00\": %g}\n",
               n, threads, runs, median, t[0], flop / median / 1e6, flop / t[0] / 1e6, c[0]);
        fflush(stdout);
        free(a);
        free(b);
        free(c);
    }
    free(t);
    return 0;
}
