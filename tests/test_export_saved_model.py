"""`hogwild export --format saved-model`: every native model kind, exported as a TensorFlow
SavedModel and loaded by `tf.saved_model.load` in a process without the op library
(tests/export_predict.py), gives `hogwild predict`'s probabilities within 1e-5 on the
walk-throughs' test files (examples/text, examples/ctr); word2vec's lookup gives the vectors
`--format word2vec` writes.

`predict` prints six decimals, so the probabilities agree to its rounding (5e-7) plus the float
rounding of a different summation order; the tolerance is 1e-5 absolute.
"""

import json
import os
import re
import pathlib
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
_PKG = os.environ.get("PKG_CONFIG_PATH", "")
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
           PKG_CONFIG_PATH=_PKG if f"{ROOT}/build/tf" in _PKG.split(":")
           else f"{ROOT}/build/tf:{_PKG}")
TOLERANCE = 1e-5

# Bag-of-words variants: lines added to examples/text/model.toml's [model] section, and the
# optimizer when not its adagrad. Every loss, bigrams or none, subwords, bias, sum pooling.
BOW = {
    "softmax": ([], None),
    "hs": (['loss = "hs"'], None),
    "ns": (['loss = "ns"'], "sgd"),
    "ova": (['loss = "ova"'], "adam_async"),
    "bias_sum": (["bias = true", 'pool = "sum"'], None),
    "plain": (["bigram_buckets = 0", "end_of_text = false"], None),
    "subwords": (["subword_buckets = 2000"], None),
}

# CTR variants: (config, data kind): the walk-through's configurations on their data.
CTR = {
    "lr": ("lr.toml", "txt"),
    "fm_field_dims": ("fm.toml", "txt"),
    "ffm_named": (None, "txt"),
    "lr_libsvm_values": ("libsvm.toml", "svm"),
    "lr_vw_weights": ("vw.toml", "vw"),
    "fm_libffm_numbers": ("libffm.toml", "ffm"),
    "ffm_libffm_numbers": ("ffm.toml", "ffm"),
}

FFM_NAMED = """[model]
kind = "ffm"
buckets = 4096
fields = ["user", "item", "hour", "site"]
init_scale = 0.1

[optimizer]
kind = "adagrad"
lr = 0.2
"""


def hogwild(binary, *args, cwd):
    r = subprocess.run([str(binary), *map(str, args)], env=ENV, cwd=cwd,
                       capture_output=True, text=True)
    assert r.returncode == 0, f"hogwild {' '.join(map(str, args))}:\n{r.stderr}"
    return r


@pytest.fixture(scope="module")
def hogwild_bin():
    """The CLI with the tf feature (incremental: quick once built)."""
    subprocess.run(["cargo", "build", "-q", "-p", "hogwild-cli", "--features", "tf"],
                   cwd=ROOT, env=ENV, check=True)
    return ROOT / "target/debug/hogwild"


def bow_config(lines, optimizer):
    """examples/text/model.toml with `lines` (`key = value`) replacing or added to [model]."""
    text = (EXAMPLES / "text/model.toml").read_text()
    for line in lines:
        key = line.split(" = ")[0]
        text, n = re.subn(rf"^{key} = .*$", line, text, flags=re.M)
        if n == 0:
            text = text.replace("[optimizer]", f"{line}\n\n[optimizer]")
    if optimizer == "sgd":
        text = text.replace('kind = "adagrad"', 'kind = "sgd"')
    elif optimizer == "adam_async":
        text = text.replace('kind = "adagrad"\nlr = 0.5', 'kind = "adam_async"\nlr = 0.01')
    return text


@pytest.fixture(scope="module")
def exported(hogwild_bin, tmp_path_factory):
    """Trains every variant briefly, exports it, predicts natively, and applies every SavedModel
    in one process without the op library; returns {name: (native, exported outputs, extra)}."""
    d = tmp_path_factory.mktemp("export")
    run = lambda *a: hogwild(hogwild_bin, *a, cwd=d)  # noqa: E731
    jobs, native = [], {}

    # Text: the walk-through's conversion, then the same with subwords; pairs for ova.
    (d / "sw").mkdir()
    run("convert", "--from", "fasttext", EXAMPLES / "text/train.txt", "-o", "train.ms",
        "--build-vocab", "--vocab", "vocab.txt")
    run("convert", "--from", "fasttext", EXAMPLES / "text/test.txt", "-o", "test.ms",
        "--vocab", "vocab.txt")
    run("convert", "--from", "fasttext", EXAMPLES / "text/train.txt", "-o", "sw/train.ms",
        "--build-vocab", "--vocab", "sw/vocab.txt", "--minn", "3", "--maxn", "5",
        "--subword-buckets", "2000")
    run("convert", "--from", "fasttext", EXAMPLES / "text/test.txt", "-o", "sw/test.ms",
        "--vocab", "sw/vocab.txt")
    for name, (lines, optimizer) in BOW.items():
        sub = "sw/" if name == "subwords" else ""
        (d / f"{name}.toml").write_text(bow_config(lines, optimizer))
        run("train", "--config", f"{name}.toml", "--feed", f"{sub}data.prototxt",
            f"{sub}train.ms", "--epochs", "2", "--threads", "1", "--labels",
            f"{sub}vocab.txt", "--save", f"{name}.ckpt", "--quiet")
        run("export", "--model", f"{name}.ckpt", "-o", f"{name}.sm")
        run("predict", "--model", f"{name}.ckpt", "--feed", f"{sub}data.prototxt",
            f"{sub}test.ms", "--all-probs", "-o", f"{name}.pred")
        native[name] = np.array([[float(x) for x in line.split("\t")[1].split()]
                                 for line in (d / f"{name}.pred").read_text().splitlines()])
        jobs.append({"model": str(d / f"{name}.sm"), "feed": str(d / f"{sub}data.prototxt"),
                     "data": str(d / f"{sub}test.ms"), "out": str(d / f"{name}.npz")})
    # An id past the words and n-gram buckets, and one instance of none.
    jobs.append({"model": str(d / "subwords.sm"), "out": str(d / "bad_id.npz"),
                 "error": {"words": [3, 10**6], "words/row_splits": [0, 2]}})

    # CTR: the walk-through's data in each format.
    for fmt, ext in (("libsvm", "svm"), ("vw", "vw"), ("libffm", "ffm")):
        (d / fmt).mkdir()
        for part in ("train", "test"):
            run("convert", "--from", fmt, EXAMPLES / f"ctr/{part}.{ext}", "-o",
                f"{fmt}/{part}.ms")
    (d / "ffm_named.toml").write_text(FFM_NAMED)
    dirs = {"txt": (EXAMPLES / "ctr", "txt"), "svm": (d / "libsvm", "ms"),
            "vw": (d / "vw", "ms"), "ffm": (d / "libffm", "ms")}
    for name, (config, kind) in CTR.items():
        src, ext = dirs[kind]
        config = d / "ffm_named.toml" if config is None else EXAMPLES / "ctr" / config
        feed = src / "data.prototxt"
        run("train", "--config", config, "--feed", feed, src / f"train.{ext}", "--epochs", "1",
            "--threads", "1", "--save", f"{name}.ckpt", "--quiet")
        run("export", "--model", f"{name}.ckpt", "--feed", feed, "-o", f"{name}.sm")
        run("predict", "--model", f"{name}.ckpt", "--feed", feed, src / f"test.{ext}",
            "-o", f"{name}.pred")
        native[name] = np.loadtxt(d / f"{name}.pred")
        jobs.append({"model": str(d / f"{name}.sm"), "feed": str(feed),
                     "data": str(src / f"test.{ext}"), "out": str(d / f"{name}.npz")})

    # Values that are not one per id, a field number past num_fields.
    jobs.append({"model": str(d / "lr_libsvm_values.sm"), "out": str(d / "bad_values.npz"),
                 "error": {"ids": [1, 2], "ids/row_splits": [0, 2], "values": [1.0],
                           "values/row_splits": [0, 1]}})
    jobs.append({"model": str(d / "ffm_libffm_numbers.sm"), "out": str(d / "bad_field.npz"),
                 "error": {"ids": [1, 2], "ids/row_splits": [0, 2], "values": [1.0, 1.0],
                           "values/row_splits": [0, 2], "fields": [0, 9],
                           "fields/row_splits": [0, 2]}})

    # word2vec: the vectors of every word (and one unknown word), against the text export.
    (d / "text.txt").write_text("".join(
        line.split(" ", 1)[1] for line in (EXAMPLES / "text/train.txt").open()))
    (d / "build/word2vec").mkdir(parents=True)
    for name in ("model", "subwords"):
        w = f"word2vec_{name}"
        run("train", "--config", EXAMPLES / f"word2vec/{name}.toml", "--feed",
            EXAMPLES / "word2vec/data.prototxt", "text.txt", "--epochs", "1", "--threads", "1",
            "--save", f"{w}.ckpt", "--quiet")
        run("export", "--model", f"{w}.ckpt", "-o", f"{w}.txt")
        run("export", "--model", f"{w}.ckpt", "--format", "saved-model", "-o", f"{w}.sm")
        lines = (d / f"{w}.txt").read_text().splitlines()[1:]
        words = [line.split()[0] for line in lines]
        native[w] = (words, np.array([[float(x) for x in line.split()[1:]] for line in lines]))
        jobs.append({"model": str(d / f"{w}.sm"), "words": words + ["no-such-word"],
                     "out": str(d / f"{w}.npz")})

    (d / "jobs.json").write_text(json.dumps(jobs))
    # A process of its own, with neither the op library nor the adam_async package on its path.
    env = {k: v for k, v in ENV.items() if k not in ("PYTHONPATH", "ADAM_ASYNC_LIBRARY")}
    r = subprocess.run([sys.executable, str(ROOT / "tests/export_predict.py"),
                        str(d / "jobs.json")], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = {pathlib.Path(j["out"]).stem: dict(np.load(j["out"])) for j in jobs}
    return d, native, out


@pytest.mark.parametrize("name", list(BOW))
def test_bow_saved_model_predicts_as_hogwild_predict(exported, name):
    d, native, out = exported
    got = out[name]
    assert got["probabilities"].shape == native[name].shape, name
    np.testing.assert_allclose(got["probabilities"], native[name], rtol=0, atol=TOLERANCE,
                               err_msg=f"bow {name}")
    # The label names the model keeps, in class order, on every row.
    sub = "sw/" if name == "subwords" else ""
    names = [line.split("\t")[1] for line in (d / f"{sub}vocab.txt").read_text().splitlines()
             if line.startswith("label\t")]
    assert got["labels"][0].tolist() == names, name
    assert got["labels"].shape == got["probabilities"].shape
    inputs = {"words", "words/row_splits"}
    assert set(got["inputs"]) == inputs, name


@pytest.mark.parametrize("name", list(CTR))
def test_ctr_saved_model_predicts_as_hogwild_predict(exported, name):
    _, native, out = exported
    np.testing.assert_allclose(out[name]["probability"], native[name], rtol=0, atol=TOLERANCE,
                               err_msg=f"ctr {name}")


def test_ctr_inputs_are_the_slots_the_model_reads(exported):
    _, _, out = exported
    plain = {s for f in ("user", "item", "hour", "site") for s in (f, f"{f}/row_splits")}
    assert set(out["lr"]["inputs"]) == plain
    libffm = {s for f in ("ids", "values", "fields") for s in (f, f"{f}/row_splits")}
    assert set(out["ffm_libffm_numbers"]["inputs"]) == libffm
    # VW's importance weights are a training input only.
    vw = {s for f in ("ids", "values") for s in (f, f"{f}/row_splits")}
    assert set(out["lr_vw_weights"]["inputs"]) == vw


@pytest.mark.parametrize("name", ["model", "subwords"])
def test_word2vec_lookup_gives_the_exported_vectors(exported, name):
    _, native, out = exported
    w = f"word2vec_{name}"
    words, vectors = native[w]
    got = out[w]
    # The text export prints six decimals.
    np.testing.assert_allclose(got["vectors"][:-1], vectors, rtol=0, atol=TOLERANCE,
                               err_msg=w)
    assert got["known"].tolist() == [True] * len(words) + [False]
    assert not got["vectors"][-1].any()


def test_an_id_out_of_range_fails_with_the_slot_and_the_range(exported):
    _, _, out = exported
    message = str(out["bad_id"]["error"])
    # (TensorFlow's Assert escapes quotes: the messages name slots without them.)
    assert "slot words: a word id is out of range (vocab = 68 words, then " \
           "subword_buckets = 2000 n-gram buckets)" in message, message


@pytest.mark.parametrize("job,expected", [
    ("bad_values", "slot values: the values of slot ids are not one per id"),
    ("bad_field", "slot fields: a field number is out of range: the model has num_fields = 4 "
                  "(fields 0 to 3)"),
])
def test_ctr_inputs_that_do_not_fit_fail_with_the_slot(exported, job, expected):
    _, _, out = exported
    message = str(out[job]["error"])
    assert expected in message, message
