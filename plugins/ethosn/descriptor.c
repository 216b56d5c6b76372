/* The ethosn plugin: kind "ethos-n" (Arm Ethos-N78 NPU), its schema, tags and target_parser.
 *
 * The N78's configurations (TOPS, PLE ratio, default and allowed SRAM sizes; the other variants
 * refused) are listed in docs/ethosn.md, "Configurations"; the tags and sram_sizes below are
 * that table as code.
 */
#include <stdio.h>
#include <string.h>

#include <tth/plugin.h>
#include <tth/target.h>

TTH_ATTR_DEF(a_variant, "variant", TTH_ATTR_STRING, "\"n78\"", "NPU variant; only n78 is supported");
TTH_ATTR_DEF(a_tops, "tops", TTH_ATTR_INT, "1", "N78 configuration in TOPS: 1, 2, 4 or 8");
TTH_ATTR_DEF(a_ple_ratio, "ple_ratio", TTH_ATTR_INT, "2", "ratio of MCEs to PLEs: 2 or 4 (8 TOPS: 2 only)");
TTH_ATTR_DEF(a_sram_size, "sram_size", TTH_ATTR_INT, NULL, "SRAM in KiB; the configuration's default when left out");

static const tth_attr_schema *const attrs[] = {&a_variant, &a_tops, &a_ple_ratio, &a_sram_size, NULL};
static const char *const default_keys[] = {"ethos-n", NULL};

/* A tag of the N78: its TOPS, PLE ratio and SRAM in KiB. */
#define TAG(id, nm, al, tops, ple, sram, text)                                                          \
    TTH_TAG_DEF(id, nm, TTH_ALIASES(al),                                                             \
                "{\"kind\":\"ethos-n\",\"variant\":\"n78\",\"tops\":" #tops ",\"ple_ratio\":" #ple ",\"sram_size\":" #sram "}", \
                text)

TAG(t_1, "arm/ethos-n78-1tops", "ethos-n78/1tops", 1, 2, 448, "Arm Ethos-N78, 1 TOPS: 2 engines, 448 KiB SRAM");
TAG(t_2, "arm/ethos-n78-2tops", "ethos-n78/2tops", 2, 2, 768, "Arm Ethos-N78, 2 TOPS: 4 engines, 768 KiB SRAM");
TAG(t_4, "arm/ethos-n78-4tops", "ethos-n78/4tops", 4, 2, 1024, "Arm Ethos-N78, 4 TOPS, PLE ratio 2: 1 MiB SRAM");
TAG(t_44, "arm/ethos-n78-4tops-4ple", "ethos-n78/4tops-4ple", 4, 4, 1024, "Arm Ethos-N78, 4 TOPS, PLE ratio 4: 1 MiB SRAM");
TAG(t_8, "arm/ethos-n78-8tops", "ethos-n78/8tops", 8, 2, 2048, "Arm Ethos-N78, 8 TOPS: 8 engines, 2 MiB SRAM");

static const tth_tag_def *const tags[] = {&t_1, &t_2, &t_4, &t_44, &t_8, NULL};

TTH_PLUGIN_DESCRIPTOR(.plugin_name = "ethosn", .plugin_version = "0.1.0", .kind = "ethos-n",
                      .doc = "Arm Ethos-N78 neural processing unit", .device_type = TTH_DEVICE_EXT_DEV,
                      .flags = TTH_KIND_NEEDS_HOST, .attrs = attrs, .default_keys = default_keys, .tags = tags);

static const struct {
    int tops, sram_kib, ple2, ple4;
} configs[] = {{1, 448, 1, 1}, {2, 768, 1, 1}, {4, 1024, 1, 1}, {8, 2048, 1, 0}};
static const int sram_sizes[] = {384, 448, 512, 768, 1024, 1792, 2048, 4096};

static int check_variant(const char *v, tth_diag *diag)
{
    char where[96];
    snprintf(where, sizeof where, "-variant=%s", v);
    if (strcmp(v, "n78") == 0)
        return 0;
    if (strcmp(v, "n37") == 0 || strcmp(v, "n57") == 0 || strcmp(v, "n77") == 0) {
        tth_diag_set(diag, TTH_EUNSUPPORTED, where, "Ethos-N variant '%s' is not supported; tth supports the Ethos-N78 only", v);
        tth_diag_hint(diag, "use -variant=n78 (the Ethos-N driver stack supports only the N78)");
        return TTH_EUNSUPPORTED;
    }
    tth_diag_set(diag, TTH_EUNKNOWN, where, "unknown Ethos-N variant '%s'", v);
    static const char *const known[] = {"n78"};
    char near[64];
    if (tth_nearest_names(v, known, 1, 1, near, sizeof near))
        tth_diag_hint(diag, "did you mean %s?", near);
    else
        tth_diag_hint(diag, "the supported variant is 'n78'");
    return TTH_EUNKNOWN;
}

TTH_PLUGIN_EXPORT int tth_target_parser(const tth_host *host, const json_t *target, json_t **out,
                                        tth_diag *diag)
{
    (void)host;
    *out = NULL;
    int rc = check_variant(json_string_value(json_object_get(target, "variant")), diag);
    if (rc != 0)
        return rc;
    json_int_t tops = json_integer_value(json_object_get(target, "tops"));
    json_int_t ple = json_integer_value(json_object_get(target, "ple_ratio"));
    size_t c = 0;
    while (c < sizeof configs / sizeof configs[0] && configs[c].tops != tops)
        c++;
    char where[96];
    if (c == sizeof configs / sizeof configs[0]) {
        snprintf(where, sizeof where, "-tops=%" JSON_INTEGER_FORMAT, tops);
        tth_diag_set(diag, TTH_EINVAL, where, "the Ethos-N78 comes in 1, 2, 4 or 8 TOPS, not %" JSON_INTEGER_FORMAT, tops);
        tth_diag_hint(diag, "use -tops=1, 2, 4 or 8");
        return TTH_EINVAL;
    }
    if (!((ple == 2 && configs[c].ple2) || (ple == 4 && configs[c].ple4))) {
        snprintf(where, sizeof where, "-ple_ratio=%" JSON_INTEGER_FORMAT, ple);
        tth_diag_set(diag, TTH_EINVAL, where, "the %" JSON_INTEGER_FORMAT " TOPS Ethos-N78 has PLE ratio %s, not %" JSON_INTEGER_FORMAT,
                     tops, configs[c].ple4 ? "2 or 4" : "2 only", ple);
        tth_diag_hint(diag, "use -ple_ratio=2%s", configs[c].ple4 ? " or -ple_ratio=4" : "");
        return TTH_EINVAL;
    }
    json_t *sram = json_object_get(target, "sram_size");
    if (sram) {
        json_int_t kib = json_integer_value(sram);
        int ok = 0;
        for (size_t i = 0; i < sizeof sram_sizes / sizeof sram_sizes[0]; i++)
            ok |= sram_sizes[i] == kib;
        if (!ok) {
            snprintf(where, sizeof where, "-sram_size=%" JSON_INTEGER_FORMAT, kib);
            tth_diag_set(diag, TTH_EINVAL, where, "sram_size %" JSON_INTEGER_FORMAT " KiB is not an Ethos-N78 SRAM size", kib);
            tth_diag_hint(diag, "use 384, 448, 512, 768, 1024, 1792, 2048 or 4096 (KiB), or leave it out for %d",
                          configs[c].sram_kib);
            return TTH_EINVAL;
        }
    }
    json_t *t = json_deep_copy(target);
    if (!t || (!sram && json_object_set_new(t, "sram_size", json_integer(configs[c].sram_kib)) != 0)) {
        json_decref(t);
        return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
    }
    *out = t;
    return 0;
}
