"""Finds the plugin library, checks the TensorFlow version it was built for, and loads it once."""

import ctypes
import functools
import os
from pathlib import Path

import tensorflow as tf

#: Environment variable naming the plugin library explicitly.
ENV_VAR = "ADAM_ASYNC_LIBRARY"
_LIBRARY = "libadam_async_ops.so"
# python/adam_async/_loader.py -> the repository root (the package is installed editable).
_REPO_ROOT = Path(__file__).resolve().parents[2]


class PluginNotFoundError(ImportError):
    """The plugin library is not where it is looked for."""


class PluginVersionError(ImportError):
    """The plugin library was built for another TensorFlow than the one running."""


def library_path() -> Path:
    """The plugin library: ``$ADAM_ASYNC_LIBRARY`` if set, else ``build/plugin/`` in the repo."""
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise PluginNotFoundError(f"{ENV_VAR}={explicit}: no such file")
        return path
    path = _REPO_ROOT / "build" / "plugin" / _LIBRARY
    if not path.is_file():
        raise PluginNotFoundError(
            f"{path} does not exist: run `make plugin` in {_REPO_ROOT}, "
            f"or set {ENV_VAR} to the library's path"
        )
    return path


def _check_version(path: Path, built_for: str) -> None:
    if built_for != tf.__version__:
        raise PluginVersionError(
            f"{path} was built for TensorFlow {built_for}, but TensorFlow {tf.__version__} "
            "is running: rebuild it with `make plugin` against this TensorFlow"
        )


@functools.cache
def load_library():
    """Loads the ops into TensorFlow (once per process) and returns the generated op module."""
    path = library_path()
    side_file = path.with_name(path.name + ".tf_version")
    if side_file.is_file():
        # Checked before loading: a library built for another TensorFlow may not even link.
        _check_version(path, side_file.read_text().strip())
    try:
        module = tf.load_op_library(str(path))
    except tf.errors.NotFoundError as e:
        raise PluginVersionError(
            f"{path} cannot be loaded into TensorFlow {tf.__version__} ({e.message.strip()}); "
            "rebuild it with `make plugin`"
        ) from e
    built_for = ctypes.CDLL(str(path)).adam_async_built_for_tf
    built_for.restype = ctypes.c_char_p
    _check_version(path, built_for().decode())
    for op in (
        "ApplyAdamAsync",
        "SparseApplyAdamAsync",
        "ResourceApplyAdamAsync",
        "ResourceSparseApplyAdamAsync",
    ):
        tf.no_gradient(op)
    return module
