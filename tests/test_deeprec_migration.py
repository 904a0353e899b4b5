"""Moving off DeepRec: DeepRec's own AdamAsync example, changed by exactly the lines that
docs/tf-plugin.md ("Moving off DeepRec") lists, runs on stock TensorFlow with this package, and
fails without any one of them.

tests/deeprec_adam_async_example.txt is DeepRec's documented example, byte for byte: the
"Example" block of docs/docs_en/AdamAsync-Optimizer.md in github.com/DeepRec-AI/DeepRec (commit
e491078b8c249e62e0370a1053940484d052ef34). It is kept as text, not as a module, so that nothing
imports or collects it. The guide's lines are read from the guide itself (the python block after
its ``<!-- deeprec-lines -->`` mark), so the guide and this test cannot drift apart.
examples/seed_example.py is the migrated example with a comment on top; tests/test_wheel.py runs
it from the installed wheel.
"""

import pathlib
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs/tf-plugin.md"
MARK = "<!-- deeprec-lines -->"
DEEPREC_IMPORT = "import tensorflow as tf\n"


def guide_lines():
    """The block of lines the guide tells a DeepRec user to put in place of the TF import."""
    lines = GUIDE.read_text().splitlines(keepends=True)
    at = [i for i, line in enumerate(lines) if line.strip() == MARK]
    assert len(at) == 1, f"{GUIDE}: {len(at)} {MARK} marks, expected 1"
    fence = lines[at[0] + 1]
    assert fence.startswith("```python"), f"{GUIDE}:{at[0] + 2}: no python block after {MARK}"
    block = []
    for line in lines[at[0] + 2:]:
        if line.startswith("```"):
            return "".join(block)
        block.append(line)
    raise AssertionError(f"{GUIDE}:{at[0] + 2}: the block after {MARK} is not closed")


def deeprec_example():
    return (ROOT / "tests/deeprec_adam_async_example.txt").read_text()


def migrate(example, lines):
    """``example`` with its one ``import tensorflow as tf`` line replaced by ``lines``."""
    assert example.count(DEEPREC_IMPORT) == 1, "DeepRec's example imports TensorFlow once"
    return example.replace(DEEPREC_IMPORT, lines)


# Each line left out (the TF import left as DeepRec has it), and what the script then fails with.
WITHOUT = {
    "import tensorflow.compat.v1 as tf":
        "AttributeError: module 'tensorflow' has no attribute 'disable_v2_behavior'",
    "import adam_async.compat": "has no attribute 'AdamAsyncOptimizer'",
    "tf.disable_v2_behavior()":
        "`loss` passed to Optimizer.compute_gradients should be a function when eager execution "
        "is enabled",
}


def variants():
    """name -> script: the migrated example, and the example without each line of the guide's
    (the TF import then left as DeepRec has it)."""
    lines = guide_lines()
    scripts = {"migrated": migrate(deeprec_example(), lines)}
    for left_out in WITHOUT:
        kept = "".join(line for line in lines.splitlines(keepends=True)
                       if line.strip() != left_out)
        assert kept != lines, f"the guide has no line {left_out!r}"
        if left_out.startswith("import tensorflow"):
            kept = DEEPREC_IMPORT + kept
        scripts[left_out] = migrate(deeprec_example(), kept)
    return scripts


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """name -> finished process of each variant, all run at once (each imports TensorFlow, which
    takes seconds) with this venv's Python (adam_async installed, as `make setup` leaves it), each
    in an empty folder outside the repository."""
    procs = {}
    for name, script in variants().items():
        folder = tmp_path_factory.mktemp("deeprec")
        (folder / "example.py").write_text(script)
        procs[name] = subprocess.Popen([sys.executable, "example.py"], cwd=folder, text=True,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    done = {}
    try:
        for name, proc in procs.items():
            stdout, stderr = proc.communicate(timeout=300)
            done[name] = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return done


def losses(stdout):
    """The loss of each printed ``[emb, None, np.float32(loss)]`` line."""
    return [float(line.rsplit("(", 1)[1].rstrip(")]")) for line in stdout.splitlines()
            if "np.float32(" in line]


def test_the_guide_lists_three_lines():
    lines = [line for line in guide_lines().splitlines() if line.strip()]
    assert lines == ["import tensorflow.compat.v1 as tf", "import adam_async.compat",
                     "tf.disable_v2_behavior()"]


def test_deeprec_example_runs_with_the_guides_lines(runs):
    out = runs["migrated"]
    assert out.returncode == 0, out.stderr[-3000:]
    # sum(2 * emb) over 6 rows of 16 ones, then two AdamAsync steps of lr 0.1, each moving every
    # touched element by about 0.1: 192, 172.8, 153.6 (as in test_tf_plugin_optimizer.py).
    np.testing.assert_allclose(losses(out.stdout), [192.0, 172.8, 153.6], rtol=1e-4)


def test_seed_example_is_the_migrated_example():
    seed = (ROOT / "examples/seed_example.py").read_text().splitlines(keepends=True)
    code = "".join(seed[next(i for i, line in enumerate(seed) if not line.startswith("#")):])
    assert code == migrate(deeprec_example(), guide_lines())


@pytest.mark.parametrize("left_out", list(WITHOUT))
def test_each_line_is_needed(left_out, runs):
    out = runs[left_out]
    assert out.returncode != 0, f"ran without {left_out!r}:\n{out.stdout}"
    assert WITHOUT[left_out] in out.stderr, out.stderr[-3000:]
