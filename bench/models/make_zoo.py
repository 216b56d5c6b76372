#!/usr/bin/python3
"""Export real architectures to ONNX with PyTorch, beside make_models.py's models.

    /usr/bin/python3 bench/models/make_zoo.py OUT_DIR [name ...]

Needs Debian's python3-torch (1.13) and python3-torchvision (0.14), python3-onnx and
python3-numpy: run it with /usr/bin/python3 (a pyenv python3 on PATH has no torch). Without
names it exports every model below; with names, only those.

Each model is written as OUT_DIR/<name>.onnx and gets a row in OUT_DIR/manifest.tsv in
make_models.py's format ("name<TAB>ONNX nodes<TAB>parameters"; parameters = the elements of the
float initializers): a row of the same name is replaced, every other row (make_models.py's)
kept. make_models.py rewrites manifest.tsv from scratch, so run it first and this script after.

Every model: batch 1, float32, static shapes, one input "input" and one output "output"; random
weights (weights=None; torchvision's own initialization) from torch.manual_seed(<fixed seed of
the model>, a CRC of its name); eval mode. Exported by torch.onnx.export with export_params and
do_constant_folding, which folds a batch norm that follows a convolution into it (the counts are
of the exported file: fewer parameters than published where batch norm was folded, more for
swin_t, whose relative position biases are gathered per block at export).

Parameters the initialization leaves constant (zero biases, LayerNorm and batch-norm scales and
shifts, ViT's zero head and class token) get 2 % noise: trained weights are not constant, the
exporter keeps equal initializers once (the counts would fall short of the architecture's), and
ViT's zero head would make every output 0, which no comparison can check. ConvNeXt's layer scale
starts at 0.1 instead of 1e-6, and each of bert_enc's layers gets its own weights (below).

Batch-norm statistics are calibrated before export, so activations stay finite and of a
realistic size (the defaults, mean 0 and variance 1, let them grow layer after layer): every
BatchNorm gets momentum=None (a cumulative average) and reset statistics, and 3 forward passes
under torch.no_grad() on a batch of 4 random inputs update them. The inputs are uniform(-1, 1),
the distribution bench/vs_ort/run.py feeds: statistics from N(0, 1) inputs do not fit inputs
of a third of that variance (Inception-v3's logits reached |969| instead of |7|, the per-channel
means of deep layers being off by many standard deviations). Only the batch norms are in train
mode for those passes, the rest of the model in eval mode, so dropout and stochastic depth do
not change what the statistics see. The torch output on the input bench/vs_ort/run.py feeds
(uniform(-1, 1), seed 1) must be finite, and its shape must be the one ONNX shape inference gives.

Models:
  torchvision classification, 224x224 (inception_v3 299x299):
    alexnet vgg11 densenet121 googlenet inception_v3 mobilenet_v3_large mobilenet_v3_small
    efficientnet_b0 resnext50_32x4d wide_resnet50_2 regnet_x_400mf regnet_y_400mf mnasnet1_0
    swin_t convnext_tiny vit_b_16
    (googlenet and inception_v3 with aux_logits=False, init_weights=True)
  torchvision segmentation, 224x224, the "out" output only (21 classes, [1, 21, 224, 224]):
    deeplabv3_mobilenet_v3_large fcn_resnet50  (weights_backbone=None, aux_loss=False)
  built from torch.nn:
    lstm2      2-layer nn.LSTM, input 128 features, 256 hidden; input [100, 1, 128] (100 steps,
               batch 1), output the last layer's sequence [100, 1, 256]
    gru2       the same with nn.GRU
    bert_enc   a BERT-base-like encoder, 6 layers instead of 12: input float embeddings
               [1, 128, 768] + a learned positional embedding, nn.TransformerEncoder (d_model 768,
               12 heads, feed-forward 3072, GELU, post-LayerNorm as BERT, batch_first), a final
               LayerNorm; a constant key padding mask (the last 8 of the 128 positions masked)
    gpt2_dec   a GPT-2-small-like decoder, 6 blocks instead of 12: input float embeddings
               [1, 128, 768] + a learned positional embedding, blocks of pre-LayerNorm causal
               self-attention written out (nn.Linear q, k, v, proj; 12 heads;
               softmax(Q K^T / sqrt(64) + causal mask) V) and an MLP 768 -> 3072 -> 768 with GELU,
               a final LayerNorm and an lm head Linear to 8192 (not 50257: a smaller file);
               output [1, 128, 8192]
    mlp_large  AlexNet's classifier alone: Linear 9216 -> 4096, ReLU, Linear 4096 -> 4096, ReLU,
               Linear 4096 -> 1000; input [1, 9216]

swin_t exports as 6,242 nodes, most of them shape arithmetic on constant shapes (Shape, Gather,
Range, Equal, Where, ... from its padding, shifts and window masks); ONNX's shape inference does
not see through it, so the output's shape is declared from torch's.

Opset 14 by default. The transformers (swin_t, convnext_tiny, vit_b_16, bert_enc, gpt2_dec) use
opset 17, where torch 1.13 exports a LayerNorm as one LayerNormalization operator (at 14 it is
ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add); tth's importer takes opsets 1 to 17.

Large models (vgg11 ~507 MiB, vit_b_16 ~330 MiB, wide_resnet50_2 ~263 MiB) exceed tthd's default
request limit of 256 MiB; bench/common/tth_bench.py's private tthd raises it.
"""
import math
import os
import sys
import tempfile
import warnings
import zlib

import numpy as np
import onnx
from onnx import TensorProto

import torch
import torch.nn as nn
import torchvision

# the exporter's advice on dynamic batch sizes and its own shape inference: these models have
# static shapes, and the file is checked below with ONNX's shape inference
warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\.onnx")
# torch._assert on shapes in torchvision's ViT, a constant for the traced shape
warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)

DEFAULT_OPSET = 14
# torch 1.13 exports LayerNorm as one LayerNormalization operator from opset 17 on
LAYERNORM_OPSET = 17


# --- models built from torch.nn ---------------------------------------------------------------

class Recurrent(nn.Module):
    """A 2-layer LSTM or GRU; returns the output sequence only (not the final states)."""

    def __init__(self, cell, features=128, hidden=256, layers=2):
        super().__init__()
        self.rnn = cell(features, hidden, num_layers=layers)

    def forward(self, x):
        return self.rnn(x)[0]


class BertEncoder(nn.Module):
    """BERT-base-like: positional add, post-LN transformer encoder layers, final LayerNorm; a
    constant key padding mask (True = masked) on the last `masked` positions."""

    def __init__(self, layers=6, d=768, heads=12, ff=3072, seq=128, masked=8):
        super().__init__()
        self.pos = nn.Parameter(torch.randn(1, seq, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.1, activation="gelu",
                                           batch_first=True, norm_first=False)
        self.encoder = nn.TransformerEncoder(layer, layers, norm=nn.LayerNorm(d),
                                             enable_nested_tensor=False)
        # nn.TransformerEncoder deep-copies `layer`: every layer would have the same weights (and
        # the exporter keeps one copy of equal initializers); each gets its own
        for layer in self.encoder.layers:
            for m in layer.modules():
                if isinstance(m, nn.MultiheadAttention):
                    m._reset_parameters()
                elif hasattr(m, "reset_parameters"):
                    m.reset_parameters()
        mask = torch.zeros(1, seq, dtype=torch.bool)
        mask[:, seq - masked:] = True
        self.register_buffer("pad_mask", mask)

    def forward(self, x):
        return self.encoder(x + self.pos, src_key_padding_mask=self.pad_mask)


class CausalSelfAttention(nn.Module):
    def __init__(self, d, heads, seq):
        super().__init__()
        self.heads, self.dh = heads, d // heads
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.proj = nn.Linear(d, d)
        # 0 on and below the diagonal, -inf above: position i sees positions 0..i
        self.register_buffer("causal", torch.triu(torch.full((seq, seq), float("-inf")), 1))

    def forward(self, x):
        b, t, d = x.shape

        def heads(y):  # [b, t, d] -> [b, heads, t, dh]
            return y.reshape(b, t, self.heads, self.dh).transpose(1, 2)

        q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.dh) + self.causal
        y = torch.softmax(scores, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class GptBlock(nn.Module):
    def __init__(self, d, heads, ff, seq):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads, seq)
        self.mlp = nn.Sequential(nn.Linear(d, ff), nn.GELU(), nn.Linear(ff, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Gpt2Decoder(nn.Module):
    """GPT-2-small-like, pre-LN; GPT-2's initialization (normal 0.02, the residual projections
    scaled by 1/sqrt(2 * blocks), zero biases)."""

    def __init__(self, blocks=6, d=768, heads=12, ff=3072, seq=128, vocab=8192):
        super().__init__()
        self.pos = nn.Parameter(torch.randn(1, seq, d) * 0.01)
        self.blocks = nn.Sequential(*[GptBlock(d, heads, ff, seq) for _ in range(blocks)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() == 2:
                std = 0.02 / math.sqrt(2 * blocks) if name.endswith(("attn.proj.weight", "mlp.2.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, x):
        return self.head(self.ln_f(self.blocks(x + self.pos)))


def mlp_large():
    return nn.Sequential(nn.Linear(9216, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                         nn.Linear(4096, 1000))


class SegmentationOut(nn.Module):
    """A torchvision segmentation model returning its "out" tensor alone."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


# --- the list ---------------------------------------------------------------------------------

tv = torchvision.models
seg = torchvision.models.segmentation
IMAGE = [1, 3, 224, 224]


def _classifier(fn, **kw):
    return lambda: fn(weights=None, **kw)


def _segmentation(fn):
    return lambda: SegmentationOut(fn(weights=None, weights_backbone=None, aux_loss=False))


# name: (constructor, input shape, opset)
MODELS = {
    "alexnet": (_classifier(tv.alexnet), IMAGE, DEFAULT_OPSET),
    "vgg11": (_classifier(tv.vgg11), IMAGE, DEFAULT_OPSET),
    "densenet121": (_classifier(tv.densenet121), IMAGE, DEFAULT_OPSET),
    "googlenet": (_classifier(tv.googlenet, aux_logits=False, init_weights=True), IMAGE,
                  DEFAULT_OPSET),
    "inception_v3": (_classifier(tv.inception_v3, aux_logits=False, init_weights=True),
                     [1, 3, 299, 299], DEFAULT_OPSET),
    "mobilenet_v3_large": (_classifier(tv.mobilenet_v3_large), IMAGE, DEFAULT_OPSET),
    "mobilenet_v3_small": (_classifier(tv.mobilenet_v3_small), IMAGE, DEFAULT_OPSET),
    "efficientnet_b0": (_classifier(tv.efficientnet_b0), IMAGE, DEFAULT_OPSET),
    "resnext50_32x4d": (_classifier(tv.resnext50_32x4d), IMAGE, DEFAULT_OPSET),
    "wide_resnet50_2": (_classifier(tv.wide_resnet50_2), IMAGE, DEFAULT_OPSET),
    "regnet_x_400mf": (_classifier(tv.regnet_x_400mf), IMAGE, DEFAULT_OPSET),
    "regnet_y_400mf": (_classifier(tv.regnet_y_400mf), IMAGE, DEFAULT_OPSET),
    "mnasnet1_0": (_classifier(tv.mnasnet1_0), IMAGE, DEFAULT_OPSET),
    "swin_t": (_classifier(tv.swin_t), IMAGE, LAYERNORM_OPSET),
    # layer scale 0.1, not torchvision's initial 1e-6 (a value of training's start): with 1e-6
    # each block adds a millionth of its branch to the residual, and the output would not show
    # a wrong branch
    "convnext_tiny": (_classifier(tv.convnext_tiny, layer_scale=0.1), IMAGE, LAYERNORM_OPSET),
    "vit_b_16": (_classifier(tv.vit_b_16), IMAGE, LAYERNORM_OPSET),
    "deeplabv3_mobilenet_v3_large": (_segmentation(seg.deeplabv3_mobilenet_v3_large), IMAGE,
                                     DEFAULT_OPSET),
    "fcn_resnet50": (_segmentation(seg.fcn_resnet50), IMAGE, DEFAULT_OPSET),
    "lstm2": (lambda: Recurrent(nn.LSTM), [100, 1, 128], DEFAULT_OPSET),
    "gru2": (lambda: Recurrent(nn.GRU), [100, 1, 128], DEFAULT_OPSET),
    "bert_enc": (BertEncoder, [1, 128, 768], LAYERNORM_OPSET),
    "gpt2_dec": (Gpt2Decoder, [1, 128, 768], LAYERNORM_OPSET),
    "mlp_large": (mlp_large, [1, 9216], DEFAULT_OPSET),
}


def seed_of(name):
    """The model's fixed seed: from its name, so adding or reordering models changes no other's
    weights."""
    return zlib.crc32(name.encode()) & 0x7fffffff


def vary_constant_parameters(model, rel=0.02):
    """Noise on every parameter the initialization leaves constant (zero biases, LayerNorm and
    batch-norm scales and shifts, ViT's zero head and class token, ConvNeXt's layer scales):
    N(0, rel * |c|), N(0, rel) where c = 0. Trained weights are not constant; equal initializers
    would be kept once by the exporter (fewer parameters than the architecture has), and a zero
    head makes every output 0 (ViT), which no comparison can check."""
    count = 0
    with torch.no_grad():
        for p in model.parameters():
            if p.numel() > 1 and bool(torch.all(p == p.reshape(-1)[0])):
                c = float(p.reshape(-1)[0])
                p.add_(torch.randn_like(p) * (rel * abs(c) if c else rel))
                count += 1
    return count


def calibrate_batch_norm(model, shape, passes=3, batch=4):
    """Running statistics from `passes` forward passes over one random batch (see the top)."""
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return 0
    model.eval()
    for m in norms:
        m.momentum = None  # cumulative average over the passes
        m.reset_running_stats()
        m.train()
    x = torch.rand([batch] + shape[1:]) * 2 - 1  # uniform(-1, 1), as run.py's inputs
    with torch.no_grad():
        for _ in range(passes):
            model(x)
    model.eval()
    return len(norms)


def build(name):
    make, shape, opset = MODELS[name]
    torch.manual_seed(seed_of(name))
    model = make()
    model.eval()
    vary_constant_parameters(model)
    norms = calibrate_batch_norm(model, shape)
    # the parameters keep requires_grad: with it (and grad enabled, as in torch.onnx.export),
    # nn.MultiheadAttention and nn.TransformerEncoderLayer take their composite path, not the
    # fused kernels of their inference fast path, which torch 1.13 cannot export
    # (aten::_native_multi_head_attention, aten::_transformer_encoder_layer_fwd)
    return model, shape, opset, norms


def export(name, out_dir):
    model, shape, opset, norms = build(name)
    example = torch.randn(shape)
    # the input bench/vs_ort/run.py feeds: uniform(-1, 1) from a seed-1 numpy generator
    bench_input = torch.from_numpy(np.random.default_rng(1).uniform(-1, 1, shape).astype(np.float32))
    with torch.no_grad():
        want = model(bench_input).numpy()
    if not np.all(np.isfinite(want)):
        raise RuntimeError("%s: the torch output has NaN or inf" % name)

    path = os.path.join(out_dir, name + ".onnx")
    fd, tmp = tempfile.mkstemp(prefix=name + ".", suffix=".onnx.tmp", dir=out_dir)
    os.close(fd)
    try:
        torch.onnx.export(model, (example,), tmp, export_params=True, opset_version=opset,
                          do_constant_folding=True, input_names=["input"],
                          output_names=["output"])
        m = onnx.load(tmp)
        # The shapes are static, but the exporter's own inference can lose them in the shape
        # arithmetic it writes out (Shape, Gather, Range, ... in swin_t's shifted windows) and
        # leave the output's dimensions symbolic: declare torch's output shape.
        declared = m.graph.output[0].type.tensor_type.shape.dim
        if any(not d.HasField("dim_value") for d in declared):
            for d, size in zip(declared, want.shape):
                d.dim_value = size
            onnx.save(m, tmp)
        onnx.checker.check_model(m)
        inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True, data_prop=True)
        (inp,), (out,) = inferred.graph.input, inferred.graph.output
        dims = lambda v: [d.dim_value if d.HasField("dim_value") else d.dim_param
                          for d in v.type.tensor_type.shape.dim]
        for v in (inp, out):
            if v.type.tensor_type.elem_type != TensorProto.FLOAT:
                raise RuntimeError("%s: %s is not float32" % (name, v.name))
        if dims(inp) != list(shape) or dims(out) != list(want.shape):
            raise RuntimeError("%s: ONNX input %s output %s, torch input %s output %s" % (
                name, dims(inp), dims(out), list(shape), list(want.shape)))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)

    nodes = len(m.graph.node)
    params = sum(int(np.prod(t.dims)) for t in m.graph.initializer
                 if t.data_type == TensorProto.FLOAT)
    print("%-28s opset %d %6d nodes %11d parameters %7.1f MiB  output %s |max| %.3g std %.3g%s  %s" % (
        name, opset, nodes, params, os.path.getsize(path) / 2**20, list(want.shape),
        float(np.max(np.abs(want))), float(np.std(want)),
        ", %d batch norms calibrated" % norms if norms else "", path))
    sys.stdout.flush()
    return nodes, params


def update_manifest(out_dir, rows):
    """Replace or append the rows {name: (nodes, params)}, keeping every other row."""
    path = os.path.join(out_dir, "manifest.tsv")
    lines = []
    if os.path.exists(path):
        with open(path) as f:
            lines = [line.rstrip("\n") for line in f if line.strip()]
    done = set()
    for i, line in enumerate(lines):
        name = line.split("\t")[0]
        if name in rows:
            lines[i] = "%s\t%d\t%d" % (name, *rows[name])
            done.add(name)
    lines += ["%s\t%d\t%d" % (name, *rows[name]) for name in rows if name not in done]
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.writelines(line + "\n" for line in lines)
    os.replace(tmp, path)


def main():
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        sys.exit("usage: make_zoo.py OUT_DIR [name ...]\nmodels: " + " ".join(MODELS))
    out = sys.argv[1]
    names = sys.argv[2:] or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        sys.exit("make_zoo.py: unknown model(s) %s; models: %s" % (" ".join(unknown), " ".join(MODELS)))
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    failed = []
    for name in names:
        try:
            rows = {name: export(name, out)}
        except Exception as e:  # one model's failure does not stop the others
            print("%-28s FAILED: %s: %s" % (name, type(e).__name__, str(e).strip().splitlines()[-1]
                                            if str(e).strip() else ""), file=sys.stderr)
            failed.append(name)
            continue
        update_manifest(out, rows)  # after each model, so an interrupted run keeps what it made
    if failed:
        sys.exit("make_zoo.py: failed: %s" % " ".join(failed))


if __name__ == "__main__":
    main()
