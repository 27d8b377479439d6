#!/usr/bin/env bash
# Runs libFuzzer targets built in a sanitizer build dir: each for SECONDS, JOBS at a time (each
# fuzzer uses one core), from the committed seeds in tests/fuzz/corpus/<target>/ plus what
# earlier runs learnt in BUILD/corpus/<target>/. Exits non-zero when any target crashes, leaks or
# reports; its input is then in BUILD/crashes/ (turn it into a regression test or seed).
# A target with a tests/fuzz/<target>.py is a Python (atheris) target run with $PYTHON.
#   PYTHON=.venv/bin/python tests/fuzz/run_fuzz.sh BUILD SECONDS JOBS TARGET...
set -euo pipefail
build=$1 seconds=$2 jobs=$3
shift 3
mkdir -p "$build/crashes" "$build/logs"
export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

run_one() {
  local t=$1 build=$2 seconds=$3 extra=() cmd=("$2/tests/fuzz/$1")
  [ -f "tests/fuzz/$t.py" ] && cmd=("${PYTHON:-python3}" "tests/fuzz/$t.py")
  mkdir -p "$build/corpus/$t" "tests/fuzz/corpus/$t"
  # The lint target also starts from the SQL files of the tests, with a SQL + Jinja dictionary.
  [ "$t" = lint_fuzz ] && extra=(-dict=tests/fuzz/lint.dict tests/sql)
  local log="$build/logs/$t.log"
  if "${cmd[@]}" -max_total_time="$seconds" -print_final_stats=1 -timeout=10 \
       -rss_limit_mb=1024 -artifact_prefix="$build/crashes/$t-" \
       "$build/corpus/$t" "tests/fuzz/corpus/$t" "${extra[@]}" >"$log" 2>&1; then
    local runs cov
    runs=$(grep -o 'number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
    echo "$t: ${runs} runs, ${cov:-cov: ?}, no findings"
  else
    echo "$t: FAILED; log $log, input in $build/crashes/:"
    grep -A30 -m1 'ERROR:\|runtime error\|==ERROR\|deadly signal' "$log" | head -50
    return 1
  fi
}
export -f run_one

printf '%s\n' "$@" | xargs -P "$jobs" -I{} bash -c 'run_one "$@"' _ {} "$build" "$seconds"
