"""The compile report a person sees in Jupyter (Artifact._repr_html_), rendered in Debian's
headless chromium: no console message (the report has no script and loads nothing), and the DOM
after layout has the report's tables, laid out with a size, with one row per layer of the
artifact's partition and one per memory-planned function. A screenshot is kept in the test's
temporary directory (TTH_REPORT_SCREENSHOT names a copy to look at)."""
import json
import os
import re
import shutil
import subprocess

import pytest

import tth
from conftest import EXAMPLES

# the test's own script (not the report's): measures what chromium laid out and writes it into the DOM
PROBE = """<script>
window.addEventListener('load', function () {
  var out = {};
  ['tth-summary', 'tth-memory', 'tth-layers', 'tth-functions'].forEach(function (c) {
    var t = document.querySelector('table.' + c);
    if (!t) { out[c] = null; return; }
    var r = t.getBoundingClientRect();
    out[c] = {rows: t.querySelectorAll('tbody tr').length, width: r.width, height: r.height};
  });
  document.body.setAttribute('data-probe', JSON.stringify(out));
});
</script>"""


def render(html, tmp_path):
    chromium = shutil.which("chromium")
    if not chromium:
        pytest.fail("chromium is missing: ./scripts/setup installs it (Debian's chromium)")
    page = tmp_path / "report.html"
    page.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'><title>report</title></head><body>"
                    + html + PROBE + "</body></html>")
    common = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
              "--user-data-dir=" + str(tmp_path / "profile"), "--enable-logging=stderr", "--v=0",
              "--window-size=1100,1500"]
    dom = subprocess.run(common + ["--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    shot = tmp_path / "report.png"
    subprocess.run(common + ["--screenshot=" + str(shot), page.as_uri()], capture_output=True, text=True,
                   timeout=120)
    return dom, shot


def test_report_renders_in_chromium(daemon, tmp_path):
    art = tth.compile(os.path.join(EXAMPLES, "digits.onnx"), "llvm")
    html = art._repr_html_()
    dom, shot = render(html, tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    console = [ln for ln in dom.stderr.splitlines() if ":CONSOLE" in ln]
    assert not console, console
    m = re.search(r'data-probe="([^"]*)"', dom.stdout)
    assert m, dom.stdout[-2000:]
    probe = json.loads(m.group(1).replace("&quot;", '"'))
    rep = art.report()
    assert probe["tth-layers"]["rows"] == len(rep["layers"]) == len(art.metadata["partition"]["ops"]) > 0
    assert probe["tth-functions"]["rows"] == len(art.metadata["memory"]["operators"]) > 0
    assert probe["tth-memory"]["rows"] == 1
    for name, box in probe.items():
        assert box and box["width"] > 100 and box["height"] > 20, (name, box)
    # what the tables say
    for op in art.metadata["partition"]["ops"]:
        assert ">%s<" % op["node"] in dom.stdout
    assert "greedy-by-size" in dom.stdout or art.metadata["memory"]["plan"]["algorithm"] in dom.stdout
    assert shot.exists() and shot.stat().st_size > 10000
    keep = os.environ.get("TTH_REPORT_SCREENSHOT")
    if keep:
        shutil.copy(shot, keep)
