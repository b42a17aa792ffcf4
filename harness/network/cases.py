"""The nemesis' standard cases: each fault of the network-fault table, as a named value.

A case is a job (``JobSpec``), its faults and its bound, plus what each runtime and release was
measured to do (``EXPECTED``: case -> runtime release -> check -> holds). A run that differs from
its row is a regression or an unexpected fix, as in the catalog's expected-outcomes table; a
release with no row is measured, not judged (``xharness nemesis`` prints its row).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.network.checks import default_bound
from harness.network.faults import AtPoint, Fault, Flap, Kill, Late, Partition, Pause, Throttle
from harness.network.job import JobSpec

#: JAX's heartbeat timeout in every case (seconds): short, so that a case takes seconds
HEARTBEAT = 5.0
#: how long past the nemesis' last action a job may take to end, result or error
BOUND = default_bound(HEARTBEAT)
#: what still runs this long after the start is killed (a hang is then a record)
LIMIT = 40.0


@dataclass(frozen=True)
class Case:
    name: str
    faults: tuple[Fault, ...]
    meaning: str
    spec: JobSpec = field(default_factory=lambda: JobSpec(heartbeat=HEARTBEAT, limit=LIMIT))
    bound: float = BOUND


def _spec(**changes: object) -> JobSpec:
    return JobSpec(**{"heartbeat": HEARTBEAT, "limit": LIMIT, **changes})  # type: ignore[arg-type]


CASES: tuple[Case, ...] = (
    Case("partition", (Partition(1),), "rank 1 cut from the others both ways after the first collective"),
    Case("partition-in", (Partition(1, direction="in"),), "rank 1 hears nothing, its packets still leave"),
    Case("partition-out", (Partition(1, direction="out"),), "rank 1's packets are dropped, it still hears"),
    Case("coordinator-cut", (Partition(1, traffic="coordinator"),),
         "only the coordination service's port cut; the collectives stay up"),
    Case("collectives-cut", (Partition(1, traffic="collectives"),),
         "the collectives cut; the coordination service (heartbeats) stays up"),
    Case("partition-healed", (Partition(1, heal_after=2.0),), "a 2 s partition, healed within the heartbeat timeout"),
    Case("pause-short", (Pause(1, heal_after=2.0),), "rank 1 stopped 2 s (SIGSTOP), under the heartbeat timeout"),
    Case("pause-long", (Pause(1, heal_after=10.0),), "rank 1 stopped 10 s, past the heartbeat timeout"),
    Case("kill-coordinator", (Kill(0),), "rank 0, which holds the coordination service, killed"),
    Case("kill-worker", (Kill(1),), "rank 1, not the coordinator, killed"),
    Case("flap", (Flap(1, down=1.5, up=1.5, times=2),), "two 1.5 s cuts of rank 1, 1.5 s apart"),
    Case("throttle", (Throttle(1, rate="8mbit"),), "rank 1's link at 8 Mbit/s during 1 MB collectives",
         spec=_spec(size=1 << 18)),
    Case("late", (Late(1, seconds=4.0),), "rank 1 starts 4 s after rank 0, which waits in initialize"),
    Case("startup-partition", (Partition(1, start=AtPoint("initialize"), heal_after=3.0),),
         "rank 1 cut for 3 s while the job initializes"),
    Case("save-partition", (Partition(1, start=AtPoint("save:2")),),
         "rank 1 cut while it saves its second checkpoint", spec=_spec(checkpoint=True)),
)

BY_NAME = {case.name: case for case in CASES}

#: a check seen both holding and not over repeated runs of one case on one release (timing decides)
VARIES = "varies"

#: the JAX releases the cases were measured on, with the same outcome on each (a release with
#: another outcome gets rows of its own)
MEASURED = ("jax 0.10.2", "jax 0.12.0.1")

#: what each runtime release was measured to do: case -> release -> {check: holds (None: n/a)}
#: (``xharness nemesis --runtime jax [--python PATH]`` measures a row; docs/reference/network-faults.md
#: shows them)
_ROWS: dict[str, dict[str, bool | str | None]] = {
    "partition": {"bounded": True, "blamed": False, "survived": None, "silent": True, "torn": None},
    "partition-in": {"bounded": True, "blamed": False, "survived": None, "silent": True, "torn": None},
    "partition-out": {"bounded": True, "blamed": False, "survived": None, "silent": True, "torn": None},
    "coordinator-cut": {"bounded": True, "blamed": False, "survived": None, "silent": True, "torn": None},
    "collectives-cut": {"bounded": False, "blamed": None, "survived": None, "silent": True, "torn": None},
    "partition-healed": {"bounded": True, "blamed": None, "survived": True, "silent": True, "torn": None},
    "pause-short": {"bounded": True, "blamed": None, "survived": True, "silent": True, "torn": None},
    "pause-long": {"bounded": True, "blamed": False, "survived": None, "silent": True, "torn": None},
    "kill-coordinator": {"bounded": True, "blamed": True, "survived": None, "silent": True, "torn": None},
    "kill-worker": {"bounded": True, "blamed": True, "survived": None, "silent": True, "torn": None},
    # seen both ways (timing decides): on 0.10.2 the job died in 2 of 8 runs one at a time and in
    # 4 of 4 runs of four at once; on 0.12.0.1 in 5 of 6 runs one at a time
    "flap": {"bounded": True, "blamed": VARIES, "survived": VARIES, "silent": True, "torn": None},
    "throttle": {"bounded": True, "blamed": None, "survived": None, "silent": True, "torn": None},
    "late": {"bounded": True, "blamed": None, "survived": True, "silent": True, "torn": None},
    "startup-partition": {"bounded": True, "blamed": None, "survived": True, "silent": True, "torn": None},
    "save-partition": {"bounded": True, "blamed": False, "survived": None, "silent": True, "torn": True},
}
EXPECTED: dict[str, dict[str, dict[str, bool | str | None]]] = {
    case: dict.fromkeys(MEASURED, row) for case, row in _ROWS.items()
}


def expected(case: str, release: str) -> dict[str, bool | str | None] | None:
    """The measured verdicts of ``case`` on ``release`` ("jax 0.10.2"), or None if never measured."""
    return EXPECTED.get(case, {}).get(release)


def agrees(want: dict[str, bool | str | None], got: dict[str, bool | None]) -> bool:
    """Whether measured verdicts ``got`` agree with the row ``want`` (a ``VARIES`` check agrees
    with anything)."""
    return set(want) == set(got) and all(w == VARIES or w == got[k] for k, w in want.items())


__all__ = ["BOUND", "BY_NAME", "CASES", "EXPECTED", "HEARTBEAT", "LIMIT", "VARIES", "Case", "agrees", "expected"]
