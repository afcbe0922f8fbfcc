"""Builds a one-layer decoder from opset 23's new ops (RMSNormalization,
RotaryEmbedding, Attention with grouped-query heads and causal masking) as
an exporter at opset 23 would, and writes its inputs and its loss computed
by NumPy from the operators' specifications.

Usage: make.py DIR   (writes DIR/model.onnx, input_ids.npy, labels.npy,
loss.txt)
"""

import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save_model

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                "Import", "ONNX", "Inputs"))
from check_opset23 import attention, rms_normalization, rotary_embedding

B, T, D, HEADS, KV_HEADS, VOCAB = 2, 6, 16, 4, 2, 11
HEAD = D // HEADS


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(3)
    weights = {
        "embed": rng.standard_normal((VOCAB, D)) * 0.5,
        "norm1": 1 + 0.1 * rng.standard_normal(D),
        "wq": rng.standard_normal((D, D)) * 0.3,
        "wk": rng.standard_normal((D, KV_HEADS * HEAD)) * 0.3,
        "wv": rng.standard_normal((D, KV_HEADS * HEAD)) * 0.3,
        "wo": rng.standard_normal((D, D)) * 0.3,
        "norm2": 1 + 0.1 * rng.standard_normal(D),
        "head": rng.standard_normal((D, VOCAB)) * 0.3,
    }
    weights = {k: v.astype(np.float32) for k, v in weights.items()}
    angles = np.arange(T)[:, None] / 100.0 ** (np.arange(HEAD // 2) / (HEAD // 2))
    constants = {"cos": np.cos(angles).astype(np.float32),
                 "sin": np.sin(angles).astype(np.float32),
                 "positions": np.tile(np.arange(T), (B, 1)).astype(np.int64),
                 "flat_logits": np.array([B * T, VOCAB], dtype=np.int64),
                 "flat_labels": np.array([B * T], dtype=np.int64)}
    node = helper.make_node
    nodes = [
        node("Gather", ["embed", "input_ids"], ["x"]),
        node("RMSNormalization", ["x", "norm1"], ["h"], epsilon=1e-6),
        node("MatMul", ["h", "wq"], ["q0"]),
        node("MatMul", ["h", "wk"], ["k0"]),
        node("MatMul", ["h", "wv"], ["v"]),
        node("RotaryEmbedding", ["q0", "cos", "sin", "positions"], ["q"],
             num_heads=HEADS),
        node("RotaryEmbedding", ["k0", "cos", "sin", "positions"], ["k"],
             num_heads=KV_HEADS),
        node("Attention", ["q", "k", "v"], ["a"], is_causal=1,
             q_num_heads=HEADS, kv_num_heads=KV_HEADS),
        node("MatMul", ["a", "wo"], ["o"]),
        node("Add", ["x", "o"], ["r"]),
        node("RMSNormalization", ["r", "norm2"], ["f"], epsilon=1e-6),
        node("MatMul", ["f", "head"], ["logits"]),
        node("Reshape", ["logits", "flat_logits"], ["scores"]),
        node("Reshape", ["labels", "flat_labels"], ["targets"]),
        node("SoftmaxCrossEntropyLoss", ["scores", "targets"], ["loss"],
             reduction="mean"),
    ]
    initializers = [numpy_helper.from_array(v, k)
                    for k, v in {**weights, **constants}.items()]
    graph = helper.make_graph(
        nodes, "decoder",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [B, T]),
         helper.make_tensor_value_info("labels", TensorProto.INT64, [B, T])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        initializers)
    save_model(helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 23)]), os.path.join(out, "model.onnx"))

    ids = rng.integers(0, VOCAB, size=(B, T)).astype(np.int64)
    labels = rng.integers(0, VOCAB, size=(B, T)).astype(np.int64)
    np.save(os.path.join(out, "input_ids.npy"), ids)
    np.save(os.path.join(out, "labels.npy"), labels)

    w = {k: v.astype(np.float64) for k, v in weights.items()}
    cos, sin = constants["cos"].astype(np.float64), constants["sin"].astype(np.float64)
    x = w["embed"][ids]
    h = rms_normalization(x, w["norm1"], epsilon=1e-6)[0]
    q = rotary_embedding(h @ w["wq"], cos, sin, constants["positions"],
                         num_heads=HEADS)[0]
    k = rotary_embedding(h @ w["wk"], cos, sin, constants["positions"],
                         num_heads=KV_HEADS)[0]
    a = attention(q, k, h @ w["wv"], is_causal=1, q_heads=HEADS,
                  kv_heads=KV_HEADS)[0]
    f = rms_normalization(x + a @ w["wo"], w["norm2"], epsilon=1e-6)[0]
    scores = (f @ w["head"]).reshape(B * T, VOCAB)
    scores = scores - scores.max(axis=1, keepdims=True)
    logp = scores - np.log(np.exp(scores).sum(axis=1, keepdims=True))
    loss = -logp[np.arange(B * T), labels.reshape(-1)].mean()
    with open(os.path.join(out, "loss.txt"), "w") as f:
        f.write("%.6f\n" % loss)


if __name__ == "__main__":
    main()
