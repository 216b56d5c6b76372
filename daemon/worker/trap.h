/* trap.h: hook trampolines. Before each plugin hook runs, the worker tells the daemon which
 * plugin and hook it is entering, so that a crash, hang or runaway allocation inside the hook
 * can be reported by name. The trampolines wrap the hooks of a registry into a second,
 * "shadow" registry whose plugins are the same descriptors with wrapped hooks. */
#ifndef TTHW_TRAP_H
#define TTHW_TRAP_H

#include <tth/registry.h>

#define TTHW_TRAP_SLOTS 64

/* Called with the plugin and hook name before the hook runs, and with hook NULL after it. */
typedef void (*tthw_trap_cb)(const tth_plugin *p, const char *hook);

/* Build the shadow registry of `real` (which must outlive it). Plugins past TTHW_TRAP_SLOTS keep
 * their hooks unwrapped (a crash there is then reported without the plugin's name). */
tth_registry *tthw_trap_registry(const tth_registry *real, tthw_trap_cb cb, tth_diag *diag);

#endif
