#!/usr/bin/env bash
# Search benchmark (issue 17): `sightline tasks --service S --since A --until B --limit 20` on a
# store of EVENTS events (default 10,000,000), the query Jaeger's search page makes.
#
#   bench/search-bench.sh                  # 10,000,000 events (500,000 tasks of 20 events)
#   EVENTS=2000000 bench/search-bench.sh   # a smaller store where 10M takes too long to fill
#   NO_BUILD=1 bench/search-bench.sh       # release binaries already built
#
# The store is filled straight through `Store::insert` (crates/causal-collector/examples/
# collector_bench.rs `fill`: OTLP-shaped tasks, 3 of 50 services each, first-seen times spread
# over 7 days), so the index tables (task_services, task_operations, task_attributes) are the
# collector's own. Then the same query is timed twice, side by side:
#   - `collector_bench search`: `Store::tasks` alone, three times in one process (first on a
#     freshly opened store);
#   - `sightline tasks`: the whole command (process start, open, query, print), once, with
#     /usr/bin/time.
# The window is day 3 of the 7 (about 1/7 of the tasks; a service is in ~6% of the tasks).
# Target: well under a second.
set -euo pipefail
cd "$(dirname "$0")/.."

EVENTS=${EVENTS:-10000000}
SERVICE=${SERVICE:-svc07}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target/bench-build}
if [ -z "${NO_BUILD:-}" ]; then
  cargo build --release -q -p sightline
  cargo build --release -q -p causal-collector --example collector_bench
fi
T=$CARGO_TARGET_DIR/release
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
DB=$WORK/search.db

"$T/examples/collector_bench" fill "$DB" "$EVENTS"
T0=1700000000
SINCE=$((T0 + 2 * 86400))
UNTIL=$((T0 + 3 * 86400))
"$T/examples/collector_bench" search "$DB" "$SERVICE" "$SINCE" "$UNTIL" 20
/usr/bin/time -f 'sightline tasks: %e s wall, %M KB peak RSS' \
  "$T/sightline" tasks --db "$DB" --service "$SERVICE" --since "$SINCE" --until "$UNTIL" --limit 20 >"$WORK/out.txt"
echo "sightline tasks printed $(($(wc -l <"$WORK/out.txt") - 1)) tasks"
