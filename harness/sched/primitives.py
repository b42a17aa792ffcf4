"""Drop-in ``threading``/``queue`` primitives that a scheduler can see through.

Each wraps the real primitive, which always holds the true state. With no scheduler active every
method is the real one after a single global read. Under a controlled run, a participant only ever
uses the non-blocking form of the real operation: where it would block, it parks at a schedule
point with a predicate (is the event set, is the lock free, is the queue non-empty) and the
scheduler resumes it once the predicate holds, or lets its timeout expire if it gave one. Every
synchronization operation is a schedule point just *before* it happens (waits, acquires, gets,
but also sets, releases and puts), as in CHESS; reads of state (``is_set``, ``locked``, ``empty``)
are not, so code that polls them needs an explicit ``point()``.

Threads outside the run (ones that existed before it, or that the runtime's libraries own) use
the real operations throughout; a participant that waits for such a thread to act is not seen to
make progress, so objects shared with them are best left to plain ``threading``.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any

from harness.sched import points as _points
from harness.sched.points import READY, TIMEOUT, Adoption, Controller

_get_ident = threading.get_ident


def _label(kind: str, obj: object, name: str | None, state: str) -> str:
    return f"<sched.{kind} {name + ' ' if name else ''}{state} at {id(obj):#x}>"


class Event:
    """``threading.Event``; ``wait`` is a blocking schedule point, ``set``/``clear`` points."""

    __slots__ = ("_event", "_name", "__weakref__")

    def __init__(self, *, name: str | None = None) -> None:
        self._event = threading.Event()
        self._name = name

    def is_set(self) -> bool:
        return self._event.is_set()

    def set(self) -> None:
        ctl = _points.controller
        if ctl is not None:
            ctl.sync("Event.set", self)
        self._event.set()

    def clear(self) -> None:
        ctl = _points.controller
        if ctl is not None:
            ctl.sync("Event.clear", self)
        self._event.clear()

    def wait(self, timeout: float | None = None) -> bool:
        ctl = _points.controller
        if ctl is not None:
            outcome = ctl.block("Event.wait", self, self._event.is_set, timeout)
            if outcome == READY:
                return True
            if outcome == TIMEOUT:
                return False
        return self._event.wait(timeout)

    def __repr__(self) -> str:
        return _label("Event", self, self._name, "set" if self._event.is_set() else "unset")


_latch_lock = threading.Lock()  # makes a latch's lazy wake-up lock, and its setting, one at a time


class Latch:
    """An ``Event`` that is set once and never cleared: a value that becomes ready.

    One is made for every output of every execution, and most are set before anybody waits for
    them; a ``threading.Event`` (a condition over a lock, 2.5 microseconds to make) is mostly never
    waited on. A latch is a flag, and a plain lock held until it is set, made only when a waiter
    finds the flag down. Under a controlled run it is the same schedule point as an ``Event``
    (``Event.set``, ``Event.wait``), so schedules and replays do not tell the two apart.
    """

    __slots__ = ("_flag", "_gate", "_name", "__weakref__")

    def __init__(self, *, name: str | None = None) -> None:
        self._flag = False
        self._gate: Any = None  # a lock held until the latch is set, once a waiter needed it
        self._name = name

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        ctl = _points.controller
        if ctl is not None:
            ctl.sync("Event.set", self)
        with _latch_lock:
            if self._flag:
                return
            self._flag = True
            gate = self._gate
        if gate is not None:
            gate.release()

    def wait(self, timeout: float | None = None) -> bool:
        ctl = _points.controller
        if ctl is not None:
            outcome = ctl.block("Event.wait", self, self.is_set, timeout)
            if outcome == READY:
                return True
            if outcome == TIMEOUT:
                return False
        if self._flag:
            return True
        with _latch_lock:
            if self._flag:
                return True
            gate = self._gate
            if gate is None:
                gate = self._gate = threading.Lock()
                gate.acquire()
        if gate.acquire(True, -1 if timeout is None else timeout):
            gate.release()  # the next waiter passes too
        return self._flag

    def __repr__(self) -> str:
        return _label("Latch", self, self._name, "set" if self._flag else "unset")


def _acquire(
    ctl: Controller,
    owner: object,
    lock: Any,
    name: str,
    blocking: bool,
    timeout: float,
) -> bool:
    """Acquire ``lock`` (a real ``threading.Lock``) the scheduler's way."""
    if not blocking:
        if timeout != -1:
            raise ValueError("can't specify a timeout for a non-blocking call")
        ctl.block(name, owner, None, None)
        return bool(lock.acquire(False))
    if timeout < 0 and timeout != -1:
        raise ValueError("timeout value must be a non-negative number")

    def free() -> bool:
        return not lock.locked()

    wait = None if timeout == -1 else timeout
    while True:
        outcome = ctl.block(name, owner, free, wait)
        if outcome == READY:
            if lock.acquire(False):
                return True
            continue  # a thread outside the run took it in between: wait again
        if outcome == TIMEOUT:
            return False
        return bool(lock.acquire(True, timeout))


class Lock:
    """``threading.Lock``; ``acquire`` is a blocking schedule point, ``release`` a point."""

    __slots__ = ("_lock", "_name", "__weakref__")

    def __init__(self, *, name: str | None = None) -> None:
        self._lock = threading.Lock()
        self._name = name

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        ctl = _points.controller
        if ctl is not None:
            return _acquire(ctl, self, self._lock, "Lock.acquire", blocking, timeout)
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        ctl = _points.controller
        if ctl is not None:
            ctl.sync("Lock.release", self)
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        return _label("Lock", self, self._name, "locked" if self._lock.locked() else "unlocked")


class RLock:
    """``threading.RLock``, written (like CPython's pure-Python one) over a plain lock, so that
    the scheduler can tell whether another thread could take it."""

    __slots__ = ("_lock", "_owner", "_count", "_name", "__weakref__")

    def __init__(self, *, name: str | None = None) -> None:
        self._lock = threading.Lock()
        self._owner: int | None = None
        self._count = 0
        self._name = name

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        me = _get_ident()
        if self._owner == me:
            if not blocking and timeout != -1:
                raise ValueError("can't specify a timeout for a non-blocking call")
            self._count += 1
            return True
        ctl = _points.controller
        if ctl is not None:
            ok = _acquire(ctl, self, self._lock, "RLock.acquire", blocking, timeout)
        else:
            ok = self._lock.acquire(blocking, timeout)
        if ok:
            self._owner = me
            self._count = 1
        return ok

    def release(self) -> None:
        if self._owner != _get_ident():
            raise RuntimeError("cannot release un-acquired lock")
        if self._count > 1:
            self._count -= 1
            return
        ctl = _points.controller
        if ctl is not None:
            ctl.sync("RLock.release", self)
        self._count = 0
        self._owner = None
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    def _is_owned(self) -> bool:
        return self._owner == _get_ident()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        state = f"held x{self._count}" if self._owner is not None else "unlocked"
        return _label("RLock", self, self._name, state)


class SimpleQueue:
    """``queue.SimpleQueue``; ``get`` is a blocking schedule point, ``put`` a point."""

    __slots__ = ("_queue", "_name", "__weakref__")

    def __init__(self, *, name: str | None = None) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._name = name

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        ctl = _points.controller
        if ctl is not None:
            ctl.sync("SimpleQueue.put", self)
        self._queue.put(item)

    def put_nowait(self, item: Any) -> None:
        self.put(item, False)

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        ctl = _points.controller
        if ctl is not None:
            if not block:
                ctl.block("SimpleQueue.get", self, None, None)
                return self._queue.get(False)
            if timeout is not None and timeout < 0:
                raise ValueError("'timeout' must be a non-negative number")
            while True:
                outcome = ctl.block("SimpleQueue.get", self, self._nonempty, timeout)
                if outcome == READY:
                    try:
                        return self._queue.get(False)
                    except queue.Empty:
                        continue  # a thread outside the run took the item in between
                if outcome == TIMEOUT:
                    raise queue.Empty
                break
        return self._queue.get(block, timeout)

    def get_nowait(self) -> Any:
        return self.get(False)

    def empty(self) -> bool:
        return self._queue.empty()

    def qsize(self) -> int:
        return self._queue.qsize()

    def _nonempty(self) -> bool:
        return not self._queue.empty()

    def __repr__(self) -> str:
        return _label("SimpleQueue", self, self._name, f"{self._queue.qsize()} items")


class Thread(threading.Thread):
    """``threading.Thread`` that joins the active run when a participant starts it.

    Started inside a controlled run by a participant, it is the run's next participant: it does
    not execute before the scheduler first chooses it, and ``start``/``join`` are schedule
    points. Started anywhere else it is an ordinary thread.
    """

    _sched_adoption: Adoption | None = None
    _sched_owner: Controller | None = None

    def start(self) -> None:
        ctl = _points.controller
        adoption = ctl.adopt(self) if ctl is not None else None
        if adoption is None or ctl is None:
            super().start()
            return
        run: Callable[[], None] = self.run  # a subclass's own run, when it has one
        self.__dict__["run"] = lambda: adoption.run(run)  # shadows the method for _bootstrap
        try:
            super().start()
        except BaseException:
            adoption.cancel()
            del self.__dict__["run"]
            raise
        self._sched_adoption = adoption
        self._sched_owner = ctl
        ctl.block("Thread.start", self, None, None)

    def join(self, timeout: float | None = None) -> None:
        ctl = _points.controller
        adoption = self._sched_adoption
        if ctl is not None and adoption is not None and self._sched_owner is ctl:
            outcome = ctl.block("Thread.join", self, adoption.finished, timeout)
            if outcome == TIMEOUT:
                return
            if outcome == READY:
                timeout = None  # its part in the run is over; the real thread is only exiting
        super().join(timeout)
