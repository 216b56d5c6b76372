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
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support"))
from private_tthd import run_with_daemon, tthctl_args  # noqa: E402
from artifact_main import (ROOT, board_instructions, boards_ready, build, compare, generated_cases, nn_reference,  # noqa: E402
                           run_board, run_program, unpack)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(ROOT, "tests", "plugins", "cmsisnn"))

TARGETS = [
    # (label, target, reference CMSIS-NN build define or None, emulated board or None)
    ("ethos-n,c", "ethos-n,c", None, None),
    ("ethos-n,cmsis-nn,c m55", "ethos-n,cmsis-nn,c -mcpu=cortex-m55", "-DTTH_NNREF_MVE", "mps3-an547"),
]
# int8_models.py's models: what the ethos-n kind must take (the 4x4 average and the softmax are
# not Ethos-N78 operators), and the output's quantization step (a dequantized softmax: 1/256)
INT8_MODELS = {
    "qlinear_cnn": ["qnn.conv2d", "qnn.requantize", "add", "multiply", "nn.max_pool2d", "qnn.matmul"],
    "qlinear_cnn_i8": ["qnn.conv2d", "qnn.requantize", "add", "multiply", "nn.max_pool2d", "qnn.matmul"],
    "qdq_softmax": ["qnn.conv2d", "qnn.requantize"],
}
UNBOUND = -106  # ETHOSN_MODEL_E_UNBOUND


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


def check_target(daemon, case, name, offloaded, step, label, target, define, board, work, boards):
    import numpy as np
    d = os.path.join(work, name + "-" + label.replace(",", "_").replace(" ", "_"))
    os.makedirs(d)
    tar = os.path.join(d, "a.tar")
    c = daemon.ctl("compile", os.path.join(case, "model.onnx"), "--target", target, "--name", "model", "--explain",
                   "-o", tar)
    if c.returncode != 0:
        return ["%s: compile: %s" % (label, c.stderr.strip()[-2000:])], None
    failures = []
    meta = unpack(tar, d)
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
    outputs = {}
    if define is None:
        r = daemon.ctl("run", tar, "--input", "x=" + os.path.join(case, "input_0.npy"), "--output-dir",
                       os.path.join(d, "run"))
        if r.returncode != 0:
            failures.append("%s: tthctl run: %s" % (label, r.stderr.strip()[-2000:]))
        else:
            outputs["tthctl run"] = np.load(os.path.join(d, "run", "y.npy"))
    exe, why = build(meta, d, flags=nn_reference(define)[0] if define else (), bind_parameters=True)
    if why:
        return failures + ["%s: %s" % (label, why)], None
    why, y, stdout = run_program(exe, meta, d, [x], parameters=True)
    if why:
        failures.append("%s: standalone %s" % (label, why))
    else:
        status = int(stdout.split()[1])
        if regions and status != UNBOUND:
            failures.append("%s: run before binding returned %d, not %d" % (label, status, UNBOUND))
        outputs["standalone"] = y[0]
    for how, y in outputs.items():
        why = compare(y, want, "%s (%s): output differs from numpy by more than a step" % (label, how), step * 1.0001)
        if why:
            failures.append(why)
    if "tthctl run" in outputs and "standalone" in outputs and \
            outputs["tthctl run"].tobytes() != outputs["standalone"].tobytes():
        failures.append("%s: tthctl run and the standalone build differ" % label)
    if board and boards and "standalone" in outputs:
        # the firmware binds the parameters file, embedded as a const array, before the call
        why, got, stdout = run_board(tar, board, {"x": x}, os.path.join(d, "board"), nn_reference(define)[1])
        if why:
            failures.append("%s on %s: %s" % (label, board, why))
        elif got["y"].tobytes() != outputs["standalone"].tobytes():
            failures.append("%s on %s: the board's output differs from the host's" % (label, board))
        else:
            print("    %s on %s: same bytes as the host, %s instructions" % (
                label, board, (board_instructions(stdout) or ("no count of",))[0]))
    return failures, sum(len(m["meta"]["ethos-n"]["performance"]["layers"]) for m in regions)


def main():
    args = tthctl_args("ethos-n executed", modules=("numpy", "onnx"), tools=("cc",), keep=True)
    boards = boards_ready("ethos-n executed")

    def body(daemon, work, failures):
        models = os.path.join(work, "models")
        cases = []
        found = set()  # each generator's listing holds the cases of those before it
        for script in (os.path.join(ROOT, "tests", "plugins", "cmsisnn", "int8_models.py"), os.path.join(HERE, "ethosn_models.py")):
            written, why = generated_cases(script, models)
            found.update(written)
            failures.check(not why, why)
        for case in sorted(found):
            name = os.path.basename(case)
            spec = os.path.join(case, "offloaded.json")
            if os.path.exists(spec):
                s = json.load(open(spec))
                cases.append((name, case, s["ops"], s["step"]))
            else:
                cases.append((name, case, INT8_MODELS[name], 1.0 / 256))
        for name, case, offloaded, step in cases:
            for label, target, define, board in TARGETS:
                f, layers = check_target(daemon, case, name, offloaded, step, label, target, define, board, work,
                                         boards)
                print("%-16s %-24s %s%s" % (name, label, "ok" if not f else "FAILED",
                                            "" if layers is None else " (%d MAC layers estimated)" % layers))
                failures += f
        failures.check(len(cases) >= 5, "only %d models" % len(cases))

    return run_with_daemon(args.tthctl, "tth-ethosn-run-", body, "ethos-n executed on the host", args.keep)


if __name__ == "__main__":
    sys.exit(main())
