"""Callbacks around every run, for code that owns long-lived threads.

A thread that was already blocked in a real queue when a run started can never become a
participant, and one left behind by a run must not leak into the next. Owners of such threads
(the runtime's executor) stop them before a run, so that they are started again as participants
inside it, and stop them again afterwards. Both kinds of callback run on the thread that called
``check_*``, with no scheduler active, so everything they do is ordinary ``threading``.
"""

from __future__ import annotations

from collections.abc import Callable

Hook = Callable[[], None]

_on_activate: list[Hook] = []
_on_deactivate: list[Hook] = []


def on_activate(callback: Hook) -> Hook:
    """Call ``callback()`` before every controlled or stress run (usable as a decorator)."""
    _on_activate.append(callback)
    return callback


def on_deactivate(callback: Hook) -> Hook:
    """Call ``callback()`` after every controlled or stress run (usable as a decorator)."""
    _on_deactivate.append(callback)
    return callback


def discard_hook(callback: Hook) -> None:
    """Forget ``callback`` wherever it was registered (missing is fine)."""
    for hooks in (_on_activate, _on_deactivate):
        while callback in hooks:
            hooks.remove(callback)


def run_activate() -> None:
    for callback in list(_on_activate):
        callback()


def run_deactivate() -> None:
    """Every callback runs even if one fails (each undoes its own state); the first error wins."""
    first: BaseException | None = None
    for callback in reversed(list(_on_deactivate)):
        try:
            callback()
        except BaseException as exc:  # re-raised below, once the others ran
            if first is None:
                first = exc
    if first is not None:
        raise first
