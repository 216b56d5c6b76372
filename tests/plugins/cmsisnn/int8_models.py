#!/usr/bin/python3
"""Int8 ONNX models for running the cmsis-nn kind, each with an input and its expected output
computed here with numpy from the ONNX operator definitions (float64 arithmetic, round half to
even, saturation), independently of tth.

    int8_models.py OUT_DIR

writes OUT_DIR/<name>/model.onnx, input_0.npy and expected_0.npy for:
  qlinear_cnn     float input -> QuantizeLinear -> QLinearConv 3x3 (pad 1) -> depthwise QLinearConv
                  3x3 -> QLinearConv 1x1, with a residual Add and a Mul of dequantized tensors,
                  MaxPool, an AveragePool over the whole plane, QLinearMatMul, Softmax -> float
  qlinear_cnn_i8  the same graph taking the int8 tensor itself as the model's input
  qdq_softmax     tests/plugins/cmsisnn/qdq_model.py's model (QLinearConv then a QDQ softmax)
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def q(x, s, zp, dt=np.int8):
    info = np.iinfo(dt)
    return np.clip(np.round(x / s) + zp, info.min, info.max).astype(dt)  # np.round: half to even


def dq(x, s, zp):
    return (x.astype(np.float64) - zp) * s


def conv(x, w, pad, groups=1, stride=1):
    """float64 NCHW convolution, OIHW weights"""
    n, c, h, wd = x.shape
    o, ci, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((n, o, oh, ow))
    opg = o // groups
    for oc in range(o):
        g = oc // opg
        for ky in range(kh):
            for kx in range(kw):
                patch = xp[:, g * ci:(g + 1) * ci, ky:ky + stride * oh:stride, kx:kx + stride * ow:stride]
                y[:, oc] += np.einsum("nchw,c->nhw", patch, w[oc, :, ky, kx])
    return y


class Builder:
    def __init__(self, rng):
        self.rng, self.nodes, self.inits, self.n = rng, [], [], 0

    def const(self, name, arr):
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def qparams(self, tag, scale, zp):
        return self.const(tag + "_s", np.array(scale, np.float32)), self.const(tag + "_zp", np.array(zp, np.int8))

    def node(self, op, ins, out, **attrs):
        self.nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    def qlinearconv(self, x, xq, xs, xzp, oc, k, pad, groups, ys, yzp, tag):
        """QLinearConv with int8 weights (zero point 0) and an int32 bias; returns (name, value)"""
        ci = xq.shape[1] // groups
        w = self.rng.integers(-40, 41, size=(oc, ci, k, k)).astype(np.int8)
        ws = np.float32(0.02)
        b = self.rng.integers(-200, 201, size=(oc,)).astype(np.int32)
        wn = self.const(tag + "_w", w)
        wsn, wzn = self.qparams(tag + "_wq", ws, 0)
        ysn, yzn = self.qparams(tag + "_yq", ys, yzp)
        bn = self.const(tag + "_b", b)
        out = self.node("QLinearConv", [x[0], x[1], x[2], wn, wsn, wzn, ysn, yzn, bn], tag,
                        pads=[pad] * 4, group=groups)
        acc = conv(xq.astype(np.float64) - xzp, w.astype(np.float64), pad, groups) + b[None, :, None, None]
        real = acc * (np.float64(np.float32(xs)) * np.float64(ws))
        return (out, ysn, yzn), q(real, np.float64(np.float32(ys)), yzp)


def qlinear_cnn(path, int8_input):
    rng = np.random.default_rng(11)
    B = Builder(rng)
    xs, xzp = 0.04, -3
    xf = rng.uniform(-4, 4, size=(1, 4, 8, 8)).astype(np.float32)
    xq = q(xf.astype(np.float64), np.float64(np.float32(xs)), xzp)
    xsn, xzn = B.qparams("x", xs, xzp)
    if int8_input:
        x_in = "x"
        graph_in = helper.make_tensor_value_info("x", TensorProto.INT8, [1, 4, 8, 8])
        model_input = xq
    else:
        x_in = B.node("QuantizeLinear", ["x", xsn, xzn], "xq")
        graph_in = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])
        model_input = xf
    # three convolutions: 3x3 (4 -> 8), depthwise 3x3 (8 groups), 1x1 (8 -> 8)
    c1, c1q = B.qlinearconv((x_in, xsn, xzn), xq, xs, xzp, 8, 3, 1, 1, 0.3, 2, "conv1")
    c2, c2q = B.qlinearconv(c1, c1q, 0.3, 2, 8, 3, 1, 8, 0.25, -1, "dw")
    c3, c3q = B.qlinearconv(c2, c2q, 0.25, -1, 8, 1, 0, 1, 0.4, 4, "pw")
    # residual: dequantize both, add, quantize; then multiply by itself the same way
    d1 = B.node("DequantizeLinear", list(c1), "d1")
    d3 = B.node("DequantizeLinear", list(c3), "d3")
    sum_ = B.node("Add", [d1, d3], "sum")
    asn, azn = B.qparams("add", 0.5, 1)
    sq = B.node("QuantizeLinear", [sum_, asn, azn], "sumq")
    addq = q(dq(c1q, np.float32(0.3), 2) + dq(c3q, np.float32(0.4), 4), np.float64(np.float32(0.5)), 1)
    ds1 = B.node("DequantizeLinear", [sq, asn, azn], "ds1")
    ds2 = B.node("DequantizeLinear", [sq, asn, azn], "ds2")
    prod = B.node("Mul", [ds1, ds2], "prod")
    msn, mzn = B.qparams("mul", 8.0, -100)
    mq = B.node("QuantizeLinear", [prod, msn, mzn], "prodq")
    a = dq(addq, np.float32(0.5), 1)
    mulq = q(a * a, 8.0, -100)
    # max pool 2x2 stride 2, then an average over the whole 4x4 plane (same quantization)
    dm = B.node("DequantizeLinear", [mq, msn, mzn], "dm")
    mp = B.node("MaxPool", [dm], "mp", kernel_shape=[2, 2], strides=[2, 2])
    mpq = B.node("QuantizeLinear", [mp, msn, mzn], "mpq")
    pooled = mulq.reshape(1, 8, 4, 2, 4, 2).max(axis=(3, 5))
    dp = B.node("DequantizeLinear", [mpq, msn, mzn], "dp")
    ap = B.node("AveragePool", [dp], "ap", kernel_shape=[4, 4])
    apq = B.node("QuantizeLinear", [ap, msn, mzn], "apq")
    avg = q(dq(pooled, 8.0, -100).mean(axis=(2, 3), keepdims=True), 8.0, -100)
    flat = B.node("Reshape", [apq, B.const("flat_shape", np.array([1, 8], np.int64))], "flat")
    # classifier: QLinearMatMul [1, 8] x [8, 10]
    w = rng.integers(-30, 31, size=(8, 10)).astype(np.int8)
    wn = B.const("fc_w", w)
    wsn, wzn = B.qparams("fc_wq", 0.0003, 0)
    ysn, yzn = B.qparams("fc_yq", 0.08, 3)
    fc = B.node("QLinearMatMul", [flat, msn, mzn, wn, wsn, wzn, ysn, yzn], "fc")
    fcq = q((avg.reshape(1, 8).astype(np.float64) + 100) @ w.astype(np.float64) * (8.0 * np.float64(np.float32(0.0003))),
            np.float64(np.float32(0.08)), 3)
    # softmax in the QDQ form the CMSIS-NN pattern takes, then back to float
    dfc = B.node("DequantizeLinear", [fc, ysn, yzn], "dfc")
    sm = B.node("Softmax", [dfc], "sm", axis=-1)
    psn, pzn = B.qparams("p", 1.0 / 256, -128)
    smq = B.node("QuantizeLinear", [sm, psn, pzn], "smq")
    B.node("DequantizeLinear", [smq, psn, pzn], "y")
    z = dq(fcq, np.float32(0.08), 3)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    expected = dq(q(e / e.sum(axis=-1, keepdims=True), 1.0 / 256, -128), 1.0 / 256, -128).astype(np.float32)
    g = helper.make_graph(B.nodes, "qlinear_cnn", [graph_in],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], B.inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    onnx.save(m, path)
    return model_input, expected


def qdq_softmax(path):
    subprocess.run(["/usr/bin/python3", os.path.join(HERE, "qdq_model.py"), path], check=True)
    m = onnx.load(path)
    init = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    rng = np.random.default_rng(5)
    x = rng.uniform(-6, 6, size=(1, 8, 6, 6)).astype(np.float32)
    f = lambda k: np.float64(init[k])  # noqa: E731
    xq = q(x.astype(np.float64), f("x_s"), int(init["x_zp"]))
    acc = conv(xq.astype(np.float64) - int(init["x_zp"]), init["w"].astype(np.float64), 1) + \
        init["b"][None, :, None, None]
    cq = q(acc * f("x_s") * f("w_s"), f("y_s"), int(init["y_zp"]))
    c = dq(cq, f("y_s"), int(init["y_zp"]))
    e = np.exp(c - c.max(axis=-1, keepdims=True))
    s = e / e.sum(axis=-1, keepdims=True)
    y = dq(q(s, f("p_s"), int(init["p_zp"])), f("p_s"), int(init["p_zp"]))
    return x, y.astype(np.float32)


def main():
    out = sys.argv[1]
    makers = {
        "qlinear_cnn": lambda p: qlinear_cnn(p, False),
        "qlinear_cnn_i8": lambda p: qlinear_cnn(p, True),
        "qdq_softmax": qdq_softmax,
    }
    for name, make in makers.items():
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        x, y = make(os.path.join(d, "model.onnx"))
        np.save(os.path.join(d, "input_0.npy"), x)
        np.save(os.path.join(d, "expected_0.npy"), y)


if __name__ == "__main__":
    main()
