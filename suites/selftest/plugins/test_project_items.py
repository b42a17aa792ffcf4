"""A maintainer's scenarios and invariants are items of their own runs, and a broken plugin is
never green: ``xharness run`` in a project collects what its distribution registers, in both
modes, at the user's own file and line, and refuses to start (exit 2) while an item is broken;
a plain ``pytest`` there shows the broken item as a failure."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fake_dists import INVARIANTS, REFERENCE_SCENARIO, fake_dist
from junitparser import JUnitXml

from harness import adapters, entrypoints

pytestmark = [pytest.mark.cell_independent, pytest.mark.own_process]

PYPROJECT = """\
[project]
name = "plug-dist"
version = "1.2.3"

[tool.xharness]
testpaths = ["tests"]

[[tool.xharness.cells]]
name = "cpu-2"
devices = 2
"""

NO_TEETH = """
from harness import api

class Seen(AssertionError):
    pass

def _variant(ctx):
    pass  # the trigger never looks at the switch: the scenario cannot catch its bug

TOOTHLESS = api.Scenario(
    id="plug-toothless", title="a scenario without teeth", upstream=(), component="test",
    trigger="nothing", fault="lost-sharding",
    signatures=(api.Signature("seen", "plug_pkg.toothless:Seen", "switch"),),
    variants={"look": _variant},
)
"""


def _project(root: Path, scenarios: dict[str, str], modules: dict[str, str],
             invariants: dict[str, str] | None = None) -> Path:
    """A maintainer's repository whose own distribution (installed in place, as ``pip install -e``
    leaves it) registers ``scenarios`` and ``invariants``."""
    groups = {"xharness.scenarios": scenarios, **({"xharness.invariants": invariants} if invariants else {})}
    fake_dist(root, "plug-dist", "1.2.3", groups, modules)
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "tests").mkdir()
    (root / "tests" / "test_own.py").write_text("def test_own():\n    assert True\n")
    return root


def _env(root: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    for name in ("HARNESS_FAULTS", "HARNESS_RUNTIME", "XHARNESS_PROJECT", "HARNESS_CELL"):
        env.pop(name, None)
    return env


def _xharness(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True,
                          env=_env(root), cwd=root, timeout=600)


def _cases(root: Path) -> dict[str, object]:
    xml = JUnitXml.fromfile(str(root / "reports" / "junit" / "cpu-2.xml"))
    return {case.name: case for suite in xml for case in suite}


def _line(source: str, statement: str) -> int:
    """The 1-based line of ``statement``'s start in a module written by ``fake_dist``."""
    text = textwrap.dedent(source)
    return next(n for n, line in enumerate(text.splitlines(), 1) if line.startswith(statement))


def test_a_projects_scenario_and_invariant_are_items_at_its_own_file(tmp_path: Path) -> None:
    root = _project(tmp_path / "repo", {"plug-seen": "plug_pkg.scen:SCENARIO"},
                    {"plug_pkg.scen": REFERENCE_SCENARIO, "plug_pkg.inv": INVARIANTS},
                    {"plug-inv": "plug_pkg.inv:GOOD"})
    done = _xharness(root, "run")
    assert done.returncode == 0, done.stdout + done.stderr
    cases = _cases(root)
    assert {"test_own", "plug-seen[fixed]", "plug-seen[injected]", "plug-inv"} <= set(cases), sorted(cases)
    for name in ("plug-seen[fixed]", "plug-seen[injected]"):
        case = cases[name]
        assert case.classname == "plug_pkg.scen" and case._elem.get("file") == "plug_pkg/scen.py", name
        # the harness' JUnit lines count from 1, as annotators read them
        assert int(case._elem.get("line")) == _line(REFERENCE_SCENARIO, "SCENARIO = "), name
        assert case.is_passed, name
    props = {p.get("name"): p.get("value") for p in cases["plug-seen[injected]"]._elem.iter("property")}
    assert props["scenario"] == "plug-seen" and props["mode"] == "injected"
    assert props["repro"].endswith("xharness repro plug-seen --inject --seed 0 --cell cpu-2")
    inv = cases["plug-inv"]
    assert inv._elem.get("file") == "plug_pkg/inv.py" and int(inv._elem.get("line")) == _line(INVARIANTS, "GOOD = ")
    assert inv.is_passed


def test_a_scenario_without_teeth_fails_its_injected_item(tmp_path: Path) -> None:
    root = _project(tmp_path / "repo", {"plug-toothless": "plug_pkg.toothless:TOOTHLESS"},
                    {"plug_pkg.toothless": NO_TEETH})
    done = _xharness(root, "run")
    assert done.returncode == 1, done.stdout + done.stderr
    cases = _cases(root)
    assert cases["plug-toothless[fixed]"].is_passed
    failed = cases["plug-toothless[injected]"]
    assert not failed.is_passed and not failed.is_skipped
    text = failed.result[0].text or failed.result[0].message
    assert "plug-toothless [injected]: not-reproduced" in text and "'lost-sharding'" in text, text


BROKEN_IMPORT = "import plug_pkg_missing_dependency\n"


def test_an_import_error_in_a_plugin_module_stops_run_and_fails_plain_pytest(tmp_path: Path) -> None:
    root = _project(tmp_path / "repo", {"plug-seen": "plug_pkg.scen:SCENARIO"},
                    {"plug_pkg.scen": REFERENCE_SCENARIO, "plug_pkg.inv": BROKEN_IMPORT},
                    {"plug-inv": "plug_pkg.inv:GOOD"})
    done = _xharness(root, "run")
    assert done.returncode == 2 and not (root / "reports" / "junit").exists()
    assert ("plugin plug-dist 1.2.3 (xharness.invariants: plug-inv = plug_pkg.inv:GOOD): cannot import "
            "plug_pkg.inv: No module named 'plug_pkg_missing_dependency'") in done.stderr, done.stderr
    for command in ("repro", "teeth"):
        args = ("repro", "plug-seen") if command == "repro" else ("teeth", "--checks", "plug-seen")
        refused = _xharness(root, *args)
        assert refused.returncode == 2 and "(xharness.invariants: plug-inv" in refused.stderr, refused.stderr
    plain = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], capture_output=True,
                           text=True, env=_env(root), cwd=root, timeout=600)
    assert plain.returncode == 1, plain.stdout
    assert "FAILED pyproject.toml::plugin[plug-dist:xharness.invariants:plug-inv]" in plain.stdout, plain.stdout
    assert "No module named 'plug_pkg_missing_dependency'" in plain.stdout


MISSPELLED = REFERENCE_SCENARIO.replace('"plug_pkg.scen:Seen"', '"plug_pkg.scen:Sene"')


@pytest.mark.jax_independent
def test_a_signature_naming_no_class_is_a_broken_plugin_at_load(tmp_path: Path) -> None:
    root = _project(tmp_path / "repo", {"plug-seen": "plug_pkg.scen:SCENARIO"}, {"plug_pkg.scen": MISSPELLED})
    done = _xharness(root, "run")
    assert done.returncode == 2, done.stdout + done.stderr
    assert ("(xharness.scenarios: plug-seen = plug_pkg.scen:SCENARIO): signature 'seen' names "
            "plug_pkg.scen:Sene, but plug_pkg.scen has no Sene") in done.stderr, done.stderr
    listed = _xharness(root, "list")
    assert listed.returncode == 0 and "warning: plugin plug-dist 1.2.3" in listed.stderr
    shown = _xharness(root, "config")
    assert shown.returncode == 0 and "1 broken:" in shown.stdout and "has no Sene" in shown.stdout


@pytest.mark.jax_independent
def test_an_adapter_derived_from_base_adapter_is_told_what_it_lacks() -> None:
    from harness import api

    class Half(api.BaseAdapter):
        name = "half"
        capabilities = frozenset({api.TENSORS})

        def tensor(self, host: object) -> object:
            return host

    entry = entrypoints.EntryPoint(entrypoints.RUNTIMES, "half", "m:Half", "half-dist", "1.0")
    why = adapters.check_adapter_class(entry, Half) or ""
    assert "lacks the protocol's device_count, to_host, mesh" in why and "has no default for them" in why
    assert "derive it from" not in why

    class Bare:
        name = "half"
        capabilities = frozenset({api.TENSORS})

    assert "derive it from harness.api.BaseAdapter" in (adapters.check_adapter_class(entry, Bare) or "")


@pytest.mark.jax_independent
def test_config_names_the_runtime_under_test_and_where_it_came_from(tmp_path: Path) -> None:
    root = _project(tmp_path / "repo", {"plug-seen": "plug_pkg.scen:SCENARIO"}, {"plug_pkg.scen": REFERENCE_SCENARIO})
    shown = _xharness(root, "config")
    assert shown.returncode == 0, shown.stderr
    assert "runtime under test: reference (from default)" in shown.stdout
    assert "plugins: xharness " in shown.stdout and "plug-dist 1.2.3; all load" in shown.stdout
    (root / "pyproject.toml").write_text(PYPROJECT.replace('testpaths = ["tests"]\n',
                                                           'testpaths = ["tests"]\nruntime = "jax"\n'))
    shown = _xharness(root, "config")
    assert f"runtime under test: jax (from {root / 'pyproject.toml'}:7 runtime)" in shown.stdout, shown.stdout
    row = next(line for line in shown.stdout.splitlines() if line.startswith("HARNESS_RUNTIME="))
    assert row.startswith("HARNESS_RUNTIME=jax") and "pyproject.toml:7 runtime" in row
    env_chosen = subprocess.run([sys.executable, "-m", "harness.cli", "config"], capture_output=True, text=True,
                                env={**_env(root), "HARNESS_RUNTIME": "reference"}, cwd=root, timeout=120)
    assert "runtime under test: reference (from environment (HARNESS_RUNTIME))" in env_chosen.stdout
