"""The mutation score as a CI signal: ``ci/mutants.py --junit`` writes one test case per mutant,
the dashboard draws the kill table from it, and a weekly workflow job fails naming a survivor.

A survivor that only shows in a JSON file nobody opens is no signal at all, so each link is
checked: the outcomes become records whose outcome is red exactly when a mutant survived, the
records survive the JUnit round trip with their properties, the dashboard counts and colours them,
and the workflow runs the script on the schedule with the report flags it needs."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from ruamel.yaml import YAML

from harness.report.dashboard import COLORS, render_dashboard
from harness.report.junit import read_records
from harness.report.kills import (
    MUTANT_CELL,
    PROP_KILLER,
    PROP_RESULT,
    mutant_record,
    render_kill_table,
)
from harness.report.records import ERROR, FAILED, PASSED

ROOT = Path(__file__).parents[3]
WORKFLOW = ROOT / ".github/workflows/ci.yml"
SCRIPT = ROOT / "ci" / "mutants.sh"

OUTCOMES = [
    {"mutant": "01-a", "category": "spec handling", "result": "killed", "killer": "suites/x.py::test_a",
     "seconds": 3.5, "detail": "", "title": "A", "cousin": "unhashable-spec"},
    {"mutant": "02-b", "category": "sync", "result": "survived", "killer": "", "seconds": 40.0,
     "detail": "", "title": "B waits too little", "cousin": "race-on-handles"},
    {"mutant": "03-c", "category": "donation", "result": "stale", "killer": "", "seconds": 0.1,
     "detail": "error: patch failed: harness/runtime/step.py:12", "title": "C", "cousin": "aliased-save"},
]


def _runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ci_mutants_kills", ROOT / "ci" / "mutants.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ci_mutants_kills"] = module  # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return module


@pytest.mark.cell_independent
def test_a_survivor_is_a_failed_case_and_an_unjudged_mutant_an_error() -> None:
    records = [mutant_record(o) for o in OUTCOMES]
    assert [r.final.outcome for r in records] == [PASSED, FAILED, ERROR]
    assert all(r.cell == MUTANT_CELL for r in records)
    assert "02-b survived" in records[1].final.message
    assert "stale" in records[2].final.message and "patch failed" in records[2].final.details


@pytest.mark.cell_independent
def test_the_junit_file_round_trips_with_the_kill_properties(tmp_path: Path) -> None:
    runner = _runner()
    outcomes = [runner.Outcome(**o) for o in OUTCOMES]
    path = tmp_path / "junit" / "mutants.xml"
    runner.write_junit(path, outcomes)
    back = {r.properties["mutant"]: r for r in read_records(path)}
    assert set(back) == {"01-a", "02-b", "03-c"}
    assert back["01-a"].properties[PROP_KILLER] == "suites/x.py::test_a"
    assert back["02-b"].properties[PROP_RESULT] == "survived"
    assert back["02-b"].final.outcome == FAILED


@pytest.mark.cell_independent
def test_the_dashboard_shows_the_kill_table() -> None:
    records = [mutant_record(o) for o in OUTCOMES]
    page = render_dashboard(records, [])
    assert "Mutation score: 1 of 3 runtime mutants killed" in page
    table = render_kill_table(records, COLORS)
    survivor_row = next(row for row in table.split("<tr>") if "02-b" in row)
    assert COLORS[FAILED] in survivor_row and "survived" in survivor_row
    killed_row = next(row for row in table.split("<tr>") if "01-a" in row)
    assert COLORS[PASSED] in killed_row and "suites/x.py::test_a" in killed_row
    assert render_kill_table([], COLORS) == ""
    assert "Mutation score" not in render_dashboard([], [])


@pytest.mark.cell_independent
def test_the_runner_names_survivors_and_exits_1(monkeypatch, capsys, tmp_path: Path) -> None:
    """The end of ``main`` with the suites' runs faked: the exit code and the last line."""
    runner = _runner()
    judged = {o["mutant"]: runner.Outcome(**o) for o in OUTCOMES}
    mutants_dir = tmp_path / "mutants"
    mutants_dir.mkdir()
    for name in judged:
        (mutants_dir / f"{name}.patch").write_text(f"{name}\nCategory: x\n\ndiff --git a/x b/x\n")
    monkeypatch.setattr(runner, "snapshot", lambda root, dest: dest.mkdir(parents=True))
    monkeypatch.setattr(runner, "run_pytest", lambda *a, **k: runner.Run(0, "", 1.0))
    monkeypatch.setattr(runner, "imported_from_copy", lambda run, copy: None)
    monkeypatch.setattr(runner, "judge", lambda mutant, *a: judged[mutant.name])
    junit = tmp_path / "out" / "mutants.xml"
    code = runner.main(["--mutants-dir", str(mutants_dir), "--junit", str(junit), "--suites", "suites"])
    assert code == runner.EXIT_HOLES
    err = capsys.readouterr().err
    assert "not killed: 02-b (survived), 03-c (stale)" in err
    assert junit.is_file()


@pytest.mark.cell_independent
def test_a_weekly_job_runs_every_mutant_and_publishes_the_kill_table() -> None:
    workflow = YAML(typ="safe").load(WORKFLOW.read_text())
    job = workflow["jobs"]["mutants"]
    assert "schedule" in job["if"] and "workflow_dispatch" in job["if"]
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert any(entry.get("cron") for entry in triggers["schedule"]), "the workflow needs a schedule"
    runs = [step.get("run", "") for step in job["steps"]]
    assert "bash ci/mutants.sh" in runs, "the mutants job must run ci/mutants.sh"
    uploads = [step for step in job["steps"] if "upload-artifact" in step.get("uses", "")]
    assert uploads and "reports/mutants/index.html" in uploads[0]["with"]["path"]
    script = SCRIPT.read_text()
    assert "ci/mutants.py" in script and "--junit" in script and "report html" in script
    assert "--only" not in script, "the weekly job must run every mutant"
