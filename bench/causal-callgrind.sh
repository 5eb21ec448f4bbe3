#!/usr/bin/env bash
# Exact instructions per operation on the calling thread for the causal bench's main cases, with
# valgrind's callgrind (the machine is shared: times swing between runs, instruction counts do
# not). Each case runs alone (causal-compare's case filter) for 1 and for 11 rounds; the
# difference of the main thread's totals over the 100,000 operations between them drops start-up
# and the other cases. The reporter thread is not counted. Figures: docs/causal-cost.md.
#
# Usage: bench/causal-callgrind.sh            (needs valgrind)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$here/../target/causal-bench}"
cargo build --release --quiet --manifest-path "$here/causal-compare/Cargo.toml"
bin="$CARGO_TARGET_DIR/release/causal-compare"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
total() { # rounds case: the main thread's instruction total
  valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$out/cg" "$bin" "$1" "$2" \
    >/dev/null 2>&1
  awk '/^(summary|totals):/ {print $2; exit}' "$out/cg-01"
  rm -f "$out"/cg*
}
for c in "causal event (label + 2" "causal event (label only)" "causal event, unsampled" \
  "tracing span (Registry):" "tracing span (Registry + CausalLayer)"; do
  a="$(total 1 "$c")"
  b="$(total 11 "$c")"
  awk -v a="$a" -v b="$b" -v c="$c" 'BEGIN {printf "%-40s %8.1f instructions per operation\n", c, (b - a) / 100000}'
done
