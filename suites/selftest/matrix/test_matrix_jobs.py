"""``xharness run -j N``: cells at once give the same per-cell results as one at a time, in the
same order, with progress lines that stay readable (whole lines, each naming its cell)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from matrix_helpers import run_matrix, write_matrix, write_suite

from harness.matrix.progress import Progress

# a suite of plain Python tests, the compile cache off: the same on every JAX
pytestmark = pytest.mark.jax_independent

SUITE = {
    "tests/test_mixed.py": '''
        import os
        import pytest

        def test_passes():
            assert os.environ["HARNESS_CELL"]

        def test_fails_in_b():
            assert os.environ["HARNESS_CELL"] != "b", "fails in cell b only"

        @pytest.mark.skipif(os.environ["HARNESS_CELL"] == "c", reason="not in c")
        def test_skipped_in_c():
            pass

        def test_dies_in_a():
            if os.environ["HARNESS_CELL"] == "a":
                os._exit(3)

        def test_after_the_death():
            pass
    ''',
    "more/test_more.py": '''
        import os

        def test_in_a_second_path():
            assert os.environ["HARNESS_DEVICES"] in ("1", "2")

        def test_fails_in_c():
            assert os.environ["HARNESS_CELL"] != "c"
    ''',
}

MATRIX = """
    [defaults]
    paths = ["tests", "more"]

    [cells.a]
    devices = 1
    [cells.b]
    devices = 2
    [cells.c]
    devices = 1
"""


def _outcomes(result, cell: str) -> dict[str, tuple[str, str]]:  # noqa: ANN001
    return {n: (r.classification, r.final.message.splitlines()[0] if r.final.message else "")
            for n, r in result.records(cell).items()}


def test_jobs_give_the_same_results_as_one_cell_at_a_time(tmp_path: Path) -> None:
    write_suite(tmp_path, SUITE)
    write_matrix(tmp_path, MATRIX)
    one = run_matrix(tmp_path, "-j", "1", "--compile-cache", "off")
    (tmp_path / "out").rename(tmp_path / "out-j1")
    one.out = tmp_path / "out-j1"
    three = run_matrix(tmp_path, "-j", "3", "--compile-cache", "off")
    assert one.returncode == three.returncode == 1, one.stdout + one.stderr + three.stdout + three.stderr
    for cell in ("a", "b", "c"):
        assert _outcomes(one, cell) == _outcomes(three, cell), cell
    assert _outcomes(three, "a")["tests/test_mixed.py::test_dies_in_a"][0] == "error"
    assert _outcomes(three, "a")["tests/test_mixed.py::test_after_the_death"][0] == "passed"
    assert _outcomes(three, "b")["tests/test_mixed.py::test_fails_in_b"][0] == "failed"
    assert _outcomes(three, "c")["tests/test_mixed.py::test_skipped_in_c"][0] == "skipped"
    assert _outcomes(three, "c")["more/test_more.py::test_fails_in_c"][0] == "failed"
    # with cells at once, the largest cell (b: most devices) runs as two processes of the same
    # cell, one per test path; its JUnit file holds every test, in the order of the cell's paths
    assert list(three.records("b")) == list(one.records("b"))
    assert "cell b[1/2]" in three.stderr and "cell b[2/2]" in three.stderr
    assert "cell a[" not in three.stderr and "cell b[" not in one.stderr
    # the summary lists the cells in matrix order, whatever order they finished in
    summary = [line.split(":")[0] for line in three.stdout.splitlines() if re.match(r"^[abc]: ", line)]
    assert summary == ["a", "b", "c"]
    assert "up to 3 cell process(es) at once" in three.stderr
    # every progress line is whole and every cell boundary names its cell (or part of it)
    lines = three.stderr.splitlines()
    assert all(line.startswith("[xharness ") for line in lines if line.strip()), three.stderr
    for cell in ("a", "c"):
        assert any(re.search(rf"cell {cell} \(\d/4\) starting", line) for line in lines), three.stderr
        assert any(f"cell {cell} done: " in line for line in lines), three.stderr
    for part in ("1/2", "2/2"):
        assert any(re.search(rf"cell b\[{part}\] \(\d/4\) starting", line) for line in lines), three.stderr
        assert any(f"cell b[{part}] done: " in line for line in lines), three.stderr
    assert any("b: 2 parts: " in line for line in lines), three.stderr
    # a split cell's overhead is its parts' own, never its in-test time (summed over parts that
    # ran at once) taken from its wall time
    import json

    timings = {c["cell"]: c for c in json.loads((three.out / "matrix.json").read_text())["cells"]}
    assert all(c["overhead"] >= 0 for c in timings.values()), timings


def test_jobs_must_be_positive(tmp_path: Path) -> None:
    write_suite(tmp_path, SUITE)
    write_matrix(tmp_path, MATRIX)
    result = run_matrix(tmp_path, "-j", "0")
    assert result.returncode == 2
    assert "-j/--jobs must be 1 or more" in result.stderr


def test_progress_of_cells_running_at_once_names_each_cell() -> None:
    import io

    stream = io.StringIO()
    progress = Progress(3, stream=stream, interval=0.0)
    progress.cell_started("cpu-1", "one device")
    progress.cell_started("cpu-8", "eight devices")
    one, eight = progress.for_cell("cpu-1"), progress.for_cell("cpu-8")
    one.collected(4)
    eight.collected(10)
    eight.test_done("t::a", "passed")
    one.test_done("t::b", "failed")
    eight.note("restarting pytest for the 3 remaining test(s)")
    progress.cell_finished("cpu-1", "1 failed")
    text = stream.getvalue()
    assert "running 2: cpu-1 0/4, cpu-8 1/10; done 0/3, run: 0 failed" in text
    assert "FAILED t::b [cpu-1]" in text
    assert "cell cpu-1 (1/3): 1/4 tests, 1 failed; run: 1 failed" in text
    assert "cpu-8: restarting pytest for the 3 remaining test(s)" in text
    assert "cell cpu-1 done: 1 failed" in text


def test_skipped_cells_are_out_of_the_count() -> None:
    import io

    stream = io.StringIO()
    progress = Progress(4, stream=stream, interval=0.0)
    progress.cell_skipped("gpu", "no GPU")
    progress.cell_skipped("tpu", "no TPU")
    progress.cell_started("cpu-1", "one device")
    progress.cell_started("cpu-8", "eight devices")
    progress.cell_finished("cpu-1", "4 passed")
    progress.for_cell("cpu-8").collected(10)
    text = stream.getvalue()
    assert "cell cpu-1 (1/2) starting" in text and "cell cpu-8 (2/2) starting" in text
    assert (progress.cells_done, progress.total_cells) == (1, 2)
    assert "cell gpu skipped: no GPU" in text


def test_a_split_cells_overhead_is_its_parts_own() -> None:
    """Two parts of 10 s wall with 9 s of tests each, run at once: the cell's wall is 10 s and
    its tests 18 s; its overhead is 2 s, not -8 s."""
    from harness.matrix.config import Cell
    from harness.matrix.schedule import combine as _combine
    from harness.matrix.supervisor import CellResult
    from harness.report.records import Attempt, TestRecord

    cell = Cell(name="big", paths=("a", "b"))
    parts = [
        CellResult(cell, [TestRecord(f"{p}/test_x.py::test_{p}", "big", attempts=[Attempt("passed", 9.0)])], 10.0, 1)
        for p in ("a", "b")
    ]
    whole = _combine(cell, parts, 10.0)
    assert whole.test_time == 18.0 and whole.wall == 10.0
    assert whole.overhead == 2.0
    assert parts[0].overhead == 1.0


def test_cells_of_several_processes_start_first_then_the_longest() -> None:
    """A two-process cell left for the end of a two-slot run waits for the last one-process cell
    while the other slot idles; started first, it takes both slots while they are free."""
    from harness.matrix.config import Cell
    from harness.matrix.schedule import start_order

    cells = [Cell(name="one"), Cell(name="eight", devices=8), Cell(name="two", processes=2, devices=4),
             Cell(name="short")]
    last_run = {"one": 40.0, "eight": 90.0, "two": 16.0, "short": 20.0}
    assert [c.name for c in start_order(cells, 2, last_run)] == ["two", "eight", "one", "short"]
    # a cell the last run did not have goes before the rest of its kind (nothing says it is short)
    assert [c.name for c in start_order(cells, 2, {"eight": 90.0})] == ["two", "one", "short", "eight"]
    assert [c.name for c in start_order(cells, 2, {})][:2] == ["two", "eight"]
    assert [c.name for c in start_order(cells, 1, {})] == ["one", "eight", "two", "short"]
    # with one slot a two-process cell takes the one slot, like any cell: only the times order them
    assert [c.name for c in start_order(cells, 1, last_run)] == ["eight", "one", "short", "two"]


def test_a_cell_split_last_time_is_still_long_enough_to_split(tmp_path: Path) -> None:
    """A split cell's wall is about half its length; judged by it, the next run would run the
    cell in one process and the one after would split it again. Its length is its test time
    and one start-up."""
    from harness.matrix.config import Cell
    from harness.matrix.schedule import long_cells as _long_cells
    from harness.matrix.schedule import previous_walls as _previous_walls

    cells = [Cell(name=n) for n in ("cpu-1", "cpu-3", "cpu-4", "cpu-8")]
    matrix_json = tmp_path / "matrix.json"
    runs = {  # the default run as measured: cpu-8 split in two parts, then in one
        "split": {"cpu-8": (27.6, 50.1, 5.0, 2)},
        "whole": {"cpu-8": (54.9, 51.8, 3.1, 1)},
    }
    for cpu8 in runs.values():
        rows = [{"cell": n, "wall": w, "test_time": w - 2.5, "overhead": 2.5, "launches": 1}
                for n, w in (("cpu-1", 18.9), ("cpu-3", 19.5), ("cpu-4", 20.3))]
        wall, test_time, overhead, launches = cpu8["cpu-8"]
        rows.append({"cell": "cpu-8", "wall": wall, "test_time": test_time, "overhead": overhead, "launches": launches})
        matrix_json.write_text(json.dumps({"wall": 80.0, "jobs": 2, "cells": rows}))
        previous = _previous_walls(matrix_json)
        assert previous["cpu-8"] > 50.0 and previous["cpu-1"] == 18.9
        assert _long_cells(cells, 2, previous) == {"cpu-8"}
