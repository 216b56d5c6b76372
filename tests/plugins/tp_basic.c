/* A well-formed test plugin with kind "test-basic"; the kind name and ABI numbers can be
 * overridden at build time to make the refusal cases (duplicate kind, ABI mismatch). */
#include <tth/plugin.h>

#ifndef TP_KIND
#define TP_KIND "test-basic"
#endif
#ifndef TP_ABI_MAJOR
#define TP_ABI_MAJOR TTH_ABI_MAJOR
#endif
#ifndef TP_NAME
#define TP_NAME "tp-basic"
#endif

static const tth_attr_schema attr_level = {
    .size = sizeof(tth_attr_schema), .name = "level", .type = TTH_ATTR_INT,
    .default_json = "2", .doc = "a level"};
static const tth_attr_schema *const attrs[] = {&attr_level, NULL};
static const char *const keys[] = {"test", NULL};

TTH_PLUGIN_EXPORT const tth_plugin_descriptor tth_descriptor = {
    .size = sizeof(tth_plugin_descriptor),
    .abi_major = TP_ABI_MAJOR,
    .abi_minor = TTH_ABI_MINOR,
    .plugin_name = TP_NAME,
    .plugin_version = "0.0.1",
    .kind = TP_KIND,
    .doc = "test plugin",
    .device_type = TTH_DEVICE_CPU,
    .flags = 0,
    .attrs = attrs,
    .default_keys = keys,
    .tags = NULL,
};
