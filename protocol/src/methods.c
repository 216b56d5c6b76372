/* methods.c: the method table and its parameter checker. */
#include "tthproto/methods.h"

#include <stdio.h>
#include <string.h>

#include "tthproto/errors.h"

const tthp_method tthp_methods[TTHP_METHOD_COUNT] = {
#define TTHP__M_ROW(id, name, kind, spec, doc) {TTHP_M_##id, name, kind, spec, doc},
    TTHP_METHODS(TTHP__M_ROW)
#undef TTHP__M_ROW
};

const tthp_method *tthp_method_find(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < TTHP_METHOD_COUNT; i++)
        if (strcmp(tthp_methods[i].name, name) == 0)
            return &tthp_methods[i];
    return NULL;
}

static int type_ok(const json_t *v, char t)
{
    switch (t) {
    case 's': return json_is_string(v);
    case 'o': return json_is_object(v);
    case 'i': return json_is_integer(v);
    case 'b': return json_is_boolean(v);
    case 'a': return json_is_array(v);
    case 'n': return json_is_null(v);
    }
    return 0;
}

static const char *type_word(char t)
{
    switch (t) {
    case 's': return "a string";
    case 'o': return "an object";
    case 'i': return "an integer";
    case 'b': return "a boolean";
    case 'a': return "an array";
    case 'n': return "null";
    }
    return "?";
}

int tthp_params_check(const tthp_method *m, const json_t *params, char *msg, size_t len)
{
    if (params && !json_is_object(params)) {
        snprintf(msg, len, "params of '%s' must be an object", m->name);
        return TTHP_INVALID_PARAMS;
    }
    const char *s = m->params;
    while (*s) {
        while (*s == ' ')
            s++;
        if (!*s)
            break;
        int optional = *s == '?';
        if (optional)
            s++;
        const char *colon = strchr(s, ':');
        if (!colon)
            break;
        char name[64];
        size_t nl = (size_t)(colon - s) < sizeof name - 1 ? (size_t)(colon - s) : sizeof name - 1;
        memcpy(name, s, nl);
        name[nl] = '\0';
        const char *types = colon + 1;
        size_t tl = strcspn(types, " ");
        s = types + tl;
        const json_t *v = params ? json_object_get(params, name) : NULL;
        if (!v) {
            if (optional)
                continue;
            snprintf(msg, len, "'%s' needs parameter '%s'", m->name, name);
            return TTHP_INVALID_PARAMS;
        }
        int ok = 0;
        for (size_t i = 0; i < tl && !ok; i++)
            ok = type_ok(v, types[i]);
        if (!ok) {
            int n = snprintf(msg, len, "parameter '%s' of '%s' must be ", name, m->name);
            for (size_t i = 0; i < tl && n >= 0 && (size_t)n < len; i++)
                n += snprintf(msg + n, len - (size_t)n, "%s%s", i ? " or " : "", type_word(types[i]));
            return TTHP_INVALID_PARAMS;
        }
    }
    return 0;
}
