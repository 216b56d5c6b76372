/* tth/artifact.h: what hooks produce. A runtime module is a set of named files (C sources,
 * objects, blobs) plus link metadata; a constant map is a set of named tensors. Both are owned
 * by the host; plugins add to them and every add copies its input. */
#ifndef TTH_ARTIFACT_H
#define TTH_ARTIFACT_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "tth/diag.h"
#include "tth/ir_common.h"
#include "tth/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Frozen numbers. */
typedef enum tth_file_kind {
    TTH_FILE_C_SOURCE = 1,   /* goes to codegen/host/src/ and is compiled with the host's C compiler */
    TTH_FILE_C_HEADER = 2,   /* codegen/host/include/ */
    TTH_FILE_OBJECT = 3,     /* codegen/host/lib/ (.o for the target) */
    TTH_FILE_SHARED = 4,     /* a host shared object (.so) */
    TTH_FILE_BLOB = 5,       /* opaque data (e.g. a command stream) linked as bytes */
    TTH_FILE_LINK_OBJECT = 6, /* ABI 1.9: a host object the host's shared library is linked from in
                               * place of the C sources the module meta's "link_replaces" names; not
                               * part of the artifact (docs/plugin-guide.md, "Objects in place of
                               * sources") */
} tth_file_kind;

typedef struct tth_module_file {
    const char *name;        /* relative file name, no directories: "default_lib0.c" */
    tth_file_kind kind;
    const uint8_t *data;
    size_t len;
} tth_module_file;

TTH_API tth_runtime_module *tth_runtime_module_new(const char *target_kind);
TTH_API void tth_runtime_module_free(tth_runtime_module *m);
TTH_API const char *tth_runtime_module_kind(const tth_runtime_module *m);
/* Copies name and data. A name may appear once; names are plain file names. */
TTH_API int tth_runtime_module_add_file(tth_runtime_module *m, const char *name, tth_file_kind kind,
                                        const void *data, size_t len, tth_diag *diag);
TTH_API size_t tth_runtime_module_count(const tth_runtime_module *m);
TTH_API const tth_module_file *tth_runtime_module_file(const tth_runtime_module *m, size_t i);
/* Link metadata, merged into the artifact's metadata.json: e.g. {"libs": ["cmsis-nn"],
 * "defines": [...], "entry_symbols": [...]}. Borrowed JSON is copied. */
TTH_API int tth_runtime_module_set_meta(tth_runtime_module *m, const json_t *meta, tth_diag *diag);
TTH_API const json_t *tth_runtime_module_meta(const tth_runtime_module *m);

/* Constants bound at run time (docs/artifact.md, "Constants bound at run time"): a code generator
 * whose entry loads each large constant's address from slot k of <prefix>_const_slots, defines
 * int32_t <prefix>_bound and, while it is 0, calls <prefix>_ensure_bound() (returning its status
 * when non-zero), adds with this the source that defines the rest, <model>_bind.c: the slots, the
 * binding from pointers (<prefix>_bind_constants) or from the parameters file
 * (<prefix>_bind_parameters), the status texts. bound[k] is slot k's constant (named as in the
 * parameters file), align[k] the alignment the code loads it with (at most 64). */
struct tth_tbuffer;
/* The binding's symbols are the prefix followed by these, spelled here once for the binding
 * source, the code that calls it and the objects that stand in for it. */
#define TTH_BIND_SYM_SLOTS "_const_slots"
#define TTH_BIND_SYM_FLAG "_bound"
#define TTH_BIND_SYM_CONSTANTS "_bind_constants"
#define TTH_BIND_SYM_PARAMETERS "_bind_parameters"
#define TTH_BIND_SYM_STATUS_TEXT "_status_text"
#define TTH_BIND_SYM_ENSURE "_ensure_bound"
/* The named constants of at least this many bytes are the ones bound (smaller ones, a scalar or
 * a few lanes, stay in the code, where the compiler may fold them): with weights and biases out
 * of the code, a model retrained with the same shapes compiles to the same code, which a cache of
 * compiled code can then reuse (docs/artifact.md). */
#define TTH_BIND_MIN_BYTES 64
/* What the entry returns while its constants are not bound. */
#define TTH_BIND_E_UNBOUND (-200)
/* The binding source's table of derived constants (runtime/bind/tth_bind.c): per derived slot,
 * TTH_BIND_DERIVED_FIELDS numbers (the slot, its source's slot, the transform, the source's first
 * two dimensions, the byte offset in the store of derived constants); the transforms numbered. */
#define TTH_BIND_DERIVED_FIELDS 6
#define TTH_BIND_DERIVE_WINOGRAD_F4X4_3X3 1
/* That table for a binding of bound[0..n): a slot is derived when its tth_tbuffer.derive_from is
 * bound too. Writes TTH_BIND_DERIVED_FIELDS numbers per derived slot into fields (room for n
 * slots; NULL: none written) and the bytes of their store (each 64-aligned) into *store_bytes
 * (NULL: not written); returns how many slots are derived (ABI 1.9). */
TTH_API size_t tth_binding_derived(const struct tth_tbuffer *const *bound, size_t n, size_t *fields,
                                   size_t *store_bytes);
TTH_API int tth_runtime_module_add_binding(tth_runtime_module *out, const char *model, const char *prefix,
                                           const struct tth_tbuffer *const *bound, const unsigned *align, size_t n,
                                           int32_t unbound_status, tth_diag *diag);
/* The module meta's "bind_constants" value for the same binding (new reference); its
 * "blob_symbol" (tth_<model>_parameters) says the source binds the parameters file linked into
 * the library by itself when built with TTH_BIND_EMBEDDED (the artifact's CMakeLists.txt). */
TTH_API json_t *tth_binding_meta(const char *prefix, const char *model, const struct tth_tbuffer *const *bound,
                                 size_t n, int32_t unbound_status);

TTH_API tth_const_map *tth_const_map_new(void);
TTH_API void tth_const_map_free(tth_const_map *m);
/* Takes a reference to t. A name may appear once. */
TTH_API int tth_const_map_add(tth_const_map *m, const char *name, tth_tensor *t, tth_diag *diag);
TTH_API size_t tth_const_map_count(const tth_const_map *m);
TTH_API const char *tth_const_map_name(const tth_const_map *m, size_t i);
TTH_API tth_tensor *tth_const_map_tensor(const tth_const_map *m, size_t i);

#ifdef __cplusplus
}
#endif
#endif
