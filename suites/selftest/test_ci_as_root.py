"""The harness' own test job runs its script as root on the hosted runner (through its
passwordless sudo), with the Python the job set up: in a container, or as the runner's user, the
cluster and network suites skip (they need a root that owns the machine)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ruamel.yaml import YAML

pytestmark = pytest.mark.cell_independent
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def job() -> dict:
    return YAML(typ="safe").load((ROOT / ".github" / "workflows" / "ci.yml").read_text())["jobs"]["lint-and-test"]


def test_the_test_script_runs_as_root_with_the_jobs_python_and_environment(job: dict) -> None:
    assert "container" not in job, "a container job's root cannot make namespaces or run SLURM: run on the runner"
    (script,) = [s["run"] for s in job["steps"] if "ci/test.sh" in s.get("run", "")]
    # sudo -E keeps the job's env (XHARNESS_SKIP_*); PATH is passed explicitly, as secure_path resets it
    assert re.fullmatch(r'sudo -E env "PATH=\$PATH" (HOME=\S+ )?bash ci/test\.sh', script), script
    assert {"XHARNESS_SKIP_RELEASES", "XHARNESS_SKIP_NEWEST"} <= set(job.get("env", {}))
    steps = [str(s.get("uses", "")) + s.get("run", "") for s in job["steps"]]
    python = next(i for i, s in enumerate(steps) if s.startswith("actions/setup-python@"))
    assert python < next(i for i, s in enumerate(steps) if "ci/test.sh" in s)
    (setup,) = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/setup-python@")]
    assert setup["with"]["python-version"] == "${{ matrix.python }}"


def test_the_set_up_finds_the_runners_own_chromium() -> None:
    """A hosted Ubuntu runner ships chromium-browser and its apt has no `chromium`: the set-up
    must not try to install one there."""
    text = (ROOT / "ci" / "setup.sh").read_text()
    assert "command -v chromium-browser" in text
