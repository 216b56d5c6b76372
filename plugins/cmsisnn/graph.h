/* graph.h: what the partition predicates of the cmsis-nn and ethos-n plugins need to see around
 * one call: who uses a node (a per-function users index, built on the first question about a
 * function and cached by function pointer), and small readers of constants and attributes.
 * Shared by both plugins (each links its own copy: plugins/ethosn/meson.build names this file). */
#ifndef TTH_NPU_GRAPH_H
#define TTH_NPU_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include <tth/relay.h>

/* The users of every node of one function. */
typedef struct npu_users npu_users;

/* The index for fn, built or taken from the one-entry cache: a new function, the same pointer with
 * a different body or module, or any allocation in the module's arena since the build (a node
 * added, a function outlined) rebuilds it, so a stale index is never used. NULL on out of memory.
 * The cache lives until npu_users_release(), the next function, or the plugin's unloading. */
const npu_users *npu_users_get(const tth_relay_function *fn);
void npu_users_release(void);

/* How many users e has; the function's result counts as one more (it leaves the function). */
size_t npu_nusers(const npu_users *u, const tth_rexpr *e);
/* The i-th user (a call, tuple or tuple_get), or NULL for the function result / out of range. */
const tth_rexpr *npu_user(const npu_users *u, const tth_rexpr *e, size_t i);
/* The only user when e has exactly one and it is a call of op; else NULL. */
const tth_rexpr *npu_sole_user_op(const npu_users *u, const tth_rexpr *e, tth_op op);

/* e is a call of op. */
int npu_is_op(const tth_rexpr *e, tth_op op);
/* e is a constant (tth_tensor) */
const tth_tensor *npu_const(const tth_rexpr *e);
/* A constant with one element (or every element equal): its value in *v. 1 if so. */
int npu_const_scalar(const tth_rexpr *e, double *v);
/* Every element of a constant is zero. */
int npu_const_all_zero(const tth_rexpr *e);
/* Integer attribute array of a call (e.g. "strides"); returns count read (<= max), -1 if absent. */
int npu_attr_ints(const tth_rexpr *call, const char *key, int64_t *out, int max);
int64_t npu_attr_int(const tth_rexpr *call, const char *key, int64_t dflt);
double npu_attr_real(const tth_rexpr *call, const char *key, double dflt);
/* The tensor type of an expression (NULL for tuples). */
const tth_ttype *npu_type(const tth_rexpr *e);
/* "int8[1, 3, 8, 8]" */
const char *npu_tstr(const tth_rexpr *e, char *buf, size_t len);

#endif
