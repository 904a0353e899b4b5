"""The raw AdamAsync ops, with DeepRec's argument names and defaults.

``var, m, v, beta1_power, beta2_power`` are ref variables (``*_apply_adam_async``) or resource
handles (``resource_*``); the powers are updated in place by the op (``beta1_power *= beta1``).
Sparse ops apply duplicate indices one after the other; sum them first for Adam's semantics (the
optimizers do). The ``*_v2`` ops take m, v, the powers and the hyper-parameters in float32 for
half variables.

:func:`hyperparameter` turns what the optimizers accept for ``learning_rate``, ``beta1``,
``beta2`` and ``epsilon`` (a number, a scalar tensor, or a callable that returns one) into the
scalar tensor these ops take.
"""

from typing import Any, Callable, Optional, Union

import tensorflow as tf

from adam_async._loader import load_library

#: A variable input of the raw ops: a ref variable (``*_apply_adam_async``), or a resource variable
#: or its handle (``resource_*``).
State = Union[tf.Variable, tf.Tensor]
#: A tensor input of the raw ops: a tensor, or anything ``tf.convert_to_tensor`` takes.
TensorLike = Any

#: What the optimizers take for a hyper-parameter: a Python or numpy number, a scalar float
#: tensor, or a callable without arguments that returns one of those (called each time the
#: update is built, and once more for the powers' initial values).
Hyperparameter = Union[float, tf.Tensor, Callable[[], Union[float, tf.Tensor]]]


def apply_adam_async(var: State, m: State, v: State, beta1_power: State, beta2_power: State,
                     lr: TensorLike, beta1: TensorLike, beta2: TensorLike, epsilon: TensorLike,
                     grad: TensorLike, use_locking: bool = False, use_nesterov: bool = False,
                     name: Optional[str] = None) -> tf.Tensor:
    """``ApplyAdamAsync``: a dense step on ref variables; returns the updated ``var`` ref."""
    return load_library().apply_adam_async(
        var=var, m=m, v=v, beta1_power=beta1_power, beta2_power=beta2_power, lr=lr,
        beta1=beta1, beta2=beta2, epsilon=epsilon, grad=grad, use_locking=use_locking,
        use_nesterov=use_nesterov, name=name)


def sparse_apply_adam_async(var: State, m: State, v: State, beta1_power: State, beta2_power: State,
                            lr: TensorLike, beta1: TensorLike, beta2: TensorLike,
                            epsilon: TensorLike, grad: TensorLike, indices: TensorLike,
                            use_locking: bool = False, apply_sparse_rmsprop: bool = False,
                            name: Optional[str] = None) -> tf.Tensor:
    """``SparseApplyAdamAsync``: lazy Adam (or RMSProp) on the rows ``indices`` of ref variables."""
    return load_library().sparse_apply_adam_async(
        var=var, m=m, v=v, beta1_power=beta1_power, beta2_power=beta2_power, lr=lr,
        beta1=beta1, beta2=beta2, epsilon=epsilon, grad=grad, indices=indices,
        use_locking=use_locking, apply_sparse_rmsprop=apply_sparse_rmsprop, name=name)


def resource_apply_adam_async(var: State, m: State, v: State, beta1_power: State,
                              beta2_power: State, lr: TensorLike, beta1: TensorLike,
                              beta2: TensorLike, epsilon: TensorLike, grad: TensorLike,
                              use_locking: bool = False, use_nesterov: bool = False,
                              name: Optional[str] = None) -> Optional[tf.Operation]:
    """``ResourceApplyAdamAsync``: a dense step on resource variables (handles)."""
    return load_library().resource_apply_adam_async(
        var=var, m=m, v=v, beta1_power=beta1_power, beta2_power=beta2_power, lr=lr,
        beta1=beta1, beta2=beta2, epsilon=epsilon, grad=grad, use_locking=use_locking,
        use_nesterov=use_nesterov, name=name)


def resource_sparse_apply_adam_async(var: State, m: State, v: State, beta1_power: State,
                                     beta2_power: State, lr: TensorLike, beta1: TensorLike,
                                     beta2: TensorLike, epsilon: TensorLike, grad: TensorLike,
                                     indices: TensorLike, use_locking: bool = False,
                                     apply_sparse_rmsprop: bool = False,
                                     name: Optional[str] = None) -> Optional[tf.Operation]:
    """``ResourceSparseApplyAdamAsync``: the sparse step on resource variables (handles)."""
    return load_library().resource_sparse_apply_adam_async(
        var=var, m=m, v=v, beta1_power=beta1_power, beta2_power=beta2_power, lr=lr,
        beta1=beta1, beta2=beta2, epsilon=epsilon, grad=grad, indices=indices,
        use_locking=use_locking, apply_sparse_rmsprop=apply_sparse_rmsprop, name=name)


# The V2 ops: m, v, the powers and lr, beta1, beta2, epsilon in float32 (``U``) for var and grad in
# float16, bfloat16 or float32 (``T``), computed in float32 with var rounded to ``T`` once. Adam's
# defaults do not survive half types (bfloat16 rounds 0.999 to 1, float16 rounds 1e-8 to 0 and
# small squared gradients to 0); the optimizers use these ops for half variables.

def apply_adam_async_v2(var: State, m: State, v: State, beta1_power: State, beta2_power: State,
                        lr: TensorLike, beta1: TensorLike, beta2: TensorLike, epsilon: TensorLike,
                        grad: TensorLike, use_locking: bool = False, use_nesterov: bool = False,
                        name: Optional[str] = None) -> tf.Tensor:
    """``ApplyAdamAsyncV2``: ``apply_adam_async`` with float32 m, v, powers and
    hyper-parameters."""
    return load_library().apply_adam_async_v2(
        var=var, m=m, v=v, beta1_power=beta1_power, beta2_power=beta2_power, lr=lr,
        beta1=beta1, beta2=beta2, epsilon=epsilon, grad=grad, use_locking=use_locking,
        use_nesterov=use_nesterov, name=name)


def sparse_apply_adam_async_v2(var: State, m: State, v: State, beta1_power: State,
                               beta2_power: State, lr: TensorLike, beta1: TensorLike,
                               beta2: TensorLike, epsilon: TensorLike, grad: TensorLike,
                               indices: TensorLike, use_locking: bool = False,
                               apply_sparse_rmsprop: bool = False,
                               name: Optional[str] = None) -> tf.Tensor:
    """``SparseApplyAdamAsyncV2``: ``sparse_apply_adam_async`` with float32 m, v, powers and
    hyper-parameters."""
    return load_library().sparse_apply_adam_async_v2(
        var=var, m=m, v=v, beta1_power=beta1_power, beta2_power=beta2_power, lr=lr,
        beta1=beta1, beta2=beta2, epsilon=epsilon, grad=grad, indices=indices,
        use_locking=use_locking, apply_sparse_rmsprop=apply_sparse_rmsprop, name=name)


def resource_apply_adam_async_v2(var: State, m: State, v: State, beta1_power: State,
                                 beta2_power: State, lr: TensorLike, beta1: TensorLike,
                                 beta2: TensorLike, epsilon: TensorLike, grad: TensorLike,
                                 use_locking: bool = False, use_nesterov: bool = False,
                                 name: Optional[str] = None) -> Optional[tf.Operation]:
    """``ResourceApplyAdamAsyncV2``: ``resource_apply_adam_async`` with float32 m, v, powers and
    hyper-parameters."""
    return load_library().resource_apply_adam_async_v2(
        var=var, m=m, v=v, beta1_power=beta1_power, beta2_power=beta2_power, lr=lr,
        beta1=beta1, beta2=beta2, epsilon=epsilon, grad=grad, use_locking=use_locking,
        use_nesterov=use_nesterov, name=name)


def resource_sparse_apply_adam_async_v2(var: State, m: State, v: State, beta1_power: State,
                                        beta2_power: State, lr: TensorLike, beta1: TensorLike,
                                        beta2: TensorLike, epsilon: TensorLike, grad: TensorLike,
                                        indices: TensorLike, use_locking: bool = False,
                                        apply_sparse_rmsprop: bool = False,
                                        name: Optional[str] = None) -> Optional[tf.Operation]:
    """``ResourceSparseApplyAdamAsyncV2``: ``resource_sparse_apply_adam_async`` with float32
    m, v, powers and hyper-parameters."""
    return load_library().resource_sparse_apply_adam_async_v2(
        var=var, m=m, v=v, beta1_power=beta1_power, beta2_power=beta2_power, lr=lr,
        beta1=beta1, beta2=beta2, epsilon=epsilon, grad=grad, indices=indices,
        use_locking=use_locking, apply_sparse_rmsprop=apply_sparse_rmsprop, name=name)


def param_dtype(dtype: tf.dtypes.DType) -> tf.dtypes.DType:
    """The type of m, v, the powers and the hyper-parameters the optimizers give a variable of
    ``dtype``: float32 for float16 and bfloat16 (with the V2 ops), the variable's own otherwise."""
    dtype = tf.as_dtype(dtype).base_dtype
    return tf.float32 if dtype in (tf.float16, tf.bfloat16) else dtype


def hyperparameter(value: Hyperparameter, name: str, owner: str,
                   dtype: Optional[tf.dtypes.DType] = None) -> tf.Tensor:
    """``value`` (called first if it is callable) as a scalar tensor named ``name``.

    With ``dtype``, a Python number becomes a constant of that type directly (a float64 variable's
    ``beta2`` is float64's 0.999, not float32's 0.99900001) and a tensor of another type is cast;
    without it, a Python float becomes float32, as ``tf.convert_to_tensor`` makes it. ``owner``
    (the optimizer's class) starts the message of the ``TypeError`` for a value that is not a
    number and of the ``ValueError`` for one that is not a scalar.
    """
    dtype = None if dtype is None else tf.as_dtype(dtype)
    if callable(value):
        value = value()
    try:
        tensor = tf.convert_to_tensor(value, dtype_hint=dtype, name=name)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{owner}: {name} must be a number, a scalar tensor or a callable that "
                        f"returns one, got {value!r} ({e})") from e
    if not (tensor.dtype.is_floating or tensor.dtype.is_integer):
        raise TypeError(f"{owner}: {name} must be a number, a scalar tensor or a callable that "
                        f"returns one, got a {tensor.dtype.name} value: {value!r}")
    if tensor.shape.rank not in (None, 0):
        raise ValueError(f"{owner}: {name} must be a scalar, got shape "
                         f"{tensor.shape.as_list()}: {value!r}")
    return tensor if dtype is None or tensor.dtype == dtype else tf.cast(tensor, dtype)
