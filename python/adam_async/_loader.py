"""Finds the plugin library, checks the TensorFlow version it was built for, and loads it once.

Where the library is looked for, first match wins:

1. ``$ADAM_ASYNC_LIBRARY``, when set (an explicit choice for this run; a missing file is an error,
   never a fall-back to another library);
2. ``libadam_async_ops.so`` inside the package, as the wheel (``make wheel``) installs it;
3. ``build/plugin/libadam_async_ops.so`` of the checkout, when the package is the checkout's
   ``python/adam_async`` (the editable install of ``make setup``; ``make plugin`` builds it).

A ``.tf_version`` side file next to the library, and the version compiled into it, must name the
running TensorFlow: the op library is tied to the exact TensorFlow build it was compiled against.
``import adam_async`` checks the side file (:func:`check_tensorflow`), so that a wrong TensorFlow is
named before any graph is built; the library itself is loaded when an op is first built.

A library that the system's C or C++ runtime cannot load (it needs a newer glibc or libstdc++
than this system's: docs/python.md says which) is reported with the version it asked for and the
system's glibc.
"""

import ctypes
import functools
import os
import re
import threading
from pathlib import Path
from types import ModuleType
from typing import Optional

import tensorflow as tf

#: Environment variable naming the plugin library explicitly.
ENV_VAR = "ADAM_ASYNC_LIBRARY"
_LIBRARY = "libadam_async_ops.so"
_PACKAGE_DIR = Path(__file__).resolve().parent
# python/adam_async/_loader.py -> the repository root, if the package is a checkout's.
_REPO_ROOT = _PACKAGE_DIR.parents[1]


class PluginNotFoundError(ImportError):
    """The plugin library is not where it is looked for."""


class PluginVersionError(ImportError):
    """The plugin library was built for another TensorFlow than the one running."""


class PluginRuntimeError(ImportError):
    """The plugin library needs a newer glibc or libstdc++ than this system has."""


def _find() -> tuple[Path, str]:
    """The library to load and what to do when it does not fit the running TensorFlow."""
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise PluginNotFoundError(f"{ENV_VAR}={explicit}: no such file")
        return path, "rebuild it with `make plugin` against this TensorFlow"
    packaged = _PACKAGE_DIR / _LIBRARY
    if packaged.is_file():
        return packaged, (
            f"install the adam-async wheel built for TensorFlow {tf.__version__} "
            "(`make wheel` in a checkout whose venv has that TensorFlow)")
    if (_REPO_ROOT / "tf_plugin" / "build.sh").is_file():  # the package is a checkout's
        path = _REPO_ROOT / "build" / "plugin" / _LIBRARY
        if path.is_file():
            return path, "rebuild it with `make plugin` against this TensorFlow"
        raise PluginNotFoundError(
            f"{path} does not exist: run `make plugin` in {_REPO_ROOT}, "
            f"or set {ENV_VAR} to the library's path")
    raise PluginNotFoundError(
        f"{packaged} does not exist: this adam_async was installed without its op library; "
        f"install the adam-async wheel (`make wheel`), or set {ENV_VAR} to the library's path")


def library_path() -> Path:
    """The plugin library that :func:`load_library` loads (see the module docstring's order)."""
    return _find()[0]


def check_tensorflow() -> None:
    """Raises :class:`PluginVersionError`, naming both versions, when the library that
    :func:`load_library` would load was built for another TensorFlow than the running one (as its
    ``.tf_version`` side file says). A missing library is not an error here: it is reported when
    an op is first built, and the package's Python parts (Keras deserialization,
    ``adam_async.compat``) work without it."""
    try:
        path, remedy = _find()
    except PluginNotFoundError:
        return
    side_file = path.with_name(path.name + ".tf_version")
    if side_file.is_file():
        _check_version(path, side_file.read_text().strip(), remedy)


def _check_version(path: Path, built_for: str, remedy: str) -> None:
    if built_for != tf.__version__:
        raise PluginVersionError(
            f"{path} was built for TensorFlow {built_for}, but TensorFlow {tf.__version__} "
            f"is running: {remedy}"
        )


_LOCK = threading.Lock()


def load_library() -> ModuleType:
    """Loads the ops into TensorFlow (once per process, thread-safe) and returns the op module."""
    with _LOCK:
        return _load()


# What the dynamic loader says when a symbol version is missing, e.g.
# "/lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.34' not found (required by ...)".
_MISSING_VERSION = re.compile(r"version [`']((GLIBC|GLIBCXX|CXXABI)_[0-9.]+)' not found")


def _runtime_error(path: Path, message: str) -> Optional[str]:
    """The message for a library that the system's C or C++ runtime is too old to load, or None
    when ``message`` (the loader's) says something else."""
    missing = _MISSING_VERSION.search(message)
    if missing is None:
        return None
    version, family = missing.groups()
    runtime = "glibc" if family == "GLIBC" else "libstdc++ (GCC's C++ runtime)"
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION")  # "glibc 2.36"
    except (AttributeError, ValueError, OSError):  # not a glibc system, or one that won't say
        libc = None
    system = f"glibc {libc.split()[-1]}" if libc else "a C library that does not say its version"
    return (f"{path} cannot be loaded: it needs {runtime} with {version}, and this system "
            f"({system}) has an older one. The library needs the glibc and libstdc++ of the "
            "machine it was built on or newer (docs/python.md names them for the project's "
            "builds); build it on this system (`make wheel`) or use a newer one. "
            f"The loader said: {message.strip()}")


@functools.cache
def _load():
    path, remedy = _find()
    side_file = path.with_name(path.name + ".tf_version")
    if side_file.is_file():
        # Checked before loading: a library built for another TensorFlow may not even link.
        _check_version(path, side_file.read_text().strip(), remedy)
    try:
        module = tf.load_op_library(str(path))
    except tf.errors.NotFoundError as e:
        runtime = _runtime_error(path, e.message)
        if runtime is not None:
            raise PluginRuntimeError(runtime) from e
        raise PluginVersionError(
            f"{path} cannot be loaded into TensorFlow {tf.__version__} ({e.message.strip()}); "
            f"{remedy}"
        ) from e
    built_for = ctypes.CDLL(str(path)).adam_async_built_for_tf
    built_for.restype = ctypes.c_char_p
    _check_version(path, built_for().decode(), remedy)
    for op in (
        "ApplyAdamAsync",
        "SparseApplyAdamAsync",
        "ResourceApplyAdamAsync",
        "ResourceSparseApplyAdamAsync",
    ):
        tf.no_gradient(op)
    return module
