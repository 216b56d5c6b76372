/* The c-host plugin: kind "c" (portable C source), its schema, tags and target_parser. */
#include <stdio.h>
#include <string.h>

#include <tth/plugin.h>
#include <tth/target.h>

TTH_ATTR_DEF(a_mtriple, "mtriple", TTH_ATTR_STRING, NULL, "triple the C code is compiled for (for keys and features)");
TTH_ATTR_DEF(a_mcpu, "mcpu", TTH_ATTR_STRING, NULL, "CPU the C code runs on: cortex-m55, cortex-a72, native, ...");
TTH_ATTR_DEF(a_march, "march", TTH_ATTR_STRING, NULL, "architecture name for the C compiler (-march)");
TTH_ATTR_DEF(a_mattr, "mattr", TTH_ATTR_STRING_ARRAY, NULL, "features: LLVM names, or +nodsp / +nomve on Cortex-M");
TTH_ATTR_DEF(a_mabi, "mabi", TTH_ATTR_STRING, NULL, "ABI name for the C compiler (-mabi)");
TTH_ATTR_DEF(a_ws_align, "workspace-byte-alignment", TTH_ATTR_INT, "16", "alignment of the workspace buffer, a power of two");
TTH_ATTR_DEF(a_const_align, "constants-byte-alignment", TTH_ATTR_INT, "16", "alignment of the constants, a power of two");

static const tth_attr_schema *const attrs[] = {&a_mtriple, &a_mcpu, &a_march, &a_mattr, &a_mabi,
                                               &a_ws_align, &a_const_align, NULL};
static const char *const default_keys[] = {"cpu", NULL};

/* A tag of kind c: the core's triple and CPU. */
#define TAG(id, nm, al, triple, cpu, text) \
    TTH_TAG_DEF(id, nm, al, "{\"kind\":\"c\",\"mtriple\":\"" triple "\",\"mcpu\":\"" cpu "\"}", text)

/* Arm Cortex-M cores: the triple is the core's architecture (docs/targets.md, "Tags"). */
TAG(t_m0plus, "arm/cortex-m0plus", TTH_ALIASES("arm/cortex-m0+"), "thumbv6m-none-eabi", "cortex-m0plus", "Arm Cortex-M0+ (Armv6-M): no DSP, no MVE");
TAG(t_m3, "arm/cortex-m3", NULL, "thumbv7m-none-eabi", "cortex-m3", "Arm Cortex-M3 (Armv7-M): no DSP");
TAG(t_m4, "arm/cortex-m4", NULL, "thumbv7em-none-eabi", "cortex-m4", "Arm Cortex-M4 (Armv7E-M): DSP");
TAG(t_m7, "arm/cortex-m7", NULL, "thumbv7em-none-eabi", "cortex-m7", "Arm Cortex-M7 (Armv7E-M): DSP");
TAG(t_m33, "arm/cortex-m33", NULL, "thumbv8m.main-none-eabi", "cortex-m33", "Arm Cortex-M33 (Armv8-M Mainline): DSP");
TAG(t_m55, "arm/cortex-m55", TTH_ALIASES("arm/corstone-300", "arm/mps3-an547"), "thumbv8.1m.main-none-eabi", "cortex-m55",
    "Arm Cortex-M55 (Armv8.1-M, Corstone-300 / MPS3 AN547): DSP and MVE (Helium)");
TAG(t_m85, "arm/cortex-m85", TTH_ALIASES("arm/corstone-310"), "thumbv8.1m.main-none-eabi", "cortex-m85",
    "Arm Cortex-M85 (Armv8.1-M, Corstone-310): DSP and MVE (Helium)");
/* Boards. */
TAG(t_f746, "stm32/nucleo-f746zg", TTH_ALIASES("stm32/f746zg"), "thumbv7em-none-eabihf", "cortex-m7",
    "ST NUCLEO-F746ZG: STM32F746ZG, Cortex-M7 with FPU");
TAG(t_h743, "stm32/nucleo-h743zi", TTH_ALIASES("stm32/h743zi"), "thumbv7em-none-eabihf", "cortex-m7",
    "ST NUCLEO-H743ZI: STM32H743ZI, Cortex-M7 with FPU");
TAG(t_l4r5, "stm32/nucleo-l4r5zi", TTH_ALIASES("stm32/l4r5zi"), "thumbv7em-none-eabihf", "cortex-m4",
    "ST NUCLEO-L4R5ZI: STM32L4R5ZI, Cortex-M4 with FPU");
TAG(t_l552, "stm32/nucleo-l552ze-q", TTH_ALIASES("stm32/l552ze-q"), "thumbv8m.main-none-eabihf", "cortex-m33",
    "ST NUCLEO-L552ZE-Q: STM32L552ZE, Cortex-M33 with FPU");
TAG(t_nrf52840, "nordic/nrf52840", TTH_ALIASES("nordic/nrf52840-dk"), "thumbv7em-none-eabihf", "cortex-m4",
    "Nordic nRF52840: Cortex-M4 with FPU");
TAG(t_nrf5340, "nordic/nrf5340", TTH_ALIASES("nordic/nrf5340-dk"), "thumbv8m.main-none-eabihf", "cortex-m33",
    "Nordic nRF5340 application core: Cortex-M33 with FPU");

static const tth_tag_def *const tags[] = {&t_m0plus, &t_m3, &t_m4, &t_m7, &t_m33, &t_m55, &t_m85, &t_f746, &t_h743,
                                          &t_l4r5, &t_l552, &t_nrf52840, &t_nrf5340, NULL};

TTH_PLUGIN_DESCRIPTOR(.plugin_name = "c-host", .plugin_version = "0.1.0", .kind = "c",
                      .doc = "portable C source, for microcontrollers and any C compiler",
                      .device_type = TTH_DEVICE_CPU, .flags = TTH_KIND_CAN_BE_HOST, .attrs = attrs,
                      .default_keys = default_keys, .tags = tags);

static int check_alignment(const json_t *target, const char *name, tth_diag *diag)
{
    json_t *v = json_object_get(target, name);
    if (!v)
        return 0;
    json_int_t x = json_integer_value(v);
    if (x >= 1 && (x & (x - 1)) == 0)
        return 0;
    char where[96];
    snprintf(where, sizeof where, "-%s=%" JSON_INTEGER_FORMAT, name, x);
    tth_diag_set(diag, TTH_EINVAL, where, "%s must be a power of two, not %" JSON_INTEGER_FORMAT, name, x);
    tth_diag_hint(diag, "use 4, 8, 16, ...");
    return TTH_EINVAL;
}

/* Alignments are powers of two; with a CPU or a triple the shared CPU parser (M-profile for
 * Cortex-M) derives keys and features. Without either the C is portable: only the default key. */
TTH_PLUGIN_EXPORT int tth_target_parser(const tth_host *host, const json_t *target, json_t **out,
                                        tth_diag *diag)
{
    (void)host;
    *out = NULL;
    int rc = check_alignment(target, "workspace-byte-alignment", diag);
    if (rc == 0)
        rc = check_alignment(target, "constants-byte-alignment", diag);
    if (rc != 0)
        return rc;
    if (json_object_get(target, "mtriple") || json_object_get(target, "mcpu"))
        return tth_cpu_target_parse(target, out, diag);
    *out = json_deep_copy(target);
    return *out ? 0 : tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
}
