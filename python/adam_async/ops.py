"""The raw AdamAsync ops, with DeepRec's argument names and defaults.

``var, m, v, beta1_power, beta2_power`` are ref variables (``*_apply_adam_async``) or resource
handles (``resource_*``); the powers are updated in place by the op (``beta1_power *= beta1``).
Sparse ops apply duplicate indices one after the other; sum them first for Adam's semantics (the
optimizers do).
"""

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
