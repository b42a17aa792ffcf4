"""Every attempt of a rerun test, its output and its result elements, written and read back."""

from __future__ import annotations

import socket
from datetime import UTC, datetime
from pathlib import Path

import pytest
from junitparser import xunit2

from harness.report.junit import (
    ReportInputError,
    build_suite,
    cell_title,
    read_records,
    record_to_case,
    write_cell_xml,
)
from harness.report.records import (
    ERROR,
    FAILED,
    KIND_SIGNAL,
    PASSED,
    Attempt,
    TestRecord,
)

STACK = (
    'Current thread 0x00007f (most recent call first):\n  File "suites/t.py", line 9 in test_crash'
)
STDERR = f"Fatal Python error: Segmentation fault\n\n{STACK}"


def _crash_then_pass() -> TestRecord:
    return TestRecord(
        nodeid="suites/t.py::TestCrash::test_crash",
        cell="cpu-4",
        file="suites/t.py",
        attempts=[
            Attempt(
                ERROR,
                1.5,
                details=STACK,
                stdout="step 1\n",
                stderr=STDERR,
                kind=KIND_SIGNAL,
                signal=11,
            ),
            Attempt(PASSED, 0.5, stdout="all good\n"),
        ],
    )


def _fails_every_time() -> TestRecord:
    return TestRecord(
        nodeid="suites/t.py::test_fails",
        cell="cpu-4",
        file="suites/t.py",
        attempts=[
            Attempt(FAILED, 0.25, "AssertionError: 1 != 2", "tb one", stderr="warning: slow\n"),
            Attempt(ERROR, 0.5, "fixture 'db' not found", "tb two", stdout="setup\n"),
            Attempt(FAILED, 0.75, "assert 3 == 4", "tb three"),
        ],
        properties={"seed": "7", "schedule": ""},
    )


def _children(path: Path, name: str) -> list[tuple[str, dict[str, str], dict[str, str]]]:
    """(tag, attributes, text of each child) of every element under the named test case."""
    report = xunit2.JUnitXml.fromfile(str(path))
    (case,) = [c for suite in report for c in suite if c.name == name]
    return [
        (child.tag, dict(child.attrib), {grand.tag: grand.text or "" for grand in child})
        for child in case._elem
        if child.tag != "properties"
    ]


def test_crash_then_pass_is_a_flaky_error_with_stack_and_output(tmp_path: Path) -> None:
    path = tmp_path / "cpu-4.xml"
    write_cell_xml("cpu-4", [_crash_then_pass()], path)
    assert _children(path, "test_crash") == [
        (
            "flakyError",
            {"message": "killed by signal 11 (SIGSEGV)", "type": "signal"},
            {"stackTrace": STACK, "system-out": "step 1\n", "system-err": STDERR},
        ),
        ("system-out", {}, {}),
    ]
    (back,) = read_records(path)
    assert back.attempts == [
        Attempt(
            ERROR,
            1.5,
            "killed by signal 11 (SIGSEGV)",
            STACK,
            stdout="step 1\n",
            stderr=STDERR,
            kind=KIND_SIGNAL,
            signal=11,
        ),
        Attempt(PASSED, 0.5, stdout="all good\n"),
    ]


def test_failing_reruns_keep_their_order_types_and_output(tmp_path: Path) -> None:
    path = tmp_path / "cpu-4.xml"
    record = _fails_every_time()
    write_cell_xml("cpu-4", [record], path)
    assert _children(path, "test_fails") == [
        ("failure", {"message": "assert 3 == 4", "type": "failure"}, {}),
        (
            "rerunFailure",
            {"message": "AssertionError: 1 != 2", "type": "AssertionError"},
            {"stackTrace": "tb one", "system-err": "warning: slow\n"},
        ),
        (
            "rerunError",
            {"message": "fixture 'db' not found", "type": "error"},
            {"stackTrace": "tb two", "system-out": "setup\n"},
        ),
    ]
    (back,) = read_records(path)
    assert back == record


def test_passing_final_attempt_keeps_its_output(tmp_path: Path) -> None:
    record = TestRecord(
        "suites/t.py::test_quiet",
        "cpu-1",
        "suites/t.py",
        attempts=[Attempt(FAILED, 0.5, ""), Attempt(PASSED, 0.25, stdout="out\n", stderr="err\n")],
    )
    path = tmp_path / "cpu-1.xml"
    write_cell_xml("cpu-1", [record], path)
    tag, attributes, _ = _children(path, "test_quiet")[0]
    assert (tag, attributes) == ("flakyFailure", {"message": "", "type": "failure"})
    (back,) = read_records(path)
    assert back == record


def test_one_attempt_case_has_time_file_and_attempts_only(tmp_path: Path) -> None:
    record = TestRecord(
        "suites/a/t.py::TestK::test_one", "cpu-1", attempts=[Attempt(PASSED, 0.12345)]
    )
    case = record_to_case(record)
    assert case.time == 0.123
    assert case.file == "suites/a/t.py"
    assert [(p.name, p.value) for p in case.properties()] == [("attempts", "1")]


def test_test_without_attempts_is_an_error_saying_so() -> None:
    case = record_to_case(TestRecord("suites/t.py::test_lost", "cpu-1", "suites/t.py"))
    (result,) = case.result
    assert (type(result).__name__, result.message, result.type) == (
        "Error",
        "no attempt of this test was recorded",
        "no-result",
    )


def test_long_property_names_values_and_node_ids_keep_their_tails() -> None:
    key = "k" * 300
    value = "v" * 9000
    nodeid = "suites/t.py::test_p[" + "x" * 9000 + "]"
    record = TestRecord(
        nodeid, "cpu-1", "suites/t.py", attempts=[Attempt(PASSED)], properties={key: value}
    )
    case = record_to_case(record, cell_title(record))
    props = {p.name: p.value for p in case.properties()}
    assert props == {
        "[... 44 characters dropped ...]\n" + "k" * 256: "[... 808 characters dropped ...]\n"
        + "v" * 8192,
        "attempts": "1",
        "nodeid": f"[... {len(nodeid) - 8192} characters dropped ...]\n" + nodeid[-8192:],
    }


def test_suite_carries_utc_timestamp_and_host() -> None:
    suite = build_suite(
        "cpu-1", [TestRecord("suites/t.py::test_a", "cpu-1", attempts=[Attempt(PASSED)])]
    )
    stamp = datetime.fromisoformat(suite.timestamp)
    assert stamp.utcoffset() is not None and stamp.utcoffset().total_seconds() == 0
    assert abs((datetime.now(UTC) - stamp).total_seconds()) < 60
    assert suite.hostname == socket.gethostname()


def _foreign(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "other.xml"
    path.write_text(
        f'<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="x">{body}</testsuite></testsuites>'
    )
    return path


def test_other_tools_results_without_message_text_or_file(tmp_path: Path) -> None:
    path = _foreign(
        tmp_path,
        '<testcase classname="tests.test_x" name="test_a" time="0.5"><failure>trace\n</failure></testcase>'
        '<testcase classname="tests.test_x" name="test_b" time="0.5"><error message="boom"/></testcase>'
        '<testcase classname="tests.test_x" name="test_c" time="0.5"><failure type="timeout" message="slow"/>'
        "</testcase>"
        '<testcase classname="tests.test_x" name="test_d" time="0.5"><flakyFailure type="AssertionError">'
        "  old trace  </flakyFailure><flakyFailure/></testcase>",
    )
    got = {r.name: r for r in read_records(path)}
    assert got["test_a"].final == Attempt(FAILED, 0.5, "", "trace\n")
    assert got["test_a"].file == "" and got["test_a"].nodeid == "tests/test_x.py::test_a"
    assert got["test_b"].final == Attempt(ERROR, 0.5, "boom", "")
    # a failure is never a crash kind
    assert got["test_c"].final == Attempt(FAILED, 0.5, "slow", "")
    assert got["test_d"].attempts == [
        Attempt(FAILED, 0.0, "", "old trace"),
        Attempt(FAILED, 0.0, "", ""),
        Attempt(PASSED, 0.5),
    ]


def test_bad_time_names_file_and_test(tmp_path: Path) -> None:
    path = _foreign(tmp_path, '<testcase classname="c" name="test_a" time="soon"/>')
    with pytest.raises(ReportInputError) as caught:
        read_records(path)
    assert str(caught.value).startswith(f"{path}: testcase 'test_a' has a bad time (")


def test_missing_file_names_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "absent.xml"
    with pytest.raises(ReportInputError) as caught:
        read_records(path)
    assert str(caught.value) == f"{path}: cannot read (No such file or directory)"


def test_crash_stack_goes_to_system_err_once(tmp_path: Path) -> None:
    """The native stack heads system-err unless stderr already holds it, and is not read back as
    stderr when it is all there was."""
    timeout = TestRecord(
        "suites/t.py::test_hangs",
        "cpu-1",
        "suites/t.py",
        attempts=[Attempt(ERROR, 9.0, "ran past 9s", "Thread 0x1:\n  File x", kind="timeout")],
    )
    killed = TestRecord(
        "suites/t.py::test_killed",
        "cpu-1",
        "suites/t.py",
        attempts=[
            Attempt(
                ERROR,
                1.0,
                "",
                "Thread 0x2:\n  File y",
                stderr="last words\n",
                kind=KIND_SIGNAL,
                signal=9,
            )
        ],
    )
    path = tmp_path / "cpu-1.xml"
    write_cell_xml("cpu-1", [timeout, killed], path)
    assert _children(path, "test_hangs")[-1] == ("system-err", {}, {})
    assert _children(path, "test_killed")[-1] == ("system-err", {}, {})
    report = xunit2.JUnitXml.fromfile(str(path))
    errs = {c.name: c.system_err for suite in report for c in suite}
    assert errs == {
        "test_hangs": "Thread 0x1:\n  File x",
        "test_killed": "Thread 0x2:\n  File y\nlast words\n",
    }
    back = {r.name: r.final for r in read_records(path)}
    assert back["test_killed"].stderr == "last words\n"
    assert back["test_hangs"] == Attempt(
        ERROR, 9.0, "ran past 9s", "Thread 0x1:\n  File x", kind="timeout"
    )


def test_crashed_test_reads_back_with_its_own_stderr(tmp_path: Path) -> None:
    """A crash's record (message and faulthandler stacks as details, the log segment as stderr)
    reads back exactly: the stack put in front of system-err is not taken for the test's output."""
    details = (
        "test killed by signal 11 (SIGSEGV)\n\n--- faulthandler, rank 0 ---\n"
        'Fatal Python error: Segmentation fault\n  File "suites/t.py", line 9 in test_crash'
    )
    crash = Attempt(
        ERROR,
        2.0,
        "test killed by signal 11 (SIGSEGV)",
        details,
        stdout="collected\n",
        stderr="loading plugin\n",
        kind=KIND_SIGNAL,
        signal=11,
    )
    record = TestRecord(
        "suites/t.py::test_crash",
        "cpu-1",
        "suites/t.py",
        attempts=[
            crash,
            Attempt(
                ERROR,
                1.0,
                "test killed by signal 11 (SIGSEGV)",
                details,
                stderr="again\n",
                kind=KIND_SIGNAL,
                signal=11,
            ),
        ],
    )
    path = tmp_path / "cpu-1.xml"
    write_cell_xml("cpu-1", [record], path)
    report = xunit2.JUnitXml.fromfile(str(path))
    (case,) = [c for suite in report for c in suite]
    assert case.system_err == f"{details}\nagain\n"
    (back,) = read_records(path)
    assert back.attempts == [
        Attempt(
            ERROR,
            2.0,
            "killed by signal 11 (SIGSEGV): test killed by signal 11 (SIGSEGV)",
            details,
            stdout="collected\n",
            stderr="loading plugin\n",
            kind=KIND_SIGNAL,
            signal=11,
        ),
        Attempt(
            ERROR,
            1.0,
            "killed by signal 11 (SIGSEGV): test killed by signal 11 (SIGSEGV)",
            details,
            stderr="again\n",
            kind=KIND_SIGNAL,
            signal=11,
        ),
    ]


def test_stack_dumped_repeatedly_stays_in_stderr(tmp_path: Path) -> None:
    """A hang whose timer dumped the same stack twice: stderr is written and read back as it was."""
    stack = "Thread 0x1 (most recent call first):\n  File x, line 3 in wait"
    record = TestRecord(
        "suites/t.py::test_hangs",
        "cpu-1",
        "suites/t.py",
        attempts=[
            Attempt(ERROR, 9.0, "ran past 9s", stack, stderr=f"{stack}\n{stack}", kind="timeout")
        ],
    )
    path = tmp_path / "cpu-1.xml"
    write_cell_xml("cpu-1", [record], path)
    (back,) = read_records(path)
    assert back == record
