"""`hogwild tf-train` as workers of a TensorFlow parameter-server cluster, on loopback.

Python ps tasks (examples/ps_server.py, with the AdamAsync ops loaded) hold the variables of the
bag-of-words graph exported with `export_bow_graph.py --ps-hosts`; Rust runners are the workers,
each serving its own worker task in-process (or, with --target, using a Python server that serves
it), fed by the data feed. The chief (worker 0) initialises, waits for the other worker and saves;
Python restores its checkpoint, and every variable's AdamAsync beta powers count every step of
both workers exactly (the powers advance with a compare-and-swap, so concurrent updates lose none).
Options and an unreachable cluster fail before any training, within the wait timeout.
"""

import re
import subprocess
import time

import numpy as np
import pytest
import tensorflow as tf

# The loopback cluster helpers, imported in this one place.
from ps_cluster import Processes, loopback_cluster, powers
from test_runner import (ENV, PLUGIN, ROOT, evaluate, read_batches, summary, write_data,
                         hogwild_bin)  # noqa: F401  (a fixture)

import export_bow_graph  # noqa: E402  (test_runner put examples/ on the path)

PS_SERVER = ROOT / "examples/ps_server.py"
EPOCHS = 3
# The two workers train in about 10 s here (4 processes loading TensorFlow on 2 cores); a hang
# fails the test at this bound instead of blocking the suite.
CLUSTER_TIMEOUT_S = 90
# The runners' --wait-timeout where the test waits for it to run out: long enough for a loaded
# machine to reach a serving ps task within it.
WAIT_S = 4


class Cluster(Processes):
    """Python servers and runner workers, output in files; all killed at the end."""

    def start_runner(self, name, binary, *args):
        assert name not in self.procs, name
        with open(self.tmp_path / f"{name}.out", "w") as out, \
                open(self.tmp_path / f"{name}.err", "w") as err:
            self.procs[name] = subprocess.Popen([str(binary), "tf-train", *map(str, args)],
                                                stdout=out, stderr=err, env=ENV)

    def start_server(self, hosts, job, index):
        """Starts a Python server of task `index` of `job`, named e.g. `ps0` or `server-worker1`
        (`worker1` names the runner of that task)."""
        name = f"{job}{index}" if job == "ps" else f"server-{job}{index}"
        assert name not in self.procs, name
        self.start(name, PS_SERVER, "--ps-hosts", ",".join(hosts["ps"]),
                   "--worker-hosts", ",".join(hosts["worker"]), "--job-name", job,
                   "--task-index", index)

    def wait_serving(self, name, timeout=60):
        """Waits until server `name` has printed that it serves."""
        deadline = time.monotonic() + timeout
        while "serving at" not in (self.tmp_path / f"{name}.out").read_text():
            assert self.procs[name].poll() is None, \
                (self.tmp_path / f"{name}.err").read_text()[-3000:]
            assert time.monotonic() < deadline, f"{name} not serving after {timeout} s"
            time.sleep(0.1)


@pytest.fixture
def cluster(tmp_path):
    """Starts cluster processes; every one still running is killed at the end, pass or fail."""
    procs = Cluster(tmp_path)
    yield procs
    procs.kill_all()


def cluster_args(hosts, task, *more):
    return ["--ps-hosts", ",".join(hosts["ps"]), "--worker-hosts", ",".join(hosts["worker"]),
            "--task-index", task, *more]


def run(hogwild_bin, *args, timeout=60):
    """Runs `hogwild tf-train` to its end; the result and the seconds it took."""
    start = time.monotonic()
    r = subprocess.run([str(hogwild_bin), "tf-train", *map(str, args)], env=ENV,
                       capture_output=True, text=True, timeout=timeout)
    return r, time.monotonic() - start


def epoch_losses(stdout):
    return [float(x) for x in re.findall(r"^epoch \d+: .*  loss (\S+)", stdout, re.M)]


@pytest.mark.parametrize("worker1_master", ["in-process", "python-server"])
def test_two_runner_workers_train_on_two_ps_tasks(hogwild_bin, cluster, tmp_path,
                                                  worker1_master):
    hosts = loopback_cluster(ps=2, worker=2)
    files = write_data(tmp_path)
    graph = tmp_path / "bow_ps.meta"
    meta = export_bow_graph.export(graph, vocab=200, dim=8, optimizer="adam_async", lr=0.05,
                                   seed=3, ps_hosts=hosts["ps"])
    variables = {n.name: n.device for n in meta.graph_def.node if n.op == "VarHandleOp"}
    assert {variables[v] for v in ("embedding", "fc/w", "fc/b")} == \
        {"/job:ps/task:0", "/job:ps/task:1"}, variables

    for i in range(2):
        cluster.start_server(hosts, "ps", i)
    worker1_target = []
    if worker1_master == "python-server":
        cluster.start_server(hosts, "worker", 1)
        worker1_target = ["--target", f"grpc://{hosts['worker'][1]}"]
    common = ["--graph", graph, "--op-library", PLUGIN, "--feed", tmp_path / "data.prototxt",
              "--threads", 2, "--epochs", EPOCHS, "--print-period", 0, "--wait-timeout", 60]
    ckpt = tmp_path / "ckpt/bow"
    # The other worker first: it waits for the chief's initialisation.
    cluster.start_runner("worker1", hogwild_bin, *common, *cluster_args(hosts, 1),
                         *worker1_target, files[1])
    cluster.start_runner("worker0", hogwild_bin, *common, *cluster_args(hosts, 0),
                         "--save", ckpt, "--eval", files[0], "--eval", files[1], files[0])
    out0 = cluster.finish("worker0", timeout=CLUSTER_TIMEOUT_S)
    out1 = cluster.finish("worker1", timeout=30)
    err0 = (tmp_path / "worker0.err").read_text()
    assert "the chief): initialised the variables" in err0, err0

    trains = [summary(out, "train") for out in (out0, out1)]
    batches = EPOCHS * 96 // 16
    assert [t["batches"] for t in trains] == [batches, batches]
    for out in (out0, out1):
        losses = epoch_losses(out)
        assert len(losses) == EPOCHS and losses[-1] < 0.5 * losses[0], out
    ev = summary(out0, "eval")
    assert ev["accuracy"] > 0.9, out0

    # The chief saved after both workers finished: Python's evaluation of its checkpoint is the
    # chief's own, and every variable's powers count all 2 * 18 steps (each step updates every
    # variable: each batch has words).
    g = tf.Graph()
    with g.as_default():
        saver = tf.compat.v1.train.import_meta_graph(str(graph), clear_devices=True)
    sess = tf.compat.v1.Session(graph=g)
    with g.as_default():
        saver.restore(sess, str(ckpt))
    loss, accuracy = evaluate(sess, read_batches(files))
    np.testing.assert_allclose(accuracy, ev["accuracy"], atol=1e-7)
    np.testing.assert_allclose(loss, ev["loss"], rtol=1e-5)

    reader = tf.train.load_checkpoint(str(ckpt))
    saved = reader.get_variable_to_shape_map()
    assert "hogwild/finished_workers" not in saved, sorted(saved)
    steps = sum(t["batches"] for t in trains)
    for var in ("embedding", "fc/w", "fc/b"):
        got = [float(reader.get_tensor(f"{var}/AdamAsync_{k}")) for k in (2, 3)]
        assert got == powers(int(steps)), (var, got, steps)


def test_the_waits_on_the_other_workers_are_bounded(hogwild_bin, cluster, tmp_path):
    """Worker 1 without a chief gives up before training; the chief without worker 1 gives up
    waiting for it after training, saves what the ps task holds, and fails."""
    hosts = loopback_cluster(ps=1, worker=2)
    files = write_data(tmp_path, files=1, lines=16)
    graph = tmp_path / "bow_ps.meta"
    export_bow_graph.export(graph, vocab=200, dim=8, ps_hosts=hosts["ps"])
    cluster.start_server(hosts, "ps", 0)
    cluster.wait_serving("ps0")
    common = ["--graph", graph, "--op-library", PLUGIN, "--feed", tmp_path / "data.prototxt"]

    r, elapsed = run(hogwild_bin, *common, *cluster_args(hosts, 1, "--wait-timeout", WAIT_S),
                     files[0])
    assert r.returncode == 1, r.stderr
    assert (f"error: worker task 1 of 2 ({hosts['worker'][1]}): the chief (worker task 0, "
            f"{hosts['worker'][0]}) has not initialised the variables within {WAIT_S} s "
            "(--wait-timeout); uninitialised: ") in r.stderr, r.stderr
    assert "fc/w" in r.stderr and "hogwild/finished_workers" in r.stderr
    assert "train:" not in r.stdout
    assert elapsed < WAIT_S + 25, elapsed

    ckpt = tmp_path / "ckpt"
    r, elapsed = run(hogwild_bin, *common, *cluster_args(hosts, 0, "--wait-timeout", WAIT_S),
                     "--save", ckpt, files[0])
    assert r.returncode == 1, r.stderr
    assert f"saved checkpoint {ckpt}" in r.stdout, r.stdout
    assert (f"error: worker task 0 of 2 ({hosts['worker'][0]}, the chief): only 1 of 2 workers "
            f"finished training within {WAIT_S} s (--wait-timeout)") in r.stderr, r.stderr
    assert elapsed < WAIT_S + 25, elapsed


def test_the_chief_restores_a_checkpoint_and_the_powers_count_on(hogwild_bin, cluster, tmp_path):
    """A checkpoint of the local runner restored by a one-worker cluster's chief: the finished
    workers' counter, which checkpoints leave out, starts at 0 (the chief's wait ends), and the
    powers count the steps of both runs."""
    files = write_data(tmp_path, files=1, lines=32)
    local, graph = tmp_path / "bow.meta", tmp_path / "bow_ps.meta"
    hosts = loopback_cluster(ps=1, worker=1)
    export_bow_graph.export(local, vocab=200, dim=8)
    export_bow_graph.export(graph, vocab=200, dim=8, ps_hosts=hosts["ps"])
    cluster.start_server(hosts, "ps", 0)
    feed = ["--op-library", PLUGIN, "--feed", tmp_path / "data.prototxt", "--print-period", 0]
    r, _ = run(hogwild_bin, "--graph", local, *feed, "--save", tmp_path / "first", files[0])
    assert r.returncode == 0, r.stderr
    r, _ = run(hogwild_bin, "--graph", graph, *feed, *cluster_args(hosts, 0),
               "--restore", tmp_path / "first", "--save", tmp_path / "second", files[0])
    assert r.returncode == 0, r.stderr
    assert "the chief): restored the variables" in r.stderr, r.stderr
    reader = tf.train.load_checkpoint(str(tmp_path / "second"))
    got = [float(reader.get_tensor(f"embedding/AdamAsync_{k}")) for k in (2, 3)]
    assert got == powers(2 * 32 // 16), got


@pytest.mark.parametrize("master", ["in-process", "target"])
def test_an_unreachable_cluster_fails_within_the_wait_timeout(hogwild_bin, setup_graph, master):
    """Nothing listens at the ps ports (nor at the --target): the runner gives up after the wait
    timeout and names what it could not reach."""
    hosts = loopback_cluster(ps=2, worker=1, master=1)
    target = ["--target", f"grpc://{hosts['master'][0]}"] if master == "target" else []
    d, graph = setup_graph
    r, elapsed = run(hogwild_bin, "--graph", graph, "--op-library", PLUGIN,
                     "--feed", d / "data.prototxt",
                     *cluster_args({"ps": hosts["ps"], "worker": hosts["worker"]}, 0,
                                   "--wait-timeout", 2, *target), d / "part-0")
    assert r.returncode == 1, r.stderr
    assert "error: worker task 0 of 1" in r.stderr, r.stderr
    assert "cannot reach the cluster through" in r.stderr and \
        "within 2 s (--wait-timeout)" in r.stderr, r.stderr
    silent = [f"ps task {i} ({h})" for i, h in enumerate(hosts["ps"])]
    if master == "target":
        silent.append(f"the master ({hosts['master'][0]})")
    assert "nothing accepts connections at " + ", ".join(silent) in r.stderr, r.stderr
    assert elapsed < 30, elapsed


@pytest.fixture(scope="module")
def setup_graph(tmp_path_factory):
    d = tmp_path_factory.mktemp("runner_ps")
    write_data(d, files=1, lines=16)
    graph = d / "bow_ps.meta"
    export_bow_graph.export(graph, vocab=200, dim=8, ps_hosts=["127.0.0.1:1", "127.0.0.1:2"])
    return d, graph


@pytest.mark.parametrize("args, message", [
    (["--target", "127.0.0.1:2222"],
     "invalid value '127.0.0.1:2222' for '--target <grpc://HOST:PORT>': \"127.0.0.1:2222\" is "
     "not grpc://host:port"),
    (["--target", "grpc://127.0.0.1"],
     "invalid value 'grpc://127.0.0.1' for '--target <grpc://HOST:PORT>'"),
    (["--ps-hosts", "127.0.0.1:99999"],
     "invalid value '127.0.0.1:99999' for '--ps-hosts <HOST:PORT,...>': \"127.0.0.1:99999\": "
     "\"99999\" is not a port (1 to 65535)"),
    (["--task-index", "2"],
     "error: --task-index: 2 is not a task of --worker-hosts, which lists 2 (from 0)"),
    (["--task-index", "1", "--save", "ckpt"],
     "error: --save: worker task 1 of 2 (127.0.0.1:3): only the chief (worker task 0) saves"),
    (["--task-index", "1", "--restore", "ckpt"],
     "error: --restore: worker task 1 of 2 (127.0.0.1:3): only the chief (worker task 0) "
     "restores"),
], ids=["target-without-scheme", "target-without-port", "bad-port", "task-index", "save",
        "restore"])
def test_cluster_options_are_checked_before_anything_starts(hogwild_bin, setup_graph, args,
                                                           message):
    d, graph = setup_graph
    base = {"--ps-hosts": "127.0.0.1:1", "--worker-hosts": "127.0.0.1:2,127.0.0.1:3",
            "--task-index": "0"}
    for option, value in zip(args[::2], args[1::2]):
        base[option] = value
    r, _ = run(hogwild_bin, "--graph", graph, "--op-library", PLUGIN,
               "--feed", d / "data.prototxt", *[x for kv in base.items() for x in kv],
               d / "part-0")
    assert r.returncode != 0
    assert message in r.stderr, r.stderr
    assert "reaching the ps tasks" not in r.stderr, r.stderr


def test_a_cluster_graph_needs_the_cluster_options_and_the_other_way_round(hogwild_bin,
                                                                          setup_graph, tmp_path):
    d, graph = setup_graph
    local = tmp_path / "bow.meta"
    export_bow_graph.export(local, vocab=200, dim=8)
    for g, more, message in [
            (graph, [], f"error: {graph}: exported for a parameter-server cluster (its variables "
                        "live on /job:ps tasks): train it as a worker of that cluster with "
                        "--ps-hosts, --worker-hosts and --task-index"),
            (local, cluster_args({"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]}, 0),
             f"error: {local}: not exported for a parameter-server cluster (no "
             "\"hogwild/finish_op\" collection): export it with --ps-hosts")]:
        r, _ = run(hogwild_bin, "--graph", g, "--op-library", PLUGIN,
                   "--feed", d / "data.prototxt", *more, d / "part-0")
        assert r.returncode == 1
        assert message in r.stderr, r.stderr
