"""Exports the tiny Llama-style test model: RMSNorm, rotary embeddings (via
einsum), grouped-query attention (keys and values repeated with
expand/reshape), a causal mask from triu, a SiLU-gated MLP and the
cross-entropy loss, with PyTorch's TorchScript ONNX exporter (opset 17).

Run with Debian's python3-torch (1.13) in this folder; it writes model.onnx,
the inputs and PyTorch's loss and logits, which test/Models/llama-tiny.test
compares kiln with. Weights are random (seed 0).
"""
import torch, torch.nn as nn, math
torch.manual_seed(0)
class RMSNorm(nn.Module):
    def __init__(s, d, eps=1e-6):
        super().__init__(); s.w = nn.Parameter(torch.ones(d) + 0.1*torch.randn(d)); s.eps = eps
    def forward(s, x):
        v = x.pow(2).mean(-1, keepdim=True)
        return s.w * (x * torch.rsqrt(v + s.eps))
def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)
class Block(nn.Module):
    def __init__(s, d=32, h=4, kv=2):
        super().__init__()
        s.h, s.kv, s.hd = h, kv, d // h
        s.q = nn.Linear(d, h*s.hd, bias=False); s.k = nn.Linear(d, kv*s.hd, bias=False); s.v = nn.Linear(d, kv*s.hd, bias=False)
        s.o = nn.Linear(d, d, bias=False); s.n1 = RMSNorm(d); s.n2 = RMSNorm(d)
        s.gate = nn.Linear(d, 64, bias=False); s.up = nn.Linear(d, 64, bias=False); s.down = nn.Linear(64, d, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, s.hd, 2).float() / s.hd)); s.register_buffer("inv_freq", inv)
    def forward(s, x):
        B, T, D = x.shape
        hn = s.n1(x)
        q = s.q(hn).view(B, T, s.h, s.hd).transpose(1, 2)
        k = s.k(hn).view(B, T, s.kv, s.hd).transpose(1, 2)
        v = s.v(hn).view(B, T, s.kv, s.hd).transpose(1, 2)
        pos = torch.arange(T, dtype=torch.float32)
        freqs = torch.einsum("i,j->ij", pos, s.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = s.h // s.kv
        k = k[:, :, None].expand(B, s.kv, rep, T, s.hd).reshape(B, s.h, T, s.hd)
        v = v[:, :, None].expand(B, s.kv, rep, T, s.hd).reshape(B, s.h, T, s.hd)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(s.hd)
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, D)
        x = x + s.o(y)
        hn = s.n2(x)
        return x + s.down(nn.functional.silu(s.gate(hn)) * s.up(hn))
class Model(nn.Module):
    def __init__(s):
        super().__init__(); s.emb = nn.Embedding(64, 32); s.b1 = Block(); s.b2 = Block(); s.n = RMSNorm(32); s.head = nn.Linear(32, 64, bias=False)
    def forward(s, ids, labels):
        x = s.b2(s.b1(s.emb(ids)))
        logits = s.head(s.n(x))
        loss = nn.functional.cross_entropy(logits.view(-1, 64), labels.view(-1))
        return loss, logits
m = Model()
ids = torch.randint(0, 64, (2, 12)); labels = torch.randint(0, 64, (2, 12))
with torch.no_grad():
    loss, logits = m(ids, labels)
torch.onnx.export(m, (ids, labels), "model.onnx", input_names=["input_ids", "labels"], output_names=["loss", "logits"],
                  opset_version=17, dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "labels": {0: "batch", 1: "seq"}})
import numpy as np
np.save("input_ids.npy", ids.numpy()); np.save("labels.npy", labels.numpy())
np.save("logits.npy", logits.numpy())
np.save("loss.npy", loss.numpy())
