/* frontend.h: ONNX → Relay import and the Relay passes that run before partitioning/lowering.
 * Implemented in daemon/frontend/. */
#ifndef TTH_FRONTEND_H
#define TTH_FRONTEND_H

#include <stddef.h>
#include <stdint.h>

#include "tth/diag.h"
#include "tth/relay.h"

/* Import an ONNX ModelProto (opsets 6 to 17; 1 to 5 are accepted too, with their attribute
 * forms). Initializers become constants: float16 stays F16, bfloat16 BF16 (graph inputs and
 * outputs too). Values ONNX passes as inputs but tth needs static
 * (Reshape's shape, Slice's starts, Resize's scales, Clip's bounds...) must be constants after
 * shape arithmetic (Shape, Gather, Concat, Range... of constants) is folded; otherwise that is
 * an EUNSUPPORTED diagnostic naming the input. Any value larger than 2^31 elements, and kernel,
 * stride, dilation or padding above 4096, is ELIMIT/EMODEL. The module's "main" function takes the graph's
 * non-initializer inputs as params (in graph order) and returns its outputs (a tuple when more
 * than one, in graph order). Output names: the "main" function's attrs hold
 * {"input_names": [...], "output_names": [...]} with the ONNX names. An unsupported operator,
 * attribute value or a dynamic shape is a diagnostic naming the node and the operator:
 *   message "unsupported operator 'NonMaxSuppression'", location "node 'nms_1' (NonMaxSuppression)". */
int tth_onnx_import(const uint8_t *bytes, size_t len, const char *model_name,
                    tth_relay_module **out, tth_diag *diag);

/* The same with graph inputs given at compile time (options.bind, docs/tthctl.md "--bind"): `bind`
 * maps input names to {"dtype", "shape", "data"}; each named input becomes a constant named as
 * the input (so a shape, axes or repeats input works where a constant is required) and leaves
 * main's params. A name that is no graph input (or is an initializer), or a value whose dtype,
 * rank or fixed dimensions differ from the input's, is TTH_EINVAL naming it. NULL: no binds. */
int tth_onnx_import_bound(const uint8_t *bytes, size_t len, const char *model_name, const json_t *bind,
                          tth_relay_module **out, tth_diag *diag);

/* The same, also giving shapes to graph inputs whose dimensions the model leaves open
 * (options.input_shapes, docs/tthctl.md "--input-shape"): input name -> [dimensions]. A
 * dimension the model fixes must agree; a name that is no graph input is TTH_EINVAL naming it. */
int tth_onnx_import_with(const uint8_t *bytes, size_t len, const char *model_name, const json_t *bind,
                         const json_t *input_shapes, tth_relay_module **out, tth_diag *diag);

/* ONNX external data (docs/tthctl.md, "ONNX external data"): tensors whose bytes live in files beside
 * the model. `dir` is the model file's directory, where each tensor's `location` (a relative
 * path inside it) is read; NULL when the model came as bytes alone, and then such a tensor is
 * an error that says how to compile it. Each file is read whole once (its offset/length slices
 * serve the tensors), and `used`, when not NULL, gets one {"location", "bytes", "xxh64"} per
 * file: what the compile read, for the daemon's cache to check on a later hit. */
typedef struct tth_onnx_external {
    const char *dir;
    json_t *used;
    /* when not NULL, gets each node's output tensor names: {node name: [names]} (the names that
     * lead back to the model: docs/profiling.md) */
    json_t *node_outputs;
    /* the model's bytes are a read-only mapping of its file: their pages are given back once
     * parsed (they come again from the file if read) */
    int bytes_mapped;
    /* the files read so far, private to the importer */
    struct tth_onnx_ext_file *files;
    size_t nfiles;
} tth_onnx_external;

/* tth_onnx_import_with, reading external data through ext (may be NULL: none allowed). */
int tth_onnx_import_ext(const uint8_t *bytes, size_t len, const char *model_name, const json_t *bind,
                        const json_t *input_shapes, tth_onnx_external *ext, tth_relay_module **out, tth_diag *diag);

/* Decode one serialized ONNX TensorProto (e.g. a test's input_0.pb) into a new tensor (raw_data
 * or typed fields; float16 stays F16, bfloat16 BF16). When name is not NULL, the
 * TensorProto's name is copied there (truncated, always NUL-terminated; "" when it has none). */
int tth_onnx_tensor_decode(const uint8_t *bytes, size_t len, tth_tensor **out, char *name, size_t name_len,
                           tth_diag *diag);

/* Replace main's params by constants: values[i] (referenced, not stolen) for param i, where n
 * must equal main's param count; main is left without params. For running a model on known
 * inputs with the constant folder (tests, reference outputs). */
int tth_relay_bind_params(tth_relay_module *m, tth_tensor *const *values, size_t n, tth_diag *diag);

/* Individual passes; each keeps the module well-typed. */
int tth_relay_fold_constants(tth_relay_module *m, tth_diag *diag); /* incl. shape arithmetic */
/* The canonical target whose default lowering evaluates folded calls (the importer's folding,
 * the passes'), for the calling thread until set again: folded values then have the bits the
 * target's own code computes (its vector width, fused multiply-adds). NULL: kind c, scalar.
 * The compile pipeline sets its host kind's target for the compile's duration. */
void tth_relay_fold_for(const json_t *target);
int tth_relay_fold_batch_norm(tth_relay_module *m, tth_diag *diag); /* into conv weights, else mul+add */
/* For a call of main whose arguments are all constants (a function of constants only, which the
 * folder left in the code): 1 and `why` says which operator inside it the folder did not evaluate
 * and why (docs/operators.md, "Constant folding"); 0 when some argument is not a constant. */
int tth_relay_constant_call_why(tth_relay_module *m, const tth_rexpr *call, char *why, size_t len);
int tth_relay_eliminate_dead_code(tth_relay_module *m, tth_diag *diag);
/* A zero nn.pad of rows and columns before a convolution or an average pool becomes that
 * operator's padding (fold_pad.c) */
int tth_relay_fold_pad(tth_relay_module *m, tth_diag *diag);
/* A convolution's kernel taps that read only padding for every output are cut (conv_taps.c): the
 * kernel shrinks to the taps that read the image, the padding moves with it. */
int tth_relay_trim_conv_taps(tth_relay_module *m, tth_diag *diag);
/* softmax(scale * q k^T + mask) v, as exporters write it, becomes one nn.attention (attention.c) */
int tth_relay_fuse_attention(tth_relay_module *m, tth_diag *diag);
/* Blocked channels (layout.c, docs/layouts.md): main's float32 convolutions, and the pools and
 * element-wise operators between them, move to NCHW<block>c, with layout changes only where an
 * NCHW consumer reads a blocked value. block < 2 leaves the module alone. Run after partitioning,
 * before fusion. */
typedef struct tth_layout_stats {
    int convs;                /* float32 convolutions of main */
    int blocked;              /* of them reading or writing blocks */
    int to_blocked, to_plain; /* layout changes made */
} tth_layout_stats;
/* stats may be NULL */
int tth_relay_alter_layout(tth_relay_module *m, int64_t block, tth_layout_stats *stats, tth_diag *diag);
/* Fusion: every op call of "main" ends up inside a function with attrs {"Primitive": 1}, called
 * from main. A primitive function's body is at most one "anchor" call (an op for which
 * tth_op_is_elementwise is false) followed by a DAG of elementwise op calls whose other
 * operands are the function's params or constants; the anchor's result is used only inside the
 * function. Ops that cannot be fused (tuple-producing split, etc.) get a function of their own. */
int tth_relay_fuse(tth_relay_module *m, tth_diag *diag);

/* The passes before partitioning, in the order the compile pipeline's simplify stage runs them
 * (it calls this): QDQ to integers, fold constants, fold batch norm, fold constants, trim
 * convolution taps, DCE. */
int tth_relay_simplify(tth_relay_module *m, tth_diag *diag);
/* tth_relay_simplify then fuse: a compile without partitioning (tests, fuzzers). */
int tth_relay_optimize(tth_relay_module *m, tth_diag *diag);

#endif
