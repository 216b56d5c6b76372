/* tth/registry.h: loading plugins from a trusted directory and looking up kinds.
 *
 * Used by tthd's worker processes (the daemon process itself never loads a plugin) and by tests.
 * A registry owns its plugins' handles; everything it returns is valid until tth_registry_free.
 */
#ifndef TTH_REGISTRY_H
#define TTH_REGISTRY_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "tth/diag.h"
#include "tth/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tth_registry tth_registry;

/* One loaded plugin, read-only. Hooks the plugin does not export are NULL. */
typedef struct tth_plugin {
    const char *path;                       /* file it came from; "<static>" for built-in */
    const tth_plugin_descriptor *desc;      /* the plugin's own static descriptor */
    const char *identity;                   /* "name@version#<xxh64 of the file>" for cache keys */
    tth_target_parser_fn target_parser;
    tth_relay_to_tir_fn relay_to_tir;
    tth_tir_to_runtime_fn tir_to_runtime;
    tth_relay_to_runtime_fn relay_to_runtime;
    tth_constant_updater_fn constant_updater;
    tth_partition_supports_fn partition_supports; /* ABI 1.1 */
} tth_plugin;

/* A file that was refused, and why. */
typedef struct tth_plugin_error {
    const char *path;
    tth_diag diag;
} tth_plugin_error;

TTH_API tth_registry *tth_registry_new(void);
TTH_API void tth_registry_free(tth_registry *r);

/* Load every `*.so` in dir (sorted by name, so loading order is deterministic). A refused file
 * is recorded as a tth_plugin_error and does not stop the others. Fails as a whole (negative
 * code, diag filled) only when the directory itself cannot be read or is not trusted.
 * Returns the number of plugins loaded. */
TTH_API int tth_registry_load_dir(tth_registry *r, const char *dir, tth_diag *diag);

/* Called by tth_registry_load_dir with each file's path before it loads it. Returning nonzero
 * leaves the file out, recorded as refused with the diag the observer filled; returning 0 loads
 * it. tth-worker tells the daemon which plugin it is loading, so that one whose loading crashes
 * the process is named and left out of the next workers (docs/plugin-guide.md, "A plugin that crashes as it loads"). Called once more with
 * path NULL when the directory is done (the return value is then ignored). */
typedef int (*tth_registry_load_observer)(void *ctx, const char *path, tth_diag *diag);
TTH_API void tth_registry_set_load_observer(tth_registry *r, tth_registry_load_observer fn, void *ctx);

/* Load one file. On refusal, returns a negative code, fills diag, and records the error. */
TTH_API int tth_registry_load_file(tth_registry *r, const char *path, tth_diag *diag);

/* Register a plugin that is linked into the program (tests, tools). Hooks may be NULL. Checked
 * like a loaded one. */
TTH_API int tth_registry_add_static(tth_registry *r, const tth_plugin_descriptor *desc,
                                    const tth_plugin *hooks, tth_diag *diag);

/* Check a path is trusted: owned by the effective user or root, and not writable by group or
 * others. For a file, its directory is checked too. */
TTH_API int tth_path_check_trusted(const char *path, tth_diag *diag);

/* The XXH64 (seed 0) of a file's bytes into *out: what a plugin's identity holds, and the
 * worker's identity of its own executable and libtth (docs/cache.md, "The key"). 0, or -1 when
 * the file cannot be read. */
TTH_API int tth_file_xxh64(const char *path, uint64_t *out);

/* Check a descriptor for ABI compatibility and completeness. */
TTH_API int tth_descriptor_check(const tth_plugin_descriptor *desc, const char *where,
                                 tth_diag *diag);

TTH_API size_t tth_registry_count(const tth_registry *r);
TTH_API const tth_plugin *tth_registry_plugin(const tth_registry *r, size_t i);
TTH_API const tth_plugin *tth_registry_find_kind(const tth_registry *r, const char *kind);

TTH_API size_t tth_registry_error_count(const tth_registry *r);
TTH_API const tth_plugin_error *tth_registry_error(const tth_registry *r, size_t i);

/* Everything a client may want to list, as JSON (new reference):
 * {"plugins": [{"name","version","kind","path","identity","hooks":[...]}],
 *  "kinds": [{"kind","plugin","doc","device_type","default_keys":[...],"flags":[...],
 *             "attrs":[{"name","type","default","doc"}], "hooks":[...]}],
 *  "tags": [{"name","aliases":[...],"kind","config","doc"}],
 *  "errors": [{"path","code","message","hint"}]} */
TTH_API json_t *tth_registry_describe(const tth_registry *r);

/* "string", "int", "bool", "string-array", "target" */
TTH_API const char *tth_attr_type_name(tth_attr_type t);

#ifdef __cplusplus
}
#endif
#endif
