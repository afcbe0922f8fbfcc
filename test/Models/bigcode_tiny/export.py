"""Exports the tiny GPT-BigCode-style test model (SantaCoder, StarCoder:
multi-query attention as Hugging Face writes it): one fused projection
gives the queries of all heads and a single key and value head; the
queries of a position's heads are flattened into the rows of one 3-D
product with the shared keys (baddbmm with beta 0 and the scale as alpha,
[B, T*H, hd] x [B, hd, T]), viewed back as [B, T, H, T], masked by
torch.where (with a tensor of the type's lowest value, as Hugging Face
passes it) from a causal buffer (`bias`, as GPT-2 names it) and the
padding, softmax, and a second product over the shared values. Learned
positions, pre-LN blocks with the tanh GELU, a tied output projection, the
shifted next-token loss ignoring -100. PyTorch's TorchScript ONNX
exporter, opset 17, in training mode (../export_with_reference.py).

Run with Debian's python3-torch (1.13) in this folder; it writes model.onnx,
the inputs, and PyTorch's loss, logits and gradients (reference.npz), which
test/Models/bigcode-tiny.test compares kiln with (../compare_with_pytorch.py).
Weights are random (seed 0).
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, "..")
from export_with_reference import export  # noqa: E402

torch.manual_seed(0)
D, H, V, T = 64, 4, 48, 12
HD = D // H


class Attention(nn.Module):
    def __init__(s):
        super().__init__()
        s.c_attn = nn.Linear(D, D + 2 * HD)
        s.c_proj = nn.Linear(D, D)

    def forward(s, x, keep):
        B = x.shape[0]
        query, key_value = s.c_attn(x).split((D, 2 * HD), dim=2)
        key, value = key_value.split((HD, HD), dim=-1)
        query = query.reshape(B, T * H, HD)
        empty = torch.empty(B, T * H, T, dtype=x.dtype)
        scores = torch.baddbmm(empty, query, key.transpose(1, 2), beta=0,
                               alpha=HD ** -0.5).view(B, T, H, T)
        lowest = torch.full([], torch.finfo(x.dtype).min, dtype=x.dtype)
        scores = torch.where(keep, scores, lowest)
        probabilities = F.softmax(scores, dim=-1).view(B, T * H, T)
        return s.c_proj(torch.bmm(probabilities, value).view(B, T, D))


class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.ln_1, s.ln_2 = nn.LayerNorm(D), nn.LayerNorm(D)
        s.attn = Attention()
        s.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(approximate="tanh"),
                              nn.Linear(4 * D, D))

    def forward(s, x, keep):
        x = x + s.attn(s.ln_1(x), keep)
        return x + s.mlp(s.ln_2(x))


class Model(nn.Module):
    def __init__(s):
        super().__init__()
        s.wte, s.wpe = nn.Embedding(V, D), nn.Embedding(T, D)
        s.blocks = nn.ModuleList([Block() for _ in range(2)])
        s.ln_f = nn.LayerNorm(D)
        s.register_buffer("bias", torch.tril(torch.ones(T, T, dtype=torch.bool)))
        for p in s.parameters():  # norms away from their defaults
            if p.dim() == 1:
                p.data += 0.1 * torch.randn_like(p)

    def forward(s, input_ids, attention_mask, labels):
        # keep[b, query, head, key]: causal and not padding.
        keep = s.bias[None, :, None, :] & attention_mask.bool()[:, None, None, :]
        x = s.wte(input_ids) + s.wpe(torch.arange(T))
        for block in s.blocks:
            x = block(x, keep)
        logits = F.linear(s.ln_f(x), s.wte.weight)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1))
        return loss, logits


input_ids = torch.randint(0, V, (2, T))
attention_mask = torch.ones(2, T, dtype=torch.long)
attention_mask[1, 9:] = 0
labels = input_ids.masked_fill(attention_mask == 0, -100)
export(Model(), {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels},
       {name: {0: "batch"} for name in ["input_ids", "attention_mask", "labels"]})
