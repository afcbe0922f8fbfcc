"""Runs an ONNX model through `kiln-run` (on the interpreter) and reads its
outputs back, for the check_*.py scripts that compare kiln with NumPy."""

import os
import subprocess

import numpy as np
from onnx import TensorProto, numpy_helper, save_model


def run(work, name, model, arrays):
    """Saves `model` as WORK/NAME.onnx, runs it on `arrays` (input name to
    array) and returns its outputs by name."""
    path = os.path.join(work, name + ".onnx")
    save_model(model, path)
    out = os.path.join(work, name)
    command = ["kiln-run", path, "--output-dir", out]
    for input_name, array in arrays.items():
        file = os.path.join(work, "%s_%s.npy" % (name, input_name))
        np.save(file, array)
        command += ["--input", "%s=%s" % (input_name, file)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    outputs = {}
    for output in model.graph.output:
        proto = TensorProto()
        with open(os.path.join(out, output.name + ".pb"), "rb") as f:
            proto.ParseFromString(f.read())
        outputs[output.name] = numpy_helper.to_array(proto)
    return outputs


def close(actual, expected, rtol=1e-5, atol=1e-5):
    """Whether `actual` has `expected`'s shape and values, to the tolerance."""
    return actual.shape == expected.shape and np.allclose(
        actual, expected, rtol=rtol, atol=atol)
