"""Exports the tiny DeBERTa-style test model: disentangled attention whose
scores add, to the content-to-content product, content-to-position and
position-to-content terms gathered from products with a learned relative
position embedding (relative distances clamped to [-4, 3]) through
projections of their own, all divided by sqrt(3 d); a padding mask on rows
and columns by masked_fill(finfo.min); post-norm layers and a classifier on
the first token. PyTorch's TorchScript ONNX exporter, opset 17, as the
shared fixtures are exported (../export_with_reference.py).

Run with Debian's python3-torch (1.13) in this folder; it writes model.onnx,
the inputs, and PyTorch's loss, logits and gradients (reference.npz), which
test/Models/deberta-tiny.test compares kiln with (../compare_with_pytorch.py).
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
D, H, V, T, K = 32, 4, 64, 10, 4
HD = D // H


class Layer(nn.Module):
    def __init__(s):
        super().__init__()
        s.q, s.k, s.v, s.o = (nn.Linear(D, D) for _ in range(4))
        s.pos_k, s.pos_q = nn.Linear(D, D), nn.Linear(D, D, bias=False)
        s.ln1, s.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        s.f1, s.f2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

    def forward(s, x, relative, distance, mask):
        B = x.shape[0]
        heads = lambda t: t.view(B, -1, H, HD).permute(0, 2, 1, 3)
        q, k, v = heads(s.q(x)), heads(s.k(x)), heads(s.v(x))
        scale = math.sqrt(HD * 3)
        pk = s.pos_k(relative).view(2 * K, H, HD).permute(1, 0, 2)
        pq = s.pos_q(relative).view(2 * K, H, HD).permute(1, 0, 2)
        c2p = q @ pk.transpose(-1, -2)[None]
        c2p = torch.gather(c2p, -1, distance[None, None].expand(B, H, T, T))
        p2c = k @ pq.transpose(-1, -2)[None]
        p2c = torch.gather(p2c, -1, (2 * K - 1 - distance)[None, None].expand(B, H, T, T))
        scores = (q @ k.transpose(-1, -2) + c2p + p2c.transpose(-1, -2)) / scale
        scores = scores.masked_fill(mask == 0, torch.finfo(scores.dtype).min)
        context = (F.softmax(scores, -1) @ v).permute(0, 2, 1, 3).reshape(B, T, D)
        x = s.ln1(x + s.o(context))
        return s.ln2(x + s.f2(F.gelu(s.f1(x))))


class Model(nn.Module):
    def __init__(s):
        super().__init__()
        s.embed, s.ln = nn.Embedding(V, D), nn.LayerNorm(D)
        s.relative = nn.Embedding(2 * K, D)
        s.layers = nn.ModuleList([Layer() for _ in range(2)])
        s.classifier = nn.Linear(D, 3)
        for p in s.parameters():  # norms away from their defaults
            if p.dim() == 1:
                p.data += 0.1 * torch.randn_like(p)

    def forward(s, input_ids, attention_mask, labels):
        i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
        distance = torch.clamp(i - j + K, 0, 2 * K - 1)
        mask = attention_mask[:, None, None, :] * attention_mask[:, None, :, None]
        x = s.ln(s.embed(input_ids))
        for layer in s.layers:
            x = layer(x, s.relative.weight, distance, mask)
        logits = s.classifier(x[:, 0])
        return F.cross_entropy(logits, labels), logits


ids = torch.randint(0, V, (2, T))
attention_mask = torch.ones(2, T, dtype=torch.long)
attention_mask[1, 8:] = 0
export(Model(), {"input_ids": ids, "attention_mask": attention_mask,
                 "labels": torch.tensor([1, 2])},
       {name: {0: "batch"} for name in ["input_ids", "attention_mask", "labels"]})
