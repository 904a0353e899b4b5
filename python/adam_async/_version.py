"""The package's version, written in one place: ``RELEASE`` below.

python/setup.py reads ``RELEASE`` from this file (pyproject.toml declares the version dynamic):
the checkout's editable install is ``RELEASE``, the wheel (``make wheel``) is
``RELEASE+tf<version>``, named after the TensorFlow its op library was built for.
``__version__`` is what pip reports for the installed package: ``RELEASE``, with that
``+tf<version>`` where the package carries the op library and its ``.tf_version`` side file.
"""

from pathlib import Path

#: The release, without the TensorFlow label of a wheel.
RELEASE = "0.1.0"


def _version() -> str:
    side_file = Path(__file__).resolve().with_name("libadam_async_ops.so.tf_version")
    if side_file.is_file():
        return f"{RELEASE}+tf{side_file.read_text().strip()}"
    return RELEASE


__version__ = _version()
