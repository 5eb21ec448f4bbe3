#!/usr/bin/env bash
# Collector benchmark: sustained X-Trace ingest over TCP into the embedded SQLite store, peak RSS,
# and the critical-path time of the largest task.
#
#   bench/collector-bench.sh            # defaults: 2,000,000 and 4,000,000 events, 2 connections
#   EVENTS=1000000 CONNS=4 FORMAT=text bench/collector-bench.sh
#   NO_BUILD=1 FORMAT=text bench/collector-bench.sh   # binaries already built
#   CLICKHOUSE=127.0.0.1:8123 bench/collector-bench.sh # also ClickHouse (issue 20), see below
#
# For each run: `sightline collect` (release build, loopback, ephemeral port, fresh store) and the
# load generator (crates/causal-collector/examples/collector_bench.rs) sending length-prefixed
# reports as fast as the collector takes them (TCP backpressure paces the sender). The rate is
# events committed / (first byte sent → collector exited after SIGTERM with everything committed),
# so it is sustained end-to-end throughput, not socket acceptance. Peak RSS is the collector's
# VmHWM. Two sizes are run: if memory is bounded, the peak does not grow with the event count.
# Side by side, "baseline" inserts the same events straight into a store (no network, no
# decoding): the ceiling of the store itself; the ratio shows what ingest costs on top.
# The "decode" line times the text decoder alone, and the parse within it (see collector_bench.rs).
# Target (issue 6): >= 200,000 events/s with bounded memory, on this 2-core machine.
# With CLICKHOUSE=HOST:PORT (a server started by scripts/start-clickhouse.sh), the same load then
# goes into `collect --store clickhouse://HOST:PORT/DB` (a fresh database), side by side with the
# SQLite run of the same size: events/s and the collector's peak RSS of each; then two collectors
# (two processes, each its own listener and generator, distinct tasks) into one ClickHouse
# database at once, their combined rate, and the stored events counted back from ClickHouse
# (`events FINAL`, so a duplicate would not count twice). CH_EVENTS sets that size (default
# EVENTS / 4: ClickHouse 18.16 ingests far slower than SQLite here).
set -euo pipefail
cd "$(dirname "$0")/.."

EVENTS=${EVENTS:-2000000}
CONNS=${CONNS:-2}
FORMAT=${FORMAT:-binary}
BIG=${BIG:-200000}
TARGET_RATE=200000

# NO_BUILD=1 uses the release binaries already in $CARGO_TARGET_DIR (e.g. while another crate of
# the workspace does not compile).
# Its own target directory: the README's static-pie build in target/ stays as it is.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target/bench-build}
if [ -z "${NO_BUILD:-}" ]; then
  cargo build --release -q -p sightline
  cargo build --release -q -p causal-collector --example collector_bench
fi
T=$CARGO_TARGET_DIR/release
BIN=$T/sightline
GEN=$T/examples/collector_bench
WORK=$(mktemp -d)
PID=
# The collector runs under time(1): its pid is time's only child.
collector_pid() { cat "/proc/$PID/task/$PID/children" 2>/dev/null | awk '{print $1}'; }
cleanup() { if [ -n "$PID" ]; then c=$(collector_pid); [ -n "$c" ] && kill "$c" 2>/dev/null; fi; rm -rf "$WORK"; }
trap cleanup EXIT

echo "machine: $(nproc) cores, $(uname -r); format=$FORMAT conns=$CONNS big-task=$BIG"

# run N -> prints a result line; leaves the store in $WORK/run-N.db
run() {
  local n=$1 db=$WORK/run-$1.db out=$WORK/out-$1
  # GNU time reports the collector's wall, user and system CPU time and peak RSS (kB).
  /usr/bin/time -f "%e %U %S %M" -o "$WORK/time-$n" \
    "$BIN" collect --xtrace-port 0 --no-udp --no-otlp --db "$db" >"$out" 2>"$WORK/err-$n" &
  PID=$!
  for _ in $(seq 100); do grep -q "X-Trace TCP" "$out" 2>/dev/null && break; sleep 0.1; done
  local addr
  addr=$(sed -n 's/.*X-Trace TCP \([0-9.]*:[0-9]*\).*/\1/p' "$out" | head -1)
  [ -n "$addr" ] || { echo "collector did not start"; cat "$WORK/err-$n"; exit 1; }
  local t0 t1
  t0=$(date +%s.%N)
  "$GEN" load "$addr" "$n" "$CONNS" "$FORMAT" "$BIG"
  kill -TERM "$(collector_pid)"  # the collector is the child of time(1)
  wait "$PID"
  t1=$(date +%s.%N)
  PID=
  local stored wcpu
  stored=$(sed -n 's/.*stopped; \([0-9]*\) events stored.*/\1/p' "$out")
  wcpu=$(sed -n 's/.*store writer CPU \([0-9.]*\)s.*/\1/p' "$out")
  [ "$stored" = "$n" ] || { echo "stored $stored of $n events"; tail -3 "$out"; exit 1; }
  read -r _ user sys rss <"$WORK/time-$n"
  awk -v n="$n" -v a="$t0" -v b="$t1" -v u="$user" -v s="$sys" -v w="$wcpu" -v rss="$rss" -v mb="$(du -m "$db" | cut -f1)" 'BEGIN {
    printf "ingest: %d events committed in %.2fs wall = %.0f events/s; peak RSS %.0f MiB; store %d MiB\n", n, b - a, n / (b - a), rss / 1024, mb
    printf "        collector CPU %.2fs (%.2f us/event); store writer thread CPU %.2fs = %.0f events per writer CPU-second\n", u + s, (u + s) * 1e6 / n, w, n / w
  }' | tee "$WORK/result-$n"
  echo "$n $t0 $t1 $user $sys $wcpu $rss" >"$WORK/fig-$n"
}

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine slows the wall-clock figures; the CPU figures are not affected by it)"
run "$EVENTS"
run $((EVENTS * 2))
"$GEN" baseline "$WORK/baseline.db" "$EVENTS" | tee "$WORK/baseline"
"$GEN" analyze "$WORK/run-$((EVENTS * 2)).db"
# The text decoder alone: the collector's decode_payload (causal::Report::decode, then the
# conversion to an event) and Report::decode alone, on the same reports.
"$GEN" decode 300000

# --- ClickHouse (issue 20) -----------------------------------------------------------------------
# ch_run K N DB: K collectors into clickhouse://$CLICKHOUSE/DB at once, N/K events each.
ch_query() { curl -sf "http://$CLICKHOUSE/" --data-binary "$1"; }
ch_run() {
  local k=$1 n=$2 db=$3 per=$(($2 / $1)) pids=() addrs=() i
  ch_query "DROP DATABASE IF EXISTS $db" >/dev/null
  for i in $(seq "$k"); do
    /usr/bin/time -f "%e %U %S %M" -o "$WORK/chtime-$db-$i" \
      "$BIN" collect --xtrace-port 0 --no-udp --no-otlp --no-otlp-grpc --no-zipkin --store "clickhouse://$CLICKHOUSE/$db" \
      >"$WORK/chout-$db-$i" 2>"$WORK/cherr-$db-$i" &
    pids+=($!)
  done
  for i in $(seq "$k"); do
    local out=$WORK/chout-$db-$i
    for _ in $(seq 200); do grep -q "X-Trace TCP" "$out" 2>/dev/null && break; sleep 0.1; done
    addrs+=("$(sed -n 's/.*X-Trace TCP \([0-9.]*:[0-9]*\).*/\1/p' "$out" | head -1)")
    [ -n "${addrs[-1]}" ] || {
      echo "collector $i did not start"; cat "$WORK/cherr-$db-$i"
      pkill -P "$(echo "${pids[@]}" | tr ' ' ',')" 2>/dev/null; exit 1
    }
  done
  local t0 t1 gens=()
  t0=$(date +%s.%N)
  for i in $(seq "$k"); do
    "$GEN" load "${addrs[$((i - 1))]}" "$per" "$CONNS" "$FORMAT" 0 $(((i - 1) * CONNS)) >/dev/null &
    gens+=($!)
  done
  wait "${gens[@]}"
  for p in "${pids[@]}"; do
    kill -TERM "$(cat "/proc/$p/task/$p/children" | awk '{print $1}')"
  done
  wait "${pids[@]}"
  t1=$(date +%s.%N)
  local stored=0 rss=0 s r
  for i in $(seq "$k"); do
    s=$(sed -n 's/.*stopped; \([0-9]*\) events stored.*/\1/p' "$WORK/chout-$db-$i")
    stored=$((stored + ${s:-0}))
    read -r _ _ _ r <"$WORK/chtime-$db-$i"
    rss=$((rss > r ? rss : r))
  done
  local counted
  counted=$(ch_query "SELECT count() FROM $db.events FINAL")
  [ "$counted" = "$n" ] || { echo "ClickHouse holds $counted of $n events (collectors said $stored)"; exit 1; }
  awk -v k="$k" -v n="$n" -v a="$t0" -v b="$t1" -v rss="$rss" 'BEGIN {
    printf "clickhouse, %d collector(s): %d events stored and counted back in %.2fs wall = %.0f events/s; peak RSS of a collector %.0f MiB\n", k, n, b - a, n / (b - a), rss / 1024
  }' | tee "$WORK/chresult-$k"
  echo "$n $t0 $t1 $rss" >"$WORK/chfig-$k"
  ch_query "DROP DATABASE IF EXISTS $db" >/dev/null
}

if [ -n "${CLICKHOUSE:-}" ]; then
  CH_EVENTS=${CH_EVENTS:-$((EVENTS / 4))}
  ch_query "SELECT version()" >/dev/null || { echo "no ClickHouse at $CLICKHOUSE (scripts/start-clickhouse.sh)"; exit 1; }
  echo "--- ClickHouse $(ch_query 'SELECT version()') at $CLICKHOUSE, $CH_EVENTS events, side by side with SQLite"
  BIG=0 run "$CH_EVENTS"
  ch_run 1 "$CH_EVENTS" sightline_bench_one
  ch_run 2 "$CH_EVENTS" sightline_bench_two
  read -r _ sa sb _ _ _ sp <"$WORK/fig-$CH_EVENTS"
  read -r _ c1a c1b c1p <"$WORK/chfig-1"
  read -r _ c2a c2b c2p <"$WORK/chfig-2"
  awk -v n="$CH_EVENTS" -v sa="$sa" -v sb="$sb" -v sp="$sp" -v c1a="$c1a" -v c1b="$c1b" -v c1p="$c1p" -v c2a="$c2a" -v c2b="$c2b" 'BEGIN {
    s = n / (sb - sa); c1 = n / (c1b - c1a); c2 = n / (c2b - c2a)
    printf "ingest rate, ClickHouse / SQLite: %.2fx (%.0f vs %.0f events/s); peak RSS %.0f vs %.0f MiB\n", c1 / s, c1, s, c1p / 1024, sp / 1024
    printf "two collectors into one ClickHouse / one collector: %.2fx (%.0f vs %.0f events/s)\n", c2 / c1, c2, c1
  }'
fi

read -r _ a1 b1 _ _ w1 p1 <"$WORK/fig-$EVENTS"
read -r _ a2 b2 _ _ w2 p2 <"$WORK/fig-$((EVENTS * 2))"
base=$(sed -n 's/.*CPU (\([0-9]*\) events per CPU-second).*/\1/p' "$WORK/baseline")
echo "---"
awk -v n="$EVENTS" -v a1="$a1" -v b1="$b1" -v a2="$a2" -v b2="$b2" -v w1="$w1" -v w2="$w2" -v p1="$p1" -v p2="$p2" -v t="$TARGET_RATE" -v base="$base" 'BEGIN {
  r1 = n / (b1 - a1); r2 = 2 * n / (b2 - a2)
  printf "wall-clock ingest rate / target (%d events/s): %.2fx (%d events), %.2fx (%d events)\n", t, r1 / t, n, r2 / t, 2 * n
  printf "store writer capacity / target: %.2fx (%.0f events per writer CPU-second)\n", (n / w1) / t, n / w1
  printf "collector writer / store-only baseline (events per CPU-second): %.2f\n", (n / w1) / base
  printf "peak RSS at %d events / at %d events: %.2f (bounded memory: ~1)\n", 2 * n, n, p2 / p1
}'
