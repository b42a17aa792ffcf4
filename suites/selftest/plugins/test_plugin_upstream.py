"""A plugin's own bug, from its registered upstream trigger to the report a maintainer files:
``xharness report upstream ID --runtime NAME`` on a plugin's runtime writes the standalone script,
what the runtime did and the project's expected rows; a registration that cannot be used stops
it (exit 2) naming the distribution and the entry point, as any broken plugin does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_dists import fake_dist

from harness import entrypoints
from harness.exits import EXIT_OK, EXIT_USAGE

pytestmark = [pytest.mark.cell_independent, pytest.mark.own_process]

ROOT = Path(__file__).resolve().parents[3]
TUTORIAL = ROOT / "docs" / "tutorials" / "your-runtime.md"

RUNTIME = '''
from harness import api

class ShardJax(api.BaseAdapter):
    name = "shardjax"
    capabilities = frozenset({api.TENSORS})
    def version(self): return "2.0.1"
    def device_count(self): return 1
    def tensor(self, host): return host
    def to_host(self, t): return t
    def mesh(self, ids, shape, names): return None
    def mark_sharding(self, t, mesh, spec): return t
    def sharding_spec(self, t): return None
    def device_shards(self, t): return {}
    def derive(self, t): return t * 2 + 1
'''

SCENARIO = '''
from harness import api


class SplitLost(AssertionError):
    """A value marked to be split over the devices was replicated."""


SPLIT_SIZE = 4


def split_then_read() -> None:
    """Split a vector, read its layout back."""
    import os
    layout = os.environ.get("SHARDJAX_LAYOUT", "replicated")
    if layout != "split":
        raise SplitLost(f"marked split over {SPLIT_SIZE} devices, laid out {layout}")


SCENARIO = api.Scenario(
    id="shardjax-lost-split", title="shardjax replicates a value marked to be split",
    upstream=(), component="shardjax layouts", trigger="split a vector, read its layout",
    fault="lost-split", signatures=(api.Signature("split-lost", SplitLost, "marked split"),),
    variants={}, runtime="shardjax",
)
UPSTREAM = (
    api.Reproducer("shardjax-lost-split", "split-then-read", split_then_read, "shardjax's own test",
                   env={"SHARDJAX_LAYOUT": "replicated"},
                   signatures=(api.Signature("split-lost", SplitLost, "marked split"),),
                   runtime="shardjax"),
)
FINDINGS = (
    api.KnownFinding(
        invariant="coverage", runtime="shardjax",
        upstream="none found: searched shardjax issues for 'split size 3 loses the last row'",
        summary="a vector of 3 split over 2 devices reads back 2 elements",
        match=r"read back \\d+ of \\d+", id="shardjax-odd-split",
    ),
)


class RowsLost(AssertionError):
    """Elements of a split value were lost."""


def odd_split() -> None:
    """Split 3 elements over 2 devices, read them back."""
    import os
    got = int(os.environ.get("SHARDJAX_READ", "2"))
    if got != 3:
        raise RowsLost(f"read back {got} of 3 elements")


FINDING_TRIGGERS = UPSTREAM + (
    api.Reproducer("shardjax-odd-split", "three-over-two", odd_split, "the coverage invariant's shrunk example",
                   signatures=(api.Signature("rows-lost", RowsLost, "read back"),), runtime="shardjax"),
)
WRONG_RUNTIME_FINDINGS = (api.KnownFinding(invariant="coverage", runtime="jax", upstream="u", summary="s", id="x"),)
NOT_TRIGGERS = 42
OTHER_RUNTIME = (api.Reproducer("shardjax-lost-split", "v", split_then_read, "s", runtime="jax"),)
UNKNOWN_SCENARIO = (api.Reproducer("no-such-scenario", "v", split_then_read, "s", runtime="shardjax"),)
'''

EXPECTED = '''
[[expect]]
runtime = "shardjax"
releases = ">=2.0"
scenario = "shardjax-lost-split"
outcome = "reproduced"
why = "shardjax 2.0 replicates a split vector"
'''


def _site(tmp_path: Path, upstream: str, findings: str = "") -> Path:
    return fake_dist(tmp_path / "site", "shard-dist", "2.0.1", {
        "xharness.runtimes": {"shardjax": "plug_shard.rt:ShardJax"},
        "xharness.scenarios": {"shardjax-lost-split": "plug_shard.scen:SCENARIO"},
        "xharness.upstream": {"shardjax": upstream},
        **({"xharness.findings": {"shardjax": findings}} if findings else {}),
    }, {"plug_shard.rt": RUNTIME, "plug_shard.scen": SCENARIO})


def _report(site: Path | str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(site)}
    env.pop("HARNESS_FAULTS", None)
    return subprocess.run([sys.executable, "-m", "harness.cli", "report", "upstream", *args],
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def _project(tmp_path: Path, rows: str) -> Path:
    """A project whose expected table holds ``rows``."""
    project = tmp_path / "proj"
    project.mkdir()
    (project / "xharness.toml").write_text('expected = "expected.toml"\n')
    (project / "expected.toml").write_text(rows)
    return project


def test_a_plugins_trigger_becomes_its_ready_to_file_report(tmp_path: Path) -> None:
    site = _site(tmp_path, "plug_shard.scen:UPSTREAM")
    project = _project(tmp_path, EXPECTED)
    done = _report(site, project, "shardjax-lost-split", "--runtime", "shardjax")
    assert done.returncode == EXIT_OK, done.stderr
    out = project / "reports" / "upstream" / "shardjax-lost-split-shardjax-2.0.1.md"
    assert f"wrote {out.relative_to(project)} (reproduced on shardjax 2.0.1: as-expected)" in done.stdout
    text = out.read_text()
    assert text.startswith("# [shardjax 2.0.1] shardjax replicates a value marked to be split")
    assert "## Reproducer: split-then-read" in text and "Follows shardjax's own test." in text
    assert "**Actual** on shardjax 2.0.1: reproduced (split-lost): `SplitLost: marked split over 4" in text
    assert "- shardjax: 2.0.1" in text
    assert "- >=2.0: reproduced (shardjax 2.0 replicates a split vector)" in text
    # the script is the trigger's module alone: it runs without the harness and shows the bug
    script = text.split("```python\n", 1)[1].split("```", 1)[0]
    assert "harness" not in script and "SPLIT_SIZE = 4" in script
    (tmp_path / "repro.py").write_text(script)
    ran = subprocess.run([sys.executable, "-S", str(tmp_path / "repro.py")], capture_output=True,
                         text=True, timeout=60, env={"SHARDJAX_LAYOUT": "replicated"})
    assert ran.returncode == 1 and "SplitLost: marked split over 4 devices" in ran.stderr, ran.stderr


@pytest.mark.jax_independent
@pytest.mark.parametrize(("value", "cause"), [
    ("plug_shard.scen:NOT_TRIGGERS", "plug_shard.scen:NOT_TRIGGERS is a int, not a tuple of harness.api.Reproducer"),
    ("plug_shard.missing:UPSTREAM", "cannot import plug_shard.missing"),
])
def test_a_broken_registration_stops_the_report_naming_it(tmp_path: Path, value: str, cause: str) -> None:
    site = _site(tmp_path, value)
    done = _report(site, tmp_path, "shardjax-lost-split", "--runtime", "shardjax")
    assert done.returncode == EXIT_USAGE and not done.stdout
    assert f"plugin shard-dist 2.0.1 (xharness.upstream: shardjax = {value}): {cause}" in done.stderr
    assert not (tmp_path / "reports").exists()


@pytest.mark.jax_independent
def test_a_runtime_without_triggers_is_told_how_to_register_them(tmp_path: Path) -> None:
    site = _site(tmp_path, "plug_shard.scen:UPSTREAM")
    done = _report(site, tmp_path, "shardjax-lost-split", "--runtime", "reference")
    assert done.returncode == EXIT_USAGE
    assert "'reference' has no upstream triggers here (one of torch_xla, jax, shardjax)" in done.stderr
    assert "xharness.upstream entry-point group" in done.stderr


@pytest.fixture
def plugged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The fake distribution on this process' path, the registries read afresh."""
    monkeypatch.syspath_prepend(str(_site(tmp_path, "plug_shard.scen:UPSTREAM")))
    entrypoints.reset()
    yield
    entrypoints.reset()
    for name in [m for m in sys.modules if m.startswith("plug_shard")]:
        del sys.modules[name]


@pytest.mark.jax_independent
@pytest.mark.parametrize(("attr", "cause"), [
    ("OTHER_RUNTIME", "is for runtime 'jax', registered as 'shardjax': they must agree"),
    ("UNKNOWN_SCENARIO", "the trigger no-such-scenario:v names no registered scenario"),
])
def test_a_trigger_is_checked_against_its_entry_point(plugged: None, attr: str, cause: str) -> None:
    from harness.scenarios import triggers

    entry = entrypoints.EntryPoint(entrypoints.UPSTREAM, "shardjax", f"plug_shard.scen:{attr}",
                                   "shard-dist", "2.0.1")
    why = triggers.check_triggers(entry, entry.load())
    assert why is not None and cause in why


@pytest.mark.jax_independent
def test_the_harness_own_triggers_register_through_the_same_group() -> None:
    from harness.scenarios import triggers

    own = [e for e in entrypoints.entry_points(entrypoints.UPSTREAM) if e.builtin]
    assert {e.name for e in own} == {"jax", "torch_xla"}
    assert all(triggers.check_triggers(e, e.load()) is None for e in own)


def test_the_tutorials_trigger_registered_as_the_page_says_writes_its_report(tmp_path: Path) -> None:
    """docs/tutorials/your-runtime.md: its files, and the group its last section adds."""
    import importlib.util
    import re
    import tomllib

    spec = importlib.util.spec_from_file_location("_tutorial_files", ROOT / "ci" / "tutorial_files.py")
    assert spec is not None and spec.loader is not None
    tutorial_files = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tutorial_files)
    page = TUTORIAL.read_text(encoding="utf-8")
    repo = tmp_path / "myrt-repo"
    tutorial_files.write(page, repo)
    groups = tomllib.loads((repo / "pyproject.toml").read_text())["project"]["entry-points"]
    section = page.split("## 12. ", 1)[1]
    added = tomllib.loads(re.search(r"^```toml\n(.*?)^```$", section, re.MULTILINE | re.DOTALL).group(1))
    site = fake_dist(tmp_path / "site", "myrt", "0.1.0", {**groups, **added["project"]["entry-points"]})
    (repo / "xharness.toml").write_text('expected = "expected.toml"\n')
    done = _report(f"{site}{os.pathsep}{repo}", repo, "myrt-dropped-remainder", "--runtime", "myrt")
    assert done.returncode == EXIT_OK, done.stderr
    expected = re.search(r"^\$ xharness report upstream .*\n(.*)$", section, re.MULTILINE).group(1)
    assert done.stdout.strip() == expected
    # its known finding, registered beside the triggers, is the harness' own kind of finding
    code = ("from harness.scenarios.known_findings import plugin_findings\n"
            "print([(f.name, f.runtime, f.invariant) for f in plugin_findings()])")
    listed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=repo, timeout=120,
                            env={**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{repo}"})
    assert listed.stdout.strip() == "[('myrt-dropped-remainder', 'myrt', 'myrt-split-round-trip')]", listed.stderr


FINDING_ROWS = EXPECTED + '''
[[expect]]
runtime = "shardjax"
releases = ">=2.0"
scenario = "shardjax-odd-split"
outcome = "reproduced"
why = "shardjax 2.0.1 reads 2 of 3 elements of an odd split"
'''


def test_a_plugins_own_finding_reaches_its_report_and_the_findings_list(tmp_path: Path) -> None:
    """A finding no scenario re-creates, declared under xharness.findings with its trigger and its
    rows in the project's table: report upstream writes it, and the findings list shows it."""
    site = _site(tmp_path, "plug_shard.scen:FINDING_TRIGGERS", "plug_shard.scen:FINDINGS")
    project = _project(tmp_path, FINDING_ROWS)
    done = _report(site, project, "shardjax-odd-split", "--runtime", "shardjax")
    assert done.returncode == EXIT_OK, done.stderr
    out = project / "reports" / "upstream" / "shardjax-odd-split-shardjax-2.0.1.md"
    text = out.read_text()
    assert text.startswith("# [shardjax 2.0.1] a vector of 3 split over 2 devices reads back 2 elements")
    assert "Found by the coverage invariant of xharness" in text
    assert "**Actual** on shardjax 2.0.1: reproduced (rows-lost): `RowsLost: read back 2 of 3 elements`" in text
    assert "- >=2.0: reproduced (shardjax 2.0.1 reads 2 of 3 elements of an odd split)" in text
    assert "none found: searched shardjax issues" in text
    # the findings list: the harness' own and the plugin's, its releases from the project's rows
    code = ("from harness.report.findings import finding_rows\n"
            "for r in finding_rows(): print(r.name, r.runtime, r.releases, r.report.split('/')[-1], sep='|')")
    listed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=project,
                            env={**os.environ, "PYTHONPATH": str(site)}, timeout=120)
    assert "shardjax-odd-split|shardjax|>=2.0|shardjax-odd-split-shardjax-2.0.1.md" in listed.stdout, listed.stderr
    assert "slurm-jobs-4096-apart|jax|" in listed.stdout


@pytest.mark.jax_independent
def test_a_finding_registered_for_another_runtime_is_a_broken_plugin(tmp_path: Path) -> None:
    site = _site(tmp_path, "plug_shard.scen:UPSTREAM", "plug_shard.scen:WRONG_RUNTIME_FINDINGS")
    code = "from harness.scenarios.known_findings import plugin_findings; print(len(plugin_findings()))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(site)}, timeout=120)
    assert done.stdout.strip() == "0"
    assert ("plugin shard-dist 2.0.1 (xharness.findings: shardjax = plug_shard.scen:WRONG_RUNTIME_FINDINGS): "
            "the finding 'x' is of runtime 'jax', registered as 'shardjax': they must agree") in done.stderr


@pytest.mark.jax_independent
def test_a_plugins_finding_over_a_table_that_cannot_be_read_is_a_clear_error(tmp_path: Path) -> None:
    """The dashboard lists a plugin's findings with the releases of its project's table: a table
    that is missing is the user's error, named, not a traceback."""
    site = _site(tmp_path, "plug_shard.scen:FINDING_TRIGGERS", "plug_shard.scen:FINDINGS")
    project = _project(tmp_path, FINDING_ROWS)
    (project / "expected.toml").unlink()
    junit = project / "run.xml"
    junit.write_text('<testsuites><testsuite name="cpu-1" tests="1"><testcase classname="t" name="a"/>'
                     "</testsuite></testsuites>")
    done = subprocess.run([sys.executable, "-m", "harness.cli", "report", "html", "--out", "page.html",
                           "--no-history", str(junit)], capture_output=True, text=True, cwd=project,
                          env={**os.environ, "PYTHONPATH": str(site)}, timeout=120)
    assert done.returncode == EXIT_USAGE, done.stderr
    assert "Traceback" not in done.stderr and "expected.toml" in done.stderr, done.stderr
