"""Scenarios under schedule control: one variant, many interleavings, one reproducible verdict.

A race (upstream issue #9128) only shows when the executor thread is slow in the right place, so a
plain run of ``race-on-handles`` says little either way. Its variant runs instead under a
``harness.sched`` strategy: every run is a new interleaving of the caller and the executor
thread, chosen at the runtime's schedule points, and every run is reproducible from the strategy
and seed (or the schedule string) alone. A scenario opts in with ``Scenario.explore``; ``xharness
repro --explore`` or ``--schedule`` apply it to any scenario.

Budgets: an injected run stops at the first failing schedule; a fixed run explores the whole budget
(DFS: its whole preemption-bounded space) and must not fail once. The budgets keep a fixed run of
``race-on-handles`` near half a second; ``xharness bench race`` explores far more.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import sched
from harness.sched.schedule import VERSION

STRATEGIES = ("random", "pct", "dfs", "hypothesis", "stress")


@dataclass(frozen=True)
class Exploration:
    """How a variant is explored: a strategy and its budget.

    ``iterations`` counts runs (random, pct, stress) or examples (hypothesis); DFS is bounded by
    ``max_preemptions`` and, if set, ``max_schedules`` instead. A replay (``schedule``) is one run.
    """

    strategy: str = "pct"
    iterations: int = 20
    depth: int = 3  # pct: the bug depth it aims at
    max_preemptions: int = 2  # dfs
    max_schedules: int | None = None  # dfs: None covers the bounded space
    schedule: str | None = None  # replay exactly this schedule instead of exploring

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {self.strategy!r}; known: {', '.join(STRATEGIES)}")
        if self.schedule is not None:
            sched.Schedule.parse(self.schedule)  # refused here, before anything runs

    @property
    def name(self) -> str:
        return "replay" if self.schedule is not None else self.strategy


#: each strategy's own default budget
_DEFAULTS = {
    "random": Exploration("random", iterations=20),
    "pct": Exploration("pct", iterations=20),
    "dfs": Exploration("dfs"),
    "hypothesis": Exploration("hypothesis", iterations=100),
    "stress": Exploration("stress", iterations=100),
}


def default(strategy: str) -> Exploration:
    try:
        return _DEFAULTS[strategy]
    except KeyError:
        raise ValueError(f"unknown strategy {strategy!r}; known: {', '.join(STRATEGIES)}") from None


def resolve(
    scenario_default: Exploration | None, strategy: str | None, schedule: str | None
) -> Exploration | None:
    """What a run uses: a schedule to replay, else the strategy asked for (with its default
    budget), else the scenario's own exploration (None: a plain, uncontrolled run)."""
    if schedule is not None:
        return Exploration(schedule=schedule)
    if strategy is not None:
        return default(strategy)
    return scenario_default


def read_schedule(value: str) -> str:
    """``--schedule``'s argument: a schedule string, or a file holding one (the first line that is
    one, so a saved failure report works too). Raises ``ValueError`` naming what is wrong."""
    text = value.strip()
    path = Path(value)
    if not text.startswith(f"{VERSION}:") and not path.is_file():
        if re.match(r"s[0-9]+:", text):  # a schedule of another version: say so
            return str(sched.Schedule.parse(text))
        raise ValueError(
            f"--schedule {value!r} is neither a schedule (like 's1:0x3.1') nor a readable file"
        )
    if not text.startswith(f"{VERSION}:"):
        lines = [ln.strip() for ln in path.read_text().splitlines()]
        found = next((ln for ln in lines if ln.startswith(f"{VERSION}:")), None)
        if found is None:
            raise ValueError(f"{value}: no line holds a schedule ('{VERSION}:...')")
        text = found
    return str(sched.Schedule.parse(text))


@dataclass
class Explored:
    """What one exploration of one variant found."""

    strategy: str  # "replay" for a --schedule run
    seed: int | None
    schedules: int  # runs made (hypothesis: examples, shrinking included)
    failure: BaseException | None = None  # what the failing run raised (the body's own error)
    error: sched.ScheduleError | None = None  # the scheduler's report of that run
    schedule: str | None = None  # of the failing run (None for stress: nothing to replay)
    preemptions: int | None = None
    exhausted: bool | None = None  # dfs: the bounded space was covered
    detail: dict[str, Any] | None = None  # the strategy's own figures (pct: n, k, d, bound)

    @property
    def harness_error(self) -> bool:
        """The run did not fail in the variant but in the scheduling: a deadlock, livelock,
        stall or a body that does not follow its schedule."""
        return self.error is not None and not isinstance(self.error, sched.ScheduleFailure)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "strategy": self.strategy,
            "seed": self.seed,
            "schedules": self.schedules,
            "schedule": self.schedule,
            "preemptions": self.preemptions,
        }
        if self.exhausted is not None:
            out["exhausted"] = self.exhausted
        if self.detail:
            out.update(self.detail)
        return out

    def describe(self) -> str:
        """One line for a human: how it was found, or how much was explored."""
        what = f"{self.strategy}" + (f" (seed {self.seed})" if self.seed is not None else "")
        if self.failure is None and self.error is None:
            tail = ", bounded space exhausted" if self.exhausted else ""
            plural = "" if self.schedules == 1 else "s"
            return f"{what}: {self.schedules} schedule{plural}, no failure{tail}"
        where = f"run {self.schedules}"
        if self.schedule is None:
            return f"{what}: failed at {where} (free-running: no schedule to replay)"
        plural = "" if self.preemptions == 1 else "s"
        return f"{what}: failed at {where}, schedule {self.schedule} ({self.preemptions} preemption{plural})"


def run(body: Callable[[], None], exploration: Exploration, seed: int) -> Explored:
    """Explore ``body`` (called afresh for every run) as ``exploration`` says, up to the first
    failing run: the one an injected run wants, and the one that fails a fixed run."""
    x = exploration
    if x.schedule is not None:
        result = sched.replay(body, x.schedule, raise_on_failure=False)
    elif x.strategy == "random":
        result = sched.check_random(body, x.iterations, seed, raise_on_failure=False)
    elif x.strategy == "pct":
        result = sched.check_pct(body, x.iterations, x.depth, seed, raise_on_failure=False)
    elif x.strategy == "dfs":
        result = sched.check_dfs(body, x.max_preemptions, x.max_schedules, raise_on_failure=False)
    elif x.strategy == "hypothesis":
        result = sched.check_hypothesis(body, x.iterations, seed, raise_on_failure=False)
    else:
        result = sched.stress(body, x.iterations, seed, raise_on_failure=False)
    return _explored(result, x)


def _explored(result: sched.CheckResult, x: Exploration) -> Explored:
    detail: dict[str, Any] = {}
    if result.strategy == "pct":
        detail = {"n": result.n, "k": result.k, "d": result.d, "bound": result.bound}
    elif result.strategy == "dfs":
        detail = {"max_preemptions": result.max_preemptions}
    out = Explored(
        strategy=x.name,
        seed=result.seed,
        schedules=result.schedules,
        exhausted=result.exhausted,
        detail=detail,
    )
    failure = result.failure
    if failure is None:
        return out
    error = failure.error
    out.error = error
    out.failure = error.original if isinstance(error, sched.ScheduleFailure) else None
    out.schedule = failure.schedule
    out.preemptions = failure.preemptions
    return out
