"""What a run remembers of the last one in its output directory, to start the long cells first and
split them: each cell's length in one process from ``matrix.json`` (a skipped cell has none, a split
one its length unsplit), and each test path's seconds from the cell's JUnit, every record counted
under the path that holds its file; an unreadable file only loses the estimate.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.matrix.config import Cell
from harness.matrix.schedule import previous_path_times, previous_walls
from harness.report.junit import write_cell_xml
from harness.report.records import PASSED, Attempt, TestRecord

pytestmark = pytest.mark.cell_independent


def test_each_run_cell_is_remembered_by_its_length_in_one_process(tmp_path: Path) -> None:
    path = tmp_path / "matrix.json"
    path.write_text(json.dumps({"cells": [
        {"cell": "cpu-1", "wall": 37.0},
        {"cell": "cpu-8", "wall": 60.0, "launches": 2, "test_time": 100.0, "overhead": 8.0},
        {"cell": "gpu", "wall": 0.0, "skipped": "no GPU here"},
        {"cell": 4, "wall": "12.5"},
    ]}))
    assert previous_walls(path) == {"cpu-1": 37.0, "cpu-8": 104.0, "4": 12.5}


@pytest.mark.parametrize("text", [
    None, "not json", "[]", '{"cells": [{"wall": 1.0}]}', '{"cells": [{"cell": "c"}]}',
    '{"cells": [{"cell": "c", "wall": "slow"}]}', '{"cells": 3}',
])
def test_a_missing_or_unreadable_last_run_is_no_estimate(tmp_path: Path, text: str | None) -> None:
    path = tmp_path / "matrix.json"
    if text is not None:
        path.write_text(text)
    assert previous_walls(path) == {}
    assert previous_walls(tmp_path / "matrix.json") == {}


def test_a_run_without_cells_remembers_nothing(tmp_path: Path) -> None:
    (tmp_path / "matrix.json").write_text("{}")
    assert previous_walls(tmp_path / "matrix.json") == {}


def _record(nodeid: str, seconds: float, file: str = "") -> TestRecord:
    record = TestRecord(nodeid=nodeid, cell="c", file=file)
    record.attempts.append(Attempt(PASSED, duration=seconds))
    return record


def test_each_paths_seconds_are_the_sum_of_its_records(tmp_path: Path) -> None:
    junit = tmp_path / "c.xml"
    write_cell_xml("c", [
        _record("suites/a/test_x.py::t1", 1.5),
        _record("suites/a/test_x.py::t2", 2.0),
        _record("suites/b/test_y.py::t3", 4.0),
        _record("suites/b/test_y.py::t4", 0.25, file="suites/b/test_y.py"),
        _record("other/test_z.py::t5", 9.0),
        # a record whose file is outside the cell's paths (a fixture's) counts under its test's path
        _record("suites/a/test_x.py::t6", 0.5, file="lib/fixtures.py"),
    ], junit)
    cell = Cell("c", paths=("suites/a", "suites/b", "suites/empty"))
    assert previous_path_times(cell, junit) == pytest.approx({"suites/a": 4.0, "suites/b": 4.25,
                                                              "suites/empty": 0.0})


def test_no_junit_or_an_unreadable_one_is_no_estimate(tmp_path: Path) -> None:
    cell = Cell("c", paths=("suites",))
    assert previous_path_times(cell, tmp_path / "missing.xml") == {}
    broken = tmp_path / "broken.xml"
    broken.write_text("<testsuites><testsuite")
    assert previous_path_times(cell, broken) == {}


def test_a_cell_of_test_files_counts_each_record_under_its_file(tmp_path: Path) -> None:
    """A cell's paths may be files: a test in a class, a test whose reported file is a fixture's,
    and a node id written from another root are each counted under the file that holds them."""
    junit = tmp_path / "c.xml"
    write_cell_xml("c", [
        _record("suites/test_a.py::TestK::test_m", 1.0),
        _record("suites/test_a.py::TestK::test_n", 2.0),
        _record("suites/test_a.py::TestK::test_q", 4.0, file="lib/fixtures.py"),
        _record("suites/test_b.py::test_o", 0.5),
        _record("test_b.py::test_p", 0.25, file="suites/test_b.py"),
    ], junit)
    cell = Cell("c", paths=("suites/test_a.py", "suites/test_b.py"))
    assert previous_path_times(cell, junit) == pytest.approx({"suites/test_a.py": 7.0, "suites/test_b.py": 0.75})


def test_a_cell_split_before_launches_were_recorded_is_remembered_by_its_wall(tmp_path: Path) -> None:
    (tmp_path / "matrix.json").write_text(json.dumps({"cells": [
        {"cell": "old", "wall": 10.0, "test_time": 8.0, "overhead": 2.0},
        {"cell": "split", "wall": 6.0, "test_time": 8.0, "overhead": 2.0, "launches": 2},
    ]}))
    assert previous_walls(tmp_path / "matrix.json") == {"old": 10.0, "split": 9.0}
