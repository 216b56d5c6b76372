/* harness.h: start a real tthd on a temporary socket (with temporary plugins and cache
 * directories) and talk to it with raw frames. Used by every end-to-end test. */
#ifndef TTH_E2E_HARNESS_H
#define TTH_E2E_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <jansson.h>
#include <tthproto/jsonrpc.h>

typedef struct e2e_daemon {
    char root[128];      /* temporary directory holding everything below */
    char sock[192];
    char plugins[192];
    char cache[192];
    char log[192];       /* tthd's stderr */
    pid_t pid;
} e2e_daemon;

typedef struct e2e_client {
    const e2e_daemon *daemon; /* the daemon it talks to (its log is printed when an answer never comes) */
    int fd;
    json_t *init;        /* initialize's response (e2e_client_init), or NULL */
    tthp_fd_reader reader;
    json_t *notes;       /* notifications received while waiting for responses */
    uint8_t *binary;     /* bytes of binary frames received */
    size_t binary_len, binary_cap;
    size_t binary_frames;
} e2e_client;

/* Path of a built file under the build root ("daemon/tthd"). */
const char *e2e_build_path(const char *rel, char *buf, size_t len);

/* Copy the test plugin `name` (tests/fixtures/<name>.so) into dir as <as> (NULL: same name). */
void e2e_put_plugin(const char *dir, const char *name, const char *as);

/* Fill the paths and create the temporary directories (no daemon yet). */
void e2e_prepare(e2e_daemon *d);
/* Copy the plugins, start tthd, wait for its socket (after e2e_prepare). */
void e2e_launch(e2e_daemon *d, const char *const *plugins, const char *const *args);
/* e2e_prepare + e2e_launch: create the directories, copy the plugins (NULL-terminated names of tests/fixtures/NAME.so, may be
 * NULL), start tthd with the extra arguments (NULL-terminated, may be NULL), wait for its socket. */
void e2e_start(e2e_daemon *d, const char *const *plugins, const char *const *args);
/* Like e2e_start, without waiting for the socket nor asserting. */
pid_t e2e_spawn(e2e_daemon *d, const char *const *args);
/* Send shutdown on a fresh connection, wait for exit, assert status 0 (no sanitizer report) and
 * that the socket is gone, remove the temporary directory. */
void e2e_stop(e2e_daemon *d);
/* e2e_stop without removing the directories: the next e2e_launch finds the cache as it was. */
void e2e_shutdown(e2e_daemon *d);
/* Wait up to timeout_ms for pid; returns 1 and *status when it exited, 0 on timeout. */
int e2e_wait_exit(pid_t pid, int timeout_ms, int *status);
/* Assert d's tthd exits within timeout_ms (`what`: what should end it), with status 0 (no sanitizer
 * report; its log is printed otherwise) and its socket removed; d->pid is 0 after. */
void e2e_wait_clean_exit(e2e_daemon *d, int timeout_ms, const char *what);
/* Spawn tthd on d's directories with args; assert it refuses to start: it exits within 15 s with
 * status `status` (-1: any but 0) and, unless says is NULL, its log says so. */
void e2e_expect_refusal(e2e_daemon *d, const char *const *args, int status, const char *says);
/* How many lines of tthd's log hold needle (0 when there is no log). */
int e2e_log_count(const e2e_daemon *d, const char *needle);
/* Remove the temporary directory (after the daemon is gone). */
void e2e_cleanup(e2e_daemon *d);
/* Print tthd's log to stderr (for failures). */
void e2e_dump_log(const e2e_daemon *d);

/* The tth-worker processes whose parent is d's tthd, at most max of them into pids; their number. */
int e2e_worker_pids(const e2e_daemon *d, pid_t *pids, int max);
/* 1 while pid runs (a zombie, dead but not yet reaped by whoever adopted it, does not). */
int e2e_pid_running(pid_t pid);

/* Connect a raw socket (asserts). */
int e2e_connect_fd(const char *sock);
e2e_client *e2e_client_new(const e2e_daemon *d);
void e2e_client_free(e2e_client *c);
/* initialize, asserting success (the response is kept in c->init). */
void e2e_client_init(e2e_client *c);
/* e2e_client_new + e2e_client_init. */
e2e_client *e2e_connect(const e2e_daemon *d);

void e2e_send(e2e_client *c, json_t *msg_new);
void e2e_send_raw(e2e_client *c, const void *data, size_t len);
/* Next JSON message (new reference); binary frames are accumulated in c->binary; NULL on EOF,
 * error or timeout. */
json_t *e2e_recv(e2e_client *c, int timeout_ms);
/* Next response (notifications go to c->notes); NULL on EOF, error or timeout. */
json_t *e2e_recv_response(e2e_client *c, int timeout_ms);
/* Send a request and return its response (notifications go to c->notes). */
json_t *e2e_call(e2e_client *c, json_int_t id, const char *method, json_t *params_new);
/* Upload bytes for request id as $/chunk + binary pairs of at most chunk bytes. */
void e2e_upload(e2e_client *c, json_int_t id, const void *data, size_t len, size_t chunk);
/* A compile of the model file `path` (named "digits", model.size len) for target, with "delivery":
 * delivery unless NULL; the response (artifact bytes streamed into c->binary, reset first). */
json_t *e2e_compile_path(e2e_client *c, json_int_t id, const char *path, size_t len, const char *target,
                         const char *delivery);

/* Assert that tthd's own process has no file of its plugins directory mapped: plugin code runs
 * only in workers. */
void e2e_assert_no_plugin_mapped(const e2e_daemon *d);

/* The response's error code, or 0 for a result. */
int e2e_error_code(const json_t *resp);
/* resp.result.<a>.<b> as an integer (b may be NULL). */
json_int_t e2e_result_int(const json_t *resp, const char *a, const char *b);
/* A status request's result.<a>.<b> (b may be NULL), asserting the request succeeded. */
json_int_t e2e_status_int(e2e_client *c, const char *a, const char *b);

/* Copy every real plugin (the .so files of build/plugins) into the daemon's plugins directory. */
void e2e_put_real_plugins(const e2e_daemon *d);
/* examples/digits.onnx, malloc'd. */
uint8_t *e2e_read_digits(size_t *len);
/* A compile of the model (named "digits") with its upload; the response (notifications in
 * c->notes, artifact bytes in c->binary, both reset first). */
json_t *e2e_compile(e2e_client *c, json_int_t id, const uint8_t *model, size_t len, const char *target,
                    json_t *options_new);
/* The error's message, or NULL. */
const char *e2e_err_message(const json_t *r);
/* 1 when the answer says this build has no compile flow. */
int e2e_no_compile_flow(const json_t *r);
/* resp.result.<a>[.<b>] as a string, or NULL. */
const char *e2e_result_str(const json_t *r, const char *a, const char *b);
/* Assert the response carries the artifact streamed before it (size, chunks, XXH64, progress). */
void e2e_check_artifact(e2e_client *c, const json_t *r);

/* ---- fixtures: what a test needs, set up by one call and torn down by one ----
 * A test's body opens its fixture first and closes it last. The close stays in the body (not in
 * Criterion's .fini) because it asserts tthd's clean exit, and an assertion in .fini does not fail
 * the test. */

typedef struct e2e_fixture {
    e2e_daemon d;         /* tthd, on the fixture's temporary directory */
    e2e_client *c;        /* a client connected to it and initialized */
    uint8_t *model;       /* the digits model's bytes (examples/digits.onnx), the test's to change */
    size_t len;
    char model_path[512]; /* that file */
} e2e_fixture;

/* tthd with the product's plugins, the test plugins `extra` (NULL-terminated names of
 * tests/fixtures/NAME.so, may be NULL) and args (NULL-terminated, may be NULL); a client; the model. */
void e2e_open(e2e_fixture *f, const char *const *extra, const char *const *args);
/* The same with only the test plugins `plugins` (none when NULL). */
void e2e_open_with(e2e_fixture *f, const char *const *plugins, const char *const *args);
/* Launch tthd on f's directories (made by e2e_prepare, or kept by e2e_down) with the test plugins
 * and args, connect and initialize f->c, read the model if it is not read yet. */
void e2e_up(e2e_fixture *f, const char *const *plugins, const char *const *args);
/* Free f->c and shut tthd down asserting a clean exit; the directories stay for the next e2e_up. */
void e2e_down(e2e_fixture *f);
/* Free the client and the model, stop tthd asserting a clean exit (unless it has exited), remove
 * the directory. A fixture never opened is left alone. */
void e2e_close(e2e_fixture *f);
/* When r says this build has no compile flow: free r, close f and skip the test. */
void e2e_skip_without_flow(e2e_fixture *f, json_t *r);
/* e2e_compile of f's model on f->c for target; skips the test (e2e_skip_without_flow) when the
 * build has no compile flow; the response, not checked. */
json_t *e2e_compile_or_skip(e2e_fixture *f, json_int_t id, const char *target, json_t *options_new);
/* e2e_compile of f's model on f->c for target, asserting the artifact (e2e_check_artifact) and,
 * unless cache is NULL, the answer's cache state ("hit", "miss"); the response. */
json_t *e2e_compile_expect(e2e_fixture *f, json_int_t id, const char *target, json_t *options_new,
                           const char *cache);

#endif
