"""Checks that training writes BatchNormalization's running statistics back
as PyTorch updates them in training mode: after one step, each is what the
forward pass computes as its update (the `<name>.updated` outputs), not
its initial value; with two micro-batches, the second reads what the first
wrote. Prints PASS or what differs.

    check_running_statistics.py DIR
"""
import os
import sys

import numpy as np

import kiln

here = sys.argv[1]
names = ["input_features", "frame_mask", "labels"]
feeds = {n: np.load(os.path.join(here, n + ".npy")) for n in names}
path = os.path.join(here, "model.onnx")
failures = []


def close(a, b):
    return np.allclose(a, b, rtol=1e-5, atol=1e-6)


model = kiln.Model(path, dims={"batch": 2})
initial = kiln.Trainer(model).parameters
updated = {o[:-len(".updated")]: v for o, v in model.run(feeds).items()
           if o.endswith(".updated")}
if len(updated) != 4:
    failures.append(f"{len(updated)} running statistics updated, not 4")

trainer = kiln.Trainer(model)
trainer.step(feeds)
for name, value in updated.items():
    if not close(trainer.parameters[name], value):
        failures.append(f"{name}: not the forward pass's update")
    if close(value, initial[name]):
        failures.append(f"{name}: the update changed nothing")

# Two micro-batches of one sample: r2 = m r1 + (1 - m) b2 with
# r1 = m r0 + (1 - m) b1, so r2 = m r1 + u2 - m r0, u2 the update of the
# second sample alone from r0 (momentum m = 0.9, as exported).
momentum = np.float32(0.9)
single = kiln.Model(path, dims={"batch": 1})
halves = [{n: v[i:i + 1] for n, v in feeds.items()} for i in range(2)]
first, second = [{o[:-len(".updated")]: v for o, v in single.run(h).items()
                  if o.endswith(".updated")} for h in halves]
chained = kiln.Trainer(single, micro_batches=2)
chained.step(feeds)
for name in updated:
    expected = momentum * first[name] + second[name] - momentum * initial[name]
    if not close(chained.parameters[name], expected):
        failures.append(f"{name}: micro-batches do not chain")
print("PASS" if not failures else "\n".join(failures))
