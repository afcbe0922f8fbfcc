"""Runs an ONNX model through `kiln-run` (on the interpreter) and reads its
outputs back, for the check_*.py scripts that compare kiln with NumPy."""

import os
import subprocess

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save_model


def single_node(op, name, inputs, outputs, attributes, opset=17):
    """A model of one `op` node, with `attributes`, from the f32 arrays
    `inputs` (name to array) to the f32 `outputs` (names)."""
    node = helper.make_node(op, list(inputs), list(outputs), **attributes)
    graph = helper.make_graph(
        [node], name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape)
         for n, a in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
         for n in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def kiln_run(work, name, model, arrays, options):
    """Saves `model` as WORK/NAME.onnx and runs kiln-run on it with `arrays`
    (input name to array) and more `options`."""
    path = os.path.join(work, name + ".onnx")
    save_model(model, path)
    command = ["kiln-run", path] + options
    for input_name, array in arrays.items():
        file = os.path.join(work, "%s_%s.npy" % (name, input_name))
        np.save(file, array)
        command += ["--input", "%s=%s" % (input_name, file)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def read(path):
    """The array in a TensorProto file."""
    proto = TensorProto()
    with open(path, "rb") as f:
        proto.ParseFromString(f.read())
    return numpy_helper.to_array(proto)


def run(work, name, model, arrays):
    """Runs `model` once on `arrays` and returns its outputs by name."""
    out = os.path.join(work, name)
    kiln_run(work, name, model, arrays, ["--output-dir", out])
    return {output.name: read(os.path.join(out, output.name + ".pb"))
            for output in model.graph.output}


def close(actual, expected, rtol=1e-5, atol=1e-5):
    """Whether `actual` has `expected`'s shape and values, to the tolerance."""
    return actual.shape == expected.shape and np.allclose(
        actual, expected, rtol=rtol, atol=atol)
