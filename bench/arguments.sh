# Sourced by the benchmark scripts (kiln_train.sh, ncu_step.sh): their
# first arguments, NAME MODEL.onnx BATCH SEQ VOCAB LABELS, which the caller
# then shifts away; the tools (KILN_BIN, default build/bin; PYTHON, default
# python3, with numpy); and a scratch directory, removed on exit.
set -euo pipefail
name="$1" model="$2" batch="$3" seq="$4" vocab="$5" labels="$6"
bin="${KILN_BIN:-build/bin}"
python="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
