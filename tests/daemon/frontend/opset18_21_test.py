#!/usr/bin/python3
"""ONNX opsets 18 to 21 (docs/operators.md, "Opsets 18 to 21"): models written here, one per
operator whose definition changed or that is new there, compiled through tthd for `llvm` and run
with tthctl, against ONNX Runtime's outputs for the same inputs (onnxruntime-node, which
bench/ort/setup installs: Debian's ONNX test data stops at opset 17). Then what tth refuses:
each refusal names the attribute, type or opset.

    tests/daemon/frontend/opset18_21_test.py --tthctl build/client/tthctl [--ort-dir DIR]

Exit status 77 (skipped) when numpy, onnx, node or onnxruntime-node is missing.
"""
import argparse
import os
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

F = TensorProto.FLOAT
RNG = np.random.default_rng(18)


def fin(name, shape):
    return helper.make_tensor_value_info(name, F, shape)


def const(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def model(opset, nodes, inputs, outputs, inits=()):
    """inputs: {name: array}; outputs: {name: shape or None}"""
    g = helper.make_graph(nodes, "m", [fin(n, list(a.shape)) for n, a in inputs.items()],
                          [helper.make_tensor_value_info(n, F, s) for n, s in outputs.items()], list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8 if opset <= 18 else 9 if opset <= 20 else 10
    return m


def x(*shape, lo=-2.0, hi=2.0):
    return RNG.uniform(lo, hi, shape).astype(np.float32)


def cases():
    """(name, model, inputs)"""
    out = []
    a = x(2, 3, 4)
    out.append(("ReduceL2-18 axes input", model(18, [helper.make_node("ReduceL2", ["a", "ax"], ["y"], keepdims=0)],
                                                 {"a": a}, {"y": None}, [const("ax", np.array([1], np.int64))]),
                {"a": a}))
    out.append(("ReduceMax-20 axes input", model(20, [helper.make_node("ReduceMax", ["a", "ax"], ["y"])],
                                                  {"a": a}, {"y": None}, [const("ax", np.array([-1, 0], np.int64))]),
                {"a": a}))
    out.append(("ReduceSumSquare-18 axes input", model(18, [helper.make_node("ReduceSumSquare", ["a", "ax"], ["y"])],
                                                        {"a": a}, {"y": None},
                                                        [const("ax", np.array([2], np.int64))]), {"a": a}))
    s = x(2, 6)
    out.append(("Split-18 num_outputs", model(18, [helper.make_node("Split", ["s"], ["y0", "y1", "y2"], axis=1,
                                                                    num_outputs=3)],
                                              {"s": s}, {"y0": None, "y1": None, "y2": None}), {"s": s}))
    p = x(1, 2, 3, 4)
    out.append(("Pad-18 axes", model(18, [helper.make_node("Pad", ["p", "pads", "v", "axes"], ["y"])], {"p": p},
                                     {"y": None}, [const("pads", np.array([1, 0, 2, 1], np.int64)),
                                                   const("v", np.array(0.5, np.float32)),
                                                   const("axes", np.array([2, -1], np.int64))]), {"p": p}))
    out.append(("Pad-18 axes reflect", model(18, [helper.make_node("Pad", ["p", "pads", "", "axes"], ["y"],
                                                                   mode="reflect")], {"p": p}, {"y": None},
                                             [const("pads", np.array([2, 1], np.int64)),
                                              const("axes", np.array([3], np.int64))]), {"p": p}))
    r = x(1, 2, 4, 6)
    out.append(("Resize-18 axes with sizes", model(18, [helper.make_node("Resize", ["r", "", "", "sz"], ["y"],
                                                                         mode="linear", axes=[2, 3])],
                                                   {"r": r}, {"y": None}, [const("sz", np.array([7, 9], np.int64))]),
                {"r": r}))
    out.append(("Resize-18 axes with scales", model(18, [helper.make_node("Resize", ["r", "", "sc"], ["y"],
                                                                          mode="nearest", axes=[3])],
                                                    {"r": r}, {"y": None},
                                                    [const("sc", np.array([1.5], np.float32))]), {"r": r}))
    r2 = x(1, 1, 4, 7)
    for policy in ("not_larger", "not_smaller"):
        out.append(("Resize-18 keep_aspect_ratio_policy " + policy,
                    model(18, [helper.make_node("Resize", ["r", "", "", "sz"], ["y"], mode="linear",
                                                keep_aspect_ratio_policy=policy, axes=[2, 3])],
                          {"r": r2}, {"y": None}, [const("sz", np.array([5, 5], np.int64))]), {"r": r2}))
    d = x(4, 3)
    for red, op in (("max", "ScatterElements"), ("min", "ScatterElements")):
        idx = np.array([[1, 0, 3], [1, 2, 0]], np.int64)
        upd = x(2, 3)
        out.append(("%s-18 reduction %s" % (op, red),
                    model(18, [helper.make_node(op, ["d", "i", "u"], ["y"], axis=0, reduction=red)], {"d": d, "u": upd},
                          {"y": None}, [const("i", idx)]), {"d": d, "u": upd}))
    for red in ("max", "min"):
        idx = np.array([[2], [0], [2]], np.int64)
        upd = x(3, 3)
        out.append(("ScatterND-18 reduction " + red,
                    model(18, [helper.make_node("ScatterND", ["d", "i", "u"], ["y"], reduction=red)],
                          {"d": d, "u": upd}, {"y": None}, [const("i", idx)]), {"d": d, "u": upd}))
    ap = x(1, 2, 9, 9)
    out.append(("AveragePool-19 dilations", model(19, [helper.make_node("AveragePool", ["ap"], ["y"],
                                                                        kernel_shape=[3, 3], dilations=[2, 2],
                                                                        strides=[1, 2])],
                                                  {"ap": ap}, {"y": None}), {"ap": ap}))
    g = x(2, 6, 3, 3)
    out.append(("GroupNormalization-18 (per group)",
                model(18, [helper.make_node("GroupNormalization", ["g", "sc", "b"], ["y"], num_groups=3,
                                            epsilon=1e-4)], {"g": g}, {"y": None},
                      [const("sc", x(3)), const("b", x(3))]), {"g": g}))
    out.append(("GroupNormalization-21 (per channel)",
                model(21, [helper.make_node("GroupNormalization", ["g", "sc", "b"], ["y"], num_groups=2)], {"g": g},
                      {"y": None}, [const("sc", x(6)), const("b", x(6))]), {"g": g}))
    e = x(3, 50, lo=-6, hi=6)
    out.append(("Mish-18", model(18, [helper.make_node("Mish", ["e"], ["y"])], {"e": e}, {"y": None}), {"e": e}))
    out.append(("Gelu-20", model(20, [helper.make_node("Gelu", ["e"], ["y"])], {"e": e}, {"y": None}), {"e": e}))
    out.append(("Gelu-20 tanh", model(20, [helper.make_node("Gelu", ["e"], ["y"], approximate="tanh")], {"e": e},
                                      {"y": None}), {"e": e}))
    cc = x(3, 5, 4)
    out.append(("CenterCropPad-18", model(18, [helper.make_node("CenterCropPad", ["cc", "sh"], ["y"], axes=[0, 1])],
                                          {"cc": cc}, {"y": None}, [const("sh", np.array([6, 2], np.int64))]),
                {"cc": cc}))
    out.append(("CenterCropPad-18 all axes", model(18, [helper.make_node("CenterCropPad", ["cc", "sh"], ["y"])],
                                                   {"cc": cc}, {"y": None},
                                                   [const("sh", np.array([2, 8, 3], np.int64))]), {"cc": cc}))
    q = x(2, 8)
    out.append(("QuantizeLinear-21 output_dtype",
                model(21, [helper.make_node("QuantizeLinear", ["q", "s"], ["qi"], output_dtype=TensorProto.INT8),
                           helper.make_node("DequantizeLinear", ["qi", "s"], ["y"])], {"q": q}, {"y": None},
                      [const("s", np.array(0.02, np.float32))]), {"q": q}))
    gi, gg = x(1, 2, 5, 5), x(1, 4, 3, 2, lo=-1.1, hi=1.1)
    out.append(("GridSample-20 linear", model(20, [helper.make_node("GridSample", ["gi", "gg"], ["y"], mode="linear")],
                                              {"gi": gi, "gg": gg}, {"y": None}), {"gi": gi, "gg": gg}))
    # an ordinary network at opset 21: operators whose newer versions only add element types
    c = x(1, 3, 8, 8)
    out.append(("Conv, Relu, Flatten, Gemm, Transpose, Squeeze at opset 21",
                model(21, [helper.make_node("Conv", ["c", "w"], ["c1"], pads=[1, 1, 1, 1]),
                           helper.make_node("Relu", ["c1"], ["r1"]),
                           helper.make_node("Transpose", ["r1"], ["t1"], perm=[0, 2, 3, 1]),
                           helper.make_node("Flatten", ["t1"], ["f"]),
                           helper.make_node("Gemm", ["f", "fc"], ["g1"], transB=1),
                           helper.make_node("Unsqueeze", ["g1", "ax"], ["u"]),
                           helper.make_node("Squeeze", ["u", "ax"], ["y"])], {"c": c}, {"y": None},
                      [const("w", x(4, 3, 3, 3)), const("fc", x(5, 256)), const("ax", np.array([1], np.int64))]),
                {"c": c}))
    return out


def refusals():
    """(name, model, words the error must hold)"""
    out = []
    p = x(1, 2, 3, 4)
    out.append(("Pad-19 wrap", model(19, [helper.make_node("Pad", ["p", "pads"], ["y"], mode="wrap")], {"p": p},
                                     {"y": None}, [const("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))]),
                ["Pad mode 'wrap'"]))
    r = x(1, 1, 4, 4)
    out.append(("Resize-18 antialias", model(18, [helper.make_node("Resize", ["r", "", "sc"], ["y"], mode="linear",
                                                                   antialias=1)], {"r": r}, {"y": None},
                                             [const("sc", np.array([1, 1, 0.5, 0.5], np.float32))]),
                ["antialias"]))
    out.append(("Resize-19 half_pixel_symmetric",
                model(19, [helper.make_node("Resize", ["r", "", "sc"], ["y"], mode="linear",
                                            coordinate_transformation_mode="half_pixel_symmetric")], {"r": r},
                      {"y": None}, [const("sc", np.array([1, 1, 2, 2], np.float32))]), ["half_pixel_symmetric"]))
    q = x(2, 8)
    out.append(("DequantizeLinear-21 block_size",
                model(21, [helper.make_node("QuantizeLinear", ["q", "s"], ["qi"], block_size=4),
                           helper.make_node("DequantizeLinear", ["qi", "s"], ["y"], block_size=4)], {"q": q},
                      {"y": None}, [const("s", np.full((2, 2), 0.02, np.float32))]), ["block_size 4"]))
    f8 = TensorProto()  # float8e4m3fn, ONNX element type 17 (onnx 1.12's helpers do not know it)
    f8.name, f8.data_type, f8.raw_data = "w8", 17, b"\x00\x00"
    f8.dims.extend([2])
    m = model(19, [helper.make_node("Cast", ["w8"], ["w"], to=TensorProto.FLOAT),
                   helper.make_node("Add", ["q", "w"], ["y"])], {"q": x(2)}, {"y": None}, [f8])
    out.append(("float8 initializer", m, ["float8e4m3fn"]))
    out.append(("BitwiseAnd-18", model(18, [helper.make_node("BitwiseAnd", ["q", "q"], ["y"])], {"q": q}, {"y": None}),
                ["BitwiseAnd"]))
    out.append(("opset 22", model(22, [helper.make_node("Relu", ["q"], ["y"])], {"q": q}, {"y": None}),
                ["opset 22", "1 to 21"]))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tthctl", required=True)
    ap.add_argument("--ort-dir", default=default_ort_dir())
    args = ap.parse_args()
    ort_dir_or_skip(args.ort_dir)
    work = tempfile.mkdtemp(prefix="tth-opset18-")
    failures = []
    with PrivateTthd(args.tthctl, work) as daemon:
        for i, (name, m, inputs) in enumerate(cases()):
            d = os.path.join(work, "c%02d" % i)
            os.makedirs(d)
            path = os.path.join(d, "m.onnx")
            onnx.save(m, path)
            ins = []
            for n, arr in inputs.items():
                np.save(os.path.join(d, n + ".npy"), arr)
                ins += ["--input", "%s=%s" % (n, os.path.join(d, n + ".npy"))]
            why = ort_outputs(args.ort_dir, path, ins, os.path.join(d, "ort"))
            if why:
                failures.append("%s: %s" % (name, why))
                print("FAIL", name)
                continue
            art = os.path.join(d, "m.tar")
            r = daemon.ctl("compile", path, "--target", "llvm", "-o", art, "-q")
            if r.returncode != 0:
                failures.append("%s: compile failed: %s" % (name, r.stderr.strip()))
                print("FAIL", name)
                continue
            r = daemon.ctl("run", art, *ins, "--output-dir", os.path.join(d, "tth"), "-q")
            if r.returncode != 0:
                failures.append("%s: run failed: %s" % (name, r.stderr.strip()))
                print("FAIL", name)
                continue
            for o in m.graph.output:
                want = np.load(os.path.join(d, "ort", o.name + ".npy"))
                got = np.load(os.path.join(d, "tth", o.name + ".npy")).astype(np.float32)
                if got.shape != want.shape:
                    failures.append("%s: output %s has shape %s, ONNX Runtime's %s" % (name, o.name, got.shape,
                                                                                      want.shape))
                elif not np.allclose(got, want, rtol=1e-4, atol=1e-5):
                    k = int(np.argmax(np.abs(got - want)))
                    failures.append("%s: output %s differs from ONNX Runtime's by %.3g at %d (%r vs %r)" %
                                    (name, o.name, float(np.max(np.abs(got - want))), k, float(got.flat[k]),
                                     float(want.flat[k])))
            print("ok" if not failures or not failures[-1].startswith(name + ":") else "FAIL", name)
        for i, (name, m, words) in enumerate(refusals()):
            path = os.path.join(work, "refused%02d.onnx" % i)
            onnx.save(m, path)
            r = daemon.ctl("compile", path, "--target", "llvm", "-o", os.path.join(work, "x.tar"))
            missing = [w for w in words if w not in r.stderr]
            if r.returncode == 0 or missing:
                failures.append("%s: expected a refusal naming %s; exit %d: %s" % (name, missing or words,
                                                                                  r.returncode, r.stderr.strip()))
            else:
                print("ok refused:", name)
        why = daemon.stop()
        if why:
            failures.append(why)
    return finish(failures, work)


if __name__ == "__main__":
    sys.exit(main())
