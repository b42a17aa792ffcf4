"""One layout, one key: the spelling of a sharding never makes a program new.

A layout can be written many ways: ``P('x', None)`` and ``P(('x',), None)``, an axis of size 1
named or left out (``P('x', 'y')`` and ``P('x', None)`` on a ``('x': 4, 'y': 1)`` mesh), a value
replicated over the user's mesh or over the runtime's default one, and XLA answers in its own
spelling (``P('x',)``). ``NamedSharding`` compares specs as written, so a compile cache keyed on
the sharding object compiles the same program once per spelling, which only a compile count
sees. PyTorch/XLA keys on the ``OpSharding`` XLA compiles, where every spelling of one layout is
one proto. The plan cache keys on the representative this module picks instead: the first
sharding it met with the same XLA sharding (the devices each piece lives on) and memory kind,
over the same mesh (a representative of another mesh would name its axes in a later read-back
of a layout XLA chose), or, replicated, over the same devices in the same order.
"""

from __future__ import annotations

import threading
from typing import Any

#: (sharding, ndim) -> its representative; every sharding met is a handful of objects per mesh
_chosen: dict[tuple[Any, int], Any] = {}
#: the layout's identity -> the first sharding met with it
_first: dict[tuple, Any] = {}
_lock = threading.Lock()


def representative(sharding: Any, ndim: int) -> Any:
    """The sharding that stands for every spelling of ``sharding``'s layout of an ``ndim``-d
    value (``sharding`` itself the first time its layout is met)."""
    key = (sharding, ndim)
    hit = _chosen.get(key)
    if hit is not None:
        return hit
    layout = _identity(sharding, ndim)
    with _lock:
        chosen = sharding if layout is None else _first.setdefault(layout, sharding)
        _chosen[key] = chosen
    return chosen


def _identity(sharding: Any, ndim: int) -> tuple | None:
    """What makes two shardings one layout, or None for one this module cannot read."""
    try:
        devices = tuple(int(d.id) for d in sharding._device_assignment)
        memory = getattr(sharding, "memory_kind", None)
        if sharding.is_fully_replicated:
            return ("replicated", devices, memory)
        hlo = sharding._to_xla_hlo_sharding(ndim)
    except (AttributeError, TypeError, ValueError):
        return None
    return ("split", type(sharding).__name__, getattr(sharding, "mesh", None), str(hlo), devices, memory)


def forget() -> None:
    """Drop every representative (a fresh process's state, for tests)."""
    with _lock:
        _chosen.clear()
        _first.clear()
