#!/usr/bin/env bash
# Cost on the calling thread of one reported causal event vs a `tracing` span with the Registry vs
# an OpenTelemetry SDK span, side by side in one run, with allocations counted per operation.
#
# Usage: bench/causal-bench.sh [ROUNDS]      (default 30 rounds of 10,000 operations per case)
#
# The comparison lives in bench/causal-compare, its own cargo project (empty [workspace]) so that
# OpenTelemetry stays out of Sightline's workspace; cargo fetches opentelemetry_sdk, tracing and
# tracing-subscriber from crates.io on the first run. Targets (issue 5): <= 100 ns per event, no
# allocation on the hot path, <= 5 ns for an event of an unsampled task. Issue 19's, as ratios in
# the same run: an event <= 0.6x a `tracing` span with the Registry, an unsampled event <= 3 ns,
# CausalLayer's own cost (beyond its two events) <= 100 ns per span. Figures: docs/causal-cost.md.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$here/../target/causal-bench}"
cargo build --release --quiet --manifest-path "$here/causal-compare/Cargo.toml"
"$CARGO_TARGET_DIR/release/causal-compare" "${1:-30}"
