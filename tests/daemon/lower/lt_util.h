/* lt_util.h: helpers of the lowering tests: the node test data of /usr/share/libonnx-testdata
 * (read by the runtime's TensorProto reader), building one-function Relay modules, lowering them,
 * running the TIR interpreter and comparing tensors. */
#ifndef LT_UTIL_H
#define LT_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "lower.h"

#define LT_ONNX_DIR "/usr/share/libonnx-testdata/data/node"

/* Read an ONNX TensorProto file (tthrt_pb_read). NULL on error (msg says why). */
tth_tensor *lt_read_pb(const char *path, char *msg, size_t len);
/* input_<i>.pb / output_<i>.pb of test_data_set_0 of an ONNX node test; NULL when missing */
tth_tensor *lt_onnx_input(const char *test, int i);
tth_tensor *lt_onnx_output(const char *test, int i);
int lt_onnx_available(const char *test);

/* Compare element-wise: floats |got - want| <= atol + rtol * |want| (NaN equals NaN),
 * integers exactly. 0 when equal, else -1 with the first difference in msg. */
int lt_compare(const tth_tensor *got, const tth_tensor *want, double rtol, double atol, char *msg, size_t len);

/* A function under test: the module, its params, and after lt_lower the TIR. */
typedef struct lt_fn {
    tth_relay_module *rm;
    tth_rexpr *params[16];
    size_t nparams;
    tth_relay_function *fn;
    tth_tir_module *tm;
    tth_prim_func *pf;
    tth_diag diag;
    const json_t *target;     /* what lt_lower lowers for (NULL: kind c, scalar kernels) */
} lt_fn;

void lt_init(lt_fn *t);
void lt_free(lt_fn *t);
tth_rexpr *lt_param(lt_fn *t, const char *name, const tth_ttype *type);
/* a call; attrs is JSON text (NULL: none); aborts the test on a type error */
tth_rexpr *lt_call(lt_fn *t, tth_op op, tth_rexpr *const *args, size_t nargs, const char *attrs);
/* add the function (Primitive), lower it to PrimFunc "f", verify the TIR. 0 or the error code
 * (diag in t->diag). */
int lt_lower(lt_fn *t, tth_rexpr *body);
/* run PrimFunc "f" on inputs (one per param), writing new tensors into outs (one per result) */
int lt_run(lt_fn *t, tth_tensor *const *inputs, tth_tensor **outs, size_t nouts);

/* a tensor from values given as doubles */
tth_tensor *lt_tensor(tth_dtype dt, int rank, const int64_t *shape, const double *values);

/* count statements of a kind in the PrimFunc's body */
int lt_count_stmts(const tth_tstmt *s, tth_tstmt_kind kind);
int lt_count_loops(const tth_tstmt *s, tth_loop_kind kind);
/* count ALLOCATEs of a buffer with type's shape (an intermediate tensor; kernels' own scratch,
 * register tiles and padded copies, is flat) */
int lt_count_allocs_shaped(const tth_tstmt *s, const tth_ttype *type);

#endif
