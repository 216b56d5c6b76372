#!/usr/bin/python3
"""Int8 versions of the float bench models (bench/models/make_models.py, make_zoo.py), so that
bench/vs_ort/run.py times tth against ONNX Runtime on quantized graphs, in the two forms exporters
write: QDQ (DequantizeLinear -> float op -> QuantizeLinear, as ONNX Runtime's static quantizer
writes it) and QLinear operators (QLinearConv, QLinearMatMul).

    make_qdq_models.py --models-dir build-bench/bench/models --out build-bench/bench/models-int8
        [--models resnet18,mobilenet_v2,bert_enc] [--ort-dir DIR]

reads MODELS_DIR/<name>.onnx and writes OUT/<name>_{qdq,qlinear}[_u8].onnx and one
OUT/manifest.tsv (name, ONNX nodes, parameters: the weights and biases, not the scales and zero
points), which run.py reads with --models-dir OUT.

The quantization (the same in both forms):
  - batch normalization right after a convolution is folded into it first (as ONNX Runtime's
    quantization pre-processing does);
  - activations per tensor, in two variants: int8 symmetric (zero point 0, scale max|v| / 127
    over the calibration runs; <name>_qdq, <name>_qlinear) and uint8 asymmetric over the range
    widened to hold 0 (scale (max - min) / 255, ONNX Runtime's quantizer's default;
    <name>_qdq_u8, <name>_qlinear_u8);
  - weights of Conv, MatMul and Gemm (constant ones only) int8, symmetric, per output channel
    (Conv: axis 0 of OIHW; MatMul: the weight's columns; Gemm: the same, respecting transB; alpha
    folded into the weight, beta into C); biases (Conv's, Gemm's C) and the constant operands of
    Add and Mul stay float; scales float32;
  - quantized: Conv, MatMul, Gemm (the activation input and the output; a Relu or Clip right
    after a Conv, MatMul or Gemm stays, the output quantized after it with its range), Add, Mul,
    MaxPool, AveragePool, GlobalAveragePool, Concat, Flatten, Reshape (their float activation
    inputs and the output). Every quantized tensor has one QuantizeLinear and a
    DequantizeLinear per consumer (ONNX Runtime folds a DequantizeLinear into an int8 operator
    only when nothing else reads it). Everything else (Softmax,
    LayerNormalization, Erf, Transpose, a MatMul of two activations, ...) stays float, reading
    the DequantizeLinear of a quantized input. The graph's inputs and outputs stay float32.
  - QDQ form: Conv / MatMul / Gemm read DequantizeLinear(QuantizeLinear(x)) and
    DequantizeLinear(int8 weight, per-axis scale).
  - QLinear form: Conv becomes QLinearConv (bias int32, scale x_scale * w_scale per channel, zero
    point 0; with a Relu or Clip after it, its output scale is the Relu's and a DequantizeLinear ->
    Relu -> QuantizeLinear follows, exact with zero point 0); a MatMul or Gemm with a constant
    weight becomes QLinearMatMul (weight [K, N], per-column scale), then for Gemm's C a
    DequantizeLinear and a float Add (the product before the bias has a range of its own,
    computed from the calibration runs). Standard ONNX domain only. Opset: the model's, at least
    13 (per-axis DequantizeLinear).

Calibration: the float model (batch norm folded) with every tensor that gets a range made a graph
output, run with ONNX Runtime (bench/ort/ort_time.js --runs 20 --warmup 0 --output-dir) on 4
fixed-seed inputs (float: uniform [-1, 1) as ort_time.js fills them; integer inputs: token ids
below the embedding size, masks of ones); ranges are min/max over the 4 runs.

Check: the float model and both quantized ones run with ONNX Runtime on a fifth fixed-seed input;
printed per model: whether the argmax of the first output is the same (and, for an output of
several rows, the share of rows whose argmax along the last axis is the same), the largest
|quantized - float| over the largest |float| output, and ORT's median latency of each (one
thread, 20 runs). Needs ONNX Runtime for node (bench/ort/setup), numpy and onnx.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "common"))
import tth_bench  # noqa: E402

WEIGHTED = ("Conv", "MatMul", "Gemm")
# ops quantized on their float activation inputs (None: all of them, else these positions) and output
PLAIN = {"Add": None, "Mul": None, "Concat": None, "MaxPool": (0,), "AveragePool": (0,),
         "GlobalAveragePool": (0,), "Flatten": (0,), "Reshape": (0,)}
FUSED_ACT = ("Relu", "Clip")
CALIB_SEEDS = (101, 102, 103, 104)
CHECK_SEED = 205


class Error(Exception):
    pass


# ---- ONNX Runtime through bench/ort/ort_time.js (tth_bench.ort_time) -------------------------

def ort_run(ort_dir, model, inputs, out_dir):
    """run once with ORT, one thread (20 timed runs, no warm-up): the JSON ort_time.js prints,
    outputs in out_dir"""
    try:
        return tth_bench.ort_time(ort_dir, model, 1, inputs, runs=20, warmup=0, output_dir=out_dir)
    except tth_bench.BenchError as e:
        raise Error(str(e))


def check_ort(ort_dir):
    if shutil.which("node") is None:
        sys.exit("make_qdq_models.py: 'node' is not installed; install it (apt-get install nodejs npm), "
                 "then ONNX Runtime with bench/ort/setup")
    mod = os.path.join(os.path.abspath(ort_dir), "node_modules", "onnxruntime-node")
    r = subprocess.run(["node", "-e", "require(%s)" % json.dumps(mod)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit("make_qdq_models.py: ONNX Runtime (onnxruntime-node) is not installed in %s:\n"
                 "  run bench/ort/setup%s first" % (ort_dir, "" if ort_dir == default_ort_dir() else " " + ort_dir))


def default_ort_dir():
    return os.environ.get("TTH_ORT_DIR") or os.path.join(ROOT, "build-bench", "ort")


# ---- the float graph ------------------------------------------------------------------------------

def constants(g):
    """{name: numpy array} of the initializers and the outputs of Constant nodes"""
    out = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    for n in g.node:
        if n.op_type == "Constant" and len(n.attribute) == 1 and n.attribute[0].name == "value":
            out[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    return out


def consumers(g):
    use = {}
    for i, n in enumerate(g.node):
        for x in n.input:
            if x:
                use.setdefault(x, []).append(i)
    return use


def fold_batch_norm(m):
    """Conv -> BatchNormalization (the Conv's only consumer) folded into the Conv; returns the count"""
    g = m.graph
    consts = constants(g)
    inits = {t.name: t for t in g.initializer}
    use = consumers(g)
    outputs = {o.name for o in g.output}
    producer = {o: n for n in g.node for o in n.output}
    drop, folded = set(), 0
    for n in g.node:
        if n.op_type != "BatchNormalization" or len(n.output) != 1:
            continue
        conv = producer.get(n.input[0])
        if (conv is None or conv.op_type != "Conv" or len(use.get(conv.output[0], [])) != 1
                or conv.output[0] in outputs or conv.input[1] not in inits
                or len(use.get(conv.input[1], [])) != 1
                or any(x not in consts for x in n.input[1:5])):
            continue
        eps = next((a.f for a in n.attribute if a.name == "epsilon"), 1e-5)
        gamma, beta, mean, var = (consts[x].astype(np.float64) for x in n.input[1:5])
        w = numpy_helper.to_array(inits[conv.input[1]]).astype(np.float64)
        b = (numpy_helper.to_array(inits[conv.input[2]]).astype(np.float64)
             if len(conv.input) > 2 and conv.input[2] else np.zeros(w.shape[0]))
        s = gamma / np.sqrt(var + eps)
        inits[conv.input[1]].CopyFrom(numpy_helper.from_array(
            (w * s.reshape(-1, *([1] * (w.ndim - 1)))).astype(np.float32), conv.input[1]))
        bname = conv.output[0] + "_folded_bias"
        g.initializer.append(numpy_helper.from_array(((b - mean) * s + beta).astype(np.float32), bname))
        if len(conv.input) > 2:
            conv.input[2] = bname
        else:
            conv.input.append(bname)
        conv.output[0] = n.output[0]
        drop.add(id(n))
        folded += 1
    keep = [n for n in g.node if id(n) not in drop]
    del g.node[:]
    g.node.extend(keep)
    remove_unused(g)
    return folded


def remove_unused(g):
    """drop nodes none of whose outputs are used, then initializers nobody reads"""
    while True:
        used = {x for n in g.node for x in n.input} | {o.name for o in g.output}
        keep = [n for n in g.node if any(o in used for o in n.output)]
        if len(keep) == len(g.node):
            break
        del g.node[:]
        g.node.extend(keep)
    keep = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(keep)


def tensor_types(m):
    """{name: (elem_type, shape or None)} of every tensor, from onnx.shape_inference"""
    inferred = shape_inference.infer_shapes(m)
    g = inferred.graph
    out = {}
    for v in list(g.input) + list(g.value_info) + list(g.output):
        tt = v.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim] \
            if tt.HasField("shape") else None
        out[v.name] = (tt.elem_type, shape)
    for t in g.initializer:
        out[t.name] = (t.data_type, list(t.dims))
    for n in g.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            out[n.output[0]] = (n.attribute[0].t.data_type, list(n.attribute[0].t.dims))
    return out


def attr(n, name, default):
    for a in n.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


# ---- what gets quantized --------------------------------------------------------------------------

class Plan:
    """the tensors to quantize and the nodes that quantize, from the float graph"""

    def __init__(self, m):
        g = m.graph
        self.consts = constants(g)
        self.types = tensor_types(m)
        inits = {t.name for t in g.initializer}
        self.graph_inputs = [v.name for v in g.input if v.name not in inits]
        self.graph_outputs = [o.name for o in g.output]
        use = consumers(g)
        # tensors that depend on a graph input: the activations
        dynamic = set(self.graph_inputs)
        for n in g.node:
            if any(x in dynamic for x in n.input if x):
                dynamic.update(n.output)

        def is_act(x):
            return bool(x) and x in dynamic and self.types.get(x, (0,))[0] == TensorProto.FLOAT

        self.is_act = is_act

        self.weighted = {}   # node index -> dict(x, w, axis, act: index of a fused Relu/Clip or None)
        self.plain = {}      # node index -> [activation inputs]
        self.quantized = []  # tensor names, in the order they are made
        qset = set()

        def want(x):
            if x not in qset:
                qset.add(x)
                self.quantized.append(x)

        for i, n in enumerate(g.node):
            if n.op_type in WEIGHTED and len(n.input) >= 2 and is_act(n.input[0]) \
                    and n.input[1] in self.consts and n.input[1] not in dynamic:
                w = self.consts[n.input[1]]
                if n.op_type == "Conv" and w.ndim < 3:
                    continue
                if n.op_type == "MatMul" and w.ndim != 2:
                    continue
                if n.op_type == "Gemm" and (w.ndim != 2 or attr(n, "transA", 0)):
                    continue
                fused = None
                users = use.get(n.output[0], [])
                if len(users) == 1 and n.output[0] not in self.graph_outputs \
                        and g.node[users[0]].op_type in FUSED_ACT:
                    fused = users[0]
                self.weighted[i] = dict(fused=fused)
                want(n.input[0])
                want(g.node[fused].output[0] if fused is not None else n.output[0])
            elif n.op_type in PLAIN and len(n.output) == 1 and is_act(n.output[0]):
                pos = PLAIN[n.op_type]
                ins = [x for k, x in enumerate(n.input) if (pos is None or k in pos) and is_act(x)]
                if not ins:
                    continue
                self.plain[i] = ins
                for x in ins:
                    want(x)
                want(n.output[0])
        self.qset = qset

    def leave_float(self, g, bad):
        """tensors whose range is not finite (an attention mask's -inf) stay float, and so does a
        Conv / MatMul / Gemm whose input or output is one of them"""
        for i in list(self.weighted):
            n, fused = g.node[i], self.weighted[i]["fused"]
            yq = g.node[fused].output[0] if fused is not None else n.output[0]
            if n.input[0] in bad or yq in bad or n.output[0] + "#product" in bad:
                del self.weighted[i]
        self.quantized = [x for x in self.quantized if x not in bad]
        self.qset -= set(bad)


# ---- calibration ----------------------------------------------------------------------------------

def make_input(rng, name, elem, shape, m, consts):
    """one fixed-seed input: float uniform [-1, 1); integer: token ids below the size of the table
    a Gather reads them from, masks (a name with 'mask') ones"""
    dims = [d if isinstance(d, int) and d > 0 else 1 for d in shape]
    if elem == TensorProto.FLOAT:
        return rng.uniform(-1, 1, dims).astype(np.float32)
    dtype = {TensorProto.INT64: np.int64, TensorProto.INT32: np.int32}.get(elem)
    if dtype is None:
        raise Error("input %s: element type %s is not supported" % (name, TensorProto.DataType.Name(elem)))
    if "mask" in name.lower():
        return np.ones(dims, dtype)
    high = 2
    for n in m.graph.node:
        if n.op_type == "Gather" and len(n.input) == 2 and n.input[1] == name and n.input[0] in consts:
            high = consts[n.input[0]].shape[attr(n, "axis", 0)]
    return rng.integers(0, high, dims).astype(dtype)


def write_inputs(plan, m, seed, work, tag):
    rng = np.random.default_rng(seed)
    files = {}
    for k, name in enumerate(plan.graph_inputs):
        elem, shape = plan.types[name]
        x = make_input(rng, name, elem, shape or [], m, plan.consts)
        files[name] = os.path.join(work, "%s_input%d.npy" % (tag, k))
        np.save(files[name], x)
    return files


def calibrate(m, plan, ort_dir, work):
    """{tensor: (min, max)} over the calibration runs, and the ranges of Gemm products before C"""
    cm = onnx.ModelProto()
    cm.CopyFrom(m)
    have = set(plan.graph_outputs)
    for x in plan.quantized:
        if x in have or x in plan.graph_inputs:
            continue
        elem, shape = plan.types.get(x, (TensorProto.FLOAT, None))
        cm.graph.output.append(helper.make_tensor_value_info(x, elem, shape))
    path = os.path.join(work, "calibrate.onnx")
    onnx.save(cm, path)
    # Gemm with C: the product x @ W without C gets a range of its own in the QLinear form
    gemms = {}
    for i in plan.weighted:
        n = m.graph.node[i]
        if n.op_type == "Gemm" and len(n.input) > 2 and n.input[2]:
            gemms[n.output[0]] = (n.input[0], gemm_weight(n, plan.consts))
    lo, hi = {}, {}
    for k, seed in enumerate(CALIB_SEEDS):
        inputs = write_inputs(plan, m, seed, work, "calib")
        out_dir = os.path.join(work, "calib%d" % k)
        r = ort_run(ort_dir, path, inputs, out_dir)
        values = {o["name"]: o["file"] for o in r["outputs"]}
        values.update(inputs)
        got = {}
        for x in plan.quantized + [a for a, _ in gemms.values()]:
            if x in got:
                continue
            if x not in values:
                raise Error("calibration: ORT gave no value for %s" % x)
            got[x] = np.load(values[x])
        for x, v in got.items():
            lo[x] = min(lo.get(x, np.inf), float(v.min()))
            hi[x] = max(hi.get(x, -np.inf), float(v.max()))
        for y, (a, w) in gemms.items():
            p = got[a].astype(np.float64) @ w
            key = y + "#product"
            lo[key] = min(lo.get(key, np.inf), float(p.min()))
            hi[key] = max(hi.get(key, -np.inf), float(p.max()))
        shutil.rmtree(out_dir)
    return {x: (lo[x], hi[x]) for x in lo}


def gemm_weight(n, consts):
    """Gemm's B as [K, N] float64, alpha folded in"""
    w = consts[n.input[1]].astype(np.float64)
    if attr(n, "transB", 0):
        w = w.T
    return w * attr(n, "alpha", 1.0)


# ---- writing the int8 graphs ----------------------------------------------------------------------

def act_scale(rng):
    a = max(abs(rng[0]), abs(rng[1]))
    return np.float32(a / 127.0) if a > 0 else np.float32(1.0)


def act_params(rng, act):
    """(scale, zero point) of an activation: int8 symmetric (zero point 0), or uint8 asymmetric
    over the range widened to hold 0 (ONNX Runtime's quantizer's default for activations)"""
    if act == "int8":
        return act_scale(rng), np.int8(0)
    lo, hi = min(float(rng[0]), 0.0), max(float(rng[1]), 0.0)
    scale = np.float32((hi - lo) / 255.0) if hi > lo else np.float32(1.0)
    return scale, np.uint8(np.clip(np.round(-lo / float(scale)), 0, 255))


def quantize_weight(w, axis):
    """int8 symmetric per channel along axis; (q, scale float32 [C])"""
    red = tuple(k for k in range(w.ndim) if k != axis)
    amax = np.abs(w).max(axis=red)
    scale = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.clip(np.round(w / scale.astype(np.float64).reshape(shape)), -127, 127).astype(np.int8)
    return q, scale


def build(m, plan, ranges, form, act="int8"):
    """the QDQ (form 'qdq') or QLinear (form 'qlinear') model with int8 or uint8 activations;
    (model, parameter count)"""
    g = m.graph
    nodes, inits, qparams = [], [], set()
    names = {x for n in g.node for x in list(n.input) + list(n.output)} | {t.name for t in g.initializer} \
        | {v.name for v in g.input} | {o.name for o in g.output}

    def uniq(base):
        name, k = base, 1
        while name in names:
            name, k = "%s_%d" % (base, k), k + 1
        names.add(name)
        return name

    def const(base, arr, qparam=False):
        name = uniq(base)
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        if qparam:
            qparams.add(name)
        return name

    def node(op, ins, outs, **attrs):
        nodes.append(helper.make_node(op, ins, outs, name=uniq(outs[0] + "_" + op), **attrs))

    # per quantized tensor: scale, zero point, the int8 name, the name its producer writes
    qinfo = {}
    for x in plan.quantized:
        sc, zp = act_params(ranges[x], act)
        s = const(x + "_scale", sc, True)
        z = const(x + "_zero_point", zp, True)
        q = uniq(x + "_QuantizeLinear_Output")
        qinfo[x] = dict(s=s, z=z, q=q, src=uniq(x + "_float") if x in plan.graph_outputs else x)

    # one DequantizeLinear per float consumer, and one that writes a graph output (in the QLinear
    # form QLinearConv / QLinearMatMul read the int8 tensor)
    dq_of, dqs = {}, {x: [] for x in plan.quantized}
    for x in plan.quantized:
        if x in plan.graph_outputs:
            dq_of[(x, None)] = x
            dqs[x].append(x)
    for i, n in enumerate(g.node):
        int8_in = {n.input[0]} if (form == "qlinear" and i in plan.weighted) else set()
        for x in n.input:
            if x in qinfo and x not in int8_in and (x, i) not in dq_of:
                dq_of[(x, i)] = uniq(x + "_DequantizeLinear_Output")
                dqs[x].append(dq_of[(x, i)])

    def read(x, i):
        """the name node i reads for x, a float input"""
        return dq_of[(x, i)] if x in qinfo else x

    def out(x):
        """the name the producer of x writes (graph outputs: DequantizeLinear writes them)"""
        return qinfo[x]["src"] if x in qinfo else x

    def emit_q(x, made_int8=False):
        i = qinfo[x]
        if not made_int8:
            node("QuantizeLinear", [i["src"], i["s"], i["z"]], [i["q"]])
        for d in dqs[x]:
            node("DequantizeLinear", [i["q"], i["s"], i["z"]], [d])

    wcache = {}

    def weight(wname, w, axis):
        key = (wname, axis, w.shape)
        if key not in wcache:
            q, s = quantize_weight(w, axis)
            wcache[key] = (const(wname + "_quantized", q), const(wname + "_scale", s, True),
                           const(wname + "_zero_point", np.zeros(s.shape, np.int8), True), s)
        return wcache[key]

    for x in plan.graph_inputs:
        if x in qinfo:
            emit_q(x)
    int8_made = set()
    for i, n in enumerate(g.node):
        if i in plan.weighted:
            fused = plan.weighted[i]["fused"]
            y = n.output[0]
            yq = g.node[fused].output[0] if fused is not None else y   # the quantized tensor
            x = n.input[0]
            xi = qinfo[x]
            attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
            if n.op_type == "Conv":
                w = plan.consts[n.input[1]].astype(np.float64)
                wq, ws, wz, wsv = weight(n.input[1], w, 0)
                bias = n.input[2] if len(n.input) > 2 and n.input[2] else None
                if form == "qdq":
                    wf = uniq(n.input[1] + "_DequantizeLinear_Output")
                    node("DequantizeLinear", [wq, ws, wz], [wf], axis=0)
                    node("Conv", [read(x, i), wf] + ([bias] if bias else []), [out(y)], **attrs)
                else:
                    ins = [xi["q"], xi["s"], xi["z"], wq, ws, wz, qinfo[yq]["s"], qinfo[yq]["z"]]
                    if bias:
                        bs = np.float64(act_scale(ranges[x])) * wsv.astype(np.float64)
                        b = np.round(plan.consts[bias].astype(np.float64) / bs)
                        ins.append(const(bias + "_quantized",
                                         np.clip(b, -2 ** 31, 2 ** 31 - 1).astype(np.int32)))
                    if fused is None:
                        node("QLinearConv", ins, [qinfo[y]["q"]], **attrs)
                        int8_made.add(y)
                    else:   # int8 at the Relu's scale, then Relu in float
                        yi8 = uniq(y + "_quantized")
                        node("QLinearConv", ins, [yi8], **attrs)
                        node("DequantizeLinear", [yi8, qinfo[yq]["s"], qinfo[yq]["z"]], [y])
            else:
                if n.op_type == "MatMul":
                    w, c = plan.consts[n.input[1]].astype(np.float64), None
                else:
                    w = gemm_weight(n, plan.consts)
                    c = n.input[2] if len(n.input) > 2 and n.input[2] else None
                    beta = attr(n, "beta", 1.0)
                    if c is not None and beta != 1.0:
                        c = const(c + "_beta", (plan.consts[c] * beta).astype(np.float32))
                if form == "qdq":
                    if n.op_type == "Gemm" and attr(n, "transB", 0):
                        wq, ws, wz, _ = weight(n.input[1], w.T, 0)
                    else:
                        wq, ws, wz, _ = weight(n.input[1], w, 1)
                    wf = uniq(n.input[1] + "_DequantizeLinear_Output")
                    node("DequantizeLinear", [wq, ws, wz], [wf],
                         axis=0 if n.op_type == "Gemm" and attr(n, "transB", 0) else 1)
                    if n.op_type == "MatMul":
                        node("MatMul", [read(x, i), wf], [out(y)])
                    else:
                        attrs.update(alpha=1.0, beta=1.0)
                        node("Gemm", [read(x, i), wf] + ([c] if c else []), [out(y)], **attrs)
                else:
                    wq, ws, wz, _ = weight(n.input[1], w, 1)
                    ins = [xi["q"], xi["s"], xi["z"], wq, ws, wz]
                    if c is None and fused is None:
                        node("QLinearMatMul", ins + [qinfo[y]["s"], qinfo[y]["z"]], [qinfo[y]["q"]])
                        int8_made.add(y)
                    elif c is None:
                        yi8 = uniq(y + "_quantized")
                        node("QLinearMatMul", ins + [qinfo[yq]["s"], qinfo[yq]["z"]], [yi8])
                        node("DequantizeLinear", [yi8, qinfo[yq]["s"], qinfo[yq]["z"]], [y])
                    else:   # the product at a scale of its own, then C in float
                        psc, pzp = act_params(ranges[y + "#product"], act)
                        ps = const(y + "_product_scale", psc, True)
                        pz = const(y + "_product_zero_point", pzp, True)
                        pi8, pf = uniq(y + "_product_quantized"), uniq(y + "_product")
                        node("QLinearMatMul", ins + [ps, pz], [pi8])
                        node("DequantizeLinear", [pi8, ps, pz], [pf])
                        node("Add", [pf, c], [out(y) if fused is None else y])
            for o in n.output:
                if o in qinfo and o not in int8_made:
                    emit_q(o)
                elif o in int8_made:
                    emit_q(o, made_int8=True)
            continue
        # every other node: float, reading the DequantizeLinear of a quantized input
        new = helper.make_node(n.op_type, [read(x, i) if x else x for x in n.input],
                               [out(o) for o in n.output], name=n.name or None, domain=n.domain or None)
        new.attribute.extend(n.attribute)
        nodes.append(new)
        for o in n.output:
            if o in qinfo:
                emit_q(o)

    used = {x for nd in nodes for x in nd.input}
    for t in g.initializer:
        if t.name in used:
            inits.append(t)
    graph = helper.make_graph(nodes, g.name + "_" + form, list(g.input), list(g.output), [])
    graph.initializer.extend(t for t in inits if t.name in used)
    qm = helper.make_model(graph, opset_imports=[
        helper.make_opsetid(o.domain, max(o.version, 13) if o.domain in ("", "ai.onnx") else o.version)
        for o in m.opset_import])
    qm.ir_version = max(m.ir_version, 7)
    # graph inputs that were initializers in the float model: none left unless read
    remove_unused(qm.graph)
    del qm.graph.input[:]
    qm.graph.input.extend(v for v in g.input if v.name in plan.graph_inputs or
                          v.name in {t.name for t in qm.graph.initializer})
    onnx.checker.check_model(qm)
    params = sum(int(np.prod(t.dims)) for t in qm.graph.initializer if t.name not in qparams
                 and t.data_type in (TensorProto.FLOAT, TensorProto.INT8, TensorProto.INT32))
    return qm, params


# ---- the check ------------------------------------------------------------------------------------

def compare(ref, got):
    """(same argmax of the first output, share of rows with the same argmax or None, largest
    |got - ref| over the largest |ref|)"""
    worst, scale = 0.0, 0.0
    for a, b in zip(ref, got):
        if a.shape != b.shape:
            raise Error("output shapes differ: %s and %s" % (a.shape, b.shape))
        worst = max(worst, float(np.max(np.abs(b.astype(np.float64) - a))))
        scale = max(scale, float(np.max(np.abs(a))))
    a, b = ref[0], got[0]
    same = int(np.argmax(a)) == int(np.argmax(b))
    rows = None
    if a.ndim >= 2 and a.size // a.shape[-1] > 1:
        rows = float(np.mean(np.argmax(a, axis=-1) == np.argmax(b, axis=-1)))
    return same, rows, worst / scale if scale else worst


def run_outputs(ort_dir, path, inputs, out_dir):
    r = ort_run(ort_dir, path, inputs, out_dir)
    return [np.load(o["file"]) for o in r["outputs"]], r["median_ms"]


def count_ops(m, ops):
    return sum(1 for n in m.graph.node if n.op_type in ops)


def make_one(name, src, out, ort_dir, work, acts):
    m = onnx.load(src)
    float_nodes = len(m.graph.node)
    folded = fold_batch_norm(m)
    plan = Plan(m)
    ranges = calibrate(m, plan, ort_dir, work)
    bad = [x for x, (a, b) in ranges.items() if not (np.isfinite(a) and np.isfinite(b))]
    plan.leave_float(m.graph, bad)
    rows, results = [], {}
    check_inputs = write_inputs(plan, m, CHECK_SEED, work, "check")
    ref, ref_ms = run_outputs(ort_dir, src, check_inputs, os.path.join(work, "float_out"))
    variants = [(form, act) for act in acts for form in ("qdq", "qlinear")]
    for form, act in variants:
        qm, params = build(m, plan, ranges, form, act)
        qname = "%s_%s%s" % (name, form, "_u8" if act == "uint8" else "")
        path = os.path.join(out, qname + ".onnx")
        onnx.save(qm, path)
        got, ms = run_outputs(ort_dir, path, check_inputs, os.path.join(work, form + "_out"))
        results[(form, act)] = compare(ref, got) + (ms, len(qm.graph.node),
                                             count_ops(qm, ("QuantizeLinear",)), count_ops(qm, ("DequantizeLinear",)))
        rows.append("%s\t%d\t%d\n" % (qname, len(qm.graph.node), params))
    quantized_ops = {}
    for i in list(plan.weighted) + list(plan.plain):
        op = m.graph.node[i].op_type
        quantized_ops[op] = quantized_ops.get(op, 0) + 1
    left = {}
    for i, n in enumerate(m.graph.node):
        if i not in plan.weighted and i not in plan.plain and n.op_type in WEIGHTED + tuple(PLAIN) \
                and any(plan.is_act(o) for o in n.output):
            left[n.op_type] = left.get(n.op_type, 0) + 1
    print("%s: %d nodes, %d batch norms folded into convolutions; quantized: %s%s; %d tensors "
          "quantized" % (name, float_nodes, folded,
                         ", ".join("%d %s" % (c, op) for op, c in sorted(quantized_ops.items())),
                         ("; left float: " + ", ".join("%d %s" % (c, op) for op, c in sorted(left.items())))
                         if left else "", len(plan.quantized)))
    if bad:
        print("  left float, their range is not finite (-inf of a mask): %s" % ", ".join(sorted(bad)))
    for form, act in variants:
        same, share, rel, ms, nn, nq, ndq = results[(form, act)]
        print("  %-8s %-5s %5d nodes (%d QuantizeLinear, %d DequantizeLinear)  top-1 %s%s  "
              "max|q-f|/max|f| %.3g  ORT %.2f ms (float %.2f ms)"
              % (form, act, nn, nq, ndq, "equal" if same else "DIFFERENT",
                 " (rows: %.0f%% equal)" % (100 * share) if share is not None else "", rel, ms, ref_ms))
    sys.stdout.flush()
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models-dir", required=True, help="the float models (make_models.py's OUT_DIR)")
    p.add_argument("--out", required=True, help="where the int8 models and manifest.tsv go")
    p.add_argument("--models", default="resnet18,mobilenet_v2,bert_enc", help="comma-separated names")
    p.add_argument("--activations", default="int8,uint8",
                   help="activation types, comma-separated (default int8,uint8: <name>_qdq and <name>_qlinear "
                   "with int8 activations, <name>_qdq_u8 and <name>_qlinear_u8 with uint8 ones)")
    p.add_argument("--ort-dir", default=default_ort_dir(), help="onnxruntime-node's directory "
                   "(default: $TTH_ORT_DIR, else build-bench/ort, what bench/ort/setup installs)")
    args = p.parse_args()
    names = [n for n in args.models.split(",") if n]
    acts = [a for a in args.activations.split(",") if a]
    if not acts or any(a not in ("int8", "uint8") for a in acts):
        sys.exit("make_qdq_models.py: --activations takes int8 and/or uint8, got '%s'" % args.activations)
    missing = [os.path.join(args.models_dir, n + ".onnx") for n in names
               if not os.path.exists(os.path.join(args.models_dir, n + ".onnx"))]
    if missing:
        sys.exit("make_qdq_models.py: no such model: %s\n  make the float models first with "
                 "bench/models/make_models.py (and make_zoo.py for bert_enc)" % ", ".join(missing))
    check_ort(args.ort_dir)
    os.makedirs(args.out, exist_ok=True)
    rows = []
    try:
        for name in names:
            with tempfile.TemporaryDirectory(prefix="tth-qdq-") as work:
                rows += make_one(name, os.path.join(args.models_dir, name + ".onnx"), args.out,
                                 args.ort_dir, work, acts)
    except Error as e:
        sys.exit("make_qdq_models.py: %s" % e)
    with open(os.path.join(args.out, "manifest.tsv"), "w") as f:
        f.writelines(rows)
    print("wrote %s" % os.path.join(args.out, "manifest.tsv"))


if __name__ == "__main__":
    main()
