/* target_parser through the registry: what the hook sees, and the re-validation of what it
 * returns. A static test plugin misbehaves in each way in turn. */
#include "common.h"

static int mode;
static const tth_host *seen_host;
static uint32_t seen_host_size;
static json_t *seen_target;

enum { GOOD, CHANGE_KIND, CHANGE_TAG, CHANGE_HOST, UNKNOWN_ATTR, WRONG_TYPE, BAD_FEATURES, BAD_FEATURE_VALUE,
       FAIL_SILENT, FAIL_WITH_DIAG, NO_OUTPUT, NOT_OBJECT, STRING_AS_LIST };

static int parser(const tth_host *host, const json_t *target, json_t **out, tth_diag *diag)
{
    seen_host = host;
    seen_host_size = host ? host->size : 0;
    json_decref(seen_target);
    seen_target = json_deep_copy(target);
    json_t *t = json_deep_copy(target);
    static const char *const keys[] = {"hooked", "test"};
    tth_target_keys_prepend(t, keys, 2);
    switch (mode) {
    case GOOD: json_object_set_new(t, "features", json_pack("{s:b, s:i, s:s}", "fast", 1, "lanes", 4, "isa", "x")); break;
    case CHANGE_KIND: json_object_set_new(t, "kind", json_string("llvm")); break;
    case CHANGE_TAG: json_object_set_new(t, "tag", json_string("x/y")); break;
    case CHANGE_HOST: json_object_set_new(t, "host", json_pack("{s:s}", "kind", "c")); break;
    case UNKNOWN_ATTR: json_object_set_new(t, "bogus", json_true()); break;
    case WRONG_TYPE: json_object_set_new(t, "level", json_string("x")); break;
    case BAD_FEATURES: json_object_set_new(t, "features", json_string("x")); break;
    case BAD_FEATURE_VALUE: json_object_set_new(t, "features", json_pack("{s:[]}", "x")); break;
    case FAIL_SILENT: json_decref(t); return TTH_EPLUGIN;
    case FAIL_WITH_DIAG: json_decref(t); return tth_diag_set(diag, TTH_EINVAL, "-level=2", "level 2 is too high");
    case NO_OUTPUT: json_decref(t); return 0;
    case NOT_OBJECT: json_decref(t); t = json_integer(1); break;
    case STRING_AS_LIST: json_object_set_new(t, "names", json_string("a,b")); break;
    }
    *out = t;
    return 0;
}

static const tth_attr_schema a_level = {.size = sizeof(tth_attr_schema), .name = "level", .type = TTH_ATTR_INT,
                                        .default_json = "2", .doc = "a level"};
static const tth_attr_schema a_names = {.size = sizeof(tth_attr_schema), .name = "names",
                                        .type = TTH_ATTR_STRING_ARRAY, .default_json = NULL, .doc = "names"};
static const tth_attr_schema *const attrs[] = {&a_level, &a_names, NULL};
static const char *const keys[] = {"test", NULL};
static const char *const aliases[] = {"hook/alias", NULL};
static const tth_tag_def tag = {.size = sizeof(tth_tag_def), .name = "hook/one", .aliases = aliases,
                                .config_json = "{\"kind\":\"test-hook\",\"level\":7}", .doc = "a tag"};
static const tth_tag_def *const tags[] = {&tag, NULL};
static const tth_plugin_descriptor desc = {
    .size = sizeof(tth_plugin_descriptor), .abi_major = TTH_ABI_MAJOR, .abi_minor = TTH_ABI_MINOR,
    .plugin_name = "tp-hook", .plugin_version = "0.0.1", .kind = "test-hook", .doc = "test",
    .device_type = TTH_DEVICE_CPU, .flags = TTH_KIND_CAN_BE_HOST, .attrs = attrs, .default_keys = keys, .tags = tags};

static void setup(void)
{
    reg = tth_registry_new();
    tth_plugin hooks = {.target_parser = parser};
    tth_diag d;
    cr_assert_eq(tth_registry_add_static(reg, &desc, &hooks, &d), 0, "%s", d.message);
    mode = GOOD;
}

static void teardown(void)
{
    json_decref(seen_target);
    seen_target = NULL;
    unload_plugins();
}

TestSuite(hook, .init = setup, .fini = teardown);

Test(hook, sees_the_canonical_target_and_the_host)
{
    tth_host host = {.size = sizeof(tth_host), .abi_major = TTH_ABI_MAJOR, .abi_minor = TTH_ABI_MINOR};
    tth_diag d;
    json_t *t = tth_target_parse(reg, &host, "hook/alias -names=a", &d);
    cr_assert_not_null(t, "%s", d.message);
    cr_assert_eq(seen_host, &host);
    /* defaults filled, keys computed, tag canonical: before the hook runs */
    cr_assert_eq(json_integer_value(json_object_get(seen_target, "level")), 7);
    cr_assert_str_eq(str(seen_target, "tag"), "hook/one");
    cr_assert_str_eq(keys_of(seen_target), "test");
    /* the hook's keys come first, deduplicated */
    cr_assert_str_eq(keys_of(t), "hooked,test");
    cr_assert(tth_target_has_feature(t, "fast"));
    cr_assert(tth_target_has_feature(t, "lanes"));
    cr_assert_not(tth_target_has_feature(t, "missing"));
    json_decref(t);
    /* without a host from the caller the hook still gets one */
    t = ok("test-hook");
    cr_assert_not_null(seen_host);
    cr_assert_eq(seen_host_size, sizeof(tth_host));
    json_decref(t);
}

static void bad(int m, int code, const char *message)
{
    mode = m;
    fails("test-hook", code, message, NULL, NULL);
}

Test(hook, result_is_revalidated)
{
    bad(CHANGE_KIND, TTH_EPLUGIN, "target_parser of plugin 'tp-hook' changed the kind");
    bad(CHANGE_TAG, TTH_EPLUGIN, "target_parser of plugin 'tp-hook' changed the tag");
    bad(CHANGE_HOST, TTH_EPLUGIN, "target_parser of plugin 'tp-hook' changed the host");
    bad(UNKNOWN_ATTR, TTH_EPLUGIN, "target_parser of plugin 'tp-hook' set attribute 'bogus', which kind 'test-hook' does not declare");
    bad(WRONG_TYPE, TTH_EPLUGIN, "target_parser of plugin 'tp-hook' set attribute 'level' to a wrong value: "
                                 "attribute 'level' of kind 'test-hook' takes an integer, not \"x\"");
    bad(STRING_AS_LIST, TTH_EPLUGIN, "target_parser of plugin 'tp-hook' set attribute 'names' to a wrong value: not a list");
    bad(BAD_FEATURES, TTH_EPLUGIN, "target_parser of plugin 'tp-hook' set \"features\" to a non-object");
    bad(BAD_FEATURE_VALUE, TTH_EPLUGIN,
        "target_parser of plugin 'tp-hook' set feature 'x' to a value that is not a bool, integer or string");
    bad(FAIL_SILENT, TTH_EPLUGIN, "target_parser of plugin 'tp-hook' failed without saying why");
    bad(NO_OUTPUT, TTH_EPLUGIN, "target_parser of plugin 'tp-hook' returned no target");
    bad(NOT_OBJECT, TTH_EPLUGIN, "target_parser of plugin 'tp-hook' returned something other than a JSON object");
    mode = FAIL_WITH_DIAG;
    fails("test-hook", TTH_EINVAL, "level 2 is too high", "-level=2", NULL);
}
