"""Where a project's scenario or invariant item says it is defined: the file of the module its
entry point names and the line that binds the name there (an assignment, an annotated one, a
function or a class), or the first line where the module cannot be read; and which distributions'
items are the project's: its own (by its name, normalised) and the one that registers the runtime
under test, never the harness itself.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from harness import project_items
from harness.entrypoints import OWN_DISTRIBUTION, EntryPoint
from harness.project import read

pytestmark = pytest.mark.cell_independent

MODULE = '''"""A plugin's module."""
import os

OTHER = 1
SCENARIO = object()
TYPED: object = object()
first, SECOND = 1, 2


def make_it():
    return 1


class Holder:
    SCENARIO = 3
'''


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "plug_defs.py"
    path.write_text(MODULE)
    fake = types.ModuleType("plug_defs")
    fake.__file__ = str(path)
    monkeypatch.setitem(sys.modules, "plug_defs", fake)
    return path


@pytest.mark.parametrize(("value", "line"), [
    ("plug_defs:SCENARIO", 5),
    ("plug_defs:TYPED", 6),
    ("plug_defs:make_it", 10),
    ("plug_defs:Holder", 14),
    ("plug_defs:Holder.SCENARIO", 14),
    ("plug_defs : OTHER", 4),
    ("plug_defs:missing", 1),
    ("plug_defs:SECOND", 1),  # a name bound inside a tuple target is not looked for
])
def test_an_item_is_defined_at_the_line_that_binds_its_name(module: Path, value: str, line: int) -> None:
    entry = EntryPoint("xharness.scenarios", "s", value, "plug-dist", "1.0")
    assert project_items.definition(entry) == (module.resolve(), line)


def test_a_module_that_cannot_be_read_is_defined_at_its_first_line(module: Path) -> None:
    module.write_text("def broken(:\n")
    entry = EntryPoint("xharness.scenarios", "s", "plug_defs:broken", "plug-dist", "1.0")
    assert project_items.definition(entry) == (module.resolve(), 1)
    module.write_bytes(b"X = '\xff'\n")
    assert project_items.definition(entry)[1] == 1
    module.unlink()
    assert project_items.definition(entry)[1] == 1


def test_the_projects_own_distribution_is_named_by_its_pyproject(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "My_Plug.Dist"\n\n[tool.xharness]\n')
    assert project_items.distributions(read(tmp_path / "pyproject.toml"), "reference") == {"my-plug-dist"}
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "  "\n\n[tool.xharness]\n')
    assert project_items.distributions(read(tmp_path / "pyproject.toml"), "reference") == set()
    (tmp_path / "pyproject.toml").write_text(f'[project]\nname = "{OWN_DISTRIBUTION}"\n\n[tool.xharness]\n')
    assert project_items.distributions(read(tmp_path / "pyproject.toml"), "reference") == set()
    (tmp_path / "pyproject.toml").write_text('[tool.xharness]\n')
    assert project_items.distributions(read(tmp_path / "pyproject.toml"), "reference") == set()



def test_a_module_without_a_file_is_defined_at_the_runs_directory(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A namespace package has no ``__file__``: its items are placed at the run's own directory,
    line 1, rather than at a path that names nothing."""
    fake = types.ModuleType("plug_nofile")
    fake.__file__ = None
    monkeypatch.setitem(sys.modules, "plug_nofile", fake)
    monkeypatch.chdir(tmp_path)
    entry = EntryPoint("xharness.scenarios", "s", "plug_nofile:SCENARIO", "plug-dist", "1.0")
    assert project_items.definition(entry) == (tmp_path.resolve(), 1)
