"""Checks kiln's import of ONNX Runtime's com.microsoft fusions against
NumPy transcriptions of their documentation (ONNX Runtime's
docs/ContribOperators.md): FusedMatMul with every transposition and alpha,
the GELUs with and without their bias, BiasAdd, SkipLayerNormalization and
SkipSimplifiedLayerNormalization with every output, the default domain's
SimplifiedLayerNormalization, and Attention and MultiHeadAttention with
every kind of mask_index, attention_bias, unidirectional, scale and
qkv_hidden_sizes (cross-attention for MultiHeadAttention), and
RotaryEmbedding (a position offset or ids, interleaved, partial).

Usage: check_contrib.py WORKDIR
Prints "OK <case>" when kiln-run's outputs match within 1e-5 relative +
1e-5.
"""

import math
import os
import sys

import numpy as np
from onnx import TensorProto, helper

from kiln_case import close, run

ERF = np.vectorize(math.erf)
TYPES = {np.float32: TensorProto.FLOAT, np.int32: TensorProto.INT32,
         np.int64: TensorProto.INT64}


def gelu(x):
    return 0.5 * x * (1 + ERF(x / math.sqrt(2)))


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def layer_norm(x, gamma, beta, epsilon):
    mean = x.mean(-1, keepdims=True)
    inv = 1 / np.sqrt(x.var(-1, keepdims=True) + epsilon)
    return (x - mean) * inv * gamma + (0 if beta is None else beta), mean, inv


def rms_norm(x, gamma, epsilon):
    inv = 1 / np.sqrt((x * x).mean(-1, keepdims=True) + epsilon)
    return x * inv * gamma, inv


def attend(q, k, v, heads, additive, causal, scale=None, filter=-10000.0):
    """ONNX Runtime's attention of [B, S, heads * D] projections: masked
    scores take mask_filter_value (`filter`) added, as its kernels add it."""
    split = lambda t: t.reshape(t.shape[0], t.shape[1], heads, -1).transpose(0, 2, 1, 3)
    q, k, v = split(q), split(k), split(v)
    scale = scale or 1 / math.sqrt(q.shape[-1])
    scores = q @ k.transpose(0, 1, 3, 2) * scale + additive
    if causal:
        scores = scores + np.triu(np.full(scores.shape[-2:], filter), 1)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    out = (p / p.sum(-1, keepdims=True)) @ v
    return out.transpose(0, 2, 1, 3).reshape(out.shape[0], out.shape[2], -1)


def padding(mask, batch, queries, keys, filter=-10000.0):
    """The additive mask of a mask_index: lengths [B], ends and starts
    [2B], or 0/1 [B, T]."""
    position = np.arange(keys)
    if mask.shape == (batch,):
        valid = position < mask[:, None]
    elif mask.shape == (2 * batch,):
        valid = (position < mask[:batch, None]) & (position >= mask[batch:, None])
    else:
        valid = mask != 0
    return np.where(valid, 0.0, filter)[:, None, None, :]


def rotary(x, cos, sin, positions, dim, interleaved):
    """[B, H, S, D] rotated at `positions` [B or 1, S] by the caches."""
    c, s = cos[positions][:, None], sin[positions][:, None]
    rotated, rest = x[..., :dim], x[..., dim:]
    if interleaved:
        x1, x2 = rotated[..., 0::2], rotated[..., 1::2]
    else:
        x1, x2 = rotated[..., :dim // 2], rotated[..., dim // 2:]
    r1, r2 = x1 * c - x2 * s, x1 * s + x2 * c
    if interleaved:
        pairs = np.stack([r1, r2], -1).reshape(rotated.shape)
    else:
        pairs = np.concatenate([r1, r2], -1)
    return np.concatenate([pairs, rest], -1)


def heads_first(x, heads):
    return x.reshape(x.shape[0], x.shape[1], heads, -1).transpose(0, 2, 1, 3)


def model(name, op, inputs, outputs, attributes, domain="com.microsoft"):
    node = helper.make_node(op, list(inputs), list(outputs), domain=domain,
                            **attributes)
    graph = helper.make_graph(
        [node], name,
        [helper.make_tensor_value_info(n, TYPES[a.dtype.type], a.shape)
         for n, a in inputs.items() if n],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
         for n in outputs if n])
    return helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])


def cases(rng):
    normal = lambda *shape: rng.standard_normal(shape).astype(np.float32)
    x, skip, bias = normal(2, 3, 8), normal(2, 3, 8), normal(8)
    gamma, beta = normal(8), normal(8)
    a, b = normal(2, 3, 4), normal(5, 3)
    batch_first, rows = normal(4, 2, 3), normal(2, 3, 5)
    w = normal(8, 24)
    attention_bias = normal(1, 4, 3, 3)
    raw_mask = np.array([[1, 0, 1], [1, 1, 0]], np.int32)
    memory, memory_values = normal(2, 5, 8), normal(2, 5, 4)
    angles = np.arange(10)[:, None] * np.array([1.0, 0.1])
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    return [
        ("fused_matmul_transposed", "FusedMatMul",
         {"a": a, "b": b}, {"alpha": 0.5, "transA": 1, "transB": 1},
         lambda a, b: [0.5 * (a.transpose(0, 2, 1) @ b.T)]),
        ("fused_matmul_batch", "FusedMatMul",
         {"a": batch_first, "b": rows}, {"transBatchA": 1},
         lambda a, b: [a.transpose(1, 0, 2) @ b]),
        ("fused_matmul_batch_transposed", "FusedMatMul",
         {"a": normal(3, 2, 4), "b": normal(3, 2, 5)},
         {"transBatchA": 1, "transA": 1, "transBatchB": 1},
         lambda a, b: [a.transpose(1, 2, 0) @ b.transpose(1, 0, 2)]),
        ("gelu", "Gelu", {"x": x}, {}, lambda x: [gelu(x)]),
        ("bias_gelu", "BiasGelu", {"x": x, "bias": bias}, {},
         lambda x, bias: [gelu(x + bias)]),
        ("fast_gelu_bias", "FastGelu", {"x": x, "bias": bias}, {},
         lambda x, bias: [gelu_tanh(x + bias)]),
        ("fast_gelu", "FastGelu", {"x": x}, {}, lambda x: [gelu_tanh(x)]),
        ("quick_gelu", "QuickGelu", {"x": x}, {"alpha": 1.5},
         lambda x: [x / (1 + np.exp(-1.5 * x))]),
        ("bias_add", "BiasAdd", {"x": x, "bias": bias, "skip": skip}, {},
         lambda x, bias, skip: [x + bias + skip]),
        ("skip_layer_norm", "SkipLayerNormalization",
         {"x": x, "skip": skip, "gamma": gamma, "beta": beta, "bias": bias},
         {"epsilon": 1e-5},
         lambda x, skip, gamma, beta, bias: [
             *layer_norm(x + skip + bias, gamma, beta, 1e-5), x + skip + bias]),
        ("skip_simplified_layer_norm", "SkipSimplifiedLayerNormalization",
         {"x": x, "skip": skip[0], "gamma": gamma, "bias": bias},
         {"epsilon": 1e-6},
         lambda x, skip, gamma, bias: [
             rms_norm(x + skip + bias, gamma, 1e-6)[0], None,
             rms_norm(x + skip + bias, gamma, 1e-6)[1], x + skip + bias]),
        ("attention_lengths", "Attention",
         {"x": x, "w": w, "b": normal(24), "mask": np.array([3, 1], np.int32)},
         {"num_heads": 2},
         lambda x, w, b, mask: [attend(*np.split(x @ w + b, 3, -1), 2,
                                       padding(mask, 2, 3, 3), False)]),
        # Batch 1's first query row is all masked (key 0 by padding, the
        # others as future keys), and attends to all three; a filter value
        # of -30 keeps its scores exact in f32.
        ("attention_left_padding_causal_bias", "Attention",
         {"x": x, "w": w, "b": normal(24), "mask": np.array([3, 3, 0, 1], np.int32),
          "": None, "bias": attention_bias},
         {"num_heads": 4, "unidirectional": 1, "scale": 0.3,
          "mask_filter_value": -30.0},
         lambda x, w, b, mask, bias: [attend(
             *np.split(x @ w + b, 3, -1), 4,
             padding(mask, 2, 3, 3, -30.0) + bias, True, 0.3, -30.0)]),
        ("attention_sizes_raw_mask", "Attention",
         {"x": x, "w": normal(8, 20), "b": normal(20), "mask": raw_mask},
         {"num_heads": 2, "qkv_hidden_sizes": [4, 4, 12]},
         lambda x, w, b, mask: [attend(
             *np.split(x @ w + b, [4, 8], -1), 2, padding(mask, 2, 3, 3), False)]),
        ("multi_head_attention_cross", "MultiHeadAttention",
         {"q": x, "k": memory, "v": memory_values, "b": normal(8 + 8 + 4),
          "mask": np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32)},
         {"num_heads": 2},
         lambda q, k, v, b, mask: [attend(
             q + b[:8], k + b[8:16], v + b[16:], 2, padding(mask, 2, 3, 5), False)]),
        ("rotary_offset", "RotaryEmbedding",
         {"x": x, "positions": np.array([2], np.int64), "cos": cos, "sin": sin},
         {"num_heads": 2},
         lambda x, positions, cos, sin: [rotary(
             heads_first(x, 2), cos, sin, (positions[0] + np.arange(3))[None],
             4, False).transpose(0, 2, 1, 3).reshape(x.shape)]),
        ("rotary_ids_interleaved_partial", "RotaryEmbedding",
         {"x": normal(2, 2, 3, 8), "positions": np.array([[0, 1, 2], [5, 6, 7]], np.int64),
          "cos": cos, "sin": sin},
         {"interleaved": 1, "rotary_embedding_dim": 4},
         lambda x, positions, cos, sin: [rotary(x, cos, sin, positions, 4, True)]),
        ("simplified_layer_norm", "SimplifiedLayerNormalization",
         {"x": x, "gamma": gamma}, {"epsilon": 1e-6},
         lambda x, gamma: list(rms_norm(x, gamma, 1e-6)), ""),
    ]


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(0)
    for name, op, inputs, attributes, reference, *domain in cases(rng):
        given = {n: v for n, v in inputs.items() if v is not None}
        expected = reference(*[v.astype(np.float64) if v.dtype == np.float32 else v
                               for v in given.values()])
        outputs = ["y%d" % i if e is not None else "" for i, e in enumerate(expected)]
        actual = run(work, name,
                     model(name, op, inputs, outputs, attributes, *domain), given)
        matches = all(close(actual[n], e) for n, e in zip(outputs, expected) if n)
        print(("OK " if matches else "MISMATCH ") + name)


if __name__ == "__main__":
    main()
