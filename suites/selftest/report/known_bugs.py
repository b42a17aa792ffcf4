"""Records of a release that carries known bugs: what the catalog's release cells write for
torch_xla 2.9.0 (three scenarios reproduce as their expected rows say), one fixed scenario, and
one that regressed."""

from __future__ import annotations

from harness.report.records import FAILED, PASSED, XFAILED, Attempt, TestRecord

KNOWN = ("race-on-handles", "lost-sharding", "partial-sync-donation")


def release_records() -> list[TestRecord]:
    def record(scenario: str, outcome: str, expected: str, actual: str, verdict: str, reason: str) -> TestRecord:
        return TestRecord(
            nodeid=f"suites/adapters/test_upstream_catalog.py::test_scenario_against_release[{scenario}]",
            cell="torch_xla-2.9.0",
            attempts=[Attempt(outcome, duration=1.0, message=reason)],
            properties={"release": "2.9.0", "release-runtime": "torch_xla", "release-check": "catalog",
                        "runtime": "torch_xla", "scenario": scenario, "verdict": verdict,
                        "expected": expected, "actual": actual, "reason": reason},
        )

    known = [record(s, XFAILED, "reproduced", "reproduced", "as-expected", f"known bug: {s} reproduced, as expected")
             for s in KNOWN]
    return [
        *known,
        record("unhashable-spec", PASSED, "passed", "passed", "as-expected", "passed, as expected"),
        record("aliased-save", FAILED, "passed", "reproduced", "regressed", "expected passed, got reproduced"),
    ]
