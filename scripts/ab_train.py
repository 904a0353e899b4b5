#!/usr/bin/env python3
"""A/B of two hogwild binaries on the peer benchmarks' workloads, alternated run by run.

Each round runs every workload at every thread count with binary A then B (B then A in odd
rounds), one process per run, and reads the `time:` line: training (the worker loop, batches to
updates) and total (load, model init and training: what a user waits for; a table whose pages are
first touched by training rather than by init moves time from one to the other). It prints, per
workload and thread count, each binary's median seconds and B's throughput relative to A's as the
median of the per-round ratios (above 1: B is faster), and writes the table to
build/ab-train/results.md.

A peer benchmark's ratio is peer time / our time, with the peer's run shared by both binaries, so
"B's peer ratio within 5 % of A's" is the same statement as "B / A >= 0.95"; timing the binaries
against each other directly leaves the peer's own noise out of it.

Workloads (data written by the peer scripts, which must have run once):
  bbc         bag of words, dim 10, lr 0.5, hashed bigrams, 25 epochs
              (build/bench-quality/bbc: scripts/bench_quality.sh --sets bbc)
  flights-lr  logistic regression, 2^18 buckets, Adagrad, 5 epochs (build/bench/ctr/flights: scripts/bench_ctr.sh)
  flights-fm  factorization machine, dim 8, Adagrad, 5 epochs (same data)
  gcide       word2vec skip-gram, dim 100, 1 epoch on GCIDE text (/usr/share/dictd/gcide.dict.dz,
              package dict-gcide; the text is prepared here as scripts/bench_word2vec.py does)

Usage: scripts/ab_train.py [--rounds 5] [--threads 1 2] [--workloads bbc flights-lr ...] A B
"""

import argparse
import gzip
import hashlib
import re
import shlex
import shutil
import statistics
import sys
from pathlib import Path

from bench_util import run_measured

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "build" / "ab-train"
BBC = ROOT / "build" / "bench-quality" / "bbc"
FLIGHTS = ROOT / "build" / "bench" / "ctr" / "flights"
GCIDE = Path("/usr/share/dictd/gcide.dict.dz")
WORKLOADS = ["bbc", "flights-lr", "flights-fm", "gcide"]


def gcide_text():
    text = WORK / "gcide.txt"
    if not text.exists():
        raw = gzip.open(GCIDE, "rt", encoding="utf-8", errors="replace").read()
        words = re.sub(r"[^a-z]+", " ", re.sub(r"<[^>]*>", " ", raw).lower()).split()
        with open(text, "w") as f:
            for i in range(0, len(words), 1000):
                f.write(" ".join(words[i:i + 1000]) + "\n")
    return text


def workload(name):
    """The `hogwild train` arguments (after the binary) of workload `name`."""
    WORK.mkdir(parents=True, exist_ok=True)
    cfg = WORK / f"{name}.toml"
    if name == "bbc":
        base = (BBC / "model.toml").read_text()
        vocab = re.search(r"^vocab = (\d+)", base, re.M).group(1)
        classes = re.search(r"^classes = (\d+)", base, re.M).group(1)
        cfg.write_text(f'[model]\nkind = "bow"\nvocab = {vocab}\nclasses = {classes}\ndim = 10\n'
                       f'bigram_buckets = 2000000\npool = "mean"\nseed = 1\n\n'
                       f'[optimizer]\nkind = "sgd"\nlr = 0.5\n')
        return [cfg, BBC / "data.prototxt", BBC / "train.ms", 25]
    if name in ("flights-lr", "flights-fm"):
        # bench_ctr.py's settings: Adagrad at 0.1 for LR, 0.05 for the FM.
        kind, extra, lr = (("fm", "dim = 8\ninit_scale = 0.05\n", 0.05) if name == "flights-fm"
                           else ("lr", "", 0.1))
        cfg.write_text(f'[model]\nkind = "{kind}"\nbuckets = 262144\n{extra}\n'
                       f'[optimizer]\nkind = "adagrad"\nlr = {lr}\n')
        return [cfg, FLIGHTS / "data.prototxt", FLIGHTS / "train.ms", 5]
    if name == "gcide":
        cfg.write_text(f'[model]\nkind = "word2vec"\ninput = "text"\n'
                       f'vocab_file = "{WORK / "vocab.txt"}"\ndim = 100\nwindow = 5\n'
                       f'negative = 5\nmin_count = 5\nsample = 1e-4\n\n'
                       f'[optimizer]\nkind = "sgd"\nlr = 0.025\n')
        return [cfg, ROOT / "examples" / "word2vec" / "data.prototxt", gcide_text(), 1]
    raise ValueError(name)


def train_seconds(binary, args, threads):
    """Training and total seconds of one run."""
    cfg, feed, data, epochs = args
    cmd = [binary, "train", "--config", cfg, "--feed", feed, data, "--epochs", epochs,
           "--threads", threads, "--print-period", "0"]
    out, _, _, _ = run_measured([str(c) for c in cmd])
    t = re.search(r"^time: .*training ([0-9.]+)s.*total ([0-9.]+)s", out, re.M)
    if not t:
        sys.exit(f"no time: line in the output of {shlex.join(map(str, cmd))}:\n{out[-2000:]}")
    return float(t.group(1)), float(t.group(2))


def sha(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=WORKLOADS)
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    command = shlex.join([sys.argv[0], *sys.argv[1:]])
    loads = {w: workload(w) for w in args.workloads}  # also makes WORK
    times = {(w, t, b): [] for w in args.workloads for t in args.threads for b in "AB"}
    # Runs use copies, so that a rebuild during the A/B changes nothing.
    binaries = {}
    for key, path in (("A", args.a), ("B", args.b)):
        pinned = WORK / f"hogwild-{sha(path)}"
        if not pinned.exists():
            shutil.copy2(path, pinned.with_suffix(".tmp"))
            pinned.with_suffix(".tmp").rename(pinned)
        binaries[key] = str(pinned)
    for w in args.workloads:  # warm-up: page cache, and word2vec's vocabulary file
        train_seconds(binaries["A"], loads[w], args.threads[0])
    for r in range(args.rounds):
        for w in args.workloads:
            for t in args.threads:
                for b in ("AB" if r % 2 == 0 else "BA"):
                    times[(w, t, b)].append(train_seconds(binaries[b], loads[w], t))
                a, b = times[(w, t, "A")][-1], times[(w, t, "B")][-1]
                print(f"round {r + 1}: {w} {t} thread(s): training A {a[0]:.2f}s B {b[0]:.2f}s, "
                      f"total A {a[1]:.2f}s B {b[1]:.2f}s", flush=True)
    lines = [f"Command: `{command}`", "",
             f"A: {args.a} (sha256 {sha(args.a)}), B: {args.b} (sha256 {sha(args.b)}); "
             f"{args.rounds} rounds, seconds from the `time:` line", "",
             "| workload | threads | training s, A / B (medians) | B / A training (min-max) "
             "| total s, A / B | B / A total (min-max) |", "|---|---|---|---|---|---|"]
    for w in args.workloads:
        for t in args.threads:
            cells = []
            for part in (0, 1):
                a = [x[part] for x in times[(w, t, "A")]]
                b = [x[part] for x in times[(w, t, "B")]]
                ratios = [x / y for x, y in zip(a, b)]
                cells += [f"{statistics.median(a):.2f} / {statistics.median(b):.2f}",
                          f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})"]
            lines.append(f"| {w} | {t} | " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    print(table)
    (WORK / "results.md").write_text(table + "\n")


if __name__ == "__main__":
    main()
