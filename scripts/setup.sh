#!/usr/bin/env bash
# Prepares everything the project needs beyond Rust: the project venv (.venv) with TensorFlow,
# numpy and pytest; build/tf/ with a pkg-config file and linker symlinks for the TensorFlow C
# library inside that wheel (for tensorflow-sys); the adam_async Python package.
# Idempotent: a second run with nothing changed returns at once.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
python=${PYTHON:-python3.11}
venv=$root/.venv
stamp=$venv/.setup-stamp
want=$(cat requirements.txt $(ls python/pyproject.toml 2>/dev/null) | sha256sum | cut -d" " -f1)

if [ ! -x "$venv/bin/python" ]; then
  echo "setup: creating $venv"
  "$python" -m venv "$venv"
fi
# The editable adam_async install must point at this checkout's python/ (not another clone's).
installed=$("$venv/bin/python" -c '
import importlib.util as u
s = u.find_spec("adam_async")
print(s.origin if s else "")' 2>/dev/null || true)
if [ -f python/pyproject.toml ] && [[ "$installed" != "$root/python/"* ]]; then
  rm -f "$stamp"
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing requirements.txt into $venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r requirements.txt
  if [ -f python/pyproject.toml ]; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -e python
  fi
  echo "$want" > "$stamp"
fi

# tensorflow.pc for tensorflow-sys, pointing at the wheel's own libraries.
# (Found without importing TensorFlow, which takes seconds; tf.sysconfig.get_lib() is this folder.)
read -r tf_lib tf_version < <("$venv/bin/python" -c '
import importlib.metadata as md, importlib.util as u
print(u.find_spec("tensorflow").submodule_search_locations[0], md.version("tensorflow-cpu"))')
tf_dir=$root/build/tf
mkdir -p "$tf_dir/lib"
ln -sfn "$tf_lib/libtensorflow_cc.so.2" "$tf_dir/lib/libtensorflow.so"
ln -sfn "$tf_lib/libtensorflow_cc.so.2" "$tf_dir/lib/libtensorflow.so.2"
ln -sfn "$tf_lib/libtensorflow_framework.so.2" "$tf_dir/lib/libtensorflow_framework.so"
ln -sfn "$tf_lib/libtensorflow_framework.so.2" "$tf_dir/lib/libtensorflow_framework.so.2"
ln -sfn "$tf_lib/libtensorflow_cc.so.2" "$tf_dir/lib/libtensorflow_cc.so.2"
pc=$tf_dir/tensorflow.pc
cat > "$pc.tmp" <<PC
prefix=$tf_dir
libdir=\${prefix}/lib
# The wheel's own folder: binaries linked against this library get it as their rpath.
rpath=$tf_lib
includedir=$tf_lib/include

Name: tensorflow
Description: TensorFlow C library from the tensorflow-cpu wheel in .venv
Version: $tf_version
Libs: -L\${libdir} -ltensorflow -ltensorflow_framework -Wl,-rpath,$tf_lib
Cflags: -I\${includedir}
PC
if ! cmp -s "$pc.tmp" "$pc"; then mv "$pc.tmp" "$pc"; else rm "$pc.tmp"; fi
