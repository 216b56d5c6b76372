/* tthctl.h: what the files of tthctl share.
 *
 * main.c      command table, argument parsing, help, exit codes
 * conn.c      socket path, connection, auto-start of tthd, initialize, request/response
 * daemon.c    the commands that are one request: status, targets, tags, plugins, target parse,
 *             cache clear, stop
 * compile.c   compile: model upload, artifact download, verification, atomic write
 * run.c       run: an artifact on this machine through the runtime library (no daemon)
 * output.c    diagnostics, progress, sizes
 *
 * Errors travel up to main as a negative tthctl_exit code with a tthctl_error filled; main
 * prints the error and exits with the code. Nothing below main calls exit(). */
#ifndef TTHCTL_H
#define TTHCTL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <jansson.h>

#include <tthproto/frame.h>

/* Exit codes, defined once: X(NAME, value, meaning). --help and docs/tthctl.md list them. */
#define TTHCTL_EXITS(X)                                                                  \
    X(OK,          0, "success")                                                         \
    X(FAILED,      1, "the request failed with a diagnostic (target, model, compile, run)") \
    X(USAGE,       2, "usage error (unknown command or option, missing argument)")       \
    X(UNREACHABLE, 3, "the daemon is unreachable (could not connect or start it)")       \
    X(PROTOCOL,    4, "protocol error (bad frames, version mismatch, bad artifact stream)") \
    X(IO,          5, "I/O error (reading or writing files)")

typedef enum tthctl_exit {
#define TTHCTL__EXIT_ENUM(name, value, text) TTHCTL_EXIT_##name = value,
    TTHCTL_EXITS(TTHCTL__EXIT_ENUM)
#undef TTHCTL__EXIT_ENUM
} tthctl_exit;

/* What went wrong, for main to print. Fixed buffers: filling it never allocates. */
typedef struct tthctl_error {
    int exit;              /* tthctl_exit */
    char message[768];     /* one sentence */
    char location[512];    /* "target 'lvm -mcpu=x'", "file 'out.tar'"; may be empty */
    char hint[512];        /* what to do; may be empty */
    json_t *rpc;           /* the daemon's error object when the error is a response (owned) */
    int sys_errno;         /* connect()'s errno when the daemon could not be reached, else 0 */
} tthctl_error;

/* Record an error; returns -exit so that callers can `return tthctl_fail(...)`. */
int tthctl_fail(tthctl_error *e, int exit, const char *location, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void tthctl_hint(tthctl_error *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tthctl_error_clear(tthctl_error *e);

/* Parsed command line. */
typedef struct tthctl_args {
    const char *socket;        /* --socket, or NULL for the default */
    int no_start;              /* --no-start */
    int quiet;                 /* --quiet: no progress output */
    int json;                  /* --json */
    const char *target;        /* --target */
    const char *output;        /* -o / --output */
    const char *name;          /* --name */
    const char *dump_ir;       /* --dump-ir */
    int explain;               /* --explain */
    int no_cache;              /* --no-cache */
    int timings;               /* --timings */
    int stream;                /* --stream: no file delivery of cache hits */
    int shared;                /* --shared: options.build_shared */
    const char *output_dir;    /* --output-dir */
    const char *repeat;        /* --repeat (checked by the command) */
    int profile;               /* --profile: compile a profiling artifact / print each call's time */
    const char *trace;         /* run --trace FILE */
    const char *seed;          /* validate --seed N (checked by the command) */
    const char *tolerance;     /* validate --tolerance X (checked by the command) */
    const char *board;         /* validate --board BOARD: run on an emulated Cortex-M board */
    const char **board_args;   /* validate --board-arg ARG, n_board_args of them */
    size_t n_board_args;
    int reference;             /* compile: options.reference (set by validate, not an option) */
    const char **inputs;       /* --input NAME=FILE, n_inputs of them */
    size_t n_inputs;
    const char **binds;        /* --bind NAME=FILE, n_binds of them */
    size_t n_binds;
    const char **shapes;       /* --input-shape NAME=D0,D1,..., n_shapes of them */
    size_t n_shapes;
    const char **pos;          /* positional arguments after the command */
    size_t n_pos;
} tthctl_args;

/* ---- connection (conn.c) ---- */

typedef struct tthctl_conn {
    int fd;
    tthp_fd_reader reader;
    json_int_t next_id;
    char socket_path[108];
    json_t *server;            /* initialize's result (owned) */
    size_t max_frame_bytes;    /* the daemon's limits */
    size_t max_request_bytes;
    int model_path_ok;         /* the daemon reads a model file named by path (capabilities.modelPath) */
    int started;               /* this tthctl started the daemon */
} tthctl_conn;

/* What to do with notifications and binary frames that arrive while waiting for a response.
 * Either callback may be NULL (the message is then ignored). A callback returns 0 or fails
 * with tthctl_fail. */
typedef struct tthctl_handlers {
    void *ctx;
    int (*notification)(void *ctx, const char *method, json_t *params, tthctl_error *err);
    int (*binary)(void *ctx, const uint8_t *data, size_t len, tthctl_error *err);
} tthctl_handlers;

/* The socket path: explicit, else PROTOCOL.md section 1's default. */
int tthctl_socket_default(char *buf, size_t len, tthctl_error *err);

/* Connect to the daemon on args->socket (starting one unless no_start or args->no_start) and
 * initialize the session. *out is heap allocated; close with tthctl_conn_close.
 * Fails with TTHCTL_EXIT_UNREACHABLE when nothing answers. */
int tthctl_conn_open(const tthctl_args *args, int no_start, tthctl_conn **out, tthctl_error *err);
void tthctl_conn_close(tthctl_conn *c);

/* Send a request (params stolen); *id gets its id. */
int tthctl_conn_send_request(tthctl_conn *c, const char *method, json_t *params_new, json_int_t *id,
                             tthctl_error *err);
/* Send a notification (params stolen). */
int tthctl_conn_notify(tthctl_conn *c, const char *method, json_t *params_new, tthctl_error *err);

/* Read and dispatch frames until the response to `id` arrives (returns 1, *result is its
 * result, a new reference) or, with timeout_ms >= 0, until nothing more arrives within
 * timeout_ms (returns 0). An error response fails with err->rpc set and the exit code of the
 * error (tthctl_rpc_exit). While waiting forever, an interrupt (SIGINT/SIGTERM) sends
 * $/cancelRequest once. */
int tthctl_conn_wait(tthctl_conn *c, json_int_t id, const tthctl_handlers *h, int timeout_ms,
                     json_t **result, tthctl_error *err);

/* One request, waiting for its answer. */
int tthctl_conn_call(tthctl_conn *c, const char *method, json_t *params_new, json_t **result,
                     tthctl_error *err);

/* The exit code for a JSON-RPC error code. */
int tthctl_rpc_exit(int code);

/* Set by the SIGINT/SIGTERM handler main installs. */
extern volatile int tthctl_interrupted;

/* ---- commands ---- */

/* The `target` parameter for a target argument: JSON text when it starts with '{', else the
 * string form or a tag (daemon.c). */
int tthctl_target_param(const char *text, json_t **out, tthctl_error *err);

int tthctl_cmd_status(const tthctl_args *a, tthctl_error *err);
int tthctl_cmd_targets(const tthctl_args *a, tthctl_error *err);
int tthctl_cmd_tags(const tthctl_args *a, tthctl_error *err);
int tthctl_cmd_plugins(const tthctl_args *a, tthctl_error *err);
int tthctl_cmd_target_parse(const tthctl_args *a, tthctl_error *err);
int tthctl_cmd_target_recent(const tthctl_args *a, tthctl_error *err);
int tthctl_cmd_cache_clear(const tthctl_args *a, tthctl_error *err);
int tthctl_cmd_stop(const tthctl_args *a, tthctl_error *err);
int tthctl_cmd_compile(const tthctl_args *a, tthctl_error *err);
int tthctl_cmd_run(const tthctl_args *a, tthctl_error *err);
int tthctl_cmd_validate(const tthctl_args *a, tthctl_error *err);
int tthctl_cmd_report(const tthctl_args *a, tthctl_error *err);

/* ---- arrays and runtime diagnostics (run.c), for run and validate ---- */

struct tthrt_array;
struct tth_diag;
/* A runtime diagnostic as tthctl's error: exit status 5 when a file could not be read, else 1;
 * context ("artifact 'x.tar'") is the location when the diagnostic has none. */
int tthctl_from_diag(tthctl_error *err, const struct tth_diag *d, const char *context);
double tthctl_element(const struct tthrt_array *a, int64_t i); /* element i as a double */
int64_t tthctl_numel(const struct tthrt_array *a);
int tthctl_one_row(const struct tthrt_array *a); /* rank 1, or ones before a last dimension > 1 */
int64_t tthctl_argmax(const struct tthrt_array *a);
/* every --input is NAME=FILE (else a usage error) */
int tthctl_check_inputs(const tthctl_args *a, tthctl_error *err);
json_t *tthctl_shape_json(const struct tthrt_array *a);
json_t *tthctl_value_json(double v); /* a number, or "nan", "inf", "-inf" */

/* ---- output (output.c) ---- */

/* Print err as "tthctl: error: message\n  at: location\n  hint: hint" (each diagnostic of a
 * daemon error in turn; err->location then stands in for a diagnostic without one). */
void tthctl_error_print(FILE *f, const tthctl_error *err);
/* Name what a failed request was about ("target 'x'") when err has no location yet. */
void tthctl_error_context(tthctl_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print the diagnostics of a result (warnings, notes) the same way. */
void tthctl_diagnostics_print(FILE *f, const json_t *diagnostics, const char *context);
/* Print v as indented JSON and a newline on stdout. */
void tthctl_json_print(const json_t *v);
/* "10.0 KiB" */
const char *tthctl_size_str(double bytes, char *buf, size_t len);
/* "a, b, c" from a JSON array of strings (or "-" when empty). */
const char *tthctl_join(const json_t *arr, char *buf, size_t len);

/* Progress display: a bar on a terminal, plain lines otherwise, nothing when quiet. */
typedef struct tthctl_progress {
    int tty, quiet, shown;
    int last_pct;
    char last_stage[64];
} tthctl_progress;
void tthctl_progress_init(tthctl_progress *p, int quiet);
void tthctl_progress_update(tthctl_progress *p, const json_t *params);
void tthctl_progress_done(tthctl_progress *p);

/* Nearest of names to word (edit distance at most max(2, len/3)), or NULL. */
const char *tthctl_nearest(const char *word, const char *const *names, size_t n);

/* The report page of an artifact compiled with --explain, a profile and a compile's timings
 * merged when given (NULL otherwise), written to out (report.c): 0, or a negative code with d. */
int tthctl_report_write(const char *artifact, const json_t *profile, const json_t *timings, const char *out,
                        struct tth_diag *d);

#endif
