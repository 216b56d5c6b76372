/* tthctl against a real tthd from the build tree: every command's output and exit status.
 *
 * Each test gets a temporary directory holding the socket, the cache and the daemon's log, and
 * XDG_RUNTIME_DIR / XDG_CACHE_HOME pointing into it, so nothing outside it is touched. The daemon
 * a test started (directly, or through tthctl's auto-start) is stopped with `tthctl stop` in the
 * teardown, and killed if it does not go. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <pty.h>

#include <archive.h>
#include <archive_entry.h>
#include <jansson.h>

#include <tthproto/jsonrpc.h>
#include <tthrt.h>

#include "daemon_fixture.h"
#include "redis_server.h"

/* ---- the fixture ---- */

static struct {
    char dir[256];      /* the test's temporary directory */
    char sock[320];     /* its daemon's socket */
    char cache[320];    /* its daemon's cache */
    pid_t daemon;       /* the tthd this test started directly, or 0 */
    pid_t other[4];     /* daemons started through tthctl (not our children) */
    char other_sock[4][320];
    int n_other;
} F;

typedef struct proc_out {
    int status;         /* exit status; 128+N when killed by signal N */
    char *out, *err;    /* what it printed (malloc'd, NUL-terminated) */
} proc_out;

static const char *tthctl_path(void)
{
    static char buf[1024];
    return test_build_path("client/tthctl", buf, sizeof buf);
}





static const char *tthd_path(void)
{
    static char buf[1024];
    return test_build_path("daemon/tthd", buf, sizeof buf);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return strdup("");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    cr_assert_not_null(buf);
    size_t got = fread(buf, 1, (size_t)n, f);
    buf[got] = '\0';
    fclose(f);
    return buf;
}

static int write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int rc = fputs(text, f) < 0;
    return fclose(f) != 0 || rc ? -1 : 0;
}

static void proc_out_free(proc_out *p)
{
    free(p->out);
    free(p->err);
    memset(p, 0, sizeof *p);
}

/* Run argv (NULL-terminated) with stdout/stderr captured; waits at most 120 s. */
static void run_argv(proc_out *po, char *const argv[])
{
    char out_path[400], err_path[400];
    snprintf(out_path, sizeof out_path, "%s/.stdout", F.dir);
    snprintf(err_path, sizeof err_path, "%s/.stderr", F.dir);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int n = open("/dev/null", O_RDONLY);
        if (o < 0 || e < 0 || n < 0)
            _exit(126);
        dup2(n, 0);
        dup2(o, 1);
        dup2(e, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    int status = 0;
    for (int waited = 0;; waited += 10) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (waited > 120000) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            break;
        }
        usleep(10000);
    }
    po->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    po->out = slurp(out_path);
    po->err = slurp(err_path);
}

/* tthctl --socket SOCK (unless NULL) with args (up to the first NULL, at most 16). */
static void ctl_argv(proc_out *po, const char *sock, const char *const *args)
{
    char *argv[64];
    int n = 0;
    argv[n++] = (char *)tthctl_path();
    if (sock) {
        argv[n++] = "--socket";
        argv[n++] = (char *)sock;
    }
    for (int i = 0; i < 16 && args[i]; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    run_argv(po, argv);
}
/* tthctl --socket SOCK ARGS... */
#define ctl_on(po, sock, ...) ctl_argv(po, sock, (const char *const[]){__VA_ARGS__, NULL})
#define ctl(po, ...) ctl_argv(po, F.sock, (const char *const[]){__VA_ARGS__, NULL})

static int connectable(const char *sock)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%.100s", sock);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    int ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

/* Start tthd directly on F.sock with F.cache (and a plugins directory when given). */
/* Start tthd directly on F.sock with F.cache and the extra arguments (NULL-terminated list). */
static void start_daemon_args(const char *const *extra)
{
    char log[400];
    snprintf(log, sizeof log, "%s/tthd.log", F.dir);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        char *argv[32];
        int n = 0;
        const char *fixed[] = {tthd_path(), "--socket", F.sock, "--cache-dir", F.cache, "--idle-exit", "300",
                               "--workers", "2"};
        for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
            argv[n++] = (char *)fixed[i];
        for (size_t i = 0; extra && extra[i] && n < 31; i++)
            argv[n++] = (char *)extra[i];
        argv[n] = NULL;
        execv(tthd_path(), argv);
        _exit(127);
    }
    F.daemon = pid;
    for (int waited = 0; waited < 20000; waited += 20) {
        if (connectable(F.sock))
            return;
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            F.daemon = 0;
            char *l = slurp(log);
            cr_assert_fail("tthd exited before it was ready (status %d):\n%s", status, l);
        }
        usleep(20000);
    }
    cr_assert_fail("tthd did not listen on %s within 20 s", F.sock);
}

/* Start tthd with the build's plugins, or with plugins_dir. */
static void start_daemon(const char *plugins_dir)
{
    const char *extra[] = {"--plugins-dir", plugins_dir, NULL};
    start_daemon_args(plugins_dir ? extra : NULL);
}

static int process_gone(pid_t pid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    return p && (p[2] == 'Z' || p[2] == 'X');
}

/* Remember a daemon tthctl started, so that teardown stops it even if the test fails. */
static void adopt_daemon(const char *sock, pid_t pid)
{
    if (F.n_other < 4) {
        F.other[F.n_other] = pid;
        snprintf(F.other_sock[F.n_other], sizeof F.other_sock[0], "%s", sock);
        F.n_other++;
    }
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void setup(void)
{
    snprintf(F.dir, sizeof F.dir, "/tmp/tthctl-test-XXXXXX");
    cr_assert_not_null(mkdtemp(F.dir));
    snprintf(F.sock, sizeof F.sock, "%s/tthd.sock", F.dir);
    snprintf(F.cache, sizeof F.cache, "%s/cache", F.dir);
    F.daemon = 0;
    F.n_other = 0;
    char run[400];
    snprintf(run, sizeof run, "%s/run", F.dir);
    mkdir(run, 0700);
    setenv("XDG_RUNTIME_DIR", run, 1);
    setenv("XDG_CACHE_HOME", F.dir, 1);
}

static void stop_pid(const char *sock, pid_t pid, int child)
{
    proc_out po = {0};
    ctl_on(&po, sock, "stop");
    proc_out_free(&po);
    for (int waited = 0; waited < 10000; waited += 20) {
        if (child) {
            int status;
            if (waitpid(pid, &status, WNOHANG) == pid)
                return;
        } else if (process_gone(pid)) {
            return;
        }
        usleep(20000);
    }
    kill(pid, SIGKILL);
    if (child)
        waitpid(pid, NULL, 0);
}

static void teardown(void)
{
    if (F.daemon > 0)
        stop_pid(F.sock, F.daemon, 1);
    for (int i = 0; i < F.n_other; i++)
        if (F.other[i] > 0 && !process_gone(F.other[i]))
            stop_pid(F.other_sock[i], F.other[i], 0);
    nftw(F.dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(client, .init = setup, .fini = teardown, .timeout = 300);

/* Parse a command's stdout as JSON. */
static json_t *out_json(const proc_out *po)
{
    json_error_t je;
    json_t *j = json_loads(po->out, 0, &je);
    cr_assert_not_null(j, "stdout is not JSON (%s):\n%s", je.text, po->out);
    return j;
}

#define assert_status(po, want)                                                                      \
    cr_assert_eq((po)->status, (want), "exit status %d, expected %d\nstdout:\n%s\nstderr:\n%s", (po)->status, \
                 (want), (po)->out, (po)->err)
#define assert_has(text, needle) cr_assert_not_null(strstr((text), (needle)), "'%s' not in:\n%s", (needle), (text))
#define assert_lacks(text, needle) cr_assert_null(strstr((text), (needle)), "'%s' in:\n%s", (needle), (text))

/* A tthctl call and what it must do: tests list them in tables (expect_ctl) */
typedef struct ctl_case {
    const char *args[16];  /* its arguments, up to the first NULL */
    int status;            /* its exit status, or CTL_FAILS: any but 0 */
    const char *out[12];   /* text its stdout holds */
    const char *err[6];    /* text its stderr holds */
    const char *out_lacks; /* text its stdout does not hold (NULL: none) */
    const char *err_lacks; /* likewise for stderr */
    const char *sock;      /* its --socket (NULL: F.sock) */
} ctl_case;
#define CTL_FAILS (-1)

/* Run the n cases in order, asserting what each must do. */
static void ctl_cases(const ctl_case *cases, size_t n)
{
    for (const ctl_case *k = cases; k < cases + n; k++) {
        proc_out po = {0};
        ctl_argv(&po, k->sock ? k->sock : F.sock, k->args);
        if (k->status == CTL_FAILS)
            cr_assert_neq(po.status, 0, "tthctl %s succeeded:\n%s", k->args[0], po.out);
        else
            assert_status(&po, k->status);
        for (size_t i = 0; i < sizeof k->out / sizeof k->out[0] && k->out[i]; i++)
            assert_has(po.out, k->out[i]);
        for (size_t i = 0; i < sizeof k->err / sizeof k->err[0] && k->err[i]; i++)
            assert_has(po.err, k->err[i]);
        if (k->out_lacks)
            assert_lacks(po.out, k->out_lacks);
        if (k->err_lacks)
            assert_lacks(po.err, k->err_lacks);
        proc_out_free(&po);
    }
}
#define expect_ctl(...) \
    ctl_cases((const ctl_case[]){__VA_ARGS__}, sizeof((const ctl_case[]){__VA_ARGS__}) / sizeof(ctl_case))
/* tthctl ARGS... must succeed */
#define ctl_ok(...) expect_ctl({.args = {__VA_ARGS__}})

/* tthctl ARGS... (up to the first NULL) must succeed; its stdout as JSON (new reference). */
static json_t *ctl_json_argv(const char *const *args)
{
    proc_out po = {0};
    ctl_argv(&po, F.sock, args);
    assert_status(&po, 0);
    json_t *j = out_json(&po);
    proc_out_free(&po);
    return j;
}
#define ctl_json(...) ctl_json_argv((const char *const[]){__VA_ARGS__, NULL})

/* ---- without a daemon ---- */

Test(client, help_lists_commands_and_exit_codes)
{
    expect_ctl({.args = {"--help"},
                .out = {"compile", "target parse", "target recent", "targets", "tags", "plugins", "status", "cache clear", "stop", "run",
                        "Exit status", "3  the daemon is unreachable"}},
               {.args = {"compile", "--help"}, .out = {"--target T", "--dump-ir STAGE"}});
}

Test(client, usage_errors_exit_2_with_the_nearest_name)
{
    struct {
        const char *args[5];
        const char *want;
    } cases[] = {
        {{"comple"}, "did you mean 'compile'?"},
        {{"status", "--jsn"}, "did you mean '--json'?"},
        {{"target", "pars", "llvm"}, "did you mean 'parse'?"},
        {{"compile"}, "'compile' needs MODEL"},
        {{"compile", "model.onnx"}, "compile needs a target"},
        {{"status", "extra"}, "'status' takes no arguments"},
        {{"status", "--target", "llvm"}, "option '--target' does not apply to 'status'"},
        {{"run", "a.tar", "--repeat=0"}, "--repeat '0' is not a count"},
        {{"run", "a.tar", "--input", "x.npy"}, "--input 'x.npy' is not NAME=FILE"},
        {{"compile", "m.onnx", "--target", "llvm", "--name=9x"}, "is not a C identifier"},
        {{"cache"}, "'cache' needs a sub-command"},
        {{"compile", "m.onnx", "--target"}, "option '--target' needs a value"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        proc_out po = {0};
        const char *const *a = cases[i].args;
        ctl(&po, "--no-start", a[0], a[1], a[2], a[3], a[4]);
        assert_status(&po, 2);
        assert_has(po.err, cases[i].want);
        cr_assert(!connectable(F.sock), "a usage error started a daemon");
        proc_out_free(&po);
    }
}

Test(client, unreachable_socket_exits_3)
{
    /* a socket whose directory cannot be created: the auto-start fails too */
    char bad[400];
    snprintf(bad, sizeof bad, "%s/missing/deeper/tthd.sock", F.dir);
    expect_ctl({.args = {"--no-start", "status"}, .status = 3, .err = {"cannot connect to tthd", F.sock}},
               {.args = {"status"}, .status = 3, .err = {"cannot create the socket directory"}, .sock = bad},
               /* stop never starts a daemon, and nothing to stop is not a failure */
               {.args = {"stop"}, .out = {"not running"}});
    cr_assert(!connectable(F.sock));
}

/* `tthctl status --json` on F.sock: the daemon's pid */
static pid_t daemon_pid(const char *no_start)
{
    json_t *st = ctl_json("status", "--json", no_start);
    pid_t pid = (pid_t)json_integer_value(json_object_get(st, "pid"));
    cr_assert_str_eq(json_string_value(json_object_get(st, "socket")), F.sock);
    json_decref(st);
    return pid;
}

Test(client, auto_start_then_stop)
{
    pid_t pid = daemon_pid(NULL);
    cr_assert_gt(pid, 0);
    adopt_daemon(F.sock, pid);

    /* the daemon's log is beside its socket, and the next command reuses the daemon */
    char log[400];
    snprintf(log, sizeof log, "%s/tthd.log", F.dir);
    cr_assert_eq(access(log, F_OK), 0, "no %s", log);
    cr_assert_eq(daemon_pid("--no-start"), pid);

    expect_ctl({.args = {"stop"}, .out = {"stopped tthd"}});
    cr_assert(process_gone(pid), "tthd %d still runs after stop", (int)pid);
    cr_assert(!connectable(F.sock));
}

/* How many live tthd processes serve this socket (their command line names it)? */
static int daemons_on(const char *sock)
{
    int n = 0;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q "
                              "'^[^ ]*/tthd --socket %s ' && grep -qv '^State:.*Z' $p/status && echo x; done | wc -l",
             sock);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    if (fscanf(f, "%d", &n) != 1)
        n = -1;
    pclose(f);
    return n;
}

Test(client, concurrent_auto_start_starts_one_daemon)
{
    enum { N = 6 };
    pid_t kids[N];
    for (int i = 0; i < N; i++) {
        kids[i] = fork();
        cr_assert_geq(kids[i], 0);
        if (kids[i] == 0) {
            char path[400];
            snprintf(path, sizeof path, "%s/.out%d", F.dir, i);
            int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
            dup2(fd, 1);
            snprintf(path, sizeof path, "%s/.err%d", F.dir, i);
            fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
            dup2(fd, 2);
            execl(tthctl_path(), tthctl_path(), "--socket", F.sock, "status", "--json", (char *)NULL);
            _exit(127);
        }
    }
    json_int_t pid = 0;
    for (int i = 0; i < N; i++) {
        int status;
        waitpid(kids[i], &status, 0);
        char path[400];
        snprintf(path, sizeof path, "%s/.out%d", F.dir, i);
        proc_out po = {.out = slurp(path)};
        snprintf(path, sizeof path, "%s/.err%d", F.dir, i);
        po.err = slurp(path);
        po.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
        assert_status(&po, 0);
        json_t *st = out_json(&po);
        json_int_t p = json_integer_value(json_object_get(st, "pid"));
        json_decref(st);
        if (!pid) {
            pid = p;
            adopt_daemon(F.sock, (pid_t)p);
        }
        cr_assert_eq(p, pid, "two daemons answered: %lld and %lld", (long long)pid, (long long)p);
        proc_out_free(&po);
    }
    cr_assert_eq(daemons_on(F.sock), 1, "more than one tthd was left running on %s", F.sock);
    ctl_ok("stop");
    cr_assert_eq(daemons_on(F.sock), 0);
}

/* ---- with a daemon ---- */

Test(client, status_human_and_json)
{
    start_daemon(NULL);
    expect_ctl({.args = {"status"}, .out = {"tthd 0.1.0 (protocol 1.0)", F.cache, "workers:", "remote cache: none"}});
    json_t *st = ctl_json("status", "--json");
    cr_assert_eq(json_integer_value(json_object_get(st, "pid")), F.daemon);
    cr_assert_str_eq(json_string_value(json_object_get(st, "cacheDir")), F.cache);
    cr_assert(json_is_object(json_object_get(st, "workers")));
    cr_assert(json_is_null(json_object_get(st, "remoteCache")));
    json_decref(st);
}

Test(client, targets_tags_plugins)
{
    start_daemon(NULL);
    json_t *j = ctl_json("targets", "--json");
    json_t *kinds = json_object_get(j, "kinds");
    cr_assert(json_is_array(kinds));
    int have_llvm = 0;
    size_t i;
    json_t *k;
    json_array_foreach(kinds, i, k)
        have_llvm |= strcmp(json_string_value(json_object_get(k, "kind")), "llvm") == 0;
    cr_assert(have_llvm, "no 'llvm' kind among the targets");
    json_decref(j);
    expect_ctl({.args = {"targets"}, .out = {"llvm (plugin llvm-cpu)", "-mtriple=<string>"}},
               {.args = {"tags"}, .out = {"arm/cortex-m55", "kind c"}});
    j = ctl_json("tags", "--json");
    cr_assert(json_is_array(json_object_get(j, "tags")));
    json_decref(j);
    j = ctl_json("plugins", "--json");
    cr_assert(json_array_size(json_object_get(j, "plugins")) >= 1);
    cr_assert(json_is_array(json_object_get(j, "errors")));
    json_decref(j);
    expect_ctl({.args = {"plugins"}, .out = {"llvm-cpu"}});
}

/* F.dir/sub, made */
static const char *sub_dir(const char *sub, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", F.dir, sub);
    cr_assert_eq(mkdir(buf, 0700), 0, "cannot make %s", buf);
    return buf;
}

Test(client, plugins_shows_load_errors)
{
    /* a plugins directory with one good test plugin and one built for another ABI */
    char dir[400];
    sub_dir("plugins", dir, sizeof dir);
    test_put_plugin(dir, "tp_basic", NULL);
    test_put_plugin(dir, "tp_abi", NULL);
    start_daemon(dir);
    expect_ctl({.args = {"plugins"}, .out = {"1 loaded, 1 refused", "refused", "tp_abi.so: EABI"}});
}

/* The plugins path: $TTH_PLUGINS_PATH reaches the daemon tthctl starts; its directories are
 * searched in order (a kind in the first shadows the same kind in the second, which is listed as
 * refused), shown by status; a value other than the running daemon's gets a note. */
Test(client, plugins_path_from_the_environment)
{
    char a[400], b[400], path[900];
    sub_dir("first", a, sizeof a);
    sub_dir("second", b, sizeof b);
    test_put_plugin(a, "tp_basic", NULL);
    test_put_plugin(b, "tp_hot", NULL);
    test_put_plugin(b, "tp_dup", NULL);
    snprintf(path, sizeof path, "%s:%s", a, b);
    setenv("TTH_PLUGINS_PATH", path, 1);
    json_t *st = ctl_json("status", "--json");
    adopt_daemon(F.sock, (pid_t)json_integer_value(json_object_get(st, "pid")));
    const json_t *pp = json_object_get(st, "pluginsPath");
    cr_assert_eq(json_array_size(pp), 2, "the daemon's plugins path has %zu directories", json_array_size(pp));
    cr_assert_str_eq(json_string_value(json_array_get(pp, 0)), a);
    cr_assert_str_eq(json_string_value(json_array_get(pp, 1)), b);
    json_decref(st);
    /* no note while the paths agree */
    expect_ctl({.args = {"status"}, .out = {a, b}, .err_lacks = "note"});

    json_t *pl = ctl_json("plugins", "--json");
    int basic_from_first = 0, hot = 0, dup_refused = 0;
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(pl, "plugins"), i, o) {
        const char *kind = json_string_value(json_object_get(o, "kind"));
        const char *file = json_string_value(json_object_get(o, "path"));
        basic_from_first |= !strcmp(kind, "test-basic") && strstr(file, "/first/") != NULL;
        hot |= !strcmp(kind, "test-hot");
    }
    json_array_foreach(json_object_get(pl, "errors"), i, o)
        dup_refused |= strstr(json_string_value(json_object_get(o, "path")), "/second/tp_dup.so") != NULL &&
                       strstr(json_string_value(json_object_get(o, "message")), "already provided") != NULL;
    char *text = json_dumps(pl, 0);
    cr_assert(basic_from_first, "test-basic does not come from the first directory: %s", text);
    cr_assert(hot, "the second directory's plugin was not loaded: %s", text);
    cr_assert(dup_refused, "the shadowed plugin is not listed as refused: %s", text);
    free(text);
    json_decref(pl);

    setenv("TTH_PLUGINS_PATH", a, 1);
    expect_ctl({.args = {"--no-start", "status"}, .err = {"is not the running daemon's plugins path"}});
    unsetenv("TTH_PLUGINS_PATH");
}

/* A daemon at its --max-connections answers the one over the limit with a "busy" error and
 * closes: tthctl reports that, never the broken pipe its first write may meet. */
Test(client, busy_daemon_is_reported_as_busy)
{
    static const char *const extra[] = {"--max-connections", "1", NULL};
    start_daemon_args(extra);
    usleep(300000); /* the daemon has seen start_daemon's probe connection close */
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%.100s", F.sock);
    int hold = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert_eq(connect(hold, (struct sockaddr *)&sa, sizeof sa), 0);
    usleep(300000); /* the daemon has accepted it: the one slot is taken */
    for (int i = 0; i < 5; i++) /* reported as busy, not as a pipe error */
        expect_ctl({.args = {"--no-start", "status"}, .status = CTL_FAILS, .err = {"tthd is busy"},
                    .err_lacks = "pipe"});
    close(hold);
}

Test(client, target_parse_good)
{
    start_daemon(NULL);
    const char *t = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72";
    expect_ctl({.args = {"target", "parse", t}, .out = {"string: llvm", "-mcpu=cortex-a72", "keys:", "arm_cpu"}});
    json_t *j = ctl_json("target", "parse", "--json", t);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "target"), "kind")), "llvm");
    cr_assert(json_is_string(json_object_get(j, "json")));
    json_decref(j);

    /* a JSON object and a tag are targets too; so is a JSON file, read by tthctl (not by the
     * daemon, whose working directory differs); text that starts like JSON but is not is a usage
     * error before any request */
    char tfile[400], arg[410];
    snprintf(tfile, sizeof tfile, "%s/t.json", F.dir);
    cr_assert_eq(write_text(tfile, "{\"kind\": \"c\", \"mcpu\": \"cortex-m4\"}"), 0);
    snprintf(arg, sizeof arg, "@%s", tfile);
    expect_ctl({.args = {"target", "parse", "{\"kind\": \"llvm\", \"mtriple\": \"aarch64-linux-gnu\"}"},
                .out = {"string: llvm", "-mtriple=aarch64-linux-gnu"}},
               {.args = {"target", "parse", "arm/cortex-m55"},
                .out = {"-tag=arm/cortex-m55", "kind:   c (plugin c-host"}},
               {.args = {"target", "parse", arg}, .out = {"string: c ", "-mcpu=cortex-m4"}},
               {.args = {"target", "parse", "@/nonexistent/t.json"}, .status = 5},
               {.args = {"target", "parse", "{\"kind\": \"llvm\","}, .status = 2,
                .err = {"the target looks like JSON but is not a JSON object"}});
}

Test(client, target_parse_typo_shows_the_hint)
{
    start_daemon(NULL);
    expect_ctl({.args = {"target", "parse", "lvm -mcpu=x"}, .status = 1,
                .err = {"tthctl: error:", "lvm", "  at: ", "hint: did you mean 'llvm'?"}});

    /* --json adds the daemon's error object on stdout */
    proc_out po = {0};
    ctl(&po, "target", "parse", "--json", "llvm -mcpux=a");
    assert_status(&po, 1);
    json_t *j = out_json(&po);
    cr_assert(json_is_integer(json_object_get(json_object_get(j, "error"), "code")));
    json_decref(j);
    assert_has(po.err, "-mcpu");
    proc_out_free(&po);
}

Test(client, stop_stops_the_daemon)
{
    start_daemon(NULL);
    expect_ctl({.args = {"stop"}, .out = {"stopped tthd"}});
    int status;
    cr_assert_eq(waitpid(F.daemon, &status, WNOHANG), F.daemon, "tthd still runs after 'tthctl stop'");
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "tthd exited with status %d", status);
    F.daemon = 0;
    cr_assert(!connectable(F.sock));
    expect_ctl({.args = {"--no-start", "status"}, .status = 3});
}

/* ---- compile, cache, run ---- */

/* examples/FILE's path (kept for the test: a table of cases may name several) */
static const char *example(const char *file)
{
    static char buf[8][1024];
    static const char *names[8];
    for (int i = 0; i < 8; i++) {
        if (!names[i]) {
            char rel[512];
            snprintf(rel, sizeof rel, "examples/%s", file);
            names[i] = file;
            return test_source_path(rel, buf[i], sizeof buf[i]);
        }
        if (strcmp(names[i], file) == 0)
            return buf[i];
    }
    cr_assert_fail("more than 8 example files in one test");
    return NULL;
}

/* The names of a tar's members, one per line. */
static char *tar_list(const char *path)
{
    struct archive *a = archive_read_new();
    archive_read_support_format_tar(a);
    cr_assert_eq(archive_read_open_filename(a, path, 65536), ARCHIVE_OK, "%s is not a tar: %s", path,
                 archive_error_string(a));
    size_t cap = 4096, len = 0;
    char *names = calloc(1, cap);
    struct archive_entry *e;
    while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
        const char *nm = archive_entry_pathname(e);
        size_t n = strlen(nm);
        if (len + n + 2 > cap) {
            cap = (len + n + 2) * 2;
            names = realloc(names, cap);
        }
        memcpy(names + len, nm, n);
        len += n;
        names[len++] = '\n';
        names[len] = '\0';
        archive_read_data_skip(a);
    }
    archive_read_free(a);
    return names;
}

/* The tar at path has a member named member */
static void assert_tar_has(const char *path, const char *member)
{
    char *names = tar_list(path), line[600];
    snprintf(line, sizeof line, "%s\n", member);
    assert_has(names, line);
    free(names);
}

/* `tthctl stop` must stop the daemon this test started (reaped) */
static void stop_daemon(void)
{
    ctl_ok("stop");
    waitpid(F.daemon, NULL, 0);
    F.daemon = 0;
}

static json_int_t cache_counter(const char *which)
{
    json_t *st = ctl_json("status", "--json");
    json_int_t v = json_integer_value(json_object_get(json_object_get(st, "cache"), which));
    json_decref(st);
    return v;
}

Test(client, compile_digits_then_cache_hit_then_clear)
{
    start_daemon(NULL);
    const char *digits = example("digits.onnx");
    char out[400];
    snprintf(out, sizeof out, "%s/digits.tar", F.dir);
    /* plain progress lines: stderr is not a terminal */
    expect_ctl({.args = {"compile", digits, "--target", "llvm", "-o", out},
                .out = {"wrote ", "cache miss", "input  image: float32 [1, 1, 8, 8]",
                        "output probabilities: float32 [1, 10]"}, .err = {"tthctl: [100%]"}});
    assert_tar_has(out, "metadata.json");
    cr_assert_eq(cache_counter("misses"), 1);
    cr_assert_eq(cache_counter("hits"), 0);

    /* the same request again: served from the cache, same bytes */
    char out2[400];
    snprintf(out2, sizeof out2, "%s/again.tar", F.dir);
    proc_out po = {0};
    ctl(&po, "compile", digits, "--target", "llvm", "-o", out2, "--json", "--quiet");
    assert_status(&po, 0);
    cr_assert_str_eq(po.err, "", "--quiet still printed:\n%s", po.err);
    json_t *r = out_json(&po);
    cr_assert_str_eq(json_string_value(json_object_get(r, "cache")), "hit");
    cr_assert_str_eq(json_string_value(json_object_get(r, "output")), out2);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(r, "metadata"), "format")), "tth-artifact");
    json_decref(r);
    proc_out_free(&po);
    cr_assert_eq(cache_counter("hits"), 1);
    char *a = slurp(out), *b = slurp(out2);
    struct stat sa, sb;
    stat(out, &sa);
    stat(out2, &sb);
    cr_assert_eq(sa.st_size, sb.st_size);
    cr_assert_eq(memcmp(a, b, (size_t)sa.st_size), 0, "a cache hit gave other bytes");
    free(a);
    free(b);

    /* the same bytes under another name are another artifact: its symbols carry the name */
    char out3[400];
    snprintf(out3, sizeof out3, "%s/other.tar", F.dir);
    r = ctl_json("compile", digits, "--target", "llvm", "--name", "other", "-o", out3, "--json", "--quiet");
    cr_assert_str_eq(json_string_value(json_object_get(r, "cache")), "miss",
        "another name was answered from the cache");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(r, "metadata"), "model")), "other");
    json_decref(r);
    assert_tar_has(out3, "include/tth_other.h");

    expect_ctl({.args = {"cache", "clear"}, .out = {"removed 2 cache entries"}});
    cr_assert_eq(cache_counter("entries"), 0);

    /* the target as given, its canonical string, the last model; three compiles used it */
    expect_ctl({.args = {"target", "recent"}, .out = {"llvm\n  llvm -", "(other), 3 compiles"}});
    r = ctl_json("target", "recent", "--json");
    cr_assert_eq(json_array_size(json_object_get(r, "targets")), 1);
    json_decref(r);
}

/* Names in dir, sorted, each followed by a newline (malloc'd). */
static char *dir_names(const char *dir)
{
    struct dirent **ents;
    int n = scandir(dir, &ents, NULL, alphasort);
    cr_assert_geq(n, 0, "cannot list %s", dir);
    size_t len = 1;
    for (int i = 0; i < n; i++)
        len += strlen(ents[i]->d_name) + 1;
    char *s = calloc(len, 1);
    for (int i = 0; i < n; i++) {
        if (strcmp(ents[i]->d_name, ".") && strcmp(ents[i]->d_name, ".."))
            strcat(strcat(s, ents[i]->d_name), "\n");
        free(ents[i]);
    }
    free(ents);
    return s;
}

/* The output takes the place of an existing file the way rename(2) does, whichever way tthctl
 * puts it there (docs/tthctl.md, "compile"): another hard link to the old file keeps the old
 * bytes, a symbolic link at the output is replaced (its target untouched), no temporary file is
 * left behind, and a directory at the output is an error that leaves it as it was. */
Test(client, compile_replaces_the_output_like_rename)
{
    start_daemon(NULL);
    char dir[400], out[500], other[500], target[500], sub[500], path[600];
    snprintf(dir, sizeof dir, "%s/outs", F.dir);
    cr_assert_eq(mkdir(dir, 0700), 0);
    snprintf(out, sizeof out, "%s/model.tar", dir);
    snprintf(other, sizeof other, "%s/old.link", dir);
    cr_assert_eq(write_text(out, "old bytes"), 0);
    cr_assert_eq(link(out, other), 0);
    for (int round = 0; round < 2; round++) { /* a miss, then a hit copied from the cache */
        ctl_ok("compile", example("digits.onnx"), "--target", "c", "-o", out);
        assert_tar_has(out, "metadata.json");
    }
    char *old = slurp(other);
    cr_assert_str_eq(old, "old bytes");
    free(old);
    char *left = dir_names(dir);
    cr_assert_str_eq(left, "model.tar\nold.link\n", "left in the output directory:\n%s", left);
    free(left);

    snprintf(target, sizeof target, "%s/elsewhere.tar", F.dir);
    cr_assert_eq(write_text(target, "kept"), 0);
    snprintf(path, sizeof path, "%s/via.tar", dir);
    cr_assert_eq(symlink(target, path), 0);
    ctl_ok("compile", example("digits.onnx"), "--target", "c", "-o", path);
    struct stat st;
    cr_assert_eq(lstat(path, &st), 0);
    cr_assert(S_ISREG(st.st_mode), "the symbolic link was not replaced");
    char *kept = slurp(target);
    cr_assert_str_eq(kept, "kept");
    free(kept);

    snprintf(sub, sizeof sub, "%s/adir", dir);
    cr_assert_eq(mkdir(sub, 0700), 0);
    snprintf(path, sizeof path, "%s/inside", sub);
    cr_assert_eq(write_text(path, "x"), 0);
    expect_ctl({.args = {"compile", example("digits.onnx"), "--target", "c", "-o", sub},
                .status = CTL_FAILS}); /* onto a directory */
    cr_assert_eq(stat(sub, &st), 0);
    cr_assert(S_ISDIR(st.st_mode));
    char *in = slurp(path);
    cr_assert_str_eq(in, "x");
    free(in);
    left = dir_names(dir);
    cr_assert_str_eq(left, "adir\nmodel.tar\nold.link\nvia.tar\n", "left in the output directory:\n%s", left);
    free(left);
}

/* A cache hit, and a miss once its entry is written, come as a file of tthd's cache, copied and
 * checked by tthctl (same bytes as the compile); --stream asks for the streamed form; a cache
 * file gone from disk falls back to the stream. */
Test(client, cache_hits_are_copied_from_the_cache_file)
{
    start_daemon(NULL);
    char out[400], hit[400];
    snprintf(out, sizeof out, "%s/first.tar", F.dir);
    snprintf(hit, sizeof hit, "%s/hit.tar", F.dir);
    json_t *r = ctl_json("compile", example("digits.onnx"), "--target", "c", "-o", hit, "-q", "--json", "--stream");
    cr_assert_str_eq(json_string_value(json_object_get(r, "cache")), "miss");
    cr_assert_geq(json_integer_value(json_object_get(json_object_get(r, "artifact"), "chunks")), 1,
                  "a miss asked for with --stream was not streamed");
    json_decref(r);
    ctl_ok("cache", "clear");

    r = ctl_json("compile", example("digits.onnx"), "--target", "c", "-o", out, "-q", "--json");
    char entry[600];
    snprintf(entry, sizeof entry, "%s/%s.tthc", F.cache, json_string_value(json_object_get(r, "key")));
    cr_assert_str_eq(json_string_value(json_object_get(r, "cache")), "miss");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(json_object_get(r, "artifact"), "file"),
                                                       "path")), entry, "a miss was not answered with its cache file");
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(r, "artifact"), "chunks")), 0);
    json_decref(r);
    cr_assert_eq(access(entry, F_OK), 0, "no cache file %s once the miss was answered", entry);
    char cmd0[1400];
    snprintf(cmd0, sizeof cmd0, "cmp -s '%s' '%s'", out, hit);
    cr_assert_eq(system(cmd0), 0, "the miss copied from its cache file differs from the streamed compile");

    r = ctl_json("compile", example("digits.onnx"), "--target", "c", "-o", hit, "-q", "--json");
    const json_t *art = json_object_get(r, "artifact");
    cr_assert_str_eq(json_string_value(json_object_get(r, "cache")), "hit");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(art, "file"), "path")), entry);
    cr_assert_eq(json_integer_value(json_object_get(art, "chunks")), 0, "a file delivery streams nothing");
    json_decref(r);
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", out, hit);
    cr_assert_eq(system(cmd), 0, "the copied artifact differs from the compiled one");

    r = ctl_json("compile", example("digits.onnx"), "--target", "c", "-o", hit, "-q", "--json", "--stream");
    cr_assert_geq(json_integer_value(json_object_get(json_object_get(r, "artifact"), "chunks")), 1);
    cr_assert_null(json_object_get(json_object_get(r, "artifact"), "file"));
    json_decref(r);

    /* the cache file damaged behind the daemon's back (its copy in memory is still good): tthctl
     * sees the bytes do not hash to the answer's XXH64 and takes the stream */
    {
        FILE *f = fopen(entry, "r+b");
        cr_assert_not_null(f);
        fseek(f, -100, SEEK_END);
        int ch = fgetc(f);
        fseek(f, -100, SEEK_END);
        fputc(ch ^ 0x40, f);
        fclose(f);
        r = ctl_json("compile", example("digits.onnx"), "--target", "c", "-o", hit, "-q", "--json");
        cr_assert_geq(json_integer_value(json_object_get(json_object_get(r, "artifact"), "chunks")), 1,
                      "a damaged cache file was not replaced by the stream");
        json_decref(r);
        cr_assert_eq(system(cmd), 0, "the artifact after a damaged cache file differs from the compiled one");
    }

    cr_assert_eq(unlink(entry), 0);
    r = ctl_json("compile", example("digits.onnx"), "--target", "c", "-o", hit, "-q", "--json");
    cr_assert_str_eq(json_string_value(json_object_get(r, "cache")), "hit");
    cr_assert_geq(json_integer_value(json_object_get(json_object_get(r, "artifact"), "chunks")), 1,
                  "the fallback to the stream did not happen");
    json_decref(r);
    cr_assert_eq(system(cmd), 0, "the streamed fallback differs from the compiled artifact");
}

/* --timings: the stages the worker ran with their seconds, the plugin hooks, the cache lookup;
 * the JSON result carries the same; a cache hit says no stage ran. */
Test(client, compile_timings)
{
    start_daemon(NULL);
    char out[400];
    snprintf(out, sizeof out, "%s/digits.tar", F.dir);
    expect_ctl({.args = {"compile", example("digits.onnx"), "--target", "llvm", "-o", out, "-q", "--timings"},
                .out = {"timings (s): ", "stage import", "stage codegen", "hook  tir_to_runtime",
                        "(llvm-cpu, 1 call)"}});
    json_t *r = ctl_json("compile", example("digits.onnx"), "--target", "llvm", "-o", out, "-q", "--json",
        "--no-cache");
    const json_t *t = json_object_get(r, "timings");
    double sum = 0;
    size_t i;
    json_t *st;
    json_array_foreach(json_object_get(t, "stages"), i, st) {
        cr_assert_geq(json_number_value(json_object_get(st, "seconds")), 0);
        sum += json_number_value(json_object_get(st, "seconds"));
    }
    cr_assert_geq(json_array_size(json_object_get(t, "stages")), 10, "%zu stages", json_array_size(json_object_get(t,
        "stages")));
    cr_assert_leq(sum, json_number_value(json_object_get(t, "total")), "the stages took longer than the request");
    cr_assert(json_is_number(json_object_get(t, "cacheLookup")));
    json_decref(r);
    expect_ctl({.args = {"compile", example("digits.onnx"), "--target", "llvm", "-o", out, "-q", "--timings"},
                .out = {"served from the cache: no stage ran"}});
}

/* The shared cache off (nothing listens at its address): every compile says so on stderr, in text
 * and with --json, whose answer carries remoteCache (docs/cache.md, "What the user sees") */
Test(client, compile_warns_when_the_shared_cache_is_off)
{
    const char *args[] = {"--cache-redis", "redis://127.0.0.1:1?retry=60&timeout=1", NULL};
    start_daemon_args(args);
    char out[400];
    snprintf(out, sizeof out, "%s/digits.tar", F.dir);
    const char *digits = example("digits.onnx");
    const char *warning = "warning: the shared cache redis://127.0.0.1:1/0 is unreachable (cannot connect";
    expect_ctl({.args = {"compile", digits, "--target", "llvm", "-o", out, "-q"}, .err = {warning, "local cache only"}},
               {.args = {"compile", digits, "--target", "c", "-o", out, "-q"}, .err = {warning, "local cache only"}});
    proc_out po = {0};
    ctl(&po, "compile", digits, "--target", "llvm", "-o", out, "--json");
    assert_status(&po, 0);
    assert_has(po.err, "warning: the shared cache");
    json_t *r = out_json(&po);
    json_t *rc = json_object_get(r, "remoteCache");
    cr_assert_str_eq(json_string_value(json_object_get(rc, "state")), "down");
    cr_assert(strstr(json_string_value(json_object_get(rc, "error")), "cannot connect"));
    json_decref(r);
    proc_out_free(&po);
}

/* TTH_MAX_REQUEST_BYTES sets the request limit of the daemon tthctl starts: an upload above it is
 * refused before it starts, with a hint naming the variable, while a model the daemon reads by
 * path is not bounded by it; a bad value stops tthd. */
Test(client, request_limit_from_the_environment)
{
    setenv("TTH_MAX_REQUEST_BYTES", "2K", 1);
    char out[400];
    snprintf(out, sizeof out, "%s/digits.tar", F.dir);
    /* the limit is on uploads: the daemon reads a model named by path (8 KiB here) itself */
    expect_ctl({.args = {"compile", example("digits.onnx"), "--target", "c", "-o", out, "-q"}},
               {.args = {"compile", example("digits.onnx"), "--target", "c", "-o", out, "-q", "--stream"},
                .status = 1, .err = {"is larger than the daemon accepts (2048)", "TTH_MAX_REQUEST_BYTES"}});
    adopt_daemon(F.sock, daemon_pid("--no-start"));
    proc_out po = {0};
    ctl(&po, "stop");
    proc_out_free(&po);
    setenv("TTH_MAX_REQUEST_BYTES", "lots", 1);
    /* tthd's reason, in tthctl's error */
    expect_ctl({.args = {"status"}, .status = CTL_FAILS, .err = {"TTH_MAX_REQUEST_BYTES='lots' is not a size"}});
    char log[400];
    snprintf(log, sizeof log, "%s/tthd.log", F.dir); /* beside the socket */
    char *l = slurp(log);
    assert_has(l, "TTH_MAX_REQUEST_BYTES='lots' is not a size");
    free(l);
    unsetenv("TTH_MAX_REQUEST_BYTES");
    /* the same for the remote cache's address, with the nearest parameter name */
    setenv("TTH_CACHE_REDIS", "redis://localhost?tll=60", 1);
    expect_ctl({.args = {"status"}, .status = 3, .err = {"unknown parameter 'tll'; did you mean 'ttl'"}});
    setenv("TTH_CACHE_REDIS", "", 1);
}

Test(client, compile_no_cache_and_dump_ir)
{
    start_daemon(NULL);
    const char *digits = example("digits.onnx");
    char out[400];
    snprintf(out, sizeof out, "%s/digits.tar", F.dir);
    /* --no-cache: compiled again although the cache has it */
    expect_ctl({.args = {"compile", digits, "--target", "llvm", "-o", out, "-q"}, .out = {"cache miss"}},
               {.args = {"compile", digits, "--target", "llvm", "-o", out, "-q", "--no-cache"},
                .out = {"cache miss"}, .err_lacks = "warning"});
    cr_assert_eq(cache_counter("hits"), 0);

    /* --dump-ir: the IR after the stage asked for (no other), printed after the summary */
    expect_ctl({.args = {"compile", digits, "--target", "llvm", "-o", out, "-q", "--dump-ir", "optimize"},
                .out = {";; ---- IR after stage 'optimize' ----\n", "fn @main(%image: float32[1, 1, 8, 8])"},
                    .out_lacks = "IR after stage 'import'"});
    json_t *r = ctl_json("compile", digits, "--target", "llvm", "-o", out, "-q", "--dump-ir", "all", "--json");
    json_t *dumps = json_object_get(r, "dumps");
    cr_assert(json_is_string(json_object_get(dumps, "import")), "no import dump");
    cr_assert(json_object_size(dumps) >= 2);
    json_decref(r);
}

Test(client, compile_within_the_daemon_limits)
{
    /* frames of at most 2 KiB: the model goes up in several chunks */
    const char *small_frames[] = {"--max-frame-bytes", "2048", NULL};
    start_daemon_args(small_frames);
    char out[400];
    snprintf(out, sizeof out, "%s/digits.tar", F.dir);
    json_t *r = ctl_json("compile", example("digits.onnx"), "--target", "llvm", "-o", out, "--json", "-q", "--stream");
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(r, "artifact"), "chunks")), 1);
    json_decref(r);
    assert_tar_has(out, "metadata.json");
    stop_daemon();

    /* an upload larger than a request may be: refused before it is sent (a model named by path,
     * which the daemon reads itself, has no such bound: client::request_limit_from_the_environment) */
    const char *small_requests[] = {"--max-request-bytes", "4096", NULL};
    start_daemon_args(small_requests);
    expect_ctl({.args = {"compile", example("digits.onnx"), "--target", "llvm", "-o", out, "--stream"}, .status = 1,
                .err = {"is larger than the daemon accepts (4096)", "set TTH_MAX_REQUEST_BYTES",
                        "or start tthd with a larger --max-request-bytes"}});
    json_t *st = ctl_json("status", "--json");
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(st, "requests"), "failed")), 0,
                 "the refused model reached the daemon");
    json_decref(st);
}

Test(client, compile_default_output_name)
{
    start_daemon(NULL);
    /* a model file name that is not a C identifier: my-digits.onnx → my_digits.tar */
    char model[400], cmd[1200];
    snprintf(model, sizeof model, "%s/my-digits.onnx", F.dir);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", example("digits.onnx"), model);
    cr_assert_eq(system(cmd), 0);
    cr_assert_eq(chdir(F.dir), 0);
    expect_ctl({.args = {"compile", model, "--target", "llvm", "-q"}, .out = {"wrote my_digits.tar"}});
    cr_assert_eq(access("my_digits.tar", R_OK), 0);
}

Test(client, compile_errors)
{
    start_daemon(NULL);
    char out[400];
    snprintf(out, sizeof out, "%s/x.tar", F.dir);
    /* a target typo: the diagnostic names the target and suggests the kind */
    expect_ctl({.args = {"compile", example("digits.onnx"), "--target", "lvm -mcpu=x", "-o", out}, .status = 1,
                .err = {"at: 'lvm' in target 'lvm -mcpu=x'", "hint: did you mean 'llvm'?"}});
    cr_assert_neq(access(out, F_OK), 0, "a failed compile wrote %s", out);

    /* not a model: the diagnostic names the model */
    expect_ctl({.args = {"compile", example("README.md"), "--target", "llvm", "-o", out}, .status = 1,
                .err = {"model '", "README.md'"}});

    /* files: a missing model, an output in a missing directory */
    expect_ctl({.args = {"compile", "/nonexistent/model.onnx", "--target", "llvm", "-o", out}, .status = 5,
                .err = {"model '/nonexistent/model.onnx'"}},
               {.args = {"compile", example("digits.onnx"), "--target", "llvm", "-o", "/nonexistent/dir/x.tar"},
                .status = 5, .err = {"file '/nonexistent/dir/x.tar'"}});
}

/* --bind: Reshape's target shape fed as a graph input compiles once that input is fixed at
 * compile time; the artifact takes only the data; the result matches the ONNX test data; another
 * value is another artifact (cache key); wrong names and types are refused with what to do. */
Test(client, compile_with_a_bound_input)
{
    start_daemon(NULL);
    const char *t = "/usr/share/libonnx-testdata/data/node/test_reshape_reordered_all_dims";
    char model[300], shape[300], data[300], want[300], art[400], outdir[400], bind[400], arg[400];
    snprintf(model, sizeof model, "%s/model.onnx", t);
    snprintf(data, sizeof data, "%s/test_data_set_0/input_0.pb", t);
    snprintf(shape, sizeof shape, "%s/test_data_set_0/input_1.pb", t);
    snprintf(want, sizeof want, "%s/test_data_set_0/output_0.pb", t);
    snprintf(art, sizeof art, "%s/r.tar", F.dir);
    snprintf(outdir, sizeof outdir, "%s/out", F.dir);
    snprintf(bind, sizeof bind, "shape=%s", shape);
    /* unbound: refused, and the hint says how to bind */
    expect_ctl({.args = {"compile", model, "--target", "c", "-o", art}, .status = 1,
                .err = {"input 'shape' is not a constant", "--bind NAME=FILE"}});
    json_t *r = ctl_json("compile", model, "--target", "c", "--shared", "-o", art, "--bind", bind, "--explain",
        "--json");
    json_t *ins = json_object_get(json_object_get(r, "metadata"), "inputs");
    cr_assert_eq(json_array_size(ins), 1, "the bound input is still an input of the artifact");
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(ins, 0), "name")), "data");
    char *diags = json_dumps(json_object_get(r, "diagnostics"), 0);
    assert_has(diags, "bind: input 'shape' is a constant (int64, 3 elements)");
    free(diags);
    json_decref(r);
    snprintf(arg, sizeof arg, "data=%s", data);
    expect_ctl({.args = {"run", art, "--input", arg, "--output-dir", outdir}, .out = {"reshaped: float32 [4, 2, 3]"}});
    char got[500];
    snprintf(got, sizeof got, "%s/reshaped.npy", outdir);
    tthrt_array a = {0}, b = {0};
    tth_diag d;
    cr_assert_eq(tthrt_npy_read(got, &a, &d), 0, "%s", d.message);
    cr_assert_eq(tthrt_pb_read(want, &b, &d), 0, "%s", d.message);
    char why[256];
    cr_assert_eq(tthrt_array_compare(&a, &b, 0, 0, why, sizeof why), 1, "%s", why);
    tthrt_array_clear(&a);
    tthrt_array_clear(&b);
    /* another value of the bound input: another artifact, not the cached one */
    char other[400], other_bind[450];
    snprintf(other, sizeof other, "%s/shape2.npy", F.dir);
    static const int64_t v[3] = {2, 12, 1};
    int64_t sh[1] = {3};
    tthrt_array o = {0};
    cr_assert_eq(tthrt_array_init(&o, TTH_I64, 1, sh, &d), 0);
    memcpy(o.data, v, sizeof v);
    cr_assert_eq(tthrt_npy_write(other, &o, &d), 0, "%s", d.message);
    tthrt_array_clear(&o);
    snprintf(other_bind, sizeof other_bind, "shape=%s", other);
    r = ctl_json("compile", model, "--target", "c", "-o", art, "--bind", other_bind, "--json");
    cr_assert_str_eq(json_string_value(json_object_get(r, "cache")), "miss");
    json_t *outs = json_object_get(json_object_get(r, "metadata"), "outputs");
    cr_assert_eq(json_integer_value(json_array_get(json_object_get(json_array_get(outs, 0), "shape"), 1)), 12);
    json_decref(r);
    /* a typo in the name, a value of another type, a malformed argument, a missing file */
    snprintf(arg, sizeof arg, "shap=%s", shape);
    expect_ctl({.args = {"compile", model, "--target", "c", "-o", art, "--bind", arg}, .status = 1,
                .err = {"the model has no input 'shap'", "did you mean 'shape'?"}});
    snprintf(arg, sizeof arg, "data=%s", shape);
    expect_ctl({.args = {"compile", model, "--target", "c", "-o", art, "--bind", arg}, .status = 1,
                .err = {"the value bound to 'data' is int64[3]; the input's element type is float32"}},
               {.args = {"compile", model, "--target", "c", "-o", art, "--bind", "shape"}, .status = 2,
                .err = {"--bind 'shape' is not NAME=FILE"}},
               {.args = {"compile", model, "--target", "c", "-o", art, "--bind", "shape=/nonexistent.npy"},
                .status = 5, .err = {"--bind shape"}});
}

/* --input-shape: a model with a dynamic batch compiles once the batch is given; the dimension
 * is named when it is not; a shape that contradicts the model or names no input is refused. */
Test(client, compile_with_an_input_shape)
{
    start_daemon(NULL);
    char model[400], art[400], cmd[1200];
    snprintf(model, sizeof model, "%s/dyn.onnx", F.dir);
    snprintf(art, sizeof art, "%s/dyn.tar", F.dir);
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import onnx; from onnx import helper as h, TensorProto as T; "
             "g = h.make_graph([h.make_node('Relu', ['x'], ['y'])], 'dyn', "
             "[h.make_tensor_value_info('x', T.FLOAT, ['batch', 3, 4])], "
             "[h.make_tensor_value_info('y', T.FLOAT, ['batch', 3, 4])]); "
             "onnx.save(h.make_model(g, opset_imports=[h.make_opsetid('', 13)]), '%s')\"", model);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    expect_ctl({.args = {"compile", model, "--target", "c", "-o", art}, .status = 1,
                .err = {"graph input 'x' has a dynamic dimension 0 ('batch')", "--input-shape x=D0,D1,..."}});
    json_t *r = ctl_json("compile", model, "--target", "c", "-o", art, "--input-shape", "x=2,3,4", "--json");
    json_t *in = json_array_get(json_object_get(json_object_get(r, "metadata"), "inputs"), 0);
    cr_assert_eq(json_integer_value(json_array_get(json_object_get(in, "shape"), 0)), 2);
    json_decref(r);
    expect_ctl({.args = {"compile", model, "--target", "c", "-o", art, "--input-shape", "x=2,5,4"}, .status = 1,
                .err = {"the shape given for 'x' has 5 in dimension 1; the model fixes it to 3"}},
               {.args = {"compile", model, "--target", "c", "-o", art, "--input-shape", "z=2,3,4"}, .status = 1,
                .err = {"the model has no input 'z'"}},
               {.args = {"compile", model, "--target", "c", "-o", art, "--input-shape", "x=2,,4"}, .status = 2,
                .err = {"--input-shape 'x=2,,4' is not NAME=D0,D1,..."}});
}

Test(client, progress_bar_on_a_terminal)
{
    start_daemon(NULL);
    char out[400], stdout_path[400];
    snprintf(out, sizeof out, "%s/digits.tar", F.dir);
    snprintf(stdout_path, sizeof stdout_path, "%s/.stdout", F.dir);
    int master;
    pid_t pid = forkpty(&master, NULL, NULL, NULL);
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        /* standard error is the terminal; standard output a file */
        int fd = open(stdout_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 1);
        execl(tthctl_path(), tthctl_path(), "--socket", F.sock, "compile", example("digits.onnx"), "--target", "llvm",
              "-o", out, (char *)NULL);
        _exit(127);
    }
    char term[65536];
    size_t len = 0;
    for (;;) {
        ssize_t n = read(master, term + len, sizeof term - 1 - len);
        if (n <= 0)
            break; /* EIO once the child is gone */
        len += (size_t)n;
    }
    term[len] = '\0';
    close(master);
    int status;
    waitpid(pid, &status, 0);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d; terminal:\n%s", status, term);
    assert_has(term, "\r\033[K[");   /* the bar redraws its line */
    assert_has(term, "] 100% ");
    assert_has(term, "##############################"); /* full */
    cr_assert_null(strstr(term, "tthctl: [100%]"), "plain progress lines on a terminal:\n%s", term);
    char *o = slurp(stdout_path);
    assert_has(o, "wrote ");
    free(o);
}

/* Compare two float32 .npy files within tol. */
static void assert_npy_close(const char *got_path, const char *want_path, double tol)
{
    tthrt_array got = {0}, want = {0};
    tth_diag d;
    tth_diag_clear(&d);
    cr_assert_eq(tthrt_npy_read(got_path, &got, &d), 0, "%s: %s", got_path, d.message);
    cr_assert_eq(tthrt_npy_read(want_path, &want, &d), 0, "%s: %s", want_path, d.message);
    cr_assert_eq(got.dtype, TTH_F32);
    cr_assert_eq(want.dtype, TTH_F32);
    cr_assert_eq(got.rank, want.rank);
    for (int i = 0; i < got.rank; i++)
        cr_assert_eq(got.shape[i], want.shape[i], "dimension %d: %lld, expected %lld", i, (long long)got.shape[i],
                     (long long)want.shape[i]);
    cr_assert_eq(got.nbytes, want.nbytes);
    const float *g = got.data, *w = want.data;
    for (size_t i = 0; i < got.nbytes / sizeof(float); i++)
        cr_assert(fabs((double)g[i] - (double)w[i]) <= tol, "element %zu: %g, numpy says %g", i, (double)g[i],
                  (double)w[i]);
    tthrt_array_clear(&got);
    tthrt_array_clear(&want);
}

Test(client, run_digits_matches_numpy)
{
    start_daemon(NULL);
    char art[400], outdir[400], input[1200], npy[500];
    snprintf(art, sizeof art, "%s/digits.tar", F.dir);
    snprintf(outdir, sizeof outdir, "%s/out", F.dir);
    ctl_ok("compile", example("digits.onnx"), "--target", "llvm", "--shared", "-o", art, "-q");
    assert_tar_has(art, "lib/digits.so");

    /* run needs no daemon: stop it first */
    stop_daemon();

    snprintf(input, sizeof input, "image=%s", example("digit_input.npy"));
    expect_ctl({.args = {"run", art, "--input", input, "--output-dir", outdir},
                .out = {"probabilities: float32 [1, 10]", "argmax: 1 "}});
    cr_assert(!connectable(F.sock), "run started a daemon");
    snprintf(npy, sizeof npy, "%s/probabilities.npy", outdir);
    assert_npy_close(npy, example("digit_expected.npy"), 1e-5);

    /* --repeat and --json */
    json_t *r = ctl_json("run", art, "--input", input, "--output-dir", outdir, "--repeat", "5", "--json");
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(r, "timing"), "runs")), 5);
    json_t *o = json_array_get(json_object_get(r, "outputs"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(o, "name")), "probabilities");
    cr_assert_eq(json_integer_value(json_object_get(o, "argmax")), 1);
    json_decref(r);
    expect_ctl({.args = {"run", art, "--input", input, "--output-dir", outdir, "--repeat", "7"},
                .out = {"latency over 7 runs: min ", "median "}});

    /* the runtime's diagnostics: wrong name, wrong shape, missing input, missing files */
    char wrong[1200];
    snprintf(wrong, sizeof wrong, "imag=%s", example("digit_input.npy"));
    expect_ctl({.args = {"run", art, "--input", wrong}, .status = 1,
                .err = {"no input 'imag'", "hint: its inputs are 'image'"}});
    snprintf(wrong, sizeof wrong, "image=%s", example("digit_expected.npy"));
    expect_ctl({.args = {"run", art, "--input", wrong}, .status = 1, .err = {"float32[1, 1, 8, 8]"}});
    /* the right shape in the wrong dtype */
    char f64[400];
    snprintf(f64, sizeof f64, "%s/image_f64.npy", F.dir);
    tthrt_array arr;
    tth_diag d;
    tth_diag_clear(&d);
    const int64_t shape[4] = {1, 1, 8, 8};
    cr_assert_eq(tthrt_array_init(&arr, TTH_F64, 4, shape, &d), 0, "%s", d.message);
    cr_assert_eq(tthrt_npy_write(f64, &arr, &d), 0, "%s", d.message);
    tthrt_array_clear(&arr);
    snprintf(wrong, sizeof wrong, "image=%s", f64);
    expect_ctl({.args = {"run", art, "--input", wrong}, .status = 1, .err = {"float64", "float32"}},
               {.args = {"run", art}, .status = 1, .err = {"input 'image'"}},
               {.args = {"run", art, "--input", "image=/nonexistent.npy"}, .status = 5, .err = {"/nonexistent.npy"}},
               {.args = {"run", "/nonexistent.tar", "--input", input}, .status = 5});
}

/* ---- against a scripted server: the client's protocol checks ---- */

typedef enum fake_mode {
    FAKE_VERSION,   /* initialize fails with ProtocolVersionMismatch */
    FAKE_OLD_MAJOR, /* initialize succeeds but says protocol 2.0 */
    FAKE_BAD_FRAME, /* a request is answered with a malformed header */
    FAKE_CLOSE,     /* the connection is closed instead of an answer */
    FAKE_BAD_SUM,   /* compile: the artifact's xxh64 in the response is wrong */
    FAKE_SHORT,     /* compile: fewer artifact bytes than the response says */
    FAKE_HANG,      /* compile: no answer until $/cancelRequest; F.dir/uploaded marks the upload done */
} fake_mode;

static void touch(const char *name)
{
    char path[400];
    snprintf(path, sizeof path, "%s/%s", F.dir, name);
    close(open(path, O_WRONLY | O_CREAT, 0600));
}

static void fake_send(int fd, json_t *msg_new)
{
    tthp_write_message_fd(fd, msg_new);
    json_decref(msg_new);
}

/* One connection, answered as the mode says. Runs in a child process. */
static void fake_serve(int fd, fake_mode mode)
{
    tthp_fd_reader r;
    tthp_fd_reader_init(&r, fd, 0);
    tthp_frame fr;
    size_t upload_left = 0;
    json_t *compile_id = NULL;
    while (tthp_fd_read_frame(&r, &fr, 10000) == 1) {
        if (fr.type == TTHP_FRAME_BINARY) {
            upload_left -= fr.len < upload_left ? fr.len : upload_left;
            if (upload_left == 0 && compile_id && mode == FAKE_HANG) {
                touch("uploaded");
                continue;
            }
            if (upload_left == 0 && compile_id) {
                static const char art[] = "not really a tar";
                size_t len = sizeof art - 1;
                size_t sent = mode == FAKE_SHORT ? len - 4 : len;
                tthp_write_chunk_fd(fd, compile_id, "artifact", 0, art, sent, mode == FAKE_SHORT ? sent : len);
                fake_send(fd, tthp_result_new(compile_id,
                                              json_pack("{s:s, s:s, s:{s:I, s:s, s:i}, s:{}, s:{}, s:[]}", "cache",
                                                        "miss", "key", "00000000000000000000000000000000",
                                                        "artifact", "size", (json_int_t)len, "xxh64",
                                                        "0123456789abcdef", "chunks", 1, "target", "metadata",
                                                        "diagnostics")));
                json_decref(compile_id);
                compile_id = NULL;
            }
            continue;
        }
        tthp_message m;
        if (tthp_message_parse(fr.data, fr.len, &m) == 0 && m.kind == TTHP_MSG_NOTIFICATION &&
            strcmp(m.method, "$/cancelRequest") == 0 && compile_id &&
            json_equal(json_object_get(m.params, "id"), compile_id)) {
            touch("cancel-received");
            fake_send(fd, tthp_error_new(compile_id, -32800, "request cancelled", NULL));
            json_decref(compile_id);
            compile_id = NULL;
        }
        if (m.kind != TTHP_MSG_REQUEST) {
            tthp_message_clear(&m);
            continue;
        }
        if (strcmp(m.method, "initialize") == 0) {
            if (mode == FAKE_VERSION)
                fake_send(fd, tthp_error_new(m.id, -32100,
                    "protocol version 1.0 is not supported; this server speaks 2.0",
                                             NULL));
            else
                fake_send(fd, tthp_result_new(m.id, json_pack("{s:s, s:{s:s, s:s}, s:[], s:{}}", "protocolVersion",
                                                              mode == FAKE_OLD_MAJOR ? "2.0" : "1.0", "serverInfo",
                                                              "name", "fake", "version", "0", "methods", "limits")));
        } else if (mode == FAKE_BAD_FRAME) {
            static const char bad[] = "Content-Length: twelve\r\n\r\n";
            write(fd, bad, sizeof bad - 1);
        } else if (mode == FAKE_CLOSE) {
            tthp_message_clear(&m);
            break;
        } else if (strcmp(m.method, "compile") == 0) {
            compile_id = json_incref(m.id);
            upload_left = (size_t)json_integer_value(json_object_get(json_object_get(m.params, "model"), "size"));
        }
        tthp_message_clear(&m);
    }
    json_decref(compile_id);
    tthp_fd_reader_free(&r);
}

/* Start a scripted server on F.sock (a child process that F.daemon tracks, killed in teardown). */
static void start_fake(fake_mode mode)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%.100s", F.sock);
    int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert_eq(bind(lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    cr_assert_eq(listen(lfd, 4), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        for (;;) {
            int fd = accept(lfd, NULL, NULL);
            if (fd < 0)
                _exit(0);
            fake_serve(fd, mode);
            close(fd);
        }
    }
    close(lfd);
    F.daemon = pid;
}

static void stop_fake(void)
{
    kill(F.daemon, SIGKILL);
    waitpid(F.daemon, NULL, 0);
    F.daemon = 0;
    unlink(F.sock);
}

/* ONNX external data (docs/tthctl.md, "ONNX external data"): a model by path whose weights are in a
 * file beside it compiles and runs to numpy's answer; the cache serves it again while the data
 * file holds the same bytes and compiles anew once it changes; uploaded (--stream) its data files
 * go up with it, and a location outside the model's directory is refused. Skipped
 * without python3's numpy and onnx. */
/* `tthctl run` of art on input x (NAME=FILE) writes npy (in outdir) close to want */
static void run_matches(const char *art, const char *x, const char *outdir, const char *npy, const char *want)
{
    ctl_ok("run", art, "--input", x, "--output-dir", outdir, "-q");
    assert_npy_close(npy, want, 1e-5);
}

/* make_external_data.py writes m.onnx and m.data (weights `which`, 1 or 2) with x.npy, y.npy into
 * F.dir; its exit status */
static int make_external_data(int which)
{
    char script[1024], cmd[2400];
    test_source_path("tests/client/make_external_data.py", script, sizeof script);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' '%s' %d", script, F.dir, which);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 1;
}

/* tthctl compile of model for llvm (a shared library) into art with the extra argument (NULL:
 * none), its JSON answer; then art run on x must give want */
static json_t *compile_and_run(const char *model, const char *art, const char *extra, const char *x,
                               const char *outdir, const char *npy, const char *want)
{
    json_t *r = ctl_json("compile", model, "--target", "llvm", "--shared", "-o", art, "--json", "-q", extra);
    run_matches(art, x, outdir, npy, want);
    return r;
}

Test(client, compile_with_external_data)
{
    char model[400], art[400], outdir[400], x[500], npy[500], want[500], data[500];
    int made = make_external_data(1);
    if (made == 77 || made == 127)
        cr_skip_test("python3 with numpy and onnx is not available");
    cr_assert_eq(made, 0, "make_external_data.py failed");
    start_daemon(NULL);
    snprintf(model, sizeof model, "%s/m.onnx", F.dir);
    snprintf(art, sizeof art, "%s/m.tar", F.dir);
    snprintf(outdir, sizeof outdir, "%s/out", F.dir);
    snprintf(x, sizeof x, "x=%s/x.npy", F.dir);
    snprintf(npy, sizeof npy, "%s/y.npy", outdir);
    snprintf(want, sizeof want, "%s/y.npy", F.dir);
    const char *cache[3] = {"miss", "hit", "miss"};
    for (int round = 0; round < 3; round++) {
        if (round == 2) /* other weights in m.data, m.onnx unchanged */
            cr_assert_eq(make_external_data(2), 0);
        json_t *r = compile_and_run(model, art, NULL, x, outdir, npy, want);
        cr_assert_str_eq(json_string_value(json_object_get(r, "cache")), cache[round], "round %d", round);
        json_t *f = json_array_get(json_object_get(json_object_get(r, "metadata"), "external_data"), 0);
        cr_assert_str_eq(json_string_value(json_object_get(f, "location")), "m.data");
        cr_assert_eq(json_integer_value(json_object_get(f, "bytes")), 16 * 8 * 4 + 16 * 4, "round %d", round);
        json_decref(r);
    }
    /* through a remote cache (docs/cache.md): served only for the external data it was built from */
    redis rd;
    redis_start(&rd, "retry=1");
    proc_out po = {0};
    ctl(&po, "stop");
    proc_out_free(&po);
    const char *with_redis[] = {"--cache-redis", rd.url, NULL};
    start_daemon_args(with_redis);
    const char *remote[3] = {"miss", "remote", "miss"};
    for (int round = 0; round < 3; round++) {
        if (round == 2) /* the first weights again: the remote entry is for the second */
            cr_assert_eq(make_external_data(1), 0);
        if (round > 0) { /* only the remote cache has it; wait until the compile before stored it */
            for (int i = 0; i < 200; i++) {
                json_t *sj = ctl_json("status", "--json");
                json_int_t stores = json_integer_value(json_object_get(json_object_get(sj, "remoteCache"), "stores"));
                json_decref(sj);
                if (stores >= 1)
                    break;
                usleep(25000);
            }
            ctl(&po, "cache", "clear");
            proc_out_free(&po);
        }
        /* round 0 compiles again, so the remote cache gets it */
        json_t *r = compile_and_run(model, art, round == 0 ? "--no-cache" : NULL, x, outdir, npy, want);
        const char *src = json_string_value(json_object_get(r, "cacheSource"));
        if (strcmp(remote[round], "remote") == 0)
            cr_assert(src && strcmp(src, "remote") == 0, "round %d: from %s", round, src ? src : "(none)");
        else
            cr_assert_str_eq(json_string_value(json_object_get(r, "cache")), "miss", "round %d", round);
        json_decref(r);
    }
    redis_stop(&rd);
    /* uploaded (--stream, as to a daemon on another machine), the data files go up with the
     * model: the entry built from the first weights serves them, fresh compiles use them, and
     * other weights beside the model are a miss */
    const char *streamed[3] = {"hit", "miss", "miss"};
    for (int round = 0; round < 3; round++) {
        if (round == 2)
            cr_assert_eq(make_external_data(2), 0);
        json_t *r = ctl_json("compile", model, "--target", "llvm", "--shared", "-o", art, "--stream", "--json", "-q",
                             round == 1 ? "--no-cache" : NULL);
        cr_assert_str_eq(json_string_value(json_object_get(r, "cache")), streamed[round], "--stream round %d", round);
        json_decref(r);
        run_matches(art, x, outdir, npy, want);
    }
    /* a data file missing beside an uploaded model is named before anything is sent; a location
     * outside the model's directory is refused, by path and uploaded */
    snprintf(data, sizeof data, "%s/m.data", F.dir);
    cr_assert_eq(unlink(data), 0);
    char bad[400];
    snprintf(bad, sizeof bad, "%s/bad.onnx", F.dir);
    const char *outside = "external data location '../m.data' is not a relative path inside the model's directory";
    expect_ctl({.args = {"compile", model, "--target", "llvm", "-o", art, "--stream"}, .status = 5,
                .err = {"m.data", "cannot open the external data file"}},
               {.args = {"compile", bad, "--target", "llvm", "-o", art}, .status = 1, .err = {outside}},
               {.args = {"compile", bad, "--target", "llvm", "-o", art, "--stream"}, .status = 1, .err = {outside}});
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    if (d)
        closedir(d);
    return n;
}

/* An upload (--stream) is written under the daemon's $TMPDIR as it arrives (docs/cache.md,
 * "Uploads") and removed with its request: after compiles that succeed, miss, hit and fail the
 * directory is empty again (an upload larger than the free space: tests/e2e, protocol/limits). */
Test(client, uploads_go_to_disk_and_away)
{
    char tmp[400], out[400], bad[400];
    snprintf(tmp, sizeof tmp, "%s/tmp", F.dir);
    cr_assert_eq(mkdir(tmp, 0700), 0);
    setenv("TMPDIR", tmp, 1);
    snprintf(out, sizeof out, "%s/digits.tar", F.dir);
    snprintf(bad, sizeof bad, "%s/bad.onnx", F.dir);
    FILE *f = fopen(bad, "w");
    cr_assert_not_null(f);
    fputs("not a model", f);
    fclose(f);
    expect_ctl({.args = {"compile", example("digits.onnx"), "--target", "c", "-o", out, "-q", "--stream"}},
               {.args = {"compile", example("digits.onnx"), "--target", "c", "-o", out, "-q", "--stream", "--no-cache"}},
               {.args = {"compile", example("digits.onnx"), "--target", "c", "-o", out, "-q", "--stream"}},
               {.args = {"compile", bad, "--target", "c", "-o", out, "-q", "--stream"}, .status = 1,
                .err = {"bad.onnx"}});
    adopt_daemon(F.sock, daemon_pid("--no-start"));
    cr_assert_eq(count_entries(tmp), 0, "%d entries left in the daemon's TMPDIR after the uploads", count_entries(tmp));
    proc_out po = {0};
    ctl(&po, "stop");
    proc_out_free(&po);
    unsetenv("TMPDIR");
}

/* Against a scripted server answering as mode, tthctl does what k says */
static void expect_against_fake(fake_mode mode, const ctl_case *k)
{
    start_fake(mode);
    ctl_cases(k, 1);
    stop_fake();
}

Test(client, protocol_version_mismatch_exits_4)
{
    expect_against_fake(FAKE_VERSION, &(ctl_case){.args = {"status"}, .status = 4,
                                                  .err = {"protocol version",
                                                          "hint: this tthctl speaks protocol 1.0"}});
    expect_against_fake(FAKE_OLD_MAJOR,
                        &(ctl_case){.args = {"status"}, .status = 4,
                                    .err = {"protocol version mismatch: tthd speaks '2.0'"}});
}

Test(client, bad_frames_and_closed_connections_exit_4)
{
    expect_against_fake(FAKE_BAD_FRAME, &(ctl_case){.args = {"targets"}, .status = 4, .err = {"bad frame from tthd"}});
    expect_against_fake(FAKE_CLOSE, &(ctl_case){.args = {"tags"}, .status = 4, .err = {"closed the connection"}});
}

/* A compile whose artifact does not verify leaves OUT untouched and no temporary file. */
static void compile_must_not_write(fake_mode mode, const char *want)
{
    char model[400], out[400];
    snprintf(model, sizeof model, "%s/m.onnx", F.dir);
    snprintf(out, sizeof out, "%s/m.tar", F.dir);
    FILE *f = fopen(model, "wb");
    cr_assert_not_null(f);
    for (int i = 0; i < 70000; i++)
        fputc(i & 0xff, f);
    fclose(f);
    f = fopen(out, "wb");
    fputs("previous", f);
    fclose(f);
    expect_against_fake(mode, &(ctl_case){.args = {"compile", model, "--target", "llvm", "-o", out}, .status = 4,
                                          .err = {want}});
    char *kept = slurp(out);
    cr_assert_str_eq(kept, "previous", "the output was overwritten");
    free(kept);
    /* nothing but the model, the output and the captured streams is left */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -v -x -e m.onnx -e m.tar -e .stdout -e .stderr -e run -e tthd.sock",
        F.dir);
    cr_assert_neq(system(cmd), 0, "a temporary file was left in %s", F.dir);
}

Test(client, artifact_checksum_mismatch_exits_4)
{
    compile_must_not_write(FAKE_BAD_SUM, "artifact checksum mismatch");
}

Test(client, artifact_size_mismatch_exits_4)
{
    compile_must_not_write(FAKE_SHORT, "artifact size mismatch");
}

Test(client, interrupt_cancels_the_compile)
{
    char model[400], out[400], mark[400], cancel[400];
    snprintf(model, sizeof model, "%s/m.onnx", F.dir);
    snprintf(out, sizeof out, "%s/m.tar", F.dir);
    snprintf(mark, sizeof mark, "%s/uploaded", F.dir);
    snprintf(cancel, sizeof cancel, "%s/cancel-received", F.dir);
    FILE *f = fopen(model, "wb");
    cr_assert_not_null(f);
    fputs("some model bytes", f);
    fclose(f);
    char err_path[400];
    snprintf(err_path, sizeof err_path, "%s/.stderr", F.dir);
    start_fake(FAKE_HANG);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 2);
        execl(tthctl_path(), tthctl_path(), "--socket", F.sock, "compile", model, "--target", "llvm", "-o", out,
              (char *)NULL);
        _exit(127);
    }
    for (int waited = 0; access(mark, F_OK) != 0; waited += 10) {
        cr_assert_lt(waited, 20000, "the model was not uploaded");
        usleep(10000);
    }
    kill(pid, SIGINT);
    int status;
    waitpid(pid, &status, 0);
    char *err = slurp(err_path);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1, "status %d; stderr:\n%s", status, err);
    assert_has(err, "interrupted; cancelling the request");
    assert_has(err, "request cancelled");
    free(err);
    cr_assert_eq(access(cancel, F_OK), 0, "the server saw no $/cancelRequest for the compile");
    cr_assert_neq(access(out, F_OK), 0, "a cancelled compile wrote its output");
    stop_fake();
}

/* A socket answered by a process of another user (a fake daemon, here a listener run as
 * nobody through setpriv): tthctl refuses to talk before sending a byte. Needs root (to run the
 * listener as another uid) and setpriv; skipped otherwise. */
Test(client, refuses_a_daemon_of_another_user)
{
    if (geteuid() != 0 || system("command -v setpriv >/dev/null 2>&1") != 0)
        cr_skip_test("needs root and setpriv to run a listener as another user");
    char dir[400], sock[460], got[480], cmd[2048];
    snprintf(dir, sizeof dir, "%s/other", F.dir);
    cr_assert_eq(mkdir(dir, 0777), 0);
    cr_assert_eq(chmod(dir, 0777), 0);
    cr_assert_eq(chmod(F.dir, 0755), 0);
    snprintf(sock, sizeof sock, "%s/s.sock", dir);
    snprintf(got, sizeof got, "%s/s.sock.got", dir);
    /* listen, accept one client, keep what it sends in s.sock.got */
    snprintf(cmd, sizeof cmd,
             "setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 -c '"
             "import socket, os, sys, time\n"
             "p = sys.argv[1]\n"
             "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.bind(p); os.chmod(p, 0o777); s.listen(1)\n"
             "c, _ = s.accept(); c.settimeout(3)\n"
             "d = b\"\"\n"
             "try:\n"
             "    d = c.recv(65536)\n"
             "except Exception:\n"
             "    pass\n"
             "open(p + \".got\", \"wb\").write(d)\n"
             "' '%s' &",
             sock);
    cr_assert_eq(system(cmd), 0);
    for (int i = 0; i < 100 && access(sock, F_OK) != 0; i++)
        usleep(50000);
    cr_assert_eq(access(sock, F_OK), 0, "the listener did not start");
    expect_ctl({.args = {"--no-start", "status"}, .status = 3,
                .err = {"runs as uid 65534, not as you", "nothing was sent"}, .sock = sock});
    for (int i = 0; i < 100 && access(got, F_OK) != 0; i++)
        usleep(50000);
    struct stat st;
    cr_assert_eq(stat(got, &st), 0, "the listener never finished");
    cr_assert_eq(st.st_size, 0, "tthctl sent %lld bytes to another user's daemon", (long long)st.st_size);
}
