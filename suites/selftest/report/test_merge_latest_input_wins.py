"""Merging one test's results from several inputs: order of attempts, location, inputs once."""

from __future__ import annotations

from pathlib import Path

from harness.report.junit import read_records, write_cell_xml
from harness.report.merge import combine, expand_inputs, merge_files
from harness.report.records import FAILED, PASSED, Attempt, TestRecord

NODE = "suites/t.py::test_a"


def _rec(*attempts: Attempt, file: str = "", line: int | None = None) -> TestRecord:
    return TestRecord(NODE, "cpu-4", file, line, list(attempts))


def test_later_input_final_attempt_decides_even_if_seen_before() -> None:
    passed = Attempt(PASSED, 0.5)
    first_fail = Attempt(FAILED, 0.25, "assert 1 == 2")
    second_fail = Attempt(FAILED, 0.75, "assert 3 == 4")
    (merged,) = combine([_rec(passed), _rec(first_fail, second_fail, passed)])
    assert merged.attempts == [first_fail, second_fail, passed]


def test_later_input_without_attempts_changes_no_outcome() -> None:
    failed = Attempt(FAILED, 0.25, "assert 1 == 2")
    (merged,) = combine([_rec(failed, file="suites/t.py", line=3), _rec()])
    assert merged.attempts == [failed]
    assert (merged.file, merged.line) == ("suites/t.py", 3)


def test_location_comes_from_the_latest_input_that_has_one() -> None:
    only = combine([_rec(Attempt(PASSED), file="suites/t.py", line=3)])
    assert [(r.file, r.line) for r in only] == [("suites/t.py", 3)]
    moved = combine(
        [
            _rec(Attempt(PASSED), file="suites/t.py", line=3),
            _rec(Attempt(PASSED, 1.0), file="suites/moved/t.py", line=12),
            _rec(Attempt(PASSED, 2.0)),
        ]
    )
    assert [(r.file, r.line) for r in moved] == [("suites/moved/t.py", 12)]


def test_a_file_named_directly_and_through_its_directory_is_read_once(tmp_path: Path) -> None:
    (tmp_path / "junit").mkdir()
    cell = tmp_path / "junit" / "cpu-4.xml"
    write_cell_xml("cpu-4", [_rec(Attempt(PASSED))], cell)
    assert expand_inputs([tmp_path / "junit", cell, tmp_path / "junit"]) == [cell]


def test_merging_into_the_input_directory_ignores_the_previous_merge(tmp_path: Path) -> None:
    cell = tmp_path / "cpu-4.xml"
    out = tmp_path / "merged.xml"
    write_cell_xml(
        "cpu-4", [_rec(Attempt(FAILED, 0.25, "assert 1 == 2"), file="suites/t.py")], cell
    )
    merge_files([tmp_path], out)
    write_cell_xml("cpu-4", [_rec(Attempt(PASSED, 0.5), file="suites/t.py")], cell)
    merge_files([tmp_path], out)
    (back,) = read_records(out)
    assert (back.nodeid, back.attempts) == (NODE, [Attempt(PASSED, 0.5)])
