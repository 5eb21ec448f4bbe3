#!/usr/bin/env bash
# JSON export benchmark (issue 17): `sightline show TASK --format json` of a task of EVENTS events
# (default 100,000: 50,000 spans in a tree of fan-out 10), wall time and peak RSS
# (/usr/bin/time -v), plus `--critical-path` for comparison. Target: <= 1 s and <= 200 MB.
#
#   bench/show-json-bench.sh
#   EVENTS=200000 NO_BUILD=1 bench/show-json-bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."

EVENTS=${EVENTS:-100000}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
if [ -z "${NO_BUILD:-}" ]; then
  cargo build --release -q -p sightline
  cargo build --release -q -p causal-collector --example collector_bench
fi
T=$CARGO_TARGET_DIR/release
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
DB=$WORK/big.db
TASK=B16B16B16B16B16B16B16B16B16B16B1

"$T/examples/collector_bench" bigtask "$DB" "$EVENTS"
for extra in "" "--critical-path"; do
  /usr/bin/time -v "$T/sightline" show "$TASK" --db "$DB" --format json $extra >"$WORK/out.json" 2>"$WORK/time.txt"
  wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$WORK/time.txt")
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$WORK/time.txt")
  user=$(sed -n 's/.*User time (seconds): //p' "$WORK/time.txt")
  sys=$(sed -n 's/.*System time (seconds): //p' "$WORK/time.txt")
  # CPU time as well as wall: on a loaded machine the wall time is mostly waiting for a core.
  echo "show --format json ${extra:-(graph only)}: $EVENTS events, wall $wall, CPU $(echo "$user + $sys" | bc) s, peak RSS $((rss / 1024)) MB, output $(($(stat -c %s "$WORK/out.json") / 1000000)) MB"
done
