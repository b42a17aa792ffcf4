"""The figures of one finished ``xharness run``, read from what the run wrote, never estimated.

A run's time is judged by how well it keeps its process slots busy, not by its wall time alone:
a run that leaves one core idle for its last half minute is as long as one that works twice as
hard. So next to the wall time come the cell-seconds (every second a cell's process held a slot)
and what is left of ``cores x wall``: the idle core-seconds. Everything comes from the run's own
``matrix.json`` (its wall, its ``-j``, each cell's test time and overhead) and its cells' JUnit
files (each cell's process count, a property of every record).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.report import properties as prop
from harness.report.junit import ReportInputError, read_records


class RunFiguresError(Exception):
    """A directory without a whole run summary; the message names the file."""


@dataclass(frozen=True)
class RunFigures:
    """One run. ``cell_seconds``: per cell that ran, its tests and overhead (a split cell's parts
    each counted: the sum of their walls) times the slots it held (its processes, at most
    ``cores``). ``idle_core_seconds``: ``cores x wall - cell_seconds``."""

    wall: float
    cores: int
    cell_seconds: float
    idle_core_seconds: float
    tests: int
    tests_per_second: float
    cells: int

    def as_dict(self) -> dict[str, Any]:
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in asdict(self).items()}


def read_figures(out_dir: Path) -> RunFigures:
    """The figures of the run written to ``out_dir``; :class:`RunFiguresError` when it holds none."""
    summary = out_dir / "matrix.json"
    try:
        data = json.loads(summary.read_text(encoding="utf-8"))
        wall, cores, rows = float(data["wall"]), int(data["jobs"]), list(data["cells"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RunFiguresError(f"{summary}: no run summary there ({exc})") from exc
    ran = [row for row in rows if not row.get("skipped")]
    occupied = sum(_cell_seconds(row) * min(cores, _processes(out_dir, str(row["cell"]))) for row in ran)
    tests = sum(sum(int(n) for n in (row.get("counts") or {}).values()) for row in ran)
    return RunFigures(
        wall=wall,
        cores=cores,
        cell_seconds=occupied,
        idle_core_seconds=cores * wall - occupied,
        tests=tests,
        tests_per_second=tests / wall if wall > 0 else 0.0,
        cells=len(ran),
    )


def _cell_seconds(row: dict[str, Any]) -> float:
    """A cell's seconds in its processes: its test time plus its overhead, which for a split cell
    is its parts' own overheads summed (``matrix.json`` keeps it so), hence its parts' walls."""
    return float(row["test_time"]) + float(row["overhead"])


def _processes(out_dir: Path, cell: str) -> int:
    """The processes the cell ran as: the ``processes`` property its records carry; 1 when its
    JUnit file says nothing (a cell that ran one process writes it as ``1`` too)."""
    try:
        records = read_records(out_dir / "junit" / f"{cell}.xml")
    except (OSError, ReportInputError):
        return 1
    found = next((r.properties.get(prop.PROCESSES) for r in records if r.properties.get(prop.PROCESSES)), "1")
    try:
        return max(1, int(found or "1"))
    except ValueError:
        return 1
