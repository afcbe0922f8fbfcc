"""Checks kiln's import of opset 23's Attention, RotaryEmbedding and
RMSNormalization against NumPy references written from the ONNX
specification.

Usage: check_opset23.py WORKDIR
Prints "OK <case>" when every output of kiln-run matches within 1e-5
relative + 1e-5 (kiln computes in fp64 or rounds to fp32 where the
reference computes in fp64 from the same fp32 inputs), "MISMATCH <case>"
otherwise. libonnx 1.12 knows no opset 23, so the models are built without
its checker.
"""

import os
import sys

import numpy as np
from onnx import TensorProto, helper

from kiln_case import close, run


def softmax_rows(scores):
    """Softmax over the last axis; a row that is all -inf gives zeros."""
    peak = np.max(scores, axis=-1, keepdims=True)
    safe = np.where(np.isfinite(peak), peak, 0.0)
    e = np.exp(scores - safe)
    total = e.sum(axis=-1, keepdims=True)
    return np.where(total > 0, e / np.where(total > 0, total, 1.0), 0.0)


def attention(q, k, v, mask=None, past_k=None, past_v=None, is_causal=0,
              q_heads=None, kv_heads=None, scale=None):
    """Attention-23: Y, present_key, present_value."""
    def heads(x, n):
        if x.ndim == 4:
            return x
        b, t, h = x.shape
        return x.reshape(b, t, n, h // n).transpose(0, 2, 1, 3)
    flat = q.ndim == 3
    q, k, v = heads(q, q_heads), heads(k, kv_heads), heads(v, kv_heads)
    past = 0
    if past_k is not None:
        past = past_k.shape[2]
        k = np.concatenate([past_k, k], axis=2)
        v = np.concatenate([past_v, v], axis=2)
    group = q.shape[1] // k.shape[1]
    kk, vv = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    if scale is None:
        scale = 1.0 / np.sqrt(q.shape[-1])
    root = np.sqrt(scale)
    scores = (q * root) @ (kk * root).transpose(0, 1, 3, 2)
    bias = np.zeros(scores.shape[-2:])
    if is_causal:
        i = np.arange(scores.shape[-2])[:, None]
        j = np.arange(scores.shape[-1])[None, :]
        bias = np.where(j <= i + past, 0.0, -np.inf)
    if mask is not None:
        bias = bias + (np.where(mask, 0.0, -np.inf) if mask.dtype == bool
                       else mask)
    y = softmax_rows(scores + bias) @ vv
    if flat:
        b, h, t, d = y.shape
        y = y.transpose(0, 2, 1, 3).reshape(b, t, h * d)
    return [y, k, v]


def rms_normalization(x, scale, axis=-1, epsilon=1e-5):
    axes = tuple(range(axis % x.ndim, x.ndim))
    rms = np.sqrt(np.mean(x * x, axis=axes, keepdims=True) + epsilon)
    return [x / rms * scale]


def rotary_embedding(x, cos, sin, position_ids=None, interleaved=0,
                     rotary_embedding_dim=0, num_heads=None):
    """RotaryEmbedding-23, on [B, S, H, D]."""
    shape = x.shape
    x = (x.transpose(0, 2, 1, 3) if x.ndim == 4 else
         x.reshape(shape[0], shape[1], num_heads, -1))
    r = rotary_embedding_dim or x.shape[3]
    if position_ids is not None:
        cos, sin = cos[position_ids], sin[position_ids]
    cos, sin = cos[:, :, None, :], sin[:, :, None, :]
    head, rest = x[..., :r], x[..., r:]
    if interleaved:
        x1, x2 = head[..., 0::2], head[..., 1::2]
    else:
        x1, x2 = head[..., :r // 2], head[..., r // 2:]
    real, imag = cos * x1 - sin * x2, sin * x1 + cos * x2
    if interleaved:
        rotated = np.stack([real, imag], axis=-1).reshape(head.shape)
    else:
        rotated = np.concatenate([real, imag], axis=-1)
    y = np.concatenate([rotated, rest], axis=-1)
    return [y.transpose(0, 2, 1, 3) if len(shape) == 4 else y.reshape(shape)]


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def cases(rng):
    b, t, d = 2, 5, 8
    causal_pad = np.ones((b, 1, t, t), dtype=bool)
    causal_pad[1, :, :, 3:] = False  # the second sample's last keys
    causal_pad[1, :, 0, :] = False   # and a fully masked row: zeros
    yield ("attention_4d", "Attention", {},
           [f32(rng, b, 2, t, d), f32(rng, b, 2, t, d), f32(rng, b, 2, t, d)],
           attention)
    yield ("attention_causal_scale", "Attention",
           dict(is_causal=1, scale=0.3),
           [f32(rng, b, 2, t, d), f32(rng, b, 2, t, d), f32(rng, b, 2, t, d)],
           attention)
    yield ("attention_3d_gqa_boolean_mask", "Attention",
           dict(q_num_heads=4, kv_num_heads=2),
           [f32(rng, b, t, 4 * d), f32(rng, b, t, 2 * d),
            f32(rng, b, t, 2 * 6), causal_pad],
           attention)
    yield ("attention_additive_mask_cross", "Attention", {},
           [f32(rng, b, 2, 3, d), f32(rng, b, 2, t, d), f32(rng, b, 2, t, d),
            f32(rng, 3, t)],
           attention)
    yield ("attention_cache_causal", "Attention", dict(is_causal=1),
           [f32(rng, b, 2, 2, d), f32(rng, b, 2, 2, d), f32(rng, b, 2, 2, d),
            f32(rng, 1, 1, 2, 6), f32(rng, b, 2, 4, d), f32(rng, b, 2, 4, d)],
           attention)
    positions = rng.integers(0, 16, size=(b, t)).astype(np.int64)
    yield ("rotary_4d_positions", "RotaryEmbedding", {},
           [f32(rng, b, 2, t, d), f32(rng, 16, d // 2), f32(rng, 16, d // 2),
            positions], rotary_embedding)
    yield ("rotary_3d_interleaved_partial", "RotaryEmbedding",
           dict(interleaved=1, rotary_embedding_dim=4, num_heads=2),
           [f32(rng, b, t, 2 * d), f32(rng, 16, 2), f32(rng, 16, 2),
            positions], rotary_embedding)
    yield ("rotary_4d_caches_per_token", "RotaryEmbedding",
           dict(rotary_embedding_dim=6),
           [f32(rng, b, 3, t, d), f32(rng, b, t, 3), f32(rng, b, t, 3)],
           rotary_embedding)
    yield ("rms_normalization_last", "RMSNormalization", {},
           [f32(rng, b, t, d), f32(rng, d)], rms_normalization)
    yield ("rms_normalization_axis1_leading_ones", "RMSNormalization",
           dict(axis=1, epsilon=1e-3),
           [f32(rng, b, t, d), f32(rng, 1, t, d)], rms_normalization)
    yield ("rms_normalization_scale_varies_by_row", "RMSNormalization",
           dict(axis=-1), [f32(rng, b, t, d), f32(rng, t, d)],
           rms_normalization)


INPUTS = {"Attention": ["Q", "K", "V", "attn_mask", "past_key", "past_value"],
          "RMSNormalization": ["X", "scale"],
          "RotaryEmbedding": ["X", "cos_cache", "sin_cache", "position_ids"]}
OUTPUTS = {"Attention": ["Y", "present_key", "present_value"],
           "RMSNormalization": ["Y"], "RotaryEmbedding": ["Y"]}
TYPES = {np.dtype(np.float32): TensorProto.FLOAT,
         np.dtype(np.int64): TensorProto.INT64,
         np.dtype(bool): TensorProto.BOOL}


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(0)
    for name, op, attributes, arrays, reference in cases(rng):
        names = INPUTS[op][:len(arrays)]
        wide = [a.astype(np.float64) if a.dtype == np.float32 else a
                for a in arrays]
        keywords = {"axis": "axis", "epsilon": "epsilon", "is_causal":
                    "is_causal", "q_num_heads": "q_heads", "kv_num_heads":
                    "kv_heads", "scale": "scale", "interleaved": "interleaved",
                    "rotary_embedding_dim": "rotary_embedding_dim",
                    "num_heads": "num_heads"}
        expected = reference(*wide, **{keywords[k]: v
                                      for k, v in attributes.items()})
        outputs = OUTPUTS[op][:len(expected)]
        node = helper.make_node(op, names, outputs, **attributes)
        graph = helper.make_graph(
            [node], name,
            [helper.make_tensor_value_info(n, TYPES[a.dtype], a.shape)
             for n, a in zip(names, arrays)],
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
             for n in outputs])
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", 23)])
        got = run(work, name, model, dict(zip(names, arrays)))
        ok = all(close(got[output], want)
                 for output, want in zip(outputs, expected))
        print(("OK " if ok else "MISMATCH ") + name)


if __name__ == "__main__":
    main()
