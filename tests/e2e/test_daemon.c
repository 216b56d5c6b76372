/* End to end: the daemon's life. Socket permissions, stale and live sockets, other users,
 * systemd socket activation, SIGTERM, idle exit, and cache accounting. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static const char *const basic[] = {"tp_basic", NULL};

static int log_contains(const e2e_daemon *d, const char *needle)
{
    FILE *f = fopen(d->log, "r");
    if (!f)
        return 0;
    char line[2048];
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

Test(daemon, socket_permissions_and_shutdown, .timeout = 120)
{
    e2e_daemon d;
    e2e_start(&d, basic, NULL);
    struct stat st;
    cr_assert_eq(lstat(d.sock, &st), 0);
    cr_assert(S_ISSOCK(st.st_mode));
    cr_assert_eq(st.st_mode & 0777, 0600, "socket mode is %03o", st.st_mode & 0777);
    char dir[512];
    snprintf(dir, sizeof dir, "%s/run", d.root);
    cr_assert_eq(stat(dir, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0700, "socket directory mode is %03o", st.st_mode & 0777);
    e2e_stop(&d); /* asserts exit 0 and the socket removed */
}

Test(daemon, stale_socket_is_replaced, .timeout = 120)
{
    e2e_daemon d;
    e2e_prepare(&d);
    /* a socket file nobody listens on, as a crashed daemon leaves behind */
    char dir[512];
    snprintf(dir, sizeof dir, "%s/run", d.root);
    cr_assert_eq(mkdir(dir, 0700), 0);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", d.sock);
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    close(fd);
    struct stat st;
    cr_assert_eq(lstat(d.sock, &st), 0, "the stale socket file exists");
    e2e_launch(&d, basic, NULL);
    cr_assert(log_contains(&d, "stale"), "tthd should say it replaced a stale socket");
    e2e_client *c = e2e_client_new(&d);
    e2e_client_init(c);
    e2e_client_free(c);
    e2e_stop(&d);
}

/* Something that is not a socket at the socket's path is never removed. */
Test(daemon, non_socket_path_is_left_alone, .timeout = 120)
{
    e2e_daemon d;
    e2e_prepare(&d);
    char dir[512];
    snprintf(dir, sizeof dir, "%s/run", d.root);
    cr_assert_eq(mkdir(dir, 0700), 0);
    FILE *f = fopen(d.sock, "w");
    cr_assert_not_null(f);
    fputs("precious", f);
    fclose(f);
    pid_t pid = e2e_spawn(&d, NULL);
    int status;
    cr_assert(e2e_wait_exit(pid, 15000, &status), "tthd must refuse to start");
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    cr_assert(log_contains(&d, "not a socket"));
    struct stat st;
    cr_assert_eq(stat(d.sock, &st), 0);
    cr_assert(S_ISREG(st.st_mode), "the file is still there");
    e2e_cleanup(&d);
}

Test(daemon, live_socket_refuses_second_daemon, .timeout = 120)
{
    e2e_daemon d;
    e2e_start(&d, basic, NULL);
    e2e_daemon second = d;
    snprintf(second.log, sizeof second.log, "%s/second.log", d.root);
    pid_t pid = e2e_spawn(&second, NULL);
    int status;
    cr_assert(e2e_wait_exit(pid, 15000, &status), "a second tthd on a live socket must exit");
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0, "the second tthd must fail");
    cr_assert(log_contains(&second, "already running"), "the refusal must say why");
    e2e_client *c = e2e_client_new(&d);
    e2e_client_init(c);
    e2e_client_free(c);
    e2e_stop(&d);
}

Test(daemon, sigterm_stops_cleanly, .timeout = 120)
{
    e2e_daemon d;
    e2e_start(&d, basic, NULL);
    e2e_client *c = e2e_client_new(&d);
    e2e_client_init(c);
    cr_assert_eq(kill(d.pid, SIGTERM), 0);
    int status;
    cr_assert(e2e_wait_exit(d.pid, 20000, &status), "tthd did not stop on SIGTERM");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        e2e_dump_log(&d);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "tthd exit status after SIGTERM");
    cr_assert_null(e2e_recv(c, 5000), "the connection is closed");
    struct stat st;
    cr_assert_neq(lstat(d.sock, &st), 0, "the socket is removed");
    e2e_client_free(c);
    e2e_cleanup(&d);
}

/* SIGTERM with a request in flight: it gets ShuttingDown within the grace period, the daemon
 * exits cleanly, killing the worker that was stuck. */
Test(daemon, sigterm_with_work_in_flight, .timeout = 120)
{
    static const char *const args[] = {"--shutdown-grace", "1", "--request-timeout", "60", NULL};
    const char *const plugins[] = {"tp_basic", "tp_crash_loop", NULL};
    e2e_daemon d;
    e2e_start(&d, plugins, args);
    e2e_client *c = e2e_client_new(&d);
    e2e_client_init(c);
    e2e_send(c, tthp_request_new(1, "target/parse", json_pack("{s:s}", "target", "test-loop")));
    usleep(500000);
    cr_assert_eq(kill(d.pid, SIGTERM), 0);
    json_t *r = e2e_recv_response(c, 10000);
    cr_assert_not_null(r, "the in-flight request got no answer");
    cr_assert_eq(e2e_error_code(r), TTHP_SHUTTING_DOWN);
    json_decref(r);
    int status;
    cr_assert(e2e_wait_exit(d.pid, 15000, &status), "tthd did not stop within the grace period");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        e2e_dump_log(&d);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    struct stat st;
    cr_assert_neq(lstat(d.sock, &st), 0, "the socket is removed");
    e2e_client_free(c);
    e2e_cleanup(&d);
}

Test(daemon, idle_exit, .timeout = 120)
{
    static const char *const args[] = {"--idle-exit", "1", NULL};
    e2e_daemon d;
    e2e_start(&d, basic, args);
    /* a client keeps it alive */
    e2e_client *c = e2e_client_new(&d);
    e2e_client_init(c);
    usleep(1500000);
    int status;
    cr_assert_eq(waitpid(d.pid, &status, WNOHANG), 0, "tthd exited while a client was connected");
    e2e_client_free(c);
    cr_assert(e2e_wait_exit(d.pid, 10000, &status), "tthd did not exit when idle");
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    struct stat st;
    cr_assert_neq(lstat(d.sock, &st), 0, "the socket is removed");
    e2e_cleanup(&d);
}

Test(daemon, other_uid_is_refused, .timeout = 120)
{
    if (geteuid() != 0)
        cr_skip_test("needs root to act as another user");
    struct passwd *nobody = getpwnam("nobody");
    uid_t uid = nobody ? nobody->pw_uid : 65534;
    gid_t gid = nobody ? nobody->pw_gid : 65534;
    e2e_daemon d;
    e2e_start(&d, basic, NULL);
    /* open the way on purpose, so that only tthd's own check stands in between */
    char dir[512];
    snprintf(dir, sizeof dir, "%s/run", d.root);
    cr_assert_eq(chmod(dir, 0755), 0);
    cr_assert_eq(chmod(d.sock, 0666), 0);
    int pipefd[2];
    cr_assert_eq(pipe(pipefd), 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        close(pipefd[0]);
        int result = 10;
        if (setgid(gid) == 0 && setuid(uid) == 0) {
            int fd = socket(AF_UNIX, SOCK_STREAM, 0);
            struct sockaddr_un sa = {.sun_family = AF_UNIX};
            snprintf(sa.sun_path, sizeof sa.sun_path, "%s", d.sock);
            if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
                result = 11;
            } else {
                tthp_fd_reader r;
                tthp_fd_reader_init(&r, fd, 1 << 20);
                tthp_frame f;
                result = 12;
                if (tthp_fd_read_frame(&r, &f, 10000) == 1 && f.type == TTHP_FRAME_JSON) {
                    tthp_message m;
                    if (tthp_message_parse(f.data, f.len, &m) == 0 && m.error &&
                        json_integer_value(json_object_get(m.error, "code")) == TTHP_PEER_REFUSED)
                        result = tthp_fd_read_frame(&r, &f, 10000) == 0 ? 0 : 13; /* then closed */
                    tthp_message_clear(&m);
                }
                tthp_fd_reader_free(&r);
            }
        }
        if (write(pipefd[1], &result, sizeof result) != sizeof result)
            _exit(1);
        _exit(0);
    }
    close(pipefd[1]);
    int result = -1;
    cr_assert_eq(read(pipefd[0], &result, sizeof result), (ssize_t)sizeof result);
    close(pipefd[0]);
    waitpid(pid, NULL, 0);
    cr_assert_eq(result, 0, "other-uid client: %s",
                 result == 10 ? "could not become nobody" : result == 11 ? "could not connect"
                 : result == 12 ? "no PeerRefused error" : "connection not closed after the refusal");
    /* and the daemon keeps serving its own user */
    e2e_client *c = e2e_client_new(&d);
    e2e_client_init(c);
    json_t *r = e2e_call(c, 1, "status", NULL);
    cr_assert(e2e_result_int(r, "requests", "failed") >= 1, "the refusal is counted");
    json_decref(r);
    e2e_client_free(c);
    e2e_stop(&d);
}

Test(daemon, systemd_socket_activation, .timeout = 120)
{
    e2e_daemon d;
    memset(&d, 0, sizeof d);
    snprintf(d.root, sizeof d.root, "/tmp/tth-e2e-XXXXXX");
    cr_assert_not_null(mkdtemp(d.root));
    snprintf(d.sock, sizeof d.sock, "%s/activated.sock", d.root);
    snprintf(d.plugins, sizeof d.plugins, "%s/plugins", d.root);
    snprintf(d.cache, sizeof d.cache, "%s/cache", d.root);
    snprintf(d.log, sizeof d.log, "%s/tthd.log", d.root);
    cr_assert_eq(mkdir(d.plugins, 0755), 0);
    e2e_put_plugin(d.plugins, "tp_basic", NULL);
    int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", d.sock);
    cr_assert_eq(bind(lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    cr_assert_eq(listen(lfd, 16), 0);
    char tthd[1024];
    e2e_build_path("daemon/tthd", tthd, sizeof tthd);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        /* what systemd does: the socket as fd 3, LISTEN_FDS and LISTEN_PID */
        if (lfd != 3) {
            dup2(lfd, 3);
            close(lfd);
        }
        char spid[32];
        snprintf(spid, sizeof spid, "%d", (int)getpid());
        setenv("LISTEN_PID", spid, 1);
        setenv("LISTEN_FDS", "1", 1);
        int fd = open(d.log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        dup2(fd, 2);
        char sock_unused[512];
        snprintf(sock_unused, sizeof sock_unused, "%s/unused.sock", d.root);
        execl(tthd, tthd, "--socket", sock_unused, "--plugins-dir", d.plugins, "--cache-dir", d.cache, "--workers",
              "1", "--verbose", (char *)NULL);
        _exit(127);
    }
    close(lfd);
    d.pid = pid;
    e2e_client *c = e2e_client_new(&d);
    e2e_client_init(c);
    json_t *r = e2e_call(c, 1, "targets/list", NULL);
    cr_assert_eq(e2e_error_code(r), 0);
    json_decref(r);
    r = e2e_call(c, 2, "shutdown", NULL);
    cr_assert(json_is_null(json_object_get(r, "result")));
    json_decref(r);
    e2e_client_free(c);
    int status;
    cr_assert(e2e_wait_exit(pid, 20000, &status));
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    struct stat st;
    cr_assert_eq(lstat(d.sock, &st), 0, "an activated daemon leaves systemd's socket alone");
    char unused[512];
    snprintf(unused, sizeof unused, "%s/unused.sock", d.root);
    cr_assert_neq(lstat(unused, &st), 0, "an activated daemon binds nothing itself");
    e2e_cleanup(&d);
}

/* Without a model the compile flow cannot succeed, but the cache lookup happens first:
 * misses are counted for each compile whose target parsed. With a compile flow in the build and
 * a real model, the second identical compile is a hit. */
Test(daemon, cache_accounting, .timeout = 300)
{
    e2e_daemon d;
    e2e_start(&d, basic, NULL);
    e2e_client *c = e2e_client_new(&d);
    e2e_client_init(c);
    static const uint8_t junk[] = "this is not an ONNX model";
    for (int i = 0; i < 2; i++) {
        json_int_t id = 10 + i;
        e2e_send(c, tthp_request_new(id, "compile", json_pack("{s:{s:s, s:i}, s:s}", "model", "name", "junk", "size",
                                                              (int)sizeof junk, "target", "test-basic")));
        e2e_upload(c, id, junk, sizeof junk, 10);
        json_t *r = NULL;
        while ((r = e2e_recv(c, 120000)) && json_object_get(r, "method"))
            json_decref(r);
        cr_assert_not_null(r, "no answer to compile");
        int code = e2e_error_code(r);
        cr_assert(code <= -32001 && code >= -32099, "junk model: expected a libtth error, got %d", code);
        cr_assert_not_null(json_object_get(json_object_get(json_object_get(r, "error"), "data"), "diagnostics"));
        json_decref(r);
    }
    json_t *r = e2e_call(c, 20, "status", NULL);
    cr_assert_eq(e2e_result_int(r, "cache", "misses"), 2, "each compile of a parsed target is a cache lookup");
    cr_assert_eq(e2e_result_int(r, "cache", "hits"), 0, "failures are never cached");
    cr_assert_eq(e2e_result_int(r, "cache", "entries"), 0);
    json_decref(r);
    e2e_client_free(c);
    e2e_stop(&d);
}

/* A socket given on the command line must sit in a directory no other user can change: one
 * writable by others (without the sticky bit) or, as root, one owned by another user, and tthd
 * refuses to start, saying why; a sticky world-writable one, as /tmp, is accepted. */
Test(daemon, socket_directory_others_can_change_is_refused, .timeout = 120)
{
    e2e_daemon d;
    e2e_prepare(&d);
    char dir[512];
    snprintf(dir, sizeof dir, "%s/run", d.root);
    cr_assert_eq(mkdir(dir, 0700), 0);
    cr_assert_eq(chmod(dir, 0777), 0);
    pid_t pid = e2e_spawn(&d, NULL);
    int status;
    cr_assert(e2e_wait_exit(pid, 15000, &status), "tthd must refuse a socket in a directory others can write");
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    cr_assert(log_contains(&d, "is writable by group or others without the sticky bit"), "the refusal says why");
    cr_assert_neq(access(d.sock, F_OK), 0, "no socket was made");
    if (geteuid() == 0) {
        struct passwd *nobody = getpwnam("nobody");
        cr_assert_eq(chmod(dir, 0755), 0);
        cr_assert_eq(chown(dir, nobody ? nobody->pw_uid : 65534, nobody ? nobody->pw_gid : 65534), 0);
        pid = e2e_spawn(&d, NULL);
        cr_assert(e2e_wait_exit(pid, 15000, &status), "tthd must refuse a directory of another user");
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0);
        cr_assert(log_contains(&d, "belongs to uid"), "the refusal names the owner");
        cr_assert_eq(chown(dir, 0, 0), 0);
    }
    cr_assert_eq(chmod(dir, 01777), 0);
    e2e_launch(&d, basic, NULL);
    e2e_stop(&d);
}

/* A connection that holds no request and sends nothing for --connection-idle-timeout is closed;
 * one that keeps talking is not. */
Test(daemon, idle_connections_are_closed, .timeout = 120)
{
    static const char *const args[] = {"--connection-idle-timeout", "1", NULL};
    e2e_daemon d;
    e2e_start(&d, basic, args);
    e2e_client *quiet = e2e_client_new(&d), *busy = e2e_client_new(&d);
    e2e_client_init(quiet);
    e2e_client_init(busy);
    for (int i = 0; i < 6; i++) {
        usleep(400000);
        json_t *r = e2e_call(busy, 10 + i, "status", NULL);
        cr_assert_not_null(r, "a client that keeps talking was disconnected");
        json_decref(r);
    }
    cr_assert_null(e2e_recv(quiet, 3000), "the idle connection is still open after 2.4 s");
    cr_assert(log_contains(&d, "idle for"), "the close is logged");
    e2e_client_free(quiet);
    e2e_client_free(busy);
    e2e_stop(&d);
}

/* ---- the cache on a small disk (docs/cache.md, "The bound") -------------------------------- *
 * A tmpfs of a few entries' size is mounted on the daemon's cache directory, in a mount namespace
 * of the test's own (so nothing outlives the test), and another, large one on its code store
 * (cache/code), so the small one holds only entry files. Needs root (CAP_SYS_ADMIN): skipped
 * otherwise. */

static uint64_t pages_of(uint64_t bytes)
{
    return (bytes + 4095) / 4096;
}

/* Mount tmpfs of `bytes` on d's cache directory (before the daemon starts); 0, or -1 when this
 * process may not mount */
static int small_disk(const e2e_daemon *d, uint64_t bytes)
{
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        return -1;
    char opt[64], code[256];
    snprintf(opt, sizeof opt, "size=%llu,mode=0700", (unsigned long long)bytes);
    mkdir(d->cache, 0700);
    cr_assert_eq(mount("tmpfs", d->cache, "tmpfs", 0, opt), 0, "mount tmpfs: %s", strerror(errno));
    snprintf(code, sizeof code, "%s/code", d->cache);
    cr_assert_eq(mkdir(code, 0700), 0);
    cr_assert_eq(mount("tmpfs", code, "tmpfs", 0, "size=64m,mode=0700"), 0, "mount tmpfs: %s", strerror(errno));
    return 0;
}

/* Stop d and remove its directories, the small disk first */
static void stop_on_small_disk(e2e_daemon *d)
{
    char code[256];
    snprintf(code, sizeof code, "%s/code", d->cache);
    e2e_shutdown(d);
    cr_assert_eq(umount2(code, MNT_DETACH), 0);
    cr_assert_eq(umount2(d->cache, MNT_DETACH), 0);
    e2e_cleanup(d);
}

/* The entry files in d's cache directory: their number, *bytes their sizes */
static int entry_files(const e2e_daemon *d, uint64_t *bytes)
{
    DIR *dir = opendir(d->cache);
    cr_assert_not_null(dir);
    struct dirent *de;
    int n = 0;
    *bytes = 0;
    while ((de = readdir(dir))) {
        size_t len = strlen(de->d_name);
        char path[512];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", d->cache, de->d_name);
        if (len > 5 && strcmp(de->d_name + len - 5, ".tthc") == 0 && stat(path, &st) == 0) {
            n++;
            *bytes += (uint64_t)st.st_size;
        }
    }
    closedir(dir);
    return n;
}

/* A compile of the digits model whose client takes the cache file (so the worker writes the entry
 * itself, asking for room first); asserts it succeeded, returns the status after it, once no
 * write is in flight */
static json_t *compile_file_delivery(e2e_client *c, json_int_t id, const uint8_t *model, size_t len,
                                     const char *target, int *by_file)
{
    json_t *params = json_pack("{s:{s:s, s:I}, s:s, s:s}", "model", "name", "digits", "size", (json_int_t)len,
                               "target", target, "delivery", "file");
    e2e_send(c, tthp_request_new(id, "compile", params));
    e2e_upload(c, id, model, len, 65536);
    json_t *r = e2e_recv_response(c, 240000);
    cr_assert_not_null(r, "no answer to compile for '%s'", target);
    cr_assert_eq(e2e_error_code(r), 0, "compile for '%s' failed: %s", target, e2e_err_message(r));
    /* the worker wrote the entry file itself: the answer names it, nothing was streamed */
    if (by_file)
        *by_file = json_object_get(json_object_get(json_object_get(r, "result"), "artifact"), "file") != NULL;
    json_decref(r);
    usleep(200000); /* a store the daemon writes itself ends in the thread pool after the answer */
    return e2e_call(c, id + 1000, "status", NULL);
}

static const char *const llvm_targets[] = {"llvm", "llvm -opt-level=0", "llvm -opt-level=1", "llvm -opt-level=2",
                                           "llvm -num-cores=1"};

/* The size of digits' entry for `llvm` (measured once, on an ordinary directory) */
static uint64_t digits_entry_size(const uint8_t *model, size_t len)
{
    e2e_daemon d;
    const char *args[] = {"--workers", "1", NULL};
    e2e_prepare(&d);
    e2e_put_real_plugins(&d);
    e2e_launch(&d, NULL, args);
    e2e_client *c = e2e_client_new(&d);
    e2e_client_init(c);
    json_t *st = compile_file_delivery(c, 1, model, len, "llvm", NULL);
    uint64_t size = (uint64_t)e2e_result_int(st, "cache", "bytes");
    json_decref(st);
    e2e_client_free(c);
    e2e_stop(&d);
    cr_assert(size > 16384, "digits' entry is %llu bytes", (unsigned long long)size);
    return size;
}

/* A daemon with one worker whose cache directory is a disk with room for three of digits' `llvm`
 * entries (and a bit), with a bound of three and a half entries when `bounded`; a client talking
 * to it. Skips the test (model freed) when this process may not mount. */
static e2e_client *start_on_small_disk(e2e_daemon *d, uint8_t *model, size_t len, int bounded)
{
    uint64_t entry = digits_entry_size(model, len);
    e2e_prepare(d);
    if (small_disk(d, (3 * (pages_of(entry) + 1) + 2) * 4096) != 0) {
        e2e_cleanup(d);
        free(model);
        cr_skip_test("mounting a tmpfs needs root");
    }
    e2e_put_real_plugins(d);
    char bound[32];
    snprintf(bound, sizeof bound, "%llu", (unsigned long long)(3 * entry + entry / 2));
    const char *args[] = {"--workers", "1", bounded ? "--cache-max-bytes" : NULL, bound, NULL};
    e2e_launch(d, NULL, args);
    e2e_client *c = e2e_client_new(d);
    e2e_client_init(c);
    return c;
}

/* A disk with room for three entries: compiles go on when a store fails for want of space, and
 * status counts the entries whose files are there, not those it could not write */
Test(daemon, a_full_disk_is_counted_as_stored, .timeout = 300)
{
    size_t len;
    uint8_t *model = e2e_read_digits(&len);
    e2e_daemon d;
    e2e_client *c = start_on_small_disk(&d, model, len, 0);
    json_t *st = NULL;
    for (int i = 0; i < 5; i++) {
        json_decref(st);
        st = compile_file_delivery(c, 10 * (i + 1), model, len, llvm_targets[i], NULL);
    }
    uint64_t bytes;
    int files = entry_files(&d, &bytes);
    cr_assert_eq(files, 3, "%d entry files on a disk with room for three", files);
    cr_assert_eq(e2e_result_int(st, "cache", "entries"), files, "status counts %lld entries, %d files are there",
                 (long long)e2e_result_int(st, "cache", "entries"), files);
    cr_assert_eq((uint64_t)e2e_result_int(st, "cache", "bytes"), bytes);
    cr_assert_eq(e2e_result_int(st, "cache", "storeErrors"), 2);
    json_decref(st);
    e2e_client_free(c);
    stop_on_small_disk(&d);
    free(model);
}

/* A bound of three and a half entries on a disk of three and a bit: each new entry's file is
 * written after older ones made room, so no store runs out of space (before, the worker wrote the
 * new file first and the directory passed its bound by one entry) */
Test(daemon, the_cache_bound_holds_while_an_entry_is_written, .timeout = 300)
{
    size_t len;
    uint8_t *model = e2e_read_digits(&len);
    e2e_daemon d;
    e2e_client *c = start_on_small_disk(&d, model, len, 1);
    json_t *st = NULL;
    for (int i = 0; i < 5; i++) {
        json_decref(st);
        int by_file;
        st = compile_file_delivery(c, 10 * (i + 1), model, len, llvm_targets[i], &by_file);
        cr_assert(by_file, "compile %d: the worker could not write its entry file (no room)", i + 1);
        uint64_t bytes;
        int files = entry_files(&d, &bytes);
        cr_assert_eq(files, i < 3 ? i + 1 : 3, "compile %d: %d entry files", i + 1, files);
        cr_assert_eq(e2e_result_int(st, "cache", "entries"), files);
        cr_assert_eq((uint64_t)e2e_result_int(st, "cache", "bytes"), bytes);
        cr_assert_eq(e2e_result_int(st, "cache", "storeErrors"), 0, "compile %d: a store ran out of space", i + 1);
    }
    json_decref(st);
    e2e_client_free(c);
    stop_on_small_disk(&d);
    free(model);
}
