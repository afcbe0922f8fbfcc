"""Checks opset 18's BitwiseAnd, BitwiseOr, BitwiseXor and BitwiseNot, for
which Debian's ONNX (1.12) has no test data, against NumPy: signed and
unsigned integers, negative values, broadcasting.

Usage: check_bitwise.py WORKDIR
Prints "OK <case>" when kiln-run's output equals NumPy's exactly.
"""

import os
import sys

import numpy as np
from onnx import TensorProto, helper

from kiln_case import run

TYPES = {np.int8: TensorProto.INT8, np.int32: TensorProto.INT32,
         np.uint16: TensorProto.UINT16, np.int64: TensorProto.INT64}


def model(name, op, inputs):
    node = helper.make_node(op, list(inputs), ["y"])
    graph = helper.make_graph(
        [node], name,
        [helper.make_tensor_value_info(n, TYPES[a.dtype.type], a.shape)
         for n, a in inputs.items()],
        [helper.make_tensor_value_info("y", TYPES[next(iter(inputs.values())).dtype.type], None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(0)
    a = rng.integers(-2**31, 2**31, (3, 4)).astype(np.int32)
    b = rng.integers(-2**31, 2**31, (4,)).astype(np.int32)
    u = rng.integers(0, 2**16, (2, 5)).astype(np.uint16)
    s = rng.integers(-128, 128, (6,)).astype(np.int8)
    w = rng.integers(-2**62, 2**62, (3,)).astype(np.int64)
    cases = [
        ("bitwise_and", "BitwiseAnd", {"a": a, "b": b}, a & b),
        ("bitwise_or", "BitwiseOr", {"a": a, "b": b}, a | b),
        ("bitwise_xor_int64", "BitwiseXor", {"a": w, "b": w[::-1].copy()}, w ^ w[::-1]),
        ("bitwise_not_uint16", "BitwiseNot", {"u": u}, ~u),
        ("bitwise_not_int8", "BitwiseNot", {"s": s}, ~s),
    ]
    for name, op, inputs, expected in cases:
        actual = run(work, name, model(name, op, inputs), inputs)["y"]
        matches = actual.dtype == expected.dtype and np.array_equal(actual, expected)
        print(("OK " if matches else "MISMATCH ") + name)


if __name__ == "__main__":
    main()
