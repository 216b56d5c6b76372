/* codegen_func.c: PrimFunc signatures and TIR statements → LLVM IR.
 *
 * Each PrimFunc becomes one LLVM function with two blocks to start: `entry`, which holds every
 * buffer base (parameters, workspace slices, stack allocations) so they dominate all uses, and
 * `body`, where the statements go. Loops are in canonical form (header with a phi, body, latch,
 * exit) so LLVM's loop passes see them directly; the latch's back edge carries !llvm.loop
 * metadata for vectorized and unrolled loops. Parallel loops run serially.
 */
#include "codegen.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/DebugInfo.h>

/* LOCAL buffers without a planned workspace offset get a stack slot up to this size. */
#define TTH__LLCG_STACK_MAX 16384

/* ---------------------------------------------------------------- scopes */

int tth__llcg_scope_push(tth__llcg_scope *s, uint32_t id, LLVMValueRef v)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        tth__llcg_binding *items = realloc(s->items, cap * sizeof *items);
        if (!items)
            return TTH_ENOMEM;
        s->items = items;
        s->cap = cap;
    }
    s->items[s->n].id = id;
    s->items[s->n].value = v;
    s->n++;
    return 0;
}

void tth__llcg_scope_pop(tth__llcg_scope *s)
{
    if (s->n)
        s->n--;
}

LLVMValueRef tth__llcg_scope_lookup(const tth__llcg_scope *s, uint32_t id)
{
    for (size_t i = s->n; i-- > 0;)
        if (s->items[i].id == id)
            return s->items[i].value;
    return NULL;
}

void tth__llcg_scope_free(tth__llcg_scope *s)
{
    free(s->items);
    s->items = NULL;
    s->n = s->cap = 0;
}

/* ---------------------------------------------------------------- types and errors */

LLVMTypeRef tth__llcg_type(tth__llcg *c, tth_dtype t)
{
    switch (t) {
    case TTH_F32: return LLVMFloatTypeInContext(c->ctx);
    case TTH_F16: return LLVMHalfTypeInContext(c->ctx);
    case TTH_BF16: return LLVMInt16TypeInContext(c->ctx); /* its bits: codegen_expr.c */
    case TTH_F64: return LLVMDoubleTypeInContext(c->ctx);
    case TTH_I8: case TTH_U8: return LLVMInt8TypeInContext(c->ctx);
    case TTH_I16: case TTH_U16: return LLVMInt16TypeInContext(c->ctx);
    case TTH_I32: case TTH_U32: return LLVMInt32TypeInContext(c->ctx);
    case TTH_I64: case TTH_U64: return LLVMInt64TypeInContext(c->ctx);
    case TTH_BOOL: return LLVMInt1TypeInContext(c->ctx);
    default: return NULL;
    }
}

LLVMTypeRef tth__llcg_mem_type(tth__llcg *c, tth_dtype t)
{
    return t == TTH_BOOL ? LLVMInt8TypeInContext(c->ctx) : tth__llcg_type(c, t);
}

LLVMTypeRef tth__llcg_vtype(tth__llcg *c, tth_dtype t, int32_t lanes)
{
    LLVMTypeRef s = tth__llcg_type(c, t);
    return s && lanes > 1 ? LLVMVectorType(s, (unsigned)lanes) : s;
}

int32_t tth__llcg_lanes_of(LLVMValueRef v)
{
    LLVMTypeRef t = LLVMTypeOf(v);
    return LLVMGetTypeKind(t) == LLVMVectorTypeKind ? (int32_t)LLVMGetVectorSize(t) : 1;
}

int tth__llcg_fail(tth__llcg *c, int code, const char *fmt, ...)
{
    char loc[TTH_DIAG_LOCATION_MAX];
    const char *where = NULL;
    if (c->fn) {
        snprintf(loc, sizeof loc, "function '%s'", c->fn->name);
        where = loc;
    }
    if (c->diag && c->diag->code != TTH_OK)
        return c->diag->code;   /* keep the first, innermost error */
    va_list ap;
    va_start(ap, fmt);
    int r = tth_diag_vset(c->diag, code, where, fmt, ap);
    va_end(ap);
    return r;
}

static LLVMTypeRef ptr_type(tth__llcg *c) { return LLVMPointerTypeInContext(c->ctx, 0); }

static LLVMValueRef i32_const(tth__llcg *c, int64_t v)
{
    return LLVMConstInt(LLVMInt32TypeInContext(c->ctx), (unsigned long long)v, 1);
}

static LLVMValueRef i64_const(tth__llcg *c, int64_t v)
{
    return LLVMConstInt(LLVMInt64TypeInContext(c->ctx), (unsigned long long)v, 1);
}

static int64_t buffer_nbytes(const tth_tbuffer *buf)
{
    int64_t n = (int64_t)tth_dtype_size(buf->dtype);
    for (int32_t i = 0; i < buf->rank; i++)
        n *= buf->shape[i];
    return n;
}

unsigned tth__llcg_buffer_align(const tth_tbuffer *buf)
{
    unsigned a = buf->align ? buf->align : 16;
    unsigned e = (unsigned)tth_dtype_size(buf->dtype);
    return a < e ? e : a;
}

/* ---------------------------------------------------------------- declarations */

/* i32 (ptr, ..., ptr) with n pointers, or NULL (c->diag says why) */
static LLVMTypeRef ptrs_fn_type(tth__llcg *c, size_t n, const char *name)
{
    LLVMTypeRef *params = calloc(n ? n : 1, sizeof *params);
    if (!params) {
        tth__llcg_fail(c, TTH_ENOMEM, "out of memory declaring '%s'", name);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        params[i] = ptr_type(c);
    LLVMTypeRef fnty = LLVMFunctionType(LLVMInt32TypeInContext(c->ctx), params, (unsigned)n, 0);
    free(params);
    return fnty;
}

LLVMValueRef tth__llcg_declare(tth__llcg *c, const char *name, size_t nargs, int is_entry)
{
    LLVMTypeRef fnty = ptrs_fn_type(c, is_entry ? 3 : nargs + 1, name);
    if (!fnty)
        return NULL;

    LLVMValueRef fn = LLVMGetNamedFunction(c->mod, name);
    if (fn) {
        if (LLVMGlobalGetValueType(fn) != fnty) {
            tth__llcg_fail(c, TTH_EINVAL, "'%s' is called with %zu buffers but takes a different number",
                           name, nargs);
            return NULL;
        }
        return fn;
    }
    fn = LLVMAddFunction(c->mod, name, fnty);
    LLVMSetLinkage(fn, LLVMExternalLinkage);
    const char *nounwind = "nounwind";
    LLVMAddAttributeAtIndex(fn, (unsigned)LLVMAttributeFunctionIndex,
                            LLVMCreateEnumAttribute(c->ctx, LLVMGetEnumAttributeKindForName(nounwind,
                                                                                         strlen(nounwind)), 0));
    return fn;
}

/* ---------------------------------------------------------------- buffers */

/* The address of a bound constant (docs/artifact.md, "Constants bound at run time"): slot k of
 * <prefix>_const_slots, loaded once in the function's entry block (an invariant load: the slots
 * change only while no model runs). */
static int bind_slot(tth__llcg *c, const tth_tbuffer *buf, size_t *slot)
{
    size_t k = 0;
    while (k < c->nbound && c->bound[k] != buf)
        k++;
    if (k == c->nbound) {
        if (c->nbound == c->cap_bound) {
            size_t cap = c->cap_bound ? 2 * c->cap_bound : 16;
            const tth_tbuffer **nb = realloc(c->bound, cap * sizeof *nb);
            if (!nb)
                return tth__llcg_fail(c, TTH_ENOMEM, "out of memory");
            c->bound = nb;
            c->cap_bound = cap;
        }
        c->bound[c->nbound++] = buf;
    }
    *slot = k;
    return 0;
}

/* A derived constant's slot is filled when the model is bound, from its source's slot (the
 * binding source computes it: docs/artifact.md, "Derived constants"), so the source gets a slot
 * too, whatever its size. */
static LLVMValueRef bound_const(tth__llcg *c, const tth_tbuffer *buf)
{
    size_t k, from;
    if (bind_slot(c, buf, &k) || (buf->derive_from && bind_slot(c, buf->derive_from, &from)))
        return NULL;
    if (!c->bind_slots) {
        char name[300];
        snprintf(name, sizeof name, "%s" TTH_BIND_SYM_SLOTS, c->bind_prefix);
        c->bind_slots = LLVMAddGlobal(c->mod, ptr_type(c), name);
        LLVMSetLinkage(c->bind_slots, LLVMExternalLinkage);
    }
    LLVMValueRef idx = i64_const(c, (int64_t)k);
    LLVMValueRef at = LLVMBuildInBoundsGEP2(c->eb, ptr_type(c), c->bind_slots, &idx, 1, "");
    LLVMValueRef p = LLVMBuildLoad2(c->eb, ptr_type(c), at, buf->name ? buf->name : "");
    tth__llcg_invariant_load(c, p);
    if (tth__llcg_scope_push(&c->bufs, buf->id, p)) {
        tth__llcg_fail(c, TTH_ENOMEM, "out of memory");
        return NULL;
    }
    return p;
}

/* A private constant global holding a CONST buffer's bytes, in the target's byte order; or a
 * bound constant's address (bound_const). */
static LLVMValueRef const_global(tth__llcg *c, const tth_tbuffer *buf)
{
    LLVMValueRef g = tth__llcg_scope_lookup(&c->consts, buf->id);
    if (g)
        return g;
    int64_t nbytes = buffer_nbytes(buf);
    if (!buf->data || !buf->data->data || (int64_t)buf->data->nbytes < nbytes) {
        tth__llcg_fail(c, TTH_EINVAL, "constant buffer '%s' has no data or fewer than %lld bytes",
                       buf->name, (long long)nbytes);
        return NULL;
    }
    if (c->bind_prefix && (nbytes >= TTH_BIND_MIN_BYTES || buf->derive_from) && buf->name && *buf->name)
        return bound_const(c, buf);
    const char *bytes = buf->data->data;
    char *swapped = NULL;
    size_t esize = tth_dtype_size(buf->dtype);
    if (c->big_endian && esize > 1) {
        swapped = malloc((size_t)nbytes ? (size_t)nbytes : 1);
        if (!swapped) {
            tth__llcg_fail(c, TTH_ENOMEM, "out of memory copying constant '%s'", buf->name);
            return NULL;
        }
        for (int64_t i = 0; i < nbytes; i += (int64_t)esize)
            for (size_t k = 0; k < esize; k++)
                swapped[i + (int64_t)k] = bytes[i + (int64_t)(esize - 1 - k)];
        bytes = swapped;
    }
    LLVMValueRef init = LLVMConstStringInContext2(c->ctx, bytes, (size_t)nbytes, 1);
    free(swapped);
    char name[300];
    snprintf(name, sizeof name, "tth_const_%s", buf->name ? buf->name : "anon");
    g = LLVMAddGlobal(c->mod, LLVMTypeOf(init), name);
    LLVMSetInitializer(g, init);
    LLVMSetGlobalConstant(g, 1);
    LLVMSetLinkage(g, LLVMPrivateLinkage);
    LLVMSetUnnamedAddress(g, LLVMGlobalUnnamedAddr);
    LLVMSetAlignment(g, tth__llcg_buffer_align(buf));
    if (tth__llcg_scope_push(&c->consts, buf->id, g)) {
        tth__llcg_fail(c, TTH_ENOMEM, "out of memory");
        return NULL;
    }
    return g;
}

/* The slice of the workspace at a planned byte offset, computed in the entry block. */
static LLVMValueRef workspace_slice(tth__llcg *c, const tth_tbuffer *buf)
{
    if (!c->workspace) {
        tth__llcg_fail(c, TTH_EINTERNAL, "buffer '%s' lives in the workspace but the function has none",
                       buf->name);
        return NULL;
    }
    LLVMValueRef off = i64_const(c, buf->offset);
    LLVMValueRef p = LLVMBuildInBoundsGEP2(c->eb, LLVMInt8TypeInContext(c->ctx), c->workspace, &off, 1,
                                           buf->name ? buf->name : "");
    if (tth__llcg_scope_push(&c->bufs, buf->id, p)) {
        tth__llcg_fail(c, TTH_ENOMEM, "out of memory");
        return NULL;
    }
    return p;
}

LLVMValueRef tth__llcg_buffer_base(tth__llcg *c, const tth_tbuffer *buf)
{
    if (!buf) {
        tth__llcg_fail(c, TTH_EINVAL, "missing buffer");
        return NULL;
    }
    LLVMValueRef v = tth__llcg_scope_lookup(&c->bufs, buf->id);
    if (v)
        return v;
    switch (buf->scope) {
    case TTH_SCOPE_CONST:
        return const_global(c, buf);
    case TTH_SCOPE_REGISTER:
        tth__llcg_fail(c, TTH_EINVAL, "register buffer '%s' is used outside its allocation", buf->name);
        return NULL;
    case TTH_SCOPE_WORKSPACE:
    case TTH_SCOPE_LOCAL:
        if (buf->offset >= 0)
            return workspace_slice(c, buf);
        if (buf->scope == TTH_SCOPE_LOCAL)
            tth__llcg_fail(c, TTH_EINVAL, "local buffer '%s' is used outside its allocation", buf->name);
        else
            tth__llcg_fail(c, TTH_EINVAL, "workspace buffer '%s' has no planned offset", buf->name);
        return NULL;
    default:
        tth__llcg_fail(c, TTH_EINVAL, "buffer '%s' is not a parameter of this function", buf->name);
        return NULL;
    }
}

/* ---------------------------------------------------------------- statements */

static int lower_stmt(tth__llcg *c, const tth_tstmt *s);

static LLVMBasicBlockRef new_block(tth__llcg *c, const char *name)
{
    return LLVMAppendBasicBlockInContext(c->ctx, c->llfn, name);
}

/* A self-referencing loop ID carrying one property node, or NULL when the loop kind has none.
 *   vectorized: !{!self, !{!"llvm.loop.vectorize.enable", i1 true}}
 *   unrolled:   !{!self, !{!"llvm.loop.unroll.full"}} (constant extent) or unroll.enable */
static LLVMValueRef loop_metadata(tth__llcg *c, tth_loop_kind kind, int const_extent)
{
    LLVMMetadataRef prop[2];
    size_t np = 0;
    const char *name;
    if (kind == TTH_LOOP_VECTORIZED) {
        name = "llvm.loop.vectorize.enable";
        prop[np++] = LLVMMDStringInContext2(c->ctx, name, strlen(name));
        prop[np++] = LLVMValueAsMetadata(LLVMConstInt(LLVMInt1TypeInContext(c->ctx), 1, 0));
    } else if (kind == TTH_LOOP_UNROLLED) {
        name = const_extent ? "llvm.loop.unroll.full" : "llvm.loop.unroll.enable";
        prop[np++] = LLVMMDStringInContext2(c->ctx, name, strlen(name));
    } else {
        return NULL;
    }
    LLVMMetadataRef tmp = LLVMTemporaryMDNode(c->ctx, NULL, 0);
    LLVMMetadataRef ops[2] = {tmp, LLVMMDNodeInContext2(c->ctx, prop, np)};
    LLVMMetadataRef id = LLVMMDNodeInContext2(c->ctx, ops, 2);
    LLVMMetadataReplaceAllUsesWith(tmp, id);
    return LLVMMetadataAsValue(c->ctx, id);
}

/* if (status != 0) return status; then go on in a new block ("<what>.fail" / "<what>.ok") */
static void return_if_failed(tth__llcg *c, LLVMValueRef status, const char *what)
{
    char fail_name[32], ok_name[32];
    snprintf(fail_name, sizeof fail_name, "%s.fail", what);
    snprintf(ok_name, sizeof ok_name, "%s.ok", what);
    LLVMValueRef bad = LLVMBuildICmp(c->b, LLVMIntNE, status, i32_const(c, 0), "");
    LLVMBasicBlockRef fail_bb = new_block(c, fail_name);
    LLVMBasicBlockRef ok_bb = new_block(c, ok_name);
    LLVMBuildCondBr(c->b, bad, fail_bb, ok_bb);
    LLVMPositionBuilderAtEnd(c->b, fail_bb);
    LLVMBuildRet(c->b, status);
    LLVMPositionBuilderAtEnd(c->b, ok_bb);
}

/* for (var = min; var < end; var++) body, min and end in var's register type */
static int emit_loop(tth__llcg *c, const tth_tvar *var, LLVMValueRef min, LLVMValueRef end, tth_loop_kind kind,
                     int const_extent, const tth_tstmt *body_stmt)
{
    tth_dtype vt = var->dtype;
    int sgn = tth_dtype_is_signed(vt);
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(c->b);
    LLVMBasicBlockRef header = new_block(c, "for.header");
    LLVMBasicBlockRef body = new_block(c, "for.body");
    LLVMBasicBlockRef exit = new_block(c, "for.exit");
    LLVMBuildBr(c->b, header);

    LLVMPositionBuilderAtEnd(c->b, header);
    LLVMValueRef iv = LLVMBuildPhi(c->b, tth__llcg_type(c, vt), var->name ? var->name : "");
    LLVMValueRef cont = LLVMBuildICmp(c->b, sgn ? LLVMIntSLT : LLVMIntULT, iv, end, "");
    LLVMBuildCondBr(c->b, cont, body, exit);

    LLVMPositionBuilderAtEnd(c->b, body);
    if (tth__llcg_scope_push(&c->vars, var->id, iv))
        return tth__llcg_fail(c, TTH_ENOMEM, "out of memory");
    int rc = lower_stmt(c, body_stmt);
    tth__llcg_scope_pop(&c->vars);
    if (rc)
        return rc;
    LLVMValueRef one = LLVMConstInt(tth__llcg_type(c, vt), 1, 0);
    LLVMValueRef next = sgn ? LLVMBuildNSWAdd(c->b, iv, one, "") : LLVMBuildNUWAdd(c->b, iv, one, "");
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(c->b);
    LLVMValueRef back = LLVMBuildBr(c->b, header);
    LLVMValueRef md = loop_metadata(c, kind, const_extent);
    if (md)
        LLVMSetMetadata(back, c->md_loop, md);

    LLVMValueRef in_vals[2] = {min, next};
    LLVMBasicBlockRef in_bbs[2] = {pre, latch};
    LLVMAddIncoming(iv, in_vals, in_bbs, 2);
    LLVMPositionBuilderAtEnd(c->b, exit);
    return 0;
}

static int allocates_planned(void *ctx, const tth_tstmt *s)
{
    (void)ctx;
    return s->kind == TTH_TSTMT_ALLOCATE && s->u.alloc.buf && s->u.alloc.buf->offset >= 0 &&
           s->u.alloc.buf->scope != TTH_SCOPE_REGISTER;
}

/* 1 when s allocates a LOCAL buffer planned in the workspace: tasks of a parallel loop would
 * share it */
static int allocates_shared(const tth_tstmt *s)
{
    tth_tir_visitor v = {.stmt = allocates_planned};
    return tth_tir_walk(s, &v);
}

/* A PARALLEL loop on the thread pool (docs/threads.md): every binding in scope (variables,
 * buffer pointers, the workspace) and the loop's bounds go into an `env` struct on the stack;
 * the task function `<func>_par<k>` loads them and runs iterations
 * [min + task*chunk, min(min + (task+1)*chunk, min + extent)), chunk = ceil(extent / ntasks);
 * the loop becomes `status = launch(task, &env, extent); if (status) return status;`. */
static int lower_parallel_for(tth__llcg *c, const tth_tstmt *s)
{
    LLVMTypeRef i64 = LLVMInt64TypeInContext(c->ctx), i32 = LLVMInt32TypeInContext(c->ctx), pt = ptr_type(c);
    LLVMValueRef min = tth__llcg_index(c, s->u.loop.min);
    LLVMValueRef ext = min ? tth__llcg_index(c, s->u.loop.extent) : NULL;
    if (!ext)
        return c->diag ? c->diag->code : TTH_EINVAL;
    size_t nv = c->vars.n, nb = c->bufs.n, nf = nv + nb + 3;
    LLVMTypeRef *ft = calloc(nf, sizeof *ft);
    if (!ft)
        return tth__llcg_fail(c, TTH_ENOMEM, "out of memory");
    for (size_t i = 0; i < nv; i++)
        ft[i] = LLVMTypeOf(c->vars.items[i].value);
    for (size_t i = 0; i < nb; i++)
        ft[nv + i] = LLVMTypeOf(c->bufs.items[i].value);
    ft[nv + nb] = pt;
    ft[nv + nb + 1] = i64;
    ft[nv + nb + 2] = i64;
    LLVMTypeRef st = LLVMStructTypeInContext(c->ctx, ft, (unsigned)nf, 0);
    LLVMValueRef env = LLVMBuildAlloca(c->eb, st, "env");
    for (size_t i = 0; i < nf; i++) {
        LLVMValueRef v = i < nv ? c->vars.items[i].value
                         : i < nv + nb ? c->bufs.items[i - nv].value
                         : i == nv + nb ? (c->workspace ? c->workspace : LLVMConstNull(pt))
                         : i == nv + nb + 1 ? min : ext;
        LLVMBuildStore(c->b, v, LLVMBuildStructGEP2(c->b, st, env, (unsigned)i, ""));
    }

    /* The task function loads the environment, computes its range of iterations and calls the
     * body function, which runs them. The body takes the buffers as parameters, noalias where
     * they are the operator's own (noalias in the operator too, bind_params): loaded from the
     * environment inside one function, LLVM could not tell them apart, and a VECTORIZED loop
     * that reads one buffer through computed indices (resize's gathers) and writes another
     * stayed scalar ("loop not vectorized"). */
    char name[512], bname[540];
    snprintf(name, sizeof name, "%s_par%d", c->fn && c->fn->name ? c->fn->name : "f", c->nparallel++);
    snprintf(bname, sizeof bname, "%s_body", name);
    LLVMTypeRef targs[3] = {i32, i32, pt};
    LLVMTypeRef tty = LLVMFunctionType(i32, targs, 3, 0);
    LLVMValueRef tf = LLVMAddFunction(c->mod, name, tty);
    LLVMSetLinkage(tf, LLVMInternalLinkage);
    size_t nbp = nv + nb + 3; /* lo, hi, the variables, the buffers, the workspace */
    LLVMTypeRef *bt = calloc(nbp, sizeof *bt);
    LLVMValueRef *bargs = calloc(nbp, sizeof *bargs);
    if (!bt || !bargs) {
        free(bt);
        free(bargs);
        free(ft);
        return tth__llcg_fail(c, TTH_ENOMEM, "out of memory");
    }
    bt[0] = bt[1] = i64;
    for (size_t i = 0; i < nv + nb; i++)
        bt[2 + i] = ft[i];
    bt[nv + nb + 2] = pt;
    LLVMTypeRef bty = LLVMFunctionType(LLVMVoidTypeInContext(c->ctx), bt, (unsigned)nbp, 0);
    LLVMValueRef bf = LLVMAddFunction(c->mod, bname, bty);
    LLVMSetLinkage(bf, LLVMInternalLinkage);
    unsigned noalias = LLVMGetEnumAttributeKindForName("noalias", 7);
    for (size_t i = 0; i < nb; i++)
        for (size_t k = 0; c->fn && k < c->fn->nparams; k++)
            if (c->fn->params[k]->id == c->bufs.items[i].id) {
                LLVMAddAttributeAtIndex(bf, (unsigned)(2 + nv + i + 1), LLVMCreateEnumAttribute(c->ctx, noalias, 0));
                break;
            }

    /* the task: env -> its iterations [lo, hi) -> body */
    LLVMBuilderRef tb = LLVMCreateBuilderInContext(c->ctx);
    if (!tb) {
        free(bt);
        free(bargs);
        free(ft);
        return tth__llcg_fail(c, TTH_ENOMEM, "out of memory");
    }
    LLVMPositionBuilderAtEnd(tb, LLVMAppendBasicBlockInContext(c->ctx, tf, "entry"));
    {
        LLVMValueRef envp = LLVMGetParam(tf, 2), f[3];
        for (size_t i = 0; i < nf; i++) {
            LLVMValueRef v = LLVMBuildLoad2(tb, ft[i], LLVMBuildStructGEP2(tb, st, envp, (unsigned)i, ""), "");
            if (i < nv + nb)
                bargs[2 + i] = v;
            else
                f[i - nv - nb] = v;
        }
        bargs[nv + nb + 2] = f[0];
        LLVMValueRef task = LLVMBuildSExt(tb, LLVMGetParam(tf, 0), i64, "");
        LLVMValueRef ntasks = LLVMBuildSExt(tb, LLVMGetParam(tf, 1), i64, "");
        LLVMValueRef chunk = LLVMBuildSDiv(tb, LLVMBuildAdd(tb, f[2], LLVMBuildSub(tb, ntasks, LLVMConstInt(i64, 1, 0), ""),
                                                            ""), ntasks, "chunk");
        LLVMValueRef end = LLVMBuildAdd(tb, f[1], f[2], "");
        LLVMValueRef lo = LLVMBuildAdd(tb, f[1], LLVMBuildMul(tb, task, chunk, ""), "lo");
        LLVMValueRef hi = LLVMBuildAdd(tb, lo, chunk, "");
        bargs[0] = lo;
        bargs[1] = LLVMBuildSelect(tb, LLVMBuildICmp(tb, LLVMIntSLT, hi, end, ""), hi, end, "hi");
        LLVMBuildCall2(tb, bty, bf, bargs, (unsigned)nbp, "");
        LLVMBuildRet(tb, i32_const(c, 0));
    }
    LLVMDisposeBuilder(tb);
    free(bargs);

    /* the body: the loop over [lo, hi) */
    LLVMValueRef save_llfn = c->llfn, save_ws = c->workspace;
    LLVMBasicBlockRef save_entry = c->entry_bb, save_bb = LLVMGetInsertBlock(c->b);
    LLVMBuilderRef save_eb = c->eb;
    tth__llcg_scope save_vars = c->vars, save_bufs = c->bufs;
    memset(&c->vars, 0, sizeof c->vars);
    memset(&c->bufs, 0, sizeof c->bufs);
    c->llfn = bf;
    c->entry_bb = new_block(c, "entry");
    LLVMBasicBlockRef body = new_block(c, "body");
    c->eb = LLVMCreateBuilderInContext(c->ctx);
    int rc = c->eb ? 0 : tth__llcg_fail(c, TTH_ENOMEM, "out of memory");
    if (!rc) {
        LLVMPositionBuilderAtEnd(c->eb, c->entry_bb);
        LLVMPositionBuilderAtEnd(c->b, body);
        for (size_t i = 0; i < nv + nb && !rc; i++) {
            LLVMValueRef v = LLVMGetParam(bf, (unsigned)(2 + i));
            rc = i < nv ? tth__llcg_scope_push(&c->vars, save_vars.items[i].id, v)
                        : tth__llcg_scope_push(&c->bufs, save_bufs.items[i - nv].id, v);
        }
        if (rc)
            rc = tth__llcg_fail(c, TTH_ENOMEM, "out of memory");
        if (!rc) {
            c->workspace = save_ws ? LLVMGetParam(bf, (unsigned)(nv + nb + 2)) : NULL;
            const tth_tvar *var = s->u.loop.var;
            LLVMValueRef lo = tth__llcg_convert(c, LLVMGetParam(bf, 0), TTH_I64, var->dtype);
            LLVMValueRef hi = tth__llcg_convert(c, LLVMGetParam(bf, 1), TTH_I64, var->dtype);
            c->in_parallel = 1;
            rc = emit_loop(c, var, lo, hi, TTH_LOOP_SERIAL, 0, s->u.loop.body);
            c->in_parallel = 0;
        }
        if (!rc) {
            LLVMBuildRetVoid(c->b);
            LLVMBuildBr(c->eb, body);
        }
    }
    if (c->eb)
        LLVMDisposeBuilder(c->eb);
    tth__llcg_scope_free(&c->vars);
    tth__llcg_scope_free(&c->bufs);
    c->vars = save_vars;
    c->bufs = save_bufs;
    c->llfn = save_llfn;
    c->workspace = save_ws;
    c->entry_bb = save_entry;
    c->eb = save_eb;
    LLVMPositionBuilderAtEnd(c->b, save_bb);
    free(bt);
    free(ft);
    if (rc)
        return rc;

    /* status = launch(task, &env, min(extent, INT32_MAX)); if (status) return status; */
    LLVMTypeRef largs[3] = {pt, pt, i32};
    LLVMTypeRef lty = LLVMFunctionType(i32, largs, 3, 0);
    LLVMValueRef launch = LLVMGetNamedFunction(c->mod, c->par_launch);
    if (!launch)
        launch = LLVMAddFunction(c->mod, c->par_launch, lty);
    LLVMValueRef cap = LLVMConstInt(i64, INT32_MAX, 0);
    LLVMValueRef n = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, ext, cap, ""), ext, cap, "");
    LLVMValueRef args[3] = {tf, env, LLVMBuildTrunc(c->b, n, i32, "")};
    return_if_failed(c, LLVMBuildCall2(c->b, lty, launch, args, 3, ""), "par");
    return 0;
}

/* An unrolled loop of constant extent up to UNROLL_MAX is written out here, body after body with
 * var = min + i: the pass pipeline has no loop unroller (codegen.c, pass_pipeline). A longer one,
 * or one of extent known only at run time, stays a loop: its metadata still carries the hint, for
 * a pipeline that unrolls (opt-level 0's does not either). */
enum { UNROLL_MAX = 64 };

static int emit_unrolled(tth__llcg *c, const tth_tvar *var, LLVMValueRef min, int n, const tth_tstmt *body)
{
    LLVMTypeRef t = tth__llcg_type(c, var->dtype);
    for (int i = 0; i < n; i++) {
        LLVMValueRef v = i ? LLVMBuildAdd(c->b, min, LLVMConstInt(t, (unsigned long long)i, 0), "") : min;
        if (tth__llcg_scope_push(&c->vars, var->id, v))
            return tth__llcg_fail(c, TTH_ENOMEM, "out of memory");
        int rc = lower_stmt(c, body);
        tth__llcg_scope_pop(&c->vars);
        if (rc)
            return rc;
    }
    return 0;
}

/* for (var = min; var < min + extent; var++) body */
static int lower_for(tth__llcg *c, const tth_tstmt *s)
{
    const tth_tvar *var = s->u.loop.var;
    if (!var)
        return tth__llcg_fail(c, TTH_EINVAL, "loop without a variable");
    tth_dtype vt = var->dtype;
    if (tth_dtype_is_float(vt) || vt == TTH_BOOL || !tth__llcg_type(c, vt))
        return tth__llcg_fail(c, TTH_ETYPE, "loop variable '%s' has dtype %s", var->name, tth_dtype_name(vt));
    if (s->u.loop.loop == TTH_LOOP_PARALLEL && c->par_launch && !c->in_parallel && !allocates_shared(s->u.loop.body))
        return lower_parallel_for(c, s);
    LLVMValueRef min = tth__llcg_expr(c, s->u.loop.min);
    LLVMValueRef ext = min ? tth__llcg_expr(c, s->u.loop.extent) : NULL;
    if (!ext)
        return c->diag ? c->diag->code : TTH_EINVAL;
    min = tth__llcg_convert(c, min, s->u.loop.min->dtype, vt);
    ext = tth__llcg_convert(c, ext, s->u.loop.extent->dtype, vt);
    int sgn = tth_dtype_is_signed(vt);
    if (s->u.loop.loop == TTH_LOOP_UNROLLED && LLVMIsAConstantInt(ext)) {
        long long n = LLVMConstIntGetSExtValue(ext);
        if (n >= 0 && n <= UNROLL_MAX)
            return emit_unrolled(c, var, min, (int)n, s->u.loop.body);
    }
    LLVMValueRef end = sgn ? LLVMBuildNSWAdd(c->b, min, ext, "") : LLVMBuildAdd(c->b, min, ext, "");
    return emit_loop(c, var, min, end, s->u.loop.loop, LLVMIsConstant(ext), s->u.loop.body);
}

static int lower_store(tth__llcg *c, const tth_tstmt *s)
{
    const tth_tbuffer *buf = s->u.store.buf;
    if (!buf)
        return tth__llcg_fail(c, TTH_EINVAL, "store without a buffer");
    if (buf->scope == TTH_SCOPE_CONST)
        return tth__llcg_fail(c, TTH_EINVAL, "store to constant buffer '%s'", buf->name);
    int32_t lanes = s->u.store.index->lanes;
    unsigned esize = (unsigned)tth_dtype_size(buf->dtype);
    unsigned align = s->u.store.align ? s->u.store.align : esize;
    LLVMValueRef base = NULL, vidx = NULL, idx = NULL;
    int narrow = lanes > 1 && tth__llcg_strided_narrow(buf, s->u.store.index, lanes);
    if (lanes > 1 && !narrow) {
        vidx = tth__llcg_vindex(c, s->u.store.index, &base);
        if (!vidx && !base)
            return c->diag ? c->diag->code : TTH_EINVAL;
    } else if (lanes == 1 && !(idx = tth__llcg_index(c, s->u.store.index))) {
        return c->diag ? c->diag->code : TTH_EINVAL;
    }
    LLVMValueRef v = tth__llcg_expr(c, s->u.store.value);
    if (!v)
        return c->diag ? c->diag->code : TTH_EINVAL;
    v = tth__llcg_convert(c, v, s->u.store.value->dtype, buf->dtype);
    if (buf->dtype == TTH_BOOL)
        v = LLVMBuildZExt(c->b, v, lanes > 1 ? LLVMVectorType(LLVMInt8TypeInContext(c->ctx), (unsigned)lanes)
                                             : LLVMInt8TypeInContext(c->ctx), "");
    if (narrow) /* bytes or halves a stride apart: lane by lane */
        return tth__llcg_strided_access(c, buf, s->u.store.index, lanes, v) ? 0 : (c->diag ? c->diag->code : TTH_EINVAL);
    if (lanes > 1 && !base)
        return tth__llcg_scatter(c, buf, vidx, v); /* lanes stored in order, as LLVM defines it */
    LLVMValueRef p = tth__llcg_elem_ptr(c, buf, lanes > 1 ? base : idx);
    if (!p)
        return c->diag ? c->diag->code : TTH_EINVAL;
    if (lanes > 1)
        return tth__llcg_contig_store(c, buf, p, v, align);
    LLVMValueRef st = LLVMBuildStore(c->b, v, p);
    LLVMSetAlignment(st, align);
    return 0;
}

/* A LOCAL buffer: its planned workspace slice, or a stack slot in the entry block. */
static int lower_allocate(tth__llcg *c, const tth_tstmt *s)
{
    const tth_tbuffer *buf = s->u.alloc.buf;
    if (!buf)
        return tth__llcg_fail(c, TTH_EINVAL, "allocation without a buffer");
    if (!tth__llcg_scope_lookup(&c->bufs, buf->id)) {
        if (buf->offset >= 0 && buf->scope != TTH_SCOPE_REGISTER) {
            if (!workspace_slice(c, buf))
                return c->diag ? c->diag->code : TTH_EINVAL;
        } else {
            int64_t nbytes = buffer_nbytes(buf);
            if (nbytes > TTH__LLCG_STACK_MAX) {
                tth__llcg_fail(c, TTH_EUNSUPPORTED,
                               "local buffer '%s' (%lld bytes) has no workspace offset and is too large "
                               "for the stack (at most %d bytes)",
                               buf->name, (long long)nbytes, TTH__LLCG_STACK_MAX);
                tth_diag_hint(c->diag, "run memory planning so every LOCAL buffer gets a workspace offset");
                return TTH_EUNSUPPORTED;
            }
            LLVMTypeRef at = LLVMArrayType2(LLVMInt8TypeInContext(c->ctx), (uint64_t)(nbytes ? nbytes : 1));
            LLVMValueRef a = LLVMBuildAlloca(c->eb, at, buf->name ? buf->name : "");
            LLVMSetAlignment(a, tth__llcg_buffer_align(buf));
            if (tth__llcg_scope_push(&c->bufs, buf->id, a))
                return tth__llcg_fail(c, TTH_ENOMEM, "out of memory");
        }
    }
    return lower_stmt(c, s->u.alloc.body);
}

static int lower_if(tth__llcg *c, const tth_tstmt *s)
{
    LLVMValueRef cond = tth__llcg_truth(c, s->u.cond.cond);
    if (!cond)
        return c->diag ? c->diag->code : TTH_EINVAL;
    LLVMBasicBlockRef then_bb = new_block(c, "if.then");
    LLVMBasicBlockRef else_bb = s->u.cond.else_s ? new_block(c, "if.else") : NULL;
    LLVMBasicBlockRef end_bb = new_block(c, "if.end");
    LLVMBuildCondBr(c->b, cond, then_bb, else_bb ? else_bb : end_bb);
    LLVMPositionBuilderAtEnd(c->b, then_bb);
    int rc = lower_stmt(c, s->u.cond.then_s);
    if (rc)
        return rc;
    LLVMBuildBr(c->b, end_bb);
    if (else_bb) {
        LLVMPositionBuilderAtEnd(c->b, else_bb);
        if ((rc = lower_stmt(c, s->u.cond.else_s)))
            return rc;
        LLVMBuildBr(c->b, end_bb);
    }
    LLVMPositionBuilderAtEnd(c->b, end_bb);
    return 0;
}

static int lower_let(tth__llcg *c, const tth_tstmt *s)
{
    const tth_tvar *var = s->u.let.var;
    if (!var || !tth__llcg_type(c, var->dtype))
        return tth__llcg_fail(c, TTH_EINVAL, "let without a typed variable");
    LLVMValueRef v = tth__llcg_expr(c, s->u.let.value);
    if (!v)
        return c->diag ? c->diag->code : TTH_EINVAL;
    v = tth__llcg_convert(c, v, s->u.let.value->dtype, var->dtype);
    if (tth__llcg_scope_push(&c->vars, var->id, v))
        return tth__llcg_fail(c, TTH_ENOMEM, "out of memory");
    int rc = lower_stmt(c, s->u.let.body);
    tth__llcg_scope_pop(&c->vars);
    return rc;
}

/* status = func(buffers..., workspace); if (status != 0) return status; */
static int lower_call_func(tth__llcg *c, const tth_tstmt *s)
{
    const char *name = s->u.call.func;
    size_t n = s->u.call.nargs;
    if (!name)
        return tth__llcg_fail(c, TTH_EINVAL, "call without a function name");
    if (c->tir->entry && strcmp(name, c->tir->entry) == 0)
        return tth__llcg_fail(c, TTH_EINVAL, "call to the AOT entry '%s'", name);
    LLVMValueRef fn = tth__llcg_declare(c, name, n, 0);
    if (!fn)
        return c->diag ? c->diag->code : TTH_EINVAL;
    LLVMValueRef *args = calloc(n + 1, sizeof *args);
    if (!args)
        return tth__llcg_fail(c, TTH_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        args[i] = tth__llcg_buffer_base(c, s->u.call.args[i]);
        if (!args[i]) {
            free(args);
            return c->diag ? c->diag->code : TTH_EINVAL;
        }
    }
    args[n] = c->workspace ? c->workspace : LLVMConstNull(ptr_type(c));
    LLVMValueRef status = LLVMBuildCall2(c->b, LLVMGlobalGetValueType(fn), fn, args, (unsigned)(n + 1), "");
    free(args);
    return_if_failed(c, status, "call");
    return 0;
}

static int lower_stmt(tth__llcg *c, const tth_tstmt *s)
{
    if (!s)
        return tth__llcg_fail(c, TTH_EINVAL, "missing statement");
    switch (s->kind) {
    case TTH_TSTMT_SEQ:
        for (size_t i = 0; i < s->u.seq.n; i++) {
            int rc = lower_stmt(c, s->u.seq.stmts[i]);
            if (rc)
                return rc;
        }
        return 0;
    case TTH_TSTMT_FOR:
        return lower_for(c, s);
    case TTH_TSTMT_STORE:
        return lower_store(c, s);
    case TTH_TSTMT_ALLOCATE:
        return lower_allocate(c, s);
    case TTH_TSTMT_IF:
        return lower_if(c, s);
    case TTH_TSTMT_LET:
        return lower_let(c, s);
    case TTH_TSTMT_EVALUATE:
        return tth__llcg_expr(c, s->u.eval.value) ? 0 : (c->diag ? c->diag->code : TTH_EINVAL);
    case TTH_TSTMT_CALL_FUNC:
        return lower_call_func(c, s);
    }
    return tth__llcg_fail(c, TTH_EUNSUPPORTED, "statement kind %d is not known to the llvm code generator",
                          (int)s->kind);
}

/* ---------------------------------------------------------------- functions */

/* Bind the parameters: operator functions take one pointer per buffer then the workspace; the
 * entry loads each INPUT / OUTPUT pointer from the inputs / outputs struct. */
static int bind_params(tth__llcg *c, const tth_prim_func *f, int is_entry)
{
    LLVMTypeRef pt = ptr_type(c);
    if (!is_entry) {
        /* Inside an operator, buffers never overlap (the c-host plugin says `restrict`). */
        unsigned noalias = LLVMGetEnumAttributeKindForName("noalias", 7);
        for (size_t i = 0; i <= f->nparams; i++)
            LLVMAddAttributeAtIndex(c->llfn, (unsigned)(i + 1), LLVMCreateEnumAttribute(c->ctx, noalias, 0));
        for (size_t i = 0; i < f->nparams; i++) {
            LLVMValueRef p = LLVMGetParam(c->llfn, (unsigned)i);
            const char *nm = f->params[i]->name ? f->params[i]->name : "";
            LLVMSetValueName2(p, nm, strlen(nm));
            if (tth__llcg_scope_push(&c->bufs, f->params[i]->id, p))
                return tth__llcg_fail(c, TTH_ENOMEM, "out of memory");
        }
        c->workspace = LLVMGetParam(c->llfn, (unsigned)f->nparams);
        LLVMSetValueName2(c->workspace, "workspace", strlen("workspace"));
        return 0;
    }
    LLVMValueRef in = LLVMGetParam(c->llfn, 0), out = LLVMGetParam(c->llfn, 1);
    LLVMSetValueName2(in, "inputs", 6);
    LLVMSetValueName2(out, "outputs", 7);
    c->workspace = LLVMGetParam(c->llfn, 2);
    LLVMSetValueName2(c->workspace, "workspace", strlen("workspace"));
    int64_t nin = 0, nout = 0;
    for (size_t i = 0; i < f->nparams; i++) {
        const tth_tbuffer *buf = f->params[i];
        LLVMValueRef slot;
        if (buf->scope == TTH_SCOPE_INPUT) {
            LLVMValueRef k = i64_const(c, nin++);
            slot = LLVMBuildInBoundsGEP2(c->eb, pt, in, &k, 1, "");
        } else if (buf->scope == TTH_SCOPE_OUTPUT) {
            LLVMValueRef k = i64_const(c, nout++);
            slot = LLVMBuildInBoundsGEP2(c->eb, pt, out, &k, 1, "");
        } else {
            return tth__llcg_fail(c, TTH_EINVAL, "entry parameter '%s' is neither an input nor an output",
                                  buf->name);
        }
        LLVMValueRef p = LLVMBuildLoad2(c->eb, pt, slot, buf->name ? buf->name : "");
        if (tth__llcg_scope_push(&c->bufs, buf->id, p))
            return tth__llcg_fail(c, TTH_ENOMEM, "out of memory");
    }
    return 0;
}

/* The entry's first statement when constants are bound:
 *     if (!<prefix>_bound) { status = <prefix>_ensure_bound(); if (status) return status; }
 * (runtime/bind/tth_bind.c: it binds constants linked into the library, else returns
 * TTH_BIND_E_UNBOUND). The flag is defined here; codegen.c sets its initial value and defines
 * ensure_bound itself when nothing turned out to be bound. */
static int check_bound(tth__llcg *c)
{
    if (!c->bind_flag) {
        char name[300];
        snprintf(name, sizeof name, "%s" TTH_BIND_SYM_FLAG, c->bind_prefix);
        c->bind_flag = LLVMAddGlobal(c->mod, LLVMInt32TypeInContext(c->ctx), name);
        LLVMSetLinkage(c->bind_flag, LLVMExternalLinkage);
        LLVMSetInitializer(c->bind_flag, i32_const(c, 0));
    }
    LLVMTypeRef i32 = LLVMInt32TypeInContext(c->ctx), fty = LLVMFunctionType(i32, NULL, 0, 0);
    if (!c->bind_ensure) {
        char name[300];
        snprintf(name, sizeof name, "%s" TTH_BIND_SYM_ENSURE, c->bind_prefix);
        c->bind_ensure = LLVMAddFunction(c->mod, name, fty);
        LLVMSetLinkage(c->bind_ensure, LLVMExternalLinkage);
    }
    LLVMValueRef v = LLVMBuildLoad2(c->b, i32, c->bind_flag, "bound");
    LLVMSetOrdering(v, LLVMAtomicOrderingAcquire); /* pairs with the binding's release store */
    LLVMSetAlignment(v, 4);
    LLVMBasicBlockRef unbound = new_block(c, "unbound"), failed = new_block(c, "unbound_failed"),
                      go = new_block(c, "bound");
    LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntEQ, v, i32_const(c, 0), ""), unbound, go);
    LLVMPositionBuilderAtEnd(c->b, unbound);
    LLVMValueRef st = LLVMBuildCall2(c->b, fty, c->bind_ensure, NULL, 0, "bind");
    LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntNE, st, i32_const(c, 0), ""), failed, go);
    LLVMPositionBuilderAtEnd(c->b, failed);
    LLVMBuildRet(c->b, st);
    LLVMPositionBuilderAtEnd(c->b, go);
    return 0;
}

/* the function-level state for lowering a PrimFunc into llfn, and its end: the return, the
 * entry block joined to the body, the scopes cleared */
static int func_begin(tth__llcg *c, const tth_prim_func *f, LLVMValueRef llfn, LLVMBasicBlockRef *body)
{
    c->fn = f;
    c->llfn = llfn;
    c->workspace = NULL;
    if (LLVMCountBasicBlocks(c->llfn) != 0)
        return tth__llcg_fail(c, TTH_EINVAL, "function '%s' is defined twice", LLVMGetValueName(llfn));
    c->entry_bb = new_block(c, "entry");
    *body = new_block(c, "body");
    c->eb = LLVMCreateBuilderInContext(c->ctx);
    if (!c->eb)
        return tth__llcg_fail(c, TTH_ENOMEM, "out of memory");
    LLVMPositionBuilderAtEnd(c->eb, c->entry_bb);
    LLVMPositionBuilderAtEnd(c->b, *body);
    return 0;
}

static int func_end(tth__llcg *c, int rc, LLVMValueRef ret, LLVMBasicBlockRef body)
{
    if (!rc) {
        LLVMBuildRet(c->b, ret ? ret : i32_const(c, 0));
        LLVMBuildBr(c->eb, body);
    }
    LLVMDisposeBuilder(c->eb);
    c->eb = NULL;
    c->bufs.n = 0;
    c->vars.n = 0;
    if (!rc)
        c->fn = NULL;
    return rc;
}

int tth__llcg_func(tth__llcg *c, const tth_prim_func *f, int is_entry)
{
    LLVMValueRef llfn = LLVMGetNamedFunction(c->mod, f->name);
    if (!llfn)
        return tth__llcg_fail(c, TTH_EINTERNAL, "function was not declared");
    LLVMBasicBlockRef body = NULL;
    int rc = func_begin(c, f, llfn, &body);
    if (!rc)
        rc = bind_params(c, f, is_entry);
    if (!rc && is_entry && c->bind_prefix)
        rc = check_bound(c);
    if (!rc)
        rc = lower_stmt(c, f->body);
    return func_end(c, rc, NULL, body);
}

/* ---------------------------------------------------------------- shared code */

LLVMValueRef tth__llcg_declare_shared(tth__llcg *c, const char *name, size_t nparams, size_t ndata)
{
    LLVMTypeRef fnty = ptrs_fn_type(c, nparams + 1 + ndata, name);
    if (!fnty)
        return NULL;
    if (LLVMGetNamedFunction(c->mod, name)) {
        tth__llcg_fail(c, TTH_EINTERNAL, "the shared function '%s' is already defined", name);
        return NULL;
    }
    LLVMValueRef fn = LLVMAddFunction(c->mod, name, fnty);
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    static const char *const attrs[] = {"nounwind", "noinline"};
    for (size_t i = 0; i < 2; i++)
        LLVMAddAttributeAtIndex(fn, (unsigned)LLVMAttributeFunctionIndex,
                                LLVMCreateEnumAttribute(c->ctx, LLVMGetEnumAttributeKindForName(attrs[i], strlen(attrs[i])), 0));
    return fn;
}

int tth__llcg_func_shared(tth__llcg *c, const tth_prim_func *f, LLVMValueRef shared, const tth_tbuffer *const *data,
                          size_t ndata)
{
    LLVMBasicBlockRef body = NULL;
    int rc = func_begin(c, f, shared, &body);
    if (!rc)
        rc = bind_params(c, f, 0);
    /* the data buffers arrive as parameters: no slot loads, no workspace slices of their own */
    unsigned noalias = LLVMGetEnumAttributeKindForName("noalias", 7);
    for (size_t i = 0; !rc && i < ndata; i++) {
        unsigned k = (unsigned)(f->nparams + 1 + i);
        LLVMValueRef p = LLVMGetParam(shared, k);
        const char *nm = data[i]->name ? data[i]->name : "";
        LLVMSetValueName2(p, nm, strlen(nm));
        LLVMAddAttributeAtIndex(shared, k + 1, LLVMCreateEnumAttribute(c->ctx, noalias, 0));
        if (tth__llcg_scope_push(&c->bufs, data[i]->id, p))
            rc = tth__llcg_fail(c, TTH_ENOMEM, "out of memory");
    }
    if (!rc)
        rc = lower_stmt(c, f->body);
    return func_end(c, rc, NULL, body);
}

int tth__llcg_func_wrapper(tth__llcg *c, const tth_prim_func *g, LLVMValueRef shared, const tth_tbuffer *const *gdata,
                           size_t ndata)
{
    LLVMValueRef llfn = LLVMGetNamedFunction(c->mod, g->name);
    if (!llfn)
        return tth__llcg_fail(c, TTH_EINTERNAL, "function was not declared");
    LLVMBasicBlockRef body = NULL;
    int rc = func_begin(c, g, llfn, &body);
    if (!rc)
        rc = bind_params(c, g, 0);
    size_t n = g->nparams + 1 + ndata;
    LLVMValueRef *args = rc ? NULL : calloc(n, sizeof *args);
    if (!rc && !args)
        rc = tth__llcg_fail(c, TTH_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i <= g->nparams; i++)
        args[i] = LLVMGetParam(llfn, (unsigned)i);
    /* a constant's address (a slot load or a private global) or a LOCAL buffer's workspace slice */
    for (size_t i = 0; !rc && i < ndata; i++)
        if (!(args[g->nparams + 1 + i] = tth__llcg_buffer_base(c, gdata[i])))
            rc = c->diag ? c->diag->code : TTH_EINVAL;
    LLVMValueRef ret = NULL;
    if (!rc) {
        ret = LLVMBuildCall2(c->b, LLVMGlobalGetValueType(shared), shared, args, (unsigned)n, "");
        LLVMSetTailCall(ret, 1);
    }
    free(args);
    return func_end(c, rc, ret, body);
}
