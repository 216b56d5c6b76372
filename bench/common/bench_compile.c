/* bench_compile.c: see bench_compile.h. */
#include "bench_compile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tth/target.h"
#include "tth_config.h"

tth_registry *bench_registry(void)
{
    tth_registry *r = tth_registry_new();
    tth_diag d;
    tth_diag_clear(&d);
    if (!r || tth_registry_load_dir(r, TTH_PLUGINS_BUILD_DIR, &d) < 1 ||
        !tth_registry_find_kind(r, "c")) {
        fprintf(stderr, "cannot load the plugins of %s: %s\n", TTH_PLUGINS_BUILD_DIR, d.message);
        tth_registry_free(r);
        return NULL;
    }
    return r;
}

json_t *bench_target(const tth_registry *r, const char *text)
{
    tth_diag d;
    tth_diag_clear(&d);
    json_t *t = tth_target_parse(r, NULL, text, &d);
    if (!t)
        fprintf(stderr, "target '%s': %s\n", text, d.message);
    return t;
}

bench_model *bench_models(const char *dir, size_t *n)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/manifest.tsv", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot open %s: build the models first with\n"
                "  /usr/bin/python3 bench/models/make_models.py %s\n", path, dir);
        return NULL;
    }
    bench_model *v = NULL;
    size_t cap = 0;
    *n = 0;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        bench_model m = {0};
        if (sscanf(line, "%63s %ld %ld", m.name, &m.nodes, &m.params) != 3)
            continue;
        snprintf(m.path, sizeof m.path, "%s/%s.onnx", dir, m.name);
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            bench_model *nv = realloc(v, cap * sizeof *nv);
            if (!nv)
                break;
            v = nv;
        }
        v[(*n)++] = m;
    }
    fclose(f);
    return v;
}

typedef struct progress_log {
    bench_timing *t;
    double last;
} progress_log;

/* Called as each stage starts ("done" after the last), and again within long stages (the same
 * name, a higher percent): a new name closes the previous stage. */
static void on_progress(void *ctx, const char *stage, int percent)
{
    (void)percent;
    progress_log *p = ctx;
    bench_timing *t = p->t;
    if (t->nstages > 0 && strcmp(t->stage[t->nstages - 1], stage) == 0)
        return;
    double now = bench_now();
    if (t->nstages > 0)
        t->seconds[t->nstages - 1] = now - p->last;
    if (strcmp(stage, "done") != 0 && t->nstages < BENCH_MAX_STAGES)
        t->stage[t->nstages++] = stage;
    p->last = now;
}

static int compile_file(const tth_registry *r, const json_t *target, const bench_model *m,
                        json_t *options, tth_compile_result *res, bench_timing *t, tth_diag *d)
{
    memset(t, 0, sizeof *t);
    memset(res, 0, sizeof *res);
    FILE *f = fopen(m->path, "rb");
    if (!f)
        return tth_diag_set(d, TTH_EIO, "bench", "cannot open %s", m->path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *bytes = malloc(len > 0 ? (size_t)len : 1);
    if (!bytes || fread(bytes, 1, (size_t)len, f) != (size_t)len) {
        fclose(f);
        free(bytes);
        return tth_diag_set(d, TTH_EIO, "bench", "cannot read %s", m->path);
    }
    fclose(f);
    if (!json_object_get(options, "build_shared"))
        json_object_set_new(options, "build_shared", json_false());
    progress_log log = {.t = t};
    tth_compile_request req = {.model = bytes, .model_len = (size_t)len, .model_name = m->name,
                               .target = target, .options = options, .registry = r,
                               .progress = on_progress, .progress_ctx = &log};
    double t0 = bench_now();
    log.last = t0;
    int rc = tth_compile(&req, res, d);
    t->total = bench_now() - t0;
    if (rc == 0 && t->nstages > 0 && t->seconds[t->nstages - 1] == 0)
        t->seconds[t->nstages - 1] = bench_now() - log.last;
    free(bytes);
    return rc;
}

int bench_compile(const tth_registry *r, const json_t *target, const bench_model *m,
                  json_t *options, tth_compile_result *res, bench_timing *t)
{
    tth_diag d;
    tth_diag_clear(&d);
    int rc = compile_file(r, target, m, options, res, t, &d);
    json_decref(options);
    if (rc != 0)
        printf("%-14s compile failed: %s\n", m->name, d.message);
    return rc;
}
