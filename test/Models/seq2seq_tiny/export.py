"""Exports the tiny seq2seq test model built from PyTorch's own layers:
nn.Transformer (batch first, pre-norm, GELU, two encoder and two decoder
layers), whose nn.MultiheadAttention packs the query, key and value
projections into one in_proj weight, flattens the heads into the batch of
3-D products and adds its masks with baddbmm: a boolean key padding mask
on the source (merged into a float -inf mask by PyTorch), the float causal
mask nn.Transformer.generate_square_subsequent_mask builds for the target,
and the source padding again on the cross-attention. Sinusoidal position
encodings as a buffer, a shared embedding scaled by sqrt(d), an untied
output projection, the loss ignoring the target's padding. PyTorch's
TorchScript ONNX exporter, opset 17, as the shared fixtures are exported
(../export_with_reference.py).

Run with Debian's python3-torch (1.13) in this folder; it writes model.onnx,
the inputs, and PyTorch's loss, logits and gradients (reference.npz), which
test/Models/seq2seq-tiny.test compares kiln with
(../compare_with_pytorch.py). Weights are random (seed 0).
"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, "..")
from export_with_reference import export  # noqa: E402

torch.manual_seed(0)
D, H, V, S, T = 32, 4, 48, 12, 8


class Model(nn.Module):
    def __init__(s):
        super().__init__()
        s.embedding = nn.Embedding(V, D)
        s.transformer = nn.Transformer(
            d_model=D, nhead=H, num_encoder_layers=2, num_decoder_layers=2,
            dim_feedforward=2 * D, dropout=0.0, activation="gelu",
            batch_first=True, norm_first=True)
        s.output = nn.Linear(D, V)
        position = torch.arange(max(S, T))[:, None]
        frequency = torch.exp(torch.arange(0, D, 2) * (-math.log(10000.0) / D))
        table = torch.zeros(max(S, T), D)
        table[:, 0::2] = torch.sin(position * frequency)
        table[:, 1::2] = torch.cos(position * frequency)
        s.register_buffer("positions", table)
        for p in s.parameters():  # norms and biases away from their defaults
            if p.dim() == 1:
                p.data += 0.1 * torch.randn_like(p)

    def embed(s, ids):
        return s.embedding(ids) * math.sqrt(D) + s.positions[: ids.shape[1]]

    def forward(s, source_ids, source_mask, target_ids, labels):
        padding = source_mask == 0
        causal = nn.Transformer.generate_square_subsequent_mask(T)
        x = s.transformer(s.embed(source_ids), s.embed(target_ids),
                          tgt_mask=causal, src_key_padding_mask=padding,
                          memory_key_padding_mask=padding)
        logits = s.output(x)
        loss = F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1))
        return loss, logits


model = Model()
source_ids = torch.randint(0, V, (2, S))
source_mask = torch.ones(2, S, dtype=torch.long)
source_mask[1, 9:] = 0  # right padding
target_ids = torch.randint(0, V, (2, T))
labels = torch.randint(0, V, (2, T))
labels[1, 6:] = -100
export(model, {"source_ids": source_ids, "source_mask": source_mask,
               "target_ids": target_ids, "labels": labels},
       {"source_ids": {0: "batch"}, "source_mask": {0: "batch"},
        "target_ids": {0: "batch"}, "labels": {0: "batch"}})
