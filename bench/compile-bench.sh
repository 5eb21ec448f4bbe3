#!/usr/bin/env bash
# Compile time of `sightline probe` against program size (issue 22: it must be linear). For each
# input family the script is built at sizes N, 2N and 4N and run once per size (REPS times, the
# median kept); the ratio t(4N)/t(N) is ~4 for linear work and ~16 for quadratic. The families
# are the issue's findings: a long probe name (compile error), a long unknown function name
# (compile error), many BEGIN clauses (compiles, loads, exits), and a 1 MiB script.
# Needs root for the BEGIN family (BPF). Usage: bench/compile-bench.sh   (REPS=3 by default)
set -euo pipefail

REPS=${REPS:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
SL=$TARGET_DIR/release/sightline

echo "building sightline (release)..." >&2
(cd "$ROOT" && cargo build --release -q -p sightline --bin sightline)

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# gen FAMILY N > file: the script of that family at size N.
gen() {
    python3 - "$1" "$2" <<'PY'
import sys
family, n = sys.argv[1], int(sys.argv[2])
if family == "probe-name":
    print("syscall::" + "a" * n + ":entry { }")
elif family == "unknown-function":
    print("BEGIN { " + "f" * n + "(); }")
elif family == "begin-clauses":
    sys.stdout.write("BEGIN { x = 1; }\n" * n + "BEGIN { exit(0); }\n")
elif family == "one-mib-script":
    line = "BEGIN { x = x + 1; }\n"
    sys.stdout.write(line * (n // len(line)) + "BEGIN { exit(0); }\n")
PY
}

# secs FILE: the median wall time of REPS runs of `sightline probe -q -s FILE`, in seconds.
secs() {
    local f=$1 times=()
    for _ in $(seq "$REPS"); do
        local t0 t1
        t0=$(date +%s.%N)
        timeout 300 "$SL" probe -q -s "$f" >/dev/null 2>&1 || true
        t1=$(date +%s.%N)
        times+=("$(echo "$t1 - $t0" | bc)")
    done
    printf '%s\n' "${times[@]}" | sort -n | sed -n "$(((REPS + 1) / 2))p"
}

printf '%-18s %10s %10s %10s %10s  %s\n' family N "t(N) s" "t(2N) s" "t(4N) s" "t(4N)/t(N)"
for spec in probe-name:16000 unknown-function:262144 begin-clauses:1250 one-mib-script:262144; do
    family=${spec%%:*}
    n=${spec#*:}
    ts=()
    for k in 1 2 4; do
        gen "$family" $((n * k)) >"$WORK/$family-$k.d"
        ts+=("$(secs "$WORK/$family-$k.d")")
    done
    ratio=$(echo "scale=2; ${ts[2]} / ${ts[0]}" | bc)
    printf '%-18s %10s %10.3f %10.3f %10.3f  %s\n' "$family" "$n" "${ts[0]}" "${ts[1]}" "${ts[2]}" "$ratio"
done
