#!/usr/bin/python3
"""The Python package's suite as the README's test command runs it (tests/python/meson.build):
a fresh virtual environment under the build directory, the package installed into it from a copy of
python/ with pip and nothing downloaded (the line docs/python.md gives), then pytest on
tests/python with that environment's interpreter, against the tthd of this build.

    TTH_BUILD_ROOT=build-test TTH_SOURCE_ROOT=. tests/python/run_tests.py [pytest arguments]
"""
import os
import shutil
import subprocess
import sys
import tempfile

source = os.path.abspath(os.environ.get("TTH_SOURCE_ROOT") or os.path.join(os.path.dirname(__file__), "..", ".."))
build = os.path.abspath(os.environ.get("TTH_BUILD_ROOT") or os.path.join(source, "build-test"))
os.environ["TTH_SOURCE_ROOT"], os.environ["TTH_BUILD_ROOT"] = source, build
venv = os.path.join(build, "python-venv")


def run(cmd, **kw):
    print("+", " ".join(cmd), flush=True)
    r = subprocess.run(cmd, **kw)
    if r.returncode != 0:
        sys.exit("python tests: '%s' failed with status %d" % (" ".join(cmd), r.returncode))


run(["/usr/bin/python3", "-m", "venv", "--clear", "--system-site-packages", venv])
with tempfile.TemporaryDirectory(prefix="tth-pip-") as tmp:
    # pip builds in the directory it is given: a copy keeps build/ and *.egg-info out of the sources
    pkg = shutil.copytree(os.path.join(source, "python"), os.path.join(tmp, "python"),
                          ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    run([os.path.join(venv, "bin", "pip"), "install", "--no-index", "--no-build-isolation", "--quiet", pkg],
        env=dict(os.environ, PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1"))
py = os.path.join(venv, "bin", "python")
# the package comes from the environment, not from the sources
run([py, "-c", "import tth, sys; assert tth.__file__.startswith(sys.prefix), tth.__file__"],
    cwd=tempfile.gettempdir())
env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
r = subprocess.run([py, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", os.path.dirname(os.path.abspath(__file__))]
                   + sys.argv[1:], cwd=tempfile.gettempdir(), env=env)
sys.exit(r.returncode)
