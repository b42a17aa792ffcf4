"""The baseline: free-running threads with short seeded random sleeps at every point.

This is what a loaded CI runner does by accident (it found upstream issue #9128), done on purpose.
Nothing is controlled: the seed fixes the sleep lengths, not the interleaving, so a failure here
has no schedule to replay. It exists to measure the controlled strategies against.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any

from harness.sched import hooks, points
from harness.sched.errors import ScheduleError, ScheduleFailure, StallError
from harness.sched.points import FREE
from harness.sched.results import CheckResult, Failure
from harness.sched.scheduler import DEFAULT_STALL_TIMEOUT
from harness.sched.strategies import fresh_seed

DEFAULT_MAX_SLEEP = 0.001


class _Adoption:
    __slots__ = ("_ctl", "_id", "_name", "_done")

    def __init__(self, ctl: StressController, tid: int, name: str) -> None:
        self._ctl = ctl
        self._id = tid
        self._name = name
        self._done = False

    def run(self, target: Callable[[], None]) -> None:
        try:
            target()
        except BaseException as exc:  # kept as the run's failure, like a participant's
            self._ctl.record(self._id, self._name, exc)
        finally:
            self._done = True

    def cancel(self) -> None:
        self._done = True

    def finished(self) -> bool:
        return self._done


class StressController:
    """The ``Controller`` of one stress run: every point, in any thread, is a random nap."""

    def __init__(self, seed: str, max_sleep: float) -> None:
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._max_sleep = max_sleep
        self._spawned = 0
        self.points = 0
        self.failures: list[tuple[int, str, BaseException]] = []

    def _nap(self) -> None:
        with self._lock:
            self.points += 1
            delay = self._rng.uniform(0.0, self._max_sleep)
        time.sleep(delay)

    def record(self, tid: int, name: str, exc: BaseException) -> None:
        with self._lock:
            self.failures.append((tid, name, exc))

    def point(self, name: str, context: dict[str, Any]) -> None:
        self._nap()

    def sync(self, name: str, obj: object) -> None:
        self._nap()

    def block(
        self, name: str, obj: object, ready: Callable[[], bool] | None, timeout: float | None
    ) -> int:
        self._nap()
        return FREE

    def adopt(self, thread: threading.Thread) -> _Adoption:
        with self._lock:
            self._spawned += 1
            tid = self._spawned
        return _Adoption(self, tid, thread.name)


def stress(
    fn: Callable[[], Any],
    runs: int = 100,
    seed: int | None = None,
    *,
    max_sleep: float = DEFAULT_MAX_SLEEP,
    stall_timeout: float = DEFAULT_STALL_TIMEOUT,
    raise_on_failure: bool = True,
) -> CheckResult:
    """Run ``fn`` up to ``runs`` times, free-running, with naps at every point; stop at the first
    failure (``runs_to_failure``). The body runs on a thread of its own so that a real deadlock
    becomes a ``StallError`` after ``stall_timeout`` instead of a hang. As under control, the body
    should join the threads whose outcome it cares about: a failure after it returned is not seen.
    """
    if runs < 1:
        raise ValueError(f"runs must be at least 1, not {runs}")
    seed = fresh_seed() if seed is None else seed
    result = CheckResult("stress", seed)
    error: ScheduleError | None = None
    for index in range(runs):
        ctl = StressController(f"stress:{seed}:{index}", max_sleep)
        hooks.run_activate()
        points.activate(ctl)
        try:
            error = _run_body(fn, ctl, stall_timeout)
        finally:
            points.deactivate(ctl)
            hooks.run_deactivate()
        result.schedules = index + 1
        if error is not None:
            error.locate("stress", seed, index, None, None)
            result.runs_to_failure = index + 1
            result.fail(Failure.from_error(error, index, None))
            break
    if error is not None and raise_on_failure:
        error.result = result
        raise error
    return result


def _run_body(
    fn: Callable[[], Any], ctl: StressController, stall_timeout: float
) -> ScheduleError | None:
    outcome: list[BaseException] = []

    def body() -> None:
        try:
            fn()
        except BaseException as exc:  # handed to the caller's thread
            outcome.append(exc)

    thread = threading.Thread(target=body, name="sched-stress-main", daemon=True)
    thread.start()
    thread.join(stall_timeout)
    if thread.is_alive():
        return StallError(
            f"stall: the stress run did not end within {stall_timeout:g} s (stall_timeout); "
            "with nothing controlled, a deadlock is a real one"
        )
    if outcome:
        return ScheduleFailure(outcome[0], 0, "main")
    if ctl.failures:
        tid, name, exc = ctl.failures[0]
        return ScheduleFailure(exc, tid, name)
    return None
