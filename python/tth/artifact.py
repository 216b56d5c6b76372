"""An artifact compiled by tthd: its files, metadata, inputs and outputs, running it on this
machine (tth._runtime) and its compile report as HTML for Jupyter."""
from __future__ import annotations

import html
import io
import json
import os
import statistics
import tarfile
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Tuple

import numpy as np

from .errors import RunError
from ._runtime import Runner, numpy_dtype


class TensorInfo(NamedTuple):
    """An input or output of the compiled model."""
    name: str
    dtype: str        # tth's name: "float32", "int64", "bfloat16" ...
    shape: Tuple[int, ...]
    c_name: str       # its field in include/tth_<model>.h

    @property
    def numpy_dtype(self) -> np.dtype:
        """The numpy dtype run() takes and gives (uint16 for bfloat16's bits)."""
        return numpy_dtype(self.dtype)


class Artifact:
    """A compiled model: the tar tthd answered with (``data``), the compile's answer (``result``:
    cache, key, timings, diagnostics, target) and what is in the tar."""

    def __init__(self, data: bytes, result: Optional[Dict[str, Any]] = None) -> None:
        self.data = bytes(data)
        self.result: Dict[str, Any] = dict(result or {})
        self._files: Dict[str, bytes] = {}
        try:
            with tarfile.open(fileobj=io.BytesIO(self.data), mode="r:") as tar:
                for m in tar.getmembers():
                    if m.isfile():
                        f = tar.extractfile(m)
                        name = m.name[2:] if m.name.startswith("./") else m.name
                        self._files[name] = f.read() if f else b""
        except tarfile.TarError as e:
            raise RunError("not an artifact tar: %s" % e) from None
        if "metadata.json" not in self._files:
            raise RunError("the artifact has no metadata.json")
        self.metadata: Dict[str, Any] = json.loads(self._files["metadata.json"])
        self._runner: Optional[Runner] = None

    @classmethod
    def load(cls, path: str) -> "Artifact":
        """An artifact saved earlier (or written by ``tthctl compile -o``)."""
        with open(path, "rb") as f:
            return cls(f.read())

    # ---- what it holds ----

    @property
    def name(self) -> str:
        return str(self.metadata.get("model", ""))

    @property
    def inputs(self) -> List[TensorInfo]:
        return [TensorInfo(t["name"], t["dtype"], tuple(t["shape"]), t.get("c_name", t["name"]))
                for t in self.metadata.get("inputs", [])]

    @property
    def outputs(self) -> List[TensorInfo]:
        return [TensorInfo(t["name"], t["dtype"], tuple(t["shape"]), t.get("c_name", t["name"]))
                for t in self.metadata.get("outputs", [])]

    @property
    def files(self) -> List[str]:
        """The paths inside the tar."""
        return sorted(self._files)

    def read(self, path: str) -> bytes:
        """One file of the tar (``"include/tth_digits.h"``, ``"explain/..."``)."""
        try:
            return self._files[path]
        except KeyError:
            raise KeyError("the artifact has no file '%s'; it has %s" % (path, ", ".join(self.files))) from None

    @property
    def cache(self) -> Optional[str]:
        """``"hit"`` or ``"miss"``: how the daemon answered."""
        return self.result.get("cache")

    def save(self, path: str) -> str:
        """Write the tar (what ``tthctl compile -o`` writes); returns the path."""
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(self.data)
        os.replace(tmp, path)
        return path

    def __repr__(self) -> str:
        ins = ", ".join("%s: %s%s" % (t.name, t.dtype, list(t.shape)) for t in self.inputs)
        outs = ", ".join("%s: %s%s" % (t.name, t.dtype, list(t.shape)) for t in self.outputs)
        return "<tth.Artifact %s (%s) inputs [%s] outputs [%s]>" % (self.name, self.metadata.get("target_string", ""),
                                                                  ins, outs)

    # ---- running ----

    def _loaded(self) -> Runner:
        if self._runner is None:
            self._runner = Runner(self.metadata, self._files)
        return self._runner

    def run(self, **arrays: Any) -> Dict[str, np.ndarray]:
        """Run once on this machine: inputs by name (ONNX or C name), numpy arrays of exactly the
        input's dtype and shape (checked first: a RunError names the input). Returns the outputs
        by name."""
        outs, _, _ = self._loaded().run(arrays)
        return outs

    def run_many(self, batches: Iterable[Mapping[str, Any]]) -> List[Dict[str, np.ndarray]]:
        """run() for each dict of inputs, in order."""
        return [self.run(**dict(b)) for b in batches]

    def benchmark(self, repeat: int = 100, warmup: int = 1, **arrays: Any) -> Dict[str, float]:
        """Time ``repeat`` runs (after ``warmup``) on the given inputs, or zeros when none are given.
        Returns milliseconds: ``min``, ``median``, ``mean``, and ``runs``."""
        if not arrays:
            arrays = {t.name: np.zeros(t.shape, t.numpy_dtype) for t in self.inputs}
        r = self._loaded()
        if warmup > 0:
            r.run(arrays, repeat=warmup)
        _, times, _ = r.run(arrays, repeat=max(1, repeat))
        return {"runs": float(len(times)), "min": min(times), "median": statistics.median(times),
                "mean": sum(times) / len(times)}

    def profile(self, repeat: int = 20, **arrays: Any) -> List[Dict[str, Any]]:
        """Time each call of the model's entry (an artifact compiled with ``profile=True``,
        docs/profiling.md): one warm-up run, then ``repeat`` runs; one row per call, sorted by
        median time, with the metadata's row (function, op, strategies, nodes, macs...) and
        ``median_us``, ``min_us``, ``share`` and ``gflops`` added, as ``tthctl run --profile --json``."""
        prof = self.metadata.get("profile")
        if not prof:
            raise RunError("the artifact '%s' was compiled without profiling" % self.name,
                           "compile it with tth.compile(..., profile=True) (a target this machine runs)")
        if not arrays:
            arrays = {t.name: np.zeros(t.shape, t.numpy_dtype) for t in self.inputs}
        r = self._loaded()
        r.run(arrays)
        _, _, samples = r.run(arrays, repeat=max(1, repeat), profile=True)
        calls = prof.get("calls", [])
        rows = []
        for k, call in enumerate(calls):
            per = [ns[k] / 1e3 for ns, _ in samples or []]
            row = dict(call)
            row["median_us"] = statistics.median(per) if per else 0.0
            row["min_us"] = min(per) if per else 0.0
            rows.append(row)
        total = sum(r_["median_us"] for r_ in rows) or 1.0
        for row in rows:
            row["share"] = row["median_us"] / total
            macs = float(row.get("macs", 0) or 0)
            row["gflops"] = 2 * macs / (row["median_us"] * 1e3) if row["median_us"] > 0 else 0.0
        rows.sort(key=lambda x: -x["median_us"])
        return rows

    # ---- the report ----

    def report(self) -> Dict[str, Any]:
        """The compile report's parts: partition, memory plan and per-layer rows."""
        meta = self.metadata
        part = meta.get("partition") or {}
        mem = meta.get("memory") or {}
        local = {o.get("function"): o for o in mem.get("operators", [])}
        layers = []
        for i, op in enumerate(part.get("ops", [])):
            layers.append({"index": i, "node": op.get("node"), "op": op.get("op"), "kind": op.get("kind"),
                           "function": op.get("function"),
                           "local_bytes": (local.get(op.get("function")) or {}).get("local_bytes")})
        return {"partition": part, "memory": mem, "layers": layers, "functions": mem.get("operators", []),
                "timings": self.result.get("timings", {})}

    def _repr_html_(self) -> str:
        return report_html(self)


def _esc(v: Any) -> str:
    return html.escape("" if v is None else str(v))


def _size(n: Any) -> str:
    n = float(n or 0)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return ("%.0f %s" if unit == "bytes" else "%.1f %s") % (n, unit)
        n /= 1024
    return "%g" % n


def _table(cls: str, head: Optional[List[str]], rows: List[List[Any]]) -> str:
    """A table; with head None its rows' first cells are the row headers."""
    out = ['<table class="%s">' % cls]
    if head:
        out.append("<thead><tr>" + "".join("<th>%s</th>" % _esc(h) for h in head) + "</tr></thead>")
    out.append("<tbody>")
    if head is None:
        for r in rows:
            out.append("<tr><th>%s</th>" % _esc(r[0]) + "".join("<td>%s</td>" % _esc(c) for c in r[1:]) + "</tr>")
        out.append("</tbody></table>")
        return "".join(out)
    for r in rows:
        out.append("<tr>" + "".join("<td>%s</td>" % _esc(c) for c in r) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def report_html(a: Artifact) -> str:
    """The compile report as one self-contained HTML fragment (no script, no outside resource)."""
    rep = a.report()
    part, mem = rep["partition"], rep["memory"]
    plan = mem.get("plan") or {}
    meta = a.metadata
    res = a.result
    parts = ['<div class="tth-report" style="font-family:sans-serif;font-size:13px">',
             "<style>.tth-report table{border-collapse:collapse;margin:4px 0 10px 0}"
             ".tth-report th,.tth-report td{border:1px solid #ccc;padding:2px 6px;text-align:left}"
             ".tth-report th{background:#eee}.tth-report h4{margin:8px 0 2px 0}</style>"]
    parts.append("<h3>tth artifact <code>%s</code></h3>" % _esc(a.name))
    summary = [["target", meta.get("target_string", "")],
               ["inputs", "; ".join("%s: %s%s" % (t.name, t.dtype, list(t.shape)) for t in a.inputs)],
               ["outputs", "; ".join("%s: %s%s" % (t.name, t.dtype, list(t.shape)) for t in a.outputs)],
               ["artifact", "%s, %d files" % (_size(len(a.data)), len(a.files))]]
    if res:
        summary.append(["cache", "%s (key %s)" % (res.get("cache", ""), res.get("key", ""))])
        t = res.get("timings") or {}
        if "total" in t:
            summary.append(["compile time", "%.3f s" % float(t["total"])])
    parts.append(_table("tth-summary", None, summary))
    # partition
    parts.append("<h4>Partition</h4>")
    regions = part.get("regions") or []
    parts.append("<p>kinds: %s; fallback: %s; %d regions offloaded; %d refusals</p>"
                 % (_esc(", ".join(part.get("kinds", []))), _esc(part.get("fallback", "")), len(regions),
                    len(part.get("refusals") or [])))
    if regions:
        parts.append(_table("tth-regions", ["region", "kind", "nodes"],
                            [[r.get("name", r.get("function", i)), r.get("kind"),
                              ", ".join(map(str, r.get("nodes", [])))] for i, r in enumerate(regions)]))
    if part.get("refusals"):
        parts.append(_table("tth-refusals", ["node", "op", "kind", "reason"],
                            [[r.get("node"), r.get("op"), r.get("kind"), r.get("reason")] for r in part["refusals"]]))
    # memory plan
    parts.append("<h4>Memory plan</h4>")
    parts.append(_table("tth-memory", ["workspace", "constants", "inputs and outputs", "algorithm",
                                       "lower bound", "buffers"],
                        [[_size(mem.get("workspace_bytes")), _size(mem.get("constants_bytes")),
                          _size(mem.get("io_bytes")), plan.get("algorithm", ""),
                          _size(plan.get("lower_bound_bytes")), plan.get("buffers", "")]]))
    # per layer
    parts.append("<h4>Layers</h4>")
    parts.append(_table("tth-layers", ["#", "ONNX node", "operator", "kind"],
                        [[l["index"], l["node"], l["op"], l["kind"]] for l in rep["layers"]]))
    parts.append("<h4>Functions</h4>")
    parts.append(_table("tth-functions", ["function", "operator", "local memory"],
                        [[o.get("function"), o.get("op"), _size(o.get("local_bytes"))] for o in rep["functions"]]))
    stages = (res.get("timings") or {}).get("stages") or []
    if stages:
        parts.append("<h4>Compile stages</h4>")
        parts.append(_table("tth-stages", ["stage", "seconds"],
                            [[s.get("stage"), "%.4f" % float(s.get("seconds", 0))] for s in stages]))
    parts.append("</div>")
    return "".join(parts)
