"""A property hypothesis falsified reaches the JUnit record and the dashboard with its replay.

The plugin adds ``hypothesis-example``, ``hypothesis-blob`` and ``hypothesis-seed`` to a failing
hypothesis test's report; this proves the whole path a CI user relies on: a supervised
``xharness run`` over a throwaway suite writes them into the cell's JUnit file, the shrunk
example holds the minimal failing value, and ``xharness report html`` shows the counterexample.
"""

from __future__ import annotations

import html
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from harness.report.junit import read_records
from harness.report.records import FAILED, PASSED

SUITE = '''
    from hypothesis import given, strategies as st


    @given(st.integers(min_value=0))
    def test_numbers_stay_small(n):
        assert n < 1000, f"{n} is not small"


    @given(st.integers(min_value=0, max_value=10))
    def test_holds(n):
        assert n <= 10
'''

MATRIX = """
    [cells.c1]
    backend = "cpu"
    devices = 1
    paths = ["tests"]
    timeout = 120
"""

#: what a sub-run must not inherit from the pytest running this suite
_SCRUB = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID", "PYTEST_ADDOPTS")


def xharness(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    return subprocess.run(
        [sys.executable, "-c", "import sys; from harness.cli import main; sys.exit(main())", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=240,
    )


def test_falsified_example_travels_to_junit_and_dashboard(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_prop.py").write_text(textwrap.dedent(SUITE))
    (tmp_path / "matrix.toml").write_text(textwrap.dedent(MATRIX))
    out = tmp_path / "out"
    run = xharness("run", "--matrix", str(tmp_path / "matrix.toml"), "--out", str(out), cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr

    cell_file = out / "junit" / "c1.xml"
    records = {r.name: r for r in read_records(cell_file)}
    assert records["test_holds"].final.outcome == PASSED
    assert "hypothesis-example" not in records["test_holds"].properties
    failed = records["test_numbers_stay_small"]
    assert failed.final.outcome == FAILED
    props = failed.properties
    example = props["hypothesis-example"]
    assert "test_numbers_stay_small(" in example
    assert "n=1000" in example  # shrunk to the minimal failing value
    assert props["hypothesis-blob"].startswith("'") and "b'" in props["hypothesis-blob"]
    assert props["hypothesis-seed"] == "derandomized"  # the plugin's profile: same example anywhere
    assert props["cell"] == "c1"

    page = tmp_path / "dashboard.html"
    shown = xharness("report", "html", str(cell_file), "--out", str(page), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    text = html.unescape(page.read_text())
    assert "Shrunk counterexample (hypothesis)" in text
    assert "n=1000" in text
    assert f"@reproduce_failure({props['hypothesis-blob']})" in text
