"""A run's dashboard and step summary list the known findings of the runtimes it tested only: a
project testing its own runtime is not shown JAX's and PyTorch/XLA's bugs."""

from __future__ import annotations

from pathlib import Path

from harness.report.api import publish
from harness.report.findings import finding_rows, shown_for
from harness.report.junit import to_bytes
from harness.report.merge import build_report
from harness.report.records import PASSED, Attempt, TestRecord


def _record(**props: str) -> TestRecord:
    return TestRecord(nodeid="tests/test_a.py::test_a", cell="cpu-1", attempts=[Attempt(PASSED)],
                      properties=dict(props))


def test_a_plugin_projects_report_lists_no_other_runtimes_findings(tmp_path: Path) -> None:
    records = [_record(runtime="shardjax")]
    assert finding_rows() and shown_for(finding_rows(), records) == []
    publish(records, to_bytes(build_report(records)), tmp_path / "index.html", tmp_path / "summary.md", None)
    assert "Known findings" not in (tmp_path / "index.html").read_text()
    assert "Known findings" not in (tmp_path / "summary.md").read_text()


def test_the_runtimes_a_run_tested_keep_their_findings() -> None:
    rows = finding_rows()
    assert {r.runtime for r in rows} >= {"jax", "torch_xla"}
    # the reference runtime rides on JAX: the harness' own runs keep JAX's findings
    assert {r.runtime for r in shown_for(rows, [_record(runtime="reference functionalization=on")])} == {"jax"}
    released = [_record(runtime="reference"), _record(**{"release-runtime": "torch_xla", "runtime": "reference"})]
    assert {r.runtime for r in shown_for(rows, released)} == {"jax", "torch_xla"}
    # another tool's JUnit file says nothing of what it tested: every finding is kept
    assert shown_for(rows, [_record()]) == rows
