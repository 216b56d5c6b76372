/* server.c: the listening socket, connections, framing and the request lifecycle.
 *
 * A connection reads frames with the tthproto parser; JSON frames become requests (dispatched
 * by methods.c) or notifications ($/cancelRequest, $/chunk); binary frames are the upload
 * announced by the preceding $/chunk. Every breach of a limit is answered with a JSON-RPC
 * error; only a header that cannot be resynchronised closes the connection. */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "tthd.h"

static void conn_close(tthd_conn *conn);
static void server_maybe_done(tthd_server *srv);

/* ---- requests -------------------------------------------------------------------------- */

static void request_free(tthd_request *req)
{
    tthd_conn *conn = req->conn;
    /* work still under way for the request drops its answer (none of these calls back) */
    if (req->job)
        tthd_pool_cancel(&conn->srv->pool, req->job);
    tthd_remote_cancel(req->remote);
    tthd_ext_check_cancel(req->ext_check);
    tthd_digest_work_cancel(req->digest_work);
    if (conn) {
        for (tthd_request **pp = &conn->reqs; *pp; pp = &(*pp)->next)
            if (*pp == req) {
                *pp = req->next;
                conn->n_reqs--;
                break;
            }
        if (conn->expect_req == req)
            conn->expect_req = NULL;
    }
    json_decref(req->id);
    json_decref(req->params);
    json_decref(req->target);
    json_decref(req->parse_diagnostics);
    free(req->target_text);
    free(req->target_string);
    tthd_outstream_free(req->out);
    if (req->upload_fd >= 0)
        close(req->upload_fd);
    XXH3_freeState(req->upload_hash);
    free(req->model_dir);
    free(req->model_path);
    tthd_method_remove_ext_dir(req);
    free(req);
}

static void request_done(tthd_request *req, int ok)
{
    tthd_server *srv = req->conn->srv;
    if (ok)
        srv->served++;
    else
        srv->failed++;
    request_free(req);
    server_maybe_done(srv);
}

void tthd_progress(tthd_request *req, const char *kind, const char *stage, int percent)
{
    if (strcmp(kind, "begin") == 0)
        req->progress_begun = 1;
    else if (!req->progress_begun)
        return;
    tthd_send(req->conn, tthp_notification_new("$/progress", json_pack("{s:O, s:s, s:s, s:i}", "id", req->id, "kind",
                                                                        kind, "stage", stage, "percentage",
                                                                        percent)));
}

void tthd_respond(tthd_request *req, json_t *result_new)
{
    if (req->progress_begun)
        tthd_progress(req, "end", "done", 100);
    tthd_send(req->conn, tthp_answer_or_internal(tthp_result_new(req->id, result_new), req->id));
    request_done(req, 1);
}

void tthd_respond_error(tthd_request *req, int code, const char *message, json_t *data_new)
{
    if (req->progress_begun)
        tthd_progress(req, "end", "failed", 100);
    tthd_send(req->conn, tthp_answer_or_internal(tthp_error_new(req->id, code, message, data_new), req->id));
    request_done(req, 0);
}

void tthd_respond_error_obj(tthd_request *req, const json_t *error)
{
    json_t *data = json_object_get(error, "data");
    tthd_respond_error(req, (int)json_integer_value(json_object_get(error, "code")),
                       json_string_value(json_object_get(error, "message")), data ? json_incref(data) : NULL);
}

/* ---- writing --------------------------------------------------------------------------- */

static void on_conn_written(void *data, int status)
{
    tthd_conn *conn = data;
    conn->writes--;
    if (status < 0 && status != UV_ECANCELED)
        tthd_log(TTHD_LOG_DEBUG, "write to client failed: %s", uv_strerror(status));
    /* artifacts going out at the client's pace: more of them (an answer may free its request) */
    for (tthd_request *r = conn->closing ? NULL : conn->reqs, *next; r; r = next) {
        next = r->next;
        if (r->out)
            tthd_method_pump(r);
    }
    if (conn->writes == 0 && conn->close_when_flushed)
        conn_close(conn);
}

/* Writes beyond this much queued data mean the client does not read: drop it. */
#define TTHD_MAX_WRITE_QUEUE (512u * 1024 * 1024)

static void on_reap(uv_timer_t *t)
{
    tthd_server *srv = t->data;
    for (tthd_conn *c = srv->conns, *next; c; c = next) {
        next = c->next;
        if (c->doomed)
            conn_close(c);
    }
}

/* Closing here could free the request being answered: a connection that does not read is
 * only marked, and closed by the reaper on the next loop iteration. */
static int conn_writable(tthd_conn *conn)
{
    if (conn->closing || conn->doomed)
        return 0;
    if (uv_stream_get_write_queue_size((uv_stream_t *)&conn->pipe) > TTHD_MAX_WRITE_QUEUE) {
        tthd_log(TTHD_LOG_WARN, "client pid %d does not read its answers; disconnecting it", (int)conn->pid);
        conn->doomed = 1;
        uv_read_stop((uv_stream_t *)&conn->pipe);
        if (!uv_is_closing((uv_handle_t *)&conn->srv->reap_timer))
            uv_timer_start(&conn->srv->reap_timer, on_reap, 0, 0);
        return 0;
    }
    return 1;
}

void tthd_send(tthd_conn *conn, json_t *msg_new)
{
    if (msg_new && conn_writable(conn) &&
        tthd_write_msg((uv_stream_t *)&conn->pipe, msg_new, on_conn_written, conn) == 0)
        conn->writes++;
    json_decref(msg_new);
}

void tthd_send_binary(tthd_conn *conn, const uint8_t *data, size_t len)
{
    if (conn_writable(conn) &&
        tthd_write_frame((uv_stream_t *)&conn->pipe, data, len, 1, on_conn_written, conn) == 0)
        conn->writes++;
}

/* An error that belongs to no request (id null or the offending id). */
static void send_error(tthd_conn *conn, const json_t *id, int code, const char *message)
{
    tthd_send(conn, tthp_answer_or_internal(tthp_error_new(id, code, message, NULL), id));
}

/* ---- connections ----------------------------------------------------------------------- */

static void on_conn_closed(uv_handle_t *h)
{
    tthd_conn *conn = h->data;
    tthd_server *srv = conn->srv;
    tthp_parser_free(&conn->parser);
    free(conn);
    server_maybe_done(srv);
}

static void conn_close(tthd_conn *conn)
{
    if (conn->closing)
        return;
    conn->closing = 1;
    tthd_server *srv = conn->srv;
    /* a client that goes away cancels its requests */
    while (conn->reqs) {
        tthd_request *req = conn->reqs;
        if (req->job)
            tthd_log(TTHD_LOG_DEBUG, "client gone: cancelling request");
        request_free(req);
    }
    for (tthd_conn **pp = &srv->conns; *pp; pp = &(*pp)->next)
        if (*pp == conn) {
            *pp = conn->next;
            srv->n_conns--;
            break;
        }
    uv_close((uv_handle_t *)&conn->pipe, on_conn_closed);
}

/* Close once everything queued was written. */
static void conn_close_after_flush(tthd_conn *conn)
{
    conn->close_when_flushed = 1;
    uv_read_stop((uv_stream_t *)&conn->pipe);
    if (conn->writes == 0)
        conn_close(conn);
}

/* A connection with no request in flight that sent nothing for opt.conn_idle seconds holds a
 * slot of --max-connections for nothing (a client that hung, or forgot it): closed, logged. */
static void on_conn_idle_sweep(uv_timer_t *t)
{
    tthd_server *srv = t->data;
    uint64_t now = uv_now(srv->loop), limit = (uint64_t)(srv->opt.conn_idle * 1000);
    for (tthd_conn *c = srv->conns, *next; c; c = next) {
        next = c->next;
        if (!c->closing && !c->close_when_flushed && c->n_reqs == 0 && now - c->last_ms >= limit) {
            tthd_log(TTHD_LOG_INFO, "closing the connection of client pid %d: idle for %.0f s "
                     "(--connection-idle-timeout)", (int)c->pid, (double)(now - c->last_ms) / 1000.0);
            conn_close_after_flush(c);
        }
    }
}

static tthd_request *find_request(tthd_conn *conn, const json_t *id)
{
    for (tthd_request *r = conn->reqs; r; r = r->next)
        if (id && json_equal(r->id, id))
            return r;
    return NULL;
}

static void on_cancel(tthd_conn *conn, const json_t *params)
{
    tthd_request *req = find_request(conn, json_object_get(params, "id"));
    if (!req)
        return;
    tthd_log(TTHD_LOG_DEBUG, "request cancelled by the client");
    tthd_respond_error(req, TTHP_REQUEST_CANCELLED, "request cancelled", NULL);
}

static void on_chunk(tthd_conn *conn, const json_t *params)
{
    conn->expect_binary = 1;
    conn->expect_size = (size_t)json_integer_value(json_object_get(params, "size"));
    conn->expect_req = NULL;
    tthd_request *req = find_request(conn, json_object_get(params, "id"));
    if (!req || req->state != TTHD_REQ_UPLOAD)
        return; /* unknown or failed request: the frame is read and discarded */
    char msg[160];
    if (strcmp(json_string_value(json_object_get(params, "stream")), "model") != 0) {
        tthd_respond_error(req, TTHP_INVALID_PARAMS, "an upload's stream must be \"model\"", NULL);
        return;
    }
    if (tthd_method_chunk_ok(req, json_integer_value(json_object_get(params, "offset")),
                             json_integer_value(json_object_get(params, "size")),
                             json_integer_value(json_object_get(params, "total")), msg, sizeof msg) != 0) {
        tthd_respond_error(req, TTHP_INVALID_PARAMS, msg, NULL);
        return;
    }
    conn->expect_req = req;
}

static void on_json_frame(tthd_conn *conn, const tthp_frame *f)
{
    tthd_server *srv = conn->srv;
    tthp_message m;
    int rc = tthp_message_parse(f->data, f->len, &m);
    if (rc != 0) {
        send_error(conn, m.id, rc, m.error_message);
        srv->failed++;
        tthp_message_clear(&m);
        return;
    }
    if (m.kind == TTHP_MSG_RESPONSE) {
        tthp_message_clear(&m);
        return;
    }
    const tthp_method *method = tthp_method_find(m.method);
    if (m.kind == TTHP_MSG_NOTIFICATION) {
        char msg[200];
        if (method && (method->kind == TTHP_NOTIFY_C2S || method->kind == TTHP_NOTIFY_BOTH) &&
            tthp_params_check(method, m.params, msg, sizeof msg) == 0) {
            if (method->id == TTHP_M_CANCEL)
                on_cancel(conn, m.params);
            else if (method->id == TTHP_M_CHUNK)
                on_chunk(conn, m.params);
        } else if (method && method->id == TTHP_M_CHUNK) {
            /* a malformed announcement: its frame cannot be matched; say so */
            send_error(conn, NULL, TTHP_INVALID_PARAMS, msg);
        }
        tthp_message_clear(&m);
        return;
    }
    /* a request */
    char msg[256];
    int code = 0;
    if (!method || method->kind != TTHP_REQUEST) {
        code = TTHP_METHOD_NOT_FOUND;
        snprintf(msg, sizeof msg, "no method '%.100s'", m.method);
    } else if (srv->stopping) {
        code = TTHP_SHUTTING_DOWN;
        snprintf(msg, sizeof msg, "tthd is shutting down");
    } else if (!conn->initialized && method->id != TTHP_M_INITIALIZE) {
        code = TTHP_NOT_INITIALIZED;
        snprintf(msg, sizeof msg, "send 'initialize' before '%s'", method->name);
    } else if (find_request(conn, m.id)) {
        code = TTHP_INVALID_REQUEST;
        snprintf(msg, sizeof msg, "a request with this id is already in flight");
    } else if (conn->n_reqs >= srv->opt.max_concurrent) {
        code = TTHP_TOO_MANY_REQUESTS;
        snprintf(msg, sizeof msg, "more than %u requests in flight on this connection", srv->opt.max_concurrent);
    } else if (f->len > srv->opt.max_request) {
        code = TTHP_REQUEST_TOO_LARGE;
        snprintf(msg, sizeof msg, "request of %zu bytes is larger than the limit (%zu)", f->len, srv->opt.max_request);
    } else {
        code = tthp_params_check(method, m.params, msg, sizeof msg);
    }
    if (code) {
        send_error(conn, m.id, code, msg);
        srv->failed++;
        tthp_message_clear(&m);
        return;
    }
    tthd_request *req = calloc(1, sizeof *req);
    if (!req) {
        send_error(conn, m.id, TTHP_INTERNAL_ERROR, "out of memory");
        srv->failed++;
        tthp_message_clear(&m);
        return;
    }
    req->conn = conn;
    req->remote_s = -1;
    req->upload_fd = -1;
    req->id = json_incref(m.id);
    req->method = method;
    req->params = m.params ? json_incref(m.params) : json_object();
    req->next = conn->reqs;
    conn->reqs = req;
    conn->n_reqs++;
    tthp_message_clear(&m);
    tthd_method_dispatch(srv, req);
}

static void on_binary_frame(tthd_conn *conn, const tthp_frame *f)
{
    if (!conn->expect_binary || conn->expect_size != f->len) {
        conn->expect_binary = 0;
        send_error(conn, NULL, TTHP_UNEXPECTED_BINARY,
                   "binary frame without a matching $/chunk announcement; discarded");
        conn->srv->failed++;
        return;
    }
    conn->expect_binary = 0;
    tthd_request *req = conn->expect_req;
    conn->expect_req = NULL;
    if (req)
        tthd_method_upload(conn->srv, req, f->data, f->len);
}

static void on_oversize_frame(tthd_conn *conn, const tthp_frame *f)
{
    char msg[160];
    snprintf(msg, sizeof msg, "frame of %zu bytes is larger than the limit (%zu); discarded", f->len,
             conn->srv->opt.max_frame);
    tthd_request *req = f->binary && conn->expect_binary ? conn->expect_req : NULL;
    conn->expect_binary = 0;
    conn->expect_req = NULL;
    if (req) {
        tthd_respond_error(req, TTHP_FRAME_TOO_LARGE, msg, NULL);
    } else {
        send_error(conn, NULL, TTHP_FRAME_TOO_LARGE, msg);
        conn->srv->failed++;
    }
}

static void on_conn_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    tthd_conn *conn = s->data;
    if (nread < 0) {
        free(buf->base);
        conn_close(conn);
        return;
    }
    if (nread > 0)
        conn->last_ms = uv_now(conn->srv->loop);
    size_t off = 0;
    while (off < (size_t)nread && !conn->closing && !conn->close_when_flushed) {
        tthp_frame f;
        ssize_t n = tthp_parser_feed(&conn->parser, buf->base + off, (size_t)nread - off, &f);
        if (n < 0) {
            tthd_log(TTHD_LOG_DEBUG, "bad frame from pid %d: %s", (int)conn->pid, conn->parser.errmsg);
            send_error(conn, NULL, TTHP_BAD_FRAME, conn->parser.errmsg);
            conn->srv->failed++;
            conn_close_after_flush(conn);
            break;
        }
        off += (size_t)n;
        if (f.type == TTHP_FRAME_JSON)
            on_json_frame(conn, &f);
        else if (f.type == TTHP_FRAME_BINARY)
            on_binary_frame(conn, &f);
        else if (f.type == TTHP_FRAME_OVERSIZE)
            on_oversize_frame(conn, &f);
    }
    free(buf->base);
}

static void on_connection(uv_stream_t *listener, int status)
{
    tthd_server *srv = listener->data;
    if (status < 0) {
        tthd_log(TTHD_LOG_WARN, "accept failed: %s", uv_strerror(status));
        return;
    }
    tthd_conn *conn = calloc(1, sizeof *conn);
    if (!conn)
        return;
    conn->srv = srv;
    uv_pipe_init(srv->loop, &conn->pipe, 0);
    conn->pipe.data = conn;
    tthp_parser_init(&conn->parser, srv->opt.max_frame);
    conn->next = srv->conns;
    srv->conns = conn;
    srv->n_conns++;
    if (uv_accept(listener, (uv_stream_t *)&conn->pipe) != 0) {
        conn_close(conn);
        return;
    }
    uv_timer_stop(&srv->idle_timer);
    uv_os_fd_t fd;
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (uv_fileno((uv_handle_t *)&conn->pipe, &fd) != 0 ||
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        tthd_log(TTHD_LOG_WARN, "cannot read the peer's credentials: %s", strerror(errno));
        send_error(conn, NULL, TTHP_PEER_REFUSED, "cannot verify who you are");
        conn_close_after_flush(conn);
        return;
    }
    conn->uid = cred.uid;
    conn->pid = cred.pid;
    if (cred.uid != geteuid() && cred.uid != 0) {
        tthd_log(TTHD_LOG_WARN, "refused a connection from uid %u (pid %d): tthd serves uid %u only",
                 (unsigned)cred.uid, (int)cred.pid, (unsigned)geteuid());
        char msg[160];
        snprintf(msg, sizeof msg, "this tthd serves uid %u only; you are uid %u", (unsigned)geteuid(),
                 (unsigned)cred.uid);
        send_error(conn, NULL, TTHP_PEER_REFUSED, msg);
        srv->failed++;
        conn_close_after_flush(conn);
        return;
    }
    if (srv->n_conns > srv->opt.max_connections) {
        tthd_log(TTHD_LOG_WARN, "refused a connection: %u are open (--max-connections)", srv->opt.max_connections);
        char msg[160];
        snprintf(msg, sizeof msg, "tthd is busy: %u connections are open, its limit (--max-connections); try again later",
                 srv->opt.max_connections);
        send_error(conn, NULL, TTHP_TOO_MANY_REQUESTS, msg);
        srv->failed++;
        conn_close_after_flush(conn);
        return;
    }
    tthd_log(TTHD_LOG_DEBUG, "client pid %d connected", (int)cred.pid);
    conn->last_ms = uv_now(srv->loop);
    uv_read_start((uv_stream_t *)&conn->pipe, tthd_read_alloc, on_conn_read);
}

/* ---- the socket ------------------------------------------------------------------------ */

/* Is a daemon answering on path? 1 yes, 0 no (stale or absent), -1 path is not a socket. */
static int socket_alive(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return 0;
    if (!S_ISSOCK(st.st_mode))
        return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    int rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
    close(fd);
    return rc == 0 ? 1 : 0;
}

json_t *tthd_plugins_path_json(const char *path)
{
    json_t *a = json_array();
    char *copy = strdup(path ? path : ""), *save = NULL;
    if (!a || !copy) {
        free(copy);
        return a;
    }
    for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save))
        json_array_append_new(a, json_string(d));
    free(copy);
    return a;
}

/* Create the socket's directory (0700) if missing. The default directory must be ours and
 * private: one made by another user could be used to impersonate the daemon. A given one must at
 * least be out of other users' reach (docs/security.md). */
static int socket_dir_prepare(const char *path, int is_default)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return 0;
    *slash = '\0';
    struct stat st;
    if (stat(dir, &st) != 0) {
        if (mkdir(dir, 0700) != 0) {
            tthd_log(TTHD_LOG_ERROR, "cannot create the socket directory %s: %s", dir, strerror(errno));
            return -1;
        }
        return 0;
    }
    if (!S_ISDIR(st.st_mode)) {
        tthd_log(TTHD_LOG_ERROR, "%s is not a directory", dir);
        return -1;
    }
    if (!is_default) {
        /* a directory given on the command line (tthctl's auto-start gives one too) is not made
         * private, but it must be one no other user can change: owned by us or root, and not
         * writable by group or others unless sticky (as /tmp is); the same for the directory a
         * symlink leads to, and for a symlink itself */
        char real[PATH_MAX];
        struct stat lst;
        const char *bad = NULL;
        unsigned owner = 0;
        if (lstat(dir, &lst) == 0 && S_ISLNK(lst.st_mode) && lst.st_uid != geteuid() && lst.st_uid != 0)
            bad = "is a symlink owned by", owner = (unsigned)lst.st_uid;
        else if (st.st_uid != geteuid() && st.st_uid != 0)
            bad = "belongs to", owner = (unsigned)st.st_uid;
        else if ((st.st_mode & 0022) && !(st.st_mode & S_ISVTX))
            bad = "is writable by group or others";
        if (bad && owner)
            tthd_log(TTHD_LOG_ERROR, "the socket directory %s %s uid %u, not you (uid %u) or root: another user "
                     "could answer in tthd's place; give a socket in a directory of your own", dir, bad, owner,
                     (unsigned)geteuid());
        else if (bad)
            tthd_log(TTHD_LOG_ERROR, "the socket directory %s (%s) %s without the sticky bit: another user could "
                     "replace the socket; give a socket in a directory of your own (chmod go-w)", dir,
                     realpath(dir, real) ? real : dir, bad);
        return bad ? -1 : 0;
    }
    if (st.st_uid != geteuid()) {
        tthd_log(TTHD_LOG_ERROR, "the socket directory %s belongs to uid %u, not to you (uid %u); not using it",
                 dir, (unsigned)st.st_uid, (unsigned)geteuid());
        return -1;
    }
    if ((st.st_mode & 0077) && chmod(dir, 0700) != 0) {
        tthd_log(TTHD_LOG_ERROR, "cannot make %s private: %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}

static int listen_socket(tthd_server *srv)
{
    const char *path = srv->opt.socket_path;
    uv_pipe_init(srv->loop, &srv->listener, 0);
    srv->listener.data = srv;
    srv->listening = 1;
    const char *lpid = getenv("LISTEN_PID"), *lfds = getenv("LISTEN_FDS");
    if (lpid && lfds && atoi(lpid) == (int)getpid() && atoi(lfds) >= 1) {
        /* systemd socket activation: our socket is fd 3 */
        unsetenv("LISTEN_PID");
        unsetenv("LISTEN_FDS");
        unsetenv("LISTEN_FDNAMES");
        fcntl(3, F_SETFD, FD_CLOEXEC);
        int rc = uv_pipe_open(&srv->listener, 3);
        if (rc == 0)
            rc = uv_listen((uv_stream_t *)&srv->listener, 128, on_connection);
        if (rc != 0) {
            tthd_log(TTHD_LOG_ERROR, "cannot use the socket systemd passed (fd 3): %s", uv_strerror(rc));
            return -1;
        }
        srv->systemd = 1;
        tthd_log(TTHD_LOG_INFO, "listening on the socket systemd passed");
        return 0;
    }
    if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
        tthd_log(TTHD_LOG_ERROR, "socket path %s is too long", path);
        return -1;
    }
    if (socket_dir_prepare(path, srv->opt.socket_default) != 0)
        return -1;
    int alive = socket_alive(path);
    if (alive > 0) {
        tthd_log(TTHD_LOG_ERROR, "another tthd is already running on %s; not starting", path);
        return -1;
    }
    if (alive < 0) {
        tthd_log(TTHD_LOG_ERROR, "%s exists and is not a socket; not touching it", path);
        return -1;
    }
    if (unlink(path) == 0)
        tthd_log(TTHD_LOG_INFO, "removed the stale socket %s", path);
    mode_t old = umask(0177);
    int rc = uv_pipe_bind(&srv->listener, path);
    umask(old);
    if (rc == 0)
        chmod(path, 0600);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&srv->listener, 128, on_connection);
    if (rc != 0) {
        tthd_log(TTHD_LOG_ERROR, "cannot listen on %s: %s", path, uv_strerror(rc));
        return -1;
    }
    tthd_log(TTHD_LOG_INFO, "listening on %s", path);
    return 0;
}

/* ---- life ------------------------------------------------------------------------------ */

static void on_signal(uv_signal_t *h, int signum)
{
    tthd_server *srv = h->data;
    tthd_server_stop(srv, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

static void on_idle(uv_timer_t *t)
{
    tthd_server *srv = t->data;
    if (srv->n_conns == 0)
        tthd_server_stop(srv, "idle");
}

static void on_rescan(uv_timer_t *t)
{
    tthd_server *srv = t->data;
    tthd_pool_reload(&srv->pool);
}

static void on_plugins_changed(uv_fs_event_t *h, const char *filename, int events, int status)
{
    tthd_server *srv = h->data;
    (void)events;
    if (status < 0 || srv->stopping)
        return;
    if (filename) {
        size_t n = strlen(filename);
        if (filename[0] == '.' || n < 3 || strcmp(filename + n - 3, ".so") != 0)
            return;
        tthd_log(TTHD_LOG_DEBUG, "plugins directory: %s changed", filename);
    }
    uv_timer_start(&srv->rescan_timer, on_rescan, 150, 0); /* let a burst of events settle */
}

static void close_if_open(uv_handle_t *h)
{
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

/* The server's timers and signal handles, closed */
static void close_timers(tthd_server *srv)
{
    close_if_open((uv_handle_t *)&srv->stop_timer);
    close_if_open((uv_handle_t *)&srv->idle_timer);
    close_if_open((uv_handle_t *)&srv->rescan_timer);
    close_if_open((uv_handle_t *)&srv->reap_timer);
    close_if_open((uv_handle_t *)&srv->conn_idle_timer);
    close_if_open((uv_handle_t *)&srv->sigterm);
    close_if_open((uv_handle_t *)&srv->sigint);
    tthd_recent_close(&srv->recent);
}

/* Everything ends: called once no request is left (or the grace period ran out). */
static void server_finish(tthd_server *srv)
{
    if (srv->stopping == 2)
        return;
    srv->stopping = 2;
    tthd_log(TTHD_LOG_DEBUG, "closing");
    for (tthd_conn *c = srv->conns, *next; c; c = next) {
        next = c->next;
        conn_close_after_flush(c);
    }
    tthd_pool_close(&srv->pool);
    close_timers(srv);
    for (int i = 0; i < srv->watching; i++)
        close_if_open((uv_handle_t *)&srv->watch[i]);
}

static size_t active_requests(const tthd_server *srv)
{
    size_t n = 0;
    for (const tthd_conn *c = srv->conns; c; c = c->next)
        n += c->n_reqs;
    return n;
}

static void server_maybe_done(tthd_server *srv)
{
    if (srv->stopping == 1 && active_requests(srv) == 0)
        server_finish(srv);
    else if (!srv->stopping && srv->n_conns == 0 && srv->opt.idle_exit > 0)
        uv_timer_start(&srv->idle_timer, on_idle, (uint64_t)(srv->opt.idle_exit * 1000), 0);
}

static void on_stop_grace(uv_timer_t *t)
{
    tthd_server *srv = t->data;
    tthd_log(TTHD_LOG_WARN, "in-flight requests did not finish in %g s; cancelling them", srv->opt.shutdown_grace);
    for (tthd_conn *c = srv->conns; c; c = c->next)
        while (c->reqs)
            tthd_respond_error(c->reqs, TTHP_SHUTTING_DOWN, "tthd is shutting down", NULL);
    server_finish(srv);
}

void tthd_server_stop(tthd_server *srv, const char *why)
{
    if (srv->stopping)
        return;
    srv->stopping = 1;
    tthd_log(TTHD_LOG_INFO, "stopping (%s)", why);
    if (srv->listening) {
        uv_close((uv_handle_t *)&srv->listener, NULL);
        if (!srv->systemd && unlink(srv->opt.socket_path) != 0 && errno != ENOENT)
            tthd_log(TTHD_LOG_WARN, "cannot remove %s: %s", srv->opt.socket_path, strerror(errno));
    }
    uv_timer_stop(&srv->idle_timer);
    /* requests still uploading will not get their bytes: fail them now */
    for (tthd_conn *c = srv->conns; c; c = c->next)
        for (tthd_request *r = c->reqs, *next; r; r = next) {
            next = r->next;
            if (r->state == TTHD_REQ_UPLOAD)
                tthd_respond_error(r, TTHP_SHUTTING_DOWN, "tthd is shutting down", NULL);
        }
    if (active_requests(srv) == 0)
        server_finish(srv);
    else
        uv_timer_start(&srv->stop_timer, on_stop_grace, (uint64_t)(srv->opt.shutdown_grace * 1000), 0);
}

int tthd_server_start(tthd_server *srv, uv_loop_t *loop)
{
    srv->loop = loop;
    srv->start_ms = uv_hrtime() / 1000000;
    uv_timer_init(loop, &srv->idle_timer);
    uv_timer_init(loop, &srv->stop_timer);
    uv_timer_init(loop, &srv->rescan_timer);
    uv_timer_init(loop, &srv->reap_timer);
    uv_timer_init(loop, &srv->conn_idle_timer);
    srv->conn_idle_timer.data = srv;
    uv_signal_init(loop, &srv->sigterm);
    uv_signal_init(loop, &srv->sigint);
    srv->idle_timer.data = srv->stop_timer.data = srv->rescan_timer.data = srv->reap_timer.data = srv;
    srv->sigterm.data = srv->sigint.data = srv;
    tthd_cache_init(&srv->cache, loop, srv->opt.cache_dir, srv->opt.cache_max_bytes);
    tthd_remote_init(&srv->remote, loop, &srv->opt.remote);
    tthd_recent_init(&srv->recent, loop, srv->opt.cache_dir);
    srv->remote.room = &srv->cache; /* a remote hit's local copy makes room there first */
    if (listen_socket(srv) != 0) {
        srv->exit_code = 1;
        srv->stopping = 1;
        if (srv->listening) {
            uv_close((uv_handle_t *)&srv->listener, NULL);
            srv->listening = 0;
        }
        close_timers(srv);
        srv->stopping = 2;
        return -1;
    }
    uv_signal_start(&srv->sigterm, on_signal, SIGTERM);
    uv_signal_start(&srv->sigint, on_signal, SIGINT);
    tthd_pool_init(&srv->pool, loop, &srv->opt);
    srv->pool.data = srv;
    /* every directory of the plugins path is watched: a plugin dropped into any of them loads */
    json_t *dirs = tthd_plugins_path_json(srv->opt.plugins_dir);
    size_t i;
    json_t *dir;
    json_array_foreach(dirs, i, dir) {
        if (srv->watching == TTHD_MAX_PLUGIN_DIRS || uv_fs_event_init(loop, &srv->watch[srv->watching]) != 0)
            break;
        uv_fs_event_t *w = &srv->watch[srv->watching++];
        w->data = srv;
        int rc = uv_fs_event_start(w, on_plugins_changed, json_string_value(dir), 0);
        if (rc != 0)
            tthd_log(TTHD_LOG_WARN, "cannot watch %s (%s): new plugins there need a restart",
                     json_string_value(dir), uv_strerror(rc));
    }
    json_decref(dirs);
    if (srv->opt.idle_exit > 0)
        uv_timer_start(&srv->idle_timer, on_idle, (uint64_t)(srv->opt.idle_exit * 1000), 0);
    if (srv->opt.conn_idle > 0) {
        /* swept a few times per timeout, at most once a second */
        uint64_t every = (uint64_t)(srv->opt.conn_idle * 250);
        every = every < 50 ? 50 : every > 1000 ? 1000 : every;
        uv_timer_start(&srv->conn_idle_timer, on_conn_idle_sweep, every, every);
        uv_unref((uv_handle_t *)&srv->conn_idle_timer);
    }
    return 0;
}

void tthd_server_free(tthd_server *srv)
{
    tthd_cache_free(&srv->cache);
    tthd_remote_free(&srv->remote);
    tthd_recent_free(&srv->recent);
    tthd_digest_memo_free(&srv->digests);
}
