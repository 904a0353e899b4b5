"""`hogwild tf-train` on the graphs users have: a compat.v1 Wide & Deep with two optimizers, a TF1
SavedModel (SavedModelBuilder, a ragged placeholder) and a TF2 SavedModel (tf.saved_model.save with
`train` and `eval` signatures, a tf.RaggedTensorSpec argument), each trained at 2 threads from
MultiSlot files and read back in Python; and the errors of what the runner refuses
(docs/runner-contract.md).
"""

import re

import numpy as np
import pytest
import tensorflow as tf

from test_runner import BATCH, hogwild_bin, read_batches, summary, tf_train, write_data  # noqa: F401

VOCAB, DIM, LINES, FILES, EPOCHS = 200, 8, 96, 2, 2
# Batches of one pass: every file holds a multiple of BATCH lines.
STEPS = EPOCHS * FILES * LINES // BATCH


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    return d, write_data(d, files=FILES, lines=LINES, vocab=VOCAB)


def bag(emb, values, row_splits):
    """Mean of each instance's embedding rows."""
    rows = tf.gather(emb, values)
    segment = tf.ragged.row_splits_to_segment_ids(row_splits)
    batch = tf.shape(row_splits, out_type=tf.int64)[0] - 1
    count = tf.maximum(tf.cast(row_splits[1:] - row_splits[:-1], tf.float32), 1.0)
    return tf.math.unsorted_segment_sum(rows, segment, batch) / tf.expand_dims(count, 1)


def logistic(logit, label):
    y = tf.cast(label, tf.float32)
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logit))
    accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.cast(logit > 0, tf.float32), y), tf.float32))
    return loss, accuracy


def wide_and_deep(words, row_splits, label):
    """The wide part (one weight per word) and the deep part (embedding bag -> hidden layer), each
    with its own optimizer and step counter, as two minimize() calls make them."""
    init = tf.compat.v1.random_uniform_initializer(-0.1, 0.1, seed=1)
    wide_w = tf.compat.v1.get_variable("wide/w", [VOCAB, 1], initializer=init)
    emb = tf.compat.v1.get_variable("deep/emb", [VOCAB, DIM], initializer=init)
    hidden = tf.compat.v1.get_variable("deep/hidden", [DIM, 4], initializer=init)
    out = tf.compat.v1.get_variable("deep/out", [4, 1], initializer=init)
    wide = bag(wide_w, words, row_splits)
    deep = tf.matmul(tf.nn.relu(tf.matmul(bag(emb, words, row_splits), hidden)), out)
    logit = tf.squeeze(wide + deep, 1)
    loss, accuracy = logistic(logit, label)
    counters = {}
    for part, opt in [("wide", tf.compat.v1.train.FtrlOptimizer(0.1, name="WideFtrl")),
                      ("deep", tf.compat.v1.train.AdamOptimizer(0.01, name="DeepAdam"))]:
        counters[part] = tf.compat.v1.get_variable(
            f"{part}/step", [], tf.int64, initializer=tf.compat.v1.zeros_initializer(),
            trainable=False)
        variables = tf.compat.v1.trainable_variables(part)
        opt.minimize(loss, var_list=variables, global_step=counters[part], name=f"{part}_train")
    return tf.identity(loss, "loss"), tf.identity(accuracy, "accuracy"), counters


def signature(inputs, outputs):
    info = tf.compat.v1.saved_model.utils.build_tensor_info
    return tf.compat.v1.saved_model.signature_def_utils.build_signature_def(
        inputs={k: info(v) for k, v in inputs.items()},
        outputs={k: info(v) for k, v in outputs.items()}, method_name="hogwild/train")


def export_meta(graph, path, sig):
    with graph.as_default():
        saver = tf.compat.v1.train.Saver()
        tf.compat.v1.add_to_collection("init_op", tf.compat.v1.global_variables_initializer())
        meta = saver.export_meta_graph()
    meta.signature_def["train"].CopyFrom(sig)
    path.write_bytes(meta.SerializeToString())


def test_a_wide_and_deep_graph_runs_both_optimizers_in_every_step(hogwild_bin, data):
    d, files = data
    g = tf.Graph()
    with g.as_default():
        words = tf.compat.v1.placeholder(tf.int64, [None], "words")
        splits = tf.compat.v1.placeholder(tf.int64, [None], "words_row_splits")
        label = tf.compat.v1.placeholder(tf.int64, [None], "label")
        loss, accuracy, _ = wide_and_deep(words, splits, label)
        sig = signature({"words": words, "words/row_splits": splits, "label": label},
                        {"loss": loss, "accuracy": accuracy})
        assert len(g.get_collection("train_op")) == 2
    graph = d / "wide_deep.meta"
    export_meta(g, graph, sig)
    ckpt = d / "wide_deep_ckpt/model"
    r = tf_train(hogwild_bin, "--graph", graph, "--feed", d / "data.prototxt", "--threads", 2,
                 "--epochs", EPOCHS, "--print-period", 0, "--save", ckpt, *files)
    assert summary(r.stdout, "train")["batches"] == STEPS

    values = dict(tf.train.list_variables(str(ckpt)))
    reader = tf.train.load_checkpoint(str(ckpt))
    # Each optimizer counts its own steps (assign_add on a resource variable: exact at 2 threads).
    assert reader.get_tensor("wide/step") == STEPS
    assert reader.get_tensor("deep/step") == STEPS
    # Adam's powers moved from their start (0.9, 0.999): the deep part trained too. Two threads
    # may lose a power update to a race (read, multiply, assign), never most of them.
    beta1 = reader.get_tensor(next(k for k in values if k.endswith("beta1_power")))
    assert beta1 < 0.9 ** (STEPS // 2), beta1
    assert "wide/w/WideFtrl" in values and "deep/emb/DeepAdam" in values


def test_a_graph_without_a_train_op_is_refused(hogwild_bin, data, tmp_path):
    d, files = data
    g = tf.Graph()
    with g.as_default():
        words = tf.compat.v1.placeholder(tf.int64, [None], "words")
        label = tf.compat.v1.placeholder(tf.int64, [None], "label")
        w = tf.compat.v1.get_variable("w", [VOCAB])
        loss = tf.reduce_mean(tf.gather(w, words)) + tf.reduce_mean(tf.cast(label, tf.float32))
        sig = signature({"words": words, "label": label}, {"loss": loss})
    graph = tmp_path / "no_train.meta"
    export_meta(g, graph, sig)
    r = tf_train(hogwild_bin, "--graph", graph, "--feed", d / "data.prototxt", *files,
                 check=False)
    assert r.returncode != 0
    assert f"{graph}: no train op: the \"train_op\" collection is missing or empty" in r.stderr


def tf1_saved_model(path, ragged_rank=1, vector_output=False):
    """A TF1 SavedModel (SavedModelBuilder, tag "train") of the Wide & Deep model whose words come
    through a tf.compat.v1.ragged.placeholder."""
    g = tf.Graph()
    with g.as_default():
        words = tf.compat.v1.ragged.placeholder(tf.int64, ragged_rank, [], name="words")
        label = tf.compat.v1.placeholder(tf.int64, [None], "label")
        flat = words.values if ragged_rank > 1 else words
        loss, accuracy, counters = wide_and_deep(flat.values, flat.row_splits, label)
        outputs = {"loss": loss, "accuracy": accuracy}
        if vector_output:
            outputs["per_word"] = tf.cast(flat.values, tf.float32)
        sig = signature({"words": words, "label": label}, outputs)
        # As the Estimator's SavedModel export writes it: both minimize() ops, grouped.
        tf.compat.v1.add_to_collection("saved_model_train_op",
                                       tf.group(*g.get_collection("train_op")))
        with tf.compat.v1.Session(graph=g) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            builder = tf.compat.v1.saved_model.Builder(str(path))
            builder.add_meta_graph_and_variables(
                sess, [tf.saved_model.TRAINING], signature_def_map={"train": sig})
            builder.save()
    return counters


def evaluate_tf1(path, tags, batches):
    """The runner's averaging over batches of the `train` signature's outputs, in Python."""
    g = tf.Graph()
    with g.as_default(), tf.compat.v1.Session(graph=g) as sess:
        meta = tf.compat.v1.saved_model.load(sess, tags, str(path))
        sig = meta.signature_def["train"]
        words = sig.inputs["words"].composite_tensor.components
        fetch = [sig.outputs["loss"].name, sig.outputs["accuracy"].name]
        out = [sess.run(fetch, {words[0].name: w, words[1].name: s,
                                sig.inputs["label"].name: y}) for w, s, y in batches]
        variables = {v.op.name: v for v in tf.compat.v1.global_variables()}
        steps = [int(x) for x in sess.run([variables["wide/step"], variables["deep/step"]])]
    return np.array(out).mean(axis=0), steps


def test_a_tf1_saved_model_trains_and_saves_a_saved_model(hogwild_bin, data):
    d, files = data
    model = d / "tf1_saved_model"
    tf1_saved_model(model)
    out = d / "tf1_trained"
    out.mkdir()  # an empty directory is replaced
    r = tf_train(hogwild_bin, "--graph", model, "--feed", d / "data.prototxt", "--threads", 2,
                 "--epochs", EPOCHS, "--print-period", 0, "--save", out,
                 "--eval", files[0], "--eval", files[1], *files)
    assert f"saved SavedModel {out}" in r.stdout
    ev = summary(r.stdout, "eval")
    assert ev["accuracy"] > 0.8, r.stdout
    assert not (out / "fingerprint.pb").exists()

    (loss, accuracy), steps = evaluate_tf1(out, ["train"], read_batches(files))
    assert steps == [STEPS, STEPS]
    np.testing.assert_allclose(accuracy, ev["accuracy"], atol=1e-7)
    np.testing.assert_allclose(loss, ev["loss"], rtol=1e-5)
    # The original is untouched: its counters still read 0.
    assert evaluate_tf1(model, ["train"], read_batches(files)[:1])[1] == [0, 0]

    # Trained again into the same directory: replaced once the new one is complete.
    tf_train(hogwild_bin, "--graph", out, "--feed", d / "data.prototxt", "--threads", 2,
             "--print-period", 0, "--save", out, *files)
    assert evaluate_tf1(out, ["train"], read_batches(files)[:1])[1] == [STEPS * 3 // 2] * 2
    assert [p.name for p in d.iterdir() if p.name.startswith(".tf1_trained")] == []


# A top-level tf.RaggedTensorSpec argument: the signature takes `words` and `words_1` (its row
# splits, int32 here: the runner feeds them as the input's dtype).
WORDS = tf.RaggedTensorSpec([None, None], tf.int64, 1, tf.int32)


class Bow(tf.Module):
    """A TF2 bag-of-words logistic model trained by plain Adagrad in its `train` function."""

    def __init__(self):
        super().__init__()
        init = tf.random.stateless_uniform([VOCAB, DIM], [1, 2], -0.5, 0.5)
        self.emb = tf.Variable(init, name="emb")
        self.w = tf.Variable(tf.fill([DIM], 0.5), name="w")
        self.acc = [tf.Variable(tf.fill(v.shape, 0.1)) for v in (self.emb, self.w)]
        self.steps = tf.Variable(tf.constant(0, tf.int64), name="steps")

    def metrics(self, words, label):
        logit = tf.linalg.matvec(bag(self.emb, words.values, words.row_splits), self.w)
        return logistic(logit, label)

    @tf.function(input_signature=[WORDS, tf.TensorSpec([None], tf.int64, name="label")])
    def train(self, words, label):
        with tf.GradientTape() as tape:
            loss, accuracy = self.metrics(words, label)
        grads = tape.gradient(loss, [self.emb, self.w])
        for v, a, grad in zip([self.emb, self.w], self.acc, grads):
            grad = tf.convert_to_tensor(grad)
            a.assign_add(grad * grad)
            v.assign_sub(0.5 * grad / tf.sqrt(a))
        self.steps.assign_add(1)
        return {"loss": loss, "accuracy": accuracy}

    @tf.function(input_signature=[WORDS, tf.TensorSpec([None], tf.int64, name="label")])
    def eval(self, words, label):
        loss, accuracy = self.metrics(words, label)
        return {"loss": loss, "accuracy": accuracy}


def tf2_saved_model(path, eval_signature=True):
    m = Bow()
    signatures = {"train": m.train.get_concrete_function()}
    if eval_signature:
        signatures["eval"] = m.eval.get_concrete_function()
    tf.saved_model.save(m, str(path), signatures=signatures)


def test_a_tf2_saved_model_trains_through_its_train_signature(hogwild_bin, data):
    d, files = data
    model = d / "tf2_saved_model"
    tf2_saved_model(model)
    out = d / "tf2_trained"
    r = tf_train(hogwild_bin, "--graph", model, "--feed", d / "data.prototxt", "--threads", 2,
                 "--epochs", EPOCHS, "--print-period", 0, "--save", out,
                 "--eval", files[0], "--eval", files[1], *files)
    ev = summary(r.stdout, "eval")
    assert ev["accuracy"] > 0.8, r.stdout

    trained = tf.saved_model.load(str(out))
    assert trained.steps.numpy() == STEPS
    results = [trained.eval(tf.RaggedTensor.from_row_splits(w, s.astype(np.int32)), y)
               for w, s, y in read_batches(files)]
    loss = np.mean([x["loss"].numpy() for x in results])
    accuracy = np.mean([x["accuracy"].numpy() for x in results])
    np.testing.assert_allclose(accuracy, ev["accuracy"], atol=1e-7)
    np.testing.assert_allclose(loss, ev["loss"], rtol=1e-5)
    assert tf.saved_model.load(str(model)).steps.numpy() == 0


def test_a_tf2_saved_model_without_an_eval_signature_refuses_eval(hogwild_bin, data, tmp_path):
    d, files = data
    model = tmp_path / "no_eval"
    tf2_saved_model(model, eval_signature=False)
    r = tf_train(hogwild_bin, "--graph", model, "--feed", d / "data.prototxt", "--eval", files[0],
                 "--print-period", 1, *files, check=False)
    assert r.returncode != 0
    assert "cannot evaluate: a TF2 SavedModel's \"train\" signature updates the variables" \
        in r.stderr
    assert not re.search(r"step +\d", r.stderr)  # refused before training


def test_a_saved_model_pb_names_its_directory(hogwild_bin, data, tmp_path):
    d, files = data
    model = tmp_path / "sm"
    tf2_saved_model(model)
    r = tf_train(hogwild_bin, "--graph", model / "saved_model.pb", "--feed",
                 d / "data.prototxt", *files, check=False)
    assert r.returncode != 0
    assert (f"{model}/saved_model.pb: the saved_model.pb of a SavedModel; pass the SavedModel's "
            f"directory instead: --graph {model}") in r.stderr
    r = tf_train(hogwild_bin, "--graph", tmp_path, "--feed", d / "data.prototxt", *files,
                 check=False)
    assert f"{tmp_path}: a directory without saved_model.pb" in r.stderr


def test_save_refuses_a_directory_that_holds_no_saved_model(hogwild_bin, data, tmp_path):
    d, files = data
    model = tmp_path / "sm"
    tf2_saved_model(model)
    out = tmp_path / "notes"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    r = tf_train(hogwild_bin, "--graph", model, "--feed", d / "data.prototxt", "--save", out,
                 "--print-period", 1, *files, check=False)
    assert r.returncode != 0
    assert f"--save: {out}: exists and holds no SavedModel" in r.stderr
    assert (out / "keep.txt").read_text() == "mine"
    assert not re.search(r"step +\d", r.stderr)


def test_a_ragged_input_of_ragged_rank_2_is_refused_at_load(hogwild_bin, data, tmp_path):
    d, files = data
    tf1_saved_model(tmp_path / "sm", ragged_rank=2)
    r = tf_train(hogwild_bin, "--graph", tmp_path / "sm", "--feed", d / "data.prototxt", *files,
                 check=False)
    assert r.returncode != 0
    assert "input \"words\" is a tf.RaggedTensor of ragged rank 2; a slot is fed as ragged rank " \
        "1" in r.stderr


def test_a_vector_output_is_refused_at_load(hogwild_bin, data, tmp_path):
    d, files = data
    tf1_saved_model(tmp_path / "sm", vector_output=True)
    r = tf_train(hogwild_bin, "--graph", tmp_path / "sm", "--feed", d / "data.prototxt", *files,
                 check=False)
    assert r.returncode != 0
    assert re.search(r"output \"per_word\" \(\S+:0\) has shape \[\?\]; fetched values must be "
                     r"float32 scalars", r.stderr), r.stderr


def test_a_ragged_spec_inside_a_dict_is_refused_with_the_fix(hogwild_bin, data, tmp_path):
    d, files = data
    m = Bow()

    @tf.function(input_signature=[{"words": WORDS,
                                   "label": tf.TensorSpec([None], tf.int64, name="label")}])
    def train(batch):
        return m.train(batch["words"], batch["label"])

    tf.saved_model.save(m, str(tmp_path / "sm"), signatures={"train": train})
    r = tf_train(hogwild_bin, "--graph", tmp_path / "sm", "--feed", d / "data.prototxt", *files,
                 check=False)
    assert r.returncode != 0
    assert "slot \"words\": the graph has no input for this slot (its inputs: batch, batch_1, " \
        "label); mark the slot is_used: false (a tf.RaggedTensorSpec inside a dict or list " \
        "argument of a TF2 signature loses its key" in r.stderr, r.stderr


def test_keras_variables_saved_as_copies_are_named(hogwild_bin, data, tmp_path):
    import keras

    d, files = data
    model = keras.Sequential([keras.Input((), dtype="int64"), keras.layers.Embedding(VOCAB, 1)])
    opt = keras.optimizers.Adam(0.01)
    opt.build(model.trainable_variables)
    holder = tf.Module()
    holder.model, holder.opt = model, opt

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int64, name="words"),
                                  tf.TensorSpec([None], tf.int64, name="words/row_splits"),
                                  tf.TensorSpec([None], tf.int64, name="label")])
    def train(words, row_splits, label):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(model(words)) + 0.0 * tf.cast(tf.reduce_sum(label), tf.float32)
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                model.trainable_variables))
        return {"loss": loss + 0.0 * tf.cast(tf.reduce_sum(row_splits), tf.float32)}

    tf.saved_model.save(holder, str(tmp_path / "sm"), signatures={"train": train})
    r = tf_train(hogwild_bin, "--graph", tmp_path / "sm", "--feed", d / "data.prototxt", *files,
                 check=False)
    assert r.returncode != 0
    assert "signature \"train\" uses variables that the SavedModel does not save or restore" \
        in r.stderr
    assert "track the backing tf.Variables" in r.stderr


def test_a_keras_model_exported_with_its_backing_variables_trains(hogwild_bin, data, tmp_path):
    """A Keras 3 embedding model and Keras Adam, exported as docs/runner-contract.md says (the
    backing tf.Variables tracked on a tf.Module): trained at 2 threads, its optimizer counts every
    step, and Keras predicts with the trained weights what the runner's --eval measured."""
    import keras

    d, files = data
    emb, dense = keras.layers.Embedding(VOCAB, DIM), keras.layers.Dense(1)
    emb.build((None,))
    dense.build((None, DIM))
    opt = keras.optimizers.Adam(0.05)
    weights = emb.trainable_variables + dense.trainable_variables
    opt.build(weights)
    holder = tf.Module()
    holder.vars = [v.value for v in emb.variables + dense.variables + opt.variables]
    spec = [tf.TensorSpec([None], tf.int64, name="words"),
            tf.TensorSpec([None], tf.int64, name="words/row_splits"),
            tf.TensorSpec([None], tf.int64, name="label")]

    def metrics(words, row_splits, label):
        return logistic(dense(bag(emb.embeddings, words, row_splits))[:, 0], label)

    @tf.function(input_signature=spec)
    def train(words, row_splits, label):
        with tf.GradientTape() as tape:
            loss, accuracy = metrics(words, row_splits, label)
        opt.apply_gradients(zip(tape.gradient(loss, weights), weights))
        return {"loss": loss, "accuracy": accuracy}

    @tf.function(input_signature=spec)
    def evaluate(words, row_splits, label):
        loss, accuracy = metrics(words, row_splits, label)
        return {"loss": loss, "accuracy": accuracy}

    tf.saved_model.save(holder, str(tmp_path / "sm"),
                        signatures={"train": train, "eval": evaluate})
    out = tmp_path / "trained"
    r = tf_train(hogwild_bin, "--graph", tmp_path / "sm", "--feed", d / "data.prototxt",
                 "--threads", 2, "--epochs", EPOCHS, "--print-period", 0, "--save", out,
                 "--eval", files[0], "--eval", files[1], *files)
    ev = summary(r.stdout, "eval")
    assert ev["accuracy"] > 0.8, r.stdout

    trained = tf.saved_model.load(str(out)).vars
    for v, value in zip(emb.variables + dense.variables + opt.variables, trained):
        v.assign(value)
    assert int(opt.iterations.numpy()) == STEPS
    results = np.array([[float(x) for x in metrics(w, s, y)] for w, s, y in read_batches(files)])
    np.testing.assert_allclose(results[:, 1].mean(), ev["accuracy"], atol=1e-7)
    np.testing.assert_allclose(results[:, 0].mean(), ev["loss"], rtol=1e-5)


def test_the_saver_is_needed_only_to_save_and_the_init_op_only_without_restore(
        hogwild_bin, data, tmp_path):
    d, files = data
    g = tf.Graph()
    with g.as_default():
        words = tf.compat.v1.placeholder(tf.int64, [None], "words")
        splits = tf.compat.v1.placeholder(tf.int64, [None], "words_row_splits")
        label = tf.compat.v1.placeholder(tf.int64, [None], "label")
        loss, accuracy, _ = wide_and_deep(words, splits, label)
        sig = signature({"words": words, "words/row_splits": splits, "label": label},
                        {"loss": loss, "accuracy": accuracy})
        init = tf.compat.v1.global_variables_initializer()
        saver_def = tf.compat.v1.train.Saver().as_saver_def()
    feed = ["--feed", d / "data.prototxt", "--print-period", 1]

    def export(name, with_init, with_saver):
        with g.as_default():
            g.clear_collection("init_op")
            if with_init:
                tf.compat.v1.add_to_collection("init_op", init)
            meta = tf.compat.v1.train.export_meta_graph(
                graph=g, saver_def=saver_def if with_saver else None)
        meta.signature_def["train"].CopyFrom(sig)
        path = tmp_path / name
        path.write_bytes(meta.SerializeToString())
        return path

    no_saver = export("no_saver.meta", with_init=True, with_saver=False)
    r = tf_train(hogwild_bin, "--graph", no_saver, *feed, *files)
    assert summary(r.stdout, "train")["batches"] == STEPS // EPOCHS
    r = tf_train(hogwild_bin, "--graph", no_saver, *feed, "--save", tmp_path / "ckpt", *files,
                 check=False)
    assert r.returncode != 0
    assert f"{no_saver}: no saver_def, needed by --save and --restore" in r.stderr
    assert not re.search(r"step +\d", r.stderr)

    full = export("full.meta", with_init=True, with_saver=True)
    tf_train(hogwild_bin, "--graph", full, *feed, "--save", tmp_path / "ckpt", *files)
    no_init = export("no_init.meta", with_init=False, with_saver=True)
    r = tf_train(hogwild_bin, "--graph", no_init, *feed, "--restore", tmp_path / "ckpt", *files)
    assert summary(r.stdout, "train")["batches"] == STEPS // EPOCHS
    r = tf_train(hogwild_bin, "--graph", no_init, *feed, *files, check=False)
    assert r.returncode != 0
    assert f"{no_init}: no \"init_op\" collection naming the initialisation op" in r.stderr


def test_an_eval_signature_that_does_not_fit_the_slots_is_named(hogwild_bin, data, tmp_path):
    d, files = data
    m = Bow()

    @tf.function(input_signature=[WORDS])
    def evaluate(words):
        return {"loss": tf.reduce_mean(tf.gather(m.w, words.values % DIM)),
                "accuracy": tf.constant(0.0)}

    tf.saved_model.save(m, str(tmp_path / "sm"), signatures={
        "train": m.train.get_concrete_function(), "eval": evaluate})
    r = tf_train(hogwild_bin, "--graph", tmp_path / "sm", "--feed", d / "data.prototxt", *files,
                 check=False)
    assert r.returncode != 0
    assert "slot \"label\": signature \"eval\": the graph has no input for this slot (its " \
        "inputs: words, words_1)" in r.stderr, r.stderr
