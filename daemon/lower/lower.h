/* lower.h: the default lowering ("LowerTE"): Relay primitive functions → TIR PrimFuncs, and a
 * TIR interpreter. Implemented in daemon/lower/ (lower.c drives, lower_<family>.c hold one
 * operator family each, tir_eval.c interprets).
 *
 * Semantics are ONNX's (see the attrs column of TTH_RELAY_OPS in tth/relay.h): integer division
 * truncates, round is half to even, quantization saturates, Mod follows the divisor's sign unless
 * fmod=1, softmax subtracts the maximum first.
 */
#ifndef TTH_LOWER_H
#define TTH_LOWER_H

#include <stddef.h>

#include "tth/diag.h"
#include "tth/relay.h"
#include "tth/target.h"
#include "tth/tir.h"

/* Lower one function to a PrimFunc named `name` added to `mod` (target_kind is recorded on it).
 *
 * Accepted bodies: what tth_relay_fuse produces (at most one anchor op followed by a DAG of
 * elementwise ops), and more generally any DAG of op calls, tuples and tuple_gets over the
 * function's params and constants; non-fused intermediates become TTH_SCOPE_LOCAL buffers
 * (TTH_TSTMT_ALLOCATE). The elementwise chain after an anchor is fused into the anchor's final
 * store when it keeps the anchor's shape (epilogue); other operands are read with broadcasting.
 *
 * The PrimFunc's params are, in order, one PARAM buffer per function param, then one PARAM
 * buffer per result tensor (tuple fields in order). Constants become TTH_SCOPE_CONST buffers.
 * attrs: {"op": <anchor op name, or the first op>, "ops": [every op name], "origin": "default"}.
 *
 * target: the canonical target the code is for (a composite's member); its kind is recorded on the
 * PrimFunc and its vector shape (tth_target_vector_shape) chooses the kernels' vector width and
 * register tiles (docs/lowering.md). NULL: kind "c", scalar kernels.
 *
 * Returns NULL and fills diag: TTH_EUNSUPPORTED naming the op and attribute for what is not
 * lowered (see tth_lower_op_supported), TTH_EINVAL for a malformed function. */
tth_prim_func *tth_lower_primitive(tth_tir_module *mod, const tth_relay_function *fn, const char *name,
                                   const json_t *target, tth_diag *diag);

/* Grouped convolutions in blocked channels whose groups have as many inputs as outputs, at most
 * this many, fewer than a block and dividing it, have a kernel (conv2d/groups-nchwc): the layout
 * pass keeps such groups blocked as they are (docs/layouts.md, "Small groups") */
#define TTH_LOWER_SMALL_GROUP_MAX 8

/* 1 when the default lowering handles this op call (op, dtypes, attributes); else 0 and `why`
 * (may be NULL) says what is not supported: "nn.conv2d: float16 is not supported". */
int tth_lower_op_supported(const tth_rexpr *call, char *why, size_t len);

/* Interpret PrimFunc `func` of `mod`. buffers[i] is the memory of the function's i-th param
 * (nbuffers must equal its param count), laid out row-major in the param's dtype (bool: one byte
 * 0/1, float16: IEEE half, bfloat16: the upper 16 bits of a float32). LOCAL buffers are allocated per ALLOCATE, WORKSPACE buffers of an AOT
 * entry once per call, CONST buffers read their tensor. Once memory is planned (offset >= 0),
 * WORKSPACE and LOCAL buffers live at their offsets in one workspace block instead, so an unsound
 * plan shows. CALL_FUNC calls other PrimFuncs of mod.
 * Every load and store is bounds-checked (TTH_EINTERNAL naming buffer and index); integer
 * division by zero is TTH_EINVAL; call_extern is TTH_EUNSUPPORTED naming the function.
 * Arithmetic follows C on the dtype (float32 rounds after every operation, integers wrap). */
int tth_tir_eval(const tth_tir_module *mod, const char *func, void *const *buffers, size_t nbuffers,
                 tth_diag *diag);

#endif
