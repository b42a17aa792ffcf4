"""One upstream trigger of a catalog scenario (or of a known finding), written in a real
runtime's own API.

The PyTorch/XLA reproducers (``upstream_torch_xla``, ``upstream_findings``) and the JAX ones
(``upstream_jax``) are all made of these; the machinery that runs them in a fresh process and judges what came back lives in
``upstream_torch_xla``, which reads both lists. Both import this module, so neither imports the other.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.adapters.base import Unsupported
from harness.scenarios.base import Signature

#: the runtime a reproducer is for unless it says otherwise
RUNTIME = "torch_xla"


class MachineLacks(Unsupported):
    """This machine cannot host the trigger (hardware); never held against the release."""


@dataclass(frozen=True)
class CrashSignature:
    """A bug that kills its process: the signal, and a pattern its stderr must show (the CHECK
    message), so that an unrelated abort is not taken for the bug."""

    name: str
    signal: int
    stderr: str = ""

    def matches(self, signum: int, stderr: str) -> bool:
        return signum == self.signal and re.search(self.stderr, stderr) is not None

    def describe(self) -> str:
        return f"signal {signal.Signals(self.signal).name}" + (
            f" with /{self.stderr}/ on stderr" if self.stderr else ""
        )


@dataclass(frozen=True)
class Reproducer:
    """An upstream trigger: the bug's program in the runtime's own API, as its maintainers would
    run it, so that ``xharness report upstream`` can make it a standalone script to file.

    ``body`` runs in a fresh process with ``env`` set; it returns where the runtime behaves and
    raises (or dies) where it carries the bug, and what it raised is judged by ``signatures`` (a
    death by ``crashes``). It imports its runtime inside itself, and reaches only functions,
    classes and constants of its own module, so that the script is the module's code alone.
    A runtime's triggers are registered as a tuple under ``xharness.upstream``, named by the
    runtime (docs/how-to/write-a-plugin.md)."""

    #: the registered scenario (or the harness' known finding) it reproduces
    scenario: str
    #: its name among the scenario's triggers: the report's section and ``--variant`` name it
    variant: str
    body: Callable[[], None]
    source: str  # where the code follows upstream (issue, test)
    #: flags the runtime reads when it is imported (PyTorch/XLA's, ``JAX_NUM_CPU_DEVICES``)
    env: dict[str, str] = field(default_factory=dict)
    signatures: tuple[Signature, ...] = ()
    crashes: tuple[CrashSignature, ...] = ()
    #: the runtime whose version the outcome is judged by: a distribution of the harness' real
    #: runtimes, or a plugin's runtime (its adapter's ``version()``)
    runtime: str = RUNTIME
    #: a race: its outcome depends on timing, so one run is a sample, not an outcome
    race: bool = False

    def runs(self) -> int:
        """Fresh processes the trigger runs in: ``XHARNESS_RUNS`` for a race or a trigger that
        may crash (one run of those is a coin toss), one for the rest."""
        from harness import settings

        return int(settings.read("XHARNESS_RUNS")) if self.race or self.crashes else 1


def torch_xla_sharding_api() -> Any:
    """``torch_xla.distributed.spmd``, or where releases before 2.2 kept it."""
    try:
        import torch_xla.distributed.spmd as xs
    except ImportError:
        import torch_xla.experimental.xla_sharding as xs
    return xs
