"""Where a run's cells go: ``--on`` and ``--deadline`` against the project's ``executor``, and the
SLURM executor built from ``[tool.xharness.slurm]``, its jobs' defaults and deadline as the project
and the flags say, refused with how to get a cluster when none answers (before anything is
submitted)."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest
from fake_slurm import FakeSlurm, on_path

from harness.errors import UsageError
from harness.executors import EXECUTORS, LOCAL, SLURM
from harness.executors.choose import NoCluster, add_arguments, executor_for, executor_name
from harness.executors.slurm import SlurmExecutor, SlurmOptions
from harness.executors.unit import LocalExecutor
from harness.matrix.progress import Progress

pytestmark = pytest.mark.cell_independent


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_the_flag_wins_over_the_project_and_local_is_the_default() -> None:
    assert executor_name(_args(), None) == LOCAL
    assert executor_name(_args(), SLURM) == SLURM
    assert executor_name(_args("--on", "local"), SLURM) == LOCAL
    assert executor_name(_args("--on", "slurm", "--deadline", "30"), None) == SLURM
    assert executor_name(_args("--deadline", "30"), SLURM) == SLURM  # the project's executor is slurm


@pytest.mark.parametrize(("argv", "project", "says"), [
    (("--deadline", "0", "--on", "slurm"), None, "--deadline must be a positive number of seconds"),
    (("--deadline", "-5", "--on", "slurm"), None, "--deadline must be a positive number of seconds"),
    (("--deadline", "nan", "--on", "slurm"), None, "--deadline must be a positive number of seconds"),
    (("--deadline", "30"), None, "--deadline is for cells run as jobs: add --on slurm"),
    (("--deadline", "30", "--on", "local"), SLURM, "--deadline is for cells run as jobs: add --on slurm"),
])
def test_a_misplaced_or_meaningless_deadline_is_a_usage_error(argv: tuple[str, ...], project: str | None,
                                                             says: str) -> None:
    with pytest.raises(UsageError) as refused:
        executor_name(_args(*argv), project)
    assert str(refused.value) == says


@pytest.fixture
def slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    return on_path(tmp_path, monkeypatch)


def _progress() -> Progress:
    return Progress(1, stream=io.StringIO(), interval=0.0)


def test_the_slurm_executor_takes_the_projects_job_defaults_and_deadline(slurm: FakeSlurm, tmp_path: Path) -> None:
    slurm.says("sinfo", "0/6/0/6\n")
    project = {"partition": "debug", "account": "proj", "options": ["--mem=2G", "--qos=low"], "deadline": 600}
    chosen = executor_for(SLURM, project, None, tmp_path / "out", _progress())
    assert isinstance(chosen, SlurmExecutor)
    defaults = chosen.options.defaults
    assert (defaults.partition, defaults.account, defaults.options) == ("debug", "proj", ("--mem=2G", "--qos=low"))
    assert chosen.options.deadline == 600.0
    assert chosen.capacity() == 6 and slurm.asked("sinfo") == ["--noheader --format=%C --partition=debug"]
    assert chosen.jobs_dir == (tmp_path / "out").resolve() / "jobs"
    # the flag's deadline wins over the project's; neither: the default
    assert executor_for(SLURM, project, 45.0, tmp_path / "out", _progress()).options.deadline == 45.0
    bare = executor_for(SLURM, {}, None, tmp_path / "out", _progress())
    assert (bare.options.defaults.partition, bare.options.defaults.account, bare.options.defaults.options) == (
        "", "", ())
    assert bare.options.deadline == SlurmOptions.deadline
    assert slurm.asked("sinfo")[-1] == "--noheader --format=%C"


def test_local_needs_no_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert isinstance(executor_for(LOCAL, {"partition": "x"}, None, tmp_path, _progress()), LocalExecutor)


def test_no_cluster_answering_is_refused_with_how_to_get_one(slurm: FakeSlurm, tmp_path: Path) -> None:
    slurm.says("sinfo", "", rc=1, err="sinfo: error: Unable to contact slurm controller (connect failure)\n")
    with pytest.raises(NoCluster) as refused:
        executor_for(SLURM, {}, None, tmp_path / "out", _progress())
    said = str(refused.value)
    assert said.startswith("--on slurm: no SLURM cluster answers: sinfo --noheader --format=%C: sinfo: error: "
                           "Unable to contact slurm controller (connect failure). Point SLURM_CONF at a cluster's")
    assert 'bash ci/cluster.sh start, as root; then eval "$(bash ci/cluster.sh env)"' in said
    assert slurm.asked("sbatch") == []


def test_the_flags_say_where_cells_run_in_the_help_and_refuse_an_unknown_place() -> None:
    parser = argparse.ArgumentParser(prog="xharness run")
    add_arguments(parser)
    text = " ".join(parser.format_help().split())
    assert (f"--on {{local,slurm}} where the cells run: local: {EXECUTORS[LOCAL]}; slurm: {EXECUTORS[SLURM]} "
            "(default: [tool.xharness] executor, else local) --deadline") in text
    assert ("--deadline SECONDS --on slurm: a job still waiting to start this long after the run began is "
            "cancelled and recorded (default: [tool.xharness.slurm] deadline, else 7200)") in text
    assert _args().executor is None and _args().deadline is None
    with pytest.raises(SystemExit):
        parser.parse_args(["--on", "cloud"])
    # a deadline under a second is still a deadline
    assert executor_name(_args("--on", "slurm", "--deadline", "0.5"), None) == SLURM


def test_the_slurm_executor_reports_to_the_runs_progress_from_this_directory(slurm: FakeSlurm, tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    slurm.says("sinfo", "0/2/0/2\n")
    monkeypatch.chdir(tmp_path)
    progress = _progress()
    chosen = executor_for(SLURM, {}, None, Path("out"), progress)
    assert chosen.progress is progress and chosen.workdir == tmp_path
