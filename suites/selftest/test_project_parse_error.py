"""A ``pyproject.toml`` that does not parse stops every command that reads the project, with the
file, line and column (exit 2), and a cell whose pytest could not start says pytest's own words
in its record, not only an exit code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from junitparser import JUnitXml

from harness import cli, project
from harness.exits import EXIT_USAGE
from harness.matrix.startup_error import pytest_error_line

pytestmark = [pytest.mark.cell_independent, pytest.mark.jax_independent]
BROKEN = '[project]\nname = "shardjax"\nversion = 0.1.0\n'


@pytest.mark.parametrize("command", [["list"], ["list", "runtimes"], ["config"], ["cells"], ["cells", "--names"],
                                     ["run", "--cells", "cpu-1"], ["teeth"]])
def test_every_command_that_reads_the_project_refuses_a_file_that_does_not_parse(
        command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pyproject.toml").write_text(BROKEN)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("XHARNESS_PROJECT", raising=False)
    assert cli.main(command) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"{tmp_path / 'pyproject.toml'}:3:14: not valid TOML: Expected newline" in err, err
    assert "(at line" not in err  # said once, in the file:line:column form


def test_init_refuses_it_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pyproject.toml").write_text(BROKEN)
    assert cli.main(["init", "--dir", str(tmp_path), "--install", "xharness==1.0"]) == EXIT_USAGE
    assert "pyproject.toml:3:14: not valid TOML" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pyproject.toml"]


def test_a_broken_section_names_its_column_too(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text('[tool.xharness]\ntestpaths = ["tests"]\nreports = = 1\n')
    with pytest.raises(project.ProjectError) as caught:
        project.load(tmp_path)
    assert (caught.value.line, caught.value.column) == (3, 11) and str(caught.value).startswith(f"{path}:3:11: ")


@pytest.mark.parametrize(("log", "said"), [
    ("ERROR: /r/pyproject.toml: Invalid value (at line 3, column 11)\n",
     "/r/pyproject.toml: Invalid value (at line 3, column 11)"),
    ("ERROR: usage: pytest [options]\npytest: error: unrecognized arguments: --nope\n  inifile: None\n",
     "unrecognized arguments: --nope"),
    ("ImportError while loading conftest '/r/conftest.py'.\nconftest.py:1: in <module>\n    import nope\n"
     "E   ModuleNotFoundError: No module named 'nope'\n", "ModuleNotFoundError: No module named 'nope'"),
    ("Traceback (most recent call last):\n  File \"x\", line 1\nRuntimeError: no backend\n", "RuntimeError: no backend"),
    ("nothing useful\n", ""),
])
def test_pytests_own_line_is_found(log: str, said: str) -> None:
    assert pytest_error_line(log) == said


def test_the_startup_record_carries_pytests_own_error(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text("import shardjax_missing_dependency\n")
    (tmp_path / "test_a.py").write_text("def test_a():\n    pass\n")
    env = {k: v for k, v in os.environ.items() if k not in ("XHARNESS_PROJECT", "HARNESS_RUNTIME", "HARNESS_FAULTS")}
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--cells", "cpu-1"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    said = "No module named 'shardjax_missing_dependency'"
    assert f"before any test started: ModuleNotFoundError: {said}" in done.stdout, done.stdout
    (case,) = [c for s in JUnitXml.fromfile(str(tmp_path / "reports" / "junit" / "cpu-1.xml")) for c in s]
    assert said in case.result[0].message.splitlines()[0]
