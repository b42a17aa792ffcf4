"""The dashboard's trend puts this run at the right edge whatever the number of runs, spreading
the runs by index, as its legend says; the page's title and heading say the same verdict."""

from __future__ import annotations

import re

import pytest

from harness.report.dashboard import render_dashboard
from harness.report.history import RunPoint
from harness.report.records import FAILED, PASSED, Attempt, TestRecord

WIDTH, PAD = 820, 30  # the trend's box, as the dashboard draws it


def _bars(page: str) -> list[tuple[float, float]]:
    """Each run's bar as (left, right), oldest first (one rect per run: one outcome each)."""
    trend = page[page.index('<svg id="trend"'):page.index("</svg>", page.index('<svg id="trend"'))]
    return [(float(x), float(x) + float(w)) for x, w in re.findall(r'<rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)"', trend)]


@pytest.mark.parametrize("runs", [1, 2, 3, 7])
def test_the_latest_run_is_at_the_right_edge_and_runs_are_spread_by_index(runs: int) -> None:
    history = [RunPoint(f"r{i}", f"2025-01-0{i + 1}T00:00:00", {PASSED: 3}, 1.0) for i in range(runs)]
    bars = _bars(render_dashboard([], history))
    assert len(bars) == runs
    assert bars[-1][1] == pytest.approx(WIDTH - PAD, abs=0.1)
    if runs > 1:
        assert bars[0][0] == pytest.approx(PAD, abs=0.1)
        gaps = {round(b[0] - a[0], 1) for a, b in zip(bars, bars[1:], strict=False)}
        assert len(gaps) == 1  # evenly spread by index


@pytest.mark.parametrize(("outcome", "word"), [(PASSED, "passing"), (FAILED, "failing")])
def test_the_title_and_the_heading_agree(outcome: str, word: str) -> None:
    record = TestRecord(nodeid="t.py::t", cell="cpu-1", attempts=[Attempt(outcome, message="x")])
    page = render_dashboard([record])
    title = re.search(r"<title>(.*?)</title>", page).group(1)
    heading = re.search(r"<h1>(.*?)</h1>", page).group(1)
    assert title == heading == f"xharness results: {word}"
