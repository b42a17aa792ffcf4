"""A SLURM job's last line, ``python -m harness.executors.slurm_job SPEC``, run here as a node runs
it: the unit's cell runs under the job's variables, and the attempt's directory holds the records
and the result that the run reads back (``read_result``). A cell the node cannot host is a skipped
record naming the node. On the project's real cluster the same line runs inside every job of
``suites/cluster``; here no cluster is needed, so its code is judged in seconds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from matrix_helpers import write_matrix, write_suite

from harness.executors.slurm_job import JobSpec, attempt_dir, read_result, write_spec
from harness.matrix.config import load_matrix
from harness.matrix.supervisor import RunSettings
from harness.report.records import FAILED, PASSED, SKIPPED

pytestmark = pytest.mark.cell_independent

SUITE = {"tests/test_two.py": "def test_a():\n    pass\n\n\ndef test_b():\n    assert 1 == 2\n"}
CPU_CELL = """
    [cells.c]
    backend = "cpu"
    devices = 1
    paths = ["tests/test_two.py"]
    timeout = 60
"""
GPU_CELL = CPU_CELL.replace('backend = "cpu"', 'backend = "gpu"')


def _spec(root: Path, cells: str) -> tuple[Path, JobSpec]:
    write_suite(root, SUITE)
    matrix = load_matrix(write_matrix(root, cells))
    unit = root / "out" / "jobs" / "xh-c"
    unit.mkdir(parents=True)
    spec = JobSpec(matrix.cells["c"], RunSettings(matrix=matrix, out_dir=root / "out"), "", "c")
    return write_spec(spec, unit), spec


def _job(root: Path, *argv: str, **variables: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "SLURM"))}
    return subprocess.run([sys.executable, "-m", "harness.executors.slurm_job", *argv], cwd=root,
                          env={**env, **variables}, capture_output=True, text=True, timeout=240)


def test_a_jobs_cell_runs_on_its_node_and_its_attempt_holds_what_the_run_reads(tmp_path: Path) -> None:
    path, spec = _spec(tmp_path, CPU_CELL)
    done = _job(tmp_path, str(path), SLURM_JOB_ID="77", SLURM_RESTART_COUNT="1", SLURMD_NODENAME="node9")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "c: job 77 attempt 1 on node9" in done.stdout, done.stdout
    assert not attempt_dir(path.parent, 0).exists()  # a requeued job writes its own attempt's directory
    read = read_result(attempt_dir(path.parent, 1), spec.cell)
    assert read is not None, sorted(p.name for p in path.parent.rglob("*"))
    result, not_installed, data = read
    outcomes = {record.nodeid.rsplit("::", 1)[1]: record.final.outcome for record in result.records}
    assert outcomes == {"test_a": PASSED, "test_b": FAILED}, outcomes
    assert f"c: attempt 1 wrote {len(result.records)} record(s)" in done.stdout, done.stdout
    assert not not_installed and not result.skipped and result.launches == 1 and result.wall > 0
    assert data["node"] == "node9"


def test_a_cell_the_node_cannot_host_is_skipped_naming_the_node(tmp_path: Path) -> None:
    path, spec = _spec(tmp_path, GPU_CELL)
    done = _job(tmp_path, str(path), SLURM_JOB_ID="78", SLURMD_NODENAME="node3", CUDA_VISIBLE_DEVICES="")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "c: job 78 attempt 0 on node3" in done.stdout, done.stdout
    read = read_result(attempt_dir(path.parent, 0), spec.cell)
    assert read is not None
    result, _, data = read
    assert result.skipped.startswith("on node node3: "), result.skipped
    assert [record.final.outcome for record in result.records] == [SKIPPED]
    assert f"c: skipped: {result.skipped}" in done.stdout, done.stdout
    assert data["node"] == "node3"


def test_a_job_line_without_its_spec_is_a_usage_error() -> None:
    done = _job(Path.cwd())
    assert done.returncode == 2 and "usage: python -m harness.executors.slurm_job SPEC" in done.stderr
