"""Known findings excuse exactly the failures they describe: a failure of another kind on the
same invariant is news and fails the run."""

from __future__ import annotations

import pytest

from harness.properties.base import explained
from harness.scenarios.known_findings import (
    KNOWN_FINDINGS,
    KnownFinding,
    isolated_invariants,
    known_findings,
)


def _finding(match: str, **kw: object) -> KnownFinding:
    return KnownFinding(invariant="x", runtime="r", upstream="u", summary="s", match=match, **kw)  # type: ignore[arg-type]


def test_a_failure_no_finding_matches_is_not_excused() -> None:
    deleted = _finding(r"is deleted")
    stale = _finding(r"stale value")
    assert explained([deleted], RuntimeError("buffer with shape f32[4] is deleted")) == [deleted]
    assert explained([deleted], AssertionError("reading tensor 1: runtime [1], model [2]")) is None
    group = ExceptionGroup("two", [RuntimeError("x is deleted"), AssertionError("stale value: 1")])
    assert explained([deleted, stale], group) == [deleted, stale]
    assert explained([deleted], group) is None


def test_findings_are_chosen_by_release() -> None:
    """A finding's releases are its rows in the expected-outcomes table (#8522: reproduced before
    2.7, passed from 2.7 on)."""
    old = {f.upstream for f in known_findings("spec-normalization", "torch_xla", "2.5.1")}
    new = {f.upstream for f in known_findings("spec-normalization", "torch_xla", "2.9.0")}
    assert old == {"https://github.com/pytorch/xla/issues/8522"} and new == set()


def test_every_finding_of_the_harness_is_registered_in_its_declared_order() -> None:
    """The harness registers its findings by runtime, as a plugin does: none may drop out (a
    finding of a runtime the registrations miss) and the lists keep the declared order."""
    from harness.scenarios.known_findings import all_findings, plugin_findings

    assert list(all_findings()[: len(all_findings()) - len(plugin_findings())]) == KNOWN_FINDINGS


def test_every_finding_names_a_known_invariant_and_scenario() -> None:
    """The check that found it: an invariant, or one of the network checks that judge a job's
    answer to a fault (a job aborted for another job's doing is "blamed" wrongly)."""
    from harness.network.checks import CHECKS
    from harness.properties import INVARIANTS
    from harness.scenarios.registry import all_scenarios

    invariants = {i.id for i in INVARIANTS}
    scenarios = {s.id for s in all_scenarios()}
    for finding in KNOWN_FINDINGS:
        # a network check judges a job's answer to a fault, which only a finding found there has
        known = invariants | set(CHECKS) if finding.found_in else invariants
        assert finding.invariant in known, finding
        assert not finding.scenario or finding.scenario in scenarios, finding


def test_invariants_whose_failure_breaks_the_process_are_named_for_isolation() -> None:
    assert isolated_invariants("torch_xla", "2.9.0") == [
        "partial-sync", "step-boundary", "sync-aliasing", "training-differential",
    ]
    assert isolated_invariants("jax", "0.10.2") == []


def test_a_known_failure_is_judged_as_drawn_and_an_unknown_one_shrinks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under a known finding the ready test stops at the first failure (shrinking a real release's
    training program cost minutes and changes nothing about whether the finding explains it)."""
    import pytest
    from hypothesis import strategies as st

    from harness.properties import base

    calls: list[int] = []

    def check(n: int) -> None:
        calls.append(n)
        if n >= 10:
            raise RuntimeError("buffer with shape f32[4] is deleted")

    invariant = base.Invariant(id="x", title="t", check=check, isolate=False, max_examples=100,
                               examples=lambda: st.fixed_dictionaries({"n": st.integers(0, 1000)}))
    monkeypatch.setattr(base, "known_findings", lambda *a: [_finding(r"is deleted", must_fail=False)])
    with pytest.raises(pytest.xfail.Exception):
        invariant.hypothesis_test(derandomize=True, database=None)()
    failing = [n for n in calls if n >= 10]
    assert len(set(failing)) == 1, f"shrank a known failure through {sorted(set(failing))}"
    calls.clear()
    monkeypatch.setattr(base, "known_findings", lambda *a: [])
    with pytest.raises(RuntimeError):
        invariant.hypothesis_test(derandomize=True, database=None)()
    assert min(n for n in calls if n >= 10) == 10  # without a finding the failure shrinks to its smallest


def test_every_finding_says_what_upstream_has() -> None:
    """An issue's address first, or "none found" with the queries that found nothing."""
    import re

    for finding in KNOWN_FINDINGS:
        assert finding.upstream.startswith("https://github.com/") or re.match(
            r"none found: searched [\w/ -]+ issues for '", finding.upstream
        ), finding
        assert bool(finding.upstream_link) == finding.upstream.startswith("https://")


def test_every_finding_is_reproducible_measured_and_reported_where_upstream_has_nothing() -> None:
    """Each finding has a reproducer in its runtime's API (its scenario's or its own), rows in the
    expected-outcomes table saying where it reproduced, and, where upstream has no issue for it,
    a report ready to file under reports/upstream/."""
    from harness.report.findings import report_files
    from harness.scenarios import upstream_torch_xla as upstream
    from harness.scenarios.known_findings import expected_table
    from harness.scenarios.registry import all_scenarios

    catalog = {s.id for s in all_scenarios()}
    table = expected_table()
    assert not set(upstream.finding_names()) & catalog, "a finding's own name is a catalog id"
    for finding in KNOWN_FINDINGS:
        assert bool(finding.scenario) != bool(finding.id), f"{finding}: a scenario or an id, one of them"
        assert upstream.reproducers(finding.name, finding.runtime), f"{finding.name}: no {finding.runtime} reproducer"
        if finding.backend == "cpu":  # every row so far was measured on a CPU
            assert table.reproduced_ranges(finding.runtime, finding.name), f"{finding.name}: no row says where"
        if not finding.upstream_link:
            assert report_files(finding.name, finding.runtime), (
                f"{finding.name}: no upstream issue and no report under reports/upstream/ "
                f"(xharness report upstream {finding.name} --runtime {finding.runtime} --release V)"
            )


@pytest.mark.parametrize("name", ["expanded-grad-accumulation", "nan-payload-resharding", "subnormal-flush-sharded-view"])
def test_a_finding_that_stops_reproducing_is_unexpectedly_fixed(name: str) -> None:
    """What the release cell does with a finding (suites/adapters/test_upstream_catalog.py): a
    clean run where its row says reproduced fails, never reads as green."""
    from harness.scenarios.expected import AS_EXPECTED, UNEXPECTEDLY_FIXED
    from harness.scenarios.known_findings import expected_table

    table = expected_table()
    assert table.judge("torch_xla", "2.9.0", name, "passed").verdict == UNEXPECTEDLY_FIXED
    assert table.judge("torch_xla", "2.9.0", name, "reproduced").verdict == AS_EXPECTED
    assert [f.name for f in KNOWN_FINDINGS if f.name == name and f.holds_on("2.9.0")]
