"""Through a whole ``xharness run`` in a maintainer's repository: an injected scenario's record
names the signature it showed (as ``xharness repro`` does), a scenario item that fails says why
on its message's first line, and so does a bare numpy assertion of the project's own suite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_dists import REFERENCE_SCENARIO, fake_dist
from junitparser import JUnitXml

pytestmark = [pytest.mark.cell_independent, pytest.mark.own_process]

PYPROJECT = """\
[project]
name = "msg-dist"
version = "0.1.0"

[tool.xharness]
testpaths = ["tests"]

[[tool.xharness.cells]]
name = "cpu-1"
devices = 1
"""

TOOTHLESS = """
from harness import api

class Seen(AssertionError):
    pass

def _variant(ctx):
    pass

TOOTHLESS = api.Scenario(
    id="msg-toothless", title="a scenario without teeth", upstream=(), component="test",
    trigger="nothing", fault="lost-sharding",
    signatures=(api.Signature("seen", "msg_pkg.toothless:Seen", "switch"),),
    variants={"look": _variant},
)
"""

NUMPY_TEST = """
import numpy as np

def test_values():
    np.testing.assert_array_equal(np.arange(6), np.arange(6) * (np.arange(6) < 5))
"""


def test_records_say_what_happened(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    fake_dist(root, "msg-dist", "0.1.0",
              {"xharness.scenarios": {"msg-seen": "msg_pkg.scen:SCENARIO", "msg-toothless": "msg_pkg.toothless:TOOTHLESS"}},
              {"msg_pkg.scen": REFERENCE_SCENARIO.replace("plug-seen", "msg-seen").replace("plug_pkg", "msg_pkg"),
               "msg_pkg.toothless": TOOTHLESS})
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "tests").mkdir()
    (root / "tests" / "test_values.py").write_text(NUMPY_TEST)
    env = {**os.environ, "PYTHONPATH": str(root)}
    for name in ("HARNESS_FAULTS", "HARNESS_RUNTIME", "XHARNESS_PROJECT", "HARNESS_CELL"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    cases = {c.name: c for s in JUnitXml.fromfile(str(root / "reports" / "junit" / "cpu-1.xml")) for c in s}
    seen = cases["msg-seen[injected]"]
    assert seen.is_passed
    props = {p.get("name"): p.get("value") for p in seen._elem.iter("property")}
    assert props["signature"] == "seen", props
    toothless = cases["msg-toothless[injected]"].result[0].message.splitlines()[0]
    assert toothless.startswith("msg-toothless [injected]: not-reproduced, where its fault switch"), toothless
    numpy_first = cases["test_values"].result[0].message.splitlines()[0]
    assert numpy_first == "AssertionError: Arrays are not equal", numpy_first
    # the terminal's line is the same first line
    assert "FAILED: tests/test_values.py::test_values: AssertionError: Arrays are not equal" in done.stdout, done.stdout
    assert "not-reproduced, where its fault switch" in done.stdout
