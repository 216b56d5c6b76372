"""A private tthd for the Python tests that drive the product through tthctl (tests/*/*.py): its
own socket and empty cache in the test's work directory, the tthd built beside the tthctl under
test, never another user's daemon; and the frame every test script shares: its arguments, its
skips (exit 77), its list of failures and its exit status.

    daemon = PrivateTthd(tthctl, work)      # started and answering
    try:
        ... daemon.compile(model, "llvm", tar)  # None, or why it failed
        ... daemon.ctl("run", tar, ...)         # tthctl against this daemon
        why = daemon.stop()                 # None, or why it did not stop cleanly
    finally:
        daemon.close()                      # killed if still running

or, the same:

    with PrivateTthd(tthctl, work) as daemon:
        ... daemon.ctl("compile", ...)
        why = daemon.stop()

or a whole test script's run, work directory included:

    args = tthctl_args("x", modules=("numpy",), tools=("cc",))   # --tthctl; exit 77 without them
    return run_with_daemon(args.tthctl, "tth-x-", body, "x")   # body(daemon, work, failures)
"""
import argparse
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import time


def run(cmd, env=None, **kw):
    """cmd run to its end, its output captured as text"""
    return subprocess.run(cmd, env=env, capture_output=True, text=True, **kw)


class PrivateTthd:
    def __init__(self, tthctl, work):
        self.tthctl = os.path.abspath(tthctl)
        self.socket = os.path.join(work, "tthd.sock")
        self.log = os.path.join(work, "tthd.log")
        tthd = os.path.join(os.path.dirname(os.path.dirname(self.tthctl)), "daemon", "tthd")
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen([tthd, "--socket", self.socket, "--cache-dir", os.path.join(work, "cache")],
                                         stdout=subprocess.DEVNULL, stderr=log)
        for _ in range(100):
            if self.ctl("status").returncode == 0:
                break
            time.sleep(0.1)

    def ctl(self, *args):
        """tthctl against this daemon (never starting another)"""
        return run([self.tthctl, "--socket", self.socket, "--no-start"] + list(args))

    def compile(self, model, target, tar, *extra):
        """tthctl -q compile MODEL --target TARGET -o TAR, extra after: None, or why it failed"""
        c = self.ctl("-q", "compile", model, "--target", target, "-o", tar, *extra)
        return None if c.returncode == 0 else "compile for %s: %s" % (target, c.stderr.strip()[-3000:])

    def stop(self):
        """Stops the daemon; None when it stopped cleanly, else why (its log's end goes to stderr)."""
        stop = self.ctl("stop")
        self.proc.wait(timeout=30)
        if stop.returncode == 0 and self.proc.returncode == 0:
            return None
        with open(self.log, errors="replace") as f:
            sys.stderr.write(f.read()[-4000:])
        return "tthd: stop exit %d, daemon exit %d" % (stop.returncode, self.proc.returncode)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Failures(list):
    """A test script's failures, one line each."""

    def check(self, cond, what):
        """cond, recording what as a failure when it is false"""
        if not cond:
            self.append(what)
        return cond


def skip_unless(title, modules=(), tools=()):
    """Exits 77 (meson's skip), saying which is missing, unless every Python module of modules
    imports and every program of tools is on PATH."""
    for m in modules:
        try:
            importlib.import_module(m)
        except ImportError:
            print("%s: skipped, python3-%s is not installed" % (title, m))
            sys.exit(77)
    for t in tools:
        if not shutil.which(t):
            print("%s: skipped, %s is not installed (scripts/setup installs it)" % (title, t))
            sys.exit(77)


def tthctl_args(title, modules=(), tools=(), keep=False):
    """The script's arguments, once skip_unless(title, modules, tools) has let it run: --tthctl
    (made absolute) and, with keep, --keep DIR (work there and keep it)."""
    skip_unless(title, modules, tools)
    ap = argparse.ArgumentParser()
    ap.add_argument("--tthctl", required=True)
    if keep:
        ap.add_argument("--keep", help="work in this directory and keep it")
    args = ap.parse_args()
    args.tthctl = os.path.abspath(args.tthctl)
    return args


def finish(failures, work, ok=None):
    """The end of a test script: each failure printed, the work directory removed when there is
    none (kept to look at otherwise); the exit status."""
    for f in failures:
        print("FAIL:", f)
    if not failures:
        if ok:
            print("ok:", ok)
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


def run_with_daemon(tthctl, prefix, body, title, keep=None):
    """A private tthd in a new work directory (named from prefix; keep: this one, kept) around
    body(daemon, work, failures), failures a Failures the body adds one line to per failure; then
    the daemon stopped (an unclean stop is a failure). Prints each failure and "title: N failed
    (seconds)"; the work directory is removed when nothing failed (kept to look at otherwise).
    Returns the exit status."""
    work = keep or tempfile.mkdtemp(prefix=prefix)
    os.makedirs(work, exist_ok=True)
    started = time.monotonic()
    daemon = PrivateTthd(tthctl, work)
    failures = Failures()
    try:
        body(daemon, work, failures)
        why = daemon.stop()
        if why:
            failures.append(why)
    finally:
        daemon.close()
    for f in failures:
        print("FAIL:", f)
    print("%s: %d failed (%.1f s)" % (title, len(failures), time.monotonic() - started))
    if failures or keep:
        print("work directory kept: " + work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0
