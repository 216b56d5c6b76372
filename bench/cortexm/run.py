#!/usr/bin/python3
"""Int8 models on a Cortex-M55 and beside the NPU: what each target offloads, the memory it plans,
the bytes of code and constants, and the instructions executed on QEMU's Cortex-M55 board.

    /usr/bin/python3 bench/models/make_int8_models.py build-bench/bench/int8
    /usr/bin/python3 bench/cortexm/run.py --build build-bench [--models dscnn_qlinear,...]
        [--cmsis-nn-root DIR]

For each model of bench/models/make_int8_models.py (BUILD/bench/int8) and each target:
  c -mcpu=cortex-m55                   everything in tth's generated C
  cmsis-nn,c -mcpu=cortex-m55          CMSIS-NN calls for what it takes
  ethos-n,c / ethos-n,cmsis-nn,c       what the NPU takes (its regions run on tth's functional model)
prints: operators offloaded to each non-host kind / all operators; the planned workspace against
its lower bound; the artifact's code (.text) and constants (.rodata, .data) compiled with
arm-none-eabi-gcc -O2 for the M55 (the generated C only, not the library it calls); and, for the
first two targets, the instructions the model's entry executed on QEMU's mps3-an547 board
(scripts/run-cortexm: -icount, counted by SysTick around the call, about one tick = 31 instructions);
and the largest difference of the output from ONNX Runtime's (bench/ort, when installed), in
quantization steps of the output (1/256): the board's for the first two targets, for ethos-n,c
the same model compiled for this machine and run by `tthctl run`, its NPU regions on tth's
functional model of the NPU (docs/ethosn.md; the model keeps every layer's value, more than the
board's heap holds).

The cmsis-nn target runs against tth's reference CMSIS-NN (plugins/cmsisnn/reference: plain C,
so its instruction count says nothing about CMSIS-NN's speed) unless --cmsis-nn-root names a
CMSIS-NN source tree (Arm's ARM-software/CMSIS-NN), whose Source/*/*.c int8 files are then built
for the M55 with its MVE code paths. Instruction counts do not depend on the machine's load.
Never pass/fail.
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "common"))
import tth_bench  # noqa: E402

TARGETS = [
    # label, target, whether the instruction count means anything (the ethos-n rows run the NPU's
    # functional model on the M55's CPU: their outputs are checked, their count is not printed)
    ("c", "c -mcpu=cortex-m55", True),
    ("cmsis-nn,c", "cmsis-nn,c -mcpu=cortex-m55", True),
    ("ethos-n,c", "ethos-n,c -mcpu=cortex-m55", False),
    ("ethos-n,cmsis-nn,c", "ethos-n,cmsis-nn,c -mcpu=cortex-m55", False),
]
ORT_TIME = os.path.join(ROOT, "bench", "ort", "ort_time.js")
REFERENCE = os.path.join(ROOT, "plugins", "cmsisnn", "reference")


def library_sources(root):
    """the CMSIS-NN files an int8 artifact calls into (float, int4 and int16 variants left out)"""
    if not root:
        return [os.path.join(REFERENCE, "arm_nn_reference.c")], [REFERENCE], "tth's reference CMSIS-NN"
    srcs = [f for f in sorted(glob.glob(os.path.join(root, "Source", "*", "*.c")))
            if not re.search(r"_f16|_f32|s4|s16", os.path.basename(f)) or
            os.path.basename(f).startswith(("arm_nn_mat_mult_kernel_s8_s16", "arm_nn_mat_mult_kernel_row_offset"))]
    return srcs, [os.path.join(root, "Include")], "CMSIS-NN from " + root


def code_bytes(art_dir, meta, work):
    """.text and .rodata+.data of the artifact's generated C for the M55"""
    text = const = 0
    for i, src in enumerate(meta["files"]["sources"]):
        obj = os.path.join(work, "o%d.o" % i)
        incs = ["-I" + os.path.join(art_dir, "include"), "-I" + REFERENCE]
        incs += ["-I" + d for d in glob.glob(os.path.join(art_dir, "codegen", "*", "include"))]
        r = subprocess.run(["arm-none-eabi-gcc", "-std=c99", "-O2", "-mcpu=cortex-m55", "-mthumb",
                            "-mfloat-abi=hard", "-c"] + incs + [os.path.join(art_dir, src), "-o", obj],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return None, None
        out = subprocess.run(["arm-none-eabi-size", "-A", obj], capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                if parts[0].startswith(".text"):
                    text += int(parts[1])
                elif parts[0].startswith((".rodata", ".data")):
                    const += int(parts[1])
    return text, const


def ort_output(onnx_path, x, work):
    """ONNX Runtime's output for the input (bench/ort/setup), or None without node or ORT"""
    if not shutil.which("node"):
        return None
    out = os.path.join(work, "ort")
    r = subprocess.run(["node", ORT_TIME, onnx_path, "--input", "input=" + x, "--runs", "20", "--warmup", "0",
                        "--output-dir", out], capture_output=True, text=True)
    if r.returncode != 0:
        return None
    import numpy as np
    return np.load(os.path.join(out, "output.npy"))


def run_host(tth, onnx_path, target, x, work):
    """the model compiled for this machine (the NPU's regions on tth's functional model) and run by
    tthctl run: its output, or None"""
    import numpy as np
    art = os.path.join(work, "host.tar")
    if tth.ctl("compile", onnx_path, "--target", target, "--name", "model", "-o", art, "--shared",
               check=False).returncode != 0:
        return None
    out = os.path.join(work, "host-out")
    if tth.ctl("run", art, "--input", "input=" + x, "--output-dir", out, check=False).returncode != 0:
        return None
    return np.load(os.path.join(out, "output.npy"))


def run_board(art, x, lib, work):
    srcs, incs, _ = lib
    cmd = [os.path.join(ROOT, "scripts", "run-cortexm"), art, "--board", "mps3-an547", "input=" + x,
           "--out", os.path.join(work, "board"), "--cflags=-w", "--timeout", "600"]
    for s in srcs:
        cmd += ["--extra-src", s]
    for i in incs:
        cmd += ["-I", i]
    r = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"about (\d+) instructions", r.stdout)
    if r.returncode != 0 or not m:
        return ("failed: " + r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "failed"), None
    import numpy as np
    return int(m.group(1)), np.load(os.path.join(work, "board", "output.npy"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build-bench")
    ap.add_argument("--models", help="comma-separated names (default: all of the manifest)")
    ap.add_argument("--cmsis-nn-root", help="a CMSIS-NN source tree to run the cmsis-nn target against")
    args = ap.parse_args()
    for tool in ("arm-none-eabi-gcc", "arm-none-eabi-size", "qemu-system-arm"):
        if not shutil.which(tool):
            sys.exit("bench/cortexm: %s is not installed (scripts/setup installs it)" % tool)
    models_dir = os.path.join(args.build, "bench", "int8")
    manifest = os.path.join(models_dir, "manifest.tsv")
    if not os.path.exists(manifest):
        sys.exit("bench/cortexm: no %s: run /usr/bin/python3 bench/models/make_int8_models.py %s"
                 % (manifest, models_dir))
    names = [ln.split("\t")[0] for ln in open(manifest).read().splitlines()[1:] if ln]
    if args.models:
        names = [n for n in names if n in args.models.split(",")]
    lib = library_sources(args.cmsis_nn_root)
    print("cmsis-nn target linked with: " + lib[2])
    print("%-18s %-20s %14s %18s %9s %9s %14s %8s" % ("model", "target", "offloaded/ops", "workspace/bound",
                                                       "code B", "const B", "M55 instr.", "vs ORT"))
    with tth_bench.Tth(args.build) as tth:
        for name in names:
            onnx_path = os.path.join(models_dir, name + ".onnx")
            x = os.path.join(models_dir, name + ".input.npy")
            ort_dir = tempfile.mkdtemp(prefix="tth-cortexm-ort-")
            ort = ort_output(onnx_path, x, ort_dir)
            shutil.rmtree(ort_dir, ignore_errors=True)
            for label, target, count in TARGETS:
                work = tempfile.mkdtemp(prefix="tth-cortexm-")
                try:
                    art = os.path.join(work, "a.tar")
                    r = tth.ctl("compile", onnx_path, "--target", target, "--name", "model", "-o", art,
                                "--no-cache", check=False)
                    if r.returncode != 0:
                        print("%-18s %-20s compile failed: %s" % (name, label, r.stderr.strip().splitlines()[0]))
                        continue
                    art_dir = os.path.join(work, "art")
                    with tarfile.open(art) as t:
                        t.extractall(art_dir)
                    meta = json.load(open(os.path.join(art_dir, "metadata.json")))
                    ops = meta["partition"]["ops"]
                    host = meta["partition"]["fallback"]
                    off = {}
                    for o in ops:
                        if o["kind"] != host:
                            off[o["kind"]] = off.get(o["kind"], 0) + 1
                    off_s = "+".join("%d" % v for v in off.values()) or "0"
                    plan = meta["memory"]["plan"]
                    ws = "%d/%d" % (meta["memory"].get("workspace_bytes", plan.get("workspace_bytes", 0)),
                                    plan["lower_bound_bytes"])
                    text, const = code_bytes(art_dir, meta, work)
                    if count:
                        instr, y = run_board(art, x, lib, work)
                    else:  # the functional model keeps every layer's value: too big for the board's heap
                        instr, y = "-", (run_host(tth, onnx_path, "ethos-n,c", x, work) if label == "ethos-n,c"
                                         else None)
                    # the output is a dequantized softmax: one quantization step is 1/256
                    vs = "%.0f st." % (abs(y.astype("f8") - ort).max() * 256) if y is not None and ort is not None \
                        else "-"
                    print("%-18s %-20s %14s %18s %9s %9s %14s %8s" % (name, label, "%s/%d" % (off_s, len(ops)), ws,
                                                                        text, const, instr, vs))
                    sys.stdout.flush()
                finally:
                    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
