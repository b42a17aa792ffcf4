"""The HTML dashboard, the run history and ``finish_run``."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

from report_samples import SCRIPT, make_records

from harness.cli import main
from harness.report.api import finish_run
from harness.report.dashboard import render_dashboard
from harness.report.heatmap import build_grid, group_of
from harness.report.history import load_history, record_run
from harness.report.junit import write_cell_xml
from harness.report.records import PASSED, SKIPPED, Attempt, TestRecord


class _Tags(HTMLParser):
    """Every start tag with its attributes, as a browser's tokenizer would see them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs) -> None:
        self.tags.append((tag, dict(attrs)))


def tags(page: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Tags()
    parser.feed(page)
    return parser.tags


def test_hostile_test_output_is_inert(records) -> None:
    page = render_dashboard(records)
    parsed = tags(page)
    assert not [t for t, _ in parsed if t in ("script", "img", "iframe", "object", "link")]
    assert not [a for _, attrs in parsed for a in attrs if a.startswith("on")]
    assert "&lt;script&gt;document.body.setAttribute" in page
    assert SCRIPT not in page


def test_page_is_self_contained(records) -> None:
    page = render_dashboard(records)
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:|//)", page)
    assert "@import" not in page and "url(" not in page
    csp = next(a for t, a in tags(page) if t == "meta" and a.get("http-equiv"))
    assert "default-src 'none'" in (csp["content"] or "")


def test_heat_map_has_groups_cells_labels_and_colours() -> None:
    records = make_records("cpu-4") + make_records("cpu-1")[:1]
    page = render_dashboard(records)
    grid = build_grid(records)
    assert grid.cols == ["cpu-1", "cpu-4"]
    assert "race-on-handles" in grid.rows and "suites.models.test_models" in grid.rows
    assert grid.at("race-on-handles", "cpu-4").label == "ERROR 1/2"
    assert grid.at("race-on-handles", "cpu-1").label == "pass 1/1"
    assert grid.at("double-discovery", "cpu-4").label == "FLAKY 1/1"
    assert grid.at("double-discovery", "cpu-1").label == "-"
    cells = [a for t, a in tags(page) if t == "td" and "hm" in (a.get("class") or "")]
    assert len(cells) == len(grid.rows) * len(grid.cols)
    assert all("background:#" in (a.get("style") or "") for a in cells)
    assert 'title="race-on-handles on cpu-4: 1 error, 1 passed"' in page
    assert "cell totals" in page


def test_failures_show_message_stack_repro_and_durations(records) -> None:
    page = render_dashboard(records)
    assert "killed by signal 11 (SIGSEGV)" in page
    assert "Fatal Python error: Segmentation fault" in page
    assert "xharness repro race-on-handles --inject --cell cpu-4 --seed 11" in page
    assert "AssertionError: second" in page
    assert "Failed 1 time(s) before passing" in page
    assert 'id="durations"' in page and "60.00 s" in page
    # failed and errored first, flaky after them
    order = [page.index(f"::{n}</code>") for n in ("test_fails", "test_segfault", "test_flaky")]
    assert order[2] > max(order[:2])


def test_grouping_by_scenario_else_module() -> None:
    with_scenario = TestRecord("a/b.py::t", "c", properties={"scenario": "lost-sharding"})
    without = TestRecord("a/b.py::TestK::t", "c")
    assert group_of(with_scenario) == "lost-sharding"
    assert group_of(without) == "a.b"


def _run(passed: int, failed: int) -> list[TestRecord]:
    return [
        TestRecord(
            f"t.py::test_{i}", "cpu-1", attempts=[Attempt(PASSED if i < passed else "failed")]
        )
        for i in range(passed + failed)
    ]


def _digest(i: int) -> str:
    return hashlib.sha256(str(i).encode()).hexdigest()


def test_history_is_bounded_and_deduplicated(tmp_path: Path) -> None:
    start = datetime(2025, 1, 1, tzinfo=UTC)
    for i in range(7):
        added = record_run(
            tmp_path, _run(i, 1), _digest(i), max_runs=5, now=start + timedelta(hours=i)
        )
        assert added
    assert not record_run(tmp_path, _run(6, 1), _digest(6), max_runs=5)  # same report again
    points = load_history(tmp_path)
    assert len(list(tmp_path.glob("*.json"))) == 5
    assert [p.counts["passed"] for p in points] == [2, 3, 4, 5, 6]  # oldest two dropped
    assert all(p.counts["failed"] == 1 for p in points)


def test_history_skips_corrupt_entries(tmp_path: Path) -> None:
    record_run(tmp_path, _run(1, 0), "a" * 64)
    (tmp_path / "00000000T000000000000Z-broken.json").write_text("{not json")
    assert [p.counts["passed"] for p in load_history(tmp_path)] == [1]


def test_trend_draws_each_run(tmp_path: Path) -> None:
    for i in range(3):
        record_run(tmp_path, _run(i + 1, i), _digest(i), now=datetime(2025, 1, 1 + i, tzinfo=UTC))
    page = render_dashboard(_run(3, 2), load_history(tmp_path))
    svg = page[page.index('<svg id="trend"') : page.index("</svg>")]
    assert svg.count("<rect") == 3 + 2  # passed bars for 3 runs, failed bars for 2
    assert "2025-01-03T00:00:00+00:00: 2 failed" in svg


def test_finish_run_writes_every_report(tmp_path: Path) -> None:
    write_cell_xml("cpu-4", make_records("cpu-4"), tmp_path / "junit/cpu-4.xml")
    write_cell_xml("cpu-1", make_records("cpu-1"), tmp_path / "junit/cpu-1.xml")
    (tmp_path / "junit/cpu-8.xml").write_text("<half")  # a broken cell file
    finish_run(tmp_path)
    finish_run(tmp_path)  # the same results again: one history entry
    page = (tmp_path / "index.html").read_text()
    assert "cpu-8.xml: not well-formed XML" in page
    assert 'id="heatmap"' in page
    summary = (tmp_path / "summary.md").read_text()
    assert "16** tests over 2 cell(s)" in summary
    entries = list((tmp_path / "history").glob("*.json"))
    assert len(entries) == 1
    assert json.loads(entries[0].read_text())["counts"]["flaky"] == 2


def test_finish_run_with_no_results(tmp_path: Path) -> None:
    finish_run(tmp_path)
    assert "No test results" in (tmp_path / "index.html").read_text()
    assert (tmp_path / "junit.xml").read_text().count("<testsuite ") == 0


def test_html_command(tmp_path: Path) -> None:
    write_cell_xml("cpu-4", make_records("cpu-4"), tmp_path / "cpu-4.xml")
    out = tmp_path / "site/index.html"
    assert main(["report", "html", str(tmp_path / "cpu-4.xml"), "--out", str(out)]) == 0
    assert "killed by signal 11" in out.read_text()
    assert len(list((tmp_path / "site/history").glob("*.json"))) == 1
    bad = tmp_path / "bad.xml"
    bad.write_text("<x/>")
    assert main(["report", "html", str(bad), "--out", str(tmp_path / "b.html")]) == 2
    assert not (tmp_path / "b.html").exists()


def test_the_same_results_merged_at_another_time_are_the_same_run() -> None:
    from harness.report.api import results_digest

    one = b'<testsuites><testsuite name="cpu-1" timestamp="2026-01-01T00:00:00+00:00" hostname="a" tests="1"/></testsuites>'
    later = one.replace(b"00:00:00", b"00:00:01").replace(b'hostname="a"', b'hostname="b"')
    other = one.replace(b'tests="1"', b'tests="2"')
    assert results_digest(one) == results_digest(later)
    assert results_digest(one) != results_digest(other)


def _release_record(cell: str, nodeid: str, outcome: str, check: str, release: str, **extra: str) -> TestRecord:
    """A record of an ``xharness releases`` cell, as its JUnit file carries it."""
    runtime = "reference" if check == "suites" else "jax"
    props = {"cell": cell, "runtime": f"{runtime} functionalization=on param_aliasing=on",
             "release": release, "release-runtime": "jax", "release-check": check, **extra}
    message = "AssertionError: the suites broke" if outcome != PASSED else ""
    return TestRecord(nodeid, cell, attempts=[Attempt(outcome, 0.5, message)], properties=props)


def test_release_runs_show_the_scenario_table_and_each_releases_suites_with_their_failures(tmp_path: Path) -> None:
    judged = {"expected": "reproduced", "actual": "reproduced", "verdict": "as-expected",
              "scenario": "host-aliasing", "reason": "reproduced, as expected"}
    records = [
        _release_record("jax-0.10.0", "suites/adapters/test_upstream_catalog.py::test_scenario_against_release[host-aliasing]",
                        PASSED, "catalog", "0.10.0", **judged),
        _release_record("jax-0.10.1", "suites/adapters/test_upstream_catalog.py::test_scenario_against_release[host-aliasing]",
                        PASSED, "catalog", "0.10.1", **judged),
        _release_record("jax-0.10.0-suites", "suites/models/test_models.py::test_ok", PASSED, "suites", "0.10.0"),
        _release_record("jax-0.10.0-suites", "suites/selftest/test_x.py::test_broken", "failed", "suites", "0.10.0"),
        _release_record("jax-0.10.1-suites", "suites/models/test_models.py::test_ok", PASSED, "suites", "0.10.1"),
        _release_record("jax-0.10.1-invariants", "suites/properties/test_invariants.py::test_donation",
                        SKIPPED, "invariants", "0.10.1"),
        # a judged record of a run before the checks were named: still the catalog's
        TestRecord("suites/adapters/test_upstream_catalog.py::test_scenario_against_release[aliased-save]",
                   "torch_xla-2.9.0", attempts=[Attempt(PASSED)],
                   properties={"runtime": "torch_xla functionalization=on", "release": "2.9.0",
                               **judged, "scenario": "aliased-save"}),
    ]
    page = render_dashboard(records)
    scenarios = page[page.index('id="releases"'):page.index("</table>", page.index('id="releases"'))]
    assert ">jax 0.10.0<" in scenarios and ">jax 0.10.1<" in scenarios and ">torch_xla 2.9.0<" in scenarios
    assert "host-aliasing" in scenarios and "aliased-save" in scenarios
    assert "test_models" not in scenarios  # the suites' records are not scenarios
    checks = page[page.index('id="release-checks"'):]
    assert ">suites<" in checks and ">invariants<" in checks
    assert 'title="suites on jax 0.10.0: 1 failed, 1 passed"' in checks
    assert 'title="invariants on jax 0.10.1: 1 skipped"' in checks
    assert "jax 0.10.0: 1 failing" in checks and "jax 0.10.1: 1 failing" not in checks
    link = re.search(r'<a href="#(problem-\d+)">suites/selftest/test_x.py::test_broken</a>', checks)
    assert link and f'id="{link.group(1)}"' in page  # the failure's whole story, further down
    assert "AssertionError: the suites broke" in checks
    write_cell_xml("jax-0.10.0-suites", records[2:4], tmp_path / "junit/jax-0.10.0-suites.xml")
    finish_run(tmp_path)
    assert 'id="release-checks"' in (tmp_path / "index.html").read_text()  # through the JUnit file
    summary = (tmp_path / "summary.md").read_text()
    assert "### Runtime releases\n\n| release | suites |" in summary
    assert "| <code>jax 0.10.0</code> | 🟥 1 failed, 1 passed |" in summary


def test_a_run_without_releases_has_no_release_tables(records) -> None:
    page = render_dashboard(records)
    assert 'id="releases"' not in page and 'id="release-checks"' not in page
