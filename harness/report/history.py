"""Run history for the dashboard's trend: one small JSON file per run, bounded.

Only counts are kept (not whole reports), so the directory stays small enough to cache between CI
runs. Each entry is named ``<UTC time>-<digest>.json`` where the digest identifies the report the
counts came from: recording the same report twice (re-rendering a dashboard) adds nothing.

Entries are written atomically (a temporary ``.<name>.<random>.tmp`` sibling renamed into place,
which the ``*.json`` glob never matches). An entry that cannot be read all the same (a disk that
filled up, a cache restored from a broken archive) is refused by :func:`read_entry` with a message
naming it, and :func:`load_history` leaves it out of the trend and says so on stderr, so a damaged
entry neither stops the dashboard nor silently turns into numbers.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from harness.report.files import write_atomic
from harness.report.heatmap import SEVERITY, Tally
from harness.report.records import TestRecord

#: how many runs the trend keeps; older entries are deleted
MAX_RUNS = 50


@dataclass
class RunPoint:
    """One run in the trend: when, and how many (test, cell) records of each classification."""

    run_id: str
    timestamp: str
    counts: dict[str, int]
    duration: float


class HistoryEntryError(Exception):
    """A history entry that is not a complete entry; the message names the file and the problem."""


def entry_files(history_dir: Path) -> list[Path]:
    """The entries of ``history_dir``, oldest first (their names start with the UTC time)."""
    return sorted(history_dir.glob("*.json")) if history_dir.is_dir() else []


def read_entry(path: Path) -> RunPoint:
    """One entry, or :class:`HistoryEntryError` for anything but a whole entry."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        counts = {o: int(data["counts"].get(o, 0)) for o in SEVERITY}
        return RunPoint(str(data["run_id"]), str(data["timestamp"]), counts, float(data["duration"]))
    except OSError as exc:
        raise HistoryEntryError(f"{path}: cannot read history entry ({exc.strerror or exc})") from exc
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        problem = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise HistoryEntryError(f"{path}: damaged history entry ({problem})") from exc


def record_run(
    history_dir: Path,
    records: Iterable[TestRecord],
    digest: str,
    max_runs: int = MAX_RUNS,
    now: datetime | None = None,
) -> bool:
    """Append a run (unless ``digest`` is already there), then drop the oldest beyond ``max_runs``.

    Returns whether an entry was added.
    """
    run_id = digest[:16]
    added = False
    if not any(p.stem.endswith(f"-{run_id}") for p in entry_files(history_dir)):
        tally = Tally()
        for record in records:
            tally.add(record)
        when = now or datetime.now(UTC)
        entry = {
            "run_id": run_id,
            "timestamp": when.isoformat(timespec="seconds"),
            "counts": {o: tally.counts[o] for o in SEVERITY},
            "duration": round(tally.duration, 3),
        }
        name = f"{when.strftime('%Y%m%dT%H%M%S%fZ')}-{run_id}.json"
        write_atomic(history_dir / name, json.dumps(entry, indent=1) + "\n")
        added = True
    entries = entry_files(history_dir)
    for old in entries[: max(0, len(entries) - max_runs)]:
        old.unlink(missing_ok=True)
    return added


def load_history(history_dir: Path, max_runs: int = MAX_RUNS) -> list[RunPoint]:
    """The most recent ``max_runs`` runs, oldest first; a damaged entry is left out and named on
    stderr (the trend is an aid, not worth failing a report over)."""
    points = []
    for path in entry_files(history_dir)[-max_runs:]:
        try:
            points.append(read_entry(path))
        except HistoryEntryError as exc:
            print(f"xharness: warning: {exc}; left out of the trend", file=sys.stderr)
    return points
