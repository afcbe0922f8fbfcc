"""Checks kiln's RNN, GRU and LSTM against a NumPy transcription of the
ONNX specification, for what neither the backend tests (forward, one
direction, default activations) nor PyTorch's exports (test/Models/rnn_tiny)
reach: reverse and bidirectional passes with per-batch sequence lengths
(given as an input), batch-first layout with initial states, activations
with alphas and betas, clip, LSTM's peepholes with input_forget (f = 1 - i)
and GRU without linear_before_reset.

Usage: check_recurrent.py WORKDIR
Prints "OK <case>" when kiln-run's outputs match within 1e-5 relative +
1e-5.
"""

import os
import sys

import numpy as np
from onnx import TensorProto, helper

from kiln_case import close, run

ACTIVATIONS = {
    "Sigmoid": lambda x, a, b: 1 / (1 + np.exp(-x)),
    "Tanh": lambda x, a, b: np.tanh(x),
    "Relu": lambda x, a, b: np.maximum(x, 0),
    "Affine": lambda x, a, b: a * x + b,
    "ScaledTanh": lambda x, a, b: a * np.tanh(b * x),
    "HardSigmoid": lambda x, a, b: np.clip(a * x + b, 0, 1),
    "Softsign": lambda x, a, b: x / (1 + np.abs(x)),
    "ThresholdedRelu": lambda x, a, b: np.where(x >= a, x, 0),
}


def activation(name, alpha=None, beta=None, clip=0.0):
    f = ACTIVATIONS[name]
    bound = (lambda x: np.clip(x, -clip, clip)) if clip else (lambda x: x)
    return lambda x: f(bound(x), alpha, beta)


def recurrent(cell, x, w, r, b, lengths, h0, c0, p, fs, direction,
              input_forget=0, linear_before_reset=0):
    """Y [T, dirs, B, H], Y_h and Y_c [dirs, B, H] for time-major x."""
    steps, batch = x.shape[:2]
    dirs, hidden = w.shape[0], r.shape[2]
    per = {"RNN": 1, "GRU": 2, "LSTM": 3}[cell]
    y = np.zeros((steps, dirs, batch, hidden))
    last_h, last_c = np.zeros((dirs, batch, hidden)), np.zeros((dirs, batch, hidden))
    for d in range(dirs):
        f = fs[d * per:(d + 1) * per]
        gates = w.shape[1] // hidden
        wb, rb = np.split(b[d], 2)
        h, c = h0[d], c0[d]
        backward = direction == "reverse" or d == 1
        for t in (reversed(range(steps)) if backward else range(steps)):
            xw = x[t] @ w[d].T + wb
            hr = h @ r[d].T + rb
            part = lambda m, k: m[:, k * hidden:(k + 1) * hidden]
            if cell == "RNN":
                new_h = f[0](xw + hr)
            elif cell == "GRU":
                z = f[0](part(xw, 0) + part(hr, 0))
                reset = f[0](part(xw, 1) + part(hr, 1))
                if linear_before_reset:
                    candidate = f[1](part(xw, 2) + reset * part(hr, 2))
                else:
                    rh = r[d][2 * hidden:3 * hidden]
                    candidate = f[1](part(xw, 2) + (reset * h) @ rh.T + rb[2 * hidden:])
                new_h = (1 - z) * candidate + z * h
            else:
                pi, po, pf = np.split(p[d], 3)
                i = f[0](part(xw, 0) + part(hr, 0) + pi * c)
                forget = 1 - i if input_forget else f[0](part(xw, 2) + part(hr, 2) + pf * c)
                new_c = forget * c + i * f[1](part(xw, 3) + part(hr, 3))
                o = f[0](part(xw, 1) + part(hr, 1) + po * new_c)
                new_h = o * f[2](new_c)
            valid = (t < lengths)[:, None]
            h = np.where(valid, new_h, h)
            if cell == "LSTM":
                c = np.where(valid, new_c, c)
            y[t, d] = np.where(valid, new_h, 0)
        last_h[d], last_c[d] = h, c
    return y, last_h, last_c


def cases(rng):
    normal = lambda *shape: rng.standard_normal(shape).astype(np.float32)
    T, B, I, H = 4, 3, 2, 3
    lengths = np.array([4, 2, 3], dtype=np.int32)
    return [
        ("rnn_relu_clip", "RNN", 1, {"activations": ["Relu"], "clip": 0.8},
         {"x": normal(T, B, I), "w": normal(1, H, I), "r": normal(1, H, H),
          "b": normal(1, 2 * H)}, False),
        # Zero weights and biases summing to alpha: the list's
        # ThresholdedRelu keeps x = alpha (the op alone would not).
        ("rnn_thresholded_at_alpha", "RNN", 1,
         {"activations": ["ThresholdedRelu"], "activation_alpha": [0.5]},
         {"x": normal(T, B, I), "w": np.zeros((1, H, I), np.float32),
          "r": np.zeros((1, H, H), np.float32),
          "b": np.full((1, 2 * H), 0.25, np.float32)}, False),
        ("gru_bidirectional_lengths", "GRU", 2,
         {"direction": "bidirectional",
          "activations": ["HardSigmoid", "Affine", "Sigmoid", "Tanh"],
          "activation_alpha": [0.3, 0.7], "activation_beta": [0.4, 0.1]},
         {"x": normal(T, B, I), "w": normal(2, 3 * H, I), "r": normal(2, 3 * H, H),
          "b": normal(2, 6 * H), "lengths": lengths}, False),
        ("lstm_reverse_batch_first", "LSTM", 1,
         {"direction": "reverse", "layout": 1, "input_forget": 1,
          "activations": ["Sigmoid", "ScaledTanh", "Softsign"],
          "activation_alpha": [1.5], "activation_beta": [0.5]},
         {"x": normal(B, T, I), "w": normal(1, 4 * H, I), "r": normal(1, 4 * H, H),
          "b": normal(1, 8 * H), "lengths": lengths, "h0": normal(B, 1, H),
          "c0": normal(B, 1, H), "p": normal(1, 3 * H)}, True),
    ]


def reference(op, dirs, attributes, inputs, batch_first):
    x = inputs["x"].astype(np.float64)
    if batch_first:
        x = x.transpose(1, 0, 2)
    steps, batch = x.shape[:2]
    hidden = inputs["r"].shape[2]
    state = lambda name: (inputs[name].transpose(1, 0, 2) if batch_first
                          else inputs[name]) if name in inputs else np.zeros((dirs, batch, hidden))
    alphas = list(attributes.get("activation_alpha", []))
    betas = list(attributes.get("activation_beta", []))
    fs = []
    for name in attributes["activations"]:
        alpha = alphas.pop(0) if name in ("Affine", "ScaledTanh", "HardSigmoid",
                                          "ThresholdedRelu") else None
        beta = betas.pop(0) if name in ("Affine", "ScaledTanh", "HardSigmoid") else None
        fs.append(activation(name, alpha, beta, attributes.get("clip", 0.0)))
    y, h, c = recurrent(op, x, inputs["w"], inputs["r"], inputs["b"],
                        inputs.get("lengths", np.full(batch, steps)),
                        state("h0"), state("c0"), inputs.get("p"), fs,
                        attributes.get("direction", "forward"),
                        attributes.get("input_forget", 0))
    if batch_first:
        return y.transpose(2, 0, 1, 3), h.transpose(1, 0, 2), c.transpose(1, 0, 2)
    return y, h, c


def model(op, name, attributes, inputs):
    order = ["x", "w", "r", "b", "lengths", "h0", "c0", "p"]
    names = [n if n in inputs else "" for n in order]
    while not names[-1]:
        names.pop()
    outputs = ["y", "y_h"] + (["y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, names, outputs, hidden_size=inputs["r"].shape[2],
                            **attributes)
    types = {"lengths": TensorProto.INT32}
    graph = helper.make_graph(
        [node], name,
        [helper.make_tensor_value_info(n, types.get(n, TensorProto.FLOAT), inputs[n].shape)
         for n in order if n in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(0)
    for name, op, dirs, attributes, inputs, batch_first in cases(rng):
        expected = reference(op, dirs, attributes, inputs, batch_first)
        actual = run(work, name, model(op, name, attributes, inputs), inputs)
        names = ["y", "y_h", "y_c"][:len(actual)]
        matches = all(close(actual[n], e) for n, e in zip(names, expected))
        print(("OK " if matches else "MISMATCH ") + name)


if __name__ == "__main__":
    main()
