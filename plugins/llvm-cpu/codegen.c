/* codegen.c: the llvm kind's tir_to_runtime hook: TIR PrimFuncs → one object file.
 *
 * The pipeline, in order (each step requires the ones above it):
 *   1. target_options:  mtriple / mcpu / mattr / mabi / mfloat-abi / opt-level / fast-math /
 *                       num-cores from the target JSON (num-cores caps the thread pool)
 *   2. target_machine:  LLVM's target for the triple, a machine for cpu + features
 *   3. declare:         every PrimFunc of the module, so calls may precede definitions
 *   4. tth__llcg_func:  each PrimFunc's body (codegen_func.c, codegen_expr.c); then the Arm
 *                       hard-float calling convention and the fast-math flags when asked
 *   5. LLVMVerifyModule
 *   6. LLVMRunPasses:   the opt-level's pipeline (pass_pipeline) with the target machine's
 *                       cost model
 *   7. emit:            an ELF (or the triple's) object, added as TTH_FILE_OBJECT
 *                       "<model>_llvm.o" with meta {"link": "object", "triple", "cpu",
 *                       "entry_symbols"}; the pipeline links it like any host object
 * A module of many PrimFuncs is cut into shards (up to LLVM_SHARDS, each with its own LLVM
 * context and target machine): steps 3-4 run for each shard in turn, each defining its share of
 * the PrimFuncs and declaring the rest; steps 5-7 run for the shards in parallel, and each shard
 * gives one object ("<model>_llvm_<k>.o" after the first), all linked together. A shard whose
 * module (its bitcode) the host's store of compiled code has seen with the same setting takes its
 * object from there and skips steps 5-7 (shards_from_store; docs/cache.md, "Compiled code").
 * Identical input gives identical bytes: nothing time-, path- or address-dependent reaches the
 * module, and LLVM's output is deterministic for one module and machine.
 */
#include "codegen.h"
#include "tth_parallel_src.h"
#include "tth/target.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/BitWriter.h>
#include <llvm-c/Error.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "tth/artifact.h"
#include "tth/plugin.h"

#include <xxhash.h>

TTH_PLUGIN_EXPORT int tth_tir_to_runtime(const tth_host *host, const json_t *target,
                                         const tth_tir_module *mod, tth_runtime_module *out,
                                         tth_diag *diag);

/* ---------------------------------------------------------------- 1. target options */

typedef struct llcg_options {
    char triple[256];
    char cpu[128];
    char features[1024];   /* "+neon,+dotprod" */
    char abi[64];
    int opt_level;         /* 0..3 */
    int fast_math;         /* every float instruction gets all fast-math flags */
    int arm_hard_float;    /* Arm with the hard float ABI (see arm_hard_float below) */
    int hosted;            /* an OS with files and POSIX threads (a Linux triple): the thread
                              pool and constants bound at run time are for it alone */
    int threads;           /* PARALLEL loops run on the thread pool (docs/threads.md) */
    int num_cores;         /* the target's num-cores, 0 when not given */
} llcg_options;

static const char *json_str(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Append one feature ("neon" means "+neon") to the comma-separated list. */
static int add_feature(llcg_options *o, const char *f, size_t len, tth_diag *diag)
{
    while (len && (*f == ' ' || *f == ','))
        f++, len--;
    while (len && (f[len - 1] == ' '))
        len--;
    if (!len)
        return 0;
    size_t cur = strlen(o->features);
    int plus = f[0] != '+' && f[0] != '-';
    if (cur + (cur ? 1 : 0) + (size_t)plus + len + 1 > sizeof o->features)
        return tth_diag_set(diag, TTH_ELIMIT, "target 'mattr'", "too many target features");
    snprintf(o->features + cur, sizeof o->features - cur, "%s%s%.*s", cur ? "," : "", plus ? "+" : "",
             (int)len, f);
    return 0;
}

/* A comma-separated list of features. "+nodsp" / "+nomve" (tth's M-profile options, not LLVM
 * features) set *nodsp / *nomve instead when those are given. */
static int add_feature_list(llcg_options *o, const char *s, int *nodsp, int *nomve, tth_diag *diag)
{
    while (*s) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (nodsp && len == 6 && strncmp(s, "+nodsp", 6) == 0) {
            *nodsp = 1;
            s += len + (e ? 1 : 0);
            continue;
        }
        if (nomve && len == 6 && strncmp(s, "+nomve", 6) == 0) {
            *nomve = 1;
            s += len + (e ? 1 : 0);
            continue;
        }
        int rc = add_feature(o, s, len, diag);
        if (rc)
            return rc;
        s += len + (e ? 1 : 0);
    }
    return 0;
}

static int kind_is(const json_t *t, const char *kind)
{
    const char *k = json_str(t, "kind");
    return k && strcmp(k, kind) == 0;
}

/* The target of the llvm kind: the target itself, else in a composite the first of its targets
 * of kind llvm, else the host when it is an llvm target. */
static const json_t *llvm_target(const json_t *t)
{
    if (!t || kind_is(t, "llvm"))
        return t;
    size_t i;
    const json_t *sub;
    json_array_foreach(json_object_get(t, "targets"), i, sub)
        if (kind_is(sub, "llvm"))
            return sub;
    const json_t *host = json_object_get(t, "host");
    return kind_is(host, "llvm") ? host : t;
}

/* Whether the comma-separated feature list holds "+name" as a whole entry. */
static int feature_listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n + 1 && p[0] == '+' && strncmp(p + 1, name, n) == 0)
            return 1;
        p = e ? e + 1 : NULL;
    }
    return 0;
}

/* The dot-product instructions the CPU has, as the parsed target says (features of mcpu + mattr)
 * or as the features given to LLVM say (a target without mcpu is this machine); see
 * tth__llcg.dot_us. */
static void dot_widths(tth__llcg *c, const json_t *t, const char *features)
{
    int vnni512 = (tth_target_has_feature(t, "has_avx512vnni") || feature_listed(features, "avx512vnni")) &&
                  (tth_target_has_feature(t, "has_avx512") || feature_listed(features, "avx512f"));
    int avxvnni = tth_target_has_feature(t, "has_avxvnni") || feature_listed(features, "avxvnni");
    int a64 = tth_target_has_feature(t, "is_aarch64");
    c->dot_us = vnni512 ? 16 : avxvnni ? 8 : a64 && (tth_target_has_feature(t, "has_matmul_i8") || feature_listed(features, "i8mm")) ? 4 : 0;
    c->dot_ss = a64 && (tth_target_has_feature(t, "has_dotprod") || feature_listed(features, "dotprod")) ? 4 : 0;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* mfloat-abi on an Arm triple, which LLVM-C can only express through the triple and features:
 * hard → the "eabihf" environment; soft and softfp → "eabi", soft also "+soft-float" (no FPU
 * instructions at all). Other triples have no float ABI choice: refused. */
static int float_abi(llcg_options *o, const char *fabi, tth_diag *diag)
{
    int arm = strncmp(o->triple, "arm", 3) == 0 || strncmp(o->triple, "thumb", 5) == 0;
    if (!arm) {
        tth_diag_set(diag, TTH_EUNSUPPORTED, "target 'mfloat-abi'",
                     "mfloat-abi applies to Arm triples (arm*, thumb*), not '%s'", o->triple);
        tth_diag_hint(diag, "drop -mfloat-abi for this triple");
        return TTH_EUNSUPPORTED;
    }
    size_t n = strlen(o->triple);
    if (strcmp(fabi, "hard") == 0) {
        if (ends_with(o->triple, "eabi"))
            snprintf(o->triple + n, sizeof o->triple - n, "hf");
        else if (!ends_with(o->triple, "eabihf"))
            snprintf(o->triple + n, sizeof o->triple - n, "-eabihf");
        o->arm_hard_float = 1;
        return 0;
    }
    if (ends_with(o->triple, "eabihf"))
        o->triple[n - 2] = '\0';
    o->arm_hard_float = 0;
    if (strcmp(fabi, "soft") == 0)
        return add_feature(o, "+soft-float", strlen("+soft-float"), diag);
    if (strcmp(fabi, "softfp") == 0)
        return 0;
    return tth_diag_set(diag, TTH_EINVAL, "target 'mfloat-abi'", "mfloat-abi must be soft, softfp or hard, not '%s'",
                        fabi);
}

static int target_options(const json_t *target_in, llcg_options *o, tth_diag *diag)
{
    memset(o, 0, sizeof *o);
    o->opt_level = 3;
    if (target_in && !json_is_object(target_in))
        return tth_diag_set(diag, TTH_EINVAL, "target", "the target is not a JSON object");
    const json_t *target = llvm_target(target_in);

    const char *triple = target ? json_str(target, "mtriple") : NULL;
    const char *cpu = target ? json_str(target, "mcpu") : NULL;
    if (triple && *triple) {
        snprintf(o->triple, sizeof o->triple, "%s", triple);
    } else if (cpu && strncmp(cpu, "cortex-m", 8) == 0) {
        /* The host's triple would be wrong and LLVM would print that the CPU is unknown. */
        tth_diag_set(diag, TTH_EINVAL, "target 'mtriple'", "the llvm target has mcpu '%s' but no mtriple", cpu);
        tth_diag_hint(diag, "add -mtriple: thumbv8.1m.main-none-eabi (Cortex-M55, M85), thumbv8m.main-none-eabi "
                            "(M33), thumbv7em-none-eabi (M4, M7), thumbv6m-none-eabi (M0), or use a tag such as "
                            "arm/cortex-m55");
        return TTH_EINVAL;
    } else {
        char *def = LLVMGetDefaultTargetTriple();
        snprintf(o->triple, sizeof o->triple, "%s", def);
        LLVMDisposeMessage(def);
    }
    int nodsp = 0, nomve = 0;   /* the M-profile options of tth targets, not LLVM features */
    char cpu_name[sizeof o->cpu];
    if (cpu && strchr(cpu, '+')) {
        /* "cortex-m55+nomve+nodsp": the CPU, then options */
        const char *plus = strchr(cpu, '+');
        snprintf(cpu_name, sizeof cpu_name, "%.*s", (int)(plus - cpu), cpu);
        for (const char *p = plus; *p;) {
            const char *next = strchr(p + 1, '+');
            size_t len = next ? (size_t)(next - p) : strlen(p);
            if (len == 6 && strncmp(p, "+nodsp", 6) == 0)
                nodsp = 1;
            else if (len == 6 && strncmp(p, "+nomve", 6) == 0)
                nomve = 1;
            else
                return tth_diag_set(diag, TTH_EINVAL, "target 'mcpu'",
                                    "unknown option '%.*s' after the CPU in mcpu '%s' (+nodsp, +nomve)", (int)len, p,
                                    cpu);
            p += len;
        }
        cpu = cpu_name;
    }
    if (cpu && strcmp(cpu, "native") == 0) {
        /* the target parser resolves it; a raw target still must not reach LLVM as "native" */
        char *host_cpu = LLVMGetHostCPUName(), *host_features = LLVMGetHostCPUFeatures();
        snprintf(o->cpu, sizeof o->cpu, "%s", host_cpu);
        int rc = add_feature_list(o, host_features ? host_features : "", NULL, NULL, diag);
        LLVMDisposeMessage(host_cpu);
        LLVMDisposeMessage(host_features);
        if (rc)
            return rc;
    } else {
        snprintf(o->cpu, sizeof o->cpu, "%s", cpu && *cpu ? cpu : "generic");
    }
    const char *abi = target ? json_str(target, "mabi") : NULL;
    if (abi)
        snprintf(o->abi, sizeof o->abi, "%s", abi);
    /* threads: a hosted OS and not num-cores=1 (docs/threads.md) */
    o->num_cores = tth_target_num_cores(target);
    o->hosted = strstr(o->triple, "linux") != NULL;
    o->threads = o->hosted && o->num_cores != 1;

    const json_t *mattr = target ? json_object_get(target, "mattr") : NULL;
    if (json_is_string(mattr)) {
        int rc = add_feature_list(o, json_string_value(mattr), &nodsp, &nomve, diag);
        if (rc)
            return rc;
    } else if (json_is_array(mattr)) {
        size_t i;
        const json_t *v;
        json_array_foreach(mattr, i, v) {
            if (!json_is_string(v))
                return tth_diag_set(diag, TTH_ETYPE, "target 'mattr'", "mattr entry %zu is not a string", i);
            int rc = add_feature_list(o, json_string_value(v), &nodsp, &nomve, diag);
            if (rc)
                return rc;
        }
    } else if (mattr && !json_is_null(mattr)) {
        return tth_diag_set(diag, TTH_ETYPE, "target 'mattr'", "mattr must be a string array");
    }
    /* +nodsp turns MVE off too; last, so they win over features given before */
    if (nodsp || nomve) {
        const char *off = nodsp ? "-dsp,-mve,-mve.fp" : "-mve,-mve.fp";
        int rc = add_feature_list(o, off, NULL, NULL, diag);
        if (rc)
            return rc;
    }

    const json_t *ol = target ? json_object_get(target, "opt-level") : NULL;
    if (ol && !json_is_null(ol)) {
        if (!json_is_integer(ol) || json_integer_value(ol) < 0 || json_integer_value(ol) > 3) {
            tth_diag_set(diag, TTH_EINVAL, "target 'opt-level'", "opt-level must be an integer from 0 to 3");
            return TTH_EINVAL;
        }
        o->opt_level = (int)json_integer_value(ol);
    }
    const json_t *fm = target ? json_object_get(target, "fast-math") : NULL;
    if (fm && !json_is_null(fm)) {
        if (!json_is_boolean(fm))
            return tth_diag_set(diag, TTH_ETYPE, "target 'fast-math'", "fast-math must be true or false");
        o->fast_math = json_is_true(fm);
    }
    if ((strncmp(o->triple, "arm", 3) == 0 || strncmp(o->triple, "thumb", 5) == 0) &&
        ends_with(o->triple, "eabihf"))
        o->arm_hard_float = 1;
    const char *fabi = target ? json_str(target, "mfloat-abi") : NULL;
    if (fabi) {
        int rc = float_abi(o, fabi, diag);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---------------------------------------------------------------- 2. target machine */

static pthread_once_t llvm_init_once = PTHREAD_ONCE_INIT;

static void llvm_init(void)
{
    LLVMInitializeAllTargetInfos();
    LLVMInitializeAllTargets();
    LLVMInitializeAllTargetMCs();
    LLVMInitializeAllAsmPrinters();
    LLVMInitializeAllAsmParsers();   /* module assembly: the Arm float ABI attribute */
}

/* Bare-metal triples ("-none-") get static relocation; hosted ones position-independent code,
 * since their objects are linked into shared objects. */
static LLVMRelocMode reloc_mode(const char *triple)
{
    return strstr(triple, "-none") ? LLVMRelocStatic : LLVMRelocPIC;
}

static LLVMTargetMachineRef target_machine(const llcg_options *o, tth_diag *diag)
{
    LLVMTargetRef t = NULL;
    char *err = NULL;
    if (LLVMGetTargetFromTriple(o->triple, &t, &err)) {
        tth_diag_set(diag, TTH_EUNSUPPORTED, "target 'mtriple'", "LLVM has no target for triple '%s': %s",
                     o->triple, err ? err : "");
        LLVMDisposeMessage(err);
        return NULL;
    }
    LLVMDisposeMessage(err);
    LLVMTargetMachineOptionsRef mo = LLVMCreateTargetMachineOptions();
    LLVMTargetMachineOptionsSetCPU(mo, o->cpu);
    LLVMTargetMachineOptionsSetFeatures(mo, o->features);
    if (o->abi[0])
        LLVMTargetMachineOptionsSetABI(mo, o->abi);
    static const LLVMCodeGenOptLevel levels[] = {LLVMCodeGenLevelNone, LLVMCodeGenLevelLess,
                                                 LLVMCodeGenLevelDefault, LLVMCodeGenLevelAggressive};
    LLVMTargetMachineOptionsSetCodeGenOptLevel(mo, levels[o->opt_level]);
    LLVMTargetMachineOptionsSetRelocMode(mo, reloc_mode(o->triple));
    LLVMTargetMachineRef tm = LLVMCreateTargetMachineWithOptions(t, o->triple, mo);
    LLVMDisposeTargetMachineOptions(mo);
    if (!tm)
        tth_diag_set(diag, TTH_EUNSUPPORTED, "target", "LLVM cannot build a machine for '%s' (cpu '%s')",
                     o->triple, o->cpu);
    return tm;
}

/* ---------------------------------------------------------------- 3. model and entry */

/* The AOT entry: the function the module names, else the one taking INPUT/OUTPUT buffers. */
static const tth_prim_func *find_entry(const tth_tir_module *mod)
{
    for (size_t i = 0; i < mod->nfuncs; i++)
        if (mod->entry && strcmp(mod->funcs[i]->name, mod->entry) == 0)
            return mod->funcs[i];
    for (size_t i = 0; i < mod->nfuncs; i++)
        for (size_t k = 0; k < mod->funcs[i]->nparams; k++)
            if (mod->funcs[i]->params[k]->scope == TTH_SCOPE_INPUT ||
                mod->funcs[i]->params[k]->scope == TTH_SCOPE_OUTPUT)
                return mod->funcs[i];
    return NULL;
}

/* The model name used in file names: the entry's "model" attribute, else X in "tth_X_run",
 * else "default". */
static void model_name(const tth_prim_func *entry, char *buf, size_t len)
{
    const char *m = entry && entry->attrs ? json_str(entry->attrs, "model") : NULL;
    if (m && *m) {
        snprintf(buf, len, "%s", m);
        return;
    }
    if (entry) {
        size_t n = strlen(entry->name);
        if (n > 8 && strncmp(entry->name, "tth_", 4) == 0 && strcmp(entry->name + n - 4, "_run") == 0) {
            snprintf(buf, len, "%.*s", (int)(n - 8), entry->name + 4);
            return;
        }
    }
    snprintf(buf, len, "default");
}

/* Arm hard float. LLVM-C cannot set the target machine's float ABI (TargetOptions::FloatABIType
 * stays "default", which the Arm back end treats as soft even for an eabihf triple), so:
 *   - every function and call that is not an LLVM intrinsic uses the arm_aapcs_vfpcc calling
 *     convention (floats in s/d registers), as C compiled with -mfloat-abi=hard expects;
 *   - math is emitted as explicit C library calls (c->libm_calls), because intrinsics that the
 *     back end turns into libcalls would use its default (soft) convention;
 *   - the object records Tag_ABI_VFP_args = 1 (VFP registers) through the assembler directive
 *     `.eabi_attribute 28, 1` in module assembly, so linkers see a hard-float object.
 * Run-time ABI helpers (__aeabi_*) keep the base convention, as the Arm run-time ABI requires. */
static void arm_hard_float(LLVMModuleRef m)
{
    for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f)) {
        if (LLVMGetIntrinsicID(f))
            continue;
        LLVMSetFunctionCallConv(f, LLVMARMAAPCSVFPCallConv);
        for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(f); bb; bb = LLVMGetNextBasicBlock(bb))
            for (LLVMValueRef i = LLVMGetFirstInstruction(bb); i; i = LLVMGetNextInstruction(i)) {
                if (!LLVMIsACallInst(i))
                    continue;
                LLVMValueRef callee = LLVMGetCalledValue(i);
                if (LLVMIsAFunction(callee) && LLVMGetIntrinsicID(callee))
                    continue;
                LLVMSetInstructionCallConv(i, LLVMARMAAPCSVFPCallConv);
            }
    }
    static const char attr[] = ".eabi_attribute 28, 1";
    LLVMAppendModuleInlineAsm(m, attr, strlen(attr));
}

/* fast-math: all flags on every instruction that can carry them (float arithmetic, compares,
 * selects and calls of float type). */
static void set_fast_math(LLVMModuleRef m)
{
    for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f))
        for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(f); bb; bb = LLVMGetNextBasicBlock(bb))
            for (LLVMValueRef i = LLVMGetFirstInstruction(bb); i; i = LLVMGetNextInstruction(i))
                if (LLVMCanValueUseFastMathFlags(i))
                    LLVMSetFastMathFlags(i, LLVMFastMathAll);
}

/* ---------------------------------------------------------------- 6. passes */

/* The pass pipeline of an opt-level (docs/llvm.md, "Passes"). The TIR arrives tiled, with its
 * vectors and register tiles already written out, so LLVM's loop optimizations (unrolling, index
 * rewriting, interchange) find nothing to gain and cost most of default<O3>'s time. Levels 1-3 run
 * the scalar clean-up such code needs (promotion of register tiles to values, common
 * subexpressions, combining, invariant code out of loops, redundant loads and stores) and the
 * loop vectorizer: for the loops TIR marks `vectorized` only at level 1, for any loop LLVM finds
 * worth it at 2 and 3; then a `vectorized` loop left scalar is reported (llvm_diagnostic). At 2
 * and 3 the SLP vectorizer runs too on a shard holding TIR that tth's lowering did not write
 * (slp: a plugin's relay_to_tir, or TIR handed to the hook directly), which may leave
 * straight-line work in scalars; the lowering writes its vectors itself, and the SLP vectorizer
 * found nothing in its TIR while taking a quarter of the passes' time (docs/llvm.md). Level 0
 * runs LLVM's O0.
 * key_setting hashes the text, so the store of compiled code keys by it. */
#define TTH_PASSES(vectorizers)                                                                     \
    "function(sroa,early-cse<memssa>,simplifycfg,instcombine<no-verify-fixpoint>,loop-mssa(licm),gvn," \
    "loop(loop-rotate)," vectorizers ",instcombine<no-verify-fixpoint>,dse,simplifycfg,transform-warning)"

static const char *pass_pipeline(int opt_level, int slp)
{
    switch (opt_level) {
    case 0:
        return "default<O0>";
    case 1:
        return TTH_PASSES("loop-vectorize<vectorize-forced-only;interleave-forced-only>");
    default:
        return slp ? TTH_PASSES("loop-vectorize,slp-vectorizer") : TTH_PASSES("loop-vectorize");
    }
}

static int run_passes(LLVMModuleRef m, LLVMTargetMachineRef tm, int opt_level, int slp, tth_diag *diag)
{
    const char *pipeline = pass_pipeline(opt_level, slp);
    LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
    LLVMErrorRef err = LLVMRunPasses(m, pipeline, tm, po);
    LLVMDisposePassBuilderOptions(po);
    if (err) {
        char *msg = LLVMGetErrorMessage(err);
        tth_diag_set(diag, TTH_EINTERNAL, "llvm pass pipeline", "the level %d pipeline failed: %s", opt_level, msg);
        LLVMDisposeErrorMessage(msg);
        return TTH_EINTERNAL;
    }
    return 0;
}

/* ---------------------------------------------------------------- 7. output */

/* The object and its link metadata: {"link": "object", "triple": ..., "cpu": ...,
 * "entry_symbols": [the AOT entry, or every PrimFunc when the module has no entry]}. */
static json_t *bind_meta(const tth__llcg *c, const char *model);

/* The object of one shard's module, into *obj. */
static int emit_object(LLVMModuleRef m, LLVMTargetMachineRef tm, LLVMMemoryBufferRef *obj, tth_diag *diag)
{
    char *err = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(tm, m, LLVMObjectFile, &err, obj)) {
        tth_diag_set(diag, TTH_EINTERNAL, "llvm object emission", "%s", err ? err : "emission failed");
        LLVMDisposeMessage(err);
        return TTH_EINTERNAL;
    }
    LLVMDisposeMessage(err);
    return 0;
}

/* Shard k's name: "<model>_llvm" for the first, "<model>_llvm_<k>" for the others, then suffix. */
static void shard_name(char *buf, size_t len, const char *model, int k, const char *suffix)
{
    if (k == 0)
        snprintf(buf, len, "%s_llvm%s", model, suffix);
    else
        snprintf(buf, len, "%s_llvm_%d%s", model, k, suffix);
}

/* The objects ("<model>_llvm.o", then "<model>_llvm_<s>.o" for the other shards) and the link
 * metadata. c holds the bound constants of every shard. */
static int emit(LLVMMemoryBufferRef *objs, int nobjs, const llcg_options *o, const char *model,
                const tth_tir_module *mod, const tth_prim_func *entry, const tth__llcg *c, tth_runtime_module *out,
                tth_diag *diag)
{
    int rc = 0;
    for (int s = 0; s < nobjs && !rc; s++) {
        char name[256];
        shard_name(name, sizeof name, model, s, ".o");
        rc = tth_runtime_module_add_file(out, name, TTH_FILE_OBJECT, LLVMGetBufferStart(objs[s]),
                                         LLVMGetBufferSize(objs[s]), diag);
    }
    if (rc)
        return rc;

    json_t *syms = json_array();
    json_t *meta = json_pack("{s:s, s:s, s:s, s:o}", "link", "object", "triple", o->triple, "cpu", o->cpu,
                             "entry_symbols", syms);
    if (!meta)
        return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < mod->nfuncs; i++)
        if ((!entry || mod->funcs[i] == entry) && json_array_append_new(syms, json_string(mod->funcs[i]->name))) {
            json_decref(meta);
            return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
        }
    if (c->nbound > 0) {
        char text[300];
        snprintf(text, sizeof text, "%s" TTH_BIND_SYM_STATUS_TEXT, c->bind_prefix);
        if (json_object_set_new(meta, "bind_constants", bind_meta(c, model)) ||
            json_object_set_new(meta, "status_text_symbol", json_string(text))) {
            json_decref(meta);
            return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
        }
    }
    rc = tth_runtime_module_set_meta(out, meta, diag);
    json_decref(meta);
    return rc;
}

/* The thread pool's C source (runtime/parallel/tth_parallel.c, docs/threads.md) as
 * <model>_parallel.c, its launch function named for the model and capped at num-cores. */
static int add_thread_pool(const llcg_options *o, const char *model, const char *launch, tth_runtime_module *out,
                           tth_diag *diag)
{
    char head[512], name[256];
    int n = snprintf(head, sizeof head, "#define TTH_PARALLEL_LAUNCH %s\n#define TTH_PARALLEL_MAX %d\n", launch,
                     o->num_cores > 0 ? o->num_cores : 0);
    size_t len = (size_t)n + sizeof tth_parallel_src - 1;
    char *text = malloc(len);
    if (!text)
        return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
    memcpy(text, head, (size_t)n);
    memcpy(text + n, tth_parallel_src, sizeof tth_parallel_src - 1);
    snprintf(name, sizeof name, "%s_parallel.c", model);
    int rc = tth_runtime_module_add_file(out, name, TTH_FILE_C_SOURCE, text, len, diag);
    free(text);
    return rc;
}

/* ---------------------------------------------------------------- bound constants */

/* The module meta's bind_constants (docs/plugin-guide.md): slot k is parameter bound[k]. */
static json_t *bind_meta(const tth__llcg *c, const char *model)
{
    return tth_binding_meta(c->bind_prefix, model, c->bound, c->nbound, TTH_BIND_E_UNBOUND);
}

/* <model>_bind.c (libtth's binding source), each constant loaded with its buffer's alignment, and
 * on a machine the runtime's cores run on the objects linked in its place (codegen_link.c), from
 * the same alignments. */
static int add_binding(const tth__llcg *c, const llcg_options *o, LLVMTargetMachineRef tm, const char *model,
                       const char *launch, tth_runtime_module *out, tth_diag *diag)
{
    unsigned *align = c->nbound ? malloc(c->nbound * sizeof *align) : NULL;
    if (c->nbound && !align)
        return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
    for (size_t k = 0; k < c->nbound; k++)
        align[k] = tth__llcg_buffer_align(c->bound[k]);
    int rc = c->nbound ? tth_runtime_module_add_binding(out, model, c->bind_prefix, c->bound, align, c->nbound,
                                                        TTH_BIND_E_UNBOUND, diag)
                       : 0;
    if (!rc && tth__llcg_core_links(o->triple))
        rc = tth__llcg_add_link_objects(tm, model, c->bind_prefix, c->bound, align, c->nbound, launch,
                                        o->num_cores, out, diag);
    free(align);
    return rc;
}

/* ---------------------------------------------------------------- LLVM's diagnostics */

/* LLVM reports through the context's handler (its default prints to stderr, which a hook must
 * never do): errors become the hook's diagnostic, warnings go to the host's log ("loop not
 * vectorized" when a VECTORIZED loop cannot be), remarks and notes are dropped. */
typedef struct llcg_diag_sink {
    const tth_host *host;
    tth_diag *diag;
} llcg_diag_sink;

static void llvm_diagnostic(LLVMDiagnosticInfoRef info, void *ctx)
{
    llcg_diag_sink *sink = ctx;
    LLVMDiagnosticSeverity sev = LLVMGetDiagInfoSeverity(info);
    if (sev != LLVMDSError && sev != LLVMDSWarning)
        return;
    char *text = LLVMGetDiagInfoDescription(info);
    if (sev == LLVMDSError) {
        if (sink->diag && sink->diag->code == TTH_OK)
            tth_diag_set(sink->diag, TTH_EINTERNAL, "llvm", "%s", text ? text : "LLVM reported an error");
    } else if (sink->host && sink->host->size >= offsetof(tth_host, log) + sizeof sink->host->log &&
               sink->host->log) {
        /* shards are optimized on threads of their own: one message to the host at a time */
        static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
        char msg[TTH_DIAG_MESSAGE_MAX];
        snprintf(msg, sizeof msg, "llvm: %s", text ? text : "");
        pthread_mutex_lock(&log_lock);
        sink->host->log(sink->host->ctx, TTH_SEV_WARNING, msg);
        pthread_mutex_unlock(&log_lock);
    }
    LLVMDisposeMessage(text);
}

/* ---------------------------------------------------------------- the hook */

/* A note when an x86-64 target asks for the baseline CPU (`-mcpu=generic`, or an `-mtriple`
 * without `-mcpu`) and this machine is an x86-64 with wider vectors: such code is for any x86-64
 * (SSE2, 4 lanes, no FMA; docs/targets.md, "Vector shape"), several times slower here than code
 * for the CPU. */
static void note_generic_cpu(const tth_host *host, const json_t *target_in, const llcg_options *o)
{
    const json_t *t = llvm_target(target_in);
    if (!host || host->size < offsetof(tth_host, log) + sizeof host->log || !host->log || !t ||
        (json_str(t, "mcpu") && strcmp(json_str(t, "mcpu"), "generic") != 0) || strncmp(o->triple, "x86_64", 6) != 0)
        return;
    char *cpu = LLVMGetHostCPUName(), *features = LLVMGetHostCPUFeatures();
    const char *width = features && strstr(features, "+avx512f") ? "AVX-512, 16 lanes"
                        : features && strstr(features, "+avx2") ? "AVX2, 8 lanes" : NULL;
    if (width) {
        char msg[TTH_DIAG_MESSAGE_MAX];
        snprintf(msg, sizeof msg, "the target's CPU is the generic x86-64, so the code runs on any x86-64 (SSE2, 4 lanes, "
                 "no FMA); this machine's CPU (%s, %s) runs code made for it several times faster: drop "
                 "-mcpu and -mtriple (plain 'llvm' is this machine), or give -mcpu=<the CPU you deploy on>", cpu ? cpu : "?", width);
        host->log(host->ctx, TTH_SEV_INFO, msg);
    }
    LLVMDisposeMessage(cpu);
    LLVMDisposeMessage(features);
}

/* ---------------------------------------------------------------- shared code */

/* Functions with the same code (tth_tir_func_same_code: the same body on other weights, biases
 * and workspace slices, as the repeated blocks of a CNN are): the first function of such a class
 * is compiled once as `<first>__shared`, taking its data buffers as pointers, and every function
 * of the class (the first too) is a wrapper that passes its own (docs/threads.md, "Compiling in
 * parallel"). Every constant is data (const_min 0), so layers that differ only in their biases
 * share their code too. */
#define SHARE_MAX_DATA 256

/* How many shards: one per LLVM_SHARD_BODIES function bodies (plan_sharing: a class of functions
 * with the same code is one body), at most LLVM_SHARDS. A fixed count, not the cores of the
 * machine compiling, so the artifact's bytes do not depend on it; more shards than cores, taken
 * by the threads in turn as they finish (build_shards), even out shards of unequal work; two
 * bodies a shard makes enough of them to (docs/threads.md, "Compiling in parallel"). */
#define LLVM_SHARDS 8
#define LLVM_SHARD_BODIES 2

static int shard_count(size_t bodies)
{
    size_t n = bodies / LLVM_SHARD_BODIES;
    return n < 1 ? 1 : n > LLVM_SHARDS ? LLVM_SHARDS : (int)n;
}

typedef struct llcg_plan {
    tth_tir_share *f;             /* one per PrimFunc of the module (tth_tir_share_plan) */
    int *home;                    /* per PrimFunc: the shard whose module defines it */
    size_t n;
    size_t bodies;                /* function bodies compiled: PrimFuncs less the wrappers' */
} llcg_plan;

static void plan_free(llcg_plan *p)
{
    tth_tir_share_free(p->f, p->n);
    free(p->home);
    memset(p, 0, sizeof *p);
}

static int is_extern(const tth_prim_func *f)
{
    return f->attrs && json_is_true(json_object_get(f->attrs, "extern"));
}

/* TIR that tth wrote: an operator's lowering (origin "default") or the AOT entry ("aot"), whose
 * vectors are written out where they pay (pass_pipeline) */
static int tth_written(const tth_prim_func *f)
{
    const char *o = f->attrs ? json_str(f->attrs, "origin") : NULL;
    return o && (strcmp(o, "default") == 0 || strcmp(o, "aot") == 0);
}

/* The classes of functions with the same code (plan_homes then gives each function its shard). */
static int plan_sharing(const tth_tir_module *mod, const tth_prim_func *entry, llcg_plan *p, tth_diag *diag)
{
    memset(p, 0, sizeof *p);
    int rc = tth_tir_share_plan(mod, entry, 0, SHARE_MAX_DATA, &p->f, &p->bodies);
    p->n = rc ? 0 : mod->nfuncs;
    if (!rc && !(p->home = calloc(p->n ? p->n : 1, sizeof *p->home)))
        rc = TTH_ENOMEM;
    if (rc) {
        plan_free(p);
        return tth_diag_set(diag, rc, NULL, "out of memory planning shared code");
    }
    return 0;
}

/* A body's work for LLVM, roughly: its statements and expressions as written (a subexpression
 * used twice counts twice, as the code generator emits it twice). */
static int count_stmt(void *ctx, const tth_tstmt *s)
{
    (void)s;
    (*(size_t *)ctx)++;
    return 0;
}

static int count_expr(void *ctx, const tth_texpr *e)
{
    (void)e;
    (*(size_t *)ctx)++;
    return 0;
}

static size_t body_weight(const tth_prim_func *f)
{
    size_t n = 0;
    tth_tir_visitor v = {.stmt = count_stmt, .expr = count_expr, .ctx = &n};
    if (f->body)
        tth_tir_walk(f->body, &v);
    return n + 1;
}

/* Each function's shard: the entry in shard 0, then the bodies (a class's functions in its first
 * one's shard, so the wrappers call the shared body inside one module) by weight
 * (tth_tir_balance: heaviest first, each to the lightest shard), so the shards end together.
 * The weights come from the module alone, so the split does too. */
static int plan_homes(llcg_plan *p, const tth_tir_module *mod, const tth_prim_func *entry, int nshards)
{
    size_t load[LLVM_SHARDS] = {0};
    size_t *weight = calloc(p->n ? p->n : 1, sizeof *weight), nb = 0;
    size_t *which = calloc(p->n ? p->n : 1, sizeof *which);
    unsigned *bin = calloc(p->n ? p->n : 1, sizeof *bin);
    int rc = weight && which && bin ? 0 : TTH_ENOMEM;
    for (size_t i = 0; !rc && i < p->n; i++) {
        p->home[i] = 0;
        if (mod->funcs[i] == entry)
            load[0] += body_weight(mod->funcs[i]);
        else if (p->f[i].rep == i && nshards > 1)
            weight[nb] = body_weight(mod->funcs[i]), which[nb++] = i;
    }
    if (!rc)
        rc = tth_tir_balance(weight, nb, (size_t)nshards, load, bin);
    for (size_t k = 0; !rc && k < nb; k++)
        p->home[which[k]] = (int)bin[k];
    for (size_t i = 0; !rc && i < p->n; i++)
        if (p->f[i].rep != i)
            p->home[i] = p->home[p->f[i].rep];
    free(weight);
    free(which);
    free(bin);
    return rc;
}

static int lower_module(tth__llcg *c, const tth_host *host, const tth_prim_func *entry, const llcg_plan *plan,
                        int shard)
{
    const tth_tir_module *mod = c->tir;
    /* 3. declare every PrimFunc first: calls may precede definitions */
    for (size_t i = 0; i < mod->nfuncs; i++) {
        const tth_prim_func *f = mod->funcs[i];
        if (!f || !f->name)
            return tth_diag_set(c->diag, TTH_EINVAL, NULL, "PrimFunc %zu has no name", i);
        if (LLVMGetNamedFunction(c->mod, f->name))
            return tth_diag_set(c->diag, TTH_EINVAL, NULL, "two PrimFuncs are named '%s'", f->name);
        if (!tth__llcg_declare(c, f->name, f->nparams, f == entry))
            return c->diag->code;
    }
    /* 4. lower each body this shard defines (plan_sharing) */
    for (size_t i = 0; i < mod->nfuncs; i++) {
        if (host && host->size >= offsetof(tth_host, cancelled) + sizeof host->cancelled &&
            host->cancelled && host->cancelled(host->ctx))
            return tth_diag_set(c->diag, TTH_ECANCELLED, NULL, "cancelled");
        const tth_prim_func *f = mod->funcs[i];
        const tth_tir_share *s = &plan->f[i];
        if (is_extern(f))
            continue; /* an extern PrimFunc (tth/tir.h): declared above, defined elsewhere */
        if (plan->home[i] != shard)
            continue; /* defined by another shard's module; declared above */
        const tth_tir_share *first = &plan->f[s->rep];
        int rc;
        if (first->members < 2) {
            rc = tth__llcg_func(c, f, f == entry);
        } else {
            char name[600];
            snprintf(name, sizeof name, "%s__shared", mod->funcs[s->rep]->name);
            LLVMValueRef shared = LLVMGetNamedFunction(c->mod, name);
            rc = 0;
            if (s->rep == i) {
                shared = tth__llcg_declare_shared(c, name, f->nparams, s->ndata);
                rc = shared ? tth__llcg_func_shared(c, f, shared, s->data, s->ndata) : c->diag->code;
            }
            if (!rc && !shared)
                rc = tth_diag_set(c->diag, TTH_EINTERNAL, f->name, "the shared code '%s' is not in this module", name);
            if (!rc)
                rc = tth__llcg_func_wrapper(c, f, shared, s->data, s->ndata);
        }
        if (rc)
            return rc;
    }
    return 0;
}

/* 5. the generated IR must be valid before any pass sees it */
static int verify(tth__llcg *c)
{
    char *msg = NULL;
    if (LLVMVerifyModule(c->mod, LLVMReturnStatusAction, &msg)) {
        tth_diag_set(c->diag, TTH_EINTERNAL, "llvm module", "generated LLVM IR is invalid: %s", msg ? msg : "");
        LLVMDisposeMessage(msg);
        return TTH_EINTERNAL;
    }
    LLVMDisposeMessage(msg);
    return 0;
}

/* ---------------------------------------------------------------- shards */

/* One shard: its own LLVM context, module and target machine, so shards are optimized and
 * emitted on threads of their own (LLVM contexts share nothing). */
typedef struct llcg_shard {
    tth__llcg c;
    LLVMTargetMachineRef tm;
    llcg_diag_sink sink;
    tth_diag diag;
    LLVMMemoryBufferRef obj;
    const llcg_options *opt;
    int rc;
    int keyed;                  /* key is its object's key in the host's store */
    int from_store;             /* obj came from the store: nothing to build */
    int slp;                    /* its module holds TIR tth's lowering did not write: the SLP
                                   vectorizer runs at levels 2 and 3 (pass_pipeline) */
    uint8_t key[16];
} llcg_shard;

/* A shard's context, module and builder for the target machine tm. */
static int shard_init(llcg_shard *sh, const tth_host *host, const tth_tir_module *mod, const llcg_options *opt,
                      const char *modname, tth_diag *diag)
{
    tth__llcg *c = &sh->c;
    sh->opt = opt;
    tth_diag_clear(&sh->diag);
    sh->tm = target_machine(opt, diag);
    if (!sh->tm)
        return diag->code ? diag->code : TTH_EUNSUPPORTED;
    c->diag = &sh->diag;
    c->tir = mod;
    c->ctx = LLVMContextCreate();
    sh->sink.host = host;
    sh->sink.diag = &sh->diag;
    LLVMContextSetDiagnosticHandler(c->ctx, llvm_diagnostic, &sh->sink);
    c->mod = LLVMModuleCreateWithNameInContext(modname, c->ctx);
    c->b = LLVMCreateBuilderInContext(c->ctx);
    LLVMSetSourceFileName(c->mod, modname, strlen(modname));
    LLVMSetTarget(c->mod, opt->triple);
    c->td = LLVMCreateTargetDataLayout(sh->tm);
    LLVMSetModuleDataLayout(c->mod, c->td);
    c->big_endian = LLVMByteOrder(c->td) == LLVMBigEndian;
    c->md_loop = LLVMGetMDKindIDInContext(c->ctx, "llvm.loop", 9);
    c->md_invariant = LLVMGetMDKindIDInContext(c->ctx, "invariant.load", 14);
    return 0;
}

static void shard_free(llcg_shard *sh)
{
    tth__llcg *c = &sh->c;
    free(c->bound);
    tth__llcg_scope_free(&c->consts);
    tth__llcg_scope_free(&c->bufs);
    tth__llcg_scope_free(&c->vars);
    if (c->b)
        LLVMDisposeBuilder(c->b);
    if (c->mod)
        LLVMDisposeModule(c->mod);
    if (c->td)
        LLVMDisposeTargetData(c->td);
    if (c->ctx)
        LLVMContextDispose(c->ctx);
    if (sh->obj)
        LLVMDisposeMemoryBuffer(sh->obj);
    if (sh->tm)
        LLVMDisposeTargetMachine(sh->tm);
}

/* 5.-7. for one shard: verify, the pass pipeline, the object (on a thread of its own) */
static void *shard_build(void *arg)
{
    llcg_shard *sh = arg;
    tth__llcg *c = &sh->c;
    int rc = verify(c);
    if (!rc)
        rc = run_passes(c->mod, sh->tm, sh->opt->opt_level, sh->slp, c->diag);
    if (!rc && c->diag->code != TTH_OK)
        rc = c->diag->code;
    if (!rc)
        rc = emit_object(c->mod, sh->tm, &sh->obj, c->diag);
    sh->rc = rc ? rc : c->diag->code;
    return NULL;
}

/* The shards left to build: each thread takes the next one until none is left, and counts it
 * done for the thread that waits (build_shards). */
typedef struct shard_queue {
    llcg_shard *sh;
    int n, next, done;
    pthread_mutex_t lock;
    pthread_cond_t cond;
} shard_queue;

static void *run_shards(void *arg)
{
    shard_queue *q = arg;
    for (int k; (k = __atomic_fetch_add(&q->next, 1, __ATOMIC_RELAXED)) < q->n;) {
        if (!q->sh[k].from_store)
            shard_build(&q->sh[k]);
        pthread_mutex_lock(&q->lock);
        q->done++;
        pthread_cond_signal(&q->cond);
        pthread_mutex_unlock(&q->lock);
    }
    return NULL;
}

/* ---------------------------------------------------------------- the host's store */

/* What, besides its module, decides a shard's object: this plugin's file (a rebuilt plugin may
 * emit other code for the same IR), LLVM's version, the target machine's options and the pass
 * pipeline (run_passes). Into h. */
static void key_setting(XXH3_state_t *h, const llcg_options *o, int slp)
{
    static const char tag[] = "tth llvm-cpu: a shard's object";
    XXH3_128bits_update(h, tag, sizeof tag);
    const char *pipeline = pass_pipeline(o->opt_level, slp);
    XXH3_128bits_update(h, pipeline, strlen(pipeline) + 1);
    Dl_info info;
    struct stat st;
    char buf[1400];
    int n = dladdr((void *)&tth_tir_to_runtime, &info) && info.dli_fname && stat(info.dli_fname, &st) == 0
                ? snprintf(buf, sizeof buf, "%s %lld %lld %lld.%09ld", info.dli_fname, (long long)st.st_ino,
                           (long long)st.st_size, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec)
                : snprintf(buf, sizeof buf, "unknown plugin file");
    XXH3_128bits_update(h, buf, (size_t)n + 1);
    unsigned major, minor, patch;
    LLVMGetVersion(&major, &minor, &patch);
    n = snprintf(buf, sizeof buf, "llvm %u.%u.%u|%s|%s|%s|%s|O%d|fm%d|hf%d|t%d|n%d", major, minor, patch, o->triple,
                 o->cpu, o->features, o->abi, o->opt_level, o->fast_math, o->arm_hard_float, o->threads, o->num_cores);
    XXH3_128bits_update(h, buf, (size_t)n + 1);
}

/* Each shard's object from the host's store when its module was compiled before with the same
 * setting (docs/cache.md, "Compiled code"): the module's bitcode is its key's main part. */
static void shards_from_store(llcg_shard *sh, int n, const tth_host *host, const llcg_options *o)
{
    if (!TTH_HOST_HAS_STORE(host))
        return;
    for (int k = 0; k < n; k++) {
        XXH3_state_t *h = XXH3_createState();
        LLVMMemoryBufferRef bc = LLVMWriteBitcodeToMemoryBuffer(sh[k].c.mod);
        if (h && bc) {
            XXH3_128bits_reset(h);
            key_setting(h, o, sh[k].slp);
            XXH3_128bits_update(h, LLVMGetBufferStart(bc), LLVMGetBufferSize(bc));
            XXH128_canonicalFromHash((XXH128_canonical_t *)sh[k].key, XXH3_128bits_digest(h));
            sh[k].keyed = 1;
        }
        if (bc)
            LLVMDisposeMemoryBuffer(bc);
        XXH3_freeState(h);
        void *data = NULL;
        size_t len = 0;
        if (sh[k].keyed && host->store_get(host->ctx, sh[k].key, &data, &len)) {
            sh[k].obj = LLVMCreateMemoryBufferWithMemoryRangeCopy(data, len, "object");
            sh[k].from_store = sh[k].obj != NULL;
        }
        free(data);
    }
}

/* The objects built here, into the host's store. */
static void shards_to_store(const llcg_shard *sh, int n, const tth_host *host)
{
    for (int k = 0; k < n; k++)
        if (sh[k].keyed && !sh[k].from_store && sh[k].obj && sh[k].rc == 0)
            host->store_put(host->ctx, sh[k].key, LLVMGetBufferStart(sh[k].obj), LLVMGetBufferSize(sh[k].obj));
}

/* The hook's progress (plugin.h, ABI 1.3): lowering a shard's IR is one step, building it three */
static void report(const tth_host *host, int done, int total)
{
    if (host && host->size >= offsetof(tth_host, progress) + sizeof host->progress && host->progress)
        host->progress(host->ctx, done, total);
}

/* Build every shard on as many threads as the machine has CPUs (at most one per shard), each
 * taking the next shard when it is done with one, while this thread reports each one done. */
static void build_shards(llcg_shard *sh, int n, const tth_host *host)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = cpus < 1 ? 1 : cpus < n ? (int)cpus : n;
    pthread_t th[LLVM_SHARDS];
    int started = 0;
    shard_queue q = {.sh = sh, .n = n};
    pthread_mutex_init(&q.lock, NULL);
    pthread_cond_init(&q.cond, NULL);
    for (int t = 0; t < nt; t++)
        started += pthread_create(&th[started], NULL, run_shards, &q) == 0;
    if (started == 0) {
        run_shards(&q); /* no thread to be had: this one builds them all */
    } else {
        pthread_mutex_lock(&q.lock);
        for (int seen = 0; seen < n;) {
            while (q.done == seen)
                pthread_cond_wait(&q.cond, &q.lock);
            seen = q.done;
            pthread_mutex_unlock(&q.lock);
            report(host, n + 3 * seen, 4 * n);
            pthread_mutex_lock(&q.lock);
        }
        pthread_mutex_unlock(&q.lock);
    }
    for (int t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    pthread_mutex_destroy(&q.lock);
    pthread_cond_destroy(&q.cond);
}

TTH_PLUGIN_EXPORT int tth_tir_to_runtime(const tth_host *host, const json_t *target,
                                         const tth_tir_module *mod, tth_runtime_module *out,
                                         tth_diag *diag)
{
    tth_diag_clear(diag);
    if (!mod || !out)
        return tth_diag_set(diag, TTH_EINVAL, NULL, "tir_to_runtime needs a module and an output");

    llcg_options opt;
    int rc = target_options(target, &opt, diag);
    if (rc)
        return rc;
    pthread_once(&llvm_init_once, llvm_init);
    note_generic_cpu(host, target, &opt);

    const tth_prim_func *entry = find_entry(mod);
    char model[128];
    model_name(entry, model, sizeof model);
    tth_diag local;
    tth_diag_clear(&local);
    if (!diag)
        diag = &local;

    char launch[200], bind_prefix[200];
    snprintf(launch, sizeof launch, "tth_%s_parallel_launch", model);
    snprintf(bind_prefix, sizeof bind_prefix, "tth_%s_llvm", model);
    llcg_shard sh[LLVM_SHARDS];
    memset(sh, 0, sizeof sh);
    llcg_plan plan;
    rc = plan_sharing(mod, entry, &plan, diag);
    if (rc)
        return rc;
    int nshards = shard_count(plan.bodies);
    if (plan_homes(&plan, mod, entry, nshards)) {
        plan_free(&plan);
        return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory planning shards");
    }
    /* 3.-4. each shard's module in turn: the bound constants' slots are numbered across shards
     * (each shard continues the list the one before it made) */
    int nparallel = 0;
    for (int k = 0; k < nshards && !rc; k++) {
        char modname[160];
        shard_name(modname, sizeof modname, model, k, "");
        rc = shard_init(&sh[k], host, mod, &opt, modname, diag);
        if (rc)
            break;
        tth__llcg *c = &sh[k].c;
        c->libm_calls = opt.arm_hard_float;
        /* AVX-512 as the parsed target says (features of mcpu + mattr) or as the machine's
         * features given to LLVM say (a target without mcpu is this machine) */
        c->masked_tails = tth_target_has_feature(llvm_target(target), "has_avx512") || strstr(opt.features, "+avx512f");
        dot_widths(c, llvm_target(target), opt.features);
        c->par_launch = opt.threads ? launch : NULL;
        /* constants bound at run time for a hosted OS of the host's byte order, where the
         * runtime or the application reads the parameters file; bare-metal code keeps them in
         * its read-only data (docs/artifact.md, "Constants bound at run time") */
        c->bind_prefix = opt.hosted && !c->big_endian && entry ? bind_prefix : NULL;
        if (k > 0) {
            c->bound = sh[k - 1].c.bound, c->nbound = sh[k - 1].c.nbound, c->cap_bound = sh[k - 1].c.cap_bound;
            sh[k - 1].c.bound = NULL;
        }
        rc = lower_module(c, host, entry, &plan, k);
        for (size_t i = 0; i < mod->nfuncs; i++)
            if (plan.home[i] == k && !is_extern(mod->funcs[i]) && !tth_written(mod->funcs[i]))
                sh[k].slp = 1;
        nparallel += c->nparallel;
        report(host, k + 1, 4 * nshards);
        if (!rc && sh[k].diag.code != TTH_OK)
            rc = sh[k].diag.code;
        if (rc && sh[k].diag.code != TTH_OK)
            *diag = sh[k].diag;
    }
    tth__llcg *last = &sh[nshards - 1].c, *c0 = &sh[0].c;
    if (!rc && c0->bind_flag && last->nbound == 0) {
        /* nothing bound after all: bound from the start, and ensure_bound a function of ours */
        LLVMSetInitializer(c0->bind_flag, LLVMConstInt(LLVMInt32TypeInContext(c0->ctx), 1, 0));
        LLVMSetLinkage(c0->bind_ensure, LLVMInternalLinkage);
        LLVMBuilderRef eb = LLVMCreateBuilderInContext(c0->ctx);
        LLVMPositionBuilderAtEnd(eb, LLVMAppendBasicBlockInContext(c0->ctx, c0->bind_ensure, "entry"));
        LLVMBuildRet(eb, LLVMConstInt(LLVMInt32TypeInContext(c0->ctx), 0, 0));
        LLVMDisposeBuilder(eb);
    }
    for (int k = 0; k < nshards && !rc; k++) {
        if (opt.arm_hard_float)
            arm_hard_float(sh[k].c.mod);
        if (opt.fast_math)
            set_fast_math(sh[k].c.mod);
    }
    /* 5.-7. verify, optimize and emit the shards in parallel (those the host's store does not
     * have already) */
    if (!rc) {
        shards_from_store(sh, nshards, host, &opt);
        build_shards(sh, nshards, host);
        for (int k = 0; k < nshards && !rc; k++)
            if ((rc = sh[k].rc) != 0)
                *diag = sh[k].diag;
        if (!rc)
            shards_to_store(sh, nshards, host);
    }
    LLVMMemoryBufferRef objs[LLVM_SHARDS];
    for (int k = 0; k < nshards; k++)
        objs[k] = sh[k].obj;
    if (!rc)
        rc = emit(objs, nshards, &opt, model, mod, entry, last, out, diag);
    if (!rc && nparallel > 0)
        rc = add_thread_pool(&opt, model, launch, out, diag);
    if (!rc)
        rc = add_binding(last, &opt, sh[0].tm, model, nparallel > 0 ? launch : NULL, out, diag);

    for (int k = 0; k < nshards; k++)
        shard_free(&sh[k]);
    plan_free(&plan);
    return rc;
}
