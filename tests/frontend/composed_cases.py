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
(two states, a reversed scan input along axis 1, a scan output along axis 1), of 3-D
ConvTranspose (groups, strides, dilations, pads, output_padding, auto_pad, output_shape), of
MaxPool's Indices (batch 2, padding, storage_order 1, ties), of Det (singular and permuted
matrices, batches) and of GridSample (every mode with every padding mode, align_corners with
reflection, halfway points for nearest, points far outside, batch 2 with several channels,
float64, one and three spatial axes), written as ONNX
test cases whose expected outputs come from numpy (an implementation of the ONNX definitions,
and numpy.einsum), independent of tth.

    composed_cases.py --conformance build/tests/conformance/tth-conformance [--keep DIR]

Runs tth-conformance over the cases, and over the PyTorch-exported models of
tests/frontend/torch_models/ (written by torch_models.py, expected outputs PyTorch's), for
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
        write_training(root, rng)
        for case in CONVT3D:
            write_convt3d(root, case, rng)
        for case in MAXPOOL_INDICES:
            write_maxpool_indices(root, case, rng)
        write_det(root, rng)
        for case in GRIDSAMPLE:
            write_gridsample(root, case, rng)
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
