/* values.c: reading and writing single elements of a constant tensor of any dtype, and reading
 * attributes, for the importer and the passes that build constants themselves (shape arithmetic,
 * batch-norm folding). Folding an operator call is fold_constants.c's, through the lowering. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontend_internal.h"

/* ---- element access ---- */

double tth__ld_f64(const tth_tensor *t, int64_t i)
{
    const void *d = t->data;
    switch (t->type.dtype) {
    case TTH_F32: return ((const float *)d)[i];
    case TTH_F16: return tth_f16_to_f32(((const uint16_t *)d)[i]);
    case TTH_BF16: return tth_bf16_to_f32(((const uint16_t *)d)[i]);
    case TTH_F64: return ((const double *)d)[i];
    case TTH_I8: return ((const int8_t *)d)[i];
    case TTH_I16: return ((const int16_t *)d)[i];
    case TTH_I32: return ((const int32_t *)d)[i];
    case TTH_I64: return (double)((const int64_t *)d)[i];
    case TTH_U8: return ((const uint8_t *)d)[i];
    case TTH_U16: return ((const uint16_t *)d)[i];
    case TTH_U32: return ((const uint32_t *)d)[i];
    case TTH_U64: return (double)((const uint64_t *)d)[i];
    case TTH_BOOL: return ((const uint8_t *)d)[i] != 0;
    default: return 0;
    }
}

static int64_t f64_to_i64(double v)
{
    if (isnan(v))
        return 0;
    if (v >= 9.2233720368547758e18)
        return INT64_MAX;
    if (v <= -9.2233720368547758e18)
        return INT64_MIN;
    return (int64_t)v;
}

int64_t tth__ld_i64(const tth_tensor *t, int64_t i)
{
    const void *d = t->data;
    switch (t->type.dtype) {
    case TTH_I8: return ((const int8_t *)d)[i];
    case TTH_I16: return ((const int16_t *)d)[i];
    case TTH_I32: return ((const int32_t *)d)[i];
    case TTH_I64: return ((const int64_t *)d)[i];
    case TTH_U8: return ((const uint8_t *)d)[i];
    case TTH_U16: return ((const uint16_t *)d)[i];
    case TTH_U32: return ((const uint32_t *)d)[i];
    case TTH_U64: return (int64_t)((const uint64_t *)d)[i];
    case TTH_BOOL: return ((const uint8_t *)d)[i] != 0;
    default: return f64_to_i64(tth__ld_f64(t, i));
    }
}

void tth__st_i64(tth_tensor *t, int64_t i, int64_t v)
{
    void *d = t->data;
    switch (t->type.dtype) {
    case TTH_F32: ((float *)d)[i] = (float)v; break;
    case TTH_F16: ((uint16_t *)d)[i] = tth_f32_to_f16((float)v); break;
    case TTH_BF16: ((uint16_t *)d)[i] = tth_f32_to_bf16((float)v); break;
    case TTH_F64: ((double *)d)[i] = (double)v; break;
    case TTH_I8: ((int8_t *)d)[i] = (int8_t)(uint8_t)(uint64_t)v; break;
    case TTH_I16: ((int16_t *)d)[i] = (int16_t)(uint16_t)(uint64_t)v; break;
    case TTH_I32: ((int32_t *)d)[i] = (int32_t)(uint32_t)(uint64_t)v; break;
    case TTH_I64: ((int64_t *)d)[i] = v; break;
    case TTH_U8: ((uint8_t *)d)[i] = (uint8_t)(uint64_t)v; break;
    case TTH_U16: ((uint16_t *)d)[i] = (uint16_t)(uint64_t)v; break;
    case TTH_U32: ((uint32_t *)d)[i] = (uint32_t)(uint64_t)v; break;
    case TTH_U64: ((uint64_t *)d)[i] = (uint64_t)v; break;
    case TTH_BOOL: ((uint8_t *)d)[i] = v != 0; break;
    default: break;
    }
}

void tth__st_f64(tth_tensor *t, int64_t i, double v)
{
    switch (t->type.dtype) {
    case TTH_F32: ((float *)t->data)[i] = (float)v; break;
    case TTH_F16: ((uint16_t *)t->data)[i] = tth_f32_to_f16((float)v); break;
    case TTH_BF16: ((uint16_t *)t->data)[i] = tth_f32_to_bf16((float)v); break;
    case TTH_F64: ((double *)t->data)[i] = v; break;
    case TTH_BOOL: ((uint8_t *)t->data)[i] = v != 0; break;
    case TTH_U64: /* saturating like f64_to_i64: 2^64 and above is UINT64_MAX */
        ((uint64_t *)t->data)[i] = v >= 18446744073709551616.0 ? UINT64_MAX
                                   : v >= 9.2233720368547758e18 ? (uint64_t)(v - 9.2233720368547758e18) + (UINT64_C(1) << 63)
                                                                : (uint64_t)f64_to_i64(v);
        break;
    default: tth__st_i64(t, i, f64_to_i64(v)); break;
    }
}

/* ---- attributes ---- */

int64_t tth__attr_int(const json_t *attrs, const char *key, int64_t dflt)
{
    json_t *v = attrs ? json_object_get(attrs, key) : NULL;
    if (json_is_integer(v))
        return json_integer_value(v);
    if (json_is_real(v))
        return f64_to_i64(json_real_value(v));
    if (json_is_boolean(v))
        return json_is_true(v);
    return dflt;
}

double tth__attr_num(const json_t *attrs, const char *key, double dflt)
{
    json_t *v = attrs ? json_object_get(attrs, key) : NULL;
    return json_is_number(v) ? json_number_value(v) : dflt;
}

const char *tth__attr_str(const json_t *attrs, const char *key, const char *dflt)
{
    json_t *v = attrs ? json_object_get(attrs, key) : NULL;
    return json_is_string(v) ? json_string_value(v) : dflt;
}

int tth__attr_ints(const json_t *attrs, const char *key, int64_t *out, int max)
{
    json_t *v = attrs ? json_object_get(attrs, key) : NULL;
    if (!json_is_array(v))
        return -1;
    int n = (int)json_array_size(v);
    for (int i = 0; i < n && i < max; i++)
        out[i] = json_integer_value(json_array_get(v, (size_t)i));
    return n < max ? n : max;
}

json_t *tth__json_ints(const int64_t *v, int n)
{
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}
