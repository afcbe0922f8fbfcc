#!/usr/bin/env bash
# Runs the bundled tiny GPT-2 (a Hugging Face GPT2LMHeadModel exported by
# PyTorch's TorchScript ONNX exporter, random weights) on kiln's reference
# interpreter and prints its loss beside the loss PyTorch computed for the
# same batch.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${KILN_BIN:-$here/../build/bin}"
model="$here/gpt2_tiny"

echo "== kiln-run --device=cpu gpt2_tiny/model.onnx"
"$bin/kiln-run" --device=cpu "$model/model.onnx" \
  --input input_ids="$model/input_ids.pb" --input labels="$model/labels.pb" \
  --output-dir "${TMPDIR:-/tmp}/kiln-gpt2-tiny"
echo "== PyTorch's loss for the same batch (gpt2_tiny/loss.pb)"
"$bin/kiln-run" --device=cpu "$here/show-tensor.mlir" \
  --input x="$model/loss.pb" | sed 's/^x:/loss:/'
