/* trap.c: one trampoline per (slot, hook); slot i forwards to the i-th plugin's real hook. */
#include "trap.h"

#include <stddef.h>
#include <stdio.h>

static const tth_plugin *slots[TTHW_TRAP_SLOTS];
static tthw_trap_cb trap_cb;

static void trap_enter(int i, const char *hook)
{
    if (trap_cb)
        trap_cb(slots[i], hook);
}

/* After the hook: an error that does not say where it happened is located at the hook. */
static void trap_leave(int i, const char *hook, int rc, tth_diag *d)
{
    if (rc != 0 && d && d->location[0] == '\0')
        snprintf(d->location, sizeof d->location, "plugin '%s' (kind '%s'), hook %s", slots[i]->desc->plugin_name,
                 slots[i]->desc->kind, hook);
    if (trap_cb)
        trap_cb(slots[i], NULL);
}

/* Trampoline pre_i: slot i's plugin's hook between trap_enter and trap_leave (diag: where the
 * hook reports an error, or NULL) */
#define TTHW_HOOK(i, pre, hook, params, args, diag)                                                \
    static int pre##_##i params                                                                    \
    {                                                                                              \
        trap_enter(i, #hook);                                                                      \
        int rc = slots[i]->hook args;                                                              \
        trap_leave(i, #hook, rc, diag);                                                            \
        return rc;                                                                                 \
    }

#define TTHW_SLOT(i)                                                                               \
    TTHW_HOOK(i, tp, target_parser, (const tth_host *h, const json_t *t, json_t **o, tth_diag *d), \
              (h, t, o, d), d)                                                                     \
    TTHW_HOOK(i, rt, relay_to_tir,                                                                 \
              (const tth_host *h, const json_t *t, const tth_relay_function *f, const char *g,     \
               tth_tir_module *m, tth_diag *d),                                                    \
              (h, t, f, g, m, d), d)                                                               \
    TTHW_HOOK(i, tr, tir_to_runtime,                                                               \
              (const tth_host *h, const json_t *t, const tth_tir_module *m, tth_runtime_module *o, \
               tth_diag *d),                                                                       \
              (h, t, m, o, d), d)                                                                  \
    TTHW_HOOK(i, rr, relay_to_runtime,                                                             \
              (const tth_host *h, const json_t *t, const tth_relay_function *f, const char *g,     \
               tth_runtime_module *o, tth_diag *d),                                                \
              (h, t, f, g, o, d), d)                                                               \
    TTHW_HOOK(i, cu, constant_updater,                                                             \
              (const tth_host *h, const json_t *t, const tth_relay_function *f, const char *g,     \
               tth_const_map *o, tth_diag *d),                                                     \
              (h, t, f, g, o, d), d)                                                               \
    TTHW_HOOK(i, ps, partition_supports,                                                           \
              (const tth_host *h, const json_t *t, const tth_relay_function *f, const tth_rexpr *c, \
               char *w, size_t wl),                                                                \
              (h, t, f, c, w, wl), NULL)

#define TTHW_SLOTS8(X, b) X(b##0) X(b##1) X(b##2) X(b##3) X(b##4) X(b##5) X(b##6) X(b##7)
#define TTHW_ALL_SLOTS(X)                                                                          \
    X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) TTHW_SLOTS8(X, 1) X(18) X(19)                \
    TTHW_SLOTS8(X, 2) X(28) X(29) TTHW_SLOTS8(X, 3) X(38) X(39) TTHW_SLOTS8(X, 4) X(48) X(49)      \
    TTHW_SLOTS8(X, 5) X(58) X(59) X(60) X(61) X(62) X(63)

TTHW_ALL_SLOTS(TTHW_SLOT)

typedef struct slot_fns {
    tth_target_parser_fn target_parser;
    tth_relay_to_tir_fn relay_to_tir;
    tth_tir_to_runtime_fn tir_to_runtime;
    tth_relay_to_runtime_fn relay_to_runtime;
    tth_constant_updater_fn constant_updater;
    tth_partition_supports_fn partition_supports;
} slot_fns;

#define TTHW_SLOT_ROW(i) {tp_##i, rt_##i, tr_##i, rr_##i, cu_##i, ps_##i},
static const slot_fns slot_table[TTHW_TRAP_SLOTS] = {TTHW_ALL_SLOTS(TTHW_SLOT_ROW)};

tth_registry *tthw_trap_registry(const tth_registry *real, tthw_trap_cb cb, tth_diag *diag)
{
    tth_registry *shadow = tth_registry_new();
    if (!shadow) {
        tth_diag_set(diag, TTH_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    trap_cb = cb;
    for (size_t i = 0; i < tth_registry_count(real); i++) {
        const tth_plugin *p = tth_registry_plugin(real, i);
        tth_plugin w = *p;
        if (i < TTHW_TRAP_SLOTS) {
            slots[i] = p;
            const slot_fns *f = &slot_table[i];
            w.target_parser = p->target_parser ? f->target_parser : NULL;
            w.relay_to_tir = p->relay_to_tir ? f->relay_to_tir : NULL;
            w.tir_to_runtime = p->tir_to_runtime ? f->tir_to_runtime : NULL;
            w.relay_to_runtime = p->relay_to_runtime ? f->relay_to_runtime : NULL;
            w.constant_updater = p->constant_updater ? f->constant_updater : NULL;
            w.partition_supports = p->partition_supports ? f->partition_supports : NULL;
        }
        tth_diag d;
        tth_diag_clear(&d);
        if (tth_registry_add_static(shadow, p->desc, &w, &d) != 0) {
            *diag = d;
            tth_registry_free(shadow);
            return NULL;
        }
    }
    return shadow;
}
