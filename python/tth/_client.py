"""The wire protocol (protocol/PROTOCOL.md) over tthd's Unix socket, and starting tthd when none
answers, as tthctl does (docs/tthctl.md, "Starting the daemon").

One :class:`Connection` per call of the public API: a connection is used by one thread, so eight
threads compiling at once have eight connections and the daemon runs their requests side by side.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import socket
import subprocess
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from .errors import DaemonError, error_for

PROTOCOL_VERSION = "1.0"
CLIENT_VERSION = "0.1.0"
START_TIMEOUT = 10.0   # seconds, as tthctl (docs/tthctl.md)
IDLE_EXIT = "600"      # a daemon started here exits after 10 idle minutes, as tthctl's


class _Config:
    socket: Optional[str] = None
    tthd: Optional[str] = None
    start: bool = True
    daemon_args: List[str] = []


_config = _Config()
_start_lock = threading.Lock()


def configure(socket: Optional[str] = None, tthd: Optional[str] = None, start: Optional[bool] = None,
              daemon_args: Optional[List[str]] = None) -> None:
    """Where the daemon is and how to start it.

    socket: the socket path (default ``$TTH_SOCKET``, else ``$XDG_RUNTIME_DIR/tth/tthd.sock``, else
    ``/tmp/tth-$UID/tthd.sock``). tthd: the daemon executable to start when none answers (default
    ``$TTH_TTHD``, else ``tthd`` beside the ``tthctl`` on ``PATH``, else ``tthd`` on ``PATH``).
    start: False never starts one. daemon_args: more arguments for a daemon started here (such
    as ``["--cache-dir", DIR]``).
    """
    if socket is not None:
        _config.socket = os.path.abspath(socket)
    if tthd is not None:
        _config.tthd = tthd
    if start is not None:
        _config.start = start
    if daemon_args is not None:
        _config.daemon_args = list(daemon_args)


def socket_path() -> str:
    """The socket this package talks to (see :func:`configure`)."""
    if _config.socket:
        return _config.socket
    env = os.environ.get("TTH_SOCKET")
    if env:
        return os.path.abspath(env)
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        return os.path.join(xdg, "tth", "tthd.sock")
    return "/tmp/tth-%d/tthd.sock" % os.getuid()


def _find_tthd() -> str:
    if _config.tthd:
        return _config.tthd
    env = os.environ.get("TTH_TTHD")
    if env:
        return env
    ctl = shutil.which("tthctl")
    if ctl:
        beside = os.path.join(os.path.dirname(os.path.realpath(ctl)), "tthd")
        if os.access(beside, os.X_OK):
            return beside
        # a build tree: <build>/client/tthctl and <build>/daemon/tthd
        tree = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(ctl))), "daemon", "tthd")
        if os.access(tree, os.X_OK):
            return tree
    found = shutil.which("tthd")
    if found:
        return found
    raise DaemonError("no tthd answers and none was found to start", socket_path(),
                      "install tth, put tthd on PATH, or name it with tth.configure(tthd=PATH) or $TTH_TTHD")


def _connect(path: str) -> Optional[socket.socket]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return s
    except OSError as e:
        s.close()
        if e.errno in (errno.ENOENT, errno.ECONNREFUSED, errno.ENOTSOCK):
            return None
        raise DaemonError("cannot connect to tthd: %s" % e.strerror, "socket '%s'" % path) from None


def _start_daemon(path: str) -> socket.socket:
    """Start tthd on path and connect, taking turns with other starters on the lock file beside the
    socket (the one tthctl uses), so that one daemon serves the socket."""
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    with _start_lock:
        lock = os.open(os.path.join(directory, ".tthd-start.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            s = _connect(path)
            if s:
                return s
            exe = _find_tthd()
            log = os.path.join(directory, "tthd.log")
            with open(log, "ab") as out, open(os.devnull, "rb") as devnull:
                proc = subprocess.Popen([exe, "--socket", path, "--idle-exit", IDLE_EXIT] + _config.daemon_args,
                                        stdin=devnull, stdout=out, stderr=out, start_new_session=True)
            deadline = time.monotonic() + START_TIMEOUT
            delay = 0.01
            while time.monotonic() < deadline:
                s = _connect(path)
                if s:
                    return s
                if proc.poll() is not None:
                    break
                time.sleep(delay)
                delay = min(delay * 2, 0.25)
            last = ""
            try:
                with open(log, errors="replace") as f:
                    lines = [ln for ln in f.read().splitlines() if ln.strip()]
                    last = lines[-1] if lines else ""
            except OSError:
                pass
            why = "exited with status %d" % proc.returncode if proc.poll() is not None else \
                "did not answer within %g s" % START_TIMEOUT
            raise DaemonError("tthd (%s) %s%s" % (exe, why, ": " + last if last else ""), "socket '%s'" % path,
                              "see the daemon's log, %s" % log)
        finally:
            os.close(lock)


class Connection:
    """One initialised session with tthd. Not shared between threads."""

    def __init__(self, path: Optional[str] = None, start: Optional[bool] = None) -> None:
        self.path = path or socket_path()
        s = _connect(self.path)
        if s is None:
            if not (_config.start if start is None else start):
                raise DaemonError("no tthd answers", "socket '%s'" % self.path,
                                  "start tthd, or allow starting it (tth.configure(start=True))")
            s = _start_daemon(self.path)
        self.sock = s
        self.buf = bytearray()
        self.next_id = 1
        self.pending_binary: Optional[Dict[str, Any]] = None
        init = self.call("initialize", {"protocolVersion": PROTOCOL_VERSION,
                                        "clientInfo": {"name": "tth-python", "version": CLIENT_VERSION}})
        self.init = init
        limits = init.get("limits") or {}
        self.max_frame = int(limits.get("maxFrameBytes", 4 << 20))
        self.chunk = max(1, min(int(limits.get("chunkBytes", 1 << 18)), self.max_frame))
        self.capabilities = init.get("capabilities") or {}

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- frames ----

    def _send_frame(self, body: bytes, binary: bool = False) -> None:
        head = "Content-Length: %d\r\n" % len(body)
        if binary:
            head += "Content-Type: application/octet-stream\r\n"
        try:
            self.sock.sendall(head.encode() + b"\r\n" + body)
        except OSError as e:
            raise DaemonError("cannot write to tthd: %s" % e.strerror, "socket '%s'" % self.path) from None

    def send(self, msg: Dict[str, Any]) -> None:
        msg = dict(msg, jsonrpc="2.0")
        self._send_frame(json.dumps(msg, separators=(",", ":")).encode())

    def notify(self, method: str, params: Dict[str, Any]) -> None:
        self.send({"method": method, "params": params})

    def request(self, method: str, params: Optional[Dict[str, Any]] = None) -> int:
        rid = self.next_id
        self.next_id += 1
        self.send({"id": rid, "method": method, "params": params or {}})
        return rid

    def upload(self, rid: int, parts: List[bytes]) -> None:
        """The model's bytes (and its external data after it) as one upload of $/chunk + binary frames."""
        total = sum(len(p) for p in parts)
        offset = 0
        for part in parts:
            mv = memoryview(part)
            for at in range(0, len(mv), self.chunk):
                piece = mv[at:at + self.chunk]
                self.notify("$/chunk", {"id": rid, "stream": "model", "offset": offset, "size": len(piece),
                                        "total": total})
                self._send_frame(bytes(piece), binary=True)
                offset += len(piece)

    def _fill(self, timeout: Optional[float]) -> bool:
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1 << 20)
        except socket.timeout:
            return False
        except OSError as e:
            raise DaemonError("cannot read from tthd: %s" % e.strerror, "socket '%s'" % self.path) from None
        if not data:
            raise DaemonError("tthd closed the connection before answering", "socket '%s'" % self.path,
                              "the daemon may have stopped; its log is tthd.log beside the socket")
        self.buf += data
        return True

    def read_frame(self, timeout: Optional[float] = None) -> Optional[Tuple[bool, Any]]:
        """The next frame: (False, JSON message) or (True, bytes); None when timeout passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end >= 0:
                head = bytes(self.buf[:end]).decode("latin-1")
                length, binary = -1, False
                for line in head.split("\r\n"):
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                    elif name.strip().lower() == "content-type":
                        binary = value.split(";")[0].strip().lower() == "application/octet-stream"
                if length < 0:
                    raise DaemonError("bad frame from tthd: no Content-Length", "socket '%s'" % self.path)
                while len(self.buf) < end + 4 + length:
                    left = None if deadline is None else max(0.0, deadline - time.monotonic())
                    self._fill(left if left is None else max(left, 1.0))
                body = bytes(self.buf[end + 4:end + 4 + length])
                del self.buf[:end + 4 + length]
                if binary:
                    return True, body
                return False, json.loads(body)
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            if not self._fill(left):
                return None

    def wait(self, rid: int, context: str = "", on_progress: Optional[Callable[[Dict[str, Any]], None]] = None,
             on_chunk: Optional[Callable[[Dict[str, Any], bytes], None]] = None,
             slice_seconds: Optional[float] = None, on_idle: Optional[Callable[[], None]] = None,
             target_context: str = "") -> Any:
        """Read frames until the response to rid; progress and artifact chunks go to the callbacks.
        on_idle is called after every frame and every slice_seconds without one (it may raise to
        stop waiting): a deadline it checks is seen while frames keep coming too."""
        announced: Optional[Dict[str, Any]] = None
        stage: Optional[str] = None
        while True:
            fr = self.read_frame(slice_seconds)
            if on_idle:
                on_idle()
            if fr is None:
                continue
            binary, msg = fr
            if binary:
                if announced is None:
                    raise DaemonError("tthd sent a binary frame without announcing it", "socket '%s'" % self.path)
                if on_chunk and announced.get("id") == rid:
                    on_chunk(announced, msg)
                announced = None
                continue
            method = msg.get("method")
            if method == "$/chunk":
                announced = msg.get("params") or {}
                continue
            if method == "$/progress":
                p = msg.get("params") or {}
                if p.get("id") == rid:
                    # the stage running; "failed", "cancelled" and "done" close the request
                    if p.get("stage") and p.get("stage") not in ("failed", "cancelled", "done"):
                        stage = str(p.get("stage"))
                    if on_progress:
                        on_progress(p)
                continue
            if method is not None:
                continue
            if msg.get("id") != rid:
                if msg.get("id") is None and "error" in msg:
                    raise error_for(msg["error"], context, stage, target_context)
                continue
            if "error" in msg:
                raise error_for(msg["error"], context, stage, target_context)
            return msg.get("result")

    def call(self, method: str, params: Optional[Dict[str, Any]] = None, context: str = "",
             target_context: str = "") -> Any:
        return self.wait(self.request(method, params), context, target_context=target_context)


def call(method: str, params: Optional[Dict[str, Any]] = None, context: str = "", target_context: str = "") -> Any:
    """One request on a new connection (the daemon started when none answers)."""
    with Connection() as c:
        return c.call(method, params, context, target_context)
