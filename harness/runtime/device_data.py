"""Device data: a (possibly sharded) device buffer, or a placeholder for one still being computed.

A step's outputs are placeholders until the executor thread fills them (``harness.runtime.
executor``); reading one waits for its execution, bounded (``harness.runtime.deadlines``), and
``handle`` reads shard 0 *without* waiting, as upstream's ``PjRtShardedData::GetHandle`` did (the
race of issue #9128).
"""

from __future__ import annotations

import ctypes
from typing import Any

import jax

from harness import sched, settings
from harness.runtime import ir, layouts
from harness.runtime.deadlines import Ticket, await_latch
from harness.runtime.errors import DonatedBufferError, PlaceholderAccessError


def crash_mode() -> str:
    """``signal`` turns a placeholder read into a real SIGSEGV, as upstream crashed."""
    return str(settings.read("HARNESS_CRASH_MODE"))


def input_key(aval: ir.Aval, sharding: Any) -> tuple:
    """How a step's structure key describes a device-data input: its aval and its layout, as
    its representative spelling (``layouts``: equivalent specs compile once)."""
    return (ir.IN, aval, layouts.representative(sharding, len(aval.shape)))


class DeviceData:
    """A (possibly sharded) device buffer, or a placeholder for one still being computed."""

    __slots__ = ("aval", "sharding", "kid", "aid", "shares", "_array", "_ready", "error", "ticket", "__weakref__")

    def __init__(
        self,
        aval: ir.Aval,
        sharding: Any,
        array: jax.Array | None = None,
        kid: int | None = None,
        aid: int | None = None,
        ticket: Ticket | None = None,
    ) -> None:
        self.aval = aval
        self.sharding = sharding
        # ``key`` interned, and the aval's id: known in advance for a step's outputs (their plan
        # interned them once), else found when a graph walk or a data node first needs them
        self.kid = kid
        self.aid = aid
        self._array = array
        self.error: BaseException | None = None  # the failure of its execution, once known
        self._ready: sched.Latch | None = None if array is not None else sched.Latch(name="placeholder")
        self.ticket = ticket  # the execution computing it: what a bounded wait names
        # its per-device buffers may also be another array's (``local_shards``,
        # ``from_local_shards``): one can be deleted while this array's own flag says it is not
        self.shares = False

    @property
    def key(self) -> tuple:
        """This input's compile-cache description."""
        return input_key(self.aval, self.sharding)

    @property
    def is_placeholder(self) -> bool:
        return self._ready is not None and not self._ready.is_set()

    def fill(self, array: jax.Array) -> None:
        sched.point("DeviceData.fill")
        self._array = array
        assert self._ready is not None
        self._ready.set()

    def fail(self, error: BaseException) -> None:
        sched.point("DeviceData.fail")
        self.settle(error)

    def settle(self, error: BaseException) -> None:
        """Fail without a schedule point: for an execution whose controlled run is being torn
        down, where a point would only raise again before the readers are released."""
        self.error = error
        assert self._ready is not None
        self._ready.set()

    def array(self, *, deleted_ok: bool = False) -> jax.Array:
        """The buffer, waiting for its execution if it is still a placeholder.

        ``deleted_ok`` hands back a deleted buffer too, for a caller that says itself which input
        it was and which devices lost it (the executor's look at every per-device buffer)."""
        ready = self._ready
        if ready is not None and not ready.is_set():  # a filled one is read without a point
            await_latch(ready, "reading a value", self.ticket)
        if self.error is not None:
            raise self.error
        assert self._array is not None
        if self._array.is_deleted() and not deleted_ok:
            raise DonatedBufferError(
                f"buffer with shape {ir.aval_text(self.aval)} is deleted: it was donated to a later "
                "execution while a tensor still referenced it"
            )
        return self._array

    def handle(self) -> int:
        """Opaque handle of shard 0, read *without* waiting, as ``PjRtShardedData::GetHandle``.

        On a placeholder there is no shard yet: upstream dereferenced it anyway and crashed. The
        schedule point sits before the reads, where the executor thread may or may not have filled
        the placeholder yet: the two orders of issue #9128.
        """
        sched.point("DeviceData.handle")
        if self.error is not None:  # the execution finished, and failed: say so, not "pending"
            raise self.error
        array = self._array
        if array is None:
            if crash_mode() == "signal":
                ctypes.string_at(0)  # shards[0] of an unfilled placeholder: a null read, SIGSEGV
            raise PlaceholderAccessError(
                f"GetHandle() on placeholder device data (shape {ir.aval_text(self.aval)}): "
                "its execution has not completed"
            )
        if array.is_deleted():
            raise DonatedBufferError(f"buffer with shape {ir.aval_text(self.aval)} is deleted")
        # A filled buffer may still be in flight on the device: on an accelerator a transfer
        # (``xr.tensor``) and an execution return before the device is done, and the buffer's
        # pointer is only there once it is. Waiting for it here, a wait that always ends the same
        # way, keeps what this point observes the schedule's decision, not the device's speed.
        array.block_until_ready()
        return int(array.addressable_shards[0].data.unsafe_buffer_pointer())
