"""``xharness report merge``: deduplication, flakiness across inputs, bad input handling."""

from __future__ import annotations

from pathlib import Path

import pytest
import xmlschema
from junitparser import xunit2
from report_samples import make_records

from harness.cli import main
from harness.report.junit import read_records, write_cell_xml
from harness.report.records import FAILED, FLAKY, PASSED, SKIPPED, Attempt, TestRecord

SCHEMA = Path(__file__).parents[3] / "harness/report/schema/junit-10.xsd"


def one(nodeid: str, cell: str, *outcomes: str, message: str = "boom") -> TestRecord:
    attempts = [Attempt(o, 0.5, message if o != PASSED else "") for o in outcomes]
    return TestRecord(nodeid, cell, attempts=attempts)


def write(path: Path, cell: str, *records: TestRecord) -> Path:
    write_cell_xml(cell, list(records), path)
    return path


def by_key(path: Path) -> dict[tuple[str, str], TestRecord]:
    return {(r.cell, r.nodeid): r for r in read_records(path)}


def test_one_suite_per_cell_and_statistics(tmp_path: Path, capsys) -> None:
    write(tmp_path / "in/cpu-4.xml", "cpu-4", *make_records("cpu-4"))
    write(tmp_path / "in/cpu-1.xml", "cpu-1", *make_records("cpu-1"))
    out = tmp_path / "junit.xml"
    assert main(["report", "merge", str(tmp_path / "in"), "--out", str(out)]) == 0
    report = xunit2.JUnitXml.fromfile(str(out))
    assert [s.name for s in report] == ["cpu-1", "cpu-4"]
    assert (report.tests, report.failures, report.errors) == (16, 4, 6)
    assert sum(s.skipped for s in report) == 2
    xmlschema.XMLSchema(SCHEMA).validate(str(out))
    assert "16 tests, 4 failures, 6 errors, 2 skipped, 2 flaky" in capsys.readouterr().out


def test_last_wins_and_flakiness_is_kept(tmp_path: Path) -> None:
    first = write(
        tmp_path / "a.xml",
        "cpu-4",
        one("t.py::test_fixed_later", "cpu-4", FAILED),
        one("t.py::test_broken_later", "cpu-4", PASSED),
        one("t.py::test_skipped_later", "cpu-4", FAILED),
    )
    second = write(
        tmp_path / "b.xml",
        "cpu-4",
        one("t.py::test_fixed_later", "cpu-4", PASSED),
        one("t.py::test_broken_later", "cpu-4", FAILED),
        one("t.py::test_skipped_later", "cpu-4", SKIPPED),
    )
    out = tmp_path / "junit.xml"
    assert main(["report", "merge", str(first), str(second), "--out", str(out)]) == 0
    got = by_key(out)
    assert got[("cpu-4", "t.py::test_fixed_later")].classification == FLAKY
    assert got[("cpu-4", "t.py::test_broken_later")].classification == FAILED
    assert got[("cpu-4", "t.py::test_skipped_later")].classification == SKIPPED
    cases = {c.name: c for s in xunit2.JUnitXml.fromfile(str(out)) for c in s}
    assert len(cases) == 3 == len(list(next(iter(xunit2.JUnitXml.fromfile(str(out))))))
    assert cases["cpu-4: t.py::test_fixed_later"].is_passed
    assert [f.message for f in cases["cpu-4: t.py::test_fixed_later"].flaky_failures()] == ["boom"]


def test_a_failure_is_titled_by_its_cell_one_row_per_cell(tmp_path: Path) -> None:
    """What JUnit readers print as a test's title (junitparser's name, which EnricoMi's and
    mikepenz's actions and GitHub's annotations show) names the cell; a merge of a merged report
    keeps the titles as they are."""
    a = write(tmp_path / "a.xml", "cpu-1", one("suites/t.py::test_x", "cpu-1", FAILED))
    b = write(tmp_path / "b.xml", "cpu-8", one("suites/t.py::test_x", "cpu-8", FAILED))
    out = tmp_path / "m.xml"
    main(["report", "merge", str(a), str(b), "--out", str(out)])
    failing = sorted(c.name for s in xunit2.JUnitXml.fromfile(str(out)) for c in s if not c.is_passed)
    assert failing == ["cpu-1: suites/t.py::test_x", "cpu-8: suites/t.py::test_x"]
    again = tmp_path / "again.xml"
    main(["report", "merge", str(out), "--out", str(again)])
    assert sorted(c.name for s in xunit2.JUnitXml.fromfile(str(again)) for c in s) == failing
    assert set(by_key(again)) == {("cpu-1", "suites/t.py::test_x"), ("cpu-8", "suites/t.py::test_x")}


def test_same_test_in_other_cell_is_a_different_test(tmp_path: Path) -> None:
    a = write(tmp_path / "a.xml", "cpu-1", one("t.py::test_x", "cpu-1", FAILED))
    b = write(tmp_path / "b.xml", "cpu-8", one("t.py::test_x", "cpu-8", PASSED))
    out = tmp_path / "m.xml"
    assert main(["report", "merge", str(a), str(b), "--out", str(out)]) == 0
    got = by_key(out)
    assert got[("cpu-1", "t.py::test_x")].classification == FAILED
    assert got[("cpu-8", "t.py::test_x")].classification == PASSED


def test_merge_is_idempotent(tmp_path: Path) -> None:
    """Merging the same file twice, or a merged file with its inputs, counts nothing twice."""
    a = write(tmp_path / "in/a.xml", "cpu-4", *make_records("cpu-4"))
    copy = tmp_path / "copy.xml"
    copy.write_bytes(a.read_bytes())
    once, twice = tmp_path / "once.xml", tmp_path / "twice.xml"
    assert main(["report", "merge", str(a), "--out", str(once)]) == 0
    assert main(["report", "merge", str(a), str(copy), str(once), "--out", str(twice)]) == 0
    assert read_records(twice) == read_records(once)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("<testsuites><testsuite name='x'>", "not well-formed XML"),
        ("<html><body>hello</body></html>", "not a JUnit report"),
        (
            "<testsuites><testsuite name='c'><testcase classname='a'/></testsuite></testsuites>",
            "no name",
        ),
        ("", "not well-formed XML"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(tmp_path: Path, capsys, content, expected) -> None:
    good = write(tmp_path / "good.xml", "cpu-4", *make_records("cpu-4"))
    bad = tmp_path / "bad.xml"
    bad.write_text(content)
    out = tmp_path / "out" / "junit.xml"
    assert main(["report", "merge", str(good), str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and expected in err
    assert not out.exists() and not out.parent.exists()


def test_bad_input_leaves_existing_output_alone(tmp_path: Path) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_text("<nope/>")
    out = tmp_path / "junit.xml"
    out.write_text("previous")
    assert main(["report", "merge", str(bad), "--out", str(out)]) == 2
    assert out.read_text() == "previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.xml", "junit.xml"]


def test_missing_path_and_empty_directory_are_usage_errors(tmp_path: Path, capsys) -> None:
    (tmp_path / "empty").mkdir()
    for arg, expected in (
        (tmp_path / "nope.xml", "no such file"),
        (tmp_path / "empty", "no *.xml"),
    ):
        assert main(["report", "merge", str(arg), "--out", str(tmp_path / "o.xml")]) == 2
        assert expected in capsys.readouterr().err
    assert not (tmp_path / "o.xml").exists()


def test_output_inside_input_directory_is_not_merged_into_itself(tmp_path: Path) -> None:
    write(tmp_path / "r/junit/cpu-4.xml", "cpu-4", one("t.py::test_a", "cpu-4", FAILED))
    out = tmp_path / "r/junit.xml"
    for _ in range(2):
        assert main(["report", "merge", str(tmp_path / "r"), "--out", str(out)]) == 0
    (record,) = read_records(out)
    assert len(record.attempts) == 1
