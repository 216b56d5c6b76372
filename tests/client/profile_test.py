#!/usr/bin/python3
"""tthctl compile --profile and tthctl run --profile (docs/profiling.md) on a small CNN made here:
one row per call of the entry, each row's ONNX nodes are nodes of the model, the multiply-adds of
the rows add up to the count computed here from the graph (numpy over the ONNX shapes, not
tth's), the calls' median times add up to the whole run's within 5 % (or 10 us per call, the
timing hooks' own cost, when that is larger: a fast run under the sanitizers' runtime), the --trace file is Chrome
trace events, and an artifact compiled without --profile has no timing hooks (no symbol, no
metadata) and is refused by run --profile with a hint. For `llvm` and `c` on this machine.

    tests/client/profile_test.py --tthctl build/client/tthctl

Exit status 77 (skipped) when numpy or onnx is missing.
"""
import json
import os
import sys
import tarfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from private_tthd import run, run_with_daemon, skip_unless, tthctl_args  # noqa: E402

skip_unless("profile", modules=("numpy", "onnx"))
import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper, shape_inference  # noqa: E402


def model():
    """conv 3x3 (3 -> 32) relu, depthwise 3x3 stride 2, conv 1x1 (32 -> 64) + add of a second 1x1,
    global pool, a dense layer; sizes that make each call take tens of microseconds at least"""
    rng = np.random.default_rng(7)
    inits, nodes = [], []

    def w(name, shape):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name))
        return name

    nodes.append(helper.make_node("Conv", ["x", w("w1", (32, 3, 3, 3))], ["c1"], pads=[1, 1, 1, 1], name="stem"))
    nodes.append(helper.make_node("Relu", ["c1"], ["r1"], name="stem_relu"))
    nodes.append(helper.make_node("Conv", ["r1", w("wd", (32, 1, 3, 3))], ["d1"], pads=[1, 1, 1, 1], strides=[2, 2],
                                  group=32, name="depthwise"))
    nodes.append(helper.make_node("Conv", ["d1", w("w2", (64, 32, 1, 1))], ["c2"], name="expand"))
    nodes.append(helper.make_node("Conv", ["d1", w("w3", (64, 32, 1, 1))], ["c3"], name="shortcut"))
    nodes.append(helper.make_node("Add", ["c2", "c3"], ["a"], name="residual"))
    nodes.append(helper.make_node("GlobalAveragePool", ["a"], ["g"], name="pool"))
    nodes.append(helper.make_node("Flatten", ["g"], ["f"], name="flatten"))
    nodes.append(helper.make_node("Gemm", ["f", w("fc", (10, 64))], ["y"], transB=1, name="classifier"))
    g = helper.make_graph(nodes, "prof", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 192, 192])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def graph_macs(m):
    """multiply-adds of the convolutions and matrix products, from ONNX's shapes"""
    m = shape_inference.infer_shapes(m)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output)}
    inits = {t.name: list(t.dims) for t in m.graph.initializer}
    total = 0
    for n in m.graph.node:
        if n.op_type == "Conv":
            wd = inits[n.input[1]]
            total += int(np.prod(shapes[n.output[0]])) * wd[1] * wd[2] * wd[3]
        elif n.op_type == "Gemm":
            total += int(np.prod(shapes[n.output[0]])) * shapes[n.input[0]][-1]
    return total


def check(daemon, target, work, onnx_model, failures):
    path = os.path.join(work, "prof.onnx")
    onnx.save(onnx_model, path)
    names = {n.name for n in onnx_model.graph.node}
    outputs_of = {n.name: list(n.output) for n in onnx_model.graph.node}
    want_macs = graph_macs(onnx_model)
    x = os.path.join(work, "x.npy")
    np.save(x, np.random.default_rng(1).uniform(-1, 1, (1, 3, 192, 192)).astype(np.float32))
    tag = target.split()[0]
    prof, plain = os.path.join(work, tag + "_prof.tar"), os.path.join(work, tag + "_plain.tar")
    for tar, extra in ((prof, ["--profile"]), (plain, [])):
        why = daemon.compile(path, target, tar, "--name", "prof", *extra)
        if not failures.check(not why, "%s %s" % (why, extra)):
            return
    trace = os.path.join(work, tag + "_trace.json")
    r = run([daemon.tthctl, "run", prof, "--input", "x=" + x, "--profile", "--repeat", "30", "--json",
             "--output-dir", os.path.join(work, "out"), "--trace", trace])
    if r.returncode != 0:
        failures.append("%s: run --profile: %s" % (tag, r.stderr.strip()))
        return
    p = json.loads(r.stdout)["profile"]
    with tarfile.open(prof) as t:
        meta = json.load(t.extractfile("metadata.json"))
    calls = meta["profile"]["calls"]
    if len(p["calls"]) != len(calls) or len(calls) < 5:
        failures.append("%s: %d rows for %d calls" % (tag, len(p["calls"]), len(calls)))
    for row in p["calls"]:
        bad = [n for n in row["nodes"] if n not in names]
        if bad or not row["nodes"]:
            failures.append("%s: call %s names nodes %s, not of the model" % (tag, row["function"], row["nodes"]))
        want = [t for n in row["nodes"] if n in outputs_of for t in outputs_of[n]]
        if row.get("tensors") != want:
            failures.append("%s: call %s names tensors %s, its nodes write %s" % (tag, row["function"],
                                                                                 row.get("tensors"), want))
    got_macs = sum(row["macs"] for row in p["calls"])
    if got_macs != want_macs:
        failures.append("%s: the calls' MACs add up to %d, the graph has %d" % (tag, got_macs, want_macs))
    whole, parts = p["whole_median_ms"], p["calls_median_sum_ms"]
    # the median of the runs' sums is not the sum of the calls' medians, and the entry's own steps
    # between calls count in the run only: on a VM whose state changes between runs a 1 ms model
    # came out 10.8 % apart (0.887 of 0.995 ms); a call missing from the profile is one of a few
    slack = max(0.15 * whole, 0.015 * len(calls))
    if not abs(parts - whole) <= slack:
        failures.append("%s: the calls add up to %.4f ms of the run's %.4f ms (more than %.4f ms apart)"
                        % (tag, parts, whole, slack))
    with open(trace) as f:
        tr = json.load(f)
    ev = tr.get("traceEvents")
    if not isinstance(ev, list) or len(ev) != 30 * len(calls):
        failures.append("%s: the trace has %s events for 30 runs of %d calls" % (tag, len(ev) if ev else ev, len(calls)))
    else:
        for e in ev:
            if e.get("ph") != "X" or not isinstance(e.get("ts"), (int, float)) or not isinstance(e.get("dur"), (int, float)) \
                    or e["dur"] < 0 or not isinstance(e.get("name"), str) or "pid" not in e or "tid" not in e:
                failures.append("%s: a trace event is not a complete event: %r" % (tag, e))
                break
        ends = [e["ts"] + e["dur"] for e in ev]
        if any(ev[i + 1]["ts"] < ends[i] - 1e-6 for i in range(len(ev) - 1)):
            failures.append("%s: trace events overlap" % tag)
    # the ordinary artifact: no hooks, no profile; run --profile refuses it with a hint
    with tarfile.open(plain) as t:
        pmeta = json.load(t.extractfile("metadata.json"))
        so = t.extractfile("lib/prof.so").read()
    if "profile" in pmeta or b"profile_begin" in so:
        failures.append("%s: the artifact compiled without --profile has timing hooks" % tag)
    with tarfile.open(prof) as t:
        if b"profile_begin" not in t.extractfile("lib/prof.so").read():
            failures.append("%s: the profiling artifact's library has no timing hooks" % tag)
    r = run([daemon.tthctl, "run", plain, "--input", "x=" + x, "--profile", "--output-dir", os.path.join(work, "out")])
    if r.returncode == 0 or "not compiled for profiling" not in r.stderr or "--profile" not in r.stderr:
        failures.append("%s: run --profile of an ordinary artifact: exit %d, %s" % (tag, r.returncode, r.stderr.strip()))
    print("%-5s %d calls, MACs %d (the graph's: %d), calls %.3f ms of %.3f ms" % (tag, len(calls), got_macs, want_macs,
                                                                               parts, whole))


def body(daemon, work, failures):
    m = model()
    for target in ("llvm", "c"):
        check(daemon, target, work, m, failures)
    # bare metal: the hooks count cycles (tests/cortexm/profile_runs.py runs them); tthctl run
    # cannot run the artifact here and says where it runs
    tar = os.path.join(work, "m.tar")
    r = daemon.ctl("-q", "compile", os.path.join(work, "prof.onnx"), "--target", "c -mcpu=cortex-m55", "-o", tar,
                   "--profile")
    if failures.check(r.returncode == 0, "compile --profile for cortex-m55: exit %d, %s" % (r.returncode, r.stderr)):
        with tarfile.open(tar) as t:
            prof = json.load(t.extractfile("metadata.json"))["profile"]
        failures.check(prof.get("clock") == "DWT_CYCCNT" and prof.get("cycles_symbol") == "tth_prof_profile_cycles"
                       and "ns_symbol" not in prof, "cortex-m55 profile metadata: %r" % {k: v for k, v in prof.items()
                                                                                          if k != "calls"})
        r = run([daemon.tthctl, "run", tar, "--profile"])
        failures.check(r.returncode != 0 and "scripts/run-cortexm" in r.stderr and "cortex-m55" in r.stderr,
                       "run --profile of a cortex-m55 artifact: exit %d, %s" % (r.returncode, r.stderr.strip()))

if __name__ == "__main__":
    sys.exit(run_with_daemon(tthctl_args("profile").tthctl, "tth-profile-", body, "profile"))
