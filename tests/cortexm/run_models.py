#!/usr/bin/python3
"""tth's generated C as real Cortex-M firmware: models compiled through a private tthd (tthctl
compile, targets c -mcpu=cortex-m4 and c -mcpu=cortex-m55), built and run by scripts/run-cortexm
on QEMU's mps2-an386 (Cortex-M4) and mps3-an547 (Cortex-M55) boards (docs/cortexm.md).

    tests/cortexm/run_models.py --tthctl build/client/tthctl

Checks: examples/digits.onnx against numpy's answer (examples/digit_expected.npy) and ONNX node
tests against their output_0.pb, float32 within |a-b| <= 1e-4 + 1e-4*|b| (as the conformance
runners), integers exactly; the integer models' Cortex-M outputs bit for bit against the same
artifact built with the host's cc as its README.txt says and run on the host; a cmsis-nn,c
artifact with tth's reference CMSIS-NN as --extra-src (within one quantization step of numpy,
bit for bit against the host build); digits built with -O3 for the Cortex-M55, where GCC
vectorizes the model's matmul with MVE (the startup code enables MVE); the instruction
count's calibration (one SysTick tick per 40 instructions at the M4 board's 25 MHz, 31.25 at the
M55 board's 32 MHz, under -icount shift=0); run-cortexm's errors: an entry that returns
non-zero, one that faults, one that hangs (timeout), a missing input; `tthctl validate --board`
(an artifact that agrees with the reference, one that does not, its usage errors); and the
per-call profiles of c, cmsis-nn,c and ethos-n,c artifacts (profile_runs.py).
Exit status 77 (skipped) when qemu-system-arm, arm-none-eabi-gcc with newlib, numpy or onnx is
missing.
"""
import concurrent.futures
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support"))
from private_tthd import run, run_with_daemon, tthctl_args  # noqa: E402
from profile_runs import profile_runs  # noqa: E402
from artifact_main import (BOARD_TOOLS, ROOT, RUN_CORTEXM, board_instructions, build,  # noqa: E402
                           compare, generated_cases, load_pb, nn_reference, run_board, run_program, safe_name, unpack)

NODE = "/usr/share/libonnx-testdata/data/node"
DIGITS = os.path.join(ROOT, "examples", "digits.onnx")

BOARDS = [("cortex-m4", "mps2-an386", 40.0), ("cortex-m55", "mps3-an547", 31.25)]
NODE_CASES = [
    "test_conv_with_strides_padding",
    "test_conv_with_strides_and_asymmetric_padding",
    "test_softmax_axis_1",
    "test_qlinearconv",
    "test_qlinearmatmul_2D",
    "test_matmulinteger",
]


def newlib_missing():
    libc = run(["arm-none-eabi-gcc", "-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-print-file-name=libc.a"])
    return not os.path.isabs(libc.stdout.strip())


def digits_io():
    """examples/digit_input.npy and numpy's answer for it (examples/digit_expected.npy)"""
    import numpy as np
    return (np.load(os.path.join(ROOT, "examples", "digit_input.npy")),
            np.load(os.path.join(ROOT, "examples", "digit_expected.npy")))


def node_case(name):
    """(model, {input name: array}, {output name: expected array}) of an ONNX node test."""
    import onnx
    d = os.path.join(NODE, name)
    g = onnx.load(os.path.join(d, "model.onnx")).graph
    init = {i.name for i in g.initializer}
    ins = [i.name for i in g.input if i.name not in init]
    data = os.path.join(d, "test_data_set_0")
    inputs = {n: load_pb(os.path.join(data, "input_%d.pb" % k)) for k, n in enumerate(ins)}
    outputs = {o.name: load_pb(os.path.join(data, "output_%d.pb" % k)) for k, o in enumerate(g.output)}
    return os.path.join(d, "model.onnx"), inputs, outputs


def compiled(daemon, work, name, model, cpu, kinds=""):
    """model compiled for <kinds>c -mcpu=<cpu> into work/name/model.tar: (its directory, the tar,
    None), or why it failed last"""
    d = os.path.join(work, name)
    os.makedirs(d)
    tar = os.path.join(d, "model.tar")
    return d, tar, daemon.compile(model, kinds + "c -mcpu=" + cpu, tar, "--name", "model")


def run_on_host(d, tar, inputs, cflags=()):
    """The artifact built with the host's cc as its README.txt says (with cflags: a library it
    needs), run on inputs -> (error, {output file stem: bytes})."""
    host = os.path.join(d, "host")
    meta = unpack(tar, host)
    exe, why = build(meta, host, cc=["cc", "-std=c99", "-O2"], flags=cflags)
    if why:
        return "host " + why, None
    why, outs, _ = run_program(exe, meta, host, list(inputs.values()), timeout=60)
    if why:
        return "host " + why, None
    return None, {safe_name(o["name"]): y.tobytes() for o, y in zip(meta["outputs"], outs)}


def one_model(daemon, work, name, model, inputs, expected, kinds="", library=None, atol=None):
    """Compile for each board's CPU (target <kinds>c -mcpu=...), run on the board, compare with
    the expected outputs (float: the conformance tolerance, or atol; integers exactly); integer
    models and those built with a library also bit for bit against the host build. library:
    (host cc arguments, run-cortexm arguments) for each CPU. Returns a list of failure lines."""
    import numpy as np
    failures = []
    integer = all(np.issubdtype(a.dtype, np.integer) for a in expected.values())
    for cpu, board, per_tick in BOARDS:
        d, tar, why = compiled(daemon, os.path.join(work, name), cpu, model, cpu, kinds)
        if why:
            failures.append("%s %s: %s" % (name, cpu, why))
            continue
        host_flags, extra = library(cpu) if library else ((), ())
        why, got, stdout = run_board(tar, board, inputs, os.path.join(d, "out-" + board), extra, timeout=60)
        if why:
            failures.append("%s: %s" % (name, why))
            continue
        bad = len(failures)
        for oname, want in expected.items():
            stem = safe_name(oname)
            if stem not in got:
                failures.append("%s on %s: no output %s.npy" % (name, board, stem))
                continue
            why = compare(got[stem], want, "%s on %s, output %s" % (name, board, oname), atol)
            if why:
                failures.append(why)
        count = board_instructions(stdout)
        if not count:
            failures.append("%s on %s: no instruction count in run-cortexm's report" % (name, board))
        elif count[1] != per_tick or count[0] <= 0:
            failures.append("%s on %s: instruction count %d with %g instructions a tick, expected %g a tick"
                            % (name, board, count[0], count[1], per_tick))
        if (integer or library) and len(failures) == bad:
            why, host = run_on_host(d, tar, inputs, host_flags)
            if why:
                failures.append("%s %s: %s" % (name, cpu, why))
                continue
            for stem, data in host.items():
                if got[stem].tobytes() != data:
                    failures.append("%s: output %s on %s differs from the host cc build of the same artifact"
                                    % (name, stem, board))
    return failures


def mve_run(daemon, work):
    """digits for the Cortex-M55 built with -O3, where GCC vectorizes with MVE (q registers): the
    startup code's CPACR setting lets that code run; the outputs stay right."""
    import numpy as np
    image, expected = digits_io()
    d, tar, why = compiled(daemon, work, "digits-mve", DIGITS, "cortex-m55")
    if not why:
        why, got, _ = run_board(tar, "mps3-an547", {"image": image}, os.path.join(d, "out-mps3-an547"),
                                ["--cflags=-O3"], timeout=60)
    if why:
        return ["digits -O3: " + why]
    failures = []
    why = compare(got.get("probabilities", np.zeros(0)), expected, "digits -O3 on mps3-an547")
    if why:
        failures.append(why)
    # an MVE instruction (q registers) in one of the model's functions (model_*)
    dis = run(["arm-none-eabi-objdump", "-d", os.path.join(d, "out-mps3-an547", "firmware", "fw.elf")])
    fn, mve = None, set()
    for line in dis.stdout.splitlines():
        m = re.match(r"[0-9a-f]+ <(\w+)>:$", line)
        if m:
            fn = m.group(1)
        elif fn and fn.startswith("model_") and re.search(r"\tv\w+\.\w+\s+q[0-7],", line):
            mve.add(fn)
    if dis.returncode != 0 or not mve:
        failures.append("digits -O3 on mps3-an547: no MVE instruction in the model's functions (objdump exit %d)"
                        % dis.returncode)
    return failures


def cmsisnn_case(work):
    """tests/plugins/cmsisnn/int8_models.py's qdq_softmax (QLinearConv, then a quantized softmax), for
    cmsis-nn,c: the cmsis-nn kind's C with tth's reference CMSIS-NN given to run-cortexm as
    --extra-src and -I, built for the CPU's contracts (-DTTH_NNREF_MVE / _DSP)."""
    import numpy as np
    import onnx
    d = os.path.join(work, "int8")
    _, why = generated_cases(os.path.join(ROOT, "tests", "plugins", "cmsisnn", "int8_models.py"), d)
    if why:
        return None, why
    case = os.path.join(d, "qdq_softmax")
    model = os.path.join(case, "model.onnx")
    graph = onnx.load(model).graph

    def library(cpu):
        return nn_reference("-DTTH_NNREF_MVE" if cpu == "cortex-m55" else "-DTTH_NNREF_DSP")
    # the output is a dequantized softmax: one quantization step is 1/256 (as tests/plugins/cmsisnn)
    return ("cmsis-nn qdq_softmax", model, {graph.input[0].name: np.load(os.path.join(case, "input_0.npy"))},
            {graph.output[0].name: np.load(os.path.join(case, "expected_0.npy"))}, "cmsis-nn,", library,
            1.0001 / 256), None


FAKE_ENTRY_C = r"""
#include <stdint.h>
#include "tth_model.h"
int32_t tth_model_run(const struct tth_model_inputs *inputs, struct tth_model_outputs *outputs, void *workspace)
{
    (void)inputs; (void)outputs; (void)workspace;
#if BEHAVIOUR == 1
    return 7;
#elif BEHAVIOUR == 2
    return *(volatile int32_t *)0xF0000000u;
#elif BEHAVIOUR == 4
    ((volatile uint8_t *)inputs->image)[3] = 1;
    return 0;
#elif BEHAVIOUR == 5
    for (int i = 0; i < 10; i++)
        ((float *)outputs->probabilities)[i] = 0.1f;
    return 0;
#else
    for (;;) __asm__ volatile("");
#endif
}
"""


def validate_on_board(daemon, d, tar):
    """tthctl validate --board: the digits artifact on the mps2-an386 against the reference on this
    machine (ok), an artifact whose entry writes 0.1 everywhere (differs), and its usage errors"""
    failures = []
    r = daemon.ctl("validate", tar, DIGITS, "--board", "mps2-an386", "--json")
    try:
        res = json.loads(r.stdout)
        out = res["outputs"][0]
        good = (r.returncode == 0 and res["ok"] and res["board"] == "mps2-an386" and out["name"] == "probabilities"
                and out["argmax"] == out["reference_argmax"] and out["max_abs_diff"] < 1e-4)
    except (ValueError, KeyError, IndexError):
        good = False
    if not good:
        failures.append("validate --board: exit %d: %s %s" % (r.returncode, r.stdout[-1500:], r.stderr[-1500:]))
    art = os.path.join(d, "art-constant")
    src = unpack(tar, art)["files"]["sources"][0]
    with open(os.path.join(art, src), "w") as f:
        f.write("#define BEHAVIOUR 5\n" + FAKE_ENTRY_C)
    r = daemon.ctl("validate", art, DIGITS, "--board", "mps2-an386")
    if r.returncode != 1 or "DIFFERS" not in r.stdout or "differ from the reference" not in r.stderr:
        failures.append("validate --board of a wrong artifact: exit %d: %s %s" % (r.returncode, r.stdout, r.stderr))
    r = daemon.ctl("validate", tar, DIGITS, "--board-arg=-q")
    if r.returncode != 2 or "--board" not in r.stderr:
        failures.append("validate --board-arg without --board: exit %d: %s" % (r.returncode, r.stderr))
    env = dict(os.environ, TTH_RUN_CORTEXM=os.path.join(d, "no-such-runner"))
    r = run([daemon.tthctl, "--socket", daemon.socket, "--no-start", "validate", tar, DIGITS, "--board", "mps2-an386"],
            env=env)
    if r.returncode != 1 or "TTH_RUN_CORTEXM" not in r.stderr:
        failures.append("validate --board without run-cortexm: exit %d: %s" % (r.returncode, r.stderr))
    return failures


def error_paths(daemon, work):
    """run-cortexm's errors, on an artifact whose one source is replaced by an entry that returns
    7, that reads unmapped memory, that never returns, or that writes to its (const, read-only)
    input."""
    import numpy as np
    failures = []
    d, tar, why = compiled(daemon, work, "errors", DIGITS, "cortex-m4")
    if why:
        return ["error paths: " + why]
    image = os.path.join(d, "image.npy")
    np.save(image, digits_io()[0])
    cases = [(1, "returned 7", 60, "mps2-an386"), (2, "BusFault", 60, "mps2-an386"), (3, "timed out", 3, "mps2-an386"),
             (4, "a write to a constant or an input", 60, "mps2-an386"),
             (4, "a write to a constant or an input", 60, "mps3-an547")]
    for behaviour, want, timeout, board in cases:
        art = os.path.join(d, "art%d-%s" % (behaviour, board))
        src = unpack(tar, art)["files"]["sources"][0]
        with open(os.path.join(art, src), "w") as f:
            f.write("#define BEHAVIOUR %d\n" % behaviour + FAKE_ENTRY_C)
        r = run([RUN_CORTEXM, art, "--board", board, "--out", os.path.join(art, "out"),
                 "--timeout", str(timeout), "image=" + image], timeout=120)
        if r.returncode != 1 or want not in r.stderr:
            failures.append("run-cortexm on %s, entry behaviour %d: exit %d, expected 1 and %r in: %s"
                            % (board, behaviour, r.returncode, want, r.stderr.strip()))
    failures += validate_on_board(daemon, d, tar)
    r = run([RUN_CORTEXM, tar, "--board", "mps2-an386", "--out", os.path.join(d, "out")], timeout=60)
    if r.returncode != 1 or "missing input: image" not in r.stderr:
        failures.append("run-cortexm without inputs: exit %d: %s" % (r.returncode, r.stderr.strip()))
    return failures


def main():
    args = tthctl_args("cortexm", modules=("numpy", "onnx"), tools=BOARD_TOOLS)
    if newlib_missing():
        print("cortexm: skipped, newlib for arm-none-eabi is not installed (libnewlib-arm-none-eabi)")
        return 77

    def body(daemon, work, failures):
        image, expected = digits_io()
        models = [("digits", DIGITS, {"image": image}, {"probabilities": expected})]
        models += [(n,) + node_case(n) for n in NODE_CASES]
        cmsisnn, why = cmsisnn_case(work)
        if failures.check(not why, why):
            models.append(cmsisnn)
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            def timed(f, *a):
                t = time.monotonic()
                return f(*a), time.monotonic() - t
            jobs = [(m[0], pool.submit(timed, one_model, daemon, work, *m)) for m in models]
            jobs.append(("digits -O3 (MVE) on mps3-an547", pool.submit(timed, mve_run, daemon, work)))
            jobs.append(("run-cortexm errors", pool.submit(timed, error_paths, daemon, work)))
            if not why:  # the int8 models cmsisnn_case wrote
                jobs.append(("run-cortexm --profile", pool.submit(timed, profile_runs, daemon, work,
                                                                  os.path.join(work, "int8"))))
            for name, job in jobs:
                why, seconds = job.result()
                print("%-48s %-6s %5.1f s" % (name, "ok" if not why else "FAILED", seconds))
                failures += why

    return run_with_daemon(args.tthctl, "tth-cortexm-", body, "cortexm")


if __name__ == "__main__":
    sys.exit(main())
