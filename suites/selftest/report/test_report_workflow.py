"""The GitHub Actions workflow: valid against GitHub's schema (offline) and wired as documented."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from harness.matrix.config import load_matrix

ROOT = Path(__file__).parents[3]
WORKFLOW = ROOT / ".github/workflows/ci.yml"
WORKFLOW_TEXT = WORKFLOW.read_text()
# the workflow runs one job per CPU cell of the matrix, in the matrix's order
CPU_CELLS = [c.name for c in load_matrix(ROOT / "ci/matrix.toml").cells.values() if c.backend == "cpu"]


def check_jsonschema(path: Path) -> subprocess.CompletedProcess[str]:
    """check-jsonschema with its bundled copy of the workflow schema: no network needed."""
    exe = Path(sys.executable).with_name("check-jsonschema")
    command = (
        [str(exe)] if exe.exists() else [shutil.which("check-jsonschema") or "check-jsonschema"]
    )
    return subprocess.run(
        [*command, "--builtin-schema", "vendor.github-workflows", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def workflow() -> dict:
    return YAML(typ="safe").load(WORKFLOW.read_text())


def test_workflow_matches_github_schema() -> None:
    result = check_jsonschema(WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok -- validation done" in result.stdout


def test_schema_check_rejects_a_broken_workflow(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text("on: push\njobs:\n  x:\n    runs-on: ubuntu-latest\n    steps: not-a-list\n")
    result = check_jsonschema(broken)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output  # a validation failure, not a crash or a usage error
    assert "Schema validation errors were encountered" in output
    assert "$.jobs.x.steps: 'not-a-list' is not of type 'array'" in output


def steps_using(job: dict, action: str) -> list[dict]:
    """The job's steps that use ``action`` (``owner/name@major``), whatever commit pins it."""
    name, _, major = action.partition("@")
    return [s for s in job["steps"] if str(s.get("uses", "")).split("@")[0] == name and _pins(s, major)]


#: every ``uses:`` of the workflow, as written: the pinned commit and the version comment
USES = re.compile(r"uses:\s*(?P<action>[\w./-]+)@(?P<ref>\S+)(?:\s*#\s*(?P<version>v[\w.]+))?")


def _pins(step: dict, major: str) -> bool:
    """Whether a step's pin is of ``major`` (v4): the version comment on its line says so."""
    if not major:
        return True
    line = next((m for m in USES.finditer(WORKFLOW_TEXT) if m.group("ref") == str(step["uses"]).split("@")[1]), None)
    return line is not None and (line.group("version") or "").split(".")[0] == major


def test_every_action_is_pinned_to_a_commit_with_its_version() -> None:
    """A tag can be moved to other code; a commit cannot. The comment keeps the version readable
    (and is what dependabot updates alongside the commit)."""
    found = list(USES.finditer(WORKFLOW_TEXT))
    assert found, "no uses: in the workflow"
    for m in found:
        assert re.fullmatch(r"[0-9a-f]{40}", m.group("ref")), f"{m.group(0)}: pin the action to a full commit SHA"
        assert m.group("version"), f"{m.group(0)}: add the release it is, as a comment (# v4.4.0)"


def test_every_checkout_drops_its_credentials_and_every_job_reads_only(workflow: dict) -> None:
    assert workflow.get("permissions") == {}, "the workflow's default permissions must be none: permissions: {}"
    for name, job in workflow["jobs"].items():
        assert job.get("permissions") == {"contents": "read"}, f"job {name}: permissions: contents: read"
        for step in steps_using(job, "actions/checkout"):
            assert step.get("with", {}).get("persist-credentials") is False, f"job {name}: persist-credentials: false"


def test_lint_and_test_job_runs_ci_test(workflow: dict) -> None:
    runs = [s.get("run", "") for s in workflow["jobs"]["lint-and-test"]["steps"]]
    assert any(r.endswith("bash ci/test.sh") for r in runs), runs


def test_one_job_per_cpu_cell_each_uploading_its_own_artifact(workflow: dict) -> None:
    job = workflow["jobs"]["cells"]
    assert job["strategy"]["fail-fast"] is False
    assert CPU_CELLS, "ci/matrix.toml names no CPU cell"
    assert job["strategy"]["matrix"]["cell"] == CPU_CELLS
    assert any(
        'ci/cell.sh "$CELL"' in s.get("run", "") and s.get("env", {}).get("CELL") == "${{ matrix.cell }}"
        for s in job["steps"]
    )
    uploads = {u["with"]["name"]: u for u in steps_using(job, "actions/upload-artifact@v4")}
    assert set(uploads) == {"junit-${{ matrix.cell }}", "logs-${{ matrix.cell }}"}
    assert uploads["junit-${{ matrix.cell }}"]["if"] == "always()"
    # rank logs only when the cell failed, and never under the junit-* pattern the merge downloads
    assert uploads["logs-${{ matrix.cell }}"]["if"] == "failure()"
    assert uploads["logs-${{ matrix.cell }}"]["with"]["path"] == "reports/logs/"
    assert (ROOT / "ci/cell.sh").read_text().count("xharness run --cells") == 1


def test_report_job_merges_everything_even_after_failures(workflow: dict) -> None:
    job = workflow["jobs"]["report"]
    assert set(job["needs"]) == {"cells", "gpu", "tpu", "releases"} and job["if"] == "always()"
    (download,) = steps_using(job, "actions/download-artifact@v4")
    assert download["with"]["pattern"] == "junit-*"
    assert download["with"]["merge-multiple"] is True
    runs = "\n".join(s.get("run", "") for s in job["steps"])
    assert "bash ci/report.sh artifacts/junit reports" in runs
    assert 'cat reports/summary.md >> "$GITHUB_STEP_SUMMARY"' in runs
    script = (ROOT / "ci/report.sh").read_text()
    assert "xharness report merge" in script and "xharness report html" in script
    uploads = steps_using(job, "actions/upload-artifact@v4")
    assert any("reports/index.html" in u["with"]["path"] for u in uploads)


def test_artifact_names_are_unique(workflow: dict) -> None:
    names = [
        step["with"]["name"]
        for job in workflow["jobs"].values()
        for step in steps_using(job, "actions/upload-artifact@v4")
    ]
    assert len(names) == len(set(names))


@pytest.mark.parametrize(("job", "variable"), [("gpu", "XHARNESS_GPU"), ("tpu", "XHARNESS_TPU")])
def test_accelerator_jobs_are_self_hosted_and_off_by_default(workflow, job, variable) -> None:
    spec = workflow["jobs"][job]
    assert spec["if"] == f"vars.{variable} == 'true'"
    assert "self-hosted" in spec["runs-on"] and job in spec["runs-on"]
    assert variable in WORKFLOW.read_text().split("name: ci")[0]  # documented in the header


def test_ci_scripts_parse() -> None:
    for script in ("ci/cell.sh", "ci/report.sh"):
        subprocess.run(["bash", "-n", str(ROOT / script)], check=True)
