"""SIGTERM handled as Ctrl-C by the commands that supervise cells (``run``, ``releases``).

A cancelled CI job sends SIGTERM. Turned into :class:`KeyboardInterrupt`, it takes the path
Ctrl-C takes: every launch stops the process groups it started (they run in sessions of their
own and would otherwise outlive the command) and the results gathered so far are written. It
lives apart from both commands so that each imports it, and neither imports the other for it.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


def interrupt(signum: int, frame: object) -> None:
    """The SIGTERM handler: raise what Ctrl-C raises, naming the signal."""
    raise KeyboardInterrupt(f"signal {signum}")


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises :class:`KeyboardInterrupt` inside the block; the handler that was there
    before comes back after it, so a caller's own handling (pytest's, an embedding program's)
    is left as it was."""
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
