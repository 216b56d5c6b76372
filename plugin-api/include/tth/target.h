/* tth/target.h: the target system (the seeds' "Target specification" and "Target parser").
 *
 * A target's canonical form is a JSON object (jansson):
 *   {"kind": "llvm", "tag": "raspberry-pi/5", "keys": ["arm_cpu", "cpu"],
 *    "mtriple": "aarch64-linux-gnu", "mcpu": "cortex-a76", ..., "host": {target}}
 * or a composite: {"kind": "composite", "targets": [{...}, ...], "host": {target}}.
 * Every function here is pure with respect to the registry: it never loads plugins itself.
 */
#ifndef TTH_TARGET_H
#define TTH_TARGET_H

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
 * tth_target_parse(tth_target_to_string(t)) equals t. */
TTH_API char *tth_target_to_string(const json_t *canonical);

/* The canonical JSON text: keys sorted, compact, deterministic (malloc'd; free()). */
TTH_API char *tth_target_to_json_text(const json_t *canonical);

/* A stable 64-bit hash of the canonical form, for cache keys. */
TTH_API uint64_t tth_target_hash(const json_t *canonical);

/* The triple of the machine this process runs on, as LLVM names it ("x86_64-pc-linux-gnu"). */
TTH_API const char *tth_host_triple(void);

/* Levenshtein distance, and the up-to-`max` nearest of `candidates` to `word` (distance at most
 * a third of the word's length, at least 2), written as "'a', 'b'" into buf. Returns how many. */
TTH_API size_t tth_edit_distance(const char *a, const char *b);
TTH_API size_t tth_nearest_names(const char *word, const char *const *candidates, size_t n,
                                 size_t max, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
