/* The cmsisnn plugin: kind "cmsis-nn" (operators offloaded to Arm's CMSIS-NN library on Cortex-M),
 * its schema and target_parser. The CPU comes from the target (mcpu), not from a pass option. */
#include <tth/plugin.h>
#include <tth/target.h>

TTH_ATTR_DEF(a_mcpu, "mcpu", TTH_ATTR_STRING, NULL, "Cortex-M CPU, optionally with +nodsp / +nomve: cortex-m55+nomve");
TTH_ATTR_DEF(a_mattr, "mattr", TTH_ATTR_STRING_ARRAY, NULL, "+nodsp, +nomve, or LLVM Arm features");
static const tth_attr_schema *const attrs[] = {&a_mcpu, &a_mattr, NULL};
static const char *const default_keys[] = {NULL};

TTH_PLUGIN_DESCRIPTOR(.plugin_name = "cmsisnn", .plugin_version = "0.1.0", .kind = "cmsis-nn",
                      .doc = "Arm CMSIS-NN kernels for Cortex-M (DSP and MVE when the CPU has them)",
                      .device_type = TTH_DEVICE_EXT_DEV, .flags = TTH_KIND_NEEDS_HOST, .attrs = attrs,
                      .default_keys = default_keys); /* no tags */

/* The M-profile parser: has_dsp / has_mve and keys arm_cpu, cpu. */
TTH_PLUGIN_EXPORT int tth_target_parser(const tth_host *host, const json_t *target, json_t **out,
                                        tth_diag *diag)
{
    (void)host;
    return tth_mprofile_target_parse(target, out, diag);
}
