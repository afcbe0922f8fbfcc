"""Exports the tiny BLOOM-style test model: ALiBi (a per-head linear bias
over key positions, counted from the attention mask's cumulative sum, so
that padding shifts it) instead of position embeddings, a layer norm on the
embeddings, one fused query-key-value projection laid out head by head,
scores as baddbmm(alibi, q, k^T, alpha=1/sqrt(d)), the causal mask combined
with the padding mask by masked_fill, BLOOM's own tanh-GELU spelled out, the
tied embedding as the output projection and the shifted language-model
loss. PyTorch's TorchScript ONNX exporter, opset 17, as the shared fixtures
are exported (training mode, no constant folding).

Run with Debian's python3-torch (1.13) in this folder; it writes model.onnx,
the inputs, and PyTorch's loss, logits and gradients (reference.npz), which
test/Models/bloom-tiny.test compares kiln with (../compare_with_pytorch.py).
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
D, H, V = 32, 4, 64
HD = D // H


def alibi_slopes(heads):
    start = 2 ** (-(2 ** -(math.log2(heads) - 3)))
    return torch.tensor([start ** (i + 1) for i in range(heads)])


def gelu(x):  # BLOOM's bloom_gelu_forward
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))


class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.ln1, s.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        s.qkv, s.dense = nn.Linear(D, 3 * D), nn.Linear(D, D)
        s.up, s.down = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

    def forward(s, x, alibi, mask):
        B, T, _ = x.shape
        h = s.ln1(x)
        fused = s.qkv(h).view(B, T, H, 3, HD)
        q = fused[..., 0, :].transpose(1, 2).reshape(B * H, T, HD)
        k = fused[..., 1, :].permute(0, 2, 3, 1).reshape(B * H, HD, T)
        v = fused[..., 2, :].transpose(1, 2).reshape(B * H, T, HD)
        scores = alibi.baddbmm(batch1=q, batch2=k, beta=1.0, alpha=1 / math.sqrt(HD))
        scores = scores.view(B, H, T, T).masked_fill(mask, torch.finfo(torch.float32).min)
        probs = F.softmax(scores, dim=-1, dtype=torch.float32).view(B * H, T, T)
        context = torch.bmm(probs, v).view(B, H, T, HD).permute(0, 2, 1, 3).reshape(B, T, D)
        x = x + s.dense(context)
        return x + s.down(gelu(s.up(s.ln2(x))))


class Model(nn.Module):
    def __init__(s):
        super().__init__()
        s.embed = nn.Embedding(V, D)
        s.embed_norm, s.final_norm = nn.LayerNorm(D), nn.LayerNorm(D)
        s.blocks = nn.ModuleList([Block() for _ in range(2)])
        s.embed.weight.data *= 0.2
        for p in s.parameters():  # LayerNorms away from their defaults
            if p.dim() == 1:
                p.data += 0.1 * torch.randn_like(p)

    def forward(s, input_ids, attention_mask, labels):
        B, T = input_ids.shape
        positions = ((attention_mask.cumsum(dim=-1) - 1) * attention_mask)[:, None, :]
        alibi = (alibi_slopes(H)[None, :, None] * positions).reshape(B * H, 1, T)
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        mask = causal[None, None] | (attention_mask[:, None, None, :] == 0)
        x = s.embed_norm(s.embed(input_ids))
        for block in s.blocks:
            x = block(x, alibi, mask)
        logits = s.final_norm(x) @ s.embed.weight.t()
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1))
        return loss, logits


model = Model()
input_ids = torch.randint(0, V, (2, 10))
attention_mask = torch.ones(2, 10, dtype=torch.long)
attention_mask[1, :3] = 0  # left padding, which the loss ignores
labels = input_ids.masked_fill(attention_mask == 0, -100)
export(model, {"input_ids": input_ids, "attention_mask": attention_mask,
               "labels": labels},
       {"input_ids": {0: "batch", 1: "seq"},
        "attention_mask": {0: "batch", 1: "seq"},
        "labels": {0: "batch", 1: "seq"}})
