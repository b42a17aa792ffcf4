"""What ``xharness run`` calls when a run ends: every report file from the per-cell JUnit files.

The run directory then holds ``junit/<cell>.xml`` (written by the supervisor), ``junit.xml``
(merged), ``index.html`` (dashboard), ``summary.md`` (step summary) and ``history/`` (trend). The
merged file is what the dashboard and summary are built from, so all three always agree.
"""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

from harness.report.dashboard import render_dashboard
from harness.report.files import write_atomic
from harness.report.findings import finding_rows, shown_for
from harness.report.history import load_history, record_run
from harness.report.junit import ReportInputError, read_records, to_bytes, write_report
from harness.report.merge import build_report, combine
from harness.report.records import TestRecord
from harness.report.summary import render_summary

JUNIT_DIR, MERGED, DASHBOARD, SUMMARY, HISTORY = (
    "junit",
    "junit.xml",
    "index.html",
    "summary.md",
    "history",
)


_WHEN = re.compile(rb'\s(?:timestamp|hostname)="[^"]*"')


def results_digest(junit_bytes: bytes) -> str:
    """What identifies a report's results: its bytes without the time and host of the merge,
    so the same results merged again (a second later, or elsewhere) are the same run."""
    return hashlib.sha256(_WHEN.sub(b"", junit_bytes)).hexdigest()


def publish(
    records: list[TestRecord],
    junit_bytes: bytes,
    html_out: Path | None,
    summary_out: Path | None,
    history_dir: Path | None,
    notes: list[str] | None = None,
) -> None:
    """Record the run in the history (keyed by the merged report's digest), then render."""
    notes = notes or []
    history = []
    if history_dir is not None:
        record_run(history_dir, records, results_digest(junit_bytes))
        history = load_history(history_dir)
    findings = shown_for(finding_rows(), records) if html_out is not None or summary_out is not None else []
    if html_out is not None:
        write_atomic(html_out, render_dashboard(records, history, notes=notes, findings=findings))
    if summary_out is not None:
        write_atomic(summary_out, render_summary(records, notes=notes, findings=findings))


def finish_run(out_dir: Path) -> None:
    """Merge ``out_dir/junit/*.xml`` and write the dashboard, summary and history entry.

    A cell file that cannot be read does not stop the others from being reported: it is named on
    stderr and in a note at the top of the dashboard and the summary (the run itself has already
    failed in that case, and the person reading the page needs to know why results are missing).
    """
    records: list[TestRecord] = []
    notes: list[str] = []
    junit_dir = out_dir / JUNIT_DIR
    for path in sorted(junit_dir.glob("*.xml")) if junit_dir.is_dir() else []:
        try:
            records.extend(read_records(path))
        except ReportInputError as exc:
            notes.append(f"unreadable cell report, its results are missing: {exc}")
            print(f"xharness: warning: {exc}", file=sys.stderr)
    report = build_report(records)
    write_report(report, out_dir / MERGED)
    publish(
        combine(records),
        to_bytes(report),
        out_dir / DASHBOARD,
        out_dir / SUMMARY,
        out_dir / HISTORY,
        notes,
    )
