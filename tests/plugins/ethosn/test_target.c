/* The ethos-n kind: N78 only, its real configurations, every error. */
#include "common.h"

TestSuite(ethosn, .init = load_plugins, .fini = unload_plugins);

static json_int_t num(const json_t *t, const char *k)
{
    return json_integer_value(json_object_get(t, k));
}

Test(ethosn, defaults)
{
    json_t *t = ok("ethos-n");
    cr_assert_str_eq(str(t, "variant"), "n78");
    cr_assert_eq(num(t, "tops"), 1);
    cr_assert_eq(num(t, "ple_ratio"), 2);
    cr_assert_eq(num(t, "sram_size"), 448);
    cr_assert_str_eq(keys_of(t), "ethos-n");
    json_decref(t);
}

Test(ethosn, sram_follows_tops)
{
    static const int sram[][2] = {{1, 448}, {2, 768}, {4, 1024}, {8, 2048}};
    for (size_t i = 0; i < 4; i++) {
        char text[64];
        snprintf(text, sizeof text, "ethos-n -tops=%d", sram[i][0]);
        json_t *t = ok(text);
        cr_assert_eq(num(t, "sram_size"), sram[i][1], "%s", text);
        assert_round_trip(t, text);
        json_decref(t);
    }
    json_t *t = ok("ethos-n -tops=8 -sram_size=4096");
    cr_assert_eq(num(t, "sram_size"), 4096);
    json_decref(t);
    t = ok("ethos-n -tops=4 -ple_ratio=4");
    cr_assert_eq(num(t, "ple_ratio"), 4);
    json_decref(t);
}

Test(ethosn, configuration_errors)
{
    fails("ethos-n -tops=3", TTH_EINVAL, "the Ethos-N78 comes in 1, 2, 4 or 8 TOPS, not 3", "-tops=3",
          "use -tops=1, 2, 4 or 8");
    fails("ethos-n -tops=8 -ple_ratio=4", TTH_EINVAL, "the 8 TOPS Ethos-N78 has PLE ratio 2 only, not 4",
          "-ple_ratio=4", "use -ple_ratio=2");
    fails("ethos-n -tops=4 -ple_ratio=3", TTH_EINVAL, "the 4 TOPS Ethos-N78 has PLE ratio 2 or 4, not 3",
          "-ple_ratio=3", "use -ple_ratio=2 or -ple_ratio=4");
    fails("ethos-n -sram_size=500", TTH_EINVAL, "sram_size 500 KiB is not an Ethos-N78 SRAM size", "-sram_size=500",
          "use 384, 448, 512, 768, 1024, 1792, 2048 or 4096 (KiB), or leave it out for 448");
    fails("ethos-n -tops=two", TTH_ETYPE, "attribute 'tops' of kind 'ethos-n' takes an integer, not 'two'", NULL, NULL);
}

Test(ethosn, only_the_n78)
{
    const char *old[] = {"n37", "n57", "n77"};
    for (size_t i = 0; i < 3; i++) {
        char text[64], msg[128], where[64];
        snprintf(text, sizeof text, "ethos-n -variant=%s", old[i]);
        snprintf(msg, sizeof msg, "Ethos-N variant '%s' is not supported; tth supports the Ethos-N78 only", old[i]);
        snprintf(where, sizeof where, "-variant=%s", old[i]);
        fails(text, TTH_EUNSUPPORTED, msg, where, "use -variant=n78 (the Ethos-N driver stack supports only the N78)");
    }
    fails("ethos-n -variant=N78", TTH_EUNKNOWN, "unknown Ethos-N variant 'N78'", "-variant=N78", "did you mean 'n78'?");
    fails("ethos-n -variant=u55", TTH_EUNKNOWN, "unknown Ethos-N variant 'u55'", NULL, "the supported variant is 'n78'");
}

Test(ethosn, explicit_host)
{
    json_t *t = ok("ethos-n -tops=2 -host='llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a78'");
    json_t *h = json_object_get(t, "host");
    cr_assert_str_eq(str(h, "mcpu"), "cortex-a78");
    cr_assert_str_eq(keys_of(h), "arm_cpu,cpu");
    assert_round_trip(t, "ethos-n with host");
    json_decref(t);
}
