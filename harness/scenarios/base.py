"""What a scenario is: a record of an upstream bug and the code that re-creates its trigger.

A ``Scenario`` names its upstream references, the component, the trigger, the signatures it must
produce when its fault switch is on, and what a cell must offer to host it. Its ``variants`` are
the concrete repros (most scenarios have one); each variant is a function of a ``Context`` that
raises when something is wrong and returns when all is well. Whether a raised error *is* the bug
is decided by matching it against the signatures, never by the variant itself.
"""

from __future__ import annotations

import importlib
import math
import re
import signal as _signal
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from harness.backends import BACKENDS, Backend


class InvariantViolation(AssertionError):
    """A scenario's own check failed (e.g. a checkpoint holding a stale value)."""


@dataclass(frozen=True)
class Signature:
    """How a bug shows itself: an exception type and message pattern, or a fatal signal.

    ``exception`` is the type, or ``"module:Name"`` for a type of a module that starts JAX (the
    runtime's errors): it is imported when an exception is matched, never for listing the catalog.
    """

    name: str
    exception: type[BaseException] | str | None = None
    message: str = ""  # regular expression searched in str(exception)
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

    devices: int = 1
    device_multiple: int = 1  # the device count must be a multiple of this
    processes: int = 1
    max_processes: int = 0  # the most processes the mechanism makes sense in (0: any number)
    backends: tuple[str, ...] = ()  # empty: any backend
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

    seed: int
    inject: bool
    devices: int
    backend: str = Backend.CPU
    rng: np.random.Generator = field(init=False)

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)

    def normal(self, *shape: int) -> np.ndarray:
        return self.rng.standard_normal(shape).astype(np.float32)


Variant = Callable[[Context], None]


@dataclass(frozen=True)
class Scenario:
    id: str
    title: str
    upstream: tuple[str, ...]  # issue/PR references, e.g. "pytorch/xla#9078"
    component: str
    trigger: str
    fault: str  # the fault switch that re-creates the bug (a switch of ``runtime``)
    signatures: tuple[Signature, ...]
    variants: dict[str, Variant]
    needs: Needs = Needs()
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
