"""Helpers the cluster suites share (their fixture is in conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from harness.matrix.launchers import forget_answers, unavailable

ROOT = Path(__file__).resolve().parents[2]
#: set (to 1) by a run that started the cluster itself (``ci/test.sh``): there a cluster that does
#: not answer is a failure of the run, not a machine without one, and its tests fail instead of
#: skipping
REQUIRED_ENV = "XHARNESS_CLUSTER_REQUIRED"
#: how long a run that started the cluster waits for it to answer again (a controller restarted by
#: an earlier test, or slowed by the suites beside it) before failing the test that needs it
REQUIRED_PATIENCE = 120.0
#: seconds between two asks of that wait
REQUIRED_POLL = 5.0
#: the project's script that starts, stops and reports on the one-machine cluster
CLUSTER_SCRIPT = ("bash", str(ROOT / "ci" / "cluster.sh"))
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


def required() -> bool:
    """Whether this run started the cluster itself (:data:`REQUIRED_ENV`)."""
    return os.environ.get(REQUIRED_ENV) == "1"


def needs(launcher: str, patience: float = REQUIRED_PATIENCE) -> None:
    """Go on only where ``launcher`` can run here. Where none answers, the test is skipped with
    the reason, unless this run started the cluster (:data:`REQUIRED_ENV`): then the cluster is
    asked again for ``patience`` seconds, started again if its daemons are gone (said in a
    warning), and the test fails if it still does not answer. A skip there would turn a cluster
    that died under the suites into a green run that tested nothing."""
    why = unavailable(launcher)
    if not why:
        return
    if not required():
        pytest.skip(why)
    cluster = list(CLUSTER_SCRIPT)
    started = time.monotonic()
    restarted = ""
    while why and time.monotonic() - started < patience:
        down = None if restarted else subprocess.run([*cluster, "status"], capture_output=True, text=True)
        if down is not None and down.returncode != 0:
            done = subprocess.run([*cluster, "start"], capture_output=True, text=True, timeout=300)
            said = (down.stdout + down.stderr).strip().splitlines()[-1:] or ["nothing"]
            restarted = f"; ci/cluster.sh status said {said[0]!r} and it was started again (exit {done.returncode})"
        time.sleep(REQUIRED_POLL)
        forget_answers()
        why = unavailable(launcher)
    waited = time.monotonic() - started
    if why:
        state = subprocess.run([*cluster, "status"], capture_output=True, text=True)
        pytest.fail(f"{why}, still after {waited:.0f} s{restarted}; this run started the cluster "
                    f"({REQUIRED_ENV}=1), so that is a failure, not a machine without one. "
                    f"ci/cluster.sh status: {(state.stdout + state.stderr).strip()[-2000:]}", pytrace=False)
    warnings.warn(f"{launcher} answered only after {waited:.0f} s{restarted}", stacklevel=2)
