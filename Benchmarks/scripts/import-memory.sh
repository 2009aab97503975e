#!/usr/bin/env bash
# Peak memory and time of `coredata import` as the file grows: the import streams its file and saves in batches
# inside one transaction, so memory should follow the batch, not the file.
#
# Usage: Benchmarks/scripts/import-memory.sh [COUNT ...]   (default: 100000 1000000)
# Each file holds 1,000 departments and COUNT employees, each with an "@id" and a reference to its department, in the
# Company test model. Prints one line per size: objects, file size, peak resident memory (GNU time's %M), seconds.
set -euo pipefail
cd "$(dirname "$0")/../.."
counts=("$@")
[ ${#counts[@]} -eq 0 ] && counts=(100000 1000000)
swift build -c release --product coredata >/dev/null
tool=.build/release/coredata
model=Tests/_TestSupport/Fixtures/Company.xcdatamodeld
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
printf '%-10s %-9s %-14s %-9s %s\n' objects "file MB" "peak RSS MB" seconds "RSS bytes/object"
for count in "${counts[@]}"; do
  awk -v n="$count" 'BEGIN {
    printf "{\"Department\": [\n"
    for (d = 0; d < 1000; d++) printf "{\"@id\": \"d%d\", \"name\": \"Department %d\", \"budget\": \"%d.25\"}%s\n", d, d, d, (d < 999 ? "," : "")
    printf "],\n\"Employee\": [\n"
    for (i = 0; i < n; i++) printf "{\"@id\": \"e%d\", \"name\": \"Employee %d\", \"age\": %d, \"salary\": %d.5, \"department\": \"d%d\"}%s\n", i, i, 20 + i % 40, 30000 + i % 1000, i % 1000, (i < n - 1 ? "," : "")
    printf "]}\n"
  }' > "$work/data.json"
  rm -f "$work"/store.sqlite*
  /usr/bin/time -f "%M %e" -o "$work/time.txt" "$tool" import --model "$model" --store "$work/store.sqlite" "$work/data.json" >/dev/null
  read -r rss seconds < "$work/time.txt"
  size=$(stat -c %s "$work/data.json")
  objects=$((count + 1000))
  printf '%-10s %-9s %-14s %-9s %s\n' "$objects" "$((size / 1000000))" "$((rss / 1024))" "$seconds" "$((rss * 1024 / objects))"
done
