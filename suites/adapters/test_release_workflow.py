"""The workflow runs the catalog against each PyTorch/XLA release in a job of its own, with the
release's environment cached, feeding the merged report like any cell."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ruamel.yaml import YAML

ROOT = Path(__file__).parents[2]


def test_one_job_per_release_with_a_cached_environment_and_its_own_junit() -> None:
    workflow = YAML(typ="safe").load((ROOT / ".github/workflows/ci.yml").read_text())
    job = workflow["jobs"]["releases"]
    assert job["strategy"]["fail-fast"] is False
    assert job["strategy"]["matrix"]["release"] == ["2.5.1", "2.9.0"]
    steps = job["steps"]
    (cache,) = [s for s in steps if str(s.get("uses", "")).startswith("actions/cache@")]
    assert cache["with"]["path"] == "~/.cache/xharness/envs"
    key = cache["with"]["key"]
    assert "${{ matrix.release }}" in key and "steps.python.outputs.python-version" in key
    assert any(s.get("run") == 'bash ci/releases.sh "${{ matrix.release }}"' for s in steps)
    (upload,) = [s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    assert upload["with"]["name"] == "junit-torch_xla-${{ matrix.release }}"  # merged by `report`
    assert upload["if"] == "always()"
    assert "releases" in workflow["jobs"]["report"]["needs"]


def test_the_release_scripts_parse_and_the_test_job_runs_the_release_step() -> None:
    subprocess.run(["bash", "-n", str(ROOT / "ci/releases.sh")], check=True)
    assert "bash ci/releases.sh 2.9.0" in (ROOT / "ci/test.sh").read_text()
