# UNSUPPORTED: gpu
# RUN: kiln-compile %S/../../examples/gpt2_tiny/model.onnx --precision bf16 --target=cuda --arch=sm_80,sm_90 -o %t.cli.kiln > %t.txt
# RUN: %python %s %S/../../examples %t.kiln >> %t.txt
# RUN: FileCheck %s < %t.txt
# RUN: not kiln-run %t.kiln --train --steps 1 2>&1 | FileCheck %s --check-prefix=LOAD

# kiln.compile writes the step kiln-compile writes for the same options (no
# GPU needed), an artifact that kiln-run verifies and loads.
# CHECK: wrote {{.*}}: [[OPS:[0-9]+]] operations ([[GEMMS:[0-9]+]] GEMMs: {{.*}}; [[LAUNCHES:[0-9]+]] kernel launches (and [[FALLBACKS:[0-9]+]] where {{.*}}) of [[KERNELS:[0-9]+]] distinct kernels), arena
# CHECK: python: [[OPS]] operations, [[GEMMS]] GEMMs, [[LAUNCHES]] kernel launches, [[FALLBACKS]] fallbacks, [[KERNELS]] kernels
# LOAD: no CUDA GPU is available
import os
import sys

import kiln

examples, output = sys.argv[1:]
model = kiln.Model(f"{examples}/gpt2_tiny/model.onnx")
report = kiln.compile(model, output, precision="bf16", arch=["sm_80", "sm_90"])
print(f"python: {report['operations']} operations, {report['gemms']} GEMMs, "
      f"{report['kernel_launches']} kernel launches, "
      f"{report['fallback_launches']} fallbacks, {report['kernels']} kernels")
assert report["arena_bytes"] > 0 and os.path.getsize(output) > 0

# What ptxas allotted each kernel, for both architectures: local memory
# only for spills (none for sm_90, kernel-resources.test), no array the
# compiler could not keep in registers.
for arch in ("sm_80", "sm_90"):
    kernels = report["kernel_resources"][arch]
    assert len(kernels) == report["kernels"], kernels
    assert all(k["registers"] > 0 and k["local_bytes"] == k["spilled_bytes"]
               and k["block"] > 0 and k["blocks_per_sm"] > 0
               for k in kernels), kernels
assert not any(k["local_bytes"] for k in report["kernel_resources"]["sm_90"])

# 64-bit indices in every kernel, as kiln-compile --wide-indices: the
# artifact's source declares them so (the example's tensors, far below 2^30
# elements, otherwise give most kernels 32-bit ones).
wide = kiln.compile(model, output + ".wide", precision="bf16", wide_indices=True)
declared = lambda path: open(path, "rb").read().count(b"typedef i64 idx;")
assert declared(output + ".wide") == wide["kernels"] > 4 * declared(output), (
    declared(output + ".wide"), declared(output))

# cuDNN's attention: all four passes of the bf16 step; none in f32, each
# kept on kiln's kernels with the reason.
cudnn = kiln.compile(model, output + ".cudnn", precision="bf16",
                     attention="cudnn")
assert cudnn["cudnn_attentions"] == 4 and not cudnn["kept_attention"], cudnn
assert cudnn["kernel_launches"] < report["kernel_launches"], cudnn
f32 = kiln.compile(model, output + ".f32", attention="cudnn")
assert f32["cudnn_attentions"] == 0, f32
assert all("not bf16 or fp16" in why for why in f32["kept_attention"]), f32
assert len(f32["kept_attention"]) == 4, f32

# Without fusion, as the ablation's baseline, many more launches.
unfused = kiln.compile(model, output + ".unfused", precision="bf16",
                       fuse=False, batch_launches=False)
assert unfused["kernel_launches"] > 2 * report["kernel_launches"], unfused

# RoBERTa's query, key and value Linear layers: one GEMM each way with
# their projections merged (the default), three apart.
roberta = kiln.Model(f"{examples}/../test/Models/roberta_tiny/model.onnx",
                     dims={"batch": 2})
merged = kiln.compile(roberta, output + ".merged", precision="bf16")
apart = kiln.compile(roberta, output + ".apart", precision="bf16",
                     merge_projections=False)
assert merged["gemms"] < apart["gemms"], (merged["gemms"], apart["gemms"])

# Attention's query gradient: by default ("auto") from the score gradients
# the key/value kernel stores, which the example's memory plan holds where
# no value lives while the gradient runs (the arena grows by less than
# 1%); recomputed, one launch less per layer's attention gradient (the
# query kernel computes the deltas itself); summed with atomics by the
# key/value kernel, as many launches as stored (kernels clearing and
# storing f32 sums instead of the deltas' and the query kernel).
recomputed = kiln.compile(model, output + ".recomputed", precision="bf16",
                          attention_query_gradient="recompute")
stored = kiln.compile(model, output + ".stored", precision="bf16",
                      attention_query_gradient="stored")
atomic = kiln.compile(model, output + ".atomic", precision="bf16",
                      attention_query_gradient="atomic")
assert report["kernel_launches"] == stored["kernel_launches"], report
assert report["arena_bytes"] == stored["arena_bytes"], report
assert stored["kernel_launches"] == recomputed["kernel_launches"] + 2, stored
assert stored["arena_bytes"] <= recomputed["arena_bytes"] * 1.01, stored
assert atomic["kernel_launches"] == stored["kernel_launches"], atomic
assert b"|stored-query-gradient" in open(output + ".stored", "rb").read()
assert b"|recomputed-query-gradient" not in open(output, "rb").read()

# Attention's forward pass in 64-row tiles: the same launches, its kernel
# (whose source the artifact holds) with one tile of query fragments per
# warp instead of two (the example's head dimension is 64 at most).
narrow = kiln.compile(model, output + ".tile64", precision="bf16",
                      attention_query_tile=64)
assert narrow["kernel_launches"] == report["kernel_launches"], narrow
assert b"u32 qa[2][" in open(output, "rb").read()
assert b"u32 qa[1][" in open(output + ".tile64", "rb").read()
