#!/usr/bin/python3
"""Cases for the unit tests of the Ethos-N78 functional model (tests/plugins/ethosn/test_model.c).

    model_cases.py OUT_DIR

Writes, for every case, a network blob in the tth-ethosn-network v2 format, written here from
plugins/ethosn/FORMAT.md independently of the plugin's writer, its inputs and outside constants, and
its expected outputs computed with numpy (float64, round half to even, saturation) independently of
the model; plus networks broken on purpose with the status each must get, and a parameters file.
OUT_DIR/manifest.json lists them:

  {"cases": [{"name", "inputs": [file], "constants": [file or null], "outputs": [{"file", "dtype",
              "tolerance"}], "params": file}],
   "broken": [{"name", "file", "status", "why"}]}

tolerance is in units of the output's integer type (0: exact). It is 1 where the model and numpy
may legitimately round differently: transcendental functions (libm's exp/tanh against numpy's) and
sums whose order differs (numpy's mean is pairwise).
"""
import json
import os
import struct
import sys

import numpy as np

DT = {np.dtype("float32"): 1, np.dtype("float64"): 3, np.dtype("int8"): 4, np.dtype("int16"): 5,
      np.dtype("int32"): 6, np.dtype("int64"): 7, np.dtype("uint8"): 8}

# statuses of ethosn_model.h
MAGIC, VERSION, TRUNCATED, CORRUPT, UNSUPPORTED = -101, -102, -103, -104, -105


def u8(v):
    return struct.pack("<B", v)


def u32(v):
    return struct.pack("<I", v)


def u64(v):
    return struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF)


def f64(v):
    return struct.pack("<d", v)


def sstr(s):
    b = s.encode() if isinstance(s, str) else s
    return u32(len(b)) + b


def ttype(dtype, shape):
    return u8(DT[np.dtype(dtype)]) + u8(len(shape)) + b"".join(u64(d) for d in shape)


def attrs_bytes(attrs):
    out = u32(len(attrs))
    for k in sorted(attrs):
        v = attrs[k]
        out += sstr(k)
        if isinstance(v, bool):
            out += u8(4) + u8(1 if v else 0)
        elif isinstance(v, int):
            out += u8(1) + u64(v)
        elif isinstance(v, float):
            out += u8(2) + f64(v)
        elif isinstance(v, str):
            out += u8(3) + sstr(v)
        elif v is None:
            out += u8(7)
        elif all(isinstance(e, int) and not isinstance(e, bool) for e in v):
            out += u8(5) + u32(len(v)) + b"".join(u64(e) for e in v)
        else:
            out += u8(6) + u32(len(v)) + b"".join(f64(float(e)) for e in v)
    return out


class Net:
    """A region in the format of FORMAT.md; node values are kept for reference computations."""

    def __init__(self, sym="t"):
        self.sym, self.params, self.consts, self.nodes, self.types = sym, [], [], [], []

    def _add(self, body, types):
        self.nodes.append(body + u32(len(types)) + b"".join(ttype(d, s) for d, s in types))
        self.types.append(types)
        return len(self.nodes) - 1

    def param(self, dtype, shape):
        self.params.append((dtype, shape))
        return self._add(u8(1) + u32(len(self.params) - 1), [(dtype, shape)])

    def const(self, arr):
        arr = np.asarray(arr)
        self.consts.append(arr)
        return self._add(u8(2) + u32(len(self.consts) - 1), [(arr.dtype, arr.shape)])

    def call(self, op, args, attrs, dtype, shape, more=None):
        types = [(dtype, shape)] + (more or [])
        body = u8(3) + sstr(op) + u32(len(args)) + b"".join(u32(a) for a in args) + attrs_bytes(attrs)
        return self._add(body, types)

    def tuple_(self, fields):
        return self._add(u8(4) + u32(len(fields)) + b"".join(u32(f) for f in fields),
                         [self.types[f][0] for f in fields])

    def get(self, tup, index):
        return self._add(u8(5) + u32(tup) + u32(index), [self.types[tup][index]])

    def blob(self, result, version=2):
        b = b"TTHEN78\0" + u32(version) + sstr("model_cases.py") + sstr("a test network") + sstr("n78")
        b += u32(4) + u32(2) + u32(1024) + sstr(self.sym)
        b += u32(len(self.params)) + b"".join(sstr("p%d" % i) + ttype(d, s) for i, (d, s) in enumerate(self.params))
        b += u32(len(self.consts))
        self.flag_at = []  # where each constant's inline flag is
        for i, c in enumerate(self.consts):
            b += sstr("%s_const%d" % (self.sym, i)) + sstr("") + ttype(c.dtype, c.shape) + u64(0)
            self.flag_at.append(len(b))
            b += (u8(1) + f64(float(c.reshape(-1)[0]))) if c.size == 1 else u8(0)
        b += u32(len(self.nodes))
        self.node_at = []  # where each node starts
        for n in self.nodes:
            self.node_at.append(len(b))
            b += n
        return b + u32(result)

    def params_file(self, prefix="ethos-n."):
        """the artifact's parameters file (README.txt's format) with the outside constants"""
        entries = [(prefix + "%s_const%d" % (self.sym, i), c) for i, c in enumerate(self.consts) if c.size > 1]
        b = b"TTHPARAM" + u32(1) + u32(len(entries) + 1)
        entries.insert(0, ("host.something_else", np.arange(5, dtype=np.int8)))
        for name, c in entries:
            b += sstr(name) + u32(DT[c.dtype]) + u32(c.ndim) + b"".join(u64(d) for d in c.shape) + u64(c.nbytes)
            b += b"\0" * ((64 - len(b) % 64) % 64) + np.ascontiguousarray(c).tobytes()
        return b


# ---- numpy references -------------------------------------------------------------------------

def sat(v, dt):
    info = np.iinfo(dt)
    return np.clip(v, info.min, info.max).astype(dt)


def quantize(x, s, zp, dt, axis=1):
    s, zp = np.asarray(s, np.float64), np.asarray(zp, np.float64)
    if s.size > 1:
        shape = [1] * x.ndim
        shape[axis] = -1
        s, zp = s.reshape(shape), zp.reshape(shape) if zp.size > 1 else zp
    return sat(np.round(x.astype(np.float64) / s) + zp, dt)


def dequantize(x, s, zp):
    return ((x.astype(np.float64) - np.float64(zp)) * np.float64(s)).astype(np.float32)


def requantize(acc, isc, izp, osc, ozp, dt, axis=1):
    isc = np.asarray(isc, np.float64)
    if isc.size > 1:
        shape = [1] * acc.ndim
        shape[axis] = -1
        isc = isc.reshape(shape)
    return sat(np.round((acc.astype(np.float64) - izp) * (isc / np.float64(osc))) + ozp, dt)


def qconv(x, w, xzp, wzp, strides=(1, 1), pad=(0, 0, 0, 0), dil=(1, 1), groups=1):
    """int64 NCHW convolution of (x - xzp) and (w - wzp[o]); padding contributes nothing"""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xs = np.pad(x.astype(np.int64) - xzp, ((0, 0), (0, 0), (pad[0], pad[2]), (pad[1], pad[3])))
    ws = w.astype(np.int64) - np.asarray(wzp, np.int64).reshape(-1, 1, 1, 1)
    oh = (h + pad[0] + pad[2] - dil[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (wd + pad[1] + pad[3] - dil[1] * (kw - 1) - 1) // strides[1] + 1
    y = np.zeros((n, o, oh, ow), np.int64)
    opg = o // groups
    for oc in range(o):
        g = oc // opg
        for ky in range(kh):
            for kx in range(kw):
                y0, x0 = ky * dil[0], kx * dil[1]
                patch = xs[:, g * cg:(g + 1) * cg, y0:y0 + strides[0] * (oh - 1) + 1:strides[0],
                           x0:x0 + strides[1] * (ow - 1) + 1:strides[1]]
                y[:, oc] += np.einsum("nchw,c->nhw", patch, ws[oc, :, ky, kx])
    return y.astype(np.int32)


def pool(x, k, s, pad, op, include_pad=False, dil=(1, 1)):
    n, c, h, w = x.shape
    oh = (h + pad[0] + pad[2] - dil[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (w + pad[1] + pad[3] - dil[1] * (k[1] - 1) - 1) // s[1] + 1
    y = np.zeros((n, c, oh, ow), np.float64)
    for i in range(oh):
        for j in range(ow):
            vals, taps = [], 0
            for ky in range(k[0]):
                for kx in range(k[1]):
                    iy, ix = i * s[0] - pad[0] + ky * dil[0], j * s[1] - pad[1] + kx * dil[1]
                    taps += 1
                    if 0 <= iy < h and 0 <= ix < w:
                        vals.append(x[:, :, iy, ix].astype(np.float64))
            v = np.stack(vals)
            y[:, :, i, j] = v.max(0) if op == "max" else v.sum(0) / (taps if include_pad else len(vals))
    return y


def resize_index(o, n_in, n_out, ct):
    scale = n_out / n_in
    if ct == "asymmetric":
        return o / scale
    if ct == "align_corners":
        return 0.0 if n_out == 1 else o * (n_in - 1) / (n_out - 1)
    if ct == "pytorch_half_pixel":
        return -0.5 if n_out == 1 else (o + 0.5) / scale - 0.5
    return (o + 0.5) / scale - 0.5


def nearest(v, mode):
    f = np.floor(v)
    if v == f:
        return int(f)
    r = v - f
    return {"round_prefer_floor": int(f) if r <= 0.5 else int(f) + 1,
            "round_prefer_ceil": int(f) if r < 0.5 else int(f) + 1,
            "floor": int(f), "ceil": int(f) + 1}[mode]


def resize(x, size, method, ct, nm):
    n, c, h, w = x.shape
    y = np.zeros((n, c) + tuple(size), np.float64)
    xf = x.astype(np.float64)
    for i in range(size[0]):
        cy = resize_index(i, h, size[0], ct)
        for j in range(size[1]):
            cx = resize_index(j, w, size[1], ct)
            if method == "nearest":
                y[:, :, i, j] = xf[:, :, min(max(nearest(cy, nm), 0), h - 1), min(max(nearest(cx, nm), 0), w - 1)]
            else:
                fy, fx = np.floor(cy), np.floor(cx)
                ry, rx = cy - fy, cx - fx
                y0, y1 = min(max(int(fy), 0), h - 1), min(max(int(fy) + 1, 0), h - 1)
                x0, x1 = min(max(int(fx), 0), w - 1), min(max(int(fx) + 1, 0), w - 1)
                top = xf[:, :, y0, x0] * (1 - rx) + xf[:, :, y0, x1] * rx
                bot = xf[:, :, y1, x0] * (1 - rx) + xf[:, :, y1, x1] * rx
                y[:, :, i, j] = top * (1 - ry) + bot * ry
    return y


# ---- the cases ----------------------------------------------------------------------------------

RNG = np.random.default_rng(2024)


def i8(*shape, lo=-128, hi=127):
    return RNG.integers(lo, hi + 1, size=shape).astype(np.int8)


def u8a(*shape):
    return RNG.integers(0, 256, size=shape).astype(np.uint8)


def sc(v):
    """a float32 scale as the float64 value the model reads"""
    return np.float32(v)


def qdq_unary(name, op, attrs, fn, x_s=0.05, x_zp=-3, y_s=0.04, y_zp=2, dt=np.int8, shape=(1, 16, 4, 4), tol=0):
    """dequantize -> op (float) -> quantize"""
    net = Net()
    x = (i8(*shape) if dt == np.int8 else u8a(*shape))
    p = net.param(dt, shape)
    d = net.call("qnn.dequantize", [p, net.const(sc(x_s)), net.const(np.array(x_zp, dt))], {"axis": 0},
                 np.float32, shape)
    f = fn(dequantize(x, sc(x_s), x_zp).astype(np.float64))
    e = net.call(op, [d], attrs, np.float32, f.shape)
    q = net.call("qnn.quantize", [e, net.const(sc(y_s)), net.const(np.array(y_zp, dt))],
                 {"axis": 0, "out_dtype": np.dtype(dt).name}, dt, f.shape)
    want = quantize(f.astype(np.float32), sc(y_s), y_zp, dt)
    return name, net, q, [x], [(want, tol)]


def conv_case(name, xdt, shape, w_shape, strides=(1, 1), pad=(0, 0, 0, 0), dil=(1, 1), groups=1, per_channel=False,
              relu=False):
    net = Net()
    x = i8(*shape) if xdt == np.int8 else u8a(*shape)
    w = i8(*w_shape, lo=-60, hi=60) if xdt == np.int8 else u8a(*w_shape)
    o = w_shape[0]
    xzp = -5 if xdt == np.int8 else 120
    wzp = (RNG.integers(-3, 4, size=o).astype(xdt) if xdt == np.int8 else RNG.integers(120, 136, size=o).astype(xdt)) \
        if per_channel else np.array(0 if xdt == np.int8 else 128, xdt)
    bias = RNG.integers(-2000, 2001, size=(o, 1, 1)).astype(np.int32)
    isc = (RNG.uniform(0.0002, 0.001, size=o).astype(np.float32) if per_channel else sc(0.0005))
    acc = qconv(x, w, xzp, wzp, strides, pad, dil, groups)
    p = net.param(xdt, shape)
    cv = net.call("qnn.conv2d", [p, net.const(w), net.const(np.array(xzp, xdt)), net.const(wzp)],
                  {"strides": list(strides), "padding": list(pad), "dilation": list(dil), "groups": groups},
                  np.int32, acc.shape)
    add = net.call("add", [cv, net.const(bias)], {}, np.int32, acc.shape)
    acc = (acc.astype(np.int64) + bias).astype(np.int32)
    out = requantize(acc, isc, 0, sc(0.25), 3, xdt, axis=1)
    rq = net.call("qnn.requantize", [add, net.const(isc), net.const(np.array(0, np.int32)), net.const(sc(0.25)),
                                     net.const(np.array(3, xdt))], {"axis": 1, "out_dtype": np.dtype(xdt).name},
                  xdt, acc.shape)
    res = rq
    if relu:
        lo = np.iinfo(xdt).min + 100
        res = net.call("clip", [rq], {"a_min": float(lo) - 0.5, "a_max": 100.25}, xdt, acc.shape)
        out = np.clip(out, lo, 100).astype(xdt)
    return name, net, res, [x], [(out, 0)]


def cases():
    out = []
    out.append(conv_case("conv3x3_int8", np.int8, (1, 8, 6, 6), (4, 8, 3, 3), pad=(1, 1, 1, 1)))
    out.append(conv_case("conv_uint8_stride2_same_per_channel", np.uint8, (1, 8, 6, 6), (16, 8, 3, 3), strides=(2, 2),
                         pad=(0, 0, 1, 1), per_channel=True))
    out.append(conv_case("depthwise_dilated_clip", np.int8, (1, 8, 9, 7), (8, 1, 3, 3), pad=(2, 2, 2, 2), dil=(2, 2),
                         groups=8, per_channel=True, relu=True))
    out.append(conv_case("conv5x5_grouped_valid", np.int8, (1, 4, 9, 9), (6, 2, 5, 5), groups=2))
    out.append(conv_case("conv1x1_uint8", np.uint8, (1, 16, 3, 5), (8, 16, 1, 1)))

    # fully connected: qnn.matmul + bias + requantize over the last axis, per-column scales
    for dt in (np.int8, np.uint8):
        net = Net()
        a = i8(1, 24) if dt == np.int8 else u8a(1, 24)
        w = i8(24, 10, lo=-50, hi=50) if dt == np.int8 else u8a(24, 10)
        azp, wzp = (7, 0) if dt == np.int8 else (128, 120)
        bias = RNG.integers(-500, 501, size=(10,)).astype(np.int32)
        isc = RNG.uniform(0.0001, 0.0009, size=10).astype(np.float32)
        acc = ((a.astype(np.int64) - azp) @ (w.astype(np.int64) - wzp) + bias).astype(np.int32)
        p = net.param(dt, (1, 24))
        mm = net.call("qnn.matmul", [p, net.const(w), net.const(np.array(azp, dt)), net.const(np.array(wzp, dt))], {},
                      np.int32, (1, 10))
        ad = net.call("add", [mm, net.const(bias)], {}, np.int32, (1, 10))
        rq = net.call("qnn.requantize", [ad, net.const(isc), net.const(np.array(0, np.int32)), net.const(sc(0.05)),
                                         net.const(np.array(-1 if dt == np.int8 else 128, dt))],
                      {"axis": 1, "out_dtype": np.dtype(dt).name}, dt, (1, 10))
        out.append(("fully_connected_" + np.dtype(dt).name, net, rq, [a],
                    [(requantize(acc, isc, 0, sc(0.05), -1 if dt == np.int8 else 128, dt), 0)]))

    # the raw int32 accumulator as the result (no requantize)
    net = Net()
    x, w = i8(1, 3, 4, 4), i8(2, 3, 2, 2)
    p = net.param(np.int8, (1, 3, 4, 4))
    cv = net.call("qnn.conv2d", [p, net.const(w), net.const(np.array(0, np.int8)), net.const(np.array(0, np.int8))],
                  {"strides": [2, 2], "padding": [0, 0, 0, 0], "dilation": [1, 1], "groups": 1}, np.int32, (1, 2, 2, 2))
    out.append(("conv_int32_result", net, cv, [x], [(qconv(x, w, 0, 0, (2, 2)), 0)]))

    # QDQ operators
    out.append(qdq_unary("sigmoid", "sigmoid", {}, lambda v: 1 / (1 + np.exp(-v)), y_s=1 / 256, y_zp=-128, tol=1))
    out.append(qdq_unary("sigmoid_uint8", "sigmoid", {}, lambda v: 1 / (1 + np.exp(-v)), x_zp=128, y_s=1 / 256,
                         y_zp=0, dt=np.uint8, tol=1))
    out.append(qdq_unary("tanh", "tanh", {}, np.tanh, y_s=1 / 128, y_zp=0, tol=1))
    out.append(qdq_unary("leaky_relu", "nn.leaky_relu", {"alpha": 0.125}, lambda v: np.where(v < 0, v * 0.125, v)))
    out.append(qdq_unary("relu_float", "nn.relu", {}, lambda v: np.maximum(v, 0)))
    out.append(qdq_unary("clip_float", "clip", {"a_min": -1.0, "a_max": 2.5}, lambda v: np.clip(v, -1.0, 2.5)))
    out.append(qdq_unary("max_pool_2x2_s2", "nn.max_pool2d",
                         {"pool_size": [2, 2], "strides": [2, 2], "padding": [0, 0, 0, 0], "dilation": [1, 1],
                          "ceil_mode": False}, lambda v: pool(v, (2, 2), (2, 2), (0, 0, 0, 0), "max")))
    out.append(qdq_unary("avg_pool_3x3_same", "nn.avg_pool2d",
                         {"pool_size": [3, 3], "strides": [1, 1], "padding": [1, 1, 1, 1], "dilation": [1, 1],
                          "ceil_mode": False, "count_include_pad": False},
                         lambda v: pool(v, (3, 3), (1, 1), (1, 1, 1, 1), "avg"), tol=1))
    out.append(qdq_unary("avg_pool_3x3_same_count_pad", "nn.avg_pool2d",
                         {"pool_size": [3, 3], "strides": [1, 1], "padding": [1, 1, 1, 1], "dilation": [1, 1],
                          "ceil_mode": False, "count_include_pad": True},
                         lambda v: pool(v, (3, 3), (1, 1), (1, 1, 1, 1), "avg", include_pad=True), tol=1))
    out.append(qdq_unary("global_avg_pool_8x8", "nn.global_avg_pool2d", {},
                         lambda v: v.mean(axis=(2, 3), keepdims=True), shape=(1, 16, 8, 8), tol=1))
    out.append(qdq_unary("mean_7x7", "mean", {"axis": [2, 3], "keepdims": True},
                         lambda v: v.mean(axis=(2, 3), keepdims=True), shape=(1, 16, 7, 7), tol=1))
    out.append(qdq_unary("mean_axis1_drop", "mean", {"axis": [-3], "keepdims": False},
                         lambda v: v.mean(axis=1), shape=(1, 5, 3, 4), tol=1))
    out.append(qdq_unary("transpose_nhwc", "transpose", {"axes": [0, 2, 3, 1]}, lambda v: v.transpose(0, 2, 3, 1)))
    out.append(qdq_unary("reshape_flat", "reshape", {"newshape": [1, 256]}, lambda v: v.reshape(1, 256)))
    out.append(qdq_unary("pad_float", "nn.pad", {"pad_before": [0, 0, 1, 2], "pad_after": [0, 0, 3, 0],
                                                  "pad_value": 0.0, "mode": "constant"},
                         lambda v: np.pad(v, ((0, 0), (0, 0), (1, 3), (2, 0)))))
    for ct in ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel"):
        out.append(qdq_unary("resize_linear_" + ct, "image.resize2d",
                             {"size": [7, 3], "method": "linear", "coordinate_transformation_mode": ct,
                              "nearest_mode": "round_prefer_floor"},
                             lambda v, ct=ct: resize(v, (7, 3), "linear", ct, "round_prefer_floor"), tol=1))

    # QDQ add and multiply of two dequantized tensors, broadcast
    for op, fn in (("add", np.add), ("multiply", np.multiply)):
        net = Net()
        a, b = i8(1, 16, 4, 4), i8(1, 16, 1, 4)
        pa, pb = net.param(np.int8, a.shape), net.param(np.int8, b.shape)
        da = net.call("qnn.dequantize", [pa, net.const(sc(0.1)), net.const(np.array(2, np.int8))], {"axis": 1},
                      np.float32, a.shape)
        db = net.call("qnn.dequantize", [pb, net.const(sc(0.07)), net.const(np.array(-9, np.int8))], {"axis": 1},
                      np.float32, b.shape)
        e = net.call(op, [da, db], {}, np.float32, a.shape)
        ys = 0.2 if op == "add" else 0.9
        q = net.call("qnn.quantize", [e, net.const(sc(ys)), net.const(np.array(1, np.int8))],
                     {"axis": 1, "out_dtype": "int8"}, np.int8, a.shape)
        f = fn(dequantize(a, sc(0.1), 2).astype(np.float64), dequantize(b, sc(0.07), -9).astype(np.float64))
        out.append(("qdq_" + op, net, q, [a, b], [(quantize(f.astype(np.float32), sc(ys), 1, np.int8), 0)]))

    # QDQ concatenate of two differently quantized tensors
    net = Net()
    a, b = i8(1, 16, 3, 3), i8(1, 32, 3, 3)
    pa, pb = net.param(np.int8, a.shape), net.param(np.int8, b.shape)
    da = net.call("qnn.dequantize", [pa, net.const(sc(0.1)), net.const(np.array(0, np.int8))], {"axis": 1},
                  np.float32, a.shape)
    db = net.call("qnn.dequantize", [pb, net.const(sc(0.3)), net.const(np.array(5, np.int8))], {"axis": 1},
                  np.float32, b.shape)
    c = net.call("concatenate", [da, db], {"axis": 1}, np.float32, (1, 48, 3, 3))
    q = net.call("qnn.quantize", [c, net.const(sc(0.25)), net.const(np.array(-4, np.int8))],
                 {"axis": 1, "out_dtype": "int8"}, np.int8, (1, 48, 3, 3))
    f = np.concatenate([dequantize(a, sc(0.1), 0), dequantize(b, sc(0.3), 5)], axis=1)
    out.append(("qdq_concatenate", net, q, [a, b], [(quantize(f, sc(0.25), -4, np.int8), 0)]))

    # per-axis quantize and dequantize (channel scales stored outside)
    net = Net()
    x = i8(1, 4, 2, 3)
    s1, z1 = RNG.uniform(0.01, 0.1, 4).astype(np.float32), RNG.integers(-5, 6, 4).astype(np.int8)
    s2 = RNG.uniform(0.01, 0.1, 4).astype(np.float32)
    p = net.param(np.int8, x.shape)
    d = net.call("qnn.dequantize", [p, net.const(s1), net.const(z1)], {"axis": 1}, np.float32, x.shape)
    q = net.call("qnn.quantize", [d, net.const(s2), net.const(np.array(0, np.int8))], {"axis": 1, "out_dtype": "int8"},
                 np.int8, x.shape)
    f = ((x.astype(np.float64) - z1.reshape(1, 4, 1, 1)) * s1.astype(np.float64).reshape(1, 4, 1, 1)).astype(np.float32)
    out.append(("per_axis_quantize", net, q, [x], [(quantize(f, s2, 0, np.int8), 0)]))

    # operators directly on int8/uint8
    net = Net()
    x = i8(1, 16, 7, 9)
    p = net.param(np.int8, x.shape)
    m = net.call("nn.max_pool2d", [p], {"pool_size": [3, 3], "strides": [2, 2], "padding": [1, 1, 1, 1],
                                        "dilation": [1, 1], "ceil_mode": False}, np.int8, (1, 16, 4, 5))
    r = net.call("nn.relu", [m], {}, np.int8, (1, 16, 4, 5))
    want = np.maximum(pool(x, (3, 3), (2, 2), (1, 1, 1, 1), "max"), 0).astype(np.int8)
    out.append(("int8_max_pool_relu", net, r, [x], [(want, 0)]))

    net = Net()
    x = u8a(1, 16, 5, 5)
    p = net.param(np.uint8, x.shape)
    m = net.call("nn.max_pool2d", [p], {"pool_size": [5, 5], "strides": [1, 1], "padding": [2, 2, 2, 2],
                                        "dilation": [1, 1], "ceil_mode": False}, np.uint8, x.shape)
    c = net.call("clip", [m], {"a_min": 10.0, "a_max": 200.0}, np.uint8, x.shape)
    want = np.clip(pool(x, (5, 5), (1, 1), (2, 2, 2, 2), "max"), 10, 200).astype(np.uint8)
    out.append(("uint8_max_pool_same_clip", net, c, [x], [(want, 0)]))

    net = Net()
    a, b = i8(1, 16, 2, 2), i8(1, 32, 2, 2)
    pa, pb = net.param(np.int8, a.shape), net.param(np.int8, b.shape)
    c = net.call("concatenate", [pa, pb], {"axis": -3}, np.int8, (1, 48, 2, 2))
    s = net.call("split", [c], {"axis": 1, "sizes": [32, 16]}, np.int8, (1, 32, 2, 2), more=[(np.int8, (1, 16, 2, 2))])
    g1, g0 = net.get(s, 1), net.get(s, 0)
    t = net.tuple_([g1, g0])
    cat = np.concatenate([a, b], axis=1)
    out.append(("int8_concat_split_tuple", net, t, [a, b], [(cat[:, 32:], 0), (cat[:, :32], 0)]))

    net = Net()
    x = i8(1, 3, 4, 5)
    p = net.param(np.int8, x.shape)
    pd = net.call("nn.pad", [p], {"pad_before": [0, 1, 0, 7], "pad_after": [0, 0, 2, 1], "pad_value": 0.0,
                                  "mode": "constant"}, np.int8, (1, 4, 6, 13))
    tr = net.call("transpose", [pd], {"axes": [0, 3, 1, 2]}, np.int8, (1, 13, 4, 6))
    rs = net.call("reshape", [tr], {"newshape": [13, 24]}, np.int8, (13, 24))
    want = np.pad(x, ((0, 0), (1, 0), (0, 2), (7, 1))).transpose(0, 3, 1, 2).reshape(13, 24)
    out.append(("int8_pad_transpose_reshape", net, rs, [x], [(want, 0)]))

    for method, ct, nm in (("nearest", "half_pixel", "round_prefer_floor"), ("nearest", "asymmetric", "floor"),
                           ("nearest", "align_corners", "round_prefer_ceil"), ("nearest", "pytorch_half_pixel", "ceil"),
                           ("linear", "half_pixel", "round_prefer_floor")):
        net = Net()
        x = u8a(1, 2, 3, 4)
        p = net.param(np.uint8, x.shape)
        r = net.call("image.resize2d", [p], {"size": [7, 5], "method": method, "coordinate_transformation_mode": ct,
                                             "nearest_mode": nm}, np.uint8, (1, 2, 7, 5))
        want = resize(x, (7, 5), method, ct, nm)
        want = sat(np.round(want), np.uint8) if method == "linear" else want.astype(np.uint8)
        out.append(("uint8_resize_%s_%s_%s" % (method, ct, nm), net, r, [x], [(want, 0)]))

    # requantize of an int8 tensor (rescale), and integer add of int8 wrapping like C
    net = Net()
    x = i8(1, 6, 2, 2)
    p = net.param(np.int8, x.shape)
    rq = net.call("qnn.requantize", [p, net.const(sc(0.5)), net.const(np.array(-3, np.int8)), net.const(sc(0.125)),
                                     net.const(np.array(10, np.int8))], {"axis": 1, "out_dtype": "int8"},
                  np.int8, x.shape)
    out.append(("int8_requantize", net, rq, [x], [(requantize(x, sc(0.5), -3, sc(0.125), 10, np.int8), 0)]))
    return out


def write_case(d, name, net, result, inputs, outputs):
    blob = net.blob(result)
    files = {"name": name, "network": name + ".ethosn", "inputs": [], "constants": [], "outputs": [],
             "params": name + ".params"}
    with open(os.path.join(d, name + ".ethosn"), "wb") as f:
        f.write(blob)
    with open(os.path.join(d, name + ".params"), "wb") as f:
        f.write(net.params_file())
    for i, x in enumerate(inputs):
        fn = "%s.in%d" % (name, i)
        np.ascontiguousarray(x).tofile(os.path.join(d, fn))
        files["inputs"].append(fn)
    for i, c in enumerate(net.consts):
        if c.size == 1:
            files["constants"].append(None)
            continue
        fn = "%s.const%d" % (name, i)
        np.ascontiguousarray(c).tofile(os.path.join(d, fn))
        files["constants"].append(fn)
    for i, (y, tol) in enumerate(outputs):
        fn = "%s.out%d" % (name, i)
        np.ascontiguousarray(y).tofile(os.path.join(d, fn))
        files["outputs"].append({"file": fn, "dtype": np.dtype(y.dtype).name, "tolerance": tol})
    return files


def broken(d):
    """networks that must be refused, each with its status"""
    out = []

    def add(name, blob, status, why):
        with open(os.path.join(d, name + ".ethosn"), "wb") as f:
            f.write(blob)
        out.append({"name": name, "file": name + ".ethosn", "status": status, "why": why})

    def simple(op="nn.relu", attrs=None, args=None, arg_types=None, out_type=(np.int8, (1, 4)), result=None):
        net = Net()
        p = net.param(np.int8, (1, 4))
        r = net.call(op, args if args is not None else [p], attrs or {}, *out_type)
        return net.blob(result if result is not None else r)

    good = simple()
    add("wrong_magic", b"TTHEN77\0" + good[8:], MAGIC, "not a tth-ethosn-network blob")
    add("version_1", good[:8] + u32(1) + good[12:], VERSION, "format version 1")
    add("version_3", good[:8] + u32(3) + good[12:], VERSION, "format version 3")
    add("trailing_byte", good + b"\0", CORRUPT, "1 bytes follow the network's end")
    add("result_out_of_range", simple(result=7), CORRUPT, "the result is node 7 of 2")
    add("argument_out_of_range", simple(args=[9]), CORRUPT, "argument 0 is node 9, not an earlier node")
    add("argument_is_itself", simple(args=[1]), CORRUPT, "argument 0 is node 1, not an earlier node")
    add("unknown_operator", simple(op="nn.fancy"), UNSUPPORTED, "operator 'nn.fancy' is not supported")
    add("wrong_output_shape", simple(out_type=(np.int8, (1, 5))), CORRUPT, "its type is int8[1, 5] but its arguments "
                                                                           "make int8[1, 4]")
    add("missing_attribute", simple(op="clip", attrs={"a_min": 0.0}), CORRUPT,
        "the required attribute 'a_max' is missing")
    add("attribute_of_wrong_type", simple(op="clip", attrs={"a_min": "low", "a_max": 1.0}), CORRUPT,
        "attribute 'a_min' must be a number")
    add("avg_pool_of_int8", _int8_avg_pool(), UNSUPPORTED,
        "an average pool of int8 (it averages dequantized data)")
    add("pad_reflect", simple(op="nn.pad", attrs={"pad_before": [0, 1], "pad_after": [0, 1], "pad_value": 0.0,
                                                 "mode": "reflect"}, out_type=(np.int8, (1, 6))),
        UNSUPPORTED, "nn.pad in 'reflect' mode")
    # structure: a parameter reference, a constant reference and a tuple_get out of range; a bad
    # kind byte; a dtype and a rank tth does not have; an inline flag of 2
    net = Net()
    net.param(np.int8, (1, 4))
    b = net.blob(0)
    at = net.node_at[0]                    # kind 1, parameter 0, 1 type: int8, rank 2, dims
    add("parameter_out_of_range", b[:at + 1] + u32(3) + b[at + 5:], CORRUPT, "node 0 names parameter 3 of 1")
    add("bad_node_kind", b[:at] + u8(9) + b[at + 1:], CORRUPT, "node 0 has kind 9 (1 to 5)")
    t = at + 9
    add("bad_dtype", b[:t] + u8(99) + b[t + 1:], CORRUPT, "node 0 has dtype 99, not a tth dtype")
    add("bad_rank", b[:t + 1] + u8(9) + b[t + 2:], CORRUPT, "node 0 has rank 9 (at most 8)")
    add("huge_dimension", b[:t + 2] + u64(1 << 40) + b[t + 10:], CORRUPT, "node 0 has a dimension of 1099511627776")
    net = Net()
    c = net.const(np.array(3, np.int8))
    b = net.blob(c)
    at, fl = net.node_at[0], net.flag_at[0]
    add("constant_out_of_range", b[:at + 1] + u32(1) + b[at + 5:], CORRUPT, "node 0 names constant 1 of 1")
    add("inline_flag_2", b[:fl] + u8(2) + b[fl + 1:], CORRUPT, "constant 0: inline flag 2 (0 or 1)")
    add("inline_not_an_int8", b[:fl + 1] + f64(3.5) + b[fl + 9:], CORRUPT, "constant 0: 3.5 is not a int8 value")
    net = Net()
    p = net.param(np.int8, (1, 32))
    s = net.call("split", [p], {"axis": 1, "sizes": [16, 16]}, np.int8, (1, 16), more=[(np.int8, (1, 16))])
    g = net.get(s, 1)
    b = net.blob(g)
    at = net.node_at[g]
    add("tuple_get_out_of_range", b[:at + 5] + u32(2) + b[at + 9:], CORRUPT,
        "node 2 takes field 2 of node 1, which has 2")
    return out


def _int8_avg_pool():
    net = Net()
    p = net.param(np.int8, (1, 4, 4, 4))
    r = net.call("nn.avg_pool2d", [p], {"pool_size": [2, 2], "strides": [2, 2], "padding": [0, 0, 0, 0],
                                        "dilation": [1, 1], "ceil_mode": False, "count_include_pad": False},
                 np.int8, (1, 4, 2, 2))
    return net.blob(r)


def main():
    d = sys.argv[1]
    os.makedirs(d, exist_ok=True)
    manifest = {"cases": [write_case(d, *c) for c in cases()], "broken": broken(d)}
    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
