/* Canonical export: parse(export(t)) == t for every shipped tag and for the corpus
 * (tests/plugin-api/target/corpus.txt, 200+ targets); deterministic sorted JSON; stable hash;
 * the string form carries the host and the tag. */
#include "common.h"

TestSuite(roundtrip, .init = load_plugins, .fini = unload_plugins, .timeout = 300);

Test(roundtrip, every_shipped_tag)
{
    size_t n = 0;
    for (size_t i = 0; i < tth_registry_count(reg); i++) {
        const tth_plugin *p = tth_registry_plugin(reg, i);
        for (size_t k = 0; p->desc->tags && p->desc->tags[k]; k++) {
            json_t *t = ok(p->desc->tags[k]->name);
            assert_round_trip(t, p->desc->tags[k]->name);
            char *s = tth_target_to_string(t);
            char want[128];
            snprintf(want, sizeof want, " -tag=%s", p->desc->tags[k]->name);
            cr_assert_not_null(strstr(s, want), "the string form keeps the tag: %s", s);
            free(s);
            json_decref(t);
            n++;
        }
    }
    cr_assert_geq(n, 20);
}

Test(roundtrip, corpus)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/plugin-api/target/corpus.txt", getenv("TTH_SOURCE_ROOT"));
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot open %s", path);
    char line[1024];
    size_t n = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (!line[0] || line[0] == '#')
            continue;
        json_t *t = ok(line);
        assert_round_trip(t, line);
        json_decref(t);
        n++;
    }
    fclose(f);
    cr_assert_geq(n, 200, "the corpus has %zu targets", n);
}

Test(roundtrip, canonical_json_is_sorted_compact_and_golden)
{
    json_t *t = ok("arm/cortex-m55");
    char *s = tth_target_to_json_text(t);
    cr_assert_str_eq(s, "{\"constants-byte-alignment\":16,\"features\":{\"has_dsp\":true,\"has_mve\":true},"
                        "\"keys\":[\"arm_cpu\",\"cpu\"],\"kind\":\"c\",\"mcpu\":\"cortex-m55\","
                        "\"mtriple\":\"thumbv8.1m.main-none-eabi\",\"tag\":\"arm/cortex-m55\","
                        "\"workspace-byte-alignment\":16}");
    char *str_form = tth_target_to_string(t);
    cr_assert_str_eq(str_form, "c -constants-byte-alignment=16 -keys=arm_cpu,cpu -mcpu=cortex-m55 "
                               "-mtriple=thumbv8.1m.main-none-eabi -tag=arm/cortex-m55 -workspace-byte-alignment=16");
    free(s);
    free(str_form);
    json_decref(t);
}

Test(roundtrip, stable_hash)
{
    json_t *a = ok("arm/cortex-m55");
    /* pinned: a change here changes every cache key, so it must be deliberate */
    cr_assert_eq(tth_target_hash(a), UINT64_C(0x09291bb58a3bdfca), "hash is 0x%016llx",
                 (unsigned long long)tth_target_hash(a));
    json_t *b = ok("{\"kind\":\"c\",\"attrs\":{\"mcpu\":\"cortex-m55\",\"mtriple\":\"thumbv8.1m.main-none-eabi\"},"
                   "\"tag\":\"arm/corstone-300\"}");
    cr_assert_eq(tth_target_hash(a), tth_target_hash(b), "the same target written two ways");
    json_t *c = ok("arm/cortex-m55 -mattr=+nomve");
    cr_assert_neq(tth_target_hash(a), tth_target_hash(c));
    cr_assert_eq(tth_target_hash(a), tth_target_hash(a));
    cr_assert_eq(tth_target_hash(NULL), 0);
    json_decref(a);
    json_decref(b);
    json_decref(c);
}

Test(roundtrip, string_form_carries_host_and_tag)
{
    json_t *t = ok("arm/ethos-n78-4tops");
    char *s = tth_target_to_string(t);
    cr_assert_not_null(strstr(s, " -tag=arm/ethos-n78-4tops"), "%s", s);
    cr_assert_not_null(strstr(s, " -host='llvm "), "%s", s);
    free(s);
    json_decref(t);
    t = ok("ethos-n,cmsis-nn,c -mcpu=cortex-m55");
    s = tth_target_to_string(t);
    cr_assert(strncmp(s, "composite -host='c ", 19) == 0, "%s", s);
    cr_assert_not_null(strstr(s, " -targets='ethos-n "), "%s", s);
    free(s);
    json_decref(t);
}

Test(roundtrip, non_targets)
{
    cr_assert_null(tth_target_to_string(NULL));
    json_t *n = json_integer(3);
    cr_assert_null(tth_target_to_string(n));
    cr_assert_null(tth_target_to_json_text(n));
    json_decref(n);
}
