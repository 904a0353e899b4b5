"""word2vec benchmark: hogwild vs gensim on GCIDE, skip-gram (`--arch skipgram`, gensim's sg=1)
or CBOW (`--arch cbow`, gensim's sg=0 with its default cbow_mean=1), negative sampling. With
`--subwords`, both use fastText's character n-grams (minn 3, maxn 6, 2,000,000 buckets): gensim's
`FastText` against ours with `minn`, `maxn`, `subword_buckets`.

Both train on the same cleaned text (letters only, lower case, 1000 words per line) with
negative=5, window=5, dim 100, min_count=5, sample=1e-4, learning rate `--lr` (default 0.025,
gensim's for both architectures) decaying to 0.0001, `--epochs` epochs (default 10:
fewer leave both far from trained, where the analogy test says little about the vectors),
at 1 and 2 threads, back to back, `--repeats` times (median). Throughput is effective words/s (words trained after
subsampling, gensim's own figure from its log; ours from `effective_words` and the epoch time).
Quality is gensim's `evaluate_word_analogies` on its bundled questions-words.txt, for gensim's
vectors and for ours loaded with `KeyedVectors.load_word2vec_format`, after every run (median and
all runs reported). Peak memory is the max RSS
of each training process. Run through scripts/bench_word2vec.sh (bench venv, release build).
Results go to build/bench/word2vec/results.md (CBOW: results-cbow.md; `--subwords`: with
`-subwords` added) and a plot to docs/bench_word2vec.png (CBOW: docs/bench_word2vec_cbow.png;
`--subwords`: no plot).
"""
import argparse
import gzip
import json
import logging
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_util import core_to_core_ns, run_measured

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "bench" / "word2vec"
GCIDE = Path("/usr/share/dictd/gcide.dict.dz")


def prepare_text() -> Path:
    text = OUT / "gcide.txt"
    if text.exists():
        return text
    OUT.mkdir(parents=True, exist_ok=True)
    raw = gzip.open(GCIDE, "rt", encoding="utf-8", errors="replace").read()
    raw = re.sub(r"<[^>]*>", " ", raw)  # markup tags
    words = re.sub(r"[^a-z]+", " ", raw.lower()).split()
    with open(text, "w") as f:
        for i in range(0, len(words), 1000):
            f.write(" ".join(words[i:i + 1000]) + "\n")
    return text


GENSIM_CHILD = r"""
import logging, sys, re
from gensim.models import FastText, Word2Vec
logging.basicConfig(format="%(message)s", level=logging.INFO)
from gensim.models.word2vec import LineSentence
path, threads, out, epochs = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
source = {"corpus_file": path} if sys.argv[5] == "corpus_file" else {"sentences": LineSentence(path)}
sg, alpha, subwords = int(sys.argv[6]), float(sys.argv[7]), sys.argv[8] == "1"
kind, more = (FastText, {"min_n": 3, "max_n": 6, "bucket": SUBWORD_BUCKETS}) if subwords else (Word2Vec, {})
m = kind(**source, sg=sg, negative=5, window=5, vector_size=100, min_count=5,
         sample=1e-4, epochs=epochs, workers=threads, alpha=alpha, min_alpha=0.0001, **more)
m.wv.save_word2vec_format(out)
"""


# fastText's default `-bucket`, for both systems with --subwords.
SUBWORD_BUCKETS = 2_000_000


def gensim_run(text, threads, vectors, epochs, arch, lr, subwords, mode="corpus_file"):
    sg = "1" if arch == "skipgram" else "0"
    child = GENSIM_CHILD.replace("SUBWORD_BUCKETS", str(SUBWORD_BUCKETS))
    out, _, rss, cpu = run_measured([sys.executable, "-c", child, str(text), str(threads),
                                str(vectors), str(epochs), mode, sg, str(lr),
                                "1" if subwords else "0"])
    m = re.findall(r"training on ([\d,]+) raw words \(([\d,]+) effective words\) took "
                   r"([\d.]+)s, ([\d,]+) effective words/s", out)
    if not m:
        sys.exit("no throughput line in gensim's log:\n" + out[-2000:])
    raw, eff, secs, rate = m[-1]
    return {"words_per_s": float(rate.replace(",", "")), "seconds": float(secs),
            "effective_words": int(eff.replace(",", "")), "rss_mib": rss, "cpu_s": cpu}


def ours_run(hogwild, text, threads, config, feed, ckpt, epochs):
    out, _, rss, cpu = run_measured([hogwild, "train", "--config", config, "--feed", feed, str(text),
                                "--threads", str(threads), "--epochs", str(epochs), "--print-period", "0",
                                "--save", ckpt])
    # Per epoch, effective words: the run metric `effective_words` where the epoch line carries
    # it, else the mean kept words per sentence (`words`, after subsampling) times the sentences.
    found = re.findall(r"epoch \d+: (\d+) instances in ([\d.]+)s.*?  words ([\d.]+)"
                       r"(?:.*effective_words ([\d.]+))?", out)
    if len(found) != epochs:
        sys.exit(f"expected {epochs} epoch lines in hogwild's output:\n" + out[-2000:])
    secs = sum(float(f[1]) for f in found)
    eff = sum(float(f[3]) if f[3] else int(f[0]) * float(f[2]) for f in found)
    return {"words_per_s": eff / secs, "seconds": secs, "effective_words": int(eff),
            "rss_mib": rss, "cpu_s": cpu}


def analogies(vectors):
    from gensim.models import KeyedVectors
    from gensim.test.utils import datapath
    kv = KeyedVectors.load_word2vec_format(str(vectors))
    score, _ = kv.evaluate_word_analogies(datapath("questions-words.txt"))
    return 100.0 * score


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hogwild", required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--arch", choices=["skipgram", "cbow"], default="skipgram")
    ap.add_argument("--lr", type=float, default=0.025)
    ap.add_argument("--subwords", action="store_true",
                    help="character n-grams (minn 3, maxn 6, 2,000,000 buckets): gensim's FastText")
    ap.add_argument("--gensim-iterable", action="store_true",
                    help="also train gensim once per thread count above 1 from a sentence iterable "
                         "(LineSentence) and report its analogy accuracy: with corpus_file and "
                         "several workers, each worker decays its learning rate by its own share "
                         "of the words against the whole corpus, so the rate stays higher than "
                         "the linear schedule; the iterable follows it")
    args = ap.parse_args()
    text = prepare_text()
    OUT.mkdir(parents=True, exist_ok=True)
    suffix = ("" if args.arch == "skipgram" else f"-{args.arch}") + ("-subwords" if args.subwords else "")
    subwords = (f"minn = 3\nmaxn = 6\nsubword_buckets = {SUBWORD_BUCKETS}\n"
                if args.subwords else "")
    config = OUT / f"model{suffix}.toml"
    config.write_text(f"""[model]
kind = "word2vec"
arch = "{args.arch}"
input = "text"
vocab_file = "{OUT / 'vocab.txt'}"
dim = 100
window = 5
negative = 5
min_count = 5
sample = 1e-4
{subwords}
[optimizer]
kind = "sgd"
lr = {args.lr}
""")
    feed = ROOT / "examples" / "word2vec" / "data.prototxt"
    load = os.getloadavg()
    thread_counts = [int(t) for t in args.threads.split(",")]
    results = {(name, t): [] for t in thread_counts for name in ["gensim", "hogwild"]}
    # Repeat by repeat, every thread count back to back: the ratios between thread counts then
    # compare runs made close together, as the ratios between systems do.
    for r in range(args.repeats):
        for threads in thread_counts:
            gv = OUT / f"gensim{suffix}-{threads}.txt"
            probe = core_to_core_ns() if threads > 1 else None
            g = gensim_run(text, threads, gv, args.epochs, args.arch, args.lr, args.subwords)
            g["core_to_core_ns"] = probe
            g["analogy"] = analogies(gv)
            results[("gensim", threads)].append(g)
            ck = OUT / f"hogwild{suffix}-{threads}.ckpt"
            probe = core_to_core_ns() if threads > 1 else None
            h = ours_run(args.hogwild, text, threads, config, feed, ck, args.epochs)
            ov = OUT / f"hogwild{suffix}-{threads}.txt"
            subprocess.run([args.hogwild, "export", "--model", str(ck), "-o", str(ov)],
                           check=True, capture_output=True)
            h["analogy"] = analogies(ov)
            h["core_to_core_ns"] = probe
            results[("hogwild", threads)].append(h)
            print(f"threads {threads} repeat {r + 1}: gensim {g['words_per_s']:.0f} w/s "
                  f"analogy {g['analogy']:.1f} %, hogwild {h['words_per_s']:.0f} w/s "
                  f"analogy {h['analogy']:.1f} %"
                  + (f" (core-to-core round trip before each: {g['core_to_core_ns']:.0f}, "
                     f"{h['core_to_core_ns']:.0f} ns)" if threads > 1 else ""), flush=True)
    iterable = {}
    if args.gensim_iterable:
        for threads in [t for t in thread_counts if t > 1]:
            gv = OUT / f"gensim{suffix}-iterable-{threads}.txt"
            g = gensim_run(text, threads, gv, args.epochs, args.arch, args.lr, args.subwords,
                           mode="iterable")
            iterable[threads] = (g, analogies(gv))
    rows = []
    for (name, threads), runs in results.items():
        rows.append({
            "system": name, "threads": threads,
            "words_per_s": statistics.median(r["words_per_s"] for r in runs),
            "all_words_per_s": [round(r["words_per_s"]) for r in runs],
            "effective_words": runs[-1]["effective_words"],
            "analogy": statistics.median(r["analogy"] for r in runs),
            "all_analogy": [round(r["analogy"], 1) for r in runs],
            "rss_mib": max(r["rss_mib"] for r in runs),
            "cpu_s": statistics.median(r["cpu_s"] for r in runs),
            "all_cpu_s": [round(r["cpu_s"], 1) for r in runs],
            "core_to_core_ns": [r["core_to_core_ns"] for r in runs if r["core_to_core_ns"]],
        })
    by = {(r["system"], r["threads"]): r for r in rows}
    lines = [f"{args.arch}{' with subwords (minn 3, maxn 6, 2M buckets)' if args.subwords else ''}, "
             f"lr {args.lr}, {args.epochs} epoch(s), {args.repeats} repeats",
             "",
             "| system | threads | effective words/s (median) | runs | process CPU s (median) | analogy acc. % (median) | runs | peak RSS MiB |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['system']} | {r['threads']} | {r['words_per_s']:,.0f} | "
                     f"{', '.join(f'{x:,}' for x in r['all_words_per_s'])} | {r['cpu_s']:.1f} | "
                     f"{r['analogy']:.1f} | {', '.join(f'{x:.1f}' for x in r['all_analogy'])} | "
                     f"{r['rss_mib']:.0f} |")
    lines.append("")
    for t in sorted({r["threads"] for r in rows}):
        h, g = by[("hogwild", t)], by[("gensim", t)]
        lines.append(f"- {t} thread(s): hogwild / gensim throughput {h['words_per_s'] / g['words_per_s']:.2f}x, "
                     f"analogy {h['analogy'] - g['analogy']:+.1f} points")
    for threads, (g, analogy) in iterable.items():
        lines.append(f"- gensim from a sentence iterable (linear learning-rate schedule), {threads} "
                     f"threads: analogy {analogy:.1f} %, {g['words_per_s']:,.0f} effective words/s "
                     f"(one run)")
    for name in ["hogwild", "gensim"]:
        if (name, 1) in by and (name, 2) in by:
            two, one = by[(name, 2)], by[(name, 1)]
            paired = statistics.median(a / b for a, b in zip(two["all_words_per_s"], one["all_words_per_s"]))
            lines.append(f"- {name}: 2 threads / 1 thread {two['words_per_s'] / one['words_per_s']:.2f}x "
                         f"(median of the repeats' own ratios {paired:.2f}x; repeats "
                         f"{', '.join(f'{a / b:.2f}' for a, b in zip(two['all_words_per_s'], one['all_words_per_s']))}; "
                         f"process CPU s at 1 / 2 threads {one['all_cpu_s']} / {two['all_cpu_s']}; "
                         f"core-to-core round trip before each 2-thread run "
                         f"{', '.join(f'{x:.0f}' for x in two['core_to_core_ns'])} ns)")
    lines.append(f"- load average at start: {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (2 cores)")
    table = "\n".join(lines)
    print(table)
    (OUT / f"results{suffix}.md").write_text(table + "\n")
    (OUT / f"results{suffix}.json").write_text(json.dumps(rows, indent=1))
    if args.subwords:
        return
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(5, 3.2))
        ts = sorted({r["threads"] for r in rows})
        for name in ["hogwild", "gensim"]:
            ax.plot(ts, [by[(name, t)]["words_per_s"] / 1e3 for t in ts], "o-", label=name)
        ax.set_xlabel("threads")
        ax.set_ylabel("effective k words/s")
        ax.set_xticks(ts)
        ax.set_title(f"word2vec {'SGNS' if args.arch == 'skipgram' else 'CBOW'} on GCIDE (median)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(ROOT / "docs" / f"bench_word2vec{suffix.replace('-', '_')}.png", dpi=100)
    except ImportError:
        print("matplotlib missing: no plot")


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    main()
