"""Exports the IMDB bag-of-words classifier as a TensorFlow MetaGraph for `hogwild tf-train`.

The network (Paddle's bow_net, reduced): mean of the word embeddings of each instance (an
embedding bag) -> fully connected layer -> softmax cross-entropy. Its sparse input is fed as
values + row offsets, which is how the data feed hands a uint64 slot over:

    words             int64 [N]     all word ids of the batch, concatenated
    words/row_splits  int64 [B+1]   instance i owns words[row_splits[i]:row_splits[i+1]]
    label             int64 [B]     one class id per instance

The graph is written by one call, `adam_async.runner.export` (docs/runner.md has the runner's
contract): the "train" signature with inputs keyed by data-feed slot (the pair (words,
words_row_splits) becomes the inputs "words" and "words/row_splits"), outputs loss and accuracy
(float32 scalars), the op that minimize() put in the graph's train_op collection, an init op and a
tf.compat.v1.train.Saver, so the runner's checkpoints are ordinary TF checkpoints.

With --ps-hosts the graph is for a parameter-server cluster (between-graph replication, the
runner's --ps-hosts/--worker-hosts/--task-index): tf.compat.v1.train.replica_device_setter puts
the variables round-robin on the ps tasks (their optimizer slots and update ops follow them) and
leaves every other op unplaced, so each worker's master places those on its own task and one
file serves every worker; `export(..., cluster=True)` adds the ops of the runner's chief/worker
protocol (a counter of finished workers on a ps task, left out of checkpoints, and the ready_op
the workers other than the chief poll).

Usage:
    python examples/export_bow_graph.py --out build/bow.meta [--optimizer adam_async] ...
    python examples/export_bow_graph.py --out build/bow_ps.meta --ps-hosts h0:2222,h1:2222
"""

import argparse

import tensorflow as tf

from adam_async import runner  # the project's Python package (python/)

OPTIMIZERS = ("adam_async", "adagrad", "adam", "sgd")


def make_optimizer(name, lr):
    v1 = tf.compat.v1.train
    if name == "adam_async":
        import adam_async  # its ops come from the op library (make plugin)

        return adam_async.AdamAsyncOptimizer(lr)
    if name == "adagrad":
        return v1.AdagradOptimizer(lr)
    if name == "adam":
        return v1.AdamOptimizer(lr)
    if name == "sgd":
        return v1.GradientDescentOptimizer(lr)
    raise ValueError(f"unknown optimizer {name!r}; choose one of {', '.join(OPTIMIZERS)}")


def build_graph(vocab, dim, classes, optimizer, lr, seed, ps_hosts=None):
    """Builds the network in a fresh graph and returns (graph, inputs, outputs) for
    `runner.export`; with `ps_hosts` (a list of host:port), for that cluster's ps tasks."""
    graph = tf.Graph()
    placement = None
    if ps_hosts:
        # No worker_device: the ops other than variables stay unplaced, for the master (each
        # worker's own task) to place.
        placement = tf.compat.v1.train.replica_device_setter(
            cluster=tf.train.ClusterSpec({"ps": list(ps_hosts)}))
    with graph.as_default(), tf.compat.v1.device(placement):
        tf.compat.v1.set_random_seed(seed)
        words = tf.compat.v1.placeholder(tf.int64, [None], name="words")
        row_splits = tf.compat.v1.placeholder(tf.int64, [None], name="words_row_splits")
        label = tf.compat.v1.placeholder(tf.int64, [None], name="label")

        batch = tf.shape(row_splits, out_type=tf.int64)[0] - 1
        lengths = row_splits[1:] - row_splits[:-1]
        segment = tf.ragged.row_splits_to_segment_ids(row_splits)

        embedding = tf.compat.v1.get_variable(
            "embedding", [vocab, dim], tf.float32,
            initializer=tf.compat.v1.random_uniform_initializer(-0.1, 0.1))
        fc_w = tf.compat.v1.get_variable(
            "fc/w", [dim, classes], tf.float32,
            initializer=tf.compat.v1.glorot_uniform_initializer())
        fc_b = tf.compat.v1.get_variable(
            "fc/b", [classes], tf.float32, initializer=tf.compat.v1.zeros_initializer())

        rows = tf.gather(embedding, words)
        summed = tf.math.unsorted_segment_sum(rows, segment, batch)
        count = tf.maximum(tf.cast(lengths, tf.float32), 1.0)
        bag = summed / tf.expand_dims(count, 1)
        logits = tf.add(tf.matmul(bag, fc_w), fc_b, name="logits")

        per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=label, logits=logits)
        loss = tf.reduce_mean(per_example, name="loss")
        correct = tf.cast(tf.equal(tf.argmax(logits, 1), label), tf.float32)
        accuracy = tf.reduce_mean(correct, name="accuracy")

        # minimize() puts its op in the graph's train_op collection, which export() reads.
        make_optimizer(optimizer, lr).minimize(loss, name="train")
    inputs = {"words": (words, row_splits), "label": label}
    outputs = {"loss": loss, "accuracy": accuracy}
    return graph, inputs, outputs


def export(out, vocab=10000, dim=16, classes=2, optimizer="adam_async", lr=0.01, seed=1,
           ps_hosts=None):
    """Writes the MetaGraphDef to `out` and returns it; with `ps_hosts` (a list of host:port), for
    that parameter-server cluster."""
    graph, inputs, outputs = build_graph(vocab, dim, classes, optimizer, lr, seed, ps_hosts)
    return runner.export(out, inputs, outputs, graph=graph, cluster=bool(ps_hosts))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="MetaGraphDef file to write (binary proto)")
    p.add_argument("--vocab", type=int, default=10000, help="embedding rows (word ids < vocab)")
    p.add_argument("--dim", type=int, default=16, help="embedding width")
    p.add_argument("--classes", type=int, default=2)
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="adam_async")
    p.add_argument("--lr", type=float, default=0.01, help="learning rate")
    p.add_argument("--seed", type=int, default=1, help="graph-level random seed (initial values)")
    p.add_argument("--ps-hosts", type=lambda s: s.split(","), metavar="HOST:PORT,...",
                   help="export for a parameter-server cluster with these ps tasks")
    a = p.parse_args()
    export(a.out, a.vocab, a.dim, a.classes, a.optimizer, a.lr, a.seed, a.ps_hosts)
    where = f", variables on {len(a.ps_hosts)} ps tasks" if a.ps_hosts else ""
    print(f"wrote {a.out} (optimizer {a.optimizer}, vocab {a.vocab}, dim {a.dim}{where})")


if __name__ == "__main__":
    main()
