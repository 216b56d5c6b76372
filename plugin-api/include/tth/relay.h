/* tth/relay.h: the Relay IR, a typed dataflow graph of operator calls.
 *
 * A module holds functions; a function has parameters (vars) and a body expression. Expressions
 * form a DAG (a node used twice is shared, not copied). Every node is typed when built: the
 * builders run the operator's type relation and fail with a diagnostic on a type error, so a
 * module built without error is well-typed. Layout conventions follow ONNX: NCHW activations,
 * OIHW convolution weights.
 */
#ifndef TTH_RELAY_H
#define TTH_RELAY_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "tth/diag.h"
#include "tth/ir_common.h"
#include "tth/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every operator, defined once: X(ENUM, "name", min_args, max_args (-1: any), "attrs").
 * The attrs column documents the JSON attribute object (its keys and types); the type
 * relations live in libtth (plugin-api/src/ir/relay_ops.c). Broadcasting is numpy's/ONNX's.
 * Frozen numbers: new operators are appended. */
#define TTH_RELAY_OPS(X)                                                                               \
    /* elementwise, binary, broadcasting; comparisons and logic return bool */                        \
    X(ADD, "add", 2, 2, "")                                                                           \
    X(SUBTRACT, "subtract", 2, 2, "")                                                                 \
    X(MULTIPLY, "multiply", 2, 2, "")                                                                 \
    X(DIVIDE, "divide", 2, 2, "integer division truncates toward zero (ONNX Div)")                    \
    X(POWER, "power", 2, 2, "")                                                                       \
    X(MAXIMUM, "maximum", 2, 2, "")                                                                   \
    X(MINIMUM, "minimum", 2, 2, "")                                                                   \
    X(MOD, "mod", 2, 2, "{fmod: bool} fmod=1: C fmod; else sign of divisor (ONNX Mod)")              \
    X(PRELU, "nn.prelu", 2, 2, "x, slope (broadcast to x)")                                           \
    X(EQUAL, "equal", 2, 2, "")                                                                       \
    X(LESS, "less", 2, 2, "")                                                                         \
    X(LESS_EQUAL, "less_equal", 2, 2, "")                                                             \
    X(GREATER, "greater", 2, 2, "")                                                                   \
    X(GREATER_EQUAL, "greater_equal", 2, 2, "")                                                       \
    X(LOGICAL_AND, "logical_and", 2, 2, "")                                                           \
    X(LOGICAL_OR, "logical_or", 2, 2, "")                                                             \
    X(LOGICAL_XOR, "logical_xor", 2, 2, "")                                                           \
    X(WHERE, "where", 3, 3, "cond, x, y (broadcast)")                                                 \
    /* elementwise, unary */                                                                          \
    X(NEGATIVE, "negative", 1, 1, "")                                                                 \
    X(ABS, "abs", 1, 1, "")                                                                           \
    X(SQRT, "sqrt", 1, 1, "")                                                                         \
    X(RECIPROCAL, "reciprocal", 1, 1, "")                                                             \
    X(EXP, "exp", 1, 1, "")                                                                           \
    X(LOG, "log", 1, 1, "")                                                                           \
    X(SIN, "sin", 1, 1, "")                                                                           \
    X(COS, "cos", 1, 1, "")                                                                           \
    X(TANH, "tanh", 1, 1, "")                                                                         \
    X(SIGMOID, "sigmoid", 1, 1, "")                                                                   \
    X(ERF, "erf", 1, 1, "")                                                                           \
    X(FLOOR, "floor", 1, 1, "")                                                                       \
    X(CEIL, "ceil", 1, 1, "")                                                                         \
    X(ROUND, "round", 1, 1, "half to even")                                                           \
    X(SIGN, "sign", 1, 1, "")                                                                         \
    X(LOGICAL_NOT, "logical_not", 1, 1, "")                                                           \
    X(RELU, "nn.relu", 1, 1, "")                                                                      \
    X(LEAKY_RELU, "nn.leaky_relu", 1, 1, "{alpha: float}")                                            \
    X(ELU, "nn.elu", 1, 1, "{alpha: float}")                                                          \
    X(SELU, "nn.selu", 1, 1, "{alpha: float, gamma: float}")                                          \
    X(THRESHOLDED_RELU, "nn.thresholded_relu", 1, 1, "{alpha: float}")                                \
    X(SOFTPLUS, "nn.softplus", 1, 1, "")                                                              \
    X(SOFTSIGN, "nn.softsign", 1, 1, "")                                                              \
    X(HARD_SIGMOID, "nn.hard_sigmoid", 1, 1, "{alpha: float, beta: float}")                           \
    X(HARD_SWISH, "nn.hard_swish", 1, 1, "")                                                          \
    X(CLIP, "clip", 1, 1, "{a_min: float, a_max: float}")                                             \
    X(CAST, "cast", 1, 1, "{dtype: string}")                                                          \
    /* neural network */                                                                              \
    X(CONV2D, "nn.conv2d", 2, 3,                                                                      \
      "x NCHW, w OIHW, [bias O]; {strides: [h,w], padding: [top,left,bottom,right], "                 \
      "dilation: [h,w], groups: int, data_layout, out_layout: \"NCHW\" or \"NCHW<b>c\"}")                \
    X(CONV2D_TRANSPOSE, "nn.conv2d_transpose", 2, 3,                                                  \
      "x NCHW, w [C_in, C_out/groups, kh, kw], [bias]; {strides, padding: [t,l,b,r], dilation, "      \
      "groups, output_padding: [h,w]}")                                                               \
    X(MATMUL, "matmul", 2, 2, "numpy matmul: rank >= 1, batch dimensions broadcast")                  \
    X(MAX_POOL2D, "nn.max_pool2d", 1, 1,                                                              \
      "NCHW; {pool_size: [h,w], strides, padding: [t,l,b,r], dilation, ceil_mode: bool, layout}")     \
    X(AVG_POOL2D, "nn.avg_pool2d", 1, 1,                                                              \
      "NCHW; {pool_size, strides, padding, dilation, ceil_mode: bool, count_include_pad: bool, "      \
      "layout}")                                                                                      \
    X(GLOBAL_AVG_POOL2D, "nn.global_avg_pool2d", 1, 1, "NCHW -> NC11; {layout}")                      \
    X(GLOBAL_MAX_POOL2D, "nn.global_max_pool2d", 1, 1, "NCHW -> NC11; {layout}")                      \
    X(BATCH_NORM, "nn.batch_norm", 5, 5, "x, scale, bias, mean, var (channels on axis 1); {epsilon}") \
    X(SOFTMAX, "nn.softmax", 1, 1, "{axis: int} over that one axis")                                  \
    X(LOG_SOFTMAX, "nn.log_softmax", 1, 1, "{axis: int} over that one axis")                          \
    X(PAD, "nn.pad", 1, 1,                                                                            \
      "{pad_before: [..], pad_after: [..] (one per dim, >= 0), pad_value: float, "                    \
      "mode: constant|reflect|edge}")                                                                 \
    /* shape and data movement */                                                                     \
    X(RESHAPE, "reshape", 1, 1, "{newshape: [..]} fully resolved, same element count")                \
    X(TRANSPOSE, "transpose", 1, 1, "{axes: [..]} a permutation")                                     \
    X(BROADCAST_TO, "broadcast_to", 1, 1, "{shape: [..]}")                                            \
    X(CONCATENATE, "concatenate", 1, -1, "{axis: int}")                                               \
    X(SPLIT, "split", 1, 1, "{axis: int, sizes: [..]} returns a tuple")                               \
    X(STRIDED_SLICE, "strided_slice", 1, 1,                                                           \
      "{begin: [..], end: [..], strides: [..]} one per dim, normalized (0 <= begin, clamped end; "     \
      "negative strides allowed with end -1 meaning before index 0)")                                 \
    X(TAKE, "take", 2, 2, "data, indices (int32/int64, negative wrap); {axis: int} (ONNX Gather)")    \
    X(SUM, "sum", 1, 1, "{axis: [..] (empty: all), keepdims: bool}")                                  \
    X(MEAN, "mean", 1, 1, "{axis: [..], keepdims: bool}")                                             \
    X(MAX, "max", 1, 1, "{axis: [..], keepdims: bool}")                                               \
    X(MIN, "min", 1, 1, "{axis: [..], keepdims: bool}")                                               \
    X(PROD, "prod", 1, 1, "{axis: [..], keepdims: bool}")                                             \
    X(ARGMAX, "argmax", 1, 1, "{axis: int, keepdims: bool, select_last_index: bool} -> int64")       \
    X(ARGMIN, "argmin", 1, 1, "{axis: int, keepdims: bool, select_last_index: bool} -> int64")       \
    X(RESIZE2D, "image.resize2d", 1, 1,                                                               \
      "NCHW; {size: [h,w], method: nearest|linear|cubic, coordinate_transformation_mode: half_pixel|"  \
      "asymmetric|align_corners|pytorch_half_pixel|tf_half_pixel_for_nn|tf_crop_and_resize, "         \
      "nearest_mode: round_prefer_floor|round_prefer_ceil|floor|ceil, scale: [h,w]; cubic: "          \
      "cubic_coeff_a, exclude_outside; tf_crop_and_resize: roi: [h0,w0,h1,w1], extrapolation_value}") \
    /* quantized (ONNX semantics: saturating, round half to even) */                                  \
    X(QUANTIZE, "qnn.quantize", 3, 3, "x, scale, zero_point (scalar or per-axis); {axis, out_dtype}") \
    X(DEQUANTIZE, "qnn.dequantize", 3, 3, "x, scale, zero_point; {axis} -> float32")                  \
    X(QNN_CONV2D, "qnn.conv2d", 4, 4, "x, w, x_zero_point, w_zero_point; conv2d attrs -> int32")     \
    X(QNN_MATMUL, "qnn.matmul", 4, 4, "a, b, a_zero_point, b_zero_point -> int32")                   \
    X(REQUANTIZE, "qnn.requantize", 5, 5,                                                             \
      "x int32, in_scale (scalar or per-axis), in_zero_point, out_scale, out_zero_point; "            \
      "{axis, out_dtype}")                                                                            \
    /* elementwise, unary: the inverse trigonometric and hyperbolic functions */                      \
    X(ASIN, "asin", 1, 1, "")                                                                         \
    X(ACOS, "acos", 1, 1, "")                                                                         \
    X(ATAN, "atan", 1, 1, "")                                                                         \
    X(ASINH, "asinh", 1, 1, "")                                                                       \
    X(ACOSH, "acosh", 1, 1, "")                                                                       \
    X(ATANH, "atanh", 1, 1, "")                                                                       \
    /* later additions */                                                                             \
    X(MAX_POOL2D_ARGMAX, "nn.max_pool2d_with_argmax", 1, 1,                                           \
      "NCHW; nn.max_pool2d's attrs, {storage_order: 0 or 1} -> (max, int64 flat index into x, "       \
      "row-major or with H and W swapped when storage_order is 1; ties: the first tap)")              \
    X(DET, "det", 1, 1, "float [..., n, n] -> [...]: determinant of each matrix (LU, partial pivoting)") \
    X(ROI_ALIGN, "vision.roi_align", 3, 3,                                                            \
      "x NCHW float, rois [R, 4] (x0, y0, x1, y1) of x's dtype, batch_indices [R] int32/int64; "      \
      "{pooled_size: [h,w], spatial_scale: float, sampling_ratio: int >= 0 (0: adaptive), "           \
      "mode: avg|max, aligned: bool (half-pixel shift)} -> [R, C, h, w] (ONNX RoiAlign)")            \
    X(GRID_SAMPLE, "image.grid_sample", 2, 2,                                                         \
      "x float [N, C, d1..dr], grid float [N, D1..Dr, r] (coordinates in [-1, 1], along dr first); "  \
      "{method: nearest|linear|cubic, padding_mode: zeros|border|reflection, align_corners: bool} "   \
      "-> [N, C, D1..Dr] (ONNX GridSample)")                                                          \
    X(LAYER_NORM, "nn.layer_norm", 3, 3,                                                              \
      "x float [.., D], scale, bias ([D] or one value, x's dtype); {epsilon: float, default 1e-5}: "  \
      "(x - mean) / sqrt(var + epsilon) * scale + bias over the last axis (ONNX LayerNormalization)")  \
    X(ATTENTION, "nn.attention", 3, 4,                                                                \
      "q [.., Lq, D], k [.., Lk, D] (keys_transposed: [.., D, Lk]), v [.., Lk, Dv], mask? (broadcast " \
      "to [.., Lq, Lk]), float32; {scale: float, keys_transposed: bool}: softmax(scale * q k^T + "    \
      "mask, last axis) v, batch dimensions broadcast -> [.., Lq, Dv]")

typedef enum tth_op {
    TTH_OP_INVALID = 0,
#define TTH__OP_ENUM(e, name, mn, mx, doc) TTH_OP_##e,
    TTH_RELAY_OPS(TTH__OP_ENUM)
#undef TTH__OP_ENUM
    TTH_OP_COUNT_
} tth_op;

TTH_API const char *tth_op_name(tth_op op);        /* "nn.conv2d" */
TTH_API tth_op tth_op_from_name(const char *name); /* TTH_OP_INVALID if unknown */
TTH_API const char *tth_op_doc(tth_op op);
TTH_API int tth_op_is_elementwise(tth_op op); /* unary/binary/where/clip/cast...: fusable */
/* image.resize2d's source coordinate (ONNX Resize, docs/operators.md "Resize") of output index x
 * along an axis of `in` input and `out` output elements, under coordinate transformation `mode`
 * ("half_pixel" when NULL or unknown, "asymmetric", "align_corners", "pytorch_half_pixel",
 * "tf_half_pixel_for_nn", "tf_crop_and_resize" with the whole axis as its region) and the axis's
 * scale (the op's "scale" attribute, else out / in). The constant folder and the lowering use it
 * through tth_resize_taps_at. */
TTH_API double tth_resize_source(const char *mode, double x, int64_t in, int64_t out, double scale);

/* The type of an expression: a tensor, or a tuple of tensors (no nesting). */
typedef struct tth_rtype {
    int32_t nfields;          /* -1: a tensor (`tensor`); >= 0: a tuple of that many tensors */
    tth_ttype tensor;
    const tth_ttype *fields;  /* nfields entries (arena) */
} tth_rtype;

typedef enum tth_rexpr_kind {
    TTH_REXPR_VAR = 1,
    TTH_REXPR_CONST = 2,
    TTH_REXPR_CALL = 3,
    TTH_REXPR_TUPLE = 4,
    TTH_REXPR_TUPLE_GET = 5,
} tth_rexpr_kind;

typedef struct tth_rexpr tth_rexpr;
typedef struct tth_relay_module tth_relay_module;

struct tth_rexpr {
    tth_rexpr_kind kind;
    uint32_t id;              /* unique in the module, in creation order */
    tth_rtype type;
    const char *span;         /* where it came from: ONNX node name, or NULL */
    union {
        struct { const char *name; } var;
        struct { tth_tensor *value; const char *name; } constant; /* module holds a reference */
        struct {
            tth_op op;                   /* TTH_OP_INVALID when calling a function */
            tth_relay_function *fn;      /* the callee when calling a function */
            tth_rexpr **args;
            size_t nargs;
            json_t *attrs;               /* a JSON object; never NULL for op calls */
        } call;
        struct { tth_rexpr **fields; size_t nfields; } tuple;
        struct { tth_rexpr *tuple; int32_t index; } get;
    } u;
};

struct tth_relay_function {
    const char *name;         /* unique in the module */
    tth_rexpr **params;       /* vars */
    size_t nparams;
    tth_rexpr *body;
    json_t *attrs;            /* {"Compiler": "cmsis-nn", "global_symbol": "...", "Primitive": 1} */
    tth_relay_module *module;
};

struct tth_relay_module {
    tth_arena *arena;
    tth_relay_function **funcs;
    size_t nfuncs;
    const char *name;         /* model name */
    /* private bookkeeping (jansson objects and tensors to release) follows in the implementation */
};

/* Modules. */
TTH_API tth_relay_module *tth_relay_module_new(const char *name);
TTH_API void tth_relay_module_free(tth_relay_module *m);
TTH_API tth_relay_function *tth_relay_module_find(const tth_relay_module *m, const char *name);
/* Release the data of the module's constants that nothing else references (the module holds
 * every reference to the tensor): once lowering has put what the code needs in the TIR, the
 * imported weights need not stay in memory. The expressions keep their types; such a constant's
 * value keeps its type with data NULL and nbytes 0, so nothing may read it afterwards. Returns
 * the bytes released. */
TTH_API size_t tth_relay_module_drop_constants(tth_relay_module *m);
/* The same for the constants `keep` says 0 of (keep(ctx, tensor)); NULL keep drops as
 * tth_relay_module_drop_constants does (ABI 1.8). For dropping early: the constants of dead
 * expressions after folding, and those of functions already lowered. */
TTH_API size_t tth_relay_module_drop_constants_if(tth_relay_module *m, int (*keep)(void *ctx, const tth_tensor *t),
                                                  void *ctx);
/* The id the next node made in m will have (ids grow in creation order; ABI 1.8): nodes made
 * after this call have ids at least this. */
TTH_API uint32_t tth_relay_next_id(const tth_relay_module *m);
/* "main" by convention: the function the model's inputs enter. */
TTH_API tth_relay_function *tth_relay_module_main(const tth_relay_module *m);

/* Builders. Each returns NULL and fills diag on a type error (the diag names the operator, the
 * span when set with tth_relay_set_span, and the offending shapes). attrs: steals the
 * reference (may be NULL: an empty object). */
TTH_API tth_rexpr *tth_relay_var(tth_relay_module *m, const char *name, const tth_ttype *type);
TTH_API tth_rexpr *tth_relay_const(tth_relay_module *m, tth_tensor *value /* stolen */, const char *name);
TTH_API tth_rexpr *tth_relay_call(tth_relay_module *m, tth_op op, tth_rexpr *const *args, size_t nargs,
                                  json_t *attrs, tth_diag *diag);
TTH_API tth_rexpr *tth_relay_call_fn(tth_relay_module *m, tth_relay_function *fn, tth_rexpr *const *args,
                                     size_t nargs, tth_diag *diag);
TTH_API tth_rexpr *tth_relay_tuple(tth_relay_module *m, tth_rexpr *const *fields, size_t n, tth_diag *diag);
TTH_API tth_rexpr *tth_relay_tuple_get(tth_relay_module *m, tth_rexpr *tuple, int32_t index, tth_diag *diag);
/* The span given to nodes built after this call (NULL to clear). */
TTH_API void tth_relay_set_span(tth_relay_module *m, const char *span);

/* Add a function to the module (name must be unique). attrs: stolen, may be NULL. */
TTH_API tth_relay_function *tth_relay_function_add(tth_relay_module *m, const char *name,
                                                    tth_rexpr *const *params, size_t nparams,
                                                    tth_rexpr *body, json_t *attrs, tth_diag *diag);
/* Drop functions no longer reachable from main. */
TTH_API void tth_relay_module_prune(tth_relay_module *m);

/* Run an op's type relation without building a node (for passes that try a rewrite). */
TTH_API int tth_relay_infer(tth_op op, const tth_rtype *const *arg_types, size_t nargs,
                            const json_t *attrs, tth_rtype *out, tth_arena *arena, tth_diag *diag);

/* Typed attributes of the windowed operators (nn.conv2d, nn.conv2d_transpose, qnn.conv2d,
 * nn.max_pool2d, nn.avg_pool2d): the one reader of their window every consumer uses (type
 * relations, lowering, constant folding, plugins), so all of them fill the same defaults and
 * refuse the same values (docs/operators.md, "Attributes"). */
typedef struct tth_window_attrs {
    int64_t strides[2];        /* default [1, 1]; each >= 1 */
    int64_t padding[4];        /* top, left, bottom, right; default zeros; each >= 0; exactly 4 */
    int64_t dilation[2];       /* default [1, 1]; each >= 1 */
    int64_t groups;            /* convolutions: default 1, >= 1; pooling: 1 */
    int64_t output_padding[2]; /* nn.conv2d_transpose: default zeros, each >= 0 and smaller than
                                  the stride or the dilation; else zeros */
    int64_t pool_size[2];      /* pooling: required, each >= 1; else zeros */
    int ceil_mode;             /* pooling: default false */
    int count_include_pad;     /* nn.avg_pool2d: default false */
} tth_window_attrs;

/* Channel layouts of 2-D operators (docs/layouts.md): attributes "data_layout" and "out_layout"
 * of nn.conv2d, "layout" of the pools. "NCHW" (the default, and what a missing attribute means)
 * or "NCHW<b>c": [N, C/b, H, W, b], blocks of b channels with the block innermost. A convolution's
 * weight stays OIHW in every layout. The block of a layout attribute value v: 0 for NCHW or no
 * value, b for NCHW<b>c (2 <= b <= TTH_LAYOUT_MAX_BLOCK), -1 for anything else. */
#define TTH_LAYOUT_MAX_BLOCK 64
TTH_API int64_t tth_layout_block(const json_t *v);

/* The window attributes of a call of op with attrs (a call's u.call.op and u.call.attrs), read
 * and checked as op's type relation reads them. 0, or TTH_EINVAL with diag set (an op without a
 * window, or attributes the relation refuses). diag may be NULL. */
TTH_API int tth_window_attrs_of(tth_op op, const json_t *attrs, tth_window_attrs *a, tth_diag *diag);

/* transpose's permutation for an input of rank `rank` (attrs: the call's u.call.attrs): "axes",
 * or the reverse order when absent, negative entries counted from the end; output dimension d is
 * input dimension axes[d]. The one reader the type relation, the lowering and the constant folder
 * share. 0, or TTH_EINVAL with diag set (not a permutation of 0..rank-1). diag may be NULL. */
TTH_API int tth_transpose_axes_of(const json_t *attrs, int32_t rank, int64_t axes[TTH_MAX_RANK], tth_diag *diag);

/* clip's bounds (attrs: the call's u.call.attrs): a_min and a_max, both required, a_min <= a_max.
 * The one reader the type relation, the lowering, the QDQ pass and the plugins' patterns share.
 * 0, or TTH_EINVAL with diag set. diag may be NULL. (ABI 1.8) */
TTH_API int tth_clip_attrs_of(const json_t *attrs, double *lo, double *hi, tth_diag *diag);

/* nn.pad's attributes for an input of rank `rank`: pads before and after each dimension (one
 * entry per dimension, none negative), the constant mode's value (default 0) and the mode. The
 * one reader the type relation, the lowering, the pad folder and the plugins' rules share; the
 * checks that need the input's sizes (reflect smaller than the dimension) stay in the relation.
 * 0, or TTH_EINVAL with diag set. diag may be NULL. (ABI 1.8) */
typedef enum tth_pad_mode { TTH_PAD_CONSTANT = 0, TTH_PAD_REFLECT, TTH_PAD_EDGE } tth_pad_mode;
typedef struct tth_pad_attrs {
    int64_t before[TTH_MAX_RANK], after[TTH_MAX_RANK];
    double value;
    tth_pad_mode mode;
} tth_pad_attrs;
TTH_API int tth_pad_attrs_of(const json_t *attrs, int32_t rank, tth_pad_attrs *p, tth_diag *diag);

/* Typed attributes of image.resize2d (ONNX Resize, docs/operators.md "Resize"): the one reader the
 * type relation, the lowering and the constant folder share. */
typedef enum tth_resize_nearest_mode {
    TTH_RESIZE_ROUND_PREFER_FLOOR = 0, /* default */
    TTH_RESIZE_ROUND_PREFER_CEIL = 1,
    TTH_RESIZE_FLOOR = 2,
    TTH_RESIZE_CEIL = 3,
} tth_resize_nearest_mode;
typedef enum tth_resize_method {
    TTH_RESIZE_NEAREST = 0, /* default */
    TTH_RESIZE_LINEAR = 1,
    TTH_RESIZE_CUBIC = 2,
} tth_resize_method;
typedef struct tth_resize2d_attrs {
    int64_t size[2];                    /* output H, W; each >= 1 */
    tth_resize_method method;
    const char *coordinate_transformation_mode; /* "half_pixel" (default), "asymmetric",
                                           "align_corners", "pytorch_half_pixel",
                                           "tf_half_pixel_for_nn", "tf_crop_and_resize": static text */
    tth_resize_nearest_mode nearest_mode;
    double scale[2];                    /* per axis: the "scale" attribute, else size / input */
    double cubic_coeff_a;               /* cubic: the kernel's A (default -0.75); else 0 */
    int exclude_outside;                /* cubic: taps outside the input weigh 0, the rest renormalized */
    double roi[4];                      /* tf_crop_and_resize: start h, w and end h, w as fractions of
                                           (input - 1); else 0, 0, 1, 1 */
    double extrapolation_value;         /* tf_crop_and_resize: the output where the source is outside */
} tth_resize2d_attrs;

/* The attributes of an image.resize2d call (attrs: its u.call.attrs) on an input of spatial size
 * in_hw, checked as its type relation checks them. 0, or TTH_EINVAL with diag set (may be NULL). */
TTH_API int tth_resize2d_attrs_of(const json_t *attrs, const int64_t in_hw[2], tth_resize2d_attrs *a,
                                  tth_diag *diag);
/* The input index nearest resize reads for source coordinate x (tth_resize_source) under mode,
 * clamped to [0, in). */
TTH_API int64_t tth_resize_nearest(tth_resize_nearest_mode mode, double x, int64_t in);

/* What one output index of image.resize2d reads along one axis: n taps (1 nearest, 2 linear,
 * 4 cubic), input indices idx[k] in [0, in) weighted w[k]. The output element is
 * sum_ky wy[ky] * sum_kx wx[kx] * input[idy[ky], idx[kx]], or the extrapolation value when the
 * source is outside the input (inside 0) along either axis; then the weights are 0. */
#define TTH_RESIZE_MAX_TAPS 4
typedef struct tth_resize_taps {
    int n;
    int inside;
    int64_t idx[TTH_RESIZE_MAX_TAPS];
    double w[TTH_RESIZE_MAX_TAPS];
} tth_resize_taps;
/* The taps of output index o along axis (0: H, 1: W) of an input with `in` elements along it,
 * under attributes a (tth_resize2d_attrs_of): the one coordinate and weight rule of the constant
 * folder and the lowering (docs/operators.md "Resize"). */
TTH_API void tth_resize_taps_at(const tth_resize2d_attrs *a, int axis, int64_t o, int64_t in, tth_resize_taps *t);

/* Nodes of a function's body reachable from its result, each once, producers before users
 * (params first). *out is arena memory of the module. Returns count, or negative on OOM. */
TTH_API int64_t tth_relay_topo(tth_relay_module *m, const tth_relay_function *fn, tth_rexpr ***out);

/* The expressions e reads, in order (CALL: its arguments; TUPLE: its fields; TUPLE_GET: the
 * tuple; VAR, CONST: none): *out is set to e's own array of the returned count. The one place
 * that knows each kind's operands, as tth_tir_expr_children is for TIR. */
TTH_API size_t tth_relay_expr_args(const tth_rexpr *e, tth_rexpr *const **out);

/* ---- Users and readers: what a plugin's pattern matcher asks around one call ---- */

/* Who uses each node of one function (calls, tuples, tuple_gets), built in one pass. */
typedef struct tth_relay_users tth_relay_users;
/* The index of fn in *cache: *cache itself when it was built for fn and nothing was added to the
 * module's arena since (no node added, no function outlined), else *cache is freed and rebuilt.
 * The caller owns *cache (tth_relay_users_free). NULL on out of memory. */
TTH_API const tth_relay_users *tth_relay_users_of(tth_relay_users **cache, const tth_relay_function *fn);
TTH_API void tth_relay_users_free(tth_relay_users *u);
/* How many users e has; the function's result counts as one more (it leaves the function). */
TTH_API size_t tth_relay_nusers(const tth_relay_users *u, const tth_rexpr *e);
/* The i-th user (producers first), or NULL for the function result / out of range. */
TTH_API const tth_rexpr *tth_relay_user(const tth_relay_users *u, const tth_rexpr *e, size_t i);
/* The only user when e has exactly one and it is a call of op; else NULL. */
TTH_API const tth_rexpr *tth_relay_sole_user_op(const tth_relay_users *u, const tth_rexpr *e, tth_op op);

/* e is a call of op. */
TTH_API int tth_rexpr_is_op(const tth_rexpr *e, tth_op op);
/* e's constant, or NULL when e is not a constant. */
TTH_API const tth_tensor *tth_rexpr_const(const tth_rexpr *e);
/* A constant with one element (or every element equal): its value in *v; 1 if so. */
TTH_API int tth_rexpr_const_scalar(const tth_rexpr *e, double *v);
/* Every element of a constant is zero. */
TTH_API int tth_rexpr_const_all_zero(const tth_rexpr *e);
/* An integer array attribute of a call (e.g. "strides"): the count read (at most max), -1 when absent. */
TTH_API int tth_call_attr_ints(const tth_rexpr *call, const char *key, int64_t *out, int max);
/* An integer (or boolean) attribute, dflt when absent. */
TTH_API int64_t tth_call_attr_int(const tth_rexpr *call, const char *key, int64_t dflt);
/* A number attribute, dflt when absent. */
TTH_API double tth_call_attr_real(const tth_rexpr *call, const char *key, double dflt);
/* The tensor type of an expression (NULL for tuples). */
TTH_API const tth_ttype *tth_rexpr_ttype(const tth_rexpr *e);
/* "int8[1, 3, 8, 8]", or "tuple", in buf. */
TTH_API const char *tth_rexpr_type_str(const tth_rexpr *e, char *buf, size_t len);

/* Check the module: types agree with a fresh inference, vars are params of their function,
 * no cycles, callee functions exist, attribute objects match the op table. */
TTH_API int tth_relay_verify(const tth_relay_module *m, tth_diag *diag);

/* Readable text (malloc'd; free()), e.g.
 *   fn @main(%x: float32[1, 3, 8, 8]) -> float32[1, 4, 8, 8] {
 *     %1 = nn.conv2d(%x, @c0, {"strides": [1, 1], ...}) : float32[1, 4, 8, 8]
 *     ...
 *   }
 * Constants are printed by reference (@c0: float32[4, 3, 3, 3] #<hash>), never inline. */
TTH_API char *tth_relay_print(const tth_relay_module *m);
TTH_API char *tth_relay_print_function(const tth_relay_function *fn);

/* JSON form (new reference): {"name", "functions": [{"name", "attrs", "params": [...],
 * "nodes": [{"id", "kind", "op", "args": [ids], "attrs", "type"}], "result": id}],
 * "constants": [{"id", "name", "type", "hash"}]}. Constants by reference only. Round-trips
 * through tth_relay_from_json given the same constant tensors (looked up by hash). */
TTH_API json_t *tth_relay_to_json(const tth_relay_module *m);
TTH_API tth_relay_module *tth_relay_from_json(const json_t *j, tth_tensor *const *constants,
                                              size_t nconstants, tth_diag *diag);

#ifdef __cplusplus
}
#endif
#endif
