/* fuzz_onnx.c: libFuzzer target for the ONNX importer (tth_onnx_import) and the Relay passes,
 * and for tthctl's walk of a model for its external data files (client/onnx_scan.c).
 *
 * Any byte string must give either a module or a diagnostic: no crash, no leak, no undefined
 * behaviour; the walk gives locations or -1, each location a string. An imported module must verify and survive the whole pass pipeline
 * (tth_relay_optimize), whose result must verify too. The same bytes imported from a mapping, as
 * the worker imports a model file (parsed as a skeleton without the main graph's weights, each
 * weight read from the mapping: docs/tthctl.md, "Large models"), must give the same result: the
 * same code, and the same printed module. Seeds: any model.onnx of Debian's
 * libonnx-testdata (/usr/share/libonnx-testdata/data/node/NAME/model.onnx).
 *
 *   build: meson setup build-fuzz -Dfuzz=true (CC=clang); run: build-fuzz/tests/fuzz/fuzz_onnx CORPUS */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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
    tth_relay_module *m = NULL, *mm = NULL;
    tth_diag d, dm;
    tth_diag_clear(&d);
    tth_diag_clear(&dm);
    int rc = tth_onnx_import(data, size, "fuzz", &m, &d);
    /* from a mapping (a private copy: the importer gives its pages back as it reads them) */
    void *map = size ? mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : MAP_FAILED;
    if (map != MAP_FAILED) {
        memcpy(map, data, size);
        tth_onnx_external ext = {.bytes_mapped = 1};
        int rcm = tth_onnx_import_ext(map, size, "fuzz", NULL, NULL, &ext, &mm, &dm);
        munmap(map, size);
        if (rcm != rc || (rc && strcmp(d.message, dm.message) != 0))
            abort();
        if (!rc) {
            char *a = tth_relay_print(m), *b = tth_relay_print(mm);
            if (!a || !b || strcmp(a, b) != 0)
                abort();
            free(a);
            free(b);
        }
        tth_relay_module_free(mm);
    }
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
