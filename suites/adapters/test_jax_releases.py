"""``xharness releases jax``: JAX releases in environments of their own, each checked by three
supervised cells (the catalog, the invariants against the release, the harness's suites on it).

Nothing here installs a release: the cells, the table and the JSON are checked on records built
in place, and the one run end to end uses this interpreter (its JAX) as the release's environment.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from harness.cli import main
from harness.commands import releases as commands
from harness.matrix.config import RELEASED_RUNTIMES, Matrix
from harness.matrix.progress import Progress
from harness.matrix.supervisor import RunSettings
from harness.releases import cells, envs
from harness.report.junit import read_records
from harness.report.properties import CHECK_CATALOG, CHECK_SUITES
from harness.report.records import ERROR, FAILED, PASSED, SKIPPED, Attempt, TestRecord

# the same in every interpreter whichever torch or torch_xla it holds: no release's own run repeats it
pytestmark = pytest.mark.release_independent

ROOT = Path(__file__).resolve().parents[2]


def test_a_jax_release_pins_jax_and_jaxlib_and_installs_with_the_harness_in_one_pip_command() -> None:
    assert "jax" in RELEASED_RUNTIMES
    assert envs.requirements_for("jax", "0.10.0") == ["jax==0.10.0", "jaxlib==0.10.0"]
    assert envs.env_name("jax", "0.10.0").startswith("jax-0.10.0-py")
    project = envs.project_root()
    cmd = envs.install_command("/env/bin/python", ["jax==0.10.0", "jaxlib==0.10.0"], project, ["-q"])
    # one resolver sees the pins and the project's own jax range together
    assert cmd == ["/env/bin/python", "-m", "pip", "install", "-q", "jax==0.10.0", "jaxlib==0.10.0",
                   "-e", f"{project}[test]"]


def test_the_build_names_a_missing_release_then_installs_pins_and_harness_together(tmp_path, monkeypatch) -> None:
    """The commands of a build and of a refresh (pip itself is not run: ``_run`` records them)."""
    ran: list[list[str]] = []

    def fake_run(cmd, runtime, release, what, log):
        ran.append(list(cmd))
        if cmd[1:3] == ["-m", "venv"]:
            (Path(cmd[3]) / "bin").mkdir(parents=True)
            (Path(cmd[3]) / "bin" / "python").symlink_to(sys.executable)
        return ""

    monkeypatch.setattr(envs, "_run", fake_run)
    env = envs.ensure_env("jax", "0.10.1", root=tmp_path, pip_args=[])
    assert env.built and env.stamp()["requirements"] == ["jax==0.10.1", "jaxlib==0.10.1"]
    python = str(env.python)
    project = envs.project_root()
    pins = ["jax==0.10.1", "jaxlib==0.10.1"]
    assert ran[2] == [python, "-m", "pip", "install", *pins]  # a release pip cannot find says so
    assert ran[3] == envs.install_command(python, pins, project)  # one resolver sees both
    stamp = env.stamp()
    stamp["project"] = "another checkout"
    (env.path / envs.STAMP).write_text(json.dumps(stamp))
    ran.clear()
    assert not envs.ensure_env("jax", "0.10.1", root=tmp_path, pip_args=[]).built
    assert ran[0] == envs.install_command(python, pins, project)  # a refresh keeps the pins


def test_a_jax_release_is_checked_by_the_catalog_the_invariants_and_the_suites() -> None:
    checks = cells.release_checks("jax", "0.10.2", 900.0)
    assert [(c.kind, c.cell.name, c.under_test) for c in checks] == [
        ("catalog", "jax-0.10.2", "jax"),
        ("invariants", "jax-0.10.2-invariants", "jax"),
        ("suites", "jax-0.10.2-suites", "reference"),  # the reference runtime riding on that JAX
    ]
    catalog, invariants, suites = (c.cell for c in checks)
    assert catalog.paths == (cells.CATALOG_TESTS,) and catalog.timeout == 900.0
    assert invariants.paths == ("suites/properties/test_invariants.py",)
    assert {"suites/selftest", "suites/regression", "suites/properties", "suites/models"} == set(suites.paths)
    for path in (*catalog.paths, *invariants.paths, *suites.paths):
        assert (ROOT / path).exists(), path
    env = suites.environment("reference")
    assert (env["HARNESS_RUNTIME"], env["JAX_NUM_CPU_DEVICES"], env["JAX_PLATFORMS"]) == ("reference", "8", "cpu")
    assert invariants.environment("jax")["HARNESS_RUNTIME"] == "jax"
    assert invariants.environment("jax")["JAX_NUM_CPU_DEVICES"] == "8"
    assert all(c.release == "0.10.2" for c in (catalog, invariants, suites))


def test_an_invariant_whose_known_failure_poisons_the_process_runs_in_a_cell_of_its_own(monkeypatch) -> None:
    from harness.scenarios import known_findings

    monkeypatch.setattr(known_findings, "isolated_invariants", lambda runtime, version: ["sync-aliasing"])
    found = [c.cell for c in cells.release_checks("jax", "0.10.0", 900.0) if c.kind == "invariants"]
    assert [c.name for c in found] == ["jax-0.10.0-invariants", "jax-0.10.0-invariants-sync-aliasing"]
    test = "suites/properties/test_invariants.py::test_sync_aliasing"
    assert found[0].pytest_args == (f"--deselect={test}",)
    assert found[1].paths == (test,) and found[1].pytest_args == ()


def test_a_torch_xla_release_is_checked_by_its_catalog_alone() -> None:
    (check,) = cells.release_checks("torch_xla", "2.9.0", 900.0)
    assert (check.kind, check.cell.name, check.under_test) == ("catalog", "torch_xla-2.9.0", "torch_xla")


def test_records_of_a_release_cell_say_release_runtime_check_and_how_to_rerun(tmp_path: Path) -> None:
    (suites,) = [c for c in cells.release_checks("jax", "0.10.1", 900.0) if c.kind == "suites"]
    settings = RunSettings(matrix=Matrix(path=ROOT / "ci/matrix.toml", root=ROOT, cells={}),
                           out_dir=tmp_path, runtime=suites.under_test)
    run = cells.ReleaseCellRun(suites.cell, settings, Progress(1), "/envs/jax-0.10.1/bin/python",
                                  released="jax", check="suites")
    nodeid = "suites/models/test_models.py::test_step"
    run.items[nodeid] = ("suites/models/test_models.py", 3)
    record = run.finalize_record(TestRecord(nodeid=nodeid, cell=suites.cell.name))
    props = record.properties
    assert (props["release"], props["release-runtime"], props["release-check"]) == ("0.10.1", "jax", "suites")
    assert props["repro"] == ("HARNESS_RUNTIME=reference JAX_PLATFORMS=cpu JAX_NUM_CPU_DEVICES=8 "
                              f"/envs/jax-0.10.1/bin/python -m pytest {nodeid}")


def _record(nodeid: str, outcome: str, message: str = "") -> TestRecord:
    return TestRecord(nodeid=nodeid, cell="jax-0.10.0-suites", attempts=[Attempt(outcome, 0.1, message)])


def _entry(failing: bool) -> dict:
    (suites,) = [c for c in cells.release_checks("jax", "0.10.0", 900.0) if c.kind == "suites"]
    records = [_record("suites/a.py::test_ok", PASSED), _record("suites/a.py::test_skip", SKIPPED)]
    if failing:
        records += [_record("suites/b.py::test_bad", FAILED, "AssertionError: 1 != 2\nmore"),
                    _record("suites/c.py::test_crash", ERROR, "killed by signal 11 (SIGSEGV)")]
    check = commands.check_summary(suites, records, 12.3, Path("out/junit/jax-0.10.0-suites.xml"))
    return {"release": "0.10.0", "installed": True, "env_built": True, "env_seconds": 25.0,
            "catalog_seconds": 3.0, "seconds": 40.0, "checks": [check],
            "rows": [{"scenario": "host-aliasing", "expected": "reproduced", "actual": "reproduced",
                      "verdict": "as-expected"}]}


def test_the_table_shows_each_suites_counts_and_failing_tests_and_they_decide_the_exit_code() -> None:
    green, red = _entry(failing=False), _entry(failing=True)
    check = red["checks"][0]
    assert check["counts"] == {"passed": 1, "failed": 1, "error": 1, "skipped": 1, "flaky": 0, "xfailed": 0}
    assert [f["id"] for f in check["failing"]] == ["suites/b.py::test_bad", "suites/c.py::test_crash"]
    assert check["failing"][0]["message"] == "AssertionError: 1 != 2"  # the first line
    json.dumps(red)  # what --json prints
    text = commands.render_table("jax", [red])
    lines = text.splitlines()
    assert lines[2].split() == ["0.10.0", "host-aliasing", "reproduced", "reproduced", "known-bug"]  # as expected, and a known bug
    assert "jax 0.10.0: environment built (25 s), catalog run 3 s" in text
    assert "jax 0.10.0 suites (jax-0.10.0-suites): 1 passed, 1 failed, 1 error, 1 skipped in 12 s" in text
    assert "  FAILED: suites/b.py::test_bad: AssertionError: 1 != 2" in text
    assert "  ERROR: suites/c.py::test_crash: killed by signal 11 (SIGSEGV)" in text
    assert commands.exit_code([green]) == 0
    assert commands.exit_code([green, red]) == 1  # every verdict as expected, but a suite failed


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["releases", "jax", "notaversion"], "not a release version: 'notaversion' (like 0.10.2)"),
        (["releases", "jax", "0.10.0", "--timeout", "0"], "--timeout must be a positive number"),
        (["repro", "host-aliasing", "--runtime", "jax", "--release", "0.10.x"], "not a release version: '0.10.x'"),
        (["run", "--runtime", "reference", "--release", "0.10.0", "--cells", "cpu-1"], "add --runtime torch_xla or jax"),
    ],
)
def test_usage_errors_are_exit_2(argv: list[str], message: str, capsys) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_an_unknown_runtime_is_a_usage_error(capsys) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["releases", "tensorflow", "2.0"])
    assert stopped.value.code == 2
    assert "invalid choice: 'tensorflow'" in capsys.readouterr().err


def test_a_jax_release_that_will_not_install_is_exit_3_and_its_cells_do_not_run(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("XHARNESS_ENV_DIR", str(tmp_path / "envs"))
    monkeypatch.setenv("XHARNESS_PIP_ARGS", "--no-index")  # pip fails at once
    out = tmp_path / "reports"
    assert main(["releases", "jax", "0.0.1", "--out", str(out), "--json"]) == 3
    report = json.loads(capsys.readouterr().out)
    (entry,) = report["releases"]
    assert entry["installed"] is False and entry["checks"] == []
    assert entry["error"].startswith("cannot install jax 0.0.1: pip install jax==0.0.1 jaxlib==0.0.1 exited")
    (record,) = read_records(out / "junit" / "jax-0.0.1.xml")
    assert "jax==0.0.1" in record.final.details  # pip's own words name the release
    assert sorted(p.name for p in (out / "junit").iterdir()) == ["jax-0.0.1.xml"]
    assert record.properties["verdict"] == "not-installed"


def test_a_release_run_end_to_end_judges_the_jax_catalog_and_reports_a_failing_suite(tmp_path, monkeypatch, capsys) -> None:
    """This interpreter stands in for the release's environment (its JAX is a release too): the
    catalog cell runs every jax reproducer there and the suites cell a two-test file, one red."""
    here = envs.ReleaseEnv("jax", "0.10.2", Path(sys.prefix), False, 0.0)
    monkeypatch.setattr(envs, "ensure_env", lambda runtime, release, **kw: here)
    suite = tmp_path / "test_stand_in_suite.py"
    suite.write_text(textwrap.dedent("""
        import os

        def test_holds():
            assert os.environ["HARNESS_RUNTIME"] == "reference"
            assert os.environ["JAX_NUM_CPU_DEVICES"] == "8"

        def test_breaks():
            assert 1 == 2, "the stand-in failure"
    """))
    monkeypatch.setitem(cells.RELEASE_CHECKS, "jax", (CHECK_CATALOG, CHECK_SUITES))
    monkeypatch.setattr(cells, "SUITE_PATHS", (str(suite),))
    monkeypatch.setattr(cells, "SUITE_ARGS", ())
    out = tmp_path / "reports"
    assert main(["releases", "jax", "0.10.2", "--out", str(out), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    (entry,) = report["releases"]
    rows = {row["scenario"]: row for row in entry["rows"]}
    assert rows["host-aliasing"]["verdict"] == "as-expected"
    assert rows["host-aliasing"]["actual"] == "reproduced" and rows["host-aliasing"]["release"] == "0.10.2"
    assert rows["race-on-handles"]["verdict"] == "skipped"  # no jax trigger written for it
    (check,) = entry["checks"]
    assert (check["check"], check["cell"], check["runtime"]) == ("suites", "jax-0.10.2-suites", "reference")
    assert check["counts"]["passed"] == 1 and check["counts"]["failed"] == 1
    (failure,) = check["failing"]
    assert failure["id"].endswith("test_stand_in_suite.py::test_breaks")
    assert "the stand-in failure" in failure["message"]
    assert sorted(p.name for p in (out / "junit").iterdir()) == ["jax-0.10.2-suites.xml", "jax-0.10.2.xml"]
    page = (out / "index.html").read_text()
    assert 'id="releases"' in page and 'id="release-checks"' in page
    assert "jax 0.10.2: 1 failing" in page
    summary = (out / "summary.md").read_text()
    assert "### Runtime releases" in summary and "<code>jax 0.10.2</code>" in summary


@pytest.mark.skipif(not (ROOT / ".venv/bin/xharness").exists(), reason="ci/releases.sh would build .venv first")
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["jax", "notaversion"], "not a release version: 'notaversion' (like 0.10.2)"),  # the jax form
        (["tensorflow", "1.0"], "unknown runtime 'tensorflow' (torch_xla or jax)"),
    ],
)
def test_the_release_script_takes_the_runtime_first(argv: list[str], message: str) -> None:
    import subprocess

    proc = subprocess.run(["bash", str(ROOT / "ci/releases.sh"), *argv], capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home())})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr
    header = (ROOT / "ci/releases.sh").read_text()
    assert "ci/releases.sh jax 0.10.0" in header and "ci/releases.sh 2.9.0" in header
