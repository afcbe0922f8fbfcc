"""Checks kiln's import of ONNX Einsum against numpy.einsum.

Usage: check_einsum.py WORKDIR
Prints "OK <equation>" when kiln-run's result matches within 1e-5 relative
+ 1e-5 (fp64 accumulation against NumPy's fp64 reference of fp32 inputs).
"""

import os
import sys

import numpy as np
from onnx import TensorProto, helper

from kiln_case import close, run

CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 8), (2, 3, 5, 8)]),
    ("i,j->ij", [(4,), (6,)]),
    ("...ij,...jk->...ik", [(2, 3, 4, 5), (3, 5, 2)]),
    ("ij->ji", [(3, 4)]),
    ("bij->b", [(2, 3, 4)]),
    ("abc,cd,de->abe", [(2, 3, 4), (4, 5), (5, 6)]),
    ("ij,ij->", [(3, 4), (3, 4)]),
    ("ij,jk", [(3, 4), (4, 2)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    ("...d,d->...", [(2, 3, 4), (4,)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(4, 4)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("ijji->ij", [(2, 3, 3, 2)]),
    ("iii->i", [(3, 3, 3)]),
    ("bii,bij->bj", [(2, 3, 3), (2, 3, 4)]),
]


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(0)
    for index, (equation, shapes) in enumerate(CASES):
        arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        names = ["x%d" % i for i in range(len(arrays))]
        expected = np.einsum(equation, *[a.astype(np.float64) for a in arrays])
        node = helper.make_node("Einsum", names, ["y"], equation=equation)
        graph = helper.make_graph(
            [node], "einsum",
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape)
             for n, a in zip(names, arrays)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        actual = run(work, "case%d" % index, model, dict(zip(names, arrays)))["y"]
        print(("OK " if close(actual, expected) else "MISMATCH ") + equation)


if __name__ == "__main__":
    main()
