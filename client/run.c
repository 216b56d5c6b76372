/* run.c: `tthctl run ARTIFACT --input NAME=FILE ...`: run an artifact on this machine through
 * the runtime library (runtime/tthrt.h). No daemon is involved. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tth/diag.h>
#include <tth/ir_common.h>
#include <tthrt.h>

#include "tthctl.h"

#define SHOW_VALUES 10 /* values printed per output */

/* A runtime diagnostic as tthctl's error; the exit code says whether a file could not be read
 * (5) or the artifact/inputs are wrong (1). */
int tthctl_from_diag(tthctl_error *err, const tth_diag *d, const char *context)
{
    int io = d->code == TTH_EIO || d->code == TTH_ENOENT || d->code == TTH_EPERM;
    int exit = io ? TTHCTL_EXIT_IO : TTHCTL_EXIT_FAILED;
    char loc[TTH_DIAG_LOCATION_MAX + PATH_MAX + 32];
    if (!d->location[0])
        snprintf(loc, sizeof loc, "%s", context);
    else if (strchr(d->location, '\''))
        snprintf(loc, sizeof loc, "%s", d->location); /* already says what it is */
    else if (io)
        snprintf(loc, sizeof loc, "file '%s'", d->location);
    else
        snprintf(loc, sizeof loc, "'%s' in %s", d->location, context);
    tthctl_fail(err, exit, loc, "%s", d->message[0] ? d->message : tth_strerror(d->code));
    if (d->hint[0])
        tthctl_hint(err, "%s", d->hint);
    return -exit;
}

static int cmp_double_ms(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int parse_repeat(const char *s, int *out, tthctl_error *err)
{
    if (!s) {
        *out = 1;
        return 0;
    }
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 1 || v > 1000000) {
        tthctl_fail(err, TTHCTL_EXIT_USAGE, NULL, "--repeat '%s' is not a count from 1 to 1000000", s);
        return -TTHCTL_EXIT_USAGE;
    }
    *out = (int)v;
    return 0;
}

/* Element i of an array as a double. */
double tthctl_element(const tthrt_array *a, int64_t i)
{
    tth_tensor t = {.data = a->data, .nbytes = a->nbytes, .refcount = 1};
    t.type.dtype = a->dtype;
    t.type.rank = a->rank;
    memcpy(t.type.shape, a->shape, sizeof t.type.shape);
    return tth_tensor_get_f64(&t, i);
}

int64_t tthctl_numel(const tthrt_array *a)
{
    int64_t n = 1;
    for (int32_t d = 0; d < a->rank; d++)
        n *= a->shape[d];
    return n;
}

/* One row: rank 1, or every dimension but the last equal to 1. */
int tthctl_one_row(const tthrt_array *a)
{
    if (a->rank < 1)
        return 0;
    for (int32_t d = 0; d + 1 < a->rank; d++)
        if (a->shape[d] != 1)
            return 0;
    return a->shape[a->rank - 1] > 1;
}

int64_t tthctl_argmax(const tthrt_array *a)
{
    int64_t best = 0, n = tthctl_numel(a);
    for (int64_t i = 1; i < n; i++)
        if (tthctl_element(a, i) > tthctl_element(a, best))
            best = i;
    return best;
}

json_t *tthctl_shape_json(const tthrt_array *a)
{
    json_t *s = json_array();
    for (int32_t d = 0; d < a->rank; d++)
        json_array_append_new(s, json_integer(a->shape[d]));
    return s;
}

static void print_output(const tthrt_array *a, const char *file)
{
    char shape[256] = "";
    size_t used = 0;
    for (int32_t d = 0; d < a->rank; d++) {
        int n = snprintf(shape + used, sizeof shape - used, "%s%lld", d ? ", " : "", (long long)a->shape[d]);
        if (n < 0 || (size_t)n >= sizeof shape - used)
            break;
        used += (size_t)n;
    }
    int64_t n = tthctl_numel(a);
    printf("%s: %s [%s]\n  values:", a->name ? a->name : "?", tth_dtype_name(a->dtype), shape);
    for (int64_t i = 0; i < n && i < SHOW_VALUES; i++) {
        double v = tthctl_element(a, i);
        if (isnan(v)) /* whatever its sign bit: as in --json */
            printf(" nan");
        else
            printf(" %.6g", v);
    }
    printf("%s\n", n > SHOW_VALUES ? " ..." : "");
    if (tthctl_one_row(a)) {
        int64_t k = tthctl_argmax(a);
        printf("  argmax: %lld (%.6g)\n", (long long)k, tthctl_element(a, k));
    }
    if (file)
        printf("  wrote %s\n", file);
}

/* A value in JSON, which has no NaN or infinity: those are the strings "nan", "inf" and "-inf"
 * (what Python's float() and numpy read back; docs/tthctl.md, "tthctl run") */
json_t *tthctl_value_json(double v)
{
    if (isnan(v))
        return json_string("nan");
    if (isinf(v))
        return json_string(v > 0 ? "inf" : "-inf");
    return json_real(v);
}

static json_t *output_json(const tthrt_array *a, const char *file)
{
    json_t *o = json_pack("{s:s, s:o, s:s}", "name", a->name ? a->name : "", "shape", tthctl_shape_json(a), "dtype",
                          tth_dtype_name(a->dtype));
    json_t *vals = json_array();
    int64_t n = tthctl_numel(a);
    for (int64_t i = 0; i < n && i < SHOW_VALUES; i++)
        json_array_append_new(vals, tthctl_value_json(tthctl_element(a, i)));
    json_object_set_new(o, "values", vals);
    if (tthctl_one_row(a))
        json_object_set_new(o, "argmax", json_integer(tthctl_argmax(a)));
    if (file)
        json_object_set_new(o, "file", json_string(file));
    return o;
}

/* ---- --profile (docs/profiling.md) ---- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

typedef struct prof_row {
    size_t k;                /* the call's index */
    double median_us, min_us;
} prof_row;

static int by_time(const void *a, const void *b)
{
    const prof_row *x = a, *y = b;
    return x->median_us < y->median_us ? 1 : x->median_us > y->median_us ? -1 : (x->k > y->k) - (x->k < y->k);
}

/* "a, b (+3 more)" of the ONNX nodes of a call */
static void nodes_text(const json_t *nodes, char *buf, size_t len)
{
    size_t n = json_array_size(nodes);
    buf[0] = 0;
    if (n == 0) {
        snprintf(buf, len, "-");
        return;
    }
    snprintf(buf, len, "%s%s", json_string_value(json_array_get(nodes, 0)), n > 1 ? "" : "");
    if (n > 1) {
        size_t used = strlen(buf);
        snprintf(buf + used, len - used, " (+%zu)", n - 1);
    }
}

static void shapes_text(const json_t *list, char *buf, size_t len)
{
    size_t used = 0, i;
    json_t *t;
    buf[0] = 0;
    json_array_foreach(list, i, t) {
        size_t d;
        json_t *v;
        used += (size_t)snprintf(buf + used, used < len ? len - used : 0, "%s[", i ? " " : "");
        json_array_foreach(json_object_get(t, "shape"), d, v)
            used += (size_t)snprintf(buf + used, used < len ? len - used : 0, "%s%lld", d ? "," : "",
                                     (long long)json_integer_value(v));
        used += (size_t)snprintf(buf + used, used < len ? len - used : 0, "]");
    }
}

static const char *strategy_of(const json_t *call)
{
    const json_t *s = json_object_get(call, "strategies");
    const char *v = json_string_value(json_array_get(s, 0));
    return v ? v : json_string_value(json_object_get(call, "op")) ? json_string_value(json_object_get(call, "op")) : "-";
}

/* Chrome trace events of the profiled runs: each call a complete event ("X") of its duration,
 * the calls of a run one after the other from the run's start (the hooks time the calls, not
 * the gaps between them, which are a few nanoseconds) */
static int write_trace(const char *path, const json_t *calls, const uint64_t *ns, int runs, size_t ncalls,
                       tthctl_error *err)
{
    json_t *events = json_array();
    double at = 0;
    for (int r = 0; r < runs && events; r++)
        for (size_t k = 0; k < ncalls; k++) {
            const json_t *c = json_array_get(calls, k);
            double dur = (double)ns[(size_t)r * ncalls + k] / 1000.0;
            json_array_append_new(events, json_pack("{s:s, s:s, s:s, s:f, s:f, s:i, s:i, s:{s:O*, s:I, s:i}}", "name",
                                                    json_string_value(json_object_get(c, "function")), "cat",
                                                    strategy_of(c), "ph", "X", "ts", at, "dur", dur, "pid", 1, "tid",
                                                    1, "args", "nodes", json_object_get(c, "nodes"), "macs",
                                                    json_integer_value(json_object_get(c, "macs")), "run", r));
            at += dur;
        }
    json_t *doc = json_pack("{s:o, s:s}", "traceEvents", events, "displayTimeUnit", "ms");
    int rc = doc ? json_dump_file(doc, path, JSON_COMPACT) : -1;
    json_decref(doc);
    if (rc != 0) {
        tthctl_fail(err, TTHCTL_EXIT_IO, path, "cannot write the trace file");
        return -TTHCTL_EXIT_IO;
    }
    return 0;
}

/* Run `runs` times after one warm-up, reading the timing hooks after each run; print (or add to
 * out) the calls sorted by their median time. */
static int run_profile(tthrt_model *m, const tthctl_args *a, int runs, json_t *out, tthctl_error *err,
                       const char *ctx)
{
    size_t n = tthrt_model_profile_calls(m);
    const json_t *calls = json_object_get(json_object_get(tthrt_model_metadata(m), "profile"), "calls");
    if (n == 0) {
        tthctl_fail(err, TTHCTL_EXIT_FAILED, ctx, "the artifact was not compiled for profiling");
        tthctl_hint(err, "compile it with 'tthctl compile MODEL --target T --profile'");
        return -TTHCTL_EXIT_FAILED;
    }
    uint64_t *ns = calloc((size_t)runs * n, sizeof *ns), *col = malloc((size_t)runs * sizeof *col);
    double *whole = malloc((size_t)runs * sizeof *whole);
    prof_row *rows = calloc(n, sizeof *rows);
    tth_diag d;
    tth_diag_clear(&d);
    int rc = 0;
    if (!ns || !col || !whole || !rows) {
        tthctl_fail(err, TTHCTL_EXIT_FAILED, NULL, "out of memory");
        rc = -TTHCTL_EXIT_FAILED;
        goto done;
    }
    tthrt_timing t;
    if (tthrt_model_run(m, 1, &t, &d) < 0) { /* warm-up */
        rc = tthctl_from_diag(err, &d, ctx);
        goto done;
    }
    for (int r = 0; r < runs; r++) {
        tthrt_model_profile_reset(m);
        if (tthrt_model_run(m, 1, &t, &d) < 0) {
            rc = tthctl_from_diag(err, &d, ctx);
            goto done;
        }
        whole[r] = t.median_ms;
        tthrt_model_profile_read(m, ns + (size_t)r * n, NULL, n);
    }
    double sum_median = 0;
    for (size_t k = 0; k < n; k++) {
        for (int r = 0; r < runs; r++)
            col[r] = ns[(size_t)r * n + k];
        qsort(col, (size_t)runs, sizeof *col, cmp_u64);
        rows[k].k = k;
        rows[k].min_us = (double)col[0] / 1000.0;
        rows[k].median_us = (runs % 2 ? (double)col[runs / 2] : ((double)col[runs / 2 - 1] + (double)col[runs / 2]) / 2) / 1000.0;
        sum_median += rows[k].median_us;
    }
    qsort(whole, (size_t)runs, sizeof *whole, cmp_double_ms);
    double whole_ms = runs % 2 ? whole[runs / 2] : (whole[runs / 2 - 1] + whole[runs / 2]) / 2;
    qsort(rows, n, sizeof *rows, by_time);
    if (a->json) {
        json_t *list = json_array();
        for (size_t i = 0; i < n; i++) {
            json_t *c = json_deep_copy(json_array_get(calls, rows[i].k));
            double macs = (double)json_integer_value(json_object_get(c, "macs"));
            json_object_set_new(c, "median_us", json_real(rows[i].median_us));
            json_object_set_new(c, "min_us", json_real(rows[i].min_us));
            json_object_set_new(c, "share", json_real(sum_median > 0 ? rows[i].median_us / sum_median : 0));
            json_object_set_new(c, "gflops", json_real(rows[i].median_us > 0 ? 2 * macs / rows[i].median_us / 1e3 : 0));
            json_array_append_new(list, c);
        }
        json_object_set_new(out, "profile", json_pack("{s:i, s:f, s:f, s:o}", "runs", runs, "whole_median_ms", whole_ms,
                                                      "calls_median_sum_ms", sum_median / 1000.0, "calls", list));
    } else {
        printf("profile of %zu calls over %d runs (after one warm-up): the whole run %.3f ms (median), its calls' "
               "medians add up to %.3f ms\n", n, runs, whole_ms, sum_median / 1000.0);
        printf("%5s %10s %6s %8s %10s  %-28s %-24s %-34s %s\n", "#", "median us", "share", "MMACs", "GFLOP/s",
               "function", "strategy", "outputs", "ONNX nodes");
        for (size_t i = 0; i < n; i++) {
            const json_t *c = json_array_get(calls, rows[i].k);
            char nodes[160], shapes[160];
            nodes_text(json_object_get(c, "nodes"), nodes, sizeof nodes);
            shapes_text(json_object_get(c, "outputs"), shapes, sizeof shapes);
            double macs = (double)json_integer_value(json_object_get(c, "macs"));
            printf("%5zu %10.1f %5.1f%% %8.2f %10.1f  %-28s %-24s %-34s %s\n", rows[i].k, rows[i].median_us,
                   sum_median > 0 ? 100 * rows[i].median_us / sum_median : 0, macs / 1e6,
                   rows[i].median_us > 0 ? 2 * macs / rows[i].median_us / 1e3 : 0,
                   json_string_value(json_object_get(c, "function")), strategy_of(c), shapes, nodes);
        }
    }
    if (a->trace && (rc = write_trace(a->trace, calls, ns, runs, n, err)) < 0)
        goto done;
    rc = 0;
done:
    free(ns);
    free(col);
    free(whole);
    free(rows);
    return rc;
}

int tthctl_check_inputs(const tthctl_args *a, tthctl_error *err)
{
    for (size_t i = 0; i < a->n_inputs; i++) {
        const char *eq = strchr(a->inputs[i], '=');
        if (!eq || eq == a->inputs[i] || !eq[1]) {
            tthctl_fail(err, TTHCTL_EXIT_USAGE, NULL, "--input '%s' is not NAME=FILE", a->inputs[i]);
            tthctl_hint(err, "for example --input input=examples/digit_input.npy");
            return -TTHCTL_EXIT_USAGE;
        }
    }
    return 0;
}

int tthctl_cmd_run(const tthctl_args *a, tthctl_error *err)
{
    const char *path = a->pos[0];
    const char *dir = a->output_dir ? a->output_dir : ".";
    char ctx[PATH_MAX + 16];
    snprintf(ctx, sizeof ctx, "artifact '%s'", path);
    int repeat, rc = parse_repeat(a->repeat, &repeat, err);
    if (rc < 0)
        return rc;
    if (a->profile && !a->repeat)
        repeat = 20;
    if (a->trace && !a->profile) {
        tthctl_fail(err, TTHCTL_EXIT_USAGE, NULL, "--trace FILE writes a profile: give --profile too");
        return -TTHCTL_EXIT_USAGE;
    }
    if ((rc = tthctl_check_inputs(a, err)) < 0)
        return rc;

    tth_diag d;
    tth_diag_clear(&d);
    tthrt_model *m = NULL;
    json_t *paths = NULL, *out = NULL;
    if (tthrt_model_open(path, &m, &d) < 0)
        return tthctl_from_diag(err, &d, ctx);
    for (size_t i = 0; i < a->n_inputs; i++) {
        const char *eq = strchr(a->inputs[i], '=');
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(eq - a->inputs[i]), a->inputs[i]);
        if (tthrt_model_bind_file(m, name, eq + 1, &d) < 0) {
            rc = tthctl_from_diag(err, &d, ctx);
            goto done;
        }
    }
    tthrt_timing timing = {0};
    out = json_pack("{s:s, s:[]}", "model", tthrt_model_name(m), "outputs");
    if (a->profile && (rc = run_profile(m, a, repeat, out, err, ctx)) < 0)
        goto done;
    if (tthrt_model_run(m, a->profile ? 1 : repeat, &timing, &d) < 0) {
        rc = tthctl_from_diag(err, &d, ctx);
        goto done;
    }
    if (tthrt_model_write_outputs(m, dir, &paths, &d) < 0) {
        char dctx[PATH_MAX + 16];
        snprintf(dctx, sizeof dctx, "directory '%s'", dir);
        rc = tthctl_from_diag(err, &d, dctx);
        goto done;
    }
    if (!a->json)
        printf("model %s: %zu input(s), %zu output(s)\n", tthrt_model_name(m), tthrt_model_input_count(m),
               tthrt_model_output_count(m));
    for (size_t i = 0; i < tthrt_model_output_count(m); i++) {
        tthrt_array view;
        if (tthrt_model_output_array(m, i, &view, &d) < 0) {
            rc = tthctl_from_diag(err, &d, ctx);
            goto done;
        }
        const char *file = json_string_value(json_array_get(paths, i));
        if (a->json)
            json_array_append_new(json_object_get(out, "outputs"), output_json(&view, file));
        else
            print_output(&view, file);
    }
    if (a->json) {
        json_object_set_new(out, "timing", json_pack("{s:i, s:f, s:f, s:f}", "runs", timing.runs, "min_ms",
                                                     timing.min_ms, "median_ms", timing.median_ms, "mean_ms",
                                                     timing.mean_ms));
        tthctl_json_print(out);
    } else if (repeat > 1 && !a->profile) {
        printf("latency over %d runs: min %.3f ms, median %.3f ms\n", timing.runs, timing.min_ms,
               timing.median_ms);
    }
    rc = 0;
done:
    json_decref(out);
    json_decref(paths);
    tthrt_model_close(m);
    return rc;
}
