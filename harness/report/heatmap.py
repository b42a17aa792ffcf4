"""The results grid shared by the dashboard and the step summary.

Rows are test groups (the ``scenario`` property when a test belongs to a catalog scenario, else
the test module), columns are matrix cells. Both renderers draw the same model so the page and the
summary never disagree about a cell's status.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from harness.report import properties as prop
from harness.report.junit import attempt_message
from harness.report.records import (
    ERROR,
    FAILED,
    FLAKY,
    PASSED,
    SKIPPED,
    XFAILED,
    Attempt,
    TestRecord,
)

#: most severe first: a grid cell shows the worst classification among its tests (a known bug is
#: worse than a pass: a release that carries one is not all green)
SEVERITY = (ERROR, FAILED, FLAKY, XFAILED, PASSED, SKIPPED)
EMPTY = "empty"

#: short words shown next to the colour, so the grid reads without colour vision
WORDS = {ERROR: "ERROR", FAILED: "FAIL", FLAKY: "FLAKY", XFAILED: "known bug", PASSED: "pass", SKIPPED: "skip"}


@dataclass
class Tally:
    """Classification counts and time spent for a set of (test, cell) records."""

    counts: Counter[str] = field(default_factory=Counter)
    duration: float = 0.0

    def add(self, record: TestRecord) -> None:
        self.counts[record.classification] += 1
        self.duration += record.duration

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def verdict(self) -> str:
        """A run's word on the pages' headings: failing (a failure or an error), passing, or
        nothing ran (no record at all: never green, as a CI whose every cell went unrun is not)."""
        if self.counts[FAILED] + self.counts[ERROR]:
            return "failing"
        return "passing" if self.total else "nothing ran"

    @property
    def status(self) -> str:
        for outcome in SEVERITY:
            if self.counts[outcome]:
                return outcome
        return EMPTY

    @property
    def label(self) -> str:
        """e.g. ``FAIL 1/4``: the status word and how many of the tests share it."""
        if self.status == EMPTY:
            return "-"
        return f"{WORDS[self.status]} {self.counts[self.status]}/{self.total}"

    def breakdown(self) -> str:
        """e.g. ``3 passed, 1 failed``: every non-zero count, most severe first."""
        parts = [f"{self.counts[o]} {NAMES.get(o, o)}" for o in SEVERITY if self.counts[o]]
        return ", ".join(parts) or "no tests"


def outcomes_shown(outcomes: Iterable[str], counts: Counter[str]) -> list[str]:
    """The outcomes a totals line shows: every one, and known bugs only where there are some (a
    run of the harness' own suites has none, and its line reads as it always did)."""
    return [o for o in outcomes if o != XFAILED or counts[o]]


#: how a totals line names each outcome
NAMES = {XFAILED: "known bugs"}


def group_of(record: TestRecord) -> str:
    """The heat-map row of a record: its scenario, else its test module."""
    scenario = record.properties.get(prop.SCENARIO, "").strip()
    if scenario:
        return scenario
    return record.nodeid.partition("::")[0].removesuffix(".py").replace("/", ".")


def natural_key(text: str) -> list[int | str]:
    """Sort ``cpu-2x4`` before ``cpu-8`` and ``cpu-8`` before ``cpu-16``."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text)]


@dataclass
class Grid:
    rows: list[str]
    cols: list[str]
    tallies: dict[tuple[str, str], Tally]
    col_totals: dict[str, Tally]
    total: Tally

    def at(self, row: str, col: str) -> Tally:
        return self.tallies.get((row, col)) or Tally()


def build_grid(records: Iterable[TestRecord]) -> Grid:
    tallies: dict[tuple[str, str], Tally] = {}
    col_totals: dict[str, Tally] = {}
    total = Tally()
    for record in records:
        row, col = group_of(record), record.cell
        tallies.setdefault((row, col), Tally()).add(record)
        col_totals.setdefault(col, Tally()).add(record)
        total.add(record)
    rows = sorted({r for r, _ in tallies}, key=natural_key)
    cols = sorted(col_totals, key=natural_key)
    return Grid(rows, cols, tallies, col_totals, total)


def problems(records: Iterable[TestRecord]) -> list[TestRecord]:
    """Failed and errored records first, then flaky ones; stable by cell and node id."""
    rank = {ERROR: 0, FAILED: 0, FLAKY: 1}
    chosen = [r for r in records if r.classification in rank]
    return sorted(chosen, key=lambda r: (rank[r.classification], natural_key(r.cell), r.nodeid))


def failing_attempt(record: TestRecord) -> Attempt | None:
    """The attempt to show: the last one that did not pass (the final one unless flaky)."""
    for attempt in reversed(record.attempts):
        if attempt.outcome in (FAILED, ERROR):
            return attempt
    return record.attempts[-1] if record.attempts else None


def excerpt(text: str, lines: int = 40) -> str:
    """The tail of a stack or log: where the failure is."""
    all_lines = text.rstrip().splitlines()
    if len(all_lines) <= lines:
        return "\n".join(all_lines)
    return "\n".join([f"[... {len(all_lines) - lines} earlier lines ...]", *all_lines[-lines:]])


def repro_of(record: TestRecord) -> str:
    """The one-line command that replays a record: the runner's ``repro`` property, else pytest."""
    repro = record.properties.get(prop.REPRO, "").strip()
    if repro:
        return repro
    return f"python -m pytest {shlex.quote(record.nodeid)}"


def message_of(attempt: Attempt) -> str:
    """The message as the JUnit file states it (a crash names its signal or exit code)."""
    return attempt_message(attempt) or f"({attempt.kind or attempt.outcome}, no message)"


def stack_of(attempt: Attempt) -> str:
    """What to show as the stack: the traceback, or for a crash the captured native stack."""
    return attempt.details or attempt.stderr
