"""Known findings excuse exactly the failures they describe: a failure of another kind on the
same invariant is news and fails the run."""

from __future__ import annotations

import pytest

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
