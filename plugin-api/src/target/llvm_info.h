/* llvm_info.h: what LLVM itself knows about triples, CPUs and features (private to libtth).
 *
 * Why a C++ shim: the LLVM-C API can build a target machine but cannot list a target's CPUs or
 * features, nor say which features a CPU implies, and it prints "'x' is not a recognized
 * processor" to stderr for an unknown CPU. MCSubtargetInfo (C++) answers all three without
 * printing anything, from LLVM's own tables, so tth never keeps a CPU table that could drift
 * from the LLVM it links. Everything here is read-only and thread-safe; nothing writes to stderr
 * because every CPU and feature is checked against LLVM's lists before it is handed to LLVM.
 */
#ifndef TTH_TARGET_LLVM_INFO_H
#define TTH_TARGET_LLVM_INFO_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1 if LLVM has a target for the triple ("aarch64-linux-gnu"), else 0. */
int tth__llvm_triple_known(const char *triple);

/* 1 if cpu is a processor LLVM knows for the triple's target, else 0 (also for an unknown triple). */
int tth__llvm_cpu_known(const char *triple, const char *cpu);

/* 1 if feature (no '+'/'-') is a subtarget feature of the triple's target, else 0. */
int tth__llvm_feature_known(const char *triple, const char *feature);

/* The processor (what = 0) or feature (what = 1) names of the triple's target, sorted, as a
 * malloc'd NULL-terminated array of malloc'd strings (free with tth__strv_free); NULL when the
 * triple is unknown or memory ran out. */
char **tth__llvm_names(const char *triple, int what, size_t *n);
void tth__strv_free(char **v);

/* For cpu (may be "" for the triple's default) plus features ("+a,-b", already validated), set
 * enabled[i] to 1 when LLVM's subtarget has names[i] on, implied features included.
 * Returns 0, or -1 when the triple is unknown. */
int tth__llvm_features_enabled(const char *triple, const char *cpu, const char *features,
                               const char *const *names, size_t n, int *enabled);

/* Of the features in `features` ("+a,-b,..." as LLVMGetHostCPUFeatures gives them), the ones
 * whose state differs from cpu's defaults and that the triple's target knows, sorted, joined by
 * ','; malloc'd ("" when none), NULL when the triple is unknown or memory ran out. */
char *tth__llvm_feature_diff(const char *triple, const char *cpu, const char *features);

#ifdef __cplusplus
}
#endif
#endif
