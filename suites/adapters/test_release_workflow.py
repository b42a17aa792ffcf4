"""The workflow runs the catalog against each runtime release (the PyTorch/XLA releases, and JAX at
its lowest declared bound) in a job of its own, with the release's environment cached, feeding the
merged report like any cell."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ruamel.yaml import YAML

ROOT = Path(__file__).parents[2]


def test_one_job_per_release_with_a_cached_environment_and_its_own_junit() -> None:
    workflow = YAML(typ="safe").load((ROOT / ".github/workflows/ci.yml").read_text())
    job = workflow["jobs"]["releases"]
    assert job["strategy"]["fail-fast"] is False
    include = job["strategy"]["matrix"]["include"]
    assert [(e["runtime"], e["release"]) for e in include] == [
        ("torch_xla", "2.5.1"),
        ("torch_xla", "2.9.0"),
        ("jax", "0.10.0"),  # the lowest bound of pyproject.toml's range (test_declared_range.py)
    ]
    steps = job["steps"]
    (cache,) = [s for s in steps if str(s.get("uses", "")).startswith("actions/cache@")]
    assert cache["with"]["path"] == "~/.cache/xharness/envs"
    key = cache["with"]["key"]
    assert "${{ matrix.runtime }}-${{ matrix.release }}" in key
    assert "steps.python.outputs.python-version" in key
    (run,) = [s for s in steps if "ci/releases.sh" in s.get("run", "")]
    assert run["run"] == 'bash ci/releases.sh "$RUNTIME" "$RELEASE"'
    assert run["env"] == {"RUNTIME": "${{ matrix.runtime }}", "RELEASE": "${{ matrix.release }}"}
    (upload,) = [s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    # unique per job, and merged by `report`
    assert upload["with"]["name"] == "junit-${{ matrix.runtime }}-${{ matrix.release }}"
    assert upload["if"] == "always()"
    assert "releases" in workflow["jobs"]["report"]["needs"]


def test_the_release_scripts_parse_and_the_test_job_runs_the_release_step() -> None:
    subprocess.run(["bash", "-n", str(ROOT / "ci/releases.sh")], check=True)
    assert "bash ci/releases.sh 2.9.0" in (ROOT / "ci/test.sh").read_text()
