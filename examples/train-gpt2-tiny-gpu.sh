#!/usr/bin/env bash
# Trains the bundled tiny GPT-2 on an NVIDIA GPU: kiln-compile builds the
# training step (bf16 GEMMs, fused, planned) into an artifact for sm_80 and
# sm_90, which needs no GPU; kiln-run trains with it, one CUDA-graph replay
# per step, with the CPU example's options (examples/train-gpt2-tiny.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${KILN_BIN:-$here/../build/bin}"
out="${KILN_OUT:-${TMPDIR:-/tmp}/kiln-gpt2-tiny-gpu}"
mkdir -p "$out"

echo "== kiln-compile gpt2_tiny/model.onnx --target=cuda"
"$bin/kiln-compile" "$here/gpt2_tiny/model.onnx" --precision bf16 \
  --no-decay-biases-norms --target=cuda --arch=sm_80,sm_90 -o "$out/model.kiln"

echo "== kiln-run model.kiln --data data/kiln.bin (300 steps)"
"$bin/kiln-run" "$out/model.kiln" --train --data "$here/data/kiln.bin" \
  --steps 300 --lr 3e-3 --schedule cosine --warmup 20 --seed 1 \
  --checkpoint "$out/checkpoint" --save-every 100 --log "$out/train.jsonl" \
  --export-safetensors "$out/trained.safetensors"
echo "== checkpoint, log and weights in $out"
