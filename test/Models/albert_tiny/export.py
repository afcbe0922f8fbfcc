"""Exports the tiny ALBERT-style test model: factorized embeddings (words,
positions and token types of width 16, a layer norm, then a projection to
32), one post-norm layer whose weights every one of the three layers
shares, BERT's -10000 padding mask, a tanh-GELU MLP, the masked-language-
model head tied to the word embedding with a bias of its own, and a
cross-entropy over two labelled positions per sequence (-100 elsewhere).
PyTorch's TorchScript ONNX exporter, opset 17, as the shared fixtures are
exported (../export_with_reference.py).

Run with Debian's python3-torch (1.13) in this folder; it writes model.onnx,
the inputs, and PyTorch's loss, logits and gradients (reference.npz), which
test/Models/albert-tiny.test compares kiln with (../compare_with_pytorch.py).
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
E, D, H, V, T = 16, 32, 4, 64, 10
HD = D // H
class Layer(nn.Module):
    def __init__(s):
        super().__init__()
        s.q, s.k, s.v, s.o = (nn.Linear(D, D) for _ in range(4))
        s.ln1, s.ln2 = nn.LayerNorm(D, eps=1e-12), nn.LayerNorm(D, eps=1e-12)
        s.ffn, s.ffn_out = nn.Linear(D, 2 * D), nn.Linear(2 * D, D)
    def forward(s, x, mask):
        B = x.shape[0]
        sp = lambda t: t.view(B, T, H, HD).permute(0, 2, 1, 3)
        q, k, v = sp(s.q(x)), sp(s.k(x)), sp(s.v(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(HD) + mask
        p = F.softmax(scores, dim=-1)
        c = torch.matmul(p, v).transpose(2, 1).flatten(2)
        x = s.ln1(x + s.o(c))
        return s.ln2(x + s.ffn_out(F.gelu(s.ffn(x), approximate="tanh")))
class Model(nn.Module):
    def __init__(s):
        super().__init__()
        s.words, s.pos, s.types = nn.Embedding(V, E), nn.Embedding(T, E), nn.Embedding(2, E)
        s.eln = nn.LayerNorm(E)
        s.proj = nn.Linear(E, D)
        s.layer = Layer()  # shared by every layer
        s.head, s.hln = nn.Linear(D, E), nn.LayerNorm(E)
        s.dec_bias = nn.Parameter(torch.zeros(V))
        for p in s.parameters():
            if p.dim() == 1: p.data += 0.1 * torch.randn_like(p)
    def forward(s, input_ids, token_type_ids, attention_mask, labels):
        mask = (1.0 - attention_mask[:, None, None, :].float()) * -10000.0
        x = s.words(input_ids) + s.pos(torch.arange(T)[None]) + s.types(token_type_ids)
        x = s.proj(s.eln(x))
        for _ in range(3): x = s.layer(x, mask)
        h = s.hln(F.gelu(s.head(x), approximate="tanh"))
        logits = h @ s.words.weight.t() + s.dec_bias
        loss = F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), ignore_index=-100)
        return loss, logits
ids = torch.randint(0, V, (2, T))
tt = torch.zeros(2, T, dtype=torch.long)
tt[:, 5:] = 1
am = torch.ones(2, T, dtype=torch.long)
am[1, 8:] = 0
labels = torch.full((2, T), -100)
labels[:, 2] = ids[:, 2]
labels[:, 6] = ids[:, 6]
ax = {n: {0: "batch"} for n in ["input_ids", "token_type_ids", "attention_mask", "labels"]}
export(Model(), {"input_ids": ids, "token_type_ids": tt, "attention_mask": am, "labels": labels}, ax)
