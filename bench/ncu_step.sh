#!/usr/bin/env bash
# One training step under Nsight Compute (ncu, on the device machine): each
# launch's time, compute and memory throughput as percentages of the GPU's
# peaks, achieved occupancy and registers, kiln's kernels and cuBLASLt's
# alike; then the kernels that take the most time, with the op each of
# kiln's runs for (bench/ncu_summary.py). The step runs without a CUDA
# graph, so that ncu sees each launch, and ncu leaves the clocks alone
# (METHOD.md beside the device tool's README).
#
#   bench/ncu_step.sh NAME MODEL.onnx BATCH SEQ VOCAB LABELS [options...]
#
# The arguments are bench/kiln_train.sh's. Writes ${OUT:-.}/ncu-NAME.csv
# (every launch's metrics) and kernels-NAME.txt (kiln-compile
# --report-kernels) and prints the summary. Environment: KILN_BIN (default
# build/bin), PYTHON (default python3, with numpy), NCU (default ncu).
here="$(dirname "$0")"
source "$here/arguments.sh"
shift 6
out="${OUT:-.}"

"$bin/kiln-compile" "$model" --dim "batch=$batch" --dim "seq=$seq" \
  --target=cuda --arch=sm_90 --report-kernels -o "$work/model.kiln" "$@" \
  > "$out/kernels-$name.txt"
"$python" "$here/random_batches.py" "$work" "$batch" "$seq" "$vocab" "$labels"
metrics=gpu__time_duration.sum
metrics+=,sm__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,dram__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,sm__warps_active.avg.pct_of_peak_sustained_active
metrics+=,launch__registers_per_thread
"${NCU:-ncu}" --clock-control none --metrics "$metrics" --csv --page raw \
  --log-file "$out/ncu-$name.csv" \
  "$bin/kiln-run" "$work/model.kiln" --train --steps 1 --cuda-graph=false \
  --input "input_ids=$work/input_ids.npy" --input "labels=$work/labels.npy" \
  > "$work/run.txt"
"$python" "$here/ncu_summary.py" "$out/ncu-$name.csv" "$out/kernels-$name.txt"
