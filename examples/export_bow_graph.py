"""Exports the IMDB bag-of-words classifier as a TensorFlow MetaGraph for `hogwild tf-train`.

The network (Paddle's bow_net, reduced): mean of the word embeddings of each instance (an
embedding bag) -> fully connected layer -> softmax cross-entropy. Its sparse input is fed as
values + row offsets, which is how the data feed hands a uint64 slot over:

    words             int64 [N]     all word ids of the batch, concatenated
    words/row_splits  int64 [B+1]   instance i owns words[row_splits[i]:row_splits[i+1]]
    label             int64 [B]     one class id per instance

The MetaGraphDef written to `--out` names everything the runner needs:
  * signature_def["train"]: inputs keyed by data-feed slot name (a key "<slot>/row_splits" marks a
    slot fed as values + offsets; a slot without one is fed dense as [B] or [B, width]), outputs
    keyed by the name printed for each fetched value (loss, accuracy);
  * collection "init_op": the initialisation op (the startup program), run once;
  * collection "train_op": the op that applies one optimizer step;
  * saver_def: tf.compat.v1.train.Saver's filename tensor, save tensor and restore op, so the
    runner's checkpoints are ordinary TF checkpoints (`saver.restore(sess, prefix)`).

With --ps-hosts the graph is for a parameter-server cluster (between-graph replication, the
runner's --ps-hosts/--worker-hosts/--task-index): tf.compat.v1.train.replica_device_setter puts
the variables round-robin on the ps tasks (their optimizer slots and update ops follow them) and
leaves every other op unplaced, so each worker's master places those on its own task and one
file serves every worker. It also has
  * collection "ready_op": report_uninitialized_variables(), which the workers other than the
    chief poll until the chief has initialised the variables;
  * collections "hogwild/finish_op", "hogwild/finished_workers", "hogwild/finished_workers_init":
    a counter of finished workers on a ps task (left out of checkpoints), which the chief waits on
    before it saves.

Usage:
    python examples/export_bow_graph.py --out build/bow.meta [--optimizer adam_async] ...
    python examples/export_bow_graph.py --out build/bow_ps.meta --ps-hosts h0:2222,h1:2222
"""

import argparse
import pathlib

import tensorflow as tf

OPTIMIZERS = ("adam_async", "adagrad", "adam", "sgd")


def make_optimizer(name, lr):
    v1 = tf.compat.v1.train
    if name == "adam_async":
        import adam_async  # the project's Python package (python/), built with the op library

        return adam_async.AdamAsyncOptimizer(lr)
    if name == "adagrad":
        return v1.AdagradOptimizer(lr)
    if name == "adam":
        return v1.AdamOptimizer(lr)
    if name == "sgd":
        return v1.GradientDescentOptimizer(lr)
    raise ValueError(f"unknown optimizer {name!r}; choose one of {', '.join(OPTIMIZERS)}")


def build_graph(vocab, dim, classes, optimizer, lr, seed, ps_hosts=None):
    """Builds the network in a fresh graph and returns (graph, signature, init_op, train_op, saver);
    with `ps_hosts` (a list of host:port), for that cluster's ps tasks."""
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

        train_op = make_optimizer(optimizer, lr).minimize(loss, name="train")
        saved = tf.compat.v1.global_variables()
        if ps_hosts:
            add_cluster_protocol()
        init_op = tf.compat.v1.global_variables_initializer()
        # minimize() already put train_op into the "train_op" collection.
        tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.INIT_OP, init_op)
        saver = tf.compat.v1.train.Saver(saved)

        info = tf.compat.v1.saved_model.utils.build_tensor_info
        signature = tf.compat.v1.saved_model.signature_def_utils.build_signature_def(
            inputs={"words": info(words), "words/row_splits": info(row_splits),
                    "label": info(label)},
            outputs={"loss": info(loss), "accuracy": info(accuracy)},
            method_name="hogwild/train")
    return graph, signature, init_op, train_op, saver


def add_cluster_protocol():
    """The ops of the runner's chief/worker protocol in a cluster (see the module docstring)."""
    finished = tf.compat.v1.get_variable(
        "hogwild/finished_workers", [], tf.int64, initializer=tf.compat.v1.zeros_initializer(),
        trainable=False, use_resource=True)
    add = tf.compat.v1.add_to_collection
    add(tf.compat.v1.GraphKeys.READY_OP, tf.compat.v1.report_uninitialized_variables())
    add("hogwild/finish_op", finished.assign_add(1, read_value=False))
    add("hogwild/finished_workers", finished.read_value())
    add("hogwild/finished_workers_init", finished.initializer)


def export(out, vocab=10000, dim=16, classes=2, optimizer="adam_async", lr=0.01, seed=1,
           ps_hosts=None):
    """Writes the MetaGraphDef to `out` and returns it; with `ps_hosts` (a list of host:port), for
    that parameter-server cluster."""
    graph, signature, _, _, saver = build_graph(vocab, dim, classes, optimizer, lr, seed,
                                                ps_hosts)
    with graph.as_default():
        meta = saver.export_meta_graph()
    meta.signature_def["train"].CopyFrom(signature)
    out = pathlib.Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(meta.SerializeToString())
    return meta


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
