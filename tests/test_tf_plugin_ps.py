"""Asynchronous parameter-server training on TensorFlow's own distributed runtime, on loopback
clusters of separate processes, with the update ops running on the ps tasks:

- compat.v1 between-graph replication (2 ps, 2 workers), AdamAsyncOptimizer with ref and with
  resource variables (tests/ps_task.py);
- TF2 ParameterServerStrategy with a ClusterCoordinator (2 ps, 2 workers, a chief), Keras
  AdamAsync on a model whose embedding table is sharded over both ps, in float32 and in bfloat16
  (float32 slots, the V2 ops) (tests/ps_strategy_task.py).

Every variable's beta powers must count its updates exactly: the point of AdamAsync is that
each variable's powers live with it on its ps, advanced by its own update op.
"""

import json
import pathlib

import pytest

from ps_cluster import CLUSTER_TIMEOUT_S, last_json_line, loopback_cluster, powers

HERE = pathlib.Path(__file__).resolve().parent


@pytest.mark.parametrize("kind", ["ref", "resource"])
def test_between_graph_training_converges_with_per_variable_powers(processes, kind):
    steps = 150
    cluster = json.dumps(loopback_cluster(ps=2, worker=2))
    for job in ("ps", "worker"):
        for i in range(2):
            processes.start(f"{job}{i}", HERE / "ps_task.py", cluster, job, i, steps, kind)
    result = last_json_line(processes.finish("worker0", timeout=CLUSTER_TIMEOUT_S))
    processes.finish("worker1", timeout=60)

    assert result["eval_loss"] < 0.05 * result["first_loss"], result
    assert all("/job:ps/" in d for d in result["devices"]), result["devices"]
    assert {d.split("/task:")[1][0] for d in result["devices"]} == {"0", "1"}, "both ps used"

    # Worker 0's traced step ran one update op per variable, on the ps tasks: the sparse op for
    # the embedding, the dense op for bias and chief_only (Resource* for resource variables).
    prefix = {"ref": "", "resource": "Resource"}[kind]
    ran = result["update_ops_ran"]
    assert sorted(op for op, _ in ran) == sorted(
        [f"{prefix}ApplyAdamAsync"] * 2 + [f"{prefix}SparseApplyAdamAsync"]), ran
    assert all("/job:ps/" in device for _, device in ran), ran

    # Each variable's powers advanced once per update of that variable (use_locking=True):
    # emb and bias by both workers (2 * steps), chief_only by worker 0 only (steps).
    assert result["powers"]["emb"] == powers(2 * steps)
    assert result["powers"]["bias"] == powers(2 * steps)
    assert result["powers"]["chief_only"] == powers(steps)


@pytest.mark.parametrize("emb_dtype", ["float32", "bfloat16"])
def test_parameter_server_strategy_trains_sharded_keras_model_with_per_shard_powers(processes,
                                                                                   emb_dtype):
    steps = 100
    cluster = json.dumps(loopback_cluster(ps=2, worker=2, chief=1))
    task = HERE / "ps_strategy_task.py"
    for job in ("ps", "worker"):
        for i in range(2):
            processes.start(f"{job}{i}", task, cluster, "server", job, i)
    processes.start("chief", task, cluster, "chief", steps, emb_dtype)
    result = last_json_line(processes.finish("chief", timeout=CLUSTER_TIMEOUT_S))
    variables, updates = result["variables"], result["updates"]

    assert result["eval_loss"] < 0.25 * result["first_loss"], result
    emb_shards = sorted(name for name in variables if "/emb/embeddings/part_" in name)
    assert len(emb_shards) == 2, sorted(variables)
    assert {variables[s]["device"].split("/task:")[1][0] for s in emb_shards} == {"0", "1"}, \
        "the embedding's shards on both ps"
    for name, var in variables.items():
        # m, v and both powers on the variable's own ps: no state shared between variables.
        assert "/job:ps/" in var["device"], (name, var)
        assert var["slot_devices"] == [var["device"]], (name, var)

    # Shards of the embedding get IndexedSlices and the sparse op (its V2 form for bfloat16);
    # the dense kernel's two shards and the unsharded bias get dense gradients and the dense op.
    assert {name for name, kind in result["grad_kinds"].items() if kind == "IndexedSlices"} == \
        set(emb_shards), result["grad_kinds"]
    sparse_op = {"float32": "ResourceSparseApplyAdamAsync",
                 "bfloat16": "ResourceSparseApplyAdamAsyncV2"}[emb_dtype]
    assert result["update_ops"] == {sparse_op: 2, "ResourceApplyAdamAsync": 3}, \
        result["update_ops"]

    # Each shard's powers count that shard's updates: every step updates each dense variable;
    # an embedding shard is updated by the steps whose batch had ids in its rows (an empty
    # update leaves the powers alone), which some batches lack (use_locking=True). The powers
    # are float32 for the bfloat16 shards too.
    assert min(updates[s] for s in emb_shards) < steps, updates
    for name, var in variables.items():
        assert var["powers"] == powers(updates[name]), (name, updates[name], var)
