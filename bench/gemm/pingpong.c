/* tth-bench-pingpong: how far apart the machine's first two CPUs are, as the round trip of one
 * cache line between two threads pinned to them (bench/README.md, "Two vCPUs, two states").
 * Prints {"cpus": [a, b], "round_trip_ns": N}. On a virtual machine the figure can change from
 * minute to minute (the host moves the vCPUs); two-thread timings follow it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { ROUNDS = 200000 };

static _Alignas(64) atomic_long flag;
static int cpu_b = 1;

static int pin(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    return pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static void *answer(void *arg)
{
    (void)arg;
    pin(cpu_b);
    for (long i = 0; i < ROUNDS; i++) {
        while (atomic_load_explicit(&flag, memory_order_acquire) != 2 * i + 1)
            ;
        atomic_store_explicit(&flag, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int cpu_a = 0;
    if (argc == 3) {
        cpu_a = atoi(argv[1]);
        cpu_b = atoi(argv[2]);
    } else if (argc != 1) {
        fprintf(stderr, "usage: tth-bench-pingpong [CPU_A CPU_B]   (default 0 1)\n");
        return 2;
    }
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || cpu_a < 0 || cpu_b < 0 || cpu_a >= CPU_SETSIZE ||
        cpu_b >= CPU_SETSIZE || !CPU_ISSET(cpu_a, &allowed) || !CPU_ISSET(cpu_b, &allowed) || cpu_a == cpu_b) {
        fprintf(stderr, "tth-bench-pingpong: CPUs %d and %d are not two CPUs this process may use\n", cpu_a, cpu_b);
        return 1;
    }
    if (pin(cpu_a) != 0) {
        fprintf(stderr, "tth-bench-pingpong: cannot run on CPU %d\n", cpu_a);
        return 1;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, answer, NULL) != 0) {
        fprintf(stderr, "tth-bench-pingpong: cannot start a thread\n");
        return 1;
    }
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < ROUNDS; i++) {
        atomic_store_explicit(&flag, 2 * i + 1, memory_order_release);
        while (atomic_load_explicit(&flag, memory_order_acquire) != 2 * i + 2)
            ;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    pthread_join(t, NULL);
    double ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / ROUNDS;
    printf("{\"cpus\": [%d, %d], \"round_trip_ns\": %.0f}\n", cpu_a, cpu_b, ns);
    return 0;
}
