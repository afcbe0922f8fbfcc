"""Exports the tiny Mamba-style test model: a selective state-space
language model. Each block normalizes (RMS norm), projects to two branches,
runs a causal depthwise Conv1d (left padding, the output cut back to the
sequence) and SiLU on one, derives the step size (softplus of a low-rank
projection plus a bias), B and C from it, discretizes A = -exp(A_log) per
channel and state, and scans the sequence step by step (the loop unrolled
by the tracer: exp, outer products, a running state), adds the skip term
D x, gates with SiLU of the other branch and projects back into the
residual stream; a tied output projection and the next-token loss.
PyTorch's TorchScript ONNX exporter, opset 17, as the shared fixtures are
exported (../export_with_reference.py).

Run with Debian's python3-torch (1.13) in this folder; it writes model.onnx,
the inputs, and PyTorch's loss, logits and gradients (reference.npz), which
test/Models/mamba-tiny.test compares kiln with (../compare_with_pytorch.py).
Weights are random (seed 0).
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, "..")
from export_with_reference import export  # noqa: E402

torch.manual_seed(0)
D, E, N, R, K, V, T = 16, 32, 4, 2, 4, 40, 10


class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.norm = nn.Parameter(1.0 + 0.1 * torch.randn(D))
        s.in_proj = nn.Linear(D, 2 * E, bias=False)
        s.conv = nn.Conv1d(E, E, K, groups=E, padding=K - 1)
        s.x_proj = nn.Linear(E, R + 2 * N, bias=False)
        s.dt_proj = nn.Linear(R, E)
        s.A_log = nn.Parameter(torch.log(torch.arange(1, N + 1).float()).repeat(E, 1)
                               + 0.1 * torch.randn(E, N))
        s.D = nn.Parameter(torch.ones(E) + 0.1 * torch.randn(E))
        s.out_proj = nn.Linear(E, D, bias=False)

    def forward(s, h):
        x = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-5) * s.norm
        x, z = s.in_proj(x).chunk(2, dim=-1)
        x = F.silu(s.conv(x.transpose(1, 2))[..., :T].transpose(1, 2))
        dt, b, c = s.x_proj(x).split([R, N, N], dim=-1)
        dt = F.softplus(s.dt_proj(dt))  # [B, T, E]
        a = -torch.exp(s.A_log)  # [E, N]
        state = torch.zeros(x.shape[0], E, N)
        ys = []
        for t in range(T):
            decay = torch.exp(dt[:, t, :, None] * a)
            state = decay * state + (dt[:, t] * x[:, t])[..., None] * b[:, t, None, :]
            ys.append((state * c[:, t, None, :]).sum(-1))
        y = torch.stack(ys, dim=1) + x * s.D
        return h + s.out_proj(y * F.silu(z))


class Model(nn.Module):
    def __init__(s):
        super().__init__()
        s.embedding = nn.Embedding(V, D)
        s.blocks = nn.ModuleList([Block() for _ in range(2)])
        s.norm = nn.LayerNorm(D)

    def forward(s, input_ids, labels):
        h = s.embedding(input_ids)
        for block in s.blocks:
            h = block(h)
        logits = s.norm(h) @ s.embedding.weight.t()
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1))
        return loss, logits


model = Model()
input_ids = torch.randint(0, V, (2, T))
export(model, {"input_ids": input_ids, "labels": input_ids.clone()},
       {"input_ids": {0: "batch"}, "labels": {0: "batch"}})
