#!/usr/bin/env bash
# Installs what Sightline's build, tests and benchmarks need on a fresh Debian machine (as root).
# Idempotent: installs only what is missing, so a second run costs a second.
set -euo pipefail
need=()
# Every tool a test runs (test_support::require_tool skips without it, and fails under CI=true):
# bpftrace (usdt, causal-example), strace (probe cases), sqlite3, make, procps' ps (replay),
# gcc and g++ (workloads, guests, probe-user targets), python3 (replay) and python3.11 (USDT),
# linux-libc-dev's asm/unistd_64.h (linux-syscalls' generation check), util-linux's setpriv (probe
# cases); nodejs, default-jre-headless, golang-go and xz-utils (threaded replay tests and benchmarks);
# chromium and chromium-driver (causal-ui's browser tests, which start chromedriver themselves);
# clickhouse-server (the ClickHouse store's tests; scripts/start-clickhouse.sh starts it).
for pkg in bpftrace strace sqlite3 systemtap-sdt-dev gzip make gcc g++ python3 python3.11 gdb binutils curl procps linux-libc-dev util-linux \
  nodejs default-jre-headless golang-go xz-utils chromium chromium-driver clickhouse-server clickhouse-client; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || need+=("$pkg")
done
if [ "${#need[@]}" -gt 0 ]; then
  echo "install-deps: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# Sightline mounts tracefs itself when a probe needs it; nothing to do here.
command -v cargo >/dev/null || { echo "install-deps: cargo (Rust 1.95+) is required" >&2; exit 1; }
# The OpenTelemetry Python SDK with its OTLP/gRPC exporter, for the collector's gRPC ingest test
# (crates/causal-collector/tests/otlp_grpc.rs finds it as $SIGHTLINE_OTEL_PYTHON, else at this
# path): a venv of its own, so the system Python stays as Debian ships it.
otel_venv=/opt/sightline-otel-venv
if ! "$otel_venv/bin/python" -c 'import opentelemetry.exporter.otlp.proto.grpc' 2>/dev/null; then
  python3 -c 'import ensurepip' 2>/dev/null || {
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
  }
  echo "install-deps: creating $otel_venv (opentelemetry-sdk, opentelemetry-exporter-otlp-proto-grpc)" >&2
  python3 -m venv "$otel_venv"
  "$otel_venv/bin/pip" install -q opentelemetry-sdk opentelemetry-exporter-otlp-proto-grpc
fi
