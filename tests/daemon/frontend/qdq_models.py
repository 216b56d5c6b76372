#!/usr/bin/python3
# Small int8/uint8 models in QDQ form (DequantizeLinear -> float op -> QuantizeLinear, weights as
# integer initializers behind a DequantizeLinear, biases int32 behind one with scale
# x_scale * w_scale), the way ONNX Runtime's quantization tool and PyTorch export them, with the
# expected output from a numpy execution of the QDQ graph in float as ONNX defines each operator
# (QuantizeLinear: x / scale in float32, round half to even, + zero point, saturate;
# DequantizeLinear: (x - zero point) * scale in float32; float ops in float32).
#
#   python3 qdq_models.py OUTDIR [CASE ...]       (default: every case; --list prints the names)
#
# writes OUTDIR/CASE/model.onnx, OUTDIR/CASE/input_0.npy and
# OUTDIR/CASE/test_data_set_0/{input_0,output_0}.pb (the libonnx-testdata layout). The output is
# the last QuantizeLinear's integers. Output quantization is calibrated on the input (min/max of
# the float result, as a static quantizer does), so the outputs spread over the integer range.
# Used by test_qdq.c (tests/daemon/frontend/meson.build: frontend-qdq).
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F32 = np.float32

# ---------------------------------------------------------------- the numpy reference


def _axis_shape(v, rank, axis):
    v = np.asarray(v)
    if v.size == 1:
        return v.reshape(())
    shape = [1] * rank
    shape[axis] = v.size
    return v.reshape(shape)


def quantize_linear(x, scale, zp, axis=1):
    dt = np.asarray(zp).dtype
    info = np.iinfo(dt)
    s = _axis_shape(np.asarray(scale, F32), x.ndim, axis)
    z = _axis_shape(np.asarray(zp), x.ndim, axis).astype(np.float64)
    q = np.rint(np.asarray(x, F32) / s).astype(np.float64) + z  # float32 division, half to even
    return np.clip(q, info.min, info.max).astype(dt)


def dequantize_linear(x, scale, zp, axis=1):
    s = _axis_shape(np.asarray(scale, F32), x.ndim, axis)
    z = _axis_shape(np.asarray(zp), x.ndim, axis).astype(F32)
    return ((x.astype(F32) - z) * s).astype(F32)


def conv2d(x, w, b, strides, pads, group):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.zeros((n, c, h + pads[0] + pads[2], wd + pads[1] + pads[3]), np.float64)
    xp[:, :, pads[0]:pads[0] + h, pads[1]:pads[1] + wd] = x
    oh = (xp.shape[2] - kh) // strides[0] + 1
    ow = (xp.shape[3] - kw) // strides[1] + 1
    y = np.zeros((n, o, oh, ow), np.float64)
    og = o // group
    for g in range(group):
        for oc in range(g * og, (g + 1) * og):
            for i in range(kh):
                for j in range(kw):
                    patch = xp[:, g * cg:(g + 1) * cg, i:i + strides[0] * oh:strides[0], j:j + strides[1] * ow:strides[1]]
                    y[:, oc] += np.einsum('nchw,c->nhw', patch, w[oc, :, i, j].astype(np.float64))
    if b is not None:
        y += b.astype(np.float64).reshape(1, -1, 1, 1)
    return y.astype(F32)


def max_pool(x, k, s):
    n, c, h, w = x.shape
    oh, ow = (h - k) // s + 1, (w - k) // s + 1
    y = np.full((n, c, oh, ow), -np.inf, F32)
    for i in range(k):
        for j in range(k):
            y = np.maximum(y, x[:, :, i:i + s * oh:s, j:j + s * ow:s])
    return y


def attrs_of(node):
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def run_reference(model, feeds):
    """Execute the graph node by node with the functions above."""
    env = dict(feeds)
    for t in model.graph.initializer:
        env[t.name] = numpy_helper.to_array(t)
    for node in model.graph.node:
        a = attrs_of(node)
        i = [env[n] if n else None for n in node.input]
        op = node.op_type
        if op == 'QuantizeLinear':
            y = quantize_linear(i[0], i[1], i[2], a.get('axis', 1))
        elif op == 'DequantizeLinear':
            y = dequantize_linear(i[0], i[1], i[2], a.get('axis', 1))
        elif op == 'Conv':
            y = conv2d(i[0], i[1], i[2] if len(i) > 2 else None, a.get('strides', [1, 1]), a.get('pads', [0] * 4),
                       a.get('group', 1))
        elif op == 'Gemm':
            A = i[0].T if a.get('transA', 0) else i[0]
            B = i[1].T if a.get('transB', 0) else i[1]
            y = a.get('alpha', 1.0) * (A.astype(np.float64) @ B.astype(np.float64))
            if len(i) > 2:
                y = y + a.get('beta', 1.0) * i[2].astype(np.float64)
            y = y.astype(F32)
        elif op == 'MatMul':
            y = (i[0].astype(np.float64) @ i[1].astype(np.float64)).astype(F32)
        elif op == 'Add':
            y = (i[0] + i[1]).astype(F32)
        elif op == 'Relu':
            y = np.maximum(i[0], F32(0))
        elif op == 'Clip':
            y = np.clip(i[0], i[1], i[2]).astype(F32)
        elif op == 'MaxPool':
            y = max_pool(i[0], a['kernel_shape'][0], a.get('strides', [1, 1])[0])
        elif op == 'Flatten':
            y = i[0].reshape(i[0].shape[0], -1)
        else:
            raise SystemExit('qdq_models.py: no reference for ' + op)
        env[node.output[0]] = y
    return [env[o.name] for o in model.graph.output]


# ---------------------------------------------------------------- building models


class Graph:
    def __init__(self, name, seed):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.n = [], [], 0

    def init(self, arr, base):
        self.n += 1
        name = '%s_%d' % (base, self.n)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def node(self, op, ins, **kw):
        self.n += 1
        out = '%s_%d' % (op.lower(), self.n)
        self.nodes.append(helper.make_node(op, ins, [out], name='%s%d' % (op.lower(), self.n), **kw))
        return out

    def q(self, x, s, zp, out=None, **kw):
        y = self.node('QuantizeLinear', [x, self.init(F32(s), 's'), self.init(zp, 'zp')], **kw)
        return y

    def dq(self, xq, s, zp, **kw):
        return self.node('DequantizeLinear', [xq, self.init(s, 's'), self.init(zp, 'zp')], **kw)

    def model(self, x_shape, out, out_dtype, out_shape, check=True):
        g = helper.make_graph(self.nodes, self.name, [helper.make_tensor_value_info('x', TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info(out, out_dtype, out_shape)], self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
        # the output is renamed 'y' for the reader
        m.graph.output[0].name = 'y'
        for nd in m.graph.node:
            for k, o in enumerate(nd.output):
                if o == out:
                    nd.output[k] = 'y'
        if check:
            onnx.checker.check_model(m)
        return m


def calibrate(lo, hi, dtype):
    """Asymmetric min/max quantization of [min(lo, 0), max(hi, 0)] to dtype."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    info = np.iinfo(dtype)
    s = F32((hi - lo) / (info.max - info.min)) if hi > lo else F32(1.0)
    zp = int(np.clip(np.rint(info.min - lo / s), info.min, info.max))
    return s, np.array(zp, dtype)


def float_in(g, shape, dtype=np.int8):
    """x float -> QuantizeLinear -> DequantizeLinear; returns (input, dq name, x scale)."""
    x = (g.rng.standard_normal(shape) * 1.2).astype(F32)
    xs, xz = calibrate(x.min(), x.max(), dtype)
    xq = g.q('x', xs, xz)
    return x, g.dq(xq, xs, xz), xs


def weights(g, shape, per_channel, dtype=np.int8, axis=0):
    """Integer weights and their scale (one, or one per output channel along axis)."""
    if dtype == np.int8:
        w = g.rng.integers(-127, 128, size=shape).astype(np.int8)
        zp = np.zeros(shape[axis], np.int8) if per_channel else np.array(0, np.int8)
    else:
        w = g.rng.integers(0, 256, size=shape).astype(np.uint8)
        zp = np.array(121, np.uint8)
    if per_channel:
        s = (g.rng.uniform(0.2, 1.0, size=shape[axis]) / 127).astype(F32)
    else:
        s = F32(0.6 / 127)
    return w, s, zp


def bias(g, n, xs, ws, scale_factor=1.0):
    """An int32 bias behind a DequantizeLinear with scale x_scale * w_scale (times scale_factor)."""
    bs = (F32(xs) * np.asarray(ws, F32)).astype(F32)
    bf = g.rng.uniform(-1.0, 1.0, size=n).astype(F32)
    bq = np.rint(bf / (bs * F32(scale_factor))).astype(np.int32)
    scale = (bs * F32(scale_factor)).astype(F32)
    if scale.size == 1:
        scale = scale.reshape(())
    zp = np.zeros(n, np.int32) if scale.ndim else np.array(0, np.int32)
    name_b = g.init(bq, 'b')
    kw = {'axis': 0} if scale.ndim else {}
    return g.node('DequantizeLinear', [name_b, g.init(scale, 'bs'), g.init(zp, 'bzp')], **kw)


def dq_weights(g, w, s, zp, axis=0):
    kw = {'axis': axis} if np.asarray(s).size > 1 else {}
    return g.node('DequantizeLinear', [g.init(w, 'w'), g.init(s, 'ws'), g.init(zp, 'wzp')], **kw)


def finish(g, x, y_float, x_shape, out_dtype=np.int8, out_range=None):
    """Calibrate the output quantization on the float result, quantize it, build the model."""
    m0 = g.model(x_shape, y_float, TensorProto.FLOAT, None, check=False)
    v = run_reference(m0, {'x': x})[0]
    lo, hi = out_range if out_range else (v.min(), v.max())
    ys, yz = calibrate(lo, hi, out_dtype)
    y = g.q(y_float, ys, yz)
    onnx_dt = TensorProto.INT8 if out_dtype == np.int8 else TensorProto.UINT8
    return g.model(x_shape, y, onnx_dt, list(v.shape))


def conv_case(name, seed, x_shape, w_shape, strides=(1, 1), pads=(1, 1, 1, 1), group=1, per_channel=False,
              act=None, dtype=np.int8, bias_factor=1.0, out_range=None):
    g = Graph(name, seed)
    x, xd, xs = float_in(g, x_shape, dtype)
    w, ws, wz = weights(g, w_shape, per_channel, dtype)
    wd = dq_weights(g, w, ws, wz)
    b = bias(g, w_shape[0], xs, ws, bias_factor)
    y = g.node('Conv', [xd, wd, b], kernel_shape=list(w_shape[2:]), strides=list(strides), pads=list(pads),
               group=group)
    if act and not out_range:
        # the output quantization covers the range before the activation (its zero point inside
        # it), so the activation is a real clamp of the integers
        v = run_reference(g.model(x_shape, y, TensorProto.FLOAT, None, check=False), {'x': x})[0]
        out_range = (v.min(), v.max())
    if act == 'relu':
        y = g.node('Relu', [y])
    elif act:
        y = g.node('Clip', [y, g.init(F32(act[0]), 'lo'), g.init(F32(act[1]), 'hi')])
    return finish(g, x, y, x_shape, dtype, out_range), x


def gemm_case(name, seed):
    g = Graph(name, seed)
    x, xd, xs = float_in(g, (2, 16))
    w, ws, wz = weights(g, (10, 16), False)
    y = g.node('Gemm', [xd, dq_weights(g, w, ws, wz), bias(g, 10, xs, ws)], transB=1)
    return finish(g, x, y, (2, 16)), x


def matmul_case(name, seed):
    # per-channel weights [K, N] along axis 1, then Add of a float bias
    g = Graph(name, seed)
    x, xd, xs = float_in(g, (3, 12))
    w, ws, wz = weights(g, (12, 5), True, axis=1)
    y = g.node('MatMul', [xd, dq_weights(g, w, ws, wz, axis=1)])
    y = g.node('Add', [y, g.init(g.rng.uniform(-0.5, 0.5, size=5).astype(F32), 'fb')])
    return finish(g, x, y, (3, 12)), x


def cnn_case(name, seed):
    # conv + relu -> Q -> DQ -> maxpool -> Q (same) -> DQ -> flatten -> Q (same) -> DQ -> gemm -> Q
    g = Graph(name, seed)
    x_shape = (1, 3, 8, 8)
    x, xd, xs = float_in(g, x_shape)
    w, ws, wz = weights(g, (8, 3, 3, 3), True)
    y = g.node('Conv', [xd, dq_weights(g, w, ws, wz), bias(g, 8, xs, ws)], kernel_shape=[3, 3], pads=[1] * 4)
    y = g.node('Relu', [y])
    m0 = g.model(x_shape, y, TensorProto.FLOAT, None, check=False)
    v = run_reference(m0, {'x': x})[0]
    cs, cz = calibrate(v.min(), v.max(), np.int8)
    c = g.dq(g.q(y, cs, cz), cs, cz)
    p = g.node('MaxPool', [c], kernel_shape=[2, 2], strides=[2, 2])
    p = g.dq(g.q(p, cs, cz), cs, cz)
    f = g.node('Flatten', [p], axis=1)
    f = g.dq(g.q(f, cs, cz), cs, cz)
    w2, ws2, wz2 = weights(g, (10, 128), False)
    y = g.node('Gemm', [f, dq_weights(g, w2, ws2, wz2), bias(g, 10, cs, ws2)], transB=1)
    return finish(g, x, y, x_shape), x


def act_after_q_case(name, seed, act):
    # conv -> Q -> DQ -> Relu / Clip -> Q with the same scale and zero point (a QLinearConv's
    # activation as exporters write it): the activation becomes a clip of the integers
    g = Graph(name, seed)
    x_shape = (1, 3, 8, 8)
    x, xd, xs = float_in(g, x_shape)
    w, ws, wz = weights(g, (8, 3, 3, 3), True)
    y = g.node('Conv', [xd, dq_weights(g, w, ws, wz), bias(g, 8, xs, ws)], kernel_shape=[3, 3], pads=[1] * 4)
    v = run_reference(g.model(x_shape, y, TensorProto.FLOAT, None, check=False), {'x': x})[0]
    cs, cz = calibrate(v.min(), v.max(), np.int8)
    c = g.dq(g.q(y, cs, cz), cs, cz)
    if act == 'relu':
        r = g.node('Relu', [c])
    else:
        r = g.node('Clip', [c, g.init(F32(act[0]), 'lo'), g.init(F32(act[1]), 'hi')])
    return finish(g, x, r, x_shape, np.int8, (v.min(), v.max())), x


CASES = {
    # 3x3 pad 1, per-tensor int8 weights, int32 bias
    'conv_i8': lambda: conv_case('conv_i8', 1, (1, 3, 8, 8), (8, 3, 3, 3)),
    # per-channel weights, stride 2, relu; output quantized over the pre-relu range (zero point
    # inside it), so the relu is an integer clip
    'conv_pc_relu': lambda: conv_case('conv_pc_relu', 2, (1, 4, 7, 7), (6, 4, 3, 3), strides=(2, 2),
                                      per_channel=True, act='relu'),
    # depthwise (group = channels), per-channel, Clip(0, 1.5) inside the output range on both sides
    'dwconv_clip': lambda: conv_case('dwconv_clip', 3, (1, 6, 8, 8), (6, 1, 3, 3), group=6, per_channel=True,
                                     act=(0.0, 1.5)),
    # uint8 activations and weights (weight zero point 121)
    'conv_u8': lambda: conv_case('conv_u8', 4, (1, 3, 6, 6), (4, 3, 3, 3), dtype=np.uint8),
    # Gemm transB=1, per-tensor, int32 bias
    'gemm_i8': lambda: gemm_case('gemm_i8', 5),
    # MatMul with per-channel weights, then Add of a float bias
    'matmul_pc_bias': lambda: matmul_case('matmul_pc_bias', 6),
    # the bias is dequantized with twice x_scale * w_scale: must stay float
    'conv_bad_bias': lambda: conv_case('conv_bad_bias', 7, (1, 3, 8, 8), (8, 3, 3, 3), bias_factor=2.0),
    # conv + relu, maxpool and flatten between equal quantizations, gemm
    'cnn': lambda: cnn_case('cnn', 8),
    # DQ -> Relu -> Q and DQ -> Clip(-0.5, 1.0) -> Q after a quantized conv, one quantization
    'relu_after_q': lambda: act_after_q_case('relu_after_q', 9, 'relu'),
    'clip_after_q': lambda: act_after_q_case('clip_after_q', 10, (-0.5, 1.0)),
}


def write_case(out, name):
    model, x = CASES[name]()
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, 'test_data_set_0'), exist_ok=True)
    onnx.save(model, os.path.join(d, 'model.onnx'))
    np.save(os.path.join(d, 'input_0.npy'), x)
    y = run_reference(model, {'x': x})[0]
    with open(os.path.join(d, 'test_data_set_0', 'input_0.pb'), 'wb') as f:
        f.write(numpy_helper.from_array(x, 'x').SerializeToString())
    with open(os.path.join(d, 'test_data_set_0', 'output_0.pb'), 'wb') as f:
        f.write(numpy_helper.from_array(y, 'y').SerializeToString())


def main():
    if len(sys.argv) > 1 and sys.argv[1] == '--list':
        print('\n'.join(CASES))
        return
    if len(sys.argv) < 2:
        raise SystemExit('usage: qdq_models.py OUTDIR [CASE ...] | --list')
    names = sys.argv[2:] or list(CASES)
    for n in names:
        if n not in CASES:
            raise SystemExit('qdq_models.py: no case %r (have: %s)' % (n, ', '.join(CASES)))
        write_case(sys.argv[1], n)


if __name__ == '__main__':
    main()
