#!/usr/bin/python3
"""A cache hit through tthctl against copying the artifact, per model.

    /usr/bin/python3 bench/cache_hit/run.py [--build build-rel] [--models digits,resnet18]
        [--target llvm] [--runs 10] [--no-redis]

For each model: one compile fills a private tthd's cache (a miss), then RUNS times each of
  - `tthctl compile` answered from the cache the default way (the model by path, the artifact
    copied from the cache file: protocol/PROTOCOL.md),
  - the same with `--stream` (model uploaded, artifact streamed through the socket),
  - a hit of the remote cache (docs/cache.md): a second private tthd, its local cache emptied
    before each run (untimed), served by a private redis-server on a unix socket that the first
    daemon filled,
  - copying the artifact file, in this process (shutil.copyfile) and as the issue words it, by a
    `cp` process (started like tthctl, so the two columns differ by what a process start costs),
and min(RUNS, 3) times a cold compile (`--no-cache`: neither the artifact cache nor the compiled
code kept for reuse) and a "retrained" one (the model with every weight and bias
scaled by 1.01, compiled right after the original: a miss of the artifact cache that finds its
compiled code, docs/cache.md "Compiled code"), each timed end to end (a new tthctl process each
time; wall clock). Prints the medians and the hit's ratio to the copy. Models are
examples/digits.onnx ("digits") or those of bench/models/make_models.py in BUILD/bench/models.
Never pass/fail.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import contextlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "common"))
import tth_bench  # noqa: E402


def model_path(build, name):
    if name == "digits":
        return os.path.join(ROOT, "examples", "digits.onnx")
    return os.path.join(build, "bench", "models", name + ".onnx")


def retrained(path, out):
    """A copy of the model at path with every float initializer of more than one element scaled
    by 1.01 (new weights and biases, the same shapes and attributes), written to out."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    m = onnx.load(path)
    for i, t in enumerate(m.graph.initializer):
        a = numpy_helper.to_array(t)
        if a.dtype == np.float32 and a.size > 1:
            m.graph.initializer[i].CopyFrom(numpy_helper.from_array((a * 1.01).astype(np.float32), t.name))
    onnx.save(m, out)
    return out


def timed(fn, runs):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000.0


@contextlib.contextmanager
def redis_server(work):
    """A private redis-server on a unix socket in work; yields its tthd address."""
    sock = os.path.join(work, "redis.sock")
    proc = subprocess.Popen(["redis-server", "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700",
                             "--save", "", "--appendonly", "no", "--dir", work, "--logfile",
                             os.path.join(work, "redis.log")], stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not os.path.exists(sock):
        if proc.poll() is not None or time.monotonic() > deadline:
            sys.exit("redis-server did not start (scripts/setup installs it)")
        time.sleep(0.05)
    try:
        yield "unix://" + sock
    finally:
        proc.terminate()
        proc.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build-rel"))
    ap.add_argument("--models", default="digits,resnet18")
    ap.add_argument("--target", default="llvm")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--no-redis", action="store_true", help="leave out the remote cache's column")
    args = ap.parse_args()
    rows = []
    with contextlib.ExitStack() as stack:
        work = stack.enter_context(tempfile.TemporaryDirectory(prefix="tth-hit-"))
        extra = [] if args.no_redis else ["--cache-redis", stack.enter_context(redis_server(work))]
        tth = stack.enter_context(tth_bench.Tth(args.build, extra=extra))
        other = None if args.no_redis else stack.enter_context(tth_bench.Tth(args.build, extra=extra))
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
            remote_ms = []
            before = json.loads(other.ctl("status", "--json").stdout)["remoteCache"]["hits"] if other else 0
            for _ in range(args.runs if other else 0):
                other.ctl("cache", "clear")
                t0 = time.perf_counter()
                other.ctl("compile", path, "--target", args.target, "--name", name, "-o", out)
                remote_ms.append((time.perf_counter() - t0) * 1000.0)
            if other:
                st = json.loads(other.ctl("status", "--json").stdout)["remoteCache"]
                if st["hits"] - before != args.runs:
                    sys.exit("the second daemon's remote hits: %d of %d (%s)" % (st["hits"] - before, args.runs, st))
            # cold: --no-cache uses neither the artifact cache nor the compiled code (docs/cache.md)
            cold_ms = timed(lambda: hit("--no-cache"), min(args.runs, 3))
            # retrained: the same model with every weight and bias scaled, compiled after the
            # original (a miss of the artifact cache that finds its compiled code)
            again = retrained(path, os.path.join(work, name + "_retrained.onnx"))
            warm = []
            for _ in range(min(args.runs, 3)):
                tth.ctl("cache", "clear")
                hit("--no-cache")
                t0 = time.perf_counter()
                tth.ctl("-q", "compile", again, "--target", args.target, "--name", name, "-o", out)
                warm.append((time.perf_counter() - t0) * 1000.0)
            retrained_ms = statistics.median(warm)
            hit()  # the original back in the cache for the copies below
            copy = os.path.join(work, "copy.tar")
            cp_ms = timed(lambda: shutil.copyfile(art, copy), args.runs)
            cp_cmd_ms = timed(lambda: subprocess.run(["cp", art, copy], check=True), args.runs)
            size = os.path.getsize(art) / 2**20
            rows.append([name, "%.1f" % size, "%.1f" % cold_ms, "%.1f" % retrained_ms, "%.1f" % file_ms, "%.1f" % stream_ms,
                         "%.1f" % statistics.median(remote_ms) if remote_ms else "-", "%.1f" % cp_ms,
                         "%.1f" % cp_cmd_ms, "%.1fx" % (file_ms / cp_ms), "%.1fx" % (file_ms / cp_cmd_ms)])
    print(tth_bench.table(["model", "MiB", "cold ms", "retrained ms", "hit ms", "hit --stream ms", "remote hit ms", "copy ms",
                           "`cp` ms", "hit / copy", "hit / `cp`"], rows))
    print("after: %s" % tth_bench.machine_note())


if __name__ == "__main__":
    main()
