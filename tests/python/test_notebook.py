"""examples/python.ipynb executed with Debian's jupyter-nbconvert (its kernel: this environment's
Python, where the package is installed) against the private daemon; its outputs checked: no
error, the numbers against numpy's and torch's, the compile report's HTML present."""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import EXAMPLES, TTHD

import tth


def test_notebook_executes(daemon, tmp_path):
    nbconvert = shutil.which("jupyter-nbconvert")
    if not nbconvert:
        pytest.fail("jupyter-nbconvert is missing: ./scripts/setup installs it (Debian's jupyter-nbconvert)")
    # a kernel spec for this interpreter, found through JUPYTER_PATH
    kdir = tmp_path / "jupyter"
    subprocess.run([sys.executable, "-m", "ipykernel", "install", "--prefix", str(kdir), "--name", "tth-test"],
                   check=True, capture_output=True)
    env = dict(os.environ, JUPYTER_PATH=str(kdir / "share" / "jupyter"), TTH_SOCKET=tth.socket_path(),
               TTH_TTHD=TTHD, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), IPYTHONDIR=str(tmp_path / "ipython"))
    work = tmp_path / "nb"
    shutil.copytree(EXAMPLES, work, ignore=shutil.ignore_patterns("cmake", "meson", "out"))
    r = subprocess.run([nbconvert, "--to", "notebook", "--execute", "--ExecutePreprocessor.kernel_name=tth-test",
                        "--ExecutePreprocessor.timeout=120", "--output", "executed.ipynb", str(work / "python.ipynb")],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    nb = json.load(open(work / "executed.ipynb"))
    text, html = [], []
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            assert out["output_type"] != "error", out
            if out["output_type"] == "stream":
                text.append("".join(out["text"]))
            data = out.get("data", {})
            if "text/html" in data:
                html.append("".join(data["text/html"]))
    text = "".join(text)
    m = re.search(r"digit: (\d+) max difference from numpy: (\S+)", text)
    assert m, text
    assert m.group(1) == "1" and float(m.group(2)) < 1e-5
    m = re.search(r"max difference from torch: (\S+)", text)
    assert m, text
    assert float(m.group(1)) < 1e-4
    assert re.search(r"median [0-9.]+ ms over 50 runs", text)
    # the progress bar the compile showed in the notebook (its last state)
    assert any('class="tth-progress"' in h and "100%" in h for h in html), html
    report = [h for h in html if 'class="tth-report"' in h]
    assert report, "no compile report among the notebook's HTML outputs"
    assert "small_cnn" in report[0] and 'class="tth-layers"' in report[0] and "Memory plan" in report[0]
