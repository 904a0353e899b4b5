"""``AdamAsync``: the AdamAsync ops as a Keras 3 optimizer, for TF2 code.

``model.compile(optimizer=AdamAsync(...))`` and custom ``tf.function`` loops. Dense gradients use
``ResourceApplyAdamAsync``; ``tf.IndexedSlices`` gradients (embedding lookups) use
``ResourceSparseApplyAdamAsync`` after summing duplicate indices, so only the touched rows move.

The class is registered with Keras as ``adam_async>AdamAsync`` (``import adam_async`` imports this
module), so ``keras.models.load_model("model.keras")`` restores a model compiled with it, slots
and all, without ``custom_objects``.

float16 and bfloat16 variables (a ``dtype="bfloat16"`` layer, the ``"bfloat16"`` dtype policy) keep
m, v and the powers in float32 and use the ``*AdamAsyncV2`` ops with float32 hyper-parameters: in
bfloat16 the default ``beta2 = 0.999`` rounds to 1 (Keras' own ``Adam`` then never moves such a
variable), in float16 ``(1 - beta2) * g**2`` underflows for gradients below about 0.008.

Parameter-server training (``tf.distribute.experimental.ParameterServerStrategy``) runs in a
custom loop with a ``tf.distribute.coordinator.ClusterCoordinator`` (Keras 3 has no ``model.fit``
for this strategy). Every ps task loads the op library (``adam_async.load_library()`` before it
starts its ``tf.distribute.Server``), since the update ops run there. Create the model and the
optimizer and build the optimizer in ``strategy.scope()``, so that the strategy places its
variables: a variable's m, v and both powers are created on that variable's ps. A
``variable_partitioner`` splits variables into ``ShardedVariable`` objects, which Keras 3 cannot
differentiate; give ``shards(model.trainable_variables)`` to the ``GradientTape`` and to
``apply_gradients``, and each shard is trained as a variable of its own, with its own slots and
powers on its own ps (an embedding shard's ``IndexedSlices`` use the sparse op)::

    with strategy.scope():
        model = make_model()
        opt = AdamAsync(1e-3, use_locking=True)
        variables = shards(model.trainable_variables)
        opt.build(variables)

    @tf.function
    def step(iterator):
        def replica_fn(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(model(x), y)
            opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
            return loss
        return strategy.run(replica_fn, args=next(iterator))

    coordinator.schedule(step, args=(per_worker_iterator,))

``use_locking=True`` makes a sparse update hold its variable exclusively, so that two workers'
updates of one shard both count in its powers. Keras' own ``iterations`` counter is a single
variable on one ps that every step increments; AdamAsync's update does not read it.
"""

import re
from typing import Any, Iterable, Optional

import keras
import tensorflow as tf

from adam_async import ops
from adam_async.ops import Hyperparameter

_NAME = "AdamAsync"


def _sum_duplicates(grad: tf.IndexedSlices):
    """The rows of ``grad`` with duplicate indices summed: (values, unique indices)."""
    unique, positions = tf.unique(grad.indices)
    values = tf.math.unsorted_segment_sum(grad.values, positions, tf.shape(unique)[0])
    return values, unique


def _tf_variable(var):
    """The ``tf.Variable`` (or ``ShardedVariable``) behind ``var``, a Keras or TF variable."""
    return var.value if isinstance(var, keras.Variable) else var


def shards(variables: Iterable[Any]) -> list:
    """``variables`` with each sharded one (a ``ShardedVariable``, such as a Keras variable that a
    ``ParameterServerStrategy``'s ``variable_partitioner`` split over the servers) replaced by
    its shards, in order; other variables are kept as they are.

    Keras 3 cannot differentiate a sharded variable (``GradientTape.gradient`` needs a handle,
    which a ``ShardedVariable`` lacks); its shards are plain variables, each on one server, and
    AdamAsync gives each its own slots and powers on that server.
    """
    out = []
    for var in variables:
        inner = _tf_variable(var)
        if isinstance(inner, tf.__internal__.distribute.ShardedVariable):
            out.extend(inner.variables)
        else:
            out.append(var)
    return out


def _slot_prefix(var):
    """The prefix of ``var``'s optimizer variables, as Keras' ``add_variable_from_reference``
    makes it for m and v: the variable's path (``dense_1/kernel``: unique in a model, where the
    name is just ``kernel``), or a plain ``tf.Variable``'s name, with ``/`` and ``:`` (and any other
    character a variable name cannot hold) made ``_``."""
    return re.sub(r"[^A-Za-z0-9_.>-]", "_", str(getattr(var, "path", var.name)))


# A fixed package name: saved models record "adam_async>AdamAsync", whatever module path the class
# is imported from.
@keras.saving.register_keras_serializable(package="adam_async")
class AdamAsync(keras.optimizers.Optimizer):
    """Adam with per-variable beta powers (DeepRec's AdamAsync); see the module docstring.

    Unlike Keras' ``Adam``, the default ``epsilon`` is DeepRec's 1e-8 and the powers are advanced
    by the update op itself (``beta1_power *= beta1``), one pair per variable.
    """

    def __init__(self, learning_rate: Any = 0.001, beta1: Hyperparameter = 0.9,
                 beta2: Hyperparameter = 0.999, epsilon: Hyperparameter = 1e-8,
                 use_locking: bool = False, apply_sparse_rmsprop: bool = False,
                 name: str = "adam_async", **kwargs: Any) -> None:
        """Makes the optimizer; its variables are made by ``build`` (Keras calls it on the first
        ``apply_gradients``).

        ``beta1``, ``beta2`` and ``epsilon`` are each a Python float, a scalar float tensor, or a
        callable without arguments that returns one of those (called each time an update is
        built). ``get_config`` stores a tensor as its value and a callable as Keras stores a
        callable learning rate (a registered function reloads; a lambda needs
        ``safe_mode=False``).

        Args:
            learning_rate: The step size ``lr``: a float, a
                ``keras.optimizers.schedules.LearningRateSchedule`` or a callable without
                arguments, as for every Keras optimizer (Keras refuses a tensor here).
            beta1: The decay rate of the first moment ``m``, and the initial value of every
                variable's ``beta1_power``, which the update multiplies by ``beta1``.
            beta2: The decay rate of the second moment ``v``, and the initial value of every
                variable's ``beta2_power``.
            epsilon: Added to ``sqrt(v)`` in the denominator (DeepRec's default 1e-8; Keras'
                ``Adam`` has 1e-7).
            use_locking: Hold the variable's and its slots' locks exclusively for the whole
                update. Without it, sparse updates share the variable's lock, so concurrent
                updates of one variable interleave (Hogwild); dense updates always lock.
            apply_sparse_rmsprop: Update the rows of ``tf.IndexedSlices`` gradients with the
                RMSProp rule (DeepRec's option) instead of lazy Adam.
            name: The optimizer's name, the first part of its variables' paths.
            **kwargs: Keras' common optimizer arguments: ``weight_decay``, ``clipnorm``,
                ``clipvalue``, ``global_clipnorm``, ``use_ema``, ``ema_momentum``,
                ``ema_overwrite_frequency``, ``loss_scale_factor``,
                ``gradient_accumulation_steps``.

        Raises:
            TypeError: (when the update is built) a hyper-parameter is not a number.
            ValueError: (when the update is built) a hyper-parameter is not a scalar.
        """
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.use_locking = use_locking
        self.apply_sparse_rmsprop = apply_sparse_rmsprop

    def _hyper(self, value, name, dtype):
        return ops.hyperparameter(value, name, _NAME, dtype)

    def build(self, variables: list) -> None:
        if self.built:
            return
        for var in variables:
            inner = _tf_variable(var)
            if isinstance(inner, tf.__internal__.distribute.ShardedVariable):
                parts = ", ".join(part.name for part in inner.variables)
                raise ValueError(
                    f"AdamAsync: variable {getattr(var, 'path', var.name)} is sharded ({parts}; "
                    "a ParameterServerStrategy's variable_partitioner split it): pass its shards "
                    "instead, adam_async.keras.shards(variables), both to the GradientTape and "
                    "to the optimizer; each shard gets its own slots and powers on its server")
        super().build(variables)
        self._slots = []
        for var in variables:
            # Named like Keras' own m and v ("<path>_m"): one prefix per variable, so two layers'
            # kernels get different power names.
            prefix = _slot_prefix(var)
            # Under a ParameterServerStrategy a new variable goes to the next server unless
            # colocated; the update op needs its variable, m, v and powers on one device. Keras'
            # add_variable_from_reference colocates m and v; the powers (and the float32 m and v
            # of a half variable) are made by add_variable, which does not.
            with self._distribution_strategy.extended.colocate_vars_with(_tf_variable(var)):
                # The initial values are made where Keras runs initializers: a callable beta is
                # called there, and a tensor is cast to the power's type.
                powers = [
                    self.add_variable(
                        shape=(), dtype=ops.param_dtype(var.dtype).name, name=f"{prefix}_{name}",
                        initializer=lambda shape, dtype, beta=beta, name=name: self._hyper(
                            beta, name.split("_")[0], dtype))
                    for name, beta in (("beta1_power", self.beta1), ("beta2_power", self.beta2))
                ]
                self._slots.append([self._moment(var, "m"), self._moment(var, "v")] + powers)

    def _moment(self, var, name):
        """m or v for ``var``: Keras' slot of the variable's type, float32 for a half variable
        (add_variable_from_reference has no dtype argument: its name, with add_variable)."""
        dtype = ops.param_dtype(var.dtype)
        if dtype == var.dtype:
            return self.add_variable_from_reference(var, name)
        return self.add_variable(shape=var.shape, dtype=dtype.name, initializer="zeros",
                                 name=f"{_slot_prefix(var)}_{name}")

    def update_step(self, gradient: Any, variable: Any, learning_rate: Any) -> None:
        dtype = tf.as_dtype(variable.dtype)
        param_dtype = ops.param_dtype(dtype)  # float32 for half variables: the V2 ops
        v2 = param_dtype != dtype
        slots = self._slots[self._get_variable_index(variable)]
        m, v, beta1_power, beta2_power = (slot.handle for slot in slots)
        inputs = dict(var=variable.handle, m=m, v=v, beta1_power=beta1_power,
                      beta2_power=beta2_power, lr=tf.cast(learning_rate, param_dtype),
                      beta1=self._hyper(self.beta1, "beta1", param_dtype),
                      beta2=self._hyper(self.beta2, "beta2", param_dtype),
                      epsilon=self._hyper(self.epsilon, "epsilon", param_dtype))
        if isinstance(gradient, tf.IndexedSlices):
            values, indices = _sum_duplicates(gradient)
            sparse_op = (ops.resource_sparse_apply_adam_async_v2 if v2
                         else ops.resource_sparse_apply_adam_async)
            sparse_op(**inputs, grad=tf.cast(values, dtype), indices=indices,
                      use_locking=self.use_locking,
                      apply_sparse_rmsprop=self.apply_sparse_rmsprop)
        else:
            dense_op = ops.resource_apply_adam_async_v2 if v2 else ops.resource_apply_adam_async
            dense_op(**inputs, grad=tf.cast(gradient, dtype), use_locking=self.use_locking)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({
            "beta1": _serialize(self.beta1),
            "beta2": _serialize(self.beta2),
            "epsilon": _serialize(self.epsilon),
            "use_locking": self.use_locking,
            "apply_sparse_rmsprop": self.apply_sparse_rmsprop,
        })
        return config

    @classmethod
    def from_config(cls, config: dict, custom_objects: Optional[dict] = None) -> "AdamAsync":
        config = dict(config)
        for key in ("beta1", "beta2", "epsilon"):
            if isinstance(config.get(key), dict):  # a serialized callable
                config[key] = keras.saving.deserialize_keras_object(
                    config[key], custom_objects=custom_objects)
        return super().from_config(config, custom_objects=custom_objects)


def _serialize(value):
    """A hyper-parameter for ``get_config``, as Keras' base optimizer stores a learning rate: a
    tensor or variable by its value, a callable by ``keras.saving.serialize_keras_object``."""
    if isinstance(value, (tf.Variable, keras.Variable)) or tf.is_tensor(value):
        return float(value.numpy())
    if callable(value):
        return keras.saving.serialize_keras_object(value)
    return value
