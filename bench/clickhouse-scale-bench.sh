#!/usr/bin/env bash
# The ClickHouse store at 10 million events vs the SQLite store, side by side in one run
# (issue 20, docs/scale-out.md): both filled with the same EVENTS events straight through the
# stores' batched inserts (`collector_bench fill`: OTLP-shaped tasks of 20 events, 3 of 50
# services each, first-seen times spread over 7 days, batches of 16,000 events as `collect`'s
# writer makes them), then on each:
#   - the fill rate (events/s of the store's own insert path, one writer);
#   - a service + time search (`Store::tasks` three times in one process, and `sightline tasks`);
#   - `sightline show --critical-path` of one task;
#   - the operations of one service (Jaeger's `/api/services/{service}/operations`, through
#     `sightline ui`), which reads `service_operations` on both (ClickHouse schema version 2,
#     SQLite schema version 3).
# Needs a ClickHouse server (scripts/start-clickhouse.sh) at $CH (default 127.0.0.1:8123).
#
#   bench/clickhouse-scale-bench.sh                    # 10,000,000 events
#   EVENTS=1000000 NO_BUILD=1 bench/clickhouse-scale-bench.sh
#   FILL_IDS=random bench/clickhouse-scale-bench.sh   # task ids hashed, not in time order
set -euo pipefail
cd "$(dirname "$0")/.."

EVENTS=${EVENTS:-10000000}
SERVICE=${SERVICE:-svc07}
CH=${CH:-127.0.0.1:8123}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
if [ -z "${NO_BUILD:-}" ]; then
  cargo build --release -q -p sightline
  cargo build --release -q -p causal-collector --example collector_bench
fi
T=$CARGO_TARGET_DIR/release
WORK=$(mktemp -d)
UI=
cleanup() { [ -n "$UI" ] && kill "$UI" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
URL="clickhouse://$CH/sightline_scale"
echo "machine: $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg); $EVENTS events; task ids ${FILL_IDS:-in time order}; ClickHouse $(curl -sS "http://$CH/" --data-binary 'SELECT version()')"

"$T/examples/collector_bench" fill "$WORK/s.db" "$EVENTS" | sed 's/^/sqlite     /'
"$T/examples/collector_bench" fill "$URL" "$EVENTS" | sed 's/^/clickhouse /'
echo "clickhouse store: $(curl -sS "http://$CH/" --data-binary "SELECT formatReadableSize(sum(bytes_on_disk)) FROM system.parts WHERE database = 'sightline_scale' AND active")"
T0=1700000000
SINCE=$((T0 + 2 * 86400))
UNTIL=$((T0 + 3 * 86400))
TASK=$("$T/sightline" tasks --db "$WORK/s.db" --service "$SERVICE" --since "$SINCE" --until "$UNTIL" --limit 1 | awk 'NR==2{print $1}')
for s in "sqlite --db $WORK/s.db" "clickhouse --store $URL"; do
  read -r label flag store <<<"$s"
  "$T/examples/collector_bench" search "$store" "$SERVICE" "$SINCE" "$UNTIL" 20 | sed "s/^/$label /"
  /usr/bin/time -f "$label sightline tasks --service --since --until: %e s wall, %M KB peak RSS" \
    "$T/sightline" tasks "$flag" "$store" --service "$SERVICE" --since "$SINCE" --until "$UNTIL" --limit 20 >"$WORK/tasks-$label.txt"
  /usr/bin/time -f "$label sightline show --critical-path of $TASK: %e s wall, %M KB peak RSS" \
    "$T/sightline" show "$TASK" "$flag" "$store" --critical-path >"$WORK/show-$label.txt"
  "$T/sightline" ui --listen 127.0.0.1:0 "$flag" "$store" >"$WORK/ui.txt" 2>/dev/null &
  UI=$!
  for _ in $(seq 100); do grep -q "sightline ui:" "$WORK/ui.txt" 2>/dev/null && break; sleep 0.1; done
  addr=$(sed -n 's|sightline ui: http://\([0-9.:]*\)/.*|\1|p' "$WORK/ui.txt")
  for run in 1 2; do
    curl -sS -o "$WORK/ops.json" -w "$label operations of $SERVICE (/api/services/$SERVICE/operations) $run: %{time_total} s\n" \
      "http://$addr/api/services/$SERVICE/operations"
  done
  echo "$label   $(tr -d '\n' <"$WORK/ops.json" | head -c 120)"
  kill "$UI"; wait "$UI" 2>/dev/null || true; UI=
done
cmp -s "$WORK/tasks-sqlite.txt" "$WORK/tasks-clickhouse.txt" && echo "tasks: the same list from both stores" || echo "tasks: the stores' lists DIFFER"
cmp -s "$WORK/show-sqlite.txt" "$WORK/show-clickhouse.txt" && echo "show: the same text from both stores" || echo "show: the stores' texts DIFFER"
curl -sS "http://$CH/" --data-binary "DROP DATABASE IF EXISTS sightline_scale" >/dev/null
