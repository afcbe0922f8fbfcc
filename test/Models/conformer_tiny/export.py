"""Exports the tiny Conformer-style test model (speech): a Conv1d
subsampling stem over 8 mel channels, and blocks of a half-step
feed-forward with SiLU, self-attention over a padding mask, the
convolution module (pointwise Conv1d, GLU, depthwise Conv1d of kernel 5,
BatchNorm1d over the batch's statistics, SiLU, pointwise Conv1d), a second
half-step feed-forward and a final layer norm; a classifier over the mean
of the kept frames. PyTorch's TorchScript ONNX exporter, opset 17, in
training mode (BatchNormalization with training_mode=1), as the shared
fixtures are exported (../export_with_reference.py).

Run with Debian's python3-torch (1.13) in this folder; it writes model.onnx,
the inputs, and PyTorch's loss, logits and gradients (reference.npz), which
test/Models/conformer-tiny.test compares kiln with (../compare_with_pytorch.py).
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
M, D, H, T, C = 8, 32, 4, 12, 5
HD = D // H


def feed_forward():
    return nn.Sequential(nn.LayerNorm(D), nn.Linear(D, 4 * D), nn.SiLU(),
                         nn.Linear(4 * D, D))


class ConvolutionModule(nn.Module):
    def __init__(s):
        super().__init__()
        s.norm = nn.LayerNorm(D)
        s.pointwise1 = nn.Conv1d(D, 2 * D, kernel_size=1)
        s.depthwise = nn.Conv1d(D, D, kernel_size=5, padding=2, groups=D)
        s.batch_norm = nn.BatchNorm1d(D)
        s.pointwise2 = nn.Conv1d(D, D, kernel_size=1)

    def forward(s, x):
        h = s.norm(x).transpose(1, 2)
        h = F.glu(s.pointwise1(h), dim=1)
        h = F.silu(s.batch_norm(s.depthwise(h)))
        return s.pointwise2(h).transpose(1, 2)


class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.ffn1, s.ffn2 = feed_forward(), feed_forward()
        s.attention_norm = nn.LayerNorm(D)
        s.qkv, s.out = nn.Linear(D, 3 * D), nn.Linear(D, D)
        s.convolution = ConvolutionModule()
        s.final_norm = nn.LayerNorm(D)

    def attention(s, x, mask):
        B = x.shape[0]
        q, k, v = s.qkv(s.attention_norm(x)).view(B, T, 3, H, HD).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / math.sqrt(HD)
        scores = scores.masked_fill(mask[:, None, None, :] == 0, float("-inf"))
        context = F.softmax(scores, dim=-1) @ v
        return s.out(context.transpose(1, 2).reshape(B, T, D))

    def forward(s, x, mask):
        x = x + 0.5 * s.ffn1(x)
        x = x + s.attention(x, mask)
        x = x + s.convolution(x)
        x = x + 0.5 * s.ffn2(x)
        return s.final_norm(x)


class Model(nn.Module):
    def __init__(s):
        super().__init__()
        s.stem = nn.Conv1d(M, D, kernel_size=3, stride=2, padding=1)
        s.blocks = nn.ModuleList([Block() for _ in range(2)])
        s.classifier = nn.Linear(D, C)
        for p in s.parameters():  # norms away from their defaults
            if p.dim() == 1:
                p.data += 0.1 * torch.randn_like(p)

    def forward(s, input_features, frame_mask, labels):
        x = s.stem(input_features).transpose(1, 2)
        for block in s.blocks:
            x = block(x, frame_mask)
        kept = frame_mask[:, :, None].float()
        logits = s.classifier((x * kept).sum(dim=1) / kept.sum(dim=1))
        return F.cross_entropy(logits, labels), logits


features = torch.randn(2, M, 2 * T)
frame_mask = torch.ones(2, T, dtype=torch.long)
frame_mask[1, 9:] = 0
export(Model(), {"input_features": features, "frame_mask": frame_mask,
                 "labels": torch.tensor([1, 3])},
       {name: {0: "batch"} for name in ["input_features", "frame_mask", "labels"]})
