/* optimize.c: the Relay passes, one per line: the one list the compile pipeline's simplify stage
 * and every test and fuzzer run (docs/operators.md, "Passes"). */
#include "frontend_internal.h"

int tth_relay_simplify(tth_relay_module *m, tth_diag *diag)
{
    static const struct {
        const char *name;
        int (*run)(tth_relay_module *, tth_diag *);
    } passes[] = {
        {"qdq_to_integer", tth_relay_qdq_to_integer},     /* requires: before folding (it needs the
                                                             dequantize of constant weights) */
        {"fold_constants", tth_relay_fold_constants},     /* requires: well-typed module */
        {"fold_batch_norm", tth_relay_fold_batch_norm},   /* requires: constant statistics folded */
        {"fold_constants", tth_relay_fold_constants},     /* folds what batch-norm folding built */
        {"fold_pad", tth_relay_fold_pad},                 /* requires: pads of constants folded */
        {"trim_conv_taps", tth_relay_trim_conv_taps},     /* requires: constant weights folded; after
                                                             fold_pad (the pad's rows are taps) */
        {"fuse_attention", tth_relay_fuse_attention},     /* requires: constant scales folded */
        {"eliminate_dead_code", tth_relay_eliminate_dead_code},
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

int tth_relay_optimize(tth_relay_module *m, tth_diag *diag)
{
    int rc = tth_relay_simplify(m, diag);
    if (rc)
        return rc;
    rc = tth_relay_fuse(m, diag); /* requires: main calls only ops */
    if (rc && diag)
        tth_diag_prefix(diag, "fuse");
    return rc;
}
