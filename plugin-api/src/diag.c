/* diag.c: filling and rendering tth_diag without allocating. */
#include "tth/diag.h"

#include <stdio.h>
#include <string.h>

void tth_diag_clear(tth_diag *d)
{
    if (!d)
        return;
    d->code = TTH_OK;
    d->severity = 0;
    d->message[0] = d->location[0] = d->hint[0] = '\0';
}

int tth_diag_vset(tth_diag *d, int code, const char *location, const char *fmt, va_list ap)
{
    if (!d)
        return code;
    d->code = code;
    d->severity = TTH_SEV_ERROR;
    vsnprintf(d->message, sizeof d->message, fmt, ap);
    snprintf(d->location, sizeof d->location, "%s", location ? location : "");
    d->hint[0] = '\0';
    return code;
}

int tth_diag_set(tth_diag *d, int code, const char *location, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tth_diag_vset(d, code, location, fmt, ap);
    va_end(ap);
    return code;
}

void tth_diag_hint(tth_diag *d, const char *fmt, ...)
{
    if (!d)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->hint, sizeof d->hint, fmt, ap);
    va_end(ap);
}

void tth_diag_prefix(tth_diag *d, const char *fmt, ...)
{
    if (!d)
        return;
    char head[TTH_DIAG_MESSAGE_MAX];
    char old[TTH_DIAG_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    memcpy(old, d->message, sizeof old);
    size_t n = strlen(head);
    if (n > sizeof d->message - 3)
        n = sizeof d->message - 3;
    memcpy(d->message, head, n);
    memcpy(d->message + n, ": ", 2);
    size_t room = sizeof d->message - n - 2;
    size_t m = strnlen(old, room - 1);
    memcpy(d->message + n + 2, old, m);
    d->message[n + 2 + m] = '\0';
}

const char *tth_strerror(int code)
{
    switch (code) {
#define TTH__ERR_TEXT(name, value, text) case value: return text;
        TTH_ERRORS(TTH__ERR_TEXT)
#undef TTH__ERR_TEXT
    }
    return "unknown error";
}

const char *tth_error_name(int code)
{
    switch (code) {
#define TTH__ERR_NAME(name, value, text) case value: return #name;
        TTH_ERRORS(TTH__ERR_NAME)
#undef TTH__ERR_NAME
    }
    return "EUNKNOWNCODE";
}

size_t tth_diag_format(const tth_diag *d, char *buf, size_t len)
{
    if (!buf || len == 0)
        return 0;
    int n = snprintf(buf, len, "error: %s", d->message[0] ? d->message : tth_strerror(d->code));
    if (n >= 0 && (size_t)n < len && d->location[0])
        n += snprintf(buf + n, len - (size_t)n, "\n  at: %s", d->location);
    if (n >= 0 && (size_t)n < len && d->hint[0])
        n += snprintf(buf + n, len - (size_t)n, "\n  hint: %s", d->hint);
    return n < 0 ? 0 : ((size_t)n < len ? (size_t)n : len - 1);
}
