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
import argparse
import glob
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from staged_install import check_output, digits_io, fail, install, run  # noqa: E402


BIND_MESON = """project('bind', 'c', meson_version : '>=1.0.0')
rs = custom_target('tth_rs', input : 'model.onnx', output : ['libtth_rs.a', 'tth_rs.h'],
  depfile : 'tth_rs.d', build_by_default : true,
  command : [find_program('tth-meson-model', native : true), '@INPUT@', '--name', 'rs', '--target', 'c',
             '--bind', 'shape=' + meson.current_source_dir() / 'shape.pb', '--outdir', '@OUTDIR@',
             '--depfile', '@DEPFILE@', '--', meson.get_compiler('c').cmd_array()])
"""


def bind_project(tmp, native, env):
    """--bind shape=shape.pb: the artifact no longer takes the shape input, and a newer bind file
    (known to the build only through the depfile) compiles again"""
    case = "/usr/share/libonnx-testdata/data/node/test_reshape_reordered_all_dims"
    if not os.path.isdir(case):
        return None, "not tried, libonnx-testdata is not installed"
    src = os.path.join(tmp, "bind")
    os.makedirs(src)
    shutil.copy(os.path.join(case, "model.onnx"), src)
    shutil.copy(os.path.join(case, "test_data_set_0", "input_1.pb"), os.path.join(src, "shape.pb"))
    with open(os.path.join(src, "meson.build"), "w") as f:
        f.write(BIND_MESON)
    b = os.path.join(tmp, "bind-b")
    r = run(["meson", "setup", b, src, "--native-file", native], env)
    if r.returncode == 0:
        r = run(["meson", "compile", "-C", b], env)
    if r.returncode != 0 or "tth: compiling rs for c" not in r.stdout:
        return "the build failed: " + (r.stdout + r.stderr)[-2000:], None
    with open(os.path.join(b, "tth_rs.h")) as f:
        header = f.read()
    if "TTH_RS_DATA_SIZE" not in header or "TTH_RS_SHAPE_SIZE" in header:
        return "tth_rs.h should have the data input and not the bound shape input", None
    os.utime(os.path.join(src, "shape.pb"))
    r = run(["meson", "compile", "-C", b], env)
    if r.returncode != 0 or "tth: compiling rs for c" not in r.stdout:
        return "a newer bind file did not compile again", None
    return None, "built without the shape input, a newer bind file compiles again"


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


def cross_build(tmp, src, native, env):
    """examples/meson cross-built for a Cortex-M4 with target "c -mcpu=cortex-m4": the helper
    builds the artifact with arm-none-eabi-gcc and the cross file's flags, and the firmware
    holds tth_digits_run as Thumb code"""
    cross = os.path.join(tmp, "cortex-m4.ini")
    with open(cross, "w") as f:
        f.write(CROSS_FILE)
    b = os.path.join(tmp, "b-cross")
    r = run(["meson", "setup", b, os.path.join(src, "meson"), "--native-file", native, "--cross-file", cross,
             "-Ddigits_target=c -mcpu=cortex-m4"], env)
    if r.returncode != 0:
        return "configuring the cross build: " + (r.stdout + r.stderr)[-2000:]
    r = run(["meson", "compile", "-C", b], env)
    if r.returncode != 0 or "tth: compiling digits for c -mcpu=cortex-m4" not in r.stdout:
        return "the cross build: " + (r.stdout + r.stderr)[-2000:]
    toolchain = os.path.join(b, "tth_digits", "toolchain.cmake")
    if not os.path.exists(toolchain) or "Generic" not in open(toolchain).read():
        return "the nested CMake build got no bare-metal toolchain file"
    r = run(["arm-none-eabi-readelf", "-h", os.path.join(b, "digits_app")], env)
    if r.returncode != 0 or "ARM" not in r.stdout:
        return "digits_app is not an ARM executable: " + r.stdout + r.stderr
    r = run(["arm-none-eabi-nm", os.path.join(b, "digits_app")], env)
    if r.returncode != 0 or " T tth_digits_run" not in r.stdout:
        return "the firmware does not hold tth_digits_run"
    # Thumb code: the symbol's address is odd in the ELF symbol table
    r = run(["arm-none-eabi-readelf", "-s", os.path.join(b, "digits_app")], env)
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


def aarch64_build(tmp, src, native, env, image, expected):
    """examples/meson cross-built for AArch64 Linux with an llvm target: the artifact's CMake
    build links its parameters file (.incbin) with the cross toolchain; run under qemu-aarch64"""
    cross = os.path.join(tmp, "aarch64.ini")
    with open(cross, "w") as f:
        f.write(AARCH64_FILE)
    b = os.path.join(tmp, "b-aarch64")
    target = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72"
    r = run(["meson", "setup", b, os.path.join(src, "meson"), "--native-file", native, "--cross-file", cross,
             "-Ddigits_target=" + target], env)
    if r.returncode != 0:
        return "configuring the cross build: " + (r.stdout + r.stderr)[-2000:]
    r = run(["meson", "compile", "-C", b], env)
    if r.returncode != 0 or "tth: compiling digits for " + target not in r.stdout:
        return "the cross build: " + (r.stdout + r.stderr)[-2000:]
    return check_output(os.path.join(b, "digits_app"), image, env, expected, QEMU_AARCH64)


def refusals(tmp, helper, model, env):
    """the helper's errors for what it cannot do: no cmake, a cross system it does not support"""
    out = os.path.join(tmp, "refused")
    os.makedirs(out)
    base = [sys.executable, helper, model, "--name", "digits", "--target", "c", "--outdir", out]
    r = run(base + ["--", "cc"], dict(env, PATH=os.path.join(tmp, "empty")))
    if r.returncode == 0 or "cmake is not installed" not in r.stderr:
        return "without cmake: exit %d, %s" % (r.returncode, r.stderr)
    r = run(base + ["--cross", "windows/x86_64", "--cmake", shutil.which("cmake"), "--", "cc"], env)
    if r.returncode == 0 or "a cross build for 'windows/x86_64' is not supported" not in r.stderr:
        return "a Windows cross build: exit %d, %s" % (r.returncode, r.stderr)
    if os.listdir(out):
        return "a refused run wrote %s" % os.listdir(out)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    args = ap.parse_args()
    for tool in ("meson", "ninja", "cmake"):
        if not shutil.which(tool):
            print("meson_package: skipped, %s is not installed" % tool)
            return 77
    try:
        import numpy  # noqa: F401
    except ImportError:
        print("meson_package: skipped, python3-numpy is not installed")
        return 77
    tmp = tempfile.mkdtemp(prefix="tth-meson-")
    env = dict(os.environ)
    tthctl = None
    try:
        dest, why = install(args.build, tmp, env)
        if why:
            return fail(why)
        helpers = glob.glob(os.path.join(dest, "**", "bin", "tth-meson-model"), recursive=True)
        if len(helpers) != 1 or not os.access(helpers[0], os.X_OK):
            return fail("expected one installed, executable tth-meson-model, found %s" % helpers)
        helper = helpers[0]
        # the staged bin directory is not put on PATH: the helper runs the tthctl beside it
        tthctl = os.path.join(os.path.dirname(helper), "tthctl")
        native = os.path.join(tmp, "tth.ini")
        with open(native, "w") as f:
            f.write("[binaries]\ntth-meson-model = '%s'\n" % helper)

        src = os.path.join(tmp, "src")
        shutil.copytree(os.path.join(args.source, "examples", "meson"), os.path.join(src, "meson"))
        shutil.copy(os.path.join(args.source, "examples", "digits.onnx"), src)
        image, expected = digits_io(args.source, tmp)
        b = os.path.join(tmp, "b")
        app = os.path.join(b, "digits_app")

        r = run(["meson", "setup", b, os.path.join(src, "meson"), "--native-file", native], env)
        if r.returncode != 0:
            return fail("configuring examples/meson against the staged install", r)
        r = run(["meson", "compile", "-C", b], env)
        if r.returncode != 0 or "tth: compiling digits for c" not in r.stdout:
            return fail("the first build (it must compile the model)", r)
        why = check_output(app, image, env, expected)
        if why:
            return fail("target c: " + why)
        print("target c: built and matches numpy")

        # the depfile, as ninja recorded it: the model, the staged tthctl and each staged plugin,
        # found relative to the helper's own file
        r = run(["ninja", "-C", b, "-t", "deps", "libtth_digits.a"], env)
        deps = {os.path.normpath(x.strip()) for x in r.stdout.splitlines()[1:] if x.strip()}
        want = {os.path.realpath(tthctl), os.path.realpath(os.path.join(src, "digits.onnx"))}
        want |= {os.path.realpath(p) for p in glob.glob(os.path.join(env["TTH_PLUGINS_PATH"], "*.so"))}
        if r.returncode != 0 or len(want) < 3 or not want <= {os.path.realpath(d) for d in deps}:
            return fail("the depfile lacks %s" % sorted(want - {os.path.realpath(d) for d in deps}), r)
        print("depfile: names the model, tthctl and the %d plugins" % (len(want) - 2))

        r = run(["meson", "compile", "-C", b], env)
        if r.returncode != 0 or "tth: compiling" in r.stdout or "ninja: no work to do" not in r.stdout:
            return fail("a second build did work", r)
        print("second build: nothing to do")

        # ninja compares nanosecond mtimes: a file touched now is newer than the last build's
        # outputs, and the build after the one it caused has nothing to do again. tthctl is known
        # to the build only through the helper's depfile.
        model = os.path.join(src, "digits.onnx")
        for what, path in (("model file", model), ("tthctl", tthctl)):
            os.utime(path)
            r = run(["meson", "compile", "-C", b], env)
            if r.returncode != 0 or "tth: compiling digits for c" not in r.stdout:
                return fail("a newer %s did not compile again" % what, r)
            r = run(["meson", "compile", "-C", b], env)
            if r.returncode != 0 or "ninja: no work to do" not in r.stdout:
                return fail("the build after a newer %s's did work" % what, r)
            print("newer %s: compiled again, then nothing to do" % what)

        r = run(["meson", "configure", b, "-Ddigits_target=llvm"], env)
        if r.returncode == 0:
            r = run(["meson", "compile", "-C", b], env)
        if r.returncode != 0 or "tth: compiling digits for llvm" not in r.stdout:
            return fail("another target did not compile again", r)
        why = check_output(app, image, env, expected)
        if why:
            return fail("target llvm: " + why)
        print("target llvm: built and matches numpy")

        why, done = bind_project(tmp, native, env)
        if why:
            return fail("--bind: " + why)
        print("--bind: " + done)

        why = refusals(tmp, helper, model, env)
        if why:
            return fail("refusals: " + why)
        print("refusals: no cmake, a Windows cross build")

        if shutil.which("arm-none-eabi-gcc"):
            why = cross_build(tmp, src, native, env)
            if why:
                return fail("Cortex-M4 cross build: " + why)
            print("Cortex-M4 cross build: firmware holds tth_digits_run (Thumb)")
        else:
            print("Cortex-M4 cross build: not tried, arm-none-eabi-gcc is not installed")
        if shutil.which("aarch64-linux-gnu-gcc") and shutil.which("qemu-aarch64"):
            why = aarch64_build(tmp, src, native, env, image, expected)
            if why:
                return fail("AArch64 cross build: " + why)
            print("AArch64 cross build: llvm, runs under qemu-aarch64 and matches numpy")
        else:
            print("AArch64 cross build: not tried, aarch64-linux-gnu-gcc or qemu-aarch64 is not installed")
        return 0
    finally:
        if tthctl and os.path.exists(tthctl):
            run([tthctl, "--no-start", "stop"], env)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
