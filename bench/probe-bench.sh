#!/usr/bin/env bash
# Benchmarks of `sightline probe` against bpftrace, side by side in one run (issue 2):
#   1. `BEGIN { exit(0); }`: wall time and peak RSS          (targets: <= 0.1x wall, <= 0.05x RSS)
#   2. added ns per getpid(2) for `syscall::getpid:entry { @ = count(); }` on a 10^6-call loop
#                                                             (target: <= 0.8x bpftrace's added cost)
#   3. attach + detach of `syscall:::entry { @[probefunc] = count(); }` with an immediate exit
#                                                             (target: < 100 ms)
# Needs root. Installs bpftrace and a C compiler with apt-get when missing. Prints ratios.
# Usage: bench/probe-bench.sh [runs]   (median of `runs`, default 5)
set -euo pipefail

RUNS=${1:-5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
SL=$TARGET_DIR/release/sightline

if [ "$(id -u)" != 0 ]; then
    echo "probe-bench: needs root (BPF)" >&2
    exit 1
fi
need() { command -v "$1" >/dev/null 2>&1; }
if ! need bpftrace || ! need cc; then
    apt-get update -qq && apt-get install -y -qq bpftrace build-essential >/dev/null
fi
[ -x /usr/bin/time ] || apt-get install -y -qq time >/dev/null

echo "building sightline (release, static-pie as in the README)..." >&2
(cd "$ROOT" && cargo rustc --release -q -p sightline --bin sightline -- -C target-feature=+crt-static)

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cat >"$WORK/loop.c" <<'EOF'
/* Calls getpid(2) N times (raw syscall: no libc caching) and prints the elapsed ns. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) syscall(SYS_getpid);
    clock_gettime(CLOCK_MONOTONIC, &b);
    fprintf(stderr, "loop_ns %lld\n", (long long)(b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec));
    return 0;
}
EOF
cc -O2 -o "$WORK/loop" "$WORK/loop.c"

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# Wall seconds (ns clock) and peak RSS (KB, from /usr/bin/time's %M) of a command.
timed() {
    local s e
    s=$(date +%s%N)
    /usr/bin/time -f "%M" -o "$WORK/t" "$@" >/dev/null 2>&1 || true
    e=$(date +%s%N)
    echo "$(echo "($e - $s) / 1000000000" | bc -l) $(tail -1 "$WORK/t")"
}

echo "== 1. BEGIN { exit(0); }: wall time and peak RSS (median of $RUNS)"
for tool in sl bt; do
    : >"$WORK/$tool.wall"; : >"$WORK/$tool.rss"
    for _ in $(seq "$RUNS"); do
        if [ $tool = sl ]; then r=$(timed "$SL" probe -q -n 'BEGIN { exit(0); }')
        else r=$(timed bpftrace -e 'BEGIN { exit(); }'); fi
        echo "$r" | awk '{print $1}' >>"$WORK/$tool.wall"
        echo "$r" | awk '{print $2}' >>"$WORK/$tool.rss"
    done
done
slw=$(median <"$WORK/sl.wall"); btw=$(median <"$WORK/bt.wall")
slr=$(median <"$WORK/sl.rss"); btr=$(median <"$WORK/bt.rss")
printf "sightline: %6.3f s  %8d KB\nbpftrace:  %6.3f s  %8d KB\n" "$slw" "$slr" "$btw" "$btr"
printf "ratio wall %.3fx (target <= 0.1x), RSS %.3fx (target <= 0.05x)\n" \
    "$(echo "$slw / $btw" | bc -l)" "$(echo "$slr / $btr" | bc -l)"

echo
echo "== 2. added ns per getpid(2): syscall::getpid:entry { @ = count(); } on 10^6 calls (median of $RUNS)"
N=1000000
loop_ns() { grep -o 'loop_ns [0-9]*' "$1" | awk '{print $2}'; }
: >"$WORK/base"; : >"$WORK/sl2"; : >"$WORK/bt2"
for _ in $(seq "$RUNS"); do
    "$WORK/loop" $N 2>"$WORK/o"; loop_ns "$WORK/o" >>"$WORK/base"
    "$SL" probe -q -c "$WORK/loop $N" -n 'syscall::getpid:entry { @ = count(); }' >"$WORK/sl.out" 2>"$WORK/o"
    loop_ns "$WORK/o" >>"$WORK/sl2"
    # No predicate (as the issue states the script): getpid calls of other processes count too.
    got=$(tr -d ' \n' <"$WORK/sl.out")
    [ "${got:-0}" -ge "$N" ] || echo "sightline counted $got getpid calls, fewer than $N"
    bpftrace -e 'tracepoint:syscalls:sys_enter_getpid { @ = count(); }' -c "$WORK/loop $N" >/dev/null 2>"$WORK/o"
    loop_ns "$WORK/o" >>"$WORK/bt2"
done
base=$(median <"$WORK/base"); s2=$(median <"$WORK/sl2"); b2=$(median <"$WORK/bt2")
sadd=$(echo "($s2 - $base) / $N" | bc -l); badd=$(echo "($b2 - $base) / $N" | bc -l)
printf "untraced: %.1f ns/call\nsightline: +%.1f ns/call\nbpftrace:  +%.1f ns/call\n" \
    "$(echo "$base / $N" | bc -l)" "$sadd" "$badd"
printf "ratio added cost %.3fx (target <= 0.8x)\n" "$(echo "$sadd / $badd" | bc -l)"

echo
echo "== 3. attach + detach: syscall:::entry { @[probefunc] = count(); } with an immediate exit (median of $RUNS)"
: >"$WORK/sl3"
for _ in $(seq "$RUNS"); do
    timed "$SL" probe -q -n 'syscall:::entry { @[probefunc] = count(); } tick-1ms { exit(0); }' | awk '{print $1}' >>"$WORK/sl3"
done
s3=$(median <"$WORK/sl3")
# bpftrace attaches one perf event per syscall tracepoint; one run, bounded at 120 s.
b3=$(timed timeout 120 bpftrace -e 'tracepoint:syscalls:sys_enter_* { @[probe] = count(); } interval:ms:1 { exit(); }' | awk '{print $1}')
printf "sightline: %.3f s (target < 0.1 s)\nbpftrace:  %.3f s (one run)\n" "$s3" "$b3"
printf "ratio %.4fx\n" "$(echo "$s3 / $b3" | bc -l)"
