"""``--on slurm`` without a cluster: the controller's answers parsed, a cell's resources as sbatch
options, a job's end read into records from files alone, and every user mistake a clear error.
The same paths against a real cluster are ``suites/cluster/test_slurm_executor.py``."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from matrix_helpers import xharness

from harness import project
from harness.executors.job_result import JOB_ID, cause, unit_result
from harness.executors.slurm_client import GONE, JobState, parse_gres, parse_scontrol, parse_squeue
from harness.executors.slurm_job import attempt_dir, write_result
from harness.executors.slurm_script import (
    JobDefaults,
    job_name,
    per_node_devices,
    resources,
    script,
)
from harness.exits import EXIT_NO_CLUSTER, EXIT_USAGE
from harness.matrix.config import Cell
from harness.matrix.launchers import SLURM, ClusterOptions
from harness.matrix.supervisor import CellResult
from harness.report.records import KIND_EXIT, KIND_MEMORY, KIND_TIMEOUT, PASSED, Attempt, TestRecord


def test_squeue_and_scontrol_answers_are_read() -> None:
    jobs = parse_squeue("12|RUNNING|xh-node[1-2]|None\n13|PENDING||Resources\n\ngarbage\n")
    assert jobs["12"] == JobState("12", "RUNNING", "xh-node[1-2]", "")
    assert jobs["13"].waiting and not jobs["13"].terminal and jobs["13"].reason == "Resources"
    line = ("JobId=146 JobName=xh-c UserId=root(0) JobState=PENDING Reason=BeginTime Dependency=(null) "
            "Requeue=1 Restarts=1 BatchFlag=1 ExitCode=0:15 NodeList=(null) BatchHost=xh-node1")
    state = parse_scontrol(line)
    assert state == JobState("146", "PENDING", "", "BeginTime", 1, "0:15")
    assert parse_scontrol("slurm_load_jobs error: Invalid job id specified") is None
    assert JobState("1", "NODE_FAIL").terminal and JobState("1", GONE).terminal
    assert not JobState("1", "COMPLETING").terminal


@pytest.mark.parametrize(("state", "output", "words", "kind"), [
    (JobState("7", "NODE_FAIL", "xh-node2"), "", "node failure: xh-node2 stopped answering", KIND_EXIT),
    (JobState("7", "TIMEOUT", "xh-node1"), "", "time limit passed on xh-node1", KIND_TIMEOUT),
    (JobState("7", "OUT_OF_MEMORY", "n1"), "", "out of memory on n1", KIND_MEMORY),
    (JobState("7", "FAILED", "n1", exit_code="0:9"),
     "slurmstepd: error: StepId=7.batch exceeded memory limit (383668224 > 209715200), being killed\n",
     "(slurmstepd: error: StepId=7.batch exceeded memory limit (383668224 > 209715200)", KIND_MEMORY),
    (JobState("7", "PREEMPTED", "n1"), "", "preempted on n1", KIND_EXIT),
    (JobState("7", "CANCELLED", "n1"), "", "cancelled on n1", KIND_EXIT),
    (JobState("7", GONE), "", "forgot the job", KIND_EXIT),
    (JobState("7", "FAILED", "n1", "NonZeroExitCode", exit_code="2:0"), "", "ended FAILED on n1 (exit 2:0)", KIND_EXIT),
])
def test_every_end_of_a_job_has_its_words(state: JobState, output: str, words: str, kind: str) -> None:
    text, got = cause(state, output)
    assert words in text and got == kind, text


def test_a_waiting_job_past_the_deadline_says_what_it_waited_for() -> None:
    text, kind = cause(JobState("7", "CANCELLED", "", "Resources"), "", deadline=30)
    assert text.startswith("still waiting to start when the run's deadline (30 s) passed (waiting for: Resources)")
    assert kind == KIND_TIMEOUT


def test_a_cells_resources_become_sbatch_options() -> None:
    defaults = JobDefaults(partition="batch", account="team", options=("--qos=ci",))
    local = Cell("c", devices=4, processes=2)
    assert resources(local, defaults) == ["--nodes=1", "--ntasks=1", "--cpus-per-task=2", "--partition=batch",
                                          "--account=team", "--qos=ci"]
    launched = Cell("d", backend="gpu", devices=2, processes=4, launcher=SLURM,
                    cluster=ClusterOptions(partition="gpu", time_limit="10", nodes=2, sbatch=("--mem=8G",)))
    assert resources(launched, defaults) == ["--nodes=2", "--ntasks=4", "--gres=gpu:4", "--partition=gpu",
                                             "--account=team", "--time=10", "--qos=ci", "--mem=8G"]
    gpu = Cell("g", backend="gpu", devices=8)
    assert "--gres=gpu:8" in resources(gpu, JobDefaults())
    text = script(local, "c[1/2]", Path("/shared/u"), Path("/repo"), ["/v/python", "-m", "x", "/a b/spec"],
                  JobDefaults())
    assert text.startswith("#!/bin/bash\n")
    assert "#SBATCH --job-name=xh-c_1_2_\n" in text and "#SBATCH --requeue\n" in text
    assert "#SBATCH --output=/shared/u/job-%j.out\n" in text and "#SBATCH --chdir=/repo\n" in text
    assert text.endswith("exec /v/python -m x '/a b/spec'\n")
    assert job_name("cpu-2x4") == "xh-cpu-2x4"


def _result(records: list[TestRecord], cell: Cell, interrupted: bool = False) -> CellResult:
    return CellResult(cell, records, wall=1.0, launches=1, interrupted=interrupted)


def _passed(name: str, cell: Cell) -> TestRecord:
    record = TestRecord(nodeid=f"tests/test_a.py::{name}", cell=cell.name)
    record.attempts.append(Attempt(PASSED, duration=0.1))
    return record


def test_a_requeued_job_is_read_from_its_last_attempt_only(tmp_path: Path) -> None:
    cell = Cell("c")
    write_result(attempt_dir(tmp_path, 0), _result([_passed("test_one", cell)], cell, interrupted=True), False)
    write_result(attempt_dir(tmp_path, 1), _result([_passed("test_one", cell), _passed("test_two", cell)], cell), False)
    end = JobState("41", "COMPLETED", "xh-node1", restarts=1)
    result, _ = unit_result(cell, end, tmp_path, tmp_path / "job.sh", 2.0)
    assert [r.nodeid.rsplit("::")[1] for r in result.records] == ["test_one", "test_two"]
    assert not result.interrupted
    assert {r.properties["executor-attempt"] for r in result.records} == {"1"}
    assert {r.properties["executor-job"] for r in result.records} == {"41"}
    # the controller forgot the job: the newest attempt written is read
    forgot, _ = unit_result(cell, JobState("41", GONE), tmp_path, tmp_path / "job.sh", 2.0)
    assert len(forgot.records) == 2 and JOB_ID not in {r.nodeid for r in forgot.records}


def test_a_job_that_died_keeps_what_it_wrote_beside_its_record(tmp_path: Path) -> None:
    cell = Cell("c")
    write_result(attempt_dir(tmp_path, 0), _result([_passed("test_one", cell)], cell, interrupted=True), False)
    (tmp_path / "job-9.out").write_text("slurmstepd: error: *** JOB 9 ON n1 CANCELLED DUE TO TIME LIMIT ***\n")
    result, _ = unit_result(cell, JobState("9", "TIMEOUT", "n1"), tmp_path, tmp_path / "job.sh", 61.0)
    assert not result.interrupted  # the job's own limit is not the run's Ctrl-C
    assert [r.nodeid for r in result.records] == ["tests/test_a.py::test_one", JOB_ID]
    job = result.records[-1]
    assert job.final.kind == KIND_TIMEOUT and "DUE TO TIME LIMIT" in job.final.stderr
    assert job.properties["repro"] == f"sbatch {tmp_path / 'job.sh'}"
    # cancelled by this run: what finished is kept, nothing is blamed
    ours, _ = unit_result(cell, JobState("9", "CANCELLED", "n1"), tmp_path, tmp_path / "job.sh", 3.0, interrupted=True)
    assert ours.interrupted and [r.nodeid for r in ours.records] == ["tests/test_a.py::test_one"]
    # a job that never wrote anything
    empty = tmp_path / "empty"
    empty.mkdir()
    (only,) = unit_result(cell, JobState("10", "NODE_FAIL", "n2"), empty, empty / "job.sh", 3.0)[0].records
    assert only.nodeid == JOB_ID and "node failure: n2" in only.final.message


def test_project_executor_settings_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "xharness.toml"
    path.write_text('executor = "slurm"\n[slurm]\npartition = "gpu"\noptions = ["--qos=ci"]\ndeadline = 600\n')
    own = project.read(path)
    assert own.executor == "slurm" and own.slurm == {"partition": "gpu", "options": ["--qos=ci"], "deadline": 600}
    for text, words in [('executor = "k8s"\n', "executor: must be one of local, slurm"),
                        ('[slurm]\ndeadline = -1\n', "slurm.deadline: must be a positive number"),
                        ('[slurm]\nqueue = "x"\n', "slurm.queue: unknown key"),
                        ('[slurm]\noptions = "--qos=ci"\n', "slurm.options: must be a list of strings")]:
        path.write_text(text)
        with pytest.raises(project.ProjectError, match=words.replace("(", r"\(")):
            project.read(path)


def test_no_cluster_and_a_misplaced_deadline_are_clear_errors(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("def test_a():\n    pass\n")
    (tmp_path / "matrix.toml").write_text(textwrap.dedent("""
        [cells.c]
        paths = ["tests"]
    """))
    conf = tmp_path / "no-such-slurm.conf"
    # SLURM's client installed, as the real one waits: retrying for a minute on a missing slurm.conf
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "sinfo").write_text("#!/bin/sh\nsleep 60\n")
    (tmp_path / "bin" / "sinfo").chmod(0o755)
    done = xharness("run", "--matrix", "matrix.toml", "--on", "slurm", cwd=tmp_path, timeout=50,
                    env={"SLURM_CONF": str(conf), "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"})
    assert done.returncode == EXIT_NO_CLUSTER, done.stderr
    assert "--on slurm: no SLURM cluster answers" in done.stderr and "ci/cluster.sh start" in done.stderr
    assert f"SLURM_CONF={conf} names no file" in done.stderr  # at once, not after sinfo's minute of retries
    assert not (tmp_path / "reports" / "junit").exists() or not any((tmp_path / "reports" / "junit").iterdir())
    done = xharness("run", "--matrix", "matrix.toml", "--deadline", "5", cwd=tmp_path)
    assert done.returncode == EXIT_USAGE and "--deadline is for cells run as jobs: add --on slurm" in done.stderr


def test_a_controller_that_stops_answering_ends_the_wait_with_a_record(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from harness.executors import slurm_client
    from harness.executors.slurm import SlurmExecutor, SlurmOptions
    from harness.matrix.config import Matrix
    from harness.matrix.progress import Progress
    from harness.matrix.supervisor import RunSettings

    def down(jobs: object) -> None:
        raise slurm_client.SlurmError("squeue: error: Unable to contact slurm controller (connect failure)")

    monkeypatch.setattr(slurm_client, "submit", lambda script, options=(): "77")
    monkeypatch.setattr(slurm_client, "query", down)
    monkeypatch.setattr(slurm_client, "details", lambda job: None)
    stream = io.StringIO()
    progress = Progress(1, stream=stream)
    executor = SlurmExecutor(SlurmOptions(poll=0.02, patience=0.3), tmp_path, progress)
    settings = RunSettings(matrix=Matrix(path=tmp_path / "m.toml", root=tmp_path, cells={}), out_dir=tmp_path)
    result, _ = executor.run(Cell("c"), settings, progress.for_cell("c"), "", "c")
    executor.close()
    (record,) = result.records
    assert record.nodeid == JOB_ID and record.properties["executor-job"] == "77"
    assert "job 77 was left unfollowed: the controller stopped answering" in record.final.message
    assert "Unable to contact slurm controller" in record.final.message
    assert stream.getvalue().count("retrying for up to") == 1  # said once, not once a poll
    assert (tmp_path / "jobs" / "xh-c" / "job.sh").read_text().startswith("#!/bin/bash")


def test_a_job_that_died_without_a_result_keeps_the_tests_its_events_show_finished(tmp_path: Path) -> None:
    import json

    logs = tmp_path / "logs" / "c"
    logs.mkdir(parents=True)
    events = [
        {"event": "start", "nodeid": "t.py::test_a"},
        *({"event": "report", "nodeid": "t.py::test_a", "when": when, "outcome": "passed", "duration": 0.5}
          for when in ("setup", "call", "teardown")),
        {"event": "finish", "nodeid": "t.py::test_a"},
        {"event": "start", "nodeid": "t.py::test_b"},
        {"event": "report", "nodeid": "t.py::test_b", "when": "call", "outcome": "failed", "message": "boom",
         "duration": 0.1},
        {"event": "report", "nodeid": "t.py::test_b", "when": "teardown", "outcome": "passed", "duration": 0.0},
        {"event": "finish", "nodeid": "t.py::test_b"},
        {"event": "start", "nodeid": "t.py::test_c"},  # the node went away in this one
        {"event": "report", "nodeid": "t.py::test_c", "when": "setup", "outcome": "passed", "duration": 0.0},
    ]
    (logs / "launch1.rank0.events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events) + '{"event": "fin')
    unit = tmp_path / "unit"
    unit.mkdir()
    cell = Cell("c")
    result, _ = unit_result(cell, JobState("5", "NODE_FAIL", "xh-node2"), unit, unit / "job.sh", 9.0, logs=logs)
    assert [r.nodeid for r in result.records] == ["t.py::test_a", "t.py::test_b", JOB_ID]
    a, b, job = result.records
    assert a.final.outcome == PASSED and a.final.duration == 1.5 and a.properties["executor-state"] == "NODE_FAIL"
    assert b.final.outcome == "failed" and b.final.message == "boom"
    assert "node failure: xh-node2" in job.final.message


def test_a_release_the_job_could_not_install_is_said_back(tmp_path: Path) -> None:
    cell = Cell("c", release="9.9.9")
    write_result(attempt_dir(tmp_path, 0), _result([_passed("test_one", cell)], cell), True)
    result, not_installed = unit_result(cell, JobState("3", "COMPLETED", "n1"), tmp_path, tmp_path / "job.sh", 1.0)
    assert not_installed and len(result.records) == 1
    write_result(attempt_dir(tmp_path, 0), _result([_passed("test_one", cell)], cell), False)
    assert not unit_result(cell, JobState("3", "COMPLETED", "n1"), tmp_path, tmp_path / "job.sh", 1.0)[1]


def test_a_requeue_is_seen_whether_or_not_a_poll_caught_it_pending() -> None:
    """A requeued job may leave the queue again before the next poll: completing, then running
    again, is a requeue too; the end of a job (completing, then completed) is not."""
    from harness.executors.slurm import requeued
    from harness.executors.slurm_client import JobState

    def at(state: str) -> JobState:
        return JobState("7", state, "xh-node1")

    assert requeued(at("RUNNING"), at("PENDING")) and requeued(at("COMPLETING"), at("PENDING"))
    assert requeued(at("COMPLETING"), at("RUNNING"))
    assert not requeued(at("COMPLETING"), at("COMPLETED")) and not requeued(at("PENDING"), at("RUNNING"))
    assert not requeued(None, at("PENDING")) and not requeued(at("RUNNING"), at("COMPLETING"))


def test_the_generic_resources_sinfo_reports_are_read_as_the_most_one_node_has() -> None:
    """What a GPU cell is held to before it is submitted: sinfo's ``%G`` of each node group."""
    assert parse_gres("(null)\n(null)\n") == {}
    assert parse_gres("gpu:4\n(null)\ngpu:8\n") == {"gpu": 8}
    assert parse_gres("gpu:a100:4(S:0-1)\ngpu:h100:2,mps:100\n") == {"gpu": 4, "mps": 100}
    assert parse_gres("gpu\n") == {"gpu": 1}


def test_a_gpu_cell_asks_each_node_for_its_share() -> None:
    one_node = Cell(name="g", backend="gpu", devices=4, processes=2)
    launched = Cell(name="g", backend="gpu", devices=4, processes=2, launcher=SLURM)
    assert per_node_devices(one_node) == 8 and per_node_devices(launched) == 4
    assert "--gres=gpu:8" in resources(one_node, JobDefaults())
    assert "--gres=gpu:4" in resources(launched, JobDefaults())
