"""Checks kiln's import of ops whose ONNX backend tests use opsets below 11
(or newer than Debian's ONNX) or cover few cases against NumPy references:
GlobalAveragePool, GlobalMaxPool, InstanceNormalization, Shrink,
BatchNormalization (over a sequence [N, C, L], in inference and in training
mode with its running statistics), MeanVarianceNormalization (over other
axes), GroupNormalization (scale and bias per group at opset 18, per
channel from 21), LpNormalization, LpPool (p = 3 with strides, pads, dilations and ceil_mode;
opset 11's default p) and GlobalLpPool.

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


def batch_norm(x, scale, bias, mean, variance, epsilon):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return ((x - mean.reshape(shape)) / np.sqrt(variance.reshape(shape) + epsilon)
            * scale.reshape(shape) + bias.reshape(shape))


def batch_norm_training(x, scale, bias, mean, variance, epsilon, momentum):
    axes = (0,) + tuple(range(2, x.ndim))
    batch_mean, batch_variance = x.mean(axis=axes), x.var(axis=axes)
    return (batch_norm(x, scale, bias, batch_mean, batch_variance, epsilon),
            mean * momentum + batch_mean * (1 - momentum),
            variance * momentum + batch_variance * (1 - momentum))


def mean_variance_norm(x, axes):
    mean = x.mean(axis=axes, keepdims=True)
    deviation = np.sqrt((x * x).mean(axis=axes, keepdims=True) - mean * mean)
    return (x - mean) / (deviation + 1e-9)


def group_norm(x, scale, bias, groups, epsilon, per_channel):
    grouped = x.reshape(x.shape[0], groups, -1)
    mean = grouped.mean(axis=2, keepdims=True)
    variance = grouped.var(axis=2, keepdims=True)
    y = ((grouped - mean) / np.sqrt(variance + epsilon))
    if per_channel:
        shape = (1, -1) + (1,) * (x.ndim - 2)
        return y.reshape(x.shape) * scale.reshape(shape) + bias.reshape(shape)
    return (y * scale.reshape(1, -1, 1) + bias.reshape(1, -1, 1)).reshape(x.shape)


def lp_pool(x, kernel, strides, pads, dilations, p, ceil_mode):
    """(sum |x|^p)^(1/p) over each window of [N, C, spatial...], padding
    (and what ceil_mode adds past it) counting as zeros."""
    spatial = x.ndim - 2
    extents = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    rounding = np.ceil if ceil_mode else np.floor
    outputs = [int(rounding((size + pads[i] + pads[i + spatial] - extent) / stride)) + 1
               for i, (size, extent, stride)
               in enumerate(zip(x.shape[2:], extents, strides))]
    widths = [(0, 0), (0, 0)] + [
        (pads[i], max(pads[i + spatial],
                      (outputs[i] - 1) * strides[i] + extents[i] - x.shape[2 + i] - pads[i]))
        for i in range(spatial)]
    padded = np.pad(np.abs(x) ** p, widths)
    y = np.zeros(x.shape[:2] + tuple(outputs))
    for index in np.ndindex(*outputs):
        window = padded[(slice(None), slice(None)) + tuple(
            slice(o * s, o * s + e, d) for o, s, e, d
            in zip(index, strides, extents, dilations))]
        y[(slice(None), slice(None)) + index] = window.sum(axis=tuple(range(2, x.ndim)))
    return y ** (1.0 / p)


def shrink(x, lambd, bias):
    return np.where(x < -lambd, x + bias, np.where(x > lambd, x - bias, 0))


def cases(rng):
    """(name, op, attributes, inputs, reference of the float64 inputs[,
    opset])."""
    image = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    volume = rng.standard_normal((2, 2, 3, 2, 4)).astype(np.float32)
    scale = rng.standard_normal(3).astype(np.float32)
    bias = rng.standard_normal(3).astype(np.float32)
    sequence = rng.standard_normal((2, 3, 7)).astype(np.float32)
    mean = rng.standard_normal(3).astype(np.float32)
    variance = rng.uniform(0.5, 2.0, 3).astype(np.float32)
    statistics = {"x": sequence, "s": scale, "b": bias, "m": mean, "v": variance}
    channels = rng.standard_normal((2, 6, 3, 2)).astype(np.float32)
    per_group = {"x": channels, "s": rng.standard_normal(3).astype(np.float32),
                 "b": rng.standard_normal(3).astype(np.float32)}
    per_channel = {"x": channels, "s": rng.standard_normal(6).astype(np.float32),
                   "b": rng.standard_normal(6).astype(np.float32)}
    return [
        ("batch_norm_1d", "BatchNormalization", {"epsilon": 1e-3}, statistics,
         lambda x, s, b, m, v: batch_norm(x, s, b, m, v, 1e-3)),
        ("batch_norm_training", "BatchNormalization",
         {"training_mode": 1, "momentum": 0.7}, statistics,
         lambda x, s, b, m, v: batch_norm_training(x, s, b, m, v, 1e-5, 0.7)),
        ("mean_variance_norm", "MeanVarianceNormalization", {"axes": [1, -1]},
         {"x": image}, lambda x: mean_variance_norm(x, (1, 3))),
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
        ("group_norm_18", "GroupNormalization", {"num_groups": 3}, per_group,
         lambda x, s, b: group_norm(x, s, b, 3, 1e-5, False), 18),
        ("group_norm_21", "GroupNormalization",
         {"num_groups": 2, "epsilon": 1e-3}, per_channel,
         lambda x, s, b: group_norm(x, s, b, 2, 1e-3, True), 21),
        ("lp_norm_l2", "LpNormalization", {}, {"x": image},
         lambda x: x / np.sqrt((x * x).sum(axis=-1, keepdims=True))),
        ("lp_norm_l1", "LpNormalization", {"axis": 1, "p": 1}, {"x": image},
         lambda x: x / np.abs(x).sum(axis=1, keepdims=True)),
        ("lp_pool_2d_p3_ceil", "LpPool",
         {"kernel_shape": [2, 3], "strides": [2, 2], "pads": [1, 0, 0, 1],
          "dilations": [1, 2], "p": 3, "ceil_mode": 1}, {"x": image},
         lambda x: lp_pool(x, [2, 3], [2, 2], [1, 0, 0, 1], [1, 2], 3, True), 18),
        ("lp_pool_1d_default_p", "LpPool", {"kernel_shape": [3], "strides": [2]},
         {"x": sequence},
         lambda x: lp_pool(x, [3], [2], [0, 0], [1], 2, False), 11),
        ("global_lp_pool_p1", "GlobalLpPool", {"p": 1}, {"x": volume},
         lambda x: np.abs(x).sum(axis=(2, 3, 4), keepdims=True)),
        ("global_lp_pool", "GlobalLpPool", {}, {"x": image},
         lambda x: np.sqrt((x * x).sum(axis=(2, 3), keepdims=True))),
    ]


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(0)
    for name, op, attributes, inputs, reference, *opset in cases(rng):
        expected = reference(*[a.astype(np.float64) for a in inputs.values()])
        expected = expected if isinstance(expected, tuple) else (expected,)
        outputs = ["y", "running_mean", "running_var"][:len(expected)]
        model = single_node(op, name, inputs, outputs, attributes, *opset)
        actual = run(work, name, model, inputs)
        matches = all(close(actual[n], e) for n, e in zip(outputs, expected))
        print(("OK " if matches else "MISMATCH ") + name)


if __name__ == "__main__":
    main()
