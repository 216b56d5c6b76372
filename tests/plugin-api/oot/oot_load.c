/* Loads the out-of-tree plugin built by oot_test.sh from the directory argv[1] through the
 * registry, next to the real plugins in argv[2], and parses targets of its kind. Exit 0 on
 * success; prints what went wrong otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tth/target.h>

static int failed;

#define CHECK(cond, ...)                               \
    do {                                               \
        if (!(cond)) {                                 \
            fprintf(stderr, "FAIL %s: ", #cond);       \
            fprintf(stderr, __VA_ARGS__);              \
            fputc('\n', stderr);                       \
            failed = 1;                                \
        }                                              \
    } while (0)

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: oot-load OOT_PLUGIN_DIR PLUGINS_DIR\n");
        return 2;
    }
    tth_registry *r = tth_registry_new();
    tth_diag d;
    tth_diag_clear(&d);
    int n = tth_registry_load_dir(r, argv[1], &d);
    CHECK(n == 1, "loaded %d from %s: %s", n, argv[1], d.message);
    for (size_t i = 0; i < tth_registry_error_count(r); i++)
        CHECK(0, "refused %s: %s", tth_registry_error(r, i)->path, tth_registry_error(r, i)->diag.message);
    n = tth_registry_load_dir(r, argv[2], &d); /* the llvm kind, for the default host */
    CHECK(n >= 4, "loaded %d from %s: %s", n, argv[2], d.message);
    const tth_plugin *p = tth_registry_find_kind(r, "oot-npu");
    CHECK(p != NULL, "no kind oot-npu");
    if (p) {
        CHECK(strcmp(p->desc->plugin_name, "oot-npu") == 0, "name %s", p->desc->plugin_name);
        CHECK(p->target_parser != NULL, "no target_parser");
        CHECK(p->relay_to_tir == NULL, "unexpected hook");
        CHECK(p->partition_supports != NULL && p->relay_to_runtime != NULL, "no partition_supports or relay_to_runtime");
    }
    json_t *t = tth_target_parse(r, NULL, "oot/npu16", &d);
    CHECK(t != NULL, "parse: %s", d.message);
    if (t) {
        char *s = tth_target_to_json_text(t);
        CHECK(strcmp(json_string_value(json_object_get(t, "tag")), "oot/npu-16") == 0, "%s", s);
        CHECK(tth_target_has_feature(t, "wide"), "%s", s);
        CHECK(json_object_get(t, "host") != NULL, "no default host: %s", s);
        CHECK(strcmp(json_string_value(json_array_get(json_object_get(t, "keys"), 0)), "oot") == 0, "%s", s);
        char *str = tth_target_to_string(t);
        json_t *back = tth_target_parse(r, NULL, str, &d);
        CHECK(back && json_equal(t, back), "round trip of %s: %s", str, d.message);
        json_decref(back);
        free(str);
        free(s);
        json_decref(t);
    }
    t = tth_target_parse(r, NULL, "oot-npu -lanes=99", &d);
    CHECK(t == NULL && strcmp(d.message, "lanes must be 1 to 64, not 99") == 0, "got %s", d.message);
    json_decref(t);
    t = tth_target_parse(r, NULL, "oot-npu -lane=4", &d);
    CHECK(t == NULL && strcmp(d.hint, "did you mean 'lanes'?") == 0, "got %s / %s", d.message, d.hint);
    json_decref(t);
    tth_registry_free(r);
    if (!failed)
        printf("ok: out-of-tree plugin loaded and parsed\n");
    return failed;
}
