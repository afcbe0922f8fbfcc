# UNSUPPORTED: gpu
# RUN: %python %s %S/../../examples %t | FileCheck %s

# kiln.GpuTrainer loads an artifact on a GPU; without one it says so, after
# checking its options and the artifact (test/GPU/python_trainer.py trains
# with it on a GPU).
import sys

import kiln

examples, work = sys.argv[1:]
model = kiln.Model(f"{examples}/gpt2_tiny/model.onnx")
kiln.compile(model, f"{work}.kiln")
with open(f"{work}.kiln", "rb") as artifact:
    head = artifact.read(2000)
with open(f"{work}.truncated.kiln", "wb") as truncated:
    truncated.write(head)


def attempt(label, action):
    try:
        action()
        print(label, "accepted")
    except kiln.Error as error:
        print(label + ":", error)


# CHECK: no GPU: no CUDA GPU is available
attempt("no GPU", lambda: kiln.GpuTrainer(f"{work}.kiln", lr=1e-3, steps=10,
                                          cuda_graph=False))
# CHECK: step option: 'precision' shapes the compiled step: give it to kiln.compile
attempt("step option", lambda: kiln.GpuTrainer(f"{work}.kiln", precision="bf16"))
# CHECK: switch: option 'cuda_graph' cannot take 'no' (docs/python.md)
attempt("switch", lambda: kiln.GpuTrainer(f"{work}.kiln", cuda_graph="no"))
# CHECK: bad value: lr must be positive, warmup and min_lr not negative
attempt("bad value", lambda: kiln.GpuTrainer(f"{work}.kiln", lr=-1.0))
# CHECK: missing: cannot open '{{.*}}nowhere.kiln'
attempt("missing", lambda: kiln.GpuTrainer(f"{examples}/nowhere.kiln"))
# CHECK: truncated: {{.*}}truncated.kiln
attempt("truncated", lambda: kiln.GpuTrainer(f"{work}.truncated.kiln"))
