"""AdamAsyncOptimizer (tf.compat.v1) and the Keras 3 AdamAsync: DeepRec's test matrix against
numpy, slots and checkpoints, the seed's example, Keras training."""

import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from adam_async import AdamAsyncOptimizer
from adam_async.keras import AdamAsync
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
