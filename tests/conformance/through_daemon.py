#!/usr/bin/python3
"""Conformance through the daemon: every libonnx-testdata model compiled by a running tthd.

For each test case folder (model.onnx + test_data_set_0/{input,output}_*.pb) this drives the
product the way a user does:

    tthctl compile model.onnx --target c --shared -o case.tar     (tthd, its workers, its cache)
    tthctl run case.tar --input NAME=input_i.pb ... --output-dir D  (the runtime)

and compares each written <output>.npy (<output>.pb for bfloat16) with the shipped output_i.pb.
Tolerance (the same as tth-conformance): float32 |a-b| <= 1e-4 + 1e-4*|b|, float16 and bfloat16
1e-2 + 1e-2*|b|, float64 1e-7 + 1e-7*|b|; integers and bools exactly; NaN matches NaN.

A model input that tth needs as a constant (a shape or size fed as a graph input; the compile
answers "input 'x' is not a constant") is fixed at compile time with the test's own value
(`tthctl compile --bind NAME=input_i.pb`: the input named, when it is a graph input, else the
integer and boolean inputs, else the scalar ones), as tth-conformance does in process; such
cases are counted apart.

Counts: passed (and of them, passed with inputs bound at compile time), failed (wrong numbers,
a crash, or any error that is not EUNSUPPORTED), unsupported (a clean EUNSUPPORTED diagnostic).
Exit status 1 when anything failed; a case listed with --known counts as a known failure
instead, as in tth-conformance.

    tests/conformance/through_daemon.py --tthctl build/client/tthctl [--jobs 2]
        [--stride N] [--limit N] [--known tests/conformance/known_failures.txt] DIR...

Every DIR is a folder of test case folders (e.g. /usr/share/libonnx-testdata/data/node).
"""
import argparse
import concurrent.futures
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from private_tthd import run_with_daemon  # noqa: E402
from artifact_main import load_pb  # noqa: E402

TOL = {np.float32: (1e-4, 1e-4), np.float16: (1e-2, 1e-2), np.float64: (1e-7, 1e-7)}


def bf16_bits(path):
    """A bfloat16 TensorProto's bits as uint16 (raw_data, or int32_data holding them)."""
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    bits = np.frombuffer(t.raw_data, "<u2") if t.raw_data else np.array(t.int32_data, np.uint16)
    return bits.reshape(tuple(t.dims))


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def close_enough(got, want, tol=None):
    if got.shape != want.shape:
        return f"shape {list(got.shape)}, expected {list(want.shape)}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, expected {want.dtype}"
    if tol or want.dtype.type in TOL:
        atol, rtol = tol or TOL[want.dtype.type]
        g, w = got.astype(np.float64), want.astype(np.float64)
        both_nan = np.isnan(g) & np.isnan(w)
        ok = both_nan | (g == w) | (np.abs(g - w) <= atol + rtol * np.abs(w))
        if not ok.all():
            i = int(np.argmax(~ok.reshape(-1)))
            return f"element {i}: {g.reshape(-1)[i]!r}, expected {w.reshape(-1)[i]!r}"
        return None
    if not np.array_equal(got, want):
        i = int(np.argmax((got != want).reshape(-1)))
        return f"element {i}: {got.reshape(-1)[i]!r}, expected {want.reshape(-1)[i]!r}"
    return None


def misshapen_as_zeros(tensor_type, path, work, name):
    """ONNX's test data gives CastLike's `like` (read for its element type only) another shape than
    the model declares: bind zeros of the declared shape instead (the outputs are still compared).
    Returns the file to bind."""
    dims = [d.dim_value for d in tensor_type.shape.dim] if tensor_type.HasField("shape") else None
    value = load_pb(path)
    if dims is None or any(d.dim_param or not d.HasField("dim_value") for d in tensor_type.shape.dim) or \
            list(value.shape) == dims:
        return path
    zeros = os.path.join(work, f"zeros_{len(os.listdir(work))}.npy")
    # a bfloat16 input takes uint16 bits (docs/tthctl.md, "run")
    np.save(zeros, np.zeros(dims, np.uint16 if tensor_type.elem_type == onnx.TensorProto.BFLOAT16 else value.dtype))
    return zeros


def run(cmd, cwd):
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)


def one_case(case, args):
    """Returns (status, detail): status is 'passed', 'bound' (passed with inputs bound at compile
    time; detail names them), 'failed' or 'unsupported'."""
    data = os.path.join(case, "test_data_set_0")
    model = onnx.load(os.path.join(case, "model.onnx"))
    inits = {i.name for i in model.graph.initializer}
    inputs = [i.name for i in model.graph.input if i.name not in inits]
    outputs = [o.name for o in model.graph.output]
    in_files = sorted(glob.glob(os.path.join(data, "input_*.pb")), key=lambda p: int(re.findall(r"\d+", os.path.basename(p))[0]))
    out_files = sorted(glob.glob(os.path.join(data, "output_*.pb")), key=lambda p: int(re.findall(r"\d+", os.path.basename(p))[0]))
    if len(in_files) != len(inputs) or len(out_files) != len(outputs):
        return "unsupported", "test data does not match the graph's inputs/outputs"
    values = dict(zip(inputs, in_files))
    work = tempfile.mkdtemp(prefix="tth-conf-", dir=args.tmp)
    try:
        model_path = os.path.join(case, "model.onnx")
        bound = []
        int_inputs = [i.name for i in model.graph.input if i.name not in inits and
                      i.type.tensor_type.elem_type in (onnx.TensorProto.INT64, onnx.TensorProto.INT32,
                                                       onnx.TensorProto.BOOL)]
        scalar_inputs = [i.name for i in model.graph.input if i.name not in inits and
                         i.type.tensor_type.HasField("shape") and len(i.type.tensor_type.shape.dim) == 0]
        for _attempt in range(8):
            tar = os.path.join(work, "case.tar")
            binds = []
            for name in bound:
                binds += ["--bind", f"{name}={values[name]}"]
            c = run([args.tthctl, "--socket", args.socket, "--no-start", "-q", "compile", model_path,
                     "--target", "c", "--shared", "--name", "model", "--json", "-o", tar] + binds, work)
            if c.returncode == 0:
                break
            try:
                err = json.loads(c.stdout)["error"]
            except (ValueError, KeyError):
                return "failed", f"compile exit {c.returncode}: {c.stderr.strip()[-300:]}"
            code = err.get("data", {}).get("tthCode", "")
            # an input that must be a constant: fix it at compile time with its test value
            # (tthctl compile --bind), the one named when it is a graph input, else the integer ones
            m = re.search(r"input '([^']+)' is not a constant", err.get("message", ""))
            if m:
                more = [m.group(1)] if m.group(1) in values and m.group(1) not in bound else \
                    [n for n in int_inputs if n not in bound] or [n for n in scalar_inputs if n not in bound]
                if more:
                    bound += more
                    continue
            if code == "EUNSUPPORTED":
                return "unsupported", err.get("message", "")
            return "failed", f"compile: {err.get('message', '')}"
        else:
            return "failed", "compile: too many non-constant inputs"
        cmd = [args.tthctl, "-q", "run", tar, "--output-dir", work, "--json"]
        declared = {i.name: i.type.tensor_type for i in model.graph.input}
        for name in inputs:
            if name not in bound:
                cmd += ["--input", f"{name}={misshapen_as_zeros(declared[name], values[name], work, name)}"]
        r = run(cmd, work)
        if r.returncode != 0:
            return "failed", f"run exit {r.returncode}: {(r.stderr or r.stdout).strip()[-300:]}"
        for name, path in zip(outputs, out_files):
            npy = os.path.join(work, f"{name}.npy")
            if not os.path.exists(npy):
                # the runtime writes files named after C-safe output names when the ONNX name isn't
                # one, and a bfloat16 output as a .pb
                written = json.loads(r.stdout)["outputs"]
                npy = next((o["file"] for o in written if o["name"] == name), npy)
            if npy.endswith(".pb"):
                # bfloat16: ONNX's test data stores it as uint16 bits (NumPy has no bfloat16), and
                # its reference truncates where tth rounds to nearest even: within 1e-2
                want = load_pb(path)
                why = close_enough(bf16_to_f32(bf16_bits(npy)),
                                   bf16_to_f32(want) if want.dtype == np.uint16 else want, (1e-2, 1e-2))
            else:
                why = close_enough(np.load(npy), load_pb(path))
            if why:
                return "failed", f"output '{name}': {why}"
        return ("bound" if bound else "passed"), ",".join(bound)
    except subprocess.TimeoutExpired as e:
        return "failed", f"timed out: {' '.join(e.cmd[:3])}"
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tthctl", required=True)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--stride", type=int, default=1, help="take every Nth case (bounded runs)")
    ap.add_argument("--limit", type=int, default=0, help="at most N cases")
    ap.add_argument("--known", help="known failures: '<folder>/<case>' per line, # comments "
                    "(tests/conformance/known_failures.txt); they do not fail the run")
    ap.add_argument("dirs", nargs="+")
    args = ap.parse_args()
    args.tthctl = os.path.abspath(args.tthctl)
    cases = sorted(c for d in args.dirs for c in glob.glob(os.path.join(d, "*"))
                   if os.path.exists(os.path.join(c, "model.onnx")) and os.path.isdir(os.path.join(c, "test_data_set_0")))
    cases = cases[::args.stride]
    if args.limit:
        cases = cases[:args.limit]
    known = set()
    if args.known:
        with open(args.known) as f:
            known = {ln.strip() for ln in f if ln.strip() and not ln.startswith("#")}

    def body(daemon, work, failures):
        args.tmp, args.socket = work, daemon.socket
        counts = {"passed": 0, "bound": 0, "failed": 0, "unsupported": 0, "known": 0}
        fixed = []
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            for case, (status, detail) in zip(cases, pool.map(lambda c: one_case(c, args), cases)):
                name = f"{os.path.basename(os.path.dirname(case))}/{os.path.basename(case)}"
                if name in known:
                    if status == "failed":
                        status = "known"
                    elif status in ("passed", "bound"):
                        fixed.append(name)
                counts[status] += 1
                if status == "failed":
                    failures.append(f"{name}: {detail}")
        print(f"through the daemon: {len(cases)} cases")
        print(f"{counts['passed'] + counts['bound']} passed ({counts['bound']} of them with inputs bound at compile "
              f"time), {counts['failed']} failed, {counts['unsupported']} unsupported, {counts['known']} known failures"
              + (f" (passing again, take them off the list: {', '.join(fixed)})" if fixed else ""))

    # a sanitizer report in tthd makes its stop unclean: a failure (its log's end is shown)
    return run_with_daemon(args.tthctl, "tth-conf-daemon-", body, "through the daemon")


if __name__ == "__main__":
    sys.exit(main())
