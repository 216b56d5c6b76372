#!/usr/bin/python3
"""Operators the importer composes (docs/operators.md), in configurations beyond what the ONNX
node tests cover, checked through the product's conformance runner: ONNX models of RNN, GRU and
LSTM (bidirectional and reverse directions, initial states, biases, peepholes, clip, GRU's
linear_before_reset, layout 1, sequence lengths shorter than the sequence, non-default
activations), of Einsum (attention-style contractions, outer products, diagonals, broadcast
ellipses, implicit outputs) and of If (a condition computed from the input, so both branches are
compiled, with data sets that take each; branches using the outer graph's values and their own
initializers; a constant condition whose other branch tth could not compile), of Loop (a trip
count and loop-carried state, the outer graph's values indexed by the iteration) and of Scan
(two states, a reversed scan input along axis 1, a scan output along axis 1; opset 8's batch axis
with sequence_lens, both directions, a batch of 3 without sequence_lens), of 3-D
ConvTranspose (groups, strides, dilations, pads, output_padding, auto_pad, output_shape), of
MaxPool's Indices (batch 2, padding, storage_order 1, ties), of Det (singular and permuted
matrices, batches), of DFT (the inverse of a complex input, onesided of even and odd lengths,
dft_length shorter and longer than the axis, axes 2 and -2, float64), of STFT (a window with
onesided 0, a complex signal with frame_length, an odd window onesided; batch 2), of
MelWeightMatrix (float64 output), of RoiAlign (avg and max, sampling_ratio 0 and 2, rois partly
outside the image or empty, batch indices picking either image, opsets 10 and 16), of
BatchNormalization with training_mode=1 (ranks 2, 3 and 5, momentum, some of the running
statistics asked for, an input far from zero) and of GridSample (every mode with every padding
mode, align_corners with reflection, halfway points for nearest, points far outside, batch 2
with several channels, float64, one and three spatial axes), of concatenations done in place
(and those that cannot be, as in a DenseNet block, split among the cores by rows), written as
ONNX test cases whose expected outputs come from numpy (an implementation of the ONNX definitions, numpy.einsum and
numpy.fft), independent of tth.

    composed_cases.py --conformance build/tests/conformance/tth-conformance [--keep DIR]

Runs tth-conformance over the cases, and over the PyTorch-exported models of
tests/daemon/frontend/torch_models/ (written by torch_models.py, expected outputs PyTorch's), for
targets c and llvm; exit status 1 when a case fails or is unsupported. 77 (skipped) without
numpy or onnx.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile


def act(name, x, alpha=None, beta=None):
    import numpy as np
    if name == "Sigmoid":
        return 1 / (1 + np.exp(-x))
    if name == "Tanh":
        return np.tanh(x)
    if name == "Relu":
        return np.maximum(x, 0)
    if name == "HardSigmoid":
        return np.clip((0.2 if alpha is None else alpha) * x + (0.5 if beta is None else beta), 0, 1)
    if name == "LeakyRelu":
        return np.where(x >= 0, x, (0.01 if alpha is None else alpha) * x)
    raise ValueError(name)


def reference(kind, X, W, R, B, lens, h0, c0, P, attrs):
    """Y, Y_h[, Y_c] by the ONNX definitions, in float64 (layout 0 shapes in and out)"""
    import numpy as np
    T, Bn, _ = X.shape
    ndir = W.shape[0]
    G = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind]
    H = R.shape[2]
    direction = attrs.get("direction", "forward")
    clip = attrs.get("clip")
    per = {"RNN": 1, "GRU": 2, "LSTM": 3}[kind]
    names = attrs.get("activations") or {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"],
                                         "LSTM": ["Sigmoid", "Tanh", "Tanh"]}[kind] * ndir
    lbr = attrs.get("linear_before_reset", 0)
    Y = np.zeros((T, ndir, Bn, H))
    Yh = np.zeros((ndir, Bn, H))
    Yc = np.zeros((ndir, Bn, H))
    lens = lens if lens is not None else np.full(Bn, T)

    def f(k, x):
        x = np.clip(x, -clip, clip) if clip else x
        return act(names[k], x)

    for d in range(ndir):
        back = direction == "reverse" or d == 1
        k0 = d * per
        Wd, Rd = W[d], R[d]
        Wb = B[d][:G * H] if B is not None else np.zeros(G * H)
        Rb = B[d][G * H:] if B is not None else np.zeros(G * H)
        h = h0[d].copy() if h0 is not None else np.zeros((Bn, H))
        cc = c0[d].copy() if c0 is not None else np.zeros((Bn, H))
        steps = range(T - 1, -1, -1) if back else range(T)
        for t in steps:
            x = X[t]
            live = (t < lens)[:, None]
            if kind == "RNN":
                hn = f(k0, x @ Wd.T + h @ Rd.T + Wb + Rb)
                cn = cc
            elif kind == "GRU":
                Wz, Wr, Wh = np.split(Wd, 3)
                Rz, Rr, Rh = np.split(Rd, 3)
                Wbz, Wbr, Wbh = np.split(Wb, 3)
                Rbz, Rbr, Rbh = np.split(Rb, 3)
                z = f(k0, x @ Wz.T + h @ Rz.T + Wbz + Rbz)
                r = f(k0, x @ Wr.T + h @ Rr.T + Wbr + Rbr)
                if lbr:
                    hh = f(k0 + 1, x @ Wh.T + r * (h @ Rh.T + Rbh) + Wbh)
                else:
                    hh = f(k0 + 1, x @ Wh.T + (r * h) @ Rh.T + Rbh + Wbh)
                hn = (1 - z) * hh + z * h
                cn = cc
            else:
                Wi, Wo, Wf, Wc = np.split(Wd, 4)
                Ri, Ro, Rf, Rc = np.split(Rd, 4)
                bi, bo, bf, bc = np.split(Wb + Rb, 4)
                pi, po, pf = np.split(P[d], 3) if P is not None else (0, 0, 0)
                i = f(k0, x @ Wi.T + h @ Ri.T + pi * cc + bi)
                fg = f(k0, x @ Wf.T + h @ Rf.T + pf * cc + bf)
                g = f(k0 + 1, x @ Wc.T + h @ Rc.T + bc)
                cn = fg * cc + i * g
                o = f(k0, x @ Wo.T + h @ Ro.T + po * cn + bo)
                hn = o * act(names[k0 + 2], cn)
            Y[t, d] = np.where(live, hn, 0)
            h = np.where(live, hn, h)
            cc = np.where(live, cn, cc)
        Yh[d], Yc[d] = h, cc
    return Y, Yh, Yc


CASES = [
    # name, kind, T, B, I, H, attrs, with bias, h0, c0, peepholes, lens
    ("lstm_bidirectional", "LSTM", 4, 2, 3, 5, {"direction": "bidirectional"}, True, True, True, True, None),
    ("lstm_reverse_clip", "LSTM", 5, 3, 2, 4, {"direction": "reverse", "clip": 0.5}, True, False, False, False, None),
    ("lstm_short_sequences", "LSTM", 6, 3, 3, 2, {}, True, True, True, False, [6, 2, 4]),
    ("lstm_layout1", "LSTM", 3, 2, 4, 3, {"layout": 1}, True, True, True, False, None),
    ("gru_linear_before_reset", "GRU", 4, 2, 3, 4, {"linear_before_reset": 1}, True, True, False, False, None),
    ("gru_bidirectional", "GRU", 3, 2, 3, 3, {"direction": "bidirectional"}, True, False, False, False, None),
    ("gru_activations", "GRU", 3, 2, 2, 3, {"activations": ["HardSigmoid", "LeakyRelu"]}, True, False, False,
     False, None),
    ("rnn_reverse_relu", "RNN", 4, 2, 3, 4, {"direction": "reverse", "activations": ["Relu"]}, True, True, False,
     False, None),
    ("rnn_bidirectional", "RNN", 3, 1, 2, 3, {"direction": "bidirectional"}, False, False, False, False, None),
]


def write_case(root, case, rng):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    name, kind, T, Bn, I, H, attrs, with_b, with_h0, with_c0, with_p, lens = case
    G = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind]
    ndir = 2 if attrs.get("direction") == "bidirectional" else 1
    f32 = np.float32
    X = rng.normal(0, 1, (T, Bn, I)).astype(f32)
    W = rng.normal(0, 0.5, (ndir, G * H, I)).astype(f32)
    R = rng.normal(0, 0.5, (ndir, G * H, H)).astype(f32)
    B = rng.normal(0, 0.3, (ndir, 2 * G * H)).astype(f32) if with_b else None
    h0 = rng.normal(0, 0.5, (ndir, Bn, H)).astype(f32) if with_h0 else None
    c0 = rng.normal(0, 0.5, (ndir, Bn, H)).astype(f32) if with_c0 and kind == "LSTM" else None
    P = rng.normal(0, 0.3, (ndir, 3 * H)).astype(f32) if with_p and kind == "LSTM" else None
    L = np.array(lens, np.int32) if lens is not None else None
    Y, Yh, Yc = reference(kind, X.astype(np.float64), W.astype(np.float64), R.astype(np.float64),
                          None if B is None else B.astype(np.float64), L,
                          None if h0 is None else h0.astype(np.float64),
                          None if c0 is None else c0.astype(np.float64),
                          None if P is None else P.astype(np.float64), attrs)
    layout = attrs.get("layout", 0)
    Xin = X.transpose(1, 0, 2) if layout else X
    h0in = h0.transpose(1, 0, 2) if (layout and h0 is not None) else h0
    c0in = c0.transpose(1, 0, 2) if (layout and c0 is not None) else c0
    if layout:
        Y, Yh, Yc = Y.transpose(2, 0, 1, 3), Yh.transpose(1, 0, 2), Yc.transpose(1, 0, 2)
    inits = [numpy_helper.from_array(W, "W"), numpy_helper.from_array(R, "R")]
    ins = ["X", "W", "R"]
    optional = [("B", B), ("sequence_lens", L), ("initial_h", h0in)]
    if kind == "LSTM":
        optional += [("initial_c", c0in), ("P", P)]
    for nm, v in optional:
        if v is None:
            ins.append("")
        else:
            inits.append(numpy_helper.from_array(v, nm))
            ins.append(nm)
    while ins and ins[-1] == "":
        ins.pop()
    node_attrs = {"hidden_size": H}
    node_attrs.update({k: v for k, v in attrs.items()})
    outs = ["Y", "Y_h"] + (["Y_c"] if kind == "LSTM" else [])
    node = helper.make_node(kind, ins, outs, name="rnn", **node_attrs)
    vi = lambda n, a: helper.make_tensor_value_info(n, TensorProto.FLOAT, list(a.shape))  # noqa: E731
    results = [Y, Yh] + ([Yc] if kind == "LSTM" else [])
    g = helper.make_graph([node], name, [vi("X", Xin)], [vi(n, r) for n, r in zip(outs, results)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    onnx.checker.check_model(m)
    d = os.path.join(root, "test_" + name)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    onnx.save(m, os.path.join(d, "model.onnx"))
    ds = os.path.join(d, "test_data_set_0")
    with open(os.path.join(ds, "input_0.pb"), "wb") as fh:
        fh.write(numpy_helper.from_array(Xin, "X").SerializeToString())
    for i, (n, r) in enumerate(zip(outs, results)):
        with open(os.path.join(ds, "output_%d.pb" % i), "wb") as fh:
            fh.write(numpy_helper.from_array(r.astype(f32), n).SerializeToString())


EINSUM = [
    # name, equation, operand shapes
    ("einsum_attention", "bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("einsum_attention_values", "bhqk,bhkd->bhqd", [(2, 2, 4, 6), (2, 2, 6, 3)]),
    ("einsum_outer", "i,j->ij", [(4,), (3,)]),
    ("einsum_diagonal_sum", "ii", [(5, 5)]),
    ("einsum_broadcast_batch", "...ij,...jk->...ik", [(2, 1, 3, 4), (3, 4, 2)]),
    ("einsum_implicit", "ij,jk", [(3, 4), (4, 2)]),
    ("einsum_permute_reduce", "abc->ca", [(2, 3, 4)]),
]


def write_einsum(root, case, rng):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    name, eq, shapes = case
    xs = [rng.normal(0, 1, s).astype(np.float32) for s in shapes]
    want = np.einsum(eq, *[x.astype(np.float64) for x in xs]).astype(np.float32)
    names = ["x%d" % i for i in range(len(xs))]
    node = helper.make_node("Einsum", names, ["y"], name="einsum", equation=eq)
    g = helper.make_graph([node], name, [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(x.shape))
                                         for n, x in zip(names, xs)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(want.shape))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 12)])
    onnx.checker.check_model(m)
    d = os.path.join(root, "test_" + name)
    ds = os.path.join(d, "test_data_set_0")
    os.makedirs(ds)
    onnx.save(m, os.path.join(d, "model.onnx"))
    for i, (n, x) in enumerate(zip(names, xs)):
        with open(os.path.join(ds, "input_%d.pb" % i), "wb") as fh:
            fh.write(numpy_helper.from_array(x, n).SerializeToString())
    with open(os.path.join(ds, "output_0.pb"), "wb") as fh:
        fh.write(numpy_helper.from_array(want, "y").SerializeToString())


def write_if(root, name, constant_cond, rng):
    """If with two outputs. y = then: relu(x @ W * wt) where W is the outer graph's initializer and
    wt the branch's own; else: sigmoid(x @ W2) with W2 the branch's own. z = then: max over the
    last axis; else: min. The condition is sum(x) > 0, or a constant True whose else branch holds
    an operator tth does not have."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    f32 = np.float32
    W = rng.normal(0, 1, (4, 5)).astype(f32)
    wt = rng.normal(0, 1, (5,)).astype(f32)
    W2 = rng.normal(0, 1, (4, 5)).astype(f32)
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 5]),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])]
    then_g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["t_mm"]), helper.make_node("Mul", ["t_mm", "wt"], ["t_mul"]),
         helper.make_node("Relu", ["t_mul"], ["t_y"]),
         helper.make_node("ReduceMax", ["x"], ["t_z"], axes=[-1], keepdims=0)],
        "then", [], [helper.make_tensor_value_info("t_y", TensorProto.FLOAT, [2, 3, 5]),
                     helper.make_tensor_value_info("t_z", TensorProto.FLOAT, [2, 3])],
        initializer=[numpy_helper.from_array(wt, "wt")])
    else_nodes = [helper.make_node("MatMul", ["x", "W2"], ["e_mm"]), helper.make_node("Sigmoid", ["e_mm"], ["e_y"]),
                  helper.make_node("ReduceMin", ["x"], ["e_z"], axes=[-1], keepdims=0)]
    if constant_cond:  # never taken: an operator tth does not compile
        else_nodes.append(helper.make_node("Unique", ["x"], ["e_u"]))
    else_g = helper.make_graph(else_nodes, "else", [], [helper.make_tensor_value_info("e_y", TensorProto.FLOAT, [2, 3, 5]),
                                                        helper.make_tensor_value_info("e_z", TensorProto.FLOAT, [2, 3])],
                               initializer=[numpy_helper.from_array(W2, "W2")])
    nodes = []
    inits = [numpy_helper.from_array(W, "W")]
    if constant_cond:
        inits.append(numpy_helper.from_array(np.array(True), "cond"))
    else:
        nodes += [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
                  helper.make_node("Greater", ["s", "zero"], ["cond"])]
        inits.append(numpy_helper.from_array(np.array(0, f32), "zero"))
    nodes.append(helper.make_node("If", ["cond"], ["y", "z"], then_branch=then_g, else_branch=else_g))
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])], outs,
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 12)])
    onnx.checker.check_model(m)
    d = os.path.join(root, "test_" + name)
    os.makedirs(d)
    onnx.save(m, os.path.join(d, "model.onnx"))
    shifts = [0.5] if constant_cond else [0.7, -0.7]  # sum(x) > 0, then < 0: each branch taken
    for k, shift in enumerate(shifts):
        x = (rng.normal(0, 0.3, (2, 3, 4)) + shift).astype(f32)
        x64 = x.astype(np.float64)
        if constant_cond or x64.sum() > 0:
            y, z = np.maximum(x64 @ W.astype(np.float64) * wt, 0), x64.max(axis=-1)
        else:
            y, z = 1 / (1 + np.exp(-(x64 @ W2.astype(np.float64)))), x64.min(axis=-1)
        ds = os.path.join(d, "test_data_set_%d" % k)
        os.makedirs(ds)
        with open(os.path.join(ds, "input_0.pb"), "wb") as fh:
            fh.write(numpy_helper.from_array(x, "x").SerializeToString())
        for i, (n, v) in enumerate((("y", y), ("z", z))):
            with open(os.path.join(ds, "output_%d.pb" % i), "wb") as fh:
                fh.write(numpy_helper.from_array(v.astype(f32), n).SerializeToString())


def save_case(root, name, m, sets):
    """A test case directory: the model and, per data set, (inputs, outputs) as (name, array) lists."""
    import onnx
    from onnx import numpy_helper
    onnx.checker.check_model(m)
    d = os.path.join(root, "test_" + name)
    os.makedirs(d)
    onnx.save(m, os.path.join(d, "model.onnx"))
    for k, (ins, outs) in enumerate(sets):
        ds = os.path.join(d, "test_data_set_%d" % k)
        os.makedirs(ds)
        for kind, arrs in (("input", ins), ("output", outs)):
            for i, (n, v) in enumerate(arrs):
                with open(os.path.join(ds, "%s_%d.pb" % (kind, i)), "wb") as fh:
                    fh.write(numpy_helper.from_array(v, n).SerializeToString())


def write_loop_scan(root, rng):
    """Loop: h <- tanh(h @ Wl + X[i]) four times (M an initializer, cond true), every h stacked.
    Scan: over X2's axis 1 backwards, s <- 0.5 s + x_k and t <- max(t, x_k), y_k = 2 s along axis 1."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    f32 = np.float32
    Wl = rng.normal(0, 0.5, (3, 3)).astype(f32)
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Gather", ["X", "i"], ["x_i"], axis=0),
         helper.make_node("MatMul", ["h_in", "Wl"], ["hw"]), helper.make_node("Add", ["hw", "x_i"], ["pre"]),
         helper.make_node("Tanh", ["pre"], ["h_out"]), helper.make_node("Identity", ["h_out"], ["h_scan"])],
        "loop_body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                      helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
                      helper.make_tensor_value_info("h_in", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h_out", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("h_scan", TensorProto.FLOAT, [3])])
    g = helper.make_graph(
        [helper.make_node("Loop", ["M", "cond", "h0"], ["h_last", "h_all"], body=body)], "loop",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [4, 3]), helper.make_tensor_value_info("h0", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("h_last", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("h_all", TensorProto.FLOAT, [4, 3])],
        initializer=[numpy_helper.from_array(np.array(4, np.int64), "M"), numpy_helper.from_array(np.array(True), "cond"),
                     numpy_helper.from_array(Wl, "Wl")])
    X = rng.normal(0, 1, (4, 3)).astype(f32)
    h0 = rng.normal(0, 1, (3,)).astype(f32)
    h, hs = h0.astype(np.float64), []
    for i in range(4):
        h = np.tanh(h @ Wl.astype(np.float64) + X[i])
        hs.append(h)
    save_case(root, "loop_unrolled", helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]),
              [([("X", X), ("h0", h0)], [("h_last", h.astype(f32)), ("h_all", np.array(hs, f32))])])

    body = helper.make_graph(
        [helper.make_node("Mul", ["s_in", "half"], ["s_half"]), helper.make_node("Add", ["s_half", "x_k"], ["s_out"]),
         helper.make_node("Max", ["t_in", "x_k"], ["t_out"]), helper.make_node("Add", ["s_out", "s_out"], ["y_k"])],
        "scan_body", [helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [2, 3]),
                      helper.make_tensor_value_info("t_in", TensorProto.FLOAT, [2, 3]),
                      helper.make_tensor_value_info("x_k", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("s_out", "t_out", "y_k")],
        initializer=[numpy_helper.from_array(np.array(0.5, f32), "half")])
    g = helper.make_graph(
        [helper.make_node("Scan", ["s0", "t0", "X2"], ["s", "t", "y"], body=body, num_scan_inputs=1,
                          scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[1])], "scan",
        [helper.make_tensor_value_info("s0", TensorProto.FLOAT, [2, 3]), helper.make_tensor_value_info("t0", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("X2", TensorProto.FLOAT, [2, 5, 3])],
        [helper.make_tensor_value_info("s", TensorProto.FLOAT, [2, 3]), helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5, 3])])
    s0, t0 = rng.normal(0, 1, (2, 3)).astype(f32), rng.normal(0, 1, (2, 3)).astype(f32)
    X2 = rng.normal(0, 1, (2, 5, 3)).astype(f32)
    sv, tv, ys = s0.astype(np.float64), t0.astype(np.float64), []
    for k in range(5):
        xk = X2[:, 4 - k, :].astype(np.float64)
        sv = sv * 0.5 + xk
        tv = np.maximum(tv, xk)
        ys.append(2 * sv)
    save_case(root, "scan_reverse_axis1", helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)]),
              [([("s0", s0), ("t0", t0), ("X2", X2)],
                [("s", sv.astype(f32)), ("t", tv.astype(f32)), ("y", np.stack(ys, axis=1).astype(f32))])])


def write_scan8(root, rng):
    """Scan of opset 8 (batch axis 0 on every state and scan input, sequence axis 1): a batch of 2
    with sequence_lens all 4, X scanned twice (directions 0 and 1), s <- 0.5 s + x_fwd, a state
    t [2, 3] per element t <- max(t, x_rev) whose ReduceSum over its own axis 0 feeds a scan output
    (the batch axis must not be in the body's view); and without sequence_lens a batch of 3, h <-
    tanh(h @ W + x_k) with h and x_k [2, 2] per element."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    f32, F = np.float32, TensorProto.FLOAT
    vi = helper.make_tensor_value_info
    body = helper.make_graph(
        [helper.make_node("Mul", ["s_in", "half"], ["s_half"]), helper.make_node("Add", ["s_half", "xf"], ["s_out"]),
         helper.make_node("Max", ["t_in", "xr"], ["t_out"]),
         helper.make_node("ReduceSum", ["t_out"], ["r"], axes=[0], keepdims=0),
         helper.make_node("Add", ["s_out", "s_out"], ["y1"]), helper.make_node("Add", ["r", "xr"], ["y2"])],
        "scan8_body", [vi("s_in", F, [3]), vi("t_in", F, [2, 3]), vi("xf", F, [3]), vi("xr", F, [3])],
        [vi("s_out", F, [3]), vi("t_out", F, [2, 3]), vi("y1", F, [3]), vi("y2", F, [3])],
        initializer=[numpy_helper.from_array(np.array(0.5, f32), "half")])
    g = helper.make_graph(
        [helper.make_node("Scan", ["lens", "s0", "t0", "X", "X"], ["s", "t", "y1", "y2"], body=body, num_scan_inputs=2,
                          directions=[0, 1])], "scan8",
        [vi("s0", F, [2, 3]), vi("t0", F, [2, 2, 3]), vi("X", F, [2, 4, 3])],
        [vi("s", F, [2, 3]), vi("t", F, [2, 2, 3]), vi("y1", F, [2, 4, 3]), vi("y2", F, [2, 4, 3])],
        initializer=[numpy_helper.from_array(np.array([4, 4], np.int64), "lens")])
    s0, t0, X = (rng.normal(0, 1, sh).astype(f32) for sh in ((2, 3), (2, 2, 3), (2, 4, 3)))
    outs = {k: [] for k in ("s", "t", "y1", "y2")}
    for b in range(2):
        sv, tv, y1, y2 = s0[b].astype(np.float64), t0[b].astype(np.float64), [], []
        for k in range(4):
            sv = 0.5 * sv + X[b, k]
            tv = np.maximum(tv, X[b, 3 - k])
            y1.append(2 * sv)
            y2.append(tv.sum(axis=0) + X[b, 3 - k])
        for key, v in (("s", sv), ("t", tv), ("y1", np.array(y1)), ("y2", np.array(y2))):
            outs[key].append(v)
    save_case(root, "scan8_batch2_bidirectional", helper.make_model(g, opset_imports=[helper.make_opsetid("", 8)]),
              [([("s0", s0), ("t0", t0), ("X", X)], [(k, np.array(outs[k], f32)) for k in ("s", "t", "y1", "y2")])])

    W = rng.normal(0, 0.7, (2, 2)).astype(f32)
    body = helper.make_graph(
        [helper.make_node("MatMul", ["h_in", "W"], ["hw"]), helper.make_node("Add", ["hw", "x_k"], ["pre"]),
         helper.make_node("Tanh", ["pre"], ["h_out"]), helper.make_node("Identity", ["h_out"], ["h_k"])],
        "scan8_rnn", [vi("h_in", F, [2, 2]), vi("x_k", F, [2, 2])], [vi("h_out", F, [2, 2]), vi("h_k", F, [2, 2])],
        initializer=[numpy_helper.from_array(W, "W")])
    g = helper.make_graph([helper.make_node("Scan", ["", "h0", "X"], ["h", "hs"], body=body, num_scan_inputs=1)],
                          "scan8_rnn", [vi("h0", F, [3, 2, 2]), vi("X", F, [3, 2, 2, 2])],
                          [vi("h", F, [3, 2, 2]), vi("hs", F, [3, 2, 2, 2])])
    h0, X = rng.normal(0, 1, (3, 2, 2)).astype(f32), rng.normal(0, 1, (3, 2, 2, 2)).astype(f32)
    hs = np.zeros((3, 2, 2, 2))
    for b in range(3):
        h = h0[b].astype(np.float64)
        for k in range(2):
            h = hs[b, k] = np.tanh(h @ W + X[b, k])
    save_case(root, "scan8_no_lens_batch3", helper.make_model(g, opset_imports=[helper.make_opsetid("", 8)]),
              [([("h0", h0), ("X", X)], [("h", hs[:, -1].astype(f32)), ("hs", hs.astype(f32))])])


def tfidf_reference(X, pool, counts, indexes, min_n, max_n, max_skip, mode, weights):
    """TfIdfVectorizer by its definition, brute force: each pool n-gram of a counted length is
    looked for at every start and every gap d (1 for unigrams, 1 .. max_skip + 1 otherwise)"""
    import numpy as np
    rows = X.reshape(-1, X.shape[-1])
    out = np.zeros((rows.shape[0], max(indexes) + 1))
    k = 0
    for n in range(1, len(counts) + 1):
        end = counts[n] if n < len(counts) else len(pool)
        for j in range(counts[n - 1], end, n):
            gram, col = pool[j:j + n], indexes[k]
            k += 1
            if not min_n <= n <= max_n:
                continue
            for b, row in enumerate(rows):
                for d in ([1] if n == 1 else range(1, max_skip + 2)):
                    for s in range(len(row) - (n - 1) * d):
                        out[b, col] += all(row[s + i * d] == gram[i] for i in range(n))
    w = np.array(weights if weights else [1.0] * out.shape[1])[:out.shape[1]]
    if mode == "IDF":
        out = (out > 0) * w
    elif mode == "TFIDF":
        out = out * w
    return out.reshape(X.shape[:-1] + (out.shape[1],)).astype(np.float32)


def write_training(root, rng):
    """ai.onnx.preview.training and TfIdfVectorizer beyond ONNX's node tests: Gradient through Sub,
    Div, Neg and Mul with broadcast operands and an x y does not depend on; Adam with its default
    attributes and Momentum (nesterov) on the first step (T = 0), two tensors each; Adagrad with a
    learning-rate decay; TfIdfVectorizer in IDF and TFIDF modes with weights, int32 rows, gaps and
    a permuted ngram_indexes."""
    import numpy as np
    from onnx import TensorProto, helper
    f32, F = np.float32, TensorProto.FLOAT
    tr = "ai.onnx.preview.training"
    vi = helper.make_tensor_value_info

    a, b, c = (rng.normal(0, 1, s).astype(f32) for s in ((2, 3), (3,), (1, 3)))
    c = c + np.sign(c) * 0.5
    z = rng.normal(0, 1, (4,)).astype(f32)
    a6, b6, c6 = (v.astype(np.float64) for v in (a, b, c))
    g = helper.make_graph(
        [helper.make_node("Sub", ["a", "b"], ["s"]), helper.make_node("Div", ["s", "c"], ["q"]),
         helper.make_node("Neg", ["q"], ["n"]), helper.make_node("Mul", ["n", "a"], ["y"]),
         helper.make_node("Gradient", ["a", "b", "c", "z"], ["ga", "gb", "gc", "gz"], domain=tr, xs=["a", "b", "c", "z"],
                          y="y")],
        "gradient", [vi("a", F, [2, 3]), vi("b", F, [3]), vi("c", F, [1, 3]), vi("z", F, [4])],
        [vi(n, F, s) for n, s in zip(("y", "ga", "gb", "gc", "gz"), ([2, 3], [2, 3], [3], [1, 3], [4]))])
    want = [-(a6 - b6) / c6 * a6, -(2 * a6 - b6) / c6, (a6 / c6).sum(0), ((a6 - b6) * a6 / c6 ** 2).sum(0, keepdims=True),
            np.zeros(4)]
    save_case(root, "gradient_broadcast", helper.make_model(g, opset_imports=[helper.make_opsetid("", 13),
                                                                               helper.make_opsetid(tr, 1)]),
              [([("a", a), ("b", b), ("c", c), ("z", z)],
                [(n, v.astype(f32)) for n, v in zip(("y", "ga", "gb", "gc", "gz"), want)])])

    def optimizer(name, op, groups, attrs, T, ref):
        shapes = ((2, 3), (4,))
        ts = [[rng.normal(0, 1, s).astype(f32) if k < groups - 1 or op == "Momentum" else rng.uniform(0.1, 1, s).astype(f32) for s in shapes]
              for k in range(groups)]  # X, G, V, H: H (the squared sums) positive
        R, Tv = np.array(0.1, f32), np.array(T, np.int64)
        ins = ["R", "T"] + ["%s%d" % (k, i) for k in "XGVH"[:groups] for i in range(2)]
        outs = ["%s%d_new" % (k, i) for k in "XVH"[:groups - 1] for i in range(2)]
        if groups == 3 and op == "Adagrad":
            ins = ins[:6] + ["H0", "H1"]
            outs = outs[:2] + ["H0_new", "H1_new"]
        arrs = [R, Tv] + [t for grp in ts for t in grp]
        res = [ref(0.1, T, *[grp[i].astype(np.float64) for grp in ts]) for i in range(2)]
        want = [res[i][k].astype(f32) for k in range(groups - 1) for i in range(2)]
        gr = helper.make_graph([helper.make_node(op, ins, outs, domain=tr, **attrs)], name,
                               [vi(n, F if v.dtype == f32 else TensorProto.INT64, list(v.shape)) for n, v in zip(ins, arrs)],
                               [vi(n, F, list(v.shape)) for n, v in zip(outs, want)])
        save_case(root, name, helper.make_model(gr, opset_imports=[helper.make_opsetid(tr, 1)]),
                  [(list(zip(ins, arrs)), list(zip(outs, want)))])

    def adam(r, t, x, g, v, h, al=0.9, be=0.999, eps=1e-6):
        v2 = al * v + (1 - al) * g
        h2 = be * h + (1 - be) * g * g
        rr = r * np.sqrt(1 - be ** t) / (1 - al ** t) if t > 0 else r
        return x - rr * v2 / (np.sqrt(h2) + eps), v2, h2

    def nesterov(r, t, x, g, v, al=0.7, be=0.4, norm=0.01):
        gr = norm * x + g
        v2 = al * v + (be if t > 0 else 1) * gr
        return x - r * (gr + al * v2), v2

    def adagrad(r, t, x, g, h, decay=0.5, eps=1e-3, norm=0.02):
        rr = r / (1 + t * decay)
        gr = norm * x + g
        h2 = h + gr * gr
        return x - rr * gr / (np.sqrt(h2) + eps), h2

    optimizer("adam_defaults_first_step", "Adam", 4, {}, 0, adam)
    optimizer("adam_defaults_step3", "Adam", 4, {}, 3, adam)
    optimizer("nesterov_first_step", "Momentum", 3,
              dict(alpha=0.7, beta=0.4, norm_coefficient=0.01, mode="nesterov"), 0, nesterov)
    optimizer("adagrad_decay", "Adagrad", 3, dict(decay_factor=0.5, epsilon=1e-3, norm_coefficient=0.02), 4, adagrad)

    pool, counts = [4, 1, 7, 1, 4, 4, 7, 7, 1, 4, 1, 1, 7], [0, 3, 7]
    indexes = [6, 5, 4, 3, 2, 1, 0]
    weights = [0.5, 1.5, 2.0, 0.25, 3.0, 1.0, 0.75]
    X = rng.integers(0, 9, (2, 9)).astype(np.int32)
    X[0, :4] = [4, 1, 7, 1]
    X[1, 2:7] = [1, 4, 1, 1, 7]
    for name, mode, x, mn, mx, skip, w in (("tfidf_idf_weights_int32", "IDF", X, 2, 3, 1, weights),
                                           ("tfidf_tfidf_1d", "TFIDF", X[1].astype(np.int64), 1, 3, 2, weights),
                                           ("tfidf_idf_unweighted", "IDF", X, 1, 2, 0, None)):
        attrs = dict(mode=mode, min_gram_length=mn, max_gram_length=mx, max_skip_count=skip, pool_int64s=pool,
                     ngram_counts=counts, ngram_indexes=indexes)
        if w:
            attrs["weights"] = w
        want = tfidf_reference(x, pool, counts, indexes, mn, mx, skip, mode, w)
        gr = helper.make_graph([helper.make_node("TfIdfVectorizer", ["x"], ["y"], **attrs)], name,
                               [vi("x", TensorProto.INT32 if x.dtype == np.int32 else TensorProto.INT64, list(x.shape))],
                               [vi("y", F, list(want.shape))])
        save_case(root, name, helper.make_model(gr, opset_imports=[helper.make_opsetid("", 9)]),
                  [([("x", x)], [("y", want)])])


def convt_ref(x, w, b, strides, pb, pe, dil, group, outpad):
    """ConvTranspose by its definition, any rank: every input element times every kernel tap lands
    at i * stride + k * dilation of the unpadded output, which is then cut by the pads."""
    import itertools
    import numpy as np
    n, cin = x.shape[:2]
    sp = x.shape[2:]
    cg, mg = cin // group, w.shape[1]
    full = [(i - 1) * s + (k - 1) * d + 1 + o for i, s, k, d, o in zip(sp, strides, w.shape[2:], dil, outpad)]
    y = np.zeros([n, mg * group] + full)
    for g in range(group):
        xg = x[:, g * cg:(g + 1) * cg].astype(np.float64)
        for kk in itertools.product(*[range(k) for k in w.shape[2:]]):
            at = tuple(slice(k * d, k * d + (i - 1) * s + 1, s) for k, d, i, s in zip(kk, dil, sp, strides))
            wk = w[(slice(g * cg, (g + 1) * cg), slice(None)) + kk].astype(np.float64)
            y[(slice(None), slice(g * mg, (g + 1) * mg)) + at] += np.einsum("nc...,cm->nm...", xg, wk)
    y = y[(slice(None), slice(None)) + tuple(slice(a, f - e) for a, e, f in zip(pb, pe, full))]
    if b is not None:
        y += b.reshape([1, -1] + [1] * len(sp))
    return y


# 3-D ConvTranspose: (name, x shape, w shape, bias, attributes)
CONVT3D = [
    ("convtranspose_3d_groups_strides", (2, 4, 3, 4, 3), (4, 3, 2, 3, 2), True,
     {"group": 2, "strides": [2, 1, 2], "output_padding": [1, 0, 1], "pads": [1, 0, 1, 0, 1, 0],
      "dilations": [1, 2, 1]}),
    ("convtranspose_3d_depth_gaps", (1, 2, 3, 3, 3), (2, 2, 1, 2, 2), True, {"strides": [3, 1, 1]}),
    ("convtranspose_3d_same_upper", (1, 2, 3, 3, 4), (2, 3, 3, 3, 3), False,
     {"strides": [2, 2, 2], "auto_pad": "SAME_UPPER"}),
    ("convtranspose_3d_output_shape", (1, 1, 2, 3, 3), (1, 2, 3, 3, 3), False,
     {"strides": [2, 2, 2], "output_shape": [6, 7, 6]}),
]


def write_convt3d(root, case, rng):
    import numpy as np
    from onnx import TensorProto, helper
    name, xs, ws, with_b, attrs = case
    x = rng.normal(0, 1, xs).astype(np.float32)
    w = rng.normal(0, 1, ws).astype(np.float32)
    group = attrs.get("group", 1)
    b = rng.normal(0, 1, (ws[1] * group,)).astype(np.float32) if with_b else None
    nsp, k = len(xs) - 2, ws[2:]
    s = attrs.get("strides", [1] * nsp)
    d = attrs.get("dilations", [1] * nsp)
    op = attrs.get("output_padding", [0] * nsp)
    pads = attrs.get("pads", [0] * 2 * nsp)
    pb, pe = pads[:nsp], pads[nsp:]
    want = attrs.get("output_shape")
    if want is None and attrs.get("auto_pad", "NOTSET") != "NOTSET":
        want = [i * si for i, si in zip(xs[2:], s)]
    if want is not None:  # the padding that gives this output (the larger half at the end for SAME_UPPER)
        total = [si * (i - 1) + o + (ki - 1) * di + 1 - wi for si, i, o, ki, di, wi in zip(s, xs[2:], op, k, d, want)]
        upper = attrs.get("auto_pad") == "SAME_UPPER"
        pb = [t // 2 if upper else t - t // 2 for t in total]
        pe = [t - a for t, a in zip(total, pb)]
    # a negative end padding (output_shape past the computed extent) is output padding: zeros
    y = convt_ref(x, w, b, s, pb, [max(e, 0) for e in pe], d, group,
                  [o + max(-e, 0) for o, e in zip(op, pe)]).astype(np.float32)
    names = ["x", "w"] + (["b"] if with_b else [])
    arrs = [x, w] + ([b] if with_b else [])
    node = helper.make_node("ConvTranspose", names, ["y"], **attrs)
    g = helper.make_graph([node], name, [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(a.shape))
                                         for n, a in zip(names, arrs)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y.shape))])
    save_case(root, name, helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)]),
              [(list(zip(names, arrs)), [("y", y)])])


def maxpool_indices_ref(x, k, s, pads, dil, order):
    """MaxPool's values and int64 indices by the definition: the taps inside the image, row-major,
    the first of equal maxima; the flat index over (N, C, H, W), H and W swapped for order 1."""
    import numpy as np
    n, c, h, w = x.shape
    oh = (h + pads[0] + pads[2] - dil[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (w + pads[1] + pads[3] - dil[1] * (k[1] - 1) - 1) // s[1] + 1
    y, z = np.zeros((n, c, oh, ow), np.float32), np.zeros((n, c, oh, ow), np.int64)
    for b, ch, i, j in np.ndindex(n, c, oh, ow):
        best, at = None, -1
        for u, v in np.ndindex(k[0], k[1]):
            r, q = i * s[0] - pads[0] + u * dil[0], j * s[1] - pads[1] + v * dil[1]
            if 0 <= r < h and 0 <= q < w and (best is None or x[b, ch, r, q] > best):
                best = x[b, ch, r, q]
                at = (b * c + ch) * h * w + (q * h + r if order else r * w + q)
        y[b, ch, i, j], z[b, ch, i, j] = best, at
    return y, z


# MaxPool with Indices: (name, x shape, kernel, strides, pads, dilations, storage_order)
MAXPOOL_INDICES = [
    ("maxpool_indices_batch_pads", (2, 3, 5, 6), [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], 0),
    ("maxpool_indices_column_major", (2, 2, 6, 5), [2, 3], [1, 2], [0, 1, 1, 0], [1, 1], 1),
    ("maxpool_indices_dilated", (1, 2, 7, 7), [2, 2], [2, 1], [0, 0, 0, 0], [2, 3], 0),
]


def write_maxpool_indices(root, case, rng):
    import numpy as np
    from onnx import TensorProto, helper
    name, xs, k, s, pads, dil, order = case
    x = rng.integers(-3, 3, xs).astype(np.float32)  # few distinct values: ties in most windows
    y, z = maxpool_indices_ref(x, k, s, pads, dil, order)
    node = helper.make_node("MaxPool", ["x"], ["y", "z"], kernel_shape=k, strides=s, pads=pads, dilations=dil,
                            storage_order=order)
    g = helper.make_graph([node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(xs))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y.shape)),
                           helper.make_tensor_value_info("z", TensorProto.INT64, list(z.shape))])
    save_case(root, name, helper.make_model(g, opset_imports=[helper.make_opsetid("", 12)]),
              [([("x", x)], [("y", y), ("z", z)])])


def write_det(root, rng):
    """Det of a batch [2, 3, 4, 4]: random matrices, one with two equal rows (singular: 0), row
    permutations of the identity (+1 and -1), one whose first column needs a pivot search (a
    zero at [0, 0]); and of 1x1 and 5x5 matrices. numpy.linalg.det in float64 is the reference."""
    import numpy as np
    from onnx import TensorProto, helper
    x = rng.normal(0, 1, (2, 3, 4, 4))
    x[0, 1, 2] = x[0, 1, 0]
    x[0, 2] = np.eye(4)[[1, 0, 2, 3]]
    x[1, 0] = np.eye(4)[[1, 2, 0, 3]]
    x[1, 1, 0, 0] = 0
    for name, a in (("det_batched", x.astype(np.float32)), ("det_1x1", rng.normal(0, 1, (3, 1, 1)).astype(np.float32)),
                    ("det_5x5", rng.normal(0, 1, (5, 5)).astype(np.float32))):
        want = np.linalg.det(a.astype(np.float64)).astype(np.float32)
        node = helper.make_node("Det", ["x"], ["y"])
        g = helper.make_graph([node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(a.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(want.shape))])
        save_case(root, name, helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)]),
                  [([("x", a)], [("y", np.asarray(want))])])


def complex_of(x):
    """[..., 1] or [..., 2] (ONNX's real / complex layout) as a numpy complex array [...]"""
    return x[..., 0] + 1j * x[..., 1] if x.shape[-1] == 2 else x[..., 0].astype(complex)


def pairs_of(z, dtype):
    """a complex array [...] as [..., 2] (real, imaginary)"""
    import numpy as np
    return np.stack([z.real, z.imag], -1).astype(dtype)


DFTS = [
    # name, input shape, dtype, attributes, dft_length (None: absent)
    ("dft_inverse_complex", (2, 6, 3, 2), "float32", {"inverse": 1}, None),
    ("dft_onesided_even", (2, 8, 1), "float32", {"onesided": 1}, None),
    ("dft_onesided_odd", (2, 7, 3, 1), "float32", {"onesided": 1}, None),
    ("dft_truncate", (2, 10, 2), "float32", {}, 6),
    ("dft_zero_pad_axis2", (2, 3, 5, 1), "float32", {"axis": 2}, 9),
    ("dft_negative_axis", (2, 3, 4, 5, 2), "float32", {"axis": -2}, None),
    ("dft_float64_onesided_truncate", (2, 12, 1), "float64", {"onesided": 1}, 9),
]


def write_dft(root, case, rng):
    """DFT against numpy.fft.fft / ifft (n= truncates or zero-pads), onesided keeping bins 0 ..
    n // 2; dft_length an initializer."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    name, shape, dtype, attrs, n = case
    x = rng.normal(0, 1, shape).astype(dtype)
    axis = attrs.get("axis", 1) % x.ndim
    z = complex_of(x.astype(np.float64))
    length = n or shape[axis]
    y = np.fft.ifft(z, n=length, axis=axis) if attrs.get("inverse") else np.fft.fft(z, n=length, axis=axis)
    if attrs.get("onesided"):
        y = np.take(y, np.arange(length // 2 + 1), axis=axis)
    y = pairs_of(y, dtype)
    ty = TensorProto.DOUBLE if dtype == "float64" else TensorProto.FLOAT
    inits = [numpy_helper.from_array(np.array(n, np.int64), "n")] if n else []
    node = helper.make_node("DFT", ["x", "n"] if n else ["x"], ["y"], **attrs)
    g = helper.make_graph([node], name, [helper.make_tensor_value_info("x", ty, list(shape))],
                          [helper.make_tensor_value_info("y", ty, list(y.shape))], inits)
    save_case(root, name, helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]),
              [([("x", x)], [("y", y)])])


STFTS = [
    # name, signal shape, frame_step, window length (None: no window), frame_length (None: absent), onesided
    ("stft_window_twosided", (2, 40, 1), 6, 10, None, 0),
    ("stft_complex_frame_length", (2, 30, 2), 4, None, 8, 0),
    ("stft_onesided_odd_window", (2, 33, 1), 5, 9, None, 1),
]


def write_stft(root, case, rng):
    """STFT against numpy.fft.fft of each windowed frame (frames f * frame_step .. + W, 1 + (T -
    W) // frame_step of them); frame_step and frame_length initializers, the window a graph input."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    name, shape, step, wlen, flen, onesided = case
    x = rng.normal(0, 1, shape).astype(np.float32)
    width = wlen or flen
    win = rng.uniform(0.2, 1, width).astype(np.float32) if wlen else np.ones(width, np.float32)
    z = complex_of(x.astype(np.float64))
    frames = [z[:, f:f + width] * win for f in range(0, shape[1] - width + 1, step)]
    y = np.fft.fft(np.stack(frames, 1), axis=2)
    y = pairs_of(y[:, :, :width // 2 + 1] if onesided else y, np.float32)
    inits = [numpy_helper.from_array(np.array(step, np.int64), "step")]
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))]
    if wlen:
        ins.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, [wlen]))
    if flen:
        inits.append(numpy_helper.from_array(np.array(flen, np.int64), "len"))
    node = helper.make_node("STFT", ["x", "step", "w" if wlen else "", "len" if flen else ""], ["y"], onesided=onesided)
    g = helper.make_graph([node], name, ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y.shape))],
                          inits)
    feeds = [("x", x)] + ([("w", win)] if wlen else [])
    save_case(root, name, helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), [(feeds, [("y", y)])])


def write_mel(root):
    """MelWeightMatrix of 12 bands for a 100-point DFT at 22050 Hz between 30 and 9000 Hz, as
    float64 (output_datatype 11), its inputs initializers; numpy computes the band edges on the
    mel scale (num_mel_bins + 2 of them, the step (mel(hi) - mel(lo)) / (num_mel_bins + 2) as
    ONNX defines it) and the triangles (two coinciding edges: a 1 at the band's center)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    bands, n, rate, lo, hi = 12, 100, 22050, 30.0, 9000.0
    mel = 2595 * np.log10(1 + np.array([lo, hi]) / 700)
    hz = 700 * (10 ** ((mel[0] + np.arange(bands + 2) * (mel[1] - mel[0]) / (bands + 2)) / 2595) - 1)
    e = np.floor((n + 1) * hz / rate).astype(int)
    j = np.arange(n // 2 + 1)[:, None]
    left, mid, right = e[None, :-2], e[None, 1:-1], e[None, 2:]
    rise = np.where(mid > left, (j - left) / np.maximum(mid - left, 1), 1.0)
    fall = (right - j) / np.maximum(right - mid, 1)
    y = np.where((j >= left) & (j <= mid), rise, np.where((j > mid) & (j < right), fall, 0.0))
    inits = [numpy_helper.from_array(np.array(v, t), k) for k, v, t in
             (("bands", bands, np.int32), ("n", n, np.int32), ("rate", rate, np.int32), ("lo", lo, np.float32),
              ("hi", hi, np.float32))]
    node = helper.make_node("MelWeightMatrix", ["bands", "n", "rate", "lo", "hi"], ["y"], output_datatype=11)
    g = helper.make_graph([node], "mel_weight_matrix_float64", [],
                          [helper.make_tensor_value_info("y", TensorProto.DOUBLE, list(y.shape))], inits)
    save_case(root, "mel_weight_matrix_float64", helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]),
              [([], [("y", y)])])


def roi_align_taps(v, size):
    """one axis of a RoiAlign sample inside the image: low tap, high tap, weight of the high one
    (a coordinate below 0 is 0; from size - 1 on both taps are the last pixel)"""
    v = max(v, 0.0)
    lo = int(v)
    return (size - 1, size - 1, 0.0) if lo >= size - 1 else (lo, lo + 1, v - lo)


def roi_align_ref(x, rois, bidx, oh, ow, ratio, scale, mode, half_pixel):
    """RoiAlign by the ONNX definition in float64: per bin a grid of samples (ratio per axis, or
    ceil(bin size)), each bilinearly interpolated (0 when more than a pixel outside the image);
    avg: their mean; max: the largest of the weighted taps of all samples (ONNX's rule)"""
    import math
    import numpy as np
    c, h, w = x.shape[1:]
    out = np.zeros((len(rois), c, oh, ow))
    off = 0.5 if half_pixel else 0.0
    for r, roi in enumerate(rois.astype(np.float64)):
        x0, y0, x1, y1 = roi * scale - off
        rw, rh = (x1 - x0, y1 - y0) if half_pixel else (max(x1 - x0, 1.0), max(y1 - y0, 1.0))
        bh, bw = rh / oh, rw / ow
        gh = ratio if ratio > 0 else max(math.ceil(bh), 0)
        gw = ratio if ratio > 0 else max(math.ceil(bw), 0)
        img = x[bidx[r]].astype(np.float64)
        for i, j in np.ndindex(oh, ow):
            taps = []
            for iy, ix in np.ndindex(gh, gw):
                sy, sx = y0 + i * bh + (iy + 0.5) * bh / gh, x0 + j * bw + (ix + 0.5) * bw / gw
                if not (-1 <= sy <= h and -1 <= sx <= w):
                    taps.append(np.zeros((4, c)))
                    continue
                (ya, yb, ly), (xa, xb, lx) = roi_align_taps(sy, h), roi_align_taps(sx, w)
                taps.append([(1 - ly) * (1 - lx) * img[:, ya, xa], (1 - ly) * lx * img[:, ya, xb],
                             ly * (1 - lx) * img[:, yb, xa], ly * lx * img[:, yb, xb]])
            if taps:
                t = np.array(taps)
                out[r, :, i, j] = t.sum(axis=(0, 1)) / (gh * gw) if mode == "avg" else t.max(axis=(0, 1))
    return out.astype(x.dtype)


# RoiAlign: (name, opset, x shape, rois, batch indices, output h and w, sampling_ratio, spatial_scale,
# mode, coordinate_transformation_mode (None: opset 10's output_half_pixel))
ROI_ALIGN = [
    ("roialign_max_adaptive_batch1", 16, (2, 3, 8, 9),
     [[1, 1, 13, 11], [-6, -4, 7, 9], [10, 8, 22, 19], [3, 5, 4, 6]], [1, 0, 1, 1], (3, 2), 0, 0.5, "max", "half_pixel"),
    ("roialign_avg_ratio2_opset10", 10, (2, 2, 7, 6),
     [[0.5, 1.2, 4.3, 5.9], [-1.5, 2.25, 3.5, 9.75], [2.2, 2.4, 2.6, 2.9]], [1, 1, 0], (4, 3), 2, 1.0, "avg", None),
    ("roialign_max_ratio2_outside", 16, (2, 4, 5, 6),
     [[-3.3, -2.1, 2.7, 3.1], [3.4, 2.2, 8.6, 7.3], [0.4, 0.6, 5.2, 4.4]], [0, 1, 1], (2, 3), 2, 1.0, "max",
     "output_half_pixel"),
    ("roialign_avg_adaptive_empty", 16, (2, 3, 6, 7),
     [[0.5, 0.5, 11.5, 9.5], [5, 5, 5, 5], [8, 4, 2, 10], [-2, 1, 6, 13]], [1, 0, 1, 0], (2, 2), 0, 0.5, "avg",
     "half_pixel"),
]


def write_roi_align(root, case, rng):
    import numpy as np
    from onnx import TensorProto, helper
    name, opset, xs, rois, bidx, (oh, ow), ratio, scale, mode, ctm = case
    x = rng.normal(0, 1, xs).astype(np.float32)
    rois, bidx = np.array(rois, np.float32), np.array(bidx, np.int64)
    y = roi_align_ref(x, rois, bidx, oh, ow, ratio, scale, mode, ctm == "half_pixel")
    extra = {"coordinate_transformation_mode": ctm} if ctm else {}
    node = helper.make_node("RoiAlign", ["x", "rois", "batch_indices"], ["y"], output_height=oh, output_width=ow,
                            sampling_ratio=ratio, spatial_scale=scale, mode=mode, **extra)
    g = helper.make_graph([node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(xs)),
                                         helper.make_tensor_value_info("rois", TensorProto.FLOAT, list(rois.shape)),
                                         helper.make_tensor_value_info("batch_indices", TensorProto.INT64, [len(bidx)])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y.shape))])
    save_case(root, name, helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]),
              [([("x", x), ("rois", rois), ("batch_indices", bidx)], [("y", y)])])


# BatchNormalization with training_mode=1: (name, opset, x shape, offset added to x, momentum (None: the
# default 0.9), epsilon, the outputs asked for (running_mean, running_var))
BATCHNORM_TRAINING = [
    ("batchnorm_training_2d", 15, (4, 3), 0.0, 0.7, 1e-3, (True, True)),
    ("batchnorm_training_5d_y_only", 14, (2, 4, 3, 2, 2), 0.0, None, 1e-5, (False, False)),
    ("batchnorm_training_3d_offset", 15, (3, 2, 5), 50.0, 0.25, 1e-2, (False, True)),
]


def write_batchnorm_training(root, case, rng):
    """y = (x - m) / sqrt(v + eps) * scale + B with m, v the batch's mean and biased variance over
    every axis but 1; running = input * momentum + batch * (1 - momentum); float64"""
    import numpy as np
    from onnx import TensorProto, helper
    name, opset, xs, offset, momentum, eps, wanted = case
    f32, C = np.float32, xs[1]
    x = (rng.normal(0, 1, xs) + offset).astype(f32)
    scale, bias, mean, var = (rng.normal(0, 1, C).astype(f32), rng.normal(0, 1, C).astype(f32),
                              rng.normal(0, 1, C).astype(f32), rng.uniform(0.5, 2, C).astype(f32))
    axes = tuple(i for i in range(len(xs)) if i != 1)
    bshape = [1, C] + [1] * (len(xs) - 2)
    m, v = x.astype(np.float64).mean(axis=axes), x.astype(np.float64).var(axis=axes)
    y = (x - m.reshape(bshape)) / np.sqrt(v.reshape(bshape) + eps) * scale.reshape(bshape) + bias.reshape(bshape)
    mom = 0.9 if momentum is None else momentum
    outs = [("y", y.astype(f32))]
    names = ["y", "running_mean" if wanted[0] else "", "running_var" if wanted[1] else ""]
    for k, (want, run, batch) in enumerate(zip(wanted, (mean, var), (m, v))):
        if want:
            outs.append((names[k + 1], (run * mom + batch * (1 - mom)).astype(f32)))
    extra = {} if momentum is None else {"momentum": momentum}
    node = helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], names, epsilon=eps,
                            training_mode=1, **extra)
    ins = [("x", x), ("scale", scale), ("bias", bias), ("mean", mean), ("var", var)]
    g = helper.make_graph([node], name, [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(a.shape)) for n, a in ins],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(a.shape)) for n, a in outs])
    save_case(root, name, helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), [(ins, outs)])


def gridsample_ref(x, grid, mode, pad, ac):
    """GridSample by the ONNX definition, written out directly: the coordinate of each spatial axis
    unnormalized in the grid's float type, operation by operation (nearest: rounded half to even),
    then, outside the image, clamped (border) or mirrored at the borders until inside (reflection)
    and rounded to that type again; its taps
    (nearest: the coordinate; linear: floor and floor + 1; cubic: floor - 1 to floor + 2, Keys'
    kernel with A = -0.75), each tap index padded on its own (zeros: no value; border: clamped;
    reflection: mirrored; a single pixel reflects to itself), weights multiplied over the axes.
    The sums run in float64."""
    import itertools
    import numpy as np
    r = x.ndim - 2
    dims = x.shape[2:]
    lo_hi = [(0.0, d - 1.0) if ac else (-0.5, d - 0.5) for d in dims]

    def mirror(v, lo, hi):
        if hi == lo:
            return lo
        while v < lo or v > hi:
            v = 2 * lo - v if v < lo else 2 * hi - v
        return v

    def keys(d):
        a, d = -0.75, abs(d)
        if d <= 1:
            return (a + 2) * d ** 3 - (a + 3) * d ** 2 + 1
        return a * d ** 3 - 5 * a * d ** 2 + 8 * a * d - 4 * a if d < 2 else 0.0

    def taps(v, a):
        """[(index or None, weight)] of axis a at coordinate v"""
        n = dims[a]
        lo, hi = lo_hi[a]
        if v < lo or v > hi:
            v = min(max(v, 0.0), n - 1.0) if pad == "border" else mirror(v, lo, hi) if pad == "reflection" else v
            v = float(t(v))
        f = np.floor(v)
        if mode == "nearest":
            pts = [(int(v), 1.0)]
        elif mode == "linear":
            pts = [(int(f), 1 - (v - f)), (int(f) + 1, v - f)]
        else:
            pts = [(int(f) + k, keys(v - f - k)) for k in (-1, 0, 1, 2)]
        out = []
        for j, w in pts:
            if not 0 <= j < n:
                j = None if pad == "zeros" else min(max(j, 0), n - 1) if pad == "border" else \
                    int(mirror(j, *lo_hi[a]))
            out.append((j, w))
        return out

    y = np.zeros(x.shape[:2] + grid.shape[1:-1])
    t = grid.dtype.type  # every step of the coordinate rounded to it, as PyTorch computes
    for b in range(x.shape[0]):
        for o in np.ndindex(*grid.shape[1:-1]):
            per_axis = []
            for a in range(r):
                g, n = grid[(b,) + o + (r - 1 - a,)], dims[a]
                v = t(t(t(g + t(1)) / t(2)) * t(n - 1)) if ac else t(t(t(t(g + t(1)) * t(n)) - t(1)) / t(2))
                if mode == "nearest":
                    v = np.rint(v)
                per_axis.append(taps(float(v), a))
            for combo in itertools.product(*per_axis):
                if any(j is None for j, _ in combo):
                    continue
                w = np.prod([w for _, w in combo])
                y[(b, slice(None)) + o] += w * x[(b, slice(None)) + tuple(j for j, _ in combo)]
    return y.astype(x.dtype)


# GridSample: (name, opset, mode, padding_mode, align_corners, x shape, grid shape, x dtype, grid dtype)
GRIDSAMPLE = [
    ("gridsample_nearest_border_aligned", 16, "nearest", "border", 1, (2, 3, 4, 5), (2, 3, 6, 2), "f", "f"),
    ("gridsample_nearest_reflection", 16, "nearest", "reflection", 0, (2, 2, 5, 4), (2, 4, 3, 2), "f", "f"),
    ("gridsample_nearest_zeros_ties", 16, "nearest", "zeros", 0, (1, 2, 4, 4), (1, 5, 5, 2), "f", "f"),
    ("gridsample_bicubic_border", 16, "bicubic", "border", 0, (2, 3, 4, 6), (2, 5, 3, 2), "f", "f"),
    ("gridsample_bicubic_reflection_aligned", 16, "bicubic", "reflection", 1, (1, 2, 5, 5), (1, 4, 7, 2), "f", "f"),
    ("gridsample_bicubic_zeros_aligned", 16, "bicubic", "zeros", 1, (2, 2, 3, 4), (2, 3, 5, 2), "f", "f"),
    ("gridsample_bilinear_reflection_aligned", 16, "bilinear", "reflection", 1, (2, 3, 3, 5), (2, 6, 4, 2), "f", "f"),
    ("gridsample_bilinear_border_aligned", 16, "bilinear", "border", 1, (1, 3, 4, 3), (1, 2, 7, 2), "f", "f"),
    ("gridsample_single_row_reflection", 16, "bilinear", "reflection", 1, (1, 2, 1, 5), (1, 3, 4, 2), "f", "f"),
    ("gridsample_double_linear_reflection", 16, "bilinear", "reflection", 0, (2, 2, 4, 3), (2, 3, 5, 2), "d", "f"),
    ("gridsample_double_cubic_zeros", 16, "bicubic", "zeros", 0, (1, 2, 5, 4), (1, 4, 3, 2), "d", "d"),
    ("gridsample_1d_cubic_reflection", 17, "cubic", "reflection", 0, (2, 3, 6), (2, 9, 1), "f", "f"),
    ("gridsample_3d_linear_zeros", 17, "linear", "zeros", 0, (2, 2, 3, 4, 5), (2, 2, 3, 4, 3), "f", "f"),
    ("gridsample_3d_nearest_reflection_aligned", 17, "nearest", "reflection", 1, (1, 3, 4, 3, 5), (1, 3, 2, 5, 3),
     "f", "f"),
    ("gridsample_3d_cubic_border", 17, "cubic", "border", 0, (1, 2, 4, 4, 3), (1, 2, 3, 2, 3), "f", "f"),
]


def write_gridsample(root, case, rng):
    """Grid points mostly in [-1.3, 1.3], some far outside (up to 20 image widths, and 1e30 but
    for reflection); the nearest cases also take points exactly halfway between pixels, where
    rounding half to even and half away from zero disagree."""
    import numpy as np
    from onnx import TensorProto, helper
    name, opset, mode, pad, ac, xs, gs, xd, gd = case
    xt, gt = (np.float32 if t == "f" else np.float64 for t in (xd, gd))
    x = rng.normal(0, 1, xs).astype(xt)
    grid = rng.uniform(-1.3, 1.3, gs)
    flat = grid.reshape(-1)
    far = rng.choice(flat.size, flat.size // 6, replace=False)
    huge = [-1e30, 1e30] if pad != "reflection" else []  # beyond int64 once unnormalized
    flat[far] = rng.choice([-20.0, -6.5, -3.2, 2.7, 4.9, 17.0] + huge, far.size)
    if mode == "nearest":
        halves = rng.choice(flat.size, flat.size // 3, replace=False)
        for i in halves:  # a pixel index + 0.5 along the axis this component addresses
            n = xs[2 + (gs[-1] - 1 - i % gs[-1])]
            k = rng.integers(-2, n + 1) + 0.5
            flat[i] = 2 * k / (n - 1) - 1 if ac and n > 1 else (2 * k + 1) / n - 1
    grid = grid.astype(gt)
    want = gridsample_ref(x, grid, {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode), pad, ac)
    elem = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE}
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode=pad, align_corners=ac)
    g = helper.make_graph([node], name, [helper.make_tensor_value_info("x", elem[xt], list(xs)),
                                         helper.make_tensor_value_info("grid", elem[gt], list(gs))],
                          [helper.make_tensor_value_info("y", elem[xt], list(want.shape))])
    save_case(root, name, helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]),
              [([("x", x), ("grid", grid)], [("y", want)])])


def write_concat_in_place(root, rng):
    """Concatenations that tth does in place (their inputs written straight into the output,
    docs/lowering.md) beside ones it must copy: two convolution results joined along channels
    (in place), one of them read again after the join, the same tensor twice, a join holding a
    joined tensor, a join along rows with channels before it, a join returned as the model's
    output, and batch 2 (neither in place). numpy computes the expected outputs."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    relu = lambda v: np.maximum(v, 0)
    sigm = lambda v: 1 / (1 + np.exp(-v))
    conv1 = lambda w, v: np.einsum("oc,nchw->nohw", w, v)
    for name, n in (("concat_in_place", 1), ("concat_batch2", 2)):
        x = rng.normal(0, 1, (n, 4, 5, 5)).astype(np.float32)
        w = {k: rng.normal(0, 0.5, s).astype(np.float32) for k, s in
             (("wa", (4, 4)), ("wb", (4, 4)), ("wd", (4, 8)))}
        a = relu(conv1(w["wa"], x))
        b = sigm(conv1(w["wb"], x))
        c = np.concatenate([a, b], 1)
        d = conv1(w["wd"], c)
        e = np.concatenate([d, d], 1)
        f = np.concatenate([e, a], 1)
        g = a + d
        h = np.concatenate([g, relu(d)], 2)
        k = np.concatenate([relu(g), -g], 1)
        nodes = [
            helper.make_node("Conv", ["x", "wa"], ["ca"]), helper.make_node("Relu", ["ca"], ["a"]),
            helper.make_node("Conv", ["x", "wb"], ["cb"]), helper.make_node("Sigmoid", ["cb"], ["b"]),
            helper.make_node("Concat", ["a", "b"], ["c"], axis=1),
            helper.make_node("Conv", ["c", "wd"], ["d"]),
            helper.make_node("Concat", ["d", "d"], ["e"], axis=1),
            helper.make_node("Concat", ["e", "a"], ["f"], axis=1),
            helper.make_node("Add", ["a", "d"], ["g"]),
            helper.make_node("Relu", ["d"], ["rd"]),
            helper.make_node("Concat", ["g", "rd"], ["h"], axis=2),
            helper.make_node("Relu", ["g"], ["rg"]), helper.make_node("Neg", ["g"], ["ng"]),
            helper.make_node("Concat", ["rg", "ng"], ["k"], axis=1),
        ]
        inits = [numpy_helper.from_array(v.reshape(v.shape + (1, 1)), k) for k, v in w.items()]
        outs = (("f", f), ("g", g), ("h", h), ("k", k))
        g_ = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                               [helper.make_tensor_value_info(o, TensorProto.FLOAT, list(v.shape)) for o, v in outs],
                               inits)
        save_case(root, name, helper.make_model(g_, opset_imports=[helper.make_opsetid("", 13)]),
                  [([("x", x)], [(o, v.astype(np.float32)) for o, v in outs])])


def conv_ref(x, w, b, stride, pad, group):
    """ONNX Conv in float64 (square stride and symmetric padding)"""
    import numpy as np
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.zeros((n, c, h + 2 * pad, wd + 2 * pad))
    xp[:, :, pad:pad + h, pad:pad + wd] = x
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((n, o, oh, ow))
    og = o // group
    for g in range(group):
        for i in range(kh):
            for j in range(kw):
                patch = xp[:, g * cg:(g + 1) * cg, i:i + stride * (oh - 1) + 1:stride, j:j + stride * (ow - 1) + 1:stride]
                y[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, w[g * og:(g + 1) * og, :, i, j])
    return y + b.reshape(1, -1, 1, 1)


def maxpool_ref(x, k, s, ceil):
    """ONNX MaxPool without padding, ceil_mode as asked"""
    import numpy as np
    n, c, h, w = x.shape
    osz = lambda i: (-(-(i - k) // s) if ceil else (i - k) // s) + 1
    oh, ow = osz(h), osz(w)
    y = np.full((n, c, oh, ow), -np.inf)
    for i in range(oh):
        for j in range(ow):
            y[:, :, i, j] = x[:, :, i * s:min(i * s + k, h), j * s:min(j * s + k, w)].max(axis=(2, 3))
    return y


def graph_builder(rng, P, nodes, cur):
    """Two helpers that add a node to `nodes` and its float64 value to `cur`: conv(name, src,
    out channels, in channels, kernel, pad), a convolution with random weights and bias (into P);
    op(kind, inputs, out, value, **attrs), any node whose value the caller computes."""
    import numpy as np
    from onnx import helper

    def conv(name, src, o, c, k, pad):
        w = rng.normal(0, (2.0 / (c * k * k)) ** 0.5, (o, c, k, k)).astype(np.float32)
        b = rng.normal(0, 0.1, (o,)).astype(np.float32)
        P[name + "_w"], P[name + "_b"] = w, b
        nodes.append(helper.make_node("Conv", [src, name + "_w", name + "_b"], [name], pads=[pad] * 4))
        cur[name] = conv_ref(cur[src], w.astype(np.float64), b.astype(np.float64), 1, pad, 1)

    def op(kind, ins, out, val, **attrs):
        nodes.append(helper.make_node(kind, ins, [out], **attrs))
        cur[out] = val
    return conv, op


def write_blocked_se(root, rng):
    """Squeeze-and-excitation and spatial attention in blocked channels (docs/layouts.md): a
    convolution's 32 channels, global average pooling, a 1x1 squeeze to 8 channels (no block of
    16: NCHW) and excite back to 32, a sigmoid, the channel scale broadcast over the pixels
    ([N, C, 1, 1] times [N, C, H, W]); then a map of one channel ([N, 1, H, W], the channels'
    mean, a sigmoid) broadcast over the channels; SiLU on the way, batch 2. numpy computes the
    expected output."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    sig = lambda v: 1 / (1 + np.exp(-v))
    x = rng.normal(0, 1, (2, 16, 9, 11)).astype(np.float32)
    P, nodes, cur = {}, [], {"x": x.astype(np.float64)}

    conv, op = graph_builder(rng, P, nodes, cur)
    conv("c1", "x", 32, 16, 3, 1)
    op("Sigmoid", ["c1"], "s1", sig(cur["c1"]))
    op("Mul", ["c1", "s1"], "a1", cur["c1"] * cur["s1"])                   # SiLU
    op("GlobalAveragePool", ["a1"], "g", cur["a1"].mean(axis=(2, 3), keepdims=True))
    conv("sq", "g", 8, 32, 1, 0)
    op("Relu", ["sq"], "rs", np.maximum(cur["sq"], 0))
    conv("ex", "rs", 32, 8, 1, 0)
    op("Sigmoid", ["ex"], "se", sig(cur["ex"]))
    op("Mul", ["a1", "se"], "m1", cur["a1"] * cur["se"])                   # [2, 32, 9, 11] x [2, 32, 1, 1]
    conv("c2", "m1", 32, 32, 1, 0)
    op("ReduceMean", ["c2"], "cm", cur["c2"].mean(axis=1, keepdims=True), axes=[1], keepdims=1)
    op("Sigmoid", ["cm"], "sm", sig(cur["cm"]))
    op("Mul", ["c2", "sm"], "m2", cur["c2"] * cur["sm"])                   # [2, 32, 9, 11] x [2, 1, 9, 11]
    conv("c3", "m2", 16, 32, 3, 1)
    y = cur["c3"].astype(np.float32)
    inits = [numpy_helper.from_array(v, k) for k, v in P.items()]
    g_ = helper.make_graph(nodes, "blocked_se", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                           [helper.make_tensor_value_info("c3", TensorProto.FLOAT, list(y.shape))], inits)
    m = helper.make_model(g_, opset_imports=[helper.make_opsetid("", 13)])
    save_case(root, "blocked_squeeze_excitation", m, [([("x", x)], [("c3", y)])])


def write_dense_block(root, rng):
    """A DenseNet block (batch 1): every layer reads the concatenation of all earlier features
    through a per-channel scale and shift and a ReLU, so each feature is joined several times
    and no join is done in place. The joins are large enough to be split among the cores by rows
    (docs/threads.md, "Locality"); 20 rows, which 2 or 3 cores do not divide into bands of the
    same size. Beside it a large element-wise op on an image (a per-channel scale, a sigmoid),
    also split by rows. numpy computes the expected outputs."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    sig = lambda v: 1 / (1 + np.exp(-v))
    x = rng.normal(0, 1, (1, 32, 20, 20)).astype(np.float32)
    z = rng.normal(0, 1, (1, 40, 80, 82)).astype(np.float32)
    P, nodes, cur = {}, [], {"x": x.astype(np.float64), "z": z.astype(np.float64)}

    conv, op = graph_builder(rng, P, nodes, cur)

    def norm_relu(src, out, c):
        s = rng.normal(1, 0.2, (c, 1, 1)).astype(np.float32)
        t = rng.normal(0, 0.2, (c, 1, 1)).astype(np.float32)
        P[out + "_s"], P[out + "_t"] = s, t
        op("Mul", [src, out + "_s"], out + "_m", cur[src] * s)
        op("Add", [out + "_m", out + "_t"], out + "_a", cur[out + "_m"] + t)
        op("Relu", [out + "_a"], out, np.maximum(cur[out + "_a"], 0))
    feats, c = ["x"], 32
    for i in range(4):
        op("Concat", list(feats), f"cat{i}", np.concatenate([cur[f] for f in feats], 1), axis=1)
        norm_relu(f"cat{i}", f"nr{i}", c)
        conv(f"b{i}", f"nr{i}", 64, c, 1, 0)
        op("Relu", [f"b{i}"], f"rb{i}", np.maximum(cur[f"b{i}"], 0))
        conv(f"f{i}", f"rb{i}", 16, 64, 3, 1)
        feats.append(f"f{i}")
        c += 16
    op("Concat", list(feats), "cat", np.concatenate([cur[f] for f in feats], 1), axis=1)
    norm_relu("cat", "y", c)
    zs = rng.normal(0, 1, (40, 1, 1)).astype(np.float32)
    P["zs"] = zs
    op("Mul", ["z", "zs"], "zm", cur["z"] * zs)
    op("Sigmoid", ["zm"], "zy", sig(cur["zm"]))
    inits = [numpy_helper.from_array(v, k) for k, v in P.items()]
    outs = [("y", cur["y"].astype(np.float32)), ("zy", cur["zy"].astype(np.float32))]
    g_ = helper.make_graph(nodes, "dense_block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape)),
                                                  helper.make_tensor_value_info("z", TensorProto.FLOAT, list(z.shape))],
                           [helper.make_tensor_value_info(o, TensorProto.FLOAT, list(v.shape)) for o, v in outs], inits)
    m = helper.make_model(g_, opset_imports=[helper.make_opsetid("", 13)])
    save_case(root, "dense_block", m, [([("x", x), ("z", z)], outs)])


def write_conv_taps(root, rng):
    """Convolutions whose kernel reaches past the image (daemon/frontend/conv_taps.c cuts the taps
    that read only padding): 3x3 at dilation 24 over 14x14 rows and dilation 2 over columns (only
    the center row of taps is left), at dilation 12 (every tap reaches the image for some rows:
    nothing is cut), strided and dilated with uneven padding, and a 3x3 over a 1x1 image (its
    center); numpy_ref.py's conv2d, from the ONNX definition, computes the expected outputs."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lower"))
    from numpy_ref import conv2d
    x = rng.normal(0, 1, (1, 32, 14, 14)).astype(np.float32)
    z = rng.normal(0, 1, (1, 16, 1, 1)).astype(np.float32)
    specs = [  # (input, output channels, strides, pads t l b r, dilations)
        ("x", 16, [1, 1], [24, 2, 24, 2], [24, 2]),
        ("x", 16, [1, 1], [12, 12, 12, 12], [12, 12]),
        ("x", 24, [2, 1], [10, 3, 2, 9], [5, 7]),
        ("z", 8, [1, 1], [1, 1, 1, 1], [1, 1]),
    ]
    nodes, inits, outs, refs = [], [], [], []
    for i, (src, o, st, pads, dil) in enumerate(specs):
        v = x if src == "x" else z
        w = rng.normal(0, 0.2, (o, v.shape[1], 3, 3)).astype(np.float32)
        b = rng.normal(0, 0.1, (o,)).astype(np.float32)
        inits += [numpy_helper.from_array(w, "w%d" % i), numpy_helper.from_array(b, "b%d" % i)]
        # ONNX pads: begin h, begin w, end h, end w; numpy_ref: top, left, bottom, right
        nodes.append(helper.make_node("Conv", [src, "w%d" % i, "b%d" % i], ["y%d" % i], strides=st,
                                      pads=[pads[0], pads[1], pads[2], pads[3]], dilations=dil))
        y = conv2d(v.astype(np.float64), w, b, st, pads, dil, 1).astype(np.float32)
        outs.append(helper.make_tensor_value_info("y%d" % i, TensorProto.FLOAT, list(y.shape)))
        refs.append(("y%d" % i, y))
    g = helper.make_graph(nodes, "conv_taps", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape)),
                                               helper.make_tensor_value_info("z", TensorProto.FLOAT, list(z.shape))],
                          outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    save_case(root, "conv_dilated_beyond_the_image", m, [([("x", x), ("z", z)], refs)])


def write_blocked_cnn(root, rng):
    """A small CNN in the shapes of MobileNet, SqueezeNet and ResNet, which an llvm target with
    vectors runs in blocked channels (docs/layouts.md): a stem of 3 channels, a ceil_mode max
    pool, depthwise convolutions of stride 1 and 2, a convolution whose 24 output channels fill
    no block of 16 and the one reading them, a residual add, a fire module's concatenation, an
    average pool, a multiply by a constant per channel, global average pooling and a dense layer
    reading the flattened result; batch 2. numpy computes the expected output."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    relu = lambda v: np.maximum(v, 0)
    x = rng.normal(0, 1, (2, 3, 23, 25)).astype(np.float32)
    P = {}
    def param(name, shape, scale):
        P[name] = rng.normal(0, scale, shape).astype(np.float32)
        return P[name].astype(np.float64)
    nodes, cur = [], {}
    def conv(name, src, o, c, k, stride, pad, group=1):
        w, b = param(name + "_w", (o, c // group, k, k), (2.0 / (c // group * k * k)) ** 0.5), param(name + "_b", (o,), 0.1)
        nodes.append(helper.make_node("Conv", [src, name + "_w", name + "_b"], [name], strides=[stride, stride],
                                      pads=[pad] * 4, group=group))
        cur[name] = conv_ref(cur[src], w, b, stride, pad, group)
    cur["x"] = x.astype(np.float64)
    conv("c1", "x", 32, 3, 3, 2, 1)                                   # stem: NCHW in, blocked out
    nodes.append(helper.make_node("Relu", ["c1"], ["r1"])); cur["r1"] = relu(cur["c1"])
    nodes.append(helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1))
    cur["p1"] = maxpool_ref(cur["r1"], 3, 2, True)
    conv("d1", "p1", 32, 32, 3, 1, 1, group=32)                       # depthwise, stride 1
    nodes.append(helper.make_node("Clip", ["d1", "lo", "hi"], ["r2"])); cur["r2"] = np.clip(cur["d1"], 0, 6)
    conv("c2", "r2", 24, 32, 1, 1, 0)                                 # 24 channels: NCHW out
    conv("c3", "c2", 48, 24, 1, 1, 0)                                 # NCHW in, blocked out
    conv("c4", "p1", 48, 32, 1, 1, 0)
    nodes.append(helper.make_node("Add", ["c3", "c4"], ["a1"])); cur["a1"] = cur["c3"] + cur["c4"]
    conv("e1", "a1", 32, 48, 1, 1, 0)                                 # a fire module
    conv("e3", "a1", 32, 48, 3, 1, 1)
    nodes.append(helper.make_node("Relu", ["e1"], ["re1"])); cur["re1"] = relu(cur["e1"])
    nodes.append(helper.make_node("Relu", ["e3"], ["re3"])); cur["re3"] = relu(cur["e3"])
    nodes.append(helper.make_node("Concat", ["re1", "re3"], ["cat"], axis=1))
    cur["cat"] = np.concatenate([cur["re1"], cur["re3"]], 1)
    conv("d2", "cat", 64, 64, 3, 2, 1, group=64)                      # depthwise, stride 2
    nodes.append(helper.make_node("AveragePool", ["d2", ], ["ap"], kernel_shape=[2, 2], strides=[1, 1]))
    d2 = cur["d2"]
    cur["ap"] = (d2[:, :, :-1, :-1] + d2[:, :, 1:, :-1] + d2[:, :, :-1, 1:] + d2[:, :, 1:, 1:]) / 4
    scale = param("scale", (64, 1, 1), 1.0)
    nodes.append(helper.make_node("Mul", ["ap", "scale"], ["m1"])); cur["m1"] = cur["ap"] * scale
    nodes.append(helper.make_node("GlobalAveragePool", ["m1"], ["g"])); cur["g"] = cur["m1"].mean(axis=(2, 3), keepdims=True)
    nodes.append(helper.make_node("Flatten", ["g"], ["f"])); cur["f"] = cur["g"].reshape(2, 64)
    fw, fb = param("fc_w", (10, 64), 0.2), param("fc_b", (10,), 0.1)
    nodes.append(helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], transB=1)); y = cur["f"] @ fw.T + fb
    inits = [numpy_helper.from_array(v, k) for k, v in P.items()]
    inits += [numpy_helper.from_array(np.array(0, np.float32), "lo"), numpy_helper.from_array(np.array(6, np.float32), "hi")]
    g_ = helper.make_graph(nodes, "blocked_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 10]),
                            helper.make_tensor_value_info("cat", TensorProto.FLOAT, list(cur["cat"].shape))], inits)
    save_case(root, "blocked_cnn", helper.make_model(g_, opset_imports=[helper.make_opsetid("", 13)]),
              [([("x", x)], [("y", y.astype(np.float32)), ("cat", cur["cat"].astype(np.float32))])])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--conformance", required=True)
    ap.add_argument("--keep")
    args = ap.parse_args()
    try:
        import numpy as np
        import onnx  # noqa: F401
    except ImportError:
        print("composed_cases: skipped, python3-numpy or python3-onnx is not installed")
        return 77
    root = args.keep or tempfile.mkdtemp(prefix="tth-composed-")
    try:
        rng = np.random.default_rng(21)
        for case in CASES:
            write_case(root, case, rng)
        for case in EINSUM:
            write_einsum(root, case, rng)
        write_if(root, "if_both_branches", False, rng)
        write_if(root, "if_constant_condition", True, rng)
        write_loop_scan(root, rng)
        write_scan8(root, rng)
        write_training(root, rng)
        for case in CONVT3D:
            write_convt3d(root, case, rng)
        for case in MAXPOOL_INDICES:
            write_maxpool_indices(root, case, rng)
        write_det(root, rng)
        for case in DFTS:
            write_dft(root, case, rng)
        for case in STFTS:
            write_stft(root, case, rng)
        write_mel(root)
        for case in ROI_ALIGN:
            write_roi_align(root, case, rng)
        for case in BATCHNORM_TRAINING:
            write_batchnorm_training(root, case, rng)
        for case in GRIDSAMPLE:
            write_gridsample(root, case, rng)
        write_concat_in_place(root, rng)
        write_blocked_cnn(root, rng)
        write_conv_taps(root, rng)
        write_blocked_se(root, rng)
        write_dense_block(root, rng)
        torch_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_models")
        for case in sorted(os.listdir(torch_dir)):
            if os.path.isdir(os.path.join(torch_dir, case)):  # beside its README
                shutil.copytree(os.path.join(torch_dir, case), os.path.join(root, case))
        bad = 0
        for target in ("c", "llvm"):
            r = subprocess.run([args.conformance, "--jobs", "2", "--verbose", "--target", target, root],
                               capture_output=True, text=True)
            print(r.stdout)
            if r.returncode != 0 or "unsupported: 0" not in r.stdout:
                bad += 1
        return 1 if bad else 0
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
