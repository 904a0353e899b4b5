"""Asynchronous parameter-server training on TensorFlow's own distributed runtime: a loopback
cluster of 2 ps and 2 worker processes, AdamAsyncOptimizer with variables and slots on the ps."""

import json
import os
import pathlib
import socket
import subprocess
import sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
STEPS = 150


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def test_async_ps_training_converges_with_per_variable_powers():
    ports = free_ports(4)
    cluster = {"ps": [f"127.0.0.1:{p}" for p in ports[:2]],
               "worker": [f"127.0.0.1:{p}" for p in ports[2:]]}
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    task = lambda job, i: subprocess.Popen(
        [sys.executable, str(HERE / "ps_task.py"), json.dumps(cluster), job, str(i), str(STEPS)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    procs = [task("ps", 0), task("ps", 1)]
    try:
        workers = [task("worker", 0), task("worker", 1)]
        procs += workers
        out, err = workers[0].communicate(timeout=180)
        assert workers[0].returncode == 0, err[-3000:]
        _, err1 = workers[1].communicate(timeout=60)
        assert workers[1].returncode == 0, err1[-3000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.communicate()
    result = json.loads(out.strip().splitlines()[-1])

    assert result["eval_loss"] < 0.05 * result["first_loss"], result
    assert all("/job:ps/" in d for d in result["devices"]), result["devices"]
    assert {d.split("/task:")[1][0] for d in result["devices"]} == {"0", "1"}, "both ps used"

    # Each variable's powers advanced once per update of that variable (use_locking=True):
    # emb and bias by both workers (2 * STEPS), chief_only by worker 0 only (STEPS).
    def powers(updates):
        b1, b2 = np.float32(0.9), np.float32(0.999)
        for _ in range(updates):
            b1, b2 = b1 * np.float32(0.9), b2 * np.float32(0.999)
        return [float(b1), float(b2)]

    assert result["powers"]["emb"] == powers(2 * STEPS)
    assert result["powers"]["bias"] == powers(2 * STEPS)
    assert result["powers"]["chief_only"] == powers(STEPS)
