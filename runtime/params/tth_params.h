/* tth_params.h: the one reader of an artifact's parameters file, parameters/<model>.params (its
 * layout and who reads it: docs/artifact.md, "The parameters file and its reader").
 *
 * Header-only C99 of static functions that needs nothing but the C library's <stddef.h>,
 * <stdint.h> and <string.h>: the host runtime includes it, and the C sources that tth ships inside
 * artifacts carry it inlined, so they still compile on their own with any C compiler.
 *
 * Every length is checked against the buffer before a byte of it is read: a truncated or
 * malicious file gives an error, never a read outside [buf, buf + len).
 *
 *   tth_params_reader r;
 *   tth_params_entry e;
 *   int rc = tth_params_open(&r, buf, len);
 *   while (rc == 0 && (rc = tth_params_next(&r, &e)) > 0)
 *       ... e.name, e.name_len, e.dtype, e.rank, tth_params_dim(&e, i), e.data, e.bytes ...
 *   rc < 0: a TTH_PARAMS_E_* (after the last entry rc is 0)
 */
#ifndef TTH_PARAMS_H
#define TTH_PARAMS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define TTH_PARAMS_E_MAGIC (-1)     /* not a parameters file: no "TTHPARAM" magic */
#define TTH_PARAMS_E_VERSION (-2)   /* a parameters file of a version other than 1 */
#define TTH_PARAMS_E_MALFORMED (-3) /* truncated, or a count or length that does not fit */

#define TTH_PARAMS_HEADER 16u /* magic, version, count */
#define TTH_PARAMS_ALIGN 64u  /* every entry's data starts at a multiple of this from the file start */
/* the least an entry takes: name length, dtype, rank, byte length (an empty name, rank 0, no data) */
#define TTH_PARAMS_MIN_ENTRY 20u

/* Generated code is compiled with -Wall -Werror, and each reader uses only some of these
 * functions: clang warns of an unused static inline function in the file it compiles, which the
 * inlined copy is. */
#if defined(__GNUC__) || defined(__clang__)
#define TTH_PARAMS_FN static inline __attribute__((unused))
#else
#define TTH_PARAMS_FN static inline
#endif

typedef struct tth_params_reader {
    const unsigned char *buf;
    size_t len;
    uint32_t version; /* as read: set before TTH_PARAMS_E_VERSION is returned, for messages */
    uint32_t count;   /* entries the file holds */
    uint32_t index;   /* the entry tth_params_next reads next; after an error, the one that failed */
    size_t at;        /* its offset in buf */
    int status;       /* 0, or the error every later tth_params_next returns */
} tth_params_reader;

typedef struct tth_params_entry {
    const char *name; /* name_len bytes of UTF-8, not NUL-terminated */
    size_t name_len;
    uint32_t dtype;   /* tth's dtype numbers (1 float32, 4 int8, ...) */
    uint32_t rank;
    const unsigned char *dims; /* rank little-endian i64: read them with tth_params_dim */
    const unsigned char *data; /* bytes of row-major data at buf + offset */
    size_t offset;             /* a multiple of TTH_PARAMS_ALIGN */
    size_t bytes;
} tth_params_entry;

/* the file's integers are little-endian whatever the machine reading it */
TTH_PARAMS_FN uint32_t tth_params_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

TTH_PARAMS_FN uint64_t tth_params_u64(const unsigned char *p)
{
    return (uint64_t)tth_params_u32(p) | (uint64_t)tth_params_u32(p + 4) << 32;
}

/* Checks the header of buf[0, len) and readies r for tth_params_next: 0, or TTH_PARAMS_E_MAGIC
 * (also for a NULL buf), _VERSION, or _MALFORMED for a file shorter than its header or a count of
 * entries that cannot fit in len. */
TTH_PARAMS_FN int tth_params_open(tth_params_reader *r, const void *buf, size_t len)
{
    memset(r, 0, sizeof *r);
    r->buf = (const unsigned char *)buf;
    r->len = len;
    r->status = TTH_PARAMS_E_MAGIC;
    if (!buf || len < 8 || memcmp(buf, "TTHPARAM", 8) != 0)
        return r->status;
    r->status = TTH_PARAMS_E_MALFORMED;
    if (len < TTH_PARAMS_HEADER)
        return r->status;
    r->version = tth_params_u32(r->buf + 8);
    r->count = tth_params_u32(r->buf + 12);
    if (r->version != 1)
        return r->status = TTH_PARAMS_E_VERSION;
    if (r->count > (len - TTH_PARAMS_HEADER) / TTH_PARAMS_MIN_ENTRY)
        return r->status;
    r->at = TTH_PARAMS_HEADER;
    r->status = 0;
    return 0;
}

/* An error is kept: a caller that goes on reading gets it again, never a later entry. */
TTH_PARAMS_FN int tth_params_fail(tth_params_reader *r)
{
    return r->status = TTH_PARAMS_E_MALFORMED;
}

/* The next entry into *e: 1, or 0 after the last one, or a TTH_PARAMS_E_* (r->index names the
 * entry that failed). Each subtraction below is of a length already checked to be smaller. */
TTH_PARAMS_FN int tth_params_next(tth_params_reader *r, tth_params_entry *e)
{
    if (r->status)
        return r->status;
    if (r->index >= r->count)
        return 0;
    const unsigned char *p = r->buf;
    size_t at = r->at, left = r->len - r->at;
    if (left < 4)
        return tth_params_fail(r);
    uint32_t nlen = tth_params_u32(p + at);
    at += 4;
    left -= 4;
    if (nlen > left || left - nlen < 8) /* the name, then dtype and rank */
        return tth_params_fail(r);
    e->name = (const char *)p + at;
    e->name_len = nlen;
    at += nlen;
    left -= nlen;
    e->dtype = tth_params_u32(p + at);
    e->rank = tth_params_u32(p + at + 4);
    at += 8;
    left -= 8;
    if (left < 8 || e->rank > (left - 8) / 8) /* the dimensions, then the byte length */
        return tth_params_fail(r);
    e->dims = p + at;
    at += 8 * (size_t)e->rank;
    uint64_t nb = tth_params_u64(p + at);
    at += 8;
    left = r->len - at;
    size_t pad = (TTH_PARAMS_ALIGN - at % TTH_PARAMS_ALIGN) % TTH_PARAMS_ALIGN;
    if (pad > left || nb > left - pad)
        return tth_params_fail(r);
    at += pad;
    e->data = p + at;
    e->offset = at;
    e->bytes = (size_t)nb;
    r->at = at + e->bytes;
    r->index++;
    return 1;
}

/* Dimension i (< e->rank) of an entry tth_params_next gave. */
TTH_PARAMS_FN int64_t tth_params_dim(const tth_params_entry *e, uint32_t i)
{
    return (int64_t)tth_params_u64(e->dims + 8 * (size_t)i);
}

/* Whether the entry is named prefix followed by name (prefix may be NULL): how the binding code
 * finds a constant among those of other modules. */
TTH_PARAMS_FN int tth_params_name_is(const tth_params_entry *e, const char *prefix, const char *name,
                                     size_t name_len)
{
    size_t plen = prefix ? strlen(prefix) : 0;
    return e->name_len == plen + name_len && (!plen || memcmp(e->name, prefix, plen) == 0) &&
           (!name_len || memcmp(e->name + plen, name, name_len) == 0);
}

#endif
