"""What a scenario is: a record of an upstream bug and the code that re-creates its trigger.

A ``Scenario`` names its upstream references, the component, the trigger, the signatures it must
produce when its fault switch is on, and what a cell must offer to host it. Its ``variants`` are
the concrete repros (most scenarios have one); each variant is a function of a ``Context`` that
raises when something is wrong and returns when all is well. Whether a raised error *is* the bug
is decided by matching it against the signatures, never by the variant itself.
"""

from __future__ import annotations

import importlib
import re
import signal as _signal
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


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


@dataclass(frozen=True)
class Needs:
    """What a cell must offer: devices in this process, and processes.

    Runtime modes (functionalization, parameter aliasing) are not needs: a scenario that depends
    on one sets it itself with ``xr.configure`` inside its variants.
    """

    devices: int = 1
    device_multiple: int = 1  # the device count must be a multiple of this
    processes: int = 1

    def unmet(self, devices: int, processes: int = 1) -> str | None:
        """Why a process with ``devices`` devices cannot host the scenario, or None."""
        if devices < self.devices:
            return f"needs at least {self.devices} devices, the cell has {devices}"
        if devices % self.device_multiple:
            return f"needs a device count that is a multiple of {self.device_multiple}, the cell has {devices}"
        if processes < self.processes:
            return f"needs {self.processes} processes, the cell has {processes}"
        return None


@dataclass
class Context:
    """Everything a variant gets: the seed and a generator drawn from it, the device count."""

    seed: int
    inject: bool
    devices: int
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
    fault: str  # the fault switch that re-creates the bug
    signatures: tuple[Signature, ...]
    variants: dict[str, Variant]
    needs: Needs = Needs()
    story: str = ""
    #: per variant, the signature names it must show when injected (any of the scenario's when absent)
    expected: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: a race: the variants run under this ``harness.sched`` strategy (see ``scenarios.explore``)
    #: unless ``--explore`` or ``--schedule`` says otherwise; None runs them plainly
    explore: str | None = None

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
