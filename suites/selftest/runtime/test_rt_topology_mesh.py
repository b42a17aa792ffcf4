"""Topology discovery, meshes, partition specs and the cached op sharding."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec

import harness.runtime as xr

need8 = pytest.mark.skipif(len(jax.devices()) < 8, reason="needs 8 devices")


def test_discovery_runs_once_per_process() -> None:
    xr.topology.reset()
    assert xr.discovery_count() == 0
    first = xr.discover()
    second = xr.discover()
    assert first is second
    assert xr.discovery_count() == 1
    assert first.device_count == len(jax.devices())
    assert list(first.devices) == sorted(jax.devices(), key=lambda d: (d.process_index, d.id))
    assert first.process_count == jax.process_count() and first.platform == jax.devices()[0].platform
    assert first.num_slices == 1
    xr.Mesh(np.arange(first.device_count), (first.device_count,), ("x",))
    assert xr.discovery_count() == 1, "building a mesh must reuse the discovered topology"


@need8
def test_simulated_slices() -> None:
    xr.configure(num_slices=2)
    xr.topology.reset()
    topo = xr.discover()
    assert topo.num_slices == 2
    assert topo.slice_of == (0, 0, 0, 0, 1, 1, 1, 1)
    assert topo.slice_devices(1) == topo.devices[4:]


@need8
def test_uneven_simulated_slices_are_refused() -> None:
    xr.configure(num_slices=3)
    xr.topology.reset()
    with pytest.raises(ValueError, match="3 equal slices"):
        xr.discover()


@need8
def test_hybrid_mesh_puts_slices_on_the_dcn_axis() -> None:
    xr.configure(num_slices=2)
    xr.topology.reset()
    mesh = xr.HybridMesh(ici_mesh_shape=(1, 4), dcn_mesh_shape=(2, 1), axis_names=("data", "model"))
    assert mesh.mesh_shape == (2, 4)
    grid = np.array(mesh.device_ids).reshape(mesh.mesh_shape)
    topo = xr.discover()
    slice_grid = np.array(topo.slice_of)[grid]
    # every row is one slice: the dcn axis crosses slices, the ici axis stays within one
    assert (slice_grid == np.array([[0], [1]])).all()
    assert sorted(grid.reshape(-1).tolist()) == list(range(8))
    # interleaved: dcn over the model axis
    mesh2 = xr.HybridMesh(ici_mesh_shape=(2, 2), dcn_mesh_shape=(1, 2), axis_names=("a", "b"))
    g2 = np.array(topo.slice_of)[np.array(mesh2.device_ids).reshape(mesh2.mesh_shape)]
    assert mesh2.mesh_shape == (2, 4)
    assert (g2[:, :2] == 0).all() and (g2[:, 2:] == 1).all()
    with pytest.raises(ValueError, match="spans 4 slices"):
        xr.HybridMesh(ici_mesh_shape=(2, 1), dcn_mesh_shape=(4, 1))
    with pytest.raises(ValueError, match="devices per slice"):
        xr.HybridMesh(ici_mesh_shape=(2, 1), dcn_mesh_shape=(2, 1))


def test_hybrid_mesh_single_slice_is_a_plain_mesh(ndev: int) -> None:
    mesh = xr.HybridMesh(ici_mesh_shape=(ndev,), axis_names=("x",))
    assert mesh == xr.Mesh(np.arange(ndev), (ndev,), ("x",))


@need8
def test_mesh_validation() -> None:
    with pytest.raises(ValueError, match="holds 6 devices"):
        xr.Mesh(np.arange(8), (3, 2))
    with pytest.raises(ValueError, match="axis names"):
        xr.Mesh(np.arange(8), (4, 2), ("a",))
    with pytest.raises(ValueError, match="unique"):
        xr.Mesh(np.arange(8), (4, 2), ("a", "a"))
    with pytest.raises(ValueError, match="exactly once"):
        xr.Mesh([0, 1, 2, 3, 4, 5, 6, 6], (8,))
    with pytest.raises(ValueError, match="exactly once"):
        xr.Mesh(np.arange(4), (4,))
    mesh = xr.Mesh(np.arange(8)[::-1], (2, 4), ("a", "b"))
    assert mesh.shape() == {"a": 2, "b": 4}
    assert mesh.size() == 8 and mesh.get_axis_name_idx("b") == 1
    assert mesh.axis_names == ("a", "b") and xr.Mesh(np.arange(8), (8,)).axis_names == ("axis0",)
    with pytest.raises(AttributeError):
        mesh.mesh_shape = (8,)  # type: ignore[misc]
    # the device grid follows the given id order
    devices = xr.discover().devices
    assert mesh.jax_mesh.devices[0, 0] == devices[7] and mesh.jax_mesh.devices[1, 3] == devices[0]


@need8
def test_mesh_equality_and_hash() -> None:
    a = xr.Mesh(np.arange(8), (4, 2), ("data", "model"))
    b = xr.Mesh(list(range(8)), [4, 2], ["data", "model"])
    c = xr.Mesh(np.arange(8), (2, 4), ("data", "model"))
    assert a == b and hash(a) == hash(b) and a != c


@need8
def test_get_op_sharding_is_cached_and_needs_a_hashable_spec() -> None:
    mesh = xr.Mesh(np.arange(8), (4, 2), ("data", "model"))
    s1 = mesh.get_op_sharding(("data", None))
    assert isinstance(s1, NamedSharding) and s1.spec == PartitionSpec("data", None)
    assert mesh.get_op_sharding(("data", None)) is s1
    assert xr.Mesh(np.arange(8), (4, 2), ("data", "model")).get_op_sharding(("data", None)) is s1
    assert mesh.get_op_sharding(()) .spec == PartitionSpec()
    with pytest.raises(TypeError, match="unhashable type: 'list'"):
        mesh.get_op_sharding(["data", None])
    with pytest.raises(TypeError, match="unhashable type: 'list'"):
        mesh.get_op_sharding([])
    with pytest.raises(ValueError, match="'nope'"):
        mesh.get_op_sharding(("nope",))
    combined = mesh.get_op_sharding((("data", "model"),))
    assert combined.spec == PartitionSpec(("data", "model"))


def test_normalize_spec() -> None:
    assert xr.normalize_spec([]) == ()
    assert xr.normalize_spec(["a", None, ["b", "c"]]) == ("a", None, ("b", "c"))
    assert xr.normalize_spec(PartitionSpec("a", ("b", "c"))) == ("a", ("b", "c"))
    hash(xr.normalize_spec(["a", ["b"]]))
