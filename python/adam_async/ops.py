"""The raw AdamAsync ops, with DeepRec's argument names and defaults.

``var, m, v, beta1_power, beta2_power`` are ref variables (``*_apply_adam_async``) or resource
handles (``resource_*``); the powers are updated in place by the op (``beta1_power *= beta1``).
Sparse ops apply duplicate indices one after the other; sum them first for Adam's semantics (the
optimizers do). The ``*_v2`` ops take m, v, the powers and the hyper-parameters in float32 for
half variables.
"""

import tensorflow as tf

from adam_async._loader import load_library


def apply_adam_async(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad,
                     use_locking=False, use_nesterov=False, name=None):
    """``ApplyAdamAsync``: a dense step on ref variables; returns the updated ``var`` ref."""
    return load_library().apply_adam_async(
        var=var, m=m, v=v, beta1_power=beta1_power, beta2_power=beta2_power, lr=lr,
        beta1=beta1, beta2=beta2, epsilon=epsilon, grad=grad, use_locking=use_locking,
        use_nesterov=use_nesterov, name=name)


def sparse_apply_adam_async(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon,
                            grad, indices, use_locking=False, apply_sparse_rmsprop=False,
                            name=None):
    """``SparseApplyAdamAsync``: lazy Adam (or RMSProp) on the rows ``indices`` of ref variables."""
    return load_library().sparse_apply_adam_async(
        var=var, m=m, v=v, beta1_power=beta1_power, beta2_power=beta2_power, lr=lr,
        beta1=beta1, beta2=beta2, epsilon=epsilon, grad=grad, indices=indices,
        use_locking=use_locking, apply_sparse_rmsprop=apply_sparse_rmsprop, name=name)


def resource_apply_adam_async(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon,
                              grad, use_locking=False, use_nesterov=False, name=None):
    """``ResourceApplyAdamAsync``: a dense step on resource variables (handles)."""
    return load_library().resource_apply_adam_async(
        var=var, m=m, v=v, beta1_power=beta1_power, beta2_power=beta2_power, lr=lr,
        beta1=beta1, beta2=beta2, epsilon=epsilon, grad=grad, use_locking=use_locking,
        use_nesterov=use_nesterov, name=name)


def resource_sparse_apply_adam_async(var, m, v, beta1_power, beta2_power, lr, beta1, beta2,
                                     epsilon, grad, indices, use_locking=False,
                                     apply_sparse_rmsprop=False, name=None):
    """``ResourceSparseApplyAdamAsync``: the sparse step on resource variables (handles)."""
    return load_library().resource_sparse_apply_adam_async(
        var=var, m=m, v=v, beta1_power=beta1_power, beta2_power=beta2_power, lr=lr,
        beta1=beta1, beta2=beta2, epsilon=epsilon, grad=grad, indices=indices,
        use_locking=use_locking, apply_sparse_rmsprop=apply_sparse_rmsprop, name=name)


# The V2 ops: m, v, the powers and lr, beta1, beta2, epsilon in float32 (``U``) for var and grad in
# float16, bfloat16 or float32 (``T``), computed in float32 with var rounded to ``T`` once. Adam's
# defaults do not survive half types (bfloat16 rounds 0.999 to 1, float16 rounds 1e-8 to 0 and
# small squared gradients to 0); the optimizers use these ops for half variables.

def apply_adam_async_v2(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad,
                        use_locking=False, use_nesterov=False, name=None):
    """``ApplyAdamAsyncV2``: ``apply_adam_async`` with float32 m, v, powers and
    hyper-parameters."""
    return load_library().apply_adam_async_v2(
        var=var, m=m, v=v, beta1_power=beta1_power, beta2_power=beta2_power, lr=lr,
        beta1=beta1, beta2=beta2, epsilon=epsilon, grad=grad, use_locking=use_locking,
        use_nesterov=use_nesterov, name=name)


def sparse_apply_adam_async_v2(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon,
                               grad, indices, use_locking=False, apply_sparse_rmsprop=False,
                               name=None):
    """``SparseApplyAdamAsyncV2``: ``sparse_apply_adam_async`` with float32 m, v, powers and
    hyper-parameters."""
    return load_library().sparse_apply_adam_async_v2(
        var=var, m=m, v=v, beta1_power=beta1_power, beta2_power=beta2_power, lr=lr,
        beta1=beta1, beta2=beta2, epsilon=epsilon, grad=grad, indices=indices,
        use_locking=use_locking, apply_sparse_rmsprop=apply_sparse_rmsprop, name=name)


def resource_apply_adam_async_v2(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon,
                                 grad, use_locking=False, use_nesterov=False, name=None):
    """``ResourceApplyAdamAsyncV2``: ``resource_apply_adam_async`` with float32 m, v, powers and
    hyper-parameters."""
    return load_library().resource_apply_adam_async_v2(
        var=var, m=m, v=v, beta1_power=beta1_power, beta2_power=beta2_power, lr=lr,
        beta1=beta1, beta2=beta2, epsilon=epsilon, grad=grad, use_locking=use_locking,
        use_nesterov=use_nesterov, name=name)


def resource_sparse_apply_adam_async_v2(var, m, v, beta1_power, beta2_power, lr, beta1, beta2,
                                        epsilon, grad, indices, use_locking=False,
                                        apply_sparse_rmsprop=False, name=None):
    """``ResourceSparseApplyAdamAsyncV2``: ``resource_sparse_apply_adam_async`` with float32
    m, v, powers and hyper-parameters."""
    return load_library().resource_sparse_apply_adam_async_v2(
        var=var, m=m, v=v, beta1_power=beta1_power, beta2_power=beta2_power, lr=lr,
        beta1=beta1, beta2=beta2, epsilon=epsilon, grad=grad, indices=indices,
        use_locking=use_locking, apply_sparse_rmsprop=apply_sparse_rmsprop, name=name)


def param_dtype(dtype):
    """The type of m, v, the powers and the hyper-parameters the optimizers give a variable of
    ``dtype``: float32 for float16 and bfloat16 (with the V2 ops), the variable's own otherwise."""
    dtype = tf.as_dtype(dtype).base_dtype
    return tf.float32 if dtype in (tf.float16, tf.bfloat16) else dtype
