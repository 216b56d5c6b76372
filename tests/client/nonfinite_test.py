#!/usr/bin/python3
"""NaN and infinities through `tthctl run` (docs/tthctl.md, "tthctl run"): a model that divides
its first input by its second makes NaN (0/0), +inf (1/0) and -inf (-1/0) among finite values;
`run --json` keeps every one of the first ten values, writing the non-finite ones as the strings
"nan", "inf" and "-inf", which read back (float(), numpy) to numpy's own quotient; the text
output prints them; the .npy written holds the same bits as numpy's quotient. For `llvm` and `c`.

    tests/client/nonfinite_test.py --tthctl build/client/tthctl

Exit status 77 (skipped) when numpy or onnx is missing.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from private_tthd import run_with_daemon, skip_unless, tthctl_args  # noqa: E402

skip_unless("nonfinite", modules=("numpy", "onnx"))
import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402


def model():
    g = helper.make_graph([helper.make_node("Div", ["a", "b"], ["q"], name="divide")], "nonfinite",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 12]),
                           helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 12])],
                          [helper.make_tensor_value_info("q", TensorProto.FLOAT, [2, 12])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def body(daemon, work, failures):
    path = os.path.join(work, "div.onnx")
    onnx.save(model(), path)
    # the first ten values (those --json shows) hold all three kinds among finite ones
    a = np.array([[0, 1, -1, 3, 0, 2.5, -7, 1, 0, -2, 5, 6],
                  [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]], np.float32)
    b = np.array([[0, 0, 0, 2, 4, 0, 0, 3, 0, -0.0, 1, 1],
                  [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]], np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        want = a / b
    for name, arr in (("a", a), ("b", b)):
        np.save(os.path.join(work, name + ".npy"), arr)
    inputs = ["--input", "a=" + os.path.join(work, "a.npy"), "--input", "b=" + os.path.join(work, "b.npy")]
    for target in ("llvm", "c"):
        art = os.path.join(work, "div-%s.tar" % target)
        why = daemon.compile(path, target, art)
        if not failures.check(not why, why):
            continue
        out = os.path.join(work, "out-" + target)
        r = daemon.ctl("run", art, *inputs, "--output-dir", out, "--json")
        if not failures.check(r.returncode == 0, "%s: run --json exit %d: %s" % (target, r.returncode, r.stderr)):
            continue
        vals = json.loads(r.stdout)["outputs"][0]["values"]
        flat = want.reshape(-1)[:10]
        if not failures.check(len(vals) == 10, "%s: %d values in --json, expected 10: %s" % (target, len(vals), vals)):
            continue
        for i, (v, w) in enumerate(zip(vals, flat)):
            if not np.isfinite(w):
                expect = "nan" if np.isnan(w) else ("inf" if w > 0 else "-inf")
                failures.check(v == expect, "%s: value %d is %r, expected the string %r" % (target, i, v, expect))
            else:
                failures.check(isinstance(v, (int, float)) and abs(v - float(w)) <= 1e-6 * max(1.0, abs(float(w))),
                               "%s: value %d is %r, numpy has %r" % (target, i, v, float(w)))
        back = np.array(vals, dtype=np.float64)
        failures.check(np.array_equal(back, flat.astype(np.float64), equal_nan=True),
                       "%s: --json values read back as %s, numpy has %s" % (target, back, flat))
        got = np.load(os.path.join(out, "q.npy"))
        failures.check(got.tobytes() == want.tobytes() or np.array_equal(got, want, equal_nan=True),
                       "%s: q.npy is %s, numpy has %s" % (target, got, want))
        r = daemon.ctl("run", art, *inputs, "--output-dir", out)
        first = r.stdout.split("values:")[1].split("\n")[0].split() if "values:" in r.stdout else []
        failures.check(r.returncode == 0 and first[:3] == ["nan", "inf", "-inf"],
                       "%s: text output starts %s, expected nan inf -inf" % (target, first[:3]))


if __name__ == "__main__":
    sys.exit(run_with_daemon(tthctl_args("nonfinite").tthctl, "tth-nonfinite-", body,
                             "NaN and infinities through run --json and the .npy for llvm and c"))
