"""The Markdown step summary: content, escaping, and the 1 MiB cap."""

from __future__ import annotations

from pathlib import Path

from report_samples import SCRIPT, make_records

from harness.cli import main
from harness.report.junit import write_cell_xml
from harness.report.records import FAILED, Attempt, TestRecord
from harness.report.summary import SUMMARY_LIMIT, fenced, render_summary


def test_totals_heat_map_and_failures_with_repro(records) -> None:
    text = render_summary(records)
    assert "**8** tests over 1 cell(s)" in text
    assert "error **3** · failed **2** · flaky **1** · passed **1** · skipped **1**" in text
    assert "| group \\ cell | <code>cpu-4</code> |" in text
    assert "| race-on-handles | 🟪 ERROR 1/2 |" in text
    assert "| double-discovery | 🟨 FLAKY 1/1 |" in text
    assert "xharness repro race-on-handles --inject --cell cpu-4 --seed 11" in text
    assert "killed by signal 11 (SIGSEGV)" in text
    assert "Truncated" not in text


def test_test_output_cannot_become_markup(records) -> None:
    text = render_summary(records)
    outside_fences = "".join(text.split("```")[::2])
    assert "<script>" not in outside_fences
    assert SCRIPT in text  # shown verbatim, inside a code block
    tricky = fenced("a\n````\nb")
    assert tricky.startswith("`````\n") and tricky.endswith("\n`````\n")


def test_huge_run_stays_under_one_mib_with_a_note() -> None:
    big_stack = "\n".join(f"frame {i} " + "x" * 500 for i in range(200))
    records = [
        TestRecord(
            f"suites/gen/test_m{i % 400}.py::test_{i}",
            f"cpu-{i % 12}",
            attempts=[Attempt(FAILED, 1.0, "AssertionError: " + "y" * 5000, big_stack)],
            properties={"repro": f"xharness repro s{i} --seed {i}"},
        )
        for i in range(20_000)
    ]
    text = render_summary(records)
    size = len(text.encode("utf-8"))
    assert SUMMARY_LIMIT // 2 < size <= SUMMARY_LIMIT
    assert "**Truncated**" in text
    assert "failures: " in text and "of 20000 shown" in text


def test_huge_heat_map_leaves_room_for_failures() -> None:
    records = [
        TestRecord(
            f"suites/gen/test_m{i}.py::test_x", f"cell-{i % 30}", attempts=[Attempt("passed")]
        )
        for i in range(30_000)
    ]
    records.append(TestRecord("t.py::test_bad", "cell-0", attempts=[Attempt(FAILED, 0, "boom")]))
    text = render_summary(records)
    assert len(text.encode()) <= SUMMARY_LIMIT
    assert "heat map: " in text and "groups shown" in text
    assert "::test_bad" in text and "failures: " not in text


def test_summary_command(tmp_path: Path) -> None:
    write_cell_xml("cpu-4", make_records("cpu-4"), tmp_path / "cpu-4.xml")
    out = tmp_path / "summary.md"
    assert main(["report", "summary", str(tmp_path / "cpu-4.xml"), "--out", str(out)]) == 0
    records = __import__("harness.report.junit", fromlist=["read_records"]).read_records(tmp_path / "cpu-4.xml")
    findings = __import__("harness.report.findings", fromlist=["finding_rows", "shown_for"])
    # the findings of the runtimes the records tested
    assert out.read_text() == render_summary(records, findings=findings.shown_for(findings.finding_rows(), records))
