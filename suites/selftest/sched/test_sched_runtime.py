"""The scheduler wired into the runtime: its points, its executor thread as a participant, the
race of upstream issue #9128 found, shrunk and replayed, and nothing left hanging after a run."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import jax
import numpy as np
import pytest

import harness.runtime as xr
import harness.sched as sched
from harness.runtime import deadlines, faults, topology, worker
from harness.sched import points
from harness.sched.points import FREE

X = np.arange(12, dtype=np.float32).reshape(3, 4)


# --------------------------------------------------------------------------- the points themselves


class _Recorder:
    """A controller that controls nothing: it notes every point and lets each operation run as
    ``threading`` would, so that a test can see which points the runtime reaches, on which thread."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def _note(self, name: str) -> None:
        self.seen.append((threading.current_thread().name, name))

    def point(self, name: str, context: dict[str, Any]) -> None:
        self._note(name)

    def sync(self, name: str, obj: object) -> None:
        self._note(name)

    def block(self, name: str, obj: object, ready: Any, timeout: float | None) -> int:
        self._note(name)
        return FREE

    def adopt(self, thread: threading.Thread) -> None:
        return None

    def names(self, thread: str | None = None) -> list[str]:
        return [n for t, n in self.seen if thread is None or t == thread]


@contextmanager
def recording() -> Iterator[_Recorder]:
    recorder = _Recorder()
    points.activate(recorder)
    try:
        yield recorder
    finally:
        points.deactivate(recorder)


def test_the_runtime_reaches_its_points_on_both_threads() -> None:
    a = xr.tensor(X) * 2  # pending
    with faults.inject(faults.RACE_ON_HANDLES), recording() as rec:
        try:
            xr.accumulation.collect_loop_inputs([a])
        except xr.PlaceholderAccessError:
            pass  # lost the race for real: the points were reached all the same
        xr.wait_device_ops()
    caller = rec.names(threading.current_thread().name)
    for name in (
        "RLock.acquire",
        "Lock.acquire",
        "SimpleQueue.put",
        "device_data",
        "DeviceData.handle",
        "wait_device_ops",
    ):
        assert name in caller, (name, caller)
    assert (
        caller.index("SimpleQueue.put")
        < caller.index("device_data")
        < caller.index("DeviceData.handle")
    )
    worker = rec.names("harness-executor")
    for name in ("SimpleQueue.get", "executor.launch", "DeviceData.fill", "Event.set"):
        assert name in worker, (name, worker)
    assert worker.index("executor.launch") < worker.index("DeviceData.fill")


def test_discovery_and_the_kernel_guard_are_points() -> None:
    q = xr.tensor(np.ones((1, 1, 2, 4), np.float32))
    topology.reset()
    with recording() as rec:
        xr.discover()
        xr.kernels.flash_attention(q, q, q)
        xr.discover()  # already discovered: no point
    names = rec.names()
    assert names.count("topology.discover") == 1
    assert "topology.secondary_backend" in names
    enters, exits = names.count("kernels.guard.enter"), names.count("kernels.guard.exit")
    assert enters == exits >= 3, names  # the lowering guard and the nested conversions


def test_without_a_run_the_primitives_are_plain_and_the_executor_is_free() -> None:
    assert points.active() is None
    np.testing.assert_allclose((xr.tensor(X) + 1).numpy(), X + 1)
    assert not sched.is_controlled() and sched.thread_id() is None
    thread = worker.worker._thread
    assert thread is not None and thread.is_alive() and thread.name == "harness-executor"


# --------------------------------------------------------------------------- the race, explored


def _accumulate() -> None:
    """One accumulation step from fresh state, checked against numpy: the body of every run."""
    xr.manual_seed(3)
    model = xr.models.LinearModel(4, 2)
    w, b = model.fc.weight.numpy(), model.fc.bias.numpy()
    rng = np.random.default_rng(4)
    xs = rng.standard_normal((2, 2, 4)).astype(np.float32)
    ys = rng.standard_normal((2, 2, 2)).astype(np.float32)
    x_t, y_t = xr.tensor(xs) * 1, xr.tensor(ys) * 1  # pending: synced asynchronously

    def micro(x: xr.Tensor, y: xr.Tensor) -> xr.Tensor:
        return xr.nn.mse_loss(model(x), y)

    loss = xr.gradient_accumulation(micro, [x_t, y_t], model)
    want = np.mean([((x @ w.T + b - y) ** 2).mean() for x, y in zip(xs, ys, strict=True)])
    np.testing.assert_allclose(loss.numpy(), want, rtol=1e-5)


@pytest.fixture
def discovered() -> None:
    xr.discover()  # every run then starts from the same state (discovery is a point only once)


def _same_failure(error: sched.ScheduleError) -> None:
    """The printed schedule alone reproduces the failure: same error, same schedule."""
    assert isinstance(error, sched.ScheduleFailure), error
    assert error.schedule is not None and str(error.schedule) in str(error)
    with pytest.raises(sched.ScheduleFailure) as again:
        sched.replay(_accumulate, str(error.schedule))
    assert type(again.value.original) is type(error.original)
    assert str(again.value.original) == str(error.original)
    assert again.value.schedule == error.schedule and again.value.preemptions == error.preemptions


@pytest.mark.usefixtures("discovered")
def test_pct_reproduces_the_race_for_twenty_seeds_and_every_schedule_replays() -> None:
    # the race needs one ordering (the handle read before the fill); depth 2 leaves PCT one change
    # point to spare, which suits a bug that shallow
    counts = []
    with faults.inject(faults.RACE_ON_HANDLES):
        for seed in range(20):
            with pytest.raises(sched.ScheduleFailure) as info:
                sched.check_pct(_accumulate, iterations=20, depth=2, seed=seed)
            error = info.value
            assert isinstance(error.original, xr.PlaceholderAccessError)
            assert error.thread_name == "main" and error.strategy == "pct" and error.seed == seed
            counts.append(error.iteration + 1)
            _same_failure(error)
    assert sorted(counts)[len(counts) // 2] <= 10, counts


@pytest.mark.usefixtures("discovered")
def test_dfs_finds_the_race_within_its_bound_and_hypothesis_shrinks_it() -> None:
    with faults.inject(faults.RACE_ON_HANDLES):
        dfs = sched.check_dfs(_accumulate, max_preemptions=2, raise_on_failure=False)
        assert dfs.failure is not None and dfs.failure.kind == "PlaceholderAccessError"
        assert dfs.failure.preemptions is not None and dfs.failure.preemptions <= 2
        _same_failure(dfs.failure.error)
        with pytest.raises(sched.ScheduleFailure) as info:
            sched.check_hypothesis(_accumulate, max_examples=50, seed=1)
    assert info.value.preemptions is not None and info.value.preemptions <= 2
    with faults.inject(faults.RACE_ON_HANDLES):
        _same_failure(info.value)


@pytest.mark.usefixtures("discovered")
def test_the_fix_survives_five_hundred_schedules_and_the_whole_bounded_space() -> None:
    dfs = sched.check_dfs(_accumulate, max_preemptions=2)
    assert dfs.exhausted and dfs.failure is None
    assert dfs.schedules > 20  # the bounded space of one accumulation step: 43 schedules
    explored = dfs.schedules
    explored += sched.check_pct(_accumulate, iterations=200, seed=5).schedules
    explored += sched.check_random(_accumulate, iterations=200, seed=5).schedules
    explored += sched.check_hypothesis(_accumulate, max_examples=100, seed=5).schedules
    assert explored >= 500, explored


@pytest.mark.usefixtures("discovered")
def test_the_executor_is_a_participant_of_every_run() -> None:
    seen: list[int | None] = []

    def body() -> None:
        c = xr.tensor(X) * 3
        xr.mark_step()
        seen.append(sched.thread_id())
        np.testing.assert_allclose(c.numpy(), X * 3)

    result = sched.check_random(body, iterations=5, seed=0)
    assert result.threads == 2 and seen == [0] * 5
    # released at the end of each run and stopped: the next plain use starts a plain thread
    np.testing.assert_allclose((xr.tensor(X) - 1).numpy(), X - 1)
    assert [t.name for t in threading.enumerate()].count("harness-executor") == 1


# --------------------------------------------------------------------------- after a failed run


def _no_hang(fn: Callable[[], Any], seconds: float = 30.0) -> Any:
    """``fn()``, on a thread of its own so that a hang fails the test instead of blocking it."""
    out: list[Any] = []
    errors: list[BaseException] = []

    def call() -> None:
        try:
            out.append(fn())
        except BaseException as exc:  # handed to the caller below
            errors.append(exc)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{fn} still blocked after {seconds:g} s"
    if errors:
        raise errors[0]
    return out[0] if out else None


@pytest.mark.usefixtures("discovered")
def test_a_torn_down_run_leaves_nothing_to_wait_for() -> None:
    left: list[xr.Tensor] = []

    def body() -> None:
        t = xr.tensor(X) * 5
        xr.sync([t], wait=False)  # queued; the executor never gets a turn before the failure
        left.append(t)
        raise RuntimeError("the body failed first")

    result = sched.check_dfs(body, max_preemptions=0, raise_on_failure=False)
    assert result.failure is not None and result.failure.message == "the body failed first"
    _no_hang(xr.wait_device_ops)
    data = left[0]._storage.node.data
    assert not data.is_placeholder
    with pytest.raises(worker.ExecutionAbandoned, match="abandoned"):
        data.array()
    np.testing.assert_allclose((xr.tensor(X) * 2).numpy(), X * 2)  # the runtime carries on


class _GivesUp(sched.Strategy):
    """Random choices, then gives up at step ``at``: the run is torn down with every participant
    wherever it stood at that step."""

    name = "gives-up"

    def __init__(self, at: int, seed: int) -> None:
        self.at = at
        self.rng = random.Random(seed)

    def start_run(self, index: int) -> bool:
        return index == 0

    def choose(self, decision: sched.Decision) -> int:
        if decision.step == self.at:
            raise RuntimeError(f"given up at step {decision.step}")
        return self.rng.choice(decision.enabled)


@pytest.mark.usefixtures("discovered")
def test_a_run_torn_down_at_any_step_unwinds_quietly() -> None:
    """Wherever a run is cut, its threads unwind without raising the runtime's own errors on the
    way out (a caller unwinding past a release never reads an output settled under it), and
    afterwards every output holds its value or says it was abandoned."""
    outputs: list[xr.Tensor] = []

    def body() -> None:
        outputs.clear()
        t = xr.tensor(X) * 5
        xr.sync([t], wait=False)
        outputs.append(t)
        np.testing.assert_allclose(t.numpy(), X * 5)  # a direct read of the placeholder
        u = t + 1
        xr.mark_step()
        outputs.append(u)
        np.testing.assert_allclose(u.numpy(), X * 5 + 1)

    unhandled: list[BaseException | None] = []
    hook, threading.excepthook = threading.excepthook, lambda args: unhandled.append(args.exc_value)
    try:
        for seed in range(8):
            steps = sched.check(body, _GivesUp(-1, seed)).steps
            for at in range(1, steps):
                with pytest.raises(RuntimeError, match=f"given up at step {at}"):
                    _no_hang(lambda at=at, seed=seed: sched.check(body, _GivesUp(at, seed)))
                _no_hang(xr.wait_device_ops)
                for t in outputs:
                    data = t._storage.node.data
                    assert data is None or not data.is_placeholder, (seed, at)
    finally:
        threading.excepthook = hook
    assert unhandled == []


class _Stuck:
    """An execution that waits for an event nobody sets."""

    def __init__(self) -> None:
        self.event = sched.Event(name="never set")
        self.ticket = deadlines.Ticket(0, "a program that never completes")

    def __call__(self) -> None:
        self.event.wait()

    def abandon(self) -> None:
        pass

    def give_up(self, error: BaseException) -> None:
        pass


def test_a_deadlock_names_every_thread_its_point_and_stack() -> None:
    def body() -> None:
        worker.worker.submit(_Stuck()).wait()  # type: ignore[arg-type]

    error = _no_hang(lambda: sched.check_dfs(body, raise_on_failure=False).failure.error)
    assert isinstance(error, sched.DeadlockError)
    by_name = {t.name: t for t in error.threads}
    assert set(by_name) == {"main", "harness-executor"}
    assert by_name["main"].at == "Event.wait" and "execution done" in by_name["main"].detail
    assert by_name["harness-executor"].at == "Event.wait"
    assert "never set" in by_name["harness-executor"].detail
    assert "test_sched_runtime.py" in by_name["main"].stack
    assert "worker.py" in by_name["harness-executor"].stack
    np.testing.assert_allclose((xr.tensor(X) + 2).numpy(), X + 2)


# --------------------------------------------------------------------------- discovery and kernels


@pytest.mark.skipif(len(jax.devices()) % 2, reason="two simulated slices need an even device count")
@pytest.mark.parametrize("inject", [False, True], ids=["fixed", "injected"])
def test_two_threads_lowering_kernels_discover_once(inject: bool) -> None:
    q = np.ones((1, 1, 2, 4), np.float32)

    def body() -> None:
        xr.configure(num_slices=2)
        topology.reset()
        xr.discover()

        def lower() -> None:
            t = xr.tensor(q)
            xr.kernels.flash_attention(t, t, t)

        threads = [sched.Thread(target=lower, name=f"lowering-{i}") for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert xr.discovery_count() == 1

    previous = xr.configure()
    try:
        with faults.inject(faults.DOUBLE_DISCOVERY) if inject else _nothing():
            result = sched.check_dfs(body, max_preemptions=1, raise_on_failure=False)
    finally:
        xr.configure(num_slices=previous.num_slices)
        topology.reset()
    if inject:
        assert result.failure is not None and result.failure.kind == "DuplicateDiscoveryError"
        return
    assert result.failure is None, result.failure
    assert result.exhausted and result.threads == 3 and result.schedules > 1


@contextmanager
def _nothing() -> Iterator[None]:
    yield
