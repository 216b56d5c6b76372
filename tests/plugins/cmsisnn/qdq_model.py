# A small int8 QDQ model for the cmsis-nn / ethos-n end-to-end tests:
#   x float32 [1, 8, 6, 6] -> QuantizeLinear (int8) -> QLinearConv (int8 weights, zero point 0,
#   3x3 pad 1, int32 bias) -> DequantizeLinear -> Softmax (last axis) -> QuantizeLinear (1/256, -128)
#   -> DequantizeLinear -> y
# Usage: python3 qdq_model.py OUT.onnx
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(7)
w = rng.integers(-20, 21, size=(4, 8, 3, 3), dtype=np.int8)
b = rng.integers(-300, 301, size=(4,), dtype=np.int32)
inits = [
    numpy_helper.from_array(np.array(0.05, np.float32), "x_s"),
    numpy_helper.from_array(np.array(-3, np.int8), "x_zp"),
    numpy_helper.from_array(w, "w"),
    numpy_helper.from_array(np.array(0.01, np.float32), "w_s"),
    numpy_helper.from_array(np.array(0, np.int8), "w_zp"),
    numpy_helper.from_array(np.array(0.1, np.float32), "y_s"),
    numpy_helper.from_array(np.array(5, np.int8), "y_zp"),
    numpy_helper.from_array(b, "b"),
    numpy_helper.from_array(np.array(1.0 / 256, np.float32), "p_s"),
    numpy_helper.from_array(np.array(-128, np.int8), "p_zp"),
]
nodes = [
    helper.make_node("QuantizeLinear", ["x", "x_s", "x_zp"], ["xq"], name="quant_x"),
    helper.make_node("QLinearConv", ["xq", "x_s", "x_zp", "w", "w_s", "w_zp", "y_s", "y_zp", "b"], ["cq"],
                     name="conv", pads=[1, 1, 1, 1]),
    helper.make_node("DequantizeLinear", ["cq", "y_s", "y_zp"], ["c"], name="dq_conv"),
    helper.make_node("Softmax", ["c"], ["s"], name="softmax", axis=-1),
    helper.make_node("QuantizeLinear", ["s", "p_s", "p_zp"], ["sq"], name="quant_s"),
    helper.make_node("DequantizeLinear", ["sq", "p_s", "p_zp"], ["y"], name="dq_out"),
]
g = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 6, 6])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 6])], inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
onnx.checker.check_model(m)
onnx.save(m, sys.argv[1])
