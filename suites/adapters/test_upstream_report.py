"""``xharness report upstream``: each PyTorch/XLA trigger as a standalone script that imports only
the runtime, and the report around it. In a release's environment (``ci/releases.sh``), each
scenario's script shows the bug where the expected-outcomes table says the release has it, and runs
clean where it says the release is fixed."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from harness import cli
from harness.releases.upstream_report import bisect_answer, render, standalone_script
from harness.scenarios import upstream_findings
from harness.scenarios import upstream_torch_xla as upstream
from harness.scenarios.expected import PASSED, REPRODUCED
from harness.scenarios.expected import load as load_table

pytestmark = pytest.mark.cell_independent
#: the catalog's triggers and the known findings' own (reported the same way)
ALL = upstream.REPRODUCERS + upstream_findings.FINDING_REPRODUCERS
TRIGGERS = [r for r in ALL if not standalone_script(r).leans_on_the_harness]


@pytest.mark.parametrize("rep", ALL, ids=lambda r: f"{r.scenario}:{r.variant}")
def test_each_trigger_is_a_script_of_the_runtime_alone(rep: upstream.Reproducer) -> None:
    script = standalone_script(rep)
    tree = ast.parse(script.source)
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    assert rep.body.__name__ in defined
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)
                for a in n.names} | {n.module.split(".")[0] for n in ast.walk(tree)
                                      if isinstance(n, ast.ImportFrom) and n.module}
    if script.leans_on_the_harness:  # said so in the report, never hidden
        assert rep.scenario == "double-discovery"
    else:
        assert "harness" not in imported, script.source
    # the environment is set before anything could import the runtime (PyTorch/XLA's always has
    # some: PJRT_DEVICE and the device count)
    first_def = next(i for i, n in enumerate(tree.body) if isinstance(n, ast.FunctionDef | ast.ClassDef))
    sets = [i for i, n in enumerate(tree.body) if "os.environ.setdefault" in ast.unparse(n)]
    assert max(sets, default=-1) < first_def
    if rep.runtime == "torch_xla":
        assert sets and "PJRT_DEVICE=CPU" in script.command
    assert all(f"{k}={v}" in script.command for k, v in rep.env.items())


def test_the_report_has_every_part() -> None:
    rep = upstream.find("aliased-save", "detach-add-aliasing-on")
    outcome = {"variants": [{"variant": rep.variant, "outcome": "reproduced", "signature": "stale-value",
                             "error": "StaleValue: stale value", "backend": "cpu",
                             "versions": {"torch": "2.5.1", "torch_xla": "2.5.1", "python": "3.11.7",
                                          "jax": "0.10.2"}}]}
    text = render(title="A title", story="What happens.", scenario="aliased-save", runtime="torch_xla",
                  release="2.5.1", scripts=[(rep, standalone_script(rep))], outcome=outcome,
                  rows=["<2.6: reproduced"], references=["https://github.com/pytorch/xla/issues/8482"],
                  bisect="the bisect's answer")
    for part in ("# [torch_xla 2.5.1] A title", "```python", "**Expected:**", "**Actual** on torch_xla 2.5.1: "
                 "reproduced (stale-value)", "- python: 3.11.7", "- torch: 2.5.1", "- torch_xla: 2.5.1",
                 "- device: cpu", "## Which release", "the bisect's answer", "## Releases measured",
                 "- <2.6: reproduced", "## Related", "issues/8482"):
        assert part in text, part
    # the harness' own JAX in the release's environment is no version of the runtime reported on
    assert "jax" not in text.split("## Versions and device")[1].split("##")[0]


def test_the_report_names_the_last_bisect(tmp_path: Path) -> None:
    from harness.releases.bisect_run import BisectReport, TriedRelease, cell_name, records
    from harness.report.junit import write_cell_xml

    assert bisect_answer(tmp_path, "torch_xla", "aliased-save") == ""  # none ran here
    tried = TriedRelease(order=1, release="2.5.1", spec="2.5.1", kind="index", version="2.5.1",
                         imported="2.5.1", outcome="reproduced", seconds=1.0, verdict="as-expected",
                         note="", role="last good", env=None, env_built=False, env_dropped=False, replay="r")
    report = BisectReport(runtime="torch_xla", scenario="aliased-save", range=("2.5.1", "2.6.0"),
                          result="changed", direction="fixed", exact=True, answer="fixed in torch_xla 2.6.0",
                          last_good="2.5.1", first="2.6.0", suspects=(), untested=(), trials=(tried,),
                          replay="r", wall=1.0, out=str(tmp_path), exit_code=0)
    cell = cell_name("torch_xla", "aliased-save")
    write_cell_xml(cell, records(report, {}), tmp_path / f"{cell}.xml")
    answer = bisect_answer(tmp_path, "torch_xla", "aliased-save")
    assert answer.startswith("`xharness bisect aliased-save --runtime torch_xla`: fixed in torch_xla 2.6.0")
    assert "releases searched: 2.5.1, 2.6.0" in answer and "tried: 2.5.1: reproduced" in answer


def test_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["report", "upstream", "no-such", "--runtime", "torch_xla"]) == 2
    assert cli.main(["report", "upstream", "aliased-save", "--runtime", "reference"]) == 2
    err = capsys.readouterr().err
    assert "unknown scenario 'no-such'" in err and "--runtime: 'reference' has no upstream triggers" in err
    assert "known findings: nan-payload-resharding" in err  # a finding is a name the command takes


def test_a_known_finding_is_reported_like_a_scenario() -> None:
    """A finding no scenario re-creates: its summary is the title, the invariant that found it
    and its upstream search are in the story; a scenario's report carries its findings' search."""
    from harness.releases.upstream_report import subject_of

    finding = subject_of("nan-payload-resharding", "torch_xla")
    assert finding.title.startswith("mark_sharding of bfloat16 data")
    assert "the round-trip invariant" in finding.story
    assert finding.searched and finding.searched[0].startswith("none found: searched pytorch/xla issues for")
    assert finding.references == ()  # nothing upstream to cite
    scenario = subject_of("expanded-grad-accumulation", "torch_xla")
    assert scenario.title.startswith("A second backward of x.sum()")
    assert any(s.startswith("none found: searched pytorch/xla and pytorch/pytorch issues") for s in scenario.searched)
    flushed = subject_of("subnormal-flush-sharded-view", "torch_xla")
    assert flushed.references == ("https://github.com/openxla/xla/issues/22858",)


def _scenarios() -> list[str]:
    return list(dict.fromkeys(r.scenario for r in TRIGGERS))


@pytest.mark.parametrize("scenario", _scenarios())
def test_the_scripts_show_the_bug_where_the_release_has_it(scenario: str, tmp_path: Path) -> None:
    """Every standalone script of the scenario runs clean on a release its row says is fixed; on
    one its row says carries the bug, at least one of them shows it (as the catalog judges a
    scenario by its variants together)."""
    torch_xla = pytest.importorskip("torch_xla", reason="runs in a torch_xla release's environment")
    row = load_table().lookup("torch_xla", torch_xla.__version__, scenario)
    if row is None or row.outcome not in (REPRODUCED, PASSED):
        pytest.skip(f"no row says what torch_xla {torch_xla.__version__} does with {scenario}")
    codes = {}
    for rep in (r for r in TRIGGERS if r.scenario == scenario):
        script = tmp_path / f"{rep.variant}.py"
        script.write_text(standalone_script(rep).source)
        done = subprocess.run([sys.executable, "-I", str(script)], capture_output=True, text=True,
                              timeout=600, cwd=tmp_path)
        codes[rep.variant] = done.returncode
        if row.outcome == PASSED:
            assert done.returncode == 0, f"{rep.variant}: {done.stderr[-3000:]}"
            assert "the program ran to the end" in done.stdout
    if row.outcome == REPRODUCED:
        assert any(code != 0 for code in codes.values()), f"the release carries {scenario}: {codes}"
