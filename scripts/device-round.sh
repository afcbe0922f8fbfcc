#!/usr/bin/env bash
# One device call's checks on a GPU machine, from the repository root with
# build-device carried and shared/ beside it (scripts/device-build.sh);
# results under $OUT
# (default device-results), each part within a call's ten minutes:
#
#   bash scripts/device-round.sh tests      # kiln-gpu-tests, cuDNN's graphs, the loss curve
#   bash scripts/device-round.sh gpt2       # bench: kiln (profiled) and torch.compile
#   bash scripts/device-round.sh ablation   # bench: the ablation and eager/AMP
#   bash scripts/device-round.sh bert       # bench: BERT-base, kiln and PyTorch
#
# Each check's outcome and the end of its log go to $OUT/summary.txt,
# printed last (the reply carries the end of the output); full logs beside.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-device-results}"
mkdir -p "$out"
bin=build-device/bin
# cuDNN (artifacts compiled with --attention=cudnn) is PyTorch's there.
cudnn="$(python3 -c 'import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], "lib"))' 2>/dev/null || true)"
export LD_LIBRARY_PATH="$PWD/build-device/lib-extra:$cudnn:${LD_LIBRARY_PATH:-}"
export KILN_BIN="$bin" OUT="$out" KILN_SHARED="$PWD/shared"
summary="$out/summary.txt"
nvidia-smi -L >> "$summary" 2>&1
status=0
run() { # name, command...
  local name="$1"
  shift
  echo "== $name" >> "$summary"
  "$@" > "$out/$name.log" 2>&1
  local code=$?
  if [ $code -eq 0 ]; then
    echo "   passed" >> "$summary"
  else
    status=1
    echo "   FAILED (exit $code; $out/$name.log)" >> "$summary"
  fi
  tail -n 5 "$out/$name.log" | sed 's/^/   /' >> "$summary"
}
for part in "$@"; do
  case "$part" in
  tests)
    run gpu-tests env KILN_SOURCE_DIR="$PWD" \
      KILN_FIXTURES_DIR="$KILN_SHARED/fixtures" \
      "$bin/kiln-gpu-tests" --gtest_output="xml:$out/gpu-tests.xml"
    run cudnn-graphs "$bin/kiln-runtime-tests"
    run loss-curve bash test/GPU/loss-curve.sh "$bin" ;;
  gpt2)
    run bench-gpt2 env KILN_BENCH_PROFILE=20 bash bench/run.sh gpt2-kiln \
      gpt2-torch-compile ;;
  ablation) run bench-ablation bash bench/run.sh gpt2-ablation gpt2-torch-eager ;;
  bert) run bench-bert env KILN_BENCH_PROFILE=20 bash bench/run.sh bert-kiln bert-torch ;;
  *) echo "device-round.sh: unknown part '$part'" >&2; exit 1 ;;
  esac
done
cat "$summary"
exit $status
