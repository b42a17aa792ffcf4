"""numpyrt's own suite: run by `xharness run` in every cell of [tool.xharness], against the
runtime the cell tests (the `adapter` fixture of xharness' pytest plugin).

The plugin's `devices` fixture and `devices(n)` marker count JAX's devices; numpyrt is not built
on JAX, so this suite sizes itself by `api.cell_shape()`, the same facts as the runtime reads.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pytest
from xharness_numpyrt.adapter import NumpyRtAdapter
from xharness_numpyrt.invariants import BLOCK_PLACEMENT
from xharness_numpyrt.runtime import ShardingError

from harness import api

#: the repository's own configuration: the cells, with the device count each one promises
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def needs_devices(n: int) -> pytest.MarkDecorator:
    """Skip, with the reason, in a cell with fewer than ``n`` devices (the cell's count, not
    JAX's: the suite must not depend on JAX to know it)."""
    have = api.cell_shape().devices
    return pytest.mark.skipif(have < n, reason=f"needs {n} devices, the cell has {have}")


def test_adapter_meets_the_protocol(adapter: NumpyRtAdapter) -> None:
    # every operation of the protocol is there (the harness checks the same when it loads the
    # plugin); the ones numpyrt lacks are BaseAdapter's and say so
    assert isinstance(adapter, api.Adapter)
    assert adapter.name == "numpyrt"
    assert {api.TENSORS, api.MESHES, api.SHARDING, api.SHARDING_READBACK} <= adapter.capabilities
    with pytest.raises(api.Unsupported, match="lacks step"):
        adapter.step()


def test_device_count_is_the_cells(adapter: NumpyRtAdapter) -> None:
    """The count the cell promises in pyproject.toml is the count numpyrt started with: it
    travelled from [tool.xharness] through the matrix's environment and cell_shape()."""
    shape = api.cell_shape()
    if not shape.name:
        pytest.skip("not in a cell of [tool.xharness] (run it with `xharness run`)")
    cells = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["xharness"]["cells"]
    promised = {cell["name"]: cell["devices"] for cell in cells}
    assert adapter.device_count() == promised[shape.name] == shape.devices


def test_device_count_follows_cell_shape(adapter: NumpyRtAdapter) -> None:
    # anywhere, in a cell or under plain pytest: numpyrt and the harness agree on the count
    assert adapter.device_count() == api.cell_shape().devices


def test_values_round_trip(adapter: NumpyRtAdapter) -> None:
    host = np.arange(12, dtype=np.int32).reshape(3, 4)
    t = adapter.tensor(host)
    host[0, 0] = 99  # the device holds a copy, not the caller's memory
    got = adapter.to_host(t)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, np.arange(12, dtype=np.int32).reshape(3, 4))


def test_replicated_layout_reads_no_spec(adapter: NumpyRtAdapter) -> None:
    n = adapter.device_count()
    mesh = adapter.mesh(range(n), (n,), ("x",))
    t = adapter.mark_sharding(adapter.tensor(np.ones((2, 2), np.float32)), mesh, (None, None))
    assert adapter.sharding_spec(t) is None
    assert sorted(adapter.device_shards(t)) == list(range(n))  # a whole copy on every device


def test_derive_keeps_the_layout(adapter: NumpyRtAdapter) -> None:
    n = adapter.device_count()
    mesh = adapter.mesh(range(n), (n,), ("x",))
    host = np.arange(2 * n, dtype=np.float32).reshape(n, 2)
    t = adapter.derive(adapter.mark_sharding(adapter.tensor(host), mesh, ("x", None)))
    assert adapter.sharding_spec(t) == ("x", None)
    np.testing.assert_array_equal(adapter.to_host(t), host * 2 + 1)


@needs_devices(2)
def test_rows_split_over_devices(adapter: NumpyRtAdapter) -> None:
    n = adapter.device_count()
    mesh = adapter.mesh(range(n), (n,), ("x",))
    host = np.arange(4 * n, dtype=np.float32).reshape(2 * n, 2)
    t = adapter.mark_sharding(adapter.tensor(host), mesh, ("x", None))
    shards = adapter.device_shards(t)
    assert sorted(shards) == list(range(n))
    for device, (index, data) in shards.items():
        assert index[0].indices(2 * n)[:2] == (2 * device, 2 * device + 2)
        np.testing.assert_array_equal(data, host[index])


@needs_devices(2)
def test_uneven_split_is_refused(adapter: NumpyRtAdapter) -> None:
    n = adapter.device_count()
    mesh = adapter.mesh(range(n), (n,), ("x",))
    with pytest.raises(ShardingError, match="does not pad"):
        adapter.mark_sharding(adapter.tensor(np.zeros((n + 1, 2), np.float32)), mesh, ("x", None))


@needs_devices(4)
def test_transposed_spec_places_blocks_by_mesh_position(adapter: NumpyRtAdapter) -> None:
    # the planted bug's trigger, as a plain test: on a 2x2 mesh device 1 sits at position (0, 1)
    # and owns the second block of rows (axis y) and the first of columns (axis x)
    mesh = adapter.mesh(range(4), (2, 2), ("x", "y"))
    host = np.arange(16, dtype=np.float32).reshape(4, 4)
    t = adapter.mark_sharding(adapter.tensor(host), mesh, ("y", "x"))
    index, _ = adapter.device_shards(t)[1]
    assert (index[0].indices(4)[:2], index[1].indices(4)[:2]) == ((2, 4), (0, 2))


def test_fault_switch_turns_on_for_a_block_only(adapter: NumpyRtAdapter) -> None:
    assert set(adapter.fault_switches()) == {"transposed-placement"}
    with adapter.inject("transposed-placement"):
        assert adapter.faults_on() == {"transposed-placement"}
    assert adapter.faults_on() == frozenset()
    with pytest.raises(ValueError, match="known: transposed-placement"), adapter.inject("no-such"):
        pass


# the plugin's invariant, as a hypothesis test of this suite
test_block_placement = BLOCK_PLACEMENT.hypothesis_test()
