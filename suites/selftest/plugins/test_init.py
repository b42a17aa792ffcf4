"""``xharness init``: a starter configuration, an example test and a workflow, never over what
exists unless asked; what it writes parses, runs and passes the workflow linter."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from harness import cli, install_source, project
from harness.commands import init as starter
from harness.matrix.config import project_matrix

pytestmark = pytest.mark.cell_independent
ROOT = Path(__file__).resolve().parents[3]


def _init(root: Path, *extra: str) -> int:
    """``init`` with an install line any runner can use (this checkout's own may be a path)."""
    install = () if "--install" in extra else ("--install", "xharness==1.0")
    return cli.main(["init", "--dir", str(root), *install, *extra])


def test_init_writes_three_files_that_parse(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _init(tmp_path) == 0
    out = capsys.readouterr().out
    for name in ("xharness.toml", "tests/test_xharness_example.py", ".github/workflows/xharness.yml"):
        assert f"write {tmp_path / name}" in out
    found = project.read(tmp_path / "xharness.toml")
    assert found.testpaths == ("tests",)
    assert [c.name for c in project_matrix(found).listed()] == list(starter.starter_cells())
    compile((tmp_path / starter.TEST_FILE).read_text(), "example", "exec")


def test_init_appends_to_a_pyproject_and_refuses_to_overwrite(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "mine"\n\n[tool.other]\nkeep = 1\n')
    assert _init(tmp_path) == 0
    text = pyproject.read_text()
    assert text.startswith('[project]\nname = "mine"\n') and "[tool.other]\nkeep = 1" in text
    assert project.read(pyproject).testpaths == ("tests",)
    # a second init refuses, and writes nothing at all: not even the files that are missing
    (tmp_path / starter.WORKFLOW_FILE).unlink()
    before = pyproject.read_text()
    assert _init(tmp_path) == 2
    assert "test_xharness_example.py exists; run with --force" in capsys.readouterr().err
    assert pyproject.read_text() == before and not (tmp_path / starter.WORKFLOW_FILE).exists()
    # --force replaces the files, never the section: the maintainer's edits stay
    pyproject.write_text(before.replace('reports = "reports"', 'reports = "elsewhere"') + "\n[tool.after]\nx = 2\n")
    edited = pyproject.read_text()
    assert _init(tmp_path, "--force") == 0
    assert pyproject.read_text() == edited and (tmp_path / starter.WORKFLOW_FILE).exists()


def test_init_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _init(tmp_path / "missing") == 2
    assert _init(tmp_path, "--python", "three") == 2
    err = capsys.readouterr().err
    assert "no such directory" in err and "--python must be a version like 3.12" in err


def test_the_workflow_pins_the_actions_the_harness_pins(tmp_path: Path) -> None:
    """The harness' own workflow and the starter one use one commit per action (dependabot keeps
    the harness' own up to date; this keeps the starter's with it)."""
    own = (ROOT / ".github" / "workflows" / "ci.yml").read_text()
    for action, (sha, tag) in starter.ACTIONS.items():
        assert f"uses: {action}@{sha} # {tag}" in own, action
    text = starter.workflow("3.12")
    uses = re.findall(r"uses: (\S+)@(\S+)", text)
    assert uses and all(re.fullmatch(r"[0-9a-f]{40}", sha) for _, sha in uses)
    assert "persist-credentials: false" in text and "permissions: {}" in text


REGISTERS = """\
[project]
name = "myrt"
version = "0.1"

[project.entry-points."xharness.runtimes"]
{names}
"""


def _registering(root: Path, *names: str) -> Path:
    """A repository whose pyproject registers ``names`` (the harness' own runtimes, so that the
    section ``init`` writes loads here without installing anything)."""
    root.mkdir(parents=True, exist_ok=True)
    lines = "\n".join(f'{n} = "pkg.adapter:{n.title()}"' for n in names)
    (root / "pyproject.toml").write_text(REGISTERS.format(names=lines))
    return root


def test_init_sets_the_runtime_the_repository_registers_and_its_table(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    root = _registering(tmp_path / "one", "jax")
    (root / "tables").mkdir()
    (root / "tables" / "outcomes.toml").write_text('[[expect]]\nruntime = "jax"\nreleases = ">=0.1"\n'
                                                   'scenario = "aliased-save"\noutcome = "passed"\n')
    assert _init(root) == 0
    found = project.read(root / "pyproject.toml")
    assert found.runtime == "jax" and found.expected == root / "tables" / "outcomes.toml"
    text = (root / starter.WORKFLOW_FILE).read_text()
    assert "xharness teeth --runtime jax" in text and "needs: [plan, cells, teeth]" in text
    # several: --runtime chooses; without it (no terminal) the first is chosen and named
    several = _registering(tmp_path / "two", "jax", "torch_xla")
    assert _init(several, "--runtime", "torch_xla") == 0
    assert project.read(several / "pyproject.toml").runtime == "torch_xla"
    capsys.readouterr()
    several = _registering(tmp_path / "three", "jax", "torch_xla")
    assert _init(several) == 0
    assert project.read(several / "pyproject.toml").runtime == "jax"
    assert "registers runtimes jax, torch_xla; chose jax (--runtime NAME chooses another)" in capsys.readouterr().err
    assert _init(_registering(tmp_path / "four", "jax"), "--runtime", "nosuch") == 2
    assert "--runtime: unknown runtime 'nosuch'" in capsys.readouterr().err
    assert not (tmp_path / "four" / starter.WORKFLOW_FILE).exists()


def test_init_without_a_runtime_leaves_it_commented_out(tmp_path: Path) -> None:
    assert _init(tmp_path) == 0
    text = (tmp_path / "xharness.toml").read_text()
    assert '# runtime = "reference"' in text and "# expected = " in text
    assert project.read(tmp_path / "xharness.toml").runtime is None
    assert "teeth" not in (tmp_path / starter.WORKFLOW_FILE).read_text()


def test_init_keeps_reports_out_of_git_once(tmp_path: Path) -> None:
    assert _init(tmp_path) == 0
    assert (tmp_path / ".gitignore").read_text().splitlines()[1:] == ["reports/", "__pycache__/", "*.egg-info/"]
    other = tmp_path / "other"
    other.mkdir()
    (other / ".gitignore").write_text("*.pyc")  # no newline at its end
    assert _init(other) == 0
    assert (other / ".gitignore").read_text() == "*.pyc\n# what xharness run writes (xharness init)\nreports/\n"
    assert _init(other, "--force") == 0  # there already: not added twice
    assert (other / ".gitignore").read_text().count("reports/") == 1


@pytest.mark.parametrize(("direct_url", "line", "local"), [
    (None, "xharness==1.2", False),
    ({"url": "https://github.com/o/xharness.git", "vcs_info": {"vcs": "git", "commit_id": "ab12"}},
     "xharness @ git+https://github.com/o/xharness.git@ab12", False),
    ({"url": "https://github.com/o/mono.git", "vcs_info": {"vcs": "git", "commit_id": "cd34"}, "subdirectory": "py"},
     "xharness @ git+https://github.com/o/mono.git@cd34#subdirectory=py", False),
    ({"url": "https://example.org/xharness-1.2-py3-none-any.whl", "archive_info": {"hashes": {}}},
     "xharness @ https://example.org/xharness-1.2-py3-none-any.whl", False),
    ({"url": "file:///wheels/xharness-1.2-py3-none-any.whl", "archive_info": {}},
     "xharness @ file:///wheels/xharness-1.2-py3-none-any.whl", True),
    ({"url": "file:///src/xharness", "dir_info": {"editable": True}}, "xharness @ file:///src/xharness", True),
])
def test_the_install_line_reproduces_how_xharness_is_installed(direct_url: dict[str, object] | None, line: str,
                                                               local: bool) -> None:
    found = install_source.requirement("xharness", "1.2", direct_url)
    assert found.requirement == line and bool(found.local_only) == local
    text = starter.workflow("3.12", found)
    assert f'XHARNESS: "{line}"' in text


def test_the_install_line_of_this_installation(tmp_path: Path) -> None:
    """The harness installed here: its recorded source, or its version from an index."""
    from importlib import metadata

    here = install_source.installed("xharness")
    assert here.requirement.startswith("xharness")
    recorded = any(d.read_text("direct_url.json") for d in metadata.distributions(name="xharness"))
    assert (here.source == "index") == (not recorded)
    if here.local_only:  # a path on this machine: refused unless --install names what CI installs
        assert cli.main(["init", "--dir", str(tmp_path)]) == 2 and not list(tmp_path.iterdir())
    else:
        assert cli.main(["init", "--dir", str(tmp_path)]) == 0
        assert f'XHARNESS: "{here.requirement}"' in (tmp_path / starter.WORKFLOW_FILE).read_text()


@pytest.mark.skipif(shutil.which("zizmor") is None and not (ROOT / ".venv" / "bin" / "zizmor").exists(),
                    reason="zizmor is not installed (the test extra installs it)")
def test_the_workflow_is_zizmor_clean(tmp_path: Path) -> None:
    assert _init(_registering(tmp_path, "jax")) == 0  # with its teeth job
    zizmor = shutil.which("zizmor") or str(ROOT / ".venv" / "bin" / "zizmor")
    done = subprocess.run([zizmor, "--offline", str(tmp_path / ".github" / "workflows")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No findings" in done.stdout + done.stderr
