"""The executor thread and the operation tracker: where launched executions run and are counted.

One executor thread runs executions in submission order, like a device stream; the operation
tracker counts those started and not yet completed (upstream's ``OperationTracker``,
pytorch/xla#5811), the second step of ``wait_device_ops``. A wait that passes its deadline gives
the stuck thread up and the next submission starts a fresh one. The thread is stopped around every
controlled run (``harness.sched``) so that the run's first submission starts it as a participant.
"""

from __future__ import annotations

import atexit
import time
from typing import Any

from harness import sched
from harness.runtime import deadlines, seams
from harness.runtime.deadlines import Ticket, await_latch, executor_stack, wait_timeout
from harness.runtime.errors import ExecutionTimeoutError


class ExecutionAbandoned(RuntimeError):
    """The output of an execution that never completed because its controlled run was torn down
    (``harness.sched``): it carries this instead of staying a placeholder nobody will fill."""


class Operations:
    """Executions started and not yet completed: the second step of ``wait_device_ops``.

    Upstream's ``OperationTracker`` (pytorch/xla#5811). The executor thread's barrier only says
    that the queue was drained; an execution still completing on another thread is seen here. The
    count and the idle event change together under the lock, so ``idle`` is set exactly when the
    count is zero, even when a torn-down run cuts an update short (a set or release completes).
    """

    def __init__(self) -> None:
        self._lock = sched.Lock(name="operations")
        self._idle = sched.Event(name="operations idle")
        self._idle.set()
        self._running = 0

    @property
    def running(self) -> int:
        return self._running

    def start(self) -> None:
        with self._lock:
            self._running += 1
            if self._running == 1:
                self._idle.clear()

    def finish(self) -> None:
        with self._lock:
            self._running -= 1
            if self._running == 0:
                self._idle.set()

    def wait(self) -> None:
        limit = wait_timeout()
        deadline = None if limit is None else time.monotonic() + limit
        while True:
            with self._lock:
                if self._running == 0:
                    return
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise worker.give_up("wait_device_ops", None, limit or 0.0,
                                      f"{self._running} execution(s) still counted as running")
            self._idle.wait(left)


operations = Operations()


class Worker:
    """One executor thread: executions run in submission order, like a device stream."""

    def __init__(self) -> None:
        self._queue = sched.SimpleQueue(name="executions")
        self._lock = sched.Lock(name="executor")
        self._last: Ticket | None = None
        self._thread: sched.Thread | None = None
        self._running: Ticket | None = None  # what the executor thread is running now
        self._failure: BaseException | None = None  # the first failed execution since the last wait
        self._interrupted: list[Any] = []  # cut short by a torn-down run, to settle after it
        self._closures: list[sched.Thread] = []  # late completions (``wait-gap``), joined on stop

    def note_failure(self, exc: BaseException) -> None:
        with self._lock:
            if self._failure is None:
                self._failure = exc

    def take_failure(self) -> BaseException | None:
        if self._failure is None:  # the common case, without a lock round trip
            return None
        with self._lock:
            failure, self._failure = self._failure, None
        return failure

    def interrupted(self, job: Any) -> None:
        self._interrupted.append(job)

    def closure(self, target: Any) -> None:
        """Run ``target`` on a short-lived thread, as upstream's IO thread pool ran ``lockfn``."""
        thread = sched.Thread(target=target, name="io-closure", daemon=True)
        self._closures = [t for t in self._closures if t.is_alive()]
        self._closures.append(thread)
        thread.start()

    def submit(self, job: Any) -> sched.Latch:
        done = job.ticket.done
        with self._lock:
            thread = self._thread
            if thread is None or not thread.is_alive():
                # each thread reads its own queue: one given up (``give_up``) keeps its old one
                thread = sched.Thread(target=self._loop, args=(self._queue,), name="harness-executor", daemon=True)
                self._thread = thread
                thread.start()
            self._last = job.ticket
            self._queue.put((job, done))
        return done

    def _loop(self, jobs: sched.SimpleQueue) -> None:
        while True:
            job, done = jobs.get()
            if job is None:  # shutdown
                done.set()
                return
            self._running = job.ticket
            try:
                job()
            finally:
                if self._running is job.ticket:  # a given-up thread that returns late clears nothing
                    self._running = None
                done.set()
            # the finished execution's inputs and outputs must not live on in this frame while
            # it waits for the next one (a value nothing else holds would stay on the device)
            job = done = None

    def give_up(self, what: str, ticket: Ticket | None, limit: float, detail: str = "") -> ExecutionTimeoutError:
        """A wait passed its deadline: the execution the executor thread is stuck in, and every
        one queued behind it, fail with the returned error (their values raise it when read),
        and the next submission starts a fresh executor thread. The stuck thread is left to
        JAX (it cannot be interrupted); if it ever returns, it finds its queue closed."""
        with self._lock:
            thread, stuck, queued = self._thread, self._running, self._queue
            self._queue = sched.SimpleQueue(name="executions")
            self._thread = None
            self._last = None
        abandoned: list[Any] = []
        stuck_job = stuck.job() if stuck is not None else None
        if stuck_job is not None:
            abandoned.append(stuck_job)
        while not queued.empty():
            job, done = queued.get_nowait()
            if job is not None:
                abandoned.append(job)
            done.set()
        queued.put((None, sched.Latch(name="closed")))
        subject = stuck or ticket
        since = ""
        if subject is not None and subject.dispatched is not None:
            since = f", launched {time.monotonic() - subject.dispatched:.1f} s ago"
        head = f"{what}: " + (f"{subject.describe()}{since} has not completed" if subject else "the executions")
        parts = [
            f"{head} within {limit:g} s (the runtime's wait_timeout: xr.configure(wait_timeout=...) "
            "or HARNESS_WAIT_TIMEOUT)" + (f"; {detail}" if detail else ""),
        ]
        if ticket is not None and subject is not ticket:
            parts.append(f"the value waited for comes from {ticket.describe()}, queued behind it")
        if abandoned:
            parts.append(f"{len(abandoned)} execution(s) fail with this error, the stuck one and those queued behind it")
        name = thread.name if thread is not None else "executor"
        error = ExecutionTimeoutError(
            ". ".join(parts) + f". The executor thread ({name}) is at:\n{executor_stack(thread)}"
        )
        for job in abandoned:
            job.give_up(error)
        return error

    def shutdown(self) -> None:
        """Drain and stop the thread before the interpreter tears JAX down under it; then let
        the closures it started finish, so that none outlives a run into the next."""
        with self._lock:
            thread = self._thread
            done: sched.Latch | None = None
            if thread is not None and thread.is_alive():
                done = sched.Latch(name="shutdown")
                self._queue.put((None, done))
        if thread is not None and done is not None:
            done.wait(timeout=30)
            thread.join(timeout=30)
        closures, self._closures = self._closures, []
        for closure in closures:
            closure.join(timeout=30)

    def restart(self) -> None:
        """Before a controlled run: stop the thread started outside it and start from an empty
        queue, so that the run's first submission starts the executor as one of its threads."""
        self.shutdown()
        with self._lock:
            self._queue = sched.SimpleQueue(name="executions")
            self._thread = None
            self._last = None
            self._running = None

    def stop(self) -> None:
        """After a controlled run: stop the thread. What a torn-down run left queued never runs
        and what it cut short never completes, so their outputs fail (``ExecutionAbandoned``)
        and their completion is signalled: nobody waits for ever."""
        self.shutdown()
        with self._lock:
            queued = self._queue
            self._queue = sched.SimpleQueue(name="executions")
            interrupted, self._interrupted = self._interrupted, []
        for job in interrupted:
            job.abandon()
        while not queued.empty():
            job, done = queued.get_nowait()
            if job is not None:
                job.abandon()
            done.set()

    def wait_all(self, raise_errors: bool = True) -> None:
        sched.point("wait_device_ops")
        last = self._last
        if last is not None and not last.done.is_set():
            await_latch(last.done, "wait_device_ops", last)
        sched.point("wait_device_ops.client")
        operations.wait()
        failure = self.take_failure()
        if failure is not None and raise_errors:
            raise failure


worker = Worker()
atexit.register(worker.shutdown)
sched.on_activate(worker.restart)
sched.on_deactivate(worker.stop)
deadlines.on_give_up(worker.give_up)

# what the failure-safety invariant reads of this module (``harness.runtime.seams``)
seams.register_lock("executor thread lock", worker._lock)
seams.register_lock("operation tracker lock", operations._lock)
seams.register_state("failure", lambda: worker._failure)
