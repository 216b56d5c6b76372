"""ONNX Runtime as the reference for the Python tests that check models tth compiles against it
(tests/daemon/frontend/opset18_21_test.py, runtime_if_test.py): onnxruntime-node, which
bench/ort/setup installs (scripts/test-all sets TTH_ORT_DIR), run through bench/ort/ort_time.js.

    ort_dir = ort_dir_or_skip(args.ort_dir)            # exits 77 without node or the package
    why = ort_outputs(ort_dir, "m.onnx", ["--input", "x=x.npy"], "out")   # None, or why it failed
"""
import os
import shutil
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def default_ort_dir():
    return os.environ.get("TTH_ORT_DIR") or os.path.join(ROOT, "build-bench", "ort")


def ort_dir_or_skip(ort_dir):
    """ort_dir, or exit 77 (skipped) when node or onnxruntime-node in it is missing"""
    if not shutil.which("node") or not os.path.isdir(os.path.join(ort_dir, "node_modules", "onnxruntime-node")):
        print("skipped: onnxruntime-node is not in %s (bench/ort/setup installs it) or node is missing" % ort_dir)
        sys.exit(77)
    return ort_dir


def ort_outputs(ort_dir, model, inputs, out_dir):
    """Run `model` once with ONNX Runtime (inputs: --input NAME=FILE.npy arguments), each output
    written as out_dir/<name>.npy; None, or why it failed"""
    r = subprocess.run(["node", os.path.join(ROOT, "bench", "ort", "ort_time.js"), model, "--warmup", "0", "--runs",
                        "20", "--output-dir", out_dir, "--ort-dir", ort_dir] + list(inputs),
                       capture_output=True, text=True)
    return None if r.returncode == 0 else "ONNX Runtime failed: " + r.stderr.strip()[-400:]
