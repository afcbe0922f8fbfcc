#!/usr/bin/env bash
# GPU test (ctest label gpu): 200 steps of the bundled example on the GPU
# follow the CPU run's loss curve. Both start from the model's weights, read
# the same batches and run in fp32; the GPU's GEMMs accumulate in f32 where
# the interpreter accumulates in f64. On the CPU, a far larger perturbation
# of every GEMM (tf32 operands) moves this curve by at most 0.24% over 200
# steps, so 1% bounds a correct GPU run. Then kiln-run --profile on the same
# artifact.
set -euo pipefail
bin="$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
options=(--data "$root/examples/data/kiln.bin" --steps 200 --lr 3e-3
         --schedule cosine --warmup 20 --seed 1)
"$bin/kiln-compile" "$root/examples/gpt2_tiny/model.onnx" --target=cuda \
  --arch=sm_80,sm_90 -o "$work/model.kiln"
"$bin/kiln-run" --device=cpu --train "$root/examples/gpt2_tiny/model.onnx" \
  "${options[@]}" --log "$work/cpu.jsonl" > /dev/null
"$bin/kiln-run" "$work/model.kiln" --train "${options[@]}" \
  --log "$work/gpu.jsonl"
/usr/bin/python3 - "$work/cpu.jsonl" "$work/gpu.jsonl" <<'PY'
import json, sys
cpu = {e["step"]: e["loss"] for e in map(json.loads, open(sys.argv[1]))}
gpu = {e["step"]: e["loss"] for e in map(json.loads, open(sys.argv[2]))}
assert len(gpu) >= 20 and 200 in gpu, f"the GPU log has steps {sorted(gpu)}"
worst = max(abs(gpu[s] - cpu[s]) / cpu[s] for s in gpu)
print(f"{len(gpu)} steps compared; largest relative difference {worst:.2e}")
sys.exit(0 if worst <= 0.01 else 1)
PY
# The profile of the same artifact: every operation timed, the ceilings
# measured, rows that account for the step.
"$bin/kiln-run" "$work/model.kiln" --train --data "$root/examples/data/kiln.bin" \
  --steps 2 --profile 3 > "$work/profile.txt"
cat "$work/profile.txt"
grep -q "^step: .* ms replayed as a CUDA graph" "$work/profile.txt"
grep -q "^ceilings measured: " "$work/profile.txt"
