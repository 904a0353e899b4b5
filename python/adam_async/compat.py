"""``import adam_async.compat``: DeepRec's ``tf.train.AdamAsyncOptimizer`` for unchanged scripts.

Importing this module registers :class:`adam_async.AdamAsyncOptimizer` as
``tf.compat.v1.train.AdamAsyncOptimizer``, which is what ``tf.train.AdamAsyncOptimizer`` names in
a TF1 script run on TensorFlow 2 (``import tensorflow.compat.v1 as tf``), and also as
``tf.train.AdamAsyncOptimizer`` where ``tf.train`` is itself the TF1 module (TensorFlow 1.x)::

    import tensorflow.compat.v1 as tf
    import adam_async.compat  # the one line AdamAsync adds

    tf.disable_v2_behavior()  # as every TF1 script on TensorFlow 2 (docs/tf-plugin.md)
    opt = tf.train.AdamAsyncOptimizer(0.1)

Importing it again, or calling :func:`register` again, changes nothing. A TensorFlow that already
has an ``AdamAsyncOptimizer`` (DeepRec's own build) keeps it: the module warns and leaves it in
place. Only the Python class is registered; the op library is loaded when a graph first uses it.
"""

import warnings
from types import ModuleType

import tensorflow as tf

from adam_async.optimizer import AdamAsyncOptimizer

_NAME = "AdamAsyncOptimizer"


def _v1_train_modules() -> list[tuple[str, ModuleType]]:
    """(public name, module) of every TF1 ``train`` module of the running TensorFlow."""
    modules = [("tf.compat.v1.train", tf.compat.v1.train)]
    # TensorFlow 1.x: tf.train is the TF1 module (it has the TF1 optimizers), and a module object
    # apart from tf.compat.v1.train. TensorFlow 2's tf.train has no optimizers and gets none.
    if hasattr(tf.train, "GradientDescentOptimizer") and tf.train is not tf.compat.v1.train:
        modules.append(("tf.train", tf.train))
    return modules


def register() -> list[str]:
    """Makes ``AdamAsyncOptimizer`` available under the TF1 ``train`` modules; idempotent.

    Returns the public names (``"tf.compat.v1.train"``, ...) of the modules where it is ours now.
    An ``AdamAsyncOptimizer`` that is not ours is left alone with a :class:`UserWarning`.
    """
    registered = []
    for public, module in _v1_train_modules():
        existing = getattr(module, _NAME, None)
        if existing is None:
            setattr(module, _NAME, AdamAsyncOptimizer)
        elif existing is not AdamAsyncOptimizer:
            where = f"{getattr(existing, '__module__', '?')}.{getattr(existing, '__qualname__', existing)}"
            warnings.warn(
                f"{public}.{_NAME} already exists ({where}); adam_async.compat leaves it in place "
                f"(use adam_async.{_NAME} to get this package's optimizer)",
                UserWarning, stacklevel=2)
            continue
        registered.append(public)
    return registered


register()
