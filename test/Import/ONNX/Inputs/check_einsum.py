"""Checks kiln's import of ONNX Einsum against numpy.einsum.

Usage: check_einsum.py WORKDIR
Prints "OK <equation>" when kiln-run's result matches within 1e-5 relative
+ 1e-5 (fp64 accumulation against NumPy's fp64 reference of fp32 inputs).
"""

import os
import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save_model

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
        model_path = os.path.join(work, "case%d.onnx" % index)
        save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
                   model_path)
        command = ["kiln-run", model_path, "--output-dir", os.path.join(work, str(index))]
        for n, a in zip(names, arrays):
            path = os.path.join(work, "%d_%s.npy" % (index, n))
            np.save(path, a)
            command += ["--input", "%s=%s" % (n, path)]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        proto = TensorProto()
        with open(os.path.join(work, str(index), "y.pb"), "rb") as f:
            proto.ParseFromString(f.read())
        actual = numpy_helper.to_array(proto)
        ok = actual.shape == expected.shape and np.allclose(
            actual, expected, rtol=1e-5, atol=1e-5)
        print(("OK " if ok else "MISMATCH ") + equation)


if __name__ == "__main__":
    main()
