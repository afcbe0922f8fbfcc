"""Exports the tiny Gemma 2-style test model: attention logits soft-capped
(tanh(s / c) * c on the scaled scores, before the mask), layers that
alternate a sliding window of 4 positions and global causal attention, the
masks built as Hugging Face's eager Gemma 2 builds them without padding,
grouped-query heads, rotary embeddings, RMS norms scaling by 1 + weight
before and after each block, a tanh-GELU-gated MLP, the embedding scaled
by sqrt(d) and tied to the output, and the final logits soft-capped too.
PyTorch's TorchScript ONNX exporter, opset 17, as the shared fixtures are
exported (../export_with_reference.py).

Run with Debian's python3-torch (1.13) in this folder; it writes model.onnx,
the inputs, and PyTorch's loss, logits and gradients (reference.npz), which
test/Models/gemma2-tiny.test compares kiln with (../compare_with_pytorch.py).
Weights are random (seed 0).
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, "..")
from export_with_reference import export  # noqa: E402

torch.manual_seed(0)
D, H, KV, V, T, W = 32, 4, 2, 48, 12, 4
HD = D // H
ATTENTION_CAP, FINAL_CAP = 5.0, 3.0


class RMSNorm(nn.Module):
    def __init__(s):
        super().__init__()
        s.weight = nn.Parameter(0.1 * torch.randn(D))

    def forward(s, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * (1.0 + s.weight)


def rotate_half(x):
    return torch.cat((-x[..., HD // 2:], x[..., : HD // 2]), dim=-1)


class Layer(nn.Module):
    def __init__(s, sliding):
        super().__init__()
        s.sliding = sliding
        s.norms = nn.ModuleList([RMSNorm() for _ in range(4)])
        s.q = nn.Linear(D, H * HD, bias=False)
        s.k = nn.Linear(D, KV * HD, bias=False)
        s.v = nn.Linear(D, KV * HD, bias=False)
        s.o = nn.Linear(D, D, bias=False)
        s.gate = nn.Linear(D, 2 * D, bias=False)
        s.up = nn.Linear(D, 2 * D, bias=False)
        s.down = nn.Linear(2 * D, D, bias=False)

    def forward(s, x, cos, sin, causal, sliding):
        B = x.shape[0]
        h = s.norms[0](x)
        q = s.q(h).view(B, T, H, HD).transpose(1, 2)
        k = s.k(h).view(B, T, KV, HD).transpose(1, 2)
        v = s.v(h).view(B, T, KV, HD).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        repeat = lambda t: t[:, :, None].expand(B, KV, H // KV, T, HD).reshape(B, H, T, HD)
        k, v = repeat(k), repeat(v)
        scores = q @ k.transpose(2, 3) * HD ** -0.5
        scores = torch.tanh(scores / ATTENTION_CAP) * ATTENTION_CAP
        scores = scores + (sliding if s.sliding else causal)
        p = F.softmax(scores, dim=-1, dtype=torch.float32)
        x = x + s.norms[1](s.o((p @ v).transpose(1, 2).reshape(B, T, D)))
        h = s.norms[2](x)
        h = s.down(F.gelu(s.gate(h), approximate="tanh") * s.up(h))
        return x + s.norms[3](h)


class Model(nn.Module):
    def __init__(s):
        super().__init__()
        s.embedding = nn.Embedding(V, D)
        s.layers = nn.ModuleList([Layer(sliding=i % 2 == 0) for i in range(2)])
        s.norm = RMSNorm()
        inv_freq = 1.0 / (10000 ** (torch.arange(0, HD, 2).float() / HD))
        s.register_buffer("inv_freq", inv_freq)

    def forward(s, input_ids, labels):
        lowest = torch.finfo(torch.float32).min
        causal = torch.full((T, T), lowest).triu(1)[None, None]
        window = torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-W)
        sliding = causal.masked_fill(window[None, None], lowest)
        angles = torch.arange(T).float()[:, None] * s.inv_freq[None]
        angles = torch.cat((angles, angles), dim=-1)
        cos, sin = angles.cos(), angles.sin()
        x = s.embedding(input_ids) * D ** 0.5
        for layer in s.layers:
            x = layer(x, cos, sin, causal, sliding)
        logits = s.norm(x) @ s.embedding.weight.t()
        logits = torch.tanh(logits / FINAL_CAP) * FINAL_CAP
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1))
        return loss, logits


model = Model()
input_ids = torch.randint(0, V, (2, T))
export(model, {"input_ids": input_ids, "labels": input_ids.clone()},
       {"input_ids": {0: "batch"}, "labels": {0: "batch"}})
