/* harness.c: see harness.h. */
#include "harness.h"
#include "daemon_fixture.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

const char *e2e_build_path(const char *rel, char *buf, size_t len)
{
    return test_build_path(rel, buf, len);
}

void e2e_put_plugin(const char *dir, const char *name, const char *as)
{
    test_put_plugin(dir, name, as);
}

pid_t e2e_spawn(e2e_daemon *d, const char *const *args)
{
    char tthd[1024];
    e2e_build_path("daemon/tthd", tthd, sizeof tthd);
    const char *argv[64];
    int n = 0;
    argv[n++] = tthd;
    argv[n++] = "--socket";
    argv[n++] = d->sock;
    argv[n++] = "--plugins-dir";
    argv[n++] = d->plugins;
    argv[n++] = "--cache-dir";
    argv[n++] = d->cache;
    argv[n++] = "--workers";
    argv[n++] = "2";
    argv[n++] = "--verbose";
    for (size_t i = 0; args && args[i] && n < 62; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test's daemon does not outlive it */
        int fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 2);
            close(fd);
        }
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 1);
            close(null);
        }
        execv(tthd, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static int try_connect(const char *sock)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

void e2e_start(e2e_daemon *d, const char *const *plugins, const char *const *args)
{
    e2e_prepare(d);
    e2e_launch(d, plugins, args);
}

void e2e_prepare(e2e_daemon *d)
{
    memset(d, 0, sizeof *d);
    snprintf(d->root, sizeof d->root, "/tmp/tth-e2e-XXXXXX");
    cr_assert_not_null(mkdtemp(d->root));
    chmod(d->root, 0755);
    snprintf(d->sock, sizeof d->sock, "%s/run/tthd.sock", d->root);
    snprintf(d->plugins, sizeof d->plugins, "%s/plugins", d->root);
    snprintf(d->cache, sizeof d->cache, "%s/cache", d->root);
    snprintf(d->log, sizeof d->log, "%s/tthd.log", d->root);
    cr_assert_eq(mkdir(d->plugins, 0755), 0);
}

void e2e_launch(e2e_daemon *d, const char *const *plugins, const char *const *args)
{
    for (size_t i = 0; plugins && plugins[i]; i++)
        e2e_put_plugin(d->plugins, plugins[i], NULL);
    d->pid = e2e_spawn(d, args);
    for (int i = 0; i < 300; i++) {
        int fd = try_connect(d->sock);
        if (fd >= 0) {
            close(fd);
            return;
        }
        int status;
        if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
            e2e_dump_log(d);
            cr_assert_fail("tthd exited at startup (status %d)", status);
        }
        usleep(50000);
    }
    e2e_dump_log(d);
    cr_assert_fail("tthd did not listen on %s within 15 s", d->sock);
}

int e2e_wait_exit(pid_t pid, int timeout_ms, int *status)
{
    for (int waited = 0; waited <= timeout_ms; waited += 20) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid)
            return 1;
        usleep(20000);
    }
    return 0;
}

void e2e_dump_log(const e2e_daemon *d)
{
    FILE *f = fopen(d->log, "r");
    if (!f)
        return;
    fprintf(stderr, "---- tthd log (%s) ----\n", d->log);
    char line[2048];
    while (fgets(line, sizeof line, f))
        fputs(line, stderr);
    fprintf(stderr, "---- end of tthd log ----\n");
    fclose(f);
}

void e2e_cleanup(e2e_daemon *d)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d->root);
    cr_assert_eq(system(cmd), 0);
}

void e2e_stop(e2e_daemon *d)
{
    e2e_shutdown(d);
    e2e_cleanup(d);
}

void e2e_shutdown(e2e_daemon *d)
{
    e2e_client *c = e2e_connect(d);
    json_t *r = e2e_call(c, 999999, "shutdown", NULL);
    cr_assert_not_null(r, "no answer to shutdown");
    cr_assert(json_is_null(json_object_get(r, "result")), "shutdown failed");
    json_decref(r);
    e2e_client_free(c);
    e2e_wait_clean_exit(d, 20000, "shutdown");
}

void e2e_wait_clean_exit(e2e_daemon *d, int timeout_ms, const char *what)
{
    int status = 0;
    if (!e2e_wait_exit(d->pid, timeout_ms, &status)) {
        kill(d->pid, SIGKILL);
        waitpid(d->pid, &status, 0);
        e2e_dump_log(d);
        cr_assert_fail("tthd did not exit within %d ms of %s", timeout_ms, what);
    }
    d->pid = 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        e2e_dump_log(d);
    cr_assert(WIFEXITED(status), "tthd ended by signal %d after %s (sanitizer abort?)", WTERMSIG(status), what);
    cr_assert_eq(WEXITSTATUS(status), 0, "tthd exited with status %d after %s (a leak or sanitizer report?)",
                 WEXITSTATUS(status), what);
    struct stat st;
    cr_assert_neq(lstat(d->sock, &st), 0, "the socket %s is still there after %s", d->sock, what);
}

void e2e_expect_refusal(e2e_daemon *d, const char *const *args, int status, const char *says)
{
    pid_t pid = e2e_spawn(d, args);
    int st;
    cr_assert(e2e_wait_exit(pid, 15000, &st), "tthd must refuse to start (%s)", says ? says : "");
    cr_assert(WIFEXITED(st) && (status < 0 ? WEXITSTATUS(st) != 0 : WEXITSTATUS(st) == status),
              "tthd's status %d, expected exit %d (%s)", st, status, says ? says : "");
    if (says)
        cr_assert_gt(e2e_log_count(d, says), 0, "tthd's refusal does not say '%s'", says);
}

int e2e_log_count(const e2e_daemon *d, const char *needle)
{
    FILE *f = fopen(d->log, "r");
    if (!f)
        return 0;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

int e2e_connect_fd(const char *sock)
{
    int fd = try_connect(sock);
    cr_assert(fd >= 0, "cannot connect to %s: %s", sock, strerror(errno));
    return fd;
}

e2e_client *e2e_client_new(const e2e_daemon *d)
{
    e2e_client *c = calloc(1, sizeof *c);
    cr_assert_not_null(c);
    c->daemon = d;
    c->fd = e2e_connect_fd(d->sock);
    tthp_fd_reader_init(&c->reader, c->fd, 64u * 1024 * 1024);
    c->notes = json_array();
    return c;
}

void e2e_client_free(e2e_client *c)
{
    if (!c)
        return;
    close(c->fd);
    tthp_fd_reader_free(&c->reader);
    json_decref(c->init);
    json_decref(c->notes);
    free(c->binary);
    free(c);
}

void e2e_send(e2e_client *c, json_t *msg_new)
{
    cr_assert_not_null(msg_new);
    cr_assert_eq(tthp_write_message_fd(c->fd, msg_new), 0);
    json_decref(msg_new);
}

void e2e_send_raw(e2e_client *c, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t n = write(c->fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        cr_assert(n > 0, "write failed: %s", strerror(errno));
        p += n;
        len -= (size_t)n;
    }
}

json_t *e2e_recv(e2e_client *c, int timeout_ms)
{
    for (;;) {
        tthp_frame f;
        int r = tthp_fd_read_frame(&c->reader, &f, timeout_ms);
        if (r != 1)
            return NULL;
        if (f.type == TTHP_FRAME_BINARY) {
            if (c->binary_len + f.len > c->binary_cap) {
                c->binary_cap = (c->binary_len + f.len) * 2;
                c->binary = realloc(c->binary, c->binary_cap);
                cr_assert_not_null(c->binary);
            }
            memcpy(c->binary + c->binary_len, f.data, f.len);
            c->binary_len += f.len;
            c->binary_frames++;
            continue;
        }
        if (f.type != TTHP_FRAME_JSON)
            return NULL;
        json_t *m = json_loadb((const char *)f.data, f.len, 0, NULL);
        cr_assert_not_null(m, "tthd sent invalid JSON: %.*s", (int)f.len, f.data);
        return m;
    }
}

json_t *e2e_recv_response(e2e_client *c, int timeout_ms)
{
    for (;;) {
        json_t *m = e2e_recv(c, timeout_ms);
        if (!m || !json_object_get(m, "method"))
            return m;
        json_array_append_new(c->notes, m);
    }
}

json_t *e2e_call(e2e_client *c, json_int_t id, const char *method, json_t *params_new)
{
    e2e_send(c, tthp_request_new(id, method, params_new ? params_new : json_object()));
    for (;;) {
        json_t *m = e2e_recv(c, 60000);
        if (!m)
            return NULL;
        json_t *mid = json_object_get(m, "id");
        if (json_object_get(m, "method")) {
            json_array_append_new(c->notes, m);
            continue;
        }
        if (json_is_integer(mid) && json_integer_value(mid) == id)
            return m;
        json_array_append_new(c->notes, m); /* an answer to something else */
    }
}

void e2e_upload(e2e_client *c, json_int_t id, const void *data, size_t len, size_t chunk)
{
    json_t *jid = json_integer(id);
    for (size_t off = 0; off < len; off += chunk) {
        size_t n = len - off < chunk ? len - off : chunk;
        cr_assert_eq(tthp_write_chunk_fd(c->fd, jid, "model", off, (const uint8_t *)data + off, n, len), 0);
    }
    json_decref(jid);
}

void e2e_client_init(e2e_client *c)
{
    json_t *r = e2e_call(c, 0, "initialize",
                         json_pack("{s:s, s:{s:s, s:s}}", "protocolVersion", TTHP_PROTOCOL_VERSION, "clientInfo",
                                   "name", "e2e", "version", "1"));
    cr_assert_not_null(r, "no answer to initialize");
    cr_assert_eq(e2e_error_code(r), 0, "initialize failed");
    json_decref(c->init);
    c->init = r;
}

e2e_client *e2e_connect(const e2e_daemon *d)
{
    e2e_client *c = e2e_client_new(d);
    e2e_client_init(c);
    return c;
}

int e2e_error_code(const json_t *resp)
{
    const json_t *e = json_object_get(resp, "error");
    return e ? (int)json_integer_value(json_object_get(e, "code")) : 0;
}

json_int_t e2e_result_int(const json_t *resp, const char *a, const char *b)
{
    const json_t *v = json_object_get(json_object_get(resp, "result"), a);
    if (b)
        v = json_object_get(v, b);
    cr_assert(json_is_integer(v), "result.%s%s%s is not an integer", a, b ? "." : "", b ? b : "");
    return json_integer_value(v);
}

json_int_t e2e_status_int(e2e_client *c, const char *a, const char *b)
{
    json_t *r = e2e_call(c, 999998, "status", NULL);
    cr_assert_not_null(r, "no answer to status");
    cr_assert_eq(e2e_error_code(r), 0, "status failed");
    json_int_t v = e2e_result_int(r, a, b);
    json_decref(r);
    return v;
}

void e2e_assert_no_plugin_mapped(const e2e_daemon *d)
{
    char path[64], line[4096];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)d->pid);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot read %s", path);
    int mapped = 0;
    while (fgets(line, sizeof line, f))
        mapped |= strstr(line, d->plugins) != NULL || strstr(line, "/plugins/tth-") != NULL;
    fclose(f);
    cr_assert(!mapped, "tthd itself has a plugin mapped (plugin code must run only in workers)");
}

/* ---- compiles with the real plugins ---- */

/* Copy every real plugin (the .so files of build/plugins) into the daemon's plugins directory. */
void e2e_put_real_plugins(const e2e_daemon *d)
{
    char dir[1024];
    e2e_build_path("plugins", dir, sizeof dir);
    DIR *dp = opendir(dir);
    cr_assert_not_null(dp, "no %s", dir);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(dp))) {
        size_t len = strlen(de->d_name);
        if (len < 4 || strcmp(de->d_name + len - 3, ".so") != 0)
            continue;
        char from[1300], to[1300], cmd[4000];
        snprintf(from, sizeof from, "%s/%s", dir, de->d_name);
        snprintf(to, sizeof to, "%s/%s", d->plugins, de->d_name);
        snprintf(cmd, sizeof cmd, "cp '%s' '%s' && chmod 755 '%s'", from, to, to);
        cr_assert_eq(system(cmd), 0);
        n++;
    }
    closedir(dp);
    cr_assert(n > 0, "no plugins built in %s", dir);
}

/* examples/digits.onnx's path into buf */
static const char *digits_path(char *buf, size_t len)
{
    return test_source_path("examples/digits.onnx", buf, len);
}

uint8_t *e2e_read_digits(size_t *len)
{
    char path[1024];
    digits_path(path, sizeof path);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* Send a compile with the model upload; return the response (notifications in c->notes,
 * artifact bytes in c->binary, both reset first). */
json_t *e2e_compile(e2e_client *c, json_int_t id, const uint8_t *model, size_t len, const char *target,
                       json_t *options_new)
{
    json_array_clear(c->notes);
    c->binary_len = 0;
    c->binary_frames = 0;
    json_t *params = json_pack("{s:{s:s, s:I}, s:s}", "model", "name", "digits", "size", (json_int_t)len, "target", target);
    if (options_new)
        json_object_set_new(params, "options", options_new);
    e2e_send(c, tthp_request_new(id, "compile", params));
    e2e_upload(c, id, model, len, 4096);
    json_t *r = e2e_recv_response(c, 240000);
    if (!r && c->daemon)
        e2e_dump_log(c->daemon);
    cr_assert_not_null(r, "no answer to compile for '%s' (tthd's log above)", target);
    return r;
}

json_t *e2e_compile_path(e2e_client *c, json_int_t id, const char *path, size_t len, const char *target,
                         const char *delivery)
{
    c->binary_len = 0;
    c->binary_frames = 0;
    json_t *params = json_pack("{s:{s:s, s:I, s:s}, s:s}", "model", "name", "digits", "size", (json_int_t)len, "path",
                               path, "target", target);
    if (delivery)
        json_object_set_new(params, "delivery", json_string(delivery));
    e2e_send(c, tthp_request_new(id, "compile", params));
    json_t *r = e2e_recv_response(c, 240000);
    if (!r)
        e2e_dump_log(c->daemon);
    cr_assert_not_null(r, "no answer to a compile by path");
    return r;
}

const char *e2e_err_message(const json_t *r)
{
    return json_string_value(json_object_get(json_object_get(r, "error"), "message"));
}

int e2e_no_compile_flow(const json_t *r)
{
    const char *m = e2e_err_message(r);
    return m && strstr(m, "no compile flow");
}

const char *e2e_result_str(const json_t *r, const char *a, const char *b)
{
    const json_t *v = json_object_get(json_object_get(r, "result"), a);
    return json_string_value(b ? json_object_get(v, b) : v);
}

/* The response carries the artifact that was streamed before it. */
void e2e_check_artifact(e2e_client *c, const json_t *r)
{
    cr_assert_eq(e2e_error_code(r), 0, "compile failed: %s", e2e_err_message(r));
    json_int_t size = e2e_result_int(r, "artifact", "size");
    cr_assert(size > 0);
    cr_assert_eq((json_int_t)c->binary_len, size, "streamed %zu bytes, result says %lld", c->binary_len,
                 (long long)size);
    cr_assert_eq((json_int_t)c->binary_frames, e2e_result_int(r, "artifact", "chunks"));
    char sum[17];
    snprintf(sum, sizeof sum, "%016llx", (unsigned long long)XXH64(c->binary, c->binary_len, 0));
    cr_assert_str_eq(e2e_result_str(r, "artifact", "xxh64"), sum);
    cr_assert(json_is_object(json_object_get(json_object_get(r, "result"), "metadata")));
    cr_assert_eq(strlen(e2e_result_str(r, "key", NULL)), 32);
    /* every chunk was announced; progress began and ended */
    size_t chunks = 0, begins = 0, ends = 0, i;
    json_t *n;
    json_array_foreach(c->notes, i, n) {
        const char *m = json_string_value(json_object_get(n, "method"));
        const json_t *p = json_object_get(n, "params");
        if (strcmp(m, "$/chunk") == 0) {
            cr_assert_str_eq(json_string_value(json_object_get(p, "stream")), "artifact");
            chunks++;
        } else if (strcmp(m, "$/progress") == 0) {
            const char *kind = json_string_value(json_object_get(p, "kind"));
            begins += strcmp(kind, "begin") == 0;
            ends += strcmp(kind, "end") == 0;
            json_int_t pc = json_integer_value(json_object_get(p, "percentage"));
            cr_assert(pc >= 0 && pc <= 100);
        }
    }
    cr_assert_eq(chunks, c->binary_frames, "each binary frame is announced by a $/chunk");
    cr_assert_eq(begins, 1);
    cr_assert_eq(ends, 1);
    const json_t *last = json_array_get(c->notes, json_array_size(c->notes) - 1);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(last, "params"), "kind")), "end",
                     "'end' is the last notification before the response");
}


/* /proc/<pid>/stat: "pid (comm) state ppid ...", where comm may hold spaces and parentheses */
static int proc_stat(pid_t pid, char *comm, size_t len, char *state, pid_t *ppid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *open = strchr(buf, '('), *close = strrchr(buf, ')');
    int pp;
    if (!open || !close || close < open || sscanf(close + 1, " %c %d", state, &pp) != 2)
        return -1;
    snprintf(comm, len, "%.*s", (int)(close - open - 1), open + 1);
    *ppid = (pid_t)pp;
    return 0;
}

int e2e_worker_pids(const e2e_daemon *d, pid_t *pids, int max)
{
    DIR *dir = opendir("/proc");
    cr_assert_not_null(dir);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(dir)) && n < max) {
        char comm[64], state;
        pid_t pid = (pid_t)atoi(de->d_name), ppid;
        if (pid > 0 && proc_stat(pid, comm, sizeof comm, &state, &ppid) == 0 && ppid == d->pid &&
            strcmp(comm, "tth-worker") == 0)
            pids[n++] = pid;
    }
    closedir(dir);
    return n;
}

int e2e_pid_running(pid_t pid)
{
    char comm[64], state;
    pid_t ppid;
    return proc_stat(pid, comm, sizeof comm, &state, &ppid) == 0 && state != 'Z' && state != 'X';
}

/* ---- fixtures ---- */

void e2e_open(e2e_fixture *f, const char *const *extra, const char *const *args)
{
    e2e_prepare(&f->d);
    e2e_put_real_plugins(&f->d);
    e2e_up(f, extra, args);
}

void e2e_open_with(e2e_fixture *f, const char *const *plugins, const char *const *args)
{
    e2e_prepare(&f->d);
    e2e_up(f, plugins, args);
}

void e2e_up(e2e_fixture *f, const char *const *plugins, const char *const *args)
{
    e2e_launch(&f->d, plugins, args);
    f->c = e2e_connect(&f->d);
    if (!f->model) {
        f->model = e2e_read_digits(&f->len);
        digits_path(f->model_path, sizeof f->model_path);
    }
}

void e2e_down(e2e_fixture *f)
{
    e2e_client_free(f->c);
    f->c = NULL;
    e2e_shutdown(&f->d);
}

void e2e_close(e2e_fixture *f)
{
    e2e_client_free(f->c);
    free(f->model);
    if (f->d.pid > 0)
        e2e_stop(&f->d);
    else if (f->d.root[0])
        e2e_cleanup(&f->d);
    memset(f, 0, sizeof *f);
}

void e2e_skip_without_flow(e2e_fixture *f, json_t *r)
{
    if (!e2e_no_compile_flow(r))
        return;
    json_decref(r);
    e2e_close(f);
    cr_skip_test("this build has no compile flow");
}

json_t *e2e_compile_or_skip(e2e_fixture *f, json_int_t id, const char *target, json_t *options_new)
{
    json_t *r = e2e_compile(f->c, id, f->model, f->len, target, options_new);
    e2e_skip_without_flow(f, r);
    return r;
}

json_t *e2e_compile_expect(e2e_fixture *f, json_int_t id, const char *target, json_t *options_new,
                           const char *cache)
{
    json_t *r = e2e_compile(f->c, id, f->model, f->len, target, options_new);
    e2e_check_artifact(f->c, r);
    if (cache)
        cr_assert_str_eq(e2e_result_str(r, "cache", NULL), cache, "compile %lld for '%s'", (long long)id, target);
    return r;
}
