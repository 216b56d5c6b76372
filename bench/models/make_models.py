#!/usr/bin/python3
"""Build the ONNX models the benchmarks compile (random weights, fixed seed; opset 13).

    /usr/bin/python3 bench/models/make_models.py OUT_DIR

CNNs at 224x224, batch 1, float32, from their published definitions:
  resnet18.onnx      He et al. 2015, "Deep Residual Learning", table 1 (18-layer: basic blocks
                     [2, 2, 2, 2]; a 1x1 convolution with batch norm projects the shortcut when
                     the shape changes)
  resnet50.onnx      the same paper's 50-layer net: bottleneck blocks [3, 4, 6, 3], expansion 4,
                     the stride on the first 1x1 convolution of a stage as in the paper
  mobilenet_v2.onnx  Sandler et al. 2018, "MobileNetV2", table 2 (inverted residuals with linear
                     bottlenecks, ReLU6, width multiplier 1.0)
  squeezenet1_1.onnx Iandola et al. 2016, "SqueezeNet", v1.1 as published with the reference
                     model (3x3/64 first convolution, pooling after fire 3 and 5)
  shufflenet_v2.onnx Ma et al. 2018, "ShuffleNet V2", table 5, 1.0x (stages of 4, 8, 4 units with
                     116, 232, 464 channels; channel split (Split), depthwise 3x3 convolutions, and
                     the channel shuffle as Reshape → Transpose → Reshape)
Every convolution is followed by batch normalization where the paper has one (the compiler folds
it). Dropout is left out (inference).

OUT_DIR also gets manifest.tsv: one line per model, "name<TAB>ONNX nodes<TAB>parameters".

Generated models for the compile-time benchmark, gen_<N>.onnx with exactly N operators
(N = 10, 100, 1000, 10000): a DAG over [1, 32] float32 tensors repeating MatMul (32x32 weights)
→ Relu → Add of the value three operators back (the MatMul's input: a residual connection), so
each MatMul with its Relu and Add is one primitive function after fusion.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13


class Net:
    """A graph under construction: nodes, initializers, unique names, a seeded generator."""

    def __init__(self, name, seed):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []
        self.count = 0

    def fresh(self, base):
        self.count += 1
        return "%s_%d" % (base, self.count)

    def const(self, base, array):
        name = self.fresh(base)
        self.inits.append(numpy_helper.from_array(array.astype(np.float32), name))
        return name

    def node(self, op, inputs, base, **attrs):
        out = self.fresh(base)
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def conv(self, x, cin, cout, k, stride=1, pad=0, group=1, bias=False):
        fan_in = cin // group * k * k
        w = self.rng.normal(0, np.sqrt(2.0 / fan_in), (cout, cin // group, k, k))
        ins = [x, self.const("w", w)]
        if bias:
            ins.append(self.const("b", self.rng.normal(0, 0.01, cout)))
        return self.node("Conv", ins, "conv", kernel_shape=[k, k], strides=[stride, stride],
                         pads=[pad] * 4, group=group)

    def bn(self, x, c):
        scale = self.const("gamma", self.rng.uniform(0.5, 1.5, c))
        shift = self.const("beta", self.rng.normal(0, 0.1, c))
        mean = self.const("mean", self.rng.normal(0, 0.1, c))
        var = self.const("var", self.rng.uniform(0.5, 1.5, c))
        return self.node("BatchNormalization", [x, scale, shift, mean, var], "bn", epsilon=1e-5)

    def int64(self, base, values):
        """A constant int64 tensor (shapes, split sizes)."""
        name = self.fresh(base)
        self.inits.append(numpy_helper.from_array(np.array(values, dtype=np.int64), name))
        return name

    def node_n(self, op, inputs, base, count, **attrs):
        """A node with `count` outputs; returns their names."""
        outs = [self.fresh(base) for _ in range(count)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=outs[0], **attrs))
        return outs

    def relu(self, x):
        return self.node("Relu", [x], "relu")

    def relu6(self, x):
        lo = self.const("zero", np.array(0.0))
        hi = self.const("six", np.array(6.0))
        return self.node("Clip", [x, lo, hi], "relu6")

    def conv_bn(self, x, cin, cout, k, stride=1, pad=0, group=1, act="relu"):
        y = self.bn(self.conv(x, cin, cout, k, stride, pad, group), cout)
        if act == "relu":
            y = self.relu(y)
        elif act == "relu6":
            y = self.relu6(y)
        return y

    def classifier(self, x, c, classes=1000):
        g = self.node("GlobalAveragePool", [x], "gap")
        f = self.node("Flatten", [g], "flatten", axis=1)
        w = self.const("fc_w", self.rng.normal(0, np.sqrt(1.0 / c), (classes, c)))
        b = self.const("fc_b", np.zeros(classes))
        return self.node("Gemm", [f, w, b], "fc", transB=1)

    def model(self, inp, shape, out, out_shape):
        graph = helper.make_graph(
            self.nodes, self.name,
            [helper.make_tensor_value_info(inp, TensorProto.FLOAT, shape)],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, out_shape)],
            self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="tth bench/models/make_models.py")
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m


def stem(n):
    x = n.conv_bn("input", 3, 64, 7, stride=2, pad=3)
    return n.node("MaxPool", [x], "pool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])


def resnet18():
    n = Net("resnet18", 18)
    x, c = stem(n), 64
    for stage, width in enumerate([64, 128, 256, 512]):
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            y = n.conv_bn(x, c, width, 3, stride, 1)
            y = n.conv_bn(y, width, width, 3, 1, 1, act=None)
            short = x if stride == 1 and c == width else n.conv_bn(x, c, width, 1, stride, 0, act=None)
            x = n.relu(n.node("Add", [y, short], "add"))
            c = width
    return n.model("input", [1, 3, 224, 224], n.classifier(x, c), [1, 1000])


def resnet50():
    n = Net("resnet50", 50)
    x, c = stem(n), 64
    for stage, (width, blocks) in enumerate(zip([64, 128, 256, 512], [3, 4, 6, 3])):
        for block in range(blocks):
            stride = 2 if stage > 0 and block == 0 else 1
            y = n.conv_bn(x, c, width, 1, stride, 0)
            y = n.conv_bn(y, width, width, 3, 1, 1)
            y = n.conv_bn(y, width, width * 4, 1, 1, 0, act=None)
            short = x if stride == 1 and c == width * 4 else n.conv_bn(x, c, width * 4, 1, stride, 0, act=None)
            x = n.relu(n.node("Add", [y, short], "add"))
            c = width * 4
    return n.model("input", [1, 3, 224, 224], n.classifier(x, c), [1, 1000])


def mobilenet_v2():
    n = Net("mobilenet_v2", 2)
    x = n.conv_bn("input", 3, 32, 3, 2, 1, act="relu6")
    c = 32
    # (expansion t, output channels c, repeats n, first stride s): Sandler et al., table 2
    for t, cout, reps, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                             (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]:
        for r in range(reps):
            stride = s if r == 0 else 1
            hidden = c * t
            y = x if t == 1 else n.conv_bn(x, c, hidden, 1, act="relu6")
            y = n.conv_bn(y, hidden, hidden, 3, stride, 1, group=hidden, act="relu6")
            y = n.conv_bn(y, hidden, cout, 1, act=None)
            x = n.node("Add", [x, y], "add") if stride == 1 and c == cout else y
            c = cout
    x = n.conv_bn(x, c, 1280, 1, act="relu6")
    return n.model("input", [1, 3, 224, 224], n.classifier(x, 1280), [1, 1000])


def squeezenet1_1():
    n = Net("squeezenet1_1", 11)

    def fire(x, cin, squeeze, expand):
        s = n.relu(n.conv(x, cin, squeeze, 1, bias=True))
        e1 = n.relu(n.conv(s, squeeze, expand, 1, bias=True))
        e3 = n.relu(n.conv(s, squeeze, expand, 3, pad=1, bias=True))
        return n.node("Concat", [e1, e3], "concat", axis=1)

    def pool(x):
        return n.node("MaxPool", [x], "pool", kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)

    x = pool(n.relu(n.conv("input", 3, 64, 3, stride=2, bias=True)))
    x = fire(x, 64, 16, 64)
    x = pool(fire(x, 128, 16, 64))
    x = fire(x, 128, 32, 128)
    x = pool(fire(x, 256, 32, 128))
    x = fire(x, 256, 48, 192)
    x = fire(x, 384, 48, 192)
    x = fire(x, 384, 64, 256)
    x = fire(x, 512, 64, 256)
    x = n.relu(n.conv(x, 512, 1000, 1, bias=True))
    g = n.node("GlobalAveragePool", [x], "gap")
    out = n.node("Flatten", [g], "flatten", axis=1)
    return n.model("input", [1, 3, 224, 224], out, [1, 1000])


def shufflenet_v2():
    n = Net("shufflenet_v2", 20)

    def shuffle(x, c, size):
        # [1, c, h, w] → [1, 2, c/2, h, w] → swap the two group axes → [1, c, h, w]
        y = n.node("Reshape", [x, n.int64("shape5", [1, 2, c // 2, size, size])], "reshape")
        y = n.node("Transpose", [y], "transpose", perm=[0, 2, 1, 3, 4])
        return n.node("Reshape", [y, n.int64("shape4", [1, c, size, size])], "reshape")

    def unit(x, cin, cout, stride, size):
        half = cout // 2
        if stride == 1:
            # channel split: one half passes through, the other goes through the branch
            left, right = n.node_n("Split", [x, n.int64("split", [half, half])], "split", 2,
                                   axis=1)
            rin = half
        else:
            # downsampling unit: both branches see the whole input, each yields half
            left = n.conv_bn(x, cin, cin, 3, 2, 1, group=cin, act=None)
            left = n.conv_bn(left, cin, half, 1)
            right, rin = x, cin
        y = n.conv_bn(right, rin, half, 1)
        y = n.conv_bn(y, half, half, 3, stride, 1, group=half, act=None)
        y = n.conv_bn(y, half, half, 1)
        out = n.node("Concat", [left, y], "concat", axis=1)
        return shuffle(out, cout, size // stride)

    x = n.conv_bn("input", 3, 24, 3, 2, 1)
    x = n.node("MaxPool", [x], "pool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c, size = 24, 56
    # (output channels, units) of stages 2, 3, 4 at width 1.0x; the first unit halves the size
    for cout, units in [(116, 4), (232, 8), (464, 4)]:
        for u in range(units):
            stride = 2 if u == 0 else 1
            x = unit(x, c, cout, stride, size)
            size //= stride
            c = cout
    x = n.conv_bn(x, c, 1024, 1)
    return n.model("input", [1, 3, 224, 224], n.classifier(x, 1024), [1, 1000])


def generated(count):
    """Exactly `count` operators: MatMul, Relu, Add(skip from three back), repeated."""
    n = Net("gen_%d" % count, count)
    width = 32
    history = ["input"]
    x = "input"
    for i in range(count):
        kind = i % 3
        if kind == 0:
            w = n.const("w", n.rng.normal(0, np.sqrt(1.0 / width), (width, width)))
            x = n.node("MatMul", [x, w], "mm")
        elif kind == 1:
            x = n.node("Relu", [x], "relu")
        else:
            x = n.node("Add", [x, history[max(0, len(history) - 3)]], "add")
        history.append(x)
    return n.model("input", [1, width], x, [1, width])


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_models.py OUT_DIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    models = {"resnet18": resnet18, "resnet50": resnet50, "mobilenet_v2": mobilenet_v2,
              "squeezenet1_1": squeezenet1_1, "shufflenet_v2": shufflenet_v2}
    for count in (10, 100, 1000, 10000):
        models["gen_%d" % count] = lambda count=count: generated(count)
    manifest = []
    for name, build in models.items():
        m = build()
        path = os.path.join(out, name + ".onnx")
        onnx.save(m, path)
        # parameters: the float initializers (not shapes and split sizes)
        nodes = len(m.graph.node)
        params = sum(int(np.prod(t.dims)) for t in m.graph.initializer
                     if t.data_type == TensorProto.FLOAT)
        manifest.append("%s\t%d\t%d\n" % (name, nodes, params))
        print("%-14s %6d nodes %10d parameters  %s" % (name, nodes, params, path))
    # name, ONNX nodes, parameters: what the benchmarks read to find the models
    with open(os.path.join(out, "manifest.tsv"), "w") as f:
        f.writelines(manifest)


if __name__ == "__main__":
    main()
