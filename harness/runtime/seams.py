"""Seams: the named points where a runtime operation can fail midway, and what it must leave behind.

Bugs of failure paths live where something goes wrong halfway through an operation: cleanup that
runs only on a normal exit, a file rewritten where it lies, a cache filled before the work that
fills it fails. SQLite's test harness finds them by failing every I/O call in turn; the runtime
does the same at its seams. Each seam is one line in the runtime, ``seams.reach("compile")``,
which does nothing unless a test armed it::

    with seams.failing("compile", nth=2) as armed:
        ...  # the second compile reached in this block raises ``InjectedFailure``
    armed.fired  # the error it raised, or None when the block never reached it that often

A new seam is one entry in ``SEAMS`` and one ``reach`` line where it happens. With nothing
armed, ``reach`` is one test of an empty dict. Arming is process-wide (the ``execute`` seam is
reached on the executor thread), one arming per seam at a time.

``state()`` reads what a failed operation must leave as it was or consistent (the kernel guard
and its environment flag, the runtime's locks, the caches that record an operation's success):
the failure-safety invariant (``harness.properties.failures``) compares it around the operation
that failed. This module is a leaf: each module of the runtime registers its locks
(``register_lock``) and how to read its part of the state (``register_state``) next to the
things themselves, the way pytest plugins register hooks, so that the seams never reach into
another module's private names.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import Any

from harness import hooks

#: every seam, with where the runtime reaches it
SEAMS: dict[str, str] = {
    "write": "data written to a file: each chunk checkpoint.save writes, and harness.files.atomic_writer's "
    "flush of what its handle was given",
    "rename": "harness.files.atomic_writer: the temporary file renamed over its target",
    "lower": "plan_cache (a step's plan derived on a cache miss): ir.lower of its program",
    "compile": "plan_cache (a step's plan derived on a cache miss): XLA's compile of the lowered program",
    "kernel": "kernels.trace_kernel: a kernel's lowering, inside its skip-discovery guard",
    "execute": "executor.Execution: an execution's launch, on the executor thread",
    "discover": "topology._run_discovery: the discovery itself (the client start)",
}


class InjectedFailure(RuntimeError):
    """The error an armed seam raises: a failure nobody but the test asked for."""

    def __init__(self, seam: str, nth: int) -> None:
        super().__init__(f"injected failure at seam {seam!r} (reach {nth}): {SEAMS[seam]}")
        self.seam = seam
        self.nth = nth
        self.thread = threading.current_thread().name  # where it was raised (``execute``: the executor thread)


@dataclass
class Armed:
    """One arming: the seam, which of its reaches fails, and what happened while it was armed."""

    seam: str
    nth: int
    #: reaches of every seam while armed, the failing one included: what an operation did
    reached: dict[str, int] = field(default_factory=dict)
    fired: InjectedFailure | None = None  # the error raised, once the nth reach came


_armed: dict[str, Armed] = {}
_lock = threading.Lock()


def reach(seam: str) -> None:
    """The runtime is at ``seam``: raise there if a test armed it for this reach."""
    if _armed:
        _reached(seam)


def _reached(seam: str) -> None:
    _check(seam)
    error: InjectedFailure | None = None
    with _lock:
        for armed in _armed.values():
            count = armed.reached[seam] = armed.reached.get(seam, 0) + 1
            if armed.seam == seam and armed.fired is None and count == armed.nth:
                armed.fired = error = InjectedFailure(seam, count)
    if error is not None:
        raise error


def _check(seam: str) -> None:
    if seam not in SEAMS:
        raise ValueError(f"unknown seam {seam!r}; known seams: {', '.join(SEAMS)}")


@contextmanager
def failing(seam: str, nth: int = 1) -> Iterator[Armed]:
    """Arm ``seam`` for the block: its ``nth`` reach raises ``InjectedFailure`` (once)."""
    _check(seam)
    if nth < 1:
        raise ValueError(f"nth counts reaches from 1, got {nth}")
    armed = Armed(seam, nth)
    with _lock:
        if seam in _armed:
            raise ValueError(f"seam {seam!r} is already armed")
        _armed[seam] = armed
    try:
        yield armed
    finally:
        with _lock:
            del _armed[seam]


def armed() -> tuple[str, ...]:
    """The seams armed right now."""
    return tuple(_armed)


# ------------------------------------------------------------------------------ what must hold


@dataclass(frozen=True)
class State:
    """What the runtime's failure paths promise about, read at one moment (see ``state``)."""

    skip_flag: str | None  # HARNESS_SKIP_SLICE_DISCOVERY
    guards: int  # kernel guards open (what they saved and how they exit matter only while open)
    held: tuple[str, ...]  # runtime locks some thread holds
    compiles: int  # transfers.metrics.compiles
    plans: int  # entries of the executor's plan cache
    notes: tuple[Any, ...]  # the programs recompiles noted, oldest first
    last_reason: str | None  # recompiles.last_compile_reason()
    lowered: dict[tuple, Any]  # kernels' lowerings, per (kernel, input structs)
    structs: dict[tuple, Any]  # kernels' shape/dtype structs, per (shape, dtype)
    scalars: dict[tuple, Any]  # the executor's packed-scalar device data, per (dtype, bytes)
    topology: Any  # the discovered topology, or None
    discoveries: int  # topology.discovery_count()
    failure: BaseException | None  # an execution failure not yet reported by a wait


#: the runtime's locks, each registered by the module that holds it (``register_lock``)
_locks: dict[str, Any] = {}
#: readers of the fields of ``State``, each registered by the module whose state it is
_readers: dict[str, Callable[[], Any]] = {}
#: the fields ``state`` computes itself
_OWN_FIELDS = ("held",)


def register_lock(name: str, lock: Any) -> None:
    """Declare one of the runtime's locks (by the module that holds it, next to the lock): a
    failed operation must leave it released (``held_locks``)."""
    _locks[name] = lock


def register_state(name: str, read: Callable[[], Any]) -> None:
    """Declare how to read one field of ``State`` (by the module whose state it is, next to the
    thing itself); ``read`` returns a copy, so later changes do not reach it."""
    if name not in {f.name for f in fields(State)} or name in _OWN_FIELDS:
        raise ValueError(f"State has no field {name!r} to register a reader for")
    _readers[name] = read


def held_locks(patience: float = 0.2) -> tuple[str, ...]:
    """The runtime locks some thread holds. A lock seen held is looked at again until
    ``patience`` seconds have passed: the executor thread takes some for microseconds at a time,
    and only one that stays held is reported."""
    locks = dict(_locks)
    held = [name for name, lock in locks.items() if _is_held(lock)]
    deadline = time.monotonic() + patience
    while held and time.monotonic() < deadline:
        time.sleep(0.001)
        held = [name for name in held if _is_held(locks[name])]
    return tuple(held)


def _is_held(lock: Any) -> bool:
    locked = getattr(lock, "locked", None)
    if locked is not None:
        return bool(locked())
    # a ``threading.RLock``, which has no ``locked()`` before Python 3.14: this thread would be let
    # in again if it held it, so another thread asks
    free: list[bool] = []

    def ask() -> None:
        if lock.acquire(blocking=False):
            lock.release()
            free.append(True)

    asker = threading.Thread(target=ask, name="xharness-lock-probe")
    asker.start()
    asker.join()
    return not free


def state() -> State:
    """The runtime's failure-relevant state now, read through what each module registered."""
    wanted = [f.name for f in fields(State) if f.name not in _OWN_FIELDS]
    missing = [name for name in wanted if name not in _readers]
    if missing:
        raise RuntimeError(f"no reader registered for {', '.join(missing)}: import harness.runtime "
                           "before reading its state")
    return State(held=held_locks(), **{name: _readers[name]() for name in wanted})


# a file written through harness.files is at the write and rename seams in this process
hooks.register("file-seam", reach)
