"""What the build-system tests (tests/cmake/cmake_package.py, tests/tth-meson/meson_package.py)
share: tth installed into a staging directory (meson install --destdir) and pointed at its own
library, plugins and a private runtime and cache directory; the digits example's input and
numpy's expected output; running the example and comparing what it prints.
"""
import glob
import os
import subprocess


def run(cmd, env, **kw):
    return subprocess.run(cmd, env=env, capture_output=True, text=True, **kw)


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
