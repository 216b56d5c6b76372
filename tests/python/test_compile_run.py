"""Compile and run: the digits example model against its expected output, a small torch.nn model
against torch's own output, the four forms of a model, the artifact's files and metadata."""
import os

import numpy as np
import pytest

import tth
from conftest import EXAMPLES

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")

DIGITS = os.path.join(EXAMPLES, "digits.onnx")


def digits_io():
    return np.load(os.path.join(EXAMPLES, "digit_input.npy")), np.load(os.path.join(EXAMPLES, "digit_expected.npy"))


class SmallNet(torch.nn.Module):
    """conv, relu, strided conv, relu, a dense layer"""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 16, 3, padding=1, stride=2)
        self.fc = torch.nn.Linear(16 * 4 * 4, 5)

    def forward(self, x):
        x = torch.relu(self.c1(x))
        x = torch.relu(self.c2(x))
        return self.fc(x.flatten(1))


def test_digits_compile_and_run(daemon):
    art = tth.compile(DIGITS, "llvm")
    x, want = digits_io()
    assert [(t.name, t.dtype, t.shape) for t in art.inputs] == [("image", "float32", (1, 1, 8, 8))]
    assert [(t.name, t.dtype, t.shape) for t in art.outputs] == [("probabilities", "float32", (1, 10))]
    got = art.run(image=x)["probabilities"]
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-4)
    assert int(np.argmax(got)) == int(np.argmax(want))
    assert art.metadata["model"] == "digits"
    assert "lib/digits.so" in art.files
    assert art.cache in ("hit", "miss")
    # run_many: each batch its own answer
    outs = art.run_many([{"image": x}, {"image": np.zeros_like(x)}])
    np.testing.assert_allclose(outs[0]["probabilities"], want, atol=1e-5, rtol=1e-4)
    assert not np.allclose(outs[1]["probabilities"], want)


def test_c_kind_runs_too(daemon):
    art = tth.compile(DIGITS, "c")
    x, want = digits_io()
    np.testing.assert_allclose(art.run(image=x)["probabilities"], want, atol=1e-5, rtol=1e-4)


def test_torch_module_against_torch(daemon):
    torch.manual_seed(0)
    net = SmallNet().eval()
    x = torch.randn(1, 3, 8, 8)
    art = tth.compile(net, "llvm", example_inputs=x)
    assert art.name == "smallnet"
    want = net(x).detach().numpy()
    got = art.run(input=x.numpy())["output"]
    assert got.shape == (1, 5)
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)


def test_model_as_bytes_path_modelproto_module(daemon, tmp_path):
    torch.manual_seed(1)
    net = SmallNet().eval()
    x = torch.randn(1, 3, 8, 8)
    from_module = tth.compile(net, "llvm", example_inputs=x, name="net")
    data = from_module.result  # the compile's answer
    assert data["metadata"]["model"] == "net"
    import io
    buf = io.BytesIO()
    torch.onnx.export(net, (x,), buf, input_names=["input"], output_names=["output"])
    raw = buf.getvalue()
    path = tmp_path / "net.onnx"
    path.write_bytes(raw)
    proto = onnx.load_from_string(raw)
    want = net(x).detach().numpy()
    for model in (raw, str(path), path, proto):
        art = tth.compile(model, "llvm", name="net")
        np.testing.assert_allclose(art.run(input=x.numpy())["output"], want, atol=1e-4, rtol=1e-4,
                                   err_msg="model given as %s" % type(model).__name__)
    # the default name: the file's stem, the graph's name
    assert tth.compile(str(path), "llvm").name == "net"
    assert proto.graph.name and tth.compile(proto, "llvm").name == proto.graph.name


def test_save_and_load(daemon, tmp_path):
    art = tth.compile(DIGITS, "llvm")
    p = art.save(str(tmp_path / "digits.tar"))
    again = tth.Artifact.load(p)
    assert again.data == art.data
    x, want = digits_io()
    np.testing.assert_allclose(again.run(image=x)["probabilities"], want, atol=1e-5, rtol=1e-4)


def test_explain_files(daemon):
    art = tth.compile(DIGITS, "llvm", explain=True)
    assert any(f.startswith("explain/") for f in art.files), art.files


def test_bind_and_input_shape_options(daemon):
    """bind makes an input a constant (it leaves the inputs); input_shape for an input left open"""
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "addg",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["n", 3]),
                           helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    b = np.array([[1, 2, 3]], np.float32)
    art = tth.compile(m, "llvm", bind={"b": b}, input_shape={"a": [2, 3]})
    assert [t.name for t in art.inputs] == ["a"]
    assert art.inputs[0].shape == (2, 3)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(art.run(a=a)["y"], a + b)


def test_benchmark_and_profile(daemon):
    art = tth.compile(DIGITS, "llvm", profile=True)
    x, want = digits_io()
    np.testing.assert_allclose(art.run(image=x)["probabilities"], want, atol=1e-5, rtol=1e-4)
    b = art.benchmark(5, image=x)
    assert b["runs"] == 5 and 0 < b["min"] <= b["median"]
    rows = art.profile(repeat=5, image=x)
    assert len(rows) == len(art.metadata["profile"]["calls"]) > 0
    assert all(r["median_us"] >= 0 for r in rows) and sum(r["median_us"] for r in rows) > 0
    assert abs(sum(r["share"] for r in rows) - 1) < 1e-6
    assert rows == sorted(rows, key=lambda r: -r["median_us"])
    plain = tth.compile(DIGITS, "llvm")
    with pytest.raises(tth.RunError, match="compiled without profiling"):
        plain.profile()
