"""Helpers the cluster suites share (their fixture is in conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: the default matrix's multi-process cells (ci/matrix.toml)
TWIN_CELLS = ("cpu-2slice", "cpu-2x4")


def xharness_run(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``xharness run --out OUT ARGS`` from the project's root, outside this pytest's environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run([sys.executable, "-m", "harness.cli", "run", "--out", str(out), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


#: how long a job the scheduler is still stopping (COMPLETING) may take to leave the queue: the
#: controller's own patience with a step whose processes do not end (UnkillableStepTimeout, 60 s)
#: and a margin
COMPLETING_WAIT = 90.0


def queue_left(seconds: float = COMPLETING_WAIT) -> str:
    """The jobs the scheduler still lists, once those it is stopping (COMPLETING) have had their
    time to end; "" when none. A job still PENDING or RUNNING is listed at once: the harness
    cancelled every job of its own, and only the scheduler's clean-up may still be going on."""
    deadline = time.monotonic() + seconds
    while True:
        listed = subprocess.run(["squeue", "-h", "-o", "%i %j %T"], capture_output=True, text=True,
                                timeout=30).stdout.strip()
        if not listed or time.monotonic() > deadline:
            return listed
        if any(line.split()[-1] != "COMPLETING" for line in listed.splitlines()):
            return listed
        time.sleep(1.0)
