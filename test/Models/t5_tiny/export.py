"""Exports the tiny T5-style test model: an encoder-decoder with T5's
RMS-style layer norm (no mean, no bias), unscaled attention scores plus a
learned relative position bias (bucketed; bidirectional in the encoder,
causal in the decoder), a padding mask, cross-attention from 8 decoder to
12 encoder positions, a gated tanh-GELU MLP, the tied embedding scaled by
d^-1/2 as the output projection, labels shifted right into the decoder's
inputs (-100 replaced by the pad id) and the cross-entropy that ignores
-100. PyTorch's TorchScript ONNX exporter, opset 17, as the shared
fixtures are exported (training mode, no constant folding, which would
fold the tied embedding's transpose into an initializer of its own).

Run with Debian's python3-torch (1.13) in this folder; it writes model.onnx,
the inputs, and PyTorch's loss, logits and gradients (reference.npz), which
test/Models/t5-tiny.test compares kiln with (../compare_with_pytorch.py). Weights are random (seed 0).
"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, "..")
from export_with_reference import export  # noqa: E402

torch.manual_seed(0)
D, H, KV, FF, V, BUCKETS, MAX_DISTANCE = 32, 4, 8, 64, 64, 8, 16


class Norm(nn.Module):
    def __init__(s):
        super().__init__()
        s.weight = nn.Parameter(1 + 0.1 * torch.randn(D))

    def forward(s, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return s.weight * (x * torch.rsqrt(variance + 1e-6))


def bucket(relative, bidirectional):
    buckets, n = 0, BUCKETS
    if bidirectional:
        n //= 2
        buckets = buckets + (relative > 0).to(torch.long) * n
        relative = torch.abs(relative)
    else:
        relative = -torch.min(relative, torch.zeros_like(relative))
    exact = n // 2
    small = relative < exact
    large = exact + (torch.log(relative.float() / exact) /
                     math.log(MAX_DISTANCE / exact) * (n - exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, n - 1))
    return buckets + torch.where(small, relative, large)


class Attention(nn.Module):
    def __init__(s, relative_bias=False, bidirectional=True):
        super().__init__()
        s.q, s.k, s.v = (nn.Linear(D, H * KV, bias=False) for _ in range(3))
        s.o = nn.Linear(H * KV, D, bias=False)
        s.bidirectional = bidirectional
        s.relative = nn.Embedding(BUCKETS, H) if relative_bias else None

    def bias(s, tq, tk):
        relative = torch.arange(tk)[None, :] - torch.arange(tq)[:, None]
        return s.relative(bucket(relative, s.bidirectional)).permute(2, 0, 1)[None]

    def forward(s, x, memory, bias):
        B, T, _ = x.shape
        heads = lambda t: t.view(B, -1, H, KV).transpose(1, 2)
        q, k, v = heads(s.q(x)), heads(s.k(memory)), heads(s.v(memory))
        scores = q @ k.transpose(-1, -2) + bias  # T5 does not scale
        weights = F.softmax(scores.float(), dim=-1).type_as(scores)
        return s.o((weights @ v).transpose(1, 2).reshape(B, T, H * KV))


class FeedForward(nn.Module):
    def __init__(s):
        super().__init__()
        s.wi_0, s.wi_1 = nn.Linear(D, FF, bias=False), nn.Linear(D, FF, bias=False)
        s.wo = nn.Linear(FF, D, bias=False)

    def forward(s, x):
        return s.wo(F.gelu(s.wi_0(x), approximate="tanh") * s.wi_1(x))


class EncoderLayer(nn.Module):
    def __init__(s, first):
        super().__init__()
        s.n1, s.attention, s.n2, s.ff = Norm(), Attention(first), Norm(), FeedForward()

    def forward(s, x, bias):
        h = s.n1(x)
        x = x + s.attention(h, h, bias)
        return x + s.ff(s.n2(x))


class DecoderLayer(nn.Module):
    def __init__(s, first):
        super().__init__()
        s.n1, s.attention = Norm(), Attention(first, bidirectional=False)
        s.n2, s.cross, s.n3, s.ff = Norm(), Attention(), Norm(), FeedForward()

    def forward(s, y, memory, self_bias, cross_bias):
        h = s.n1(y)
        y = y + s.attention(h, h, self_bias)
        y = y + s.cross(s.n2(y), memory, cross_bias)
        return y + s.ff(s.n3(y))


class Model(nn.Module):
    def __init__(s):
        super().__init__()
        s.shared = nn.Embedding(V, D)
        s.encoder = nn.ModuleList([EncoderLayer(i == 0) for i in range(2)])
        s.decoder = nn.ModuleList([DecoderLayer(i == 0) for i in range(2)])
        s.encoder_norm, s.decoder_norm = Norm(), Norm()

    def forward(s, input_ids, attention_mask, labels):
        padding = (1.0 - attention_mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        te, td = input_ids.shape[1], labels.shape[1]
        x = s.shared(input_ids)
        bias = s.encoder[0].attention.bias(te, te) + padding
        for layer in s.encoder:
            x = layer(x, bias)
        memory = s.encoder_norm(x)
        decoder_ids = torch.cat([torch.zeros_like(labels[:, :1]), labels[:, :-1]], 1)
        decoder_ids = decoder_ids.masked_fill(decoder_ids == -100, 0)
        y = s.shared(decoder_ids)
        causal = torch.triu(torch.full((td, td), torch.finfo(torch.float32).min), 1)
        self_bias = s.decoder[0].attention.bias(td, td) + causal
        for layer in s.decoder:
            y = layer(y, memory, self_bias, padding)
        logits = (s.decoder_norm(y) * D ** -0.5) @ s.shared.weight.t()
        loss = F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), ignore_index=-100)
        return loss, logits


model = Model()
input_ids = torch.randint(1, V, (2, 12))
attention_mask = torch.ones(2, 12, dtype=torch.long)
attention_mask[1, 9:] = 0
labels = torch.randint(1, V, (2, 8))
labels[1, 6:] = -100
export(model, {"input_ids": input_ids, "attention_mask": attention_mask,
               "labels": labels},
       {"input_ids": {0: "batch", 1: "source"},
        "attention_mask": {0: "batch", 1: "source"},
        "labels": {0: "batch", 1: "target"}})
