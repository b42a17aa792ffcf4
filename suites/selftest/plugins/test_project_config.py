"""``[tool.xharness]``: found where pytest would find its own, every key checked before anything
runs, and a project's own suites and cells the only ones that run there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import project
from harness.matrix.config import MatrixError, project_matrix
from harness.report.junit import read_records

pytestmark = pytest.mark.cell_independent


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.jax_independent
def test_the_nearest_configuration_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XHARNESS_PROJECT", raising=False)
    _write(tmp_path / "pyproject.toml", '[tool.xharness]\nreports = "out"\n')
    _write(tmp_path / "sub" / "pyproject.toml", '[project]\nname = "x"\n')  # no section: skipped
    deep = tmp_path / "sub" / "deeper"
    deep.mkdir()
    found = project.load(deep)
    assert found.path == (tmp_path / "pyproject.toml").resolve()
    assert found.root == tmp_path.resolve() and found.reports_dir() == (tmp_path / "out").resolve()
    assert found.describe().endswith("pyproject.toml [tool.xharness]")
    _write(tmp_path / "sub" / "xharness.toml", 'reports = "elsewhere"\n')  # wins over pyproject
    assert project.load(deep).path == (tmp_path / "sub" / "xharness.toml").resolve()
    monkeypatch.setenv("XHARNESS_PROJECT", str(tmp_path / "pyproject.toml"))
    assert project.load(deep).path == (tmp_path / "pyproject.toml").resolve()


@pytest.mark.jax_independent
def test_no_configuration_means_the_current_directory_and_the_starter_cells(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XHARNESS_PROJECT", raising=False)
    found = project.load(tmp_path)
    assert not found.configured and found.root == tmp_path.resolve()
    matrix = project_matrix(found)
    assert matrix.root == tmp_path.resolve()
    assert [c.name for c in matrix.listed()] == ["cpu-1", "cpu-8"]
    assert all(c.paths == (".",) for c in matrix.cells.values())
    # pytest's own testpaths, when the project names none for xharness
    _write(tmp_path / "pyproject.toml", '[tool.pytest.ini_options]\ntestpaths = ["t"]\n')
    assert all(c.paths == ("t",) for c in project_matrix(project.load(tmp_path)).cells.values())


@pytest.mark.jax_independent
def test_inline_cells_run_over_the_projects_testpaths(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    config = _write(tmp_path / "pyproject.toml", '[tool.xharness]\ntestpaths = ["tests"]\nruntime = "reference"\n'
                    '[[tool.xharness.cells]]\nname = "one"\ndevices = 1\n'
                    '[[tool.xharness.cells]]\nname = "four"\ndevices = 4\ntimeout = 60\n')
    matrix = project_matrix(project.read(config))
    assert matrix.root == tmp_path.resolve()
    assert [(c.name, c.devices, c.paths) for c in matrix.cells.values()] == [
        ("one", 1, ("tests",)), ("four", 4, ("tests",))]


@pytest.mark.jax_independent
@pytest.mark.parametrize(("text", "key", "says"), [
    ('[tool.xharness]\ntestpath = ["t"]\n', "tool.xharness.testpath", "unknown key (accepted: testpaths:"),
    ('[tool.xharness]\ntestpaths = "tests"\n', "tool.xharness.testpaths", "must be a non-empty list of paths"),
    ('[tool.xharness]\ntestpaths = ["nowhere"]\n', "tool.xharness.testpaths", "no such file or directory: nowhere"),
    ('[tool.xharness]\nmatrix = "ci/none.toml"\n', "tool.xharness.matrix", "no such file: ci/none.toml"),
    ('[tool.xharness]\nexpected = 3\n', "tool.xharness.expected", "must be a path (a string), got 3"),
    ('[tool.xharness]\nruntime = "nope"\n', "tool.xharness.runtime", "unknown runtime 'nope' (registered: "),
    ('[tool.xharness]\nreports = "pyproject.toml"\n', "tool.xharness.reports", "exists and is not a directory"),
    ('[tool.xharness]\nmatrix = "pyproject.toml"\n[[tool.xharness.cells]]\nname = "a"\n', "tool.xharness.cells",
     "not both"),
    ('[tool.xharness]\n[[tool.xharness.cells]]\ndevices = 2\n', "tool.xharness.cells[0].name", "needs a name"),
    ('[tool.xharness]\n[[tool.xharness.cells]]\nname = "a"\n[[tool.xharness.cells]]\nname = "a"\n',
     "tool.xharness.cells[1].name", "duplicate cell name 'a'"),
    ('[tool.xharness]\ncells = 3\n', "tool.xharness.cells", "must be an array of tables"),
])
def test_each_malformed_key_is_named_with_its_file_and_line(tmp_path: Path, text: str, key: str, says: str) -> None:
    config = _write(tmp_path / "pyproject.toml", text)
    with pytest.raises(project.ProjectError) as caught:
        project.read(config)
    message = str(caught.value)
    assert message.startswith(str(config.resolve()))
    assert f": {key}: " in message and says in message, message
    assert caught.value.line is not None  # every key above is on a line of its own


@pytest.mark.jax_independent
def test_invalid_toml_and_bad_cell_fields(tmp_path: Path) -> None:
    broken = _write(tmp_path / "a" / "xharness.toml", "reports = \"r\"\nbad line\n")
    with pytest.raises(project.ProjectError, match=r"xharness.toml:\d+:\d+: not valid TOML"):
        project.read(broken)
    cell = _write(tmp_path / "b" / "xharness.toml", '[[cells]]\nname = "a"\ndevicez = 2\n')
    with pytest.raises(MatrixError, match=r"xharness.toml.*devicez: unknown key"):
        project_matrix(project.read(cell))


def _xharness(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "XHARNESS_PROJECT"}
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)


@pytest.mark.jax_independent
@pytest.mark.own_process
def test_a_malformed_configuration_stops_every_command_with_exit_2(tmp_path: Path) -> None:
    _write(tmp_path / "pyproject.toml", '[tool.xharness]\nrepports = "r"\n')
    for args in (["cells"], ["run"], ["teeth", "--checks", "coverage"], ["repro", "aliased-save", "--cell", "cpu-1"]):
        done = _xharness(tmp_path, *args)
        assert done.returncode == 2, (args, done.stderr)
        assert "tool.xharness.repports: unknown key" in done.stderr
    assert not (tmp_path / "reports").exists()  # nothing started, nothing written


@pytest.mark.own_process
def test_run_in_a_project_runs_its_suite_and_writes_its_reports(tmp_path: Path) -> None:
    _write(tmp_path / "checks" / "test_mine.py", "def test_mine(adapter):\n    assert adapter.name == 'reference'\n")
    _write(tmp_path / "pyproject.toml", '[tool.xharness]\ntestpaths = ["checks"]\nreports = "out"\n'
           '[[tool.xharness.cells]]\nname = "solo"\ndevices = 2\n')
    done = _xharness(tmp_path, "run")
    assert done.returncode == 0, done.stdout + done.stderr
    records = read_records(tmp_path / "out" / "junit" / "solo.xml")
    # the project's suite, never the harness'
    assert [r.nodeid for r in records] == ["checks/test_mine.py::test_mine"]
    assert records[0].classification == "passed"
    assert (tmp_path / "out" / "index.html").is_file()


@pytest.mark.own_process
def test_a_foreign_suite_named_after_dashes_is_split_and_its_crashes_recorded(tmp_path: Path) -> None:
    """``xharness run -- DIR`` in a directory with no configuration: the directory's entries are
    the cell's paths (two processes at -j 2), and a test that kills its process or hangs still
    has its record while the rest of its part runs."""
    from harness.report.records import ERROR, KIND_SIGNAL, KIND_TIMEOUT, PASSED, SKIPPED

    _write(tmp_path / "suite" / "test_crash.py", "import ctypes, time\n\ndef test_a():\n    pass\n\n"
           "def test_segv():\n    ctypes.string_at(0)\n\ndef test_b():\n    pass\n")
    _write(tmp_path / "suite" / "sub" / "test_hang.py", "import time\n\ndef test_hang():\n    time.sleep(120)\n\n"
           "def test_c():\n    pass\n")
    _write(tmp_path / "suite" / "sub" / "test_optional.py",
           "import pytest\n\npytest.importorskip('no_such_module_here')\n\ndef test_never():\n    pass\n")
    done = _xharness(tmp_path, "run", "--cells", "cpu-1", "-j", "2", "--timeout", "3", "--", "suite")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "cpu-1: 2 parts" in done.stderr + done.stdout
    records = {r.nodeid: r.final for r in read_records(tmp_path / "reports" / "junit" / "cpu-1.xml")}
    assert {n: (a.outcome, a.kind) for n, a in records.items()} == {
        "suite/sub/test_hang.py::test_hang": (ERROR, KIND_TIMEOUT),
        "suite/sub/test_hang.py::test_c": (PASSED, ""),
        "suite/test_crash.py::test_a": (PASSED, ""),
        "suite/test_crash.py::test_segv": (ERROR, KIND_SIGNAL),
        "suite/test_crash.py::test_b": (PASSED, ""),
        # skipped as it was imported: pytest counts it, so its record is kept
        "suite/sub/test_optional.py": (SKIPPED, ""),
    }
    assert "no_such_module_here" in records["suite/sub/test_optional.py"].message
