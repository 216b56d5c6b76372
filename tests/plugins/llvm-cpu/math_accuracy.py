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
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "support"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "daemon", "lower"))
from private_tthd import run, run_with_daemon, tthctl_args  # noqa: E402
from artifact_main import AARCH64_CC, build, compile_unpacked, run_program  # noqa: E402

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


def run_here(daemon, tar, x, d):
    """the artifact run by tthctl run on this machine: y"""
    np.save(os.path.join(d, "x.npy"), x)
    out = os.path.join(d, "out")
    r = run([daemon.tthctl, "run", tar, "--input", "x=" + os.path.join(d, "x.npy"), "--output-dir", out])
    if r.returncode != 0:
        return None, "tthctl run: " + r.stderr.strip()
    return np.load(os.path.join(out, "y.npy")), None


def run_aarch64(meta, x, d):
    """the artifact cross-built as its README says and run under qemu-aarch64: y"""
    exe, why = build(meta, d, cc=AARCH64_CC, main="#define IN_BYTES %d\n#define OUT_BYTES %d\n" % (x.nbytes, x.nbytes)
                     + MAIN_C)
    if why:
        return None, why
    why, y, _ = run_program(exe, meta, d, [x.astype("<f4")], ["qemu-aarch64"], parameters=True)
    return (None, "run under qemu: " + why) if why else (y[0], None)


def main():
    args = tthctl_args("math_accuracy")
    np.seterr(all="ignore")  # NaN, infinities and overflows are among the inputs on purpose
    cross = all(shutil.which(t) for t in ("aarch64-linux-gnu-gcc", "qemu-aarch64"))
    if not cross:
        print("math_accuracy: the AArch64 part is skipped (aarch64-linux-gnu-gcc or qemu-aarch64 missing)")

    def body(daemon, work, failures):
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
                    meta, why = compile_unpacked(daemon, path, target, tar)
                    got = None
                    if not why:
                        got, why = run_aarch64(meta, x, d) if target == AARCH64 else run_here(daemon, tar, x, d)
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
