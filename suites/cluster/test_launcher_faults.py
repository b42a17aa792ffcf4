"""Launcher cells on a real cluster: ranks started by ``srun`` and ``mpirun``, and the host faults
that only a cluster has, each a record that names the host, the rank and the cause.

These run against the project's one-machine SLURM cluster (``bash ci/cluster.sh start``; the test
job starts it, runs this directory on its own, and stops it), one test at a time: the munge test
takes the cluster's authentication away for a moment, and the node-failure test kills a node's
``slurmd``. Every sub-run is an ``xharness run`` over a throwaway suite; afterwards the scheduler
lists no job and no process a rank started is alive.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "suites" / "selftest" / "matrix"))

from cluster_helpers import needs, queue_left  # noqa: E402
from matrix_helpers import alive, run_matrix, write_matrix, write_suite  # noqa: E402

from harness.matrix.launchers import MPI, SLURM  # noqa: E402
from harness.report.records import ERROR, KIND_RANK, PASSED, SKIPPED  # noqa: E402

CLUSTER = ROOT / "ci" / "cluster.sh"
CLUSTER_DIR = Path(os.environ.get("XHARNESS_CLUSTER_DIR", "/tmp/xharness-cluster"))

SUITE = {
    "tests/test_ranks.py": '''
        import os, signal, subprocess, time
        from pathlib import Path

        import jax
        import numpy as np
        from jax.experimental import multihost_utils

        PIDS = Path(os.environ["PID_DIR"])

        def note_pid(pid):
            (PIDS / str(pid)).write_text("")

        def test_collective_sum():
            note_pid(os.getpid())
            assert jax.process_count() == 2 and jax.device_count() == 4
            assert int(os.environ["HARNESS_PROCESS_ID"]) == jax.process_index()
            gathered = multihost_utils.process_allgather(np.array([jax.process_index() + 1.0]))
            assert float(gathered.sum()) == 3.0

        def test_rank_killed():
            note_pid(os.getpid())
            if jax.process_index() == 0:  # a grandchild that must not outlive the cell
                note_pid(subprocess.Popen(["sleep", "300"]).pid)
            if jax.process_index() == 1:
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(60)

        def test_rank_exits_nonzero():
            note_pid(os.getpid())
            if jax.process_index() == 1:
                os._exit(3)
            time.sleep(60)

        def test_after():
            note_pid(os.getpid())
            assert jax.process_count() == 2
    ''',
    "tests/test_node.py": '''
        import os, signal, time
        from pathlib import Path

        import jax

        def test_node_fails():
            (Path(os.environ["PID_DIR"]) / str(os.getpid())).write_text("")
            if jax.process_index() == 0:
                pid = int(Path(os.environ["SLURMD_PID_FILE"]).read_text())
                os.kill(pid, signal.SIGKILL)  # the node of rank 1 goes away
            time.sleep(120)
    ''',
    "tests/test_long.py": '''
        import os, time
        from pathlib import Path

        def test_outlives_the_allocation():
            (Path(os.environ["PID_DIR"]) / str(os.getpid())).write_text("")
            time.sleep(240)
    ''',
}

CELL = """
    [cells.{name}]
    backend = "cpu"
    devices = 2
    processes = 2
    launcher = "{launcher}"
    paths = [{paths}]
    timeout = {timeout}
    env = {{ PID_DIR = "{pids}", SLURMD_PID_FILE = "{slurmd_pid}" }}
"""


def _matrix(root: Path, launcher: str, paths: str, timeout: int = 20, cluster: str = "") -> Path:
    pids = root / "pids"
    pids.mkdir(exist_ok=True)
    text = CELL.format(name="c", launcher=launcher, paths=paths, timeout=timeout, pids=pids,
                       slurmd_pid=CLUSTER_DIR / "slurmd-xh-node2.pid")
    write_suite(root, SUITE)
    return write_matrix(root, text + cluster)


def _cluster(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(CLUSTER), *args], capture_output=True, text=True, timeout=180)


def _nothing_left(root: Path) -> None:
    recorded = [int(p.name) for p in (root / "pids").iterdir()]
    assert recorded, "the suite recorded no process"
    assert [pid for pid in recorded if alive(pid)] == []
    assert queue_left() == ""



def _by_name(result_records: dict) -> dict:
    return {nodeid.rsplit("::", 1)[1]: record for nodeid, record in result_records.items()}


def test_srun_ranks_detected_by_jax_and_a_killed_rank_named(tmp_path: Path, slurm: None) -> None:
    _matrix(tmp_path, SLURM, '"tests/test_ranks.py"')
    result = run_matrix(tmp_path, timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    records = _by_name(result.records("c"))
    for name in ("test_collective_sum", "test_after"):
        assert records[name].final.outcome == PASSED, records[name].final.message
    props = records["test_collective_sum"].properties
    assert props["launcher"] == SLURM and props["rank-hosts"] == "0:xh-node1 1:xh-node2", props
    assert props["job"] and props["step"] != "", props

    killed = records["test_rank_killed"].final
    assert (killed.outcome, killed.kind) == (ERROR, KIND_RANK), killed
    assert "rank 1 on xh-node2" in killed.message and "died on SIGKILL" in killed.message, killed.message
    exited = records["test_rank_exits_nonzero"].final
    assert "rank 1 on xh-node2" in exited.message and "exited with code 3" in exited.message, exited.message
    _nothing_left(tmp_path)


def test_mpirun_ranks_detected_by_jax_and_a_rank_exiting_nonzero(tmp_path: Path) -> None:
    needs(MPI)
    _matrix(tmp_path, MPI, '"tests/test_ranks.py"')
    result = run_matrix(tmp_path, timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    records = _by_name(result.records("c"))
    assert records["test_collective_sum"].final.outcome == PASSED, records["test_collective_sum"].final.message
    assert records["test_after"].final.outcome == PASSED, records["test_after"].final.message
    host = os.uname().nodename
    assert records["test_after"].properties["rank-hosts"] == f"0:{host} 1:{host}"
    exited = records["test_rank_exits_nonzero"].final
    assert (exited.outcome, exited.kind) == (ERROR, KIND_RANK), exited
    assert f"rank 1 on {host}" in exited.message and "exited with code 3" in exited.message, exited.message
    _nothing_left(tmp_path)


def test_a_node_whose_slurmd_dies_is_a_record_naming_the_node(tmp_path: Path, slurm: None) -> None:
    _matrix(tmp_path, SLURM, '"tests/test_node.py"', timeout=90)
    result = run_matrix(tmp_path, timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    failed = _by_name(result.records("c"))["test_node_fails"].final
    assert (failed.outcome, failed.kind) == (ERROR, KIND_RANK), failed
    assert "NODE_FAIL" in failed.message and "xh-node2" in failed.message, failed.message
    _nothing_left(tmp_path)


def test_the_allocation_time_limit_is_a_record(tmp_path: Path, slurm: None) -> None:
    _matrix(tmp_path, SLURM, '"tests/test_long.py"', timeout=280,
            cluster='    cluster = { time_limit = "1" }\n')
    result = run_matrix(tmp_path, timeout=400)
    assert result.returncode == 1, result.stdout + result.stderr
    failed = _by_name(result.records("c"))["test_outlives_the_allocation"].final
    assert (failed.outcome, failed.kind) == (ERROR, KIND_RANK), failed
    assert "TIMEOUT" in failed.message, failed.message
    _nothing_left(tmp_path)


def test_munge_down_when_the_cell_starts_is_a_clear_skip(tmp_path: Path, slurm: None) -> None:
    _matrix(tmp_path, SLURM, '"tests/test_ranks.py"')
    munged = Path("/run/munge/munged.pid")
    os.kill(int(munged.read_text()), signal.SIGTERM)
    deadline = time.monotonic() + 10
    while munged.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    started = time.monotonic()
    result = run_matrix(tmp_path, timeout=120)
    assert time.monotonic() - started < 60  # a skip, never a hang
    assert result.returncode == 0, result.stdout + result.stderr
    (record,) = result.records("c").values()
    assert record.final.outcome == SKIPPED
    assert "munge" in record.final.message and "ci/cluster.sh start" in record.final.message, record.final.message
