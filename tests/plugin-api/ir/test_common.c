/* Data types, tensor types, the arena, refcounted tensors, and the artifact containers. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <tth/artifact.h>
#include <tth/ir_common.h>
#include <tth/strbuf.h>

Test(dtype, names_sizes_and_flags_round_trip)
{
#define CHECK_DT(e, v, n, b, f, s)                                 \
    cr_assert_str_eq(tth_dtype_name(TTH_##e), n);                  \
    cr_assert_eq(tth_dtype_from_name(n), TTH_##e);                 \
    cr_assert_eq(tth_dtype_size(TTH_##e), (size_t)(b));            \
    cr_assert_eq(tth_dtype_is_float(TTH_##e), f);                  \
    cr_assert_eq(tth_dtype_is_signed(TTH_##e), s);
    TTH_DTYPES(CHECK_DT)
#undef CHECK_DT
    cr_assert_eq(tth_dtype_from_name("float"), TTH_DTYPE_INVALID);
    cr_assert_eq(tth_dtype_from_name(NULL), TTH_DTYPE_INVALID);
    cr_assert_str_eq(tth_dtype_name(TTH_DTYPE_INVALID), "invalid");
    cr_assert_str_eq(tth_dtype_name((tth_dtype)99), "invalid");
    cr_assert_eq(tth_dtype_size((tth_dtype)99), 0);
}

Test(ttype, numel_bytes_equal_format)
{
    tth_ttype a = {TTH_F32, 4, {1, 3, 224, 224}};
    tth_ttype s = {TTH_I64, 0, {0}};
    cr_assert_eq(tth_ttype_numel(&a), 150528);
    cr_assert_eq(tth_ttype_nbytes(&a), 602112);
    cr_assert_eq(tth_ttype_numel(&s), 1);
    cr_assert_eq(tth_ttype_nbytes(&s), 8);
    char buf[64];
    size_t n = tth_ttype_format(&a, buf, sizeof buf);
    cr_assert_str_eq(buf, "float32[1, 3, 224, 224]");
    cr_assert_eq(n, strlen(buf));
    tth_ttype_format(&s, buf, sizeof buf);
    cr_assert_str_eq(buf, "int64[]");
    char tiny[8];
    n = tth_ttype_format(&a, tiny, sizeof tiny);
    cr_assert_str_eq(tiny, "float32");
    cr_assert_eq(n, 7);
    tth_ttype b = a;
    cr_assert(tth_ttype_equal(&a, &b));
    b.shape[3] = 223;
    cr_assert_not(tth_ttype_equal(&a, &b));
    b = a;
    b.dtype = TTH_F16;
    cr_assert_not(tth_ttype_equal(&a, &b));
}

Test(arena, aligned_zeroed_and_counted)
{
    tth_arena *a = tth_arena_new();
    cr_assert_not_null(a);
    cr_assert_eq(tth_arena_used(a), 0);
    size_t total = 0;
    for (size_t i = 1; i < 2000; i += 7) {
        unsigned char *p = tth_arena_alloc(a, i);
        cr_assert_not_null(p);
        cr_assert_eq((uintptr_t)p % 16, 0, "allocation of %zu bytes not 16-byte aligned", i);
        for (size_t k = 0; k < i; k++)
            cr_assert_eq(p[k], 0);
        memset(p, 0xab, i);
        total += i;
    }
    /* A block bigger than a chunk. */
    unsigned char *big = tth_arena_alloc(a, 1 << 20);
    cr_assert_not_null(big);
    cr_assert_eq(big[(1 << 20) - 1], 0);
    total += 1 << 20;
    cr_assert_eq(tth_arena_used(a), total);
    char *s = tth_arena_strdup(a, "hello");
    cr_assert_str_eq(s, "hello");
    char *f = tth_arena_printf(a, "%s-%d", "conv", 42);
    cr_assert_str_eq(f, "conv-42");
    cr_assert_null(tth_arena_strdup(a, NULL));
    cr_assert_null(tth_arena_alloc(a, SIZE_MAX - 8)); /* no wrap-around */
    tth_arena_free(a);
    tth_arena_free(NULL);
}

Test(tensor, aligned_copied_refcounted)
{
    tth_ttype t = {TTH_F32, 2, {2, 3}};
    float v[6] = {1, 2, 3, 4, 5, 6};
    tth_tensor *a = tth_tensor_new(&t, v);
    cr_assert_not_null(a);
    cr_assert_eq((uintptr_t)a->data % 64, 0);
    cr_assert_eq(a->nbytes, 24);
    cr_assert_eq(a->refcount, 1);
    cr_assert_eq(memcmp(a->data, v, sizeof v), 0);
    v[0] = 100; /* copied, not borrowed */
    cr_assert_eq(((float *)a->data)[0], 1.0f);
    cr_assert_eq(tth_tensor_get_f64(a, 5), 6.0);
    cr_assert_eq(tth_tensor_get_i64(a, 4), 5);
    cr_assert_eq(tth_tensor_ref(a), a);
    cr_assert_eq(a->refcount, 2);
    tth_tensor_unref(a);
    cr_assert_eq(a->refcount, 1);
    tth_tensor_unref(a);

    tth_tensor *z = tth_tensor_new(&t, NULL);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(((float *)z->data)[i], 0.0f);
    tth_tensor_unref(z);

    tth_ttype bad = {TTH_F32, 1, {-1}};
    cr_assert_null(tth_tensor_new(&bad, NULL));
    tth_ttype bad2 = {TTH_DTYPE_INVALID, 1, {1}};
    cr_assert_null(tth_tensor_new(&bad2, NULL));
    tth_ttype huge = {TTH_F64, 3, {1LL << 30, 1LL << 30, 1LL << 30}}; /* byte size overflows */
    cr_assert_null(tth_tensor_new(&huge, NULL));
}

/* Tensors of a megabyte or more have memory of their own (common.c, huge pages): the same
 * contract as small ones. Sizes around the 1 MiB and 2 MiB edges, and one not a multiple of 64. */
Test(tensor, large_tensors_are_aligned_copied_and_zeroed)
{
    const int64_t counts[] = {(1 << 18) - 1, 1 << 18, (1 << 19) + 3, 3 * (1 << 18) + 5};
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        tth_ttype t = {TTH_F32, 1, {counts[k]}};
        float *v = malloc((size_t)counts[k] * sizeof *v);
        cr_assert_not_null(v);
        for (int64_t i = 0; i < counts[k]; i++)
            v[i] = (float)(i % 1000) - 500.0f;
        tth_tensor *a = tth_tensor_new(&t, v), *z = tth_tensor_new(&t, NULL);
        cr_assert(a && z);
        cr_assert_eq((uintptr_t)a->data % 64, 0);
        cr_assert_eq(a->nbytes, (size_t)counts[k] * 4);
        cr_assert_eq(memcmp(a->data, v, a->nbytes), 0, "%lld floats copied", (long long)counts[k]);
        for (int64_t i = 0; i < counts[k]; i++)
            cr_assert_eq(((float *)z->data)[i], 0.0f, "element %lld of %lld is zero", (long long)i,
                         (long long)counts[k]);
        memset(z->data, 0x7f, z->nbytes); /* writable to its end */
        cr_assert_eq(tth_tensor_ref(a), a);
        tth_tensor_unref(a);
        cr_assert_eq(((float *)a->data)[counts[k] - 1], v[counts[k] - 1]); /* still held */
        tth_tensor_unref(a);
        tth_tensor_unref(z);
        free(v);
    }
}

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
/* Under AddressSanitizer a large tensor's mapping past its 64-byte rounded size is poisoned, as
 * the memory past a small tensor is (common.c): a read past the end is caught. */
Test(tensor, large_tensor_slack_is_poisoned_under_asan)
{
    tth_ttype t = {TTH_F32, 1, {(1 << 18) + 3}}; /* 1 MiB + 12 bytes: 1 MiB + 64 rounded */
    tth_tensor *a = tth_tensor_new(&t, NULL);
    cr_assert_not_null(a);
    char *d = a->data;
    cr_assert_null(__asan_region_is_poisoned(d, ((size_t)1 << 20) + 64), "the tensor itself is usable");
    cr_assert_not_null(__asan_region_is_poisoned(d + ((size_t)1 << 20) + 64, 1), "the byte past it is poisoned");
    tth_tensor_unref(a);
}
#endif

Test(tensor, hash_covers_dtype_shape_and_bytes)
{
    uint8_t bytes[24] = {0};
    bytes[5] = 7;
    tth_ttype t23 = {TTH_F32, 2, {2, 3}}, t32 = {TTH_F32, 2, {3, 2}}, i23 = {TTH_I32, 2, {2, 3}};
    tth_tensor *a = tth_tensor_new(&t23, bytes), *b = tth_tensor_new(&t23, bytes);
    tth_tensor *c = tth_tensor_new(&t32, bytes), *d = tth_tensor_new(&i23, bytes);
    bytes[5] = 8;
    tth_tensor *e = tth_tensor_new(&t23, bytes);
    cr_assert_eq(tth_tensor_hash(a), tth_tensor_hash(b));
    cr_assert_neq(tth_tensor_hash(a), tth_tensor_hash(c));
    cr_assert_neq(tth_tensor_hash(a), tth_tensor_hash(d));
    cr_assert_neq(tth_tensor_hash(a), tth_tensor_hash(e));
    tth_tensor_unref(a);
    tth_tensor_unref(b);
    tth_tensor_unref(c);
    tth_tensor_unref(d);
    tth_tensor_unref(e);
}

Test(tensor, element_access_for_every_dtype)
{
    uint16_t h[4] = {0x3C00, 0xC000, 0x3555, 0x0001}; /* 1, -2, ~0.333, smallest subnormal */
    tth_ttype th = {TTH_F16, 1, {4}};
    tth_tensor *t = tth_tensor_new(&th, h);
    cr_assert_eq(tth_tensor_get_f64(t, 0), 1.0);
    cr_assert_eq(tth_tensor_get_f64(t, 1), -2.0);
    cr_assert_float_eq(tth_tensor_get_f64(t, 2), 0.33325195, 1e-7);
    cr_assert_float_eq(tth_tensor_get_f64(t, 3), 5.9604645e-08, 1e-12);
    cr_assert_eq(tth_tensor_get_i64(t, 1), -2);
    tth_tensor_unref(t);

    int8_t i8[2] = {-128, 127};
    tth_ttype t8 = {TTH_I8, 1, {2}};
    t = tth_tensor_new(&t8, i8);
    cr_assert_eq(tth_tensor_get_i64(t, 0), -128);
    cr_assert_eq(tth_tensor_get_f64(t, 1), 127.0);
    tth_tensor_unref(t);

    uint8_t u8[2] = {255, 0};
    tth_ttype tu = {TTH_U8, 1, {2}};
    t = tth_tensor_new(&tu, u8);
    cr_assert_eq(tth_tensor_get_i64(t, 0), 255);
    tth_tensor_unref(t);

    int64_t i64[1] = {-9000000000LL};
    tth_ttype ti = {TTH_I64, 0, {0}};
    t = tth_tensor_new(&ti, i64);
    cr_assert_eq(tth_tensor_get_i64(t, 0), -9000000000LL);
    tth_tensor_unref(t);

    uint8_t bl[2] = {0, 1};
    tth_ttype tb = {TTH_BOOL, 1, {2}};
    t = tth_tensor_new(&tb, bl);
    cr_assert_eq(tth_tensor_get_i64(t, 1), 1);
    cr_assert_eq(tth_tensor_get_f64(t, 0), 0.0);
    tth_tensor_unref(t);

    double f64[1] = {-3.75};
    tth_ttype td = {TTH_F64, 1, {1}};
    t = tth_tensor_new(&td, f64);
    cr_assert_eq(tth_tensor_get_i64(t, 0), -3); /* truncates */
    tth_tensor_unref(t);
}

/* binary16 facts (IEEE 754): 0x3c00 is 1, 0x7bff the largest finite (65504), 0x0001 the
 * smallest subnormal (2^-24), 0x0400 the smallest normal (2^-14), 0x7c00 infinity. */
Test(float16, widening_is_exact_and_narrowing_rounds_to_nearest_even)
{
    cr_assert_eq(tth_f16_to_f32(0x3c00), 1.0f);
    cr_assert_eq(tth_f16_to_f32(0xc000), -2.0f);
    cr_assert_eq(tth_f16_to_f32(0x7bff), 65504.0f);
    cr_assert_eq(tth_f16_to_f32(0x0001), 0x1p-24f);
    cr_assert_eq(tth_f16_to_f32(0x03ff), 0x3ffp-24f);
    cr_assert_eq(tth_f16_to_f32(0x0400), 0x1p-14f);
    cr_assert_eq(tth_f16_to_f32(0x7c00), __builtin_inff());
    cr_assert(tth_f16_to_f32(0x7e00) != tth_f16_to_f32(0x7e00), "0x7e00 is a NaN");
    uint32_t bits;
    float neg_zero = tth_f16_to_f32(0x8000);
    memcpy(&bits, &neg_zero, 4);
    cr_assert_eq(bits, 0x80000000u, "negative zero keeps its sign");

    /* every finite half survives the round trip, subnormals included */
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff))
            continue; /* NaN: stays a NaN, payload not promised */
        cr_assert_eq(tth_f32_to_f16(tth_f16_to_f32((uint16_t)h)), h, "half 0x%04x", h);
    }
    cr_assert_eq(tth_f32_to_f16(__builtin_nanf("")) & 0x7e00, 0x7e00);

    /* ties go to the even neighbour; beyond 65520 is infinity */
    cr_assert_eq(tth_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);  /* halfway 1 .. 1+2^-10: even is 1 */
    cr_assert_eq(tth_f32_to_f16(1.0f + 0x3p-11f), 0x3c02);  /* halfway 1+2^-10 .. 1+2^-9: even is up */
    cr_assert_eq(tth_f32_to_f16(1.0f + 0x1p-12f), 0x3c00);
    cr_assert_eq(tth_f32_to_f16(65519.0f), 0x7bff);
    cr_assert_eq(tth_f32_to_f16(65520.0f), 0x7c00);
    cr_assert_eq(tth_f32_to_f16(-1e10f), 0xfc00);
    cr_assert_eq(tth_f32_to_f16(0x1p-25f), 0x0000);          /* halfway 0 .. 2^-24: even is 0 */
    cr_assert_eq(tth_f32_to_f16(0x3p-25f), 0x0002);          /* halfway 2^-24 .. 2^-23: even is 2^-23 */
    cr_assert_eq(tth_f32_to_f16(-0x1p-30f), 0x8000);
    cr_assert_eq(tth_f32_to_f16(0xfffp-26f), 0x0400);        /* 1023.75 * 2^-24 rounds up into the normal range */
}

/* bfloat16: the upper half of a binary32. The expected bits below were computed apart from the
 * library's bit trick: for each float32, the bfloat16 nearest by exact rational distance (ties
 * to the even mantissa, IEEE overflow to infinity at the largest finite + half an ulp), found by
 * searching the bfloat16 values. */
static float f32_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

Test(bfloat16, widening_is_exact_and_narrowing_rounds_to_nearest_even)
{
    cr_assert_eq(tth_bf16_to_f32(0x3f80), 1.0f);
    cr_assert_eq(tth_bf16_to_f32(0xc000), -2.0f);
    cr_assert_eq(tth_bf16_to_f32(0x7f7f), 0x1.fep127f);      /* largest finite, 3.3895314e38 */
    cr_assert_eq(tth_bf16_to_f32(0x0001), 0x1p-133f);        /* smallest subnormal */
    cr_assert_eq(tth_bf16_to_f32(0x0080), 0x1p-126f);        /* smallest normal */
    cr_assert_eq(tth_bf16_to_f32(0xff80), -__builtin_inff());
    cr_assert(tth_bf16_to_f32(0x7fc0) != tth_bf16_to_f32(0x7fc0), "0x7fc0 is a NaN");
    cr_assert_eq(bits_of(tth_bf16_to_f32(0x8000)), 0x80000000u, "negative zero keeps its sign");
    cr_assert_eq(bits_of(tth_bf16_to_f32(0x7f81)), 0x7f810000u, "a NaN's payload is kept");

    /* every bfloat16 but NaN survives the round trip, subnormals and infinities included */
    for (uint32_t b = 0; b < 0x10000; b++) {
        if ((b & 0x7f80) == 0x7f80 && (b & 0x7f))
            continue;
        cr_assert_eq(tth_f32_to_bf16(tth_bf16_to_f32((uint16_t)b)), b, "bfloat16 0x%04x", b);
    }

    static const struct { uint32_t f; uint16_t want; const char *what; } cases[] = {
        {0x3f800000u, 0x3f80, "1"},
        {0x3f808000u, 0x3f80, "1 + 2^-8: a tie, even is down"},
        {0x3f818000u, 0x3f82, "1 + 3*2^-8: a tie, even is up"},
        {0x3f808001u, 0x3f81, "just above the tie"},
        {0xbfc00000u, 0xbfc0, "-1.5"},
        {0x7f7fffffu, 0x7f80, "the largest finite float32 is past the overflow tie"},
        {0x7f7f0000u, 0x7f7f, "the largest finite bfloat16"},
        {0x7f7f7fffu, 0x7f7f, "just below the overflow tie"},
        {0x7f7f8000u, 0x7f80, "the overflow tie goes to infinity"},
        {0x7f800000u, 0x7f80, "infinity"},
        {0xff800000u, 0xff80, "-infinity"},
        {0x00010000u, 0x0001, "the smallest subnormal"},
        {0x00008000u, 0x0000, "half of it: a tie, even is 0"},
        {0x00018000u, 0x0002, "1.5 smallest subnormals: a tie, even is 2"},
        {0x00000001u, 0x0000, "the smallest float32 subnormal"},
        {0x007f8000u, 0x0080, "the largest subnormal + half an ulp rounds into the normal range"},
        {0x80000000u, 0x8000, "-0"},
        {0x40490fdbu, 0x4049, "pi"},
        {0x3dcccccdu, 0x3dcd, "0.1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_assert_eq(tth_f32_to_bf16(f32_of(cases[i].f)), cases[i].want, "0x%08x (%s): got 0x%04x, want 0x%04x",
                     cases[i].f, cases[i].what, tth_f32_to_bf16(f32_of(cases[i].f)), cases[i].want);

    /* NaN stays NaN, of the same sign, even when only its lowest payload bits are set */
    cr_assert_eq(tth_f32_to_bf16(f32_of(0x7fc00000u)), 0x7fc0);
    cr_assert_eq(tth_f32_to_bf16(f32_of(0x7f800001u)), 0x7fc0);
    cr_assert_eq(tth_f32_to_bf16(f32_of(0xff800001u)), 0xffc0);
    cr_assert_eq(tth_f32_to_bf16(f32_of(0x7fffffffu)), 0x7fff);

    uint16_t h[3] = {0x3f80, 0xc0a0, 0x0001}; /* 1, -5, the smallest subnormal */
    tth_ttype th = {TTH_BF16, 1, {3}};
    tth_tensor *t = tth_tensor_new(&th, h);
    cr_assert_eq(tth_tensor_get_f64(t, 0), 1.0);
    cr_assert_eq(tth_tensor_get_f64(t, 1), -5.0);
    cr_assert_eq(tth_tensor_get_f64(t, 2), 0x1p-133);
    cr_assert_eq(tth_tensor_get_i64(t, 1), -5);
    tth_tensor_unref(t);
}

Test(artifact, runtime_module_files_and_meta)
{
    tth_runtime_module *m = tth_runtime_module_new("c");
    cr_assert_str_eq(tth_runtime_module_kind(m), "c");
    tth_diag d;
    tth_diag_clear(&d);
    char src[] = "int x;";
    cr_assert_eq(tth_runtime_module_add_file(m, "lib0.c", TTH_FILE_C_SOURCE, src, strlen(src), &d), 0);
    src[0] = 'X'; /* copied */
    cr_assert_eq(tth_runtime_module_add_file(m, "blob.bin", TTH_FILE_BLOB, "\0\1\2", 3, &d), 0);
    cr_assert_eq(tth_runtime_module_count(m), 2);
    const tth_module_file *f = tth_runtime_module_file(m, 0);
    cr_assert_str_eq(f->name, "lib0.c");
    cr_assert_eq(f->kind, TTH_FILE_C_SOURCE);
    cr_assert_eq(f->len, 6);
    cr_assert_eq(memcmp(f->data, "int x;", 6), 0);
    cr_assert_null(tth_runtime_module_file(m, 2));

    cr_assert_eq(tth_runtime_module_add_file(m, "lib0.c", TTH_FILE_C_SOURCE, "y", 1, &d), TTH_EDUPLICATE);
    cr_assert_str_eq(d.message, "the runtime module already has a file 'lib0.c'");
    cr_assert_eq(tth_runtime_module_add_file(m, "src/a.c", TTH_FILE_C_SOURCE, "y", 1, &d), TTH_EINVAL);
    cr_assert_str_eq(d.message, "'src/a.c' is not a plain file name (no directories)");
    cr_assert_eq(tth_runtime_module_add_file(m, "..", TTH_FILE_BLOB, "y", 1, &d), TTH_EINVAL);
    cr_assert_eq(tth_runtime_module_add_file(m, "a.x", (tth_file_kind)42, "y", 1, &d), TTH_EINVAL);
    cr_assert_eq(tth_runtime_module_count(m), 2);

    cr_assert_null(tth_runtime_module_meta(m));
    json_t *meta = json_pack("{s:[s]}", "libs", "cmsis-nn");
    cr_assert_eq(tth_runtime_module_set_meta(m, meta, &d), 0);
    json_array_append_new(json_object_get(meta, "libs"), json_string("m")); /* copied */
    cr_assert_eq(json_array_size(json_object_get(tth_runtime_module_meta(m), "libs")), 1);
    json_decref(meta);
    json_t *arr = json_array();
    cr_assert_eq(tth_runtime_module_set_meta(m, arr, &d), TTH_EINVAL);
    json_decref(arr);
    tth_runtime_module_free(m);
}

Test(artifact, const_map_holds_references)
{
    tth_const_map *cm = tth_const_map_new();
    tth_ttype t = {TTH_I8, 1, {4}};
    tth_tensor *w = tth_tensor_new(&t, NULL);
    tth_diag d;
    cr_assert_eq(tth_const_map_add(cm, "w0", w, &d), 0);
    cr_assert_eq(w->refcount, 2);
    cr_assert_eq(tth_const_map_add(cm, "w0", w, &d), TTH_EDUPLICATE);
    cr_assert_str_eq(d.message, "the constant map already has 'w0'");
    cr_assert_eq(tth_const_map_add(cm, "", w, &d), TTH_EINVAL);
    cr_assert_eq(tth_const_map_count(cm), 1);
    cr_assert_str_eq(tth_const_map_name(cm, 0), "w0");
    cr_assert_eq(tth_const_map_tensor(cm, 0), w);
    cr_assert_null(tth_const_map_name(cm, 1));
    tth_const_map_free(cm);
    cr_assert_eq(w->refcount, 1);
    tth_tensor_unref(w);
}

/* The text buffer the printers and code generators share: appends of every kind, a printf
 * longer than its stack copy, indentation past its block of spaces, and an empty finish. */
Test(common, strbuf_appends_and_finishes)
{
    tth_strbuf b = {0};
    tth_strbuf_puts(&b, "ab");
    tth_strbuf_putc(&b, 'c');
    tth_strbuf_putn(&b, "defXYZ", 3);
    tth_strbuf_spaces(&b, 37);
    tth_strbuf_printf(&b, "%d|%300s|", 42, "z");
    cr_assert_eq(b.n, 6 + 37 + 3 + 300 + 1);
    cr_assert_eq(strlen(b.s), b.n);
    cr_assert_eq(strncmp(b.s, "abcdef ", 7), 0);
    cr_assert_eq(b.s[6 + 36], ' ');
    cr_assert_eq(strncmp(b.s + 43, "42| ", 4), 0);
    cr_assert_eq(strcmp(b.s + b.n - 2, "z|"), 0);
    char *s = tth_strbuf_finish(&b);
    cr_assert_not_null(s);
    cr_assert_null(b.s);
    cr_assert_eq(b.n, 0);
    free(s);
    tth_strbuf e = {0};
    char *empty = tth_strbuf_finish(&e);
    cr_assert_str_eq(empty, "");
    free(empty);
    tth_strbuf f = {.failed = 1};
    tth_strbuf_puts(&f, "lost");
    cr_assert_null(tth_strbuf_finish(&f));
}
