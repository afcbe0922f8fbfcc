"""Exports the tiny ModernBERT-style test model: an encoder whose layers
alternate global attention and local attention over a band of 2 positions
either side, the masks built as Hugging Face's ModernBERT builds them (the
padding mask as an additive finfo.min mask, the local layers' copy filled
with finfo.min outside the band by masked_fill), pre-norm layers with bias-
free LayerNorms and projections, a GeGLU MLP, and a masked-language-model
loss over masked tokens (id 0 is [MASK]) that ignores the padding and the
unmasked positions. PyTorch's
TorchScript ONNX exporter, opset 17, as the shared fixtures are exported
(../export_with_reference.py).

Run with Debian's python3-torch (1.13) in this folder; it writes model.onnx,
the inputs, and PyTorch's loss, logits and gradients (reference.npz), which
test/Models/modernbert-tiny.test compares kiln with
(../compare_with_pytorch.py). Weights are random (seed 0).
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, "..")
from export_with_reference import export  # noqa: E402

torch.manual_seed(0)
D, H, V, T, WINDOW = 32, 4, 48, 12, 4
HD = D // H


class Norm(nn.Module):
    """LayerNorm without a bias, as ModernBERT's (PyTorch 1.13's
    nn.LayerNorm always has one)."""

    def __init__(s):
        super().__init__()
        s.weight = nn.Parameter(1.0 + 0.1 * torch.randn(D))

    def forward(s, x):
        return F.layer_norm(x, (D,), s.weight)


class Layer(nn.Module):
    def __init__(s, local):
        super().__init__()
        s.local = local
        s.n1, s.n2 = Norm(), Norm()
        s.qkv = nn.Linear(D, 3 * D, bias=False)
        s.o = nn.Linear(D, D, bias=False)
        s.wi = nn.Linear(D, 4 * D, bias=False)
        s.wo = nn.Linear(2 * D, D, bias=False)

    def forward(s, x, global_mask, local_mask):
        B = x.shape[0]
        q, k, v = s.qkv(s.n1(x)).view(B, T, 3, H, HD).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) * HD ** -0.5
        scores = scores + (local_mask if s.local else global_mask)
        p = F.softmax(scores, dim=-1)
        x = x + s.o((p @ v).transpose(1, 2).reshape(B, T, D))
        a, g = s.wi(s.n2(x)).chunk(2, dim=-1)
        return x + s.wo(F.gelu(a) * g)


class Model(nn.Module):
    def __init__(s):
        super().__init__()
        s.embedding = nn.Embedding(V, D)
        s.layers = nn.ModuleList([Layer(local=i % 2 == 1) for i in range(3)])
        s.final = Norm()

    def forward(s, input_ids, attention_mask, labels):
        lowest = torch.finfo(torch.float32).min
        global_mask = (1.0 - attention_mask[:, None, None, :].float()) * lowest
        global_mask = global_mask.expand(-1, 1, T, T)
        rows = torch.arange(T)[None]
        window = ((rows - rows.T).abs() <= WINDOW // 2)[None, None]
        local_mask = global_mask.masked_fill(window.logical_not(), lowest)
        x = s.embedding(input_ids)
        for layer in s.layers:
            x = layer(x, global_mask, local_mask)
        logits = s.final(x) @ s.embedding.weight.t()
        loss = F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1))
        return loss, logits


model = Model()
input_ids = torch.randint(0, V, (2, T))
attention_mask = torch.ones(2, T, dtype=torch.long)
attention_mask[1, 7:] = 0  # right padding: rows 10 and 11 see only padding
labels = torch.full((2, T), -100)
labels[0, [1, 4, 9]] = input_ids[0, [1, 4, 9]]
labels[1, [0, 3, 6]] = input_ids[1, [0, 3, 6]]
input_ids = input_ids.masked_fill(labels != -100, 0)  # 0 is [MASK]
export(model, {"input_ids": input_ids, "attention_mask": attention_mask,
               "labels": labels},
       {"input_ids": {0: "batch"}, "attention_mask": {0: "batch"},
        "labels": {0: "batch"}})
