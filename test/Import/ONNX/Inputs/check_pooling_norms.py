"""Checks kiln's import of ops whose ONNX backend tests use opsets below 11
against NumPy references: GlobalAveragePool, GlobalMaxPool,
InstanceNormalization and Shrink.

Usage: check_pooling_norms.py WORKDIR
Prints "OK <case>" when kiln-run's output matches within 1e-5 relative +
1e-5.
"""

import os
import sys

import numpy as np

from kiln_case import close, run, single_node


def instance_norm(x, scale, bias, epsilon):
    axes = tuple(range(2, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    variance = x.var(axis=axes, keepdims=True)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return ((x - mean) / np.sqrt(variance + epsilon) * scale.reshape(shape)
            + bias.reshape(shape))


def shrink(x, lambd, bias):
    return np.where(x < -lambd, x + bias, np.where(x > lambd, x - bias, 0))


def cases(rng):
    """(name, op, attributes, inputs, reference of the float64 inputs)."""
    image = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    volume = rng.standard_normal((2, 2, 3, 2, 4)).astype(np.float32)
    scale = rng.standard_normal(3).astype(np.float32)
    bias = rng.standard_normal(3).astype(np.float32)
    return [
        ("global_average_pool", "GlobalAveragePool", {}, {"x": image},
         lambda x: x.mean(axis=(2, 3), keepdims=True)),
        ("global_max_pool_3d", "GlobalMaxPool", {}, {"x": volume},
         lambda x: x.max(axis=(2, 3, 4), keepdims=True)),
        ("instance_norm", "InstanceNormalization", {"epsilon": 1e-2},
         {"x": image, "s": scale, "b": bias},
         lambda x, s, b: instance_norm(x, s, b, 1e-2)),
        ("shrink_soft", "Shrink", {"lambd": 0.7, "bias": 0.7}, {"x": image},
         lambda x: shrink(x, 0.7, 0.7)),
        ("shrink_hard", "Shrink", {"lambd": 1.5}, {"x": image},
         lambda x: shrink(x, 1.5, 0.0)),
    ]


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(0)
    for name, op, attributes, inputs, reference in cases(rng):
        model = single_node(op, name, inputs, ["y"], attributes)
        actual = run(work, name, model, inputs)["y"]
        expected = reference(*[a.astype(np.float64) for a in inputs.values()])
        print(("OK " if close(actual, expected) else "MISMATCH ") + name)


if __name__ == "__main__":
    main()
