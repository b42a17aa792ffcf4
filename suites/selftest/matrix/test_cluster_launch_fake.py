"""A launcher cell under ``srun`` on any machine: SLURM's commands as a script (``fake_srun.py``)
that starts the step's tasks here, so that how the harness follows ranks it did not start (their
events, the launcher, the scheduler's word) is tested where no cluster runs. The same cells on the
project's real cluster are ``suites/cluster/test_launcher_faults.py``; this adds what only a fake
controller can do at will: a node that fails mid-test, and a harness inside an allocation."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from matrix_helpers import RunResult, alive, run_matrix, write_matrix, write_suite

from harness.report.records import ERROR, KIND_RANK, PASSED

pytestmark = pytest.mark.cell_independent

FAKE = Path(__file__).with_name("fake_srun.py")
TOOLS = ("srun", "scancel", "squeue", "scontrol", "sinfo")

SUITE = {
    "tests/test_ranks.py": '''
        import os, signal, time
        from pathlib import Path

        import jax
        import numpy as np
        from jax.experimental import multihost_utils

        STATE = Path(os.environ["FAKE_SLURM_DIR"])

        def note_pid():
            (STATE / f"pid-{os.getpid()}").write_text("")

        def test_collective_sum():
            note_pid()
            assert jax.process_count() == 2
            gathered = multihost_utils.process_allgather(np.array([jax.process_index() + 1.0]))
            assert float(gathered.sum()) == 3.0

        def test_rank_killed():
            note_pid()
            if jax.process_index() == 1:
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(60)

        def test_node_lost():
            note_pid()
            if jax.process_index() == 0:  # the node's slurmd dies: the task lives on, unreachable
                (STATE / "down-fake1").write_text("")
            time.sleep(60)
    ''',
}

CELL = """
    [cells.c]
    backend = "cpu"
    devices = 1
    processes = 2
    launcher = "slurm"
    paths = ["tests/test_ranks.py"]
    timeout = 30
"""


@pytest.fixture
def fake_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "slurm"
    bin_dir = tmp_path / "bin"
    state.mkdir()
    bin_dir.mkdir()
    for tool in TOOLS:
        wrapper = bin_dir / tool
        wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" {tool} "$@"\n')
        wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SLURM_DIR", str(state))
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    write_suite(tmp_path, SUITE)
    write_matrix(tmp_path, CELL)
    return state


def _by_name(result: RunResult) -> dict:
    return {nodeid.rsplit("::", 1)[1]: record for nodeid, record in result.records("c").items()}


def _nothing_left(state: Path) -> None:
    pids = [int(p.name.removeprefix("pid-")) for p in state.glob("pid-*")]
    assert pids and [pid for pid in pids if alive(pid)] == []


def test_a_killed_rank_is_named_with_its_host_job_and_step(fake_cluster: Path, tmp_path: Path) -> None:
    result = run_matrix(tmp_path, "--", "-k", "collective or killed", timeout=240)
    assert result.returncode == 1, result.stdout + result.stderr
    records = _by_name(result)
    assert records["test_collective_sum"].final.outcome == PASSED, records["test_collective_sum"].final.message
    assert records["test_collective_sum"].properties["rank-hosts"] == "0:fake1 1:fake2"
    killed = records["test_rank_killed"].final
    assert (killed.outcome, killed.kind) == (ERROR, KIND_RANK), killed
    job = next(p.stem.removeprefix("job-") for p in fake_cluster.glob("job-*.json"))
    assert f"rank 1 on fake2 (job {job}.0) died on SIGKILL" in killed.message, killed.message
    assert "the scheduler ended" not in killed.message, killed.message
    # the launch's job was cancelled by its unique name, and nothing it started is alive
    asked = (fake_cluster / "scancel.args").read_text().splitlines()
    assert any(line.startswith("--quiet --name=xharness-c-") for line in asked), asked
    _nothing_left(fake_cluster)


def test_a_rank_lost_with_its_node_inside_an_allocation_is_blamed_on_the_node(
        fake_cluster: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "4242")  # the harness itself runs in an allocation
    result = run_matrix(tmp_path, "--", "-k", "node_lost", timeout=240)
    assert result.returncode == 1, result.stdout + result.stderr
    lost = _by_name(result)["test_node_lost"].final
    assert (lost.outcome, lost.kind) == (ERROR, KIND_RANK), lost
    assert ("rank 0 on fake1 (job 4242.0) was lost: it ended without a word, and the slurm launcher exited "
            "with code 1; ") in lost.message, lost.message
    assert ("the scheduler ended job 4242: NODE_FAIL (reason NodeDown, nodes fake1,fake2)" in lost.message), \
        lost.message
    # the rank on the lost node outlived its step, on this machine: the harness killed it (its
    # pid is checked below); inside an allocation the step is cancelled, never the allocation
    asked = (fake_cluster / "scancel.args").read_text().splitlines()
    assert "--quiet --full 4242.0" in asked and not any("--name=" in line for line in asked), asked
    _nothing_left(fake_cluster)


def test_a_rank_whose_end_is_read_after_the_launchers_is_described_by_its_own_word(tmp_path: Path) -> None:
    """The launcher ended first, so the watchdog took the rank for lost (SIGKILL); its parent's
    ``exit`` event landed after (the rank aborted when its peers went): the record says how it
    really ended, not the stand-in."""
    import json
    import subprocess

    from harness.matrix.cluster_launch import LOST, ClusterLaunch, settle_late_ends
    from harness.matrix.events import EventReader
    from harness.matrix.launchers import MPI
    from harness.matrix.multiproc import RankSpec, RankState

    def rank(index: int, returncode: int) -> RankState:
        spec = RankSpec(index, [], {}, tmp_path / f"rank{index}.events.jsonl", tmp_path / "s", tmp_path / "l")
        spec.events.touch()
        state = RankState(spec, subprocess.Popen(["true"]), EventReader(spec.events), 0, 0, 0.0, 0.0,
                          returncode=returncode)
        state.identity.update(host=f"node{index}")
        return state

    late, lost, exited = rank(1, LOST), rank(2, LOST), rank(3, 3)
    launch = ClusterLaunch([late.spec], MPI, ["true"], "job", tmp_path / "launcher.log", cwd=tmp_path,
                           test_timeout=30)
    launch.process = subprocess.Popen(["true"])
    launch.process.wait()
    late.spec.events.write_text(json.dumps({"event": "exit", "returncode": -6, "time": 1.0}) + "\n")
    exited.spec.events.write_text(json.dumps({"event": "exit", "returncode": -15, "time": 1.0}) + "\n")
    settle_late_ends([late, lost, exited])
    assert (late.returncode, lost.returncode, exited.returncode) == (-6, LOST, 3)
    assert launch.describe_end(late) == "on node1 died on SIGABRT (Aborted)"
    assert launch.describe_end(lost).startswith("on node2 was lost: it ended without a word, and the mpi "
                                                "launcher exited with code 0")
    # the launcher itself killed, or still running when the rank was given up for lost
    launch.process = subprocess.Popen(["sleep", "30"])
    assert launch.describe_end(lost).endswith("and the mpi launcher was still running")
    launch.process.kill()
    launch.process.wait()
    assert launch.describe_end(lost).endswith("and the mpi launcher died on SIGKILL (Killed)")


@pytest.mark.parametrize(("word", "blamed"), [("down*", 1), ("drain", 1), ("fail", 1), ("idle", 0), ("mix", 0)])
def test_a_rank_on_a_node_the_scheduler_lists_down_is_blamed_though_a_peer_ended_first(
        fake_cluster: Path, tmp_path: Path, word: str, blamed: int) -> None:
    """The job lost a node: its peers were ended because of it, and may well be seen ending first.
    The rank on the node ``sinfo`` lists down, drained or failed is the cause; on a node that is
    up, the first rank to end is."""
    import json
    import subprocess

    from harness.matrix.cluster_launch import ClusterLaunch
    from harness.matrix.events import EventReader
    from harness.matrix.launchers import SLURM
    from harness.matrix.multiproc import RankSpec, RankState

    env = dict(os.environ)  # the job's environment: its cluster is asked, not the one this process would ask
    (tmp_path / "another-cluster").mkdir()
    os.environ["FAKE_SLURM_DIR"] = str(tmp_path / "another-cluster")  # restored by fake_cluster's monkeypatch

    def rank(index: int, ended: float) -> RankState:
        spec = RankSpec(index, [], env, tmp_path / f"rank{index}.events.jsonl", tmp_path / "s", tmp_path / "l")
        spec.events.write_text(json.dumps({"event": "exit", "returncode": -15, "time": ended}) + "\n")
        state = RankState(spec, subprocess.Popen(["true"]), EventReader(spec.events), 0, 0, 0.0, 0.0,
                          returncode=-15)
        state.identity.update(host=f"fake{index + 1}", job="4242", step="0")
        return state

    first, second = rank(0, 1.0), rank(1, 2.0)
    (fake_cluster / "job-4242.json").write_text(json.dumps(
        {"id": "4242", "name": "job", "nodes": "fake1,fake2", "state": "RUNNING", "pids": []}))
    (fake_cluster / "down-fake2").write_text(word)
    launch = ClusterLaunch([first.spec, second.spec], SLURM, ["true"], "job", tmp_path / "launcher.log",
                           cwd=tmp_path, test_timeout=30)
    launch.ranks = [first, second]
    assert launch.blame([first, second], 3.0) is (first, second)[blamed]
    assert launch.scheduler_cause() == "the scheduler ended job 4242: NODE_FAIL (reason NodeDown, nodes fake1,fake2)"


def test_among_ranks_that_ended_the_first_to_end_is_blamed_and_one_that_wrote_nothing_before_all(
        tmp_path: Path) -> None:
    """Outside a scheduler's verdict: the launcher ended the peers of the rank that ended badly, so
    the first to end, by the time its exit event says, is the cause, whatever its rank; a rank that
    wrote no exit event at all was lost before any that did (its host went away)."""
    import json
    import subprocess

    from harness.matrix.cluster_launch import ClusterLaunch
    from harness.matrix.events import EventReader
    from harness.matrix.launchers import MPI
    from harness.matrix.multiproc import RankSpec, RankState

    def rank(index: int, ended: float | None) -> RankState:
        spec = RankSpec(index, [], {}, tmp_path / f"rank{index}.events.jsonl", tmp_path / "s", tmp_path / "l")
        spec.events.write_text("" if ended is None else
                               json.dumps({"event": "exit", "returncode": -15, "time": ended}) + "\n")
        reader = EventReader(spec.events)
        reader.poll()  # as the supervisor has read each stream by the time it blames a rank
        return RankState(spec, subprocess.Popen(["true"]), reader, 0, 0, 0.0, 0.0, returncode=-15)

    ranks = [rank(0, 2.0), rank(1, 1.0), rank(2, 1.5)]
    launch = ClusterLaunch([r.spec for r in ranks], MPI, ["true"], "job", tmp_path / "launcher.log", cwd=tmp_path,
                           test_timeout=30)
    launch.ranks = ranks
    assert launch.blame(ranks, 3.0).rank == 1
    lost = rank(3, None)
    assert launch.blame([*ranks, lost], 3.0).rank == 3


@pytest.mark.parametrize(("log", "job"), [
    ("srun: job 77 has been allocated resources\n", "77"),
    ("srun: job 41 queued and waiting for resources\nsrun: job 41 has been allocated resources\n", "41"),
    ("srun: job 41 queued and waiting for resources\nsrun: job 41 has been allocated resources\n"
     "srun: error: the step was cancelled\nsrun: job 99 has been allocated resources\n", "99"),
    ("srun: error: Unable to allocate resources: Invalid partition name specified\n", ""),
])
def test_before_any_rank_says_its_job_the_job_is_read_from_what_srun_printed(tmp_path: Path, log: str,
                                                                             job: str) -> None:
    """A step whose ranks never started (the allocation failed, or was lost first) is still named
    by its job: the last one srun printed, a single line or a queued one's two."""
    from harness.matrix.cluster_launch import ClusterLaunch
    from harness.matrix.launchers import SLURM

    launch = ClusterLaunch([], SLURM, ["true"], "job", tmp_path / "launcher.log", cwd=tmp_path, test_timeout=30)
    (tmp_path / "launcher.log").write_text(log)
    assert launch.job_id() == job and launch.step_ref() == job


def test_a_launcher_cell_of_one_rank_runs_it_as_one_task(fake_cluster: Path, tmp_path: Path) -> None:
    """``processes = 1`` under a launcher: one task, started with the cell's environment, its
    host and job said as for many."""
    write_suite(tmp_path, {"tests/test_one.py": '''
        import jax

        def test_alone():
            assert jax.process_count() == 1
    '''})
    write_matrix(tmp_path, CELL.replace("processes = 2", "processes = 1").replace("test_ranks.py", "test_one.py"))
    result = run_matrix(tmp_path, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    (record,) = result.records("c").values()
    assert record.final.outcome == PASSED, record.final.message
    assert record.properties["rank-hosts"] == "0:fake1", record.properties
