#!/usr/bin/python3
"""fp32 square GEMM: tth's generated MatMul against OpenBLAS and against the machine's peak.

    /usr/bin/python3 bench/gemm/run.py [--build build-rel] [--sizes 256,512,1024,2048]
        [--runs 20] [--threads 1,2] [--json FILE]

For each size N and thread count T, GFLOP/s (2 N^3 / median time) of:
  - tth A·B: an ONNX model with one MatMul of two [N, N] inputs, compiled by a private tthd for
    "llvm -num-cores=T" and "llvm -mcpu=<host CPU> -num-cores=T", timed with tth-bench-time;
  - tth A·W: the same with B a constant (an initializer), as in a model's fully connected layer;
  - OpenBLAS: cblas_sgemm (tth-bench-sgemm, Debian's libopenblas-dev) with T threads;
  - peak, two ways: the theoretical one, vector width (floats: 16 with avx512f, 8 with avx2 and
    fma, else 4) x 2 FMA units x 2 flops x the clock of /proc/cpuinfo ("cpu MHz") x T; and the
    one a C loop of independent FMAs reaches (tth-bench-fma-peak, T threads), whose machine code
    is checked with objdump (the count of vfmadd on zmm/ymm registers is printed).
tth's results are compared with numpy's A @ B (largest |difference|, relative to the largest
|C|). Never pass/fail.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "common"))
import tth_bench  # noqa: E402

FMA_UNITS = 2  # fp32 FMA pipes per core on recent x86 (Intel since Haswell, AMD since Zen 2)


def matmul_model(n, b_const):
    """One MatMul [n, n] x [n, n]; B an input, or a fixed-seed constant."""
    inputs = [helper.make_tensor_value_info("A", TensorProto.FLOAT, [n, n])]
    inits = []
    if b_const:
        w = np.random.default_rng(n).uniform(-1, 1, (n, n)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, "B"))
    else:
        inputs.append(helper.make_tensor_value_info("B", TensorProto.FLOAT, [n, n]))
    graph = helper.make_graph([helper.make_node("MatMul", ["A", "B"], ["C"], name="mm")],
                              "matmul", inputs,
                              [helper.make_tensor_value_info("C", TensorProto.FLOAT, [n, n])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                          producer_name="tth bench/gemm/run.py")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m, (inits and numpy_helper.to_array(inits[0]))


def theoretical_peak():
    """(GFLOP/s of one core, how it was computed)."""
    cpu = tth_bench.cpu_info()
    flags = cpu["flags"]
    if "avx512f" in flags:
        width, why = 16, "avx512f"
    elif "avx2" in flags and "fma" in flags:
        width, why = 8, "avx2+fma"
    else:
        width, why = 4, "sse"
    gflops = width * FMA_UNITS * 2 * cpu["mhz"] / 1e3
    return gflops, "%d floats (%s) x %d FMA units x 2 flops x %.0f MHz = %.1f GFLOP/s per core" % (
        width, why, FMA_UNITS, cpu["mhz"], gflops)


def fma_loop_check(binary):
    """How the FMA loop was compiled: 'N vfmadd on zmm' from objdump of fma_loop."""
    try:
        dump = subprocess.run(["objdump", "-d", "--no-show-raw-insn", binary],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    except OSError:
        return "objdump not found: not checked"
    body = re.search(r"<fma_loop[^>]*>:\n(.*?)\n\n", dump, re.S)
    if not body:
        return "fma_loop not found in the binary"
    text = body.group(1)
    counts = {reg: len(re.findall(r"vfmadd\w*\s+.*%" + reg, text)) for reg in ("zmm", "ymm", "xmm")}
    found = ", ".join("%d on %s" % (c, reg) for reg, c in counts.items() if c)
    return "fma_loop has vfmadd: %s" % (found or "none (the loop was not compiled to FMAs!)")


def run_json_lines(args, env=None):
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if r.returncode != 0:
        raise tth_bench.BenchError("%s: exit %d\n%s" % (args[0], r.returncode, r.stderr.strip()))
    return [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]


def gflops(n, ms):
    return 2.0 * n ** 3 / (ms * 1e-3) / 1e9


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build-rel"),
                   help="tth build directory (default build-rel)")
    p.add_argument("--sizes", default="256,512,1024,2048", help="N (default 256,512,1024,2048)")
    p.add_argument("--runs", type=int, default=20, help="timed runs (at least 20; default 20)")
    p.add_argument("--warmup", type=int, default=2, help="warm-up runs (default 2)")
    p.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    p.add_argument("--json", help="also write every figure to this file")
    args = p.parse_args()
    if args.runs < 20:
        p.error("--runs must be at least 20")
    sizes = [int(s) for s in args.sizes.split(",")]
    threads = [int(t) for t in args.threads.split(",")]
    sgemm = os.path.join(args.build, "bench", "gemm", "tth-bench-sgemm")
    peak_bin = os.path.join(args.build, "bench", "gemm", "tth-bench-fma-peak")

    report = {"machine": tth_bench.machine_note(), "sizes": sizes, "threads": {}}
    core_peak, peak_how = theoretical_peak()
    report["peak_theory"] = peak_how
    report["fma_loop"] = fma_loop_check(peak_bin)
    print("GEMM fp32, C = A x B, N x N; %s" % report["machine"])
    print("  peak (theory): %s (FMA units assumed)" % peak_how)
    print("  peak (FMA loop): tth-bench-fma-peak; %s" % report["fma_loop"])
    sys.stdout.flush()

    rng = np.random.default_rng(1)
    with tth_bench.Tth(args.build) as tth, tempfile.TemporaryDirectory(prefix="tth-gemm-") as work:
        cpu, mattr = tth.host_cpu()
        host = "llvm -mcpu=%s" % cpu + (" -mattr=%s" % ",".join(mattr) if mattr else "")
        targets = [("llvm", "llvm"), (cpu, host)]
        for label, target in targets:
            print("  tth %-8s = --target \"%s -num-cores=T\"" % (label, target))
        print("  tth A.B: both inputs; A.W: B a constant; after each table: "
              "largest |tth - numpy| over largest |C|")
        # the inputs and models, made once
        data = {}
        for n in sizes:
            a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
            b = rng.uniform(-1, 1, (n, n)).astype(np.float32)
            files = {"A": os.path.join(work, "A%d.npy" % n), "B": os.path.join(work, "B%d.npy" % n)}
            np.save(files["A"], a)
            np.save(files["B"], b)
            models = {}
            for kind, const in (("A.B", False), ("A.W", True)):
                m, w = matmul_model(n, const)
                path = os.path.join(work, "matmul%s_%d.onnx" % ("_const" if const else "", n))
                onnx.save(m, path)
                want = a.astype(np.float64) @ (w if const else b).astype(np.float64)
                models[kind] = (path, {"A": files["A"]} if const else files, want)
            data[n] = models

        for t in threads:
            row_of = {n: {} for n in sizes}
            for label, target in targets:
                for kind in ("A.B", "A.W"):
                    for n in sizes:
                        path, inputs, want = data[n][kind]
                        artifact = os.path.join(work, "mm.tar")
                        out = os.path.join(work, "out")
                        key = "tth %s %s" % (label, kind)
                        try:
                            tth.compile(path, "%s -num-cores=%d" % (target, t), artifact,
                                        name="matmul%d" % n)
                            timing = tth.time(artifact, inputs, args.runs, args.warmup, out)
                            got = np.load(os.path.join(out, "C.npy")).astype(np.float64)
                            diff = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
                            row_of[n][key] = {"gflops": gflops(n, timing["median_ms"]),
                                              "median_ms": timing["median_ms"], "rel_diff": diff}
                        except tth_bench.BenchError as e:
                            print("  %s N=%d: %s" % (key, n, str(e).splitlines()[-1]), file=sys.stderr)
                            row_of[n][key] = {"error": str(e)}
                        r = row_of[n][key]
                        if "gflops" in r:
                            print("  T=%d N=%d %s: %.1f GFLOP/s (median %.3f ms), |tth - numpy| "
                                  "%.1g" % (t, n, key, r["gflops"], r["median_ms"], r["rel_diff"]),
                                  file=sys.stderr)
            if os.access(sgemm, os.X_OK):
                env = dict(os.environ, OPENBLAS_NUM_THREADS=str(t))
                for r in run_json_lines([sgemm, "--threads", str(t), "--runs", str(args.runs)] +
                                        [str(n) for n in sizes], env):
                    row_of[r["n"]]["OpenBLAS"] = {"gflops": r["gflops"], "median_ms": r["median_ms"]}
            peak = run_json_lines([peak_bin, "--threads", str(t)])[0]
            report["threads"][t] = {"rows": row_of, "peak_loop": peak["gflops"],
                                    "peak_theory": core_peak * t}

            keys = ["tth %s %s" % (label, kind) for label, _ in targets for kind in ("A.B", "A.W")]
            header = ["N"] + keys + ["OpenBLAS", "best tth / OpenBLAS", "OpenBLAS / peak (loop)"]
            rows, notes = [], []
            for n in sizes:
                cells, best = [str(n)], 0.0
                for k in keys:
                    r = row_of[n].get(k, {})
                    if "gflops" in r:
                        cells.append("%.1f" % r["gflops"])
                        best = max(best, r["gflops"])
                        notes.append((r["rel_diff"], "%s N=%d" % (k, n)))
                    else:
                        cells.append("failed")
                blas = row_of[n].get("OpenBLAS", {}).get("gflops")
                cells.append("%.1f" % blas if blas else "not built")
                cells.append("%.2f" % (best / blas) if blas else "-")
                cells.append("%.0f %%" % (100 * blas / peak["gflops"]) if blas else "-")
                rows.append(cells)
            print("\n%d thread%s: GFLOP/s (2 N^3 / median of %d runs); peak: %.1f (FMA loop), "
                  "%.1f (theory)" % (t, "" if t == 1 else "s", args.runs, peak["gflops"],
                                     core_peak * t))
            print(tth_bench.table(header, rows))
            bad = ["%s (%.1g)" % (where, d) for d, where in notes if not d <= 1e-4]
            print("largest |tth - numpy| / largest |C|: %s%s" % (
                "%.1g" % max(d for d, _ in notes) if notes else "-",
                ("; WRONG? " + ", ".join(bad)) if bad else ""))
            sys.stdout.flush()
        report["machine_after"] = tth_bench.machine_note()
        print("\nafter: %s" % report["machine_after"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    try:
        main()
    except tth_bench.BenchError as e:
        sys.exit("run.py: %s" % e)
