"""The semantics oracle's eager worker (``harness.properties.eager``) ends with the process that
started it: stopped, its pipes closed, and nothing for Python to warn of at exit. A stand-in
interpreter plays the worker: it says it is ready, then ignores its stdin for minutes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.jax_independent  # the worker is a process of torch and numpy, never JAX

CHILD = """
import sys
from pathlib import Path
from harness.properties import eager
worker = eager.worker(sys.argv[1])
Path(sys.argv[2]).write_text(str(worker.process.pid))
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for this purpose: only its parent has not reaped it yet
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")


def test_a_worker_is_stopped_when_its_process_exits(tmp_path: Path) -> None:
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\necho \'{"ready": true}\'\nexec sleep 300\n')
    fake.chmod(0o755)
    pid_file = tmp_path / "pid"
    # -X dev: Python says every process and pipe left open at exit (ResourceWarning)
    done = subprocess.run([sys.executable, "-X", "dev", "-c", CHILD, str(fake), str(pid_file)],
                          capture_output=True, text=True, timeout=60)
    pid = int(pid_file.read_text())
    try:
        assert done.returncode == 0, done.stderr
        assert "ResourceWarning" not in done.stderr, done.stderr
        deadline = time.monotonic() + 5
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid), f"the eager worker {pid} outlived the process that started it"
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_worker_reads_its_own_environments_bytecode_not_a_cells_prefix(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Under a cell's bytecode prefix the worker read no bytecode (it may not write any) and
    compiled torch from source at every start: it is started without the prefix."""
    seen = tmp_path / "env"
    fake = tmp_path / "python"
    fake.write_text(f'#!/bin/sh\nenv > {seen}\necho \'{{"ready": true}}\'\nexec sleep 300\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(tmp_path / "prefix"))
    from harness.properties import eager

    worker = eager.Worker(str(fake))
    try:
        env = dict(line.split("=", 1) for line in seen.read_text().splitlines() if "=" in line)
    finally:
        worker.release()
    assert "PYTHONPYCACHEPREFIX" not in env and env["PYTHONDONTWRITEBYTECODE"] == "1"
