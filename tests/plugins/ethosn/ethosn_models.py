#!/usr/bin/python3
"""Quantized ONNX models for running the ethos-n kind, each with an input and its expected output
computed here with numpy from the ONNX operator definitions (float64, round half to even,
saturation), independently of tth. With tests/plugins/cmsisnn/int8_models.py they are what
tests/plugins/ethosn/executed.py compiles and runs.

    ethosn_models.py OUT_DIR

writes OUT_DIR/<name>/model.onnx, input_0.npy, expected_0.npy and offloaded.json (the operators
the ethos-n kind must take) for:
  npu_ple      float input -> QuantizeLinear -> QLinearConv 3x3 -> the PLE's operators in QDQ form:
               Sigmoid (1/256, -128), Tanh (1/128, 0) and LeakyRelu concatenated along channels
               (48), MaxPool 2x2/2, Pad 1, Resize linear to 8x8, GlobalAveragePool (8x8) ->
               Reshape -> QLinearMatMul -> DequantizeLinear -> float
  npu_uint8    uint8 input -> QLinearConv 1x1 (uint8 weights, zero point 128) -> MaxPool 3x3/1
               SAME, Pad, Resize nearest 2x and Transpose to NHWC directly on the uint8 data
"""
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "cmsisnn"))
from int8_models import Builder, conv, dq, q  # noqa: E402


def f32(v):
    return np.float64(np.float32(v))


def qdq_node(B, op, x, xq_params, yq_params, out, **attrs):
    """DequantizeLinear -> op -> QuantizeLinear; returns the quantized output's name"""
    d = B.node("DequantizeLinear", [x, xq_params[0], xq_params[1]], out + "_dq")
    o = B.node(op, [d], out + "_f", **attrs)
    return B.node("QuantizeLinear", [o, yq_params[0], yq_params[1]], out)


def resize_linear_half_pixel(x, oh, ow):
    n, c, h, w = x.shape
    y = np.zeros((n, c, oh, ow))
    for i in range(oh):
        cy = (i + 0.5) * h / oh - 0.5
        fy = np.floor(cy)
        y0, y1 = int(min(max(fy, 0), h - 1)), int(min(max(fy + 1, 0), h - 1))
        for j in range(ow):
            cx = (j + 0.5) * w / ow - 0.5
            fx = np.floor(cx)
            x0, x1 = int(min(max(fx, 0), w - 1)), int(min(max(fx + 1, 0), w - 1))
            ry, rx = cy - fy, cx - fx
            top = x[:, :, y0, x0] * (1 - rx) + x[:, :, y0, x1] * rx
            bot = x[:, :, y1, x0] * (1 - rx) + x[:, :, y1, x1] * rx
            y[:, :, i, j] = top * (1 - ry) + bot * ry
    return y


def npu_ple(path):
    rng = np.random.default_rng(3)
    B = Builder(rng)
    xs, xzp = 0.03, 0
    x = rng.uniform(-3, 3, size=(1, 16, 8, 8)).astype(np.float32)
    xq = q(x.astype(np.float64), f32(xs), xzp)
    xsn, xzn = B.qparams("x", xs, xzp)
    x_in = B.node("QuantizeLinear", ["x", xsn, xzn], "xq")
    c1, c1q = B.qlinearconv((x_in, xsn, xzn), xq, xs, xzp, 16, 3, 1, 1, 0.05, 0, "conv1")
    d1 = dq(c1q, f32(0.05), 0)
    # the PLE's activations, each with the output quantization the N78 fixes for it
    sig_p, tanh_p, lr_p = B.qparams("sig", 1.0 / 256, -128), B.qparams("tanh", 1.0 / 128, 0), \
        B.qparams("lr", 0.05, -20)
    sig = qdq_node(B, "Sigmoid", c1[0], c1[1:], sig_p, "sig")
    th = qdq_node(B, "Tanh", c1[0], c1[1:], tanh_p, "tanh")
    lr = qdq_node(B, "LeakyRelu", c1[0], c1[1:], lr_p, "lr", alpha=0.1)
    d1f = d1.astype(np.float32).astype(np.float64)
    sigq = q(1 / (1 + np.exp(-d1f)), 1.0 / 256, -128)
    thq = q(np.tanh(d1f), 1.0 / 128, 0)
    lrq = q(np.where(d1f < 0, d1f * f32(0.1), d1f), f32(0.05), -20)
    # concatenate the three (differently quantized) along channels: 48, a multiple of 16
    cat_p = B.qparams("cat", 0.02, -10)
    parts = [B.node("DequantizeLinear", [n, p[0], p[1]], n + "_cdq") for n, p in ((sig, sig_p), (th, tanh_p),
                                                                                  (lr, lr_p))]
    cat = B.node("Concat", parts, "cat_f", axis=1)
    catn = B.node("QuantizeLinear", [cat, cat_p[0], cat_p[1]], "cat")
    catq = q(np.concatenate([dq(sigq, 1.0 / 256, -128), dq(thq, 1.0 / 128, 0), dq(lrq, f32(0.05), -20)],
                            axis=1).astype(np.float32).astype(np.float64), f32(0.02), -10)
    # max pool 2x2/2, pad 1 (zeros), resize linear back to 8x8, average of the 8x8 plane
    mp = qdq_node(B, "MaxPool", catn, cat_p, cat_p, "mp", kernel_shape=[2, 2], strides=[2, 2])
    mpq = catq.reshape(1, 48, 4, 2, 4, 2).max(axis=(3, 5))
    pads = B.const("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))
    dmp = B.node("DequantizeLinear", [mp, cat_p[0], cat_p[1]], "pd_dq")
    pdf = B.node("Pad", [dmp, pads], "pd_f", mode="constant")
    pd = B.node("QuantizeLinear", [pdf, cat_p[0], cat_p[1]], "pd")
    pdq = q(np.pad(dq(mpq, f32(0.02), -10).astype(np.float32), ((0, 0), (0, 0), (1, 1), (1, 1))).astype(np.float64),
            f32(0.02), -10)
    sizes = B.const("sizes", np.array([1, 48, 8, 8], np.int64))
    drs = B.node("DequantizeLinear", [pd, cat_p[0], cat_p[1]], "rs_dq")
    rsf = B.node("Resize", [drs, "", "", sizes], "rs_f", mode="linear", coordinate_transformation_mode="half_pixel")
    rs = B.node("QuantizeLinear", [rsf, cat_p[0], cat_p[1]], "rs")
    rsq = q(resize_linear_half_pixel(dq(pdq, f32(0.02), -10).astype(np.float32).astype(np.float64), 8, 8)
            .astype(np.float32).astype(np.float64), f32(0.02), -10)
    gap_p = B.qparams("gap", 0.01, 0)
    gap = qdq_node(B, "GlobalAveragePool", rs, cat_p, gap_p, "gap")
    gapq = q(dq(rsq, f32(0.02), -10).astype(np.float32).astype(np.float64).mean(axis=(2, 3), keepdims=True)
             .astype(np.float32).astype(np.float64), f32(0.01), 0)
    flat = B.node("Reshape", [gap, B.const("flat_shape", np.array([1, 48], np.int64))], "flat")
    w = rng.integers(-40, 41, size=(48, 10)).astype(np.int8)
    wn = B.const("fc_w", w)
    wsn, wzn = B.qparams("fc_wq", 0.01, 0)
    ysn, yzn = B.qparams("fc_yq", 0.05, 2)
    fc = B.node("QLinearMatMul", [flat, gap_p[0], gap_p[1], wn, wsn, wzn, ysn, yzn], "fc")
    B.node("DequantizeLinear", [fc, ysn, yzn], "y")
    fcq = q(gapq.reshape(1, 48).astype(np.float64) @ w.astype(np.float64) * (f32(0.01) * f32(0.01)), f32(0.05), 2)
    expected = dq(fcq, f32(0.05), 2).astype(np.float32)
    g = helper.make_graph(B.nodes, "npu_ple", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], B.inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    onnx.save(m, path)
    offloaded = ["qnn.conv2d", "qnn.requantize", "sigmoid", "tanh", "nn.leaky_relu", "concatenate", "nn.max_pool2d",
                 "nn.pad", "image.resize2d", "nn.global_avg_pool2d", "reshape", "qnn.matmul"]
    return x, expected, 0.05, offloaded


def npu_uint8(path):
    rng = np.random.default_rng(8)
    B = Builder(rng)
    x = rng.integers(0, 256, size=(1, 16, 6, 6)).astype(np.uint8)
    w = rng.integers(100, 157, size=(32, 16, 1, 1)).astype(np.uint8)
    b = rng.integers(-300, 301, size=(32,)).astype(np.int32)
    init = [("x_s", np.array(0.02, np.float32)), ("x_zp", np.array(120, np.uint8)), ("w", w),
            ("w_s", np.array(0.004, np.float32)), ("w_zp", np.array(128, np.uint8)),
            ("y_s", np.array(0.03, np.float32)), ("y_zp", np.array(110, np.uint8)), ("b", b),
            ("pads", np.array([0, 0, 1, 0, 0, 0, 0, 2], np.int64)),
            ("scales", np.array([1, 1, 2, 2], np.float32))]
    for name, v in init:
        B.const(name, v)
    B.node("QLinearConv", ["x", "x_s", "x_zp", "w", "w_s", "w_zp", "y_s", "y_zp", "b"], "c")
    B.node("MaxPool", ["c"], "mp", kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    B.node("Pad", ["mp", "pads"], "pd", mode="constant")
    B.node("Resize", ["pd", "", "scales"], "rs", mode="nearest", coordinate_transformation_mode="asymmetric",
           nearest_mode="floor")
    B.node("Transpose", ["rs"], "y", perm=[0, 2, 3, 1])
    acc = conv(x.astype(np.float64) - 120, w.astype(np.float64) - 128, 0) + b[None, :, None, None]
    cq = q(acc * (f32(0.02) * f32(0.004)), f32(0.03), 110, np.uint8)
    # the max over the taps inside the image: padding with 0, the smallest uint8, never changes it
    cp = np.pad(cq, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=0)
    mp = np.stack([cp[:, :, i:i + 6, j:j + 6] for i in range(3) for j in range(3)]).max(axis=0)
    pd = np.pad(mp, ((0, 0), (0, 0), (1, 0), (0, 2)))
    rs = pd.repeat(2, axis=2).repeat(2, axis=3)
    expected = rs.transpose(0, 2, 3, 1).astype(np.uint8)
    g = helper.make_graph(B.nodes, "npu_uint8", [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 16, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, list(expected.shape))], B.inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    onnx.save(m, path)
    return x, expected, 1, ["qnn.conv2d", "qnn.requantize", "nn.max_pool2d", "nn.pad", "image.resize2d", "transpose"]


def main():
    out = sys.argv[1]
    for name, make in (("npu_ple", npu_ple), ("npu_uint8", npu_uint8)):
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        x, y, step, offloaded = make(os.path.join(d, "model.onnx"))
        np.save(os.path.join(d, "input_0.npy"), x)
        np.save(os.path.join(d, "expected_0.npy"), y)
        with open(os.path.join(d, "offloaded.json"), "w") as f:
            json.dump({"step": step, "ops": offloaded}, f)


if __name__ == "__main__":
    main()
