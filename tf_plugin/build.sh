#!/usr/bin/env bash
# Builds build/plugin/libadam_async_ops.so: the Rust bridge as a static library (cargo, release),
# the op registrations and kernels (C++, flags from tf.sysconfig), linked against TensorFlow's
# libtensorflow_framework.so.2 and libtensorflow_cc.so.2 (MaybeForwardRefInputToRefOutput lives
# there). Writes the TensorFlow version it was built for next to the library, for the Python loader.
# Its runpath is $ORIGIN/../tensorflow alone, as tensorflow/custom-op libraries have it, so that
# no path of the build machine is in it: installed from the wheel (`make wheel`) that is the
# tensorflow package beside adam_async in site-packages; here build/tensorflow, a link to the
# venv's. (Loaded by TensorFlow, the library finds TensorFlow's libraries already loaded, by
# soname; the runpath is for loading it alone, e.g. with ctypes or `ldd`.)
# `make plugin` runs this only when a source changed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
python=${PYTHON:-$root/.venv/bin/python}
out=$root/build/plugin
mkdir -p "$out"

# Flags from the installed TensorFlow (never hard-coded).
mapfile -t tf < <(TF_CPP_MIN_LOG_LEVEL=3 "$python" -c '
import tensorflow as tf
print(" ".join(tf.sysconfig.get_compile_flags()))
print(" ".join(tf.sysconfig.get_link_flags()))
print(tf.sysconfig.get_lib())
print(tf.__version__)' 2>/dev/null)
read -r -a cflags <<< "${tf[0]}"
# TensorFlow's headers as system headers, so that -Wall speaks about our code only.
cflags=("${cflags[@]/#-I/-isystem}")
read -r -a lflags <<< "${tf[1]}"
tf_lib=${tf[2]}
tf_version=${tf[3]}
# The cxx glue compiled by cargo must use TensorFlow's std::string ABI.
abi=$(printf '%s\n' "${cflags[@]}" | grep -e '-D_GLIBCXX_USE_CXX11_ABI' || true)

CXXFLAGS="$abi" cargo build --release --quiet -p hogwild-tf-plugin
staticlib=$root/target/release/libhogwild_tf_plugin.a
bridge_include=$root/target/cxxbridge

objs=()
pids=()
for src in tf_plugin/cc/ops/adam_async_ops.cc tf_plugin/cc/kernels/adam_async_kernels.cc; do
  obj=$out/$(basename "$src" .cc).o
  objs+=("$obj")
  ${CXX:-g++} "${cflags[@]}" -I"$bridge_include" -O2 -fPIC -Wall \
    -DADAM_ASYNC_TF_VERSION="\"$tf_version\"" -c "$src" -o "$obj" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done

${CXX:-g++} -shared -o "$out/libadam_async_ops.so.tmp" "${objs[@]}" "$staticlib" \
  "${lflags[@]}" -l:libtensorflow_cc.so.2 -Wl,-rpath,'$ORIGIN/../tensorflow' \
  -Wl,--exclude-libs,libhogwild_tf_plugin.a -Wl,--no-undefined -lpthread -ldl -lm
mv "$out/libadam_async_ops.so.tmp" "$out/libadam_async_ops.so"
ln -sfn "$tf_lib" "$root/build/tensorflow"
echo "$tf_version" > "$out/libadam_async_ops.so.tf_version"
echo "built $out/libadam_async_ops.so for TensorFlow $tf_version"
