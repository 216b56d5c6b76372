/* libFuzzer target: JSON-RPC dispatch, at two levels.
 *
 * 1. The protocol library every frame body goes through in tthd and tthctl
 *    (protocol/src/jsonrpc.c, methods.c): validation and classification of a message, method
 *    lookup in the method table, the parameter check of that method, the version and
 *    model-name checks, and the answer built from it. Invariants checked:
 *      - a message is either valid (request, notification or response) or gets a JSON-RPC error
 *        code of the protocol's table, with a NUL-terminated message;
 *      - a valid request's id is an integer or a string;
 *      - the answer (result or error for that id) serialises and parses back as a valid response
 *        with the same id.
 * 2. The daemon's own dispatch (daemon/server/*.c, linked in): a real tthd server runs in this
 *    process on a temporary socket (with no worker processes, so jobs stay queued); each input
 *    is sent on a fresh connection as `initialize` followed by the input as a frame body, then
 *    the input again as raw bytes (framing included); every answer must be a well-formed frame
 *    of a valid JSON-RPC message, and the connection must end. A `shutdown` in the input stops
 *    the server, which must close every handle (its loop closes cleanly); a new one starts. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <tthproto/jsonrpc.h>

#include "tthd.h"

static void check_answer(const json_t *answer, const json_t *id)
{
    size_t len;
    char *text = tthp_message_dump(answer, &len);
    if (!text)
        abort();
    tthp_message m;
    if (tthp_message_parse(text, len, &m) != 0 || m.kind != TTHP_MSG_RESPONSE)
        abort();
    if (id && !json_equal(m.id, id))
        abort();
    tthp_message_clear(&m);
    free(text);
}

/* ---- level 2: the daemon ---------------------------------------------------------------- */

static uv_loop_t loop;
static tthd_server *srv;
static char root[64] = "/tmp/tth-fuzz-XXXXXX";

static void server_start(void)
{
    static int made;
    if (!made) {
        if (!mkdtemp(root))
            abort();
        char dir[128];
        snprintf(dir, sizeof dir, "%s/plugins", root);
        mkdir(dir, 0755);
        made = 1;
        tthd_log_level = -1; /* quiet */
    }
    if (uv_loop_init(&loop) != 0)
        abort();
    srv = calloc(1, sizeof *srv);
    tthd_options *o = &srv->opt;
    char buf[160];
    snprintf(buf, sizeof buf, "%s/tthd.sock", root);
    o->socket_path = strdup(buf);
    snprintf(buf, sizeof buf, "%s/plugins", root);
    o->plugins_dir = strdup(buf);
    snprintf(buf, sizeof buf, "%s/cache", root);
    o->cache_dir = strdup(buf);
    o->worker_path = strdup("/nonexistent/tth-worker");
    o->workers = 0; /* no worker processes: jobs stay queued until their connection ends */
    o->request_timeout = 600;
    o->shutdown_grace = 0.05;
    o->cache_max_bytes = 1 << 20;
    o->max_frame = 4096;
    o->max_request = 8192;
    o->max_concurrent = 4;
    o->max_connections = 8;
    if (tthd_server_start(srv, &loop) != 0)
        abort();
}

static void server_free(void)
{
    uv_run(&loop, UV_RUN_DEFAULT);
    if (uv_loop_close(&loop) != 0)
        abort(); /* a handle was left open */
    tthd_server_free(srv);
    free(srv->opt.socket_path);
    free(srv->opt.plugins_dir);
    free(srv->opt.cache_dir);
    free(srv->opt.worker_path);
    free(srv);
    srv = NULL;
}

/* Check that everything the server sent is a sequence of valid frames of valid messages. */
static void check_output(const uint8_t *out, size_t len)
{
    tthp_parser p;
    tthp_parser_init(&p, 64u << 20);
    size_t off = 0;
    while (off < len) {
        tthp_frame f;
        ssize_t n = tthp_parser_feed(&p, out + off, len - off, &f);
        if (n < 0)
            abort(); /* the daemon wrote a bad frame */
        off += (size_t)n;
        if (f.type == TTHP_FRAME_JSON) {
            tthp_message m;
            if (tthp_message_parse(f.data, f.len, &m) != 0)
                abort();
            if (m.kind == TTHP_MSG_REQUEST)
                abort(); /* the daemon never asks the client anything */
            if (m.kind == TTHP_MSG_RESPONSE && m.error) {
                int code = (int)json_integer_value(json_object_get(m.error, "code"));
                if (strcmp(tthp_error_name(code), "unknown") == 0)
                    abort(); /* every error code is in the protocol's table */
            }
            tthp_message_clear(&m);
        } else if (f.type != TTHP_FRAME_NONE && f.type != TTHP_FRAME_BINARY) {
            abort();
        }
    }
    tthp_parser_free(&p);
}

/* One connection: send bytes, end our side, collect the answers until the server closes. */
static void talk(const uint8_t *data, size_t size)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", srv->opt.socket_path);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        abort();
    uint8_t *out = NULL;
    size_t out_len = 0, out_cap = 0, sent = 0;
    int shut = 0;
    for (int spins = 0; spins < 100000; spins++) {
        uv_run(&loop, UV_RUN_NOWAIT);
        if (sent < size) {
            ssize_t n = write(fd, data + sent, size - sent);
            if (n > 0)
                sent += (size_t)n;
            else if (n < 0 && errno != EAGAIN)
                sent = size; /* the server closed on us (bad frame): fine */
        } else if (!shut) {
            shutdown(fd, SHUT_WR);
            shut = 1;
        }
        uint8_t buf[65536];
        ssize_t n = read(fd, buf, sizeof buf);
        if (n == 0 || (n < 0 && errno != EAGAIN))
            break;
        if (n > 0) {
            if (out_len + (size_t)n > out_cap) {
                out_cap = (out_len + (size_t)n) * 2;
                out = realloc(out, out_cap);
            }
            memcpy(out + out_len, buf, (size_t)n);
            out_len += (size_t)n;
        } else {
            struct pollfd pfd = {.fd = fd, .events = POLLIN};
            uv_run(&loop, UV_RUN_NOWAIT);
            poll(&pfd, 1, 1);
        }
    }
    close(fd);
    check_output(out, out_len);
    free(out);
    /* let the server see the close */
    for (int i = 0; i < 10; i++)
        uv_run(&loop, UV_RUN_NOWAIT);
}

static void run_daemon(const uint8_t *data, size_t size)
{
    if (!srv)
        server_start();
    /* initialize, then the input as a message body */
    static const char init[] = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\","
                               "\"params\":{\"protocolVersion\":\"1.0\"}}";
    char hdr[64];
    size_t total = 2 * 64 + sizeof init + size;
    uint8_t *msg = malloc(total);
    size_t n = 0;
    n += (size_t)snprintf((char *)msg + n, total - n, "Content-Length: %zu\r\n\r\n%s", sizeof init - 1, init);
    int hl = snprintf(hdr, sizeof hdr, "Content-Length: %zu\r\n\r\n", size);
    memcpy(msg + n, hdr, (size_t)hl);
    n += (size_t)hl;
    memcpy(msg + n, data, size);
    n += size;
    talk(msg, n);
    free(msg);
    /* the input as raw bytes: framing and all */
    if (srv && !srv->stopping)
        talk(data, size);
    if (srv && srv->stopping)
        server_free();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    run_daemon(data, size);
    tthp_message m;
    int code = tthp_message_parse(data, size, &m);
    if (code != 0) {
        if (m.kind != TTHP_MSG_INVALID || code != m.error_code || strcmp(tthp_error_name(code), "unknown") == 0)
            abort();
        if (memchr(m.error_message, 0, sizeof m.error_message) == NULL)
            abort();
        json_t *err = tthp_error_new(m.id, code, m.error_message, NULL);
        check_answer(err, m.id);
        json_decref(err);
        tthp_message_clear(&m);
        return 0;
    }
    if (m.kind == TTHP_MSG_REQUEST && !(json_is_integer(m.id) || json_is_string(m.id)))
        abort();
    if ((m.kind == TTHP_MSG_REQUEST || m.kind == TTHP_MSG_NOTIFICATION) && (!m.method || (m.params && !json_is_object(m.params))))
        abort();
    if (m.kind == TTHP_MSG_REQUEST) {
        const tthp_method *method = tthp_method_find(m.method);
        json_t *answer;
        char msg[256];
        if (!method) {
            answer = tthp_error_new(m.id, TTHP_METHOD_NOT_FOUND, "no such method", NULL);
        } else if (tthp_params_check(method, m.params, msg, sizeof msg) != 0) {
            if (!memchr(msg, 0, sizeof msg))
                abort();
            answer = tthp_error_new(m.id, TTHP_INVALID_PARAMS, msg, NULL);
        } else {
            /* the checks initialize and compile make after the spec */
            int major, minor;
            const char *ver = json_string_value(json_object_get(m.params, "protocolVersion"));
            if (method->id == TTHP_M_INITIALIZE && !ver)
                abort(); /* the spec requires it */
            if (ver && tthp_version_parse(ver, &major, &minor) == 0 && (major < 0 || minor < 0))
                abort();
            const char *name = json_string_value(json_object_get(json_object_get(m.params, "model"), "name"));
            if (name && tthp_model_name_valid(name) && strlen(name) > TTHP_MAX_MODEL_NAME)
                abort();
            answer = tthp_result_new(m.id, json_pack("{s:s}", "method", method->name));
        }
        check_answer(answer, m.id);
        json_decref(answer);
    }
    tthp_message_clear(&m);
    return 0;
}
