"""float16 and bfloat16 variables: DeepRec's ops against stock TensorFlow, the V2 ops (float32 m, v,
powers and hyper-parameters) against a numpy float32 reference, and training with Adam's defaults
through both optimizers."""

import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf

from adam_async import AdamAsyncOptimizer, load_library, ops
from adam_async.keras import AdamAsync
from tensorflow.python.framework import op_def_registry

v1 = tf.compat.v1
HALF = [tf.float16, tf.bfloat16]
DEFAULTS = (0.001, 0.9, 0.999, 1e-8)  # lr, beta1, beta2, epsilon
NP = {tf.float16: np.float16, tf.bfloat16: ml_dtypes.bfloat16, tf.float32: np.float32}


def bits(x):
    return np.asarray(x).view(np.uint16 if np.asarray(x).dtype.itemsize == 2 else np.uint32)


def ulps(a, b):
    """Distance in units in the last place between two arrays of one 16-bit float type: the
    distance of their bit patterns mapped to a signed, ordered integer line (+0 and -0 meet)."""
    def line(x):
        u = bits(x).astype(np.int64)
        return np.where(u & 0x8000, -(u & 0x7FFF), u)
    return np.abs(line(a) - line(b))


def test_v2_op_interfaces():
    load_library()
    first = ["var", "m", "v", "beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon",
             "grad"]
    for name in ["ApplyAdamAsync", "SparseApplyAdamAsync", "ResourceApplyAdamAsync",
                 "ResourceSparseApplyAdamAsync"]:
        deeprec, op = op_def_registry.get(name), op_def_registry.get(name + "V2")
        sparse, resource = "Sparse" in name, name.startswith("Resource")
        assert [a.name for a in op.input_arg] == first + (["indices"] if sparse else []), name
        want = ["T"] + ["U"] * 8 + ["T"] if not resource else ["U"] * 4 + ["T"]
        got = [a.type_attr for a in op.input_arg[:10] if a.type_attr]
        assert got == want, name
        assert [a.is_ref for a in op.input_arg[:5]] == [not resource] * 5, name
        attrs = {a.name: a for a in op.attr}
        assert sorted(attrs) == sorted([a.name for a in deeprec.attr] + ["U"]), name
        assert list(attrs["T"].allowed_values.list.type) == [
            tf.float16.as_datatype_enum, tf.bfloat16.as_datatype_enum,
            tf.float32.as_datatype_enum], name
        assert list(attrs["U"].allowed_values.list.type) == [tf.float32.as_datatype_enum], name
        assert attrs["U"].default_value.type == tf.float32.as_datatype_enum, name


# DeepRec's ops on half variables compute in the half type, as stock ResourceApplyAdam does: step
# one (m = v = 0, where AdamAsync's and stock's moment formulas agree) gives its bits. float16
# with Adam's defaults; bfloat16 with a beta2 that stays below 1 in bfloat16.
@pytest.mark.parametrize("dtype,hyper", [(tf.float16, DEFAULTS),
                                         (tf.bfloat16, (0.01, 0.9, 0.99, 1e-3))],
                         ids=["float16", "bfloat16"])
@pytest.mark.parametrize("nesterov", [False, True])
def test_deeprec_ops_on_half_variables_give_resource_apply_adam_bits(dtype, hyper, nesterov):
    rng = np.random.default_rng(1)
    var0, grad = rng.normal(size=1000), tf.constant(rng.normal(size=1000), dtype)
    h = [tf.constant(x, dtype) for x in hyper]
    ours = [tf.Variable(tf.constant(x, dtype)) for x in (var0, np.zeros(1000), np.zeros(1000),
                                                          hyper[1], hyper[2])]
    stock = [tf.Variable(tf.constant(x, dtype)) for x in (var0, np.zeros(1000), np.zeros(1000))]
    ops.resource_apply_adam_async(*[s.handle for s in ours], *h, grad, use_nesterov=nesterov)
    tf.raw_ops.ResourceApplyAdam(var=stock[0].handle, m=stock[1].handle, v=stock[2].handle,
                                 beta1_power=h[1], beta2_power=h[2], lr=h[0], beta1=h[1],
                                 beta2=h[2], epsilon=h[3], grad=grad, use_nesterov=nesterov)
    for i, what in enumerate(["var", "m", "v"]):
        np.testing.assert_array_equal(bits(ours[i].numpy()), bits(stock[i].numpy()),
                                      err_msg=f"{what}, {dtype.name}, nesterov={nesterov}")


# The V2 rule, written out in numpy float32 in the kernel's operation order; var rounded to the
# variable's type after each step, m, v and the powers kept in float32.
def reference_step(state, g, rule, hyper=DEFAULTS, rows=None):
    """One V2 call on numpy state [var, m, v, beta1_power, beta2_power] (var of a half type, the
    rest float32; ``rows``: the rows a sparse call names, one per row of ``g``)."""
    f = np.float32
    lr, b1, b2, eps = (f(x) for x in hyper)
    var, m, v, p1, p2 = state
    half = var.dtype
    w32, m32, v32 = var.astype(f), m.copy(), v.copy()
    g32 = g.astype(f)
    idx = slice(None) if rows is None else rows
    w, mm, vv = w32[idx], m32[idx], v32[idx]
    one = f(1)
    if rule == "rmsprop":
        v_new = vv * b2 + g32 * g32 * (one - b2)
        m_new = mm * b1 + (one / np.sqrt(v_new + eps)) * lr * g32
        w_new = w - m_new
    else:
        alpha = lr * np.sqrt(one - p2) / (one - p1)
        m_new = mm * b1 + g32 * (one - b1)
        v_new = vv * b2 + g32 * g32 * (one - b2)
        denom = np.sqrt(v_new) + eps
        if rule == "nesterov":
            w_new = w - (g32 * (one - b1) + b1 * m_new) * alpha / denom
        else:
            w_new = w - m_new * alpha / denom
        p1, p2 = f(p1 * b1), f(p2 * b2)
    w32[idx], m32[idx], v32[idx] = w_new, m_new, v_new
    return [w32.astype(half), m32, v32, p1, p2]


def v2_steps(dtype, rule, var0, grads, rows, resource):
    """The V2 op on ref (TF1 graph) or resource variables, one call per gradient; returns
    [var, m, v, beta1_power, beta2_power] after each call."""
    sparse = rule in ("sparse", "rmsprop")
    kw = dict(apply_sparse_rmsprop=rule == "rmsprop") if sparse else dict(
        use_nesterov=rule == "nesterov")
    zeros = np.zeros(var0.shape, np.float32)
    if resource:
        state = [tf.Variable(tf.constant(var0, dtype))] + [
            tf.Variable(x) for x in (zeros, zeros, np.float32(0.9), np.float32(0.999))]
        out = []
        for t, g in enumerate(grads):
            g = tf.constant(g, dtype)
            handles = [s.handle for s in state]
            if sparse:
                ops.resource_sparse_apply_adam_async_v2(*handles, *DEFAULTS, g, rows[t], **kw)
            else:
                ops.resource_apply_adam_async_v2(*handles, *DEFAULTS, g, **kw)
            out.append([s.numpy() for s in state])
        return out
    with tf.Graph().as_default(), v1.Session() as sess:
        mk = lambda x, d: v1.Variable(tf.constant(x, d), use_resource=False)
        state = [mk(var0, dtype)] + [mk(x, tf.float32) for x in (zeros, zeros, 0.9, 0.999)]
        g_in = v1.placeholder(dtype)
        if sparse:
            idx = v1.placeholder(tf.int64)
            update = ops.sparse_apply_adam_async_v2(*state, *DEFAULTS, g_in, idx, **kw)
        else:
            update = ops.apply_adam_async_v2(*state, *DEFAULTS, g_in, **kw)
        sess.run(v1.global_variables_initializer())
        out = []
        for t, g in enumerate(grads):
            feed = {g_in: g.astype(NP[dtype])}
            if sparse:
                feed[idx] = rows[t]
            sess.run(update.op, feed)
            out.append(sess.run(state))
        return out


# Tolerance: var within 1 unit in the last place of the half type, m and v within 4 float32 ulps
# (rtol 2.4e-7, atol 1e-30). The reference performs the same float32 operations in the same order,
# each correctly rounded, so it should give the same bits; the slack allows for a reordering of
# the kernel's float32 arithmetic. The float32 powers must be exact.
@pytest.mark.parametrize("dtype", HALF, ids=lambda d: d.name)
@pytest.mark.parametrize("rule", ["dense", "nesterov", "sparse", "rmsprop"])
@pytest.mark.parametrize("resource", [False, True], ids=["ref", "resource"])
def test_v2_matches_the_numpy_float32_reference(dtype, rule, resource):
    rng = np.random.default_rng(2)
    var0 = rng.normal(scale=0.3, size=(30, 4)).astype(NP[dtype])
    sparse = rule in ("sparse", "rmsprop")
    steps = 6
    rows = [rng.choice(30, size=8, replace=False).astype(np.int64) for _ in range(steps)]
    grads = [rng.normal(size=(8 if sparse else 30, 4)).astype(NP[dtype]) for _ in range(steps)]
    if not sparse:
        grads[0][0] = 0  # a zero gradient at step one: m = v = 0, finite only if epsilon > 0
    got = v2_steps(dtype, rule, var0, grads, rows, resource)
    zeros = np.zeros(var0.shape, np.float32)
    want = [var0, zeros, zeros, np.float32(0.9), np.float32(0.999)]
    for t, g in enumerate(grads):
        want = reference_step(want, g, rule, rows=rows[t] if sparse else None)
        what = f"after step {t + 1}, {dtype.name}, {rule}, resource={resource}"
        assert np.isfinite(got[t][0].astype(np.float32)).all(), f"var {what}"
        assert ulps(got[t][0], want[0]).max() <= 1, (
            f"var {what}: max {ulps(got[t][0], want[0]).max()} ulps")
        for i, name in ((1, "m"), (2, "v")):
            assert got[t][i].dtype == np.float32, f"{name} {what}"
            np.testing.assert_allclose(got[t][i], want[i], rtol=2.4e-7, atol=1e-30,
                                       err_msg=f"{name} {what}")
        assert (got[t][3], got[t][4]) == (want[3], want[4]), f"powers {what}"
    # The rows never named keep their weights (lazy), and the powers are float32.
    if sparse:
        untouched = sorted(set(range(30)) - set(np.concatenate(rows)))
        np.testing.assert_array_equal(bits(got[-1][0][untouched]), bits(var0[untouched]))
    assert got[-1][3].dtype == np.float32


# With T = float32 the V2 ops are DeepRec's ops, bit for bit.
@pytest.mark.parametrize("sparse", [False, True])
def test_v2_with_float32_variables_is_the_deeprec_op(sparse):
    rng = np.random.default_rng(3)
    var0 = rng.normal(size=(50, 3)).astype(np.float32)
    grad = rng.normal(size=(7 if sparse else 50, 3)).astype(np.float32)
    rows = np.array([3, 9, 3, 0, 49, 9, 3], np.int32)  # duplicates apply in order
    results = []
    for v2 in (False, True):
        state = [tf.Variable(x) for x in (var0, np.zeros_like(var0), np.zeros_like(var0),
                                          np.float32(0.9), np.float32(0.999))]
        for _ in range(3):
            handles = [s.handle for s in state]
            if sparse:
                op = ops.resource_sparse_apply_adam_async_v2 if v2 else \
                    ops.resource_sparse_apply_adam_async
                op(*handles, *[np.float32(x) for x in DEFAULTS], grad, rows)
            else:
                op = ops.resource_apply_adam_async_v2 if v2 else ops.resource_apply_adam_async
                op(*handles, *[np.float32(x) for x in DEFAULTS], grad)
        results.append([bits(s.numpy()) for s in state])
    for what, a, b in zip(["var", "m", "v", "beta1_power", "beta2_power"], *results):
        np.testing.assert_array_equal(a, b, err_msg=what)


# Ref variables (no lock: atomic accesses) and resource variables under exclusive locks (slices)
# give the same bits with one thread; 100,000 elements shard the dense update over TF's threads.
@pytest.mark.parametrize("dtype", HALF, ids=lambda d: d.name)
@pytest.mark.parametrize("rule", ["nesterov", "sparse", "rmsprop"])
def test_v2_shared_path_gives_the_exclusive_path_bits(dtype, rule):
    rng = np.random.default_rng(4)
    sparse = rule != "nesterov"
    var0 = rng.normal(size=(40, 6) if sparse else (12_500, 8)).astype(NP[dtype])
    rows = [np.array([3, 17, 3, 0, 39, 17, 3], np.int64)] * 3
    grads = [rng.normal(size=(7, 6) if sparse else (12_500, 8)).astype(NP[dtype])] * 3
    ref = v2_steps(dtype, rule, var0, grads, rows, resource=False)[-1]
    if sparse:  # exclusive locks on resource variables for the sparse update: use_locking
        zeros = np.zeros(var0.shape, np.float32)
        state = [tf.Variable(tf.constant(var0, dtype))] + [
            tf.Variable(x) for x in (zeros, zeros, np.float32(0.9), np.float32(0.999))]
        for g in grads:
            ops.resource_sparse_apply_adam_async_v2(
                *[s.handle for s in state], *DEFAULTS, tf.constant(g, dtype), rows[0],
                use_locking=True, apply_sparse_rmsprop=rule == "rmsprop")
        res = [s.numpy() for s in state]
    else:
        res = v2_steps(dtype, rule, var0, grads, rows, resource=True)[-1]
    for what, a, b in zip(["var", "m", "v", "beta1_power", "beta2_power"], ref, res):
        np.testing.assert_array_equal(bits(a), bits(b), err_msg=f"{what}, {dtype.name}, {rule}")


# --- errors ---

def v2_state(var0=(0.1,), state_dtype=tf.float32):
    """Resource variables for a V2 op: a bfloat16 var, m, v and powers of ``state_dtype``."""
    zeros = np.zeros(len(var0))
    return [tf.Variable(tf.constant(var0, tf.bfloat16))] + [
        tf.Variable(tf.constant(x, state_dtype)) for x in (zeros, zeros, 0.9, 0.999)]


def test_a_truly_invalid_beta2_is_still_an_error():
    state = v2_state()
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"invalid beta2 = 1: must be in \[0, 1\)"):
        ops.resource_apply_adam_async_v2(*[s.handle for s in state], 0.001, 0.9, 1.0, 1e-8,
                                         tf.constant([0.1], tf.bfloat16))
    np.testing.assert_array_equal(state[0].numpy(), np.array([0.1], ml_dtypes.bfloat16))

    var = tf.Variable(tf.constant([0.1], tf.bfloat16))
    opt = AdamAsync(beta2=1.0)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"invalid beta2 = 1"):
        opt.apply_gradients([(tf.constant([0.1], tf.bfloat16), var)])


def test_deeprec_op_on_bfloat16_says_why_beta2_is_1():
    state = [tf.Variable(tf.constant(x, tf.bfloat16)) for x in ([0.1], [0.0], [0.0], 0.9, 0.999)]
    with pytest.raises(tf.errors.InvalidArgumentError) as err:
        ops.resource_apply_adam_async(*[s.handle for s in state],
                                      *[tf.constant(x, tf.bfloat16) for x in DEFAULTS],
                                      tf.constant([0.1], tf.bfloat16))
    assert "invalid beta2 = 1: must be in [0, 1) (lr, beta1, beta2, epsilon and the beta " \
           "powers are bfloat16 here; the AdamAsyncV2 ops take them as float" in err.value.message


def test_v2_refuses_state_of_the_half_type():
    for state, name in [(v2_state(state_dtype=tf.bfloat16), "m"),
                        (v2_state()[:3] + v2_state(state_dtype=tf.bfloat16)[3:], "beta1_power")]:
        args = [s.handle for s in state] + list(DEFAULTS) + [tf.constant([0.1], tf.bfloat16)]
        for sparse in (False, True):
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match=f"{name} holds bfloat16 but the op's U is float"):
                if sparse:
                    ops.resource_sparse_apply_adam_async_v2(*args, [0])
                else:
                    ops.resource_apply_adam_async_v2(*args)
        np.testing.assert_array_equal(state[0].numpy(), np.array([0.1], ml_dtypes.bfloat16))


# --- training with Adam's defaults ---

def tf1_losses(dtype, use_resource, sparse, steps=300):
    """A TF1 linear regression (dense weights, or an embedding table looked up by id) in
    ``dtype`` trained with AdamAsyncOptimizer()'s defaults; the losses and the optimizer."""
    rng = np.random.default_rng(5)
    with tf.Graph().as_default(), v1.Session() as sess:
        if sparse:
            ids = rng.integers(0, 64, size=256)
            y = rng.normal(scale=0.2, size=(64, 1))[ids]
            table = v1.get_variable("table", initializer=tf.zeros((64, 1), dtype),
                                    use_resource=use_resource)
            pred = tf.nn.embedding_lookup(table, ids)
            var = table
        else:
            x = rng.normal(size=(256, 8))
            y = x @ rng.normal(scale=0.2, size=(8, 1))
            var = v1.get_variable("w", initializer=tf.zeros((8, 1), dtype),
                                  use_resource=use_resource)
            pred = tf.matmul(tf.constant(x, dtype), var)
        loss = tf.reduce_mean(tf.square(tf.cast(pred, tf.float32) - tf.constant(y, tf.float32)))
        opt = AdamAsyncOptimizer()
        train = opt.minimize(loss)
        sess.run(v1.global_variables_initializer())
        losses = [sess.run([train, loss])[1] for _ in range(steps)]
        slots = [opt.get_slot(var, s) for s in ("m", "v", "beta1_power", "beta2_power")]
        return losses, sess.run(slots), [s.op.name for s in slots]


@pytest.mark.parametrize("dtype", HALF, ids=lambda d: d.name)
@pytest.mark.parametrize("use_resource", [False, True], ids=["ref", "resource"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_tf1_optimizer_trains_half_variables_with_defaults(dtype, use_resource, sparse):
    losses, slots, names = tf1_losses(dtype, use_resource, sparse)
    what = f"{dtype.name}, resource={use_resource}, sparse={sparse}"
    assert np.isfinite(losses).all(), what
    assert losses[-1] < 0.5 * losses[0], f"{what}: {losses[0]} -> {losses[-1]}"
    # m, v and the powers are float32 slots under DeepRec's names; the powers advance once a step.
    var = "table" if sparse else "w"
    assert names == [f"{var}/AdamAsync"] + [f"{var}/AdamAsync_{i}" for i in (1, 2, 3)], what
    assert [np.asarray(s).dtype for s in slots] == [np.float32] * 4, what
    p1, p2 = np.float32(0.9), np.float32(0.999)
    for _ in range(300):
        p1, p2 = np.float32(p1 * np.float32(0.9)), np.float32(p2 * np.float32(0.999))
    assert (slots[2], slots[3]) == (p1, p2), what


def keras_losses(layer_dtype, sparse, policy=None, epochs=10):
    """The Keras twin of ``tf1_losses`` (weights start at zero), trained by ``fit`` with
    AdamAsync()'s defaults; the first loss, the epochs' losses and the dtypes of the weights and of
    the optimizer's float variables."""
    import keras

    rng = np.random.default_rng(6)
    keras.utils.set_random_seed(6)
    old = keras.config.dtype_policy()
    if policy:
        keras.config.set_dtype_policy(policy)
    try:
        if sparse:
            x = rng.integers(0, 64, size=(512, 1))
            y = rng.normal(scale=0.2, size=(64, 1))[x[:, 0]]
            layers = [keras.Input((1,), dtype="int32"),
                      keras.layers.Embedding(64, 1, embeddings_initializer="zeros",
                                             dtype=layer_dtype),
                      keras.layers.Flatten()]
        else:
            x = rng.normal(size=(512, 8)).astype(np.float32)
            y = x @ rng.normal(scale=0.2, size=(8, 1))
            layers = [keras.Input((8,)),
                      keras.layers.Dense(1, kernel_initializer="zeros", dtype=layer_dtype)]
        model = keras.Sequential(layers)
        model.compile(optimizer=AdamAsync(), loss="mse")
        first = model.evaluate(x, y, verbose=0)
        history = model.fit(x, y, epochs=epochs, batch_size=16, verbose=0).history["loss"]
        weights = model.trainable_variables[0]
        floats = [v.dtype for v in model.optimizer.variables if "int" not in v.dtype]
        return first, history, weights.dtype, floats
    finally:
        keras.config.set_dtype_policy(old)


@pytest.mark.parametrize("layer_dtype,policy", [("bfloat16", None), ("float16", None),
                                                (None, "bfloat16")],
                         ids=["bfloat16-layer", "float16-layer", "bfloat16-policy"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "embedding"])
def test_keras_optimizer_trains_half_variables_with_defaults(layer_dtype, policy, sparse):
    first, history, var_dtype, state_dtypes = keras_losses(layer_dtype, sparse, policy)
    what = f"layer dtype {layer_dtype}, policy {policy}, sparse={sparse}"
    assert var_dtype == (layer_dtype or policy), what
    # The learning rate, m, v and the two powers of each variable: float32.
    assert len(state_dtypes) >= 5 and set(state_dtypes) == {"float32"}, (what, state_dtypes)
    assert np.isfinite(history).all(), what
    assert history[-1] < 0.5 * first, f"{what}: {first} -> {history}"
