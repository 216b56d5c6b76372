"""The C main the Python tests build an artifact with (its README's cc line plus this file):
argv gives every input's file, then every output's file, each the raw bytes of metadata.json's
size; the entry runs once and the outputs are written. With bind_parameters, argv[1] is first
the artifact's parameters file: the entry runs once unbound (printing "unbound <status>"), the
parameters are bound (tth_<model>_bind_parameters, docs/artifact.md) and it runs again.
"""


def main_c(meta, model, bind_parameters=False):
    ins, outs = meta["inputs"], meta["outputs"]
    first = 2 if bind_parameters else 1
    lines = ["#include <stdio.h>", "#include <stdlib.h>", '#include "tth_%s.h"' % model,
             "static _Alignas(16) unsigned char ws[TTH_%s_WORKSPACE_SIZE + 1];" % model.upper(),
             "static void *load(const char *p, size_t *n) {",
             "    FILE *f = fopen(p, \"rb\");",
             "    if (!f || fseek(f, 0, SEEK_END) != 0) { fprintf(stderr, \"cannot read %s\\n\", p); exit(2); }",
             "    *n = (size_t)ftell(f); rewind(f);",
             "    void *b = malloc(*n + 1);",
             "    if (!b || fread(b, 1, *n, f) != *n) { fprintf(stderr, \"cannot read %s\\n\", p); exit(2); }",
             "    fclose(f); return b; }",
             "int main(int argc, char **argv) {",
             "    size_t n;",
             "    if (argc != %d) return 2;" % (first + len(ins) + len(outs)),
             "    struct tth_%s_inputs in; struct tth_%s_outputs out;" % (model, model)]
    if bind_parameters:
        lines += ["    void *params = load(argv[1], &n);", "    size_t params_len = n;"]
    for i, t in enumerate(ins):
        lines.append("    in.%s = load(argv[%d], &n);" % (t["c_name"], first + i))
        lines.append("    if (n != %d) { fprintf(stderr, \"input %d: %%zu bytes\\n\", n); return 2; }" % (t["bytes"], i))
    for t in outs:
        lines.append("    out.%s = malloc(%d);" % (t["c_name"], t["bytes"]))
    lines.append("    int32_t rc = tth_%s_run(&in, &out, ws);" % model)
    if bind_parameters:
        lines.append("    printf(\"unbound %d\\n\", (int)rc);")
        lines.append("    rc = tth_%s_bind_parameters(params, params_len);" % model)
        lines.append("    if (rc != 0) { fprintf(stderr, \"bind: %d\\n\", (int)rc); return 1; }")
        lines.append("    rc = tth_%s_run(&in, &out, ws);" % model)
    lines.append("    if (rc != 0) { fprintf(stderr, \"tth_%s_run: %%d\\n\", (int)rc); return 1; }" % model)
    for i, t in enumerate(outs):
        lines.append("    { FILE *f = fopen(argv[%d], \"wb\"); if (!f || fwrite(out.%s, 1, %d, f) != %d) return 3; "
                     "fclose(f); }" % (first + len(ins) + i, t["c_name"], t["bytes"], t["bytes"]))
    lines.append("    return 0; }")
    return "\n".join(lines) + "\n"
