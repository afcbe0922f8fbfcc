"""Checks kiln's QuantizeLinear and DequantizeLinear against a NumPy
transcription of the ONNX specification where the backend tests (opset 13,
uint8, per tensor and along axis 1) do not reach: a negative axis, 16-bit
integers, opset 21's blocks (the last one shorter), a QuantizeLinear read
back by a DequantizeLinear (imported as one kiln.fake_quantize) and one read
back with another scale (not fused). Writes the models as WORKDIR/<case>.onnx
for the FileCheck lines of quantization.test.

Usage: check_quantization.py WORKDIR
Prints "OK <case>" when kiln-run's outputs equal NumPy's exactly (integers)
or within 1e-6 relative (floats: the same fp32 operations, once each).
"""

import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from kiln_case import close, run

ONNX_TYPES = {np.float32: TensorProto.FLOAT, np.int8: TensorProto.INT8,
              np.uint8: TensorProto.UINT8, np.int16: TensorProto.INT16,
              np.uint16: TensorProto.UINT16}


def along(parameter, shape, axis, block):
    """A scale or zero point broadcast to `shape` (ONNX's granularities)."""
    if parameter.size == 1:
        return parameter.reshape(())
    axis %= len(shape)
    if block:
        return np.repeat(parameter, block, axis=axis).take(
            range(shape[axis]), axis=axis)
    return parameter.reshape([-1] + [1] * (len(shape) - axis - 1))


def quantize(x, scale, zero, axis=1, block=0):
    info = np.iinfo(zero.dtype)
    s = along(scale, x.shape, axis, block)
    z = along(zero, x.shape, axis, block).astype(np.float32)
    level = np.rint(x / s) + z
    return np.clip(level, info.min, info.max).astype(zero.dtype)


def dequantize(q, scale, zero, axis=1, block=0):
    s = along(scale, q.shape, axis, block)
    z = along(zero, q.shape, axis, block).astype(np.float32)
    return ((q.astype(np.float32) - z) * s).astype(np.float32)


def model(name, nodes, x, parameters, outputs, opset):
    inits = [numpy_helper.from_array(v, n) for n, v in parameters.items()]
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("x", ONNX_TYPES[x.dtype.type], x.shape)],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def cases(rng):
    x = rng.standard_normal((4, 7)).astype(np.float32)
    row = rng.uniform(0.01, 0.03, 4).astype(np.float32)
    column = rng.uniform(0.01, 0.03, 7).astype(np.float32)
    blocks = rng.uniform(1e-4, 3e-4, (4, 3)).astype(np.float32)
    block_zero = rng.integers(-900, 900, (4, 3)).astype(np.int16)
    column_zero = rng.integers(-20, 20, 7).astype(np.int8)
    levels = rng.integers(0, 65535, (4, 7)).astype(np.uint16)
    wide_zero = rng.integers(0, 65535, (4, 3)).astype(np.uint16)
    q = lambda inputs, out="y", **a: helper.make_node("QuantizeLinear", inputs, [out], **a)
    dq = lambda inputs, out="y", **a: helper.make_node("DequantizeLinear", inputs, [out], **a)
    return [
        ("quantize_negative_axis", x,
         [q(["x", "s", "z"], axis=-1)], {"s": column, "z": column_zero},
         [("y", TensorProto.INT8)], 13,
         quantize(x, column, column_zero, axis=-1)),
        ("quantize_int16_blocks", x,
         [q(["x", "s", "z"], axis=1, block_size=3)], {"s": blocks, "z": block_zero},
         [("y", TensorProto.INT16)], 21,
         quantize(x, blocks, block_zero, axis=1, block=3)),
        ("dequantize_uint16_blocks", levels,
         [dq(["x", "s", "z"], axis=-1, block_size=3)], {"s": blocks, "z": wide_zero},
         [("y", TensorProto.FLOAT)], 21,
         dequantize(levels, blocks, wide_zero, axis=-1, block=3)),
        ("fake_quantize_pair", x,
         [q(["x", "s", "z"], "q", axis=0), dq(["q", "s", "z"], axis=0)],
         {"s": row, "z": np.zeros(4, np.int8)}, [("y", TensorProto.FLOAT)], 17,
         dequantize(quantize(x, row, np.zeros(4, np.int8), axis=0), row,
                    np.zeros(4, np.int8), axis=0)),
        ("other_scale_pair", x,
         [q(["x", "s", "z"], "q"), dq(["q", "t", "z"])],
         {"s": np.array(0.02, np.float32), "t": np.array(0.05, np.float32),
          "z": np.array(128, np.uint8)}, [("y", TensorProto.FLOAT)], 17,
         dequantize(quantize(x, np.float32(0.02), np.uint8(128)),
                    np.float32(0.05), np.uint8(128))),
    ]


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(0)
    for name, x, nodes, parameters, outputs, opset, expected in cases(rng):
        actual = run(work, name, model(name, nodes, x, parameters, outputs, opset),
                     {"x": x})["y"]
        if expected.dtype == np.float32:
            matches = close(actual, expected, rtol=1e-6, atol=0)
        else:
            matches = actual.dtype == expected.dtype and np.array_equal(actual, expected)
        print(("OK " if matches else "MISMATCH ") + name)


if __name__ == "__main__":
    main()
