"""The tutorial cannot rot: the files "Your runtime in thirty minutes" has its reader write
(docs/tutorials/your-runtime.md, every fenced block with a ``title="PATH"``) are extracted into a
fresh repository, and there each Python file compiles, the runtime, its adapter, its scenario and
its invariant load through the harness' own checks of a plugin, the expected table is read as the
harness reads it, and the planted bug shows through the scenario's variant only when its fault
switch is on."""

from __future__ import annotations

import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import file_module
import pytest

from harness import adapters, api, entrypoints
from harness.properties import registry as invariants
from harness.scenarios import expected
from harness.scenarios import registry as scenarios

pytestmark = pytest.mark.cell_independent
ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "tutorials" / "your-runtime.md"


_load = file_module.load


#: the reader of titled blocks that ci/example.sh builds the tutorial's repository with
TUTORIAL_FILES = _load("_tutorial_files", ROOT / "ci" / "tutorial_files.py")
#: ``fake_dist`` of the plugin tests: an installed distribution's metadata and entry points, as
#: ``pip install`` leaves them
FAKE_DISTS = _load("_tutorial_fake_dists", ROOT / "suites" / "selftest" / "plugins" / "fake_dists.py")


def titled_blocks(text: str) -> dict[str, str]:
    """Every file the page has its reader write: path -> text (ci/tutorial_files.py reads them)."""
    found: dict[str, str] = TUTORIAL_FILES.files(text)
    return found


def _forget() -> None:
    entrypoints.reset()
    for cached in (adapters.registry, adapters.adapter_class, adapters.get, scenarios.loaded,
                   invariants.loaded):
        cached.cache_clear()


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The tutorial's repository, written from the page, its package importable and its
    distribution installed (its metadata and entry points, as ``pip install -e .`` leaves them)."""
    root = tmp_path / "myrt-repo"
    for path, body in titled_blocks(PAGE.read_text(encoding="utf-8")).items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body, encoding="utf-8")
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    groups = {group: dict(items) for group, items in project["entry-points"].items()}
    FAKE_DISTS.fake_dist(tmp_path / "site", project["name"], project["version"], groups)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.delenv("HARNESS_DEVICES", raising=False)
    _forget()
    yield root
    _forget()
    for name in [m for m in sys.modules if m == "myrt" or m.startswith("myrt.")]:
        del sys.modules[name]


def _entry(root: Path, group: str) -> entrypoints.EntryPoint:
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    (name, value), = project["entry-points"][group].items()
    return entrypoints.EntryPoint(group, name, value, project["name"], project["version"])


def test_the_page_writes_every_file_of_the_repository() -> None:
    text = PAGE.read_text(encoding="utf-8")
    blocks = titled_blocks(text)
    assert set(blocks) == {"myrt/__init__.py", "myrt/runtime.py", "myrt/adapter.py", "myrt/scenarios.py",
                           "myrt/invariants.py", "myrt/upstream.py", "pyproject.toml", "expected.toml"}
    # each in a block of its own language, titled as Material titles a block
    for path in blocks:
        language = "python" if path.endswith(".py") else "toml"
        assert f'```{language} title="{path}"' in text, path
    # the runtime stays tiny, and is numpy alone
    runtime = blocks["myrt/runtime.py"]
    assert len(runtime.splitlines()) <= 70
    imports = set(re.findall(r"^(?:from|import) (\w+)", runtime, re.MULTILINE))
    assert imports <= {"__future__", "collections", "numpy"}, imports


def test_the_commands_are_console_blocks() -> None:
    """Every command the reader types is a ``console`` block line starting ``$ ``, and the page
    walks through each command it promises."""
    text = PAGE.read_text(encoding="utf-8")
    commands = [line[2:] for block in re.findall(r"^```console\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)
                for line in block.splitlines() if line.startswith("$ ")]
    for wanted in ("xharness init", "xharness run", "xharness repro myrt-dropped-remainder",
                   "xharness repro myrt-dropped-remainder --inject", "xharness teeth --runtime myrt"):
        assert wanted in commands, wanted


def test_every_python_file_compiles(repo: Path) -> None:
    for path in sorted(repo.rglob("*.py")):
        compile(path.read_text(encoding="utf-8"), str(path), "exec")


def test_the_plugin_passes_the_harness_checks(repo: Path) -> None:
    runtime = _entry(repo, entrypoints.RUNTIMES)
    assert adapters.check_adapter_class(runtime, runtime.load()) is None
    assert runtime.name in adapters.names()  # installed: the scenario's runtime is registered
    scenario = _entry(repo, entrypoints.SCENARIOS)
    assert scenarios.check_scenario(scenario, scenario.load()) is None
    invariant = _entry(repo, entrypoints.INVARIANTS)
    assert invariants.check_invariant(invariant, invariant.load()) is None
    # and loaded as every command loads them: nothing broken
    assert not adapters.registry().broken
    assert not scenarios.loaded().broken
    assert not invariants.loaded().broken


def test_the_expected_row_is_read_and_judges_the_release(repo: Path) -> None:
    scenario = _entry(repo, entrypoints.SCENARIOS).load()
    table = expected.load(repo / "expected.toml", scenarios=(scenario.id,))
    adapter = adapters.get(scenario.runtime)
    verdict = table.judge(scenario.runtime, adapter.version(), scenario.id, expected.PASSED)
    assert verdict.verdict == expected.AS_EXPECTED


def test_the_planted_bug_shows_only_with_its_switch_on(repo: Path) -> None:
    scenario = _entry(repo, entrypoints.SCENARIOS).load()
    adapter = adapters.get(scenario.runtime)
    assert scenario.fault in adapter.fault_switches()
    (name, variant), = scenario.variants.items()
    devices = 4
    assert scenario.unmet(name, devices) is None
    variant(api.Context(seed=0, inject=False, devices=devices))  # fixed: passes
    assert adapter.faults_on() == frozenset()
    with adapter.inject(scenario.fault):
        with pytest.raises(AssertionError) as caught:
            variant(api.Context(seed=0, inject=True, devices=devices))
    assert adapter.faults_on() == frozenset()  # off again after the block
    signature = scenario.signature_for(caught.value)
    assert signature is not None and signature.name == "rows-lost", caught.value
    # the fixed run's error (had there been one) must not pass for the bug: no signature matches a
    # plain failure
    assert scenario.signature_for(AssertionError("something else")) is None
    # one device divides every dimension: the scenario says so instead of passing for nothing
    assert "needs at least 2 devices" in (scenario.unmet(name, 1) or "")


def test_the_invariant_catches_the_switch_through_the_adapter(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    invariant = _entry(repo, entrypoints.INVARIANTS).load()
    monkeypatch.setenv("HARNESS_RUNTIME", "myrt")
    monkeypatch.setenv("HARNESS_DEVICES", "4")
    adapter = api.current()
    assert adapter.device_count() == 4  # learned from the cell (api.cell_shape())
    invariant.check(rows=5, cols=2)  # fixed
    with adapter.inject(invariant.catches[0]), pytest.raises(AssertionError):
        invariant.check(rows=5, cols=2)
