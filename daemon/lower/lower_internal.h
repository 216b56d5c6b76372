/* lower_internal.h: what the lowering's files share: the lowering context, the value/sink model
 * and the small TIR-building helpers.
 *
 * The model. Every node of the function is reached in one of three ways:
 *  - through a buffer (a param, a constant, an output, or a LOCAL intermediate): loads;
 *  - inline: a pointwise op call is an expression of its arguments' values at the same index
 *    (numpy broadcasting maps the index down to each argument);
 *  - the epilogue slot: while an anchor stores an element, its value is a TIR expression and the
 *    pointwise chain after it is evaluated around that value (lw_sink_store).
 * A "stage" op (conv, pool, ...) writes its result through a sink: one destination buffer per
 * result field, and optionally the pointwise node whose expression is the epilogue.
 */
#ifndef TTH_LOWER_INTERNAL_H
#define TTH_LOWER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "lower.h"

typedef struct lw_ctx lw_ctx;

/* What the driver knows about one node of the function body. */
typedef struct lw_node {
    const tth_rexpr *e;
    int consumers;            /* uses inside the function (an arg used twice counts twice) */
    int stage_use;            /* used by something that needs a buffer (stage op, output, tuple) */
    int broadcast_use;        /* a pointwise consumer has LW_BROADCAST_REUSE times its elements */
    int materialize;          /* gets a buffer (or buffers, for a tuple-producing call) */
    int cost;                 /* inline pointwise node: ops recomputed per use */
    tth_tbuffer *buf;         /* tensor: the buffer holding it once computed */
    tth_tbuffer **fields;     /* tuple-producing call: one buffer per field */
    struct lw_node *fused_into; /* anchor: the pointwise node it writes through its epilogue */
    struct lw_node *anchor;   /* pointwise node: the anchor fused into it */
    int emitted;
    int rq_made;              /* requantize: in_scale / out_scale divided at compile time
                                 (lower_quant.c): rq_table per axis element, or rq_scalar */
    float rq_scalar;
    tth_tbuffer *rq_table;
    int rq_finite;            /* requantize: every quotient is finite */
} lw_node;

/* Where a stage op writes. */
typedef struct lw_sink {
    tth_tbuffer **dest;       /* one per field (1 for a tensor result) */
    int nfields;
    const tth_rexpr *anchor;  /* the op call being stored */
    const tth_rexpr *epi;     /* pointwise node evaluated around the anchor's value, or NULL */
} lw_sink;

#define LW_MAX_HOIST 32

/* a value bound by LET around the statement that uses it (lw_bind) */
typedef struct lw_let_rec {
    tth_tvar *var;
    tth_texpr *value;
} lw_let_rec;
#define LW_MAX_RESULTS 256            /* results of one function */
/* the largest REGISTER buffer (on the stack of the code that runs it) a kernel makes: the llvm
 * code generator refuses larger ones (plugins/llvm-cpu/codegen_func.c, lower_allocate) */
#define LW_STACK_BUFFER_MAX 16384
#define LW_MAX_LOCALS 1024            /* intermediate buffers of one function */

struct lw_ctx {
    tth_tir_module *m;
    tth_vector_shape vec;     /* the target's vector width and registers (docs/targets.md) */
    int cores;                /* the target's num-cores, 0 when it does not say (docs/threads.md) */
    int dot;                  /* the four-byte dot product the int8 kernels use (docs/int8.md):
                                 TTH_TINTRIN_DOT4_US (x86, AArch64 with i8mm) or DOT4_SS (other
                                 AArch64 and Arm), 0 on a target without vectors */
    int dot_native;           /* the target has c->dot as one instruction (x86 VNNI, AArch64
                                 dotprod / i8mm), not as the code generator's widened multiplies */
    int generic;              /* the function's attrs say "Generic": no strategy, the generic lowering
                                 of every op (options.reference, docs/tthctl.md "validate") */
    json_t *strategies;       /* names of the strategies used (attrs "strategies") */
    json_t *strategy_why;     /* for each, why it (attrs "strategy_why"; docs/lowering.md) */
    tth_diag *diag;
    const tth_relay_function *fn;
    const char *fname;        /* the PrimFunc's name: prefix of constant buffer names */
    lw_node *nodes;           /* one per topo node */
    size_t nnodes;
    uint32_t *hkeys;          /* open-addressing map rexpr id -> node index + 1 */
    uint32_t *hvals;
    size_t hcap;
    /* epilogue slot */
    const tth_rexpr *slot_node;
    tth_texpr *slot_value;
    /* flat mode: every leaf of the inline tree has 1 or flat_n elements */
    tth_texpr *flat;
    int64_t flat_n;
    /* hoisting of loop-invariant index arithmetic out of the innermost loop */
    int hoist_on;
    tth_tvar *hoist_inner;               /* the innermost loop variable */
    tth_tvar *hoist_allowed[TTH_MAX_RANK + 4]; /* variables a hoisted expression may use */
    int nhoist_allowed;
    tth_texpr *hoist_expr[LW_MAX_HOIST];
    tth_tvar *hoist_var[LW_MAX_HOIST];
    int nhoist;
    unsigned nvars, nbufs, nconsts;
    /* values bound once inside the open scopes (lower_math.c) */
    lw_let_rec *lets;
    size_t nlets, caplets;
    int let_scopes;
};

/* Per-op lowering functions. A pointwise op has `value`; every other op has `stage`. */
typedef tth_texpr *(*lw_value_fn)(lw_ctx *c, const tth_rexpr *call, tth_texpr *const *idx);
typedef tth_tstmt *(*lw_stage_fn)(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
typedef int (*lw_check_fn)(const tth_rexpr *call, char *why, size_t len);

typedef struct lw_op_impl {
    lw_value_fn value;
    lw_stage_fn stage;
    lw_check_fn check;        /* dtype/attribute checks beyond the common ones; may be NULL */
    int needs_idx;            /* value reads per-dimension indices: its arguments 1 on are
                                 parameters along attribute "axis" (default 1); no flat mode */
    int half;                 /* float16 and bfloat16 accepted: pointwise ops compute in float32,
                               * movement ops copy */
} lw_op_impl;

const lw_op_impl *lw_op_lookup(tth_op op);

/* A strategy: a target-aware way to lower one op (docs/lowering.md, "Strategies"). The table in
 * lower_strategies.c is tried in order for a stage op; the first whose `applies` says yes lowers
 * it, and the op's generic `stage` (lw_op_lookup) is the last resort. `applies` reads the call,
 * the sink (its epilogue) and the target's vector shape (c->vec). */
typedef struct lw_strategy {
    tth_op op;
    const char *name;         /* "<op>/<kernel>", recorded in the PrimFunc's attrs */
    int (*applies)(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
    lw_stage_fn lower;
} lw_strategy;
/* The first row of the table for call's op whose conditions hold, or NULL; skipped (when given)
 * gets the names of the op's rows tried before it, ", "-separated (attrs "strategy_why"). */
const lw_strategy *lw_strategy_for(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s, char *skipped,
                                   size_t len);
/* the table's rows, for tests */
const lw_strategy *lw_strategy_table(size_t *n);

/* nn.attention (lower_attention.c): blocks of query rows, their scores on the task's stack */
tth_tstmt *lw_attention(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
int lw_attention_check(const tth_rexpr *call, char *why, size_t len);
int lw_attention_tiled_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
/* nn.layer_norm (lower_norm.c): rows in vectors, one lane on scalar targets */
tth_tstmt *lw_layer_norm(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
int lw_layer_norm_check(const tth_rexpr *call, char *why, size_t len);
int lw_layer_norm_rows_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
/* The output index of a row-wise kernel (softmax, layer norm over the last axis): flat row `row`
 * of a tensor of type xt, columns at .. at + lanes (a ramp; the column itself for one lane). */
void lw_row_idx(lw_ctx *c, const tth_ttype *xt, tth_texpr *row, tth_texpr *at, int lanes, tth_texpr **idx);

/* the strategies' kernels (lower_conv_tiled.c, lower_matmul.c) */
int lw_conv_pixel_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
tth_tstmt *lw_conv_pixel(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
int lw_conv_depthwise_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
tth_tstmt *lw_conv_depthwise(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
int lw_conv_winograd_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
tth_tstmt *lw_conv_winograd(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
int lw_conv_rows_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
tth_tstmt *lw_conv_rows(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
int lw_conv_blocked_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
tth_tstmt *lw_conv_blocked(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
/* NCHW<b>c convolutions (docs/layouts.md): the channel-blocked kernel with blocked input and
 * output (lower_conv_tiled.c), the depthwise kernel on channel vectors (lower_conv_nchwc.c) */
int lw_conv_nchwc_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
int lw_conv_depthwise_nchwc_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
tth_tstmt *lw_conv_depthwise_nchwc(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
int lw_matmul_batched_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
tth_tstmt *lw_matmul_batched(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
int lw_softmax_rows_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
tth_tstmt *lw_softmax_rows(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
int lw_matmul_tiled_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
tth_tstmt *lw_matmul_tiled(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);

/* ---- math functions of float32 as arithmetic (lower_math.c, docs/lowering.md) ---- */
typedef enum lw_math_fn { LW_MATH_EXP, LW_MATH_TANH, LW_MATH_ERF, LW_MATH_SIGMOID } lw_math_fn;
/* fn(x) for a float expression of any lanes: float32 (float16, bfloat16 through float32) as
 * polynomials on the value's bits, float64 through the C library */
tth_texpr *lw_math(lw_ctx *c, lw_math_fn fn, tth_texpr *x);
/* A scope for lw_bind: values it binds become LETs around the statement lw_lets_close wraps
 * (outside a scope lw_bind returns the expression itself, used as many times as it appears).
 * Open before building the value a store writes, close with that store. */
int lw_lets_open(lw_ctx *c);
tth_tstmt *lw_lets_close(lw_ctx *c, int mark, tth_tstmt *st);
tth_texpr *lw_bind(lw_ctx *c, tth_texpr *e);

/* ---- family entry points (lower_<family>.c) ---- */
/* elementwise */
tth_texpr *lw_ew_binary(lw_ctx *c, const tth_rexpr *call, tth_texpr *const *idx);
tth_texpr *lw_ew_unary(lw_ctx *c, const tth_rexpr *call, tth_texpr *const *idx);
tth_texpr *lw_ew_where(lw_ctx *c, const tth_rexpr *call, tth_texpr *const *idx);
tth_texpr *lw_ew_batch_norm(lw_ctx *c, const tth_rexpr *call, tth_texpr *const *idx);
int lw_ew_check(const tth_rexpr *call, char *why, size_t len);
/* conv */
typedef struct lw_conv_p {
    int64_t N, C, H, W, O, OH, OW, KH, KW;
    int64_t sh, sw, dh, dw, pt, pl, pb, pr, groups;
    int quant, transpose;
    tth_dtype acc;
    int64_t xb, ob;           /* input and output channel blocks: 0 for NCHW, b for NCHW<b>c
                                 (docs/layouts.md); C and O count channels, not blocks */
} lw_conv_p;
/* the shapes and attributes of a conv call; 0 with `why` when they are not supported */
int lw_conv_params(const tth_rexpr *call, lw_conv_p *p, char *why, size_t len);
tth_tstmt *lw_conv2d(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
tth_tstmt *lw_conv2d_transpose(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
int lw_conv_check(const tth_rexpr *call, char *why, size_t len);
/* matmul */
tth_tstmt *lw_matmul(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
int lw_matmul_check(const tth_rexpr *call, char *why, size_t len);
/* pool */
tth_tstmt *lw_pool2d(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
tth_tstmt *lw_max_pool2d_argmax(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
tth_tstmt *lw_det(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
int lw_det_check(const tth_rexpr *call, char *why, size_t len);
/* strategies max_pool2d/row-vectorized and avg_pool2d/row-vectorized (lower_pool.c) */
int lw_pool_rows_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
tth_tstmt *lw_pool_rows(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
tth_tstmt *lw_global_pool2d(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
int lw_pool_check(const tth_rexpr *call, char *why, size_t len);
/* reduce */
tth_tstmt *lw_reduce(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
tth_tstmt *lw_argreduce(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
int lw_reduce_check(const tth_rexpr *call, char *why, size_t len);
/* shape */
tth_tstmt *lw_reshape(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
tth_tstmt *lw_transpose(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
tth_tstmt *lw_broadcast_to(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
tth_tstmt *lw_concatenate(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
tth_tstmt *lw_split(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
tth_tstmt *lw_strided_slice(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
tth_tstmt *lw_take(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
tth_tstmt *lw_pad(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
int lw_shape_check(const tth_rexpr *call, char *why, size_t len);
/* softmax */
tth_tstmt *lw_softmax(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
int lw_softmax_check(const tth_rexpr *call, char *why, size_t len);
/* resize */
tth_tstmt *lw_resize2d(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
int lw_resize_check(const tth_rexpr *call, char *why, size_t len);
/* roi_align */
tth_tstmt *lw_roi_align(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
int lw_roi_align_check(const tth_rexpr *call, char *why, size_t len);
/* grid */
tth_tstmt *lw_grid_sample(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
int lw_grid_sample_check(const tth_rexpr *call, char *why, size_t len);
/* the function's node of e, NULL when e is not in it */
lw_node *lw_node_of(lw_ctx *c, const tth_rexpr *e);
/* 1 when e is a constant of an integer dtype (the int8 kernels' zero points) */
int lw_int_const(const tth_rexpr *e);
/* What the int8 kernels share (lower_quant.c, docs/int8.md): koff, added to each input byte of
 * dtype x to put it in the range the first operand of the dot product `dot` takes; 1 when xz is a constant scalar
 * and wz constant zeros (the zero points the kernels take), *xzp then x's; comp, the constant
 * -(xzp + koff) * wsum added to an accumulator whose weights sum to wsum; and the int32 word of
 * four bytes (each plus koff, a NULL byte the padding byte padv), `lanes` lanes */
int64_t lw_dot_koff(int dot, tth_dtype x);
int lw_dot_zero_points(const tth_rexpr *xz, const tth_rexpr *wz, int64_t *xzp);
int32_t lw_dot_comp(int64_t xzp, int64_t koff, int64_t wsum);
tth_texpr *lw_dot_word(lw_ctx *c, tth_texpr *const bytes[4], int64_t koff, int64_t padv, int lanes);
/* strategy qnn.conv2d/int8-dot-rows (lower_conv_int8.c) */
int lw_qconv_dot_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
tth_tstmt *lw_qconv_dot(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
/* strategy conv2d/groups-nchwc (lower_conv_nchwc.c): groups of at most TTH_LOWER_SMALL_GROUP_MAX */
int lw_conv_groups_nchwc_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
tth_tstmt *lw_conv_groups_nchwc(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
/* strategy qnn.conv2d/int8-depthwise-nchwc (lower_conv_int8.c) */
int lw_qconv_depthwise_nchwc_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
tth_tstmt *lw_qconv_depthwise_nchwc(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
/* strategy qnn.matmul/int8-dot (lower_matmul.c) */
int lw_qmatmul_dot_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
tth_tstmt *lw_qmatmul_dot(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
/* strategy qnn.conv2d/int8-dot-blocked (lower_conv_int8.c) */
int lw_qconv_blocked_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
tth_tstmt *lw_qconv_blocked(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
/* strategy qnn.conv2d/int8-depthwise-rows (lower_conv_int8.c) */
int lw_qconv_depthwise_applies(const lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
tth_tstmt *lw_qconv_depthwise(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);
/* quant */
tth_texpr *lw_quantize(lw_ctx *c, const tth_rexpr *call, tth_texpr *const *idx);
tth_texpr *lw_dequantize(lw_ctx *c, const tth_rexpr *call, tth_texpr *const *idx);
tth_texpr *lw_requantize(lw_ctx *c, const tth_rexpr *call, tth_texpr *const *idx);
int lw_quant_check(const tth_rexpr *call, char *why, size_t len);

/* ---- helpers (lower.c) ---- */
const tth_ttype *lw_ty(const tth_rexpr *e);            /* the tensor type (NULL for a tuple) */
const tth_rexpr *lw_arg(const tth_rexpr *call, size_t i);
int64_t lw_numel(const int64_t *shape, int rank);
int lw_fail(lw_ctx *c, int code, const tth_rexpr *call, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The window (strides, dilation, padding; pool size or groups) of a conv or pool call; 0, or -1
 * with `why` */
int lw_window_attrs(const tth_rexpr *call, tth_window_attrs *a, char *why, size_t len);
/* 0 when check accepts the call, else -1 with TTH_EUNSUPPORTED and check's reason */
int lw_check_call(lw_ctx *c, const tth_rexpr *call, lw_check_fn check);
/* 1 when t is a floating-point dtype, else 0 and `why` says op takes floating point only */
int lw_float_only(const char *op, tth_dtype t, char *why, size_t len);

/* attributes (a missing key gives the default) */
int64_t lw_attr_int(const tth_rexpr *call, const char *key, int64_t def);
double lw_attr_float(const tth_rexpr *call, const char *key, double def);
int lw_attr_has(const tth_rexpr *call, const char *key);
const char *lw_attr_str(const tth_rexpr *call, const char *key, const char *def);
/* an integer array: its count (all stored), or -1 when absent, not an array of integers or longer
 * than max */
int lw_attr_ints(const tth_rexpr *call, const char *key, int64_t *out, int max);

/* expressions */
tth_texpr *lw_i(lw_ctx *c, int64_t v);                 /* int64 immediate */
tth_texpr *lw_imm(lw_ctx *c, tth_dtype t, double v);   /* immediate of any dtype */
tth_texpr *lw_add(lw_ctx *c, tth_texpr *a, tth_texpr *b);
tth_texpr *lw_sub(lw_ctx *c, tth_texpr *a, tth_texpr *b);
tth_texpr *lw_mul(lw_ctx *c, tth_texpr *a, tth_texpr *b);
tth_texpr *lw_bin(lw_ctx *c, tth_tir_binop op, tth_texpr *a, tth_texpr *b);
tth_texpr *lw_cast(lw_ctx *c, tth_dtype t, tth_texpr *v); /* no-op when already t */
tth_tvar *lw_var(lw_ctx *c, const char *prefix, tth_dtype t);
/* Weights repacked at compile time for a kernel: a zeroed float32 tensor of n elements (NULL on
 * OOM, diag set), then made a CONST buffer of the function (takes pk's reference). */
tth_tensor *lw_packed_new(lw_ctx *c, int64_t n);
/* the same for a table of n elements of dtype t, a copy of data (zeros for NULL) */
tth_tensor *lw_table_new(lw_ctx *c, tth_dtype t, int64_t n, const void *data);
tth_tbuffer *lw_packed_const(lw_ctx *c, tth_tensor *pk);

/* a fresh variable of `lanes` lanes (a scalar for 1), named prefix<n>; NULL on OOM (diag set) */
tth_tvar *lw_var_vec(lw_ctx *c, const char *prefix, tth_dtype t, int lanes);
tth_texpr *lw_ref(lw_ctx *c, tth_tvar *v);
/* lowest / highest finite value of a dtype */
double lw_dtype_lowest(tth_dtype t);
double lw_dtype_highest(tth_dtype t);

/* row-major flat index of idx in shape (hoists the loop-invariant part when hoisting is on) */
tth_texpr *lw_flat(lw_ctx *c, const int64_t *shape, int rank, tth_texpr *const *idx);
tth_texpr *lw_load_at(lw_ctx *c, tth_tbuffer *b, tth_texpr *const *idx);
tth_tstmt *lw_store_at(lw_ctx *c, tth_tbuffer *b, tth_texpr *const *idx, tth_texpr *v);
/* numpy broadcasting: the index into `in` for index idx of `out` */
void lw_bcast_idx(lw_ctx *c, const tth_ttype *out, const tth_ttype *in, tth_texpr *const *idx,
                  tth_texpr **in_idx);

/* values */
tth_texpr *lw_value_at(lw_ctx *c, const tth_rexpr *e, tth_texpr *const *idx);
/* value of argument i of a pointwise call at the call's index idx (broadcast down) */
tth_texpr *lw_arg_at(lw_ctx *c, const tth_rexpr *call, size_t i, tth_texpr *const *idx);
/* value of a per-axis parameter (a scalar, or a tensor whose last dimension runs along the axis)
 * at position axis_idx of that axis */
tth_texpr *lw_axis_value(lw_ctx *c, const tth_rexpr *a, tth_texpr *axis_idx);
/* the buffer holding a tensor node (param, constant, computed intermediate) */
tth_tbuffer *lw_buf(lw_ctx *c, const tth_rexpr *e);
tth_tbuffer *lw_local(lw_ctx *c, const char *prefix, tth_dtype t, int rank, const int64_t *shape);
/* A register tile of nvec float32 vectors of vl lanes (a REGISTER buffer: the code generators keep
 * it in registers), with the statements that zero it appended to *init. NULL on OOM. */
tth_tbuffer *lw_reg_tile(lw_ctx *c, int64_t nvec, int vl, tth_tstmt **init);
/* the same of another dtype (int32 accumulators of the int8 kernels) */
tth_tbuffer *lw_reg_tile_of(lw_ctx *c, tth_dtype t, int64_t nvec, int vl, tth_tstmt **init);
/* a * b + acc: one FMA where the target has the instruction, else a multiply and an add (an FMA
 * without the instruction is a library call per lane) */
tth_texpr *lw_madd(lw_ctx *c, tth_texpr *a, tth_texpr *b, tth_texpr *acc);

/* sinks */
tth_tstmt *lw_sink_store(lw_ctx *c, const lw_sink *s, int field, tth_texpr *const *idx, tth_texpr *value);
/* the same for field 0, the result (in the field's dtype) stored as a vector at element `at` of
 * buffer `to` instead (a kernel that writes its outputs elsewhere first: the epilogue's tensors
 * are then read at idx all the same) */
tth_tstmt *lw_sink_store_to(lw_ctx *c, const lw_sink *s, tth_texpr *const *idx, tth_texpr *value, tth_tbuffer *to,
                            tth_texpr *at);
/* may the stage accumulate directly in dest[field] (same dtype)? */
int lw_sink_direct(const lw_sink *s, int field, tth_dtype acc);

/* loops */
typedef tth_tstmt *(*lw_body_fn)(lw_ctx *c, tth_texpr *const *idx, void *arg);
#define LW_PARALLEL 1
#define LW_VECTOR 2
#define LW_ROWS 4
/* Loops over every index of shape (dims of extent 1 get the index 0 and no loop), with body(idx)
 * innermost. flags: LW_PARALLEL marks the outermost loop parallel when the work is big,
 * LW_VECTOR marks the innermost loop vectorized (it must be the last dimension), LW_ROWS (with
 * LW_PARALLEL) puts the rows of a batch-1 image (axis 2 of rank 4 or 5) outermost, split
 * among the cores as the convolutions split them. Hoists
 * loop-invariant index arithmetic of the innermost loop into LETs. */
tth_tstmt *lw_nest(lw_ctx *c, const int64_t *shape, int rank, int flags, lw_body_fn body, void *arg);
/* One loop: for (v = min; v < min + extent; v++) body. */
tth_tstmt *lw_for(lw_ctx *c, tth_tvar *v, tth_texpr *min, tth_texpr *extent, tth_loop_kind k, tth_tstmt *body);
/* A loop axis: extent 1 gives no loop and the index 0. */
typedef struct lw_ax {
    tth_tvar *v;
    tth_texpr *e;             /* the index: a reference to v, or 0 */
    int64_t n;
} lw_ax;
int lw_ax_make(lw_ctx *c, lw_ax *a, const char *prefix, int64_t n);
/* Bands of rows, one per core (docs/threads.md, "Locality"): rows split into at most the
 * target's num-cores bands (one without it) of *per rows each, the last shorter when they do not
 * divide. Returns how many bands that makes. */
int64_t lw_bands(const lw_ctx *c, int64_t rows, int64_t *per);
/* for v over band b's rows [b*per, min(b*per + per, rows)): a serial loop around body */
tth_tstmt *lw_band_loop(lw_ctx *c, tth_tvar *v, tth_texpr *b, int64_t per, int64_t rows, tth_tstmt *body);
tth_tstmt *lw_ax_loop(lw_ctx *c, const lw_ax *a, tth_loop_kind k, tth_tstmt *body);
/* let v = value in body(v) helpers */
tth_tstmt *lw_let(lw_ctx *c, tth_tvar *v, tth_texpr *value, tth_tstmt *body);
/* ceil(a / b) and floor(a / b) for int64 expressions, b > 0 */
tth_texpr *lw_ceildiv(lw_ctx *c, tth_texpr *a, int64_t b);
tth_texpr *lw_floordiv(lw_ctx *c, tth_texpr *a, int64_t b);
/* The values of a window's loop variable v in [0, n) whose coordinate v*vs + f*fs - pad lies in
 * [0, span), f an expression of the other loop (with values in [0, fn)), as [lo, lo + ext):
 * lo = max(0, ceil((pad - f*fs) / vs)), ext = max(0, min(n, floor((span - 1 + pad - f*fs) / vs)
 * + 1) - lo); the constants 0 and n when no f ever leaves [0, span). A convolution's output
 * rows for kernel row f (fs the dilation, vs the stride), a pooling's taps for output row f. */
void lw_window_range(lw_ctx *c, tth_texpr *f, int64_t fs, int64_t vs, int64_t pad, int64_t span, int64_t n,
                     int64_t fn, tth_texpr **lo, tth_texpr **ext);
/* Append s to *seq (NULL s is skipped); returns 0 or a negative code */
int lw_append(lw_ctx *c, tth_tstmt **seq, tth_tstmt *s);

/* A pointwise node used several times is recomputed per use (inline) while its inline subtree
 * has at most this many ops and it has at most this many uses; else it gets a buffer. */
#define LW_INLINE_MAX_COST 3
#define LW_INLINE_MAX_USES 4
/* A pointwise node a pointwise consumer broadcasts to at least this many times its elements gets
 * a buffer: inline, it would be recomputed for every element of the consumer (a squeeze-and-
 * excitation block's sigmoid of 144 channel scales, recomputed for each of 451,584 elements
 * of the feature map it scales; docs/lowering.md, "What gets a buffer"). */
#define LW_BROADCAST_REUSE 8

/* Work of at least this many elements or multiply-adds gets a parallel outer loop: below it (a
 * few microseconds) a launch and the cores' cache traffic cost more than the split saves
 * (bench/README.md: 4096 made ShuffleNet-v2 slower on two threads than on one). */
#define LW_PARALLEL_MIN (1 << 18)
/* The work of one element of a row-wise softmax, counted against LW_PARALLEL_MIN: its exp, a
 * polynomial of about thirty operations, with the row's max and sum (Swin-T's [4, 12, 49, 49]
 * softmax, 115,248 elements, took 190 us on one core, far above the few microseconds the bound
 * stands for; docs/threads.md) */
#define LW_SOFTMAX_WORK 32
/* The same for an element of a layer normalization: three passes over its row (the mean, the
 * variance, the result), each a few vector operations */
#define LW_NORM_WORK 4
/* A matmul whose constant B has at least this many bytes is split among the cores whatever its
 * work (lower_matmul.c): a core's slice of B then stays in its own cache between calls, where a
 * recurrent layer's steps read it again (docs/threads.md, "Locality"). */
#define LW_PARALLEL_WEIGHT_BYTES (256 << 10)
/* The same for the int8 kernels on dot products (docs/int8.md, "Threads"), counted in
 * multiply-adds: one instruction does four a lane, so the same time is four times the work. */
#define LW_PARALLEL_MIN_DOT (4 * LW_PARALLEL_MIN)
/* The depthwise kernel along rows (lower_conv_tiled.c), counted in multiply-adds: each input
 * element it loads serves one multiply-add a tap, where a dense layer's serves a tile of them,
 * so the same work takes about four times as long (MobileNet-v2's 576-channel stride-2 layer,
 * 254,016 of them, ran 50 us on one core of two). */
#define LW_PARALLEL_MIN_DW (LW_PARALLEL_MIN / 4)
/* A channel concatenation of an image is split among the cores by rows from this many elements
 * (lower_shape.c): its inputs were written split by rows, so copied on one core it would pull
 * half of them from the other's cache, and write rows the other core reads next. DenseNet-121
 * on two threads: 24.9 ms with LW_PARALLEL_MIN, 21.9 with this (bench/README.md). */
#define LW_ROWS_PARALLEL_MIN (1 << 12)

/* Substitute LETs bound to integer immediates and one-iteration loops, drop empty loops and
 * constant IFs (lower_simplify.c). NULL on OOM (diag set). */
tth_tstmt *lw_simplify(lw_ctx *c, tth_tstmt *body);

/* The generic stage of a pointwise op used as an anchor: loop over its shape and store. */
tth_tstmt *lw_pointwise_stage(lw_ctx *c, const tth_rexpr *call, const lw_sink *s);

#endif
