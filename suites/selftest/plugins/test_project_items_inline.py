"""A maintainer's items as pytest itself reports them, run in this process (pytester's inline
run): which items a project gets and which it does not, where each says it is defined, what each
records, and the words of every way one fails or skips. The same runs through ``xharness run`` in
a child process are ``test_project_items.py``; these see the harness' own code in this process.
"""

from __future__ import annotations

import importlib
import os
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_dists import ADAPTERS, INVARIANTS, REFERENCE_SCENARIO, fake_dist

from harness import adapters, entrypoints, project_items
from harness.project import read
from harness.properties import registry as invariants
from harness.scenarios import known_findings
from harness.scenarios import registry as scenarios

pytest_plugins = ("pytester",)
pytestmark = pytest.mark.cell_independent

PYPROJECT = """\
[project]
name = "Plug_Dist"
version = "1.2.3"

[tool.xharness]
testpaths = ["tests"]
{extra}
"""

#: scenarios whose fixed runs fail or skip, and one whose injected run shows no signature
MORE_SCENARIOS = '''
from harness import api

class Seen(AssertionError):
    pass

def _always(ctx):
    raise Seen("broken with the switch off too")

def _never(ctx):
    pass

ALWAYS = api.Scenario(
    id="plug-always", title="t", upstream=(), component="c", trigger="t", fault="lost-sharding",
    signatures=(api.Signature("seen", "plug_more.scen:Seen", "switch off too"),),
    variants={"one": _always, "on-tpu": _never}, needs=api.Needs(devices=2),
    variant_needs={"on-tpu": api.Needs(backends=("tpu",))},
)
TOOTHLESS = api.Scenario(
    id="plug-toothless", title="t", upstream=(), component="c", trigger="t", fault="lost-sharding",
    signatures=(api.Signature("seen", "plug_more.scen:Seen", "never"), api.Signature("gone", "plug_more.scen:Seen", "x")),
    variants={"one": _never, "two": _never},
)
WRONG_SIGNATURE = api.Scenario(
    id="plug-wrong", title="t", upstream=(), component="c", trigger="t", fault="lost-sharding",
    signatures=(api.Signature("seen", "plug_more.scen:Seen", "switch"), api.Signature("gone", "plug_more.scen:Seen", "x")),
    variants={"one": _always}, expected={"one": ("gone",)},
)
ON_TPU = api.Scenario(
    id="plug-on-tpu", title="t", upstream=(), component="c", trigger="t", fault="lost-sharding",
    signatures=(), variants={"one": _never, "two": _never},
    variant_needs={"one": api.Needs(backends=("tpu",)), "two": api.Needs(backends=("tpu",), why="a TPU's own")},
)
HUGE = api.Scenario(
    id="plug-huge", title="t", upstream=(), component="c", trigger="t", fault="lost-sharding",
    signatures=(), variants={"one": _never}, needs=api.Needs(devices=4096),
)
ON_JAX = api.Scenario(
    id="plug-jax", title="t", upstream=(), component="c", trigger="t", fault="lost-sharding",
    signatures=(api.Signature("seen", "plug_more.scen:Seen", "x"),), variants={"one": _never}, runtime="jax",
)
BROKEN_ON_JAX = api.Scenario(
    id="plug-jax-broken", title="t", upstream=(), component="c", trigger="t", fault="lost-sharding",
    signatures=(api.Signature("seen", "plug_more.scen:Seen", "switch off"),), variants={"one": _always},
    runtime="jax",
)
'''

BROKEN = "import plug_missing_dependency\n"


def _forget() -> None:
    """Forget every registry read and every plugin module imported (other tests install packages
    of the same names)."""
    for name in [m for m in sys.modules if m.split(".")[0] in ("plug_pkg", "plug_more", "other_pkg", "rt_pkg", "plug_found")]:
        del sys.modules[name]
    importlib.invalidate_caches()
    entrypoints.reset()
    for cached in (adapters.registry, adapters.adapter_class, adapters.get, scenarios.loaded, invariants.loaded,
                   known_findings.registered):
        cached.cache_clear()


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Where the project's distribution and a stranger's are installed, on ``sys.path``; the
    inner run may set the runtime under test in the environment, which is put back after."""
    # the cell's own settings (its fault switches, runtime, runtime options) would be the inner
    # run's too, and its replay lines would carry them
    chosen = ("XHARNESS_PROJECT", *(name for name in os.environ if name.startswith("HARNESS_")))
    for name in chosen:
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "site"
    path.mkdir()
    monkeypatch.syspath_prepend(str(path))
    _forget()
    before = dict(os.environ)
    yield path
    _forget()
    # what the inner run set (the plugin names the project's runtime in the environment, as it
    # does for a maintainer's run), whether or not this process had it: left set, it would be the
    # runtime under test of every later test of this worker and of the processes they start
    for name in set(os.environ) - set(before):
        del os.environ[name]
    os.environ.update(before)  # then monkeypatch puts back what was there before the fixture


def _project(pytester: pytest.Pytester, site: Path, groups: dict[str, dict[str, str]], modules: dict[str, str],
             extra: str = "") -> None:
    fake_dist(site, "plug-dist", "1.2.3", groups, modules)
    pytester.makefile(".toml", pyproject=PYPROJECT.format(extra=extra))
    pytester.mkdir("tests")
    pytester.path.joinpath("tests", "test_own.py").write_text("def test_own():\n    assert True\n")


def _stranger(site: Path) -> None:
    """Another distribution's items: installed here, never the project's."""
    fake_dist(site, "other-dist", "9.0", {
        "xharness.scenarios": {"plug-other": "other_pkg.scen:SCENARIO"},
        "xharness.invariants": {"other-inv": "other_pkg.inv:GOOD", "other-broken": "other_pkg.gone:X"},
    }, {"other_pkg.scen": REFERENCE_SCENARIO.replace("plug-seen", "plug-other").replace("plug_pkg.", "other_pkg."),
        "other_pkg.inv": INVARIANTS.replace("plug-inv", "other-inv")})


def _line(source: str, statement: str) -> int:
    return next(n for n, line in enumerate(textwrap.dedent(source).splitlines(), 1) if line.startswith(statement))


def _reports(pytester: pytest.Pytester, *args: str) -> dict[str, pytest.TestReport]:
    """Each item's deciding report (the call's, or the setup's when it never ran), by node id."""
    run = pytester.inline_run("-p", "no:cacheprovider", *args)
    found: dict[str, pytest.TestReport] = {}
    for report in run.getreports("pytest_runtest_logreport"):
        if report.when == "call" or (report.when == "setup" and not report.passed):
            found[report.nodeid] = report
    return found


def _props(report: pytest.TestReport) -> dict[str, object]:
    return dict(report.user_properties)


def test_the_projects_items_and_no_strangers_are_collected_where_they_are_defined(
        pytester: pytest.Pytester, site: Path) -> None:
    _project(pytester, site, {
        "xharness.scenarios": {"plug-seen": "plug_pkg.scen:SCENARIO", "plug-jax": "plug_more.scen:ON_JAX"},
        "xharness.invariants": {"plug-inv": "plug_pkg.inv:GOOD"},
    }, {"plug_pkg.scen": REFERENCE_SCENARIO, "plug_pkg.inv": INVARIANTS, "plug_more.scen": MORE_SCENARIOS})
    _stranger(site)
    reports = _reports(pytester)
    scen, inv = site / "plug_pkg" / "scen.py", site / "plug_pkg" / "inv.py"
    # the items' ids are the user's files, relative to the run's root where they lie outside it
    ids = {nodeid.rsplit("::", 1)[-1]: nodeid for nodeid in reports}
    assert set(ids) == {"test_own", "plug-seen[fixed]", "plug-seen[injected]", "plug-inv"}, sorted(reports)
    for name, path, source, statement in (("plug-seen[fixed]", scen, REFERENCE_SCENARIO, "SCENARIO = "),
                                          ("plug-seen[injected]", scen, REFERENCE_SCENARIO, "SCENARIO = "),
                                          ("plug-inv", inv, INVARIANTS, "GOOD = ")):
        report = reports[ids[name]]
        assert report.passed, (name, report.longreprtext)
        where, line, domain = report.location
        assert Path(pytester.path, where).resolve() == path.resolve(), (name, where)
        assert (line, domain) == (_line(source, statement) - 1, name)
    fixed, injected = _props(reports[ids["plug-seen[fixed]"]]), _props(reports[ids["plug-seen[injected]"]])
    assert (fixed["scenario"], fixed["mode"], fixed["seed"]) == ("plug-seen", "fixed", "0")
    assert fixed["repro"] == "xharness repro plug-seen --seed 0" and "signature" not in fixed
    assert (injected["mode"], injected["signature"]) == ("injected", "seen")
    assert injected["repro"] == "xharness repro plug-seen --inject --seed 0"
    assert _props(reports[ids["plug-inv"]]) == {}


def test_a_cell_names_itself_in_the_replay(pytester: pytest.Pytester, site: Path) -> None:
    _project(pytester, site, {"xharness.scenarios": {"plug-seen": "plug_pkg.scen:SCENARIO"}},
             {"plug_pkg.scen": REFERENCE_SCENARIO})
    reports = _reports(pytester, "--cell", "cpu-8", "-k", "plug")
    assert {_props(r)["repro"] for r in reports.values()} == {
        "xharness repro plug-seen --seed 0 --cell cpu-8", "xharness repro plug-seen --inject --seed 0 --cell cpu-8"}


def test_each_way_a_scenario_item_fails_or_skips_says_why(pytester: pytest.Pytester, site: Path) -> None:
    _project(pytester, site, {"xharness.scenarios": {
        "plug-always": "plug_more.scen:ALWAYS", "plug-toothless": "plug_more.scen:TOOTHLESS",
        "plug-on-tpu": "plug_more.scen:ON_TPU", "plug-huge": "plug_more.scen:HUGE",
        "plug-wrong": "plug_more.scen:WRONG_SIGNATURE",
    }}, {"plug_more.scen": MORE_SCENARIOS})
    by_name = {nodeid.rsplit("::", 1)[-1]: r for nodeid, r in _reports(pytester, "-k", "plug").items()}
    assert len(by_name) == 10, sorted(by_name)

    always = by_name["plug-always[fixed]"]
    assert always.failed
    assert always.longreprtext.startswith("plug-always [fixed]: failed, where its fault switch off must pass\n"
                                          "replay: xharness repro plug-always --seed 0\n"
                                          "  one: failed Seen: broken with the switch off too\nTraceback"), \
        always.longreprtext
    # the variant that ran showed its signature; the other could not run here, which is no failure
    assert by_name["plug-always[injected]"].passed, by_name["plug-always[injected]"].longreprtext

    wrong = by_name["plug-wrong[injected]"]  # a signature of the scenario, but not the one its variant must show
    assert wrong.failed and wrong.longreprtext.startswith(
        "plug-wrong [injected]: failed, where its fault switch 'lost-sharding' on must show one of its signatures "
        "(gone, seen)\nreplay: xharness repro plug-wrong --inject --seed 0\n  one: failed expected signature gone, "
        "saw seen: Seen: broken with the switch off too"), wrong.longreprtext

    toothless = by_name["plug-toothless[injected]"]
    assert toothless.failed and by_name["plug-toothless[fixed]"].passed
    assert toothless.longreprtext == (
        "plug-toothless [injected]: not-reproduced, where its fault switch 'lost-sharding' on must show one of its "
        "signatures (gone, seen)\nreplay: xharness repro plug-toothless --inject --seed 0\n  one: not-reproduced\n"
        "  two: not-reproduced")
    assert "Traceback" not in toothless.longreprtext  # the message is the whole report

    for mode in ("fixed", "injected"):
        tpu = by_name[f"plug-on-tpu[{mode}]"]
        assert tpu.skipped and tpu.longrepr[2] == (
            "Skipped: plug-on-tpu: every variant skipped: one: runs on tpu only, this run is on cpu; "
            "two: runs on tpu only, this run is on cpu (a TPU's own)"), tpu.longrepr
        huge = by_name[f"plug-huge[{mode}]"]
        assert huge.skipped and huge.longrepr[2].startswith("Skipped: plug-huge: needs at least 4096 devices, "
                                                            "the cell has "), huge.longrepr
        assert _props(huge) == {"scenario": "plug-huge", "mode": mode, "seed": "0"}


def test_a_broken_item_of_the_project_fails_naming_it_and_a_strangers_is_not_an_item(
        pytester: pytest.Pytester, site: Path) -> None:
    _project(pytester, site, {"xharness.scenarios": {"plug-seen": "plug_pkg.scen:SCENARIO"},
                              "xharness.invariants": {"plug-inv": "plug_pkg.inv:GOOD"}},
             {"plug_pkg.scen": REFERENCE_SCENARIO, "plug_pkg.inv": BROKEN})
    _stranger(site)
    reports = _reports(pytester)
    broken = reports["pyproject.toml::plugin[plug-dist:xharness.invariants:plug-inv]"]
    assert broken.failed and broken.location == ("pyproject.toml", 0, "plugin[plug-dist:xharness.invariants:plug-inv]")
    assert broken.longreprtext == ("plugin plug-dist 1.2.3 (xharness.invariants: plug-inv = plug_pkg.inv:GOOD): "
                                   "cannot import plug_pkg.inv: No module named 'plug_missing_dependency'")
    assert not [n for n in reports if "other" in n], sorted(reports)
    assert sum(r.passed for r in reports.values()) == 3  # test_own and plug-seen in both modes


def test_an_invariant_item_runs_its_property_and_fails_with_its_example(pytester: pytest.Pytester, site: Path) -> None:
    failing = INVARIANTS.replace("assert n >= 0", "assert n < 2, f'n={n}'")
    _project(pytester, site, {"xharness.invariants": {"plug-inv": "plug_pkg.inv:GOOD"}}, {"plug_pkg.inv": failing})
    report = next(r for n, r in _reports(pytester).items() if n.endswith("::plug-inv"))
    assert report.failed and "n=2" in report.longreprtext, report.longreprtext


EXPECTED = """\
[[expect]]
runtime = "jax"
releases = ">=0"
scenario = "plug-jax"
outcome = "{outcome}"
why = "measured by hand"
"""


@pytest.mark.parametrize(("table", "verdict"), [(None, None), ("passed", "as-expected"),
                                                ("reproduced", "unexpectedly-fixed")])
def test_a_fixed_run_of_a_plugged_runtime_is_judged_by_the_projects_table(
        pytester: pytest.Pytester, site: Path, table: str | None, verdict: str | None) -> None:
    extra = 'runtime = "jax"\n' + ('expected = "expected.toml"\n' if table else "")
    _project(pytester, site, {"xharness.scenarios": {"plug-jax": "plug_more.scen:ON_JAX",
                                                     "plug-seen": "plug_pkg.scen:SCENARIO"}},
             {"plug_more.scen": MORE_SCENARIOS, "plug_pkg.scen": REFERENCE_SCENARIO}, extra=extra)
    if table:
        pytester.path.joinpath("expected.toml").write_text(EXPECTED.format(outcome=table))
    reports = {n.rsplit("::", 1)[-1]: r for n, r in _reports(pytester, "-k", "plug").items()}
    # the runtime under test is JAX: the reference runtime's scenario is not an item
    assert set(reports) == {"plug-jax[fixed]", "plug-jax[injected]"}, sorted(reports)
    fixed = reports["plug-jax[fixed]"]
    props = _props(fixed)
    import jax

    if verdict is None:  # no table: the fixed run must pass, and nothing is judged
        assert fixed.passed and "verdict" not in props
        return
    assert (props["verdict"], props["expected"], props["actual"], props["release"]) == (
        verdict, table, "passed", jax.__version__)
    assert props["reason"] and (props["scenario"], props["mode"]) == ("plug-jax", "fixed")  # added to, not replaced
    if verdict == "as-expected":
        assert fixed.passed
    else:
        assert fixed.failed
        path = pytester.path / "expected.toml"
        assert fixed.longreprtext.startswith(
            f"plug-jax [fixed] on jax {jax.__version__}: unexpectedly-fixed: {props['reason']} ({path})\n"
            "replay: xharness repro plug-jax --seed 0\n"), fixed.longreprtext


def test_the_distribution_of_a_plugged_runtime_is_the_projects_too(tmp_path: Path, site: Path) -> None:
    fake_dist(site, "runtime-dist", "0.1", {"xharness.runtimes": {"good": "rt_pkg.ad:Good"}}, {"rt_pkg.ad": ""})
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "Plug_Dist"\n\n[tool.xharness]\n')
    own = read(tmp_path / "pyproject.toml")
    assert project_items.distributions(own, "good") == {"plug-dist", "runtime-dist"}
    assert project_items.distributions(own, "reference") == {"plug-dist"}
    assert project_items.distributions(own, "jax") == {"plug-dist"}  # the harness' own adapter
    (tmp_path / "pyproject.toml").write_text("[tool.xharness]\n")
    assert project_items.distributions(read(tmp_path / "pyproject.toml"), "good") == {"runtime-dist"}


def _judged(pytester: pytest.Pytester, site: Path, rows: str) -> dict[str, pytest.TestReport]:
    """The fixed items of a project testing JAX whose table holds ``rows``."""
    _project(pytester, site, {"xharness.scenarios": {"plug-jax": "plug_more.scen:ON_JAX",
                                                     "plug-jax-broken": "plug_more.scen:BROKEN_ON_JAX"}},
             {"plug_more.scen": MORE_SCENARIOS}, extra='runtime = "jax"\nexpected = "expected.toml"\n')
    pytester.path.joinpath("expected.toml").write_text(rows)
    return {n.rsplit("::", 1)[-1]: r for n, r in _reports(pytester, "-k", "fixed").items()}


def test_a_release_that_still_has_the_bug_is_a_known_bug_and_one_without_a_row_is_unexpected(
        pytester: pytest.Pytester, site: Path) -> None:
    reports = _judged(pytester, site, EXPECTED.format(outcome="reproduced").replace('"plug-jax"', '"plug-jax-broken"'))
    broken = _props(reports["plug-jax-broken[fixed]"])
    assert (broken["actual"], broken["expected"], broken["verdict"]) == ("reproduced", "reproduced", "as-expected")
    assert reports["plug-jax-broken[fixed]"].passed
    unlisted = reports["plug-jax[fixed]"]
    assert unlisted.failed and (_props(unlisted)["verdict"], _props(unlisted)["expected"]) == ("unexpected", "")


def test_a_row_naming_no_scenario_is_the_tables_error(pytester: pytest.Pytester, site: Path) -> None:
    reports = _judged(pytester, site, EXPECTED.format(outcome="passed").replace('"plug-jax"', '"plug-jxa"'))
    failed = reports["plug-jax[fixed]"]
    assert failed.failed and "plug-jxa" in failed.longreprtext, failed.longreprtext


def test_the_reference_runtimes_scenarios_are_never_judged_by_the_table(pytester: pytest.Pytester, site: Path) -> None:
    _project(pytester, site, {"xharness.scenarios": {"plug-seen": "plug_pkg.scen:SCENARIO"}},
             {"plug_pkg.scen": REFERENCE_SCENARIO}, extra='expected = "expected.toml"\n')
    pytester.path.joinpath("expected.toml").write_text(EXPECTED.format(outcome="passed").replace("plug-jax", "plug-seen"))
    fixed = next(r for n, r in _reports(pytester, "-k", "plug").items() if n.endswith("plug-seen[fixed]"))
    assert fixed.passed and "verdict" not in _props(fixed), fixed.longreprtext


def test_the_items_of_the_distribution_that_registers_the_runtime_under_test_are_the_projects(
        pytester: pytest.Pytester, site: Path) -> None:
    good = REFERENCE_SCENARIO.replace("plug_pkg.", "rt_pkg.").replace('variants={"look": _variant},',
                                                                       'variants={"look": _variant}, runtime="good",')
    fake_dist(site, "runtime-dist", "0.1", {"xharness.runtimes": {"good": "rt_pkg.ad:Good"},
                                            "xharness.scenarios": {"plug-seen": "rt_pkg.scen:SCENARIO"}},
              {"rt_pkg.ad": ADAPTERS, "rt_pkg.scen": good})
    _project(pytester, site, {}, {}, extra='runtime = "good"\n')
    run = pytester.inline_run("-p", "no:cacheprovider", "--collect-only")
    items = run.getcall("pytest_collection_finish").session.items
    assert sorted(item.name for item in items) == ["plug-seen[fixed]", "plug-seen[injected]", "test_own"]


GOOD_SCENARIO = """
from harness import api

def _never(ctx):
    pass

SCENARIO = api.Scenario(
    id="plug-good", title="t", upstream=(), component="c", trigger="t", fault="f", signatures=(),
    variants={"one": _never}, runtime="good",
)
FOUND = (api.KnownFinding(invariant="coverage", runtime="good", upstream="", summary="a finding of its own",
                          id="plug-found"),)
"""

#: the runtime's release, which a table judges by
VERSIONED = """

def _version(self):
    return "0.1"

Good.version = _version
"""

GOOD_ROWS = """
[[expect]]
runtime = "good"
releases = ">=0"
scenario = "{scenario}"
outcome = "{outcome}"
why = "measured by hand"
"""


def test_the_projects_table_may_name_its_runtimes_own_findings(pytester: pytest.Pytester, site: Path) -> None:
    """A plugged runtime's table holds rows for its own findings (xharness.findings) beside its
    scenarios': they are names the table knows, not mistakes."""
    fake_dist(site, "runtime-dist", "0.1", {"xharness.runtimes": {"good": "rt_pkg.ad:Good"},
                                            "xharness.scenarios": {"plug-good": "rt_pkg.scen:SCENARIO"},
                                            "xharness.findings": {"good": "rt_pkg.scen:FOUND"}},
              {"rt_pkg.ad": ADAPTERS + VERSIONED, "rt_pkg.scen": GOOD_SCENARIO})
    _project(pytester, site, {}, {}, extra='runtime = "good"\nexpected = "expected.toml"\n')
    pytester.path.joinpath("expected.toml").write_text(GOOD_ROWS.format(scenario="plug-good", outcome="passed")
                                                       + GOOD_ROWS.format(scenario="plug-found", outcome="reproduced"))
    fixed = next(r for n, r in _reports(pytester, "-k", "fixed").items() if n.endswith("plug-good[fixed]"))
    assert fixed.passed and _props(fixed)["verdict"] == "as-expected", fixed.longreprtext
