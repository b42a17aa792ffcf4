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

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
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
OP_SHARDING = "op-sharding"  # a mesh's cached spec -> sharding lookup (``Mesh.get_op_sharding``)
TRAINING = "training"  # modules, optimizers and FSDPv2 in the harness' reference API
HANDLES = "handles"  # device-data handles read back, execution counts (the executor's contract)
VIEW_BASE_LAYOUT = "view-base-layout"  # marking a view lays out the storage it views, its base
LOCAL_SHARDS = "local-shards"  # a sharded tensor's per-device pieces, and a tensor assembled from them
#: whole training programs in the runtime's own API: parameters, backward, SGD (with momentum)
#: and Adam, Python scalar schedules, step boundaries (``training_dialect``)
TRAINING_PROGRAMS = "training-programs"

CAPABILITIES: tuple[str, ...] = (
    TENSORS, MESHES, SHARDING, SHARDING_READBACK, STEP, ASYNC_SYNC, ALIASING, SAVE, FSDP, DONATION,
    DISCOVERY_COUNT, FAULT_SWITCHES, OP_SHARDING, TRAINING, HANDLES, VIEW_BASE_LAYOUT, LOCAL_SHARDS,
    TRAINING_PROGRAMS,
)

# ------------------------------------------------------------------------------ behaviours
#: Documented choices a runtime makes where runtimes differ; a check that depends on one holds
#: each runtime to the choice it declares, and a declared choice is never a capability a check
#: may need (the reference runtime, which declares every capability, makes none of these).
PADS_UNEVEN = "pads-uneven"  # a split that does not divide a dimension is accepted and padded


@dataclass(frozen=True)
class TrainingDialect:
    """How a runtime spells the statements of a training program, so that a generated program
    (``harness.properties.training``) is plain code in the runtime's own API: the code that runs
    is the code a failure prints, and a person can paste it. Tensor arithmetic (``@``, ``.T``,
    ``.relu()``, ``.mean(-1, keepdim=True)``, ``.backward()``, ``.grad``, ``add_``...) is
    torch's in every dialect; only what differs between runtimes is here. Each entry is a
    ``str.format`` template; names in braces are filled in by the generator.
    """

    #: imports and process setup (``{options}``: the runtime options line, possibly empty)
    prelude: str
    #: the runtime options a program sets (``{functionalization}``, ``{param_aliasing}``); empty
    #: where the runtime fixes them at start-up
    options: str
    tensor: str  # a tensor from a numpy expression ``{array}``
    parameter: str  # a leaf tensor that requires grad, from ``{array}``
    mesh: str  # ``{ids}`` (a list), ``{shape}``, ``{names}`` (tuples)
    mark_sharding: str  # ``{t}``, ``{mesh}``, ``{spec}``
    sgd: str  # ``{params}``, ``{lr}``, ``{momentum}``, ``{weight_decay}``
    adam: str  # ``{params}``, ``{lr}``, ``{eps}``
    set_lr: str  # ``{opt}``, ``{lr}``: the learning rate of every parameter from now on
    mark_step: str  # a step boundary: everything pending runs
    sync: str  # ``{tensors}`` (a list expression): a waiting sync of those tensors alone
    read: str  # ``{t}``: the tensor's value as a numpy array
    compile_count: str  # an int expression: programs compiled by this process so far
    #: ``{cond}``, ``{a}``, ``{b}``: elements of ``a`` where ``cond``, else of ``b`` (torch's own
    #: function unless the runtime has its own)
    where: str = "torch.where({cond}, {a}, {b})"


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

    def device_shards(self, t: Any) -> dict[int, tuple[tuple[slice, ...], np.ndarray]]:
        """What each addressable device holds: its slice of the value and that slice's data, keyed
        by the device's position in the runtime's own device order (the ids meshes take)."""

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


class BaseAdapter:
    """Defaults for the operations a runtime may lack: each raises ``Unsupported`` naming the
    capability, so a check that reaches one without declaring it is skipped, never faked."""

    name = "base"
    capabilities: frozenset[str] = frozenset()

    def version(self) -> str:
        return "unknown"

    def _lacks(self, capability: str) -> Unsupported:
        return Unsupported(f"runtime {self.name} {self.version()} lacks {capability}")

    def donate(self, t: Any) -> Any:
        """Run a step that donates ``t``'s buffer (an in-place update under parameter aliasing, a
        ``donate_argnums`` call); returns the tensor that holds the result."""
        raise self._lacks(DONATION)

    def donation_declined(self) -> bool:
        """Whether the runtime said, at the last ``donate``, that it declined the donation (JAX's
        "Some donated buffers were not usable" warning): only then may the buffer live on."""
        return False

    def materialized(self, t: Any) -> bool:
        """Whether ``t`` is device data already (reading it then syncs nothing); False when the
        runtime does not say, which only means fewer intermediate checks."""
        return False

    def grab(self, t: Any) -> Any:
        """A handle on ``t``'s current device buffer, to read later (``read_grabbed``)."""
        raise self._lacks(DONATION)

    def read_grabbed(self, handle: Any) -> np.ndarray | None:
        """The grabbed buffer's value, or None when it was donated and the runtime said so with
        its own clear error; any other outcome of reading a deleted buffer is a failure."""
        raise self._lacks(DONATION)

    def local_shards(self, t: Any) -> list[Any]:
        """One single-device tensor per device holding ``t``'s piece there, sharing its buffer."""
        raise self._lacks(LOCAL_SHARDS)

    def from_local_shards(self, pieces: Sequence[Any], mesh: Any, spec: tuple[Any, ...]) -> Any:
        """The tensor laid out over ``mesh`` by ``spec`` whose per-device pieces are ``pieces``
        (no copy: it shares their buffers)."""
        raise self._lacks(LOCAL_SHARDS)

    def is_donated_error(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the runtime's own clear error for a buffer that was donated."""
        return False

    def collect_handles(self, tensors: Sequence[Any]) -> list[Any]:
        """An asynchronous sync, then the device data of the tensors' graphs deduplicated by
        buffer handle (PyTorch/XLA's gradient-accumulation helper); every handle filled."""
        raise self._lacks(ASYNC_SYNC)

    def executions(self) -> tuple[int, int]:
        """(launched, completed on the device) execution counts of this process, so a check can
        tell that ``wait_device_ops`` returned with nothing still running."""
        raise self._lacks(ASYNC_SYNC)

    def read_handles(self, tensors: Sequence[Any]) -> list[Any]:
        """The tensors' device-data handles, read without waiting: right after a waiting sync
        every one must be filled."""
        raise self._lacks(ASYNC_SYNC)

    def discovery_count(self) -> int:
        raise self._lacks(DISCOVERY_COUNT)

    def prepare_fsdp_spec(self, shape: tuple[int, ...], mesh: Any) -> Any:
        """The partition spec FSDPv2 prepares for a parameter of ``shape``, exactly as returned."""
        raise self._lacks(FSDP)

    def op_sharding(self, mesh: Any, spec: Any) -> Any:
        """The mesh's cached sharding for ``spec``, passed as given (an unhashable spec must fail
        the way the runtime fails)."""
        raise self._lacks(OP_SHARDING)

    def fault_switches(self) -> Mapping[str, str]:
        """The runtime's fault switches by name, each with what it re-creates (``FAULT_SWITCHES``):
        the bugs a scenario or an invariant of this runtime declares it catches."""
        raise self._lacks(FAULT_SWITCHES)

    def inject(self, fault: str) -> AbstractContextManager[None]:
        """Turn the fault switch ``fault`` on for a block (``with adapter.inject(name):``); a
        name that is not one of ``fault_switches()`` raises ``ValueError`` naming the known ones."""
        raise self._lacks(FAULT_SWITCHES)

    def faults_on(self) -> frozenset[str]:
        """The fault switches on right now (none for a runtime without switches): what a
        counterexample was found with."""
        return frozenset()

    def training_dialect(self) -> TrainingDialect:
        """How the runtime spells a training program's statements (``TRAINING_PROGRAMS``)."""
        raise self._lacks(TRAINING_PROGRAMS)

    def save(self, tensors: dict[str, Any], path: str) -> None:
        raise self._lacks(SAVE)

    def load(self, path: str) -> dict[str, np.ndarray]:
        raise self._lacks(SAVE)

    def step(self) -> None:
        raise self._lacks(STEP)

    def sync(self, tensors: Sequence[Any], wait: bool) -> None:
        raise self._lacks(STEP)

    def wait(self) -> None:
        raise self._lacks(ASYNC_SYNC)

    def alias(self, t: Any, kind: str, arg: Any = None) -> Any:
        raise self._lacks(ALIASING)

    def inplace(self, t: Any, op: str, other: Any) -> None:
        raise self._lacks(ALIASING)


def require(adapter: Adapter, *needed: str) -> None:
    """Raise ``Unsupported`` naming what ``adapter`` lacks of ``needed``."""
    missing = [c for c in needed if c not in adapter.capabilities]
    if missing:
        raise Unsupported(f"runtime {adapter.name} {adapter.version()} lacks {', '.join(missing)}")


class TorchStyleAliasing:
    """Aliases and in-place ops for runtimes with torch's tensor API (the reference runtime and
    PyTorch/XLA): the machine's alias kinds map onto the same methods in both."""

    def alias(self, t: Any, kind: str, arg: Any = None) -> Any:
        if kind == "detach":
            return t.detach()
        if kind == "reshape":
            return t.view(tuple(arg))
        if kind == "transpose":
            return t.T if arg is None else t.permute(*arg)
        if kind == "index":
            return t[arg]
        raise ValueError(f"unknown alias kind {kind!r}")

    def inplace(self, t: Any, op: str, other: Any) -> None:
        getattr(t, f"{op}_")(other)
