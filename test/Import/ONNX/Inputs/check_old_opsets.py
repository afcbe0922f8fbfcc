"""Checks kiln's import of opsets 11 and 12, as older exporters wrote them,
against NumPy: axes and split sizes given as attributes (inputs from opset
13), Softmax and LogSoftmax over the input flattened to 2-D at `axis`
(default 1; one axis from opset 13), Dropout with its ratio attribute
(inference: a copy).

Usage: check_old_opsets.py WORKDIR
Prints "OK <case>" when kiln-run's outputs match within 1e-5 relative +
1e-5.
"""

import os
import sys

import numpy as np

from kiln_case import close, run, single_node


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def flattened(function, x, axis):
    """`function` along axis 1 of x flattened to 2-D at `axis`."""
    rows = x.reshape(int(np.prod(x.shape[:axis])), -1)
    return function(rows, 1).reshape(x.shape)


def cases(rng):
    """(name, opset, op, attributes, inputs, expected outputs)."""
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    m = rng.standard_normal((2, 1, 3)).astype(np.float32)
    log_softmax = lambda v, axis: np.log(softmax(v, axis))
    return [
        ("unsqueeze", 11, "Unsqueeze", {"axes": [0, -1]}, {"x": x},
         {"y": x.reshape(1, 2, 3, 4, 1)}),
        ("squeeze_axes", 11, "Squeeze", {"axes": [-2]}, {"x": m},
         {"y": m.reshape(2, 3)}),
        ("squeeze_all", 12, "Squeeze", {}, {"x": m}, {"y": m.reshape(2, 3)}),
        ("split", 11, "Split", {"axis": 1, "split": [1, 2]}, {"x": x},
         {"a": x[:, :1], "b": x[:, 1:]}),
        ("reduce_sum", 12, "ReduceSum", {"axes": [1], "keepdims": 0},
         {"x": x}, {"y": x.sum(axis=1)}),
        ("softmax_default_axis", 11, "Softmax", {}, {"x": x},
         {"y": flattened(softmax, x, 1)}),
        ("softmax_axis_0", 12, "Softmax", {"axis": 0}, {"x": x},
         {"y": flattened(softmax, x, 0)}),
        ("softmax_last_axis", 11, "Softmax", {"axis": -1}, {"x": x},
         {"y": softmax(x, 2)}),
        ("log_softmax_default_axis", 12, "LogSoftmax", {}, {"x": x},
         {"y": flattened(log_softmax, x, 1)}),
        ("dropout", 11, "Dropout", {"ratio": 0.3}, {"x": x}, {"y": x}),
    ]


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(0)
    for name, opset, op, attributes, inputs, expected in cases(rng):
        model = single_node(op, name, inputs, list(expected), attributes, opset)
        got = run(work, name, model, inputs)
        ok = all(close(got[n], want.astype(np.float64))
                 for n, want in expected.items())
        print(("OK " if ok else "MISMATCH ") + name)


if __name__ == "__main__":
    main()
