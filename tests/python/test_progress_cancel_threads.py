"""Progress reports, cancellation (Ctrl-C, an exception of the progress callback, the timeout) and
eight threads compiling at once."""
import os
import signal
import threading
import time

import numpy as np
import pytest

import tth
from conftest import EXAMPLES

torch = pytest.importorskip("torch")

DIGITS = os.path.join(EXAMPLES, "digits.onnx")


def test_progress_reports(daemon):
    events = []
    tth.compile(DIGITS, "llvm", cache=False, progress=events.append)
    assert events[0]["kind"] == "begin" and events[-1]["kind"] == "end"
    assert events[-1]["percentage"] == 100
    pct = [e["percentage"] for e in events]
    assert pct == sorted(pct), pct
    stages = [e["stage"] for e in events]
    for s in ("import", "lower", "codegen", "package"):
        assert s in stages, stages


class Deep(torch.nn.Module):
    """enough convolutions that compiling takes a while (the cancellation has time to land)"""

    def __init__(self):
        super().__init__()
        self.convs = torch.nn.ModuleList([torch.nn.Conv2d(16, 16, 3, padding=1) for _ in range(24)])

    def forward(self, x):
        for c in self.convs:
            x = torch.relu(c(x))
        return x


def _deep():
    torch.manual_seed(0)
    return Deep().eval(), torch.randn(1, 16, 16, 16)


def _failed():
    return tth.status()["requests"]["failed"]


def test_ctrl_c_cancels_in_the_daemon(daemon):
    net, x = _deep()
    before = _failed()
    timer = []

    def on_progress(p):
        # SIGINT a little after lowering starts, while the main thread waits on the socket
        if p["stage"] == "lower" and not timer:
            timer.append(threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)))
            timer[0].start()

    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt) as ei:
        tth.compile(net, "llvm", example_inputs=x, cache=False, progress=on_progress)
    assert timer, "no progress from the lower stage"
    cause = ei.value.__cause__
    assert isinstance(cause, tth.CancelledError), repr(cause)
    assert cause.code == -32800
    assert _failed() == before + 1
    # the daemon carries on
    assert tth.compile(DIGITS, "llvm").inputs[0].name == "image"
    assert time.monotonic() - t0 < 60


def test_callback_exception_cancels(daemon):
    net, x = _deep()

    class Stop(Exception):
        pass

    def on_progress(p):
        if p["stage"] == "lower":
            raise Stop("enough")

    before = _failed()
    with pytest.raises(Stop) as ei:
        tth.compile(net, "llvm", example_inputs=x, cache=False, progress=on_progress)
    assert isinstance(ei.value.__cause__, tth.CancelledError)
    assert _failed() == before + 1


def test_timeout_cancels(daemon):
    net, x = _deep()
    before = _failed()
    with pytest.raises(TimeoutError, match="cancelled in the daemon"):
        tth.compile(net, "llvm", example_inputs=x, cache=False, timeout=0.05)
    assert _failed() == before + 1


def test_eight_threads_at_once(daemon):
    torch.manual_seed(3)
    nets = [torch.nn.Sequential(torch.nn.Linear(6, 4 + i), torch.nn.ReLU(), torch.nn.Linear(4 + i, 3)).eval()
            for i in range(8)]
    x = torch.randn(2, 6)
    results, errors = [None] * 8, []
    barrier = threading.Barrier(8)

    def work(i):
        try:
            barrier.wait()
            art = tth.compile(nets[i], "llvm", example_inputs=x, name="mlp%d" % i, cache=False)
            results[i] = art.run(input=x.numpy())["output"]
        except BaseException as e:  # reported below
            errors.append((i, e))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    for i in range(8):
        np.testing.assert_allclose(results[i], nets[i](x).detach().numpy(), atol=1e-5, rtol=1e-4)
