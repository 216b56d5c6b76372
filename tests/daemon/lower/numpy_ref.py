#!/usr/bin/env python3
"""Reference outputs, computed with numpy, for lowering cases that no ONNX node test covers
(grouped/dilated convolutions, broadcasting matmul, per-axis quantization, resize modes, ...).

usage: numpy_ref.py OUTDIR CASE
Writes OUTDIR/CASE/meta.json and raw little-endian tensors in<k>.bin / out0.bin. meta.json:
  {"inputs": [{"dtype", "shape", "const"}], "chain": [{"op", "attrs", "args": ["i0", "prev", ...]}],
   "outputs": [{"dtype", "shape"}]}
The chain is applied in order; "prev" is the previous op's result, "i<k>" input k. Exit status 77
when numpy is missing (the test is then skipped)."""
import json
import os
import sys

try:
    import numpy as np
except ImportError:
    sys.exit(77)

RNG = np.random.default_rng(20261122)


def rnd(shape, dtype="float32", lo=None, hi=None):
    if dtype.startswith("float"):
        return RNG.standard_normal(shape).astype(dtype)
    return RNG.integers(lo, hi, size=shape, endpoint=True).astype(dtype)


# ---- references, written from the operator definitions (ONNX semantics) ----

# The float32 functions written as arithmetic (daemon/lower/lower_math.c, docs/lowering.md "Math
# functions"): their largest error in float32 steps (ulp) of the exact value, over math_sweep();
# results below the smallest normal float32 are allowed one subnormal step (2^-149) instead.
MATH_ULP = {"exp": 2.0, "tanh": 2.0, "erf": 3.0, "sigmoid": 3.5}


def math_sweep(finite=False):
    """float32 inputs over the whole range: +-0, +-inf, NaN, subnormals, FLT_MAX, every exponent
    (a spread of bit patterns of both signs) and the ranges where the functions bend, densely."""
    pats = (np.arange(0, 1 << 32, 262147, dtype=np.uint64) & 0xFFFFFFFF).astype(np.uint32)
    xs = [pats.view(np.float32),
          np.linspace(-12, 12, 6001, dtype=np.float32),
          np.linspace(-110, 95, 4101, dtype=np.float32),
          np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754944e-38, 3.4028235e38,
                      -3.4028235e38, 88.72283, 88.72284, -87.33654, -103.97208, -103.97209, 0.625, 0.875, 3.925])]
    x = np.concatenate(xs)
    if finite:
        x = x[np.isfinite(x)]
    return x


def math_reference(fn, x):
    """fn of the float32 values x, in float64"""
    import math
    with np.errstate(over="ignore", invalid="ignore"):
        d = x.astype(np.float64)
        if fn == "exp":
            return np.exp(d)
        if fn == "tanh":
            return np.tanh(d)
        if fn == "sigmoid":
            return np.where(d >= 0, 1 / (1 + np.exp(-d)), np.exp(d) / (1 + np.exp(d)))
        if fn == "erf":
            return np.array([math.erf(v) if not math.isnan(v) else math.nan for v in d.ravel()]).reshape(d.shape)
    raise ValueError(fn)

def conv2d(x, w, b, strides, pads, dil, groups, xzp=0, wzp=None, acc="float64"):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    t, l, bo, r = pads
    xp = np.zeros((n, c, h + t + bo, wd + l + r), dtype=acc)
    xp[:, :, t:t + h, l:l + wd] = x.astype(acc) - xzp
    wf = w.astype(acc)
    if wzp is not None:
        wf = wf - np.asarray(wzp, dtype=acc).reshape(-1, 1, 1, 1)
    oh = (h + t + bo - (kh - 1) * dil[0] - 1) // strides[0] + 1
    ow = (wd + l + r - (kw - 1) * dil[1] - 1) // strides[1] + 1
    y = np.zeros((n, o, oh, ow), dtype=acc)
    og = o // groups
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                patch = xp[:, g * cg:(g + 1) * cg,
                           i * dil[0]: i * dil[0] + strides[0] * (oh - 1) + 1: strides[0],
                           j * dil[1]: j * dil[1] + strides[1] * (ow - 1) + 1: strides[1]]
                y[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, wf[g * og:(g + 1) * og, :, i, j])
    if b is not None:
        y += b.astype(acc).reshape(1, -1, 1, 1)
    return y


def conv2d_transpose(x, w, strides, pads, dil, groups, outpad):
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    t, l, bo, r = pads
    full_h = strides[0] * (h - 1) + (kh - 1) * dil[0] + 1 + outpad[0]
    full_w = strides[1] * (wd - 1) + (kw - 1) * dil[1] + 1 + outpad[1]
    y = np.zeros((n, og * groups, full_h, full_w), dtype="float64")
    cg = c // groups
    for ci in range(c):
        g = ci // cg
        for i in range(h):
            for j in range(wd):
                for a in range(kh):
                    for bb in range(kw):
                        y[:, g * og:(g + 1) * og, i * strides[0] + a * dil[0], j * strides[1] + bb * dil[1]] += \
                            x[:, ci, i, j][:, None].astype("float64") * w[ci, :, a, bb][None, :]
    return y[:, :, t:full_h - bo, l:full_w - r]


def max_pool(x, k, strides, pads, dil, ceil_mode):
    n, c, h, wd = x.shape
    t, l, bo, r = pads
    def osz(i, kk, p0, p1, s, d):
        span = i + p0 + p1 - (kk - 1) * d - 1
        o = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (o - 1) * s >= i + p0:
            o -= 1
        return o
    oh, ow = osz(h, k[0], t, bo, strides[0], dil[0]), osz(wd, k[1], l, r, strides[1], dil[1])
    y = np.full((n, c, oh, ow), -np.inf, dtype=x.dtype)
    for i in range(oh):
        for j in range(ow):
            for a in range(k[0]):
                for b in range(k[1]):
                    hi, wi = i * strides[0] + a * dil[0] - t, j * strides[1] + b * dil[1] - l
                    if 0 <= hi < h and 0 <= wi < wd:
                        y[:, :, i, j] = np.maximum(y[:, :, i, j], x[:, :, hi, wi])
    return y


def avg_pool(x, k, strides, pads, ceil_mode, count_include_pad):
    """ONNX AveragePool: the mean of the taps inside the image, or with count_include_pad of the
    taps inside the padded image (a ceil_mode window's part past the end padding not counted)"""
    n, c, h, wd = x.shape
    t, l, bo, r = pads
    def osz(i, kk, p0, p1, s):
        span = i + p0 + p1 - kk
        o = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (o - 1) * s >= i + p0:
            o -= 1
        return o
    oh, ow = osz(h, k[0], t, bo, strides[0]), osz(wd, k[1], l, r, strides[1])
    y = np.zeros((n, c, oh, ow), dtype="float64")
    for i in range(oh):
        for j in range(ow):
            acc, cnt, cntp = 0.0, 0, 0
            for a in range(k[0]):
                for b in range(k[1]):
                    hi, wi = i * strides[0] + a - t, j * strides[1] + b - l
                    if -t <= hi < h + bo and -l <= wi < wd + r:
                        cntp += 1
                    if 0 <= hi < h and 0 <= wi < wd:
                        acc = acc + x[:, :, hi, wi].astype("float64")
                        cnt += 1
            y[:, :, i, j] = acc / max(cntp if count_include_pad else cnt, 1)
    return y.astype(x.dtype)


def resize_coords(mode, out_len, in_len):
    scale = out_len / in_len
    xs = np.arange(out_len, dtype="float64")
    if mode == "half_pixel":
        return (xs + 0.5) / scale - 0.5
    if mode == "asymmetric":
        return xs / scale
    if mode == "align_corners":
        return np.zeros(out_len) if out_len == 1 else xs * (in_len - 1) / (out_len - 1)
    if mode == "pytorch_half_pixel":
        return np.full(out_len, -0.5) if out_len == 1 else (xs + 0.5) / scale - 0.5
    raise ValueError(mode)


def resize(x, size, method, ctm, nearest_mode="round_prefer_floor"):
    n, c, h, w = x.shape
    out = np.zeros((n, c, size[0], size[1]), dtype="float64")
    cy, cx = resize_coords(ctm, size[0], h), resize_coords(ctm, size[1], w)
    def near(v):
        f = np.floor(v)
        if v == f:
            return int(f)
        r = v - f
        if nearest_mode == "round_prefer_floor":
            return int(f) if r <= 0.5 else int(f) + 1
        if nearest_mode == "round_prefer_ceil":
            return int(f) if r < 0.5 else int(f) + 1
        return int(f) if nearest_mode == "floor" else int(f) + 1
    clamp = lambda i, m: min(max(i, 0), m - 1)
    for i in range(size[0]):
        for j in range(size[1]):
            if method == "nearest":
                out[:, :, i, j] = x[:, :, clamp(near(cy[i]), h), clamp(near(cx[j]), w)]
            else:
                y0, x0 = int(np.floor(cy[i])), int(np.floor(cx[j]))
                fy, fx = cy[i] - y0, cx[j] - x0
                v = lambda a, b: x[:, :, clamp(a, h), clamp(b, w)].astype("float64")
                out[:, :, i, j] = (v(y0, x0) * (1 - fx) + v(y0, x0 + 1) * fx) * (1 - fy) + \
                                  (v(y0 + 1, x0) * (1 - fx) + v(y0 + 1, x0 + 1) * fx) * fy
    return out


def cubic_kernel(d, a):
    """Keys' cubic convolution kernel with coefficient a at distance d"""
    d = abs(d)
    if d <= 1:
        return (a + 2) * d ** 3 - (a + 3) * d ** 2 + 1
    if d < 2:
        return a * d ** 3 - 5 * a * d ** 2 + 8 * a * d - 4 * a
    return 0.0


def resize_weights(coords, in_len, method, nearest_mode, a, exclude_outside):
    """(out, in) matrix of one axis: row o holds the weights output o gives each input element
    (taps past the edge count for the edge element, or with exclude_outside for none)"""
    m = np.zeros((len(coords), in_len))
    for o, v in enumerate(coords):
        f = int(np.floor(v))
        if method == "nearest":
            r = v - f
            up = {"round_prefer_floor": r > 0.5, "round_prefer_ceil": r >= 0.5, "floor": False,
                  "ceil": r > 0}[nearest_mode]
            m[o, min(max(f + int(up), 0), in_len - 1)] = 1
            continue
        taps = [f, f + 1] if method == "linear" else [f - 1, f, f + 1, f + 2]
        for i in taps:
            w = 1 - abs(v - i) if method == "linear" else cubic_kernel(v - i, a)
            if exclude_outside and not 0 <= i < in_len:
                continue
            m[o, min(max(i, 0), in_len - 1)] += w
        m[o] /= m[o].sum() if exclude_outside else 1
    return m


def resize_general(x, size, method, ctm, nearest_mode="round_prefer_floor", a=-0.75, exclude_outside=False,
                   roi=(0, 0, 1, 1), extrapolation_value=0.0):
    """ONNX Resize of NCHW x to size as two matrix products; tf_crop_and_resize samples roi
    (h0, w0, h1, w1) and gives extrapolation_value where the source is outside the input"""
    n, c, h, w = x.shape
    mats, inside = [], []
    for ax, (in_len, out_len) in enumerate(((h, size[0]), (w, size[1]))):
        if ctm == "tf_crop_and_resize":
            lo, hi = roi[ax] * (in_len - 1), roi[2 + ax] * (in_len - 1)
            xs = np.arange(out_len, dtype="float64")
            coords = np.full(out_len, (lo + hi) / 2) if out_len == 1 else lo + xs * (hi - lo) / (out_len - 1)
        elif ctm == "tf_half_pixel_for_nn":
            coords = (np.arange(out_len, dtype="float64") + 0.5) * in_len / out_len
        else:
            coords = resize_coords(ctm, out_len, in_len)
        ok = (coords >= 0) & (coords <= in_len - 1) if ctm == "tf_crop_and_resize" else np.ones(out_len, bool)
        mats.append(resize_weights(np.where(ok, coords, 0), in_len, method, nearest_mode, a, exclude_outside))
        inside.append(ok)
    out = np.einsum("yh,nchw,xw->ncyx", mats[0], x.astype("float64"), mats[1])
    return np.where(inside[0][:, None] & inside[1][None, :], out, extrapolation_value)


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# ---- cases: (inputs [(array, const)], chain [(op, attrs, args)], outputs [array]) ----

def blocked(x, b):
    """NCHW -> NCHW<b>c (docs/layouts.md): [N, C/b, H, W, b]"""
    n, c, h, w = x.shape
    return np.ascontiguousarray(x.reshape(n, c // b, b, h, w).transpose(0, 1, 3, 4, 2))


def case(name):
    f32 = "float32"
    if name == "conv_groups_dilation":
        x, w, b = rnd((2, 6, 9, 8)), rnd((9, 2, 3, 3)), rnd((9,))
        a = {"strides": [2, 1], "padding": [1, 2, 0, 1], "dilation": [2, 1], "groups": 3}
        y = conv2d(x, w, b, [2, 1], [1, 2, 0, 1], [2, 1], 3)
        return [(x, False), (w, True), (b, False)], [("nn.conv2d", a, ["i0", "i1", "i2"])], [y.astype(f32)]
    if name == "conv_depthwise_relu6":
        x, w = rnd((1, 4, 7, 7)), rnd((4, 1, 3, 3))
        a = {"strides": [2, 2], "padding": [1, 1, 1, 1], "groups": 4}
        y = np.clip(conv2d(x, w, None, [2, 2], [1, 1, 1, 1], [1, 1], 4), 0, 6)
        return [(x, False), (w, True)], [("nn.conv2d", a, ["i0", "i1"]), ("clip", {"a_min": 0.0, "a_max": 6.0}, ["prev"])], [y.astype(f32)]
    # the tiled kernels (daemon/lower/lower_conv_tiled.c) at their edges; the test runs each
    # at 1, 4, 8 and 16 lanes
    if name == "conv_tiles_channel_tail":
        # 20 output channels: 16 + a 4-lane tail at 16 lanes; a row of 13 pixels: two tiles
        # and a remainder; padding; bias as a parameter
        x, w, b = rnd((1, 5, 11, 13)), rnd((20, 5, 3, 3)), rnd((20,))
        a = {"padding": [1, 1, 1, 1]}
        y = conv2d(x, w, b, [1, 1], [1, 1, 1, 1], [1, 1], 1)
        return [(x, False), (w, True), (b, False)], [("nn.conv2d", a, ["i0", "i1", "i2"])], [y.astype(f32)]
    if name == "conv_tiles_runtime_weights_groups":
        # weights as a parameter (packed by a loop), 2 groups of 24 channels, stride 2, batch 2
        x, w = rnd((2, 6, 10, 9)), rnd((48, 3, 3, 3))
        a = {"strides": [2, 2], "padding": [0, 1, 1, 0], "groups": 2}
        y = conv2d(x, w, None, [2, 2], [0, 1, 1, 0], [1, 1], 2)
        return [(x, False), (w, False)], [("nn.conv2d", a, ["i0", "i1"])], [y.astype(f32)]
    if name == "conv_tiles_pointwise_residual":
        # 1x1 stride 1 (the image as one row of 7*9 pixels), then + residual and relu in the
        # epilogue (channel vectors read and write with a stride)
        x, w, b, r = rnd((1, 8, 7, 9)), rnd((32, 8, 1, 1)), rnd((32,)), rnd((1, 32, 7, 9))
        y = np.maximum(conv2d(x, w, b, [1, 1], [0, 0, 0, 0], [1, 1], 1) + r, 0)
        return [(x, False), (w, True), (b, True), (r, False)], [
            ("nn.conv2d", {}, ["i0", "i1", "i2"]), ("add", {}, ["prev", "i3"]), ("nn.relu", {}, ["prev"])], [y.astype(f32)]
    if name == "conv_tiles_pixel_vectors":
        # 1x1 on 8x10 = 80 pixels (5 vectors of 16: a tile of 4 and one of 1), batch 2, 20
        # channels (blocks of 6 and a tail of 2), epilogue: + residual, * a [1, 1, 8, 10] map, relu
        x, w, b = rnd((2, 12, 8, 10)), rnd((20, 12, 1, 1)), rnd((20,))
        r, m = rnd((2, 20, 8, 10)), rnd((1, 1, 8, 10))
        y = np.maximum((conv2d(x, w, b, [1, 1], [0, 0, 0, 0], [1, 1], 1) + r) * m, 0)
        return [(x, False), (w, True), (b, True), (r, False), (m, False)], [
            ("nn.conv2d", {}, ["i0", "i1", "i2"]), ("add", {}, ["prev", "i3"]), ("multiply", {}, ["prev", "i4"]),
            ("nn.relu", {}, ["prev"])], [y.astype(f32)]
    if name == "conv_tiles_pixel_tail":
        # 1x1 on 9x11 = 99 pixels: whole vectors then one narrower vector at every vector width
        # (AVX-512: a tile of 4, then 2 vectors and 3 pixels), 20 channels (blocks of 6 and a
        # tail of 2), batch 2, epilogue: + residual, relu
        x, w, b, r = rnd((2, 12, 9, 11)), rnd((20, 12, 1, 1)), rnd((20,)), rnd((2, 20, 9, 11))
        y = np.maximum(conv2d(x, w, b, [1, 1], [0, 0, 0, 0], [1, 1], 1) + r, 0)
        return [(x, False), (w, True), (b, True), (r, False)], [
            ("nn.conv2d", {}, ["i0", "i1", "i2"]), ("add", {}, ["prev", "i3"]), ("nn.relu", {}, ["prev"])], [y.astype(f32)]
    if name == "conv_tiles_weights_outer_flat":
        # weights larger than the image (docs/lowering.md, "Loop order"): 1x1 on 7x5 = 35
        # pixels, 300 channels (at 16 lanes 19 blocks, the last of 12 channels: channel-blocked
        # with the image as one row of balanced tiles; at 4 lanes the pixel kernel by blocks),
        # batch 2, + residual, relu
        x, w, b, r = rnd((2, 8, 7, 5)), rnd((300, 8, 1, 1)), rnd((300,)), rnd((2, 300, 7, 5))
        y = np.maximum(conv2d(x, w, b, [1, 1], [0, 0, 0, 0], [1, 1], 1) + r, 0)
        return [(x, False), (w, True), (b, True), (r, False)], [
            ("nn.conv2d", {}, ["i0", "i1", "i2"]), ("add", {}, ["prev", "i3"]), ("nn.relu", {}, ["prev"])], [y.astype(f32)]
    if name == "conv_tiles_weights_outer_rows":
        # weights larger than the image on rows of 20 pixels (not narrow): (block group, row)
        # pairs, groups outermost; 3x3 padded, 72 channels, batch 2
        x, w, b = rnd((2, 4, 4, 20)), rnd((72, 4, 3, 3)), rnd((72,))
        a = {"padding": [1, 1, 1, 1]}
        y = conv2d(x, w, b, [1, 1], [1, 1, 1, 1], [1, 1], 1)
        return [(x, False), (w, True), (b, True)], [("nn.conv2d", a, ["i0", "i1", "i2"])], [y.astype(f32)]
    if name == "conv_tiles_input_channel_blocks":
        # a tile's packed weights over twice TK_KC_BYTES at every vector width: the reduction in
        # blocks of input channels with partial sums between them (docs/lowering.md, "Blocks of
        # input channels"; at 16 lanes 15 blocks of 18 channels and a last one of 4, at 4 lanes
        # three); 3x3 at dilation 2 on 9x7, 256 -> 40 channels (a partial last block at 16
        # lanes), batch 2, bias, + residual, relu after the last block. Small values: 2304 terms
        # of standard normals would differ from numpy by float32 rounding beyond the tolerance,
        # where a block of 18 channels left out or counted twice moves a sum by about 0.06
        x, w = rnd((2, 256, 9, 7)) * 0.1, rnd((40, 256, 3, 3)) * 0.05
        b, r = rnd((40,)), rnd((2, 40, 9, 7))
        a = {"padding": [2, 2, 2, 2], "dilation": [2, 2]}
        y = np.maximum(conv2d(x, w, b, [1, 1], [2, 2, 2, 2], [2, 2], 1) + r, 0)
        return ([(x, False), (w, True), (b, True), (r, False)],
                [("nn.conv2d", a, ["i0", "i1", "i2"]), ("add", {}, ["prev", "i3"]), ("nn.relu", {}, ["prev"])],
                [y.astype(f32)])
    if name == "conv_tiles_input_channel_blocks_rows":
        # blocks of input channels on row tiles (a row of 18 pixels is not narrow): each task
        # runs every block over a band of rows, one per core (three bands of 2, 2 and 1 rows with
        # three cores), or over the whole image when the weights are outermost and the channel
        # blocks enough to share; 3x3 padded, 256 -> 64 channels, bias, relu
        x, w, b = rnd((1, 256, 5, 18)) * 0.1, rnd((64, 256, 3, 3)) * 0.05, rnd((64,))
        a = {"padding": [1, 1, 1, 1]}
        y = np.maximum(conv2d(x, w, b, [1, 1], [1, 1, 1, 1], [1, 1], 1), 0)
        return [(x, False), (w, True), (b, True)], [("nn.conv2d", a, ["i0", "i1", "i2"]), ("nn.relu", {}, ["prev"])], [y.astype(f32)]
    if name == "conv_tiles_input_channel_blocks_sparse":
        # the same with most taps in the padding (dilation 6 on 6x20: each tile loops over the
        # taps inside the image, docs/lowering.md "Taps in the padding"), 256 -> 48 channels
        x, w = rnd((1, 256, 6, 20)) * 0.1, rnd((48, 256, 3, 3)) * 0.05
        a = {"padding": [6, 6, 6, 6], "dilation": [6, 6]}
        y = conv2d(x, w, None, [1, 1], [6, 6, 6, 6], [6, 6], 1)
        return [(x, False), (w, True)], [("nn.conv2d", a, ["i0", "i1"])], [y.astype(f32)]
    if name == "conv_tiles_input_channel_blocks_flat":
        # the same on a flat image: 1x1 of 600 -> 48 channels on 5x7 = 35 pixels (blocks of input
        # channels from 8 lanes on), bias, relu
        x, w, b = rnd((1, 600, 5, 7)) * 0.1, rnd((48, 600, 1, 1)) * 0.05, rnd((48,))
        y = np.maximum(conv2d(x, w, b, [1, 1], [0, 0, 0, 0], [1, 1], 1), 0)
        return [(x, False), (w, True), (b, True)], [("nn.conv2d", {}, ["i0", "i1", "i2"]), ("nn.relu", {}, ["prev"])], [y.astype(f32)]
    if name == "conv_tiles_groups_outer_small_image":
        # grouped (16 groups of 16 channels) on a 5x5 image: weights no larger than 8 images
        # (16 x 9 per channel against 8 x 25) but more channels than 8 images (256 > 200), so on
        # several cores groups are outermost (lower_conv_tiled.c); padded, a bias and relu
        x, w, b = rnd((1, 256, 5, 5)), rnd((256, 16, 3, 3)), rnd((256,))
        a = {"padding": [1, 1, 1, 1], "groups": 16}
        y = np.maximum(conv2d(x, w, b, [1, 1], [1, 1, 1, 1], [1, 1], 16), 0)
        return ([(x, False), (w, True), (b, True)],
                [("nn.conv2d", a, ["i0", "i1", "i2"]), ("nn.relu", {}, ["prev"])], [y.astype(f32)])
    if name == "conv_tiles_pixel_vectors_row_broadcast":
        # the same shapes with an epilogue operand broadcast along H only ([10]): the pixel
        # kernel must not take it (its (0, p) index would read it wrongly)
        x, w, v = rnd((1, 12, 8, 10)), rnd((16, 12, 1, 1)), rnd((10,))
        y = conv2d(x, w, None, [1, 1], [0, 0, 0, 0], [1, 1], 1) + v
        return [(x, False), (w, True), (v, False)], [("nn.conv2d", {}, ["i0", "i1"]), ("add", {}, ["prev", "i2"])], [y.astype(f32)]
    if name == "conv_tiles_depthwise_rows":
        # depthwise stride 1 on rows of 37 pixels (vectors, a partial group of vectors, a
        # scalar tail), dilation 2, then sigmoid
        x, w, b = rnd((1, 3, 6, 37)), rnd((3, 1, 3, 3)), rnd((3,))
        a = {"padding": [2, 2, 2, 2], "dilation": [2, 2], "groups": 3}
        y = 1 / (1 + np.exp(-conv2d(x, w, b, [1, 1], [2, 2, 2, 2], [2, 2], 3)))
        return [(x, False), (w, True), (b, True)], [("nn.conv2d", a, ["i0", "i1", "i2"]), ("sigmoid", {}, ["prev"])], [y.astype(f32)]
    if name == "conv_tiles_depthwise_stride2":
        x, w = rnd((1, 5, 9, 40)), rnd((5, 1, 3, 3))
        a = {"strides": [2, 2], "padding": [1, 1, 1, 1], "groups": 5}
        y = conv2d(x, w, None, [2, 2], [1, 1, 1, 1], [1, 1], 5)
        return [(x, False), (w, False)], [("nn.conv2d", a, ["i0", "i1"])], [y.astype(f32)]
    if name == "conv_tiles_depthwise_narrow":
        # depthwise stride 1 on 7x7 (tiles of four rows, one whole-row vector each at every
        # width, a last tile of three rows), batch 2, residual add
        x, w, b, r = rnd((2, 3, 7, 7)), rnd((3, 1, 3, 3)), rnd((3,)), rnd((2, 3, 7, 7))
        a = {"padding": [1, 1, 1, 1], "groups": 3}
        y = conv2d(x, w, b, [1, 1], [1, 1, 1, 1], [1, 1], 3) + r
        return [(x, False), (w, True), (b, True), (r, False)], [("nn.conv2d", a, ["i0", "i1", "i2"]), ("add", {}, ["prev", "i3"])], [y.astype(f32)]
    if name == "conv_tiles_depthwise_strided_phases":
        # strided depthwise read through the phase-split copy: stride 2 unpadded on an odd
        # width, stride 3 with dilation 2 and uneven padding, rows of 1 + tail vectors
        x, w = rnd((1, 4, 11, 29)), rnd((4, 1, 3, 3))
        a = {"strides": [2, 3], "padding": [0, 2, 1, 1], "dilation": [1, 2], "groups": 4}
        y = conv2d(x, w, None, [2, 3], [0, 2, 1, 1], [1, 2], 4)
        return [(x, False), (w, True)], [("nn.conv2d", a, ["i0", "i1"]), ("nn.relu", {}, ["prev"])], [np.maximum(y, 0).astype(f32)]
    if name == "conv_tiles_depthwise_stride2_wide":
        # stride 2 without padding, 5x5 kernel, output rows of 38 (two vectors and a tail at
        # 16 lanes), one channel
        x, w = rnd((1, 1, 9, 80)), rnd((1, 1, 5, 5))
        a = {"strides": [2, 2], "groups": 1}
        y = conv2d(x, w, None, [2, 2], [0, 0, 0, 0], [1, 1], 1)
        return [(x, False), (w, True)], [("nn.conv2d", a, ["i0", "i1"])], [y.astype(f32)]
    if name == "conv_tiles_depthwise_window_groups":
        # depthwise stride 1 read through windows of 16 rows (rows of two vectors at 16 lanes:
        # tiles of two rows), 21 rows: a window of 8 row pairs in a loop, then 5 rows (two pairs
        # and one row left), batch 2, bias and relu6
        x, w, b = rnd((2, 3, 21, 32)), rnd((3, 1, 3, 3)), rnd((3,))
        a = {"padding": [1, 1, 1, 1], "groups": 3}
        y = np.clip(conv2d(x, w, b, [1, 1], [1, 1, 1, 1], [1, 1], 3), 0, 6)
        return [(x, False), (w, True), (b, True)], [("nn.conv2d", a, ["i0", "i1", "i2"]), ("clip", {"a_min": 0.0, "a_max": 6.0}, ["prev"])], [y.astype(f32)]
    if name == "conv_tiles_rows_stem":
        # the row-vectorized kernel on a stem: 3 channels, stride 2, padding, rows of 38 (whole
        # vectors and a tail at every width), 10 output channels (a block and a narrower one)
        x, w, b = rnd((1, 3, 23, 75)), rnd((10, 3, 3, 3)), rnd((10,))
        a = {"strides": [2, 2], "padding": [1, 1, 1, 1]}
        y = np.maximum(conv2d(x, w, b, [2, 2], [1, 1, 1, 1], [1, 1], 1), 0)
        return [(x, False), (w, True), (b, True)], [("nn.conv2d", a, ["i0", "i1", "i2"]), ("nn.relu", {}, ["prev"])], [y.astype(f32)]
    if name == "conv_tiles_rows_dilated_batch":
        # row-vectorized, batch 2, stride 1, uneven padding, dilation along W, a 5x3 kernel,
        # 7 output channels, an operand broadcast per channel
        x, w, v = rnd((2, 2, 9, 40)), rnd((7, 2, 5, 3)), rnd((1, 7, 1, 1))
        a = {"padding": [2, 1, 0, 3], "dilation": [1, 2]}
        y = conv2d(x, w, None, [1, 1], [2, 1, 0, 3], [1, 2], 1) * v
        return [(x, False), (w, True), (v, False)], [("nn.conv2d", a, ["i0", "i1"]), ("multiply", {}, ["prev", "i2"])], [y.astype(f32)]
    if name == "conv_tiles_rows_unpadded_stride3":
        # row-vectorized without padding: stride 1 (reads the input itself) then stride 3
        # (the phase-split copy without padding), chained
        x, w1, w2 = rnd((1, 3, 6, 110)), rnd((5, 3, 2, 2)), rnd((4, 5, 1, 3))
        y1 = conv2d(x, w1, None, [1, 1], [0, 0, 0, 0], [1, 1], 1)
        y = conv2d(y1, w2, None, [1, 3], [0, 0, 0, 0], [1, 1], 1)
        return [(x, False), (w1, True), (w2, True)], [("nn.conv2d", {}, ["i0", "i1"]), ("nn.conv2d", {"strides": [1, 3]}, ["prev", "i2"])], [y.astype(f32)]
    if name == "conv_winograd_bias_relu":
        # Winograd F(4x4, 3x3): 16 input channels, 32 output channels, 4x4 tiles of a 14x14
        # image (the last tile row and column partial), bias, relu
        x, w, b = rnd((1, 16, 14, 14)), rnd((32, 16, 3, 3)), rnd((32,))
        a = {"padding": [1, 1, 1, 1]}
        y = np.maximum(conv2d(x, w, b, [1, 1], [1, 1, 1, 1], [1, 1], 1), 0)
        return [(x, False), (w, True), (b, True)], [("nn.conv2d", a, ["i0", "i1", "i2"]), ("nn.relu", {}, ["prev"])], [y.astype(f32)]
    if name == "conv_winograd_channels_outer":
        # more output channels than tiles (128 against 16 tiles of a 13x13 output): the products
        # run output-channel tiles outermost (docs/lowering.md, "Winograd kernel"), with a last
        # block of 16 % 6 tiles at 32 registers; bias and relu
        x, w, b = rnd((1, 16, 13, 13)), rnd((128, 16, 3, 3)), rnd((128,))
        a = {"padding": [1, 1, 1, 1]}
        y = np.maximum(conv2d(x, w, b, [1, 1], [1, 1, 1, 1], [1, 1], 1), 0)
        return [(x, False), (w, True), (b, True)], [("nn.conv2d", a, ["i0", "i1", "i2"]), ("nn.relu", {}, ["prev"])], [y.astype(f32)]
    if name == "conv_winograd_uneven_batch_residual":
        # Winograd with batch 2, uneven padding, 17 input channels, 48 output channels, a 19x13
        # output (partial last tile row and column), a residual add
        x, w, r = rnd((2, 17, 18, 14)), rnd((48, 17, 3, 3)), rnd((2, 48, 19, 13))
        a = {"padding": [1, 0, 2, 1]}
        y = conv2d(x, w, None, [1, 1], [1, 0, 2, 1], [1, 1], 1) + r
        return [(x, False), (w, True), (r, False)], [("nn.conv2d", a, ["i0", "i1"]), ("add", {}, ["prev", "i2"])], [y.astype(f32)]
    if name == "conv_winograd_unpadded_wide":
        # Winograd without padding on a 16x70 output (tile rows of 17 or 18 tiles: a whole vector
        # of tiles and a rest at 16 lanes)
        x, w = rnd((1, 16, 18, 72)), rnd((16, 16, 3, 3))
        y = conv2d(x, w, None, [1, 1], [0, 0, 0, 0], [1, 1], 1)
        return [(x, False), (w, True)], [("nn.conv2d", {}, ["i0", "i1"])], [y.astype(f32)]
    if name == "conv_winograd_bands_batch_residual":
        # Winograd in bands of tile rows when the target has several cores (the transformed
        # weights are fewer than the transformed activations): batch 2, uneven padding, a 30x29
        # output (8 tile rows: 3 cores give bands of 3, 3 and 2 rows; partial last tile row and
        # column), bias, a residual add and relu
        x, w, b, r = rnd((2, 16, 29, 30)), rnd((32, 16, 3, 3)), rnd((32,)), rnd((2, 32, 30, 29))
        a = {"padding": [1, 0, 2, 1]}
        y = np.maximum(conv2d(x, w, b, [1, 1], [1, 0, 2, 1], [1, 1], 1) + r, 0)
        return ([(x, False), (w, True), (b, True), (r, False)],
                [("nn.conv2d", a, ["i0", "i1", "i2"]), ("add", {}, ["prev", "i3"]), ("nn.relu", {}, ["prev"])],
                [y.astype(f32)])
    if name == "conv_transpose_groups":
        x, w = rnd((1, 4, 4, 5)), rnd((4, 3, 3, 2))
        a = {"strides": [2, 3], "padding": [1, 0, 2, 1], "dilation": [1, 2], "groups": 2, "output_padding": [1, 1]}
        y = conv2d_transpose(x, w, [2, 3], [1, 0, 2, 1], [1, 2], 2, [1, 1])
        return [(x, False), (w, False)], [("nn.conv2d_transpose", a, ["i0", "i1"])], [y.astype(f32)]
    if name == "matmul_tiles_bias_relu":
        # the tiled matmul kernel at its edges: 10 rows (a block of 6 or 4 and a partial one),
        # 45 columns (whole tiles, leftover vectors and single columns at every width), a batch
        # dimension, + bias and relu in the epilogue
        a, b, c = rnd((2, 5, 37)), rnd((37, 45)), rnd((45,))
        y = np.maximum(a.astype("float64") @ b.astype("float64") + c, 0)
        return [(a, False), (b, True), (c, True)], [("matmul", {}, ["i0", "i1"]), ("add", {}, ["prev", "i2"]),
                                                    ("nn.relu", {}, ["prev"])], [y.astype(f32)]
    if name == "matmul_packed_panels":
        # a constant B packed into panels: 150 columns are two whole panels of 4 vectors at 16
        # lanes, a narrower tile of the leftover vector and 6 single columns, all read from the
        # packed copy; one row (a fully connected layer's GEMV)
        a, b = rnd((1, 200)), rnd((200, 150))
        return [(a, False), (b, True)], [("matmul", {}, ["i0", "i1"])], [(a.astype("float64") @ b).astype(f32)]
    if name == "matmul_tiles_b_input":
        # the same shapes with B an input (read in place, not packed), 7 rows
        a, b = rnd((7, 200)), rnd((200, 150))
        return [(a, False), (b, False)], [("matmul", {}, ["i0", "i1"])], [(a.astype("float64") @ b).astype(f32)]
    if name == "matmul_packed_at_run_time":
        # B an input of 265,000 elements read by 17 rows: packed into panels at run time (whole
        # panels, a leftover vector and 2 single columns in the last one, at 16 lanes)
        a, b = rnd((17, 500)), rnd((500, 530))
        return [(a, False), (b, False)], [("matmul", {}, ["i0", "i1"])], [(a.astype("float64") @ b).astype(f32)]
    if name == "matmul_batch_broadcast":
        a, b = rnd((2, 1, 3, 4)), rnd((5, 4, 2))
        return [(a, False), (b, False)], [("matmul", {}, ["i0", "i1"])], [np.matmul(a, b)]
    # matmul/batched-tiled (lower_matmul.c): batch dimensions broadcast on both sides, rows that
    # leave a partial row block, columns of whole tiles, a rest of vectors and a scalar tail
    if name == "matmul_batched_broadcast_tiles":
        a, b = rnd((2, 1, 13, 20)), rnd((3, 20, 85))
        y = np.maximum(np.matmul(a.astype("float64"), b), 0)
        return [(a, False), (b, False)], [("matmul", {}, ["i0", "i1"]), ("nn.relu", {}, ["prev"])], [y.astype(f32)]
    if name == "matmul_batched_attention":
        q, k = rnd((4, 7, 16)), rnd((4, 16, 9))
        return [(q, False), (k, False)], [("matmul", {}, ["i0", "i1"])], [np.matmul(q.astype("float64"), k).astype(f32)]
    if name == "matmul_row_ksplit":
        # one row (a fully connected layer of batch 1): K in four parts read at once, 301 = 4 * 75
        # + 1 (a tail row), 70 columns (a tile, a rest of vectors and scalars at 16 lanes), bias, relu
        a, b, bias = rnd((1, 1, 301)), rnd((301, 70)), rnd((70,))
        y = np.maximum(np.matmul(a.astype("float64"), b) + bias, 0)
        return [(a, False), (b, True), (bias, True)], [("matmul", {}, ["i0", "i1"]), ("add", {}, ["prev", "i2"]),
                                                       ("nn.relu", {}, ["prev"])], [y.astype(f32)]
    if name == "matmul_k_blocks":
        # B larger than A: K in blocks, partial sums carried between them (lower_matmul.c,
        # mm_cols_kb): 390 = 4 blocks of 98, 98, 98 and 96 (the first, a loop of two, the last),
        # 25 rows (row blocks of 5), 530 columns (whole panels at 4 and 16 lanes, then a rest of
        # vectors and single columns outside the blocks), bias and relu after the last block
        a, b, bias = rnd((25, 390)), rnd((390, 530)), rnd((530,))
        y = np.maximum(a.astype("float64") @ b + bias, 0)
        return [(a, False), (b, True), (bias, True)], [("matmul", {}, ["i0", "i1"]), ("add", {}, ["prev", "i2"]),
                                                       ("nn.relu", {}, ["prev"])], [y.astype(f32)]
    if name == "matmul_vector_left":
        a, b = rnd((4,)), rnd((3, 4, 2))
        return [(a, False), (b, True)], [("matmul", {}, ["i0", "i1"])], [np.matmul(a, b)]
    if name == "matmul_vector_right_tanh":
        a, b = rnd((2, 3, 4)), rnd((4,))
        return [(a, False), (b, False)], [("matmul", {}, ["i0", "i1"]), ("tanh", {}, ["prev"])], [np.tanh(np.matmul(a, b))]
    if name == "max_pool_ceil_dilation_pads":
        x = rnd((1, 2, 9, 10))
        a = {"pool_size": [3, 2], "strides": [2, 3], "dilation": [2, 1], "padding": [1, 0, 2, 1], "ceil_mode": True}
        return [(x, False)], [("nn.max_pool2d", a, ["i0"])], [max_pool(x, [3, 2], [2, 3], [1, 0, 2, 1], [2, 1], True)]
    if name == "max_pool_rows_pads_batch":
        # 3x3 stride 2 with padding on a 20x37 image, batch 2: a 10x19 output whose inner
        # columns (all taps inside the row) are one 16-lane vector and one column alone
        x = rnd((2, 3, 20, 37))
        a = {"pool_size": [3, 3], "strides": [2, 2], "padding": [1, 1, 1, 1]}
        return [(x, False)], [("nn.max_pool2d", a, ["i0"])], [max_pool(x, [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], False)]
    if name in ("max_pool_rows_int8", "max_pool_rows_uint8"):
        # a quantized model's max pool on its integers (docs/int8.md): the vector kernel from the
        # dtype's lowest value, padding never picked (all-negative int8 windows at the edges)
        u8 = name.endswith("uint8")
        x = rnd((2, 3, 20, 37), "uint8", 0, 255) if u8 else rnd((2, 3, 20, 37), "int8", -128, -1)
        a = {"pool_size": [3, 3], "strides": [2, 2], "padding": [1, 1, 1, 1]}
        y = max_pool(x.astype(np.float64), [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], False).astype(x.dtype)
        return [(x, False)], [("nn.max_pool2d", a, ["i0"])], [y]
    if name == "max_pool_rows_many_taps":
        # 20 taps along a row (a loop in the vector kernel, not unrolled), dilated and strided,
        # with padding
        x = rnd((1, 2, 3, 150))
        a = {"pool_size": [2, 20], "strides": [1, 3], "dilation": [1, 2], "padding": [0, 5, 1, 5]}
        return [(x, False)], [("nn.max_pool2d", a, ["i0"])], [max_pool(x, [2, 20], [1, 3], [0, 5, 1, 5], [1, 2], False)]
    if name == "max_pool_rows_dilated":
        x = rnd((1, 2, 15, 40))
        a = {"pool_size": [2, 3], "strides": [1, 1], "dilation": [2, 2]}
        return [(x, False)], [("nn.max_pool2d", a, ["i0"])], [max_pool(x, [2, 3], [1, 1], [0, 0, 0, 0], [2, 2], False)]
    if name == "avg_pool_rows_count_pad_ceil":
        x = rnd((1, 4, 17, 45))
        a = {"pool_size": [3, 2], "strides": [1, 2], "padding": [1, 0, 2, 1], "ceil_mode": True,
             "count_include_pad": True}
        return [(x, False)], [("nn.avg_pool2d", a, ["i0"])], [avg_pool(x, [3, 2], [1, 2], [1, 0, 2, 1], True, True)]
    if name == "avg_pool_rows_inside":
        # the average of the taps inside the image: 2 of 3 tap rows at the top and bottom rows
        x = rnd((1, 3, 13, 30))
        a = {"pool_size": [3, 3], "strides": [1, 1], "padding": [1, 1, 1, 1]}
        return [(x, False)], [("nn.avg_pool2d", a, ["i0"])], [avg_pool(x, [3, 3], [1, 1], [1, 1, 1, 1], False, False)]
    if name == "avg_pool_relu":
        # with a relu fused after it, pooling takes the generic kernel
        x = rnd((1, 3, 13, 30))
        a = {"pool_size": [3, 3], "strides": [1, 1], "padding": [1, 1, 1, 1]}
        y = np.maximum(avg_pool(x, [3, 3], [1, 1], [1, 1, 1, 1], False, False), 0)
        return [(x, False)], [("nn.avg_pool2d", a, ["i0"]), ("nn.relu", {}, ["prev"])], [y]
    if name == "qnn_conv_per_channel":
        x = rnd((1, 4, 6, 6), "uint8", 0, 255)
        w = rnd((6, 2, 3, 3), "int8", -128, 127)
        xzp, wzp = np.array(128, "uint8"), rnd((6,), "int8", -5, 5)
        a = {"padding": [1, 1, 1, 1], "groups": 2}
        y = conv2d(x, w, None, [1, 1], [1, 1, 1, 1], [1, 1], 2, xzp=128, wzp=wzp, acc="int64").astype("int32")
        return [(x, False), (w, True), (xzp, True), (wzp, True)], [("qnn.conv2d", a, ["i0", "i1", "i2", "i3"])], [y]
    # qnn.conv2d on the int8 dot-product kernel (daemon/lower/lower_conv_int8.c, docs/int8.md):
    # channels not a multiple of 4, output channels not a multiple of the tile, strides (phase
    # split rows), dilation, asymmetric padding, both input types and extreme zero points,
    # requantize saturating at both ends; integers exact
    if name in ("qnn_conv_dot_requant_clip", "qnn_conv_dot_requant_uint8"):
        u8 = name.endswith("uint8")
        x = rnd((1, 7, 13, 11), "uint8", 0, 255) if u8 else rnd((1, 7, 13, 11), "int8", -128, 127)
        w = rnd((10, 7, 3, 3), "int8", -128, 127)
        xzp = np.array(200 if u8 else -3, "uint8" if u8 else "int8")
        wzp = np.zeros((10,), "int8")
        b = rnd((10, 1, 1), "int32", -30000, 30000)
        isc = (np.linspace(0.5, 3.0, 10) * 1e-4).astype(f32)
        izp, osc, ozp = np.array(0, "int32"), np.array(0.05, f32), np.array(5, "int8")
        a = {"padding": [1, 1, 1, 1], "strides": [2, 2]}
        acc = conv2d(x, w, None, [2, 2], [1, 1, 1, 1], [1, 1], 1, xzp=int(xzp), acc="int64") + b
        acc = acc.astype("int32")
        v = np.rint((acc - izp).astype(f32) * (isc / osc).astype(f32).reshape(1, 10, 1, 1)) + np.float32(5)
        y = np.clip(np.clip(v, -128, 127), -100, 90).astype("int8")
        return [(x, False), (w, True), (xzp, True), (wzp, True), (b, True), (isc, True), (izp, True), (osc, True), (ozp, True)], \
               [("qnn.conv2d", a, ["i0", "i1", "i2", "i3"]), ("add", {}, ["prev", "i4"]),
                ("qnn.requantize", {"axis": 1, "out_dtype": "int8"}, ["prev", "i5", "i6", "i7", "i8"]),
                ("clip", {"a_min": -100.0, "a_max": 90.0}, ["prev"])], [y]
    if name == "qnn_conv_depthwise_5x5_dilated":
        # five taps a row, and (qnn_conv_depthwise_dilated) a dilated, strided 3x3 with
        # asymmetric padding, both padded with the zero point
        x = rnd((1, 7, 14, 30), "int8", -128, 127)
        w5 = rnd((7, 1, 5, 5), "int8", -128, 127)
        xzp, wzp = np.array(11, "int8"), np.zeros((7,), "int8")
        y = conv2d(x, w5, None, [1, 1], [2, 2, 2, 2], [1, 1], 7, xzp=11, acc="int64").astype("int32")
        return [(x, False), (w5, True), (xzp, True), (wzp, True)], \
               [("qnn.conv2d", {"padding": [2, 2, 2, 2], "groups": 7}, ["i0", "i1", "i2", "i3"])], [y]
    if name == "qnn_conv_depthwise_dilated":
        x = rnd((1, 6, 17, 25), "uint8", 0, 255)
        w = rnd((6, 1, 3, 3), "int8", -128, 127)
        xzp, wzp = np.array(77, "uint8"), np.zeros((6,), "int8")
        y = conv2d(x, w, None, [1, 2], [2, 3, 1, 2], [2, 2], 6, xzp=77, acc="int64").astype("int32")
        return [(x, False), (w, True), (xzp, True), (wzp, True)], \
               [("qnn.conv2d", {"padding": [2, 3, 1, 2], "strides": [1, 2], "dilation": [2, 2], "groups": 6},
                 ["i0", "i1", "i2", "i3"])], [y]
    if name in ("qnn_conv_depthwise_valid_int8", "qnn_conv_depthwise_4x4_s2"):
        # the dot form (docs/int8.md, "Depthwise in dot products"): a convolution without
        # padding (the words need a copy: one is made), and four taps a row filling the word,
        # stride 2 with asymmetric padding; int8 input (x86 adds 128 to each byte), extreme
        # zero points, odd widths
        valid = name.endswith("int8")
        x = rnd((1, 6, 10, 21), "int8", -128, 127) if valid else rnd((1, 5, 11, 23), "uint8", 0, 255)
        c, k = (6, 3) if valid else (5, 4)
        w = rnd((c, 1, k, k), "int8", -128, 127)
        z = -128 if valid else 255
        xzp, wzp = np.array(z, "int8" if valid else "uint8"), np.zeros((c,), "int8")
        st, pads = ([1, 1], [0, 0, 0, 0]) if valid else ([2, 2], [1, 2, 2, 1])
        y = conv2d(x, w, None, st, pads, [1, 1], c, xzp=z, acc="int64").astype("int32")
        return [(x, False), (w, True), (xzp, True), (wzp, True)], \
               [("qnn.conv2d", {"padding": pads, "strides": st, "groups": c}, ["i0", "i1", "i2", "i3"])], [y]
    if name == "qnn_conv_depthwise_flat_uint8":
        # stride 1 on rows of 9 (the flat form, docs/lowering.md "Depthwise kernel": a tile of
        # several rows as one run of whole vectors, the padding's columns dropped): 13 rows are
        # a tile of 9 and one of 4 at 16 lanes, tiles of 4 and a rest of 1 at 8, of 2 at 4; the
        # last channel's last vector reads past the padded copy's planes; requantize and clip
        x = rnd((1, 5, 13, 9), "uint8", 0, 255)
        w = rnd((5, 1, 3, 3), "int8", -128, 127)
        xzp, wzp = np.array(200, "uint8"), np.zeros((5,), "int8")
        b = rnd((5, 1, 1), "int32", -3000, 3000)
        isc = (np.linspace(0.5, 3.0, 5) * 1e-3).astype(f32)
        izp, osc, ozp = np.array(0, "int32"), np.array(0.05, f32), np.array(3, "uint8")
        a = {"padding": [1, 1, 1, 1], "groups": 5}
        acc = (conv2d(x, w, None, [1, 1], [1, 1, 1, 1], [1, 1], 5, xzp=200, acc="int64") + b).astype("int32")
        v = np.rint((acc - izp).astype(f32) * (isc / osc).astype(f32).reshape(1, 5, 1, 1)) + np.float32(3)
        y = np.clip(v, 0, 255).astype("uint8")
        return [(x, False), (w, True), (xzp, True), (wzp, True), (b, True), (isc, True), (izp, True), (osc, True), (ozp, True)], \
               [("qnn.conv2d", a, ["i0", "i1", "i2", "i3"]), ("add", {}, ["prev", "i4"]),
                ("qnn.requantize", {"axis": 1, "out_dtype": "uint8"}, ["prev", "i5", "i6", "i7", "i8"])], [y]
    if name in ("qnn_conv_depthwise_int8", "qnn_conv_depthwise_s2_uint8"):
        # the depthwise kernel on int8 (docs/int8.md): padding with the zero point, rows of
        # several vectors and a tail (windows of rows), stride 2, requantize and clip
        u8 = name.endswith("uint8")
        shape = (1, 9, 21, 21) if u8 else (1, 12, 17, 35)
        c = shape[1]
        x = rnd(shape, "uint8", 0, 255) if u8 else rnd(shape, "int8", -128, 127)
        w = rnd((c, 1, 3, 3), "int8", -128, 127)
        z = 200 if u8 else -7
        xzp, wzp = np.array(z, "uint8" if u8 else "int8"), np.zeros((c,), "int8")
        st = [2, 2] if u8 else [1, 1]
        b = rnd((c, 1, 1), "int32", -3000, 3000)
        isc = (np.linspace(0.5, 3.0, c) * 1e-3).astype(f32)
        izp, osc, ozp = np.array(0, "int32"), np.array(0.07, f32), np.array(-4, "int8")
        a = {"padding": [1, 1, 1, 1], "strides": st, "groups": c}
        acc = (conv2d(x, w, None, st, [1, 1, 1, 1], [1, 1], c, xzp=z, acc="int64") + b).astype("int32")
        v = np.rint((acc - izp).astype(f32) * (isc / osc).astype(f32).reshape(1, c, 1, 1)) + np.float32(-4)
        y = np.clip(v, -128, 127).astype("int8")
        return [(x, False), (w, True), (xzp, True), (wzp, True), (b, True), (isc, True), (izp, True), (osc, True), (ozp, True)], \
               [("qnn.conv2d", a, ["i0", "i1", "i2", "i3"]), ("add", {}, ["prev", "i4"]),
                ("qnn.requantize", {"axis": 1, "out_dtype": "int8"}, ["prev", "i5", "i6", "i7", "i8"])], [y]
    if name == "qnn_conv_dot_flat_uint8":
        # 1x1 stride 1: the image as one row of 42 pixels
        x = rnd((1, 9, 6, 7), "uint8", 0, 255)
        w = rnd((5, 9, 1, 1), "int8", -128, 127)
        xzp, wzp = np.array(131, "uint8"), np.array(0, "int8")
        y = conv2d(x, w, None, [1, 1], [0, 0, 0, 0], [1, 1], 1, xzp=131, acc="int64").astype("int32")
        return [(x, False), (w, True), (xzp, True), (wzp, True)], [("qnn.conv2d", {}, ["i0", "i1", "i2", "i3"])], [y]
    if name == "qnn_conv_dot_flat_requant":
        # 1x1 stride 1 on 110 pixels: one row of pixels on the lanes, the per-channel requantize
        # read by channel (docs/int8.md)
        x = rnd((1, 11, 10, 11), "int8", -128, 127)
        w = rnd((20, 11, 1, 1), "int8", -128, 127)
        xzp, wzp = np.array(-20, "int8"), np.zeros((20,), "int8")
        isc = (np.linspace(0.5, 3.0, 20) * 1e-3).astype(f32)
        izp, osc, ozp = np.array(0, "int32"), np.array(0.05, f32), np.array(3, "int8")
        acc = conv2d(x, w, None, [1, 1], [0, 0, 0, 0], [1, 1], 1, xzp=-20, acc="int64").astype("int32")
        v = np.rint(acc.astype(f32) * (isc / osc).astype(f32).reshape(1, 20, 1, 1)) + np.float32(3)
        y = np.clip(v, -128, 127).astype("int8")
        return [(x, False), (w, True), (xzp, True), (wzp, True), (isc, True), (izp, True), (osc, True), (ozp, True)], \
               [("qnn.conv2d", {}, ["i0", "i1", "i2", "i3"]),
                ("qnn.requantize", {"axis": 1, "out_dtype": "int8"}, ["prev", "i4", "i5", "i6", "i7"])], [y]
    if name in ("qnn_conv_dot_grouped", "qnn_conv_dot_grouped_1x1"):
        # groups of whole words of input channels (ResNeXt, RegNet): groups of 8 inputs and 12
        # outputs (a partial last block of each group), groups of 4 and 8 on a 1x1 layer
        one = name.endswith("1x1")
        x = rnd((1, 16, 10, 12), "uint8", 0, 255) if one else rnd((1, 16, 9, 11), "int8", -128, 127)
        g = 4 if one else 2
        w = rnd((32, 4, 1, 1), "int8", -128, 127) if one else rnd((24, 8, 3, 3), "int8", -128, 127)
        z = 100 if one else -9
        xzp, wzp = np.array(z, x.dtype), np.zeros((w.shape[0],), "int8")
        pads = [0, 0, 0, 0] if one else [1, 1, 1, 1]
        a = {"padding": pads, "groups": g}
        y = conv2d(x, w, None, [1, 1], pads, [1, 1], g, xzp=z, acc="int64").astype("int32")
        return [(x, False), (w, True), (xzp, True), (wzp, True)], [("qnn.conv2d", a, ["i0", "i1", "i2", "i3"])], [y]
    if name == "qnn_conv_dot_dilated_rows":
        # two images, rows of 40 pixels (several vectors and a tail), dilation 2, zero point 127
        x = rnd((2, 5, 9, 40), "int8", -128, 127)
        w = rnd((9, 5, 3, 3), "int8", -128, 127)
        xzp, wzp = np.array(127, "int8"), np.zeros((9,), "int8")
        a = {"padding": [2, 2, 2, 2], "dilation": [2, 2]}
        y = conv2d(x, w, None, [1, 1], [2, 2, 2, 2], [2, 2], 1, xzp=127, acc="int64").astype("int32")
        return [(x, False), (w, True), (xzp, True), (wzp, True)], [("qnn.conv2d", a, ["i0", "i1", "i2", "i3"])], [y]
    if name == "qnn_conv_dot_stride3_asym":
        # three phases a row, asymmetric padding, zero point 0 of uint8
        x = rnd((1, 4, 17, 23), "uint8", 0, 255)
        w = rnd((3, 4, 5, 5), "int8", -128, 127)
        xzp, wzp = np.array(0, "uint8"), np.zeros((3,), "int8")
        a = {"padding": [2, 1, 0, 2], "strides": [1, 3]}
        y = conv2d(x, w, None, [1, 3], [2, 1, 0, 2], [1, 1], 1, xzp=0, acc="int64").astype("int32")
        return [(x, False), (w, True), (xzp, True), (wzp, True)], [("qnn.conv2d", a, ["i0", "i1", "i2", "i3"])], [y]
    # qnn.matmul on the int8 dot-product kernel (daemon/lower/lower_matmul.c, docs/int8.md): K not
    # a multiple of 4, N not a multiple of the vector, batch dimensions, one-row tiles split along
    # K, K in blocks with the partial sums in memory
    if name == "qnn_matmul_dot_requant":
        a = rnd((1, 7, 45), "int8", -128, 127)
        b = rnd((45, 37), "int8", -128, 127)
        azp, bzp = np.array(-3, "int8"), np.zeros((37,), "int8")
        bias = rnd((37,), "int32", -20000, 20000)
        isc = (np.linspace(0.5, 3.0, 37) * 1e-4).astype(f32)
        izp, osc, ozp = np.array(0, "int32"), np.array(0.05, f32), np.array(2, "int8")
        acc = ((a.astype(np.int64) - (-3)) @ b.astype(np.int64) + bias).astype("int32")
        v = np.rint(acc.astype(f32) * (isc / osc).astype(f32)) + np.float32(2)
        y = np.clip(v, -128, 127).astype("int8")
        return [(a, False), (b, True), (azp, True), (bzp, True), (bias, True), (isc, True), (izp, True), (osc, True), (ozp, True)], \
               [("qnn.matmul", {}, ["i0", "i1", "i2", "i3"]), ("add", {}, ["prev", "i4"]),
                ("qnn.requantize", {"axis": 2, "out_dtype": "int8"}, ["prev", "i5", "i6", "i7", "i8"])], [y]
    if name in ("qnn_matmul_dot_row_uint8", "qnn_matmul_dot_kblocks"):
        rows, k, n = (1, 1103, 40) if name.endswith("uint8") else (26, 1030, 520)
        a = rnd((rows, k), "uint8", 0, 255) if name.endswith("uint8") else rnd((rows, k), "int8", -128, 127)
        b = rnd((k, n), "int8", -128, 127)
        z = 131 if name.endswith("uint8") else 127
        azp, bzp = np.array(z, a.dtype), np.array(0, "int8")
        y = ((a.astype(np.int64) - z) @ b.astype(np.int64)).astype("int32")
        return [(a, False), (b, True), (azp, True), (bzp, True)], [("qnn.matmul", {}, ["i0", "i1", "i2", "i3"])], [y]
    if name == "requantize_per_axis_saturating":
        x = rnd((1, 3, 4, 4), "int32", -40000, 40000)
        isc = np.array([0.002, 0.0005, 0.01], f32)
        izp, osc, ozp = np.array(3, "int32"), np.array(0.1, f32), np.array(-7, "int8")
        v = np.rint((x - izp).astype(f32) * (isc / osc).astype(f32).reshape(1, 3, 1, 1)) + np.float32(-7)
        y = np.clip(v, -128, 127).astype("int8")
        return [(x, False), (isc, True), (izp, True), (osc, True), (ozp, True)], \
               [("qnn.requantize", {"axis": 1, "out_dtype": "int8"}, ["i0", "i1", "i2", "i3", "i4"])], [y]
    if name == "quantize_int8_per_axis":
        x = (rnd((2, 3, 4)) * 40).astype(f32)
        sc, zp = np.array([0.1, 0.25, 0.5], f32), np.array([-3, 0, 5], "int8")
        y = np.clip(np.rint(x / sc.reshape(1, 3, 1)) + zp.reshape(1, 3, 1).astype(f32), -128, 127).astype("int8")
        return [(x, False), (sc, True), (zp, True)], [("qnn.quantize", {"axis": 1, "out_dtype": "int8"}, ["i0", "i1", "i2"])], [y]
    if name == "quantize_int32_saturating":
        x = np.array([3e9, -3e9, 2147483520.0, 1.5, -2.5, 2.5e9], f32)
        sc, zp = np.array(1.0, f32), np.array(0, "int32")
        y = np.clip(np.rint(x / sc) + zp, -2**31, 2**31 - 1).astype("int32")
        return [(x, False), (sc, True), (zp, True)], [("qnn.quantize", {"out_dtype": "int32"}, ["i0", "i1", "i2"])], [y]
    if name == "requantize_int16":
        x = rnd((2, 8), "int32", -10**7, 10**7)
        isc, izp, osc, ozp = np.array(0.01, f32), np.array(-5, "int32"), np.array(0.5, f32), np.array(12, "int16")
        v = np.rint((x - izp).astype(f32) * np.float32(isc / osc)) + np.float32(12)
        y = np.clip(v, -32768, 32767).astype("int16")
        return [(x, False), (isc, True), (izp, True), (osc, True), (ozp, True)], \
               [("qnn.requantize", {"out_dtype": "int16"}, ["i0", "i1", "i2", "i3", "i4"])], [y]
    if name == "qnn_matmul_int16":
        a, b = rnd((3, 5), "int16", -3000, 3000), rnd((5, 4), "int16", -3000, 3000)
        azp, bzp = np.array(7, "int16"), rnd((4,), "int16", -9, 9)
        y = ((a.astype("int64") - 7) @ (b.astype("int64") - bzp.astype("int64"))).astype("int32")
        return [(a, False), (b, False), (azp, True), (bzp, True)], [("qnn.matmul", {}, ["i0", "i1", "i2", "i3"])], [y]
    if name == "dequantize_int8_per_axis":
        x = rnd((2, 3, 4), "int8", -128, 127)
        sc, zp = np.array([0.1, 0.25, 0.5], f32), np.array([-3, 0, 5], "int8")
        y = (x.astype(f32) - zp.reshape(1, 3, 1).astype(f32)) * sc.reshape(1, 3, 1)
        return [(x, False), (sc, False), (zp, False)], [("qnn.dequantize", {"axis": 1}, ["i0", "i1", "i2"])], [y]
    if name.startswith("resize_"):
        spec = {
            "resize_linear_asymmetric_down": ((1, 2, 7, 9), [4, 5], "linear", "asymmetric", "round_prefer_floor"),
            "resize_linear_align_corners_up": ((1, 1, 3, 4), [7, 9], "linear", "align_corners", "round_prefer_floor"),
            "resize_linear_half_pixel_mixed": ((1, 2, 5, 4), [3, 9], "linear", "half_pixel", "round_prefer_floor"),
            "resize_nearest_half_pixel_down": ((1, 1, 9, 7), [4, 3], "nearest", "half_pixel", "round_prefer_floor"),
            "resize_nearest_pytorch_to_one": ((1, 1, 4, 4), [1, 3], "nearest", "pytorch_half_pixel", "round_prefer_ceil"),
            "resize_nearest_ceil_asymmetric": ((1, 1, 3, 5), [7, 4], "nearest", "asymmetric", "ceil"),
        }[name]
        x = rnd(spec[0])
        a = {"size": spec[1], "method": spec[2], "coordinate_transformation_mode": spec[3], "nearest_mode": spec[4]}
        return [(x, False)], [("image.resize2d", a, ["i0"])], [resize(x, spec[1], spec[2], spec[3], spec[4]).astype(f32)]
    if name.startswith("resize2_"):
        # (input shape, size, method, transformation, nearest_mode, extra attributes)
        spec = {
            "resize2_cubic_half_pixel_batch": ((2, 3, 5, 7), [9, 4], "cubic", "half_pixel", "round_prefer_floor", {}),
            "resize2_cubic_exclude_align_corners": ((3, 2, 7, 5), [4, 11], "cubic", "align_corners", "round_prefer_floor",
                                                    {"cubic_coeff_a": -0.5, "exclude_outside": True}),
            "resize2_cubic_asymmetric_down": ((2, 1, 9, 6), [4, 5], "cubic", "asymmetric", "round_prefer_floor",
                                              {"exclude_outside": True}),
            "resize2_crop_nearest_extrapolate": ((2, 2, 5, 6), [4, 5], "nearest", "tf_crop_and_resize", "round_prefer_ceil",
                                                 {"roi": [0.1, -0.2, 0.9, 1.3], "extrapolation_value": -3.5}),
            "resize2_crop_cubic_one_row": ((1, 3, 6, 5), [1, 4], "cubic", "tf_crop_and_resize", "round_prefer_floor",
                                           {"roi": [0.2, 0.1, 0.7, 0.8], "extrapolation_value": 2.0}),
            "resize2_tf_half_pixel_for_nn_up": ((2, 2, 3, 4), [7, 9], "nearest", "tf_half_pixel_for_nn",
                                                "round_prefer_ceil", {}),
            # enlarging in two passes (lower_resize.c): rows of 1000 and 600 outputs, so the
            # buffer holds 4 and 6 input rows and the output rows go in several bands
            "resize2_linear_up_bands": ((2, 3, 6, 40), [23, 1000], "linear", "half_pixel", "round_prefer_floor", {}),
            "resize2_cubic_up_bands": ((1, 2, 7, 10), [30, 600], "cubic", "asymmetric", "round_prefer_floor", {}),
            # a cubic row of 1100 outputs: the buffer holds 3 rows, one output row reads 4, so
            # the one-pass nest
            "resize2_cubic_up_too_wide": ((1, 1, 4, 5), [9, 1100], "cubic", "pytorch_half_pixel", "round_prefer_floor",
                                          {}),
            # NCHW<b>c (docs/layouts.md): each pixel's block of channels one vector
            "resize2_nchwc_linear_up": ((2, 16, 5, 6), [9, 11], "linear", "half_pixel", "round_prefer_floor",
                                        {"layout": "NCHW8c"}),
            "resize2_nchwc_cubic_down": ((1, 12, 9, 7), [4, 5], "cubic", "align_corners", "round_prefer_floor",
                                         {"layout": "NCHW4c"}),
            "resize2_nchwc_nearest_up": ((1, 32, 3, 4), [7, 9], "nearest", "asymmetric", "floor",
                                         {"layout": "NCHW16c"}),
            "resize2_nchwc_crop_linear": ((1, 8, 5, 6), [4, 5], "linear", "tf_crop_and_resize", "round_prefer_floor",
                                          {"layout": "NCHW8c", "roi": [0.1, -0.2, 0.9, 1.3], "extrapolation_value": -1.5}),
        }[name]
        x = rnd(spec[0])
        a = {"size": spec[1], "method": spec[2], "coordinate_transformation_mode": spec[3], "nearest_mode": spec[4]}
        a.update(spec[5])
        e = spec[5]
        y = resize_general(x, spec[1], spec[2], spec[3], spec[4], e.get("cubic_coeff_a", -0.75),
                           e.get("exclude_outside", False), e.get("roi", (0, 0, 1, 1)), e.get("extrapolation_value", 0.0))
        if "layout" in e:
            b = int(e["layout"][4:-1])
            return [(blocked(x, b), False)], [("image.resize2d", a, ["i0"])], [blocked(y, b).astype(f32)]
        return [(x, False)], [("image.resize2d", a, ["i0"])], [y.astype(f32)]
    # an image's channel join and element-wise ops, split among the cores by rows
    # (docs/threads.md, "Locality"): 13 rows, which no count of cores used here divides evenly
    if name == "concat_rows_image":
        xs = [rnd((1, c, 13, 21)) for c in (5, 16, 3)]
        m = rnd((1, 24, 1, 1))
        return ([(x, False) for x in xs] + [(m, False)],
                [("concatenate", {"axis": 1}, ["i0", "i1", "i2"]), ("multiply", {}, ["prev", "i3"]), ("nn.relu", {}, ["prev"])],
                [np.maximum(np.concatenate(xs, 1) * m, 0).astype(f32)])
    # a join of tokens along the sequence: whole rows of the last axis (docs/threads.md)
    if name == "concat_tokens":
        xs = [rnd((1, 1, 40)), rnd((1, 203, 40))]
        p = rnd((1, 204, 40))
        return ([(x, False) for x in xs] + [(p, False)],
                [("concatenate", {"axis": 1}, ["i0", "i1"]), ("add", {}, ["prev", "i2"])],
                [(np.concatenate(xs, 1) + p).astype(f32)])
    if name == "pointwise_rows_image":
        x, m = rnd((1, 24, 101, 110)), rnd((1, 24, 1, 110))
        return [(x, False), (m, False)], [("multiply", {}, ["i0", "i1"]), ("nn.relu", {}, ["prev"])], [np.maximum(x * m, 0)]
    if name == "strided_slice_negative":
        x = rnd((6, 7, 8))
        a = {"begin": [5, 1, 7], "end": [-1, 7, 0], "strides": [-2, 3, -3]}
        return [(x, False)], [("strided_slice", a, ["i0"])], [np.ascontiguousarray(x[5::-2, 1:7:3, 7:0:-3])]
    # operators the constant folder moves natively, at any size (fold_constants.c, fold_native):
    # the folded constant must equal numpy's result, as the lowering's does
    if name == "fold_strided_slice_negative":
        x = rnd((6, 7, 8))
        a = {"begin": [5, 1, 7], "end": [-1, 7, 0], "strides": [-2, 3, -3]}
        return [(x, False)], [("strided_slice", a, ["i0"])], [np.ascontiguousarray(x[5::-2, 1:7:3, 7:0:-3])]
    if name == "fold_broadcast_to":
        x = rnd((3, 1, 5))
        return [(x, False)], [("broadcast_to", {"shape": [2, 3, 4, 5]}, ["i0"])], [np.broadcast_to(x, (2, 3, 4, 5)).copy()]
    if name == "fold_concat_axis1":
        x, y = rnd((2, 3, 4)), rnd((2, 5, 4))
        return [(x, False), (y, False)], [("concatenate", {"axis": 1}, ["i0", "i1"])], [np.concatenate([x, y], 1)]
    if name == "fold_transpose_4d":
        x = rnd((2, 3, 4, 5))
        return [(x, False)], [("transpose", {"axes": [2, 0, 3, 1]}, ["i0"])], [np.ascontiguousarray(x.transpose(2, 0, 3, 1))]
    if name == "fold_cast_float16":
        x = rnd((4, 6)).astype("float16")
        return [(x, False)], [("cast", {"dtype": "float32"}, ["i0"])], [x.astype("float32")]
    # the math functions over the whole float32 range: alone (scalar element code), and as the
    # epilogue of a matmul, whose vectors the test checks at every vector shape (x times the
    # identity is x exactly)
    for fn in MATH_ULP:
        if name == "math_%s_sweep" % fn:
            x = math_sweep()
            return [(x, False)], [(fn, {}, ["i0"])], [math_reference(fn, x)]
        if name == "math_%s_epilogue" % fn:
            x = math_sweep(finite=True)
            x = x[:len(x) // 16 * 16].reshape(-1, 16)
            eye = np.eye(16, dtype=np.float32)
            return ([(x, False), (eye, True)], [("matmul", {}, ["i0", "i1"]), (fn, {}, ["prev"])],
                    [math_reference(fn, x)])
    if name == "take_negative_int32":
        x = rnd((3, 5, 4))
        idx = np.array([[-1, 0, 4], [2, -5, 3]], "int32")
        return [(x, False), (idx, False)], [("take", {"axis": 1}, ["i0", "i1"])], [np.take(x, idx, axis=1)]
    if name == "pad_reflect_3d":
        x = rnd((2, 5, 6))
        a = {"pad_before": [0, 2, 3], "pad_after": [1, 3, 2], "mode": "reflect"}
        return [(x, False)], [("nn.pad", a, ["i0"])], [np.pad(x, [(0, 1), (2, 3), (3, 2)], mode="reflect")]
    if name == "pad_edge_int32":
        x = rnd((3, 4), "int32", -100, 100)
        a = {"pad_before": [2, 1], "pad_after": [1, 3], "mode": "edge"}
        return [(x, False)], [("nn.pad", a, ["i0"])], [np.pad(x, [(2, 1), (1, 3)], mode="edge")]
    if name == "pad_constant_value":
        x = rnd((1, 2, 3, 3))
        a = {"pad_before": [0, 1, 2, 0], "pad_after": [1, 0, 1, 2], "pad_value": 2.5}
        return [(x, False)], [("nn.pad", a, ["i0"])], [np.pad(x, [(0, 1), (1, 0), (2, 1), (0, 2)], constant_values=2.5)]
    if name == "sum_two_axes_int32":
        x = rnd((3, 4, 5, 2), "int32", -1000, 1000)
        return [(x, False)], [("sum", {"axis": [0, 2], "keepdims": False}, ["i0"])], [x.sum(axis=(0, 2)).astype("int32")]
    if name == "max_two_axes_keepdims":
        x = rnd((3, 4, 5, 2))
        return [(x, False)], [("max", {"axis": [1, 3], "keepdims": True}, ["i0"])], [x.max(axis=(1, 3), keepdims=True)]
    if name == "mean_last_axis_then_sqrt":
        x = np.abs(rnd((4, 6)))
        return [(x, False)], [("mean", {"axis": [-1], "keepdims": False}, ["i0"]), ("sqrt", {}, ["prev"])], \
               [np.sqrt(x.mean(axis=-1)).astype(f32)]
    if name == "argmax_ties_first":
        x = rnd((4, 3, 2), "int32", 0, 2).astype(f32)
        return [(x, False)], [("argmax", {"axis": 0, "keepdims": False}, ["i0"])], [np.argmax(x, axis=0).astype("int64")]
    if name == "argmin_ties_last":
        x = rnd((3, 5), "int32", 0, 2).astype(f32)
        last = x.shape[1] - 1 - np.argmin(x[:, ::-1], axis=1)
        return [(x, False)], [("argmin", {"axis": 1, "keepdims": True, "select_last_index": True}, ["i0"])], \
               [last.reshape(3, 1).astype("int64")]
    if name == "softmax_axis1_epilogue":
        x, s, b = rnd((2, 3, 4, 5)), rnd((3, 1, 1)), rnd((5,))
        y = softmax(x.astype("float64"), 1) * s + b
        return [(x, False), (s, True), (b, False)], \
               [("nn.softmax", {"axis": 1}, ["i0"]), ("multiply", {}, ["prev", "i1"]), ("add", {}, ["prev", "i2"])], \
               [y.astype(f32)]
    # softmax/rows-vectorized (lower_softmax.c): rows of whole vectors and a narrower last one,
    # a row shorter than one vector, a masked epilogue, and log_softmax; large values, so that
    # a kernel that forgot the maximum overflows
    if name == "softmax_rows_tail_epilogue":
        x, mask, k = rnd((2, 3, 37)) * 30, rnd((37,)), rnd((3, 1))
        y = softmax(x.astype("float64") + 0, -1) * k + mask
        return [(x, False), (k, True), (mask, False)], \
               [("nn.softmax", {"axis": -1}, ["i0"]), ("multiply", {}, ["prev", "i1"]), ("add", {}, ["prev", "i2"])], \
               [y.astype(f32)]
    # rows of 49 (Swin-T's windows) whose maximum, far above the rest, is in the last column: the
    # tail vector's columns must count in the maximum, or the exps overflow
    if name == "softmax_rows_tail_max":
        x = rnd((6, 49)) * 5
        x[:, 48] = 120 + rnd((6,))
        return [(x, False)], [("nn.softmax", {"axis": -1}, ["i0"])], [softmax(x.astype("float64"), -1).astype(f32)]
    if name == "softmax_rows_short":
        x = rnd((5, 3)) * 30
        return [(x, False)], [("nn.softmax", {"axis": 1}, ["i0"])], [softmax(x.astype("float64"), 1).astype(f32)]
    if name == "softmax_rows_long":
        x = rnd((3, 9000)) * 5
        return [(x, False)], [("nn.softmax", {"axis": -1}, ["i0"])], [softmax(x.astype("float64"), -1).astype(f32)]
    if name == "log_softmax_rows":
        x = rnd((4, 50)) * 30
        d = x.astype("float64")
        y = d - d.max(axis=1, keepdims=True) - np.log(np.exp(d - d.max(axis=1, keepdims=True)).sum(axis=1, keepdims=True))
        return [(x, False)], [("nn.log_softmax", {"axis": 1}, ["i0"])], [y.astype(f32)]
    # nn.layer_norm (lower_norm.c): rows of whole vectors and a narrower last one, an epilogue
    # (GELU's erf), a row shorter than a vector, values far from zero (a kernel that forgets the
    # mean loses them), a scale and bias of one value
    if name == "layer_norm_rows_gelu":
        x, g, b = rnd((3, 5, 37)) * 4 + 100, rnd((37,)), rnd((37,))
        d = x.astype("float64")
        m = d.mean(-1, keepdims=True)
        y = (d - m) / np.sqrt(((d - m) ** 2).mean(-1, keepdims=True) + 1e-6) * g + b
        import math
        e = np.vectorize(math.erf)(y)
        return [(x, False), (g, True), (b, True)], [("nn.layer_norm", {"epsilon": 1e-6}, ["i0", "i1", "i2"]),
                                                     ("erf", {}, ["prev"])], [e.astype(f32)]
    if name == "layer_norm_rows_short":
        x, g, b = rnd((4, 3)), np.float32([1.5]), np.float32([-0.25])
        d = x.astype("float64")
        m = d.mean(-1, keepdims=True)
        y = (d - m) / np.sqrt(((d - m) ** 2).mean(-1, keepdims=True) + 1e-5) * 1.5 - 0.25
        return [(x, False), (g, True), (b, True)], [("nn.layer_norm", {}, ["i0", "i1", "i2"])], [y.astype(f32)]
    # nn.attention (lower_attention.c): keys as rows (transposed by the kernel) and transposed,
    # a mask broadcast over heads, batch dimensions broadcast, rows and keys that leave tails,
    # large scores (a kernel that forgot the maximum overflows), an epilogue
    def attention(q, kt, v, scale, mask=None):
        s = np.matmul(q.astype("float64"), kt) * scale
        if mask is not None:
            s = s + mask
        e = np.exp(s - s.max(-1, keepdims=True))
        return np.matmul(e / e.sum(-1, keepdims=True), v)
    if name == "attention_keys_rows_mask":
        q, k, v = rnd((2, 3, 13, 20)) * 3, rnd((2, 1, 37, 20)) * 3, rnd((2, 3, 37, 21))
        mask = np.where(rnd((13, 37)) > 0.8, -1e4, 0).astype(f32)
        y = attention(q, np.swapaxes(k, -1, -2), v, 0.5, mask)
        return [(q, False), (k, False), (v, False), (mask, True)], \
               [("nn.attention", {"scale": 0.5}, ["i0", "i1", "i2", "i3"])], [y.astype(f32)]
    if name == "attention_keys_transposed":
        q, kt, v = rnd((4, 6, 16)), rnd((4, 16, 9)), rnd((4, 9, 16))
        y = attention(q, kt, v, 0.25)
        return [(q, False), (kt, False), (v, False)], \
               [("nn.attention", {"scale": 0.25, "keys_transposed": True}, ["i0", "i1", "i2"]),
                ("nn.relu", {}, ["prev"])], [np.maximum(y, 0).astype(f32)]
    if name == "log_softmax_axis0":
        x = rnd((4, 3)) * 10
        y = x - x.max(axis=0) - np.log(np.exp(x - x.max(axis=0)).sum(axis=0))
        return [(x, False)], [("nn.log_softmax", {"axis": 0}, ["i0"])], [y.astype(f32)]
    if name == "global_pools":
        x = rnd((2, 3, 5, 7))
        return [(x, False)], [("nn.global_avg_pool2d", {}, ["i0"])], [x.mean(axis=(2, 3), keepdims=True).astype(f32)]
    if name == "global_pool_vectors_whole":
        # 4x8 planes: whole vectors at every width, no rest
        x = rnd((1, 6, 4, 8))
        return [(x, False)], [("nn.global_avg_pool2d", {}, ["i0"])], [x.mean(axis=(2, 3), keepdims=True).astype(f32)]
    if name == "global_pool_vectors_epilogue":
        # NCHW on vector targets (lower_pool.c): 7x7 planes (whole vectors and one element
        # at every width), 20 channels, two images, an epilogue
        x, b = rnd((2, 20, 7, 7)), rnd((20, 1, 1))
        y = np.maximum(x.mean(axis=(2, 3), keepdims=True) + b, 0)
        return [(x, False), (b, True)], [("nn.global_avg_pool2d", {}, ["i0"]), ("add", {}, ["prev", "i1"]), ("nn.relu", {}, ["prev"])], [y.astype(f32)]
    if name == "broadcast_chain_three_inputs":
        x, y, z = rnd((2, 3, 4, 5)), rnd((3, 1, 5)), rnd((4, 1))
        out = np.maximum(x + y * z, 0) - z
        return [(x, False), (y, False), (z, True)], \
               [("multiply", {}, ["i1", "i2"]), ("add", {}, ["i0", "prev"]), ("nn.relu", {}, ["prev"]),
                ("subtract", {}, ["prev", "i2"])], [out.astype(f32)]
    if name == "cast_truncates":
        x = (rnd((12,)) * 5).astype(f32)
        return [(x, False)], [("cast", {"dtype": "int32"}, ["i0"])], [x.astype("int32")]
    if name == "mod_float_divisor_sign":
        x, y = (rnd((10,)) * 7).astype(f32), (rnd((10,)) * 3).astype(f32)
        return [(x, False), (y, False)], [("mod", {}, ["i0", "i1"])], [np.mod(x, y).astype(f32)]
    if name == "where_broadcast":
        c, x, y = rnd((3, 1), "int32", 0, 1).astype("bool"), rnd((1, 4)), rnd((3, 4))
        return [(c, False), (x, False), (y, False)], [("where", {}, ["i0", "i1", "i2"])], [np.where(c, x, y)]
    # blocked channels, NCHW<b>c (docs/layouts.md): the layout pass's kernels, at blocks of 16, 8
    # and 4 whatever the target's lanes (the test runs each at 1, 4, 8 and 16)
    if name == "conv_nchwc_stem":
        # NCHW in (3 channels), NCHW16c out: 3x3 stride 2 padding 1 on 11x13, bias, relu
        x, w, b = rnd((1, 3, 11, 13)), rnd((32, 3, 3, 3)), rnd((32,))
        a = {"strides": [2, 2], "padding": [1, 1, 1, 1], "out_layout": "NCHW16c"}
        y = np.maximum(conv2d(x, w, b, [2, 2], [1, 1, 1, 1], [1, 1], 1), 0)
        return [(x, False), (w, True), (b, True)], [("nn.conv2d", a, ["i0", "i1", "i2"]), ("nn.relu", {}, ["prev"])], \
               [blocked(y, 16).astype(f32)]
    if name == "conv_nchwc_residual_batch":
        # NCHW8c in and out, 24 -> 40 channels, 3x3 padding 1 on 7x9, batch 2, + residual, relu
        x, w, b, r = rnd((2, 24, 7, 9)), rnd((40, 24, 3, 3)), rnd((40,)), rnd((2, 40, 7, 9))
        a = {"padding": [1, 1, 1, 1], "data_layout": "NCHW8c", "out_layout": "NCHW8c"}
        y = np.maximum(conv2d(x, w, b, [1, 1], [1, 1, 1, 1], [1, 1], 1) + r, 0)
        return [(blocked(x, 8), False), (w, True), (b, True), (blocked(r, 8), False)], [
            ("nn.conv2d", a, ["i0", "i1", "i2"]), ("add", {}, ["prev", "i3"]), ("nn.relu", {}, ["prev"])], \
            [blocked(y, 8).astype(f32)]
    if name == "conv_nchwc_blocked_in_only":
        # NCHW16c in, NCHW out (24 channels fill no block of 16): 3x3 stride 2 padding 1 on 9x12, + residual
        x, w, b, r = rnd((1, 32, 9, 12)), rnd((24, 32, 3, 3)), rnd((24,)), rnd((1, 24, 5, 6))
        a = {"strides": [2, 2], "padding": [1, 1, 1, 1], "data_layout": "NCHW16c"}
        y = conv2d(x, w, b, [2, 2], [1, 1, 1, 1], [1, 1], 1) + r
        return [(blocked(x, 16), False), (w, True), (b, True), (r, False)], [
            ("nn.conv2d", a, ["i0", "i1", "i2"]), ("add", {}, ["prev", "i3"])], [y.astype(f32)]
    if name == "conv_winograd_nchwc_residual":
        # Winograd from NCHW16c to NCHW16c (at 16 lanes; the channel-blocked kernel at others):
        # 3x3 padding 1 on 18x19 (5x5 tiles, the last row and column partial), 16 -> 32, batch 2,
        # + residual, relu
        x, w, b, r = rnd((2, 16, 18, 19)), rnd((32, 16, 3, 3)), rnd((32,)), rnd((2, 32, 18, 19))
        a = {"padding": [1, 1, 1, 1], "data_layout": "NCHW16c", "out_layout": "NCHW16c"}
        y = np.maximum(conv2d(x, w, b, [1, 1], [1, 1, 1, 1], [1, 1], 1) + r, 0)
        return [(blocked(x, 16), False), (w, True), (b, True), (blocked(r, 16), False)], [
            ("nn.conv2d", a, ["i0", "i1", "i2"]), ("add", {}, ["prev", "i3"]), ("nn.relu", {}, ["prev"])], \
            [blocked(y, 16).astype(f32)]
    if name == "conv_winograd_nchw_in_nchwc_out":
        # Winograd from NCHW to NCHW16c: 3x3 unpadded on 21x17, 24 -> 16
        x, w = rnd((1, 24, 21, 17)), rnd((16, 24, 3, 3))
        a = {"out_layout": "NCHW16c"}
        y = conv2d(x, w, None, [1, 1], [0, 0, 0, 0], [1, 1], 1)
        return [(x, False), (w, True)], [("nn.conv2d", a, ["i0", "i1"])], [blocked(y, 16).astype(f32)]
    if name == "conv_nchwc_grouped_copy_bands":
        # the padded copy of an NCHW16c input in bands of rows (docs/threads.md, "Locality"; large
        # enough to run in parallel: with three cores, bands of 12, 12 and the last 10 padded
        # rows), rows too wide for a group's window on the stack (docs/lowering.md, "Windows of
        # a group": three rows of 151 columns of 16 channels): 3x3 stride 2, two groups of 16,
        # uneven padding, 32 -> 32 channels, bias
        x, w, b = rnd((1, 32, 31, 150)), rnd((32, 16, 3, 3)), rnd((32,))
        a = {"strides": [2, 2], "padding": [1, 1, 2, 0], "groups": 2, "data_layout": "NCHW16c", "out_layout": "NCHW16c"}
        y = conv2d(x, w, b, [2, 2], [1, 1, 2, 0], [1, 1], 2)
        return [(blocked(x, 16), False), (w, True), (b, True)], [("nn.conv2d", a, ["i0", "i1", "i2"])], [blocked(y, 16).astype(f32)]
    if name == "conv_winograd_nchw4c_bands":
        # Winograd on channel vectors (an NCHW4c input: every target's lanes hold a block of 4;
        # docs/lowering.md, "Winograd kernel"): batch 2, 20 -> 16 channels, uneven padding, a
        # 17x22 output (5 tile rows: 3 cores give bands of 2, the last past the image), bias
        x, w, b = rnd((2, 20, 17, 22)), rnd((16, 20, 3, 3)), rnd((16,))
        a = {"padding": [1, 0, 1, 2], "data_layout": "NCHW4c"}
        y = conv2d(x, w, b, [1, 1], [1, 0, 1, 2], [1, 1], 1)
        return [(blocked(x, 4), False), (w, True), (b, True)], [("nn.conv2d", a, ["i0", "i1", "i2"])], [y.astype(f32)]
    if name == "conv_winograd_nchw8c_small":
        # Winograd on channel vectors of 8 (at 8 and 16 lanes) on a 14x14 image (4x4 tiles, the
        # last row and column partial), 24 -> 32 channels, residual add, relu
        x, w, r = rnd((1, 24, 14, 14)), rnd((32, 24, 3, 3)), rnd((1, 32, 14, 14))
        a = {"padding": [1, 1, 1, 1], "data_layout": "NCHW8c"}
        y = np.maximum(conv2d(x, w, None, [1, 1], [1, 1, 1, 1], [1, 1], 1) + r, 0)
        return [(blocked(x, 8), False), (w, True), (r, False)], [
            ("nn.conv2d", a, ["i0", "i1"]), ("add", {}, ["prev", "i2"]), ("nn.relu", {}, ["prev"])], [y.astype(f32)]
    if name == "conv_nchwc_mixed_blocks":
        # blocks of 8 in, 16 out (24 -> 32 channels, as after MobileNet-v2's 24-channel layers at
        # 16 lanes): 3x3 stride 2 padding 1 on 9x11, bias, relu
        x, w, b = rnd((1, 24, 9, 11)), rnd((32, 24, 3, 3)), rnd((32,))
        a = {"strides": [2, 2], "padding": [1, 1, 1, 1], "data_layout": "NCHW8c", "out_layout": "NCHW16c"}
        y = np.maximum(conv2d(x, w, b, [2, 2], [1, 1, 1, 1], [1, 1], 1), 0)
        return [(blocked(x, 8), False), (w, True), (b, True)], [("nn.conv2d", a, ["i0", "i1", "i2"]),
                                                                ("nn.relu", {}, ["prev"])], [blocked(y, 16).astype(f32)]
    if name == "conv_nchwc_pointwise":
        # 1x1 stride 1 (the image as one row) on 9x11, NCHW16c 32 -> 48, no bias
        x, w = rnd((1, 32, 9, 11)), rnd((48, 32, 1, 1))
        a = {"data_layout": "NCHW16c", "out_layout": "NCHW16c"}
        y = conv2d(x, w, None, [1, 1], [0, 0, 0, 0], [1, 1], 1)
        return [(blocked(x, 16), False), (w, True)], [("nn.conv2d", a, ["i0", "i1"])], [blocked(y, 16).astype(f32)]
    if name == "conv_nchwc_strided_dilated":
        # 3x3 stride [2, 1], dilation [1, 2], uneven padding, NCHW4c 8 -> 12 on 10x17
        x, w, b = rnd((1, 8, 10, 17)), rnd((12, 8, 3, 3)), rnd((12,))
        a = {"strides": [2, 1], "dilation": [1, 2], "padding": [0, 2, 1, 1], "data_layout": "NCHW4c",
             "out_layout": "NCHW4c"}
        y = conv2d(x, w, b, [2, 1], [0, 2, 1, 1], [1, 2], 1)
        return [(blocked(x, 4), False), (w, True), (b, True)], [("nn.conv2d", a, ["i0", "i1", "i2"])], \
               [blocked(y, 4).astype(f32)]
    # taps mostly in the padding (lower_conv_tiled.c, skip_taps): each tile loops over the taps
    # inside the image only
    if name == "conv_nchwc_dilated_sparse":
        # 3x3 at dilation 12 over 14x14 (DeepLabV3's atrous branch), NCHW8c, bias, relu
        x, w, b = rnd((1, 16, 14, 14)), rnd((8, 16, 3, 3)), rnd((8,))
        a = {"padding": [12, 12, 12, 12], "dilation": [12, 12], "data_layout": "NCHW8c", "out_layout": "NCHW8c"}
        y = np.maximum(conv2d(x, w, b, [1, 1], [12, 12, 12, 12], [12, 12], 1), 0)
        return [(blocked(x, 8), False), (w, True), (b, True)], [("nn.conv2d", a, ["i0", "i1", "i2"]),
                                                                 ("nn.relu", {}, ["prev"])], [blocked(y, 8).astype(f32)]
    if name == "conv_dilated_sparse_uneven":
        # NCHW, 5x3 kernel at dilations [4, 6], stride [2, 1], uneven padding, batch 2
        x, w = rnd((2, 5, 9, 11)), rnd((7, 5, 5, 3))
        a = {"padding": [8, 6, 7, 5], "dilation": [4, 6], "strides": [2, 1]}
        y = conv2d(x, w, None, [2, 1], [8, 6, 7, 5], [4, 6], 1)
        return [(x, False), (w, True)], [("nn.conv2d", a, ["i0", "i1"])], [y.astype(f32)]
    if name == "conv_nchwc_dilated_sparse_kblocks":
        # taps mostly in the padding with enough input channels for blocks of them (partial
        # sums): 320 channels NCHW16c over 10x12, 3x3 at dilations [6, 5], uneven padding, 40
        # output channels NCHW8c, bias; the taps' columns start and stop inside the row
        x, w, b = rnd((1, 320, 10, 12)), rnd((40, 320, 3, 3)), rnd((40,))
        a = {"padding": [6, 5, 5, 4], "dilation": [6, 5], "data_layout": "NCHW16c", "out_layout": "NCHW8c"}
        y = conv2d(x, w, b, [1, 1], [6, 5, 5, 4], [6, 5], 1)
        return [(blocked(x, 16), False), (w, True), (b, True)], [("nn.conv2d", a, ["i0", "i1", "i2"])], \
            [blocked(y, 8).astype(f32)]
    if name == "conv_nchwc_grouped":
        # grouped 3x3 (4 groups of 8 -> 8 channels: one block of NCHW8c per group on each side),
        # stride 2, padding, batch 2, bias, relu
        x, w, b = rnd((2, 32, 11, 13)), rnd((32, 8, 3, 3)), rnd((32,))
        a = {"strides": [2, 2], "padding": [1, 1, 1, 1], "groups": 4, "data_layout": "NCHW8c", "out_layout": "NCHW8c"}
        y = np.maximum(conv2d(x, w, b, [2, 2], [1, 1, 1, 1], [1, 1], 4), 0)
        return [(blocked(x, 8), False), (w, True), (b, True)], [("nn.conv2d", a, ["i0", "i1", "i2"]),
                                                                 ("nn.relu", {}, ["prev"])], [blocked(y, 8).astype(f32)]
    if name == "conv_nchwc_grouped_row_windows":
        # a window of its group's padded rows per task (docs/lowering.md, "Windows of a group"):
        # rows wider than 16 (a window per output row), dilation 2 down the rows (five padded
        # rows a window), uneven padding, 2 groups of 16 in NCHW16c, batch 2, bias, relu
        x, w, b = rnd((2, 32, 9, 20)), rnd((32, 16, 3, 3)), rnd((32,))
        a = {"padding": [2, 1, 1, 0], "dilation": [2, 1], "groups": 2, "data_layout": "NCHW16c", "out_layout": "NCHW16c"}
        y = np.maximum(conv2d(x, w, b, [1, 1], [2, 1, 1, 0], [2, 1], 2), 0)
        return [(blocked(x, 16), False), (w, True), (b, True)], [("nn.conv2d", a, ["i0", "i1", "i2"]),
                                                                 ("nn.relu", {}, ["prev"])], [blocked(y, 16).astype(f32)]
    if name == "conv_nchwc_grouped_wide":
        # 2 groups of 16 input and 32 output channels (two blocks of NCHW16c out per group) on a
        # flat 1x1 image of 7x7, blocked input only in 4s (NCHW out)
        x, w = rnd((1, 32, 7, 7)), rnd((64, 16, 1, 1))
        a = {"groups": 2, "data_layout": "NCHW4c"}
        y = conv2d(x, w, None, [1, 1], [0, 0, 0, 0], [1, 1], 2)
        return [(blocked(x, 4), False), (w, True)], [("nn.conv2d", a, ["i0", "i1"])], [y.astype(f32)]
    if name in ("conv_nchwc_small_groups", "conv_nchwc_small_groups_s2", "conv_nchwc_small_groups_8c"):
        # groups smaller than a block, as many inputs as outputs (docs/layouts.md, "Small
        # groups": lane l of a block reads input channel (l / Cg)*Cg + i): groups of 4 in NCHW16c
        # on two images with asymmetric padding, bias and relu; of 8, stride 2, the weight an
        # input; of 2 in NCHW8c
        xs, groups, st, pads, bk = {
            "conv_nchwc_small_groups": ((2, 32, 9, 11), 8, [1, 1], [1, 0, 2, 1], 16),
            "conv_nchwc_small_groups_s2": ((1, 32, 12, 13), 4, [2, 2], [1, 1, 1, 1], 16),
            "conv_nchwc_small_groups_8c": ((1, 16, 7, 9), 8, [1, 1], [1, 1, 1, 1], 8)}[name]
        c = xs[1]
        x, w, b = rnd(xs), rnd((c, c // groups, 3, 3)), rnd((c,))
        lay = "NCHW%dc" % bk
        a = {"strides": st, "padding": pads, "groups": groups, "data_layout": lay, "out_layout": lay}
        y = np.maximum(conv2d(x, w, b, st, pads, [1, 1], groups), 0)
        # the stride-2 case with its weight computed at run time (read in place, not packed)
        return [(blocked(x, bk), False), (w, name != "conv_nchwc_small_groups_s2"), (b, True)], [
            ("nn.conv2d", a, ["i0", "i1", "i2"]), ("nn.relu", {}, ["prev"])], [blocked(y, bk).astype(f32)]
    if name == "conv_nchwc_depthwise_relu6":
        # depthwise 3x3 padding 1 on a 13x21 row (edges, a row of whole tiles and a rest),
        # NCHW16c, 32 channels, batch 2, bias, clip
        x, w, b = rnd((2, 32, 13, 21)), rnd((32, 1, 3, 3)), rnd((32,))
        a = {"padding": [1, 1, 1, 1], "groups": 32, "data_layout": "NCHW16c", "out_layout": "NCHW16c"}
        y = np.clip(conv2d(x, w, b, [1, 1], [1, 1, 1, 1], [1, 1], 32), 0, 6)
        return [(blocked(x, 16), False), (w, True), (b, True)], [
            ("nn.conv2d", a, ["i0", "i1", "i2"]), ("clip", {"a_min": 0.0, "a_max": 6.0}, ["prev"])], \
            [blocked(y, 16).astype(f32)]
    if name == "conv_nchwc_depthwise_strided":
        # depthwise 5x5 stride 2 padding [2, 1, 2, 3], dilation [1, 2] on 15x23, NCHW8c, 16 channels
        x, w = rnd((1, 16, 15, 23)), rnd((16, 1, 5, 5))
        a = {"strides": [2, 2], "padding": [2, 1, 2, 3], "dilation": [1, 2], "groups": 16, "data_layout": "NCHW8c",
             "out_layout": "NCHW8c"}
        y = conv2d(x, w, None, [2, 2], [2, 1, 2, 3], [1, 2], 16)
        return [(blocked(x, 8), False), (w, True)], [("nn.conv2d", a, ["i0", "i1"])], [blocked(y, 8).astype(f32)]
    if name == "conv_nchwc_depthwise_runtime_weight":
        # a depthwise weight computed at run time (read in place, not packed): 3x3 stride 2
        # padding 1, NCHW16c, 16 channels on 9x10
        x, w = rnd((1, 16, 9, 10)), rnd((16, 1, 3, 3))
        a = {"strides": [2, 2], "padding": [1, 1, 1, 1], "groups": 16, "data_layout": "NCHW16c", "out_layout": "NCHW16c"}
        y = conv2d(x, w, None, [2, 2], [1, 1, 1, 1], [1, 1], 16)
        return [(blocked(x, 16), False), (w, False)], [("nn.conv2d", a, ["i0", "i1"])], [blocked(y, 16).astype(f32)]
    # int8 in blocked channels (docs/int8.md, "Blocked channels"): the channel-blocked dot kernel
    # reading blocked words and writing blocks, the blocked depthwise kernel, requantize per
    # channel through its layout attribute; integers exact
    if name in ("qnn_conv_nchwc_requant_uint8", "qnn_conv_nchwc_narrow_int8", "qnn_conv_nchwc_depthwise_uint8"):
        # NCHW16c 3x3 (asymmetric padding); NCHW8c 1x1 24 -> 40 on two images (at 16 lanes two
        # blocks of 8 to an accumulator, the last one half past the channels); NCHW16c depthwise
        # stride 2 on two images; each + bias and a requantize per channel saturating at both ends
        kind = {"qnn_conv_nchwc_requant_uint8": "3x3", "qnn_conv_nchwc_narrow_int8": "1x1",
                "qnn_conv_nchwc_depthwise_uint8": "dw"}[name]
        u8 = kind != "1x1"
        shape, o, k, bk, st, pads, groups = {
            "3x3": ((1, 32, 9, 11), 32, 3, 16, [1, 1], [1, 2, 1, 0], 1),
            "1x1": ((2, 24, 5, 7), 40, 1, 8, [1, 1], [0, 0, 0, 0], 1),
            "dw": ((2, 32, 10, 13), 32, 3, 16, [2, 2], [1, 0, 2, 1], 32)}[kind]
        c = shape[1]
        x = rnd(shape, "uint8", 0, 255) if u8 else rnd(shape, "int8", -128, 127)
        w = rnd((o, c // groups, k, k), "int8", -128, 127)
        z = {"3x3": 131, "1x1": -5, "dw": 200}[kind]
        xzp, wzp = np.array(z, "uint8" if u8 else "int8"), np.zeros((o,), "int8")
        b = rnd((o, 1, 1), "int32", -30000, 30000)
        isc = (np.linspace(0.2, 3.0, o) * (1e-4 if kind != "dw" else 1e-3)).astype(f32)
        odt = "uint8" if u8 else "int8"
        izp, osc, ozp = np.array(0, "int32"), np.array(0.05, f32), np.array(3 if u8 else -3, odt)
        lay = "NCHW%dc" % bk
        a = {"padding": pads, "strides": st, "groups": groups, "data_layout": lay, "out_layout": lay}
        acc = (conv2d(x, w, None, st, pads, [1, 1], groups, xzp=z, acc="int64") + b).astype("int32")
        v = np.rint(acc.astype(f32) * (isc / osc).astype(f32).reshape(1, o, 1, 1)) + np.float32(int(ozp))
        y = np.clip(v, *((0, 255) if u8 else (-128, 127))).astype(odt)
        bb = np.ascontiguousarray(b.reshape(1, o // bk, bk, 1, 1).transpose(0, 1, 3, 4, 2))
        return [(blocked(x, bk), False), (w, True), (xzp, True), (wzp, True), (bb, True), (isc, True), (izp, True),
                (osc, True), (ozp, True)], \
               [("qnn.conv2d", a, ["i0", "i1", "i2", "i3"]), ("add", {}, ["prev", "i4"]),
                ("qnn.requantize", {"axis": 1, "out_dtype": odt, "layout": lay}, ["prev", "i5", "i6", "i7", "i8"])], \
               [blocked(y, bk)]
    if name in ("qnn_conv_nchwc_stem_uint8", "qnn_conv_nchwc_grouped_int8", "qnn_conv_nchwc_in_only",
                "qnn_conv_nchwc_depthwise_5x5", "qnn_conv_nchwc_copy_bands", "qnn_conv_nchwc_1x1_uint8"):
        # int32 results: an NCHW stem (3 channels) writing NCHW16c, stride 2; two groups of 16
        # in NCHW16c; NCHW8c in, 20 channels of NCHW out, stride 2 with dilation; a 5x5 dilated
        # depthwise in NCHW8c with zero point 0; a layer large enough for its copy and kernel to
        # run in bands of rows (three cores); a 1x1 layer on two images read in place (uint8 on
        # x86: no copy, docs/int8.md "Blocked channels")
        xs, o, k, st, pads, dil, groups, z, u8, bi, bo = {
            "qnn_conv_nchwc_stem_uint8": ((1, 3, 15, 17), 32, 3, [2, 2], [1, 1, 1, 1], [1, 1], 1, 128, True, 0, 16),
            "qnn_conv_nchwc_grouped_int8": ((1, 32, 8, 9), 32, 3, [1, 1], [1, 1, 1, 1], [1, 1], 2, 7, False, 16, 16),
            "qnn_conv_nchwc_in_only": ((1, 16, 11, 13), 20, 3, [2, 2], [0, 1, 2, 1], [2, 1], 1, 255, True, 8, 0),
            "qnn_conv_nchwc_depthwise_5x5": ((1, 16, 12, 14), 16, 5, [1, 1], [4, 4, 4, 4], [2, 2], 16, 0, False, 8, 8),
            "qnn_conv_nchwc_copy_bands": ((1, 32, 58, 60), 32, 3, [1, 1], [1, 1, 1, 1], [1, 1], 1, 9, True, 16, 16),
            "qnn_conv_nchwc_1x1_uint8": ((2, 32, 6, 7), 48, 1, [1, 1], [0, 0, 0, 0], [1, 1], 1, 77, True, 16, 16),
        }[name]
        x = rnd(xs, "uint8", 0, 255) if u8 else rnd(xs, "int8", -128, 127)
        w = rnd((o, xs[1] // groups, k, k), "int8", -128, 127)
        xzp, wzp = np.array(z, "uint8" if u8 else "int8"), np.zeros((o,), "int8")
        a = {"padding": pads, "strides": st, "dilation": dil, "groups": groups}
        if bi:
            a["data_layout"] = "NCHW%dc" % bi
        if bo:
            a["out_layout"] = "NCHW%dc" % bo
        y = conv2d(x, w, None, st, pads, dil, groups, xzp=z, acc="int64").astype("int32")
        return [(blocked(x, bi) if bi else x, False), (w, True), (xzp, True), (wzp, True)], \
               [("qnn.conv2d", a, ["i0", "i1", "i2", "i3"])], [blocked(y, bo) if bo else y]
    if name == "qnn_requantize_nchwc":
        # a requantize of its own on NCHW8c, input zero point and scale per channel
        x = rnd((1, 24, 4, 5), "int32", -40000, 40000)
        izp = rnd((24,), "int32", -100, 100)
        isc = (np.linspace(0.5, 2.0, 24) * 1e-3).astype(f32)
        osc, ozp = np.array(0.1, f32), np.array(17, "uint8")
        v = np.rint((x - izp.reshape(1, 24, 1, 1)).astype(f32) * (isc / osc).astype(f32).reshape(1, 24, 1, 1)) + np.float32(17)
        y = np.clip(v, 0, 255).astype("uint8")
        return [(blocked(x, 8), False), (isc, True), (izp, True), (osc, True), (ozp, True)], \
               [("qnn.requantize", {"axis": 1, "out_dtype": "uint8", "layout": "NCHW8c"}, ["i0", "i1", "i2", "i3", "i4"])], \
               [blocked(y, 8)]
    if name == "max_pool_nchwc_uint8":
        # a quantized model's max pool on its integers in NCHW8c, padding never picked
        x = rnd((1, 16, 9, 10), "uint8", 0, 255)
        a = {"pool_size": [3, 3], "strides": [2, 2], "padding": [1, 1, 1, 1], "layout": "NCHW8c"}
        y = max_pool(x.astype(np.float64), [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], False).astype("uint8")
        return [(blocked(x, 8), False)], [("nn.max_pool2d", a, ["i0"])], [blocked(y, 8)]
    if name == "max_pool_nchwc":
        x = rnd((2, 32, 9, 10))
        a = {"pool_size": [3, 3], "strides": [2, 2], "padding": [1, 1, 1, 1], "ceil_mode": True, "layout": "NCHW16c"}
        return [(blocked(x, 16), False)], [("nn.max_pool2d", a, ["i0"])], \
               [blocked(max_pool(x, [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], True), 16)]
    if name == "avg_pool_nchwc_count_pad":
        x = rnd((1, 16, 17, 13))
        a = {"pool_size": [3, 2], "strides": [1, 2], "padding": [1, 0, 2, 1], "ceil_mode": True,
             "count_include_pad": True, "layout": "NCHW8c"}
        return [(blocked(x, 8), False)], [("nn.avg_pool2d", a, ["i0"]), ("nn.relu", {}, ["prev"])], \
               [blocked(np.maximum(avg_pool(x, [3, 2], [1, 2], [1, 0, 2, 1], True, True), 0), 8)]
    # windows of more taps than the inner pixels' code unrolls (lower_pool.c, POOL_UNROLL_TAPS),
    # dilated, with inner rows and columns between the borders
    if name == "max_pool_nchwc_dilated_large":
        x = rnd((1, 16, 20, 21))
        a = {"pool_size": [5, 4], "strides": [2, 1], "dilation": [2, 1], "padding": [2, 1, 2, 1], "layout": "NCHW8c"}
        return [(blocked(x, 8), False)], [("nn.max_pool2d", a, ["i0"])], \
               [blocked(max_pool(x, [5, 4], [2, 1], [2, 1, 2, 1], [2, 1], False), 8)]
    if name == "avg_pool_nchwc_large":
        x = rnd((1, 8, 15, 16))
        a = {"pool_size": [5, 5], "strides": [1, 2], "padding": [2, 2, 2, 2], "layout": "NCHW4c"}
        return [(blocked(x, 4), False)], [("nn.avg_pool2d", a, ["i0"])], \
               [blocked(avg_pool(x, [5, 5], [1, 2], [2, 2, 2, 2], False, False), 4)]
    if name == "avg_pool_nchwc_inside":
        x = rnd((1, 8, 13, 11))
        a = {"pool_size": [3, 3], "strides": [1, 1], "padding": [1, 1, 1, 1], "layout": "NCHW4c"}
        return [(blocked(x, 4), False)], [("nn.avg_pool2d", a, ["i0"])], \
               [blocked(avg_pool(x, [3, 3], [1, 1], [1, 1, 1, 1], False, False), 4)]
    if name == "global_pools_nchwc":
        x = rnd((2, 32, 5, 7))
        return [(blocked(x, 16), False)], [("nn.global_avg_pool2d", {"layout": "NCHW16c"}, ["i0"])], \
               [blocked(x.mean(axis=(2, 3), keepdims=True), 16).astype(f32)]
    if name == "global_max_pool_nchwc":
        x = rnd((1, 16, 3, 6))
        return [(blocked(x, 8), False)], [("nn.global_max_pool2d", {"layout": "NCHW8c"}, ["i0"])], \
               [blocked(x.max(axis=(2, 3), keepdims=True), 8).astype(f32)]
    raise KeyError(name)


def main():
    outdir, name = sys.argv[1], sys.argv[2]
    inputs, chain, outputs = case(name)
    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    meta = {"inputs": [], "chain": [], "outputs": []}
    for k, (a, const) in enumerate(inputs):
        a = np.ascontiguousarray(a)
        a.astype(a.dtype.newbyteorder("<")).tofile(os.path.join(d, "in%d.bin" % k))
        meta["inputs"].append({"dtype": str(a.dtype), "shape": list(a.shape), "const": const})
    for op, attrs, args in chain:
        meta["chain"].append({"op": op, "attrs": attrs, "args": args})
    for k, a in enumerate(outputs):
        a = np.ascontiguousarray(a)
        a.tofile(os.path.join(d, "out%d.bin" % k))
        meta["outputs"].append({"dtype": str(a.dtype), "shape": list(a.shape)})
    if name.startswith("conv_winograd"):
        # F(4x4, 3x3) rounds more than the direct sum in float32 (its transforms multiply by up
        # to 8 and divide by 24): allowed error 3e-5 of the largest output (docs/lowering.md)
        meta["atol"] = 3e-5 * float(max(np.abs(a).max() for a in outputs))
    if name in ("matmul_packed_at_run_time", "conv_nchwc_dilated_sparse_kblocks"):
        # 500 (about 1,000) products summed in float32 (every lowering, the generic one too): an
        # error of a few float32 steps of the largest output, where a cancelling sum ends near zero
        meta["atol"] = 1e-6 * float(max(np.abs(a).max() for a in outputs))
    if name.startswith("math_"):
        meta["ulp"] = MATH_ULP[name.split("_")[1]]
    if name.startswith("resize2_") or name.startswith("fold_"):
        # the constant folder computes these too (test_lower_numpy.c compares it as well)
        meta["fold"] = True
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f)


if __name__ == "__main__":
    main()
