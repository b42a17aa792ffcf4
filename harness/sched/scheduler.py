"""The controlled run: participants take turns, and a strategy picks every turn.

One ``Engine`` drives one run. The thread that called ``check_*`` supervises: the test body runs on
a thread of its own (participant 0) and every ``sched.Thread`` a participant starts becomes the next
participant. Exactly one participant runs at a time; when it reaches a schedule point it parks and
hands control back, the supervisor asks the strategy which thread goes next and wakes that one.
Deciding on the supervising thread (rather than on whichever participant happened to stop) keeps
strategies single-threaded, and lets a strategy draw from hypothesis, whose state is per thread.

A participant about to block (an unset event, a held lock, an empty queue) parks with a predicate
instead of blocking: it can be chosen once the predicate holds, or, if it waits with a timeout, be
chosen to time out. When nothing can be chosen the run is a deadlock; when it exceeds its step
budget, a livelock; when the running participant does not come back within ``stall_timeout``, it
is blocked outside the scheduler's view (a stall). None of these can hang the caller.

A run ends when the body returns. Participants still parked then (an idle worker waiting for
jobs) are *released*: they carry on uncontrolled, their blocking operations becoming the real ones.
A run that fails instead *abandons* its participants: each one parked raises ``Abandoned`` at its
point and unwinds, so that nothing of a failed run keeps running into the next.
"""

from __future__ import annotations

import contextvars
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any

from harness.sched import points
from harness.sched.errors import (
    Abandoned,
    DeadlockError,
    LivelockError,
    ScheduleError,
    StallError,
    ThreadReport,
)
from harness.sched.points import FREE, READY, TIMEOUT
from harness.sched.schedule import Schedule

DEFAULT_MAX_STEPS = 10_000
DEFAULT_STALL_TIMEOUT = 60.0  # generous: a participant may compile an XLA program on its turn

_PARKED, _RUNNING, _FINISHED = "parked", "running", "finished"
_NEW, _ACTIVE, _RELEASED, _ABORTING, _DONE = "new", "active", "released", "aborting", "done"
_UNWIND_WAIT = 10.0  # how long a discarded run waits for its participants to unwind


class Decision:
    """What a strategy sees at one step.

    ``ready`` threads can proceed; ``timeouts`` are blocked in a wait with a timeout, so choosing
    one makes its wait expire. ``ordered`` lists every choice with the non-preemptive one first
    (the thread that ran last, when it can go on), then the rest by id: strategies that prefer
    index 0 prefer fewer preemptions.
    """

    __slots__ = ("step", "current", "ready", "timeouts", "enabled", "ordered", "threads")

    def __init__(
        self,
        step: int,
        current: int | None,
        ready: tuple[int, ...],
        timeouts: tuple[int, ...],
        threads: int,
    ) -> None:
        self.step = step
        self.current = current
        self.ready = ready
        self.timeouts = timeouts
        self.threads = threads
        self.enabled = tuple(sorted(ready + timeouts))
        if current is not None and current in ready:
            self.ordered = (current, *(t for t in self.enabled if t != current))
        else:
            self.ordered = self.enabled

    def preempts(self, choice: int) -> bool:
        """Switching to ``choice`` takes the processor from a thread that could have gone on."""
        return self.current is not None and choice != self.current and self.current in self.ready

    def __repr__(self) -> str:
        return (
            f"Decision(step={self.step}, current={self.current}, ready={self.ready}, "
            f"timeouts={self.timeouts})"
        )


@dataclass
class RunRecord:
    """The outcome of one controlled run."""

    schedule: Schedule
    steps: int
    decisions: int  # steps that offered more than one choice
    preemptions: int
    threads: int
    failure: BaseException | None = None  # raised by the body or a participant
    failed_thread: tuple[int, str] | None = None
    error: ScheduleError | None = None  # deadlock, livelock, stall, nondeterminism


class Strategy:
    """Picks the thread to run at every step, over one or more runs."""

    name = "strategy"
    seed: int | None = None

    def start_run(self, index: int) -> bool:
        """Prepare run ``index`` (0-based); False when there is nothing more to explore."""
        raise NotImplementedError

    def choose(self, decision: Decision) -> int:
        """One of ``decision.enabled``."""
        raise NotImplementedError

    def end_run(self, record: RunRecord) -> None:
        """Learn from a finished run (PCT's step estimate, DFS's backtracking)."""

    def summary(self) -> dict[str, Any]:
        """Strategy-specific fields for the check's result."""
        return {}


class _Task:
    """A participant. Every field is read and written under the engine's lock."""

    __slots__ = (
        "engine",
        "id",
        "name",
        "thread",
        "ident",
        "state",
        "at",
        "obj",
        "context",
        "ready",
        "timed",
        "strict",
        "grant",
        "released",
        "abandoned",
        "cond",
    )

    def __init__(self, engine: Engine, tid: int, name: str, thread: threading.Thread | None):
        self.engine = engine
        self.id = tid
        self.name = name
        self.thread = thread
        self.ident: int | None = None
        self.state = _PARKED  # a new thread is parked at its start until first chosen
        self.at = "start"
        self.obj: object = None
        self.context: dict[str, Any] | None = None
        self.ready: Callable[[], bool] | None = None
        self.timed = False
        self.strict = True
        self.grant: int | None = None
        self.released = False
        self.abandoned = False
        self.cond = threading.Condition(engine._lock)


class _Adoption:
    __slots__ = ("_engine", "_task")

    def __init__(self, engine: Engine, task: _Task) -> None:
        self._engine = engine
        self._task = task

    def run(self, target: Callable[[], None]) -> None:
        self._engine._participate(self._task, target)

    def cancel(self) -> None:
        with self._engine._lock:
            self._task.state = _FINISHED

    def finished(self) -> bool:
        return self._task.state == _FINISHED


class Engine:
    """One controlled run (see the module docstring); also the active ``Controller``."""

    def __init__(
        self,
        strategy: Strategy,
        *,
        max_steps: int = DEFAULT_MAX_STEPS,
        stall_timeout: float = DEFAULT_STALL_TIMEOUT,
    ) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, not {max_steps}")
        if stall_timeout <= 0:
            raise ValueError(f"stall_timeout must be positive, not {stall_timeout}")
        self._strategy = strategy
        self._max_steps = max_steps
        self._stall = stall_timeout
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)  # the supervisor waits on it
        self._tasks: list[_Task] = []
        self._running: _Task | None = None
        self._state = _NEW
        self._choices: list[int] = []
        self._decisions = 0
        self._preemptions = 0
        self._last: int | None = None
        self._failure: tuple[_Task, BaseException] | None = None

    # ------------------------------------------------------------------ the Controller protocol

    def _me(self) -> _Task | None:
        task: _Task | None = getattr(points.participants, "task", None)
        if task is None or task.engine is not self:
            return None
        return task

    def point(self, name: str, context: dict[str, Any]) -> None:
        task = self._me()
        if task is not None:
            self._park(task, name, None, context, None, False, True)

    def sync(self, name: str, obj: object) -> None:
        task = self._me()
        if task is not None:
            self._park(task, name, obj, None, None, False, False)

    def block(
        self, name: str, obj: object, ready: Callable[[], bool] | None, timeout: float | None
    ) -> int:
        task = self._me()
        if task is None:
            return FREE
        if timeout is not None and timeout <= 0:  # a poll: a plain point, then a look
            if self._park(task, name, obj, None, None, False, True) == FREE:
                return FREE
            return READY if ready is None or ready() else TIMEOUT
        return self._park(task, name, obj, None, ready, timeout is not None, True)

    def adopt(self, thread: threading.Thread) -> _Adoption | None:
        if self._me() is None:
            return None  # started by a thread outside the run: an ordinary thread
        with self._lock:
            if self._state != _ACTIVE:
                return None
            task = self._add_task(thread.name, thread)
        return _Adoption(self, task)

    def controls_caller(self) -> bool:
        task = self._me()
        return task is not None and self._state == _ACTIVE and not task.released

    def caller_id(self) -> int | None:
        task = self._me()
        return task.id if task is not None else None

    # ------------------------------------------------------------------ participant side

    def _add_task(self, name: str, thread: threading.Thread | None) -> _Task:
        task = _Task(self, len(self._tasks), name, thread)
        self._tasks.append(task)
        return task

    def _park(
        self,
        task: _Task,
        at: str,
        obj: object,
        context: dict[str, Any] | None,
        ready: Callable[[], bool] | None,
        timed: bool,
        strict: bool,
    ) -> int:
        with self._lock:
            if self._state != _ACTIVE or task.released:
                if strict and task.abandoned:
                    raise Abandoned()
                return FREE
            if self._running is not task:  # only the running participant can reach a point
                raise RuntimeError(f"thread #{task.id} {task.name!r} reached {at} out of turn")
            task.at, task.obj, task.context = at, obj, context
            task.ready, task.timed, task.strict = ready, timed, strict
            task.state = _PARKED
            self._running = None
            self._wake.notify()
            return self._await_turn(task)

    def _await_turn(self, task: _Task) -> int:
        """Wait (lock held) until the supervisor grants a turn, releases or abandons the task.

        The wait is bounded: when the supervisor has made no step for far longer than it would
        itself wait for a participant, it is gone, and hanging here would hide that."""
        limit = self._stall * 2 + 5
        seen, since = len(self._choices), time.monotonic()
        while True:
            grant = task.grant
            if grant is not None:
                task.grant = None
                task.state = _RUNNING
                task.ready = task.obj = task.context = None
                return grant
            if task.abandoned:
                if task.strict:
                    raise Abandoned()
                return FREE  # finish the operation (a release, a set), then unwind at the next
            if task.released:
                return FREE
            task.cond.wait(limit)
            if len(self._choices) != seen:
                seen, since = len(self._choices), time.monotonic()
            elif time.monotonic() - since > limit and task.grant is None:
                raise StallError(
                    f"thread #{task.id} {task.name!r} waited {limit:g} s at {task.at} for a turn "
                    "that never came: the supervising check stopped without ending the run"
                )

    def _participate(self, task: _Task, target: Callable[[], Any]) -> None:
        """The whole life of a participant thread: wait for a first turn, run, report the end."""
        points.participants.task = task
        error: BaseException | None = None
        try:
            with self._lock:
                task.ident = threading.get_ident()
                self._await_turn(task)
            target()
        except Abandoned:
            pass
        except BaseException as exc:  # reported as the run's failure (or re-raised below)
            error = exc
        finally:
            points.participants.task = None
        if not self._finish(task, error) and error is not None and not task.abandoned:
            raise error  # a released thread failing on its own: threading's excepthook says so
        # (a thread of a torn-down run that fails while it unwinds is that run's failure going on:
        # the run has reported its own, and the rest would only reach the excepthook as noise)

    def _finish(self, task: _Task, error: BaseException | None) -> bool:
        """Mark the task done; True when that happened on its turn in the live run."""
        with self._lock:
            task.state = _FINISHED
            if self._state != _ACTIVE or self._running is not task:
                return False
            if error is not None and self._failure is None:
                self._failure = (task, error)
            self._running = None
            self._wake.notify()
            return True

    # ------------------------------------------------------------------ supervisor side

    def run(self, fn: Callable[[], Any]) -> RunRecord:
        """Run ``fn`` under control on a new participant thread; the caller supervises."""
        if self._state != _NEW:
            raise RuntimeError("an Engine runs once")
        body = self._add_task("main", None)
        context = contextvars.copy_context()  # the body sees the caller's context variables
        thread = threading.Thread(
            target=self._participate,
            args=(body, lambda: context.run(fn)),
            name="sched-main",
            daemon=True,
        )
        body.thread = thread
        points.activate(self)
        self._state = _ACTIVE
        clean = False
        error: ScheduleError | None = None
        try:
            thread.start()
            clean = self._supervise(body)
        except ScheduleError as exc:
            error = exc
        finally:
            self._end(clean)
        failed = self._failure
        return RunRecord(
            schedule=Schedule.from_choices(self._choices),
            steps=len(self._choices),
            decisions=self._decisions,
            preemptions=self._preemptions,
            threads=len(self._tasks),
            failure=failed[1] if failed else None,
            failed_thread=(failed[0].id, failed[0].name) if failed else None,
            error=error,
        )

    def _supervise(self, body: _Task) -> bool:
        """Hand out turns until the body finishes (True) or a participant fails (False)."""
        strategy = self._strategy
        with self._lock:
            while True:
                self._await_parked()
                if self._failure is not None:
                    return False
                if body.state == _FINISHED:
                    return True
                decision = self._decision()
                if not decision.enabled:
                    raise DeadlockError(
                        "deadlock: every unfinished thread is blocked", self._reports()
                    )
                if decision.step >= self._max_steps:
                    raise LivelockError(
                        f"livelock: the run did not end within max_steps={self._max_steps} steps",
                        self._reports(),
                    )
                choice = strategy.choose(decision)
                if choice not in decision.enabled:
                    raise ScheduleError(
                        f"the {strategy.name} strategy chose thread {choice} at step "
                        f"{decision.step}; the choices were {decision.enabled}"
                    )
                if len(decision.enabled) > 1:
                    self._decisions += 1
                if decision.preempts(choice):
                    self._preemptions += 1
                self._choices.append(choice)
                self._last = choice
                task = self._tasks[choice]
                task.grant = READY if choice in decision.ready else TIMEOUT
                self._running = task
                task.cond.notify()

    def _await_parked(self) -> None:
        running = self._running
        if running is None:
            return
        deadline = time.monotonic() + self._stall
        while self._running is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise StallError(
                    f"stall: thread #{running.id} {running.name!r} ran for {self._stall:g} s "
                    "(stall_timeout) without reaching a schedule point; it is blocked in "
                    "something the scheduler does not control, or far too slow",
                    self._reports(),
                )
            self._wake.wait(remaining)

    def _decision(self) -> Decision:
        ready: list[int] = []
        timeouts: list[int] = []
        for task in self._tasks:
            if task.state != _PARKED:
                continue
            if task.ready is None or task.ready():
                ready.append(task.id)
            elif task.timed:
                timeouts.append(task.id)
        return Decision(
            len(self._choices), self._last, tuple(ready), tuple(timeouts), len(self._tasks)
        )

    def _end(self, clean: bool) -> None:
        """Release (clean end) or abandon (failure) every participant, then deactivate."""
        with self._lock:
            self._state = _RELEASED if clean else _ABORTING
            for task in self._tasks:
                if task.state == _FINISHED:
                    continue
                if clean:
                    task.released = True
                else:
                    task.abandoned = True
                task.cond.notify()
        if not clean:
            # keep controlling while they unwind, so that a blocking call on the way out raises
            # again instead of blocking for real
            deadline = time.monotonic() + min(self._stall, _UNWIND_WAIT)
            me = threading.current_thread()
            for task in list(self._tasks):
                thread = task.thread
                if thread is not None and thread is not me and thread.ident is not None:
                    threading.Thread.join(thread, max(deadline - time.monotonic(), 0))
        with self._lock:
            self._state = _DONE if not clean else _RELEASED
        points.deactivate(self)

    def _reports(self) -> list[ThreadReport]:
        """Where every unfinished participant is, for a deadlock, livelock or stall message."""
        frames = sys._current_frames()
        reports = []
        for task in self._tasks:
            if task.state == _FINISHED:
                continue
            if task.state == _RUNNING:
                state = "running"
            elif task.ready is None or task.ready():
                state = "ready"
            else:
                state = "blocked"
            if task.obj is not None:
                detail = f"on {task.obj!r}"
            else:
                detail = ", ".join(f"{k}={v!r}" for k, v in (task.context or {}).items())
            if state == "blocked" and task.timed:
                detail += ", with a timeout"
            frame = frames.get(task.ident) if task.ident is not None else None
            at = "(running)" if state == "running" else task.at
            reports.append(ThreadReport(task.id, task.name, state, at, detail, _stack(frame)))
        return reports


_HERE = os.path.dirname(os.path.abspath(__file__))
_THREADING = os.path.abspath(threading.__file__)


def _stack(frame: FrameType | None) -> str:
    """The thread's stack without the scheduler's and threading's own frames."""
    if frame is None:
        return ""
    summary = traceback.extract_stack(frame)
    kept = [
        f
        for f in summary
        if os.path.dirname(os.path.abspath(f.filename)) != _HERE
        and os.path.abspath(f.filename) != _THREADING
    ]
    return "".join(traceback.format_list(kept))


def is_controlled() -> bool:
    """Whether the calling thread is a participant of a live controlled run."""
    ctl = points.controller
    return isinstance(ctl, Engine) and ctl.controls_caller()


def thread_id() -> int | None:
    """The calling participant's id in the schedule (0 for the body), None outside a run."""
    ctl = points.controller
    return ctl.caller_id() if isinstance(ctl, Engine) else None
