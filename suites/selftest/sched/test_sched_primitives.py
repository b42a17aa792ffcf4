"""With no scheduler active the primitives are ``threading``'s and ``point`` does nothing."""

from __future__ import annotations

import queue
import threading

import pytest

import harness.sched as sched
from harness.sched import points


def test_point_is_a_no_op_without_a_scheduler() -> None:
    assert points.active() is None
    assert sched.point("anything", key=1) is None
    assert not sched.is_controlled() and sched.thread_id() is None


def test_event_between_real_threads() -> None:
    event = sched.Event()
    assert not event.is_set() and event.wait(timeout=0) is False
    assert event.wait(timeout=0.01) is False
    woken: list[bool] = []
    waiter = threading.Thread(target=lambda: woken.append(event.wait()))
    waiter.start()
    event.set()
    waiter.join(timeout=30)
    assert woken == [True] and event.is_set() and event.wait() is True
    event.clear()
    assert not event.is_set()


def test_latch_between_real_threads_wakes_every_waiter_once_set() -> None:
    latch = sched.Latch(name="value ready")
    assert not latch.is_set() and latch.wait(timeout=0) is False
    assert latch.wait(timeout=0.01) is False  # the wake-up lock now exists: a timed-out waiter keeps it held
    woken: list[bool] = []
    parked = threading.Barrier(4)

    def waiter() -> None:
        parked.wait()
        woken.append(latch.wait())

    waiters = [threading.Thread(target=waiter) for _ in range(3)]
    for t in waiters:
        t.start()
    parked.wait()
    latch.set()
    latch.set()  # setting twice is setting once
    for t in waiters:
        t.join(timeout=30)
    assert woken == [True, True, True] and not any(t.is_alive() for t in waiters)
    assert latch.is_set() and latch.wait() is True and latch.wait(timeout=0) is True
    assert "set" in repr(latch) and "value ready" in repr(latch)


def test_lock_between_real_threads() -> None:
    lock = sched.Lock()
    assert lock.acquire() is True and lock.locked()
    assert lock.acquire(False) is False
    results: list[bool] = []
    other = threading.Thread(target=lambda: results.append(lock.acquire(timeout=0.01)))
    other.start()
    other.join(timeout=30)
    assert results == [False]
    lock.release()
    assert not lock.locked()
    with pytest.raises(RuntimeError):
        lock.release()
    with pytest.raises(ValueError):
        lock.acquire(False, 1)
    with pytest.raises(ValueError):
        lock.acquire(True, -5)


def test_lock_serializes_real_threads() -> None:
    lock = sched.Lock()
    inside: list[int] = []
    overlap: list[int] = []

    def work(i: int) -> None:
        for _ in range(200):
            with lock:
                inside.append(i)
                if len(inside) > 1:
                    overlap.append(i)
                inside.pop()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert overlap == [] and inside == []


def test_rlock_between_real_threads() -> None:
    lock = sched.RLock()
    with lock:
        with lock:
            assert lock.locked() and lock._is_owned()
        results: list[bool] = []
        other = threading.Thread(target=lambda: results.append(lock.acquire(timeout=0.01)))
        other.start()
        other.join(timeout=30)
        assert results == [False]
        stranger = threading.Thread(target=lambda: results.append(_releases(lock)))
        stranger.start()
        stranger.join(timeout=30)
        assert results == [False, False]
    assert not lock.locked()
    with pytest.raises(RuntimeError):
        lock.release()


def _releases(lock: sched.RLock) -> bool:
    try:
        lock.release()
    except RuntimeError:
        return False
    return True


def test_simple_queue_between_real_threads() -> None:
    jobs = sched.SimpleQueue()
    assert jobs.empty() and jobs.qsize() == 0
    with pytest.raises(queue.Empty):
        jobs.get_nowait()
    with pytest.raises(queue.Empty):
        jobs.get(timeout=0.01)
    got: list[int] = []
    consumer = threading.Thread(target=lambda: got.extend(jobs.get() for _ in range(3)))
    consumer.start()
    for i in range(3):
        jobs.put(i)
    consumer.join(timeout=30)
    assert got == [0, 1, 2] and jobs.empty()
    jobs.put_nowait("x")
    assert jobs.qsize() == 1 and jobs.get(False) == "x"


def test_thread_outside_a_run_is_an_ordinary_thread() -> None:
    seen: list[object] = []

    class Subclass(sched.Thread):
        def run(self) -> None:
            seen.append(("subclass", sched.is_controlled()))

    plain = sched.Thread(target=lambda: seen.append(("target", sched.thread_id())), name="plain")
    sub = Subclass()
    for t in (plain, sub):
        t.start()
    for t in (plain, sub):
        t.join(timeout=30)
    assert sorted(seen, key=str) == [("subclass", False), ("target", None)]
    assert not plain.is_alive() and isinstance(plain, threading.Thread)
    with pytest.raises(RuntimeError):
        plain.start()


def test_a_thread_subclass_overriding_run_participates_under_control() -> None:
    ran: list[int | None] = []

    class Subclass(sched.Thread):
        def run(self) -> None:
            sched.point("in subclass")
            ran.append(sched.thread_id())

    def body() -> None:
        thread = Subclass()
        thread.start()
        thread.join()

    result = sched.check_dfs(body)
    assert result.exhausted and result.schedules >= 2
    assert set(ran) == {1}
