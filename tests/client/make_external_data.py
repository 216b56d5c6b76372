#!/usr/bin/env python3
"""A model whose weights are ONNX external data, for tests/client/test_client.c
(compile_with_external_data): DIR/m.onnx + DIR/m.data (a Gemm, 8 -> 16, weights and bias in the
data file), DIR/x.npy an input and DIR/y.npy the output numpy computes from the ONNX definition
(y = x . W^T + b), DIR/bad.onnx whose tensor names the location "../m.data".

usage: make_external_data.py DIR SEED    (a new SEED rewrites m.data and y.npy with other weights
                                          of the same size; m.onnx stays byte for byte the same)
exit status 77 without numpy and onnx
"""
import os
import sys

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError:
    sys.exit(77)


def model(w, b):
    g = helper.make_graph([helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)], "ext",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16])],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def main():
    d, seed = sys.argv[1], int(sys.argv[2])
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    b = rng.standard_normal((16,)).astype(np.float32)
    x = (np.arange(16, dtype=np.float32).reshape(2, 8) / 10).astype(np.float32)
    data = os.path.join(d, "m.data")
    if os.path.exists(data):
        os.remove(data)  # onnx appends to an existing data file
    onnx.save_model(model(w, b), os.path.join(d, "m.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="m.data", size_threshold=0)
    np.save(os.path.join(d, "x.npy"), x)
    np.save(os.path.join(d, "y.npy"), (x.astype(np.float64) @ w.T.astype(np.float64) + b).astype(np.float32))
    bad = onnx.load(os.path.join(d, "m.onnx"), load_external_data=False)
    for t in bad.graph.initializer:
        for kv in t.external_data:
            if kv.key == "location":
                kv.value = "../m.data"
    onnx.save(bad, os.path.join(d, "bad.onnx"))


if __name__ == "__main__":
    main()
