"""Plugins through the three entry-point groups: the harness' own items and a plugin's load by one
path, and every kind of broken plugin is named with its distribution and entry point."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_dists import ADAPTERS, INVARIANTS, REFERENCE_SCENARIO, fake_dist

from harness import adapters, entrypoints
from harness.properties import registry as invariants
from harness.scenarios import registry as scenarios

pytestmark = pytest.mark.cell_independent
ROOT = Path(__file__).resolve().parents[3]


def _forget() -> None:
    entrypoints.reset()
    for cached in (adapters.registry, adapters.adapter_class, adapters.get, scenarios.loaded, invariants.loaded):
        cached.cache_clear()


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory on ``sys.path`` that fake distributions are written into."""
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    (tmp_path / "site").mkdir()
    _forget()
    yield tmp_path / "site"
    _forget()


def test_the_harness_registers_its_own_items_through_the_groups() -> None:
    """The installed metadata holds exactly what pyproject.toml declares, and every item loads."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    for group in entrypoints.GROUPS:
        found = {e.name: e.value for e in entrypoints.entry_points(group) if e.builtin}
        assert found == declared[group], f"{group}: reinstall the project (pip install -e .)"
    assert not adapters.registry().broken
    assert not scenarios.loaded().broken
    assert not invariants.loaded().broken
    assert {s.id for s in scenarios.all_scenarios()} == set(declared["xharness.scenarios"])
    assert {i.id for i in invariants.invariants()} == set(declared["xharness.invariants"])
    assert set(adapters.names()) == set(declared["xharness.runtimes"])


def test_a_source_tree_without_metadata_reads_its_own_pyproject(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(entrypoints.metadata, "entry_points", lambda **select: entrypoints.metadata.EntryPoints(()))
    entrypoints.reset()
    try:
        found = entrypoints.entry_points(entrypoints.RUNTIMES)
        assert {e.name for e in found} == {"reference", "jax", "torch_xla"}
        assert all(e.builtin for e in found)
    finally:
        entrypoints.reset()


def test_a_plugins_items_join_with_their_origin(site: Path) -> None:
    fake_dist(site, "plug-dist", "1.2.3", {
        "xharness.scenarios": {"plug-seen": "plug_pkg.scen:SCENARIO"},
        "xharness.invariants": {"plug-inv": "plug_pkg.inv:GOOD"},
        "xharness.runtimes": {"good": "plug_pkg.ad:Good"},
    }, {"plug_pkg.scen": REFERENCE_SCENARIO, "plug_pkg.inv": INVARIANTS, "plug_pkg.ad": ADAPTERS})
    assert scenarios.get("plug-seen").title == "a plugin's scenario"
    origin = scenarios.origin("plug-seen")
    assert origin is not None and (origin.distribution, origin.version) == ("plug-dist", "1.2.3")
    assert not origin.builtin
    assert invariants.get("plug-inv").needs == ("tensors",)
    assert "good" in adapters.names() and adapters.adapter_class("good").__name__ == "Good"
    assert adapters.get("good").derive(1) == 3
    # the harness' own come first
    assert [s.id for s in scenarios.all_scenarios()][-1] == "plug-seen"


@pytest.mark.parametrize(("group", "name", "value", "reason"), [
    ("xharness.scenarios", "plug-missing", "plug_nowhere.mod:SCENARIO", "cannot import plug_nowhere.mod"),
    ("xharness.scenarios", "plug-int", "plug_pkg.scen:NOT_A_SCENARIO", "is a int, not a harness.api.Scenario"),
    ("xharness.scenarios", "plug-wrong", "plug_pkg.scen:WRONG_ID", "id is 'other-id', registered as 'plug-wrong'"),
    ("xharness.scenarios", "aliased-save", "plug_pkg.scen:SCENARIO", "duplicate name 'aliased-save': xharness"),
    ("xharness.scenarios", "plug-elsewhere", "plug_pkg.scen:ON_UNKNOWN_RUNTIME", "runtime 'nowhere' is not registered"),
    ("xharness.scenarios", "plug-attr", "plug_pkg.scen:NO_SUCH_NAME", "has no NO_SUCH_NAME"),
    ("xharness.invariants", "plug-odd", "plug_pkg.inv:ODD_NEED", "needs unknown capability 'teleport'"),
    ("xharness.invariants", "coverage", "plug_pkg.inv:GOOD", "duplicate name 'coverage'"),
    ("xharness.runtimes", "teleporting", "plug_pkg.ad:Teleporting", "unknown capability 'teleport'"),
    ("xharness.runtimes", "partial", "plug_pkg.ad:Partial", "lacks the protocol's version, device_count"),
    ("xharness.runtimes", "misnamed", "plug_pkg.ad:Misnamed", "the adapter's name is 'something-else'"),
    ("xharness.runtimes", "reference", "plug_pkg.ad:Good", "duplicate name 'reference'"),
])
def test_each_broken_plugin_is_named_with_its_distribution(site: Path, group: str, name: str, value: str,
                                                           reason: str) -> None:
    fake_dist(site, "broken-dist", "0.9", {group: {name: value}},
              {"plug_pkg.scen": REFERENCE_SCENARIO, "plug_pkg.inv": INVARIANTS, "plug_pkg.ad": ADAPTERS})
    loaded = {"xharness.scenarios": scenarios.loaded, "xharness.invariants": invariants.loaded,
              "xharness.runtimes": adapters.registry}[group]()
    (error,) = [e for e in loaded.broken]
    assert str(error).startswith(f"plugin broken-dist 0.9 ({group}: {name} = {value}): ")
    assert reason in str(error)
    # the rest of the group still loads; a duplicate leaves the harness' own item in place
    assert len(loaded.items) == len(entrypoints.entry_points(group)) - 1
    if group == "xharness.scenarios" and name != "aliased-save":
        with pytest.raises(scenarios.UnknownScenario, match="broken-dist 0.9"):
            scenarios.get(name)
    if group == "xharness.runtimes" and name != "reference":
        with pytest.raises(adapters.UnknownRuntime, match="broken-dist 0.9"):
            adapters.get(name)
    if group == "xharness.invariants" and name != "coverage":
        with pytest.raises(invariants.UnknownInvariant, match="broken-dist 0.9"):
            invariants.get(name)


def test_a_broken_plugin_is_warned_about_once(site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake_dist(site, "broken-dist", "0.9", {"xharness.scenarios": {"plug-missing": "plug_nowhere:X"}})
    scenarios.all_scenarios()
    scenarios.all_scenarios()
    err = capsys.readouterr().err
    assert err.count("warning: plugin broken-dist 0.9") == 1
    assert "(left out)" in err
