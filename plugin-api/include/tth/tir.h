/* tth/tir.h: TIR, the loop-level IR every operator is lowered to.
 *
 * A TIR module holds PrimFuncs. A PrimFunc takes buffers and has a body of statements: loops,
 * stores, allocations, conditionals, lets and evaluated calls. Buffers are indexed with one flat
 * element index (row-major), so multi-dimensional indexing is written out as arithmetic.
 * The AOT executor entry is itself a PrimFunc whose body is a sequence of TTH_TSTMT_CALL_FUNC
 * statements over workspace and I/O buffers; the memory planner gives every WORKSPACE and LOCAL
 * buffer of the module an offset in one workspace.
 *
 * Vectors (ABI 1.2). Every expression has `lanes`: 1 for a scalar, N > 1 for a vector of N
 * elements of `dtype`. A vector comes from RAMP (an index vector base + stride * lane), BROADCAST
 * (one value in every lane) or a LOAD whose index is a vector (a RAMP of stride 1 is one
 * contiguous load; any other index vector gathers); elementwise operators keep the lanes of their
 * operands, and the REDUCE_* intrinsics fold a vector to a scalar. A STORE of a vector writes
 * every lane (contiguous or scattered, as its index says). LET may bind a vector variable. Loads
 * and stores carry an alignment in bytes (0: the element's). The llvm kind emits real vector
 * instructions; the c kind evaluates lane by lane. docs/tir.md describes the whole IR.
 */
#ifndef TTH_TIR_H
#define TTH_TIR_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "tth/diag.h"
#include "tth/ir_common.h"
#include "tth/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tth_buffer_scope {
    TTH_SCOPE_PARAM = 1,     /* a PrimFunc parameter */
    TTH_SCOPE_LOCAL = 2,     /* allocated inside a PrimFunc (TTH_TSTMT_ALLOCATE): scratch, padding */
    TTH_SCOPE_WORKSPACE = 3, /* an intermediate tensor of the AOT entry */
    TTH_SCOPE_CONST = 4,     /* a constant; `data` holds it */
    TTH_SCOPE_INPUT = 5,     /* a model input (AOT entry) */
    TTH_SCOPE_OUTPUT = 6,    /* a model output (AOT entry) */
    TTH_SCOPE_REGISTER = 7,  /* like LOCAL, but small and meant to live in registers (a micro-
                              * kernel's accumulators): never planned into the workspace; the
                              * code generators put it on the stack, where LLVM promotes it to
                              * registers when every index is a constant (ABI 1.2) */
} tth_buffer_scope;

typedef struct tth_tbuffer {
    uint32_t id;             /* unique in the module */
    const char *name;        /* a C identifier */
    tth_dtype dtype;
    int32_t rank;
    int64_t shape[TTH_MAX_RANK];
    tth_buffer_scope scope;
    uint32_t align;          /* bytes; 16 unless set */
    tth_tensor *data;        /* TTH_SCOPE_CONST: the values (the module holds a reference) */
    int64_t offset;          /* WORKSPACE/LOCAL: byte offset in the workspace once planned; -1 before */
    /* ABI 1.8: a CONST buffer that is a function of another CONST buffer, `derive_from`, by the
     * transform named `derive` (docs/artifact.md, "Derived constants"). `data` still holds its
     * values; a code generator that binds constants at run time may bind derive_from instead and
     * compute this one when the model is bound, so the artifact stores only the source. NULL for
     * every other buffer. Set by tth_tir_const_buffer_derived. */
    const char *derive;
    struct tth_tbuffer *derive_from;
} tth_tbuffer;

TTH_API int64_t tth_tbuffer_numel(const tth_tbuffer *b);
TTH_API size_t tth_tbuffer_nbytes(const tth_tbuffer *b);

typedef struct tth_tvar {
    uint32_t id;
    const char *name;
    tth_dtype dtype;         /* TTH_I64 for loop variables */
    int32_t lanes;           /* 1, or N for a vector bound by LET (ABI 1.2) */
} tth_tvar;

typedef enum tth_texpr_kind {
    TTH_TEXPR_INT = 1,       /* integer immediate (any integer dtype or bool) */
    TTH_TEXPR_FLOAT = 2,     /* float immediate */
    TTH_TEXPR_VAR = 3,
    TTH_TEXPR_LOAD = 4,      /* buf[index] */
    TTH_TEXPR_BINARY = 5,
    TTH_TEXPR_UNARY = 6,
    TTH_TEXPR_SELECT = 7,    /* cond ? a : b (both evaluated is allowed) */
    TTH_TEXPR_CAST = 8,      /* C conversion; float->int truncates */
    TTH_TEXPR_INTRIN = 9,    /* math intrinsic */
    TTH_TEXPR_CALL_EXTERN = 10, /* a C function by name; returns dtype */
    TTH_TEXPR_ADDRESS_OF = 11,  /* &buf[index], for call_extern arguments; dtype is the buffer's */
    TTH_TEXPR_RAMP = 12,     /* int64 vector: base + stride * lane, lane in [0, lanes) (ABI 1.2) */
    TTH_TEXPR_BROADCAST = 13, /* `value` (a scalar) in each of `lanes` lanes (ABI 1.2) */
    TTH_TEXPR_REINTERPRET = 14, /* the bits of `value` (u.cast) read as dtype, a numeric type of the
                                * same size, lane by lane (ABI 1.6; docs/tir.md) */
} tth_texpr_kind;

/* Binary operators; C semantics on the operand dtype unless noted. Comparisons give bool. */
#define TTH_TIR_BINOPS(X)                                           \
    X(ADD, "+") X(SUB, "-") X(MUL, "*")                             \
    X(DIV, "/")        /* C division (integers truncate) */         \
    X(MOD, "%")        /* C remainder (integers only) */            \
    X(FLOORDIV, "floordiv") X(FLOORMOD, "floormod")                 \
    X(MIN, "min") X(MAX, "max")                                     \
    X(EQ, "==") X(NE, "!=") X(LT, "<") X(LE, "<=") X(GT, ">") X(GE, ">=") \
    X(AND, "&&") X(OR, "||")                                        \
    X(SHL, "<<") X(SHR, ">>") X(BITAND, "&") X(BITOR, "|")

typedef enum tth_tir_binop {
#define TTH__BIN_ENUM(e, s) TTH_TBIN_##e,
    TTH_TIR_BINOPS(TTH__BIN_ENUM)
#undef TTH__BIN_ENUM
} tth_tir_binop;

typedef enum tth_tir_unop { TTH_TUN_NEG = 0, TTH_TUN_NOT = 1 } tth_tir_unop;

/* Math intrinsics on float32/float64 (the dtype says which C function: expf/exp ...), then
 * (ABI 1.2) FMA a * b + c rounded once (any float dtype), and the horizontal reductions of a
 * vector to a scalar of its dtype (integers too): REDUCE_ADD (the order of the additions is the
 * code generator's), REDUCE_MAX, REDUCE_MIN; then the inverse trigonometric and hyperbolic
 * functions (C's asin ... atanh); then (ABI 1.7) the four-byte dot products on int32 lanes:
 * DOT4_US(acc, a, b) is acc + sum over j < 4 of byte j of a (unsigned) times byte j of b (signed),
 * DOT4_SS the same with both bytes signed, every lane wrapping as int32 arithmetic does (the bytes
 * of a lane are its little-endian bytes: byte j is (lane >> 8j) & 0xff). They are the x86 VNNI
 * vpdpbusd and the AArch64 usdot / sdot instructions (docs/tir.md, "Dot products").
 * Appended only: the numbers are frozen. */
#define TTH_TIR_INTRINS(X)                                                              \
    X(EXP, "exp", 1) X(LOG, "log", 1) X(SQRT, "sqrt", 1) X(TANH, "tanh", 1)            \
    X(ERF, "erf", 1) X(POW, "pow", 2) X(FABS, "fabs", 1) X(FLOOR, "floor", 1)          \
    X(CEIL, "ceil", 1) X(ROUND_EVEN, "nearbyint", 1) X(SIN, "sin", 1) X(COS, "cos", 1) \
    X(FMOD, "fmod", 2) X(LOG1P, "log1p", 1) X(EXPM1, "expm1", 1)                       \
    X(FMA, "fma", 3) X(REDUCE_ADD, "reduce_add", 1) X(REDUCE_MAX, "reduce_max", 1)     \
    X(REDUCE_MIN, "reduce_min", 1) X(ASIN, "asin", 1) X(ACOS, "acos", 1) X(ATAN, "atan", 1)        \
    X(ASINH, "asinh", 1) X(ACOSH, "acosh", 1) X(ATANH, "atanh", 1)                     \
    X(DOT4_US, "dot4_us", 3) X(DOT4_SS, "dot4_ss", 3)

typedef enum tth_tir_intrin_op {
#define TTH__INTRIN_ENUM(e, s, n) TTH_TINTRIN_##e,
    TTH_TIR_INTRINS(TTH__INTRIN_ENUM)
#undef TTH__INTRIN_ENUM
} tth_tir_intrin_op;

typedef struct tth_texpr tth_texpr;
struct tth_texpr {
    tth_texpr_kind kind;
    tth_dtype dtype;         /* the element dtype */
    union {
        int64_t i;                                             /* INT */
        double f;                                              /* FLOAT */
        tth_tvar *var;                                         /* VAR */
        struct { tth_tbuffer *buf; tth_texpr *index; uint32_t align; } load; /* LOAD, ADDRESS_OF;
                                                                 align: bytes, 0 = element's */
        struct { tth_tir_binop op; tth_texpr *a, *b; } bin;    /* BINARY */
        struct { tth_tir_unop op; tth_texpr *a; } un;          /* UNARY */
        struct { tth_texpr *cond, *a, *b; } select;            /* SELECT */
        struct { tth_texpr *value; } cast;                     /* CAST, REINTERPRET */
        struct { tth_tir_intrin_op op; tth_texpr *args[3]; } intrin; /* INTRIN (unused args NULL) */
        struct { const char *name; tth_texpr **args; size_t nargs; } call; /* CALL_EXTERN */
        struct { tth_texpr *base; int64_t stride; } ramp;     /* RAMP: base is a scalar int64 */
        struct { tth_texpr *value; } bcast;                    /* BROADCAST */
    } u;
    int32_t lanes;           /* 1: a scalar; N > 1: a vector of N (ABI 1.2, set by every builder) */
};

typedef enum tth_tstmt_kind {
    TTH_TSTMT_SEQ = 1,
    TTH_TSTMT_FOR = 2,
    TTH_TSTMT_STORE = 3,
    TTH_TSTMT_ALLOCATE = 4,  /* a LOCAL buffer of constant size, live for `body` */
    TTH_TSTMT_IF = 5,
    TTH_TSTMT_LET = 6,
    TTH_TSTMT_EVALUATE = 7,  /* evaluate an expression for its effect (call_extern) */
    TTH_TSTMT_CALL_FUNC = 8, /* call a PrimFunc of the module with buffers (AOT entry) */
} tth_tstmt_kind;

typedef enum tth_loop_kind {
    TTH_LOOP_SERIAL = 0,
    TTH_LOOP_PARALLEL = 1,
    TTH_LOOP_VECTORIZED = 2,
    TTH_LOOP_UNROLLED = 3,
} tth_loop_kind;

typedef struct tth_tstmt tth_tstmt;
struct tth_tstmt {
    tth_tstmt_kind kind;
    union {
        struct { tth_tstmt **stmts; size_t n; } seq;
        struct { tth_tvar *var; tth_texpr *min, *extent; tth_loop_kind loop; tth_tstmt *body; } loop;
        struct { tth_tbuffer *buf; tth_texpr *index, *value; uint32_t align; } store; /* align as LOAD's */
        struct { tth_tbuffer *buf; tth_tstmt *body; } alloc;
        struct { tth_texpr *cond; tth_tstmt *then_s, *else_s; /* else_s may be NULL */ } cond;
        struct { tth_tvar *var; tth_texpr *value; tth_tstmt *body; } let;
        struct { tth_texpr *value; } eval;
        struct { const char *func; tth_tbuffer **args; size_t nargs; } call;
    } u;
};

typedef struct tth_prim_func {
    const char *name;        /* global symbol: a C identifier, unique in the module */
    tth_tbuffer **params;    /* scope PARAM (INPUT/OUTPUT for the AOT entry) */
    size_t nparams;
    tth_tstmt *body;
    const char *target_kind; /* the kind whose tir_to_runtime builds it: "c", "cmsis-nn" ... */
    json_t *attrs;           /* object: {"op": "nn.conv2d", "origin": "default"|"relay_to_tir", ...};
                              * {"extern": true}: a declaration only (empty body), defined by
                              * another runtime module; code generators emit just its prototype */
} tth_prim_func;

struct tth_tir_module {
    tth_arena *arena;
    tth_prim_func **funcs;
    size_t nfuncs;
    const char *entry;       /* name of the AOT entry PrimFunc, or NULL */
    /* private bookkeeping follows in the implementation */
};

TTH_API tth_tir_module *tth_tir_module_new(void);
TTH_API void tth_tir_module_free(tth_tir_module *m);
TTH_API tth_prim_func *tth_tir_module_find(const tth_tir_module *m, const char *name);
/* A module holding the PrimFuncs of one target kind (sharing nodes with m; free it with
 * tth_tir_module_free, which then frees only the view). */
TTH_API tth_tir_module *tth_tir_module_subset(tth_tir_module *m, const char *target_kind);

/* Buffers and variables. */
TTH_API tth_tbuffer *tth_tir_buffer(tth_tir_module *m, const char *name, tth_dtype dtype, int32_t rank,
                                    const int64_t *shape, tth_buffer_scope scope);
/* The module takes its own reference to data; the caller keeps (and releases) theirs. */
TTH_API tth_tbuffer *tth_tir_const_buffer(tth_tir_module *m, const char *name, tth_tensor *data);
/* The module lets go of a CONST buffer's data (its reference; b->data becomes NULL): for a
 * constant no statement reads, e.g. weights a kernel took in another layout. */
TTH_API void tth_tir_const_buffer_release(tth_tir_module *m, tth_tbuffer *b);
/* Marks CONST buffer b as `transform` of CONST buffer from (ABI 1.8; the transforms and their
 * layouts: docs/artifact.md, "Derived constants"). b's data must already be that transform's
 * result: code that does not derive reads it as it is. TTH_EINVAL for an unknown transform or a
 * buffer that is not a float32 constant of the transform's shape. */
TTH_API int tth_tir_const_buffer_derived(tth_tbuffer *b, const char *transform, tth_tbuffer *from);
/* The transforms a derived constant may name, for code generators: TTH_DERIVE_WINOGRAD_F4X4_3X3
 * is Winograd's F(4x4, 3x3) weight transform, float32 [O][C][3][3] -> [36][C][O]. */
#define TTH_DERIVE_WINOGRAD_F4X4_3X3 "winograd_f4x4_3x3"
TTH_API tth_tvar *tth_tir_var(tth_tir_module *m, const char *name, tth_dtype dtype);
/* A variable holding a vector of `lanes` elements (bound by LET to a vector value). */
TTH_API tth_tvar *tth_tir_var_vec(tth_tir_module *m, const char *name, tth_dtype dtype, int32_t lanes);

/* Expressions. Builders fold constants where both sides are immediates and simplify x+0, x*1,
 * x*0 (integers). A dtype mismatch between binary operands is a programming error caught by
 * tth_tir_verify. */
TTH_API tth_texpr *tth_tir_int(tth_tir_module *m, tth_dtype dtype, int64_t v);
TTH_API tth_texpr *tth_tir_i64(tth_tir_module *m, int64_t v);
TTH_API tth_texpr *tth_tir_float(tth_tir_module *m, tth_dtype dtype, double v);
TTH_API tth_texpr *tth_tir_ref(tth_tir_module *m, tth_tvar *v);
TTH_API tth_texpr *tth_tir_load(tth_tir_module *m, tth_tbuffer *buf, tth_texpr *index);
TTH_API tth_texpr *tth_tir_bin(tth_tir_module *m, tth_tir_binop op, tth_texpr *a, tth_texpr *b);
TTH_API tth_texpr *tth_tir_un(tth_tir_module *m, tth_tir_unop op, tth_texpr *a);
TTH_API tth_texpr *tth_tir_select(tth_tir_module *m, tth_texpr *cond, tth_texpr *a, tth_texpr *b);
TTH_API tth_texpr *tth_tir_cast(tth_tir_module *m, tth_dtype dtype, tth_texpr *v);
/* The bits of v as dtype (ABI 1.6): float32 <-> int32/uint32, float64 <-> int64/uint64, and
 * integers of one size (not bool, float16 or bfloat16); an immediate is folded. */
TTH_API tth_texpr *tth_tir_reinterpret(tth_tir_module *m, tth_dtype dtype, tth_texpr *v);
TTH_API tth_texpr *tth_tir_intrin(tth_tir_module *m, tth_tir_intrin_op op, tth_texpr *a, tth_texpr *b /* or NULL */);
TTH_API tth_texpr *tth_tir_call_extern(tth_tir_module *m, tth_dtype ret, const char *name,
                                       tth_texpr *const *args, size_t nargs);
TTH_API tth_texpr *tth_tir_address_of(tth_tir_module *m, tth_tbuffer *buf, tth_texpr *index);

/* Vectors (ABI 1.2). Binary operators, select and intrinsics broadcast a scalar operand to the
 * lanes of a vector one; operands of two different vector widths are an error (NULL). */
TTH_API tth_texpr *tth_tir_ramp(tth_tir_module *m, tth_texpr *base, int64_t stride, int32_t lanes);
TTH_API tth_texpr *tth_tir_broadcast(tth_tir_module *m, tth_texpr *value, int32_t lanes);
/* buf[base .. base + lanes - 1] as one vector; align: bytes the address is known to be aligned
 * to (0: the element's). vstore writes a vector value the same way. */
TTH_API tth_texpr *tth_tir_vload(tth_tir_module *m, tth_tbuffer *buf, tth_texpr *base, int32_t lanes,
                                 uint32_t align);
TTH_API tth_tstmt *tth_tir_vstore(tth_tir_module *m, tth_tbuffer *buf, tth_texpr *base, tth_texpr *value,
                                  uint32_t align);
/* a * b + c with one rounding */
TTH_API tth_texpr *tth_tir_fma(tth_tir_module *m, tth_texpr *a, tth_texpr *b, tth_texpr *c);
/* A three-operand intrinsic (FMA); tth_tir_intrin covers the one- and two-operand ones. */
TTH_API tth_texpr *tth_tir_intrin3(tth_tir_module *m, tth_tir_intrin_op op, tth_texpr *a, tth_texpr *b,
                                   tth_texpr *c);

/* Walking. The direct sub-expressions of e in a fixed order: *out is set to an array of the
 * returned count (scratch, filled here, or the call's own argument array). The one place that
 * knows each kind's operands, so a walk over TIR does not repeat it (ABI 1.2). */
TTH_API size_t tth_tir_expr_children(const tth_texpr *e, tth_texpr *scratch[3], tth_texpr *const **out);
/* e with its children replaced by kids (in tth_tir_expr_children's order and count), built
 * through the builders above (so immediates fold); e itself when every kid is the same. */
TTH_API tth_texpr *tth_tir_expr_rebuild(tth_tir_module *m, const tth_texpr *e, tth_texpr *const *kids);

/* The direct sub-statements and operand expressions of s in a fixed order (SEQ: its statements;
 * FOR: min, extent / body; STORE: index, value; ALLOCATE: body; IF: cond / then, else when
 * present; LET: value / body; EVALUATE: value; CALL_FUNC: none). *stmts and *exprs point to
 * arrays of *nstmts and the returned count: s's own array or the scratch arrays, filled here.
 * With tth_tir_expr_children, the one place that knows each kind's operands (ABI 1.4). */
TTH_API size_t tth_tir_stmt_children(const tth_tstmt *s, tth_tstmt *sscratch[2], tth_tstmt *const **stmts,
                                     size_t *nstmts, tth_texpr *escratch[2], tth_texpr *const **exprs);

/* A pre-order walk over s and everything under it (ABI 1.4): `stmt` is called for each statement,
 * then `expr` for each of its operand expressions and their sub-expressions (depth first, each
 * parent before its children), then the walk enters the sub-statements. Either callback may be
 * NULL. A callback's non-zero return ends the walk and is returned, except TTH_TIR_WALK_SKIP from
 * `stmt`, which skips that statement's operands and sub-statements and goes on. */
#define TTH_TIR_WALK_SKIP 0x7fff0001
typedef struct tth_tir_visitor {
    int (*stmt)(void *ctx, const tth_tstmt *s);
    int (*expr)(void *ctx, const tth_texpr *e);
    void *ctx;
} tth_tir_visitor;
TTH_API int tth_tir_walk(const tth_tstmt *s, const tth_tir_visitor *v);
TTH_API int tth_tir_walk_expr(const tth_texpr *e, const tth_tir_visitor *v);
/* 1 when variable v is read anywhere in s (or e). */
TTH_API int tth_tir_stmt_uses_var(const tth_tstmt *s, const tth_tvar *v);
TTH_API int tth_tir_expr_uses_var(const tth_texpr *e, const tth_tvar *v);

/* Statements. */
TTH_API tth_tstmt *tth_tir_seq(tth_tir_module *m, tth_tstmt *const *stmts, size_t n);
/* Append to a SEQ (created when *seq is NULL). */
TTH_API int tth_tir_seq_append(tth_tir_module *m, tth_tstmt **seq, tth_tstmt *s);
TTH_API tth_tstmt *tth_tir_for(tth_tir_module *m, tth_tvar *var, tth_texpr *min, tth_texpr *extent,
                               tth_loop_kind kind, tth_tstmt *body);
TTH_API tth_tstmt *tth_tir_store(tth_tir_module *m, tth_tbuffer *buf, tth_texpr *index, tth_texpr *value);
TTH_API tth_tstmt *tth_tir_allocate(tth_tir_module *m, tth_tbuffer *buf, tth_tstmt *body);
TTH_API tth_tstmt *tth_tir_if(tth_tir_module *m, tth_texpr *cond, tth_tstmt *then_s, tth_tstmt *else_s);
TTH_API tth_tstmt *tth_tir_let(tth_tir_module *m, tth_tvar *var, tth_texpr *value, tth_tstmt *body);
TTH_API tth_tstmt *tth_tir_evaluate(tth_tir_module *m, tth_texpr *value);
TTH_API tth_tstmt *tth_tir_call_func(tth_tir_module *m, const char *func, tth_tbuffer *const *args, size_t nargs);

/* Add a PrimFunc (name unique; attrs stolen, may be NULL). */
TTH_API tth_prim_func *tth_tir_func_add(tth_tir_module *m, const char *name, tth_tbuffer *const *params,
                                        size_t nparams, tth_tstmt *body, const char *target_kind,
                                        json_t *attrs, tth_diag *diag);

/* Check: every var used is bound (loop/let) in scope, loads/stores name a param, an allocated,
 * const or workspace buffer, binary operand dtypes agree, constant indices are in bounds,
 * CALL_FUNC names an existing function with matching arity, names are C identifiers; operand
 * lanes agree, a store's value has its index's lanes, loop bounds and conditions are scalars. */
TTH_API int tth_tir_verify(const tth_tir_module *m, tth_diag *diag);

/* Functions with the same code (docs/tir.md, "Functions with the same code"): a and b compute
 * the same thing on different data when their parameters (by position) and bodies are the same
 * up to the names of variables and buffers, where a data buffer matches any buffer of its scope,
 * dtype, shape and alignment: a CONST buffer of at least const_min bytes (smaller ones must hold
 * the same bytes) or a LOCAL buffer with a planned workspace offset (whatever the offset). Returns
 * 1 (same), 0 (not), or a negative TTH_E* code (TTH_ELIMIT: more than max_pairs data buffers).
 * The data buffers a uses and their partners in b go to pairs[2i], pairs[2i+1] in the order a
 * first uses them (*npairs of them): what a caller passes to one shared body. Comparing a with
 * itself lists its own data buffers. tth_tir_func_code_hash is equal for functions with the same
 * code (0 when out of memory), to find candidates without comparing every pair. */
TTH_API int tth_tir_func_same_code(const tth_prim_func *a, const tth_prim_func *b, size_t const_min,
                                   const tth_tbuffer **pairs, size_t max_pairs, size_t *npairs);
TTH_API uint64_t tth_tir_func_code_hash(const tth_prim_func *f, size_t const_min);

/* The classes of a module's functions with the same code, for a code generator that compiles
 * each class once (docs/tir.md, "Functions with the same code"). share[i] describes function i:
 * `rep` is the index of its class's first function (i itself for the first, or a function alone),
 * `members` (on the first) how many functions the class has, `data` this function's data buffers
 * in the order the shared body takes them (ndata of them; none for a function alone). Functions
 * without a body, `skip` (the entry) and extern functions (attrs "extern": true) are alone.
 * *bodies: the bodies to compile (functions less those a shared body stands for). 0 or a TTH_E*
 * code; free with tth_tir_share_free. */
typedef struct tth_tir_share {
    size_t rep;
    size_t members;
    const tth_tbuffer **data;
    size_t ndata;
} tth_tir_share;
TTH_API int tth_tir_share_plan(const tth_tir_module *mod, const tth_prim_func *skip, size_t const_min,
                               size_t max_data, tth_tir_share **share, size_t *bodies);
TTH_API void tth_tir_share_free(tth_tir_share *share, size_t n);

/* A deterministic split of n items (a module's function bodies) into nbins parts compiled in
 * parallel (docs/tir.md, "Functions with the same code"): the heaviest item first (by index on
 * equal weights), each to the part with the least weight so far (the lowest index on a tie).
 * bin[i] receives item i's part. load: the parts' weights before (an entry already placed, say)
 * and after, or NULL to start from nothing. 0, or TTH_ENOMEM. */
TTH_API int tth_tir_balance(const size_t *weight, size_t n, size_t nbins, size_t *load, unsigned *bin);

/* Readable text (malloc'd; free()). */
TTH_API char *tth_tir_print(const tth_tir_module *m);
TTH_API char *tth_tir_print_func(const tth_prim_func *f);

/* JSON form (new reference); constants by reference (name, type, hash). */
TTH_API json_t *tth_tir_to_json(const tth_tir_module *m);

#ifdef __cplusplus
}
#endif
#endif
