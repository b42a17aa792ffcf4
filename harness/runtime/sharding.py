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

from harness.runtime import config, faults, ir, transfers
from harness.runtime.mesh import Mesh
from harness.runtime.tensor import Tensor


def _check_spec(partition_spec: Any) -> None:
    """Reject specs of the wrong type; a list spec is left for the cached lookup to refuse."""
    if not isinstance(partition_spec, tuple | list):
        raise TypeError(
            f"partition spec must be a tuple with one entry per dimension, got {type(partition_spec).__name__} "
            f"{partition_spec!r}" + (f" (for one dimension write ({partition_spec!r},))" if isinstance(partition_spec, str) else "")
        )
    for dim, entry in enumerate(partition_spec):
        if entry is None or isinstance(entry, str):
            continue
        if isinstance(entry, tuple) and entry and all(isinstance(axis, str) for axis in entry):
            continue
        raise TypeError(
            f"partition spec entry {entry!r} (dimension {dim}) must be None, an axis name or a tuple of axis names, "
            f"got {type(entry).__name__}"
        )


def mark_sharding(t: Tensor, mesh: Mesh, partition_spec: Any) -> Tensor:
    """Shard ``t`` over ``mesh`` by ``partition_spec`` (a tuple: one entry per dimension).

    Each entry is None (replicated), a mesh axis name, or a tuple of axis names. A ``str`` spec, a
    non-sequence, or any other entry raises ``TypeError``. A ``list`` spec is deliberately *not*
    normalized to a tuple: as upstream, the spec goes straight to the ``lru_cache``-d
    ``Mesh.get_op_sharding``, which raises ``TypeError: unhashable type: 'list'``; the
    ``unhashable-spec`` scenario depends on that error coming out of the cache.
    """
    _check_spec(partition_spec)
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
    storage = t.rt_storage
    # an alias that only renames its storage (``detach``) is the storage: marking it lays the
    # storage out, as marking the storage itself does (its requested layout included, which a
    # step would otherwise impose over the annotation)
    renames = _is_alias_only(t.rt_views)
    if renames and not storage.pending:
        storage.materialize(transfers.reshard(storage.node.data, sharding))
        storage.sharding = sharding
        return t
    annotated = ir.Node("custom_sharding", (t.node,), sharding=sharding)
    if not renames and not config.options.functionalization and faults.active(faults.LOST_SHARDING):
        annotated.sharding = None
        t.rt_write(annotated)
        t.rt_forget_version()  # the alias is regenerated from the view update...
        t.node.sharding = sharding  # ...and the annotation lands there, not on the custom-sharding node
    else:
        t.rt_write(annotated)
    if renames:
        storage.sharding = sharding
    return t


def clear_sharding(t: Tensor) -> Tensor:
    """Make ``t`` replicated again.

    Device data is resharded at once. A pending value (for instance a ``custom_sharding`` node
    written by ``mark_sharding``, or a value XLA would lay out like its sharded inputs) gets the
    replicated sharding as its requested output sharding, so it is replicated after the step.
    """
    storage = t.rt_storage
    if not storage.pending:
        storage.materialize(transfers.reshard(storage.node.data, transfers.replicated()))
        storage.sharding = None
    else:
        storage.sharding = transfers.replicated()
    return t


def _is_alias_only(views: tuple) -> bool:
    """A view chain that only re-names the storage (``detach``), so it has the storage's layout."""
    return all(kind == "alias" for kind, _ in views)


def sharding_spec(t: Tensor) -> tuple | None:
    """The partition spec ``t`` is laid out with, or None when it is replicated or unannotated."""
    storage = t.rt_storage
    sharding = storage.node.data.sharding if not storage.pending else storage.sharding
    if not _is_alias_only(t.rt_views):
        return None
    if not isinstance(sharding, NamedSharding):
        return None
    spec = tuple(sharding.spec)
    if all(e is None for e in spec):
        return None
    return spec + (None,) * (t.ndim - len(spec))


def is_sharded(t: Tensor) -> bool:
    return sharding_spec(t) is not None
