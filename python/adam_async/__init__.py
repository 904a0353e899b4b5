"""DeepRec's AdamAsync optimizer for stock TensorFlow.

The ops (``ApplyAdamAsync``, ``SparseApplyAdamAsync``, ``ResourceApplyAdamAsync``,
``ResourceSparseApplyAdamAsync``) live in ``build/plugin/libadam_async_ops.so`` (``make plugin``),
or the library named by the ``ADAM_ASYNC_LIBRARY`` environment variable.

>>> import tensorflow.compat.v1 as tf
>>> from adam_async import AdamAsyncOptimizer
>>> opt = AdamAsyncOptimizer(0.1)  # DeepRec's tf.train.AdamAsyncOptimizer

For Keras 3 / TF2 code: ``from adam_async.keras import AdamAsync``.
"""

from adam_async._loader import (
    ENV_VAR,
    PluginNotFoundError,
    PluginVersionError,
    library_path,
    load_library,
)
from adam_async.ops import (
    apply_adam_async,
    resource_apply_adam_async,
    resource_sparse_apply_adam_async,
    sparse_apply_adam_async,
)
from adam_async.optimizer import AdamAsyncOptimizer

__all__ = [
    "ENV_VAR",
    "AdamAsyncOptimizer",
    "PluginNotFoundError",
    "PluginVersionError",
    "apply_adam_async",
    "library_path",
    "load_library",
    "resource_apply_adam_async",
    "resource_sparse_apply_adam_async",
    "sparse_apply_adam_async",
]
