"""The catalog's injected records name the signature they showed, as a plugin's injected scenario
items do (``harness.project_items``): a reader of the JUnit sees which of the bug's signatures a
run reproduced without reading its log, and a fixed record carries none."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.report import properties as prop
from harness.scenarios import registry

pytestmark = [pytest.mark.cell_independent, pytest.mark.own_process]

ROOT = Path(__file__).resolve().parents[3]
SCENARIO = "unhashable-spec"  # one variant, one signature, and quick in any cell


def test_an_injected_catalog_record_names_its_signature(tmp_path: Path) -> None:
    junit = tmp_path / "catalog.xml"
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_FAULTS", "HARNESS_CELL")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(ROOT / "suites/regression/test_catalog.py"), "-q",
         "-p", "no:cacheprovider", "-p", "no:xdist", "-k", SCENARIO, f"--junitxml={junit}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    props = {case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
             for case in ET.parse(junit).getroot().iter("testcase")}
    injected = props[f"test_scenario[{SCENARIO}-injected]"]
    declared = {sig.name for sig in registry.get(SCENARIO).signatures}
    assert injected.get(prop.SIGNATURE) in declared, injected
    assert prop.SIGNATURE not in props[f"test_scenario[{SCENARIO}-fixed]"]
