"""Exports the tiny Transformer-XL-style test model (relative positional
attention as Transformer-XL and XLNet write it): queries, keys and values
in [T, B, H, D] (time first), a sinusoidal relative position embedding
projected by its own key weights, the content and position terms by
einsum with the trained biases r_w_bias and r_r_bias added to the queries,
the relative shift (a zero column concatenated, the result viewed with
one more row, the first row sliced off), the causal mask by masked_fill
with -inf, the softmax over the key axis (dim 1 of [Tq, Tk, B, H]), and
the context by einsum; post-LN layers, an adaptive-softmax-free output
projection, the next-token loss. PyTorch's TorchScript ONNX exporter,
opset 17, in training mode (../export_with_reference.py).

Run with Debian's python3-torch (1.13) in this folder; it writes model.onnx,
the inputs, and PyTorch's loss, logits and gradients (reference.npz), which
test/Models/transfoxl-tiny.test compares kiln with (../compare_with_pytorch.py).
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
D, H, V, T = 32, 4, 40, 10
HD = D // H


def relative_shift(x):
    zero_pad = torch.zeros((x.size(0), 1) + x.size()[2:], dtype=x.dtype)
    padded = torch.cat([zero_pad, x], dim=1)
    padded = padded.view((x.size(1) + 1, x.size(0)) + x.size()[2:])
    return padded[1:].view_as(x)


class Layer(nn.Module):
    def __init__(s):
        super().__init__()
        s.qkv = nn.Linear(D, 3 * D, bias=False)
        s.r = nn.Linear(D, D, bias=False)
        s.out = nn.Linear(D, D, bias=False)
        s.r_w_bias = nn.Parameter(0.1 * torch.randn(H, HD))
        s.r_r_bias = nn.Parameter(0.1 * torch.randn(H, HD))
        s.attention_norm = nn.LayerNorm(D)
        s.ffn = nn.Sequential(nn.Linear(D, 2 * D), nn.ReLU(), nn.Linear(2 * D, D))
        s.ffn_norm = nn.LayerNorm(D)

    def forward(s, x, positions, causal):
        B = x.shape[1]
        q, k, v = s.qkv(x).view(T, B, 3, H, HD).unbind(2)
        r = s.r(positions).view(T, H, HD)
        content = torch.einsum("ibnd,jbnd->ijbn", q + s.r_w_bias, k)
        position = relative_shift(torch.einsum("ibnd,jnd->ijbn", q + s.r_r_bias, r))
        scores = (content + position) * HD ** -0.5
        scores = scores.masked_fill(causal[:, :, None, None], float("-inf"))
        probabilities = F.softmax(scores, dim=1)
        context = torch.einsum("ijbn,jbnd->ibnd", probabilities, v).reshape(T, B, D)
        x = s.attention_norm(x + s.out(context))
        return s.ffn_norm(x + s.ffn(x))


class Model(nn.Module):
    def __init__(s):
        super().__init__()
        s.embedding = nn.Embedding(V, D)
        s.layers = nn.ModuleList([Layer() for _ in range(2)])
        s.head = nn.Linear(D, V)
        frequencies = 1 / (10000 ** (torch.arange(0.0, D, 2.0) / D))
        angles = torch.arange(T - 1, -1, -1.0)[:, None] * frequencies[None]
        s.register_buffer("pos_emb", torch.cat([angles.sin(), angles.cos()], dim=-1))
        s.register_buffer("causal", torch.triu(torch.ones(T, T, dtype=torch.bool), 1))
        for p in s.parameters():  # norms and biases away from their defaults
            if p.dim() == 1:
                p.data += 0.1 * torch.randn_like(p)

    def forward(s, input_ids, labels):
        x = s.embedding(input_ids).transpose(0, 1) * math.sqrt(D)
        for layer in s.layers:
            x = layer(x, s.pos_emb, s.causal)
        logits = s.head(x).transpose(0, 1)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1))
        return loss, logits


input_ids = torch.randint(0, V, (2, T))
export(Model(), {"input_ids": input_ids, "labels": input_ids.clone()},
       {name: {0: "batch"} for name in ["input_ids", "labels"]})
