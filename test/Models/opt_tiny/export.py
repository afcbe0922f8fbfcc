"""Exports the tiny OPT-style test model: learned position embeddings
offset by 2 and counted from the attention mask, pre-norm layers, the query
scaled before the product, attention as 3-D bmm over heads flattened into
the batch with the scores viewed as [B, H, T, T] to add a causal-and-padding
mask (finfo.min, built from the attention mask) and back, a ReLU MLP, the
tied output projection and the shifted language-model loss that ignores the
right padding. PyTorch's TorchScript ONNX exporter, opset 17, as the shared
fixtures are exported (../export_with_reference.py).

Run with Debian's python3-torch (1.13) in this folder; it writes model.onnx,
the inputs, and PyTorch's loss, logits and gradients (reference.npz), which
test/Models/opt-tiny.test compares kiln with (../compare_with_pytorch.py).
Weights are random (seed 0).
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, "..")
from export_with_reference import export  # noqa: E402

torch.manual_seed(0)
D, H, V, T = 32, 4, 64, 10
HD = D // H


class Layer(nn.Module):
    def __init__(s):
        super().__init__()
        s.norm1, s.norm2 = nn.LayerNorm(D), nn.LayerNorm(D)
        s.q, s.k, s.v, s.o = (nn.Linear(D, D) for _ in range(4))
        s.fc1, s.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

    def forward(s, x, mask):
        B = x.shape[0]
        heads = lambda t: t.view(B, T, H, HD).transpose(1, 2).reshape(B * H, T, HD)
        h = s.norm1(x)
        q, k, v = heads(s.q(h) * HD ** -0.5), heads(s.k(h)), heads(s.v(h))
        scores = torch.bmm(q, k.transpose(1, 2))
        scores = (scores.view(B, H, T, T) + mask).view(B * H, T, T)
        probs = F.softmax(scores, dim=-1)
        context = torch.bmm(probs, v).view(B, H, T, HD).transpose(1, 2).reshape(B, T, D)
        x = x + s.o(context)
        return x + s.fc2(F.relu(s.fc1(s.norm2(x))))


class Model(nn.Module):
    def __init__(s):
        super().__init__()
        s.tokens = nn.Embedding(V, D)
        s.tokens.weight.data *= 0.2
        s.positions = nn.Embedding(T + 2, D)
        s.layers = nn.ModuleList([Layer() for _ in range(2)])
        s.final = nn.LayerNorm(D)
        for p in s.parameters():  # norms away from their defaults
            if p.dim() == 1:
                p.data += 0.1 * torch.randn_like(p)

    def forward(s, input_ids, attention_mask, labels):
        positions = (torch.cumsum(attention_mask, dim=1) * attention_mask).long() - 1 + 2
        lowest = torch.finfo(torch.float32).min
        causal = torch.triu(torch.full((T, T), lowest), 1)[None, None]
        padding = (1.0 - attention_mask[:, None, None, :].float()) * lowest
        mask = (causal + padding).clamp(min=lowest)
        x = s.tokens(input_ids) + s.positions(positions)
        for layer in s.layers:
            x = layer(x, mask)
        logits = s.final(x) @ s.tokens.weight.t()
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1))
        return loss, logits


model = Model()
input_ids = torch.randint(0, V, (2, T))
attention_mask = torch.ones(2, T, dtype=torch.long)
attention_mask[1, 7:] = 0  # right padding, which the loss ignores
labels = input_ids.masked_fill(attention_mask == 0, -100)
export(model, {"input_ids": input_ids, "attention_mask": attention_mask,
               "labels": labels},
       {"input_ids": {0: "batch"}, "attention_mask": {0: "batch"},
        "labels": {0: "batch"}})
