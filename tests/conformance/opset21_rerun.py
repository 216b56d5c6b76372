#!/usr/bin/python3
"""The ONNX test data again at opset 21 (issue "every model as it comes"; docs/operators.md,
"Opsets"): every libonnx-testdata case whose operators mean the same at opset 21 as at the
model's own opset gets its default-domain opset raised to 21 (and its IR version to 10, which
opset 21 comes with), and tth-conformance compiles and runs it against the case's own expected
outputs. The same numbers must come out: an importer that accepts opset 21 but reads an
operator by another version's definition fails here. The same cases also run at their own
opsets: one that passes there must pass at 21, and one refused at 21 must be refused there too.

An operator means the same when the version of its definition in effect at the model's opset is
the one in effect at opset 17 (onnx.defs of Debian's python3-onnx 1.12 knows up to 17), and it is
not among those whose interface changed after 17 (AFTER_17 below, from the ONNX changelog):
the Reduce operators but ReduceSum take their axes as an input from 18 (an attribute before),
DFT its axis as an input from 20, GridSample renames its modes at 20 ('bilinear' -> 'linear',
'bicubic' -> 'cubic'), GroupNormalization's scale and bias are per channel from 21 (per group
before). Versions that only add inputs or attributes whose defaults keep the old meaning (Pad's
axes, Resize's antialias, Split's num_outputs, the pools' dilations, the scatters' max and min
reductions) or add element types (float8, int4, bool) keep a case in.

    tests/conformance/opset21_rerun.py --conformance build/tests/conformance/tth-conformance \\
        [--stride N] [--known FILE] [--jobs N] [--time-budget S] DIR...

--stride N takes every Nth eligible case (the test suite's bounded run); the full run leaves it
at 1. Exit status: 0 when no case failed (but known ones) and none is worse at 21 than at its own
opset; 1 otherwise, or when fewer than 100 cases were eligible (the filter would be wrong); 77
(skipped) without onnx.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import onnx
    from onnx import defs
except ImportError:
    sys.exit(77)

TARGET_OPSET = 21
AFTER_17 = {
    "ReduceL1": 18, "ReduceL2": 18, "ReduceLogSum": 18, "ReduceLogSumExp": 18, "ReduceMax": 18,
    "ReduceMean": 18, "ReduceMin": 18, "ReduceProd": 18, "ReduceSumSquare": 18,
    "DFT": 20, "GridSample": 20, "GroupNormalization": 21,
}


def default_opset(model):
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o.version
    return None


def ops_of(graph):
    """(domain, op_type) of every node, subgraphs (If, Loop, Scan bodies) included"""
    for n in graph.node:
        yield n.domain, n.op_type
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from ops_of(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    yield from ops_of(g)


def why_not(model):
    """None when the case means the same at opset 21, else why not"""
    v = default_opset(model)
    if v is None:
        return "no default-domain opset"
    if v > 17:
        return "opset %d already" % v
    for domain, op in set(ops_of(model.graph)):
        if domain not in ("", "ai.onnx"):
            continue
        if op in AFTER_17:
            return "%s changes at opset %d" % (op, AFTER_17[op])
        try:
            here = defs.get_schema(op, v, "").since_version
            last = defs.get_schema(op, 17, "").since_version
        except Exception:  # onnx.defs raises its own SchemaError
            return "%s has no definition at opset %d" % (op, v)
        if here != last:
            return "%s changes at opset %d" % (op, last)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--conformance", required=True)
    ap.add_argument("--known")
    ap.add_argument("--stride", type=int, default=1)
    ap.add_argument("--jobs", default="2")
    ap.add_argument("--time-budget")
    ap.add_argument("dirs", nargs="+")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="tth-opset21-")
    try:
        eligible, skipped, reasons = 0, 0, {}
        folders = []
        for d in args.dirs:
            if not os.path.isdir(d):
                continue
            folder = os.path.join(root, os.path.basename(os.path.normpath(d)))
            os.makedirs(folder, exist_ok=True)
            folders.append(folder)
            for case in sorted(os.listdir(d)):
                src = os.path.join(d, case)
                path = os.path.join(src, "model.onnx")
                if not os.path.isfile(path):
                    continue
                try:
                    model = onnx.load(path)
                except Exception as e:  # a file onnx 1.12 cannot read is no case here
                    reasons.setdefault("unreadable by onnx %s" % onnx.__version__, []).append(case)
                    skipped += 1
                    continue
                why = why_not(model)
                if why:
                    reasons.setdefault(why.split(" changes")[0] if " changes" in why else why, []).append(case)
                    skipped += 1
                    continue
                eligible += 1
                if (eligible - 1) % args.stride:
                    continue
                for o in model.opset_import:
                    if o.domain in ("", "ai.onnx"):
                        o.version = TARGET_OPSET
                model.ir_version = max(model.ir_version, 10)
                dst = os.path.join(folder, case)
                os.makedirs(dst)
                onnx.save(model, os.path.join(dst, "model.onnx"))
                for entry in os.listdir(src):
                    if entry.startswith("test_data_set"):
                        os.symlink(os.path.join(src, entry), os.path.join(dst, entry))
        print("opset %d re-run: %d cases mean the same at opset %d (every %d%s run), %d skipped"
              % (TARGET_OPSET, eligible, TARGET_OPSET, args.stride, "th" if args.stride > 1 else "", skipped))
        for why, cases in sorted(reasons.items(), key=lambda kv: -len(kv[1]))[:12]:
            print("  skipped, %s: %d (%s%s)" % (why, len(cases), ", ".join(cases[:3]), ", ..." if len(cases) > 3 else ""))
        sys.stdout.flush()
        if eligible < 100:
            print("only %d eligible cases: the filter is wrong" % eligible)
            return 1
        cmd = [args.conformance, "--jobs", args.jobs, "--verbose"]
        if args.known:
            cmd += ["--known", args.known]
        if args.time_budget:
            cmd += ["--time-budget", args.time_budget]
        raised = subprocess.run(cmd + folders, capture_output=True, text=True)
        print(raised.stdout)
        # the same cases at their own opsets: a case they pass must pass at 21, and one tth
        # refuses at 21 must be refused at its own opset too (not a version the importer lacks)
        orig_folders = []
        for folder in folders:
            src_dir = next(d for d in args.dirs if os.path.basename(os.path.normpath(d)) == os.path.basename(folder))
            of = os.path.join(root, "orig", os.path.basename(folder))
            os.makedirs(of)
            orig_folders.append(of)
            for case in os.listdir(folder):
                os.symlink(os.path.join(src_dir, case), os.path.join(of, case))
        orig = subprocess.run(cmd + orig_folders, capture_output=True, text=True)
        status = lambda out: {line.split()[1].rstrip(":"): line.split()[0] for line in out.splitlines()
                              if line.split()[:1] and line.split()[0] in ("pass", "FAIL", "known-fail", "unsupported")}
        a, b = status(orig.stdout), status(raised.stdout)
        worse = sorted(c for c in a if a[c] == "pass" and b.get(c) != "pass")
        refused = sorted(c for c in b if b[c] == "unsupported" and a.get(c) != "unsupported")
        for c in worse:
            print("at opset 21 no longer passes: %s (%s)" % (c, b.get(c, "not run")))
        for c in refused:
            print("refused at opset 21 only: %s" % c)
        print("at their own opsets: %d pass; at opset 21: %d pass, %d worse, %d refused only at 21"
              % (sum(v == "pass" for v in a.values()), sum(v == "pass" for v in b.values()), len(worse), len(refused)))
        if len(a) != len(b) or not a:
            print("the two runs took %d and %d cases" % (len(a), len(b)))
            return 1
        return 1 if worse or refused or raised.returncode else 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
