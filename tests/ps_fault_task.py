"""One task of the compat.v1 fault-test clusters (run by test_tf_plugin_ps_faults.py), or the
same model trained in one process.

Usage: ``ps_fault_task.py CLUSTER_JSON JOB INDEX STEPS CHECKPOINT_DIR``. A ``ps`` task serves
until killed. A ``worker`` trains a sparse linear model (between-graph replication, resource
variables on the ps tasks) with AdamAsyncOptimizer in a ``MonitoredTrainingSession`` set up as a
user should for faults (docs/tf-plugin.md, "Faults"): the chief (worker 0) restores from and
saves to CHECKPOINT_DIR; ``GRPC_FAIL_FAST=true``, ``device_filters`` (a worker talks to the ps
tasks and itself only) and ``operation_timeout_in_ms``; each step runs in ``run_step_fn``, where
a lost task (UnavailableError, AbortedError) ends the worker instead of the session's endless
recovery. JOB ``local`` (CLUSTER_JSON ``{}``, INDEX 0) trains the same graph in this process
alone.

Every variable gets one more slot, ``updates`` (``<var>/AdamAsync_4``, on the variable's ps like
its powers), which each update op advances by one right after it, on the ps: the number of
updates that actually ran, whoever ran them and whatever was killed, for the powers to be
checked against exactly.

Output, one JSON object a line: ``{"start": VALUES, "eval_loss": L}`` once the session is ready
(VALUES: the chief's, the values it initialised or restored; null for other workers), then
``{"step": I, "loss": L}`` after each step (the loss of its batch), then (chief)
``{"end": VALUES, "eval_loss": L}`` once every worker has finished. VALUES maps every global
variable's name to its value; an eval_loss is the loss on 10 fixed batches.
"""

import json
import os
import re
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# An RPC to a task that is gone fails at once instead of waiting for the task to come back
# (TensorFlow's default waits for some RPCs, such as those that close a session, forever).
os.environ.setdefault("GRPC_FAIL_FAST", "true")

import numpy as np  # noqa: E402
import tensorflow.compat.v1 as tf  # noqa: E402

import adam_async  # noqa: E402

tf.disable_v2_behavior()
ROWS, IDS_PER_EXAMPLE, BATCH = 100, 3, 32
# How long a blocking call (a step's RPCs to the ps tasks) may take before it fails with
# DeadlineExceeded: a task that hangs rather than dies.
OPERATION_TIMEOUT_MS = 10_000


class TaskLostError(RuntimeError):
    """A task of the cluster is gone: this worker stops rather than wait for it."""


class CountingAdamAsync(adam_async.AdamAsyncOptimizer):
    """AdamAsyncOptimizer with an ``updates`` slot that each update op advances by one."""

    def _create_slots(self, var_list):
        super()._create_slots(var_list)
        for var in var_list:
            self._get_or_make_slot(var, tf.constant(0, tf.int64), "updates", self._name)

    def _counted(self, var, update):
        # apply_gradients builds this colocated with `var`: the count runs on the variable's ps
        # after the update and needs nothing else from the worker, so once the update has run a
        # killed worker cannot keep the count from running (an executor that aborts its step
        # still runs the ops that are ready).
        with tf.control_dependencies([update]):
            return self.get_slot(var, "updates").assign_add(1).op

    def _resource_apply_dense(self, grad, var):
        return self._counted(var, super()._resource_apply_dense(grad, var))

    def _resource_apply_sparse(self, grad, var, indices):
        return self._counted(var, super()._resource_apply_sparse(grad, var, indices))


def values(sess):
    return {v.op.name: np.asarray(x).tolist()
            for v, x in zip(tf.global_variables(), sess.run(tf.global_variables()))}


def emit(**record):
    print(json.dumps(record), flush=True)


def main():
    cluster_def = json.loads(sys.argv[1])
    job, index, steps, checkpoint_dir = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), \
        sys.argv[5]
    adam_async.load_library()  # the ps tasks run the update kernels
    if job == "local":
        target, n_workers, device = "", 1, None
        config = tf.ConfigProto(operation_timeout_in_ms=OPERATION_TIMEOUT_MS)
    else:
        cluster = tf.train.ClusterSpec(cluster_def)
        server = tf.distribute.Server(cluster, job_name=job, task_index=index)
        if job == "ps":
            server.join()
            return
        target, n_workers = server.target, cluster.num_tasks("worker")
        device = tf.train.replica_device_setter(worker_device=f"/job:worker/task:{index}",
                                                cluster=cluster)
        config = tf.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{index}"],
                                operation_timeout_in_ms=OPERATION_TIMEOUT_MS)
    with tf.device(device):
        global_step = tf.train.get_or_create_global_step()
        emb, bias = (tf.get_variable(name, shape, initializer=tf.zeros_initializer(),
                                     use_resource=True)
                     for name, shape in (("emb", [ROWS, 1]), ("bias", [])))
        done = tf.get_variable("done", [], tf.int32, initializer=tf.zeros_initializer(),
                               trainable=False, use_resource=True)
    ids = tf.placeholder(tf.int64, [BATCH, IDS_PER_EXAMPLE])
    y = tf.placeholder(tf.float32, [BATCH])
    pred = tf.reduce_sum(tf.nn.embedding_lookup(emb, ids), axis=[1, 2]) + bias
    loss = tf.reduce_mean(tf.square(pred - y))
    train = CountingAdamAsync(0.02, use_locking=True).minimize(loss, global_step)
    finish = done.assign_add(1)

    true_w = np.random.default_rng(42).normal(size=ROWS).astype(np.float32)

    def batch(rng):
        b = rng.integers(0, ROWS, size=(BATCH, IDS_PER_EXAMPLE))
        return {ids: b, y: true_w[b].sum(axis=1) + 0.5}

    # A restarted worker draws other batches than the one before it.
    rng = np.random.default_rng([index, time.time_ns()])
    eval_batches = [batch(np.random.default_rng(7)) for _ in range(10)]

    def eval_loss(sess):
        return float(np.mean([sess.run(loss, feed) for feed in eval_batches]))

    def step(step_context):
        try:
            return step_context.run_with_hooks([train, loss], feed_dict=batch(rng))[1]
        except (tf.errors.UnavailableError, tf.errors.AbortedError) as e:
            # Raised out of run_step_fn, these would make the session recover: close, then
            # create itself anew, waiting for the lost task for as long as it takes.
            lost = sorted(set(re.findall(r"/job:\w+/replica:\d+/task:\d+", e.message))
                          - {f"/job:worker/replica:0/task:{index}"})
            raise TaskLostError(f"worker {index}: {type(e).__name__} from "
                                f"{', '.join(lost) or 'the cluster'}; stopping rather than "
                                "waiting for the lost task") from e

    is_chief = index == 0
    with tf.train.MonitoredTrainingSession(
            master=target, is_chief=is_chief, config=config,
            checkpoint_dir=checkpoint_dir if is_chief else None,
            save_summaries_steps=None, save_summaries_secs=None,
            log_step_count_steps=None) as sess:
        start = values(sess) if is_chief else None
        emit(start=start, eval_loss=eval_loss(sess))
        for i in range(steps):
            emit(step=i, loss=float(sess.run_step_fn(step)))
        sess.run(finish)
        if not is_chief:
            return
        # `done` was restored with the checkpoint: wait for this run's workers only.
        while sess.run(done) < start["done"] + n_workers:
            time.sleep(0.1)
        emit(end=values(sess), eval_loss=eval_loss(sess))
    # Leaving the session saved the last checkpoint: the values printed above.


if __name__ == "__main__":
    main()
