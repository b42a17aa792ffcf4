"""Bounded waits on executions: no wait on the device may block for ever.

A wait past ``wait_timeout`` seconds gives the stuck work up (its values fail with the error) and
raises ``ExecutionTimeoutError`` with the evidence: the program, how long ago it was launched, and
the executor thread's stack. Giving up is the executor thread's business (``harness.runtime.
worker``), which registers how it is done (``on_give_up``), so that this module never imports it.
"""

from __future__ import annotations

import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any

from harness import sched
from harness.runtime import config
from harness.runtime.errors import ExecutionTimeoutError

#: how a wait that passed its deadline gives the stuck work up: (what waited, the ticket waited
#: on, the limit, a detail) -> the error to raise; registered by the executor thread's module
_give_up: list[Callable[..., BaseException]] = []


def on_give_up(function: Callable[..., BaseException]) -> None:
    """Register how a wait that passed its deadline gives the stuck work up."""
    _give_up[:] = [function]


def give_up(what: str, ticket: Ticket | None, limit: float, detail: str = "") -> BaseException:
    """Give the stuck work up (``on_give_up``); returns the error the wait raises."""
    return _give_up[0](what, ticket, limit, detail)


class Ticket:
    """What a wait on one execution knows about it, without holding its inputs: its number, its
    program, the latch set when the executor thread is done with it, and the execution itself
    (weakly) so that a wait that gives up can fail it."""

    __slots__ = ("number", "program", "done", "job", "dispatched", "given_up", "__weakref__")

    def __init__(self, number: int, program: str) -> None:
        self.number = number
        self.program = program
        self.done = sched.Latch(name="execution done")  # set once: a latch (the same schedule point)
        self.job: Callable[[], Any] = _nobody  # the execution sets it (``Execution``)
        self.dispatched: float | None = None  # when the executor thread launched it
        self.given_up = False  # a wait gave up on it: what it does later is nobody's concern

    def describe(self) -> str:
        return f"execution {self.number} of {self.program}"


def _nobody() -> None:
    return None


def wait_timeout() -> float | None:
    """The deadline of a wait on an execution, in seconds (None: unbounded). A controlled run
    (``harness.sched``) waits without one: there its scheduler decides who runs, and a timeout
    would be a schedule choice of its own."""
    limit = config.options.wait_timeout
    if limit is None or limit <= 0 or sched.is_controlled():
        return None
    return float(limit)


def await_latch(latch: sched.Latch, what: str, ticket: Ticket | None) -> None:
    """``latch.wait()``, bounded by ``wait_timeout``: past it the stuck work is given up (its
    values fail with the error) and ``ExecutionTimeoutError`` is raised with the evidence."""
    limit = wait_timeout()
    if latch.wait(limit) or latch.is_set():
        return
    raise give_up(what, ticket, limit or 0.0)


def bounded_call(function: Callable[[], Any], what: str) -> Any:
    """``function()`` bounded by ``wait_timeout``: work that waits on other processes (a gather
    across them) blocks in native code for as long as a peer is unreachable, and gloo has no
    timeout of its own. Past the deadline ``ExecutionTimeoutError`` is raised with the stuck
    thread's stack; the thread is left to JAX, as a stuck executor thread is."""
    limit = wait_timeout()
    if limit is None:
        return function()
    box: list[Any] = []

    def run() -> None:
        try:
            box.append((True, function()))
        except BaseException as exc:  # handed to the caller
            box.append((False, exc))

    thread = threading.Thread(target=run, name=f"bounded: {what}", daemon=True)
    thread.start()
    thread.join(limit)
    if not box:
        raise ExecutionTimeoutError(
            f"{what} has not completed within {limit:g} s (the runtime's wait_timeout: "
            "xr.configure(wait_timeout=...) or HARNESS_WAIT_TIMEOUT): a process it needs is "
            f"unreachable, stopped or gone. The waiting thread is at:\n{executor_stack(thread)}"
        )
    ok, value = box[0]
    if not ok:
        raise value
    return value


def executor_stack(thread: threading.Thread | None) -> str:
    """The Python stack of ``thread`` as it is now, innermost call last."""
    if thread is None or thread.ident is None:
        return "(no executor thread)"
    frame = sys._current_frames().get(thread.ident)
    if frame is None:
        return f"(thread {thread.name} is not running)"
    return "".join(traceback.format_stack(frame)).rstrip()
