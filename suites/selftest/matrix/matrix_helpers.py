"""Shared helpers of the matrix selftests: throwaway suites, matrix files and supervised runs.

Every supervised run here is an ``xharness run`` subprocess over a tiny test directory written to
``tmp_path``, so a crash test crashes that sub-run only, never the suite that checks it; a test
that needs a supervisor setting the command line does not offer (a short idle limit) runs one
cell in this process (:func:`run_cell`), whose ranks are still processes of their own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.report.junit import read_records
from harness.report.records import TestRecord

#: environment variables a sub-run must not inherit from the pytest running this suite
_SCRUB = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID", "PYTEST_ADDOPTS")


@dataclass
class RunResult:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    out: Path

    def records(self, cell: str) -> dict[str, TestRecord]:
        return {r.nodeid: r for r in read_records(self.out / "junit" / f"{cell}.xml")}


def write_suite(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def write_matrix(root: Path, text: str) -> Path:
    path = root / "matrix.toml"
    path.write_text(textwrap.dedent(text))
    return path


def xharness(*args: str, cwd: Path, timeout: float = 240,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``xharness ARGS`` in ``cwd``, with this environment (plus ``env``) less the enclosing pytest's."""
    env = {**{k: v for k, v in os.environ.items() if k not in _SCRUB}, **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", "import sys; from harness.cli import main; sys.exit(main())", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_matrix(root: Path, *args: str, timeout: float = 240) -> RunResult:
    out = root / "out"
    started = time.monotonic()
    proc = xharness("run", "--matrix", str(root / "matrix.toml"), "--out", str(out), *args, cwd=root, timeout=timeout)
    return RunResult(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started, out)


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (psutil-free)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def run_cell(root: Path, cell: str, **settings: Any) -> list[TestRecord]:
    """The records of ``cell`` of ``root/matrix.toml``, supervised in this process with these
    :class:`~harness.matrix.supervisor.RunSettings` (its output under ``root/out``)."""
    import io

    from harness.matrix.config import load_matrix
    from harness.matrix.progress import Progress
    from harness.matrix.supervisor import CellRun, RunSettings

    matrix = load_matrix(root / "matrix.toml")
    run_settings = RunSettings(matrix=matrix, out_dir=root / "out", **settings)
    return CellRun(matrix.cells[cell], run_settings, Progress(1, stream=io.StringIO()).for_cell(cell)).run().records
