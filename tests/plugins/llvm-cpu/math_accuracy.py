#!/usr/bin/python3
"""The float32 math functions written as arithmetic (daemon/lower/lower_math.c, docs/lowering.md
"Math functions") compiled and run, against numpy over the whole float32 range: exp, tanh, erf and
sigmoid alone (element code) and as the epilogue of a matmul (vector code), for `llvm` on this
machine and `c` (run by `tthctl run`), and for an AArch64 target (cross-built from the artifact,
run under qemu-aarch64). The bound in float32 steps is numpy_ref.py's MATH_ULP, the one the
interpreter is held to (tests/daemon/lower/test_lower_numpy.c).

    tests/plugins/llvm-cpu/math_accuracy.py --tthctl build/client/tthctl

Exit status 77 (skipped) when numpy or onnx is missing; the AArch64 part is skipped (and said so)
without aarch64-linux-gnu-gcc or qemu-aarch64.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "support"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "daemon", "lower"))
from private_tthd import run_with_daemon  # noqa: E402

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from numpy_ref import MATH_ULP, math_reference, math_sweep  # noqa: E402
except ImportError:
    sys.exit(77)

from aarch64_kernels import MAIN_C  # noqa: E402

ONNX_OP = {"exp": "Exp", "tanh": "Tanh", "erf": "Erf", "sigmoid": "Sigmoid"}
AARCH64 = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72"


def model(fn, x, epilogue):
    """y = fn(x), or y = fn(x @ I) (the identity gives x exactly; the function is the matmul's
    epilogue, on vectors)"""
    nodes, inits, src = [], [], "x"
    if epilogue:
        inits.append(numpy_helper.from_array(np.eye(x.shape[1], dtype=np.float32), "eye"))
        nodes.append(helper.make_node("MatMul", ["x", "eye"], ["m"]))
        src = "m"
    nodes.append(helper.make_node(ONNX_OP[fn], [src], ["y"]))
    g = helper.make_graph(nodes, fn, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(x.shape))], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def ulp_error(got, want):
    """the largest error of got (float32) against want (float64), in float32 steps; inf where a
    NaN, an infinity or a subnormal result is not matched (see compare_ulp in test_lower_numpy.c)"""
    got = got.astype(np.float64).ravel()
    want = want.ravel()
    wf = want.astype(np.float32)
    err = np.zeros(got.shape)
    special = np.isnan(want) | np.isinf(wf)
    ok = np.where(np.isnan(want), np.isnan(got), got == wf.astype(np.float64))
    err[special & ~ok] = np.inf
    sub = ~special & (np.abs(want) < np.finfo(np.float32).tiny)
    err[sub & (np.abs(got - want) > 2.0 ** -149)] = np.inf
    norm = ~special & ~sub
    a = np.abs(wf[norm])
    step = (np.nextafter(a, np.float32(np.inf)) - a).astype(np.float64)
    err[norm] = np.abs(got[norm] - want[norm]) / step
    return float(err.max()), int(err.argmax())


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def compile_model(args, path, target, tar):
    c = run([args.tthctl, "--socket", args.socket, "--no-start", "-q", "compile", path, "--target", target,
             "--name", "model", "-o", tar])
    return None if c.returncode == 0 else "compile for %s: %s" % (target, c.stderr.strip())


def run_here(args, tar, x, d):
    """the artifact run by tthctl run on this machine: y"""
    np.save(os.path.join(d, "x.npy"), x)
    out = os.path.join(d, "out")
    r = run([args.tthctl, "run", tar, "--input", "x=" + os.path.join(d, "x.npy"), "--output-dir", out])
    if r.returncode != 0:
        return None, "tthctl run: " + r.stderr.strip()
    return np.load(os.path.join(out, "y.npy")), None


def run_aarch64(tar, x, d):
    """the artifact cross-built as its README says and run under qemu-aarch64: y"""
    import json
    with tarfile.open(tar) as t:
        t.extractall(d)
    meta = json.load(open(os.path.join(d, "metadata.json")))
    files = [os.path.join(d, f) for f in meta["files"]["sources"] + meta["files"]["objects"]]
    with open(os.path.join(d, "main.c"), "w") as f:
        f.write("#define IN_BYTES %d\n#define OUT_BYTES %d\n" % (x.nbytes, x.nbytes) + MAIN_C)
    x.astype("<f4").tofile(os.path.join(d, "x.bin"))
    exe = os.path.join(d, "prog")
    b = run(["aarch64-linux-gnu-gcc", "-std=c11", "-O2", "-static", "-pthread", "-I", os.path.join(d, "include"),
             "-o", exe, os.path.join(d, "main.c")] + files + ["-lm"])
    if b.returncode != 0:
        return None, "cross build: " + b.stderr.strip()[-2000:]
    y = os.path.join(d, "y.bin")
    r = run(["qemu-aarch64", exe, os.path.join(d, "x.bin"), y, os.path.join(d, "parameters", "model.params")],
            timeout=300)
    if r.returncode != 0:
        return None, "run under qemu: exit %d %s" % (r.returncode, r.stderr.strip())
    return np.fromfile(y, dtype="<f4").reshape(x.shape), None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tthctl", required=True)
    args = ap.parse_args()
    args.tthctl = os.path.abspath(args.tthctl)
    np.seterr(all="ignore")  # NaN, infinities and overflows are among the inputs on purpose
    cross = all(shutil.which(t) for t in ("aarch64-linux-gnu-gcc", "qemu-aarch64"))
    if not cross:
        print("math_accuracy: the AArch64 part is skipped (aarch64-linux-gnu-gcc or qemu-aarch64 missing)")
    def body(daemon, work, failures):
        args.socket = daemon.socket
        for fn, bound in MATH_ULP.items():
            for epilogue in (False, True):
                x = math_sweep(finite=epilogue)
                x = x[:len(x) // 16 * 16].reshape(-1, 16)
                want = math_reference(fn, x)
                name = "%s%s" % (fn, "_epilogue" if epilogue else "")
                path = os.path.join(work, name + ".onnx")
                onnx.save(model(fn, x, epilogue), path)
                for target in ["llvm", "c"] + ([AARCH64] if cross else []):
                    d = tempfile.mkdtemp(dir=work)
                    tar = os.path.join(d, "model.tar")
                    why = compile_model(args, path, target, tar)
                    got = None
                    if not why:
                        got, why = run_aarch64(tar, x, d) if target == AARCH64 else run_here(args, tar, x, d)
                    if not why:
                        err, at = ulp_error(got, want)
                        if err > bound:
                            why = "%.3g ulp at %s(%r): got %r, expected %r (bound %g)" % (
                                err, fn, float(x.flat[at]), float(got.flat[at]), float(want.flat[at]), bound)
                        else:
                            print("%-18s %-50s largest error %.3g ulp" % (name, target, err))
                    if why:
                        print("%-18s %-50s FAILED: %s" % (name, target, why))
                        failures.append("%s for %s" % (name, target))

    return run_with_daemon(args.tthctl, "tth-math-", body, "math functions compiled")

if __name__ == "__main__":
    sys.exit(main())
