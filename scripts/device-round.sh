#!/usr/bin/env bash
# One device call's checks on a GPU machine, from the repository root with
# build-device carried and shared/ beside it (scripts/device-build.sh);
# results under $OUT
# (default device-results), each part within a call's ten minutes:
#
#   bash scripts/device-round.sh quick      # for a session's 15 minutes of device time (at most
#                                           # 9 of them): the kernel tests and a step's, then GPT-2 and
#                                           # BERT against torch.compile (bench/run.sh gpt2-quick
#                                           # bert-quick), profiled
#   bash scripts/device-round.sh tests      # kiln-gpu-tests but whole models, cuDNN's graphs, the loss curve
#   bash scripts/device-round.sh loss-curve # 200 steps of the example on the GPU against the CPU's
#   bash scripts/device-round.sh models     # kiln-gpu-tests of whole models (each compiles
#                                           # 100-200 kernels: minutes on the device's cores)
#   bash scripts/device-round.sh gpt2       # bench: kiln (profiled) and torch.compile
#   bash scripts/device-round.sh gpt2-row   # bench: kiln's GPT-2 row alone, profiled
#   bash scripts/device-round.sh ablation   # bench: the ablation and eager/AMP
#   bash scripts/device-round.sh bert       # bench: BERT-base, kiln and PyTorch
#   bash scripts/device-round.sh ncu        # GPT-2's step under Nsight Compute:
#                                           # the top kernels' throughput and occupancy
#   bash scripts/device-round.sh sanitize   # the kernel tests under compute-sanitizer:
#                                           # memcheck, racecheck (shared memory), synccheck
#
# Each check runs under a time limit (a hang costs that check, not the
# call). Its outcome and the end of its log go to $OUT/summary.txt, printed
# last (the reply carries the end of the output); the full logs, benchmark
# lines and profiles go to $OUT/logs.tar.gz, rewritten after every check
# (the device tool brings back only a few files, and what a call left when
# its limit struck).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-device-results}"
logs="$out.logs"
mkdir -p "$out" "$logs"
bin=build-device/bin
# cuDNN (artifacts compiled with --attention=cudnn) is PyTorch's there.
cudnn="$(python3 -c 'import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], "lib"))' 2>/dev/null || true)"
export LD_LIBRARY_PATH="$PWD/build-device/lib-extra:$cudnn:${LD_LIBRARY_PATH:-}"
export KILN_BIN="$bin" OUT="$logs" KILN_SHARED="$PWD/shared"
summary="$out/summary.txt"
nvidia-smi -L >> "$summary" 2>&1
status=0 child=
pack() { tar -czf "$out/logs.tar.gz" -C "$logs" .; }
trap '[ -n "$child" ] && kill $child; echo "   stopped: out of time" >> "$summary"
  pack; cat "$summary"; exit 124' TERM
run() { # name, time limit in seconds, command...
  local name="$1" limit="$2"
  shift 2
  echo "== $name" >> "$summary"
  # In the background, so that a TERM (the call's own limit) is handled at
  # once: the logs so far still come back.
  timeout --kill-after=10 "$limit" "$@" > "$logs/$name.log" 2>&1 &
  child=$!
  wait $child
  local code=$?
  if [ $code -eq 0 ]; then
    echo "   passed" >> "$summary"
  else
    status=1
    echo "   FAILED (exit $code; $name.log)" >> "$summary"
  fi
  grep -v '^PASS  ' "$logs/$name.log" | tail -n 30 | sed 's/^/   /' >> "$summary"
  pack
}
# The GPU tests, each in a process of its own (then seconds per test and
# a filter).
gpu_tests=(env KILN_SOURCE_DIR="$PWD" KILN_FIXTURES_DIR="$KILN_SHARED/fixtures"
  bash test/GPU/each-test.sh "$bin/kiln-gpu-tests")
whole_models='*ModelTargetTest*:*FixtureTargetTest*'
for part in "$@"; do
  case "$part" in
  tests)
    run gpu-tests 330 "${gpu_tests[@]}" 60 "-$whole_models"
    run cudnn-graphs 60 "$bin/kiln-runtime-tests"
    run loss-curve 150 bash test/GPU/loss-curve.sh "$bin" ;;
  loss-curve) run loss-curve 150 bash test/GPU/loss-curve.sh "$bin" ;;
  models) run gpu-model-tests 540 "${gpu_tests[@]}" 180 "$whole_models" ;;
  quick)
    # Every kernel test, the split sums' and the example's bf16 step, whole,
    # in grids of three blocks and with the query gradient from stored dS,
    # in one process (no start-up per test);
    # then the benchmarks, each baseline before kiln's rows: nine minutes
    # at most (about five on an H200), so that a machine's start fits
    # beside them in 15 minutes of device time.
    run gpu-kernel-tests 240 env KILN_SOURCE_DIR="$PWD" \
      KILN_FIXTURES_DIR="$KILN_SHARED/fixtures" "$bin/kiln-gpu-tests" \
      --gtest_filter='*KernelTest*:RoundingTest.*:SplitSumTest.*:TargetTest.Gpt2StepMatchesInterpreterInBf16:TargetTest.StepInFewerBlocksMatchesInterpreter:TargetTest.Gpt2StepWithStoredScoreGradientsMatchesInterpreter'
    run bench-quick 300 env KILN_BENCH_PROFILE=20 bash bench/run.sh \
      gpt2-quick bert-quick ;;
  gpt2)
    # The anchor first: should the call's time run out, the last kiln rows
    # are lost, not what every ratio needs.
    run bench-gpt2 540 env KILN_BENCH_PROFILE=20 bash bench/run.sh \
      gpt2-torch-compile gpt2-kiln ;;
  gpt2-row)
    run bench-gpt2-row 150 env KILN_BENCH_PROFILE=20 bash bench/kiln_train.sh \
      "kiln bf16, all on" "$KILN_SHARED/fixtures/graphs/gpt2_124m.onnx" 16 1024 \
      50257 tokens --weight-decay 0.1 --precision bf16 ;;
  ablation) run bench-ablation 540 bash bench/run.sh gpt2-ablation gpt2-torch-eager ;;
  bert) run bench-bert 540 env KILN_BENCH_PROFILE=20 bash bench/run.sh bert-torch bert-kiln ;;
  ncu)
    run ncu-gpt2 540 bash bench/ncu_step.sh gpt2 \
      "$KILN_SHARED/fixtures/graphs/gpt2_124m.onnx" 16 1024 50257 tokens \
      --weight-decay 0.1 --precision bf16 ;;
  sanitize)
    # Every kernel test under memcheck; those with shared memory and
    # barriers (attention's pipeline, the row and column reductions) under
    # racecheck and synccheck.
    shared=$(printf '*KernelTest*%s*:' Attention Norm Softmax ColumnSums \
      Reductions LongRows Loss TopK)
    shared="${shared%:}"
    run sanitize-memcheck 240 compute-sanitizer --tool memcheck \
      --error-exitcode 1 "$bin/kiln-gpu-tests" --gtest_filter='*KernelTest*'
    run sanitize-racecheck 180 compute-sanitizer --tool racecheck \
      --error-exitcode 1 "$bin/kiln-gpu-tests" --gtest_filter="$shared"
    run sanitize-synccheck 100 compute-sanitizer --tool synccheck \
      --error-exitcode 1 "$bin/kiln-gpu-tests" --gtest_filter="$shared" ;;
  *) echo "device-round.sh: unknown part '$part'" >&2; exit 1 ;;
  esac
done
[ -f "$logs/ratios.md" ] && cat "$logs/ratios.md" >> "$summary"
cat "$summary"
exit $status
