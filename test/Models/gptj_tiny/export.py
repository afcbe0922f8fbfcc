"""Exports the tiny GPT-J-style test model: rotary embeddings on the first 4
dimensions of each head with interleaved pairs (rotate_every_two: stack
and flatten of the odd and even elements), sin/cos computed in the graph
and repeat_interleave'd, scores in f32 masked by where(tril, w,
masked_bias) with the scalar buffer masked_bias = -1e9 (which PyTorch does
not train) and then divided by sqrt(d), the parallel attention and tanh-GELU
MLP from one layer norm, an untied output projection with bias. PyTorch's
TorchScript ONNX exporter, opset 17, as the shared fixtures are exported
(../export_with_reference.py).

Run with Debian's python3-torch (1.13) in this folder; it writes model.onnx,
the inputs, and PyTorch's loss, logits and gradients (reference.npz), which
test/Models/gptj-tiny.test compares kiln with (../compare_with_pytorch.py).
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
ROTARY = 4


def rotate_every_two(x):
    x1 = x[:, :, :, ::2]
    x2 = x[:, :, :, 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def sin_cos():
    inv = 1.0 / (10000 ** (torch.arange(0, ROTARY, 2).float() / ROTARY))
    angles = torch.einsum("i,j->ij", torch.arange(T).float(), inv)
    return torch.sin(angles), torch.cos(angles)


def rotate(x, sin, cos):
    rotated, passed = x[..., :ROTARY], x[..., ROTARY:]
    rotated = rotated * cos + rotate_every_two(rotated) * sin
    return torch.cat([rotated, passed], -1).permute(0, 2, 1, 3)


class Layer(nn.Module):
    def __init__(s):
        super().__init__()
        s.ln = nn.LayerNorm(D)
        s.q, s.k, s.v, s.o = (nn.Linear(D, D, bias=False) for _ in range(4))
        s.fc_in, s.fc_out = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
        s.register_buffer("masked_bias", torch.tensor(-1e9))

    def forward(s, x):
        B = x.shape[0]
        h = s.ln(x)
        sin, cos = sin_cos()
        sin = torch.repeat_interleave(sin[None, :, None, :], 2, 3)
        cos = torch.repeat_interleave(cos[None, :, None, :], 2, 3)
        q = rotate(s.q(h).view(B, T, H, HD), sin, cos)
        k = rotate(s.k(h).view(B, T, H, HD), sin, cos)
        v = s.v(h).view(B, T, H, HD).permute(0, 2, 1, 3)
        w = torch.matmul(q.float(), k.float().transpose(-1, -2))
        causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
        w = torch.where(causal, w, s.masked_bias) / math.sqrt(HD)
        context = (F.softmax(w, dim=-1) @ v).permute(0, 2, 1, 3).reshape(B, T, D)
        return x + s.o(context) + s.fc_out(F.gelu(s.fc_in(h), approximate="tanh"))


class Model(nn.Module):
    def __init__(s):
        super().__init__()
        s.wte = nn.Embedding(V, D)
        s.layers = nn.ModuleList([Layer() for _ in range(2)])
        s.ln_f, s.lm_head = nn.LayerNorm(D), nn.Linear(D, V)
        for p in s.parameters():  # norms away from their defaults
            if p.dim() == 1:
                p.data += 0.1 * torch.randn_like(p)

    def forward(s, input_ids, labels):
        x = s.wte(input_ids)
        for layer in s.layers:
            x = layer(x)
        logits = s.lm_head(s.ln_f(x)).float()
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1))
        return loss, logits


ids = torch.randint(0, V, (2, T))
export(Model(), {"input_ids": ids, "labels": ids.clone()},
       {"input_ids": {0: "batch"}, "labels": {0: "batch"}})
