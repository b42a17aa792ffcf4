"""Meshes over the discovered devices and their cached JAX shardings.

``Mesh`` mirrors PyTorch/XLA's ``torch_xla.distributed.spmd.Mesh``: device ids laid out in a
logical shape with axis names. ``get_op_sharding`` is ``functools.lru_cache``-d exactly as upstream
(PR #5593), so the spec must be hashable; that cache is where an unnormalized list spec fails with
``TypeError: unhashable type: 'list'``. Like JAX's ``Mesh``, the object is immutable and hashable
by value so equal meshes share cache entries.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
from jax.sharding import Mesh as JaxMesh
from jax.sharding import NamedSharding, PartitionSpec

from harness.runtime import topology

SpecEntry = str | tuple[str, ...] | None


def normalize_spec(
    spec: Sequence[SpecEntry] | PartitionSpec, ndim: int | None = None, mesh: Mesh | None = None
) -> tuple[SpecEntry, ...]:
    """The one hashable spelling of a partition spec: a tuple of None, axis names and tuples of
    axis names (lists, nested lists and ``PartitionSpec`` become that).

    Normalizing an already normal spec returns it unchanged. With ``ndim`` the result has exactly
    ``ndim`` entries (missing trailing ones are replicated, as in JAX); with ``mesh`` every axis
    must be one of its axes. A spec that cannot mean anything (a bare string, an entry that is
    neither None, a name nor a flat group of names, an axis used twice, too many entries) is
    refused with an error that names the spec: silently "fixing" it would shard something other
    than what the user wrote.
    """
    if isinstance(spec, str) or not isinstance(spec, tuple | list | PartitionSpec):
        hint = f" (for one dimension write ({spec!r},))" if isinstance(spec, str) else ""
        raise TypeError(
            f"partition spec {spec!r} must be a tuple, list or PartitionSpec with one entry per "
            f"dimension, got {type(spec).__name__}{hint}"
        )
    out: list[SpecEntry] = []
    for dim, entry in enumerate(spec):
        if entry is None or isinstance(entry, str):
            out.append(entry)
        elif isinstance(entry, tuple | list) and entry and all(isinstance(a, str) for a in entry):
            out.append(tuple(entry))
        else:
            raise TypeError(
                f"partition spec {spec!r}: entry {entry!r} (dimension {dim}) must be None, an axis "
                "name or a non-empty flat group of axis names"
            )
    used = [a for e in out if e is not None for a in ((e,) if isinstance(e, str) else e)]
    repeated = sorted({a for a in used if used.count(a) > 1})
    if repeated:
        raise ValueError(f"partition spec {spec!r} uses mesh axis {repeated[0]!r} more than once")
    if mesh is not None:
        unknown = [a for a in used if a not in mesh.axis_names]
        if unknown:
            raise ValueError(f"partition spec {spec!r} names axis {unknown[0]!r}, not in mesh axes {mesh.axis_names}")
    if ndim is not None:
        if len(out) > ndim:
            raise ValueError(f"partition spec {spec!r} has {len(out)} entries for a {ndim}-d tensor")
        out.extend([None] * (ndim - len(out)))
    return tuple(out)


class Mesh:
    """A logical device mesh: ``Mesh(device_ids, mesh_shape, axis_names)``."""

    __slots__ = ("device_ids", "mesh_shape", "axis_names", "_jax_mesh", "__weakref__")

    def __init__(
        self,
        device_ids: Sequence[int] | np.ndarray,
        mesh_shape: Sequence[int],
        axis_names: Sequence[str] | None = None,
    ) -> None:
        ids = tuple(int(i) for i in np.asarray(device_ids).reshape(-1))
        shape = tuple(int(s) for s in mesh_shape)
        names = tuple(axis_names) if axis_names is not None else tuple(f"axis{i}" for i in range(len(shape)))
        if math.prod(shape) != len(ids):
            raise ValueError(f"mesh_shape {shape} holds {math.prod(shape)} devices, but {len(ids)} device ids were given")
        if len(names) != len(shape):
            raise ValueError(f"{len(names)} axis names {names} for a {len(shape)}-d mesh_shape {shape}")
        if len(set(names)) != len(names):
            raise ValueError(f"axis names must be unique, got {names}")
        count = topology.discover().device_count
        if sorted(ids) != list(range(count)):
            raise ValueError(
                f"an SPMD mesh covers every device exactly once: expected a permutation of "
                f"0..{count - 1}, got {ids}"
            )
        object.__setattr__(self, "device_ids", ids)
        object.__setattr__(self, "mesh_shape", shape)
        object.__setattr__(self, "axis_names", names)
        object.__setattr__(self, "_jax_mesh", None)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Mesh is immutable")

    def _key(self) -> tuple:
        return (self.device_ids, self.mesh_shape, self.axis_names)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mesh) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Mesh(shape={dict(zip(self.axis_names, self.mesh_shape, strict=True))})"

    def size(self) -> int:
        return len(self.device_ids)

    def shape(self) -> dict[str, int]:
        return dict(zip(self.axis_names, self.mesh_shape, strict=True))

    def get_axis_name_idx(self, name: str) -> int:
        return self.axis_names.index(name)

    @property
    def jax_mesh(self) -> JaxMesh:
        if self._jax_mesh is None:
            devices = topology.discover().devices
            grid = np.array([devices[i] for i in self.device_ids], dtype=object).reshape(self.mesh_shape)
            object.__setattr__(self, "_jax_mesh", JaxMesh(grid, self.axis_names))
        return self._jax_mesh

    @functools.cache  # noqa: B019 - upstream caches on the method; meshes are few and long-lived
    def get_op_sharding(self, partition_spec: tuple[SpecEntry, ...]) -> NamedSharding:
        """The JAX sharding for a partition spec over this mesh (cached per spec)."""
        for entry in partition_spec:
            axes = entry if isinstance(entry, tuple) else (entry,)
            for axis in axes:
                if axis is not None and axis not in self.axis_names:
                    raise ValueError(f"partition spec {partition_spec} names axis {axis!r}, not in mesh axes {self.axis_names}")
        return NamedSharding(self.jax_mesh, PartitionSpec(*partition_spec))


class HybridMesh(Mesh):
    """A mesh over slices: each axis is ``dcn`` (across slices) times ``ici`` (within a slice)."""

    __slots__ = ()

    def __init__(
        self,
        *,
        ici_mesh_shape: Sequence[int],
        dcn_mesh_shape: Sequence[int] | None = None,
        axis_names: Sequence[str] | None = None,
    ) -> None:
        ici = tuple(int(s) for s in ici_mesh_shape)
        dcn = tuple(int(s) for s in dcn_mesh_shape) if dcn_mesh_shape is not None else (1,) * len(ici)
        if len(ici) != len(dcn):
            raise ValueError(f"ici_mesh_shape {ici} and dcn_mesh_shape {dcn} must have the same rank")
        topo = topology.discover()
        if math.prod(dcn) != topo.num_slices:
            raise ValueError(f"dcn_mesh_shape {dcn} spans {math.prod(dcn)} slices, but the topology has {topo.num_slices}")
        per_slice = [[i for i, s in enumerate(topo.slice_of) if s == k] for k in range(topo.num_slices)]
        if any(len(g) != math.prod(ici) for g in per_slice):
            raise ValueError(f"ici_mesh_shape {ici} does not match the {len(per_slice[0])} devices per slice")
        # (dcn..., ici...) -> interleave (dcn0, ici0, dcn1, ici1, ...) -> merge each pair
        grid = np.array(per_slice).reshape(dcn + ici)
        rank = len(ici)
        order = [a for i in range(rank) for a in (i, rank + i)]
        merged = grid.transpose(order).reshape(tuple(d * i for d, i in zip(dcn, ici, strict=True)))
        super().__init__(merged.reshape(-1), merged.shape, axis_names)
