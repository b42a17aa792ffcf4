"""The nemesis' faults, as values: what is hit, when it starts and when it heals.

In the spirit of Jepsen's nemesis, a fault is data a test composes and a run records, never an
action hidden in a helper: ``Partition(rank=1, direction="out", start=AtPoint("collective:2"),
heal_after=3)``. The job (``harness.network.job``) turns each into the kernel's own tools
(nftables in the host's namespace, ``tc`` on its link, a signal to its process) and writes every
start and heal into the run's history. A start is a time after the job began (``At``) or a named
point of the ranks' program (``AtPoint``: reached when every live rank has reached it, before any
goes on); a heal is a number of seconds after the start, or ``None`` for never.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

#: which traffic a partition cuts: everything, only the coordination service's port (JAX's
#: heartbeats and key-value store), or everything but it (gloo's collectives)
Traffic = Literal["all", "coordinator", "collectives"]
#: which way a partition cuts, seen from the target: "out" drops what it sends, "in" what it
#: receives, "both" both
Direction = Literal["both", "in", "out"]
TRAFFIC: tuple[str, ...] = ("all", "coordinator", "collectives")
DIRECTIONS: tuple[str, ...] = ("both", "in", "out")

#: the points of the ranks' program (``harness.network.worker``): ``initialize`` comes before
#: ``jax.distributed.initialize``, ``collective:K`` before the K-th collective (from 1),
#: ``save:K`` before the K-th checkpoint, ``done`` after the last collective
POINT_KINDS = ("initialize", "collective", "save", "done")


@dataclass(frozen=True)
class At:
    """``seconds`` after the job started its first rank."""

    seconds: float

    def describe(self) -> str:
        return f"at {self.seconds:g} s"


@dataclass(frozen=True)
class AtPoint:
    """When every live rank has reached the named point of its program (and before any goes on)."""

    name: str

    def __post_init__(self) -> None:
        kind, _, number = self.name.partition(":")
        if kind not in POINT_KINDS or (kind in ("collective", "save")) != number.isdigit():
            raise ValueError(f"unknown point {self.name!r} (expected initialize, collective:K, save:K or done)")

    def describe(self) -> str:
        return f"at point {self.name}"


Start = At | AtPoint


@dataclass(frozen=True)
class Fault:
    """What every fault has: its target rank, its start and its heal (``None``: never)."""

    rank: int
    start: Start = field(default_factory=lambda: AtPoint("collective:2"))
    heal_after: float | None = None

    kind = "fault"

    def __post_init__(self) -> None:
        if self.rank < 0:
            raise ValueError(f"a fault's rank is 0 or more, not {self.rank}")
        if self.heal_after is not None and self.heal_after < 0:
            raise ValueError(f"heal_after is a duration, not {self.heal_after}")

    def target(self) -> str:
        return f"rank {self.rank}"

    def describe(self) -> str:
        heal = "never heals" if self.heal_after is None else f"heals after {self.heal_after:g} s"
        return f"{self.kind} of {self.target()} {self.start.describe()}, {heal}"


@dataclass(frozen=True)
class Partition(Fault):
    """Cut the target's link to every other rank, one way or both, for some or all traffic."""

    direction: Direction = "both"
    traffic: Traffic = "all"

    kind = "partition"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.direction not in DIRECTIONS:
            raise ValueError(f"direction {self.direction!r} (expected one of {', '.join(DIRECTIONS)})")
        if self.traffic not in TRAFFIC:
            raise ValueError(f"traffic {self.traffic!r} (expected one of {', '.join(TRAFFIC)})")

    def target(self) -> str:
        way = {"both": "both ways", "in": "inbound", "out": "outbound"}[self.direction]
        what = {"all": "", "coordinator": ", coordination service only", "collectives": ", collectives only"}
        return f"rank {self.rank} ({way}{what[self.traffic]})"


@dataclass(frozen=True)
class Flap(Fault):
    """A partition (both ways, all traffic) that comes and goes: ``times`` cuts of ``down``
    seconds with ``up`` seconds between them; it is healed after the last cut."""

    down: float = 2.0
    up: float = 2.0
    times: int = 2

    kind = "flap"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.times < 1 or self.down <= 0 or self.up < 0:
            raise ValueError("a flap has times >= 1, down > 0 and up >= 0")

    def describe(self) -> str:
        return (f"flap of rank {self.rank} {self.start.describe()}: {self.times} cut(s) of {self.down:g} s, "
                f"{self.up:g} s apart")

    def cuts(self) -> list[tuple[float, float]]:
        """(start, heal) of each cut, in seconds after the fault's start."""
        return [(i * (self.down + self.up), i * (self.down + self.up) + self.down) for i in range(self.times)]


@dataclass(frozen=True)
class Pause(Fault):
    """Stop the target's process (SIGSTOP), a host that stops answering; resume it (SIGCONT) at
    the heal."""

    kind = "pause"


@dataclass(frozen=True)
class Kill(Fault):
    """SIGKILL the target's process (rank 0 holds the coordination service). Never heals."""

    kind = "kill"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.heal_after is not None:
            raise ValueError("a killed process does not heal (heal_after must be None)")


@dataclass(frozen=True)
class Throttle(Fault):
    """Limit the target's link to ``rate`` (tc's token bucket, both ways), e.g. "8mbit"."""

    rate: str = "8mbit"

    kind = "throttle"


@dataclass(frozen=True)
class Late(Fault):
    """Start the target's process ``seconds`` after the others: a rank late for initialize."""

    seconds: float = 5.0
    start: Start = field(default_factory=lambda: At(0.0))

    kind = "late"

    def describe(self) -> str:
        return f"late start of rank {self.rank} by {self.seconds:g} s"


def heals_within(fault: Fault, seconds: float) -> bool:
    """Whether ``fault`` is over within ``seconds`` of its start (a late rank counts its delay)."""
    if isinstance(fault, Late):
        return fault.seconds <= seconds
    if isinstance(fault, Flap):
        return fault.down <= seconds
    return fault.heal_after is not None and fault.heal_after <= seconds
