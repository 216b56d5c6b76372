"""An artifact of the Python tests (tests/*/*.py) run on the host and on the boards.

The C main they build it with (its README's cc line plus this file, main_c): argv gives every
input's file, then every output's file, each the raw bytes of metadata.json's size; the entry runs
once and the outputs are written. With bind_parameters, argv[1] is first the artifact's
parameters file: the entry runs once unbound (printing "unbound <status>"), the parameters are
bound (tth_<model>_bind_parameters, docs/artifact.md) and it runs again.

    tar = os.path.join(d, "model.tar")
    meta, why = compile_unpacked(daemon, model, target, tar)    # tthd compiles, d holds it
    exe, why = build(meta, d)                                   # main_c + cc as README.txt says
    why, outputs, stdout = run_program(exe, meta, d, [x])       # here (or under qemu: wrapper)
    why, got, stdout = run_board(tar, "mps2-an386", {"x": x}, out)   # scripts/run-cortexm: {"y": ...}
    why = compare(outputs[0], want, "how")                      # numpy's answer, as the runners
"""
import json
import os
import re
import shutil
import tarfile

from private_tthd import run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN_CORTEXM = os.path.join(ROOT, "scripts", "run-cortexm")
NN_REFERENCE = os.path.join(ROOT, "plugins", "cmsisnn", "reference")
# the host's cc as the tests build an artifact with; the AArch64 cross compiler (static, run by
# qemu-aarch64)
HOST_CC = ["cc", "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror"]
AARCH64_CC = ["aarch64-linux-gnu-gcc", "-std=c11", "-O2", "-static", "-pthread"]
# what run_board needs
BOARD_TOOLS = ("qemu-system-arm", "arm-none-eabi-gcc")


def main_c(meta, model, bind_parameters=False):
    """the C main described above, for the artifact of metadata meta named model"""
    ins, outs = meta["inputs"], meta["outputs"]
    first = 2 if bind_parameters else 1
    lines = ["#include <stdio.h>", "#include <stdlib.h>", '#include "tth_%s.h"' % model,
             "static _Alignas(TTH_%s_WORKSPACE_ALIGNMENT) unsigned char ws[TTH_%s_WORKSPACE_SIZE + 1];"
             % (model.upper(), model.upper()),
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
        lines.append("    out.%s = malloc(%d);" % (t["c_name"], max(1, t["bytes"])))
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


def load_pb(path):
    """A TensorProto file (an ONNX test's input_0.pb) as a numpy array."""
    import onnx
    from onnx import numpy_helper
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def generated_cases(script, out):
    """A case generator (python3 SCRIPT OUT, e.g. tests/plugins/cmsisnn/int8_models.py) run: (the
    case directories it wrote in out, sorted, None), or ([], why)."""
    g = run(["/usr/bin/python3", script, out])
    if g.returncode != 0:
        return [], "%s: exit %d %s" % (os.path.basename(script), g.returncode, g.stderr.strip())
    return [os.path.join(out, n) for n in sorted(os.listdir(out))], None


def unpack(tar, d):
    """The artifact tar extracted into d; its metadata.json."""
    with tarfile.open(tar) as t:
        t.extractall(d)
    with open(os.path.join(d, "metadata.json")) as f:
        return json.load(f)


def compile_unpacked(daemon, model, target, tar, *extra):
    """The model compiled by daemon (a PrivateTthd) for target, named "model", into tar and
    unpacked beside it: (its metadata, None), or (None, why)."""
    why = daemon.compile(model, target, tar, "--name", "model", *extra)
    return (None, why) if why else (unpack(tar, os.path.dirname(tar)), None)


def nn_reference(define):
    """tth's reference CMSIS-NN built for a CPU's contracts (define: -DTTH_NNREF_MVE, -DTTH_NNREF_DSP,
    or None for neither): (the host cc's arguments, scripts/run-cortexm's arguments)."""
    defines = [define] if define else []
    source = os.path.join(NN_REFERENCE, "arm_nn_reference.c")
    return (["-I", NN_REFERENCE] + defines + [source],
            ["-I", NN_REFERENCE, "--extra-src", source] + ["--cflags=" + x for x in defines])


def build(meta, d, cc=HOST_CC, flags=(), bind_parameters=False, main=None):
    """The artifact unpacked in d built as its README.txt says with main (the C text; main_c's by
    default): cc over d/main.c, the listed sources and objects, with -I for its include
    directories, then flags and -lm. (The program's path, None), or (None, why)."""
    with open(os.path.join(d, "main.c"), "w") as f:
        f.write(main if main is not None else main_c(meta, "model", bind_parameters))
    files = meta["files"]
    incs = ["-I" + os.path.join(d, "include")]
    codegen = os.path.join(d, "codegen")
    incs += ["-I" + os.path.join(codegen, k, "include") for k in sorted(os.listdir(codegen))
             if os.path.isdir(os.path.join(codegen, k, "include"))] if os.path.isdir(codegen) else []
    exe = os.path.join(d, "prog")
    b = run(list(cc) + incs + ["-o", exe, os.path.join(d, "main.c")]
            + [os.path.join(d, s) for s in files["sources"] + files.get("objects", [])] + list(flags) + ["-lm"])
    if b.returncode != 0:
        return None, "build with %s: %s" % (cc[0], (b.stdout + b.stderr).strip()[-3000:])
    return exe, None


def run_program(exe, meta, d, inputs, wrapper=(), parameters=False, timeout=300):
    """exe (built by build; under wrapper, e.g. qemu-aarch64) on inputs (arrays in metadata's
    order), each written raw to d, with the artifact's parameters file first when parameters:
    (None, its outputs as arrays of metadata's dtype and shape, its stdout), or (why, None, stdout)."""
    import numpy as np
    ins = [os.path.join(d, "input_%d.bin" % k) for k in range(len(inputs))]
    outs = [os.path.join(d, "output_%d.bin" % k) for k in range(len(meta["outputs"]))]
    for a, p in zip(inputs, ins):
        np.ascontiguousarray(a).tofile(p)
    params = [os.path.join(d, meta["files"]["parameters"])] if parameters else []
    r = run(list(wrapper) + [exe] + params + ins + outs, timeout=timeout)
    if r.returncode != 0:
        return "run: exit %d %s" % (r.returncode, r.stderr.strip()), None, r.stdout
    return None, [np.fromfile(p, dtype=o["dtype"]).reshape(o["shape"]) for o, p in zip(meta["outputs"], outs)], r.stdout


def safe_name(name):
    """an output's file stem as scripts/run-cortexm names its .npy files"""
    s = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    return s if s not in ("", ".", "..") else "output"


def run_board(tar, board, inputs, out, extra=(), timeout=None):
    """scripts/run-cortexm on the artifact (tar, or its unpacked directory) on an emulated board,
    inputs {name: array} saved beside out, extra its further arguments: (None, {output file stem:
    array}, its stdout), or (why, None, stdout)."""
    import numpy as np
    specs = []
    for name, a in inputs.items():
        p = "%s-input-%s.npy" % (out, safe_name(name))
        np.save(p, a)
        specs.append("%s=%s" % (name, p))
    limit = ["--timeout", str(timeout)] if timeout else []
    r = run([RUN_CORTEXM, tar, "--board", board, "--out", out] + limit + list(extra) + specs, timeout=300)
    if r.returncode != 0:
        return "run-cortexm on %s: exit %d: %s" % (board, r.returncode, (r.stdout + r.stderr).strip()[-1500:]), \
            None, r.stdout
    return None, {f[:-4]: np.load(os.path.join(out, f)) for f in os.listdir(out) if f.endswith(".npy")}, r.stdout


def boards_ready(title):
    """True when run_board can run (BOARD_TOOLS installed); else False, printing that title's
    emulated boards are skipped."""
    missing = [t for t in BOARD_TOOLS if not shutil.which(t)]
    if missing:
        print("%s: the emulated boards are skipped, %s not installed (scripts/setup installs it)"
              % (title, " and ".join(missing)))
    return not missing


def board_instructions(stdout):
    """run-cortexm's count of the instructions the entry call executed, as (count, instructions
    per SysTick tick); None when its report has none."""
    m = re.search(r"about (\d+) instructions .* one tick is ([0-9.]+) instructions", stdout)
    return (int(m.group(1)), float(m.group(2))) if m else None


def compare(got, want, how, atol=None):
    """None when got is want: the same shape and dtype, integers exactly, floats within atol or
    else the conformance runners' |a-b| <= 1e-4 + 1e-4*|b|; else what differs, prefixed by how."""
    import numpy as np
    if got.shape != want.shape or got.dtype != want.dtype:
        return "%s: %s %s, expected %s %s" % (how, got.dtype, got.shape, want.dtype, want.shape)
    if np.issubdtype(want.dtype, np.floating):
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        bad = ~(diff <= (atol if atol is not None else 1e-4 + 1e-4 * np.abs(want.astype(np.float64))))
    else:
        bad = got != want
    if bad.any():
        i = int(np.argmax(bad))
        return "%s: %d of %d elements differ; element %d: got %r, expected %r" % (
            how, int(bad.sum()), bad.size, i, got.flat[i].item(), want.flat[i].item())
    return None
