/* tth/target.h: the target system (docs/targets.md).
 *
 * A target's canonical form is a JSON object (jansson):
 *   {"kind": "llvm", "tag": "raspberry-pi/5", "keys": ["arm_cpu", "cpu"],
 *    "mtriple": "aarch64-linux-gnu", "mcpu": "cortex-a76", ..., "features": {"has_dotprod": true},
 *    "host": {target}}
 * or a composite: {"kind": "composite", "targets": [{...}, ...], "host": {target}}.
 *   - attributes sit at the top level (an input may also nest them in "attrs": docs/targets.md);
 *     defaults of the kind's schema are filled in; empty lists are dropped;
 *   - "tag" is the canonical tag name, also when an alias was written;
 *   - "keys": what the kind's parser derives first, then the user's keys (or the kind's default
 *     keys when the user gave none, TVM's rule), then "device"; duplicates removed, first kept;
 *   - "features": derived by the kind's target_parser; never read from the input;
 *   - "host": the given host, else the default host (plain `llvm`: this machine's triple) for a
 *     kind with TTH_KIND_NEEDS_HOST. Members of a composite have no host of their own; the
 *     composite's host is the given one, else its last member when that kind can be a host,
 *     else the default host when a member needs one.
 * Every function here is pure with respect to the registry: it never loads plugins itself.
 * Errors never print: they fill the tth_diag (message names the offending text, hint suggests).
 */
#ifndef TTH_TARGET_H
#define TTH_TARGET_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "tth/diag.h"
#include "tth/plugin.h"
#include "tth/registry.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parse any written form of a target:
 *   - the string form: "llvm -mtriple=aarch64-linux-gnu -mattr=+neon,+dotprod", composite
 *     "ethos-n,cmsis-nn,c -mcpu=cortex-m55", "-host='llvm -mcpu=...'";
 *   - a tag, alone or with overrides: "arm/cortex-m55 -mattr=+nomve";
 *   - JSON text (starts with '{'), or "@path" / a path ending in ".json" naming a JSON file.
 * Then: tag expansion, schema validation, defaults, default host, each kind's target_parser
 * (through `host`, may be NULL), keys. Returns the canonical JSON (new reference) or NULL with
 * diag filled: the message names the offending text and the hint suggests the nearest names. */
TTH_API json_t *tth_target_parse(const tth_registry *reg, const tth_host *host, const char *text,
                                 tth_diag *diag);

/* Same, from an already-parsed JSON object (borrowed). */
TTH_API json_t *tth_target_from_json(const tth_registry *reg, const tth_host *host, const json_t *obj,
                                     tth_diag *diag);

/* The canonical string form (malloc'd; caller frees with free()). Includes tag and host.
 * tth_target_parse(tth_target_to_string(t)) equals t. Every attribute is written -key=value,
 * sorted by key, after the kind; "features" is left out (the parser derives it again); values
 * with spaces, quotes, backslashes (or commas, in lists) are single-quoted with \' and \\.
 * A composite is written "composite -host='...' -targets='member','member'". */
TTH_API char *tth_target_to_string(const json_t *canonical);

/* The canonical JSON text: keys sorted, compact, deterministic (malloc'd; free()). */
TTH_API char *tth_target_to_json_text(const json_t *canonical);

/* A stable 64-bit hash of the canonical form, for cache keys. */
TTH_API uint64_t tth_target_hash(const json_t *canonical);

/* The triple of the machine this process runs on, as LLVM names it ("x86_64-pc-linux-gnu"). */
TTH_API const char *tth_host_triple(void);

/* The host CPU as LLVM names it ("skylake-avx512", "neoverse-n1"); "generic" when unknown. */
TTH_API const char *tth_host_cpu_name(void);

/* ---- For target_parser hooks: the shared parsers, with LLVM's view of CPUs and features ----
 * Both take the canonical JSON of one target (borrowed) and give a transformed copy in *out (new
 * reference), or return a negative TTH_E* code with diag filled and *out NULL. Both replace
 * "features" with what they derive and put their keys first in "keys".
 *
 * CPU parser (kinds llvm and c): "mcpu": "native" becomes the host CPU (plus the host triple when
 * there is no mtriple, and the host features that differ from the CPU's defaults in front of
 * mattr); a Cortex-M mcpu, or an M-profile thumb triple without mcpu, goes to the M-profile
 * parser; otherwise mtriple (or the host triple), mcpu and every mattr entry are checked against
 * LLVM (unknown ones are errors naming the nearest LLVM names) and
 *   aarch64/arm64/arm: key "arm_cpu"; features is_aarch64, has_asimd, has_sve, has_dotprod,
 *                      has_matmul_i8, has_fp16_simd, has_sme (LLVM's view of mcpu + mattr,
 *                      implied features included: +v8.4a gives dotprod, +v8.6a gives i8mm);
 *   x86:               key "x86_64"; features has_avx2, has_avx512;
 *   other triples:     no key, no features. */
TTH_API int tth_cpu_target_parse(const json_t *target, json_t **out, tth_diag *diag);

/* M-profile parser (kind cmsis-nn; Cortex-M for llvm and c): mcpu must be a Cortex-M CPU LLVM
 * knows, optionally followed by "+nodsp" / "+nomve"; mattr may hold "+nodsp" / "+nomve" and LLVM
 * Arm features. Features has_dsp, has_mve (LLVM's view; +nodsp also turns MVE off; neither
 * without mcpu and mtriple); keys "arm_cpu", "cpu". */
TTH_API int tth_mprofile_target_parse(const json_t *target, json_t **out, tth_diag *diag);

/* Put keys[0..n) in front of target["keys"], keeping the first of any duplicate. 0 or TTH_E*. */
TTH_API int tth_target_keys_prepend(json_t *target, const char *const *keys, size_t n);

/* 1 when canonical["features"][feature] is true (or a non-zero integer), else 0. For a composite,
 * ask the member: tth_target_has_feature(json_array_get(targets, i), ...). */
TTH_API int tth_target_has_feature(const json_t *canonical, const char *feature);

/* The member of kind `kind` of a canonical composite target (borrowed); the target itself when it
 * is not a composite or has no member of that kind. For a plugin's hooks, which may be given
 * either: tth_target_member(target, "ethos-n"). */
TTH_API const json_t *tth_target_member(const json_t *canonical, const char *kind);

/* The vector registers code for a canonical (non-composite) target should use, from its keys and
 * features (docs/targets.md, "Vector shape"): float32 lanes of the widest vector register (16 for
 * AVX-512, 8 for AVX2, 4 for SSE2 and for NEON; 1, scalar code, for kinds that are not the llvm
 * kind, for M-profile and for CPUs of which nothing is known) and how many such registers there
 * are, and whether the CPU has a fused multiply-add instruction (AVX2 machines and every AArch64;
 * not the x86-64 baseline). NULL gives the scalar shape. */
typedef struct tth_vector_shape {
    int32_t f32_lanes;
    int32_t registers;
    int32_t fma;              /* 1: fused multiply-add is one instruction (else a library call) */
} tth_vector_shape;
TTH_API tth_vector_shape tth_target_vector_shape(const json_t *canonical);

/* The cores a canonical target lets generated code use: its "num-cores" when that is an integer
 * from 1 to 1023, else 0 (the target does not say; docs/threads.md). Plain host `llvm` writes
 * the machine's online CPUs there when parsed (docs/targets.md). */
TTH_API int tth_target_num_cores(const json_t *canonical);

/* Levenshtein distance, and the up-to-`max` nearest of `candidates` to `word` (distance at most
 * a third of the word's length, at least 2), written as "'a', 'b'" into buf. Returns how many. */
TTH_API size_t tth_edit_distance(const char *a, const char *b);
TTH_API size_t tth_nearest_names(const char *word, const char *const *candidates, size_t n,
                                 size_t max, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
