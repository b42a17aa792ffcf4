"""What a check returns: plain data a CLI can print as JSON."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from harness.sched.errors import ScheduleError, ScheduleFailure
from harness.sched.scheduler import RunRecord


@dataclass
class Failure:
    """The failing run of a check, with what it takes to reproduce it."""

    kind: str  # class of the original exception, or of the deadlock/livelock/stall error
    message: str
    thread: str | None  # the participant that raised, when one did
    thread_id: int | None
    iteration: int
    schedule: str | None  # None for a free-running (stress) run
    preemptions: int | None
    steps: int | None
    error: ScheduleError = field(repr=False, compare=False)

    @classmethod
    def from_error(cls, error: ScheduleError, iteration: int, record: RunRecord | None) -> Failure:
        if isinstance(error, ScheduleFailure):
            kind, message = type(error.original).__name__, str(error.original)
            thread, thread_id = error.thread_name, error.thread_id
        else:
            kind, message, thread, thread_id = type(error).__name__, error.message, None, None
        return cls(
            kind=kind,
            message=message,
            thread=thread,
            thread_id=thread_id,
            iteration=iteration,
            schedule=str(error.schedule) if error.schedule is not None else None,
            preemptions=error.preemptions,
            steps=record.steps if record is not None else None,
            error=error,
        )

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "error"}


@dataclass
class CheckResult:
    """Summary of one ``check_*`` call.

    ``threads``, ``steps`` and ``decisions`` are the largest seen in one run (``decisions`` counts
    the steps that offered a choice). PCT fills ``n``, ``k``, ``d`` and ``bound`` (the per-run
    probability lower bound ``1/(n*k**(d-1))``); DFS fills ``exhausted`` and
    ``max_preemptions``; stress fills ``runs_to_failure``.
    """

    strategy: str
    seed: int | None
    schedules: int = 0  # runs executed
    failures: int = 0
    failure: Failure | None = None
    threads: int = 0
    steps: int = 0
    decisions: int = 0
    n: int | None = None
    k: int | None = None
    d: int | None = None
    bound: float | None = None
    exhausted: bool | None = None
    max_preemptions: int | None = None
    runs_to_failure: int | None = None

    def observe(self, record: RunRecord) -> None:
        self.threads = max(self.threads, record.threads)
        self.steps = max(self.steps, record.steps)
        self.decisions = max(self.decisions, record.decisions)

    def fail(self, failure: Failure) -> None:
        self.failures += 1
        if self.failure is None:
            self.failure = failure

    def apply(self, summary: dict[str, Any]) -> None:
        known = {f.name for f in fields(self)}
        for key, value in summary.items():
            name = "d" if key == "depth" else key
            if name not in known:
                raise KeyError(f"a strategy reported {key!r}, which CheckResult has no field for")
            setattr(self, name, value)

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["failure"] = self.failure.to_dict() if self.failure is not None else None
        return out
