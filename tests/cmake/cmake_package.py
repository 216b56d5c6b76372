#!/usr/bin/python3
"""The CMake package from an installed tth: examples/cmake (find_package(tth), tth_add_model)
configured against a staged install (meson install --destdir), built, run, and its output
compared with numpy's forward pass (examples/digit_expected.npy); then the build's dependency
rules: a second build does not compile the model again, a newer model file or another target
does.

    tests/cmake/cmake_package.py --build BUILD_DIR --source SOURCE_DIR

Exit status 77 (skipped) when cmake or numpy is missing.
"""
import glob
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from staged_install import BIND_CASE, package_main, run  # noqa: E402


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


def newer(path):
    """path's time two seconds ahead: newer than anything a build wrote (make's times are seconds)"""
    later = time.time() + 2
    os.utime(path, (later, later))


def bind_project(st, prefix):
    """tth_add_model(... BIND shape=shape.pb): the artifact takes only the data input; its output
    equals the ONNX test data's; touching the bind file compiles again"""
    import numpy as np
    from artifact_main import load_pb
    src = st.bind_case("CMakeLists.txt", BIND_CMAKE)
    with open(os.path.join(src, "main.c"), "w") as f:
        f.write(BIND_MAIN)
    load_pb(os.path.join(BIND_CASE, "test_data_set_0", "input_0.pb")).astype("<f4").tofile(os.path.join(src, "x.raw"))
    b = os.path.join(st.tmp, "bind-b")
    build = ["cmake", "--build", b]
    st.step("BIND: the build failed", ["cmake", "-S", src, "-B", b, "-DCMAKE_PREFIX_PATH=" + prefix], build,
            compiles="rs for c")
    y = os.path.join(src, "y.raw")
    r = run([os.path.join(b, "rs_app"), os.path.join(src, "x.raw"), y], st.env)
    st.require(r.returncode == 0, "BIND: rs_app exited %d" % r.returncode)
    want = load_pb(os.path.join(BIND_CASE, "test_data_set_0", "output_0.pb"))
    st.require(np.array_equal(np.fromfile(y, dtype="<f4").reshape(want.shape), want),
               "BIND: the output differs from the ONNX test data")
    newer(os.path.join(src, "shape.pb"))
    st.step("BIND: a newer bind file did not compile again", build, compiles="rs for c")


def body(st):
    configs = glob.glob(os.path.join(st.dest, "**", "tthConfig.cmake"), recursive=True)
    st.require(len(configs) == 1, "expected one installed tthConfig.cmake, found %s" % configs)
    prefix = os.path.normpath(os.path.join(os.path.dirname(configs[0]), "..", "..", "..", ".."))
    if not os.path.exists(os.path.join(prefix, "bin", "tthctl")):
        prefix = os.path.normpath(os.path.join(os.path.dirname(configs[0]), "..", "..", ".."))
    st.tthctl = os.path.join(prefix, "bin", "tthctl")

    src = st.example("cmake")
    b = os.path.join(st.tmp, "b")
    app = os.path.join(b, "digits_app")
    build = ["cmake", "--build", b]
    st.step("configuring examples/cmake against the staged prefix",
            ["cmake", "-S", src, "-B", b, "-DCMAKE_PREFIX_PATH=" + prefix])
    st.step("the first build (it must compile the model)", build, compiles="digits for c")
    st.check_digits(app, "target c")
    print("target c: built and matches numpy")

    st.step("a second build compiled the model again", build, idle=True)
    print("second build: nothing to do")

    newer(os.path.join(src, "..", "digits.onnx"))
    st.step("a newer model file did not compile again", build, compiles="digits for c")
    print("newer model: compiled again")

    st.step("another target did not compile again", ["cmake", "-S", src, "-B", b, "-DDIGITS_TARGET=llvm"], build,
            compiles="digits for llvm")
    st.check_digits(app, "target llvm")
    print("target llvm: built and matches numpy")

    # BIND: Reshape's shape fed as an input, fixed at build time from a .pb file
    bind_project(st, prefix)
    print("BIND: built, matches the ONNX test data, a newer bind file compiles again")


if __name__ == "__main__":
    sys.exit(package_main("cmake_package", ("cmake",), ("numpy", "onnx"), body))
