"""One process of the ParameterServerStrategy fault-test clusters (run by
test_tf_plugin_ps_faults.py), or the same model trained in one process.

Usage: ``ps_strategy_fault_task.py CLUSTER_JSON server JOB INDEX`` (a ps or worker task: serves
until killed), ``ps_strategy_fault_task.py CLUSTER_JSON chief SHARDS WAVES STEPS CHECKPOINT_DIR
[RESUME_FILE]`` or ``ps_strategy_fault_task.py {} local 0 WAVES STEPS CHECKPOINT_DIR``. The chief
trains the model of ps_strategy_task.py with AdamAsync in a custom loop, in waves of STEPS steps
scheduled on the workers and joined; a FixedShardsPartitioner(SHARDS) splits its embedding table
and dense kernel over the ps tasks (SHARDS 0: every variable whole on one ps). With RESUME_FILE
it waits after its first wave, no step in flight, until that file exists. After WAVES waves it
goes on (at most MORE_WAVES more) until a wave has run on every worker: at once in a healthy
cluster, after a worker's restart once the worker has rejoined. ``local`` trains the same model
in this process with no cluster. Both restore the latest checkpoint of a
``tf.train.CheckpointManager`` in CHECKPOINT_DIR, if there is one, before training, and save one
after every wave. Every batch has ids in both halves of the table, so every step updates every
variable (every shard) once.

Keras 3 cannot checkpoint a sharded variable (``tf.train.Checkpoint(model=model)`` fails in
``save()`` with ``AttributeError: 'ShardedVariable' object has no attribute 'device'``: the Keras
variable hands its ``ShardedVariable`` to the saver as if it were one tensor); the checkpoint
holds the model's TensorFlow variables instead, by path, which TensorFlow saves whole (a sharded
one as the slices of one tensor), and the optimizer.

Output, one JSON object a line: ``{"start": VALUES}`` (after the restore), then after each wave
``{"wave": I, "loss": L, "workers": [steps worker 0 ran, steps worker 1 ran], "saved": VALUES}``
(the loss on all the data; the values just saved), where VALUES maps the name of every model and
optimizer variable (a shard's own name for shards) to its value.
"""

import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from adam_async.keras import AdamAsync, shards  # noqa: E402
from ps_strategy_task import (IDS_PER_EXAMPLE, data, key, make_model, serve,  # noqa: E402
                              strategy_and_coordinator)

MORE_WAVES = 100


def tf_variable(var):
    return var.value if isinstance(var, keras.Variable) else var


def variable_values(opt, variables):
    """Every model variable (each shard of a sharded one) and optimizer variable, by name."""
    named = {key(v): v for v in variables}
    named.update({v.path: v for v in opt.variables})
    return {name: np.asarray(v.numpy()).tolist() for name, v in sorted(named.items())}


def wait_for(path, timeout_s=120):
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"chief: no {path} after {timeout_s} s")
        time.sleep(0.05)


def emit(**record):
    print(json.dumps(record), flush=True)


def train(strategy, coordinator, waves, steps, checkpoint_dir, resume_file=None):
    with strategy.scope():
        model = make_model()
        opt = AdamAsync(0.02, use_locking=True)
        variables = shards(model.trainable_variables)
        opt.build(variables)
    checkpoint = tf.train.Checkpoint(
        weights={v.path.replace("/", "."): tf_variable(v) for v in model.weights},
        optimizer=opt)
    manager = tf.train.CheckpointManager(checkpoint, checkpoint_dir, max_to_keep=1)
    if manager.latest_checkpoint:  # else a fresh start
        checkpoint.restore(manager.latest_checkpoint).assert_existing_objects_matched()
    emit(start=variable_values(opt, variables))

    ids, y = data(gaps=False)
    all_ids, all_y = ids.reshape(-1, IDS_PER_EXAMPLE), y.reshape(-1)

    def loss_fn(ids, y):
        return tf.reduce_mean(tf.square(tf.squeeze(model(ids), -1) - tf.cast(y, tf.float32)))

    def replica_fn(ids, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(ids, y)
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables))

    if coordinator is None:
        batches = iter(tf.data.Dataset.from_tensor_slices((ids, y)).repeat())

        @tf.function
        def local_step():
            replica_fn(*next(batches))

        def step():
            local_step()
            return 0
    else:
        dataset_fn = lambda: tf.data.Dataset.from_tensor_slices((ids, y)).repeat()  # noqa: E731
        iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))

        @tf.function
        def worker_step(iterator):
            strategy.run(replica_fn, args=next(iterator))
            return tf.distribute.coordinator.experimental_get_current_worker_index()

        def step():
            return coordinator.schedule(worker_step, args=(iterator,))

    for wave in range(waves + MORE_WAVES):
        ran = [step() for _ in range(steps)]
        if coordinator is not None:
            coordinator.join()
            ran = [r.fetch() for r in ran]
        record = {"wave": wave, "loss": float(loss_fn(all_ids, all_y)),
                  "workers": np.bincount(ran, minlength=2).tolist(),
                  "saved": variable_values(opt, variables)}
        # Nothing between the save and the line that reports it reads the (maybe lost) ps.
        manager.save()
        emit(**record)
        if wave == 0 and resume_file:
            wait_for(resume_file)
        if wave + 1 >= waves and (coordinator is None or min(record["workers"]) > 0):
            break


def main():
    cluster = tf.train.ClusterSpec(json.loads(sys.argv[1]))
    if sys.argv[2] == "server":
        serve(cluster, sys.argv[3], int(sys.argv[4]))
        return
    (n_shards, waves, steps), checkpoint_dir = map(int, sys.argv[3:6]), sys.argv[6]
    if sys.argv[2] == "chief":
        strategy, coordinator = strategy_and_coordinator(cluster, n_shards)
    else:
        strategy, coordinator = tf.distribute.get_strategy(), None
    train(strategy, coordinator, waves, steps, checkpoint_dir, *sys.argv[7:])


if __name__ == "__main__":
    main()
