"""Smoke run of scripts/bench_ps.py: one compat.v1 cluster (2 ps, 2 workers) per optimizer, a
one-second window. Checks what the benchmark reads from the graph (where the beta powers live,
what a traced step runs on each ps task) and that it leaves no process behind. About 25 s here
(two clusters of 4 processes importing TensorFlow on 2 cores)."""

import json
import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
SCRIPT = HERE.parent / "scripts" / "bench_ps.py"


def test_bench_ps_smoke_reads_power_placement_from_the_graph(tmp_path):
    cmd = [sys.executable, str(SCRIPT), "--out", str(tmp_path), "--only", "throughput",
           "--modes", "v1", "--workers", "2", "--window", "1", "--warmup-steps", "3",
           "--start-timeout", "150", "--no-plot"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    rows = {r["optimizer"]: r for r in
            json.loads((tmp_path / "results.json").read_text())["throughput"]}
    assert set(rows) == {"adam", "adam_async"}, rows
    for name, row in rows.items():
        assert "error" not in row, (name, row.get("error"))
        assert all(s > 0 for s in row["steps"]), (name, row["steps"])
        assert all(c > 0 for c in row["ps_cpu_s"]), (name, row["ps_cpu_s"])
        # Every process of the cluster is gone.
        assert not [pid for pid in row["pids"] if os.path.exists(f"/proc/{pid}")], (name, row)

    # Stock Adam: one pair of powers, on one ps task; every update reads it there, so the other
    # ps task receives power values over the network in each step.
    adam = rows["adam"]
    assert [n for n, _ in adam["placement"]["powers"]] == ["beta1_power", "beta2_power"]
    power_ps = {t for _, t in adam["placement"]["powers"]}
    assert len(power_ps) == 1, adam["placement"]
    (power_ps,) = power_ps
    other_ps = ({"ps0", "ps1"} - {power_ps}).pop()
    assert adam["trace"][power_ps]["power_ops"] > 0 == adam["trace"][other_ps]["power_ops"]
    assert adam["trace"][other_ps]["recv_from_other_ps"] > 0, adam["trace"]

    # AdamAsync: a pair per variable, each on its variable's ps task (both ps tasks hold some);
    # no tensor goes from one ps task to the other.
    mine = rows["adam_async"]
    variables = mine["placement"]["variables"]
    powers = mine["placement"]["powers"]
    assert len(powers) == 2 * len(variables) == 12, powers
    for name, task in powers:
        assert task == variables[name.rsplit("/", 1)[0]], (name, task, variables)
    assert {t for _, t in powers} == {"ps0", "ps1"}
    assert all(mine["trace"][ps]["recv_from_other_ps"] == 0 for ps in ("ps0", "ps1"))
