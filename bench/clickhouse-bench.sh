#!/usr/bin/env bash
# ClickHouse store vs SQLite store, side by side in one run (docs/scale-out.md):
# `sightline import` of every trace file in ../shared/data, REPS times under distinct task ids
# (each copy is new data, not a duplicate), into a SQLite file and into a ClickHouse database;
# prints events/s and peak RSS of each, two importers into one ClickHouse at once, and the time
# of `show` of one task and of a service + time search (`tasks --service --since`) on each; and
# ClickHouse ingest without the per-batch duplicate lookup (`?duplicate_lookup=off`).
# Needs a ClickHouse server (scripts/start-clickhouse.sh) at $CH (default 127.0.0.1:8123).
set -euo pipefail
cd "$(dirname "$0")/.."
REPS="${REPS:-20}"
CH="${CH:-127.0.0.1:8123}"
# BIN=path uses a sightline already built (e.g. a debug build) instead of a release build.
if [ -z "${BIN:-}" ]; then cargo build --release -q -p sightline; fi
bin="${BIN:-$PWD/target/release/sightline}"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
data="${SIGHTLINE_SHARED_DATA:-$PWD/../shared/data}"
# REPS copies of every X-Trace file, each with its task ids' first 8 digits set to the copy number.
n=0
for r in $(seq "$REPS"); do
  for f in "$data"/xtrace/*.json; do
    n=$((n+1))
    python3 - "$f" "$work/in-$n.json" "$r" <<'PY'
import json, sys
src, dst, r = sys.argv[1], sys.argv[2], int(sys.argv[3])
text = open(src).read()
doc = json.loads(text)
tag = "%08X" % r
def retag(o):
    # The task id is the top-level "id" and digits 2.. of every "X-Trace" metadata value.
    if isinstance(o, dict):
        out = {}
        for k, v in o.items():
            if k == "id" and isinstance(v, str):
                out[k] = tag + v[8:]
            elif k == "X-Trace" and isinstance(v, list):
                out[k] = [x[:2] + tag + x[10:] for x in v]
            else:
                out[k] = retag(v)
        return out
    if isinstance(o, list):
        return [retag(x) for x in o]
    return o
json.dump(retag(doc), open(dst, "w"))
PY
  done
done
files=("$work"/in-*.json)
curl -sS "http://$CH/" --data-binary "DROP DATABASE IF EXISTS sightline_bench" >/dev/null
curl -sS "http://$CH/" --data-binary "DROP DATABASE IF EXISTS sightline_bench2" >/dev/null
curl -sS "http://$CH/" --data-binary "DROP DATABASE IF EXISTS sightline_bench3" >/dev/null
run() { # label, store args...
  local label="$1"; shift
  local t0 t1 rss
  t0=$(date +%s.%N)
  rss=$( { /usr/bin/time -f '%M' "$bin" import "$@" "${files[@]}" >"$work/$label.out"; } 2>&1 | tail -1)
  t1=$(date +%s.%N)
  local ev; ev=$(awk '{s+=$2} END {print s}' "$work/$label.out")
  echo "$label: $ev events in $(echo "$t1 - $t0" | bc) s = $(echo "$ev / ($t1 - $t0)" | bc) events/s, peak RSS ${rss} KB"
}
run sqlite --db "$work/s.db"
run clickhouse --store "clickhouse://$CH/sightline_bench"
# The same without the per-batch duplicate lookup (docs/collector-store.md, "De-duplication").
run clickhouse-no-lookup --store "clickhouse://$CH/sightline_bench3?duplicate_lookup=off"
curl -sS "http://$CH/" --data-binary "DROP DATABASE IF EXISTS sightline_bench3" >/dev/null
# Two importers into one ClickHouse database at once (the same files: each event stored once).
t0=$(date +%s.%N)
"$bin" import --store "clickhouse://$CH/sightline_bench2" "${files[@]}" >/dev/null &
"$bin" import --store "clickhouse://$CH/sightline_bench2" "${files[@]}" >/dev/null
wait
t1=$(date +%s.%N)
echo "two importers into one ClickHouse: $(echo "$t1 - $t0" | bc) s for 2 x the events above; stored once: $(curl -sS "http://$CH/" --data-binary 'SELECT count() FROM sightline_bench2.events FINAL')"
task=$("$bin" tasks --db "$work/s.db" | awk 'NR==2{print $1}')
for s in "--db $work/s.db" "--store clickhouse://$CH/sightline_bench"; do
  t0=$(date +%s.%N); $bin show $s "$task" --critical-path >/dev/null; t1=$(date +%s.%N)
  t2=$(date +%s.%N); $bin tasks $s --service "${SERVICE:-}" --since 2013-01-01 >/dev/null || true; t3=$(date +%s.%N)
  echo "${s%% *}: show of one task $(echo "$t1 - $t0" | bc) s; service + time search $(echo "$t3 - $t2" | bc) s"
done
