"""Checks that run *inside* every matrix cell: the process is the cell it claims to be.

The supervisor describes the cell in the environment (``HARNESS_CELL``, ``HARNESS_DEVICES``,
``HARNESS_PROCESSES``, ``HARNESS_NUM_SLICES``, ...); these tests hold JAX and the runtime to that
description, and exercise collectives across every process. Marked ``multiprocess`` so the
multi-process cells select them; in a plain ``pytest suites`` run they check the plugin's defaults.
"""

from __future__ import annotations

import os

import jax
import numpy as np
import pytest
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

pytestmark = pytest.mark.multiprocess

IN_CELL = bool(os.environ.get("HARNESS_CELL"))


def _expected_devices_per_process() -> int:
    if IN_CELL:
        return int(os.environ["HARNESS_DEVICES"])
    return int(os.environ.get("JAX_NUM_CPU_DEVICES") or jax.local_device_count())


def test_topology_is_the_cells() -> None:
    processes = int(os.environ.get("HARNESS_PROCESSES", "1"))
    assert jax.process_count() == processes
    assert jax.process_index() == int(os.environ.get("HARNESS_PROCESS_ID", "0"))
    assert jax.local_device_count() == _expected_devices_per_process()
    assert jax.device_count() == processes * _expected_devices_per_process()
    if IN_CELL:
        assert jax.devices()[0].platform == {"cpu": "cpu", "gpu": "gpu", "tpu": "tpu"}[os.environ["HARNESS_BACKEND"]]


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
