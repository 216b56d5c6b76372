#!/usr/bin/python3
"""Large models with the default settings (docs/cache.md, "Uploads"; docs/tthctl.md, "ONNX
external data"): a chain of MatMul layers of 2048 x 2048 float weights (16 MiB each, scaled so
the values stay near 1) with a Relu after each, written by this script with --mib MiB of weights
in all, once with its weights as ONNX external data and once inline (when under ONNX's 2 GiB).
Each is compiled through a private tthd started with its defaults, by path and (inline) uploaded
with --stream, for `llvm`, run by `tthctl run` and compared with numpy's forward pass; and the
compiling worker's peak resident memory (the answer's timings.workerPeakRss) must stay within
1.5x the weights over the worker's own baseline (its peak compiling examples/digits.onnx), with
16 MiB of slack (--sanitized: ASan's shadow memory on top).

    tests/client/big_model_test.py --tthctl build/client/tthctl [--mib 320] [--keep DIR]

The meson test (client-big-models) runs --mib 320; the figures of the issue (a 1.5 GiB and a
2 GiB+ model) are the same script with --mib 1536 and --mib 2200 (bench/README.md, "Large models").
Exit status 77 (skipped) without numpy and onnx.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from private_tthd import run, run_with_daemon, skip_unless  # noqa: E402

skip_unless("big models", modules=("numpy", "onnx"))
import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

N = 2048  # a layer's weights: N x N float32, 16 MiB
# The worker's peak RSS allowed: 1.5x the weights over its baseline, plus one layer's worth of
# slack. The goal is 2x; each weight is now freed as soon as nothing reads it
# (docs/tthctl.md, "Large models") and the peak is about 1.2x over the baseline (bench/README.md),
# so a change that keeps two copies of the weights again fails here. In a sanitizer build ASan's
# shadow memory adds an eighth of what is allocated (and its quarantine of freed blocks is
# turned off for the daemon this script starts).
RSS_BOUND = 1.5
SLACK = 16 << 20
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def weights(k):
    """layer k's weights, the same for every call (a fixed seed per layer)"""
    rng = np.random.default_rng(1000 + k)
    return (rng.standard_normal((N, N), dtype=np.float32) * np.float32(1.4 / np.sqrt(N))).astype(np.float32)


def write_model(path, layers, external):
    """the chain, its weights in path's directory as <name>.data when external"""
    nodes, inits = [], []
    x = "x"
    for k in range(layers):
        w = "w%d" % k
        t = numpy_helper.from_array(weights(k), w)
        inits.append(t)
        nodes.append(helper.make_node("MatMul", [x, w], ["m%d" % k], name="matmul%d" % k))
        nodes.append(helper.make_node("Relu", ["m%d" % k], ["r%d" % k], name="relu%d" % k))
        x = "r%d" % k
    g = helper.make_graph(nodes, "big", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, N])],
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, [4, N])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    if external:
        data = os.path.splitext(os.path.basename(path))[0] + ".data"
        if os.path.exists(os.path.join(os.path.dirname(path), data)):
            os.remove(os.path.join(os.path.dirname(path), data))
        onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True, location=data,
                        size_threshold=0)
    else:
        onnx.save_model(m, path)


def expected(x, layers):
    y = x.astype(np.float64)
    for k in range(layers):
        y = np.maximum(y @ weights(k).astype(np.float64), 0)
    return y


def compile_one(daemon, model, tar, extra, failures, tag):
    r = daemon.ctl("-q", "compile", model, "--target", "llvm", "-o", tar, "--json", "--no-cache", *extra)
    if r.returncode != 0:
        failures.append("%s: compile: exit %d: %s" % (tag, r.returncode, r.stderr.strip()[-2000:]))
        return None
    return json.loads(r.stdout)


def body_for(mib, bound):
    layers = max(1, mib // 16)
    weight_bytes = layers * N * N * 4

    def body(daemon, work, failures):
        x = np.random.default_rng(7).standard_normal((4, N)).astype(np.float32)
        xin = os.path.join(work, "x.npy")
        np.save(xin, x)
        want = expected(x, layers)
        base = compile_one(daemon, os.path.join(SOURCE, "examples", "digits.onnx"), os.path.join(work, "d.tar"), [],
                           failures, "digits")
        baseline = base["timings"].get("workerPeakRss", 0) if base else 0
        cases = [("external data", True, [])]
        if weight_bytes < (2 << 30) - (64 << 20):
            cases += [("inline", False, []), ("inline, uploaded", False, ["--stream"])]
        for tag, external, extra in cases:
            d = os.path.join(work, tag.replace(",", "").replace(" ", "_"))
            os.makedirs(d, exist_ok=True)
            model = os.path.join(d, "big.onnx")
            if not os.path.exists(model):
                write_model(model, layers, external)
            t0 = time.monotonic()
            res = compile_one(daemon, model, os.path.join(d, "big.tar"), extra, failures, tag)
            seconds = time.monotonic() - t0
            if not res:
                continue
            peak = res["timings"].get("workerPeakRss")
            limit = bound * weight_bytes + baseline + SLACK
            if not isinstance(peak, int) or peak > limit:
                failures.append("%s: the worker's peak RSS %s bytes, more than %g x %d bytes of weights + %d (its "
                                "baseline) + %d" % (tag, peak, bound, weight_bytes, baseline, SLACK))
            out = os.path.join(d, "out")
            r = run([daemon.tthctl, "run", os.path.join(d, "big.tar"), "--input", "x=" + xin, "--output-dir", out])
            if r.returncode != 0:
                failures.append("%s: run: %s" % (tag, r.stderr.strip()[-2000:]))
                continue
            got = np.load(os.path.join(out, os.listdir(out)[0])).astype(np.float64)
            err = np.abs(got - want).max() / max(1e-30, np.abs(want).max())
            if got.shape != want.shape or not err <= 1e-4:
                failures.append("%s: the output is %.3g of its largest magnitude away from numpy's" % (tag, err))
            art = os.path.getsize(os.path.join(d, "big.tar"))
            print("%-18s %d layers, %.0f MiB of weights: compiled in %.1f s, artifact %.0f MiB (%.3fx), worker peak "
                  "RSS %.0f MiB (%.2fx the weights; baseline %.0f MiB), largest difference %.2g of the output"
                  % (tag, layers, weight_bytes / 2**20, seconds, art / 2**20, art / weight_bytes,
                     (peak or 0) / 2**20, (peak or 0) / weight_bytes, baseline / 2**20, err))
            for f in os.listdir(d):  # the disk back before the next case
                if f.endswith((".tar", ".data", ".onnx")):
                    os.remove(os.path.join(d, f))
        daemon.ctl("cache", "clear")
    return body


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tthctl", required=True)
    ap.add_argument("--mib", type=int, default=320, help="MiB of weights (multiples of 16)")
    ap.add_argument("--keep", help="work in this directory and keep it")
    ap.add_argument("--sanitized", action="store_true", help="tthd and its workers are built with ASan")
    args = ap.parse_args()
    bound = RSS_BOUND
    if args.sanitized:
        bound = RSS_BOUND * 9 / 8
        os.environ["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=0"
    return run_with_daemon(os.path.abspath(args.tthctl), "tth-big-", body_for(args.mib, bound),
                           "large models (%d MiB of weights) with the default settings" % args.mib, keep=args.keep)


if __name__ == "__main__":
    sys.exit(main())
