/* tth/ir_common.h: what Relay and TIR share: data types, tensor types, arenas, tensors.
 *
 * The IR structs in tth/relay.h and tth/tir.h are transparent (plugins read them directly) and
 * are part of the plugin ABI's major version: fields are only appended within a major version.
 * Every IR node is allocated in its module's arena and freed with the module; never free a node.
 */
#ifndef TTH_IR_COMMON_H
#define TTH_IR_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "tth/diag.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Data types; frozen numbers. X(ENUM, value, name, bytes, is_float, is_signed) */
#define TTH_DTYPES(X)                      \
    X(F32, 1, "float32", 4, 1, 1)          \
    X(F16, 2, "float16", 2, 1, 1)          \
    X(F64, 3, "float64", 8, 1, 1)          \
    X(I8, 4, "int8", 1, 0, 1)              \
    X(I16, 5, "int16", 2, 0, 1)            \
    X(I32, 6, "int32", 4, 0, 1)            \
    X(I64, 7, "int64", 8, 0, 1)            \
    X(U8, 8, "uint8", 1, 0, 0)             \
    X(U16, 9, "uint16", 2, 0, 0)           \
    X(U32, 10, "uint32", 4, 0, 0)          \
    X(U64, 11, "uint64", 8, 0, 0)          \
    X(BOOL, 12, "bool", 1, 0, 0)           \
    X(BF16, 13, "bfloat16", 2, 1, 1)

typedef enum tth_dtype {
    TTH_DTYPE_INVALID = 0,
#define TTH__DT_ENUM(e, v, n, b, f, s) TTH_##e = v,
    TTH_DTYPES(TTH__DT_ENUM)
#undef TTH__DT_ENUM
} tth_dtype;

TTH_API const char *tth_dtype_name(tth_dtype t);   /* "float32"; "invalid" */
TTH_API tth_dtype tth_dtype_from_name(const char *name); /* TTH_DTYPE_INVALID if unknown */
TTH_API size_t tth_dtype_size(tth_dtype t);        /* bytes; 0 if invalid */
TTH_API int tth_dtype_is_float(tth_dtype t);
TTH_API int tth_dtype_is_signed(tth_dtype t);

#define TTH_MAX_RANK 8

/* A tensor type with a static shape. rank 0 is a scalar. */
typedef struct tth_ttype {
    tth_dtype dtype;
    int32_t rank;
    int64_t shape[TTH_MAX_RANK];
} tth_ttype;

TTH_API int64_t tth_ttype_numel(const tth_ttype *t);
TTH_API size_t tth_ttype_nbytes(const tth_ttype *t);
TTH_API int tth_ttype_equal(const tth_ttype *a, const tth_ttype *b);
/* "float32[1, 3, 224, 224]" into buf */
TTH_API size_t tth_ttype_format(const tth_ttype *t, char *buf, size_t len);

/* A bump allocator. Everything allocated from it is freed at once by tth_arena_free. */
typedef struct tth_arena tth_arena;
TTH_API tth_arena *tth_arena_new(void);
TTH_API void tth_arena_free(tth_arena *a);
TTH_API void *tth_arena_alloc(tth_arena *a, size_t size);      /* zeroed, 16-byte aligned; NULL on OOM */
TTH_API char *tth_arena_strdup(tth_arena *a, const char *s);
TTH_API char *tth_arena_printf(tth_arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
TTH_API size_t tth_arena_used(const tth_arena *a);              /* bytes handed out */

/* A constant tensor: held by reference (refcounted), never inlined into IR text or JSON.
 * data is 64-byte aligned and owned by the tensor. */
typedef struct tth_tensor {
    tth_ttype type;
    void *data;
    size_t nbytes;
    uint32_t refcount;
} tth_tensor;

/* New tensor of that type; data zeroed (or copied from `data` when not NULL). refcount 1. */
TTH_API tth_tensor *tth_tensor_new(const tth_ttype *type, const void *data);
TTH_API tth_tensor *tth_tensor_ref(tth_tensor *t);
TTH_API void tth_tensor_unref(tth_tensor *t);
/* XXH64 of dtype, shape and bytes: identical constants hash alike. */
TTH_API uint64_t tth_tensor_hash(const tth_tensor *t);
/* Element i converted to double (any dtype). */
TTH_API double tth_tensor_get_f64(const tth_tensor *t, int64_t i);
TTH_API int64_t tth_tensor_get_i64(const tth_tensor *t, int64_t i);

/* IEEE 754 binary16 <-> binary32, the one conversion tth uses everywhere (import, constant
 * folding, the TIR interpreter, element access). Widening is exact: subnormals, infinities and
 * NaN payloads are kept. Narrowing rounds to nearest, ties to even; too large becomes infinity,
 * too small a signed zero or a subnormal. */
TTH_API float tth_f16_to_f32(uint16_t h);
TTH_API uint16_t tth_f32_to_f16(float f);

/* bfloat16 (the upper half of a binary32: sign, 8 exponent bits, 7 mantissa bits) <-> binary32,
 * likewise the one pair tth uses everywhere (docs/tir.md, "float16 and bfloat16"). Widening is
 * exact. Narrowing rounds to nearest, ties to even (so values past the largest finite bfloat16,
 * 0x7f7f = 3.3895314e38, round to infinity); subnormals stay subnormal; a NaN stays a NaN of the
 * same sign (quiet, its payload's upper bits kept). */
TTH_API float tth_bf16_to_f32(uint16_t b);
TTH_API uint16_t tth_f32_to_bf16(float f);

#ifdef __cplusplus
}
#endif
#endif
