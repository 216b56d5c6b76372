/* The cmsisnn plugin: kind "cmsis-nn" (operators offloaded to Arm's CMSIS-NN library on Cortex-M),
 * its schema and target_parser. The CPU comes from the target (mcpu), not from a pass option. */
#include <tth/plugin.h>
#include <tth/target.h>

static const tth_attr_schema a_mcpu = {.size = sizeof(tth_attr_schema), .name = "mcpu", .type = TTH_ATTR_STRING,
                                       .default_json = NULL,
                                       .doc = "Cortex-M CPU, optionally with +nodsp / +nomve: cortex-m55+nomve"};
static const tth_attr_schema a_mattr = {.size = sizeof(tth_attr_schema), .name = "mattr",
                                        .type = TTH_ATTR_STRING_ARRAY, .default_json = NULL,
                                        .doc = "+nodsp, +nomve, or LLVM Arm features"};
static const tth_attr_schema *const attrs[] = {&a_mcpu, &a_mattr, NULL};
static const char *const default_keys[] = {NULL};

TTH_PLUGIN_EXPORT const tth_plugin_descriptor tth_descriptor = {
    .size = sizeof(tth_plugin_descriptor),
    .abi_major = TTH_ABI_MAJOR,
    .abi_minor = TTH_ABI_MINOR,
    .plugin_name = "cmsisnn",
    .plugin_version = "0.1.0",
    .kind = "cmsis-nn",
    .doc = "Arm CMSIS-NN kernels for Cortex-M (DSP and MVE when the CPU has them)",
    .device_type = TTH_DEVICE_EXT_DEV,
    .flags = TTH_KIND_NEEDS_HOST,
    .attrs = attrs,
    .default_keys = default_keys,
    .tags = NULL,
};

/* The M-profile parser: has_dsp / has_mve and keys arm_cpu, cpu. */
TTH_PLUGIN_EXPORT int tth_target_parser(const tth_host *host, const json_t *target, json_t **out,
                                        tth_diag *diag)
{
    (void)host;
    return tth_mprofile_target_parse(target, out, diag);
}
