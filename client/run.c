/* run.c: `tthctl run ARTIFACT --input NAME=FILE ...`: run an artifact on this machine through
 * the runtime library (runtime/tthrt.h). No daemon is involved. */
#include <errno.h>
#include <limits.h>
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
static int from_diag(tthctl_error *err, const tth_diag *d, const char *context)
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
static double element(const tthrt_array *a, int64_t i)
{
    tth_tensor t = {.data = a->data, .nbytes = a->nbytes, .refcount = 1};
    t.type.dtype = a->dtype;
    t.type.rank = a->rank;
    memcpy(t.type.shape, a->shape, sizeof t.type.shape);
    return tth_tensor_get_f64(&t, i);
}

static int64_t numel(const tthrt_array *a)
{
    int64_t n = 1;
    for (int32_t d = 0; d < a->rank; d++)
        n *= a->shape[d];
    return n;
}

/* One row: rank 1, or every dimension but the last equal to 1. */
static int one_row(const tthrt_array *a)
{
    if (a->rank < 1)
        return 0;
    for (int32_t d = 0; d + 1 < a->rank; d++)
        if (a->shape[d] != 1)
            return 0;
    return a->shape[a->rank - 1] > 1;
}

static int64_t argmax(const tthrt_array *a)
{
    int64_t best = 0, n = numel(a);
    for (int64_t i = 1; i < n; i++)
        if (element(a, i) > element(a, best))
            best = i;
    return best;
}

static json_t *shape_json(const tthrt_array *a)
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
    int64_t n = numel(a);
    printf("%s: %s [%s]\n  values:", a->name ? a->name : "?", tth_dtype_name(a->dtype), shape);
    for (int64_t i = 0; i < n && i < SHOW_VALUES; i++)
        printf(" %.6g", element(a, i));
    printf("%s\n", n > SHOW_VALUES ? " ..." : "");
    if (one_row(a)) {
        int64_t k = argmax(a);
        printf("  argmax: %lld (%.6g)\n", (long long)k, element(a, k));
    }
    if (file)
        printf("  wrote %s\n", file);
}

static json_t *output_json(const tthrt_array *a, const char *file)
{
    json_t *o = json_pack("{s:s, s:o, s:s}", "name", a->name ? a->name : "", "shape", shape_json(a), "dtype",
                          tth_dtype_name(a->dtype));
    json_t *vals = json_array();
    int64_t n = numel(a);
    for (int64_t i = 0; i < n && i < SHOW_VALUES; i++)
        json_array_append_new(vals, json_real(element(a, i)));
    json_object_set_new(o, "values", vals);
    if (one_row(a))
        json_object_set_new(o, "argmax", json_integer(argmax(a)));
    if (file)
        json_object_set_new(o, "file", json_string(file));
    return o;
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
    for (size_t i = 0; i < a->n_inputs; i++) {
        const char *eq = strchr(a->inputs[i], '=');
        if (!eq || eq == a->inputs[i] || !eq[1]) {
            tthctl_fail(err, TTHCTL_EXIT_USAGE, NULL, "--input '%s' is not NAME=FILE", a->inputs[i]);
            tthctl_hint(err, "for example --input input=examples/digit_input.npy");
            return -TTHCTL_EXIT_USAGE;
        }
    }

    tth_diag d;
    tth_diag_clear(&d);
    tthrt_model *m = NULL;
    json_t *paths = NULL, *out = NULL;
    if (tthrt_model_open(path, &m, &d) < 0)
        return from_diag(err, &d, ctx);
    for (size_t i = 0; i < a->n_inputs; i++) {
        const char *eq = strchr(a->inputs[i], '=');
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(eq - a->inputs[i]), a->inputs[i]);
        if (tthrt_model_bind_file(m, name, eq + 1, &d) < 0) {
            rc = from_diag(err, &d, ctx);
            goto done;
        }
    }
    tthrt_timing timing = {0};
    if (tthrt_model_run(m, repeat, &timing, &d) < 0) {
        rc = from_diag(err, &d, ctx);
        goto done;
    }
    if (tthrt_model_write_outputs(m, dir, &paths, &d) < 0) {
        char dctx[PATH_MAX + 16];
        snprintf(dctx, sizeof dctx, "directory '%s'", dir);
        rc = from_diag(err, &d, dctx);
        goto done;
    }
    out = json_pack("{s:s, s:[]}", "model", tthrt_model_name(m), "outputs");
    if (!a->json)
        printf("model %s: %zu input(s), %zu output(s)\n", tthrt_model_name(m), tthrt_model_input_count(m),
               tthrt_model_output_count(m));
    for (size_t i = 0; i < tthrt_model_output_count(m); i++) {
        tthrt_array view;
        if (tthrt_model_output_array(m, i, &view, &d) < 0) {
            rc = from_diag(err, &d, ctx);
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
    } else if (repeat > 1) {
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
