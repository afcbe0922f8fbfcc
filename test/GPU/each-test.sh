#!/usr/bin/env bash
# Runs every test of a gtest binary in a process of its own, so that a
# crash costs one test and not those after it, each under a time limit;
# prints a line per test and, for the first crash, a backtrace (cuda-gdb,
# where the machine has it). Exits 1 if any test did not pass.
#
#   test/GPU/each-test.sh BINARY [SECONDS_PER_TEST] [gtest filter]
set -uo pipefail
binary="$1" limit="${2:-120}" filter="${3:-*}"
tests=$("$binary" --gtest_list_tests --gtest_filter="$filter" | awk '
  /^[^ ]/ { suite = $1; next }
  { print suite $1 }')
passed=0 failed=0 traced=0
for test in $tests; do
  log=$(mktemp)
  timeout --kill-after=10 "$limit" "$binary" --gtest_filter="$test" > "$log" 2>&1
  code=$?
  if [ $code -eq 0 ]; then
    passed=$((passed + 1))
    echo "PASS  $test"
  else
    failed=$((failed + 1))
    case $code in
      124 | 137) what="TIMEOUT (${limit} s)" ;;
      1) what="FAIL" ;;
      *) what="CRASH (exit $code)" ;;
    esac
    echo "$what  $test"
    grep -E "Failure|Expected|Actual|Which is|error|rror:" "$log" | head -n 12 | sed 's/^/      /'
    if [ $code -gt 128 ] && [ $code -ne 137 ] && [ $traced -eq 0 ] &&
      command -v cuda-gdb > /dev/null; then
      traced=1
      timeout 120 cuda-gdb -batch -ex run -ex bt --args "$binary" \
        --gtest_filter="$test" 2>&1 | grep -E "^#|signal" | head -n 30 | sed 's/^/      /'
    fi
  fi
  rm -f "$log"
done
echo "$passed passed, $failed did not"
[ $failed -eq 0 ]
