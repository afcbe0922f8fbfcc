"""GPU test (ctest label gpu): kiln.compile and kiln.GpuTrainer from Python.

The bundled example compiled from Python trains on the GPU as on the CPU
(kiln.Trainer): the same losses within 1e-4 relative over 10 fp32 steps
(the GPU's GEMMs accumulate in f32, the interpreter's in f64: at K <= 256,
K * 2^-24 of the sum of |products| bounds the difference of one product,
far below 1e-4 after 10 steps, as loss-curve.sh's 1% over 200 steps
allows); a checkpoint written on the GPU resumes on the GPU with the same
next loss, bit for bit; and the parameters read back in the model's shapes.
Needs the kiln package built for the python that runs it:

    PYTHONPATH=build/python python3 test/GPU/python_trainer.py
"""
import os
import tempfile

import numpy as np

import kiln

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
ids = np.load(os.path.join(root, "examples/data/sample.npy"))
batch = {"input_ids": ids, "labels": ids}
model = kiln.Model(os.path.join(root, "examples/gpt2_tiny/model.onnx"))
work = tempfile.mkdtemp()
artifact = os.path.join(work, "model.kiln")
print(kiln.compile(model, artifact, arch=["sm_80", "sm_90"]))

run = dict(lr=3e-3, schedule="cosine", warmup=2, steps=11)
cpu = kiln.Trainer(model, **run)
gpu = kiln.GpuTrainer(artifact, **run)
print("on", gpu.device_name, f"{gpu.device_bytes / 2**20:.1f} MiB")
worst = 0.0
for step in range(10):
    expected = cpu.step(batch)["loss"]
    got = gpu.step(batch)["loss"]
    worst = max(worst, abs(got - expected) / expected)
print(f"10 steps, largest relative loss difference {worst:.2e}")
assert worst <= 1e-4, worst
for name, value in cpu.parameters.items():
    assert gpu.parameters[name].shape == value.shape, name

# Step 11 from a checkpoint of step 10 is step 11 of the trainer that
# wrote it.
gpu.save_checkpoint(os.path.join(work, "checkpoint"))
resumed = kiln.GpuTrainer(artifact, **run)
resumed.load_checkpoint(os.path.join(work, "checkpoint"))
assert resumed.completed_steps == 10
a, b = gpu.step(batch)["loss"], resumed.step(batch)["loss"]
assert a == b, (a, b)
print("checkpoint resumed:", a)
print("PASS")
