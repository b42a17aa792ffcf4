"""Merging per-cell JUnit files into one report.

junitparser's own ``+=`` just concatenates test cases, so a test reported by two inputs (a rerun
job, a re-downloaded artifact) would be counted twice and a failure followed by a pass would look
like one failure and one pass. Here every (cell, classname, name) becomes one record: the attempts
of all inputs in input order (the last one decides the outcome, earlier failures stay as
flaky/rerun elements), identical attempts counted once so merging the same file twice, or merging
a merged file again, changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from harness.report.junit import (
    Report,
    ReportInputError,
    build_suite,
    read_records,
    write_report,
)
from harness.report.records import TestRecord

Key = tuple[str, str, str]


def expand_inputs(inputs: Sequence[Path]) -> list[Path]:
    """Files as given, directories as their ``*.xml`` files (recursively, sorted), each once.

    A directory holding no XML and a path that does not exist are user errors.
    """
    files: list[Path] = []
    seen: set[Path] = set()
    for item in inputs:
        if item.is_dir():
            found = sorted(p for p in item.rglob("*.xml") if p.is_file())
            if not found:
                raise ReportInputError(f"{item}: directory holds no *.xml files")
        elif item.exists():
            found = [item]
        else:
            raise ReportInputError(f"{item}: no such file or directory")
        for path in found:
            resolved = path.resolve()
            if resolved not in seen:
                seen.add(resolved)
                files.append(path)
    return files


def combine(records: Iterable[TestRecord]) -> list[TestRecord]:
    """One record per (cell, classname, name), in order of first appearance.

    Later records win for the outcome, properties and location; attempts accumulate, except an
    attempt equal to one already kept (the same result read twice).
    """
    merged: dict[Key, TestRecord] = {}
    for record in records:
        key = (record.cell, record.classname, record.name)
        kept = merged.get(key)
        if kept is None:
            merged[key] = TestRecord(
                nodeid=record.nodeid,
                cell=record.cell,
                file=record.file,
                line=record.line,
                attempts=list(record.attempts),
                properties=dict(record.properties),
            )
            continue
        kept.attempts.extend(a for a in record.attempts if a not in kept.attempts)
        # The latest input's own final attempt decides, even if an equal one was kept earlier.
        if record.attempts and kept.attempts[-1] != record.attempts[-1]:
            kept.attempts.remove(record.attempts[-1])
            kept.attempts.append(record.attempts[-1])
        kept.properties.update(record.properties)
        kept.file = record.file or kept.file
        kept.line = record.line if record.line is not None else kept.line
    return list(merged.values())


def read_all(files: Sequence[Path]) -> list[TestRecord]:
    """Records of every file, in order; the first unreadable file raises (naming it)."""
    records: list[TestRecord] = []
    for path in files:
        records.extend(read_records(path))
    return records


def build_report(records: Sequence[TestRecord]) -> Report:
    """A ``<testsuites>`` document with one suite per cell (sorted), statistics recomputed."""
    by_cell: dict[str, list[TestRecord]] = {}
    for record in combine(records):
        by_cell.setdefault(record.cell, []).append(record)
    report = Report()
    for cell in sorted(by_cell):
        report.add_testsuite(build_suite(cell, by_cell[cell], titled=True))
    report.update_statistics()
    return report


def merge_files(inputs: Sequence[Path], out: Path) -> Report:
    """Merge ``inputs`` (files or directories) into ``out``.

    Every input is read and checked before anything is written, so a bad input leaves no output
    (not even a partial one) and an existing ``out`` untouched.
    """
    files = expand_inputs(inputs)
    out_resolved = out.resolve()
    files = [f for f in files if f.resolve() != out_resolved] or files
    report = build_report(read_all(files))
    write_report(report, out)
    return report
