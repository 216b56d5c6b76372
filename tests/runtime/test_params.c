/* test_params.c: the one reader of the parameters file (runtime/params/tth_params.h): a file of
 * three entries read back field by field, every truncation and some malicious lengths refused
 * without a read outside the buffer (each copy is malloc'd at its exact length, so ASan sees an
 * overread), a wrong magic and version told apart. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tth_params.h"

/* A parameters file written here by the layout docs/artifact.md gives, independently of the
 * daemon's writer. */
typedef struct pbuf {
    unsigned char b[4096];
    size_t len;
} pbuf;

static void put(pbuf *p, const void *v, size_t n)
{
    cr_assert_leq(p->len + n, sizeof p->b);
    memcpy(p->b + p->len, v, n);
    p->len += n;
}

static void put_le(pbuf *p, uint64_t v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p->b[p->len + i] = (unsigned char)(v >> 8 * i);
    p->len += n;
}

/* one entry: data filled with seed, seed + 1, ...; returns the data's offset */
static size_t put_entry(pbuf *p, const char *name, uint32_t dtype, uint32_t rank, const int64_t *dims,
                        size_t bytes, unsigned char seed)
{
    put_le(p, strlen(name), 4);
    put(p, name, strlen(name));
    put_le(p, dtype, 4);
    put_le(p, rank, 4);
    for (uint32_t i = 0; i < rank; i++)
        put_le(p, (uint64_t)dims[i], 8);
    put_le(p, bytes, 8);
    while (p->len % 64)
        p->b[p->len++] = 0;
    size_t at = p->len;
    for (size_t i = 0; i < bytes; i++)
        p->b[p->len++] = (unsigned char)(seed + i);
    return at;
}

static const int64_t w_dims[2] = {2, 3}, b_dims[1] = {5};

/* "w" float32[2, 3], "layer.bias" int8[5], "step" a scalar int64: offsets into *off */
static void three_entries(pbuf *p, size_t off[3])
{
    memset(p, 0, sizeof *p);
    put(p, "TTHPARAM", 8);
    put_le(p, 1, 4);
    put_le(p, 3, 4);
    off[0] = put_entry(p, "w", 1, 2, w_dims, 24, 10);
    off[1] = put_entry(p, "layer.bias", 4, 1, b_dims, 5, 50);
    off[2] = put_entry(p, "step", 7, 0, NULL, 8, 90);
}

/* the bytes in a buffer of exactly n bytes, where ASan catches a read past them */
static unsigned char *exact_copy(const pbuf *p, size_t n)
{
    unsigned char *c = malloc(n ? n : 1);
    cr_assert(c);
    memcpy(c, p->b, n);
    return c;
}

/* every entry of buf[0, n): the last status (0 at the end, or an error) */
static int read_all(const unsigned char *buf, size_t n, uint32_t *entries)
{
    tth_params_reader r;
    tth_params_entry e;
    int st = tth_params_open(&r, buf, n);
    *entries = 0;
    while (!st && (st = tth_params_next(&r, &e)) > 0) {
        st = 0;
        (*entries)++;
        /* touch every byte the entry points at: ASan faults if one lies outside the buffer */
        volatile unsigned sum = 0;
        for (size_t i = 0; i < e.name_len; i++)
            sum += (unsigned char)e.name[i];
        for (uint32_t d = 0; d < e.rank; d++)
            sum += (unsigned)tth_params_dim(&e, d);
        for (size_t i = 0; i < e.bytes; i++)
            sum += e.data[i];
    }
    return st;
}

static void check_entry(const tth_params_entry *e, const char *name, uint32_t dtype, uint32_t rank,
                        const int64_t *dims, size_t bytes, size_t off, unsigned char seed, const unsigned char *buf)
{
    cr_assert_eq(e->name_len, strlen(name));
    cr_assert_eq(memcmp(e->name, name, e->name_len), 0, "%.*s", (int)e->name_len, e->name);
    cr_assert_eq(e->dtype, dtype);
    cr_assert_eq(e->rank, rank);
    for (uint32_t d = 0; d < rank; d++)
        cr_assert_eq(tth_params_dim(e, d), dims[d], "%s dim %u", name, d);
    cr_assert_eq(e->bytes, bytes);
    cr_assert_eq(e->offset, off);
    cr_assert_eq(e->offset % 64, 0, "%s: data at %zu", name, e->offset);
    cr_assert_eq(e->data, buf + off);
    for (size_t i = 0; i < bytes; i++)
        cr_assert_eq(e->data[i], (unsigned char)(seed + i));
}

Test(params, three_entries_read_back)
{
    pbuf p;
    size_t off[3];
    three_entries(&p, off);
    unsigned char *buf = exact_copy(&p, p.len);
    tth_params_reader r;
    tth_params_entry e;
    cr_assert_eq(tth_params_open(&r, buf, p.len), 0);
    cr_assert_eq(r.version, 1);
    cr_assert_eq(r.count, 3);
    cr_assert_eq(tth_params_next(&r, &e), 1);
    check_entry(&e, "w", 1, 2, w_dims, 24, off[0], 10, buf);
    cr_assert_eq(tth_params_next(&r, &e), 1);
    check_entry(&e, "layer.bias", 4, 1, b_dims, 5, off[1], 50, buf);
    cr_assert(tth_params_name_is(&e, "layer.", "bias", 4));
    cr_assert(tth_params_name_is(&e, NULL, "layer.bias", 10));
    cr_assert(!tth_params_name_is(&e, "layer.", "bia", 3));
    cr_assert(!tth_params_name_is(&e, "host.", "bias", 4));
    cr_assert_eq(tth_params_next(&r, &e), 1);
    check_entry(&e, "step", 7, 0, NULL, 8, off[2], 90, buf);
    /* the end, and it stays the end */
    cr_assert_eq(tth_params_next(&r, &e), 0);
    cr_assert_eq(tth_params_next(&r, &e), 0);
    free(buf);
}

Test(params, every_truncation_is_an_error)
{
    pbuf p;
    size_t off[3];
    three_entries(&p, off);
    for (size_t n = 0; n < p.len; n++) {
        unsigned char *buf = exact_copy(&p, n);
        uint32_t entries;
        int st = read_all(buf, n, &entries);
        cr_assert_eq(st, n < 8 ? TTH_PARAMS_E_MAGIC : TTH_PARAMS_E_MALFORMED, "%zu of %zu bytes: status %d", n,
                     p.len, st);
        free(buf);
    }
    unsigned char *buf = exact_copy(&p, p.len);
    uint32_t entries;
    cr_assert_eq(read_all(buf, p.len, &entries), 0);
    cr_assert_eq(entries, 3);
    free(buf);
}

Test(params, wrong_magic_and_version)
{
    pbuf p;
    size_t off[3];
    three_entries(&p, off);
    tth_params_reader r;
    tth_params_entry e;
    p.b[3] = 'X';
    cr_assert_eq(tth_params_open(&r, p.b, p.len), TTH_PARAMS_E_MAGIC);
    cr_assert_eq(tth_params_next(&r, &e), TTH_PARAMS_E_MAGIC, "the error stays");
    cr_assert_eq(tth_params_open(&r, NULL, 0), TTH_PARAMS_E_MAGIC);
    three_entries(&p, off);
    p.b[8] = 2;
    cr_assert_eq(tth_params_open(&r, p.b, p.len), TTH_PARAMS_E_VERSION);
    cr_assert_eq(r.version, 2);
    cr_assert_eq(tth_params_next(&r, &e), TTH_PARAMS_E_VERSION);
}

/* a length field of entry 1 ("layer.bias", right after entry 0's data) set to v */
static int with_field(size_t field, uint64_t v, size_t width, uint32_t *failed)
{
    pbuf p;
    size_t off[3];
    three_entries(&p, off);
    size_t at = off[0] + 24 + field, end = p.len;
    p.len = at;
    put_le(&p, v, width);
    p.len = end;
    unsigned char *buf = exact_copy(&p, p.len);
    tth_params_reader r;
    tth_params_entry e;
    int st = tth_params_open(&r, buf, p.len);
    while (!st && (st = tth_params_next(&r, &e)) > 0)
        st = 0;
    *failed = r.index;
    cr_assert_eq(tth_params_next(&r, &e), st, "the error stays");
    free(buf);
    return st;
}

Test(params, malicious_lengths)
{
    uint32_t failed;
    /* name length, rank, byte length past the end, at the largest their fields hold */
    cr_assert_eq(with_field(0, UINT32_MAX, 4, &failed), TTH_PARAMS_E_MALFORMED);
    cr_assert_eq(failed, 1);
    cr_assert_eq(with_field(4 + 10 + 4, UINT32_MAX, 4, &failed), TTH_PARAMS_E_MALFORMED);
    cr_assert_eq(failed, 1);
    cr_assert_eq(with_field(4 + 10 + 4 + 4 + 8, UINT64_MAX, 8, &failed), TTH_PARAMS_E_MALFORMED);
    cr_assert_eq(failed, 1);
    /* a count no file of this size can hold */
    pbuf p;
    size_t off[3];
    three_entries(&p, off);
    p.b[12] = p.b[13] = p.b[14] = p.b[15] = 0xff;
    tth_params_reader r;
    cr_assert_eq(tth_params_open(&r, p.b, p.len), TTH_PARAMS_E_MALFORMED);
    cr_assert_eq(r.count, UINT32_MAX);
    /* fewer entries than the file holds: the rest is not read */
    three_entries(&p, off);
    p.b[12] = 2;
    uint32_t entries;
    cr_assert_eq(read_all(p.b, p.len, &entries), 0);
    cr_assert_eq(entries, 2);
}
