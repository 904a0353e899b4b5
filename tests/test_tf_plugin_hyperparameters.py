"""Tensor and callable hyper-parameters of both optimizers, in graph and eager modes, against numpy.

Modelled on stock TensorFlow's ``tensorflow/python/training/adam_test.py``
(``testTensorLearningRate``: a tensor hyper-parameter, graph mode, three steps checked against
numpy; ``doTestBasic(use_callable_params=True)``: callables in eager mode, the powers checked
after each step), here with all four hyper-parameters as tensors or callables, in both modes.
DeepRec documents ``beta1``/``beta2`` as "a float value or a constant float tensor" and makes the
powers with ``convert_to_tensor``; stock ``AdamOptimizer`` also takes callables for all four.
Here every hyper-parameter differs from its default (lr 0.01, beta1 0.8, beta2 0.99, epsilon 1e-7),
so a value that is dropped for the default shows. Tolerances: ``assert_allclose`` of
adam_async_reference (DeepRec's: 1e-3 for float16, 1e-6 otherwise); the tensors are float32, so a
float64 variable computes with float32's 0.8 (a relative 1.5e-8 from 0.8, far inside 1e-6).
"""

import json

import numpy as np
import pytest
import tensorflow as tf

from adam_async import AdamAsyncOptimizer
from adam_async.keras import AdamAsync
from adam_async_reference import adam_step, assert_allclose

v1 = tf.compat.v1
HYPER = {"alpha": 0.01, "beta1": 0.8, "beta2": 0.99, "epsilon": 1e-7}
STEPS = 3


def as_tensors():
    return dict(learning_rate=tf.constant(HYPER["alpha"]), beta1=tf.constant(HYPER["beta1"]),
                beta2=tf.constant(HYPER["beta2"]), epsilon=tf.constant(HYPER["epsilon"]))


def as_callables():
    return dict(learning_rate=lambda: HYPER["alpha"], beta1=lambda: HYPER["beta1"],
                beta2=lambda: HYPER["beta2"], epsilon=lambda: HYPER["epsilon"])


def variables_and_grads(dtype, use_resource, sparse):
    """stock adam_test's fixture: var0=[1,2], grad0=[0.1,0.1], var1=[3,4], grad1=[0.01,0.01];
    sparse gradients name every row."""
    var0 = v1.Variable(np.array([1.0, 2.0], dtype), use_resource=use_resource, name="var0")
    var1 = v1.Variable(np.array([3.0, 4.0], dtype), use_resource=use_resource, name="var1")
    g0, g1 = np.array([0.1, 0.1], dtype), np.array([0.01, 0.01], dtype)
    if sparse:
        grads = [tf.IndexedSlices(tf.constant(g), tf.constant([0, 1]), tf.constant([2]))
                 for g in (g0, g1)]
    else:
        grads = [tf.constant(g0), tf.constant(g1)]
    return (var0, var1), grads, (g0, g1)


def check_steps(run_step, read, opt, variables, g_np, dtype, case):
    """Runs STEPS steps; after step t the variables equal numpy's Adam with HYPER and the powers
    are beta**(t + 1) (made as beta, then multiplied by beta at each step: stock doTestBasic's
    check; in eager mode the slots exist only after the first step)."""
    want = [(np.array([1.0, 2.0]), 0.0, 0.0), (np.array([3.0, 4.0]), 0.0, 0.0)]
    for t in range(1, STEPS + 1):
        run_step(t)
        want = [adam_step(p, g.astype(np.float64), m, v, t, **HYPER)
                for (p, m, v), g in zip(want, g_np)]
        for var, (p, _, _) in zip(variables, want):
            assert_allclose(read(var), p, dtype, f"{var.name} after step {t}, {case}")
            for name in ("beta1", "beta2"):
                assert_allclose(read(opt.get_slot(var, f"{name}_power")), HYPER[name]**(t + 1),
                                dtype, f"{var.name} {name}_power after step {t}, {case}")


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("use_resource", [False, True], ids=["ref", "resource"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("kind", ["tensor", "callable"])
def test_v1_hyperparameters_in_graph_mode(dtype, use_resource, sparse, kind):
    case = (f"{kind} hyper-parameters, dtype={dtype.__name__} resource={use_resource} "
            f"sparse={sparse}")
    with tf.Graph().as_default(), v1.Session() as sess:
        opt = AdamAsyncOptimizer(**(as_tensors() if kind == "tensor" else as_callables()))
        variables, grads, g_np = variables_and_grads(dtype, use_resource, sparse)
        update = opt.apply_gradients(zip(grads, variables))
        sess.run(v1.global_variables_initializer())
        check_steps(lambda t: sess.run(update), sess.run, opt, variables, g_np, dtype, case)


def test_v1_deeprec_constant_beta1_with_minimize():
    """The failing call of issue 38: ``AdamAsyncOptimizer(beta1=tf.constant(0.8))`` in a graph."""
    with tf.Graph().as_default(), v1.Session() as sess:
        var = v1.Variable([1.0, 2.0])
        opt = AdamAsyncOptimizer(beta1=tf.constant(0.8))
        update = opt.minimize(tf.reduce_sum(var * [0.1, 0.1]))
        sess.run(v1.global_variables_initializer())
        want, m, v = np.array([1.0, 2.0]), 0.0, 0.0
        for t in range(1, STEPS + 1):
            sess.run(update)
            want, m, v = adam_step(want, np.array([0.1, 0.1]), m, v, t, beta1=0.8)
            assert_allclose(sess.run(var), want, np.float32, f"var after step {t}")
        assert_allclose(sess.run(opt.get_slot(var, "beta1_power")), 0.8**(STEPS + 1),
                        np.float32, "beta1_power after the steps")


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("kind", ["tensor", "callable"])
def test_v1_hyperparameters_in_eager_mode(dtype, sparse, kind):
    case = f"{kind} hyper-parameters, eager, dtype={dtype.__name__} sparse={sparse}"
    opt = AdamAsyncOptimizer(**(as_tensors() if kind == "tensor" else as_callables()))
    variables, grads, g_np = variables_and_grads(dtype, True, sparse)
    check_steps(lambda t: opt.apply_gradients(zip(grads, variables)),
                lambda x: x.numpy(),
                opt, variables, g_np, dtype, case)


def test_v1_callable_is_called_at_every_eager_step():
    """What a callable is for: a learning rate that changes between steps (0.01, 0.02, 0.03)."""
    rates = iter([0.01, 0.02, 0.03])
    current = {}

    def learning_rate():
        current["lr"] = next(rates)
        return current["lr"]

    var = tf.Variable([1.0, 2.0])
    opt = AdamAsyncOptimizer(learning_rate=learning_rate)
    want, m, v = np.array([1.0, 2.0]), 0.0, 0.0
    for t in range(1, STEPS + 1):
        opt.apply_gradients([(tf.constant([0.1, 0.1]), var)])
        want, m, v = adam_step(want, np.array([0.1, 0.1]), m, v, t, alpha=current["lr"])
        assert_allclose(var.numpy(), want, np.float32, f"var after step {t} (lr {current['lr']})")


@pytest.mark.parametrize("name", ["learning_rate", "beta1", "beta2", "epsilon"])
def test_v1_non_scalar_or_non_number_hyperparameter_is_named(name):
    with tf.Graph().as_default():
        var = v1.Variable([1.0, 2.0])
        with pytest.raises(ValueError) as e:
            AdamAsyncOptimizer(**{name: tf.constant([0.5, 0.5])}).minimize(tf.reduce_sum(var))
        assert str(e.value).startswith(
            f"AdamAsyncOptimizer: {name} must be a scalar, got shape [2]: "), str(e.value)
        with pytest.raises(TypeError) as e:
            AdamAsyncOptimizer(**{name: lambda: "0.5"}).minimize(tf.reduce_sum(var))
        assert str(e.value) == (
            f"AdamAsyncOptimizer: {name} must be a number, a scalar tensor or a callable that "
            "returns one, got a string value: '0.5'")


# --- Keras 3 ---

@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("traced", [False, True], ids=["eager", "tf_function"])
@pytest.mark.parametrize("kind", ["tensor", "callable"])
def test_keras_hyperparameters(kind, traced, sparse):
    mode = "tf.function" if traced else "eager"
    case = f"Keras, {kind} hyper-parameters, {mode}, sparse={sparse}"
    hyper = as_tensors() if kind == "tensor" else as_callables()
    if kind == "tensor":  # Keras' base optimizer takes no tensor learning rate (a float here)
        hyper["learning_rate"] = HYPER["alpha"]
    opt = AdamAsync(**hyper)
    variables, grads, g_np = variables_and_grads(np.float32, True, sparse)

    def step():
        opt.apply_gradients(zip(grads, variables))

    step = tf.function(step) if traced else step
    want = [(np.array([1.0, 2.0]), 0.0, 0.0), (np.array([3.0, 4.0]), 0.0, 0.0)]
    for t in range(1, STEPS + 1):
        step()
        want = [adam_step(p, g.astype(np.float64), m, v, t, **HYPER)
                for (p, m, v), g in zip(want, g_np)]
        for var, (p, _, _) in zip(variables, want):
            assert_allclose(var.numpy(), p, np.float32, f"{var.name} after step {t}, {case}")
            # A power starts at beta and each step multiplies it by beta.
            prefix = var.name.replace(":", "_")
            for name, beta in (("beta1_power", HYPER["beta1"]), ("beta2_power", HYPER["beta2"])):
                [power] = [p for p in opt.variables if p.path.endswith(f"/{prefix}_{name}")]
                assert_allclose(power.numpy(), beta**(t + 1), np.float32,
                                f"{var.name} {name} after step {t}, {case}")


@pytest.mark.parametrize("name", ["beta1", "beta2", "epsilon"])
def test_keras_non_scalar_hyperparameter_is_named(name):
    var = tf.Variable([1.0, 2.0])
    with pytest.raises(ValueError) as e:
        AdamAsync(**{name: tf.constant([0.5, 0.5])}).apply_gradients(
            [(tf.constant([0.1, 0.1]), var)])
    assert str(e.value).startswith(f"AdamAsync: {name} must be a scalar, got shape [2]: "), \
        str(e.value)


def beta1_schedule():
    """A named, registered callable: Keras serializes it by name."""
    return 0.8


def test_keras_config_of_tensor_and_callable_hyperparameters_round_trips():
    import keras

    registered = keras.saving.register_keras_serializable(package="adam_async_tests")(
        beta1_schedule)
    opt = AdamAsync(beta1=registered, beta2=tf.constant(0.99), epsilon=tf.constant(1e-7))
    config = json.loads(json.dumps(keras.optimizers.serialize(opt)))
    # The tensors by value (float32's 0.99 and 1e-7), the function by its registered name.
    assert config["config"]["beta2"] == float(np.float32(0.99))
    assert config["config"]["epsilon"] == float(np.float32(1e-7))
    assert config["config"]["beta1"]["config"] == "adam_async_tests>beta1_schedule"
    again = keras.optimizers.deserialize(config)
    assert again.beta1 is registered
    var, again_var = tf.Variable([1.0, 2.0]), tf.Variable([1.0, 2.0])
    for _ in range(STEPS):
        opt.apply_gradients([(tf.constant([0.1, 0.1]), var)])
        again.apply_gradients([(tf.constant([0.1, 0.1]), again_var)])
    np.testing.assert_array_equal(again_var.numpy(), var.numpy())
