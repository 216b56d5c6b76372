/* array.c: dense arrays and their two file formats, .npy and ONNX TensorProto .pb.
 *
 * npy (NumPy's format): "\x93NUMPY", major, minor, header length (2 bytes in v1, 4 in v2/v3,
 * little-endian), then a Python dict literal {'descr': '<f4', 'fortran_order': False,
 * 'shape': (2, 3), } padded with spaces and ended by '\n', then the data. We read v1, v2 and v3,
 * little-endian or byte-order-free descriptors, C order; we write v1 (v2 when the header needs
 * it), header padded so the data starts on a 64-byte boundary.
 *
 * TensorProto (onnx.proto): a protobuf message; we read field 1 dims (int64, packed or not),
 * 2 data_type, 4 float_data, 5 int32_data, 7 int64_data, 8 name, 9 raw_data, 10 double_data,
 * 11 uint64_data, 14 data_location; others are skipped. External data is refused. We write
 * dims (one by one), data_type, name and raw_data.
 *
 * bfloat16 has no .npy dtype (NumPy has none), so writing one to .npy is refused; .pb carries it
 * (data_type 16, raw_data little-endian bits, or int32_data holding the bits when read).
 */
#include "tthrt.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- dtypes (from the one table in ir_common.h) ---------------------------------------------- */

static size_t dt_size(tth_dtype t)
{
    switch (t) {
#define RT__DT_SIZE(e, v, n, b, f, s) case TTH_##e: return b;
        TTH_DTYPES(RT__DT_SIZE)
#undef RT__DT_SIZE
    default: return 0;
    }
}

static const char *dt_name(tth_dtype t)
{
    switch (t) {
#define RT__DT_NAME(e, v, n, b, f, s) case TTH_##e: return n;
        TTH_DTYPES(RT__DT_NAME)
#undef RT__DT_NAME
    default: return "invalid";
    }
}

/* npy descr kind letter and size for each dtype: 'f','i','u','b'. */
static char dt_npy_kind(tth_dtype t)
{
    switch (t) {
    case TTH_F16: case TTH_F32: case TTH_F64: return 'f';
    case TTH_I8: case TTH_I16: case TTH_I32: case TTH_I64: return 'i';
    case TTH_U8: case TTH_U16: case TTH_U32: case TTH_U64: return 'u';
    case TTH_BOOL: return 'b';
    default: return 0;
    }
}

static tth_dtype dt_from_npy(char kind, int bytes)
{
    switch (kind) {
    case 'f': return bytes == 2 ? TTH_F16 : bytes == 4 ? TTH_F32 : bytes == 8 ? TTH_F64 : TTH_DTYPE_INVALID;
    case 'i': return bytes == 1 ? TTH_I8 : bytes == 2 ? TTH_I16 : bytes == 4 ? TTH_I32 : bytes == 8 ? TTH_I64 : TTH_DTYPE_INVALID;
    case 'u': return bytes == 1 ? TTH_U8 : bytes == 2 ? TTH_U16 : bytes == 4 ? TTH_U32 : bytes == 8 ? TTH_U64 : TTH_DTYPE_INVALID;
    case 'b': return bytes == 1 ? TTH_BOOL : TTH_DTYPE_INVALID;
    default: return TTH_DTYPE_INVALID;
    }
}

/* ---- arrays ------------------------------------------------------------------------------------ */

static int shape_numel(int32_t rank, const int64_t *shape, int64_t *numel)
{
    int64_t n = 1;
    for (int32_t i = 0; i < rank; i++) {
        if (shape[i] < 0)
            return -1;
        if (shape[i] != 0 && n > INT64_MAX / shape[i])
            return -1;
        n *= shape[i];
    }
    *numel = n;
    return 0;
}

int tthrt_array_init(tthrt_array *a, tth_dtype dtype, int32_t rank, const int64_t *shape,
                     tth_diag *diag)
{
    memset(a, 0, sizeof *a);
    size_t es = dt_size(dtype);
    if (es == 0)
        return tth_diag_set(diag, TTH_ETYPE, NULL, "invalid dtype %d", (int)dtype);
    if (rank < 0 || rank > TTH_MAX_RANK)
        return tth_diag_set(diag, TTH_ELIMIT, NULL, "rank %d is outside 0..%d", (int)rank, TTH_MAX_RANK);
    int64_t n;
    if (shape_numel(rank, shape, &n) != 0 || (uint64_t)n > SIZE_MAX / es / 2)
        return tth_diag_set(diag, TTH_ELIMIT, NULL, "array shape is negative or too large");
    a->dtype = dtype;
    a->rank = rank;
    for (int32_t i = 0; i < rank; i++)
        a->shape[i] = shape[i];
    a->nbytes = (size_t)n * es;
    size_t alloc = (a->nbytes + 63) / 64 * 64;
    a->data = aligned_alloc(64, alloc ? alloc : 64);
    if (!a->data)
        return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory allocating %zu bytes", a->nbytes);
    memset(a->data, 0, alloc ? alloc : 64);
    return 0;
}

void tthrt_array_clear(tthrt_array *a)
{
    if (!a)
        return;
    free(a->data);
    free(a->name);
    memset(a, 0, sizeof *a);
}

static int read_whole_file(const char *path, unsigned char **out, size_t *len, tth_diag *diag)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return tth_diag_set(diag, errno == ENOENT ? TTH_ENOENT : TTH_EIO, path,
                            "cannot open '%s': %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    while (buf) {
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0)
            break;
        if (n == cap) {
            unsigned char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    int err = ferror(f);
    fclose(f);
    if (!buf)
        return tth_diag_set(diag, TTH_ENOMEM, path, "out of memory reading '%s'", path);
    if (err) {
        free(buf);
        return tth_diag_set(diag, TTH_EIO, path, "cannot read '%s'", path);
    }
    *out = buf;
    *len = n;
    return 0;
}

/* ---- npy --------------------------------------------------------------------------------------- */

static const char *skip_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

/* Find the value of 'key' in the header dict; returns a pointer after the colon. */
static const char *npy_find(const char *h, const char *end, const char *key)
{
    size_t kl = strlen(key);
    for (const char *p = h; p + kl + 2 <= end; p++) {
        if ((*p == '\'' || *p == '"') && p[kl + 1] == *p && memcmp(p + 1, key, kl) == 0) {
            const char *q = skip_ws(p + kl + 2, end);
            if (q < end && *q == ':')
                return skip_ws(q + 1, end);
        }
    }
    return NULL;
}

int tthrt_npy_read_memory(const void *bytes, size_t len, tthrt_array *out, tth_diag *diag)
{
    const unsigned char *b = bytes;
    memset(out, 0, sizeof *out);
    if (len < 10 || memcmp(b, "\x93NUMPY", 6) != 0)
        return tth_diag_set(diag, TTH_EPARSE, NULL, "not a .npy file (no \\x93NUMPY magic)");
    unsigned major = b[6];
    size_t hlen, hstart;
    if (major == 1) {
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
        hstart = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12)
            return tth_diag_set(diag, TTH_EPARSE, NULL, "truncated .npy header");
        hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        hstart = 12;
    } else {
        return tth_diag_set(diag, TTH_EUNSUPPORTED, NULL, ".npy format version %u is not supported "
                            "(1, 2 and 3 are)", major);
    }
    if (hstart + hlen > len)
        return tth_diag_set(diag, TTH_EPARSE, NULL, "truncated .npy header");
    const char *h = (const char *)b + hstart, *end = h + hlen;

    const char *d = npy_find(h, end, "descr");
    if (!d || d >= end || (*d != '\'' && *d != '"'))
        return tth_diag_set(diag, TTH_EPARSE, NULL, ".npy header has no 'descr' string");
    char q = *d++;
    const char *de = memchr(d, q, (size_t)(end - d));
    if (!de || de - d < 3 || de - d > 8)
        return tth_diag_set(diag, TTH_EPARSE, NULL, ".npy 'descr' is malformed");
    char order = d[0], kind = d[1];
    int bytesz = atoi(d + 2);
    if (order == '>' && bytesz > 1)
        return tth_diag_set(diag, TTH_EUNSUPPORTED, NULL, ".npy data is big-endian ('%.*s'); "
                            "only little-endian is supported", (int)(de - d), d);
    if (order != '<' && order != '|' && order != '=' && order != '>')
        return tth_diag_set(diag, TTH_EPARSE, NULL, ".npy 'descr' '%.*s' is malformed",
                            (int)(de - d), d);
    tth_dtype dt = dt_from_npy(kind, bytesz);
    if (dt == TTH_DTYPE_INVALID)
        return tth_diag_set(diag, TTH_EUNSUPPORTED, NULL, ".npy dtype '%.*s' is not supported",
                            (int)(de - d), d);

    const char *fo = npy_find(h, end, "fortran_order");
    if (fo && fo + 4 <= end && memcmp(fo, "True", 4) == 0)
        return tth_diag_set(diag, TTH_EUNSUPPORTED, NULL, ".npy array is in Fortran order; "
                            "only C order is supported");

    const char *s = npy_find(h, end, "shape");
    if (!s || *s != '(')
        return tth_diag_set(diag, TTH_EPARSE, NULL, ".npy header has no 'shape' tuple");
    int64_t shape[TTH_MAX_RANK];
    int32_t rank = 0;
    s++;
    for (;;) {
        s = skip_ws(s, end);
        if (s >= end)
            return tth_diag_set(diag, TTH_EPARSE, NULL, ".npy 'shape' is not closed");
        if (*s == ')')
            break;
        if (*s < '0' || *s > '9')
            return tth_diag_set(diag, TTH_EPARSE, NULL, ".npy 'shape' has a non-number");
        if (rank == TTH_MAX_RANK)
            return tth_diag_set(diag, TTH_ELIMIT, NULL, ".npy array has more than %d dimensions",
                                TTH_MAX_RANK);
        char *ep;
        shape[rank++] = strtoll(s, &ep, 10);
        s = skip_ws(ep, end);
        if (s < end && *s == ',')
            s++;
    }
    int rc = tthrt_array_init(out, dt, rank, shape, diag);
    if (rc)
        return rc;
    size_t dstart = hstart + hlen;
    if (len - dstart < out->nbytes) {
        size_t need = out->nbytes;
        tthrt_array_clear(out);
        return tth_diag_set(diag, TTH_EPARSE, NULL, ".npy data is truncated: %zu bytes, the shape "
                            "needs %zu", len - dstart, need);
    }
    memcpy(out->data, b + dstart, out->nbytes);
    return 0;
}

typedef int (*read_memory_fn)(const void *bytes, size_t len, tthrt_array *out, tth_diag *diag);

/* Read the file at path into out with parse; NULL parse: by its kind, .npy (by name or magic)
 * or else a TensorProto. */
static int read_file_with(const char *path, read_memory_fn parse, tthrt_array *out, tth_diag *diag)
{
    unsigned char *buf;
    size_t len;
    int rc = read_whole_file(path, &buf, &len, diag);
    if (rc)
        return rc;
    if (!parse) {
        size_t pl = strlen(path);
        int is_npy = (pl >= 4 && strcmp(path + pl - 4, ".npy") == 0) ||
                     (len >= 6 && memcmp(buf, "\x93NUMPY", 6) == 0);
        parse = is_npy ? tthrt_npy_read_memory : tthrt_pb_read_memory;
    }
    rc = parse(buf, len, out, diag);
    free(buf);
    if (rc)
        tth_diag_prefix(diag, "reading '%s'", path);
    return rc;
}

int tthrt_npy_read(const char *path, tthrt_array *out, tth_diag *diag)
{
    return read_file_with(path, tthrt_npy_read_memory, out, diag);
}

int tthrt_npy_write(const char *path, const tthrt_array *a, tth_diag *diag)
{
    size_t es = dt_size(a->dtype);
    if (!es)
        return tth_diag_set(diag, TTH_ETYPE, path, "cannot write an array of invalid dtype");
    if (!dt_npy_kind(a->dtype))
        return tth_diag_set(diag, TTH_EUNSUPPORTED, path, "cannot write '%s': .npy has no %s dtype; "
                            "write an ONNX TensorProto .pb instead", path, dt_name(a->dtype));
    char dict[512];
    int n = snprintf(dict, sizeof dict, "{'descr': '%c%c%zu', 'fortran_order': False, 'shape': (",
                     es == 1 ? '|' : '<', dt_npy_kind(a->dtype), es);
    for (int32_t i = 0; i < a->rank; i++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%lld%s", (long long)a->shape[i],
                      a->rank == 1 ? "," : (i + 1 < a->rank ? ", " : ""));
    n += snprintf(dict + n, sizeof dict - (size_t)n, "), }");
    /* pad with spaces so magic + version + length + header is a multiple of 64, '\n' last */
    size_t pre = 10, total = (pre + (size_t)n + 1 + 63) / 64 * 64;
    size_t hlen = total - pre;
    unsigned char head[600];
    memcpy(head, "\x93NUMPY\x01\x00", 8);
    head[8] = (unsigned char)(hlen & 0xff);
    head[9] = (unsigned char)(hlen >> 8);
    memcpy(head + 10, dict, (size_t)n);
    memset(head + 10 + n, ' ', hlen - (size_t)n - 1);
    head[total - 1] = '\n';
    FILE *f = fopen(path, "wb");
    if (!f)
        return tth_diag_set(diag, TTH_EIO, path, "cannot create '%s': %s", path, strerror(errno));
    int ok = fwrite(head, 1, total, f) == total &&
             (a->nbytes == 0 || fwrite(a->data, 1, a->nbytes, f) == a->nbytes);
    if (fclose(f) != 0)
        ok = 0;
    if (!ok)
        return tth_diag_set(diag, TTH_EIO, path, "cannot write '%s'", path);
    return 0;
}

/* ---- TensorProto ------------------------------------------------------------------------------ */

typedef struct pb_reader {
    const unsigned char *p, *end;
} pb_reader;

static int pb_varint(pb_reader *r, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end)
            return -1;
        unsigned char c = *r->p++;
        x |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

/* ONNX TensorProto.DataType → tth dtype. */
static tth_dtype dt_from_onnx(int64_t t)
{
    switch (t) {
    case 1: return TTH_F32;
    case 2: return TTH_U8;
    case 3: return TTH_I8;
    case 4: return TTH_U16;
    case 5: return TTH_I16;
    case 6: return TTH_I32;
    case 7: return TTH_I64;
    case 9: return TTH_BOOL;
    case 10: return TTH_F16;
    case 11: return TTH_F64;
    case 12: return TTH_U32;
    case 13: return TTH_U64;
    case 16: return TTH_BF16;
    default: return TTH_DTYPE_INVALID;
    }
}

/* tth dtype → ONNX TensorProto.DataType (0 if none) */
static int64_t dt_to_onnx(tth_dtype dt)
{
    for (int64_t t = 1; t <= 16; t++)
        if (dt_from_onnx(t) == dt)
            return t;
    return 0;
}

/* A repeated numeric field seen so far: where its values are (packed or one by one). */
typedef struct pb_values {
    /* packed: byte ranges; unpacked: individual values collected */
    uint64_t *vals;
    size_t n, cap;
} pb_values;

static int vals_push(pb_values *v, uint64_t x)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        uint64_t *nv = realloc(v->vals, cap * sizeof *nv);
        if (!nv)
            return -1;
        v->vals = nv;
        v->cap = cap;
    }
    v->vals[v->n++] = x;
    return 0;
}

/* Read a repeated field element or a packed run into vals. wire: 0 varint, 1 fixed64,
 * 5 fixed32, 2 packed (elem_wire says how elements are encoded). */
static int pb_read_repeated(pb_reader *r, unsigned wire, unsigned elem_wire, pb_values *out)
{
    if (wire == 2) {
        uint64_t l;
        if (pb_varint(r, &l) || l > (uint64_t)(r->end - r->p))
            return -1;
        pb_reader sub = {r->p, r->p + l};
        r->p += l;
        while (sub.p < sub.end)
            if (pb_read_repeated(&sub, elem_wire, elem_wire, out))
                return -1;
        return 0;
    }
    uint64_t x = 0;
    if (wire == 0) {
        if (pb_varint(r, &x))
            return -1;
    } else if (wire == 1 || wire == 5) {
        int n = wire == 1 ? 8 : 4; /* fixed64 or fixed32, little-endian */
        if (r->end - r->p < n)
            return -1;
        for (int i = n - 1; i >= 0; i--)
            x = x << 8 | r->p[i];
        r->p += n;
    } else {
        return -1;
    }
    return vals_push(out, x);
}

static int pb_skip(pb_reader *r, unsigned wire)
{
    uint64_t x;
    switch (wire) {
    case 0: return pb_varint(r, &x);
    case 1:
        if (r->end - r->p < 8)
            return -1;
        r->p += 8;
        return 0;
    case 2:
        if (pb_varint(r, &x) || x > (uint64_t)(r->end - r->p))
            return -1;
        r->p += x;
        return 0;
    case 5:
        if (r->end - r->p < 4)
            return -1;
        r->p += 4;
        return 0;
    default: return -1;
    }
}

int tthrt_pb_read_memory(const void *bytes, size_t len, tthrt_array *out, tth_diag *diag)
{
    pb_reader r = {bytes, (const unsigned char *)bytes + len};
    memset(out, 0, sizeof *out);
    pb_values dims = {0}, vals = {0};
    int64_t data_type = 0;
    const unsigned char *raw = NULL;
    size_t raw_len = 0;
    char *name = NULL;
    int have_raw = 0, external = 0, rc = 0;
    unsigned vals_field = 0;
    while (r.p < r.end) {
        uint64_t key;
        if (pb_varint(&r, &key)) {
            rc = -1;
            break;
        }
        unsigned field = (unsigned)(key >> 3), wire = (unsigned)(key & 7);
        switch (field) {
        case 1: rc = pb_read_repeated(&r, wire, 0, &dims); break;
        case 2: {
            uint64_t x;
            rc = wire == 0 ? pb_varint(&r, &x) : -1;
            data_type = (int64_t)x;
            break;
        }
        case 4: case 5: case 7: case 10: case 11: {
            unsigned ew = field == 4 ? 5 : field == 10 ? 1 : 0;
            if (vals_field && vals_field != field) {
                rc = -1;
                break;
            }
            vals_field = field;
            rc = pb_read_repeated(&r, wire, ew, &vals);
            break;
        }
        case 8: case 9: {
            uint64_t l;
            if (wire != 2 || pb_varint(&r, &l) || l > (uint64_t)(r.end - r.p)) {
                rc = -1;
                break;
            }
            if (field == 9) {
                raw = r.p;
                raw_len = (size_t)l;
                have_raw = 1;
            } else {
                free(name);
                name = strndup((const char *)r.p, (size_t)l);
            }
            r.p += l;
            break;
        }
        case 14: {
            uint64_t x;
            rc = wire == 0 ? pb_varint(&r, &x) : -1;
            if (!rc && x == 1)
                external = 1;
            break;
        }
        default: rc = pb_skip(&r, wire); break;
        }
        if (rc)
            break;
    }
    if (rc) {
        rc = tth_diag_set(diag, TTH_EPARSE, NULL, "malformed TensorProto");
        goto done;
    }
    if (external) {
        rc = tth_diag_set(diag, TTH_EUNSUPPORTED, name, "TensorProto '%s' keeps its data in an "
                          "external file; only inline data is supported", name ? name : "");
        goto done;
    }
    tth_dtype dt = dt_from_onnx(data_type);
    if (dt == TTH_DTYPE_INVALID) {
        rc = tth_diag_set(diag, TTH_EUNSUPPORTED, name, "TensorProto data_type %lld is not "
                          "supported (strings, complex and 8-bit floats are not)", (long long)data_type);
        goto done;
    }
    if (dims.n > TTH_MAX_RANK) {
        rc = tth_diag_set(diag, TTH_ELIMIT, name, "TensorProto has %zu dimensions; at most %d",
                          dims.n, TTH_MAX_RANK);
        goto done;
    }
    int64_t shape[TTH_MAX_RANK];
    for (size_t i = 0; i < dims.n; i++)
        shape[i] = (int64_t)dims.vals[i];
    rc = tthrt_array_init(out, dt, (int32_t)dims.n, shape, diag);
    if (rc)
        goto done;
    size_t es = dt_size(dt), numel = out->nbytes / es;
    if (have_raw) {
        if (raw_len != out->nbytes) {
            rc = tth_diag_set(diag, TTH_EPARSE, name, "TensorProto raw_data has %zu bytes; the "
                              "shape needs %zu", raw_len, out->nbytes);
            goto done;
        }
        memcpy(out->data, raw, raw_len);
    } else if (numel > 0) {
        if (vals.n != numel) {
            rc = tth_diag_set(diag, TTH_EPARSE, name, "TensorProto holds %zu values; the shape "
                              "needs %zu", vals.n, numel);
            goto done;
        }
        unsigned char *d = out->data;
        for (size_t i = 0; i < numel; i++) {
            uint64_t x = vals.vals[i];
            /* float_data is fixed32 float bits; double_data fixed64 bits; the int fields hold
             * values (int32_data also carries int8/16, uint8/16, bool, float16 and bfloat16
             * bits) */
            switch (es) {
            case 1: d[i] = (unsigned char)x; break;
            case 2: {
                uint16_t v = (uint16_t)x;
                memcpy(d + 2 * i, &v, 2);
                break;
            }
            case 4: {
                uint32_t v = (uint32_t)x;
                memcpy(d + 4 * i, &v, 4);
                break;
            }
            default: memcpy(d + 8 * i, &x, 8); break;
            }
        }
    }
    out->name = name;
    name = NULL;
done:
    if (rc)
        tthrt_array_clear(out);
    free(name);
    free(dims.vals);
    free(vals.vals);
    return rc;
}

static unsigned char *pb_put_varint(unsigned char *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (unsigned char)v;
    return p;
}

int tthrt_pb_write(const char *path, const tthrt_array *a, tth_diag *diag)
{
    int64_t onnx_type = dt_to_onnx(a->dtype);
    if (!onnx_type)
        return tth_diag_set(diag, TTH_ETYPE, path, "cannot write an array of dtype %s as a TensorProto",
                            dt_name(a->dtype));
    /* everything before raw_data's bytes: each field is a tag and at most a 10-byte varint */
    size_t name_len = a->name ? strlen(a->name) : 0;
    unsigned char *head = malloc((size_t)(TTH_MAX_RANK + 3) * 11 + name_len);
    if (!head)
        return tth_diag_set(diag, TTH_ENOMEM, path, "out of memory");
    unsigned char *p = head;
    for (int32_t i = 0; i < a->rank; i++) {
        *p++ = 1 << 3; /* dims, varint */
        p = pb_put_varint(p, (uint64_t)a->shape[i]);
    }
    *p++ = 2 << 3; /* data_type, varint */
    p = pb_put_varint(p, (uint64_t)onnx_type);
    if (a->name) {
        *p++ = 8 << 3 | 2; /* name, length-delimited */
        p = pb_put_varint(p, name_len);
        memcpy(p, a->name, name_len);
        p += name_len;
    }
    *p++ = 9 << 3 | 2; /* raw_data, little-endian like the host */
    p = pb_put_varint(p, a->nbytes);
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(head);
        return tth_diag_set(diag, TTH_EIO, path, "cannot create '%s': %s", path, strerror(errno));
    }
    size_t hlen = (size_t)(p - head);
    int ok = fwrite(head, 1, hlen, f) == hlen && (a->nbytes == 0 || fwrite(a->data, 1, a->nbytes, f) == a->nbytes);
    free(head);
    if (fclose(f) != 0)
        ok = 0;
    if (!ok)
        return tth_diag_set(diag, TTH_EIO, path, "cannot write '%s'", path);
    return 0;
}

int tthrt_pb_read(const char *path, tthrt_array *out, tth_diag *diag)
{
    return read_file_with(path, tthrt_pb_read_memory, out, diag);
}

int tthrt_array_load(const char *path, tthrt_array *out, tth_diag *diag)
{
    return read_file_with(path, NULL, out, diag);
}

/* Exposed to model.c: the dtype's name and size without needing libtth's IR part. */
const char *tthrt__dtype_name(tth_dtype t) { return dt_name(t); }
size_t tthrt__dtype_size(tth_dtype t) { return dt_size(t); }

/* ---- comparison -------------------------------------------------------------------------------- */

static double elem_f64(const tthrt_array *a, size_t i)
{
    const unsigned char *p = (const unsigned char *)a->data + i * dt_size(a->dtype);
    switch (a->dtype) {
    case TTH_F32: { float v; memcpy(&v, p, 4); return v; }
    case TTH_F64: { double v; memcpy(&v, p, 8); return v; }
    case TTH_F16: { uint16_t v; memcpy(&v, p, 2); return tth_f16_to_f32(v); }
    case TTH_BF16: { uint16_t v; memcpy(&v, p, 2); return tth_bf16_to_f32(v); }
    default: return 0;
    }
}

void tthrt_default_tolerance(tth_dtype dtype, double *atol, double *rtol)
{
    switch (dtype) {
    case TTH_F32: *atol = 1e-4; *rtol = 1e-4; break;
    case TTH_F16: *atol = 1e-2; *rtol = 1e-2; break;
    case TTH_BF16: *atol = 1e-2; *rtol = 1e-2; break; /* 8 significant bits: 1e-2 is about 1 ulp */
    case TTH_F64: *atol = 1e-7; *rtol = 1e-7; break;
    default: *atol = 0; *rtol = 0; break;
    }
}

int tthrt_array_compare(const tthrt_array *got, const tthrt_array *want, double atol, double rtol,
                        char *why, size_t why_len)
{
    char dummy[8];
    if (!why) {
        why = dummy;
        why_len = sizeof dummy;
    }
    why[0] = 0;
    if (got->dtype != want->dtype) {
        snprintf(why, why_len, "dtype %s, want %s", dt_name(got->dtype), dt_name(want->dtype));
        return -1;
    }
    if (got->nbytes != want->nbytes) {
        snprintf(why, why_len, "%zu elements, want %zu", got->nbytes / dt_size(got->dtype),
                 want->nbytes / dt_size(want->dtype));
        return -1;
    }
    size_t es = dt_size(got->dtype), n = got->nbytes / es;
    int is_float = tth_dtype_is_float(got->dtype);
    size_t bad = 0, first = 0;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        int ok;
        if (is_float) {
            double a = elem_f64(got, i), b = elem_f64(want, i);
            if (isnan(b))
                ok = isnan(a);
            else if (isinf(b))
                ok = a == b;
            else {
                double err = fabs(a - b);
                ok = err <= atol + rtol * fabs(b);
                if (!ok && err > worst)
                    worst = err;
            }
        } else {
            const unsigned char *pa = (const unsigned char *)got->data + i * es;
            const unsigned char *pb = (const unsigned char *)want->data + i * es;
            ok = memcmp(pa, pb, es) == 0;
        }
        if (!ok && bad++ == 0)
            first = i;
    }
    if (bad == 0)
        return 1;
    if (is_float)
        snprintf(why, why_len, "%zu of %zu elements differ; element %zu: got %.9g, want %.9g "
                 "(largest error %.3g)", bad, n, first, elem_f64(got, first), elem_f64(want, first),
                 worst);
    else
        snprintf(why, why_len, "%zu of %zu elements differ; first at element %zu", bad, n, first);
    return 0;
}

json_t *tthrt_array_to_bind_json(const tthrt_array *a, int64_t max_elements, char *why, size_t why_len)
{
    int64_t n = 1;
    json_t *shape = json_array(), *data = json_array();
    for (int32_t k = 0; k < a->rank; k++) {
        n *= a->shape[k];
        json_array_append_new(shape, json_integer(a->shape[k]));
    }
    const char *bad = n > max_elements ? "has more elements than can be bound" : NULL;
    for (int64_t k = 0; !bad && k < n; k++) {
        double v = 0;
        json_int_t iv = 0;
        int is_int = 1;
        switch (a->dtype) {
        case TTH_F32: v = ((const float *)a->data)[k]; is_int = 0; break;
        case TTH_F64: v = ((const double *)a->data)[k]; is_int = 0; break;
        case TTH_I8: iv = ((const int8_t *)a->data)[k]; break;
        case TTH_I16: iv = ((const int16_t *)a->data)[k]; break;
        case TTH_I32: iv = ((const int32_t *)a->data)[k]; break;
        case TTH_I64: iv = ((const int64_t *)a->data)[k]; break;
        case TTH_U8: case TTH_BOOL: iv = ((const uint8_t *)a->data)[k]; break;
        case TTH_U16: iv = ((const uint16_t *)a->data)[k]; break;
        case TTH_U32: iv = ((const uint32_t *)a->data)[k]; break;
        case TTH_U64: iv = (json_int_t)((const uint64_t *)a->data)[k]; break;
        default: bad = a->dtype == TTH_BF16 ? "is bfloat16, which cannot be bound" : "is float16, which cannot be bound"; break;
        }
        if (!is_int && (v != v || v - v != 0))
            bad = "is not finite (JSON has no NaN or infinity)";
        json_array_append_new(data, is_int ? json_integer(iv) : json_real(v));
    }
    json_t *val = json_pack("{s:s, s:o, s:o}", "dtype", tth_dtype_name(a->dtype), "shape", shape, "data", data);
    if (bad || !val) {
        snprintf(why, why_len, "%s", bad ? bad : "out of memory");
        json_decref(val);
        return NULL;
    }
    return val;
}
