#!/usr/bin/env python3
"""ONNX test cases (the libonnx-testdata layout: model.onnx, test_data_set_0/{input,output}_0.pb)
that send each target-aware convolution kernel of docs/lowering.md through a whole compile:
Winograd (3x3 stride 1, 16+ channels, 16+ tiles), row-vectorized (a stem), depthwise (stride 2 and
narrow rows), pixel-vectorized 1x1 with a tail of pixels, channel-blocked. Expected outputs come from numpy (tests/daemon/lower/numpy_ref.py's
conv2d, written from the ONNX operator definition), not from tth.

usage: make_conv_cases.py OUTDIR      -> OUTDIR/<case>/...; exit status 77 without numpy or onnx
"""
import os
import sys

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError:
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "daemon", "lower"))
from numpy_ref import avg_pool, conv2d, max_pool  # noqa: E402

RNG = np.random.default_rng(20261124)


def rnd(shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


class Graph:
    def __init__(self, x):
        self.x = x
        self.nodes, self.inits = [], []
        self.n = 0

    def const(self, a):
        name = "c%d" % len(self.inits)
        self.inits.append(numpy_helper.from_array(a, name))
        return name

    def node(self, op, inputs, **attrs):
        self.n += 1
        out = "t%d" % self.n
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out


def conv(g, name, val, w, b, strides=(1, 1), pads=(0, 0, 0, 0), groups=1):
    """ONNX Conv (pads t, l, b, r as numpy_ref's order; ONNX writes t, l, b, r as begin h, begin
    w, end h, end w) and its numpy value"""
    ins = [name, g.const(w)] + ([g.const(b)] if b is not None else [])
    out = g.node("Conv", ins, strides=list(strides), pads=[pads[0], pads[1], pads[2], pads[3]], group=groups)
    y = conv2d(val, w, b, list(strides), list(pads), [1, 1], groups).astype(np.float32)
    return out, y


def relu(g, name, val):
    return g.node("Relu", [name]), np.maximum(val, 0)


def add(g, an, a, bn, b):
    return g.node("Add", [an, bn]), (a + b).astype(np.float32)


def case_winograd(g, x):
    # 16 -> 32 -> 16 channels on 18x18 (5x5 tiles, the last row and column partial), bias, relu,
    # a residual add of the input
    h, hv = conv(g, "x", x, rnd((32, 16, 3, 3), 0.1), rnd((32,), 0.1), pads=(1, 1, 1, 1))
    h, hv = relu(g, h, hv)
    y, yv = conv(g, h, hv, rnd((16, 32, 3, 3), 0.1), None, pads=(1, 1, 1, 1))
    return add(g, y, yv, "x", x)


def case_stem(g, x):
    # 3 -> 20 channels, 3x3 stride 2, rows of 38: the row-vectorized kernel; then 7x7 stride 2
    h, hv = conv(g, "x", x, rnd((20, 3, 3, 3), 0.3), rnd((20,), 0.1), strides=(2, 2), pads=(1, 1, 1, 1))
    h, hv = relu(g, h, hv)
    return conv(g, h, hv, rnd((8, 20, 7, 7), 0.05), None, strides=(2, 2), pads=(3, 3, 3, 3))


def case_depthwise(g, x):
    # depthwise stride 2 (phase-split copy), then stride 1 on a narrow image (row tiles), then a
    # pointwise channel-blocked convolution
    c = x.shape[1]
    h, hv = conv(g, "x", x, rnd((c, 1, 3, 3), 0.3), rnd((c,), 0.1), strides=(2, 2), pads=(1, 1, 1, 1), groups=c)
    h, hv = relu(g, h, hv)
    h, hv = conv(g, h, hv, rnd((c, 1, 3, 3), 0.3), None, pads=(1, 1, 1, 1), groups=c)
    return conv(g, h, hv, rnd((24, c, 1, 1), 0.2), rnd((24,), 0.1))


def case_depthwise_windows(g, x):
    # depthwise on rows of 45 (stride 1: windows of 16 output rows, 37 rows = two windows and 5
    # left over) with asymmetric padding, then stride 2 with a 5x5 kernel (windows of 8 rows)
    c = x.shape[1]
    h, hv = conv(g, "x", x, rnd((c, 1, 3, 3), 0.3), rnd((c,), 0.1), pads=(1, 0, 1, 2), groups=c)
    h, hv = relu(g, h, hv)
    return conv(g, h, hv, rnd((c, 1, 5, 5), 0.2), None, strides=(2, 2), pads=(2, 2, 1, 2), groups=c)


def case_pointwise_tail(g, x):
    # 1x1 convolutions on 9x11 = 99 pixels, not a multiple of any vector width (AVX-512: a tile
    # of 4 vectors, then 2 vectors and a tail of 3 pixels): 24 -> 40 with bias and relu, then
    # 40 -> 24 plus the input (a residual read with the tail's lanes)
    h, hv = conv(g, "x", x, rnd((40, 24, 1, 1), 0.2), rnd((40,), 0.1))
    h, hv = relu(g, h, hv)
    y, yv = conv(g, h, hv, rnd((24, 40, 1, 1), 0.2), None)
    return add(g, y, yv, "x", x)


def case_pointwise_chain(g, x):
    # 18 1x1 convolutions with relu: 18 weights of 2304 bytes, more constants than one line of
    # each table in the generated <model>_bind.c (docs/artifact.md, "Constants bound at run time")
    name, val = "x", x
    for _ in range(18):
        name, val = conv(g, name, val, rnd((24, 24, 1, 1), 0.3), rnd((24,), 0.1))
        name, val = relu(g, name, val)
    return name, val


def case_pools(g, x):
    # max 3x3 stride 2 with padding (the row-vectorized kernel's stride-2 loads, edge columns by
    # the generic code), average 3x3 stride 1 with padding (taps inside the image), then max 2x2
    # stride 2 without padding
    h = g.node("MaxPool", ["x"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    hv = max_pool(x, [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], False)
    h2 = g.node("AveragePool", [h], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    hv = avg_pool(hv, [3, 3], [1, 1], [1, 1, 1, 1], False, False)
    h3 = g.node("MaxPool", [h2], kernel_shape=[2, 2], strides=[2, 2])
    return h3, max_pool(hv, [2, 2], [2, 2], [0, 0, 0, 0], [1, 1], False)


def case_blocked_pools(g, x):
    # pools of a convolution's blocked channels (NCHW<b>c): the inner pixels' code with its taps
    # unrolled (max 3x3 stride 2) or looped (average 5x5, 25 taps), dilated (max 2x2 at
    # dilation 2), the border pixels by the generic code
    h, hv = conv(g, "x", x, rnd((16, 8, 3, 3), 0.2), rnd((16,), 0.1), pads=(1, 1, 1, 1))
    h, hv = relu(g, h, hv)
    h = g.node("MaxPool", [h], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    hv = max_pool(hv, [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], False)
    h = g.node("AveragePool", [h], kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2])
    hv = avg_pool(hv, [5, 5], [1, 1], [2, 2, 2, 2], False, False)
    h = g.node("MaxPool", [h], kernel_shape=[2, 2], strides=[1, 1], dilations=[2, 2])
    return h, max_pool(hv, [2, 2], [1, 1], [0, 0, 0, 0], [2, 2], False).astype(np.float32)


def case_dilated_sparse(g, x):
    # 3x3 at dilation 12 over 14x14 (most taps in the padding: each tile loops over the taps
    # inside the image), then at dilation 3
    h, hv = conv_d(g, "x", x, rnd((32, 32, 3, 3), 0.1), rnd((32,), 0.1), (12, 12, 12, 12), 12)
    h, hv = relu(g, h, hv)
    return conv_d(g, h, hv, rnd((16, 32, 3, 3), 0.1), None, (3, 3, 3, 3), 3)


def conv_d(g, name, val, w, b, pads, dil):
    ins = [name, g.const(w)] + ([g.const(b)] if b is not None else [])
    out = g.node("Conv", ins, pads=list(pads), dilations=[dil, dil])
    return out, conv2d(val, w, b, [1, 1], list(pads), [dil, dil], 1).astype(np.float32)


def conv_chain(g, name, val, layers):
    # convolutions, each but the last followed by ReLU; a layer: (weight shape, weight scale, with
    # bias, strides, pads, groups)
    for i, (ws, scale, bias, strides, pads, groups) in enumerate(layers):
        w = rnd(ws, scale)
        name, val = conv(g, name, val, w, rnd((ws[0],), 0.1) if bias else None, strides=strides, pads=pads, groups=groups)
        if i + 1 < len(layers):
            name, val = relu(g, name, val)
    return name, val


def case_grouped(g, x):
    # 1x1 32 -> 32, then a grouped 3x3 of 2 groups of 16 channels (blocked channels on every
    # vector target: 16 fills blocks of 4, 8 and 16), stride 2, then 1x1 32 -> 24
    return conv_chain(g, "x", x, [((32, 32, 1, 1), 0.2, True, (1, 1), (0, 0, 0, 0), 1),
                                  ((32, 16, 3, 3), 0.15, True, (2, 2), (1, 1, 1, 1), 2),
                                  ((24, 32, 1, 1), 0.2, False, (1, 1), (0, 0, 0, 0), 1)])


def case_grouped_windows(g, x):
    # groups of 16 channels whose tasks copy their own padded rows into windows on the stack
    # (docs/lowering.md, "Windows of a group"): 1x1 48 -> 48, a grouped 3x3 of 3 groups on rows
    # wider than 16 (a window of three rows per output row), one of stride 2 onto a narrow image
    # (tasks of pixel runs crossing rows), 1x1 48 -> 144, one of 9 groups on a 3x5 image (more
    # channels than eight images: groups outermost, a window of the whole padded plane), 1x1
    # 144 -> 24
    return conv_chain(g, "x", x, [((48, 48, 1, 1), 0.2, True, (1, 1), (0, 0, 0, 0), 1),
                                  ((48, 16, 3, 3), 0.15, True, (1, 1), (1, 2, 1, 0), 3),
                                  ((48, 16, 3, 3), 0.15, False, (2, 2), (1, 1, 1, 1), 3),
                                  ((144, 48, 1, 1), 0.2, True, (1, 1), (0, 0, 0, 0), 1),
                                  ((144, 16, 3, 3), 0.15, True, (2, 2), (1, 1, 1, 1), 9),
                                  ((24, 144, 1, 1), 0.1, False, (1, 1), (0, 0, 0, 0), 1)])


def case_layer_norm(g, x):
    # LayerNormalization over the last axis of 70 features (opset 17: nn.layer_norm, a vector and
    # a tail on every vector width), then a dense layer and GELU (Erf)
    d = x.shape[-1]
    gam, bet = rnd((d,), 0.5) + 1, rnd((d,), 0.2)
    n = g.node("LayerNormalization", ["x", g.const(gam), g.const(bet)], axis=-1, epsilon=1e-5)
    xv = x.astype(np.float64)
    m = xv.mean(-1, keepdims=True)
    yv = (xv - m) / np.sqrt(((xv - m) ** 2).mean(-1, keepdims=True) + 1e-5) * gam + bet
    w = rnd((d, 48), 0.1)
    h = g.node("MatMul", [n, g.const(w)])
    hv = yv @ w
    e = g.node("Erf", [g.node("Div", [h, g.const(np.array(np.sqrt(2), np.float32))])])
    y = g.node("Mul", [g.node("Mul", [h, g.node("Add", [e, g.const(np.array(1, np.float32))])]),
                       g.const(np.array(0.5, np.float32))])
    import math
    return y, (0.5 * hv * (1 + np.vectorize(math.erf)(hv / np.sqrt(2)))).astype(np.float32)


def case_grouped_small(g, x):
    # 1x1 32 -> 32, grouped 3x3 of 8 groups of 4 channels, grouped 3x3 of 4 groups of 8, stride
    # 2, grouped 3x3 of 16 groups of 2, 1x1 32 -> 24: groups smaller than a block, the grouped
    # kernel's permuted loads (docs/layouts.md, "Small groups": groups of 4 and 8 at 16 lanes, of
    # 4 at 8, of 2 at every width, AArch64's 4 lanes included)
    return conv_chain(g, "x", x, [((32, 32, 1, 1), 0.2, True, (1, 1), (0, 0, 0, 0), 1),
                                  ((32, 4, 3, 3), 0.3, True, (1, 1), (1, 1, 1, 1), 8),
                                  ((32, 8, 3, 3), 0.2, False, (2, 2), (1, 1, 1, 1), 4),
                                  ((32, 2, 3, 3), 0.4, True, (1, 1), (1, 0, 1, 2), 16),
                                  ((24, 32, 1, 1), 0.2, False, (1, 1), (0, 0, 0, 0), 1)])


def case_attention(g, x):
    # one self-attention layer of 4 heads over 19 positions of 64 features: projections (the
    # register-tiled matmul), softmax(Q K^T / 4 + causal mask) V (the batched matmul and the
    # softmax rows, with rows of 19: a vector and a tail), the output projection
    t, d, h = x.shape[1], x.shape[2], 4
    dh = d // h
    xv = x.astype(np.float64)[0]

    def heads(name, val, perm):
        w = rnd((d, d), 0.15)
        p = g.node("MatMul", [name, g.const(w)])
        r = g.node("Reshape", [p, g.const(np.array([1, t, h, dh], np.int64))])
        return g.node("Transpose", [r], perm=perm), (val @ w).reshape(t, h, dh)

    q, qv = heads("x", xv, [0, 2, 1, 3])
    k, kv = heads("x", xv, [0, 2, 3, 1])
    v, vv = heads("x", xv, [0, 2, 1, 3])
    mask = np.triu(np.full((t, t), -1e4, np.float32), 1)
    s = g.node("Add", [g.node("Div", [g.node("MatMul", [q, k]), g.const(np.array(4.0, np.float32))]), g.const(mask)])
    p = g.node("Softmax", [s], axis=-1)
    o = g.node("Transpose", [g.node("MatMul", [p, v])], perm=[0, 2, 1, 3])
    o = g.node("Reshape", [o, g.const(np.array([1, t, d], np.int64))])
    wo = rnd((d, d), 0.15)
    y = g.node("MatMul", [o, g.const(wo)])
    sv = np.einsum("hid,hjd->hij", qv.transpose(1, 0, 2), kv.transpose(1, 0, 2)) / 4 + mask
    pv = np.exp(sv - sv.max(-1, keepdims=True))
    pv /= pv.sum(-1, keepdims=True)
    ov = np.einsum("hij,hjd->hid", pv, vv.transpose(1, 0, 2)).transpose(1, 0, 2).reshape(t, d)
    return y, (ov @ wo)[None].astype(np.float32)


def case_input_blocks(g, x):
    # a 3x3 convolution of 256 -> 40 channels at dilation 2: the channel-blocked kernel reduces
    # over blocks of input channels at every vector width (docs/lowering.md, "Blocks of input
    # channels"), the last block of another length; bias and relu after the last block, then a
    # Winograd layer of more output channels than tiles (40 -> 64 on 4x4 tiles of 13x13: output
    # channels outermost)
    h, hv = conv_d(g, "x", x, rnd((40, 256, 3, 3), 0.05), rnd((40,), 0.1), (2, 2, 2, 2), 2)
    h, hv = relu(g, h, hv)
    return conv(g, h, hv, rnd((64, 40, 3, 3), 0.1), rnd((64,), 0.1), pads=(1, 1, 1, 1))


def case_k_blocks(g, x):
    # a dense layer whose weight is larger than its input (a transformer's projection): K in
    # blocks with partial sums carried between them (300 = three blocks of 100: the first, a
    # middle one, the last), 30 rows, 520 columns (whole panels at 4 and 16 lanes, then single
    # columns at 16), bias and relu after the last block
    w, b = rnd((x.shape[-1], 520), 0.1), rnd((520,), 0.5)
    y = g.node("Relu", [g.node("Add", [g.node("MatMul", ["x", g.const(w)]), g.const(b)])])
    return y, np.maximum(x.astype(np.float64) @ w + b, 0).astype(np.float32)


CASES = {
    "k_blocks": ((1, 30, 300), case_k_blocks),
    "input_blocks": ((1, 256, 13, 13), case_input_blocks),
    "layer_norm": ((2, 9, 70), case_layer_norm, 17),
    "dilated_sparse": ((1, 32, 14, 14), case_dilated_sparse),
    "grouped": ((1, 32, 15, 14), case_grouped),
    "grouped_small": ((1, 32, 13, 11), case_grouped_small),
    "grouped_windows": ((1, 48, 9, 20), case_grouped_windows),
    "attention": ((1, 19, 64), case_attention),
    "pools": ((2, 8, 37, 75), case_pools),
    "blocked_pools": ((1, 8, 23, 26), case_blocked_pools),
    "winograd_residual": ((1, 16, 18, 18), case_winograd),
    "pointwise_tail": ((2, 24, 9, 11), case_pointwise_tail),
    "pointwise_chain": ((1, 24, 9, 11), case_pointwise_chain),
    "depthwise_windows": ((2, 5, 37, 45), case_depthwise_windows),
    "stem_rows": ((1, 3, 41, 75), case_stem),
    "depthwise_chain": ((2, 24, 27, 13), case_depthwise),
}


def write(outdir, name, shape, build, opset=13):
    x = rnd(shape)
    g = Graph(x)
    yname, y = build(g, x)
    graph = helper.make_graph(
        g.nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info(yname, TensorProto.FLOAT, list(y.shape))], g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    d = os.path.join(outdir, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    with open(os.path.join(d, "test_data_set_0", "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x, "x").SerializeToString())
    with open(os.path.join(d, "test_data_set_0", "output_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(np.ascontiguousarray(y), yname).SerializeToString())


def main():
    outdir = sys.argv[1]
    for name, case in CASES.items():
        write(outdir, name, *case)


if __name__ == "__main__":
    main()
