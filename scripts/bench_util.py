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
