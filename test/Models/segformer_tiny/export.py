"""Exports the tiny SegFormer-style test model (a hierarchical vision
Transformer for segmentation): overlapping patch embeddings (Conv2d of
kernel 7, stride 4, padding 3; then kernel 3, stride 2) with LayerNorm over
the flattened patches, efficient self-attention whose keys and values come
from a spatially reduced sequence (a strided Conv2d over the patches
reshaped to an image, then LayerNorm), Mix-FFN (a depthwise 3x3 Conv2d
between the linear layers, GELU), and an all-MLP decoder that upsamples
the second stage bilinearly to the first's resolution, concatenates, fuses
with a 1x1 Conv2d and BatchNorm, and classifies every pixel with a
cross-entropy over a label map at a quarter of the image, ignoring 255.
PyTorch's TorchScript ONNX exporter, opset 17, in training mode
(../export_with_reference.py).

Run with Debian's python3-torch (1.13) in this folder; it writes model.onnx,
the inputs, and PyTorch's loss, logits and gradients (reference.npz), which
test/Models/segformer-tiny.test compares kiln with (../compare_with_pytorch.py).
Weights are random (seed 0).
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, "..")
from export_with_reference import export  # noqa: E402

torch.manual_seed(0)
IMAGE, CLASSES, HEADS = 32, 4, 2
WIDTHS, REDUCTIONS = (16, 32), (2, 1)


class PatchEmbedding(nn.Module):
    def __init__(s, inputs, width, kernel, stride):
        super().__init__()
        s.conv = nn.Conv2d(inputs, width, kernel, stride, kernel // 2)
        s.norm = nn.LayerNorm(width)

    def forward(s, image):
        x = s.conv(image)
        B, C, height, width = x.shape
        return s.norm(x.flatten(2).transpose(1, 2)), height, width


class EfficientAttention(nn.Module):
    def __init__(s, width, reduction):
        super().__init__()
        s.q, s.kv, s.out = nn.Linear(width, width), nn.Linear(width, 2 * width), nn.Linear(width, width)
        s.reduction = reduction
        if reduction > 1:
            s.reduce = nn.Conv2d(width, width, reduction, reduction)
            s.reduce_norm = nn.LayerNorm(width)

    def forward(s, x, height, width):
        B, N, C = x.shape
        HD = C // HEADS
        q = s.q(x).view(B, N, HEADS, HD).transpose(1, 2)
        if s.reduction > 1:
            image = x.transpose(1, 2).reshape(B, C, height, width)
            x = s.reduce_norm(s.reduce(image).flatten(2).transpose(1, 2))
        k, v = s.kv(x).view(B, -1, 2, HEADS, HD).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) * HD ** -0.5
        context = F.softmax(scores, dim=-1) @ v
        return s.out(context.transpose(1, 2).reshape(B, N, C))


class MixFFN(nn.Module):
    def __init__(s, width):
        super().__init__()
        s.fc1, s.fc2 = nn.Linear(width, 2 * width), nn.Linear(2 * width, width)
        s.depthwise = nn.Conv2d(2 * width, 2 * width, 3, 1, 1, groups=2 * width)

    def forward(s, x, height, width):
        h = s.fc1(x)
        B, N, C = h.shape
        h = s.depthwise(h.transpose(1, 2).reshape(B, C, height, width))
        return s.fc2(F.gelu(h.flatten(2).transpose(1, 2)))


class Block(nn.Module):
    def __init__(s, width, reduction):
        super().__init__()
        s.norm1, s.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        s.attention, s.ffn = EfficientAttention(width, reduction), MixFFN(width)

    def forward(s, x, height, width):
        x = x + s.attention(s.norm1(x), height, width)
        return x + s.ffn(s.norm2(x), height, width)


class Model(nn.Module):
    def __init__(s):
        super().__init__()
        s.embeddings = nn.ModuleList([PatchEmbedding(3, WIDTHS[0], 7, 4),
                                      PatchEmbedding(WIDTHS[0], WIDTHS[1], 3, 2)])
        s.blocks = nn.ModuleList([Block(w, r) for w, r in zip(WIDTHS, REDUCTIONS)])
        s.norms = nn.ModuleList([nn.LayerNorm(w) for w in WIDTHS])
        s.projections = nn.ModuleList([nn.Linear(w, 16) for w in WIDTHS])
        s.fuse = nn.Conv2d(32, 16, 1, bias=False)
        s.fuse_norm = nn.BatchNorm2d(16)
        s.classifier = nn.Conv2d(16, CLASSES, 1)
        for p in s.parameters():  # norms away from their defaults
            if p.dim() == 1:
                p.data += 0.1 * torch.randn_like(p)

    def forward(s, pixel_values, labels):
        B = pixel_values.shape[0]
        x, stages = pixel_values, []
        for embedding, block, norm in zip(s.embeddings, s.blocks, s.norms):
            x, height, width = embedding(x)
            x = norm(block(x, height, width))
            x = x.transpose(1, 2).reshape(B, -1, height, width)
            stages.append(x)
        size = stages[0].shape[2:]
        decoded = [F.interpolate(p(x.flatten(2).transpose(1, 2)).transpose(1, 2)
                                 .reshape(B, -1, x.shape[2], x.shape[3]),
                                 size=size, mode="bilinear", align_corners=False)
                   for p, x in zip(s.projections, stages)]
        fused = F.relu(s.fuse_norm(s.fuse(torch.cat(decoded[::-1], dim=1))))
        logits = s.classifier(fused)
        return F.cross_entropy(logits, labels, ignore_index=255), logits


pixel_values = torch.randn(2, 3, IMAGE, IMAGE)
labels = torch.randint(0, CLASSES, (2, IMAGE // 4, IMAGE // 4))
labels[1, :2] = 255
export(Model(), {"pixel_values": pixel_values, "labels": labels},
       {name: {0: "batch"} for name in ["pixel_values", "labels"]})
