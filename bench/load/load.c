/* tth-load: a load benchmark for tthd.
 *
 * N clients, each on its own connection and thread, send requests back to back (alternating
 * target/parse and status) for a fixed time. Prints requests per second, p50/p99/max latency,
 * errors, and the daemon's resident memory before and after the run.
 *
 *   tth-load [--socket PATH] [--clients N] [--seconds S] [--target TEXT] [--parse-only|--status-only]
 *
 * Without --socket it starts the tthd of this build on a temporary socket with the build's
 * plugins (and stops it afterwards). See bench/load/README.md. */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tthproto/jsonrpc.h>

#include "bench_time.h"
#include "tth_config.h"

typedef struct client {
    pthread_t thread;
    const char *sock;
    const char *target;
    int mode;            /* 0 both, 1 parse only, 2 status only */
    double until;        /* monotonic seconds */
    double *lat;         /* latencies (ms) */
    size_t n, cap;
    size_t errors;
    int failed;          /* could not connect or initialise */
} client;

static int connect_to(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* Send a request, wait for its response (skipping notifications). Returns the response. */
static json_t *call(int fd, tthp_fd_reader *r, json_int_t id, const char *method, json_t *params_new)
{
    json_t *req = tthp_request_new(id, method, params_new);
    int rc = tthp_write_message_fd(fd, req);
    json_decref(req);
    if (rc != 0)
        return NULL;
    for (;;) {
        tthp_frame f;
        if (tthp_fd_read_frame(r, &f, 60000) != 1)
            return NULL;
        if (f.type != TTHP_FRAME_JSON)
            continue;
        json_t *m = json_loadb((const char *)f.data, f.len, 0, NULL);
        if (m && json_integer_value(json_object_get(m, "id")) == id && !json_object_get(m, "method"))
            return m;
        json_decref(m);
    }
}

static void *run_client(void *arg)
{
    client *c = arg;
    int fd = connect_to(c->sock);
    if (fd < 0) {
        c->failed = 1;
        return NULL;
    }
    tthp_fd_reader r;
    tthp_fd_reader_init(&r, fd, 64u << 20);
    json_t *resp = call(fd, &r, 1, "initialize", json_pack("{s:s, s:{s:s, s:s}}", "protocolVersion",
                                                          TTHP_PROTOCOL_VERSION, "clientInfo", "name", "tth-load",
                                                          "version", TTH_VERSION));
    if (!resp || json_object_get(resp, "error")) {
        c->failed = 1;
        json_decref(resp);
        tthp_fd_reader_free(&r);
        close(fd);
        return NULL;
    }
    json_decref(resp);
    json_int_t id = 2;
    while (bench_now() < c->until) {
        int parse = c->mode == 1 || (c->mode == 0 && id % 2 == 0);
        double t0 = bench_now();
        resp = parse ? call(fd, &r, id, "target/parse", json_pack("{s:s}", "target", c->target))
                     : call(fd, &r, id, "status", json_object());
        double ms = (bench_now() - t0) * 1000.0;
        id++;
        if (!resp) {
            c->errors++;
            break;
        }
        if (json_object_get(resp, "error"))
            c->errors++;
        json_decref(resp);
        if (c->n == c->cap) {
            c->cap = c->cap ? c->cap * 2 : 4096;
            double *nl = realloc(c->lat, c->cap * sizeof *nl);
            if (!nl)
                break;
            c->lat = nl;
        }
        c->lat[c->n++] = ms;
    }
    tthp_fd_reader_free(&r);
    close(fd);
    return NULL;
}

/* The daemon's pid (from status) and its resident set size in KiB (from /proc). */
static long daemon_rss_kib(const char *sock, int *pid_out)
{
    int fd = connect_to(sock);
    if (fd < 0)
        return -1;
    tthp_fd_reader r;
    tthp_fd_reader_init(&r, fd, 64u << 20);
    json_decref(call(fd, &r, 1, "initialize", json_pack("{s:s}", "protocolVersion", TTHP_PROTOCOL_VERSION)));
    json_t *st = call(fd, &r, 2, "status", json_object());
    int pid = (int)json_integer_value(json_object_get(json_object_get(st, "result"), "pid"));
    json_decref(st);
    tthp_fd_reader_free(&r);
    close(fd);
    if (pid_out)
        *pid_out = pid;
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: tth-load [--socket PATH] [--clients N] [--seconds S] [--target TEXT] "
                 "[--parse-only|--status-only]\n"
                 "Without --socket, starts this build's tthd on a temporary socket.\n");
}

int main(int argc, char **argv)
{
    const char *sock = NULL, *target = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72";
    int clients = 8, mode = 0;
    double seconds = 10;
    static const struct option opts[] = {
        {"socket", required_argument, NULL, 's'}, {"clients", required_argument, NULL, 'c'},
        {"seconds", required_argument, NULL, 't'}, {"target", required_argument, NULL, 'T'},
        {"parse-only", no_argument, NULL, 'p'}, {"status-only", no_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
    };
    int o;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (o) {
        case 's': sock = optarg; break;
        case 'c': clients = atoi(optarg); break;
        case 't': seconds = atof(optarg); break;
        case 'T': target = optarg; break;
        case 'p': mode = 1; break;
        case 'S': mode = 2; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (clients < 1 || clients > 4096 || seconds <= 0) {
        usage(stderr);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    char tmpdir[] = "/tmp/tth-load-XXXXXX", own_sock[256];
    pid_t own = 0;
    if (!sock) {
        if (!mkdtemp(tmpdir)) {
            perror("tth-load: mkdtemp");
            return 1;
        }
        snprintf(own_sock, sizeof own_sock, "%s/tthd.sock", tmpdir);
        char cache[256], tthd[1024];
        snprintf(cache, sizeof cache, "%s/cache", tmpdir);
        snprintf(tthd, sizeof tthd, "%s/daemon/tthd", TTH_BUILD_ROOT);
        own = fork();
        if (own == 0) {
            execl(tthd, tthd, "--socket", own_sock, "--plugins-dir", TTH_PLUGINS_BUILD_DIR, "--cache-dir", cache,
                  (char *)NULL);
            _exit(127);
        }
        sock = own_sock;
        for (int i = 0; i < 200; i++) {
            int fd = connect_to(sock);
            if (fd >= 0) {
                close(fd);
                break;
            }
            usleep(50000);
        }
    }
    int pid = 0;
    long rss_before = daemon_rss_kib(sock, &pid);
    if (rss_before < 0) {
        fprintf(stderr, "tth-load: cannot reach tthd on %s\n", sock);
        return 1;
    }
    client *cs = calloc((size_t)clients, sizeof *cs);
    double start = bench_now();
    for (int i = 0; i < clients; i++) {
        cs[i] = (client){.sock = sock, .target = target, .mode = mode, .until = start + seconds};
        pthread_create(&cs[i].thread, NULL, run_client, &cs[i]);
    }
    size_t total = 0, errors = 0, failed = 0;
    for (int i = 0; i < clients; i++) {
        pthread_join(cs[i].thread, NULL);
        total += cs[i].n;
        errors += cs[i].errors;
        failed += cs[i].failed;
    }
    double elapsed = bench_now() - start;
    double *all = malloc((total ? total : 1) * sizeof *all);
    size_t k = 0;
    for (int i = 0; i < clients; i++) {
        memcpy(all + k, cs[i].lat, cs[i].n * sizeof *all);
        k += cs[i].n;
        free(cs[i].lat);
    }
    qsort(all, total, sizeof *all, bench_cmp_double);
    long rss_after = daemon_rss_kib(sock, NULL);
    printf("tth-load: %d clients, %.1f s, %s\n", clients, elapsed,
           mode == 1 ? "target/parse" : mode == 2 ? "status" : "target/parse + status");
    printf("requests      %zu (%zu errors, %zu clients failed to connect)\n", total, errors, failed);
    printf("throughput    %.0f requests/s\n", (double)total / elapsed);
    if (total)
        printf("latency       p50 %.3f ms   p99 %.3f ms   max %.3f ms\n", all[total / 2],
               all[(size_t)((double)(total - 1) * 0.99)], all[total - 1]);
    printf("tthd rss      before %ld KiB   after %ld KiB   (pid %d)\n", rss_before, rss_after, pid);
    free(all);
    free(cs);
    if (own > 0) {
        kill(own, SIGTERM);
        waitpid(own, NULL, 0);
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0)
            fprintf(stderr, "tth-load: could not remove %s\n", tmpdir);
    }
    return errors || failed ? 1 : 0;
}
