/* libFuzzer target: the incremental frame parser (protocol/src/frame.c).
 *
 * The first byte picks a maximum frame size, the second a split pattern: the rest is fed to the
 * parser in pieces of varying sizes, as a socket would deliver it. Invariants checked:
 *   - the parser never consumes more than it was given, and always makes progress;
 *   - a JSON or binary frame's body is at most max_frame bytes and NUL-terminated;
 *   - an OVERSIZE event announces more than max_frame bytes;
 *   - after an error, every later call returns the same error;
 *   - feeding the same bytes in one piece gives the same sequence of events. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tthproto/frame.h>

#define MAX_EVENTS 4096

typedef struct event {
    int type;
    size_t len;
    uint64_t sum;
} event;

static uint64_t checksum(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* Feed data in pieces; record events; returns the final error (0 if none). */
static int run(const uint8_t *data, size_t size, size_t max_frame, uint8_t pattern, event *ev, size_t *nev)
{
    tthp_parser p;
    tthp_parser_init(&p, max_frame);
    size_t off = 0, step = 0;
    int err = 0;
    *nev = 0;
    while (off < size) {
        size_t piece = pattern ? (size_t)((pattern >> (step++ % 8)) & 0x7) * 13 + 1 : size - off;
        if (piece > size - off)
            piece = size - off;
        size_t used = 0;
        while (used < piece) {
            tthp_frame f;
            ssize_t n = tthp_parser_feed(&p, data + off + used, piece - used, &f);
            if (n < 0) {
                err = (int)n;
                tthp_frame g;
                if (tthp_parser_feed(&p, "x", 1, &g) != n)
                    abort(); /* a failed parser must stay failed */
                goto done;
            }
            if ((size_t)n > piece - used)
                abort();
            if (n == 0 && f.type == TTHP_FRAME_NONE)
                abort(); /* no progress */
            used += (size_t)n;
            if (f.type == TTHP_FRAME_JSON || f.type == TTHP_FRAME_BINARY) {
                if (f.len > max_frame || f.data[f.len] != 0)
                    abort();
                if ((f.type == TTHP_FRAME_BINARY) != (f.binary != 0))
                    abort();
            } else if (f.type == TTHP_FRAME_OVERSIZE) {
                if (f.len <= max_frame)
                    abort();
            }
            if (f.type != TTHP_FRAME_NONE && *nev < MAX_EVENTS) {
                ev[*nev].type = f.type;
                ev[*nev].len = f.len;
                ev[*nev].sum = f.data ? checksum(f.data, f.len) : 0;
                (*nev)++;
            }
        }
        off += piece;
    }
done:
    tthp_parser_free(&p);
    return err;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t max_frame = (size_t)(data[0] % 64 + 1) * 16;
    uint8_t pattern = data[1] | 1;
    static event a[MAX_EVENTS], b[MAX_EVENTS];
    size_t na, nb;
    int ea = run(data + 2, size - 2, max_frame, pattern, a, &na);
    int eb = run(data + 2, size - 2, max_frame, 0, b, &nb);
    if (ea != eb || na != nb)
        abort(); /* the split must not matter */
    for (size_t i = 0; i < na; i++)
        if (a[i].type != b[i].type || a[i].len != b[i].len || a[i].sum != b[i].sum)
            abort();

    /* a frame we write must parse back to itself */
    char hdr[128];
    size_t body = size - 2 < 512 ? size - 2 : 512;
    size_t hl = tthp_frame_header(hdr, sizeof hdr, body, data[1] & 1);
    uint8_t *buf = malloc(hl + body);
    memcpy(buf, hdr, hl);
    memcpy(buf + hl, data + 2, body);
    tthp_parser p;
    tthp_parser_init(&p, 1024);
    tthp_frame f;
    size_t used = 0;
    f.type = TTHP_FRAME_NONE;
    while (used < hl + body && f.type == TTHP_FRAME_NONE) {
        ssize_t n = tthp_parser_feed(&p, buf + used, hl + body - used, &f);
        if (n < 0)
            abort();
        used += (size_t)n;
    }
    if (f.type != ((data[1] & 1) ? TTHP_FRAME_BINARY : TTHP_FRAME_JSON) || f.len != body ||
        memcmp(f.data, data + 2, body) != 0)
        abort();
    tthp_parser_free(&p);
    free(buf);
    return 0;
}
