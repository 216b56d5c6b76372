/* onnx_import.h: the importer's context, shared by onnx_import.c (graph walk) and the operator
 * importers (onnx_ops.c, the shared helpers and the table lookup; onnx_<family>.c, one function
 * per ONNX operator and the family's rows of the operator table). */
#ifndef TTH_ONNX_IMPORT_H
#define TTH_ONNX_IMPORT_H

#include "frontend_internal.h"
#include "onnx.pb-c.h"

/* Shape-arithmetic results up to this many elements are folded while importing, so that the
 * inputs ONNX ops take as values (Reshape's shape, Slice's starts...) are constants. */
#define TTH_IMPORT_FOLD_ELEMS 65536
/* Largest tensor (elements) any value of an imported graph may have: keeps every shape product
 * of the IR (broadcasts of two such values included) far from int64 overflow. */
#define TTH_IMPORT_MAX_TENSOR ((int64_t)1 << 31)
/* Largest kernel, stride, dilation or convolution/pool padding accepted. */
#define TTH_IMPORT_MAX_WINDOW 4096
/* Largest tensor an importer creates from an attribute (ConstantOfShape...). */
#define TTH_IMPORT_MAX_ELEMS ((int64_t)1 << 26)

typedef struct tth_onnx_ctx {
    tth_relay_module *m;
    tth_diag *diag;
    int64_t opset;                 /* of the default ("" / "ai.onnx") domain; 0 when not imported */
    int64_t training;              /* of ai.onnx.preview.training; 0 when not imported */
    const Onnx__NodeProto *node;   /* the node being imported */
    int64_t version;               /* its operator's version: the since-version of its table row */
    int arg;                       /* the row's arg (which operator a shared importer imports) */
    char where[TTH_DIAG_LOCATION_MAX]; /* "node 'conv1' (Conv)" */
    struct tth_onnx_external *ext; /* external data (may be NULL) */
    struct valtab *vals;           /* the values by name, while a graph is imported */
    int64_t unrolled;              /* loop and scan bodies imported so far (bounded in all) */
    const uint8_t *model_bytes;    /* a mapped model whose main-graph initializers' payloads */
    const tth__onnx_span *spans;   /* were left out of the parsed skeleton: spans[k] for the */
    size_t nspans;                 /* k-th (onnx_skeleton.c) */
} tth_onnx_ctx;

/* One operator: inputs (NULL for an absent optional input), outputs to fill (leave NULL for an
 * output the op does not produce). Returns 0 or a negative code with ctx->diag set. */
typedef int (*tth_onnx_import_fn)(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout);

/* A row of the operator table: the operator's versions from `since` (an ONNX since-version, an
 * opset of its domain) up to the next row's `since` (or to the newest opset the importer knows)
 * are imported by fn, or, with fn NULL, refused with `refusal`.
 * One importer may serve several operators (the unary ones, MaxPool and AveragePool...): `arg`
 * tells it which (a Relay op or a variant), as ctx->arg. An operator's rows are consecutive and
 * ordered; a new version that reads the operator otherwise is a new row (docs/operators.md,
 * "The operator table"). */
typedef struct tth_onnx_op {
    const char *name; /* ONNX op_type */
    int since;
    tth_onnx_import_fn fn;
    int arg;
    const char *refusal;
} tth_onnx_op;

/* The row importing operator `name` at the model's opset of the default domain (training 0) or
 * of ai.onnx.preview.training (training 1): 0, or a negative code with a diagnostic that says
 * why not (an unknown operator, a version before ONNX defines it, a range tth refuses). */
int tth__onnx_op_row(tth_onnx_ctx *c, int training, const char *name, const tth_onnx_op **row);
/* The i-th table of rows of a domain (ended by a row of NULL name), NULL past the last. */
const tth_onnx_op *tth__onnx_table(int training, size_t i);
/* The last version row i of an operator's n rows r imports: the next row's since - 1, or the
 * domain's newest opset (`newest`) for its last row. */
static inline int tth__onnx_row_last(const tth_onnx_op *r, size_t n, size_t i, int newest)
{
    return i + 1 < n ? r[i + 1].since - 1 : newest;
}

#define TTH_ONNX_TRAINING_DOMAIN "ai.onnx.preview.training"

/* 1 when the product of the dims is at most TTH_IMPORT_MAX_TENSOR (no overflow on the way). */
int tth__onnx_shape_ok(const int64_t *shape, int rank);

/* A subgraph's initializers and nodes imported among the current graph's values (an If's
 * branch, a Loop's or Scan's body once), its ninputs inputs bound to inputs; its max_outs outputs
 * into outs. 0 or a negative code with ctx->diag set. */
int tth__onnx_import_body(tth_onnx_ctx *c, const Onnx__GraphProto *g, tth_rexpr *const *inputs, size_t ninputs,
                          tth_rexpr **outs, size_t max_outs);

/* The value the name stands for at this point of the import, or NULL. */
tth_rexpr *tth__onnx_value(tth_onnx_ctx *c, const char *name);

/* Diagnostic at the current node. */
int tth__onnx_fail(tth_onnx_ctx *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
