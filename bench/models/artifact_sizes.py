#!/usr/bin/python3
"""Artifact size against the model's weights, and the time to open the artifact against ONNX
Runtime's session creation: each model compiled through a private tthd (bench/common/tth_bench.py)
for a target, the artifact's bytes, its parameters file and its code set beside the bytes of the
ONNX initializers; then, with --open N, the median of N opens of the artifact by the runtime
(tth-bench-time's ready_ms: read the tar, load the library, bind the constants and compute the
derived ones, docs/artifact.md "Derived constants") and of N ONNX Runtime session creations on one
thread (bench/ort/ort_time.js's ready_ms, graph optimizations included). Markdown tables on
stdout (bench/README.md, "Large models").

    /usr/bin/python3 bench/models/artifact_sizes.py --build build-bench [--target llvm] \\
        [--open 5] [--ort-dir DIR] MODEL.onnx...
"""
import argparse
import json
import os
import statistics
import sys
import tarfile
import tempfile

import onnx
import onnx.numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "common"))
import tth_bench  # noqa: E402


def weight_bytes(path):
    m = onnx.load(path)  # external data is loaded beside the model
    total = 0
    for t in m.graph.initializer:
        total += len(t.raw_data) if t.raw_data else onnx.numpy_helper.to_array(t).nbytes
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True, help="a release build directory (tthd, tthctl, tth-bench-time)")
    ap.add_argument("--target", default="llvm")
    ap.add_argument("--open", type=int, default=0, metavar="N", help="time N opens of each (0: sizes only)")
    ap.add_argument("--ort-dir", default=os.environ.get("TTH_ORT_DIR"))
    ap.add_argument("models", nargs="+")
    args = ap.parse_args()
    sizes, opens = [], []
    with tth_bench.Tth(args.build) as tth, tempfile.TemporaryDirectory() as d:
        for path in args.models:
            name = os.path.splitext(os.path.basename(path))[0]
            tar = os.path.join(d, name + ".tar")
            try:
                tth.compile(path, args.target, tar)
            except tth_bench.BenchError as e:
                print("%s: %s" % (name, e), file=sys.stderr)
                continue
            w = weight_bytes(path)
            art = os.path.getsize(tar)
            with tarfile.open(tar) as t:
                params = sum(m.size for m in t.getmembers() if m.name.endswith(".params"))
                code = sum(m.size for m in t.getmembers() if m.name.endswith((".so", ".o", ".c")))
                meta = json.load(t.extractfile("metadata.json"))
            derived = sum(c["bytes"] for m in meta.get("modules", [])
                          for c in (m.get("meta") or {}).get("bind_constants", {}).get("derived", []))
            sizes.append("| %s | %.1f | %.1f | %.3f | %.1f | %.2f | %.1f |" % (
                name, w / 2**20, art / 2**20, art / w, params / 2**20, code / 2**20, derived / 2**20))
            if args.open:
                tth_ms = statistics.median(tth.time(tar, {}, runs=20, warmup=0)["ready_ms"]
                                           for _ in range(args.open))
                ort_ms = statistics.median(tth_bench.ort_time(args.ort_dir, path, 1, {}, runs=20, warmup=0, output_dir=d)
                                           ["ready_ms"] for _ in range(args.open))
                opens.append("| %s | %.1f | %.1f | %.2f |" % (name, tth_ms, ort_ms, tth_ms / ort_ms))
    print("| model | weights MiB | artifact MiB | artifact / weights | parameters MiB | code MiB | "
          "derived when bound MiB |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(sizes))
    if opens:
        print("\nopen, ms: median of %d (tth: open the artifact, bind and derive; ORT: create the session, "
              "one thread)\n" % args.open)
        print("| model | tth open | ORT session | tth / ORT |")
        print("|---|---|---|---|")
        print("\n".join(opens))
    return 0


if __name__ == "__main__":
    sys.exit(main())
