/* daemon.c: the commands that are one request to tthd and a printout of its answer. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tthproto/jsonrpc.h>

#include "tthctl.h"

static const char *jstr(const json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : "";
}

static json_int_t jint(const json_t *obj, const char *key)
{
    return json_integer_value(json_object_get(obj, key));
}

/* Connect (starting tthd when allowed), make one request, hand back the result. */
static int one_call(const tthctl_args *a, int no_start, const char *method, json_t *params_new,
                    json_t **result, tthctl_error *err)
{
    tthctl_conn *c = NULL;
    int rc = tthctl_conn_open(a, no_start, &c, err);
    if (rc < 0) {
        json_decref(params_new);
        return rc;
    }
    rc = tthctl_conn_call(c, method, params_new, result, err);
    tthctl_conn_close(c);
    return rc;
}

/* ---- status ---- */

static void print_status(const json_t *r)
{
    char b1[32], b2[32];
    const json_t *req = json_object_get(r, "requests");
    const json_t *cache = json_object_get(r, "cache");
    const json_t *w = json_object_get(r, "workers");
    printf("tthd %s (protocol %s), pid %lld, up %.1f s\n", jstr(r, "version"), jstr(r, "protocolVersion"),
           (long long)jint(r, "pid"), json_number_value(json_object_get(r, "uptimeSeconds")));
    printf("socket:       %s\n", jstr(r, "socket"));
    /* the plugins path, one directory a line, in search order */
    const json_t *path = json_object_get(r, "pluginsPath");
    if (json_array_size(path)) {
        for (size_t i = 0; i < json_array_size(path); i++)
            printf("%s%s\n", i ? "              " : "plugins:      ", json_string_value(json_array_get(path, i)));
    } else {
        printf("plugins:      %s\n", jstr(r, "pluginsDir"));
    }
    /* (only an all-absolute value compares: tthd makes relative entries absolute) */
    const char *want = getenv("TTH_PLUGINS_PATH");
    int absolute = want && want[0] == '/';
    for (const char *c = want; absolute && (c = strchr(c, ':')) != NULL; c++)
        absolute = c[1] == '/';
    if (absolute && json_array_size(path) && strcmp(want, jstr(r, "pluginsDir")) != 0)
        fprintf(stderr, "tthctl: note: $TTH_PLUGINS_PATH is not the running daemon's plugins path; tthd reads it "
                        "when it starts ('tthctl stop', then any command starts it again)\n");
    printf("cache:        %s\n", jstr(r, "cacheDir"));
    printf("              %lld entries, %s of %s; %lld hits, %lld misses\n", (long long)jint(cache, "entries"),
           tthctl_size_str((double)jint(cache, "bytes"), b1, sizeof b1),
           tthctl_size_str((double)jint(cache, "maxBytes"), b2, sizeof b2), (long long)jint(cache, "hits"),
           (long long)jint(cache, "misses"));
    const json_t *cs = json_object_get(r, "codeStore");
    if (json_is_object(cs))
        printf("              compiled code kept for reuse: %lld pieces, %s of %s\n", (long long)jint(cs, "entries"),
               tthctl_size_str((double)jint(cs, "bytes"), b1, sizeof b1),
               tthctl_size_str((double)jint(cs, "maxBytes"), b2, sizeof b2));
    const json_t *rc = json_object_get(r, "remoteCache");
    if (json_is_object(rc)) {
        printf("remote cache: %s (%s)\n", jstr(rc, "address"), jstr(rc, "state"));
        printf("              %lld hits, %lld misses, %lld stored; %lld errors, %lld corrupt, %lld skipped while down, "
               "%lld too large\n",
               (long long)jint(rc, "hits"), (long long)jint(rc, "misses"), (long long)jint(rc, "stores"),
               (long long)jint(rc, "errors"), (long long)jint(rc, "corrupt"), (long long)jint(rc, "skipped"),
               (long long)jint(rc, "tooBig"));
        if (*jstr(rc, "lastError"))
            printf("              last error: %s\n", jstr(rc, "lastError"));
    } else {
        printf("remote cache: none (tthd --cache-redis, or $TTH_CACHE_REDIS when it starts)\n");
    }
    printf("requests:     %lld served, %lld failed, %lld active\n", (long long)jint(req, "served"),
           (long long)jint(req, "failed"), (long long)jint(req, "active"));
    printf("workers:      %lld configured, %lld alive, %lld busy; %lld spawned, %lld crashed, %lld killed; "
           "plugin generation %lld\n",
           (long long)jint(w, "configured"), (long long)jint(w, "alive"), (long long)jint(w, "busy"),
           (long long)jint(w, "spawned"), (long long)jint(w, "crashed"), (long long)jint(w, "killed"),
           (long long)jint(w, "generation"));
    printf("connections:  %lld\n", (long long)jint(r, "connections"));
}

/* A command that asks the daemon one question without parameters and prints the answer: as JSON
 * with --json, else with `print`. */
static int query(const tthctl_args *a, const char *method, void (*print)(const json_t *), tthctl_error *err)
{
    json_t *r = NULL;
    int rc = one_call(a, 0, method, NULL, &r, err);
    if (rc < 0)
        return rc;
    if (a->json)
        tthctl_json_print(r);
    else
        print(r);
    json_decref(r);
    return 0;
}

int tthctl_cmd_status(const tthctl_args *a, tthctl_error *err)
{
    return query(a, "status", print_status, err);
}

/* ---- targets ---- */

static void print_kinds(const json_t *r)
{
    size_t i, j;
    json_t *k, *at;
    char keys[512], flags[256], hooks[512];
    const json_t *kinds = json_object_get(r, "kinds");
    if (json_array_size(kinds) == 0) {
        printf("no target kinds: the daemon loaded no plugin (see 'tthctl plugins')\n");
        return;
    }
    json_array_foreach(kinds, i, k) {
        printf("%s%s (plugin %s)\n", i ? "\n" : "", jstr(k, "kind"), jstr(k, "plugin"));
        if (*jstr(k, "doc"))
            printf("  %s\n", jstr(k, "doc"));
        printf("  device type %lld; default keys: %s; flags: %s\n", (long long)jint(k, "device_type"),
               tthctl_join(json_object_get(k, "default_keys"), keys, sizeof keys),
               tthctl_join(json_object_get(k, "flags"), flags, sizeof flags));
        printf("  hooks: %s\n", tthctl_join(json_object_get(k, "hooks"), hooks, sizeof hooks));
        const json_t *attrs = json_object_get(k, "attrs");
        if (json_array_size(attrs))
            printf("  attributes:\n");
        json_array_foreach(attrs, j, at) {
            char spec[160], dflt[160] = "";
            snprintf(spec, sizeof spec, "-%s=<%s>", jstr(at, "name"), jstr(at, "type"));
            const json_t *d = json_object_get(at, "default");
            if (d && !json_is_null(d)) {
                char *txt = json_dumps(d, JSON_COMPACT | JSON_ENCODE_ANY);
                snprintf(dflt, sizeof dflt, " (default %s)", txt ? txt : "?");
                free(txt);
            }
            printf("    %-28s %s%s\n", spec, jstr(at, "doc"), dflt);
        }
    }
}

int tthctl_cmd_targets(const tthctl_args *a, tthctl_error *err)
{
    return query(a, "targets/list", print_kinds, err);
}

/* ---- target recent ---- */

static void print_recent(const json_t *r)
{
    const json_t *list = json_object_get(r, "targets");
    if (json_array_size(list) == 0)
        printf("no recent targets: no compile has succeeded on this daemon yet\n");
    size_t i;
    json_t *t;
    json_array_foreach(list, i, t) {
        char when[64] = "?";
        time_t at = (time_t)jint(t, "lastUsed");
        struct tm tm;
        if (localtime_r(&at, &tm))
            strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm);
        long long uses = (long long)jint(t, "uses");
        printf("%s\n  %s\n  last %s (%s), %lld compile%s\n", jstr(t, "target"), jstr(t, "string"), when,
               jstr(t, "model"), uses, uses == 1 ? "" : "s");
    }
}

int tthctl_cmd_target_recent(const tthctl_args *a, tthctl_error *err)
{
    return query(a, "targets/recent", print_recent, err);
}

/* ---- tags ---- */

static void print_tags(const json_t *r)
{
    const json_t *tags = json_object_get(r, "tags");
    if (json_array_size(tags) == 0)
        printf("no tags: the daemon loaded no plugin that defines one (see 'tthctl plugins')\n");
    size_t i;
    json_t *t;
    json_array_foreach(tags, i, t) {
        char aliases[512];
        char *config = json_dumps(json_object_get(t, "config"), JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
        printf("%-24s kind %-10s aliases: %s\n", jstr(t, "name"), jstr(t, "kind"),
               tthctl_join(json_object_get(t, "aliases"), aliases, sizeof aliases));
        if (*jstr(t, "doc"))
            printf("  %s\n", jstr(t, "doc"));
        if (config)
            printf("  %s\n", config);
        free(config);
    }
}

int tthctl_cmd_tags(const tthctl_args *a, tthctl_error *err)
{
    return query(a, "tags/list", print_tags, err);
}

/* ---- plugins ---- */

static void print_plugins(const json_t *r)
{
    const json_t *plugins = json_object_get(r, "plugins");
    const json_t *errors = json_object_get(r, "errors");
    printf("directory %s (generation %lld): %zu loaded, %zu refused\n", jstr(r, "directory"),
           (long long)jint(r, "generation"), json_array_size(plugins), json_array_size(errors));
    size_t i;
    json_t *p;
    json_array_foreach(plugins, i, p) {
        char hooks[512];
        printf("  %s %s: kind %s, hooks: %s\n", jstr(p, "name"), jstr(p, "version"), jstr(p, "kind"),
               tthctl_join(json_object_get(p, "hooks"), hooks, sizeof hooks));
        printf("    %s\n    %s\n", jstr(p, "path"), jstr(p, "identity"));
    }
    json_array_foreach(errors, i, p) {
        printf("  refused %s: %s: %s\n", jstr(p, "path"), jstr(p, "code"), jstr(p, "message"));
        if (*jstr(p, "hint"))
            printf("    hint: %s\n", jstr(p, "hint"));
    }
}

int tthctl_cmd_plugins(const tthctl_args *a, tthctl_error *err)
{
    return query(a, "plugins/list", print_plugins, err);
}

/* ---- target parse ---- */

/* A target argument: JSON text when it starts with '{'; "@FILE" or a name ending in ".json" is a
 * JSON file read here (the daemon's working directory is not ours); else the string form or a
 * tag, sent as it is. */
static json_t *target_param(const char *text, tthctl_error *err)
{
    const char *p = text;
    while (*p == ' ' || *p == '\t' || *p == '\n')
        p++;
    size_t n = strlen(p);
    int is_file = *p == '@' || (n > 5 && strcmp(p + n - 5, ".json") == 0 && !strchr(p, ' '));
    if (*p != '{' && !is_file)
        return json_string(text);
    json_error_t je;
    json_t *obj;
    char loc[600];
    if (is_file) {
        const char *path = *p == '@' ? p + 1 : p;
        obj = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
        if (obj)
            snprintf(loc, sizeof loc, "file '%.500s'", path);
        else
            snprintf(loc, sizeof loc, "file '%.500s', line %d", path, je.line);
        if (!obj && access(path, R_OK) != 0) {
            snprintf(loc, sizeof loc, "file '%.500s'", path);
            tthctl_fail(err, TTHCTL_EXIT_IO, loc, "cannot read the target file: %s", strerror(errno));
            return NULL;
        }
    } else {
        obj = json_loads(text, JSON_REJECT_DUPLICATES, &je);
        snprintf(loc, sizeof loc, "target '%.500s', column %d", text, je.column);
    }
    if (!obj || !json_is_object(obj)) {
        tthctl_fail(err, TTHCTL_EXIT_USAGE, loc, "%s%s%s",
                    is_file ? "the target file does not hold a JSON object"
                            : "the target looks like JSON but is not a JSON object",
                    obj ? "" : ": ", obj ? "" : je.text);
        json_decref(obj);
        return NULL;
    }
    return obj;
}

int tthctl_target_param(const char *text, json_t **out, tthctl_error *err)
{
    *out = target_param(text, err);
    return *out ? 0 : -err->exit;
}

int tthctl_cmd_target_parse(const tthctl_args *a, tthctl_error *err)
{
    const char *text = a->pos[0];
    json_t *t = NULL;
    int rc = tthctl_target_param(text, &t, err);
    if (rc < 0)
        return rc;
    json_t *r = NULL;
    rc = one_call(a, 0, "target/parse", json_pack("{s:o}", "target", t), &r, err);
    if (rc < 0) {
        tthctl_error_context(err, "target '%s'", text);
        return rc;
    }
    if (a->json) {
        tthctl_json_print(r);
    } else {
        char keys[512];
        printf("string: %s\n", jstr(r, "string"));
        printf("json:   %s\n", jstr(r, "json"));
        printf("keys:   %s\n", tthctl_join(json_object_get(r, "keys"), keys, sizeof keys));
        size_t i;
        json_t *k;
        json_array_foreach(json_object_get(r, "kinds"), i, k)
            printf("kind:   %s (plugin %s, %s)\n", jstr(k, "kind"), jstr(k, "plugin"), jstr(k, "identity"));
    }
    char ctx[600];
    snprintf(ctx, sizeof ctx, "target '%.500s'", text);
    tthctl_diagnostics_print(stderr, json_object_get(r, "diagnostics"), ctx);
    json_decref(r);
    return 0;
}

/* ---- cache clear ---- */

int tthctl_cmd_cache_clear(const tthctl_args *a, tthctl_error *err)
{
    json_t *r = NULL;
    int rc = one_call(a, 0, "cache/clear", NULL, &r, err);
    if (rc < 0)
        return rc;
    if (a->json) {
        tthctl_json_print(r);
    } else {
        char b[32];
        printf("removed %lld cache entries (%s) and %lld pieces of compiled code\n", (long long)jint(r, "removedEntries"),
               tthctl_size_str((double)jint(r, "removedBytes"), b, sizeof b), (long long)jint(r, "removedCode"));
    }
    json_decref(r);
    return 0;
}

/* ---- stop ---- */

/* Is process pid gone (or a zombie nobody reaped yet)? */
static int process_gone(pid_t pid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return kill(pid, 0) < 0 && errno == ESRCH;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')');
    return paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

/* Wait until the daemon closed our connection, then until its process is gone. */
static int wait_gone(tthctl_conn *c, pid_t pid, int timeout_ms)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        long elapsed = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
        if (elapsed >= timeout_ms)
            return 0;
        if (c->fd >= 0) {
            tthp_frame fr;
            int rc = tthp_fd_read_frame(&c->reader, &fr, 100);
            if (rc == 1 || rc == -ETIMEDOUT)
                continue; /* messages after the answer (ShuttingDown for nothing) are ignored */
            tthp_fd_reader_free(&c->reader);
            close(c->fd);
            c->fd = -1;
        }
        if (pid <= 0 || process_gone(pid))
            return 1;
        struct timespec nap = {0, 20 * 1000000L};
        nanosleep(&nap, NULL);
    }
}

int tthctl_cmd_stop(const tthctl_args *a, tthctl_error *err)
{
    tthctl_conn *c = NULL;
    int rc = tthctl_conn_open(a, 1, &c, err);
    if (rc < 0) {
        if (err->sys_errno == ENOENT || err->sys_errno == ECONNREFUSED) {
            /* nothing to stop is not a failure: stop is idempotent */
            const char *sock = a->socket;
            char path[128];
            if (!sock && tthctl_socket_default(path, sizeof path, err) == 0)
                sock = path;
            if (a->json)
                printf("{\"stopped\": false, \"running\": false}\n");
            else
                printf("tthd is not running on %s\n", sock ? sock : "the default socket");
            tthctl_error_clear(err);
            return 0;
        }
        return rc;
    }
    json_t *st = NULL;
    rc = tthctl_conn_call(c, "status", NULL, &st, err);
    if (rc < 0) {
        tthctl_conn_close(c);
        return rc;
    }
    pid_t pid = (pid_t)jint(st, "pid");
    json_decref(st);
    json_t *r = NULL;
    rc = tthctl_conn_call(c, "shutdown", NULL, &r, err);
    json_decref(r);
    if (rc < 0) {
        tthctl_conn_close(c);
        return rc;
    }
    /* in-flight requests get 5 s (PROTOCOL.md: shutdown); give the process a little more */
    int gone = wait_gone(c, pid, 8000);
    tthctl_conn_close(c);
    if (!gone) {
        tthctl_fail(err, TTHCTL_EXIT_FAILED, NULL,
                    "tthd (pid %d) accepted the shutdown but is still running after 8 s", (int)pid);
        tthctl_hint(err, "kill %d", (int)pid);
        return -TTHCTL_EXIT_FAILED;
    }
    if (a->json)
        printf("{\"stopped\": true, \"pid\": %d}\n", (int)pid);
    else
        printf("stopped tthd (pid %d)\n", (int)pid);
    return 0;
}
