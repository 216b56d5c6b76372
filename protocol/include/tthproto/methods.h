/* tthproto/methods.h: every method of the protocol, defined once (PROTOCOL.md section 5).
 *
 * X(ID, "wire name", kind, "params spec", "one line")
 *
 * The params spec lists the parameters the receiver checks before dispatch, separated by
 * blanks: `name:types` for a required one, `?name:types` for an optional one; types are letters:
 * s string, o object, i integer, b boolean, a array, n null. Other parameters are ignored. */
#ifndef TTHPROTO_METHODS_H
#define TTHPROTO_METHODS_H

#include <stddef.h>
#include <jansson.h>

typedef enum tthp_method_kind {
    TTHP_REQUEST = 1,      /* client → server, answered */
    TTHP_NOTIFY_C2S = 2,   /* client → server notification */
    TTHP_NOTIFY_S2C = 3,   /* server → client notification */
    TTHP_NOTIFY_BOTH = 4,  /* notification either way */
} tthp_method_kind;

#define TTHP_METHODS(X)                                                                        \
    X(INITIALIZE,    "initialize",      TTHP_REQUEST,     "protocolVersion:s ?clientInfo:o",  \
      "open a session; exchange versions and limits")                                         \
    X(SHUTDOWN,      "shutdown",        TTHP_REQUEST,     "",                                 \
      "stop the daemon after in-flight work")                                                 \
    X(STATUS,        "status",          TTHP_REQUEST,     "",                                 \
      "versions, uptime, counters, cache and worker figures")                                 \
    X(TARGET_PARSE,  "target/parse",    TTHP_REQUEST,     "target:so",                        \
      "parse a target into its canonical form")                                               \
    X(TARGETS_LIST,  "targets/list",    TTHP_REQUEST,     "",                                 \
      "target kinds with their schemas and hooks")                                            \
    X(TAGS_LIST,     "tags/list",       TTHP_REQUEST,     "",                                 \
      "target tags")                                                                          \
    X(PLUGINS_LIST,  "plugins/list",    TTHP_REQUEST,     "",                                 \
      "loaded plugins and refused files")                                                     \
    X(TARGETS_RECENT, "targets/recent", TTHP_REQUEST,     "",                                 \
      "the targets of the last compiles that succeeded")                                      \
    X(CACHE_CLEAR,   "cache/clear",     TTHP_REQUEST,     "",                                 \
      "empty the artifact cache")                                                             \
    X(COMPILE,       "compile",         TTHP_REQUEST,     "model:o target:so ?options:o ?delivery:s",     \
      "compile an uploaded model for a target; streams the artifact")                         \
    X(CANCEL,        "$/cancelRequest", TTHP_NOTIFY_C2S,  "id:si",                            \
      "cancel a request in flight")                                                           \
    X(CHUNK,         "$/chunk",         TTHP_NOTIFY_BOTH, "id:si stream:s offset:i size:i total:i", \
      "announce the binary frame that follows")                                               \
    X(PROGRESS,      "$/progress",      TTHP_NOTIFY_S2C,  "id:si kind:s stage:s percentage:i", \
      "progress of a request")

typedef enum tthp_method_id {
    TTHP_METHOD_NONE = -1,
#define TTHP__M_ENUM(id, name, kind, spec, doc) TTHP_M_##id,
    TTHP_METHODS(TTHP__M_ENUM)
#undef TTHP__M_ENUM
    TTHP_METHOD_COUNT
} tthp_method_id;

typedef struct tthp_method {
    tthp_method_id id;
    const char *name;
    tthp_method_kind kind;
    const char *params;
    const char *doc;
} tthp_method;

extern const tthp_method tthp_methods[TTHP_METHOD_COUNT];

/* The method of that wire name, or NULL. */
const tthp_method *tthp_method_find(const char *name);

/* Check params (an object, or NULL for none) against the method's spec. Returns 0, or
 * TTHP_INVALID_PARAMS with msg filled ("parameter 'target' must be a string or an object"). */
int tthp_params_check(const tthp_method *m, const json_t *params, char *msg, size_t len);

#endif
