/* helpers.h: what the in-process compile tests share: the plugin registry of the build tree,
 * temporary directories, running the C compiler, files. */
#ifndef TTH_TEST_COMPILE_HELPERS_H
#define TTH_TEST_COMPILE_HELPERS_H

#include <stddef.h>
#include <stdint.h>

#include "tth/registry.h"
#include "tth/relay.h"
#include "tth/tir.h"

/* A registry with every plugin of $TTH_BUILD_ROOT/plugins (asserts it loaded). */
tth_registry *test_registry(void);
/* Cleanups for after the test: test_defer registers fn(arg); test_cleanup (from a suite's .fini)
 * runs them, the last registered first. */
void test_defer(void (*fn)(void *), void *arg);
void test_cleanup(void);
/* A new empty TIR / Relay module, freed by test_cleanup. */
tth_tir_module *test_tir_module(void);
tth_relay_module *test_relay_module(void);
/* A new temporary directory (static buffer per call site is the caller's). */
void test_mkdtemp(char *buf, size_t len);
void test_rmtree(const char *dir);
/* Write / read a whole file; read returns malloc'd bytes (NUL-terminated) or NULL. */
int test_write_file(const char *path, const void *data, size_t len);
uint8_t *test_read_file(const char *path, size_t *len);
/* Write `len` bytes to dir/name (asserts it could). */
void test_put_file(const char *dir, const char *name, const void *data, size_t len);
/* Run a shell command; returns its exit status; output goes to `log` (a path) when not NULL. */
int test_run(const char *cmd);
/* The kind that took operator `op` in a compile's metadata (its partition's first such op), or NULL. */
const char *test_partition_kind(const json_t *meta, const char *op);
/* 1 if the program is on PATH. */
int test_have(const char *prog);
/* The TIR dot products by their definition (docs/tir.md, "Dot products"): acc plus the four
 * products of a's bytes (unsigned when us, else signed) with b's (signed), wrapped to int32. */
int32_t test_dot4(int us, int32_t acc, int32_t a, int32_t b);
/* Operands for them: every byte extreme (0x00, 0x7f, 0x80, 0xff) and sums that wrap (n <= 64). */
void test_dot4_operands(int32_t *a, int32_t *b, int32_t *acc, int n);

#endif
