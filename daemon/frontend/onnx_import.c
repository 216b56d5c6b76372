/* onnx_import.c: ONNX ModelProto → Relay "main". Parses with the protoc-c bindings generated
 * from Debian's onnx.proto, turns initializers into constants and graph inputs into params,
 * then imports the nodes in order through the operator table (onnx_ops.c, docs/operators.md "The operator table"). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "onnx_import.h"
#include "tth/target.h"

int tth__onnx_fail(tth_onnx_ctx *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tth_diag_vset(c->diag, code, c->where, fmt, ap);
    va_end(ap);
    return code;
}

int tth__onnx_shape_ok(const int64_t *shape, int rank)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 0 || (shape[i] && n > TTH_IMPORT_MAX_TENSOR / shape[i]))
            return 0;
        n *= shape[i];
    }
    return n <= TTH_IMPORT_MAX_TENSOR;
}

/* ---- name → value table (open addressing) ---- */

typedef struct valtab {
    const char **keys;
    tth_rexpr **vals;
    size_t cap, n;
} valtab;

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static int valtab_grow(valtab *t)
{
    size_t ncap = t->cap ? t->cap * 2 : 64;
    const char **nk = calloc(ncap, sizeof(*nk));
    tth_rexpr **nv = calloc(ncap, sizeof(*nv));
    if (!nk || !nv) {
        free(nk);
        free(nv);
        return TTH_ENOMEM;
    }
    for (size_t i = 0; i < t->cap; i++)
        if (t->keys[i]) {
            size_t j = hash_str(t->keys[i]) & (ncap - 1);
            while (nk[j])
                j = (j + 1) & (ncap - 1);
            nk[j] = t->keys[i];
            nv[j] = t->vals[i];
        }
    free(t->keys);
    free(t->vals);
    t->keys = nk;
    t->vals = nv;
    t->cap = ncap;
    return 0;
}

static int valtab_put(valtab *t, const char *k, tth_rexpr *v)
{
    if ((t->n + 1) * 2 > t->cap && valtab_grow(t))
        return TTH_ENOMEM;
    size_t j = hash_str(k) & (t->cap - 1);
    while (t->keys[j] && strcmp(t->keys[j], k))
        j = (j + 1) & (t->cap - 1);
    if (!t->keys[j])
        t->n++;
    t->keys[j] = k;
    t->vals[j] = v; /* a later definition shadows an earlier one (SSA is not enforced by all exporters) */
    return 0;
}

static tth_rexpr *valtab_get(const valtab *t, const char *k)
{
    if (!t->cap)
        return NULL;
    size_t j = hash_str(k) & (t->cap - 1);
    while (t->keys[j]) {
        if (!strcmp(t->keys[j], k))
            return t->vals[j];
        j = (j + 1) & (t->cap - 1);
    }
    return NULL;
}

tth_rexpr *tth__onnx_value(tth_onnx_ctx *c, const char *name)
{
    return c->vals && name ? valtab_get(c->vals, name) : NULL;
}

static void valtab_free(valtab *t)
{
    free(t->keys);
    free(t->vals);
}

/* ---- graph inputs ---- */

/* `shape` (options.input_shapes[name], or NULL): the shape to give a graph input whose
 * dimensions the model leaves open; fixed dimensions must agree with it. */
static int input_type(tth_onnx_ctx *c, const Onnx__ValueInfoProto *vi, const json_t *shape, tth_ttype *ty)
{
    const char *name = vi->name ? vi->name : "";
    snprintf(c->where, sizeof c->where, "input '%s'", name);
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "graph input '%s' is not a tensor", name);
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    ty->dtype = tth__onnx_dtype(tt->has_elem_type ? tt->elem_type : 0);
    if (ty->dtype == TTH_DTYPE_INVALID) {
        char type[64];
        tth__onnx_type_text(tt->has_elem_type ? tt->elem_type : 0, type, sizeof type);
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "graph input '%s' has element type %s, which tth does not "
                              "take (docs/operators.md, \"Element types\")", name, type);
    }
    if (!tt->shape && !shape)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "graph input '%s' has no shape (dynamic rank)", name);
    size_t rank = tt->shape ? tt->shape->n_dim : json_array_size(shape);
    if (rank > TTH_MAX_RANK)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "graph input '%s' has rank %zu (at most %d)", name, rank,
                              TTH_MAX_RANK);
    if (shape && json_array_size(shape) != rank)
        return tth__onnx_fail(c, TTH_EINVAL, "the shape given for '%s' has %zu dimensions; the input has %zu", name,
                              json_array_size(shape), rank);
    ty->rank = (int32_t)rank;
    for (size_t i = 0; i < rank; i++) {
        const Onnx__TensorShapeProto__Dimension *d = tt->shape ? tt->shape->dim[i] : NULL;
        const json_t *given = json_array_get(shape, i);
        int fixed = d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        if (given) {
            if (!json_is_integer(given) || json_integer_value(given) < 0 ||
                json_integer_value(given) > ((json_int_t)1 << 32))
                return tth__onnx_fail(c, TTH_EINVAL, "the shape given for '%s' has a bad dimension %zu", name, i);
            if (fixed && d->dim_value != json_integer_value(given))
                return tth__onnx_fail(c, TTH_EINVAL, "the shape given for '%s' has %lld in dimension %zu; the model "
                                      "fixes it to %lld", name, (long long)json_integer_value(given), i,
                                      (long long)d->dim_value);
            ty->shape[i] = json_integer_value(given);
            continue;
        }
        if (!fixed) {
            const char *sym = d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                              d->dim_param ? d->dim_param : "unknown";
            int code = tth__onnx_fail(c, TTH_EUNSUPPORTED, "graph input '%s' has a dynamic dimension %zu ('%s')",
                                      name, i, sym);
            tth_diag_hint(c->diag, "give every dimension at compile time: tthctl compile --input-shape %s=D0,D1,... "
                          "(or export the model with static input shapes)", name);
            return code;
        }
        if (d->dim_value < 0 || d->dim_value > ((int64_t)1 << 32))
            return tth__onnx_fail(c, TTH_EMODEL, "graph input '%s' has a bad dimension %lld", name,
                                  (long long)d->dim_value);
        ty->shape[i] = d->dim_value;
    }
    if (!tth__onnx_shape_ok(ty->shape, ty->rank))
        return tth__onnx_fail(c, TTH_ELIMIT, "graph input '%s' has more than %lld elements", name,
                              (long long)TTH_IMPORT_MAX_TENSOR);
    return 0;
}

/* ---- nodes ---- */

/* The table row importing node n's operator, from the rows of its domain (the default one or
 * ai.onnx.preview.training), which the model must import, at the model's opset of that domain. */
static int find_op(tth_onnx_ctx *c, const Onnx__NodeProto *n, const tth_onnx_op **entry)
{
    const char *op = n->op_type ? n->op_type : "";
    if (n->domain && !strcmp(n->domain, TTH_ONNX_TRAINING_DOMAIN)) {
        if (!c->training)
            return tth__onnx_fail(c, TTH_EMODEL, "operator '%s' of domain '%s', which the model does not import", op,
                                  n->domain);
        return tth__onnx_op_row(c, 1, op, entry);
    }
    if (n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx"))
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported operator '%s' (domain '%s')", op, n->domain);
    if (!c->opset)
        return tth__onnx_fail(c, TTH_EMODEL, "operator '%s' of the default ONNX operator set, which the model "
                              "does not import", op);
    return tth__onnx_op_row(c, 0, op, entry);
}

static int import_node(tth_onnx_ctx *c, valtab *vals, const Onnx__NodeProto *n)
{
    const char *op = n->op_type ? n->op_type : "";
    const char *nm = (n->name && n->name[0]) ? n->name : (n->n_output && n->output[0] ? n->output[0] : "");
    snprintf(c->where, sizeof c->where, "node '%s' (%s)", nm, op);
    c->node = n;
    tth_relay_set_span(c->m, tth_arena_strdup(c->m->arena, nm));
    if (c->ext && c->ext->node_outputs && nm[0]) {
        json_t *outs = json_array();
        for (size_t i = 0; outs && i < n->n_output; i++)
            if (n->output[i] && n->output[i][0])
                json_array_append_new(outs, json_string(n->output[i])); /* NULL (skipped) if not UTF-8 */
        if (outs)
            json_object_set_new(c->ext->node_outputs, nm, outs);
    }
    const tth_onnx_op *entry = NULL;
    int rc = find_op(c, n, &entry);
    if (rc)
        return rc;
    c->version = entry->since;
    c->arg = entry->arg;
    if (n->n_input > 64 || n->n_output > 64)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "node with more than 64 inputs or outputs");
    tth_rexpr *in[64] = {0}, *out[64] = {0};
    for (size_t i = 0; i < n->n_input; i++) {
        if (!n->input[i] || !n->input[i][0])
            continue; /* absent optional input */
        in[i] = valtab_get(vals, n->input[i]);
        if (!in[i])
            return tth__onnx_fail(c, TTH_EMODEL, "input '%s' is not defined before this node", n->input[i]);
    }
    rc = entry->fn(c, in, n->n_input, out, n->n_output);
    if (rc) {
        /* keep the node as the location, whatever the builder wrote there */
        if (c->diag) {
            if (!c->diag->code)
                tth_diag_set(c->diag, rc, c->where, "importing failed");
            snprintf(c->diag->location, sizeof c->diag->location, "%s", c->where);
        }
        return rc;
    }
    for (size_t i = 0; i < n->n_output; i++) {
        if (!n->output[i] || !n->output[i][0] || !out[i])
            continue;
        if (valtab_put(vals, n->output[i], out[i]))
            return tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
    }
    return 0;
}

/* A value given at compile time for a graph input (options.bind; docs/tthctl.md "--bind"):
 * {"dtype": "int64", "shape": [...], "data": [numbers, row-major]}. */
static int bind_tensor(tth_onnx_ctx *c, const char *name, const json_t *v, tth_tensor **out)
{
    snprintf(c->where, sizeof c->where, "bind '%s'", name);
    const json_t *shape = json_object_get(v, "shape"), *data = json_object_get(v, "data");
    tth_ttype ty = {.dtype = tth_dtype_from_name(json_string_value(json_object_get(v, "dtype")))};
    if (ty.dtype == TTH_DTYPE_INVALID || ty.dtype == TTH_F16 || ty.dtype == TTH_BF16)
        return tth__onnx_fail(c, TTH_EINVAL, "the value bound to '%s' has no dtype tth can bind (float32, float64, "
                              "int8..int64, uint8..uint64, bool)", name);
    if (!json_is_array(shape) || json_array_size(shape) > TTH_MAX_RANK || !json_is_array(data))
        return tth__onnx_fail(c, TTH_EINVAL, "the value bound to '%s' needs a shape (at most %d dimensions) and data",
                              name, TTH_MAX_RANK);
    ty.rank = (int32_t)json_array_size(shape);
    for (int32_t i = 0; i < ty.rank; i++) {
        const json_t *d = json_array_get(shape, (size_t)i);
        if (!json_is_integer(d) || json_integer_value(d) < 0 || json_integer_value(d) > ((json_int_t)1 << 32))
            return tth__onnx_fail(c, TTH_EINVAL, "the value bound to '%s' has a bad dimension %d", name, (int)i);
        ty.shape[i] = json_integer_value(d);
    }
    if (!tth__onnx_shape_ok(ty.shape, ty.rank))
        return tth__onnx_fail(c, TTH_ELIMIT, "the value bound to '%s' is too large", name);
    int64_t n = tth_ttype_numel(&ty);
    if ((int64_t)json_array_size(data) != n)
        return tth__onnx_fail(c, TTH_EINVAL, "the value bound to '%s' has %zu numbers for %lld elements", name,
                              json_array_size(data), (long long)n);
    tth_tensor *t = tth_tensor_new(&ty, NULL);
    if (!t)
        return tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        const json_t *x = json_array_get(data, (size_t)i);
        if (!json_is_number(x)) {
            tth_tensor_unref(t);
            return tth__onnx_fail(c, TTH_EINVAL, "element %lld of the value bound to '%s' is not a number",
                                  (long long)i, name);
        }
        double d = json_number_value(x);
        json_int_t k = json_is_integer(x) ? json_integer_value(x) : (json_int_t)d;
        switch (ty.dtype) {
        case TTH_F32: ((float *)t->data)[i] = (float)d; break;
        case TTH_F64: ((double *)t->data)[i] = d; break;
        case TTH_I8: ((int8_t *)t->data)[i] = (int8_t)k; break;
        case TTH_I16: ((int16_t *)t->data)[i] = (int16_t)k; break;
        case TTH_I32: ((int32_t *)t->data)[i] = (int32_t)k; break;
        case TTH_I64: ((int64_t *)t->data)[i] = (int64_t)k; break;
        case TTH_U8: ((uint8_t *)t->data)[i] = (uint8_t)k; break;
        case TTH_U16: ((uint16_t *)t->data)[i] = (uint16_t)k; break;
        case TTH_U32: ((uint32_t *)t->data)[i] = (uint32_t)k; break;
        case TTH_U64: ((uint64_t *)t->data)[i] = (uint64_t)k; break;
        case TTH_BOOL: ((uint8_t *)t->data)[i] = k != 0; break;
        default: break;
        }
    }
    *out = t;
    return 0;
}

/* The bound value must have the input's element type and rank, and its size in every
 * dimension the model fixes. */
static int bind_matches(tth_onnx_ctx *c, const Onnx__ValueInfoProto *vi, const tth_tensor *t)
{
    const Onnx__TypeProto *tp = vi->type;
    const Onnx__TypeProto__Tensor *tt = tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ? tp->tensor_type
                                                                                                    : NULL;
    char have[96];
    tth_ttype_format(&t->type, have, sizeof have);
    if (!tt || tth__onnx_dtype(tt->has_elem_type ? tt->elem_type : 0) != t->type.dtype)
        return tth__onnx_fail(c, TTH_EINVAL, "the value bound to '%s' is %s; the input's element type is %s",
                              vi->name, have, tt ? tth_dtype_name(tth__onnx_dtype(tt->elem_type)) : "not a tensor's");
    if (tt->shape) {
        if ((int32_t)tt->shape->n_dim != t->type.rank)
            return tth__onnx_fail(c, TTH_EINVAL, "the value bound to '%s' is %s; the input has %zu dimensions",
                                  vi->name, have, tt->shape->n_dim);
        for (size_t i = 0; i < tt->shape->n_dim; i++) {
            const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
            if (d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
                d->dim_value != t->type.shape[i])
                return tth__onnx_fail(c, TTH_EINVAL, "the value bound to '%s' is %s; the input's dimension %zu is %lld",
                                      vi->name, have, i, (long long)d->dim_value);
        }
    }
    return 0;
}

/* Every bound name (or name given a shape: `what`) must be a graph input that is not an
 * initializer. */
static int bind_names_known(tth_onnx_ctx *c, const Onnx__GraphProto *g, const json_t *bind, const char *what)
{
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)bind, key, v) {
        size_t i = 0;
        while (i < g->n_input && !(g->input[i] && g->input[i]->name && strcmp(g->input[i]->name, key) == 0))
            i++;
        int initializer = 0;
        for (size_t k = 0; k < g->n_initializer; k++)
            initializer |= g->initializer[k] && g->initializer[k]->name && strcmp(g->initializer[k]->name, key) == 0;
        if (i < g->n_input && !initializer)
            continue;
        snprintf(c->where, sizeof c->where, "%s '%s'", what, key);
        int rc = tth__onnx_fail(c, TTH_EINVAL, initializer ? "'%s' is a constant of the model, not an input"
                                                           : "the model has no input '%s'", key);
        const char **names = calloc(g->n_input + 1, sizeof *names);
        size_t n = 0;
        for (size_t k = 0; names && k < g->n_input; k++)
            if (g->input[k] && g->input[k]->name)
                names[n++] = g->input[k]->name;
        char near[256], hint[300];
        if (names && tth_nearest_names(key, names, n, 3, near, sizeof near) > 0) {
            snprintf(hint, sizeof hint, "did you mean %s?", near);
            tth_diag_hint(c->diag, "%s", hint);
        }
        free(names);
        return rc;
    }
    return 0;
}

/* A graph's initializers as constants, under their names. */
/* release: the main graph's, read once (a subgraph's are read again for each iteration) */
static int import_initializers(tth_onnx_ctx *c, valtab *vals, const Onnx__GraphProto *g, int release)
{
    tth_relay_module *m = c->m;
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *tp = g->initializer[i];
        const char *name = tp && tp->name ? tp->name : "";
        snprintf(c->where, sizeof c->where, "initializer '%s'", name);
        if (!name[0])
            return tth__onnx_fail(c, TTH_EMODEL, "initializer without a name");
        tth_tensor *t = NULL;
        int rc;
        const tth__onnx_span *sp = release && i < c->nspans && c->spans[i].len ? &c->spans[i] : NULL;
        if (sp && tp->n_external_data == 0 && !(tp->has_data_location && tp->data_location != 0)) {
            /* its payload, left out of the parsed skeleton, from the mapping; its pages go back */
            Onnx__TensorProto view = *tp;
            view.has_raw_data = 1;
            view.raw_data.data = (uint8_t *)c->model_bytes + sp->off;
            view.raw_data.len = sp->len;
            rc = tth__onnx_tensor_from_proto(&view, c->where, c->ext, &t, c->diag);
            tth__onnx_give_back(c->model_bytes + sp->off, sp->len);
        } else {
            rc = tth__onnx_tensor_from_proto(tp, c->where, c->ext, &t, c->diag);
        }
        if (rc)
            return rc;
        if (!tth__onnx_shape_ok(t->type.shape, t->type.rank)) {
            tth_tensor_unref(t);
            return tth__onnx_fail(c, TTH_ELIMIT, "initializer too large");
        }
        tth_rexpr *k = tth_relay_const(m, t, tth_arena_strdup(m->arena, name));
        if (!k || valtab_put(vals, name, k))
            return tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
        /* the message's copy of the values goes now, not with the whole message: a large model's
         * weights are not held twice (nothing reads the main graph's initializers from the
         * message again; protobuf-c's free skips a NULL) */
        if (!release)
            continue;
        Onnx__TensorProto *own = (Onnx__TensorProto *)tp;
        free(own->raw_data.data);
        own->raw_data.data = NULL;
        own->raw_data.len = 0;
        free(own->float_data);
        own->float_data = NULL;
        own->n_float_data = 0;
    }
    return 0;
}

/* The body of a subgraph (an If's branch, one iteration of a Loop or Scan; docs/operators.md
 * "Control flow"): its inputs bound to `inputs`, its initializers and nodes imported among the
 * outer graph's values, which it may use by name (a later iteration's values shadow the earlier
 * ones); its outputs in outs. The node being imported stays the current one for the caller's
 * diagnostics. */
int tth__onnx_import_body(tth_onnx_ctx *c, const Onnx__GraphProto *g, tth_rexpr *const *inputs, size_t ninputs,
                          tth_rexpr **outs, size_t max_outs)
{
    const Onnx__NodeProto *node = c->node;
    int64_t version = c->version;
    int arg = c->arg;
    char where[sizeof c->where];
    snprintf(where, sizeof where, "%s", c->where);
    valtab *vals = c->vals;
    int rc = vals ? 0 : tth__onnx_fail(c, TTH_EINTERNAL, "no values to import a subgraph among");
    if (!rc && g->n_sparse_initializer)
        rc = tth__onnx_fail(c, TTH_EUNSUPPORTED, "sparse initializers are not supported");
    if (!rc && (g->n_output != max_outs || g->n_input != ninputs))
        rc = tth__onnx_fail(c, TTH_EMODEL, "subgraph '%s' has %zu inputs and %zu outputs, the node gives %zu and takes %zu",
                            g->name ? g->name : "", g->n_input, g->n_output, ninputs, max_outs);
    for (size_t i = 0; !rc && i < ninputs; i++) {
        const char *name = g->input[i] && g->input[i]->name ? g->input[i]->name : "";
        if (!name[0] || !inputs[i] || valtab_put(vals, name, inputs[i]))
            rc = tth__onnx_fail(c, inputs[i] && name[0] ? TTH_ENOMEM : TTH_EMODEL, "subgraph input %zu: %s", i,
                                name[0] ? (inputs[i] ? "out of memory" : "no value for it") : "no name");
    }
    if (!rc)
        rc = import_initializers(c, vals, g, 0);
    for (size_t i = 0; !rc && i < g->n_node; i++)
        rc = g->node[i] ? import_node(c, vals, g->node[i]) : tth__onnx_fail(c, TTH_EMODEL, "empty node %zu", i);
    c->node = node;
    c->version = version;
    c->arg = arg;
    for (size_t i = 0; !rc && i < g->n_output; i++) {
        const char *name = g->output[i] && g->output[i]->name ? g->output[i]->name : "";
        outs[i] = valtab_get(vals, name);
        if (!outs[i] || outs[i]->type.nfields >= 0) {
            snprintf(c->where, sizeof c->where, "%s", where);
            rc = tth__onnx_fail(c, outs[i] ? TTH_EUNSUPPORTED : TTH_EMODEL,
                                outs[i] ? "subgraph output '%s' is not a tensor" : "subgraph output '%s' is never computed",
                                name);
        }
    }
    if (!rc)
        snprintf(c->where, sizeof c->where, "%s", where);
    return rc;
}

/* ---- constants that die while the main graph is imported ----
 * A weight that its only ONNX consumer folded into a new constant (Gemm's transB transposes its
 * weight; a Cast of float16 weights to float32) is dead once that consumer is imported: its data
 * is freed then, not when the module is, so the weight and its new form are not both in memory
 * for the rest of the import (docs/tthctl.md, "Large models"). A value is dead when
 * no ONNX node to come reads its name (uses counts every node input of the main graph and of
 * every subgraph, and the graph outputs), and no Relay node made by the nodes that read it holds
 * it or its tensor. */
typedef struct use_entry {
    const char *name;
    int left;      /* ONNX reads still to come */
    int escaped;   /* a Relay node made by a reader holds it */
} use_entry;

typedef struct usetab {
    use_entry *v;
    size_t cap, n;
} usetab;

static use_entry *use_find(usetab *t, const char *k, int add)
{
    if (add && (t->n + 1) * 2 > t->cap) {
        size_t ncap = t->cap ? 2 * t->cap : 256;
        use_entry *nv = calloc(ncap, sizeof *nv);
        if (!nv)
            return NULL;
        for (size_t i = 0; i < t->cap; i++)
            if (t->v[i].name) {
                size_t h = (size_t)hash_str(t->v[i].name) & (ncap - 1);
                while (nv[h].name)
                    h = (h + 1) & (ncap - 1);
                nv[h] = t->v[i];
            }
        free(t->v);
        t->v = nv;
        t->cap = ncap;
    }
    if (!t->cap)
        return NULL;
    size_t h = (size_t)hash_str(k) & (t->cap - 1);
    while (t->v[h].name) {
        if (strcmp(t->v[h].name, k) == 0)
            return &t->v[h];
        h = (h + 1) & (t->cap - 1);
    }
    if (!add)
        return NULL;
    t->v[h].name = k;
    t->n++;
    return &t->v[h];
}

static int count_uses(usetab *t, const Onnx__GraphProto *g, int depth)
{
    if (!g || depth > 64)
        return 0;
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        for (size_t k = 0; n && k < n->n_input; k++) {
            use_entry *e = n->input[k] && n->input[k][0] ? use_find(t, n->input[k], 1) : NULL;
            if (n->input[k] && n->input[k][0] && !e)
                return TTH_ENOMEM;
            if (e)
                e->left++;
        }
        for (size_t a = 0; n && a < n->n_attribute; a++) {
            const Onnx__AttributeProto *at = n->attribute[a];
            if (at && count_uses(t, at->g, depth + 1))
                return TTH_ENOMEM;
            for (size_t k = 0; at && k < at->n_graphs; k++)
                if (count_uses(t, at->graphs[k], depth + 1))
                    return TTH_ENOMEM;
        }
    }
    for (size_t i = 0; i < g->n_output; i++) {
        use_entry *e = g->output[i] && g->output[i]->name ? use_find(t, g->output[i]->name, 1) : NULL;
        if (e)
            e->left += 1 << 20; /* read by the caller: never dead */
    }
    return 0;
}

/* The constant tensors the Relay nodes made since node id `since` hold, reached from the node's
 * outputs: each such node visited once (an LSTM's steps share their nodes), the constants they
 * take as operands and the outputs that are constants themselves. NULL on OOM (then nothing is
 * dropped). Freed by the caller; *n set. */
static const tth_tensor **held_constants(tth_relay_module *m, tth_rexpr *const *outs, size_t nouts, uint32_t since,
                                         size_t *n)
{
    uint32_t end = tth_relay_next_id(m);
    size_t span = end > since ? end - since : 0, cap = 16, top = 0, cap_stack = nouts + 64;
    unsigned char *seen = calloc(span + 1, 1);
    const tth_tensor **held = malloc(cap * sizeof *held);
    const tth_rexpr **stack = malloc(cap_stack * sizeof *stack);
    *n = 0;
    int oom = !seen || !held || !stack;
    for (size_t i = 0; i < nouts && !oom; i++)
        if (outs[i])
            stack[top++] = outs[i];
    while (top && !oom) {
        const tth_rexpr *e = stack[--top];
        if (e->kind == TTH_REXPR_CONST) {
            if (*n == cap) {
                const tth_tensor **nh = realloc(held, 2 * cap * sizeof *nh);
                if (!nh) {
                    oom = 1;
                    break;
                }
                held = nh;
                cap *= 2;
            }
            held[(*n)++] = e->u.constant.value;
        }
        if (e->id < since || e->id >= end || seen[e->id - since])
            continue; /* made before this node (checked then), or seen */
        seen[e->id - since] = 1;
        tth_rexpr *const *args;
        size_t na = tth__node_args(e, &args);
        for (size_t i = 0; i < na && !oom; i++) {
            if (top == cap_stack) {
                const tth_rexpr **ns = realloc(stack, 2 * cap_stack * sizeof *ns);
                if (!ns) {
                    oom = 1;
                    break;
                }
                stack = ns;
                cap_stack *= 2;
            }
            stack[top++] = args[i];
        }
    }
    free(seen);
    free(stack);
    if (oom) {
        free(held);
        return NULL;
    }
    return held;
}

typedef struct dead_list {
    const tth_tensor **t;
    size_t n, cap, bytes;
} dead_list;

static int keep_alive(void *ctx, const tth_tensor *t)
{
    const dead_list *d = ctx;
    for (size_t i = 0; i < d->n; i++)
        if (d->t[i] == t)
            return 0;
    return 1;
}

/* After node n (its Relay nodes numbered from `since`): note the constants its inputs named
 * that are now dead, freeing them by the 16 MiB */
static void note_dead(tth_onnx_ctx *c, valtab *vals, usetab *uses, dead_list *dead, const Onnx__NodeProto *n,
                      uint32_t since)
{
    tth_rexpr *outs[64] = {0};
    for (size_t o = 0; o < n->n_output && o < 64; o++)
        if (n->output[o] && n->output[o][0])
            outs[o] = valtab_get(vals, n->output[o]);
    size_t nheld = 0;
    const tth_tensor **held = NULL;
    int walked = 0;
    for (size_t i = 0; i < n->n_input; i++) {
        const char *name = n->input[i];
        use_entry *e = name && name[0] ? use_find(uses, name, 0) : NULL;
        tth_rexpr *k = e ? valtab_get(vals, name) : NULL;
        if (!k || k->kind != TTH_REXPR_CONST || !k->u.constant.value)
            continue;
        if (!walked) { /* once per node, and only for a node that reads a constant */
            walked = 1;
            held = held_constants(c->m, outs, n->n_output < 64 ? n->n_output : 64, since, &nheld);
        }
        if (!held)
            e->escaped = 1; /* out of memory: kept */
        for (size_t h = 0; h < nheld && !e->escaped; h++)
            e->escaped = held[h] == k->u.constant.value;
        if (--e->left != 0 || e->escaped)
            continue;
        if (dead->n == dead->cap) {
            size_t cap = dead->cap ? 2 * dead->cap : 16;
            const tth_tensor **nt = realloc(dead->t, cap * sizeof *nt);
            if (!nt)
                return; /* freed with the module instead */
            dead->t = nt;
            dead->cap = cap;
        }
        dead->t[dead->n++] = k->u.constant.value;
        dead->bytes += k->u.constant.value->nbytes;
    }
    free(held);
    if (dead->bytes >= (16u << 20)) {
        tth_relay_module_drop_constants_if(c->m, keep_alive, dead);
        dead->n = dead->bytes = 0;
    }
}

static int import_graph(tth_onnx_ctx *c, const Onnx__GraphProto *g, const char *model_name, const json_t *bind,
                        const json_t *input_shapes)
{
    valtab vals = {0};
    int rc = 0;
    tth_relay_module *m = c->m;
    c->vals = &vals;
    tth_rexpr **params = calloc(g->n_input + 1, sizeof(*params));
    tth_rexpr **outs = calloc(g->n_output + 1, sizeof(*outs));
    json_t *in_names = json_array(), *out_names = json_array();
    size_t np = 0;
    if (!params || !outs || !in_names || !out_names) {
        rc = tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
        goto done;
    }
    /* initializers → constants */
    if ((rc = import_initializers(c, &vals, g, 1)) != 0)
        goto done;
    if (g->n_sparse_initializer) {
        snprintf(c->where, sizeof c->where, "graph '%s'", g->name ? g->name : "");
        rc = tth__onnx_fail(c, TTH_EUNSUPPORTED, "sparse initializers are not supported");
        goto done;
    }
    if (bind && (rc = bind_names_known(c, g, bind, "bind")) != 0)
        goto done;
    if (input_shapes && (rc = bind_names_known(c, g, input_shapes, "input shape")) != 0)
        goto done;
    /* inputs that are not initializers → params (or constants, when bound) */
    for (size_t i = 0; i < g->n_input; i++) {
        const Onnx__ValueInfoProto *vi = g->input[i];
        if (!vi || !vi->name || !vi->name[0]) {
            snprintf(c->where, sizeof c->where, "graph input %zu", i);
            rc = tth__onnx_fail(c, TTH_EMODEL, "graph input without a name");
            goto done;
        }
        if (valtab_get(&vals, vi->name))
            continue;
        const json_t *bv = json_object_get(bind, vi->name);
        if (bv) { /* bound at compile time: a constant named as the input */
            tth_tensor *t = NULL;
            rc = bind_tensor(c, vi->name, bv, &t);
            if (!rc && (rc = bind_matches(c, vi, t)) != 0)
                tth_tensor_unref(t);
            if (rc)
                goto done;
            tth_rexpr *k = tth_relay_const(m, t, tth_arena_strdup(m->arena, vi->name));
            if (!k || valtab_put(&vals, vi->name, k)) {
                rc = tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
                goto done;
            }
            continue;
        }
        tth_ttype ty;
        rc = input_type(c, vi, json_object_get(input_shapes, vi->name), &ty);
        if (rc)
            goto done;
        tth_rexpr *v = tth_relay_var(m, tth_arena_strdup(m->arena, vi->name), &ty);
        if (!v || valtab_put(&vals, vi->name, v)) {
            rc = tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
            goto done;
        }
        params[np++] = v;
        json_t *nm = json_string(vi->name);
        if (!nm) {
            snprintf(c->where, sizeof c->where, "graph input %zu", i);
            rc = tth__onnx_fail(c, TTH_EMODEL, "the name of graph input %zu is not valid UTF-8", i);
            goto done;
        }
        json_array_append_new(in_names, nm);
    }
    usetab uses = {0};
    dead_list dead = {0};
    int track = count_uses(&uses, g, 0) == 0;
    for (size_t i = 0; i < g->n_node && !rc; i++) {
        if (!g->node[i]) {
            rc = tth_diag_set(c->diag, TTH_EMODEL, NULL, "empty node %zu", i);
            break;
        }
        uint32_t since = tth_relay_next_id(m);
        rc = import_node(c, &vals, g->node[i]);
        if (!rc && track)
            note_dead(c, &vals, &uses, &dead, g->node[i], since);
    }
    if (!rc && dead.n)
        tth_relay_module_drop_constants_if(m, keep_alive, &dead);
    free(uses.v);
    free(dead.t);
    if (rc)
        goto done;
    tth_relay_set_span(m, NULL);
    if (g->n_output == 0) {
        rc = tth_diag_set(c->diag, TTH_EMODEL, "graph", "the graph has no outputs");
        goto done;
    }
    for (size_t i = 0; i < g->n_output; i++) {
        const char *name = g->output[i] && g->output[i]->name ? g->output[i]->name : "";
        outs[i] = valtab_get(&vals, name);
        if (!outs[i] || outs[i]->type.nfields >= 0) {
            snprintf(c->where, sizeof c->where, "output '%s'", name);
            rc = tth__onnx_fail(c, outs[i] ? TTH_EUNSUPPORTED : TTH_EMODEL,
                                outs[i] ? "graph output '%s' is not a tensor" : "graph output '%s' is never computed",
                                name);
            goto done;
        }
        /* two outputs of one name, or an input passed through as an output, would leave one of
         * them without a buffer of its own (one would silently win) */
        for (size_t j = 0; j < i; j++)
            if (strcmp(name, g->output[j] && g->output[j]->name ? g->output[j]->name : "") == 0) {
                snprintf(c->where, sizeof c->where, "output '%s'", name);
                rc = tth__onnx_fail(c, TTH_EMODEL, "graph output '%s' is listed twice (outputs %zu and %zu)", name, j, i);
                goto done;
            }
        for (size_t j = 0; j < g->n_input; j++)
            if (g->input[j] && g->input[j]->name && strcmp(name, g->input[j]->name) == 0) {
                snprintf(c->where, sizeof c->where, "output '%s'", name);
                rc = tth__onnx_fail(c, TTH_EMODEL, "graph output '%s' is also a graph input", name);
                tth_diag_hint(c->diag, "a model that passes an input through names the copy: an Identity node with an "
                                       "output of its own");
                goto done;
            }
        json_t *nm = json_string(name);
        if (!nm) {
            snprintf(c->where, sizeof c->where, "graph output %zu", i);
            rc = tth__onnx_fail(c, TTH_EMODEL, "the name of graph output %zu is not valid UTF-8", i);
            goto done;
        }
        json_array_append_new(out_names, nm);
    }
    tth_rexpr *body = outs[0];
    if (g->n_output > 1) {
        body = tth_relay_tuple(m, outs, g->n_output, c->diag);
        if (!body) {
            rc = c->diag && c->diag->code ? c->diag->code : TTH_EINTERNAL;
            goto done;
        }
    }
    json_t *attrs = json_object();
    json_object_set_new(attrs, "input_names", in_names);
    json_object_set_new(attrs, "output_names", out_names);
    in_names = out_names = NULL;
    if (!tth_relay_function_add(m, "main", params, np, body, attrs, c->diag)) {
        rc = c->diag && c->diag->code ? c->diag->code : TTH_EINTERNAL;
        goto done;
    }
    (void)model_name;
done:
    json_decref(in_names);
    json_decref(out_names);
    free(params);
    free(outs);
    valtab_free(&vals);
    c->vals = NULL;
    return rc;
}

/* protobuf-c recurses once per nested message (Graph → Node → Attribute → Graph ...), so a
 * crafted model could overflow the stack: the wire bytes are walked first, with the generated
 * descriptors saying which fields are messages, and nesting deeper than this is refused. Real
 * models stay far below it. */
#define ONNX_MAX_NESTING 64

static int pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return 0;
    }
    return -1;
}

/* -1 when some message nests deeper than ONNX_MAX_NESTING; 0 otherwise (including malformed
 * input, which protobuf-c then reports). */
static int pb_check_nesting(const uint8_t *p, const uint8_t *end, const ProtobufCMessageDescriptor *desc, int depth)
{
    if (depth > ONNX_MAX_NESTING)
        return -1;
    while (p < end) {
        uint64_t key, v;
        if (pb_varint(&p, end, &key))
            return 0;
        switch (key & 7) {
        case 0:
            if (pb_varint(&p, end, &v))
                return 0;
            break;
        case 1:
            if (end - p < 8)
                return 0;
            p += 8;
            break;
        case 5:
            if (end - p < 4)
                return 0;
            p += 4;
            break;
        case 2: {
            if (pb_varint(&p, end, &v) || v > (uint64_t)(end - p))
                return 0;
            const ProtobufCFieldDescriptor *f =
                key >> 3 <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(desc, (unsigned)(key >> 3)) : NULL;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE && f->descriptor &&
                pb_check_nesting(p, p + v, f->descriptor, depth + 1))
                return -1;
            p += v;
            break;
        }
        default:
            return 0;
        }
    }
    return 0;
}

int tth_onnx_import(const uint8_t *bytes, size_t len, const char *model_name, tth_relay_module **out,
                    tth_diag *diag)
{
    return tth_onnx_import_bound(bytes, len, model_name, NULL, out, diag);
}

int tth_onnx_import_bound(const uint8_t *bytes, size_t len, const char *model_name, const json_t *bind,
                          tth_relay_module **out, tth_diag *diag)
{
    return tth_onnx_import_with(bytes, len, model_name, bind, NULL, out, diag);
}

int tth_onnx_import_with(const uint8_t *bytes, size_t len, const char *model_name, const json_t *bind,
                         const json_t *input_shapes, tth_relay_module **out, tth_diag *diag)
{
    return tth_onnx_import_ext(bytes, len, model_name, bind, input_shapes, NULL, out, diag);
}

int tth_onnx_import_ext(const uint8_t *bytes, size_t len, const char *model_name, const json_t *bind,
                        const json_t *input_shapes, tth_onnx_external *ext, tth_relay_module **out, tth_diag *diag)
{
    tth_diag local;
    if (!diag) {
        tth_diag_clear(&local);
        diag = &local; /* importers read diag->code */
    }
    if (out)
        *out = NULL;
    if (!bytes || !out)
        return tth_diag_set(diag, TTH_EINVAL, NULL, "no model bytes");
    if (pb_check_nesting(bytes, bytes + len, &onnx__model_proto__descriptor, 0))
        return tth_diag_set(diag, TTH_ELIMIT, "model", "the model nests messages more than %d deep", ONNX_MAX_NESTING);
    /* a mapped model is parsed without its weights (onnx_skeleton.c): each is read from the
     * mapping once, into its tensor, and its pages then given back */
    uint8_t *skeleton = NULL;
    size_t skeleton_len = 0, nspans = 0;
    tth__onnx_span *spans = NULL;
    if (!(ext && ext->bytes_mapped) || tth__onnx_skeleton(bytes, len, &skeleton, &skeleton_len, &spans, &nspans) != 0)
        skeleton = NULL;
    Onnx__ModelProto *mp = skeleton ? onnx__model_proto__unpack(NULL, skeleton_len, skeleton)
                                    : onnx__model_proto__unpack(NULL, len, bytes);
    free(skeleton);
    if (!mp) {
        free(spans);
        return tth_diag_set(diag, TTH_EPARSE, "model", "not a valid ONNX model (protobuf parsing failed)");
    }
    if (ext && ext->bytes_mapped && !spans) /* parsed: the message holds copies of everything */
        madvise((void *)bytes, len, MADV_DONTNEED);
    int rc = 0;
    tth_onnx_ctx c = {.diag = diag, .opset = -1, .training = -1, .ext = ext, .model_bytes = bytes, .spans = spans,
                      .nspans = nspans};
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
        if (o && (!o->domain || !o->domain[0] || !strcmp(o->domain, "ai.onnx")) && o->has_version)
            c.opset = o->version;
        if (o && o->domain && !strcmp(o->domain, TTH_ONNX_TRAINING_DOMAIN) && o->has_version)
            c.training = o->version;
    }
    if (!mp->graph) {
        rc = tth_diag_set(diag, TTH_EMODEL, "model", "the model has no graph");
        goto done;
    }
    if (c.opset < 0 && c.training < 0) {
        rc = tth_diag_set(diag, TTH_EUNSUPPORTED, "model",
                          "the model imports no version of the default ONNX operator set (nor of %s)",
                          TTH_ONNX_TRAINING_DOMAIN);
        goto done;
    }
    if (c.training >= 0 && c.training != 1) {
        rc = tth_diag_set(diag, TTH_EUNSUPPORTED, "model", "unsupported version %lld of the operator set %s (1 is "
                          "supported)", (long long)c.training, TTH_ONNX_TRAINING_DOMAIN);
        goto done;
    }
    /* Opsets 6 to 21 are the target; 1 to 5 (old exporters) are accepted too: the importers
     * handle their attribute forms (legacy broadcast, Reshape/Pad/Slice attributes...), and the
     * changes of 18 to 21 (docs/operators.md, "Opsets 18 to 21"). */
    if (c.opset >= 0 && (c.opset < 1 || c.opset > TTH_ONNX_MAX_OPSET)) {
        rc = tth_diag_set(diag, TTH_EUNSUPPORTED, "model", "unsupported ONNX opset %lld (1 to %d are supported)",
                          (long long)c.opset, TTH_ONNX_MAX_OPSET);
        tth_diag_hint(diag, "export the model for opset %d or lower (torch.onnx.export(..., opset_version=%d))",
                      TTH_ONNX_MAX_OPSET, TTH_ONNX_MAX_OPSET);
        goto done;
    }
    /* a model may import the training domain alone: then it has no default-domain nodes */
    c.training = c.training < 0 ? 0 : c.training;
    c.opset = c.opset < 0 ? 0 : c.opset;
    c.m = tth_relay_module_new(model_name && model_name[0] ? model_name : "model");
    if (!c.m) {
        rc = tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
        goto done;
    }
    if (bind && !json_is_object(bind)) {
        rc = tth_diag_set(diag, TTH_EINVAL, "options.bind", "must be an object of input name -> value");
        goto done;
    }
    if (input_shapes && !json_is_object(input_shapes)) {
        rc = tth_diag_set(diag, TTH_EINVAL, "options.input_shapes", "must be an object of input name -> dimensions");
        goto done;
    }
    rc = import_graph(&c, mp->graph, model_name, bind, input_shapes);
    if (rc) {
        tth_relay_module_free(c.m);
        c.m = NULL;
        goto done;
    }
    *out = c.m;
done:
    onnx__model_proto__free_unpacked(mp, NULL);
    if (spans) /* the pages the payloads' edges shared */
        madvise((void *)bytes, len, MADV_DONTNEED);
    free(spans);
    tth__onnx_external_release(ext);
    return rc;
}
