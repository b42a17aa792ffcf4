"""The strategies: which thread runs at each step, over how many runs.

Random and PCT sample schedules; DFS enumerates them under a preemption bound; replay follows one
recorded schedule; the hypothesis policy draws every choice from hypothesis, which can then shrink
a failing schedule. All of them are deterministic given their seed (or schedule, or hypothesis
data), which is what makes a reported failure reproducible.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.sched.errors import NondeterminismError
from harness.sched.schedule import Schedule, as_schedule
from harness.sched.scheduler import Decision, RunRecord, Strategy

if TYPE_CHECKING:
    from hypothesis.strategies import DataObject, SearchStrategy


def fresh_seed() -> int:
    """A seed for a caller who gave none; every result reports it, so it can be given next time."""
    return random.SystemRandom().randrange(2**32)


class RandomStrategy(Strategy):
    """Uniform choice among the threads that can run, at every step."""

    name = "random"

    def __init__(self, iterations: int = 100, seed: int | None = None) -> None:
        if iterations < 1:
            raise ValueError(f"iterations must be at least 1, not {iterations}")
        self.iterations = iterations
        self.seed = fresh_seed() if seed is None else seed
        self._rng = random.Random()

    def start_run(self, index: int) -> bool:
        if index >= self.iterations:
            return False
        # one stream per run, so that iteration i can be reproduced without the ones before it
        self._rng = random.Random(f"random:{self.seed}:{index}")
        return True

    def choose(self, decision: Decision) -> int:
        enabled = decision.enabled
        return enabled[0] if len(enabled) == 1 else self._rng.choice(enabled)


class PCTStrategy(Strategy):
    """Probabilistic concurrency testing (Burckhardt et al., ASPLOS 2010).

    Every thread gets a distinct random priority (a new thread a random one, so it lands anywhere
    among the others) and the highest-priority thread that can run always runs. ``depth - 1``
    change points are drawn among the first ``k`` decisions; at the i-th, the thread that just ran
    drops to priority ``i``, below every initial priority. A bug of depth ``d`` (``d`` ordering
    constraints) in a program of ``n`` threads and ``k`` decisions is then found by a single run
    with probability at least ``1 / (n * k**(d-1))``.

    As in shuttle, ``k`` counts only steps that offered a choice, and is not known in advance: the
    first run uses ``steps_hint``, later ones the largest count seen so far. Threads blocked in a
    wait with a timeout are chosen (to time out) only when no thread is ready.
    """

    name = "pct"

    def __init__(
        self,
        iterations: int = 100,
        depth: int = 3,
        seed: int | None = None,
        steps_hint: int = 20,
    ) -> None:
        if iterations < 1:
            raise ValueError(f"iterations must be at least 1, not {iterations}")
        if depth < 1:
            raise ValueError(f"depth must be at least 1, not {depth}")
        if steps_hint < 1:
            raise ValueError(f"steps_hint must be at least 1, not {steps_hint}")
        self.iterations = iterations
        self.depth = depth
        self.seed = fresh_seed() if seed is None else seed
        self.k = steps_hint  # the estimate the next run places its change points in
        self.max_decisions = 0
        self.max_threads = 0
        self._rng = random.Random()
        self._priority: dict[int, float] = {}
        self._change_rank: dict[int, int] = {}
        self._decisions = 0

    def start_run(self, index: int) -> bool:
        if index >= self.iterations:
            return False
        self._rng = random.Random(f"pct:{self.seed}:{index}")
        self._priority = {}
        changes = sorted(self._rng.sample(range(1, self.k + 1), min(self.depth - 1, self.k)))
        self._change_rank = {step: rank for rank, step in enumerate(changes, start=1)}
        self._decisions = 0
        return True

    def _fresh_priority(self) -> float:
        taken = set(self._priority.values())
        while True:
            value = self.depth + self._rng.random()  # above every change-point priority
            if value not in taken:
                return value

    def choose(self, decision: Decision) -> int:
        for tid in range(len(self._priority), decision.threads):
            self._priority[tid] = self._fresh_priority()
        enabled = decision.enabled
        if len(enabled) == 1:
            return enabled[0]
        self._decisions += 1
        rank = self._change_rank.get(self._decisions)
        if rank is not None and decision.current is not None:
            self._priority[decision.current] = float(rank)
        pool = decision.ready or decision.timeouts
        return max(pool, key=self._priority.__getitem__)

    def end_run(self, record: RunRecord) -> None:
        self.max_decisions = max(self.max_decisions, record.decisions)
        self.max_threads = max(self.max_threads, record.threads)
        self.k = max(self.max_decisions, 1)

    def bound(self) -> float:
        """The per-run lower bound on finding a depth-``d`` bug, from the largest n and k seen."""
        n = max(self.max_threads, 1)
        k = max(self.max_decisions, 1)
        return 1.0 / (n * float(k) ** (self.depth - 1))

    def summary(self) -> dict[str, Any]:
        return {
            "n": self.max_threads,
            "k": self.max_decisions,
            "depth": self.depth,
            "bound": self.bound(),
        }


@dataclass
class _Level:
    options: tuple[int, ...]  # in Decision.ordered order
    allowed: int  # how many of them the preemption bound lets this level try
    index: int  # the one the current run takes


class DFSStrategy(Strategy):
    """Every schedule with at most ``max_preemptions`` preemptions, depth first (as CHESS).

    A preemption is a switch away from a thread that could have gone on; switches at blocking
    points and thread ends are free. Each run replays the choices of the previous one up to the
    deepest level with an untried option, takes that option, then always takes the first allowed
    (non-preemptive) one. The body must be deterministic given the schedule, since it is run
    again from the start for each schedule; a run that offers different choices on a replayed
    prefix raises ``NondeterminismError``.
    """

    name = "dfs"

    def __init__(self, max_preemptions: int | None = 2, max_schedules: int | None = None) -> None:
        if max_preemptions is not None and max_preemptions < 0:
            raise ValueError(f"max_preemptions must be >= 0 or None, not {max_preemptions}")
        if max_schedules is not None and max_schedules < 1:
            raise ValueError(f"max_schedules must be at least 1 or None, not {max_schedules}")
        self.max_preemptions = max_preemptions
        self.max_schedules = max_schedules
        self.exhausted = False
        self._levels: list[_Level] = []
        self._pos = 0
        self._preemptions = 0

    def start_run(self, index: int) -> bool:
        if index > 0:
            levels = self._levels
            while levels and levels[-1].index + 1 >= levels[-1].allowed:
                levels.pop()
            if not levels:
                self.exhausted = True
                return False
            levels[-1].index += 1
        if self.max_schedules is not None and index >= self.max_schedules:
            return False
        self._pos = 0
        self._preemptions = 0
        return True

    def choose(self, decision: Decision) -> int:
        order = decision.ordered
        if self._pos < len(self._levels):
            level = self._levels[self._pos]
            if level.options != order:
                raise NondeterminismError(
                    f"step {decision.step} offered threads {order}, but the same choices before it "
                    f"offered {level.options} in an earlier run: the body must be deterministic "
                    "given the schedule"
                )
            choice = order[level.index]
        else:
            bound = self.max_preemptions
            preemptive = decision.current is not None and decision.current in decision.ready
            allowed = (
                1 if preemptive and bound is not None and self._preemptions >= bound else len(order)
            )
            self._levels.append(_Level(order, allowed, 0))
            choice = order[0]
        self._pos += 1
        if decision.preempts(choice):
            self._preemptions += 1
        return choice

    def end_run(self, record: RunRecord) -> None:
        if record.failure is None and record.error is None and self._pos < len(self._levels):
            raise NondeterminismError(
                f"the run ended after {self._pos} steps where an earlier run with the same choices "
                f"went on for {len(self._levels)}: the body must be deterministic given the "
                "schedule"
            )

    def summary(self) -> dict[str, Any]:
        return {"exhausted": self.exhausted, "max_preemptions": self.max_preemptions}


class ReplayStrategy(Strategy):
    """Exactly the given schedule, once; any departure is a ``NondeterminismError``."""

    name = "replay"

    def __init__(self, schedule: Schedule | str) -> None:
        self.schedule = as_schedule(schedule)
        self._length = len(self.schedule)
        self._choices = iter(self.schedule)
        self._pos = 0

    def start_run(self, index: int) -> bool:
        if index > 0:
            return False
        self._choices = iter(self.schedule)
        self._pos = 0
        return True

    def choose(self, decision: Decision) -> int:
        choice = next(self._choices, None)
        if choice is None:
            raise NondeterminismError(
                f"the schedule {self.schedule} ends after {self._length} steps, but the run goes "
                f"on ({decision.enabled} could run)"
            )
        if choice not in decision.enabled:
            raise NondeterminismError(
                f"step {decision.step} of {self.schedule}: the schedule chooses thread {choice}, "
                f"but only {decision.enabled} can run"
            )
        self._pos += 1
        return choice

    def end_run(self, record: RunRecord) -> None:
        if record.failure is None and record.error is None and self._pos < self._length:
            raise NondeterminismError(
                f"the run ended after {self._pos} steps; the schedule {self.schedule} has "
                f"{self._length}"
            )


class HypothesisPolicy(Strategy):
    """Draws every choice from hypothesis data, so that hypothesis can shrink schedules.

    At each step with more than one choice it draws an integer ``i`` in ``[0, threads]``: 0 means
    the default, non-preemptive choice (``Decision.ordered[0]``: the thread that ran last if it can
    go on), ``i > 0`` means thread ``i - 1`` if that one can run, else the default. Hypothesis
    shrinks integers towards 0, so every draw it zeroes removes a switch, and naming threads by id
    (rather than by position among the runnable ones) keeps the remaining draws meaning the same
    threads when a shrink shifts the steps they land on. Steps with a single choice draw nothing.
    Obtain one from ``hypothesis_schedules()`` inside ``@given`` and pass it to ``check``; each
    ``check`` is one run.
    """

    name = "hypothesis"

    def __init__(self, data: DataObject) -> None:
        self._data = data
        self.last: RunRecord | None = None

    def start_run(self, index: int) -> bool:
        return index == 0

    def choose(self, decision: Decision) -> int:
        order = decision.ordered
        if len(order) == 1:
            return order[0]
        from hypothesis import strategies as st

        pick = self._data.draw(
            st.integers(0, decision.threads), label=f"step {decision.step}, runnable {order}"
        )
        return pick - 1 if pick and pick - 1 in order else order[0]

    def end_run(self, record: RunRecord) -> None:
        self.last = record

    def __repr__(self) -> str:
        if self.last is None:
            return "HypothesisPolicy()"
        return f"HypothesisPolicy(schedule={str(self.last.schedule)!r})"


def hypothesis_schedules() -> SearchStrategy[HypothesisPolicy]:
    """A hypothesis strategy whose values are schedule policies drawing from the example's data.

    Combine it with other strategies in ``@given`` and run the body with ``check(fn, policy)``;
    a failure raises ``ScheduleFailure`` and hypothesis shrinks towards fewer preemptions.
    """
    from hypothesis import strategies as st

    @st.composite
    def policies(draw: st.DrawFn) -> HypothesisPolicy:
        # st.data() is hypothesis' public way of drawing lazily, during the test: the run decides
        # how many choices it needs as it goes
        return HypothesisPolicy(draw(st.data()))

    return policies()
