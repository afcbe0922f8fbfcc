"""Checks kiln's sequence ops, which exist only at import (a sequence is
the list of its tensors), against NumPy, on models whose sequences stay
inside the graph: SplitToSequence (a chunk size with a shorter last chunk,
sizes, and unbinding without keepdims), SequenceInsert and SequenceErase at
positions and by default, SequenceAt, SequenceLength, SequenceEmpty,
SequenceConstruct, Identity of a sequence, and ConcatFromSequence (concat
and stack along a new axis).

Usage: check_sequences.py WORKDIR
Prints "OK <case>" when kiln-run's outputs equal NumPy's (exactly: the ops
only move values).
"""

import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from kiln_case import run


def const(name, values):
    return helper.make_node("Constant", [], [name],
                            value=numpy_helper.from_array(np.array(values, np.int64)))


def model(name, nodes, inputs, outputs):
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape) for n, a in inputs.items()],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 3)).astype(np.float32)
    y = rng.standard_normal((2, 1, 3)).astype(np.float32)
    F, I64 = TensorProto.FLOAT, TensorProto.INT64
    node = helper.make_node
    cases = [
        ("split_erase_insert_concat",
         [const("two", 2), node("SplitToSequence", ["x", "two"], ["s"], axis=1),
          node("SequenceErase", ["s"], ["e"]), const("zero", 0),
          node("SequenceInsert", ["e", "y", "zero"], ["i"]),
          node("Identity", ["i"], ["j"]),
          node("ConcatFromSequence", ["j"], ["out"], axis=1)],
         {"x": x, "y": y}, [("out", F)],
         {"out": np.concatenate([y, x[:, 0:2], x[:, 2:4]], 1)}),
        ("sizes_at_length",
         [const("sizes", [1, 2]), node("SplitToSequence", ["x", "sizes"], ["s"], axis=-1),
          const("last", -1), node("SequenceAt", ["s", "last"], ["out"]),
          node("SequenceLength", ["s"], ["n"])],
         {"x": x}, [("out", F), ("n", I64)],
         {"out": x[..., 1:3], "n": np.array(2, np.int64)}),
        ("unbind_stack",
         [node("SplitToSequence", ["x"], ["s"], axis=0, keepdims=0),
          node("ConcatFromSequence", ["s"], ["out"], axis=-1, new_axis=1)],
         {"x": x}, [("out", F)], {"out": np.stack([x[0], x[1]], -1)}),
        ("empty_construct_insert",
         [node("SequenceEmpty", [], ["empty"]),
          node("SequenceInsert", ["empty", "y"], ["one"]),
          node("SequenceConstruct", ["y", "y2"], ["pair"]),
          node("SequenceAt", ["pair", "one_index"], ["second"]),
          const("one_index", 1),
          node("SequenceInsert", ["one", "second", "zero"], ["two"]),
          const("zero", 0),
          node("ConcatFromSequence", ["two"], ["out"], axis=0)],
         {"y": y, "y2": 2 * y}, [("out", F)], {"out": np.concatenate([2 * y, y], 0)}),
    ]
    for name, nodes, inputs, outputs, expected in cases:
        # Constants first: ONNX graphs are in topological order.
        nodes = [n for n in nodes if n.op_type == "Constant"] + \
                [n for n in nodes if n.op_type != "Constant"]
        actual = run(work, name, model(name, nodes, inputs, outputs), inputs)
        matches = all(actual[n].dtype == e.dtype and np.array_equal(actual[n], e)
                      for n, e in expected.items())
        print(("OK " if matches else "MISMATCH ") + name)


if __name__ == "__main__":
    main()
