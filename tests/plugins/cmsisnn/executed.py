#!/usr/bin/python3
"""cmsis-nn artifacts executed on this machine: int8 models (int8_models.py) compiled through tthd
for `cmsis-nn,c` on Cortex-M55 (MVE), M4 (DSP) and M0 (neither) and for plain `c`, each built as
its README says with the host's cc (-Wall -Wextra -Werror) and linked with tth's reference
implementation of CMSIS-NN (plugins/cmsisnn/reference), compiled to model the contracts of the
matching CMSIS-NN build (-DTTH_NNREF_MVE / -DTTH_NNREF_DSP). Checks:
  - the partition: every convolution, matmul, pool, add, mul and softmax on cmsis-nn;
  - every output within one quantization step of the numpy reference of int8_models.py, for
    the cmsis-nn artifacts and for `c`;
  - the three CPU builds give identical bytes (same integer arithmetic, different contracts);
  - the M55 and M4 artifacts, built with arm-none-eabi-gcc (-Wall -Wextra -Werror) with the
    reference compiled for that CPU (MVE code paths' contracts on the M55), run as firmware on
    QEMU's mps3-an547 and mps2-an386 boards (scripts/run-cortexm) and give the host's bytes
    (skipped, with a line saying so, without qemu-system-arm or arm-none-eabi-gcc).

    tests/plugins/cmsisnn/executed.py --tthctl build/client/tthctl [--keep DIR]

Exit status 77 (skipped) without cc, numpy or onnx.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support"))
from private_tthd import run_with_daemon, tthctl_args  # noqa: E402
from artifact_main import (board_instructions, boards_ready, build, compare, compile_unpacked,  # noqa: E402
                           generated_cases, nn_reference, run_board, run_program)

HERE = os.path.dirname(os.path.abspath(__file__))

TARGETS = [
    # (label, target, reference CMSIS-NN build define, "" for the plain build, None without it)
    ("c", "c", None),
    ("m55", "cmsis-nn,c -mcpu=cortex-m55", "-DTTH_NNREF_MVE"),
    ("m4", "cmsis-nn,c -mcpu=cortex-m4", "-DTTH_NNREF_DSP"),
    ("m0", "cmsis-nn,c -mcpu=cortex-m0", ""),
]
BOARDS = {"m55": "mps3-an547", "m4": "mps2-an386"}  # emulated boards for those artifacts
# ops the cmsis-nn kind must take in these models (qnn.quantize of a float input and the int8
# reshape before the classifier stay on c)
OFFLOADED = {"qnn.conv2d", "qnn.matmul", "nn.max_pool2d", "nn.avg_pool2d", "nn.softmax", "multiply"}


def build_and_run(daemon, case, label, target, define, work):
    """the case compiled for target, built with the host's cc (with the reference CMSIS-NN unless
    define is None) and run on its input: (output, metadata, None) or (None, None, why)"""
    import numpy as np
    tar = os.path.join(work, os.path.basename(case) + "-" + label, "a.tar")
    os.makedirs(os.path.dirname(tar))
    meta, why = compile_unpacked(daemon, os.path.join(case, "model.onnx"), target, tar)
    if why:
        return None, None, why
    # constants bound at run time (docs/artifact.md): the parameters file first, as README.txt says
    bind = any(m.get("meta", {}).get("bind_constants") for m in meta["modules"])
    exe, why = build(meta, os.path.dirname(tar), flags=nn_reference(define)[0] if define is not None else (),
                     bind_parameters=bind)
    if why:
        return None, None, why
    why, y, _ = run_program(exe, meta, os.path.dirname(tar), [np.load(os.path.join(case, "input_0.npy"))],
                            parameters=bind, timeout=120)
    return (None, None, why) if why else (y[0], meta, None)


def on_boards(case, outputs, work, failures):
    """the M55 and M4 artifacts as firmware on their emulated boards: the host's bytes"""
    import numpy as np
    for label, board in BOARDS.items():
        if label not in outputs:
            continue
        d = os.path.join(work, os.path.basename(case) + "-" + label)
        define = next(t[2] for t in TARGETS if t[0] == label)
        why, got, stdout = run_board(os.path.join(d, "a.tar"), board,
                                     {"x": np.load(os.path.join(case, "input_0.npy"))}, os.path.join(d, "board"),
                                     nn_reference(define)[1])
        if not failures.check(not why, "%s on %s: %s" % (label, board, why)):
            continue
        if failures.check(got["y"].tobytes() == outputs[label].tobytes(),
                          "%s on %s: the board's output differs from the host's" % (label, board)):
            print("    %s on %s: same bytes as the host, %s instructions" % (
                label, board, (board_instructions(stdout) or ("no count of",))[0]))


def check_case(daemon, case, work, boards, failures):
    import numpy as np
    want = np.load(os.path.join(case, "expected_0.npy"))
    # the output is a dequantized softmax: one step is 1/256
    step = 1.0 / 256
    outputs = {}
    for label, target, define in TARGETS:
        y, meta, why = build_and_run(daemon, case, label, target, define, work)
        if not failures.check(not why, "%s: %s" % (label, why)):
            continue
        outputs[label] = y
        why = compare(y, want, label + ": output differs from numpy by more than a step", step * 1.0001)
        failures.check(not why, why)
        if define is not None:
            kinds = {}
            for o in meta["partition"]["ops"]:
                kinds.setdefault(o["op"], set()).add(o["kind"])
            stray = sorted(op for op in OFFLOADED if op in kinds and kinds[op] != {"cmsis-nn"})
            failures.check(not stray, "%s: not offloaded to cmsis-nn: %s" % (label, ", ".join(stray)))
            failures.check(any("cmsis-nn" in k for k in kinds.values()), "%s: nothing offloaded to cmsis-nn" % label)
    npu = [outputs[k] for k in ("m55", "m4", "m0") if k in outputs]
    failures.check(all(other.tobytes() == npu[0].tobytes() for other in npu[1:]),
                   "the M55, M4 and M0 builds disagree")
    if boards:
        on_boards(case, outputs, work, failures)


def main():
    args = tthctl_args("cmsisnn executed", modules=("numpy", "onnx"), tools=("cc",), keep=True)
    boards = boards_ready("cmsisnn executed")

    def body(daemon, work, failures):
        cases, why = generated_cases(os.path.join(HERE, "int8_models.py"), os.path.join(work, "models"))
        failures.check(not why, why)
        for case in cases:
            before = len(failures)
            check_case(daemon, case, work, boards, failures)
            print("%-16s %s" % (os.path.basename(case), "ok" if len(failures) == before else "FAILED"))

    return run_with_daemon(args.tthctl, "tth-cmsisnn-run-", body, "cmsis-nn executed on the host", args.keep)


if __name__ == "__main__":
    sys.exit(main())
