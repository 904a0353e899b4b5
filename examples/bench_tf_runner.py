"""Benchmark: `hogwild tf-train` (the Rust runner, 1 and 2 threads) vs a Python
tf.compat.v1.Session loop feeding the same graph (the bag-of-words classifier of
export_bow_graph.py, AdamAsync) the same batches, and vs the native executor (`hogwild train`,
model `kind = "bow"`, AdamAsync) on the same files, batch size, vocab, dim, epochs and threads.
Prints tables of examples/s and ratios, and the graph's bare step rate (its train op with the
inputs built in as constants: no feed at all) as the limit any loop around it can reach.

The native executor runs twice per thread count: `--stream` (reads and parses the files during
training, as the runner does) and in memory (files loaded before the clock starts; its time is the
"training" part of the `time:` line).

The Python loop gets its batches pre-parsed in numpy (no file reading is timed); the runner's time
includes reading and parsing the files in its feed threads. Each configuration runs `--repeats`
times back to back and the median is reported.

With --feed-cost it measures what the runner's data feed costs instead, for the bag-of-words
graph and a DeepFM-like graph (8 one-id fields, FM + a 64-32 MLP, AdamAsync), at 1 and 2 threads:
the runner (`hogwild tf-train` from the files) against (a) its bare step rate (the
`bare_steps` example: the same graph stepped from Rust through the runner's own step on one batch
parsed once, no file reading or parsing), (b) the Python `sess.run(train_op, feed_dict)` loop on
pre-parsed batches (1 thread), (c) the graph with that one batch built in as constants (no feed
at all; grappler may fold what depends only on them: an upper bound).

Usage (after `make plugin`):
    PKG_CONFIG_PATH=build/tf cargo build --release -p hogwild-cli --features tf
    .venv/bin/python examples/bench_tf_runner.py [--lines 4000] [--batch 32] [--repeats 3] \
        [--epochs 1]
    PKG_CONFIG_PATH=build/tf cargo build --release -p hogwild-tf --example bare_steps
    .venv/bin/python examples/bench_tf_runner.py --feed-cost [--lines 8000] [--batch 64]
"""

import argparse
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "build/plugin/libadam_async_ops.so"
os.environ.setdefault("ADAM_ASYNC_LIBRARY", str(PLUGIN))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "examples"))

import tensorflow as tf  # noqa: E402

import adam_async  # noqa: E402,F401
import export_bow_graph  # noqa: E402


def write_data(d, files, lines, vocab, batch, seed=0):
    rng = np.random.default_rng(seed)
    paths, batches = [], []
    for f in range(files):
        rows = []
        for start in range(0, lines, batch):
            words, splits, labels = [], [0], []
            for _ in range(min(batch, lines - start)):
                label = int(rng.integers(2))
                n = int(rng.integers(10, 60))
                half = vocab // 2
                own = rng.random(n) < 0.8
                w = np.where(own, rng.integers(0, half, n) + label * half,
                             rng.integers(0, half, n) + (1 - label) * half)
                rows.append(f"{n} {' '.join(map(str, w))} 1 {label}")
                words += w.tolist()
                splits.append(len(words))
                labels.append(label)
            batches.append({"words:0": np.array(words, np.int64),
                            "words_row_splits:0": np.array(splits, np.int64),
                            "label:0": np.array(labels, np.int64)})
        p = d / f"part-{f}"
        p.write_text("\n".join(rows) + "\n")
        paths.append(p)
    (d / "data.prototxt").write_text(
        f'name: "MultiSlotDataFeed"\nbatch_size: {batch}\nmulti_slot_desc {{\n'
        '  slots { name: "words" type: "uint64" is_dense: false is_used: true }\n'
        '  slots { name: "label" type: "uint64" is_dense: false is_used: true }\n}\n')
    return paths, batches


def python_loop(graph, batches):
    g = tf.Graph()
    with g.as_default():
        tf.compat.v1.train.import_meta_graph(str(graph))
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1,
                                      inter_op_parallelism_threads=1)
    with tf.compat.v1.Session(graph=g, config=config) as sess:
        sess.run("init")
        start = time.perf_counter()
        n = 0
        for b in batches:
            sess.run(["loss:0", "accuracy:0", "train"], b)
            n += len(b["label:0"])
        return n / (time.perf_counter() - start)


def bare_steps(graph, batch, threads, seconds=3.0):
    """The graph's own limit: examples/s of its train op with the inputs built into the graph as
    constants (one batch of the data, `input_map`), so no step feeds, parses or copies anything;
    `threads` Python threads step one session together, as the runner's threads do. The same rows
    every step keep them in cache: an upper bound, not a training run."""
    import threading

    g = tf.Graph()
    with g.as_default():
        inputs = {name: tf.constant(value) for name, value in batch.items()}
        tf.compat.v1.train.import_meta_graph(str(graph), input_map=inputs)
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1,
                                      inter_op_parallelism_threads=threads)
    with tf.compat.v1.Session(graph=g, config=config) as sess:
        sess.run("init")
        step = sess.make_callable(g.get_operation_by_name("train"))
        for _ in range(20):
            step()
        counts = [0] * threads
        deadline = time.perf_counter() + seconds

        def work(i):
            while time.perf_counter() < deadline:
                step()
                counts[i] += 1

        start = time.perf_counter()
        pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        return sum(counts) * len(batch["label:0"]) / (time.perf_counter() - start)


def runner(binary, graph, d, paths, threads, epochs, extra=()):
    r = subprocess.run([str(binary), "tf-train", "--graph", str(graph), "--op-library",
                        str(PLUGIN), "--feed", str(d / "data.prototxt"), "--threads",
                        str(threads), "--epochs", str(epochs), "--print-period", "0", *extra,
                        *map(str, paths)],
                       capture_output=True, text=True, check=True)
    line = next(x for x in r.stdout.splitlines() if x.startswith("train:"))
    return float(re.search(r"([\d.]+) instances/s", line).group(1))


def write_native_config(d, vocab, dim, lr=0.01):
    """The native twin of export_bow_graph.export's network: mean embedding bag -> fc with bias ->
    softmax cross-entropy, 2 classes, no bigrams, AdamAsync with the same learning rate."""
    p = d / "bow.toml"
    p.write_text(f'[model]\nkind = "bow"\nvocab = {vocab}\nclasses = 2\ndim = {dim}\n'
                 f'bigram_buckets = 0\npool = "mean"\nbias = true\nend_of_text = false\n\n'
                 f'[optimizer]\nkind = "adam_async"\nlr = {lr}\n')
    return p


def native(binary, config, d, paths, threads, epochs, stream):
    """examples/s of `hogwild train`: the instances of every epoch over the `training` time of its
    `time:` line (with --stream the files are read and parsed during training; in memory they
    are loaded before it)."""
    r = subprocess.run([str(binary), "train", "--config", str(config), "--feed",
                        str(d / "data.prototxt"), "--threads", str(threads), "--epochs",
                        str(epochs), "--print-period", "0", *(["--stream"] if stream else []),
                        *map(str, paths)],
                       capture_output=True, text=True, check=True)
    out = r.stdout
    instances = sum(int(n) for n in re.findall(r"^epoch \d+: (\d+) instances", out, re.M))
    secs = float(re.search(r"training ([\d.]+)s", out).group(1))
    return instances / secs


DEEPFM_FIELDS, DEEPFM_VOCAB = 8, 1000


def write_deepfm_data(d, files, lines, batch, seed=0):
    """Lines of 8 one-id fields and a label that two of the fields decide (with 10 % noise)."""
    rng = np.random.default_rng(seed)
    paths, batches = [], []
    for f in range(files):
        rows = []
        for start in range(0, lines, batch):
            n = min(batch, lines - start)
            ids = rng.integers(0, DEEPFM_VOCAB, (n, DEEPFM_FIELDS))
            label = ((ids[:, 0] + ids[:, 1]) % 2 ^ (rng.random(n) < 0.1)).astype(np.int64)
            rows += [" ".join(f"1 {x}" for x in row) + f" 1 {y}" for row, y in zip(ids, label)]
            b = {f"c{i}": ids[:, i].astype(np.int64) for i in range(DEEPFM_FIELDS)}
            b["label"] = label
            batches.append(b)
        p = d / f"deepfm-{f}"
        p.write_text("\n".join(rows) + "\n")
        paths.append(p)
    slots = "".join(f'  slots {{ name: "c{i}" type: "uint64" is_dense: false is_used: true }}\n'
                    for i in range(DEEPFM_FIELDS))
    (d / "deepfm.prototxt").write_text(
        f'name: "MultiSlotDataFeed"\nbatch_size: {batch}\nmulti_slot_desc {{\n{slots}'
        '  slots { name: "label" type: "uint64" is_dense: false is_used: true }\n}\n')
    return paths, batches


def export_deepfm(out, dim=8, seed=1):
    """A DeepFM-like compat.v1 graph: first-order weights, FM second order and a 64-32 MLP over
    the fields' embeddings, sigmoid cross-entropy, AdamAsync; inputs `c0`..`c7` and `label`."""
    v1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        v1.set_random_seed(seed)
        ids = [v1.placeholder(tf.int64, [None], f"c{i}") for i in range(DEEPFM_FIELDS)]
        label = v1.placeholder(tf.int64, [None], "label")
        rows = DEEPFM_FIELDS * DEEPFM_VOCAB
        init = v1.random_uniform_initializer(-0.05, 0.05)
        emb = v1.get_variable("emb", [rows, dim], initializer=init)
        lin = v1.get_variable("lin", [rows, 1], initializer=init)
        idx = tf.stack([x + i * DEEPFM_VOCAB for i, x in enumerate(ids)], 1)
        e = tf.gather(emb, idx)
        first = tf.reduce_sum(tf.gather(lin, idx), [1, 2])
        total = tf.reduce_sum(e, 1)
        fm = 0.5 * tf.reduce_sum(total * total - tf.reduce_sum(e * e, 1), 1)
        h = tf.reshape(e, [-1, DEEPFM_FIELDS * dim])
        for k, width in enumerate([64, 32, 1]):
            w = v1.get_variable(f"mlp/w{k}", [h.shape[1], width],
                                initializer=v1.glorot_uniform_initializer())
            b = v1.get_variable(f"mlp/b{k}", [width], initializer=v1.zeros_initializer())
            h = tf.matmul(h, w) + b
            if width > 1:
                h = tf.nn.relu(h)
        logit = first + fm + tf.squeeze(h, 1)
        y = tf.cast(label, tf.float32)
        loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logit),
                              name="loss")
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.cast(logit > 0, tf.float32), y),
                                          tf.float32), name="accuracy")
        adam_async.AdamAsyncOptimizer(0.001).minimize(loss, name="train")
        v1.add_to_collection("init_op", v1.global_variables_initializer())
        saver = v1.train.Saver()
        info = v1.saved_model.utils.build_tensor_info
        sig = v1.saved_model.signature_def_utils.build_signature_def(
            inputs={**{f"c{i}": info(x) for i, x in enumerate(ids)}, "label": info(label)},
            outputs={"loss": info(loss), "accuracy": info(accuracy)}, method_name="hogwild/train")
        meta = saver.export_meta_graph()
    meta.signature_def["train"].CopyFrom(sig)
    pathlib.Path(out).write_bytes(meta.SerializeToString())


def by_tensor(meta_graph, batch):
    """A batch keyed by signature input key, keyed by tensor name instead."""
    sig = meta_graph.signature_def["train"]
    return {sig.inputs[k].name: v for k, v in batch.items()}


def rust_bare_steps(graph, desc, paths, threads, seconds=3.0):
    example = ROOT / "target/release/examples/bare_steps"
    r = subprocess.run([str(example), "--graph", str(graph), "--op-library", str(PLUGIN),
                        "--feed", str(desc), "--threads", str(threads), "--seconds",
                        str(seconds), *map(str, paths)], capture_output=True, text=True,
                       check=True)
    return float(re.search(r"bare steps: ([\d.]+) instances/s", r.stdout).group(1))


def runner_on(binary, graph, desc, paths, threads, epochs):
    r = subprocess.run([str(binary), "tf-train", "--graph", str(graph), "--op-library",
                        str(PLUGIN), "--feed", str(desc), "--threads", str(threads), "--epochs",
                        str(epochs), "--print-period", "0", *map(str, paths)],
                       capture_output=True, text=True, check=True)
    line = next(x for x in r.stdout.splitlines() if x.startswith("train:"))
    return float(re.search(r"([\d.]+) instances/s", line).group(1))


def feed_cost(a):
    """The --feed-cost tables (see the module docstring)."""
    print(f"{a.files} files x {a.lines} lines, batch {a.batch}, {a.epochs} epoch(s), AdamAsync; "
          f"median of {a.repeats}; command: examples/bench_tf_runner.py --feed-cost "
          f"--files {a.files} --lines {a.lines} --batch {a.batch} --epochs {a.epochs} "
          f"--repeats {a.repeats}")
    with tempfile.TemporaryDirectory() as tmp:
        d = pathlib.Path(tmp)
        graphs = {}
        paths, batches = write_data(d, a.files, a.lines, a.vocab, a.batch)
        graphs["bow"] = (d / "bow.meta", d / "data.prototxt", paths,
                         [{k.split(":")[0].replace("words_row_splits", "words/row_splits"): v
                           for k, v in b.items()} for b in batches])
        export_bow_graph.export(graphs["bow"][0], vocab=a.vocab, dim=a.dim,
                                optimizer="adam_async")
        paths, batches = write_deepfm_data(d, a.files, a.lines, a.batch)
        graphs["deepfm"] = (d / "deepfm.meta", d / "deepfm.prototxt", paths, batches)
        export_deepfm(graphs["deepfm"][0])
        print("| graph | threads | runner | (a) bare steps | runner / (a) | (b) Python loop | "
              "runner / (b) | (c) constants | runner / (c) |")
        print("|---|--:|--:|--:|--:|--:|--:|--:|--:|")
        for name, (graph, desc, paths, batches) in graphs.items():
            meta = tf.compat.v1.MetaGraphDef()
            meta.ParseFromString(graph.read_bytes())
            fed = [by_tensor(meta, b) for b in batches]
            rows = {k: [] for k in ("python", "r1", "r2", "a1", "a2", "c1", "c2")}
            for _ in range(a.repeats):
                rows["python"].append(python_loop(graph, fed))
                for t in (1, 2):
                    rows[f"r{t}"].append(runner_on(a.binary, graph, desc, paths, t, a.epochs))
                    rows[f"a{t}"].append(rust_bare_steps(graph, desc, paths, t))
                    rows[f"c{t}"].append(bare_steps(graph, fed[0], t))
            med = {k: statistics.median(v) for k, v in rows.items()}
            for t in (1, 2):
                r, bare, const = med[f"r{t}"], med[f"a{t}"], med[f"c{t}"]
                py = med["python"]
                print(f"| {name} | {t} | {r:.0f} | {bare:.0f} | {r / bare:.2f}x | {py:.0f} | "
                      f"{r / py:.2f}x | {const:.0f} | {r / const:.2f}x |")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--files", type=int, default=2)
    p.add_argument("--lines", type=int, default=4000, help="lines per file")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--vocab", type=int, default=30000)
    p.add_argument("--dim", type=int, default=16)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--skip-python", action="store_true",
                   help="only the runner vs the native executor")
    p.add_argument("--binary", default=str(ROOT / "target/release/hogwild"))
    p.add_argument("--feed-cost", action="store_true",
                   help="the runner against its bare steps, the Python loop and constants")
    a = p.parse_args()
    if a.feed_cost:
        return feed_cost(a)
    with tempfile.TemporaryDirectory() as tmp:
        d = pathlib.Path(tmp)
        paths, batches = write_data(d, a.files, a.lines, a.vocab, a.batch)
        graph = d / "bow.meta"
        export_bow_graph.export(graph, vocab=a.vocab, dim=a.dim, optimizer="adam_async")
        config = write_native_config(d, a.vocab, a.dim)
        rows = {} if a.skip_python else {"python Session loop (1 thread)": []}
        for t in (1, 2):
            for name in (f"runner {t} thread{'s' * (t > 1)}",
                         f"native --stream {t} thread{'s' * (t > 1)}",
                         f"native in-memory {t} thread{'s' * (t > 1)}"):
                rows[name] = []
        if not a.skip_python:
            rows["runner 2 threads, --inline-steps"] = []
            rows["graph's bare steps, 1 thread"] = []
            rows["graph's bare steps, 2 threads"] = []
        for _ in range(a.repeats):
            if not a.skip_python:
                rows["python Session loop (1 thread)"].append(python_loop(graph, batches))
            for t in (1, 2):
                s = "s" * (t > 1)
                rows[f"runner {t} thread{s}"].append(
                    runner(a.binary, graph, d, paths, t, a.epochs))
                rows[f"native --stream {t} thread{s}"].append(
                    native(a.binary, config, d, paths, t, a.epochs, stream=True))
                rows[f"native in-memory {t} thread{s}"].append(
                    native(a.binary, config, d, paths, t, a.epochs, stream=False))
            if not a.skip_python:
                rows["runner 2 threads, --inline-steps"].append(
                    runner(a.binary, graph, d, paths, 2, a.epochs, ["--inline-steps"]))
                for t in (1, 2):
                    rows[f"graph's bare steps, {t} thread{'s' * (t > 1)}"].append(
                        bare_steps(graph, batches[0], t))
        med = {name: statistics.median(xs) for name, xs in rows.items()}
        print(f"{a.files} files x {a.lines} lines, batch {a.batch}, vocab {a.vocab}, "
              f"dim {a.dim}, {a.epochs} epoch(s), AdamAsync; median of {a.repeats}")
        if not a.skip_python:
            base = med["python Session loop (1 thread)"]
            print(f"| {'configuration':<34} | {'examples/s':>10} | {'vs Python loop':>14} | "
                  f"{'of bare steps':>13} |")
            print(f"|{'-' * 36}|{'-' * 12}:|{'-' * 15}:|{'-' * 14}:|")
            for name, t in (("python Session loop (1 thread)", 1), ("runner 1 thread", 1),
                            ("runner 2 threads", 2), ("runner 2 threads, --inline-steps", 2),
                            ("graph's bare steps, 1 thread", 1),
                            ("graph's bare steps, 2 threads", 2)):
                bare = med[f"graph's bare steps, {t} thread{'s' * (t > 1)}"]
                print(f"| {name:<34} | {med[name]:>10.0f} | {med[name] / base:>13.2f}x | "
                      f"{med[name] / bare:>12.2f}x |")
            print()
        print(f"| {'threads':>7} | {'runner':>10} | {'native --stream':>15} | "
              f"{'native in-memory':>16} | {'runner / stream':>15} | {'runner / in-mem':>15} |")
        print(f"|{'-' * 8}:|{'-' * 11}:|{'-' * 16}:|{'-' * 17}:|{'-' * 16}:|{'-' * 16}:|")
        for t in (1, 2):
            s = "s" * (t > 1)
            r = med[f"runner {t} thread{s}"]
            ns = med[f"native --stream {t} thread{s}"]
            nm = med[f"native in-memory {t} thread{s}"]
            print(f"| {t:>7} | {r:>10.0f} | {ns:>15.0f} | {nm:>16.0f} | "
                  f"{r / ns:>14.3f}x | {r / nm:>14.3f}x |")


if __name__ == "__main__":
    main()
