#!/usr/bin/python3
"""The compile report page (docs/profiling.md, "The report page") in a real browser: the digits
example and a small CNN with a concatenation done in place, compiled for `llvm` with --explain
and --profile, carry explain/report.json and explain/report.html; `tthctl report` writes the
page again with `tthctl run --profile --json`'s times merged. Each page is opened in Debian's
headless chromium: no console message, the script ran (body data-ready), the summary's
multiply-adds, the per-layer table's rows, functions, multiply-adds and (merged) median times are
those of the JSON, the partition graph has a box per call and an edge into every call that reads
another's output (through the in-place concatenation too), the memory plan is inline; the page
names no other resource (no src, href or url()). Errors: an artifact without --explain, a profile
of another artifact, a file that is not a profile. A screenshot of each page is left in the
test's directory (TTH_REPORT_SCREENSHOTS=DIR keeps copies to look at).

    tests/client/report_test.py --tthctl build/client/tthctl

Exit status 77 (skipped) without numpy and onnx; chromium missing is a failure (scripts/setup
installs it).
"""
import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from private_tthd import run_with_daemon, skip_unless, tthctl_args  # noqa: E402
from artifact_main import boards_ready, run_board  # noqa: E402

skip_unless("report", modules=("numpy", "onnx"))
import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def fire_model():
    """x [1, 16, 12, 12] -> two convolutions joined along channels (done in place) -> a 1x1
    convolution -> global average -> [1, 8] (the average's blocked channels made plain again by
    views done in place, read by the flatten)"""
    rng = np.random.default_rng(3)
    w = {k: (rng.standard_normal(s) * 0.2).astype(np.float32) for k, s in
         (("wa", (16, 16, 1, 1)), ("wb", (16, 16, 3, 3)), ("wc", (8, 32, 1, 1)))}
    nodes = [helper.make_node("Conv", ["x", "wa"], ["a"], name="squeeze1x1"),
             helper.make_node("Conv", ["x", "wb"], ["b"], pads=[1, 1, 1, 1], name="expand3x3"),
             helper.make_node("Relu", ["a"], ["ra"], name="relu_a"),
             helper.make_node("Relu", ["b"], ["rb"], name="relu_b"),
             helper.make_node("Concat", ["ra", "rb"], ["cat"], axis=1, name="join"),
             helper.make_node("Conv", ["cat", "wc"], ["c"], name="classifier"),
             helper.make_node("GlobalAveragePool", ["c"], ["g"], name="pool"),
             helper.make_node("Flatten", ["g"], ["y"], name="flatten")]
    g = helper.make_graph(nodes, "fire", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 12, 12])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
                          [numpy_helper.from_array(v, k) for k, v in w.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


class Cells(html.parser.HTMLParser):
    """the DOM chromium dumped: each table's rows of cells (text and data-v), the SVG boxes and
    lines of the partition graph, data-ready"""

    def __init__(self):
        super().__init__()
        self.tables, self.table, self.row, self.cell = {}, None, None, None
        self.in_graph, self.boxes, self.lines, self.ready, self.memory_svg = 0, 0, 0, False, False
        self.refs = []
        self.note, self.in_note = "", False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for k in ("src", "href"):
            if k in a:
                self.refs.append((tag, k, a[k]))
        if tag == "body" and a.get("data-ready") == "1":
            self.ready = True
        if tag == "table":
            self.table = self.tables.setdefault(a.get("id", "?"), [])
        elif tag == "tr" and self.table is not None:
            self.row = []
            self.table.append(self.row)
        elif tag in ("td", "th") and self.row is not None:
            self.cell = [a.get("data-v"), ""]
            self.row.append(self.cell)
        elif tag == "div" and a.get("id") == "stages-note":
            self.in_note = True
        elif tag == "div" and a.get("id") == "graph":
            self.in_graph = 1
        elif tag == "div" and a.get("id") == "memory":
            self.in_graph = 2
        elif tag == "rect" and self.in_graph == 1:
            self.boxes += 1
        elif tag == "line" and self.in_graph == 1:
            self.lines += 1
        elif tag == "svg" and self.in_graph == 2:
            self.memory_svg = True

    def handle_endtag(self, tag):
        if tag == "div":
            self.in_note = False
        if tag == "table":
            self.table = None
        elif tag in ("td", "th"):
            self.cell = None
        elif tag == "div" and self.in_graph:
            self.in_graph = 0 if tag == "div" and self.in_graph == 1 else self.in_graph

    def handle_data(self, data):
        if self.in_note:
            self.note += data
        if self.cell is not None:
            self.cell[1] += data


def chromium(page, work, name):
    exe = shutil.which("chromium")
    common = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
              "--user-data-dir=" + os.path.join(work, "chromium-" + name), "--enable-logging=stderr", "--v=0",
              "--host-resolver-rules=MAP * ~NOTFOUND", "--window-size=1400,1600"]
    dom = subprocess.run(common + ["--dump-dom", "file://" + page], capture_output=True, text=True, timeout=120)
    shot = os.path.join(work, name + ".png")
    subprocess.run(common + ["--screenshot=" + shot, "file://" + page], capture_output=True, text=True, timeout=120)
    keep = os.environ.get("TTH_REPORT_SCREENSHOTS")
    if keep and os.path.exists(shot):
        os.makedirs(keep, exist_ok=True)
        shutil.copy(shot, os.path.join(keep, name + ".png"))
    return dom, shot


def check_page(page, data, profile, work, name, check):
    text = open(page, encoding="utf-8").read()
    check(not re.search(r"\b(src|href)\s*=|url\(", text.split('id="tth-data"')[0]),
          "%s: the page names another resource" % name)
    dom, shot = chromium(page, work, name)
    if not check(dom.returncode == 0, "%s: chromium exit %d: %s" % (name, dom.returncode, dom.stderr[-1500:])):
        return
    console = [ln for ln in dom.stderr.splitlines() if ":CONSOLE" in ln]
    check(not console, "%s: console messages: %s" % (name, console))
    check(not [ln for ln in dom.stderr.splitlines() if "net::ERR" in ln], "%s: a request left the file" % name)
    check(os.path.exists(shot) and os.path.getsize(shot) > 10000, "%s: no screenshot" % name)
    p = Cells()
    p.feed(dom.stdout)
    check(p.ready, "%s: the page's script did not finish (no data-ready)" % name)
    calls = data["calls"]
    layers = p.tables.get("layers", [])
    rows = layers[1:]
    check(len(rows) == len(calls) > 0, "%s: %d layer rows for %d calls" % (name, len(rows), len(calls)))
    head = [c[1] for c in layers[0]] if layers else []
    col = {h: i for i, h in enumerate(head)}
    for r, c in zip(rows, calls):
        check(r[col["function"]][1] == c["function"], "%s: row %s is %s" % (name, c["index"], r[col["function"]][1]))
        check(int(r[col["multiply-adds"]][0]) == c["macs"], "%s: %s MACs %s, JSON %d" % (name, c["function"], r[col["multiply-adds"]][0], c["macs"]))
        if c.get("strategies"):  # why: the rows of the op's table above the one taken
            why = r[col["why this strategy"]][1] if "why this strategy" in col else ""
            check(why.startswith("first row for ") and len(c.get("strategy_why", [])) == len(c["strategies"]),
                  "%s: %s strategy %s, why %r (JSON %r)" % (name, c["function"], c["strategies"], why,
                                                           c.get("strategy_why")))
        if profile:  # a time profile, or instructions from a board
            head_, key = ("instructions", "instructions") if profile["profile"].get("unit") == "instructions" \
                else ("median us", "median_us")
            want = next(x[key] for x in profile["profile"]["calls"] if x["index"] == c["index"])
            check(head_ in col and abs(float(r[col[head_]][0]) - want) < 1e-6,
                  "%s: %s %s %s, the profile's %r" % (name, c["function"], head_, r[col.get(head_, 0)][0], want))
    if not profile:
        check("median us" not in col and "instructions" not in col, "%s: a profile column without a profile" % name)
    summary = {r[0][1]: r[1][1] for r in p.tables.get("summary", []) if len(r) == 2}
    check(summary.get("multiply-adds", "").replace(",", "") == str(sum(c["macs"] for c in calls)),
          "%s: summary multiply-adds %r" % (name, summary.get("multiply-adds")))
    check(p.boxes == len(calls), "%s: %d boxes in the graph for %d calls" % (name, p.boxes, len(calls)))
    check(p.memory_svg, "%s: no memory plan picture" % name)
    return p


def board_profile(daemon, work, check):
    """a Cortex-M55 artifact's profile from the emulated board (scripts/run-cortexm --profile
    --json) merged into its page: the instructions column (skipped without the board tools)"""
    if not boards_ready("report"):
        return
    art = os.path.join(work, "m55.tar")
    why = daemon.compile(os.path.join(SOURCE, "examples", "digits.onnx"), "c -mcpu=cortex-m55", art, "--explain",
                         "--profile")
    if not check(not why, "m55: %s" % why):
        return
    prof = os.path.join(work, "m55-profile.json")
    why, _, _ = run_board(art, "mps3-an547", {"image": np.load(os.path.join(SOURCE, "examples", "digit_input.npy"))},
                          os.path.join(work, "m55-out"), ["--profile", "--json", prof])
    if not check(not why, "m55: %s" % why):
        return
    with tarfile.open(art) as t:
        data = json.load(t.extractfile("explain/report.json"))
    out = os.path.join(work, "m55-merged.html")
    r = daemon.ctl("report", art, prof, "-o", out)
    if check(r.returncode == 0 and os.path.exists(out), "m55: report: %s" % r.stderr):
        p = check_page(out, data, json.loads(open(prof).read()), work, "m55-merged", check)
        summary = {r[0][1]: r[1][1] for r in p.tables.get("summary", []) if len(r) == 2} if p else {}
        check("instructions" in summary.get("profile", "") and "mps3-an547" in summary.get("profile", ""),
              "m55: the summary's profile line %r" % summary.get("profile"))


def compile_page(daemon, work, check):
    """the page tthctl compile --explain writes beside the artifact: this compile's stages and
    hooks with their seconds (a compile that missed the cache), and a cache hit's note"""
    art = os.path.join(work, "timed.tar")
    for attempt, extra in (("miss", ["--no-cache"]), ("hit", [])):
        r = daemon.ctl("compile", os.path.join(SOURCE, "examples", "digits.onnx"), "--target", "llvm", "--explain",
                       "-o", art, "--json", *extra)
        if not check(r.returncode == 0, "compile --explain (%s): %s" % (attempt, r.stderr)):
            return
        res = json.loads(r.stdout)
        page = res.get("report")
        if not check(page == os.path.join(work, "timed.report.html") and os.path.exists(page),
                     "compile --explain (%s): report %r" % (attempt, page)):
            return
        with tarfile.open(art) as t:
            data = json.load(t.extractfile("explain/report.json"))
        p = check_page(page, data, None, work, "timed-" + attempt, check)
        if not p:
            return
        t = res["timings"]
        want = [("stage " + x["stage"], x["seconds"]) for x in t.get("stages", [])] + \
               [("hook " + x["hook"], x["seconds"]) for x in t.get("hooks", [])]
        got = [(r[0][1], float(r[1][0])) for r in p.tables.get("stages", [])[1:]]
        check(len(got) == len(want) and all(g[0] == w[0] and abs(g[1] - w[1]) < 1e-9 for g, w in zip(got, want)),
              "compile --explain (%s): the page's stages %s, the answer's %s" % (attempt, got, want))
        if attempt == "miss":
            check(len(want) >= 5, "compile --explain (miss): only %d stages and hooks" % len(want))
        else:
            check(not want and "served from the cache" in p.note and "cache hit" in p.note,
                  "compile --explain (hit): stages %s, note %r" % (want, p.note))
        if attempt == "miss":
            check("cache miss" in p.note, "compile --explain (miss): note %r" % p.note)


def body(daemon, work, failures):
    check = failures.check
    fire = os.path.join(work, "fire.onnx")
    onnx.save(fire_model(), fire)
    models = {"digits": (os.path.join(SOURCE, "examples", "digits.onnx"), "image", (1, 1, 8, 8)),
              "fire": (fire, "x", (1, 16, 12, 12))}
    for name, (path, inp, shape) in models.items():
        art = os.path.join(work, name + ".tar")
        why = daemon.compile(path, "llvm", art, "--explain", "--profile")
        if not check(not why, "%s: %s" % (name, why)):
            continue
        with tarfile.open(art) as t:
            data = json.load(t.extractfile("explain/report.json"))
            inside = os.path.join(work, name + "-inside.html")
            with open(inside, "wb") as f:
                f.write(t.extractfile("explain/report.html").read())
        p = check_page(inside, data, None, work, name + "-inside", check)
        if name == "fire" and p:
            check(data.get("slices"), "fire: no concatenation done in place in the report data")
            # every call but the first reads an earlier call's output: one edge each at least
            check(p.lines >= len(data["calls"]) - 1, "fire: %d edges for %d calls" % (p.lines, len(data["calls"])))
        x = os.path.join(work, name + "-x.npy")
        np.save(x, np.random.default_rng(0).standard_normal(shape).astype(np.float32))
        r = daemon.ctl("run", art, "--input", "%s=%s" % (inp, x), "--profile", "--json", "--output-dir",
                       os.path.join(work, "out"))
        if not check(r.returncode == 0, "%s: run --profile: %s" % (name, r.stderr)):
            continue
        prof = os.path.join(work, name + "-profile.json")
        with open(prof, "w") as f:
            f.write(r.stdout)
        out = os.path.join(work, name + "-merged.html")
        r = daemon.ctl("report", art, prof, "-o", out)
        if check(r.returncode == 0 and os.path.exists(out), "%s: report: %s" % (name, r.stderr)):
            check_page(out, data, json.loads(open(prof).read()), work, name + "-merged", check)
    board_profile(daemon, work, check)
    compile_page(daemon, work, check)
    # errors
    plain = os.path.join(work, "plain.tar")
    why = daemon.compile(models["digits"][0], "llvm", plain)
    if check(not why, "without --explain: %s" % why):
        r = daemon.ctl("report", plain)
        check(r.returncode == 1 and "--explain" in r.stderr, "report of a plain artifact: exit %d, %s" % (r.returncode, r.stderr))
    r = daemon.ctl("report", os.path.join(work, "digits.tar"), os.path.join(work, "fire-profile.json"), "-o",
                   os.path.join(work, "x.html"))
    check(r.returncode == 1 and "another artifact" in r.stderr, "a profile of another artifact: exit %d, %s" % (r.returncode, r.stderr))
    r = daemon.ctl("report", os.path.join(work, "digits.tar"), os.path.join(SOURCE, "README.md"))
    check(r.returncode == 1 and "not a profile" in r.stderr, "a file that is not JSON: exit %d, %s" % (r.returncode, r.stderr))


if __name__ == "__main__":
    # chromium missing is a failure, not a skip
    if not shutil.which("chromium"):
        print("chromium is missing: ./scripts/setup installs Debian's chromium")
        sys.exit(1)
    sys.exit(run_with_daemon(tthctl_args("report").tthctl, "tth-report-", body,
                             "the report page: in the artifact and by tthctl report, in headless chromium"))
