#!/usr/bin/python3
"""`tthctl validate ARTIFACT MODEL` (docs/tthctl.md, "validate"): the artifact against the model
compiled for `c` by its generic lowering, on the same inputs.

- A small CNN whose 3x3 convolution takes the Winograd kernel and whose layers run in blocked
  channels on `llvm`: validate passes (exit 0, JSON "ok", argmax agreeing, the difference within
  the tolerance), the same seed gives the same figures and another seed others; an input given by
  --input is used (its name and file in the JSON), and the reference's output for it equals
  numpy's forward pass of the model (so the reference computes the model, not just anything equal
  to the artifact).
- An artifact of the same graph with other weights, validated against the model: its output
  differs, exit 1, the row names an element (validate can fail).
- --tolerance 0 on a float model whose kernels round differently from the generic ones: differs.
- An input bound at compile time and not given to validate: exit 2 with a hint naming --bind;
  given with --bind: passes. A model with another input name: exit 1 naming the input. A bad
  --seed: exit 2.

    tests/client/validate_test.py --tthctl build/client/tthctl

Exit status 77 (skipped) when numpy or onnx is missing.
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from private_tthd import run_with_daemon, skip_unless, tthctl_args  # noqa: E402

skip_unless("validate", modules=("numpy", "onnx"))
import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def cnn(seed, input_name="x"):
    """x [1, 16, 20, 20] -> 3x3 conv to 32 (pad 1) -> relu -> 1x1 conv to 32 -> global average ->
    flatten -> matmul to 10 -> softmax; weights from the seed"""
    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((32, 16, 3, 3)) * 0.15).astype(np.float32)
    b1 = (rng.standard_normal(32) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((32, 32, 1, 1)) * 0.25).astype(np.float32)
    fc = (rng.standard_normal((32, 10)) * 0.5).astype(np.float32)
    nodes = [helper.make_node("Conv", [input_name, "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"]),
             helper.make_node("GlobalAveragePool", ["c2"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("MatMul", ["f", "fc"], ["l"]),
             helper.make_node("Softmax", ["l"], ["y"], axis=1)]
    inits = [numpy_helper.from_array(v, k) for k, v in (("w1", w1), ("b1", b1), ("w2", w2), ("fc", fc))]
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, [1, 16, 20, 20])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), (w1, b1, w2, fc)


def forward(x, w):
    """numpy's forward pass of cnn(), in float64"""
    w1, b1, w2, fc = (v.astype(np.float64) for v in w)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    c1 = np.zeros((1, 32, 20, 20))
    for kh in range(3):
        for kw in range(3):
            c1 += np.einsum("oc,nchw->nohw", w1[:, :, kh, kw], xp[:, :, kh:kh + 20, kw:kw + 20])
    r1 = np.maximum(c1 + b1.reshape(1, 32, 1, 1), 0)
    c2 = np.einsum("oc,nchw->nohw", w2[:, :, 0, 0], r1)
    logits = c2.mean(axis=(2, 3)) @ fc
    e = np.exp(logits - logits.max())
    return e / e.sum()


def scaled(model):
    """the model with an input Mul by a scale given as a second graph input 's' [1]"""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    g.node[0].input[0] = "xs"
    g.node.insert(0, helper.make_node("Mul", ["x", "s"], ["xs"]))
    g.input.append(helper.make_tensor_value_info("s", TensorProto.FLOAT, [1]))
    return m


def body(daemon, work, failures):
    check = failures.check
    m0, w0 = cnn(0)
    m1, _ = cnn(1)
    paths = {}
    for name, m in (("m0", m0), ("m1", m1), ("renamed", cnn(0, "image")[0]), ("scaled", scaled(m0))):
        paths[name] = os.path.join(work, name + ".onnx")
        onnx.save(m, paths[name])
    arts = {}
    for name in ("m0", "m1"):
        arts[name] = os.path.join(work, name + ".tar")
        why = daemon.compile(paths[name], "llvm", arts[name])
        check(not why, "%s: %s" % (name, why))

    def validate(*extra):
        r = daemon.ctl("validate", *extra)
        try:
            return r, json.loads(r.stdout) if "--json" in extra and r.stdout.strip() else None
        except ValueError:
            return r, None

    r, j = validate(arts["m0"], paths["m0"], "--json")
    if check(r.returncode == 0 and j and j["ok"], "validate of a right artifact: exit %d, %s %s" % (r.returncode, r.stdout, r.stderr)):
        row = j["outputs"][0]
        check(row["name"] == "y" and row["shape"] == [1, 10], "the row: %s" % row)
        check(row["argmax"] == row["reference_argmax"], "argmax disagrees: %s" % row)
        check(row["max_abs_diff"] <= 1e-3 * row["reference_max_abs"], "difference beyond the tolerance: %s" % row)
        check(j["inputs"] == [{"name": "x", "from": "random"}], "inputs: %s" % j["inputs"])
        r2, j2 = validate(arts["m0"], paths["m0"], "--json")
        check(j2 and j2["outputs"][0]["max_abs_diff"] == row["max_abs_diff"], "the same seed gave other figures")
        r3, j3 = validate(arts["m0"], paths["m0"], "--json", "--seed", "7")
        check(j3 and j3["outputs"][0]["reference_max_abs"] != row["reference_max_abs"],
              "seed 7 gave the same output as seed 0: %s" % (j3 and j3["outputs"][0]))
    # the text form says ok and the tolerance
    r, _ = validate(arts["m0"], paths["m0"])
    check(r.returncode == 0 and " ok " in r.stdout and "tolerance: 0.001" in r.stdout, "text: %s" % r.stdout)

    # an input from a file; the reference's values are numpy's forward pass
    x = np.random.default_rng(5).standard_normal((1, 16, 20, 20)).astype(np.float32)
    np.save(os.path.join(work, "x.npy"), x)
    r, j = validate(arts["m0"], paths["m0"], "--json", "--input", "x=" + os.path.join(work, "x.npy"))
    if check(r.returncode == 0 and j, "validate --input: %s %s" % (r.stdout, r.stderr)):
        check(j["inputs"] == [{"name": "x", "from": os.path.join(work, "x.npy")}], "inputs: %s" % j["inputs"])
        want = forward(x, w0)
        check(j["outputs"][0]["reference_argmax"] == int(want.argmax()),
              "the reference's argmax %s, numpy's %d" % (j["outputs"][0]["reference_argmax"], int(want.argmax())))
        check(abs(j["outputs"][0]["reference_max_abs"] - float(want.max())) < 1e-5,
              "the reference's largest output %r, numpy's %r" % (j["outputs"][0]["reference_max_abs"], float(want.max())))
        out = os.path.join(work, "run")
        rr = daemon.ctl("run", arts["m0"], "--input", "x=" + os.path.join(work, "x.npy"), "--output-dir", out)
        if check(rr.returncode == 0, "run: %s" % rr.stderr):
            got = np.load(os.path.join(out, "y.npy"))
            check(np.allclose(got, want, atol=1e-5), "the artifact's output %s, numpy's %s" % (got, want))

    # other weights: the artifact computes another function, validate says so
    r, j = validate(arts["m1"], paths["m0"], "--json")
    check(r.returncode == 1 and j and not j["ok"] and "element" in j["outputs"][0].get("why", ""),
          "an artifact of other weights passed: exit %d, %s" % (r.returncode, r.stdout))
    check("differ from the reference" in r.stderr, "stderr: %s" % r.stderr)
    r, _ = validate(arts["m0"], paths["m0"], "--tolerance", "0")
    check(r.returncode == 1 and "DIFFERS" in r.stdout,
          "tolerance 0 passed a Winograd artifact (or the kernels round as the generic ones): %s" % r.stdout)

    # an input bound at compile time
    s = os.path.join(work, "s.npy")
    np.save(s, np.array([0.5], np.float32))
    sart = os.path.join(work, "scaled.tar")
    why = daemon.compile(paths["scaled"], "llvm", sart, "--bind", "s=" + s)
    if check(not why, "--bind: %s" % why):
        r, _ = validate(sart, paths["scaled"])
        check(r.returncode == 2 and "--bind s=" in r.stderr, "validate without --bind: exit %d, %s" % (r.returncode, r.stderr))
        r, _ = validate(sart, paths["scaled"], "--bind", "s=" + s)
        check(r.returncode == 0, "validate --bind: exit %d, %s %s" % (r.returncode, r.stdout, r.stderr))
    # the wrong model, a bad seed
    r, _ = validate(arts["m0"], paths["renamed"])
    check(r.returncode == 1 and "'x'" in r.stderr, "a model without input x: exit %d, %s" % (r.returncode, r.stderr))
    r, _ = validate(arts["m0"], paths["m0"], "--seed", "-3")
    check(r.returncode == 2 and "--seed" in r.stderr, "a bad seed: exit %d, %s" % (r.returncode, r.stderr))
    leftovers = [d for d in os.listdir(tempfile.gettempdir()) if d.startswith("tthctl-validate-")]
    print("%d temporary director%s of other runs left in /tmp" % (len(leftovers), "y" if len(leftovers) == 1 else "ies"))


if __name__ == "__main__":
    sys.exit(run_with_daemon(tthctl_args("validate").tthctl, "tth-validate-", body,
                             "tthctl validate: right, wrong and bound artifacts against the generic reference"))
