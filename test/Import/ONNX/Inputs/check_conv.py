"""Checks kiln's import of ONNX Conv against a direct NumPy convolution:
1-D to 3-D, strides, dilations, explicit and automatic padding, groups
(depthwise too), bias, and kernels that tile the input (patch embeddings,
with a remainder the convolution skips); then the gradients kiln-run
--train computes for the weights and bias of two of them; then
ConvTranspose against its definition as a scatter of the input through the
kernel (strides, dilations, pads, output_padding, groups, bias).

Usage: check_conv.py WORKDIR
Prints "OK <case>" when kiln-run's output matches within 1e-5 relative +
1e-5 (fp64 accumulation against NumPy's fp64 reference of fp32 inputs).
"""

import itertools
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from kiln_case import close, kiln_run, read, run, single_node


def reference(x, w, b, strides, dilations, pads, groups):
    """The convolution as ONNX defines it, element by element."""
    spatial = x.ndim - 2
    begin, end = pads[:spatial], pads[spatial:]
    x = np.pad(x, [(0, 0), (0, 0)] + list(zip(begin, end)))
    kernel = w.shape[2:]
    extent = [d * (k - 1) + 1 for d, k in zip(dilations, kernel)]
    out = [(x.shape[2 + i] - extent[i]) // strides[i] + 1 for i in range(spatial)]
    n, maps = x.shape[0], w.shape[0]
    per_group = w.shape[1]
    y = np.zeros((n, maps, *out))
    for m in range(maps):
        g = m // (maps // groups)
        channels = x[:, g * per_group:(g + 1) * per_group]
        for o in itertools.product(*[range(s) for s in out]):
            window = tuple(slice(o[i] * strides[i],
                                 o[i] * strides[i] + extent[i], dilations[i])
                           for i in range(spatial))
            y[(slice(None), m) + o] = (channels[(slice(None), slice(None)) + window]
                                       * w[m]).reshape(n, -1).sum(axis=1)
        if b is not None:
            y[:, m] += b[m]
    return y


def same_pads(sizes, kernel, strides, dilations, upper):
    begin, end = [], []
    for size, k, s, d in zip(sizes, kernel, strides, dilations):
        total = max(0, (-(-size // s) - 1) * s + d * (k - 1) + 1 - size)
        first = total // 2 if upper else total - total // 2
        begin.append(first)
        end.append(total - first)
    return begin + end


# name: (input shape, weight shape, bias, attributes)
CASES = {
    "conv1d_stride_pads_bias": ((2, 3, 11), (4, 3, 3), True,
                                {"strides": [2], "pads": [1, 2]}),
    "conv2d_dilated_groups": ((1, 4, 9, 8), (6, 2, 3, 2), False,
                              {"dilations": [2, 1], "group": 2}),
    "conv2d_same_lower_stride": ((1, 2, 7, 6), (3, 2, 3, 3), True,
                                 {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    "conv2d_same_upper": ((1, 2, 5, 6), (2, 2, 2, 3), False,
                          {"auto_pad": "SAME_UPPER"}),
    "conv2d_valid": ((1, 1, 6, 5), (2, 1, 3, 3), False, {"auto_pad": "VALID"}),
    "depthwise": ((2, 3, 6, 6), (3, 1, 3, 3), True,
                  {"group": 3, "pads": [1, 1, 1, 1]}),
    "patch_embedding": ((2, 3, 8, 10), (5, 3, 4, 4), True, {"strides": [4, 4]}),
    "conv3d": ((1, 2, 4, 5, 3), (2, 2, 2, 3, 2), True,
               {"strides": [1, 2, 1], "pads": [0, 1, 1, 1, 0, 0]}),
}


def convolve(x, w, b, attributes):
    """`reference` with the node's attributes."""
    spatial = x.ndim - 2
    strides = attributes.get("strides", [1] * spatial)
    dilations = attributes.get("dilations", [1] * spatial)
    pads = attributes.get("pads", [0] * 2 * spatial)
    auto_pad = attributes.get("auto_pad", "NOTSET")
    if auto_pad.startswith("SAME"):
        pads = same_pads(x.shape[2:], w.shape[2:], strides, dilations,
                         auto_pad == "SAME_UPPER")
    return reference(x.astype(np.float64), w.astype(np.float64),
                     None if b is None else b.astype(np.float64),
                     strides, dilations, pads, attributes.get("group", 1))


def check_gradients(work, name, rng):
    """Trains loss = sum(conv(x) * r) for one step and compares the weight
    and bias gradients kiln writes with the reference: the loss is linear in
    each, so a unit change of one weight changes it by exactly that
    weight's gradient."""
    xs, ws, _, attributes = CASES[name]
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    b = rng.standard_normal(ws[0]).astype(np.float32)
    r = rng.standard_normal(convolve(x, w, b, attributes).shape).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], **attributes),
             helper.make_node("Mul", ["y", "r"], ["yr"]),
             helper.make_node("ReduceSum", ["yr"], ["loss"], keepdims=0)]
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape)
         for n, a in (("x", x), ("r", r))],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    saved = os.path.join(work, name + "_grads")
    kiln_run(work, name + "_train", model, {"x": x, "r": r},
             ["--train", "--steps", "1", "--save-gradients", saved])
    grads = {n: read(os.path.join(saved, n + ".pb")) for n in ("w", "b")}
    want_w = np.zeros(ws)
    for index in np.ndindex(*ws):
        unit = np.zeros(ws)
        unit[index] = 1
        want_w[index] = (convolve(x, unit, None, attributes) * r).sum()
    want_b = r.astype(np.float64).sum(axis=tuple(i for i in range(r.ndim) if i != 1))
    ok = close(grads["w"], want_w) and close(grads["b"], want_b)
    print(("OK " if ok else "MISMATCH ") + name + " gradients")


def transposed(x, w, b, strides, dilations, pads, output_padding, groups):
    """ConvTranspose as ONNX defines it: each input element scattered
    through the kernel, strides apart, then the pads cropped."""
    spatial = x.ndim - 2
    n, channels = x.shape[:2]
    per_group = w.shape[1]
    maps = per_group * groups
    kernel = w.shape[2:]
    full = [strides[d] * (x.shape[2 + d] - 1) + output_padding[d]
            + dilations[d] * (kernel[d] - 1) + 1 for d in range(spatial)]
    y = np.zeros((n, maps, *full))
    for c in range(channels):
        g = c // (channels // groups)
        for i in itertools.product(*[range(s) for s in x.shape[2:]]):
            for k in itertools.product(*[range(s) for s in kernel]):
                o = tuple(i[d] * strides[d] + k[d] * dilations[d]
                          for d in range(spatial))
                y[(slice(None), slice(g * per_group, (g + 1) * per_group)) + o] += (
                    x[(slice(None), c) + i][:, None] * w[(c, slice(None)) + k])
    crop = tuple(slice(pads[d], full[d] - pads[spatial + d]) for d in range(spatial))
    y = y[(slice(None), slice(None)) + crop]
    if b is not None:
        y += b.reshape((1, -1) + (1,) * spatial)
    return y


# name: (input shape, weight shape, bias, attributes)
TRANSPOSED = {
    "conv_transpose_2d_groups": ((1, 4, 3, 4), (4, 3, 3, 2), True,
                                 {"strides": [2, 3], "dilations": [1, 2],
                                  "pads": [1, 0, 0, 1],
                                  "output_padding": [1, 0], "group": 2}),
    "conv_transpose_1d": ((2, 3, 5), (3, 2, 4), False, {"strides": [2]}),
}


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(0)
    for name, (xs, ws, bias, attributes) in CASES.items():
        x = rng.standard_normal(xs).astype(np.float32)
        w = rng.standard_normal(ws).astype(np.float32)
        b = rng.standard_normal(ws[0]).astype(np.float32) if bias else None
        expected = convolve(x, w, b, attributes)
        arrays = {"x": x, "w": w}
        if b is not None:
            arrays["b"] = b
        model = single_node("Conv", name, arrays, ["y"], attributes)
        actual = run(work, name, model, arrays)["y"]
        print(("OK " if close(actual, expected) else "MISMATCH ") + name)
    for name in ("conv2d_dilated_groups", "patch_embedding"):
        check_gradients(work, name, rng)
    for name, (xs, ws, bias, attributes) in TRANSPOSED.items():
        x = rng.standard_normal(xs).astype(np.float32)
        w = rng.standard_normal(ws).astype(np.float32)
        arrays = {"x": x, "w": w}
        if bias:
            arrays["b"] = rng.standard_normal(
                ws[1] * attributes.get("group", 1)).astype(np.float32)
        spatial = len(xs) - 2
        expected = transposed(
            x.astype(np.float64), w.astype(np.float64),
            arrays["b"].astype(np.float64) if bias else None,
            attributes.get("strides", [1] * spatial),
            attributes.get("dilations", [1] * spatial),
            attributes.get("pads", [0] * 2 * spatial),
            attributes.get("output_padding", [0] * spatial),
            attributes.get("group", 1))
        model = single_node("ConvTranspose", name, arrays, ["y"], attributes)
        actual = run(work, name, model, arrays)["y"]
        print(("OK " if close(actual, expected) else "MISMATCH ") + name)


if __name__ == "__main__":
    main()
