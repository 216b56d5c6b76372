/* conn.c: talking to tthd (PROTOCOL.md sections 1-6).
 *
 * Blocking sockets and poll(): a command line client has one request in flight at a time.
 * When nothing answers on the socket, tthd is started detached (unless --no-start) and the
 * connection retried with backoff for up to ~10 s. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tthproto/jsonrpc.h>

#include "tth_config.h"
#include "tthctl.h"

#define TTHCTL_READ_MAX_FRAME (64u * 1024 * 1024) /* we accept frames this big from the daemon */
#define TTHCTL_START_TIMEOUT_MS 10000             /* how long a started daemon may take */
#define TTHCTL_IDLE_EXIT "600"                    /* seconds an auto-started daemon idles */

volatile int tthctl_interrupted;

/* ---- exit codes for JSON-RPC errors (data, not an if-chain) ---- */

static const struct {
    int code;
    int exit;
} rpc_exits[] = {
    {TTHP_PARSE_ERROR, TTHCTL_EXIT_PROTOCOL},
    {TTHP_INVALID_REQUEST, TTHCTL_EXIT_PROTOCOL},
    {TTHP_METHOD_NOT_FOUND, TTHCTL_EXIT_PROTOCOL},
    {TTHP_INVALID_PARAMS, TTHCTL_EXIT_PROTOCOL},
    {TTHP_INTERNAL_ERROR, TTHCTL_EXIT_FAILED},
    {TTHP_REQUEST_CANCELLED, TTHCTL_EXIT_FAILED},
    {TTHP_VERSION_MISMATCH, TTHCTL_EXIT_PROTOCOL},
    {TTHP_NOT_INITIALIZED, TTHCTL_EXIT_PROTOCOL},
    {TTHP_FRAME_TOO_LARGE, TTHCTL_EXIT_PROTOCOL},
    {TTHP_REQUEST_TOO_LARGE, TTHCTL_EXIT_FAILED},
    {TTHP_TOO_MANY_REQUESTS, TTHCTL_EXIT_FAILED},
    {TTHP_PEER_REFUSED, TTHCTL_EXIT_UNREACHABLE},
    {TTHP_SHUTTING_DOWN, TTHCTL_EXIT_FAILED},
    {TTHP_BAD_FRAME, TTHCTL_EXIT_PROTOCOL},
    {TTHP_UNEXPECTED_BINARY, TTHCTL_EXIT_PROTOCOL},
};

int tthctl_rpc_exit(int code)
{
    if (TTHP_CODE_TO_TTH(code))
        return TTHCTL_EXIT_FAILED; /* a libtth code: the request failed with a diagnostic */
    for (size_t i = 0; i < sizeof rpc_exits / sizeof rpc_exits[0]; i++)
        if (rpc_exits[i].code == code)
            return rpc_exits[i].exit;
    return TTHCTL_EXIT_PROTOCOL;
}

/* ---- socket path ---- */

int tthctl_socket_default(char *buf, size_t len, tthctl_error *err)
{
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    int n;
    if (xdg && *xdg)
        n = snprintf(buf, len, "%s/tth/tthd.sock", xdg);
    else
        n = snprintf(buf, len, "/tmp/tth-%u/tthd.sock", (unsigned)getuid());
    if (n < 0 || (size_t)n >= len)
        return tthctl_fail(err, TTHCTL_EXIT_USAGE, NULL,
                           "the default socket path is longer than %zu bytes", len - 1);
    return 0;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Connect to path: the fd, or -errno. */
static int socket_connect(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int rc;
    do
        rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
    while (rc < 0 && errno == EINTR);
    if (rc < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

/* ---- starting tthd ---- */

/* The last line of the daemon's log (what a tthd that refused to start said), into buf: 1, or 0
 * when there is none. */
static int last_line(const char *path, char *buf, size_t len)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0])
            snprintf(buf, len, "%s", line);
    }
    fclose(f);
    return buf[0] != '\0';
}

static int is_executable(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* The tthd to start: next to us in the build tree, else installed, else PATH ("tthd"). */
static void find_tthd(char *buf, size_t len)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            /* <prefix>/bin/tthctl → <prefix>/bin/tthd: the same install, wherever it was moved
             * or staged; then <build>/client/tthctl → <build>/daemon/tthd */
            snprintf(buf, len, "%s/tthd", self);
            if (is_executable(buf))
                return;
            snprintf(buf, len, "%s/../daemon/tthd", self);
            if (is_executable(buf))
                return;
        }
    }
    snprintf(buf, len, "%s/tthd", TTH_BINDIR);
    if (is_executable(buf))
        return;
    snprintf(buf, len, "tthd");
}

/* mkdir the socket's directory (one level, mode 0700) if it is missing. */
static int make_socket_dir(const char *sock, char *dir, size_t len, tthctl_error *err)
{
    snprintf(dir, len, "%s", sock);
    char *slash = strrchr(dir, '/');
    if (!slash) {
        snprintf(dir, len, ".");
        return 0;
    }
    if (slash == dir) {
        dir[1] = '\0';
        return 0;
    }
    *slash = '\0';
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        char loc[600];
        snprintf(loc, sizeof loc, "directory '%.580s'", dir);
        return tthctl_fail(err, TTHCTL_EXIT_UNREACHABLE, loc,
                           "cannot create the socket directory: %s", strerror(errno));
    }
    return 0;
}

/* Start tthd detached on `sock`; *pid gets the child. The daemon's output goes to
 * <socket dir>/tthd.log. */
static int start_daemon(const char *sock, const char *dir, pid_t *pid, char *log, size_t log_len, char *exe,
                        size_t exe_len, tthctl_error *err)
{
    find_tthd(exe, exe_len);
    snprintf(log, log_len, "%s/tthd.log", dir);
    /* O_NOFOLLOW: a symlink planted as the log would make us write through it */
    int logfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    int nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (nullfd < 0) {
        if (logfd >= 0)
            close(logfd);
        return tthctl_fail(err, TTHCTL_EXIT_IO, "file '/dev/null'", "cannot open: %s", strerror(errno));
    }
    fflush(NULL);
    pid_t child = fork();
    if (child < 0) {
        int e = errno;
        close(nullfd);
        if (logfd >= 0)
            close(logfd);
        return tthctl_fail(err, TTHCTL_EXIT_UNREACHABLE, NULL, "cannot start tthd: fork: %s", strerror(e));
    }
    if (child == 0) {
        /* the daemon: its own session, no terminal, output to the log */
        setsid();
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        dup2(nullfd, STDIN_FILENO);
        dup2(logfd >= 0 ? logfd : nullfd, STDOUT_FILENO);
        dup2(logfd >= 0 ? logfd : nullfd, STDERR_FILENO);
        char *argv[] = {exe, "--socket", (char *)sock, "--idle-exit", TTHCTL_IDLE_EXIT, NULL};
        if (strchr(exe, '/'))
            execv(exe, argv);
        else
            execvp(exe, argv);
        dprintf(STDERR_FILENO, "tthctl: cannot execute '%s': %s\n", exe, strerror(errno));
        _exit(127);
    }
    close(nullfd);
    if (logfd >= 0)
        close(logfd);
    *pid = child;
    return 0;
}

static int wait_ready(const char *sock, pid_t pid, const char *log, const char *exe, const char *loc,
                      int *fd_out, tthctl_error *err);

/* Connect, starting the daemon if nothing answers. */
static int connect_or_start(const char *sock, int no_start, int *fd_out, int *started,
                            tthctl_error *err)
{
    char loc[256];
    snprintf(loc, sizeof loc, "socket '%s'", sock);
    int fd = socket_connect(sock);
    if (fd >= 0) {
        *fd_out = fd;
        return 0;
    }
    int e = -fd;
    if (no_start || (e != ENOENT && e != ECONNREFUSED)) {
        tthctl_fail(err, TTHCTL_EXIT_UNREACHABLE, loc, "cannot connect to tthd: %s", strerror(e));
        err->sys_errno = e;
        if (no_start && (e == ENOENT || e == ECONNREFUSED))
            tthctl_hint(err, "start it with 'tthd --socket %s', or run tthctl without --no-start", sock);
        return -TTHCTL_EXIT_UNREACHABLE;
    }
    /* One tthctl at a time starts a daemon on this socket: the others wait on the lock, then
     * find the daemon it started. (Without it, a tthd that lost the race for the socket exits,
     * and its tthctl would report a failed start while the winner comes up.) */
    char dir[PATH_MAX], lock[PATH_MAX + 32];
    int rc = make_socket_dir(sock, dir, sizeof dir, err);
    if (rc < 0)
        return rc;
    snprintf(lock, sizeof lock, "%s/.tthd-start.lock", dir);
    int lockfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lockfd >= 0) {
        while (flock(lockfd, LOCK_EX) < 0 && errno == EINTR && !tthctl_interrupted)
            ;
        if (tthctl_interrupted) {
            close(lockfd);
            return tthctl_fail(err, TTHCTL_EXIT_UNREACHABLE, loc, "interrupted while waiting for tthd to start");
        }
        fd = socket_connect(sock);
        if (fd >= 0) {
            close(lockfd);
            *fd_out = fd;
            return 0;
        }
    }
    pid_t pid = 0;
    char log[PATH_MAX + 16], exe[PATH_MAX + 16];
    rc = start_daemon(sock, dir, &pid, log, sizeof log, exe, sizeof exe, err);
    if (rc < 0) {
        if (lockfd >= 0)
            close(lockfd);
        return rc;
    }
    rc = wait_ready(sock, pid, log, exe, loc, fd_out, err);
    if (lockfd >= 0)
        close(lockfd); /* releases the lock */
    if (rc == 0)
        *started = 1;
    return rc;
}

/* Retry connecting to a daemon just started, with backoff, for up to TTHCTL_START_TIMEOUT_MS. */
static int wait_ready(const char *sock, pid_t pid, const char *log, const char *exe, const char *loc,
                      int *fd_out, tthctl_error *err)
{
    long deadline = now_ms() + TTHCTL_START_TIMEOUT_MS;
    int delay = 10;
    for (;;) {
        int fd = socket_connect(sock);
        if (fd >= 0) {
            *fd_out = fd;
            return 0;
        }
        int e = -fd;
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            char what[64];
            if (WIFEXITED(status))
                snprintf(what, sizeof what, "exited with status %d", WEXITSTATUS(status));
            else
                snprintf(what, sizeof what, "was killed by signal %d", WTERMSIG(status));
            char why[512];
            tthctl_fail(err, TTHCTL_EXIT_UNREACHABLE, loc, "tthd ('%s') %s before it was ready%s%s", exe, what,
                        last_line(log, why, sizeof why) ? ": " : "", why);
            tthctl_hint(err, "see %s", log);
            return -TTHCTL_EXIT_UNREACHABLE;
        }
        if (now_ms() >= deadline || tthctl_interrupted) {
            tthctl_fail(err, TTHCTL_EXIT_UNREACHABLE, loc,
                        "started tthd ('%s', pid %d) but it did not answer within %d s: %s", exe, (int)pid,
                        TTHCTL_START_TIMEOUT_MS / 1000, strerror(e));
            tthctl_hint(err, "see %s", log);
            return -TTHCTL_EXIT_UNREACHABLE;
        }
        sleep_ms(delay);
        if (delay < 200)
            delay *= 2;
    }
}

/* ---- frames ---- */

static int send_msg(tthctl_conn *c, json_t *msg_new, tthctl_error *err)
{
    if (!msg_new)
        return tthctl_fail(err, TTHCTL_EXIT_FAILED, NULL, "out of memory");
    int rc = tthp_write_message_fd(c->fd, msg_new);
    json_decref(msg_new);
    if (rc == -EPIPE || rc == -ECONNRESET) {
        /* the daemon closed the connection: report what it said before (a refused peer, a busy
         * daemon) or that it closed, not the pipe */
        rc = tthctl_conn_wait(c, -1, NULL, 2000, NULL, err);
        return rc < 0 ? rc
                      : tthctl_fail(err, TTHCTL_EXIT_PROTOCOL, NULL, "tthd closed the connection (socket '%s')",
                                    c->socket_path);
    }
    if (rc < 0) {
        char loc[160];
        snprintf(loc, sizeof loc, "socket '%s'", c->socket_path);
        return tthctl_fail(err, TTHCTL_EXIT_PROTOCOL, loc, "cannot write to tthd: %s", strerror(-rc));
    }
    return 0;
}

int tthctl_conn_send_request(tthctl_conn *c, const char *method, json_t *params_new, json_int_t *id,
                             tthctl_error *err)
{
    json_int_t my = c->next_id++;
    if (id)
        *id = my;
    return send_msg(c, tthp_request_new(my, method, params_new ? params_new : json_object()), err);
}

int tthctl_conn_notify(tthctl_conn *c, const char *method, json_t *params_new, tthctl_error *err)
{
    return send_msg(c, tthp_notification_new(method, params_new), err);
}

/* An error response: keep the daemon's error object and pick the exit code. */
static int rpc_failure(json_t *error, tthctl_error *err)
{
    int code = (int)json_integer_value(json_object_get(error, "code"));
    const char *msg = json_string_value(json_object_get(error, "message"));
    tthctl_fail(err, tthctl_rpc_exit(code), NULL, "%s", msg ? msg : "the daemon answered an error");
    json_decref(err->rpc);
    err->rpc = json_incref(error);
    return -err->exit;
}

int tthctl_conn_wait(tthctl_conn *c, json_int_t id, const tthctl_handlers *h, int timeout_ms,
                     json_t **result, tthctl_error *err)
{
    char loc[160];
    snprintf(loc, sizeof loc, "socket '%s'", c->socket_path);
    int cancel_sent = 0;
    for (;;) {
        tthp_frame fr;
        int slice = timeout_ms >= 0 ? timeout_ms : 250;
        int rc = tthp_fd_read_frame(&c->reader, &fr, slice);
        if (rc == -ETIMEDOUT) {
            if (timeout_ms >= 0)
                return 0;
            if (tthctl_interrupted && !cancel_sent) {
                cancel_sent = 1;
                fprintf(stderr, "\ntthctl: interrupted; cancelling the request\n");
                int crc = tthctl_conn_notify(c, "$/cancelRequest", json_pack("{s:I}", "id", id), err);
                if (crc < 0)
                    return crc;
            }
            continue;
        }
        if (rc == 0)
            return tthctl_fail(err, TTHCTL_EXIT_PROTOCOL, loc, "tthd closed the connection before answering");
        if (rc < 0) {
            if (rc == -EPIPE || rc == -ECONNRESET)
                return tthctl_fail(err, TTHCTL_EXIT_PROTOCOL, loc,
                                   "tthd closed the connection in the middle of a frame");
            if (c->reader.parser.error != 0)
                return tthctl_fail(err, TTHCTL_EXIT_PROTOCOL, loc, "bad frame from tthd: %s",
                                   c->reader.parser.errmsg);
            return tthctl_fail(err, TTHCTL_EXIT_PROTOCOL, loc, "cannot read from tthd: %s", strerror(-rc));
        }
        if (fr.type == TTHP_FRAME_OVERSIZE)
            return tthctl_fail(err, TTHCTL_EXIT_PROTOCOL, loc,
                               "tthd sent a frame of %zu bytes, more than the %u this client accepts",
                               fr.len, TTHCTL_READ_MAX_FRAME);
        if (fr.type == TTHP_FRAME_BINARY) {
            if (!h || !h->binary)
                return tthctl_fail(err, TTHCTL_EXIT_PROTOCOL, loc,
                                   "tthd sent a binary frame (%zu bytes) nobody announced", fr.len);
            rc = h->binary(h->ctx, fr.data, fr.len, err);
            if (rc < 0)
                return rc;
            continue;
        }
        tthp_message m;
        if (tthp_message_parse(fr.data, fr.len, &m) != 0) {
            tthctl_fail(err, TTHCTL_EXIT_PROTOCOL, loc, "bad message from tthd: %s", m.error_message);
            tthp_message_clear(&m);
            return -TTHCTL_EXIT_PROTOCOL;
        }
        if (m.kind == TTHP_MSG_NOTIFICATION) {
            rc = h && h->notification ? h->notification(h->ctx, m.method, m.params, err) : 0;
            tthp_message_clear(&m);
            if (rc < 0)
                return rc;
            continue;
        }
        if (m.kind != TTHP_MSG_RESPONSE) {
            /* the daemon sends no requests to clients: ignore */
            tthp_message_clear(&m);
            continue;
        }
        /* a response for our id, or an id-null error (bad frame, refused peer...) */
        int ours = json_is_integer(m.id) && json_integer_value(m.id) == id;
        int null_id = !m.id;
        if (!ours && !null_id) {
            tthp_message_clear(&m);
            continue;
        }
        if (m.error) {
            rc = rpc_failure(m.error, err);
            tthp_message_clear(&m);
            return rc;
        }
        if (!ours) {
            tthp_message_clear(&m);
            continue;
        }
        if (result)
            *result = json_incref(m.result);
        tthp_message_clear(&m);
        return 1;
    }
}

int tthctl_conn_call(tthctl_conn *c, const char *method, json_t *params_new, json_t **result,
                     tthctl_error *err)
{
    json_int_t id;
    int rc = tthctl_conn_send_request(c, method, params_new, &id, err);
    if (rc < 0)
        return rc;
    rc = tthctl_conn_wait(c, id, NULL, -1, result, err);
    return rc < 0 ? rc : 0;
}

/* ---- session ---- */

static size_t limit_of(const json_t *limits, const char *key, size_t dflt)
{
    json_int_t v = json_integer_value(json_object_get(limits, key));
    return v > 0 ? (size_t)v : dflt;
}

static int initialize(tthctl_conn *c, tthctl_error *err)
{
    json_t *params = json_pack("{s:s, s:{s:s, s:s}}", "protocolVersion", TTHP_PROTOCOL_VERSION,
                               "clientInfo", "name", "tthctl", "version", TTH_VERSION);
    json_t *res = NULL;
    int rc = tthctl_conn_call(c, "initialize", params, &res, err);
    if (rc < 0) {
        if (err->rpc && json_integer_value(json_object_get(err->rpc, "code")) == TTHP_VERSION_MISMATCH)
            tthctl_hint(err, "this tthctl speaks protocol %s; use the tthctl and tthd of one build",
                        TTHP_PROTOCOL_VERSION);
        return rc;
    }
    const char *ver = json_string_value(json_object_get(res, "protocolVersion"));
    int major = 0, minor = 0;
    if (!ver || tthp_version_parse(ver, &major, &minor) != 0 || major != TTHP_PROTOCOL_MAJOR) {
        char loc[160];
        snprintf(loc, sizeof loc, "socket '%s'", c->socket_path);
        tthctl_fail(err, TTHCTL_EXIT_PROTOCOL, loc,
                    "protocol version mismatch: tthd speaks '%s', this tthctl speaks '%s'",
                    ver ? ver : "(none)", TTHP_PROTOCOL_VERSION);
        tthctl_hint(err, "use the tthctl and tthd of one build");
        json_decref(res);
        return -TTHCTL_EXIT_PROTOCOL;
    }
    const json_t *limits = json_object_get(res, "limits");
    c->max_frame_bytes = limit_of(limits, "maxFrameBytes", TTHP_DEFAULT_MAX_FRAME_BYTES);
    c->max_request_bytes = limit_of(limits, "maxRequestBytes", TTHP_DEFAULT_MAX_REQUEST_BYTES);
    c->model_path_ok = json_is_true(json_object_get(json_object_get(res, "capabilities"), "modelPath"));
    c->server = res;
    return 0;
}

int tthctl_conn_open(const tthctl_args *args, int no_start, tthctl_conn **out, tthctl_error *err)
{
    char path[PATH_MAX];
    if (args->socket) {
        snprintf(path, sizeof path, "%s", args->socket);
    } else {
        int rc = tthctl_socket_default(path, sizeof path, err);
        if (rc < 0)
            return rc;
    }
    tthctl_conn *c = calloc(1, sizeof *c);
    if (!c)
        return tthctl_fail(err, TTHCTL_EXIT_FAILED, NULL, "out of memory");
    if (strlen(path) >= sizeof c->socket_path) {
        free(c);
        char loc[PATH_MAX + 16];
        snprintf(loc, sizeof loc, "socket '%s'", path);
        return tthctl_fail(err, TTHCTL_EXIT_USAGE, loc, "a socket path has at most %zu bytes",
                           sizeof c->socket_path - 1);
    }
    memcpy(c->socket_path, path, strlen(path) + 1);
    c->fd = -1;
    c->next_id = 1;
    int rc = connect_or_start(c->socket_path, no_start || args->no_start, &c->fd, &c->started, err);
    if (rc < 0) {
        free(c);
        return rc;
    }
    /* nothing goes to a daemon of another user (a socket someone else created where ours
     * should be): the peer's uid must be ours */
    struct ucred cr;
    socklen_t crlen = sizeof cr;
    if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) == 0 && cr.uid != getuid()) {
        char loc[PATH_MAX + 16];
        snprintf(loc, sizeof loc, "socket '%s'", c->socket_path);
        tthctl_fail(err, TTHCTL_EXIT_UNREACHABLE, loc,
                    "the daemon on this socket runs as uid %u, not as you (uid %u); nothing was sent",
                    (unsigned)cr.uid, (unsigned)getuid());
        tthctl_hint(err, "use a socket of your own: --socket in a directory only you can write, or "
                         "$XDG_RUNTIME_DIR/tth/tthd.sock");
        close(c->fd);
        free(c);
        return -TTHCTL_EXIT_UNREACHABLE;
    }
    tthp_fd_reader_init(&c->reader, c->fd, TTHCTL_READ_MAX_FRAME);
    rc = initialize(c, err);
    if (rc < 0) {
        tthctl_conn_close(c);
        return rc;
    }
    *out = c;
    return 0;
}

void tthctl_conn_close(tthctl_conn *c)
{
    if (!c)
        return;
    if (c->fd >= 0) {
        tthp_fd_reader_free(&c->reader);
        close(c->fd);
    }
    json_decref(c->server);
    free(c);
}
