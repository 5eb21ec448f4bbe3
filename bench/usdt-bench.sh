#!/usr/bin/env bash
# Benchmark of sightline-usdt probe sites (issue 4), side by side with the crates.io `usdt` crate
# (oxidecomputer) in one binary (bench/usdt-compare, its own cargo project), in one run:
#
#  1. disabled: a tight loop with no probe vs the same loop with a disabled probe of each crate
#     (target: sightline's disabled probe indistinguishable from no probe, under 1 ns);
#  2. traced: per-hit cost of each crate's probe while bpftrace counts it (`bpftrace -c`), which is
#     the uprobe trap on the probe's nop (5-byte nop for sightline-usdt, 1-byte nop for usdt).
#
# Prints ns per iteration / per hit and the ratios. Needs root for part 2 (skipped otherwise).
# Each figure is the best of REPEATS short runs, interleaved (the machine is shared and noisy: short
# runs are likelier to find a quiet window; the best run is the least disturbed one).
# Usage: bench/usdt-bench.sh [DISABLED_ITERATIONS [TRACED_HITS [REPEATS [TRACED_REPEATS]]]]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
disabled_n=${1:-20000000}
traced_n=${2:-200000}
reps=${3:-31}
traced_reps=${4:-5}

# What it compares against: the `usdt` crate comes from crates.io through cargo; bpftrace from apt.
command -v cargo >/dev/null || { echo "usdt-bench: cargo is required" >&2; exit 1; }
if ! command -v bpftrace >/dev/null && [ "$(id -u)" = 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bpftrace >/dev/null
fi

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target/usdt-compare}
cargo build -q --release --manifest-path bench/usdt-compare/Cargo.toml
bin=$CARGO_TARGET_DIR/release/usdt-compare
echo "binary: $bin ($(readelf -p .comment "$bin" | grep -o 'Linker: [A-Z]* [0-9.]*' || echo 'linker unknown'))"
echo "probe sites (readelf -n):"
readelf -n "$bin" | grep -E 'Provider|Location|Arguments' | sed 's/^/  /'
for p in sightline_bench oxide_bench; do
  pc=$(readelf -n "$bin" | awk -v p="$p" '$1 == "Provider:" {prov = $2} $1 == "Name:" {name = $2}
        $1 == "Location:" && prov == p && name == "hit" {sub(",", "", $2); print $2; exit}')
  echo "  $p:hit site bytes: $(objdump -d --start-address=$pc --stop-address=$((pc + 5)) "$bin" | awk -F'\t' '/^ *[0-9a-f]+:/{print $2; exit}')"
done

val() { awk -v k="$1" '$1 == k {print $2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }

echo
echo "== disabled probes: $disabled_n iterations, best of $reps (ns per iteration)"
out=$("$bin" disabled "$disabled_n" "$reps")
none=$(echo "$out" | val ns_per_iter.none)
sl=$(echo "$out" | val ns_per_iter.sightline)
lz=$(echo "$out" | val ns_per_iter.sightline_lazy)
ox=$(echo "$out" | val ns_per_iter.usdt)
printf '  no probe                  %8.4f ns\n' "$none"
printf '  sightline-usdt disabled   %8.4f ns   (+%s ns over no probe, ratio %s)\n' "$sl" \
  "$(awk -v a="$sl" -v b="$none" 'BEGIN { printf "%.4f", a - b }')" "$(ratio "$sl" "$none")"
printf '  sightline-usdt disabled, argument format!(..) (never built)\n                            %8.4f ns   (+%s ns over no probe, ratio %s)\n' "$lz" \
  "$(awk -v a="$lz" -v b="$none" 'BEGIN { printf "%.4f", a - b }')" "$(ratio "$lz" "$none")"
printf '  usdt crate disabled       %8.4f ns   (+%s ns over no probe, ratio %s)\n' "$ox" \
  "$(awk -v a="$ox" -v b="$none" 'BEGIN { printf "%.4f", a - b }')" "$(ratio "$ox" "$none")"

echo
if [ "$(id -u)" != 0 ] || ! command -v bpftrace >/dev/null; then
  echo "== traced probes: skipped (needs root and bpftrace)"
  exit 0
fi
echo "== traced probes: bpftrace -c counting both probes, $traced_n hits, best of $traced_reps (ns per hit)"
script="usdt:$bin:sightline_bench:hit { @sightline = count(); } usdt:$bin:oxide_bench:hit { @usdt = count(); }"
out=$(timeout 600 bpftrace -e "$script" -c "$bin traced $traced_n $traced_reps" 2>/dev/null)
sl=$(echo "$out" | val ns_per_iter.sightline)
ox=$(echo "$out" | val ns_per_iter.usdt)
want=$((traced_n * traced_reps))
c_sl=$(echo "$out" | awk '$1 == "@sightline:" {print $2}')
c_ox=$(echo "$out" | awk '$1 == "@usdt:" {print $2}')
echo "  bpftrace counted: sightline-usdt ${c_sl:-0}, usdt ${c_ox:-0} (expected $want each)"
if [ "${c_sl:-0}" != "$want" ] || [ "${c_ox:-0}" != "$want" ]; then
  echo "usdt-bench: a probe did not fire on every hit; the per-hit figures below are not comparable" >&2
fi
printf '  sightline-usdt (5-byte nop)  %8.1f ns per hit\n' "$sl"
printf '  usdt crate (1-byte nop)      %8.1f ns per hit\n' "$ox"
echo "  ratio usdt / sightline-usdt: $(ratio "$ox" "$sl")"
