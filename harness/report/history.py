"""Run history for the dashboard's trend: one small JSON file per run, bounded.

Only counts are kept (not whole reports), so the directory stays small enough to cache between CI
runs. Each entry is named ``<UTC time>-<digest>.json`` where the digest identifies the report the
counts came from: recording the same report twice (re-rendering a dashboard) adds nothing.
"""

from __future__ import annotations

import json
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


def _entries(history_dir: Path) -> list[Path]:
    return sorted(history_dir.glob("*.json")) if history_dir.is_dir() else []


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
    if not any(p.stem.endswith(f"-{run_id}") for p in _entries(history_dir)):
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
    entries = _entries(history_dir)
    for old in entries[: max(0, len(entries) - max_runs)]:
        old.unlink(missing_ok=True)
    return added


def load_history(history_dir: Path, max_runs: int = MAX_RUNS) -> list[RunPoint]:
    """The most recent ``max_runs`` runs, oldest first; unreadable entries are skipped."""
    points = []
    for path in _entries(history_dir)[-max_runs:]:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            counts = {o: int(data["counts"].get(o, 0)) for o in SEVERITY}
            points.append(
                RunPoint(
                    str(data["run_id"]), str(data["timestamp"]), counts, float(data["duration"])
                )
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return points
