/* text.c: the string form of a target, in (tokens -> input JSON) and out (canonical -> string).
 *
 * Grammar (one line):
 *   target  := head option*
 *   head    := NAME                      a kind ("llvm") or a tag ("raspberry-pi/5")
 *            | NAME (',' NAME)+          a composite: "ethos-n,cmsis-nn,c"
 *   option  := '-' KEY '=' VALUE         "-mcpu=cortex-a72"
 *            | '-' KEY VALUE             "-mcpu cortex-a72" (VALUE does not start with '-')
 *            | '-' KEY                   a bool attribute set to true: "-fast-math"
 *   VALUE   := text, where '...' groups text with spaces and commas, and \' and \\ inside or
 *              outside quotes stand for ' and \. A string-array value splits on unquoted commas.
 * Canonical output writes every option as -key=value, sorted by key, quoting what needs it, so
 * parse(to_string(t)) == t.
 */
#include "target_private.h"
#include "tth/strbuf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- lexing ---- */

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* An escape is a backslash before a quote or a backslash. */
static int is_escape(const char *s) { return s[0] == '\\' && (s[1] == '\'' || s[1] == '\\'); }

typedef struct toks {
    char **v;
    size_t n, cap;
} toks;

static void toks_free(toks *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->v[i]);
    free(t->v);
}

/* Split on unquoted whitespace; tokens keep their quotes and escapes (raw). */
static int lex(const char *text, toks *out, tth_diag *d)
{
    const char *s = text;
    while (*s) {
        while (is_space(*s))
            s++;
        if (!*s)
            break;
        const char *start = s, *quote = NULL;
        while (*s && (quote || !is_space(*s))) {
            if (is_escape(s)) {
                s += 2;
                continue;
            }
            if (*s == '\'')
                quote = quote ? NULL : s;
            s++;
        }
        if (quote) {
            tth_diag_set(d, TTH_EPARSE, quote, "unterminated quote");
            tth_diag_hint(d, "close the quote: -key='a b'; write \\' for a quote inside one");
            return TTH_EPARSE;
        }
        if (out->n == out->cap) {
            size_t cap = out->cap ? out->cap * 2 : 8;
            char **v = realloc(out->v, cap * sizeof *v);
            if (!v)
                return tth_diag_set(d, TTH_ENOMEM, NULL, "out of memory");
            out->v = v;
            out->cap = cap;
        }
        if (!(out->v[out->n] = strndup(start, (size_t)(s - start))))
            return tth_diag_set(d, TTH_ENOMEM, NULL, "out of memory");
        out->n++;
    }
    return 0;
}

/* Remove quotes and escapes from raw[0..n). */
static char *unquote(const char *raw, size_t n)
{
    char *o = malloc(n + 1);
    if (!o)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + 1 < n && is_escape(raw + i)) {
            o[k++] = raw[++i];
            continue;
        }
        if (raw[i] == '\'')
            continue;
        o[k++] = raw[i];
    }
    o[k] = '\0';
    return o;
}

/* Position of the first unquoted `c` in raw, or NULL. */
static const char *find_unquoted(const char *raw, char c)
{
    int q = 0;
    for (const char *s = raw; *s; s++) {
        if (is_escape(s)) {
            s++;
            continue;
        }
        if (*s == '\'')
            q = !q;
        else if (*s == c && !q)
            return s;
    }
    return NULL;
}

/* ---- values ---- */

static int name_ok(const char *s, size_t n)
{
    if (n == 0 || !(s[0] >= 'a' && s[0] <= 'z'))
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.'))
            return 0;
    }
    return 1;
}

/* One option of the string form, after lexing. */
typedef struct option {
    char *name;        /* without the dash */
    const char *raw;   /* raw value (quotes kept), or NULL for a bare flag; borrowed from toks */
    const char *token; /* the token, for messages; borrowed */
} option;

/* The value of an option as JSON of type `type` (new reference). */
static json_t *option_value(const char *kind, const option *o, tth_attr_type type, tth_diag *d)
{
    if (!o->raw) {
        if (type == TTH_ATTR_BOOL)
            return json_true();
        tth_diag_set(d, TTH_EINVAL, o->token, "attribute '%s' needs a value", o->name);
        tth_diag_hint(d, "write -%s=VALUE", o->name);
        return NULL;
    }
    if (type == TTH_ATTR_STRING_ARRAY) {
        json_t *a = json_array();
        const char *s = o->raw;
        for (;;) {
            const char *comma = find_unquoted(s, ',');
            size_t n = comma ? (size_t)(comma - s) : strlen(s);
            char *item = unquote(s, n);
            if (!item || !a) {
                free(item);
                json_decref(a);
                tth_diag_set(d, TTH_ENOMEM, NULL, "out of memory");
                return NULL;
            }
            if (!item[0]) {
                free(item);
                json_decref(a);
                if (o->raw[0])
                    tth_diag_set(d, TTH_EINVAL, o->token, "empty element in attribute '%s'", o->name);
                else
                    tth_diag_set(d, TTH_EINVAL, o->token, "empty value for attribute '%s'", o->name);
                tth_diag_hint(d, "give a value (-%s=a,b) or leave the attribute out", o->name);
                return NULL;
            }
            int bad = json_array_append_new(a, json_string(item));
            free(item);
            if (bad) {
                json_decref(a);
                tth_diag_set(d, TTH_ENOMEM, NULL, "out of memory");
                return NULL;
            }
            if (!comma)
                break;
            s = comma + 1;
        }
        return a;
    }
    char *v = unquote(o->raw, strlen(o->raw));
    if (!v) {
        tth_diag_set(d, TTH_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    json_t *out = NULL;
    if (!v[0]) {
        tth_diag_set(d, TTH_EINVAL, o->token, "empty value for attribute '%s'", o->name);
        tth_diag_hint(d, "give a value (-%s=VALUE) or leave the attribute out", o->name);
    } else if (type == TTH_ATTR_INT) {
        char *end;
        errno = 0;
        long long x = strtoll(v, &end, 10);
        if (errno || *end || end == v)
            tth_diag_set(d, TTH_ETYPE, o->token, "attribute '%s' of kind '%s' takes %s, not '%s'",
                         o->name, kind, tth__type_phrase(type), v);
        else
            out = json_integer((json_int_t)x);
    } else if (type == TTH_ATTR_BOOL) {
        if (strcmp(v, "true") == 0 || strcmp(v, "1") == 0)
            out = json_true();
        else if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0)
            out = json_false();
        else
            tth_diag_set(d, TTH_ETYPE, o->token, "attribute '%s' of kind '%s' takes %s, not '%s'",
                         o->name, kind, tth__type_phrase(type), v);
    } else {
        out = json_string(v); /* STRING, and TARGET (parsed later, as the host) */
    }
    free(v);
    if (!out && (!d || d->code == TTH_OK))
        tth_diag_set(d, TTH_ENOMEM, NULL, "out of memory");
    return out;
}

/* ---- the head: kinds, tags, composites ---- */

typedef struct member {
    char *name;               /* as written */
    const tth_plugin *plugin; /* of the kind or of the tag */
    int is_tag;
} member;

static int resolve_member(const tth_registry *reg, member *m, tth_diag *d)
{
    const tth_plugin *p = tth_registry_find_kind(reg, m->name);
    if (p) {
        m->plugin = p;
        return 0;
    }
    if (tth__find_tag(reg, m->name, &p)) {
        m->plugin = p;
        m->is_tag = 1;
        return 0;
    }
    return tth__unknown_kind_or_tag(reg, m->name, m->name, d);
}

/* ---- string form -> input JSON ---- */

/* Does the next token belong to option o as its value ("-mcpu cortex-a72")? Only when o has no
 * '=', o is not a bool attribute, and the next token is not an option itself. */
static int takes_next(const option *o, int is_bool, const char *next)
{
    return !o->raw && !is_bool && next && next[0] != '-';
}

/* The type of option `name` across the members: 0 when no member declares it; *all_bool when
 * every member that declares it takes a bool (so a bare "-name" is a flag). */
static int members_type(const member *mem, size_t nmem, const char *name, int *all_bool)
{
    int type = 0;
    *all_bool = 1;
    for (size_t i = 0; i < nmem; i++) {
        int t = tth__attr_type(mem[i].plugin->desc, name);
        if (!t)
            continue;
        type = t;
        if (t != TTH_ATTR_BOOL)
            *all_bool = 0;
    }
    return type;
}

/* Every attribute name the members know (common ones first), for suggestions. */
static const char **member_attr_names(const member *mem, size_t nmem, size_t *n)
{
    size_t cap = tth__n_common_attrs;
    for (size_t i = 0; i < nmem; i++)
        for (size_t k = 0; mem[i].plugin->desc->attrs && mem[i].plugin->desc->attrs[k]; k++)
            cap++;
    const char **v = malloc(cap * sizeof *v);
    *n = 0;
    if (!v)
        return NULL;
    for (size_t i = 0; i < tth__n_common_attrs; i++)
        v[(*n)++] = tth__common_attrs[i].name;
    for (size_t i = 0; i < nmem; i++)
        for (size_t k = 0; mem[i].plugin->desc->attrs && mem[i].plugin->desc->attrs[k]; k++)
            v[(*n)++] = mem[i].plugin->desc->attrs[k]->name;
    return v;
}

static int unknown_option(const member *mem, size_t nmem, const option *o, tth_diag *d)
{
    if (nmem == 1) {
        tth_diag_set(d, TTH_EUNKNOWN, o->token, "unknown attribute '%s' for kind '%s'", o->name,
                     mem[0].plugin->desc->kind);
    } else {
        char kinds[160] = "";
        size_t used = 0;
        for (size_t i = 0; i < nmem; i++) {
            int w = snprintf(kinds + used, sizeof kinds - used, "%s'%s'", i ? ", " : "",
                             mem[i].plugin->desc->kind);
            if (w < 0 || (size_t)w >= sizeof kinds - used)
                break;
            used += (size_t)w;
        }
        tth_diag_set(d, TTH_EUNKNOWN, o->token, "attribute '%s' is not declared by any of %s", o->name,
                     kinds);
    }
    size_t n;
    const char **names = member_attr_names(mem, nmem, &n);
    tth__hint_nearest(d, o->name, names, n, "'tthctl targets' lists the attributes of each kind");
    free(names);
    return TTH_EUNKNOWN;
}

/* Read the options after the head. mem/nmem are the head's members (nmem = 0 for the word
 * "composite"). "-key value" takes the next token as the value unless the attribute is a bool. */
static int read_options(const toks *t, const member *mem, size_t nmem, option *opts, size_t *nopts,
                        tth_diag *d)
{
    size_t k = 0;
    for (size_t i = 1; i < t->n; i++) {
        const char *tok = t->v[i];
        if (tok[0] != '-') {
            tth_diag_set(d, TTH_EPARSE, tok, "unexpected '%s': attributes start with '-'", tok);
            tth_diag_hint(d, "quote values that contain spaces: -key='a b'");
            return TTH_EPARSE;
        }
        const char *eq = find_unquoted(tok, '=');
        size_t n = eq ? (size_t)(eq - tok - 1) : strlen(tok) - 1;
        if (!name_ok(tok + 1, n)) {
            tth_diag_set(d, TTH_EPARSE, tok, "bad attribute name in '%s'", tok);
            tth_diag_hint(d, "attribute names use a-z, 0-9, '-', '_' and '.', as in -mcpu=cortex-a72");
            return TTH_EPARSE;
        }
        option *o = &opts[k];
        if (!(o->name = strndup(tok + 1, n)))
            return tth_diag_set(d, TTH_ENOMEM, NULL, "out of memory");
        o->token = tok;
        o->raw = eq ? eq + 1 : NULL;
        *nopts = ++k;
        for (size_t j = 0; j + 1 < k; j++)
            if (strcmp(opts[j].name, o->name) == 0) {
                tth_diag_set(d, TTH_EDUPLICATE, tok, "attribute '%s' is given twice", o->name);
                tth_diag_hint(d, "keep one of '%s' and '%s'", opts[j].token, tok);
                return TTH_EDUPLICATE;
            }
        if (strcmp(o->name, "kind") == 0) {
            tth_diag_set(d, TTH_EINVAL, tok, "'-kind' cannot be set as an attribute");
            tth_diag_hint(d, "the kind is the first word of the target: 'llvm -mcpu=...'");
            return TTH_EINVAL;
        }
        if (strcmp(o->name, "features") == 0) {
            tth_diag_set(d, TTH_EINVAL, tok, "'features' are derived by the kind's parser and cannot be set");
            tth_diag_hint(d, "set mcpu, mattr or mtriple instead");
            return TTH_EINVAL;
        }
        int is_bool = 0;
        if (nmem == 0) {
            if (strcmp(o->name, "targets") != 0 && strcmp(o->name, "host") != 0) {
                tth_diag_set(d, TTH_EUNKNOWN, tok,
                             "a 'composite' target takes only -targets and -host, not '-%s'", o->name);
                tth_diag_hint(d, "give attributes to the members: -targets='cmsis-nn -mcpu=cortex-m55','c'");
                return TTH_EUNKNOWN;
            }
        } else if (nmem > 1 && strcmp(o->name, "tag") == 0) {
            tth_diag_set(d, TTH_EINVAL, tok, "a composite target has no tag");
            tth_diag_hint(d, "name the tag as a member instead: 'ethos-n,arm/cortex-m55'");
            return TTH_EINVAL;
        } else if (nmem == 1 && mem[0].is_tag && strcmp(o->name, "tag") == 0) {
            tth_diag_set(d, TTH_EDUPLICATE, tok, "the tag is given twice: as the first word '%s' and as '%s'",
                         mem[0].name, tok);
            return TTH_EDUPLICATE;
        } else if (!members_type(mem, nmem, o->name, &is_bool)) {
            return unknown_option(mem, nmem, o, d);
        }
        if (i + 1 < t->n && takes_next(o, is_bool, t->v[i + 1]))
            o->raw = t->v[++i];
    }
    return 0;
}

/* {"kind": k} or {"tag": t} for one member. */
static json_t *member_object(const member *m)
{
    return json_pack("{s:s}", m->is_tag ? "tag" : "kind", m->name);
}

static int set_option(json_t *obj, const char *kind, const option *o, tth_attr_type type, tth_diag *d)
{
    json_t *v = option_value(kind, o, type, d);
    if (!v)
        return d && d->code ? d->code : TTH_EINVAL;
    return json_object_set_new(obj, o->name, v) == 0 ? 0 : tth_diag_set(d, TTH_ENOMEM, NULL, "out of memory");
}

static json_t *build_input(const member *mem, size_t nmem, const option *opts, size_t nopts, tth_diag *d)
{
    json_t *obj;
    if (nmem == 0) { /* the word "composite": -targets and -host */
        obj = json_pack("{s:s}", "kind", "composite");
        for (size_t i = 0; obj && i < nopts; i++) {
            const option *o = &opts[i];
            tth_attr_type type = strcmp(o->name, "targets") == 0 ? TTH_ATTR_STRING_ARRAY : TTH_ATTR_TARGET;
            if (set_option(obj, "composite", o, type, d) != 0)
                goto fail;
        }
    } else if (nmem == 1) {
        obj = member_object(&mem[0]);
        for (size_t i = 0; obj && i < nopts; i++) {
            const option *o = &opts[i];
            if (set_option(obj, mem[0].plugin->desc->kind, o,
                           (tth_attr_type)tth__attr_type(mem[0].plugin->desc, o->name), d) != 0)
                goto fail;
        }
    } else { /* "a,b,c -opts": each option goes to the members that declare it */
        json_t *targets = json_array();
        obj = json_pack("{s:s, s:o}", "kind", "composite", "targets", targets);
        for (size_t m = 0; obj && m < nmem; m++)
            if (json_array_append_new(targets, member_object(&mem[m])) != 0) {
                tth_diag_set(d, TTH_ENOMEM, NULL, "out of memory");
                goto fail;
            }
        for (size_t i = 0; obj && i < nopts; i++) {
            const option *o = &opts[i];
            if (strcmp(o->name, "host") == 0) {
                if (set_option(obj, "composite", o, TTH_ATTR_TARGET, d) != 0)
                    goto fail;
                continue;
            }
            for (size_t m = 0; m < nmem; m++) {
                int type = tth__attr_type(mem[m].plugin->desc, o->name);
                if (type && set_option(json_array_get(targets, m), mem[m].plugin->desc->kind, o,
                                       (tth_attr_type)type, d) != 0)
                    goto fail;
            }
        }
    }
    if (!obj)
        tth_diag_set(d, TTH_ENOMEM, NULL, "out of memory");
    return obj;
fail:
    json_decref(obj);
    return NULL;
}

json_t *tth__string_to_input(const tth_registry *reg, const char *text, tth_diag *d)
{
    toks t = {0};
    option *opts = NULL;
    size_t nopts = 0, nmem = 0;
    member *mem = NULL;
    json_t *out = NULL;
    if (lex(text, &t, d) != 0)
        goto done;
    if (t.n == 0) {
        tth_diag_set(d, TTH_EINVAL, text, "empty target");
        tth_diag_hint(d, "give a kind or a tag, e.g. 'llvm -mtriple=aarch64-linux-gnu'");
        goto done;
    }
    const char *head = t.v[0];
    if (head[0] == '-') {
        tth_diag_set(d, TTH_EPARSE, head, "a target starts with a kind or a tag, not '%s'", head);
        tth_diag_hint(d, "put the kind first: 'llvm %s'", head);
        goto done;
    }
    if (strchr(head, '\'') || strchr(head, '\\') || strchr(head, '=')) {
        tth_diag_set(d, TTH_EPARSE, head, "'%s' is not a kind or a tag name", head);
        tth_diag_hint(d, "a target starts with a kind or a tag, e.g. 'llvm' or 'raspberry-pi/5'");
        goto done;
    }
    size_t ncomma = 0;
    for (const char *s = head; *s; s++)
        ncomma += *s == ',';
    mem = calloc(ncomma + 1, sizeof *mem);
    opts = calloc(t.n, sizeof *opts);
    if (!mem || !opts) {
        tth_diag_set(d, TTH_ENOMEM, NULL, "out of memory");
        goto done;
    }
    if (strcmp(head, "composite") != 0) {
        const char *s = head;
        for (;;) {
            const char *c = strchr(s, ',');
            size_t n = c ? (size_t)(c - s) : strlen(s);
            if (n == 0) {
                tth_diag_set(d, TTH_EPARSE, head, "empty name in the composite '%s'", head);
                tth_diag_hint(d, "list kinds or tags separated by single commas: 'ethos-n,cmsis-nn,c'");
                goto done;
            }
            if (!(mem[nmem].name = strndup(s, n))) {
                tth_diag_set(d, TTH_ENOMEM, NULL, "out of memory");
                goto done;
            }
            nmem++;
            if (resolve_member(reg, &mem[nmem - 1], d) != 0)
                goto done;
            for (size_t j = 0; j + 1 < nmem; j++)
                if (mem[j].plugin == mem[nmem - 1].plugin) {
                    tth_diag_set(d, TTH_EDUPLICATE, head, "kind '%s' is listed twice in '%s'",
                                 mem[j].plugin->desc->kind, head);
                    tth_diag_hint(d, "list each kind once");
                    goto done;
                }
            if (!c)
                break;
            s = c + 1;
        }
    }
    if (read_options(&t, mem, nmem, opts, &nopts, d) != 0)
        goto done;
    out = build_input(mem, nmem, opts, nopts, d);
done:
    for (size_t i = 0; opts && i < nopts; i++)
        free(opts[i].name);
    free(opts);
    for (size_t i = 0; i < nmem; i++)
        free(mem[i].name);
    free(mem);
    toks_free(&t);
    return out;
}

/* ---- canonical JSON -> string form ---- */

static int needs_quotes(const char *s, int in_list)
{
    if (!*s)
        return 1;
    for (; *s; s++)
        if (is_space(*s) || *s == '\'' || *s == '\\' || (in_list && *s == ','))
            return 1;
    return 0;
}

static void put_quoted(tth_strbuf *b, const char *s)
{
    tth_strbuf_putc(b, '\'');
    for (; *s; s++) {
        if (*s == '\'' || *s == '\\')
            tth_strbuf_putc(b, '\\');
        tth_strbuf_putc(b, *s);
    }
    tth_strbuf_putc(b, '\'');
}

static void put_word(tth_strbuf *b, const char *s, int in_list)
{
    if (needs_quotes(s, in_list))
        put_quoted(b, s);
    else
        tth_strbuf_puts(b, s);
}

static int cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void put_target(tth_strbuf *b, const json_t *t);

static void put_nested(tth_strbuf *b, const json_t *t)
{
    tth_strbuf inner = {0};
    put_target(&inner, t);
    if (inner.failed)
        b->failed = 1;
    put_quoted(b, inner.s ? inner.s : "");
    free(inner.s);
}

/* " -name=value" for one field; nothing for an empty list. */
static void put_field(tth_strbuf *b, const char *name, const json_t *v)
{
    if (json_is_array(v) && json_array_size(v) == 0)
        return;
    tth_strbuf_puts(b, " -");
    tth_strbuf_puts(b, name);
    tth_strbuf_putc(b, '=');
    if (json_is_string(v)) {
        put_word(b, json_string_value(v), 0);
    } else if (json_is_integer(v)) {
        char num[32];
        snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        tth_strbuf_puts(b, num);
    } else if (json_is_boolean(v)) {
        tth_strbuf_puts(b, json_is_true(v) ? "true" : "false");
    } else if (json_is_array(v)) {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            if (i)
                tth_strbuf_putc(b, ',');
            if (json_is_string(e))
                put_word(b, json_string_value(e), 1);
            else /* a composite's members */
                put_nested(b, e);
        }
    } else if (json_is_object(v)) {
        put_nested(b, v);
    }
}

static void put_target(tth_strbuf *b, const json_t *t)
{
    const char *kind = json_string_value(json_object_get(t, "kind"));
    tth_strbuf_puts(b, kind ? kind : "");
    size_t n = json_object_size(t), k = 0;
    const char **names = malloc((n ? n : 1) * sizeof *names);
    if (!names) {
        b->failed = 1;
        return;
    }
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)t, key, v) {
        if (strcmp(key, "kind") != 0 && strcmp(key, "features") != 0)
            names[k++] = key;
    }
    qsort(names, k, sizeof *names, cmp_cstr);
    for (size_t i = 0; i < k; i++)
        put_field(b, names[i], json_object_get(t, names[i]));
    free(names);
}

char *tth_target_to_string(const json_t *canonical)
{
    if (!json_is_object(canonical))
        return NULL;
    tth_strbuf b = {0};
    put_target(&b, canonical);
    return tth_strbuf_finish(&b);
}
