"""tth.compile and the one-question requests (targets, tags, plugins, status, cache)."""
from __future__ import annotations

import io
import os
import re
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

from ._client import Connection, call
from ._xxh64 import xxh64_hex
from .artifact import Artifact
from .errors import CompileError, DaemonError

ProgressCallback = Callable[[Dict[str, Any]], Any]
_export_lock = threading.Lock()

_NUMPY_TO_TTH = {"float32": "float32", "float64": "float64", "int8": "int8", "int16": "int16", "int32": "int32",
                 "int64": "int64", "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
                 "bool": "bool"}


def _c_name(text: str) -> str:
    """A C identifier from a file or graph name (model.name must be one, PROTOCOL.md)."""
    s = re.sub(r"[^A-Za-z0-9_]", "_", text)[:64] or "model"
    return "_" + s[:63] if s[0].isdigit() else s


def _model_bytes(model: Any, example_inputs: Any, export_options: Optional[Dict[str, Any]]):
    """(bytes or None, path or None, default name, context) for every form of model."""
    if isinstance(model, (str, os.PathLike)):
        path = os.path.abspath(os.fspath(model))
        if not os.path.isfile(path):
            raise FileNotFoundError("model '%s' does not exist or is not a file" % os.fspath(model))
        return None, path, _c_name(os.path.splitext(os.path.basename(path))[0]), "model '%s'" % os.fspath(model)
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model), None, "model", "model (%d bytes)" % len(model)
    mod = type(model).__module__ or ""
    if mod.startswith("onnx") and hasattr(model, "SerializeToString"):
        gname = getattr(getattr(model, "graph", None), "name", "") or "model"
        return model.SerializeToString(), None, _c_name(gname), "ONNX model '%s'" % gname
    try:
        import torch  # only when a torch module is given
    except ImportError:
        torch = None
    if torch is not None and isinstance(model, torch.nn.Module):
        if example_inputs is None:
            raise TypeError("a torch.nn.Module needs example_inputs= (a tensor or a tuple of tensors) to be "
                            "exported with torch.onnx.export")
        args = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
        opts = dict(export_options or {})
        opts.setdefault("input_names", ["input"] if len(args) == 1 else ["input_%d" % i for i in range(len(args))])
        opts.setdefault("output_names", ["output"])
        buf = io.BytesIO()
        was_training = model.training
        model.eval()
        try:
            with _export_lock:  # torch.onnx.export keeps global state: one export at a time
                torch.onnx.export(model, args, buf, **opts)
        finally:
            model.train(was_training)
        name = _c_name(type(model).__name__.lower())
        return buf.getvalue(), None, name, "torch module %s" % type(model).__name__
    raise TypeError("model must be a path, bytes, an onnx.ModelProto or a torch.nn.Module (with example_inputs); "
                    "got %s" % type(model).__name__)


def _bind_json(bind: Mapping[str, Any]) -> Dict[str, Any]:
    out = {}
    for name, v in bind.items():
        a = np.asarray(v)
        dt = _NUMPY_TO_TTH.get(a.dtype.name)
        if dt is None:
            raise TypeError("bind['%s'] has the element type %s, which cannot be bound (use a float32/64, "
                            "integer or bool array)" % (name, a.dtype.name))
        if a.dtype.kind == "f" and not np.all(np.isfinite(a)):
            raise ValueError("bind['%s'] holds a value that is not finite; bound values travel as JSON numbers" % name)
        out[name] = {"dtype": dt, "shape": list(a.shape), "data": a.reshape(-1).tolist()}
    return out


def _target_param(target: Any) -> Any:
    if isinstance(target, dict):
        return target
    if isinstance(target, str):
        return target
    raise TypeError("target must be a string (\"llvm\", a tag such as \"arm/cortex-m55\") or a dict of its JSON "
                    "form; got %s" % type(target).__name__)


def _notebook() -> bool:
    """Running in a Jupyter kernel?"""
    ip = sys.modules.get("IPython")
    if ip is None:
        return False
    try:
        shell = ip.get_ipython()
    except AttributeError:
        return False
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


class _NotebookBar:
    """A progress bar shown in the notebook's output and updated in place."""

    def __init__(self) -> None:
        from IPython.display import HTML, display  # a notebook has IPython
        self.HTML = HTML
        self.handle = display(HTML(self._html(0, "starting", "")), display_id=True)

    @staticmethod
    def _html(pct: int, stage: str, message: str) -> str:
        import html as h
        return ('<div class="tth-progress" style="font-family:sans-serif;font-size:12px">'
                '<progress value="%d" max="100" style="width:240px"></progress> %d%% %s%s</div>'
                % (pct, pct, h.escape(stage), h.escape(": " + message) if message else ""))

    def __call__(self, p: Dict[str, Any]) -> None:
        pct = max(0, min(100, int(p.get("percentage", 0) or 0)))
        self.handle.update(self.HTML(self._html(pct, str(p.get("stage", "")), str(p.get("message", "") or ""))))


def compile(model: Any, target: Union[str, Dict[str, Any]], *, name: Optional[str] = None,
            bind: Optional[Mapping[str, Any]] = None, input_shape: Optional[Mapping[str, Sequence[int]]] = None,
            explain: bool = False, progress: Optional[ProgressCallback] = None, cache: bool = True,
            timeout: Optional[float] = None, profile: bool = False, build_shared: Optional[bool] = None,
            example_inputs: Any = None, export_options: Optional[Dict[str, Any]] = None) -> Artifact:
    """Compile a model through tthd and return the :class:`Artifact`.

    model: a path to an .onnx file, its bytes, an ``onnx.ModelProto``, or a ``torch.nn.Module``
    (then ``example_inputs``, a tensor or tuple, and ``export_options``, passed to
    ``torch.onnx.export``; inputs are named ``input`` / ``input_0``..., the output ``output``
    unless those options say otherwise). target: the string form, a tag, or the JSON form as a
    dict (docs/targets.md). name: the model's C name (default from the file or graph name).
    bind: graph input name -> array, made a constant of the model. input_shape: graph input name
    -> every dimension, for inputs the model leaves open. explain: the artifact gets explain/
    files. progress: called with each ``$/progress`` (``kind``, ``stage``, ``percentage``,
    ``message``); by default a progress bar in a notebook, nothing elsewhere. An exception raised by
    it, or Ctrl-C, cancels the request in the daemon and propagates. cache: False compiles even on
    a cache hit. timeout: seconds, after which the request is cancelled and TimeoutError raised.
    profile: a profiling artifact (docs/profiling.md, Artifact.profile). build_shared: force the
    library for this machine (the daemon's default: when the target is this machine).

    Raises CompileError (TargetError, ModelError, UnsupportedError, LimitError, CancelledError)
    for the daemon's refusals and DaemonError when tthd cannot be reached or started.
    """
    data, path, default_name, context = _model_bytes(model, example_inputs, export_options)
    mname = name or default_name
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", mname):
        raise ValueError("name '%s' is not a C identifier of at most 64 characters" % mname)
    options: Dict[str, Any] = {}
    if explain:
        options["explain"] = True
    if profile:
        options["profile"] = True
    if not cache:
        options["no_cache"] = True
    if build_shared is not None:
        options["build_shared"] = bool(build_shared)
    if bind:
        options["bind"] = _bind_json(bind)
    if input_shape:
        options["input_shapes"] = {k: [int(d) for d in v] for k, v in input_shape.items()}
    if progress is None and _notebook():
        progress = _NotebookBar()
    deadline = None if timeout is None else time.monotonic() + timeout
    with Connection() as c:
        by_path = path is not None and bool(c.capabilities.get("modelPath"))
        if path is not None and not by_path:
            with open(path, "rb") as f:
                data = f.read()
        size = os.path.getsize(path) if by_path else len(data)
        model_param: Dict[str, Any] = {"name": mname, "size": size}
        if by_path:
            model_param["path"] = path
        # a cache file for a hit or a fresh entry; streamed for cache=False, as the daemon answers a
        # no_cache compile delivered as a file with the entry already in the cache (found with these tests)
        delivery = "file" if c.capabilities.get("artifactFile") and cache else "stream"
        for attempt in range(3):
            params: Dict[str, Any] = {"model": model_param, "target": _target_param(target), "delivery": delivery}
            if options:
                params["options"] = options
            try:
                result, art = _one_compile(c, params, data if not by_path else None, context, progress, deadline)
            except _FileGone:
                delivery = "stream"
                continue
            return Artifact(art, result)
    raise DaemonError("the daemon's answer could not be used after three tries (its cache file disappeared each "
                      "time)", "socket '%s'" % c.path)


class _FileGone(Exception):
    pass


def _one_compile(c: Connection, params: Dict[str, Any], upload: Optional[bytes], context: str,
                 progress: Optional[ProgressCallback], deadline: Optional[float]):
    t = params["target"]
    target_context = "target '%s'" % t if isinstance(t, str) else "target"
    rid = c.request("compile", params)
    if upload is not None:
        c.upload(rid, [upload])
    chunks: List[bytes] = []
    cancelled: List[BaseException] = []

    def cancel(exc: BaseException) -> None:
        if not cancelled:
            cancelled.append(exc)
            c.notify("$/cancelRequest", {"id": rid})

    def on_progress(p: Dict[str, Any]) -> None:
        if progress is None or cancelled:
            return
        try:
            progress(p)
        except BaseException as e:  # the caller's way to stop: cancel, then raise it
            cancel(e)

    def on_idle() -> None:
        if deadline is not None and time.monotonic() > deadline and not cancelled:
            cancel(TimeoutError("the compile did not finish within the timeout; it was cancelled in the daemon"))

    def on_chunk(_ann: Dict[str, Any], body: bytes) -> None:
        chunks.append(body)

    while True:
        try:
            result = c.wait(rid, context, on_progress, on_chunk, slice_seconds=0.25, on_idle=on_idle,
                            target_context=target_context)
            break
        except KeyboardInterrupt as e:  # Ctrl-C: cancel in the daemon, wait for its answer, raise
            cancel(e)
            continue
        except CompileError as err:
            if cancelled:  # the daemon's RequestCancelled answer becomes the cause
                raise cancelled[0] from err
            raise
    if cancelled:
        raise cancelled[0]
    art = result.get("artifact") or {}
    f = art.get("file")
    if f:
        try:
            with open(f["path"], "rb") as fh:
                fh.seek(int(f.get("offset", 0)))
                data = fh.read(int(art["size"]))
        except FileNotFoundError:
            raise _FileGone() from None
        if len(data) != int(art["size"]):
            raise _FileGone()
    else:
        data = b"".join(chunks)
    if len(data) != int(art.get("size", -1)):
        raise DaemonError("the artifact has %d bytes; the daemon announced %s" % (len(data), art.get("size")),
                          "socket '%s'" % c.path)
    if xxh64_hex(data) != str(art.get("xxh64", "")).lower():
        raise DaemonError("the artifact's checksum differs from the daemon's (xxh64 %s, want %s)"
                          % (xxh64_hex(data), art.get("xxh64")), "socket '%s'" % c.path)
    return result, data


def targets() -> List[Dict[str, Any]]:
    """The target kinds the daemon's plugins provide (``targets/list``): kind, plugin, doc, keys,
    flags, attrs, hooks."""
    return call("targets/list")["kinds"]


def tags() -> List[Dict[str, Any]]:
    """The target tags (``tags/list``): name, aliases, kind, config, doc."""
    return call("tags/list")["tags"]


def recent_targets() -> List[Dict[str, Any]]:
    """The targets of the daemon's last compiles that succeeded, newest first (``targets/recent``):
    target (as it was given), string (canonical), model, lastUsed (seconds since 1970), uses."""
    return call("targets/recent")["targets"]


def parse_target(target: Union[str, Dict[str, Any]]) -> Dict[str, Any]:
    """Parse a target in the daemon (``target/parse``): ``target`` (canonical JSON), ``string``,
    ``json``, ``keys``, ``kinds``, ``diagnostics``. Raises TargetError when it does not parse."""
    ctx = "target '%s'" % target if isinstance(target, str) else "target"
    return call("target/parse", {"target": _target_param(target)}, context=ctx, target_context=ctx)


def plugins() -> Dict[str, Any]:
    """The plugins the daemon loaded and the files it refused (``plugins/list``)."""
    return call("plugins/list")


def status() -> Dict[str, Any]:
    """The daemon's state (``status``): version, pid, socket, cache, requests, workers..."""
    return call("status")


def cache_clear() -> Dict[str, Any]:
    """Empty the daemon's own cache: ``removedEntries``, ``removedBytes``, ``removedCode``."""
    return call("cache/clear")


def shutdown() -> None:
    """Stop the daemon (``shutdown``): in-flight requests get a few seconds to finish."""
    with Connection(start=False) as c:
        c.call("shutdown")
