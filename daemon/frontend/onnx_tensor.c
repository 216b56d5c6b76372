/* onnx_tensor.c: ONNX TensorProto → tth_tensor (initializers, Constant values, test data). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "frontend.h"
#include "frontend_internal.h"
#include "onnx.pb-c.h"
#include "tthproto/jsonrpc.h"

/* TensorProto.DataType numbers (onnx.proto) → tth dtypes. */
static const struct {
    int32_t onnx;
    tth_dtype dt;
} onnx_dtypes[] = {
    {ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, TTH_F32},   {ONNX__TENSOR_PROTO__DATA_TYPE__UINT8, TTH_U8},
    {ONNX__TENSOR_PROTO__DATA_TYPE__INT8, TTH_I8},     {ONNX__TENSOR_PROTO__DATA_TYPE__UINT16, TTH_U16},
    {ONNX__TENSOR_PROTO__DATA_TYPE__INT16, TTH_I16},   {ONNX__TENSOR_PROTO__DATA_TYPE__INT32, TTH_I32},
    {ONNX__TENSOR_PROTO__DATA_TYPE__INT64, TTH_I64},   {ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, TTH_BOOL},
    {ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16, TTH_F16}, {ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE, TTH_F64},
    {ONNX__TENSOR_PROTO__DATA_TYPE__UINT32, TTH_U32},  {ONNX__TENSOR_PROTO__DATA_TYPE__UINT64, TTH_U64},
    {ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16, TTH_BF16},
};

tth_dtype tth__onnx_dtype(int32_t onnx_type)
{
    for (size_t i = 0; i < sizeof onnx_dtypes / sizeof onnx_dtypes[0]; i++)
        if (onnx_dtypes[i].onnx == onnx_type)
            return onnx_dtypes[i].dt;
    return TTH_DTYPE_INVALID;
}

/* The ONNX name of an element type tth does not take, for messages: "string (ONNX element type 8)". */
void tth__onnx_type_text(int32_t onnx_type, char *buf, size_t len)
{
    static const struct { int32_t n; const char *name; } names[] = {
        {ONNX__TENSOR_PROTO__DATA_TYPE__UNDEFINED, "undefined"},
        {ONNX__TENSOR_PROTO__DATA_TYPE__STRING, "string"},
        {ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX64, "complex64"},
        {ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX128, "complex128"},
        /* opsets 19 to 21 (element type numbers of onnx.proto's TensorProto.DataType; our
         * onnx.proto is 1.12's, which stops at 16): 8- and 4-bit types tth has no arithmetic for */
        {17, "float8e4m3fn"},
        {18, "float8e4m3fnuz"},
        {19, "float8e5m2"},
        {20, "float8e5m2fnuz"},
        {21, "uint4"},
        {22, "int4"},
        {23, "float4e2m1"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].n == onnx_type) {
            snprintf(buf, len, "%s (ONNX element type %d)", names[i].name, (int)onnx_type);
            return;
        }
    snprintf(buf, len, "ONNX element type %d", (int)onnx_type);
}

/* ---- external data (docs/tthctl.md, "ONNX external data") ---- */

struct tth_onnx_ext_file {
    char *location;
    uint8_t *data; /* a private read-only mapping of the file (size bytes), or "" when empty */
    size_t size;
};

void tth__onnx_give_back(const uint8_t *p, size_t n)
{
    long ps = sysconf(_SC_PAGESIZE);
    uintptr_t page = ps > 0 ? (uintptr_t)ps : 4096, lo = ((uintptr_t)p + page - 1) & ~(page - 1),
              hi = ((uintptr_t)p + n) & ~(page - 1);
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

void tth__onnx_external_release(tth_onnx_external *ext)
{
    if (!ext)
        return;
    for (size_t i = 0; i < ext->nfiles; i++) {
        free(ext->files[i].location);
        if (ext->files[i].size)
            munmap(ext->files[i].data, ext->files[i].size);
    }
    free(ext->files);
    ext->files = NULL;
    ext->nfiles = 0;
}

/* an unsigned decimal of the whole string */
static int parse_u64(const char *s, uint64_t *v)
{
    if (!s || !*s)
        return -1;
    uint64_t x = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || x > (UINT64_MAX - 9) / 10)
            return -1;
        x = x * 10 + (uint64_t)(*s - '0');
    }
    *v = x;
    return 0;
}

/* the whole file at location, mapped once per import: each tensor's bytes are read from the
 * mapping into its constant and their pages given back (tth__onnx_give_back), so the data file
 * and the constants are not both in memory (docs/tthctl.md, "Large models") */
static const struct tth_onnx_ext_file *ext_file(tth_onnx_external *ext, const char *loc, const char *where,
                                                tth_diag *diag)
{
    for (size_t i = 0; i < ext->nfiles; i++)
        if (strcmp(ext->files[i].location, loc) == 0)
            return &ext->files[i];
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", ext->dir, loc) >= sizeof path) {
        tth_diag_set(diag, TTH_ELIMIT, where, "external data path too long");
        return NULL;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        tth_diag_set(diag, TTH_EIO, where, "cannot read the external data file '%s' beside the model: %s", loc,
                     fd < 0 ? strerror(e) : "not a regular file");
        tth_diag_hint(diag, "keep the data files where the model names them (relative to the .onnx file)");
        return NULL;
    }
    struct tth_onnx_ext_file *nf = realloc(ext->files, (ext->nfiles + 1) * sizeof *nf);
    size_t got = (size_t)st.st_size;
    void *map = got ? mmap(NULL, got, PROT_READ, MAP_PRIVATE, fd, 0) : (void *)"";
    int map_errno = errno;
    char *name = strdup(loc);
    if (nf)
        ext->files = nf;
    close(fd);
    if (!nf || map == MAP_FAILED || !name) {
        if (map != MAP_FAILED && got)
            munmap(map, got);
        free(name);
        tth_diag_set(diag, !nf || !name ? TTH_ENOMEM : TTH_EIO, where, "cannot read the external data file '%s' "
                     "(%lld bytes): %s", loc, (long long)st.st_size, map == MAP_FAILED ? strerror(map_errno)
                                                                                 : "out of memory");
        return NULL;
    }
    uint8_t *data = map;
    struct tth_onnx_ext_file *f = &ext->files[ext->nfiles++];
    f->location = name;
    f->data = data;
    f->size = got;
    if (ext->used) {
        char hex[17];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)XXH64(data, got, 0));
        json_array_append_new(ext->used, json_pack("{s:s, s:I, s:s}", "location", loc, "bytes", (json_int_t)got,
                                                   "xxh64", hex));
        tth__onnx_give_back(data, got); /* hashed: read again tensor by tensor */
    }
    return f;
}

/* The bytes of an external tensor (nbytes of them) as a view into its file. */
static int ext_bytes(const Onnx__TensorProto *tp, tth_onnx_external *ext, const char *where, size_t nbytes,
                     const uint8_t **out, tth_diag *diag)
{
    const char *loc = NULL;
    uint64_t off = 0, len = nbytes;
    int has_len = 0;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *kv = tp->external_data[i];
        if (!kv || !kv->key)
            continue;
        if (!strcmp(kv->key, "location"))
            loc = kv->value;
        else if (!strcmp(kv->key, "offset") && parse_u64(kv->value, &off) != 0)
            return tth_diag_set(diag, TTH_EMODEL, where, "external data offset '%s' is not a byte count",
                                kv->value ? kv->value : "");
        else if (!strcmp(kv->key, "length")) {
            has_len = 1;
            if (parse_u64(kv->value, &len) != 0)
                return tth_diag_set(diag, TTH_EMODEL, where, "external data length '%s' is not a byte count",
                                    kv->value ? kv->value : "");
        }
    }
    if (!loc)
        return tth_diag_set(diag, TTH_EMODEL, where, "tensor with external data names no location");
    if (!tthp_data_location_valid(loc))
        return tth_diag_set(diag, TTH_EMODEL, where,
                            "external data location '%s' is not a relative path inside the model's directory", loc);
    if (!ext || !ext->dir) {
        tth_diag_set(diag, TTH_EUNSUPPORTED, where,
                     "the tensor's data is in the file '%s' beside the model, and the model came without its directory",
                     loc);
        tth_diag_hint(diag, "compile the model by its path on the daemon's machine (tthctl compile "
                            "model.onnx, without --stream) so the daemon reads the data files beside it");
        return TTH_EUNSUPPORTED;
    }
    if (has_len && len != nbytes)
        return tth_diag_set(diag, TTH_EMODEL, where, "external data length %llu, the tensor's shape needs %zu bytes",
                            (unsigned long long)len, nbytes);
    const struct tth_onnx_ext_file *f = ext_file(ext, loc, where, diag);
    if (!f)
        return diag->code;
    if (off > f->size || f->size - off < nbytes)
        return tth_diag_set(diag, TTH_EMODEL, where,
                            "external data file '%s' has %zu bytes, the tensor needs %zu from offset %llu", loc,
                            f->size, nbytes, (unsigned long long)off);
    *out = f->data + off;
    return 0;
}

int tth__onnx_tensor_from_proto(const Onnx__TensorProto *tp, const char *where, tth_onnx_external *ext,
                                tth_tensor **out, tth_diag *diag)
{
    *out = NULL;
    if (!tp)
        return tth_diag_set(diag, TTH_EMODEL, where, "missing tensor value");
    int32_t ot = tp->has_data_type ? tp->data_type : 0;
    tth_dtype dt = tth__onnx_dtype(ot);
    if (dt == TTH_DTYPE_INVALID) {
        char type[64];
        tth__onnx_type_text(ot, type, sizeof type);
        return tth_diag_set(diag, TTH_EUNSUPPORTED, where, "unsupported tensor data type %s", type);
    }
    if (tp->n_dims > TTH_MAX_RANK)
        return tth_diag_set(diag, TTH_EUNSUPPORTED, where, "tensor of rank %zu (at most %d)", tp->n_dims,
                            TTH_MAX_RANK);
    tth_ttype ty = {.dtype = dt, .rank = (int32_t)tp->n_dims};
    int64_t numel = 1;
    for (size_t i = 0; i < tp->n_dims; i++) {
        if (tp->dims[i] < 0 || tp->dims[i] > ((int64_t)1 << 40))
            return tth_diag_set(diag, TTH_EMODEL, where, "bad tensor dimension %lld", (long long)tp->dims[i]);
        ty.shape[i] = tp->dims[i];
        if (tp->dims[i] != 0 && numel > ((int64_t)1 << 40) / tp->dims[i])
            return tth_diag_set(diag, TTH_ELIMIT, where, "tensor too large");
        numel *= tp->dims[i];
    }
    size_t esz = tth_dtype_size(dt);
    if (tp->n_external_data > 0 || (tp->has_data_location && tp->data_location != 0)) {
        /* the same tensor with its file's bytes as raw_data */
        Onnx__TensorProto view = *tp;
        const uint8_t *bytes = NULL;
        int rc = ext_bytes(tp, ext, where, (size_t)numel * esz, &bytes, diag);
        if (rc)
            return rc;
        view.n_external_data = 0;
        view.has_data_location = 0;
        view.data_location = 0;
        view.has_raw_data = 1;
        view.raw_data.len = (size_t)numel * esz;
        view.raw_data.data = (uint8_t *)bytes;
        rc = tth__onnx_tensor_from_proto(&view, where, NULL, out, diag);
        tth__onnx_give_back(bytes, view.raw_data.len);
        return rc;
    }
    size_t have = 0;
    if (tp->has_raw_data)
        have = tp->raw_data.len / (esz ? esz : 1);
    else if (dt == TTH_F32)
        have = tp->n_float_data;
    else if (dt == TTH_F64)
        have = tp->n_double_data;
    else if (dt == TTH_I64)
        have = tp->n_int64_data;
    else if (dt == TTH_U32 || dt == TTH_U64)
        have = tp->n_uint64_data;
    else
        have = tp->n_int32_data;
    if (tp->has_raw_data && tp->raw_data.len != (size_t)numel * esz)
        return tth_diag_set(diag, TTH_EMODEL, where, "tensor raw_data holds %zu bytes, its shape needs %lld",
                            tp->raw_data.len, (long long)numel * (long long)esz);
    if (!tp->has_raw_data && have != (size_t)numel)
        return tth_diag_set(diag, TTH_EMODEL, where, "tensor holds %zu values, its shape needs %lld", have,
                            (long long)numel);
    /* little-endian raw_data (tth runs on little-endian hosts) is the tensor's bytes: one copy */
    int whole = tp->has_raw_data;
    tth_tensor *t = tth_tensor_new(&ty, whole ? tp->raw_data.data : NULL);
    if (!t)
        return tth_diag_set(diag, TTH_ENOMEM, where, "out of memory for a tensor of %lld elements", (long long)numel);
    for (int64_t i = 0; i < numel && !whole; i++) {
        switch (dt) {
        case TTH_F32: ((float *)t->data)[i] = tp->float_data[i]; break;
        case TTH_F64: ((double *)t->data)[i] = tp->double_data[i]; break;
        case TTH_I64: ((int64_t *)t->data)[i] = tp->int64_data[i]; break;
        case TTH_U32: ((uint32_t *)t->data)[i] = (uint32_t)tp->uint64_data[i]; break;
        case TTH_U64: ((uint64_t *)t->data)[i] = tp->uint64_data[i]; break;
        /* float16 and bfloat16 travel as their bits in int32_data */
        case TTH_F16:
        case TTH_BF16: ((uint16_t *)t->data)[i] = (uint16_t)tp->int32_data[i]; break;
        case TTH_BOOL: ((uint8_t *)t->data)[i] = tp->int32_data[i] != 0; break;
        default: tth__st_i64(t, i, tp->int32_data[i]); break;
        }
    }
    *out = t;
    return 0;
}

int tth_onnx_tensor_decode(const uint8_t *bytes, size_t len, tth_tensor **out, char *name, size_t name_len,
                           tth_diag *diag)
{
    if (out)
        *out = NULL;
    if (name && name_len)
        name[0] = 0;
    if (!bytes || !out)
        return tth_diag_set(diag, TTH_EINVAL, NULL, "no tensor bytes");
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, len, bytes);
    if (!tp)
        return tth_diag_set(diag, TTH_EPARSE, "tensor", "not a valid ONNX TensorProto (protobuf parsing failed)");
    if (name && name_len)
        snprintf(name, name_len, "%s", tp->name ? tp->name : "");
    int rc = tth__onnx_tensor_from_proto(tp, "tensor", NULL, out, diag);
    onnx__tensor_proto__free_unpacked(tp, NULL);
    return rc;
}
