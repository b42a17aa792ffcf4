"""The seconds each cell's test files took, committed next to the matrix file, for a run that has
no history of its own.

A run plans from the last run written to its output directory (``matrix.json`` and the cells'
JUnit files, ``harness.matrix.schedule``). A fresh clone has none, so it could only guess each
cell's length from its shape, and a long cell guessed short started last and ran alone while the
other cores idled. This file is that history, kept in the repository as pytest-split keeps its
``.test_durations``: per cell (the same file takes other seconds in another cell: other devices,
other markers) the seconds of each test file, the unit a long cell is split by, and the seconds
one of the cell's processes takes to start. ``xharness durations`` writes it from a run's reports.

What it is not: a measure of this machine. Its seconds are those of the run it was refreshed from
(a cold one, ideally, as the runs that read it are); the plan only compares them with each other.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.matrix.config import STARTER, Matrix

#: the file's name; it sits next to the matrix file (for inline or starter cells: the project root)
FILE_NAME = "test_durations.json"
#: the layout this module writes and reads; another number is refused with a message
VERSION = 1
#: seconds a process start counts when no cell of the file says (a cell of this project: 3 to 4 s)
DEFAULT_STARTUP = 3.0
#: seconds a test file counts when no file of the file says
DEFAULT_FILE = 1.0
#: node ids of the records that stand for a cell rather than a test: no file's seconds
_CELL_RECORDS = "xharness::"


class DurationsError(Exception):
    """A durations file or a run's reports that cannot be read; the message names the file."""


@dataclass(frozen=True)
class CellDurations:
    """One cell: the seconds a process of it takes to start, and each test file's seconds."""

    startup: float
    files: dict[str, float] = field(default_factory=dict)

    @property
    def length(self) -> float:
        """The cell in one process: one start and every file."""
        return self.startup + sum(self.files.values())


@dataclass(frozen=True)
class Durations:
    """Every cell the file knows. A file or cell it does not know counts the mean of those it
    does (pytest-split's rule for a test it has not timed): a new file is as likely long as short,
    and a zero would put a new cell last."""

    cells: dict[str, CellDurations] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.cells)

    def startup(self, cell: str) -> float:
        known = self.cells.get(cell)
        if known is not None:
            return known.startup
        starts = [c.startup for c in self.cells.values()]
        return sum(starts) / len(starts) if starts else DEFAULT_STARTUP

    def file_seconds(self, cell: str, files: tuple[str, ...]) -> dict[str, float]:
        """Seconds of each of ``files`` in ``cell``: known, else the mean of the cell's known files,
        else the mean of every known file."""
        known = self.cells.get(cell, CellDurations(0.0)).files
        pool = list(known.values()) or [s for c in self.cells.values() for s in c.files.values()]
        default = sum(pool) / len(pool) if pool else DEFAULT_FILE
        return {f: known.get(f, default) for f in files}

    def length(self, cell: str, files: tuple[str, ...]) -> float:
        """The cell in one process, over the test files it runs now."""
        return self.startup(cell) + sum(self.file_seconds(cell, files).values())


def durations_path(matrix: Matrix) -> Path:
    """Where a matrix's durations live: next to its file; for the starter cells (a file of the
    package, not of the project) at the project's root."""
    return (matrix.root if matrix.path == STARTER else matrix.path.parent) / FILE_NAME


def load(path: Path) -> Durations:
    """The file's durations; empty when there is no file. :class:`DurationsError` for a file that
    is there but is not a durations file of this layout."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Durations()
    except (OSError, ValueError) as exc:
        raise DurationsError(f"{path}: cannot read the durations ({exc})") from exc
    try:
        if data.get("version") != VERSION:
            raise DurationsError(f"{path}: version {data.get('version')!r}, this harness reads {VERSION}")
        return Durations({str(name): _cell(entry) for name, entry in data["cells"].items()})
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        problem = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise DurationsError(f"{path}: not a durations file ({problem})") from exc


def _cell(entry: dict[str, Any]) -> CellDurations:
    files = {str(f): _seconds(s) for f, s in entry["files"].items()}
    return CellDurations(_seconds(entry["startup"]), files)


def _seconds(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{value!r} is not a number of seconds")
    return float(value)


def dumps(durations: Durations) -> str:
    """The file's text: cells and files sorted, tenths of a second, so a refresh diffs by line."""
    cells = {
        name: {"startup": round(c.startup, 1), "files": {f: round(s, 1) for f, s in sorted(c.files.items())}}
        for name, c in sorted(durations.cells.items())
    }
    return json.dumps({"version": VERSION, "cells": cells}, indent=1) + "\n"


def merged(old: Durations, new: Durations) -> Durations:
    """``old`` with every cell ``new`` measured replaced whole (a file that left the cell leaves
    with it); cells the run did not have keep their seconds."""
    return Durations({**old.cells, **new.cells})


def from_run(out_dir: Path, cell_files: Mapping[str, tuple[str, ...]] | None = None) -> Durations:
    """The durations a run's reports show: per cell that ran, its start-up (its time beyond the
    tests, per process it launched) and the seconds of each test file (its records' attempts).
    A file of ``cell_files`` that the cell ran no test of (its markers deselect them all) counts
    0, so that it is known as short rather than taken for a new file of the mean length.
    :class:`DurationsError` when the directory holds no run."""
    from harness.report.junit import ReportInputError, read_records

    summary = out_dir / "matrix.json"
    try:
        cells = json.loads(summary.read_text(encoding="utf-8"))["cells"]
    except FileNotFoundError:
        raise DurationsError(f"{summary}: no run there (xharness run --out {out_dir} writes it)") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DurationsError(f"{summary}: not a run summary ({exc})") from exc
    found: dict[str, CellDurations] = {}
    for cell in cells:
        if cell.get("skipped") or cell.get("interrupted"):
            continue
        junit = out_dir / "junit" / f"{cell['cell']}.xml"
        try:
            records = read_records(junit)
        except (OSError, ReportInputError) as exc:
            raise DurationsError(f"{junit}: cannot read the cell's records ({exc})") from exc
        files = dict.fromkeys((cell_files or {}).get(str(cell["cell"]), ()), 0.0)
        for record in records:
            if not record.nodeid.startswith(_CELL_RECORDS):
                file = record.nodeid.partition("::")[0]
                files[file] = files.get(file, 0.0) + record.duration
        launches = max(1, int(cell.get("launches") or 1))
        found[str(cell["cell"])] = CellDurations(max(0.0, float(cell["overhead"])) / launches, files)
    return Durations(found)
