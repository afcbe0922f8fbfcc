"""Exports the tiny Whisper-style test model: an audio encoder whose stem is
two Conv1d over 8 mel channels (kernel 3, padding 1, the second of stride
2) with exact GELU, sinusoidal position embeddings (a buffer, as
Whisper keeps them: kiln leaves them untrained by their values), pre-norm
layers whose query and key are each scaled by d^-1/4 before the product,
a key projection without bias, and a classifier over the mean of the
positions. PyTorch's TorchScript ONNX exporter, opset 17, as the shared
fixtures are exported (../export_with_reference.py).

The second GELU takes the permuted convolution, not the reverse: Debian's
PyTorch 1.13 returns a zero gradient from GELU's backward when the
gradient it is given is not contiguous (a permute's), which would make
PyTorch's reference, not kiln, wrong.

Run with Debian's python3-torch (1.13) in this folder; it writes model.onnx,
the inputs, and PyTorch's loss, logits and gradients (reference.npz), which
test/Models/whisper-tiny.test compares kiln with (../compare_with_pytorch.py).
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
def sinusoids(length, channels):
    inc = math.log(10000) / (channels // 2 - 1)
    inv = torch.exp(-inc * torch.arange(channels // 2))
    t = torch.arange(length)[:, None] * inv[None, :]
    return torch.cat([torch.sin(t), torch.cos(t)], dim=1)
class Layer(nn.Module):
    def __init__(s):
        super().__init__()
        s.ln1, s.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        s.q, s.k, s.v, s.o = nn.Linear(D, D), nn.Linear(D, D, bias=False), nn.Linear(D, D), nn.Linear(D, D)
        s.fc1, s.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
    def forward(s, x):
        B = x.shape[0]
        h = s.ln1(x)
        sp = lambda t: t.view(B, T, H, HD).permute(0, 2, 1, 3)
        scale = HD ** -0.25
        q, k, v = sp(s.q(h)) * scale, sp(s.k(h)) * scale, sp(s.v(h))
        p = F.softmax((q @ k.transpose(-1, -2)).float(), dim=-1)
        x = x + s.o((p @ v).permute(0, 2, 1, 3).flatten(2))
        return x + s.fc2(F.gelu(s.fc1(s.ln2(x))))
class Model(nn.Module):
    def __init__(s):
        super().__init__()
        s.conv1 = nn.Conv1d(M, D, kernel_size=3, padding=1)
        s.conv2 = nn.Conv1d(D, D, kernel_size=3, stride=2, padding=1)
        s.register_buffer("positional_embedding", sinusoids(T, D))
        s.layers = nn.ModuleList([Layer() for _ in range(2)])
        s.ln = nn.LayerNorm(D)
        s.cls = nn.Linear(D, C)
        for p in s.parameters():
            if p.dim() == 1:
                p.data += 0.1 * torch.randn_like(p)
    def forward(s, input_features, labels):
        x = F.gelu(s.conv1(input_features))
        x = F.gelu(s.conv2(x).permute(0, 2, 1))
        x = x + s.positional_embedding
        for l in s.layers:
            x = l(x)
        logits = s.cls(s.ln(x).mean(dim=1))
        return F.cross_entropy(logits, labels), logits
feats = torch.randn(2, M, 2 * T)
labels = torch.tensor([1, 3])
export(Model(), {"input_features": feats, "labels": labels}, {"input_features": {0: "batch"}, "labels": {0: "batch"}})
