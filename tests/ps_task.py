"""One task of the asynchronous parameter-server test cluster (run by test_tf_plugin_ps.py).

Usage: ps_task.py CLUSTER_JSON JOB INDEX STEPS KIND. A `ps` task serves until killed. Each
`worker` trains a sparse linear model (between-graph replication, variables and slots on the ps
tasks) with AdamAsyncOptimizer; KIND `ref` or `resource` picks the variables (and so the ops:
`ApplyAdamAsync`/`SparseApplyAdamAsync` or their `Resource` forms). Worker 0 also trains
`chief_only`, which worker 1 never touches. Each worker traces its last step; worker 0 waits for
all workers to finish and prints the results as JSON, with the devices its traced update ops ran
on.
"""

import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow.compat.v1 as tf  # noqa: E402

import adam_async  # noqa: E402

tf.disable_v2_behavior()
ROWS, IDS_PER_EXAMPLE, BATCH = 100, 3, 32


def main():
    cluster = tf.train.ClusterSpec(json.loads(sys.argv[1]))
    job, index, steps = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    use_resource = {"ref": False, "resource": True}[sys.argv[5]]
    adam_async.load_library()  # the ps tasks run the update kernels
    server = tf.distribute.Server(cluster, job_name=job, task_index=index)
    if job == "ps":
        server.join()
        return
    n_workers = cluster.num_tasks("worker")
    with tf.device(tf.train.replica_device_setter(
            worker_device=f"/job:worker/task:{index}", cluster=cluster)):
        emb, bias, chief_only = (
            tf.get_variable(name, shape, initializer=tf.zeros_initializer(),
                            use_resource=use_resource)
            for name, shape in (("emb", [ROWS, 1]), ("bias", []), ("chief_only", [])))
        done = tf.get_variable("done", [], tf.int32, initializer=tf.zeros_initializer(),
                               trainable=False)
    ids = tf.placeholder(tf.int64, [BATCH, IDS_PER_EXAMPLE])
    y = tf.placeholder(tf.float32, [BATCH])
    pred = tf.reduce_sum(tf.nn.embedding_lookup(emb, ids), axis=[1, 2]) + bias
    loss = tf.reduce_mean(tf.square(pred - y))
    opt = adam_async.AdamAsyncOptimizer(0.05, use_locking=True)
    var_list = [emb, bias] + ([chief_only] if index == 0 else [])
    chief_loss = loss + tf.square(chief_only - 1.0)
    train = opt.minimize(chief_loss if index == 0 else loss, var_list=var_list)
    finish = done.assign_add(1)

    rng = np.random.default_rng(index)
    true_w = np.random.default_rng(42).normal(size=ROWS).astype(np.float32)

    def batch():
        b = rng.integers(0, ROWS, size=(BATCH, IDS_PER_EXAMPLE))
        return {ids: b, y: true_w[b].sum(axis=1) + 0.5}

    with tf.Session(server.target) as sess:
        if index == 0:
            sess.run(tf.global_variables_initializer())
        else:
            while sess.run(tf.report_uninitialized_variables()).size:
                time.sleep(0.1)
        first = sess.run(loss, batch())
        for _ in range(steps - 1):
            sess.run(train, batch())
        trace = tf.RunMetadata()
        sess.run(train, batch(), options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
                 run_metadata=trace)
        sess.run(finish)
        if index != 0:
            return
        while sess.run(done) < n_workers:
            time.sleep(0.1)
        eval_loss = float(np.mean([sess.run(loss, batch()) for _ in range(10)]))
        powers = {v.op.name: [float(x) for x in sess.run(
            [opt.get_slot(v, "beta1_power"), opt.get_slot(v, "beta2_power")])]
            for v in (emb, bias, chief_only)}
        devices = sorted({opt.get_slot(v, s).device for v in (emb, bias, chief_only)
                          for s in opt.get_slot_names()} | {v.device for v in var_list})
        graph_ops = {op.name: op.type for op in tf.get_default_graph().get_operations()}
        ran = sorted([graph_ops[node.node_name], dev.device] for dev in trace.step_stats.dev_stats
                     for node in dev.node_stats
                     if "AdamAsync" in graph_ops.get(node.node_name, ""))
        print(json.dumps({"first_loss": float(first), "eval_loss": eval_loss,
                          "powers": powers, "devices": devices, "update_ops_ran": ran}),
              flush=True)


if __name__ == "__main__":
    main()
