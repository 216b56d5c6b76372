"""What the build-system tests (tests/cmake/cmake_package.py, tests/tth-meson/meson_package.py)
share: tth installed into a staging directory (meson install --destdir) and pointed at its own
library, plugins and a private runtime and cache directory; an example (examples/cmake or
examples/meson, with examples/common and the digits model) copied beside it; each step of a
build checked, the first failure ending the test; the digits example's output compared with
numpy's.

    def body(st):                                   # st: a Staged, tth installed
        src = st.example("cmake")
        st.step("the first build", ["cmake", "--build", b], compiles="digits for c")
        st.check_digits(os.path.join(b, "digits_app"), "target c")

    sys.exit(package_main("cmake_package", ("cmake",), ("numpy",), body))
"""
import argparse
import glob
import os
import shutil
import sys
import tempfile

from private_tthd import run, skip_unless

# an ONNX node test whose Reshape takes its shape as an input: the --bind / BIND cases' model
BIND_CASE = "/usr/share/libonnx-testdata/data/node/test_reshape_reordered_all_dims"


class Failed(Exception):
    """A step of a package test failed: why, and the command's result (its output is shown)."""

    def __init__(self, why, r=None):
        super().__init__(why)
        self.why, self.r = why, r


def fail(why, r=None):
    print("FAIL: " + why)
    if r is not None:
        print((r.stdout + r.stderr)[-4000:])
    return 1


def install(build, tmp, env):
    """tth from the build directory installed under tmp/dest, env set for it (LD_LIBRARY_PATH,
    TTH_PLUGINS_PATH, XDG_RUNTIME_DIR, XDG_CACHE_HOME, all under tmp): the staged binaries are
    not where they were configured to live. The staged root, or a failure's text."""
    dest = os.path.join(tmp, "dest")
    r = run(["meson", "install", "-C", build, "--no-rebuild", "--destdir", dest], env)
    if r.returncode != 0:
        return None, "meson install: " + (r.stdout + r.stderr)[-4000:]
    libtth = glob.glob(os.path.join(dest, "**", "libtth.so*"), recursive=True)
    plugins = glob.glob(os.path.join(dest, "**", "tth", "plugins"), recursive=True)
    if not libtth or len(plugins) != 1:
        return None, "the staged install lacks libtth or its plugins directory"
    env["LD_LIBRARY_PATH"] = os.path.dirname(libtth[0]) + ":" + env.get("LD_LIBRARY_PATH", "")
    env["TTH_PLUGINS_PATH"] = plugins[0]
    env["XDG_RUNTIME_DIR"] = os.path.join(tmp, "run")
    env["XDG_CACHE_HOME"] = os.path.join(tmp, "cache")
    os.makedirs(env["XDG_RUNTIME_DIR"], mode=0o700)
    return dest, None


def digits_io(source, tmp):
    """examples/digit_input.npy as the raw float32 file the example reads (its path), and
    examples/digit_expected.npy (numpy's forward pass)."""
    import numpy as np
    image = os.path.join(tmp, "image.raw")
    np.load(os.path.join(source, "examples", "digit_input.npy")).astype("<f4").tofile(image)
    return image, np.load(os.path.join(source, "examples", "digit_expected.npy"))


def check_output(app, image, env, expected, wrapper=()):
    """None when the example's probabilities (its first ten words) and digit (its last) are
    numpy's, else what differs."""
    import numpy as np
    r = run(list(wrapper) + [app, image], env)
    if r.returncode != 0:
        return "digits_app exited %d: %s" % (r.returncode, r.stderr)
    lines = r.stdout.split()
    got = np.array([float(v) for v in lines[:10]], dtype=np.float64)
    want = expected.reshape(-1).astype(np.float64)
    if np.any(np.abs(got - want) > 1e-4 + 1e-4 * np.abs(want)):
        return "probabilities differ from numpy's: got %s, want %s" % (got, want)
    if lines[-1] != str(int(np.argmax(want))):
        return "digit %s, numpy says %d" % (lines[-1], int(np.argmax(want)))
    return None


class Staged:
    """tth installed under tmp (install) with env set for it; source is the source tree. tthctl,
    once the test names the staged one, is stopped at the end."""

    def __init__(self, build, source, tmp):
        self.source, self.tmp, self.env, self.tthctl = source, tmp, dict(os.environ), None
        self.dest, why = install(build, tmp, self.env)
        self.require(not why, why)
        self.image, self.expected = digits_io(source, tmp)

    def require(self, ok, why, r=None):
        """ok, or the test fails here with why (and r's output)"""
        if not ok:
            raise Failed(why, r)

    def step(self, why, *cmds, compiles=None, idle=False):
        """cmds run in order, each to exit 0, the last one's output saying "tth: compiling
        <compiles>" (with compiles) or none of it (idle); else the test fails with why."""
        for cmd in cmds:
            r = run(cmd, self.env)
            self.require(r.returncode == 0, why, r)
        self.require(compiles is None or "tth: compiling " + compiles in r.stdout, why, r)
        self.require(not idle or "tth: compiling" not in r.stdout, why, r)
        return r

    def example(self, kind):
        """examples/<kind> copied under tmp/src with what it uses from its parent (common/, the
        digits model): the copy's directory."""
        src = os.path.join(self.tmp, "src")
        for d in (kind, "common"):
            shutil.copytree(os.path.join(self.source, "examples", d), os.path.join(src, d))
        shutil.copy(os.path.join(self.source, "examples", "digits.onnx"), src)
        return os.path.join(src, kind)

    def check_digits(self, app, label, wrapper=()):
        """the built digits_app (run under wrapper) prints numpy's probabilities and digit"""
        why = check_output(app, self.image, self.env, self.expected, wrapper)
        self.require(not why, "%s: %s" % (label, why))

    def bind_case(self, build_file, text):
        """BIND_CASE's model and its shape input (as shape.pb) in a new tmp/bind, with the build
        file build_file holding text: that directory."""
        src = os.path.join(self.tmp, "bind")
        os.makedirs(src)
        shutil.copy(os.path.join(BIND_CASE, "model.onnx"), src)
        shutil.copy(os.path.join(BIND_CASE, "test_data_set_0", "input_1.pb"), os.path.join(src, "shape.pb"))
        with open(os.path.join(src, build_file), "w") as f:
            f.write(text)
        return src


def package_main(title, tools, modules, body):
    """A package test's run: --build BUILD_DIR --source SOURCE_DIR; skipped (77) without tools or
    modules; body(st) with st a Staged in a new directory, its first failure printed; the staged
    tthctl's daemon stopped and the directory removed. The exit status."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    args = ap.parse_args()
    skip_unless(title, modules, tools)
    tmp = tempfile.mkdtemp(prefix="tth-%s-" % title)
    st = None
    try:
        st = Staged(args.build, args.source, tmp)
        body(st)
        return 0
    except Failed as e:
        return fail(e.why, e.r)
    finally:
        if st and st.tthctl and os.path.exists(st.tthctl):
            run([st.tthctl, "--no-start", "stop"], st.env)
        shutil.rmtree(tmp, ignore_errors=True)
        sys.stdout.flush()
