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
static e2e_fixture F;

/* d's socket directory (root/run) into dir, made with mode unless mode is 0 */
static void run_dir(const e2e_daemon *d, char *dir, size_t len, mode_t mode)
{
    snprintf(dir, len, "%s/run", d->root);
    if (mode)
        cr_assert_eq(mkdir(dir, mode), 0);
}

Test(daemon, socket_permissions_and_shutdown, .timeout = 120)
{
    e2e_open_with(&F, basic, NULL);
    struct stat st;
    cr_assert_eq(lstat(F.d.sock, &st), 0);
    cr_assert(S_ISSOCK(st.st_mode));
    cr_assert_eq(st.st_mode & 0777, 0600, "socket mode is %03o", st.st_mode & 0777);
    char dir[512];
    run_dir(&F.d, dir, sizeof dir, 0);
    cr_assert_eq(stat(dir, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0700, "socket directory mode is %03o", st.st_mode & 0777);
    e2e_close(&F); /* asserts exit 0 and the socket removed */
}

/* A unix socket bound at path (not listening) */
static int bound_socket(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    return fd;
}

Test(daemon, stale_socket_is_replaced, .timeout = 120)
{
    e2e_prepare(&F.d);
    /* a socket file nobody listens on, as a crashed daemon leaves behind */
    char dir[512];
    run_dir(&F.d, dir, sizeof dir, 0700);
    close(bound_socket(F.d.sock));
    struct stat st;
    cr_assert_eq(lstat(F.d.sock, &st), 0, "the stale socket file exists");
    e2e_up(&F, basic, NULL);
    cr_assert(e2e_log_count(&F.d, "stale"), "tthd should say it replaced a stale socket");
    e2e_close(&F);
}

/* Something that is not a socket at the socket's path is never removed. */
Test(daemon, non_socket_path_is_left_alone, .timeout = 120)
{
    e2e_prepare(&F.d);
    char dir[512];
    run_dir(&F.d, dir, sizeof dir, 0700);
    FILE *f = fopen(F.d.sock, "w");
    cr_assert_not_null(f);
    fputs("precious", f);
    fclose(f);
    e2e_expect_refusal(&F.d, NULL, -1, "not a socket");
    struct stat st;
    cr_assert_eq(stat(F.d.sock, &st), 0);
    cr_assert(S_ISREG(st.st_mode), "the file is still there");
    e2e_close(&F);
}

Test(daemon, live_socket_refuses_second_daemon, .timeout = 120)
{
    e2e_open_with(&F, basic, NULL);
    e2e_daemon second = F.d;
    snprintf(second.log, sizeof second.log, "%s/second.log", F.d.root);
    e2e_expect_refusal(&second, NULL, -1, "already running"); /* the refusal must say why */
    e2e_client_free(e2e_connect(&F.d)); /* the first one still serves */
    e2e_close(&F);
}

Test(daemon, sigterm_stops_cleanly, .timeout = 120)
{
    e2e_open_with(&F, basic, NULL);
    cr_assert_eq(kill(F.d.pid, SIGTERM), 0);
    e2e_wait_clean_exit(&F.d, 20000, "SIGTERM");
    cr_assert_null(e2e_recv(F.c, 5000), "the connection is closed");
    e2e_close(&F);
}

/* SIGTERM with a request in flight: it gets ShuttingDown within the grace period, the daemon
 * exits cleanly, killing the worker that was stuck. */
Test(daemon, sigterm_with_work_in_flight, .timeout = 120)
{
    static const char *const args[] = {"--shutdown-grace", "1", "--request-timeout", "60", NULL};
    static const char *const plugins[] = {"tp_basic", "tp_crash_loop", NULL};
    e2e_open_with(&F, plugins, args);
    e2e_send(F.c, tthp_request_new(1, "target/parse", json_pack("{s:s}", "target", "test-loop")));
    usleep(500000);
    cr_assert_eq(kill(F.d.pid, SIGTERM), 0);
    json_t *r = e2e_recv_response(F.c, 10000);
    cr_assert_not_null(r, "the in-flight request got no answer");
    cr_assert_eq(e2e_error_code(r), TTHP_SHUTTING_DOWN);
    json_decref(r);
    e2e_wait_clean_exit(&F.d, 15000, "SIGTERM (within the grace period)");
    e2e_close(&F);
}

Test(daemon, idle_exit, .timeout = 120)
{
    static const char *const args[] = {"--idle-exit", "1", NULL};
    e2e_open_with(&F, basic, args);
    /* a client keeps it alive */
    usleep(1500000);
    int status;
    cr_assert_eq(waitpid(F.d.pid, &status, WNOHANG), 0, "tthd exited while a client was connected");
    e2e_client_free(F.c);
    F.c = NULL;
    e2e_wait_clean_exit(&F.d, 10000, "being idle");
    e2e_close(&F);
}

/* Does process pid map a file whose path holds needle? */
static int maps_file(pid_t pid, const char *needle)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot read %s", path);
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

/* tthd runs no plugin code and links no LLVM, so it starts in milliseconds (docs/tthctl.md);
 * its workers, which run the compile flow, map libLLVM (the check sees it where it is) */
Test(daemon, links_no_llvm_its_workers_do, .timeout = 120)
{
    e2e_open_with(&F, basic, NULL);
    pid_t w[4];
    int n = 0;
    for (int i = 0; i < 200 && (n = e2e_worker_pids(&F.d, w, 4)) == 0; i++)
        usleep(50000);
    cr_assert(n > 0, "no worker started");
    int mapped = 0;
    for (int i = 0; i < 200 && !(mapped = maps_file(w[0], "libLLVM")); i++)
        usleep(50000);
    cr_assert(mapped, "the worker %d maps no libLLVM", (int)w[0]);
    cr_assert(!maps_file(F.d.pid, "libLLVM"), "tthd maps libLLVM");
    e2e_close(&F);
}

Test(daemon, other_uid_is_refused, .timeout = 120)
{
    if (geteuid() != 0)
        cr_skip_test("needs root to act as another user");
    struct passwd *nobody = getpwnam("nobody");
    uid_t uid = nobody ? nobody->pw_uid : 65534;
    gid_t gid = nobody ? nobody->pw_gid : 65534;
    e2e_open_with(&F, basic, NULL);
    /* open the way on purpose, so that only tthd's own check stands in between */
    char dir[512];
    run_dir(&F.d, dir, sizeof dir, 0);
    cr_assert_eq(chmod(dir, 0755), 0);
    cr_assert_eq(chmod(F.d.sock, 0666), 0);
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
            snprintf(sa.sun_path, sizeof sa.sun_path, "%s", F.d.sock);
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
    json_t *r = e2e_call(F.c, 1, "status", NULL);
    cr_assert(e2e_result_int(r, "requests", "failed") >= 1, "the refusal is counted");
    json_decref(r);
    e2e_close(&F);
}

Test(daemon, systemd_socket_activation, .timeout = 120)
{
    e2e_prepare(&F.d);
    snprintf(F.d.sock, sizeof F.d.sock, "%s/activated.sock", F.d.root);
    e2e_put_plugin(F.d.plugins, "tp_basic", NULL);
    int lfd = bound_socket(F.d.sock);
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
        int fd = open(F.d.log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        dup2(fd, 2);
        char sock_unused[512];
        snprintf(sock_unused, sizeof sock_unused, "%s/unused.sock", F.d.root);
        execl(tthd, tthd, "--socket", sock_unused, "--plugins-dir", F.d.plugins, "--cache-dir", F.d.cache, "--workers",
              "1", "--verbose", (char *)NULL);
        _exit(127);
    }
    close(lfd);
    F.d.pid = pid;
    F.c = e2e_connect(&F.d);
    json_t *r = e2e_call(F.c, 1, "targets/list", NULL);
    cr_assert_eq(e2e_error_code(r), 0);
    json_decref(r);
    r = e2e_call(F.c, 2, "shutdown", NULL);
    cr_assert(json_is_null(json_object_get(r, "result")));
    json_decref(r);
    e2e_client_free(F.c);
    F.c = NULL;
    int status;
    cr_assert(e2e_wait_exit(pid, 20000, &status));
    F.d.pid = 0;
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    struct stat st;
    cr_assert_eq(lstat(F.d.sock, &st), 0, "an activated daemon leaves systemd's socket alone");
    char unused[512];
    snprintf(unused, sizeof unused, "%s/unused.sock", F.d.root);
    cr_assert_neq(lstat(unused, &st), 0, "an activated daemon binds nothing itself");
    e2e_close(&F);
}

/* Without a model the compile flow cannot succeed, but the cache lookup happens first:
 * misses are counted for each compile whose target parsed. With a compile flow in the build and
 * a real model, the second identical compile is a hit. */
Test(daemon, cache_accounting, .timeout = 300)
{
    e2e_open_with(&F, basic, NULL);
    static const uint8_t junk[] = "this is not an ONNX model";
    for (int i = 0; i < 2; i++) {
        json_int_t id = 10 + i;
        e2e_send(F.c, tthp_request_new(id, "compile", json_pack("{s:{s:s, s:i}, s:s}", "model", "name", "junk", "size",
                                                                (int)sizeof junk, "target", "test-basic")));
        e2e_upload(F.c, id, junk, sizeof junk, 10);
        json_t *r = NULL;
        while ((r = e2e_recv(F.c, 120000)) && json_object_get(r, "method"))
            json_decref(r);
        cr_assert_not_null(r, "no answer to compile");
        int code = e2e_error_code(r);
        cr_assert(code <= -32001 && code >= -32099, "junk model: expected a libtth error, got %d", code);
        cr_assert_not_null(json_object_get(json_object_get(json_object_get(r, "error"), "data"), "diagnostics"));
        json_decref(r);
    }
    json_t *r = e2e_call(F.c, 20, "status", NULL);
    cr_assert_eq(e2e_result_int(r, "cache", "misses"), 2, "each compile of a parsed target is a cache lookup");
    cr_assert_eq(e2e_result_int(r, "cache", "hits"), 0, "failures are never cached");
    cr_assert_eq(e2e_result_int(r, "cache", "entries"), 0);
    json_decref(r);
    e2e_close(&F);
}

/* A socket given on the command line must sit in a directory no other user can change: one
 * writable by others (without the sticky bit) or, as root, one owned by another user, and tthd
 * refuses to start, saying why; a sticky world-writable one, as /tmp, is accepted. */
Test(daemon, socket_directory_others_can_change_is_refused, .timeout = 120)
{
    e2e_prepare(&F.d);
    char dir[512];
    run_dir(&F.d, dir, sizeof dir, 0700);
    cr_assert_eq(chmod(dir, 0777), 0);
    e2e_expect_refusal(&F.d, NULL, -1, "is writable by group or others without the sticky bit");
    cr_assert_neq(access(F.d.sock, F_OK), 0, "no socket was made");
    if (geteuid() == 0) {
        struct passwd *nobody = getpwnam("nobody");
        cr_assert_eq(chmod(dir, 0755), 0);
        cr_assert_eq(chown(dir, nobody ? nobody->pw_uid : 65534, nobody ? nobody->pw_gid : 65534), 0);
        e2e_expect_refusal(&F.d, NULL, -1, "belongs to uid"); /* the refusal names the owner */
        cr_assert_eq(chown(dir, 0, 0), 0);
    }
    cr_assert_eq(chmod(dir, 01777), 0);
    e2e_up(&F, basic, NULL);
    e2e_close(&F);
}

/* A connection that holds no request and sends nothing for --connection-idle-timeout is closed;
 * one that keeps talking is not. */
Test(daemon, idle_connections_are_closed, .timeout = 120)
{
    static const char *const args[] = {"--connection-idle-timeout", "1", NULL};
    e2e_open_with(&F, basic, args);
    e2e_client *quiet = F.c, *busy = e2e_connect(&F.d);
    for (int i = 0; i < 6; i++) {
        usleep(400000);
        json_t *r = e2e_call(busy, 10 + i, "status", NULL);
        cr_assert_not_null(r, "a client that keeps talking was disconnected");
        json_decref(r);
    }
    cr_assert_null(e2e_recv(quiet, 3000), "the idle connection is still open after 2.4 s");
    cr_assert(e2e_log_count(&F.d, "idle for"), "the close is logged");
    e2e_client_free(busy);
    e2e_close(&F);
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

/* Stop f's daemon and remove its directories, the small disk first */
static void close_on_small_disk(e2e_fixture *f)
{
    char code[256];
    snprintf(code, sizeof code, "%s/code", f->d.cache);
    e2e_down(f);
    cr_assert_eq(umount2(code, MNT_DETACH), 0);
    cr_assert_eq(umount2(f->d.cache, MNT_DETACH), 0);
    e2e_close(f);
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

static const char *const llvm_targets[] = {"llvm", "llvm -opt-level=0", "llvm -opt-level=1", "llvm -opt-level=2",
                                           "llvm -num-cores=1"};

/* Compile i (0..4: llvm_targets[i]) of f's model, whose client takes the cache file (so the
 * worker writes the entry itself, asking for room first); asserts it succeeded; *by_file: it was
 * answered by file. Returns the status after it, once no write is in flight (prev freed). */
static json_t *compile_file_delivery(e2e_fixture *f, int i, json_t *prev, int *by_file)
{
    json_decref(prev);
    json_int_t id = 10 * (i + 1);
    const char *target = llvm_targets[i];
    json_t *params = json_pack("{s:{s:s, s:I}, s:s, s:s}", "model", "name", "digits", "size", (json_int_t)f->len,
                               "target", target, "delivery", "file");
    e2e_send(f->c, tthp_request_new(id, "compile", params));
    e2e_upload(f->c, id, f->model, f->len, 65536);
    json_t *r = e2e_recv_response(f->c, 240000);
    cr_assert_not_null(r, "no answer to compile for '%s'", target);
    cr_assert_eq(e2e_error_code(r), 0, "compile for '%s' failed: %s", target, e2e_err_message(r));
    /* the worker wrote the entry file itself: the answer names it, nothing was streamed */
    *by_file = json_object_get(json_object_get(json_object_get(r, "result"), "artifact"), "file") != NULL;
    json_decref(r);
    usleep(200000); /* a store the daemon writes itself ends in the thread pool after the answer */
    return e2e_call(f->c, id + 1000, "status", NULL);
}

/* The size of digits' entry for `llvm` (measured once, on an ordinary directory) */
static uint64_t digits_entry_size(void)
{
    static const char *const args[] = {"--workers", "1", NULL};
    e2e_fixture m = {0};
    int by_file;
    e2e_open(&m, NULL, args);
    json_t *st = compile_file_delivery(&m, 0, NULL, &by_file);
    uint64_t size = (uint64_t)e2e_result_int(st, "cache", "bytes");
    json_decref(st);
    e2e_close(&m);
    cr_assert(size > 16384, "digits' entry is %llu bytes", (unsigned long long)size);
    return size;
}

/* f: a daemon with one worker whose cache directory is a disk with room for three of digits'
 * `llvm` entries (and a bit), with a bound of three and a half entries when `bounded`; a client
 * talking to it. Skips the test when this process may not mount. */
static void open_on_small_disk(e2e_fixture *f, int bounded)
{
    uint64_t entry = digits_entry_size();
    e2e_prepare(&f->d);
    if (small_disk(&f->d, (3 * (pages_of(entry) + 1) + 2) * 4096) != 0) {
        e2e_close(f);
        cr_skip_test("mounting a tmpfs needs root");
    }
    e2e_put_real_plugins(&f->d);
    char bound[32];
    snprintf(bound, sizeof bound, "%llu", (unsigned long long)(3 * entry + entry / 2));
    const char *args[] = {"--workers", "1", bounded ? "--cache-max-bytes" : NULL, bound, NULL};
    e2e_up(f, NULL, args);
}

/* Assert the status st counts the entry files in f's cache directory (their number and bytes)
 * and storeErrors store errors; the number of files */
static int expect_counted(const e2e_fixture *f, const json_t *st, json_int_t store_errors)
{
    uint64_t bytes;
    int files = entry_files(&f->d, &bytes);
    cr_assert_eq(e2e_result_int(st, "cache", "entries"), files, "status counts %lld entries, %d files are there",
                 (long long)e2e_result_int(st, "cache", "entries"), files);
    cr_assert_eq((uint64_t)e2e_result_int(st, "cache", "bytes"), bytes);
    cr_assert_eq(e2e_result_int(st, "cache", "storeErrors"), store_errors, "store errors");
    return files;
}

/* A disk with room for three entries: compiles go on when a store fails for want of space, and
 * status counts the entries whose files are there, not those it could not write */
Test(daemon, a_full_disk_is_counted_as_stored, .timeout = 300)
{
    open_on_small_disk(&F, 0);
    json_t *st = NULL;
    int by_file;
    for (int i = 0; i < 5; i++)
        st = compile_file_delivery(&F, i, st, &by_file);
    int files = expect_counted(&F, st, 2);
    cr_assert_eq(files, 3, "%d entry files on a disk with room for three", files);
    json_decref(st);
    close_on_small_disk(&F);
}

/* A bound of three and a half entries on a disk of three and a bit: each new entry's file is
 * written after older ones made room, so no store runs out of space (before, the worker wrote the
 * new file first and the directory passed its bound by one entry) */
Test(daemon, the_cache_bound_holds_while_an_entry_is_written, .timeout = 300)
{
    open_on_small_disk(&F, 1);
    json_t *st = NULL;
    for (int i = 0; i < 5; i++) {
        int by_file;
        st = compile_file_delivery(&F, i, st, &by_file);
        cr_assert(by_file, "compile %d: the worker could not write its entry file (no room)", i + 1);
        int files = expect_counted(&F, st, 0); /* no store ran out of space */
        cr_assert_eq(files, i < 3 ? i + 1 : 3, "compile %d: %d entry files", i + 1, files);
    }
    json_decref(st);
    close_on_small_disk(&F);
}
