"""Checks what opset 18 added to Resize, which the ONNX 1.12 backend tests
do not cover, against NumPy: `axes` (sizes for some axes only) and
`keep_aspect_ratio_policy` (one scale for all, the smaller or larger).

Usage: check_resize.py WORKDIR
Prints "OK <case>" when kiln-run's output matches within 1e-5 relative +
1e-5.
"""

import os
import sys

import numpy as np
from onnx import numpy_helper

from kiln_case import close, run, single_node


def linear(x, axis, outputs, scale):
    """Linear interpolation along `axis` with half_pixel coordinates."""
    size = x.shape[axis]
    source = (np.arange(outputs) + 0.5) / scale - 0.5
    first = np.floor(source).astype(int)
    t = source - first
    low = np.take(x, np.clip(first, 0, size - 1), axis=axis)
    high = np.take(x, np.clip(first + 1, 0, size - 1), axis=axis)
    shape = [1] * x.ndim
    shape[axis] = outputs
    t = t.reshape(shape)
    return low * (1 - t) + high * t


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    x = np.random.default_rng(0).standard_normal((1, 2, 4, 6)).astype(np.float32)
    wide = x.astype(np.float64)
    cases = [
        # Sizes for the last two axes, stretched to each.
        ("axes", {"mode": "linear", "axes": [2, 3]}, [3, 9],
         linear(linear(wide, 2, 3, 3 / 4), 3, 9, 9 / 6)),
        # One scale, the smaller of 3/4 and 3/6: 4x6 becomes 2x3.
        ("not_larger", {"mode": "linear", "axes": [-2, -1],
                        "keep_aspect_ratio_policy": "not_larger"}, [3, 3],
         linear(linear(wide, 2, 2, 0.5), 3, 3, 0.5)),
        # The larger, 3/4: 4x6 becomes 3x5 (4.5 rounds to even).
        ("not_smaller", {"mode": "linear", "axes": [2, 3],
                         "keep_aspect_ratio_policy": "not_smaller"}, [3, 3],
         linear(linear(wide, 2, 3, 0.75), 3, 4, 0.75)),
    ]
    for name, attributes, sizes, expected in cases:
        model = single_node("Resize", name, {"x": x}, ["y"], attributes, 18)
        # Inputs 1 and 2 (roi, scales) absent; sizes from an initializer.
        node = model.graph.node[0]
        node.input.extend(["", "", "sizes"])
        model.graph.initializer.append(
            numpy_helper.from_array(np.array(sizes, dtype=np.int64), "sizes"))
        actual = run(work, name, model, {"x": x})["y"]
        print(("OK " if close(actual, expected) else "MISMATCH ") + name)


if __name__ == "__main__":
    main()
