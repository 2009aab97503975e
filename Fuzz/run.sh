#!/usr/bin/env bash
# Builds the predicate parser fuzz target with libFuzzer and runs it.
#   Fuzz/run.sh [seconds]      (default 60)
# The committed seed corpus (Fuzz/corpus) is read-only input; new inputs go to a scratch corpus in .build-fuzz/.
# A crash leaves its input as crash-* in the current directory; replay it with: .build-fuzz/release/predicate-fuzzer FILE
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-60}"
swift build -c release --scratch-path .build-fuzz -Xswiftc -sanitize=fuzzer -Xswiftc -parse-as-library -Xswiftc -use-ld=lld
mkdir -p .build-fuzz/corpus
binary=.build-fuzz/release/predicate-fuzzer
SWIFT_BACKTRACE=enable=no "$binary" -max_total_time="$seconds" -max_len=512 -print_final_stats=1 .build-fuzz/corpus corpus
