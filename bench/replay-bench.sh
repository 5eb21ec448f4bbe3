#!/usr/bin/env bash
# Recording overhead of `sightline record` versus native runs, next to `strace -f -o /dev/null`
# (the ptrace baseline), and replay time, in one run. Prints seconds and ratios.
#
# Workloads: gzip of 40 MB (generated), a python3 script (random, time, pid, uuid4),
# `find /usr -name '*.so*'`, sqlite3 (10,000 rows with random() and datetime('now')), `make -j2`,
# and two threaded ones (issue 11): `xz -T2` of the 40 MB, and 4 threads doing small file reads and
# futex hand-offs (a mutex and condition variable passing a token round). Threaded workloads run
# natively pinned to one core (`taskset -c 0`), as the recorder runs one thread at a time on one
# CPU; their switches and forced sync points are printed from `sightline replay --info`.
# Each configuration runs REPS times (default 3) and the fastest run counts: this VM is shared and
# noisy, the minimum is the least disturbed measurement.
#
# Targets (issue 7): record <= 1.1x native for gzip, <= 3x for find; replay no slower than record.
# Targets (issue 11): record <= 1.3x pinned native for xz -T2, <= 2x for the hand-off program.
# Targets (issue 12): record <= 1.5x native for both sqlite3 WAL workloads; nginx (2 workers,
# static file, wrk on loopback) recorded throughput >= 0.8x native (`ONLY=nginx`).
# Forced sync points inside loops (session 4, debug build, not from this script, load ~12 on 2
# CPUs): replay of `xz -T2 -c` of 4 MB took 2 min 54 s with a hardware-breakpoint stop at every
# pass of each point and 14 s with the in-tracee check (docs/recording-format.md, Threads); a Go
# program with 8 goroutines of 3e6-iteration loops: 60 s divergence report before, 0.27 s after.
# The release-build xz -T2 and hand-off ratios of this script were not re-measured in session 4.
#
# Usage: bench/replay-bench.sh            (builds sightline in release mode)
#        SIGHTLINE=/path/to/sightline REPS=5 bench/replay-bench.sh
#        ONLY=xz-T2,handoff bench/replay-bench.sh   (only these workloads: issue 11's pair, whose
#                                                   record/native and replay/native ratios are
#                                                   then printed side by side)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
REPS=${REPS:-3}

need() { command -v "$1" >/dev/null 2>&1; }
missing=()
for p in strace gzip sqlite3 make python3 find xz gcc taskset; do need "$p" || missing+=("$p"); done
if ((${#missing[@]})); then
    echo "installing: ${missing[*]}" >&2
    apt-get update -qq && apt-get install -y -qq strace gzip sqlite3 make python3 findutils \
        xz-utils gcc util-linux >/dev/null
fi

if [[ -z "${SIGHTLINE:-}" ]]; then
    # Its own target directory: the README's static-pie build in target/ stays as it is.
    export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target/bench-build}
    (cd "$ROOT" && cargo build -q --release -p sightline)
    SIGHTLINE=$CARGO_TARGET_DIR/release/sightline
fi

W=$(mktemp -d /tmp/replay-bench.XXXXXX)
trap 'rm -rf "$W"' EXIT

# --- inputs -------------------------------------------------------------------------------------
python3 - "$W/in40" <<'EOF'
import random, sys
random.seed(7)
words = "alpha beta gamma delta replay record kernel signal process pipe".split()
with open(sys.argv[1], "w") as f:
    n = 0
    while n < 40 * 1024 * 1024:
        line = " ".join(random.choice(words) for _ in range(12)) + " %d\n" % random.randint(0, 10**6)
        f.write(line)
        n += len(line)
EOF
cat > "$W/script.py" <<'EOF'
import random, time, os, uuid
for _ in range(1000):
    random.random()
print(random.random(), time.time(), os.getpid(), uuid.uuid4())
EOF
cat > "$W/db.sql" <<'EOF'
create table t(a, b, c);
with recursive n(i) as (select 1 union all select i + 1 from n where i < 10000)
insert into t select i, random(), datetime('now') from n;
select count(*), sum(b % 1000) from t;
EOF
# sqlite3 with an on-disk WAL database (issue 12): 10,000 inserts in one transaction, and 1,000
# transactions of one insert each. Its -shm file is mapped shared: replay maps a file of its own
# holding the recorded contents (docs/recording-format.md, Shared memory).
cat > "$W/wal1.sql" <<'EOF'
pragma journal_mode=wal;
create table t(a, b);
begin;
with recursive n(i) as (select 1 union all select i + 1 from n where i < 10000)
insert into t select i, random() from n;
commit;
select count(*) from t;
EOF
{
    printf 'pragma journal_mode=wal;\ncreate table t(a, b);\n'
    for i in $(seq 1000); do printf 'insert into t values(%d, random());\n' "$i"; done
    printf 'select count(*) from t;\n'
} > "$W/wal1000.sql"
mkdir -p "$W/mk"
{
    printf 'all: %s\n\t@echo done\n' "$(echo o{1..8})"
    for i in 1 2 3 4 5 6 7 8; do
        printf 'o%d:\n\t@sh -c "seq 20000 | sort -n | tail -1 > /dev/null"; echo o%d\n' "$i" "$i"
    done
} > "$W/mk/Makefile"

cat > "$W/handoff.c" <<'EOF'
/* 4 threads pass a token round 20,000 times; each turn reads 64 bytes of a file. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int turn, rounds;
static int fd;
static void *run(void *arg) {
    int me = (int)(long)arg;
    char buf[64];
    for (;;) {
        pthread_mutex_lock(&m);
        while (turn != me && rounds < 20000) pthread_cond_wait(&c, &m);
        if (rounds >= 20000) { pthread_cond_broadcast(&c); pthread_mutex_unlock(&m); return 0; }
        pread(fd, buf, sizeof buf, (rounds * 64) % 4096);
        rounds++;
        turn = (turn + 1) % 4;
        pthread_cond_broadcast(&c);
        pthread_mutex_unlock(&m);
    }
}
int main(void) {
    fd = open("/etc/services", O_RDONLY);
    pthread_t t[4];
    for (long i = 0; i < 4; i++) pthread_create(&t[i], 0, run, (void *)i);
    for (int i = 0; i < 4; i++) pthread_join(t[i], 0);
    printf("%d rounds\n", rounds);
    return 0;
}
EOF
gcc -O1 -pthread -o "$W/handoff" "$W/handoff.c"

names=(gzip python3 find sqlite3 wal-1tx wal-1000tx make-j2 xz-T2 handoff)
cmds=(
    "gzip -c $W/in40 > $W/out.gz"
    "python3 $W/script.py > /dev/null"
    "find /usr -name '*.so*' > /dev/null"
    "rm -f $W/db.sqlite && sqlite3 $W/db.sqlite < $W/db.sql > /dev/null"
    "rm -f $W/wal.db* && sqlite3 $W/wal.db < $W/wal1.sql > /dev/null"
    "rm -f $W/wal.db* && sqlite3 $W/wal.db < $W/wal1000.sql > /dev/null"
    "make -s -C $W/mk -j2 > /dev/null"
    "xz -T2 -c $W/in40 > $W/out.xz"
    "$W/handoff > /dev/null"
)
# Threaded workloads: native runs pinned to one core.
pinned=(0 0 0 0 0 0 0 1 1)

# best_of CMD...: the fastest of REPS runs, as "wall cpu" seconds (cpu = user + sys of the whole
# process tree, from bash's `time`; on a shared, loaded VM it is the steadier of the two).
best_of() {
    local best_w="" best_c=""
    for ((r = 0; r < REPS; r++)); do
        local t w u s c
        t=$( { TIMEFORMAT='%R %U %S'; time "$@" >/dev/null 2>&1; } 2>&1 | tail -1 )
        read -r w u s <<<"$t"
        c=$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.3f", u + s }')
        if [[ -z "$best_w" ]] || awk -v a="$w" -v b="$best_w" 'BEGIN { exit !(a < b) }'; then best_w=$w; fi
        if [[ -z "$best_c" ]] || awk -v a="$c" -v b="$best_c" 'BEGIN { exit !(a < b) }'; then best_c=$c; fi
    done
    echo "$best_w $best_c"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }

printf 'sightline: %s\nCPUs: %s, load: %s, reps: %s (fastest counts)\n' "$SIGHTLINE" "$(nproc)" \
    "$(cut -d' ' -f1-3 /proc/loadavg)" "$REPS"
printf 'wall and cpu (user+sys) seconds; ratios wall/cpu\n\n'
printf '%-8s %13s %13s %13s %13s   %11s %11s %11s\n' workload native strace record replay \
    strace/nat record/nat replay/rec
ONLY=${ONLY:-}
threaded_summary=()
for i in "${!names[@]}"; do
    name=${names[$i]}
    cmd=${cmds[$i]}
    if [[ -n "$ONLY" && ",$ONLY," != *",$name,"* ]]; then continue; fi
    rec="$W/rec-$name"
    if ((${pinned[$i]})); then
        read -r nw nc <<<"$(best_of taskset -c 0 sh -c "$cmd")"
    else
        read -r nw nc <<<"$(best_of sh -c "$cmd")"
    fi
    read -r sw sc <<<"$(best_of strace -f -o /dev/null sh -c "$cmd")"
    read -r rw rc <<<"$(best_of sh -c "rm -rf '$rec' && '$SIGHTLINE' record -o '$rec' -- sh -c \"$cmd\"")"
    read -r pw pc <<<"$(best_of "$SIGHTLINE" replay "$rec")"
    status=ok
    "$SIGHTLINE" replay "$rec" >/dev/null 2>"$W/replay.err" || {
        status="REPLAY FAILED"
        cat "$W/replay.err" >&2
    }
    size=$(du -sk "$rec" | cut -f1)
    if ((${pinned[$i]})); then
        sched=$("$SIGHTLINE" replay --info "$rec" | sed -n 's/^schedule: *//p')
        syncs=$(awk '{ print $3 }' <<<"$sched")
        status="$status; $sched; $(awk -v n="$syncs" -v t="$rw" 'BEGIN { if (t > 0) printf "%.0f forced sync points/s", n / t }')"
        threaded_summary+=("$(printf '%-8s record/native %s (cpu %s)   replay/native %s (cpu %s)' "$name" \
            "$(ratio "$rw" "$nw")" "$(ratio "$rc" "$nc")" "$(ratio "$pw" "$nw")" "$(ratio "$pc" "$nc")")")
    fi
    printf '%-8s %6s/%-6s %6s/%-6s %6s/%-6s %6s/%-6s   %5s/%-5s %5s/%-5s %5s/%-5s  %s KiB, %s\n' "$name" \
        "$nw" "$nc" "$sw" "$sc" "$rw" "$rc" "$pw" "$pc" \
        "$(ratio "$sw" "$nw")" "$(ratio "$sc" "$nc")" "$(ratio "$rw" "$nw")" "$(ratio "$rc" "$nc")" \
        "$(ratio "$pw" "$rw")" "$(ratio "$pc" "$rc")" "$size" "$status"
done

if ((${#threaded_summary[@]})); then
    printf '\nthreaded workloads, against native pinned to one core (targets: xz-T2 record <= 1.3x, handoff <= 2x):\n'
    printf '%s\n' "${threaded_summary[@]}"
fi
# --- a server (issue 12): Debian's nginx, 2 worker processes, a small static file -----------------
# nginx's master and its two workers share memory (the accept mutex and its statistics live in a
# shared anonymous mapping), so recording schedules them as one group; requests arrive on loopback
# from wrk, which is not recorded. Throughput is wrk's requests/s over SERVER_SECS seconds (default
# 5) with 8 connections, natively and while recorded; the recording is then replayed. Target:
# recorded throughput >= 0.8x native (Scribe measured < 2.5% for Apache).
server_bench() {
    if ! need nginx || ! need wrk; then
        echo "installing: nginx-light wrk" >&2
        apt-get install -y -qq nginx-light wrk >/dev/null 2>&1 ||
            { apt-get update -qq && apt-get install -y -qq nginx-light wrk >/dev/null; }
    fi
    local d=$W/nginx port=$((20000 + RANDOM % 20000)) secs=${SERVER_SECS:-5}
    mkdir -p "$d/html" "$d/tmp" "$d/logs"
    head -c 3000 /dev/urandom | base64 > "$d/html/index.html"
    # The workers run as nginx's default user (nobody): the page must be readable to them.
    chmod a+rx "$W" "$d" "$d/html" && chmod a+r "$d/html/index.html"
    cat > "$d/nginx.conf" <<EOF
worker_processes 2;
pid $d/nginx.pid;
error_log $d/logs/error.log;
events { worker_connections 256; }
http {
    access_log off;
    sendfile on;
    client_body_temp_path $d/tmp;
    proxy_temp_path $d/tmp;
    fastcgi_temp_path $d/tmp;
    uwsgi_temp_path $d/tmp;
    scgi_temp_path $d/tmp;
    server { listen 127.0.0.1:$port; root $d/html; }
}
EOF
    local url=http://127.0.0.1:$port/index.html
    # serve LAUNCHER...: start nginx under LAUNCHER, load it, stop it; prints requests/s.
    serve() {
        rm -f "$d/nginx.pid"
        "$@" nginx -p "$d" -c "$d/nginx.conf" -g 'daemon off;' >/dev/null 2>"$d/serve.err" &
        local launcher=$! rps
        for _ in $(seq 200); do
            curl -sf -o /dev/null "$url" 2>/dev/null && break
            sleep 0.05
        done
        curl -sf -o /dev/null "$url" || { echo "nginx did not start" >&2; cat "$d/serve.err" >&2; kill "$launcher"; return 1; }
        rps=$(wrk -t1 -c8 -d"${secs}s" "$url" | sed -n 's/^Requests\/sec: *//p')
        kill -QUIT "$(cat "$d/nginx.pid")"   # graceful: workers finish, then the master exits
        wait "$launcher"
        echo "$rps"
    }
    need curl || apt-get install -y -qq curl >/dev/null
    local native recorded status=ok
    native=$(serve env)
    rm -rf "$W/rec-nginx"
    recorded=$(serve "$SIGHTLINE" record -o "$W/rec-nginx" --)
    "$SIGHTLINE" replay "$W/rec-nginx" >/dev/null 2>"$W/replay.err" || {
        status="REPLAY FAILED"
        cat "$W/replay.err" >&2
    }
    printf '\nserver: nginx, 2 workers, %s s of wrk -t1 -c8 on loopback (target: recorded >= 0.8x native)\n' "$secs"
    printf 'native %s requests/s, recorded %s requests/s: %s; recording %s KiB, replay %s\n' \
        "$native" "$recorded" "$(ratio "$recorded" "$native")" "$(du -sk "$W/rec-nginx" | cut -f1)" "$status"
}
if [[ -z "$ONLY" || ",$ONLY," == *",nginx,"* ]]; then server_bench; fi

if [[ -n "$ONLY" ]]; then exit 0; fi

# --- mapped files kept in the recording (issue 12) ----------------------------------------------
# A program that maps many libraries, recorded twice into one directory: the second recording
# links the first's kept files (system libraries are hard links to the originals in both).
printf '\nmapped files: python3 -c "import ssl, sqlite3, json", recorded twice into one directory\n'
printf '%-8s %12s %8s %14s %14s %14s\n' recording events.slr files "kept bytes" "shared bytes" "own bytes"
mkdir -p "$W/dedup"
for n in first second; do
    rec="$W/dedup/$n"
    "$SIGHTLINE" record -o "$rec" -- python3 -c 'import ssl, sqlite3, json' >/dev/null 2>&1
    line=$("$SIGHTLINE" replay --info "$rec" | sed -n 's/^mapped files: *//p')
    files=$(awk '{ print $1 }' <<<"$line")
    bytes=$(awk '{ print $3 }' <<<"$line")
    shared=$(sed -n 's/.*(\([0-9]*\) bytes of them.*/\1/p' <<<"$line")
    status=ok
    "$SIGHTLINE" replay "$rec" >/dev/null 2>&1 || status="REPLAY FAILED"
    printf '%-8s %12s %8s %14s %14s %14s  %s\n' "$n" "$(stat -c %s "$rec/events.slr")" "$files" \
        "$bytes" "$shared" "$((bytes - shared))" "$status"
done
printf 'disk used by both recordings and their store (du, each inode once): %s KiB\n' \
    "$(du -sk "$W/dedup" | cut -f1)"
