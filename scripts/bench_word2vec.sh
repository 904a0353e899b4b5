#!/usr/bin/env bash
# word2vec vs gensim on GCIDE (see scripts/bench_word2vec.py). Installs the peers into
# build/bench-venv, builds the release binary for this CPU, prints a table and writes
# build/bench/word2vec/results.md and docs/bench_word2vec.png (about 30 minutes with the defaults:
# skip-gram, 10 epochs, 3 repeats; `--arch cbow`: results-cbow.md, bench_word2vec_cbow.png).
# Usage: scripts/bench_word2vec.sh [--arch skipgram|cbow] [--lr LR] [--repeats N] [--epochs N] [--gensim-iterable]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bench_peers_setup.sh word2vec >/dev/null
RUSTFLAGS="-C target-cpu=native" CARGO_TARGET_DIR=target/bench cargo build --release -q -p hogwild-cli
build/bench-venv/bin/python scripts/bench_word2vec.py --hogwild target/bench/release/hogwild "$@"
