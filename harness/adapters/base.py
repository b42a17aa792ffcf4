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
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # annotations only: the command line reads the adapters' names without numpy
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

#: every capability name the harness knows, in the order commands list them: an adapter declares a
#: subset of these, and an unknown name in an adapter's ``capabilities`` is a broken plugin
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
#: every behaviour a runtime may declare among its ``capabilities``
BEHAVIOURS: tuple[str, ...] = (PADS_UNEVEN,)


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
    """The runtime under test lacks a capability a check needs; the check is skipped with this.

    Its message names the runtime, its version and the capability (``runtime myrt 0.1.0 lacks
    aliasing``): ``require`` raises it, and so does every default operation of ``BaseAdapter``.
    """


class AdapterUnavailable(Exception):
    """The runtime cannot be loaded in this process (not installed, wrong environment): ``get``
    raises it when the adapter's runtime package cannot be imported."""


@runtime_checkable
class Adapter(Protocol):
    """A runtime under test, behind the operations a check drives it with.

    An adapter wraps one runtime behind plain operations on host arrays, meshes and partition
    specs, and declares what it offers in ``capabilities``. A check declares the capabilities it
    needs; where the runtime lacks one, the check is skipped with that reason, never faked, and an
    operation of a capability the runtime lacks raises ``Unsupported`` naming it. Tensors, meshes
    and modules are opaque handles: only the adapter that made one may use it.

    A runtime is registered under the ``xharness.runtimes`` entry-point group and checked when it
    is loaded: its ``name`` must be the entry point's, its ``capabilities`` names the harness knows
    (``CAPABILITIES``), and it must have every operation below. Deriving from ``BaseAdapter``
    gives the operations a runtime may lack a default that raises ``Unsupported``; the others
    (``device_count``, ``tensor``, ``to_host``, ``mesh``, ``mark_sharding``, ``sharding_spec``,
    ``device_shards``, ``derive``) every runtime implements.
    """

    #: the runtime's registered name (``"reference"``, ``"jax"``, ``"torch_xla"``, a plugin's own):
    #: the entry point's name under ``xharness.runtimes``, and what ``HARNESS_RUNTIME``,
    #: ``--runtime`` and ``[tool.xharness] runtime`` name
    name: str
    #: what the runtime offers, as capability names (``CAPABILITIES``: ``TENSORS``, ``MESHES``...);
    #: a check that needs one that is missing is skipped with the reason
    capabilities: frozenset[str]

    def version(self) -> str:
        """The runtime's release, as its package reports it.

        Returns:
            The version string (``torch_xla.__version__``, ``jax.__version__``, a plugin's own
            distribution version): what the expected table's ``releases`` ranges are matched
            against and what every record names. ``BaseAdapter`` answers ``"unknown"``.
        """

    def device_count(self) -> int:
        """The devices this process addresses.

        A runtime built on JAX asks JAX; one that is not reads the cell it runs in from
        ``cell_shape().devices``, which every cell sets (and which outside a cell is the plain
        run's default), so checks size their meshes by the cell.

        Returns:
            The number of devices, 1 or more.
        """

    # -- tensors and layouts
    def tensor(self, host: np.ndarray) -> Any:
        """A new tensor holding a copy of ``host`` (dtype kept).

        The tensor never shares memory with ``host``: writing the host array afterwards leaves
        the tensor alone (the ``host-copy`` invariant holds a runtime to it).

        Args:
            host: the value, a numpy array of any shape and dtype.

        Returns:
            The tensor, an opaque handle of this adapter.

        Raises:
            Unsupported: the runtime lacks ``TENSORS`` (or this dtype), naming it.
        """

    def to_host(self, t: Any) -> np.ndarray:
        """The tensor's value on the host, syncing whatever it depends on.

        Args:
            t: a tensor this adapter made.

        Returns:
            A numpy array of the tensor's shape and dtype, holding its current value.

        Raises:
            Exception: the runtime's own error when the value cannot be computed or was donated
                (a check compares it with ``is_donated_error`` and judges it).
        """

    def mesh(self, device_ids: Sequence[int], shape: Sequence[int], axis_names: Sequence[str]) -> Any:
        """A device mesh with named axes.

        Args:
            device_ids: the devices, as positions in the runtime's own device order (from 0 to
                ``device_count() - 1``), each once, in the mesh's row-major order.
            shape: the mesh's shape; its product is ``len(device_ids)``.
            axis_names: one name per dimension of ``shape``.

        Returns:
            The mesh, an opaque handle of this adapter.

        Raises:
            Unsupported: the runtime lacks ``MESHES`` (or meshes of this rank), naming it.
        """

    def mark_sharding(self, t: Any, mesh: Any, spec: tuple[Any, ...]) -> Any:
        """Lay ``t`` out over ``mesh`` by a partition spec.

        Args:
            t: a tensor this adapter made.
            mesh: a mesh this adapter made.
            spec: the normalized spec, one entry per dimension of ``t``: an axis name, a tuple of
                axis names, or None for a dimension that is not split.

        Returns:
            The tensor to use from now on: the same object for a runtime whose tensors are
            mutable, a new array for one whose arrays are immutable (JAX).

        Raises:
            Unsupported: the runtime lacks ``SHARDING``, naming it.
            ValueError: a spec the runtime refuses (a dimension the mesh cannot split evenly,
                unless the runtime pads such splits and declares ``PADS_UNEVEN`` among its
                ``capabilities``), raised when the spec is given.
        """

    def sharding_spec(self, t: Any) -> tuple[Any, ...] | None:
        """The spec ``t`` is laid out with, read back from the runtime.

        Args:
            t: a tensor this adapter made.

        Returns:
            One entry per dimension, as ``mark_sharding`` takes it, or None when the tensor is
            replicated or carries no layout.

        Raises:
            Unsupported: the runtime lacks ``SHARDING_READBACK``, naming it.
        """

    def device_shards(self, t: Any) -> dict[int, tuple[tuple[slice, ...], np.ndarray]]:
        """What each addressable device holds of ``t``.

        Args:
            t: a tensor this adapter made.

        Returns:
            Keyed by the device's position in the runtime's own device order (the ids ``mesh``
            takes): the device's slice of the whole value (one ``slice`` per dimension) and that
            slice's data as a numpy array.

        Raises:
            Unsupported: the runtime lacks ``SHARDING_READBACK``, naming it.
        """

    # -- steps, aliases, in-place ops
    def step(self) -> None:
        """A step boundary: execute everything pending (PyTorch/XLA's ``mark_step``).

        Raises:
            Unsupported: the runtime lacks ``STEP``, naming it (``BaseAdapter``'s default).
        """

    def sync(self, tensors: Sequence[Any], wait: bool) -> None:
        """Compute the pending values of ``tensors`` (and what they depend on) without a whole
        step; other pending work may stay pending. Part of ``STEP``: a runtime that executes
        eagerly leaves ``STEP`` undeclared and keeps ``BaseAdapter``'s default. ``wait=False`` is
        passed only to a runtime that declares ``ASYNC_SYNC``; ``wait()`` then blocks until the
        work is done.

        Args:
            tensors: the tensors whose values to compute; other pending work may stay pending.
            wait: True to return once the work completed; False may return before it did (an
                asynchronous sync, capability ``ASYNC_SYNC``).

        Raises:
            Unsupported: the runtime lacks ``STEP``, naming it (``BaseAdapter``'s default).
        """

    def wait(self) -> None:
        """Wait for every execution submitted so far (``wait_device_ops``).

        Raises:
            Unsupported: the runtime lacks ``ASYNC_SYNC``, naming it (``BaseAdapter``'s default).
        """

    def alias(self, t: Any, kind: str, arg: Any = None) -> Any:
        """An alias of ``t``: another tensor over the same storage.

        Writes through the alias must be visible through ``t``, and writes through ``t`` through
        the alias.

        Args:
            t: a tensor this adapter made.
            kind: ``"detach"``, ``"reshape"``, ``"transpose"`` or ``"index"``.
            arg: for ``reshape`` the new shape, for ``transpose`` a permutation (None: reverse
                the dimensions), for ``index`` a basic index (ints and slices); else None.

        Returns:
            The alias, a tensor of this adapter.

        Raises:
            Unsupported: the runtime lacks ``ALIASING``, naming it (``BaseAdapter``'s default).
            ValueError: an unknown ``kind``.
        """

    def inplace(self, t: Any, op: str, other: Any) -> None:
        """Update ``t`` in place: ``t.add_/sub_/mul_/copy_(other)``.

        Args:
            t: a tensor this adapter made (or an alias of one).
            op: ``"add"``, ``"sub"``, ``"mul"`` or ``"copy"``.
            other: a Python scalar or a tensor of this adapter.

        Raises:
            Unsupported: the runtime lacks ``ALIASING``, naming it (``BaseAdapter``'s default).
        """

    def derive(self, t: Any) -> Any:
        """A new tensor computed from ``t``, out of place: ``t * 2 + 1`` elementwise, in ``t``'s
        dtype. Checks use it to make a value that is not device data yet: a runtime with ``STEP``
        returns it pending (computed at the next ``step``, ``sync`` or ``to_host``); an eager
        runtime computes it at once.

        Args:
            t: a tensor this adapter made.

        Returns:
            A new tensor; ``t`` is unchanged.

        Raises:
            Unsupported: the runtime lacks ``TENSORS``, naming it.
        """

    # -- persistence, wrappers, topology
    def save(self, tensors: dict[str, Any], path: str) -> None:
        """Write tensors to a file (``xm.save``, ``xr.save``).

        Args:
            tensors: the tensors to write, by name.
            path: the file to write.

        Raises:
            Unsupported: the runtime lacks ``SAVE``, naming it (``BaseAdapter``'s default).
        """

    def load(self, path: str) -> dict[str, np.ndarray]:
        """Read back what ``save`` wrote.

        Args:
            path: a file ``save`` wrote.

        Returns:
            The tensors' values by name, as host arrays.

        Raises:
            Unsupported: the runtime lacks ``SAVE``, naming it (``BaseAdapter``'s default).
        """

    def discovery_count(self) -> int:
        """How many times the runtime's topology discovery has run in this process.

        Returns:
            The count; a discovery that failed midway is not counted.

        Raises:
            Unsupported: the runtime lacks ``DISCOVERY_COUNT``, naming it (``BaseAdapter``'s
                default).
        """


class BaseAdapter:
    """Defaults for the operations a runtime may lack: each raises ``Unsupported`` naming the
    capability, so a check that reaches one without declaring it is skipped, never faked.

    Derive a runtime's adapter from it, set ``name`` and ``capabilities``, and implement the
    protocol's operations that have no default here (``device_count``, ``tensor``, ``to_host``,
    ``mesh``, ``mark_sharding``, ``sharding_spec``, ``device_shards``, ``derive``; see
    ``Adapter``) and those of the capabilities it declares. Besides the protocol, it carries the
    operations some checks need of a runtime that offers more (donation, local shards, handles,
    fault switches, training programs), each with the same kind of default.
    """

    #: the runtime's registered name (``Adapter.name``); the entry point's name must be the same
    name = "base"
    #: what the runtime offers (``Adapter.capabilities``); none by default
    capabilities: frozenset[str] = frozenset()
    #: the runtime options (``harness.settings.RUNTIME_OPTIONS``, a matrix cell's ``runtime``
    #: table) this runtime honours: a cell shows only these in its labels and records, since an
    #: option the runtime never reads would describe a run that did not happen
    options: frozenset[str] = frozenset()

    def version(self) -> str:
        """The runtime's release (``Adapter.version``).

        Returns:
            ``"unknown"`` until overridden; a plugin returns its distribution's version, which
            the expected table's ranges are matched against.
        """
        return "unknown"

    def _lacks(self, capability: str) -> Unsupported:
        return Unsupported(f"runtime {self.name} {self.version()} lacks {capability}")

    def donate(self, t: Any) -> Any:
        """Run a step that donates ``t``'s buffer (an in-place update under parameter aliasing, a
        ``donate_argnums`` call).

        Args:
            t: a tensor this adapter made, whose current buffer is to be donated.

        Returns:
            The tensor that holds the result.

        Raises:
            Unsupported: the runtime lacks ``DONATION``, naming it (the default).
        """
        raise self._lacks(DONATION)

    def donation_declined(self) -> bool:
        """Whether the runtime said, at the last ``donate``, that it declined the donation (JAX's
        "Some donated buffers were not usable" warning): only then may the buffer live on.

        Returns:
            True when the runtime declined it and said so; False by default.
        """
        return False

    def materialized(self, t: Any) -> bool:
        """Whether ``t`` is device data already, so that reading it syncs nothing.

        Args:
            t: a tensor this adapter made.

        Returns:
            True when it is; False when it is not or the runtime does not say (the default),
            which only means fewer intermediate checks.
        """
        return False

    def grab(self, t: Any) -> Any:
        """A handle on ``t``'s current device buffer, to read later with ``read_grabbed``.

        Args:
            t: a tensor this adapter made.

        Returns:
            An opaque handle on the buffer ``t`` holds now (not on the tensor).

        Raises:
            Unsupported: the runtime lacks ``DONATION``, naming it (the default).
        """
        raise self._lacks(DONATION)

    def read_grabbed(self, handle: Any) -> np.ndarray | None:
        """The grabbed buffer's value.

        Args:
            handle: what ``grab`` returned.

        Returns:
            The value as a host array, or None when the buffer was donated and the runtime said
            so with its own clear error; any other outcome of reading a deleted buffer is a
            failure.

        Raises:
            Unsupported: the runtime lacks ``DONATION``, naming it (the default).
        """
        raise self._lacks(DONATION)

    def local_shards(self, t: Any) -> list[Any]:
        """The per-device pieces of a sharded tensor, sharing its buffers.

        Args:
            t: a sharded tensor this adapter made.

        Returns:
            One single-device tensor per device, in the runtime's device order, each holding
            ``t``'s piece there in the same buffer (no copy).

        Raises:
            Unsupported: the runtime lacks ``LOCAL_SHARDS``, naming it (the default).
        """
        raise self._lacks(LOCAL_SHARDS)

    def from_local_shards(self, pieces: Sequence[Any], mesh: Any, spec: tuple[Any, ...]) -> Any:
        """A tensor assembled from per-device pieces, sharing their buffers.

        Args:
            pieces: one single-device tensor per device of ``mesh`` (as ``local_shards`` returns).
            mesh: the mesh the tensor is laid out over.
            spec: the partition spec the pieces make up.

        Returns:
            The tensor laid out over ``mesh`` by ``spec`` whose per-device pieces are ``pieces``
            (no copy: it shares their buffers).

        Raises:
            Unsupported: the runtime lacks ``LOCAL_SHARDS``, naming it (the default).
        """
        raise self._lacks(LOCAL_SHARDS)

    def is_donated_error(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the runtime's own clear error for a buffer that was donated.

        Args:
            exc: an error an operation raised.

        Returns:
            True when it is that error; False otherwise and by default.
        """
        return False

    def collect_handles(self, tensors: Sequence[Any]) -> list[Any]:
        """An asynchronous sync, then the device data of the tensors' graphs deduplicated by
        buffer handle (PyTorch/XLA's gradient-accumulation helper).

        Args:
            tensors: the tensors whose graphs to sync.

        Returns:
            The device-data handles, every one filled.

        Raises:
            Unsupported: the runtime lacks ``ASYNC_SYNC``, naming it (the default).
        """
        raise self._lacks(ASYNC_SYNC)

    def executions(self) -> tuple[int, int]:
        """The execution counts of this process, so a check can tell that ``wait_device_ops``
        returned with nothing still running.

        Returns:
            (launched, completed on the device).

        Raises:
            Unsupported: the runtime lacks ``ASYNC_SYNC``, naming it (the default).
        """
        raise self._lacks(ASYNC_SYNC)

    def read_handles(self, tensors: Sequence[Any]) -> list[Any]:
        """The tensors' device-data handles, read without waiting: right after a waiting sync
        every one must be filled.

        Args:
            tensors: tensors this adapter made.

        Returns:
            One handle per tensor, as the runtime holds it now.

        Raises:
            Unsupported: the runtime lacks ``ASYNC_SYNC``, naming it (the default).
        """
        raise self._lacks(ASYNC_SYNC)

    def discovery_count(self) -> int:
        """How many times topology discovery ran (``Adapter.discovery_count``).

        Raises:
            Unsupported: the runtime lacks ``DISCOVERY_COUNT``, naming it (the default).
        """
        raise self._lacks(DISCOVERY_COUNT)

    def prepare_fsdp_spec(self, shape: tuple[int, ...], mesh: Any) -> Any:
        """The partition spec FSDPv2 prepares for a parameter, exactly as the runtime returns it.

        Args:
            shape: the parameter's shape (``()`` for a 0-d parameter).
            mesh: a mesh this adapter made, with an axis named ``"fsdp"``.

        Returns:
            The spec as returned, not normalized (a list where the runtime returns a list).

        Raises:
            Unsupported: the runtime lacks ``FSDP``, naming it (the default).
        """
        raise self._lacks(FSDP)

    def op_sharding(self, mesh: Any, spec: Any) -> Any:
        """The mesh's cached sharding for a spec (``Mesh.get_op_sharding``).

        Args:
            mesh: a mesh this adapter made.
            spec: the spec, passed as given: an unhashable spec must fail the way the runtime
                fails.

        Returns:
            The runtime's sharding object for ``spec``.

        Raises:
            Unsupported: the runtime lacks ``OP_SHARDING``, naming it (the default).
            TypeError: the runtime's own error for a spec its cache cannot take.
        """
        raise self._lacks(OP_SHARDING)

    def fault_switches(self) -> Mapping[str, str]:
        """The runtime's fault switches: the bugs a scenario or an invariant of this runtime
        declares it catches, each re-created behind a switch that is off unless a check turns it
        on (capability ``FAULT_SWITCHES``).

        Returns:
            Each switch's name, with one line saying what it re-creates.

        Raises:
            Unsupported: the runtime lacks ``FAULT_SWITCHES``, naming it (the default).
        """
        raise self._lacks(FAULT_SWITCHES)

    def inject(self, fault: str) -> AbstractContextManager[None]:
        """Turn a fault switch on for a block: ``with adapter.inject(name): ...``. A switch that
        was on already stays on after the block.

        Args:
            fault: one of ``fault_switches()``.

        Returns:
            A context manager; the switch is on inside it.

        Raises:
            Unsupported: the runtime lacks ``FAULT_SWITCHES``, naming it (the default).
            ValueError: ``fault`` is not one of ``fault_switches()``; the message names the
                known ones.
        """
        raise self._lacks(FAULT_SWITCHES)

    def faults_on(self) -> frozenset[str]:
        """The fault switches on right now: what a counterexample was found with.

        Returns:
            Their names; none for a runtime without switches (the default).
        """
        return frozenset()

    def training_dialect(self) -> TrainingDialect:
        """How the runtime spells a training program's statements, so that a generated program
        is plain code in its own API (capability ``TRAINING_PROGRAMS``).

        Returns:
            The runtime's ``TrainingDialect`` (``harness.adapters.base``).

        Raises:
            Unsupported: the runtime lacks ``TRAINING_PROGRAMS``, naming it (the default).
        """
        raise self._lacks(TRAINING_PROGRAMS)

    def save(self, tensors: dict[str, Any], path: str) -> None:
        """Write tensors to a file (``Adapter.save``).

        Raises:
            Unsupported: the runtime lacks ``SAVE``, naming it (the default).
        """
        raise self._lacks(SAVE)

    def load(self, path: str) -> dict[str, np.ndarray]:
        """Read back what ``save`` wrote (``Adapter.load``).

        Raises:
            Unsupported: the runtime lacks ``SAVE``, naming it (the default).
        """
        raise self._lacks(SAVE)

    def step(self) -> None:
        """A step boundary (``Adapter.step``).

        Raises:
            Unsupported: the runtime lacks ``STEP``, naming it (the default).
        """
        raise self._lacks(STEP)

    def sync(self, tensors: Sequence[Any], wait: bool) -> None:
        """Execute some tensors' pending work (``Adapter.sync``).

        Raises:
            Unsupported: the runtime lacks ``STEP``, naming it (the default).
        """
        raise self._lacks(STEP)

    def wait(self) -> None:
        """Wait for every execution submitted so far (``Adapter.wait``).

        Raises:
            Unsupported: the runtime lacks ``ASYNC_SYNC``, naming it (the default).
        """
        raise self._lacks(ASYNC_SYNC)

    def alias(self, t: Any, kind: str, arg: Any = None) -> Any:
        """An alias of ``t`` over the same storage (``Adapter.alias``).

        Raises:
            Unsupported: the runtime lacks ``ALIASING``, naming it (the default).
        """
        raise self._lacks(ALIASING)

    def inplace(self, t: Any, op: str, other: Any) -> None:
        """Update ``t`` in place (``Adapter.inplace``).

        Raises:
            Unsupported: the runtime lacks ``ALIASING``, naming it (the default).
        """
        raise self._lacks(ALIASING)


def require(adapter: Adapter, *needed: str) -> None:
    """Refuse a runtime that lacks a capability a check needs, so that the check is skipped with
    the reason instead of failing on an operation the runtime does not have.

    Args:
        adapter: the runtime under test (``current()``, or ``get(name)``).
        *needed: capability names (``TENSORS``, ``MESHES``...).

    Raises:
        Unsupported: naming the runtime, its version and every capability of ``needed`` it lacks.
    """
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
