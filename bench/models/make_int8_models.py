#!/usr/bin/python3
"""Int8 models for the Cortex-M and NPU benchmarks (bench/cortexm), in the two forms exporters
write: QLinear operators (QLinearConv, QLinearMatMul) and QDQ (DequantizeLinear -> float op ->
QuantizeLinear, as ONNX Runtime's quantization tool writes).

    make_int8_models.py OUT_DIR

writes OUT_DIR/<name>.onnx, OUT_DIR/<name>.input.npy and a manifest.tsv (name, form, nodes,
parameters) for:
  dscnn_{qlinear,qdq}      a keyword-spotting DS-CNN (Zhang et al. 2017, "Hello Edge", the small
                           DS-CNN): MFCC input 49x10, conv 10x4 stride 2 to 64 channels, four
                           depthwise-separable blocks, average pool, 12 classes
  mobilenet_{qlinear,qdq}  MobileNet v1 (Howard et al. 2017) at width 0.25 on 96x96 RGB, the
                           visual-wake-words shape: 13 depthwise-separable blocks, 2 classes

Weights are random from a fixed seed; activations are calibrated on one random input (ReLU
outputs quantized to [0, max] with zero point -128), weights per output channel (int8,
symmetric), the classifier per tensor (CMSIS-NN's fully connected takes one multiplier).
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def conv_f(x, w, b, stride, pads, groups):
    """float64 NCHW convolution; pads (top, left, bottom, right)"""
    n, c, h, wd = x.shape
    o, ci, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (h + pads[0] + pads[2] - kh) // stride + 1
    ow = (wd + pads[1] + pads[3] - kw) // stride + 1
    y = np.zeros((n, o, oh, ow))
    opg = o // groups
    for g in range(groups):
        xs = xp[:, g * ci:(g + 1) * ci]
        for ky in range(kh):
            for kx in range(kw):
                patch = xs[:, :, ky:ky + stride * oh:stride, kx:kx + stride * ow:stride]
                y[:, g * opg:(g + 1) * opg] += np.einsum("nchw,oc->nohw", patch, w[g * opg:(g + 1) * opg, :, ky, kx])
    return y + b[None, :, None, None]


class Net:
    """A float network described layer by layer, then written in either int8 form."""

    def __init__(self, name, shape, seed):
        self.name, self.shape, self.in_shape = name, shape, shape
        self.rng = np.random.default_rng(seed)
        self.layers = []

    def conv(self, oc, k, stride, pads, groups=1):
        ci = self.shape[1] // groups
        kh, kw = k
        fan = ci * kh * kw
        w = self.rng.normal(0, np.sqrt(2.0 / fan), size=(oc, ci, kh, kw))
        b = self.rng.normal(0, 0.05, size=(oc,))
        self.layers.append(("conv", dict(w=w, b=b, stride=stride, pads=pads, groups=groups)))
        h = (self.shape[2] + pads[0] + pads[2] - kh) // stride + 1
        wd = (self.shape[3] + pads[1] + pads[3] - kw) // stride + 1
        self.shape = (1, oc, h, wd)

    def dw_sep(self, oc, stride):
        c = self.shape[1]
        self.conv(c, (3, 3), stride, (1, 1, 1, 1), groups=c)
        self.conv(oc, (1, 1), 1, (0, 0, 0, 0))

    def classifier(self, classes):
        c = self.shape[1]
        w = self.rng.normal(0, np.sqrt(1.0 / c), size=(c, classes))
        b = self.rng.normal(0, 0.05, size=(classes,))
        self.layers.append(("fc", dict(w=w, b=b)))

    def calibrate(self, x):
        """float forward pass: the largest output of each layer (after ReLU for convs)"""
        ranges = []
        for kind, p in self.layers:
            if kind == "conv":
                x = np.maximum(conv_f(x, p["w"], p["b"], p["stride"], p["pads"], p["groups"]), 0)
                ranges.append(float(x.max()) or 1.0)
            else:
                x = x.mean(axis=(2, 3)) @ p["w"] + p["b"]
                ranges.append(float(np.abs(x).max()) or 1.0)
        return ranges

    def write(self, path, form, x):
        ranges = self.calibrate(x.astype(np.float64))
        nodes, inits = [], []

        def const(name, arr):
            inits.append(numpy_helper.from_array(np.asarray(arr), name))
            return name

        def node(op, ins, out, **attrs):
            nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
            return out

        in_scale = float(np.abs(x).max()) / 127
        xs = const("in_s", np.float32(in_scale))
        xz = const("in_zp", np.int8(0))
        cur = node("QuantizeLinear", ["input", xs, xz], "in_q")
        cur_s, cur_z, cur_scale = xs, xz, in_scale
        for i, (kind, p) in enumerate(self.layers):
            t = "l%d" % i
            if kind == "conv":
                w = p["w"]
                wscale = np.maximum(np.abs(w).reshape(w.shape[0], -1).max(axis=1), 1e-8) / 127
                wq = np.clip(np.round(w / wscale[:, None, None, None]), -127, 127).astype(np.int8)
                bq = np.round(p["b"] / (cur_scale * wscale)).astype(np.int32)
                out_scale = ranges[i] / 255
                ys = const(t + "_ys", np.float32(out_scale))
                yz = const(t + "_yz", np.int8(-128))
                wsn = const(t + "_ws", wscale.astype(np.float32))
                wzn = const(t + "_wz", np.zeros(w.shape[0], np.int8))
                wn = const(t + "_w", wq)
                attrs = dict(strides=[p["stride"]] * 2, pads=list(p["pads"]), group=p["groups"])
                if form == "qlinear":
                    bn = const(t + "_b", bq)
                    cur = node("QLinearConv", [cur, cur_s, cur_z, wn, wsn, wzn, ys, yz, bn], t, **attrs)
                else:
                    bsn = const(t + "_bs", (cur_scale * wscale).astype(np.float32))
                    bzn = const(t + "_bz", np.zeros(w.shape[0], np.int32))
                    bn = const(t + "_b", bq)
                    xf = node("DequantizeLinear", [cur, cur_s, cur_z], t + "_x")
                    wf = node("DequantizeLinear", [wn, wsn, wzn], t + "_wf", axis=0)
                    bf = node("DequantizeLinear", [bn, bsn, bzn], t + "_bf", axis=0)
                    cf = node("Conv", [xf, wf, bf], t + "_conv", **attrs)
                    rf = node("Relu", [cf], t + "_relu")
                    cur = node("QuantizeLinear", [rf, ys, yz], t)
                cur_s, cur_z, cur_scale = ys, yz, out_scale
            else:
                h, wd = self.shape[2], self.shape[3]
                d = node("DequantizeLinear", [cur, cur_s, cur_z], t + "_pool_in")
                ap = node("AveragePool", [d], t + "_pool", kernel_shape=[h, wd])
                pq = node("QuantizeLinear", [ap, cur_s, cur_z], t + "_pool_q")
                shape = const(t + "_shape", np.array([1, self.shape[1]], np.int64))
                if form == "qlinear":
                    flat = node("Reshape", [pq, shape], t + "_flat")
                else:
                    df = node("DequantizeLinear", [pq, cur_s, cur_z], t + "_flat_in")
                    rf = node("Reshape", [df, shape], t + "_flat_f")
                    flat = node("QuantizeLinear", [rf, cur_s, cur_z], t + "_flat")
                w = p["w"]
                wscale = max(float(np.abs(w).max()), 1e-8) / 127
                wq = np.clip(np.round(w / wscale), -127, 127).astype(np.int8)
                bq = np.round(p["b"] / (cur_scale * wscale)).astype(np.int32)
                out_scale = ranges[i] / 127
                ys = const(t + "_ys", np.float32(out_scale))
                yz = const(t + "_yz", np.int8(0))
                wsn = const(t + "_ws", np.float32(wscale))
                wzn = const(t + "_wz", np.int8(0))
                wn = const(t + "_w", wq)
                if form == "qlinear":
                    mm = node("QLinearMatMul", [flat, cur_s, cur_z, wn, wsn, wzn, ys, yz], t + "_mm")
                    logits = node("DequantizeLinear", [mm, ys, yz], t + "_logits")
                else:
                    bsn = const(t + "_bs", np.float32(cur_scale * wscale))
                    bzn = const(t + "_bz", np.int32(0))
                    bn = const(t + "_b", bq)
                    xf = node("DequantizeLinear", [flat, cur_s, cur_z], t + "_x")
                    wf = node("DequantizeLinear", [wn, wsn, wzn], t + "_wf")
                    bf = node("DequantizeLinear", [bn, bsn, bzn], t + "_bf")
                    mm = node("MatMul", [xf, wf], t + "_mm")
                    ad = node("Add", [mm, bf], t + "_add")
                    aq = node("QuantizeLinear", [ad, ys, yz], t + "_q")
                    logits = node("DequantizeLinear", [aq, ys, yz], t + "_logits")
                sm = node("Softmax", [logits], t + "_softmax", axis=-1)
                ps = const("p_s", np.float32(1.0 / 256))
                pz = const("p_zp", np.int8(-128))
                pq = node("QuantizeLinear", [sm, ps, pz], t + "_p")
                node("DequantizeLinear", [pq, ps, pz], "output")
        classes = self.layers[-1][1]["w"].shape[1]
        g = helper.make_graph(nodes, self.name + "_" + form,
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, classes])], inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        onnx.checker.check_model(m)
        onnx.save(m, path)
        params = sum(int(np.prod(t.dims)) for t in inits)
        return len(nodes), params


def dscnn():
    n = Net("dscnn", (1, 1, 49, 10), 3)
    n.conv(64, (10, 4), 2, (4, 1, 5, 1))
    for _ in range(4):
        n.dw_sep(64, 1)
    n.classifier(12)
    return n


def mobilenet():
    n = Net("mobilenet", (1, 3, 96, 96), 4)
    n.conv(8, (3, 3), 2, (0, 0, 1, 1))
    for oc, s in [(16, 1), (32, 2), (32, 1), (64, 2), (64, 1), (128, 2), (128, 1), (128, 1), (128, 1), (128, 1),
                  (128, 1), (256, 2), (256, 1)]:
        n.dw_sep(oc, s)
    n.classifier(2)
    return n


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rows = []
    for make in (dscnn, mobilenet):
        for form in ("qlinear", "qdq"):
            net = make()
            x = np.random.default_rng(9).uniform(-1, 1, size=net.in_shape).astype(np.float32)
            name = "%s_%s" % (net.name, form)
            nodes, params = net.write(os.path.join(out, name + ".onnx"), form, x)
            np.save(os.path.join(out, name + ".input.npy"), x)
            rows.append("%s\t%s\t%d\t%d" % (name, form, nodes, params))
    with open(os.path.join(out, "manifest.tsv"), "w") as f:
        f.write("name\tform\tnodes\tparameters\n" + "\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
