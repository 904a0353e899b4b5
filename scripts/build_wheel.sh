#!/usr/bin/env bash
# Builds the adam-async wheel into OUT_DIR (default dist/): the Python package with the op library
# build/plugin/libadam_async_ops.so (`make plugin`; debug information stripped) and its .tf_version
# side file inside, pinned to that TensorFlow (python/setup.py says how it is named, tagged and
# pinned), py.typed, and the repository's LICENSE in its dist-info. `make wheel` runs it. The package is staged in a temporary folder, so python/adam_async
# never holds a library that would shadow build/plugin's in the editable install. Other adam_async
# wheels in OUT_DIR are removed first, so `pip install dist/*.whl` installs this one. Builds with
# the venv's own setuptools (no build isolation): nothing is downloaded.
# Usage: scripts/build_wheel.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
python=${PYTHON:-$root/.venv/bin/python}
out=$(realpath -m "${1:-dist}")
lib=$root/build/plugin/libadam_async_ops.so

for f in "$lib" "$lib.tf_version"; do
  if [ ! -f "$f" ]; then
    echo "build_wheel: $f does not exist: run \`make plugin\` first" >&2
    exit 1
  fi
done
# setuptools >= 70.1 builds wheels itself; older ones need the wheel package.
if ! "$python" -W ignore -c '
try:
    import setuptools.command.bdist_wheel
except ImportError:
    import wheel.bdist_wheel' 2>/dev/null; then
  echo "build_wheel: $python cannot build wheels: pip install 'setuptools>=70.1'" >&2
  exit 1
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
# LICENSE beside setup.py: setuptools puts it in the wheel's dist-info.
cp python/pyproject.toml python/setup.py LICENSE "$stage/"
mkdir "$stage/adam_async"
cp python/adam_async/*.py python/adam_async/py.typed "$stage/adam_async/"
cp "$lib" "$lib.tf_version" "$stage/adam_async/"
# Debug information is three quarters of the library's size and no use to an installed package.
${STRIP:-strip} --strip-debug "$stage/adam_async/libadam_async_ops.so"

mkdir -p "$out"
rm -f "$out"/adam_async-*.whl
"$python" -m pip wheel --quiet --disable-pip-version-check --no-deps --no-build-isolation \
  --no-index -w "$out" "$stage"
echo "built $(ls "$out"/adam_async-*.whl)"
