#!/usr/bin/python3
"""cmsis-nn artifacts executed on this machine: int8 models (int8_models.py) compiled through tthd
for `cmsis-nn,c` on Cortex-M55 (MVE), M4 (DSP) and M0 (neither) and for plain `c`, each built as
its README says with the host's cc (-Wall -Wextra -Werror) and linked with tth's reference
implementation of CMSIS-NN (plugins/cmsisnn/reference), compiled to model the contracts of the
matching CMSIS-NN build (-DTTH_NNREF_MVE / -DTTH_NNREF_DSP). Checks:
  - the partition: every convolution, matmul, pool, add, mul and softmax on cmsis-nn;
  - every output within one quantization step of the numpy reference of int8_models.py, for
    the cmsis-nn artifacts and for `c`;
  - the three CPU builds give identical bytes (same integer arithmetic, different contracts);
  - the M55 and M4 artifacts, built with arm-none-eabi-gcc (-Wall -Wextra -Werror) with the
    reference compiled for that CPU (MVE code paths' contracts on the M55), run as firmware on
    QEMU's mps3-an547 and mps2-an386 boards (scripts/run-cortexm) and give the host's bytes
    (skipped, with a line saying so, without qemu-system-arm or arm-none-eabi-gcc).

    tests/plugins/cmsisnn/executed.py --tthctl build/client/tthctl [--keep DIR]

Exit status 77 (skipped) without cc, numpy or onnx.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support"))
from private_tthd import PrivateTthd  # noqa: E402
from artifact_main import main_c  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
REFERENCE = os.path.join(ROOT, "plugins", "cmsisnn", "reference")

TARGETS = [
    # (label, target, reference build defines)
    ("c", "c", None),
    ("m55", "cmsis-nn,c -mcpu=cortex-m55", ["-DTTH_NNREF_MVE"]),
    ("m4", "cmsis-nn,c -mcpu=cortex-m4", ["-DTTH_NNREF_DSP"]),
    ("m0", "cmsis-nn,c -mcpu=cortex-m0", []),
]
BOARDS = {"m55": "mps3-an547", "m4": "mps2-an386"}  # emulated boards for those artifacts
# ops the cmsis-nn kind must take in these models (qnn.quantize of a float input and the int8
# reshape before the classifier stay on c)
OFFLOADED = {"qnn.conv2d", "qnn.matmul", "nn.max_pool2d", "nn.avg_pool2d", "nn.softmax", "multiply"}


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def build_and_run(args, case, label, target, defines, work):
    import numpy as np
    d = os.path.join(work, os.path.basename(case) + "-" + label)
    os.makedirs(d)
    tar = os.path.join(d, "a.tar")
    c = run([args.tthctl, "--socket", args.socket, "--no-start", "-q", "compile", os.path.join(case, "model.onnx"),
             "--target", target, "--name", "model", "-o", tar])
    if c.returncode != 0:
        return None, None, "compile: " + c.stderr.strip()
    with tarfile.open(tar) as t:
        t.extractall(d)
    meta = json.load(open(os.path.join(d, "metadata.json")))
    # constants bound at run time (docs/artifact.md): the parameters file first, as README.txt says
    bind = any(m.get("meta", {}).get("bind_constants") for m in meta["modules"])
    with open(os.path.join(d, "main.c"), "w") as f:
        f.write(main_c(meta, "model", bind_parameters=bind))
    srcs = [os.path.join(d, s) for s in meta["files"]["sources"]]
    cmd = ["cc", "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-I", os.path.join(d, "include"),
           "-o", os.path.join(d, "prog"), os.path.join(d, "main.c")] + srcs
    if defines is not None:
        cmd += ["-I", REFERENCE] + defines + [os.path.join(REFERENCE, "arm_nn_reference.c")]
    b = run(cmd + ["-lm"])
    if b.returncode != 0:
        return None, None, "build: " + (b.stdout + b.stderr).strip()[-3000:]
    x = np.load(os.path.join(case, "input_0.npy"))
    x.tofile(os.path.join(d, "x.bin"))
    params = [os.path.join(d, meta["files"]["parameters"])] if bind else []
    r = run([os.path.join(d, "prog")] + params + [os.path.join(d, "x.bin"), os.path.join(d, "y.bin")], timeout=120)
    if r.returncode != 0:
        return None, None, "run: exit %d %s" % (r.returncode, r.stderr.strip())
    want = np.load(os.path.join(case, "expected_0.npy"))
    y = np.fromfile(os.path.join(d, "y.bin"), dtype=want.dtype).reshape(want.shape)
    return y, meta, None


def check_case(args, case, work):
    import numpy as np  # noqa: F811
    want = np.load(os.path.join(case, "expected_0.npy"))
    # the output is a dequantized softmax: one step is 1/256
    step = 1.0 / 256
    failures, outputs = [], {}
    for label, target, defines in TARGETS:
        y, meta, why = build_and_run(args, case, label, target, defines, work)
        if why:
            failures.append("%s: %s" % (label, why))
            continue
        outputs[label] = y
        diff = np.abs(y.astype(np.float64) - want)
        if diff.max() > step * 1.0001:
            i = int(np.argmax(diff))
            failures.append("%s: output differs from numpy by %.4g (%.2f steps) at %d: %r vs %r" % (
                label, diff.max(), diff.max() / step, i, float(y.flat[i]), float(want.flat[i])))
        if defines is not None:
            kinds = {}
            for o in meta["partition"]["ops"]:
                kinds.setdefault(o["op"], set()).add(o["kind"])
            stray = sorted(op for op in OFFLOADED if op in kinds and kinds[op] != {"cmsis-nn"})
            if stray:
                failures.append("%s: not offloaded to cmsis-nn: %s" % (label, ", ".join(stray)))
            if not any("cmsis-nn" in k for k in kinds.values()):
                failures.append("%s: nothing offloaded to cmsis-nn" % label)
    npu = [outputs[k] for k in ("m55", "m4", "m0") if k in outputs]
    for other in npu[1:]:
        if other.tobytes() != npu[0].tobytes():
            failures.append("the M55, M4 and M0 builds disagree")
            break
    if args.boards:
        for label, board in BOARDS.items():
            if label not in outputs:
                continue
            d = os.path.join(work, os.path.basename(case) + "-" + label)
            out = os.path.join(d, "board")
            r = run([os.path.join(ROOT, "scripts", "run-cortexm"), os.path.join(d, "a.tar"), "--board", board,
                     "x=" + os.path.join(case, "input_0.npy"), "--out", out, "-I", REFERENCE,
                     "--extra-src", os.path.join(REFERENCE, "arm_nn_reference.c")], timeout=300)
            if r.returncode != 0:
                failures.append("%s on %s: %s" % (label, board, r.stderr.strip()[-1500:]))
                continue
            got = np.load(os.path.join(out, "y.npy"))
            if got.tobytes() != outputs[label].tobytes():
                failures.append("%s on %s: the board's output differs from the host's" % (label, board))
            icount = [ln for ln in r.stdout.splitlines() if "instructions" in ln]
            print("    %s on %s: same bytes as the host%s" % (
                label, board, "; " + icount[0].split(": ", 2)[-1].split(" (")[0] if icount else ""))
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tthctl", required=True)
    ap.add_argument("--keep", help="work in this directory and keep it")
    args = ap.parse_args()
    try:
        import numpy  # noqa: F401
        import onnx  # noqa: F401
    except ImportError:
        print("cmsisnn executed: skipped, python3-numpy or python3-onnx is not installed")
        return 77
    if not shutil.which("cc"):
        print("cmsisnn executed: skipped, no cc")
        return 77
    missing = [t for t in ("qemu-system-arm", "arm-none-eabi-gcc") if not shutil.which(t)]
    args.boards = not missing
    if missing:
        print("cmsisnn executed: the emulated boards are skipped, %s not installed (scripts/setup installs it)"
              % " and ".join(missing))
    args.tthctl = os.path.abspath(args.tthctl)
    work = args.keep or tempfile.mkdtemp(prefix="tth-cmsisnn-run-")
    os.makedirs(work, exist_ok=True)
    daemon = PrivateTthd(args.tthctl, work)
    args.socket = daemon.socket
    failures = []
    try:
        cases = os.path.join(work, "models")
        g = run(["/usr/bin/python3", os.path.join(HERE, "int8_models.py"), cases])
        if g.returncode != 0:
            failures.append("int8_models.py: exit %d %s" % (g.returncode, g.stderr))
        else:
            for name in sorted(os.listdir(cases)):
                f = check_case(args, os.path.join(cases, name), work)
                print("%-16s %s" % (name, "ok" if not f else "FAILED"))
                for why in f:
                    print("    " + why)
                failures += f
        why = daemon.stop()
        if why:
            failures.append(why)
    finally:
        daemon.close()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("cmsis-nn executed on the host: %d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
