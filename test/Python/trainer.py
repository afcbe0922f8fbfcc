# RUN: rm -rf %t && mkdir -p %t
# RUN: kiln-run --train %S/../../examples/gpt2_tiny/model.onnx --input input_ids=%S/../../examples/data/sample.npy --input labels=%S/../../examples/data/sample.npy --precision bf16 --lr 3e-3 --schedule cosine --warmup 1 --steps 4 --clip-grad-norm 1.0 --log %t/cli.jsonl > /dev/null
# RUN: %python %s %S/../../examples %t | FileCheck %s

# kiln.Trainer runs kiln-run's training: the same losses step for step,
# checkpoints that resume exactly, exports that kiln reads back.
import json
import os
import sys

import numpy as np

import kiln

examples, work = sys.argv[1:]
model = kiln.Model(f"{examples}/gpt2_tiny/model.onnx")
ids = np.load(f"{examples}/data/sample.npy")
batch = {"input_ids": ids, "labels": ids}
options = dict(precision="bf16", lr=3e-3, schedule="cosine", warmup=1,
               steps=4, clip_grad_norm=1.0)

trainer = kiln.Trainer(model, **options)
cli = [json.loads(line) for line in open(f"{work}/cli.jsonl")]
reports = [trainer.step(batch) for _ in range(2)]
trainer.save_checkpoint(f"{work}/checkpoint")
reports += [trainer.step(batch) for _ in range(2)]
for report, logged in zip(reports, cli):
    assert report["loss"] == logged["loss"], (report, logged)
    assert report["lr"] == logged["lr"], (report, logged)
# CHECK: 4 steps as kiln-run, loss 6.2{{[0-9]+}} -> 5.{{[0-9]+}}
print(f"{len(reports)} steps as kiln-run, loss {reports[0]['loss']:.4f} -> "
      f"{reports[-1]['loss']:.4f}")
# CHECK: completed 4
print("completed", trainer.completed_steps)

# A checkpoint resumes exactly where it was written.
resumed = kiln.Trainer(model, **options)
resumed.load_checkpoint(f"{work}/checkpoint")
# CHECK: resumed at 2
print("resumed at", resumed.completed_steps)
again = [resumed.step(batch) for _ in range(2)]
assert [r["loss"] for r in again] == [r["loss"] for r in reports[2:]]
for name, value in resumed.parameters.items():
    assert np.array_equal(value, trainer.parameters[name]), name
# CHECK: checkpoint files ['meta.json', 'model.safetensors', 'optimizer.safetensors']
print("checkpoint files", sorted(os.listdir(f"{work}/checkpoint")))

# ... but not with another training spec.
other = kiln.Trainer(model, **dict(options, lr=1e-3))
try:
    other.load_checkpoint(f"{work}/checkpoint")
except kiln.Error as error:
    # CHECK: refused: checkpoint {{.*}}checkpoint: was written with another training spec
    print("refused:", error)

# Gradients by parameter, in the parameters' shapes; AdamW's state.
gradients = trainer.gradients(batch)
assert gradients.keys() <= trainer.parameters.keys()
for name, gradient in gradients.items():
    assert gradient.shape == trainer.parameters[name].shape, name
    assert np.isfinite(gradient).all(), name
# CHECK: state {{.*}}.exp_avg
print("state", next(iter(trainer.state)))

# The trained weights, as ONNX that kiln runs and as safetensors.
trainer.export_onnx(f"{work}/trained.onnx")
trainer.export_safetensors(f"{work}/trained.safetensors")
trained = kiln.Model(f"{work}/trained.onnx")
loss = trained.run(batch)["loss"]
assert loss < reports[0]["loss"], loss
# CHECK: exported model loss 5.{{[0-9]+}}
print(f"exported model loss {loss:.4f}")
# CHECK: safetensors written
print("safetensors", "written" if os.path.getsize(
    f"{work}/trained.safetensors") > 0 else "empty")

# Micro-batches: the step reads them concatenated.
micro = kiln.Trainer(model, micro_batches=2)
both = {"input_ids": np.concatenate([ids, ids]),
        "labels": np.concatenate([ids, ids])}
# CHECK: micro-batches loss 6.2{{[0-9]+}}
print(f"micro-batches loss {micro.step(both)['loss']:.4f}")
# Gradients are of one batch, in the model's shapes.
# CHECK: micro-batch gradients {{[0-9]+}}
print("micro-batch gradients", len(micro.gradients(batch)))

# fp16 scales the loss and says so.
# CHECK: fp16 report ['grad_norm', 'loss', 'loss_scale', 'lr', 'skipped']
print("fp16 report", sorted(kiln.Trainer(model, precision="fp16").step(batch)))
