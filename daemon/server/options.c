/* options.c: values of tthd's options: sizes, seconds, and the remote cache's URL
 * (docs/cache.md, "The remote cache on Redis"). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tth/target.h>

#include "tthd.h"

int tthd_parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *s == '-')
        return -1;
    uint64_t mul = 1;
    if (*end == 'K' || *end == 'k')
        mul = 1024, end++;
    else if (*end == 'M' || *end == 'm')
        mul = 1024 * 1024, end++;
    else if (*end == 'G' || *end == 'g')
        mul = 1024ull * 1024 * 1024, end++;
    if (*end || v > UINT64_MAX / mul)
        return -1;
    *out = (uint64_t)v * mul;
    return 0;
}

int tthd_parse_seconds(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !(v >= 0) || v > 1e9)
        return -1;
    *out = v;
    return 0;
}

void tthd_remote_config_free(tthd_remote_config *cfg)
{
    free(cfg->shown);
    free(cfg->host);
    free(cfg->unix_path);
    free(cfg->user);
    free(cfg->password);
    memset(cfg, 0, sizeof *cfg);
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* n bytes of s with %XX decoded, or NULL (bad escape, a NUL, no memory) */
static char *decode(const char *s, size_t n)
{
    char *out = malloc(n + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            *o++ = s[i];
            continue;
        }
        int hi = i + 2 < n ? hex_digit(s[i + 1]) : -1, lo = i + 2 < n ? hex_digit(s[i + 2]) : -1;
        if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
            free(out);
            return NULL;
        }
        *o++ = (char)(hi * 16 + lo);
        i += 2;
    }
    *o = '\0';
    return out;
}

static const char *const remote_params[] = {"db", "ttl", "max_bytes", "timeout", "retry", "user", "password"};

static int bad(char *msg, size_t len, const char *fmt, const char *a, const char *b)
{
    snprintf(msg, len, fmt, a, b);
    return -1;
}

/* one name=value of the query */
static int set_param(tthd_remote_config *cfg, const char *name, size_t nlen, const char *val, size_t vlen,
                     char *msg, size_t len)
{
    char key[32], *v = decode(val, vlen);
    snprintf(key, sizeof key, "%.*s", (int)(nlen < 31 ? nlen : 31), name);
    if (!v)
        return bad(msg, len, "the value of '%s'%s is not properly %%-escaped", key, "");
    uint64_t u = 0;
    double d = 0;
    int rc = 0;
    if (strcmp(key, "db") == 0) {
        rc = tthd_parse_size(v, &u) || u > 100000 ? bad(msg, len, "db '%s'%s is not a database number", v, "") : 0;
        cfg->db = (int)u;
    } else if (strcmp(key, "ttl") == 0) {
        rc = tthd_parse_size(v, &u) || u == 0 || u > 100ull * 365 * 86400
                 ? bad(msg, len, "ttl '%s'%s is not a number of seconds from 1 to 100 years", v, "")
                 : 0;
        cfg->ttl = u;
    } else if (strcmp(key, "max_bytes") == 0) {
        rc = tthd_parse_size(v, &u) || u < 1024 || u > (512ull << 20)
                 ? bad(msg, len, "max_bytes '%s'%s is not a size from 1K to 512M (Redis's largest value)", v, "")
                 : 0;
        cfg->max_bytes = u;
    } else if (strcmp(key, "timeout") == 0) {
        rc = tthd_parse_seconds(v, &d) || d < 0.001 || d > 3600
                 ? bad(msg, len, "timeout '%s'%s is not a number of seconds from 0.001 to 3600", v, "")
                 : 0;
        cfg->timeout = d;
    } else if (strcmp(key, "retry") == 0) {
        rc = tthd_parse_seconds(v, &d) || d > 86400
                 ? bad(msg, len, "retry '%s'%s is not a number of seconds up to 86400", v, "")
                 : 0;
        cfg->retry = d;
    } else if (strcmp(key, "user") == 0) {
        free(cfg->user);
        cfg->user = v;
        v = NULL;
    } else if (strcmp(key, "password") == 0) {
        free(cfg->password);
        cfg->password = v;
        v = NULL;
    } else {
        char near[128] = "";
        tth_nearest_names(key, remote_params, sizeof remote_params / sizeof *remote_params, 2, near, sizeof near);
        snprintf(msg, len, "unknown parameter '%s'%s%s (known: db, ttl, max_bytes, timeout, retry, user, password)",
                 key, near[0] ? "; did you mean " : "", near);
        rc = -1;
    }
    free(v);
    return rc;
}

/* host[:port] or [v6]:port into cfg (s of n bytes) */
static int set_host(tthd_remote_config *cfg, const char *s, size_t n, char *msg, size_t len)
{
    char buf[512];
    if (n >= sizeof buf)
        return bad(msg, len, "the host name is too long%s%s", "", "");
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *host = buf, *port = NULL;
    if (buf[0] == '[') {
        char *close = strchr(buf, ']');
        if (!close || (close[1] && close[1] != ':'))
            return bad(msg, len, "the host '%s'%s is not [IPv6 address] or [IPv6 address]:PORT", buf, "");
        *close = '\0';
        host = buf + 1;
        port = close[1] ? close + 2 : NULL;
    } else if ((port = strchr(buf, ':')) != NULL) {
        *port++ = '\0';
    }
    if (!host[0])
        return bad(msg, len, "no host name%s%s (redis://HOST[:PORT][/DB])", "", "");
    cfg->port = 6379;
    if (port) {
        uint64_t u;
        if (!port[0] || strpbrk(port, "KkMmGg") || tthd_parse_size(port, &u) || u == 0 || u > 65535)
            return bad(msg, len, "port '%s'%s is not a number from 1 to 65535", port, "");
        cfg->port = (int)u;
    }
    cfg->host = strdup(host);
    return cfg->host ? 0 : bad(msg, len, "out of memory%s%s", "", "");
}

int tthd_remote_parse(const char *url, tthd_remote_config *cfg, char *msg, size_t len)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->ttl = 7 * 86400;
    cfg->max_bytes = 256u << 20;
    cfg->timeout = 2;
    cfg->retry = 30;
    const char *rest, *query = strchr(url, '?');
    const char *end = query ? query : url + strlen(url);
    int rc = 0;
    if (strncmp(url, "rediss://", 9) == 0) {
        rc = bad(msg, len, "TLS (rediss://) is not supported%s%s: reach Redis by a unix socket or a local tunnel", "", "");
    } else if (strncmp(url, "redis://", 8) == 0) {
        rest = url + 8;
        const char *slash = memchr(rest, '/', (size_t)(end - rest));
        const char *hp_end = slash ? slash : end;
        const char *at = NULL;
        for (const char *p = rest; p < hp_end; p++)
            if (*p == '@')
                at = p;
        if (at) {
            const char *colon = memchr(rest, ':', (size_t)(at - rest));
            if (colon) {
                if (colon > rest)
                    cfg->user = decode(rest, (size_t)(colon - rest));
                cfg->password = decode(colon + 1, (size_t)(at - colon - 1));
                rc = (colon > rest && !cfg->user) || !cfg->password;
            } else {
                cfg->password = decode(rest, (size_t)(at - rest));
                rc = !cfg->password;
            }
            if (rc)
                rc = bad(msg, len, "the user or password is not properly %%-escaped%s%s", "", "");
            rest = at + 1;
        }
        if (rc == 0)
            rc = set_host(cfg, rest, (size_t)(hp_end - rest), msg, len);
        if (rc == 0 && slash && slash + 1 < end) {
            char db[16];
            snprintf(db, sizeof db, "%.*s", (int)(end - slash - 1 < 15 ? end - slash - 1 : 15), slash + 1);
            uint64_t u;
            if (tthd_parse_size(db, &u) || u > 100000 || strpbrk(db, "KkMmGg"))
                rc = bad(msg, len, "the database '%s'%s is not a number (redis://HOST[:PORT]/DB)", db, "");
            cfg->db = (int)u;
        }
    } else if (strncmp(url, "unix://", 7) == 0 || url[0] == '/') {
        rest = url[0] == '/' ? url : url + 7;
        if (rest[0] != '/' || rest + 1 >= end)
            rc = bad(msg, len, "a unix socket needs an absolute path (unix:///run/redis/redis.sock)%s%s", "", "");
        else
            cfg->unix_path = decode(rest, (size_t)(end - rest));
        if (rc == 0 && !cfg->unix_path)
            rc = bad(msg, len, "the socket path is not properly %%-escaped%s%s", "", "");
    } else {
        rc = bad(msg, len, "'%s'%s is not a Redis address: use redis://[[USER]:PASSWORD@]HOST[:PORT][/DB], "
                 "unix:///PATH or /PATH, with ?ttl=..&max_bytes=..&timeout=..&retry=.. if wanted", url, "");
    }
    for (const char *p = query ? query + 1 : NULL; rc == 0 && p && *p;) {
        const char *amp = strchr(p, '&'), *stop = amp ? amp : p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(stop - p));
        if (!eq) {
            snprintf(msg, len, "parameter '%.*s' has no value (NAME=VALUE)", (int)(stop - p < 64 ? stop - p : 64), p);
            rc = -1;
        } else {
            rc = set_param(cfg, p, (size_t)(eq - p), eq + 1, (size_t)(stop - eq - 1), msg, len);
        }
        p = amp ? amp + 1 : NULL;
    }
    if (rc == 0) {
        /* shown in logs and status: never the password */
        char shown[1200];
        if (cfg->unix_path)
            snprintf(shown, sizeof shown, "unix://%s?db=%d", cfg->unix_path, cfg->db);
        else
            snprintf(shown, sizeof shown, "redis://%s%s%s%s%s%s:%d/%d", cfg->user ? cfg->user : "",
                     cfg->password ? ":***" : "", cfg->user || cfg->password ? "@" : "",
                     strchr(cfg->host, ':') ? "[" : "", cfg->host, strchr(cfg->host, ':') ? "]" : "", cfg->port,
                     cfg->db);
        cfg->shown = strdup(shown);
        if (!cfg->shown)
            rc = bad(msg, len, "out of memory%s%s", "", "");
    }
    if (rc != 0)
        tthd_remote_config_free(cfg);
    return rc;
}
