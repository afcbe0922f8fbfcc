#!/usr/bin/env bash
# One kiln training benchmark: compiles MODEL for the GPU with the given
# kiln-compile options, trains on random token ids (a few batches, cycled)
# and prints one JSON line: tokens and samples per second and step time
# over the steps after the tenth (the first captures the CUDA graph; steps
# 10 and STEPS both wait for the GPU), GPU memory held (arena, GEMM
# workspace, argument tables), compile and load time, the last loss, how
# many bias gradients cuBLASLt sums and how many kernel launches run in
# one wave of the GPU.
#
#   bench/kiln_train.sh NAME MODEL.onnx BATCH SEQ VOCAB LABELS [options...]
#
# LABELS is `tokens` (a language model's labels are its inputs, shifted
# inside the model) or a number of classes (one label per sample).
# Environment: KILN_BIN (default build/bin), KILN_BENCH_STEPS (default 40),
# PYTHON (default python3, with numpy), KILN_BENCH_PROFILE (a number of
# steps: after training, kiln-run --profile times that many more operation
# by operation and the table, a row for every kernel, goes to
# ${OUT:-.}/profile-NAME.txt),
# KILN_RUN_FLAGS (more kiln-run options, such as
# --gemm-bias-gradients=false).
source "$(dirname "$0")/arguments.sh"
shift 6
steps="${KILN_BENCH_STEPS:-40}"
profile=()
if [ "${KILN_BENCH_PROFILE:-0}" -gt 0 ]; then
  profile=(--profile "$KILN_BENCH_PROFILE" --profile-rows 0)
fi

now() { date +%s.%N; }
start=$(now)
"$bin/kiln-compile" "$model" --dim "batch=$batch" --dim "seq=$seq" \
  --target=cuda --arch=sm_90 -o "$work/model.kiln" "$@" > "$work/compile.txt"
compiled=$(now)

"$python" "$(dirname "$0")/random_batches.py" "$work" "$batch" "$seq" "$vocab" \
  "$labels"

"$bin/kiln-run" "$work/model.kiln" --train --steps "$steps" --lr 3e-4 \
  --input "input_ids=$work/input_ids.npy" --input "labels=$work/labels.npy" \
  --log "$work/log.jsonl" "${profile[@]}" ${KILN_RUN_FLAGS:-} > "$work/run.txt"
if [ ${#profile[@]} -gt 0 ]; then
  sed -n '/^step: /,$p' "$work/run.txt" > "${OUT:-.}/profile-$name.txt"
fi

"$python" - "$work" "$name" "$model" "$batch" "$seq" "$steps" "$start" \
  "$compiled" <<'PY'
import json, re, sys
work, name, model, batch, seq, steps, start, compiled = sys.argv[1:]
compile_s = float(compiled) - float(start)
batch, seq, steps = int(batch), int(seq), int(steps)
log = {e["step"]: e for e in map(json.loads, open(f"{work}/log.jsonl"))}
step_s = (log[steps]["elapsed_s"] - log[10]["elapsed_s"]) / (steps - 10)
run = open(f"{work}/run.txt").read()
loaded = re.search(r"in ([0-9.]+) s: ([0-9.]+) GiB", run)
# How many bias gradients cuBLASLt sums in their GEMMs, of those it could.
sums = re.search(r"cuBLASLt sums ([0-9]+) of the step's ([0-9]+)", run)
# How many kernel launches run in one wave of the GPU (--device-grids).
wave = re.search(r"([0-9]+) of the step's ([0-9]+) kernel launches run in one wave", run)
print(json.dumps(dict(
    name=name, model=model.rsplit("/", 1)[-1], B=batch, T=seq,
    tok_s=round(batch * seq / step_s), samples_s=round(batch / step_s, 1),
    step_ms=round(step_s * 1e3, 2), gpu_GiB=float(loaded.group(2)),
    compile_s=round(compile_s, 1), load_s=float(loaded.group(1)),
    loss=round(log[steps]["loss"], 4),
    gemm_bias_gradients=f"{sums.group(1)}/{sums.group(2)}" if sums else "0/0",
    one_wave=f"{wave.group(1)}/{wave.group(2)}" if wave else "0")),
    flush=True)
PY
