"""Exports the tiny BERT test model at opset 14, below the opset that has
LayerNormalization, as older exports are: the exporter writes each
nn.LayerNorm out as mean, difference, pow, mean, add, sqrt, division,
weight and bias. The embedding and output norms are the hand-written
LayerNorm of the original PyTorch BERT code (the weight in front; its
`(x - u)`, written twice, the tracer keeps once). Otherwise BERT for sequence classification: word,
position and token type embeddings, post-LN layers over the extended
padding mask, erf GELU, the tanh pooler over the first token and
cross-entropy over its classes. PyTorch's TorchScript ONNX exporter, in
training mode (../export_with_reference.py).

Run with Debian's python3-torch (1.13) in this folder; it writes model.onnx,
the inputs, and PyTorch's loss, logits and gradients (reference.npz), which
test/Models/bert14-tiny.test compares kiln with (../compare_with_pytorch.py),
and the same model at opset 17 (model_opset17.onnx).
Weights are random (seed 0).
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, "..")
from export_with_reference import export  # noqa: E402

torch.manual_seed(0)
D, H, V, T, CLASSES = 32, 4, 40, 10, 3
HD = D // H


class HandWrittenLayerNorm(nn.Module):
    def __init__(s, size, eps=1e-12):
        super().__init__()
        s.weight, s.bias = nn.Parameter(torch.ones(size)), nn.Parameter(torch.zeros(size))
        s.eps = eps

    def forward(s, x):
        u = x.mean(-1, keepdim=True)
        v = (x - u).pow(2).mean(-1, keepdim=True)
        x = (x - u) / torch.sqrt(v + s.eps)
        return s.weight * x + s.bias


class Layer(nn.Module):
    def __init__(s):
        super().__init__()
        s.q, s.k, s.v, s.out = (nn.Linear(D, D) for _ in range(4))
        s.attention_norm = nn.LayerNorm(D, eps=1e-12)
        s.up, s.down = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
        s.output_norm = HandWrittenLayerNorm(D)

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
        s.words = nn.Embedding(V, D)
        s.positions = nn.Embedding(T, D)
        s.token_types = nn.Embedding(2, D)
        s.embedding_norm = HandWrittenLayerNorm(D)
        s.layers = nn.ModuleList([Layer() for _ in range(2)])
        s.pooler, s.classifier = nn.Linear(D, D), nn.Linear(D, CLASSES)
        for p in s.parameters():  # norms and biases away from their defaults
            if p.dim() == 1:
                p.data += 0.1 * torch.randn_like(p)

    def forward(s, input_ids, token_type_ids, attention_mask, labels):
        positions = torch.arange(T, device=input_ids.device)
        x = s.words(input_ids) + s.positions(positions) + s.token_types(token_type_ids)
        x = s.embedding_norm(x)
        bias = (1.0 - attention_mask[:, None, None, :].float()) * -10000.0
        for layer in s.layers:
            x = layer(x, bias)
        logits = s.classifier(torch.tanh(s.pooler(x[:, 0])))
        return F.cross_entropy(logits, labels), logits


input_ids = torch.randint(0, V, (2, T))
attention_mask = torch.ones(2, T, dtype=torch.long)
attention_mask[1, 6:] = 0
token_type_ids = torch.zeros(2, T, dtype=torch.long)
token_type_ids[:, 4:] = 1
labels = torch.tensor([2, 0])
inputs = {"input_ids": input_ids, "token_type_ids": token_type_ids,
          "attention_mask": attention_mask, "labels": labels}
dynamic_axes = {name: {0: "batch"} for name in inputs}
model = Model()
export(model, inputs, dynamic_axes, opset_version=14)

# The same model at opset 17, where the exporter's norms are
# LayerNormalization: bert14-tiny.test compiles both to the same step.
torch.onnx.export(model, tuple(inputs.values()), "model_opset17.onnx",
                  input_names=list(inputs), output_names=["loss", "logits"],
                  opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                  do_constant_folding=False, dynamic_axes=dynamic_axes)
