"""Compares kiln with PyTorch on a test model exported with its reference
(DIR/export.py writes DIR/model.onnx, its inputs as DIR/<input>.npy and
PyTorch's results as DIR/reference.npz), through the kiln Python package: the loss within 1e-5 relative,
the logits within 1e-4 of their largest magnitude, and every parameter's
gradient within 1e-4 relative (error norm over the reference's norm), the
shared fixtures' bounds: the interpreter accumulates in fp64, so PyTorch's
fp32 rounding is what remains. A gradient that is zero but for that
rounding (norm below 1e-6 of the largest gradient's: a key bias, to which
softmax is invariant) must be below 1e-5 of it in kiln too. ONNX initializers are matched to PyTorch's parameters by
value (the exporter stores a linear layer's weight transposed, under a name
of its own). Prints one line per check and PASS or the failures.

    compare_with_pytorch.py DIR NAME=SIZE,... INPUT,...
"""
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

import kiln

here, dims, inputs = sys.argv[1:]
reference = np.load(os.path.join(here, "reference.npz"))
feeds = {name: np.load(os.path.join(here, name + ".npy"))
         for name in inputs.split(",")}
model = kiln.Model(os.path.join(here, "model.onnx"),
                   dims={name: int(size) for name, size in
                         (dim.split("=") for dim in dims.split(","))})
failures = []

outputs = model.run(feeds)
loss_error = abs(outputs["loss"] - reference["loss"]) / abs(reference["loss"])
logits_error = (np.abs(outputs["logits"] - reference["logits"]).max() /
                np.abs(reference["logits"]).max())
print(f"loss error {loss_error:.1e}, logits error {logits_error:.1e}")
if loss_error > 1e-5 or logits_error > 1e-4:
    failures.append("forward")

torch_values = {key[6:]: reference[key] for key in reference.files
                if key.startswith("value:")}
gradients = kiln.Trainer(model).gradients(feeds)
initializers = {i.name: numpy_helper.to_array(i)
                for i in onnx.load(os.path.join(here, "model.onnx")).graph.initializer}
largest = max(np.linalg.norm(reference["grad:" + n]) for n in torch_values)
matched = set()
for name, gradient in gradients.items():
    value = initializers[name]
    found = [(n, False) for n, v in torch_values.items()
             if v.shape == value.shape and np.array_equal(v, value)]
    found += [(n, True) for n, v in torch_values.items()
              if v.ndim == 2 and v.T.shape == value.shape and np.array_equal(v.T, value)]
    if len(found) != 1:
        failures.append(f"{name}: {len(found)} PyTorch parameters match")
        continue
    torch_name, transposed = found[0]
    expected = reference["grad:" + torch_name]
    expected = expected.T if transposed else expected
    matched.add(torch_name)
    if np.linalg.norm(expected) <= 1e-6 * largest:
        # Zero but for rounding (a key bias, to which softmax is invariant):
        # so must kiln's be, to 1e-5 of the largest gradient.
        if np.linalg.norm(gradient) > 1e-5 * largest:
            failures.append(f"{torch_name}: gradient {np.linalg.norm(gradient):.1e}"
                            " where PyTorch's is 0")
        continue
    error = np.linalg.norm(gradient - expected) / np.linalg.norm(expected)
    if error > 1e-4:
        failures.append(f"{torch_name}: gradient error {error:.1e}")
print(f"{len(matched)} of {len(torch_values)} gradients compared")
if matched != set(torch_values):
    failures.append("no gradient for " + ", ".join(sorted(set(torch_values) - matched)))
print("\n".join(failures) if failures else "PASS")
