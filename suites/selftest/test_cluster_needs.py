"""How a cluster test meets a cluster that does not answer (``suites/cluster/cluster_helpers.needs``):
skipped with the reason where nobody started one, and failed, never skipped, under the test job,
which started it (``XHARNESS_CLUSTER_REQUIRED=1``). The cluster's script is a fake here: a file of
commands that says whether its daemons run, and notes each start."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cluster"))
import cluster_helpers  # noqa: E402


def _fake_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, running: bool, stays_up: bool = True) -> Path:
    """A cluster script whose ``status`` exits 0 only while ``running`` (or once started, unless
    its daemons do not stay up); each ``start`` appends a line to the returned file."""
    starts = tmp_path / "starts"
    script = tmp_path / "cluster.sh"
    script.write_text(
        f"""case "$1" in
  status) [ -e {tmp_path}/up ] && {{ echo "xh-node1 idle"; exit 0; }}; echo "slurmd of xh-node1 is not running"; exit 1 ;;
  start) echo started >>{starts}; {"touch" if stays_up else "true"} {tmp_path}/up ;;
esac
"""
    )
    if running:
        (tmp_path / "up").touch()
    monkeypatch.setattr(cluster_helpers, "CLUSTER_SCRIPT", ("bash", str(script)))
    monkeypatch.setattr(cluster_helpers, "REQUIRED_POLL", 0.01)
    return starts


class _Probe:
    """``launchers.unavailable`` and ``forget_answers`` as the harness has them: an answer is kept
    until it is forgotten, and only then is the cluster asked again (the next of ``replies``, the
    last one for ever)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *replies: str) -> None:
        self.replies = list(replies)
        self.kept: str | None = None
        monkeypatch.setattr(cluster_helpers, "unavailable", self.unavailable)
        monkeypatch.setattr(cluster_helpers, "forget_answers", self.forget)

    def unavailable(self, launcher: str) -> str:
        if self.kept is None:
            self.kept = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        return self.kept

    def forget(self) -> None:
        self.kept = None


NO_ANSWER = "no SLURM cluster answers: sinfo did not answer within 10 s"


def _needs(launcher: str, patience: float = cluster_helpers.REQUIRED_PATIENCE) -> None:
    """``needs``, with a skip made an error: under the test job a skip is what must not happen,
    and pytest would take it for this test's own skip."""
    try:
        cluster_helpers.needs(launcher, patience=patience)
    except pytest.skip.Exception as exc:
        raise AssertionError(f"skipped where it must not be: {exc}") from None


@pytest.mark.parametrize("value", [None, "", "0"])
def test_a_run_that_started_no_cluster_skips_with_the_reason(value: str | None, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    if value is None:
        monkeypatch.delenv(cluster_helpers.REQUIRED_ENV, raising=False)
    else:
        monkeypatch.setenv(cluster_helpers.REQUIRED_ENV, value)
    starts = _fake_cluster(tmp_path, monkeypatch, running=False)
    _Probe(monkeypatch, NO_ANSWER)
    with pytest.raises(pytest.skip.Exception, match="sinfo did not answer"):
        cluster_helpers.needs("slurm")
    assert not starts.exists()  # a cluster nobody asked for is not started


def test_under_the_test_job_a_cluster_that_never_answers_fails_the_test(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cluster_helpers.REQUIRED_ENV, "1")
    starts = _fake_cluster(tmp_path, monkeypatch, running=False, stays_up=False)
    _Probe(monkeypatch, NO_ANSWER)
    with pytest.raises(pytest.fail.Exception) as failed:
        _needs("slurm", patience=0.2)
    message = str(failed.value)
    assert NO_ANSWER in message and "XHARNESS_CLUSTER_REQUIRED=1" in message, message
    # what status said last, and the one start the run tried
    assert "started again" in message and "slurmd of xh-node1 is not running" in message, message
    assert starts.read_text() == "started\n"  # started once, not once per ask


def test_under_the_test_job_a_cluster_whose_daemons_are_up_is_waited_for_not_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cluster_helpers.REQUIRED_ENV, "1")
    starts = _fake_cluster(tmp_path, monkeypatch, running=True)
    _Probe(monkeypatch, NO_ANSWER, NO_ANSWER, "")
    with pytest.warns(UserWarning, match=r"slurm answered only after \d+ s$"):
        _needs("slurm", patience=30)
    assert not starts.exists()


def test_under_the_test_job_a_cluster_whose_daemons_died_is_started_again(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cluster_helpers.REQUIRED_ENV, "1")
    starts = _fake_cluster(tmp_path, monkeypatch, running=False)
    _Probe(monkeypatch, NO_ANSWER, "")
    with pytest.warns(UserWarning, match="started again"):
        _needs("slurm", patience=30)
    assert starts.read_text() == "started\n"


def test_a_cluster_that_answers_costs_no_ask_of_its_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cluster_helpers.REQUIRED_ENV, "1")
    monkeypatch.setattr(cluster_helpers, "CLUSTER_SCRIPT", ("false",))
    _Probe(monkeypatch, "")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning would say it waited
        _needs("slurm")  # neither skipped, failed nor warned


def test_the_running_cluster_is_found_by_its_controller_not_by_an_answer(tmp_path: Path) -> None:
    """``ci/cluster.sh running``: the mode of the cluster whose controller is alive, whatever it
    answers (this one has no configuration to answer from); nothing for a dead, missing or
    unreadable pid."""

    def running() -> tuple[int, str]:
        done = subprocess.run([*cluster_helpers.CLUSTER_SCRIPT, "running"], capture_output=True, text=True,
                              env={**os.environ, "XHARNESS_CLUSTER_DIR": str(tmp_path)}, timeout=30)
        return done.returncode, done.stdout.strip()

    assert running() == (1, "")  # nothing started here
    (tmp_path / "slurmctld.pid").write_text(f"{os.getpid()}\n")
    assert running() == (0, "loopback")  # started before the mode was kept
    (tmp_path / "network").write_text("namespaces\n")
    assert running() == (0, "namespaces")
    gone = subprocess.Popen(["true"])
    gone.wait()
    (tmp_path / "slurmctld.pid").write_text(f"{gone.pid}\n")
    assert running() == (1, "")
    (tmp_path / "slurmctld.pid").write_text("not a pid\n")
    assert running() == (1, "")
