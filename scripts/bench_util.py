"""Helpers shared by the benchmark scripts."""
import os
import re
import subprocess
import sys
import time
from pathlib import Path


def run_measured(cmd, env=None, log=None):
    """Output, wall seconds, peak RSS in MiB and CPU seconds of `cmd` (exits on failure; the
    output is also written to `log` when given). The peak comes from GNU time when present: a
    child forked from this (large) Python process starts with Python's pages counted in its
    ru_maxrss, so every system would show this process's size."""
    timed = Path("/usr/bin/time").exists()
    full = (["/usr/bin/time", "-f", "PEAK_RSS_KB %M"] if timed else []) + [str(c) for c in cmd]
    t0 = time.perf_counter()
    p = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=env)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if status != 0:
        sys.exit(f"failed ({status}): {' '.join(map(str, cmd))}\n{out[-3000:]}")
    if log:
        Path(log).write_text(out)
    peak = re.findall(r"PEAK_RSS_KB (\d+)", out)
    rss = int(peak[-1]) / 1024 if peak else usage.ru_maxrss / 1024
    return out, wall, rss, usage.ru_utime + usage.ru_stime


_PROBE = []


def core_to_core_ns():
    """The current round trip of a cache line between two threads, in ns (the median of five
    50 ms samples of `benches/core_to_core.rs`, built here once for this CPU). Hogwild's threads
    pay such a transfer on every row both update; on a virtual machine it changes with where the
    hypervisor puts the two virtual cores, so the scripts record it beside each 2-thread run."""
    if not _PROBE:
        root = Path(__file__).resolve().parent.parent
        env = dict(os.environ, RUSTFLAGS="-C target-cpu=native", CARGO_TARGET_DIR="target/bench")
        out = subprocess.run(["cargo", "bench", "-q", "-p", "hogwild", "--bench", "core_to_core",
                              "--no-run", "--message-format=json"], cwd=root, env=env,
                             capture_output=True, text=True, check=True).stdout
        exe = re.findall(r'"executable":"([^"]+core_to_core[^"]*)"', out)
        if not exe:
            sys.exit("cargo did not name the core_to_core benchmark's executable")
        _PROBE.append(exe[-1])
    out = subprocess.run([_PROBE[0], "50"], capture_output=True, text=True, check=True).stdout
    return float(re.findall(r"round_trip_ns ([\d.]+)", out)[-1])
