/* tth-bench-fma-peak: the fp32 FMA throughput this core really reaches, measured with a C loop
 * (no inline assembly, no intrinsics): NACC independent accumulator vectors, each updated with
 * acc = acc * mul + add. Built with -O3 -march=native -ffp-contract=fast (bench/gemm/meson.build),
 * so on an AVX-512 machine the loop is 24 vfmadd...ps on zmm registers; check with
 *
 *     objdump -d --no-show-raw-insn build-rel/bench/gemm/tth-bench-fma-peak | grep -c 'vfmadd.*zmm'
 *
 * (bench/gemm/run.py does, and prints what it found). The accumulators are GNU C vectors
 * (vector_size): GCC 12 does not keep a plain float[NACC][LANES] array in registers (it
 * vectorizes it through memory or not at all); a vector per accumulator and an unrolled loop over
 * them it does. Enough accumulators hide the FMA latency (4 cycles x 2 units = 8 FMAs in flight
 * at least) and fit in the vector registers (32 with AVX-512, 16 before).
 *
 *     build-rel/bench/gemm/tth-bench-fma-peak [--threads T] [--seconds S]
 *
 * Prints one line of JSON: {"threads": T, "per_thread": [...], "gflops": ..., "vector_floats": ...,
 * "accumulators": ...}. With T > 1 each thread runs the loop on its own at the same time and the
 * rates add up.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_time.h"

/* floats per vector and independent accumulators, for the vectors this build targets */
#if defined(__AVX512F__)
#define LANES 16
#define NACC 24
#elif defined(__AVX__)
#define LANES 8
#define NACC 12
#else
#define LANES 4
#define NACC 12
#endif
typedef float vfloat __attribute__((vector_size(LANES * sizeof(float))));

/* iterations x NACC x LANES fused multiply-adds; the result keeps the work from being removed */
__attribute__((noinline)) static float fma_loop(long iterations, const float *mul, const float *add)
{
    vfloat acc[NACC], m, a;
    for (int l = 0; l < LANES; l++) {
        m[l] = mul[l];
        a[l] = add[l];
    }
    for (int k = 0; k < NACC; k++)
        for (int l = 0; l < LANES; l++)
            acc[k][l] = (float)(k + l) * 0.001f;
    for (long it = 0; it < iterations; it++) {
#pragma GCC unroll 32
        for (int k = 0; k < NACC; k++)
            acc[k] = acc[k] * m + a;  /* one vfmadd (contracted: -ffp-contract=fast) */
    }
    float sum = 0;
    for (int k = 0; k < NACC; k++)
        for (int l = 0; l < LANES; l++)
            sum += acc[k][l];
    return sum;
}

typedef struct worker {
    double seconds;   /* how long to measure */
    double gflops;    /* the result */
    float sink;
} worker;

static void *run(void *arg)
{
    worker *w = arg;
    float mul[LANES], add[LANES];
    for (int l = 0; l < LANES; l++) {
        mul[l] = 0.999999f;  /* a fixed point near add/(1-mul): no overflow, no denormals */
        add[l] = 1e-6f * (float)(l + 1);
    }
    w->sink = fma_loop(1000, mul, add);  /* warm up: clocks and caches */
    long iterations = 1000;
    double t;
    for (;;) {  /* grow until one call takes a tenth of the time asked for */
        double t0 = bench_now();
        w->sink += fma_loop(iterations, mul, add);
        t = bench_now() - t0;
        if (t > w->seconds / 10)
            break;
        iterations *= 4;
    }
    double best = 0;
    double end = bench_now() + w->seconds;
    while (bench_now() < end) {
        double t0 = bench_now();
        w->sink += fma_loop(iterations, mul, add);
        double rate = 2.0 * iterations * NACC * LANES / (bench_now() - t0) / 1e9;
        if (rate > best)
            best = rate;
    }
    w->gflops = best;
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = 1;
    double seconds = 1.0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            seconds = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: tth-bench-fma-peak [--threads T] [--seconds S]\n");
            return 2;
        }
    }
    if (threads < 1 || threads > 256 || !(seconds > 0)) {
        fprintf(stderr, "tth-bench-fma-peak: bad --threads or --seconds\n");
        return 2;
    }
    worker *w = calloc((size_t)threads, sizeof *w);
    pthread_t *tid = calloc((size_t)threads, sizeof *tid);
    if (!w || !tid)
        return 1;
    for (int i = 0; i < threads; i++) {
        w[i].seconds = seconds;
        if (pthread_create(&tid[i], NULL, run, &w[i]) != 0) {
            fprintf(stderr, "tth-bench-fma-peak: cannot start thread %d\n", i);
            return 1;
        }
    }
    double total = 0, sink = 0;
    printf("{\"threads\": %d, \"per_thread\": [", threads);
    for (int i = 0; i < threads; i++) {
        pthread_join(tid[i], NULL);
        total += w[i].gflops;
        sink += w[i].sink;
        printf("%s%.2f", i ? ", " : "", w[i].gflops);
    }
    printf("], \"gflops\": %.2f, \"vector_floats\": %d, \"accumulators\": %d, \"checksum\": %g}\n",
           total, LANES, NACC, sink);
    free(w);
    free(tid);
    return 0;
}
