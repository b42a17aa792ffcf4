"""A launcher cell under ``srun`` on any machine: SLURM's commands as a script (``fake_srun.py``)
that starts the step's tasks here, so that how the harness follows ranks it did not start (their
events, the launcher, the scheduler's word) is tested where no cluster runs. The same cells on the
project's real cluster are ``suites/cluster/test_launcher_faults.py``; this adds what only a fake
controller can do at will: a node that fails mid-test, and a harness inside an allocation."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from matrix_helpers import RunResult, alive, run_cell, run_matrix, write_matrix, write_suite

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


@pytest.mark.jax_independent
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


@pytest.mark.jax_independent
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


@pytest.mark.jax_independent
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


@pytest.mark.jax_independent
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
    # a rank's stray bytes in the same log (a native library's output is not always UTF-8)
    (tmp_path / "launcher.log").write_bytes(b"\xff\xfe garbled \x80\n" + log.encode())
    assert launch.job_id() == job


@pytest.mark.jax_independent
def test_with_no_job_known_the_scheduler_is_not_asked(fake_cluster: Path, tmp_path: Path) -> None:
    """Before srun said its job and before any rank said it, there is nothing to ask the
    controller about: asking it of no job would only risk another job's answer."""
    from harness.matrix.cluster_launch import ClusterLaunch
    from harness.matrix.launchers import SLURM

    _job(fake_cluster, "NODE_FAIL")
    (tmp_path / "launcher.log").write_text("srun: error: Unable to allocate resources\n")
    rank = _rank_ended_at(tmp_path, 0, 1.0, dict(os.environ))
    rank.identity.clear()
    launch = ClusterLaunch([rank.spec], SLURM, ["true"], "job", tmp_path / "launcher.log", cwd=tmp_path,
                           test_timeout=30)
    launch.ranks = [rank]
    assert launch.scheduler_cause() == ""
    assert not (fake_cluster / "scontrol.args").exists()


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


@pytest.mark.jax_independent
def test_a_launched_rank_ends_as_its_exit_event_says_even_one_read_after_the_launcher_ended(
        tmp_path: Path) -> None:
    """A rank the launcher started is no child of the supervisor: it is running until its parent's
    ``exit`` event is read, then ended with that event's code, which is read one last time when
    the launcher ends first; only a rank with no event at all is taken for lost (SIGKILL)."""
    import json
    import subprocess

    from harness.matrix.cluster_launch import LOST, ClusterLaunch
    from harness.matrix.launchers import MPI
    from harness.matrix.multiproc import RankSpec

    def launch_of(index: int, seconds: float = 30) -> ClusterLaunch:
        spec = RankSpec(index, [], dict(os.environ), tmp_path / f"rank{index}.events.jsonl", tmp_path / "s",
                        tmp_path / f"rank{index}.log")
        launch = ClusterLaunch([spec], MPI, ["sleep", str(seconds)], "job", tmp_path / "launcher.log",
                               cwd=tmp_path, test_timeout=30)
        launch.start_ranks()
        return launch

    def ended(launch: ClusterLaunch) -> None:
        launch.process.kill()
        launch.process.wait()

    exit_event = json.dumps({"event": "exit", "returncode": 3, "time": 1.0}) + "\n"
    running = launch_of(0)
    rank = running.ranks[0]
    assert rank.proc.poll() is None
    began = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        rank.proc.wait(timeout=0.2)
    assert time.monotonic() - began >= 0.2  # waited its time before giving up
    rank.spec.events.write_text(exit_event)
    rank.reader.poll()  # as the supervisor reads every stream
    assert rank.proc.poll() == 3 and rank.proc.wait(timeout=5) == 3  # the launcher still runs
    ended(running)

    late = launch_of(1)
    late.ranks[0].spec.events.write_text(exit_event)  # landed, not yet read, when the launcher ended
    ended(late)
    assert late.ranks[0].proc.poll() == 3

    lost = launch_of(2)
    ended(lost)
    assert lost.ranks[0].proc.poll() == LOST and lost.ranks[0].proc.wait(timeout=5) == LOST
    # a rank lost before it said who it is: its record still says where it is not known
    assert lost.describe_end(lost.ranks[0]).startswith("on an unknown host was lost: it ended without a word")
    # waited for with no bound: until the launcher ends, as a process is
    assert launch_of(3, seconds=0.3).ranks[0].proc.wait() == LOST


def _rank_ended_at(tmp_path: Path, index: int, ended: float, env: dict[str, str]):  # -> RankState
    import json
    import subprocess

    from harness.matrix.events import EventReader
    from harness.matrix.multiproc import RankSpec, RankState

    spec = RankSpec(index, [], env, tmp_path / f"rank{index}.events.jsonl", tmp_path / "s", tmp_path / "l")
    spec.events.write_text(json.dumps({"event": "exit", "returncode": -15, "time": ended}) + "\n")
    reader = EventReader(spec.events)
    reader.poll()
    state = RankState(spec, subprocess.Popen(["true"]), reader, 0, 0, 0.0, 0.0, returncode=-15)
    state.identity.update(host=f"fake{index + 1}", job="4242", step="0")
    return state


def _job(state: Path, job_state: str) -> None:
    import json

    (state / "job-4242.json").write_text(json.dumps(
        {"id": "4242", "name": "job", "nodes": "fake1,fake2", "state": job_state, "pids": []}))


@pytest.mark.jax_independent
def test_a_node_drained_under_a_job_that_failed_by_itself_is_not_blamed(fake_cluster: Path,
                                                                        tmp_path: Path) -> None:
    """An administrator drains a node for maintenance: it runs its jobs on, and the scheduler
    ends none of them. A rank that crashed on another node is the job's cause, not the rank that
    happens to sit on the drained node."""
    from harness.matrix.cluster_launch import ClusterLaunch
    from harness.matrix.launchers import SLURM

    first, second = _rank_ended_at(tmp_path, 0, 1.0, dict(os.environ)), _rank_ended_at(tmp_path, 1, 2.0,
                                                                                          dict(os.environ))
    _job(fake_cluster, "FAILED")
    (fake_cluster / "drain-fake2").write_text("")
    launch = ClusterLaunch([first.spec, second.spec], SLURM, ["true"], "job", tmp_path / "launcher.log",
                           cwd=tmp_path, test_timeout=30)
    launch.ranks = [first, second]
    assert launch.scheduler_cause() == ""
    assert launch.blame([first, second], 3.0) is first


@pytest.mark.jax_independent
def test_a_one_rank_job_that_lost_its_node_blames_its_rank(fake_cluster: Path, tmp_path: Path) -> None:
    """A launcher cell of one rank whose node fails: that rank, on the node the scheduler lists
    down, is blamed, and the scheduler's word is its record's."""
    from harness.matrix.cluster_launch import ClusterLaunch
    from harness.matrix.launchers import SLURM

    alone = _rank_ended_at(tmp_path, 0, 1.0, dict(os.environ))
    _job(fake_cluster, "RUNNING")
    (fake_cluster / "down-fake1").write_text("")
    launch = ClusterLaunch([alone.spec], SLURM, ["true"], "job", tmp_path / "launcher.log", cwd=tmp_path,
                           test_timeout=30)
    launch.ranks = [alone]
    assert launch.blame([alone], 3.0) is alone
    assert launch.describe_end(alone).endswith("; the scheduler ended job 4242: NODE_FAIL (reason NodeDown, "
                                               "nodes fake1,fake2)")


@pytest.mark.jax_independent
def test_the_schedulers_word_that_comes_after_the_first_death_outranks_it(fake_cluster: Path,
                                                                           tmp_path: Path) -> None:
    """A node fails: srun ends the peers on the other nodes, whose ends the watchdog sees first,
    and only then does the scheduler mark the job NODE_FAIL. The launch's culprit is the rank on
    the lost node, not the peer that was seen dying first."""
    import textwrap

    from harness.matrix.cluster_launch import ClusterLaunch
    from harness.matrix.launchers import SLURM
    from harness.matrix.multiproc import RankSpec

    specs = [RankSpec(i, [], dict(os.environ), tmp_path / f"rank{i}.events.jsonl", tmp_path / "s",
                      tmp_path / f"rank{i}.log") for i in (0, 1)]
    _job(fake_cluster, "RUNNING")
    play = tmp_path / "node_fails.py"  # srun's part, in the order a node failure plays it
    play.write_text(textwrap.dedent(f"""
        import json, time
        from pathlib import Path

        def say(path, **event):
            with open(path, "a") as fh:
                fh.write(json.dumps(event) + "\\n")

        for rank, host in ((0, "fake1"), (1, "fake2")):
            say({str(specs[0].events)!r}.replace("rank0", f"rank{{rank}}"), event="rank", host=host,
                job="4242", step="0", rank=rank)
        time.sleep(0.5)
        say({str(specs[1].events)!r}, event="exit", returncode=-15, host="fake2", time=time.time())
        time.sleep(1.0)  # the watchdog has blamed rank 1 by now
        Path({str(fake_cluster)!r}, "down-fake1").write_text("")
        raise SystemExit(1)
    """))
    launch = ClusterLaunch(specs, SLURM, [sys.executable, str(play)], "job", tmp_path / "launcher.log",
                           cwd=tmp_path, test_timeout=30)
    result = launch.run()
    assert result.culprit == 0, [s.identity.get("end") for s in result.ranks]
    assert result.ranks[0].identity["end"].startswith("on fake1 (job 4242.0) was lost")


@pytest.mark.jax_independent
def test_the_launcher_runs_in_the_cells_directory_with_no_input_and_every_word_in_its_log(
        tmp_path: Path) -> None:
    """What the launcher says (srun's allocation lines, mpirun's errors) is the only trace of a
    step that never started: both its streams go to its own log, under a header naming the
    command, in folders made for it; it runs in the cell's directory, and never reads the
    terminal the harness was started from."""
    from harness.matrix.cluster_launch import ClusterLaunch
    from harness.matrix.launchers import MPI
    from harness.matrix.multiproc import RankSpec

    cell_dir = tmp_path / "cell"
    cell_dir.mkdir()
    log = tmp_path / "logs" / "cell" / "launcher.log"
    spec = RankSpec(0, [], dict(os.environ), tmp_path / "rank0.events.jsonl", tmp_path / "s", tmp_path / "l")
    launch = ClusterLaunch([spec], MPI, ["sh", "-c", "pwd; echo said; echo complained >&2; cat"], "job", log,
                           cwd=cell_dir, test_timeout=30)
    saved = os.dup(0)
    typed, typing = os.pipe()
    os.write(typing, b"typed at the terminal\n")
    try:
        os.dup2(typed, 0)  # the harness's own input: a terminal someone types into
        launch.start_ranks()
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        os.close(typed)
        os.close(typing)  # the typing ends: a launcher that read the terminal has read it all
    try:
        assert launch.process.wait(timeout=30) == 0
    finally:
        launch.reap()
    lines = log.read_text().splitlines()
    assert lines[:5] == ["", "===== [xharness] mpi: sh -c pwd; echo said; echo complained >&2; cat",
                         str(cell_dir), "said", "complained"], lines
    assert "typed at the terminal" not in lines


def _sleeper_argv(child_pid: Path) -> list[str]:
    """A task or a launcher: dies of any signal it is sent, with a child (whose pid it writes to
    ``child_pid``, a file of the test's own) that only a signal to its group reaches."""
    return ["sh", "-c", 'sleep 30 & echo $! > "$0.tmp"; mv "$0.tmp" "$0"; wait', str(child_pid)]


def _sleeper(child_pid: Path) -> subprocess.Popen[bytes]:
    """``_sleeper_argv`` started in a process group of its own."""
    return subprocess.Popen(_sleeper_argv(child_pid), start_new_session=True)


@pytest.mark.jax_independent
@pytest.mark.parametrize("sig", [signal.SIGUSR1, signal.SIGTERM, signal.SIGKILL])
def test_a_signal_for_slurm_ranks_goes_to_their_step_and_only_a_kill_to_the_launcher_too(
        fake_cluster: Path, tmp_path: Path, sig: int) -> None:
    """Under SLURM the ranks are reached through the scheduler (``scancel --signal`` to their step,
    asked of the job's own cluster), never by signalling srun, which would end the step instead of
    passing a stack dump's SIGUSR1 on; a kill also ends srun's whole group."""
    import json

    from harness.matrix.cluster_launch import ClusterLaunch
    from harness.matrix.launchers import SLURM

    env = dict(os.environ)
    (tmp_path / "another-cluster").mkdir()
    os.environ["FAKE_SLURM_DIR"] = str(tmp_path / "another-cluster")  # restored by fake_cluster's monkeypatch
    task, launcher = _sleeper(tmp_path / "task.pid"), _sleeper(tmp_path / "launcher.pid")
    (fake_cluster / "job-4242.json").write_text(json.dumps(
        {"id": "4242", "name": "job", "nodes": "fake1,fake2", "state": "RUNNING", "pids": [task.pid]}))
    rank = _rank_ended_at(tmp_path, 0, 1.0, env)
    launch = ClusterLaunch([rank.spec], SLURM, ["true"], "job", tmp_path / "launcher.log", cwd=tmp_path,
                           test_timeout=30)
    launch.ranks, launch.process = [rank], launcher
    try:
        launch.signal_ranks([], sig)
        assert task.poll() is None and launcher.poll() is None  # no rank asked: nothing sent
        launch.signal_ranks([rank], sig)
        assert task.wait(timeout=10) == -sig
        assert (fake_cluster / "scancel.args").read_text().splitlines() == [
            f"--signal={signal.Signals(sig).name[3:]} 4242.0"]
        if sig == signal.SIGKILL:
            assert launcher.wait(timeout=10) == -sig
        else:
            time.sleep(0.2)
            assert launcher.poll() is None
    finally:
        for proc in (task, launcher):
            proc.kill()
            proc.wait()


@pytest.mark.jax_independent
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_mpirun_started_in_a_group_of_its_own_is_sent_the_signals_and_a_kill_ends_its_group(
        tmp_path: Path, sig: int) -> None:
    """``mpirun`` forwards SIGTERM and SIGUSR1 to its ranks, so they are sent to it alone; a kill
    cannot be forwarded, so it reaches every process of mpirun's group."""
    from harness.matrix.cluster_launch import ClusterLaunch
    from harness.matrix.launchers import MPI

    child_pid = tmp_path / "child.pid"
    spec = _rank_ended_at(tmp_path, 0, 1.0, {}).spec
    launch = ClusterLaunch([spec], MPI, _sleeper_argv(child_pid), "job", tmp_path / "launcher.log",
                           cwd=tmp_path, test_timeout=30)
    launch.start_ranks()  # mpirun started as the harness starts it: a group of its own
    launcher, rank = launch.process, launch.ranks[0]
    deadline = time.monotonic() + 10
    while not child_pid.exists():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    child = int(child_pid.read_text())
    try:
        launch.signal_ranks([rank], sig)
        assert launcher.wait(timeout=10) == -sig
        if sig == signal.SIGKILL:
            deadline = time.monotonic() + 10
            while alive(child):
                assert time.monotonic() < deadline, "mpirun's group outlived the kill"
                time.sleep(0.02)
        else:
            assert alive(child)  # mpirun's to pass on
    finally:
        for pid in (launcher.pid, child):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        launcher.wait()


@pytest.mark.jax_independent
def test_the_schedulers_word_is_read_before_the_sweep_cancels_the_job(fake_cluster: Path, tmp_path: Path) -> None:
    """The scheduler requeued the job when its node went (its step's ranks lost with it); the
    sweep's own cancel then makes it CANCELLED. The record keeps what the scheduler did, not what
    the harness did after."""
    from harness.matrix.cluster_launch import ClusterLaunch
    from harness.matrix.launchers import SLURM

    _job(fake_cluster, "REQUEUED")
    rank = _rank_ended_at(tmp_path, 0, 1.0, dict(os.environ))
    launch = ClusterLaunch([rank.spec], SLURM, ["true"], "job", tmp_path / "launcher.log", cwd=tmp_path,
                           test_timeout=30)
    launch.ranks, launch.process = [rank], subprocess.Popen(["true"], start_new_session=True)
    launch.reap()
    assert "--quiet --name=job" in (fake_cluster / "scancel.args").read_text().splitlines()
    assert launch.scheduler_cause() == ("the scheduler ended job 4242: REQUEUED (reason None, "
                                        "nodes fake1,fake2)")


@pytest.mark.jax_independent
def test_the_sweep_cancels_the_job_on_its_own_cluster_and_waits_until_it_is_listed_no_more(
        fake_cluster: Path, tmp_path: Path) -> None:
    """The next launch must not meet this one's job: the sweep cancels it (by its unique name, on
    the cluster the job was sent to) and returns only once the scheduler lists it no more, here
    when its last task, on a node that no longer answers, ends by itself a second later."""
    import json

    from harness.matrix.cluster_launch import ClusterLaunch
    from harness.matrix.launchers import SLURM

    env = dict(os.environ)
    (tmp_path / "another-cluster").mkdir()
    os.environ["FAKE_SLURM_DIR"] = str(tmp_path / "another-cluster")  # restored by fake_cluster's monkeypatch
    straggler = subprocess.Popen(["sleep", "1"], start_new_session=True)
    threading.Thread(target=straggler.wait, daemon=True).start()  # reaped when it ends, as on its node
    (fake_cluster / "job-4242.json").write_text(json.dumps(
        {"id": "4242", "name": "job", "nodes": "fake1", "state": "RUNNING", "pids": [straggler.pid]}))
    (fake_cluster / "down-fake1").write_text("")
    rank = _rank_ended_at(tmp_path, 0, 1.0, env)
    launch = ClusterLaunch([rank.spec], SLURM, ["true"], "job", tmp_path / "launcher.log", cwd=tmp_path,
                           test_timeout=30)
    launch.ranks, launch.process = [rank], subprocess.Popen(["true"], start_new_session=True)
    try:
        launch.reap()
        assert "--quiet --name=job" in (fake_cluster / "scancel.args").read_text().splitlines()
        assert straggler.poll() is not None  # the job was listed until its last task ended
    finally:
        straggler.kill()
        straggler.wait()


@pytest.mark.jax_independent
def test_the_sweep_kills_the_ranks_left_on_this_machine_and_no_process_of_another(tmp_path: Path) -> None:
    """mpirun killed leaves its ranks on this machine running: the sweep kills their groups. A
    rank that said another machine's name is that machine's: its pid means nothing here, and
    whatever process holds that number on this machine is left alone."""
    import socket

    from harness.matrix.cluster_launch import ClusterLaunch
    from harness.matrix.launchers import MPI

    elsewhere, here = _sleeper(tmp_path / "elsewhere.pid"), _sleeper(tmp_path / "here.pid")
    ranks = [_rank_ended_at(tmp_path, i, 1.0, {}) for i in range(3)]
    ranks[0].identity.update(pid=elsewhere.pid, machine="another-machine")
    ranks[1].identity.update(pid="unknown", machine=socket.gethostname())
    ranks[2].identity.update(pid=here.pid, machine=socket.gethostname())
    launch = ClusterLaunch([r.spec for r in ranks], MPI, ["true"], "job", tmp_path / "launcher.log", cwd=tmp_path,
                           test_timeout=30)
    launch.ranks, launch.process = ranks, subprocess.Popen(["true"], start_new_session=True)
    try:
        launch.reap()
        assert here.wait(timeout=10) == -signal.SIGKILL
        assert elsewhere.poll() is None
    finally:
        for proc in (elsewhere, here):
            proc.kill()
            proc.wait()


def test_a_crash_after_a_timed_out_launch_is_judged_by_its_own_stacks(fake_cluster: Path, tmp_path: Path) -> None:
    """Every launch of a cell appends to its ranks' stack files. After a test that timed out
    (its stacks begin "Timeout ("), the cell is launched again for the rest; a rank of that
    launch that then exits with code 1 crashed: it is not taken for a second timeout because of
    the first launch's dump."""
    write_suite(tmp_path, {"tests/test_after.py": '''
        import os, time

        import jax

        def test_a_hangs():
            time.sleep(60)

        def test_b_exits():
            if jax.process_index() == 1:
                os._exit(1)
            time.sleep(60)
    '''})
    write_matrix(tmp_path, CELL.replace("test_ranks.py", "test_after.py").replace("timeout = 30", "timeout = 3"))
    result = run_matrix(tmp_path, timeout=240)
    assert result.returncode == 1, result.stdout + result.stderr
    records = _by_name(result)
    hung, exited = records["test_a_hangs"].final, records["test_b_exits"].final
    assert "ran past its 3s time limit" in hung.message, hung.message
    assert (exited.outcome, exited.kind) == (ERROR, KIND_RANK), exited
    assert "rank 1 on fake2" in exited.message and "exited with code 1" in exited.message, exited.message
    assert "time limit" not in exited.message, exited.message


@pytest.mark.jax_independent
def test_a_controller_that_does_not_answer_is_not_waited_for(fake_cluster: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A scheduler command is bounded: a controller that hangs leaves the record without the
    scheduler's word, never the sweep stuck."""
    from harness.matrix import cluster_launch
    from harness.matrix.launchers import SLURM

    monkeypatch.setattr(cluster_launch, "SCHEDULER_ASK_TIMEOUT", 0.5)
    _job(fake_cluster, "TIMEOUT")
    (fake_cluster / "silent-controller").write_text("")
    rank = _rank_ended_at(tmp_path, 0, 1.0, dict(os.environ))
    launch = cluster_launch.ClusterLaunch([rank.spec], SLURM, ["true"], "job", tmp_path / "launcher.log",
                                          cwd=tmp_path, test_timeout=30)
    launch.ranks = [rank]
    began = time.monotonic()
    assert launch.scheduler_cause() == ""
    assert time.monotonic() - began < 30  # not scontrol's 60 s
    (fake_cluster / "silent-controller").unlink()
    assert launch.scheduler_cause().startswith("the scheduler ended job 4242: TIMEOUT")


@pytest.mark.jax_independent
@pytest.mark.parametrize("command", [["salloc", "-N2", "mpirun", "true"], ["mpirun", "-np", "2", "true"]])
def test_mpirun_in_an_allocation_of_its_own_has_it_cancelled_and_alone_nothing(
        fake_cluster: Path, tmp_path: Path, command: list[str]) -> None:
    """An mpirun cell sent to the cluster runs under ``salloc``: its job is the launch's, and the
    sweep cancels it by its name. A plain mpirun has no job to cancel."""
    from harness.matrix.cluster_launch import ClusterLaunch
    from harness.matrix.launchers import MPI

    rank = _rank_ended_at(tmp_path, 0, 1.0, dict(os.environ))
    launch = ClusterLaunch([rank.spec], MPI, command, "xharness-c-1", tmp_path / "launcher.log", cwd=tmp_path,
                           test_timeout=30)
    launch.ranks, launch.process = [rank], subprocess.Popen(["true"], start_new_session=True)
    launch.reap()
    asked = (fake_cluster / "scancel.args").read_text().splitlines() if (fake_cluster / "scancel.args").exists() else []
    assert asked == (["--quiet --name=xharness-c-1"] if command[0] == "salloc" else [])


@pytest.mark.jax_independent
def test_a_job_the_scheduler_never_starts_is_a_record_saying_why(fake_cluster: Path, tmp_path: Path) -> None:
    """No rank ever started: the job waited in the queue (a node drained under it, say) until the
    supervisor gave up. The record says so, with the scheduler's reason and the nodes taking no
    jobs, and does not read as a rank that ran past its time limit."""
    (fake_cluster / "no-resources").write_text("ReqNodeNotAvail,_UnavailableNodes:fake2")
    (fake_cluster / "drain-fake2").write_text("Kill task failed")
    (record,) = run_cell(tmp_path, "c", idle_limit=2.0, grace=1.0)
    job = next(p.stem.removeprefix("job-") for p in fake_cluster.glob("job-*.json"))
    assert (record.nodeid, record.final.outcome, record.final.kind) == ("xharness::startup", ERROR, KIND_RANK)
    assert (f"never started: the scheduler still held job {job} PENDING when the supervisor gave up on it "
            "(reason ReqNodeNotAvail,_UnavailableNodes:fake2); nodes taking no jobs: fake2 drain: Kill task failed"
            ) in record.final.message, record.final.message
    assert "time limit" not in record.final.message, record.final.message
    # its other rank never started either, and was withdrawn with the job, never signalled
    assert "; rank(s) 1 the same" in record.final.message and "SIGTERM" not in record.final.message, \
        record.final.message
    # the waiting job was withdrawn by its unique name, never signalled (a pending job cannot be,
    # and scancel retries one for seconds): nothing is left in the queue
    assert json.loads((fake_cluster / f"job-{job}.json").read_text())["state"] == "CANCELLED"
    asked = (fake_cluster / "scancel.args").read_text().splitlines()
    assert asked and all(line.startswith("--quiet --name=xharness-c-") for line in asked), asked
