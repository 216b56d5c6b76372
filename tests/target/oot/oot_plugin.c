/* A minimal out-of-tree plugin: built by oot_test.sh with nothing but an installed tth and
 *   cc -shared -fPIC -fvisibility=hidden oot_plugin.c $(pkg-config --cflags --libs tth-plugin)
 * Kind "oot-npu" with one attribute, one tag, and a target_parser that uses libtth. */
#include <tth/plugin.h>
#include <tth/target.h>

static const tth_attr_schema lanes = {.size = sizeof(tth_attr_schema), .name = "lanes", .type = TTH_ATTR_INT,
                                      .default_json = "8", .doc = "vector lanes"};
static const tth_attr_schema *const attrs[] = {&lanes, NULL};
static const char *const default_keys[] = {"npu", NULL};
static const char *const aliases[] = {"oot/npu16", NULL};
static const tth_tag_def npu16 = {.size = sizeof(tth_tag_def), .name = "oot/npu-16", .aliases = aliases,
                                  .config_json = "{\"kind\": \"oot-npu\", \"lanes\": 16}", .doc = "the 16-lane NPU"};
static const tth_tag_def *const tags[] = {&npu16, NULL};

TTH_PLUGIN_EXPORT const tth_plugin_descriptor tth_descriptor = {
    .size = sizeof(tth_plugin_descriptor),
    .abi_major = TTH_ABI_MAJOR,
    .abi_minor = TTH_ABI_MINOR,
    .plugin_name = "oot-npu",
    .plugin_version = "1.0.0",
    .kind = "oot-npu",
    .doc = "an out-of-tree test NPU",
    .device_type = TTH_DEVICE_EXT_DEV,
    .flags = TTH_KIND_NEEDS_HOST,
    .attrs = attrs,
    .default_keys = default_keys,
    .tags = tags,
};

/* Not exported: -fvisibility=hidden keeps it private. */
int oot_helper(void);
int oot_helper(void)
{
    return 42;
}

TTH_PLUGIN_EXPORT int tth_target_parser(const tth_host *host, const json_t *target, json_t **out, tth_diag *diag)
{
    (void)host;
    json_int_t n = json_integer_value(json_object_get(target, "lanes"));
    if (n < 1 || n > 64)
        return tth_diag_set(diag, TTH_EINVAL, "-lanes", "lanes must be 1 to 64, not %d", (int)n);
    json_t *t = json_deep_copy(target);
    static const char *const keys[] = {"oot"};
    if (!t || tth_target_keys_prepend(t, keys, 1) != 0 ||
        json_object_set_new(t, "features", json_pack("{s:b}", "wide", n >= 16)) != 0) {
        json_decref(t);
        return tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
    }
    *out = t;
    return 0;
}
