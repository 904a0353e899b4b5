"""AdamAsyncOptimizer (tf.compat.v1) and the Keras 3 AdamAsync: DeepRec's test matrix against
numpy, slots and checkpoints, the seed's example with ``import adam_async.compat``, Keras training,
saving and reloading."""

import json
import os
import pathlib
import subprocess
import sys
import textwrap
import types
import warnings
import zipfile

import numpy as np
import pytest
import tensorflow as tf

from adam_async import AdamAsyncOptimizer
from adam_async.keras import AdamAsync, shards
from adam_async_reference import adam_step, assert_allclose

ROOT = pathlib.Path(__file__).resolve().parents[1]
v1 = tf.compat.v1


def deeprec_fixture(dtype, use_resource, sparse, learning_rate=0.001):
    """DeepRec's adam_async_test fixture: var0=[1,2], grad0=[0.1,0.1], var1=[3,4],
    grad1=[0.01,0.01]; sparse gradients name every row."""
    var0 = v1.Variable(np.array([1.0, 2.0], dtype), use_resource=use_resource, name="var0")
    var1 = v1.Variable(np.array([3.0, 4.0], dtype), use_resource=use_resource, name="var1")
    g0, g1 = np.array([0.1, 0.1], dtype), np.array([0.01, 0.01], dtype)
    if sparse:
        grads = [tf.IndexedSlices(tf.constant(g), tf.constant([0, 1]), tf.constant([2]))
                 for g in (g0, g1)]
    else:
        grads = [tf.constant(g0), tf.constant(g1)]
    opt = AdamAsyncOptimizer(learning_rate=learning_rate)
    return opt, (var0, var1), grads, (g0, g1)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("use_resource", [False, True], ids=["ref", "resource"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("tensor_lr", [False, True], ids=["float_lr", "tensor_lr"])
def test_deeprec_matrix(dtype, use_resource, sparse, tensor_lr):
    case = f"dtype={dtype.__name__} resource={use_resource} sparse={sparse} tensor_lr={tensor_lr}"
    with tf.Graph().as_default(), v1.Session() as sess:
        lr = tf.constant(0.001) if tensor_lr else 0.001
        opt, (var0, var1), grads, (g0, g1) = deeprec_fixture(dtype, use_resource, sparse, lr)
        update = opt.apply_gradients(zip(grads, [var0, var1]))
        sess.run(v1.global_variables_initializer())
        want = [(np.array([1.0, 2.0]), 0.0, 0.0), (np.array([3.0, 4.0]), 0.0, 0.0)]
        for t in range(1, 4):
            for var in (var0, var1):
                b1p, b2p = sess.run([opt.get_slot(var, "beta1_power"),
                                     opt.get_slot(var, "beta2_power")])
                assert_allclose(b1p, 0.9**t, dtype, f"beta1_power before step {t}, {case}")
                assert_allclose(b2p, 0.999**t, dtype, f"beta2_power before step {t}, {case}")
            sess.run(update)
            want = [adam_step(p, g.astype(np.float64), m, v, t)
                    for (p, m, v), g in zip(want, (g0, g1))]
            for var, (p, _, _) in zip((var0, var1), want):
                assert_allclose(sess.run(var), p, dtype, f"{var.op.name} after step {t}, {case}")


@pytest.mark.parametrize("use_resource", [False, True], ids=["ref", "resource"])
def test_repeated_indices_equal_the_aggregated_gradient(use_resource):
    with tf.Graph().as_default(), v1.Session() as sess:
        repeated = v1.Variable([[1.0], [2.0]], use_resource=use_resource)
        aggregated = v1.Variable([[1.0], [2.0]], use_resource=use_resource)
        g_rep = tf.IndexedSlices(tf.constant([[0.1], [0.1]]), tf.constant([1, 1]),
                                 tf.constant([2, 1]))
        g_agg = tf.IndexedSlices(tf.constant([[0.2]]), tf.constant([1]), tf.constant([2, 1]))
        up_rep = AdamAsyncOptimizer().apply_gradients([(g_rep, repeated)])
        up_agg = AdamAsyncOptimizer().apply_gradients([(g_agg, aggregated)])
        sess.run(v1.global_variables_initializer())
        for _ in range(3):
            sess.run([up_rep, up_agg])
        np.testing.assert_array_equal(sess.run(repeated), sess.run(aggregated))


@pytest.mark.parametrize("use_resource", [False, True], ids=["ref", "resource"])
def test_two_update_ops_sharing_one_optimizer(use_resource):
    dtype = np.float32
    with tf.Graph().as_default(), v1.Session() as sess:
        opt, (var0, var1), grads, (g0, g1) = deeprec_fixture(dtype, use_resource, sparse=False)
        update1 = opt.apply_gradients(zip(grads, [var0, var1]))
        update2 = opt.apply_gradients(zip(grads, [var0, var1]))
        sess.run(v1.global_variables_initializer())
        want = [(np.array([1.0, 2.0]), 0.0, 0.0), (np.array([3.0, 4.0]), 0.0, 0.0)]
        for t in range(1, 5):
            sess.run(update1 if t % 2 else update2)
            want = [adam_step(p, g.astype(np.float64), m, v, t)
                    for (p, m, v), g in zip(want, (g0, g1))]
            for var, (p, _, _) in zip((var0, var1), want):
                assert_allclose(sess.run(var), p, dtype, f"{var.op.name} after step {t}")


def test_slots_and_checkpoint_names_round_trip(tmp_path):
    with tf.Graph().as_default(), v1.Session() as sess:
        opt, (var0, var1), grads, _ = deeprec_fixture(np.float32, False, sparse=False)
        update = opt.apply_gradients(zip(grads, [var0, var1]))
        assert sorted(opt.get_slot_names()) == ["beta1_power", "beta2_power", "m", "v"]
        names = [opt.get_slot(var0, s).op.name for s in ("m", "v", "beta1_power", "beta2_power")]
        assert names == ["var0/AdamAsync", "var0/AdamAsync_1", "var0/AdamAsync_2",
                         "var0/AdamAsync_3"]
        assert opt.get_slot(var0, "beta1_power").shape.as_list() == []
        saver = v1.train.Saver()
        sess.run(v1.global_variables_initializer())
        sess.run(update)
        saved = sess.run(tf.compat.v1.global_variables())
        path = saver.save(sess, str(tmp_path / "ckpt"))
        sess.run(update)
        saver.restore(sess, path)
        for before, after in zip(saved, sess.run(tf.compat.v1.global_variables())):
            np.testing.assert_array_equal(before, after)
    stored = dict(tf.train.list_variables(path))
    for var in ("var0", "var1"):
        for suffix, shape in (("", [2]), ("_1", [2]), ("_2", []), ("_3", [])):
            assert stored[f"{var}/AdamAsync{suffix}"] == shape, (var, suffix)


def test_seed_example_runs():
    # examples/seed_example.py is DeepRec's script on TF 2 with the one line
    # `import adam_async.compat`: tf.train.AdamAsyncOptimizer is not patched in by the script.
    assert "tf.train.AdamAsyncOptimizer =" not in (ROOT / "examples/seed_example.py").read_text()
    # The seed's expected losses: sum(2 * emb) over 6 rows of 16 ones, then two AdamAsync steps
    # with lr 0.1 moving every touched element by about 0.1 (192, 172.8, 153.6).
    out = subprocess.run([sys.executable, str(ROOT / "examples/seed_example.py")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    losses = [float(line.rsplit("(", 1)[1].rstrip(")]")) for line in out.stdout.splitlines()
              if "np.float32(" in line]
    np.testing.assert_allclose(losses, [192.0, 172.8, 153.6], rtol=1e-4)


def test_keras_compile_fit_updates_only_touched_embedding_rows():
    import keras

    rng = np.random.default_rng(0)
    ids = rng.integers(0, 50, size=(256, 3))  # rows 50..99 never appear
    true_w = rng.normal(size=100)
    y = true_w[ids].sum(axis=1, keepdims=True).astype(np.float32)
    model = keras.Sequential([keras.Input((3,), dtype="int32"), keras.layers.Embedding(100, 1),
                              keras.layers.Flatten(), keras.layers.Dense(1, use_bias=False)])
    emb0 = model.layers[0].embeddings.numpy().copy()
    model.compile(optimizer=AdamAsync(learning_rate=0.05), loss="mse")
    first = model.evaluate(ids, y, verbose=0)
    model.fit(ids, y, epochs=20, batch_size=32, verbose=0)
    assert model.evaluate(ids, y, verbose=0) < 0.2 * first
    emb = model.layers[0].embeddings.numpy()
    np.testing.assert_array_equal(emb[50:], emb0[50:])  # lazy: untouched rows never move
    assert (emb[:50] != emb0[:50]).all()


def test_keras_tf_function_loop_matches_numpy():
    var = tf.Variable([1.0, 2.0])
    opt = AdamAsync(learning_rate=0.001)

    @tf.function
    def step():
        opt.apply_gradients([(tf.constant([0.1, 0.1]), var)])

    want, m, v = np.array([1.0, 2.0]), 0.0, 0.0
    for t in range(1, 4):
        step()
        want, m, v = adam_step(want, np.array([0.1, 0.1]), m, v, t)
        assert_allclose(var.numpy(), want, np.float32, f"var after step {t}")


def test_keras_indexed_slices_use_the_lazy_sparse_op():
    import keras

    emb = keras.layers.Embedding(20, 2)
    emb.build((None,))
    opt = AdamAsync(learning_rate=0.1)

    @tf.function
    def step(ids):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(emb(ids))
        grads = tape.gradient(loss, emb.trainable_variables)
        assert isinstance(grads[0], tf.IndexedSlices)  # checked when traced
        opt.apply_gradients(zip(grads, emb.trainable_variables))

    before = emb.embeddings.numpy().copy()
    step(tf.constant([0, 1, 1]))
    after1 = emb.embeddings.numpy().copy()
    step(tf.constant([5]))
    after2 = emb.embeddings.numpy()
    assert (after1[:2] != before[:2]).all() and (after1[2:] == before[2:]).all()
    # Dense Adam would keep moving rows 0 and 1 (their m is not zero); lazy Adam leaves them.
    np.testing.assert_array_equal(after2[:2], after1[:2])
    assert (after2[5] != after1[5]).all()



def test_keras_sharded_variable_is_refused_and_its_shards_train_on_their_own():
    """A ParameterServerStrategy with a variable_partitioner makes ShardedVariables (the cluster
    test, test_tf_plugin_ps.py, trains one); here one made directly, without a cluster."""
    parts = [tf.Variable(np.zeros((3, 2), np.float32), name="table/part_0"),
             tf.Variable(np.zeros((2, 2), np.float32), name="table/part_1")]
    table = tf.__internal__.distribute.ShardedVariable(parts)
    bias = tf.Variable(0.0, name="bias")
    with pytest.raises(ValueError, match=r"is sharded \(table/part_0:0, table/part_1:0;.*"
                                         r"adam_async\.keras\.shards\(variables\)"):
        AdamAsync().build([table, bias])

    variables = shards([table, bias])
    assert [v.name for v in variables] == ["table/part_0:0", "table/part_1:0", "bias:0"]
    assert all(a is b for a, b in zip(variables, parts + [bias]))
    opt = AdamAsync(learning_rate=0.1)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.nn.embedding_lookup(table, [0, 2])) + bias  # rows of part 0
    grads = tape.gradient(loss, variables)
    assert [type(g) for g in grads[:2]] == [tf.IndexedSlices] * 2
    opt.apply_gradients(zip(grads, variables))
    powers = {v.path.split("/")[-1]: float(v.numpy()) for v in opt.variables if "power" in v.path}
    # Part 1's gradient has no rows: its powers stay; the others advanced once.
    assert powers == {"table_part_0_0_beta1_power": np.float32(0.9) * np.float32(0.9),
                      "table_part_0_0_beta2_power": np.float32(0.999) * np.float32(0.999),
                      "table_part_1_0_beta1_power": np.float32(0.9),
                      "table_part_1_0_beta2_power": np.float32(0.999),
                      "bias_0_beta1_power": np.float32(0.9) * np.float32(0.9),
                      "bias_0_beta2_power": np.float32(0.999) * np.float32(0.999)}, powers
    np.testing.assert_array_equal(parts[1].numpy(), np.zeros((2, 2)))
    assert (parts[0].numpy()[[0, 2]] != 0).all() and (parts[0].numpy()[1] == 0).all()

# --- import adam_async.compat ---

def test_compat_registers_the_optimizer_under_tf_compat_v1_train_once():
    import adam_async
    import adam_async.compat as compat

    assert v1.train.AdamAsyncOptimizer is adam_async.AdamAsyncOptimizer
    # TF 2's tf.train holds no TF1 optimizers, so it gets none.
    assert not hasattr(tf.train, "AdamAsyncOptimizer")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # registering again is silent
        assert compat.register() == ["tf.compat.v1.train"]
    assert v1.train.AdamAsyncOptimizer is adam_async.AdamAsyncOptimizer


def test_compat_also_registers_under_tf_train_where_that_is_tf1(monkeypatch):
    import adam_async
    import adam_async.compat as compat

    tf1_train = types.ModuleType("train")  # TensorFlow 1.x's tf.train: the TF1 optimizers' home
    tf1_train.GradientDescentOptimizer = v1.train.GradientDescentOptimizer
    monkeypatch.setattr(tf, "train", tf1_train)
    assert compat.register() == ["tf.compat.v1.train", "tf.train"]
    assert tf1_train.AdamAsyncOptimizer is adam_async.AdamAsyncOptimizer


def test_compat_never_replaces_an_existing_adam_async_optimizer():
    import adam_async
    import adam_async.compat as compat

    class DeepRecAdamAsyncOptimizer:  # what DeepRec's own TensorFlow has
        pass

    v1.train.AdamAsyncOptimizer = DeepRecAdamAsyncOptimizer
    try:
        with pytest.warns(UserWarning) as caught:
            assert compat.register() == []
        assert v1.train.AdamAsyncOptimizer is DeepRecAdamAsyncOptimizer
    finally:
        v1.train.AdamAsyncOptimizer = adam_async.AdamAsyncOptimizer
    assert [str(w.message) for w in caught] == [
        "tf.compat.v1.train.AdamAsyncOptimizer already exists (test_tf_plugin_optimizer."
        "test_compat_never_replaces_an_existing_adam_async_optimizer.<locals>."
        "DeepRecAdamAsyncOptimizer); adam_async.compat leaves it in place (use "
        "adam_async.AdamAsyncOptimizer to get this package's optimizer)"]


# --- Keras: slot names, config, saving and reloading ---

def keras_model(name):
    """An embedding (sparse gradients) and two dense layers (dense gradients), layers named so
    that two models built in one process have the same variable paths."""
    import keras

    return keras.Sequential([
        keras.Input((3,), dtype="int32"),
        keras.layers.Embedding(40, 4, name="emb"),
        keras.layers.Flatten(name="flat"),
        keras.layers.Dense(8, activation="relu", name="hidden"),
        keras.layers.Dense(1, name="out"),
    ], name=name)


def test_keras_slot_names_are_unique_per_layer():
    model = keras_model("names")
    opt = AdamAsync()
    opt.build(model.trainable_variables)
    names = [v.name for v in opt.variables]
    paths = [v.path for v in opt.variables]
    assert len(set(names)) == len(names), names
    assert len(set(paths)) == len(paths), paths
    # Every model variable's four slots share the prefix Keras gives its m and v.
    for var in model.trainable_variables:
        prefix = var.path.replace("/", "_")
        for slot in ("beta1_power", "beta2_power", "m", "v"):
            assert f"adam_async/{prefix}_{slot}" in paths, (var.path, slot, paths)
    # Keras 3 names both dense kernels "kernel"; their paths differ.
    assert "adam_async/names_hidden_kernel_beta1_power" in paths
    assert "adam_async/names_out_kernel_beta1_power" in paths


def test_keras_config_round_trips_through_the_registered_name():
    import keras

    opt = AdamAsync(learning_rate=0.02, beta1=0.8, beta2=0.99, epsilon=1e-6, use_locking=True,
                    apply_sparse_rmsprop=True, clipnorm=1.0, name="mine")
    config = keras.optimizers.serialize(opt)
    assert config["registered_name"] == "adam_async>AdamAsync"
    again = keras.optimizers.deserialize(json.loads(json.dumps(config)))
    assert type(again) is AdamAsync
    assert again.get_config() == opt.get_config()
    assert (again.beta1, again.beta2, again.epsilon, again.use_locking,
            again.apply_sparse_rmsprop) == (0.8, 0.99, 1e-6, True, True)


# Runs in a fresh process: only `import adam_async` (no adam_async.keras, no custom_objects) stands
# between Keras and the saved optimizer.
RELOAD_AND_TRAIN = textwrap.dedent("""
    import sys
    import keras
    import numpy as np
    import adam_async

    model_path, data_path, out_path, first, last = sys.argv[1:]
    model = keras.models.load_model(model_path)
    data = np.load(data_path)
    for i in range(int(first), int(last)):
        model.train_on_batch(data["x"][i], data["y"][i])
    opt = model.optimizer
    print(f"{type(opt).__module__}.{type(opt).__name__}")
    variables = model.weights + opt.variables
    np.savez(out_path, paths=[v.path for v in variables], *[v.numpy() for v in variables])
""")


def unprefixed(path, model):
    """A variable's path without its model's name: Keras puts it in the paths of variables
    created while the model is built (``whole/hidden/kernel``), not in those of a loaded model."""
    return path.replace(f"{model}/", "", 1).replace(f"adam_async/{model}_", "adam_async/", 1)


def test_keras_saved_model_reloads_and_trains_on_as_if_never_stopped(tmp_path):
    """N steps, save .keras, reload in a fresh process with only `import adam_async`, M more
    steps: the weights and every optimizer variable (iterations, learning rate, m, v, beta
    powers) equal an uninterrupted N+M-step run's bit for bit (tolerance 0: the same kernels on
    the same inputs in the same order)."""
    n, m = 4, 3
    rng = np.random.default_rng(1)
    x = rng.integers(0, 40, size=(n + m, 16, 3)).astype(np.int32)
    y = rng.normal(size=(n + m, 16, 1)).astype(np.float32)
    np.savez(tmp_path / "data.npz", x=x, y=y)

    whole, stopped = keras_model("whole"), keras_model("stopped")
    stopped.set_weights(whole.get_weights())
    for model in (whole, stopped):
        model.compile(optimizer=AdamAsync(learning_rate=0.01), loss="mse")
    for i in range(n + m):
        whole.train_on_batch(x[i], y[i])
    for i in range(n):
        stopped.train_on_batch(x[i], y[i])
    stopped.save(tmp_path / "m.keras")
    with zipfile.ZipFile(tmp_path / "m.keras") as saved:
        optimizer = json.loads(saved.read("config.json"))["compile_config"]["optimizer"]
    assert optimizer["registered_name"] == "adam_async>AdamAsync"

    out = subprocess.run(
        [sys.executable, "-c", RELOAD_AND_TRAIN, str(tmp_path / "m.keras"),
         str(tmp_path / "data.npz"), str(tmp_path / "after.npz"), str(n), str(n + m)],
        capture_output=True, text=True, timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["adam_async.keras.AdamAsync"]

    after = np.load(tmp_path / "after.npz")
    want = whole.weights + whole.optimizer.variables
    paths = list(after["paths"])
    assert paths == [unprefixed(v.path, "whole") for v in want]
    got = dict(zip(paths, (after[f"arr_{i}"] for i in range(len(paths)))))
    for path, var in zip(paths, want):
        np.testing.assert_array_equal(got[path], var.numpy(), err_msg=path)
    assert int(got["adam_async/iteration"]) == n + m
    # Every variable got a gradient at every step, and a power starts at beta and is advanced by
    # each: beta ** (n + m + 1) now (DeepRec's contract; the matrix test above checks it per step).
    for path in paths:
        for power, beta in (("beta1_power", 0.9), ("beta2_power", 0.999)):
            if path.endswith(power):
                np.testing.assert_allclose(got[path], beta ** (n + m + 1), rtol=1e-6,
                                           err_msg=path)
