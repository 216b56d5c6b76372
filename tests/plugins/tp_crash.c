/* A misbehaving test plugin: one hook segfaults, aborts, loops forever or allocates without end.
 * Built several times with different -D values (tests/plugins/meson.build):
 *   TP_KIND   the kind name ("test-segv", ...)
 *   TP_MODE   1 segfault, 2 abort, 3 infinite loop, 4 runaway allocation
 *   TP_HOOK   1 target_parser, 2 relay_to_tir, 3 tir_to_runtime, 4 relay_to_runtime,
 *             5 constant_updater, 6 partition_supports: the hook that misbehaves (the only
 *             hook exported besides a well-behaved target_parser, and for 2, 4 and 5 a
 *             partition_supports taking every operator, so a composite target reaches it)
 * Used by tests/e2e to check that the daemon survives and names the plugin and hook. */
#include <stddef.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <tth/plugin.h>

#ifndef TP_KIND
#define TP_KIND "test-segv"
#endif
#ifndef TP_MODE
#define TP_MODE 1
#endif
#ifndef TP_HOOK
#define TP_HOOK 1
#endif

static const char *const keys[] = {"test", NULL};

TTH_PLUGIN_EXPORT const tth_plugin_descriptor tth_descriptor = {
    .size = sizeof(tth_plugin_descriptor),
    .abi_major = TTH_ABI_MAJOR,
    .abi_minor = TTH_ABI_MINOR,
    .plugin_name = "tp-" TP_KIND,
    .plugin_version = "0.0.1",
    .kind = TP_KIND,
    .doc = "test plugin that misbehaves on purpose",
    .device_type = TTH_DEVICE_CPU,
    .flags = 0,
    .attrs = NULL,
    .default_keys = keys,
    .tags = NULL,
};

/* Do the configured harm. Returns only for modes that can return. */
static int misbehave(const tth_host *host)
{
#if TP_MODE == 1
    volatile int *volatile p = NULL;
    *p = 42;
#elif TP_MODE == 2
    abort();
#elif TP_MODE == 3
    for (;;)
        pause();
#elif TP_MODE == 4
    /* 8 MiB every 10 ms, each page touched, never freed; keep the blocks reachable */
    static void *volatile blocks[100000];
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++) {
        char *b = malloc(8u << 20);
        if (!b)
            break;
        memset(b, (int)i, 8u << 20);
        blocks[i] = b;
        usleep(10000);
    }
#endif
    (void)host;
    return TTH_EPLUGIN;
}

#if TP_HOOK == 1
TTH_PLUGIN_EXPORT int tth_target_parser(const tth_host *host, const json_t *target, json_t **out, tth_diag *diag)
{
    (void)target;
    (void)out;
    return tth_diag_set(diag, misbehave(host), NULL, "tp_crash survived its own harm");
}
#else
TTH_PLUGIN_EXPORT int tth_target_parser(const tth_host *host, const json_t *target, json_t **out, tth_diag *diag)
{
    (void)host;
    (void)diag;
    *out = json_deep_copy(target);
    return 0;
}
#endif

#if TP_HOOK == 6
TTH_PLUGIN_EXPORT int tth_partition_supports(const tth_host *host, const json_t *target,
                                             const tth_relay_function *fn, const tth_rexpr *call,
                                             char *why, size_t why_len)
{
    return misbehave(host);
}
#elif TP_HOOK == 2 || TP_HOOK == 4 || TP_HOOK == 5
TTH_PLUGIN_EXPORT int tth_partition_supports(const tth_host *host, const json_t *target,
                                             const tth_relay_function *fn, const tth_rexpr *call,
                                             char *why, size_t why_len)
{
    return 1;
}
#endif

#if TP_HOOK == 2
TTH_PLUGIN_EXPORT int tth_relay_to_tir(const tth_host *host, const json_t *target, const tth_relay_function *fn,
                                       const char *global_symbol, tth_tir_module *mod, tth_diag *diag)
{
    return tth_diag_set(diag, misbehave(host), NULL, "tp_crash survived its own harm");
}
#elif TP_HOOK == 3
TTH_PLUGIN_EXPORT int tth_tir_to_runtime(const tth_host *host, const json_t *target, const tth_tir_module *mod,
                                         tth_runtime_module *out, tth_diag *diag)
{
    return tth_diag_set(diag, misbehave(host), NULL, "tp_crash survived its own harm");
}
#elif TP_HOOK == 4
TTH_PLUGIN_EXPORT int tth_relay_to_runtime(const tth_host *host, const json_t *target,
                                           const tth_relay_function *fn, const char *global_symbol,
                                           tth_runtime_module *out, tth_diag *diag)
{
    return tth_diag_set(diag, misbehave(host), NULL, "tp_crash survived its own harm");
}
#elif TP_HOOK == 5
TTH_PLUGIN_EXPORT int tth_constant_updater(const tth_host *host, const json_t *target,
                                           const tth_relay_function *fn, const char *global_symbol,
                                           tth_const_map *out, tth_diag *diag)
{
    return tth_diag_set(diag, misbehave(host), NULL, "tp_crash survived its own harm");
}
#endif
