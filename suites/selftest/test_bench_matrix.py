"""``xharness bench matrix`` reads its figures from a run's own files and does the arithmetic
right: wall, cell-seconds (a split cell's parts and a two-process cell's ranks each counted),
idle core-seconds, tests per second. No matrix runs here and no time is asserted."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from harness import bench_matrix
from harness.cli import main
from harness.report import properties as prop
from harness.report.junit import write_cell_xml
from harness.report.records import Attempt, TestRecord
from harness.report.run_figures import RunFiguresError, read_figures

pytestmark = pytest.mark.cell_independent


def a_run(out: Path) -> None:
    """Two cores, 100 s: cpu-1 (one process, 50 s of tests, 5 s overhead), cpu-8 split in two parts
    (80 s of tests, 6 s of the parts' overheads), cpu-2x4 (two processes, 20 s + 2 s), gpu skipped."""
    rows = [
        {"cell": "cpu-1", "skipped": "", "wall": 55.0, "test_time": 50.0, "overhead": 5.0, "launches": 1,
         "counts": {"passed": 10, "skipped": 2}},
        {"cell": "cpu-8", "skipped": "", "wall": 43.0, "test_time": 80.0, "overhead": 6.0, "launches": 2,
         "counts": {"passed": 20, "failed": 1}},
        {"cell": "cpu-2x4", "skipped": "", "wall": 22.0, "test_time": 20.0, "overhead": 2.0, "launches": 1,
         "counts": {"passed": 5}},
        {"cell": "gpu", "skipped": "no GPU", "wall": 0.0, "test_time": 0.0, "overhead": 0.0, "launches": 0,
         "counts": {"skipped": 1}},
    ]
    out.mkdir(parents=True)
    (out / "matrix.json").write_text(json.dumps({"wall": 100.0, "jobs": 2, "cells": rows}))
    for cell, processes in (("cpu-1", "1"), ("cpu-8", "1"), ("cpu-2x4", "2")):
        record = TestRecord(f"t/test_{cell}.py::test", cell, attempts=[Attempt("passed", 1.0)],
                            properties={prop.PROCESSES: processes})
        write_cell_xml(cell, [record], out / "junit" / f"{cell}.xml")


def test_the_figures_are_the_runs_own(tmp_path: Path) -> None:
    a_run(tmp_path / "out")
    figures = read_figures(tmp_path / "out")
    # 55 + 86 + 2 x 22: the parts' walls summed, the two ranks' slots both counted
    assert figures.cell_seconds == pytest.approx(185.0)
    assert figures.idle_core_seconds == pytest.approx(2 * 100.0 - 185.0)
    assert (figures.wall, figures.cores, figures.tests, figures.cells) == (100.0, 2, 38, 3)
    assert figures.tests_per_second == pytest.approx(0.38)
    with pytest.raises(RunFiguresError, match="no run summary"):
        read_figures(tmp_path / "nothing")


def test_the_table_shows_each_run_and_a_run_without_figures(tmp_path: Path) -> None:
    a_run(tmp_path / "out")
    runs = [bench_matrix.Run("working tree", "cold", 1, 1, 104.2, read_figures(tmp_path / "out").as_dict()),
            bench_matrix.Run("HEAD~3", "cold", 1, 2, 3.0, {})]
    lines = bench_matrix.table(runs).splitlines()
    assert lines[0].split()[:3] == ["round", "tree", "state"]
    assert lines[2].split() == ["1", "working", "tree", "cold", "1", "100.0", "104.2", "2", "185.0", "15.0", "38", "0.38"]
    assert lines[3].split() == ["1", "HEAD~3", "cold", "2", "-", "3.0", "-", "-", "-", "-", "-"]


def test_the_trees_alternate_cold_with_cold_and_warm_with_warm() -> None:
    here, there = bench_matrix.Tree("working tree", Path(".")), bench_matrix.Tree("HEAD~1", Path("x"))
    runs = [(r, s, t.label) for r, s, t in bench_matrix.order([here, there], 2, "both")]
    assert runs == [(1, "cold", "working tree"), (1, "cold", "HEAD~1"), (1, "warm", "working tree"),
                    (1, "warm", "HEAD~1"), (2, "cold", "HEAD~1"), (2, "cold", "working tree"),
                    (2, "warm", "HEAD~1"), (2, "warm", "working tree")]
    assert [s for _, s, _ in bench_matrix.order([here], 1, "cold")] == ["cold"]


def test_bad_arguments_are_usage_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "matrix", "--rounds", "0"]) == 2
    assert "--rounds" in capsys.readouterr().err
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "matrix", "--against", "no-such-revision"]) == 2
    assert "no-such-revision" in capsys.readouterr().err
