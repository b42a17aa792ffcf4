"""``--on slurm`` following its jobs, against SLURM's commands as scripts: what the run says of each
job as the queue changes, where a job's files go, what a cancel asks, what the run's deadline and a
silent controller do, which GPU cells the cluster can serve, and the cost figures in ``matrix.json``.
The same paths against a real cluster are ``suites/cluster/test_slurm_executor.py``; these read
the run's own words, which there are only printed."""

from __future__ import annotations

import io
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fake_slurm import FakeSlurm, on_path

from harness.executors.slurm import SlurmExecutor, SlurmOptions
from harness.executors.slurm_job import JobSpec, attempt_dir, write_result
from harness.matrix.config import Cell, Matrix
from harness.matrix.progress import CellProgress, Progress
from harness.matrix.supervisor import CellResult, RunSettings
from harness.report.records import ERROR, PASSED, SKIPPED, Attempt, TestRecord

pytestmark = [pytest.mark.cell_independent, pytest.mark.jax_independent]  # SLURM's commands as scripts

POLL = 0.02


@pytest.fixture
def slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    fake = on_path(tmp_path, monkeypatch)
    # each submission gets the next job id, from 41
    (fake.root / "sbatch").write_text(
        "#!/bin/sh\n"
        f'n=$(cat "{fake.root}/count" 2>/dev/null || echo 40); n=$((n + 1)); echo $n > "{fake.root}/count"\n'
        f'echo "$*" >> "{fake.root}/sbatch.args"\n'
        "echo $n\n"
    )
    # squeue answers for the jobs it is asked about only, as the real one does
    (fake.root / "squeue").write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> "{fake.root}/squeue.args"\n'
        + fake.answer("squeue")
        + '[ -n "$d" ] || exit 0\n'
        '[ -f "$d/err" ] && cat "$d/err" >&2\n'
        'rc=$(cat "$d/rc"); [ "$rc" = 0 ] || exit "$rc"\n'
        'for job in $(echo "$*" | sed -n \'s/.*--jobs=\\([0-9,]*\\).*/\\1/p\' | tr , " "); do\n'
        '  grep "^$job|" "$d/out"\n'
        "done\n"
        "exit 0\n"
    )
    return fake


class Run:
    """One executor over the fake cluster, its progress read back as text."""

    def __init__(self, tmp_path: Path, **options: float) -> None:
        self.stream = io.StringIO()
        self.progress = Progress(1, stream=self.stream, interval=0.0)
        self.out = tmp_path / "out"
        self.executor = SlurmExecutor(SlurmOptions(poll=POLL, **options), self.out, self.progress, workdir=tmp_path)
        self.settings = RunSettings(matrix=Matrix(tmp_path / "m.toml", tmp_path, {}), out_dir=self.out)
        self.results: dict[str, CellResult] = {}
        self.not_installed: dict[str, bool] = {}
        self.threads: list[threading.Thread] = []

    def start(self, cell: Cell) -> None:
        def job() -> None:
            self.results[cell.name], self.not_installed[cell.name] = self.executor.run_job(
                JobSpec(cell, self.settings, "", cell.name), CellProgress(self.progress, cell.name))

        thread = threading.Thread(target=job, daemon=True)
        thread.start()
        self.threads.append(thread)

    def said(self) -> str:
        return self.stream.getvalue()

    def wait_for(self, what: str | Callable[[], bool], seconds: float = 30.0) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if (what in self.said()) if isinstance(what, str) else what():
                return
            time.sleep(POLL)
        raise AssertionError(f"waited {seconds} s for {what!r}; the run said:\n{self.said()}")

    def finish(self) -> None:
        for thread in self.threads:
            thread.join(timeout=60)
            assert not thread.is_alive(), self.said()
        self.executor.close()


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Run]:
    made = Run(tmp_path)
    yield made
    made.executor.close()


def test_a_job_is_told_from_the_queue_to_its_end_and_its_files_are_under_jobs(slurm: FakeSlurm, run: Run,
                                                                             tmp_path: Path) -> None:
    slurm.says("squeue", "41|PENDING||Priority\n")
    started = time.monotonic()  # before its submission
    run.start(Cell("c"))
    run.wait_for("c: job 41 submitted (")
    submitted = time.monotonic()  # after sbatch answered
    run.wait_for("run: jobs: 1 pending (c 41); 0 running; 0 done")
    pending_from = time.monotonic()  # after its submission
    asked = len(slurm.asked("squeue"))
    run.wait_for(lambda: len(slurm.asked("squeue")) >= asked + 5)  # the queue seen several times unchanged
    pending_until = time.monotonic()  # before it was first seen running
    slurm.says("squeue", "41|RUNNING|xh-node1|None\n")
    run.wait_for("c: job 41 running on xh-node1\n")
    seen_running = time.monotonic()  # after it was first seen running
    run.wait_for("run: jobs: 0 pending; 1 running (c 41); 0 done")
    asked = len(slurm.asked("squeue"))
    run.wait_for(lambda: len(slurm.asked("squeue")) >= asked + 5)
    slurm.says("squeue", "41|PENDING||BeginTime\n")  # requeued: a node failed, or a preemption
    run.wait_for("c: job 41 pending (BeginTime): back in the queue, its last attempt's result will be read\n")
    slurm.says("squeue", "41|RUNNING|xh-node2|None\n")
    run.wait_for("c: job 41 running on xh-node2\n")
    # a job's end is completed by the controller's full view: its restarts and its exit code
    slurm.says("scontrol", "JobId=41 JobName=xh-c JobState=FAILED Reason=NonZeroExitCode Restarts=1 "
                           "ExitCode=3:0 NodeList=xh-node2\n")
    slurm.says("squeue", "41|FAILED|xh-node2|NonZeroExitCode\n")
    run.finish()

    said = run.said()
    assert "c: job 41 failed on xh-node2 (NonZeroExitCode)" in said, said
    # a job is pending from its submission: the first look that finds it waiting is no change
    assert "c: job 41 pending (Priority)" not in said, said
    for change in ("c: job 41 submitted", "c: job 41 running on xh-node1", "c: job 41 running on xh-node2",
                   "c: job 41 pending (BeginTime)", "c: job 41 failed"):
        assert said.count(change) == 1, f"{change!r} is said once, when it happens:\n{said}"
    # the queue's summary when a job changes, not at every look: twice pending (submitted, requeued)
    assert said.count("run: jobs: 1 pending (c 41); 0 running; 0 done\n") == 2, said
    assert "run: jobs: 0 pending; 0 running; 1 done\n" in said, said
    batch = tmp_path / "out" / "jobs" / "xh-c" / "job.sh"
    assert f"c: job 41 submitted ({batch})" in said and batch.is_file(), said
    assert slurm.asked("sbatch") == [f"--parsable {batch}"]
    (record,) = run.results["c"].records
    assert record.final.outcome == ERROR, record
    assert "the job ended FAILED on xh-node2 (exit 3:0), NonZeroExitCode" in record.final.message, record

    stats = run.executor.stats()
    assert stats["executor"] == "slurm" and stats["jobs"] == 1 and stats["poll"] == POLL
    assert set(stats) == {"executor", "jobs", "poll", "submit_mean", "submit_max", "start_mean", "start_max"}
    # the queue's wait: at least the time the job was shown pending above, and one job's max is its mean
    assert isinstance(stats["start_max"], float) and stats["start_max"] == stats["start_mean"]
    # the wait is from submission to the first look that saw it running, not to a later look
    assert round(pending_until - pending_from, 4) <= stats["start_max"] <= round(seen_running - started, 4), (
        stats, pending_until - pending_from, seen_running - started)
    assert isinstance(stats["submit_max"], float) and stats["submit_max"] == stats["submit_mean"] > 0
    assert stats["submit_max"] <= round(submitted - started, 4) + 1e-4, (stats, submitted - started)


def test_an_interrupt_cancels_each_live_job_once_and_its_unit_reads_as_interrupted(slurm: FakeSlurm,
                                                                                  run: Run) -> None:
    slurm.says("squeue", "41|RUNNING|xh-node1|None\n")
    run.start(Cell("c"))
    run.wait_for("c: job 41 running on xh-node1")
    run.executor.interrupt()
    run.executor.interrupt()  # a second Ctrl-C asks nothing more of a job already cancelled
    assert slurm.asked("scancel") == ["41"]
    assert run.said().count("run: cancelling job(s) 41") == 1
    slurm.says("squeue", "41|CANCELLED|xh-node1|None\n")
    run.finish()
    assert run.results["c"].interrupted
    run.executor.interrupt()  # and nothing of a job that ended
    assert slurm.asked("scancel") == ["41"]


def test_jobs_still_waiting_at_the_deadline_are_cancelled_and_named(slurm: FakeSlurm, tmp_path: Path) -> None:
    run = Run(tmp_path, deadline=3.0)
    slurm.says("squeue", "41|PENDING||Resources\n42|PENDING||Priority\n43|RUNNING|xh-node1|None\n")
    run.start(Cell("a"))
    run.wait_for("a: job 41 submitted")
    run.start(Cell("b"))
    run.wait_for("b: job 42 submitted")
    run.start(Cell("c"))  # running by the deadline: it is left to finish
    run.wait_for("c: job 43 running on xh-node1")
    run.wait_for("run: the run's deadline (3 s) passed: cancelling the job(s) still waiting: ")
    assert time.monotonic() - run.executor.started >= 3.0, run.said()  # not before it passed
    run.wait_for(lambda: len(slurm.asked("scancel")) >= 1)
    said = run.said()
    named = said.split("cancelling the job(s) still waiting: ", 1)[1].splitlines()[0]
    assert sorted(named.split(" ")) == sorted(slurm.asked("scancel")[0].split(" ")), said
    assert sorted(named.split(" ")) == ["41", "42"], said
    run.wait_for("run: jobs: 2 pending (a 41, b 42); 1 running (c 43); 0 done")
    slurm.says("squeue", "41|CANCELLED||Resources\n42|CANCELLED||Priority\n43|COMPLETED|xh-node1|None\n")
    run.finish()
    # a job that ends without ever having run has no node to name
    assert "a: job 41 cancelled (Resources)\n" in run.said() and "b: job 42 cancelled (Priority)\n" in run.said()
    assert len(slurm.asked("scancel")) == 1, slurm.asked("scancel")
    for name in ("a", "b"):
        (record,) = run.results[name].records
        assert "still waiting to start when the run's deadline (3 s) passed" in record.final.message, record


def test_a_controller_that_stops_answering_is_said_once_then_its_jobs_are_left(slurm: FakeSlurm,
                                                                               tmp_path: Path) -> None:
    run = Run(tmp_path, patience=1.0)
    slurm.says("squeue", "41|RUNNING|xh-node2|None\n")
    run.start(Cell("c"))
    run.wait_for("c: job 41 running on xh-node2")
    asked = len(slurm.asked("squeue"))
    silent_from = time.monotonic()
    slurm.says("squeue", rc=1, err="slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n")
    run.finish()
    silent_for = time.monotonic() - silent_from
    said = run.said()
    assert said.count("run: error: ") == 1, said  # said once, however often it is asked again
    assert "Unable to contact slurm controller" in said and "(retrying for up to 1 s)" in said, said
    assert len(slurm.asked("squeue")) - asked >= 3, "the controller was not asked again before giving up"
    assert 1 <= int(re.search(r"no answer for (\d+) s", said)[1]) <= silent_for + 1, said
    assert "c: job 41 unreachable on xh-node2" in said, said
    (record,) = run.results["c"].records
    message = record.final.message
    assert "was left unfollowed: the controller stopped answering (no answer for " in message, message
    assert "Unable to contact slurm controller" in message, message


@pytest.mark.parametrize(("gres", "devices", "nodes", "served"), [
    ("gpu:4", 4, 1, True),
    ("gpu:tesla:8(S:0-1)", 8, 1, True),
    ("gpu:2", 4, 1, False),
    ("gpu:2", 2, 2, True),  # two per rank, a rank on each of two nodes
    ("(null)", 1, 1, False),
])
def test_a_gpu_cell_is_served_only_where_a_node_has_its_gpus(slurm: FakeSlurm, run: Run, gres: str, devices: int,
                                                             nodes: int, served: bool) -> None:
    from harness.matrix.launchers import SLURM, ClusterOptions

    slurm.says("sinfo", f"{gres}\n")
    cell = (Cell("g", backend="gpu", devices=devices) if nodes == 1 else
            Cell("g", backend="gpu", devices=devices, processes=nodes, launcher=SLURM,
                 cluster=ClusterOptions(nodes=nodes)))
    why = run.executor.cannot_serve(cell)
    assert (why == "") is served, why
    if not served:
        assert why.startswith(f"it asks for --gres=gpu:{devices // nodes} per node, and no node of the cluster "
                              "has that many: sinfo reports generic resources"), why
        run.start(cell)
        run.finish()
        result = run.results["g"]
        assert result.skipped == why and result.cell is cell and not run.not_installed["g"]
        (record,) = result.records
        assert record.final.outcome == SKIPPED and record.final.message.endswith(why), record.final.message
        assert f"g: skipped: {why}\n" in run.said(), run.said()
        assert slurm.asked("sbatch") == []
    assert run.executor.cannot_serve(Cell("c")) == ""  # a CPU cell asks the cluster nothing


def test_the_clusters_cost_figures_are_each_jobs_seconds(tmp_path: Path) -> None:
    """``matrix.json``'s figures: sbatch's seconds per submission, and each job's wait from its
    submission until it was first seen running (a job seen running but never submitted by this
    run, or submitted and never seen running, has no wait)."""
    run = Run(tmp_path)
    figures = run.executor.stats()
    assert figures == {"executor": "slurm", "jobs": 0, "poll": POLL, "submit_mean": None, "submit_max": None,
                       "start_mean": None, "start_max": None}
    run.executor.submitted.update({"41": (100.0, 0.25), "42": (101.0, 1.75), "44": (102.0, 0.5)})
    run.executor.running_seen.update({"41": 103.5, "42": 102.0, "43": 150.0})
    assert run.executor.stats() == {"executor": "slurm", "jobs": 3, "poll": POLL, "submit_mean": 0.8333,
                                    "submit_max": 1.75, "start_mean": 2.25, "start_max": 3.5}


def test_a_deadline_cancel_the_controller_refuses_is_said_as_the_runs_error(slurm: FakeSlurm,
                                                                           tmp_path: Path) -> None:
    run = Run(tmp_path, deadline=1.0)
    slurm.says("squeue", "41|PENDING||Resources\n")
    slurm.says("scancel", rc=1, err="scancel: error: Kill job error on job id 41: Access/permission denied\n")
    run.start(Cell("a"))
    run.wait_for("run: the run's deadline (1 s) passed: cancelling the job(s) still waiting: 41")
    run.wait_for("Access/permission denied")
    said = run.said()
    assert "] run: error: scancel 41: scancel: error: Kill job error on job id 41" in said, said
    slurm.says("squeue", "41|CANCELLED||Resources\n")
    run.finish()


def test_an_interrupt_names_every_live_job_and_a_refused_cancel_is_the_runs_error(slurm: FakeSlurm,
                                                                                  run: Run) -> None:
    slurm.says("squeue", "41|RUNNING|xh-node1|None\n42|PENDING||Priority\n")
    slurm.says("scancel", rc=1, err="scancel: error: Kill job error on job id 41: Access/permission denied\n")
    run.start(Cell("a"))
    run.wait_for("a: job 41 running on xh-node1")
    run.start(Cell("b"))
    run.wait_for("b: job 42 submitted")
    run.executor.interrupt()
    said = run.said()
    assert "] run: cancelling job(s) 41 42\n" in said, said
    assert "] run: error: scancel 41 42: scancel: error: Kill job error on job id 41" in said, said
    slurm.says("squeue", "41|CANCELLED|xh-node1|None\n42|CANCELLED||Priority\n")
    run.finish()


def _unit_dir(run: Run, cell: str) -> Path:
    return run.out / "jobs" / f"xh-{cell}"


def _passed(nodeid: str) -> TestRecord:
    """A test of cell ``c`` that passed: what a job writes of the tests it finished."""
    record = TestRecord(nodeid=nodeid, cell="c")
    record.attempts.append(Attempt(PASSED, duration=1.0))
    return record


def test_an_interrupted_job_is_awaited_until_it_ends_and_what_it_wrote_is_kept(slurm: FakeSlurm, run: Run) -> None:
    """Ctrl-C cancels a running job, whose SIGTERM handler writes the tests it finished; the run
    waits for the controller to say the job ended, so those records are not lost."""
    slurm.says("squeue", "41|RUNNING|xh-node1|None\n")
    run.start(Cell("c"))
    run.wait_for("c: job 41 running on xh-node1")
    run.executor.interrupt()
    asked = len(slurm.asked("squeue"))
    run.wait_for(lambda: len(slurm.asked("squeue")) >= asked + 5)  # the job still ending, asked about again
    finished = _passed("tests/test_a.py::test_a")
    write_result(attempt_dir(_unit_dir(run, "c"), 0), CellResult(Cell("c"), [finished], 2.0, interrupted=True), False)
    slurm.says("squeue", "41|CANCELLED|xh-node1|None\n")
    run.finish()
    result = run.results["c"]
    assert result.interrupted
    assert [(r.nodeid, r.final.outcome) for r in result.records] == [("tests/test_a.py::test_a", PASSED)], result


def test_a_cancelled_job_under_a_silent_controller_is_left_after_the_grace(slurm: FakeSlurm, tmp_path: Path) -> None:
    """Ctrl-C while the controller does not answer: the run gives the job its grace to end, then
    ends without it, however long the controller's patience is."""
    run = Run(tmp_path, cancel_wait=0.5, patience=600.0)
    slurm.says("squeue", "41|RUNNING|xh-node1|None\n")
    run.start(Cell("c"))
    run.wait_for("c: job 41 running on xh-node1")
    slurm.says("squeue", rc=1, err="slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n")
    run.wait_for("Unable to contact slurm controller")
    # read before interrupt(): the job's grace starts when the waiting thread sees it cancelled,
    # which can be while interrupt() is still running scancel
    cancelled = time.monotonic()
    run.executor.interrupt()
    run.finish()
    assert time.monotonic() - cancelled >= 0.5
    assert run.results["c"].interrupted


def test_a_job_not_cancelled_is_followed_past_the_cancel_grace(slurm: FakeSlurm, tmp_path: Path) -> None:
    """The grace is for cancelled jobs only: a job that runs longer is followed to its end."""
    run = Run(tmp_path, cancel_wait=0.2)
    slurm.says("squeue", "41|RUNNING|xh-node1|None\n")
    run.start(Cell("c"))
    run.wait_for("c: job 41 running on xh-node1")
    seen = time.monotonic()
    asked = len(slurm.asked("squeue"))
    run.wait_for(lambda: time.monotonic() - seen > 1.0 and len(slurm.asked("squeue")) >= asked + 5)
    assert run.threads[0].is_alive(), run.said()
    finished = _passed("tests/test_a.py::test_a")
    write_result(attempt_dir(_unit_dir(run, "c"), 0), CellResult(Cell("c"), [finished], 2.0), False)
    slurm.says("squeue", "41|COMPLETED|xh-node1|None\n")
    run.finish()
    result = run.results["c"]
    assert not result.interrupted
    assert [(r.nodeid, r.final.outcome) for r in result.records] == [("tests/test_a.py::test_a", PASSED)], result


@pytest.mark.parametrize(("says", "width", "partition"), [("0/6/0/6\n", 6, ""), ("0/0/0/0\n", 1, ""), ("", 1, ""),
                                                       ("2/2/0/4\n", 4, "debug")])
def test_the_runs_width_is_the_clusters_cpus_asked_once(slurm: FakeSlurm, tmp_path: Path, says: str, width: int,
                                                        partition: str) -> None:
    """How many single-process units the run sends at once: the CPUs of the run's partition from
    sinfo, at least one (a partition whose nodes are all down still runs its units one by one),
    asked once."""
    from harness.executors.slurm_script import JobDefaults

    executor = SlurmExecutor(SlurmOptions(defaults=JobDefaults(partition=partition)), tmp_path / "out", Progress(1))
    slurm.says("sinfo", says)
    assert executor.capacity() == width
    assert executor.capacity() == width
    assert slurm.asked("sinfo") == ["--noheader --format=%C" + (f" --partition={partition}" if partition else "")]


def test_a_unit_run_again_into_the_same_output_reads_only_its_own_job(slurm: FakeSlurm, run: Run) -> None:
    """The batch script runs the unit written beside it; an earlier run's attempts in the unit's
    directory are cleared first, so a job that dies without writing is not read as the earlier
    one's result."""
    import pickle

    stale = _passed("tests/test_a.py::test_a")
    write_result(attempt_dir(_unit_dir(run, "c"), 0), CellResult(Cell("c"), [stale], 2.0), False)
    slurm.says("squeue", "41|FAILED|xh-node1|NonZeroExitCode\n")
    run.start(Cell("c"))
    run.finish()
    (record,) = run.results["c"].records
    assert record.final.outcome == ERROR and record.nodeid != stale.nodeid, record
    last = (_unit_dir(run, "c") / "job.sh").read_text(encoding="utf-8").strip().splitlines()[-1]
    spec = last.split()[-1]
    # the job runs where the run was asked to run it, not where this process happens to be
    assert run.out.parent != Path.cwd()
    assert f"#SBATCH --chdir={run.out.parent}\n" in (_unit_dir(run, "c") / "job.sh").read_text(encoding="utf-8")
    assert spec == str(_unit_dir(run, "c") / "unit.pickle"), last
    with open(spec, "rb") as handle:
        assert pickle.load(handle).cell == Cell("c")  # noqa: S301 - written by this test's run


def test_a_job_submitted_after_the_others_ended_is_followed_too(slurm: FakeSlurm, run: Run) -> None:
    """A run whose jobs go one after another (one core's worth of cluster): between two jobs no
    job is alive, and the queue is still followed for the next one."""
    slurm.says("squeue", "41|COMPLETED|xh-node1|None\n")
    run.start(Cell("a"))
    run.wait_for("a: job 41 completed on xh-node1")
    run.threads[0].join(timeout=30)
    asked = len(slurm.asked("squeue"))
    time.sleep(POLL * 5)  # several polls with no job alive
    assert len(slurm.asked("squeue")) == asked, "the queue is asked about no job"
    slurm.says("squeue", "41|COMPLETED|xh-node1|None\n42|RUNNING|xh-node2|None\n")
    run.start(Cell("b"))
    run.wait_for("b: job 42 running on xh-node2")
    slurm.says("squeue", "41|COMPLETED|xh-node1|None\n42|COMPLETED|xh-node2|None\n")
    run.finish()
    assert "b: job 42 completed on xh-node2" in run.said()


def test_a_run_that_dies_while_following_its_jobs_still_exits(slurm: FakeSlurm, tmp_path: Path) -> None:
    """An error in the run's own code while a job is followed (here in the thread that waits for
    it): the process ends with that error, and the queue's follower does not keep it alive (a CI
    job would hang to its time limit)."""
    import subprocess
    import sys

    slurm.says("squeue", "41|RUNNING|xh-node1|None\n")
    code = (
        "import sys, threading, time\n"
        "from pathlib import Path\n"
        "from harness.executors.slurm import SlurmExecutor, SlurmOptions\n"
        "from harness.executors.slurm_job import JobSpec\n"
        "from harness.matrix.config import Cell, Matrix\n"
        "from harness.matrix.progress import CellProgress, Progress\n"
        "from harness.matrix.supervisor import RunSettings\n"
        "root = Path(sys.argv[1])\n"
        "progress = Progress(1)\n"
        "executor = SlurmExecutor(SlurmOptions(poll=0.02), root / 'out', progress, workdir=root)\n"
        "settings = RunSettings(matrix=Matrix(root / 'm.toml', root, {}), out_dir=root / 'out')\n"
        "spec = JobSpec(Cell('c'), settings, '', 'c')\n"
        "import _thread, signal\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)  # even where it was started ignoring SIGINT\n"
        "def fail_when_running():\n"
        "    while 'RUNNING' not in str(executor.states): time.sleep(0.02)\n"
        "    _thread.interrupt_main()\n"
        "threading.Thread(target=fail_when_running, daemon=True).start()\n"
        "try:\n"
        "    executor.run_job(spec, CellProgress(progress, 'c'))\n"
        "except KeyboardInterrupt:\n"
        "    raise SystemExit('the run failed while job 41 ran')\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "the run failed while job 41 ran" in done.stderr, done.stdout + done.stderr


def test_a_unit_sbatch_refuses_is_one_error_record_with_sbatchs_own_words(slurm: FakeSlurm, run: Run,
                                                                         tmp_path: Path) -> None:
    """A partition that does not exist, a QOS the account may not use: sbatch refuses the unit.
    Its cell gets one error record of its own, in sbatch's words, with the command that submits
    it by hand, and no job to follow."""
    from harness.executors.job_result import JOB_ID
    from harness.report import properties as prop
    from harness.report.records import KIND_EXIT

    (slurm.root / "sbatch").write_text(
        "#!/bin/sh\necho 'sbatch: error: Batch job submission failed: Invalid partition name specified' >&2\n"
        "exit 1\n")
    began = time.monotonic()
    run.start(Cell("c", devices=2))
    run.finish()
    took = time.monotonic() - began
    batch = tmp_path / "out" / "jobs" / "xh-c" / "job.sh"
    result = run.results["c"]
    (record,) = result.records
    assert (record.nodeid, record.cell) == (JOB_ID, "c")
    assert (record.final.outcome, record.final.kind, record.final.stderr) == (ERROR, KIND_EXIT, "")
    assert record.final.message == (f"cell c: the job could not be submitted: sbatch --parsable {batch}: "
                                    "sbatch: error: Batch job submission failed: Invalid partition name specified")
    assert record.properties[prop.REPRO] == f"sbatch {batch}" and batch.is_file()
    assert record.properties[prop.DEVICES] == "2" and prop.EXECUTOR_JOB not in record.properties
    assert result.cell.name == "c" and 0 < result.wall <= took
    assert run.not_installed["c"] is False and run.executor.stats()["jobs"] == 0


@pytest.mark.parametrize("shard", ["", "p2"])
def test_a_job_that_died_keeps_the_tests_its_own_unit_finished(slurm: FakeSlurm, tmp_path: Path,
                                                                shard: str) -> None:
    """A node failed under a unit's job before it wrote its result: the tests its events show
    finished are kept, read from that unit's own logs (a part's are beside its cell's, never
    mixed), then the job's end, with the command that resubmits it and the unit's time."""
    import json

    from harness.executors.job_result import JOB_ID
    from harness.executors.slurm_script import job_name
    from harness.report import properties as prop

    run = Run(tmp_path)
    own = run.out / "logs" / "c" / shard if shard else run.out / "logs" / "c"
    other = run.out / "logs" / "c" if shard else run.out / "logs" / "c" / "p1"

    def finished(where: Path, name: str) -> None:
        where.mkdir(parents=True, exist_ok=True)
        events = [{"event": "start", "nodeid": f"t.py::{name}"},
                  {"event": "report", "nodeid": f"t.py::{name}", "when": "call", "outcome": "passed", "duration": 0.5},
                  {"event": "finish", "nodeid": f"t.py::{name}"}]
        (where / "launch1.rank0.events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))

    finished(own, "test_mine")
    finished(other, "test_the_other_units")
    slurm.says("squeue", "41|NODE_FAIL|xh-node2|None\n")
    slurm.says("scontrol", "JobId=41 JobName=xh-c JobState=NODE_FAIL Reason=None Restarts=0 ExitCode=0:0 "
                           "NodeList=xh-node2\n")
    label = f"c-{shard}" if shard else "c"
    results: list[tuple[CellResult, bool]] = []
    began = time.monotonic()
    thread = threading.Thread(target=lambda: results.append(run.executor.run_job(
        JobSpec(Cell("c"), run.settings, shard, label), CellProgress(run.progress, label))), daemon=True)
    thread.start()
    thread.join(timeout=60)
    took = time.monotonic() - began
    run.executor.close()
    (result, _), = results
    assert [r.nodeid for r in result.records] == ["t.py::test_mine", JOB_ID], run.said()
    job = result.records[-1]
    assert "node failure: xh-node2" in job.final.message, job.final.message
    assert job.properties[prop.REPRO] == f"sbatch {run.out / 'jobs' / job_name(label) / 'job.sh'}"
    assert 0 < result.wall <= took


def test_a_gpu_cell_with_no_partition_of_its_own_is_judged_by_the_runs_partition(slurm: FakeSlurm,
                                                                                 tmp_path: Path) -> None:
    """The run's default partition is the one a cell without its own is sent to, so it is the
    one asked for GPUs, and the one the skip names; a controller that cannot say sends the cell
    on, for sbatch to judge."""
    from harness.executors.slurm_script import JobDefaults

    run = Run(tmp_path)
    executor = SlurmExecutor(SlurmOptions(defaults=JobDefaults(partition="gpu"), poll=POLL), run.out, run.progress)
    slurm.says("sinfo", "gpu:1\n")
    why = executor.cannot_serve(Cell("g", backend="gpu", devices=2))
    assert why == ("it asks for --gres=gpu:2 per node, and no node of partition gpu has that many: sinfo "
                   "reports generic resources gpu:1"), why
    assert slurm.asked("sinfo") == ["--noheader --format=%G --partition=gpu"]
    slurm.says("sinfo", rc=1, err="sinfo: error: Unable to contact slurm controller\n")
    other = SlurmExecutor(SlurmOptions(defaults=JobDefaults(partition="gpu"), poll=POLL), run.out, run.progress)
    assert other.cannot_serve(Cell("g", backend="gpu", devices=2)) == ""


def test_a_jobs_script_runs_the_unit_beside_it_with_this_interpreter(slurm: FakeSlurm, run: Run,
                                                                      tmp_path: Path) -> None:
    """The batch script's one command is the job line (``python -m harness.executors.slurm_job``)
    with this run's interpreter and the unit written beside the script: what a user resubmits by
    hand runs the same unit."""
    import shlex
    import subprocess
    import sys

    slurm.says("squeue", "41|COMPLETED|xh-node1|None\n")
    run.start(Cell("c"))
    run.finish()
    unit_dir = tmp_path / "out" / "jobs" / "xh-c"
    command = (unit_dir / "job.sh").read_text().splitlines()[-1]
    assert command == "exec " + shlex.join([sys.executable, "-m", "harness.executors.slurm_job",
                                            str(unit_dir / "unit.pickle")]), command
    assert (unit_dir / "unit.pickle").is_file()
    done = subprocess.run(shlex.split(command)[1:-1], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "usage: python -m harness.executors.slurm_job SPEC" in done.stderr
