"""AdamAsync in TensorFlow against stock TensorFlow, in one process: raw ops and whole steps.

  PYTHONPATH=python .venv/bin/python scripts/bench_tf_plugin.py [--repeats 5] [--quick]

Sections (all f32; sparse cases update 1,024 distinct random rows of a 1M x 64 table per step):
1. raw dense ops on 16M elements: `ApplyAdamAsync` (ref variables) and `ResourceApplyAdamAsync`
   against stock `ApplyAdam` / `ResourceApplyAdam`, with use_locking False and True (graph mode,
   one op per session run);
2. raw sparse ops: `SparseApplyAdamAsync` / `ResourceSparseApplyAdamAsync` against stock
   `SparseApplyAdagradV2` / `ResourceSparseApplyAdagradV2`, the stock lazy sparse update (it
   touches only the named rows, as ours does), on the same rows; 16 updates chained per session
   run, each on its own fresh rows;
3. TF1 optimizer steps (`minimize`: forward, backward, duplicate summing, apply) of
   `AdamAsyncOptimizer` against `tf.compat.v1.train.AdamOptimizer` and `AdagradOptimizer`: dense
   (a 16M-element variable) and sparse (an embedding lookup of 1,024 fresh ids), ref and resource
   variables, use_locking False and True;
4. Keras: `adam_async.keras.AdamAsync` against `keras.optimizers.Adam`, one `tf.function` step
   (tape, gradient, `apply_gradients`), dense and sparse (an `Embedding` layer).
Then the goal checks of issue 21 as ratios.

Method. The cases of a section run in rounds: every round times each case once (`steps` steps)
in a rotated order, so that the machine's noise falls on all of them alike; a case's figure is
the median of its rounds, in ms per step (per update in section 2). Fresh rows: step k of every
case uses id set k of a pool of 256 sets of 1,024 distinct random ids (256K rows, 64 MB of each
of a table's three tensors, far beyond the caches, so no step finds its rows cached), the same
sequence for ours and stock.
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from adam_async import AdamAsyncOptimizer, ops  # noqa: E402
from adam_async.keras import AdamAsync  # noqa: E402

v1 = tf.compat.v1

DENSE = 16 * 1024 * 1024
ROWS, DIM, TOUCHED = 1_000_000, 64, 1024
POOL = 256
CHAIN = 16
HYPER = (0.001, 0.9, 0.999, 1e-8)


def pool_of_ids(seed=1):
    """POOL sets of TOUCHED distinct random row ids, [POOL, TOUCHED] int64."""
    rng = np.random.default_rng(seed)
    return np.stack([rng.choice(ROWS, TOUCHED, replace=False) for _ in range(POOL)]).astype(
        np.int64)


def sparse_grad(seed=2):
    return (np.random.default_rng(seed).normal(size=(TOUCHED, DIM)) * 1e-3).astype(np.float32)


def rounds(cases, repeats):
    """Median ms per step of each case: `cases` maps a name to (run, steps, units per run);
    every round runs each case once for `steps` runs, in an order rotated every round."""
    names = list(cases)
    for name in names:  # warm-up: tracing, first touch of the variables, lazy initialisation
        cases[name][0]()
    times = {name: [] for name in names}
    for r in range(repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:
            run, steps, units = cases[name]
            start = time.perf_counter()
            for _ in range(steps):
                run()
            times[name].append((time.perf_counter() - start) / (steps * units) * 1e3)
    return {name: statistics.median(t) for name, t in times.items()}


def ref_or_resource(kind):
    return kind == "resource"


def raw_dense(repeats, steps):
    """Section 1. Returns {(kind, op, locking): ms}."""
    cases = {}
    with tf.Graph().as_default() as g, v1.Session(graph=g) as sess:
        grad = v1.Variable(v1.random_normal([DENSE], seed=0) * 1e-3, use_resource=False)
        s = [tf.constant(x) for x in HYPER]
        for kind in ("ref", "resource"):
            res = ref_or_resource(kind)
            mk = lambda init: v1.Variable(init, use_resource=res)  # noqa: E731
            ours = [mk(tf.zeros(DENSE)) for _ in range(3)] + [mk(0.9), mk(0.999)]
            stock = [mk(tf.zeros(DENSE)) for _ in range(3)]
            for lock in (False, True):
                if res:
                    op = ops.resource_apply_adam_async(*[x.handle for x in ours], *s, grad,
                                                       use_locking=lock)
                    base = tf.raw_ops.ResourceApplyAdam(
                        var=stock[0].handle, m=stock[1].handle, v=stock[2].handle,
                        beta1_power=0.9, beta2_power=0.999, lr=s[0], beta1=s[1], beta2=s[2],
                        epsilon=s[3], grad=grad, use_locking=lock)
                else:
                    op = ops.apply_adam_async(*ours, *s, grad, use_locking=lock).op
                    base = tf.raw_ops.ApplyAdam(
                        var=stock[0], m=stock[1], v=stock[2], beta1_power=0.9,
                        beta2_power=0.999, lr=s[0], beta1=s[1], beta2=s[2], epsilon=s[3],
                        grad=grad, use_locking=lock).op
                for name, o in (("ours", op), ("stock", base)):
                    cases[(kind, name, lock)] = (lambda o=o: sess.run(o), steps, 1)
        sess.run(v1.global_variables_initializer())
        return rounds(cases, repeats)


def chained(make, counter, ids):
    """CHAIN updates run one after the other, update k on id set (counter + k) % POOL."""
    base = counter.assign_add(CHAIN)
    prev = base.op
    for k in range(CHAIN):
        with tf.control_dependencies([prev]):
            idx = tf.gather(ids, (base - CHAIN + k) % POOL)
            prev = make(idx)
    return prev


def raw_sparse(repeats, steps):
    """Section 2. Returns {(kind, op, locking): ms per update}."""
    cases = {}
    with tf.Graph().as_default() as g, v1.Session(graph=g) as sess:
        ids = tf.constant(pool_of_ids())
        vals = tf.constant(sparse_grad())
        s = [tf.constant(x) for x in HYPER]
        for kind in ("ref", "resource"):
            res = ref_or_resource(kind)
            mk = lambda init: v1.Variable(init, use_resource=res)  # noqa: E731
            ours = [mk(tf.zeros((ROWS, DIM))) for _ in range(3)] + [mk(0.9), mk(0.999)]
            var, acc = mk(tf.zeros((ROWS, DIM))), mk(tf.fill((ROWS, DIM), 0.1))
            for lock in (False, True):
                if res:
                    ours_op = lambda i, lock=lock: ops.resource_sparse_apply_adam_async(  # noqa
                        *[x.handle for x in ours], *s, vals, i, use_locking=lock)
                    base_op = lambda i, lock=lock: tf.raw_ops.ResourceSparseApplyAdagradV2(  # noqa
                        var=var.handle, accum=acc.handle, lr=s[0], epsilon=s[3], grad=vals,
                        indices=i, use_locking=lock)
                else:
                    ours_op = lambda i, lock=lock: ops.sparse_apply_adam_async(  # noqa: E731
                        *ours, *s, vals, i, use_locking=lock).op
                    base_op = lambda i, lock=lock: tf.raw_ops.SparseApplyAdagradV2(  # noqa: E731
                        var=var, accum=acc, lr=s[0], epsilon=s[3], grad=vals, indices=i,
                        use_locking=lock).op
                for name, make in (("ours", ours_op), ("stock", base_op)):
                    counter = v1.Variable(0, dtype=tf.int64, use_resource=True)
                    train = chained(make, counter, ids)
                    cases[(kind, name, lock)] = (lambda t=train: sess.run(t), steps, CHAIN)
        sess.run(v1.global_variables_initializer())
        return rounds(cases, repeats)


OPTIMIZERS = {
    "AdamAsyncOptimizer": lambda lock: AdamAsyncOptimizer(*HYPER, use_locking=lock,
                                                          name=f"AdamAsync_{lock}"),
    "AdamOptimizer": lambda lock: v1.train.AdamOptimizer(*HYPER, use_locking=lock,
                                                         name=f"Adam_{lock}"),
    "AdagradOptimizer": lambda lock: v1.train.AdagradOptimizer(HYPER[0], use_locking=lock,
                                                               name=f"Adagrad_{lock}"),
}


def tf1_steps(repeats, steps, slow_steps):
    """Section 3. Returns {(shape, kind, optimizer, locking): ms per step}."""
    out = {}
    for shape in ("dense", "sparse"):
        for kind in ("ref", "resource"):
            cases = {}
            with tf.Graph().as_default() as g, v1.Session(graph=g) as sess:
                res = ref_or_resource(kind)
                ids = tf.constant(pool_of_ids())
                if shape == "dense":
                    var = v1.get_variable("w", [DENSE], initializer=v1.zeros_initializer(),
                                          use_resource=res)
                    coef = v1.get_variable("c", [DENSE], trainable=False, use_resource=res,
                                           initializer=v1.random_normal_initializer(0, 1e-3))
                else:
                    var = v1.get_variable("emb", [ROWS, DIM], use_resource=res,
                                          initializer=v1.zeros_initializer())
                    coef = tf.constant(sparse_grad())
                for name, make in OPTIMIZERS.items():
                    for lock in (False, True):
                        if shape == "dense":
                            loss = tf.reduce_sum(var * coef)
                        else:
                            counter = v1.Variable(0, dtype=tf.int64, use_resource=True)
                            row = tf.gather(ids, counter.assign_add(1) % POOL)
                            loss = tf.reduce_sum(tf.nn.embedding_lookup(var, row) * coef)
                        opt = make(lock)
                        train = opt.minimize(loss, var_list=[var])
                        n = slow_steps if (shape, name) == ("sparse", "AdamOptimizer") else steps
                        cases[(shape, kind, name, lock)] = (lambda t=train: sess.run(t), n, 1)
                sess.run(v1.global_variables_initializer())
                out.update(rounds(cases, repeats))
    return out


def keras_steps(repeats, steps, slow_steps):
    """Section 4. Returns {(shape, optimizer, locking): ms per step}."""
    ids = tf.constant(pool_of_ids())
    coef = tf.constant(sparse_grad())
    dense_coef = tf.random.normal([DENSE], stddev=1e-3, seed=0)
    cases = {}
    makers = {
        ("AdamAsync", False): lambda: AdamAsync(*HYPER),
        ("AdamAsync", True): lambda: AdamAsync(*HYPER, use_locking=True),
        ("keras Adam", None): lambda: keras.optimizers.Adam(HYPER[0], *HYPER[1:]),
    }
    for shape in ("dense", "sparse"):
        for (name, lock), make in makers.items():
            opt = make()
            if shape == "dense":
                var = tf.Variable(tf.zeros([DENSE]))

                @tf.function
                def step(var=var, opt=opt):
                    with tf.GradientTape() as tape:
                        loss = tf.reduce_sum(var * dense_coef)
                    opt.apply_gradients([(tape.gradient(loss, var), var)])
            else:
                counter = tf.Variable(0, dtype=tf.int64)
                emb = keras.layers.Embedding(ROWS, DIM, embeddings_initializer="zeros")
                emb.build((None,))

                @tf.function
                def step(emb=emb, opt=opt, counter=counter):
                    row = tf.gather(ids, counter.assign_add(1) % POOL)
                    with tf.GradientTape() as tape:
                        loss = tf.reduce_sum(emb(row) * coef)
                    grads = tape.gradient(loss, emb.trainable_variables)
                    opt.apply_gradients(zip(grads, emb.trainable_variables))
            n = slow_steps if (shape, name) == ("sparse", "keras Adam") else steps
            cases[(shape, name, lock)] = (step, n, 1)
    return rounds(cases, repeats)


def lock_name(lock):
    return {False: "unlocked", True: "locked", None: "-"}[lock]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="fewer steps (a smoke test)")
    a = p.parse_args()
    dense_steps, sparse_runs, opt_steps, slow = (2, 2, 2, 1) if a.quick else (10, 20, 10, 2)

    print("## 1. Raw dense ops, 16M f32 (ms per step; speed-up = stock / ours)\n")
    d = raw_dense(a.repeats, dense_steps)
    print("| variables | use_locking | ours | ms | stock | ms | speed-up |")
    print("|---|---|---|---:|---|---:|---:|")
    for kind in ("ref", "resource"):
        names = ("ApplyAdamAsync", "ApplyAdam") if kind == "ref" else (
            "ResourceApplyAdamAsync", "ResourceApplyAdam")
        for lock in (False, True):
            o, s = d[(kind, "ours", lock)], d[(kind, "stock", lock)]
            print(f"| {kind} | {lock} | `{names[0]}` | {o:.2f} | `{names[1]}` | {s:.2f} | "
                  f"{s / o:.2f}x |")

    print(f"\n## 2. Raw sparse ops, {TOUCHED:,} fresh random rows of a 1M x {DIM} table "
          "(ms per update)\n")
    sp = raw_sparse(a.repeats, sparse_runs)
    print("| variables | use_locking | ours | ms | stock (lazy Adagrad) | ms | ours / stock time |")
    print("|---|---|---|---:|---|---:|---:|")
    for kind in ("ref", "resource"):
        names = ("SparseApplyAdamAsync", "SparseApplyAdagradV2") if kind == "ref" else (
            "ResourceSparseApplyAdamAsync", "ResourceSparseApplyAdagradV2")
        for lock in (False, True):
            o, s = sp[(kind, "ours", lock)], sp[(kind, "stock", lock)]
            print(f"| {kind} | {lock} | `{names[0]}` | {o:.3f} | `{names[1]}` | {s:.3f} | "
                  f"{o / s:.2f} |")

    print("\n## 3. TF1 optimizer steps (`minimize`), ms per step\n")
    t1 = tf1_steps(a.repeats, opt_steps, slow)
    print("| step | variables | use_locking | AdamAsyncOptimizer | AdamOptimizer | "
          "AdagradOptimizer | speed-up vs Adam | vs Adagrad |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for shape in ("dense", "sparse"):
        for kind in ("ref", "resource"):
            for lock in (False, True):
                o, ad, ag = (t1[(shape, kind, n, lock)] for n in OPTIMIZERS)
                what = "16M f32" if shape == "dense" else f"{TOUCHED:,} fresh rows of 1M x {DIM}"
                print(f"| {shape}, {what} | {kind} | {lock} | {o:.2f} | {ad:.2f} | {ag:.2f} | "
                      f"{ad / o:.2f}x | {ag / o:.2f}x |")

    print("\n## 4. Keras steps (`tf.function`: tape, gradient, `apply_gradients`), ms per step\n")
    k = keras_steps(a.repeats, opt_steps, slow)
    print("| step | optimizer | use_locking | ms | speed-up vs keras Adam |")
    print("|---|---|---|---:|---:|")
    for shape in ("dense", "sparse"):
        base = k[(shape, "keras Adam", None)]
        for (s_, name, lock), ms in k.items():
            if s_ == shape:
                print(f"| {shape} | {name} | {lock_name(lock)} | {ms:.2f} | {base / ms:.2f}x |")

    print("\n## Goal checks (issue 21)\n")
    checks = []
    for kind in ("ref", "resource"):
        for lock in (False, True):
            ratio = d[(kind, "stock", lock)] / d[(kind, "ours", lock)]
            checks.append((f"dense {kind} {lock_name(lock)}: stock / ours time", ratio, ">= 1.0",
                           ratio >= 1.0))
    for kind in ("ref", "resource"):
        ratio = sp[(kind, "ours", False)] / sp[(kind, "ours", True)]
        checks.append((f"sparse {kind}: ours unlocked / locked time", ratio, "<= 1.1",
                       ratio <= 1.1))
        for lock in (False, True):
            ratio = sp[(kind, "ours", lock)] / sp[(kind, "stock", lock)]
            checks.append((f"sparse {kind} {lock_name(lock)}: ours / stock lazy Adagrad time",
                           ratio, "< 1.0", ratio < 1.0))
    print("| check | ratio | goal | met |")
    print("|---|---:|---|---|")
    for what, ratio, goal, met in checks:
        print(f"| {what} | {ratio:.2f} | {goal} | {'yes' if met else 'NO'} |")


if __name__ == "__main__":
    main()
