/* output.c: how tthctl shows errors, diagnostics, progress and sizes. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tthproto/errors.h>
#include <tthproto/jsonrpc.h>

#include "tthctl.h"

void tthctl_error_clear(tthctl_error *e)
{
    json_decref(e->rpc);
    memset(e, 0, sizeof *e);
}

int tthctl_fail(tthctl_error *e, int exit, const char *location, const char *fmt, ...)
{
    e->exit = exit;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    snprintf(e->location, sizeof e->location, "%s", location ? location : "");
    e->hint[0] = '\0';
    tthp_utf8_trim_end(e->message);
    tthp_utf8_trim_end(e->location);
    return -exit;
}

void tthctl_hint(tthctl_error *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->hint, sizeof e->hint, fmt, ap);
    va_end(ap);
    tthp_utf8_trim_end(e->hint);
}

void tthctl_error_context(tthctl_error *e, const char *fmt, ...)
{
    if (e->location[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->location, sizeof e->location, fmt, ap);
    va_end(ap);
    tthp_utf8_trim_end(e->location);
}

static const char *severity_word(json_int_t sev)
{
    switch (sev) {
    case 2: return "warning";
    case 3: return "note";
    case 4: return "hint";
    default: return "error";
    }
}

/* One diagnostic block. */
static void print_one(FILE *f, const char *severity, const char *message, const char *location,
                      const char *hint, const char *context)
{
    fprintf(f, "tthctl: %s: %s\n", severity, message && *message ? message : "(no message)");
    int has_context = context && *context;
    size_t ll = location ? strlen(location) : 0;
    if (ll && has_context && strncmp(context, location, ll) == 0 && context[ll] == ' ')
        fprintf(f, "  at: %s\n", context); /* "model" and the context "model 'x.onnx'" */
    else if (location && *location && has_context && !strchr(location, '\''))
        fprintf(f, "  at: '%s' in %s\n", location, context); /* a bare token: say where it is */
    else if (location && *location)
        fprintf(f, "  at: %s\n", location);
    else if (has_context)
        fprintf(f, "  at: %s\n", context);
    if (hint && *hint)
        fprintf(f, "  hint: %s\n", hint);
}

static const char *jstr(const json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : "";
}

void tthctl_diagnostics_print(FILE *f, const json_t *diagnostics, const char *context)
{
    size_t i;
    json_t *d;
    json_array_foreach(diagnostics, i, d) {
        if (!json_is_object(d))
            continue;
        print_one(f, severity_word(json_integer_value(json_object_get(d, "severity"))),
                  jstr(d, "message"), jstr(d, "location"), jstr(d, "hint"), context);
    }
}

/* Does any diagnostic of the array have error severity? */
static int has_error_diag(const json_t *diagnostics)
{
    size_t i;
    json_t *d;
    json_array_foreach(diagnostics, i, d) {
        json_int_t sev = json_integer_value(json_object_get(d, "severity"));
        if (sev == 0 || sev == 1)
            return 1;
    }
    return 0;
}

void tthctl_error_print(FILE *f, const tthctl_error *err)
{
    const char *context = err->location;
    if (err->rpc) {
        const json_t *data = json_object_get(err->rpc, "data");
        const json_t *diags = json_object_get(data, "diagnostics");
        if (json_array_size(diags) > 0 && has_error_diag(diags)) {
            tthctl_diagnostics_print(f, diags, context);
            return;
        }
        int code = (int)json_integer_value(json_object_get(err->rpc, "code"));
        const char *name = TTHP_CODE_TO_TTH(code) ? jstr(data, "tthCode") : tthp_error_name(code);
        char msg[1024];
        snprintf(msg, sizeof msg, "%s (%s, code %d)", jstr(err->rpc, "message"),
                 *name ? name : "libtth", code);
        print_one(f, "error", msg, err->location, err->hint, NULL);
        if (json_array_size(diags) > 0)
            tthctl_diagnostics_print(f, diags, context);
        return;
    }
    print_one(f, "error", err->message, err->location, err->hint, NULL);
}

void tthctl_json_print(const json_t *v)
{
    json_dumpf(v, stdout, JSON_INDENT(2) | JSON_ENCODE_ANY);
    fputc('\n', stdout);
}

const char *tthctl_size_str(double bytes, char *buf, size_t len)
{
    static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    size_t u = 0;
    while (bytes >= 1024 && u + 1 < sizeof units / sizeof units[0]) {
        bytes /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%.0f %s", bytes, units[0]);
    else
        snprintf(buf, len, "%.1f %s", bytes, units[u]);
    return buf;
}

const char *tthctl_join(const json_t *arr, char *buf, size_t len)
{
    size_t used = 0, i;
    json_t *v;
    buf[0] = '\0';
    json_array_foreach(arr, i, v) {
        const char *s = json_string_value(v);
        if (!s)
            continue;
        int n = snprintf(buf + used, len - used, "%s%s", used ? ", " : "", s);
        if (n < 0 || (size_t)n >= len - used)
            break;
        used += (size_t)n;
    }
    if (!used)
        snprintf(buf, len, "-");
    return buf;
}

/* ---- progress ---- */

void tthctl_progress_init(tthctl_progress *p, int quiet)
{
    memset(p, 0, sizeof *p);
    p->quiet = quiet;
    p->tty = isatty(STDERR_FILENO);
    p->last_pct = -1;
}

void tthctl_progress_update(tthctl_progress *p, const json_t *params)
{
    if (p->quiet)
        return;
    const char *kind = jstr(params, "kind");
    const char *stage = jstr(params, "stage");
    const char *message = jstr(params, "message");
    int pct = (int)json_integer_value(json_object_get(params, "percentage"));
    if (pct < 0)
        pct = 0;
    if (pct > 100)
        pct = 100;
    if (p->tty) {
        enum { WIDTH = 30 };
        char bar[WIDTH + 1];
        int fill = pct * WIDTH / 100;
        for (int i = 0; i < WIDTH; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[WIDTH] = '\0';
        fprintf(stderr, "\r\033[K[%s] %3d%% %s%s%.60s", bar, pct, stage, *message ? ": " : "", message);
        fflush(stderr);
        p->shown = 1;
        if (strcmp(kind, "end") == 0)
            tthctl_progress_done(p);
        return;
    }
    /* Plain lines: one per change of stage or percentage. */
    if (pct == p->last_pct && strcmp(stage, p->last_stage) == 0)
        return;
    p->last_pct = pct;
    snprintf(p->last_stage, sizeof p->last_stage, "%s", stage);
    fprintf(stderr, "tthctl: [%3d%%] %s%s%s\n", pct, stage, *message ? ": " : "", message);
}

void tthctl_progress_done(tthctl_progress *p)
{
    if (p->tty && p->shown) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    p->shown = 0;
}

/* ---- nearest name ---- */

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t *row = malloc((lb + 1) * sizeof *row);
    if (!row)
        return (size_t)-1;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    size_t d = row[lb];
    free(row);
    return d;
}

const char *tthctl_nearest(const char *word, const char *const *names, size_t n)
{
    size_t limit = strlen(word) / 3;
    if (limit < 2)
        limit = 2;
    const char *best = NULL;
    size_t best_d = (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        if (!names[i])
            continue;
        size_t d = edit_distance(word, names[i]);
        /* a prefix of a name counts as close ("comp" for "compile") */
        if (strlen(word) >= 2 && strncmp(word, names[i], strlen(word)) == 0)
            d = d < 1 ? d : 1;
        if (d < best_d) {
            best_d = d;
            best = names[i];
        }
    }
    return best_d <= limit ? best : NULL;
}
