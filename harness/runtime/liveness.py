"""Per-device liveness: an input one of whose per-device buffers is gone never reaches XLA.

A global array's ``is_deleted()`` says nothing of a per-device buffer it shares with another
array; handed such an input XLA rejects the execution on that device only (JAX 0.10 then dies on
SIGSEGV: the ``deleted-shard`` scenario). The runtime checks those inputs before it launches, and
its own error names the input.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax

from harness.runtime import ir
from harness.runtime.deadlines import Ticket
from harness.runtime.device_data import DeviceData
from harness.runtime.errors import DonatedBufferError, InvalidBufferError


def check_inputs_live(
    args: Sequence[jax.Array], inputs: Sequence[DeviceData], order: Sequence[int], ticket: Ticket
) -> None:
    """Refuse to hand XLA an input one of whose per-device buffers is gone.

    A global array's ``is_deleted()`` is true only when the whole array was deleted; a per-device
    buffer it shares with another array (a single-device piece assembled with
    ``make_array_from_single_device_arrays``, a reshard over the same devices) can be donated or
    deleted through that other array while the flag stays false. XLA then rejects the execution
    on that device only, and the other devices run on: JAX 0.10 dies with SIGSEGV, later
    releases raise or wait for ever on a collective. The runtime's own error names the input.

    Looking at the per-device buffers makes JAX build (and keep) one array object per device, so
    they are looked at only for inputs that may share them (``DeviceData.shares``); every other
    input is checked by the global flag, which ``DeviceData.array`` read already. ``args[k]`` is
    the array of ``inputs[order[k]]``.
    """
    for position, index in enumerate(order):
        data = inputs[index]
        if not data.shares:
            continue
        where = _devices_without_buffer(args[position])
        if where is None:
            continue
        raise DonatedBufferError(
            f"buffer with shape {ir.aval_text(data.aval)} is deleted: input {position} of "
            f"{ticket.describe()}, laid out {layout_text(data.sharding)}, has no buffer on "
            f"{where} (it was donated or deleted through an array sharing it); the execution "
            "was not launched"
        )


def _devices_without_buffer(array: jax.Array) -> str | None:
    """The devices on which ``array`` has lost its buffer, in words; None when it has them all.

    JAX 0.10 and 0.11 keep a whole array's pieces after one is deleted, so the devices can be
    named. JAX 0.12 marks the whole deleted as soon as any piece is and drops its pieces: then
    which devices lost theirs is no longer known."""
    pieces = getattr(array, "_arrays", None)
    if array.is_deleted() and not pieces:
        return "some or all of its devices (the array is deleted as a whole, so which is not known)"
    if pieces is None:
        pieces = [shard.data for shard in array.addressable_shards]
    gone = [k for k, piece in enumerate(pieces) if piece.is_deleted()]
    if not gone:
        return None
    if len(gone) == len(pieces):
        return "every device"
    order = getattr(array.sharding, "_addressable_device_assignment", None)
    names = [str(order[k]) if order is not None and k < len(order) else f"piece {k}" for k in gone]
    return ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")


def as_xla_would(
    args: Sequence[jax.Array], inputs: Sequence[DeviceData], order: Sequence[int], ticket: Ticket
) -> None:
    """What XLA says when handed a deleted per-device buffer, without handing it over."""
    try:
        check_inputs_live(args, inputs, order, ticket)
    except DonatedBufferError as exc:
        raise InvalidBufferError(
            "INVALID_ARGUMENT: Invalid buffer passed to Execute(): Buffer has been deleted or "
            f"donated ({exc})"
        ) from None


def layout_text(sharding: Any) -> str:
    """A layout as an error names it: its spec and its mesh's axes."""
    spec = getattr(sharding, "spec", None)
    mesh = getattr(sharding, "mesh", None)
    if spec is None or mesh is None:
        return str(sharding)
    axes = ", ".join(f"{name!r}: {size}" for name, size in mesh.shape.items())
    return f"{tuple(spec)} on mesh ({axes})"
