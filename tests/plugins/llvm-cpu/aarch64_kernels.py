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
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support"))
from private_tthd import run, run_with_daemon, tthctl_args  # noqa: E402
from artifact_main import AARCH64_CC, build, compare, compile_unpacked, generated_cases, load_pb, run_program  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72"

# argv: the parameters file, the input, the output (as run_program passes them)
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
    /* the constants bound from the parameters file (argv[1]), as README.txt says; a CMake build
     * links the file in and the first run binds it */
    FILE *pf = fopen(argv[1], "rb");
    if (!pf || fseek(pf, 0, SEEK_END) != 0) { fprintf(stderr, "cannot read %s\n", argv[1]); return 2; }
    size_t pn = (size_t)ftell(pf);
    rewind(pf);
    unsigned char *raw = malloc(pn + 64), *params = raw + (64 - (size_t)raw % 64) % 64;
    if (!raw || fread(params, 1, pn, pf) != pn) { fprintf(stderr, "cannot read %s\n", argv[1]); return 2; }
    fclose(pf);
    if (tth_model_bind_parameters(params, pn) != 0) { fprintf(stderr, "binding failed\n"); return 1; }
#endif
    struct tth_model_inputs in = { read_all(argv[2], IN_BYTES) };
    void *y = malloc(OUT_BYTES);
    struct tth_model_outputs out = { y };
    int32_t rc = tth_model_run(&in, &out, ws);
    FILE *f = fopen(argv[3], "wb");
    if (rc != 0 || !f || fwrite(y, 1, OUT_BYTES, f) != OUT_BYTES) { fprintf(stderr, "run failed: %d\n", (int)rc); return 1; }
    fclose(f);
    return 0;
}
"""


def one_case(case, daemon, work):
    x = load_pb(os.path.join(case, "test_data_set_0", "input_0.pb"))
    want = load_pb(os.path.join(case, "test_data_set_0", "output_0.pb"))
    d = os.path.join(work, os.path.basename(case))
    os.makedirs(d)
    tar = os.path.join(d, "model.tar")
    meta, why = compile_unpacked(daemon, os.path.join(case, "model.onnx"), TARGET, tar)
    if why:
        return why
    main = "#define IN_BYTES %d\n#define OUT_BYTES %d\n" % (x.nbytes, want.nbytes) + MAIN_C

    def check(exe, how):
        why, y, _ = run_program(exe, meta, d, [x.astype("<f4")], ["qemu-aarch64"], parameters=True)
        return "%s, run under qemu: %s" % (how, why) if why else compare(y[0], want, how)

    # as the README says: one cross cc command over the listed sources and objects
    exe, why = build(meta, d, cc=AARCH64_CC, main=main)
    if why:
        return why
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
    args = tthctl_args("aarch64_kernels", modules=("numpy", "onnx"), tools=("aarch64-linux-gnu-gcc", "qemu-aarch64"))

    def body(daemon, work, failures):
        cases, why = generated_cases(os.path.join(HERE, "make_conv_cases.py"), os.path.join(work, "cases"))
        failures.check(not why, why)
        for case in cases:
            why = one_case(case, daemon, work)
            print("%-20s %s" % (os.path.basename(case), "ok" if why is None else "FAILED: " + why))
            failures.check(why is None, os.path.basename(case))

    return run_with_daemon(args.tthctl, "tth-aarch64-", body, "aarch64 under qemu")


if __name__ == "__main__":
    sys.exit(main())
