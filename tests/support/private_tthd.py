"""A private tthd for the Python tests that drive the product through tthctl (tests/*/*.py): its
own socket and empty cache in the test's work directory, the tthd built beside the tthctl under
test, never another user's daemon.

    daemon = PrivateTthd(tthctl, work)      # started and answering
    try:
        ... subprocess.run([tthctl, "--socket", daemon.socket, "--no-start", "compile", ...])
        why = daemon.stop()                 # None, or why it did not stop cleanly
    finally:
        daemon.close()                      # killed if still running

or, the same:

    with PrivateTthd(tthctl, work) as daemon:
        ... daemon.ctl("compile", ...)
        why = daemon.stop()

or a whole test script's run, work directory included:

    return run_with_daemon(tthctl, "tth-x-", body, "x")   # body(daemon, work, failures)
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time


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
        return subprocess.run([self.tthctl, "--socket", self.socket, "--no-start"] + list(args),
                              capture_output=True, text=True)

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


def run_with_daemon(tthctl, prefix, body, title):
    """A private tthd in a new work directory (named from prefix) around body(daemon, work,
    failures), failures a list the body appends one line to per failure; then the daemon stopped
    (an unclean stop is a failure) and the directory removed. Prints "title: N failed" and
    returns the exit status."""
    work = tempfile.mkdtemp(prefix=prefix)
    daemon = PrivateTthd(tthctl, work)
    failures = []
    try:
        body(daemon, work, failures)
        why = daemon.stop()
        if why:
            failures.append(why)
    finally:
        daemon.close()
        shutil.rmtree(work, ignore_errors=True)
    print("%s: %d failed" % (title, len(failures)))
    return 1 if failures else 0
