"""The Python package's tests (docs/python.md) against a real tthd of this build on a private
socket in a temporary directory, with its own cache; the package starts that daemon itself when
the first test connects (as tthctl would), and the session stops it at the end.

TTH_BUILD_ROOT / TTH_SOURCE_ROOT (tests/meson.build) say where the build and the sources are."""
import os
import shutil
import signal
import tempfile
import time

import pytest

import tth

SOURCE = os.environ.get("TTH_SOURCE_ROOT") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("TTH_BUILD_ROOT") or os.path.join(SOURCE, "build-test")
TTHD = os.path.join(BUILD, "daemon", "tthd")
EXAMPLES = os.path.join(SOURCE, "examples")


def _stop(pid):
    """Stop our own daemon by its pid: the protocol's shutdown first, a kill if it lingers."""
    try:
        tth.shutdown()
    except tth.TthError:
        pass
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)


def _workers_up(work):
    """Fail at once, with the daemon's log, when its workers do not start (a tth-worker missing or
    being relinked when tthd started): its requests would wait in its queue."""
    for _ in range(150):
        if tth.status()["workers"]["alive"] > 0:
            return
        time.sleep(0.2)
    try:
        with open(os.path.join(work, "tthd.log"), errors="replace") as f:
            log = f.read()[-2000:]
    except OSError:
        log = ""
    pytest.fail("tthd started no worker within 30 s; its log ends:\n" + log)


@pytest.fixture(scope="session")
def daemon():
    """A private tthd started through tth's own auto-start; yields its work directory."""
    work = tempfile.mkdtemp(prefix="tth-pytest-")
    tth.configure(socket=os.path.join(work, "tthd.sock"), tthd=TTHD, start=True,
                  daemon_args=["--cache-dir", os.path.join(work, "cache")])
    st = tth.status()
    try:
        assert st["socket"] == os.path.join(work, "tthd.sock")
        _workers_up(work)
        yield work
    finally:
        _stop(st["pid"])
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture
def other_daemon():
    """A second private tthd with other options (a small request limit, for LimitError), used
    through tth.configure for the length of one test; the first daemon's socket is put back."""
    started = []
    saved = (tth._client._config.socket, list(tth._client._config.daemon_args))
    work = tempfile.mkdtemp(prefix="tth-pytest-2-")

    def start(*args):
        tth.configure(socket=os.path.join(work, "tthd.sock"), daemon_args=["--cache-dir", os.path.join(work, "cache")]
                      + list(args))
        started.append(tth.status()["pid"])
        return work

    try:
        yield start
    finally:
        for pid in started:
            _stop(pid)
        tth._client._config.socket, tth._client._config.daemon_args = saved
        shutil.rmtree(work, ignore_errors=True)
