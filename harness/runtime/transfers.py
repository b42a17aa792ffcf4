"""Values between the host and the devices, the layouts they take, and the runtime's counters.

Moving a value to the devices (``to_device``), to another layout (``reshard``) or back to the
host (``to_host``, which waits for the value's execution, bounded), and the one object per layout
that keeps the compile-cache keys of equal layouts equal (``canonical_sharding``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from harness import sched
from harness.runtime import faults, ir, topology
from harness.runtime.deadlines import await_latch, bounded_call
from harness.runtime.device_data import DeviceData
from harness.runtime.errors import ExecutionTimeoutError


@dataclass
class Metrics:
    """Counters a test or benchmark can read (``xr.metrics()``)."""

    compiles: int = 0
    executions: int = 0
    completed: int = 0  # executions whose device work finished (``executions`` counts launches)
    cache_hits: int = 0
    transfers_to_device: int = 0


metrics = Metrics()


def replicated() -> NamedSharding:
    """Every device holds the whole value: where unsharded tensors live (SPMD's single device)."""
    topo = topology.discover()
    return replicated_over(topo.devices)


_replicated_cache: dict[tuple, NamedSharding] = {}


def replicated_over(devices: tuple) -> NamedSharding:
    """The replicated layout over ``devices`` in that order (one object per order)."""
    sharding = _replicated_cache.get(devices)
    if sharding is None:
        mesh = jax.sharding.Mesh(np.array(devices, dtype=object), ("devices",))
        sharding = _replicated_cache[devices] = NamedSharding(mesh, PartitionSpec())
    return sharding


_canonical_cache: dict[tuple, Any] = {}


def canonical_sharding(sharding: Any, ndim: int) -> Any:
    """One object per layout, so equal layouts give equal compile-cache keys.

    XLA reports output shardings in its own spelling (``P('x',)`` for ``P('x', None)``, or the
    user's mesh for a replicated value); ``NamedSharding`` compares specs literally, so without this
    the second step of every loop would look new and compile again.
    """
    key = (sharding, ndim)
    hit = _canonical_cache.get(key)
    if hit is not None:
        return hit
    if sharding.is_fully_replicated:
        canon = replicated()
    elif isinstance(sharding, NamedSharding) and len(sharding.spec) < ndim:
        canon = NamedSharding(sharding.mesh, PartitionSpec(*sharding.spec, *([None] * (ndim - len(sharding.spec)))))
    else:
        canon = sharding
    _canonical_cache[key] = canon
    return canon


def to_device(value: np.ndarray, sharding: Any = None) -> DeviceData:
    """Host array -> device data with the given sharding (replicated by default)."""
    sharding = sharding if sharding is not None else replicated()
    host = np.asarray(value)
    array = jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])
    metrics.transfers_to_device += 1
    return DeviceData(ir.Aval(host.shape, host.dtype), sharding, array)


def reshard(data: DeviceData, sharding: Any) -> DeviceData:
    """The same value laid out with another sharding.

    ``jax.device_put`` may hand the new array the old one's per-device buffers (JAX 0.10 does,
    between replicated layouts over the same devices). The two are not marked as sharing them
    (``DeviceData.shares``): looking at per-device buffers makes JAX keep one array object per
    device for every parameter, which ``jax.live_arrays()`` then counts as memory held twice; the
    old value is the storage's previous one, which no later step reads or donates."""
    array = jax.device_put(data.array(), sharding)
    return DeviceData(data.aval, sharding, array)


#: the last value read in each layout, kept only under ``stale-on-timeout``: what that bug hands
#: back when a read's wait times out
_last_read: dict[tuple[Any, ...], np.ndarray] = {}


def to_host(data: DeviceData) -> np.ndarray:
    """The whole value on this host (``_read``). A read whose wait passes the runtime's
    ``wait_timeout`` raises ``ExecutionTimeoutError``: the value is not known, and no other value
    may stand in for it. Under ``stale-on-timeout`` the runtime keeps the last value it read in
    each layout and hands that back instead, as a "best effort" read would: a stale answer that
    passes for a right one (a slow device, or a peer process cut off mid-gather)."""
    if not faults.active(faults.STALE_ON_TIMEOUT):
        return _read(data)
    layout = (data.aval.shape, str(data.aval.dtype), data.sharding)
    try:
        value = _read(data)
    except ExecutionTimeoutError:
        if layout in _last_read:
            return _last_read[layout].copy()
        raise
    _last_read[layout] = value.copy()
    return value


def _read(data: DeviceData) -> np.ndarray:
    """The whole value on this host. In a multi-process run a replicated value is read from this
    process' own copy, as PyTorch/XLA reads one replica: gathering it (what a value split across
    processes needs) ran a program over every process for nothing, 0.5 ms a read in a two-process
    cell and 22 ms the first time for each shape (its compile), against under 0.1 ms now."""
    array = data.array()
    ticket = data.ticket
    if ticket is not None and not ticket.done.is_set() and not sched.is_controlled():
        # the device work may still be running: wait for it here, bounded, rather than in
        # JAX's own unbounded block inside ``np.asarray``
        await_latch(ticket.done, "reading a value", ticket)
        if data.error is not None:
            raise data.error
    if not array.sharding.is_fully_replicated and faults.active(faults.SHARDED_READ_COMPILES):
        array = _replicated_by_a_new_program(array)
    if array.is_fully_addressable:
        return np.asarray(array)
    if array.sharding.is_fully_replicated:
        return np.asarray(array.addressable_data(0))
    from jax.experimental import multihost_utils

    # a gather over every process: bounded, since a peer cut off leaves it blocked in gloo for ever
    return np.asarray(bounded_call(lambda: multihost_utils.process_allgather(array, tiled=True),
                                   "gathering a value split across processes"))


def _replicated_by_a_new_program(array: jax.Array) -> jax.Array:
    """PyTorch/XLA's host read of a split value (``ReplicateShardedData``, under the
    ``sharded-read-compiles`` switch): build an identity program whose output is replicated, compile
    it, run it, read one copy. Nothing keeps the program, so every read compiles it again: a loop
    that reads a sharded gradient compiles once per iteration, forever."""
    order = tuple(array.sharding._device_assignment)
    program = jax.jit(lambda value: value + jnp.zeros((), value.dtype), out_shardings=replicated_over(order))
    compiled = program.lower(jax.ShapeDtypeStruct(array.shape, array.dtype, sharding=array.sharding)).compile()
    metrics.compiles += 1
    return compiled(array)


def device_bytes(array: jax.Array) -> int:
    """Bytes ``array`` occupies on this process' devices (a replicated value counts once per
    device), from its layout: reading its shards would create arrays of their own."""
    if array.is_deleted():
        return 0
    sharding = array.sharding
    shard = int(np.prod(sharding.shard_shape(array.shape), dtype=np.int64)) * array.dtype.itemsize
    return shard * len(sharding.addressable_devices)


def live_device_bytes() -> int:
    """Bytes of every live (not deleted) JAX array of the process on its devices, whoever holds it."""
    return sum(device_bytes(a) for a in jax.live_arrays())
