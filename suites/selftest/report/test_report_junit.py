"""The per-cell JUnit file: schema, Surefire semantics, readers' expectations, round trip."""

from __future__ import annotations

from pathlib import Path

import pytest
import xmlschema
from junitparser import Error, Failure, Skipped, xunit2
from report_samples import MODULE, make_records

from harness.report.junit import read_records, write_cell_xml
from harness.report.records import FAILED, FLAKY, KIND_RANK, PASSED, Attempt, TestRecord

SCHEMA = Path(__file__).parents[3] / "harness/report/schema/junit-10.xsd"


@pytest.fixture(scope="module")
def schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(SCHEMA)


@pytest.fixture
def cell_file(tmp_path: Path, records: list[TestRecord]) -> Path:
    path = tmp_path / "junit" / "cpu-4.xml"
    write_cell_xml("cpu-4", records, path)
    return path


def cases(path: Path) -> dict[str, xunit2.TestCase]:
    report = xunit2.JUnitXml.fromfile(str(path))
    return {case.name: case for suite in report for case in suite}


def test_validates_against_jenkins_junit_schema(cell_file: Path, schema) -> None:
    schema.validate(str(cell_file))


def test_schema_rejects_what_jenkins_rejects(tmp_path: Path, schema) -> None:
    """The schema has teeth: a testcase without a name, a rerun without a type."""
    nameless = '<testsuites><testsuite name="c" tests="1" failures="0" errors="0"><testcase/></testsuite></testsuites>'
    untyped = (
        '<testsuites><testsuite name="c" tests="1" failures="0" errors="0">'
        '<testcase name="t"><flakyFailure message="m"/></testcase></testsuite></testsuites>'
    )
    for text in (nameless, untyped):
        assert not schema.is_valid(text)


def test_one_suite_one_case_per_test(cell_file: Path, records: list[TestRecord]) -> None:
    report = xunit2.JUnitXml.fromfile(str(cell_file))
    suites = list(report)
    assert [s.name for s in suites] == ["cpu-4"]
    names = [case.name for case in suites[0]]
    assert sorted(names) == sorted(r.name for r in records)
    suite = suites[0]
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (8, 2, 3, 1)


def test_what_annotators_read(cell_file: Path) -> None:
    """classname, name, time and file on every case (mikepenz/action-junit-report needs file)."""
    got = cases(cell_file)
    passed = got["test_passes[fixed]"]
    assert passed.classname == "suites.regression.test_catalog.TestRace"
    assert passed.time == 0.25
    assert passed._elem.get("file") == MODULE
    assert passed._elem.get("line") == "10"
    for case in got.values():
        assert case.classname and case.name and case.time is not None
        assert case._elem.get("file", "").endswith(".py")


def test_properties_carry_the_repro(cell_file: Path) -> None:
    props = {p.name: p.value for p in cases(cell_file)["test_segfault"].properties()}
    for key in ("cell", "backend", "devices", "processes", "runtime", "mode", "scenario"):
        assert props[key]
    assert props["seed"] == "11"
    assert props["schedule"] == "pct:3"
    assert props["jax"] == props["jaxlib"] == "0.10.2"
    assert props["attempts"] == "1"
    assert props["repro"] == "xharness repro race-on-handles --inject --cell cpu-4 --seed 11"


def test_flaky_is_a_pass_with_flaky_failure(cell_file: Path) -> None:
    """Surefire: passed on rerun = passing case + <flakyFailure>; EnricoMi counts it as a pass."""
    case = cases(cell_file)["test_flaky"]
    assert case.is_passed and not case.result
    assert case.is_flaky and not case.is_rerun
    (flaky,) = case.flaky_failures()
    assert flaky.message == "DuplicateDiscoveryError: discovery ran twice"
    assert flaky.type == "DuplicateDiscoveryError"
    assert flaky.stack_trace == "tb flaky"


def test_failed_every_attempt_keeps_failure_and_reruns(cell_file: Path) -> None:
    case = cases(cell_file)["test_fails"]
    (failure,) = case.result
    assert isinstance(failure, Failure)
    assert failure.message == "AssertionError: second"  # the final attempt decides
    assert failure.text == "Traceback 2\nassert 1 == 3"
    (rerun,) = case.rerun_failures()
    assert rerun.message == "AssertionError: first"
    assert rerun.stack_trace == "Traceback 1\nassert 1 == 2"
    assert {p.name: p.value for p in case.properties()}["durations"] == "1.000,1.500"
    assert case.time == 2.5


def test_crashes_are_errors_naming_signal_or_exit_code(cell_file: Path) -> None:
    got = cases(cell_file)
    (segv,) = got["test_segfault"].result
    assert isinstance(segv, Error) and segv.type == "signal"
    assert "SIGSEGV" in segv.message and "signal 11" in segv.message
    assert "Fatal Python error: Segmentation fault" in got["test_segfault"].system_err
    assert 'File "executor.py", line 9' in got["test_segfault"].system_err
    (hang,) = got["test_hangs"].result
    assert hang.type == "timeout" and "timed out" in hang.message
    assert "most recent call first" in got["test_hangs"].system_err
    (exited,) = got["test_exits"].result
    assert exited.type == "exit" and "exit code 3" in exited.message


def test_skipped_has_reason(cell_file: Path) -> None:
    (skip,) = cases(cell_file)["test_needs_gpu"].result
    assert isinstance(skip, Skipped) and skip.message == "no GPU on this machine"


def test_round_trip_keeps_classification_and_attempts(cell_file: Path, records) -> None:
    back = {r.nodeid: r for r in read_records(cell_file)}
    assert set(back) == {r.nodeid for r in records}
    for original in records:
        again = back[original.nodeid]
        assert again.classification == original.classification
        assert again.classname == original.classname and again.name == original.name
        assert again.properties == original.properties
        assert again.line == original.line
        assert [a.outcome for a in again.attempts] == [a.outcome for a in original.attempts]
        assert [a.duration for a in again.attempts] == [a.duration for a in original.attempts]
        assert [a.kind for a in again.attempts] == [a.kind for a in original.attempts]
        assert [a.signal for a in again.attempts] == [a.signal for a in original.attempts]
        assert [a.exit_code for a in again.attempts] == [a.exit_code for a in original.attempts]


def test_second_round_trip_is_exact(tmp_path: Path, cell_file: Path) -> None:
    first = read_records(cell_file)
    write_cell_xml("cpu-4", first, tmp_path / "again.xml")
    assert read_records(tmp_path / "again.xml") == first


def test_output_that_xml_cannot_hold_is_escaped(tmp_path: Path, schema) -> None:
    record = TestRecord(
        "t.py::test_ansi",
        "cpu-1",
        attempts=[Attempt(FAILED, 0.1, "bad \x00 byte", "\x1b[31mred\x1b[0m", stdout="\x07bell")],
    )
    path = tmp_path / "c.xml"
    write_cell_xml("cpu-1", [record], path)
    schema.validate(str(path))
    (back,) = read_records(path)
    assert back.final.details == "\\x1b[31mred\\x1b[0m"
    assert back.final.message == "bad \\x00 byte"


def test_written_atomically(tmp_path: Path, records) -> None:
    path = tmp_path / "cpu-4.xml"
    path.write_text("previous")
    write_cell_xml("cpu-4", records, path)
    assert [p.name for p in tmp_path.iterdir()] == ["cpu-4.xml"]  # no temporary left behind
    assert path.read_text().startswith("<?xml")


def test_reads_pytest_own_junit(tmp_path: Path) -> None:
    """Other tools' files merge too: pytest's xunit2 output, no file attribute."""
    path = tmp_path / "pytest.xml"
    path.write_text(
        '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" '
        'failures="1" skipped="0" tests="2" time="0.1"><testcase classname="tests.test_x.TestY" '
        'name="test_a" time="0.05"/><testcase classname="tests.test_x" name="test_b" time="0.05">'
        '<failure message="assert False">trace</failure></testcase></testsuite></testsuites>'
    )
    got = {r.name: r for r in read_records(path)}
    assert got["test_a"].classification == PASSED
    assert got["test_a"].classname == "tests.test_x.TestY"
    assert got["test_b"].classification == FAILED
    assert got["test_b"].final.details == "trace"


def test_every_record_kind_reads_back_with_its_classification(tmp_path: Path) -> None:
    records = make_records("cpu-8")
    path = tmp_path / "cpu-8.xml"
    write_cell_xml("cpu-8", records, path)
    classes = [r.classification for r in read_records(path)]
    assert classes == [r.classification for r in records]
    assert FLAKY in classes


def test_rank_record_keeps_its_signal_and_exit_code(tmp_path: Path) -> None:
    killed = Attempt(outcome="error", kind=KIND_RANK, signal=9, message="rank 1 died; rank(s) 0 stopped")
    exited = Attempt(outcome="error", kind=KIND_RANK, exit_code=4, message="rank 0 exited")
    records = [
        TestRecord(nodeid="suites/t.py::test_killed", cell="cpu-2x4", file="suites/t.py", attempts=[killed]),
        TestRecord(nodeid="suites/t.py::test_exited", cell="cpu-2x4", file="suites/t.py", attempts=[exited]),
    ]
    path = tmp_path / "cpu-2x4.xml"
    write_cell_xml("cpu-2x4", records, path)
    back = {r.nodeid: r.final for r in read_records(path)}
    assert back["suites/t.py::test_killed"].signal == 9
    assert "SIGKILL" in back["suites/t.py::test_killed"].message
    assert back["suites/t.py::test_exited"].exit_code == 4
    write_cell_xml("cpu-2x4", read_records(path), tmp_path / "again.xml")  # no stacked prefixes
    again = {r.nodeid: r.final for r in read_records(tmp_path / "again.xml")}
    assert again["suites/t.py::test_killed"].message == back["suites/t.py::test_killed"].message


def test_harness_level_record_reads_back_with_its_node_id(tmp_path: Path) -> None:
    startup = TestRecord(
        nodeid="xharness::startup",
        cell="cpu-4",
        file="ci/matrix.toml",
        attempts=[Attempt(outcome="error", kind="exit", exit_code=4, message="pytest could not start")],
        properties={"cell": "cpu-4"},
    )
    ordinary = TestRecord(nodeid="suites/a/test_b.py::TestC::test_d", cell="cpu-4", file="suites/a/test_b.py",
                          attempts=[Attempt(outcome=PASSED)])
    path = tmp_path / "cpu-4.xml"
    write_cell_xml("cpu-4", [startup, ordinary], path)
    back = {r.nodeid: r for r in read_records(path)}
    assert set(back) == {"xharness::startup", "suites/a/test_b.py::TestC::test_d"}
    assert back["xharness::startup"].properties == {"cell": "cpu-4"}
    assert "nodeid" not in path.read_text().split("test_d")[1]  # only written where it is needed


def test_report_files_get_ordinary_permissions(tmp_path: Path) -> None:
    import os
    import stat

    from harness.report.files import write_atomic

    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "index.html", "<p>ok</p>")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "index.html").stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["index.html"]  # no temporary left behind
