/* cpu.c: the shared CPU parsers (cpu, A-profile and M-profile; docs/targets.md) and the host.
 *
 * Every answer about CPUs and features comes from the LLVM libtth links (llvm_info.cpp): whether
 * a triple, CPU or feature exists, and which features a CPU plus -mattr turns on, implied ones
 * included (so "+v8.4a" brings dotprod and "+v8.6a" brings i8mm exactly as LLVM compiles them).
 * tth keeps no CPU table of its own; tests check LLVM's answers against the rules in docs/targets.md.
 *
 * The CPU parser (kinds llvm and c):
 *   - mcpu=native: the host CPU (LLVMGetHostCPUName), the host triple when none is given, and the
 *     host's features that differ from that CPU's defaults prepended to mattr;
 *   - a Cortex-M mcpu (or an M-profile thumb triple without mcpu): the M-profile parser;
 *   - otherwise triple = mtriple, or the host triple; mcpu and mattr are checked against LLVM;
 *     AArch64 (aarch64*, arm64*) and 32-bit Arm: key arm_cpu and features is_aarch64, has_asimd,
 *     has_sve, has_dotprod, has_matmul_i8, has_fp16_simd, has_sme; x86: key x86_64 and has_avx2,
 *     has_avx512, has_avx512vnni, has_avxvnni; other architectures: no derived key.
 * The M-profile parser (kind cmsis-nn, and Cortex-M for llvm and c): has_dsp and has_mve from
 * LLVM's view of the CPU; "+nodsp" / "+nomve" after the CPU name or in mattr turn them off
 * ("+nodsp" turns MVE off too); keys arm_cpu, cpu. Without mcpu or triple: no DSP, no MVE.
 */
#include "target_private.h"
#include "llvm_info.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

/* ---- the host ---- */

static char host_triple[128] = "unknown-unknown-unknown";
static char host_cpu[64] = "generic";
static pthread_once_t host_once = PTHREAD_ONCE_INIT;

static void host_init(void)
{
    char *t = LLVMGetDefaultTargetTriple();
    if (t) {
        snprintf(host_triple, sizeof host_triple, "%s", t);
        LLVMDisposeMessage(t);
    }
    char *c = LLVMGetHostCPUName();
    if (c) {
        if (c[0])
            snprintf(host_cpu, sizeof host_cpu, "%s", c);
        LLVMDisposeMessage(c);
    }
}

const char *tth_host_triple(void)
{
    pthread_once(&host_once, host_init);
    return host_triple;
}

const char *tth_host_cpu_name(void)
{
    pthread_once(&host_once, host_init);
    return host_cpu;
}

/* ---- helpers ---- */

static const char *get_str(const json_t *t, const char *key)
{
    return json_string_value(json_object_get(t, key));
}

static int starts_with(const char *s, const char *prefix)
{
    return s && strncmp(s, prefix, strlen(prefix)) == 0;
}

enum arch { ARCH_OTHER, ARCH_AARCH64, ARCH_ARM, ARCH_X86 };

static enum arch triple_arch(const char *triple)
{
    if (starts_with(triple, "aarch64") || starts_with(triple, "arm64"))
        return ARCH_AARCH64;
    if (starts_with(triple, "arm") || starts_with(triple, "thumb"))
        return ARCH_ARM;
    if (starts_with(triple, "x86_64") || starts_with(triple, "i386") || starts_with(triple, "i486") ||
        starts_with(triple, "i586") || starts_with(triple, "i686") || starts_with(triple, "x86"))
        return ARCH_X86;
    return ARCH_OTHER;
}

/* thumbv6m, thumbv7m, thumbv7em, thumbv8m.base, thumbv8m.main, thumbv8.1m.main: M-profile. */
static int mprofile_triple(const char *triple)
{
    static const char *const prefixes[] = {"thumbv6m", "thumbv7m", "thumbv7em", "thumbv8m", "thumbv8.1m",
                                           "armv6m", "armv7m", "armv7em", "armv8m", "armv8.1m"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (starts_with(triple, prefixes[i]))
            return 1;
    return 0;
}

static int mprofile_cpu(const char *mcpu)
{
    return starts_with(mcpu, "cortex-m");
}

/* The triple the M-profile parser asks LLVM about when the target names none: plain Thumb, whose
 * architecture LLVM then takes from the CPU. */
#define MPROFILE_DEFAULT_TRIPLE "thumb-none-eabi"

/* Triples tried to tell the user which architecture an unknown CPU belongs to. */
static const char *const probe_triples[] = {"aarch64-linux-gnu", "thumbv8.1m.main-none-eabi",
                                            "armv7a-linux-gnueabihf", "x86_64-linux-gnu",
                                            "riscv64-linux-gnu", NULL};

static int unknown_triple(const char *triple, tth_diag *d)
{
    char where[160];
    snprintf(where, sizeof where, "-mtriple=%s", triple);
    tth_diag_set(d, TTH_EUNKNOWN, where, "LLVM has no target for triple '%s'", triple);
    static const char *const common[] = {"aarch64-linux-gnu", "aarch64-none-elf", "arm64-apple-macos",
                                         "armv7a-linux-gnueabihf", "thumbv6m-none-eabi", "thumbv7m-none-eabi",
                                         "thumbv7em-none-eabi", "thumbv7em-none-eabihf", "thumbv8m.main-none-eabi",
                                         "thumbv8.1m.main-none-eabi", "x86_64-linux-gnu", "x86_64-pc-linux-gnu",
                                         "riscv64-linux-gnu"};
    tth__hint_nearest(d, triple, common, sizeof common / sizeof common[0],
                      "a triple names arch-vendor-os, e.g. aarch64-linux-gnu or thumbv7em-none-eabi");
    return TTH_EUNKNOWN;
}

static int unknown_cpu(const char *triple, const char *cpu, int triple_given, const char *only_prefix,
                       tth_diag *d)
{
    char where[160];
    snprintf(where, sizeof where, "-mcpu=%s", cpu);
    if (strcmp(triple, MPROFILE_DEFAULT_TRIPLE) == 0)
        tth_diag_set(d, TTH_EUNKNOWN, where, "unknown Cortex-M CPU '%s'", cpu);
    else
        tth_diag_set(d, TTH_EUNKNOWN, where, "unknown CPU '%s' for triple '%s'", cpu, triple);
    if (!triple_given) {
        for (size_t i = 0; probe_triples[i]; i++)
            if (strcmp(probe_triples[i], triple) != 0 && tth__llvm_cpu_known(probe_triples[i], cpu)) {
                tth_diag_hint(d, "'%s' is a CPU of %s: add -mtriple=%s", cpu, probe_triples[i], probe_triples[i]);
                return TTH_EUNKNOWN;
            }
    }
    size_t n = 0;
    char **names = tth__llvm_names(triple, 0, &n);
    if (names && only_prefix) { /* keep only the CPUs that fit (Cortex-M for the M-profile parser) */
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (starts_with(names[i], only_prefix))
                names[k++] = names[i];
            else
                free(names[i]);
        }
        names[k] = NULL;
        n = k;
    }
    tth__hint_nearest(d, cpu, (const char *const *)names, n, "LLVM knows no CPU near that name for this triple");
    tth__strv_free(names);
    return TTH_EUNKNOWN;
}

/* Check one mattr entry ("+neon") against the triple's features. */
static int check_feature(const char *triple, const char *entry, tth_diag *d)
{
    char where[160];
    snprintf(where, sizeof where, "-mattr=%s", entry);
    if (entry[0] != '+' && entry[0] != '-') {
        tth_diag_set(d, TTH_EINVAL, where, "feature '%s' in mattr must start with '+' or '-'", entry);
        tth_diag_hint(d, "write +%s to turn it on or -%s to turn it off", entry, entry);
        return TTH_EINVAL;
    }
    if (tth__llvm_feature_known(triple, entry + 1))
        return 0;
    if (strcmp(triple, MPROFILE_DEFAULT_TRIPLE) == 0)
        tth_diag_set(d, TTH_EUNKNOWN, where, "unknown Arm feature '%s'", entry + 1);
    else
        tth_diag_set(d, TTH_EUNKNOWN, where, "unknown feature '%s' for triple '%s'", entry + 1, triple);
    size_t n = 0;
    char **names = tth__llvm_names(triple, 1, &n);
    tth__hint_nearest(d, entry + 1, (const char *const *)names, n, "LLVM knows no feature near that name for this triple");
    tth__strv_free(names);
    return TTH_EUNKNOWN;
}

static int oom(tth_diag *d)
{
    return tth_diag_set(d, TTH_ENOMEM, NULL, "out of memory");
}

/* Append s (with a comma) to a malloc'd list. */
static int csv_add(char **csv, const char *s)
{
    size_t n = *csv ? strlen(*csv) : 0, m = strlen(s);
    char *p = realloc(*csv, n + m + 2);
    if (!p)
        return -1;
    if (n)
        p[n++] = ',';
    memcpy(p + n, s, m + 1);
    *csv = p;
    return 0;
}

/* mcpu=native: the host CPU, its triple when none is given, and its features beyond the CPU's
 * defaults in front of the user's mattr (the user's entries win: LLVM applies them last). */
static int resolve_native(json_t *t, tth_diag *d)
{
    const char *cpu = tth_host_cpu_name();
    if (!get_str(t, "mtriple") && json_object_set_new(t, "mtriple", json_string(tth_host_triple())) != 0)
        return oom(d);
    const char *triple = get_str(t, "mtriple");
    if (!tth__llvm_triple_known(triple))
        return unknown_triple(triple, d);
    if (!tth__llvm_cpu_known(triple, cpu)) {
        tth_diag_set(d, TTH_EUNSUPPORTED, "-mcpu=native", "the host CPU '%s' is not a CPU of triple '%s'", cpu, triple);
        tth_diag_hint(d, "name the CPU instead of 'native', or drop -mtriple to compile for this machine");
        return TTH_EUNSUPPORTED;
    }
    char *host_features = LLVMGetHostCPUFeatures();
    char *diff = tth__llvm_feature_diff(triple, cpu, host_features ? host_features : "");
    if (host_features)
        LLVMDisposeMessage(host_features);
    if (!diff)
        return oom(d);
    json_t *user = json_object_get(t, "mattr");
    json_t *mattr = json_array();
    char *s = diff;
    while (mattr && *s) {
        char *comma = strchr(s, ',');
        size_t n = comma ? (size_t)(comma - s) : strlen(s);
        int overridden = 0; /* the user's own entry for the same feature wins */
        for (size_t i = 0; i < json_array_size(user) && !overridden; i++) {
            const char *u = json_string_value(json_array_get(user, i));
            overridden = u && strlen(u) == n && strncmp(u + 1, s + 1, n - 1) == 0;
        }
        if (!overridden && json_array_append_new(mattr, json_stringn(s, n)) != 0) {
            json_decref(mattr);
            mattr = NULL;
        }
        s += n + (comma != NULL);
    }
    free(diff);
    if (!mattr)
        return oom(d);
    if (json_is_array(user) && json_array_extend(mattr, user) != 0) {
        json_decref(mattr);
        return oom(d);
    }
    if (json_array_size(mattr) == 0) {
        json_decref(mattr);
        json_object_del(t, "mattr");
    } else if (json_object_set_new(t, "mattr", mattr) != 0) {
        return oom(d);
    }
    return json_object_set_new(t, "mcpu", json_string(cpu)) == 0 ? 0 : oom(d);
}

typedef struct feature_map {
    const char *name; /* tth's name, in "features" */
    const char *llvm; /* LLVM's subtarget feature */
} feature_map;

static int set_features(json_t *t, const char *triple, const char *cpu, const char *fs,
                        const feature_map *map, size_t n, tth_diag *d)
{
    const char *names[16];
    int on[16];
    for (size_t i = 0; i < n; i++)
        names[i] = map[i].llvm;
    if (tth__llvm_features_enabled(triple, cpu, fs, names, n, on) != 0)
        return unknown_triple(triple, d);
    json_t *f = json_object_get(t, "features");
    for (size_t i = 0; i < n; i++)
        if (json_object_set_new(f, map[i].name, json_boolean(on[i])) != 0)
            return oom(d);
    return 0;
}

/* mattr as one LLVM feature string, each entry checked; skip = entries to leave to the caller. */
static int mattr_string(const json_t *t, const char *triple, int mprofile, char **out, int *nodsp, int *nomve,
                        tth_diag *d)
{
    *out = NULL;
    json_t *mattr = json_object_get(t, "mattr");
    size_t i;
    json_t *e;
    json_array_foreach(mattr, i, e) {
        const char *s = json_string_value(e);
        if (mprofile && strcmp(s, "+nodsp") == 0) {
            *nodsp = 1;
            continue;
        }
        if (mprofile && strcmp(s, "+nomve") == 0) {
            *nomve = 1;
            continue;
        }
        int rc = check_feature(triple, s, d);
        if (rc != 0) {
            free(*out);
            *out = NULL;
            return rc;
        }
        if (csv_add(out, s) != 0) {
            free(*out);
            *out = NULL;
            return oom(d);
        }
    }
    return 0;
}

/* Start the result: a copy with a fresh "features" object. */
static json_t *start(const json_t *target, tth_diag *d)
{
    if (!json_is_object(target)) {
        tth_diag_set(d, TTH_EINVAL, NULL, "target is not a JSON object");
        return NULL;
    }
    json_t *t = json_deep_copy(target);
    if (!t || json_object_set_new(t, "features", json_object()) != 0) {
        json_decref(t);
        oom(d);
        return NULL;
    }
    return t;
}

/* ---- the M-profile parser ---- */

static int mprofile(json_t *t, tth_diag *d)
{
    const char *mtriple = get_str(t, "mtriple"), *mcpu = get_str(t, "mcpu");
    char base[96] = "";
    int nodsp = 0, nomve = 0;
    if (mcpu) { /* "cortex-m55+nomve": the CPU, then options after '+' */
        const char *plus = strchr(mcpu, '+');
        size_t n = plus ? (size_t)(plus - mcpu) : strlen(mcpu);
        snprintf(base, sizeof base, "%.*s", (int)(n < sizeof base ? n : sizeof base - 1), mcpu);
        while (plus) {
            const char *next = strchr(plus + 1, '+');
            size_t m = next ? (size_t)(next - plus) : strlen(plus);
            if (m == 6 && strncmp(plus, "+nodsp", 6) == 0) {
                nodsp = 1;
            } else if (m == 6 && strncmp(plus, "+nomve", 6) == 0) {
                nomve = 1;
            } else {
                char where[160];
                snprintf(where, sizeof where, "-mcpu=%s", mcpu);
                tth_diag_set(d, TTH_EINVAL, where, "unknown CPU option '%.*s' in mcpu '%s'", (int)m, plus, mcpu);
                tth_diag_hint(d, "only +nodsp and +nomve may follow the CPU name; put LLVM features in -mattr");
                return TTH_EINVAL;
            }
            plus = next;
        }
        if (!mprofile_cpu(base)) {
            char where[160];
            snprintf(where, sizeof where, "-mcpu=%s", mcpu);
            tth_diag_set(d, TTH_EINVAL, where, "'%s' is not a Cortex-M CPU", base);
            tth_diag_hint(d, "kind '%s' runs on Arm Cortex-M: -mcpu=cortex-m55, cortex-m7, cortex-m4, ...",
                          get_str(t, "kind") ? get_str(t, "kind") : "?");
            return TTH_EINVAL;
        }
    }
    const char *triple = mtriple ? mtriple : MPROFILE_DEFAULT_TRIPLE;
    if (mtriple && triple_arch(mtriple) != ARCH_ARM) {
        char where[160];
        snprintf(where, sizeof where, "-mtriple=%s", mtriple);
        tth_diag_set(d, TTH_EINVAL, where, "a Cortex-M target needs an Arm triple, not '%s'", mtriple);
        tth_diag_hint(d, "use a thumb triple such as thumbv8.1m.main-none-eabi, or leave -mtriple out");
        return TTH_EINVAL;
    }
    if (!tth__llvm_triple_known(triple))
        return unknown_triple(triple, d);
    if (base[0] && !tth__llvm_cpu_known(triple, base))
        return unknown_cpu(triple, base, 1, "cortex-m", d);
    char *fs = NULL;
    int rc = mattr_string(t, triple, 1, &fs, &nodsp, &nomve, d);
    if (rc != 0)
        return rc;
    const char *names[] = {"dsp", "mve"};
    int on[2] = {0, 0};
    if (base[0] || mtriple)
        rc = tth__llvm_features_enabled(triple, base, fs ? fs : "", names, 2, on);
    free(fs);
    if (rc != 0)
        return unknown_triple(triple, d);
    int has_dsp = on[0] && !nodsp;
    int has_mve = on[1] && has_dsp && !nomve;
    json_t *f = json_object_get(t, "features");
    if (json_object_set_new(f, "has_dsp", json_boolean(has_dsp)) != 0 ||
        json_object_set_new(f, "has_mve", json_boolean(has_mve)) != 0)
        return oom(d);
    static const char *const keys[] = {"arm_cpu", "cpu"};
    return tth_target_keys_prepend(t, keys, 2) == 0 ? 0 : oom(d);
}

int tth_mprofile_target_parse(const json_t *target, json_t **out, tth_diag *diag)
{
    *out = NULL;
    json_t *t = start(target, diag);
    if (!t)
        return diag && diag->code ? diag->code : TTH_ENOMEM;
    int rc = mprofile(t, diag);
    if (rc != 0) {
        json_decref(t);
        return rc;
    }
    *out = t;
    return 0;
}

/* ---- the CPU parser ---- */

static const feature_map arm_features[] = {
    {"has_asimd", "neon"},      {"has_sve", "sve"},   {"has_dotprod", "dotprod"},
    {"has_matmul_i8", "i8mm"}, {"has_fp16_simd", "fullfp16"}, {"has_sme", "sme"},
};
static const feature_map x86_features[] = {
    {"has_avx2", "avx2"},
    {"has_avx512", "avx512f"},
    {"has_avx512vnni", "avx512vnni"},
    {"has_avxvnni", "avxvnni"},
};

static int cpu(json_t *t, tth_diag *d)
{
    const char *mcpu = get_str(t, "mcpu");
    if (mcpu && strcmp(mcpu, "native") == 0) {
        int rc = resolve_native(t, d);
        if (rc != 0)
            return rc;
        mcpu = get_str(t, "mcpu");
    }
    const char *mtriple = get_str(t, "mtriple");
    if (mprofile_cpu(mcpu) || (!mcpu && mprofile_triple(mtriple)))
        return mprofile(t, d);
    const char *triple = mtriple ? mtriple : tth_host_triple();
    if (!tth__llvm_triple_known(triple))
        return unknown_triple(triple, d);
    if (mcpu && !tth__llvm_cpu_known(triple, mcpu))
        return unknown_cpu(triple, mcpu, mtriple != NULL, NULL, d);
    char *fs = NULL;
    int nodsp = 0, nomve = 0;
    int rc = mattr_string(t, triple, 0, &fs, &nodsp, &nomve, d);
    if (rc != 0)
        return rc;
    json_t *f = json_object_get(t, "features");
    const char *key = NULL;
    switch (triple_arch(triple)) {
    case ARCH_AARCH64:
    case ARCH_ARM:
        key = "arm_cpu";
        if (json_object_set_new(f, "is_aarch64", json_boolean(triple_arch(triple) == ARCH_AARCH64)) != 0) {
            free(fs);
            return oom(d);
        }
        rc = set_features(t, triple, mcpu ? mcpu : "", fs ? fs : "", arm_features,
                          sizeof arm_features / sizeof arm_features[0], d);
        break;
    case ARCH_X86:
        key = "x86_64";
        rc = set_features(t, triple, mcpu ? mcpu : "", fs ? fs : "", x86_features,
                          sizeof x86_features / sizeof x86_features[0], d);
        break;
    case ARCH_OTHER:
        json_object_del(t, "features");
        break;
    }
    free(fs);
    if (rc != 0)
        return rc;
    if (key && tth_target_keys_prepend(t, &key, 1) != 0)
        return oom(d);
    return 0;
}

int tth_cpu_target_parse(const json_t *target, json_t **out, tth_diag *diag)
{
    *out = NULL;
    json_t *t = start(target, diag);
    if (!t)
        return diag && diag->code ? diag->code : TTH_ENOMEM;
    int rc = cpu(t, diag);
    if (rc != 0) {
        json_decref(t);
        return rc;
    }
    *out = t;
    return 0;
}
