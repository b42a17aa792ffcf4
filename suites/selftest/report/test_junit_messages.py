"""The message attribute of each kind of error, word for word (what the dashboard, the summary
and an annotator show first), the cut of a long one, and a skip's words and details through a
file and back."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.report.junit import (
    MAX_MESSAGE_CHARS,
    attempt_message,
    read_records,
    write_cell_xml,
    xml_text,
)
from harness.report.records import (
    ERROR,
    KIND_EXIT,
    KIND_MEMORY,
    KIND_RANK,
    KIND_SIGNAL,
    KIND_TIMEOUT,
    SKIPPED,
    Attempt,
    TestRecord,
)

pytestmark = pytest.mark.cell_independent


@pytest.mark.parametrize(("attempt", "said"), [
    (Attempt(ERROR, kind=KIND_SIGNAL, signal=9, message="boom"), "killed by signal 9 (SIGKILL): boom"),
    (Attempt(ERROR, kind=KIND_SIGNAL, message="boom"), "boom"),
    (Attempt(ERROR, kind=KIND_EXIT, exit_code=3, signal=9), "exited with exit code 3"),
    (Attempt(ERROR, kind=KIND_TIMEOUT), "timed out"),
    (Attempt(ERROR, kind=KIND_TIMEOUT, message="Timeout (>5s)"), "Timeout (>5s)"),
    (Attempt(ERROR, kind=KIND_MEMORY), "out of memory"),
    (Attempt(ERROR, kind=KIND_MEMORY, message="MemoryError"), "MemoryError"),
    (Attempt(ERROR, kind=KIND_RANK, signal=9, exit_code=1),
     "a rank of the multi-process cell failed (signal 9 (SIGKILL), exit code 1)"),
    (Attempt(ERROR, kind=KIND_RANK, exit_code=2), "a rank of the multi-process cell failed (exit code 2)"),
    (Attempt(ERROR, kind=KIND_RANK), "a rank of the multi-process cell failed"),
    (Attempt(ERROR, kind=KIND_RANK, message="rank 1 hung"), "rank 1 hung"),
])
def test_each_kind_of_error_has_its_words(attempt: Attempt, said: str) -> None:
    assert attempt_message(attempt) == said
    again = Attempt(attempt.outcome, kind=attempt.kind, signal=attempt.signal, exit_code=attempt.exit_code,
                    message=said)
    assert attempt_message(again) == said  # read back and written again: no prefix twice


def test_a_long_message_keeps_its_tail_and_text_of_the_limit_is_whole() -> None:
    said = attempt_message(Attempt(ERROR, message="x" * (MAX_MESSAGE_CHARS + 10) + "END"))
    assert said.endswith("END") and said.startswith("[... 13 characters dropped ...]\n")
    assert xml_text("a" * 10, 10) == "a" * 10
    assert xml_text("a" * 11, 10) == "[... 1 characters dropped ...]\n" + "a" * 10


def test_a_skip_keeps_its_reason_and_details_through_the_file(tmp_path: Path) -> None:
    record = TestRecord(nodeid="suites/test_a.py::test_s", cell="c", file="suites/test_a.py")
    reason = "needs 8 devices " + "y" * (MAX_MESSAGE_CHARS + 5)
    record.attempts.append(Attempt(SKIPPED, message=reason, details="suites/test_a.py:3: needs 8 devices"))
    write_cell_xml("c", [record], tmp_path / "c.xml")
    back = read_records(tmp_path / "c.xml")[0].final
    assert back.details == "suites/test_a.py:3: needs 8 devices"
    dropped = len(reason) - MAX_MESSAGE_CHARS
    assert back.message == f"[... {dropped} characters dropped ...]\n" + reason[-MAX_MESSAGE_CHARS:]


def test_a_failures_stderr_that_starts_with_its_traceback_is_kept_whole(tmp_path: Path) -> None:
    """Only a crash's native stack is put in front of stderr (and taken off again when read)."""
    record = TestRecord(nodeid="suites/test_a.py::test_f", cell="c", file="suites/test_a.py")
    trace = "Traceback (most recent call last):\nAssertionError"
    record.attempts.append(Attempt("failed", message="AssertionError", details=trace, stderr=f"{trace}\nmore"))
    write_cell_xml("c", [record], tmp_path / "c.xml")
    assert read_records(tmp_path / "c.xml")[0].final.stderr == f"{trace}\nmore"


def test_a_test_in_nested_classes_keeps_its_node_id(tmp_path: Path) -> None:
    record = TestRecord(nodeid="suites/test_a.py::TestOuter::TestInner::test_n", cell="c", file="suites/test_a.py")
    record.attempts.append(Attempt("passed"))
    write_cell_xml("c", [record], tmp_path / "c.xml")
    assert read_records(tmp_path / "c.xml")[0].nodeid == "suites/test_a.py::TestOuter::TestInner::test_n"


def test_a_foreign_reports_test_in_nested_classes_gets_its_node_id_back(tmp_path: Path) -> None:
    """A JUnit file another pytest wrote names a test by class name and file only."""
    (tmp_path / "other.xml").write_text(
        '<testsuites><testsuite name="pytest" tests="1"><testcase classname="suites.test_a.TestOuter.TestInner" '
        'name="test_n" file="suites/test_a.py" time="0.1"/></testsuite></testsuites>')
    assert [r.nodeid for r in read_records(tmp_path / "other.xml")] == ["suites/test_a.py::TestOuter::TestInner::test_n"]
