"""Loopback parameter-server clusters of separate processes, for the tests that run them
(test_tf_plugin_ps.py, test_tf_plugin_ps_faults.py, test_runner_ps.py): ports, the processes and
their output, and the beta powers a number of updates must leave."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np

# A whole run takes about 12 s here (5 processes importing TensorFlow on 2 cores); a hang fails
# the test at this bound instead of blocking the suite.
CLUSTER_TIMEOUT_S = 120


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def loopback_cluster(**tasks):
    """A cluster spec with the given number of tasks per job, on free loopback ports."""
    ports = iter(free_ports(sum(tasks.values())))
    return {job: [f"127.0.0.1:{next(ports)}" for _ in range(n)] for job, n in tasks.items()}


def powers(updates):
    """beta1_power and beta2_power after `updates` updates, multiplied in float32 as the
    kernels do (initial values beta1 and beta2)."""
    b1, b2 = np.float32(0.9), np.float32(0.999)
    for _ in range(updates):
        b1, b2 = b1 * np.float32(0.9), b2 * np.float32(0.999)
    return [float(b1), float(b2)]


def json_lines(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def last_json_line(out):
    return json.loads(out.strip().splitlines()[-1])


class Processes:
    """Cluster processes with their output in files (a pipe nobody reads would block a chatty
    server). `kill_all` ends every one still running: the `processes` fixture calls it after
    each test, pass or fail."""

    def __init__(self, tmp_path):
        self.tmp_path = tmp_path
        self.procs = {}

    def start(self, name, *args):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
        with open(self.tmp_path / f"{name}.out", "w") as out, \
                open(self.tmp_path / f"{name}.err", "w") as err:
            self.procs[name] = subprocess.Popen([sys.executable, *map(str, args)],
                                                stdout=out, stderr=err, env=env)

    def out(self, name):
        return (self.tmp_path / f"{name}.out").read_text()

    def err(self, name):
        return (self.tmp_path / f"{name}.err").read_text()

    def records(self, name):
        """The JSON lines `name` has printed so far."""
        return json_lines(self.out(name))

    def wait_for(self, name, predicate, timeout):
        """Polls `name`'s JSON lines until `predicate(lines)` holds; those lines. Fails at once
        when `name` exits first, and after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            lines = self.records(name)
            if predicate(lines):
                return lines
            code = self.procs[name].poll()
            assert code is None, f"{name} exited with {code}:\n{self.err(name)[-3000:]}"
            assert time.monotonic() < deadline, \
                f"{name}: still waiting after {timeout} s:\n{self.err(name)[-3000:]}"
            time.sleep(0.1)

    def exit_code(self, name, timeout):
        """`name`'s exit status, or None if it is still running after `timeout` seconds."""
        try:
            return self.procs[name].wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def finish(self, name, timeout):
        """Waits for `name` to exit successfully; its stdout."""
        returncode = self.exit_code(name, timeout)
        if returncode is None:
            returncode = f"nothing: still running after {timeout} s"
        assert returncode == 0, f"{name} exited with {returncode}:\n{self.err(name)[-3000:]}"
        return self.out(name)

    def kill(self, name):
        """SIGKILL, as a crash or a preempted machine would end it."""
        self.procs[name].send_signal(signal.SIGKILL)
        self.procs[name].wait()

    def kill_all(self):
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait()
