"""The workflow ``xharness init`` writes is one GitHub runs: its cells are the project's when it
runs, it installs an xharness a runner can fetch with a current pip, on the Python ``init`` ran
under, keeps pip's and JAX's caches, and ``init`` never rewrites a maintainer's
``[tool.xharness]``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from harness import cli, install_source
from harness.commands import init as starter
from harness.commands.workflow import ACTIONS, PLAN_JOB

pytestmark = [pytest.mark.cell_independent, pytest.mark.jax_independent]
ROOT = Path(__file__).resolve().parents[2]
USABLE = "xharness @ git+https://example.org/o/xharness@0123456789abcdef0123456789abcdef01234567"
EXTRA_CELL = '\n[[tool.xharness.cells]]\nname = "cpu-4"\nbackend = "cpu"\ndevices = 4\n'


def _init(root: Path, *extra: str) -> int:
    root.mkdir(parents=True, exist_ok=True)
    return cli.main(["init", "--dir", str(root), *extra])


def _flow(root: Path) -> dict:
    return YAML(typ="safe").load((root / starter.WORKFLOW_FILE).read_text())


def _pyproject(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    path = root / "pyproject.toml"
    path.write_text('[project]\nname = "shardjax"\nversion = "0.1"\n')
    return path


def test_the_cell_jobs_take_their_cells_from_the_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    pyproject = _pyproject(tmp_path)
    assert _init(tmp_path, "--install", USABLE) == 0
    flow = _flow(tmp_path)
    plan, cells = flow["jobs"][PLAN_JOB], flow["jobs"]["cells"]
    assert plan["steps"][-1]["run"] == 'xharness cells --github >> "$GITHUB_OUTPUT"'
    assert plan["outputs"]["matrix"] == "${{ steps.cells.outputs.matrix }}"
    assert cells["needs"] == PLAN_JOB and cells["if"] == f"needs.{PLAN_JOB}.outputs.any == 'true'"
    assert cells["strategy"]["matrix"] == f"${{{{ fromJSON(needs.{PLAN_JOB}.outputs.matrix) }}}}"
    assert cells["runs-on"] == "${{ matrix.runs-on }}"
    report = flow["jobs"]["report"]
    assert report["steps"][-2]["env"]["NOT_RUN"] == f"${{{{ needs.{PLAN_JOB}.outputs.not_run }}}}"
    assert "cpu-1" not in (tmp_path / starter.WORKFLOW_FILE).read_text()
    # a cell the maintainer adds later is in what the first job answers, with no new workflow
    pyproject.write_text(pyproject.read_text() + EXTRA_CELL)
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert cli.main(["cells", "--names"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and json.loads(out) == ["cpu-1", "cpu-8", "cpu-4"]
    assert cli.main(["cells", "--github"]) == 0
    outputs = dict(line.split("=", 1) for line in capsys.readouterr().out.splitlines())
    assert json.loads(outputs["matrix"]) == {"include": [{"cell": c, "runs-on": ["ubuntu-latest"]}
                                                         for c in ("cpu-1", "cpu-8", "cpu-4")]}
    assert outputs["any"] == "true" and json.loads(outputs["not_run"]) == []


def test_cells_a_hosted_runner_lacks_go_to_the_named_runners_or_are_listed_as_not_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""
        [tool.xharness]
        runners = { gpu = ["self-hosted", "gpu"], "cpu-2x2-mpi" = "mpi-box" }
        cells = [
          { name = "cpu-2", devices = 2 },
          { name = "gpu-1", backend = "gpu" },
          { name = "tpu-4", backend = "tpu", devices = 4 },
          { name = "cpu-2x2-slurm", devices = 2, processes = 2, launcher = "slurm" },
          { name = "cpu-2x2-mpi", devices = 2, processes = 2, launcher = "mpi" },
        ]
    """))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["cells", "--github"]) == 0
    outputs = dict(line.split("=", 1) for line in capsys.readouterr().out.splitlines())
    assert json.loads(outputs["matrix"])["include"] == [
        {"cell": "cpu-2", "runs-on": ["ubuntu-latest"]}, {"cell": "gpu-1", "runs-on": ["self-hosted", "gpu"]},
        {"cell": "cpu-2x2-mpi", "runs-on": ["mpi-box"]}]
    not_run = json.loads(outputs["not_run"])
    assert [c["cell"] for c in not_run] == ["tpu-4", "cpu-2x2-slurm"]
    assert "needs a TPU, which a hosted runner lacks" in not_run[0]["why"]
    assert "a SLURM cluster" in not_run[1]["why"] and "[tool.xharness.runners]" in not_run[1]["why"]
    # the report job's summary and dashboard carry them as notes
    junit = tmp_path / "junit.xml"
    junit.write_text('<testsuites><testsuite name="cpu-2" tests="1"><testcase classname="t" name="a" '
                     'time="0.1"/></testsuite></testsuites>')
    assert cli.main(["report", "summary", str(junit), "--out", "s.md", "--not-run", outputs["not_run"]]) == 0
    assert "cell tpu-4 not run: it needs a TPU" in (tmp_path / "s.md").read_text()
    assert cli.main(["report", "summary", str(junit), "--out", "s.md", "--not-run", "[1]"]) == 2
    assert "--not-run: a JSON list" in capsys.readouterr().err
    (tmp_path / "pyproject.toml").write_text('[tool.xharness]\nrunners = { gpu = [] }\n')
    assert cli.main(["cells", "--github"]) == 2
    assert "runners.gpu: must be a runner label or a non-empty list" in capsys.readouterr().err
    # a key that names no cell and no need is a mistake, not a runner nobody asks for
    (tmp_path / "pyproject.toml").write_text('[tool.xharness]\nrunners = { gpus = "gpu-box" }\n')
    assert cli.main(["cells", "--github"]) == 2
    assert "[tool.xharness.runners] names 'gpus': neither a cell of " in capsys.readouterr().err


def test_under_the_slurm_executor_every_cell_needs_a_runner_with_the_cluster(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""
        [tool.xharness]
        executor = "slurm"
        runners = { slurm = "login-node" }
        cells = [{ name = "cpu-2", devices = 2 }, { name = "gpu-1", backend = "gpu" }]
    """))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["cells", "--github"]) == 0
    outputs = dict(line.split("=", 1) for line in capsys.readouterr().out.splitlines())
    assert json.loads(outputs["matrix"])["include"] == [{"cell": "cpu-2", "runs-on": ["login-node"]}]
    assert [c["cell"] for c in json.loads(outputs["not_run"])] == ["gpu-1"]


def test_force_never_rewrites_the_section_and_workflow_only_writes_the_workflow(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pyproject = _pyproject(tmp_path)
    assert _init(tmp_path, "--install", USABLE) == 0
    pyproject.write_text(pyproject.read_text().replace('reports = "reports"', 'reports = "out"') + EXTRA_CELL)
    mine = pyproject.read_text()
    example = tmp_path / starter.TEST_FILE
    example.write_text("# my own edits\n")
    capsys.readouterr()
    assert _init(tmp_path, "--force", "--install", USABLE) == 0
    assert pyproject.read_text() == mine
    assert "keep [tool.xharness] of" in capsys.readouterr().out
    # the same for an xharness.toml
    own = tmp_path / "own"
    assert _init(own, "--install", USABLE) == 0
    (own / "xharness.toml").write_text((own / "xharness.toml").read_text() + '\n[[cells]]\nname = "cpu-2"\ndevices = 2\n')
    kept = (own / "xharness.toml").read_text()
    assert _init(own, "--force", "--install", USABLE) == 0
    assert (own / "xharness.toml").read_text() == kept
    # --workflow-only: the workflow again (no --force needed), nothing else touched
    example.write_text("# my own edits\n")
    (tmp_path / starter.WORKFLOW_FILE).write_text("stale\n")
    capsys.readouterr()
    assert _init(tmp_path, "--workflow-only", "--install", "xharness==9.9") == 0
    out = capsys.readouterr().out
    assert f"replace {tmp_path / starter.WORKFLOW_FILE}" in out and out.count("xharness init: replace") == 1
    assert 'XHARNESS: "xharness==9.9"' in (tmp_path / starter.WORKFLOW_FILE).read_text()
    assert example.read_text() == "# my own edits\n" and pyproject.read_text() == mine
    # what changes is shown as a diff; a second run changes nothing and says so
    assert "-stale\n" in out and '+  XHARNESS: "xharness==9.9"\n' in out
    assert _init(tmp_path, "--workflow-only", "--install", "xharness==9.10") == 0
    out = capsys.readouterr().out
    assert '-  XHARNESS: "xharness==9.9"\n+  XHARNESS: "xharness==9.10"\n' in out
    assert len([ln for ln in out.splitlines() if ln.startswith("-") and not ln.startswith("---")]) == 1
    assert _init(tmp_path, "--workflow-only", "--install", "xharness==9.10") == 0
    assert f"unchanged {tmp_path / starter.WORKFLOW_FILE}" in capsys.readouterr().out


def test_the_workflow_tests_the_runtime_the_kept_section_names(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.xharness]\nruntime = "jax"\n')
    assert _init(root, "--workflow-only", "--install", USABLE) == 0
    assert "xharness teeth --runtime jax" in (root / starter.WORKFLOW_FILE).read_text()


def test_an_install_line_a_runner_cannot_use_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    local = install_source.requirement("xharness", "1.0", {"url": "file:///src/xharness",
                                                            "vcs_info": {"vcs": "git", "commit_id": "ab12"}})
    assert local.requirement == "xharness @ git+file:///src/xharness@ab12" and local.local_only
    monkeypatch.setattr(install_source, "installed", lambda name: local)
    assert _init(tmp_path) == 2
    err = capsys.readouterr().err
    assert "which a CI runner cannot install" in err and "--install" in err
    assert list(tmp_path.iterdir()) == []  # nothing written
    for bad, why in (("xharness @ file:///src/xharness", "a path on this machine"),
                     ("xharness @ git+file:///src/xharness@ab12", "a path on this machine"),
                     ("other-package==1.0", "not 'xharness'"),
                     ("xharness @ /src/xharness", "a path on this machine"),
                     ("xharness @@ nothing", "not a pip requirement")):
        assert _init(tmp_path, "--install", bad) == 2, bad
        assert why in capsys.readouterr().err, bad
        assert list(tmp_path.iterdir()) == []
    assert _init(tmp_path, "--install", USABLE) == 0
    assert f'XHARNESS: "{USABLE}"' in (tmp_path / starter.WORKFLOW_FILE).read_text()


def test_a_checkout_with_a_scp_style_remote_installs_over_ssh() -> None:
    assert install_source._fetchable("git@github.com:o/xharness.git") == "ssh://git@github.com/o/xharness.git"
    assert install_source._fetchable("https://github.com/o/xharness") == "https://github.com/o/xharness"


def test_the_python_is_the_one_init_runs_under_unless_named(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert _init(tmp_path / "a", "--install", USABLE) == 0
    assert f"the workflow sets up Python {here} (the Python init runs under" in capsys.readouterr().out
    versions = {str(s["with"]["python-version"]) for job in _flow(tmp_path / "a")["jobs"].values()
                for s in job["steps"] if "setup-python" in str(s.get("uses", ""))}
    assert versions == {here}
    assert _init(tmp_path / "b", "--install", USABLE, "--python", "3.13") == 0
    assert "sets up Python 3.13 (--python)" in capsys.readouterr().out
    assert 'python-version: "3.13"' in (tmp_path / "b" / starter.WORKFLOW_FILE).read_text()


def test_every_job_upgrades_pip_and_the_caches_are_kept(tmp_path: Path) -> None:
    assert _init(tmp_path, "--install", USABLE) == 0
    flow = _flow(tmp_path)
    for name, job in flow["jobs"].items():
        installs = [s["run"] for s in job["steps"] if s.get("name") == "Install"]
        assert installs, name
        lines = installs[0].splitlines()
        assert lines[0] == "python -m pip install --upgrade pip" and 'python -m pip install "$XHARNESS"' in lines[1:]
    sha, tag = ACTIONS["actions/cache"]
    cached = {job: [s["with"] for s in flow["jobs"][job]["steps"] if s.get("uses") == f"actions/cache@{sha}"]
              for job in (PLAN_JOB, "cells")}
    assert [c["path"] for c in cached["cells"]] == ["~/.cache/pip", "~/.cache/xharness/jax"]
    assert "${{ matrix.cell }}" in cached["cells"][1]["key"] and cached["cells"][1]["restore-keys"]
    assert [c["path"] for c in cached[PLAN_JOB]] == ["~/.cache/pip"]
    # pinned as the harness' own workflow pins it
    assert f"uses: actions/cache@{sha} # {tag}" in (ROOT / ".github" / "workflows" / "ci.yml").read_text()


def _tool(name: str) -> str | None:
    found = shutil.which(name) or str(ROOT / ".venv" / "bin" / name)
    return found if Path(found).exists() else None


@pytest.mark.skipif(_tool("zizmor") is None or _tool("check-jsonschema") is None,
                    reason="zizmor or check-jsonschema is not installed (the test extra installs them)")
def test_the_workflow_is_valid_and_zizmor_clean(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.xharness]\nruntime = "jax"\n')
    assert _init(root, "--install", USABLE) == 0  # with its teeth job
    flows = root / ".github" / "workflows"
    done = subprocess.run([str(_tool("zizmor")), "--offline", str(flows)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "No findings" in done.stdout + done.stderr, done.stdout + done.stderr
    done = subprocess.run([str(_tool("check-jsonschema")), "--builtin-schema", "vendor.github-workflows",
                           str(flows / "xharness.yml")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_install_step_says_when_its_pip_cannot_read_the_install_line(tmp_path: Path) -> None:
    """The check the Install step runs after upgrading pip, as its own pip reads the line."""
    import subprocess
    import sys

    assert _init(tmp_path, "--install", USABLE) == 0
    (install,) = [s for s in _flow(tmp_path)["jobs"][PLAN_JOB]["steps"] if s.get("name") == "Install"]
    check = install["run"].split("<<'EOF'\n", 1)[1].split("\nEOF\n", 1)[0]
    for line, ok in ((USABLE, True), ("xharness ==", False), ("xharness @", False)):
        done = subprocess.run([sys.executable, "-c", check], env={**os.environ, "XHARNESS": line},
                              capture_output=True, text=True)
        assert (done.returncode == 0) == ok, (line, done.stderr)
        if not ok:
            assert f"the install line {line!r} does not parse with this pip" in done.stderr


def test_init_says_which_jax_the_workflows_python_resolves(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import re
    import sys

    mine = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert _init(tmp_path / "same", "--install", USABLE) == 0
    assert re.search(rf"JAX [\d.]+ is what Python {mine} resolved here \(jax[<>=,.\d]+\)", capsys.readouterr().out)
    assert _init(tmp_path / "other", "--install", USABLE, "--python", "3.99") == 0
    out = capsys.readouterr().out
    assert f"the workflow's Python 3.99 is not this one ({mine}, JAX " in out and "may not be the JAX tested here" in out


def test_when_no_cell_has_a_runner_the_report_job_says_nothing_ran_with_each_reason(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every cell needs a GPU and no runner is named: the cells job is skipped, no JUnit comes
    back, and the report job's own step still writes the pages, which are not green."""
    from harness.commands.workflow import workflow

    steps = YAML(typ="safe").load(workflow("3.11"))["jobs"]["report"]["steps"]
    script = next(step["run"] for step in steps if step.get("name") == "Merge, dashboard and summary")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "artifacts" / "junit").mkdir(parents=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "xharness").write_text(f"#!/bin/sh\nexec {sys.executable} -m harness.cli \"$@\"\n")
    (bin_dir / "xharness").chmod(0o755)
    summary = tmp_path / "step-summary.md"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "GITHUB_STEP_SUMMARY": str(summary),
           "NOT_RUN": '[{"cell": "gpu-1", "why": "cell gpu-1 not run: it needs a GPU"}]'}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    text = summary.read_text()
    assert text.startswith("## xharness results: ⬜ nothing ran\n") and "> cell gpu-1 not run: it needs a GPU" in text
    assert "<title>xharness results: nothing ran</title>" in (tmp_path / "reports" / "index.html").read_text()
