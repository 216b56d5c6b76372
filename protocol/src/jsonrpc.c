/* jsonrpc.c: JSON-RPC 2.0 validation and builders. */
#include "tthproto/jsonrpc.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *tthp_error_name(int code)
{
    switch (code) {
#define TTHP__ERR_NAME(name, c, text) case c: return text;
        TTHP_ERRORS(TTHP__ERR_NAME)
#undef TTHP__ERR_NAME
    }
    if (TTHP_CODE_TO_TTH(code))
        return "libtth";
    return "unknown";
}

static int invalid(tthp_message *m, int code, const char *msg)
{
    m->kind = TTHP_MSG_INVALID;
    m->error_code = code;
    snprintf(m->error_message, sizeof m->error_message, "%s", msg);
    return code;
}

int tthp_message_parse(const void *body, size_t len, tthp_message *m)
{
    memset(m, 0, sizeof *m);
    json_error_t je;
    m->root = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (!m->root) {
        char msg[128];
        snprintf(msg, sizeof msg, "not JSON: %.80s (line %d, column %d)", je.text, je.line, je.column);
        return invalid(m, TTHP_PARSE_ERROR, msg);
    }
    if (!json_is_object(m->root))
        return invalid(m, TTHP_INVALID_REQUEST, json_is_array(m->root)
                                                    ? "batches are not supported; send one message per frame"
                                                    : "a message must be a JSON object");
    json_t *id = json_object_get(m->root, "id");
    if (id && (json_is_integer(id) || json_is_string(id)))
        m->id = id;
    const json_t *ver = json_object_get(m->root, "jsonrpc");
    if (!json_is_string(ver) || strcmp(json_string_value(ver), "2.0") != 0)
        return invalid(m, TTHP_INVALID_REQUEST, "\"jsonrpc\" must be \"2.0\"");
    if (id && !m->id && !json_is_null(id))
        return invalid(m, TTHP_INVALID_REQUEST, "\"id\" must be an integer or a string");
    json_t *method = json_object_get(m->root, "method");
    if (method) {
        if (!json_is_string(method))
            return invalid(m, TTHP_INVALID_REQUEST, "\"method\" must be a string");
        m->method = json_string_value(method);
        json_t *params = json_object_get(m->root, "params");
        if (params && !json_is_object(params))
            return invalid(m, TTHP_INVALID_REQUEST, "\"params\" must be an object");
        m->params = params;
        if (id && json_is_null(id))
            return invalid(m, TTHP_INVALID_REQUEST, "a request's \"id\" must not be null");
        m->kind = id ? TTHP_MSG_REQUEST : TTHP_MSG_NOTIFICATION;
        return 0;
    }
    json_t *result = json_object_get(m->root, "result");
    json_t *error = json_object_get(m->root, "error");
    if (!id || (!result == !error))
        return invalid(m, TTHP_INVALID_REQUEST, "a message needs \"method\", or \"id\" with \"result\" or \"error\"");
    if (error && (!json_is_object(error) || !json_is_integer(json_object_get(error, "code"))))
        return invalid(m, TTHP_INVALID_REQUEST, "\"error\" must be an object with an integer \"code\"");
    m->result = result;
    m->error = error;
    m->kind = TTHP_MSG_RESPONSE;
    return 0;
}

void tthp_message_clear(tthp_message *m)
{
    json_decref(m->root);
    memset(m, 0, sizeof *m);
}

/* m with "params" set to params_new (stolen), when both are there. */
static json_t *with_params(json_t *m, json_t *params_new)
{
    if (m && params_new)
        json_object_set_new(m, "params", params_new);
    else
        json_decref(params_new);
    return m;
}

json_t *tthp_request_new(json_int_t id, const char *method, json_t *params_new)
{
    return with_params(json_pack("{s:s, s:I, s:s}", "jsonrpc", "2.0", "id", id, "method", method), params_new);
}

json_t *tthp_notification_new(const char *method, json_t *params_new)
{
    return with_params(json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method", method), params_new);
}

json_t *tthp_result_new(const json_t *id, json_t *result_new)
{
    json_t *m = json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "result",
                          result_new ? result_new : json_null());
    return m;
}

/* length of the valid UTF-8 sequence at s (1 to 4), 0 when it is not one (a stray continuation
 * byte, an overlong form, a surrogate, past U+10FFFF, or cut short) */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 0;
    if (n == 0 || (n == 3 && c > 0xEF))
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    if ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] > 0x9F) || (c == 0xF0 && s[1] < 0x90) ||
        (c == 0xF4 && s[1] > 0x8F))
        return 0;
    return n;
}

/* s with every byte that is not part of valid UTF-8 replaced by '?': an error message may quote
 * what a client sent (or be cut inside a character), and JSON text must be UTF-8. Caller frees;
 * NULL on OOM. */
static char *utf8_clean(const char *s)
{
    size_t len = strlen(s);
    char *out = malloc(len + 1);
    if (!out)
        return NULL;
    size_t i = 0;
    while (i < len) {
        size_t n = utf8_len((const unsigned char *)s + i);
        if (n == 0) {
            out[i++] = '?';
            continue;
        }
        memcpy(out + i, s + i, n);
        i += n;
    }
    out[len] = 0;
    return out;
}

void tthp_utf8_trim_end(char *s)
{
    size_t len = strlen(s), i = len;
    /* back to the first byte of the last sequence (at most 3 continuation bytes) */
    while (i > 0 && len - i < 4 && ((unsigned char)s[i - 1] & 0xC0) == 0x80)
        i--;
    if (i == 0)
        return;
    unsigned c = (unsigned char)s[i - 1];
    size_t want = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (want > len - (i - 1))
        s[i - 1] = '\0';
}

json_t *tthp_error_new(const json_t *id, int code, const char *message, json_t *data_new)
{
    char *clean = utf8_clean(message ? message : "");
    json_t *err = clean ? json_pack("{s:i, s:s}", "code", code, "message", clean) : NULL;
    free(clean);
    if (err && data_new)
        json_object_set_new(err, "data", data_new);
    else
        json_decref(data_new);
    if (!err)
        return NULL;
    return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error", err);
}

json_t *tthp_answer_or_internal(json_t *answer_new, const json_t *id)
{
    if (answer_new)
        return answer_new;
    return json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error", "code",
                     TTHP_INTERNAL_ERROR, "message", "internal error: the answer could not be built");
}

json_t *tthp_diagnostic_new(const char *code, int severity, const char *message, const char *location,
                            const char *hint)
{
    char *m = utf8_clean(message ? message : ""), *l = utf8_clean(location ? location : ""),
         *h = utf8_clean(hint ? hint : "");
    json_t *d = m && l && h ? json_pack("{s:s, s:i, s:s, s:s, s:s}", "code", code ? code : "EINTERNAL", "severity",
                                        severity, "message", m, "location", l, "hint", h)
                            : NULL;
    free(m);
    free(l);
    free(h);
    return d;
}

char *tthp_message_dump(const json_t *msg, size_t *len)
{
    char *s = json_dumps(msg, JSON_COMPACT | JSON_ENCODE_ANY);
    if (s && len)
        *len = strlen(s);
    return s;
}

int tthp_write_message_fd(int fd, const json_t *msg)
{
    size_t len;
    char *s = tthp_message_dump(msg, &len);
    if (!s)
        return -ENOMEM;
    int rc = tthp_write_frame_fd(fd, s, len, 0);
    free(s);
    return rc;
}

int tthp_write_chunk_fd(int fd, const json_t *id, const char *stream, size_t offset, const void *data,
                        size_t size, size_t total)
{
    json_t *n = tthp_notification_new(
        "$/chunk", json_pack("{s:O, s:s, s:I, s:I, s:I}", "id", id ? id : json_null(), "stream", stream,
                             "offset", (json_int_t)offset, "size", (json_int_t)size, "total",
                             (json_int_t)total));
    if (!n)
        return -ENOMEM;
    int rc = tthp_write_message_fd(fd, n);
    json_decref(n);
    if (rc == 0)
        rc = tthp_write_frame_fd(fd, data, size, 1);
    return rc;
}

int tthp_version_parse(const char *s, int *major, int *minor)
{
    if (!s || !isdigit((unsigned char)*s))
        return -1;
    char *end;
    long ma = strtol(s, &end, 10), mi = 0;
    if (*end == '.') {
        if (!isdigit((unsigned char)end[1]))
            return -1;
        mi = strtol(end + 1, &end, 10);
    }
    if (*end || ma > 1000000 || mi > 1000000)
        return -1;
    *major = (int)ma;
    *minor = (int)mi;
    return 0;
}

int tthp_data_location_valid(const char *loc)
{
    if (!loc || !*loc || loc[0] == '/' || strlen(loc) > 1024 || strchr(loc, '\\'))
        return 0;
    for (const char *p = loc; *p;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 0 || (n == 2 && p[0] == '.' && p[1] == '.'))
            return 0;
        p += n + (e ? 1 : 0);
        if (e && !*p)
            return 0;
    }
    return 1;
}

int tthp_model_name_valid(const char *s)
{
    if (!s || !(isalpha((unsigned char)*s) || *s == '_'))
        return 0;
    size_t n = 0;
    for (; s[n]; n++)
        if (!(isalnum((unsigned char)s[n]) || s[n] == '_') || n >= TTHP_MAX_MODEL_NAME)
            return 0;
    return 1;
}
