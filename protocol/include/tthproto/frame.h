/* tthproto/frame.h: LSP-style framing (PROTOCOL.md section 2).
 *
 *   Content-Length: N\r\n
 *   [Content-Type: application/octet-stream\r\n]
 *   \r\n
 *   <N bytes>
 *
 * The parser is incremental and never allocates more than one frame body (bounded by
 * max_frame): feed it whatever the socket gave, it consumes bytes up to the end of at most one
 * event and says how many it took. */
#ifndef TTHPROTO_FRAME_H
#define TTHPROTO_FRAME_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tthproto/limits.h"

typedef enum tthp_frame_type {
    TTHP_FRAME_NONE = 0,     /* no event yet: feed more bytes */
    TTHP_FRAME_JSON = 1,     /* a JSON-RPC message body */
    TTHP_FRAME_BINARY = 2,   /* Content-Type: application/octet-stream */
    TTHP_FRAME_OVERSIZE = 3, /* header announced more than max_frame; body being discarded */
} tthp_frame_type;

typedef struct tthp_frame {
    tthp_frame_type type;
    const uint8_t *data; /* body (NUL-terminated for convenience); valid until the next feed */
    size_t len;          /* body length; for OVERSIZE, the announced length */
    int binary;          /* for OVERSIZE: whether the discarded frame was binary */
} tthp_frame;

/* Parser errors (negative). After one, the stream cannot be resynchronised. */
enum {
    TTHP_EFRAME_HEADER = -1, /* malformed header line or header section */
    TTHP_EFRAME_LENGTH = -2, /* Content-Length missing, repeated or not a number */
    TTHP_EFRAME_TYPE = -3,   /* unknown Content-Type */
    TTHP_EFRAME_NOMEM = -4,  /* could not allocate the body */
    TTHP_EFRAME_HUGE = -5,   /* header section longer than TTHP_MAX_HEADER_BYTES */
};

typedef struct tthp_parser {
    int state;          /* internal: header, body, skip, failed */
    size_t max_frame;   /* bodies longer than this become OVERSIZE events */
    char hdr[TTHP_MAX_HEADER_BYTES + 1];
    size_t hdr_len;
    size_t line_start;  /* offset in hdr of the line being read */
    uint8_t *body;      /* current body (owned) */
    size_t body_cap;
    size_t body_len;    /* bytes of the body received so far */
    size_t want;        /* announced length of the current body */
    int binary;         /* current frame is binary */
    int error;          /* the error that failed the parser, or 0 */
    char errmsg[160];   /* why, for the error response */
} tthp_parser;

void tthp_parser_init(tthp_parser *p, size_t max_frame);
void tthp_parser_free(tthp_parser *p);

/* Consume bytes from buf; returns how many were consumed (>= 0) or a negative TTHP_EFRAME_*
 * (p->errmsg says why). *out is set to the event completed by the consumed bytes, if any
 * (type TTHP_FRAME_NONE otherwise). Call again with the rest until all is consumed. */
ssize_t tthp_parser_feed(tthp_parser *p, const void *buf, size_t len, tthp_frame *out);

/* Render a frame header for a body of len bytes into buf (at least 96 bytes).
 * Returns the header length. */
size_t tthp_frame_header(char *buf, size_t cap, size_t len, int binary);

/* Blocking helpers for simple programs (worker, client, tests, benchmarks). */

/* Write one whole frame to fd; handles EINTR and short writes. 0 or -errno. */
int tthp_write_frame_fd(int fd, const void *body, size_t len, int binary);

/* A blocking frame reader on fd. */
typedef struct tthp_fd_reader {
    int fd;
    tthp_parser parser;
    uint8_t buf[65536];
    size_t pos, len;
} tthp_fd_reader;

void tthp_fd_reader_init(tthp_fd_reader *r, int fd, size_t max_frame);
void tthp_fd_reader_free(tthp_fd_reader *r);
/* Read the next event: 1 with *out filled, 0 at end of file between frames, negative on error
 * (-errno for I/O, TTHP_EFRAME_* for bad frames, -EPIPE for end of file inside a frame).
 * timeout_ms < 0 waits forever; on timeout returns -ETIMEDOUT. */
int tthp_fd_read_frame(tthp_fd_reader *r, tthp_frame *out, int timeout_ms);

#endif
