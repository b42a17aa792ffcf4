"""A suite split by its test files loses no file and adds none: the files it is split into are
the ones pytest itself collects from the directory, under each way a project can configure
``python_files``, with the directories pytest does not recurse into left out.

Checked against pytest's own collection, so that a wrong pattern, a wrong ini-file order or a
directory walked that pytest skips shows up as a file run twice or never.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.matrix import test_files

pytestmark = [pytest.mark.cell_independent, pytest.mark.jax_independent]

LAYOUT = (
    "tests/test_a.py",
    "tests/b_test.py",
    "tests/check_c.py",
    "tests/helper.py",
    "tests/deep/test_d.py",
    "tests/deep/deeper/test_e.py",
    "tests/build/test_built.py",
    "tests/dist/test_dist.py",
    "tests/venv/test_venv.py",
    "tests/node_modules/test_node.py",
    "tests/.hidden/test_hidden.py",
    "tests/__pycache__/test_cached.py",
    "tests/thing.egg/test_egg.py",
    "tests/CVS/test_cvs.py",
    "tests/test_data.txt",
    "tests/test_notes.pyi",
)


def _tree(root: Path, config: dict[str, str] | None = None) -> None:
    for name in LAYOUT:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("def test_it():\n    pass\n\ndef check_it():\n    pass\n")
    for name, text in (config or {}).items():
        (root / name).write_text(text)


def _pytest_files(root: Path, path: str) -> set[str]:
    """The files pytest collects from ``path``, run from ``root`` with no plugin of ours."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xharness", "-p", "no:cacheprovider",
         path],
        cwd=root, capture_output=True, text=True, timeout=120,
    )
    return {line.split("::")[0] for line in done.stdout.splitlines() if "::" in line}


CONFIGS = {
    "none": {},
    "pytest.ini": {"pytest.ini": "[pytest]\npython_files = check_*.py test_*.py\n"},
    "pyproject.toml": {"pyproject.toml": '[tool.pytest.ini_options]\npython_files = ["check_*.py"]\n'},
    "pyproject string": {"pyproject.toml": '[tool.pytest.ini_options]\npython_files = "check_*.py b_*.py"\n'},
    "tox.ini": {"tox.ini": "[pytest]\npython_files = *_test.py\n"},
    "setup.cfg": {"setup.cfg": "[tool:pytest]\npython_files = check_*.py\n"},
    # the first file that configures pytest wins: pytest.ini over pyproject.toml
    "pytest.ini first": {"pytest.ini": "[pytest]\npython_files = b_*.py\n",
                         "pyproject.toml": '[tool.pytest.ini_options]\npython_files = ["check_*.py"]\n'},
    # a pyproject.toml without pytest's table does not configure it: tox.ini's patterns hold
    "pyproject without pytest": {"pyproject.toml": "[tool.other]\nx = 1\n",
                                 "tox.ini": "[pytest]\npython_files = check_*.py\n"},
    # an ini file that configures pytest without python_files means pytest's default
    "pytest.ini without patterns": {"pytest.ini": "[pytest]\nxfail_strict = true\n",
                                    "setup.cfg": "[tool:pytest]\npython_files = check_*.py\n"},
    # a setup.cfg without pytest's section configures nothing
    "setup.cfg of another tool": {"setup.cfg": "[flake8]\nmax-line-length = 100\n"},
}


@pytest.mark.parametrize("config", list(CONFIGS), ids=list(CONFIGS))
def test_the_files_below_a_directory_are_the_ones_pytest_collects(tmp_path: Path, config: str) -> None:
    _tree(tmp_path, CONFIGS[config])
    found = test_files.files_below("tests", tmp_path)
    assert set(found) == _pytest_files(tmp_path, "tests")
    assert len(found) == len(set(found))


def test_files_come_in_pytests_order_a_directorys_files_before_its_subdirectories(tmp_path: Path) -> None:
    _tree(tmp_path)
    assert test_files.files_below("tests", tmp_path) == (
        "tests/b_test.py", "tests/test_a.py", "tests/deep/test_d.py", "tests/deep/deeper/test_e.py",
    )


def test_a_file_is_itself_and_a_foreign_suite_is_split_only_when_it_is_one_directory(tmp_path: Path) -> None:
    _tree(tmp_path)
    assert test_files.files_below("tests/test_a.py", tmp_path) == ("tests/test_a.py",)
    assert test_files.foreign_paths(["tests"], tmp_path) == test_files.files_below("tests", tmp_path)
    # several paths, a node id, a file: kept as given
    assert test_files.foreign_paths(["tests", "other"], tmp_path) == ("tests", "other")
    assert test_files.foreign_paths(["tests/test_a.py::test_it"], tmp_path) == ("tests/test_a.py::test_it",)
    assert test_files.foreign_paths(["tests/test_a.py"], tmp_path) == ("tests/test_a.py",)
    # a directory of two test files is two units already
    (tmp_path / "two").mkdir()
    for name in ("test_one.py", "test_two.py"):
        (tmp_path / "two" / name).write_text("def test_it():\n    pass\n")
    assert test_files.foreign_paths(["two"], tmp_path) == ("two/test_one.py", "two/test_two.py")
    # a directory of one test file gains nothing from a split
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "test_only.py").write_text("def test_it():\n    pass\n")
    assert test_files.foreign_paths(["one"], tmp_path) == ("one",)


def test_an_ini_file_that_does_not_parse_falls_back_to_the_next(tmp_path: Path) -> None:
    _tree(tmp_path, {"pytest.ini": "[pytest\nbroken", "tox.ini": "[pytest]\npython_files = check_*.py\n"})
    assert test_files.files_below("tests", tmp_path) == ("tests/check_c.py",)
    _tree(tmp_path, {"pytest.ini": "[pytest]\n", "pyproject.toml": "not [toml"})
    assert "tests/test_a.py" in test_files.files_below("tests", tmp_path)


def test_a_cell_runs_its_files_less_those_it_ignores(tmp_path: Path) -> None:
    from harness.matrix.config import Cell

    _tree(tmp_path)
    (tmp_path / "odd=name").mkdir()
    (tmp_path / "odd=name" / "test_q.py").write_text("def test_it():\n    pass\n")
    cell = Cell("c", paths=("tests", "odd=name", "tests/test_a.py::test_it"),
                pytest_args=("-m", "not slow", "--ignore=tests/deep/", "--ignore=odd=name", "--ignore=tests/b"))
    assert test_files.cell_files(cell, tmp_path) == ("tests/b_test.py", "tests/test_a.py", "tests/test_a.py::test_it")


def test_a_pyproject_without_pytests_table_leaves_the_next_file_to_say(tmp_path: Path) -> None:
    _tree(tmp_path, {"pyproject.toml": '[project]\nname = "x"\n', "tox.ini": "[pytest]\npython_files = check_*.py\n"})
    assert test_files.files_below("tests", tmp_path) == ("tests/check_c.py",)
    _tree(tmp_path, {"pyproject.toml": '[tool.pytest]\nother = 1\n', "tox.ini": "[pytest]\npython_files = b_*.py\n"})
    assert test_files.files_below("tests", tmp_path) == ("tests/b_test.py",)
    _tree(tmp_path, {"pyproject.toml": "[tool.black]\n", "tox.ini": "[tox]\nenvlist = py311\n",
                     "setup.cfg": "[tool:pytest]\npython_files = check_*.py\n"})
    assert test_files.files_below("tests", tmp_path) == ("tests/check_c.py",)
