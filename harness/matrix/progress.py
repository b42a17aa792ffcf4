"""One-line progress updates on stderr while a matrix run goes on.

A CI log is read after the fact and a terminal is watched live; both want the same few facts
(which cell, how many tests done out of how many, failures so far, elapsed) without a line per
test. Updates are throttled; a failure, a crash and a cell boundary are always printed.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, total_cells: int, stream: TextIO | None = None, interval: float = 5.0) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.interval = interval
        self.total_cells = total_cells
        self.cells_done = 0
        self.failures = 0  # over the whole run
        self.started = time.monotonic()
        self.cell = ""
        self.done = 0
        self.total: int | None = None
        self.cell_failures = 0
        self.phase = ""  # "" for the main pass, "rerun N" while rerunning failures
        self._last = 0.0

    def _emit(self, text: str) -> None:
        elapsed = time.monotonic() - self.started
        print(f"[xharness {elapsed:7.1f}s] {text}", file=self.stream, flush=True)
        self._last = time.monotonic()

    def _line(self) -> str:
        total = "?" if self.total is None else str(self.total)
        phase = f" {self.phase}" if self.phase else ""
        return (
            f"cell {self.cell} ({self.cells_done + 1}/{self.total_cells}){phase}: {self.done}/{total} tests,"
            f" {self.cell_failures} failed; run: {self.failures} failed"
        )

    def cell_started(self, cell: str, description: str) -> None:
        self.cell, self.done, self.total, self.cell_failures, self.phase = cell, 0, None, 0, ""
        self._emit(f"cell {cell} ({self.cells_done + 1}/{self.total_cells}) starting: {description}")

    def cell_skipped(self, cell: str, reason: str) -> None:
        self.cells_done += 1
        self._emit(f"cell {cell} skipped: {reason}")

    def rerun_started(self, round_no: int, count: int) -> None:
        """Reruns count separately: the run's failure total stays the main pass's."""
        self.phase, self.done, self.total, self.cell_failures = f"rerun {round_no}", 0, count, 0
        self._emit(f"{self.cell}: rerun {round_no} of {count} failed test(s)")

    def collected(self, count: int) -> None:
        if self.total is None:
            self.total = count

    def test_done(self, nodeid: str, outcome: str) -> None:
        self.done += 1
        if outcome in ("failed", "error"):
            self.cell_failures += 1
            if not self.phase:
                self.failures += 1
            self._emit(f"{outcome.upper()} {nodeid} [{self.cell}]")
            self._emit(self._line())
        elif time.monotonic() - self._last >= self.interval:
            self._emit(self._line())

    def note(self, text: str) -> None:
        self._emit(f"{self.cell}: {text}")

    def cell_finished(self, cell: str, summary: str) -> None:
        self.cells_done += 1
        self._emit(f"cell {cell} done: {summary}")
