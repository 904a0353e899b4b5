"""The wheel's build settings that pyproject.toml cannot state.

``make wheel`` (scripts/build_wheel.sh) stages this directory with the op library
(``adam_async/libadam_async_ops.so``) and its ``.tf_version`` side file and builds there. Such a
wheel:

- requires ``tensorflow-cpu==<that version>``: the library is compiled against that TensorFlow's
  headers and links its ``libtensorflow_framework.so.2``, whose C++ ABI changes between releases,
  so no other version can load it (the loader checks the version too, for ``--no-deps`` installs,
  e.g. next to the ``tensorflow`` package of the same version);
- is versioned ``<version>+tf<that version>``, so wheels for two TensorFlows differ by name;
- is tagged ``py3-none-<platform>``: the library is machine code for this platform, but it does not
  use Python's C API (TensorFlow loads it), so any Python 3 that the pinned TensorFlow supports
  will do. The platform is the plain one (``linux_x86_64``), not a manylinux one: the library
  needs the glibc and libstdc++ of the build machine or newer (docs/python.md says which).

Without the library (the checkout's editable install, ``make setup``) the package is pure Python
with no dependencies: the venv's TensorFlow comes from requirements.txt, the library from
build/plugin.
"""

import pathlib
import runpy
import warnings

from setuptools import setup
from setuptools.dist import Distribution

PACKAGE = pathlib.Path(__file__).resolve().parent / "adam_async"
# The one place the version is written (adam_async.__version__ comes from it too); run as a file,
# since importing the package imports TensorFlow.
VERSION = runpy.run_path(str(PACKAGE / "_version.py"))["RELEASE"]
LIBRARY = PACKAGE / "libadam_async_ops.so"
SIDE_FILE = PACKAGE / "libadam_async_ops.so.tf_version"


def wheel_commands():
    """The distribution class and bdist_wheel command of a platform wheel (see the module docstring)."""
    try:
        from setuptools.command.bdist_wheel import bdist_wheel  # setuptools >= 70.1
    except ImportError:
        # Older setuptools (3.11's venv has 65) use the wheel package's command, which warns that
        # it is moving to setuptools: true, and nothing to act on here.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            from wheel.bdist_wheel import bdist_wheel

    class BinaryDistribution(Distribution):
        """A distribution that carries machine code: a platform wheel, installed as platlib."""

        def has_ext_modules(self):
            return True

    class PlatformWheel(bdist_wheel):
        """``py3-none-<platform>``."""

        def get_tag(self):
            _, _, platform = super().get_tag()
            return "py3", "none", platform

    return {"distclass": BinaryDistribution, "cmdclass": {"bdist_wheel": PlatformWheel}}


if LIBRARY.is_file() != SIDE_FILE.is_file():
    present, missing = (LIBRARY, SIDE_FILE) if LIBRARY.is_file() else (SIDE_FILE, LIBRARY)
    raise SystemExit(f"{present} is there but {missing} is not: build with scripts/build_wheel.sh")

if LIBRARY.is_file():
    tf_version = SIDE_FILE.read_text().strip()
    if not tf_version:
        raise SystemExit(f"{SIDE_FILE} is empty: it should name the TensorFlow version")
    setup(version=f"{VERSION}+tf{tf_version}", install_requires=[f"tensorflow-cpu=={tf_version}"],
          **wheel_commands())
else:
    setup(version=VERSION, install_requires=[])
