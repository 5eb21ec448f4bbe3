#!/usr/bin/env bash
# The cost of a context switch between two processes on one CPU when one of them runs in another
# CPUID-faulting or TSC mode than the other (docs/replay-performance.md): a pipe ping-pong of
# 100,000 round trips (4 switches each), plain, with the child faulting on CPUID
# (arch_prctl(ARCH_SET_CPUID, 0), as every recorded and replayed image), with its RDTSC faulting
# (PR_SET_TSC), and with both. The kernel rewrites MSR_MISC_FEATURES_ENABLES (CPUID faulting)
# and CR4.TSD at each switch between tasks whose modes differ; in a virtual machine a write that
# the hypervisor traps is a VM exit. The tracer of `sightline record`/`replay` takes the tracees'
# modes (replay_ptrace::trap_own_rdtsc, trap_own_cpuid) so ptrace stops pay neither.
#
# Usage: bench/switch-cost.sh   (prints microseconds per round trip, fastest of REPS=3 runs)
set -euo pipefail
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
REPS=${REPS:-3}
cat > "$W/pp.c" <<'C'
#include <asm/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int mode = atoi(argv[1]); /* bit 0: child faults on CPUID; bit 1: child faults on RDTSC */
    int a[2], b[2];
    if (pipe(a) || pipe(b)) return 1;
    int n = 100000;
    char c = 0;
    if (fork() == 0) {
        if ((mode & 1) && syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0)) { perror("ARCH_SET_CPUID"); _exit(2); }
        if ((mode & 2) && prctl(PR_SET_TSC, PR_TSC_SIGSEGV)) { perror("PR_SET_TSC"); _exit(2); }
        for (int i = 0; i < n; i++) { if (read(a[0], &c, 1) != 1 || write(b[1], &c, 1) != 1) _exit(1); }
        _exit(0);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < n; i++) { if (write(a[1], &c, 1) != 1 || read(b[0], &c, 1) != 1) return 1; }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%.2f\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n / 1000);
    return 0;
}
C
gcc -O2 -o "$W/pp" "$W/pp.c"
printf 'CPUs: %s, load: %s, reps: %s (fastest counts); microseconds per round trip, pinned to CPU 0\n' \
    "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$REPS"
base=""
for mode in 0 1 2 3; do
    best=""
    for ((r = 0; r < REPS; r++)); do
        t=$(taskset -c 0 "$W/pp" "$mode")
        if [[ -z "$best" ]] || awk -v a="$t" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$t; fi
    done
    [[ -z "$base" ]] && base=$best
    case $mode in
        0) name="same modes" ;;
        1) name="child CPUID-faulting" ;;
        2) name="child RDTSC-faulting" ;;
        3) name="child both" ;;
    esac
    printf '%-22s %8s us  %s\n' "$name" "$best" "$(awk -v a="$best" -v b="$base" 'BEGIN { printf "%.2fx", a / b }')"
done
