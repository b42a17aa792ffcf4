"""The dashboard as a browser renders it: headless Chromium opens the file from disk.

Checks the rendered DOM (not just our string) for the heat map and a failure, checks that the
hostile ``<script>`` in a failure message did not run, and keeps a screenshot in ``reports/``
for people to look at (CI uploads it with the dashboard).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from report_samples import make_records

from harness.report.api import publish
from harness.report.junit import to_bytes
from harness.report.merge import build_report, combine

REPORTS = Path(__file__).parents[3] / "reports"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
IN_CI = os.environ.get("CI") == "true"  # set by GitHub Actions and most CI services
MISSING = "chromium is not installed (Debian package `chromium`)"

# on a developer's machine a missing browser is a skip; in CI it is a failure (see chromium())
pytestmark = pytest.mark.skipif(CHROMIUM is None and not IN_CI, reason=MISSING)


def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    if CHROMIUM is None:
        pytest.fail(f"{MISSING}, and CI=true: CI must run the browser test", pytrace=False)
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=90, check=True)


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A dashboard of two cells with a three-run trend, built as ``xharness run`` builds it."""
    root = tmp_path_factory.mktemp("dashboard")
    records = combine(make_records("cpu-4") + make_records("cpu-1")[:3])
    history = root / "history"
    for subset in (records[:2], records[:5], records):
        publish(combine(subset), to_bytes(build_report(subset)), None, None, history)
    out = root / "index.html"
    publish(records, b"final run", out, None, history)
    return out


def test_rendered_dom_has_heat_map_and_failure(page: Path, tmp_path: Path) -> None:
    dom = chromium(tmp_path / "profile", "--dump-dom", page.as_uri()).stdout
    assert '<table class="heatmap" id="heatmap">' in dom
    assert ">ERROR 1/2</a></td>" in dom  # race-on-handles on cpu-4, linked to its failure
    assert ">pass 1/1</td>" in dom
    assert 'class="problem error"' in dom and "killed by signal 11 (SIGSEGV)" in dom
    assert "xharness repro race-on-handles --inject --cell cpu-4 --seed 11" in dom
    assert '<svg id="trend"' in dom and dom.count("<rect") >= 4


def test_hostile_message_did_not_run(page: Path, tmp_path: Path) -> None:
    dom = chromium(tmp_path / "profile", "--dump-dom", page.as_uri()).stdout
    assert "<script" not in dom and "<img" not in dom
    assert 'data-pwned="1"' not in dom  # the attribute the script would have set
    assert "&lt;script&gt;document.body.setAttribute('data-pwned','1')&lt;/script&gt;" in dom


def test_screenshot_saved_under_reports(page: Path, tmp_path: Path) -> None:
    REPORTS.mkdir(exist_ok=True)
    shot = REPORTS / "dashboard.png"
    shot.unlink(missing_ok=True)
    chromium(tmp_path / "profile", f"--screenshot={shot}", "--window-size=1280,2000", page.as_uri())
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert int.from_bytes(data[16:20], "big") == 1280  # IHDR width
    assert len(data) > 20_000  # a rendered page, not a blank frame


def test_known_bugs_are_drawn_in_their_own_colour(tmp_path: Path) -> None:
    """A release carrying three known bugs, as Chromium draws it: the known-bug colour fills their
    cells in the heat map and the release table, apart from the pass green and the failure red."""
    from known_bugs import KNOWN, release_records
    from png_pixels import count_colour, read_png

    from harness.report.dashboard import COLORS
    from harness.report.records import FAILED, PASSED, XFAILED

    records = release_records()
    page = tmp_path / "index.html"
    publish(records, to_bytes(build_report(records)), page, None, None)
    shot = tmp_path / "shot.png"
    chromium(tmp_path / "profile", f"--screenshot={shot}", "--window-size=1280,1600", page.as_uri())
    pixels = read_png(shot)
    known, green, red = (count_colour(pixels, COLORS[o]) for o in (XFAILED, PASSED, FAILED))
    # each known bug's cell is drawn twice (heat map, release table), each some hundreds of pixels
    assert known > 2 * len(KNOWN) * 300, (known, green, red)
    assert green > 300 and red > 300  # the fixed scenario and the regression, in their own colours
    assert known > green  # three known bugs against one pass: the page is not read as green


def test_the_findings_page_and_the_trend_s_known_bugs_as_chromium_draws_them(tmp_path: Path) -> None:
    """Every known finding is a row of the rendered findings table, each unreported one marked;
    the trend stacks known bugs in their own colour: a history with known bugs draws more of that
    colour than the same page over a history without them."""
    from png_pixels import count_colour, read_png

    from harness.report.dashboard import COLORS
    from harness.report.findings import NOT_REPORTED, finding_rows
    from harness.report.records import PASSED, XFAILED, Attempt, TestRecord

    def run(known: int) -> list[TestRecord]:
        return [TestRecord(f"t.py::test_{i}", "cpu-1", attempts=[Attempt(XFAILED if i < known else PASSED)])
                for i in range(12)]

    shots = {}
    for known in (0, 8):
        history = tmp_path / f"history-{known}"
        for i in range(4):
            records = run(known if i < 3 else 0)  # the last run has none: only the trend shows them
            publish(records, to_bytes(build_report(records)) + bytes([i]), None, None, history)
        page = tmp_path / f"index-{known}.html"
        publish(run(0), b"last", page, None, history)
        shot = tmp_path / f"shot-{known}.png"
        chromium(tmp_path / f"profile-{known}", f"--screenshot={shot}", "--window-size=1280,2400", page.as_uri())
        shots[known] = count_colour(read_png(shot), COLORS[XFAILED])
        if known:
            dom = chromium(tmp_path / "profile-dom", "--dump-dom", page.as_uri()).stdout
            table = dom[dom.index('<table id="findings-table">'):]
            table = table[: table.index("</table>")]
            rows = finding_rows()
            assert table.count("<tr>") == len(rows) + 1
            assert table.count(f">{NOT_REPORTED}</span>") == sum(1 for r in rows if not r.upstream)
            for row in rows:
                assert f"<b>{row.name}</b>" in table
            REPORTS.mkdir(exist_ok=True)
            chromium(tmp_path / "profile-shot", f"--screenshot={REPORTS / 'findings.png'}",
                     "--window-size=1280,2400", page.as_uri() + "#findings")
    assert shots[8] > shots[0] + 3 * 300, shots  # three runs' known-bug bars, some hundreds of pixels each
