"""Serves one ps task of a TensorFlow parameter-server cluster until killed, with the AdamAsync
ops loaded (the update ops of a graph exported with export_bow_graph.py --ps-hosts run here,
next to their variables).

Usage:
    python examples/ps_server.py --ps-hosts h0:2222,h1:2222 --worker-hosts h2:2222,h3:2222 --task-index 0

The workers are `hogwild tf-train` runners given the same --ps-hosts and --worker-hosts (or
Python workers of the same cluster).
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
    p.add_argument("--task-index", type=int, required=True, help="this ps task (from 0)")
    a = p.parse_args()
    adam_async.load_library()  # before the server: its kernels run the graph's update ops
    cluster = tf.train.ClusterSpec({"ps": a.ps_hosts, "worker": a.worker_hosts})
    server = tf.distribute.Server(cluster, job_name="ps", task_index=a.task_index)
    print(f"ps task {a.task_index} serving at {a.ps_hosts[a.task_index]}", flush=True)
    server.join()


if __name__ == "__main__":
    main()
