"""Device discovery: devices, processes and slices, found once per process.

Multi-slice runtimes run a slice-discovery protocol (MegaScale on TPU) when their client starts;
running it twice in one process breaks or hangs training. The reference runtime keeps that rule:
``discover()`` runs discovery once and caches the result, ``discovery_count()`` says how many times
it really ran, and a second run on a multi-slice topology raises ``DuplicateDiscoveryError``.

The kernel-lowering path starts a *secondary backend* (as PyTorch/XLA starts JAX's backend when it
traces a Pallas kernel). That backend discovers slices again unless the skip flag
``HARNESS_SKIP_SLICE_DISCOVERY=true`` is set around it, the counterpart of upstream's
``SKIP_MEGASCALE_PJRT_CLIENT``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import jax

from harness import hooks, sched, settings
from harness.runtime import config, seams
from harness.runtime.errors import DuplicateDiscoveryError

SKIP_DISCOVERY_FLAG = "HARNESS_SKIP_SLICE_DISCOVERY"


@dataclass(frozen=True)
class Topology:
    """What discovery found. Device order is JAX's global order (process-major)."""

    platform: str
    devices: tuple[jax.Device, ...]
    process_index: int
    process_count: int
    slice_of: tuple[int, ...]  # slice index of each device, aligned with ``devices``

    @property
    def device_count(self) -> int:
        return len(self.devices)

    @property
    def num_slices(self) -> int:
        return len(set(self.slice_of))

    def slice_devices(self, index: int) -> tuple[jax.Device, ...]:
        return tuple(d for d, s in zip(self.devices, self.slice_of, strict=True) if s == index)


_lock = threading.RLock()
_topology: Topology | None = None
_runs = 0
_secondary_backend_started = False


def _slices(devices: list[jax.Device], process_count: int) -> tuple[int, ...]:
    """Real ``slice_index`` where the platform reports several slices, else the configured
    simulated slices (CPU devices under ``jax.distributed`` report ``slice_index`` 0 everywhere)."""
    if devices and all(hasattr(d, "slice_index") for d in devices):
        real = tuple(int(d.slice_index) for d in devices)
        if len(set(real)) > 1:
            return real
    wanted = max(1, int(config.options.num_slices))
    if len(devices) % wanted:
        raise ValueError(
            f"cannot split {len(devices)} devices into {wanted} equal slices "
            "(HARNESS_NUM_SLICES / configure(num_slices=...))"
        )
    if process_count > 1 and wanted == process_count:  # one process per slice
        return tuple(int(d.process_index) for d in devices)
    per_slice = len(devices) // wanted
    return tuple(i // per_slice for i in range(len(devices)))


def _run_discovery() -> Topology:
    global _runs, _topology
    if _runs > 0 and _topology is not None and _topology.num_slices > 1:
        _runs += 1  # a second discovery did start: counted, and refused
        raise DuplicateDiscoveryError(
            f"slice topology discovery ran {_runs} times in one process "
            f"({_topology.num_slices} slices): a second discovery client was started "
            f"without {SKIP_DISCOVERY_FLAG}=true"
        )
    hooks.call("first-discovery")  # one rank of a multi-process launch takes its turn here
    seams.reach("discover")
    devices = sorted(jax.devices(), key=lambda d: (d.process_index, d.id))
    topo = Topology(
        platform=devices[0].platform,
        devices=tuple(devices),
        process_index=jax.process_index(),
        process_count=jax.process_count(),
        slice_of=_slices(devices, jax.process_count()),
    )
    # counted once it found the topology, not on entry: a discovery that failed midway (the
    # client did not start, the slices do not divide the devices) found nothing, and the retry
    # after it is the first discovery, not a duplicate one
    _runs += 1
    if _topology is None:
        _topology = topo
    return _topology


def discover() -> Topology:
    """The process' topology, discovering it on first use.

    Only a discovery that may really run is a schedule point (every device transfer asks for the
    topology), so a body explored by DFS, which must reach the same points in every run, either
    discovers in every run (``reset()`` first) or in none (``discover()`` before the check). The
    point comes before the plain lock, which is never held across one.
    """
    found = _topology
    if found is not None:
        return found
    sched.point("topology.discover")
    with _lock:
        return _topology if _topology is not None else _run_discovery()


def discovery_count() -> int:
    """How many times discovery actually ran in this process (1 is the only healthy value)."""
    return _runs


def start_secondary_backend() -> None:
    """Start the kernel-lowering backend once; it re-discovers unless told to skip."""
    global _secondary_backend_started
    if _secondary_backend_started:
        return
    discover()  # outside the plain lock: a first discovery is a schedule point, never held across
    sched.point("topology.secondary_backend")
    with _lock:
        if _secondary_backend_started:
            return
        if settings.raw(SKIP_DISCOVERY_FLAG).lower() != "true":
            _run_discovery()
        _secondary_backend_started = True


def reset() -> None:
    """Forget discovery and the secondary backend, as a fresh process would.

    Scenarios that count discoveries call this first so that earlier work in the same test
    process does not leak into the count.
    """
    global _topology, _runs, _secondary_backend_started
    with _lock:
        _topology, _runs, _secondary_backend_started = None, 0, False


def discovered() -> Topology | None:
    """The topology found so far, without discovering it (None before the first discovery)."""
    return _topology


# what the failure-safety invariant reads of this module (``harness.runtime.seams``)
seams.register_lock("topology lock", _lock)
seams.register_state("skip_flag", lambda: settings.raw(SKIP_DISCOVERY_FLAG) or None)
seams.register_state("topology", discovered)
seams.register_state("discoveries", discovery_count)
