"""Which test files a directory holds, as pytest would collect them: its ``python_files``
patterns from the project's ini files, its default directories not recursed into. A long suite is
split by files (``harness.matrix.schedule.balance``), finer than by the directories a cell names.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path

from harness.matrix.config import Cell


def foreign_paths(given: list[str], root: Path) -> tuple[str, ...]:
    """The test paths of a suite named after ``--``. One directory becomes the test files below it
    (those pytest's ``python_files`` patterns name), so that a long cell of one suite is split over
    two processes by the last run's seconds per file (``shards``) as finely as pytest-xdist would
    balance it; pytest collects the same tests from the files as from the directory (the same
    conftest files and rootdir). Anything else stays as given."""
    if len(given) != 1 or "::" in given[0] or not (root / given[0]).is_dir():
        return tuple(given)
    found = files_below(given[0], root)
    return found if len(found) >= 2 else tuple(given)


def cell_files(cell: Cell, root: Path) -> tuple[str, ...]:
    """The test files a cell runs, less those its ``--ignore=`` arguments leave out: the units a
    long cell is split by when their seconds are known (a cell's few directories are too coarse to
    balance two processes). A path that is a file or a node id stays as it is."""
    ignored = tuple(a.split("=", 1)[1].rstrip("/") for a in cell.pytest_args if a.startswith("--ignore="))
    found = (f for path in cell.paths for f in files_below(path, root))
    return tuple(f for f in found if not any(f == i or f.startswith(i + "/") for i in ignored))


def files_below(path: str, root: Path) -> tuple[str, ...]:
    """The test files below directory ``path`` (relative to ``root``) that pytest's
    ``python_files`` patterns name, in pytest's order; a file is itself."""
    directory = root / path
    if not directory.is_dir():
        return (path,)
    patterns = _python_files(root)
    found: list[str] = []
    for here, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")) and d not in _SKIPPED_DIRS
                         and not d.endswith(".egg"))
        for name in sorted(files):
            if name.endswith(".py") and any(fnmatch.fnmatch(name, p) for p in patterns):
                found.append(str(Path(path) / Path(here).relative_to(directory) / name))
    return tuple(found)


#: directories pytest does not recurse into by default (``norecursedirs``), nor does the split
_SKIPPED_DIRS = {"build", "dist", "node_modules", "venv", "CVS", "_darcs", "{arch}"}


def _python_files(root: Path) -> list[str]:
    """pytest's ``python_files`` for a suite run from ``root``: its ini files' setting (pytest.ini,
    pyproject.toml, tox.ini, setup.cfg, the first that configures pytest), else pytest's default."""
    import configparser
    import tomllib

    for name, section in (("pytest.ini", "pytest"), ("pyproject.toml", ""), ("tox.ini", "pytest"),
                          ("setup.cfg", "tool:pytest")):
        path = root / name
        if not path.is_file():
            continue
        try:
            if name == "pyproject.toml":
                table = tomllib.loads(path.read_text(encoding="utf-8")).get("tool", {}).get("pytest", {})
                if "ini_options" not in table:
                    continue
                value = table["ini_options"].get("python_files")
            else:
                parser = configparser.ConfigParser(interpolation=None)
                parser.read(path, encoding="utf-8")
                if not parser.has_section(section):
                    continue
                value = parser.get(section, "python_files", fallback=None)
        except (OSError, ValueError, configparser.Error):
            continue
        if value:
            return value.split() if isinstance(value, str) else [str(v) for v in value]
        return list(_PYTEST_PYTHON_FILES)
    return list(_PYTEST_PYTHON_FILES)


_PYTEST_PYTHON_FILES = ("test_*.py", "*_test.py")
