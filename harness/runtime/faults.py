"""Fault switches: each re-creates one upstream bug inside the real code path.

A switch is off by default. ``inject(name)`` turns it on for a ``with`` block (nesting and threads
are fine: the state is a counter per switch); ``HARNESS_FAULTS=a,b`` turns switches on for the
whole process, which is how a matrix cell or a subprocess repro gets them. The code that carries a
fix asks ``active(name)`` at the exact point where the upstream code went wrong, so the injected
run follows the buggy mechanism rather than raising a canned error.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from harness import settings
from harness.runtime import seams

# the switches' names and the fixes they undo are declared in ``harness.switches``, below every
# room, so that the settings can check ``HARNESS_FAULTS`` without importing the runtime; they are
# this module's public names too
from harness.switches import (
    ALIASED_SAVE,
    DELETED_SHARD,
    DOUBLE_DISCOVERY,
    EXPANDED_GRAD_ACCUMULATION,
    HOST_ALIASING,
    LOST_SHARDING,
    PARTIAL_SYNC_DONATION,
    RACE_ON_HANDLES,
    SHARDED_READ_COMPILES,
    STALE_ON_TIMEOUT,
    SWITCHES,
    UNHASHABLE_SPEC,
    WAIT_GAP,
)

__all__ = [
    "ALIASED_SAVE",
    "DELETED_SHARD",
    "DOUBLE_DISCOVERY",
    "EXPANDED_GRAD_ACCUMULATION",
    "HOST_ALIASING",
    "LOST_SHARDING",
    "PARTIAL_SYNC_DONATION",
    "RACE_ON_HANDLES",
    "SHARDED_READ_COMPILES",
    "STALE_ON_TIMEOUT",
    "SWITCHES",
    "UNHASHABLE_SPEC",
    "WAIT_GAP",
    "active",
    "enabled",
    "inject",
]

_lock = threading.Lock()
_counts: dict[str, int] = {}


#: the last parsed ``HARNESS_FAULTS`` (raw text, names): ``active`` is asked on hot paths (every
#: kernel guard exit), so the variable is parsed again only when its text changed; reading it on
#: each call keeps a change made later in the process (a test's monkeypatch) effective at once
_env_cache: tuple[str, frozenset[str]] = ("", frozenset())


def _from_env() -> frozenset[str]:
    global _env_cache
    raw = settings.raw("HARNESS_FAULTS")
    cached_raw, cached = _env_cache
    if raw == cached_raw:
        return cached
    names = frozenset(n.strip() for n in raw.split(",") if n.strip())
    unknown = names - SWITCHES.keys()
    if unknown:
        raise ValueError(
            f"HARNESS_FAULTS names unknown fault switch(es) {sorted(unknown)}; "
            f"known: {sorted(SWITCHES)}"
        )
    _env_cache = (raw, names)
    return names


def _check(name: str) -> None:
    if name not in SWITCHES:
        raise ValueError(f"unknown fault switch {name!r}; known: {sorted(SWITCHES)}")


def active(name: str) -> bool:
    """Whether the named bug is switched on right now."""
    return _counts.get(name, 0) > 0 or name in _from_env()


def enabled() -> frozenset[str]:
    """Every switch that is on."""
    return frozenset(n for n in SWITCHES if active(n))


@contextmanager
def inject(name: str) -> Iterator[None]:
    """Turn one fault switch on for the duration of the block."""
    _check(name)
    with _lock:
        _counts[name] = _counts.get(name, 0) + 1
    try:
        yield
    finally:
        with _lock:
            _counts[name] -= 1


# a failed operation must leave this lock released (``harness.runtime.seams``)
seams.register_lock("fault switch lock", _lock)
