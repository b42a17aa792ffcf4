"""Loading a group of entry points item by item: what each reference may name, the exact sentence
each kind of failure reads as, that one broken item never stops the ones after it, how a clash of
names is settled, and the harness' own items read from its source tree."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import entrypoints
from harness.entrypoints import EntryPoint, PluginError

pytestmark = pytest.mark.cell_independent
ROOT = Path(__file__).resolve().parents[3]
GROUP = "xharness.scenarios"


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    entrypoints.reset()
    yield
    entrypoints.reset()


def _entry(name: str, value: str, distribution: str = "plug-dist", version: str = "1.0") -> EntryPoint:
    return EntryPoint(GROUP, name, value, distribution, version)


def _own(name: str, value: str) -> EntryPoint:
    return _entry(name, value, entrypoints.OWN_DISTRIBUTION, "0.1")


def _anything(entry: EntryPoint, obj: Any) -> str | None:
    return None


def _reject_by_name(entry: EntryPoint, obj: Any) -> str | None:
    return f"{entry.value} is not wanted here" if entry.name.startswith("rejected") else None


def test_a_reference_names_a_module_an_attribute_or_a_dotted_attribute() -> None:
    import harness.settings

    assert _entry("m", "harness.settings").load() is harness.settings
    assert _entry("a", " harness.settings : Setting ").load() is harness.settings.Setting
    assert _entry("d", "harness.settings:Setting.parse").load() is harness.settings.Setting.parse


def test_each_failed_import_reads_as_one_sentence_naming_the_distribution(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "plug_raises_at_import.py").write_text('raise RuntimeError("no accelerator here")\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError) as caught:
        _entry("raising", "plug_raises_at_import:SCENARIO").load()
    assert str(caught.value) == ("plugin plug-dist 1.0 (xharness.scenarios: raising = plug_raises_at_import:SCENARIO): "
                                 "importing it raised RuntimeError: no accelerator here")
    assert caught.value.entry.name == "raising"
    assert caught.value.reason == "importing it raised RuntimeError: no accelerator here"
    with pytest.raises(PluginError) as caught:
        _entry("attr", "harness.settings:Setting.nothing").load()
    assert str(caught.value).startswith("plugin plug-dist 1.0 (xharness.scenarios: attr = "
                                        "harness.settings:Setting.nothing): harness.settings has no Setting.nothing: ")


def test_every_item_after_a_broken_one_still_loads(capsys: pytest.CaptureFixture[str]) -> None:
    names = (
        _own("own", "harness.settings:WHERE"),
        _entry("own", "harness.settings:PREFIXES"),  # a clash: the harness' own keeps the name
        _entry("after-clash", "harness.settings:WHERE"),
        _entry("missing", "plug_nowhere_at_all:X"),
        _entry("after-missing", "harness.settings:PREFIXES"),
        _entry("rejected", "harness.settings:WHERE"),
        _entry("after-rejected", "harness.settings:SETTINGS"),
    )
    loaded = entrypoints.load_group(GROUP, _reject_by_name, names)
    assert list(loaded.items) == ["own", "after-clash", "after-missing", "after-rejected"]
    assert loaded.items["own"] == (names[0], ("environment", "matrix cell", "[tool.xharness]"))
    assert [str(e) for e in loaded.broken] == [
        "plugin plug-dist 1.0 (xharness.scenarios: own = harness.settings:PREFIXES): duplicate name 'own': "
        "xharness 0.1 (xharness.scenarios: own = harness.settings:WHERE) has it",
        "plugin plug-dist 1.0 (xharness.scenarios: missing = plug_nowhere_at_all:X): cannot import "
        "plug_nowhere_at_all: No module named 'plug_nowhere_at_all'",
        "plugin plug-dist 1.0 (xharness.scenarios: rejected = harness.settings:WHERE): "
        "harness.settings:WHERE is not wanted here",
    ]
    assert entrypoints.find(loaded, "missing") is loaded.broken[1]
    assert entrypoints.find(loaded, "after-missing") is None
    assert entrypoints.find(loaded, "never-registered") is None
    assert capsys.readouterr().err == ""  # items given by name are the caller's to report


def test_a_broken_own_item_keeps_its_name_from_a_plugin_but_not_other_names() -> None:
    names = (
        _own("shared", "plug_nowhere_at_all:X"),
        _own("other-own", "harness.settings:ENV"),
        _entry("shared", "harness.settings:CELL"),
        _entry("plugin-only", "harness.settings:PROJECT"),
    )
    loaded = entrypoints.load_group(GROUP, _anything, names)
    assert list(loaded.items) == ["other-own", "plugin-only"]
    assert [e.entry for e in loaded.broken] == [names[0], names[2]]
    assert loaded.broken[1].reason == ("duplicate name 'shared': xharness 0.1 (xharness.scenarios: shared = "
                                       "plug_nowhere_at_all:X) has it")


def test_loading_a_whole_group_reads_its_registered_items_only() -> None:
    loaded = entrypoints.load_group("xharness.nothing-registered", _anything)
    assert (loaded.items, loaded.broken) == ({}, [])


def test_a_broken_item_is_warned_about_once_per_process(capsys: pytest.CaptureFixture[str]) -> None:
    error = PluginError(_entry("gone", "plug_nowhere_at_all:X"), "cannot import plug_nowhere_at_all")
    entrypoints.warn([error])
    entrypoints.warn([error, error])
    assert capsys.readouterr().err == (
        "xharness: warning: plugin plug-dist 1.0 (xharness.scenarios: gone = plug_nowhere_at_all:X): "
        "cannot import plug_nowhere_at_all (left out)\n")


def test_a_distribution_name_compares_in_lower_case_with_dashes() -> None:
    assert entrypoints.normal_name(" My_Plugin_Dist ") == "my-plugin-dist"
    assert entrypoints.normal_name("xharness") == entrypoints.OWN_DISTRIBUTION


def test_the_source_tree_declares_the_harness_own_items_with_its_version() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    for group in entrypoints.GROUPS:
        own = entrypoints._own_from_source(group)
        assert [(e.group, e.name, e.value, e.distribution, e.version) for e in own] == [
            (group, name, value, "xharness", project["version"])
            for name, value in project["entry-points"][group].items()]
    assert entrypoints._own_from_source("xharness.nothing-registered") == []
