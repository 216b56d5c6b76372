#!/usr/bin/python3
"""The target-aware convolution kernels as AArch64 NEON code, run under qemu-aarch64 and checked
against numpy: the product's own path (tthd, tthctl compile for an AArch64 target, the
artifact's object, header and thread-pool source), a program built with the cross compiler from
the artifact as its README says, run under qemu-user.

    tests/plugins/llvm-cpu/aarch64_kernels.py --tthctl build/client/tthctl

Cases: tests/plugins/llvm-cpu/make_conv_cases.py (Winograd, row-vectorized stem, depthwise chain), expected
outputs from numpy; tolerance float32 |a-b| <= 1e-4 + 1e-4*|b| (as the conformance runners).
Exit status 77 (skipped) when aarch64-linux-gnu-gcc, qemu-aarch64, numpy or onnx is missing.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support"))
from private_tthd import run_with_daemon  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72"

MAIN_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include "tth_model.h"

static _Alignas(64) unsigned char ws[TTH_MODEL_WORKSPACE_SIZE + 1];

static void *read_all(const char *path, size_t n)
{
    void *p = malloc(n);
    FILE *f = fopen(path, "rb");
    if (!p || !f || fread(p, 1, n, f) != n) { fprintf(stderr, "cannot read %s\n", path); exit(2); }
    fclose(f);
    return p;
}

int main(int argc, char **argv)
{
    if (argc < 4)
        return 2;
#if defined(TTH_MODEL_PARAMETERS_FILE) && !defined(TTH_MODEL_PARAMETERS_EMBEDDED)
    /* the constants bound from the parameters file (argv[3]), as README.txt says; a CMake build
     * links the file in and the first run binds it */
    FILE *pf = fopen(argv[3], "rb");
    if (!pf || fseek(pf, 0, SEEK_END) != 0) { fprintf(stderr, "cannot read %s\n", argv[3]); return 2; }
    size_t pn = (size_t)ftell(pf);
    rewind(pf);
    unsigned char *raw = malloc(pn + 64), *params = raw + (64 - (size_t)raw % 64) % 64;
    if (!raw || fread(params, 1, pn, pf) != pn) { fprintf(stderr, "cannot read %s\n", argv[3]); return 2; }
    fclose(pf);
    if (tth_model_bind_parameters(params, pn) != 0) { fprintf(stderr, "binding failed\n"); return 1; }
#endif
    struct tth_model_inputs in = { read_all(argv[1], IN_BYTES) };
    void *y = malloc(OUT_BYTES);
    struct tth_model_outputs out = { y };
    int32_t rc = tth_model_run(&in, &out, ws);
    FILE *f = fopen(argv[2], "wb");
    if (rc != 0 || !f || fwrite(y, 1, OUT_BYTES, f) != OUT_BYTES) { fprintf(stderr, "run failed: %d\n", (int)rc); return 1; }
    fclose(f);
    return 0;
}
"""


def tools_missing():
    for tool in ("aarch64-linux-gnu-gcc", "qemu-aarch64"):
        if not shutil.which(tool):
            return tool
    try:
        import numpy  # noqa: F401
        import onnx  # noqa: F401
    except ImportError:
        return "python3-numpy/python3-onnx"
    return None


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def one_case(case, args, work):
    import numpy as np
    import onnx
    from onnx import numpy_helper

    def load_pb(path):
        t = onnx.TensorProto()
        with open(path, "rb") as f:
            t.ParseFromString(f.read())
        return numpy_helper.to_array(t)

    d = os.path.join(work, os.path.basename(case))
    os.makedirs(d)
    tar = os.path.join(d, "model.tar")
    c = run([args.tthctl, "--socket", args.socket, "--no-start", "-q", "compile", os.path.join(case, "model.onnx"),
             "--target", TARGET, "--name", "model", "-o", tar])
    if c.returncode != 0:
        return "compile: " + c.stderr.strip()
    with tarfile.open(tar) as t:
        t.extractall(d)
    meta = json.load(open(os.path.join(d, "metadata.json")))
    files = [os.path.join(d, f) for f in meta["files"]["sources"] + meta["files"]["objects"]]
    x = load_pb(os.path.join(case, "test_data_set_0", "input_0.pb"))
    want = load_pb(os.path.join(case, "test_data_set_0", "output_0.pb"))
    with open(os.path.join(d, "main.c"), "w") as f:
        f.write("#define IN_BYTES %d\n#define OUT_BYTES %d\n" % (x.nbytes, want.nbytes) + MAIN_C)
    x.astype("<f4").tofile(os.path.join(d, "x.bin"))

    def check(exe, how):
        y = os.path.join(d, "y.bin")
        if os.path.exists(y):
            os.remove(y)
        r = run(["qemu-aarch64", exe, os.path.join(d, "x.bin"), y, os.path.join(d, "parameters", "model.params")],
                timeout=300)
        if r.returncode != 0:
            return "%s, run under qemu: exit %d %s" % (how, r.returncode, r.stderr.strip())
        got = np.fromfile(y, dtype="<f4").reshape(want.shape)
        bad = np.abs(got.astype(np.float64) - want) > 1e-4 + 1e-4 * np.abs(want)
        if bad.any():
            i = np.argmax(bad)
            return "%s: %d of %d elements differ; element %d: got %r, expected %r" % (
                how, bad.sum(), bad.size, i, float(got.flat[i]), float(want.flat[i]))
        return None

    # as the README says: one cross cc command over the listed sources and objects
    exe = os.path.join(d, "prog")
    b = run(["aarch64-linux-gnu-gcc", "-std=c11", "-O2", "-static", "-pthread", "-I", os.path.join(d, "include"),
             "-o", exe, os.path.join(d, "main.c")] + files + ["-lm"])
    if b.returncode != 0:
        return "cross build: " + b.stderr.strip()[-2000:]
    why = check(exe, "cc build")
    if why or not shutil.which("cmake"):
        return why
    # through the artifact's CMakeLists.txt with a cross toolchain file
    use = os.path.join(d, "use")
    os.makedirs(use)
    with open(os.path.join(use, "aarch64.cmake"), "w") as f:
        f.write("set(CMAKE_SYSTEM_NAME Linux)\nset(CMAKE_SYSTEM_PROCESSOR aarch64)\n"
                "set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)\nset(CMAKE_EXE_LINKER_FLAGS_INIT -static)\n")
    with open(os.path.join(use, "CMakeLists.txt"), "w") as f:
        f.write("cmake_minimum_required(VERSION 3.13)\nproject(use_model C)\nadd_subdirectory(.. art)\n"
                "add_executable(prog ../main.c)\ntarget_link_libraries(prog tth_model)\n")
    cm = os.path.join(use, "build")
    b = run(["cmake", "-S", use, "-B", cm, "-DCMAKE_TOOLCHAIN_FILE=" + os.path.join(use, "aarch64.cmake")])
    if b.returncode == 0:
        b = run(["cmake", "--build", cm])
    if b.returncode != 0:
        return "cross CMake build: " + (b.stdout + b.stderr).strip()[-2000:]
    return check(os.path.join(cm, "prog"), "cross CMake build")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tthctl", required=True)
    args = ap.parse_args()
    missing = tools_missing()
    if missing:
        print("aarch64_kernels: skipped, %s is not installed" % missing)
        return 77
    args.tthctl = os.path.abspath(args.tthctl)
    def body(daemon, work, failures):
        args.socket = daemon.socket
        cases_dir = os.path.join(work, "cases")
        g = run(["/usr/bin/python3", os.path.join(HERE, "make_conv_cases.py"), cases_dir])
        if g.returncode != 0:
            failures.append("make_conv_cases.py: exit %d %s" % (g.returncode, g.stderr))
            return
        for name in sorted(os.listdir(cases_dir)):
            why = one_case(os.path.join(cases_dir, name), args, work)
            print("%-20s %s" % (name, "ok" if why is None else "FAILED: " + why))
            if why is not None:
                failures.append(name)

    return run_with_daemon(args.tthctl, "tth-aarch64-", body, "aarch64 under qemu")

if __name__ == "__main__":
    sys.exit(main())
