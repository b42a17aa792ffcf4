"""``ci/cluster.sh``: a start of a running cluster changes nothing, and a stop leaves no daemon,
no job and no host name behind (then the cluster is started again for the tests after this one)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from cluster_helpers import needs

from harness.matrix.launchers import SLURM

SCRIPT = Path(__file__).resolve().parents[2] / "ci" / "cluster.sh"
DAEMONS = ("slurmctld", "slurmd", "slurmstepd", "munged")
STATE = Path(os.environ.get("XHARNESS_CLUSTER_DIR", "/tmp/xharness-cluster"))


def _cluster(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=240)


def _running() -> list[str]:
    """The cluster's daemons still running (zombies, which hold nothing, are not counted)."""
    ps = subprocess.run(["ps", "-eo", "stat=,comm="], capture_output=True, text=True, timeout=30).stdout
    return [line for line in ps.splitlines()
            if line.split()[-1] in DAEMONS and not line.split()[0].startswith("Z")]


def test_start_is_idempotent_and_stop_leaves_nothing() -> None:
    needs(SLURM)
    pids_before = sorted(Path(p).read_text() for p in STATE.glob("*.pid"))
    again = _cluster("start")
    assert again.returncode == 0 and "already running" in again.stderr, again.stderr
    assert sorted(Path(p).read_text() for p in STATE.glob("*.pid")) == pids_before

    stopped = _cluster("stop")
    assert stopped.returncode == 0, stopped.stderr
    deadline = time.monotonic() + 10
    while _running() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _running() == []
    assert "xh-node" not in Path("/etc/hosts").read_text()
    assert _cluster("status").returncode != 0

    started = _cluster("start")
    assert started.returncode == 0, started.stderr
    assert _cluster("status").returncode == 0
