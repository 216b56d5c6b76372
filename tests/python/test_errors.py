"""Every error class from a real daemon answer (or a real run), with its attributes and its text."""
import os

import numpy as np
import pytest

import tth
from conftest import EXAMPLES

DIGITS = os.path.join(EXAMPLES, "digits.onnx")


def test_target_error_did_you_mean(daemon):
    with pytest.raises(tth.TargetError) as ei:
        tth.compile(DIGITS, "llvm -mcpux=znver4")
    e = ei.value
    assert e.code == -32006 and e.tth_code == "EUNKNOWN"
    assert e.did_you_mean == "mcpu"
    assert e.location == "-mcpux=znver4"
    assert str(e) == ("error: unknown attribute 'mcpux' for kind 'llvm'\n"
                      "  at: '-mcpux=znver4' in target 'llvm -mcpux=znver4'\n"
                      "  hint: did you mean 'mcpu'?")
    with pytest.raises(tth.TargetError) as ei:
        tth.parse_target("llvmm")
    assert ei.value.did_you_mean == "llvm"
    assert ei.value.stage is None


def test_model_error(daemon):
    with pytest.raises(tth.ModelError) as ei:
        tth.compile(b"this is not an onnx model", "llvm")
    e = ei.value
    assert e.code == -32005 and e.tth_code == "EPARSE"
    assert e.stage == "import"
    assert "not a valid ONNX model" in str(e) and str(e).startswith("error: ")
    with pytest.raises(tth.ModelError) as ei:
        tth.compile(DIGITS, "llvm", bind={"nosuch": np.zeros(3, np.float32)})
    assert ei.value.tth_code == "EINVAL" and "nosuch" in str(ei.value)


def test_model_error_names_the_node(daemon):
    """a node the importer cannot take: the error carries its name"""
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], name="bad_conv", group=5)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4]),
                           helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 3, 1, 1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 4, 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(tth.CompileError) as ei:
        tth.compile(m, "llvm")
    assert ei.value.node == "bad_conv", str(ei.value)


def test_unsupported_error(daemon):
    from onnx import TensorProto, helper
    # a graph input of ONNX's string type: the importer takes numbers only
    g = helper.make_graph([helper.make_node("StringNormalizer", ["x"], ["y"], name="norm")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.STRING, [1, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.STRING, [1, 3])])
    with pytest.raises(tth.UnsupportedError) as ei:
        tth.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "c")
    e = ei.value
    assert e.code == -32010 and e.tth_code == "EUNSUPPORTED"
    assert "element type string" in e.message
    assert "input 'x'" in str(e)


def test_limit_error(daemon, other_daemon):
    other_daemon("--max-request-bytes", "4096")
    data = open(DIGITS, "rb").read()
    assert len(data) > 4096
    with pytest.raises(tth.LimitError) as ei:
        tth.compile(data, "llvm")
    e = ei.value
    assert e.code == -32103 and e.tth_code == "RequestTooLarge"
    assert "RequestTooLarge, code -32103" in str(e)


def test_daemon_error_when_none_answers(daemon, tmp_path):
    saved = tth.socket_path()
    tth.configure(socket=str(tmp_path / "none.sock"), start=False)
    try:
        with pytest.raises(tth.DaemonError) as ei:
            tth.status()
        assert "none.sock" in str(ei.value) and "hint:" in str(ei.value)
    finally:
        tth.configure(socket=saved, start=True)


def test_run_refuses_wrong_dtype_shape_name(daemon):
    art = tth.compile(DIGITS, "llvm")
    x = np.load(os.path.join(EXAMPLES, "digit_input.npy"))
    with pytest.raises(tth.RunError) as ei:
        art.run(image=x.astype(np.float64))
    assert ei.value.input == "image"
    assert str(ei.value).startswith("input 'image' expects float32[1, 1, 8, 8], given float64[1, 1, 8, 8]")
    with pytest.raises(tth.RunError) as ei:
        art.run(image=x.reshape(1, 8, 8))
    assert ei.value.input == "image"
    assert "input 'image' expects float32[1, 1, 8, 8], given float32[1, 8, 8]" in str(ei.value)
    with pytest.raises(tth.RunError, match="has no input 'img'"):
        art.run(img=x)
    with pytest.raises(tth.RunError, match="input 'image' of model 'digits' is not given"):
        art.run()


def test_artifact_for_another_machine_does_not_run(daemon):
    art = tth.compile(DIGITS, "c -mcpu=cortex-m55")
    assert "lib/digits.so" not in art.files
    with pytest.raises(tth.RunError, match="no host shared library"):
        art.run(image=np.zeros((1, 1, 8, 8), np.float32))


def test_external_data_by_path_and_refused_as_bytes(daemon, tmp_path):
    """docs/python.md, "Not done": a model with external data compiles by path; as bytes the
    daemon refuses it (UnsupportedError) naming the file and saying what to do"""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    wv = np.arange(4096, dtype=np.float32).reshape(64, 64) / 4096
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "ext",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
                          [numpy_helper.from_array(wv, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    path = str(tmp_path / "ext.onnx")
    onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True, location="ext.data",
                    size_threshold=0)
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(1, 64)
    np.testing.assert_allclose(tth.compile(path, "llvm").run(x=x)["y"], x @ wv, rtol=1e-5, atol=1e-5)
    with pytest.raises(tth.UnsupportedError) as ei:
        tth.compile(open(path, "rb").read(), "llvm")
    assert "ext.data" in str(ei.value) and "hint: compile the model by its path" in str(ei.value)
