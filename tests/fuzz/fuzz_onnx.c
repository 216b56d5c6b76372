/* fuzz_onnx.c: libFuzzer target for the ONNX importer (tth_onnx_import) and the Relay passes,
 * and for tthctl's walk of a model for its external data files (client/onnx_scan.c).
 *
 * Any byte string must give either a module or a diagnostic: no crash, no leak, no undefined
 * behaviour; the walk gives locations or -1, each location a string. An imported module must verify and survive the whole pass pipeline
 * (tth_relay_optimize), whose result must verify too. Seeds: any model.onnx of Debian's
 * libonnx-testdata (/usr/share/libonnx-testdata/data/node/NAME/model.onnx).
 *
 *   build: meson setup build-fuzz -Dfuzz=true (CC=clang); run: build-fuzz/tests/fuzz/fuzz_onnx CORPUS */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "frontend.h"
#include "onnx_scan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char **locs;
    size_t nlocs;
    if (tthctl_onnx_external_locations(data, size, &locs, &nlocs) == 0) {
        for (size_t i = 0; i < nlocs; i++)
            free(locs[i]);
        free(locs);
    } else if (locs || nlocs) {
        abort();
    }
    tth_relay_module *m = NULL;
    tth_diag d;
    tth_diag_clear(&d);
    int rc = tth_onnx_import(data, size, "fuzz", &m, &d);
    if (rc) {
        if (m || !d.message[0]) /* an error leaves no module and always says what was wrong */
            abort();
        return 0;
    }
    if (!m || tth_relay_verify(m, &d) != 0)
        abort();
    tth_diag_clear(&d);
    if (tth_relay_optimize(m, &d) == 0 && tth_relay_verify(m, &d) != 0)
        abort();
    char *text = tth_relay_print(m);
    free(text);
    tth_relay_module_free(m);
    return 0;
}
