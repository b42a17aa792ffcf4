"""The ``check_*`` entry points: a strategy, a body, as many controlled runs as it asks for.

Every check stops at the first failing run. By default it raises the failure (a ``ScheduleError``
naming strategy, seed, iteration and schedule, with the ``CheckResult`` as ``.result``);
``raise_on_failure=False`` returns the result with the failure recorded instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.sched import hooks
from harness.sched.errors import NondeterminismError, ScheduleError, ScheduleFailure
from harness.sched.results import CheckResult, Failure
from harness.sched.schedule import Schedule
from harness.sched.scheduler import DEFAULT_MAX_STEPS, DEFAULT_STALL_TIMEOUT, Engine, Strategy
from harness.sched.strategies import (
    DFSStrategy,
    PCTStrategy,
    RandomStrategy,
    ReplayStrategy,
    fresh_seed,
    hypothesis_schedules,
)

Body = Callable[[], Any]


def check(
    fn: Body,
    strategy: Strategy,
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
    stall_timeout: float = DEFAULT_STALL_TIMEOUT,
    raise_on_failure: bool = True,
) -> CheckResult:
    """Run ``fn`` under ``strategy`` until it has nothing more to explore or a run fails.

    ``fn`` is called afresh for each run and should build its own state, since the runs must not
    influence each other. Activation hooks run around every run.
    """
    result = CheckResult(strategy.name, strategy.seed)
    error: ScheduleError | None = None
    index = 0
    while error is None and strategy.start_run(index):
        hooks.run_activate()
        try:
            record = Engine(strategy, max_steps=max_steps, stall_timeout=stall_timeout).run(fn)
            error = record.error
            try:
                strategy.end_run(record)
            except NondeterminismError as exc:
                error = error or exc
        finally:
            hooks.run_deactivate()
        result.observe(record)
        if error is None and record.failure is not None:
            assert record.failed_thread is not None
            error = ScheduleFailure(record.failure, *record.failed_thread)
        if error is not None:
            error.locate(strategy.name, strategy.seed, index, record.schedule, record.preemptions)
            result.fail(Failure.from_error(error, index, record))
        index += 1
    result.schedules = index
    result.apply(strategy.summary())
    if error is not None and raise_on_failure:
        error.result = result
        raise error
    return result


def check_random(
    fn: Body,
    iterations: int = 100,
    seed: int | None = None,
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
    stall_timeout: float = DEFAULT_STALL_TIMEOUT,
    raise_on_failure: bool = True,
) -> CheckResult:
    """``iterations`` runs, each choosing uniformly among the runnable threads at every step."""
    return check(
        fn,
        RandomStrategy(iterations, seed),
        max_steps=max_steps,
        stall_timeout=stall_timeout,
        raise_on_failure=raise_on_failure,
    )


def check_pct(
    fn: Body,
    iterations: int = 100,
    depth: int = 3,
    seed: int | None = None,
    *,
    steps_hint: int = 20,
    max_steps: int = DEFAULT_MAX_STEPS,
    stall_timeout: float = DEFAULT_STALL_TIMEOUT,
    raise_on_failure: bool = True,
) -> CheckResult:
    """``iterations`` PCT runs looking for bugs of depth up to ``depth`` (see ``PCTStrategy``)."""
    return check(
        fn,
        PCTStrategy(iterations, depth, seed, steps_hint),
        max_steps=max_steps,
        stall_timeout=stall_timeout,
        raise_on_failure=raise_on_failure,
    )


def check_dfs(
    fn: Body,
    max_preemptions: int | None = 2,
    max_schedules: int | None = None,
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
    stall_timeout: float = DEFAULT_STALL_TIMEOUT,
    raise_on_failure: bool = True,
) -> CheckResult:
    """Every schedule with at most ``max_preemptions`` preemptions (None: unbounded), up to
    ``max_schedules``; ``result.exhausted`` says whether the bounded space was covered."""
    return check(
        fn,
        DFSStrategy(max_preemptions, max_schedules),
        max_steps=max_steps,
        stall_timeout=stall_timeout,
        raise_on_failure=raise_on_failure,
    )


def replay(
    fn: Body,
    schedule: Schedule | str,
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
    stall_timeout: float = DEFAULT_STALL_TIMEOUT,
    raise_on_failure: bool = True,
) -> CheckResult:
    """One run following ``schedule`` exactly (a ``Schedule`` or its text)."""
    return check(
        fn,
        ReplayStrategy(schedule),
        max_steps=max_steps,
        stall_timeout=stall_timeout,
        raise_on_failure=raise_on_failure,
    )


def check_hypothesis(
    fn: Body,
    max_examples: int = 100,
    seed: int | None = None,
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
    stall_timeout: float = DEFAULT_STALL_TIMEOUT,
    raise_on_failure: bool = True,
) -> CheckResult:
    """Let hypothesis draw up to ``max_examples`` schedules and shrink the first failing one.

    The failure reported is the shrunk run: its schedule and preemption count are the minimal
    ones hypothesis reached, ``iteration`` is how many runs it took in all (search and shrinking).
    """
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings
    from hypothesis import seed as fix_seed

    seed = fresh_seed() if seed is None else seed
    total = CheckResult("hypothesis", seed)
    runs = 0

    @fix_seed(seed)
    @settings(
        max_examples=max_examples,
        database=None,
        deadline=None,
        derandomize=False,
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
        verbosity=Verbosity.quiet,
        print_blob=False,
        # the failing lines it would explain are the scheduler's own, which says nothing
        phases=[p for p in Phase if p is not Phase.explain],
    )
    @given(hypothesis_schedules())
    def explore(policy: Strategy) -> None:
        nonlocal runs
        runs += 1
        try:
            one = check(fn, policy, max_steps=max_steps, stall_timeout=stall_timeout)
        except ScheduleError as exc:
            total.threads = max(total.threads, exc.result.threads)
            total.steps = max(total.steps, exc.result.steps)
            total.decisions = max(total.decisions, exc.result.decisions)
            raise
        total.threads = max(total.threads, one.threads)
        total.steps = max(total.steps, one.steps)
        total.decisions = max(total.decisions, one.decisions)

    error: ScheduleError | None = None
    try:
        explore()
    except ScheduleError as exc:
        error = exc
    total.schedules = runs
    if error is not None:
        shrunk = error.result.failure
        error.locate("hypothesis", seed, runs - 1, error.schedule, error.preemptions)
        failure = Failure.from_error(error, runs - 1, None)
        failure.steps = shrunk.steps if shrunk is not None else None
        total.fail(failure)
        if raise_on_failure:
            error.result = total
            raise error
    return total
