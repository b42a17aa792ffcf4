"""What a scenario is: a record of an upstream bug and the code that re-creates its trigger.

A ``Scenario`` names its upstream references, the component, the trigger, the signatures it must
produce when its fault switch is on, and what a cell must offer to host it. Its ``variants`` are
the concrete repros (most scenarios have one); each variant is a function of a ``Context`` that
raises when something is wrong and returns when all is well. Whether a raised error *is* the bug
is decided by matching it against the signatures, never by the variant itself.
"""

from __future__ import annotations

import ast
import importlib
import importlib.machinery
import math
import re
import signal as _signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from harness.backends import BACKENDS, Backend

if TYPE_CHECKING:  # numpy where a scenario runs: listing the catalog needs none
    import numpy as np


class InvariantViolation(AssertionError):
    """A scenario's own check failed (e.g. a checkpoint holding a stale value)."""


@dataclass(frozen=True)
class Signature:
    """How a bug shows itself: an exception type and message pattern, or a fatal signal.

    ``exception`` is the type, or ``"module:Name"`` for a type of a module that starts JAX (the
    runtime's errors): it is imported when an exception is matched, never for listing the catalog.
    """

    #: the signature's name, as a result reports it (``reproduced: layout-lost``)
    name: str
    #: the exception class, or ``"module:Name"`` (checked when the scenario loads: a name that
    #: does not exist is a broken plugin); None for a signature that is a signal only
    exception: type[BaseException] | str | None = None
    message: str = ""  # regular expression searched in str(exception)
    #: the fatal signal the bug dies of (``signal.SIGSEGV``), for a crash signature
    signal: int | None = None
    crash_mode: str = "raise"  # the HARNESS_CRASH_MODE under which this signature appears

    def exception_type(self) -> type[BaseException] | None:
        """The exception class (imported now when given as ``"module:Name"``)."""
        if isinstance(self.exception, str):
            module, _, name = self.exception.partition(":")
            found = getattr(importlib.import_module(module), name)
            assert isinstance(found, type) and issubclass(found, BaseException), self.exception
            return found
        return self.exception

    def unresolved(self) -> str | None:
        """Why ``exception`` names no exception class, or None; checked when the catalog loads,
        so that a misspelled ``"module:Name"`` is a broken plugin at once, not a scenario whose
        every injected run ends "failed" with an import error. A module not imported yet is read,
        not imported (importing it may start a runtime): its top level must bind the name."""
        if not isinstance(self.exception, str):
            ok = self.exception is None or (isinstance(self.exception, type)
                                            and issubclass(self.exception, BaseException))
            return None if ok else f"signature {self.name!r}: {self.exception!r} is not an exception class"
        module, colon, name = self.exception.partition(":")
        if not colon or not module.strip() or not name.strip():
            return f"signature {self.name!r}: {self.exception!r} is not \"module:ExceptionName\""
        return _unbound(self.name, module.strip(), name.strip())

    def matches_exception(self, exc: BaseException) -> bool:
        wanted = self.exception_type()
        return (
            wanted is not None
            and isinstance(exc, wanted)
            and re.search(self.message, str(exc)) is not None
        )

    def matches_signal(self, signum: int) -> bool:
        return self.signal is not None and self.signal == signum

    def describe(self) -> str:
        if self.signal is not None:
            return f"signal {_signal.Signals(self.signal).name}"
        assert self.exception is not None
        name = (
            self.exception.rpartition(":")[2]
            if isinstance(self.exception, str)
            else self.exception.__name__
        )
        return f"{name}: /{self.message}/" if self.message else name


def _unbound(signature: str, module: str, name: str) -> str | None:
    """Why module ``module`` has no exception class ``name``, or None (see ``Signature.unresolved``)."""
    where = f"signature {signature!r} names {module}:{name}"
    loaded = sys.modules.get(module)
    if loaded is not None:
        found = getattr(loaded, name, None)
        if found is None:
            return f"{where}, but {module} has no {name}"
        if not (isinstance(found, type) and issubclass(found, BaseException)):
            what = "a class that derives from no exception" if isinstance(found, type) else f"a {type(found).__name__}"
            return f"{where}, which is {what}, not an exception class"
        return None
    try:
        spec = _find_unimported(module)
    except (ImportError, ValueError) as exc:
        return f"{where}, but {module} cannot be found: {exc}"
    if spec is None:
        return f"{where}, but no module {module} is installed"
    if not (spec.origin or "").endswith(".py"):
        return None  # an extension module or a namespace: only an import could tell
    try:
        tree = ast.parse(Path(spec.origin or "").read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None  # its import will say what is wrong with it
    return None if name in _top_level_names(tree) else f"{where}, which {module} does not define"


def _find_unimported(module: str) -> importlib.machinery.ModuleSpec | None:
    """Where ``module`` is, found without importing it or its packages (``importlib.util.find_spec``
    imports the parents, and a runtime's package may start its backend when imported)."""
    parts = module.split(".")
    for i in range(len(parts) - 1, 0, -1):  # from the deepest parent that is imported already
        parent = sys.modules.get(".".join(parts[:i]))
        if parent is not None:
            locations, start = getattr(parent, "__path__", None), i
            break
    else:
        locations, start = None, 0
    spec = None
    for depth in range(start, len(parts)):
        if depth and locations is None:
            return None  # a parent that is a module, not a package
        spec = importlib.machinery.PathFinder.find_spec(".".join(parts[: depth + 1]), locations)
        if spec is None:
            return None
        locations = spec.submodule_search_locations
    return spec


def _top_level_names(tree: ast.Module) -> set[str]:
    """The names a module's top level binds; every name when it cannot tell (``import *`` or a
    module ``__getattr__``)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            if any(alias.name == "*" for alias in node.names):
                return _EVERY_NAME
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.If | ast.Try):  # a guarded import or definition
            inner = ast.Module(body=[*ast.iter_child_nodes(node)], type_ignores=[])  # type: ignore[list-item]
            found = _top_level_names(inner)
            if found is _EVERY_NAME:
                return found
            names |= found
    return _EVERY_NAME if "__getattr__" in names else names


class _Every(set[str]):
    """A set that holds every name."""

    def __contains__(self, item: object) -> bool:
        return True


_EVERY_NAME: set[str] = _Every()


#: the backends a need may name, spelled as ``jax.default_backend()`` spells them (CUDA and ROCm
#: are both ``gpu``)


def current_backend() -> str:
    """The backend this process runs on (``jax.default_backend()``); JAX is imported only when
    asked, so that listing the catalog never starts it."""
    import jax

    return str(jax.default_backend())


@dataclass(frozen=True)
class Needs:
    """What a cell must offer: devices in this process, processes, and the backends where the
    mechanism exists at all.

    ``backends`` is empty for a mechanism every backend has. A mechanism that exists on some
    backends only (XLA's CPU client adopting a host buffer) names them, so that elsewhere the
    scenario or variant is skipped with the reason instead of reading as a lost bug; ``why``
    says what the other backends lack, and travels with the skip.

    Runtime modes (functionalization, parameter aliasing) are not needs: a scenario that depends
    on one sets it itself with ``xr.configure`` inside its variants.
    """

    #: the fewest devices the process must address
    devices: int = 1
    device_multiple: int = 1  # the device count must be a multiple of this
    #: the fewest processes the cell must have
    processes: int = 1
    max_processes: int = 0  # the most processes the mechanism makes sense in (0: any number)
    #: the backends the mechanism exists on (``cpu``, ``gpu``, ``tpu``); empty: any backend
    backends: tuple[str, ...] = ()
    why: str = ""  # why the need exists, shown with a skip

    def __post_init__(self) -> None:
        # a misspelled backend would skip its variant everywhere, silently
        unknown = [b for b in self.backends if b not in BACKENDS]
        if unknown:
            raise ValueError(f"unknown backend {unknown[0]!r} (one of {', '.join(BACKENDS)})")

    def unmet(self, devices: int, processes: int = 1, backend: str | None = None) -> str | None:
        """Why a process with ``devices`` devices on ``backend`` cannot host the scenario, or
        None. Without ``backend`` the backends are not checked (a caller that has not started
        JAX yet: the runner checks them when it runs each variant)."""
        reason = self._unmet(devices, processes, backend)
        return f"{reason} ({self.why})" if reason and self.why else reason

    def _unmet(self, devices: int, processes: int, backend: str | None) -> str | None:
        if backend is not None and self.backends and backend not in self.backends:
            return f"runs on {' or '.join(self.backends)} only, this run is on {backend}"
        if devices < self.devices:
            return f"needs at least {self.devices} devices, the cell has {devices}"
        if devices % self.device_multiple:
            return f"needs a device count that is a multiple of {self.device_multiple}, the cell has {devices}"
        if processes < self.processes:
            return f"needs {self.processes} processes, the cell has {processes}"
        if self.max_processes and processes > self.max_processes:
            return f"runs in at most {self.max_processes} process(es), the cell has {processes}"
        return None

    def to_json(self) -> dict[str, object]:
        """The record ``xharness list --json`` shows."""
        return {
            "devices": self.devices,
            "device_multiple": self.device_multiple,
            "processes": self.processes,
            "max_processes": self.max_processes,
            "backends": list(self.backends),
            "why": self.why,
        }


def trials_for(hit_rate: float, miss_below: float) -> int:
    """How many independent trials a race needs so that a bug that is present goes unseen with
    probability below ``miss_below``, when one trial sees it with probability ``hit_rate``: the
    least ``k`` with ``(1 - hit_rate) ** k < miss_below``.

    A race whose outcome depends on timing cannot be made certain, only overwhelmingly likely;
    this turns a measured hit rate into the trial count that makes a miss negligible, so that a
    check either always fails (the bug is there) or always passes, never flakes."""
    if not 0.0 < hit_rate <= 1.0:
        raise ValueError(f"hit_rate must be in (0, 1], got {hit_rate}")
    if not 0.0 < miss_below < 1.0:
        raise ValueError(f"miss_below must be in (0, 1), got {miss_below}")
    if hit_rate == 1.0:
        return 1
    k = max(1, math.ceil(math.log(miss_below) / math.log1p(-hit_rate)))
    while (1.0 - hit_rate) ** k >= miss_below:  # the logarithms' rounding, at an exact power
        k += 1
    return k


@dataclass
class Context:
    """Everything a variant gets: the seed and a generator drawn from it, the device count, and
    the backend it runs on (a race variant sizes its trials by it)."""

    #: the run's seed (``xharness repro --seed``, 0 by default); ``rng`` is drawn from it
    seed: int
    #: whether the scenario's fault switch is on for this run (injected mode); the harness turns
    #: the switch on itself, so a variant rarely needs to read this
    inject: bool
    #: the devices this process addresses in the cell (8 CPU devices outside the matrix)
    devices: int
    #: the backend the variant runs on: ``cpu``, ``gpu`` or ``tpu``
    backend: str = Backend.CPU
    #: a numpy generator seeded with ``seed``: draw inputs from it (or with ``normal``) so that a
    #: run replays exactly
    rng: np.random.Generator = field(init=False)

    def __post_init__(self) -> None:
        import numpy as np

        self.rng = np.random.default_rng(self.seed)

    def normal(self, *shape: int) -> np.ndarray:
        """A float32 array of ``shape`` drawn from ``rng`` (standard normal)."""
        return self.rng.standard_normal(shape).astype("float32")


Variant = Callable[[Context], None]


@dataclass(frozen=True)
class Scenario:
    """One bug of the catalog: where it was reported, the code that re-creates its trigger, and
    how it shows itself.

    Each variant runs twice: *fixed* (the fault switch off: it must pass, or do what the expected
    table says of the runtime's release) and *injected* (the switch on: it must raise an error
    that one of ``signatures`` matches). A plugin registers one under the ``xharness.scenarios``
    entry-point group, named by its ``id``; it is checked when loaded (its ``id`` is the entry
    point's, its ``runtime`` is registered, each signature's exception class exists).
    """

    #: the scenario's id, as commands name it (``xharness repro ID``); the entry point's name
    id: str
    #: one line saying what goes wrong
    title: str
    #: issue/PR references, e.g. "pytorch/xla#9078" (empty for a bug found in-house)
    upstream: tuple[str, ...]
    #: the part of the runtime the bug lives in (``"FSDPv2 spec preparation"``)
    component: str
    #: what the variants do to show the bug, in one line
    trigger: str
    #: the fault switch that re-creates the bug (a switch of ``runtime``)
    fault: str
    #: how the bug shows itself: an injected run passes when it raises (or dies of) one of these
    signatures: tuple[Signature, ...]
    #: the reproducers by name: functions of a ``Context`` that return when all is well and raise
    #: when anything is wrong (the signatures decide whether the error is the bug)
    variants: dict[str, Variant]
    #: what a cell must offer to host every variant; a cell that lacks it skips with the reason
    needs: Needs = Needs()
    #: the upstream story, for people (``xharness list`` and the reports show it)
    story: str = ""
    #: per variant, what it needs beyond ``needs``: a variant whose mechanism exists on some
    #: backends only runs where both are met and is skipped, with the reason, elsewhere
    variant_needs: dict[str, Needs] = field(default_factory=dict)
    #: per variant, the signature names it must show when injected (any of the scenario's when absent)
    expected: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: a race: the variants run under this ``harness.sched`` strategy (see ``scenarios.explore``)
    #: unless ``--explore`` or ``--schedule`` says otherwise; None runs them plainly
    explore: str | None = None
    #: the registered runtime whose fault switch ``fault`` is and which the variants drive: the
    #: reference runtime for the harness' own catalog, a plugin's runtime for a plugin's scenario
    #: (its adapter turns the switch on: ``Adapter.inject``)
    runtime: str = "reference"

    def __post_init__(self) -> None:
        stray = sorted(set(self.variant_needs) - set(self.variants))
        if stray:
            raise ValueError(f"{self.id}: variant_needs names no variant: {', '.join(stray)}")

    def unmet(
        self, variant: str, devices: int, processes: int = 1, backend: str | None = None
    ) -> str | None:
        """Why ``variant`` cannot run here (the scenario's needs first, then its own), or None."""
        own = self.variant_needs.get(variant)
        return self.needs.unmet(devices, processes, backend) or (
            own.unmet(devices, processes, backend) if own is not None else None
        )

    def expects(self, variant: str, signature: str) -> bool:
        allowed = self.expected.get(variant)
        return allowed is None or signature in allowed

    def signature_for(self, exc: BaseException) -> Signature | None:
        return next((s for s in self.signatures if s.matches_exception(exc)), None)

    def signature_for_signal(self, signum: int) -> Signature | None:
        return next((s for s in self.signatures if s.matches_signal(signum)), None)

    def upstream_links(self) -> list[str]:
        links = []
        for ref in self.upstream:
            repo, _, num = ref.partition("#")
            links.append(f"https://github.com/{repo}/issues/{num}")
        return links
