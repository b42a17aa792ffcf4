"""Concurrent programs with known bugs (and their fixes), for the schedule-control selftests.

Each body builds all of its state afresh, so that it can be run once per schedule, and joins the
threads whose outcome it checks.
"""

from __future__ import annotations

from collections.abc import Callable

import harness.sched as sched

# --------------------------------------------------------------------------- lost update


def _two_incrementers(increment: Callable[[dict[str, int]], None]) -> None:
    state = {"n": 0}
    threads = [sched.Thread(target=increment, args=(state,), name=f"inc{i}") for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert state["n"] == 2, f"lost update: counter is {state['n']} after two increments"


def lost_update() -> None:
    """Read, schedule point, write: the second writer can overwrite the first."""

    def increment(state: dict[str, int]) -> None:
        value = state["n"]
        sched.point("between read and write")
        state["n"] = value + 1

    _two_incrementers(increment)


def locked_update() -> None:
    """The same with the read-modify-write under a ``sched.Lock``: correct."""
    lock = sched.Lock(name="counter")

    def increment(state: dict[str, int]) -> None:
        with lock:
            value = state["n"]
            sched.point("between read and write")
            state["n"] = value + 1

    _two_incrementers(increment)


# --------------------------------------------------------------------------- signal before fill


def signal_before_fill() -> None:
    """The producer signals the slot ready, then fills it; the body peeks in between.

    A bug of depth 2: the producer's signal must come before the peek, and the peek before the
    fill. Reaching it takes two preemptions (to the producer right after it is started, back to
    the body right after the signal)."""
    ready = sched.Event(name="slot ready")
    slot: dict[str, int | None] = {"value": None}

    def producer() -> None:
        sched.point("produce")
        ready.set()
        sched.point("publish")
        slot["value"] = 42

    thread = sched.Thread(target=producer, name="producer")
    thread.start()
    sched.point("peek")
    seen = slot["value"] if ready.is_set() else 42
    thread.join()
    assert seen == 42, f"read the slot between its signal and its fill: {seen}"


def signal_before_fill_to_consumer() -> None:
    """The same bug between two spawned threads: a consumer peeks between signal and fill.

    One preemption suffices (the producer's, right after its signal), but most failing schedules
    found at random take several more, so it shows what shrinking does."""
    ready = sched.Event(name="slot ready")
    slot: dict[str, int | None] = {"value": None}
    seen: list[int | None] = []

    def producer() -> None:
        sched.point("produce")
        ready.set()
        sched.point("publish")
        slot["value"] = 42

    def consumer() -> None:
        sched.point("peek")
        if ready.is_set():
            seen.append(slot["value"])

    threads = [
        sched.Thread(target=producer, name="producer"),
        sched.Thread(target=consumer, name="consumer"),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen in ([], [42]), f"read the slot between its signal and its fill: {seen}"


# --------------------------------------------------------------------------- deadlock, livelock


def opposite_lock_order() -> None:
    first, second = sched.Lock(name="first"), sched.Lock(name="second")

    def forward() -> None:
        with first:
            with second:
                pass

    def backward() -> None:
        with second:
            with first:
                pass

    threads = [
        sched.Thread(target=forward, name="forward"),
        sched.Thread(target=backward, name="backward"),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def spin_forever() -> None:
    def spinner() -> None:
        rounds = 0
        while True:
            rounds += 1
            sched.point("spin", rounds=rounds)

    thread = sched.Thread(target=spinner, name="spinner")
    thread.start()
    thread.join()


# --------------------------------------------------------------------------- a miniature runtime


class PlaceholderRead(RuntimeError):
    """``GetHandle()`` on device data whose execution has not filled it (upstream's SIGSEGV)."""


class Placeholder:
    """Like ``device_data.DeviceData`` with no array yet: filled by the executor thread."""

    def __init__(self) -> None:
        self.value: int | None = None
        self.ready = sched.Event(name="placeholder ready")

    def fill(self, value: int) -> None:
        sched.point("fill")
        self.value = value
        self.ready.set()

    def handle(self) -> int:
        """Reads without waiting, as ``PjRtShardedData::GetHandle`` did."""
        sched.point("handle")
        if self.value is None:
            raise PlaceholderRead("GetHandle() on placeholder device data")
        return self.value


class Worker:
    """``worker.Worker`` with the scheduler's primitives: one thread running queued jobs."""

    def __init__(self) -> None:
        self.queue = sched.SimpleQueue(name="jobs")
        self.lock = sched.Lock(name="worker")
        self.thread: sched.Thread | None = None

    def submit(self, job: Callable[[], None]) -> sched.Event:
        done = sched.Event(name="job done")
        with self.lock:
            if self.thread is None or not self.thread.is_alive():
                self.thread = sched.Thread(target=self._loop, name="executor", daemon=True)
                self.thread.start()
            self.queue.put((job, done))
        return done

    def _loop(self) -> None:
        while True:
            job, done = self.queue.get()
            if job is None:
                done.set()
                return
            try:
                job()
            finally:
                done.set()

    def shutdown(self) -> None:
        with self.lock:
            thread = self.thread
            if thread is None or not thread.is_alive():
                return
            done = sched.Event(name="shutdown")
            self.queue.put((None, done))
        done.wait(timeout=30)
        thread.join(timeout=30)

    def restart(self) -> None:
        """Before a run: stop the thread started outside it and forget what an aborted run left
        queued, so that the first ``submit`` inside the run starts a participant."""
        self.shutdown()
        with self.lock:
            self.queue = sched.SimpleQueue(name="jobs")
            self.thread = None


worker = Worker()


def handles_without_waiting() -> None:
    """PR #9078's accumulation: collect handles right after the asynchronous sync (the bug)."""
    out = Placeholder()
    worker.submit(lambda: out.fill(7))
    assert out.handle() == 7


def handles_after_waiting() -> None:
    """The fix (#9143): wait for the pending execution before collecting handles."""
    out = Placeholder()
    worker.submit(lambda: out.fill(7))
    out.ready.wait()
    assert out.handle() == 7
