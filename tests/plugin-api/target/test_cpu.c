/* The CPU parser (llvm, c) and the M-profile parser (cmsis-nn, Cortex-M): keys, features from
 * LLVM's view, native, and every error. */
#include <unistd.h>
#include "common.h"

TestSuite(cpu, .init = load_plugins, .fini = unload_plugins);

static int feat(const char *text, const char *name)
{
    json_t *t = ok(text);
    int v = tth_target_has_feature(t, name);
    json_decref(t);
    return v;
}

Test(cpu, aarch64_features_follow_llvm_and_facts)
{
    const char *a = "llvm -mtriple=aarch64-linux-gnu";
    cr_assert(feat(a, "is_aarch64"));
    cr_assert(feat(a, "has_asimd"));
    cr_assert_not(feat(a, "has_dotprod"));
    cr_assert_not(feat("llvm -mtriple=aarch64-linux-gnu -mattr=+v8.2a", "has_dotprod"));
    cr_assert(feat("llvm -mtriple=aarch64-linux-gnu -mattr=+v8.2a,+dotprod", "has_dotprod"));
    cr_assert(feat("llvm -mtriple=aarch64-linux-gnu -mattr=+v8.4a", "has_dotprod"));
    cr_assert_not(feat("llvm -mtriple=aarch64-linux-gnu -mattr=+v8.4a", "has_matmul_i8"));
    cr_assert(feat("llvm -mtriple=aarch64-linux-gnu -mattr=+v8.6a", "has_matmul_i8"));
    cr_assert(feat("llvm -mtriple=aarch64-linux-gnu -mattr=+v8.2a,+fullfp16", "has_fp16_simd"));
    cr_assert(feat("llvm -mtriple=aarch64-linux-gnu -mattr=+sve", "has_sve"));
    cr_assert(feat("llvm -mtriple=aarch64-linux-gnu -mattr=+sme", "has_sme"));
    cr_assert_not(feat("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a76 -mattr=-dotprod", "has_dotprod"));
    cr_assert(feat("llvm -mtriple=arm64-apple-macos", "is_aarch64"));
    parses_as(a, NULL, "arm_cpu,cpu", NULL);
}

Test(cpu, arm32_a_profile)
{
    parses_as("llvm -mtriple=armv7a-linux-gnueabihf -mcpu=cortex-a53", NULL, "arm_cpu,cpu",
              "-is_aarch64 +has_asimd -has_sve");
    parses_as("c -mtriple=armv8a-linux-gnueabihf -mcpu=cortex-a72", NULL, "arm_cpu,cpu", NULL);
}

Test(cpu, x86)
{
    parses_as("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake", NULL, "x86_64,cpu", "+has_avx2 -has_avx512");
    cr_assert(feat("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512", "has_avx512"));
    cr_assert_not(feat("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512 -mattr=-avx512f", "has_avx512"));
    cr_assert(feat("llvm -mtriple=x86_64-linux-gnu -mattr=+avx2", "has_avx2"));
}

Test(cpu, other_architectures_get_no_derived_key)
{
    json_t *t = ok("llvm -mtriple=riscv64-linux-gnu");
    cr_assert_str_eq(keys_of(t), "cpu");
    cr_assert_null(json_object_get(t, "features"));
    json_decref(t);
}

Test(cpu, plain_llvm_is_this_machine_and_generic_is_portable)
{
    /* plain llvm = -mcpu=native (the host's triple, CPU and features in the canonical target) and
     * this machine's cores as num-cores, unless given */
    json_t *t = ok("llvm"), *n = ok("llvm -mcpu=native");
    cr_assert_str_eq(str(t, "mtriple"), tth_host_triple());
    cr_assert_str_eq(str(t, "mcpu"), tth_host_cpu_name());
    cr_assert_eq(json_integer_value(json_object_get(t, "num-cores")), sysconf(_SC_NPROCESSORS_ONLN));
    cr_assert_null(json_object_get(n, "num-cores"));
    json_object_del(t, "num-cores");
    cr_assert(json_equal(t, n), "plain llvm and -mcpu=native differ");
    json_decref(t);
    json_decref(n);
    t = ok("llvm -num-cores=3");
    cr_assert_eq(json_integer_value(json_object_get(t, "num-cores")), 3);
    json_decref(t);
    /* -mcpu=generic stays generic */
    t = ok("llvm -mcpu=generic");
    cr_assert_str_eq(str(t, "mcpu"), "generic");
    cr_assert_null(json_object_get(t, "mattr"));
    json_decref(t);
    /* with an mcpu the triple stays as given (absent): LLVM compiles for the host triple */
    char text[128];
    snprintf(text, sizeof text, "llvm -mcpu=%s", tth_host_cpu_name());
    t = ok(text);
    cr_assert_null(json_object_get(t, "mtriple"));
    json_decref(t);
    /* the c kind without CPU or triple is portable C: no derived keys */
    t = ok("c");
    cr_assert_str_eq(keys_of(t), "cpu");
    cr_assert_null(json_object_get(t, "mtriple"));
    json_decref(t);
}

Test(cpu, native_resolves_to_the_host)
{
    json_t *t = ok("llvm -mcpu=native");
    cr_assert_str_eq(str(t, "mcpu"), tth_host_cpu_name());
    cr_assert_str_eq(str(t, "mtriple"), tth_host_triple());
    assert_round_trip(t, "native");
    json_decref(t);
    t = ok("llvm -mcpu=native -mattr=-avx2");
    json_t *m = json_object_get(t, "mattr");
    cr_assert_str_eq(json_string_value(json_array_get(m, json_array_size(m) - 1)), "-avx2",
                     "the user's entries come last, so they win");
    json_decref(t);
    t = ok("c -mcpu=native");
    cr_assert_str_eq(str(t, "mcpu"), tth_host_cpu_name());
    json_decref(t);
}

Test(cpu, unknown_cpu_names_the_nearest)
{
    fails("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a99", TTH_EUNKNOWN,
          "unknown CPU 'cortex-a99' for triple 'aarch64-linux-gnu'", "-mcpu=cortex-a99",
          "did you mean one of 'cortex-a34', 'cortex-a35', 'cortex-a53'?");
    fails("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n9", TTH_EUNKNOWN,
          "unknown CPU 'neoverse-n9' for triple 'aarch64-linux-gnu'", NULL,
          "did you mean one of 'neoverse-n1', 'neoverse-n2', 'neoverse-n3'?");
    fails("llvm -mtriple=aarch64-linux-gnu -mcpu=zzzzzzzzzzzz", TTH_EUNKNOWN,
          "unknown CPU 'zzzzzzzzzzzz' for triple 'aarch64-linux-gnu'", NULL,
          "LLVM knows no CPU near that name for this triple");
}

Test(cpu, cpu_of_another_architecture_names_the_triple)
{
    int arm_host = strncmp(tth_host_triple(), "aarch64", 7) == 0;
    const char *cpu = arm_host ? "skylake" : "cortex-a72";
    const char *triple = arm_host ? "x86_64-linux-gnu" : "aarch64-linux-gnu";
    char text[64], msg[160], hint[160];
    snprintf(text, sizeof text, "llvm -mcpu=%s", cpu);
    snprintf(msg, sizeof msg, "unknown CPU '%s' for triple '%s'", cpu, tth_host_triple());
    snprintf(hint, sizeof hint, "'%s' is a CPU of %s: add -mtriple=%s", cpu, triple, triple);
    fails(text, TTH_EUNKNOWN, msg, NULL, hint);
}

Test(cpu, unknown_triple)
{
    fails("llvm -mtriple=aarch65-linux-gnu", TTH_EUNKNOWN, "LLVM has no target for triple 'aarch65-linux-gnu'",
          "-mtriple=aarch65-linux-gnu",
          "did you mean one of 'aarch64-linux-gnu', 'riscv64-linux-gnu'?");
    fails("c -mtriple=banana", TTH_EUNKNOWN, "LLVM has no target for triple 'banana'", "-mtriple=banana",
          "a triple names arch-vendor-os, e.g. aarch64-linux-gnu or thumbv7em-none-eabi");
}

Test(cpu, mattr_errors)
{
    fails("llvm -mtriple=aarch64-linux-gnu -mattr=neon", TTH_EINVAL, "feature 'neon' in mattr must start with '+' or '-'",
          "-mattr=neon", "write +neon to turn it on or -neon to turn it off");
    fails("llvm -mtriple=aarch64-linux-gnu -mattr=+dotprd", TTH_EUNKNOWN,
          "unknown feature 'dotprd' for triple 'aarch64-linux-gnu'", "-mattr=+dotprd", "did you mean 'dotprod'?");
    fails("llvm -mtriple=aarch64-linux-gnu -mattr=+nomve", TTH_EUNKNOWN,
          "unknown feature 'nomve' for triple 'aarch64-linux-gnu'", NULL, NULL);
}

Test(cpu, llvm_kind_rules)
{
    fails("llvm -mfloat-abi=hrad", TTH_EINVAL, "mfloat-abi must be soft, softfp or hard, not 'hrad'",
          "-mfloat-abi=hrad", "did you mean 'hard'?");
    fails("llvm -opt-level=4", TTH_EINVAL, "opt-level must be 0, 1, 2 or 3, not 4", "-opt-level=4", NULL);
    fails("llvm -num-cores=0", TTH_EINVAL, "num-cores must be at least 1, not 0", "-num-cores=0", NULL);
    json_t *t = ok("llvm -mtriple=armv7a-linux-gnueabihf -mfloat-abi=hard -opt-level=0");
    cr_assert_str_eq(str(t, "mfloat-abi"), "hard");
    json_decref(t);
}

Test(cpu, c_kind_rules)
{
    fails("c -workspace-byte-alignment=12", TTH_EINVAL, "workspace-byte-alignment must be a power of two, not 12",
          "-workspace-byte-alignment=12", "use 4, 8, 16, ...");
    fails("c -constants-byte-alignment=0", TTH_EINVAL, "constants-byte-alignment must be a power of two, not 0", NULL, NULL);
    json_t *t = ok("c");
    cr_assert_eq(json_integer_value(json_object_get(t, "workspace-byte-alignment")), 16);
    cr_assert_eq(json_integer_value(json_object_get(t, "constants-byte-alignment")), 16);
    json_decref(t);
}

/* The M-profile rules of docs/targets.md (has_dsp, has_mve). */
Test(cpu, mprofile_dsp_and_mve)
{
    static const struct {
        const char *cpu;
        int dsp, mve;
    } m[] = {{"cortex-m0", 0, 0},  {"cortex-m0plus", 0, 0}, {"cortex-m3", 0, 0},  {"cortex-m4", 1, 0},
             {"cortex-m7", 1, 0},  {"cortex-m33", 1, 0},    {"cortex-m35p", 1, 0}, {"cortex-m55", 1, 1},
             {"cortex-m85", 1, 1}};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        char text[96], feats[32];
        snprintf(text, sizeof text, "cmsis-nn -mcpu=%s", m[i].cpu);
        snprintf(feats, sizeof feats, "%chas_dsp %chas_mve", "-+"[m[i].dsp], "-+"[m[i].mve]);
        parses_as(text, NULL, "arm_cpu,cpu", feats);
        /* the c and llvm kinds take the M-profile parser for a Cortex-M CPU */
        snprintf(text, sizeof text, "c -mcpu=%s", m[i].cpu);
        cr_assert_eq(feat(text, "has_mve"), m[i].mve, "%s", text);
        snprintf(text, sizeof text, "llvm -mtriple=thumbv7em-none-eabi -mcpu=%s", m[i].cpu);
        cr_assert_eq(feat(text, "has_dsp"), m[i].dsp, "%s", text);
    }
}

Test(cpu, nodsp_and_nomve)
{
    cr_assert(feat("cmsis-nn -mcpu=cortex-m55+nomve", "has_dsp"));
    cr_assert_not(feat("cmsis-nn -mcpu=cortex-m55+nomve", "has_mve"));
    cr_assert_not(feat("cmsis-nn -mcpu=cortex-m55+nodsp", "has_dsp"));
    cr_assert_not(feat("cmsis-nn -mcpu=cortex-m55+nodsp", "has_mve"));
    cr_assert_not(feat("cmsis-nn -mcpu=cortex-m55 -mattr=+nomve", "has_mve"));
    cr_assert_not(feat("cmsis-nn -mcpu=cortex-m55 -mattr=+nodsp", "has_mve"), "+nodsp also turns MVE off");
    cr_assert_not(feat("cmsis-nn -mcpu=cortex-m4 -mattr=+nodsp", "has_dsp"));
    cr_assert_not(feat("cmsis-nn -mcpu=cortex-m85+nodsp+nomve", "has_dsp"));
    cr_assert_not(feat("c -mcpu=cortex-m55 -mattr=-mve", "has_mve"), "LLVM's own -mve works too");
    cr_assert(feat("c -mcpu=cortex-m55 -mattr=-mve", "has_dsp"));
}

Test(cpu, mprofile_without_cpu)
{
    parses_as("cmsis-nn", NULL, "arm_cpu,cpu", "-has_dsp -has_mve");
    cr_assert(feat("c -mtriple=thumbv7em-none-eabi", "has_dsp"), "the triple's architecture has DSP");
    cr_assert_not(feat("c -mtriple=thumbv6m-none-eabi", "has_dsp"));
}

Test(cpu, mprofile_errors)
{
    fails("cmsis-nn -mcpu=cortex-a72", TTH_EINVAL, "'cortex-a72' is not a Cortex-M CPU", "-mcpu=cortex-a72",
          "kind 'cmsis-nn' runs on Arm Cortex-M: -mcpu=cortex-m55, cortex-m7, cortex-m4, ...");
    fails("cmsis-nn -mcpu=cortex-m56", TTH_EUNKNOWN, "unknown Cortex-M CPU 'cortex-m56'",
          "-mcpu=cortex-m56", "did you mean one of 'cortex-m52', 'cortex-m55', 'cortex-m0'?");
    fails("cmsis-nn -mcpu=cortex-m55+foo", TTH_EINVAL, "unknown CPU option '+foo' in mcpu 'cortex-m55+foo'",
          "-mcpu=cortex-m55+foo", "only +nodsp and +nomve may follow the CPU name; put LLVM features in -mattr");
    fails("c -mtriple=aarch64-linux-gnu -mcpu=cortex-m4", TTH_EINVAL,
          "a Cortex-M target needs an Arm triple, not 'aarch64-linux-gnu'", "-mtriple=aarch64-linux-gnu",
          "use a thumb triple such as thumbv8.1m.main-none-eabi, or leave -mtriple out");
    fails("cmsis-nn -mcpu=cortex-m4 -mattr=+mvee", TTH_EUNKNOWN, "unknown Arm feature 'mvee'",
          "-mattr=+mvee", "did you mean 'mve'?");
    fails("c -mtriple=thumbv7em-none-eabi -mcpu=cortex-m44", TTH_EUNKNOWN,
          "unknown CPU 'cortex-m44' for triple 'thumbv7em-none-eabi'", NULL, NULL);
}
