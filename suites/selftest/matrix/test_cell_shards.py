"""Which cells are split over two processes and by what: a long single-process cell of several
paths, when cells run at once, into parts by its test files where their seconds are known, else by
its paths; never a cell of several processes, a release's cell, an accelerator's, a cell of one
path, a run of one slot, or a run given its own paths.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.matrix.config import Cell, Matrix
from harness.matrix.schedule import shards
from harness.matrix.supervisor import RunSettings

pytestmark = pytest.mark.cell_independent


@pytest.fixture
def root(tmp_path: Path) -> Path:
    for name in ("a/test_1.py", "a/test_2.py", "a/test_3.py", "b/test_4.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("def test_it():\n    pass\n")
    return tmp_path


def _settings(root: Path, *pytest_args: str) -> RunSettings:
    return RunSettings(matrix=Matrix(root / "matrix.toml", root, {}), out_dir=root / "out",
                       pytest_args=tuple(pytest_args))


def _parts(cells: list[Cell]) -> list[tuple[str, ...]]:
    return [c.paths for c in cells]


def test_a_long_cell_is_split_by_its_files_seconds(root: Path) -> None:
    cell = Cell("c", devices=8, paths=("a", "b"))
    times = {"a/test_1.py": 10.0, "a/test_2.py": 3.0, "a/test_3.py": 3.0, "b/test_4.py": 5.0}
    parts = shards(cell, _settings(root), 2, times)
    assert _parts(parts) == [("a/test_1.py",), ("a/test_2.py", "a/test_3.py", "b/test_4.py")]
    assert all(p.name == "c" and p.devices == 8 for p in parts)


def test_without_the_files_seconds_a_cell_is_split_by_its_paths(root: Path) -> None:
    cell = Cell("c", paths=("a", "b"))
    assert _parts(shards(cell, _settings(root), 2, {})) == [("a",), ("b",)]
    assert _parts(shards(cell, _settings(root), 2, {"a": 1.0, "b": 9.0})) == [("b",), ("a",)]
    # one file known and one not: by the paths all the same
    two = Cell("c", paths=("b", "a/test_1.py"))
    assert _parts(shards(two, _settings(root), 2, {"b/test_4.py": 4.0})) == [("b/test_4.py",), ("a/test_1.py",)]


@pytest.mark.parametrize(("cell", "jobs"), [
    (Cell("c", paths=("a", "b")), 1),
    (Cell("c", devices=4, processes=2, paths=("a", "b")), 2),
    (Cell("c", runtime_name="torch_xla", release="2.9.0", paths=("a", "b")), 2),
    (Cell("c", backend="gpu", paths=("a", "b")), 2),
    (Cell("c", paths=("a",)), 2),
])
def test_cells_that_stay_whole(root: Path, cell: Cell, jobs: int) -> None:
    assert shards(cell, _settings(root), jobs, {"a/test_1.py": 9.0, "a/test_2.py": 9.0}) == [cell]


def test_a_run_given_its_own_paths_splits_nothing(root: Path) -> None:
    cell = Cell("c", paths=("a", "b"))
    assert shards(cell, _settings(root, "a/test_1.py"), 2, {}) == [cell]
    assert len(shards(cell, _settings(root, "-k", "a"), 2, {})) == 2  # an option's value is no path
