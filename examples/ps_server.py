"""Serves one ps task of a TensorFlow parameter-server cluster until killed, with the AdamAsync
ops loaded (the update ops of a graph exported with export_bow_graph.py --ps-hosts run here,
next to their variables).

Usage:
    python examples/ps_server.py --ps-hosts h0:2222,h1:2222 --worker-hosts h2:2222 --task-index 0

The workers are `hogwild tf-train` runners given the same --ps-hosts and --worker-hosts, which
serve their own tasks (or Python workers of the same cluster). With --job-name worker this serves
a worker task instead, for a runner that connects to it with --target.
"""

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

import adam_async  # noqa: E402  (the project's Python package, python/)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    hosts = dict(type=lambda s: s.split(","), required=True, metavar="HOST:PORT,...")
    p.add_argument("--ps-hosts", help="the cluster's ps tasks", **hosts)
    p.add_argument("--worker-hosts", help="the cluster's worker tasks", **hosts)
    p.add_argument("--task-index", type=int, required=True, help="this task (from 0)")
    p.add_argument("--job-name", choices=("ps", "worker"), default="ps")
    a = p.parse_args()
    adam_async.load_library()  # before the server: its kernels run the graph's update ops
    hosts = {"ps": a.ps_hosts, "worker": a.worker_hosts}
    server = tf.distribute.Server(tf.train.ClusterSpec(hosts), job_name=a.job_name,
                                  task_index=a.task_index)
    print(f"{a.job_name} task {a.task_index} serving at {hosts[a.job_name][a.task_index]}",
          flush=True)
    server.join()


if __name__ == "__main__":
    main()
