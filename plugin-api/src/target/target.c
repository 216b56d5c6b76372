/* target.c: any written form of a target -> its canonical JSON.
 *
 * The pipeline for one target (canon_single), in order:
 *   1. fields: the object's fields, with an "attrs" sub-object (docs/targets.md, "Forms") flattened in;
 *   2. kind and tag: the tag (canonical name or alias) gives the kind and the base attributes;
 *   3. the user's fields override the tag's, each checked against the kind's schema;
 *   4. defaults of the schema fill what is missing; empty lists are dropped;
 *   5. keys: the user's keys, or the kind's default keys when the user gave none (TVM's rule),
 *      then `device`; deduplicated, first occurrence kept;
 *   6. host: the given one, or for a kind that needs a host the default host (an `llvm` target
 *      for this machine); a host is a target of a kind that can be a host, without a host itself;
 *   7. the kind's target_parser (through the registry), then the result is checked again: same
 *      kind, tag and host, only declared attributes of the right types, "features" an object;
 *      parser-derived keys come first (most specific first), then the rest, deduplicated.
 * A composite {"kind":"composite","targets":[...],"host":...} canonicalizes each member (members
 * have no host of their own) and takes the given host, else, when a member needs a host, its
 * last member when that kind can be a host (the fallback target runs the driving code), else the
 * default host.
 */
#include "target_private.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

const tth__common_attr tth__common_attrs[] = {
    {"device", TTH_ATTR_STRING}, {"host", TTH_ATTR_TARGET}, {"keys", TTH_ATTR_STRING_ARRAY},
    {"libs", TTH_ATTR_STRING_ARRAY}, {"model", TTH_ATTR_STRING}, {"tag", TTH_ATTR_STRING},
};
const size_t tth__n_common_attrs = sizeof tth__common_attrs / sizeof tth__common_attrs[0];

enum { ROLE_TOP, ROLE_HOST, ROLE_MEMBER };
#define MAX_DEPTH 8

typedef struct ctx {
    const tth_registry *reg;
    const tth_host *host;
    int depth;
} ctx;

static json_t *canon_any(ctx *c, const json_t *in, int role, tth_diag *d);

/* ---- small helpers ---- */

int tth__attr_type(const tth_plugin_descriptor *desc, const char *name)
{
    for (size_t i = 0; i < tth__n_common_attrs; i++)
        if (strcmp(tth__common_attrs[i].name, name) == 0)
            return tth__common_attrs[i].type;
    for (size_t i = 0; desc && desc->attrs && desc->attrs[i]; i++)
        if (strcmp(desc->attrs[i]->name, name) == 0)
            return desc->attrs[i]->type;
    return 0;
}

const tth_tag_def *tth__find_tag(const tth_registry *reg, const char *name, const tth_plugin **plugin)
{
    for (size_t i = 0; i < tth_registry_count(reg); i++) {
        const tth_plugin *p = tth_registry_plugin(reg, i);
        for (size_t k = 0; p->desc->tags && p->desc->tags[k]; k++) {
            const tth_tag_def *t = p->desc->tags[k];
            int hit = strcmp(t->name, name) == 0;
            for (size_t a = 0; !hit && t->aliases && t->aliases[a]; a++)
                hit = strcmp(t->aliases[a], name) == 0;
            if (hit) {
                if (plugin)
                    *plugin = p;
                return t;
            }
        }
    }
    return NULL;
}

const char **tth__collect_names(const tth_registry *reg, int what, size_t *n)
{
    size_t cap = 0;
    *n = 0;
    for (size_t i = 0; i < tth_registry_count(reg); i++) {
        const tth_plugin *p = tth_registry_plugin(reg, i);
        cap += 1;
        for (size_t k = 0; p->desc->tags && p->desc->tags[k]; k++) {
            cap += 1;
            for (size_t a = 0; p->desc->tags[k]->aliases && p->desc->tags[k]->aliases[a]; a++)
                cap += 1;
        }
    }
    if (cap == 0)
        return NULL;
    const char **v = malloc(cap * sizeof *v);
    if (!v)
        return NULL;
    for (size_t i = 0; i < tth_registry_count(reg); i++) {
        const tth_plugin *p = tth_registry_plugin(reg, i);
        if (what & 1)
            v[(*n)++] = p->desc->kind;
        for (size_t k = 0; (what & 2) && p->desc->tags && p->desc->tags[k]; k++) {
            v[(*n)++] = p->desc->tags[k]->name;
            for (size_t a = 0; p->desc->tags[k]->aliases && p->desc->tags[k]->aliases[a]; a++)
                v[(*n)++] = p->desc->tags[k]->aliases[a];
        }
    }
    return v;
}

int tth__unknown_kind_or_tag(const tth_registry *reg, const char *name, const char *where, tth_diag *d)
{
    int tag_like = strchr(name, '/') != NULL;
    if (tag_like)
        tth_diag_set(d, TTH_EUNKNOWN, where, "unknown tag '%s'", name);
    else
        tth_diag_set(d, TTH_EUNKNOWN, where, "unknown target kind or tag '%s'", name);
    size_t n;
    const char **names = tth__collect_names(reg, tag_like ? 2 : 3, &n);
    tth__hint_nearest(d, name, names, n,
                      tag_like ? "'tthctl tags' lists the tags" : "'tthctl targets' lists the kinds, 'tthctl tags' the tags");
    free(names);
    return TTH_EUNKNOWN;
}

static int unknown_kind(const tth_registry *reg, const char *name, const char *where, tth_diag *d)
{
    tth_diag_set(d, TTH_EUNKNOWN, where, "unknown target kind '%s'", name);
    size_t n;
    const char **names = tth__collect_names(reg, 1, &n);
    tth__hint_nearest(d, name, names, n, "'tthctl targets' lists the kinds");
    free(names);
    return TTH_EUNKNOWN;
}

const char *tth__json_snippet(const json_t *v, char *buf, size_t len)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_SORT_KEYS);
    snprintf(buf, len, "%s", s ? s : "?");
    if (s && strlen(s) >= len && len > 4)
        memcpy(buf + len - 4, "...", 4);
    free(s);
    return buf;
}

const char *tth__type_phrase(tth_attr_type t)
{
    switch (t) {
    case TTH_ATTR_STRING: return "a string";
    case TTH_ATTR_INT: return "an integer";
    case TTH_ATTR_BOOL: return "true or false";
    case TTH_ATTR_STRING_ARRAY: return "a list of strings";
    case TTH_ATTR_TARGET: return "a target";
    }
    return "a value";
}

json_t *tth__check_value(const char *kind, const char *name, tth_attr_type type, const json_t *v,
                         tth_diag *d)
{
    char snip[96], where[160];
    tth__json_snippet(v, snip, sizeof snip);
    snprintf(where, sizeof where, "\"%s\": %s", name, snip);
    switch (type) {
    case TTH_ATTR_STRING:
        if (!json_is_string(v))
            break;
        if (!json_string_value(v)[0])
            goto empty;
        return json_incref((json_t *)v);
    case TTH_ATTR_INT:
        if (!json_is_integer(v))
            break;
        return json_incref((json_t *)v);
    case TTH_ATTR_BOOL:
        if (!json_is_boolean(v))
            break;
        return json_incref((json_t *)v);
    case TTH_ATTR_TARGET:
        if (!json_is_object(v) && !json_is_string(v))
            break;
        return json_incref((json_t *)v);
    case TTH_ATTR_STRING_ARRAY: {
        json_t *a = json_array();
        if (!a)
            goto oom;
        if (json_is_string(v)) { /* a JSON target may write "mattr": "+neon,+v8.2a" (spaces around items dropped) */
            const char *s = json_string_value(v);
            for (;;) {
                const char *comma = strchr(s, ',');
                size_t n = comma ? (size_t)(comma - s) : strlen(s);
                while (n && (*s == ' ' || *s == '\t')) {
                    s++;
                    n--;
                }
                while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
                    n--;
                if (n == 0) {
                    json_decref(a);
                    goto empty;
                }
                if (json_array_append_new(a, json_stringn(s, n)) != 0) {
                    json_decref(a);
                    goto oom;
                }
                if (!comma)
                    break;
                s = comma + 1;
            }
            return a;
        }
        if (!json_is_array(v)) {
            json_decref(a);
            break;
        }
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            if (!json_is_string(e)) {
                json_decref(a);
                goto wrong;
            }
            if (!json_string_value(e)[0]) {
                json_decref(a);
                goto empty;
            }
            if (json_array_append(a, e) != 0) {
                json_decref(a);
                goto oom;
            }
        }
        return a;
    }
    }
wrong:
    tth_diag_set(d, TTH_ETYPE, where, "attribute '%s' of kind '%s' takes %s, not %s", name, kind,
                 tth__type_phrase(type), snip);
    return NULL;
empty:
    tth_diag_set(d, TTH_EINVAL, where, "empty value for attribute '%s'", name);
    tth_diag_hint(d, "give a value or leave the attribute out");
    return NULL;
oom:
    tth_diag_set(d, TTH_ENOMEM, NULL, "out of memory");
    return NULL;
}

static int cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The object's keys, sorted (so which error is reported first never depends on hash order). */
static const char **sorted_keys(const json_t *obj, size_t *n)
{
    *n = 0;
    const char **v = malloc((json_object_size(obj) + 1) * sizeof *v);
    if (!v)
        return NULL;
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)obj, key, val)
        v[(*n)++] = key;
    qsort(v, *n, sizeof *v, cmp_cstr);
    return v;
}

void tth__keys_dedupe(json_t *target)
{
    json_t *keys = json_object_get(target, "keys");
    if (!json_is_array(keys))
        return;
    for (size_t i = 0; i < json_array_size(keys); i++)
        for (size_t j = i + 1; j < json_array_size(keys);) {
            if (json_equal(json_array_get(keys, i), json_array_get(keys, j)))
                json_array_remove(keys, j);
            else
                j++;
        }
}

/* Set target["keys"] to keys (stolen), built without a failed append (bad == 0), duplicates
 * dropped: 0, or TTH_ENOMEM. */
static int set_keys(json_t *target, json_t *keys, int bad)
{
    if (bad) {
        json_decref(keys);
        return TTH_ENOMEM;
    }
    if (json_object_set_new(target, "keys", keys) != 0)
        return TTH_ENOMEM;
    tth__keys_dedupe(target);
    return 0;
}

int tth_target_keys_prepend(json_t *target, const char *const *keys, size_t n)
{
    if (!json_is_object(target))
        return TTH_EINVAL;
    json_t *old = json_object_get(target, "keys");
    json_t *k = json_array();
    if (!k)
        return TTH_ENOMEM;
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        bad |= json_array_append_new(k, json_string(keys[i]));
    if (json_is_array(old))
        bad |= json_array_extend(k, old);
    return set_keys(target, k, bad);
}

static void drop_empty_lists(json_t *t)
{
    size_t n;
    const char **keys = sorted_keys(t, &n);
    for (size_t i = 0; keys && i < n; i++) {
        json_t *v = json_object_get(t, keys[i]);
        if (strcmp(keys[i], "keys") != 0 && json_is_array(v) && json_array_size(v) == 0)
            json_object_del(t, keys[i]);
    }
    free(keys);
}

/* ---- written forms -> input JSON ---- */

static json_t *load_json_file(const char *path, tth_diag *d)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        tth_diag_set(d, e == ENOENT ? TTH_ENOENT : TTH_EIO, path, "cannot read target file '%s': %s", path,
                     strerror(e));
        return NULL;
    }
    json_error_t je;
    json_t *v = json_loadf(f, 0, &je);
    fclose(f);
    if (!v) {
        char where[TTH_DIAG_LOCATION_MAX];
        snprintf(where, sizeof where, "%s:%d:%d", path, je.line, je.column);
        tth_diag_set(d, TTH_EPARSE, where, "target file '%s' is not valid JSON: %s", path, je.text);
    }
    return v;
}

static int ends_with_json(const char *s)
{
    size_t n = strlen(s);
    if (n < 5 || strcmp(s + n - 5, ".json") != 0)
        return 0;
    for (const char *p = s; *p; p++)
        if (*p == ' ' || *p == '\t')
            return 0;
    return 1;
}

static json_t *text_to_input(ctx *c, const char *text, tth_diag *d)
{
    while (*text == ' ' || *text == '\t' || *text == '\n' || *text == '\r')
        text++;
    if (*text == '{') {
        json_error_t je;
        json_t *v = json_loads(text, 0, &je);
        if (!v) {
            char where[64];
            snprintf(where, sizeof where, "line %d, column %d", je.line, je.column);
            tth_diag_set(d, TTH_EPARSE, where, "target JSON is not valid: %s", je.text);
        }
        return v;
    }
    if (*text == '@')
        return load_json_file(text + 1, d);
    if (ends_with_json(text))
        return load_json_file(text, d);
    return tth__string_to_input(c->reg, text, d);
}

/* ---- one target ---- */

static void hint_host_kinds(const tth_registry *reg, tth_diag *d)
{
    char names[160] = "";
    size_t used = 0;
    for (size_t i = 0; i < tth_registry_count(reg); i++) {
        const tth_plugin_descriptor *desc = tth_registry_plugin(reg, i)->desc;
        if (!(desc->flags & TTH_KIND_CAN_BE_HOST))
            continue;
        int w = snprintf(names + used, sizeof names - used, "%s'%s'", used ? ", " : "", desc->kind);
        if (w < 0 || (size_t)w >= sizeof names - used)
            break;
        used += (size_t)w;
    }
    if (used)
        tth_diag_hint(d, "use a kind that can be a host: %s", names);
}

/* Check field `key` = v of an input against kind `desc`, and store it in t. */
static int put_field(const tth_plugin_descriptor *desc, json_t *t, const char *key, const json_t *v,
                     tth_diag *d)
{
    if (strcmp(key, "features") == 0)
        return 0; /* derived: the kind's parser computes it again */
    int type = tth__attr_type(desc, key);
    if (!type) {
        char snip[96], where[160];
        snprintf(where, sizeof where, "\"%s\": %s", key, tth__json_snippet(v, snip, sizeof snip));
        tth_diag_set(d, TTH_EUNKNOWN, where, "unknown attribute '%s' for kind '%s'", key, desc->kind);
        if (strcmp(key, "id") == 0) {
            tth_diag_hint(d, "the kind is given as \"kind\", not \"id\"");
        } else if (strcmp(key, "target_host") == 0) {
            tth_diag_hint(d, "the host is given as \"host\", not \"target_host\"");
        } else {
            size_t n = tth__n_common_attrs;
            for (size_t i = 0; desc->attrs && desc->attrs[i]; i++)
                n++;
            const char **names = malloc(n * sizeof *names);
            size_t k = 0;
            for (size_t i = 0; names && i < tth__n_common_attrs; i++)
                names[k++] = tth__common_attrs[i].name;
            for (size_t i = 0; names && desc->attrs && desc->attrs[i]; i++)
                names[k++] = desc->attrs[i]->name;
            tth__hint_nearest(d, key, names, k, "'tthctl targets' lists the attributes of each kind");
            free(names);
        }
        return TTH_EUNKNOWN;
    }
    json_t *nv = tth__check_value(desc->kind, key, (tth_attr_type)type, v, d);
    if (!nv)
        return d && d->code ? d->code : TTH_EINVAL;
    return json_object_set_new(t, key, nv) == 0 ? 0 : tth_diag_set(d, TTH_ENOMEM, NULL, "out of memory");
}

/* The fields of an input object with "attrs" flattened in (new object). */
static json_t *flatten(const json_t *in, tth_diag *d)
{
    json_t *fields = json_object();
    if (!fields) {
        tth_diag_set(d, TTH_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)in, key, v) {
        if (strcmp(key, "attrs") != 0) {
            if (json_object_set(fields, key, v) != 0)
                goto oom;
            continue;
        }
        if (!json_is_object(v)) {
            char snip[96];
            tth_diag_set(d, TTH_ETYPE, "attrs", "\"attrs\" must be an object, not %s",
                         tth__json_snippet(v, snip, sizeof snip));
            json_decref(fields);
            return NULL;
        }
        const char *k2;
        json_t *v2;
        json_object_foreach(v, k2, v2) {
            if (json_object_get(in, k2)) {
                tth_diag_set(d, TTH_EDUPLICATE, k2, "attribute '%s' is given both in \"attrs\" and at the top level",
                             k2);
                tth_diag_hint(d, "keep one of the two");
                json_decref(fields);
                return NULL;
            }
            if (json_object_set(fields, k2, v2) != 0)
                goto oom;
        }
    }
    return fields;
oom:
    tth_diag_set(d, TTH_ENOMEM, NULL, "out of memory");
    json_decref(fields);
    return NULL;
}

/* The host a kind that needs one gets when none is given (docs/targets.md): for a Cortex-M CPU
 * (`for_target`'s mcpu, a microcontroller with no operating system to load an llvm host's
 * shared object) the `c` kind for the same CPU and mattr; otherwise plain `llvm`, this machine. */
static json_t *default_host(ctx *c, const char *for_kind, const json_t *for_target, tth_diag *d)
{
    const char *mcpu = json_string_value(json_object_get(for_target, "mcpu"));
    if (mcpu && strncmp(mcpu, "cortex-m", 8) == 0 && tth_registry_find_kind(c->reg, "c")) {
        json_t *in = json_pack("{s:s, s:s}", "kind", "c", "mcpu", mcpu);
        const json_t *mattr = json_object_get(for_target, "mattr");
        if (in && json_is_array(mattr) && json_array_size(mattr))
            json_object_set_new(in, "mattr", json_deep_copy(mattr));
        if (!in) {
            tth_diag_set(d, TTH_ENOMEM, NULL, "out of memory");
            return NULL;
        }
        json_t *h = canon_any(c, in, ROLE_HOST, d);
        json_decref(in);
        if (h)
            return h;
        /* a CPU the c kind refuses (a misspelled name): the kind's own parser reports it next,
         * without a "default host" in front */
        tth_diag_clear(d);
    }
    if (!tth_registry_find_kind(c->reg, "llvm")) {
        tth_diag_set(d, TTH_EUNKNOWN, for_kind,
                     "kind '%s' needs a host and none was given; the default host is an 'llvm' target, "
                     "but no plugin provides kind 'llvm'", for_kind);
        tth_diag_hint(d, "give a host: -host='c -mcpu=...', or install the llvm-cpu plugin");
        return NULL;
    }
    json_t *in = json_pack("{s:s}", "kind", "llvm");
    if (!in) {
        tth_diag_set(d, TTH_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    json_t *h = canon_any(c, in, ROLE_HOST, d);
    json_decref(in);
    if (!h)
        tth_diag_prefix(d, "default host");
    return h;
}

/* Is `out` (from a target_parser) still a valid target of the same kind, tag and host? */
static int revalidate(const tth_plugin *p, const json_t *before, const json_t *out, tth_diag *d)
{
    const tth_plugin_descriptor *desc = p->desc;
    const char *who = desc->plugin_name;
    if (!json_is_object(out))
        return tth_diag_set(d, TTH_EPLUGIN, who, "target_parser of plugin '%s' returned something other than a JSON object",
                            who);
    static const char *const fixed[] = {"kind", "tag", "host"};
    for (size_t i = 0; i < 3; i++) {
        json_t *a = json_object_get(before, fixed[i]), *b = json_object_get(out, fixed[i]);
        if ((a || b) && !(a && b && json_equal(a, b)))
            return tth_diag_set(d, TTH_EPLUGIN, who, "target_parser of plugin '%s' changed the %s", who, fixed[i]);
    }
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)out, key, v) {
        if (strcmp(key, "kind") == 0 || strcmp(key, "tag") == 0 || strcmp(key, "host") == 0)
            continue;
        if (strcmp(key, "features") == 0) {
            if (!json_is_object(v))
                return tth_diag_set(d, TTH_EPLUGIN, who, "target_parser of plugin '%s' set \"features\" to a non-object",
                                    who);
            const char *fk;
            json_t *fv;
            json_object_foreach(v, fk, fv) {
                if (!json_is_boolean(fv) && !json_is_integer(fv) && !json_is_string(fv))
                    return tth_diag_set(d, TTH_EPLUGIN, who,
                                        "target_parser of plugin '%s' set feature '%s' to a value that is not a bool, integer or string",
                                        who, fk);
            }
            continue;
        }
        int type = tth__attr_type(desc, key);
        if (!type)
            return tth_diag_set(d, TTH_EPLUGIN, who, "target_parser of plugin '%s' set attribute '%s', which kind '%s' does not declare",
                                who, key, desc->kind);
        tth_diag tmp;
        tth_diag_clear(&tmp);
        json_t *nv = (type == TTH_ATTR_STRING_ARRAY && !json_is_array(v))
                         ? NULL
                         : tth__check_value(desc->kind, key, (tth_attr_type)type, v, &tmp);
        if (!nv && tmp.code == TTH_ENOMEM)
            return tth_diag_set(d, TTH_ENOMEM, NULL, "out of memory");
        if (!nv)
            return tth_diag_set(d, TTH_EPLUGIN, who, "target_parser of plugin '%s' set attribute '%s' to a wrong value: %s",
                                who, key, tmp.message[0] ? tmp.message : "not a list");
        json_decref(nv);
    }
    return 0;
}

static json_t *canon_single(ctx *c, const json_t *in, int role, tth_diag *d)
{
    json_t *fields = flatten(in, d);
    if (!fields)
        return NULL;
    json_t *t = NULL, *cfg = NULL, *host_in = NULL;
    const tth_plugin *plugin = NULL;
    const tth_tag_def *tag = NULL;
    json_t *kind_v = json_object_get(fields, "kind"), *tag_v = json_object_get(fields, "tag");
    char snip[96];
    if (kind_v && !json_is_string(kind_v)) {
        tth_diag_set(d, TTH_ETYPE, "kind", "\"kind\" must be a string, not %s", tth__json_snippet(kind_v, snip, sizeof snip));
        goto fail;
    }
    if (tag_v && !json_is_string(tag_v)) {
        tth_diag_set(d, TTH_ETYPE, "tag", "\"tag\" must be a string, not %s", tth__json_snippet(tag_v, snip, sizeof snip));
        goto fail;
    }
    const char *kind_s = json_string_value(kind_v), *tag_s = json_string_value(tag_v);
    if (tag_s) {
        if (!(tag = tth__find_tag(c->reg, tag_s, &plugin))) {
            tth_diag_set(d, TTH_EUNKNOWN, tag_s, "unknown tag '%s'", tag_s);
            size_t n;
            const char **names = tth__collect_names(c->reg, 2, &n);
            tth__hint_nearest(d, tag_s, names, n, "'tthctl tags' lists the tags");
            free(names);
            goto fail;
        }
        if (kind_s && strcmp(kind_s, plugin->desc->kind) != 0) {
            tth_diag_set(d, TTH_EINVAL, tag_s, "tag '%s' is a target of kind '%s', not '%s'", tag->name,
                         plugin->desc->kind, kind_s);
            tth_diag_hint(d, "drop the kind or use a tag of kind '%s'", kind_s);
            goto fail;
        }
    } else if (kind_s) {
        if (!(plugin = tth_registry_find_kind(c->reg, kind_s))) {
            unknown_kind(c->reg, kind_s, kind_s, d);
            goto fail;
        }
    } else {
        tth_diag_set(d, TTH_EINVAL, NULL, "a target needs a \"kind\" (or a \"tag\")");
        if (json_object_get(fields, "id"))
            tth_diag_hint(d, "the kind is given as \"kind\", not \"id\"");
        else
            tth_diag_hint(d, "add \"kind\": \"llvm\", for example");
        goto fail;
    }
    const tth_plugin_descriptor *desc = plugin->desc;
    if (role == ROLE_HOST && !(desc->flags & TTH_KIND_CAN_BE_HOST)) {
        tth_diag_set(d, TTH_EINVAL, desc->kind, "kind '%s' cannot be a host", desc->kind);
        hint_host_kinds(c->reg, d);
        goto fail;
    }
    t = json_pack("{s:s}", "kind", desc->kind);
    if (!t)
        goto oom;

    /* the tag's target is the base */
    if (tag) {
        json_error_t je;
        cfg = json_loads(tag->config_json, 0, &je);
        if (!json_is_object(cfg)) {
            tth_diag_set(d, TTH_EPLUGIN, tag->name, "config of tag '%s' is not a JSON object", tag->name);
            goto fail;
        }
        const char *ck = json_string_value(json_object_get(cfg, "kind"));
        if (ck && strcmp(ck, desc->kind) != 0) {
            tth_diag_set(d, TTH_EPLUGIN, tag->name, "tag '%s' of plugin '%s' has kind '%s', not '%s'", tag->name,
                         desc->plugin_name, ck, desc->kind);
            goto fail;
        }
        size_t n;
        const char **keys = sorted_keys(cfg, &n);
        for (size_t i = 0; keys && i < n; i++) {
            if (strcmp(keys[i], "kind") == 0 || strcmp(keys[i], "tag") == 0)
                continue;
            if (put_field(desc, t, keys[i], json_object_get(cfg, keys[i]), d) != 0) {
                free(keys);
                tth_diag_prefix(d, "tag '%s'", tag->name);
                goto fail;
            }
        }
        free(keys);
        if (json_object_set_new(t, "tag", json_string(tag->name)) != 0)
            goto oom;
    }

    /* the user's fields override */
    {
        size_t n;
        const char **keys = sorted_keys(fields, &n);
        if (!keys)
            goto oom;
        for (size_t i = 0; i < n; i++) {
            if (strcmp(keys[i], "kind") == 0 || strcmp(keys[i], "tag") == 0)
                continue;
            if (put_field(desc, t, keys[i], json_object_get(fields, keys[i]), d) != 0) {
                free(keys);
                goto fail;
            }
        }
        free(keys);
    }

    /* defaults */
    for (size_t i = 0; desc->attrs && desc->attrs[i]; i++) {
        const tth_attr_schema *a = desc->attrs[i];
        if (!a->default_json || json_object_get(t, a->name))
            continue;
        json_t *dv = json_loads(a->default_json, JSON_DECODE_ANY, NULL);
        json_t *nv = dv ? tth__check_value(desc->kind, a->name, a->type, dv, d) : NULL;
        json_decref(dv);
        if (!nv) {
            tth_diag_set(d, TTH_EPLUGIN, a->name, "default of attribute '%s' of kind '%s' is not %s", a->name,
                         desc->kind, tth__type_phrase(a->type));
            goto fail;
        }
        if (json_object_set_new(t, a->name, nv) != 0)
            goto oom;
    }
    drop_empty_lists(t);

    /* keys: the user's, else the kind's defaults; then the device */
    {
        json_t *user = json_object_get(t, "keys");
        json_t *keys = json_array();
        if (!keys)
            goto oom;
        int bad = 0;
        if (json_array_size(user))
            bad |= json_array_extend(keys, user);
        else
            for (size_t i = 0; desc->default_keys && desc->default_keys[i]; i++)
                bad |= json_array_append_new(keys, json_string(desc->default_keys[i]));
        json_t *device = json_object_get(t, "device");
        if (device)
            bad |= json_array_append(keys, device);
        if (set_keys(t, keys, bad) != 0)
            goto oom;
    }

    /* host */
    host_in = json_incref(json_object_get(t, "host"));
    json_object_del(t, "host");
    if (host_in) {
        if (role == ROLE_MEMBER) {
            tth_diag_set(d, TTH_EINVAL, desc->kind, "a target inside a composite cannot have its own host");
            tth_diag_hint(d, "give the host to the composite: 'a,b -host=...' or \"host\" next to \"targets\"");
            goto fail;
        }
        if (role == ROLE_HOST) {
            tth_diag_set(d, TTH_EINVAL, desc->kind, "a host target cannot have a host of its own");
            goto fail;
        }
        json_t *h = canon_any(c, host_in, ROLE_HOST, d);
        if (!h) {
            tth_diag_prefix(d, "host");
            goto fail;
        }
        if (json_object_set_new(t, "host", h) != 0)
            goto oom;
    } else if (role == ROLE_TOP && (desc->flags & TTH_KIND_NEEDS_HOST)) {
        json_t *h = default_host(c, desc->kind, t, d);
        if (!h)
            goto fail;
        if (json_object_set_new(t, "host", h) != 0)
            goto oom;
    }

    /* the kind's parser */
    if (plugin->target_parser) {
        json_t *out = NULL;
        int rc = plugin->target_parser(c->host, t, &out, d);
        if (rc != 0) {
            json_decref(out);
            if (!d || d->code == TTH_OK)
                tth_diag_set(d, rc < 0 ? rc : TTH_EPLUGIN, desc->plugin_name,
                             "target_parser of plugin '%s' failed without saying why", desc->plugin_name);
            goto fail;
        }
        if (!out) {
            tth_diag_set(d, TTH_EPLUGIN, desc->plugin_name, "target_parser of plugin '%s' returned no target",
                         desc->plugin_name);
            goto fail;
        }
        if (revalidate(plugin, t, out, d) != 0) {
            json_decref(out);
            goto fail;
        }
        json_decref(t);
        t = out;
        if (!json_object_get(t, "keys") && json_object_set_new(t, "keys", json_array()) != 0)
            goto oom;
        tth__keys_dedupe(t);
        drop_empty_lists(t);
    }
    json_decref(cfg);
    json_decref(host_in);
    json_decref(fields);
    return t;
oom:
    tth_diag_set(d, TTH_ENOMEM, NULL, "out of memory");
fail:
    json_decref(cfg);
    json_decref(host_in);
    json_decref(t);
    json_decref(fields);
    return NULL;
}

/* ---- composite ---- */

static json_t *canon_composite(ctx *c, const json_t *in, int role, tth_diag *d)
{
    if (role != ROLE_TOP) {
        tth_diag_set(d, TTH_EINVAL, "composite", role == ROLE_HOST ? "a composite target cannot be a host"
                                                                   : "a composite target cannot be nested in another");
        return NULL;
    }
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)in, key, v) {
        if (strcmp(key, "kind") != 0 && strcmp(key, "targets") != 0 && strcmp(key, "host") != 0) {
            tth_diag_set(d, TTH_EUNKNOWN, key, "a composite target takes only \"targets\" and \"host\", not '%s'", key);
            tth_diag_hint(d, "give attributes to the members of \"targets\"");
            return NULL;
        }
    }
    json_t *targets = json_object_get(in, "targets");
    if (!json_is_array(targets) || json_array_size(targets) < 2) {
        tth_diag_set(d, TTH_EINVAL, "targets", "a composite target needs a list of at least two \"targets\"");
        tth_diag_hint(d, "list them: 'ethos-n,cmsis-nn,c', or use the one target by itself");
        return NULL;
    }
    json_t *members = json_array(), *out = NULL;
    if (!members)
        goto oom;
    int needs_host = 0;
    size_t i;
    json_array_foreach(targets, i, v) {
        json_t *m = canon_any(c, v, ROLE_MEMBER, d);
        if (!m) {
            tth_diag_prefix(d, "composite member %zu", i + 1);
            goto fail;
        }
        const char *mk = json_string_value(json_object_get(m, "kind"));
        for (size_t j = 0; j < json_array_size(members); j++)
            if (strcmp(json_string_value(json_object_get(json_array_get(members, j), "kind")), mk) == 0) {
                tth_diag_set(d, TTH_EDUPLICATE, mk, "kind '%s' is listed twice in the composite", mk);
                tth_diag_hint(d, "list each kind once");
                json_decref(m);
                goto fail;
            }
        const tth_plugin *p = tth_registry_find_kind(c->reg, mk);
        if (p && (p->desc->flags & TTH_KIND_NEEDS_HOST))
            needs_host = 1;
        if (json_array_append_new(members, m) != 0)
            goto oom;
    }
    out = json_pack("{s:s, s:O}", "kind", "composite", "targets", members);
    if (!out)
        goto oom;
    json_t *host_in = json_object_get(in, "host"), *h = NULL;
    if (host_in) {
        if (!(h = canon_any(c, host_in, ROLE_HOST, d))) {
            tth_diag_prefix(d, "host");
            goto fail;
        }
    } else if (needs_host) {
        json_t *last = json_array_get(members, json_array_size(members) - 1);
        const tth_plugin *p = tth_registry_find_kind(c->reg, json_string_value(json_object_get(last, "kind")));
        if (p && (p->desc->flags & TTH_KIND_CAN_BE_HOST)) {
            if (!(h = json_deep_copy(last)))
                goto oom;
        } else if (!(h = default_host(c, "composite", NULL, d))) {
            goto fail;
        }
    }
    if (h && json_object_set_new(out, "host", h) != 0)
        goto oom;
    json_decref(members);
    return out;
oom:
    tth_diag_set(d, TTH_ENOMEM, NULL, "out of memory");
fail:
    json_decref(members);
    json_decref(out);
    return NULL;
}

static json_t *canon_any(ctx *c, const json_t *in, int role, tth_diag *d)
{
    if (c->depth >= MAX_DEPTH) {
        tth_diag_set(d, TTH_ELIMIT, NULL, "target nests more than %d levels deep", MAX_DEPTH);
        return NULL;
    }
    c->depth++;
    json_t *owned = NULL, *res = NULL;
    if (json_is_string(in)) {
        if (!(owned = text_to_input(c, json_string_value(in), d)))
            goto out;
        in = owned;
    }
    if (!json_is_object(in)) {
        char snip[96];
        tth_diag_set(d, TTH_ETYPE, tth__json_snippet(in, snip, sizeof snip),
                     "a target is a JSON object or a target string, not %s", snip);
        goto out;
    }
    const char *kind = json_string_value(json_object_get(in, "kind"));
    if (kind && strcmp(kind, "composite") == 0)
        res = canon_composite(c, in, role, d);
    else
        res = canon_single(c, in, role, d);
out:
    json_decref(owned);
    c->depth--;
    return res;
}

/* ---- public ---- */

json_t *tth_target_from_json(const tth_registry *reg, const tth_host *host, const json_t *obj, tth_diag *diag)
{
    tth_diag_clear(diag);
    if (!reg || !obj) {
        tth_diag_set(diag, TTH_EINVAL, NULL, "no registry or no target");
        return NULL;
    }
    tth_host fallback = {.size = sizeof(tth_host), .abi_major = TTH_ABI_MAJOR, .abi_minor = TTH_ABI_MINOR};
    ctx c = {.reg = reg, .host = host ? host : &fallback, .depth = 0};
    return canon_any(&c, obj, ROLE_TOP, diag);
}

json_t *tth_target_parse(const tth_registry *reg, const tth_host *host, const char *text, tth_diag *diag)
{
    if (!text) {
        tth_diag_clear(diag);
        tth_diag_set(diag, TTH_EINVAL, NULL, "no target text");
        return NULL;
    }
    tth_diag_clear(diag);
    if (!reg) {
        tth_diag_set(diag, TTH_EINVAL, NULL, "no registry");
        return NULL;
    }
    tth_host fallback = {.size = sizeof(tth_host), .abi_major = TTH_ABI_MAJOR, .abi_minor = TTH_ABI_MINOR};
    ctx c = {.reg = reg, .host = host ? host : &fallback, .depth = 0};
    json_t *in = text_to_input(&c, text, diag);
    if (!in)
        return NULL;
    json_t *t = canon_any(&c, in, ROLE_TOP, diag);
    json_decref(in);
    return t;
}

char *tth_target_to_json_text(const json_t *canonical)
{
    if (!json_is_object(canonical))
        return NULL;
    return json_dumps(canonical, JSON_COMPACT | JSON_SORT_KEYS);
}

uint64_t tth_target_hash(const json_t *canonical)
{
    char *s = tth_target_to_json_text(canonical);
    if (!s)
        return 0;
    uint64_t h = (uint64_t)XXH64(s, strlen(s), 0);
    free(s);
    return h;
}

static int has_key(const json_t *canonical, const char *key)
{
    size_t i;
    json_t *k;
    json_array_foreach(json_object_get(canonical, "keys"), i, k)
        if (json_is_string(k) && strcmp(json_string_value(k), key) == 0)
            return 1;
    return 0;
}

tth_vector_shape tth_target_vector_shape(const json_t *canonical)
{
    tth_vector_shape scalar = {1, 16, 0};
    const char *kind = json_string_value(json_object_get(canonical, "kind"));
    if (!kind || strcmp(kind, "llvm") != 0)
        return scalar;
    if (has_key(canonical, "x86_64")) {
        if (tth_target_has_feature(canonical, "has_avx512"))
            return (tth_vector_shape){16, 32, 1};
        if (tth_target_has_feature(canonical, "has_avx2"))
            return (tth_vector_shape){8, 16, 1};
        return (tth_vector_shape){4, 16, 0}; /* SSE2 is part of x86-64; FMA is not */
    }
    if (has_key(canonical, "arm_cpu") && tth_target_has_feature(canonical, "has_asimd")) {
        int a64 = tth_target_has_feature(canonical, "is_aarch64");
        return (tth_vector_shape){4, a64 ? 32 : 16, a64};
    }
    return scalar;
}

int tth_target_num_cores(const json_t *canonical)
{
    const json_t *n = canonical ? json_object_get(canonical, "num-cores") : NULL;
    json_int_t v = json_is_integer(n) ? json_integer_value(n) : 0;
    return v >= 1 && v < 1024 ? (int)v : 0;
}

const json_t *tth_target_member(const json_t *canonical, const char *kind)
{
    const char *k = json_string_value(json_object_get(canonical, "kind"));
    if (!k || strcmp(k, "composite") != 0 || !kind)
        return canonical;
    const json_t *ts = json_object_get(canonical, "targets");
    for (size_t i = 0; i < json_array_size(ts); i++) {
        const json_t *m = json_array_get(ts, i);
        const char *mk = json_string_value(json_object_get(m, "kind"));
        if (mk && strcmp(mk, kind) == 0)
            return m;
    }
    return canonical;
}

int tth_target_has_feature(const json_t *canonical, const char *feature)
{
    json_t *v = json_object_get(json_object_get(canonical, "features"), feature);
    if (json_is_boolean(v))
        return json_is_true(v);
    if (json_is_integer(v))
        return json_integer_value(v) != 0;
    return 0;
}
