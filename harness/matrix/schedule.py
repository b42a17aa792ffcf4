"""How a run spends its process slots: which cells start first, which long ones are split over
two processes, and how a split cell's parts become one result again.

Pure decisions over cells, what is known of their lengths and the slots ``-j`` gives, kept apart
from the command that launches the processes (``harness.commands.matrix``), so that each rule can
be read and tested on its own. What is known (:func:`estimate`): the last run written to the
output directory, else the committed durations (``harness.matrix.durations``), else nothing, and
then a guess from the cells' shapes.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from harness.backends import Backend
from harness.matrix import test_files
from harness.matrix.config import Cell
from harness.matrix.durations import Durations
from harness.matrix.supervisor import NO_TESTS_ID, CellResult, RunSettings, split_pytest_args
from harness.report.records import TestRecord


def default_jobs() -> int:
    """Cells at once by default: one more than the cores this process may use. A cell's processes
    keep a core busy about nine-tenths of their time, not all of it: they wait on the children
    their tests start, on the hand-offs between a test and the runtime's executor thread, on the
    disk. With one slot per core that tenth of the machine idled through a whole run (a cold
    default matrix on 2 cores, sampled from ``/proc/stat``: 31 of 282 core-seconds); one slot
    more fills it (docs/explanation/performance.md, "A fresh machine, and one slot more than the
    cores")."""
    return cores() + 1


def cores() -> int:
    """The cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def previous_walls(path: Path) -> dict[str, float]:
    """Each cell's length in the last run written to this output directory (``matrix.json``),
    used to start the longest cells first and to split the long ones; empty when there is none
    or it cannot be read. The length is what the cell takes in one process: its test time and
    one start-up. Its wall is not: a cell split in two parts last time shows half its length, so
    the next run would not split it, and the one after would again."""
    try:
        data = json.loads(path.read_text())
        return {str(c["cell"]): one_process_length(c) for c in data.get("cells", []) if not c.get("skipped")}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}


def one_process_length(cell: dict[str, Any]) -> float:
    launches = int(cell.get("launches") or 1)
    if launches > 1 and "test_time" in cell and "overhead" in cell:
        return float(cell["test_time"]) + float(cell["overhead"]) / launches
    return float(cell["wall"])


def previous_path_times(cell: Cell, junit: Path) -> dict[str, float]:
    """Seconds per test path of ``cell`` in the last run (its JUnit file), for splitting it; a
    cell whose paths are its test files (:func:`test_files.cell_files`) gets seconds per file."""
    if not junit.exists():
        return {}
    try:
        from harness.report.junit import read_records

        records = read_records(junit)
    except Exception:  # noqa: BLE001 - an unreadable old report only loses the estimate
        return {}
    times = dict.fromkeys(cell.paths, 0.0)
    for record in records:
        owner = record_owner(cell.paths, record)
        if owner is not None:
            times[owner] += record.duration
    return times


@dataclasses.dataclass(frozen=True)
class Estimates:
    """What the plan knows of each cell before it runs: its length in one process, the seconds
    of its test files (or paths), and where each cell's figures came from (for the run's note)."""

    lengths: dict[str, float]
    times: dict[str, dict[str, float]]
    sources: dict[str, str]
    note: str = ""  # the durations file read, if any


LAST_RUN, DURATIONS = "last run", "durations"


def estimate(cells: list[Cell], previous: dict[str, float], previous_times: dict[str, dict[str, float]],
             durations: Durations, root: Path) -> Estimates:
    """Each cell's figures: the last run's when it had the cell (the same machine, the same cache
    state: nothing knows better), else the committed durations', over the test files the cell
    runs now (a file they do not know counts their mean). Those are another run's seconds, so
    where both know some cells, the durations are brought to the last run's scale (the ratio of
    their sums over those cells) before a cell of one is compared with a cell of the other.
    With no durations, a cell the last run lacks is left out (:func:`start_order` starts it first:
    nothing says it is short; :func:`long_cells` does not split it)."""
    both = [c.name for c in cells if c.name in previous and c.name in durations.cells]
    known = sum(durations.cells[n].length for n in both)
    scale = sum(previous[n] for n in both) / known if both and known > 0 else 1.0
    lengths: dict[str, float] = {}
    times: dict[str, dict[str, float]] = {}
    sources: dict[str, str] = {}
    for cell in cells:
        if cell.name in previous:
            lengths[cell.name], sources[cell.name] = previous[cell.name], LAST_RUN
            times[cell.name] = previous_times.get(cell.name, {})
        elif durations:
            files = test_files.cell_files(cell, root)
            lengths[cell.name] = scale * durations.length(cell.name, files)
            times[cell.name] = {f: scale * s for f, s in durations.file_seconds(cell.name, files).items()}
            sources[cell.name] = DURATIONS
    return Estimates(lengths, times, sources)


def record_owner(paths: tuple[str, ...], record: TestRecord) -> str | None:
    """The path of ``paths`` a record's test belongs to: its file's (JUnit's ``file``), else its
    node id's file's (a test whose reported file is a fixture's outside the cell, or a record with
    no file), else None."""
    owner = owning_path(paths, record.file) if record.file else None
    return owner if owner is not None else owning_path(paths, record.nodeid.partition("::")[0])


def owning_path(paths: tuple[str, ...], file: str) -> str | None:
    for path in paths:
        if file == path or file.startswith(path.rstrip("/") + "/"):
            return path
    return None


def shards(cell: Cell, settings: RunSettings, jobs: int, times: dict[str, float]) -> list[Cell]:
    """A long single-process cell split over two processes of the same cell environment, when
    cells run at once. The processes are the cell as much as one is: same variables, same options;
    the supervisor already restarts a cell's pytest mid-run after a crash, so no test may depend on
    another file having run before it in the same process. Split by its test files when ``times``
    knows their seconds (the last run's, or the committed durations'), else by its test paths;
    balanced by ``times`` (largest first onto the lighter part), else by alternating the paths.
    One part (the cell itself) when there is nothing to split."""
    if jobs < 2 or cell.multiprocess or cell.release or len(cell.paths) < 2 or exclusive(cell):
        return [cell]
    if split_pytest_args(settings.pytest_args, settings.matrix.root)[0]:  # paths given after --
        return [cell]
    units = cell.paths
    files = test_files.cell_files(cell, settings.matrix.root)
    if len(files) >= 2 and any(times.get(f) for f in files):
        units = files
    return [dataclasses.replace(cell, paths=part) for part in balance(units, times)]


def balance(paths: tuple[str, ...], times: dict[str, float], count: int = 2) -> list[tuple[str, ...]]:
    """``paths`` in up to ``count`` parts of about equal seconds by ``times`` (largest first onto
    the lightest part), else alternating; each part keeps the paths' order, and none is empty."""
    parts: list[list[str]] = [[] for _ in range(count)]
    if times and any(times.values()):
        loads = [0.0] * count
        for path in sorted(paths, key=lambda p: -times.get(p, 0.0)):
            lighter = loads.index(min(loads))
            parts[lighter].append(path)
            loads[lighter] += times.get(path, 0.0)
    else:
        for i, path in enumerate(paths):
            parts[i % count].append(path)
    return [tuple(sorted(part, key=paths.index)) for part in parts if part]


def long_cells(cells: list[Cell], jobs: int, previous: dict[str, float]) -> set[str]:
    """The cells worth splitting (each part pays the start-up again): those that took more than
    half a slot's share of the last run, else the largest cells by their size guess."""
    if jobs < 2 or not cells:
        return set()
    known = {c.name: previous[c.name] for c in cells if c.name in previous}
    if known:
        share = sum(known.values()) / jobs
        return {name for name, wall in known.items() if wall > share / 2}
    largest = max(size_guess(c) for c in cells)
    return {c.name for c in cells if size_guess(c) == largest}


def combine(cell: Cell, parts: list[CellResult], wall: float) -> CellResult:
    """One cell's result from its parts: records in the cell's path order, one wall time."""
    records = [r for part in parts for r in part.records]
    if any(r.nodeid != NO_TESTS_ID for r in records):  # a part whose paths select nothing is fine
        records = [r for r in records if r.nodeid != NO_TESTS_ID]
    else:
        records = records[:1]
    rank = {p: i for i, p in enumerate(cell.paths)}

    def where(record: TestRecord) -> int:
        owner = record_owner(cell.paths, record)
        return len(rank) if owner is None else rank[owner]

    records.sort(key=where)  # stable: collection order within a path
    for record in records:
        record.cell = cell.name
    return CellResult(cell, records, wall, sum(p.launches for p in parts),
                      interrupted=any(p.interrupted for p in parts),
                      parts_overhead=sum(p.overhead for p in parts))


def size_guess(cell: Cell) -> int:
    if cell.multiprocess:
        return cell.devices
    return cell.total_devices * len(cell.paths)


def start_order(cells: list[Cell], jobs: int, previous: dict[str, float]) -> list[Cell]:
    """The order cells start in. Cells of several processes first: each needs several slots at
    once, and one left for the end waits for the last single-process cell to finish while the
    other slots stay idle (20 s of a default run on two cores). Then the longest first, so the
    last to finish is a short one: by the last run's wall times, else by a rough size (devices
    times test paths; a multi-process cell runs only its marked tests). One at a time, matrix order."""
    order = {c.name: i for i, c in enumerate(cells)}
    if previous:
        return sorted(cells, key=lambda c: (-slots(c, jobs), -previous.get(c.name, float("inf")), order[c.name]))
    if jobs > 1:
        return sorted(cells, key=lambda c: (-slots(c, jobs), -size_guess(c), order[c.name]))
    return list(cells)


def exclusive(cell: Cell) -> bool:
    """An accelerator cell's devices are its own while it runs: JAX takes three quarters of a
    GPU's memory when a process starts (a second process on it runs out), and a TPU chip opens in
    one process at a time. So no two cells (or parts of one) of that backend run at once."""
    return cell.backend != Backend.CPU


def slots(cell: Cell, jobs: int) -> int:
    """What a cell takes of ``-j``: one slot per process (never more than there are)."""
    return min(cell.processes, jobs)
