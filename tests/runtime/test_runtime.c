/* The runtime's array formats (runtime/array.c): .npy round trips for every dtype, .npy v2,
 * ONNX TensorProto files from libonnx-testdata, and clear errors for bad files; its tar reader
 * (runtime/tar.c) on archives libarchive writes. */
#include <archive.h>
#include <archive_entry.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tthrt.h"

#define TESTDATA "/usr/share/libonnx-testdata/data"

Test(runtime, npy_round_trip_every_dtype)
{
    char dir[512], path[1024];
    test_mkdtemp(dir, sizeof dir);
    static const tth_dtype all[] = {TTH_F32, TTH_F16, TTH_F64, TTH_I8, TTH_I16, TTH_I32,
                                    TTH_I64, TTH_U8, TTH_U16, TTH_U32, TTH_U64, TTH_BOOL};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        tthrt_array a, b;
        tth_diag d;
        int64_t shape[3] = {2, 3, (int64_t)k + 1};
        cr_assert_eq(tthrt_array_init(&a, all[k], 3, shape, &d), 0);
        for (size_t i = 0; i < a.nbytes; i++)
            ((unsigned char *)a.data)[i] = (unsigned char)(i * 7 + k);
        if (all[k] == TTH_BOOL)
            for (size_t i = 0; i < a.nbytes; i++)
                ((unsigned char *)a.data)[i] &= 1;
        snprintf(path, sizeof path, "%s/a%zu.npy", dir, k);
        cr_assert_eq(tthrt_npy_write(path, &a, &d), 0, "%s", d.message);
        cr_assert_eq(tthrt_npy_read(path, &b, &d), 0, "%s", d.message);
        cr_assert_eq(b.dtype, a.dtype);
        cr_assert_eq(b.rank, 3);
        cr_assert_eq(b.shape[2], (int64_t)k + 1);
        cr_assert_eq(b.nbytes, a.nbytes);
        cr_assert_eq(memcmp(a.data, b.data, a.nbytes), 0);
        /* the data starts on a 64-byte boundary, as numpy writes it */
        size_t flen;
        uint8_t *raw = test_read_file(path, &flen);
        cr_assert_eq((flen - a.nbytes) % 64, 0);
        free(raw);
        tthrt_array_clear(&a);
        tthrt_array_clear(&b);
    }
    /* a scalar and an empty array */
    tthrt_array s, s2;
    tth_diag d;
    cr_assert_eq(tthrt_array_init(&s, TTH_F32, 0, NULL, &d), 0);
    *(float *)s.data = 2.5f;
    snprintf(path, sizeof path, "%s/scalar.npy", dir);
    cr_assert_eq(tthrt_npy_write(path, &s, &d), 0);
    cr_assert_eq(tthrt_npy_read(path, &s2, &d), 0, "%s", d.message);
    cr_assert_eq(s2.rank, 0);
    cr_assert_float_eq(*(float *)s2.data, 2.5f, 0);
    tthrt_array_clear(&s);
    tthrt_array_clear(&s2);
    test_rmtree(dir);
}

Test(runtime, npy_reads_version_2_and_python_style_headers)
{
    /* numpy's v2 layout: 4-byte header length; shape "(3,)"; 'fortran_order' before 'descr' */
    const char dict[] = "{'fortran_order': False, 'descr': '<i4', 'shape': (3,), }";
    unsigned char buf[256];
    size_t hl = 128 - 12;
    memcpy(buf, "\x93NUMPY\x02\x00", 8);
    buf[8] = (unsigned char)hl;
    buf[9] = buf[10] = buf[11] = 0;
    memset(buf + 12, ' ', hl);
    memcpy(buf + 12, dict, sizeof dict - 1);
    buf[12 + hl - 1] = '\n';
    int32_t v[3] = {7, -8, 9};
    memcpy(buf + 128, v, sizeof v);
    tthrt_array a;
    tth_diag d;
    cr_assert_eq(tthrt_npy_read_memory(buf, 128 + sizeof v, &a, &d), 0, "%s", d.message);
    cr_assert_eq(a.dtype, TTH_I32);
    cr_assert_eq(a.rank, 1);
    cr_assert_eq(a.shape[0], 3);
    cr_assert_eq(((int32_t *)a.data)[1], -8);
    tthrt_array_clear(&a);
}

Test(runtime, npy_errors_are_clear)
{
    tthrt_array a;
    tth_diag d;
    cr_assert_eq(tthrt_npy_read_memory("hello world", 11, &a, &d), TTH_EPARSE);
    cr_assert(strstr(d.message, "magic") != NULL, "%s", d.message);
    const char big[] = "\x93NUMPY\x01\x00\x36\x00{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }   \n";
    cr_assert_eq(tthrt_npy_read_memory(big, sizeof big - 1, &a, &d), TTH_EUNSUPPORTED);
    cr_assert(strstr(d.message, "big-endian") != NULL, "%s", d.message);
    const char trunc[] = "\x93NUMPY\x01\x00\x36\x00{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }   \nab";
    cr_assert_eq(tthrt_npy_read_memory(trunc, sizeof trunc - 1, &a, &d), TTH_EPARSE);
    cr_assert(strstr(d.message, "truncated") != NULL, "%s", d.message);
    cr_assert_eq(tthrt_npy_read("/nonexistent/x.npy", &a, &d), TTH_ENOENT);
}

Test(runtime, tensorproto_from_testdata)
{
    tthrt_array a;
    tth_diag d;
    /* test_add: float32 [3, 4, 5] in raw_data */
    int rc = tthrt_pb_read(TESTDATA "/node/test_add/test_data_set_0/input_0.pb", &a, &d);
    cr_assert_eq(rc, 0, "%s", d.message);
    cr_assert_eq(a.dtype, TTH_F32);
    cr_assert_eq(a.rank, 3);
    cr_assert_eq(a.shape[0], 3);
    cr_assert_eq(a.shape[1], 4);
    cr_assert_eq(a.shape[2], 5);
    cr_assert_eq(a.nbytes, 240);
    cr_assert_not_null(a.name);
    tthrt_array_clear(&a);
    /* int64 and bool tensors load too */
    rc = tthrt_array_load(TESTDATA "/node/test_argmax_default_axis_example/test_data_set_0/output_0.pb",
                          &a, &d);
    cr_assert_eq(rc, 0, "%s", d.message);
    cr_assert_eq(a.dtype, TTH_I64);
    tthrt_array_clear(&a);
    rc = tthrt_array_load(TESTDATA "/node/test_and2d/test_data_set_0/input_0.pb", &a, &d);
    cr_assert_eq(rc, 0, "%s", d.message);
    cr_assert_eq(a.dtype, TTH_BOOL);
    cr_assert_eq(a.rank, 2);
    for (size_t i = 0; i < a.nbytes; i++)
        cr_assert_leq(((unsigned char *)a.data)[i], 1);
    tthrt_array_clear(&a);
}

Test(runtime, tensorproto_typed_fields)
{
    /* hand-made: dims [2] (packed), data_type 7 (int64), int64_data [5, -1] packed, name "t" */
    const unsigned char pb[] = {
        0x0a, 0x01, 0x02,                 /* 1: dims, packed, [2] */
        0x10, 0x07,                       /* 2: data_type 7 */
        0x3a, 0x0b, 0x05,                 /* 7: int64_data packed, 11 bytes: 5 */
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, /* -1 */
        0x42, 0x01, 't',                  /* 8: name */
    };
    tthrt_array a;
    tth_diag d;
    cr_assert_eq(tthrt_pb_read_memory(pb, sizeof pb, &a, &d), 0, "%s", d.message);
    cr_assert_eq(a.dtype, TTH_I64);
    cr_assert_eq(a.shape[0], 2);
    cr_assert_eq(((int64_t *)a.data)[0], 5);
    cr_assert_eq(((int64_t *)a.data)[1], -1);
    cr_assert_str_eq(a.name, "t");
    tthrt_array_clear(&a);
    /* a count mismatch is an error naming both counts */
    const unsigned char bad[] = {0x0a, 0x01, 0x03, 0x10, 0x07, 0x3a, 0x01, 0x05};
    cr_assert_eq(tthrt_pb_read_memory(bad, sizeof bad, &a, &d), TTH_EPARSE);
    cr_assert(strstr(d.message, "1 values") != NULL, "%s", d.message);
}

/* bfloat16 has no .npy dtype: writing one is refused naming it and .pb; a TensorProto with
 * data_type 16 round-trips through tthrt_pb_write (raw_data), int32_data carries its bits, and
 * ONNX's own test data is read. */
Test(runtime, bfloat16_tensorproto_round_trip_and_npy_refused)
{
    char dir[512], path[1024];
    test_mkdtemp(dir, sizeof dir);
    tthrt_array a, b;
    tth_diag d;
    int64_t shape[2] = {2, 3};
    cr_assert_eq(tthrt_array_init(&a, TTH_BF16, 2, shape, &d), 0);
    const uint16_t bits[6] = {0x3f80, 0xc0a0, 0x7f80, 0x0001, 0x7fc1, 0x8000}; /* 1 -5 inf tiny NaN -0 */
    memcpy(a.data, bits, sizeof bits);
    a.name = strdup("bf");
    snprintf(path, sizeof path, "%s/bf.pb", dir);
    cr_assert_eq(tthrt_pb_write(path, &a, &d), 0, "%s", d.message);
    cr_assert_eq(tthrt_array_load(path, &b, &d), 0, "%s", d.message);
    cr_assert_eq(b.dtype, TTH_BF16);
    cr_assert_eq(b.rank, 2);
    cr_assert_eq(b.shape[0], 2);
    cr_assert_eq(b.shape[1], 3);
    cr_assert_str_eq(b.name, "bf");
    cr_assert_eq(b.nbytes, sizeof bits);
    cr_assert_eq(memcmp(b.data, bits, sizeof bits), 0);
    tthrt_array_clear(&b);
    /* the file is a TensorProto as onnx.proto lays it out: dims 2 and 3, data_type 16, name, raw_data */
    size_t flen;
    uint8_t *raw = test_read_file(path, &flen);
    const uint8_t head[] = {0x08, 0x02, 0x08, 0x03, 0x10, 0x10, 0x42, 0x02, 'b', 'f', 0x4a, 0x0c};
    cr_assert_eq(flen, sizeof head + sizeof bits);
    cr_assert_eq(memcmp(raw, head, sizeof head), 0);
    free(raw);

    snprintf(path, sizeof path, "%s/bf.npy", dir);
    cr_assert_eq(tthrt_npy_write(path, &a, &d), TTH_EUNSUPPORTED);
    cr_assert(strstr(d.message, "bfloat16") && strstr(d.message, ".pb"), "%s", d.message);

    /* compared as floats: 1 and 1 + 2^-7 are one ulp apart, within bfloat16's default tolerance */
    double atol, rtol;
    tthrt_default_tolerance(TTH_BF16, &atol, &rtol);
    cr_assert_eq(atol, 1e-2);
    cr_assert_eq(rtol, 1e-2);
    cr_assert_eq(tthrt_array_init(&b, TTH_BF16, 2, shape, &d), 0);
    memcpy(b.data, bits, sizeof bits);
    ((uint16_t *)b.data)[0] = 0x3f81;
    char why[256];
    cr_assert_eq(tthrt_array_compare(&a, &b, atol, rtol, why, sizeof why), 1, "%s", why);
    cr_assert_eq(tthrt_array_compare(&a, &b, 1e-4, 1e-4, why, sizeof why), 0);
    cr_assert(strstr(why, "element 0") && strstr(why, "1.0078125"), "%s", why);
    tthrt_array_clear(&b);
    tthrt_array_clear(&a);

    /* int32_data holds the bits: dims [2], data_type 16, int32_data packed [0x3f80, 0xc0a0] */
    const unsigned char pb[] = {0x08, 0x02, 0x10, 0x10, 0x2a, 0x05, 0x80, 0x7f, 0xa0, 0x81, 0x03};
    cr_assert_eq(tthrt_pb_read_memory(pb, sizeof pb, &b, &d), 0, "%s", d.message);
    cr_assert_eq(b.dtype, TTH_BF16);
    cr_assert_eq(((uint16_t *)b.data)[0], 0x3f80);
    cr_assert_eq(((uint16_t *)b.data)[1], 0xc0a0);
    tthrt_array_clear(&b);
    test_rmtree(dir);
}

Test(runtime, compare_tolerance_and_exactness)
{
    tthrt_array a, b;
    tth_diag d;
    int64_t shape[1] = {4};
    char why[256];
    cr_assert_eq(tthrt_array_init(&a, TTH_F32, 1, shape, &d), 0);
    cr_assert_eq(tthrt_array_init(&b, TTH_F32, 1, shape, &d), 0);
    float va[4] = {1.0f, 100.0f, NAN, INFINITY}, vb[4] = {1.00005f, 100.009f, NAN, INFINITY};
    memcpy(a.data, va, sizeof va);
    memcpy(b.data, vb, sizeof vb);
    /* |1 - 1.00005| = 5e-5 <= 1e-4 + 1e-4; |100 - 100.009| = 9e-3 <= 1e-4 + 1e-2 */
    cr_assert_eq(tthrt_array_compare(&a, &b, 1e-4, 1e-4, why, sizeof why), 1, "%s", why);
    ((float *)b.data)[1] = 100.02f;
    cr_assert_eq(tthrt_array_compare(&a, &b, 1e-4, 1e-4, why, sizeof why), 0);
    cr_assert(strstr(why, "element 1") != NULL, "%s", why);
    ((float *)b.data)[1] = 100.0f;
    ((float *)b.data)[3] = -INFINITY;
    cr_assert_eq(tthrt_array_compare(&a, &b, 1e-4, 1e-4, why, sizeof why), 0, "inf vs -inf");
    tthrt_array_clear(&b);
    /* integers: exact */
    tthrt_array i1, i2;
    cr_assert_eq(tthrt_array_init(&i1, TTH_I64, 1, shape, &d), 0);
    cr_assert_eq(tthrt_array_init(&i2, TTH_I64, 1, shape, &d), 0);
    cr_assert_eq(tthrt_array_compare(&i1, &i2, 0, 0, why, sizeof why), 1);
    ((int64_t *)i2.data)[2] = 1;
    cr_assert_eq(tthrt_array_compare(&i1, &i2, 0.5, 0.5, why, sizeof why), 0, "integers compare exactly");
    /* dtype mismatch */
    cr_assert_lt(tthrt_array_compare(&a, &i1, 0, 0, why, sizeof why), 0);
    cr_assert(strstr(why, "float32") && strstr(why, "int64"), "%s", why);
    tthrt_array_clear(&a);
    tthrt_array_clear(&i1);
    tthrt_array_clear(&i2);
}

/* a tar in memory written by libarchive in `format` (ARCHIVE_FORMAT_TAR_USTAR, _PAX_RESTRICTED,
 * _GNUTAR): n files path[i] with text body[i] */
static size_t write_tar(int format, const char *const *path, const char *const *body, size_t n, unsigned char *buf,
                        size_t cap)
{
    struct archive *a = archive_write_new();
    cr_assert_not_null(a);
    cr_assert_eq(archive_write_set_format(a, format), ARCHIVE_OK);
    size_t used = 0;
    cr_assert_eq(archive_write_open_memory(a, buf, cap, &used), ARCHIVE_OK);
    for (size_t i = 0; i < n; i++) {
        struct archive_entry *e = archive_entry_new();
        archive_entry_set_pathname(e, path[i]);
        archive_entry_set_size(e, (la_int64_t)strlen(body[i]));
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        cr_assert_eq(archive_write_header(a, e), ARCHIVE_OK, "%s", archive_error_string(a));
        cr_assert_eq(archive_write_data(a, body[i], strlen(body[i])), (la_ssize_t)strlen(body[i]));
        archive_entry_free(e);
    }
    cr_assert_eq(archive_write_close(a), ARCHIVE_OK);
    archive_write_free(a);
    return used;
}

/* The runtime reads artifacts with its own tar reader (docs/artifact.md, "Reading an
 * artifact"): tars that libarchive writes in ustar, pax and GNU forms, with a path longer than
 * ustar's name field, are read (the shared library named in metadata.json is found under its long
 * path: opening then fails only at loading its bytes, which are not a library); text that is no
 * tar, a tar cut short and one without metadata.json are refused with what is wrong. */
Test(runtime, artifact_tars_are_read_and_checked)
{
    static unsigned char buf[1 << 16];
    char so[300], meta[600];
    const int formats[3] = {ARCHIVE_FORMAT_TAR_USTAR, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, ARCHIVE_FORMAT_TAR_GNUTAR};
    const char *paths[3] = {"README.txt", "metadata.json", so}, *bodies[3] = {"hello", meta, "not a library"};
    tthrt_model *m = NULL;
    tth_diag d;
    for (int f = 0; f < 3; f++) {
        /* over 100 characters: ustar's prefix and name fields (a directory of 120, a name of 60),
         * else one name of 150 that only a pax path record or a GNU long name holds */
        if (f == 0)
            snprintf(so, sizeof so, "lib/%0120d/%060d.so", 7, 8);
        else
            snprintf(so, sizeof so, "lib/%0150d.so", 9);
        snprintf(meta, sizeof meta,
                 "{\"model\": \"m\", \"executor\": {\"entry\": \"tth_m_run\"}, \"memory\": {\"workspace_bytes\": 64, "
                 "\"workspace_alignment\": 64}, \"inputs\": [], \"outputs\": [], \"files\": {\"shared_library\": \"%s\"}}",
                 so);
        size_t len = write_tar(formats[f], paths, bodies, 3, buf, sizeof buf);
        cr_assert_neq(tthrt_model_open_memory(buf, len, &m, &d), 0);
        cr_assert(strstr(d.message, "cannot load the model's shared library") != NULL, "format %d: %s", f, d.message);
        if (f == 0) {
            /* cut inside the library's bytes, and in the middle of a header */
            cr_assert_eq(tthrt_model_open_memory(buf, 512 * 5 + 100, &m, &d), TTH_EPARSE);
            cr_assert(strstr(d.message, "truncated") != NULL, "%s", d.message);
            cr_assert_eq(tthrt_model_open_memory(buf, 700, &m, &d), TTH_EPARSE);
            cr_assert(strstr(d.message, "truncated") != NULL, "%s", d.message);
            buf[0] ^= 1; /* README.txt's name: the checksum no longer matches */
            cr_assert_eq(tthrt_model_open_memory(buf, len, &m, &d), TTH_EPARSE);
            cr_assert(strstr(d.message, "checksum") != NULL, "%s", d.message);
        }
    }
    cr_assert_eq(tthrt_model_open_memory("this is no tar", 14, &m, &d), TTH_EPARSE);
    cr_assert(strstr(d.message, "not an artifact tar") != NULL, "%s", d.message);
    size_t len = write_tar(ARCHIVE_FORMAT_TAR_USTAR, paths, bodies, 1, buf, sizeof buf);
    cr_assert_eq(tthrt_model_open_memory(buf, len, &m, &d), TTH_EPARSE);
    cr_assert(strstr(d.message, "no metadata.json") != NULL, "%s", d.message);
    cr_assert_null(m);
}
