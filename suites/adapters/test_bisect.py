"""``xharness bisect``: the search over fake outcome sequences (skips, uninstallable ends, a flip at
either end, one release, ends that agree, an outcome that is neither), the ``--keep`` eviction
order, the release specs (a wheel's environment is keyed by its hash), the index listing, and the
command's exit codes, output, JSON, JUnit and dashboard, with environments and runs faked: nothing
is installed here."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.cli import main
from harness.releases import bisect_run, catalog, envs, release_spec
from harness.releases.bisect import (
    AGREE,
    CHANGED,
    NEITHER,
    NOT_INSTALLED,
    NOTHING_INSTALLED,
    SINGLE,
    EnvKeeper,
    Outcome,
    bisect,
)
from harness.releases.release_spec import ReleaseSpecError
from harness.report.dashboard import render_dashboard
from harness.report.junit import read_records
from harness.scenarios.expected import FAILED, PASSED, REPRODUCED, SKIPPED

# the same in every interpreter whichever torch or torch_xla it holds: no release's own run repeats it
pytestmark = pytest.mark.release_independent

R, P = REPRODUCED, PASSED
RELEASES = ["2.5.1", "2.6.0", "2.6.1", "2.7.0", "2.8.0", "2.8.1", "2.9.0"]


def fake(outcomes: dict[str, str], calls: list[str]) -> Callable[[str], Outcome]:
    """An outcome function over a table of outcomes that notes every release it is asked."""
    def outcome(release: str) -> Outcome:
        calls.append(release)
        return Outcome(outcomes[release])
    return outcome


def run(values: list[str], releases: list[str] | None = None):
    names = releases or [f"r{i}" for i in range(len(values))]
    calls: list[str] = []
    return bisect(names, fake(dict(zip(names, values, strict=True)), calls)), calls


# ------------------------------------------------------------------------------ the search
def test_a_fix_in_the_middle_is_found_exactly_visiting_the_ends_then_halving() -> None:
    result, calls = run([R, R, R, P, P, P, P], RELEASES)
    assert result.kind == CHANGED and result.exact and result.direction == "fixed"
    assert result.first.release == "2.7.0" and result.last_good.release == "2.6.1"
    assert calls == ["2.5.1", "2.9.0", "2.7.0", "2.6.1"]  # the ends, then the medians
    assert [t.release for t in result.trials] == calls


def test_a_regression_is_named_as_one() -> None:
    result, _ = run([P, P, R, R, R])
    assert (result.kind, result.direction, result.first.release) == (CHANGED, "regressed", "r2")


@pytest.mark.parametrize("flip", [1, 6])
def test_a_flip_at_either_end_of_the_range(flip: int) -> None:
    values = [R] * flip + [P] * (len(RELEASES) - flip)
    result, calls = run(values, RELEASES)
    assert result.exact and result.first.release == RELEASES[flip]
    assert result.last_good.release == RELEASES[flip - 1]
    assert len(calls) == len(set(calls))  # no release is run twice


def test_two_releases_that_differ_need_no_search() -> None:
    result, calls = run([R, P])
    assert result.exact and result.first.release == "r1" and calls == ["r0", "r1"]


def test_an_uninstallable_release_next_to_the_change_makes_the_answer_a_bracket() -> None:
    result, calls = run([R, R, NOT_INSTALLED, P, P, P, P], RELEASES)
    assert result.kind == CHANGED and not result.exact
    assert result.last_good.release == "2.6.0" and result.first.release == "2.7.0"
    assert result.untested == ("2.6.1",) and result.suspects == ("2.6.1", "2.7.0")
    assert result.skipped == ("2.6.1",)
    assert "2.6.1" in calls  # it was tried, failed to install, and the search went round it


def test_an_uninstallable_release_away_from_the_change_leaves_the_answer_exact() -> None:
    result, calls = run([R, R, R, NOT_INSTALLED, R, P, P], RELEASES)
    assert result.exact and result.first.release == "2.8.1"
    assert result.skipped == ("2.7.0",) and calls[:3] == ["2.5.1", "2.9.0", "2.7.0"]


def test_an_uninstallable_good_end_gives_way_to_the_next_release() -> None:
    result, calls = run([NOT_INSTALLED, R, R, P, P])
    assert result.exact and result.first.release == "r3"
    assert calls[:3] == ["r0", "r1", "r4"]  # the good end moved inward before the bad end ran


def test_an_uninstallable_bad_end_gives_way_to_the_one_before() -> None:
    result, calls = run([R, R, P, P, NOT_INSTALLED])
    assert result.exact and result.first.release == "r2"
    assert calls[:3] == ["r0", "r4", "r3"]


def test_no_installable_release_is_its_own_answer() -> None:
    result, calls = run([NOT_INSTALLED] * 4)
    assert result.kind == NOTHING_INSTALLED and result.first is None and len(calls) == 4


@pytest.mark.parametrize("values", [[R], [NOT_INSTALLED, P], [R, NOT_INSTALLED, NOT_INSTALLED]])
def test_a_single_installable_release_has_nothing_to_compare_with(values: list[str]) -> None:
    result, _ = run(values)
    assert result.kind == SINGLE and result.first is None and result.last_good is not None


def test_ends_that_agree_stop_after_the_two_runs() -> None:
    result, calls = run([R, P, P, R, R])
    assert result.kind == AGREE and calls == ["r0", "r4"]
    assert result.direction == "" and result.suspects == ()


@pytest.mark.parametrize(
    ("values", "named"),
    [([FAILED, R, P], "r0"), ([R, R, SKIPPED], "r2"), ([R, R, R, FAILED, P, P, P], "r3")],
)
def test_an_outcome_that_is_neither_stops_the_search_and_names_the_release(values: list[str], named: str) -> None:
    result, calls = run(values)
    assert result.kind == NEITHER and result.first.release == named
    assert calls[-1] == named  # nothing ran after it


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_monotone_sequence_is_bisected_to_its_flip_or_a_bracket_around_it(data) -> None:
    n = data.draw(st.integers(2, 40), label="releases")
    flip = data.draw(st.integers(1, n - 1), label="flip")  # first release with the other outcome
    broken = data.draw(st.sets(st.integers(0, n - 1)), label="uninstallable")
    before, after = data.draw(st.sampled_from([(R, P), (P, R)]), label="direction")
    values = [NOT_INSTALLED if i in broken else (before if i < flip else after) for i in range(n)]
    result, calls = run(values)
    assert len(calls) == len(set(calls))
    installed = [c for c in calls if values[int(c[1:])] != NOT_INSTALLED]
    assert len(installed) <= 2 + max(n - 2, 0).bit_length()  # ~log2(n) runs, plus the skips
    visible = [i for i in range(n) if i not in broken]
    if not visible:
        assert result.kind == NOTHING_INSTALLED
    elif len(visible) == 1:
        assert result.kind == SINGLE
    elif values[visible[0]] == values[visible[-1]]:
        assert result.kind == AGREE  # the flip is hidden by uninstallable releases at an end
    else:
        assert result.kind == CHANGED
        good, first = int(result.last_good.release[1:]), int(result.first.release[1:])
        assert good < flip <= first
        assert all(i in broken for i in range(good + 1, first))
        assert result.exact == (first == good + 1 or all(i not in broken for i in range(good + 1, first)))
        assert result.direction == ("fixed" if before == R else "regressed")


# ------------------------------------------------------------------------------ --keep
def test_keep_drops_the_least_recently_used_environments_it_built_and_never_others() -> None:
    keeper = EnvKeeper(2)
    assert keeper.used("a", built=True) == []
    assert keeper.used("old", built=False) == []  # found complete: never counted, never dropped
    assert keeper.used("b", built=True) == []
    assert keeper.used("a", built=False) == []  # a used again: b is now the least recent
    assert keeper.used("c", built=True) == ["b"]
    assert keeper.used("d", built=True) == ["a"]
    assert keeper.kept == ["c", "d"]
    zero = EnvKeeper(0)
    assert zero.used("x", built=True) == ["x"] and zero.used("y", built=False) == []
    unlimited = EnvKeeper(None)
    assert [unlimited.used(k, built=True) for k in "abc"] == [[], [], []]
    with pytest.raises(ValueError):
        EnvKeeper(-1)


# ------------------------------------------------------------------------------ release specs
def _wheel(directory: Path, name: str, payload: bytes = b"wheel bytes") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_bytes(payload)
    return path


def test_a_wheel_is_keyed_by_its_hash_so_a_rebuilt_wheel_gets_a_fresh_environment(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, "torch_xla-2.9.0+git1a2b-cp311-cp311-linux_x86_64.whl")
    spec = release_spec.parse("torch_xla", str(wheel))
    assert spec.kind == release_spec.WHEEL and str(spec.version) == "2.9.0+git1a2b"
    import hashlib

    digest = hashlib.sha256(f"{wheel.name}\0{hashlib.sha256(b'wheel bytes').hexdigest()}\n".encode())
    assert spec.digest == digest.hexdigest()[:release_spec.DIGEST_CHARS]
    assert spec.env_name == envs.env_name("torch_xla", f"wheel-{spec.digest}")
    assert spec.requirements() == [str(wheel), "torch>=2.9,<=2.9.0"]  # torch_xla declares no torch
    assert release_spec.parse("torch_xla", str(wheel)) == spec  # the same bytes, the same key
    wheel.write_bytes(b"rebuilt")
    assert release_spec.parse("torch_xla", str(wheel)).env_name != spec.env_name


def test_a_directory_of_wheels_installs_them_together_with_its_own_torch(tmp_path: Path) -> None:
    xla = _wheel(tmp_path / "dist", "torch_xla-2.9.0-cp311-cp311-linux_x86_64.whl")
    torch = _wheel(tmp_path / "dist", "torch-2.9.0-cp311-cp311-linux_x86_64.whl", b"torch")
    spec = release_spec.parse("torch_xla", str(tmp_path / "dist"))
    assert spec.kind == release_spec.WHEELS_DIR and spec.files == (xla, torch)
    assert spec.requirements() == [str(xla), str(torch)]  # no torch from the index
    assert spec.label == f"2.9.0 wheels {spec.digest}"
    assert spec.digest != release_spec.parse("torch_xla", str(xla)).digest


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: str(d / "missing.whl"), "no such wheel file or directory"),
        (lambda d: str(_wheel(d, "numpy-2.0.0-py3-none-any.whl")), "holds no torch-xla wheel"),
        (lambda d: str(_wheel(d, "notes.txt")), "not a wheel file name"),
        (lambda d: (d / "empty").mkdir() or str(d / "empty"), "no wheel (*.whl)"),
        (lambda d: "two.nine", "not a release version: 'two.nine'"),
    ],
)
def test_a_spec_that_names_nothing_usable_says_why(tmp_path: Path, make, message: str) -> None:
    with pytest.raises(ReleaseSpecError, match=message.replace("(", r"\(").replace(")", r"\)").replace("*", r"\*")):
        release_spec.parse("torch_xla", make(tmp_path))


def test_an_index_release_keeps_the_environment_name_it_always_had() -> None:
    spec = release_spec.parse("torch_xla", "2.8.1")
    assert spec.env_name == envs.env_name("torch_xla", "2.8.1") and spec.label == "2.8.1"
    assert spec.requirements() == ["torch>=2.8,<=2.8.1", "torch-xla==2.8.1"]


def test_installed_is_this_interpreter_with_no_environment() -> None:
    import importlib.metadata

    spec = release_spec.parse("jax", "installed")  # the dev environment has JAX
    assert spec.kind == release_spec.INSTALLED and spec.env_name is None and spec.requirements() == []
    assert str(spec.version) == importlib.metadata.version("jax")
    env = release_spec.ensure(spec)
    assert env.python == Path(sys.executable) and not env.built


# ------------------------------------------------------------------------------ the index
def test_the_index_listing_honours_the_pip_arguments_and_leaves_pre_releases_out(tmp_path: Path, monkeypatch) -> None:
    for version in ("2.5.1", "2.6.0", "2.7.0rc1", "2.10.0"):
        _wheel(tmp_path / "links", f"torch_xla-{version}-cp311-cp311-manylinux_2_28_x86_64.whl")
    monkeypatch.setenv(envs.PIP_ARGS_VARIABLE, f"--no-index --find-links {tmp_path / 'links'}")
    assert [str(v) for v in bisect_run.index_releases("torch_xla")] == ["2.5.1", "2.6.0", "2.10.0"]
    monkeypatch.setenv(envs.PIP_ARGS_VARIABLE, "--no-index --no-such-pip-option")
    with pytest.raises(bisect_run.ReleaseListError, match="no-such-pip-option"):
        bisect_run.index_releases("torch_xla")


def test_the_supported_floor_of_jax_is_the_projects_declared_range() -> None:
    assert bisect_run.supported("jax").contains("0.10.2") and not bisect_run.supported("jax").contains("0.9.2")
    assert not bisect_run.supported("torch_xla").contains("2.4.0")


def _listed(*versions: str) -> list[release_spec.ReleaseSpec]:
    return [release_spec.parse("torch_xla", v) for v in versions]


def test_the_plan_is_the_ends_and_the_releases_between_oldest_first() -> None:
    listed = _listed("2.9.0", "2.4.0", "2.5.1", "2.7.0", "2.6.0", "2.10.0")
    assert [s.label for s in bisect_run.plan("torch_xla", "2.5.1", "2.9.0", None, listed)] == \
        ["2.5.1", "2.6.0", "2.7.0", "2.9.0"]
    assert [s.label for s in bisect_run.plan("torch_xla", None, "2.6.0", "2.4.0,2.5.1,2.6.0")] == \
        ["2.4.0", "2.5.1", "2.6.0"]  # --releases replaces the index


# ------------------------------------------------------------------------------ the command
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["no-such-scenario", "--runtime", "torch_xla"], "unknown scenario 'no-such-scenario'"),
        (["aliased-save", "--runtime", "tensorflow"], "unknown runtime 'tensorflow'"),
        (["aliased-save", "--runtime", "torch_xla", "--good", "2.9.0", "--bad", "2.9.0"], "name the same release"),
        (["aliased-save", "--runtime", "torch_xla", "--good", "2.9.0", "--bad", "2.5.1"], "is newer than --bad 2.5.1"),
        (["aliased-save", "--runtime", "torch_xla", "--good", "2.5.1", "--bad", "/nonexistent/torch_xla-2.9.0-cp311-cp311-linux_x86_64.whl"],
         "--bad: no such wheel file or directory"),
        (["aliased-save", "--runtime", "torch_xla", "--releases", " , "], "--releases: no release named"),
        (["aliased-save", "--runtime", "torch_xla", "--keep", "-1", "--releases", "2.5.1,2.9.0"], "--keep must be 0 or more"),
    ],
)
def test_usage_errors_are_exit_2(argv: list[str], message: str, capsys) -> None:
    assert main(["bisect", *argv]) == 2
    assert message in capsys.readouterr().err


@pytest.fixture
def faked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Environments and runs faked: ``outcomes`` says what each release does (``not-installed``
    makes its environment fail to build); an environment is "built" unless ``existing`` has it,
    and is a real directory, so that ``--keep`` visibly removes it."""
    root = tmp_path / "envs"
    state: dict[str, object] = {"outcomes": {}, "existing": set(), "ran": []}

    def ensure(spec, progress=None, root_=None):
        outcome = state["outcomes"][spec.text]  # type: ignore[index]
        if outcome == NOT_INSTALLED:
            raise envs.ReleaseInstallError(spec.runtime, spec.key, "pip install exited with 1")
        path = root / envs.env_name(spec.runtime, spec.key)
        path.mkdir(parents=True, exist_ok=True)
        return envs.ReleaseEnv(spec.runtime, spec.key, path, spec.text not in state["existing"], 0.1)  # type: ignore[operator]

    def run_scenario(scenario, python, table, timeout, runtime):
        release = Path(python).parent.parent.name.split("-")[1]
        state["ran"].append(release)  # type: ignore[union-attr]
        outcome = state["outcomes"][release]  # type: ignore[index]
        return catalog.ScenarioRun(runtime, release, scenario, outcome,
                                    table.judge(runtime, release, scenario, outcome), [], 0.2)

    monkeypatch.setattr(release_spec, "ensure", ensure)
    monkeypatch.setattr(catalog, "run_scenario", run_scenario)
    state["root"], state["out"] = root, tmp_path / "reports"
    return state


def _bisect(faked, outcomes: dict[str, str], *extra: str, json_out: bool = False) -> int:
    faked["outcomes"] = outcomes
    argv = ["bisect", "unhashable-spec", "--runtime", "torch_xla", "--releases", ",".join(outcomes),
            "--out", str(faked["out"]), *extra]
    return main([*argv, "--json"] if json_out else argv)


def test_a_found_fix_prints_every_release_tried_the_answer_and_the_replay(faked, capsys) -> None:
    code = _bisect(faked, dict(zip(RELEASES, [R, R, R, P, P, P, P], strict=True)))
    out = capsys.readouterr().out
    assert code == 0
    assert "fixed in torch_xla 2.7.0 (2.6.1 reproduced, 2.7.0 passed)" in out
    lines = [line.split() for line in out.splitlines() if line[:1].isdigit()]
    assert [(row[1], row[2]) for row in lines] == [("2.5.1", R), ("2.9.0", P), ("2.7.0", P), ("2.6.1", R)]
    assert "replay: xharness repro unhashable-spec --runtime torch_xla --release 2.7.0" in out
    assert "environments built: 2.5.1, 2.9.0, 2.7.0, 2.6.1" in out


def test_json_and_junit_carry_the_trials_and_the_answer_and_the_dashboard_shows_them(faked, capsys) -> None:
    faked["existing"] = {"2.5.1", "2.9.0"}
    code = _bisect(faked, dict(zip(RELEASES, [R, R, NOT_INSTALLED, P, P, P, P], strict=True)), json_out=True)
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["exit_code"] == 0
    assert report["result"] == CHANGED and not report["exact"] and report["suspects"] == ["2.6.1", "2.7.0"]
    assert report["answer"].startswith("fixed between torch_xla 2.6.0 (reproduced) and 2.7.0 (passed)")
    assert [(t["release"], t["outcome"]) for t in report["trials"]] == \
        [("2.5.1", R), ("2.9.0", P), ("2.7.0", P), ("2.6.1", NOT_INSTALLED), ("2.6.0", R)]
    assert report["envs_built"] == ["2.7.0", "2.6.0"]  # the ends existed already
    cell = bisect_run.cell_name("torch_xla", "unhashable-spec")
    records = read_records(faked["out"] / "junit" / f"{cell}.xml")
    tried = [r for r in records if r.properties.get("bisect-release")]
    assert [r.properties["bisect-release"] for r in tried] == ["2.5.1", "2.6.0", "2.6.1", "2.7.0", "2.9.0"]
    by = {r.properties["bisect-release"]: r for r in tried}
    assert by["2.6.1"].classification == "skipped" and by["2.6.1"].properties["verdict"] == NOT_INSTALLED
    assert by["2.7.0"].properties["bisect-role"] == "first changed" and by["2.7.0"].classification == "passed"
    (answer,) = [r for r in records if r.properties.get("bisect-result")]
    assert answer.properties["bisect-answer"] == report["answer"] and answer.classification == "passed"
    page = (faked["out"] / "index.html").read_text()
    table = page[page.index('id="releases"'):page.index("</table>", page.index('id="releases"'))]
    assert "<th>torch_xla 2.6.1</th>" in table and "<th>bisect</th>" in table
    assert "bisect #3: first changed" in table and "2.6.1: not-installed" in table
    assert render_dashboard(records).count('class="bisect"') >= 1


def test_ends_that_agree_are_exit_1_and_a_release_that_is_neither_is_named(faked, capsys) -> None:
    assert _bisect(faked, {"2.5.1": R, "2.7.0": P, "2.9.0": R}) == 1
    assert "no change: both ends reproduced" in capsys.readouterr().out
    assert _bisect(faked, {"2.5.1": R, "2.7.0": FAILED, "2.9.0": P}) == 1
    out = capsys.readouterr().out
    assert "torch_xla 2.7.0 gave failed, neither reproduced nor passed" in out
    assert "replay: xharness repro unhashable-spec --runtime torch_xla --release 2.7.0" in out


def test_keep_removes_the_least_recently_used_environments_it_built(faked, capsys) -> None:
    faked["existing"] = {"2.5.1"}
    outcomes = dict(zip(RELEASES, [R, R, R, P, P, P, P], strict=True))
    assert _bisect(faked, outcomes, "--keep", "1", json_out=True) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["envs_dropped"] == ["2.9.0", "2.7.0"]  # built in that order, 2.6.1 the newest
    left = sorted(p.name for p in faked["root"].iterdir() if p.is_dir())  # locks stay
    assert left == [envs.env_name("torch_xla", "2.5.1"), envs.env_name("torch_xla", "2.6.1")]


def test_a_range_where_nothing_installs_is_exit_3(tmp_path: Path, monkeypatch, capsys) -> None:
    """The real environment code, with pip offline: each release fails at once."""
    monkeypatch.setenv("XHARNESS_ENV_DIR", str(tmp_path / "envs"))
    monkeypatch.setenv("XHARNESS_PIP_ARGS", "--no-index")
    code = main(["bisect", "aliased-save", "--runtime", "torch_xla", "--releases", "0.0.1,0.0.2",
                 "--out", str(tmp_path / "reports")])
    captured = capsys.readouterr()
    assert code == 3
    assert "no release of the range could be installed (0.0.1, 0.0.2)" in captured.out
    assert "cannot install torch_xla 0.0.1: pip install torch>=0.0,<=0.0.1 torch-xla==0.0.1" in captured.err


def test_an_index_that_cannot_be_listed_is_exit_3_with_pips_words(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv(envs.PIP_ARGS_VARIABLE, "--no-such-pip-option")
    code = main(["bisect", "aliased-save", "--runtime", "torch_xla", "--good", "2.5.1", "--bad", "2.9.0",
                 "--out", str(tmp_path / "reports")])
    assert code == 3
    err = capsys.readouterr().err
    assert "cannot list the releases of torch_xla" in err and "no-such-pip-option" in err


def test_a_fresh_venvs_own_pip_lists_the_releases(tmp_path: Path, monkeypatch) -> None:
    """The pip a fresh venv brings (23.2.1 with Python 3.11.7) has no ``index versions --json``:
    the listing falls back to its text, and what the harness needs of pip is there."""
    import subprocess
    import sys

    from harness.releases import interpreters

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    python = str(venv / "bin" / "python")
    if interpreters.pip_version(python) >= interpreters.Version("23.3"):  # a newer bundled pip
        subprocess.run([python, "-m", "pip", "install", "-q", "pip==23.2.1"], check=True,
                       capture_output=True)
    assert interpreters.pip_version(python) < interpreters.Version("23.3")
    for version in ("2.5.1", "2.6.0", "2.7.0rc1", "2.10.0"):
        _wheel(tmp_path / "links", f"torch_xla-{version}-cp311-cp311-manylinux_2_28_x86_64.whl")
    monkeypatch.setenv(envs.PIP_ARGS_VARIABLE, f"--no-index --find-links {tmp_path / 'links'}")
    listed = bisect_run.index_releases("torch_xla", python=python)
    assert [str(v) for v in listed] == ["2.5.1", "2.6.0", "2.10.0"]
    assert interpreters.check_pip(python) < interpreters.Version("23.3")
