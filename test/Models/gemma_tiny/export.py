"""Exports the tiny Gemma-style test model: the embedding scaled by
sqrt(d) and tied to the output, RMSNorm computed in f32 with weight
(1 + w), rotary embeddings computed in the graph, multi-query attention
(one key/value head expanded to four query heads) with a causal-and-
padding mask, a GELU(tanh)-gated MLP, the logits soft-capped by
30 tanh(x / 30) and a right-padded batch whose padding the loss ignores.
PyTorch's TorchScript ONNX exporter, opset 17, as the shared fixtures are
exported (../export_with_reference.py).

Run with Debian's python3-torch (1.13) in this folder; it writes model.onnx,
the inputs, and PyTorch's loss, logits and gradients (reference.npz), which
test/Models/gemma-tiny.test compares kiln with (../compare_with_pytorch.py).
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
D, H, V, T, HD = 32, 4, 64, 10, 16
class RMSNorm(nn.Module):
    def __init__(s):
        super().__init__()
        s.weight = nn.Parameter(0.1 * torch.randn(D))
    def forward(s, x):
        x32 = x.float()
        out = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-6)
        return (out * (1.0 + s.weight.float())).type_as(x)
def rope(x, cos, sin):
    x1, x2 = x[..., : HD // 2], x[..., HD // 2:]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin
class Layer(nn.Module):
    def __init__(s):
        super().__init__()
        s.n1, s.n2 = RMSNorm(), RMSNorm()
        s.q, s.k, s.v = nn.Linear(D, H * HD, bias=False), nn.Linear(D, HD, bias=False), nn.Linear(D, HD, bias=False)
        s.o = nn.Linear(H * HD, D, bias=False)
        s.gate, s.up, s.down = nn.Linear(D, 64, bias=False), nn.Linear(D, 64, bias=False), nn.Linear(64, D, bias=False)
    def forward(s, x, cos, sin, mask):
        B = x.shape[0]
        h = s.n1(x)
        q = rope(s.q(h).view(B, T, H, HD).transpose(1, 2), cos, sin)
        k = rope(s.k(h).view(B, T, 1, HD).transpose(1, 2), cos, sin)
        v = s.v(h).view(B, T, 1, HD).transpose(1, 2)
        k = k[:, :, None].expand(B, 1, H, T, HD).reshape(B, H, T, HD)
        v = v[:, :, None].expand(B, 1, H, T, HD).reshape(B, H, T, HD)
        scores = torch.matmul(q, k.transpose(2, 3)) * HD ** -0.5 + mask
        p = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        x = x + s.o(torch.matmul(p, v).transpose(1, 2).reshape(B, T, H * HD))
        h = s.n2(x)
        return x + s.down(F.gelu(s.gate(h), approximate="tanh") * s.up(h))
class Model(nn.Module):
    def __init__(s):
        super().__init__()
        s.embed = nn.Embedding(V, D)
        s.layers = nn.ModuleList([Layer() for _ in range(2)])
        s.norm = RMSNorm()
    def forward(s, input_ids, attention_mask, labels):
        B = input_ids.shape[0]
        x = s.embed(input_ids) * torch.tensor(D ** 0.5, dtype=torch.float32)
        pos = torch.arange(T).float()
        inv = 1.0 / (10000 ** (torch.arange(0, HD, 2).float() / HD))
        f = torch.outer(pos, inv)
        emb = torch.cat((f, f), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        lowest = torch.finfo(torch.float32).min
        causal = torch.triu(torch.full((T, T), lowest), 1)[None, None]
        pad = (attention_mask[:, None, None, :] == 0)
        mask = causal.masked_fill(pad, lowest)
        for l in s.layers:
            x = l(x, cos, sin, mask)
        logits = s.norm(x) @ s.embed.weight.t()
        logits = torch.tanh(logits / 30.0) * 30.0
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1), ignore_index=-100)
        return loss, logits
ids = torch.randint(0, V, (2, T))
am = torch.ones(2, T, dtype=torch.long)
am[1, 7:] = 0
labels = ids.masked_fill(am == 0, -100)
export(Model(), {"input_ids": ids, "attention_mask": am, "labels": labels}, {n: {0: "batch"} for n in ["input_ids", "attention_mask", "labels"]})
