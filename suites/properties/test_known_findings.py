"""Known findings excuse exactly the failures they describe: a failure of another kind on the
same invariant is news and fails the run."""

from __future__ import annotations

from harness.properties.base import (
    KNOWN_FINDINGS,
    KnownFinding,
    _release,
    explained,
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
    assert _release("2.5.1+cpu") == (2, 5, 1) and _release("2.10.0") == (2, 10, 0)
    old = {f.upstream for f in known_findings("spec-normalization", "torch_xla", "2.5.1")}
    new = {f.upstream for f in known_findings("spec-normalization", "torch_xla", "2.9.0")}
    assert old == {"https://github.com/pytorch/xla/issues/8522"} and new == set()


def test_every_finding_names_a_known_invariant_and_scenario() -> None:
    from harness.properties import INVARIANTS
    from harness.scenarios.registry import all_scenarios

    invariants = {i.id for i in INVARIANTS}
    scenarios = {s.id for s in all_scenarios()}
    for finding in KNOWN_FINDINGS:
        assert finding.invariant in invariants, finding
        assert not finding.scenario or finding.scenario in scenarios, finding


def test_invariants_whose_failure_breaks_the_process_are_named_for_isolation() -> None:
    assert isolated_invariants("torch_xla", "2.9.0") == [
        "partial-sync", "step-boundary", "sync-aliasing", "training-differential",
    ]
    assert isolated_invariants("jax", "0.10.2") == []
