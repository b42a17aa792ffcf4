"""A cancelled run (SIGTERM, as CI sends, or Ctrl-C) stops every process it started and keeps the
results of the tests that finished."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from matrix_helpers import alive, write_matrix, write_suite

from harness.report.junit import read_records
from harness.report.records import PASSED

SUITE = {
    "tests/test_slow.py": '''
        import os, subprocess, time
        from pathlib import Path

        PIDS = Path(os.environ["PID_DIR"])

        def test_first():
            pass

        def test_second():
            child = subprocess.Popen(["sleep", "300"])
            (PIDS / str(child.pid)).write_text("")
            (PIDS / str(os.getpid())).write_text("")
            time.sleep(120)
    ''',
}


def test_sigterm_stops_the_cell_and_keeps_finished_results(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    write_suite(tmp_path, SUITE)
    write_matrix(tmp_path, f"""
        [cells.c]
        paths = ["tests"]
        env = {{ PID_DIR = "{pids}" }}
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from harness.cli import main; sys.exit(main())",
         "run", "--matrix", str(tmp_path / "matrix.toml"), "--out", str(tmp_path / "out")],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 90
        while len(list(pids.iterdir())) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert len(list(pids.iterdir())) == 2, "the slow test never started"
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        _, err = proc.communicate(timeout=30)
        stopped_after = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert stopped_after < 10
    assert [p.name for p in pids.iterdir() if alive(int(p.name))] == []  # pytest and its child
    records = {r.name: r for r in read_records(tmp_path / "out" / "junit" / "c.xml")}
    assert records["test_first"].final.outcome == PASSED
    assert "test_second" not in records  # stopped, not failed
    assert (tmp_path / "out" / "junit.xml").exists()
