"""What a check needs from a runtime under test, and how a runtime says what it offers.

The reference runtime is one runtime under test among others (JAX, PyTorch/XLA releases). An
adapter wraps one behind a small surface of plain operations on host arrays, meshes and specs, and
declares its capabilities; a check (an invariant, a scenario variant) declares the capabilities it
needs, and where the runtime lacks one the check is skipped *with that reason*, never faked. The
operations are named for what a check does, not for any runtime's API, so one check body runs
against every adapter and its failures mean the same thing everywhere.

Tensors, meshes and modules are opaque handles: only the adapter that made one may use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

# ------------------------------------------------------------------------------ capabilities
TENSORS = "tensors"  # make a tensor from host data and read it back
MESHES = "meshes"  # device meshes with named axes over the process' devices
SHARDING = "sharding"  # lay a tensor out by a partition spec
SHARDING_READBACK = "sharding-readback"  # read the spec (and per-device index map) back
STEP = "step"  # a step boundary / sync that executes pending work
ASYNC_SYNC = "async-sync"  # a sync that returns before the work completed, and a wait
ALIASING = "aliasing"  # views/aliases over one storage, and in-place ops through any of them
SAVE = "save"  # write tensors to a file and read them back
FSDP = "fsdp"  # FSDPv2-style wrapping of a module over a mesh axis named "fsdp"
DONATION = "donation"  # donated buffers are deleted; reading one raises
DISCOVERY_COUNT = "discovery-count"  # how many times topology discovery ran is observable
FAULT_SWITCHES = "fault-switches"  # the runtime carries the catalog's fault switches

CAPABILITIES: tuple[str, ...] = (
    TENSORS, MESHES, SHARDING, SHARDING_READBACK, STEP, ASYNC_SYNC, ALIASING, SAVE, FSDP, DONATION,
    DISCOVERY_COUNT, FAULT_SWITCHES,
)


class Unsupported(Exception):
    """The runtime under test lacks a capability a check needs; the check is skipped with this."""


class AdapterUnavailable(Exception):
    """The runtime cannot be loaded in this process (not installed, wrong environment)."""


@runtime_checkable
class Adapter(Protocol):
    """A runtime under test (see the module docstring)."""

    name: str  # "reference", "jax", "torch_xla"
    capabilities: frozenset[str]

    def version(self) -> str:
        """The runtime's release (``torch_xla.__version__``, ``jax.__version__``...)."""

    def device_count(self) -> int:
        """Devices this process addresses."""

    # -- tensors and layouts
    def tensor(self, host: np.ndarray) -> Any:
        """A new tensor holding a copy of ``host`` (dtype kept)."""

    def to_host(self, t: Any) -> np.ndarray:
        """The tensor's value on the host (syncing whatever it depends on)."""

    def mesh(self, device_ids: Sequence[int], shape: Sequence[int], axis_names: Sequence[str]) -> Any:
        """A device mesh; ``device_ids`` index the runtime's own device order."""

    def mark_sharding(self, t: Any, mesh: Any, spec: tuple[Any, ...]) -> Any:
        """Lay ``t`` out by the (normalized) ``spec``; returns the tensor to use from now on (the
        same object for mutable runtimes, a new array for JAX)."""

    def sharding_spec(self, t: Any) -> tuple[Any, ...] | None:
        """The spec ``t`` is laid out with, or None when replicated/unannotated."""

    def device_indices(self, t: Any) -> dict[int, tuple[slice, ...]]:
        """Which slice of the value each (addressable) device holds, keyed by device id."""

    # -- steps, aliases, in-place ops
    def step(self) -> None:
        """A step boundary: execute everything pending."""

    def sync(self, tensors: Sequence[Any], wait: bool) -> None:
        """Execute the tensors' pending work; ``wait=False`` may return before it completed."""

    def wait(self) -> None:
        """Wait for every execution submitted so far."""

    def alias(self, t: Any, kind: str, arg: Any = None) -> Any:
        """An alias of ``t``: ``detach``, ``reshape`` (arg: shape), ``transpose``, ``index``
        (arg: a basic index). Writes through it must be visible through ``t``."""

    def inplace(self, t: Any, op: str, other: Any) -> None:
        """``t.add_/sub_/mul_/copy_(other)``; ``other`` is a Python scalar or a tensor."""

    def derive(self, t: Any) -> Any:
        """A new tensor ``t * 2 + 1`` (out of place)."""

    # -- persistence, wrappers, topology
    def save(self, tensors: dict[str, Any], path: str) -> None: ...

    def load(self, path: str) -> dict[str, np.ndarray]:
        """What ``save`` wrote, as host arrays."""

    def discovery_count(self) -> int: ...


def require(adapter: Adapter, *needed: str) -> None:
    """Raise ``Unsupported`` naming what ``adapter`` lacks of ``needed``."""
    missing = [c for c in needed if c not in adapter.capabilities]
    if missing:
        raise Unsupported(f"runtime {adapter.name} {adapter.version()} lacks {', '.join(missing)}")
