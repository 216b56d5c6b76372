/* Tags: at least 20 real ones, aliases map to the canonical name, tag plus overrides keeps the
 * tag, and the facts behind each tag (docs/targets.md, "Tags") come out of the parsers. */
#include "common.h"

TestSuite(tags, .init = load_plugins, .fini = unload_plugins);

static int feature(const json_t *t, const char *name)
{
    return tth_target_has_feature(t, name);
}

Test(tags, at_least_twenty_tags_each_of_its_plugins_kind)
{
    size_t n = 0;
    for (size_t i = 0; i < tth_registry_count(reg); i++) {
        const tth_plugin *p = tth_registry_plugin(reg, i);
        for (size_t k = 0; p->desc->tags && p->desc->tags[k]; k++) {
            const tth_tag_def *tag = p->desc->tags[k];
            json_t *cfg = json_loads(tag->config_json, 0, NULL);
            cr_assert_str_eq(str(cfg, "kind"), p->desc->kind, "tag %s", tag->name);
            cr_assert_not_null(tag->doc);
            json_decref(cfg);
            n++;
        }
    }
    cr_assert_geq(n, 20);
}

Test(tags, every_tag_and_alias_parses_to_the_canonical_tag)
{
    for (size_t i = 0; i < tth_registry_count(reg); i++) {
        const tth_plugin *p = tth_registry_plugin(reg, i);
        for (size_t k = 0; p->desc->tags && p->desc->tags[k]; k++) {
            const tth_tag_def *tag = p->desc->tags[k];
            json_t *t = ok(tag->name);
            cr_assert_str_eq(str(t, "tag"), tag->name);
            cr_assert_str_eq(str(t, "kind"), p->desc->kind);
            for (size_t a = 0; tag->aliases && tag->aliases[a]; a++) {
                json_t *b = ok(tag->aliases[a]);
                cr_assert(json_equal(t, b), "alias %s of %s", tag->aliases[a], tag->name);
                json_decref(b);
                char js[256];
                snprintf(js, sizeof js, "{\"tag\": \"%s\"}", tag->aliases[a]);
                b = ok(js);
                cr_assert(json_equal(t, b), "JSON alias %s", tag->aliases[a]);
                json_decref(b);
            }
            json_decref(t);
        }
    }
}

Test(tags, tag_plus_overrides_keeps_the_tag)
{
    json_t *t = ok("arm/cortex-m55 -mattr=+nomve");
    cr_assert_str_eq(str(t, "tag"), "arm/cortex-m55");
    cr_assert_str_eq(str(t, "mcpu"), "cortex-m55");
    cr_assert(feature(t, "has_dsp"));
    cr_assert_not(feature(t, "has_mve"));
    assert_round_trip(t, "tag + override");
    json_decref(t);
    /* through an alias, the canonical name is kept */
    t = ok("arm/corstone-300 -mattr=+nodsp");
    cr_assert_str_eq(str(t, "tag"), "arm/cortex-m55");
    cr_assert_not(feature(t, "has_dsp"));
    cr_assert_not(feature(t, "has_mve"));
    json_decref(t);
    /* an override replaces the tag's value */
    t = ok("raspberry-pi/4b -num-cores=2 -mattr=+neon,+crc");
    cr_assert_eq(json_integer_value(json_object_get(t, "num-cores")), 2);
    cr_assert_eq(json_array_size(json_object_get(t, "mattr")), 2);
    cr_assert_str_eq(str(t, "tag"), "raspberry-pi/4b-aarch64");
    json_decref(t);
    /* a kind plus -tag is the same as the tag */
    json_t *a = ok("c -tag=arm/cortex-m4"), *b = ok("arm/cortex-m4");
    cr_assert(json_equal(a, b));
    json_decref(a);
    json_decref(b);
    a = ok("{\"kind\": \"llvm\", \"tag\": \"rpi5\", \"num-cores\": 2}");
    cr_assert_str_eq(str(a, "tag"), "raspberry-pi/5");
    cr_assert_eq(json_integer_value(json_object_get(a, "num-cores")), 2);
    json_decref(a);
}

Test(tags, tag_in_a_composite)
{
    json_t *t = ok("ethos-n,arm/cortex-m55");
    json_t *c = json_array_get(json_object_get(t, "targets"), 1);
    cr_assert_str_eq(str(c, "tag"), "arm/cortex-m55");
    cr_assert(json_equal(json_object_get(t, "host"), c));
    assert_round_trip(t, "tag in composite");
    json_decref(t);
}

Test(tags, errors)
{
    fails("arm/cortex-m5", TTH_EUNKNOWN, "unknown tag 'arm/cortex-m5'", "arm/cortex-m5",
          "did you mean one of 'arm/cortex-m3', 'arm/cortex-m4', 'arm/cortex-m55'?");
    fails("{\"tag\": \"aws/c9g\"}", TTH_EUNKNOWN, "unknown tag 'aws/c9g'", "aws/c9g",
          "did you mean one of 'aws/c6g', 'aws/c7g', 'aws/c8g'?");
    fails("nvidia/h100", TTH_EUNKNOWN, "unknown tag 'nvidia/h100'", "nvidia/h100", "'tthctl tags' lists the tags");
    fails("{\"tag\": \"nvidia/h100\"}", TTH_EUNKNOWN, "unknown tag 'nvidia/h100'", "nvidia/h100",
          "'tthctl tags' lists the tags");
    fails("{\"kind\": \"llvm\", \"tag\": \"arm/cortex-m55\"}", TTH_EINVAL,
          "tag 'arm/cortex-m55' is a target of kind 'c', not 'llvm'", "arm/cortex-m55",
          "drop the kind or use a tag of kind 'llvm'");
    fails("llvm -tag=arm/corstone-300", TTH_EINVAL, "tag 'arm/cortex-m55' is a target of kind 'c', not 'llvm'", NULL, NULL);
}

/* The boards and instances of docs/targets.md's tag table. */
Test(tags, facts_of_application_processors)
{
    static const struct {
        const char *tag, *fields, *keys, *feats;
    } boards[] = {
        {"raspberry-pi/4b-aarch64", "mtriple=aarch64-linux-gnu mcpu=cortex-a72 num-cores=4", "arm_cpu,cpu",
         "+is_aarch64 +has_asimd -has_dotprod"},
        {"raspberry-pi/5", "mcpu=cortex-a76", NULL, "+has_dotprod +has_fp16_simd -has_sve"},
        {"aws/graviton2", "tag=aws/c6g mcpu=neoverse-n1", NULL, "+has_dotprod -has_sve"},
        {"aws/c7g", "mcpu=neoverse-v1", NULL, "+has_sve +has_matmul_i8"},
        {"aws/graviton4", "mcpu=neoverse-v2", NULL, "+has_sve +has_matmul_i8"},
        /* Skylake-SP has no VNNI; Cascade Lake has */
        {"aws/c5", "mtriple=x86_64-linux-gnu", "x86_64,cpu", "+has_avx2 +has_avx512 -has_avx512vnni"},
        {"aws/c6i", "mcpu=icelake-server", NULL, "+has_avx512 +has_avx512vnni"},
        {"apple/m1", "mtriple=arm64-apple-macos", "arm_cpu,cpu", "+is_aarch64 +has_dotprod"},
    };
    for (size_t i = 0; i < sizeof boards / sizeof boards[0]; i++)
        parses_as(boards[i].tag, boards[i].fields, boards[i].keys, boards[i].feats);
}

Test(tags, facts_of_microcontrollers)
{
    static const struct {
        const char *tag, *triple, *cpu;
        int dsp, mve;
    } m[] = {
        {"arm/cortex-m0plus", "thumbv6m-none-eabi", "cortex-m0plus", 0, 0},
        {"arm/cortex-m3", "thumbv7m-none-eabi", "cortex-m3", 0, 0},
        {"arm/cortex-m4", "thumbv7em-none-eabi", "cortex-m4", 1, 0},
        {"arm/cortex-m7", "thumbv7em-none-eabi", "cortex-m7", 1, 0},
        {"arm/cortex-m33", "thumbv8m.main-none-eabi", "cortex-m33", 1, 0},
        {"arm/cortex-m55", "thumbv8.1m.main-none-eabi", "cortex-m55", 1, 1},
        {"arm/cortex-m85", "thumbv8.1m.main-none-eabi", "cortex-m85", 1, 1},
        {"stm32/nucleo-f746zg", "thumbv7em-none-eabihf", "cortex-m7", 1, 0},
        {"stm32/nucleo-h743zi", "thumbv7em-none-eabihf", "cortex-m7", 1, 0},
        {"stm32/nucleo-l4r5zi", "thumbv7em-none-eabihf", "cortex-m4", 1, 0},
        {"stm32/nucleo-l552ze-q", "thumbv8m.main-none-eabihf", "cortex-m33", 1, 0},
        {"nordic/nrf52840", "thumbv7em-none-eabihf", "cortex-m4", 1, 0},
        {"nordic/nrf5340", "thumbv8m.main-none-eabihf", "cortex-m33", 1, 0},
        {"arm/mps3-an547", "thumbv8.1m.main-none-eabi", "cortex-m55", 1, 1},
    };
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        json_t *t = ok(m[i].tag);
        cr_assert_str_eq(str(t, "kind"), "c");
        cr_assert_str_eq(str(t, "mtriple"), m[i].triple, "%s", m[i].tag);
        cr_assert_str_eq(str(t, "mcpu"), m[i].cpu, "%s", m[i].tag);
        cr_assert_eq(feature(t, "has_dsp"), m[i].dsp, "%s", m[i].tag);
        cr_assert_eq(feature(t, "has_mve"), m[i].mve, "%s", m[i].tag);
        cr_assert_str_eq(keys_of(t), "arm_cpu,cpu");
        json_decref(t);
    }
}

Test(tags, facts_of_ethos_n78)
{
    static const struct {
        const char *tag;
        int tops, ple, sram;
    } e[] = {
        {"arm/ethos-n78-1tops", 1, 2, 448},      {"arm/ethos-n78-2tops", 2, 2, 768},
        {"arm/ethos-n78-4tops", 4, 2, 1024},     {"arm/ethos-n78-4tops-4ple", 4, 4, 1024},
        {"arm/ethos-n78-8tops", 8, 2, 2048},     {"ethos-n78/8tops", 8, 2, 2048},
    };
    for (size_t i = 0; i < sizeof e / sizeof e[0]; i++) {
        json_t *t = ok(e[i].tag);
        cr_assert_str_eq(str(t, "kind"), "ethos-n");
        cr_assert_str_eq(str(t, "variant"), "n78");
        cr_assert_eq(json_integer_value(json_object_get(t, "tops")), e[i].tops);
        cr_assert_eq(json_integer_value(json_object_get(t, "ple_ratio")), e[i].ple);
        cr_assert_eq(json_integer_value(json_object_get(t, "sram_size")), e[i].sram);
        cr_assert_not_null(json_object_get(t, "host"), "an NPU target gets a host");
        json_decref(t);
    }
}
