#!/usr/bin/python3
"""tth's generated code against ONNX Runtime on the same models, inputs and thread counts.

    /usr/bin/python3 bench/vs_ort/run.py [--build build-rel] [--models resnet18,mobilenet_v2]
        [--runs 20] [--warmup 3] [--threads 1,2] [--json FILE]
    /usr/bin/python3 bench/vs_ort/run.py --from-json FILE     # the tables of an earlier run again

For each model of bench/models/make_models.py (BUILD/bench/models/manifest.tsv; default: every
model but the generated gen_*), one fixed-seed random input, then for each thread count T:
  - tth: compile with a private tthd for "llvm -num-cores=T" and for
    "llvm -mcpu=<host CPU> -num-cores=T" (the CPU as LLVM names it, from `tthctl target parse
    "llvm -mcpu=native"`), time with tth-bench-time (warm-up, median of --runs runs);
  - ONNX Runtime: bench/ort/ort_time.js with intraOpNumThreads T (bench/ort/setup installs it);
  - both timed in --rounds rounds (ORT, then tth), each side's fastest round reported: on a
    shared virtual machine another guest's work comes and goes, and the two sides timed once
    each, minutes apart, differed by up to 2x on two threads;
and prints per model a table: latencies (median and min, ms), tth/ORT ratios, and the largest
|tth - ORT| of the outputs (and relative to the largest |ORT| output), so a fast but wrong result
shows. Never pass/fail: a model tth cannot compile is reported and skipped.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "common"))
import tth_bench  # noqa: E402


def read_manifest(models_dir):
    path = os.path.join(models_dir, "manifest.tsv")
    if not os.path.exists(path):
        sys.exit("%s is missing: make the models first with\n"
                 "  /usr/bin/python3 bench/models/make_models.py %s" % (path, models_dir))
    with open(path) as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip()]


def model_inputs(path):
    """[(name, shape)] of the graph inputs that are not initializers."""
    m = onnx.load(path, load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    out = []
    for v in m.graph.input:
        if v.name in inits:
            continue
        if v.type.tensor_type.elem_type != onnx.TensorProto.FLOAT:
            raise tth_bench.BenchError("input %s is not float32" % v.name)
        out.append((v.name, [d.dim_value or 1 for d in v.type.tensor_type.shape.dim]))
    return out


def quantized_outputs(path):
    """For a quantized model (one with QuantizeLinear or QLinear nodes): {output name: scale, or
    None}, the scale when a DequantizeLinear with a constant scalar scale writes the output (the
    difference is then counted in its steps); {} for a float model"""
    m = onnx.load(path, load_external_data=False)
    if not any(n.op_type in ("QuantizeLinear", "QLinearConv", "QLinearMatMul") for n in m.graph.node):
        return {}
    inits = {t.name: t for t in m.graph.initializer}
    res = {v.name: None for v in m.graph.output}
    for n in m.graph.node:
        if n.op_type == "DequantizeLinear" and n.output[0] in res and n.input[1] in inits:
            sc = numpy_helper.to_array(inits[n.input[1]])
            if sc.size == 1:
                res[n.output[0]] = float(sc.reshape(-1)[0])
    return res


def quant_diff(tth_dir, ort_dir, qouts):
    """For a quantized model: the largest |tth - ORT| in steps of the output's quantization (None
    when an output has no scale of its own), and the share of rows (last axis) whose argmax
    (top-1) is the same"""
    steps, same, rows = 0.0, 0, 0
    for name, scale in qouts.items():
        fname = name.replace("/", "_") + ".npy"
        a, b = os.path.join(tth_dir, fname), os.path.join(ort_dir, fname)
        if not (os.path.exists(a) and os.path.exists(b)):
            continue
        got, want = np.load(a).astype(np.float64), np.load(b).astype(np.float64)
        steps = None if scale is None or steps is None else max(steps, float(np.max(np.abs(got - want))) / scale)
        g, w = got.reshape(-1, got.shape[-1]), want.reshape(-1, want.shape[-1])
        same += int(np.sum(np.argmax(g, axis=1) == np.argmax(w, axis=1)))
        rows += g.shape[0]
    return {"steps": None if steps is None else round(steps, 2), "top1_equal": same / rows} if rows else None


def output_diff(tth_dir, ort_dir):
    """Largest |tth - ORT| over every output (same file names), and that over the largest |ORT|."""
    worst, scale = 0.0, 0.0
    files = sorted(f for f in os.listdir(ort_dir) if f.endswith(".npy"))
    if not files:
        raise tth_bench.BenchError("ONNX Runtime wrote no outputs")
    for name in files:
        want = np.load(os.path.join(ort_dir, name)).astype(np.float64)
        got_path = os.path.join(tth_dir, name)
        if not os.path.exists(got_path):
            raise tth_bench.BenchError("tth wrote no output %s" % name)
        got = np.load(got_path).astype(np.float64)
        if got.shape != want.shape:
            raise tth_bench.BenchError("output %s: tth shape %s, ORT %s" % (name, got.shape, want.shape))
        worst = max(worst, float(np.max(np.abs(got - want))))
        scale = max(scale, float(np.max(np.abs(want))))
    return worst, worst / scale if scale else worst


def fmt_ms(ms):
    return "%.1f" % ms if ms >= 10 else "%.2f" % ms


def fmt_timing(t):
    """"median (min)" in ms"""
    return "%s (%s)" % (fmt_ms(t["median_ms"]), fmt_ms(t["min_ms"]))


def fmt_diff(diff, quant=None):
    absolute, relative = diff
    if quant:
        # int8: ORT runs parts of a QDQ model in float, so outputs differ by some steps; the
        # answer is the top-1 of a quantized output, and a float output (a transformer's hidden
        # states after a float LayerNorm) within a tenth of its range (bench/README.md, "int8")
        bad = quant["top1_equal"] < 1.0 if quant["steps"] is not None else relative > 0.1
        flag = "  WRONG?" if bad or not np.isfinite(absolute) else ""
        size = "%.3g steps" % quant["steps"] if quant["steps"] is not None else "%.2g (%.1g)" % (absolute, relative)
        return "%s, top-1 %.0f%%%s" % (size, 100.0 * quant["top1_equal"], flag)
    flag = "  WRONG?" if relative > 1e-3 or not np.isfinite(absolute) else ""
    return "%.2g (%.1g)%s" % (absolute, relative, flag)


def fma_peak(build, threads):
    """GFLOP/s of a loop of independent FMAs on `threads` threads (bench/gemm's tth-bench-fma-peak)"""
    r = subprocess.run([os.path.join(build, "bench", "gemm", "tth-bench-fma-peak"), "--threads", str(threads)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise tth_bench.BenchError("tth-bench-fma-peak: %s" % r.stderr.strip())
    return json.loads(r.stdout)["gflops"]


def top_calls(tth, path, target, inputs, n, work, name):
    """The n slowest calls of a profiling artifact (docs/profiling.md): tthctl run --profile --json"""
    artifact = os.path.join(work, "%s_profile.tar" % name)
    try:
        tth.compile(path, target, artifact, name=name, profile=True)
        args = [tth.tthctl, "run", artifact, "--profile", "--repeat", "20", "--json", "--output-dir",
                os.path.join(work, "profile_out")]
        for iname, ipath in inputs.items():
            args += ["--input", "%s=%s" % (iname, ipath)]
        r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise tth_bench.BenchError("tthctl run --profile: %s" % r.stderr.strip())
        p = json.loads(r.stdout)["profile"]
    finally:
        if os.path.exists(artifact):
            os.remove(artifact)
    keep = ("function", "strategies", "op", "nodes", "macs", "median_us", "share", "gflops")
    return {"whole_median_ms": p["whole_median_ms"], "calls_median_sum_ms": p["calls_median_sum_ms"],
            "top": [{k: c.get(k) for k in keep} for c in p["calls"][:n]]}


def print_top(report):
    """per model and thread count, the slowest calls and their GFLOP/s against the FMA peak"""
    rows = []
    for name, result in report["models"].items():
        for t, row in result.items():
            prof = row.get("profile")
            if not prof:
                continue
            peak = report.get("fma_peak", {}).get(str(t)) or report.get("fma_peak", {}).get(t)
            for c in prof["top"]:
                strat = (c.get("strategies") or [c.get("op") or "-"])[0]
                gf = c.get("gflops") or 0.0
                rows.append([name, str(t), c["function"].split("_fused_")[-1], strat, "%.3f" % (c["median_us"] / 1000.0),
                             "%.0f%%" % (100 * c["share"]), "%.1f" % gf,
                             "%.0f%%" % (100 * gf / peak) if peak and c["macs"] else "-"])
    if rows:
        print("\nslowest calls (tthctl run --profile): ms (median), share of the calls, GFLOP/s, and of the FMA "
              "peak (%s)" % ", ".join("%s thread(s) %.0f GFLOP/s" % (k, v) for k, v in report.get("fma_peak", {}).items()))
        print(tth_bench.table(["model", "threads", "function", "strategy", "ms", "share", "GFLOP/s", "of peak"], rows))


def best_round(rounds):
    """The figures of the round with the lowest median, the minimum over every round, and each
    round's median: the fastest round is the one least disturbed by other work on the machine."""
    best = dict(min(rounds, key=lambda r: r["median_ms"]))
    best["min_ms"] = min(r["min_ms"] for r in rounds)
    best["round_medians_ms"] = [r["median_ms"] for r in rounds]
    return best


def run_model(tth, ort_dir, name, path, targets, threads, args, work):
    """Compile, time and compare one model; a dict of figures per thread count."""
    work = os.path.join(work, name)  # outputs of one model only: names differ between models
    os.makedirs(work)
    rng = np.random.default_rng(args.seed)
    inputs = {}
    for i, (iname, shape) in enumerate(model_inputs(path)):
        inputs[iname] = os.path.join(work, "input%d.npy" % i)
        np.save(inputs[iname], rng.uniform(-1, 1, shape).astype(np.float32))
    qouts = quantized_outputs(path)  # read once: a model file can be hundreds of MB
    result = {}
    for t in threads:
        row = {"ort": None, "tth": {}}
        ort_out = os.path.join(work, "ort%d" % t)
        built, ort_rounds, tth_rounds = {}, [], {}
        try:
            for label, target in targets:
                full = "%s -num-cores=%d" % (target, t)
                artifact = os.path.join(work, "%s_%s.tar" % (name, label))
                try:
                    compiled = tth.compile(path, full, artifact, name=name, explain=True)
                    built[label] = artifact
                    tth_rounds[label] = []
                    row["tth"][label] = {
                        "compile_s": round(compiled["seconds"], 2),
                        # functions of constants only left in the code (docs/operators.md,
                        # "Constant folding"): --explain names each; the goal is none
                        "constant_functions": [d["message"] for d in compiled.get("diagnostics", [])
                                               if d.get("message", "").startswith("constants: '")]}
                except tth_bench.BenchError as e:
                    print("  %s, %s: %s" % (name, full, str(e).splitlines()[-1]), file=sys.stderr)
                    row["tth"][label] = {"error": str(e)}
                row["tth"][label]["target"] = full
            if t > 1:  # the vCPUs' state when this model's rounds begin (tth_bench.machine_note)
                row["round_trip_ns"] = tth_bench.round_trip_ns(args.build)
            # rounds: ORT, then each tth target, again and again, so that a stretch of time in
            # which this virtual machine's other CPU is taken slows both sides' rounds alike
            for r in range(args.rounds):
                ort_rounds.append(tth_bench.ort_time(ort_dir, path, t, inputs, args.runs, args.warmup, ort_out))
                for label, artifact in built.items():
                    tth_out = os.path.join(work, "tth_%s_%d" % (label, t))
                    try:
                        tth_rounds[label].append(tth.time(artifact, inputs, args.runs, args.warmup, tth_out))
                        if r == 0:
                            row["tth"][label]["diff"] = output_diff(tth_out, ort_out)
                            if qouts:
                                row["tth"][label]["quant"] = quant_diff(tth_out, ort_out, qouts)
                    except tth_bench.BenchError as e:
                        print("  %s, %s: %s" % (name, row["tth"][label]["target"], str(e).splitlines()[-1]),
                              file=sys.stderr)
                        row["tth"][label] = {"error": str(e), "target": row["tth"][label]["target"]}
                        del built[label]
                        break
        finally:
            for artifact in built.values():
                if os.path.exists(artifact):
                    os.remove(artifact)  # artifacts of big models are hundreds of MiB
        row["ort"] = best_round(ort_rounds)
        for label, timing in row["tth"].items():
            if "error" not in timing:
                timing.update(best_round(tth_rounds[label]))
            print("  %s threads=%d %-6s %s" % (name, t, label, json.dumps(
                {k: timing.get(k) for k in ("median_ms", "min_ms", "round_medians_ms", "compile_s", "diff", "quant", "error")
                 if k in timing})), file=sys.stderr)
        print("  %s threads=%d ORT    median %s ms, min %s ms, rounds %s%s" % (
            name, t, row["ort"]["median_ms"], row["ort"]["min_ms"], row["ort"]["round_medians_ms"],
            ", vCPU round trip %.0f ns" % row["round_trip_ns"] if row.get("round_trip_ns") else ""), file=sys.stderr)
        if args.top:
            try:
                row["profile"] = top_calls(tth, path, "%s -num-cores=%d" % (targets[0][1], t), inputs, args.top,
                                           work, name)
            except tth_bench.BenchError as e:
                print("  %s: profile: %s" % (name, str(e).splitlines()[-1]), file=sys.stderr)
        result[t] = row
    return result


def print_model(name, nodes, params, result, targets, runs):
    labels = [label for label, _ in targets]
    header = ["threads"] + ["tth %s" % l for l in labels] + ["ORT"] + \
             ["%s / ORT" % l for l in labels] + ["max |tth-ORT| %s (rel)" % l for l in labels]
    rows = []
    for t, row in result.items():
        ort = row["ort"]["median_ms"]
        cells = [str(t)]
        ratios, diffs = [], []
        for label in labels:
            r = row["tth"][label]
            if "error" in r:
                cells.append("failed")
                ratios.append("-")
                diffs.append("-")
            else:
                cells.append(fmt_timing(r))
                ratios.append("%.1fx" % (r["median_ms"] / ort))
                diffs.append(fmt_diff(r["diff"], r.get("quant")))
        rows.append(cells + [fmt_timing(row["ort"])] + ratios + diffs)
    print("\n%s (%s ONNX nodes, %.2f M parameters): ms, median (min) of %d runs; ratios of "
          "the medians" % (name, nodes, int(params) / 1e6, runs))
    print(tth_bench.table(header, rows))
    # time to ready: tth compiles the model (a cache miss through tthd: --no-cache, nothing
    # reused) and opens its artifact (tar, library, constants), ORT creates its session from the
    # ONNX file (graph optimizations included); then each one's first run
    rrows = []
    for t, row in result.items():
        o = row["ort"]
        if "ready_ms" not in o:
            continue
        cells = [str(t)]
        for label in labels:
            r = row["tth"][label]
            cells.append("%s + %s + %s" % (fmt_ms(r["compile_s"] * 1000.0) if "compile_s" in r else "-",
                                           fmt_ms(r["ready_ms"]), fmt_ms(r["first_run_ms"]))
                         if "ready_ms" in r else "-")
        cells.append("%s + %s" % (fmt_ms(o["ready_ms"]), fmt_ms(o["first_run_ms"])))
        rrows.append(cells)
    if rrows:
        print("time to ready + first run, ms (tth: compile, a cache miss, + open the artifact; ORT: create the "
              "session)")
        print(tth_bench.table(["threads"] + ["tth %s" % l for l in labels] + ["ORT"], rrows))


def print_summary(report, label="llvm"):
    """One table for the goal of bench/README.md: per model and thread count, tth `label` and ORT
    (median, min), their ratio; then per thread count the geometric mean of the ratios and the
    models over 1.0, over the models whose ORT median is at least 1 ms."""
    threads = sorted({int(t) for r in report["models"].values() for t in r})
    rows, logs = [], {t: [] for t in threads}
    over = {t: [] for t in threads}
    for name, result in report["models"].items():
        cells = [name]
        for t in threads:
            row = result.get(t) or result.get(str(t))
            r = row["tth"].get(label, {}) if row else {}
            if not row or "error" in r or "median_ms" not in r:
                cells += ["-", fmt_timing(row["ort"]) if row else "-", "-"]
                continue
            ratio = r["median_ms"] / row["ort"]["median_ms"]
            cells += [fmt_timing(r), fmt_timing(row["ort"]), "%.2f" % ratio]
            if t > 1:
                cells[-1] += " (%.0f ns)" % row["round_trip_ns"] if row.get("round_trip_ns") else ""
            if row["ort"]["median_ms"] >= 1.0:
                logs[t].append(np.log(ratio))
                if ratio > 1.0:
                    over[t].append("%s %.2f" % (name, ratio))
        rows.append(cells)
    header = ["model"]
    for t in threads:
        header += ["tth %s, %d thr" % (label, t), "ORT, %d thr" % t, "ratio"]
    print("\nsummary: ms, median (min); ratio = tth %s / ORT of the medians (on two threads or more, the vCPUs'"
          " cache-line round trip when the model's rounds began, tth_bench.round_trip_ns)" % label)
    print(tth_bench.table(header, rows))
    consts = sorted({"%s: %s" % (name, m) for name, result in report["models"].items() for row in result.values()
                     for m in row["tth"].get(label, {}).get("constant_functions", [])})
    print("functions of constants only left in the code (--explain): %s" % ("; ".join(consts) if consts else "none"))
    for t in threads:
        if logs[t]:
            print("%d thread%s: geometric mean of the ratios %.2f over %d models (ORT >= 1 ms); over 1.0: %s" % (
                t, "" if t == 1 else "s", float(np.exp(np.mean(logs[t]))), len(logs[t]),
                ", ".join(over[t]) if over[t] else "none"))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build-rel"),
                   help="tth build directory (default build-rel)")
    p.add_argument("--models-dir", help="make_models.py's output (default BUILD/bench/models)")
    p.add_argument("--models", help="comma-separated model names (default: every CNN)")
    p.add_argument("--runs", type=int, default=20, help="timed runs (at least 20; default 20)")
    p.add_argument("--warmup", type=int, default=3, help="warm-up runs (default 3)")
    p.add_argument("--rounds", type=int, default=3, help="rounds of ORT's and tth's runs, alternated; "
                   "each side's fastest round (lowest median) is reported (default 3)")
    p.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    p.add_argument("--seed", type=int, default=1, help="input seed (default 1)")
    p.add_argument("--ort-dir", help="where bench/ort/setup installs onnxruntime-node "
                   "(default build-bench/ort)")
    p.add_argument("--json", help="also write every figure to this file")
    p.add_argument("--top", type=int, default=0, help="also profile each model (tthctl run --profile) and "
                   "report its N slowest calls against the FMA peak")
    p.add_argument("--targets", default="llvm,cpu", help="tth targets: llvm (plain llvm, this machine), "
                   "cpu (llvm -mcpu=<this CPU>), or both (default llvm,cpu)")
    p.add_argument("--from-json", metavar="FILE", help="only print the tables of an earlier "
                   "run's --json file")
    args = p.parse_args()
    if args.from_json:
        with open(args.from_json) as f:
            report = json.load(f)
        print("%s\ntargets: %s" % (report["machine"], report["targets"]))
        manifest = report.get("manifest") or {row[0]: row[1:3] for row in read_manifest(
            args.models_dir or os.path.join(args.build, "bench", "models"))}
        for name, result in report["models"].items():
            nodes, params = manifest[name]
            print_model(name, nodes, params, result, list(report["targets"].items()),
                        report.get("runs", args.runs))
        print("\nafter: %s" % report.get("machine_after", "?"))
        print_summary(report)
        print_top(report)
        return
    if args.runs < 20:
        p.error("--runs must be at least 20")
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    threads = [int(t) for t in args.threads.split(",")]
    models_dir = args.models_dir or os.path.join(args.build, "bench", "models")
    manifest = read_manifest(models_dir)
    known = {row[0]: row for row in manifest}
    if args.models:
        names = args.models.split(",")
        for n in names:
            if n not in known:
                p.error("no model '%s' in %s (have: %s)" % (n, models_dir, ", ".join(known)))
    else:
        names = [row[0] for row in manifest if not row[0].startswith("gen_")]

    setup = subprocess.run([os.path.join(ROOT, "bench", "ort", "setup")] +
                           ([args.ort_dir] if args.ort_dir else []),
                           stdout=subprocess.PIPE, text=True)
    if setup.returncode != 0:
        sys.exit("bench/ort/setup failed: ONNX Runtime is not available")
    ort_dir = setup.stdout.strip().splitlines()[-1]

    report = {"machine": tth_bench.machine_note(args.build), "runs": args.runs, "warmup": args.warmup, "rounds": args.rounds,
              "fma_peak": {str(t): fma_peak(args.build, t) for t in threads} if args.top else {},
              "manifest": {n: known[n][1:3] for n in names}, "models": {}}
    with tth_bench.Tth(args.build) as tth, tempfile.TemporaryDirectory(prefix="tth-vs-ort-") as work:
        cpu, mattr = tth.host_cpu()
        host = "llvm -mcpu=%s" % cpu + (" -mattr=%s" % ",".join(mattr) if mattr else "")
        want = args.targets.split(",")
        targets = ([("llvm", "llvm")] if "llvm" in want else []) + ([(cpu, host)] if "cpu" in want else [])
        if not targets:
            p.error("--targets: give llvm, cpu or both")
        report["targets"] = dict(targets)
        print("tth vs ONNX Runtime (%s), %s" % (ort_dir, report["machine"]))
        for label, target in targets:
            print("  tth %-8s = --target \"%s -num-cores=T\"" % (label, target))
        print("  ORT: CPU provider, intraOpNumThreads T, interOpNumThreads 1, optimization 'all'")
        print("  max |tth-ORT|: largest absolute difference of the outputs on the same input "
              "(in brackets: over the largest |ORT output|)")
        sys.stdout.flush()
        for name in names:
            path = os.path.join(models_dir, name + ".onnx")
            result = run_model(tth, ort_dir, name, path, targets, threads, args, work)
            report["models"][name] = result
            print_model(name, known[name][1], known[name][2], result, targets, args.runs)
            sys.stdout.flush()
        report["machine_after"] = tth_bench.machine_note(args.build)
        print("\nafter: %s" % report["machine_after"])
        if "llvm" in report["targets"]:
            print_summary(report)
        print_top(report)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1, default=str)


if __name__ == "__main__":
    try:
        main()
    except tth_bench.BenchError as e:
        sys.exit("run.py: %s" % e)
