"""Exports the quantization-aware-training test model: a one-layer
Transformer encoder (token and position embeddings, self-attention, a GELU
MLP, layer norms) and a classifier, prepared by torch.ao.quantization for
QAT: every linear layer's weight fake-quantized per output channel to int8
(symmetric), every linear layer's output per tensor to uint8. The
observers calibrate the scales on a few batches and are then frozen, as in
QAT's last phase, so the exported QuantizeLinear/DequantizeLinear pairs
hold the scales PyTorch trains with. PyTorch's TorchScript ONNX exporter,
opset 17, training mode (../export_with_reference.py).

Run with Debian's python3-torch (1.13) in this folder; it writes model.onnx,
the inputs, and PyTorch's loss, logits and gradients (reference.npz), which
test/Models/qat-tiny.test compares kiln with (../compare_with_pytorch.py).
Weights are random (seed 0).
"""
import sys

import torch
import torch.ao.quantization as tq
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, "..")
from export_with_reference import export  # noqa: E402

torch.manual_seed(0)
V, T, D, HEADS, C = 24, 6, 16, 2, 3


class Model(nn.Module):
    def __init__(s):
        super().__init__()
        s.embed = nn.Embedding(V, D)
        s.position = nn.Parameter(0.1 * torch.randn(T, D))
        s.norm1, s.norm2 = nn.LayerNorm(D), nn.LayerNorm(D)
        s.qkv = nn.Linear(D, 3 * D)
        s.out = nn.Linear(D, D)
        s.up, s.down = nn.Linear(D, 2 * D), nn.Linear(2 * D, D)
        s.cls = nn.Linear(D, C)

    def forward(s, input_ids, labels):
        batch = input_ids.shape[0]
        x = s.embed(input_ids) + s.position
        q, k, v = s.qkv(s.norm1(x)).split(D, dim=-1)
        heads = lambda t: t.reshape(batch, T, HEADS, D // HEADS).transpose(1, 2)
        scores = heads(q) @ heads(k).transpose(-1, -2) / (D // HEADS) ** 0.5
        mixed = (scores.softmax(-1) @ heads(v)).transpose(1, 2).reshape(batch, T, D)
        x = x + s.out(mixed)
        x = x + s.down(F.gelu(s.up(s.norm2(x))))
        logits = s.cls(x.mean(1))
        return F.cross_entropy(logits, labels), logits


model = Model()
with torch.no_grad():  # norms unlike each other and unlike their defaults
    for norm in (model.norm1, model.norm2):
        norm.weight.normal_(1.0, 0.1)
        norm.bias.normal_(0.0, 0.1)
int8_weights = tq.FakeQuantize.with_args(
    observer=tq.MovingAveragePerChannelMinMaxObserver, quant_min=-128,
    quant_max=127, dtype=torch.qint8, qscheme=torch.per_channel_symmetric)
uint8_outputs = tq.FakeQuantize.with_args(
    observer=tq.MovingAverageMinMaxObserver, quant_min=0, quant_max=255,
    dtype=torch.quint8)
for linear in (model.qkv, model.out, model.up, model.down, model.cls):
    linear.qconfig = tq.QConfig(activation=uint8_outputs, weight=int8_weights)
model.train()
tq.prepare_qat(model, inplace=True)
for _ in range(4):
    model(torch.randint(0, V, (4, T)), torch.randint(0, C, (4,)))
model.apply(tq.disable_observer)

export(model, {"input_ids": torch.randint(0, V, (2, T)),
               "labels": torch.tensor([1, 2])},
       {"input_ids": {0: "batch"}, "labels": {0: "batch"}})
