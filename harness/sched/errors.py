"""What a schedule-controlled check raises.

Every error names how it was found (strategy, seed, iteration) and the schedule of the run, in its
message, because the message is often all a CI log keeps: pasting the schedule into ``replay``
reproduces the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.sched.schedule import Schedule


@dataclass(frozen=True)
class ThreadReport:
    """Where one participant stood when a run was declared stuck."""

    id: int
    name: str
    state: str  # "blocked", "ready", "running", "finished"
    at: str  # the point or primitive operation it is stopped at
    detail: str  # the object it waits on, or the point's context
    stack: str  # its Python stack, innermost last, scheduler frames left out

    def describe(self) -> str:
        head = f"  thread #{self.id} {self.name!r} {self.state} at {self.at}"
        if self.detail:
            head += f" ({self.detail})"
        if not self.stack:
            return head
        return head + "\n" + "\n".join("      " + line for line in self.stack.rstrip().splitlines())


class ScheduleError(Exception):
    """Base of every error about a controlled run; carries where the run came from."""

    def __init__(self, message: str, threads: Sequence[ThreadReport] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.threads: tuple[ThreadReport, ...] = tuple(threads)
        self.strategy: str | None = None
        self.seed: int | None = None
        self.iteration: int | None = None
        self.schedule: Schedule | None = None
        self.preemptions: int | None = None
        self.result: Any = None  # the CheckResult of the check that raised it

    def locate(
        self,
        strategy: str,
        seed: int | None,
        iteration: int,
        schedule: Schedule | None,
        preemptions: int | None,
    ) -> None:
        self.strategy = strategy
        self.seed = seed
        self.iteration = iteration
        self.schedule = schedule
        self.preemptions = preemptions

    def __str__(self) -> str:
        text = self.message
        if self.threads:
            text += "\n" + "\n".join(t.describe() for t in self.threads)
        if self.strategy is not None:
            text += f"\n  found by {self.strategy} (seed={self.seed}, iteration={self.iteration})"
            if self.schedule is not None:
                plural = "" if self.preemptions == 1 else "s"
                text += (
                    f", schedule {self.schedule} ({self.preemptions} preemption{plural})"
                    f"\n  reproduce: harness.sched.replay(fn, {str(self.schedule)!r})"
                )
            else:
                text += ": a free-running run, no schedule to replay"
        return text


class DeadlockError(ScheduleError):
    """Every unfinished participant is blocked and none can time out."""


class LivelockError(ScheduleError):
    """The run took more steps than its budget (``max_steps``) without finishing."""


class StallError(ScheduleError):
    """A participant ran for longer than ``stall_timeout`` without reaching a schedule point.

    It is blocked in something the scheduler does not control (a plain ``threading`` primitive,
    I/O, a lock held by a thread outside the run) or computing for far too long. Nothing can
    interrupt it: when it does come back, the run is over and it carries on uncontrolled."""


class NondeterminismError(ScheduleError):
    """The run did not follow the schedule it was given: the body depends on more than it."""


class ScheduleFailure(ScheduleError):
    """An exception raised by the body or a participant thread; the original is ``__cause__``."""

    def __init__(self, original: BaseException, thread_id: int, thread_name: str) -> None:
        super().__init__(
            f"{type(original).__name__}: {original} (in thread #{thread_id} {thread_name!r})"
        )
        self.original = original
        self.thread_id = thread_id
        self.thread_name = thread_name
        self.__cause__ = original


class Abandoned(BaseException):
    """Raised inside participants of a run that is being discarded (after a failure), so that
    their threads unwind and exit instead of running on uncontrolled. A ``BaseException`` so that
    ``except Exception`` in the code under test does not swallow it."""
