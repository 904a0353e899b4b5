"""Parameter-server benchmark: stock Adam against AdamAsync on loopback clusters.

The model is CTR-like: 8 categorical fields whose ids index one embedding table of 65,536 x 8
rows split into 2 shards (one per ps task), then a 64-32-1 ReLU network (the dense part), a
logistic loss. The data are synthetic and deterministic (seed 0): Zipf-distributed ids per field,
labels drawn from a known logistic model with per-id weights and one pairwise field interaction;
written once to build/bench/ps/data-*.npz.

Study 1, throughput ("the claim"): the same model and cluster (2 ps tasks, 2 or 4 workers,
loopback) trained by stock Adam and by AdamAsync,
- compat.v1 between-graph replication (``tf.compat.v1.train.AdamOptimizer`` against
  ``adam_async.AdamAsyncOptimizer``; resource variables, placed by ``replica_device_setter``),
- Keras under ``ParameterServerStrategy`` with a ``ClusterCoordinator`` (``keras.optimizers.Adam``
  against ``adam_async.keras.AdamAsync``; a ``FixedShardsPartitioner(2)``, one more process, the
  chief, schedules the steps).
Every process starts, warms up, then all train through one common window of fixed length; steps
that end inside it count. Reported: steps/s per worker; each process's CPU seconds in the window
(utime + stime from /proc/<pid>/stat) and the two ps tasks' split of theirs; where the
optimizer's step-dependent state lives, read from the variables (stock TF1 Adam: one
beta1_power/beta2_power pair; Keras Adam: its ``iterations`` counter, from which every update
computes the powers; AdamAsync: a pair per variable); for compat.v1 also a traced step: ops and
op time per ps task, the optimizer's time on the embedding shard, ops with a beta power as input,
and the edges into each ps task from the other one (from the step's graph partitions).

Study 2, staleness: compat.v1 between-graph training with 1, 2, 4, 8 asynchronous workers of
batch B over a fixed number of examples (worker i trains on its own contiguous 1/N of the
training set, once), against synchronous training: 1 worker with batch N x B over the same
examples, the exact arithmetic of N synchronous replicas averaging their gradients, without the
barrier. Reported: test log loss and AUC, the measured staleness (updates by other workers
between a step's read of a shared counter and its own increment of it), how many times each
beta2_power advanced (from its value) and the largest embedding weight.

Usage (the TF venv; children inherit ``nice``):
  nice -n 10 env PYTHONPATH=python .venv/bin/python scripts/bench_ps.py [--quick]
      [--plot-python build/bench-venv/bin/python]
  bench-venv python scripts/bench_ps.py plot build/bench/ps/results.json   (the plot alone)
Writes build/bench/ps/results.{json,md} and docs/bench_ps_staleness.png. Every process started
is killed at the end of its configuration, and at exit, pass or fail.
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "bench" / "ps"

FIELDS, IDS_PER_FIELD, DIM, HIDDEN = 8, 2 ** 13, 8, 32
ROWS = FIELDS * IDS_PER_FIELD
N_PS = 2
THROUGHPUT_EXAMPLES = 8192  # per worker, cycled; the Keras dataset carries them in its graph
CLK_TCK = os.sysconf("SC_CLK_TCK")


# ----------------------------------------------------------------------------- data

def make_data(path, n_train, n_test, seed=0):
    """Synthetic CTR data, deterministic in `seed`: ids (n, FIELDS) int64 rows of the table (field
    f owns rows f * IDS_PER_FIELD ...), labels from a logistic model; also the true
    probabilities of the test set (their AUC is the ceiling)."""
    rng = np.random.default_rng(seed)
    n = n_train + n_test
    zipf = 1.0 / np.arange(1, IDS_PER_FIELD + 1) ** 1.1
    zipf /= zipf.sum()
    ids = np.empty((n, FIELDS), np.int64)
    for f in range(FIELDS):
        popular = rng.permutation(IDS_PER_FIELD)  # which ids of this field are frequent
        ids[:, f] = f * IDS_PER_FIELD + popular[rng.choice(IDS_PER_FIELD, size=n, p=zipf)]
    w = rng.normal(0.0, 0.5, ROWS)
    u = rng.normal(0.0, 0.7, (ROWS, 4))
    logit = w[ids].sum(axis=1) + (u[ids[:, 0]] * u[ids[:, 1]]).sum(axis=1) - 1.0
    p = 1.0 / (1.0 + np.exp(-logit))
    y = (rng.random(n) < p).astype(np.float32)
    np.savez(path, train_ids=ids[:n_train], train_y=y[:n_train], test_ids=ids[n_train:],
             test_y=y[n_train:], test_p=p[n_train:])


def auc(y, s):
    """Area under the ROC curve (ties share their mean rank)."""
    order = np.argsort(s, kind="mergesort")
    s_sorted = s[order]
    ranks = np.empty(len(s))
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s_sorted[j + 1] == s_sorted[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    pos = y > 0.5
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def logloss(y, p):
    p = np.clip(p, 1e-7, 1 - 1e-7)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


# ----------------------------------------------------------------------------- tasks

def short_task(device):
    """'/job:ps/replica:0/task:1/device:CPU:0' -> 'ps1'."""
    job = device.split("/job:")[1].split("/")[0]
    return job + device.split("/task:")[1].split("/")[0]


def wait_for(path, what, timeout=600):
    t0 = time.time()
    while not os.path.exists(path):
        if time.time() - t0 > timeout:
            sys.exit(f"{what}: {path} did not appear in {timeout} s")
        time.sleep(0.02)


def write_json(path, obj):
    tmp = str(path) + ".tmp"
    Path(tmp).write_text(json.dumps(obj))
    os.replace(tmp, path)


def task_server(cfg, job, index):
    """A ps task (or, under ParameterServerStrategy, a worker): serves until killed."""
    import tensorflow as tf

    import adam_async
    adam_async.load_library()  # the ps tasks run the update kernels
    tf.distribute.Server(tf.train.ClusterSpec(cfg["cluster"]), job_name=job, task_index=index,
                         protocol="grpc").join()


def v1_graph(tf, cfg, index):
    """The compat.v1 model on this worker: inputs, loss, train op, optimizer, variables."""
    cluster = tf.train.ClusterSpec(cfg["cluster"])
    tf.set_random_seed(0)
    with tf.device(tf.train.replica_device_setter(
            worker_device=f"/job:worker/task:{index}", cluster=cluster)):
        emb = tf.get_variable("emb", [ROWS, DIM], use_resource=True,
                              initializer=tf.random_normal_initializer(0.0, 0.05),
                              partitioner=tf.fixed_size_partitioner(N_PS))
        w1 = tf.get_variable("dense/kernel", [FIELDS * DIM, HIDDEN], use_resource=True,
                             initializer=tf.glorot_uniform_initializer())
        b1 = tf.get_variable("dense/bias", [HIDDEN], use_resource=True,
                             initializer=tf.zeros_initializer())
        w2 = tf.get_variable("out/kernel", [HIDDEN, 1], use_resource=True,
                             initializer=tf.glorot_uniform_initializer())
        b2 = tf.get_variable("out/bias", [1], use_resource=True,
                             initializer=tf.zeros_initializer())
        counters = {name: tf.get_variable(name, [], tf.int64, use_resource=True,
                                          initializer=tf.zeros_initializer(), trainable=False)
                    for name in ("started", "done", "updates")}
    ids = tf.placeholder(tf.int64, [None, FIELDS])
    y = tf.placeholder(tf.float32, [None])
    staleness = cfg["study"] == "staleness"
    if staleness:
        # Read the shared update counter before the forward pass reads the parameters.
        before = counters["updates"].read_value()
        with tf.control_dependencies([before]):
            lookup_ids = tf.identity(ids)
    else:
        lookup_ids = ids
    x = tf.reshape(tf.nn.embedding_lookup(emb, lookup_ids, partition_strategy="div"),
                   [-1, FIELDS * DIM])
    h = tf.nn.relu(tf.matmul(x, w1) + b1)
    logit = tf.squeeze(tf.matmul(h, w2) + b2, 1)
    prob = tf.sigmoid(logit)
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logit))
    if cfg["optimizer"] == "adam":
        opt = tf.train.AdamOptimizer(cfg["lr"])
    else:
        import adam_async
        opt = adam_async.AdamAsyncOptimizer(cfg["lr"])
    train = opt.minimize(loss)
    fetch = {"train": train}
    if staleness:
        with tf.control_dependencies([train]):
            after = counters["updates"].assign_add(1)
        fetch = {"train": train, "before": before, "after": after}
    parts = list(emb)
    return dict(ids=ids, y=y, loss=loss, prob=prob, opt=opt, fetch=fetch, counters=counters,
                variables=parts + [w1, b1, w2, b2])


def v1_placement(tf, g, cfg):
    """Where the optimizer's step-dependent state lives, read from the variables."""
    opt = g["opt"]
    variables = {v.op.name: short_task(v.device) for v in g["variables"]}
    if cfg["optimizer"] == "adam":
        powers = [(p.op.name, short_task(p.device)) for p in opt._get_beta_accumulators()]
    else:
        powers = [(opt.get_slot(v, s).op.name, short_task(opt.get_slot(v, s).device))
                  for v in g["variables"] for s in ("beta1_power", "beta2_power")]
    return {"variables": variables, "powers": powers}


def power_advances(sess, g, cfg):
    """How many times each beta2_power was multiplied by beta2, from its value (beta2 ** (n + 1)
    after n updates; float32 rounding moves n by less than 0.5 at these counts): stock Adam's
    one shared power, AdamAsync's power of each variable."""
    opt = g["opt"]
    if cfg["optimizer"] == "adam":
        powers = {"beta2_power": opt._get_beta_accumulators()[1]}
    else:
        powers = {v.op.name: opt.get_slot(v, "beta2_power") for v in g["variables"]}
    values = sess.run(powers)
    return {name: int(round(np.log(float(value)) / np.log(0.999))) - 1
            for name, value in values.items()}


def v1_trace(tf, sess, g, feed, placement):
    """One traced step: ops and op microseconds per task, ops touching a beta power per task,
    tensors a ps task received from the other ps task."""
    meta = tf.RunMetadata()
    sess.run(g["fetch"], feed, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE,
                                                     output_partition_graphs=True),
             run_metadata=meta)
    graph = tf.get_default_graph()
    power_ops = {name for name, _ in placement["powers"]}
    # An op touches a power when it reads, writes or applies with a power variable's handle.
    touching = {op.name for op in graph.get_operations()
                if any(inp.op.name in power_ops for inp in op.inputs)}
    per_task = {}
    for dev in meta.step_stats.dev_stats:
        task = short_task(dev.device)
        row = per_task.setdefault(task, {"ops": 0, "op_us": 0, "power_ops": 0, "power_us": 0,
                                         "emb_update_us": 0, "recv_from_other_ps": 0})
        for node in dev.node_stats:
            if node.node_name == "RecvTensor":  # a tensor received over the network:
                continue  # its time is mostly waiting for the sender
            row["ops"] += 1
            row["op_us"] += node.all_end_rel_micros
            if "/update_emb/" in node.node_name:  # the optimizer's ops on an embedding shard
                row["emb_update_us"] += node.all_end_rel_micros
            if node.node_name.split(":")[0] in touching:
                row["power_ops"] += 1
                row["power_us"] += node.all_end_rel_micros
    # Edges between the ps tasks, from the graph partitions the master made for this step.
    for partition in meta.partition_graphs:
        for node in partition.node:
            if node.op != "_Recv":
                continue
            src = short_task(node.attr["send_device"].s.decode())
            dst = short_task(node.attr["recv_device"].s.decode())
            if src.startswith("ps") and dst.startswith("ps") and src != dst:
                per_task[dst]["recv_from_other_ps"] += 1
    return per_task


def task_v1_worker(cfg, index):
    import tensorflow.compat.v1 as tf
    tf.disable_v2_behavior()
    import adam_async
    adam_async.load_library()

    n_workers = len(cfg["cluster"]["worker"])
    batch = cfg["batch"]
    data = np.load(cfg["data"])
    ids_all, y_all = data["train_ids"], data["train_y"]
    if cfg["study"] == "staleness":
        lo = index * len(ids_all) // n_workers
        hi = (index + 1) * len(ids_all) // n_workers
    else:
        lo, hi = index * THROUGHPUT_EXAMPLES, (index + 1) * THROUGHPUT_EXAMPLES
    my_ids, my_y = ids_all[lo:hi], y_all[lo:hi]
    n_batches = len(my_ids) // batch

    def feed(k):
        k %= n_batches
        rows = slice(k * batch, (k + 1) * batch)
        return {g["ids"]: my_ids[rows], g["y"]: my_y[rows]}

    cluster = tf.train.ClusterSpec(cfg["cluster"])
    server = tf.distribute.Server(cluster, job_name="worker", task_index=index)
    g = v1_graph(tf, cfg, index)
    started, done = g["counters"]["started"], g["counters"]["done"]
    config = tf.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{index}"])
    result = {"worker": index}
    with tf.Session(server.target, config=config) as sess:
        if index == 0:
            sess.run(tf.global_variables_initializer())
            result["placement"] = v1_placement(tf, g, cfg)
        else:
            while sess.run(tf.report_uninitialized_variables()).size:
                time.sleep(0.05)
        sess.run(started.assign_add(1))
        while sess.run(started) < n_workers:  # start together: staleness needs all running
            time.sleep(0.02)

        if cfg["study"] == "staleness":
            t0 = time.time()
            stale = []
            for k in range(n_batches):
                r = sess.run(g["fetch"], feed(k))
                stale.append(int(r["after"] - r["before"] - 1))
            result.update(steps=n_batches, train_s=time.time() - t0,
                          staleness_mean=float(np.mean(stale)), staleness_max=int(max(stale)))
            sess.run(done.assign_add(1))
            if index == 0:
                while sess.run(done) < n_workers:
                    time.sleep(0.02)
                result["all_done_s"] = time.time() - t0
                test_ids, test_y = data["test_ids"], data["test_y"]
                prob = np.concatenate([sess.run(g["prob"], {g["ids"]: test_ids[i:i + 8192]})
                                       for i in range(0, len(test_ids), 8192)])
                result.update(test_logloss=logloss(test_y, prob), test_auc=auc(test_y, prob),
                              updates=int(sess.run(g["counters"]["updates"])),
                              power_advances=power_advances(sess, g, cfg),
                              emb_max_abs=float(max(np.abs(sess.run(part)).max()
                                                    for part in g["variables"][:N_PS])))
        else:
            k = 0
            for _ in range(cfg["warmup_steps"]):
                sess.run(g["fetch"], feed(k))
                k += 1
            if index == 0:
                result["trace"] = v1_trace(tf, sess, g, feed(k), result["placement"])
            Path(cfg["dir"], f"ready.worker{index}").touch()
            go = Path(cfg["dir"], "go")
            while not go.exists():  # keep the cluster loaded until every process is ready
                sess.run(g["fetch"], feed(k))
                k += 1
            window = json.loads(go.read_text())
            ends = []
            while True:
                sess.run(g["fetch"], feed(k))
                k += 1
                t = time.time()
                ends.append(t)
                if t >= window["t_end"]:
                    break
            result["steps"] = sum(window["t_start"] < t <= window["t_end"] for t in ends)
    write_json(Path(cfg["dir"], f"result.worker{index}.json"), result)


def task_keras_chief(cfg):
    import keras
    import tensorflow as tf

    import adam_async  # noqa: F401
    from adam_async.keras import AdamAsync, shards

    n_workers = len(cfg["cluster"]["worker"])
    batch = cfg["batch"]
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(cfg["cluster"]), rpc_layer="grpc", task_type="chief", task_id=0)
    strategy = tf.distribute.experimental.ParameterServerStrategy(
        resolver, variable_partitioner=tf.distribute.experimental.partitioners
        .FixedShardsPartitioner(N_PS))
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = keras.Sequential([
            keras.Input((FIELDS,), dtype="int64"),
            keras.layers.Embedding(ROWS, DIM, name="emb",
                                   embeddings_initializer=keras.initializers.RandomNormal(0, 0.05)),
            keras.layers.Flatten(),
            keras.layers.Dense(HIDDEN, activation="relu", name="dense"),
            keras.layers.Dense(1, name="out"),
        ])
        if cfg["optimizer"] == "adam":
            opt = keras.optimizers.Adam(cfg["lr"], epsilon=1e-8)
        else:
            opt = AdamAsync(cfg["lr"])
        variables = shards(model.trainable_variables)
        opt.build(variables)

    data = np.load(cfg["data"])
    ids_all, y_all = data["train_ids"], data["train_y"]

    def dataset_fn():
        wid = tf.distribute.coordinator.experimental_get_current_worker_index()
        ds = tf.data.Dataset.from_tensor_slices(
            (ids_all[:n_workers * THROUGHPUT_EXAMPLES], y_all[:n_workers * THROUGHPUT_EXAMPLES]))
        return ds.shard(n_workers, wid).batch(batch, drop_remainder=True).repeat()

    iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))

    @tf.function
    def step(iterator):
        def replica_fn(ids, y):
            with tf.GradientTape() as tape:
                logit = tf.squeeze(model(ids), -1)
                loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=y,
                                                                              logits=logit))
            opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
            # Stateful ops run in program order: the timestamp is taken after the update.
            return tf.timestamp(), tf.distribute.coordinator.experimental_get_current_worker_index()
        return strategy.run(replica_fn, args=next(iterator))

    def device(var):
        return short_task((var.value if isinstance(var, keras.Variable) else var).device)

    placement = {"variables": {getattr(v, "path", v.name): device(v) for v in variables},
                 "iterations": device(opt.iterations)}
    if cfg["optimizer"] == "adam":
        placement["powers"] = []  # computed from `iterations` inside every variable's update
    else:
        placement["powers"] = [(s.path, device(s)) for s in opt.variables
                               if s.path.endswith(("_beta1_power", "_beta2_power"))]

    for _ in range(cfg["warmup_steps"] * n_workers):
        coordinator.schedule(step, args=(iterator,))
    coordinator.join()
    Path(cfg["dir"], "ready.chief").touch()
    go = Path(cfg["dir"], "go")
    limit = 2 * n_workers  # enough queued steps to keep every worker busy
    warm = []
    while not go.exists():  # keep the cluster loaded until every process is ready
        warm.append(coordinator.schedule(step, args=(iterator,)))
        if len(warm) > limit:
            warm.pop(0).fetch()
    window = json.loads(go.read_text())
    counted, waited = [], 0  # steps scheduled from here on; the oldest not waited for
    while time.time() < window["t_end"]:
        counted.append(coordinator.schedule(step, args=(iterator,)))
        if len(counted) - waited > limit:
            counted[waited].fetch()
            waited += 1
    coordinator.join()
    per_worker = [0] * n_workers
    for rv in warm[-limit:] + counted:
        t, wid = rv.fetch()
        if window["t_start"] < t <= window["t_end"]:
            per_worker[int(wid)] += 1
    write_json(Path(cfg["dir"], "result.chief.json"),
               {"placement": placement, "steps_per_worker": per_worker})


# ----------------------------------------------------------------------------- orchestration

def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def cpu_seconds(pid):
    """utime + stime of a live process, from /proc/<pid>/stat (fields 14 and 15)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return float("nan")
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


class Cluster:
    """The processes of one configuration; every one still running is killed by `kill_all`."""

    LIVE = []  # all clusters not yet cleaned up, for the exit handlers

    def __init__(self, run_dir, python):
        self.dir, self.python, self.procs = run_dir, python, {}
        Cluster.LIVE.append(self)

    def start(self, name, *args):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
                   PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "python"),
                                                            os.environ.get("PYTHONPATH")])))
        with open(self.dir / f"{name}.log", "w") as log:
            self.procs[name] = subprocess.Popen(
                [self.python, __file__, "_task", str(self.dir / "config.json"), *map(str, args)],
                stdout=log, stderr=subprocess.STDOUT, env=env)

    def failed(self):
        """Name and log tail of a process that exited with an error, or None."""
        for name, p in self.procs.items():
            if p.poll() not in (None, 0):
                tail = (self.dir / f"{name}.log").read_text()[-2000:]
                return f"{name} exited with {p.returncode}:\n{tail}"
        return None

    def wait_files(self, names, timeout):
        t0 = time.time()
        while not all((self.dir / n).exists() for n in names):
            err = self.failed()
            if err:
                raise RuntimeError(err)
            if time.time() - t0 > timeout:
                missing = [n for n in names if not (self.dir / n).exists()]
                raise RuntimeError(f"{missing} not written within {timeout} s")
            time.sleep(0.05)

    def cpu(self):
        return {name: cpu_seconds(p.pid) for name, p in self.procs.items()}

    def kill_all(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
        for p in self.procs.values():
            p.wait()
        if self in Cluster.LIVE:
            Cluster.LIVE.remove(self)


def kill_everything(*_):
    for cluster in list(Cluster.LIVE):
        cluster.kill_all()


def new_cluster(args, tag, cfg, jobs):
    run_dir = args.out / "runs" / tag
    run_dir.mkdir(parents=True, exist_ok=True)
    for f in run_dir.iterdir():
        f.unlink()
    ports = iter(free_ports(sum(jobs.values())))
    cfg = dict(cfg, dir=str(run_dir), data=str(args.data),
               cluster={job: [f"127.0.0.1:{next(ports)}" for _ in range(n)]
                        for job, n in jobs.items()})
    (run_dir / "config.json").write_text(json.dumps(cfg))
    return Cluster(run_dir, args.python), cfg


def run_throughput(args, mode, optimizer, n_workers):
    """One configuration of study 1; a row of results."""
    tag = f"tp-{mode}-{optimizer}-w{n_workers}"
    jobs = {"ps": N_PS, "worker": n_workers} | ({"chief": 1} if mode == "keras" else {})
    cluster, cfg = new_cluster(args, tag, {"study": "throughput", "optimizer": optimizer,
                                           "lr": args.lr, "batch": args.batch,
                                           "warmup_steps": args.warmup_steps}, jobs)
    row = {"mode": mode, "optimizer": optimizer, "workers": n_workers,
           "load_before": os.getloadavg()[0]}
    try:
        for i in range(N_PS):
            cluster.start(f"ps{i}", "ps", i)
        if mode == "v1":
            for i in range(n_workers):
                cluster.start(f"worker{i}", "v1worker", i)
            drivers = [f"worker{i}" for i in range(n_workers)]
        else:
            for i in range(n_workers):
                cluster.start(f"worker{i}", "server", i)
            cluster.start("chief", "chief")
            drivers = ["chief"]
        cluster.wait_files([f"ready.{d}" for d in drivers], args.start_timeout)
        t_start = time.time() + 0.3
        t_end = t_start + args.window
        write_json(cluster.dir / "go", {"t_start": t_start, "t_end": t_end})
        time.sleep(max(0.0, t_start - time.time()))
        cpu0 = cluster.cpu()
        time.sleep(max(0.0, t_end - time.time()))
        cpu1 = cluster.cpu()
        cluster.wait_files([f"result.{d}.json" for d in drivers], 120)
        results = {d: json.loads((cluster.dir / f"result.{d}.json").read_text())
                   for d in drivers}
    finally:
        cluster.kill_all()
    cpu = {name: cpu1[name] - cpu0[name] for name in cpu0}
    row["pids"] = [p.pid for p in cluster.procs.values()]
    if mode == "v1":
        steps = [results[f"worker{i}"]["steps"] for i in range(n_workers)]
        main = results["worker0"]
    else:
        steps = results["chief"]["steps_per_worker"]
        main = results["chief"]
    ps_cpu = [cpu[f"ps{i}"] for i in range(N_PS)]
    total_steps = sum(steps)
    row.update(
        window_s=args.window, steps=steps,
        steps_per_s_per_worker=[s / args.window for s in steps],
        steps_per_s=total_steps / args.window,
        cpu_s=cpu, ps_cpu_s=ps_cpu,
        ps_share=[c / sum(ps_cpu) for c in ps_cpu],
        ps_cpu_ms_per_step=[1000 * c / max(total_steps, 1) for c in ps_cpu],
        machine_cpu_share=sum(cpu.values()) / (args.window * os.cpu_count()),
        placement=main["placement"], trace=main.get("trace"),
        load_after=os.getloadavg()[0])
    return row


def run_staleness(args, optimizer, n_workers, sync):
    """One configuration of study 2: N async workers of batch B, or (sync) 1 worker of N x B."""
    workers = 1 if sync else n_workers
    batch = args.batch * (n_workers if sync else 1)
    tag = f"st-{optimizer}-{'sync' if sync else 'async'}-{n_workers}"
    cluster, cfg = new_cluster(args, tag, {"study": "staleness", "optimizer": optimizer,
                                           "lr": args.lr, "batch": batch},
                               {"ps": N_PS, "worker": workers})
    row = {"optimizer": optimizer, "workers": n_workers, "sync": sync, "batch": batch,
           "load_before": os.getloadavg()[0]}
    try:
        for i in range(N_PS):
            cluster.start(f"ps{i}", "ps", i)
        for i in range(workers):
            cluster.start(f"worker{i}", "v1worker", i)
        cluster.wait_files(["result.worker0.json"], args.start_timeout + 600)
        results = [json.loads((cluster.dir / f"result.worker{i}.json").read_text())
                   for i in range(workers)]
    finally:
        cluster.kill_all()
    main = results[0]
    row["pids"] = [p.pid for p in cluster.procs.values()]
    row.update(test_logloss=main["test_logloss"], test_auc=main["test_auc"],
               updates=main["updates"], power_advances=main["power_advances"],
               emb_max_abs=main["emb_max_abs"], train_s=main["all_done_s"],
               staleness_mean=float(np.mean([r["staleness_mean"] for r in results])),
               staleness_max=max(r["staleness_max"] for r in results),
               load_after=os.getloadavg()[0])
    return row


# ----------------------------------------------------------------------------- report

OPT_NAME = {("v1", "adam"): "`AdamOptimizer`", ("v1", "adam_async"): "`AdamAsyncOptimizer`",
            ("keras", "adam"): "keras `Adam`", ("keras", "adam_async"): "`AdamAsync`"}


def power_summary(row):
    pl = row["placement"]
    if row["mode"] == "keras" and row["optimizer"] == "adam":
        return f"none: `iterations` on {pl['iterations']}, read by every update"
    tasks = [t for _, t in pl["powers"]]
    counts = {t: tasks.count(t) // 2 for t in sorted(set(tasks))}
    if row["optimizer"] == "adam":
        return f"1 pair, on {', '.join(counts)}"
    where = ", ".join(f"{n} on {t}" for t, n in counts.items())
    extra = f"; `iterations` on {pl['iterations']}" if row["mode"] == "keras" else ""
    return f"{len(tasks) // 2} pairs, each with its variable: {where}{extra}"


def advances(counts):
    """'2048' for one power or powers that agree, else 'min-max (k of n pairs)'."""
    lo, hi = min(counts.values()), max(counts.values())
    return str(lo) if lo == hi else f"{lo}-{hi}"


def report(results):
    lines = []
    tp = results.get("throughput", [])
    if tp:
        lines += ["| mode | optimizer | workers | steps/s per worker | steps/s | ps CPU s "
                  "(ps0 / ps1) | ps0 : ps1 | ps CPU ms per step (ps0 / ps1) | "
                  "cluster CPU, of all cores | beta powers |",
                  "|---|---|---:|---|---:|---|---|---|---:|---|"]
        for r in tp:
            if "error" in r:
                lines.append(f"| {r['mode']} | {OPT_NAME[r['mode'], r['optimizer']]} | "
                             f"{r['workers']} | failed: {r['error'][:60]} | | | | | | |")
                continue
            per = ", ".join(f"{s:.1f}" for s in r["steps_per_s_per_worker"])
            lines.append(
                f"| {r['mode']} | {OPT_NAME[r['mode'], r['optimizer']]} | {r['workers']} | "
                f"{per} | {r['steps_per_s']:.1f} | "
                f"{r['ps_cpu_s'][0]:.2f} / {r['ps_cpu_s'][1]:.2f} | "
                f"{100 * r['ps_share'][0]:.0f} : {100 * r['ps_share'][1]:.0f} | "
                f"{r['ps_cpu_ms_per_step'][0]:.2f} / {r['ps_cpu_ms_per_step'][1]:.2f} | "
                f"{100 * r['machine_cpu_share']:.0f} % | {power_summary(r)} |")
        traced = [r for r in tp if r.get("trace")]
        if traced:
            lines += ["", "Traced compat.v1 step (worker 0, during warm-up): per ps task, ops run "
                      "(network receives aside), their summed time, the time of the optimizer's "
                      "ops on the embedding shard, ops with a beta power as input and their time, "
                      "edges into it from the other ps task (the step's graph partitions).", "",
                      "| optimizer | workers | ops (ps0 / ps1) | op µs (ps0 / ps1) | "
                      "embedding update µs | power ops (ps0 / ps1) | their µs | "
                      "edges from other ps (ps0 / ps1) |",
                      "|---|---:|---|---|---|---|---|---|"]
            for r in traced:
                t = r["trace"]

                def pair(key, t=t):
                    return " / ".join(str(t.get(f"ps{i}", {}).get(key, 0)) for i in range(N_PS))
                lines.append(f"| {OPT_NAME['v1', r['optimizer']]} | {r['workers']} | "
                             f"{pair('ops')} | {pair('op_us')} | {pair('emb_update_us')} | "
                             f"{pair('power_ops')} | {pair('power_us')} | "
                             f"{pair('recv_from_other_ps')} |")
        lines.append("")
        lines.append("Load average (1 min) before / after each configuration: " + ", ".join(
            f"{r['mode']} {r['optimizer']} {r['workers']}w {r['load_before']:.1f}/"
            f"{r.get('load_after', float('nan')):.1f}" for r in tp))
    st = results.get("staleness", [])
    if st:
        lines += ["", "| optimizer | workers | training | batch | updates | beta2_power advances "
                  "| mean staleness (max) | largest embedding weight | test log loss | test AUC "
                  "| seconds |",
                  "|---|---:|---|---:|---:|---|---|---:|---:|---:|---:|"]
        for r in st:
            if "error" in r:
                lines.append(f"| {r['optimizer']} | {r['workers']} | "
                             f"{'sync' if r['sync'] else 'async'} | failed | | | | | | | |")
                continue
            lines.append(
                f"| {OPT_NAME['v1', r['optimizer']]} | {r['workers']} | "
                f"{'sync (1 worker)' if r['sync'] else 'async'} | {r['batch']} | {r['updates']} | "
                f"{advances(r['power_advances'])} | "
                f"{r['staleness_mean']:.2f} ({r['staleness_max']}) | {r['emb_max_abs']:.3g} | "
                f"{r['test_logloss']:.4f} | "
                f"{r['test_auc']:.4f} | {r['train_s']:.1f} |")
        if "ceiling_auc" in results:
            lines.append(f"\nTrue-probability test AUC (ceiling): {results['ceiling_auc']:.4f}, "
                         f"log loss {results['ceiling_logloss']:.4f}.")
    return "\n".join(lines)


def plot(results_path):
    try:
        import matplotlib
    except ImportError:
        sys.exit("matplotlib is missing in this python")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = json.loads(Path(results_path).read_text())
    st = [r for r in results["staleness"] if "error" not in r]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for opt, color in (("adam", "tab:blue"), ("adam_async", "tab:orange")):
        label = {"adam": "AdamOptimizer", "adam_async": "AdamAsyncOptimizer"}[opt]
        for sync, style in ((False, "o-"), (True, "s--")):
            pts = sorted((r["workers"], r["test_auc"], r["test_logloss"]) for r in st
                         if r["optimizer"] == opt and (r["sync"] == sync or r["workers"] == 1))
            if not pts:
                continue
            name = f"{label}, {'sync: 1 worker, batch N x B' if sync else 'async: N workers'}"
            axes[0].plot([p[0] for p in pts], [p[1] for p in pts], style, color=color, label=name)
            axes[1].plot([p[0] for p in pts], [p[2] for p in pts], style, color=color, label=name)
            if not sync:  # the measured mean staleness beside each async point
                for r in st:
                    if r["optimizer"] == opt and not r["sync"] and r["workers"] > 1:
                        axes[1].annotate(f"{r['staleness_mean']:.1f}", (r["workers"],
                                         r["test_logloss"]), textcoords="offset points",
                                         xytext=(4, -10), fontsize=7, color=color)
    for ax, what in zip(axes, ("test AUC", "test log loss")):
        ax.set_xscale("log", base=2)
        ax.set_xticks([1, 2, 4, 8], ["1", "2", "4", "8"])
        ax.set_xlabel("workers N (same examples in total)")
        ax.set_ylabel(what)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    axes[1].set_title("numbers: mean staleness of the async steps", fontsize=8)
    fig.suptitle(f"{results['examples']:,} training examples, batch B = {results['batch']}, "
                 f"lr {results['lr']}, 2 ps, loopback, 2 cores; true probabilities: AUC "
                 f"{results['ceiling_auc']:.3f}, log loss {results['ceiling_logloss']:.3f}",
                 fontsize=9)
    fig.tight_layout()
    out = ROOT / "docs" / "bench_ps_staleness.png"
    fig.savefig(out, dpi=100)
    print(f"wrote {out}")


def main():
    global OUT
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 2 workers, 2 s windows, staleness with 1 and 2 workers "
                         "on 16,384 examples, AdamAsync only")
    ap.add_argument("--only", choices=["throughput", "staleness"])
    ap.add_argument("--modes", default="v1,keras")
    ap.add_argument("--workers", default="2,4", help="worker counts of the throughput study")
    ap.add_argument("--staleness-workers", default="1,2,4,8")
    ap.add_argument("--optimizers", default="adam,adam_async")
    ap.add_argument("--window", type=float, default=10.0, help="seconds measured per config")
    ap.add_argument("--warmup-steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--lr", type=float, default=0.003)
    ap.add_argument("--examples", type=int, default=2 ** 19,
                    help="training examples of the staleness study")
    ap.add_argument("--test-examples", type=int, default=2 ** 15)
    ap.add_argument("--start-timeout", type=float, default=240.0)
    ap.add_argument("--out", type=Path, default=OUT, help="results, data and logs")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--python", default=sys.executable, help="the TF python for the tasks")
    ap.add_argument("--plot-python", help="a python with matplotlib (default: this one)")
    args = ap.parse_args()
    if args.quick:
        args.workers, args.window, args.warmup_steps = "2", 2.0, 5
        args.staleness_workers, args.examples, args.optimizers_st = "1,2", 2 ** 14, "adam_async"
    else:
        args.optimizers_st = args.optimizers
    OUT = args.out
    OUT.mkdir(parents=True, exist_ok=True)
    n_train = max(args.examples, 8 * THROUGHPUT_EXAMPLES)
    args.data = OUT / f"data-{n_train}-{args.test_examples}.npz"
    if not args.data.exists():
        make_data(args.data, n_train, args.test_examples)

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    results = {"machine": {"cpus": os.cpu_count(), "uname": os.uname().release},
               "uptime_start": subprocess.run(["uptime"], capture_output=True,
                                              text=True).stdout.strip(),
               "batch": args.batch, "examples": args.examples, "lr": args.lr,
               "throughput": [], "staleness": []}
    d = np.load(args.data)
    results["ceiling_auc"] = auc(d["test_y"], d["test_p"])
    results["ceiling_logloss"] = logloss(d["test_y"], d["test_p"])
    t0 = time.time()
    try:
        if args.only != "staleness":
            for mode in args.modes.split(","):
                for n in map(int, args.workers.split(",")):
                    for opt in args.optimizers.split(","):
                        print(f"throughput {mode} {opt} {n} workers ...", flush=True)
                        try:
                            row = run_throughput(args, mode, opt, n)
                        except RuntimeError as e:
                            row = {"mode": mode, "optimizer": opt, "workers": n,
                                   "load_before": float("nan"), "error": str(e)}
                            print(f"  failed: {e}", flush=True)
                        results["throughput"].append(row)
                        keys = ("steps_per_s", "ps_cpu_s", "ps_share")
                        print(f"  {json.dumps({k: row.get(k) for k in keys})}", flush=True)
        if args.only != "throughput":
            ns = list(map(int, args.staleness_workers.split(",")))
            for opt in args.optimizers_st.split(","):
                for n in ns:
                    for sync in ([False] if n == 1 else [False, True]):
                        print(f"staleness {opt} {n} {'sync' if sync else 'async'} ...",
                              flush=True)
                        try:
                            row = run_staleness(args, opt, n, sync)
                        except RuntimeError as e:
                            row = {"optimizer": opt, "workers": n, "sync": sync,
                                   "error": str(e)}
                            print(f"  failed: {e}", flush=True)
                        results["staleness"].append(row)
                        keys = ("test_auc", "test_logloss", "staleness_mean")
                        print(f"  {json.dumps({k: row.get(k) for k in keys})}", flush=True)
    finally:
        kill_everything()
    results["uptime_end"] = subprocess.run(["uptime"], capture_output=True,
                                           text=True).stdout.strip()
    results["total_s"] = time.time() - t0
    (OUT / "results.json").write_text(json.dumps(results, indent=1))
    md = report(results)
    (OUT / "results.md").write_text(md + "\n")
    print(md)
    print(f"\n{results['uptime_start']}\n{results['uptime_end']}\ntotal {results['total_s']:.0f} s")
    if results["staleness"] and not args.no_plot:
        plot_py = args.plot_python or sys.executable
        r = subprocess.run([plot_py, __file__, "plot", str(OUT / "results.json")])
        if r.returncode:
            print(f"no plot: run {plot_py} {__file__} plot {OUT / 'results.json'} "
                  "with a python that has matplotlib")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_task":
        cfg_ = json.loads(Path(sys.argv[2]).read_text())
        role = sys.argv[3]
        if role == "ps":
            task_server(cfg_, "ps", int(sys.argv[4]))
        elif role == "server":
            task_server(cfg_, "worker", int(sys.argv[4]))
        elif role == "v1worker":
            task_v1_worker(cfg_, int(sys.argv[4]))
        elif role == "chief":
            task_keras_chief(cfg_)
    elif len(sys.argv) > 1 and sys.argv[1] == "plot":
        plot(sys.argv[2])
    else:
        import atexit
        atexit.register(kill_everything)
        main()
