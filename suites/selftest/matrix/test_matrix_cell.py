"""Checks that run *inside* every matrix cell: the process is the cell it claims to be.

The supervisor describes the cell in the environment (``HARNESS_CELL``, ``HARNESS_DEVICES``,
``HARNESS_PROCESSES``, ``HARNESS_NUM_SLICES``, ...); these tests hold JAX and the runtime to that
description, and exercise collectives across every process. Marked ``multiprocess`` so the
multi-process cells select them; in a plain ``pytest suites`` run they check the plugin's defaults.
"""

from __future__ import annotations

import os
import re

import jax
import numpy as np
import pytest
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from harness import plugin

pytestmark = pytest.mark.multiprocess

IN_CELL = bool(os.environ.get("HARNESS_CELL"))


def _asked_cpu_devices() -> int:
    """The CPU device count the environment asks of JAX: ``JAX_NUM_CPU_DEVICES`` (which the plugin
    sets to its default unless the user chose a count), else the count in ``XLA_FLAGS``, else the
    plugin's default."""
    chosen = os.environ.get("JAX_NUM_CPU_DEVICES", "").strip()
    if chosen:
        return int(chosen)
    flag = re.search(
        r"(?:^|\s)--xla_force_host_platform_device_count[=\s](\d+)", os.environ.get("XLA_FLAGS", "")
    )
    if flag:
        return int(flag.group(1))
    return plugin.DEFAULT_CPU_DEVICES


def _expected_devices_per_process() -> int:
    if IN_CELL:
        return int(os.environ["HARNESS_DEVICES"])
    return _asked_cpu_devices()


def test_topology_is_the_cells() -> None:
    processes = int(os.environ.get("HARNESS_PROCESSES", "1"))
    assert jax.process_count() == processes
    assert jax.process_index() == int(os.environ.get("HARNESS_PROCESS_ID", "0"))
    backend = None if IN_CELL else "cpu"  # the cell's backend; outside a cell, the CPU devices asked
    assert jax.local_device_count(backend) == _expected_devices_per_process()
    assert jax.device_count(backend) == processes * _expected_devices_per_process()
    if IN_CELL:
        assert jax.devices()[0].platform == {"cpu": "cpu", "gpu": "gpu", "tpu": "tpu"}[os.environ["HARNESS_BACKEND"]]


def test_each_rank_is_the_host_the_cell_says() -> None:
    """A namespace cell's rank is a host of its own (its hostname resolves to its own address in
    198.18.0.0/15, and the coordinator is rank 0's); any other cell's ranks share this machine.
    Under srun the host is the rank's node of the namespaced cluster, named as SLURM names it, and
    the coordinator JAX detected is the first node's, the fabric's first host."""
    import ipaddress
    import socket

    from jax._src import distributed

    benchmarking = ipaddress.ip_network("198.18.0.0/15")
    coordinator = os.environ.get("HARNESS_COORDINATOR", "")
    if os.environ.get("HARNESS_NETWORK") == "namespaces":
        mine = ipaddress.ip_address(socket.gethostbyname(socket.gethostname()))
        assert mine in benchmarking
        if "SLURM_JOB_ID" in os.environ:
            assert socket.gethostname() == os.environ["SLURMD_NODENAME"]
            coordinator = str(distributed.global_state.coordinator_address)
            coordinator = f"{socket.gethostbyname(coordinator.rpartition(':')[0])}:"
        else:
            assert re.fullmatch(rf"xh\d+-h{jax.process_index()}", socket.gethostname())
        fabric = ipaddress.ip_network(f"{mine}/24", strict=False)
        assert coordinator.rpartition(":")[0] == str(fabric[1])  # rank 0, the first host
    elif coordinator:
        assert coordinator.startswith("127.0.0.1:")


def test_collective_sum_spans_every_process() -> None:
    """A psum over a global 1-D mesh and an allgather both see every process's contribution."""
    rank, count = jax.process_index(), jax.process_count()
    per_process = jax.local_device_count()
    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    local = np.arange(per_process, dtype=np.float32) + per_process * rank
    array = jax.make_array_from_process_local_data(NamedSharding(mesh, P("data")), local)
    total = jax.jit(lambda a: a.sum(), out_shardings=NamedSharding(mesh, P()))(array)
    n = jax.device_count()
    assert float(total) == n * (n - 1) / 2
    gathered = multihost_utils.process_allgather(np.array([rank + 1], dtype=np.int32))
    assert gathered.reshape(-1).tolist() == list(range(1, count + 1))


def test_runtime_sees_the_cells_topology_and_options(runtime) -> None:
    topology = runtime.discover()
    assert topology.device_count == jax.device_count()
    assert topology.process_count == jax.process_count()
    assert topology.num_slices == int(os.environ.get("HARNESS_NUM_SLICES", "1") or 1)
    options = runtime.options
    assert options.functionalization is (os.environ.get("HARNESS_DISABLE_FUNCTIONALIZATION", "0") != "1")
    assert options.param_aliasing is (os.environ.get("HARNESS_PARAM_ALIASING", "1") != "0")


def test_runtime_computes_across_the_cell(runtime) -> None:
    """A lazy-tensor reduction through the runtime gives the same value in every process."""
    values = np.arange(16, dtype=np.float32).reshape(4, 4)
    total = (runtime.tensor(values) * 2).sum().numpy()
    assert float(total) == 2 * values.sum()
    everyone = multihost_utils.process_allgather(np.array([float(total)], dtype=np.float32))
    assert set(everyone.reshape(-1).tolist()) == {float(total)}


def test_fsdp_training_step_agrees_with_numpy_in_every_process(runtime) -> None:
    """FSDPv2 over every device of the cell (all processes): parameters sharded on ``fsdp``, and
    three SGD steps of a linear model give numpy's parameters, identically in every process."""
    n = jax.device_count()
    mesh = runtime.Mesh(list(range(n)), (n,), ("fsdp",))
    model = runtime.nn.Linear(4, n)
    w, b = model.weight.numpy().copy(), model.bias.numpy().copy()
    model = runtime.fsdp.FSDPv2(model, mesh)
    for name, param in model.named_parameters():
        spec = runtime.sharding_spec(param)
        assert spec is not None and spec[0] == "fsdp", (name, spec)
    optimizer = runtime.optim.SGD(model.parameters(), lr=0.1)
    x = np.linspace(-1.0, 1.0, 2 * n * 4, dtype=np.float32).reshape(2 * n, 4)
    xt = runtime.tensor(x)
    for _ in range(3):
        optimizer.zero_grad()
        loss = (model(xt) * model(xt)).mean()
        loss.backward()
        optimizer.step()
        runtime.mark_step()
        y = x @ w.T + b  # the same step in numpy: d(mean(y^2)) = 2 y / size
        grad_y = 2.0 * y / y.size
        w, b = w - 0.1 * (grad_y.T @ x), b - 0.1 * grad_y.sum(axis=0)
    params = dict(model.named_parameters())
    weight = next(v for k, v in params.items() if k.endswith("weight")).numpy()
    bias = next(v for k, v in params.items() if k.endswith("bias")).numpy()
    np.testing.assert_allclose(weight, w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bias, b, rtol=1e-5, atol=1e-6)
    everyone = multihost_utils.process_allgather(np.concatenate([weight.ravel(), bias.ravel()]))
    assert np.all(everyone == everyone[0:1])


@pytest.mark.skipif(jax.process_count() == 1, reason="one process holds every shard: nothing to gather")
def test_reads_gather_only_what_is_split_across_processes(runtime, monkeypatch) -> None:
    """Every process reads the whole value of a tensor replicated over the cell from its own copy
    (no gather across processes) and of one split across processes through a gather."""
    import harness.runtime as xr

    n = jax.device_count()
    mesh = xr.Mesh(list(range(n)), (n,), ("data",))
    values = np.arange(2 * n * 3, dtype=np.float32).reshape(2 * n, 3)
    split = xr.tensor(values)
    xr.mark_sharding(split, mesh, ("data", None))
    doubled, replicated = split * 2.0, xr.tensor(values[:2]) * 3.0
    xr.mark_step()
    gathers: list[object] = []
    real = multihost_utils.process_allgather
    monkeypatch.setattr(multihost_utils, "process_allgather", lambda *a, **k: gathers.append(a) or real(*a, **k))
    np.testing.assert_array_equal(replicated.numpy(), values[:2] * 3.0)
    assert gathers == []
    np.testing.assert_array_equal(doubled.numpy(), values * 2.0)
    assert len(gathers) == 1
