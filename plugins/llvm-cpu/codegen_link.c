/* codegen_link.c: the objects a host library for this machine is linked from in place of the
 * binding and thread-pool sources (docs/artifact.md, "The host library").
 *
 * The artifact's <model>_bind.c and <model>_parallel.c are runtime/bind/tth_bind.c and
 * runtime/parallel/tth_parallel.c with the model's tables and names in front: what a CMake build
 * of the artifact compiles. tthd's build of the host library need not compile them again for
 * every model: tth's build compiled both files once without a model (their cores, embedded here
 * as bytes, meson/embed_bytes.py), and what is the model's own, the tables and the entry points
 * named for it, is emitted here as a small LLVM module of its own (<model>_link.o). All three go
 * to the host as TTH_FILE_LINK_OBJECT with the module meta "link_replaces" naming the two sources
 * (plugin-guide.md, "Objects in place of sources"); the artifact's files stay as they were.
 *
 * The tables match runtime/bind/tth_bind.c's tth_bind_model field for field, in the target's
 * data layout; the entry points call the core's hidden tth__bind_* and tth__parallel_launch.
 * Only for a target the cores run on: a Linux triple of the architecture tth was built for.
 */
#include "codegen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include "tth/artifact.h"
#include "tth/tir.h"
#include "tth_bind_core_o.h"
#include "tth_parallel_core_o.h"

#if defined(__x86_64__)
#define CORE_ARCH "x86_64"
#elif defined(__aarch64__)
#define CORE_ARCH "aarch64"
#else
#define CORE_ARCH NULL
#endif

int tth__llcg_core_links(const char *triple)
{
    size_t n = CORE_ARCH ? strlen(CORE_ARCH) : 0;
#ifdef __linux__
    return n && strncmp(triple, CORE_ARCH, n) == 0 && triple[n] == '-' && strstr(triple, "-linux") != NULL;
#else
    (void)n;
    return 0;
#endif
}

typedef struct link_module {
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    LLVMTypeRef size, ptr, i32;
} link_module;

static LLVMValueRef size_const(link_module *l, size_t v)
{
    return LLVMConstInt(l->size, v, 0);
}

/* A private constant array of size_t, its address. */
static LLVMValueRef size_table(link_module *l, const char *name, const size_t *v, size_t n)
{
    LLVMValueRef *e = malloc((n ? n : 1) * sizeof *e);
    if (!e)
        return NULL;
    for (size_t i = 0; i < n; i++)
        e[i] = size_const(l, v[i]);
    LLVMValueRef init = LLVMConstArray2(l->size, e, n);
    free(e);
    LLVMValueRef g = LLVMAddGlobal(l->mod, LLVMTypeOf(init), name);
    LLVMSetInitializer(g, init);
    LLVMSetGlobalConstant(g, 1);
    LLVMSetLinkage(g, LLVMPrivateLinkage);
    return g;
}

/* A function `name` of type fty whose body calls core (a hidden declaration) with the leading
 * arguments lead and then its own, and returns what it returns. */
static void forward(link_module *l, const char *name, LLVMTypeRef fty, const char *core, LLVMValueRef *lead,
                    unsigned nlead)
{
    unsigned np = LLVMCountParamTypes(fty);
    LLVMTypeRef params[8], cparams[8];
    LLVMGetParamTypes(fty, params);
    for (unsigned i = 0; i < nlead; i++)
        cparams[i] = LLVMTypeOf(lead[i]);
    for (unsigned i = 0; i < np; i++)
        cparams[nlead + i] = params[i];
    LLVMTypeRef cty = LLVMFunctionType(LLVMGetReturnType(fty), cparams, nlead + np, 0);
    LLVMValueRef cf = LLVMAddFunction(l->mod, core, cty);
    LLVMSetVisibility(cf, LLVMHiddenVisibility);
    LLVMValueRef f = LLVMAddFunction(l->mod, name, fty);
    LLVMPositionBuilderAtEnd(l->b, LLVMAppendBasicBlockInContext(l->ctx, f, "entry"));
    LLVMValueRef args[8];
    for (unsigned i = 0; i < nlead; i++)
        args[i] = lead[i];
    for (unsigned i = 0; i < np; i++)
        args[nlead + i] = LLVMGetParam(f, i);
    LLVMValueRef r = LLVMBuildCall2(l->b, cty, cf, args, nlead + np, "");
    LLVMSetTailCall(r, 1);
    LLVMBuildRet(l->b, r);
}

/* The model's binding: tth_bind_model and <prefix>_const_slots, _bind_constants,
 * _bind_parameters, _status_text, _ensure_bound (the names binding.c gives the source). */
static int add_binding(link_module *l, const char *prefix, const tth_tbuffer *const *bound,
                       const unsigned *align_of, size_t n)
{
    char name[300];
    size_t store = 0, *bytes = malloc(n * sizeof *bytes), *align = malloc(n * sizeof *align),
           *derived = malloc(n * TTH_BIND_DERIVED_FIELDS * sizeof *derived);
    LLVMValueRef *names = calloc(n, sizeof *names);
    if (!bytes || !align || !derived || !names) {
        free(bytes), free(align), free(derived), free(names);
        return TTH_ENOMEM;
    }
    size_t nd = tth_binding_derived(bound, n, derived, &store);
    for (size_t d = 0; d < nd; d++) /* a derived slot has no name */
        names[derived[d * TTH_BIND_DERIVED_FIELDS]] = LLVMConstNull(l->ptr);
    for (size_t k = 0; k < n; k++) {
        bytes[k] = tth_tbuffer_nbytes(bound[k]);
        align[k] = align_of[k];
        if (names[k])
            continue;
        LLVMValueRef s = LLVMConstStringInContext(l->ctx, bound[k]->name, (unsigned)strlen(bound[k]->name), 0);
        LLVMValueRef g = LLVMAddGlobal(l->mod, LLVMTypeOf(s), "name");
        LLVMSetInitializer(g, s);
        LLVMSetGlobalConstant(g, 1);
        LLVMSetLinkage(g, LLVMPrivateLinkage);
        LLVMSetUnnamedAddress(g, LLVMGlobalUnnamedAddr);
        names[k] = g;
    }
    LLVMValueRef names_init = LLVMConstArray2(l->ptr, names, n);
    LLVMValueRef names_g = LLVMAddGlobal(l->mod, LLVMTypeOf(names_init), "names");
    LLVMSetInitializer(names_g, names_init);
    LLVMSetGlobalConstant(names_g, 1);
    LLVMSetLinkage(names_g, LLVMPrivateLinkage);
    LLVMValueRef bytes_g = size_table(l, "bytes", bytes, n), align_g = size_table(l, "align", align, n);
    LLVMValueRef derived_g = nd ? size_table(l, "derived", derived, nd * TTH_BIND_DERIVED_FIELDS) : LLVMConstNull(l->ptr);
    free(bytes), free(align), free(derived), free(names);
    if (!bytes_g || !align_g || !derived_g)
        return TTH_ENOMEM;
    LLVMValueRef store_g = LLVMConstNull(l->ptr);
    if (nd) { /* zero-filled: .bss, as the source's static store */
        LLVMTypeRef t = LLVMArrayType2(LLVMInt8TypeInContext(l->ctx), store);
        store_g = LLVMAddGlobal(l->mod, t, "store");
        LLVMSetInitializer(store_g, LLVMConstNull(t));
        LLVMSetLinkage(store_g, LLVMInternalLinkage);
        LLVMSetAlignment(store_g, 64);
    }
    LLVMTypeRef slots_t = LLVMArrayType2(l->ptr, n);
    snprintf(name, sizeof name, "%s" TTH_BIND_SYM_SLOTS, prefix);
    LLVMValueRef slots = LLVMAddGlobal(l->mod, slots_t, name);
    LLVMSetInitializer(slots, LLVMConstNull(slots_t));
    snprintf(name, sizeof name, "%s" TTH_BIND_SYM_FLAG, prefix); /* defined by the model's code */
    LLVMValueRef flag = LLVMAddGlobal(l->mod, l->i32, name);

    LLVMValueRef fields[] = {size_const(l, n), names_g, bytes_g, align_g, size_const(l, nd), derived_g, store_g,
                             size_const(l, store), slots, flag, LLVMConstInt(l->i32, (unsigned long long)(int64_t)TTH_BIND_E_UNBOUND, 1)};
    LLVMValueRef model_init = LLVMConstStructInContext(l->ctx, fields, sizeof fields / sizeof fields[0], 0);
    LLVMValueRef model = LLVMAddGlobal(l->mod, LLVMTypeOf(model_init), "model");
    LLVMSetInitializer(model, model_init);
    LLVMSetGlobalConstant(model, 1);
    LLVMSetLinkage(model, LLVMPrivateLinkage);

    LLVMTypeRef p3[] = {l->ptr, l->ptr, l->size}, p2[] = {l->ptr, l->size}, pi[] = {l->i32};
    snprintf(name, sizeof name, "%s" TTH_BIND_SYM_CONSTANTS, prefix);
    forward(l, name, LLVMFunctionType(l->i32, p3, 3, 0), "tth__bind_constants", &model, 1);
    snprintf(name, sizeof name, "%s" TTH_BIND_SYM_PARAMETERS, prefix);
    forward(l, name, LLVMFunctionType(l->i32, p2, 2, 0), "tth__bind_parameters", &model, 1);
    snprintf(name, sizeof name, "%s" TTH_BIND_SYM_STATUS_TEXT, prefix);
    forward(l, name, LLVMFunctionType(l->ptr, pi, 1, 0), "tth__bind_status_text", &model, 1);
    snprintf(name, sizeof name, "%s" TTH_BIND_SYM_ENSURE, prefix);
    forward(l, name, LLVMFunctionType(l->i32, NULL, 0, 0), "tth__bind_ensure", &model, 1);
    return 0;
}

/* The model's launch function over the core's pool, and the pool's cap (num-cores, 0: none). */
static void add_parallel(link_module *l, const char *launch, int num_cores)
{
    LLVMValueRef max = LLVMAddGlobal(l->mod, l->i32, "tth__parallel_max");
    LLVMSetInitializer(max, LLVMConstInt(l->i32, (unsigned long long)(num_cores > 0 ? num_cores : 0), 0));
    LLVMSetGlobalConstant(max, 1);
    LLVMSetVisibility(max, LLVMHiddenVisibility);
    LLVMTypeRef p[] = {l->ptr, l->ptr, l->i32};
    forward(l, launch, LLVMFunctionType(l->i32, p, 3, 0), "tth__parallel_launch", NULL, 0);
}

int tth__llcg_add_link_objects(LLVMTargetMachineRef tm, const char *model, const char *bind_prefix,
                               const tth_tbuffer *const *bound, const unsigned *align, size_t nbound,
                               const char *launch, int num_cores, tth_runtime_module *out, tth_diag *diag)
{
    if (nbound == 0 && !launch)
        return 0;
    link_module l = {.ctx = LLVMContextCreate()};
    char name[300];
    snprintf(name, sizeof name, "%s_link", model);
    l.mod = LLVMModuleCreateWithNameInContext(name, l.ctx);
    l.b = LLVMCreateBuilderInContext(l.ctx);
    char *triple = LLVMGetTargetMachineTriple(tm);
    LLVMSetTarget(l.mod, triple);
    LLVMDisposeMessage(triple);
    LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
    LLVMSetModuleDataLayout(l.mod, td);
    l.size = LLVMIntPtrTypeInContext(l.ctx, td);
    LLVMDisposeTargetData(td);
    l.ptr = LLVMPointerTypeInContext(l.ctx, 0);
    l.i32 = LLVMInt32TypeInContext(l.ctx);

    json_t *replaces = json_array();
    int rc = replaces ? 0 : TTH_ENOMEM;
    if (!rc && nbound) {
        rc = add_binding(&l, bind_prefix, bound, align, nbound);
        snprintf(name, sizeof name, "%s_bind.c", model);
        if (!rc && (json_array_append_new(replaces, json_string(name)) ||
                    tth_runtime_module_add_file(out, "tth_bind_core.o", TTH_FILE_LINK_OBJECT, tth_bind_core_o,
                                                tth_bind_core_o_len, diag)))
            rc = TTH_ENOMEM;
    }
    if (!rc && launch) {
        add_parallel(&l, launch, num_cores);
        snprintf(name, sizeof name, "%s_parallel.c", model);
        if (json_array_append_new(replaces, json_string(name)) ||
            tth_runtime_module_add_file(out, "tth_parallel_core.o", TTH_FILE_LINK_OBJECT, tth_parallel_core_o,
                                        tth_parallel_core_o_len, diag))
            rc = TTH_ENOMEM;
    }
    char *err = NULL;
    LLVMMemoryBufferRef obj = NULL;
    if (!rc && LLVMTargetMachineEmitToMemoryBuffer(tm, l.mod, LLVMObjectFile, &err, &obj)) {
        rc = tth_diag_set(diag, TTH_EINTERNAL, "llvm emit", "the link object: %s", err ? err : "");
        LLVMDisposeMessage(err);
    }
    if (!rc) {
        snprintf(name, sizeof name, "%s_link.o", model);
        rc = tth_runtime_module_add_file(out, name, TTH_FILE_LINK_OBJECT, LLVMGetBufferStart(obj),
                                         LLVMGetBufferSize(obj), diag);
    }
    json_t *meta = rc ? NULL : json_deep_copy(tth_runtime_module_meta(out));
    if (!rc && (!meta || json_object_set(meta, "link_replaces", replaces)))
        rc = TTH_ENOMEM;
    if (!rc)
        rc = tth_runtime_module_set_meta(out, meta, diag);
    json_decref(meta);
    if (rc == TTH_ENOMEM && diag && diag->code == TTH_OK)
        tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
    json_decref(replaces);
    if (obj)
        LLVMDisposeMemoryBuffer(obj);
    LLVMDisposeBuilder(l.b);
    LLVMDisposeModule(l.mod);
    LLVMContextDispose(l.ctx);
    return rc;
}
