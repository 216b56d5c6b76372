#!/usr/bin/python3
"""If decided at run time (docs/operators.md, "Control flow"): models written here whose If
conditions are known only when the model runs, compiled through tthd for `llvm` and `c`, run with
tthctl for each value of the conditions, against ONNX Runtime's outputs for the same inputs
(onnxruntime-node, which bench/ort/setup installs).

- a voice-activity-like model: the sample rate is a graph input; an If on it holds an LSTM in one
  branch and a GRU in the other, each fed through an Unsqueeze by a nested If (on the rate again)
  whose branches reshape the audio chunk to the shape that branch's layer takes;
- an If whose condition is computed from the data (the sign of the input's sum), a nested If on
  the data inside each branch, and an outer value used by both branches;
- an If with two outputs, one of them the same outer value in both branches;
- with --explain, the compile says how many functions run only when their branch is picked;
- an If whose branches give outputs of different shapes is refused, naming both shapes.

    tests/daemon/frontend/runtime_if_test.py --tthctl build/client/tthctl [--ort-dir DIR]

Exit status 77 (skipped) when numpy, onnx, node or onnxruntime-node is missing.
"""
import argparse
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
from private_tthd import PrivateTthd, finish  # noqa: E402
from ort_ref import default_ort_dir, ort_dir_or_skip, ort_outputs  # noqa: E402

try:
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    import onnx
except ImportError:
    sys.exit(77)

F, I64 = TensorProto.FLOAT, TensorProto.INT64
RNG = np.random.default_rng(33)
H = 16


def const(name, arr):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(arr), name + "_v"))


def out(name):
    return helper.make_tensor_value_info(name, F, None)


def graph(nodes, name, outputs):
    return helper.make_graph(nodes, name, [], [out(o) for o in outputs])


def finish_model(nodes, inputs, outputs):
    """inputs: [(name, elem type, shape)]; outputs: [(name, shape)]"""
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, F, s) for n, s in outputs])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def recurrent_branch(tag, seq, feat, rnn, threshold):
    """x [1, seq*feat] -> nested If (sr > threshold: reshape; else reshape * 0.5) -> [seq, feat]
    -> Unsqueeze -> [seq, 1, feat] -> rnn -> its last hidden state as [1, H]"""
    gates = 4 if rnn == "LSTM" else 3
    inner_then = [helper.make_node("Reshape", ["x", tag + "_shape"], [tag + "_t"])]
    inner_else = [const(tag + "_half", np.array(0.5, np.float32)),
                  helper.make_node("Reshape", ["x", tag + "_shape"], [tag + "_r"]),
                  helper.make_node("Mul", [tag + "_r", tag + "_half"], [tag + "_e"])]
    ys = [tag + "_Y", tag + "_Yh"] + ([tag + "_Yc"] if rnn == "LSTM" else [])
    nodes = [
        const(tag + "_thr", np.array(threshold, np.int64)),
        helper.make_node("Greater", ["sr", tag + "_thr"], [tag + "_gt"]),
        const(tag + "_shape", np.array([seq, feat], np.int64)),
        helper.make_node("If", [tag + "_gt"], [tag + "_feats"],
                         then_branch=graph(inner_then, tag + "_then", [tag + "_t"]),
                         else_branch=graph(inner_else, tag + "_else", [tag + "_e"])),
        const(tag + "_axes", np.array([1], np.int64)),
        helper.make_node("Unsqueeze", [tag + "_feats", tag + "_axes"], [tag + "_u"]),
        const(tag + "_W", (RNG.standard_normal((1, gates * H, feat)) * 0.3).astype(np.float32)),
        const(tag + "_R", (RNG.standard_normal((1, gates * H, H)) * 0.3).astype(np.float32)),
        const(tag + "_B", (RNG.standard_normal((1, 2 * gates * H)) * 0.1).astype(np.float32)),
        helper.make_node(rnn, [tag + "_u", tag + "_W", tag + "_R", tag + "_B"], ys, hidden_size=H),
        const(tag + "_oshape", np.array([1, H], np.int64)),
        helper.make_node("Reshape", [tag + "_Yh", tag + "_oshape"], [tag + "_out"]),
    ]
    return graph(nodes, tag, [tag + "_out"])


def vad_model():
    nodes = [const("k16", np.array(16000, np.int64)),
             helper.make_node("Equal", ["sr", "k16"], ["is16"]),
             helper.make_node("If", ["is16"], ["y"], then_branch=recurrent_branch("a", 8, 8, "LSTM", 12000),
                              else_branch=recurrent_branch("b", 16, 4, "GRU", 4000))]
    return finish_model(nodes, [("x", F, [1, 64]), ("sr", I64, [])], [("y", [1, H])])


def data_model():
    """cond = sum(x) > 0; then: relu(x @ A) + nested If (max(x) > 1: x * 2 else x - 1); else:
    tanh(x @ B) + x; a second output: the outer value t = x * 3 in both branches"""
    A = (RNG.standard_normal((8, 8)) * 0.5).astype(np.float32)
    B = (RNG.standard_normal((8, 8)) * 0.5).astype(np.float32)
    inner = helper.make_node(
        "If", ["big"], ["n"],
        then_branch=graph([const("two", np.array(2, np.float32)), helper.make_node("Mul", ["x", "two"], ["n_t"])],
                          "nt", ["n_t"]),
        else_branch=graph([const("one", np.array(1, np.float32)), helper.make_node("Sub", ["x", "one"], ["n_e"])],
                          "ne", ["n_e"]))
    then_nodes = [const("A", A), helper.make_node("MatMul", ["x", "A"], ["xa"]),
                  helper.make_node("Relu", ["xa"], ["ra"]),
                  helper.make_node("ReduceMax", ["x"], ["mx"], keepdims=0),
                  const("kone", np.array(1, np.float32)), helper.make_node("Greater", ["mx", "kone"], ["big"]),
                  inner, helper.make_node("Add", ["ra", "n"], ["y_t"]), helper.make_node("Identity", ["t"], ["t_t"])]
    else_nodes = [const("B", B), helper.make_node("MatMul", ["x", "B"], ["xb"]),
                  helper.make_node("Tanh", ["xb"], ["tb"]), helper.make_node("Add", ["tb", "x"], ["y_e"]),
                  helper.make_node("Identity", ["t"], ["t_e"])]
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             const("zero", np.array(0, np.float32)), helper.make_node("Greater", ["s", "zero"], ["pos"]),
             const("three", np.array(3, np.float32)), helper.make_node("Mul", ["x", "three"], ["t"]),
             helper.make_node("If", ["pos"], ["y", "z"], then_branch=graph(then_nodes, "then", ["y_t", "t_t"]),
                              else_branch=graph(else_nodes, "else", ["y_e", "t_e"]))]
    return finish_model(nodes, [("x", F, [4, 8])], [("y", [4, 8]), ("z", [4, 8])])


def cases():
    """(name, model, [inputs per run])"""
    x = RNG.uniform(-1, 1, (1, 64)).astype(np.float32)
    vad = [{"x": x, "sr": np.array(sr, np.int64)} for sr in (16000, 8000, 2000)]
    base = RNG.uniform(-1, 1, (4, 8)).astype(np.float32)
    data = [{"x": np.abs(base) * 0.9}, {"x": np.abs(base) + 0.5}, {"x": -np.abs(base)}]
    return [("vad", vad_model(), vad), ("data", data_model(), data)]


def refused_shapes():
    nodes = [helper.make_node("If", ["c"], ["y"],
                              then_branch=graph([helper.make_node("Relu", ["x"], ["yt"])], "t", ["yt"]),
                              else_branch=graph([const("sh", np.array([8, 4], np.int64)),
                                                 helper.make_node("Reshape", ["x", "sh"], ["ye"])], "e", ["ye"]))]
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", F, [4, 8]),
                                       helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                          [helper.make_tensor_value_info("y", F, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tthctl", required=True)
    ap.add_argument("--ort-dir", default=default_ort_dir())
    args = ap.parse_args()
    ort_dir_or_skip(args.ort_dir)
    work = tempfile.mkdtemp(prefix="tth-runtime-if-")
    failures = []
    with PrivateTthd(args.tthctl, work) as daemon:
        for name, m, runs in cases():
            d = os.path.join(work, name)
            os.makedirs(d)
            path = os.path.join(d, "m.onnx")
            onnx.save(m, path)
            for target in ("llvm", "c"):
                art = os.path.join(d, target + ".tar")
                why = daemon.compile(path, target, art)
                if why:
                    failures.append("%s for %s: %s" % (name, target, why))
                    continue
                for k, inputs in enumerate(runs):
                    ins = []
                    for n, arr in inputs.items():
                        f = os.path.join(d, "%s_%d.npy" % (n, k))
                        np.save(f, arr)
                        ins += ["--input", "%s=%s" % (n, f)]
                    ort_out, tth_out = os.path.join(d, "ort%d" % k), os.path.join(d, "%s%d" % (target, k))
                    why = ort_outputs(args.ort_dir, path, ins, ort_out)
                    if why:
                        failures.append("%s run %d: %s" % (name, k, why))
                        continue
                    r = daemon.ctl("-q", "run", art, *ins, "--output-dir", tth_out)
                    if r.returncode != 0:
                        failures.append("%s for %s, run %d: %s" % (name, target, k, r.stderr.strip()))
                        continue
                    for o in m.graph.output:
                        want = np.load(os.path.join(ort_out, o.name + ".npy"))
                        got = np.load(os.path.join(tth_out, o.name + ".npy"))
                        if got.shape != want.shape or not np.allclose(got, want, rtol=1e-4, atol=1e-5):
                            failures.append("%s for %s, run %d: output %s differs from ONNX Runtime's (max %.3g)" % (
                                name, target, k, o.name,
                                float(np.max(np.abs(got - want))) if got.shape == want.shape else float("nan")))
                    print("ok" if not failures or not failures[-1].startswith(name) else "FAIL", name, target, k)
        # the branches' functions are guarded: they run only when their condition picks them
        r = daemon.ctl("compile", os.path.join(work, "vad", "m.onnx"), "--target", "llvm", "--explain", "--no-cache",
                       "-o", os.path.join(work, "explained.tar"))
        m = re.search(r"control flow: (\d+) of (\d+) functions run only when", r.stderr)
        if r.returncode != 0 or not m or int(m.group(1)) < 10:
            failures.append("vad --explain: expected a note that most functions run only when their branch is "
                            "picked; exit %d: %s" % (r.returncode, r.stderr.strip()[-600:]))
        else:
            print("ok guarded: %s of %s functions" % (m.group(1), m.group(2)))
        path = os.path.join(work, "shapes.onnx")
        onnx.save(refused_shapes(), path)
        r = daemon.ctl("compile", path, "--target", "llvm", "-o", os.path.join(work, "x.tar"))
        words = ["If's output 0", "float32[4, 8]", "float32[8, 4]", "--bind"]
        missing = [w for w in words if w not in r.stderr]
        if r.returncode == 0 or missing:
            failures.append("an If with outputs of two shapes: expected a refusal naming %s; exit %d: %s"
                            % (missing, r.returncode, r.stderr.strip()))
        else:
            print("ok refused: If outputs of two shapes")
        why = daemon.stop()
        if why:
            failures.append(why)
    return finish(failures, work)


if __name__ == "__main__":
    sys.exit(main())
