"""The strategies draw what they promise, and refuse at construction what cannot work."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.sharding import PartitionSpec

import harness.runtime as xr
from harness.properties import strategies as pst
from harness.properties.strategies import factorizations

pytestmark = pytest.mark.options_independent  # strategies and meshes: no runtime option is read

NDEV = len(jax.devices())
#: draws that touch no device, mesh or runtime: the cell cannot change them (cpu-8 runs them)
ONE_CELL = pytest.mark.cell_independent


@ONE_CELL
def test_factorizations_are_every_ordered_split() -> None:
    assert set(factorizations(8)) == {(8,), (1, 8), (2, 4), (4, 2), (8, 1), (1, 1, 8), (1, 2, 4), (1, 4, 2),
                                      (1, 8, 1), (2, 1, 4), (2, 2, 2), (2, 4, 1), (4, 1, 2), (4, 2, 1), (8, 1, 1)}
    assert (3,) in factorizations(3) and (1, 3) in factorizations(3)
    for n in (1, 3, 4, 6, 8, 12):
        for shape in factorizations(n):
            assert math.prod(shape) == n and 1 <= len(shape) <= 3


@settings(max_examples=50)
@given(st.data())
def test_meshes_cover_every_device_in_many_orders(data: st.DataObject) -> None:
    mesh = data.draw(pst.meshes())
    assert sorted(mesh.device_ids) == list(range(NDEV))
    assert 1 <= len(mesh.mesh_shape) <= 3 and math.prod(mesh.mesh_shape) == NDEV
    assert len(set(mesh.axis_names)) == len(mesh.axis_names)


def test_meshes_reach_permuted_orders_and_odd_axes() -> None:
    seen_orders, seen_shapes = set(), set()

    @settings(max_examples=200, derandomize=True, database=None)
    @given(pst.meshes())
    def collect(mesh: xr.Mesh) -> None:
        seen_orders.add(mesh.device_ids)
        seen_shapes.add(mesh.mesh_shape)

    collect()
    if NDEV > 1:
        assert len(seen_orders) > 1
    assert seen_shapes <= set(factorizations(NDEV)) and len(seen_shapes) > min(3, len(factorizations(NDEV)) - 1)
    if NDEV % 3 == 0:
        assert any(3 in s for s in seen_shapes)


@settings(max_examples=100)
@given(st.data())
def test_partition_specs_use_each_axis_once_in_every_spelling(data: st.DataObject) -> None:
    mesh = data.draw(pst.meshes())
    ndim = data.draw(st.integers(0, 4))
    spec = data.draw(pst.partition_specs(mesh, ndim))
    assert isinstance(spec, tuple | list | PartitionSpec)
    assert len(spec) == ndim
    normal = xr.normalize_spec(spec, ndim, mesh)
    used = [a for e in normal if e is not None for a in ((e,) if isinstance(e, str) else e)]
    assert len(used) == len(set(used)) and set(used) <= set(mesh.axis_names)


def test_partition_specs_reach_every_form() -> None:
    kinds = set()

    @settings(max_examples=150, derandomize=True, database=None)
    @given(pst.meshes().flatmap(lambda m: pst.partition_specs(m, 2)))
    def collect(spec: object) -> None:
        name = "PartitionSpec" if isinstance(spec, PartitionSpec) else type(spec).__name__
        kinds.add(name + ("-nested" if isinstance(spec, list) and any(isinstance(e, list) for e in spec) else ""))

    collect()
    assert {"tuple", "list", "PartitionSpec"} <= kinds
    if NDEV > 1:
        assert "list-nested" in kinds


@settings(max_examples=60)
@given(st.data())
def test_sharded_shapes_divide_or_deliberately_do_not(data: st.DataObject) -> None:
    mesh = data.draw(pst.meshes())
    spec = xr.normalize_spec(data.draw(pst.partition_specs(mesh, 3)), 3, mesh)
    parts = [math.prod(mesh.shape()[a] for a in ((e,) if isinstance(e, str) else e)) if e else 1 for e in spec]
    shape = data.draw(pst.sharded_shapes(mesh, spec))
    assert all(d % p == 0 for d, p in zip(shape, parts, strict=True))
    if any(p > 1 for p in parts):
        uneven = data.draw(pst.sharded_shapes(mesh, spec, divisible=False))
        assert any(d % p for d, p in zip(uneven, parts, strict=True))


@ONE_CELL
@settings(max_examples=40)
@given(st.data())
def test_dtypes_and_host_arrays_cover_every_bit_pattern_kind(data: st.DataObject) -> None:
    dtype = data.draw(pst.dtypes())
    assert dtype.name in pst.DTYPES
    value = data.draw(pst.host_arrays((2, 3), dtype))
    assert value.dtype == dtype and value.shape == (2, 3)


def test_bad_arguments_are_refused_at_construction() -> None:
    mesh = xr.Mesh(range(NDEV), (NDEV,), ("data",))
    with pytest.raises(ValueError, match="only"):
        pst.meshes(max_devices=NDEV + 1)
    if NDEV > 1:
        with pytest.raises(ValueError, match="covers every device"):
            pst.meshes(max_devices=NDEV - 1)
    with pytest.raises(ValueError, match="1 to 3 axes"):
        pst.meshes(max_axes=4)
    with pytest.raises(ValueError, match="'model'.*not in mesh axes"):
        pst.partition_specs(mesh, 2, axes=("model",))
    with pytest.raises(ValueError, match="rank"):
        pst.partition_specs(mesh, -1)
    with pytest.raises(ValueError, match="known forms"):
        pst.partition_specs(mesh, 1, forms=("dict",))
    with pytest.raises(ValueError, match="names axis 'model'"):
        pst.sharded_shapes(mesh, ("model",))
    with pytest.raises(ValueError, match="splits no dimension"):
        pst.sharded_shapes(mesh, (None,), divisible=False)


@ONE_CELL
def test_host_arrays_keep_nan_payloads_and_negative_zero() -> None:
    seen = set()

    @settings(max_examples=300, derandomize=True, database=None)
    @given(pst.host_arrays((4,), np.dtype(np.float16)))
    def collect(v: np.ndarray) -> None:
        seen.update(("nan" if np.isnan(x) else "-0" if x == 0 and np.signbit(x) else "x") for x in v)

    collect()
    assert {"nan", "-0"} <= seen


FEATURES = ("alias", "inplace", "derive", "sync", "save", "mark_step")


@ONE_CELL
def test_swarm_draws_subsets_never_empty_the_full_set_and_each_feature_both_ways() -> None:
    from harness.properties.swarm import swarm

    drawn: list[frozenset[str]] = []

    @settings(max_examples=300, derandomize=True, database=None)
    @given(swarm(FEATURES))
    def collect(enabled: frozenset[str]) -> None:
        assert enabled and enabled <= set(FEATURES)
        drawn.append(enabled)

    collect()
    assert frozenset(FEATURES) in drawn
    assert any(len(s) == 1 for s in drawn) and any(1 < len(s) < len(FEATURES) for s in drawn)
    for feature in FEATURES:
        on = sum(feature in s for s in drawn)
        assert 0.3 * len(drawn) < on < 0.9 * len(drawn), (feature, on, len(drawn))


@ONE_CELL
def test_swarm_shrinks_towards_the_full_set() -> None:
    """The enabled set is no part of a counterexample's meaning: shrinking opens it up."""
    from hypothesis import find

    from harness.properties.swarm import swarm

    assert find(swarm(FEATURES), lambda s: True) == frozenset(FEATURES)
    assert find(swarm(FEATURES), lambda s: "sync" not in s) == frozenset(FEATURES) - {"sync"}


@ONE_CELL
def test_swarm_refuses_an_empty_or_repeated_vocabulary() -> None:
    from harness.properties.swarm import swarm

    with pytest.raises(ValueError, match="at least one feature"):
        swarm(())
    with pytest.raises(ValueError, match="each named once"):
        swarm(("alias", "alias"))


def test_alias_chains_reach_length_four_and_read_back_as_numpy_views() -> None:
    """Chains of every length up to four are drawn, each view one that applies where the chain
    has got to, and the reference runtime reads each chain as numpy does."""
    from harness import adapters

    rt = adapters.current()
    values = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    lengths = set()

    @settings(max_examples=60, derandomize=True, database=None, deadline=None)
    @given(pst.alias_chains(values.shape))
    def collect(chain: tuple[str, ...]) -> None:
        lengths.add(len(chain))
        got = rt.to_host(pst.view_chain(rt, rt.tensor(values), chain, values.shape))
        want = pst.numpy_chain(values, chain)
        assert got.shape == pst.chain_shape(values.shape, chain) and np.array_equal(got, want), chain

    collect()
    assert {0, 1, 2, 3, 4} <= lengths


@ONE_CELL
def test_layout_chains_hold_only_views_that_keep_every_dimension() -> None:
    seen = set()

    @settings(max_examples=80, derandomize=True, database=None)
    @given(pst.alias_chains((2, 2, 2), min_length=3, families=pst.LAYOUT_VIEWS))
    def collect(chain: tuple[str, ...]) -> None:
        assert len(chain) >= 3
        seen.update(kind.split(":")[0] for kind in chain)

    collect()
    assert seen == {"detach", "permute"}  # a 3-d value has no plain transpose
    with pytest.raises(ValueError, match="known families"):
        pst.alias_chains((2, 2), families=("squeeze",))
    with pytest.raises(ValueError, match="no such view"):
        pst.alias_chains((), min_length=1, families=("permute",))
