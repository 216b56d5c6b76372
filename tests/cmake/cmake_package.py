#!/usr/bin/python3
"""The CMake package from an installed tth: examples/cmake (find_package(tth), tth_add_model)
configured against a staged install (meson install --destdir), built, run, and its output
compared with numpy's forward pass (examples/digit_expected.npy); then the build's dependency
rules: a second build does not compile the model again, a newer model file or another target
does.

    tests/cmake/cmake_package.py --build BUILD_DIR --source SOURCE_DIR

Exit status 77 (skipped) when cmake or numpy is missing.
"""
import argparse
import glob
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from staged_install import check_output, digits_io, fail, install, run  # noqa: E402


BIND_CMAKE = """cmake_minimum_required(VERSION 3.13)
project(bind_app C)
find_package(tth REQUIRED)
tth_add_model(rs MODEL model.onnx TARGET "c" BIND shape=shape.pb)
add_executable(rs_app main.c)
target_link_libraries(rs_app tth::rs)
"""

BIND_MAIN = r"""#include <stdio.h>
#include "tth_rs.h"
static _Alignas(16) unsigned char ws[TTH_RS_WORKSPACE_SIZE + 1];
int main(int argc, char **argv)
{
    static float x[TTH_RS_DATA_SIZE / 4], y[TTH_RS_RESHAPED_SIZE / 4];
    FILE *f = fopen(argv[1], "rb");
    if (argc != 3 || !f || fread(x, 1, sizeof x, f) != sizeof x) return 2;
    fclose(f);
    struct tth_rs_inputs in = {x};
    struct tth_rs_outputs out = {y};
    if (tth_rs_run(&in, &out, ws) != 0) return 1;
    f = fopen(argv[2], "wb");
    if (!f || fwrite(y, 1, sizeof y, f) != sizeof y) return 3;
    fclose(f);
    return 0;
}
"""


def bind_project(tmp, prefix, env, np):
    """tth_add_model(... BIND shape=shape.pb): the artifact takes only the data input; its output
    equals the ONNX test data's; touching the bind file compiles again"""
    from onnx import TensorProto, numpy_helper
    case = "/usr/share/libonnx-testdata/data/node/test_reshape_reordered_all_dims"
    src = os.path.join(tmp, "bind")
    os.makedirs(src)
    shutil.copy(os.path.join(case, "model.onnx"), src)
    shutil.copy(os.path.join(case, "test_data_set_0", "input_1.pb"), os.path.join(src, "shape.pb"))
    with open(os.path.join(src, "CMakeLists.txt"), "w") as f:
        f.write(BIND_CMAKE)
    with open(os.path.join(src, "main.c"), "w") as f:
        f.write(BIND_MAIN)

    def pb(name):
        t = TensorProto()
        with open(os.path.join(case, "test_data_set_0", name), "rb") as f:
            t.ParseFromString(f.read())
        return numpy_helper.to_array(t)
    pb("input_0.pb").astype("<f4").tofile(os.path.join(src, "x.raw"))
    b = os.path.join(tmp, "bind-b")
    r = run(["cmake", "-S", src, "-B", b, "-DCMAKE_PREFIX_PATH=" + prefix], env)
    if r.returncode == 0:
        r = run(["cmake", "--build", b], env)
    if r.returncode != 0 or "tth: compiling rs for c" not in r.stdout:
        return "the build failed: " + (r.stdout + r.stderr)[-2000:]
    y = os.path.join(src, "y.raw")
    r = run([os.path.join(b, "rs_app"), os.path.join(src, "x.raw"), y], env)
    if r.returncode != 0:
        return "rs_app exited %d" % r.returncode
    want = pb("output_0.pb")
    got = np.fromfile(y, dtype="<f4").reshape(want.shape)
    if not np.array_equal(got, want):
        return "the output differs from the ONNX test data"
    later = time.time() + 2
    os.utime(os.path.join(src, "shape.pb"), (later, later))
    r = run(["cmake", "--build", b], env)
    if r.returncode != 0 or "tth: compiling rs for c" not in r.stdout:
        return "a newer bind file did not compile again"
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    args = ap.parse_args()
    if not shutil.which("cmake"):
        print("cmake_package: skipped, cmake is not installed")
        return 77
    try:
        import numpy as np
        import onnx  # noqa: F401
    except ImportError:
        print("cmake_package: skipped, python3-numpy or python3-onnx is not installed")
        return 77
    tmp = tempfile.mkdtemp(prefix="tth-cmake-")
    env = dict(os.environ)
    tthctl = None
    try:
        dest, why = install(args.build, tmp, env)
        if why:
            return fail(why)
        configs = glob.glob(os.path.join(dest, "**", "tthConfig.cmake"), recursive=True)
        if len(configs) != 1:
            return fail("expected one installed tthConfig.cmake, found %s" % configs)
        prefix = os.path.normpath(os.path.join(os.path.dirname(configs[0]), "..", "..", "..", ".."))
        if not os.path.exists(os.path.join(prefix, "bin", "tthctl")):
            prefix = os.path.normpath(os.path.join(os.path.dirname(configs[0]), "..", "..", ".."))
        tthctl = os.path.join(prefix, "bin", "tthctl")

        src = os.path.join(tmp, "src")
        shutil.copytree(os.path.join(args.source, "examples", "cmake"), os.path.join(src, "cmake"))
        shutil.copy(os.path.join(args.source, "examples", "digits.onnx"), src)
        image, expected = digits_io(args.source, tmp)
        b = os.path.join(tmp, "b")
        app = os.path.join(b, "digits_app")

        r = run(["cmake", "-S", os.path.join(src, "cmake"), "-B", b, "-DCMAKE_PREFIX_PATH=" + prefix], env)
        if r.returncode != 0:
            return fail("configuring examples/cmake against the staged prefix", r)
        r = run(["cmake", "--build", b], env)
        if r.returncode != 0 or "tth: compiling digits for c" not in r.stdout:
            return fail("the first build (it must compile the model)", r)
        why = check_output(app, image, env, expected)
        if why:
            return fail("target c: " + why)
        print("target c: built and matches numpy")

        r = run(["cmake", "--build", b], env)
        if r.returncode != 0 or "tth: compiling" in r.stdout:
            return fail("a second build compiled the model again", r)
        print("second build: nothing to do")

        model = os.path.join(src, "digits.onnx")
        later = time.time() + 2
        os.utime(model, (later, later))
        r = run(["cmake", "--build", b], env)
        if r.returncode != 0 or "tth: compiling digits for c" not in r.stdout:
            return fail("a newer model file did not compile again", r)
        print("newer model: compiled again")

        r = run(["cmake", "-S", os.path.join(src, "cmake"), "-B", b, "-DDIGITS_TARGET=llvm"], env)
        if r.returncode == 0:
            r = run(["cmake", "--build", b], env)
        if r.returncode != 0 or "tth: compiling digits for llvm" not in r.stdout:
            return fail("another target did not compile again", r)
        why = check_output(app, image, env, expected)
        if why:
            return fail("target llvm: " + why)
        print("target llvm: built and matches numpy")

        # BIND: Reshape's shape fed as an input, fixed at build time from a .pb file
        why = bind_project(tmp, prefix, env, np)
        if why:
            return fail("BIND: " + why)
        print("BIND: built, matches the ONNX test data, a newer bind file compiles again")
        return 0
    finally:
        if tthctl and os.path.exists(tthctl):
            run([tthctl, "--no-start", "stop"], env)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
