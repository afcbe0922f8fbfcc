"""Exports a tiny decoder of what newer families do differently, at opset
14 (PyTorch 1.13's exporter cannot write a LayerNormalization without a
weight at 17): OLMo's layer norms without weight or bias, Persimmon's
per-head layer norms of queries and keys and its rotary embedding of half
of each head, SiLU-gated MLP from one packed projection, the output
projection tied to the embedding and its logits scaled (Cohere's), and the
loss of next tokens from labels shifted inside the model. PyTorch's
TorchScript ONNX exporter, in training mode (../export_with_reference.py).

Run with Debian's python3-torch (1.13) in this folder; it writes model.onnx,
the inputs, and PyTorch's loss, logits and gradients (reference.npz), which
test/Models/olmo-tiny.test compares kiln with (../compare_with_pytorch.py).
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
D, H, V, T = 32, 4, 48, 10
HD = D // H
ROT = HD // 2  # partial rotary: half of each head
class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.qkv = nn.Linear(D, 3 * D, bias=False); s.o = nn.Linear(D, D, bias=False)
        s.q_norm = nn.LayerNorm(HD); s.k_norm = nn.LayerNorm(HD)   # per-head qk norm (Persimmon)
        s.gate_up = nn.Linear(D, 2 * 48, bias=False); s.down = nn.Linear(48, D, bias=False)
    def forward(s, x, cos, sin):
        B = x.shape[0]
        h = F.layer_norm(x, (D,))   # non-parametric (OLMo)
        q, k, v = s.qkv(h).split(D, dim=-1)
        q = s.q_norm(q.view(B, T, H, HD)).transpose(1, 2)
        k = s.k_norm(k.view(B, T, H, HD)).transpose(1, 2)
        v = v.view(B, T, H, HD).transpose(1, 2)
        def rope(t):
            r, p = t[..., :ROT], t[..., ROT:]
            r1, r2 = r[..., : ROT // 2], r[..., ROT // 2 :]
            return torch.cat((r * cos + torch.cat((-r2, r1), -1) * sin, p), -1)
        q, k = rope(q), rope(k)
        att = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(HD))
        mask = torch.ones(T, T).tril().bool()
        att = att.masked_fill(~mask, torch.finfo(att.dtype).min).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, D)
        x = x + s.o(y)
        g, u = s.gate_up(F.layer_norm(x, (D,))).chunk(2, dim=-1)
        return x + s.down(F.silu(g) * u)
class Model(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb = nn.Embedding(V, D); s.blocks = nn.ModuleList([Block() for _ in range(2)])
        s.logit_scale = 0.5
        inv = 1.0 / (10000 ** (torch.arange(0, ROT, 2).float() / ROT)); s.register_buffer("inv_freq", inv)
        for p in s.parameters():
            if p.dim() == 1: p.data += 0.1 * torch.randn_like(p)
    def forward(s, input_ids, labels):
        x = s.emb(input_ids)
        pos = torch.arange(T, dtype=torch.float32)
        f = pos[:, None] * s.inv_freq[None]
        emb = torch.cat((f, f), -1)
        cos, sin = emb.cos(), emb.sin()
        for b in s.blocks: x = b(x, cos, sin)
        logits = F.linear(F.layer_norm(x, (D,)), s.emb.weight) * s.logit_scale   # tied, scaled (Cohere)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1))
        return loss, logits
m = Model()
ids = torch.randint(0, V, (2, T))
export(m, {"input_ids": ids, "labels": ids.clone()}, {"input_ids": {0: "batch"}, "labels": {0: "batch"}}, opset_version=14)
