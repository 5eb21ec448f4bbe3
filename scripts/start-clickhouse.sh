#!/usr/bin/env bash
# Starts Debian's clickhouse-server (18.16) on 127.0.0.1:8123 unless a server already answers there,
# for the ClickHouse store's tests (crates/causal-collector/tests/clickhouse.rs) and
# bench/collector-bench.sh. Idempotent; waits until the HTTP interface answers (30 s at most).
set -euo pipefail
up() { curl -sf 'http://127.0.0.1:8123/?query=SELECT%201' >/dev/null 2>&1; }
up && exit 0
command -v clickhouse-server >/dev/null || { echo "start-clickhouse: clickhouse-server is not installed (scripts/install-deps.sh)" >&2; exit 1; }
mkdir -p /var/lib/clickhouse /var/log/clickhouse-server
clickhouse-server --config-file=/etc/clickhouse-server/config.xml --daemon
for _ in $(seq 60); do up && exit 0; sleep 0.5; done
echo "start-clickhouse: no answer on 127.0.0.1:8123 after 30 s; see /var/log/clickhouse-server/" >&2
exit 1
