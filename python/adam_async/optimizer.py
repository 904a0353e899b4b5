"""``AdamAsyncOptimizer``: DeepRec's ``tf.train.AdamAsyncOptimizer`` for ``tf.compat.v1`` code."""

import tensorflow as tf

from adam_async import ops
from adam_async.ops import Hyperparameter


class AdamAsyncOptimizer(tf.compat.v1.train.Optimizer):
    """Adam for asynchronous training: every variable owns its beta powers.

    Slots per variable (checkpoint names ``<var>/AdamAsync``, ``_1``, ``_2``, ``_3``): ``m``,
    ``v``, ``beta1_power`` and ``beta2_power`` (shape ``[]``, initialised to ``beta1`` /
    ``beta2`` and advanced by the op itself, so no global step is shared between variables).
    Sparse gradients update only the rows they name (lazy Adam); with ``apply_sparse_rmsprop``
    they use the RMSProp rule instead. Duplicate indices are summed before the op.

    float16 and bfloat16 variables keep m, v and the powers in float32 and run the
    ``*AdamAsyncV2`` ops with float32 hyper-parameters, which compute in float32 and round the
    weight once (in bfloat16 the default ``beta2 = 0.999`` rounds to 1; in float16
    ``epsilon = 1e-8`` rounds to 0 and ``(1 - beta2) * g**2`` underflows for small gradients).
    Other variables run DeepRec's ops with DeepRec's slot types.
    """

    def __init__(self, learning_rate: Hyperparameter = 0.001, beta1: Hyperparameter = 0.9,
                 beta2: Hyperparameter = 0.999, epsilon: Hyperparameter = 1e-8,
                 use_locking: bool = False, apply_sparse_rmsprop: bool = False,
                 name: str = "AdamAsync") -> None:
        """Makes the optimizer; its slots are made when it is first applied to variables.

        Each of ``learning_rate``, ``beta1``, ``beta2`` and ``epsilon`` is a Python float, a
        scalar float tensor (in graph mode, of the graph the optimizer is used in), or a callable
        without arguments that returns one of those; a callable is called each time an update
        is built (every ``apply_gradients`` in eager mode), as stock ``AdamOptimizer`` does.

        Args:
            learning_rate: The step size ``lr`` (DeepRec's and stock Adam's default, 0.001).
            beta1: The decay rate of the first moment ``m``, and the initial value of every
                variable's ``beta1_power`` slot, which the update multiplies by ``beta1``.
            beta2: The decay rate of the second moment ``v``, and the initial value of every
                variable's ``beta2_power`` slot.
            epsilon: Added to ``sqrt(v)`` in the denominator (DeepRec's default, 1e-8).
            use_locking: Hold the variable's and its slots' locks exclusively for the whole
                update. Without it (TensorFlow's semantics), ref variables are updated without a
                lock and sparse updates of resource variables share theirs, so concurrent updates
                of one variable interleave (Hogwild); dense resource updates always lock.
            apply_sparse_rmsprop: Update the rows of sparse gradients with the RMSProp rule
                (DeepRec's option) instead of lazy Adam; dense gradients always use Adam.
            name: The name of the slots (``<var>/<name>``, ``_1``, ...) and of the name scope of
                the update ops.

        Raises:
            TypeError: (when the update is built) a hyper-parameter is not a number.
            ValueError: (when the update is built) a hyper-parameter is not a scalar.
        """
        super().__init__(use_locking, name)
        self._lr = learning_rate
        self._beta1 = beta1
        self._beta2 = beta2
        self._epsilon = epsilon
        self._apply_sparse_rmsprop = apply_sparse_rmsprop
        self._lr_t = self._beta1_t = self._beta2_t = self._epsilon_t = None

    def _hyper(self, value, name, dtype=None):
        return ops.hyperparameter(value, name, type(self).__name__, dtype)

    def _create_slots(self, var_list):
        for var in var_list:
            dtype = ops.param_dtype(var.dtype)
            for name in ("m", "v"):
                if dtype == var.dtype.base_dtype:
                    self._zeros_slot(var, name, self._name)
                else:  # float32 moments for a half variable
                    self._get_or_make_slot_with_initializer(
                        var, tf.compat.v1.zeros_initializer(), var.get_shape(), dtype, name,
                        self._name)
            # DeepRec makes these with convert_to_tensor: beta1 may be a tensor (or here, as
            # stock AdamOptimizer allows, a callable), which tf.constant refuses in graph mode.
            for name, beta in (("beta1_power", self._beta1), ("beta2_power", self._beta2)):
                self._get_or_make_slot(var, self._hyper(beta, name.split("_")[0], dtype), name,
                                       self._name)

    def _prepare(self):
        # Cast to each variable's parameter type in _inputs.
        self._lr_t = self._hyper(self._lr, "learning_rate")
        self._beta1_t = self._hyper(self._beta1, "beta1")
        self._beta2_t = self._hyper(self._beta2, "beta2")
        self._epsilon_t = self._hyper(self._epsilon, "epsilon")

    def _inputs(self, var, handles):
        """The op's first nine inputs for ``var``: state (refs or handles), then the scalars."""
        dtype = ops.param_dtype(var.dtype)
        slots = [var] + [self.get_slot(var, s) for s in ("m", "v", "beta1_power", "beta2_power")]
        state = [s.handle for s in slots] if handles else slots
        scalars = [tf.cast(t, dtype) for t in (self._lr_t, self._beta1_t, self._beta2_t,
                                               self._epsilon_t)]
        return state + scalars

    @staticmethod
    def _op(var, plain, v2):
        """``v2`` for a half variable (float32 state and hyper-parameters), else ``plain``."""
        return plain if ops.param_dtype(var.dtype) == var.dtype.base_dtype else v2

    def _apply_dense(self, grad, var):
        op = self._op(var, ops.apply_adam_async, ops.apply_adam_async_v2)
        return op(*self._inputs(var, handles=False), grad, use_locking=self._use_locking).op

    def _resource_apply_dense(self, grad, var):
        op = self._op(var, ops.resource_apply_adam_async, ops.resource_apply_adam_async_v2)
        return op(*self._inputs(var, handles=True), grad, use_locking=self._use_locking)

    def _apply_sparse(self, grad, var):
        # The base class has summed duplicate indices (_apply_sparse_duplicate_indices).
        op = self._op(var, ops.sparse_apply_adam_async, ops.sparse_apply_adam_async_v2)
        return op(*self._inputs(var, handles=False), grad.values, grad.indices,
                  use_locking=self._use_locking,
                  apply_sparse_rmsprop=self._apply_sparse_rmsprop).op

    def _resource_apply_sparse(self, grad, var, indices):
        # The base class has summed duplicate indices (_resource_apply_sparse_duplicate_indices).
        op = self._op(var, ops.resource_sparse_apply_adam_async,
                      ops.resource_sparse_apply_adam_async_v2)
        return op(*self._inputs(var, handles=True), grad, indices, use_locking=self._use_locking,
                  apply_sparse_rmsprop=self._apply_sparse_rmsprop)
