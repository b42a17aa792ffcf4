"""The invariants a faulted run is judged by: pure functions of its history.

Each says whether it applies to the run and, where it does, whether it holds and why not:
- **bounded**: every rank ends by itself (a result or an error) within ``bound`` seconds of the
  nemesis' last action (the job's start when there is none): never a hang;
- **blamed**: a rank that fails names the faulted rank, or, the faulted rank itself, the peer it
  lost; and it names the right kind: "crashed" when nothing crashed (a partition, a pause, a
  throttle) is wrong;
- **survived**: a run whose every fault heals within the heartbeat timeout completes: every rank
  ends 0 with every collective once, in order, right;
- **silent**: no collective returns a wrong or stale value (a wrong answer is worse than none);
- **torn**: a checkpoint is whole or absent, and one a rank reported saved is never lost.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from harness.network import blame
from harness.network.faults import Fault, Kill, Late, heals_within
from harness.network.history import History


@dataclass(frozen=True)
class Verdict:
    check: str
    holds: bool | None  # None: the check does not apply to this run
    why: str = ""

    def describe(self) -> str:
        state = {True: "holds", False: "VIOLATED", None: "n/a"}[self.holds]
        return f"{self.check}: {state}" + (f" ({self.why})" if self.why else "")


CHECKS = ("bounded", "blamed", "survived", "silent", "torn")
#: how long past the heartbeat timeout a job may take to end after the nemesis' last action
SLACK = 10.0


def default_bound(heartbeat: float) -> float:
    """The bound of a job whose test declares none: its heartbeat timeout plus ``SLACK``."""
    return heartbeat + SLACK


def last_action(history: History) -> float:
    actions = [e.t for e in history.events if e.kind in ("fault-start", "fault-heal", "rank-start")]
    return max(actions, default=0.0)


def bounded(history: History, bound: float) -> Verdict:
    since = last_action(history)
    late = []
    for rank, end in sorted(history.ends.items()):
        if end.code is None or end.at is None:
            late.append(f"rank {rank} {end.describe()}")
        elif end.at - since > bound:
            late.append(f"rank {rank} ended {end.at - since:.1f} s after the last fault action")
    if late:
        return Verdict("bounded", False, f"bound {bound:g} s: " + "; ".join(late))
    return Verdict("bounded", True, f"every rank ended within {bound:g} s")


def failed(history: History, rank: int) -> bool:
    end = history.ends.get(rank)
    return end is not None and end.code != 0


def blame_of(history: History, rank: int, addresses: dict[str, int]) -> blame.Blame | None:
    """What ``rank`` blamed: its own error report first, then its stderr."""
    words = [f"{e['type']}: {e['message']}" for e in history.rank_events(rank, "error")]
    end = history.ends.get(rank)
    text = "\n".join(words + ([end.stderr] if end else []))
    return blame.read(text, addresses)


def _right_kinds(fault: Fault, blamer: int) -> tuple[str, ...]:
    if isinstance(fault, Kill):
        return (blame.CRASHED, blame.HEARTBEAT, blame.UNREACHABLE)
    if blamer == fault.rank:  # the faulted rank itself: it lost its peers
        return (blame.UNREACHABLE, blame.TIMEOUT, blame.HEARTBEAT)
    return (blame.HEARTBEAT, blame.UNREACHABLE, blame.TIMEOUT)


def blamed(history: History, faults: Sequence[Fault], addresses: dict[str, int]) -> Verdict:
    hits = [f for f in faults if not isinstance(f, Late)]
    first = min((e.t for e in history.of("fault-start")), default=None)
    failing = [r for r, end in sorted(history.ends.items())
               if failed(history, r) and end.code is not None and first is not None
               and end.at is not None and end.at >= first]
    if not hits or not failing:
        return Verdict("blamed", None, "no rank failed after a fault started" if hits else "no fault")
    wrong = []
    for rank in failing:
        if any(isinstance(f, Kill) and f.rank == rank for f in hits):
            continue  # the killed rank says nothing
        said = blame_of(history, rank, addresses)
        if said is None:
            wrong.append(f"rank {rank} failed naming nothing")
            continue
        fine = False
        for fault in hits:
            names_it = fault.rank in said.ranks or (rank == fault.rank and said.kind in (blame.UNREACHABLE, blame.TIMEOUT))
            if names_it and said.kind in _right_kinds(fault, rank):
                fine = True
        if not fine:
            wrong.append(f"rank {rank} blamed {said.describe()}; the fault was "
                         + "; ".join(f.describe() for f in hits))
    return Verdict("blamed", not wrong, "; ".join(wrong) if wrong else "every failing rank named the fault")


def survived(history: History, faults: Sequence[Fault], collectives: int) -> Verdict:
    short = all(heals_within(f, history.heartbeat) and not isinstance(f, Kill) for f in faults)
    if not faults or not short:
        return Verdict("survived", None, "a fault lasts past the heartbeat timeout" if faults else "no fault")
    problems = []
    for rank in range(history.ranks):
        end = history.ends.get(rank)
        if end is None or end.code != 0:
            problems.append(f"rank {rank} {end.describe() if end else 'has no end'}")
        ks = [c["k"] for c in history.rank_events(rank, "collective")]
        if ks != list(range(1, collectives + 1)):
            problems.append(f"rank {rank} ran collectives {ks}, not 1..{collectives} once each")
    why = "; ".join(problems) or f"every fault healed within {history.heartbeat:g} s and the job completed"
    return Verdict("survived", not problems, why)


def silent(history: History) -> Verdict:
    wrong = []
    for rank in range(history.ranks):
        for c in history.rank_events(rank, "collective"):
            if not c.get("ok"):
                wrong.append(f"rank {rank} collective {c['k']} returned {c['value']}, not {c['expected']}")
    if not any(history.rank_events(r, "collective") for r in range(history.ranks)):
        return Verdict("silent", None, "no collective returned")
    return Verdict("silent", not wrong, "; ".join(wrong) or "every collective returned the right value")


def torn(history: History) -> Verdict:
    if not history.checkpoints:
        return Verdict("torn", None, "no checkpoints")
    problems = []
    for rank, text in sorted(history.checkpoints.items()):
        saved = [c["k"] for c in history.rank_events(rank, "checkpoint")]
        if text is None:
            if saved:
                problems.append(f"rank {rank} reported checkpoint {saved[-1]} saved, and none is there")
            continue
        try:
            data = json.loads(text)
            k, value = int(data["k"]), data["value"]
        except (ValueError, KeyError, TypeError):
            problems.append(f"rank {rank}'s checkpoint does not parse: {text[:80]!r}")
            continue
        want = [float((r + 1) * k) for r in range(history.ranks)]
        if value != want:
            problems.append(f"rank {rank}'s checkpoint {k} holds {value}, not {want}")
        if saved and k < saved[-1]:
            problems.append(f"rank {rank}'s checkpoint is {k}, older than the {saved[-1]} it reported saved")
    return Verdict("torn", not problems, "; ".join(problems) or "every checkpoint whole")


def judge(history: History, faults: Sequence[Fault], *, bound: float, collectives: int,
          addresses: dict[str, int]) -> dict[str, Verdict]:
    """Every check over one run."""
    return {
        "bounded": bounded(history, bound),
        "blamed": blamed(history, faults, addresses),
        "survived": survived(history, faults, collectives),
        "silent": silent(history),
        "torn": torn(history),
    }

