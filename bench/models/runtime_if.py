#!/usr/bin/python3
"""An If decided at run time, timed for each value of its condition against ONNX Runtime: the
voice-activity-like model of tests/daemon/frontend/runtime_if_test.py made larger (the sample
rate a graph input; an LSTM of 64 steps in one branch, a GRU of 128 steps in the other, hidden
size 128, each fed by a nested If), compiled through a private tthd (bench/common/tth_bench.py)
for `llvm -num-cores=1` and timed with tth-bench-time; ONNX Runtime on one thread. Only the
branch the condition picks runs (docs/operators.md, "Control flow"), so each condition's time is
its own branch's. A markdown table on stdout (bench/README.md, "Control flow").

    /usr/bin/python3 bench/models/runtime_if.py --build build-bench [--runs 200] [--ort-dir DIR]
"""
import argparse
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "common"))
sys.path.insert(0, os.path.join(ROOT, "tests", "daemon", "frontend"))
import tth_bench  # noqa: E402
import runtime_if_test as cases  # noqa: E402


def model():
    cases.H = 128
    nodes = [cases.const("k16", np.array(16000, np.int64)), helper.make_node("Equal", ["sr", "k16"], ["is16"]),
             helper.make_node("If", ["is16"], ["y"],
                              then_branch=cases.recurrent_branch("a", 64, 32, "LSTM", 12000),
                              else_branch=cases.recurrent_branch("b", 128, 16, "GRU", 4000))]
    return cases.finish_model(nodes, [("x", cases.F, [1, 2048]), ("sr", cases.I64, [])], [("y", [1, cases.H])])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True, help="a release build directory (tthd, tthctl, tth-bench-time)")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--ort-dir", default=os.environ.get("TTH_ORT_DIR"))
    args = ap.parse_args()
    rows = []
    with tth_bench.Tth(args.build) as tth, tempfile.TemporaryDirectory() as d:
        path, tar = os.path.join(d, "vad.onnx"), os.path.join(d, "vad.tar")
        onnx.save(model(), path)
        np.save(os.path.join(d, "x.npy"), np.random.default_rng(1).uniform(-1, 1, (1, 2048)).astype(np.float32))
        tth.compile(path, "llvm -num-cores=1", tar)
        for sr, branch in ((16000, "LSTM, 64 steps"), (8000, "GRU, 128 steps")):
            np.save(os.path.join(d, "sr.npy"), np.array(sr, np.int64))
            inputs = {"x": os.path.join(d, "x.npy"), "sr": os.path.join(d, "sr.npy")}
            t = tth.time(tar, inputs, runs=args.runs, warmup=20)
            o = tth_bench.ort_time(args.ort_dir, path, 1, inputs, runs=args.runs, warmup=20)
            rows.append("| %d (%s) | %.3f (%.3f) | %.3f (%.3f) | %.2f |" % (
                sr, branch, t["median_ms"], t["min_ms"], o["median_ms"], o["min_ms"], t["median_ms"] / o["median_ms"]))
    print("ms, median (min) of %d runs, one thread\n" % args.runs)
    print("| sr (branch) | tth llvm | ORT | tth / ORT |")
    print("|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
