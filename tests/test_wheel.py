"""The adam-async wheel (``make wheel``: scripts/build_wheel.sh) installed where a user would have it:
a new venv outside the repository that has only TensorFlow.

How that venv gets tensorflow-cpu: no wheel file of it is on this machine (the project venv was
installed from PyPI by scripts/setup.sh and pip keeps no wheel of it), and downloading 250 MB per
test run is out. So the venv (``python -m venv``, without system site-packages) gets the
distributions pip installed into the project venv for ``tensorflow-cpu``: it and the closure of its
requirements (their markers evaluated here), each file their RECORDs list hard-linked (symlinked
across file systems) into the new site-packages, dist-info included, as pip laid them out; console
scripts are left out, and so is what the new venv has already (its setuptools). Nothing else of the project venv (pytest, the editable adam-async) and
nothing of the repository is on that venv's path. Its own pip then installs the wheel with
``--no-index`` and dependency resolution on, so the wheel's ``tensorflow-cpu==`` pin must be met by
the TensorFlow there. The programs run in a temporary folder with the venv's python in isolated
mode (-I: no PYTHONPATH, no user site-packages).
"""

import errno
import os
import pathlib
import re
import runpy
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from importlib import metadata

import numpy as np
import pytest
import tensorflow as tf
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = pathlib.Path(__file__).resolve().parents[1]
PLATFORM = sysconfig.get_platform().replace("-", "_").replace(".", "_")
# The package's one written version (adam_async/_version.py); the wheel adds its TensorFlow.
VERSION = runpy.run_path(str(ROOT / "python/adam_async/_version.py"))["RELEASE"]
WHEEL_VERSION = f"{VERSION}+tf{tf.__version__}"


def tensorflow_distributions():
    """tensorflow-cpu and every distribution it requires, transitively, as installed here."""
    found, todo = {}, ["tensorflow-cpu"]
    while todo:
        dist = metadata.distribution(todo.pop())
        name = canonicalize_name(dist.metadata["Name"])
        if name in found:
            continue
        found[name] = dist
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(found.values())


def link_into(site_packages, dists):
    """Lays the files of ``dists`` out under ``site_packages`` as pip installed them, but for
    those already there (the new venv's own setuptools, which tensorflow requires too)."""
    present = {canonicalize_name(d.metadata["Name"])
               for d in metadata.distributions(path=[str(site_packages)])}
    for dist in dists:
        if canonicalize_name(dist.metadata["Name"]) in present:
            continue
        for file in dist.files:
            if file.parts[0] == "..":  # console scripts in bin/: not needed, and they name
                continue               # the project venv's python
            source, target = pathlib.Path(dist.locate_file(file)), site_packages / file
            if not source.is_file():  # RECORD also lists files pip never wrote (.pyc)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(source, target)
            except OSError as e:
                if e.errno != errno.EXDEV:
                    raise
                target.symlink_to(source)


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """(the venv's python, the wheel, an empty working folder outside the repository)."""
    base = tmp_path_factory.mktemp("wheel")
    env = dict(os.environ, PYTHON=sys.executable)
    built = subprocess.run(["bash", str(ROOT / "scripts/build_wheel.sh"), str(base / "dist")],
                           capture_output=True, text=True, timeout=300, env=env)
    assert built.returncode == 0, built.stderr[-3000:]
    [wheel] = (base / "dist").glob("adam_async-*.whl")

    home = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(home)], check=True, timeout=300)
    python = home / "bin" / "python"
    site = pathlib.Path(subprocess.run(
        [str(python), "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
        capture_output=True, text=True, check=True).stdout.strip())
    link_into(site, tensorflow_distributions())
    installed = subprocess.run(
        [str(python), "-I", "-m", "pip", "install", "--no-index", "--no-cache-dir",
         "--disable-pip-version-check", str(wheel)],
        capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    work = base / "work"
    work.mkdir()
    return python, wheel, work


def run(venv, *args, timeout=300, **extra_env):
    """Runs the venv's python in the working folder, with no path into the repository: nor the
    Makefile's LD_LIBRARY_PATH, whose build/tf/lib links to the project venv's TensorFlow."""
    python, _, work = venv
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PYTHON")
           and k not in ("ADAM_ASYNC_LIBRARY", "VIRTUAL_ENV", "LD_LIBRARY_PATH")}
    env.update(TF_CPP_MIN_LOG_LEVEL="3", **extra_env)
    out = subprocess.run([str(python), "-I", *map(str, args)], cwd=work, capture_output=True,
                         text=True, timeout=timeout, env=env)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return out.stdout


# Prints what importing the package, or load_library, raises, if anything.
LOAD = ("try:\n"
        "    import adam_async\n"
        "    adam_async.load_library()\n"
        "except ImportError as e:\n"
        "    print(type(e).__name__, e)\n")


def dynamic_section(library):
    """``readelf -d``'s (tag, value) rows of ``library``: RUNPATH, RPATH, NEEDED, ..."""
    out = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True,
                         check=True).stdout
    return re.findall(r"\((\w+)\)\s+.*?: \[(.*)\]", out)


def test_wheel_carries_the_library_pinned_to_its_tensorflow(venv, tmp_path):
    _, wheel, _ = venv
    assert wheel.name == f"adam_async-{WHEEL_VERSION}-py3-none-{PLATFORM}.whl"
    with zipfile.ZipFile(wheel) as whl:
        names = whl.namelist()
        dist_info = f"adam_async-{WHEEL_VERSION}.dist-info"
        assert "adam_async/libadam_async_ops.so" in names
        assert "adam_async/py.typed" in names
        assert whl.read("adam_async/libadam_async_ops.so.tf_version").decode().strip() == \
            tf.__version__
        meta = whl.read(f"{dist_info}/METADATA").decode()
        wheel_info = whl.read(f"{dist_info}/WHEEL").decode()
        # The repository's LICENSE, where setuptools puts it (older: dist-info/LICENSE; newer:
        # dist-info/licenses/LICENSE).
        [license_file] = [n for n in names
                          if n.startswith(f"{dist_info}/") and n.endswith("/LICENSE")]
        assert whl.read(license_file) == (ROOT / "LICENSE").read_bytes()
        library = pathlib.Path(whl.extract("adam_async/libadam_async_ops.so", tmp_path))
    assert re.findall(r"^Requires-Dist: (.*)$", meta, re.M) == [f"tensorflow-cpu=={tf.__version__}"]
    assert re.findall(r"^License: (.*)$", meta, re.M) == ["Apache-2.0"]
    assert "Root-Is-Purelib: false" in wheel_info
    assert f"Tag: py3-none-{PLATFORM}" in wheel_info
    # No path of the build machine: TensorFlow is found beside the package, where pip puts it.
    dynamic = dynamic_section(library)
    assert [value for tag, value in dynamic if tag in ("RUNPATH", "RPATH")] == \
        ["$ORIGIN/../tensorflow"], dynamic


def test_installed_package_says_its_version_and_documents_its_arguments(venv):
    out = run(venv, "-c", (
        "import inspect, pathlib, pydoc, re\n"
        "from importlib import metadata\n"
        "import adam_async\n"
        "from adam_async.keras import AdamAsync\n"
        "print(adam_async.__version__, metadata.version('adam-async'))\n"
        "print((pathlib.Path(adam_async.__file__).parent / 'py.typed').is_file())\n"
        "for cls in (adam_async.AdamAsyncOptimizer, AdamAsync):\n"
        "    doc = inspect.getdoc(cls.__init__)\n"
        "    params = [p for p in inspect.signature(cls.__init__).parameters if p != 'self']\n"
        "    missing = [p for p in params if not re.search(rf'^ +(\\*\\*)?{p}: \\S', doc, re.M)]\n"
        "    print(cls.__name__, doc.splitlines()[0] in pydoc.render_doc(cls), *missing)\n"))
    versions, typed, *documented = out.splitlines()
    assert versions.split() == [WHEEL_VERSION, WHEEL_VERSION]
    assert typed == "True"
    # help(cls) shows the constructor's own docstring (not the base class's), whose Args list
    # every argument of the signature with a description (no name follows True: none missing).
    assert documented == ["AdamAsyncOptimizer True", "AdamAsync True"]


def test_installed_package_loads_its_own_library_and_tensorflow(venv):
    python, _, _ = venv
    home = str(python.parent.parent)
    out = run(venv, "-c", (
        "import adam_async, sys\n"
        "adam_async.load_library()\n"
        "print(adam_async.__file__)\n"
        "print(adam_async.library_path())\n"
        "for line in open('/proc/self/maps'):\n"
        "    path = line.split()[-1]\n"
        "    if 'libtensorflow' in path or 'adam_async' in path:\n"
        "        print(path)\n"))
    package, library, *mapped = out.split()
    assert package.startswith(home), package
    assert library == str(pathlib.Path(package).parent / "libadam_async_ops.so")
    assert any("libtensorflow_framework" in path for path in mapped)
    assert {path for path in mapped if not path.startswith(home)} == set()
    # The library finds the TensorFlow beside it (its runpath) when loaded on its own, too.
    out = run(venv, "-c", (
        "import ctypes, pathlib, sysconfig\n"
        "site = pathlib.Path(sysconfig.get_paths()['platlib'])\n"
        "ctypes.CDLL(str(site / 'adam_async' / 'libadam_async_ops.so'))\n"
        "print(*sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libtensorflow' in l}))"))
    assert out.split() and all(path.startswith(home) for path in out.split()), out


def test_seed_example_runs_from_the_installed_wheel(venv):
    # examples/seed_example.py is DeepRec's example with the lines docs/tf-plugin.md lists
    # (tests/test_deeprec_migration.py checks that): a DeepRec user's migration, on the wheel.
    _, _, work = venv
    shutil.copy(ROOT / "examples/seed_example.py", work)
    out = run(venv, "seed_example.py")
    losses = [float(line.rsplit("(", 1)[1].rstrip(")]")) for line in out.splitlines()
              if "np.float32(" in line]
    # The seed's expected losses (tests/test_tf_plugin_optimizer.py::test_seed_example_runs).
    np.testing.assert_allclose(losses, [192.0, 172.8, 153.6], rtol=1e-4)


def test_keras_example_runs_from_the_installed_wheel(venv):
    _, _, work = venv
    shutil.copy(ROOT / "examples/keras_example.py", work)
    out = run(venv, "keras_example.py", work)
    lines = dict(line.split(": ", 1) for line in out.splitlines())
    before = float(lines["loss before training"])
    trained = float(lines["loss after 5 epochs"])
    more = float(lines["loss after 5 more epochs"])
    reloaded = lines[f"reloaded {work / 'model.keras'}"]
    assert reloaded == f"adam_async.keras.AdamAsync after 80 steps, loss {trained:.6f}"
    assert trained < 0.5 * before and more < trained, out


def test_installed_library_for_another_tensorflow_is_a_clear_error(venv):
    python, _, _ = venv
    package = pathlib.Path(run(venv, "-c", "import adam_async; print(adam_async.__file__)")
                           .strip()).parent
    side = package / "libadam_async_ops.so.tf_version"
    saved = side.read_text()
    side.write_text("2.0.0\n")
    try:
        # Named at `import adam_async`, before any op is built.
        out = run(venv, "-c", "try:\n    import adam_async\n"
                              "except ImportError as e:\n    print(type(e).__name__, e)\n")
    finally:
        side.write_text(saved)
    assert out.strip() == (
        f"PluginVersionError {package / 'libadam_async_ops.so'} was built for TensorFlow 2.0.0, but TensorFlow "
        f"{tf.__version__} is running: install the adam-async wheel built for TensorFlow "
        f"{tf.__version__} (`make wheel` in a checkout whose venv has that TensorFlow)")


def test_loader_order_in_the_installed_package(venv):
    """$ADAM_ASYNC_LIBRARY first (even over the package's own library), then the package's."""
    _, _, work = venv
    missing = work / "nope.so"
    out = run(venv, "-c", LOAD, ADAM_ASYNC_LIBRARY=str(missing))
    assert out.strip() == f"PluginNotFoundError ADAM_ASYNC_LIBRARY={missing}: no such file"
    package = pathlib.Path(run(venv, "-c", "import adam_async; print(adam_async.__file__)")
                           .strip()).parent
    library = package / "libadam_async_ops.so"
    library.rename(work / "moved.so")
    try:
        out = run(venv, "-c", LOAD)
    finally:
        (work / "moved.so").rename(library)
    # Outside a checkout there is no build/plugin to fall back on, and the message says so.
    assert out.strip() == (
        f"PluginNotFoundError {library} does not exist: this adam_async was installed without "
        "its op library; install the adam-async wheel (`make wheel`), or set ADAM_ASYNC_LIBRARY "
        "to the library's path")


def test_guide_states_the_runtimes_the_library_needs():
    """docs/python.md names the newest glibc and libstdc++ symbol versions that the library
    needs, as its dynamic symbol table lists them (a build on another machine may need others:
    then the guide is wrong for it, and this says what to write)."""
    library = ROOT / "build/plugin/libadam_async_ops.so"
    symbols = subprocess.run(["objdump", "-T", str(library)], capture_output=True, text=True,
                             check=True).stdout
    newest = {}
    for family, version in re.findall(r"\((GLIBC|GLIBCXX)_([0-9.]+)\)", symbols):
        key = tuple(map(int, version.split(".")))
        if key > tuple(map(int, newest.get(family, "0").split("."))):
            newest[family] = version
    guide = (ROOT / "docs/python.md").read_text()
    glibc, glibcxx = newest["GLIBC"], newest["GLIBCXX"]
    assert f"**glibc {glibc} or newer**" in guide and f"`GLIBC_{glibc}`" in guide, \
        f"docs/python.md should say that {library} needs glibc {glibc} (GLIBC_{glibc})"
    assert f"`GLIBCXX_{glibcxx}`" in guide, \
        f"docs/python.md should say that {library} needs a libstdc++ with GLIBCXX_{glibcxx}"
