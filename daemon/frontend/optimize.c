/* optimize.c: the Relay pipeline before partitioning, one pass per line. */
#include "frontend_internal.h"

int tth_relay_optimize(tth_relay_module *m, tth_diag *diag)
{
    static const struct {
        const char *name;
        int (*run)(tth_relay_module *, tth_diag *);
    } passes[] = {
        {"fold_constants", tth_relay_fold_constants},     /* requires: well-typed module */
        {"fold_batch_norm", tth_relay_fold_batch_norm},   /* requires: constant statistics folded */
        {"fold_constants", tth_relay_fold_constants},     /* folds what batch-norm folding built */
        {"eliminate_dead_code", tth_relay_eliminate_dead_code},
        {"fuse", tth_relay_fuse},                         /* requires: main calls only ops */
    };
    if (!m)
        return tth_diag_set(diag, TTH_EINVAL, NULL, "no module");
    for (size_t i = 0; i < sizeof passes / sizeof passes[0]; i++) {
        int rc = passes[i].run(m, diag);
        if (rc) {
            if (diag)
                tth_diag_prefix(diag, "%s", passes[i].name);
            return rc;
        }
    }
    return 0;
}
