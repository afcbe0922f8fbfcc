"""Exports the tiny wav2vec2-style test model (speech from the raw
waveform, as wav2vec2, HuBERT and WavLM read it): a convolutional feature
encoder (Conv1d of stride 5 over the samples, GroupNorm with one group per
channel, GELU, two more strided Conv1d), a feature projection, SpecAugment's
time masking (masked frames replaced by a trained vector through Where), a
positional convolution whose weight is weight-normed (weight_g, weight_v)
and grouped, with an even kernel whose last frame is cut, post-LN encoder
layers with self-attention over a padding mask, and a classifier over the
mean of the kept frames. PyTorch's TorchScript ONNX exporter, opset 17, in
training mode (../export_with_reference.py).

Run with Debian's python3-torch (1.13) in this folder; it writes model.onnx,
the inputs, and PyTorch's loss, logits and gradients (reference.npz), which
test/Models/wav2vec2-tiny.test compares kiln with (../compare_with_pytorch.py).
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
CONV, D, H, C, SAMPLES = 16, 32, 4, 5, 400
HD = D // H
T = ((SAMPLES - 10) // 5 + 1 - 3) // 2 + 1  # frames after the first two convolutions
T = (T - 2) // 2 + 1


class FeatureEncoder(nn.Module):
    def __init__(s):
        super().__init__()
        s.conv0 = nn.Conv1d(1, CONV, 10, stride=5, bias=False)
        s.norm0 = nn.GroupNorm(CONV, CONV)
        s.conv1 = nn.Conv1d(CONV, CONV, 3, stride=2, bias=False)
        s.conv2 = nn.Conv1d(CONV, CONV, 2, stride=2, bias=False)

    def forward(s, samples):
        x = F.gelu(s.norm0(s.conv0(samples[:, None, :])))
        features = F.gelu(s.conv2(F.gelu(s.conv1(x))))
        if features.requires_grad and not torch.jit.is_tracing():
            # Debian's PyTorch 1.13 computes Conv1d's weight gradient from
            # a transposed (non-contiguous) output gradient wrongly, from
            # uninitialized memory: give it a contiguous one.
            features.register_hook(lambda gradient: gradient.contiguous())
        return features


class PositionalConvolution(nn.Module):
    def __init__(s):
        super().__init__()
        conv = nn.Conv1d(D, D, kernel_size=8, padding=4, groups=4)
        s.conv = nn.utils.weight_norm(conv, name="weight", dim=2)

    def forward(s, x):
        h = s.conv(x.transpose(1, 2))[:, :, :-1]
        return F.gelu(h).transpose(1, 2)


class Layer(nn.Module):
    def __init__(s):
        super().__init__()
        s.q, s.k, s.v, s.out = (nn.Linear(D, D) for _ in range(4))
        s.attention_norm = nn.LayerNorm(D)
        s.ffn = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(), nn.Linear(2 * D, D))
        s.final_norm = nn.LayerNorm(D)

    def forward(s, x, bias):
        B = x.shape[0]
        q, k, v = (p(x).view(B, T, H, HD).transpose(1, 2) for p in (s.q, s.k, s.v))
        scores = (q * HD ** -0.5) @ k.transpose(-1, -2) + bias
        context = F.softmax(scores, dim=-1) @ v
        x = s.attention_norm(x + s.out(context.transpose(1, 2).reshape(B, T, D)))
        return s.final_norm(x + s.ffn(x))


class Model(nn.Module):
    def __init__(s):
        super().__init__()
        s.encoder = FeatureEncoder()
        s.feature_norm = nn.LayerNorm(CONV)
        s.projection = nn.Linear(CONV, D)
        s.masked_spec_embed = nn.Parameter(torch.rand(D))
        s.positions = PositionalConvolution()
        s.norm = nn.LayerNorm(D)
        s.layers = nn.ModuleList([Layer() for _ in range(2)])
        s.classifier = nn.Linear(D, C)
        for p in s.parameters():  # norms away from their defaults
            if p.dim() == 1:
                p.data += 0.1 * torch.randn_like(p)

    def forward(s, samples, frame_mask, time_mask, labels):
        x = s.projection(s.feature_norm(s.encoder(samples).transpose(1, 2)))
        x = torch.where(time_mask[:, :, None], s.masked_spec_embed, x)
        x = s.norm(x + s.positions(x))
        bias = (1.0 - frame_mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        for layer in s.layers:
            x = layer(x, bias)
        kept = frame_mask[:, :, None].float()
        logits = s.classifier((x * kept).sum(dim=1) / kept.sum(dim=1))
        return F.cross_entropy(logits, labels), logits


samples = torch.randn(2, SAMPLES)
frame_mask = torch.ones(2, T, dtype=torch.long)
frame_mask[1, 15:] = 0
time_mask = torch.zeros(2, T, dtype=torch.bool)
time_mask[0, 3:6] = True
time_mask[1, 8:11] = True
export(Model(), {"samples": samples, "frame_mask": frame_mask,
                 "time_mask": time_mask, "labels": torch.tensor([1, 3])},
       {name: {0: "batch"} for name in ["samples", "frame_mask", "time_mask", "labels"]})
