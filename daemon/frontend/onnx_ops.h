/* onnx_ops.h: what the operator importers (onnx_<family>.c) share: reading attributes and
 * constant inputs, building checked op calls, and the helpers of more than one family. The names
 * are short because every importer uses them; they are hidden, for the importer files only. */
#ifndef TTH_ONNX_OPS_H
#define TTH_ONNX_OPS_H

#include "onnx_import.h"

#define MAXV 64 /* longest int/float list attribute or value we read */

#define NEED(k)                                 \
    do {                                        \
        int rc_ = need(c, in, nin, (k));         \
        if (rc_)                                \
            return rc_;                         \
        if ((rc_ = tensor_input(c, in, nin)))   \
            return rc_;                         \
    } while (0)
#define CHECK(e)                                                             \
    do {                                                                     \
        if (!(e))                                                            \
            return c->diag && c->diag->code ? c->diag->code : TTH_EINTERNAL; \
    } while (0)

typedef struct spatial {
    int64_t k[3], s[3], d[3], pb[3], pe[3], outpad[3];
} spatial;

#pragma GCC visibility push(hidden)

/* The op call, type-checked and size-limited, not folded. */
tth_rexpr *call_unfolded(tth_onnx_ctx *c, tth_op op, tth_rexpr *const *args, size_t n, json_t *attrs);

/* The op call, folded when its arguments are constants (small enough). */
tth_rexpr *call(tth_onnx_ctx *c, tth_op op, tth_rexpr *const *args, size_t n, json_t *attrs);

tth_rexpr *call1(tth_onnx_ctx *c, tth_op op, tth_rexpr *a, json_t *attrs);

tth_rexpr *call2(tth_onnx_ctx *c, tth_op op, tth_rexpr *a, tth_rexpr *b, json_t *attrs);

const Onnx__AttributeProto *attr(tth_onnx_ctx *c, const char *name);

int64_t ai(tth_onnx_ctx *c, const char *name, int64_t dflt);

double af(tth_onnx_ctx *c, const char *name, double dflt);

/* String attribute (NUL-terminated copy in the module arena). */
const char *as(tth_onnx_ctx *c, const char *name, const char *dflt);

/* Int list attribute, borrowed: its values in *v and their count (-1 absent); -2 with diag (code)
 * when longer than max. */
int64_t aints_view(tth_onnx_ctx *c, const char *name, size_t max, int code, const int64_t **v);

/* Int list attribute: count (-1 absent); -2 with diag when longer than max. */
int aints(tth_onnx_ctx *c, const char *name, int64_t *out, int max);

/* Integer values of a constant input. Returns count, or -2 with diag. */
int vints(tth_onnx_ctx *c, tth_rexpr *e, const char *what, int64_t *out, int max);

/* A constant scalar input (any dtype) as double; returns 0 or negative with diag. */
int vscalar(tth_onnx_ctx *c, tth_rexpr *e, const char *what, double *out);

tth_rexpr *k_tensor(tth_onnx_ctx *c, tth_tensor *t);

/* An int64 constant of that shape holding 0, 1, 2... in row-major order. */
tth_rexpr *k_iota(tth_onnx_ctx *c, const int64_t *shape, int r);

tth_rexpr *k_scalar(tth_onnx_ctx *c, tth_dtype dt, double v);

const tth_ttype *tt(const tth_rexpr *e);
int rank(const tth_rexpr *e);

int norm_axis(tth_onnx_ctx *c, int64_t axis, int r, int64_t *out);

tth_rexpr *reshape(tth_onnx_ctx *c, tth_rexpr *x, const int64_t *shape, int r);

tth_rexpr *cast_to(tth_onnx_ctx *c, tth_rexpr *x, tth_dtype dt);

int need(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, size_t k);

int tensor_input(tth_onnx_ctx *c, tth_rexpr **in, size_t nin);

int bin(tth_onnx_ctx *c, tth_op op, tth_rexpr **in, size_t nin, tth_rexpr **out, json_t *attrs);

/* Kernel/stride/dilation/pads for nsp (1 to 3) spatial dims, auto_pad resolved. in_hw: input
 * spatial sizes. Fills 2-D values for 1-D and 2-D (a 1-D op gets a leading size-1 dim), and
 * the three axes (depth first) for 3-D. */
int spatial_attrs(tth_onnx_ctx *c, int nsp, const int64_t *in_hw, const int64_t *kernel, int transpose,
                         spatial *sp);

json_t *pads_json(const spatial *sp);

/* A rank-3 (N, C, L) tensor as (N, C, 1, L); rank 4 unchanged; others unsupported. */
tth_rexpr *to4d(tth_onnx_ctx *c, tth_rexpr *x, const char *what);

tth_rexpr *from4d(tth_onnx_ctx *c, tth_rexpr *y, int orig_rank);

/* idx + dims where idx < 0 (dims broadcast against idx): ONNX's negative indices. */
tth_rexpr *wrap_negative(tth_onnx_ctx *c, tth_rexpr *idx, tth_rexpr *dims);

/* GatherElements as a gather from the flattened data: out[i] = data[i with i_axis replaced by
 * index[i]]. The flat offset of every output element but the axis' part is a constant of the
 * static shapes (a grid computed here); the index, wrapped when negative, adds index * stride.
 * docs/operators.md "ONNX operators composed in the importer". */
tth_rexpr *gather_elements(tth_onnx_ctx *c, tth_rexpr *data, tth_rexpr *index, int64_t axis);

int scatter_flat(tth_onnx_ctx *c, tth_rexpr *data2, tth_rexpr *pos, tth_rexpr *upd2, const char *red,
                        tth_rexpr **out);

tth_rexpr *slice_axis(tth_onnx_ctx *c, tth_rexpr *x, int axis, int64_t lo, int64_t hi);

tth_rexpr *kx(tth_onnx_ctx *c, tth_rexpr *like, double v);

/* The families' rows of the operator table, each ended by a row of NULL name. */
extern const tth_onnx_op tth__onnx_elementwise_ops[], tth__onnx_nn_ops[], tth__onnx_reduce_ops[],
    tth__onnx_shape_ops[], tth__onnx_control_ops[], tth__onnx_quant_ops[], tth__onnx_signal_ops[],
    tth__onnx_training_ops[], tth__onnx_training_domain_ops[];

#pragma GCC visibility pop

#endif
