"""Exports the tiny BART-style test model (BART, mBART, Marian, Pegasus as
Hugging Face writes them): the decoder's inputs made in the graph from the
labels (shift_tokens_right: a slice assignment, then -100 replaced by the
padding id), learned positions offset by 2 and looked up from an arange,
layernorm_embedding, post-LN encoder and decoder layers whose attention
scales the query before the product, folds the heads into the batch of
bmm and adds the float masks the model builds (the source's padding, the
decoder's causal mask from the type's lowest), a tied output projection
plus the final_logits_bias buffer, and cross-entropy with label smoothing
0.1 ignoring -100, spelled out as Hugging Face's LabelSmoother computes it
(the exporter refuses cross_entropy's label_smoothing): log_softmax, a
gather of the labels clamped to 0, masked_fill, sums over the kept tokens. PyTorch's TorchScript ONNX exporter, opset 17, in
training mode (../export_with_reference.py).

Run with Debian's python3-torch (1.13) in this folder; it writes model.onnx,
the inputs, and PyTorch's loss, logits and gradients (reference.npz), which
test/Models/bart-tiny.test compares kiln with (../compare_with_pytorch.py).
Weights are random (seed 0).
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, "..")
from export_with_reference import export  # noqa: E402

torch.manual_seed(0)
D, H, V, S, T, PAD, START = 32, 4, 48, 12, 8, 1, 2
HD = D // H
LOWEST = torch.finfo(torch.float32).min


def shift_tokens_right(labels):
    shifted = labels.new_zeros(labels.shape)
    shifted[:, 1:] = labels[:, :-1].clone()
    shifted[:, 0] = START
    return shifted.masked_fill(shifted == -100, PAD)


def label_smoothed_loss(logits, labels, epsilon=0.1):
    log_probabilities = -F.log_softmax(logits, dim=-1)
    labels = labels.unsqueeze(-1)
    padding = labels.eq(-100)
    nll = log_probabilities.gather(dim=-1, index=torch.clamp(labels, min=0))
    smoothed = log_probabilities.sum(dim=-1, keepdim=True, dtype=torch.float32)
    nll = nll.masked_fill(padding, 0.0)
    smoothed = smoothed.masked_fill(padding, 0.0)
    active = padding.numel() - padding.long().sum()
    return ((1 - epsilon) * nll.sum() / active +
            epsilon * smoothed.sum() / (active * log_probabilities.shape[-1]))


class Attention(nn.Module):
    def __init__(s):
        super().__init__()
        s.q, s.k, s.v, s.out = (nn.Linear(D, D) for _ in range(4))

    def forward(s, x, memory, bias):
        B, L, M = x.shape[0], x.shape[1], memory.shape[1]
        q = (s.q(x) * HD ** -0.5).view(B, L, H, HD).transpose(1, 2).reshape(B * H, L, HD)
        k = s.k(memory).view(B, M, H, HD).transpose(1, 2).reshape(B * H, M, HD)
        v = s.v(memory).view(B, M, H, HD).transpose(1, 2).reshape(B * H, M, HD)
        scores = torch.bmm(q, k.transpose(1, 2)).view(B, H, L, M) + bias
        probabilities = F.softmax(scores.view(B * H, L, M), dim=-1)
        context = torch.bmm(probabilities, v).view(B, H, L, HD).transpose(1, 2)
        return s.out(context.reshape(B, L, D))


class Layer(nn.Module):
    def __init__(s, cross):
        super().__init__()
        s.attention, s.attention_norm = Attention(), nn.LayerNorm(D)
        s.cross = Attention() if cross else None
        s.cross_norm = nn.LayerNorm(D) if cross else None
        s.fc1, s.fc2, s.final_norm = nn.Linear(D, 2 * D), nn.Linear(2 * D, D), nn.LayerNorm(D)

    def forward(s, x, bias, memory=None, memory_bias=None):
        x = s.attention_norm(x + s.attention(x, x, bias))
        if s.cross is not None:
            x = s.cross_norm(x + s.cross(x, memory, memory_bias))
        return s.final_norm(x + s.fc2(F.gelu(s.fc1(x))))


class Model(nn.Module):
    def __init__(s):
        super().__init__()
        s.shared = nn.Embedding(V, D, padding_idx=PAD)
        s.encoder_positions = nn.Embedding(S + 2, D)
        s.decoder_positions = nn.Embedding(T + 2, D)
        s.encoder_norm, s.decoder_norm = nn.LayerNorm(D), nn.LayerNorm(D)
        s.encoder = nn.ModuleList([Layer(False) for _ in range(2)])
        s.decoder = nn.ModuleList([Layer(True) for _ in range(2)])
        s.register_buffer("final_logits_bias", torch.zeros(1, V))
        for p in s.parameters():  # norms away from their defaults
            if p.dim() == 1:
                p.data += 0.1 * torch.randn_like(p)

    def embed(s, ids, positions, norm):
        return norm(s.shared(ids) + positions(torch.arange(ids.shape[1]) + 2))

    def forward(s, input_ids, attention_mask, labels):
        padding = (1.0 - attention_mask[:, None, None, :].float()) * LOWEST
        x = s.embed(input_ids, s.encoder_positions, s.encoder_norm)
        for layer in s.encoder:
            x = layer(x, padding)
        causal = torch.full((T, T), LOWEST).triu(1)[None, None]
        y = s.embed(shift_tokens_right(labels), s.decoder_positions, s.decoder_norm)
        for layer in s.decoder:
            y = layer(y, causal, x, padding)
        logits = F.linear(y, s.shared.weight) + s.final_logits_bias
        return label_smoothed_loss(logits, labels), logits


input_ids = torch.randint(3, V, (2, S))
attention_mask = torch.ones(2, S, dtype=torch.long)
attention_mask[1, 9:] = 0
input_ids[1, 9:] = PAD
labels = torch.randint(3, V, (2, T))
labels[1, 6:] = -100
export(Model(), {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels},
       {name: {0: "batch"} for name in ["input_ids", "attention_mask", "labels"]})
