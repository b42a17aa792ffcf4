"""A SLURM job's last line, ``python -m harness.executors.slurm_job SPEC``, run here as a node runs
it: the unit's cell runs under the job's variables, and the attempt's directory holds the records
and the result that the run reads back (``read_result``). A cell the node cannot host is a skipped
record naming the node. On the project's real cluster the same line runs inside every job of
``suites/cluster``; here no cluster is needed, so its code is judged in seconds."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
from matrix_helpers import write_matrix, write_suite

from harness.executors.slurm_job import JobSpec, attempt_dir, read_result, write_spec
from harness.matrix.config import Matrix, load_matrix
from harness.matrix.supervisor import RunSettings
from harness.report import properties as prop
from harness.report.records import ERROR, FAILED, PASSED, SKIPPED

pytestmark = [pytest.mark.cell_independent, pytest.mark.jax_independent]

SUITE = {"tests/test_two.py": "def test_a():\n    pass\n\n\ndef test_b():\n    assert 1 == 2\n"}
CPU_CELL = """
    [cells.c]
    backend = "cpu"
    devices = 1
    paths = ["tests/test_two.py"]
    timeout = 60
"""
GPU_CELL = CPU_CELL.replace('backend = "cpu"', 'backend = "gpu"')


def _spec(root: Path, cells: str, shard: str = "", **release: str) -> tuple[Path, JobSpec]:
    write_suite(root, SUITE)
    matrix = load_matrix(write_matrix(root, cells))
    unit = root / "out" / "jobs" / "xh-c"
    unit.mkdir(parents=True)
    cell = matrix.cells["c"]
    if release:
        cell = dataclasses.replace(cell, release="9.9.9")
    spec = JobSpec(cell, RunSettings(matrix=matrix, out_dir=root / "out"), shard, "c", **release)
    return write_spec(spec, unit), spec


def _job(root: Path, *argv: str, **variables: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "SLURM"))}
    return subprocess.run([sys.executable, "-m", "harness.executors.slurm_job", *argv], cwd=root,
                          env={**env, **variables}, capture_output=True, text=True, timeout=240)


def _other_parts_log(root: Path) -> Path:
    """A log of the cell's other part, which ran (or runs) on another node into the same logs."""
    log = root / "out" / "logs" / "c" / "p1" / "rank0.log"
    log.parent.mkdir(parents=True)
    log.write_text("the other part's log\n")
    return log


def test_a_jobs_cell_runs_on_its_node_and_its_attempt_holds_what_the_run_reads(tmp_path: Path) -> None:
    """One part of a split cell as its job runs it: its logs go to the part's own directory, so the
    other part's, on another node, are left whole."""
    path, spec = _spec(tmp_path, CPU_CELL, shard="p2")
    other = _other_parts_log(tmp_path)
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
    assert other.read_text() == "the other part's log\n"
    assert list((tmp_path / "out" / "logs" / "c" / "p2").glob("rank0.*"))


def test_a_cell_the_node_cannot_host_is_skipped_naming_the_node(tmp_path: Path) -> None:
    path, spec = _spec(tmp_path, GPU_CELL)
    done = _job(tmp_path, str(path), SLURM_JOB_ID="78", SLURMD_NODENAME="node3", CUDA_VISIBLE_DEVICES="")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "c: job 78 attempt 0 on node3" in done.stdout, done.stdout
    read = read_result(attempt_dir(path.parent, 0), spec.cell)
    assert read is not None
    result, not_installed, data = read
    assert result.skipped.startswith("on node node3: "), result.skipped
    assert not not_installed
    [record] = result.records
    assert record.final.outcome == SKIPPED and record.final.message.endswith(result.skipped), record.final.message
    assert f"c: skipped: {result.skipped}" in done.stdout, done.stdout
    assert data["node"] == "node3"


def test_a_job_line_without_its_spec_is_a_usage_error() -> None:
    done = _job(Path.cwd())
    assert done.returncode == 2 and "usage: python -m harness.executors.slurm_job SPEC" in done.stderr


def test_a_release_checks_part_runs_in_that_releases_interpreter_and_says_which_check_it_is(tmp_path: Path) -> None:
    """``xharness releases --executor slurm`` sends each part of a release's check as a job: the
    part runs by the release environment's interpreter, its records name the release, the runtime
    released and the check, and its logs go to a directory of its own, so that two parts of one
    check on two nodes do not clear each other's."""
    path, spec = _spec(tmp_path, CPU_CELL, shard="p2", python=sys.executable, released="jax", check="suites")
    other = _other_parts_log(tmp_path)
    done = _job(tmp_path, str(path), SLURM_JOB_ID="79", SLURMD_NODENAME="node2")
    assert done.returncode == 0, done.stdout + done.stderr
    read = read_result(attempt_dir(path.parent, 0), spec.cell)
    assert read is not None
    result, not_installed, _ = read
    assert not not_installed and result.launches == 1
    outcomes = {record.nodeid.rsplit("::", 1)[1]: record.final.outcome for record in result.records}
    assert outcomes == {"test_a": PASSED, "test_b": FAILED}, outcomes
    for record in result.records:
        assert record.properties[prop.RELEASE] == "9.9.9", record.properties
        assert record.properties[prop.RELEASE_RUNTIME] == "jax", record.properties
        assert record.properties[prop.RELEASE_CHECK] == "suites", record.properties
        assert record.properties[prop.REPRO].endswith(f"{sys.executable} -m pytest {record.nodeid}"), record.properties
    assert other.read_text() == "the other part's log\n"
    assert list((tmp_path / "out" / "logs" / "c" / "p2").glob("rank0.*")), sorted(
        str(p) for p in (tmp_path / "out" / "logs").rglob("*"))


def test_a_release_the_node_cannot_install_is_an_error_record_and_says_so_to_the_run(tmp_path: Path) -> None:
    """A cell of a release whose wheel is gone when its job starts: the job still ends well, its
    one record is the install's error, and the result tells the submitting run that the release
    was not installed (the run then reports it as such, not as a failing suite)."""
    write_suite(tmp_path, SUITE)
    matrix = load_matrix(write_matrix(tmp_path, CPU_CELL))
    wheel = tmp_path / "wheels" / "jax-0.4.0-py3-none-any.whl"
    cell = dataclasses.replace(matrix.cells["c"], runtime_name="jax", release=str(wheel))
    unit = tmp_path / "out" / "jobs" / "xh-c"
    unit.mkdir(parents=True)
    path = write_spec(JobSpec(cell, RunSettings(matrix=matrix, out_dir=tmp_path / "out"), "", "c"), unit)
    done = _job(tmp_path, str(path), SLURM_JOB_ID="80", SLURMD_NODENAME="node1")
    assert done.returncode == 0, done.stdout + done.stderr
    read = read_result(attempt_dir(unit, 0), cell)
    assert read is not None
    result, not_installed, _ = read
    assert not_installed
    [record] = result.records
    assert record.final.outcome == ERROR and f"no such wheel file or directory: {wheel}" in record.final.message


def test_an_attempts_result_reads_back_as_it_was_written(tmp_path: Path) -> None:
    """What a job's attempt writes is what the run reads: a unit stopped by SIGTERM inside its
    job reads as interrupted, and a split cell's parts' overhead is kept."""
    from harness.executors.slurm_job import write_result
    from harness.matrix.config import Cell
    from harness.matrix.supervisor import CellResult

    cell = Cell("c")
    written = CellResult(cell, [], 12.5, 2, "", True, 3.25)
    write_result(attempt_dir(tmp_path, 0), written, False)
    read = read_result(attempt_dir(tmp_path, 0), cell)
    assert read is not None
    result, not_installed, _ = read
    assert (result.wall, result.launches, result.skipped, result.interrupted, result.parts_overhead) == (
        12.5, 2, "", True, 3.25)
    assert not not_installed


def test_a_runs_unit_is_written_without_its_interrupt_flag(tmp_path: Path) -> None:
    """A run's settings hold the event its Ctrl-C sets, which no pickle can carry to a node: the
    unit is written without it, and the job makes its own."""
    import pickle
    import threading

    from harness.matrix.config import Cell

    settings = RunSettings(matrix=load_matrix_of(tmp_path), out_dir=tmp_path / "out", cancel=threading.Event())
    path = write_spec(JobSpec(Cell("c"), settings, "", "c"), tmp_path)
    with open(path, "rb") as handle:
        unit = pickle.load(handle)
    assert unit.settings.cancel is None and unit.settings.out_dir == tmp_path / "out"
    assert settings.cancel is not None  # the run's own is left as it was


def load_matrix_of(tmp_path: Path) -> Matrix:
    write_matrix(tmp_path, '[cells.c]\nbackend = "cpu"\n')
    return load_matrix(tmp_path / "matrix.toml")
