"""``[tool.xharness]`` and ``xharness.toml``: the exact sentence, file, line and key of each mistake a
maintainer can make in them; where ``XHARNESS_PROJECT`` points; and the runtime a plain run tests,
with where that choice came from."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from harness import entrypoints, project
from harness.project import Project, ProjectError, RuntimeChoice

pytestmark = pytest.mark.cell_independent


@pytest.fixture(autouse=True)
def no_named_project(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XHARNESS_PROJECT", raising=False)
    monkeypatch.delenv("HARNESS_RUNTIME", raising=False)


def _pyproject(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "pyproject.toml"
    path.write_text('[project]\nname = "p"\n\n[tool.other]\nruntime = "elsewhere"\nreports = 3\n\n'
                    f"[tool.xharness]\n{body}")
    return path


def _error(path: Path) -> str:
    with pytest.raises(ProjectError) as caught:
        project.read(path)
    return str(caught.value).replace(str(path.resolve()), "P")


# ------------------------------------------------------------------------------ each mistake, exactly
@pytest.mark.parametrize(("body", "message"), [
    ('executor = "local"\nreports = ""\n', "P:10: tool.xharness.reports: must be a directory path (a string), got ''"),
    ('executor = "local"\ntestpaths = []\n', "P:10: tool.xharness.testpaths: must be a non-empty list of paths, got []"),
    ('executor = "local"\ntestpaths = [""]\n',
     "P:10: tool.xharness.testpaths: must be a non-empty list of paths, got ['']"),
    ('executor = "cloud"\n', "P:9: tool.xharness.executor: must be one of local, slurm, got 'cloud'"),
    ('executor = "local"\nruntime = "nope"\n',
     "P:10: tool.xharness.runtime: unknown runtime 'nope' (registered: {known})"),
    ('matrix = "m.toml"\ncells = [{name = "a"}]\n',
     "P:10: tool.xharness.cells: give the cells inline or a matrix file (matrix = ...), not both"),
    ('executor = "local"\ncells = [1]\n',
     'P:10: tool.xharness.cells: must be an array of tables: [[tool.xharness.cells]] with name = "..."'),
    ('executor = "local"\n\n[[tool.xharness.cells]]\nname = "a"\n\n[[tool.xharness.cells]]\nname = ""\n',
     "P:11: tool.xharness.cells[1].name: every cell needs a name (a string)"),
    ('executor = "local"\nslurm = "big"\n',
     "P:10: tool.xharness.slurm: must be a table: partition, account, options, deadline"),
    ('executor = "local"\n\n[tool.xharness.slurm]\npartition = "gpu nodes"\n',
     "P:11: tool.xharness.slurm.partition: must be a partition name, got 'gpu nodes'"),
    ('executor = "local"\n\n[tool.xharness.slurm]\naccount = "lab;rm"\n',
     "P:11: tool.xharness.slurm.account: must be a account name, got 'lab;rm'"),
    ('executor = "local"\n\n[tool.xharness.slurm]\ndeadline = true\n',
     "P:11: tool.xharness.slurm.deadline: must be a positive number of seconds, got True"),
    ('executor = "local"\n\n[tool.xharness.slurm]\ndeadline = 0\n',
     "P:11: tool.xharness.slurm.deadline: must be a positive number of seconds, got 0"),
    ('executor = "local"\nrunners = "gpu"\n',
     "P:10: tool.xharness.runners: must be a table: a cell's name, or gpu, tpu, slurm, mpi or namespaces, "
     "to a runner label or a list of labels"),
    ('executor = "local"\n\n[tool.xharness.runners]\ngpu = []\n',
     "P:11: tool.xharness.runners.gpu: must be a runner label or a non-empty list of labels, got []"),
    ('executor = "local"\n\n[tool.xharness.runners]\ngpu = ["self-hosted", " "]\n',
     "P:11: tool.xharness.runners.gpu: must be a runner label or a non-empty list of labels, got ['self-hosted', ' ']"),
    ('executor = "local"\n\n[tool.xharness.runners]\ntpu = 4\n',
     "P:11: tool.xharness.runners.tpu: must be a runner label or a non-empty list of labels, got 4"),
])
def test_each_mistake_names_its_line_and_dotted_key(tmp_path: Path, body: str, message: str) -> None:
    known = ", ".join(dict.fromkeys(e.name for e in entrypoints.entry_points(entrypoints.RUNTIMES)))
    assert _error(_pyproject(tmp_path, body)) == message.format(known=known)


def test_several_missing_paths_are_named_together(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    assert _error(_pyproject(tmp_path, 'testpaths = ["tests", "a", "b"]\n')) == (
        f"P:9: tool.xharness.testpaths: no such file or directory: a, b (relative to {tmp_path.resolve()})")


def test_an_unknown_key_lists_every_accepted_one(tmp_path: Path) -> None:
    message = _error(_pyproject(tmp_path, 'executor = "local"\ncolour = "red"\n'))
    assert message.startswith("P:10: tool.xharness.colour: unknown key (accepted: testpaths: a list of existing "
                              "paths, relative to the file; matrix: a path; cells: ")


def test_a_slurm_table_accepts_names_options_and_a_fractional_deadline(tmp_path: Path) -> None:
    found = project.read(_pyproject(tmp_path, 'executor = "slurm"\n\n[tool.xharness.slurm]\npartition = "gpu-a100"\n'
                                              'account = "lab.x"\noptions = ["--qos=low"]\ndeadline = 0.5\n'))
    assert found.slurm == {"partition": "gpu-a100", "account": "lab.x", "options": ["--qos=low"], "deadline": 0.5}
    assert found.executor == "slurm"


def test_in_an_xharness_toml_keys_are_named_without_a_table(tmp_path: Path) -> None:
    own = tmp_path / "xharness.toml"
    own.write_text('# the harness\nreports = "out"\nexecutor = "cloud"\n')
    assert _error(own) == "P:3: executor: must be one of local, slurm, got 'cloud'"
    own.write_text('reports = "out"\n\n[slurm]\ndeadline = -1\n')
    assert _error(own) == "P:3: slurm.deadline: must be a positive number of seconds, got -1"
    own.write_text('reports = "out"\n\n[[cells]]\nname = "a"\n\n[[ cells ]]\nname = "a"\n')
    assert _error(own) == "P:3: cells[1].name: duplicate cell name 'a'"


def test_a_table_that_is_no_table_or_a_file_that_is_no_toml(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text('[tool]\nxharness = 3\n')
    assert _error(path) == "P: tool.xharness: must be a table"
    path.write_text('[tool.xharness]\nreports = \n')
    assert _error(path) == "P:2:11: not valid TOML: Invalid value"
    odd = project.toml_error(path, tomllib.TOMLDecodeError("Unterminated string"))
    assert (str(odd), odd.line, odd.column) == (f"{path}: not valid TOML: Unterminated string", None, None)
    unreadable = tmp_path / "dir" / "xharness.toml"
    unreadable.mkdir(parents=True)
    assert _error(unreadable) == "P: cannot read it: Is a directory"


def test_an_error_names_a_column_only_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "xharness.toml"
    assert str(ProjectError(path, 4, "reports", "bad", 7)) == f"{path}:4:7: reports: bad"
    assert str(ProjectError(path, 4, "reports", "bad")) == f"{path}:4: reports: bad"
    assert str(ProjectError(path, None, "", "bad", 7)) == f"{path}: bad"


# ------------------------------------------------------------------------------ where the project is
def test_a_pyproject_without_the_table_is_a_project_of_defaults(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text('[project]\nname = "p"\n')
    found = project.read(path)
    assert (found.path, found.root, found.table, found.runtime) == (path, tmp_path, "tool.xharness", None)
    assert found.reports_dir() == tmp_path / "reports"
    assert found.describe() == f"{path} [tool.xharness]"
    assert project.read(_pyproject(tmp_path, "")).runtime is None  # [tool.other]'s runtime is not ours
    own = tmp_path / "xharness.toml"
    own.write_text('reports = "out"\n')
    assert project.read(own).describe() == str(own)
    assert project.read(own).reports_dir() == tmp_path / "out"
    assert Project(root=tmp_path).describe() == "(no [tool.xharness] found: defaults)"


def test_the_project_variable_may_name_a_directory_or_a_file(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    with_own = tmp_path / "own"
    with_own.mkdir()
    (with_own / "xharness.toml").write_text('executor = "slurm"\n')
    monkeypatch.setenv("XHARNESS_PROJECT", str(with_own))
    assert project.load().path == with_own / "xharness.toml"
    with_pyproject = tmp_path / "py"
    with_pyproject.mkdir()
    _pyproject(with_pyproject, 'executor = "slurm"\n')
    monkeypatch.setenv("XHARNESS_PROJECT", f" {with_pyproject} ")
    assert project.load().path == with_pyproject / "pyproject.toml"
    monkeypatch.setenv("XHARNESS_PROJECT", str(elsewhere))
    with pytest.raises(ProjectError) as caught:
        project.load()
    assert str(caught.value) == (f"{elsewhere}: XHARNESS_PROJECT names a directory with no xharness.toml and no "
                                 "pyproject.toml with [tool.xharness]")
    monkeypatch.setenv("XHARNESS_PROJECT", str(tmp_path / "gone.toml"))
    with pytest.raises(ProjectError) as caught:
        project.load()
    assert str(caught.value) == f"{tmp_path / 'gone.toml'}: XHARNESS_PROJECT names no file or directory"


# ------------------------------------------------------------------------------ the runtime under test
def test_the_runtime_under_test_and_where_it_was_chosen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _pyproject(tmp_path, 'executor = "local"\nruntime = "jax"\n')
    configured = project.read(path)
    assert configured.runtime_line == 10
    assert project.runtime_under_test(configured, {}) == RuntimeChoice("jax", f"{path}:10 runtime")
    assert project.runtime_under_test(configured, {"HARNESS_RUNTIME": " torch_xla "}) == RuntimeChoice(
        "torch_xla", "environment (HARNESS_RUNTIME)")
    unlined = Project(root=tmp_path, path=path, runtime="jax")
    assert project.runtime_under_test(unlined, {}) == RuntimeChoice("jax", f"{path} runtime")
    assert project.runtime_under_test(Project(root=tmp_path), {}) == RuntimeChoice("reference", "default")
    assert project.read(_pyproject(tmp_path, 'executor = "local"\n')).runtime_line is None
    monkeypatch.setenv("HARNESS_RUNTIME", "jax")  # the process' own, not the environment asked about
    assert project.runtime_under_test(Project(root=tmp_path), {}) == RuntimeChoice("reference", "default")
    assert project.runtime_under_test(Project(root=tmp_path)) == RuntimeChoice("jax", "environment (HARNESS_RUNTIME)")


def test_a_pyproject_that_is_not_utf8_on_the_way_up_is_not_a_project(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_bytes(b'[project]\nname = "\xff"\n')
    (tmp_path / "sub").mkdir()
    assert project.find(tmp_path / "sub") is None
    assert project.load(tmp_path / "sub") == Project(root=tmp_path / "sub")


def test_runner_labels_are_read_by_cell_name_or_need_as_lists(tmp_path: Path) -> None:
    path = _pyproject(tmp_path, 'executor = "local"\n\n[tool.xharness.runners]\ngpu = "gpu-box"\n'
                                '"cpu-2x4-mpi" = ["self-hosted", "mpi"]\n')
    assert project.read(path).runners == {"gpu": ("gpu-box",), "cpu-2x4-mpi": ("self-hosted", "mpi")}
    assert project.read(_pyproject(tmp_path, 'executor = "local"\n')).runners == {}
