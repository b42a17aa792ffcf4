"""Schedule points and the one piece of global state every other module reads.

``point()`` sits on hot paths of the runtime (every execution, every handle read), so with nothing
active it must cost one global read and a return. Everything else (who participates, what a point
means) belongs to the active controller, found through ``controller``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

# What a controller tells a primitive after a blocking point. READY: the condition the thread
# waited for holds, go ahead without blocking. TIMEOUT: the scheduler let the wait expire. FREE:
# the calling thread is not controlled (or no longer is), so do the real, possibly blocking, thing.
READY = 0
TIMEOUT = 1
FREE = 2


class Controller(Protocol):
    """What primitives and ``point()`` need from whatever is active (controlled run or stress)."""

    def point(self, name: str, context: dict[str, Any]) -> None:
        """A user schedule point."""

    def sync(self, name: str, obj: object) -> None:
        """The point just before a non-blocking synchronization operation (set, put, release).

        Unlike ``point``, it never refuses to return while a run is being torn down: the operation
        after it must happen, or a lock would stay held by a thread that is unwinding."""

    def block(
        self, name: str, obj: object, ready: Callable[[], bool] | None, timeout: float | None
    ) -> int:
        """The point before an operation that may block until ``ready()``; returns an outcome."""

    def adopt(self, thread: threading.Thread) -> Adoption | None:
        """A scheduler-aware thread is being started: how to run it, or None to leave it alone."""


class Adoption(Protocol):
    """A thread taken over by a controller when it was started."""

    def run(self, target: Callable[[], None]) -> None:
        """Run the thread's own ``run`` (``target``), on the new thread, the controller's way."""

    def cancel(self) -> None:
        """The thread could not be started after all."""

    def finished(self) -> bool:
        """Whether the thread is done, as far as the controller's schedule is concerned."""


#: the controller in charge of the run now, if any (read on every schedule point and primitive:
#: an attribute, not a call)
controller: Controller | None = None
#: ``.task``: the calling thread's participant record, if any (the scheduler keeps it)
participants = threading.local()


def point(name: str, /, **context: Any) -> None:
    """A place where the scheduler may switch to another thread.

    Without an active scheduler this is a no-op. Under a controlled run the calling participant
    stops here and the strategy picks which thread runs next; under stress it sleeps a little.
    Put one wherever another thread's interleaving matters and no scheduler-aware primitive is
    involved, typically just before reading or writing shared state.
    """
    ctl = controller
    if ctl is None:
        return
    ctl.point(name, context)


def active() -> Controller | None:
    """The controller now in charge, if any (for tools that report on a run)."""
    return controller


def activate(ctl: Controller) -> None:
    global controller
    if controller is not None:
        raise RuntimeError("a schedule controller is already active: runs cannot be nested")
    controller = ctl


def deactivate(ctl: Controller) -> None:
    global controller
    if controller is ctl:
        controller = None
