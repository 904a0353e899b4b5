"""`hogwild tf-train`, the Rust runner of TensorFlow graphs, checked against Python TensorFlow.

The graph is examples/export_bow_graph.py's bag-of-words classifier trained with AdamAsync (the
op library built by `make plugin`); the data are MultiSlot files read by the data feed. Python
restores the runner's checkpoint and evaluates it, and replays the runner's single-thread
training in a tf.compat.v1.Session loop.
"""

import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "build/plugin/libadam_async_ops.so"
BATCH = 16
# build/tf added only where missing: `make test` has put it there already, and cargo rebuilds
# (and relinks, a minute or more) whatever tensorflow-sys depends on when the value changes.
_PKG = os.environ.get("PKG_CONFIG_PATH", "")
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
           PKG_CONFIG_PATH=_PKG if f"{ROOT}/build/tf" in _PKG.split(":")
           else f"{ROOT}/build/tf:{_PKG}",
           ADAM_ASYNC_LIBRARY=str(PLUGIN))
os.environ["ADAM_ASYNC_LIBRARY"] = str(PLUGIN)
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "examples"))

import tensorflow as tf  # noqa: E402

import adam_async  # noqa: E402,F401  (registers the AdamAsync ops for import_meta_graph)
import export_bow_graph  # noqa: E402

DESC = f"""name: "MultiSlotDataFeed"
batch_size: {BATCH}
multi_slot_desc {{
  slots {{ name: "words" type: "uint64" is_dense: false is_used: true }}
  slots {{ name: "label" type: "uint64" is_dense: false is_used: true }}
}}
"""


def write_data(directory, files=2, lines=96, vocab=200, seed=0):
    """IMDB-like files: words < vocab/2 lean to class 0, the others to class 1 (80 % of words)."""
    rng = np.random.default_rng(seed)
    paths = []
    for f in range(files):
        rows = []
        for _ in range(lines):
            label = int(rng.integers(2))
            n = int(rng.integers(3, 20))
            lean = rng.random(n) < 0.8
            half = vocab // 2
            own = rng.integers(0, half, n) + label * half
            other = rng.integers(0, half, n) + (1 - label) * half
            words = np.where(lean, own, other)
            rows.append(f"{n} {' '.join(map(str, words))} 1 {label}")
        path = directory / f"part-{f}"
        path.write_text("\n".join(rows) + "\n")
        paths.append(path)
    (directory / "data.prototxt").write_text(DESC)
    return paths


def read_batches(paths):
    """The feed's batches for one reader: BATCH lines each, file after file (every file holds a
    multiple of BATCH lines, so no batch spans two files)."""
    batches = []
    for path in paths:
        lines = path.read_text().splitlines()
        assert len(lines) % BATCH == 0
        for start in range(0, len(lines), BATCH):
            words, splits, labels = [], [0], []
            for line in lines[start:start + BATCH]:
                v = list(map(int, line.split()))
                n = v[0]
                words += v[1:1 + n]
                splits.append(len(words))
                labels.append(v[n + 2])
            batches.append((np.array(words, np.int64), np.array(splits, np.int64),
                            np.array(labels, np.int64)))
    return batches


def feed_dict(batch):
    words, splits, labels = batch
    return {"words:0": words, "words_row_splits:0": splits, "label:0": labels}


@pytest.fixture(scope="module")
def hogwild_bin():
    """The CLI with the tf feature (incremental: quick once built)."""
    subprocess.run(["cargo", "build", "-q", "-p", "hogwild-cli", "--features", "tf"],
                   cwd=ROOT, env=ENV, check=True)
    return ROOT / "target/debug/hogwild"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    assert PLUGIN.is_file(), "run `make plugin` first"
    d = tmp_path_factory.mktemp("runner")
    files = write_data(d)
    graph = d / "bow.meta"
    export_bow_graph.export(graph, vocab=200, dim=8, optimizer="adam_async", lr=0.05, seed=3)
    return d, files, graph


def tf_train(hogwild_bin, *args, check=True):
    r = subprocess.run([str(hogwild_bin), "tf-train", *map(str, args)], env=ENV,
                       capture_output=True, text=True)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def summary(stdout, what):
    """Parses `<what>: batches B  instances N ... loss X  accuracy Y` from the runner's stdout."""
    line = next(line for line in stdout.splitlines() if line.startswith(f"{what}:"))
    values = dict(re.findall(r"(\w+) (-?[\d.]+(?:e-?\d+)?)", line.split(":", 1)[1]))
    return {k: float(v) for k, v in values.items()}


def python_session(graph):
    g = tf.Graph()
    with g.as_default():
        saver = tf.compat.v1.train.import_meta_graph(str(graph))
    return g, tf.compat.v1.Session(graph=g), saver


def evaluate(sess, batches):
    """The runner's averaging: each fetched value's mean over batches."""
    out = np.array([sess.run(["loss:0", "accuracy:0"], feed_dict(b)) for b in batches])
    return out.mean(axis=0)


def test_checkpoint_restores_in_python_with_the_reported_accuracy(hogwild_bin, setup):
    d, files, graph = setup
    ckpt = d / "ckpt/bow"
    r = tf_train(hogwild_bin, "--graph", graph, "--op-library", PLUGIN,
                 "--feed", d / "data.prototxt", "--threads", 2, "--epochs", 3,
                 "--print-period", 10, "--save", ckpt, "--eval", files[0], "--eval", files[1],
                 *files)
    train, ev = summary(r.stdout, "train"), summary(r.stdout, "eval")
    assert train["batches"] == 3 * 2 * 96 / BATCH
    assert ev["instances"] == 2 * 96
    assert re.search(r"step +10  elapsed .* instances/s  loss \d\.\d+  accuracy", r.stderr)
    # Every --print-period steps of both threads together, exactly.
    steps = [int(s) for s in re.findall(r"^step +(\d+)", r.stderr, re.M)]
    assert steps == list(range(10, int(train["batches"]) + 1, 10)), r.stderr
    assert ev["accuracy"] > 0.8, r.stdout

    g, sess, saver = python_session(graph)
    with g.as_default():
        saver.restore(sess, str(ckpt))
    loss, accuracy = evaluate(sess, read_batches(files))
    np.testing.assert_allclose(accuracy, ev["accuracy"], atol=1e-7)
    np.testing.assert_allclose(loss, ev["loss"], rtol=1e-6)


def test_single_thread_training_matches_a_python_session_loop(hogwild_bin, setup):
    d, files, graph = setup
    r = tf_train(hogwild_bin, "--graph", graph, "--op-library", PLUGIN,
                 "--feed", d / "data.prototxt", "--threads", 1, "--print-period", 0,
                 "--eval", files[0], "--eval", files[1], *files)
    train, ev = summary(r.stdout, "train"), summary(r.stdout, "eval")

    # The same graph, initial values (the init op's seeded random ops), data order and steps.
    g, sess, _ = python_session(graph)
    batches = read_batches(files)
    sess.run("init")
    steps = np.array([sess.run(["loss:0", "accuracy:0", "train"], feed_dict(b))[:2]
                      for b in batches])
    assert train["batches"] == len(batches)
    np.testing.assert_allclose(train["loss"], steps[:, 0].mean(), atol=1e-5)
    np.testing.assert_allclose(train["accuracy"], steps[:, 1].mean(), atol=1e-7)
    loss_after, accuracy_after = evaluate(sess, batches)
    np.testing.assert_allclose(ev["loss"], loss_after, atol=1e-5)
    np.testing.assert_allclose(ev["accuracy"], accuracy_after, atol=1e-7)


def test_a_graph_with_plugin_ops_needs_the_op_library(hogwild_bin, setup):
    d, files, graph = setup
    r = tf_train(hogwild_bin, "--graph", graph, "--feed", d / "data.prototxt", *files,
                 check=False)
    assert r.returncode != 0
    assert f"{graph}: TensorFlow cannot import the graph" in r.stderr
    assert "AdamAsync" in r.stderr and "--op-library" in r.stderr


def test_an_id_outside_the_table_names_the_op_and_the_batch(hogwild_bin, setup, tmp_path):
    d, _, graph = setup
    bad = tmp_path / "part-bad"
    bad.write_text("2 1 2 1 0\n" * BATCH + "2 1 200 1 1\n")
    r = tf_train(hogwild_bin, "--graph", graph, "--op-library", PLUGIN,
                 "--feed", d / "data.prototxt", bad, check=False)
    assert r.returncode != 0
    assert "worker thread 0 failed: training on batch 1 of this thread (1 instances)" in r.stderr
    assert "indices[1] = 200 is not in [0, 200)" in r.stderr
    assert "{{node Gather}}" in r.stderr


def test_a_malformed_line_names_the_file_and_line(hogwild_bin, setup, tmp_path):
    d, _, graph = setup
    bad = tmp_path / "part-bad"
    bad.write_text("2 1 2 1 0\n2 1 x 1 0\n")
    r = tf_train(hogwild_bin, "--graph", graph, "--op-library", PLUGIN,
                 "--feed", d / "data.prototxt", bad, check=False)
    assert r.returncode != 0
    assert f"{bad}:2" in r.stderr, r.stderr


def test_tensorflow_logs_nothing_unless_asked(hogwild_bin, setup):
    d, files, graph = setup
    quiet = {k: v for k, v in ENV.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    train = [str(hogwild_bin), "tf-train", "--graph", str(graph), "--op-library", str(PLUGIN),
             "--feed", str(d / "data.prototxt"), "--print-period", "0", *map(str, files)]
    for command in ([str(hogwild_bin), "--help"], [str(hogwild_bin), "check", "--help"], train):
        r = subprocess.run(command, env=quiet, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert r.stderr == "", (command, r.stderr)
    # Asked for: TensorFlow's start-up lines are there (oneDNN is on by default on x86 Linux).
    for extra, env in [(["--tf-log"], quiet), ([], dict(quiet, TF_CPP_MIN_LOG_LEVEL="0"))]:
        r = subprocess.run(train + extra, env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert "oneDNN custom operations are on" in r.stderr, (extra, r.stderr)
