# RUN: kiln-run %S/../../examples/gpt2_tiny/model.onnx --input input_ids=%S/../../examples/data/sample.npy --input labels=%S/../../examples/data/sample.npy --output-dir %t.outputs
# RUN: %python %s %S/../../examples %t.outputs | FileCheck %s

# kiln.Model imports a model, describes its inputs and outputs, and runs it
# forward on the interpreter: the outputs are kiln-run's, bit for bit.
import sys

import numpy as np
from onnx import numpy_helper, load_tensor

import kiln

examples, outputs = sys.argv[1:]
model = kiln.Model(f"{examples}/gpt2_tiny/model.onnx")
# CHECK: inputs [('input_ids', 'i64', (2, 32)), ('labels', 'i64', (2, 32))]
# CHECK: outputs [('loss', 'f32', ()), ('logits', 'f32', (2, 32, 512))]
print("inputs", model.inputs)
print("outputs", model.outputs)

ids = np.load(f"{examples}/data/sample.npy")
results = model.run({"input_ids": ids, "labels": ids})
for name, value in results.items():
    expected = numpy_helper.to_array(load_tensor(f"{outputs}/{name}.pb"))
    assert value.dtype == expected.dtype and value.shape == expected.shape, name
    assert np.array_equal(value, expected), name
# CHECK: loss float32 () as kiln-run
# CHECK: logits float32 (2, 32, 512) as kiln-run
    print(name, value.dtype, value.shape, "as kiln-run")

# Symbolic dimensions are bound by `dims`; the IR is there to read.
# CHECK: llama (3, 12)
llama = kiln.Model(f"{examples}/../test/Models/llama_tiny/model.onnx",
                   dims={"batch": 3, "seq": 12})
print("llama", llama.inputs[0][2])
# CHECK: func.func @main(
print(llama.ir())
