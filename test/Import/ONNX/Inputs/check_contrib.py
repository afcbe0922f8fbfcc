"""Checks kiln's import of ONNX Runtime's com.microsoft fusions against
NumPy transcriptions of their documentation (ONNX Runtime's
docs/ContribOperators.md): FusedMatMul with every transposition and alpha,
the GELUs with and without their bias, BiasAdd, SkipLayerNormalization and
SkipSimplifiedLayerNormalization with every output, and the default
domain's SimplifiedLayerNormalization.

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


def model(name, op, inputs, outputs, attributes, domain="com.microsoft"):
    node = helper.make_node(op, list(inputs), list(outputs), domain=domain,
                            **attributes)
    graph = helper.make_graph(
        [node], name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape)
         for n, a in inputs.items()],
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
        ("simplified_layer_norm", "SimplifiedLayerNormalization",
         {"x": x, "gamma": gamma}, {"epsilon": 1e-6},
         lambda x, gamma: list(rms_norm(x, gamma, 1e-6)), ""),
    ]


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(0)
    for name, op, inputs, attributes, reference, *domain in cases(rng):
        expected = reference(*[v.astype(np.float64) for v in inputs.values()])
        outputs = ["y%d" % i if e is not None else "" for i, e in enumerate(expected)]
        actual = run(work, name,
                     model(name, op, inputs, outputs, attributes, *domain), inputs)
        matches = all(close(actual[n], e) for n, e in zip(outputs, expected) if n)
        print(("OK " if matches else "MISMATCH ") + name)


if __name__ == "__main__":
    main()
