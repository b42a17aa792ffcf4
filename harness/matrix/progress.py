"""One-line progress updates on stderr while a matrix run goes on.

A CI log is read after the fact and a terminal is watched live; both want the same few facts
(which cell, how many tests done out of how many, failures so far, elapsed) without a line per
test. Updates are throttled; a failure, a crash and a cell boundary are always printed.

Cells may run at once (``xharness run -j N``): every line names its cell, whole lines are written
under a lock (never interleaved), and the periodic line lists every running cell, e.g.
``running 2/7: cpu-8 40/351, cpu-3 12/320; done 1, run: 0 failed``.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from typing import TextIO


@dataclass
class _CellState:
    index: int  # 1-based, in the order cells were started
    done: int = 0
    total: int | None = None
    failures: int = 0
    phase: str = ""  # "" for the main pass, "rerun N" while rerunning failures


class Progress:
    def __init__(self, total_cells: int, stream: TextIO | None = None, interval: float = 5.0) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.interval = interval
        self.total_cells = total_cells
        self.cells_done = 0
        self.failures = 0  # over the whole run
        self.started = time.monotonic()
        self.cell = ""  # the cell started last (the one the cell-less methods update)
        self.running: dict[str, _CellState] = {}
        self._started_count = 0
        self._last = 0.0
        self._lock = threading.RLock()

    # -- per-cell view --------------------------------------------------------------------------
    def for_cell(self, cell: str) -> CellProgress:
        """The same updates bound to one cell, for a cell that runs alongside others."""
        return CellProgress(self, cell)

    # -- output ---------------------------------------------------------------------------------
    def _emit(self, text: str) -> None:
        with self._lock:
            elapsed = time.monotonic() - self.started
            print(f"[xharness {elapsed:7.1f}s] {text}", file=self.stream, flush=True)
            self._last = time.monotonic()

    def _state(self, cell: str | None) -> tuple[str, _CellState]:
        name = cell if cell is not None else self.cell
        state = self.running.get(name)
        if state is None:  # updates for a cell never announced: keep them countable
            self._started_count += 1
            state = self.running[name] = _CellState(self._started_count)
        return name, state

    def _line(self, cell: str | None = None) -> str:
        if len(self.running) > 1 and cell is None:
            parts = []
            for name, state in self.running.items():
                total = "?" if state.total is None else str(state.total)
                phase = f" {state.phase}" if state.phase else ""
                parts.append(f"{name}{phase} {state.done}/{total}")
            return (f"running {len(self.running)}: {', '.join(parts)}; "
                    f"done {self.cells_done}/{self.total_cells}, run: {self.failures} failed")
        name, state = self._state(cell)
        total = "?" if state.total is None else str(state.total)
        phase = f" {state.phase}" if state.phase else ""
        return (
            f"cell {name} ({state.index}/{self.total_cells}){phase}: {state.done}/{total} tests,"
            f" {state.failures} failed; run: {self.failures} failed"
        )

    # -- cell boundaries -------------------------------------------------------------------------
    def cell_started(self, cell: str, description: str) -> None:
        with self._lock:
            self._started_count += 1
            self.running[cell] = _CellState(self._started_count)
            self.cell = cell
            self._emit(f"cell {cell} ({self._started_count}/{self.total_cells}) starting: {description}")

    def cell_skipped(self, cell: str, reason: str) -> None:
        """A cell this machine cannot run: said once, and out of the count of cells that run
        (so that the first cell to start is 1 of the cells that will run, whatever was skipped)."""
        with self._lock:
            self.total_cells = max(self._started_count, self.total_cells - 1)
            self._emit(f"cell {cell} skipped: {reason}")

    def cell_finished(self, cell: str, summary: str) -> None:
        with self._lock:
            self.cells_done += 1
            self.running.pop(cell, None)
            self._emit(f"cell {cell} done: {summary}")

    # -- updates within a cell (``cell`` None: the cell started last) -----------------------------
    def rerun_started(self, round_no: int, count: int, cell: str | None = None) -> None:
        """Reruns count separately: the run's failure total stays the main pass's."""
        with self._lock:
            name, state = self._state(cell)
            state.phase, state.done, state.total, state.failures = f"rerun {round_no}", 0, count, 0
            self._emit(f"{name}: rerun {round_no} of {count} failed test(s)")

    def collected(self, count: int, cell: str | None = None) -> None:
        with self._lock:
            _, state = self._state(cell)
            if state.total is None:
                state.total = count

    def test_done(self, nodeid: str, outcome: str, cell: str | None = None) -> None:
        with self._lock:
            name, state = self._state(cell)
            state.done += 1
            if outcome in ("failed", "error"):
                state.failures += 1
                if not state.phase:
                    self.failures += 1
                self._emit(f"{outcome.upper()} {nodeid} [{name}]")
                self._emit(self._line(name))
            elif time.monotonic() - self._last >= self.interval:
                self._emit(self._line(None if len(self.running) > 1 else name))

    def note(self, text: str, cell: str | None = None) -> None:
        with self._lock:
            name = cell if cell is not None else self.cell
            self._emit(f"{name}: {text}")


class CellProgress:
    """:class:`Progress` seen from one cell: the methods a cell's supervisor calls."""

    def __init__(self, progress: Progress, cell: str) -> None:
        self.progress = progress
        self.cell = cell

    def rerun_started(self, round_no: int, count: int) -> None:
        self.progress.rerun_started(round_no, count, cell=self.cell)

    def collected(self, count: int) -> None:
        self.progress.collected(count, cell=self.cell)

    def test_done(self, nodeid: str, outcome: str) -> None:
        self.progress.test_done(nodeid, outcome, cell=self.cell)

    def note(self, text: str) -> None:
        self.progress.note(text, cell=self.cell)
