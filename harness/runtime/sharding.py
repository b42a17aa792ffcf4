"""``mark_sharding`` and ``sharding_spec``: annotating tensors with a layout over a mesh.

Device data is laid out at once (the buffer is resharded). A tensor that is still pending IR, or an
alias, gets a ``custom_sharding`` node written through it in place, like PyTorch/XLA's
``custom_sharding_``; the node must carry the sharding or compilation fails. Without
functionalization, the in-place write to an alias goes through a view update and the alias'
IR is regenerated from it; upstream then attached the sharding to that regenerated node and left
the custom-sharding node bare (fixed in PR #8578), which the ``lost-sharding`` switch re-creates.
"""

from __future__ import annotations

from typing import Any

from jax.sharding import NamedSharding

from harness.runtime import config, executor, faults, ir
from harness.runtime.mesh import Mesh
from harness.runtime.tensor import Tensor


def mark_sharding(t: Tensor, mesh: Mesh, partition_spec: Any) -> Tensor:
    """Shard ``t`` over ``mesh`` by ``partition_spec`` (a tuple: one entry per dimension)."""
    sharding = mesh.get_op_sharding(partition_spec)  # cached: the spec must be hashable
    if len(partition_spec) != t.ndim:
        raise ValueError(f"partition spec {tuple(partition_spec)} has {len(partition_spec)} entries for a {t.ndim}-d tensor of shape {t.shape}")
    for dim, entry in zip(t.shape, partition_spec, strict=True):
        if entry is None:
            continue
        axes = entry if isinstance(entry, tuple) else (entry,)
        parts = 1
        for axis in axes:
            parts *= mesh.shape()[axis]
        if dim % parts:
            raise ValueError(
                f"dimension of size {dim} cannot be split evenly over mesh axes {axes} ({parts} devices): "
                f"tensor shape {t.shape}, spec {tuple(partition_spec)}"
            )
    storage = t._storage
    if not t._views and not storage.pending:
        storage.materialize(executor.reshard(storage.node.data, sharding))
        storage.sharding = sharding
        return t
    annotated = ir.Node("custom_sharding", (t.node,), sharding=sharding)
    if t._views and not config.options.functionalization and faults.active(faults.LOST_SHARDING):
        annotated.sharding = None
        t._write(annotated)
        t._version = -1  # the alias is regenerated from the view update...
        t.node.sharding = sharding  # ...and the annotation lands there, not on the custom-sharding node
    else:
        t._write(annotated)
    if not t._views:
        storage.sharding = sharding
    return t


def clear_sharding(t: Tensor) -> Tensor:
    """Make ``t`` replicated again."""
    storage = t._storage
    if not storage.pending:
        storage.materialize(executor.reshard(storage.node.data, executor.replicated()))
    storage.sharding = None
    return t


def sharding_spec(t: Tensor) -> tuple | None:
    """The partition spec ``t`` is laid out with, or None when it is replicated or unannotated."""
    storage = t._storage
    sharding = storage.node.data.sharding if not storage.pending else storage.sharding
    if t._views:
        return None
    if not isinstance(sharding, NamedSharding):
        return None
    spec = tuple(sharding.spec)
    if all(e is None for e in spec):
        return None
    return spec + (None,) * (t.ndim - len(spec))


def is_sharded(t: Tensor) -> bool:
    return sharding_spec(t) is not None
