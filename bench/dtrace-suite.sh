#!/usr/bin/env bash
# Conformance figure for issue 14: run the applicable tests of Oracle's DTrace unit-test suite
# (dtrace-utils, test/unittest) with `sightline probe`, in place, and report pass/fail per test
# and a total. No test of that suite is copied into this repository: pass the path of a checkout.
#
# Usage: bench/dtrace-suite.sh UNITTEST_DIR [FILTER]
#   UNITTEST_DIR  the `test/unittest` directory of a dtrace-utils checkout
#   FILTER        optional grep -E pattern over the tests' paths (e.g. '^translators/')
# Environment:
#   SIGHTLINE     the binary to run (default: target/release/sightline, else target/debug/sightline)
#   TIMEOUT       seconds per test (default 10; a test's larger @@timeout is honoured up to 30)
#   OUT           a file to write the per-test lines to (default: stdout only)
#   VERBOSE=1     print a failing test's diff / stderr after its line
# Needs root (the tests load BPF programs).
#
# Which tests, and when a test passes (the rules follow Oracle's test/runtest.sh, except that our
# stderr is not compared: its messages are not DTrace's):
# - Left out: tests run by a `.sh` script or built from a `.c` file, tests with a trigger program
#   (`@@trigger` other than `none`, a `.t` file), tests naming `$_pid`, tests with a `.x` file
#   (their own or a `test.x` of a directory above them: runtest.sh runs it to skip or xfail).
# - Options: `@@runtest-opts` of the test, else of the nearest `test.options` above it (as
#   runtest.sh's extract_options); `@@nosort` likewise.
# - `err.D_TAG.*.d`: passes when sightline exits non-zero and its stderr names `[D_TAG]`.
#   `drp.TAG.*.d`: passes when stderr names `[TAG]`.
# - `err.*.d` without a tag (an error when the program runs): passes when sightline exits
#   non-zero and its stdout matches the expected results as below.
# - Other tests: `tst.*` (and tests with `@@trigger: none`) run; any other test without a trigger
#   is compiled only (`-e`), as runtest.sh does. The test passes when sightline exits 0 and, if
#   there is an expected-results file (`NAME.x86_64.r`, else `NAME.r`), its stdout equals the
#   part of that file before a `-- @@stderr --` line, after runtest.sh's normalization: the
#   test's `.r.p` postprocessor (when executable), hex numbers replaced by `{ptr}`, and both
#   sides sorted (unless `@@nosort`).
# - As runtest.sh, the runs have `_DTRACE_TESTING` in their environment: dtrace's testing mode,
#   which `sightline probe` honours too (probe lines without the CPU and ID columns).
set -uo pipefail

if [[ $# -lt 1 || ! -d $1 ]]; then
    echo "usage: $0 UNITTEST_DIR [FILTER]" >&2
    exit 2
fi
UNIT=$(cd "$1" && pwd)
FILTER=${2:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [[ -z ${SIGHTLINE:-} ]]; then
    SIGHTLINE=$ROOT/target/release/sightline
    [[ -x $SIGHTLINE ]] || SIGHTLINE=$ROOT/target/debug/sightline
fi
SIGHTLINE=$(realpath "$SIGHTLINE" 2> /dev/null || echo "$SIGHTLINE")
[[ -x $SIGHTLINE ]] || { echo "no sightline binary at $SIGHTLINE (cargo build -p sightline)" >&2; exit 2; }
TIMEOUT=${TIMEOUT:-10}
export _DTRACE_TESTING=t
OUT=${OUT:-}
VERBOSE=${VERBOSE:-}
# runtest.sh runs from the top of the checkout (test/unittest/... paths, -Iinclude).
TOP=$(cd "$UNIT/../.." && pwd)
ARCH=$(uname -m)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
[[ -n $OUT ]] && : > "$OUT"

# option NAME FILE: the value of `@@NAME` in FILE or else in the nearest test.options above it
# (up to UNIT); exit status 1 when none has it.
option() {
    local name=$1 file=$2 dir val
    dir=$(dirname "$file")
    while :; do
        if [[ -f $file ]] && grep -Eq -e "@@$name *:" -e "@@$name " -e "@@$name\$" "$file"; then
            val=$(grep -E -e "@@$name *:" -e "@@$name " -e "@@$name\$" "$file" | head -1 |
                sed "s|.*@@$name *:\{0,1\} *||; s|\*/\$||; s|  *\$||")
            printf '%s' "$val"
            return 0
        fi
        [[ $dir == "$UNIT" || $dir == / ]] && return 1
        file=$dir/test.options
        [[ -e $dir/test.$ARCH.options ]] && file=$dir/test.$ARCH.options
        dir=$(dirname "$dir")
    done
}

# has_x TEST.d: a `.x` file of the test or a `test.x` of a directory above it exists.
has_x() {
    local base=${1%.d} dir
    [[ -e $base.x || -e $base.$ARCH.x ]] && return 0
    dir=$(dirname "$1")
    while :; do
        [[ -e $dir/test.x || -e $dir/test.$ARCH.x ]] && return 0
        [[ $dir == "$UNIT" || $dir == / ]] && return 1
        dir=$(dirname "$dir")
    done
}

# normalize FILE: runtest.sh's postprocess() hex and BPF pc substitutions.
normalize() {
    sed -e '/^==[0-9][0-9]*== /!s,0x[0-9a-f][0-9a-f]*,{ptr},g' \
        -e 's,at BPF pc [1-9][0-9]*,at BPF pc NNN,' "$1"
}

pass=0
fail=0
skipped=0
report() {
    printf '%s\n' "$1"
    [[ -n $OUT ]] && printf '%s\n' "$1" >> "$OUT"
    return 0
}

cd "$TOP" || exit 2
while IFS= read -r test; do
    rel=${test#"$UNIT"/}
    if [[ -n $FILTER ]] && ! grep -Eq -- "$FILTER" <<< "$rel"; then
        continue
    fi
    base=${test%.d}
    name=$(basename "$base")
    # Left out: shell- and C-driven tests, triggers, $_pid, .x files.
    if [[ -e $base.sh || -e $base.c || -x $base.t ]] || has_x "$test" ||
        grep -q '\$_pid' "$test"; then
        skipped=$((skipped + 1))
        continue
    fi
    trigger=
    [[ $name =~ ^(tst|err|drp)\. ]] && trigger=none
    if t=$(option trigger "$test"); then trigger=${t%% *}; fi
    if [[ -n $trigger && $trigger != none ]]; then
        skipped=$((skipped + 1))
        continue
    fi
    opts=$(option runtest-opts "$test" || true)
    if [[ $opts == *'$_pid'* ]]; then
        skipped=$((skipped + 1))
        continue
    fi
    tmo=$TIMEOUT
    if t=$(option timeout "$test") && [[ $t =~ ^[0-9]+$ ]] && ((t > tmo)); then
        tmo=$((t > 30 ? 30 : t))
    fi
    eflag=
    [[ -z $trigger ]] && eflag=-e
    rel_test=${test#"$TOP"/}
    # shellcheck disable=SC2086 # opts are words, as runtest.sh passes them
    timeout -k 2 "$tmo" "$SIGHTLINE" probe -s "$rel_test" $opts $eflag \
        > "$WORK/out" 2> "$WORK/err" < /dev/null
    rc=$?
    verdict=PASS
    why=
    if [[ $name =~ ^err\.(D_[A-Z0-9_]+)\. ]]; then
        tag=${BASH_REMATCH[1]}
        if ((rc == 124 || rc == 137)); then
            verdict=FAIL why="timed out"
        elif ((rc == 0)); then
            verdict=FAIL why="compiled and ran (exit 0), expected $tag"
        elif ! grep -q "\[$tag\]" "$WORK/err"; then
            got=$(grep -o '\[D_[A-Z0-9_]*\]' "$WORK/err" | head -1)
            verdict=FAIL why="expected tag $tag, got ${got:-no tag}"
        fi
    elif [[ $name =~ ^drp\.([A-Z0-9_]+)\. ]]; then
        tag=${BASH_REMATCH[1]}
        if ! grep -q "\[$tag\]" "$WORK/err"; then
            verdict=FAIL why="expected drop tag $tag"
        fi
    else
        rfile=$base.$ARCH.r
        [[ -e $rfile ]] || rfile=$base.r
        if ((rc == 124 || rc == 137)); then
            verdict=FAIL why="timed out"
        elif [[ $name == err.* ]] && ((rc == 0)); then
            verdict=FAIL why="exit status 0, expected an error"
        elif [[ $name != err.* ]] && ((rc != 0)); then
            verdict=FAIL why="exit status $rc: $(grep -m1 -v '^ *$' "$WORK/err" | cut -c1-120)"
        elif [[ -e $rfile ]]; then
            sortcmd=sort
            option nosort "$test" > /dev/null && sortcmd=cat
            # The expected stdout: the .r up to its stderr part.
            sed '/^-- @@stderr --$/,$d' "$rfile" > "$WORK/want"
            cp "$WORK/out" "$WORK/pp"
            if [[ -x $base.r.p ]]; then
                "$base.r.p" < "$WORK/out" > "$WORK/pp" 2> /dev/null || true
            fi
            normalize "$WORK/pp" > "$WORK/got"
            if ! diff -q <($sortcmd "$WORK/want") <($sortcmd "$WORK/got") > /dev/null; then
                verdict=FAIL why="output differs from $(basename "$rfile")"
            fi
        fi
    fi
    if [[ $verdict == PASS ]]; then
        pass=$((pass + 1))
        report "PASS $rel"
    else
        fail=$((fail + 1))
        report "FAIL $rel ($why)"
        if [[ -n $VERBOSE ]]; then
            if [[ $why == output* ]]; then
                diff <($sortcmd "$WORK/want") <($sortcmd "$WORK/got") | head -20 | sed 's/^/    /'
            else
                head -5 "$WORK/err" | sed 's/^/    /'
            fi
        fi
    fi
done < <(find "$UNIT" -name '*.d' -type f | LC_ALL=C sort)

total=$((pass + fail))
report "TOTAL $pass/$total passed ($fail failed, $skipped left out)"
