"""Runs explored under schedule control keep strategy, seed and schedule in their JUnit records.

The catalog's race scenario runs here through the matrix supervisor, as CI runs it, and the record
read back from the cell's JUnit file must say how to replay it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.report.junit import read_records

ROOT = Path(__file__).resolve().parents[2]
_SCRUB = (
    "PYTEST_XDIST_WORKER",
    "PYTEST_XDIST_WORKER_COUNT",
    "PYTEST_XDIST_TESTRUNUID",
    "PYTEST_ADDOPTS",
)


@pytest.mark.skipif(
    os.environ.get("HARNESS_CELL") not in (None, "", "cpu-8"),
    reason="starts its own matrix run; runs in cpu-8 or outside the matrix",
)
def test_explored_records_carry_strategy_seed_and_schedule(tmp_path: Path) -> None:
    matrix = tmp_path / "matrix.toml"
    matrix.write_text(
        textwrap.dedent(
            f"""
            root = "{ROOT}"
            [cells.race-2]
            backend = "cpu"
            devices = 2
            paths = ["suites/regression/test_catalog.py"]
            pytest_args = ["-k", "race-on-handles"]
            timeout = 120
            """
        )
    )
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--matrix", str(matrix), "--out", str(out)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = {r.nodeid.rsplit("[", 1)[-1]: r for r in read_records(out / "junit" / "race-2.xml")}
    fixed, injected = records["race-on-handles-fixed]"], records["race-on-handles-injected]"]
    for record in (fixed, injected):
        props = record.properties
        assert props["strategy"] == "pct" and props["strategy-seed"] == "0", props
        assert int(props["schedules"]) >= 1
    assert fixed.properties["schedules"] == "20" and "schedule" not in fixed.properties
    props = injected.properties
    assert props["schedule"].startswith("s1:") and props["preemptions"].isdigit()
    assert (
        props["repro"]
        == "xharness repro race-on-handles --inject --explore pct --seed 0 --cell race-2"
    )
    assert props["repro-schedule"] == (
        f"xharness repro race-on-handles --inject --schedule {props['schedule']} --seed 0 --cell race-2"
    )
