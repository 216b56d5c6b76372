#!/usr/bin/python3
"""tth's generated C as real Cortex-M firmware: models compiled through a private tthd (tthctl
compile, targets c -mcpu=cortex-m4 and c -mcpu=cortex-m55), built and run by scripts/run-cortexm
on QEMU's mps2-an386 (Cortex-M4) and mps3-an547 (Cortex-M55) boards (docs/cortexm.md).

    tests/cortexm/run_models.py --tthctl build/client/tthctl

Checks: examples/digits.onnx against numpy's answer (examples/digit_expected.npy) and ONNX node
tests against their output_0.pb, float32 within |a-b| <= 1e-4 + 1e-4*|b| (as the conformance
runners), integers exactly; the integer models' Cortex-M outputs bit for bit against the same
artifact built with the host's cc as its README.txt says and run on the host; a cmsis-nn,c
artifact with tth's reference CMSIS-NN as --extra-src (within one quantization step of numpy,
bit for bit against the host build); digits built with -O3 for the Cortex-M55, where GCC
vectorizes the model's matmul with MVE (the startup code enables MVE); the instruction
count's calibration (one SysTick tick per 40 instructions at the M4 board's 25 MHz, 31.25 at the
M55 board's 32 MHz, under -icount shift=0); and run-cortexm's errors: an entry that returns
non-zero, one that faults, one that hangs (timeout), a missing input.
Exit status 77 (skipped) when qemu-system-arm, arm-none-eabi-gcc with newlib, numpy or onnx is
missing.
"""
import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support"))
from private_tthd import PrivateTthd  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.path.dirname(os.path.dirname(HERE))
RUN_CORTEXM = os.path.join(SOURCE_ROOT, "scripts", "run-cortexm")
NODE = "/usr/share/libonnx-testdata/data/node"

BOARDS = [("cortex-m4", "mps2-an386", 40.0), ("cortex-m55", "mps3-an547", 31.25)]
NODE_CASES = [
    "test_conv_with_strides_padding",
    "test_conv_with_strides_and_asymmetric_padding",
    "test_softmax_axis_1",
    "test_qlinearconv",
    "test_qlinearmatmul_2D",
    "test_matmulinteger",
]

HOST_MAIN_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include "%(header)s"

static void *read_all(const char *path, size_t n)
{
    void *p = malloc(n ? n : 1);
    FILE *f = fopen(path, "rb");
    if (!p || !f || fread(p, 1, n, f) != n) { fprintf(stderr, "cannot read %%s\n", path); exit(2); }
    fclose(f);
    return p;
}

static void write_all(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) { fprintf(stderr, "cannot write %%s\n", path); exit(2); }
}

static unsigned char ws[%(ws)s + 1] __attribute__((aligned(%(align)s)));

int main(int argc, char **argv)
{
    (void)argc;
    struct %(prefix)s_inputs in = { %(inputs)s };
    struct %(prefix)s_outputs out = { %(outputs)s };
    int32_t rc = %(prefix)s_run(&in, &out, ws);
    if (rc != 0) { fprintf(stderr, "entry returned %%d\n", (int)rc); return 1; }
%(writes)s
    return 0;
}
"""


def skip_reason():
    for tool, pkg in (("qemu-system-arm", "qemu-system-arm"), ("arm-none-eabi-gcc", "gcc-arm-none-eabi")):
        if not shutil.which(tool):
            return "%s is not installed (%s)" % (tool, pkg)
    libc = subprocess.run(["arm-none-eabi-gcc", "-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard",
                           "-print-file-name=libc.a"], capture_output=True, text=True).stdout.strip()
    if not os.path.isabs(libc):
        return "newlib for arm-none-eabi is not installed (libnewlib-arm-none-eabi)"
    try:
        import numpy  # noqa: F401
        import onnx  # noqa: F401
    except ImportError:
        return "python3-numpy/python3-onnx is not installed"
    return None


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def load_pb(path):
    import onnx
    from onnx import numpy_helper
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def node_case(name):
    """(model, {input name: array}, {output name: expected array}) of an ONNX node test."""
    import onnx
    d = os.path.join(NODE, name)
    g = onnx.load(os.path.join(d, "model.onnx")).graph
    init = {i.name for i in g.initializer}
    ins = [i.name for i in g.input if i.name not in init]
    data = os.path.join(d, "test_data_set_0")
    inputs = {n: load_pb(os.path.join(data, "input_%d.pb" % k)) for k, n in enumerate(ins)}
    outputs = {o.name: load_pb(os.path.join(data, "output_%d.pb" % k)) for k, o in enumerate(g.output)}
    return os.path.join(d, "model.onnx"), inputs, outputs


def safe_name(name):  # as scripts/run-cortexm names its .npy files
    s = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    return s if s not in ("", ".", "..") else "output"


def compare(got, want, how, atol=None):
    import numpy as np
    if got.shape != want.shape:
        return "%s: shape %s, expected %s" % (how, got.shape, want.shape)
    if got.dtype != want.dtype:
        return "%s: dtype %s, expected %s" % (how, got.dtype, want.dtype)
    if np.issubdtype(want.dtype, np.floating):
        diff = np.abs(got.astype(np.float64) - want)
        bad = ~(diff <= (atol if atol is not None else 1e-4 + 1e-4 * np.abs(want.astype(np.float64))))
    else:
        bad = got != want
    if bad.any():
        i = int(np.argmax(bad))
        return "%s: %d of %d elements differ; element %d: got %r, expected %r" % (
            how, int(bad.sum()), bad.size, i, got.flat[i].item(), want.flat[i].item())
    return None


def compile_model(args, model, cpu, tar, kinds=""):
    target = kinds + "c -mcpu=" + cpu
    c = run([args.tthctl, "--socket", args.socket, "--no-start", "-q", "compile", model,
             "--target", target, "--name", "model", "-o", tar])
    return None if c.returncode == 0 else "compile for %s: %s" % (target, c.stderr.strip())


def run_on_board(d, tar, board, inputs, extra=(), label=""):
    """scripts/run-cortexm on the artifact -> (error, {output file stem: array}, its stdout)."""
    import numpy as np
    specs = []
    for k, (name, a) in enumerate(inputs.items()):
        p = os.path.join(d, "input_%d.npy" % k)
        np.save(p, a)
        specs.append("%s=%s" % (name, p))
    out = os.path.join(d, "out-" + board + label)
    r = run([RUN_CORTEXM, tar, "--board", board, "--out", out, "--timeout", "60"] + list(extra) + specs,
            timeout=300)
    if r.returncode != 0:
        return "run-cortexm on %s: exit %d: %s" % (board, r.returncode, (r.stdout + r.stderr).strip()), None, r.stdout
    got = {f[:-4]: np.load(os.path.join(out, f)) for f in os.listdir(out) if f.endswith(".npy")}
    return None, got, r.stdout


def run_on_host(d, tar, cflags=()):
    """The artifact built with the host's cc as its README.txt says (with cflags: a library it
    needs), run -> (error, {stem: bytes})."""
    import json
    host = os.path.join(d, "host")
    os.makedirs(host)
    with tarfile.open(tar) as t:
        t.extractall(host)
    meta = json.load(open(os.path.join(host, "metadata.json")))
    header = open(os.path.join(host, meta["files"]["header"])).read()
    ws = re.search(r"#define\s+(TTH_\w+_WORKSPACE_SIZE)\b", header).group(1)
    align = re.search(r"#define\s+(TTH_\w+_WORKSPACE_ALIGNMENT)\b", header).group(1)
    prefix = meta["executor"]["entry"][:-len("_run")]
    n_in = len(meta["inputs"])
    main_c = HOST_MAIN_C % {
        "header": os.path.basename(meta["files"]["header"]), "ws": ws, "align": align, "prefix": prefix,
        "inputs": ", ".join(".%s = read_all(argv[%d], %d)" % (i["c_name"], k + 1, i["bytes"])
                            for k, i in enumerate(meta["inputs"])),
        "outputs": ", ".join(".%s = malloc(%d)" % (o["c_name"], max(1, o["bytes"])) for o in meta["outputs"]),
        "writes": "\n".join("    write_all(argv[%d], out.%s, %d);" % (n_in + 1 + k, o["c_name"], o["bytes"])
                            for k, o in enumerate(meta["outputs"])),
    }
    with open(os.path.join(host, "main.c"), "w") as f:
        f.write(main_c)
    exe = os.path.join(host, "prog")
    b = run(["cc", "-std=c99", "-O2", "-I", os.path.join(host, "include"), "-o", exe, os.path.join(host, "main.c")]
            + [os.path.join(host, s) for s in meta["files"]["sources"]] + list(cflags) + ["-lm"])
    if b.returncode != 0:
        return "host cc build: " + b.stderr.strip()[-2000:], None
    ins = [os.path.join(d, "input_%d.bin" % k) for k in range(n_in)]
    outs = [os.path.join(host, "output_%d.bin" % k) for k in range(len(meta["outputs"]))]
    import numpy as np
    for k, p in enumerate(ins):
        np.load(os.path.join(d, "input_%d.npy" % k)).tofile(p)
    r = run([exe] + ins + outs, timeout=60)
    if r.returncode != 0:
        return "host run: exit %d %s" % (r.returncode, r.stderr.strip()), None
    return None, {safe_name(o["name"]): open(p, "rb").read() for o, p in zip(meta["outputs"], outs)}


def one_model(args, work, name, model, inputs, expected, kinds="", library=None, atol=None):
    """Compile for each board's CPU (target <kinds>c -mcpu=...), run on the board, compare with
    the expected outputs (float: the conformance tolerance, or atol; integers exactly); integer
    models and those built with a library also bit for bit against the host build. library:
    (run-cortexm arguments, host cc arguments) for each CPU. Returns a list of failure lines."""
    import numpy as np
    failures = []
    integer = all(np.issubdtype(a.dtype, np.integer) for a in expected.values())
    for cpu, board, per_tick in BOARDS:
        d = os.path.join(work, name, cpu)
        os.makedirs(d)
        tar = os.path.join(d, "model.tar")
        why = compile_model(args, model, cpu, tar, kinds)
        if why:
            failures.append("%s %s: %s" % (name, cpu, why))
            continue
        extra, host_flags = library(cpu) if library else ((), ())
        why, got, stdout = run_on_board(d, tar, board, inputs, extra)
        if why:
            failures.append("%s: %s" % (name, why))
            continue
        bad = len(failures)
        for oname, want in expected.items():
            stem = safe_name(oname)
            if stem not in got:
                failures.append("%s on %s: no output %s.npy" % (name, board, stem))
                continue
            why = compare(got[stem], want, "%s on %s, output %s" % (name, board, oname), atol)
            if why:
                failures.append(why)
        m = re.search(r"about (\d+) instructions .* one tick is ([0-9.]+) instructions", stdout)
        if not m:
            failures.append("%s on %s: no instruction count in run-cortexm's report" % (name, board))
        elif float(m.group(2)) != per_tick or int(m.group(1)) <= 0:
            failures.append("%s on %s: instruction count %s with %s instructions a tick, expected %g a tick"
                            % (name, board, m.group(1), m.group(2), per_tick))
        if (integer or library) and len(failures) == bad:
            why, host = run_on_host(d, tar, host_flags)
            if why:
                failures.append("%s %s: %s" % (name, cpu, why))
                continue
            for stem, data in host.items():
                if got[stem].tobytes() != data:
                    failures.append("%s: output %s on %s differs from the host cc build of the same artifact"
                                    % (name, stem, board))
    return failures


def mve_run(args, work):
    """digits for the Cortex-M55 built with -O3, where GCC vectorizes with MVE (q registers): the
    startup code's CPACR setting lets that code run; the outputs stay right."""
    import numpy as np
    d = os.path.join(work, "digits-mve")
    os.makedirs(d)
    tar = os.path.join(d, "model.tar")
    why = compile_model(args, os.path.join(SOURCE_ROOT, "examples", "digits.onnx"), "cortex-m55", tar)
    if why:
        return ["digits -O3: " + why]
    why, got, _ = run_on_board(d, tar, "mps3-an547",
                               {"image": np.load(os.path.join(SOURCE_ROOT, "examples", "digit_input.npy"))},
                               ["--cflags=-O3"])
    if why:
        return ["digits -O3: " + why]
    failures = []
    why = compare(got.get("probabilities", np.zeros(0)),
                  np.load(os.path.join(SOURCE_ROOT, "examples", "digit_expected.npy")), "digits -O3 on mps3-an547")
    if why:
        failures.append(why)
    # an MVE instruction (q registers) in one of the model's functions (model_*)
    dis = run(["arm-none-eabi-objdump", "-d", os.path.join(d, "out-mps3-an547", "firmware", "fw.elf")])
    fn, mve = None, set()
    for line in dis.stdout.splitlines():
        m = re.match(r"[0-9a-f]+ <(\w+)>:$", line)
        if m:
            fn = m.group(1)
        elif fn and fn.startswith("model_") and re.search(r"\tv\w+\.\w+\s+q[0-7],", line):
            mve.add(fn)
    if dis.returncode != 0 or not mve:
        failures.append("digits -O3 on mps3-an547: no MVE instruction in the model's functions (objdump exit %d)"
                        % dis.returncode)
    return failures


def cmsisnn_case(work):
    """tests/plugins/cmsisnn/int8_models.py's qdq_softmax (QLinearConv, then a quantized softmax), for
    cmsis-nn,c: the cmsis-nn kind's C with tth's reference CMSIS-NN given to run-cortexm as
    --extra-src and -I, built for the CPU's contracts (-DTTH_NNREF_MVE / _DSP)."""
    import numpy as np
    d = os.path.join(work, "int8")
    g = run(["/usr/bin/python3", os.path.join(SOURCE_ROOT, "tests", "plugins", "cmsisnn", "int8_models.py"), d])
    if g.returncode != 0:
        return None, "int8_models.py: exit %d %s" % (g.returncode, g.stderr.strip())
    case = os.path.join(d, "qdq_softmax")
    model = os.path.join(case, "model.onnx")
    import onnx
    name = onnx.load(model).graph.input[0].name
    out = onnx.load(model).graph.output[0].name
    ref = os.path.join(SOURCE_ROOT, "plugins", "cmsisnn", "reference")

    def library(cpu):
        define = "-DTTH_NNREF_MVE" if cpu == "cortex-m55" else "-DTTH_NNREF_DSP"
        return (["--extra-src", os.path.join(ref, "arm_nn_reference.c"), "-I", ref, "--cflags=" + define],
                ["-I", ref, define, os.path.join(ref, "arm_nn_reference.c")])
    # the output is a dequantized softmax: one quantization step is 1/256 (as tests/plugins/cmsisnn)
    return ("cmsis-nn qdq_softmax", model, {name: np.load(os.path.join(case, "input_0.npy"))},
            {out: np.load(os.path.join(case, "expected_0.npy"))}, "cmsis-nn,", library, 1.0001 / 256), None


FAKE_ENTRY_C = r"""
#include <stdint.h>
#include "tth_model.h"
int32_t tth_model_run(const struct tth_model_inputs *inputs, struct tth_model_outputs *outputs, void *workspace)
{
    (void)inputs; (void)outputs; (void)workspace;
#if BEHAVIOUR == 1
    return 7;
#elif BEHAVIOUR == 2
    return *(volatile int32_t *)0xF0000000u;
#elif BEHAVIOUR == 4
    ((volatile uint8_t *)inputs->image)[3] = 1;
    return 0;
#else
    for (;;) __asm__ volatile("");
#endif
}
"""


def error_paths(args, work):
    """run-cortexm's errors, on an artifact whose one source is replaced by an entry that returns
    7, that reads unmapped memory, that never returns, or that writes to its (const, read-only)
    input."""
    import numpy as np
    failures = []
    d = os.path.join(work, "errors")
    os.makedirs(d)
    tar = os.path.join(d, "model.tar")
    why = compile_model(args, os.path.join(SOURCE_ROOT, "examples", "digits.onnx"), "cortex-m4", tar)
    if why:
        return ["error paths: " + why]
    image = os.path.join(d, "image.npy")
    np.save(image, np.load(os.path.join(SOURCE_ROOT, "examples", "digit_input.npy")))
    cases = [(1, "returned 7", 60, "mps2-an386"), (2, "BusFault", 60, "mps2-an386"), (3, "timed out", 3, "mps2-an386"),
             (4, "a write to a constant or an input", 60, "mps2-an386"),
             (4, "a write to a constant or an input", 60, "mps3-an547")]
    for behaviour, want, timeout, board in cases:
        art = os.path.join(d, "art%d-%s" % (behaviour, board))
        os.makedirs(art)
        with tarfile.open(tar) as t:
            t.extractall(art)
        import json
        src = json.load(open(os.path.join(art, "metadata.json")))["files"]["sources"][0]
        with open(os.path.join(art, src), "w") as f:
            f.write("#define BEHAVIOUR %d\n" % behaviour + FAKE_ENTRY_C)
        r = run([RUN_CORTEXM, art, "--board", board, "--out", os.path.join(art, "out"),
                 "--timeout", str(timeout), "image=" + image], timeout=120)
        if r.returncode != 1 or want not in r.stderr:
            failures.append("run-cortexm on %s, entry behaviour %d: exit %d, expected 1 and %r in: %s"
                            % (board, behaviour, r.returncode, want, r.stderr.strip()))
    r = run([RUN_CORTEXM, tar, "--board", "mps2-an386", "--out", os.path.join(d, "out")], timeout=60)
    if r.returncode != 1 or "missing input: image" not in r.stderr:
        failures.append("run-cortexm without inputs: exit %d: %s" % (r.returncode, r.stderr.strip()))
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tthctl", required=True)
    args = ap.parse_args()
    missing = skip_reason()
    if missing:
        print("cortexm: skipped, %s" % missing)
        return 77
    import numpy as np
    args.tthctl = os.path.abspath(args.tthctl)
    work = tempfile.mkdtemp(prefix="tth-cortexm-")
    daemon = PrivateTthd(args.tthctl, work)
    args.socket = daemon.socket
    failures = []
    start = time.monotonic()
    try:
        models = [("digits", os.path.join(SOURCE_ROOT, "examples", "digits.onnx"),
                   {"image": np.load(os.path.join(SOURCE_ROOT, "examples", "digit_input.npy"))},
                   {"probabilities": np.load(os.path.join(SOURCE_ROOT, "examples", "digit_expected.npy"))})]
        models += [(n,) + node_case(n) for n in NODE_CASES]
        cmsisnn, why = cmsisnn_case(work)
        if why:
            failures.append(why)
        else:
            models.append(cmsisnn)
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            def timed(f, *a):
                t = time.monotonic()
                return f(*a), time.monotonic() - t
            jobs = [(m[0], pool.submit(timed, one_model, args, work, *m)) for m in models]
            jobs.append(("digits -O3 (MVE) on mps3-an547", pool.submit(timed, mve_run, args, work)))
            jobs.append(("run-cortexm errors", pool.submit(timed, error_paths, args, work)))
            for name, job in jobs:
                why, seconds = job.result()
                print("%-48s %-6s %5.1f s" % (name, "ok" if not why else "FAILED", seconds))
                for w in why:
                    print("    " + w)
                failures += why
        why = daemon.stop()
        if why:
            failures.append(why)
    finally:
        daemon.close()
        shutil.rmtree(work, ignore_errors=True)
    print("cortexm: %d failed (%.1f s)" % (len(failures), time.monotonic() - start))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
