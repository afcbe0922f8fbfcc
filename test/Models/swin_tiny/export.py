"""Exports the tiny Swin-style test model: a 2x2 patch embedding by Conv2d,
two blocks of window attention over 4x4 windows of an 8x8 grid (the second
shifted by torch.roll, with the shifted windows' -100 mask as a buffer
named `mask`, which PyTorch does not train), a learned relative position
bias gathered from a table per head, window partition and merge by
view/permute, GELU MLPs, and a classifier over the mean of the patches.
PyTorch's TorchScript ONNX exporter, opset 17, as the shared fixtures are
exported (../export_with_reference.py).

Run with Debian's python3-torch (1.13) in this folder; it writes model.onnx,
the inputs, and PyTorch's loss, logits and gradients (reference.npz), which
test/Models/swin-tiny.test compares kiln with (../compare_with_pytorch.py).
Weights are random (seed 0).
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, "..")
from export_with_reference import export  # noqa: E402

torch.manual_seed(0)
D, H, W, HEADS, C = 16, 8, 8, 2, 4
WS, SHIFT = 4, 2
HD = D // HEADS
class WindowAttention(nn.Module):
    def __init__(s):
        super().__init__()
        s.table = nn.Parameter(0.02 * torch.randn((2 * WS - 1) ** 2, HEADS))
        coords = torch.stack(torch.meshgrid(torch.arange(WS), torch.arange(WS), indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + WS - 1
        s.register_buffer("index", rel[..., 0] * (2 * WS - 1) + rel[..., 1])
        s.qkv, s.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
    def forward(s, x, mask):
        Bw, N, _ = x.shape
        q, k, v = s.qkv(x).reshape(Bw, N, 3, HEADS, HD).permute(2, 0, 3, 1, 4)
        attn = (q * HD ** -0.5) @ k.transpose(-2, -1)
        bias = s.table[s.index.view(-1)].view(N, N, HEADS).permute(2, 0, 1)
        attn = attn + bias[None]
        if mask is not None:
            nw = mask.shape[0]
            attn = attn.view(Bw // nw, nw, HEADS, N, N) + mask[None, :, None]
            attn = attn.view(-1, HEADS, N, N)
        attn = F.softmax(attn, dim=-1)
        return s.proj((attn @ v).transpose(1, 2).reshape(Bw, N, D))
def partition(x):
    B, Hh, Ww, Cc = x.shape
    x = x.view(B, Hh // WS, WS, Ww // WS, WS, Cc)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, WS * WS, Cc)
def reverse(w, B):
    x = w.view(B, H // WS, W // WS, WS, WS, D)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(B, H, W, D)
class Block(nn.Module):
    def __init__(s, shift):
        super().__init__()
        s.shift = shift
        s.n1, s.n2 = nn.LayerNorm(D), nn.LayerNorm(D)
        s.attn = WindowAttention()
        s.mlp = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(), nn.Linear(2 * D, D))
        if shift:
            img = torch.zeros(1, H, W, 1)
            cnt = 0
            for hs in (slice(0, -WS), slice(-WS, -SHIFT), slice(-SHIFT, None)):
                for ws in (slice(0, -WS), slice(-WS, -SHIFT), slice(-SHIFT, None)):
                    img[:, hs, ws, :] = cnt
                    cnt += 1
            mw = partition(img).squeeze(-1)
            m = mw[:, None, :] - mw[:, :, None]
            s.register_buffer("mask", m.masked_fill(m != 0, -100.0).masked_fill(m == 0, 0.0))
        else:
            s.mask = None
    def forward(s, x):
        B = x.shape[0]
        h = s.n1(x).view(B, H, W, D)
        if s.shift:
            h = torch.roll(h, shifts=(-SHIFT, -SHIFT), dims=(1, 2))
        h = reverse(s.attn(partition(h), s.mask), B)
        if s.shift:
            h = torch.roll(h, shifts=(SHIFT, SHIFT), dims=(1, 2))
        x = x + h.reshape(B, H * W, D)
        return x + s.mlp(s.n2(x))
class Model(nn.Module):
    def __init__(s):
        super().__init__()
        s.patch = nn.Conv2d(3, D, kernel_size=2, stride=2)
        s.blocks = nn.ModuleList([Block(0), Block(SHIFT)])
        s.norm, s.head = nn.LayerNorm(D), nn.Linear(D, C)
        for p in s.parameters():
            if p.dim() == 1:
                p.data += 0.1 * torch.randn_like(p)
    def forward(s, pixel_values, labels):
        x = s.patch(pixel_values).flatten(2).transpose(1, 2)
        for b in s.blocks:
            x = b(x)
        logits = s.head(s.norm(x).mean(1))
        return F.cross_entropy(logits, labels), logits
export(Model(), {"pixel_values": torch.randn(2, 3, 2 * H, 2 * W), "labels": torch.tensor([0, 3])}, {"pixel_values": {0: "batch"}, "labels": {0: "batch"}})
