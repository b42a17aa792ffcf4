"""Invariants 1 and 2: partition specs normalize to one hashable form, and the cached op sharding
of a mesh is right for every normalized spec.

Why these two: the spec is the key of ``Mesh.get_op_sharding``'s ``lru_cache`` (upstream #8522:
FSDPv2 prepared ``[]`` for a 0-d parameter and the cache raised ``unhashable type: 'list'``), and
a cache keyed on the wrong thing hands one mesh's sharding to another. Both checks are pure
Python over cached objects: no device transfer, so hypothesis can try thousands of examples.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import numpy as np
from hypothesis import strategies as st
from jax.sharding import Mesh as JaxMesh
from jax.sharding import NamedSharding, PartitionSpec

from harness import adapters
from harness.adapters import base
from harness.properties import strategies as pst
from harness.properties.base import Invariant
from harness.runtime import faults, fsdp
from harness.runtime.mesh import Mesh, normalize_spec

# ------------------------------------------------------------------------------ helpers


def _axes_of(entry: Any) -> tuple[str, ...]:
    if entry is None:
        return ()
    if isinstance(entry, str):
        return (entry,)
    return tuple(entry)


def _meaning(spec: Any) -> tuple[tuple[str, ...], ...]:
    """What a spec says, independent of its spelling: the axes of each dimension, in order."""
    return tuple(_axes_of(e) for e in spec)


def jax_grid(mesh: Any) -> np.ndarray:
    """The mesh's device grid built from JAX's device list, not from the runtime's topology, so
    a differential check does not trust the code under test for the device order. (For another
    runtime under test, device k of its order is JAX's k-th device: only the layout matters.)"""
    ids, shape, _ = pst.layout_of(mesh)
    return _grid(ids, shape)


@functools.lru_cache(maxsize=4096)
def _grid(ids: tuple[int, ...], shape: tuple[int, ...]) -> np.ndarray:
    devices = sorted(jax.devices(), key=lambda d: (d.process_index, d.id))
    grid = np.array([devices[i] for i in ids], dtype=object).reshape(shape)
    grid.flags.writeable = False
    return grid


def expected_sharding(mesh: Any, spec: tuple[Any, ...]) -> NamedSharding:
    """What JAX itself builds for ``spec`` over the mesh's devices (cached per layout)."""
    return _expected(*pst.layout_of(mesh), spec)


@functools.lru_cache(maxsize=8192)
def _expected(ids: tuple[int, ...], shape: tuple[int, ...], names: tuple[str, ...], spec: tuple[Any, ...]) -> NamedSharding:
    return NamedSharding(_jax_mesh(ids, shape, names), PartitionSpec(*spec))


@functools.lru_cache(maxsize=4096)
def _jax_mesh(ids: tuple[int, ...], shape: tuple[int, ...], names: tuple[str, ...]) -> JaxMesh:
    return JaxMesh(_grid(ids, shape), names)


def _check_prepared(mesh: Any, shape: tuple[int, ...]) -> tuple[Any, ...] | None:
    """FSDPv2's spec for a parameter of ``shape``: a hashable, normal tuple of that rank that uses
    the ``fsdp`` axis at most once (None when the mesh has no such axis). The reference runtime
    must also shard the first dimension the axis divides (its documented choice)."""
    if fsdp.FSDP_AXIS not in mesh.axis_names:
        return None
    rt = adapters.current()
    prepared = rt.prepare_fsdp_spec(shape, mesh)
    assert type(prepared) is tuple, f"FSDPv2 prepared {prepared!r} for a {len(shape)}-d parameter: not a tuple"
    hash(prepared)
    assert len(prepared) == len(shape), f"FSDPv2 prepared {prepared!r} for a {len(shape)}-d parameter"
    assert normalize_spec(prepared, len(shape), mesh) == prepared, f"FSDPv2 prepared the non-normal {prepared!r}"
    if rt.name == "reference":
        size = pst.axis_sizes(mesh)[fsdp.FSDP_AXIS]
        first = next((d for d, n in enumerate(shape) if n % size == 0), None)
        wanted = tuple(fsdp.FSDP_AXIS if d == first else None for d in range(len(shape)))
        assert prepared == wanted, f"FSDPv2 prepared {prepared!r} for shape {shape} on fsdp={size}, expected {wanted!r}"
    return prepared


# ------------------------------------------------------------------------------ invariant 1


@functools.lru_cache(maxsize=4096)
def malformed_specs(mesh: Mesh, ndim: int) -> st.SearchStrategy[Any]:
    """Spellings no spec may have: a bare string, a number, an axis twice, a group inside a
    group, an empty group, more entries than dimensions, an unknown axis."""
    axis = mesh.axis_names[0]
    choices: list[Any] = [
        axis,  # a bare string: "one dimension" or "each letter an axis"?
        3,
        [axis, axis] if ndim >= 2 else [[axis, axis]],  # an axis twice
        [[axis, [axis]]],  # nested deeper than one group
        [[]],  # an empty group
        [None] * (ndim + 1),  # more entries than dimensions
        ["no-such-axis"],
        [1.5],
    ]
    return st.sampled_from(choices)


def check_spec_normalization(mesh: Mesh, spec: Any, ndim: int, malformed: Any = None) -> None:
    """``normalize_spec`` gives a hashable tuple of ``ndim`` entries, is idempotent, keeps what
    the spec means, uses each axis once; FSDPv2's own spec preparation gives such a tuple for every
    rank, 0 included; a malformed spec is refused with an error that names it."""
    normal = normalize_spec(spec, ndim, mesh)
    assert type(normal) is tuple, f"normalize_spec({spec!r}) returned a {type(normal).__name__}"
    hash(normal)
    assert len(normal) == ndim, f"normalize_spec({spec!r}, ndim={ndim}) has {len(normal)} entries"
    assert all(e is None or isinstance(e, str) or (type(e) is tuple and e) for e in normal), normal
    assert normalize_spec(normal, ndim, mesh) == normal, f"normalize_spec is not idempotent on {normal!r}"
    assert normalize_spec(normal) == normal, f"normalize_spec without a rank changed {normal!r}"
    padded = _meaning(spec) + ((),) * (ndim - len(_meaning(spec)))
    assert _meaning(normal) == padded, f"normalize_spec({spec!r}) = {normal!r} changed its meaning"
    used = [a for e in normal for a in _axes_of(e)]
    assert len(used) == len(set(used)), f"{normal!r} uses an axis twice"
    size = math.prod(pst.axis_sizes(mesh).values())
    _check_prepared(mesh, (size,) * ndim)
    _check_prepared(mesh, tuple(range(1, ndim + 1)))
    if malformed is not None:
        try:
            normalize_spec(malformed, ndim, mesh)
        except (TypeError, ValueError) as exc:
            assert repr(malformed) in str(exc), f"the error for spec {malformed!r} does not name it: {exc}"
        else:
            raise AssertionError(f"normalize_spec accepted the malformed spec {malformed!r} for ndim={ndim}")


@st.composite
def _normalization_examples(draw: st.DrawFn) -> dict[str, Any]:
    mesh = draw(pst.meshes(require_axes=(fsdp.FSDP_AXIS,)))
    ndim = draw(pst.ints(0, 4))
    spec = draw(pst.partition_specs(mesh, ndim))
    # a shorter spec is legal (trailing dimensions replicated, as in JAX)
    if cut := draw(pst.ints(0, ndim)):
        spec = PartitionSpec(*spec[: ndim - cut]) if isinstance(spec, PartitionSpec) else spec[: ndim - cut]
    return {"mesh": mesh, "spec": spec, "ndim": ndim, "malformed": draw(malformed_specs(mesh, ndim))}


def _rank_and_axes(example: dict[str, Any]) -> int:
    return int(example["ndim"]) + len(example["mesh"].axis_names) - 1


SPEC_NORMALIZATION = Invariant(
    id="spec-normalization",
    title="partition specs normalize to one hashable tuple per rank (FSDPv2's included)",
    check=check_spec_normalization,
    examples=_normalization_examples,
    catches=(faults.UNHASHABLE_SPEC,),
    size=_rank_and_axes,
    max_size=1,
    max_examples=200,
    isolate=False,
    needs=(base.FSDP,),
)


# ------------------------------------------------------------------------------ invariant 2


def check_op_sharding(mesh: Any, spec: Any, ndim: int, other: Any) -> None:
    """``Mesh.get_op_sharding`` takes every normalized spec (FSDPv2's included, exactly as
    prepared), gives equivalent shardings for equivalent spellings and equal meshes, matches a
    sharding built by JAX from the same device grid, and never answers for one mesh with another
    mesh's sharding. (Against a runtime whose shardings are not JAX's, only the first holds.)"""
    rt = adapters.current()
    normal = normalize_spec(spec, ndim, mesh)
    got = rt.op_sharding(mesh, normal)
    if fsdp.FSDP_AXIS in mesh.axis_names:  # FSDPv2's spec goes to the cache as prepared, unchecked
        size = math.prod(pst.axis_sizes(mesh).values())
        for shape in ((size,) * ndim, tuple(range(1, ndim + 1))):
            rt.op_sharding(mesh, rt.prepare_fsdp_spec(shape, mesh))
    if not isinstance(got, NamedSharding):
        return
    want = expected_sharding(mesh, normal)
    assert got.is_equivalent_to(want, ndim), f"{mesh!r} spec {normal!r}: got {got}, JAX builds {want}"
    assert tuple(got.mesh.axis_names) == mesh.axis_names, f"sharding on axes {got.mesh.axis_names}, mesh has {mesh.axis_names}"
    assert (got.mesh.devices == jax_grid(mesh)).all(), f"{mesh!r}: sharding's device grid is not the mesh's"
    short = normal
    while short and short[-1] is None:
        short = short[:-1]
    ids, shape, names = pst.layout_of(mesh)
    twin = rt.mesh(ids, shape, names)
    for variant in (short, tuple(e[0] if type(e) is tuple and len(e) == 1 else e for e in normal)):
        for m in (mesh, twin):
            alt = rt.op_sharding(m, variant)
            assert alt.is_equivalent_to(got, ndim), f"{variant!r} and {normal!r} mean the same, shardings differ"
    renamed = dict(zip(mesh.axis_names, other.axis_names, strict=True))
    translated = tuple(None if e is None else renamed[e] if isinstance(e, str) else tuple(renamed[a] for a in e) for e in normal)
    theirs = rt.op_sharding(other, translated)
    assert tuple(theirs.mesh.axis_names) == other.axis_names, (
        f"{other!r} got a sharding over axes {theirs.mesh.axis_names}: another mesh's cached answer"
    )
    assert (theirs.mesh.devices == jax_grid(other)).all(), (
        f"{other!r} (devices {pst.layout_of(other)[0]}) got a sharding over another device order: another mesh's cached answer"
    )


@st.composite
def _op_sharding_examples(draw: st.DrawFn) -> dict[str, Any]:
    mesh = draw(pst.meshes(require_axes=(fsdp.FSDP_AXIS,)))
    ndim = draw(pst.ints(0, 4))
    spec = draw(pst.partition_specs(mesh, ndim))
    how = draw(pst.choice(("device-order", "axis-names")))
    ids, shape, names = pst.layout_of(mesh)
    rt = adapters.current()
    if how == "device-order":
        other = rt.mesh(tuple(draw(pst.perm(ids))), shape, names)
    else:
        other = rt.mesh(ids, shape, tuple(f"{a}_" for a in names))
    return {"mesh": mesh, "spec": spec, "ndim": ndim, "other": other}


OP_SHARDING_CACHE = Invariant(
    id="op-sharding-cache",
    title="Mesh.get_op_sharding: every normalized spec, equivalent answers, never another mesh's",
    check=check_op_sharding,
    examples=_op_sharding_examples,
    catches=(faults.UNHASHABLE_SPEC,),
    size=_rank_and_axes,
    max_size=1,
    max_examples=200,
    isolate=False,
    needs=(base.OP_SHARDING, base.FSDP),
)
