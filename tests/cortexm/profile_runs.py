"""Per-call profiles from the emulated Cortex-M boards (docs/profiling.md, "Bare metal"): models
compiled with `tthctl compile --profile` for c, cmsis-nn,c and ethos-n,c on Cortex-M cores, run by
`scripts/run-cortexm --profile --json`. Used by run_models.py (the meson test cortexm-models).

Checks, for each artifact: one row per call of the entry (metadata.json "profile"); every row's
ONNX nodes are nodes of the model; every row's multiply-adds equal a count made here from the ONNX
graph's own shapes (onnx's shape inference), node by node; the calls' instructions add up to the
whole entry's within 5 %; the outputs are the expected ones; an offloaded ethos-n region is of
kind ethos-n and carries its module's NPU cycle estimate. Then the timing hooks' source as a
user's build meets it: for a core with the DWT cycle counter it compiles as it is (-Werror); for a
Cortex-M0+ it stops with an #error naming the macro to define, and compiles once it is defined.
And run-cortexm's refusals: --profile on an artifact compiled without it, --json without --profile.
"""
import json
import os
import subprocess

from artifact_main import RUN_CORTEXM, ROOT, compare, nn_reference, run_board, unpack

MAC_OPS = {  # ONNX operator -> (weight input for convolutions, or None for matrix products)
    "Conv": 1, "ConvInteger": 1, "QLinearConv": 3,
    "Gemm": None, "MatMul": None, "MatMulInteger": None, "QLinearMatMul": None,
}


def node_macs(model):
    """{node name: multiply-adds} of the convolutions and matrix products, from ONNX's shapes"""
    import numpy as np
    from onnx import shape_inference
    m = shape_inference.infer_shapes(model)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output)}
    inits = {t.name: list(t.dims) for t in m.graph.initializer}
    macs = {}
    for n in m.graph.node:
        if n.op_type not in MAC_OPS:
            continue
        out = int(np.prod(shapes[n.output[0]]))
        w = MAC_OPS[n.op_type]
        if w is not None:
            wd = inits[n.input[w]]
            macs[n.name] = out * int(np.prod(wd[1:]))
        else:
            a = shapes.get(n.input[0]) or inits[n.input[0]]
            macs[n.name] = out * a[-1]
    return macs


def check_profile(tag, model_path, meta, rep, failures):
    import onnx
    model = onnx.load(model_path)
    names = {n.name for n in model.graph.node}
    macs = node_macs(model)
    calls = meta["profile"]["calls"]
    rows = rep["calls"]
    if sorted(r["index"] for r in rows) != list(range(len(calls))) or len(calls) < 3:
        failures.append("%s: %d rows for the %d calls of the entry" % (tag, len(rows), len(calls)))
        return
    for r in rows:
        if not r["nodes"] or any(n not in names for n in r["nodes"]):
            failures.append("%s: call %s names nodes %s, not of the model" % (tag, r["function"], r["nodes"]))
        want = sum(macs.get(n, 0) for n in r["nodes"])
        if r["macs"] != want:
            failures.append("%s: call %s: %d MACs, its nodes %s have %d" % (tag, r["function"], r["macs"], r["nodes"], want))
        if not isinstance(r["instructions"], int) or r["instructions"] < 0:
            failures.append("%s: call %s: instructions %r" % (tag, r["function"], r["instructions"]))
    whole, parts = rep["whole_instructions"], rep["calls_instructions"]
    if not (whole > 0 and abs(parts - whole) <= 0.05 * whole):
        failures.append("%s: the calls add up to %d instructions of the entry's %d" % (tag, parts, whole))
    if sum(r["macs"] for r in rows) != sum(macs.values()):
        failures.append("%s: the calls' MACs add up to %d, the graph has %d"
                        % (tag, sum(r["macs"] for r in rows), sum(macs.values())))
    # offloaded NPU regions: their kind, and the module's own estimate beside them
    for mod in meta["modules"]:
        perf = mod.get("meta", {}).get("ethos-n", {}).get("performance")
        if not perf:
            continue
        for sym in mod["meta"]["entry_symbols"]:
            row = [r for r in rows if r["function"] == sym]
            if len(row) != 1 or row[0]["kind"] != "ethos-n" or row[0].get("npu_cycles_estimate") != perf["total_cycles"]:
                failures.append("%s: region %s: row %s, the module's estimate %d cycles"
                                % (tag, sym, row[0] if row else None, perf["total_cycles"]))
    return parts, whole


def hooks_build(daemon, work, failures, tar_m4):
    """the timing hooks' source in a user's build: DWT as it is; a Cortex-M0+ needs the macro"""
    d = os.path.join(work, "prof-dwt")
    meta = unpack(tar_m4, d)
    src = [s for s in meta["files"]["sources"] if s.endswith("_profile.c")]
    cc = ["arm-none-eabi-gcc", "-mthumb", "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-c"]
    if len(src) != 1:
        failures.append("profile: the artifact's sources %s hold no one _profile.c" % meta["files"]["sources"])
        return
    r = subprocess.run(cc + ["-mcpu=cortex-m4", os.path.join(d, src[0]), "-o", os.path.join(d, "p.o")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        failures.append("profile: the DWT hooks do not compile for the Cortex-M4: %s" % r.stderr.strip())
    d0 = os.path.join(work, "prof-m0")
    tar0 = os.path.join(work, "prof-m0.tar")
    why = daemon.compile(os.path.join(ROOT, "examples", "digits.onnx"), "c -mcpu=cortex-m0plus", tar0, "--profile")
    if why:
        failures.append("profile: compile for cortex-m0plus: %s" % why)
        return
    meta0 = unpack(tar0, d0)
    src0 = os.path.join(d0, [s for s in meta0["files"]["sources"] if s.endswith("_profile.c")][0])
    r = subprocess.run(cc + ["-mcpu=cortex-m0plus", src0, "-o", os.path.join(d0, "p.o")], capture_output=True, text=True)
    if r.returncode == 0 or "define TTH_DIGITS_PROFILE_CLOCK" not in r.stderr or "cortex-m0plus" not in r.stderr:
        failures.append("profile: the Cortex-M0+ hooks without a clock: exit %d, %s" % (r.returncode, r.stderr.strip()))
    r = subprocess.run(cc + ["-mcpu=cortex-m0plus", "-DTTH_DIGITS_PROFILE_CLOCK=my_timer", src0, "-o",
                             os.path.join(d0, "p.o")], capture_output=True, text=True)
    if r.returncode != 0:
        failures.append("profile: the Cortex-M0+ hooks with the application's clock: %s" % r.stderr.strip())
    if meta0["profile"].get("clock") != "application" or meta["profile"].get("clock") != "DWT_CYCCNT":
        failures.append("profile: clocks %r (m0plus) and %r (m4)" % (meta0["profile"].get("clock"),
                                                                  meta["profile"].get("clock")))


def profile_runs(daemon, work, int8_dir):
    """the jobs above; int8_dir holds tests/plugins/cmsisnn/int8_models.py's cases"""
    import numpy as np
    failures = []
    digits = os.path.join(ROOT, "examples", "digits.onnx")
    q = os.path.join(int8_dir, "qlinear_cnn")
    qx = {"x": np.load(os.path.join(q, "input_0.npy"))}
    qy = np.load(os.path.join(q, "expected_0.npy"))
    mve = nn_reference("-DTTH_NNREF_MVE")[1]
    cases = [  # tag, model, target, board, inputs, expected output, tolerance, extra run-cortexm arguments
        ("c m4", digits, "c -mcpu=cortex-m4", "mps2-an386", {"image": np.load(os.path.join(ROOT, "examples", "digit_input.npy"))},
         np.load(os.path.join(ROOT, "examples", "digit_expected.npy")), None, []),
        ("cmsis-nn,c m55", os.path.join(q, "model.onnx"), "cmsis-nn,c -mcpu=cortex-m55", "mps3-an547", qx, qy,
         2.0001 / 256, mve),
        ("ethos-n,c m55", os.path.join(q, "model.onnx"), "ethos-n,c -mcpu=cortex-m55", "mps3-an547", qx, qy,
         2.0001 / 256, []),
    ]
    tar_m4 = None
    for tag, model, target, board, inputs, expected, atol, extra in cases:
        d = os.path.join(work, "prof-" + tag.replace(",", "_").replace(" ", "_"))
        os.makedirs(d)
        tar = os.path.join(d, "model.tar")
        why = daemon.compile(model, target, tar, "--profile")
        if why:
            failures.append("profile %s: compile: %s" % (tag, why))
            continue
        tar_m4 = tar_m4 or tar
        js = os.path.join(d, "profile.json")
        why, outs, stdout = run_board(tar, board, inputs, os.path.join(d, "out"), list(extra) + ["--profile", "--json", js])
        if why:
            failures.append("profile %s: %s" % (tag, why))
            continue
        got = list(outs.values())[0]
        bad = compare(got, expected, "profile %s: the output" % tag, atol=atol)
        if bad:
            failures.append(bad)
        with open(js) as f:
            rep = json.load(f)["profile"]
        meta = unpack(tar, os.path.join(d, "art"))
        sums = check_profile("profile " + tag, model, meta, rep, failures)
        if "the whole entry" not in stdout or rep["calls"][0]["function"] not in stdout:
            failures.append("profile %s: no table in run-cortexm's output:\n%s" % (tag, stdout[-1500:]))
        if sums:
            print("profile %-16s %d calls, %d of %d instructions" % (tag, len(rep["calls"]), sums[0], sums[1]))
    if tar_m4:
        hooks_build(daemon, work, failures, tar_m4)
    # refusals: an ordinary artifact; --json alone
    plain = os.path.join(work, "prof-plain.tar")
    why = daemon.compile(digits, "c -mcpu=cortex-m4", plain)
    if not why:
        img = os.path.join(work, "prof-image.npy")
        np.save(img, np.load(os.path.join(ROOT, "examples", "digit_input.npy")))
        r = subprocess.run([RUN_CORTEXM, plain, "--board", "mps2-an386", "--out", os.path.join(work, "prof-plain"),
                            "--profile", "image=" + img], capture_output=True, text=True, timeout=120)
        if r.returncode != 1 or "not compiled for profiling" not in r.stderr or "--profile" not in r.stderr:
            failures.append("run-cortexm --profile of an ordinary artifact: exit %d, %s" % (r.returncode, r.stderr.strip()))
        r = subprocess.run([RUN_CORTEXM, plain, "--board", "mps2-an386", "--out", os.path.join(work, "prof-plain"),
                            "--json", "x.json", "image=" + img], capture_output=True, text=True, timeout=120)
        if r.returncode != 2 or "--profile" not in r.stderr:
            failures.append("run-cortexm --json without --profile: exit %d, %s" % (r.returncode, r.stderr.strip()))
    else:
        failures.append("profile: compile without --profile: %s" % why)
    return failures
