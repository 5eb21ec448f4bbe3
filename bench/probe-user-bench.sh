#!/usr/bin/env bash
# Sightline's user-space probes vs bpftrace, side by side in one run (root).
#   1. per-hit cost of a uprobe that counts, on a function whose first instruction is a 5-byte nop
#   2. attach + detach time for the entries of 100 libc functions
# Prints both figures for both tools and the ratios. Usage: bench/probe-user-bench.sh [hits]
set -euo pipefail
cd "$(dirname "$0")/.."
# Its own target directory: the README's static-pie build in target/ stays as it is.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target/bench-build}
N=${1:-2000000}
LIBC=/usr/lib/x86_64-linux-gnu/libc.so.6
command -v bpftrace >/dev/null || apt-get install -y bpftrace
command -v gcc >/dev/null || apt-get install -y gcc
echo "bpftrace: $(bpftrace --version)"

cargo build -q --release -p probe-user --example uprobe-bench
cargo build -q --release -p sightline
SL=$CARGO_TARGET_DIR/release/examples/uprobe-bench
SIGHTLINE=$CARGO_TARGET_DIR/release/sightline
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# The workload: calls f() N times and prints the loop's wall time in ns.
cat > "$T/work.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
__attribute__((noinline)) void f(void) { __asm__ volatile(".byte 0x0f, 0x1f, 0x44, 0x00, 0x00"); }
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) f();
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%ld\n", (b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec));
    return 0;
}
C
gcc -O2 -o "$T/work" "$T/work.c"
W="$T/work"

# Waits until file $1 contains $2 (at most 60 s).
wait_for() { for _ in $(seq 600); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done; echo "timeout waiting for $2 in $1" >&2; cat "$1" >&2; return 1; }

base=$("$W" "$N")

# Sightline: count program on f's entry, one uprobe_multi link.
mkfifo "$T/sl.in"
"$SL" hits "$W" f < "$T/sl.in" > "$T/sl.out" &
slpid=$!
exec 3> "$T/sl.in"
wait_for "$T/sl.out" attached
sl_t=$("$W" "$N")
echo >&3
exec 3>&-
wait $slpid
sl_hits=$(tail -1 "$T/sl.out")

# bpftrace 0.17: the same count.
bpftrace -e "uprobe:$W:f { @ = count(); }" > "$T/bt.out" 2>&1 &
btpid=$!
wait_for "$T/bt.out" "Attaching"
sleep 0.5
bt_t=$("$W" "$N")
kill -INT $btpid
wait $btpid || true
bt_hits=$(grep -o '@: [0-9]*' "$T/bt.out" | awk '{print $2}')

awk -v n="$N" -v b="$base" -v s="$sl_t" -v t="$bt_t" -v sh="$sl_hits" -v th="$bt_hits" 'BEGIN {
  ps = (s - b) / n; pt = (t - b) / n;
  printf "per-hit cost (%d calls of a nop5-first function)\n", n;
  printf "  baseline loop            %8.1f ns/call\n", b / n;
  printf "  sightline (probe-user)   %8.1f ns/hit added  (%s hits counted)\n", ps, sh;
  printf "  bpftrace                 %8.1f ns/hit added  (%s hits counted)\n", pt, th;
  printf "  ratio sightline/bpftrace %8.2f\n", ps / pt;
}'

# Attach + detach of 100 libc function entries.
"$SL" list "$LIBC" 100 > "$T/funcs"
probes=$(sed "s|^|uprobe:$LIBC:|" "$T/funcs" | paste -sd, -)
t0=$(date +%s%N)
"$SL" attach "$LIBC" 100 > "$T/sl2.out"
t1=$(date +%s%N)
sl_run=$(( (t1 - t0) / 1000000 ))
read -r sl_load sl_att sl_det sl_total sl_n < "$T/sl2.out"
t0=$(date +%s%N)
bpftrace -e "$probes { @ = count(); } BEGIN { exit(); }" > "$T/bt2.out" 2>&1 || true
t1=$(date +%s%N)
bt_total=$(( (t1 - t0) / 1000000 ))
bt_att=$(grep -o 'Attaching [0-9]* probes' "$T/bt2.out" || true)
awk -v n="$sl_n" -v l="$sl_load" -v a="$sl_att" -v d="$sl_det" -v s="$sl_total" -v r="$sl_run" -v t="$bt_total" -v ba="$bt_att" 'BEGIN {
  printf "attach + detach of %d libc functions\n", n;
  printf "  sightline: load %.1f ms, attach %.1f ms, detach %.1f ms (%.1f ms); whole run %d ms\n", l, a, d, s, r;
  printf "  bpftrace:  %s; whole run %d ms\n", ba, t;
  printf "  ratio sightline/bpftrace (whole runs) %.4f\n", r / t;
}'

# The same two measurements through the command line of both tools, each running the workload
# under -c (attach before it runs, detach at its exit).
echo "through the command lines (-c):"
sl_c=$("$SIGHTLINE" probe -q -c "$W $N" -n 'pid$target:a.out:f:entry { @n = count(); } END { printa("hits %@d\n", @n); }' 2>/dev/null)
sl_c_t=$(echo "$sl_c" | grep -E '^[0-9]+$' | head -1)
sl_c_hits=$(echo "$sl_c" | awk '/^hits/ {print $2}')
bt_c=$(bpftrace -c "$W $N" -e "uprobe:$W:f { @ = count(); }" 2>/dev/null)
bt_c_t=$(echo "$bt_c" | grep -E '^[0-9]+$' | head -1)
bt_c_hits=$(echo "$bt_c" | grep -o '@: [0-9]*' | awk '{print $2}')
awk -v n="$N" -v b="$base" -v s="$sl_c_t" -v t="$bt_c_t" -v sh="$sl_c_hits" -v th="$bt_c_hits" 'BEGIN {
  ps = (s - b) / n; pt = (t - b) / n;
  printf "  per-hit: sightline %.1f ns (%s hits), bpftrace %.1f ns (%s hits), ratio %.2f\n", ps, sh, pt, th, ps / pt;
}'
D=$(sed 's|^|pid$target:libc.so.6:|; s|$|:entry|' "$T/funcs" | paste -sd, -)
t0=$(date +%s%N)
"$SIGHTLINE" probe -q -c /bin/true -n "$D { @ = count(); }" > /dev/null 2>&1
t1=$(date +%s%N)
sl_run_c=$(( (t1 - t0) / 1000000 ))
probes_c=$(sed "s|^|uprobe:$LIBC:|" "$T/funcs" | paste -sd, -)
t0=$(date +%s%N)
bpftrace -c /bin/true -e "$probes_c { @ = count(); }" > /dev/null 2>&1 || true
t1=$(date +%s%N)
bt_run_c=$(( (t1 - t0) / 1000000 ))
awk -v s="$sl_run_c" -v t="$bt_run_c" 'BEGIN {
  printf "  100 libc functions, whole run with -c /bin/true: sightline %d ms, bpftrace %d ms, ratio %.4f\n", s, t, s / t;
}'
