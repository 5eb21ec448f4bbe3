#!/usr/bin/env bash
# Issue 15, "Millions of probes": instruction probes at scale, side by side with bpftrace where it
# can (root). In one run:
#   1. every probe of libc's *printf* functions (entry, return and every instruction, about
#      2,000 sites) in a sleeping process: sightline's whole run (compile + attach + detach) with
#      the probe count, and bpftrace's on the same sites (`uprobe:PATH:FUNC+0xOFF`, one BPF
#      program and one perf event per site there).
#   2. one process with every probe of python3.11's executable and of libc.so.6 (217,000 here:
#      the pid provider enumerates the functions of the symbol tables, and all of python3.11's
#      modules hold about 296,000, so the issue's 1,000,000 is not reachable on this machine)
#      under `-c 'python3.11 -c "print(45)"'`: probes, hits, whole run, peak RSS of sightline,
#      the kernel memory held (MemAvailable sampled every 50 ms against the idle figure) and
#      whether the target's output is unchanged. Every instruction the target runs is a hit
#      (a single-stepped uprobe), so the run takes minutes. bpftrace is not run here: at one
#      program and one perf event per site it would take hours.
#   3. per-hit cost on the same sites: see bench/probe-user-bench.sh.
# Usage: bench/probe-million-bench.sh   (SIGHTLINE=path uses that binary instead of a release build)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target/bench-build}
if [ -z "${SIGHTLINE:-}" ]; then
    cargo build -q --release -p sightline
    SIGHTLINE=$CARGO_TARGET_DIR/release/sightline
fi
PY=/usr/bin/python3.11
command -v bpftrace >/dev/null || apt-get install -y bpftrace
echo "sightline: $SIGHTLINE"
echo "bpftrace: $(bpftrace --version)"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
T=$(mktemp -d)
trap 'kill "${sp:-}" 2>/dev/null || true; rm -rf "$T"' EXIT
ms() { echo $(( ($2 - $1) / 1000000 )); }

# 1. A few thousand sites: every probe (entry, return, each instruction) of libc's *printf*
#    functions in a sleeping process.
LIBC=/lib/x86_64-linux-gnu/libc.so.6
sleep 600 &
sp=$!
sleep 0.2
D='pid$target:libc.so.6:*printf*:'
"$SIGHTLINE" probe -l -p "$sp" -n "$D" | awk 'NR > 1 { print $4, $5 }' > "$T/sites"
n1=$(wc -l < "$T/sites")
t0=$(date +%s%N)
"$SIGHTLINE" probe -q -p "$sp" -n "$D { @ = count(); } tick-10ms { exit(0); }" > /dev/null
t1=$(date +%s%N)
sl1=$(ms "$t0" "$t1")
# bpftrace 0.17 as packed here refuses every offset probe ("compiled without (k|u)probe offset
# support", --unsafe too), so the side by side is on the entry and return sites: bpftrace names
# them uprobe:/uretprobe:PATH:FUNC (BPFTRACE_MAX_PROBES lifts its 512-probe limit; its -p does not
# keep library uprobes to the process).
awk -v p="$LIBC" '
  $2 == "entry" { print "uprobe:" p ":" $1 }
  $2 == "return" { print "uretprobe:" p ":" $1 }' "$T/sites" | paste -sd, - > "$T/bt_probes"
n1er=$(tr ',' '\n' < "$T/bt_probes" | wc -l)
t0=$(date +%s%N)
"$SIGHTLINE" probe -q -p "$sp" -n "${D}entry, ${D}return { @ = count(); } tick-10ms { exit(0); }" > /dev/null
t1=$(date +%s%N)
sl1er=$(ms "$t0" "$t1")
t0=$(date +%s%N)
BPFTRACE_MAX_PROBES=$((n1er + 16)) timeout 1800 bpftrace -p "$sp" -e "$(cat "$T/bt_probes") { @ = count(); } interval:ms:10 { exit(); }" > "$T/bt1.out" 2>&1 || true
t1=$(date +%s%N)
bt1=$(ms "$t0" "$t1")
bt1_att=$(grep -o 'Attaching [0-9]* probes' "$T/bt1.out" || tail -1 "$T/bt1.out")
kill "$sp"
awk -v n="$n1" -v s="$sl1" -v m="$n1er" -v se="$sl1er" -v t="$bt1" -v a="$bt1_att" 'BEGIN {
  printf "1. libc'"'"'s *printf* functions in one process, whole runs (compile, attach, detach)\n";
  printf "   every probe (%d sites): sightline %d ms\n", n, s;
  printf "   entry + return (%d sites): sightline %d ms; bpftrace %d ms (%s); ratio %.4f\n", m, se, t, a, se / t;
}'

# 2. Over a million probes in one process.
avail() { awk '/^MemAvailable:/ { print $2 }' /proc/meminfo; }
idle=$(avail)
(
    low=$idle
    while [ ! -e "$T/done" ]; do
        a=$(avail)
        [ "$a" -lt "$low" ] && low=$a
        sleep 0.05
    done
    echo $(( idle - low )) > "$T/kmem"
) &
sampler=$!
t0=$(date +%s%N)
/usr/bin/time -f '%M' -o "$T/rss" "$SIGHTLINE" probe -q -c "$PY -c 'print(45)'" \
    -n 'pid$target:a.out::, pid$target:libc.so.6:: { @ = count(); }' \
    -n 'END { printa("hits %@d\n", @); }' > "$T/py.out" 2> "$T/py.err" || true
t1=$(date +%s%N)
touch "$T/done"
wait "$sampler"
sl2=$(ms "$t0" "$t1")
native=$($PY -c 'print(45)')
got=$(grep -v '^hits' "$T/py.out" | grep -v '^$' || true)
hits=$(awk '/^hits/ { print $2 }' "$T/py.out")
# (-l with -c lists nothing: count on a sleeping python3.11.)
$PY -c 'import time; time.sleep(600)' &
sp=$!
sleep 0.5
n2=$("$SIGHTLINE" probe -l -p "$sp" -n 'pid$target:a.out::, pid$target:libc.so.6::' | tail -n +2 | wc -l)
kill "$sp"
echo "2. every probe of python3.11's executable and libc.so.6 under -c 'python3.11 -c \"print(45)\"'"
echo "   probes: $n2 listed; hits $hits; whole run $sl2 ms; sightline peak RSS $(cat "$T/rss") KiB"
echo "   kernel memory held while attached (MemAvailable drop, includes the target): $(cat "$T/kmem") KiB"
if [ "$got" = "$native" ]; then
    echo "   target output unchanged ($got)"
else
    echo "   TARGET OUTPUT CHANGED: native '$native', traced '$got'"
    sed -n 1,5p "$T/py.err"
fi
grep -i 'warning\|refused' "$T/py.err" | head -3 || true
