#!/usr/bin/env bash
# Critical path on a generated 100,000-span tree (Jaeger's span-tree rule) and a 100,000-event
# DAG with joins (happened-before), side by side in one run: graph rebuild (skew estimate, span
# nesting edges, TaskGraph::build) and CriticalPath::compute, median of ROUNDS, with the ratio of
# their per-event cost. Nothing to install: the generator is the example
# crates/causal-analysis/examples/critical_path_bench.rs (deterministic, same task every run).
#
# Usage: bench/critical-path-bench.sh [N] [ROUNDS]      (default 100000 5)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/.."
cargo run --release --quiet -p causal-analysis --example critical_path_bench -- "${1:-100000}" "${2:-5}"
