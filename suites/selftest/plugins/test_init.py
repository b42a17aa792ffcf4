"""``xharness init``: a starter configuration, an example test and a workflow, never over what
exists unless asked; what it writes parses, runs and passes the workflow linter."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from harness import cli, project
from harness.commands import init as starter
from harness.matrix.config import project_matrix

pytestmark = pytest.mark.cell_independent
ROOT = Path(__file__).resolve().parents[3]


def _init(root: Path, *extra: str) -> int:
    return cli.main(["init", "--dir", str(root), *extra])


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
    assert "has [tool.xharness] already; run with --force" in capsys.readouterr().err
    assert pyproject.read_text() == before and not (tmp_path / starter.WORKFLOW_FILE).exists()
    # --force replaces the section, and only it
    pyproject.write_text(before.replace('reports = "reports"', 'reports = "elsewhere"') + "\n[tool.after]\nx = 2\n")
    assert _init(tmp_path, "--force") == 0
    after = pyproject.read_text()
    assert after.count("[tool.xharness]") == 1 and 'reports = "reports"' in after
    assert "[tool.other]\nkeep = 1" in after and "[tool.after]\nx = 2" in after


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
    text = starter.workflow(starter.starter_cells(), "3.12")
    uses = re.findall(r"uses: (\S+)@(\S+)", text)
    assert uses and all(re.fullmatch(r"[0-9a-f]{40}", sha) for _, sha in uses)
    assert "persist-credentials: false" in text and "permissions: {}" in text


@pytest.mark.skipif(shutil.which("zizmor") is None and not (ROOT / ".venv" / "bin" / "zizmor").exists(),
                    reason="zizmor is not installed (the test extra installs it)")
def test_the_workflow_is_zizmor_clean(tmp_path: Path) -> None:
    assert _init(tmp_path) == 0
    zizmor = shutil.which("zizmor") or str(ROOT / ".venv" / "bin" / "zizmor")
    done = subprocess.run([zizmor, "--offline", str(tmp_path / ".github" / "workflows")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No findings" in done.stdout + done.stderr
