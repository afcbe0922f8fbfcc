"""Exports the tiny CLIP-style test model: a text tower (token and learned
position embeddings, causal pre-norm layers with QuickGELU x sigmoid(1.702
x), the final norm), pooled at each sequence's end-of-text token (the
largest id, found by argmax and gathered), projected and L2-normalized,
against two learned image embeddings; logits scaled by exp(logit_scale), a
scalar parameter that PyTorch trains, and the symmetric contrastive loss
(cross-entropy over the logits and their transpose). PyTorch's TorchScript
ONNX exporter, opset 17, as the shared fixtures are exported
(../export_with_reference.py).

Run with Debian's python3-torch (1.13) in this folder; it writes model.onnx,
the inputs, and PyTorch's loss, logits and gradients (reference.npz), which
test/Models/clip-tiny.test compares kiln with (../compare_with_pytorch.py).
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
D, H, V, T, E = 32, 4, 64, 10, 16
HD = D // H


class Layer(nn.Module):
    def __init__(s):
        super().__init__()
        s.ln1, s.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        s.q, s.k, s.v, s.o = (nn.Linear(D, D) for _ in range(4))
        s.fc1, s.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

    def forward(s, x, mask):
        B = x.shape[0]
        h = s.ln1(x)
        heads = lambda t: t.view(B, T, H, HD).transpose(1, 2)
        q, k, v = heads(s.q(h) * HD ** -0.5), heads(s.k(h)), heads(s.v(h))
        w = q @ k.transpose(-1, -2) + mask
        x = x + s.o((F.softmax(w, -1) @ v).transpose(1, 2).reshape(B, T, D))
        m = s.fc1(s.ln2(x))
        return x + s.fc2(m * torch.sigmoid(1.702 * m))


class Model(nn.Module):
    def __init__(s):
        super().__init__()
        s.tok, s.pos = nn.Embedding(V, D), nn.Embedding(T, D)
        s.layers = nn.ModuleList([Layer() for _ in range(2)])
        s.final = nn.LayerNorm(D)
        s.proj = nn.Linear(D, E, bias=False)
        s.image = nn.Parameter(torch.randn(2, E))
        s.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))
        for p in s.parameters():  # norms away from their defaults
            if p.dim() == 1:
                p.data += 0.1 * torch.randn_like(p)

    def forward(s, input_ids, labels):
        B = input_ids.shape[0]
        x = s.tok(input_ids) + s.pos(torch.arange(T))
        mask = torch.full((T, T), float("-inf")).triu(1)[None, None]
        for layer in s.layers:
            x = layer(x, mask)
        x = s.final(x)
        pooled = x[torch.arange(B), input_ids.argmax(dim=-1)]
        text = F.normalize(s.proj(pooled), dim=-1)
        image = F.normalize(s.image, dim=-1)
        logits = s.logit_scale.exp() * text @ image.t()
        loss = (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2
        return loss, logits


ids = torch.randint(0, V - 1, (2, T))
ids[0, 7] = ids[1, 9] = V - 1  # end-of-text tokens
export(Model(), {"input_ids": ids, "labels": torch.tensor([0, 1])},
       {"input_ids": {0: "batch"}, "labels": {0: "batch"}})
