/* tth-conformance: compile every ONNX test case under the given directories for one target,
 * run it through the runtime and compare with the shipped expected outputs
 * (tests/support/onnx_case.c; tolerance: tthrt_default_tolerance — float32 |got - want| <=
 * 1e-4 + 1e-4 |want|, float16 1e-2 + 1e-2 |want|, float64 1e-7 + 1e-7 |want|, integers and bool
 * exact).
 *
 * Each case runs in its own forked process (a crash or a hang fails that case only), at most
 * --jobs at a time. A TTH_EUNSUPPORTED diagnostic from the compile counts as "unsupported", not as
 * a failure. Failures listed in --known FILE (one case name per line, '#' comments) are reported
 * as known and do not fail the run; a listed case that passes is reported as fixed.
 * --check-c-warnings also compiles the generated C with -Wall -Wextra -Werror (gcc and clang).
 * A case whose compile refuses a graph input that must be a constant (a shape, axes, repeats...)
 * is compiled again with that input bound to its test value (options.bind, as `tthctl compile
 * --bind`) and counted apart: "passed with bound inputs" (TTH_CASE_BIND_INPUTS).
 *
 *   tth-conformance [--jobs N] [--shard I/N] [--timeout S] [--time-budget S] [--known FILE]
 *                   [--target T] [--check-c-warnings] [--verbose] DIR...
 * A DIR holding model.onnx is one case; otherwise each subdirectory holding one is. Exit status:
 * 0 when no case failed except known ones, 1 otherwise, 2 on bad usage.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "onnx_case.h"
#include "tth/registry.h"
#include "tth/target.h"
#include "tth_config.h"

typedef struct conf_case {
    char *dir;
    char *name;              /* "node/test_add" */
    int known;               /* listed in --known */
    tth_case_status status;
    int crashed, timed_out, ran;
    char detail[1024];
    char bound[512];         /* inputs bound at compile time ("" when none) */
} conf_case;

typedef struct conf_run {
    conf_case *cases;
    size_t n, cap;
} conf_run;

static int has_model(const char *dir)
{
    char p[4096];
    struct stat st;
    snprintf(p, sizeof p, "%s/model.onnx", dir);
    return stat(p, &st) == 0;
}

static int cmp_case(const void *a, const void *b)
{
    return strcmp(((const conf_case *)a)->name, ((const conf_case *)b)->name);
}

static void add_case(conf_run *r, const char *dir)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 256;
        r->cases = realloc(r->cases, r->cap * sizeof *r->cases);
        if (!r->cases) {
            fprintf(stderr, "out of memory\n");
            exit(2);
        }
    }
    conf_case *c = &r->cases[r->n++];
    memset(c, 0, sizeof *c);
    c->dir = strdup(dir);
    /* name: the last two path components */
    const char *end = dir + strlen(dir);
    while (end > dir && end[-1] == '/')
        end--;
    const char *p = end;
    int slashes = 0;
    while (p > dir) {
        if (p[-1] == '/' && ++slashes == 2)
            break;
        p--;
    }
    c->name = strndup(p, (size_t)(end - p));
}

static void collect(conf_run *r, const char *dir)
{
    if (has_model(dir)) {
        add_case(r, dir);
        return;
    }
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "tth-conformance: cannot open %s: %s\n", dir, strerror(errno));
        exit(2);
    }
    struct dirent *e;
    char p[4096];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (has_model(p))
            add_case(r, p);
    }
    closedir(d);
}

static void load_known(conf_run *r, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "tth-conformance: cannot open %s: %s\n", path, strerror(errno));
        exit(2);
    }
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        char *h = strchr(line, '#');
        if (h)
            *h = 0;
        char *s = line, *e;
        while (*s == ' ' || *s == '\t')
            s++;
        e = s + strlen(s);
        while (e > s && (e[-1] == '\n' || e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
            *--e = 0;
        if (!*s)
            continue;
        for (size_t i = 0; i < r->n; i++)
            if (strcmp(r->cases[i].name, s) == 0)
                r->cases[i].known = 1;
    }
    fclose(f);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A running child: which case, its pid, the pipe its result comes back on. */
typedef struct slot {
    pid_t pid;
    int fd;
    size_t idx;
    double started;
    tth_case_result res;
    size_t got;
} slot;

static int case_flags = TTH_CASE_BIND_INPUTS;

static void child(const conf_case *c, const tth_registry *reg, const json_t *target, int fd)
{
    tth_case_result res;
    tth_case_run_flags(c->dir, reg, target, case_flags, &res);
    const char *p = (const char *)&res;
    size_t left = sizeof res;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w <= 0)
            break;
        p += w;
        left -= (size_t)w;
    }
    close(fd);
}

static void finish(conf_run *r, slot *s, int status, int timed_out)
{
    conf_case *c = &r->cases[s->idx];
    c->ran = 1;
    if (timed_out) {
        c->timed_out = 1;
        c->status = TTH_CASE_FAIL;
        snprintf(c->detail, sizeof c->detail, "timed out");
    } else if (s->got == sizeof s->res && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        c->status = s->res.status;
        snprintf(c->detail, sizeof c->detail, "%s", s->res.detail);
        snprintf(c->bound, sizeof c->bound, "%s", s->res.bound);
    } else {
        c->crashed = 1;
        c->status = TTH_CASE_FAIL;
        if (WIFSIGNALED(status))
            snprintf(c->detail, sizeof c->detail, "crashed (signal %d: %s)", WTERMSIG(status),
                     strsignal(WTERMSIG(status)));
        else
            snprintf(c->detail, sizeof c->detail, "crashed (exit status %d)",
                     WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
}

static void usage(void)
{
    fprintf(stderr, "usage: tth-conformance [--jobs N] [--shard I/N] [--timeout S] "
                    "[--time-budget S] [--known FILE] [--target T] [--check-c-warnings] [--verbose] DIR...\n");
    exit(2);
}

int main(int argc, char **argv)
{
    int jobs = 2, shard_i = 0, shard_n = 1, verbose = 0;
    double timeout = 120, budget = 0;
    const char *known = NULL, *target_text = "c";
    conf_run run = {0};
    int ndirs = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--jobs") == 0 && i + 1 < argc)
            jobs = atoi(argv[++i]);
        else if (strcmp(a, "--shard") == 0 && i + 1 < argc) {
            if (sscanf(argv[++i], "%d/%d", &shard_i, &shard_n) != 2 || shard_n < 1 ||
                shard_i < 0 || shard_i >= shard_n)
                usage();
        } else if (strcmp(a, "--timeout") == 0 && i + 1 < argc)
            timeout = atof(argv[++i]);
        else if (strcmp(a, "--time-budget") == 0 && i + 1 < argc)
            budget = atof(argv[++i]);
        else if (strcmp(a, "--known") == 0 && i + 1 < argc)
            known = argv[++i];
        else if (strcmp(a, "--target") == 0 && i + 1 < argc)
            target_text = argv[++i];
        else if (strcmp(a, "--check-c-warnings") == 0)
            case_flags |= TTH_CASE_CHECK_C_WARNINGS;
        else if (strcmp(a, "--verbose") == 0 || strcmp(a, "-v") == 0)
            verbose = 1;
        else if (a[0] == '-')
            usage();
        else {
            collect(&run, a);
            ndirs++;
        }
    }
    if (ndirs == 0 || jobs < 1)
        usage();
    qsort(run.cases, run.n, sizeof *run.cases, cmp_case);
    if (known)
        load_known(&run, known);

    /* plugins and target once, inherited by every child */
    const char *root = getenv("TTH_BUILD_ROOT");
    char pdir[2048];
    snprintf(pdir, sizeof pdir, "%s/plugins", root ? root : TTH_BUILD_ROOT);
    tth_registry *reg = tth_registry_new();
    tth_diag d;
    tth_diag_clear(&d);
    if (tth_registry_load_dir(reg, pdir, &d) < 0) {
        fprintf(stderr, "tth-conformance: plugins in %s: %s\n", pdir, d.message);
        return 2;
    }
    json_t *target = tth_target_parse(reg, NULL, target_text, &d);
    if (!target) {
        fprintf(stderr, "tth-conformance: target '%s': %s\n", target_text, d.message);
        return 2;
    }

    /* this shard's cases */
    size_t *todo = calloc(run.n + 1, sizeof *todo), ntodo = 0;
    for (size_t i = 0; i < run.n; i++)
        if ((int)(i % (size_t)shard_n) == shard_i)
            todo[ntodo++] = i;

    fflush(stdout);
    slot *slots = calloc((size_t)jobs, sizeof *slots);
    for (int j = 0; j < jobs; j++)
        slots[j].pid = 0;
    double t0 = now_s();
    size_t next = 0, running = 0, skipped = 0;
    while (next < ntodo || running > 0) {
        /* start */
        while (running < (size_t)jobs && next < ntodo) {
            if (budget > 0 && now_s() - t0 > budget) {
                skipped = ntodo - next;
                next = ntodo;
                break;
            }
            int j = 0;
            while (slots[j].pid)
                j++;
            int p[2];
            if (pipe(p) != 0) {
                perror("pipe");
                return 2;
            }
            fflush(stdout);
            fflush(stderr);
            pid_t pid = fork();
            if (pid < 0) {
                perror("fork");
                return 2;
            }
            if (pid == 0) {
                close(p[0]);
                /* the child's stderr is noise (sanitizer reports are kept: a crash shows them) */
                child(&run.cases[todo[next]], reg, target, p[1]);
                _exit(0);
            }
            close(p[1]);
            slots[j] = (slot){.pid = pid, .fd = p[0], .idx = todo[next], .started = now_s()};
            next++;
            running++;
        }
        /* collect: read results as they come, reap exits, kill the slow */
        for (int j = 0; j < jobs; j++) {
            slot *s = &slots[j];
            if (!s->pid)
                continue;
            int status = 0;
            pid_t w = waitpid(s->pid, &status, WNOHANG);
            int timed_out = 0;
            if (w == 0 && now_s() - s->started > timeout) {
                kill(s->pid, SIGKILL);
                waitpid(s->pid, &status, 0);
                timed_out = 1;
                w = s->pid;
            }
            if (w == s->pid) {
                /* drain the pipe */
                char *dst = (char *)&s->res;
                ssize_t r;
                while (s->got < sizeof s->res &&
                       (r = read(s->fd, dst + s->got, sizeof s->res - s->got)) > 0)
                    s->got += (size_t)r;
                close(s->fd);
                finish(&run, s, status, timed_out);
                conf_case *c = &run.cases[s->idx];
                if (verbose || (c->status == TTH_CASE_FAIL && !c->known))
                    printf("%-10s %s%s%s\n",
                           c->status == TTH_CASE_PASS ? "pass" :
                           c->status == TTH_CASE_UNSUPPORTED ? "unsupported" :
                           c->known ? "known-fail" : "FAIL",
                           c->name, c->status == TTH_CASE_PASS ? "" : ": ",
                           c->status == TTH_CASE_PASS ? "" : c->detail);
                memset(s, 0, sizeof *s);
                running--;
            }
        }
        if (running == (size_t)jobs || (next >= ntodo && running > 0))
            usleep(20000);
    }

    size_t pass = 0, fail = 0, unsup = 0, crash = 0, knownf = 0, fixed = 0, bound = 0;
    for (size_t i = 0; i < run.n; i++) {
        conf_case *c = &run.cases[i];
        if (!c->ran)
            continue;
        if (c->status == TTH_CASE_PASS) {
            pass++;
            bound += c->bound[0] != 0;
            fixed += c->known;
        } else if (c->status == TTH_CASE_UNSUPPORTED) {
            unsup++;
        } else if (c->known) {
            knownf++;
        } else {
            fail++;
            crash += c->crashed;
        }
    }
    printf("\ntth-conformance: target '%s', %zu cases (shard %d/%d of %zu), %.1f s\n",
           target_text, ntodo - skipped, shard_i, shard_n, run.n, now_s() - t0);
    printf("passed: %zu (%zu of them with inputs bound at compile time)\nfailed: %zu (%zu crashed or timed "
           "out)\nunsupported: %zu\n", pass, bound, fail, crash, unsup);
    if (verbose && bound) {
        printf("\npassed with bound inputs:\n");
        for (size_t i = 0; i < run.n; i++)
            if (run.cases[i].ran && run.cases[i].status == TTH_CASE_PASS && run.cases[i].bound[0])
                printf("  %s (%s)\n", run.cases[i].name, run.cases[i].bound);
    }
    if (known)
        printf("known failures: %zu (fixed since listed: %zu)\n", knownf, fixed);
    if (skipped)
        printf("not run (time budget of %.0f s reached): %zu\n", budget, skipped);
    if (fail) {
        printf("\nfailures:\n");
        for (size_t i = 0; i < run.n; i++)
            if (run.cases[i].ran && run.cases[i].status == TTH_CASE_FAIL && !run.cases[i].known)
                printf("  %s: %s\n", run.cases[i].name, run.cases[i].detail);
    }
    if (fixed) {
        printf("\nlisted as known failures but passing now (remove them from the list):\n");
        for (size_t i = 0; i < run.n; i++)
            if (run.cases[i].ran && run.cases[i].known && run.cases[i].status == TTH_CASE_PASS)
                printf("  %s\n", run.cases[i].name);
    }
    for (size_t i = 0; i < run.n; i++) {
        free(run.cases[i].dir);
        free(run.cases[i].name);
    }
    free(run.cases);
    free(todo);
    free(slots);
    json_decref(target);
    tth_registry_free(reg);
    return fail ? 1 : 0;
}
