"""One process of the ParameterServerStrategy test cluster (run by test_tf_plugin_ps.py).

Usage: ``ps_strategy_task.py CLUSTER_JSON server JOB INDEX`` (a ps or worker task: serves until
killed) or ``ps_strategy_task.py CLUSTER_JSON chief STEPS EMB_DTYPE``. The chief trains a Keras
model with AdamAsync in a custom loop (``ClusterCoordinator.schedule``) on the two workers; a
``FixedShardsPartitioner(2)`` splits the embedding table (of EMB_DTYPE, float32 or bfloat16) and
the dense kernel over both ps tasks. It prints the results as JSON. ps_strategy_fault_task.py
takes its model, data and cluster set-up from here.
"""

import collections
import json
import os
import re
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import adam_async  # noqa: E402
from adam_async.keras import AdamAsync, shards  # noqa: E402

ROWS, IDS_PER_EXAMPLE, BATCH, BATCHES = 100, 3, 16, 32


def serve(cluster, job, index):
    adam_async.load_library()  # the ps tasks run the update kernels
    tf.distribute.Server(cluster, job_name=job, task_index=index, protocol="grpc").join()


def data(gaps=True):
    """BATCHES fixed batches of a sparse linear target. With `gaps`, every fourth one has ids
    from the first half of the table only, so the second embedding shard gets an empty update
    there; without, every batch has ids in both halves (BATCH * IDS_PER_EXAMPLE random ids)."""
    rng = np.random.default_rng(0)
    true_w = rng.normal(size=ROWS).astype(np.float32)
    ids = rng.integers(0, ROWS, size=(BATCHES, BATCH, IDS_PER_EXAMPLE))
    if gaps:
        ids[::4] %= ROWS // 2
    return ids, true_w[ids].sum(axis=-1) + 0.5


def key(var):
    """A variable's name in the results: a Keras variable's path, a shard's TF name."""
    return getattr(var, "path", var.name)


def strategy_and_coordinator(cluster, shards=2):
    """A ParameterServerStrategy run from this (the chief) process, and its ClusterCoordinator.
    A FixedShardsPartitioner(shards) splits variables over the ps tasks; with `shards` 0 every
    variable is whole on one ps."""
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        cluster, rpc_layer="grpc", task_type="chief", task_id=0)
    partitioner = (tf.distribute.experimental.partitioners.FixedShardsPartitioner(shards)
                   if shards else None)
    strategy = tf.distribute.experimental.ParameterServerStrategy(
        resolver, variable_partitioner=partitioner)
    return strategy, tf.distribute.coordinator.ClusterCoordinator(strategy)


def make_model(emb_dtype="float32"):
    """The sparse linear model: an embedding table of ROWS rows (its layer named "emb") and a
    dense layer ("out") over the IDS_PER_EXAMPLE looked-up rows."""
    return keras.Sequential([
        keras.Input((IDS_PER_EXAMPLE,), dtype="int64"),
        keras.layers.Embedding(ROWS, 1, embeddings_initializer="zeros", name="emb",
                               dtype=emb_dtype),
        keras.layers.Flatten(),
        # Seeded: an unlucky draw (a kernel near zero passes the embedding almost no gradient)
        # once left the bfloat16 run far short of its loss bound.
        keras.layers.Dense(1, name="out",
                           kernel_initializer=keras.initializers.GlorotUniform(seed=0)),
    ])


def chief(cluster, steps, emb_dtype):
    strategy, coordinator = strategy_and_coordinator(cluster)
    with strategy.scope():
        model = make_model(emb_dtype)
        # use_locking: two workers may update one variable at once; its powers must count both.
        opt = AdamAsync(0.05, use_locking=True)
        # Keras cannot differentiate a sharded variable: the tape and the optimizer get shards.
        variables = shards(model.trainable_variables)
        opt.build(variables)
    emb_shards = model.get_layer("emb").embeddings.value.variables
    bounds = np.cumsum([0] + [s.shape[0] for s in emb_shards])

    ids, y = data()
    dataset_fn = lambda: tf.data.Dataset.from_tensor_slices((ids, y)).repeat()  # noqa: E731
    iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))

    def loss_fn(ids, y):
        return tf.reduce_mean(tf.square(tf.squeeze(model(ids), -1) - tf.cast(y, tf.float32)))

    grad_kinds = {}
    step_graphs = []  # the graph of each trace of `step`, for the update ops in it

    @tf.function
    def step(iterator):
        def replica_fn(ids, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(ids, y)
            grads = tape.gradient(loss, variables)
            grad_kinds.update({key(v): type(g).__name__ for v, g in zip(variables, grads)})
            opt.apply_gradients(zip(grads, variables))
            # Which embedding shards this step updated (a shard no id falls in gets none).
            return tf.stack([tf.reduce_any((ids >= lo) & (ids < hi))
                             for lo, hi in zip(bounds[:-1], bounds[1:])])
        step_graphs.append(tf.compat.v1.get_default_graph())
        return strategy.run(replica_fn, args=next(iterator))

    all_ids, all_y = ids.reshape(-1, IDS_PER_EXAMPLE), y.reshape(-1)
    first_loss = float(loss_fn(all_ids, all_y))
    touched = [coordinator.schedule(step, args=(iterator,)) for _ in range(steps)]
    coordinator.join()
    touched = np.sum([t.fetch() for t in touched], axis=0)
    eval_loss = float(loss_fn(all_ids, all_y))

    update_ops = collections.Counter(
        op.type for graph in step_graphs for op in graph.get_operations()
        if "AdamAsync" in op.type)
    updates = {key(v): steps for v in variables}
    updates.update({key(s): int(n) for s, n in zip(emb_shards, touched)})
    slots = {s.path: s for s in opt.variables}
    result = {"first_loss": first_loss, "eval_loss": eval_loss, "grad_kinds": grad_kinds,
              "update_ops": update_ops, "updates": updates, "variables": {}}
    for v in variables:
        # AdamAsync names its slots "<optimizer>/<variable path or name>_<slot>", like Keras.
        prefix = "adam_async/" + re.sub(r"[^A-Za-z0-9_.>-]", "_", key(v))
        mine = {n: slots[f"{prefix}_{n}"] for n in ("m", "v", "beta1_power", "beta2_power")}
        result["variables"][key(v)] = {
            "device": (v.value if isinstance(v, keras.Variable) else v).device,
            "slot_devices": sorted({s.value.device for s in mine.values()}),
            "powers": [float(mine[p].numpy()) for p in ("beta1_power", "beta2_power")],
        }
    print(json.dumps(result), flush=True)


def main():
    cluster = tf.train.ClusterSpec(json.loads(sys.argv[1]))
    if sys.argv[2] == "server":
        serve(cluster, sys.argv[3], int(sys.argv[4]))
    else:
        chief(cluster, int(sys.argv[3]), sys.argv[4])


if __name__ == "__main__":
    main()
