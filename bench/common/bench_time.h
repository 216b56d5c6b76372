/* bench_time.h: the clock and the sort order every benchmark times with (header only, so the
 * benchmarks that link nothing else of tth use it too). */
#ifndef TTH_BENCH_TIME_H
#define TTH_BENCH_TIME_H

#include <time.h>

/* Monotonic seconds. */
static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* qsort's order for doubles, smallest first (for medians). */
static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
