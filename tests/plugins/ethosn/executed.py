#!/usr/bin/python3
"""ethos-n artifacts executed on this machine, their NPU regions on tth's functional model of the
Ethos-N78: the int8 models of tests/plugins/cmsisnn/int8_models.py and the models of ethosn_models.py
(the PLE's sigmoid, tanh and leaky relu, concatenate, pad, resize, global average; uint8 data
movement) compiled through a private tthd for
  - `ethos-n,c`: run by `tthctl run` (the runtime binds the regions' constants from the tar), and
    built as README.txt says with the host's cc (-Wall -Wextra -Werror) and a main that calls the
    entry once unbound (it must return the "unbound" status, -106), then binds the parameters
    file with tth_<model>_bind_parameters and runs;
  - `ethos-n,cmsis-nn,c -mcpu=cortex-m55`: built the same way with tth's reference CMSIS-NN
    compiled as the MVE build (plugins/cmsisnn/reference, -DTTH_NNREF_MVE) and run here; and
    built with arm-none-eabi-gcc and run as firmware on QEMU's mps3-an547 by scripts/run-cortexm
    (the parameters file embedded and bound before the call), which must give the host's bytes
    (skipped, with a line saying so, without qemu-system-arm or arm-none-eabi-gcc).
Checks: every operator the model lists is on ethos-n in metadata.json's partition; every output
within one quantization step of numpy (for ethos-n,cmsis-nn,c with CMSIS-NN's rounding of the
average pool it runs: reference() below); `tthctl run` and the standalone build give the same
bytes; `tthctl compile --explain` prints the cycle estimate of each region.

    tests/plugins/ethosn/executed.py --tthctl build/client/tthctl [--keep DIR]

Exit status 77 (skipped) without cc, numpy or onnx.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support"))
from private_tthd import PrivateTthd  # noqa: E402
from artifact_main import main_c  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
REFERENCE = os.path.join(ROOT, "plugins", "cmsisnn", "reference")
sys.path.insert(0, os.path.join(ROOT, "tests", "plugins", "cmsisnn"))

TARGETS = [
    # (label, target, reference CMSIS-NN build defines or None, emulated board or None)
    ("ethos-n,c", "ethos-n,c", None, None),
    ("ethos-n,cmsis-nn,c m55", "ethos-n,cmsis-nn,c -mcpu=cortex-m55", ["-DTTH_NNREF_MVE"], "mps3-an547"),
]
# int8_models.py's models: what the ethos-n kind must take (the 4x4 average and the softmax are
# not Ethos-N78 operators), and the output's quantization step (a dequantized softmax: 1/256)
INT8_MODELS = {
    "qlinear_cnn": ["qnn.conv2d", "qnn.requantize", "add", "multiply", "nn.max_pool2d", "qnn.matmul"],
    "qlinear_cnn_i8": ["qnn.conv2d", "qnn.requantize", "add", "multiply", "nn.max_pool2d", "qnn.matmul"],
    "qdq_softmax": ["qnn.conv2d", "qnn.requantize"],
}
UNBOUND = -106  # ETHOSN_MODEL_E_UNBOUND


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def reference(path, x, cmsis_nn_average):
    """The model evaluated node by node in numpy (float64, ONNX's definitions; the operators of
    int8_models.py). With cmsis_nn_average, an AveragePool between a dequantize and a quantize of
    one quantization is what CMSIS-NN computes for it (arm_avgpool_s8 on the int8 values, halves
    rounded away from zero; ONNX rounds them to even): in an ethos-n,cmsis-nn,c artifact the
    average is CMSIS-NN's (docs/cmsisnn.md), and a tie there moves it by one step."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    from int8_models import conv
    m = onnx.load(path)
    v = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    v[m.graph.input[0].name] = x
    origin = {}  # float tensor -> (int tensor, scale, zero point) it was dequantized from
    f64 = lambda n: np.asarray(v[n]).astype(np.float64)  # noqa: E731

    def quant(val, s, zp):
        info = np.iinfo(v[zp].dtype)
        return np.clip(np.round(val / f64(s)) + f64(zp), info.min, info.max).astype(v[zp].dtype)

    for node in m.graph.node:
        i, o, op = list(node.input), node.output[0], node.op_type
        at = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if op == "QuantizeLinear":
            if isinstance(v[i[0]], tuple):  # CMSIS-NN's average, already in the integers
                v[o] = v[i[0]][1]
            else:
                v[o] = quant(f64(i[0]), i[1], i[2])
        elif op == "DequantizeLinear":
            v[o] = (f64(i[0]) - f64(i[2])) * f64(i[1])
            origin[o] = (v[i[0]], i[1], i[2])
        elif op == "QLinearConv":
            xq, w = f64(i[0]) - f64(i[2]), f64(i[3]) - f64(i[5])
            pad = at.get("pads", [0, 0, 0, 0])[0]
            acc = conv(xq, w, pad, at.get("group", 1)) + (f64(i[8])[None, :, None, None] if len(i) > 8 else 0)
            v[o] = quant(acc * (f64(i[1]) * f64(i[4])), i[6], i[7])
        elif op == "QLinearMatMul":
            acc = (f64(i[0]) - f64(i[2])) @ (f64(i[3]) - f64(i[5]))
            v[o] = quant(acc * (f64(i[1]) * f64(i[4])), i[6], i[7])
        elif op in ("Add", "Mul"):
            v[o] = f64(i[0]) + f64(i[1]) if op == "Add" else f64(i[0]) * f64(i[1])
        elif op == "MaxPool":
            (kh, kw), (sh, sw) = at["kernel_shape"], at.get("strides", [1, 1])
            a = v[i[0]]
            oh, ow = (a.shape[2] - kh) // sh + 1, (a.shape[3] - kw) // sw + 1
            v[o] = np.stack([a[:, :, y:y + sh * (oh - 1) + 1:sh, z:z + sw * (ow - 1) + 1:sw]
                             for y in range(kh) for z in range(kw)]).max(axis=0)
        elif op == "AveragePool":  # over the whole plane, as in these models
            avg = v[i[0]].mean(axis=(2, 3), keepdims=True)
            if cmsis_nn_average and i[0] in origin:
                q8, s, zp = origin[i[0]]
                total, count = q8.astype(np.int64).sum(axis=(2, 3), keepdims=True), q8.shape[2] * q8.shape[3]
                away = np.where(total > 0, (total + count // 2) // count, -((-total + count // 2) // count))
                v[o] = (avg, np.clip(away, -128, 127).astype(q8.dtype))
            else:
                v[o] = avg
        elif op == "Reshape":
            v[o] = v[i[0]].reshape(v[i[1]])
        elif op == "Softmax":
            z = f64(i[0])
            e = np.exp(z - z.max(axis=-1, keepdims=True))
            v[o] = e / e.sum(axis=-1, keepdims=True)
        else:
            raise ValueError("reference: no %s" % op)
    return np.asarray(v[m.graph.output[0].name]).astype(np.float32)


def compare(np, got, want, step, label):
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    if diff.max() > step * 1.0001:
        i = int(np.argmax(diff))
        return ["%s: output differs from numpy by %.4g (%.2f steps) at %d: %r vs %r" % (
            label, diff.max(), diff.max() / step, i, float(got.flat[i]), float(want.flat[i]))]
    return []


def check_target(args, case, name, offloaded, step, label, target, defines, board, work):
    import numpy as np
    d = os.path.join(work, name + "-" + label.replace(",", "_").replace(" ", "_"))
    os.makedirs(d)
    tar = os.path.join(d, "a.tar")
    c = run([args.tthctl, "--socket", args.socket, "--no-start", "compile", os.path.join(case, "model.onnx"),
             "--target", target, "--name", "model", "--explain", "-o", tar])
    if c.returncode != 0:
        return ["%s: compile: %s" % (label, c.stderr.strip()[-2000:])], None
    failures = []
    with tarfile.open(tar) as t:
        t.extractall(d)
    meta = json.load(open(os.path.join(d, "metadata.json")))
    kinds = {}
    for o in meta["partition"]["ops"]:
        kinds.setdefault(o["op"], set()).add(o["kind"])
    stray = sorted(op for op in offloaded if kinds.get(op) != {"ethos-n"})
    if stray:
        failures.append("%s: not (only) on ethos-n: %s" % (label, ", ".join("%s %s" % (op, sorted(kinds.get(op, [])))
                                                                          for op in stray)))
    regions = [m for m in meta["modules"] if m["kind"] == "ethos-n"]
    readme = open(os.path.join(d, "README.txt")).read()
    if "tth_model_bind_parameters(bytes, length)" not in readme:
        failures.append("%s: README.txt does not say to bind the parameters" % label)
    for m in regions:
        sym = m["meta"]["entry_symbols"][0]
        if "'%s'" % sym not in c.stderr or "NPU cycles" not in c.stderr:
            failures.append("%s: --explain printed no cycle estimate for %s" % (label, sym))
    want = np.load(os.path.join(case, "expected_0.npy"))
    x = np.load(os.path.join(case, "input_0.npy"))
    if name in INT8_MODELS:
        # the node-by-node reference gives int8_models.py's answer exactly...
        ref = reference(os.path.join(case, "model.onnx"), x, False)
        if ref.tobytes() != want.tobytes():
            failures.append("%s: the numpy reference of executed.py differs from int8_models.py's" % label)
        # ...and, where CMSIS-NN computes the average pool, CMSIS-NN's rounding of it
        if kinds.get("nn.avg_pool2d") == {"cmsis-nn"}:
            want = reference(os.path.join(case, "model.onnx"), x, True)
    x.tofile(os.path.join(d, "x.bin"))
    outputs = {}
    if defines is None:
        r = run([args.tthctl, "run", tar, "--input", "x=" + os.path.join(case, "input_0.npy"), "--output-dir",
                 os.path.join(d, "run")], timeout=300)
        if r.returncode != 0:
            failures.append("%s: tthctl run: %s" % (label, r.stderr.strip()[-2000:]))
        else:
            outputs["tthctl run"] = np.load(os.path.join(d, "run", "y.npy"))
    with open(os.path.join(d, "main.c"), "w") as f:
        f.write(main_c(meta, "model", bind_parameters=True))
    srcs = [os.path.join(d, s) for s in meta["files"]["sources"]]
    incs = ["-I" + os.path.join(d, "include")]
    incs += ["-I" + os.path.join(d, "codegen", k, "include") for k in sorted(os.listdir(os.path.join(d, "codegen")))
             if os.path.isdir(os.path.join(d, "codegen", k, "include"))]
    cmd = ["cc", "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror"] + incs + ["-o", os.path.join(d, "prog"),
                                                                            os.path.join(d, "main.c")] + srcs
    if defines is not None:
        cmd += ["-I", REFERENCE] + defines + [os.path.join(REFERENCE, "arm_nn_reference.c")]
    b = run(cmd + ["-lm"])
    if b.returncode != 0:
        return failures + ["%s: build: %s" % (label, (b.stdout + b.stderr).strip()[-3000:])], None
    p = run([os.path.join(d, "prog"), os.path.join(d, meta["files"]["parameters"]), os.path.join(d, "x.bin"),
             os.path.join(d, "y.bin")], timeout=300)
    if p.returncode != 0:
        failures.append("%s: standalone run: exit %d %s" % (label, p.returncode, p.stderr.strip()))
    else:
        status = int(p.stdout.split()[1])
        if regions and status != UNBOUND:
            failures.append("%s: run before binding returned %d, not %d" % (label, status, UNBOUND))
        outputs["standalone"] = np.fromfile(os.path.join(d, "y.bin"), dtype=want.dtype).reshape(want.shape)
    for how, y in outputs.items():
        failures += compare(np, y, want, step, "%s (%s)" % (label, how))
    if "tthctl run" in outputs and "standalone" in outputs and \
            outputs["tthctl run"].tobytes() != outputs["standalone"].tobytes():
        failures.append("%s: tthctl run and the standalone build differ" % label)
    if board and args.boards and "standalone" in outputs:
        # the firmware binds the parameters file, embedded as a const array, before the call
        r = run([os.path.join(ROOT, "scripts", "run-cortexm"), tar, "--board", board,
                 "x=" + os.path.join(case, "input_0.npy"), "--out", os.path.join(d, "board"), "-I", REFERENCE,
                 "--extra-src", os.path.join(REFERENCE, "arm_nn_reference.c")], timeout=300)
        if r.returncode != 0:
            failures.append("%s on %s: %s" % (label, board, r.stderr.strip()[-1500:]))
        elif np.load(os.path.join(d, "board", "y.npy")).tobytes() != outputs["standalone"].tobytes():
            failures.append("%s on %s: the board's output differs from the host's" % (label, board))
        else:
            icount = [ln for ln in r.stdout.splitlines() if "instructions" in ln]
            print("    %s on %s: same bytes as the host%s" % (
                label, board, "; " + icount[0].split(": ", 2)[-1].split(" (")[0] if icount else ""))
    return failures, sum(len(m["meta"]["ethos-n"]["performance"]["layers"]) for m in regions)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tthctl", required=True)
    ap.add_argument("--keep", help="work in this directory and keep it")
    args = ap.parse_args()
    try:
        import numpy  # noqa: F401
        import onnx  # noqa: F401
    except ImportError:
        print("ethos-n executed: skipped, python3-numpy or python3-onnx is not installed")
        return 77
    if not shutil.which("cc"):
        print("ethos-n executed: skipped, no cc")
        return 77
    missing = [t for t in ("qemu-system-arm", "arm-none-eabi-gcc") if not shutil.which(t)]
    args.boards = not missing
    if missing:
        print("ethos-n executed: the emulated Cortex-M55 board is skipped, %s not installed (scripts/setup "
              "installs it)" % " and ".join(missing))
    args.tthctl = os.path.abspath(args.tthctl)
    work = args.keep or tempfile.mkdtemp(prefix="tth-ethosn-run-")
    os.makedirs(work, exist_ok=True)
    daemon = PrivateTthd(args.tthctl, work)
    args.socket = daemon.socket
    failures = []
    started = time.monotonic()
    try:
        models = os.path.join(work, "models")
        cases = []
        for script in (os.path.join(ROOT, "tests", "plugins", "cmsisnn", "int8_models.py"), os.path.join(HERE, "ethosn_models.py")):
            g = run(["/usr/bin/python3", script, models])
            if g.returncode != 0:
                failures.append("%s: exit %d %s" % (os.path.basename(script), g.returncode, g.stderr))
        for name in sorted(os.listdir(models)) if os.path.isdir(models) else []:
            case = os.path.join(models, name)
            spec = os.path.join(case, "offloaded.json")
            if os.path.exists(spec):
                s = json.load(open(spec))
                cases.append((name, case, s["ops"], s["step"]))
            else:
                cases.append((name, case, INT8_MODELS[name], 1.0 / 256))
        for name, case, offloaded, step in cases:
            for label, target, defines, board in TARGETS:
                f, layers = check_target(args, case, name, offloaded, step, label, target, defines, board, work)
                print("%-16s %-24s %s%s" % (name, label, "ok" if not f else "FAILED",
                                            "" if layers is None else " (%d MAC layers estimated)" % layers))
                for why in f:
                    print("    " + why)
                failures += f
        if len(cases) < 5:
            failures.append("only %d models" % len(cases))
        why = daemon.stop()
        if why:
            failures.append(why)
    finally:
        daemon.close()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("ethos-n executed on the host: %d failures (%.1f s)" % (len(failures), time.monotonic() - started))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
