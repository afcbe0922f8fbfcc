#!/usr/bin/env bash
# kiln against the PyTorch anchors (../shared/anchors) in one run on one GPU,
# then the ratios (bench/ratios.py). Parts, in the order given (default: all,
# in this order):
#
#   gpt2-ablation       GPT-2 124M, B16 T1024: the ablation's rows, one
#                       kiln option on over the previous: fp32, tf32, bf16
#                       (the exported attention, no fusion, no padding, a
#                       launch per op and parameter, no CUDA graph), +
#                       fusion, + kiln's attention, + vocab 50304, + CUDA
#                       graph
#   gpt2-kiln           GPT-2 124M with everything on (+ batched optimizer
#                       launches), then in the artifact's grids instead of
#                       one wave of the GPU, with cuDNN's attention instead
#                       of kiln's, with attention's query gradient summed
#                       with atomics by the key/value kernel instead of
#                       computed from the dS it stores, or recomputed by a
#                       kernel of its own (seven products instead of five),
#                       with the bias gradients summed by kernels instead
#                       of their GEMMs, with each GEMM's algorithm
#                       the fastest of cuBLASLt's eight first (--tune-gemms)
#   gpt2-torch-eager    the anchor's eager and AMP configurations
#   gpt2-torch-compile  the anchor's torch.compile configurations
#   gpt2-quick          the target's rows alone, for a short device
#                       call: the anchor's torch.compile configuration at
#                       B16, kiln with everything on, then with
#                       attention's forward pass in 64-row tiles, then
#                       with the query gradient recomputed instead of from
#                       stored dS, then with cuDNN's attention (what
#                       attention leaves)
#   bert-quick          likewise for BERT-base: the anchor's torch.compile
#                       configuration, kiln with everything on and with the
#                       query gradient recomputed
#   bert-kiln           BERT-base classification, B64 T256, bf16, with
#                       the exported attention, with the query, key and
#                       value projections apart, and with everything on
#   bert-torch          the BERT anchor (eager, AMP, torch.compile)
#
# Parts must fit a device call's ten minutes each: gpt2-ablation is best
# a call of its own with gpt2-torch-eager.
#
# Every result is one JSON line in $OUT/bench.jsonl (OUT defaults to
# bench-results). KILN_SHARED points at the shared directory (default
# ../shared next to the repository).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
shared="${KILN_SHARED:-$root/../shared}"
out="${OUT:-$root/bench-results}"
python="${PYTHON:-python3}"
mkdir -p "$out"
results="$out/bench.jsonl"
parts=("$@")
[ ${#parts[@]} -gt 0 ] ||
  parts=(gpt2-ablation gpt2-kiln gpt2-torch-eager gpt2-torch-compile bert-kiln
    bert-torch)

gpt2="$shared/fixtures/graphs/gpt2_124m.onnx"
bert="$shared/fixtures/graphs/bert_base_cls.onnx"
# A row that fails is reported and skipped: the rows after it still run.
failures=0
kiln() {
  "$root/bench/kiln_train.sh" "$@" | tee -a "$results" ||
    { echo "bench/run.sh: row '$1' failed" >&2; failures=$((failures + 1)); }
}
gpt2_row() { kiln "$1" "$gpt2" 16 1024 50257 tokens --weight-decay 0.1 "${@:2}"; }
# One configuration of an anchor (bench/ratios.py's baseline, a torch.compile
# one), by the anchor's own run(): module, run()'s Python arguments.
anchor() {
  "$python" -c "import sys, torch
sys.path.insert(0, sys.argv[1])
import $1
$1.run($2)" "$shared/anchors" | tee -a "$results"
}
bert_row() { kiln "$1" "$bert" 64 256 30522 2 "${@:2}"; }

for part in "${parts[@]}"; do
  case "$part" in
  gpt2-ablation)
    # Each row turns one option on over the previous; gpt2-kiln's first row
    # turns on the last, batched optimizer launches.
    base=(--rewrite-attention=false --fuse=false --pad-max-overhead 0
      --batch-launches=false)
    KILN_RUN_FLAGS=--cuda-graph=false gpt2_row "kiln fp32" --precision fp32 "${base[@]}"
    KILN_RUN_FLAGS=--cuda-graph=false gpt2_row "kiln tf32" --precision tf32 "${base[@]}"
    KILN_RUN_FLAGS=--cuda-graph=false gpt2_row "kiln bf16" --precision bf16 "${base[@]}"
    KILN_RUN_FLAGS=--cuda-graph=false gpt2_row "kiln bf16 + fusion" \
      --precision bf16 --rewrite-attention=false --pad-max-overhead 0 \
      --batch-launches=false
    KILN_RUN_FLAGS=--cuda-graph=false gpt2_row "kiln bf16 + fusion + attention" \
      --precision bf16 --pad-max-overhead 0 --batch-launches=false
    KILN_RUN_FLAGS=--cuda-graph=false gpt2_row \
      "kiln bf16 + fusion + attention + vocab 50304" --precision bf16 \
      --batch-launches=false
    gpt2_row "kiln bf16 + fusion + attention + vocab 50304 + CUDA graph" \
      --precision bf16 --batch-launches=false
    ;;
  gpt2-kiln)
    gpt2_row "kiln bf16, all on" --precision bf16
    KILN_RUN_FLAGS=--device-grids=false gpt2_row \
      "kiln bf16, all on, the artifact's grids" --precision bf16
    gpt2_row "kiln bf16, all on, cuDNN attention" --precision bf16 \
      --attention=cudnn
    gpt2_row "kiln bf16, all on, query gradient by atomics" --precision bf16 \
      --attention-query-gradient=atomic
    gpt2_row "kiln bf16, all on, query gradient recomputed" \
      --precision bf16 --attention-query-gradient=recompute
    KILN_RUN_FLAGS=--gemm-bias-gradients=false gpt2_row \
      "kiln bf16, all on, bias gradients by kernels" --precision bf16
    KILN_RUN_FLAGS=--tune-gemms gpt2_row "kiln bf16, all on, GEMMs tuned" \
      --precision bf16
    ;;
  gpt2-torch-eager) "$python" "$shared/anchors/gpt2_torch.py" eager | tee -a "$results" ;;
  gpt2-torch-compile) "$python" "$shared/anchors/gpt2_torch.py" compile | tee -a "$results" ;;
  gpt2-quick)
    anchor gpt2_torch '"bf16 AMP torch.compile, SDPA, fused AdamW", B=16,
      amp=torch.bfloat16, tf32=True, compile=True'
    gpt2_row "kiln bf16, all on" --precision bf16
    gpt2_row "kiln bf16, all on, attention forward in 64-row tiles" \
      --precision bf16 --attention-query-tile=64
    gpt2_row "kiln bf16, all on, query gradient recomputed" \
      --precision bf16 --attention-query-gradient=recompute
    gpt2_row "kiln bf16, all on, cuDNN attention" --precision bf16 \
      --attention=cudnn
    ;;
  bert-quick)
    anchor bert_torch '"bf16 AMP torch.compile, sdpa", amp=torch.bfloat16,
      compile=True'
    bert_row "kiln bf16, all on" --precision bf16
    bert_row "kiln bf16, all on, query gradient recomputed" \
      --precision bf16 --attention-query-gradient=recompute
    ;;
  bert-kiln)
    bert_row "kiln bf16, exported attention" --precision bf16 \
      --rewrite-attention=false
    bert_row "kiln bf16, projections apart" --precision bf16 \
      --merge-projections=false
    bert_row "kiln bf16, all on" --precision bf16
    ;;
  bert-torch) "$python" "$shared/anchors/bert_torch.py" | tee -a "$results" ;;
  *) echo "bench/run.sh: unknown part '$part'" >&2; exit 1 ;;
  esac
done
"$python" "$root/bench/ratios.py" "$results" | tee "$out/ratios.md"
[ $failures -eq 0 ]
