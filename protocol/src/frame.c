/* frame.c: the incremental frame parser and frame writers (PROTOCOL.md section 2). */
#include "tthproto/frame.h"

#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/uio.h>
#include <unistd.h>

enum { ST_HEADER, ST_BODY, ST_SKIP, ST_FAILED };

void tthp_parser_init(tthp_parser *p, size_t max_frame)
{
    memset(p, 0, sizeof *p);
    p->max_frame = max_frame ? max_frame : TTHP_DEFAULT_MAX_FRAME_BYTES;
    p->state = ST_HEADER;
}

void tthp_parser_free(tthp_parser *p)
{
    free(p->body);
    p->body = NULL;
    p->body_cap = 0;
}

static ssize_t fail(tthp_parser *p, int err, const char *fmt, const char *arg)
{
    p->state = ST_FAILED;
    p->error = err;
    snprintf(p->errmsg, sizeof p->errmsg, fmt, arg);
    return err;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = '\0';
    return s;
}

/* Parse the header section held in p->hdr (lines separated by \n, \r stripped later).
 * Sets p->want and p->binary. */
static ssize_t parse_header(tthp_parser *p)
{
    int have_len = 0;
    p->binary = 0;
    p->want = 0;
    char *save = NULL;
    p->hdr[p->hdr_len] = '\0';
    for (char *line = strtok_r(p->hdr, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        size_t n = strlen(line);
        if (n && line[n - 1] == '\r')
            line[--n] = '\0';
        if (n == 0)
            continue;
        char *colon = strchr(line, ':');
        if (!colon || colon == line)
            return fail(p, TTHP_EFRAME_HEADER, "header line '%.60s' is not 'Name: value'", line);
        *colon = '\0';
        char *name = trim(line), *value = trim(colon + 1);
        if (strcasecmp(name, "Content-Length") == 0) {
            if (have_len)
                return fail(p, TTHP_EFRAME_LENGTH, "%s appears twice", "Content-Length");
            size_t v = 0, digits = 0;
            for (const char *c = value; *c; c++, digits++) {
                if (!isdigit((unsigned char)*c) || digits >= 19)
                    return fail(p, TTHP_EFRAME_LENGTH, "Content-Length '%.40s' is not a decimal number",
                                value);
                v = v * 10 + (size_t)(*c - '0');
            }
            if (digits == 0)
                return fail(p, TTHP_EFRAME_LENGTH, "Content-Length '%s' is empty", value);
            p->want = v;
            have_len = 1;
        } else if (strcasecmp(name, "Content-Type") == 0) {
            char *semi = strchr(value, ';');
            if (semi)
                *semi = '\0';
            value = trim(value);
            if (strcasecmp(value, "application/octet-stream") == 0)
                p->binary = 1;
            else if (strcasecmp(value, "application/vscode-jsonrpc") == 0 ||
                     strcasecmp(value, "application/json") == 0)
                p->binary = 0;
            else
                return fail(p, TTHP_EFRAME_TYPE, "unknown Content-Type '%.60s'", value);
        }
    }
    if (!have_len)
        return fail(p, TTHP_EFRAME_LENGTH, "%s header is missing", "Content-Length");
    return 0;
}

ssize_t tthp_parser_feed(tthp_parser *p, const void *buf, size_t len, tthp_frame *out)
{
    const uint8_t *in = buf;
    size_t used = 0;
    out->type = TTHP_FRAME_NONE;
    out->data = NULL;
    out->len = 0;
    out->binary = 0;
    if (p->state == ST_FAILED)
        return p->error;
    while (used < len) {
        if (p->state == ST_HEADER) {
            uint8_t c = in[used++];
            if (p->hdr_len >= TTHP_MAX_HEADER_BYTES)
                return fail(p, TTHP_EFRAME_HUGE, "header section longer than %s bytes", "4096");
            p->hdr[p->hdr_len++] = (char)c;
            if (c != '\n')
                continue;
            /* a line ended: is it the empty line? */
            size_t line_len = p->hdr_len - 1 - p->line_start;
            if (line_len > 0 && p->hdr[p->hdr_len - 2] == '\r')
                line_len--;
            if (line_len > 0) {
                p->line_start = p->hdr_len;
                continue;
            }
            if (p->line_start == 0)
                return fail(p, TTHP_EFRAME_HEADER, "empty header section%s", "");
            ssize_t rc = parse_header(p);
            if (rc < 0)
                return rc;
            p->hdr_len = 0;
            p->line_start = 0;
            p->body_len = 0;
            if (p->want > p->max_frame) {
                p->state = p->want ? ST_SKIP : ST_HEADER;
                out->type = TTHP_FRAME_OVERSIZE;
                out->len = p->want;
                out->binary = p->binary;
                return (ssize_t)used;
            }
            if (p->body_cap < p->want + 1) {
                uint8_t *nb = realloc(p->body, p->want + 1);
                if (!nb)
                    return fail(p, TTHP_EFRAME_NOMEM, "cannot allocate a frame body%s", "");
                p->body = nb;
                p->body_cap = p->want + 1;
            }
            p->state = ST_BODY;
            if (p->want == 0)
                goto complete;
        } else {
            size_t take = p->want - p->body_len;
            if (take > len - used)
                take = len - used;
            if (p->state == ST_BODY)
                memcpy(p->body + p->body_len, in + used, take);
            p->body_len += take;
            used += take;
            if (p->body_len < p->want)
                continue;
            if (p->state == ST_SKIP) {
                p->state = ST_HEADER;
                continue;
            }
            goto complete;
        }
    }
    return (ssize_t)used;
complete:
    p->body[p->want] = 0;
    p->state = ST_HEADER;
    out->type = p->binary ? TTHP_FRAME_BINARY : TTHP_FRAME_JSON;
    out->data = p->body;
    out->len = p->want;
    out->binary = p->binary;
    return (ssize_t)used;
}

size_t tthp_frame_header(char *buf, size_t cap, size_t len, int binary)
{
    int n = snprintf(buf, cap, "Content-Length: %zu\r\n%s\r\n", len,
                     binary ? "Content-Type: application/octet-stream\r\n" : "");
    return n < 0 ? 0 : (size_t)n;
}

int tthp_write_frame_fd(int fd, const void *body, size_t len, int binary)
{
    char hdr[128];
    size_t hl = tthp_frame_header(hdr, sizeof hdr, len, binary);
    struct iovec iov[2] = {{hdr, hl}, {(void *)body, len}};
    int idx = 0;
    while (idx < 2) {
        ssize_t n = writev(fd, iov + idx, 2 - idx);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        while (idx < 2 && (size_t)n >= iov[idx].iov_len) {
            n -= (ssize_t)iov[idx].iov_len;
            idx++;
        }
        if (idx < 2) {
            iov[idx].iov_base = (char *)iov[idx].iov_base + n;
            iov[idx].iov_len -= (size_t)n;
        }
    }
    return 0;
}

void tthp_fd_reader_init(tthp_fd_reader *r, int fd, size_t max_frame)
{
    r->fd = fd;
    r->pos = r->len = 0;
    tthp_parser_init(&r->parser, max_frame);
}

void tthp_fd_reader_free(tthp_fd_reader *r)
{
    tthp_parser_free(&r->parser);
}

int tthp_fd_read_frame(tthp_fd_reader *r, tthp_frame *out, int timeout_ms)
{
    for (;;) {
        if (r->pos < r->len) {
            ssize_t n = tthp_parser_feed(&r->parser, r->buf + r->pos, r->len - r->pos, out);
            if (n < 0)
                return (int)n;
            r->pos += (size_t)n;
            if (out->type != TTHP_FRAME_NONE)
                return 1;
            continue;
        }
        if (timeout_ms >= 0) {
            struct pollfd pfd = {.fd = r->fd, .events = POLLIN};
            int pr;
            do
                pr = poll(&pfd, 1, timeout_ms);
            while (pr < 0 && errno == EINTR);
            if (pr < 0)
                return -errno;
            if (pr == 0)
                return -ETIMEDOUT;
        }
        ssize_t n;
        do
            n = read(r->fd, r->buf, sizeof r->buf);
        while (n < 0 && errno == EINTR);
        if (n < 0)
            return -errno;
        if (n == 0) {
            int mid = r->parser.state != ST_HEADER || r->parser.hdr_len > 0;
            return mid ? -EPIPE : 0;
        }
        r->pos = 0;
        r->len = (size_t)n;
    }
}
