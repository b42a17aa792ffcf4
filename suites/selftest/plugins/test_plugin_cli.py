"""The commands with plugins installed: a broken plugin never breaks ``xharness list``, a command
that judges a runtime exits 2 naming every broken item, and a plugin's scenario runs through
``xharness repro``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_dists import REFERENCE_SCENARIO, fake_dist

pytestmark = [pytest.mark.cell_independent, pytest.mark.own_process]


def _xharness(site: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(site)}
    env.pop("HARNESS_FAULTS", None)
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    return fake_dist(tmp_path / "site", "plug-dist", "1.2.3", {
        "xharness.scenarios": {"plug-seen": "plug_pkg.scen:SCENARIO",
                               "plug-broken": "plug_pkg.scen:NOT_A_SCENARIO"},
        "xharness.runtimes": {"ghost": "plug_ghost.adapter:Ghost"},
    }, {"plug_pkg.scen": REFERENCE_SCENARIO})


@pytest.mark.jax_independent
def test_list_survives_a_broken_plugin_and_shows_origins(site: Path) -> None:
    done = _xharness(site, "list", "--json")
    assert done.returncode == 0, done.stderr
    records = {r["id"]: r for r in json.loads(done.stdout)}
    assert "aliased-save" in records and records["aliased-save"]["distribution"] == "xharness"
    assert records["plug-seen"]["distribution"] == "plug-dist" and records["plug-seen"]["version"] == "1.2.3"
    assert records["plug-seen"]["entry_point"] == "plug-seen = plug_pkg.scen:SCENARIO"
    assert "plug-broken" not in records
    assert "warning: plugin plug-dist 1.2.3 (xharness.scenarios: plug-broken = plug_pkg.scen:NOT_A_SCENARIO)" in done.stderr
    text = _xharness(site, "list")
    assert text.returncode == 0 and "(from plug-dist 1.2.3)" in text.stdout
    runtimes = _xharness(site, "list", "runtimes")
    assert runtimes.returncode == 0, runtimes.stderr
    assert "cannot import plug_ghost.adapter" in runtimes.stderr and "ghost" not in runtimes.stdout


@pytest.mark.jax_independent
def test_a_command_that_needs_a_broken_plugin_exits_2_naming_it(site: Path, tmp_path: Path) -> None:
    done = _xharness(site, "repro", "plug-broken")
    assert done.returncode == 2
    assert "plugin plug-dist 1.2.3 (xharness.scenarios: plug-broken = plug_pkg.scen:NOT_A_SCENARIO)" in done.stderr
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "xharness.toml").write_text('[[cells]]\nname = "c"\nruntime = { name = "ghost" }\n')
    run = _xharness(site, "run", "--runtime", "ghost", cwd=tmp_path / "proj")
    assert run.returncode == 2
    assert "plug-dist 1.2.3 (xharness.runtimes: ghost = plug_ghost.adapter:Ghost)" in run.stderr, run.stderr


@pytest.mark.jax_independent
def test_repro_refuses_while_another_item_of_the_plugin_is_broken(site: Path) -> None:
    """The scenario asked for loads, but its distribution's other items do not: a run that
    leaves them out cannot be trusted, so nothing runs."""
    done = _xharness(site, "repro", "plug-seen", "--json")
    assert done.returncode == 2 and not done.stdout
    assert "2 plugin item(s) cannot be loaded" in done.stderr
    assert "(xharness.runtimes: ghost = plug_ghost.adapter:Ghost): cannot import plug_ghost.adapter" in done.stderr
    assert "(xharness.scenarios: plug-broken = plug_pkg.scen:NOT_A_SCENARIO)" in done.stderr


@pytest.fixture
def good_site(tmp_path: Path) -> Path:
    return fake_dist(tmp_path / "good", "plug-dist", "1.2.3", {
        "xharness.scenarios": {"plug-seen": "plug_pkg.scen:SCENARIO"}}, {"plug_pkg.scen": REFERENCE_SCENARIO})


def test_a_plugins_scenario_runs_fixed_and_injected(good_site: Path) -> None:
    site = good_site
    fixed = _xharness(site, "repro", "plug-seen", "--json")
    assert fixed.returncode == 0, fixed.stderr
    assert json.loads(fixed.stdout)["outcome"] == "passed"
    injected = _xharness(site, "repro", "plug-seen", "--inject", "--json")
    assert injected.returncode == 0, injected.stderr
    out = json.loads(injected.stdout)
    assert (out["outcome"], out["signature"]) == ("reproduced", "seen")
