/* onnx_tensor.c: ONNX TensorProto → tth_tensor (initializers, Constant values, test data). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend_internal.h"
#include "onnx.pb-c.h"

/* TensorProto.DataType numbers (onnx.proto) → tth dtypes. bfloat16 is widened to float32. */
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
    {ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16, TTH_F32},
};

tth_dtype tth__onnx_dtype(int32_t onnx_type)
{
    for (size_t i = 0; i < sizeof onnx_dtypes / sizeof onnx_dtypes[0]; i++)
        if (onnx_dtypes[i].onnx == onnx_type)
            return onnx_dtypes[i].dt;
    return TTH_DTYPE_INVALID;
}

static float bf16_to_f32(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

int tth__onnx_tensor_from_proto(const Onnx__TensorProto *tp, const char *where, tth_tensor **out, tth_diag *diag)
{
    *out = NULL;
    if (!tp)
        return tth_diag_set(diag, TTH_EMODEL, where, "missing tensor value");
    int32_t ot = tp->has_data_type ? tp->data_type : 0;
    tth_dtype dt = tth__onnx_dtype(ot);
    if (dt == TTH_DTYPE_INVALID)
        return tth_diag_set(diag, TTH_EUNSUPPORTED, where, "unsupported tensor data type %d", (int)ot);
    if (tp->n_external_data > 0 || (tp->has_data_location && tp->data_location != 0))
        return tth_diag_set(diag, TTH_EUNSUPPORTED, where, "tensor data stored in an external file");
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
    int bf16 = ot == ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16;
    size_t esz = bf16 ? 2 : tth_dtype_size(dt);
    size_t have = 0;
    if (tp->has_raw_data)
        have = tp->raw_data.len / (esz ? esz : 1);
    else if (dt == TTH_F32 && !bf16)
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
    tth_tensor *t = tth_tensor_new(&ty, NULL);
    if (!t)
        return tth_diag_set(diag, TTH_ENOMEM, where, "out of memory for a tensor of %lld elements", (long long)numel);
    for (int64_t i = 0; i < numel; i++) {
        if (tp->has_raw_data) {
            const uint8_t *p = tp->raw_data.data + (size_t)i * esz;
            if (bf16) {
                uint16_t b = (uint16_t)(p[0] | (p[1] << 8));
                ((float *)t->data)[i] = bf16_to_f32(b);
            } else {
                /* little-endian on the wire; tth runs on little-endian hosts */
                memcpy((uint8_t *)t->data + (size_t)i * esz, p, esz);
            }
            continue;
        }
        switch (dt) {
        case TTH_F32:
            if (bf16)
                ((float *)t->data)[i] = bf16_to_f32((uint16_t)tp->int32_data[i]);
            else
                ((float *)t->data)[i] = tp->float_data[i];
            break;
        case TTH_F64: ((double *)t->data)[i] = tp->double_data[i]; break;
        case TTH_I64: ((int64_t *)t->data)[i] = tp->int64_data[i]; break;
        case TTH_U32: ((uint32_t *)t->data)[i] = (uint32_t)tp->uint64_data[i]; break;
        case TTH_U64: ((uint64_t *)t->data)[i] = tp->uint64_data[i]; break;
        case TTH_F16: ((uint16_t *)t->data)[i] = (uint16_t)tp->int32_data[i]; break;
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
    int rc = tth__onnx_tensor_from_proto(tp, "tensor", out, diag);
    onnx__tensor_proto__free_unpacked(tp, NULL);
    return rc;
}
