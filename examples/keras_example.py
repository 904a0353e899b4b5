"""A Keras 3 model trained with AdamAsync, saved, reloaded without custom_objects, trained on.

    python examples/keras_example.py [OUT_DIR]    # model.keras goes there (default: a temp dir)

The embedding's gradients are tf.IndexedSlices, so its rows take the lazy sparse op; the dense
layers take the dense op. Prints the loss before training, after 5 epochs, after reloading the
saved model (the same loss: weights and optimizer slots come back) and after 5 more epochs.
"""

import pathlib
import sys
import tempfile

import keras
import numpy as np

import adam_async  # noqa: F401  registers AdamAsync with Keras: load_model needs nothing more
from adam_async.keras import AdamAsync

rng = np.random.default_rng(0)
ids = rng.integers(0, 100, size=(512, 4))
labels = (rng.normal(size=100)[ids].sum(axis=1) > 0).astype("float32")

keras.utils.set_random_seed(0)
model = keras.Sequential([
    keras.Input((4,), dtype="int32"),
    keras.layers.Embedding(100, 8),
    keras.layers.Flatten(),
    keras.layers.Dense(16, activation="relu"),
    keras.layers.Dense(1, activation="sigmoid"),
])
model.compile(optimizer=AdamAsync(learning_rate=0.01), loss="binary_crossentropy")
print(f"loss before training: {model.evaluate(ids, labels, verbose=0):.6f}")
model.fit(ids, labels, epochs=5, batch_size=32, shuffle=False, verbose=0)
trained = model.evaluate(ids, labels, verbose=0)
print(f"loss after 5 epochs: {trained:.6f}")

out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp())
path = out / "model.keras"
model.save(path)
reloaded = keras.models.load_model(path)
optimizer = reloaded.optimizer
print(f"reloaded {path}: {type(optimizer).__module__}.{type(optimizer).__name__} "
      f"after {int(optimizer.iterations.numpy())} steps, "
      f"loss {reloaded.evaluate(ids, labels, verbose=0):.6f}")
reloaded.fit(ids, labels, epochs=5, batch_size=32, shuffle=False, verbose=0)
print(f"loss after 5 more epochs: {reloaded.evaluate(ids, labels, verbose=0):.6f}")
