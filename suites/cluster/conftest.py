"""What the cluster suites share: one local run of the default matrix's multi-process cells, the
twins that the launcher cells and the cells run as jobs are compared with test for test, and the
fixture of a test that needs the cluster."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_helpers import ROOT, TWIN_CELLS, xharness_run

from harness.matrix.launchers import SLURM, unavailable


@pytest.fixture(scope="session")
def local_twins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output directory of one local run of :data:`TWIN_CELLS`."""
    out = tmp_path_factory.mktemp("twins") / "local"
    done = xharness_run(out, "--cells", ",".join(TWIN_CELLS))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    return out


@pytest.fixture
def slurm() -> Iterator[None]:
    """A test that needs the cluster: skipped where none answers; afterwards its blocker jobs are
    cancelled and a node or munge the test took away is brought back."""
    why = unavailable(SLURM)
    if why:
        pytest.skip(why)
    yield
    subprocess.run(["scancel", "--quiet", "--name=blocker"], check=False)
    cluster = ["bash", str(ROOT / "ci" / "cluster.sh")]
    if subprocess.run([*cluster, "status"], capture_output=True).returncode != 0:
        started = subprocess.run([*cluster, "start"], capture_output=True, text=True, timeout=180)
        assert started.returncode == 0, started.stderr


@pytest.fixture(autouse=True)
def no_drained_node() -> Iterator[None]:
    """Every test starts on nodes that take jobs. A test that kills a rank leaves a node drained
    ("Kill task failed") when its step does not end within the controller's patience: on a loaded
    machine an orphan the container's first process has not reaped yet still counts as the step's.
    Such a node is resumed here, and said so, rather than leaving every later test pending. Where
    no cluster answers there is nothing to resume: the test itself skips, saying why."""
    if unavailable(SLURM):
        yield
        return
    try:
        found = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t %E"], capture_output=True, text=True,
                               timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        found = subprocess.CompletedProcess([], 1, "", "")
    for line in found.stdout.splitlines() if found.returncode == 0 else []:
        node, state, *reason = line.split()
        if state.startswith("drain") or state.startswith("drng"):
            print(f"resuming {node} ({state}: {' '.join(reason)}) before the test")
            subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], check=False,
                           capture_output=True, timeout=30)
    yield
