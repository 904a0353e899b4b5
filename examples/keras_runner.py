"""A Keras 3 model trained by `hogwild tf-train` and read back into Keras, end to end.

    python examples/keras_runner.py [--hogwild PATH] [--out DIR] [--train FILE ...] [--test FILE]

1. A functional CTR model over examples/ctr's slots (an embedding per field: `user`, `item` and
   `hour` one id per instance, `site` a ragged input; concatenated -> 16 relu -> sigmoid) with the
   project's Keras AdamAsync and binary cross-entropy is exported with
   `adam_async.runner.export_keras` to a TF2 SavedModel (signatures `train` and `eval`, inputs
   named by slot) in OUT/exported.
2. `hogwild tf-train --graph OUT/exported --threads 2 --save OUT/trained --eval TEST` trains it
   from the MultiSlot files and evaluates it.
3. A new instance of the model and optimizer loads the trained weights
   (`adam_async.runner.load_keras_weights`) and predicts TEST in the data feed's batches.

It exits non-zero, saying which, when a step fails or disagrees: a variable's AdamAsync beta
powers do not count every batch the runner trained (so a step skipped a variable), Keras' loss
and accuracy on TEST are not what `--eval` printed (rtol 1e-5), or the loss did not go down from
the untrained model's.
"""

import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile

import keras
import numpy as np
import tensorflow as tf

from adam_async import runner
from adam_async.keras import AdamAsync

ROOT = pathlib.Path(__file__).resolve().parents[1]
CTR = ROOT / "examples/ctr"
FIELDS = {"user": 1000, "item": 500, "hour": 24, "site": 50}  # examples/ctr/generate.py's ids


class MeanOverIds(keras.layers.Layer):
    """The mean of a ragged input's embeddings per instance: (B, None, d) -> (B, d)."""

    def call(self, x):
        return tf.reduce_mean(x, axis=1)


def make_model(seed=1):
    """The functional model; inputs named after the slots that feed them."""
    keras.utils.set_random_seed(seed)
    inputs = {f: keras.Input(shape=(), dtype="int64", name=f) for f in ("user", "item", "hour")}
    inputs["site"] = keras.Input(shape=(None,), dtype="int64", name="site", ragged=True)
    pooled = []
    for field, vocab in FIELDS.items():
        emb = keras.layers.Embedding(vocab, 8, name=f"{field}_embedding")(inputs[field])
        pooled.append(MeanOverIds()(emb) if field == "site" else emb)
    hidden = keras.layers.Dense(16, activation="relu")(keras.layers.Concatenate()(pooled))
    output = keras.layers.Dense(1, activation="sigmoid")(hidden)
    return keras.Model(inputs, output)


def make_optimizer():
    return AdamAsync(learning_rate=0.01)


def batches(path, size):
    """The data feed's batches of one MultiSlot file (`size` lines each, in order): slot -> ids
    (every field of examples/ctr has one id per instance)."""
    rows = np.array([list(map(int, line.split())) for line in path.read_text().splitlines()],
                    np.int64)
    for start in range(0, len(rows), size):
        yield dict(zip(list(FIELDS) + ["label"], rows[start:start + size, 1::2].T))


def keras_eval(model, path, size):
    """Loss and accuracy of `model` on `path` as the runner averages them: each batch's mean,
    weighted by the batch's instances."""
    values, weights = [], []
    for ids in batches(path, size):
        x = {f: tf.constant(ids[f]) for f in ("user", "item", "hour")}
        x["site"] = tf.RaggedTensor.from_row_splits(ids["site"], np.arange(len(ids["site"]) + 1))
        y = ids["label"].astype(np.float32)[:, None]
        p = model(x, training=False)
        values.append([float(keras.losses.binary_crossentropy(y, p).numpy().mean()),
                       float(keras.metrics.binary_accuracy(y, p).numpy().mean())])
        weights.append(len(y))
    return np.average(values, axis=0, weights=weights)


def powers(updates, beta1=0.9, beta2=0.999):
    """AdamAsync's beta1 and beta2 powers after `updates` updates, multiplied in float32 as the
    update op does (starting at beta1 and beta2)."""
    b1, b2 = np.float32(beta1), np.float32(beta2)
    for _ in range(updates):
        b1, b2 = b1 * np.float32(beta1), b2 * np.float32(beta2)
    return float(b1), float(b2)


def miscounted_powers(optimizer, steps):
    """The AdamAsync power variables that did not advance once per step (each step updates every
    variable of this model): "name: value" strings."""
    want = dict(zip(("beta1_power", "beta2_power"), powers(steps)))
    wrong = []
    for var in optimizer.variables:
        kind = next((k for k in want if var.name.endswith(k)), None)
        if kind and float(var.numpy()) != want[kind]:
            wrong.append(f"{var.name}: {float(var.numpy())!r}, want {want[kind]!r}")
    return wrong


def summary(stdout, what):
    """`<what>: batches B  instances N ... loss X  accuracy Y` from the runner's stdout."""
    for line in stdout.splitlines():
        if line.startswith(f"{what}:"):
            pairs = re.findall(r"(\w+) (-?[\d.]+(?:e-?\d+)?)", line.split(":", 1)[1])
            return {k: float(v) for k, v in pairs}
    raise SystemExit(f"no `{what}:` line in hogwild tf-train's output:\n{stdout}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hogwild", default="hogwild",
                   help="the hogwild binary (built with --features tf)")
    p.add_argument("--op-library", default=str(ROOT / "build/plugin/libadam_async_ops.so"),
                   help="the AdamAsync op library (make plugin)")
    p.add_argument("--out", help="directory for the SavedModels (default: a new temp dir)")
    p.add_argument("--train", nargs="+", default=[str(CTR / "train.txt")],
                   help="MultiSlot training files")
    p.add_argument("--test", default=str(CTR / "test.txt"), help="MultiSlot evaluation file")
    p.add_argument("--feed", default=str(CTR / "data.prototxt"), help="data feed description")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    out = pathlib.Path(a.out or tempfile.mkdtemp(prefix="keras_runner."))
    test = pathlib.Path(a.test)
    batch = int(re.search(r"batch_size:\s*(\d+)", pathlib.Path(a.feed).read_text()).group(1))

    model, optimizer = make_model(), make_optimizer()
    untrained_loss, _ = keras_eval(model, test, batch)
    exported = runner.export_keras(out / "exported", model, "binary_crossentropy", optimizer,
                                   a.feed, label="label",
                                   metrics={"accuracy": keras.metrics.binary_accuracy})
    print(f"exported {exported} (loss on {test.name} before training: {untrained_loss:.6f})")

    trained = out / "trained"
    cmd = [a.hogwild, "tf-train", "--graph", str(exported), "--op-library", a.op_library,
           "--feed", a.feed, "--threads", str(a.threads), "--epochs", str(a.epochs),
           "--print-period", "0", "--save", str(trained), "--eval", str(test), *a.train]
    print("$", " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True,
                       env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    sys.stdout.write(r.stdout)
    if r.returncode != 0:
        raise SystemExit(f"hogwild tf-train failed ({r.returncode}):\n{r.stderr}")
    train, ev = summary(r.stdout, "train"), summary(r.stdout, "eval")

    model, optimizer = make_model(seed=2), make_optimizer()  # other initial weights
    runner.load_keras_weights(model, trained, optimizer)
    loss, accuracy = keras_eval(model, test, batch)
    print(f"keras after loading {trained}: loss {loss:.8f}  accuracy {accuracy:.8f}")

    failures = []
    # AdamAsync's powers advance with a compare-and-swap inside the update op, so they count
    # every step of every thread. (Keras' own optimizer.iterations does not: its assign_add is
    # a read and an assign, and concurrent steps lose increments.)
    wrong = miscounted_powers(optimizer, int(train["batches"]))
    if wrong:
        failures.append(f"AdamAsync powers that do not count the runner's {int(train['batches'])} "
                        f"steps: {'; '.join(wrong[:3])}")
    if not np.isclose(loss, ev["loss"], rtol=1e-5, atol=0):
        failures.append(f"keras loss {loss:.8f} != the runner's eval loss {ev['loss']:.8f}")
    if not np.isclose(accuracy, ev["accuracy"], rtol=1e-5, atol=0):
        failures.append(f"keras accuracy {accuracy:.8f} != the runner's eval accuracy "
                        f"{ev['accuracy']:.8f}")
    if not loss < untrained_loss:
        failures.append(f"the loss did not go down: {untrained_loss:.6f} -> {loss:.6f}")
    if failures:
        raise SystemExit("keras_runner: " + "; ".join(failures))
    print("keras_runner: the Keras model predicts what hogwild tf-train measured")


if __name__ == "__main__":
    main()
