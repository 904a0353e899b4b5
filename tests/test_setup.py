"""The project venv and the generated pkg-config file are what the build expects."""
import pathlib
import re

import tensorflow as tf

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_tensorflow_is_the_pinned_version():
    pinned = re.search(r"tensorflow-cpu==(\S+)", (ROOT / "requirements.txt").read_text()).group(1)
    assert tf.__version__ == pinned


def test_pkg_config_points_at_the_wheel_libraries():
    pc = (ROOT / "build/tf/tensorflow.pc").read_text()
    assert f"Version: {tf.__version__}" in pc
    lib = ROOT / "build/tf/lib"
    for name in ("libtensorflow.so", "libtensorflow_framework.so"):
        target = (lib / name).resolve()
        assert target.exists(), name
        assert target.parent == pathlib.Path(tf.sysconfig.get_lib()).resolve()
