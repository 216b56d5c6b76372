/* main.c: tthd's command line, defaults, and the loop.
 *
 *   tthd [--socket PATH] [--plugins-dir DIR[:DIR...]] [--workers N] [--idle-exit SECONDS] [--verbose]
 *        [--cache-dir DIR] [--cache-max-bytes N] [--cache-redis URL] [--request-timeout SECONDS]
 *        [--worker-memory-limit BYTES] [--max-frame-bytes N] [--max-request-bytes N]
 *        [--max-requests N] [--max-connections N] [--connection-idle-timeout SECONDS]
 *        [--shutdown-grace SECONDS] [--worker PATH] */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tth_config.h"
#include "tthd.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: tthd [options]\n"
            "The tth compiler daemon: serves tthctl and build tools on a Unix socket (see protocol/PROTOCOL.md).\n"
            "\n"
            "  --socket PATH              socket (default $XDG_RUNTIME_DIR/tth/tthd.sock, else /tmp/tth-$UID/tthd.sock)\n"
            "  --plugins-dir DIR[:DIR...] the plugins path, searched in order (default $TTH_PLUGINS_PATH, else\n"
            "                             $XDG_DATA_HOME/tth/plugins when it exists, then the build tree's when run\n"
            "                             from it, else %s)\n"
            "  --workers N                worker processes (default: number of CPUs)\n"
            "  --idle-exit SECONDS        exit after this long without clients (default 0: never)\n"
            "  --cache-dir DIR            artifact cache (default $XDG_CACHE_HOME/tth, else ~/.cache/tth)\n"
            "  --cache-max-bytes N        the artifacts' size bound (default 1 GiB); compiled code kept for\n"
            "                             reuse takes up to a quarter more (docs/cache.md)\n"
            "  --cache-redis URL          a remote cache shared by daemons (default $TTH_CACHE_REDIS; '' for none):\n"
            "                             redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] or unix:///PATH, with\n"
            "                             ?ttl=SECONDS&max_bytes=N&timeout=SECONDS&retry=SECONDS (docs/cache.md)\n"
            "  --request-timeout SECONDS  a worker job's deadline (default 600); a quarter of it (10 to 60 s)\n"
            "                             for a new worker to be ready\n"
            "  --worker-memory-limit N    bytes a worker may use (default: the machine's memory, at least\n"
            "                             4 GiB; 0: no limit)\n"
            "  --max-frame-bytes N        largest frame accepted (default %u)\n"
            "  --max-request-bytes N      largest request accepted, upload included: an upload is written to\n"
            "                             $TMPDIR as it comes (default $TTH_MAX_REQUEST_BYTES, else %llu)\n"
            "  --max-requests N           requests in flight per connection (default %d)\n"
            "  --max-connections N        open client connections; one more is told the daemon is busy (default 256)\n"
            "  --connection-idle-timeout SECONDS\n"
            "                             close a connection with no request in flight after this long\n"
            "                             without a byte from it (default 600; 0: never)\n"
            "  --shutdown-grace SECONDS   time in-flight work gets on shutdown (default 5)\n"
            "  --worker PATH              the tth-worker executable (default: next to tthd)\n"
            "  --verbose                  debug logging (workers, clients, cache)\n"
            "  --version, --help\n",
            TTH_PLUGINS_INSTALL_DIR, TTHP_DEFAULT_MAX_FRAME_BYTES, (unsigned long long)TTHP_DEFAULT_MAX_REQUEST_BYTES,
            TTHP_DEFAULT_MAX_CONCURRENT);
}

static char *self_exe(void)
{
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0)
        return NULL;
    buf[n] = '\0';
    return strdup(buf);
}

static char *path_join_sep(const char *a, char sep, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s%c%s", a, sep, b);
    return p;
}

static char *path_join(const char *a, const char *b)
{
    return path_join_sep(a, '/', b);
}

/* $TTH_PLUGINS_PATH with every relative directory made absolute (tthd and its workers run from
 * elsewhere) and empty entries dropped; NULL when unset or empty */
static char *plugins_path_from_env(void)
{
    const char *env = getenv("TTH_PLUGINS_PATH");
    if (!env || !*env)
        return NULL;
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd))
        strcpy(cwd, "/");
    size_t n = 1;
    for (const char *p = env; *p; p++)
        n += *p == ':';
    /* each entry at most cwd + '/' + itself + ':' */
    size_t cap = strlen(env) + n * (strlen(cwd) + 2) + 1, len = 0;
    char *out = malloc(cap), *copy = strdup(env), *save = NULL;
    if (!out || !copy) {
        free(out);
        free(copy);
        return NULL;
    }
    out[0] = '\0';
    for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save))
        len += (size_t)snprintf(out + len, cap - len, "%s%s%s%s", len ? ":" : "", d[0] == '/' ? "" : cwd,
                                d[0] == '/' ? "" : "/", d);
    free(copy);
    if (!out[0]) {
        free(out);
        return NULL;
    }
    return out;
}

/* the user's own plugins directory, $XDG_DATA_HOME/tth/plugins (else ~/.local/share/...), when
 * it exists */
static char *user_plugins_dir(void)
{
    const char *xd = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    char buf[PATH_MAX];
    if (xd && xd[0] == '/')
        snprintf(buf, sizeof buf, "%s/tth/plugins", xd);
    else if (home && home[0] == '/')
        snprintf(buf, sizeof buf, "%s/.local/share/tth/plugins", home);
    else
        return NULL;
    return access(buf, F_OK) == 0 ? strdup(buf) : NULL;
}

/* Fill what the command line left out. */
static int defaults(tthd_options *o)
{
    char *exe = self_exe();
    char *exe_dir = exe ? strdup(exe) : NULL;
    if (exe_dir && strrchr(exe_dir, '/'))
        *strrchr(exe_dir, '/') = '\0';
    if (!o->socket_path) {
        const char *rt = getenv("XDG_RUNTIME_DIR");
        char buf[PATH_MAX];
        if (rt && rt[0] == '/')
            snprintf(buf, sizeof buf, "%s/tth/tthd.sock", rt);
        else
            snprintf(buf, sizeof buf, "/tmp/tth-%u/tthd.sock", (unsigned)getuid());
        o->socket_path = strdup(buf);
        o->socket_default = 1;
    }
    if (!o->plugins_dir)
        o->plugins_dir = plugins_path_from_env();
    if (!o->plugins_dir) {
        size_t n = strlen(TTH_BUILD_ROOT);
        int in_build = exe && strncmp(exe, TTH_BUILD_ROOT, n) == 0 && exe[n] == '/';
        const char *sys = in_build ? TTH_PLUGINS_BUILD_DIR : TTH_PLUGINS_INSTALL_DIR;
        char *user = user_plugins_dir();
        o->plugins_dir = user ? path_join_sep(user, ':', sys) : strdup(sys);
        free(user);
    }
    if (!o->cache_dir) {
        const char *xc = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        char buf[PATH_MAX];
        if (xc && xc[0] == '/')
            snprintf(buf, sizeof buf, "%s/tth", xc);
        else
            snprintf(buf, sizeof buf, "%s/.cache/tth", home && home[0] ? home : "/tmp");
        o->cache_dir = strdup(buf);
    }
    if (!o->worker_path) {
        char *local = exe_dir ? path_join(exe_dir, "tth-worker") : NULL;
        if (local && access(local, X_OK) == 0) {
            o->worker_path = local;
        } else {
            free(local);
            o->worker_path = path_join(TTH_BINDIR, "tth-worker");
        }
    }
    if (!o->workers) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        o->workers = n > 0 ? (unsigned)n : 1;
    }
    free(exe);
    free(exe_dir);
    return o->socket_path && o->plugins_dir && o->cache_dir && o->worker_path ? 0 : -1;
}

static void options_free(tthd_options *o)
{
    free(o->socket_path);
    free(o->plugins_dir);
    free(o->cache_dir);
    free(o->worker_path);
    tthd_remote_config_free(&o->remote);
}

/* Transparent huge pages for the daemon's and its workers' heaps (docs/tthctl.md, "Memory
 * pages"): glibc's malloc asks for them when GLIBC_TUNABLES has glibc.malloc.hugetlb=1, which is
 * read when a program starts. So tthd adds it to its environment and runs itself again, once; the
 * workers it spawns inherit it. A user's own setting of the tunable is left alone. */
static void use_huge_pages(char **argv)
{
    const char *t = getenv("GLIBC_TUNABLES");
    if (t && strstr(t, "glibc.malloc.hugetlb"))
        return;
    char v[2048];
    int n = snprintf(v, sizeof v, "%s%sglibc.malloc.hugetlb=1", t ? t : "", t && *t ? ":" : "");
    if (n < 0 || (size_t)n >= sizeof v || setenv("GLIBC_TUNABLES", v, 1) != 0)
        return;
    execv("/proc/self/exe", argv);
    /* no exec: this process runs on with small pages; its workers still get the tunable */
}

int main(int argc, char **argv)
{
    use_huge_pages(argv);
    static tthd_server srv;
    tthd_options *o = &srv.opt;
    o->request_timeout = 600;
    o->shutdown_grace = 5;
    o->cache_max_bytes = 1ull << 30;
    /* a compile holds about twice its model's weights (docs/cache.md, "Uploads"): a model as
     * large as ONNX allows must fit by default, so the bound is the machine's memory */
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    o->worker_mem_limit = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    if (o->worker_mem_limit < (4ull << 30))
        o->worker_mem_limit = 4ull << 30;
    o->max_frame = TTHP_DEFAULT_MAX_FRAME_BYTES;
    o->max_request = TTHP_DEFAULT_MAX_REQUEST_BYTES;
    /* the request limit can also come from the environment, so that a daemon tthctl starts
     * accepts models of a size the user chose (--max-request-bytes still wins) */
    const char *env_max = getenv("TTH_MAX_REQUEST_BYTES");
    uint64_t env_u;
    if (env_max && *env_max) {
        if (tthd_parse_size(env_max, &env_u) != 0 || env_u < 1024) {
            fprintf(stderr, "tthd: TTH_MAX_REQUEST_BYTES='%s' is not a size of at least 1024 bytes (e.g. 1G)\n",
                    env_max);
            return 2;
        }
        o->max_request = (size_t)env_u;
    }
    o->max_concurrent = TTHP_DEFAULT_MAX_CONCURRENT;
    o->max_connections = 256;
    o->conn_idle = 600;
    enum { O_SOCKET = 256, O_PLUGINS, O_WORKERS, O_IDLE, O_CACHE_DIR, O_CACHE_MAX, O_TIMEOUT, O_MEM,
           O_FRAME, O_REQUEST, O_MAXREQ, O_MAXCONN, O_CONNIDLE, O_GRACE, O_WORKER, O_REDIS, O_VERSION };
    static const struct option opts[] = {
        {"socket", required_argument, NULL, O_SOCKET},
        {"plugins-dir", required_argument, NULL, O_PLUGINS},
        {"workers", required_argument, NULL, O_WORKERS},
        {"idle-exit", required_argument, NULL, O_IDLE},
        {"cache-dir", required_argument, NULL, O_CACHE_DIR},
        {"cache-max-bytes", required_argument, NULL, O_CACHE_MAX},
        {"request-timeout", required_argument, NULL, O_TIMEOUT},
        {"worker-memory-limit", required_argument, NULL, O_MEM},
        {"max-frame-bytes", required_argument, NULL, O_FRAME},
        {"max-request-bytes", required_argument, NULL, O_REQUEST},
        {"max-requests", required_argument, NULL, O_MAXREQ},
        {"max-connections", required_argument, NULL, O_MAXCONN},
        {"connection-idle-timeout", required_argument, NULL, O_CONNIDLE},
        {"shutdown-grace", required_argument, NULL, O_GRACE},
        {"worker", required_argument, NULL, O_WORKER},
        {"cache-redis", required_argument, NULL, O_REDIS},
        {"verbose", no_argument, NULL, 'v'},
        {"version", no_argument, NULL, O_VERSION},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c, bad = 0, verbose = 0;
    const char *redis = getenv("TTH_CACHE_REDIS");
    int redis_flag = 0;
    uint64_t u;
    while ((c = getopt_long(argc, argv, "vh", opts, NULL)) != -1) {
        switch (c) {
        case O_SOCKET: free(o->socket_path); o->socket_path = strdup(optarg); break;
        case O_PLUGINS: free(o->plugins_dir); o->plugins_dir = strdup(optarg); break;
        case O_CACHE_DIR: free(o->cache_dir); o->cache_dir = strdup(optarg); break;
        case O_WORKER: free(o->worker_path); o->worker_path = strdup(optarg); break;
        case O_REDIS: redis = optarg; redis_flag = 1; break;
        case O_WORKERS: bad |= tthd_parse_size(optarg, &u) || u < 1 || u > 256; o->workers = (unsigned)u; break;
        case O_IDLE: bad |= tthd_parse_seconds(optarg, &o->idle_exit); break;
        case O_TIMEOUT: bad |= tthd_parse_seconds(optarg, &o->request_timeout) || o->request_timeout == 0; break;
        case O_GRACE: bad |= tthd_parse_seconds(optarg, &o->shutdown_grace); break;
        case O_CACHE_MAX: bad |= tthd_parse_size(optarg, &o->cache_max_bytes); break;
        case O_MEM: bad |= tthd_parse_size(optarg, &o->worker_mem_limit); break;
        case O_FRAME: bad |= tthd_parse_size(optarg, &u) || u < 1024; o->max_frame = (size_t)u; break;
        case O_REQUEST: bad |= tthd_parse_size(optarg, &u) || u < 1024; o->max_request = (size_t)u; break;
        case O_MAXREQ: bad |= tthd_parse_size(optarg, &u) || u < 1 || u > 100000; o->max_concurrent = (unsigned)u; break;
        case O_MAXCONN: bad |= tthd_parse_size(optarg, &u) || u < 1 || u > 100000; o->max_connections = (unsigned)u; break;
        case O_CONNIDLE: bad |= tthd_parse_seconds(optarg, &o->conn_idle); break;
        case 'v': verbose++; break;
        case O_VERSION: printf("tthd %s (protocol %s)\n", TTH_VERSION, TTHP_PROTOCOL_VERSION); options_free(o); return 0;
        case 'h': usage(stdout); options_free(o); return 0;
        default: bad = 1; break;
        }
        if (bad) {
            if (c != '?')
                fprintf(stderr, "tthd: bad value for --%s: '%s'\n", opts[c - O_SOCKET].name, optarg);
            usage(stderr);
            options_free(o);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "tthd: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        options_free(o);
        return 2;
    }
    if (redis && *redis) {
        char msg[512];
        if (tthd_remote_parse(redis, &o->remote, msg, sizeof msg) != 0) {
            fprintf(stderr, "tthd: the remote cache address %s: %s\n",
                    redis_flag ? "(--cache-redis)" : "($TTH_CACHE_REDIS)", msg);
            options_free(o);
            return 2;
        }
    }
    o->verbose = verbose;
    tthd_log_level = verbose ? TTHD_LOG_DEBUG : TTHD_LOG_INFO;
    if (defaults(o) != 0) {
        fprintf(stderr, "tthd: out of memory\n");
        options_free(o);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);

    uv_loop_t loop;
    uv_loop_init(&loop);
    int rc = tthd_server_start(&srv, &loop);
    if (rc == 0)
        tthd_log(TTHD_LOG_INFO, "tthd %s ready (pid %d, plugins %s, %u workers, cache %s)", TTH_VERSION,
                 (int)getpid(), o->plugins_dir, o->workers, o->cache_dir);
    uv_run(&loop, UV_RUN_DEFAULT);
    int close_rc = uv_loop_close(&loop);
    if (close_rc != 0) {
        tthd_log(TTHD_LOG_ERROR, "the loop still has open handles at exit (a bug)");
    }
    int code = srv.exit_code;
    tthd_server_free(&srv);
    options_free(o);
    if (rc == 0)
        tthd_log(TTHD_LOG_INFO, "stopped");
    return code ? code : close_rc != 0 ? 3 : 0;
}
