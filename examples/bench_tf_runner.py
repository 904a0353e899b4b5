"""Benchmark: `hogwild tf-train` (the Rust runner, 1 and 2 threads) vs a Python
tf.compat.v1.Session loop feeding the same graph (the bag-of-words classifier of
export_bow_graph.py, AdamAsync) the same batches. Prints a table of examples/s and ratios.

The Python loop gets its batches pre-parsed in numpy (no file reading is timed); the runner's time
includes reading and parsing the files in its feed threads. Each configuration runs `--repeats`
times back to back and the median is reported.

Usage (after `make plugin`):
    PKG_CONFIG_PATH=build/tf cargo build --release -p hogwild-cli --features tf
    .venv/bin/python examples/bench_tf_runner.py [--lines 4000] [--batch 32] [--repeats 3]
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


def runner(binary, graph, d, paths, threads, extra=()):
    r = subprocess.run([str(binary), "tf-train", "--graph", str(graph), "--op-library",
                        str(PLUGIN), "--data-desc", str(d / "data.prototxt"), "--threads",
                        str(threads), "--print-period", "0", *extra, *map(str, paths)],
                       capture_output=True, text=True, check=True)
    line = next(x for x in r.stdout.splitlines() if x.startswith("train:"))
    return float(re.search(r"([\d.]+) instances/s", line).group(1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--files", type=int, default=2)
    p.add_argument("--lines", type=int, default=4000, help="lines per file")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--vocab", type=int, default=30000)
    p.add_argument("--dim", type=int, default=16)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--binary", default=str(ROOT / "target/release/hogwild"))
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = pathlib.Path(tmp)
        paths, batches = write_data(d, a.files, a.lines, a.vocab, a.batch)
        graph = d / "bow.meta"
        export_bow_graph.export(graph, vocab=a.vocab, dim=a.dim, optimizer="adam_async")
        rows = {"python Session loop (1 thread)": [], "runner 1 thread": [],
                "runner 2 threads": [], "runner 2 threads, --inline-steps": []}
        for _ in range(a.repeats):
            rows["python Session loop (1 thread)"].append(python_loop(graph, batches))
            rows["runner 1 thread"].append(runner(a.binary, graph, d, paths, 1))
            rows["runner 2 threads"].append(runner(a.binary, graph, d, paths, 2))
            rows["runner 2 threads, --inline-steps"].append(
                runner(a.binary, graph, d, paths, 2, ["--inline-steps"]))
        base = statistics.median(rows["python Session loop (1 thread)"])
        print(f"{a.files} files x {a.lines} lines, batch {a.batch}, vocab {a.vocab}, "
              f"dim {a.dim}, AdamAsync; median of {a.repeats}")
        print(f"| {'configuration':<34} | {'examples/s':>10} | {'vs Python loop':>14} |")
        print(f"|{'-' * 36}|{'-' * 12}:|{'-' * 15}:|")
        for name, xs in rows.items():
            m = statistics.median(xs)
            print(f"| {name:<34} | {m:>10.0f} | {m / base:>13.2f}x |")


if __name__ == "__main__":
    main()
