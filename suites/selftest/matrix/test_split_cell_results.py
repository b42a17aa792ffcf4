"""A cell split over processes is one result again: every record of every part, none twice, in
the cell's path order, its launches and overheads summed, an interrupt in any part kept; and the
length a split cell is remembered by is what it takes in one process, so the next run splits it
again.
"""

from __future__ import annotations

import pytest

from harness.matrix.config import Cell
from harness.matrix.schedule import combine, one_process_length, owning_path
from harness.matrix.supervisor import NO_TESTS_ID, CellResult
from harness.report.records import PASSED, Attempt, TestRecord

pytestmark = pytest.mark.cell_independent


def _record(nodeid: str, cell: str = "part", file: str = "", duration: float = 1.0) -> TestRecord:
    record = TestRecord(nodeid=nodeid, cell=cell, file=file)
    record.attempts.append(Attempt(PASSED, duration=duration))
    return record


def test_the_parts_records_come_back_in_the_cells_path_order_under_the_cells_name() -> None:
    cell = Cell("c", paths=("suites/b", "suites/a/test_x.py", "suites/a"))
    first = CellResult(cell, [_record("suites/a/test_y.py::t1"), _record("suites/b/test_z.py::t2"),
                              _record("elsewhere/test_w.py::t3")], wall=5.0, launches=1, parts_overhead=None)
    second = CellResult(cell, [_record("suites/a/test_x.py::t4", file="suites/a/test_x.py"),
                               _record("suites/b/test_z.py::t5")], wall=4.0, launches=2, interrupted=True)
    whole = combine(cell, [first, second], wall=6.0)
    assert [r.nodeid.split("::")[1] for r in whole.records] == ["t2", "t5", "t4", "t1", "t3"]
    assert {r.cell for r in whole.records} == {"c"} and whole.cell is cell
    assert whole.wall == 6.0 and whole.launches == 3 and whole.interrupted
    assert whole.overhead == pytest.approx(first.overhead + second.overhead)
    assert combine(cell, [first], wall=6.0).interrupted is False


def test_a_part_that_selected_nothing_leaves_no_record_unless_no_part_selected_anything() -> None:
    cell = Cell("c", paths=("suites",))
    empty = CellResult(cell, [_record(NO_TESTS_ID)], wall=1.0, launches=1)
    full = CellResult(cell, [_record("suites/test_a.py::t")], wall=1.0, launches=1)
    assert [r.nodeid for r in combine(cell, [empty, full], 2.0).records] == ["suites/test_a.py::t"]
    both_empty = combine(cell, [empty, CellResult(cell, [_record(NO_TESTS_ID)], 1.0, 1)], 2.0)
    assert [r.nodeid for r in both_empty.records] == [NO_TESTS_ID]


def test_a_split_cell_of_test_files_puts_class_tests_back_in_their_files_order() -> None:
    cell = Cell("c", paths=("suites/test_b.py", "suites/test_a.py"))
    first = CellResult(cell, [_record("suites/test_a.py::TestK::t1"), _record("suites/test_a.py::t2", file="lib/f.py")],
                       wall=1.0, launches=1)
    second = CellResult(cell, [_record("suites/test_b.py::TestL::t3")], wall=1.0, launches=1)
    assert [r.nodeid.rsplit("::", 1)[1] for r in combine(cell, [first, second], 2.0).records] == ["t3", "t1", "t2"]


def test_a_directory_whose_name_ends_in_a_capital_x_owns_its_files() -> None:
    assert owning_path(("suites/jaX",), "suites/jaX/test_a.py") == "suites/jaX"


def test_a_file_belongs_to_the_first_path_that_holds_it_and_not_to_a_prefix() -> None:
    paths = ("suites/a/", "suites/ab", "suites/a/test_x.py")
    assert owning_path(paths, "suites/a/test_x.py") == "suites/a/"
    assert owning_path(paths, "suites/ab/test_y.py") == "suites/ab"
    assert owning_path(paths, "suites/abc/test_z.py") is None
    assert owning_path(("suites/a/test_x.py",), "suites/a/test_x.py") == "suites/a/test_x.py"


def test_a_split_cell_is_remembered_by_its_length_in_one_process() -> None:
    assert one_process_length({"wall": 30.0}) == 30.0
    assert one_process_length({"wall": 30.0, "launches": 1, "test_time": 20.0, "overhead": 8.0}) == 30.0
    # two parts: 50 s of tests and two start-ups of 5 s; in one process, 50 s and one start-up
    assert one_process_length({"wall": 31.0, "launches": 2, "test_time": 50.0, "overhead": 10.0}) == 55.0
    assert one_process_length({"wall": 31.0, "launches": 2, "test_time": 50.0}) == 31.0
    assert one_process_length({"wall": 12.0, "launches": None}) == 12.0
