/* tth/diag.h: error codes and the diagnostics struct every fallible call fills.
 *
 * Rules (taken from jansson's json_error_t):
 *  - A function that can fail returns int (0 on success, a negative TTH_E* code) or a
 *    pointer (NULL on failure), and fills the caller's tth_diag.
 *  - tth_diag has fixed buffers: filling it never allocates, so it works while out of memory.
 *  - A diagnostic says what was wrong (message), where (location), and what to do (hint).
 */
#ifndef TTH_DIAG_H
#define TTH_DIAG_H

#include <stddef.h>
#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TTH_API __attribute__((visibility("default")))

/* Every error code, defined once: X(NAME, value, short text).
 * The numbers are frozen: they cross the plugin ABI and the wire (as -32000 - |value| in
 * JSON-RPC errors, see protocol/PROTOCOL.md). New codes are only ever appended. */
#define TTH_ERRORS(X)                                                            \
    X(OK,            0,   "ok")                                                  \
    X(EINVAL,       -1,   "invalid argument")                                    \
    X(ENOMEM,       -2,   "out of memory")                                       \
    X(ENOENT,       -3,   "not found")                                           \
    X(EIO,          -4,   "input/output error")                                  \
    X(EPARSE,       -5,   "syntax error")                                        \
    X(EUNKNOWN,     -6,   "unknown name")                                        \
    X(ETYPE,        -7,   "wrong type")                                          \
    X(EABI,         -8,   "plugin ABI mismatch")                                 \
    X(EPLUGIN,      -9,   "plugin failed")                                       \
    X(EUNSUPPORTED, -10,  "not supported")                                       \
    X(EPERM,        -11,  "permission denied")                                   \
    X(EDUPLICATE,   -12,  "duplicate")                                           \
    X(ECANCELLED,   -13,  "cancelled")                                           \
    X(ETIMEOUT,     -14,  "timed out")                                           \
    X(EMODEL,       -15,  "invalid model")                                       \
    X(ELIMIT,       -16,  "limit exceeded")                                      \
    X(EINTERNAL,    -17,  "internal error")                                      \
    X(ECRASH,       -18,  "worker crashed")

enum tth_error {
#define TTH__ERR_ENUM(name, value, text) TTH_##name = value,
    TTH_ERRORS(TTH__ERR_ENUM)
#undef TTH__ERR_ENUM
};

/* Severity numbers match LSP's DiagnosticSeverity. */
typedef enum tth_severity {
    TTH_SEV_ERROR = 1,
    TTH_SEV_WARNING = 2,
    TTH_SEV_INFO = 3,
    TTH_SEV_HINT = 4,
} tth_severity;

#define TTH_DIAG_MESSAGE_MAX 512
#define TTH_DIAG_LOCATION_MAX 256
#define TTH_DIAG_HINT_MAX 256

typedef struct tth_diag {
    int code;                              /* a TTH_E* value; TTH_OK when nothing was reported */
    int severity;                          /* tth_severity */
    char message[TTH_DIAG_MESSAGE_MAX];    /* what was wrong, one sentence */
    char location[TTH_DIAG_LOCATION_MAX];  /* where: "target '-mcpu=cortex-m99'", "node 'c1' (Conv)" */
    char hint[TTH_DIAG_HINT_MAX];          /* what to do: "did you mean 'cortex-m55'?"; may be empty */
} tth_diag;

/* Reset to "no error". */
TTH_API void tth_diag_clear(tth_diag *d);

/* Record an error; returns code so callers can write `return tth_diag_set(d, ...)`.
 * d may be NULL (the error is then only returned). location may be NULL. */
TTH_API int tth_diag_set(tth_diag *d, int code, const char *location, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
TTH_API int tth_diag_vset(tth_diag *d, int code, const char *location, const char *fmt, va_list ap);

/* Attach a hint (what to do) to the recorded error. */
TTH_API void tth_diag_hint(tth_diag *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prefix the message with context ("loading plugin 'x.so': ..."), keeping code and hint. */
TTH_API void tth_diag_prefix(tth_diag *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "invalid argument", ... for a code; "unknown error" for an unknown one. */
TTH_API const char *tth_strerror(int code);

/* Stable symbolic name of a code: "EINVAL". */
TTH_API const char *tth_error_name(int code);

/* Render "error: message\n  at: location\n  hint: hint" into buf (always NUL-terminated). */
TTH_API size_t tth_diag_format(const tth_diag *d, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
