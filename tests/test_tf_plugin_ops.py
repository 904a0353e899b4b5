"""The AdamAsync ops against numpy, stock TensorFlow kernels and the native Rust library."""

import os
import pathlib
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
import tensorflow as tf

import adam_async
from tensorflow.python.framework import op_def_registry
from adam_async import ops
from adam_async_reference import assert_allclose, lazy_adam_step

ROOT = pathlib.Path(__file__).resolve().parents[1]
HYPER = dict(lr=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8)


def make_state(var, dtype, powers=(0.9, 0.999)):
    var = np.asarray(var, dtype)
    return [tf.Variable(var), tf.Variable(np.zeros_like(var)), tf.Variable(np.zeros_like(var)),
            tf.Variable(np.asarray(powers[0], dtype)), tf.Variable(np.asarray(powers[1], dtype))]


def handles(state):
    return [s.handle for s in state]


def scalars(dtype, **over):
    h = dict(HYPER, **over)
    return [tf.constant(h[k], dtype) for k in ("lr", "beta1", "beta2", "epsilon")]


def bits(x):
    x = np.asarray(x)
    return x.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize])


def test_op_interfaces_match_deeprec():
    adam_async.load_library()
    names = ["ApplyAdamAsync", "SparseApplyAdamAsync", "ResourceApplyAdamAsync",
             "ResourceSparseApplyAdamAsync"]
    defs = {name: op_def_registry.get(name) for name in names}
    first = ["var", "m", "v", "beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon",
             "grad"]
    for name, op in defs.items():
        sparse = "Sparse" in name
        resource = name.startswith("Resource")
        assert [a.name for a in op.input_arg] == first + (["indices"] if sparse else []), name
        assert [a.is_ref for a in op.input_arg[:5]] == [not resource] * 5, name
        assert [a.name for a in op.output_arg] == ([] if resource else ["out"]), name
        attrs = {a.name: a for a in op.attr}
        want = ["T", "use_locking"] + (["Tindices", "apply_sparse_rmsprop"] if sparse
                                       else ["use_nesterov"])
        assert sorted(attrs) == sorted(want), name
        assert attrs["use_locking"].default_value.b is False, name
        flag = "apply_sparse_rmsprop" if sparse else "use_nesterov"
        assert attrs[flag].default_value.b is False, name
        if sparse:
            assert list(attrs["Tindices"].allowed_values.list.type) == [tf.int32.as_datatype_enum,
                                                                        tf.int64.as_datatype_enum]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("nesterov", [False, True])
def test_step_one_is_bitwise_resource_apply_adam(dtype, nesterov):
    rng = np.random.default_rng(1)
    var0, grad = rng.normal(size=1000).astype(dtype), rng.normal(size=1000).astype(dtype)
    ours, stock = make_state(var0, dtype), make_state(var0, dtype)
    ops.resource_apply_adam_async(*handles(ours), *scalars(dtype), grad, use_nesterov=nesterov)
    tf.raw_ops.ResourceApplyAdam(var=stock[0].handle, m=stock[1].handle, v=stock[2].handle,
                                 beta1_power=np.asarray(0.9, dtype),
                                 beta2_power=np.asarray(0.999, dtype),
                                 **{k: tf.constant(v, dtype) for k, v in HYPER.items()},
                                 grad=grad, use_nesterov=nesterov)
    for i, what in enumerate(["var", "m", "v"]):
        np.testing.assert_array_equal(bits(ours[i].numpy()), bits(stock[i].numpy()),
                                      err_msg=f"{what}, dtype={dtype.__name__}, nesterov={nesterov}")


def test_many_steps_stay_within_rounding_of_resource_apply_adam():
    dtype = np.float32
    rng = np.random.default_rng(2)
    var0 = rng.normal(size=256).astype(dtype)
    grads = rng.normal(size=(1000, 256)).astype(dtype)
    ours, stock = make_state(var0, dtype), make_state(var0, dtype)
    b1p, b2p = np.float32(0.9), np.float32(0.999)

    @tf.function
    def step(g, b1p, b2p):
        ops.resource_apply_adam_async(*handles(ours), *scalars(dtype), g)
        tf.raw_ops.ResourceApplyAdam(var=stock[0].handle, m=stock[1].handle, v=stock[2].handle,
                                     beta1_power=b1p, beta2_power=b2p,
                                     **{k: tf.constant(v, dtype) for k, v in HYPER.items()},
                                     grad=g)

    for t, g in enumerate(grads):
        step(g, b1p, b2p)
        b1p, b2p = b1p * np.float32(0.9), b2p * np.float32(0.999)
        if t == 2:
            np.testing.assert_allclose(ours[0].numpy(), stock[0].numpy(), rtol=0, atol=1e-7)
            # The powers live in the op's own state: multiplied once per call.
            assert ours[3].numpy() == b1p and ours[4].numpy() == b2p
    np.testing.assert_allclose(ours[0].numpy(), stock[0].numpy(), rtol=0, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_rmsprop_path_matches_resource_sparse_apply_rmsprop(dtype, index_dtype):
    rng = np.random.default_rng(3)
    var0 = rng.normal(size=(20, 8)).astype(dtype)
    ours = make_state(var0, dtype, powers=(0.5, 0.5))
    stock = [tf.Variable(var0), tf.Variable(np.zeros_like(var0)), tf.Variable(np.zeros_like(var0))]
    lr, beta1, beta2, eps = dtype(0.01), dtype(0.9), dtype(0.95), dtype(1e-6)
    for _ in range(3):
        indices = rng.choice(20, size=7, replace=False).astype(index_dtype)
        grad = rng.normal(size=(7, 8)).astype(dtype)
        ops.resource_sparse_apply_adam_async(*handles(ours), lr, beta1, beta2, eps, grad, indices,
                                             apply_sparse_rmsprop=True)
        # AdamAsync's rmsprop rule is stock RMSProp with ms=v, mom=m, rho=beta2, momentum=beta1.
        tf.raw_ops.ResourceSparseApplyRMSProp(var=stock[0].handle, ms=stock[2].handle,
                                              mom=stock[1].handle, lr=lr, rho=beta2,
                                              momentum=beta1, epsilon=eps, grad=grad,
                                              indices=indices)
    for i, what in enumerate(["var", "m", "v"]):
        a, b = bits(ours[i].numpy()).astype(np.int64), bits(stock[i].numpy()).astype(np.int64)
        if dtype == np.float64:
            np.testing.assert_array_equal(a, b, err_msg=f"{what}, {index_dtype.__name__}")
        else:
            # Stock TF computes float rsqrt with Eigen's vectorised estimate plus a Newton step,
            # not the correctly rounded 1/sqrt, so f32 agrees to rounding only.
            np.testing.assert_allclose(ours[i].numpy(), stock[i].numpy(), rtol=1e-6, atol=1e-7,
                                       err_msg=f"{what}, {index_dtype.__name__}")
    assert ours[3].numpy() == dtype(0.5) and ours[4].numpy() == dtype(0.5), "powers untouched"


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_lazy_sparse_matches_numpy_lazy_adam(dtype):
    rng = np.random.default_rng(4)
    var0 = rng.normal(size=(10, 3)).astype(dtype)
    state = make_state(var0, dtype)
    want, m, v = var0.astype(np.float64), np.zeros((10, 3)), np.zeros((10, 3))
    for t in range(1, 4):
        rows = rng.choice(10, size=4, replace=False)
        grad = rng.normal(size=(4, 3)).astype(dtype)
        ops.resource_sparse_apply_adam_async(*handles(state), *scalars(dtype), grad,
                                             rows.astype(np.int64))
        want, m, v = lazy_adam_step(want, m, v, t, rows, grad.astype(np.float64))
        assert_allclose(state[0].numpy(), want, dtype, f"var after step {t}")
        assert_allclose(state[3].numpy(), 0.9 ** (t + 1), dtype, f"beta1_power after step {t}")
        assert_allclose(state[4].numpy(), 0.999 ** (t + 1), dtype, f"beta2_power after step {t}")


def test_empty_sparse_update_leaves_powers():
    state = make_state(np.ones((4, 2)), np.float32)
    ops.resource_sparse_apply_adam_async(*handles(state), *scalars(np.float32),
                                         np.zeros((0, 2), np.float32), np.zeros(0, np.int32))
    assert state[3].numpy() == np.float32(0.9)
    np.testing.assert_array_equal(state[0].numpy(), np.ones((4, 2)))


# The plugin and the native library (hogwild::optim::AdamAsync, run by the adam-async-reference
# binary that `make plugin` builds) must give the same bits. 100,000 elements make the plugin
# shard the dense update over TensorFlow's worker threads.
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode", ["dense", "nesterov", "sparse", "rmsprop"])
def test_plugin_and_native_library_give_identical_bits(dtype, mode):
    rng = np.random.default_rng(5)
    rows, row_len, steps = 12_500, 8, 3
    var0 = rng.normal(size=(rows, row_len)).astype(dtype)
    sparse = mode in ("sparse", "rmsprop")
    indices = rng.choice(rows, size=300, replace=True).astype(np.int64) if sparse else None
    grad = rng.normal(size=(300 if sparse else rows, row_len)).astype(dtype)
    hyper = [dtype(x) for x in (0.01, 0.9, 0.999, 1e-8)]
    hexs = lambda xs: " ".join(f"{b:x}" for b in bits(np.asarray(xs, dtype)).ravel())
    lines = [f"dtype {'f32' if dtype == np.float32 else 'f64'}", f"mode {mode}",
             f"steps {steps}", f"row_len {row_len}", f"hyper {hexs(hyper)}",
             f"var {hexs(var0)}", f"grad {hexs(grad)}"]
    if sparse:
        lines.append("indices " + " ".join(map(str, indices)))
    native = subprocess.run([str(ROOT / "target/release/adam-async-reference")],
                            input="\n".join(lines), capture_output=True, text=True, check=True)
    out = {l.split()[0]: np.array([int(w, 16) for w in l.split()[1:]], np.uint64)
           for l in native.stdout.splitlines()}

    state = make_state(var0, dtype)
    for _ in range(steps):
        if sparse:
            ops.resource_sparse_apply_adam_async(*handles(state), *hyper, grad, indices,
                                                 apply_sparse_rmsprop=mode == "rmsprop")
        else:
            ops.resource_apply_adam_async(*handles(state), *hyper, grad,
                                          use_nesterov=mode == "nesterov")
    for i, what in enumerate(["var", "m", "v"]):
        np.testing.assert_array_equal(bits(state[i].numpy()).ravel().astype(np.uint64), out[what],
                                      err_msg=f"{what}, mode={mode}, dtype={dtype.__name__}")
    powers = bits(np.array([state[3].numpy(), state[4].numpy()], dtype)).astype(np.uint64)
    np.testing.assert_array_equal(powers, out["powers"], err_msg=f"powers, mode={mode}")


def test_concurrent_locked_updates_count_every_power_step():
    state = make_state(np.zeros(1000), np.float32)
    grad = np.full(1000, 0.1, np.float32)
    sparse_grad, idx = np.full((10, 1), 0.1, np.float32), np.arange(10, dtype=np.int32)
    n_threads, per_thread = 4, 25
    errors = []

    def work(sparse):
        try:
            for _ in range(per_thread):
                if sparse:
                    # Rows of a [1000] variable are scalars: grad [10, ...] matches var[1:] = [].
                    ops.resource_sparse_apply_adam_async(*handles(state), *scalars(np.float32),
                                                         sparse_grad[:, 0], idx, use_locking=True)
                else:
                    ops.resource_apply_adam_async(*handles(state), *scalars(np.float32), grad)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i % 2 == 1,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    want = np.float32(0.9)
    for _ in range(n_threads * per_thread):
        want *= np.float32(0.9)
    assert state[3].numpy() == want


# --- the shared path: kernels that do not hold an exclusive lock (atomic accesses only) ---
#
# Ref variables always take the shared path, resource variables take it for sparse updates under
# shared locks (use_locking=False); dense resource updates and locked sparse resource updates take
# the exclusive slice path. With one thread the two paths must give the same bits.

SHARED_DTYPES = [tf.float16, tf.bfloat16, tf.float32, tf.float64]
SHARED_HYPER = (0.01, 0.9, 0.99, 1e-3)  # lr, beta1, beta2, epsilon; beta2 < 1 in bfloat16 too
v1 = tf.compat.v1


def ref_step(var0, grad, dtype, steps, use_locking, indices=None, **attrs):
    """`steps` updates of ref variables in a TF1 session; returns var, m, v, beta1_power,
    beta2_power as numpy arrays."""
    with tf.Graph().as_default(), v1.Session() as sess:
        mk = lambda x: v1.Variable(tf.constant(x, dtype), use_resource=False)
        state = [mk(var0), mk(np.zeros_like(var0)), mk(np.zeros_like(var0)), mk(0.9), mk(0.99)]
        hyper = [tf.constant(x, dtype) for x in SHARED_HYPER]
        g = tf.constant(grad, dtype)
        if indices is None:
            update = ops.apply_adam_async(*state, *hyper, g, use_locking=use_locking, **attrs)
        else:
            update = ops.sparse_apply_adam_async(*state, *hyper, g, tf.constant(indices),
                                                 use_locking=use_locking, **attrs)
        sess.run(v1.global_variables_initializer())
        for _ in range(steps):
            sess.run(update.op)
        return sess.run([tf.bitcast(x, tf.uint16 if dtype.size == 2 else
                                    {4: tf.uint32, 8: tf.uint64}[dtype.size]) for x in state])


def resource_step(var0, grad, dtype, steps, use_locking, indices=None, **attrs):
    """The same updates on resource variables (eager)."""
    state = [tf.Variable(tf.constant(x, dtype)) for x in
             (var0, np.zeros_like(var0), np.zeros_like(var0), 0.9, 0.99)]
    hyper = [tf.constant(x, dtype) for x in SHARED_HYPER]
    g = tf.constant(grad, dtype)
    for _ in range(steps):
        if indices is None:
            ops.resource_apply_adam_async(*handles(state), *hyper, g, use_locking=use_locking,
                                          **attrs)
        else:
            ops.resource_sparse_apply_adam_async(*handles(state), *hyper, g,
                                                 tf.constant(indices), use_locking=use_locking,
                                                 **attrs)
    kind = tf.uint16 if dtype.size == 2 else {4: tf.uint32, 8: tf.uint64}[dtype.size]
    return [tf.bitcast(x.read_value(), kind).numpy() for x in state]


# 100,000 elements: the dense update is sharded over TensorFlow's threads on both paths.
@pytest.mark.parametrize("dtype", SHARED_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("nesterov", [False, True])
@pytest.mark.parametrize("use_locking", [False, True])
def test_ref_dense_shared_path_gives_the_exclusive_path_bits(dtype, nesterov, use_locking):
    rng = np.random.default_rng(6)
    var0 = rng.normal(size=(12_500, 8))
    grad = rng.normal(size=(12_500, 8))
    want = resource_step(var0, grad, dtype, 3, False, use_nesterov=nesterov)
    got = ref_step(var0, grad, dtype, 3, use_locking, use_nesterov=nesterov)
    for name, a, b in zip(["var", "m", "v", "beta1_power", "beta2_power"], got, want):
        np.testing.assert_array_equal(a, b, err_msg=f"{name}, {dtype.name}, nesterov={nesterov}, "
                                                    f"use_locking={use_locking}")


@pytest.mark.parametrize("dtype", SHARED_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("rmsprop", [False, True])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_sparse_shared_paths_give_the_exclusive_path_bits(dtype, rmsprop, index_dtype):
    rng = np.random.default_rng(7)
    var0 = rng.normal(size=(40, 6))
    indices = np.array([3, 17, 3, 0, 39, 17, 3], index_dtype)  # duplicates apply in order
    grad = rng.normal(size=(len(indices), 6))
    attrs = dict(apply_sparse_rmsprop=rmsprop)
    want = resource_step(var0, grad, dtype, 3, True, indices, **attrs)  # exclusive lock
    shared_resource = resource_step(var0, grad, dtype, 3, False, indices, **attrs)
    shared_ref = ref_step(var0, grad, dtype, 3, False, indices, **attrs)
    for path, got in [("resource, shared locks", shared_resource), ("ref, unlocked", shared_ref)]:
        for name, a, b in zip(["var", "m", "v", "beta1_power", "beta2_power"], got, want):
            np.testing.assert_array_equal(a, b, err_msg=f"{path}: {name}, {dtype.name}, "
                                                        f"rmsprop={rmsprop}")


def sequential_powers(dtype, calls):
    p1, p2 = dtype(0.9), dtype(0.999)
    for _ in range(calls):
        p1, p2 = dtype(p1 * dtype(0.9)), dtype(p2 * dtype(0.999))
    return p1, p2


# Several Python threads run the same unlocked update op in one TF1 session, so kernels update the
# same ref variables at once: no crash, finite results, and every power advance is counted (the
# powers advance with a compare-and-swap loop, so they hold the sequential bits).
@pytest.mark.parametrize("sparse", [False, True])
def test_concurrent_unlocked_ref_updates_are_finite_and_count_every_power_step(sparse):
    n_threads, per_thread, rows, dim = 4, 30, 2_000, 50
    rng = np.random.default_rng(8)
    with tf.Graph().as_default(), v1.Session() as sess:
        mk = lambda x: v1.Variable(np.asarray(x, np.float32), use_resource=False)
        state = [mk(rng.normal(size=(rows, dim))), mk(np.zeros((rows, dim))),
                 mk(np.zeros((rows, dim))), mk(0.9), mk(0.999)]
        if sparse:
            indices = tf.constant(rng.integers(0, 20, size=64), tf.int64)  # many collisions
            grad = tf.constant(rng.normal(size=(64, dim)).astype(np.float32))
            update = ops.sparse_apply_adam_async(*state, *scalars(np.float32), grad, indices)
        else:
            grad = tf.constant(rng.normal(size=(rows, dim)).astype(np.float32))
            update = ops.apply_adam_async(*state, *scalars(np.float32), grad)
        sess.run(v1.global_variables_initializer())
        errors = []

        def work():
            try:
                for _ in range(per_thread):
                    sess.run(update.op)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=work) for _ in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        var, m, v, p1, p2 = sess.run(state)
    assert np.isfinite(var).all() and np.isfinite(m).all() and np.isfinite(v).all()
    assert (v >= 0).all()
    assert (p1, p2) == sequential_powers(np.float32, n_threads * per_thread)


# Sparse updates of resource variables take shared locks: threads run them at once.
def test_concurrent_shared_lock_resource_updates_count_every_power_step():
    n_threads, per_thread = 4, 40
    rng = np.random.default_rng(9)
    state = make_state(rng.normal(size=(500, 16)), np.float32)
    indices = rng.integers(0, 10, size=32).astype(np.int32)
    grad = rng.normal(size=(32, 16)).astype(np.float32)
    errors = []

    def work(rmsprop):
        try:
            for _ in range(per_thread):
                ops.resource_sparse_apply_adam_async(*handles(state), *scalars(np.float32), grad,
                                                     indices, apply_sparse_rmsprop=rmsprop)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    # Half the threads run the RMSProp rule, which leaves the powers alone.
    threads = [threading.Thread(target=work, args=(i % 2 == 1,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i, name in enumerate(["var", "m", "v"]):
        assert np.isfinite(state[i].numpy()).all(), name
    want = sequential_powers(np.float32, n_threads // 2 * per_thread)
    assert (state[3].numpy(), state[4].numpy()) == want


# --- bad input: a clear InvalidArgument, the process lives on ---

def run_dense(var_shape=(4,), m_shape=None, grad_shape=None, power_shape=(), lr=0.001):
    dtype = np.float32
    var = tf.Variable(np.ones(var_shape, dtype))
    m = tf.Variable(np.zeros(m_shape or var_shape, dtype))
    v = tf.Variable(np.zeros(var_shape, dtype))
    p1 = tf.Variable(np.full(power_shape, 0.9, dtype))
    p2 = tf.Variable(np.full(power_shape, 0.999, dtype))
    ops.resource_apply_adam_async(var.handle, m.handle, v.handle, p1.handle, p2.handle,
                                  *scalars(dtype, lr=lr), np.ones(grad_shape or var_shape, dtype))
    return var.numpy(), p1.numpy()


@pytest.mark.parametrize("kwargs, message", [
    (dict(power_shape=(2,)), r"beta1_power must have exactly one element \(shape \[\] or \[1\]\), got shape \[2\]"),
    (dict(power_shape=(1, 1)), r"beta1_power must have exactly one element"),
    (dict(m_shape=(5,)), r"var and m do not have the same shape: \[4\] vs \[5\]"),
    (dict(grad_shape=(3,)), r"var and grad do not have the same shape: \[4\] vs \[3\]"),
    (dict(lr=float("nan")), r"invalid lr = NaN: must be finite"),
])
def test_bad_dense_input_is_invalid_argument(kwargs, message):
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        run_dense(**kwargs)
    var, _ = run_dense()  # the process lives on and the op still works
    assert (var < 1).all()


def test_one_element_vector_powers_are_accepted():
    var, p1 = run_dense(power_shape=(1,))
    assert (var < 1).all() and p1.shape == (1,) and p1[0] == np.float32(0.9) * np.float32(0.9)


def test_power_of_one_is_invalid_argument():
    state = make_state(np.ones(3), np.float32, powers=(1.0, 0.999))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"invalid beta1_power = 1: must be in \[0, 1\)"):
        ops.resource_apply_adam_async(*handles(state), *scalars(np.float32), np.ones(3, np.float32))
    np.testing.assert_array_equal(state[0].numpy(), np.ones(3))


@pytest.mark.parametrize("indices, grad_shape, message", [
    ([0, 7], (2, 2), r"Index 7 at offset 1 in indices is out of range"),
    ([-1], (1, 2), r"Index -1 at offset 0 in indices is out of range"),
    ([0, 1], (3, 2), r"grad must have one row per index: grad shape \[3,2\], indices shape \[2\]"),
    ([0], (1, 3), r"var and grad must match in all dimensions but the first"),
    ([[0]], (1, 2), r"indices must be one-dimensional, got shape \[1,1\]"),
])
def test_bad_sparse_input_is_invalid_argument_and_writes_nothing(indices, grad_shape, message):
    state = make_state(np.ones((5, 2)), np.float32)
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        ops.resource_sparse_apply_adam_async(*handles(state), *scalars(np.float32),
                                             np.ones(grad_shape, np.float32),
                                             np.asarray(indices, np.int64))
    np.testing.assert_array_equal(state[0].numpy(), np.ones((5, 2)))
    assert state[3].numpy() == np.float32(0.9)


def test_wrong_dtype_is_a_clear_error():
    state = make_state(np.ones(3), np.float32)
    with pytest.raises((tf.errors.InvalidArgumentError, TypeError), match="double|float64"):
        ops.resource_apply_adam_async(*handles(state), *scalars(np.float64),
                                      np.ones(3, np.float64))
    state64 = make_state(np.ones(3), np.float64)
    with pytest.raises(tf.errors.InvalidArgumentError, match="float|double"):
        # var holds doubles but the op is asked for floats: the variable lookup refuses.
        ops.resource_apply_adam_async(*handles(state64), *scalars(np.float32),
                                      np.ones(3, np.float32))


def test_shape_functions_reject_static_mismatches():
    with tf.Graph().as_default():
        v = lambda shape: tf.compat.v1.Variable(np.zeros(shape, np.float32), use_resource=False)
        var, m, vv, p1, p2 = v([3, 2]), v([3, 2]), v([3, 2]), v([]), v([])
        out = ops.apply_adam_async(var, m, vv, p1, p2, *scalars(np.float32),
                                   np.ones((3, 2), np.float32))
        assert out.shape.as_list() == [3, 2]
        out = ops.sparse_apply_adam_async(var, m, vv, p1, p2, *scalars(np.float32),
                                          tf.compat.v1.placeholder(tf.float32, [None, 2]),
                                          tf.compat.v1.placeholder(tf.int32, [None]))
        assert out.shape.as_list() == [3, 2]
        with pytest.raises(ValueError, match="Shapes must be equal rank|Dimension"):
            ops.apply_adam_async(var, m, vv, p1, p2, *scalars(np.float32),
                                 np.ones((3, 3), np.float32))
        with pytest.raises(ValueError, match="must be rank 0"):
            ops.apply_adam_async(var, m, vv, v([2]), p2, *scalars(np.float32),
                                 np.ones((3, 2), np.float32))
        with pytest.raises(ValueError, match="Dimension"):
            ops.sparse_apply_adam_async(var, m, vv, p1, p2, *scalars(np.float32),
                                        np.ones((2, 2), np.float32), np.zeros(3, np.int32))


# --- the loader ---

LOAD = ("try:\n    import adam_async\n    adam_async.load_library()\n"
        "except ImportError as e:\n    print(type(e).__name__, e)\n")


def load_in_subprocess(library, code=LOAD):
    """Runs ``code`` (by default: import adam_async and load the library, printing the
    ImportError raised, if any) with $ADAM_ASYNC_LIBRARY set to ``library``."""
    env = dict(os.environ, ADAM_ASYNC_LIBRARY=str(library), TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip()


def test_loader_uses_the_checkouts_build_without_the_environment_variable(monkeypatch):
    # The package here is the checkout's python/adam_async (no library inside): build/plugin.
    monkeypatch.delenv("ADAM_ASYNC_LIBRARY", raising=False)
    assert not (pathlib.Path(adam_async.__file__).parent / "libadam_async_ops.so").exists()
    assert adam_async.library_path() == ROOT / "build" / "plugin" / "libadam_async_ops.so"


def test_loader_reports_a_missing_library(tmp_path):
    missing = tmp_path / "nope.so"
    want = f"PluginNotFoundError ADAM_ASYNC_LIBRARY={missing}: no such file"
    assert load_in_subprocess(missing) == want


def test_loader_refuses_a_library_built_for_another_tensorflow(tmp_path):
    lib = tmp_path / "libadam_async_ops.so"
    lib.write_bytes(adam_async.library_path().read_bytes())
    (tmp_path / "libadam_async_ops.so.tf_version").write_text("2.0.0\n")
    want = (f"PluginVersionError {lib} was built for TensorFlow 2.0.0, but TensorFlow "
            f"{tf.__version__} is running: rebuild it with `make plugin` against this TensorFlow")
    assert load_in_subprocess(lib) == want
    # ... by `import adam_async` already, before any op is built.
    only_import = ("try:\n    import adam_async\n"
                   "except ImportError as e:\n    print(type(e).__name__, e)\n")
    assert load_in_subprocess(lib, only_import) == want
    # Without the side file the version compiled into the library is checked (and matches).
    (tmp_path / "libadam_async_ops.so.tf_version").unlink()
    assert load_in_subprocess(lib) == ""


def test_loader_names_the_runtime_a_library_needs():
    """A library built against a newer glibc than the system's: what the dynamic loader says
    (the same message as glibc's, here raised by a stand-in for tf.load_op_library, since this
    system's glibc loads the library) becomes a message naming the version and the system's."""
    code = textwrap.dedent("""
        import os
        import tensorflow as tf
        import adam_async

        def refuse(path):
            raise tf.errors.NotFoundError(None, None, (
                "/lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.99' not found "
                f"(required by {path})"))

        tf.load_op_library = refuse
        try:
            adam_async.load_library()
        except adam_async.PluginRuntimeError as e:
            print(e)
        print(os.confstr("CS_GNU_LIBC_VERSION"))
    """)
    lib = adam_async.library_path()
    message, system = load_in_subprocess(lib, code).splitlines()
    assert message == (
        f"{lib} cannot be loaded: it needs glibc with GLIBC_2.99, and this system "
        f"(glibc {system.split()[-1]}) has an older one. The library needs the glibc and "
        "libstdc++ of the machine it was built on or newer (docs/python.md names them for the "
        "project's builds); build it on this system (`make wheel`) or use a newer one. The "
        "loader said: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.99' not found "
        f"(required by {lib})")
