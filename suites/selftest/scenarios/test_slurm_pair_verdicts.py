"""The 4096-apart reproducer reports the finding only for what the bug does: job A aborted in the
coordination service's words for another job's ranks, or job B's service on A's address. A rank
that never initialized, job A dying of something else, or job B failing is a failure to look
into, never the finding and never a pass. The jobs' ranks are stand-ins that print what real
ranks print, so each outcome is made on purpose."""

from __future__ import annotations

import io

import pytest

from harness.scenarios import upstream_findings as findings

pytestmark = pytest.mark.cell_independent

INCARNATION = ("E1206 coordination_service.cc:518] 1 unexpectedly tried to connect with a different "
               "incarnation. It has likely restarted.\n")


class Rank:
    """A rank as the reproducer sees it: its output and its exit."""

    def __init__(self, first: str, rest: str = "", code: int = 0) -> None:
        self.stdout = io.StringIO(first)
        self.rest, self.returncode = rest, code
        self.killed = False

    def communicate(self, timeout: float) -> tuple[str, None]:
        return self.stdout.read() + self.rest, None  # what was not read yet

    def poll(self) -> int:
        return self.returncode

    def kill(self) -> None:
        self.killed = True

    def wait(self) -> int:
        return self.returncode


def _jobs(monkeypatch: pytest.MonkeyPatch, a: list[Rank], b: list[Rank]) -> None:
    jobs = iter([a, b])
    monkeypatch.setattr(findings, "_slurm_job", lambda job_id, hold: next(jobs))


def _ok(address: str) -> Rank:
    return Rank(f"job rank: initialized, coordinator {address}\n", "job rank: done\n")


def test_job_a_aborted_by_the_other_jobs_ranks_is_the_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    a = [Rank("job A rank 0: initialized, coordinator localhost:64888\n", INCARNATION, -6), _ok("localhost:64888")]
    _jobs(monkeypatch, a, [_ok("localhost:64888"), _ok("localhost:64888")])
    with pytest.raises(findings.JobAborted, match="different incarnation"):
        findings.slurm_jobs_4096_apart_on_one_node()


def test_job_b_on_job_as_address_is_the_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    _jobs(monkeypatch, [_ok("localhost:64888"), _ok("localhost:64888")], [_ok("localhost:64888"), _ok("localhost:64888")])
    with pytest.raises(findings.SharedCoordinator):
        findings.slurm_jobs_4096_apart_on_one_node()


def test_jobs_on_their_own_addresses_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    _jobs(monkeypatch, [_ok("localhost:64888"), _ok("localhost:64888")], [_ok("localhost:61000"), _ok("localhost:61000")])
    findings.slurm_jobs_4096_apart_on_one_node()


@pytest.mark.parametrize(("a", "b", "said"), [
    # job A's second rank never initialized: nothing was tested
    ([_ok("localhost:64888"), Rank("job A rank 1: failed: TimeoutError: barrier\n", "", 3)], [], "did not initialize"),
    # job A died, but not of another job
    ([Rank("job A rank 0: initialized, coordinator localhost:64888\n", "Segmentation fault\n", -11),
      _ok("localhost:64888")], [_ok("localhost:61000"), _ok("localhost:61000")], "without the coordination service"),
    # job B failed on its own address
    ([_ok("localhost:64888"), _ok("localhost:64888")],
     [Rank("job B rank 0: failed: RuntimeError: no route\n", "", 3), _ok("localhost:61000")], "job B"),
], ids=["a-never-initialized", "a-died-otherwise", "b-failed"])
def test_anything_else_is_a_failure_not_the_finding_and_not_a_pass(monkeypatch: pytest.MonkeyPatch, a: list[Rank],
                                                                   b: list[Rank], said: str) -> None:
    _jobs(monkeypatch, a, b)
    with pytest.raises(AssertionError, match=said) as failed:
        findings.slurm_jobs_4096_apart_on_one_node()
    assert not isinstance(failed.value, findings.JobAborted | findings.SharedCoordinator)
