"""The exact texts of one test's attempt: phases folded into one, ranks folded into one."""

from __future__ import annotations

from harness.matrix.outcomes import attempt_from_reports, merge_ranks
from harness.report.records import (
    ERROR,
    FAILED,
    KIND_EXCEPTION,
    KIND_EXIT,
    PASSED,
    SKIPPED,
    XFAILED,
    Attempt,
)


def test_no_phase_reported_is_an_exception_error() -> None:
    assert attempt_from_reports([]) == Attempt(
        ERROR, kind=KIND_EXCEPTION, message="pytest reported no phase of this test"
    )


def test_every_failed_phase_trace_is_kept_in_order() -> None:
    attempt = attempt_from_reports(
        [
            {"when": "setup", "outcome": "passed", "stdout": "ignored"},
            {
                "when": "call",
                "outcome": "failed",
                "duration": 0.5,
                "message": "assert 1 == 2",
                "longrepr": "def test_a():\n>   assert 1 == 2\nE   assert 1 == 2",
            },
            {"when": "teardown", "outcome": "failed", "duration": 0.25, "message": "leak"},
        ]
    )
    assert attempt == Attempt(
        FAILED,
        0.75,
        "assert 1 == 2",
        "def test_a():\n>   assert 1 == 2\nE   assert 1 == 2\n\n",
    )


def test_skip_without_reason_has_an_empty_message() -> None:
    attempt = attempt_from_reports([{"when": "setup", "outcome": "skipped"}])
    assert attempt == Attempt(SKIPPED)


def test_ranks_that_all_skip_keep_the_reason() -> None:
    merged = merge_ranks(
        {
            0: Attempt(SKIPPED, message="needs 8 devices"),
            1: Attempt(SKIPPED, message="needs 8 devices"),
        }
    )
    assert merged == Attempt(SKIPPED, message="needs 8 devices")
    known = merge_ranks({0: Attempt(PASSED, 1.0), 1: Attempt(XFAILED, 2.0, "known bug 12")})
    assert known == Attempt(XFAILED, 2.0, "known bug 12")


def test_rank_output_stacks_and_exit_code_are_labelled_per_rank() -> None:
    merged = merge_ranks(
        {
            2: Attempt(
                ERROR, 1.0, "exited", "stack two", "out two", "err two", KIND_EXIT, exit_code=3
            ),
            0: Attempt(PASSED, 1.0, stdout="out zero"),
            1: Attempt(FAILED, 1.0, "assert x", "trace one", stderr="err one"),
        }
    )
    assert merged == Attempt(
        ERROR,
        1.0,
        "rank 1: assert x; rank 2: exited",
        "--- rank 1 ---\ntrace one\n\n--- rank 2 ---\nstack two",
        "--- rank 0 ---\nout zero\n--- rank 2 ---\nout two",
        "--- rank 1 ---\nerr one\n--- rank 2 ---\nerr two",
        KIND_EXIT,
        exit_code=3,
    )
