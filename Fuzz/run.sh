#!/usr/bin/env bash
# Builds the fuzz targets with libFuzzer and runs each for a while.
#   Fuzz/run.sh [seconds per target] [target …]     (default 60 s; targets: predicate-fuzzer json-import-fuzzer
#                                                    sql-compiler-fuzzer, all by default)
# The committed seed corpora (Fuzz/corpus/<target without -fuzzer>) are read-only input; new inputs go to scratch
# corpora in .build-fuzz/. A crash leaves its input as crash-* in Fuzz/; replay it with
#   .build-fuzz/release/<target> crash-…
# Prints one summary line per target: executions, new corpus size and crashes (0 or 1: libFuzzer stops at the first).
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(predicate-fuzzer json-import-fuzzer sql-compiler-fuzzer)
swift build -c release --scratch-path .build-fuzz -Xswiftc -sanitize=fuzzer -Xswiftc -parse-as-library -Xswiftc -use-ld=lld
status=0
summary=()
for target in "${targets[@]}"; do
  corpus="corpus/${target%-fuzzer}"
  mkdir -p ".build-fuzz/corpus-$target"
  log=".build-fuzz/$target.log"
  echo "== $target for ${seconds}s"
  if SWIFT_BACKTRACE=enable=no ".build-fuzz/release/$target" -max_total_time="$seconds" -max_len=2048 -print_final_stats=1 \
      ".build-fuzz/corpus-$target" "$corpus" > "$log" 2>&1; then
    crashes=0
  else
    crashes=1
    status=1
    grep -E "Fatal error|Precondition failed|ERROR: libFuzzer|SUMMARY" "$log" | head -5 || true
  fi
  runs=$(grep -Eo "stat::number_of_executed_units: *[0-9]+" "$log" | grep -Eo "[0-9]+$" || echo "?")
  units=$(ls ".build-fuzz/corpus-$target" | wc -l)
  summary+=("$target: $runs executions in ${seconds}s, $units inputs in its corpus, $crashes crashes")
done
printf '%s\n' "${summary[@]}"
exit $status
