"""A run with no earlier run of its own (a fresh clone) plans from the committed durations: the
longest cells start first and a long cell is split by its files' known seconds, so no slot is
left with a long cell at the end. The last run, when there is one, still decides for the cells
it had. Pure decisions over small made-up matrices: no cell runs here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from matrix_helpers import run_matrix, write_matrix, write_suite

from harness.cli import main
from harness.matrix import durations, schedule, test_files
from harness.matrix.config import Cell, Matrix, load_matrix
from harness.matrix.durations import CellDurations, Durations, DurationsError
from harness.matrix.supervisor import RunSettings
from harness.report.junit import write_cell_xml
from harness.report.records import Attempt, TestRecord

pytestmark = [pytest.mark.cell_independent, pytest.mark.jax_independent]
ROOT = Path(__file__).resolve().parents[3]


def tree(root: Path, files: dict[str, float] | list[str]) -> None:
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("def test_x():\n    pass\n")


#: the shapes say the opposite of the seconds: cpu-8 guessed longest, cpu-1 longest in fact
CELLS = [Cell(name="cpu-8", devices=8, paths=("a",)), Cell(name="cpu-1", devices=1, paths=("a",)),
         Cell(name="cpu-4", devices=4, paths=("a",))]
MEASURED = Durations({
    "cpu-1": CellDurations(3.0, {"a/test_1.py": 30.0, "a/test_2.py": 4.0}),
    "cpu-4": CellDurations(3.0, {"a/test_1.py": 10.0, "a/test_2.py": 10.0}),
    "cpu-8": CellDurations(3.0, {"a/test_1.py": 2.0, "a/test_2.py": 3.0}),
})


def test_a_cold_run_starts_the_longest_cells_by_their_durations(tmp_path: Path) -> None:
    """With no last run, the order is the durations' (cpu-1 37 s, cpu-4 23 s, cpu-8 8 s), not
    the shapes' guess (cpu-8 first, cpu-1 last: the long cell alone at the end). Ignoring the
    durations gives the guess, and fails here."""
    tree(tmp_path, ["a/test_1.py", "a/test_2.py"])
    known = schedule.estimate(CELLS, {}, {}, MEASURED, tmp_path)
    assert known.lengths == {"cpu-1": 37.0, "cpu-4": 23.0, "cpu-8": 8.0}
    assert set(known.sources.values()) == {schedule.DURATIONS}
    assert [c.name for c in schedule.start_order(CELLS, 2, known.lengths)] == ["cpu-1", "cpu-4", "cpu-8"]
    assert schedule.long_cells(CELLS, 2, known.lengths) == {"cpu-1", "cpu-4"}
    # what the same run did without them: the guess
    blind = schedule.estimate(CELLS, {}, {}, Durations(), tmp_path)
    assert blind.lengths == {}
    assert [c.name for c in schedule.start_order(CELLS, 2, blind.lengths)] == ["cpu-8", "cpu-4", "cpu-1"]


def test_a_long_cell_is_split_by_its_files_known_seconds(tmp_path: Path) -> None:
    """cpu-8's two directories hold one long file and three short ones: split by directory (or
    by alternating files) one part would take 50 s and the other 12 s; by the files' seconds the
    parts take 30 s and 32 s."""
    seconds = {"slow/test_big.py": 30.0, "slow/test_small.py": 20.0, "fast/test_a.py": 6.0, "fast/test_b.py": 6.0}
    tree(tmp_path, seconds)
    cell = Cell(name="cpu-8", devices=8, paths=("slow", "fast"))
    measured = Durations({"cpu-8": CellDurations(3.0, seconds)})
    known = schedule.estimate([cell], {}, {}, measured, tmp_path)
    settings = RunSettings(matrix=Matrix(tmp_path / "matrix.toml", tmp_path, {"cpu-8": cell}), out_dir=tmp_path)
    parts = schedule.shards(cell, settings, 2, known.times["cpu-8"])
    loads = sorted(sum(seconds[f] for f in part.paths) for part in parts)
    assert loads == [30.0, 32.0]
    assert sorted(f for part in parts for f in part.paths) == sorted(seconds)
    # without seconds the cell is split by its paths, as before: one part per directory
    assert [p.paths for p in schedule.shards(cell, settings, 2, {})] == [("slow",), ("fast",)]


def test_the_last_run_wins_and_the_durations_fill_in_at_its_scale(tmp_path: Path) -> None:
    """cpu-1 and cpu-4 ran last time, at twice the durations' seconds (a slower machine); cpu-8
    did not: it counts its durations doubled, so it is compared with the others fairly."""
    tree(tmp_path, ["a/test_1.py", "a/test_2.py"])
    previous = {"cpu-1": 74.0, "cpu-4": 46.0}
    times = {"cpu-1": {"a/test_1.py": 60.0, "a/test_2.py": 8.0}}
    known = schedule.estimate(CELLS, previous, times, MEASURED, tmp_path)
    assert known.lengths == {"cpu-1": 74.0, "cpu-4": 46.0, "cpu-8": 16.0}
    assert known.times["cpu-1"] == times["cpu-1"]
    assert known.times["cpu-8"] == {"a/test_1.py": 4.0, "a/test_2.py": 6.0}
    assert known.sources == {"cpu-1": schedule.LAST_RUN, "cpu-4": schedule.LAST_RUN, "cpu-8": schedule.DURATIONS}


def test_the_scale_comes_from_any_known_cell_and_a_cell_of_no_seconds_sets_none(tmp_path: Path) -> None:
    """The durations' seconds are brought to the last run's scale whatever their size (a fast
    machine's cell of half a second), and a cell they give no seconds at all leaves them as they are."""
    tree(tmp_path, ["a/test_1.py", "a/test_2.py"])
    small = Durations({"cpu-1": CellDurations(0.0, {"a/test_1.py": 0.25, "a/test_2.py": 0.25}),
                       "cpu-8": CellDurations(1.0, {"a/test_1.py": 1.0, "a/test_2.py": 2.0})})
    known = schedule.estimate(CELLS[:2], {"cpu-1": 2.0}, {}, small, tmp_path)
    assert known.lengths == {"cpu-1": 2.0, "cpu-8": 16.0}  # 0.5 s then took 2 s: four times
    empty = Durations({"cpu-1": CellDurations(0.0, {"a/test_1.py": 0.0, "a/test_2.py": 0.0}),
                       "cpu-8": CellDurations(1.0, {"a/test_1.py": 1.0, "a/test_2.py": 2.0})})
    assert schedule.estimate(CELLS[:2], {"cpu-1": 2.0}, {}, empty, tmp_path).lengths == {"cpu-1": 2.0, "cpu-8": 4.0}


def test_a_file_or_cell_the_durations_do_not_know_counts_their_mean(tmp_path: Path) -> None:
    tree(tmp_path, ["a/test_1.py", "a/test_2.py", "a/test_new.py"])
    files = ("a/test_1.py", "a/test_2.py", "a/test_new.py")
    assert MEASURED.file_seconds("cpu-1", files)["a/test_new.py"] == 17.0  # cpu-1's mean
    assert MEASURED.length("cpu-new", ("a/test_1.py",)) == 3.0 + 59.0 / 6  # every file's mean
    assert Durations().length("cpu-1", files) == durations.DEFAULT_STARTUP + 3 * durations.DEFAULT_FILE


def test_a_cells_files_leave_out_what_it_ignores(tmp_path: Path) -> None:
    tree(tmp_path, ["s/test_a.py", "s/test_teeth.py", "s/sub/test_b.py", "s/helper.py", "t/test_c.py"])
    cell = Cell(name="c", paths=("s", "t/test_c.py"), pytest_args=("--ignore=s/test_teeth.py",))
    assert test_files.cell_files(cell, tmp_path) == ("s/test_a.py", "s/sub/test_b.py", "t/test_c.py")
    ignored_dir = Cell(name="c", paths=("s",), pytest_args=("--ignore=s/sub",))
    assert test_files.cell_files(ignored_dir, tmp_path) == ("s/test_a.py", "s/test_teeth.py")
    # an ignored directory named with a trailing slash, whatever its name ends in
    tree(tmp_path, ["s/XLA_X/test_d.py"])
    cell = Cell(name="c", paths=("s",), pytest_args=("--ignore=s/XLA_X/", "--ignore=s/test_teeth.py"))
    assert test_files.cell_files(cell, tmp_path) == ("s/test_a.py", "s/sub/test_b.py")


def test_the_file_round_trips_and_a_broken_one_is_named(tmp_path: Path) -> None:
    path = tmp_path / durations.FILE_NAME
    assert not durations.load(path)  # no file: nothing known
    path.write_text(durations.dumps(MEASURED))
    assert durations.load(path) == MEASURED
    for text, said in (("{", "cannot read"), ('{"version": 9, "cells": {}}', "version 9"),
                       ('{"version": 1, "cells": {"c": {"startup": -1, "files": {}}}}', "not a durations file"),
                       ('{"version": 1}', "missing field")):
        path.write_text(text)
        with pytest.raises(DurationsError, match=said) as caught:
            durations.load(path)
        assert str(path) in str(caught.value)


def a_run(out: Path) -> None:
    """A run's reports: cpu-1 in one process, cpu-8 split in two parts (two launches)."""
    rows = [{"cell": "cpu-1", "skipped": "", "wall": 14.0, "test_time": 11.0, "overhead": 3.0, "launches": 1,
             "counts": {"passed": 3}},
            {"cell": "cpu-8", "skipped": "", "wall": 20.0, "test_time": 32.0, "overhead": 8.0, "launches": 2,
             "counts": {"passed": 2}},
            {"cell": "gpu", "skipped": "no GPU", "wall": 0.0, "test_time": 0.0, "overhead": 0.0, "launches": 0,
             "counts": {"skipped": 1}}]
    out.mkdir(parents=True)
    (out / "matrix.json").write_text(json.dumps({"wall": 30.0, "jobs": 2, "cells": rows}))
    records = {"cpu-1": [("a/test_1.py::test_x", 5.0), ("a/test_1.py::test_y", 4.0), ("a/test_2.py::test_z", 2.0)],
               "cpu-8": [("a/test_1.py::test_x", 30.0), ("a/test_2.py::test_z", 2.0)]}
    for cell, tests in records.items():
        write_cell_xml(cell, [TestRecord(n, cell, attempts=[Attempt("passed", s)]) for n, s in tests],
                       out / "junit" / f"{cell}.xml")


def test_a_runs_reports_give_each_files_seconds_and_the_start_up(tmp_path: Path) -> None:
    a_run(tmp_path / "out")
    found = durations.from_run(tmp_path / "out", {"cpu-1": ("a/test_1.py", "a/test_2.py", "a/test_3.py")})
    assert found.cells == {
        "cpu-1": CellDurations(3.0, {"a/test_1.py": 9.0, "a/test_2.py": 2.0, "a/test_3.py": 0.0}),
        "cpu-8": CellDurations(4.0, {"a/test_1.py": 30.0, "a/test_2.py": 2.0}),
    }
    with pytest.raises(DurationsError, match="no run there"):
        durations.from_run(tmp_path / "nothing")


def test_the_command_refreshes_the_runs_cells_and_keeps_the_others(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree(tmp_path, ["a/test_1.py", "a/test_2.py"])
    matrix = tmp_path / "ci" / "matrix.toml"
    matrix.parent.mkdir()
    matrix.write_text('root = ".."\n[defaults]\npaths = ["a"]\n[cells.cpu-1]\n[cells.cpu-8]\ndevices = 8\n')
    target = tmp_path / "ci" / durations.FILE_NAME
    assert durations.durations_path(load_matrix(matrix)) == target
    target.write_text(durations.dumps(Durations({"cpu-3": CellDurations(2.0, {"a/test_1.py": 1.0})})))
    a_run(tmp_path / "out")
    assert main(["durations", "--from", str(tmp_path / "out"), "--matrix", str(matrix)]) == 0
    written = durations.load(target)
    assert sorted(written.cells) == ["cpu-1", "cpu-3", "cpu-8"]
    assert written.cells["cpu-1"].files == {"a/test_1.py": 9.0, "a/test_2.py": 2.0}
    assert "kept (cpu-3)" in capsys.readouterr().out
    assert main(["durations", "--from", str(tmp_path / "out"), "--matrix", str(matrix), "--replace"]) == 0
    assert sorted(durations.load(target).cells) == ["cpu-1", "cpu-8"]
    assert main(["durations", "--from", str(tmp_path / "none"), "--matrix", str(matrix)]) == 2
    assert "no run there" in capsys.readouterr().err


def test_run_refuses_a_durations_file_it_cannot_use(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    matrix = tmp_path / "matrix.toml"
    matrix.write_text('root = "."\n[cells.cpu-1]\n')
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    for given, said in ((tmp_path / "absent.json", "no such file"), (bad, "not a durations file")):
        code = main(["run", "--matrix", str(matrix), "--out", str(tmp_path / "out"), "--durations", str(given)])
        assert code == 2
        assert said in capsys.readouterr().err


def test_the_default_matrix_has_durations_for_every_cpu_cell() -> None:
    """The committed file plans the main job: a CPU cell missing from it would be planned by the
    mean, and a file that does not load would plan nothing."""
    matrix = load_matrix(ROOT / "ci" / "matrix.toml")
    committed = durations.load(durations.durations_path(matrix))
    cpu = {name for name, cell in matrix.cells.items() if cell.backend == "cpu"}
    assert cpu <= set(committed.cells)


def test_a_run_with_no_earlier_run_starts_cells_in_the_durations_order(tmp_path: Path) -> None:
    """End to end: the matrix's durations file is read by ``xharness run`` itself. By their shapes
    ``big`` (8 devices) would start first; the file says ``b`` then ``c`` are longer."""
    write_suite(tmp_path, {"tests/test_one.py": "def test_one():\n    pass\n"})
    write_matrix(tmp_path, '[defaults]\npaths = ["tests"]\n[cells.big]\ndevices = 8\n[cells.b]\n[cells.c]\n')
    seconds = {"big": 5.0, "b": 60.0, "c": 30.0}
    (tmp_path / durations.FILE_NAME).write_text(durations.dumps(Durations(
        {name: CellDurations(3.0, {"tests/test_one.py": s}) for name, s in seconds.items()})))
    result = run_matrix(tmp_path, "-j", "2", "--compile-cache", "off")
    assert result.returncode == 0, result.stdout + result.stderr
    started = [line.split("cell ")[1].split(" ")[0] for line in result.stderr.splitlines() if " starting: " in line]
    assert started == ["b", "c", "big"], result.stderr
    assert f"start order and splits from {tmp_path / durations.FILE_NAME}" in result.stderr
