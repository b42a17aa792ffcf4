"""A known bug is never green: a scenario that reproduces on a release whose expected row says it
reproduces is an expected failure in the JUnit file (``<skipped type="pytest.xfail">``), "known bug"
in the dashboard's heat map and release table and in the summary, and CI stays green for it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from junitparser import JUnitXml
from known_bugs import KNOWN, release_records

from harness.report.dashboard import COLORS, render_dashboard
from harness.report.junit import read_records, write_cell_xml
from harness.report.records import XFAILED
from harness.report.summary import render_summary

pytestmark = pytest.mark.cell_independent


def test_junit_carries_a_known_bug_as_xfail_and_reads_it_back(tmp_path: Path) -> None:
    path = tmp_path / "release.xml"
    write_cell_xml("torch_xla-2.9.0", release_records(), path)
    text = path.read_text()
    assert text.count('type="pytest.xfail"') == len(KNOWN)
    back = {r.properties["scenario"]: r.classification for r in read_records(path)}
    assert [back[s] for s in KNOWN] == [XFAILED] * len(KNOWN)
    assert (back["unhashable-spec"], back["aliased-save"]) == ("passed", "failed")
    # junitparser, as a CI reader sees it: neither passed nor failed
    cases = {c.name: c for suite in JUnitXml.fromfile(str(path)) for c in suite}
    for scenario in KNOWN:
        case = cases[f"test_scenario_against_release[{scenario}]"]
        assert case.is_skipped and not case.is_passed
        assert not any(r._tag in ("failure", "error") for r in case.result)  # noqa: SLF001


def test_junit2html_renders_a_known_bug_as_skipped_not_passed(tmp_path: Path) -> None:
    pytest.importorskip("junit2htmlreport", reason="junit2html is in the test extra")
    path = tmp_path / "release.xml"
    write_cell_xml("torch_xla-2.9.0", release_records(), path)
    out = tmp_path / "report.html"
    subprocess.run([sys.executable, "-m", "junit2htmlreport", str(path), str(out)], check=True,
                   capture_output=True, timeout=60)
    html = out.read_text()
    def outcome(scenario: str) -> str:
        found = re.search(r'<li class="outcome outcome-(\w+)"><a [^>]*>test_scenario_against_release'
                          rf"\[{re.escape(scenario)}\]</a>", html)
        assert found is not None, html[:2000]
        return found.group(1)

    assert [outcome(s) for s in KNOWN] == ["skipped"] * len(KNOWN)
    assert (outcome("unhashable-spec"), outcome("aliased-save")) == ("passed", "failed")


def test_the_dashboard_and_summary_say_known_bug() -> None:
    records = release_records()
    page = render_dashboard(records)
    releases = page[page.index('id="releases"'):]
    releases = releases[:releases.index("</table>")]
    assert releases.count("<b>known bug</b>") == len(KNOWN)
    assert releases.count(f"background:{COLORS[XFAILED]}") == len(KNOWN)
    assert "<b>regressed</b>" in releases and "<b>as-expected</b>" in releases
    heat = page[page.index('id="heatmap"'):page.index('id="releases"')]
    assert heat.count("known bug 1/1") == len(KNOWN)
    summary = render_summary(records)
    assert "known bugs **3**" in summary
    assert "| <code>torch_xla 2.9.0</code> | 🟥 3 known-bug, 1 as-expected, 1 regressed |" in summary
    assert "| race-on-handles | 🟧 known bug 1/1 |" in summary
    # without the regression, the release is not green: it carries known bugs
    fixed = [r for r in records if r.properties["scenario"] != "aliased-save"]
    assert "| <code>torch_xla 2.9.0</code> | 🟧 3 known-bug, 1 as-expected |" in render_summary(fixed)


def test_a_run_without_known_bugs_reads_as_it_did() -> None:
    records = [r for r in release_records() if r.properties["scenario"] not in KNOWN]
    assert "known" not in render_summary(records)
