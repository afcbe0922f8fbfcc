"""Exports the tiny Falcon-style test model: one fused projection to four
query heads and a single key/value head ([B, T, H + 2, d], split by
slicing), rotary embeddings computed in the graph, multi-query attention
whose one key/value head the products broadcast over the query heads, a
causal triu(-inf) mask, the parallel attention and MLP from one layer
norm, no biases, the tied embedding as the output projection. PyTorch's
TorchScript ONNX exporter, opset 17, as the shared fixtures are exported
(../export_with_reference.py).

Run with Debian's python3-torch (1.13) in this folder; it writes model.onnx,
the inputs, and PyTorch's loss, logits and gradients (reference.npz), which
test/Models/falcon-tiny.test compares kiln with (../compare_with_pytorch.py).
Weights are random (seed 0).
"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, "..")
from export_with_reference import export  # noqa: E402

torch.manual_seed(0)
D, H, V, T = 32, 4, 64, 10
HD = D // H


def rotate_half(x):
    x1, x2 = x[..., :HD // 2], x[..., HD // 2:]
    return torch.cat((-x2, x1), -1)


class Layer(nn.Module):
    def __init__(s):
        super().__init__()
        s.ln = nn.LayerNorm(D)
        s.qkv = nn.Linear(D, D + 2 * HD, bias=False)
        s.dense = nn.Linear(D, D, bias=False)
        s.up, s.down = nn.Linear(D, 4 * D, bias=False), nn.Linear(4 * D, D, bias=False)

    def forward(s, x, cos, sin):
        B = x.shape[0]
        h = s.ln(x)
        fused = s.qkv(h).view(B, T, H + 2, HD)
        q = fused[:, :, :-2].transpose(1, 2)
        k = fused[:, :, [-2]].transpose(1, 2)
        v = fused[:, :, [-1]].transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        w = (q @ k.transpose(-1, -2)) / math.sqrt(HD)
        w = w + torch.full((T, T), float("-inf")).triu(1)
        context = (F.softmax(w, -1) @ v).transpose(1, 2).reshape(B, T, D)
        return x + s.dense(context) + s.down(F.gelu(s.up(h)))


class Model(nn.Module):
    def __init__(s):
        super().__init__()
        s.embed = nn.Embedding(V, D)
        s.layers = nn.ModuleList([Layer() for _ in range(2)])
        s.ln_f = nn.LayerNorm(D)
        for p in s.parameters():  # norms away from their defaults
            if p.dim() == 1:
                p.data += 0.1 * torch.randn_like(p)

    def forward(s, input_ids, labels):
        inv = 1.0 / (10000 ** (torch.arange(0, HD, 2).float() / HD))
        angles = torch.outer(torch.arange(T).float(), inv)
        angles = torch.cat((angles, angles), -1)
        x = s.embed(input_ids)
        for layer in s.layers:
            x = layer(x, angles.cos(), angles.sin())
        logits = s.ln_f(x) @ s.embed.weight.t()
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1))
        return loss, logits


ids = torch.randint(0, V, (2, T))
export(Model(), {"input_ids": ids, "labels": ids.clone()},
       {"input_ids": {0: "batch"}, "labels": {0: "batch"}})
