"""Every strategy against bugs of known depth, and replay of what they find."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
import sched_bodies as bodies
from hypothesis import given, settings
from hypothesis import strategies as st

import harness.sched as sched


def _failure(run: Callable[[], sched.CheckResult]) -> sched.ScheduleError:
    with pytest.raises(sched.ScheduleError) as info:
        run()
    return info.value


def _assert_replays(fn: Callable[[], None], error: sched.ScheduleError) -> None:
    """The printed schedule string alone reproduces the same failure."""
    assert error.schedule is not None
    text = str(error)
    assert str(error.schedule) in text and f"seed={error.seed}" in text
    assert error.strategy is not None and error.strategy in text
    again = _failure(lambda: sched.replay(fn, str(error.schedule)))
    assert type(again) is type(error)
    assert again.schedule == error.schedule
    assert again.preemptions == error.preemptions
    if isinstance(error, sched.ScheduleFailure):
        assert isinstance(again, sched.ScheduleFailure)
        assert type(again.original) is type(error.original)
        assert str(again.original) == str(error.original)
        assert again.thread_name == error.thread_name


# --------------------------------------------------------------------------- lost update


def test_random_finds_the_lost_update_and_replays_it() -> None:
    error = _failure(lambda: sched.check_random(bodies.lost_update, iterations=100, seed=7))
    assert isinstance(error, sched.ScheduleFailure)
    assert isinstance(error.original, AssertionError) and error.__cause__ is error.original
    assert "lost update" in str(error) and error.strategy == "random" and error.seed == 7
    assert error.result.failure.schedule == str(error.schedule)
    _assert_replays(bodies.lost_update, error)


def test_pct_finds_the_lost_update_and_replays_it() -> None:
    error = _failure(lambda: sched.check_pct(bodies.lost_update, iterations=100, seed=7))
    assert isinstance(error, sched.ScheduleFailure) and error.strategy == "pct"
    _assert_replays(bodies.lost_update, error)


def test_dfs_finds_the_lost_update_and_counts_the_schedules() -> None:
    result = sched.check_dfs(bodies.lost_update, raise_on_failure=False)
    assert result.failure is not None and result.failure.kind == "AssertionError"
    assert result.failures == 1 and result.exhausted is False
    assert result.schedules == result.failure.iteration + 1 >= 2  # the first schedule is serial
    assert result.failure.preemptions is not None and 1 <= result.failure.preemptions <= 2
    _assert_replays(bodies.lost_update, result.failure.error)


def test_dfs_exhausts_the_locked_update_without_failure() -> None:
    result = sched.check_dfs(bodies.locked_update, max_preemptions=2)
    assert result.failure is None and result.exhausted is True
    assert result.schedules > 1
    unbounded_by_one = sched.check_dfs(bodies.locked_update, max_preemptions=1)
    assert unbounded_by_one.exhausted and unbounded_by_one.schedules < result.schedules


def test_random_and_pct_find_nothing_in_the_locked_update() -> None:
    assert sched.check_random(bodies.locked_update, iterations=60, seed=1).failure is None
    pct = sched.check_pct(bodies.locked_update, iterations=60, seed=1)
    assert pct.failure is None and pct.schedules == 60


# --------------------------------------------------------------------------- depth-2 ordering bug

PCT_BUDGET = 50  # measured: the slowest of seeds 0-19 needs 43 runs at depth 2


def test_pct_finds_the_depth_two_ordering_bug_for_every_seed() -> None:
    runs = []
    for seed in range(20):
        result = sched.check_pct(
            bodies.signal_before_fill,
            iterations=PCT_BUDGET,
            depth=2,
            seed=seed,
            raise_on_failure=False,
        )
        assert result.failure is not None, f"seed {seed}: not found in {PCT_BUDGET} runs"
        runs.append(result.schedules)
        assert result.n == 2 and result.d == 2 and result.k is not None and result.k >= 3
        assert result.bound == pytest.approx(1 / (result.n * result.k))
    assert max(runs) <= PCT_BUDGET


def test_pct_failure_replays() -> None:
    error = _failure(
        lambda: sched.check_pct(bodies.signal_before_fill, iterations=PCT_BUDGET, depth=2, seed=4)
    )
    _assert_replays(bodies.signal_before_fill, error)


def test_dfs_needs_two_preemptions_for_the_ordering_bug() -> None:
    one = sched.check_dfs(bodies.signal_before_fill, max_preemptions=1)
    assert one.failure is None and one.exhausted, "no schedule with one preemption has the bug"
    two = sched.check_dfs(bodies.signal_before_fill, max_preemptions=2, raise_on_failure=False)
    assert two.failure is not None and two.failure.preemptions == 2
    _assert_replays(bodies.signal_before_fill, two.failure.error)


# seeds whose first failing schedule has 3 or 4 preemptions (measured without shrinking)
@pytest.mark.parametrize(
    ("body", "seed"),
    [
        (bodies.signal_before_fill, 0),
        (bodies.signal_before_fill_to_consumer, 0),
        (bodies.signal_before_fill_to_consumer, 2),
    ],
    ids=["body-peeks-0", "consumer-peeks-0", "consumer-peeks-2"],
)
def test_hypothesis_shrinks_the_ordering_bug_to_two_preemptions(
    body: Callable[[], None], seed: int
) -> None:
    result = sched.check_hypothesis(body, max_examples=200, seed=seed, raise_on_failure=False)
    assert result.failure is not None and result.failure.kind == "AssertionError"
    assert result.failure.preemptions is not None and result.failure.preemptions <= 2
    assert result.schedules > 1
    _assert_replays(body, result.failure.error)


def test_hypothesis_schedules_compose_with_other_strategies() -> None:
    """Users draw schedules next to their own inputs; here: how many increments, any schedule."""

    def body_for(increments: int, locked: bool) -> Callable[[], None]:
        def body() -> None:
            state = {"n": 0}
            lock = sched.Lock()

            def work() -> None:
                for _ in range(increments):
                    if locked:
                        lock.acquire()
                    value = state["n"]
                    sched.point("between")
                    state["n"] = value + 1
                    if locked:
                        lock.release()

            threads = [sched.Thread(target=work) for _ in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert state["n"] == 2 * increments, state

        return body

    seen: list[sched.HypothesisPolicy] = []

    @settings(max_examples=40, database=None, derandomize=True)
    @given(increments=st.integers(1, 3), policy=sched.hypothesis_schedules())
    def locked(increments: int, policy: sched.HypothesisPolicy) -> None:
        sched.check(body_for(increments, True), policy)
        seen.append(policy)

    locked()
    assert len(seen) >= 10 and all(p.last is not None for p in seen)

    @settings(max_examples=200, database=None, derandomize=True)
    @given(increments=st.integers(1, 3), policy=sched.hypothesis_schedules())
    def unlocked(increments: int, policy: sched.HypothesisPolicy) -> None:
        sched.check(body_for(increments, False), policy)

    with pytest.raises(sched.ScheduleFailure) as info:
        unlocked()
    assert info.value.preemptions is not None and info.value.preemptions <= 2


# --------------------------------------------------------------------------- placeholder race


@pytest.fixture
def executor_hooks() -> Iterator[bodies.Worker]:
    """Wire the miniature executor the way the runtime would be: restarted around every run."""
    sched.on_activate(bodies.worker.restart)
    sched.on_deactivate(bodies.worker.shutdown)
    try:
        yield bodies.worker
    finally:
        sched.discard_hook(bodies.worker.restart)
        sched.discard_hook(bodies.worker.shutdown)
        bodies.worker.restart()


def _executor_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "executor" and t.is_alive()]


@pytest.mark.parametrize(
    "check",
    [
        lambda fn: sched.check_random(fn, iterations=50, seed=0),
        lambda fn: sched.check_pct(fn, iterations=50, seed=0),
        lambda fn: sched.check_dfs(fn),
        lambda fn: sched.check_hypothesis(fn, max_examples=50, seed=0),
    ],
    ids=["random", "pct", "dfs", "hypothesis"],
)
def test_every_strategy_finds_the_placeholder_read(
    executor_hooks: bodies.Worker, check: Callable[[Callable[[], None]], sched.CheckResult]
) -> None:
    error = _failure(lambda: check(bodies.handles_without_waiting))
    assert isinstance(error, sched.ScheduleFailure)
    assert isinstance(error.original, bodies.PlaceholderRead) and error.thread_name == "main"
    _assert_replays(bodies.handles_without_waiting, error)
    assert _executor_threads() == [], "an abandoned executor thread outlived its run"


def test_waiting_for_the_placeholder_is_clean_across_every_strategy(
    executor_hooks: bodies.Worker,
) -> None:
    calls: list[str] = []

    def count() -> None:
        calls.append("run")

    sched.on_activate(count)
    try:
        results = [
            sched.check_dfs(bodies.handles_after_waiting, max_preemptions=2),
            sched.check_random(bodies.handles_after_waiting, iterations=200, seed=0),
            sched.check_pct(bodies.handles_after_waiting, iterations=200, seed=0),
            sched.check_hypothesis(bodies.handles_after_waiting, max_examples=100, seed=0),
        ]
    finally:
        sched.discard_hook(count)
    assert all(r.failure is None for r in results)
    assert results[0].exhausted is True and results[0].schedules > 1
    total = sum(r.schedules for r in results)
    assert total >= 500, f"only {total} schedules"
    assert len(calls) == total, "the activation hook runs before every run"
    assert results[0].threads == 2  # the body and the executor it started
    # the executor left blocked on its queue at the end of each run was released, then stopped
    assert _executor_threads() == []
