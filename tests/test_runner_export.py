"""`adam_async.runner.export`: one call turns a compat.v1 graph into what `hogwild tf-train` trains.

A Wide & Deep CTR model with two AdamAsync optimizers (one per part), exported with one call,
trains with the runner at 2 threads from examples/ctr MultiSlot files; Python restores the
runner's checkpoint, evaluates it as the runner's `--eval` did, and finds every variable's beta
powers advanced once per step (so both optimizers ran in every step). The same model as a TF1
SavedModel trains too and reads back with `tf.compat.v1.saved_model.load`. Every refusal names the
slot, output or tensor at fault.
"""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from ps_cluster import powers
from test_runner import PLUGIN, ROOT, hogwild_bin, summary, tf_train  # noqa: F401  (a fixture)

from adam_async import AdamAsyncOptimizer, runner
from adam_async.runner import ExportError

CTR = ROOT / "examples/ctr"
FIELDS = ("user", "item", "hour", "site")
VOCAB = {"user": 1000, "item": 500, "hour": 24, "site": 50}
BATCH = 64  # examples/ctr/data.prototxt's batch_size


def wide_and_deep(seed=5):
    """A Wide & Deep model over examples/ctr's four one-id fields, in a fresh graph: the wide part
    (a weight per id, and a bias) and the deep part (8-wide embeddings -> 16 relu -> 1) each with
    its own AdamAsync optimizer. The fields come in the three ways the runner feeds a slot:
    `user`, `item` and `label` as [B] placeholders, `hour` as a RaggedTensor placeholder and
    `site` as a (values, row_splits) pair. Returns (graph, inputs, outputs)."""
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(seed)
        user = tf.compat.v1.placeholder(tf.int64, [None], name="user")
        item = tf.compat.v1.placeholder(tf.int64, [None], name="item")
        hour = tf.compat.v1.ragged.placeholder(tf.int64, 1, [], name="hour")
        site_values = tf.compat.v1.placeholder(tf.int64, [None], name="site")
        site_splits = tf.compat.v1.placeholder(tf.int64, [None], name="site_row_splits")
        label = tf.compat.v1.placeholder(tf.int64, [None], name="label")
        site = tf.RaggedTensor.from_row_splits(site_values, site_splits)

        def pooled(table, ids):
            if isinstance(ids, tf.RaggedTensor):
                return tf.reduce_mean(tf.gather(table, ids), axis=1)
            return tf.gather(table, ids)

        def dense(x, units, name):
            with tf.compat.v1.variable_scope(name):
                kernel = tf.compat.v1.get_variable(
                    "kernel", [x.shape[1], units],
                    initializer=tf.compat.v1.glorot_uniform_initializer())
                bias = tf.compat.v1.get_variable("bias", [units],
                                                 initializer=tf.zeros_initializer())
            return tf.matmul(x, kernel) + bias

        ids = {"user": user, "item": item, "hour": hour, "site": site}
        init = tf.compat.v1.random_normal_initializer(stddev=0.05)
        with tf.compat.v1.variable_scope("wide"):
            wide = tf.compat.v1.get_variable("bias", [1], initializer=tf.zeros_initializer())
            for f in FIELDS:
                w = tf.compat.v1.get_variable(f, [VOCAB[f], 1], initializer=init)
                wide = wide + pooled(w, ids[f])
        with tf.compat.v1.variable_scope("deep"):
            emb = [pooled(tf.compat.v1.get_variable(f, [VOCAB[f], 8], initializer=init), ids[f])
                   for f in FIELDS]
            hidden = tf.nn.relu(dense(tf.concat(emb, 1), 16, "hidden"))
            deep = dense(hidden, 1, "out")
        logit = tf.squeeze(wide + deep, 1)
        y = tf.cast(label, tf.float32)
        loss = tf.reduce_mean(
            tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logit), name="loss")
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.cast(logit > 0, tf.float32), y),
                                          tf.float32), name="accuracy")
        variables = {part: tf.compat.v1.get_collection(
            tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES, scope=part) for part in ("wide", "deep")}
        AdamAsyncOptimizer(0.05, name="WideAdam").minimize(
            loss, var_list=variables["wide"], name="wide_step")
        AdamAsyncOptimizer(0.01, name="DeepAdam").minimize(
            loss, var_list=variables["deep"], name="deep_step")
    inputs = {"user": user, "item": item, "hour": hour, "site": (site_values, site_splits),
              "label": label}
    return graph, inputs, {"loss": loss, "accuracy": accuracy}


def ctr_files(directory, train_lines=1024, test_lines=640):
    """Two training files of `train_lines` lines from examples/ctr/train.txt and one test file of
    `test_lines` from test.txt, with the data feed description."""
    lines = (CTR / "train.txt").read_text().splitlines(keepends=True)
    files = []
    for i in range(2):
        path = directory / f"train-{i}.txt"
        path.write_text("".join(lines[i * train_lines:(i + 1) * train_lines]))
        files.append(path)
    test = directory / "test.txt"
    test.write_text("".join((CTR / "test.txt").read_text().splitlines(True)[:test_lines]))
    desc = directory / "data.prototxt"
    desc.write_text((CTR / "data.prototxt").read_text())
    return files, test, desc


def ctr_batches(path):
    """The data feed's batches of one file: BATCH lines each, in order; per slot, the ids and the
    row splits (every field has one id per instance)."""
    rows = [list(map(int, line.split())) for line in path.read_text().splitlines()]
    batches = []
    for start in range(0, len(rows), BATCH):
        chunk = np.array(rows[start:start + BATCH], np.int64)
        assert (chunk[:, 0::2] == 1).all()
        ids = dict(zip(FIELDS + ("label",), chunk[:, 1::2].T))
        ids["splits"] = np.arange(len(chunk) + 1, dtype=np.int64)
        batches.append(ids)
    return batches


def ctr_feed(graph, batch):
    """The feed of the wide_and_deep graph for one batch, by tensor name."""
    hour = graph.get_tensor_by_name("hour/flat_values:0")
    hour_splits = graph.get_tensor_by_name("hour/row_splits_0:0")
    feed = {"user:0": batch["user"], "item:0": batch["item"], "label:0": batch["label"],
            "site:0": batch["site"], "site_row_splits:0": batch["splits"]}
    feed.update({hour: batch["hour"], hour_splits: batch["splits"]})
    return feed


def evaluate(sess, batches, loss="loss:0", accuracy="accuracy:0"):
    """The runner's averaging: each batch's fetched values weighted by its instances."""
    out = np.array([sess.run([loss, accuracy], ctr_feed(sess.graph, b)) for b in batches])
    return np.average(out, axis=0, weights=[len(b["label"]) for b in batches])


def check_powers(values, steps, variables):
    """Every variable's AdamAsync beta powers (values[name + "/{Wide,Deep}Adam_{2,3}"]) count
    `steps` updates exactly."""
    for var in variables:
        opt = "WideAdam" if var.startswith("wide/") else "DeepAdam"
        got = [float(values[f"{var}/{opt}_{k}"]) for k in (2, 3)]
        assert got == powers(steps), (var, got, steps)


TRAINABLE = [f"wide/{f}" for f in ("bias",) + FIELDS] + [f"deep/{f}" for f in FIELDS] + [
    "deep/hidden/kernel", "deep/hidden/bias", "deep/out/kernel", "deep/out/bias"]


# --- the export ------------------------------------------------------------------------------

def test_one_call_writes_every_part_of_the_contract(tmp_path):
    graph, inputs, outputs = wide_and_deep()
    meta = runner.export(tmp_path / "sub/wd.meta", inputs, outputs)
    assert meta.SerializeToString() == (tmp_path / "sub/wd.meta").read_bytes()

    signature = meta.signature_def["train"]
    assert {k: v.name for k, v in signature.inputs.items()} == {
        "user": "user:0", "item": "item:0", "label": "label:0",
        "hour": "hour/flat_values:0", "hour/row_splits": "hour/row_splits_0:0",
        "site": "site:0", "site/row_splits": "site_row_splits:0"}
    assert all(v.dtype == tf.int64.as_datatype_enum for v in signature.inputs.values())
    assert {k: v.name for k, v in signature.outputs.items()} == {
        "loss": "loss:0", "accuracy": "accuracy:0"}
    assert all(v.dtype == tf.float32.as_datatype_enum and v.tensor_shape.dim == []
               for v in signature.outputs.values())
    # Both minimize() ops, in the graph's own order.
    assert list(meta.collection_def["train_op"].node_list.value) == ["wide_step", "deep_step"]
    assert list(meta.collection_def["init_op"].node_list.value) == ["init"]
    assert meta.saver_def.restore_op_name == "save/restore_all"

    # The init op initialises every variable, the optimizers' slots included.
    with graph.as_default(), tf.compat.v1.Session() as sess:
        sess.run("init")
        assert sess.run(tf.compat.v1.report_uninitialized_variables()).size == 0


def test_the_given_train_ops_init_op_and_saver_are_the_ones_exported(tmp_path):
    graph, inputs, outputs = wide_and_deep()
    with graph.as_default():
        init = tf.compat.v1.global_variables_initializer()
        saver = tf.compat.v1.train.Saver(name="my_saver")
    meta = runner.export(tmp_path / "wd.meta", inputs, outputs, train_ops="deep_step",
                         init_op=init, saver=saver, graph=graph)
    assert list(meta.collection_def["train_op"].node_list.value) == ["deep_step"]
    assert list(meta.collection_def["init_op"].node_list.value) == [init.name]
    assert meta.saver_def.restore_op_name == "my_saver/restore_all"


def test_an_existing_file_is_replaced_only_by_a_complete_one(tmp_path):
    out = tmp_path / "wd.meta"
    out.write_bytes(b"old")
    graph, inputs, outputs = wide_and_deep()
    with pytest.raises(ExportError):
        runner.export(out, inputs, {"loss": "nothing:0"})
    assert out.read_bytes() == b"old"
    runner.export(out, inputs, outputs)
    assert out.read_bytes() != b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["wd.meta"]


def refusal(change, match):
    """Exports wide_and_deep after `change(graph, inputs, outputs, kwargs)` and asserts the
    ExportError's message contains every string of `match`."""
    graph, inputs, outputs = wide_and_deep()
    kwargs = {}
    with graph.as_default():
        change(graph, inputs, outputs, kwargs)
    with pytest.raises(ExportError) as e:
        runner.export("/nonexistent/never-written.meta", inputs, outputs, **kwargs)
    for m in ([match] if isinstance(match, str) else match):
        assert m in str(e.value)


def test_an_input_of_another_dtype_is_refused_naming_it():
    def change(g, inputs, outputs, kwargs):
        inputs["user"] = tf.compat.v1.placeholder(tf.int32, [None], name="user32")
    refusal(change, ['input "user" (user32:0) is int32', "int64 (uint64 slots) or float32"])


def test_an_input_not_in_the_graph_is_refused_naming_it():
    def other_graph(g, inputs, outputs, kwargs):
        with tf.Graph().as_default():
            inputs["user"] = tf.compat.v1.placeholder(tf.int64, [None], name="elsewhere")
    refusal(other_graph, 'input "user": elsewhere:0 is not in the graph being exported')

    def unknown_name(g, inputs, outputs, kwargs):
        inputs["user"] = "usr:0"
    refusal(unknown_name, "input \"user\": no tensor 'usr:0' in the graph")


def test_a_ragged_input_fed_the_wrong_way_is_refused_naming_it():
    def rank2(g, inputs, outputs, kwargs):
        inputs["hour"] = tf.compat.v1.ragged.placeholder(tf.int64, 2, [], name="nested")
    refusal(rank2, ['input "hour": a RaggedTensor of ragged_rank 2', "ragged_rank 1"])

    def float_splits(g, inputs, outputs, kwargs):
        splits = tf.compat.v1.placeholder(tf.float32, [None], name="splits_f")
        inputs["site"] = (inputs["site"][0], splits)
    refusal(float_splits, ['input "site/row_splits" (splits_f:0) is float32', "int64 (or int32)"])

    def matrix_values(g, inputs, outputs, kwargs):
        values = tf.compat.v1.placeholder(tf.int64, [None, 2], name="pairs")
        inputs["site"] = (values, inputs["site"][1])
    refusal(matrix_values, ['input "site" values (pairs:0) has shape (None, 2)', "rank 1"])

    def a_triple(g, inputs, outputs, kwargs):
        inputs["site"] = inputs["site"] + (inputs["user"],)
    refusal(a_triple, 'input "site": a sequence of 3 items')

    def suffix(g, inputs, outputs, kwargs):
        inputs["user/row_splits"] = inputs.pop("user")
    refusal(suffix, "input \"user/row_splits\": a slot name cannot end in '/row_splits'")


def test_a_dense_input_of_rank_3_is_refused_naming_it():
    def change(g, inputs, outputs, kwargs):
        inputs["user"] = tf.compat.v1.placeholder(tf.int64, [None, 2, 2], name="cube")
    refusal(change, 'input "user" (cube:0) has shape (None, 2, 2)')


def test_a_tensor_fed_from_two_slots_is_refused_naming_both():
    def change(g, inputs, outputs, kwargs):
        inputs["user2"] = inputs["user"]
    refusal(change, 'input "user2": user:0 is fed by input "user" already')


def test_a_non_scalar_output_is_refused_naming_it():
    def vector(g, inputs, outputs, kwargs):
        outputs["logits"] = g.get_tensor_by_name("Squeeze:0")
    refusal(vector, ['output "logits" (Squeeze:0) has shape (None,)', "scalars"])

    def unknown(g, inputs, outputs, kwargs):
        outputs["mystery"] = tf.compat.v1.placeholder_with_default(1.0, None, name="mystery")
    refusal(unknown, 'output "mystery" (mystery:0) of unknown shape')


def test_a_non_float32_output_is_refused_naming_it():
    def change(g, inputs, outputs, kwargs):
        outputs["count"] = tf.size(g.get_tensor_by_name("label:0"), name="count")
    refusal(change, ['output "count" (count:0) is int32', "float32"])


def test_a_graph_without_a_train_op_is_refused():
    def change(g, inputs, outputs, kwargs):
        g.clear_collection(tf.compat.v1.GraphKeys.TRAIN_OP)
    refusal(change, ['no train op: the graph\'s "train_op" collection is empty', "train_ops="])

    def empty(g, inputs, outputs, kwargs):
        kwargs["train_ops"] = []
    refusal(empty, "train_ops: an empty list")

    def unknown(g, inputs, outputs, kwargs):
        kwargs["train_ops"] = ["wide_step", "dep_step"]
    refusal(unknown, "train op 1: no op 'dep_step' in the graph")


def test_a_placeholder_no_input_feeds_is_refused_naming_it():
    def change(g, inputs, outputs, kwargs):
        del inputs["label"]
    refusal(change, ['train op "wide_step" needs placeholder label:0, which no input feeds',
                     "under its slot's name"])


def test_nothing_to_export_is_refused():
    graph, inputs, outputs = wide_and_deep()
    with pytest.raises(ExportError, match="inputs: none given"):
        runner.export("/nonexistent/x.meta", {}, outputs, graph=graph)
    with pytest.raises(ExportError, match="outputs: none given"):
        runner.export("/nonexistent/x.meta", inputs, {})


def test_a_finalized_graph_needs_its_init_op_and_saver_given():
    graph, inputs, outputs = wide_and_deep()
    graph.finalize()
    with pytest.raises(ExportError, match="init_op: the graph is finalized"):
        runner.export("/nonexistent/x.meta", inputs, outputs)


def test_a_cluster_graph_needs_its_variables_placed():
    graph, inputs, outputs = wide_and_deep()
    with pytest.raises(ExportError, match="cluster: no variable of the graph is placed"):
        runner.export("/nonexistent/x.meta", inputs, outputs, cluster=True)


# --- training it with the runner --------------------------------------------------------------

def test_wide_and_deep_with_two_optimizers_trains_at_two_threads(hogwild_bin, tmp_path):
    files, test, desc = ctr_files(tmp_path)
    graph, inputs, outputs = wide_and_deep()
    meta = tmp_path / "wd.meta"
    runner.export(meta, inputs, outputs)
    ckpt = tmp_path / "ckpt/wd"
    r = tf_train(hogwild_bin, "--graph", meta, "--op-library", PLUGIN, "--feed", desc,
                 "--threads", 2, "--epochs", 2, "--print-period", 0, "--save", ckpt,
                 "--eval", test, *files)
    train, ev = summary(r.stdout, "train"), summary(r.stdout, "eval")
    steps = int(train["batches"])
    assert steps == 2 * 2 * 1024 // BATCH

    g = tf.Graph()
    with g.as_default():
        saver = tf.compat.v1.train.import_meta_graph(str(meta))
    with tf.compat.v1.Session(graph=g) as sess:
        saver.restore(sess, str(ckpt))
        loss, accuracy = evaluate(sess, ctr_batches(test))
    np.testing.assert_allclose(loss, ev["loss"], rtol=1e-5)
    np.testing.assert_allclose(accuracy, ev["accuracy"], atol=1e-7)
    # Learned something: the labels' base rate gives about 0.69.
    assert ev["loss"] < 0.66, r.stdout

    reader = tf.train.load_checkpoint(str(ckpt))
    check_powers({n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}, steps,
                 TRAINABLE)


def test_wide_and_deep_as_a_tf1_saved_model_trains_and_reads_back(hogwild_bin, tmp_path):
    files, test, desc = ctr_files(tmp_path)
    graph, inputs, outputs = wide_and_deep()
    exported = runner.export_saved_model(tmp_path / "wd_saved", inputs, outputs)
    trained = tmp_path / "wd_trained"
    r = tf_train(hogwild_bin, "--graph", exported, "--op-library", PLUGIN, "--feed", desc,
                 "--threads", 2, "--print-period", 0, "--save", trained, "--eval", test, *files)
    train, ev = summary(r.stdout, "train"), summary(r.stdout, "eval")
    steps = int(train["batches"])
    assert steps == 2 * 1024 // BATCH

    with tf.Graph().as_default() as g, tf.compat.v1.Session(graph=g) as sess:
        meta = tf.compat.v1.saved_model.load(sess, [runner.TRAIN_TAG], str(trained))
        out = meta.signature_def["train"].outputs
        loss, accuracy = evaluate(sess, ctr_batches(test), out["loss"].name,
                                  out["accuracy"].name)
        values = dict(zip((v.op.name for v in tf.compat.v1.global_variables()),
                          sess.run(tf.compat.v1.global_variables())))
    np.testing.assert_allclose(loss, ev["loss"], rtol=1e-5)
    np.testing.assert_allclose(accuracy, ev["accuracy"], atol=1e-7)
    check_powers(values, steps, TRAINABLE)


def test_the_saved_model_holds_the_contract_and_the_initial_values(tmp_path):
    graph, inputs, outputs = wide_and_deep()
    out = tmp_path / "wd_saved"
    out.mkdir()
    (out / "stale").write_text("replaced")
    assert runner.export_saved_model(out, inputs, outputs) == out
    assert not (out / "stale").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wd_saved"]

    with tf.Graph().as_default() as g, tf.compat.v1.Session(graph=g) as sess:
        meta = tf.compat.v1.saved_model.load(sess, ["train"], str(out))
        assert set(meta.signature_def["train"].inputs) == {
            "user", "item", "label", "hour", "hour/row_splits", "site", "site/row_splits"}
        assert list(meta.collection_def["train_op"].node_list.value) == ["wide_step",
                                                                        "deep_step"]
        values = dict(zip((v.op.name for v in tf.compat.v1.global_variables()),
                          sess.run(tf.compat.v1.global_variables())))
    # Saved just after the init op: the powers at their initial values.
    check_powers(values, 0, TRAINABLE)


# --- Keras 3 -----------------------------------------------------------------------------------

def keras_refusal(tmp_path, change, match, **kwargs):
    """export_keras of examples/keras_runner.py's model after `change(desc_text)` -> the data
    feed description; asserts the ExportError's message contains `match`."""
    import keras
    import keras_runner

    desc = tmp_path / "data.prototxt"
    desc.write_text(change((CTR / "data.prototxt").read_text()))
    model = keras_runner.make_model()
    args = dict(metrics={"accuracy": keras.metrics.binary_accuracy})
    args.update(kwargs)
    with pytest.raises(ExportError) as e:
        runner.export_keras(tmp_path / "never", model, "binary_crossentropy",
                            keras_runner.make_optimizer(), desc, **args)
    assert match in str(e.value)
    assert not (tmp_path / "never").exists()


def test_keras_export_refuses_a_slot_without_an_input_naming_it(tmp_path):
    keras_refusal(tmp_path, lambda d: d.replace("multi_slot_desc {", 'multi_slot_desc {\n'
                  '  slots { name: "age" type: "float" is_dense: true is_used: true }'),
                  'slot "age": used in')


def test_keras_export_refuses_an_input_without_a_slot_naming_it(tmp_path):
    keras_refusal(tmp_path, lambda d: d.replace('name: "hour" type: "uint64" is_dense: false '
                                                "is_used: true",
                                                'name: "hour" type: "uint64" is_dense: false '
                                                "is_used: false"),
                  'model input "hour": no used slot "hour"')


def test_keras_export_names_a_bad_slot_of_the_feed_description(tmp_path):
    keras_refusal(tmp_path, lambda d: d.replace('name: "hour" type: "uint64"',
                                                'name: "hour" type: "uint32"'),
                  f'{tmp_path / "data.prototxt"}: slot "hour": type "uint32"')
    keras_refusal(tmp_path, lambda d: d.replace("is_used: true", "is_used: false"),
                  f'{tmp_path / "data.prototxt"}: no used slot')


def test_keras_export_refuses_a_missing_label_and_a_stateful_metric(tmp_path):
    import keras

    keras_refusal(tmp_path, lambda d: d, 'label: no used slot "click"', label="click")
    keras_refusal(tmp_path, lambda d: d, 'metric "auc": <AUC', metrics={"auc": keras.metrics.AUC()})


def test_keras_export_refuses_a_model_without_one_symbolic_output(tmp_path):
    import keras
    import keras_runner

    class Subclassed(keras.Model):
        def call(self, x):
            return x

    two = keras_runner.make_model()
    two = keras.Model(two.inputs, [two.output, two.output])
    for model, match in ((Subclassed(), "model: Subclassed has no symbolic inputs and outputs"),
                         (two, "model: 2 outputs")):
        with pytest.raises(ExportError, match=match):
            runner.export_keras(tmp_path / "never", model, "binary_crossentropy",
                                keras.optimizers.Adam(), CTR / "data.prototxt")
    assert not (tmp_path / "never").exists()


def test_keras_export_takes_any_keras_optimizer(tmp_path):
    """Keras' own Adam: the train signature steps it (run here from Python), eval does not, and
    load_keras_weights reads the stepped variables back."""
    import keras
    import keras_runner

    model, optimizer = keras_runner.make_model(), keras.optimizers.Adam(0.01)
    out = runner.export_keras(tmp_path / "adam", model, "binary_crossentropy", optimizer,
                              CTR / "data.prototxt")
    batch = next(iter(ctr_batches(CTR / "test.txt")))
    feed = {f: tf.constant(batch[f]) for f in FIELDS + ("label",)}
    feed["site/row_splits"] = tf.constant(batch["splits"])
    loaded = tf.saved_model.load(str(out))
    args = {k.replace("/", "_"): v for k, v in feed.items()}  # TF's parameter names
    before = float(loaded.signatures["eval"](**args)["loss"])
    assert float(loaded.signatures["eval"](**args)["loss"]) == before
    first = float(loaded.signatures["train"](**args)["loss"])
    assert first == pytest.approx(before, rel=1e-6)  # the loss before the step
    assert float(loaded.signatures["eval"](**args)["loss"]) < before
    # Saved again from Python, as the runner's --save writes it: the variables after the step.
    tf.saved_model.save(loaded, str(tmp_path / "resaved"))
    model2, optimizer2 = keras_runner.make_model(seed=9), keras.optimizers.Adam(0.01)
    runner.load_keras_weights(model2, tmp_path / "resaved", optimizer2)
    assert int(optimizer2.iterations.numpy()) == 1
    for a, b in zip(model2.variables, loaded.model_variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_keras_model_trains_with_the_runner_and_loads_back(hogwild_bin, tmp_path):
    """examples/keras_runner.py: export, `hogwild tf-train` at 2 threads, load back, compare; it
    exits non-zero when any step disagrees."""
    files, test, desc = ctr_files(tmp_path)
    r = subprocess.run(
        [sys.executable, str(ROOT / "examples/keras_runner.py"), "--hogwild", str(hogwild_bin),
         "--op-library", str(PLUGIN), "--out", str(tmp_path / "out"), "--feed", str(desc),
         "--train", *map(str, files), "--test", str(test), "--threads", "2", "--epochs", "2"],
        capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT / "python")))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "keras_runner: the Keras model predicts what hogwild tf-train measured" in r.stdout
    assert summary(r.stdout, "train")["batches"] == 2 * 2 * 1024 // BATCH
