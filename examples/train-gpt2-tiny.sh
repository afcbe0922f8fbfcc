#!/usr/bin/env bash
# Trains the bundled tiny GPT-2 (Hugging Face GPT2LMHeadModel, 2 layers,
# d=64, random initial weights, exported by PyTorch) on the CPU for 300 AdamW
# steps on a short self-written text about kilns (examples/data/kiln.txt,
# one token per byte), then runs the exported trained model forward.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${KILN_BIN:-$here/../build/bin}"
out="${KILN_OUT:-${TMPDIR:-/tmp}/kiln-gpt2-tiny}"
mkdir -p "$out"

echo "== kiln-run --train gpt2_tiny/model.onnx --data data/kiln.bin (300 steps)"
"$bin/kiln-run" --device=cpu --train "$here/gpt2_tiny/model.onnx" \
  --data "$here/data/kiln.bin" --steps 300 --lr 3e-3 --schedule cosine \
  --warmup 20 --no-decay-biases-norms --seed 1 \
  --checkpoint "$out/checkpoint" --save-every 100 --log "$out/train.jsonl" \
  --export-onnx "$out/trained.onnx" --export-safetensors "$out/trained.safetensors"

echo "== the first 64 bytes of the text, before and after training"
for model in "$here/gpt2_tiny/model.onnx" "$out/trained.onnx"; do
  "$bin/kiln-run" --device=cpu "$model" --input input_ids="$here/data/sample.npy" \
    --input labels="$here/data/sample.npy" | head -1
done
echo "== checkpoint, log and exports in $out"
