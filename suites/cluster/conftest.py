"""What the cluster suites share: one local run of the default matrix's multi-process cells, the
twins that the launcher cells and the cells run as jobs are compared with test for test, and the
fixture of a test that needs the cluster."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_helpers import ROOT, TWIN_CELLS, needs, queue_left, xharness_run

from harness.matrix.launchers import SLURM, unavailable

CLUSTER_DIR = Path(os.environ.get("XHARNESS_CLUSTER_DIR", "/tmp/xharness-cluster"))


@pytest.fixture(scope="session")
def local_twins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output directory of one local run of :data:`TWIN_CELLS`."""
    out = tmp_path_factory.mktemp("twins") / "local"
    done = xharness_run(out, "--cells", ",".join(TWIN_CELLS))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    return out


@pytest.fixture
def slurm() -> Iterator[None]:
    """A test that needs the cluster: skipped where none answers (failed where the run started
    one, :func:`cluster_helpers.needs`); afterwards its blocker jobs are cancelled and a node or
    munge the test took away is brought back."""
    needs(SLURM)
    yield
    subprocess.run(["scancel", "--quiet", "--name=blocker"], check=False)
    _resume_drained("after the test")
    cluster = ["bash", str(ROOT / "ci" / "cluster.sh")]
    if subprocess.run([*cluster, "status"], capture_output=True).returncode != 0:
        started = subprocess.run([*cluster, "start"], capture_output=True, text=True, timeout=180)
        assert started.returncode == 0, started.stderr


@pytest.fixture(autouse=True)
def no_drained_node() -> Iterator[None]:
    """Every test starts on nodes that take jobs. A node is drained ("Kill task failed") when a
    step's processes do not end within the controller's patience after SIGKILL; what was still
    there is in the cluster's ``log/unkillable.log`` (``ci/cluster.sh`` names a program that
    lists the processes then), which the end of the run prints. Such a node is resumed, and said
    so, rather than leaving every later test pending. An earlier test's job that the scheduler
    is still stopping (COMPLETING) may drain its node only when that patience runs out, under
    this test: such jobs are waited for first, bounded. Where no cluster answers there is
    nothing to resume: the test itself skips, saying why."""
    if not unavailable(SLURM):
        queue_left()
        _resume_drained("before the test")
    yield


def _resume_drained(when: str) -> None:
    try:
        found = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t %E"], capture_output=True, text=True,
                               timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return
    resumed: set[str] = set()  # sinfo lists a node once per partition
    for line in found.stdout.splitlines() if found.returncode == 0 else []:
        node, state, *reason = line.split()
        if state.startswith(("drain", "drng")) and node not in resumed:
            resumed.add(node)
            print(f"resuming {node} ({state}: {' '.join(reason)}) {when}")
            subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], check=False,
                           capture_output=True, timeout=30)


UNKILLABLE_LOG = CLUSTER_DIR / "log" / "unkillable.log"
#: where the unkillable log ended when this session began: only what it adds is this session's
_unkillable_start = pytest.StashKey[int]()


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_unkillable_start] = UNKILLABLE_LOG.stat().st_size if UNKILLABLE_LOG.is_file() else 0


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """The processes a step of this session could not be rid of, as the cluster listed them when
    it gave up. A session that only collects, or began after the entry was written, has none:
    the log is the cluster's, shared by every run that uses it."""
    if config.option.collectonly or not UNKILLABLE_LOG.is_file():
        return
    start = config.stash.get(_unkillable_start, 0)
    with UNKILLABLE_LOG.open("rb") as log:
        log.seek(start if start <= UNKILLABLE_LOG.stat().st_size else 0)
        added = log.read().decode(errors="replace")
    if added:
        terminalreporter.section("steps whose processes outlived SIGKILL (log/unkillable.log)")
        terminalreporter.write(added[-20000:])
