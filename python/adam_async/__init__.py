"""DeepRec's AdamAsync optimizer for stock TensorFlow.

>>> import tensorflow.compat.v1 as tf
>>> from adam_async import AdamAsyncOptimizer
>>> opt = AdamAsyncOptimizer(0.1)  # DeepRec's tf.train.AdamAsyncOptimizer

DeepRec scripts that call ``tf.train.AdamAsyncOptimizer`` need one added line,
``import adam_async.compat``, beside the two that any TF1 script needs on TensorFlow 2
(``import tensorflow.compat.v1 as tf``, ``tf.disable_v2_behavior()``; docs/tf-plugin.md). For
Keras 3 / TF2 code: ``from adam_async.keras import AdamAsync``;
``import adam_async`` registers it with Keras, so ``keras.models.load_model`` restores models
compiled with it.

Install: the wheel (``make wheel`` writes ``dist/adam_async-*.whl``; ``pip install`` it next to
the TensorFlow it was built for) carries the op library. Where the library is looked for: the
file named by ``$ADAM_ASYNC_LIBRARY``, else the one inside this package (the wheel's), else the
checkout's ``build/plugin/libadam_async_ops.so`` (``make plugin``) for the editable install.
The ops are ``ApplyAdamAsync``, ``SparseApplyAdamAsync``, ``ResourceApplyAdamAsync`` and
``ResourceSparseApplyAdamAsync``, and their ``V2`` forms for half variables; the library is loaded
when an op is first built, but ``import adam_async`` already refuses one built for another
TensorFlow. ``__version__`` is the installed package's version (the wheel's names its TensorFlow,
``0.1.0+tf2.21.0``). The guide is docs/python.md.

Half precision: for float16 and bfloat16 variables both optimizers keep m, v and the beta powers
in float32 and call the ``*AdamAsyncV2`` ops with float32 hyper-parameters; the update is computed
in float32 and the weight rounded once. DeepRec's ops give every input the variable's type, where
Adam's defaults break (bfloat16 rounds ``beta2 = 0.999`` to 1; float16 rounds ``epsilon = 1e-8``
and ``(1 - beta2) * g**2`` for gradients below about 0.008 to 0). Those ops are unchanged, so
DeepRec graphs run as before, float16 ones with stock ``ResourceApplyAdam``'s bits at step one.
"""

from adam_async._loader import (
    ENV_VAR,
    PluginNotFoundError,
    PluginRuntimeError,
    PluginVersionError,
    check_tensorflow,
    library_path,
    load_library,
)
from adam_async._version import __version__

# A library built for another TensorFlow is named here, at import, not at the first op.
check_tensorflow()
from adam_async.ops import (
    apply_adam_async,
    apply_adam_async_v2,
    resource_apply_adam_async,
    resource_apply_adam_async_v2,
    resource_sparse_apply_adam_async,
    resource_sparse_apply_adam_async_v2,
    sparse_apply_adam_async,
    sparse_apply_adam_async_v2,
)
from adam_async.optimizer import AdamAsyncOptimizer

# Registers AdamAsync with Keras' serialization, so that a saved model reloads after
# `import adam_async` alone. About 10 ms: `import tensorflow` has imported keras already.
from adam_async import keras  # noqa: F401

__all__ = [
    "ENV_VAR",
    "AdamAsyncOptimizer",
    "PluginNotFoundError",
    "PluginRuntimeError",
    "PluginVersionError",
    "__version__",
    "check_tensorflow",
    "apply_adam_async",
    "apply_adam_async_v2",
    "library_path",
    "load_library",
    "resource_apply_adam_async",
    "resource_apply_adam_async_v2",
    "resource_sparse_apply_adam_async",
    "resource_sparse_apply_adam_async_v2",
    "sparse_apply_adam_async",
    "sparse_apply_adam_async_v2",
]
