/* onnx_build.h: build small ONNX models in tests with the protoc-c bindings (so a test can
 * say exactly which graph, attribute or malformation it imports). Every allocation goes into
 * the builder's pool and is freed by ob_free. */
#ifndef TTH_ONNX_BUILD_H
#define TTH_ONNX_BUILD_H

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"

typedef struct ob {
    void **pool;
    size_t npool, cappool;
    Onnx__ModelProto model;
    Onnx__GraphProto graph;
    Onnx__OperatorSetIdProto opset;
    Onnx__OperatorSetIdProto *opsets[1];
} ob;

static inline void *ob_alloc(ob *b, size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (b->npool == b->cappool) {
        b->cappool = b->cappool ? b->cappool * 2 : 64;
        b->pool = realloc(b->pool, b->cappool * sizeof(void *));
    }
    b->pool[b->npool++] = p;
    return p;
}

static inline char *ob_str(ob *b, const char *s)
{
    char *p = ob_alloc(b, strlen(s) + 1);
    strcpy(p, s);
    return p;
}

/* Append to a protobuf-c repeated pointer field. */
#define OB_PUSH(b, arr, n, v)                                                     \
    do {                                                                          \
        void **na_ = ob_alloc((b), ((n) + 1) * sizeof(void *));                   \
        if ((n))                                                                  \
            memcpy(na_, (arr), (n) * sizeof(void *));                             \
        na_[(n)] = (v);                                                           \
        (arr) = (void *)na_;                                                      \
        (n)++;                                                                    \
    } while (0)

static inline void ob_init(ob *b, int64_t opset)
{
    memset(b, 0, sizeof *b);
    onnx__model_proto__init(&b->model);
    onnx__graph_proto__init(&b->graph);
    onnx__operator_set_id_proto__init(&b->opset);
    b->model.has_ir_version = 1;
    b->model.ir_version = 8;
    b->opset.domain = (char *)"";
    b->opset.has_version = 1;
    b->opset.version = opset;
    b->opsets[0] = &b->opset;
    b->model.n_opset_import = 1;
    b->model.opset_import = b->opsets;
    b->model.graph = &b->graph;
    b->graph.name = (char *)"g";
}

static inline void ob_free(ob *b)
{
    for (size_t i = 0; i < b->npool; i++)
        free(b->pool[i]);
    free(b->pool);
}

static inline Onnx__ValueInfoProto *ob_value_info(ob *b, const char *name, int elem, const int64_t *dims, int rank,
                                                  const char *dyn_param, int dyn_index)
{
    Onnx__ValueInfoProto *vi = ob_alloc(b, sizeof *vi);
    onnx__value_info_proto__init(vi);
    vi->name = ob_str(b, name);
    Onnx__TypeProto *tp = ob_alloc(b, sizeof *tp);
    onnx__type_proto__init(tp);
    Onnx__TypeProto__Tensor *tt = ob_alloc(b, sizeof *tt);
    onnx__type_proto__tensor__init(tt);
    tt->has_elem_type = 1;
    tt->elem_type = elem;
    Onnx__TensorShapeProto *sh = ob_alloc(b, sizeof *sh);
    onnx__tensor_shape_proto__init(sh);
    for (int i = 0; i < rank; i++) {
        Onnx__TensorShapeProto__Dimension *d = ob_alloc(b, sizeof *d);
        onnx__tensor_shape_proto__dimension__init(d);
        if (dyn_param && i == dyn_index) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = ob_str(b, dyn_param);
        } else {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = dims[i];
        }
        OB_PUSH(b, sh->dim, sh->n_dim, d);
    }
    tt->shape = sh;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    vi->type = tp;
    return vi;
}

/* A float32 graph input of the given shape. */
static inline void ob_input(ob *b, const char *name, const int64_t *dims, int rank)
{
    OB_PUSH(b, b->graph.input, b->graph.n_input, ob_value_info(b, name, 1, dims, rank, NULL, -1));
}

/* A model of opset 13 begun with one float32 graph input, x, of the given shape. */
static inline void ob_begin(ob *b, const int64_t *dims, int rank)
{
    ob_init(b, 13);
    ob_input(b, "x", dims, rank);
}

static inline void ob_output(ob *b, const char *name)
{
    Onnx__ValueInfoProto *vi = ob_alloc(b, sizeof *vi);
    onnx__value_info_proto__init(vi);
    vi->name = ob_str(b, name);
    OB_PUSH(b, b->graph.output, b->graph.n_output, vi);
}

/* Tensor proto: data_type ONNX number, raw little-endian bytes. */
static inline Onnx__TensorProto *ob_tensor(ob *b, const char *name, int dtype, const int64_t *dims, int rank,
                                           const void *raw, size_t raw_len)
{
    Onnx__TensorProto *t = ob_alloc(b, sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = ob_str(b, name);
    t->has_data_type = 1;
    t->data_type = dtype;
    t->n_dims = (size_t)rank;
    t->dims = ob_alloc(b, sizeof(int64_t) * (size_t)(rank ? rank : 1));
    if (rank)
        memcpy(t->dims, dims, sizeof(int64_t) * (size_t)rank);
    t->has_raw_data = 1;
    t->raw_data.len = raw_len;
    t->raw_data.data = ob_alloc(b, raw_len);
    if (raw_len)
        memcpy(t->raw_data.data, raw, raw_len);
    return t;
}

/* An initializer of ONNX element type dtype whose elements are elem_size bytes each. */
static inline void ob_init_raw(ob *b, const char *name, int dtype, size_t elem_size, const int64_t *dims, int rank,
                               const void *data)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= dims[i];
    OB_PUSH(b, b->graph.initializer, b->graph.n_initializer,
            ob_tensor(b, name, dtype, dims, rank, data, elem_size * (size_t)n));
}

static inline void ob_init_f32(ob *b, const char *name, const int64_t *dims, int rank, const float *data)
{
    ob_init_raw(b, name, 1, sizeof(float), dims, rank, data);
}

static inline void ob_init_i64(ob *b, const char *name, const int64_t *dims, int rank, const int64_t *data)
{
    ob_init_raw(b, name, 7, sizeof(int64_t), dims, rank, data);
}

static inline Onnx__NodeProto *ob_node(ob *b, const char *op, const char *name, const char *ins, const char *outs)
{
    Onnx__NodeProto *n = ob_alloc(b, sizeof *n);
    onnx__node_proto__init(n);
    n->op_type = ob_str(b, op);
    n->name = ob_str(b, name);
    const char *lists[2] = {ins, outs};
    for (int k = 0; k < 2; k++) {
        const char *p = lists[k];
        while (p && *p) {
            const char *q = strchr(p, ',');
            size_t len = q ? (size_t)(q - p) : strlen(p);
            char *s = ob_alloc(b, len + 1);
            memcpy(s, p, len);
            if (k == 0)
                OB_PUSH(b, n->input, n->n_input, s);
            else
                OB_PUSH(b, n->output, n->n_output, s);
            p = q ? q + 1 : NULL;
            if (q && !*p) { /* trailing empty entry */
                char *e = ob_alloc(b, 1);
                if (k == 0)
                    OB_PUSH(b, n->input, n->n_input, e);
                else
                    OB_PUSH(b, n->output, n->n_output, e);
            }
        }
    }
    OB_PUSH(b, b->graph.node, b->graph.n_node, n);
    return n;
}

static inline Onnx__AttributeProto *ob_attr(ob *b, Onnx__NodeProto *n, const char *name, int type)
{
    Onnx__AttributeProto *a = ob_alloc(b, sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = ob_str(b, name);
    a->has_type = 1;
    a->type = type;
    OB_PUSH(b, n->attribute, n->n_attribute, a);
    return a;
}

static inline void ob_attr_i(ob *b, Onnx__NodeProto *n, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = ob_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

static inline void ob_attr_f(ob *b, Onnx__NodeProto *n, const char *name, float v)
{
    Onnx__AttributeProto *a = ob_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a->has_f = 1;
    a->f = v;
}

static inline void ob_attr_s(ob *b, Onnx__NodeProto *n, const char *name, const char *v)
{
    Onnx__AttributeProto *a = ob_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    a->has_s = 1;
    a->s.len = strlen(v);
    a->s.data = (uint8_t *)ob_str(b, v);
}

static inline void ob_attr_ints(ob *b, Onnx__NodeProto *n, const char *name, const int64_t *v, size_t cnt)
{
    Onnx__AttributeProto *a = ob_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->n_ints = cnt;
    a->ints = ob_alloc(b, sizeof(int64_t) * (cnt ? cnt : 1));
    memcpy(a->ints, v, sizeof(int64_t) * cnt);
}

/* A Conv node with pads of pad on every side, strides of stride and group groups; an attribute
 * at its default (pad 0, stride 1, group 1) is left out. */
static inline Onnx__NodeProto *ob_conv(ob *b, const char *name, const char *ins, const char *out, int64_t pad,
                                       int64_t stride, int64_t group)
{
    Onnx__NodeProto *n = ob_node(b, "Conv", name, ins, out);
    if (pad)
        ob_attr_ints(b, n, "pads", (const int64_t[]){pad, pad, pad, pad}, 4);
    if (stride != 1)
        ob_attr_ints(b, n, "strides", (const int64_t[]){stride, stride}, 2);
    if (group != 1)
        ob_attr_i(b, n, "group", group);
    return n;
}

/* A pooling node (MaxPool, AveragePool ...) of a k x k window at strides of stride. */
static inline Onnx__NodeProto *ob_pool(ob *b, const char *op, const char *name, const char *in, const char *out,
                                       int64_t k, int64_t stride)
{
    Onnx__NodeProto *n = ob_node(b, op, name, in, out);
    ob_attr_ints(b, n, "kernel_shape", (const int64_t[]){k, k}, 2);
    ob_attr_ints(b, n, "strides", (const int64_t[]){stride, stride}, 2);
    return n;
}

/* Serialized model (malloc'd; free()). */
static inline uint8_t *ob_pack(ob *b, size_t *len)
{
    *len = onnx__model_proto__get_packed_size(&b->model);
    uint8_t *buf = malloc(*len ? *len : 1);
    onnx__model_proto__pack(&b->model, buf);
    return buf;
}

/* The serialized model (malloc'd), the builder freed: the end of a model-making function. */
static inline uint8_t *ob_done(ob *b, size_t *len)
{
    uint8_t *buf = ob_pack(b, len);
    ob_free(b);
    return buf;
}

#endif
