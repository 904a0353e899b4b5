#!/usr/bin/env python3
"""A/B of hogwild binaries on word2vec: one epoch each, in turn, round after round, with the
core-to-core round trip timed just before and after every run.

On this project's 2-core VM one 2-thread word2vec epoch takes about 1.7x as long when the
hypervisor has put the two virtual cores far apart (a cache line's round trip about 310 ns
instead of 60; docs/benchmarks.md). That switch happens every few seconds, so comparing two
builds means comparing runs made in the same state: the summary gives each binary's median
epoch time over the runs whose two probes agree (both fast or both slow).

Data: the first `--sentences` lines of GCIDE as word ids, with the vocabulary of the whole
corpus, so that the tables have their full size (35.6 MiB); both are written by
scripts/bench_word2vec.sh, which must have run once. Usage:
    scripts/ab_word2vec.py [--rounds 8] [--sentences 2000] [--threads 2] BINARY...
"""

import argparse
import re
import statistics
import sys
import time
from pathlib import Path

from bench_util import core_to_core_ns, run_measured

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "build" / "bench" / "word2vec"
WORK = ROOT / "build" / "ab-word2vec"
FAST_NS, SLOW_NS = 150.0, 250.0


def prepare(sentences):
    ids = BENCH / "vocab.txt.ids" / "0-gcide.txt.ids"
    vocab = BENCH / "vocab.txt"
    config = BENCH / "model.toml"
    if not (ids.exists() and vocab.exists() and config.exists()):
        sys.exit(f"{ids}, {vocab} or {config} is missing: run scripts/bench_word2vec.sh once")
    WORK.mkdir(parents=True, exist_ok=True)
    # A copy of the vocabulary, which id input reads and never rewrites.
    (WORK / "vocab.txt").write_bytes(vocab.read_bytes())
    with open(ids, "rb") as src, open(WORK / "train.ids", "wb") as dst:
        for n, line in enumerate(src):
            if n == sentences:
                break
            dst.write(line)
    text = config.read_text()
    text = re.sub(r'(?m)^input = .*$', 'input = "ids"', text)
    text = re.sub(r'(?m)^vocab_file = .*$', f'vocab_file = "{WORK / "vocab.txt"}"', text)
    (WORK / "model.toml").write_text(text)


def run(binary, threads):
    """(epoch seconds, loss, process CPU seconds) of one epoch."""
    out, _, _, cpu = run_measured(
        [binary, "train", "--config", WORK / "model.toml", "--feed",
         ROOT / "examples" / "word2vec" / "data.prototxt", WORK / "train.ids",
         "--threads", threads, "--epochs", 1])
    m = re.search(r"^epoch 1: .* in ([\d.]+)s .*loss ([\d.]+)", out, re.M)
    if not m:
        sys.exit(f"{binary} printed no epoch line:\n{out}")
    return float(m.group(1)), float(m.group(2)), cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--sentences", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    prepare(args.sentences)
    runs = {b: [] for b in args.binaries}
    print(f"{time.strftime('%Y-%m-%d %H:%M')}: {args.rounds} rounds, {args.sentences} sentences, "
          f"{args.threads} threads")
    for r in range(1, args.rounds + 1):
        for b in args.binaries:
            pre = core_to_core_ns()
            secs, loss, cpu = run(b, args.threads)
            post = core_to_core_ns()
            runs[b].append((pre, post, secs))
            print(f"round {r} {b}: round trip {pre:.0f} -> {post:.0f} ns, epoch {secs:.3f} s, "
                  f"loss {loss:.5f}, process CPU {cpu:.2f} s", flush=True)
    for b, rs in runs.items():
        for name, keep in [("fast", lambda a, z: max(a, z) < FAST_NS),
                           ("slow", lambda a, z: min(a, z) > SLOW_NS)]:
            secs = sorted(s for a, z, s in rs if keep(a, z))
            median = f"{statistics.median(secs):.3f} s" if secs else "-"
            print(f"{b}: {name} state (both probes {'<' if name == 'fast' else '>'} "
                  f"{FAST_NS if name == 'fast' else SLOW_NS:.0f} ns): median {median} "
                  f"over {len(secs)} runs {secs}")


if __name__ == "__main__":
    main()
