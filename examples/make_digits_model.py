#!/usr/bin/python3
"""Train the example model and write it as ONNX.

The model is a small convolutional network that reads 8x8 grey images of handwritten digits
(scikit-learn's bundled copy of the UCI "Optical Recognition of Handwritten Digits" test set,
1797 images) and gives the probability of each digit 0-9:

    input [1, 1, 8, 8] -> Conv 3x3 (8 filters, pad 1) + bias -> Relu -> MaxPool 2x2
      -> Conv 3x3 (16 filters, pad 1) + bias -> Relu -> MaxPool 2x2 -> Flatten [1, 64]
      -> Gemm (64 -> 10) -> Softmax

It is trained here with plain numpy (SGD with momentum, fixed seed), so the file is
reproducible on any machine with Debian's python3-numpy, python3-sklearn and python3-onnx:

    apt-get install python3-numpy python3-sklearn python3-onnx
    /usr/bin/python3 examples/make_digits_model.py

Writes examples/digits.onnx, examples/digit_input.npy (one held-out image) and
examples/digit_expected.npy (numpy's forward pass on it: the reference the demo checks tth's
output against).
"""
import os
import sys

import numpy as np
from sklearn.datasets import load_digits
import onnx
from onnx import helper, numpy_helper, TensorProto

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(20261122)


def im2col(x, k=3, pad=1):
    """x: [N, C, H, W] -> [N, H*W, C*k*k] patches (stride 1, 'same' padding)."""
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    cols = np.empty((n, h, w, c, k, k), dtype=x.dtype)
    for i in range(k):
        for j in range(k):
            cols[:, :, :, :, i, j] = xp[:, :, i:i + h, j:j + w].transpose(0, 2, 3, 1)
    return cols.reshape(n, h * w, c * k * k)


def col2im(dcols, shape, k=3, pad=1):
    n, c, h, w = shape
    dcols = dcols.reshape(n, h, w, c, k, k)
    dxp = np.zeros((n, c, h + 2 * pad, w + 2 * pad), dtype=dcols.dtype)
    for i in range(k):
        for j in range(k):
            dxp[:, :, i:i + h, j:j + w] += dcols[:, :, :, :, i, j].transpose(0, 3, 1, 2)
    return dxp[:, :, pad:pad + h, pad:pad + w]


def conv_forward(x, wgt, b):
    n, c, h, w = x.shape
    cols = im2col(x)
    out = cols @ wgt.reshape(wgt.shape[0], -1).T + b
    return out.reshape(n, h, w, -1).transpose(0, 3, 1, 2), cols


def maxpool_forward(x):
    n, c, h, w = x.shape
    r = x.reshape(n, c, h // 2, 2, w // 2, 2)
    out = r.max(axis=(3, 5))
    mask = (r == out[:, :, :, None, :, None])
    return out, mask


def maxpool_backward(dout, mask):
    n, c, h2, _, w2, _ = mask.shape
    d = mask * dout[:, :, :, None, :, None]
    return d.reshape(n, c, h2 * 2, w2 * 2)


def forward(params, x, keep=False):
    w1, b1, w2, b2, w3, b3 = params
    z1, cols1 = conv_forward(x, w1, b1)
    a1 = np.maximum(z1, 0)
    p1, m1 = maxpool_forward(a1)
    z2, cols2 = conv_forward(p1, w2, b2)
    a2 = np.maximum(z2, 0)
    p2, m2 = maxpool_forward(a2)
    f = p2.reshape(p2.shape[0], -1)
    logits = f @ w3.T + b3
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    prob = e / e.sum(axis=1, keepdims=True)
    if keep:
        return prob, (x, z1, cols1, p1, m1, z2, cols2, p2, m2, f)
    return prob


def train():
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    y = digits.target
    order = rng.permutation(len(x))
    x, y = x[order], y[order]
    split = 1500
    xtr, ytr, xte, yte = x[:split], y[:split], x[split:], y[split:]

    def init(*shape):
        fan_in = np.prod(shape[1:])
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)

    params = [init(8, 1, 3, 3), np.zeros(8, np.float32), init(16, 8, 3, 3), np.zeros(16, np.float32),
              init(10, 64), np.zeros(10, np.float32)]
    vel = [np.zeros_like(p) for p in params]
    lr, mom, batch = 0.05, 0.9, 32
    for epoch in range(30):
        perm = rng.permutation(split)
        for s in range(0, split, batch):
            idx = perm[s:s + batch]
            xb, yb = xtr[idx], ytr[idx]
            prob, (x0, z1, cols1, p1, m1, z2, cols2, p2, m2, f) = forward(params, xb, keep=True)
            n = len(xb)
            dlogits = prob.copy()
            dlogits[np.arange(n), yb] -= 1
            dlogits /= n
            w1, b1, w2, b2, w3, b3 = params
            gw3 = dlogits.T @ f
            gb3 = dlogits.sum(axis=0)
            df = dlogits @ w3
            dp2 = df.reshape(p2.shape)
            da2 = maxpool_backward(dp2, m2)
            dz2 = da2 * (z2 > 0)
            dz2c = dz2.transpose(0, 2, 3, 1).reshape(n, -1, 16)
            gw2 = np.einsum('npo,npk->ok', dz2c, cols2).reshape(w2.shape)
            gb2 = dz2.sum(axis=(0, 2, 3))
            dcols2 = dz2c @ w2.reshape(16, -1)
            dp1 = col2im(dcols2, p1.shape)
            da1 = maxpool_backward(dp1, m1)
            dz1 = da1 * (z1 > 0)
            dz1c = dz1.transpose(0, 2, 3, 1).reshape(n, -1, 8)
            gw1 = np.einsum('npo,npk->ok', dz1c, cols1).reshape(w1.shape)
            gb1 = dz1.sum(axis=(0, 2, 3))
            grads = [gw1, gb1, gw2, gb2, gw3, gb3]
            for i in range(6):
                vel[i] = mom * vel[i] - lr * grads[i].astype(np.float32)
                params[i] = (params[i] + vel[i]).astype(np.float32)
    acc = (forward(params, xte).argmax(axis=1) == yte).mean()
    return params, xte, yte, acc


def to_onnx(params):
    w1, b1, w2, b2, w3, b3 = params
    inits = [numpy_helper.from_array(a, n) for a, n in
             [(w1, "conv1.weight"), (b1, "conv1.bias"), (w2, "conv2.weight"), (b2, "conv2.bias"),
              (w3, "fc.weight"), (b3, "fc.bias")]]
    nodes = [
        helper.make_node("Conv", ["image", "conv1.weight", "conv1.bias"], ["c1"], name="conv1",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "conv2.weight", "conv2.bias"], ["c2"], name="conv2",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("MaxPool", ["r2"], ["p2"], name="pool2", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p2"], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probabilities"], name="softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes, "digits",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 1, 8, 8])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [1, 10])],
        initializer=inits)
    model = helper.make_model(graph, producer_name="tth examples/make_digits_model.py",
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main():
    params, xte, yte, acc = train()
    print(f"held-out accuracy: {acc:.3f} on {len(yte)} images")
    if acc < 0.9:
        sys.exit("training did not converge")
    model = to_onnx(params)
    onnx.save(model, os.path.join(HERE, "digits.onnx"))
    sample = xte[:1].astype(np.float32)
    np.save(os.path.join(HERE, "digit_input.npy"), sample)
    np.save(os.path.join(HERE, "digit_expected.npy"), forward(params, sample).astype(np.float32))
    print(f"sample image is a {yte[0]}; numpy predicts {forward(params, sample).argmax()}")


if __name__ == "__main__":
    main()
