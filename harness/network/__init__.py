"""The network as a fault: ranks as hosts of their own, a nemesis that cuts, pauses and heals,
and the runtime's answer judged from the history (docs/how-to/network-faults.md).

The public face (also in ``harness.api``): the fault values (``Partition``, ``Flap``, ``Pause``,
``Kill``, ``Throttle``, ``Late``, with ``At`` and ``AtPoint``), ``JobSpec`` and ``run_faulted``,
which runs a job under faults and returns its ``History`` with a ``Verdict`` per check.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.network.checks import CHECKS, Verdict, default_bound, judge
from harness.network.fabric import Fabric, FabricError, unavailable
from harness.network.faults import At, AtPoint, Fault, Flap, Kill, Late, Partition, Pause, Throttle
from harness.network.history import History
from harness.network.job import JobSpec, run_job


@dataclass(frozen=True)
class Outcome:
    """A faulted run: its history and its verdicts."""

    history: History
    verdicts: dict[str, Verdict]

    def violated(self) -> list[Verdict]:
        return [v for v in self.verdicts.values() if v.holds is False]

    def summary(self) -> dict[str, bool | None]:
        return {name: v.holds for name, v in self.verdicts.items()}

    def report(self) -> str:
        """The verdicts and the timeline, as a failure message shows them."""
        lines = [v.describe() for v in self.verdicts.values()]
        lines += ["faults: " + "; ".join(self.history.faults), "timeline:", self.history.timeline()]
        for rank, end in sorted(self.history.ends.items()):
            lines.append(f"rank {rank} {end.describe()}")
        return "\n".join(lines)


def run_faulted(faults: Sequence[Fault], spec: JobSpec | None = None, *, bound: float | None = None,
                workdir: Path | None = None) -> Outcome:
    """Run ``spec``'s job with ``faults`` in a fabric of its own and judge it. ``bound`` (default:
    the heartbeat timeout plus ``checks.SLACK``) is how long after the nemesis' last action the job may take
    to end."""
    spec = spec or JobSpec()
    history = run_job(spec, faults, workdir)
    addresses = _addresses(history)
    verdicts = judge(history, faults, bound=bound if bound is not None else default_bound(spec.heartbeat),
                     collectives=spec.collectives, addresses=addresses)
    return Outcome(history, verdicts)


def _addresses(history: History) -> dict[str, int]:
    return {e.detail["address"]: e.rank for e in history.of("rank-start")
            if e.rank is not None and "address" in e.detail}


__all__ = [
    "CHECKS", "At", "AtPoint", "Fabric", "FabricError", "Fault", "Flap", "History", "JobSpec",
    "Kill", "Late", "Outcome", "Partition", "Pause", "Throttle", "Verdict", "run_faulted",
    "unavailable",
]
