"""The controlled run itself: stuck runs, failing threads, timeouts, hooks, results."""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable

import pytest
import sched_bodies as bodies

import harness.sched as sched
from harness.sched import points


def test_a_deadlock_is_reported_with_every_thread_and_its_point() -> None:
    with pytest.raises(sched.DeadlockError) as info:
        sched.check_dfs(bodies.opposite_lock_order)
    error = info.value
    states = {r.name: r for r in error.threads}
    assert set(states) == {"main", "forward", "backward"}
    assert states["forward"].state == states["backward"].state == "blocked"
    assert states["forward"].at == states["backward"].at == "Lock.acquire"
    assert "second" in states["forward"].detail and "first" in states["backward"].detail
    assert states["main"].at == "Thread.join"
    # each stack ends in the test's own code, at the acquire that blocks
    assert "with second:" in states["forward"].stack.splitlines()[-1]
    assert "with first:" in states["backward"].stack.splitlines()[-1]
    text = str(error)
    assert "deadlock" in text and "'forward'" in text and "'backward'" in text
    assert error.strategy == "dfs" and error.schedule is not None
    again = pytest.raises(
        sched.DeadlockError, sched.replay, bodies.opposite_lock_order, str(error.schedule)
    )
    assert again.value.schedule == error.schedule


def test_random_also_runs_into_the_deadlock() -> None:
    result = sched.check_random(
        bodies.opposite_lock_order, iterations=200, seed=0, raise_on_failure=False
    )
    assert result.failure is not None and result.failure.kind == "DeadlockError"


def test_a_livelock_exceeds_the_step_budget() -> None:
    with pytest.raises(sched.LivelockError) as info:
        sched.check_random(bodies.spin_forever, seed=0, max_steps=200)
    error = info.value
    assert "max_steps=200" in str(error)
    spinner = next(r for r in error.threads if r.name == "spinner")
    assert spinner.at == "spin" and spinner.state == "ready"
    assert spinner.detail.startswith("rounds=")  # the point's context
    assert error.schedule is not None and len(error.schedule) == 200
    # the spinning participant was abandoned: it unwound instead of spinning on uncontrolled
    assert not [t for t in threading.enumerate() if t.name == "spinner"]


def test_an_exception_in_a_spawned_thread_fails_the_run() -> None:
    def body() -> None:
        def explode() -> None:
            sched.point("before")
            raise ValueError("boom in a worker")

        thread = sched.Thread(target=explode, name="exploder")
        thread.start()
        thread.join()

    with pytest.raises(sched.ScheduleFailure) as info:
        sched.check_random(body, iterations=5, seed=0)
    error = info.value
    assert isinstance(error.original, ValueError) and error.__cause__ is error.original
    assert error.thread_name == "exploder" and error.thread_id == 1
    assert "boom in a worker" in str(error) and "'exploder'" in str(error)
    assert error.iteration == 0
    replayed = pytest.raises(sched.ScheduleFailure, sched.replay, body, error.schedule)
    assert replayed.value.thread_name == "exploder"


def test_a_failure_abandons_the_other_participants() -> None:
    """The body fails while a worker waits on a queue: the worker unwinds, it is not leaked."""
    unwound: list[str] = []

    def body() -> None:
        jobs = sched.SimpleQueue()
        started = sched.Event()

        def wait_for_work() -> None:
            started.set()
            try:
                jobs.get()
            except sched.Abandoned:
                unwound.append("worker")
                raise

        sched.Thread(target=wait_for_work, name="idle-worker").start()
        started.wait()
        sched.point("fail")
        raise KeyError("body fails")

    with pytest.raises(sched.ScheduleFailure):
        sched.check_dfs(body)
    assert unwound == ["worker"]
    assert not [t for t in threading.enumerate() if t.name == "idle-worker"]


def test_a_clean_end_releases_blocked_participants_to_run_uncontrolled() -> None:
    leftovers: list[sched.SimpleQueue] = []
    got: list[object] = []
    where: list[str] = []

    def body() -> None:
        jobs = sched.SimpleQueue()
        leftovers.append(jobs)
        started = sched.Event()

        def wait_for_work() -> None:
            started.set()
            got.append(jobs.get())
            where.append("controlled" if sched.is_controlled() else "free")

        sched.Thread(target=wait_for_work, name="late-worker", daemon=True).start()
        started.wait()  # from here on the worker is parked in get(), blocked on the empty queue
        sched.point("body done")

    result = sched.check_dfs(body, max_preemptions=0)
    assert result.exhausted and result.schedules == 1 and result.threads == 2
    assert points.active() is None
    # released at the end, the worker now waits in the real queue's get(), like any thread
    late = next(t for t in threading.enumerate() if t.name == "late-worker")
    assert late.is_alive() and got == []
    leftovers[0].put("after the run")
    late.join(timeout=30)
    assert got == ["after the run"] and where == ["free"]


def test_a_timed_wait_may_time_out_without_sleeping() -> None:
    outcomes: set[bool] = set()

    def body() -> None:
        event = sched.Event()
        setter = sched.Thread(target=event.set, name="setter")
        setter.start()
        outcomes.add(event.wait(timeout=3600))  # a real wait this long would stall the run
        setter.join()

    result = sched.check_dfs(body, stall_timeout=10)
    assert result.exhausted and outcomes == {True, False}


@pytest.mark.parametrize("wait_timeout", [None, 3600])
def test_a_latch_is_the_same_schedule_point_as_an_event(wait_timeout: float | None) -> None:
    """The runtime's placeholders are latches: exploring and replaying a body sees the same
    points, choices and outcomes as with an ``Event``."""

    def explore(make: type) -> tuple[int, int, int, set[str]]:
        seen: set[str] = set()

        def body() -> None:
            ready = make(name="ready")
            value: list[int] = []

            def fill() -> None:
                value.append(1)
                ready.set()

            filler = sched.Thread(target=fill, name="filler")
            filler.start()
            seen.add("early" if not ready.is_set() else "late")
            seen.add(f"waited {ready.wait(timeout=wait_timeout)} {value}")
            filler.join()
            seen.add(f"then {ready.wait()}")  # waiting on a set one is a point all the same

        result = sched.check_dfs(body, max_preemptions=None, stall_timeout=10)
        assert result.exhausted
        return result.schedules, result.steps, result.decisions, seen

    latch, event = explore(sched.Latch), explore(sched.Event)
    assert latch == event
    assert {"early", "late", "waited True [1]", "then True"} <= latch[3]


def test_timed_queue_get_and_lock_acquire_may_time_out() -> None:
    seen: set[str] = set()

    def body() -> None:
        jobs = sched.SimpleQueue()
        lock = sched.Lock()

        def hold() -> None:
            with lock:
                jobs.put("job")

        holder = sched.Thread(target=hold, name="holder")
        holder.start()
        try:
            seen.add(f"got {jobs.get(timeout=3600)}")
        except queue.Empty:
            seen.add("empty")
        if lock.acquire(timeout=3600):
            seen.add("acquired")
            lock.release()
        else:
            seen.add("timed out")
        holder.join()

    result = sched.check_dfs(body, max_preemptions=None, stall_timeout=10)
    assert result.exhausted
    assert seen == {"got job", "empty", "acquired", "timed out"}


def test_rlock_is_reentrant_under_control_and_excludes_others() -> None:
    def body() -> None:
        lock = sched.RLock()
        inside: list[str] = []

        def enter(name: str) -> None:
            with lock:
                with lock:
                    inside.append(name)
                    sched.point("inside")
                    assert inside[-1] == name, f"{inside[-1]} entered while {name} held the lock"

        threads = [sched.Thread(target=enter, args=(n,)) for n in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(inside) == ["a", "b"] and not lock.locked()

    result = sched.check_dfs(body, max_preemptions=3)
    assert result.exhausted and result.schedules > 10


def test_thread_ids_follow_spawn_order() -> None:
    ids: dict[str, int | None] = {}

    def body() -> None:
        ids["main"] = sched.thread_id()

        def record(name: str) -> None:
            ids[name] = sched.thread_id()
            assert sched.is_controlled()

        threads = [sched.Thread(target=record, args=(n,), name=n) for n in ("one", "two")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    sched.check_random(body, iterations=3, seed=0)
    assert ids == {"main": 0, "one": 1, "two": 2}
    assert sched.thread_id() is None and not sched.is_controlled()


def test_a_participant_blocked_outside_the_scheduler_is_a_stall() -> None:
    real = threading.Event()  # not a sched primitive: invisible to the scheduler

    def body() -> None:
        real.wait()
        sched.point("after")

    try:
        with pytest.raises(sched.StallError) as info:
            sched.check_random(body, iterations=1, seed=0, stall_timeout=0.3)
    finally:
        real.set()
    main = next(r for r in info.value.threads if r.id == 0)
    assert main.state == "running" and "real.wait()" in main.stack


def test_hooks_run_around_every_run_with_no_scheduler_active() -> None:
    seen: list[tuple[str, object]] = []

    def activate() -> None:
        seen.append(("on", points.active()))

    def deactivate() -> None:
        seen.append(("off", points.active()))

    sched.on_activate(activate)
    sched.on_deactivate(deactivate)
    try:
        result = sched.check_random(
            bodies.lost_update, iterations=3, seed=1, raise_on_failure=False
        )
    finally:
        sched.discard_hook(activate)
        sched.discard_hook(deactivate)
    assert seen == [("on", None), ("off", None)] * result.schedules


def test_a_body_that_depends_on_more_than_the_schedule_is_caught() -> None:
    calls = iter(range(1000))

    def body() -> None:
        other = sched.Thread(target=sched.point, args=("other",))
        other.start()
        if next(calls) % 2:  # a different program on every other run
            sched.Thread(target=lambda: None).start()
        sched.point("p")
        other.join()

    with pytest.raises(sched.NondeterminismError):
        sched.check_dfs(body)
    with pytest.raises(sched.NondeterminismError, match="ends after"):
        sched.replay(bodies.lost_update, "s1:0x2")
    with pytest.raises(sched.NondeterminismError, match="only"):
        sched.replay(bodies.lost_update, "s1:5")


def test_a_strategy_of_ones_own() -> None:
    """``check`` takes any ``Strategy``: here, always the highest-numbered thread that can run."""

    class Youngest(sched.Strategy):
        name = "youngest"

        def __init__(self) -> None:
            self.preemptions = 0

        def start_run(self, index: int) -> bool:
            return index < 3

        def choose(self, decision: sched.Decision) -> int:
            choice = max(decision.enabled)
            assert decision.ordered[0] == (
                decision.current if decision.current in decision.ready else decision.enabled[0]
            )
            self.preemptions += decision.preempts(choice)
            return choice

    strategy = Youngest()
    result = sched.check(bodies.lost_update, strategy, raise_on_failure=False)
    # each incrementer runs as soon as it is started, so the updates never overlap
    assert result.failure is None and result.schedules == 3 and result.strategy == "youngest"
    assert strategy.preemptions == 3 * 2


def test_runs_do_not_nest() -> None:
    def body() -> None:
        sched.check_random(lambda: None, iterations=1, seed=0)

    with pytest.raises(sched.ScheduleFailure, match="already active"):
        sched.check_random(body, iterations=1, seed=0)


@pytest.mark.parametrize(
    "run",
    [
        lambda: sched.check_random(
            bodies.lost_update, iterations=20, seed=2, raise_on_failure=False
        ),
        lambda: sched.check_pct(bodies.locked_update, iterations=20, depth=3, seed=2),
        lambda: sched.check_dfs(bodies.locked_update, max_preemptions=1),
        lambda: sched.check_hypothesis(
            bodies.lost_update, max_examples=30, seed=2, raise_on_failure=False
        ),
        lambda: sched.replay(bodies.locked_update, "s1:0x3.1x4.2x4.0x2"),
    ],
    ids=["random", "pct", "dfs", "hypothesis", "replay"],
)
def test_results_are_json(run: Callable[[], sched.CheckResult]) -> None:
    result = run()
    data = json.loads(json.dumps(result.to_dict()))
    assert data["strategy"] == result.strategy and data["schedules"] == result.schedules >= 1
    assert data["threads"] == 3
    if result.strategy == "pct":
        assert (data["n"], data["d"]) == (3, 3) and data["k"] >= 1
        assert data["bound"] == pytest.approx(1 / (data["n"] * data["k"] ** 2))
    if result.strategy == "dfs":
        assert data["exhausted"] is True and data["max_preemptions"] == 1
    if result.failure is not None:
        assert data["failure"]["schedule"] == result.failure.schedule
        assert data["failure"]["kind"] == "AssertionError"
