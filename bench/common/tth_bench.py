"""What the Python benchmarks (bench/vs_ort/run.py, bench/gemm/run.py) share: a private tthd,
compiling through tthctl, timing an artifact with tth-bench-time, and a note on the machine.

    import tth_bench                       # with bench/common on sys.path
    with tth_bench.Tth("build-rel") as tth:
        tth.compile("model.onnx", "llvm -num-cores=1", "model.tar")
        tth.time("model.tar", {"input": "x.npy"}, runs=20, warmup=3, output_dir="out")

The daemon is our own (a socket and an empty cache in a temporary directory, one worker), so the
benchmark neither disturbs nor reuses another user's tthd, and every artifact is compiled afresh.
It accepts models up to 2 GiB (--max-request-bytes; tthd's default is 256 MiB, less than
bench/models/make_zoo.py's vgg11, vit_b_16 and wide_resnet50_2); tthctl learns the limit from
the daemon.
"""
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time


class BenchError(Exception):
    pass


# the private tthd's request limit: ONNX's own limit on a file with its weights inside (protobuf)
MAX_REQUEST_BYTES = "2G"


class Tth:
    """A private tthd from the build directory `build`, and the tools next to it; `extra` are more
    tthd arguments (given after ours: a second --max-request-bytes wins)."""

    def __init__(self, build, workers=1, extra=()):
        self.build = os.path.abspath(build)
        self.tthctl = os.path.join(self.build, "client", "tthctl")
        self.tthd = os.path.join(self.build, "daemon", "tthd")
        self.timer = os.path.join(self.build, "bench", "vs_ort", "tth-bench-time")
        for tool in (self.tthctl, self.tthd, self.timer):
            if not os.access(tool, os.X_OK):
                raise BenchError("%s is missing: build it (ninja -C %s)" % (tool, build))
        self.dir = tempfile.mkdtemp(prefix="tth-bench-")
        self.socket = os.path.join(self.dir, "tthd.sock")
        self.log = os.path.join(self.dir, "tthd.log")
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [self.tthd, "--socket", self.socket, "--cache-dir", os.path.join(self.dir, "cache"),
                 "--workers", str(workers), "--idle-exit", "3600",
                 "--max-request-bytes", MAX_REQUEST_BYTES] + list(extra),
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        deadline = time.monotonic() + 15
        while self.ctl("status", check=False).returncode != 0:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise BenchError("tthd did not start; see its log above")
            time.sleep(0.1)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.proc.poll() is None:
            self.ctl("stop", check=False)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.terminate()
                self.proc.wait()
        if self.proc.returncode not in (0, None):
            with open(self.log, errors="replace") as f:
                sys.stderr.write(f.read())
        shutil.rmtree(self.dir, ignore_errors=True)

    def ctl(self, *args, check=True):
        """Run tthctl against our daemon (never starting another); the CompletedProcess."""
        r = subprocess.run([self.tthctl, "--socket", self.socket, "--no-start", "-q"] + list(args),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if check and r.returncode != 0:
            raise BenchError("tthctl %s: exit %d\n%s" % (" ".join(args), r.returncode, r.stderr.strip()))
        return r

    def parse_target(self, target):
        return json.loads(self.ctl("target", "parse", target, "--json").stdout)

    def host_cpu(self):
        """This machine's CPU as LLVM names it, and the -mattr that `-mcpu=native` adds (the CPU
        model's features this machine lacks, as a list)."""
        t = self.parse_target("llvm -mcpu=native")["target"]
        return t.get("mcpu", "generic"), t.get("mattr", [])

    def compile(self, model, target, out, name=None, explain=False, profile=False):
        """Compile `model` for `target` into the artifact `out`; the compile result (JSON) with
        "seconds" added. With explain, its "diagnostics" hold the compile's notes."""
        args = ["compile", model, "--target", target, "-o", out, "--json", "--no-cache"]
        if name:
            args += ["--name", name]
        if explain:
            args += ["--explain"]
        if profile:
            args += ["--profile"]
        t0 = time.monotonic()
        result = json.loads(self.ctl(*args).stdout)
        result["seconds"] = time.monotonic() - t0
        return result

    def time(self, artifact, inputs, runs=20, warmup=3, output_dir=None):
        """Time an artifact with tth-bench-time: {"median_ms", "min_ms", "mean_ms", ...}."""
        args = [self.timer, artifact, "--runs", str(runs), "--warmup", str(warmup)]
        for name, path in inputs.items():
            args += ["--input", "%s=%s" % (name, path)]
        if output_dir:
            args += ["--output-dir", output_dir]
        r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise BenchError("tth-bench-time %s: exit %d\n%s" % (artifact, r.returncode, r.stderr.strip()))
        return json.loads(r.stdout)


def ort_time(ort_dir, model, threads, inputs, runs=20, warmup=3, output_dir=None):
    """Time `model` with ONNX Runtime through bench/ort/ort_time.js (inputs: {name: .npy path});
    its JSON line: {"median_ms", "min_ms", "ready_ms", "first_run_ms", ...}"""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = ["node", os.path.join(root, "bench", "ort", "ort_time.js"), model, "--threads", str(threads), "--runs",
            str(runs), "--warmup", str(warmup)]
    if ort_dir:
        args += ["--ort-dir", ort_dir]
    if output_dir:
        args += ["--output-dir", output_dir]
    for name, path in inputs.items():
        args += ["--input", "%s=%s" % (name, path)]
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise BenchError("ort_time.js %s: exit %d\n%s" % (model, r.returncode, r.stderr.strip()))
    return json.loads(r.stdout)


def cpu_info():
    """{"model", "mhz", "flags", "cpus"} from /proc/cpuinfo (Linux)."""
    info = {"model": platform.processor() or "?", "mhz": 0.0, "flags": set(), "cpus": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key, value = key.strip(), value.strip()
                if key == "model name":
                    info["model"] = value
                elif key == "cpu MHz" and not info["mhz"]:
                    info["mhz"] = float(value)
                elif key == "flags" and not info["flags"]:
                    info["flags"] = set(value.split())
    except OSError:
        pass
    return info


def machine_note(build=None):
    """One line: date, CPU, CPUs, clock and the load average, for the top of a report; with the
    build directory, also the two first CPUs' cache-line round trip (tth-bench-pingpong): about
    110 ns when this VM's vCPUs share a cache, 450-530 ns when they do not (bench/README.md, "Two
    vCPUs, two states"), which moves every two-thread figure."""
    cpu = cpu_info()
    load = " ".join("%.2f" % x for x in os.getloadavg())
    note = "%s; %s, %d CPUs, %.0f MHz (/proc/cpuinfo); load average %s" % (
        time.strftime("%Y-%m-%d %H:%M"), cpu["model"], cpu["cpus"] or 0, cpu["mhz"], load)
    ns = round_trip_ns(build) if build else None
    if ns is not None:
        note += "; vCPU cache-line round trip %.0f ns" % ns
    return note


def round_trip_ns(build):
    """The first two CPUs' cache-line round trip in ns (tth-bench-pingpong), or None."""
    pp = os.path.join(build, "bench", "gemm", "tth-bench-pingpong")
    if not os.path.exists(pp) or (cpu_info()["cpus"] or 0) < 2:
        return None
    r = subprocess.run([pp], capture_output=True, text=True)
    try:
        return float(json.loads(r.stdout)["round_trip_ns"])
    except (ValueError, KeyError, TypeError):
        return None


def table(header, rows):
    """A Markdown table with columns padded to their widest cell."""
    cells = [header] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |" for row in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)
