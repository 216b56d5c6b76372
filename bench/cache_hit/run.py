#!/usr/bin/python3
"""A cache hit through tthctl against copying the artifact, per model.

    /usr/bin/python3 bench/cache_hit/run.py [--build build-rel] [--models digits,resnet18]
        [--target llvm] [--runs 10]

For each model: one compile fills a private tthd's cache (a miss), then RUNS times each of
  - `tthctl compile` answered from the cache the default way (the model by path, the artifact
    copied from the cache file: protocol/PROTOCOL.md),
  - the same with `--stream` (model uploaded, artifact streamed through the socket),
  - copying the artifact file (shutil.copyfile),
each timed end to end (a new tthctl process each time; wall clock), and prints the medians and
the hit's ratio to the copy. Models are examples/digits.onnx ("digits") or those of
bench/models/make_models.py in BUILD/bench/models. Never pass/fail.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "common"))
import tth_bench  # noqa: E402


def model_path(build, name):
    if name == "digits":
        return os.path.join(ROOT, "examples", "digits.onnx")
    return os.path.join(build, "bench", "models", name + ".onnx")


def timed(fn, runs):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build-rel"))
    ap.add_argument("--models", default="digits,resnet18")
    ap.add_argument("--target", default="llvm")
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    rows = []
    with tth_bench.Tth(args.build) as tth, tempfile.TemporaryDirectory(prefix="tth-hit-") as work:
        print("cache hits, %s; target '%s', median of %d runs" % (tth_bench.machine_note(), args.target, args.runs))
        for name in args.models.split(","):
            path = model_path(args.build, name)
            if not os.path.exists(path):
                sys.exit("no model %s (bench/models/make_models.py %s/bench/models)" % (path, args.build))
            art = os.path.join(work, name + ".tar")
            tth.compile(path, args.target, art, name=name)
            out = os.path.join(work, "out.tar")

            def hit(*extra):
                tth.ctl("-q", "compile", path, "--target", args.target, "--name", name, "-o", out, *extra)

            file_ms = timed(hit, args.runs)
            stream_ms = timed(lambda: hit("--stream"), args.runs)
            cp_ms = timed(lambda: shutil.copyfile(art, os.path.join(work, "copy.tar")), args.runs)
            size = os.path.getsize(art) / 2**20
            rows.append([name, "%.1f" % size, "%.1f" % file_ms, "%.1f" % stream_ms, "%.1f" % cp_ms,
                         "%.1fx" % (file_ms / cp_ms)])
    print(tth_bench.table(["model", "MiB", "hit ms", "hit --stream ms", "copy ms", "hit / copy"], rows))
    print("after: %s" % tth_bench.machine_note())


if __name__ == "__main__":
    main()
