"""A faulted run as a record: every fault's start and heal, every rank's events and end.

Jepsen's lesson: the checker judges a history, never the live run, so a verdict can be re-read,
re-judged and shown to someone else. A history is a list of events in the order the job saw
them, each with its time in seconds since the first rank started; a rank's summary (first error,
exit, what it blamed) is derived from it and its stderr, and the whole record is JSON.
"""

from __future__ import annotations

import json
import signal
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Event:
    t: float
    kind: str  # job-start, rank-start, point, fault-start, fault-heal, rank-event, rank-exit, killed, job-end
    rank: int | None = None
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RankEnd:
    """How one rank ended: its exit status (or the signal), and who ended it."""

    rank: int
    code: int | None  # None: the job killed it at its hard limit (it would not end by itself)
    at: float | None
    stderr: str = ""

    @property
    def by_signal(self) -> str | None:
        if self.code is not None and self.code < 0:
            try:
                return signal.Signals(-self.code).name
            except ValueError:
                return f"signal {-self.code}"
        return None

    def describe(self) -> str:
        if self.code is None:
            return "did not end by itself: killed by the harness at its hard limit"
        return f"died on {self.by_signal}" if self.by_signal else f"exited {self.code}"


@dataclass
class History:
    """What a faulted job did, in order; ``ends`` holds each rank's end."""

    ranks: int
    heartbeat: float
    faults: list[str] = field(default_factory=list)  # each fault's describe()
    events: list[Event] = field(default_factory=list)
    ends: dict[int, RankEnd] = field(default_factory=dict)
    checkpoints: dict[int, str | None] = field(default_factory=dict)  # rank -> file text (None: absent)

    def add(self, t: float, kind: str, rank: int | None = None, **detail: Any) -> None:
        self.events.append(Event(round(t, 3), kind, rank, detail))

    def of(self, kind: str, rank: int | None = None) -> list[Event]:
        return [e for e in self.events if e.kind == kind and (rank is None or e.rank == rank)]

    def rank_events(self, rank: int, what: str) -> list[dict[str, Any]]:
        """The rank's own reports of one kind (``collective``, ``error``, ``done``, ...)."""
        return [e.detail for e in self.of("rank-event", rank) if e.detail.get("event") == what]

    def to_json(self) -> str:
        return json.dumps(
            {"ranks": self.ranks, "heartbeat": self.heartbeat, "faults": self.faults,
             "events": [asdict(e) for e in self.events],
             "ends": {str(r): asdict(e) for r, e in self.ends.items()},
             "checkpoints": {str(r): c for r, c in self.checkpoints.items()}},
            indent=1,
        )

    @classmethod
    def from_json(cls, text: str) -> History:
        data = json.loads(text)
        history = cls(data["ranks"], data["heartbeat"], list(data["faults"]))
        history.events = [Event(**e) for e in data["events"]]
        history.ends = {int(r): RankEnd(**e) for r, e in data["ends"].items()}
        history.checkpoints = {int(r): c for r, c in data.get("checkpoints", {}).items()}
        return history

    def timeline(self) -> str:
        """The history as lines a person reads: time, who, what."""
        lines = []
        for e in self.events:
            who = f"rank {e.rank}" if e.rank is not None else "job"
            what = ", ".join(f"{k}={v}" for k, v in e.detail.items() if k != "t")
            lines.append(f"{e.t:8.3f}s  {who:7}  {e.kind}  {what}")
        return "\n".join(lines)
