/* codegen_expr.c: TIR expressions → LLVM IR values.
 *
 * Every value is held in the register type of its dtype (bool is i1); memory holds bool as one
 * byte (i8, 0 or 1). Semantics are C's on the operand dtype, as tth/tir.h says, with these
 * choices written down once:
 *   - 32- and 64-bit signed add/sub/mul carry `nsw` (C leaves signed overflow undefined);
 *     8- and 16-bit arithmetic is done in 32 bits and truncated, as C's promotion does;
 *     float16 arithmetic is done in float32 and rounded back;
 *   - bfloat16 is held as its bits (i16, in registers and memory) and converted with integer
 *     operations: widening is a shift, narrowing rounds to nearest even and keeps NaN a NaN
 *     (LLVM's `bfloat` would narrow through a library call the C runtime may lack). Everything
 *     but loads, stores, select and bit-exact moves is done in float32 and rounded back;
 *   - floordiv/floormod round towards negative infinity for signed integers and floats
 *     (float floormod is fmod adjusted to the divisor's sign);
 *   - float min/max are C's `a < b ? a : b` / `a > b ? a : b`;
 *   - float comparisons are ordered except `!=`, which is true for NaN as in C;
 *   - float→int truncates (fptosi/fptoui); int→int widening follows the source's signedness;
 *     anything → bool is `!= 0`;
 *   - vectors: every rule above lane by lane (LLVM's instructions take vector operands);
 *     REDUCE_ADD may add in any order (a tree), as tth/tir.h allows.
 */
#include "codegen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- helpers */

static int is_int(tth_dtype t) { return t != TTH_BOOL && !tth_dtype_is_float(t) && t != TTH_DTYPE_INVALID; }

static int is_signed_int(tth_dtype t) { return is_int(t) && tth_dtype_is_signed(t); }

static const char *binop_name(tth_tir_binop op)
{
    static const char *const names[] = {
#define BIN_NAME(e, s) s,
        TTH_TIR_BINOPS(BIN_NAME)
#undef BIN_NAME
    };
    return (unsigned)op < sizeof names / sizeof names[0] ? names[op] : "?";
}

static LLVMValueRef fail_null(tth__llcg *c, int code, const char *what, tth_dtype t)
{
    tth__llcg_fail(c, code, "%s on %s is not supported by the llvm code generator", what,
                   tth_dtype_name(t));
    return NULL;
}

/* An LLVM intrinsic overloaded on one type: declaration and function type. */
static LLVMValueRef intrinsic_of(tth__llcg *c, const char *name, LLVMTypeRef *tys, size_t n, LLVMTypeRef *fnty)
{
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    if (id == 0) {
        tth__llcg_fail(c, TTH_EINTERNAL, "LLVM has no intrinsic '%s'", name);
        return NULL;
    }
    *fnty = LLVMIntrinsicGetType(c->ctx, id, tys, n);
    return LLVMGetIntrinsicDeclaration(c->mod, id, tys, n);
}

static LLVMValueRef intrinsic(tth__llcg *c, const char *name, LLVMTypeRef ty, LLVMTypeRef *fnty)
{
    return intrinsic_of(c, name, &ty, 1, fnty);
}

static LLVMValueRef call_intrinsic(tth__llcg *c, const char *name, LLVMValueRef *args, unsigned n)
{
    LLVMTypeRef fnty;
    LLVMValueRef fn = intrinsic(c, name, LLVMTypeOf(args[0]), &fnty);
    if (!fn)
        return NULL;
    return LLVMBuildCall2(c->b, fnty, fn, args, n, "");
}

/* The declaration of an external C function; an existing one must have the same type. */
static LLVMValueRef extern_function(tth__llcg *c, const char *name, LLVMTypeRef fnty)
{
    LLVMValueRef fn = LLVMGetNamedFunction(c->mod, name);
    if (fn) {
        if (LLVMGlobalGetValueType(fn) != fnty) {
            tth__llcg_fail(c, TTH_EINVAL,
                           "extern function '%s' is called with two different signatures", name);
            return NULL;
        }
        return fn;
    }
    fn = LLVMAddFunction(c->mod, name, fnty);
    LLVMSetLinkage(fn, LLVMExternalLinkage);
    return fn;
}

static void add_enum_attr(tth__llcg *c, LLVMValueRef fn_or_call, int is_call, unsigned idx,
                          const char *attr)
{
    unsigned kind = LLVMGetEnumAttributeKindForName(attr, strlen(attr));
    LLVMAttributeRef a = LLVMCreateEnumAttribute(c->ctx, kind, 0);
    if (is_call)
        LLVMAddCallSiteAttribute(fn_or_call, idx, a);
    else
        LLVMAddAttributeAtIndex(fn_or_call, idx, a);
}

static LLVMValueRef const_int(tth__llcg *c, tth_dtype t, int64_t v)
{
    return LLVMConstInt(tth__llcg_type(c, t), (unsigned long long)v, is_signed_int(t));
}

static LLVMTypeRef i32_type(tth__llcg *c) { return LLVMInt32TypeInContext(c->ctx); }

LLVMValueRef tth__llcg_splat(tth__llcg *c, LLVMValueRef v, int32_t lanes)
{
    if (lanes <= 1)
        return v;
    LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(v), (unsigned)lanes);
    LLVMValueRef one = LLVMBuildInsertElement(c->b, LLVMGetPoison(vt), v, LLVMConstInt(i32_type(c), 0, 0), "");
    return LLVMBuildShuffleVector(c->b, one, LLVMGetPoison(vt), LLVMConstNull(LLVMVectorType(i32_type(c), (unsigned)lanes)),
                                  "");
}

/* The integer constant v in a scalar or vector integer type. */
static LLVMValueRef const_like(tth__llcg *c, LLVMTypeRef ty, long long v)
{
    if (LLVMGetTypeKind(ty) != LLVMVectorTypeKind)
        return LLVMConstInt(ty, (unsigned long long)v, 1);
    return tth__llcg_splat(c, LLVMConstInt(LLVMGetElementType(ty), (unsigned long long)v, 1),
                           (int32_t)LLVMGetVectorSize(ty));
}

/* ---------------------------------------------------------------- conversions */

/* bfloat16 bits → float32: the bits are the float's upper half. The same conversions as
 * libtth's tth_bf16_to_f32/tth_f32_to_bf16 (docs/tir.md, "float16 and bfloat16"), emitted as IR
 * because generated code does not link libtth. */
static LLVMValueRef bf16_widen(tth__llcg *c, LLVMValueRef v)
{
    int32_t lanes = tth__llcg_lanes_of(v);
    LLVMTypeRef it = tth__llcg_vtype(c, TTH_I32, lanes);
    LLVMValueRef w = LLVMBuildShl(c->b, LLVMBuildZExt(c->b, v, it, ""), const_like(c, it, 16), "");
    return LLVMBuildBitCast(c->b, w, tth__llcg_vtype(c, TTH_F32, lanes), "");
}

/* float32 → bfloat16 bits: add 0x7fff plus the kept lowest bit (round to nearest, ties to even;
 * a carry into the exponent is right, up to infinity), keep the upper half; a NaN keeps its
 * sign and upper payload with the quiet bit set (rounding could turn it into infinity). */
static LLVMValueRef bf16_narrow(tth__llcg *c, LLVMValueRef v)
{
    int32_t lanes = tth__llcg_lanes_of(v);
    LLVMTypeRef it = tth__llcg_vtype(c, TTH_I32, lanes);
    LLVMValueRef x = LLVMBuildBitCast(c->b, v, it, "");
    LLVMValueRef hi = LLVMBuildLShr(c->b, x, const_like(c, it, 16), "");
    LLVMValueRef bias = LLVMBuildAdd(c->b, LLVMBuildAnd(c->b, hi, const_like(c, it, 1), ""),
                                     const_like(c, it, 0x7fff), "");
    LLVMValueRef rounded = LLVMBuildLShr(c->b, LLVMBuildAdd(c->b, x, bias, ""), const_like(c, it, 16), "");
    LLVMValueRef quiet = LLVMBuildOr(c->b, hi, const_like(c, it, 0x40), "");
    LLVMValueRef nan = LLVMBuildFCmp(c->b, LLVMRealUNO, v, v, "");
    LLVMValueRef r = LLVMBuildSelect(c->b, nan, quiet, rounded, "");
    return LLVMBuildTrunc(c->b, r, tth__llcg_vtype(c, TTH_BF16, lanes), "");
}

LLVMValueRef tth__llcg_convert(tth__llcg *c, LLVMValueRef v, tth_dtype from, tth_dtype to)
{
    if (from == to)
        return v;
    /* bfloat16 goes through float32 */
    if (from == TTH_BF16) {
        v = bf16_widen(c, v);
        from = TTH_F32;
        if (to == TTH_F32)
            return v;
    }
    if (to == TTH_BF16)
        return bf16_narrow(c, tth__llcg_convert(c, v, from, TTH_F32));
    LLVMTypeRef tt = tth__llcg_vtype(c, to, tth__llcg_lanes_of(v));
    if (to == TTH_BOOL) {
        if (tth_dtype_is_float(from))
            return LLVMBuildFCmp(c->b, LLVMRealUNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
        return LLVMBuildICmp(c->b, LLVMIntNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
    }
    if (from == TTH_BOOL) {
        if (tth_dtype_is_float(to))
            return LLVMBuildUIToFP(c->b, v, tt, "");
        return LLVMBuildZExt(c->b, v, tt, "");
    }
    if (tth_dtype_is_float(from) && tth_dtype_is_float(to)) {
        if (tth_dtype_size(to) > tth_dtype_size(from))
            return LLVMBuildFPExt(c->b, v, tt, "");
        return LLVMBuildFPTrunc(c->b, v, tt, "");
    }
    if (tth_dtype_is_float(from))
        return tth_dtype_is_signed(to) ? LLVMBuildFPToSI(c->b, v, tt, "") : LLVMBuildFPToUI(c->b, v, tt, "");
    if (tth_dtype_is_float(to))
        return tth_dtype_is_signed(from) ? LLVMBuildSIToFP(c->b, v, tt, "") : LLVMBuildUIToFP(c->b, v, tt, "");
    /* integer → integer */
    if (tth_dtype_size(to) == tth_dtype_size(from))
        return v;
    if (tth_dtype_size(to) < tth_dtype_size(from))
        return LLVMBuildTrunc(c->b, v, tt, "");
    return tth_dtype_is_signed(from) ? LLVMBuildSExt(c->b, v, tt, "") : LLVMBuildZExt(c->b, v, tt, "");
}

LLVMValueRef tth__llcg_truth(tth__llcg *c, const tth_texpr *e)
{
    LLVMValueRef v = tth__llcg_expr(c, e);
    if (!v)
        return NULL;
    return tth__llcg_convert(c, v, e->dtype, TTH_BOOL);
}

LLVMValueRef tth__llcg_index(tth__llcg *c, const tth_texpr *e)
{
    if (tth_dtype_is_float(e->dtype))
        return fail_null(c, TTH_ETYPE, "a buffer index", e->dtype);
    LLVMValueRef v = tth__llcg_expr(c, e);
    if (!v)
        return NULL;
    return tth__llcg_convert(c, v, e->dtype, TTH_I64);
}

LLVMValueRef tth__llcg_elem_ptr(tth__llcg *c, const tth_tbuffer *buf, LLVMValueRef index)
{
    LLVMValueRef base = tth__llcg_buffer_base(c, buf);
    if (!base)
        return NULL;
    return LLVMBuildInBoundsGEP2(c->b, tth__llcg_mem_type(c, buf->dtype), base, &index, 1, "");
}

/* The lanes of buf at the i64 index vector vidx, or v stored there: llvm.masked.gather /
 * llvm.masked.scatter with every lane on. One instruction where the CPU has one (AVX-512, AVX2's
 * gathers); elsewhere LLVM expands it late, so the IR the optimizer sees stays one call instead
 * of a load and an insert per lane. */
static LLVMValueRef masked_mem(tth__llcg *c, const tth_tbuffer *buf, LLVMValueRef vidx, int32_t lanes, LLVMValueRef v)
{
    LLVMValueRef base = tth__llcg_buffer_base(c, buf);
    if (!base)
        return NULL;
    LLVMTypeRef et = tth__llcg_mem_type(c, buf->dtype), vt = LLVMVectorType(et, (unsigned)lanes);
    LLVMValueRef ptrs = LLVMBuildInBoundsGEP2(c->b, et, base, &vidx, 1, "");
    LLVMTypeRef tys[2] = {vt, LLVMTypeOf(ptrs)};
    const char *name = v ? "llvm.masked.scatter" : "llvm.masked.gather";
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    if (id == 0) {
        tth__llcg_fail(c, TTH_EINTERNAL, "LLVM has no intrinsic '%s'", name);
        return NULL;
    }
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(c->mod, id, tys, 2);
    LLVMTypeRef fnty = LLVMIntrinsicGetType(c->ctx, id, tys, 2);
    LLVMValueRef align = LLVMConstInt(i32_type(c), (unsigned long long)tth_dtype_size(buf->dtype), 0);
    LLVMValueRef mask = LLVMConstAllOnes(LLVMVectorType(LLVMInt1TypeInContext(c->ctx), (unsigned)lanes));
    if (v) {
        LLVMValueRef args[4] = {v, ptrs, align, mask};
        return LLVMBuildCall2(c->b, fnty, fn, args, 4, "");
    }
    LLVMValueRef args[4] = {ptrs, align, mask, LLVMGetPoison(vt)};
    return LLVMBuildCall2(c->b, fnty, fn, args, 4, "");
}

LLVMValueRef tth__llcg_gather(tth__llcg *c, const tth_tbuffer *buf, LLVMValueRef vidx, int32_t lanes)
{
    return masked_mem(c, buf, vidx, lanes, NULL);
}

static void mark_const_load(tth__llcg *c, const tth_tbuffer *buf, LLVMValueRef v);

/* Lanes of bytes or halves `stride` elements apart (a ramp with a constant stride): one scalar
 * access per lane at a constant offset from the first, and v's lanes inserted or extracted.
 * x86 has no gather or scatter of bytes and halves, and LLVM's expansion of one computes a vector
 * of 64-bit addresses and moves each to a scalar register first: four instructions a lane where
 * this is one (docs/llvm.md, "Strided bytes"). A load of strides 2 to 4 keeps the wider load and
 * shuffle instead. */
int tth__llcg_strided_narrow(const tth_tbuffer *buf, const tth_texpr *index, int32_t lanes)
{
    size_t es = tth_dtype_size(buf->dtype);
    return (es == 1 || es == 2) && buf->dtype != TTH_BOOL && index->kind == TTH_TEXPR_RAMP &&
           index->u.ramp.stride != 0 && index->u.ramp.stride != 1 && lanes >= 2 && lanes <= 64;
}

LLVMValueRef tth__llcg_strided_access(tth__llcg *c, const tth_tbuffer *buf, const tth_texpr *index, int32_t lanes,
                                      LLVMValueRef v)
{
    LLVMValueRef b0 = tth__llcg_index(c, index->u.ramp.base);
    LLVMValueRef p0 = b0 ? tth__llcg_elem_ptr(c, buf, b0) : NULL;
    if (!p0)
        return NULL;
    LLVMTypeRef et = tth__llcg_mem_type(c, buf->dtype), i64 = LLVMInt64TypeInContext(c->ctx);
    unsigned align = (unsigned)tth_dtype_size(buf->dtype);
    LLVMValueRef r = v ? v : LLVMGetPoison(LLVMVectorType(et, (unsigned)lanes));
    for (int32_t l = 0; l < lanes; l++) {
        LLVMValueRef off = LLVMConstInt(i64, (unsigned long long)(index->u.ramp.stride * l), 1);
        LLVMValueRef p = LLVMBuildInBoundsGEP2(c->b, et, p0, &off, 1, "");
        LLVMValueRef lane = LLVMConstInt(i32_type(c), (unsigned long long)l, 0);
        if (v) {
            LLVMValueRef st = LLVMBuildStore(c->b, LLVMBuildExtractElement(c->b, v, lane, ""), p);
            LLVMSetAlignment(st, align);
        } else {
            LLVMValueRef x = LLVMBuildLoad2(c->b, et, p, "");
            LLVMSetAlignment(x, align);
            mark_const_load(c, buf, x);
            r = LLVMBuildInsertElement(c->b, r, x, lane, "");
        }
    }
    return r;
}

int tth__llcg_scatter(tth__llcg *c, const tth_tbuffer *buf, LLVMValueRef vidx, LLVMValueRef v)
{
    return masked_mem(c, buf, vidx, tth__llcg_lanes_of(v), v) ? 0 : (c->diag ? c->diag->code : TTH_EINVAL);
}

/* The power of two a masked access widens `lanes` elements of elem to, or 0 to access them as
 * they are: a power of two already, masked tails off, elements other than 32 and 64 bits
 * (AVX-512F masks those; bytes and halves need AVX-512BW), or more than one 512-bit register
 * (a 49-lane row sum is faster as the pieces LLVM splits it into than as a masked 64-lane load
 * whose lanes are then shuffled back into those pieces). */
static unsigned masked_width(tth__llcg *c, const tth_tbuffer *buf, LLVMTypeRef elem, int32_t lanes)
{
    if (!c->masked_tails || lanes < 2 || lanes > 64 || (lanes & (lanes - 1)) == 0 ||
        LLVMIsAAllocaInst(tth__llcg_buffer_base(c, buf)))
        return 0;
    unsigned long long bits = LLVMSizeOfTypeInBits(c->td, elem);
    if (bits != 32 && bits != 64)
        return 0;
    unsigned w = 1;
    while (w < (unsigned)lanes)
        w <<= 1;
    return w * bits <= 512 ? w : 0;
}

/* <w x i1> with the first `lanes` on */
static LLVMValueRef tail_mask(tth__llcg *c, unsigned w, int32_t lanes)
{
    LLVMValueRef bits[64];
    LLVMTypeRef i1 = LLVMInt1TypeInContext(c->ctx);
    for (unsigned l = 0; l < w; l++)
        bits[l] = LLVMConstInt(i1, l < (unsigned)lanes, 0);
    return LLVMConstVector(bits, w);
}

/* lanes [0, n) of v (n may be more than v has: the lanes past its end are poison) */
static LLVMValueRef first_lanes(tth__llcg *c, LLVMValueRef v, unsigned n)
{
    LLVMValueRef idx[64];
    unsigned have = (unsigned)tth__llcg_lanes_of(v);
    for (unsigned l = 0; l < n; l++)
        idx[l] = l < have ? LLVMConstInt(i32_type(c), l, 0) : LLVMGetPoison(i32_type(c));
    return LLVMBuildShuffleVector(c->b, v, LLVMGetPoison(LLVMTypeOf(v)), LLVMConstVector(idx, n), "");
}

static LLVMValueRef masked_intrinsic(tth__llcg *c, const char *name, LLVMTypeRef vt, LLVMValueRef p,
                                     LLVMTypeRef *fnty)
{
    LLVMTypeRef tys[2] = {vt, LLVMTypeOf(p)};
    return intrinsic_of(c, name, tys, 2, fnty);
}

void tth__llcg_invariant_load(tth__llcg *c, LLVMValueRef load)
{
    LLVMSetMetadata(load, c->md_invariant, LLVMMetadataAsValue(c->ctx, LLVMMDNodeInContext2(c->ctx, NULL, 0)));
}

/* A load from a constant buffer is invariant, so that LLVM keeps weights in registers across
 * stores to other buffers even where it cannot tell their addresses apart (bound constants'
 * addresses are loaded from a table: docs/artifact.md, "Constants bound at run time"). */
static void mark_const_load(tth__llcg *c, const tth_tbuffer *buf, LLVMValueRef v)
{
    if (buf->scope == TTH_SCOPE_CONST && v && LLVMIsALoadInst(v))
        tth__llcg_invariant_load(c, v);
}

LLVMValueRef tth__llcg_contig_load(tth__llcg *c, const tth_tbuffer *buf, LLVMValueRef p, int32_t lanes, unsigned align)
{
    LLVMTypeRef elem = tth__llcg_mem_type(c, buf->dtype);
    unsigned w = masked_width(c, buf, elem, lanes);
    if (!w) {
        LLVMValueRef v = LLVMBuildLoad2(c->b, lanes > 1 ? LLVMVectorType(elem, (unsigned)lanes) : elem, p, "");
        LLVMSetAlignment(v, align);
        mark_const_load(c, buf, v);
        return v;
    }
    LLVMTypeRef wt = LLVMVectorType(elem, w), fnty;
    LLVMValueRef fn = masked_intrinsic(c, "llvm.masked.load", wt, p, &fnty);
    if (!fn)
        return NULL;
    LLVMValueRef args[4] = {p, LLVMConstInt(i32_type(c), align, 0), tail_mask(c, w, lanes), LLVMGetPoison(wt)};
    return first_lanes(c, LLVMBuildCall2(c->b, fnty, fn, args, 4, ""), (unsigned)lanes);
}

int tth__llcg_contig_store(tth__llcg *c, const tth_tbuffer *buf, LLVMValueRef p, LLVMValueRef v, unsigned align)
{
    int32_t lanes = tth__llcg_lanes_of(v);
    LLVMTypeRef elem = lanes > 1 ? LLVMGetElementType(LLVMTypeOf(v)) : LLVMTypeOf(v);
    unsigned w = masked_width(c, buf, elem, lanes);
    if (!w) {
        LLVMValueRef st = LLVMBuildStore(c->b, v, p);
        LLVMSetAlignment(st, align);
        return 0;
    }
    LLVMTypeRef fnty;
    LLVMValueRef fn = masked_intrinsic(c, "llvm.masked.store", LLVMVectorType(elem, w), p, &fnty);
    if (!fn)
        return c->diag ? c->diag->code : TTH_EINVAL;
    LLVMValueRef args[4] = {first_lanes(c, v, w), p, LLVMConstInt(i32_type(c), align, 0), tail_mask(c, w, lanes)};
    LLVMBuildCall2(c->b, fnty, fn, args, 4, "");
    return 0;
}

/* ---------------------------------------------------------------- binary operators */

/* Signed floor division and modulo from C's truncating ones: when the remainder is non-zero
 * and its sign differs from the divisor's, the quotient is one less and the modulo is r + b. */
static LLVMValueRef floor_adjust(tth__llcg *c, LLVMValueRef a, LLVMValueRef b, int want_mod)
{
    LLVMValueRef zero = LLVMConstNull(LLVMTypeOf(a));
    LLVMValueRef q = LLVMBuildSDiv(c->b, a, b, "");
    LLVMValueRef r = LLVMBuildSRem(c->b, a, b, "");
    LLVMValueRef rnz = LLVMBuildICmp(c->b, LLVMIntNE, r, zero, "");
    LLVMValueRef rneg = LLVMBuildICmp(c->b, LLVMIntSLT, r, zero, "");
    LLVMValueRef bneg = LLVMBuildICmp(c->b, LLVMIntSLT, b, zero, "");
    LLVMValueRef differ = LLVMBuildXor(c->b, rneg, bneg, "");
    LLVMValueRef adjust = LLVMBuildAnd(c->b, rnz, differ, "");
    if (want_mod)
        return LLVMBuildSelect(c->b, adjust, LLVMBuildAdd(c->b, r, b, ""), r, "");
    return LLVMBuildSelect(c->b, adjust, LLVMBuildSub(c->b, q, const_like(c, LLVMTypeOf(a), 1), ""), q, "");
}

static LLVMValueRef libm_call(tth__llcg *c, const char *base, LLVMTypeRef ft, tth_dtype t,
                              LLVMValueRef *args, unsigned n);

/* floor(v) and fmod(a, b) of the float dtype t: an LLVM intrinsic / frem, or C library calls
 * when c->libm_calls. */
static LLVMValueRef float_floor(tth__llcg *c, LLVMValueRef v, tth_dtype t)
{
    if (c->libm_calls)
        return libm_call(c, "floor", LLVMTypeOf(v), t, &v, 1);
    return call_intrinsic(c, "llvm.floor", &v, 1);
}

static LLVMValueRef float_rem(tth__llcg *c, LLVMValueRef a, LLVMValueRef b, tth_dtype t)
{
    if (c->libm_calls) {
        LLVMValueRef args[2] = {a, b};
        return libm_call(c, "fmod", LLVMTypeOf(a), t, args, 2);
    }
    return LLVMBuildFRem(c->b, a, b, "");
}

static LLVMValueRef lower_compare(tth__llcg *c, tth_tir_binop op, tth_dtype t, LLVMValueRef a,
                                  LLVMValueRef b)
{
    if (tth_dtype_is_float(t)) {
        LLVMRealPredicate p = LLVMRealOEQ;
        switch (op) {
        case TTH_TBIN_EQ: p = LLVMRealOEQ; break;
        case TTH_TBIN_NE: p = LLVMRealUNE; break;
        case TTH_TBIN_LT: p = LLVMRealOLT; break;
        case TTH_TBIN_LE: p = LLVMRealOLE; break;
        case TTH_TBIN_GT: p = LLVMRealOGT; break;
        case TTH_TBIN_GE: p = LLVMRealOGE; break;
        default: break;
        }
        return LLVMBuildFCmp(c->b, p, a, b, "");
    }
    int s = is_signed_int(t);
    LLVMIntPredicate p = LLVMIntEQ;
    switch (op) {
    case TTH_TBIN_EQ: p = LLVMIntEQ; break;
    case TTH_TBIN_NE: p = LLVMIntNE; break;
    case TTH_TBIN_LT: p = s ? LLVMIntSLT : LLVMIntULT; break;
    case TTH_TBIN_LE: p = s ? LLVMIntSLE : LLVMIntULE; break;
    case TTH_TBIN_GT: p = s ? LLVMIntSGT : LLVMIntUGT; break;
    case TTH_TBIN_GE: p = s ? LLVMIntSGE : LLVMIntUGE; break;
    default: break;
    }
    return LLVMBuildICmp(c->b, p, a, b, "");
}

static int is_arith(tth_tir_binop op)
{
    return op == TTH_TBIN_ADD || op == TTH_TBIN_SUB || op == TTH_TBIN_MUL || op == TTH_TBIN_DIV ||
           op == TTH_TBIN_MOD || op == TTH_TBIN_FLOORDIV || op == TTH_TBIN_FLOORMOD ||
           op == TTH_TBIN_SHL || op == TTH_TBIN_SHR || op == TTH_TBIN_BITAND || op == TTH_TBIN_BITOR;
}

/* Float remainder with the sign of the divisor: r = fmod(a, b); r != 0 && sign(r) != sign(b) ?
 * r + b : r (exact, unlike a - floor(a / b) * b). */
static LLVMValueRef float_floormod(tth__llcg *c, LLVMValueRef a, LLVMValueRef b, tth_dtype t)
{
    LLVMValueRef zero = LLVMConstNull(LLVMTypeOf(a));
    LLVMValueRef r = float_rem(c, a, b, t);
    if (!r)
        return NULL;
    LLVMValueRef rnz = LLVMBuildFCmp(c->b, LLVMRealUNE, r, zero, "");
    LLVMValueRef rneg = LLVMBuildFCmp(c->b, LLVMRealOLT, r, zero, "");
    LLVMValueRef bneg = LLVMBuildFCmp(c->b, LLVMRealOLT, b, zero, "");
    LLVMValueRef adjust = LLVMBuildAnd(c->b, rnz, LLVMBuildXor(c->b, rneg, bneg, ""), "");
    return LLVMBuildSelect(c->b, adjust, LLVMBuildFAdd(c->b, r, b, ""), r, "");
}

/* Arithmetic on 8- and 16-bit integers is done in 32-bit int and truncated back, as C's
 * integer promotion does: it wraps instead of overflowing, and INT8_MIN / -1 is defined. */
static LLVMValueRef lower_binary(tth__llcg *c, const tth_texpr *e)
{
    tth_tir_binop op = e->u.bin.op;
    tth_dtype t = e->u.bin.a->dtype;   /* operand dtype; e->dtype is bool for comparisons */
    int fl = tth_dtype_is_float(t);
    if (e->u.bin.b->dtype != t) {
        tth__llcg_fail(c, TTH_ETYPE, "operands of '%s' have different dtypes (%s, %s)",
                       binop_name(op), tth_dtype_name(t), tth_dtype_name(e->u.bin.b->dtype));
        return NULL;
    }
    if (op == TTH_TBIN_AND || op == TTH_TBIN_OR) {
        LLVMValueRef a = tth__llcg_truth(c, e->u.bin.a);
        LLVMValueRef b = a ? tth__llcg_truth(c, e->u.bin.b) : NULL;
        if (!b)
            return NULL;
        LLVMValueRef r = op == TTH_TBIN_AND ? LLVMBuildAnd(c->b, a, b, "") : LLVMBuildOr(c->b, a, b, "");
        return tth__llcg_convert(c, r, TTH_BOOL, e->dtype);
    }
    if (t == TTH_BOOL && is_arith(op))
        return fail_null(c, TTH_ETYPE, binop_name(op), t);
    LLVMValueRef a = tth__llcg_expr(c, e->u.bin.a);
    LLVMValueRef b = a ? tth__llcg_expr(c, e->u.bin.b) : NULL;
    if (!b)
        return NULL;

    tth_dtype wt = t;                  /* the dtype the operation is done in */
    if (is_int(t) && tth_dtype_size(t) < 4 && is_arith(op))
        wt = TTH_I32;
    else if (t == TTH_F16 && is_arith(op))
        wt = TTH_F32;                  /* float16 is computed in float32, as the c kind does */
    else if (t == TTH_BF16)
        wt = TTH_F32;                  /* bfloat16 (bits) likewise, comparisons too */
    tth_dtype ct = t == TTH_BF16 ? wt : t; /* the dtype compared in */
    if (wt != t) {
        a = tth__llcg_convert(c, a, t, wt);
        b = tth__llcg_convert(c, b, t, wt);
    }
    int s = is_signed_int(wt);
    int nsw = s && wt == t;            /* promoted arithmetic wraps */
    LLVMValueRef r = NULL;

    switch (op) {
    case TTH_TBIN_ADD:
        r = fl ? LLVMBuildFAdd(c->b, a, b, "") : nsw ? LLVMBuildNSWAdd(c->b, a, b, "") : LLVMBuildAdd(c->b, a, b, "");
        break;
    case TTH_TBIN_SUB:
        r = fl ? LLVMBuildFSub(c->b, a, b, "") : nsw ? LLVMBuildNSWSub(c->b, a, b, "") : LLVMBuildSub(c->b, a, b, "");
        break;
    case TTH_TBIN_MUL:
        r = fl ? LLVMBuildFMul(c->b, a, b, "") : nsw ? LLVMBuildNSWMul(c->b, a, b, "") : LLVMBuildMul(c->b, a, b, "");
        break;
    case TTH_TBIN_DIV:
        r = fl ? LLVMBuildFDiv(c->b, a, b, "") : s ? LLVMBuildSDiv(c->b, a, b, "") : LLVMBuildUDiv(c->b, a, b, "");
        break;
    case TTH_TBIN_MOD:
        r = fl ? float_rem(c, a, b, wt) : s ? LLVMBuildSRem(c->b, a, b, "") : LLVMBuildURem(c->b, a, b, "");
        break;
    case TTH_TBIN_FLOORDIV:
        if (fl)
            r = float_floor(c, LLVMBuildFDiv(c->b, a, b, ""), wt);
        else
            r = s ? floor_adjust(c, a, b, 0) : LLVMBuildUDiv(c->b, a, b, "");
        break;
    case TTH_TBIN_FLOORMOD:
        if (fl)
            r = float_floormod(c, a, b, wt);
        else
            r = s ? floor_adjust(c, a, b, 1) : LLVMBuildURem(c->b, a, b, "");
        break;
    case TTH_TBIN_MIN:
    case TTH_TBIN_MAX: {
        LLVMValueRef lt = op == TTH_TBIN_MIN ? lower_compare(c, TTH_TBIN_LT, ct, a, b)
                                             : lower_compare(c, TTH_TBIN_GT, ct, a, b);
        r = LLVMBuildSelect(c->b, lt, a, b, "");
        break;
    }
    case TTH_TBIN_EQ: case TTH_TBIN_NE: case TTH_TBIN_LT:
    case TTH_TBIN_LE: case TTH_TBIN_GT: case TTH_TBIN_GE:
        return tth__llcg_convert(c, lower_compare(c, op, ct, a, b), TTH_BOOL, e->dtype);
    case TTH_TBIN_SHL:
    case TTH_TBIN_SHR:
    case TTH_TBIN_BITAND:
    case TTH_TBIN_BITOR:
        if (fl)
            return fail_null(c, TTH_ETYPE, binop_name(op), t);
        if (op == TTH_TBIN_SHL)
            r = LLVMBuildShl(c->b, a, b, "");
        else if (op == TTH_TBIN_SHR)
            r = s ? LLVMBuildAShr(c->b, a, b, "") : LLVMBuildLShr(c->b, a, b, "");
        else if (op == TTH_TBIN_BITAND)
            r = LLVMBuildAnd(c->b, a, b, "");
        else
            r = LLVMBuildOr(c->b, a, b, "");
        break;
    default:
        tth__llcg_fail(c, TTH_EUNSUPPORTED, "binary operator %d is not known to the llvm code generator",
                       (int)op);
        return NULL;
    }
    if (!r)
        return NULL;
    return tth__llcg_convert(c, r, wt, e->dtype);
}

/* ---------------------------------------------------------------- intrinsics */

/* How each TIR intrinsic is lowered: an LLVM intrinsic overloaded on the float type where LLVM
 * has one that every target can lower (to an instruction or to the C library), else a call to
 * the C library function (float32 adds the "f" suffix). FMOD is the frem instruction, which is
 * C's fmod. ROUND_EVEN is llvm.nearbyint: with the default rounding mode that is round half to
 * even, and it lowers to nearbyint(f), which every C library has (roundeven does not). */
static const struct intrin_rule {
    tth_tir_intrin_op op;
    const char *llvm;   /* LLVM intrinsic, or NULL */
    const char *libm;   /* C library base name (double version) */
    int nargs;
} intrin_rules[] = {
    {TTH_TINTRIN_EXP, "llvm.exp", "exp", 1},
    {TTH_TINTRIN_LOG, "llvm.log", "log", 1},
    {TTH_TINTRIN_SQRT, "llvm.sqrt", "sqrt", 1},
    {TTH_TINTRIN_TANH, NULL, "tanh", 1},
    {TTH_TINTRIN_ERF, NULL, "erf", 1},
    {TTH_TINTRIN_POW, "llvm.pow", "pow", 2},
    {TTH_TINTRIN_FABS, "llvm.fabs", "fabs", 1},
    {TTH_TINTRIN_FLOOR, "llvm.floor", "floor", 1},
    {TTH_TINTRIN_CEIL, "llvm.ceil", "ceil", 1},
    {TTH_TINTRIN_ROUND_EVEN, "llvm.nearbyint", "nearbyint", 1},
    {TTH_TINTRIN_SIN, "llvm.sin", "sin", 1},
    {TTH_TINTRIN_COS, "llvm.cos", "cos", 1},
    {TTH_TINTRIN_FMOD, NULL, "fmod", 2},
    {TTH_TINTRIN_LOG1P, NULL, "log1p", 1},
    {TTH_TINTRIN_EXPM1, NULL, "expm1", 1},
    {TTH_TINTRIN_ASIN, NULL, "asin", 1},
    {TTH_TINTRIN_ACOS, NULL, "acos", 1},
    {TTH_TINTRIN_ATAN, NULL, "atan", 1},
    {TTH_TINTRIN_ASINH, NULL, "asinh", 1},
    {TTH_TINTRIN_ACOSH, NULL, "acosh", 1},
    {TTH_TINTRIN_ATANH, NULL, "atanh", 1},
};

static const struct intrin_rule *intrin_rule(tth_tir_intrin_op op)
{
    for (size_t i = 0; i < sizeof intrin_rules / sizeof intrin_rules[0]; i++)
        if (intrin_rules[i].op == op)
            return &intrin_rules[i];
    return NULL;
}

/* A call to a C library math function of the float type ft, declared nounwind. It is not declared
 * free of memory effects: C's math functions may set errno. */
static LLVMValueRef libm_call(tth__llcg *c, const char *base, LLVMTypeRef ft, tth_dtype t,
                              LLVMValueRef *args, unsigned n)
{
    if (LLVMGetTypeKind(ft) == LLVMVectorTypeKind) {
        /* no vector C library: call it lane by lane */
        unsigned lanes = LLVMGetVectorSize(ft);
        LLVMValueRef r = LLVMGetPoison(ft);
        for (unsigned l = 0; l < lanes; l++) {
            LLVMValueRef k = LLVMConstInt(i32_type(c), l, 0), la[3];
            for (unsigned i = 0; i < n; i++)
                la[i] = LLVMBuildExtractElement(c->b, args[i], k, "");
            LLVMValueRef v = libm_call(c, base, LLVMGetElementType(ft), t, la, n);
            if (!v)
                return NULL;
            r = LLVMBuildInsertElement(c->b, r, v, k, "");
        }
        return r;
    }
    char name[32];
    snprintf(name, sizeof name, "%s%s", base, t == TTH_F32 ? "f" : "");
    LLVMTypeRef params[2] = {ft, ft};
    LLVMTypeRef fnty = LLVMFunctionType(ft, params, n, 0);
    LLVMValueRef fn = extern_function(c, name, fnty);
    if (!fn)
        return NULL;
    add_enum_attr(c, fn, 0, (unsigned)LLVMAttributeFunctionIndex, "nounwind");
    return LLVMBuildCall2(c->b, fnty, fn, args, n, "");
}

/* REDUCE_ADD / REDUCE_MAX / REDUCE_MIN of a vector: LLVM's vector.reduce intrinsics (the float
 * add with reassociation allowed, so it is a tree). */
static LLVMValueRef lower_reduce(tth__llcg *c, const tth_texpr *e)
{
    const tth_texpr *a = e->u.intrin.args[0];
    tth_dtype t = e->dtype;
    tth_dtype ct = t == TTH_F16 || t == TTH_BF16 ? TTH_F32 : t;
    LLVMValueRef v = a ? tth__llcg_expr(c, a) : NULL;
    if (!v)
        return NULL;
    v = tth__llcg_convert(c, v, a->dtype, ct);
    if (t == TTH_BOOL)
        return fail_null(c, TTH_ETYPE, "a reduction", t);
    int fl = tth_dtype_is_float(ct), sg = is_signed_int(ct);
    const char *name;
    switch (e->u.intrin.op) {
    case TTH_TINTRIN_REDUCE_ADD: name = fl ? "llvm.vector.reduce.fadd" : "llvm.vector.reduce.add"; break;
    case TTH_TINTRIN_REDUCE_MAX:
        name = fl ? "llvm.vector.reduce.fmax" : sg ? "llvm.vector.reduce.smax" : "llvm.vector.reduce.umax";
        break;
    default:
        name = fl ? "llvm.vector.reduce.fmin" : sg ? "llvm.vector.reduce.smin" : "llvm.vector.reduce.umin";
        break;
    }
    LLVMTypeRef fnty;
    LLVMValueRef fn = intrinsic(c, name, LLVMTypeOf(v), &fnty);
    if (!fn)
        return NULL;
    LLVMValueRef r;
    if (fl && e->u.intrin.op == TTH_TINTRIN_REDUCE_ADD) {
        LLVMValueRef args[2] = {LLVMConstReal(tth__llcg_type(c, ct), -0.0), v};
        r = LLVMBuildCall2(c->b, fnty, fn, args, 2, "");
        LLVMSetFastMathFlags(r, LLVMFastMathAllowReassoc);
    } else {
        r = LLVMBuildCall2(c->b, fnty, fn, &v, 1, "");
    }
    return tth__llcg_convert(c, r, ct, t);
}

/* ---- four-byte dot products (DOT4_US, DOT4_SS: tth/tir.h, docs/tir.md "Dot products") ---- */

/* lanes [from, from + n) of the vector v (of `have` lanes) as a vector of w lanes, zeros past
 * the end */
static LLVMValueRef lanes_slice(tth__llcg *c, LLVMValueRef v, int have, int from, int n, int w)
{
    LLVMValueRef mask[64];
    for (int i = 0; i < w; i++)
        mask[i] = LLVMConstInt(i32_type(c), (unsigned long long)(i < n ? from + i : have), 0);
    return LLVMBuildShuffleVector(c->b, v, LLVMConstNull(LLVMTypeOf(v)), LLVMConstVector(mask, (unsigned)w), "");
}

/* The CPU's instruction on w lanes (w = c->dot_us or c->dot_ss). */
static LLVMValueRef dot4_native(tth__llcg *c, int us, LLVMValueRef acc, LLVMValueRef a, LLVMValueRef b, int w)
{
    LLVMValueRef args[3] = {acc, a, b};
    LLVMTypeRef fnty;
    LLVMValueRef fn;
    if (w == 4) {
        /* AArch64: sdot / usdot <4 x i32> += <16 x i8> . <16 x i8> */
        LLVMTypeRef v16 = LLVMVectorType(LLVMInt8TypeInContext(c->ctx), 16);
        LLVMTypeRef tys[2] = {LLVMTypeOf(acc), v16};
        fn = intrinsic_of(c, us ? "llvm.aarch64.neon.usdot" : "llvm.aarch64.neon.sdot", tys, 2, &fnty);
        args[1] = LLVMBuildBitCast(c->b, a, v16, "");
        args[2] = LLVMBuildBitCast(c->b, b, v16, "");
    } else { /* x86 VNNI: vpdpbusd on 16 (AVX-512) or 8 (AVX-VNNI) int32 lanes */
        fn = intrinsic_of(c, w == 16 ? "llvm.x86.avx512.vpdpbusd.512" : "llvm.x86.avx512.vpdpbusd.256", NULL, 0, &fnty);
    }
    return fn ? LLVMBuildCall2(c->b, fnty, fn, args, 3, "") : NULL;
}

/* Without the instruction: the bytes widened to int32, multiplied, and the four products of
 * each lane added to it (acc, a, b are vectors of n int32 lanes). */
static LLVMValueRef dot4_widened(tth__llcg *c, int us, LLVMValueRef acc, LLVMValueRef a, LLVMValueRef b, int n)
{
    LLVMTypeRef bytes = LLVMVectorType(LLVMInt8TypeInContext(c->ctx), (unsigned)(4 * n));
    LLVMTypeRef wide = LLVMVectorType(i32_type(c), (unsigned)(4 * n));
    LLVMValueRef ab = LLVMBuildBitCast(c->b, a, bytes, ""), bb = LLVMBuildBitCast(c->b, b, bytes, "");
    LLVMValueRef aw = us ? LLVMBuildZExt(c->b, ab, wide, "") : LLVMBuildSExt(c->b, ab, wide, "");
    LLVMValueRef prod = LLVMBuildMul(c->b, aw, LLVMBuildSExt(c->b, bb, wide, ""), "");
    /* the bytes of a lane are next to each other whatever the byte order: lane i sums
     * products 4i .. 4i + 3 */
    LLVMValueRef sum = acc;
    for (int j = 0; j < 4; j++) {
        LLVMValueRef mask[64];
        for (int i = 0; i < n; i++)
            mask[i] = LLVMConstInt(i32_type(c), (unsigned long long)(4 * i + j), 0);
        LLVMValueRef part = LLVMBuildShuffleVector(c->b, prod, LLVMGetPoison(wide), LLVMConstVector(mask, (unsigned)n), "");
        sum = LLVMBuildAdd(c->b, sum, part, "");
    }
    return sum;
}

static LLVMValueRef lower_dot4(tth__llcg *c, const tth_texpr *e)
{
    int us = e->u.intrin.op == TTH_TINTRIN_DOT4_US;
    int n = e->lanes;
    if (e->dtype != TTH_I32 || n > 64)
        return fail_null(c, TTH_EUNSUPPORTED, us ? "dot4_us" : "dot4_ss", e->dtype);
    LLVMValueRef v[3];
    for (int i = 0; i < 3; i++) {
        const tth_texpr *x = e->u.intrin.args[i];
        if (!x)
            return tth__llcg_fail(c, TTH_EINVAL, "a dot product needs 3 arguments"), NULL;
        if (!(v[i] = tth__llcg_expr(c, x)))
            return NULL;
        if (n == 1) /* a scalar as a vector of one lane */
            v[i] = LLVMBuildInsertElement(c->b, LLVMGetPoison(LLVMVectorType(i32_type(c), 1)), v[i],
                                          LLVMConstInt(i32_type(c), 0, 0), "");
    }
    int w = us ? c->dot_us : c->dot_ss;
    LLVMValueRef r;
    if (!w) {
        r = dot4_widened(c, us, v[0], v[1], v[2], n);
    } else {
        /* chunks of the instruction's width, the last padded with zeros; then the lanes put
         * back together */
        int nch = (n + w - 1) / w;
        LLVMValueRef parts[16];
        for (int k = 0; k < nch; k++) {
            int cl = n - k * w < w ? n - k * w : w;
            LLVMValueRef s[3];
            for (int i = 0; i < 3; i++)
                s[i] = n == w ? v[i] : lanes_slice(c, v[i], n, k * w, cl, w);
            if (!(parts[k] = dot4_native(c, us, s[0], s[1], s[2], w)))
                return NULL;
        }
        r = parts[0];
        if (nch > 1 || n != w) {
            /* concatenate: the result so far (have lanes, padded to m) with the next chunk */
            int have = w < n ? w : n;
            r = lanes_slice(c, parts[0], w, 0, have, nch * w);
            for (int k = 1; k < nch; k++) {
                LLVMValueRef next = lanes_slice(c, parts[k], w, 0, w, nch * w);
                LLVMValueRef mask[64];
                for (int i = 0; i < nch * w; i++)
                    mask[i] = LLVMConstInt(i32_type(c), (unsigned long long)(i < k * w ? i : nch * w + i - k * w), 0);
                r = LLVMBuildShuffleVector(c->b, r, next, LLVMConstVector(mask, (unsigned)(nch * w)), "");
            }
            if (nch * w != n)
                r = lanes_slice(c, r, nch * w, 0, n, n);
        }
    }
    if (n == 1)
        r = LLVMBuildExtractElement(c->b, r, LLVMConstInt(i32_type(c), 0, 0), "");
    return r;
}

static LLVMValueRef lower_intrin(tth__llcg *c, const tth_texpr *e)
{
    tth_tir_intrin_op op = e->u.intrin.op;
    if (op == TTH_TINTRIN_REDUCE_ADD || op == TTH_TINTRIN_REDUCE_MAX || op == TTH_TINTRIN_REDUCE_MIN)
        return lower_reduce(c, e);
    if (op == TTH_TINTRIN_DOT4_US || op == TTH_TINTRIN_DOT4_SS)
        return lower_dot4(c, e);
    tth_dtype t = e->dtype;
    if (op == TTH_TINTRIN_FMA) {
        if (!tth_dtype_is_float(t))
            return fail_null(c, TTH_EUNSUPPORTED, "fma", t);
        tth_dtype ct = t == TTH_F16 || t == TTH_BF16 ? TTH_F32 : t;
        LLVMValueRef args[3];
        for (int i = 0; i < 3; i++) {
            const tth_texpr *a = e->u.intrin.args[i];
            LLVMValueRef v = a ? tth__llcg_expr(c, a) : NULL;
            if (!v) {
                if (!a)
                    tth__llcg_fail(c, TTH_EINVAL, "fma needs 3 arguments");
                return NULL;
            }
            args[i] = tth__llcg_convert(c, v, a->dtype, ct);
        }
        /* llvm.fma is one instruction where the target has FMA and the C library's fma
         * otherwise; on Arm hard float the library call must use the VFP convention */
        LLVMValueRef v = c->libm_calls ? libm_call(c, "fma", LLVMTypeOf(args[0]), ct, args, 3)
                                       : call_intrinsic(c, "llvm.fma", args, 3);
        return v ? tth__llcg_convert(c, v, ct, t) : NULL;
    }
    const struct intrin_rule *r = intrin_rule(op);
    if (!r) {
        tth__llcg_fail(c, TTH_EUNSUPPORTED, "intrinsic %d is not known to the llvm code generator", (int)op);
        return NULL;
    }
    if (!tth_dtype_is_float(t))
        return fail_null(c, TTH_EUNSUPPORTED, r->libm, t);

    /* float16 and bfloat16 are computed in float32 and rounded back, as C does for _Float16 math. */
    tth_dtype ct = t == TTH_F16 || t == TTH_BF16 ? TTH_F32 : t;
    LLVMTypeRef ft = tth__llcg_vtype(c, ct, e->lanes);
    LLVMValueRef args[2];
    for (int i = 0; i < r->nargs; i++) {
        const tth_texpr *a = e->u.intrin.args[i];
        if (!a) {
            tth__llcg_fail(c, TTH_EINVAL, "intrinsic '%s' needs %d arguments", r->libm, r->nargs);
            return NULL;
        }
        LLVMValueRef v = tth__llcg_expr(c, a);
        if (!v)
            return NULL;
        args[i] = tth__llcg_convert(c, v, a->dtype, ct);
    }
    LLVMValueRef v;
    if (op == TTH_TINTRIN_FMOD)
        v = float_rem(c, args[0], args[1], ct);
    else if (r->llvm && (!c->libm_calls || op == TTH_TINTRIN_FABS))
        v = call_intrinsic(c, r->llvm, args, (unsigned)r->nargs);
    else
        v = libm_call(c, r->libm, ft, ct, args, (unsigned)r->nargs);
    if (!v)
        return NULL;
    return tth__llcg_convert(c, v, ct, t);
}

/* ---------------------------------------------------------------- extern calls */

/* A C function by name. Arguments are passed in the register types of their dtypes, except
 * bool, passed as an 8-bit 0/1 like C's _Bool; address_of arguments are pointers. 8- and 16-bit
 * integer arguments carry signext/zeroext as C compilers emit them. */
static LLVMValueRef lower_call_extern(tth__llcg *c, const tth_texpr *e)
{
    size_t n = e->u.call.nargs;
    LLVMTypeRef *types = n ? calloc(n, sizeof *types) : NULL;
    LLVMValueRef *args = n ? calloc(n, sizeof *args) : NULL;
    LLVMValueRef call = NULL;
    if (n && (!types || !args)) {
        tth__llcg_fail(c, TTH_ENOMEM, "out of memory lowering a call to '%s'", e->u.call.name);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const tth_texpr *a = e->u.call.args[i];
        LLVMValueRef v = tth__llcg_expr(c, a);
        if (!v)
            goto done;
        if (a->kind != TTH_TEXPR_ADDRESS_OF && a->dtype == TTH_BOOL)
            v = LLVMBuildZExt(c->b, v, LLVMInt8TypeInContext(c->ctx), "");
        args[i] = v;
        types[i] = LLVMTypeOf(v);
    }
    LLVMTypeRef ret = tth__llcg_mem_type(c, e->dtype);
    if (!ret) {
        fail_null(c, TTH_ETYPE, "a call_extern result", e->dtype);
        goto done;
    }
    LLVMTypeRef fnty = LLVMFunctionType(ret, types, (unsigned)n, 0);
    LLVMValueRef fn = extern_function(c, e->u.call.name, fnty);
    if (!fn)
        goto done;
    call = LLVMBuildCall2(c->b, fnty, fn, args, (unsigned)n, "");
    for (size_t i = 0; i < n; i++) {
        const tth_texpr *a = e->u.call.args[i];
        if (a->kind == TTH_TEXPR_ADDRESS_OF || tth_dtype_is_float(a->dtype) || tth_dtype_size(a->dtype) > 2)
            continue;
        const char *ext = a->dtype != TTH_BOOL && tth_dtype_is_signed(a->dtype) ? "signext" : "zeroext";
        add_enum_attr(c, fn, 0, (unsigned)(i + 1), ext);
        add_enum_attr(c, call, 1, (unsigned)(i + 1), ext);
    }
    if (e->dtype == TTH_BOOL)
        call = LLVMBuildICmp(c->b, LLVMIntNE, call, LLVMConstNull(ret), "");
done:
    free(types);
    free(args);
    return call;
}

/* ---------------------------------------------------------------- vector indices */

LLVMValueRef tth__llcg_vindex(tth__llcg *c, const tth_texpr *index, LLVMValueRef *contiguous_base)
{
    *contiguous_base = NULL;
    if (index->kind == TTH_TEXPR_RAMP && index->u.ramp.stride == 1) {
        *contiguous_base = tth__llcg_index(c, index->u.ramp.base);
        return NULL;
    }
    return tth__llcg_index(c, index);
}

/* The lanes of e, a vector of integer constants (immediates, ramps and broadcasts of them and
 * their + - * / % and shifts), in v[0 .. lanes): 0, else -1 */
static int const_lanes(const tth_texpr *e, int32_t lanes, int64_t *v)
{
    switch (e->kind) {
    case TTH_TEXPR_INT:
        for (int32_t l = 0; l < lanes; l++)
            v[l] = e->u.i;
        return 0;
    case TTH_TEXPR_BROADCAST:
        return e->u.bcast.value->lanes == 1 ? const_lanes(e->u.bcast.value, lanes, v) : -1;
    case TTH_TEXPR_RAMP: {
        int64_t b;
        if (e->lanes != lanes || const_lanes(e->u.ramp.base, 1, &b))
            return -1;
        for (int32_t l = 0; l < lanes; l++)
            v[l] = b + e->u.ramp.stride * l;
        return 0;
    }
    case TTH_TEXPR_BINARY: {
        int64_t a[64], b[64];
        if (tth_dtype_is_float(e->dtype) || const_lanes(e->u.bin.a, lanes, a) || const_lanes(e->u.bin.b, lanes, b))
            return -1;
        for (int32_t l = 0; l < lanes; l++) {
            switch (e->u.bin.op) {
            case TTH_TBIN_ADD: v[l] = a[l] + b[l]; break;
            case TTH_TBIN_SUB: v[l] = a[l] - b[l]; break;
            case TTH_TBIN_MUL: v[l] = a[l] * b[l]; break;
            case TTH_TBIN_DIV:
            case TTH_TBIN_MOD:
                if (b[l] == 0)
                    return -1;
                v[l] = e->u.bin.op == TTH_TBIN_DIV ? a[l] / b[l] : a[l] % b[l];
                break;
            default: return -1;
            }
        }
        return 0;
    }
    default:
        return -1;
    }
}

/* An index of `lanes` lanes that is broadcast(s) + a constant vector whose lanes lie within 64
 * elements: s (a scalar), the constant lanes in off[], their least in *lo and the span they cover
 * in *span; else NULL */
static const tth_texpr *permuted_index(const tth_texpr *ix, int32_t lanes, int64_t *off, int64_t *lo, int64_t *span)
{
    if (ix->kind != TTH_TEXPR_BINARY || ix->u.bin.op != TTH_TBIN_ADD || lanes > 64)
        return NULL;
    for (int side = 0; side < 2; side++) {
        const tth_texpr *s = side ? ix->u.bin.b : ix->u.bin.a, *k = side ? ix->u.bin.a : ix->u.bin.b;
        if (s->kind != TTH_TEXPR_BROADCAST || s->u.bcast.value->lanes != 1 || const_lanes(k, lanes, off))
            continue;
        int64_t hi = off[0];
        *lo = off[0];
        for (int32_t l = 1; l < lanes; l++) {
            *lo = off[l] < *lo ? off[l] : *lo;
            hi = off[l] > hi ? off[l] : hi;
        }
        *span = hi - *lo + 1;
        return *span <= 64 ? s->u.bcast.value : NULL;
    }
    return NULL;
}

/* ---------------------------------------------------------------- expressions */

LLVMValueRef tth__llcg_expr(tth__llcg *c, const tth_texpr *e)
{
    if (!e) {
        tth__llcg_fail(c, TTH_EINVAL, "missing expression");
        return NULL;
    }
    if (!tth__llcg_type(c, e->dtype)) {
        tth__llcg_fail(c, TTH_ETYPE, "expression of kind %d has invalid dtype %d", (int)e->kind,
                       (int)e->dtype);
        return NULL;
    }
    switch (e->kind) {
    case TTH_TEXPR_INT:
        if (e->dtype == TTH_BF16)
            return const_int(c, TTH_BF16, tth_f32_to_bf16((float)e->u.i));
        if (tth_dtype_is_float(e->dtype))
            return LLVMConstReal(tth__llcg_type(c, e->dtype), (double)e->u.i);
        return const_int(c, e->dtype, e->dtype == TTH_BOOL ? e->u.i != 0 : e->u.i);
    case TTH_TEXPR_FLOAT:
        if (!tth_dtype_is_float(e->dtype))
            return fail_null(c, TTH_ETYPE, "a float immediate", e->dtype);
        if (e->dtype == TTH_BF16)
            return const_int(c, TTH_BF16, tth_f32_to_bf16((float)e->u.f));
        return LLVMConstReal(tth__llcg_type(c, e->dtype), e->u.f);
    case TTH_TEXPR_VAR: {
        LLVMValueRef v = e->u.var ? tth__llcg_scope_lookup(&c->vars, e->u.var->id) : NULL;
        if (!v)
            tth__llcg_fail(c, TTH_EINVAL, "variable '%s' is used outside the loop or let that binds it",
                           e->u.var ? e->u.var->name : "(null)");
        return v;
    }
    case TTH_TEXPR_LOAD: {
        const tth_tbuffer *buf = e->u.load.buf;
        LLVMTypeRef mt = tth__llcg_mem_type(c, buf->dtype);
        unsigned align = e->u.load.align ? e->u.load.align : (unsigned)tth_dtype_size(buf->dtype);
        LLVMValueRef v;
        if (e->lanes > 1) {
            const tth_texpr *ix = e->u.load.index;
            int64_t st = ix->kind == TTH_TEXPR_RAMP ? ix->u.ramp.stride : 0;
            /* bytes and halves a stride apart, beyond the strides one wide load serves: lane by
             * lane, without the vector of indices */
            if (tth__llcg_strided_narrow(buf, ix, e->lanes) && !(st >= 2 && st <= 4)) {
                if (!(v = tth__llcg_strided_access(c, buf, ix, e->lanes, NULL)))
                    return NULL;
                goto loaded;
            }
            /* lanes a constant permutation of a short span from one scalar index (the grouped
             * kernel's input lanes, docs/llvm.md "Permuted loads"): one load of the span and a
             * shuffle, where a gather would load lane by lane */
            int64_t poff[64], plo = 0, pspan = 0;
            const tth_texpr *sb = permuted_index(ix, e->lanes, poff, &plo, &pspan);
            if (sb && buf->dtype != TTH_BOOL) {
                LLVMValueRef b0 = tth__llcg_index(c, sb);
                if (!b0)
                    return NULL;
                b0 = LLVMBuildAdd(c->b, b0, LLVMConstInt(LLVMTypeOf(b0), (unsigned long long)plo, 1), "");
                LLVMValueRef p = tth__llcg_elem_ptr(c, buf, b0);
                LLVMValueRef wide = p ? tth__llcg_contig_load(c, buf, p, (int32_t)pspan,
                                                              (unsigned)tth_dtype_size(buf->dtype)) : NULL;
                if (!wide)
                    return NULL;
                LLVMValueRef mask[64];
                for (int32_t l = 0; l < e->lanes; l++)
                    mask[l] = LLVMConstInt(i32_type(c), (unsigned long long)(poff[l] - plo), 0);
                v = LLVMBuildShuffleVector(c->b, wide, LLVMGetPoison(LLVMTypeOf(wide)),
                                           LLVMConstVector(mask, (unsigned)e->lanes), "");
                goto loaded;
            }
            LLVMValueRef base = NULL;
            LLVMValueRef vidx = tth__llcg_vindex(c, ix, &base);
            if (!vidx && !base)
                return NULL;
            if (!base && st >= 2 && st <= 4 && buf->dtype != TTH_BOOL) {
                /* a small constant stride: one contiguous load of the span (s*(lanes-1)+1
                 * elements, never past the last one used) and a shuffle that keeps every s-th */
                LLVMValueRef b0 = tth__llcg_index(c, ix->u.ramp.base);
                LLVMValueRef p = b0 ? tth__llcg_elem_ptr(c, buf, b0) : NULL;
                if (!p)
                    return NULL;
                unsigned span = (unsigned)(st * (e->lanes - 1) + 1);
                if (st == 2 && e->lanes >= 2 && e->lanes <= 64) {
                    /* stride 2: the span's first and last `lanes` elements as two vector loads
                     * and one two-source shuffle (a span of 2*lanes-1 elements loaded as one
                     * odd-length vector becomes many small loads) */
                    unsigned es = (unsigned)tth_dtype_size(buf->dtype);
                    int64_t off = (int64_t)span - e->lanes;
                    LLVMValueRef b1 = LLVMBuildAdd(c->b, b0, LLVMConstInt(LLVMTypeOf(b0), (unsigned long long)off, 1), "");
                    LLVMValueRef p1 = tth__llcg_elem_ptr(c, buf, b1);
                    LLVMValueRef lo = tth__llcg_contig_load(c, buf, p, e->lanes, es);
                    LLVMValueRef hi = p1 ? tth__llcg_contig_load(c, buf, p1, e->lanes, es) : NULL;
                    if (!lo || !hi)
                        return NULL;
                    LLVMValueRef mask[64];
                    for (int32_t l = 0; l < e->lanes; l++)
                        mask[l] = LLVMConstInt(i32_type(c), (unsigned long long)(2 * l < e->lanes ? 2 * l : e->lanes + (2 * l - off)), 0);
                    v = LLVMBuildShuffleVector(c->b, lo, hi, LLVMConstVector(mask, (unsigned)e->lanes), "");
                    goto loaded;
                }
                LLVMValueRef wide = tth__llcg_contig_load(c, buf, p, (int32_t)span, (unsigned)tth_dtype_size(buf->dtype));
                if (!wide)
                    return NULL;
                LLVMValueRef mask[64];
                for (int32_t l = 0; l < e->lanes && l < 64; l++)
                    mask[l] = LLVMConstInt(i32_type(c), (unsigned long long)(l * st), 0);
                if (e->lanes <= 64) {
                    v = LLVMBuildShuffleVector(c->b, wide, LLVMGetPoison(LLVMTypeOf(wide)),
                                               LLVMConstVector(mask, (unsigned)e->lanes), "");
                    goto loaded;
                }
            }
            if (base) {
                LLVMValueRef p = tth__llcg_elem_ptr(c, buf, base);
                if (!p || !(v = tth__llcg_contig_load(c, buf, p, e->lanes, align)))
                    return NULL;
            } else if (!(v = tth__llcg_gather(c, buf, vidx, e->lanes))) {
                return NULL;
            }
        } else {
            LLVMValueRef idx = tth__llcg_index(c, e->u.load.index);
            LLVMValueRef p = idx ? tth__llcg_elem_ptr(c, buf, idx) : NULL;
            if (!p)
                return NULL;
            v = LLVMBuildLoad2(c->b, mt, p, "");
            LLVMSetAlignment(v, align);
            mark_const_load(c, buf, v);
        }
    loaded:
        if (buf->dtype == TTH_BOOL)
            v = LLVMBuildICmp(c->b, LLVMIntNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
        return tth__llcg_convert(c, v, buf->dtype, e->dtype);
    }
    case TTH_TEXPR_RAMP: {
        LLVMValueRef base = tth__llcg_index(c, e->u.ramp.base);
        if (!base)
            return NULL;
        LLVMTypeRef i64 = LLVMInt64TypeInContext(c->ctx);
        LLVMValueRef *steps = malloc((size_t)e->lanes * sizeof *steps);
        if (!steps) {
            tth__llcg_fail(c, TTH_ENOMEM, "out of memory");
            return NULL;
        }
        for (int32_t l = 0; l < e->lanes; l++)
            steps[l] = LLVMConstInt(i64, (unsigned long long)(e->u.ramp.stride * l), 1);
        LLVMValueRef off = LLVMConstVector(steps, (unsigned)e->lanes);
        free(steps);
        return LLVMBuildAdd(c->b, tth__llcg_splat(c, base, e->lanes), off, "");
    }
    case TTH_TEXPR_BROADCAST: {
        LLVMValueRef v = tth__llcg_expr(c, e->u.bcast.value);
        return v ? tth__llcg_splat(c, tth__llcg_convert(c, v, e->u.bcast.value->dtype, e->dtype), e->lanes) : NULL;
    }
    case TTH_TEXPR_ADDRESS_OF: {
        LLVMValueRef idx = tth__llcg_index(c, e->u.load.index);
        return idx ? tth__llcg_elem_ptr(c, e->u.load.buf, idx) : NULL;
    }
    case TTH_TEXPR_BINARY:
        return lower_binary(c, e);
    case TTH_TEXPR_UNARY: {
        const tth_texpr *a = e->u.un.a;
        if (e->u.un.op == TTH_TUN_NOT) {
            LLVMValueRef t = tth__llcg_truth(c, a);
            return t ? tth__llcg_convert(c, LLVMBuildNot(c->b, t, ""), TTH_BOOL, e->dtype) : NULL;
        }
        LLVMValueRef v = tth__llcg_expr(c, a);
        if (!v)
            return NULL;
        if (a->dtype == TTH_BOOL)
            return fail_null(c, TTH_ETYPE, "negation", a->dtype);
        if (a->dtype == TTH_BF16) /* bits: flip the sign */
            return tth__llcg_convert(c, LLVMBuildXor(c->b, v, const_like(c, LLVMTypeOf(v), 0x8000), ""), a->dtype,
                                     e->dtype);
        v = tth_dtype_is_float(a->dtype) ? LLVMBuildFNeg(c->b, v, "")
            : is_signed_int(a->dtype) && tth_dtype_size(a->dtype) >= 4 ? LLVMBuildNSWNeg(c->b, v, "")
                                         : LLVMBuildNeg(c->b, v, "");
        return tth__llcg_convert(c, v, a->dtype, e->dtype);
    }
    case TTH_TEXPR_SELECT: {
        LLVMValueRef cond = tth__llcg_truth(c, e->u.select.cond);
        LLVMValueRef a = cond ? tth__llcg_expr(c, e->u.select.a) : NULL;
        LLVMValueRef b = a ? tth__llcg_expr(c, e->u.select.b) : NULL;
        if (!b)
            return NULL;
        a = tth__llcg_convert(c, a, e->u.select.a->dtype, e->dtype);
        b = tth__llcg_convert(c, b, e->u.select.b->dtype, e->dtype);
        return LLVMBuildSelect(c->b, cond, a, b, "");
    }
    case TTH_TEXPR_CAST: {
        const tth_texpr *v = e->u.cast.value;
        LLVMValueRef x = tth__llcg_expr(c, v);
        return x ? tth__llcg_convert(c, x, v->dtype, e->dtype) : NULL;
    }
    case TTH_TEXPR_REINTERPRET: {
        LLVMValueRef x = tth__llcg_expr(c, e->u.cast.value);
        return x ? LLVMBuildBitCast(c->b, x, tth__llcg_vtype(c, e->dtype, e->lanes), "") : NULL;
    }
    case TTH_TEXPR_INTRIN:
        return lower_intrin(c, e);
    case TTH_TEXPR_CALL_EXTERN:
        return lower_call_extern(c, e);
    }
    tth__llcg_fail(c, TTH_EUNSUPPORTED, "expression kind %d is not known to the llvm code generator",
                   (int)e->kind);
    return NULL;
}
