"""Running an artifact on this machine with ctypes: what runtime/model.c does, in Python.

The runtime library (runtime/, libtthrt) is a static C library, so this package does not call it;
it follows the same calling convention (docs/artifact.md, "Reading an artifact" and "Constants
bound at run time", and runtime/model.c):

- metadata.json gives the entry symbol (``executor.entry``), the inputs and outputs (name, dtype,
  shape, bytes, in the order of the interface structs) and the workspace's size and alignment;
- ``lib/<model>.so`` is written to a private temporary directory, loaded (RTLD_LOCAL) and removed;
- each module whose metadata has ``bind_constants`` gets the entries of
  ``parameters/<model>.params`` it names, through its ``symbol``:
  ``int32_t bind(const void *const *data, const size_t *bytes, size_t n)``;
- ``int32_t <entry>(void *const *inputs, void *const *outputs, void *workspace)``: both structs
  are a pointer per tensor, in metadata order; a non-zero status is an error, explained by the
  modules' ``status_text_symbol`` functions when they know it.
"""
from __future__ import annotations

import ctypes
import os
import struct
import tempfile
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from .errors import RunError

DTYPES = {
    "float32": np.float32, "float16": np.float16, "float64": np.float64, "int8": np.int8, "int16": np.int16,
    "int32": np.int32, "int64": np.int64, "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32,
    "uint64": np.uint64, "bool": np.bool_,
}
# bfloat16 has no numpy dtype: its bits travel as uint16 (as runtime/model.c accepts)
BITS_OF = {"bfloat16": np.uint16}


def numpy_dtype(name: str) -> np.dtype:
    if name in DTYPES:
        return np.dtype(DTYPES[name])
    if name in BITS_OF:
        return np.dtype(BITS_OF[name])
    raise RunError("the artifact uses the element type '%s', which this package does not know" % name)


def _aligned(nbytes: int, align: int = 64) -> np.ndarray:
    """A zeroed byte buffer whose data starts at a multiple of align."""
    align = max(64, align)
    raw = np.zeros(max(1, nbytes) + align, dtype=np.uint8)
    off = (-raw.ctypes.data) % align
    return raw[off:off + max(1, nbytes)]


def read_params(blob: bytes) -> Dict[str, Tuple[int, int]]:
    """The parameters file's entries: name -> (offset of the data in blob, byte length). The layout
    is docs/artifact.md's "The parameters file and its reader"; every length is checked."""
    if len(blob) < 16 or blob[:8] != b"TTHPARAM":
        raise RunError("the artifact's parameters file is not a TTHPARAM file")
    version, count = struct.unpack_from("<II", blob, 8)
    if version != 1:
        raise RunError("the artifact's parameters file has version %d; this package reads version 1" % version)
    pos = 16
    out: Dict[str, Tuple[int, int]] = {}

    def need(n: int) -> None:
        if pos + n > len(blob):
            raise RunError("the artifact's parameters file is truncated or malformed")

    for _ in range(count):
        need(4)
        (nlen,) = struct.unpack_from("<I", blob, pos)
        pos += 4
        need(nlen)
        name = blob[pos:pos + nlen].decode("utf-8")
        pos += nlen
        need(8)
        _dtype, rank = struct.unpack_from("<II", blob, pos)
        pos += 8
        need(8 * rank + 8)
        pos += 8 * rank
        (size,) = struct.unpack_from("<Q", blob, pos)
        pos += 8
        pos = (pos + 63) // 64 * 64
        need(size)
        out[name] = (pos, size)
        pos += size
    return out


class Runner:
    """A loaded model: its library, workspace and buffers. One run at a time (a lock)."""

    def __init__(self, meta: Dict[str, Any], files: Dict[str, bytes]) -> None:
        self.meta = meta
        self.lock = threading.Lock()
        so_name = (meta.get("files") or {}).get("shared_library")
        if not so_name or so_name not in files:
            raise RunError("the artifact has no host shared library, so it cannot run here",
                           "compile for a target this machine runs (e.g. 'llvm' or 'c'); its artifact then "
                           "holds lib/%s.so" % meta.get("model", "<model>"))
        self.name = str(meta["model"])
        self.inputs = [self._info(t) for t in meta.get("inputs", [])]
        self.outputs = [self._info(t) for t in meta.get("outputs", [])]
        mem = meta.get("memory") or {}
        self.workspace = _aligned(int(mem.get("workspace_bytes", 0)), int(mem.get("workspace_alignment", 16) or 16))
        self.in_bufs = [_aligned(t["bytes"]) for t in self.inputs]
        self.out_bufs = [_aligned(t["bytes"]) for t in self.outputs]
        self.in_ptrs = (ctypes.c_void_p * max(1, len(self.inputs)))(*[b.ctypes.data for b in self.in_bufs])
        self.out_ptrs = (ctypes.c_void_p * max(1, len(self.outputs)))(*[b.ctypes.data for b in self.out_bufs])
        self.lib = self._load(files[so_name])
        entry = (meta.get("executor") or {}).get("entry")
        try:
            self.entry = getattr(self.lib, entry)
        except (AttributeError, TypeError):
            raise RunError("the model's library has no entry symbol '%s'" % entry) from None
        self.entry.restype = ctypes.c_int32
        self.entry.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        self.texts = []
        for mod in meta.get("modules", []):
            sym = (mod.get("meta") or {}).get("status_text_symbol")
            if sym and hasattr(self.lib, sym):
                fn = getattr(self.lib, sym)
                fn.restype = ctypes.c_char_p
                fn.argtypes = [ctypes.c_int32]
                self.texts.append(fn)
        self.params_buf: Optional[np.ndarray] = None
        self._bind(files)
        self.prof_ns = self.prof_calls = None
        prof = meta.get("profile")
        if prof:
            n = len(prof.get("calls", []))
            try:
                self.prof_ns = (ctypes.c_uint64 * n).in_dll(self.lib, prof["ns_symbol"])
                self.prof_calls = (ctypes.c_uint64 * n).in_dll(self.lib, prof["calls_symbol"])
            except (ValueError, KeyError):
                raise RunError("the profiling artifact's library has no timing counters") from None

    @staticmethod
    def _info(t: Dict[str, Any]) -> Dict[str, Any]:
        shape = tuple(int(d) for d in t["shape"])
        dt = numpy_dtype(t["dtype"])
        return {"name": t["name"], "c_name": t.get("c_name", t["name"]), "dtype": t["dtype"], "np": dt,
                "shape": shape, "bytes": int(np.prod(shape, dtype=np.int64)) * dt.itemsize}

    @staticmethod
    def _load(so: bytes) -> ctypes.CDLL:
        d = tempfile.mkdtemp(prefix="tth-py-")
        path = os.path.join(d, "model.so")
        try:
            with open(path, "wb") as f:
                f.write(so)
            try:
                return ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
            except OSError as e:
                raise RunError("cannot load the model's shared library: %s" % e) from None
        finally:
            try:
                os.unlink(path)
            finally:
                os.rmdir(d)

    def _status_text(self, st: int) -> str:
        for fn in self.texts:
            t = fn(st)
            if t:
                return t.decode(errors="replace")
        return ""

    def _bind(self, files: Dict[str, bytes]) -> None:
        entries = None
        for i, mod in enumerate(self.meta.get("modules", [])):
            bc = (mod.get("meta") or {}).get("bind_constants")
            if not bc:
                continue
            if self.params_buf is None:
                pname = (self.meta.get("files") or {}).get("parameters")
                if not pname or pname not in files:
                    raise RunError("module %d (%s) needs constants but the artifact has no parameters file"
                                   % (i, mod.get("kind")))
                blob = files[pname]
                self.params_buf = _aligned(len(blob))
                self.params_buf[:] = np.frombuffer(blob, dtype=np.uint8)
                entries = read_params(blob)
            count = int(bc["count"])
            data = (ctypes.c_void_p * max(1, count))()
            sizes = (ctypes.c_size_t * max(1, count))()
            base = self.params_buf.ctypes.data
            for c in bc["constants"]:
                hit = entries.get(c["parameter"]) if entries else None
                if hit is None or hit[1] != int(c["bytes"]):
                    raise RunError("module %d (%s) needs parameter '%s' of %d bytes; the parameters file %s"
                                   % (i, mod.get("kind"), c["parameter"], c["bytes"],
                                      "has another size" if hit else "lacks it"))
                data[int(c["index"])] = base + hit[0]
                sizes[int(c["index"])] = hit[1]
            fn = getattr(self.lib, bc["symbol"])
            fn.restype = ctypes.c_int32
            fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
            st = fn(data, sizes, count)
            if st:
                text = self._status_text(st)
                raise RunError("binding the constants of module %d (%s) failed with status %d%s"
                               % (i, mod.get("kind"), st, ": " + text if text else ""))

    def check(self, arrays: Dict[str, Any]) -> List[np.ndarray]:
        """The inputs in metadata order, each checked against its dtype and shape."""
        names = [t["name"] for t in self.inputs]
        by_c = {t["c_name"]: t["name"] for t in self.inputs}
        given = {}
        for k, v in arrays.items():
            k2 = k if k in names else by_c.get(k)
            if k2 is None:
                raise RunError("model '%s' has no input '%s'" % (self.name, k),
                               "its inputs are %s" % ", ".join("'%s'" % n for n in names), k)
            given[k2] = v
        out = []
        for t in self.inputs:
            if t["name"] not in given:
                raise RunError("input '%s' of model '%s' is not given" % (t["name"], self.name),
                               "pass it as %s=array of %s%s" % (t["c_name"], t["dtype"], list(t["shape"])), t["name"])
            a = given[t["name"]]
            if not isinstance(a, np.ndarray):
                a = np.asarray(a)
            want = "%s%s" % (t["dtype"], list(t["shape"]))
            got = "%s%s" % (a.dtype.name if a.dtype != np.bool_ else "bool", list(a.shape))
            if a.dtype != t["np"]:
                raise RunError("input '%s' expects %s, given %s: the element type differs" % (t["name"], want, got),
                               "convert it, e.g. %s.astype(numpy.%s)" % (t["c_name"], t["np"].name), t["name"])
            if tuple(a.shape) != t["shape"] and not (len(t["shape"]) == 0 and a.size == 1):
                raise RunError("input '%s' expects %s, given %s: the shape differs" % (t["name"], want, got),
                               "reshape it to %s (a compile's input_shape= fixes the dimensions the model leaves "
                               "open)" % (list(t["shape"]),), t["name"])
            out.append(np.ascontiguousarray(a))
        return out

    def _call(self) -> None:
        st = self.entry(self.in_ptrs, self.out_ptrs, self.workspace.ctypes.data)
        if st:
            text = self._status_text(st)
            raise RunError("model '%s' returned status %d%s" % (self.name, st, ": " + text if text else ""))

    def run(self, arrays: Dict[str, Any], repeat: int = 1, profile: bool = False) -> Tuple[Dict[str, np.ndarray], List[float], Optional[List[Tuple[List[int], List[int]]]]]:
        inputs = self.check(arrays)
        times: List[float] = []
        prof: Optional[List[Tuple[List[int], List[int]]]] = [] if profile else None
        with self.lock:
            for buf, a in zip(self.in_bufs, inputs):
                buf[:] = a.reshape(-1).view(np.uint8)
            for _ in range(max(1, repeat)):
                if profile and self.prof_ns is not None:
                    ctypes.memset(self.prof_ns, 0, ctypes.sizeof(self.prof_ns))
                    ctypes.memset(self.prof_calls, 0, ctypes.sizeof(self.prof_calls))
                t0 = time.perf_counter()
                self._call()
                times.append((time.perf_counter() - t0) * 1e3)
                if prof is not None and self.prof_ns is not None:
                    prof.append((list(self.prof_ns), list(self.prof_calls)))
            outs = {t["name"]: buf.view(t["np"]).reshape(t["shape"]).copy()
                    for t, buf in zip(self.outputs, self.out_bufs)}
        return outs, times, prof
