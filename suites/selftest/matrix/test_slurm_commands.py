"""What the harness asks SLURM's own commands and what it makes of their answers, with fake
``sbatch``, ``squeue``, ``scontrol``, ``sacct``, ``scancel`` and ``sinfo`` that print what a real
controller prints: a job followed from squeue to scontrol to accounting as the controller forgets
it, a submission's id with and without a cluster name, the cluster's size from several partitions,
and every way a command fails named with its own words.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_slurm import FakeSlurm, on_path

from harness.executors import slurm_client
from harness.executors.slurm_client import (
    GONE,
    JobState,
    SlurmError,
    cancel,
    details,
    generic_resources,
    query,
    submit,
    total_cpus,
    with_details,
)

pytestmark = [pytest.mark.cell_independent, pytest.mark.jax_independent]  # SLURM's commands as scripts


@pytest.fixture
def slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    return on_path(tmp_path, monkeypatch)

def test_a_submission_gives_the_job_id_with_or_without_its_cluster(slurm: FakeSlurm, tmp_path: Path) -> None:
    slurm.says("sbatch", "42\n")
    assert submit(tmp_path / "job.sh", ["--partition=p", "--time=5"]) == "42"
    assert slurm.asked("sbatch") == [f"--parsable --partition=p --time=5 {tmp_path / 'job.sh'}"]
    slurm.says("sbatch", "43;cluster-a\n")
    assert submit(tmp_path / "job.sh") == "43"
    slurm.says("sbatch", "sbatch: warning: something\n")
    with pytest.raises(SlurmError, match=r"sbatch answered 'sbatch: warning: something', not a job id"):
        submit(tmp_path / "job.sh")
    slurm.says("sbatch", "", rc=1, err="sbatch: error: Batch job submission failed: Invalid partition name\n")
    with pytest.raises(SlurmError) as failed:
        submit(tmp_path / "job.sh")
    assert str(failed.value) == (f"sbatch --parsable {tmp_path / 'job.sh'}: "
                                 "sbatch: error: Batch job submission failed: Invalid partition name")


def test_a_job_is_followed_through_squeue_then_scontrol_then_accounting(slurm: FakeSlurm) -> None:
    slurm.says("squeue", "7|RUNNING|xh-node1|None\n8|PENDING||Resources\n")
    slurm.says("scontrol", "JobId=9 JobName=x JobState=COMPLETED Reason=None NodeList=xh-node2 Restarts=1 "
                           "ExitCode=0:0\n")
    found = query(["7", "8", "9", "7"])
    assert found["7"] == JobState("7", "RUNNING", "xh-node1", "")
    assert found["8"] == JobState("8", "PENDING", "", "Resources")
    assert found["9"] == JobState("9", "COMPLETED", "xh-node2", "", restarts=1, exit_code="0:0")
    assert slurm.asked("squeue") == ["--noheader --states=all --jobs=7,8,9 --format=%i|%T|%N|%r"]
    assert slurm.asked("scontrol") == ["show job --oneliner 9"]
    assert query([]) == {}


def test_a_job_the_controller_forgot_is_read_from_accounting_or_is_gone(slurm: FakeSlurm) -> None:
    slurm.says("squeue", "", rc=1, err="slurm_load_jobs error: Invalid job id specified\n")
    slurm.says("scontrol", "", rc=1, err="slurm_load_jobs error: Invalid job id specified\n")
    slurm.says("sacct", "11|CANCELLED by 0|xh-node1|None|0:15\n11.batch|CANCELLED||None|0:15\n"
                        "12|FAILED|xh-node2|NonZeroExitCode|1:0\n")
    found = query(["11", "12", "13"])
    assert found["11"] == JobState("11", "CANCELLED", "xh-node1", "", exit_code="0:15")
    assert found["12"] == JobState("12", "FAILED", "xh-node2", "NonZeroExitCode", exit_code="1:0")
    assert found["13"] == JobState("13", GONE)
    assert "--noheader --parsable2 --allocations --jobs=11 --format=JobID,State,NodeList,Reason,ExitCode" in (
        slurm.asked("sacct"))
    # accounting that is not kept (sacct fails) is the same as no accounting
    slurm.says("sacct", "", rc=1, err="sacct: error: Problem talking to the database\n")
    assert query(["11"])["11"] == JobState("11", GONE)


def test_without_sacct_a_forgotten_job_is_gone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeSlurm(tmp_path / "bin", tools=("squeue", "scontrol"))
    monkeypatch.setenv("PATH", str(fake.root))
    fake.says("squeue", "")
    fake.says("scontrol", "", rc=1)
    assert query(["5"]) == {"5": JobState("5", GONE)}


def test_a_controller_that_fails_otherwise_is_an_error_naming_the_command(slurm: FakeSlurm) -> None:
    slurm.says("squeue", "", rc=1, err="squeue: error: Unable to contact slurm controller (connect failure)\n")
    with pytest.raises(SlurmError, match=r"^squeue --noheader .*: squeue: error: Unable to contact slurm controller"):
        query(["1"])
    slurm.says("squeue", "", rc=2)
    with pytest.raises(SlurmError, match=r": exit 2$"):
        query(["1"])
    slurm.says("squeue", "partial line\n", rc=1)
    with pytest.raises(SlurmError, match=r": partial line$"):
        query(["1"])


def test_a_missing_command_and_a_silent_controller_are_named(slurm: FakeSlurm, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    with pytest.raises(SlurmError, match="^sbatch not found: submitting a cell as a job needs SLURM's client"):
        submit(tmp_path / "job.sh")
    monkeypatch.setenv("PATH", str(slurm.root))
    (slurm.root / "squeue").write_text("#!/bin/sh\nexec /bin/sleep 5\n")
    monkeypatch.setattr(slurm_client, "COMMAND_TIMEOUT", 0.3)
    with pytest.raises(SlurmError, match=r"the controller did not answer in 0 s"):
        query(["1"])


def test_details_fill_in_restarts_and_exit_code_but_keep_what_squeue_knew(slurm: FakeSlurm) -> None:
    slurm.says("scontrol", "JobId=4 JobState=RUNNING Reason=None NodeList=(null) Restarts=2 ExitCode=0:0\n")
    full = with_details(JobState("4", "RUNNING", "xh-node1", "Priority"))
    assert full == JobState("4", "RUNNING", "xh-node1", "Priority", restarts=2, exit_code="0:0")
    slurm.says("scontrol", "JobId=4 JobState=RUNNING Reason=BeginTime NodeList=xh-node2 Restarts=0\n")
    assert with_details(JobState("4", "RUNNING", "xh-node1", "x")) == JobState("4", "RUNNING", "xh-node2",
                                                                               "BeginTime")
    slurm.says("scontrol", "", rc=1)
    plain = JobState("4", "RUNNING", "xh-node1")
    assert with_details(plain) is plain and details("4") is None


def test_cancel_names_exactly_the_runs_jobs(slurm: FakeSlurm) -> None:
    cancel(["3", "5"])
    cancel([])
    assert slurm.asked("scancel") == ["3 5"]
    slurm.says("scancel", "", rc=1, err="scancel: error: Kill job error on job id 3: Access/permission denied\n")
    with pytest.raises(SlurmError, match="scancel 3: scancel: error: Kill job error on job id 3"):
        cancel(["3"])


def test_the_clusters_size_is_its_largest_partitions_cpus(slurm: FakeSlurm) -> None:
    slurm.says("sinfo", "0/8/0/8\n2/14/0/16\nn/a\n1/2/3/x\n")
    assert total_cpus() == 16
    assert slurm.asked("sinfo")[-1] == "--noheader --format=%C"
    slurm.says("sinfo", "0/4/0/4\n")
    assert total_cpus("debug") == 4
    assert slurm.asked("sinfo")[-1] == "--noheader --format=%C --partition=debug"
    slurm.says("sinfo", "garbage\n")
    assert total_cpus() == 0


def test_the_generic_resources_are_said_in_sinfos_words_and_counted(slurm: FakeSlurm) -> None:
    slurm.says("sinfo", "gpu:a100:4(S:0-1)\ngpu:2,mps:100\ngpu:2,mps:100\n")
    said, most = generic_resources("gpu")
    assert said == "gpu:2,mps:100, gpu:a100:4(S:0-1)"
    assert most == {"gpu": 4, "mps": 100}
    assert slurm.asked("sinfo")[-1] == "--noheader --format=%G --partition=gpu"
    slurm.says("sinfo", "")
    assert generic_resources() == ("nothing", {})
    assert slurm.asked("sinfo")[-1] == "--noheader --format=%G"


def test_a_job_scontrol_describes_with_few_fields_has_the_defaults() -> None:
    from harness.executors.slurm_client import parse_scontrol, parse_squeue

    assert parse_scontrol("JobId=5 JobState=PENDING") == JobState("5", "PENDING", "", "", 0, "")
    assert parse_scontrol("JobId=5 JobState=PENDING Restarts= Reason=Priority NodeList=(null)") == JobState(
        "5", "PENDING", "", "Priority", 0, "")
    assert parse_scontrol("JobId=5 Reason=None") is None and parse_scontrol("JobState=RUNNING") is None
    said = parse_squeue("6|PENDING||(null)\n|RUNNING|n1|None\n7|RUNNING|n1\n8|RUNNING|n2|None\n")
    assert said == {"6": JobState("6", "PENDING", "", ""), "8": JobState("8", "RUNNING", "n2", "")}


@pytest.mark.parametrize(("call", "tool", "what"), [
    (lambda: query(["1"]), "squeue", "following the cells' jobs"),
    (lambda: cancel(["1"]), "scancel", "cancelling the run's jobs"),
    (lambda: total_cpus(), "sinfo", "sizing the cluster"),
    (lambda: generic_resources(), "sinfo", "asking the cluster for its generic resources"),
])
def test_each_missing_command_is_named_with_what_needed_it(call, tool: str, what: str, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    with pytest.raises(SlurmError) as missing:
        call()
    assert str(missing.value) == f"{tool} not found: {what} needs SLURM's client commands on PATH"


def test_a_controller_silent_past_its_time_is_named_with_the_whole_command(slurm: FakeSlurm,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    (slurm.root / "scancel").write_text("#!/bin/sh\nexec /bin/sleep 5\n")
    monkeypatch.setattr(slurm_client, "COMMAND_TIMEOUT", 0.2)
    with pytest.raises(SlurmError) as silent:
        cancel(["3", "4"])
    assert str(silent.value) == "scancel 3 4: the controller did not answer in 0 s"


def test_generic_resources_of_every_spelling_sinfo_uses(slurm: FakeSlurm) -> None:
    slurm.says("sinfo", "(null)\ngpu\ngpu:tesla:2(S:0)\n,gpu:1\n,mps:7\n")
    assert generic_resources()[1] == {"gpu": 2, "mps": 7}
    slurm.says("sinfo", "gpu:0\n")  # configured with none: said as none, not as one
    assert generic_resources()[1] == {"gpu": 0}
    slurm.says("sinfo", "mps:x\n")
    assert generic_resources()[1] == {"mps": 1}


def test_a_slurm_conf_that_names_no_file_is_said_at_once_and_one_that_does_is_used(
        slurm: FakeSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SLURM's commands retry for a minute before saying their configuration is missing."""
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "nowhere" / "slurm.conf"))
    slurm.says("sinfo", "0/4/0/4\n")
    with pytest.raises(SlurmError) as missing:
        total_cpus()
    assert str(missing.value) == (f"sinfo --noheader --format=%C: SLURM_CONF={tmp_path / 'nowhere' / 'slurm.conf'} "
                                  "names no file (the cluster's slurm.conf)")
    assert slurm.asked("sinfo") == []  # nothing was asked of a controller that cannot be found
    (tmp_path / "slurm.conf").write_text("ClusterName=x\n")
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "slurm.conf"))
    assert total_cpus() == 4
    monkeypatch.delenv("SLURM_CONF")
    assert total_cpus() == 4
