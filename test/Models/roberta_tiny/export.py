"""Exports the tiny RoBERTa-style test model (RoBERTa, XLM-R, CamemBERT as
Hugging Face writes them, with an ELECTRA-style second head): position ids
computed in the graph from the padding (cumsum of input_ids != pad, times
the mask, plus the padding index), token type embeddings, post-LN layers
whose attention adds the extended padding mask ((1 - mask) * finfo.min),
a masked-language-model head (dense, GELU, LayerNorm, the tied decoder
plus its own bias) with cross-entropy ignoring -100, and a token-level
replaced-token-detection head with binary cross-entropy with logits,
averaged over the kept tokens. PyTorch's TorchScript ONNX exporter,
opset 17, in training mode (../export_with_reference.py).

Run with Debian's python3-torch (1.13) in this folder; it writes model.onnx,
the inputs, and PyTorch's loss, logits and gradients (reference.npz), which
test/Models/roberta-tiny.test compares kiln with (../compare_with_pytorch.py).
Weights are random (seed 0).
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, "..")
from export_with_reference import export  # noqa: E402

torch.manual_seed(0)
D, H, V, T, PAD = 32, 4, 40, 10, 1
HD = D // H


def position_ids(input_ids):
    mask = input_ids.ne(PAD).int()
    return (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + PAD


class Layer(nn.Module):
    def __init__(s):
        super().__init__()
        s.q, s.k, s.v, s.out = (nn.Linear(D, D) for _ in range(4))
        s.attention_norm = nn.LayerNorm(D, eps=1e-5)
        s.up, s.down = nn.Linear(D, 2 * D), nn.Linear(2 * D, D)
        s.output_norm = nn.LayerNorm(D, eps=1e-5)

    def forward(s, x, bias):
        B = x.shape[0]
        q, k, v = (p(x).view(B, T, H, HD).permute(0, 2, 1, 3) for p in (s.q, s.k, s.v))
        scores = torch.matmul(q, k.transpose(-1, -2)) / HD ** 0.5 + bias
        context = torch.matmul(F.softmax(scores, dim=-1), v)
        x = s.attention_norm(x + s.out(context.permute(0, 2, 1, 3).reshape(B, T, D)))
        return s.output_norm(x + s.down(F.gelu(s.up(x))))


class Model(nn.Module):
    def __init__(s):
        super().__init__()
        s.words = nn.Embedding(V, D, padding_idx=PAD)
        s.positions = nn.Embedding(T + 2, D, padding_idx=PAD)
        s.token_types = nn.Embedding(2, D)
        s.embedding_norm = nn.LayerNorm(D, eps=1e-5)
        s.layers = nn.ModuleList([Layer() for _ in range(2)])
        s.mlm_dense, s.mlm_norm = nn.Linear(D, D), nn.LayerNorm(D, eps=1e-5)
        s.mlm_bias = nn.Parameter(torch.zeros(V))
        s.rtd = nn.Linear(D, 1)
        for p in s.parameters():  # norms and biases away from their defaults
            if p.dim() == 1:
                p.data += 0.1 * torch.randn_like(p)

    def forward(s, input_ids, token_type_ids, attention_mask, labels, replaced):
        x = (s.words(input_ids) + s.positions(position_ids(input_ids)) +
             s.token_types(token_type_ids))
        x = s.embedding_norm(x)
        bias = (1.0 - attention_mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        for layer in s.layers:
            x = layer(x, bias)
        h = s.mlm_norm(F.gelu(s.mlm_dense(x)))
        logits = F.linear(h, s.words.weight) + s.mlm_bias
        mlm = F.cross_entropy(logits.view(-1, V), labels.view(-1))
        kept = attention_mask.float()
        detection = F.binary_cross_entropy_with_logits(
            s.rtd(x).squeeze(-1), replaced.float(), reduction="none")
        rtd = (detection * kept).sum() / kept.sum()
        return mlm + 0.5 * rtd, logits


input_ids = torch.randint(3, V, (2, T))
input_ids[1, 7:] = PAD
attention_mask = input_ids.ne(PAD).long()
token_type_ids = torch.zeros(2, T, dtype=torch.long)
token_type_ids[:, 5:] = 1
labels = torch.full((2, T), -100)
labels[0, [1, 4, 8]] = input_ids[0, [1, 4, 8]]
labels[1, [2, 5]] = input_ids[1, [2, 5]]
replaced = torch.zeros(2, T, dtype=torch.long)
replaced[0, [3, 6]] = 1
replaced[1, 1] = 1
export(Model(), {"input_ids": input_ids, "token_type_ids": token_type_ids,
                 "attention_mask": attention_mask, "labels": labels, "replaced": replaced},
       {name: {0: "batch"} for name in
        ["input_ids", "token_type_ids", "attention_mask", "labels", "replaced"]})
