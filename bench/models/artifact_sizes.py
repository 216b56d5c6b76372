#!/usr/bin/python3
"""Artifact size against the model's weights: each model compiled through tthctl (a running or
started tthd) for a target, the artifact's bytes, its parameters file and its code set beside the
bytes of the ONNX initializers. A markdown table on stdout (bench/README.md, "Large models").

    /usr/bin/python3 bench/models/artifact_sizes.py --tthctl build-bench/client/tthctl \\
        [--target llvm] MODEL.onnx...
"""
import argparse
import os
import subprocess
import sys
import tarfile
import tempfile

import onnx
import onnx.numpy_helper


def weight_bytes(path):
    m = onnx.load(path)  # external data is loaded beside the model
    total = 0
    for t in m.graph.initializer:
        total += len(t.raw_data) if t.raw_data else onnx.numpy_helper.to_array(t).nbytes
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tthctl", required=True)
    ap.add_argument("--target", default="llvm")
    ap.add_argument("models", nargs="+")
    args = ap.parse_args()
    print("| model | weights MiB | artifact MiB | artifact / weights | parameters MiB | code MiB |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as d:
        for path in args.models:
            name = os.path.splitext(os.path.basename(path))[0]
            tar = os.path.join(d, name + ".tar")
            r = subprocess.run([args.tthctl, "-q", "compile", path, "--target", args.target, "-o", tar],
                               capture_output=True, text=True)
            if r.returncode != 0:
                print("%s: %s" % (name, r.stderr.strip()), file=sys.stderr)
                continue
            w = weight_bytes(path)
            art = os.path.getsize(tar)
            with tarfile.open(tar) as t:
                params = sum(m.size for m in t.getmembers() if m.name.endswith(".params"))
                code = sum(m.size for m in t.getmembers() if m.name.endswith((".so", ".o", ".c")))
            print("| %s | %.1f | %.1f | %.2f | %.1f | %.2f |" % (name, w / 2**20, art / 2**20, art / w,
                                                                params / 2**20, code / 2**20))
    return 0


if __name__ == "__main__":
    sys.exit(main())
