#!/usr/bin/python3
"""Real models exported by PyTorch (Debian's python3-torch), as ONNX test cases whose expected
outputs are PyTorch's own: a two-layer bidirectional LSTM and a GRU sequence model, a small
transformer encoder, and a scripted model with a data-dependent `if` (exported as an ONNX If).

    /usr/bin/python3 tests/daemon/frontend/torch_models.py OUT_DIR

writes OUT_DIR/test_<name>/{model.onnx, test_data_set_0/{input,output}_N.pb}. The cases in
tests/daemon/frontend/torch_models/ were written by it (python3-torch 1.13, seed 7); the tests run
them through tth-conformance for `c` and `llvm` (tests/conformance/meson.build) without needing
torch. Run it again to refresh them after changing a model here.
"""
import os
import sys


def save(root, name, model, inputs, input_names, output_names, script=False, opset=13):
    import torch
    from onnx import numpy_helper
    d = os.path.join(root, "test_" + name)
    ds = os.path.join(d, "test_data_set_0")
    os.makedirs(ds, exist_ok=True)
    model.eval()
    with torch.no_grad():
        outs = model(*inputs)
    if not isinstance(outs, tuple):
        outs = (outs,)
    m = torch.jit.script(model) if script else model
    torch.onnx.export(m, tuple(inputs), os.path.join(d, "model.onnx"), input_names=input_names,
                      output_names=output_names, opset_version=opset, do_constant_folding=True)
    for i, (n, x) in enumerate(zip(input_names, inputs)):
        with open(os.path.join(ds, "input_%d.pb" % i), "wb") as fh:
            fh.write(numpy_helper.from_array(x.numpy(), n).SerializeToString())
    for i, (n, y) in enumerate(zip(output_names, outs)):
        with open(os.path.join(ds, "output_%d.pb" % i), "wb") as fh:
            fh.write(numpy_helper.from_array(y.numpy(), n).SerializeToString())


def main():
    import torch
    from torch import nn
    root = sys.argv[1]
    torch.manual_seed(7)

    class Lstm(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(8, 16, num_layers=2, bidirectional=True)
            self.head = nn.Linear(32, 4)

        def forward(self, x):
            y, _ = self.rnn(x)
            return self.head(y)

    class Gru(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.GRU(8, 12, batch_first=True)
            self.head = nn.Linear(12, 3)

        def forward(self, x):
            y, h = self.rnn(x)
            return self.head(y[:, -1, :]), h

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True)
            self.enc = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)

        def forward(self, x):
            return self.enc(x)

    class Branchy(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(6, 5)
            self.b = nn.Linear(6, 5)

        def forward(self, x):
            if bool(x.sum() > 0):
                y = torch.relu(self.a(x))
            else:
                y = torch.sigmoid(self.b(x)) * 2.0
            return y

    save(root, "torch_lstm", Lstm(), [torch.randn(7, 1, 8)], ["x"], ["y"])
    save(root, "torch_gru", Gru(), [torch.randn(1, 9, 8)], ["x"], ["y", "h"])
    save(root, "torch_transformer_encoder", Encoder(), [torch.randn(1, 10, 32)], ["x"], ["y"])
    save(root, "torch_if_positive", Branchy(), [torch.randn(2, 6) + 0.5], ["x"], ["y"], script=True)
    save(root, "torch_if_negative", Branchy(), [torch.randn(2, 6) - 0.5], ["x"], ["y"], script=True)


if __name__ == "__main__":
    main()
