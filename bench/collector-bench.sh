#!/usr/bin/env bash
# Collector benchmark: sustained X-Trace ingest over TCP into the embedded SQLite store, peak RSS,
# and the critical-path time of the largest task.
#
#   bench/collector-bench.sh            # defaults: 2,000,000 and 4,000,000 events, 2 connections
#   EVENTS=1000000 CONNS=4 FORMAT=text bench/collector-bench.sh
#
# For each run: `sightline collect` (release build, loopback, ephemeral port, fresh store) and the
# load generator (crates/causal-collector/examples/collector_bench.rs) sending length-prefixed
# reports as fast as the collector takes them (TCP backpressure paces the sender). The rate is
# events committed / (first byte sent → collector exited after SIGTERM with everything committed),
# so it is sustained end-to-end throughput, not socket acceptance. Peak RSS is the collector's
# VmHWM. Two sizes are run: if memory is bounded, the peak does not grow with the event count.
# Side by side, "baseline" inserts the same events straight into a store (no network, no
# decoding): the ceiling of the store itself; the ratio shows what ingest costs on top.
# Target (issue 6): >= 200,000 events/s with bounded memory, on this 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/.."

EVENTS=${EVENTS:-2000000}
CONNS=${CONNS:-2}
FORMAT=${FORMAT:-binary}
BIG=${BIG:-200000}
TARGET_RATE=200000

cargo build --release -q -p sightline
cargo build --release -q -p causal-collector --example collector_bench
T=${CARGO_TARGET_DIR:-target}/release
BIN=$T/sightline
GEN=$T/examples/collector_bench
WORK=$(mktemp -d)
PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

echo "machine: $(nproc) cores, $(uname -r); format=$FORMAT conns=$CONNS big-task=$BIG"

# run N -> prints a result line; leaves the store in $WORK/run-N.db
run() {
  local n=$1 db=$WORK/run-$1.db out=$WORK/out-$1 hwm=0
  "$BIN" collect --xtrace-port 0 --no-udp --no-otlp --db "$db" >"$out" 2>"$WORK/err-$n" &
  PID=$!
  for _ in $(seq 100); do grep -q "X-Trace TCP" "$out" 2>/dev/null && break; sleep 0.1; done
  local addr
  addr=$(sed -n 's/.*X-Trace TCP \([0-9.]*:[0-9]*\).*/\1/p' "$out" | head -1)
  [ -n "$addr" ] || { echo "collector did not start"; cat "$WORK/err-$n"; exit 1; }
  # Sample the collector's peak RSS (VmHWM, kB) while it runs.
  ( while kill -0 "$PID" 2>/dev/null; do
      v=$(awk '/VmHWM/ {print $2}' "/proc/$PID/status" 2>/dev/null || true)
      [ -n "$v" ] && echo "$v" >"$WORK/hwm-$n"
      sleep 0.05
    done ) &
  local sampler=$!
  local t0 t1
  t0=$(date +%s.%N)
  "$GEN" load "$addr" "$n" "$CONNS" "$FORMAT" "$BIG"
  kill -TERM "$PID"
  wait "$PID"
  t1=$(date +%s.%N)
  PID=
  wait "$sampler" 2>/dev/null || true
  hwm=$(cat "$WORK/hwm-$n" 2>/dev/null || echo 0)
  local stored
  stored=$(sed -n 's/.*stopped; \([0-9]*\) events stored.*/\1/p' "$out")
  [ "$stored" = "$n" ] || { echo "stored $stored of $n events"; tail -3 "$out"; exit 1; }
  local rate
  rate=$(awk -v n="$n" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", n / (b - a) }')
  echo "ingest: $n events committed in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')s = $rate events/s; peak RSS $((hwm / 1024)) MiB; store $(du -m "$db" | cut -f1) MiB"
  echo "$rate" >"$WORK/rate-$n"
  echo "$hwm" >"$WORK/peak-$n"
}

run "$EVENTS"
run $((EVENTS * 2))
"$GEN" baseline "$WORK/baseline.db" "$EVENTS" | tee "$WORK/baseline"
"$GEN" analyze "$WORK/run-$((EVENTS * 2)).db"

r1=$(cat "$WORK/rate-$EVENTS"); r2=$(cat "$WORK/rate-$((EVENTS * 2))")
p1=$(cat "$WORK/peak-$EVENTS"); p2=$(cat "$WORK/peak-$((EVENTS * 2))")
base=$(sed -n 's/.*(\([0-9]*\) events\/s).*/\1/p' "$WORK/baseline")
echo "---"
awk -v r1="$r1" -v r2="$r2" -v t="$TARGET_RATE" -v b="$base" -v p1="$p1" -v p2="$p2" 'BEGIN {
  printf "ingest rate / target (%d events/s): %.2fx and %.2fx\n", t, r1 / t, r2 / t
  printf "ingest rate / store-only baseline: %.2f\n", r1 / b
  printf "peak RSS at 2x events / at 1x: %.2f (bounded memory: ~1)\n", p2 / p1
}'
