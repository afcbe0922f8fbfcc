#!/usr/bin/env bash
# One training step under Nsight Compute (ncu, on the device machine): each
# launch's time, compute and memory throughput as percentages of the GPU's
# peaks, achieved occupancy and registers, kiln's kernels and cuBLASLt's
# alike; then the kernels that take the most time, with the op each of
# kiln's runs for (bench/ncu_summary.py). Then the six kiln kernels that
# took the most time, each in a step of its own, two launches, in ncu's
# sections that say why a kernel waits (warp states: what its warps stall
# on; scheduler: how often an instruction issues; compute and memory
# workloads: the pipes' and caches' use, L2 hit rate, shared memory bank
# conflicts), to ncu-NAME-KERNEL.csv. The step runs without a
# CUDA graph, so that ncu sees each launch, and ncu leaves the clocks alone
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
# Each of the kernels that took the most time, two launches of it, in a
# run of its own; these are diagnostics, so a run that fails leaves the
# table above standing.
for kernel in $("$python" "$here/ncu_summary.py" --top-kiln 6 "$out/ncu-$name.csv"); do
  "${NCU:-ncu}" --clock-control none --kernel-name "$kernel" --launch-count 2 \
    --section WarpStateStats --section SchedulerStats \
    --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --csv --page raw --log-file "$out/ncu-$name-$kernel.csv" \
    "$bin/kiln-run" "$work/model.kiln" --train --steps 1 --cuda-graph=false \
    --input "input_ids=$work/input_ids.npy" \
    --input "labels=$work/labels.npy" > "$work/run-$kernel.txt" ||
    echo "ncu_step.sh: the details of $kernel failed" >&2
  echo "== $kernel: $(grep -m1 " $kernel " "$out/kernels-$name.txt" | sed -E 's/.* [0-9]+x //')"
  "$python" "$here/ncu_summary.py" --details "$out/ncu-$name-$kernel.csv" || true
done
