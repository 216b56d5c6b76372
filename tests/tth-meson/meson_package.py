#!/usr/bin/python3
"""The Meson helper from an installed tth (tth-meson/, docs/meson.md): examples/meson (a
custom_target running tth-meson-model) configured against a staged install (meson install
--destdir), with the helper named in a native file and tthctl not on PATH, built, run, and its
output compared with numpy's forward pass (examples/digit_expected.npy); the depfile as ninja
recorded it (the model, tthctl, each staged plugin); then the build's dependency rules: a second build does not compile the model again, a newer model file, a newer
tthctl or another target does; a model compiled with --bind, whose newer bind file compiles
again; the helper's own refusals (no cmake, an unsupported cross system); and cross builds of the
example: for a Cortex-M4 with arm-none-eabi-gcc (the firmware holds tth_digits_run as Thumb
code), for AArch64 Linux with an llvm target, run under qemu-aarch64 and compared with numpy
(each only when its toolchain is installed: scripts/setup installs them).

    tests/tth-meson/meson_package.py --build BUILD_DIR --source SOURCE_DIR

Exit status 77 (skipped) when meson, ninja, cmake or numpy is missing.
"""
import glob
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from staged_install import BIND_CASE, package_main, run  # noqa: E402


BIND_MESON = """project('bind', 'c', meson_version : '>=1.0.0')
rs = custom_target('tth_rs', input : 'model.onnx', output : ['libtth_rs.a', 'tth_rs.h'],
  depfile : 'tth_rs.d', build_by_default : true,
  command : [find_program('tth-meson-model', native : true), '@INPUT@', '--name', 'rs', '--target', 'c',
             '--bind', 'shape=' + meson.current_source_dir() / 'shape.pb', '--outdir', '@OUTDIR@',
             '--depfile', '@DEPFILE@', '--', meson.get_compiler('c').cmd_array()])
"""


def bind_project(st, native):
    """--bind shape=shape.pb: the artifact no longer takes the shape input, and a newer bind file
    (known to the build only through the depfile) compiles again"""
    if not os.path.isdir(BIND_CASE):
        return "not tried, libonnx-testdata is not installed"
    src = st.bind_case("meson.build", BIND_MESON)
    b = os.path.join(st.tmp, "bind-b")
    st.step("--bind: the build failed", ["meson", "setup", b, src, "--native-file", native],
            ["meson", "compile", "-C", b], compiles="rs for c")
    with open(os.path.join(b, "tth_rs.h")) as f:
        header = f.read()
    st.require("TTH_RS_DATA_SIZE" in header and "TTH_RS_SHAPE_SIZE" not in header,
               "--bind: tth_rs.h should have the data input and not the bound shape input")
    os.utime(os.path.join(src, "shape.pb"))
    st.step("--bind: a newer bind file did not compile again", ["meson", "compile", "-C", b], compiles="rs for c")
    return "built without the shape input, a newer bind file compiles again"


CROSS_FILE = """[binaries]
c = 'arm-none-eabi-gcc'
ar = 'arm-none-eabi-ar'
strip = 'arm-none-eabi-strip'

[built-in options]
c_args = ['-mcpu=cortex-m4', '-mthumb']
c_link_args = ['-mcpu=cortex-m4', '-mthumb', '--specs=nosys.specs']

[host_machine]
system = 'none'
cpu_family = 'arm'
cpu = 'cortex-m4'
endian = 'little'
"""


def cross_build(st, src, native):
    """examples/meson cross-built for a Cortex-M4 with target "c -mcpu=cortex-m4": the helper
    builds the artifact with arm-none-eabi-gcc and the cross file's flags, and the firmware
    holds tth_digits_run as Thumb code"""
    cross = os.path.join(st.tmp, "cortex-m4.ini")
    with open(cross, "w") as f:
        f.write(CROSS_FILE)
    b = os.path.join(st.tmp, "b-cross")
    st.step("Cortex-M4 cross build", ["meson", "setup", b, src, "--native-file", native, "--cross-file", cross,
                                      "-Ddigits_target=c -mcpu=cortex-m4"], ["meson", "compile", "-C", b],
            compiles="digits for c -mcpu=cortex-m4")
    toolchain = os.path.join(b, "tth_digits", "toolchain.cmake")
    if not os.path.exists(toolchain) or "Generic" not in open(toolchain).read():
        return "the nested CMake build got no bare-metal toolchain file"
    r = run(["arm-none-eabi-readelf", "-h", os.path.join(b, "digits_app")], st.env)
    if r.returncode != 0 or "ARM" not in r.stdout:
        return "digits_app is not an ARM executable: " + r.stdout + r.stderr
    r = run(["arm-none-eabi-nm", os.path.join(b, "digits_app")], st.env)
    if r.returncode != 0 or " T tth_digits_run" not in r.stdout:
        return "the firmware does not hold tth_digits_run"
    # Thumb code: the symbol's address is odd in the ELF symbol table
    r = run(["arm-none-eabi-readelf", "-s", os.path.join(b, "digits_app")], st.env)
    line = [x for x in r.stdout.splitlines() if x.endswith(" tth_digits_run")]
    if len(line) != 1 or int(line[0].split()[1], 16) % 2 != 1:
        return "tth_digits_run is not Thumb code: %s" % line
    return None


AARCH64_FILE = """[binaries]
c = 'aarch64-linux-gnu-gcc'
ar = 'aarch64-linux-gnu-ar'
strip = 'aarch64-linux-gnu-strip'

[host_machine]
system = 'linux'
cpu_family = 'aarch64'
cpu = 'cortex-a72'
endian = 'little'
"""
QEMU_AARCH64 = ["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"]


def aarch64_build(st, src, native):
    """examples/meson cross-built for AArch64 Linux with an llvm target: the artifact's CMake
    build links its parameters file (.incbin) with the cross toolchain; run under qemu-aarch64"""
    cross = os.path.join(st.tmp, "aarch64.ini")
    with open(cross, "w") as f:
        f.write(AARCH64_FILE)
    b = os.path.join(st.tmp, "b-aarch64")
    target = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72"
    st.step("AArch64 cross build", ["meson", "setup", b, src, "--native-file", native, "--cross-file", cross,
                                    "-Ddigits_target=" + target], ["meson", "compile", "-C", b],
            compiles="digits for " + target)
    st.check_digits(os.path.join(b, "digits_app"), "AArch64 cross build", QEMU_AARCH64)


def refusals(st, helper, model):
    """the helper's errors for what it cannot do: no cmake, a cross system it does not support"""
    out = os.path.join(st.tmp, "refused")
    os.makedirs(out)
    base = [sys.executable, helper, model, "--name", "digits", "--target", "c", "--outdir", out]
    r = run(base + ["--", "cc"], dict(st.env, PATH=os.path.join(st.tmp, "empty")))
    if r.returncode == 0 or "cmake is not installed" not in r.stderr:
        return "without cmake: exit %d, %s" % (r.returncode, r.stderr)
    r = run(base + ["--cross", "windows/x86_64", "--cmake", shutil.which("cmake"), "--", "cc"], st.env)
    if r.returncode == 0 or "a cross build for 'windows/x86_64' is not supported" not in r.stderr:
        return "a Windows cross build: exit %d, %s" % (r.returncode, r.stderr)
    if os.listdir(out):
        return "a refused run wrote %s" % os.listdir(out)
    return None


def body(st):
    helpers = glob.glob(os.path.join(st.dest, "**", "bin", "tth-meson-model"), recursive=True)
    st.require(len(helpers) == 1 and os.access(helpers[0], os.X_OK),
               "expected one installed, executable tth-meson-model, found %s" % helpers)
    helper = helpers[0]
    # the staged bin directory is not put on PATH: the helper runs the tthctl beside it
    st.tthctl = os.path.join(os.path.dirname(helper), "tthctl")
    native = os.path.join(st.tmp, "tth.ini")
    with open(native, "w") as f:
        f.write("[binaries]\ntth-meson-model = '%s'\n" % helper)

    src = st.example("meson")
    model = os.path.join(src, "..", "digits.onnx")
    b = os.path.join(st.tmp, "b")
    build = ["meson", "compile", "-C", b]
    st.step("configuring examples/meson against the staged install", ["meson", "setup", b, src, "--native-file", native])
    st.step("the first build (it must compile the model)", build, compiles="digits for c")
    st.check_digits(os.path.join(b, "digits_app"), "target c")
    print("target c: built and matches numpy")

    # the depfile, as ninja recorded it: the model, the staged tthctl and each staged plugin,
    # found relative to the helper's own file
    r = run(["ninja", "-C", b, "-t", "deps", "libtth_digits.a"], st.env)
    deps = {os.path.realpath(x.strip()) for x in r.stdout.splitlines()[1:] if x.strip()}
    want = {os.path.realpath(st.tthctl), os.path.realpath(model)}
    want |= {os.path.realpath(p) for p in glob.glob(os.path.join(st.env["TTH_PLUGINS_PATH"], "*.so"))}
    st.require(r.returncode == 0 and len(want) >= 3 and want <= deps, "the depfile lacks %s" % sorted(want - deps), r)
    print("depfile: names the model, tthctl and the %d plugins" % (len(want) - 2))

    r = st.step("a second build did work", build, idle=True)
    st.require("ninja: no work to do" in r.stdout, "a second build did work", r)
    print("second build: nothing to do")

    # ninja compares nanosecond mtimes: a file touched now is newer than the last build's
    # outputs, and the build after the one it caused has nothing to do again. tthctl is known
    # to the build only through the helper's depfile.
    for what, path in (("model file", model), ("tthctl", st.tthctl)):
        os.utime(path)
        st.step("a newer %s did not compile again" % what, build, compiles="digits for c")
        r = st.step("the build after a newer %s's did work" % what, build)
        st.require("ninja: no work to do" in r.stdout, "the build after a newer %s's did work" % what, r)
        print("newer %s: compiled again, then nothing to do" % what)

    st.step("another target did not compile again", ["meson", "configure", b, "-Ddigits_target=llvm"], build,
            compiles="digits for llvm")
    st.check_digits(os.path.join(b, "digits_app"), "target llvm")
    print("target llvm: built and matches numpy")

    print("--bind: " + bind_project(st, native))

    why = refusals(st, helper, model)
    st.require(not why, "refusals: %s" % why)
    print("refusals: no cmake, a Windows cross build")

    if shutil.which("arm-none-eabi-gcc"):
        why = cross_build(st, src, native)
        st.require(not why, "Cortex-M4 cross build: %s" % why)
        print("Cortex-M4 cross build: firmware holds tth_digits_run (Thumb)")
    else:
        print("Cortex-M4 cross build: not tried, arm-none-eabi-gcc is not installed")
    if shutil.which("aarch64-linux-gnu-gcc") and shutil.which("qemu-aarch64"):
        aarch64_build(st, src, native)
        print("AArch64 cross build: llvm, runs under qemu-aarch64 and matches numpy")
    else:
        print("AArch64 cross build: not tried, aarch64-linux-gnu-gcc or qemu-aarch64 is not installed")


if __name__ == "__main__":
    sys.exit(package_main("meson_package", ("meson", "ninja", "cmake"), ("numpy",), body))
