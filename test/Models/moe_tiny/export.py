"""Exports the tiny Mixtral-style test model: RMSNorm, grouped-query
attention (two key/value heads repeated by repeat_interleave for four
query heads) with a causal masked_fill(-inf), and a mixture of four SwiGLU
experts: the router's softmax, its top two by TopK renormalized, scattered
back into dense weights (ScatterElements) and every expert weighted by its
own. PyTorch's TorchScript ONNX exporter, opset 17, as the shared fixtures
are exported (../export_with_reference.py).

Run with Debian's python3-torch (1.13) in this folder; it writes model.onnx,
the inputs, and PyTorch's loss, logits and gradients (reference.npz), which
test/Models/moe-tiny.test compares kiln with (../compare_with_pytorch.py).
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
D, H, KV, V, T, X = 32, 4, 2, 64, 10, 4
HD = D // H
class RMSNorm(nn.Module):
    def __init__(s):
        super().__init__()
        s.weight = nn.Parameter(torch.ones(D) + 0.1 * torch.randn(D))
    def forward(s, x):
        v = x.pow(2).mean(-1, keepdim=True)
        return s.weight * (x * torch.rsqrt(v + 1e-6))
class Expert(nn.Module):
    def __init__(s):
        super().__init__()
        s.w1 = nn.Linear(D, 64, bias=False)
        s.w2 = nn.Linear(64, D, bias=False)
        s.w3 = nn.Linear(D, 64, bias=False)
    def forward(s, x): return s.w2(F.silu(s.w1(x)) * s.w3(x))
class Layer(nn.Module):
    def __init__(s):
        super().__init__()
        s.n1, s.n2 = RMSNorm(), RMSNorm()
        s.q, s.k, s.v, s.o = nn.Linear(D, D, bias=False), nn.Linear(D, KV * HD, bias=False), nn.Linear(D, KV * HD, bias=False), nn.Linear(D, D, bias=False)
        s.gate = nn.Linear(D, X, bias=False)
        s.experts = nn.ModuleList([Expert() for _ in range(X)])
    def forward(s, x):
        B = x.shape[0]
        h = s.n1(x)
        q = s.q(h).view(B, T, H, HD).transpose(1, 2)
        k = s.k(h).view(B, T, KV, HD).transpose(1, 2).repeat_interleave(H // KV, dim=1)
        v = s.v(h).view(B, T, KV, HD).transpose(1, 2).repeat_interleave(H // KV, dim=1)
        s_ = (q @ k.transpose(-1, -2)) / math.sqrt(HD)
        s_ = s_.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
        o = F.softmax(s_, dim=-1) @ v
        x = x + s.o(o.transpose(1, 2).reshape(B, T, D))
        h = s.n2(x)
        logits = s.gate(h)
        w = F.softmax(logits, dim=-1, dtype=torch.float)
        top, idx = torch.topk(w, 2, dim=-1)
        top = top / top.sum(-1, keepdim=True)
        dense = torch.zeros_like(w).scatter(-1, idx, top)
        out = sum(dense[..., e:e + 1] * s.experts[e](h) for e in range(X))
        return x + out
class Model(nn.Module):
    def __init__(s):
        super().__init__()
        s.embed = nn.Embedding(V, D)
        s.layers = nn.ModuleList([Layer() for _ in range(2)])
        s.norm = RMSNorm()
        s.head = nn.Linear(D, V, bias=False)
    def forward(s, input_ids, labels):
        x = s.embed(input_ids)
        for l in s.layers: x = l(x)
        logits = s.head(s.norm(x))
        return F.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1)), logits
ids = torch.randint(0, V, (2, T))
export(Model(), {"input_ids": ids, "labels": ids.clone()}, {"input_ids": {0: "batch"}, "labels": {0: "batch"}})
