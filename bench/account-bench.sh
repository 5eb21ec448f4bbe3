#!/usr/bin/env bash
# Request latency of the example system (crates/causal-example: a front end calling two back ends
# of known cost) with `sightline account` running vs not, side by side in one run: rounds
# alternate off/on, and the median and p99 of each side are printed with their ratio.
# Target (issue 19): accounting adds <= 3% to request latency, median and p99.
#
# Usage: bench/account-bench.sh [ROUNDS] [REQUESTS_PER_ROUND]   (default 6 rounds of 40)
# PROFILE=debug uses debug builds (default release); CARGO_TARGET_DIR is honoured (e.g. the other
# benches' target/bench-build). Needs root (BPF). Figures:
# docs/causal-accounting.md ("Cost and limits").
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/.."
rounds="${1:-6}"
n="${2:-40}"
profile="${PROFILE:-release}"
flag=(); [ "$profile" = release ] && flag=(--release)
cargo build "${flag[@]}" --quiet --manifest-path "$root/Cargo.toml" -p sightline -p causal-example
bin="${CARGO_TARGET_DIR:-$root/target}/$profile"
ex="$bin/causal-example"
tmp="$(mktemp -d)"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
head -c 65536 /dev/urandom > "$tmp/a.bin"
head -c 262144 /dev/urandom > "$tmp/b.bin"
start() { # NAME ARGS...: starts a server, sets $addr
    local name="$1"; shift
    mkfifo "$tmp/$name.out"
    SIGHTLINE_CAUSAL_SINK=off "$ex" "$@" > "$tmp/$name.out" &
    pids+=($!)
    read -r line < "$tmp/$name.out"
    addr="${line#listening on }"
}
start a backend a 0 2 "$tmp/a.bin"; a="$addr"
start b backend b 0 6 "$tmp/b.bin"; b="$addr"
start f frontend "http://$a" "http://$b"; f="$addr"
: > "$tmp/off.txt"; : > "$tmp/on.txt"
for r in $(seq "$rounds"); do
    SIGHTLINE_CAUSAL_SINK=off "$ex" client "http://$f" "$n" | sed -n 's/.*latency_us=//p' >> "$tmp/off.txt"
    "$bin/sightline" account --exe "$ex" --sink off --no-rapl > /dev/null 2> "$tmp/acct.err" &
    acct=$!
    until grep -q "accounting; stop" "$tmp/acct.err" 2>/dev/null; do
        kill -0 "$acct" 2>/dev/null || { cat "$tmp/acct.err"; exit 1; }
        sleep 0.05
    done
    SIGHTLINE_CAUSAL_SINK=off "$ex" client "http://$f" "$n" | sed -n 's/.*latency_us=//p' >> "$tmp/on.txt"
    kill -INT "$acct"; wait "$acct" || true
done
python3 - "$tmp/off.txt" "$tmp/on.txt" "$profile" <<'PY'
import sys
def load(p): return sorted(int(l) for l in open(p) if l.strip())
def q(v, f): return v[min(len(v) - 1, int(f * len(v)))]
off, on = load(sys.argv[1]), load(sys.argv[2])
print(f"{len(off)} requests per side ({sys.argv[3]} build); latency in us")
print(f"{'':<16} {'median':>10} {'p99':>10}")
print(f"{'accounting off':<16} {q(off, .5):>10} {q(off, .99):>10}")
print(f"{'accounting on':<16} {q(on, .5):>10} {q(on, .99):>10}")
m, p = q(on, .5) / q(off, .5), q(on, .99) / q(off, .99)
print(f"ratio on/off: median {m:.3f}x, p99 {p:.3f}x")
print("target <= 1.03x median and p99:", "met" if m <= 1.03 and p <= 1.03 else "NOT met")
PY
