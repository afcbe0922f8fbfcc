"""Exports the tiny GPT-NeoX-style test model: a fused query-key-value
projection viewed per head as [q | k | v], rotary embeddings on the first
half of each head from cached cos/sin buffers (`cos_cached`, `sin_cached`,
which PyTorch does not train), scores by baddbmm with alpha = d^-1/2, the
causal mask as where(tril, scores, finfo.min), the parallel residual
x + attn(ln1(x)) + mlp(ln2(x)) with exact GELU, an untied output
projection and the shifted language-model loss. PyTorch's TorchScript ONNX
exporter, opset 17, as the shared fixtures are exported
(../export_with_reference.py).

Run with Debian's python3-torch (1.13) in this folder; it writes model.onnx,
the inputs, and PyTorch's loss, logits and gradients (reference.npz), which
test/Models/neox-tiny.test compares kiln with (../compare_with_pytorch.py).
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
R = HD // 2  # partial rotary

def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)

class Layer(nn.Module):
    def __init__(s):
        super().__init__()
        s.ln1, s.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        s.qkv, s.dense = nn.Linear(D, 3 * D), nn.Linear(D, D)
        s.up, s.down = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
        inv = 1.0 / (10000 ** (torch.arange(0, R, 2).float() / R))
        t = torch.arange(T).float()
        freqs = torch.einsum("i,j->ij", t, inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        s.register_buffer("cos_cached", emb.cos()[None, None])
        s.register_buffer("sin_cached", emb.sin()[None, None])
        s.register_buffer("bias", torch.tril(torch.ones(T, T, dtype=torch.bool))[None, None])
    def attn(s, x):
        B = x.shape[0]
        qkv = s.qkv(x).view(B, T, H, 3 * HD).permute(0, 2, 1, 3)
        q, k, v = qkv[..., :HD], qkv[..., HD:2 * HD], qkv[..., 2 * HD:]
        qr, qp = q[..., :R], q[..., R:]
        kr, kp = k[..., :R], k[..., R:]
        qr = qr * s.cos_cached + rotate_half(qr) * s.sin_cached
        kr = kr * s.cos_cached + rotate_half(kr) * s.sin_cached
        q = torch.cat((qr, qp), dim=-1)
        k = torch.cat((kr, kp), dim=-1)
        scores = torch.baddbmm(torch.zeros(B * H, T, T), q.reshape(B * H, T, HD),
                               k.reshape(B * H, T, HD).transpose(1, 2), beta=1.0,
                               alpha=1.0 / math.sqrt(HD)).view(B, H, T, T)
        scores = torch.where(s.bias, scores, torch.tensor(torch.finfo(scores.dtype).min))
        p = F.softmax(scores, dim=-1)
        o = (p @ v).permute(0, 2, 1, 3).reshape(B, T, D)
        return s.dense(o)
    def forward(s, x):
        return x + s.attn(s.ln1(x)) + s.down(F.gelu(s.up(s.ln2(x))))

class Model(nn.Module):
    def __init__(s):
        super().__init__()
        s.embed = nn.Embedding(V, D)
        s.layers = nn.ModuleList([Layer() for _ in range(2)])
        s.final = nn.LayerNorm(D)
        s.out = nn.Linear(D, V, bias=False)
        for p in s.parameters():
            if p.dim() == 1: p.data += 0.1 * torch.randn_like(p)
    def forward(s, input_ids, labels):
        x = s.embed(input_ids)
        for l in s.layers: x = l(x)
        logits = s.out(s.final(x))
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1))
        return loss, logits

ids = torch.randint(0, V, (2, T))
export(Model(), {"input_ids": ids, "labels": ids.clone()}, {"input_ids": {0: "batch"}, "labels": {0: "batch"}})
