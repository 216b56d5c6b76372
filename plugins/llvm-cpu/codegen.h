/* codegen.h: the llvm-cpu code generator's private interface (TIR → LLVM IR → object code).
 *
 * Stages, each in its own file, joined only by the LLVM module they fill:
 *   codegen.c       the tir_to_runtime hook: target machine from the target JSON, declare every
 *                   PrimFunc, lower each body, verify, run the pass pipeline, emit the object.
 *   codegen_func.c  PrimFunc signatures and statements (loops, stores, allocations, calls).
 *   codegen_expr.c  expressions (arithmetic, casts, intrinsics, extern calls).
 *
 * Calling conventions (shared with the c-host plugin, so either kind can call the other):
 *   operator PrimFunc:  int32_t name(void *arg0, ..., void *argN-1, uint8_t *workspace)
 *                       one pointer per buffer parameter in order, then the planned workspace.
 *   AOT entry PrimFunc: int32_t name(const struct inputs *in, struct outputs *out, void *workspace)
 *                       `in`/`out` are arrays of void*, one per INPUT / OUTPUT parameter of the
 *                       entry in parameter order.
 * Both return 0 on success; a non-zero status from a called PrimFunc is returned at once.
 * Operator parameters are noalias (the c kind says restrict). On Arm with the hard float ABI
 * every function and call uses arm_aapcs_vfpcc (see codegen.c).
 *
 * PARALLEL loops (docs/threads.md): on an OS target with more than one core the loop becomes a
 * task function `<func>_par<k>(int32 task, int32 ntasks, ptr env)` that runs its share of the
 * iterations, with every variable and buffer pointer in scope passed through `env`; the loop
 * itself becomes a call of the pool's launch function. Inside a task, PARALLEL loops are serial,
 * and so is a loop whose body holds a LOCAL buffer planned in the workspace (the tasks would
 * share it).
 *
 * Vector TIR (tth/tir.h) maps to LLVM vector types: a RAMP of stride 1 under a LOAD or STORE is
 * one vector load or store of the element type; a load through a RAMP of stride 2 to 4 is one
 * load of the span and a shuffle (the depthwise kernel's stride-2 rows); any other vector index
 * is an llvm.masked.gather / llvm.masked.scatter. Math without an LLVM vector intrinsic is called lane by lane.
 */
#ifndef TTH_LLVM_CPU_CODEGEN_H
#define TTH_LLVM_CPU_CODEGEN_H

#include <stddef.h>
#include <stdint.h>

#include <llvm-c/Core.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>

#include "tth/artifact.h"
#include "tth/diag.h"
#include "tth/tir.h"

/* One binding of a TIR id (variable or buffer) to an LLVM value, in a scoped stack. */
typedef struct tth__llcg_binding {
    uint32_t id;
    LLVMValueRef value;
} tth__llcg_binding;

typedef struct tth__llcg_scope {
    tth__llcg_binding *items;
    size_t n, cap;
} tth__llcg_scope;

/* Everything one code generation run holds. Module-level fields live for the whole run;
 * function-level fields are reset for every PrimFunc. */
typedef struct tth__llcg {
    /* module level */
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;            /* the builder statements and expressions append to */
    LLVMTargetDataRef td;        /* data layout of the target machine (borrowed) */
    int big_endian;              /* target byte order: constants are byte-swapped when set */
    const tth_tir_module *tir;
    tth_diag *diag;
    tth__llcg_scope consts;      /* CONST buffer id → private global */
    unsigned md_loop;            /* kind id of !llvm.loop */
    unsigned md_invariant;       /* kind id of !invariant.load (tth__llcg_invariant_load) */
    int libm_calls;              /* math as explicit C library calls, never LLVM intrinsics
                                    or frem that could become libcalls (Arm hard float: see
                                    codegen.c) */
    const char *par_launch;      /* the thread pool's launch function (docs/threads.md), or NULL:
                                    PARALLEL loops run serially */
    int nparallel;               /* parallel loops outlined so far (names the task functions) */
    int in_parallel;             /* lowering a parallel loop's task: inner PARALLEL loops are
                                    serial */
    int masked_tails;            /* the CPU has masked vector loads and stores that cost one
                                    instruction (AVX-512): a contiguous vector of a lane count
                                    that is not a power of two becomes one masked access of
                                    the next power of two (tth__llcg_contig_load) */
    int dot_us, dot_ss;          /* int32 lanes of the CPU's four-byte dot-product instruction
                                    for DOT4_US (x86 VNNI vpdpbusd: 16 with AVX-512 VNNI, 8 with
                                    AVX-VNNI; AArch64 usdot with i8mm: 4) and DOT4_SS (AArch64
                                    sdot with dotprod: 4), 0 without: the intrinsics are then
                                    widening multiplies and adds (codegen_expr.c, docs/tir.md) */
    const char *bind_prefix;     /* constants of at least TTH_BIND_MIN_BYTES bytes are not
                                    copied into the code but bound at run time from the
                                    parameters file (docs/artifact.md, "Constants bound at run
                                    time"): <prefix>_const_slots, <prefix>_bound, ...; NULL:
                                    every constant is a private global */
    const tth_tbuffer **bound;   /* the bound constants, in slot order */
    size_t nbound, cap_bound;
    LLVMValueRef bind_slots;     /* external <prefix>_const_slots (defined in <model>_bind.c) */
    LLVMValueRef bind_flag;      /* <prefix>_bound: 0 until bound; 1 when nothing is bound */
    LLVMValueRef bind_ensure;    /* <prefix>_ensure_bound, called by the entry while unbound */

    /* function level */
    const tth_prim_func *fn;     /* the PrimFunc being lowered */
    LLVMValueRef llfn;
    LLVMBasicBlockRef entry_bb;  /* allocas and buffer bases; branches to the body at the end */
    LLVMBuilderRef eb;           /* positioned at the end of entry_bb */
    LLVMValueRef workspace;      /* the workspace parameter (i8 pointer), or NULL */
    tth__llcg_scope bufs;        /* buffer id → base pointer */
    tth__llcg_scope vars;        /* variable id → value (stack: LET and loops push and pop) */
} tth__llcg;


/* Mark a load as reading memory that nothing writes while the model runs (!invariant.load):
 * constants, and the slots holding bound constants' addresses. */
void tth__llcg_invariant_load(tth__llcg *c, LLVMValueRef load);

/* The alignment (bytes) the code assumes of a buffer's base. */
unsigned tth__llcg_buffer_align(const tth_tbuffer *buf);

/* codegen_link.c: whether the runtime's cores built with tth run on `triple` (a Linux triple of
 * tth's own architecture); then the objects a host library is linked from in place of the
 * binding and thread-pool sources (nbound 0: no binding; launch NULL: no pool; align[k]: how the
 * code loads bound[k]), added to out as
 * TTH_FILE_LINK_OBJECT with its meta's "link_replaces" (docs/artifact.md, "The host library"). */
int tth__llcg_core_links(const char *triple);
int tth__llcg_add_link_objects(LLVMTargetMachineRef tm, const char *model, const char *bind_prefix,
                               const tth_tbuffer *const *bound, const unsigned *align, size_t nbound,
                               const char *launch, int num_cores, tth_runtime_module *out, tth_diag *diag);

/* Scoped id → value bindings. push returns 0 or TTH_ENOMEM. lookup searches newest first. */
int tth__llcg_scope_push(tth__llcg_scope *s, uint32_t id, LLVMValueRef v);
void tth__llcg_scope_pop(tth__llcg_scope *s);
LLVMValueRef tth__llcg_scope_lookup(const tth__llcg_scope *s, uint32_t id);
void tth__llcg_scope_free(tth__llcg_scope *s);

/* Types: the register type of a dtype (bool is i1) and its memory type (bool is i8). NULL
 * for an invalid dtype. */
LLVMTypeRef tth__llcg_type(tth__llcg *c, tth_dtype t);
LLVMTypeRef tth__llcg_mem_type(tth__llcg *c, tth_dtype t);
/* The register type of `lanes` elements of t: the scalar type for 1, else <lanes x type>. */
LLVMTypeRef tth__llcg_vtype(tth__llcg *c, tth_dtype t, int32_t lanes);
/* The lanes of an LLVM value's type (1 for a scalar). */
int32_t tth__llcg_lanes_of(LLVMValueRef v);

/* "function 'name'" for diagnostics (into the diag's location). */
int tth__llcg_fail(tth__llcg *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Expressions (codegen_expr.c). Returns the value in the register type of e->dtype, or NULL
 * with c->diag filled. */
LLVMValueRef tth__llcg_expr(tth__llcg *c, const tth_texpr *e);
/* v (held in from's register type) converted to `to` with C's rules. */
LLVMValueRef tth__llcg_convert(tth__llcg *c, LLVMValueRef v, tth_dtype from, tth_dtype to);
/* e converted to i1 (C truth: != 0). */
LLVMValueRef tth__llcg_truth(tth__llcg *c, const tth_texpr *e);
/* e widened or narrowed to i64 for indexing, sign-aware. */
LLVMValueRef tth__llcg_index(tth__llcg *c, const tth_texpr *e);
/* v (a scalar) repeated in `lanes` lanes; v itself for 1. */
LLVMValueRef tth__llcg_splat(tth__llcg *c, LLVMValueRef v, int32_t lanes);
/* The i64 index vector of a vector index expression, or, when the index is a RAMP of stride 1
 * (a contiguous access), NULL with *contiguous_base set to its scalar base. */
LLVMValueRef tth__llcg_vindex(tth__llcg *c, const tth_texpr *index, LLVMValueRef *contiguous_base);
/* buf's lanes at an i64 index vector (a gather), and v stored at one (a scatter: 0 or a code),
 * as llvm.masked.gather / llvm.masked.scatter with every lane on. */
LLVMValueRef tth__llcg_gather(tth__llcg *c, const tth_tbuffer *buf, LLVMValueRef vidx, int32_t lanes);
int tth__llcg_scatter(tth__llcg *c, const tth_tbuffer *buf, LLVMValueRef vidx, LLVMValueRef v);
/* 1 when `lanes` elements of buf at index are bytes or halves a constant stride apart (not 0 or
 * 1): tth__llcg_strided_access reads them (v NULL: returns the vector) or writes v's lanes there
 * (returns v), one scalar access per lane */
int tth__llcg_strided_narrow(const tth_tbuffer *buf, const tth_texpr *index, int32_t lanes);
LLVMValueRef tth__llcg_strided_access(tth__llcg *c, const tth_tbuffer *buf, const tth_texpr *index, int32_t lanes,
                                      LLVMValueRef v);
/* `lanes` contiguous elements of buf from p (align in bytes), loaded or v stored there (0 or a
 * code). A lane count that is not a power of two is legal LLVM, but x86 splits such an access
 * into power-of-two pieces (14 lanes: 8 + 4 + 2 and two inserts); with c->masked_tails it is one
 * llvm.masked.load / llvm.masked.store of the next power of two with the tail lanes off, which
 * never touches the memory past the last lane (docs/lowering.md, "Vector tails"). Never for a
 * buffer on the stack (a register tile): LLVM keeps those in registers only when every access
 * is a plain load or store. */
LLVMValueRef tth__llcg_contig_load(tth__llcg *c, const tth_tbuffer *buf, LLVMValueRef p, int32_t lanes, unsigned align);
int tth__llcg_contig_store(tth__llcg *c, const tth_tbuffer *buf, LLVMValueRef p, LLVMValueRef v, unsigned align);
/* &buf[index] (index already lowered to i64). */
LLVMValueRef tth__llcg_elem_ptr(tth__llcg *c, const tth_tbuffer *buf, LLVMValueRef index);
/* The base pointer of a buffer in the current function (parameter, workspace slice, stack
 * allocation or constant global). NULL with c->diag filled when it has none here. */
LLVMValueRef tth__llcg_buffer_base(tth__llcg *c, const tth_tbuffer *buf);

/* Functions (codegen_func.c). */
/* The LLVM function for a PrimFunc of this module or, for a name the module does not define, an
 * external declaration with the operator convention and nargs buffer arguments. */
LLVMValueRef tth__llcg_declare(tth__llcg *c, const char *name, size_t nargs, int is_entry);
/* Lower f's body into its (already declared) LLVM function. */
int tth__llcg_func(tth__llcg *c, const tth_prim_func *f, int is_entry);
/* Functions with the same code (docs/threads.md, "Compiling in parallel"; tth/tir.h,
 * tth_tir_func_same_code): f's body as the internal function `shared` whose parameters are f's
 * buffers, the workspace, then a pointer to each of f's data buffers data[0..ndata); and a
 * PrimFunc g whose data buffers are gdata[0..ndata) as a wrapper that calls shared with them. */
int tth__llcg_func_shared(tth__llcg *c, const tth_prim_func *f, LLVMValueRef shared, const tth_tbuffer *const *data,
                          size_t ndata);
int tth__llcg_func_wrapper(tth__llcg *c, const tth_prim_func *g, LLVMValueRef shared, const tth_tbuffer *const *gdata,
                           size_t ndata);
/* The shared function's declaration: i32 (ptr x (nparams + 1 + ndata)), internal, never inlined. */
LLVMValueRef tth__llcg_declare_shared(tth__llcg *c, const char *name, size_t nparams, size_t ndata);

#endif
