/* recent.c: the targets of the last compiles that succeeded (protocol/PROTOCOL.md,
 * `targets/recent`), newest first, for clients that offer them again (the editor's "Compile for
 * target..." pick, docs/editor.md).
 *
 * A target is listed as the client gave it (its string, or its JSON object as compact text), so
 * that picking it again means what the user typed; its canonical string comes along. The list
 * is kept across restarts of tthd (which exits when idle) in <cache dir>/recent-targets.json,
 * written to a temporary file and renamed over it after each change. A file that cannot be
 * read or is not such a list is ignored (and replaced by the next compile's): the list is a
 * convenience, never a reason to fail. Without an absolute cache directory it lives in memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tthd.h"

#define RECENT_MAX 20

static int entry_ok(const json_t *e)
{
    return json_is_object(e) && json_is_string(json_object_get(e, "target")) &&
           json_is_string(json_object_get(e, "string")) && json_is_integer(json_object_get(e, "lastUsed")) &&
           json_is_integer(json_object_get(e, "uses"));
}

static void on_save(uv_timer_t *t);

void tthd_recent_init(tthd_recent *r, uv_loop_t *loop, const char *cache_dir)
{
    r->path = NULL;
    r->dirty = 0;
    r->list = json_array();
    uv_timer_init(loop, &r->save_timer);
    r->save_timer.data = r;
    if (!cache_dir || cache_dir[0] != '/')
        return;
    size_t n = strlen(cache_dir) + sizeof "/recent-targets.json";
    r->path = malloc(n);
    if (!r->path)
        return;
    snprintf(r->path, n, "%s/recent-targets.json", cache_dir);
    json_t *saved = json_load_file(r->path, JSON_REJECT_DUPLICATES, NULL);
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(saved, "recent"), i, e)
    {
        if (entry_ok(e) && json_array_size(r->list) < RECENT_MAX)
            json_array_append(r->list, e);
    }
    json_decref(saved);
}

static void save(tthd_recent *r)
{
    r->dirty = 0;
    if (!r->path)
        return;
    size_t n = strlen(r->path) + 16;
    char *tmp = malloc(n);
    if (!tmp)
        return;
    snprintf(tmp, n, "%s.tmp%ld", r->path, (long)getpid());
    json_t *doc = json_pack("{s:i, s:O}", "version", 1, "recent", r->list);
    if (doc && json_dump_file(doc, tmp, JSON_INDENT(1) | JSON_SORT_KEYS) == 0) {
        if (rename(tmp, r->path) != 0) {
            tthd_log(1, "recent targets: cannot rename %s to %s", tmp, r->path);
            remove(tmp);
        }
    } else {
        tthd_log(1, "recent targets: cannot write %s", tmp);
        remove(tmp);
    }
    json_decref(doc);
    free(tmp);
}

static void on_save(uv_timer_t *t)
{
    save(t->data);
}

void tthd_recent_note(tthd_recent *r, const json_t *given, const char *canonical, const char *model_name)
{
    if (!r->list || !canonical)
        return;
    char *text = json_is_string(given) ? strdup(json_string_value(given))
                                       : json_dumps(given, JSON_COMPACT | JSON_SORT_KEYS);
    if (!text)
        return;
    json_int_t uses = 0;
    size_t i;
    json_t *e;
    json_array_foreach(r->list, i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "target")), text) == 0) {
            uses = json_integer_value(json_object_get(e, "uses"));
            json_array_remove(r->list, i);
            break;
        }
    }
    json_t *entry = json_pack("{s:s, s:s, s:s?, s:I, s:I}", "target", text, "string", canonical, "model",
                              model_name, "lastUsed", (json_int_t)time(NULL), "uses", uses + 1);
    free(text);
    if (!entry)
        return;
    json_array_insert_new(r->list, 0, entry);
    while (json_array_size(r->list) > RECENT_MAX)
        json_array_remove(r->list, RECENT_MAX);
    r->dirty = 1;
    if (!uv_is_active((uv_handle_t *)&r->save_timer) && !uv_is_closing((uv_handle_t *)&r->save_timer))
        uv_timer_start(&r->save_timer, on_save, 1000, 0);
}

json_t *tthd_recent_list(const tthd_recent *r)
{
    return json_pack("{s:O}", "targets", r->list ? r->list : json_array());
}

void tthd_recent_close(tthd_recent *r)
{
    if (uv_is_closing((uv_handle_t *)&r->save_timer))
        return;
    if (r->dirty)
        save(r);
    uv_timer_stop(&r->save_timer);
    uv_close((uv_handle_t *)&r->save_timer, NULL);
}

void tthd_recent_free(tthd_recent *r)
{
    json_decref(r->list);
    free(r->path);
    r->list = NULL;
    r->path = NULL;
}
