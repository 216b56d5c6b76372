/* tth/plugin.h: the plugin ABI.
 *
 * A plugin is one shared object implementing one target kind. It exports:
 *   - the descriptor: `const tth_plugin_descriptor tth_descriptor;` (TTH_PLUGIN_DESCRIPTOR_SYMBOL)
 *   - any subset of the hooks below, each under its fixed symbol name (TTH_HOOK_*_SYMBOL).
 * Nothing else: build with -fvisibility=hidden and mark those symbols TTH_PLUGIN_EXPORT.
 *
 * Versioning: the host refuses a plugin whose abi_major differs from TTH_ABI_MAJOR, or whose
 * abi_minor is newer than the host's. Within one major version structs only grow at the end;
 * every struct that crosses the ABI starts with `uint32_t size` (sizeof as the writer was built),
 * and a reader never looks past `size`. Enum values are frozen numbers.
 *
 * Ownership (the whole rule):
 *   - Everything the plugin's descriptor points to is static data of the plugin; the host never
 *     frees it and copies what it keeps past the plugin's lifetime.
 *   - Hook inputs are borrowed for the duration of the call; the plugin must not keep them.
 *   - Hook outputs are either (a) a new jansson reference the caller now owns (target_parser), or
 *     (b) added to a host-owned container through libtth calls (tth_tir_module_*, tth_runtime_module_*,
 *     tth_const_map_*), which copy what they are given. So no memory is ever freed across the ABI by
 *     the side that did not allocate it: plugin and host both allocate through libtth/jansson, which
 *     they share as shared libraries.
 *   - On failure a hook returns a negative TTH_E* code and fills `diag`; whatever it added to an
 *     output container is discarded by the host.
 * Hooks run in a tthd worker process, never in the daemon: a crash fails one request only.
 */
#ifndef TTH_PLUGIN_H
#define TTH_PLUGIN_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "tth/diag.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TTH_ABI_MAJOR 1
#define TTH_ABI_MINOR 9 /* 1.1 added the partition_supports hook; 1.2 vector TIR (lanes, RAMP,
                           * BROADCAST, FMA, REDUCE_*, REGISTER buffers, load/store alignment);
                           * 1.3 tth_host.progress; 1.4 the TIR walker (tth_tir_walk);
                           * 1.5 tth_host.store_get/store_put; 1.6 the REINTERPRET expression;
                           * 1.7 the DOT4_US / DOT4_SS intrinsics; 1.8 tth_target_member,
                           * tth_relay_expr_args, tth_clip_attrs_of, tth_pad_attrs_of,
                           * tth_relay_module_drop_constants, derived CONST buffers
                           * (tth_tbuffer.derive, tth_tir_const_buffer_derived);
                           * 1.9 TTH_FILE_LINK_OBJECT and the module meta "link_replaces",
                           * tth_binding_derived */

#define TTH_PLUGIN_EXPORT __attribute__((visibility("default")))

#define TTH_PLUGIN_DESCRIPTOR_SYMBOL "tth_descriptor"
#define TTH_HOOK_TARGET_PARSER_SYMBOL "tth_target_parser"
#define TTH_HOOK_RELAY_TO_TIR_SYMBOL "tth_relay_to_tir"
#define TTH_HOOK_TIR_TO_RUNTIME_SYMBOL "tth_tir_to_runtime"
#define TTH_HOOK_RELAY_TO_RUNTIME_SYMBOL "tth_relay_to_runtime"
#define TTH_HOOK_CONSTANT_UPDATER_SYMBOL "tth_constant_updater"
#define TTH_HOOK_PARTITION_SUPPORTS_SYMBOL "tth_partition_supports" /* ABI 1.1 */

/* Attribute types of a kind's schema. Frozen numbers. */
typedef enum tth_attr_type {
    TTH_ATTR_STRING = 1,
    TTH_ATTR_INT = 2,
    TTH_ATTR_BOOL = 3,
    TTH_ATTR_STRING_ARRAY = 4,
    TTH_ATTR_TARGET = 5,
} tth_attr_type;

/* Device types: DLPack's numbers. */
typedef enum tth_device_type {
    TTH_DEVICE_CPU = 1,
    TTH_DEVICE_CUDA = 2,
    TTH_DEVICE_OPENCL = 4,
    TTH_DEVICE_VULKAN = 7,
    TTH_DEVICE_EXT_DEV = 12,
} tth_device_type;

/* Kind flags. */
enum {
    TTH_KIND_NEEDS_HOST = 1u << 0, /* code for this kind is driven by a host target */
    TTH_KIND_CAN_BE_HOST = 1u << 1, /* this kind can be the host of others (llvm, c) */
};

/* One attribute of a kind. */
typedef struct tth_attr_schema {
    uint32_t size;            /* sizeof(tth_attr_schema) as the plugin was built */
    const char *name;         /* "mcpu" (no dash) */
    tth_attr_type type;
    const char *default_json; /* JSON text of the default value, or NULL for no default */
    const char *doc;          /* one line for `tthctl targets` */
} tth_attr_schema;

/* One tag: a short, immutable name for a whole target. */
typedef struct tth_tag_def {
    uint32_t size;               /* sizeof(tth_tag_def) as the plugin was built */
    const char *name;            /* canonical: "arm/cortex-m55" */
    const char *const *aliases;  /* NULL-terminated; NULL for none: "corstone-300" */
    const char *config_json;     /* the target it stands for, JSON, including "kind" */
    const char *doc;             /* one line: the board or instance it describes */
} tth_tag_def;

typedef struct tth_plugin_descriptor {
    uint32_t size;                        /* sizeof(tth_plugin_descriptor) as built */
    uint16_t abi_major;                   /* TTH_ABI_MAJOR as built */
    uint16_t abi_minor;                   /* TTH_ABI_MINOR as built */
    const char *plugin_name;              /* "llvm-cpu" */
    const char *plugin_version;           /* "1.0.0" */
    const char *kind;                     /* target kind: "llvm" */
    const char *doc;                      /* one line */
    tth_device_type device_type;
    uint32_t flags;                       /* TTH_KIND_* */
    const tth_attr_schema *const *attrs;  /* NULL-terminated; kind-specific attributes */
    const char *const *default_keys;      /* NULL-terminated */
    const tth_tag_def *const *tags;       /* NULL-terminated; may be NULL */
} tth_plugin_descriptor;

/* The descriptor's boilerplate, for plugins written in C (macros only: nothing new crosses the
 * ABI). Each fills in `size`, and the descriptor the ABI numbers the plugin is built with:
 *   TTH_ATTR_DEF(a_lanes, "lanes", TTH_ATTR_INT, "8", "vector lanes");
 *   TTH_TAG_DEF(t_npu16, "oot/npu-16", TTH_ALIASES("oot/npu16"), "{\"kind\": \"oot-npu\"}", "...");
 *   TTH_PLUGIN_DESCRIPTOR(.plugin_name = "oot-npu", .plugin_version = "1.0.0", .kind = "oot-npu",
 *                         .doc = "...", .attrs = attrs, .default_keys = keys, .tags = tags); */
/* `static const tth_attr_schema id`: one attribute of the kind. */
#define TTH_ATTR_DEF(id, name_, type_, default_json_, doc_)                                        \
    static const tth_attr_schema id = {.size = sizeof(tth_attr_schema), .name = (name_), .type = (type_), \
                                       .default_json = (default_json_), .doc = (doc_)}
/* `static const tth_tag_def id`: one tag; aliases_ is NULL or a TTH_ALIASES(...) list. */
#define TTH_TAG_DEF(id, name_, aliases_, config_json_, doc_)                                        \
    static const tth_tag_def id = {.size = sizeof(tth_tag_def), .name = (name_), .aliases = (aliases_), \
                                   .config_json = (config_json_), .doc = (doc_)}
/* A NULL-terminated list of names (a tag's aliases), as static data. */
#define TTH_ALIASES(...) ((const char *const[]){__VA_ARGS__, NULL})
/* The exported `tth_descriptor`; the arguments are the other fields' designated initializers. */
#define TTH_PLUGIN_DESCRIPTOR(...)                                                                  \
    TTH_PLUGIN_EXPORT const tth_plugin_descriptor tth_descriptor = {                                \
        .size = sizeof(tth_plugin_descriptor), .abi_major = TTH_ABI_MAJOR, .abi_minor = TTH_ABI_MINOR, __VA_ARGS__}

/* What the host lends a hook. Grows at the end; check `size` before reading newer fields. */
typedef struct tth_host {
    uint32_t size;
    uint16_t abi_major;
    uint16_t abi_minor;
    void *ctx;                                          /* pass back to the callbacks */
    void (*log)(void *ctx, int level, const char *msg); /* level: tth_severity */
    int (*cancelled)(void *ctx);                        /* non-zero: stop and return TTH_ECANCELLED */
    const char *scratch_dir;                            /* a private directory for this request */
    /* ABI 1.3: how far a long hook is, `done` of `total` steps of its own choosing (for instance
     * functions compiled), shown to the user as progress within the stage. Call it from the
     * thread that called the hook, as often as you like (the host passes on whole-percent
     * changes only). Check `size` and NULL before calling: older hosts do not have it. */
    void (*progress)(void *ctx, int done, int total);
    /* ABI 1.5: a store of compiled code the host keeps between compiles, shared by its workers
     * (docs/plugin-guide.md, "Reusing compiled code"). store_get: the bytes kept under key, as a
     * malloc'd copy in *data (free it) of *len bytes, and returns 1; 0 when there are none.
     * store_put: keep len bytes under key (copied; the host may drop them at any time). A key is
     * 16 bytes the plugin derives from everything the bytes depend on (for instance a hash of
     * the code generator's input, its options, its own and its compiler's version, and the
     * plugin's name): equal keys must mean equal bytes. Both may be called from any thread of the
     * hook. Check `size` and NULL before calling: older hosts, and hosts that keep nothing, do
     * not have them. */
    int (*store_get)(void *ctx, const uint8_t key[16], void **data, size_t *len);
    void (*store_put)(void *ctx, const uint8_t key[16], const void *data, size_t len);
} tth_host;

/* The host's store, when it has one (a host of ABI 1.5 or later that set both callbacks). */
#define TTH_HOST_HAS_STORE(h)                                                                    \
    ((h) && (h)->size >= offsetof(tth_host, store_put) + sizeof (h)->store_put && (h)->store_get && \
     (h)->store_put)

/* IR and output containers; their functions are in tth/relay.h, tth/tir.h, tth/artifact.h. */
typedef struct tth_relay_function tth_relay_function;
typedef struct tth_rexpr tth_rexpr;
typedef struct tth_tir_module tth_tir_module;
typedef struct tth_runtime_module tth_runtime_module;
typedef struct tth_const_map tth_const_map;

/* target_parser: the canonical JSON of one target of this kind in (borrowed), the transformed
 * JSON out (*out: a new reference the caller owns). Derive keys and features, fill defaults. */
typedef int (*tth_target_parser_fn)(const tth_host *host, const json_t *target, json_t **out,
                                    tth_diag *diag);

/* relay_to_tir: a Relay function assigned to this target in; PrimFuncs added to `mod`, the one
 * callable from the executor named `global_symbol`. */
typedef int (*tth_relay_to_tir_fn)(const tth_host *host, const json_t *target,
                                   const tth_relay_function *fn, const char *global_symbol,
                                   tth_tir_module *mod, tth_diag *diag);

/* tir_to_runtime: the PrimFuncs of this target in; the files of a runtime module (object code,
 * C source, blobs) added to `out`. */
typedef int (*tth_tir_to_runtime_fn)(const tth_host *host, const json_t *target,
                                     const tth_tir_module *mod, tth_runtime_module *out,
                                     tth_diag *diag);

/* relay_to_runtime: a Relay function in; an opaque runtime module out, exposing `global_symbol`. */
typedef int (*tth_relay_to_runtime_fn)(const tth_host *host, const json_t *target,
                                       const tth_relay_function *fn, const char *global_symbol,
                                       tth_runtime_module *out, tth_diag *diag);

/* constant_updater: the constants the external module for `fn` needs, added to `out` by name,
 * so they are stored with the other parameters rather than baked into the module. */
typedef int (*tth_constant_updater_fn)(const tth_host *host, const json_t *target,
                                       const tth_relay_function *fn, const char *global_symbol,
                                       tth_const_map *out, tth_diag *diag);

/* partition_supports (ABI 1.1): may this kind take `call`, an operator call of `fn` (the
 * model's main function after constant folding, before fusion)? Return 1 for yes; 0 for no,
 * writing the reason into `why` ("nn.conv2d with dilation [2, 2]: CMSIS-NN needs dilation 1");
 * a negative TTH_E* code on error. The partitioner groups connected supported calls into
 * regions and gives each region to the first kind of a composite target that supports all of
 * it; a kind without this hook is only ever the fallback (last) kind. The call's arguments and
 * the function are borrowed for the call. */
typedef int (*tth_partition_supports_fn)(const tth_host *host, const json_t *target,
                                         const tth_relay_function *fn, const tth_rexpr *call,
                                         char *why, size_t why_len);

#ifdef __cplusplus
}
#endif
#endif
