# RUN: %python %S/../Import/ONNX/Inputs/make_model.py training_info %t.training.onnx
# RUN: %python %s %S/../../examples %t.training.onnx %S/../Transforms/training-pipeline.mlir %S/../Transforms/autodiff-untied-copies.mlir | FileCheck %s

# Every failure is a kiln.Error (a RuntimeError) that says what is wrong.
import sys
import warnings

import numpy as np

import kiln

examples, training, ir, untied = sys.argv[1:]
model = kiln.Model(f"{examples}/gpt2_tiny/model.onnx")
ids = np.load(f"{examples}/data/sample.npy")


def attempt(label, action):
    try:
        action()
        print(label, "accepted")
    except kiln.Error as error:
        assert isinstance(error, RuntimeError)
        print(label + ":", str(error).replace("\n", " | "))


# CHECK: missing file: {{.*}}nowhere.onnx: cannot read the model
attempt("missing file", lambda: kiln.Model(f"{examples}/nowhere.onnx"))
# CHECK: bad dimension: dimension 'batch' must be positive, got 0
attempt("bad dimension", lambda: kiln.Model(
    f"{examples}/gpt2_tiny/model.onnx", dims={"batch": 0}))
# CHECK: wrong type: input 'input_ids' must be i64[2x32], got float32[2x32]
attempt("wrong type", lambda: model.run(
    {"input_ids": ids.astype(np.float32), "labels": ids}))
# CHECK: wrong shape: input 'labels' must be i64[2x32], got int64[2x31]
attempt("wrong shape", lambda: model.run(
    {"input_ids": ids, "labels": ids[:, :31]}))
# CHECK: missing input: input 'labels' is missing
attempt("missing input", lambda: model.run({"input_ids": ids}))
# CHECK: unknown input: the model has no input named 'tokens'; its inputs are: input_ids, labels
attempt("unknown input", lambda: model.run(
    {"input_ids": ids, "labels": ids, "tokens": ids}))
# CHECK: not an array: input 'labels' must be a NumPy array (i64[2x32])
attempt("not an array", lambda: model.run({"input_ids": ids, "labels": None}))
# A token id outside the vocabulary is the interpreter's error.
# CHECK: token out of range: {{.*}}error: {{.*}}out of range
attempt("token out of range", lambda: model.run(
    {"input_ids": ids + 1000, "labels": ids}))

# CHECK: precision: unknown precision 'fp8' (fp32, tf32, bf16 or fp16)
attempt("precision", lambda: kiln.Trainer(model, precision="fp8"))
# CHECK: optimizer: unknown optimizer 'lion' (adamw, sgd or adagrad)
attempt("optimizer", lambda: kiln.Trainer(model, optimizer="lion"))
# CHECK: betas: betas must lie in [0, 1)
attempt("betas", lambda: kiln.Trainer(model, betas=(0.9, 1.0)))
# CHECK: nesterov: nesterov needs momentum > 0 and no dampening
attempt("nesterov", lambda: kiln.Trainer(model, optimizer="sgd", nesterov=True))
# CHECK: narrow norms: narrow_norms needs precision 'bf16' or 'fp16'
attempt("narrow norms", lambda: kiln.Trainer(model, narrow_norms=True))
# CHECK: schedule: unknown schedule 'step' (constant, linear or cosine)
attempt("schedule", lambda: kiln.Trainer(model, schedule="step"))
# CHECK: lr: lr must be positive, warmup and min_lr not negative
attempt("lr", lambda: kiln.Trainer(model, lr=0))
# CHECK: steps: steps must be at least 1
attempt("steps", lambda: kiln.Trainer(model, steps=0))
# CHECK: micro-batches: micro_batches must be at least 1
attempt("micro-batches", lambda: kiln.Trainer(model, micro_batches=0))
# CHECK: loss: {{.*}}error: {{.*}}logits
attempt("loss", lambda: kiln.Trainer(model, loss="logits"))
# The step reads the micro-batches concatenated: twice the batch.
# CHECK: micro-batch shape: input 'input_ids' must be i64[4x32], got int64[2x32]
attempt("micro-batch shape", lambda: kiln.Trainer(model, micro_batches=2).step(
    {"input_ids": ids, "labels": ids}))
# CHECK: no checkpoint: {{.*}}nowhere
attempt("no checkpoint", lambda: kiln.Trainer(model).load_checkpoint(
    f"{examples}/nowhere"))
# CHECK: export from IR: export_onnx needs a model imported from ONNX
attempt("export from IR", lambda: kiln.Trainer(
    kiln.Model(ir)).export_onnx("x.onnx"))
# CHECK: unknown option: unknown option 'learning_rate' (docs/python.md lists them)
attempt("unknown option", lambda: kiln.Trainer(model, learning_rate=1e-3))
# CHECK: option type: option 'lr' cannot take 'fast' (docs/python.md)
attempt("option type", lambda: kiln.Trainer(model, lr="fast"))
# CHECK: pair: option 'betas' cannot take (0.9,) (docs/python.md)
attempt("pair", lambda: kiln.Trainer(model, betas=(0.9,)))
# A compiled step takes the run's options when it trains.
# CHECK: run option: 'steps' is an option of the run, which kiln-run takes with the compiled step
attempt("run option", lambda: kiln.compile(model, "x.kiln", steps=10))
# CHECK: architecture: arch expects names like sm_80 or sm_90, got '90'
attempt("architecture", lambda: kiln.compile(model, "x.kiln", arch=["90"]))
# CHECK: attention backend: attention must be 'kiln' or 'cudnn', got 'flash'
attempt("attention backend",
        lambda: kiln.compile(model, "x.kiln", attention="flash"))
# CHECK: query gradient: attention_query_gradient must be 'atomic', 'recompute', 'stored' or 'auto', got 'exact'
attempt("query gradient",
        lambda: kiln.compile(model, "x.kiln", attention_query_gradient="exact"))
# CHECK: query tile: attention_query_tile must be 64 or 128, got 96
attempt("query tile",
        lambda: kiln.compile(model, "x.kiln", attention_query_tile=96))
# CHECK: training graph: {{.*}} trains itself (TrainingInfoProto): run it with kiln-run --train
attempt("training graph", lambda: kiln.Trainer(kiln.Model(training)))

# Warnings are Python warnings: a weight written twice trains apart.
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    kiln.Trainer(kiln.Model(untied))
# CHECK: UserWarning: {{.*}}parameter 'head' holds exactly the transpose of 'table'
# CHECK: UserWarning: {{.*}}parameter 'copy' holds exactly the values of 'table'
for warning in caught:
    print(f"{warning.category.__name__}: {warning.message}")
