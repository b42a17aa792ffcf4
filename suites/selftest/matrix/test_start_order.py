"""Which cells start first and how many at once: cells of several processes before all others
(each needs several slots at once), then the longest first by the last run, a cell it did not
have taken as the longest, else the largest by shape; one at a time, the matrix's order. And the
slots a run has by default: the cores this process may use, never fewer than one.
"""

from __future__ import annotations

import os

import pytest

from harness.matrix import schedule
from harness.matrix.config import Cell
from harness.matrix.schedule import default_jobs, start_order

pytestmark = pytest.mark.cell_independent


def _names(cells: list[Cell]) -> list[str]:
    return [c.name for c in cells]


def test_cells_of_several_processes_start_first_then_the_longest() -> None:
    cells = [Cell("short"), Cell("ranks", devices=4, processes=2), Cell("long"), Cell("new")]
    previous = {"short": 5.0, "long": 50.0, "ranks": 1.0}
    assert _names(start_order(cells, 2, previous)) == ["ranks", "new", "long", "short"]


def test_with_no_last_run_the_largest_by_shape_start_first() -> None:
    cells = [Cell("one", devices=1), Cell("eight", devices=8), Cell("ranks", devices=4, processes=2),
             Cell("four", devices=4, paths=("a", "b", "c"))]
    assert _names(start_order(cells, 2, {})) == ["ranks", "four", "eight", "one"]


def test_one_slot_runs_the_cells_in_the_matrixs_order() -> None:
    cells = [Cell("one", devices=1), Cell("eight", devices=8)]
    assert _names(start_order(cells, 1, {})) == ["one", "eight"]


def test_the_default_slots_are_one_more_than_the_cores_this_process_may_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    assert schedule.cores() == 3 and default_jobs() == 4
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(), raising=False)
    assert schedule.cores() == 1 and default_jobs() == 2

    def unsupported(pid: int) -> set[int]:
        raise OSError("not here")

    monkeypatch.setattr(os, "sched_getaffinity", unsupported, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    assert schedule.cores() == 6 and default_jobs() == 7
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert schedule.cores() == 1 and default_jobs() == 2
    monkeypatch.delattr(os, "sched_getaffinity")
    monkeypatch.setattr(os, "cpu_count", lambda: 5)
    assert schedule.cores() == 5 and schedule.default_jobs() == 6
