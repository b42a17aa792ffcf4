"""How many of its examples an invariant's ready test runs in each cell of the matrix, and from
which seed.

An invariant declares one count, ``Invariant.max_examples``: the full budget, what a plain
``pytest`` run, the test job and ``ci/mutants.py`` spend. The matrix runs the same test in many
cells, and under a derandomized profile every cell used to draw the same examples from the same
seed, so a narrow cell repeated most of what the broad one checked. In a cell now:

* the cell's kind (``kind``) picks a share of the full budget from ``SHARES``, the one table of
  budgets: the cells of one kind together run about one full budget;
* the seed is the cell's own (``seed``), derived from the cell's name and the invariant, so each
  cell draws other examples and the matrix's coverage adds up instead of repeating. A run is still
  deterministic: the same cell draws the same examples on every machine, and a falsified example
  replays from its blob, or in its cell (``xharness run --cells NAME``).

Outside a cell (no ``HARNESS_CELL``) nothing changes: the full budget and hypothesis' own
derandomized seed.
"""

from __future__ import annotations

import hashlib
import math

from harness import settings
from harness.cell_shape import cell_shape

PLAIN, BROAD, NARROW, RANKS = "plain", "broad", "narrow", "ranks"

#: the share of an invariant's ``max_examples`` its ready test runs, by the kind of cell
SHARES: dict[str, float] = {
    PLAIN: 1.0,  # no cell: a plain pytest run, the test job, the mutants' runs
    BROAD: 1.0,  # one process with a plain run's devices (cpu-8, cpu-8-nofunc): the only cell of its options
    NARROW: 1 / 3,  # fewer devices (cpu-1, cpu-3, cpu-4): the three together run one full budget
    RANKS: 1 / 2,  # a rank of a multi-process cell (cpu-2x4, cpu-2slice): the two together run one
}


def broad_devices() -> int:
    """The devices per process of a broad cell: as many as a plain run asks JAX for."""
    return int(settings.read("JAX_NUM_CPU_DEVICES", {}))  # its declared default, whatever is set


def kind() -> str:
    """The kind of cell this process runs in (a key of ``SHARES``)."""
    shape = cell_shape()
    if not shape.name:
        return PLAIN
    if shape.processes > 1:
        return RANKS
    return BROAD if shape.devices >= broad_devices() else NARROW


def examples(full: int) -> int:
    """The examples of an invariant whose full budget is ``full``, in this process's cell."""
    return max(1, math.ceil(full * SHARES[kind()]))


def seed(invariant_id: str) -> int | None:
    """The seed of ``invariant_id``'s examples in this process's cell (every rank of a cell
    alike, so ranks that run a program together draw it together); None outside a cell, where
    hypothesis derives its own from the test."""
    name = cell_shape().name
    if not name:
        return None
    digest = hashlib.sha256(f"{name}\0{invariant_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big")
