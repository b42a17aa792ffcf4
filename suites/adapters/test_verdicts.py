"""The verdict on a real runtime's run, in every case the table and the run can disagree, with the
words a maintainer reads in the JUnit message; and what a run of several variants did, which no
one variant may decide alone.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from harness.scenarios.expected import (
    AS_EXPECTED,
    FAILED,
    FLAKY,
    PASSED,
    REGRESSED,
    REPRODUCED,
    SKIPPED,
    UNEXPECTED,
    UNEXPECTEDLY_FIXED,
    VERDICT_FLAKY,
    VERDICT_SKIPPED,
    Expectation,
    ExpectedTable,
    actual_outcome,
    judge,
)

pytestmark = pytest.mark.cell_independent


def _row(outcome: str, line: int | None = 9, at_least: tuple[int, int] | None = None,
         backend: str = "cpu") -> Expectation:
    return Expectation("torch_xla", SpecifierSet("<2.6"), "lost-sharding", outcome, line=line,
                       at_least=at_least, backend=backend)


@pytest.mark.parametrize(("expected", "actual", "verdict", "reason"), [
    (PASSED, PASSED, AS_EXPECTED, "passed, as expected (expected.toml line 9)"),
    (REPRODUCED, REPRODUCED, AS_EXPECTED, "reproduced, as expected (expected.toml line 9)"),
    (PASSED, REPRODUCED, REGRESSED, "expected passed (expected.toml line 9), got reproduced"),
    (PASSED, FAILED, REGRESSED, "expected passed (expected.toml line 9), got failed"),
    (REPRODUCED, PASSED, UNEXPECTEDLY_FIXED,
     "expected the bug to reproduce (expected.toml line 9), but it passed: update the table"),
    (REPRODUCED, FAILED, UNEXPECTED, "expected reproduced (expected.toml line 9), got failed"),
    (FAILED, PASSED, UNEXPECTED, "expected failed (expected.toml line 9), got passed"),
    (SKIPPED, PASSED, UNEXPECTED, "expected skipped (expected.toml line 9), got passed"),
    (PASSED, SKIPPED, UNEXPECTED, "expected passed (expected.toml line 9), got skipped"),
    (SKIPPED, SKIPPED, AS_EXPECTED, "skipped, as expected (expected.toml line 9)"),
])
def test_each_outcome_against_each_row_has_its_verdict_and_words(expected: str, actual: str, verdict: str,
                                                                 reason: str) -> None:
    found = judge(expected, actual, row=_row(expected))
    assert (found.verdict, found.expected, found.actual, found.reason) == (verdict, expected, actual, reason)
    assert found.green == (verdict == AS_EXPECTED)


def test_a_row_without_a_line_says_no_line_and_no_row_asks_for_one() -> None:
    assert judge(PASSED, REPRODUCED, row=_row(PASSED, line=None)).reason == "expected passed, got reproduced"
    assert judge(PASSED, REPRODUCED).reason == "expected passed, got reproduced"
    cpu = judge(None, PASSED)
    assert (cpu.verdict, cpu.expected, cpu.green) == (UNEXPECTED, None, False)
    assert cpu.reason == "passed, and the table has no expected outcome for it: add a row to expected.toml"
    gpu = judge(None, REPRODUCED, backend="gpu")
    assert gpu.verdict == UNEXPECTED
    assert gpu.reason == ("reproduced, and the table has no expected outcome for it on gpu: once measured there, "
                          'add a row with backend = "gpu" to expected.toml')


def test_a_skip_is_held_against_a_release_only_when_its_row_expected_a_run() -> None:
    machine = judge(PASSED, SKIPPED, machine_skip=True, row=_row(PASSED))
    assert (machine.verdict, machine.reason, machine.green) == (VERDICT_SKIPPED, "this machine cannot run it", True)
    release = judge(None, SKIPPED)
    assert (release.verdict, release.reason, release.green) == (VERDICT_SKIPPED, "the release cannot run it", True)
    assert judge(PASSED, SKIPPED).verdict == UNEXPECTED
    with pytest.raises(ValueError, match="unknown outcome 'crashed'"):
        judge(PASSED, "crashed")


def test_a_flaky_run_is_as_expected_only_at_the_rate_its_row_states() -> None:
    rate = _row(REPRODUCED, at_least=(1, 4))
    met = judge(REPRODUCED, FLAKY, row=rate, counts={REPRODUCED: 2, PASSED: 6})
    assert (met.verdict, met.actual) == (AS_EXPECTED, REPRODUCED)
    assert met.reason == "reproduced in 2 of 8 runs, as expected: at least 1 of 4 (expected.toml line 9)"
    exactly = judge(REPRODUCED, FLAKY, row=rate, counts={REPRODUCED: 1, PASSED: 3})
    assert exactly.verdict == AS_EXPECTED
    short = judge(REPRODUCED, FLAKY, row=rate, counts={REPRODUCED: 1, PASSED: 7})
    assert (short.verdict, short.actual, short.green) == (VERDICT_FLAKY, FLAKY, False)
    assert short.reason == ("the runs disagreed (passed 7 of 8, reproduced 1 of 8); the table expects "
                            "reproduced 1 of 4 (expected.toml line 9)")
    # a run that broke is never excused by a rate
    broke = judge(REPRODUCED, FLAKY, row=rate, counts={REPRODUCED: 3, FAILED: 1})
    assert broke.verdict == VERDICT_FLAKY
    every = judge(REPRODUCED, FLAKY, row=_row(REPRODUCED), counts={REPRODUCED: 3, PASSED: 1})
    assert every.verdict == VERDICT_FLAKY and "the table expects reproduced every time" in every.reason
    unrowed = judge(None, FLAKY, counts={PASSED: 1, REPRODUCED: 1})
    assert unrowed.verdict == VERDICT_FLAKY and unrowed.reason.endswith("the table expects no rate")


def test_the_table_judges_by_the_row_of_the_release_and_backend_run() -> None:
    table = ExpectedTable(Path("expected.toml"), (
        Expectation("torch_xla", SpecifierSet("<2.6"), "lost-sharding", REPRODUCED, line=3),
        Expectation("torch_xla", SpecifierSet(">=2.6"), "lost-sharding", PASSED, line=8),
        Expectation("torch_xla", SpecifierSet(">=2.6"), "lost-sharding", REPRODUCED, line=12, backend="gpu"),
    ))
    assert table.judge("torch_xla", "2.5.1+cu121", "lost-sharding", REPRODUCED).verdict == AS_EXPECTED
    fixed = table.judge("torch_xla", "2.6.0", "lost-sharding", REPRODUCED)
    assert (fixed.verdict, fixed.reason) == (REGRESSED, "expected passed (expected.toml line 8), got reproduced")
    assert table.judge("torch_xla", "2.6.0", "lost-sharding", REPRODUCED, backend="gpu").verdict == AS_EXPECTED
    assert table.judge("torch_xla", "2.6.0", "other", PASSED).verdict == UNEXPECTED
    assert table.judge("jax", "2.6.0", "lost-sharding", PASSED).verdict == UNEXPECTED


@pytest.mark.parametrize(("outcome", "variants", "actual"), [
    (PASSED, [{"outcome": PASSED}, {"outcome": PASSED}], PASSED),
    (SKIPPED, [{"outcome": SKIPPED}], SKIPPED),
    # every variant that ran showed a signature of the scenario: the bug is in this release
    ("failed", [{"outcome": "failed", "signature": "a"}, {"outcome": "failed", "signature": "b"}], REPRODUCED),
    ("failed", [{"outcome": "failed", "signature": "a"}, {"outcome": SKIPPED}], REPRODUCED),
    # one variant showed it and another broke some other way: not the bug alone
    ("failed", [{"outcome": "failed", "signature": "a"}, {"outcome": "failed", "signature": None}], FAILED),
    ("failed", [{"outcome": "failed", "signature": "a"}, {"outcome": "failed", "signature": "other"}], FAILED),
    ("failed", [{"outcome": "failed", "signature": "a"}, {"outcome": PASSED}], FAILED),
    # nothing ran, yet the run failed: broken, not reproduced
    ("failed", [{"outcome": SKIPPED}], FAILED),
    ("failed", [], FAILED),
])
def test_a_run_of_several_variants_reproduces_only_when_every_variant_that_ran_did(
        outcome: str, variants: list[dict[str, object]], actual: str) -> None:
    assert actual_outcome(outcome, {"a", "b"}, variants) == actual
