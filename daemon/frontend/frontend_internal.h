/* frontend_internal.h: what the importer and the passes share inside daemon/frontend/.
 * Not part of any contract: nothing outside daemon/frontend (and its tests) includes it. */
#ifndef TTH_FRONTEND_INTERNAL_H
#define TTH_FRONTEND_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "frontend.h"

/* Largest constant (in elements) the folder creates or reads; larger stays unfolded. */
#define TTH_FOLD_MAX_ELEMS ((int64_t)1 << 24)
/* Most results of one folded call (a split into more parts stays unfolded). */
#define TTH_FOLD_MAX_OUTS 64

/* ---- element access (values.c) ---- */
/* Element i of t as double / int64 (any dtype). */
double tth__ld_f64(const tth_tensor *t, int64_t i);
int64_t tth__ld_i64(const tth_tensor *t, int64_t i);
/* Store v into element i, converting to t's dtype the way ONNX Cast does (float → int truncates,
 * integers wrap to their width, bool is v != 0). */
void tth__st_f64(tth_tensor *t, int64_t i, double v);
void tth__st_i64(tth_tensor *t, int64_t i, int64_t v);

/* ---- folding (fold_constants.c) ----
 * e with constant arguments replaced by its value (a const, or a tuple of consts); e itself
 * when it cannot be folded (non-constant args, too large, not taken by the lowering); NULL with
 * diag set when evaluation fails (e.g. a gather index out of range). */
tth_rexpr *tth__fold_call(tth_relay_module *m, tth_rexpr *e, int64_t max_elems, tth_diag *diag);

/* ---- attribute helpers (values.c) ---- */
int64_t tth__attr_int(const json_t *attrs, const char *key, int64_t dflt);
double tth__attr_num(const json_t *attrs, const char *key, double dflt);
const char *tth__attr_str(const json_t *attrs, const char *key, const char *dflt);
/* Up to max integers of an array attribute; returns count, or -1 if absent or not an array. */
int tth__attr_ints(const json_t *attrs, const char *key, int64_t *out, int max);
json_t *tth__json_ints(const int64_t *v, int n);

/* ---- rewriting (rewrite.c) ----
 * Rebuild a function's body bottom-up: nodes in topological order; each call/tuple/get node is
 * handed to `visit` with its already-rewritten arguments. visit returns the replacement node
 * (it may return NULL with diag set to fail); when visit is NULL or returns the special value
 * TTH_REWRITE_KEEP the node is rebuilt only if an argument changed. Params map to themselves
 * unless ctx->param_map says otherwise. On success the function's body is replaced. */
#define TTH_REWRITE_KEEP ((tth_rexpr *)(uintptr_t)1)
typedef tth_rexpr *(*tth__rewrite_visit)(void *ctx, tth_relay_module *m, tth_rexpr *orig,
                                          tth_rexpr *const *args, size_t nargs, tth_diag *diag);
typedef struct tth__rewriter {
    tth__rewrite_visit visit;
    void *ctx;
    tth_rexpr *const *param_map; /* NULL, or one replacement per param (NULL entry: keep) */
    /* filled during the walk: users of each original node by id (count), for visitors */
    uint32_t *nusers;
    uint32_t max_id;
    /* during the walk: the rewritten node of each original node already visited, by id */
    tth_rexpr **map;
} tth__rewriter;
int tth__rewrite_function(tth_relay_module *m, tth_relay_function *fn, tth__rewriter *rw, tth_diag *diag);
/* Every function of m rewritten by visit, whose ctx is the function's tth__rewriter (for its
 * users counts); 0, or the first failure's code (TTH_EINVAL without a module). */
int tth__rewrite_module(tth_relay_module *m, tth__rewrite_visit visit, tth_diag *diag);
/* Rebuild a node of the same kind/op/attrs with new arguments. */
tth_rexpr *tth__rebuild(tth_relay_module *m, const tth_rexpr *orig, tth_rexpr *const *args, size_t nargs,
                        tth_diag *diag);
/* Arguments of a node (call args, tuple fields, the tuple of a get); 0 for var/const. */
size_t tth__node_args(const tth_rexpr *e, tth_rexpr *const **args);
/* Users count of every node reachable from fn's body, indexed by node id (malloc'd; free()). */
uint32_t *tth__count_users(tth_relay_module *m, const tth_relay_function *fn, uint32_t *max_id);

/* ---- QDQ to quantized operators (qdq.c) ----
 * dequantize -> nn.conv2d / dense [-> bias] [-> relu | clip] -> quantize with constant int8/uint8
 * weights becomes the integer graph the QLinearConv / QLinearMatMul importers build (qnn.conv2d or
 * qnn.matmul, add of an int32 bias, qnn.requantize, an integer clip); dequantize -> reshape ->
 * quantize with one quantization becomes an integer reshape. Requires: a well-typed module,
 * before constant folding. Candidates that stay float are listed with their reasons in the
 * function's attrs "qdq_refused" ([{"node", "op", "reason"}]). */
int tth_relay_qdq_to_integer(tth_relay_module *m, tth_diag *diag);

/* ---- ONNX tensors (onnx_tensor.c) ---- */
struct Onnx__TensorProto;
struct tth_onnx_external;
/* TensorProto → tth_tensor: raw_data, typed fields or external data (read through ext, which may
 * be NULL), every numeric dtype (float16 kept as F16, bfloat16 as BF16). Fills diag
 * (location `where`) on bad sizes/types. */
int tth__onnx_tensor_from_proto(const struct Onnx__TensorProto *tp, const char *where, struct tth_onnx_external *ext,
                                tth_tensor **out, tth_diag *diag);
/* Free the files an import read through ext (not ext->used, the caller's). */
void tth__onnx_external_release(struct tth_onnx_external *ext);
/* The whole pages of [p, p + n), a part of a private read-only mapping of a file that was read:
 * dropped from memory (they come back from the file if read again) */
void tth__onnx_give_back(const uint8_t *p, size_t n);
/* Where a main-graph initializer's raw_data payload lies in the model's bytes (len 0: it stayed
 * in the skeleton) */
typedef struct tth__onnx_span {
    size_t off, len;
} tth__onnx_span;
/* The model [bytes, bytes + n) without the raw_data payloads of its main graph's initializers
 * (onnx_skeleton.c): 0 with *out (malloc'd) and spans[k] for initializer k; 1 when there is
 * nothing to leave out, -1 when the bytes are not a well-formed message of the shape expected
 * (the parser then reads the bytes as they are and says what is wrong). */
int tth__onnx_skeleton(const uint8_t *bytes, size_t n, uint8_t **out, size_t *out_len, tth__onnx_span **spans,
                       size_t *nspans);
/* ONNX TensorProto.DataType → tth_dtype (TTH_DTYPE_INVALID if not representable). */
tth_dtype tth__onnx_dtype(int32_t onnx_type);
/* "string (ONNX element type 8)" for the types tth does not take, else "ONNX element type N". */
void tth__onnx_type_text(int32_t onnx_type, char *buf, size_t len);

/* The newest ONNX operator set the importer implements (docs/operators.md, "Opsets 18 to 21") */
#define TTH_ONNX_MAX_OPSET 21

#endif
