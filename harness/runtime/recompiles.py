"""Why a step compiled: its program against the closest one compiled before it.

A compile the user did not expect is the runtime's commonest slowdown, and a compile count says
only that it happened. PyTorch/XLA answers with its debug mode's compilation cause, JAX with
``jax_explain_cache_misses``; here every compile (a cache miss of ``executor``) is compared,
program entry by program entry, with the most similar of the last programs of the same size: which
input came with another shape, dtype or layout, which op changed, which requested output layout
or donation differs. ``last_compile_reason()`` returns the latest such text, and each one is
logged at INFO on the ``harness.runtime.recompiles`` logger.

Only a compile pays for this (a comparison of the program it builds anyway); a step that finds
its program does nothing here.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np

from harness.runtime import ir, seams

log = logging.getLogger(__name__)

#: how many earlier programs a compile is compared with
RECENT = 32
#: how many differences a reason names before it says how many more there are
SHOWN = 3


def _layout(sharding: Any) -> str:
    """A layout in words: its spec and the mesh it lives on (axes, sizes, device order)."""
    if sharding is None:
        return "no layout"
    mesh = getattr(sharding, "mesh", None)
    spec = getattr(sharding, "spec", None)
    if mesh is None or spec is None:
        return str(sharding)
    axes = ", ".join(f"{name!r}: {size}" for name, size in mesh.shape.items())
    devices = tuple(int(d.id) for d in np.asarray(mesh.devices).reshape(-1))
    what = "replicated" if sharding.is_fully_replicated else f"split {tuple(spec)}"
    return f"{what} on mesh ({axes}) over devices {devices}"


class _Program:
    """What one compiled program was derived from: its program entries (``ir.Program``: an input
    with its index and description, a packed scalar, or an op with its attributes, operand
    positions and layout constraint), its outputs, the requested layouts and the donations."""

    __slots__ = ("entries", "roots", "requested", "donated")

    def __init__(self, program: ir.Program, roots: tuple[int, ...], requested: Sequence[Any], donated: tuple[int, ...]) -> None:
        self.entries = program
        self.roots = roots
        self.requested = tuple(requested)
        self.donated = donated

    def differences(self, earlier: _Program) -> list[str]:
        """What differs from ``earlier`` (a program of as many entries), in words."""
        out: list[str] = []
        for i, (now, before) in enumerate(zip(self.entries, earlier.entries, strict=True)):
            if now == before:
                continue
            if now[0] == before[0] == ir.IN and now[1] == before[1]:
                (_, aval, layout), (_, was_aval, was_layout) = now[2], before[2]
                what = f"input {now[1]}"
                if aval != was_aval:
                    out.append(f"{what} is {ir.aval_text(aval)}, was {ir.aval_text(was_aval)}")
                else:
                    out.append(f"{what} ({ir.aval_text(aval)}) is laid out {_layout(layout)}, was {_layout(was_layout)}")
            elif now[0] == before[0] and now[0] not in (ir.IN, ir.SCALAR) and now[1:3] == before[1:3]:
                out.append(f"node {i} ({now[0]}) constrains its layout to {_layout(now[3])}, was {_layout(before[3])}")
            else:
                out.append(f"node {i} is {_entry(now)}, was {_entry(before)}")
        if self.roots != earlier.roots:
            out.append(f"the outputs are nodes {self.roots}, were {earlier.roots}")
        for k, (now, before) in enumerate(zip(self.requested, earlier.requested, strict=True)):
            if now != before:
                out.append(f"output {k} is requested {_layout(now)}, was {_layout(before)}")
        if self.donated != earlier.donated:
            out.append(f"the donated inputs are {list(self.donated)}, were {list(earlier.donated)}")
        return out


def _entry(entry: tuple) -> str:
    if entry[0] == ir.IN:
        return f"input {entry[1]} ({ir.aval_text(entry[2][1])})"
    if entry[0] == ir.SCALAR:
        return f"a Python scalar (element {entry[1][1]} of input {entry[1][0]})"
    return f"{entry[0]} of nodes {list(entry[2])}"


_recent: deque[_Program] = deque(maxlen=RECENT)
_lock = threading.Lock()
_last: str | None = None


def note(entries: ir.Program, roots: tuple[int, ...], requested: Sequence[Any], donated: tuple[int, ...]) -> str:
    """Compare a program about to be compiled with the closest earlier one; returns (and keeps,
    and logs) the reason."""
    global _last
    program = _Program(entries, roots, requested, donated)
    with _lock:
        same_size = [p for p in _recent if len(p.entries) == len(program.entries) and len(p.requested) == len(program.requested)]
        _recent.append(program)
    if not same_size:
        reason = f"a new program: no recent one has {len(program.entries)} nodes and {len(program.requested)} outputs"
    else:
        found = min((program.differences(p) for p in same_size), key=len)
        if not found:
            reason = "the same program as a recent one, whose executable is no longer cached"
        else:
            shown = "; ".join(found[:SHOWN])
            more = f"; and {len(found) - SHOWN} more" if len(found) > SHOWN else ""
            reason = f"compiled again: {shown}{more}"
    _last = reason
    log.info("%s", reason)
    return reason


def last_compile_reason() -> str | None:
    """Why the runtime's latest compile happened, in words; None before the first."""
    return _last


def forget() -> None:
    """Drop what earlier programs looked like (with the executable cache they describe)."""
    global _last
    with _lock:
        _recent.clear()
        _last = None


def _notes() -> tuple[Any, ...]:
    with _lock:
        return tuple(_recent)


# what the failure-safety invariant reads of this module (``harness.runtime.seams``)
seams.register_lock("recompile notes lock", _lock)
seams.register_state("notes", _notes)
seams.register_state("last_reason", last_compile_reason)
