#!/usr/bin/env bash
# OTLP ingest over gRPC vs HTTP, side by side in one run (issue 17): the same REQUESTS export
# requests of SPANS spans each (protobuf, uncompressed, encoded before the clock starts) sent one
# after another over one connection to a fresh `sightline collect` (release build, loopback,
# fresh SQLite store), by `collector_bench otlp` (crates/causal-collector/examples/collector_bench.rs).
# Per run: the time until every request was acknowledged, and until the collector exited after
# SIGTERM with everything committed (events stored checked), plus the collector's CPU time.
# Two rounds, alternating the protocols, so that the machine's load hits both alike.
#
#   bench/otlp-ingest-bench.sh
#   REQUESTS=400 SPANS=500 NO_BUILD=1 bench/otlp-ingest-bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."

REQUESTS=${REQUESTS:-200}
SPANS=${SPANS:-500}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
if [ -z "${NO_BUILD:-}" ]; then
  cargo build --release -q -p sightline
  cargo build --release -q -p causal-collector --example collector_bench
fi
T=$CARGO_TARGET_DIR/release
BIN=$T/sightline
GEN=$T/examples/collector_bench
WORK=$(mktemp -d)
PID=
collector_pid() { cat "/proc/$PID/task/$PID/children" 2>/dev/null | awk '{print $1}'; }
cleanup() { if [ -n "$PID" ]; then c=$(collector_pid); [ -n "$c" ] && kill "$c" 2>/dev/null; fi; rm -rf "$WORK"; }
trap cleanup EXIT
echo "machine: $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg); $REQUESTS requests x $SPANS spans"

# run LABEL PROTOCOL -> prints a result line and writes "ack_s commit_s cpu_s" to $WORK/fig-LABEL
run() {
  local label=$1 proto=$2 out=$WORK/out-$1
  /usr/bin/time -f "%e %U %S %M" -o "$WORK/time-$label" \
    "$BIN" collect --xtrace-port 0 --no-udp --otlp-port 0 --otlp-grpc-port 0 --no-zipkin \
    --db "$WORK/$label.db" >"$out" 2>"$WORK/err-$label" &
  PID=$!
  for _ in $(seq 100); do grep -q "OTLP/gRPC" "$out" 2>/dev/null && break; sleep 0.1; done
  local addr
  if [ "$proto" = http ]; then
    addr=$(sed -n 's|.*OTLP/HTTP http://\([0-9.]*:[0-9]*\)/.*|\1|p' "$out" | head -1)
  else
    addr=$(sed -n 's|.*OTLP/gRPC \([0-9.]*:[0-9]*\);.*|\1|p' "$out" | head -1)
  fi
  [ -n "$addr" ] || { echo "collector did not start"; cat "$out" "$WORK/err-$label"; exit 1; }
  local t0 t1 t2
  t0=$(date +%s.%N)
  "$GEN" otlp "$proto" "$addr" "$REQUESTS" "$SPANS" >"$WORK/gen-$label"
  t1=$(date +%s.%N)
  kill -TERM "$(collector_pid)"
  wait "$PID"
  t2=$(date +%s.%N)
  PID=
  local stored want=$((REQUESTS * SPANS * 2))
  stored=$(sed -n 's/.*stopped; \([0-9]*\) events stored.*/\1/p' "$out")
  [ "$stored" = "$want" ] || { echo "$label: stored $stored of $want events"; tail -3 "$out"; exit 1; }
  read -r _ user sys rss <"$WORK/time-$label"
  awk -v l="$label" -v n="$((REQUESTS * SPANS))" -v a="$t0" -v b="$t1" -v c="$t2" -v u="$user" -v s="$sys" -v rss="$rss" 'BEGIN {
    printf "%-7s %d spans: acknowledged in %.2fs (%.0f spans/s), committed in %.2fs (%.0f spans/s); collector CPU %.2fs (%.2f us/span); peak RSS %.0f MiB\n", l, n, b - a, n / (b - a), c - a, n / (c - a), u + s, (u + s) * 1e6 / n, rss / 1024
  }'
  awk -v a="$t0" -v b="$t1" -v c="$t2" -v u="$user" -v s="$sys" 'BEGIN { print b - a, c - a, u + s }' >"$WORK/fig-$label"
}

run http-1 http
run grpc-1 grpc
run grpc-2 grpc
run http-2 http
echo "---"
for r in 1 2; do
  read -r ha hc hu <"$WORK/fig-http-$r"
  read -r ga gc gu <"$WORK/fig-grpc-$r"
  awk -v r="$r" -v ha="$ha" -v hc="$hc" -v hu="$hu" -v ga="$ga" -v gc="$gc" -v gu="$gu" 'BEGIN {
    printf "round %d: gRPC / HTTP throughput: acknowledged %.2fx, committed %.2fx; collector CPU per span gRPC / HTTP %.2f\n", r, ha / ga, hc / gc, gu / hu
  }'
done
