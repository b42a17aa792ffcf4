"""The findings page: every known finding on the dashboard and in the step summary, and known bugs
in their own colour in the trend."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from harness.report.dashboard import COLORS, render_dashboard
from harness.report.findings import NOT_REPORTED, FindingRow, finding_rows, report_files
from harness.report.history import load_history, record_run
from harness.report.records import PASSED, XFAILED, Attempt, TestRecord
from harness.report.summary import render_summary


def _run(passed: int, known: int) -> list[TestRecord]:
    return [TestRecord(f"t.py::test_{i}", "cpu-1", attempts=[Attempt(PASSED if i < passed else XFAILED)])
            for i in range(passed + known)]


def test_every_known_finding_is_one_row_with_its_releases_upstream_and_report() -> None:
    from harness.scenarios.known_findings import KNOWN_FINDINGS

    rows = finding_rows()
    assert {(f.name, f.runtime, f.backend) for f in KNOWN_FINDINGS} == {(r.name, r.runtime, r.backend) for r in rows}
    by_name = {(r.name, r.backend): r for r in rows}
    grad = by_name["expanded-grad-accumulation", "cpu"]
    assert grad.releases == ">=2.1" and grad.found_by == ("semantics-oracle",)
    assert grad.upstream == "" and grad.upstream_text == NOT_REPORTED
    assert grad.report == "reports/upstream/expanded-grad-accumulation-torch_xla-2.9.0.md"
    # one bug found by four invariants is one row
    assert by_name["partial-sync-donation", "cpu"].found_by == (
        "sync-aliasing", "partial-sync", "training-differential", "step-boundary")
    assert by_name["unhashable-spec", "cpu"].releases == "<2.7"
    assert by_name["unhashable-spec", "cpu"].upstream == "https://github.com/pytorch/xla/issues/8522"
    assert by_name["host-aliasing", "gpu"].releases == "not measured on gpu"


def test_the_newest_release_s_report_is_shown(tmp_path: Path) -> None:
    folder = tmp_path / "reports" / "upstream"
    folder.mkdir(parents=True)
    for release in ("2.10.0", "2.9.0", "installed"):
        (folder / f"x-torch_xla-{release}.md").write_text("#")
    (folder / "x-jax-0.10.0.md").write_text("#")
    assert report_files("x", "torch_xla", tmp_path) == [
        "reports/upstream/x-torch_xla-installed.md", "reports/upstream/x-torch_xla-2.9.0.md",
        "reports/upstream/x-torch_xla-2.10.0.md"]


ROWS = [
    FindingRow("expanded-grad-accumulation", "torch_xla", "cpu", ">=2.1", ("semantics-oracle",),
               "expanded-grad-accumulation", "a <b>second</b> backward", "",
               "reports/upstream/expanded-grad-accumulation-torch_xla-2.9.0.md"),
    FindingRow("unhashable-spec", "torch_xla", "cpu", "<2.7", ("spec-normalization", "op-sharding-cache"),
               "unhashable-spec", "a list spec", "https://github.com/pytorch/xla/issues/8522", ""),
]


def test_the_dashboard_lists_the_findings_and_links_them_from_the_top() -> None:
    page = render_dashboard([], findings=ROWS)
    assert '<a href="#findings">2 known findings</a>' in page
    table = page[page.index('<table id="findings-table">'):]
    table = table[: table.index("</table>")]
    assert table.count("<tr>") == 3
    assert "&lt;b&gt;second&lt;/b&gt;" in table  # text from the finding is escaped
    assert f">{NOT_REPORTED}</span>" in table and f"background:{COLORS[XFAILED]}" in table
    assert '<a href="https://github.com/pytorch/xla/issues/8522">' in table
    assert "<code>reports/upstream/expanded-grad-accumulation-torch_xla-2.9.0.md</code>" in table
    assert "<code>spec-normalization</code>, <code>op-sharding-cache</code>; scenario <code>unhashable-spec</code>" in table
    assert 'id="findings"' not in render_dashboard([])


def test_the_summary_lists_the_findings() -> None:
    text = render_summary(_run(2, 1), findings=ROWS)
    section = text[text.index("### Known findings (2)"):]
    assert "| <code>expanded-grad-accumulation</code> | torch_xla (cpu) | &gt;=2.1 |" in section
    assert f"🟧 {NOT_REPORTED}" in section and "https://github.com/pytorch/xla/issues/8522" in section
    small = render_summary(_run(2, 1), findings=ROWS * 400, limit=8000)  # never past the budget
    assert len(small.encode()) <= 8000 and "known findings table left out" in small


def test_the_trend_draws_known_bugs_in_their_own_colour_with_a_legend(tmp_path: Path) -> None:
    for i in range(3):
        record_run(tmp_path, _run(2, i + 1), f"{i}" * 64, now=datetime(2025, 1, 1 + i, tzinfo=UTC))
    page = render_dashboard(_run(2, 3), load_history(tmp_path))
    svg = page[page.index('<svg id="trend"'): page.index("</svg>")]
    known = [part for part in svg.split("<rect")[1:] if f'fill="{COLORS[XFAILED]}"' in part]
    assert len(known) == 3 and "2025-01-03T00:00:00+00:00: 3 xfailed" in known[-1]
    legend = page[page.index('<p id="trend-legend">'):]
    assert ">known bug</span>" in legend[: legend.index("</p>")]
    assert "<th>known bugs</th>" in page
